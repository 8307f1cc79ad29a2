"""The block-coordinate Frank-Wolfe engine: one loop, orthogonal options.

Algorithm 1 of Osokin et al. (2016) -- BCFW in the primal-only form
(Alg. 1 of Lacoste-Julien et al. 2013) -- with the papers' contributions as
options of the same loop (DESIGN.md section 2):

- ``sampling``: "uniform" | "perm" | "gap" | "max_gap"   (2016 paper Sec. 3.1)
- ``step``: "fw" | "pairwise" | "away"                    (2016 paper Sec. 3.2, App. D Alg. 3/4)
- ``step_size``: "linesearch" (Alg. 1 line 7) | "predefined" 2n/(k+2n) (BCFW paper Alg. 3)
- ``cache``: gap-based oracle cache, hit when ghat_i >= max(F g_i, nu/n g)  (2016 Sec. 3.3, Alg. 5)
- ``averaging``: None | "weighted" (eq. (14)) | "suffix" (eq. (15), doubling trick)

State per block (DESIGN.md section 1): w_i = A alpha_[i], l_i = b^T alpha_[i];
w = sum_i w_i, l = sum_i l_i; D(alpha) = -lam/2 ||w||^2 + l.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .._linalg import SparseVector, axpy, combine, dot, sqnorm
from ._kernels import dense_block_step, dense_dot, step_along
from .averaging import LazyAverage
from .base import Solver, SolveResult
from .corners import ALPHA_EPS, CornerSet
from .sampling import SAMPLINGS, BlockSampler

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)
STEPS = ("fw", "pairwise", "away")
STEP_SIZES = ("linesearch", "predefined")
BCFW_AVERAGINGS = (None, "weighted", "suffix")


class BCFWState:
    """Primal-dual state of the block-coordinate engine (lam-specific parts + corners).

    Attributes
    ----------
    lam : float
    w : ndarray (d,)
    ell : float                l = b^T alpha
    wi : ndarray (n, d) or list of SparseVector   w_i = A alpha_[i]
    li : ndarray (n,)          l_i = b^T alpha_[i]
    corners : list of CornerSet or None (with ``alpha`` when ``track_alpha``)
    k : int                    block iterations done (for 2n/(k+2n))
    """

    def __init__(self, problem, dense_blocks, track_alpha, keep_corners):
        n, d = problem.n, problem.d
        self.lam = problem.lam
        self.n, self.d = n, d
        self.w = np.zeros(d)
        self.ell = 0.0
        self.dense_blocks = dense_blocks
        self.wi = np.zeros((n, d)) if dense_blocks else [SparseVector.zeros(d) for _ in range(n)]
        self.li = np.zeros(n)
        self.track_alpha = track_alpha
        self.corners = None
        if keep_corners:
            # alpha^(0) sits on the ground truth corner psi_i(y_i) = 0, L_i(y_i) = 0
            self.corners = []
            for i in range(n):
                cs = CornerSet()
                cs.add(problem.truth_keys[i], problem.Y[i], SparseVector.zeros(d), 0.0,
                       alpha=1.0 if track_alpha else 0.0)
                self.corners.append(cs)
        self.truth = (problem.truth_keys, problem.Y)
        self.k = 0
        self.gap_estimates = None     # last block gaps (for gap sampling)
        self.oracle_gaps = np.full(n, np.inf)  # g_i at the last oracle call on i (cache rule)
        self.full_gap = np.inf        # g at the last full gap pass (cache rule)

    # ----------------------------------------------------------- lam changes
    def block(self, i):
        return self.wi[i]

    def rescale_lam(self, lam_new):
        """Keep alpha, change lam: w_i = A alpha_[i] scales by lam/lam_new (warm start)."""
        r = self.lam / lam_new
        self.w *= r
        if self.dense_blocks:
            self.wi *= r
        else:
            self.wi = [v * r for v in self.wi]
        self.lam = lam_new

    def keep_w_change_lam(self, lam_new):
        """Proposition 1 of Osokin et al. (2016): rho = lam_new/lam_old,
        alpha_i(y) <- rho alpha_i(y) for y != y_i, the rest onto y_i; then w is
        unchanged and l_i <- rho l_i."""
        rho = lam_new / self.lam
        self.li *= rho
        self.ell = float(self.li.sum())
        if self.corners is not None and self.track_alpha:
            for i, cs in enumerate(self.corners):
                for k in range(len(cs)):
                    cs.alpha[k] *= rho
                gt = self._truth_slot(i, cs)
                cs.alpha[gt] += 1.0 - sum(cs.alpha)
        self.lam = lam_new

    def _truth_slot(self, i, cs):
        """Slot of the ground-truth corner y_i in block i's set (re-added if it was dropped)."""
        keys, Y = self.truth
        return cs.add(keys[i], Y[i], SparseVector.zeros(self.d), 0.0, 0.0, self.k)

    def delta(self):
        """Delta(alpha, lam) = 1/n sum_i sum_y alpha_i(y) H_i(y; w) = l - lam ||w||^2 (eq. (11))."""
        return self.ell - self.lam * float(np.dot(self.w, self.w))

    def dual(self):
        return -0.5 * self.lam * float(np.dot(self.w, self.w)) + self.ell

    def block_w_dot(self, i, w):
        wi = self.wi[i]
        if self.dense_blocks:
            return dense_dot(wi, w)
        return dot(wi, w)

    def n_active(self):
        if self.corners is None:
            return math.nan
        if self.track_alpha:
            return float(sum(len(cs.active()) for cs in self.corners))
        return float(sum(len(cs) for cs in self.corners))




class BCFW(Solver):
    """Block-coordinate Frank-Wolfe for the SSVM dual, with every variant as an option.

    Parameters
    ----------
    step_size : {"linesearch", "predefined"}
        Closed-form line search (Alg. 1 line 7 of Osokin et al. 2016) or the
        predefined step 2n/(k+2n) (Alg. 3 of Lacoste-Julien et al. 2013).
    sampling : {"uniform", "perm", "gap", "max_gap"}
        Block choice; "gap" samples p_i proportional to the last block-gap estimate
        (Sec. 3.1), with a full gap pass every ``gap_refresh`` passes.  With gap
        sampling or the cache these gap passes are part of the algorithm: their
        oracle calls count as effective passes.  Monitoring checkpoints
        (``check_every``) never change the iterates.
    step : {"fw", "pairwise", "away"}
        Frank-Wolfe, block pairwise (BCPFW, Alg. 3 App. D) or block away-step
        (BCAFW) steps; the last two keep per-block active sets.
    cache : bool
        Gap-based oracle cache (Sec. 3.3): the cache corner argmax_{y in C_i} H_i
        is used when its gap estimate reaches max(F g_i, nu/n g).
    cache_F, cache_nu : float
        F (default 0.25) and nu (default 0.01) of the cache hit rule.
    cache_size : int
        Largest number of corners kept per block; the longest-unused corner with
        zero dual weight is evicted first.
    averaging : {None, "weighted", "suffix"}
        Report the weighted average (14) ("BCFW-wavg") or the 0.5-suffix
        average by the doubling trick (15) ("BCFW-tavg") of the iterates.
    gap_refresh : int
        Passes between the full gap passes of gap sampling.
    block_storage : {"auto", "dense", "sparse"}
        How the n block parts w_i are stored: an (n, d) array (fast for small
        d) or one sparse vector per block (CoNLL-size sparse problems).
        "auto" picks dense when n*d*8 bytes <= ``max_dense_bytes``.
    check_oracle : bool
        Validate every labelling returned by the oracle in the first pass and in
        gap passes (ValueError naming the oracle's labelling otherwise).
    """

    name = "bcfw"

    def __init__(self, step_size="linesearch", sampling="uniform", step="fw", cache=False,
                 cache_F=0.25, cache_nu=0.01, cache_size=50, averaging=None, gap_refresh=10,
                 block_storage="auto", max_dense_bytes=2 * 1024 ** 3, check_oracle=True):
        _check_choice("step_size", step_size, STEP_SIZES)
        _check_choice("sampling", sampling, SAMPLINGS)
        _check_choice("step", step, STEPS)
        _check_choice("averaging", averaging, BCFW_AVERAGINGS)
        _check_choice("block_storage", block_storage, ("auto", "dense", "sparse"))
        if not isinstance(cache, (bool, np.bool_)):
            raise ValueError(f"cache must be True or False; got {cache!r}")
        if not cache_F > 0:
            raise ValueError(f"cache_F must be > 0; got {cache_F!r}")
        if not cache_nu > 0:
            raise ValueError(f"cache_nu must be > 0; got {cache_nu!r}")
        if not (isinstance(cache_size, (int, np.integer)) and cache_size >= 2):
            raise ValueError(f"cache_size must be an integer >= 2; got {cache_size!r}")
        if not (isinstance(gap_refresh, (int, np.integer)) and gap_refresh >= 1):
            raise ValueError(f"gap_refresh must be an integer >= 1; got {gap_refresh!r}")
        self.step_size, self.sampling, self.step = step_size, sampling, step
        self.cache, self.cache_F, self.cache_nu, self.cache_size = bool(cache), cache_F, cache_nu, cache_size
        self.averaging, self.gap_refresh = averaging, gap_refresh
        self.block_storage, self.max_dense_bytes = block_storage, max_dense_bytes
        self.check_oracle = check_oracle
        self._params = dict(step_size=step_size, sampling=sampling, step=step, cache=bool(cache),
                            cache_F=cache_F, cache_nu=cache_nu, cache_size=cache_size,
                            averaging=averaging, gap_refresh=gap_refresh,
                            block_storage=block_storage, max_dense_bytes=max_dense_bytes,
                            check_oracle=check_oracle)

    @property
    def label(self):
        """A short name in the papers' style, e.g. "BCPFW-gap-cache-wavg"."""
        base = {"fw": "BCFW", "pairwise": "BCPFW", "away": "BCAFW"}[self.step]
        parts = [base]
        if self.sampling not in ("uniform",):
            parts.append(self.sampling)
        if self.cache:
            parts.append("cache")
        if self.step_size == "predefined":
            parts.append("fixed")
        if self.averaging:
            parts.append({"weighted": "wavg", "suffix": "tavg"}[self.averaging])
        return "-".join(parts)

    # ================================================================ set-up
    def _new_state(self, problem):
        dense = self.block_storage == "dense" or (
            self.block_storage == "auto" and problem.n * problem.d * 8 <= self.max_dense_bytes)
        track = self.step in ("pairwise", "away")
        return BCFWState(problem, dense, track_alpha=track, keep_corners=track or self.cache)

    def _adopt_state(self, problem, state):
        """Warm start: reuse a previous state, rescaled to the new lam (alpha kept)."""
        if state is None or not isinstance(state, BCFWState) or state.n != problem.n or state.d != problem.d:
            return self._new_state(problem)
        needs_alpha = self.step in ("pairwise", "away")
        if needs_alpha and not state.track_alpha:
            return self._new_state(problem)  # no active sets to continue from
        if state.lam != problem.lam:
            state.rescale_lam(problem.lam)
        if (self.cache or needs_alpha) and state.corners is None:
            fresh = self._new_state(problem)
            state.corners = fresh.corners
        state.track_alpha = needs_alpha
        state.k = 0
        return state

    # ============================================================= gap pass
    def gap_pass(self, problem, state, w=None, validate=True):
        """One oracle call per block at w: primal, block gaps (6), total gap (7).

        Returns (primal, block_gaps, oracle results).  With w = state.w the
        block gaps are g_i = lam <w_i, w> - l_i + H_i(y_i*; w)/n; their sum is
        P(w) - D(alpha).
        """
        w = state.w if w is None else w
        res = problem.batch_oracle(w, validate=validate)
        Hs = np.array([r[3] for r in res])
        primal = problem.primal(w, float(Hs.sum()))
        gaps = None
        if w is state.w:
            wdots = np.array([state.block_w_dot(i, w) for i in range(problem.n)])
            gaps = problem.lam * wdots - state.li + Hs / problem.n
        return primal, gaps, res

    # ================================================================ solve
    def solve(self, problem, stop, state=None, rng=None, monitor=None):
        rng = np.random.default_rng(rng)
        st = self._adopt_state(problem, state)
        n = problem.n
        sampler = BlockSampler(self.sampling, n, rng)
        avg = LazyAverage(self.averaging, st.w, st.ell) if self.averaging else None
        # gap sampling and the cache rule read block gaps and the full gap: for them a
        # full gap pass every gap_refresh passes is part of the algorithm and its oracle
        # calls count; any other checkpoint is monitoring only and changes nothing
        uses_gaps = sampler.adaptive or self.cache
        counters = dict(oracle_calls=0, cache_hits=0, oracle_time=0.0, engine_passes=0.0)

        def checkpoint(refresh):
            """A full gap pass (two with averaging); ``refresh``: the algorithm's own."""
            with monitor.monitoring():
                primal, gaps, res = self.gap_pass(problem, st, validate=self.check_oracle)
                if refresh:
                    self._absorb_gap_pass(st, sampler, gaps, res, problem)
                    counters["oracle_calls"] += problem.n
                else:
                    monitor.monitor_calls += problem.n
                gap = float(gaps.sum())
                dual = st.dual()
                w_rep = st.w
                if avg is not None:
                    w_rep = avg.wbar(st.w)
                    primal, _, _ = self.gap_pass(problem, st, w=w_rep, validate=False)
                    monitor.monitor_calls += problem.n
                    dual = -0.5 * problem.lam * float(np.dot(w_rep, w_rep)) + avg.lbar
                    gap = primal - dual
                monitor.record(w_rep, counters["oracle_calls"] / n, counters["oracle_calls"], primal, dual, gap,
                               engine_passes=counters["engine_passes"], iterations=st.k,
                               cache_hits=counters["cache_hits"], active_corners=st.n_active(),
                               oracle_time_frac=counters["oracle_time"] / max(monitor.opt_time(), 1e-12))
            return gap

        monitor.start_clock()
        stopped = None
        try:
            gap = checkpoint(refresh=uses_gaps)
            stopped = monitor.should_stop(0, gap)
            since_check = 0
            p = 0
            while stopped is None:
                p += 1
                validate = self.check_oracle and p == 1 and state is None
                t_or = self._run_pass(problem, st, sampler, avg, counters, validate)
                counters["oracle_time"] += t_or
                counters["engine_passes"] = float(p)
                since_check += 1
                refresh = uses_gaps and p % self.gap_refresh == 0
                if (refresh or since_check >= stop.check_every or p >= stop.max_passes
                        or monitor.out_of_time()):
                    since_check = 0
                    gap = checkpoint(refresh)
                    stopped = monitor.should_stop(p, gap)
        except KeyboardInterrupt:
            stopped = "interrupted"
            monitor.interrupted = True
            try:
                checkpoint(refresh=False)
            except KeyboardInterrupt:
                pass
        finally:
            monitor.close()
        return self._result(st, avg, monitor, stopped)

    def _result(self, st, avg, monitor, stopped):
        tr = monitor.trace
        if stopped == "interrupted" and monitor.best is not None:
            primal, w, gap, dual = monitor.best
        else:
            w = avg.wbar(st.w) if avg is not None else st.w.copy()
            primal, dual, gap = tr.last("primal"), tr.last("dual"), tr.last("gap")
        return SolveResult(w=w, state=st, trace=tr, stopped=stopped, gap=gap, primal=primal, dual=dual)

    def _absorb_gap_pass(self, st, sampler, gaps, res, problem):
        """Exact block gaps refresh the sampler, the cache thresholds and the caches."""
        sampler.set_all(gaps)
        st.oracle_gaps[:] = gaps
        st.full_gap = float(np.sum(gaps))
        if self.cache and st.corners is not None:
            for i, (y, psi, L, H) in enumerate(res):
                cs = st.corners[i]
                cs.add(problem.model.label_key(y), y, psi, L, 0.0, st.k)
                cs.evict(self.cache_size, protect=tuple(cs.active()))

    # ======================================================= one data pass
    def _run_pass(self, problem, st, sampler, avg, counters, validate):
        """n block iterations; returns the seconds spent inside the oracle."""
        sampler.start_pass()
        model = problem.model
        X, Y = problem.X, problem.Y
        lam, n = problem.lam, problem.n
        inv_ln = 1.0 / (lam * n)
        decode = model.loss_augmented_decode
        predefined = self.step_size == "predefined"
        fast = (self.step == "fw" and not self.cache and st.dense_blocks and not problem.approximate
                and not validate)
        t_oracle = 0.0
        clock = time.perf_counter
        u = avg.u if avg is not None else _EMPTY_V
        for _ in range(n):
            i = sampler.next()
            gfixed = 2.0 * n / (st.k + 2.0 * n) if predefined else -1.0
            if avg is not None:
                rho, inv_c = avg.begin_step()
            else:
                rho, inv_c = 0.0, 0.0
            if fast:
                # hot path: Alg. 1 lines 4-11 with the dense block kernel
                t0 = clock()
                y = decode(X[i], Y[i], st.w)
                t_oracle += clock() - t0
                psi, L = problem.corner(i, y)
                counters["oracle_calls"] += 1
                li = st.li[i]
                dl = L / n - li
                gamma, slope = dense_block_step(st.w, st.wi[i], -1.0, psi.indices, psi.values, inv_ln,
                                                _EMPTY_I, _EMPTY_V, 0.0, dl, lam, 1.0, gfixed, u, inv_c)
                st.li[i] = li + gamma * dl
                st.ell += gamma * dl
                if sampler.adaptive:
                    sampler.update(i, -slope)
            else:
                t_oracle += self._general_iteration(problem, st, sampler, counters, i, gfixed, u, inv_c,
                                                    validate, clock)
            st.k += 1
            if avg is not None:
                avg.end_step(rho, st.ell)
        if avg is not None:
            avg.renormalise()
        return t_oracle

    # ------------------------------------------------------ general case
    def _fw_corner(self, problem, st, counters, i, validate, clock):
        """The corner to move toward: from the cache on a hit, else from the oracle.

        Returns (slot or -1, y, psi, L, H, gap_i, hit, oracle seconds).
        """
        lam, n, w = problem.lam, problem.n, st.w
        wiw = st.block_w_dot(i, w)
        base = lam * wiw - st.li[i]          # g_i = base + H_i(y)/n  (eq. (6))
        cs = st.corners[i] if st.corners is not None else None
        if self.cache and cs is not None and len(cs) > 0:
            scores = cs.scores(w)
            c = int(np.argmax(scores))
            ghat = base + scores[c] / n
            threshold = max(self.cache_F * st.oracle_gaps[i], self.cache_nu / n * st.full_gap)
            if ghat >= threshold:
                counters["cache_hits"] += 1
                cs.last_used[c] = st.k
                return c, cs.labels[c], cs.psi[c], cs.loss[c], scores[c], ghat, True, 0.0
        t0 = clock()
        y = problem.model.loss_augmented_decode(problem.X[i], problem.Y[i], w)
        dt = clock() - t0
        counters["oracle_calls"] += 1
        y, psi, L, H = problem.oracle_corner(i, y, w, validate)
        g = base + H / n
        st.oracle_gaps[i] = g
        slot = -1
        if cs is not None:
            slot = cs.add(problem.model.label_key(y), y, psi, L, 0.0, st.k)
        return slot, y, psi, L, H, g, False, dt

    def _general_iteration(self, problem, st, sampler, counters, i, gfixed, u, inv_c, validate, clock):
        lam, n = problem.lam, problem.n
        inv_ln = 1.0 / (lam * n)
        slot_s, y, psi_s, L_s, H_s, g_i, hit, dt = self._fw_corner(problem, st, counters, i, validate, clock)
        cs = st.corners[i] if st.corners is not None else None
        li = st.li[i]
        step = self.step
        away = None
        if step in ("pairwise", "away"):
            act = cs.active()
            scores = np.array([cs.loss[k] - dot(cs.psi[k], st.w) for k in act])
            away = act[int(np.argmin(scores))]  # argmin_{y in S_i} H_i(y; w)
            psi_a, L_a, alpha_a = cs.psi[away], cs.loss[away], cs.alpha[away]
        if step == "away":
            # away gap: lam <w, w_a - w_i> + l_i - l_a ; take the better of FW and away (AFW)
            g_away = lam * (dot(psi_a, st.w) * inv_ln - st.block_w_dot(i, st.w)) + li - L_a / n
            if g_i >= g_away or alpha_a >= 1.0 - ALPHA_EPS:
                step = "fw"
        if step == "fw":
            a, s1, b1, s2, b2, dl, gmax = -1.0, psi_s, inv_ln, None, 0.0, L_s / n - li, 1.0
        elif step == "pairwise":
            a, s1, b1, s2, b2, dl, gmax = 0.0, psi_s, inv_ln, psi_a, -inv_ln, (L_s - L_a) / n, alpha_a
        else:  # away step: d = w_i - w_a
            a, s1, b1, s2, b2, dl = 1.0, psi_a, -inv_ln, None, 0.0, li - L_a / n
            gmax = alpha_a / (1.0 - alpha_a)
        gamma = self._apply_step(st, i, a, s1, b1, s2, b2, dl, lam, gmax, gfixed, u, inv_c)
        st.li[i] = li + gamma * dl
        st.ell += gamma * dl
        if st.track_alpha and gamma > 0.0:
            self._update_alpha(cs, step, slot_s, away, gamma)
        if cs is not None:
            if not self.cache:  # without a cache, only the active set is kept
                for k in reversed(range(len(cs))):
                    if cs.alpha[k] <= ALPHA_EPS and len(cs) > 1:
                        cs.remove(k)
            elif len(cs) > self.cache_size:
                cs.evict(self.cache_size, protect=tuple(cs.active()))
        if sampler.adaptive:
            sampler.update(i, g_i)
        return dt

    @staticmethod
    def _update_alpha(cs, step, s, a, gamma):
        if step == "fw":
            for k in range(len(cs)):
                cs.alpha[k] *= 1.0 - gamma
            cs.alpha[s] += gamma
        elif step == "pairwise":
            cs.alpha[a] -= gamma
            cs.alpha[s] += gamma
        else:
            for k in range(len(cs)):
                cs.alpha[k] *= 1.0 + gamma
            cs.alpha[a] -= gamma
        for k in range(len(cs)):
            if cs.alpha[k] < ALPHA_EPS:
                cs.alpha[k] = 0.0

    @staticmethod
    def _apply_step(st, i, a, s1, b1, s2, b2, dl, lam, gmax, gfixed, u, inv_c):
        """Move w_i and w along d = a w_i + b1 s1 + b2 s2 with the line search."""
        i1, v1 = (s1.indices, s1.values) if s1 is not None else (_EMPTY_I, _EMPTY_V)
        i2, v2 = (s2.indices, s2.values) if s2 is not None else (_EMPTY_I, _EMPTY_V)
        if st.dense_blocks:
            gamma, _ = dense_block_step(st.w, st.wi[i], a, i1, v1, b1, i2, v2, b2, dl, lam, gmax, gfixed,
                                        u, inv_c)
            return gamma
        # sparse blocks: build d explicitly (its support is that of w_i and the corners)
        d = SparseVector.zeros(st.d)
        if a != 0.0:
            d = st.wi[i] * a
        if s1 is not None:
            d = combine(1.0, d, b1, s1)
        if s2 is not None:
            d = combine(1.0, d, b2, s2)
        gamma = step_along(lam * dot(d, st.w) - dl, sqnorm(d), lam, gmax, gfixed)
        if gamma > 0.0:
            axpy(gamma, d, st.w)
            st.wi[i] = combine(1.0, st.wi[i], gamma, d)
            if u.shape[0] > 0:
                axpy(-inv_c * gamma, d, u)
        return gamma


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")


def exact_dual_from_alpha(problem, state):
    """D(alpha) recomputed from the explicit active sets (for checks):
    w = sum_i sum_y alpha_i(y) psi_i(y)/(lam n), l = sum alpha_i(y) L_i(y)/n."""
    w = np.zeros(problem.d)
    ell = 0.0
    for cs in state.corners:
        for k in range(len(cs)):
            if cs.alpha[k] > 0:
                axpy(cs.alpha[k] / (problem.lam * problem.n), cs.psi[k], w)
                ell += cs.alpha[k] * cs.loss[k] / problem.n
    return -0.5 * problem.lam * float(w @ w) + ell, w, ell

