"""Batch Frank-Wolfe on the SSVM dual (Algorithm 2 of Lacoste-Julien et al. 2013).

Every iteration calls the max oracle on all n examples (one effective pass,
through the executor), which gives at once the FW corner
w_s = 1/(lam n) sum_i psi_i(y_i*), l_s = 1/n sum_i L_i(y_i*), the duality gap
g = lam <w - w_s, w> - l + l_s and the primal P(w) of the current iterate.
"""
from __future__ import annotations

import numpy as np

from .._linalg import axpy
from .base import Solver, SolveResult

STEP_SIZES = ("linesearch", "predefined")


class FWState:
    """Dual iterate of batch FW: w = A alpha and l = b^T alpha."""

    def __init__(self, d, lam):
        self.w = np.zeros(d)
        self.ell = 0.0
        self.lam = lam

    def rescale_lam(self, lam_new):
        self.w *= self.lam / lam_new
        self.lam = lam_new

    def dual(self):
        return -0.5 * self.lam * float(self.w @ self.w) + self.ell


class FW(Solver):
    """Batch Frank-Wolfe with line search or the predefined step 2/(k+2).

    Parameters
    ----------
    step_size : {"linesearch", "predefined"}
    """

    name = "fw"

    def __init__(self, step_size="linesearch"):
        if step_size not in STEP_SIZES:
            raise ValueError(f"step_size must be one of {STEP_SIZES}; got {step_size!r}")
        self.step_size = step_size
        self._params = dict(step_size=step_size)

    @property
    def label(self):
        return "FW" if self.step_size == "linesearch" else "FW-fixed"

    def solve(self, problem, stop, state=None, rng=None, monitor=None):
        lam, n = problem.lam, problem.n
        st = state if isinstance(state, FWState) and state.w.shape == (problem.d,) else FWState(problem.d, lam)
        if st.lam != lam:
            st.rescale_lam(lam)
        monitor.start_clock()
        stopped, k = None, 0
        try:
            while True:
                # one oracle pass at w^(k): FW corner, gap and primal of w^(k)
                res = problem.batch_oracle(st.w, validate=True)
                ws = np.zeros(problem.d)
                ls = 0.0
                hinge = 0.0
                for (_, psi, L, H) in res:
                    axpy(1.0 / (lam * n), psi, ws)
                    ls += L / n
                    hinge += H
                gap = lam * float((st.w - ws) @ st.w) - st.ell + ls
                with monitor.monitoring():
                    primal = problem.primal(st.w, hinge)
                    # the gap comes free with the step's own oracle pass: record every iteration
                    monitor.record(st.w, float(k), k * n, primal, st.dual(), gap, engine_passes=k)
                stopped = monitor.should_stop(k, gap)
                if stopped is not None:
                    break
                # step (Alg. 2): gamma = g / (lam ||w - w_s||^2) clipped, or 2/(k+2)
                diff = st.w - ws
                if self.step_size == "predefined":
                    gamma = 2.0 / (k + 2.0)
                else:
                    nrm = lam * float(diff @ diff)
                    gamma = 1.0 if nrm <= 0 else min(max(gap / nrm, 0.0), 1.0)
                st.w -= gamma * diff
                st.ell += gamma * (ls - st.ell)
                k += 1
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            monitor.close()
        if stopped == "interrupted" and monitor.best is not None:
            primal, w, gap, dual = monitor.best
            return SolveResult(w=w, state=st, trace=monitor.trace, stopped=stopped, gap=gap, primal=primal, dual=dual)
        tr = monitor.trace
        return SolveResult(w=st.w.copy(), state=st, trace=tr, stopped=stopped,
                           gap=tr.last("gap"), primal=tr.last("primal"), dual=tr.last("dual"))
