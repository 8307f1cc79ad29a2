"""Solvers: the block-coordinate engine (BCFW and its variants, MP-BCFW), batch FW, SSG."""
from .base import Monitor, SolveResult, Solver, StopRule
from .bcfw import BCFW, MPBCFW, BCFWState
from .cutting_plane import CuttingPlane
from .fw import FW
from .kernel_bcfw import KernelBCFW, KernelExpansion
from .online_eg import OnlineEG
from .problem import Problem
from .ssg import SSG

SOLVER_NAMES = {"bcfw": BCFW, "mpbcfw": MPBCFW, "fw": FW, "ssg": SSG, "cutting-plane": CuttingPlane,
                "online-eg": OnlineEG, "kernel-bcfw": KernelBCFW}


def make_solver(solver: str | Solver) -> Solver:
    """A solver object from a name ("bcfw", "fw", "ssg") or a configured solver."""
    if isinstance(solver, Solver):
        solver.validate_params()  # an option may have been assigned after construction
        return solver
    if isinstance(solver, str) and solver.lower() in SOLVER_NAMES:
        return SOLVER_NAMES[solver.lower()]()
    raise ValueError(f"solver must be one of {sorted(SOLVER_NAMES)} or a solver object; got {solver!r}")


__all__ = ["BCFW", "MPBCFW", "BCFWState", "FW", "SSG", "CuttingPlane", "OnlineEG", "KernelBCFW", "KernelExpansion",
           "Solver", "StopRule", "Monitor",
           "SolveResult", "Problem", "make_solver", "SOLVER_NAMES"]
