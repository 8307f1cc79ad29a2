"""Batch Frank-Wolfe on the SSVM dual (Algorithm 2 of Lacoste-Julien et al. 2013).

Every iteration calls the max oracle on all n examples (one effective pass,
through the executor), which gives at once the FW corner
w_s = 1/(lam n) sum_i psi_i(y_i*), l_s = 1/n sum_i L_i(y_i*), the duality gap
g = lam <w - w_s, w> - l + l_s and the primal P(w) of the current iterate.
In the solve skeleton that oracle pass is the checkpoint (it is recorded every
iteration, the gap comes free with it) and a "pass" is the step it allows.
With w_S >= 0 (the model's ``nonnegative_indices``) the iterate is w = Pi(A alpha)
and the line search is exact on the piecewise-quadratic dual (see parts.projected_direction).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from .._linalg import axpy
from ._kernels import projected_line_search
from .base import Param, SolveContext, Solver, continue_or_restart

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor, StopRule
    from .problem import Problem

STEP_SIZES = ("linesearch", "predefined")


class FWState:
    """Dual iterate of batch FW: w = A alpha, l = b^T alpha, and the iteration counter k."""

    def __init__(self, problem: Problem) -> None:
        self.n, self.d = problem.n, problem.d
        self.w = np.zeros(problem.d)
        # v = A alpha, w = Pi(v) with w_S >= 0 (the same array without constraints)
        self.v = np.zeros(problem.d) if problem.constrained else self.w
        self.ell = 0.0
        self.lam = problem.lam
        self.k = 0
        self.fingerprint = problem.fingerprint

    def rescale_lam(self, lam_new: float) -> None:
        """Keep alpha, change lam (w = A alpha scales by lam/lam_new)."""
        self.w *= self.lam / lam_new
        if self.v is not self.w:
            self.v *= self.lam / lam_new
        self.lam = lam_new

    def dual(self) -> float:
        return -0.5 * self.lam * float(self.w @ self.w) + self.ell


class FW(Solver):
    """Batch Frank-Wolfe with line search or the predefined step 2/(k+2).

    Parameters
    ----------
    step_size : {"linesearch", "predefined"}
        The exact line search on the dual (BCFW paper, Algorithm 1 with line search) or
        the predefined step 2/(k+2).
    """

    name = "fw"
    PARAMS = (Param("step_size", "linesearch", "choice", STEP_SIZES,
                    help="Line search or the predefined 2/(k+2) (Alg. 2)."),)

    step_size: str

    def __init__(self, step_size: str = "linesearch") -> None:
        self._init_params(locals())

    @property
    def label(self) -> str:
        return "FW" if self.step_size == "linesearch" else "FW-fixed"

    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> _FWContext:
        st = continue_or_restart(state, FWState, problem) or FWState(problem)
        if st.lam != problem.lam:
            st.rescale_lam(problem.lam)
        return _FWContext(problem, st)

    def checkpoint_due(self, ctx: _FWContext, since_check: int, done: int, stop: StopRule, monitor: Monitor) -> bool:
        return True  # the next step needs the oracle pass anyway

    def checkpoint(self, ctx: _FWContext, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """One oracle pass at w^(k): the FW corner, the gap and the primal of w^(k)."""
        problem, st = ctx.problem, ctx.state
        lam, n = problem.lam, problem.n
        res = problem.batch_oracle(st.w, validate=True)
        ws = np.zeros(problem.d)
        ls = 0.0
        hinge = 0.0
        for (_, psi, L, H) in res:
            axpy(1.0 / (lam * n), psi, ws)
            ls += L / n
            hinge += H
        # g = <grad D, s - alpha> = lam <v - w_s, w> - l + l_s with w = Pi(v) (= v unconstrained)
        gap = lam * float((st.v - ws) @ st.w) - st.ell + ls
        ctx.corner = (ws, ls, gap)
        k = st.k - ctx.k0
        with monitor.monitoring():
            if monitoring_only:
                monitor.monitor_calls += n
            primal = problem.primal(st.w, hinge)
            monitor.record(st.w, float(k), k * n, primal, st.dual(), gap, engine_passes=k)
        return gap

    def run_pass(self, ctx: _FWContext, flag: InterruptFlag) -> None:
        """Alg. 2: gamma = g / (lam ||w - w_s||^2) clipped to [0, 1], or 2/(k+2)."""
        problem, st = ctx.problem, ctx.state
        # set by the checkpoint that precedes every pass (checkpoint_due is always True)
        ws, ls, gap = cast("tuple[npt.NDArray[np.float64], float, float]", ctx.corner)
        diff = st.v - ws
        if self.step_size == "predefined":
            gamma = 2.0 / (st.k + 2.0)
        elif problem.constrained:
            # concave piecewise-quadratic D along d = w_s - v: exact search on its pieces
            idx = np.flatnonzero(diff).astype(np.int64)
            gamma = projected_line_search(st.v, idx, -diff[idx], problem.nonneg_mask, problem.lam,
                                          ls - st.ell, 1.0)
        else:
            nrm = problem.lam * float(diff @ diff)
            gamma = 1.0 if nrm <= 0 else min(max(gap / nrm, 0.0), 1.0)
        st.v -= gamma * diff
        if st.v is not st.w:
            problem.project(st.v, out=st.w)
        st.ell += gamma * (ls - st.ell)
        st.k += 1
        ctx.corner = None


class _FWContext(SolveContext):
    """A batch FW solve: the state, the pass count it started from, and the corner that the
    checkpoint before each step found (every step follows one: the gap pass is the oracle call)."""

    def __init__(self, problem: Problem, state: FWState) -> None:
        super().__init__(problem, state)
        self.state: FWState = state
        self.k0 = state.k
        self.corner: tuple[npt.NDArray[np.float64], float, float] | None = None
