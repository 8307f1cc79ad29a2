"""Stochastic subgradient (Pegasos-style) for the SSVM primal (1).

Step k (k = 0, 1, ...): pick i, y* = argmax_y H_i(y; w), and
    w <- (1 - gamma) w + gamma psi_i(y*) / lam,   gamma = 1/(k+1)
which is the subgradient step with step size 1/(lam (k+1)) on
lam/2 ||w||^2 + H~_i(w) (the "SSG" baseline of Lacoste-Julien et al. 2013).
SSG has no dual: the trace records the primal only and ``tol`` does not apply.
"""
from __future__ import annotations

import math

import numpy as np

from .._linalg import axpy
from .averaging import LazyAverage
from .base import Solver, SolveResult

SSG_AVERAGINGS = (None, "uniform", "weighted", "suffix")


class SSGState:
    def __init__(self, d, lam):
        self.w = np.zeros(d)
        self.lam = lam
        self.k = 0

    def rescale_lam(self, lam_new):
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
    """

    name = "ssg"
    has_dual = False

    def __init__(self, averaging=None, sampling="uniform"):
        if averaging not in SSG_AVERAGINGS:
            raise ValueError(f"averaging must be one of {SSG_AVERAGINGS}; got {averaging!r}")
        if sampling not in ("uniform", "perm"):
            raise ValueError(f"sampling must be 'uniform' or 'perm'; got {sampling!r}")
        self.averaging, self.sampling = averaging, sampling
        self._params = dict(averaging=averaging, sampling=sampling)

    @property
    def label(self):
        return "SSG" + ({None: "", "uniform": "-avg", "weighted": "-wavg", "suffix": "-tavg"}[self.averaging])

    def solve(self, problem, stop, state=None, rng=None, monitor=None):
        rng = np.random.default_rng(rng)
        lam, n = problem.lam, problem.n
        st = state if isinstance(state, SSGState) and state.w.shape == (problem.d,) else SSGState(problem.d, lam)
        st.lam = lam
        avg = LazyAverage(self.averaging, st.w, 0.0) if self.averaging else None
        model, X, Y = problem.model, problem.X, problem.Y
        calls = 0

        def checkpoint(p):
            with monitor.monitoring():
                w_rep = avg.wbar(st.w) if avg is not None else st.w
                res = problem.batch_oracle(w_rep, validate=True)
                monitor.monitor_calls += n
                primal = problem.primal(w_rep, sum(r[3] for r in res))
                monitor.record(w_rep, calls / n, calls, primal, math.nan, math.nan, engine_passes=p)

        monitor.start_clock()
        stopped = None
        try:
            checkpoint(0)
            p = 0
            while stopped is None:
                p += 1
                order = rng.permutation(n) if self.sampling == "perm" else rng.integers(0, n, n)
                for i in order:
                    y = model.loss_augmented_decode(X[i], Y[i], st.w)
                    psi, _ = problem.corner(i, y)
                    calls += 1
                    gamma = 1.0 / (st.k + 1.0)
                    if avg is not None:
                        rho, inv_c = avg.begin_step()
                        # delta = -gamma w + gamma/lam psi  ->  u -= delta / c
                        avg.u += (inv_c * gamma) * st.w
                        axpy(-inv_c * gamma / lam, psi, avg.u)
                    st.w *= 1.0 - gamma
                    axpy(gamma / lam, psi, st.w)
                    st.k += 1
                    if avg is not None:
                        avg.end_step(rho, 0.0)
                if avg is not None:
                    avg.renormalise()
                if p % stop.check_every == 0 or p >= stop.max_passes or monitor.out_of_time():
                    checkpoint(p)
                    stopped = "max_passes" if p >= stop.max_passes - 1e-9 else (
                        "time_budget" if monitor.out_of_time() else None)
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            monitor.close()
        tr = monitor.trace
        if stopped == "interrupted" and monitor.best is not None:
            w = monitor.best[1]
            primal = monitor.best[0]
        else:
            w = avg.wbar(st.w) if avg is not None else st.w.copy()
            primal = tr.last("primal")
        return SolveResult(w=w, state=st, trace=tr, stopped=stopped, primal=primal)
