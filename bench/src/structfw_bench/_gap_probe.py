"""What Figures 1 and 2 of Osokin et al. (2016) read from the engine's state at checkpoints.

The engine keeps the block-gap estimates of gap sampling in its sampler
(``state.sampler.estimates``: g_i(alpha^(k_i)) at the last visit of block i, Sec. 3.1), and
the cache rule's inputs in the state (``state.oracle_gaps``: g_i at the last oracle call on
i; ``state.full_gap``: g at the last full gap pass, Sec. 3.3).  `ProbedBCFW` is the engine
unchanged -- the same passes, the same checkpoints, the same gap passes -- that, at each
checkpoint, also copies out

- the estimated gap, sum_i of the sampler's estimates, before and after the checkpoint (a
  refresh replaces the estimates by the true block gaps), next to the true gap (Fig. 1b);
- the true block gaps g_i of the checkpoint's gap pass, and chi of them (Theorem 2);
- optionally the norms ||psi_i(y_i*)|| of the gap pass's oracle labellings, whose running
  maximum approximates R_i (Sec. 3.1: "We approximate R_i by picking the largest value
  ||psi_i(y)|| corresponding to a labeling y observed within the run"), for
  C_f^(i) <= 4 R_i^2 / (lam n^2) and the factor chi(g)^3 / chi(C) of Fig. 1c;
- with the cache, the share of blocks whose hit threshold max(F g_i, nu/n g) is set by the
  local term F g_i (Fig. 2a's regimes).

Nothing here changes an iterate: the subclass overrides ``checkpoint`` and ``gap_pass`` only
to read what they compute.
"""
from __future__ import annotations

import math
import time

import numpy as np

from structfw.solvers import BCFW


def chi(x):
    """The non-uniformity measure of Theorem 2 (Osokin et al. 2016, Sec. 3.1).

    chi(x) = sqrt(1 + n^2 Var[p]) with p = x / ||x||_1, for x in R^n_+ (Var over the n
    entries of p).  It is 1 for a uniform x and sqrt(n) for x with a single non-zero entry.

    Parameters
    ----------
    x : array_like, shape (n,)
        Non-negative entries (negative rounding noise is clipped at 0).

    Returns
    -------
    float
        NaN when x sums to 0.
    """
    x = np.maximum(np.asarray(x, float), 0.0)
    total = float(x.sum())
    if not total > 0:
        return math.nan
    p = x / total
    return math.sqrt(1.0 + x.size ** 2 * float(np.var(p)))


class ProbedBCFW(BCFW):
    """`BCFW` that records, at every checkpoint, the gap estimates and true block gaps.

    Parameters
    ----------
    probe_norms : bool
        Also ask the checkpoints' gap passes for the oracle corners (one Python oracle pass
        instead of the compiled hinge pass: monitoring time only) and keep the running
        maximum of ||psi_i(y_i*)|| per block, for chi(C) of Fig. 1c.
    **options
        The engine options (`structfw.solvers.plan.ENGINE_PARAMS`).

    Attributes
    ----------
    records : list of dict
        One per checkpoint, in order: ``passes`` (effective: oracle calls / n),
        ``engine_passes``, ``gap`` (true), ``est_before`` / ``est_after`` (sum of the
        sampler's estimates before and after the checkpoint; NaN for uniform sampling, whose
        sampler keeps none), ``refreshed`` (the checkpoint was the algorithm's gap pass),
        ``chi_gap``, ``chi_C``, ``chi_factor`` = chi(g)^3 / chi(C), and with the cache
        ``local_share`` and ``cache_hits``.
    """

    def __init__(self, probe_norms=False, **options):
        super().__init__(**options)
        self.probe_norms = bool(probe_norms)
        self.records = []

    def gap_pass(self, problem, state, w=None, validate=True, corners=False):
        own = w is None or w is state.w
        want = corners or (own and self.probe_norms)
        primal, gaps, res = super().gap_pass(problem, state, w=w, validate=validate, corners=want)
        if own:
            self._probe_gaps = None if gaps is None else np.array(gaps, float)
            if res is not None and self.probe_norms:
                self._probe_norms = np.array([math.sqrt(float(np.dot(r[1].values, r[1].values))) for r in res])
        return primal, gaps, (res if corners else None)

    def checkpoint(self, ctx, monitor, initial, monitoring_only=False):
        st = ctx.st
        sampler = st.sampler
        adaptive = sampler is not None and sampler.adaptive
        est_before = float(np.sum(sampler.estimates)) if adaptive else math.nan
        calls0 = ctx.counters["oracle_calls"]
        self._probe_gaps, self._probe_norms = None, None
        t0 = time.perf_counter()
        gap = super().checkpoint(ctx, monitor, initial, monitoring_only)
        g = self._probe_gaps
        rec = dict(passes=float(monitor.trace.last("passes")), engine_passes=int(ctx.passes_done),
                   gap=float(np.sum(g)) if g is not None else float(gap),
                   est_before=est_before,
                   est_after=float(np.sum(sampler.estimates)) if adaptive else math.nan,
                   refreshed=bool(ctx.counters["oracle_calls"] > calls0),
                   chi_gap=chi(g) if g is not None else math.nan,
                   probe_s=time.perf_counter() - t0)
        if self._probe_norms is not None:
            R = getattr(self, "_probe_R", None)
            self._probe_R = self._probe_norms if R is None else np.maximum(R, self._probe_norms)
            # C_f^(i) <= 4 R_i^2 / (lam n^2) (Lacoste-Julien et al. 2013, App. A); the constant
            # factor does not change chi
            rec["chi_C"] = chi(self._probe_R ** 2)
            rec["chi_factor"] = rec["chi_gap"] ** 3 / rec["chi_C"] if rec["chi_C"] > 0 else math.nan
        plan = ctx.plan
        if plan.cache:
            og = st.oracle_gaps
            seen = np.isfinite(og)
            thr_global = plan.cache_nu / ctx.problem.n * st.full_gap
            rec["local_share"] = (float(np.mean(plan.cache_F * og[seen] >= thr_global)) if seen.any()
                                  and math.isfinite(thr_global) else math.nan)
            rec["cache_hits"] = float(ctx.counters["cache_hits"])
            rec["oracle_calls"] = float(ctx.counters["oracle_calls"])
        self.records.append(rec)
        return gap


def probed_fit(model, X, Y, lam, options, passes, seed, check_every=1, probe_norms=False, tol=None):
    """Fit `ProbedBCFW(**options)` for ``passes`` engine passes; returns a dict with the trace
    columns (``columns``), the probe's ``records``, ``wall_s`` and the final state."""
    from structfw.solvers import Monitor, Problem, StopRule

    solver = ProbedBCFW(probe_norms=probe_norms, **options)
    problem = Problem(model, X, Y, lam)
    stop = StopRule(max_passes=passes, tol=tol, check_every=check_every)
    monitor = Monitor(problem, stop, {"solver": solver.label})
    t0 = time.perf_counter()
    res = solver.solve(problem, stop, rng=seed, monitor=monitor)
    wall = time.perf_counter() - t0
    tr = res.trace
    cols = {c: [_f(v) for v in tr[c]] for c in tr.columns}
    return dict(seed=seed, label=solver.label, wall_s=wall, columns=cols, records=solver.records,
                state=res.state, n=problem.n)


def _f(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
