"""Stochastic subgradient (Pegasos-style) for the SSVM primal (1).

Step k (k = 0, 1, ...): pick i, y* = argmax_y H_i(y; w), and
    w <- (1 - gamma) w + gamma psi_i(y*) / lam,   gamma = 1/(k+1)
which is the subgradient step with step size 1/(lam (k+1)) on
lam/2 ||w||^2 + H~_i(w) (the "SSG" baseline of Lacoste-Julien et al. 2013).
SSG has no dual: the trace records the primal only and ``tol`` does not apply.
With w_S >= 0 (the model's ``nonnegative_indices``) every step is projected.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .._linalg import axpy
from .averaging import LazyAverage
from .base import Param, SolveContext, Solver, continue_or_restart

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor
    from .problem import Problem

SSG_AVERAGINGS = (None, "uniform", "weighted", "suffix")


class SSGState:
    """Primal iterate, step counter, running average and random generator of SSG."""

    def __init__(self, problem: Problem, rng: int | np.random.Generator | None) -> None:
        self.n, self.d = problem.n, problem.d
        self.w = np.zeros(problem.d)
        self.lam = problem.lam
        self.k = 0
        self.rng = np.random.default_rng(rng)
        self.avg: LazyAverage | None = None
        self.fingerprint = problem.fingerprint

    def rescale_lam(self, lam_new: float) -> None:
        self.lam = lam_new  # a primal iterate: nothing to rescale


class SSG(Solver):
    """Stochastic subgradient with the step 1/(lam (k+1)) and optional averaging.

    Parameters
    ----------
    averaging : {None, "uniform", "weighted", "suffix"}
        None: last iterate ("SSG"); "uniform": running average ("SSG-avg");
        "weighted": 2/(k+2) weights ("SSG-wavg", eq. (14));
        "suffix": doubling trick ("SSG-tavg", eq. (15)).
    sampling : {"uniform", "perm"}
        Which example each step uses: drawn uniformly at random, or a fresh random
        permutation per pass.
    """

    name = "ssg"
    has_dual = False
    PARAMS = (
        Param("averaging", None, "choice", SSG_AVERAGINGS, help="Averaging of the iterates."),
        Param("sampling", "uniform", "choice", ("uniform", "perm"), help="Example sampling."),
    )

    averaging: str | None
    sampling: str

    def __init__(self, averaging: str | None = None, sampling: str = "uniform") -> None:
        self._init_params(locals())

    @property
    def label(self) -> str:
        return "SSG" + ({None: "", "uniform": "-avg", "weighted": "-wavg", "suffix": "-tavg"}[self.averaging])

    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> _SSGContext:
        st = continue_or_restart(state, SSGState, problem) or SSGState(problem, rng)
        st.lam = problem.lam
        if (st.avg.kind if st.avg is not None else None) != self.averaging:
            st.avg = LazyAverage(self.averaging, st.w, 0.0) if self.averaging else None
        return _SSGContext(problem, st)

    def checkpoint(self, ctx: _SSGContext, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        problem = ctx.problem
        n = problem.n
        with monitor.monitoring():
            w_rep = self.result_w(ctx)
            res = problem.batch_oracle(w_rep, validate=True)
            monitor.monitor_calls += n
            primal = problem.primal(w_rep, sum(r[3] for r in res))
            monitor.record(w_rep, ctx.calls / n, ctx.calls, primal, math.nan, math.nan,
                           engine_passes=ctx.passes)
        return math.nan

    def result_w(self, ctx: _SSGContext) -> npt.NDArray[np.float64]:
        st = ctx.state
        return st.avg.wbar(st.w) if st.avg is not None else st.w.copy()

    def run_pass(self, ctx: _SSGContext, flag: InterruptFlag) -> None:
        problem, st = ctx.problem, ctx.state
        lam, n, avg = problem.lam, problem.n, st.avg
        order = st.rng.permutation(n) if self.sampling == "perm" else st.rng.integers(0, n, n)
        for i in order:
            if flag.requested:
                break
            psi, _ = problem.corner(i, problem.max_oracle(i, st.w))
            ctx.calls += 1
            gamma = 1.0 / (st.k + 1.0)
            if avg is not None:
                rho, inv_c = avg.begin_step()
            if problem.constrained:
                # projected subgradient step: w <- Pi((1 - gamma) w + gamma psi / lam)
                w_old = st.w.copy()
                st.w *= 1.0 - gamma
                axpy(gamma / lam, psi, st.w)
                problem.project(st.w, out=st.w)
                if avg is not None:
                    avg.u -= inv_c * (st.w - w_old)
            else:
                if avg is not None:
                    # delta = -gamma w + gamma/lam psi  ->  u -= delta / c
                    avg.u += (inv_c * gamma) * st.w
                    axpy(-inv_c * gamma / lam, psi, avg.u)
                st.w *= 1.0 - gamma
                axpy(gamma / lam, psi, st.w)
            st.k += 1
            if avg is not None:
                avg.end_step(rho, 0.0)
        else:
            ctx.passes += 1
        if avg is not None:
            avg.renormalise()


class _SSGContext(SolveContext):
    """An SSG solve: its state and the oracle calls and whole passes made by this solve."""

    def __init__(self, problem: Problem, state: SSGState) -> None:
        super().__init__(problem, state)
        self.state: SSGState = state
        self.calls = 0
        self.passes = 0
