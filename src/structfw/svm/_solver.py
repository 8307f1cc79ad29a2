"""Frank-Wolfe solvers for the L2-SVM dual on the unit simplex (Frandi et al. 2015).

Problem (5) of the paper::

    min_alpha f(alpha) = 1/2 alpha^T Kt alpha   s.t.  sum(alpha) = 1, alpha >= 0,

with the modified (core-vector-machine) kernel
``Kt_ij = y_i y_j (k(x_i, x_j) + 1) + delta_ij / C``.
The gradient g = Kt alpha is kept up to date from kernel columns (one column of Kt per
step, served by a bounded LRU cache).  Because ``alpha^T g = 2 f`` the duality gap (3)
is ``gap = 2 f - min_i g_i`` (the paper's (9) is the same quantity written for the
maximisation form).

Methods (integers in the numba core), one step function each:

0 ``fw``      `_fw_step`, Algorithm 1, FW vertex ``e_i``, i = argmin g, exact
              line search;
1 ``mfw``     `_away_vertex` / `_away_step`, modified FW: away direction
              ``alpha - e_v`` (v = argmax of g over the support) when its slope
              ``2f - g_v`` beats the FW slope ``g_i - 2f``; exact line search clipped at
              the drop step ``alpha_v / (1 - alpha_v)``;
2 ``swap``    `_swap_vertex` / `_swap_step`, pairwise direction
              ``e_i - e_v``, chosen greedily against the FW step by the objective
              decrease each achieves with its exact line search;
3 ``partan``  `_partan_step`, Algorithm 2: FW step (7) with the closed form
              (11)-(12), then the PARTAN step (8) along ``alpha~ - alpha^(k-1)`` with
              the closed forms (13)-(15).  Our ``W = alpha^(k)T Kt alpha^(k-1)`` is minus
              the paper's W (its (14) carries the sign of a maximisation); the step mu
              is clipped to the interval that keeps ``alpha^(k+1)`` in the simplex.

Randomised search (10): the vertex is the argmin over a random sample S (`_draw_sample`,
a splitmix64 stream a test can reproduce), either on the full gradient kept as above
(``gradient="full"``) or on the paper's sample-only gradient (``gradient="sample"``,
section "sample-only gradient" below: gradient entries on S from kernel rows against the
active set, `_iterate_s`), with the paper's stopping safeguard and an optional exact-gap
check (`_fw_vertex`, `_fw_vertex_s`).

The numba core works on two bundles (numba structrefs): `ColumnCache`
(training matrix, kernel parameters and the LRU cache of columns of Kt) and
`Iterate` (alpha, gradient, the PARTAN memory and the scalar state); the
method and the stopping test are plain scalar arguments; the sample-only gradient adds a
third, `ActiveSet`.

All hot loops are compiled with numba (``cache=True``); the Python driver runs them in
chunks of at most ``trace_every`` iterations, records the trace between chunks, and
polls the deferred Ctrl-C flag of `structfw._interrupt` there, so an interrupt
ends the run at a consistent iterate (never inside compiled code).
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
from numba import njit, types
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from numba.experimental import structref

from .. import _progress
from .._interrupt import deferred_sigint, interrupt_requested
from ._kernels import kernel_column, kernel_from_dots

METHODS = {"fw": 0, "mfw": 1, "swap": 2, "partan": 3}

# int state layout (Iterate.ist); _XGAPIT: the iteration at which fs[_XGAP] is the exact gap
_IT, _HASPREV, _STEPTYPE, _LASTI, _LASTV, _XGAPIT = range(6)
# float state layout (Iterate.fs)
_F, _FP, _W, _GAP, _LAM, _MU, _XGAP = range(7)
# counters layout (ColumnCache.counters): the LRU clock and hit/miss counts; kernel
# evaluations k(x_j, x_l) in all and those of exact-gap computations (full checks and the
# reported gap of the sample-only gradient); the number of full checks, the kernel
# evaluations of the last one and the count of all evaluations right after it
(_CLOCK, _HITS, _MISSES, _PREFETCHED, _KEVALS, _KCHECK, _NCHECKS, _LASTCHECK,
 _ATCHECK) = range(9)
# active-set state layout (ActiveSet.ist): its size, iterations since the last compaction
_NA, _SINCE_COMPACT = range(2)
# statuses returned by _iterate
RAN, CONVERGED, NONFINITE = 0, 1, 2

#: Longest run of compiled iterations between two polls of the Ctrl-C flag.
POLL_EVERY = 1000

_CACHE_FIELDS = ("X", "XT", "sqn", "y", "kind", "gamma", "coef0", "degree", "invC", "block",
                 "cols", "slot_of", "idx_of", "last_used", "counters")
_ITERATE_FIELDS = ("alpha", "alpha_p", "g", "g_p", "diag", "fs", "ist", "perm", "rng")
_ACTIVE_FIELDS = ("idx", "pos", "XA", "sqnA", "yA", "w", "ist")


# The two bundles are numba structrefs rather than tuples: a structref crosses the
# Python -> numba boundary as one pointer (about 1 us per call, whatever its number of
# fields), while a heterogeneous tuple of the same arrays costs about 3 us more per
# call to type-check, i.e. +0.3 us per iteration at the default trace_every = 10.
@structref.register
class _ColumnCacheType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class ColumnCache(structref.StructRefProxy):
    """The training matrix, kernel parameters and the LRU cache of columns of Kt.

    Fields: ``X`` (m, d) (or the Gram / QP matrix), ``XT`` its transpose view,
    ``sqn`` squared row norms, ``y`` labels +-1, ``kind``, ``gamma``, ``coef0``,
    ``degree``, ``invC`` (1/C), ``block`` (prefetch width), ``cols`` the cached
    columns (``cols[s]`` is column ``idx_of[s]`` of Kt, ``slot_of[i]`` the slot of
    column i or -1), ``last_used`` LRU stamps and ``counters`` (clock, hits, misses,
    prefetched).
    """

    def __new__(cls, **fields):
        return structref.StructRefProxy.__new__(cls, *(fields[k] for k in _CACHE_FIELDS))


@structref.register
class _IterateType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Iterate(structref.StructRefProxy):
    """The iterate: alpha and g = Kt alpha, their previous values (PARTAN), the
    diagonal of Kt, the float / int scalar state (layouts ``_F..`` and ``_IT..``), the
    sampler's permutation buffer and its generator state ``rng`` (one uint64, see
    `_rand_below`).  With the sample-only gradient, g and g_p are valid on the active
    set only."""

    def __new__(cls, **fields):
        return structref.StructRefProxy.__new__(cls, *(fields[k] for k in _ITERATE_FIELDS))


@structref.register
class _ActiveSetType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class ActiveSet(structref.StructRefProxy):
    """The active set A of the sample-only gradient (``gradient="sample"``): every index
    with alpha_j > 0 or (PARTAN) alpha^(k-1)_j > 0, and possibly a few that left the
    support since the last compaction.

    Fields: ``idx[:n]`` the indices in order of entry, ``pos[j]`` the position of j or -1,
    ``XA`` their rows of the training matrix (contiguous, for the BLAS products of the
    sample's rows against A; no columns for a Gram / raw matrix), ``sqnA`` / ``yA``
    their squared norms and labels, ``w`` a weight buffer and ``ist`` (size, iterations
    since the last compaction).  XA, sqnA, yA and w grow by doubling.
    """

    def __new__(cls, **fields):
        return structref.StructRefProxy.__new__(cls, *(fields[k] for k in _ACTIVE_FIELDS))


structref.define_proxy(ColumnCache, _ColumnCacheType, list(_CACHE_FIELDS))
structref.define_proxy(Iterate, _IterateType, list(_ITERATE_FIELDS))
structref.define_proxy(ActiveSet, _ActiveSetType, list(_ACTIVE_FIELDS))


# Built in compiled code because numba does not cache a structref constructor called from
# Python: it recompiled in every process (~1-3 s of each first fit, warm cache or not).
@njit(cache=True)
def _new_column_cache(X, XT, sqn, y, kind, gamma, coef0, degree, invC, block, cols, slot_of, idx_of,
                      last_used, counters):
    return ColumnCache(X, XT, sqn, y, kind, gamma, coef0, degree, invC, block, cols, slot_of, idx_of,
                       last_used, counters)


@njit(cache=True)
def _new_iterate(alpha, alpha_p, g, g_p, diag, fs, ist, perm, rng):
    return Iterate(alpha, alpha_p, g, g_p, diag, fs, ist, perm, rng)


@njit(cache=True)
def _new_active_set(idx, pos, XA, sqnA, yA, w, ist):
    return ActiveSet(idx, pos, XA, sqnA, yA, w, ist)


# ------------------------------------------------------------------ kernel-column cache
@njit(cache=True)
def _store(slot, i, col, cc, clock):
    """Write column i of Kt (from the kernel column ``col``) into ``slot``."""
    m = col.shape[0]
    cache = cc.cols
    if cc.kind == 4:
        for j in range(m):
            cache[slot, j] = col[j]
    else:
        yi = cc.y[i]
        for j in range(m):
            cache[slot, j] = yi * cc.y[j] * (col[j] + 1.0)
        cache[slot, i] += cc.invC
    cc.idx_of[slot] = i
    cc.slot_of[i] = slot
    cc.last_used[slot] = clock


@njit(cache=True)
def _get_col(i, cc):
    """Slot of column i of Kt in the LRU cache (computing it on a miss)."""
    ctr = cc.counters
    ctr[_CLOCK] += 1
    s = cc.slot_of[i]
    if s >= 0:
        cc.last_used[s] = ctr[_CLOCK]
        ctr[_HITS] += 1
        return s
    ctr[_MISSES] += 1
    idx_of, last_used = cc.idx_of, cc.last_used
    best = 0
    bestt = last_used[0]
    for t in range(idx_of.shape[0]):
        if idx_of[t] < 0:
            best = t
            break
        if last_used[t] < bestt:
            best = t
            bestt = last_used[t]
    if idx_of[best] >= 0:
        cc.slot_of[idx_of[best]] = -1
    col = kernel_column(cc.X, cc.sqn, i, cc.kind, cc.gamma, cc.coef0, cc.degree)
    ctr[_KEVALS] += col.shape[0]
    _store(best, i, col, cc, ctr[_CLOCK])
    return best


@njit(cache=True)
def _lru_slot(idx_of, last_used, protect_clock):
    """Free slot, else least recently used one not stamped at/after protect_clock."""
    best = -1
    bestt = np.iinfo(np.int64).max
    for t in range(idx_of.shape[0]):
        if idx_of[t] < 0:
            return t
        if last_used[t] < bestt and last_used[t] < protect_clock:
            best = t
            bestt = last_used[t]
    return best


@njit(cache=True)
def _prefetch_candidates(i, g, nb, slot_of):
    """i, then the (at most nb-1) uncached indices of smallest gradient, in order."""
    m = g.shape[0]
    cand = np.empty(nb, np.int64)
    vals = np.empty(nb)
    cand[0] = i
    vals[0] = -np.inf
    k = 1
    for j in range(m):
        if slot_of[j] >= 0 or j == i:
            continue
        v = g[j]
        if k < nb:
            p = k
            k += 1
        elif v < vals[k - 1]:
            p = k - 1
        else:
            continue
        while p > 1 and vals[p - 1] > v:
            cand[p] = cand[p - 1]
            vals[p] = vals[p - 1]
            p -= 1
        cand[p] = j
        vals[p] = v
    return cand[:k]


@njit(cache=True)
def _prefetch(i, g, cc):
    """On a miss of column i, compute it together with the columns of the block-1
    uncached indices of smallest gradient (the likeliest next FW vertices) in one
    matrix-matrix product (BLAS-3 instead of block memory-bound matrix-vector
    products).  Changes only what is cached, never the iterates."""
    m = g.shape[0]
    nb = max(1, min(cc.block, cc.cols.shape[0] - 2, m))
    cand = _prefetch_candidates(i, g, nb, cc.slot_of)
    k = cand.shape[0]
    X = cc.X
    d = X.shape[1]
    Xb = np.empty((k, d), X.dtype)
    # element by element: a row slice assignment (Xb[r] = X[c]) links in numba's
    # shape-mismatch error, whose message formatting cost ~3 s of every first compile
    for r in range(k):
        c = cand[r]
        for t in range(d):
            Xb[r, t] = X[c, t]
    D = np.dot(Xb, cc.XT)
    ctr = cc.counters
    ctr[_CLOCK] += 1
    clock0 = ctr[_CLOCK]
    ctr[_MISSES] += 1
    ctr[_PREFETCHED] += k - 1
    ctr[_KEVALS] += k * m
    first = -1
    col = np.empty(m)
    for r in range(k):
        c = cand[r]
        slot = _lru_slot(cc.idx_of, cc.last_used, clock0)
        if slot < 0:
            break
        if cc.idx_of[slot] >= 0:
            cc.slot_of[cc.idx_of[slot]] = -1
        kernel_from_dots(D[r], cc.sqn, c, cc.kind, cc.gamma, cc.coef0, cc.degree, col)
        # the requested column is the most recent; prefetched ones are stamped older
        _store(slot, c, col, cc, clock0 if r == 0 else clock0 - 1)
        if r == 0:
            first = slot
    return first


@njit(cache=True)
def _col(i, g, cc):
    """Slot of column i of Kt, prefetching a block of likely next columns on a miss."""
    if cc.block > 1 and cc.kind <= 2 and cc.slot_of[i] < 0:
        return _prefetch(i, g, cc)
    return _get_col(i, cc)


# ------------------------------------------------------------------ vertex search
# splitmix64 (Steele, Lea & Flood 2014): a small generator whose stream a test can
# reproduce in plain Python, so that the sampled sets of both gradient modes, and of a
# reference implementation, are the same for the same seed
_SM_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SM_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SM_M2 = np.uint64(0x94D049BB133111EB)
_SH30, _SH27, _SH31 = np.uint64(30), np.uint64(27), np.uint64(31)


@njit(cache=True)
def _rand_below(rng, n):
    """Advance the splitmix64 state ``rng[0]`` and return its output modulo n (n >= 1)."""
    s = rng[0] + _SM_GAMMA
    rng[0] = s
    z = (s ^ (s >> _SH30)) * _SM_M1
    z = (z ^ (z >> _SH27)) * _SM_M2
    z = z ^ (z >> _SH31)
    return np.int64(z % np.uint64(n))


@njit(cache=True)
def _draw_sample(perm, ns, rng):
    """Move a uniform random ns-subset of the indices to perm[:ns], the sample S of (10)
    (partial Fisher-Yates shuffle, continuing from the permutation left by the last draw)."""
    m = perm.shape[0]
    for t in range(ns):
        r = t + _rand_below(rng, m - t)
        tmp = perm[t]
        perm[t] = perm[r]
        perm[r] = tmp


@njit(cache=True)
def _argmin_sample(g, sample_size, perm, rng):
    """argmin of g over all indices, or over a fresh random sample (10) of them (the
    first of the sample, in its order, on ties)."""
    m = g.shape[0]
    if sample_size <= 0 or sample_size >= m:
        return np.argmin(g)
    _draw_sample(perm, sample_size, rng)
    best = perm[0]
    bestv = g[best]
    for t in range(1, sample_size):
        j = perm[t]
        if g[j] < bestv:
            bestv = g[j]
            best = j
    return best


@njit(cache=True)
def _fw_vertex(g, f, tol, sample_size, n_resample, full_check, perm, rng):
    """FW vertex (6) / randomised search (10) and the stopping test on the gap (3)/(9).

    Returns (i, gap, stop).  With sampling, a small sampled gap is trusted only after
    ``n_resample`` more samples (and, with ``full_check``, the exact gap) agree."""
    m = g.shape[0]
    i = _argmin_sample(g, sample_size, perm, rng)
    gap = 2.0 * f - g[i]
    if gap > tol:
        return i, gap, False
    if sample_size > 0 and sample_size < m:
        for _r in range(n_resample):
            i2 = _argmin_sample(g, sample_size, perm, rng)
            if g[i2] < g[i]:
                i = i2
            gap = 2.0 * f - g[i]
            if gap > tol:
                return i, gap, False
        if full_check:
            i = np.argmin(g)
            gap = 2.0 * f - g[i]
            if gap > tol:
                return i, gap, False
    return i, gap, True


@njit(cache=True)
def _argmax_support(g, alpha, exclude):
    best = -1
    bestv = -np.inf
    for j in range(g.shape[0]):
        if alpha[j] > 0.0 and j != exclude and g[j] > bestv:
            bestv = g[j]
            best = j
    return best


# ------------------------------------------------------------------ steps
@njit(cache=True)
def _fw_step_size(f, gi, Kii):
    """Exact line search (11) along e_i - alpha, clipped to [0, 1]."""
    den = 2.0 * f - 2.0 * gi + Kii          # ||e_i - alpha||^2_Kt
    num = 2.0 * f - gi                      # -(slope along e_i - alpha)
    if den <= 1e-300:
        return 1.0 if num > 0 else 0.0
    lam = num / den                         # (11)
    if lam < 0.0:
        lam = 0.0
    elif lam > 1.0:
        lam = 1.0
    return lam


@njit(cache=True)
def _fw_step(i, it, cc, remember_previous):
    """Algorithm 1: alpha <- (1 - lam) alpha + lam e_i with the exact step (11)-(12).

    ``remember_previous`` (first PARTAN iteration) keeps alpha^(0), its gradient and
    ``W = alpha^(1)T Kt alpha^(0)`` for the next PARTAN step."""
    alpha, g, fs = it.alpha, it.g, it.fs
    m = g.shape[0]
    f = fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    si = _col(i, g, cc)
    cache = cc.cols
    lam = _fw_step_size(f, gi, Kii)
    fnew = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii  # (12)
    if remember_previous:
        for j in range(m):
            it.alpha_p[j] = alpha[j]
            it.g_p[j] = g[j]
        fs[_FP] = f
        fs[_W] = (1.0 - lam) * 2.0 * f + lam * gi   # alpha1^T Kt alpha0
        it.ist[_HASPREV] = 1
    for j in range(m):
        alpha[j] *= (1.0 - lam)
        g[j] = (1.0 - lam) * g[j] + lam * cache[si, j]
    alpha[i] += lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _away_vertex(i, it):
    """MFW: the away vertex v (argmax of g on the support) when the away slope
    ``2f - g_v`` beats the FW slope ``g_i - 2f``, else -1."""
    g, alpha = it.g, it.alpha
    f = it.fs[_F]
    v = _argmax_support(g, alpha, -1)
    if v >= 0 and alpha[v] < 1.0 and (2.0 * f - g[v]) < (g[i] - 2.0 * f):
        return v
    return -1


@njit(cache=True)
def _away_step(v, it, cc):
    """alpha <- alpha + lam (alpha - e_v), exact step clipped to [0, alpha_v / (1 - alpha_v)]."""
    alpha, g, fs = it.alpha, it.g, it.fs
    m = g.shape[0]
    f = fs[_F]
    sv = _col(v, g, cc)
    cache = cc.cols
    gv = g[v]
    lam_max = alpha[v] / (1.0 - alpha[v])
    den = 2.0 * f - 2.0 * gv + it.diag[v]
    lam = lam_max
    if den > 1e-300:
        lam = min((gv - 2.0 * f) / den, lam_max)
    if lam < 0.0:
        lam = 0.0
    fnew = f + lam * (2.0 * f - gv) + 0.5 * lam * lam * den
    for j in range(m):
        alpha[j] *= (1.0 + lam)
        g[j] = (1.0 + lam) * g[j] - lam * cache[sv, j]
    if lam >= lam_max:
        alpha[v] = 0.0       # drop step: v leaves the support exactly
    else:
        alpha[v] -= lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _swap_vertex(i, it, cc):
    """SWAP: the vertex v of largest gradient on the support (v != i) when the pairwise
    step e_i - e_v decreases f more than the FW step would, else -1."""
    g, alpha = it.g, it.alpha
    f = it.fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    v = _argmax_support(g, alpha, i)
    if v < 0 or not g[v] > gi:
        return -1
    si = _col(i, g, cc)
    q = Kii + it.diag[v] - 2.0 * cc.cols[si, v]
    lam_sw = alpha[v]
    if q > 1e-300:
        lam_sw = min((g[v] - gi) / q, alpha[v])
    dec_sw = lam_sw * (gi - g[v]) + 0.5 * lam_sw * lam_sw * q
    lam_fw = _fw_step_size(f, gi, Kii)
    dec_fw = lam_fw * (gi - 2.0 * f) + 0.5 * lam_fw * lam_fw * (2.0 * f - 2.0 * gi + Kii)
    return v if dec_sw < dec_fw else -1


@njit(cache=True)
def _swap_step(i, v, it, cc):
    """alpha <- alpha + lam (e_i - e_v), exact step clipped to [0, alpha_v]."""
    alpha, g, fs = it.alpha, it.g, it.fs
    m = g.shape[0]
    f = fs[_F]
    gi = g[i]
    si = _col(i, g, cc)
    sv = _col(v, g, cc)
    cache = cc.cols
    q = it.diag[i] + it.diag[v] - 2.0 * cache[si, v]
    lam = alpha[v]
    if q > 1e-300:
        lam = min((g[v] - gi) / q, alpha[v])
    fnew = f + lam * (gi - g[v]) + 0.5 * lam * lam * q
    for j in range(m):
        g[j] += lam * (cache[si, j] - cache[sv, j])
    alpha[i] += lam
    if lam >= alpha[v]:
        alpha[v] = 0.0
    else:
        alpha[v] -= lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _partan_interval(i, lam, alpha, alpha_p):
    """Interval [lo, hi] of PARTAN steps mu keeping alpha~ + mu (alpha~ - alpha^(k-1)) >= 0,
    with the indices that hit zero at each end (-1 when unbounded)."""
    lo = -np.inf
    hi = np.inf
    jlo = -1
    jhi = -1
    for j in range(alpha.shape[0]):
        a = alpha[j]
        ap = alpha_p[j]
        if a == 0.0 and ap == 0.0 and j != i:
            continue
        at = (1.0 - lam) * a
        if j == i:
            at += lam
        d = at - ap
        if d < 0.0:
            b = at / (-d)
            if b < hi:
                hi = b
                jhi = j
        elif d > 0.0:
            b = -at / d
            if b > lo:
                lo = b
                jlo = j
    return lo, hi, jlo, jhi


@njit(cache=True)
def _partan_step(i, it, cc):
    """Algorithm 2: FW step (7) to alpha~ with (11)-(12), then the PARTAN step (8)
    alpha^(k+1) = alpha~ + mu (alpha~ - alpha^(k-1)) with (13)-(15), mu clipped to the
    simplex."""
    alpha, alpha_p, g, g_p, fs = it.alpha, it.alpha_p, it.g, it.g_p, it.fs
    m = g.shape[0]
    f = fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    si = _col(i, g, cc)
    cache = cc.cols
    lam = _fw_step_size(f, gi, Kii)                                   # (11)
    ft = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii  # (12)
    W = fs[_W]
    fp = fs[_FP]
    V = (1.0 - lam) * W + lam * g_p[i]          # alpha~^T Kt alpha^(k-1)
    q = 2.0 * (ft - V + fp)                     # ||alpha~ - alpha^(k-1)||^2_Kt
    mu = 0.0
    if q > 1e-300:
        mu = (V - 2.0 * ft) / q                 # (13)
    lo, hi, jlo, jhi = _partan_interval(i, lam, alpha, alpha_p)
    jzero = -1
    if mu > hi:
        mu = hi
        jzero = jhi
    elif mu < lo:
        mu = lo
        jzero = jlo
    fnew = ft + mu * (2.0 * ft - V) + 0.5 * mu * mu * q             # (15)
    Wnew = (1.0 + mu) * ((1.0 - lam) * 2.0 * f + lam * gi) - mu * W  # (14)
    for j in range(m):
        a = alpha[j]
        at = (1.0 - lam) * a
        if j == i:
            at += lam
        an = at + mu * (at - alpha_p[j])
        if an < 0.0:
            an = 0.0
        alpha_p[j] = a
        alpha[j] = an
        gj = g[j]
        gt = (1.0 - lam) * gj + lam * cache[si, j]
        g[j] = gt + mu * (gt - g_p[j])
        g_p[j] = gj
    if jzero >= 0:
        alpha[jzero] = 0.0
    fs[_FP] = f
    fs[_F] = fnew
    fs[_W] = Wnew
    fs[_LAM] = lam
    fs[_MU] = mu


@njit(cache=True)
def _step(i, method, it, cc):
    """One iteration of ``method`` from FW vertex i; returns the step type taken
    (0 FW, 1 away, 2 swap, 3 PARTAN)."""
    ist = it.ist
    ist[_LASTI] = i
    ist[_LASTV] = -1
    it.fs[_MU] = 0.0
    if method == 1:
        v = _away_vertex(i, it)
        if v >= 0:
            ist[_LASTV] = v
            _away_step(v, it, cc)
            return 1
    elif method == 2:
        v = _swap_vertex(i, it, cc)
        if v >= 0:
            ist[_LASTV] = v
            _swap_step(i, v, it, cc)
            return 2
    elif method == 3 and ist[_HASPREV] == 1:
        _partan_step(i, it, cc)
        return 3
    _fw_step(i, it, cc, method == 3)
    return 0


@njit(cache=True)
def _iterate(n_steps, method, tol, sample_size, n_resample, full_check, it, cc):
    """Run up to n_steps iterations in place.

    Returns CONVERGED when the gap test stopped it, NONFINITE when the gap (3) or the
    objective stopped being finite (kernel values overflowing, an indefinite kernel),
    RAN otherwise."""
    fs = it.fs
    for _ in range(n_steps):
        f = fs[_F]
        i, gap, stop = _fw_vertex(it.g, f, tol, sample_size, n_resample, full_check,
                                  it.perm, it.rng)
        fs[_GAP] = gap
        if not (np.isfinite(gap) and np.isfinite(f)):
            return NONFINITE
        if stop:
            return CONVERGED
        it.ist[_STEPTYPE] = _step(i, method, it, cc)
        it.ist[_IT] += 1
    return RAN


# ====================================================================== sample-only gradient
# The randomised iteration of section 4.2 as the paper specifies it (``gradient="sample"``):
# the gradient is evaluated on the sample S only, each entry from the kernel row of the
# sampled point against the active set A (the support),
#
#     (Kt alpha)_j = sum_{l in A} alpha_l Kt_jl,   j in S \ A,
#
# |S - A| |A| kernel evaluations per draw (S - A: the sampled points outside A), the
# paper's O(|S| |I(k)|).  What is kept from one
# iteration to the next is what the closed-form steps need and what costs O(|A|) to keep:
# alpha and the gradient on A (and, for PARTAN, alpha^(k-1) and its gradient on A), updated
# from the row of Kt of each step's vertex against A; the objective f by the recursions
# (12)/(15).  No kernel column of length m is ever computed or cached; nothing costs O(m)
# per iteration.  The exact gap (3), which needs the whole gradient, costs (m - |A|) |A|
# kernel evaluations (`_full_min_s`) and is computed only for ``sample_check="full"``
# (rate-limited, see `_fw_vertex_s`) and for the gap reported at the end.

@njit(cache=True)
def _k_from_dot(dot, sqa, sqb, kind, gamma, coef0, degree):
    """k(x_a, x_b) from ⟨x_a, x_b⟩ and the squared norms, as `kernel_from_dots` forms it."""
    if kind == 0:
        return dot
    if kind == 1:
        d2 = sqa + sqb - 2.0 * dot
        if d2 < 0.0:
            d2 = 0.0
        return np.exp(-gamma * d2)
    return (gamma * dot + coef0) ** degree


@njit(cache=True)
def _grow_active(ast, need):
    """Make room for ``need`` rows in the active set's buffers (doubling)."""
    cap = ast.sqnA.shape[0]
    if need <= cap:
        return
    n = ast.ist[_NA]
    new = max(need, 2 * cap)
    d = ast.XA.shape[1]
    XA = np.empty((new, d), ast.XA.dtype)
    sq = np.empty(new)
    yy = np.empty(new)
    for a in range(n):
        for t in range(d):
            XA[a, t] = ast.XA[a, t]
        sq[a] = ast.sqnA[a]
        yy[a] = ast.yA[a]
    ast.XA = XA
    ast.sqnA = sq
    ast.yA = yy
    ast.w = np.empty(new)


@njit(cache=True)
def _activate(j, cc, ast):
    """Add index j to the active set A."""
    n = ast.ist[_NA]
    _grow_active(ast, n + 1)
    X = cc.X
    for t in range(ast.XA.shape[1]):
        ast.XA[n, t] = X[j, t]
    ast.sqnA[n] = cc.sqn[j]
    ast.yA[n] = cc.y[j]
    ast.idx[n] = j
    ast.pos[j] = n
    ast.ist[_NA] = n + 1


@njit(cache=True)
def _alpha_weights(alpha, cc, ast):
    """w_a = alpha_l y_l for l = A[a] (alpha_l for a raw matrix) and b = sum_a w_a (0 for a
    raw matrix), so that (Kt alpha)_j = y_j (sum_a w_a k(x_j, x_l) + b) for j outside A."""
    n = ast.ist[_NA]
    w = ast.w
    b = 0.0
    for a in range(n):
        wa = alpha[ast.idx[a]]
        if cc.kind != 4:
            wa *= ast.yA[a]
        w[a] = wa
        b += wa
    return 0.0 if cc.kind == 4 else b


@njit(cache=True)
def _grad_outside(js, nj, b, cc, ast, out):
    """out[r] = (Kt alpha)_j for the nj indices j = js[r] outside A, from their kernel rows
    against A (weights ``ast.w`` and b of `_alpha_weights`): nj |A| kernel evaluations."""
    if nj == 0:
        return
    n = ast.ist[_NA]
    kind = cc.kind
    w = ast.w
    X = cc.X
    if kind <= 2:
        d = X.shape[1]
        Xr = np.empty((nj, d), X.dtype)
        # element by element (see `_prefetch`: a row slice assignment costs seconds of compile)
        for r in range(nj):
            j = js[r]
            for t in range(d):
                Xr[r, t] = X[j, t]
        D = np.dot(Xr, ast.XA[:n].T)      # one BLAS-3 product for the whole sample
        for r in range(nj):
            j = js[r]
            sj = cc.sqn[j]
            s = 0.0
            for a in range(n):
                s += w[a] * _k_from_dot(D[r, a], sj, ast.sqnA[a], kind, cc.gamma, cc.coef0,
                                        cc.degree)
            out[r] = cc.y[j] * (s + b)
    else:
        for r in range(nj):
            j = js[r]
            s = 0.0
            for a in range(n):
                s += w[a] * X[j, ast.idx[a]]
            out[r] = s if kind == 4 else cc.y[j] * (s + b)
    cc.counters[_KEVALS] += nj * n


@njit(cache=True)
def _kt_row(j, cc, ast, out):
    """out[a] = Kt_{j, A[a]} for the current active set (|A| kernel evaluations)."""
    n = ast.ist[_NA]
    kind = cc.kind
    yj = cc.y[j]
    p = ast.pos[j]
    if kind <= 2:
        dots = np.dot(ast.XA[:n], cc.X[j])
        sj = cc.sqn[j]
        for a in range(n):
            k = _k_from_dot(dots[a], sj, ast.sqnA[a], kind, cc.gamma, cc.coef0, cc.degree)
            out[a] = yj * ast.yA[a] * (k + 1.0)
        if p >= 0:
            if kind == 1:
                out[p] = yj * yj * 2.0       # k(x_j, x_j) = 1 exactly, as in the columns
            out[p] += cc.invC
    else:
        X = cc.X
        for a in range(n):
            v = X[j, ast.idx[a]]
            out[a] = v if kind == 4 else yj * ast.yA[a] * (v + 1.0)
        if p >= 0 and kind == 3:
            out[p] += cc.invC
    cc.counters[_KEVALS] += n


@njit(cache=True)
def _sample_min(ns, it, cc, ast):
    """Draw a sample S of ns indices and return (i_S, (Kt alpha)_{i_S}) of (10): the gradient
    on S from the maintained entries for S in A and from kernel rows against A for the rest
    (the first of the sample, in its order, on ties, as `_argmin_sample`)."""
    perm = it.perm
    _draw_sample(perm, ns, it.rng)
    b = _alpha_weights(it.alpha, cc, ast)
    js = np.empty(ns, np.int64)
    nj = 0
    for t in range(ns):
        j = perm[t]
        if ast.pos[j] < 0:
            js[nj] = j
            nj += 1
    vals = np.empty(max(nj, 1))
    _grad_outside(js, nj, b, cc, ast, vals)
    best = -1
    bestv = np.inf
    r = 0
    for t in range(ns):
        j = perm[t]
        if ast.pos[j] >= 0:
            v = it.g[j]
        else:
            v = vals[r]
            r += 1
        if best < 0 or v < bestv:
            best = j
            bestv = v
    return best, bestv


@njit(cache=True)
def _full_min_s(it, cc, ast):
    """argmin over all m indices of the exact gradient and its value: A from the maintained
    entries, the others from their kernel rows against A in blocks of 256 ((m - |A|) |A|
    kernel evaluations, also counted as exact-gap evaluations)."""
    m = it.g.shape[0]
    ev0 = cc.counters[_KEVALS]
    b = _alpha_weights(it.alpha, cc, ast)
    full = np.empty(m)
    blk = 256
    js = np.empty(blk, np.int64)
    vals = np.empty(blk)
    nj = 0
    for j in range(m + 1):
        if j < m:
            if ast.pos[j] >= 0:
                full[j] = it.g[j]
                continue
            js[nj] = j
            nj += 1
        if nj == blk or (j == m and nj > 0):
            _grad_outside(js, nj, b, cc, ast, vals)
            for r in range(nj):
                full[js[r]] = vals[r]
            nj = 0
    i = np.argmin(full)
    cc.counters[_KCHECK] += cc.counters[_KEVALS] - ev0
    return i, full[i]


@njit(cache=True)
def _fw_vertex_s(f, tol, ns, n_resample, full_check, it, cc, ast):
    """The randomised search (10) with the paper's safeguard and stopping test, on the
    sample-only gradient.  Returns (i, grad_i, gap, stop).

    The sampled gap Delta_S = 2f - min_S grad is <= the exact gap (3)/(9).  When it is
    <= tol, ``n_resample`` more samples are drawn (the paper: twice); the best vertex of all
    draws is kept, and the run goes on as soon as one shows a gap above tol.  Without
    ``full_check`` it then stops (the paper's rule).  With ``full_check`` it stops only if the
    exact gap, from the whole gradient, is <= tol too; if the exact gap is above tol, the
    step is taken toward the exact FW vertex.  A full check costs (m - |A|) |A| kernel
    evaluations, so another one is made only once the sampled searches have spent as many
    since the last (before that the run goes on sampling): the checks after the first cost
    at most as much as the searches, and a stop always has an exact gap <= tol behind it."""
    i, gi = _sample_min(ns, it, cc, ast)
    gap = 2.0 * f - gi
    if gap > tol:
        return i, gi, gap, False
    for _r in range(n_resample):
        i2, g2 = _sample_min(ns, it, cc, ast)
        if g2 < gi:
            i = i2
            gi = g2
        gap = 2.0 * f - gi
        if gap > tol:
            return i, gi, gap, False
    if not full_check:
        return i, gi, gap, True
    ctr = cc.counters
    if ctr[_NCHECKS] > 0 and ctr[_KEVALS] - ctr[_ATCHECK] < ctr[_LASTCHECK]:
        return i, gi, gap, False
    ev0 = ctr[_KEVALS]
    i, gi = _full_min_s(it, cc, ast)
    ctr[_NCHECKS] += 1
    ctr[_LASTCHECK] = ctr[_KEVALS] - ev0
    ctr[_ATCHECK] = ctr[_KEVALS]
    gap = 2.0 * f - gi
    it.fs[_XGAP] = gap
    it.ist[_XGAPIT] = it.ist[_IT]
    return i, gi, gap, not gap > tol


@njit(cache=True)
def _enter(i, it, cc, ast, row):
    """row[:|A|] = Kt_{i, A}; an i outside A joins it, with its gradient entries (those of
    alpha and, for PARTAN, of alpha^(k-1)) from that row, and row[pos(i)] = Kt_ii."""
    n = ast.ist[_NA]
    _kt_row(i, cc, ast, row)
    if ast.pos[i] >= 0:
        return
    gi = 0.0
    gpi = 0.0
    for a in range(n):
        j = ast.idx[a]
        gi += it.alpha[j] * row[a]
        gpi += it.alpha_p[j] * row[a]
    _activate(i, cc, ast)
    it.g[i] = gi
    it.g_p[i] = gpi
    row[n] = it.diag[i]


@njit(cache=True)
def _argmax_active(g, alpha, idx, n, exclude):
    best = -1
    bestv = -np.inf
    for a in range(n):
        j = idx[a]
        if alpha[j] > 0.0 and j != exclude and g[j] > bestv:
            bestv = g[j]
            best = j
    return best


@njit(cache=True)
def _fw_step_s(i, row, it, ast, remember_previous):
    """`_fw_step` on A: alpha <- (1 - lam) alpha + lam e_i, gradient on A from row = Kt_{i,A}."""
    alpha, g, fs = it.alpha, it.g, it.fs
    n = ast.ist[_NA]
    idx = ast.idx
    f = fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    lam = _fw_step_size(f, gi, Kii)
    fnew = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii  # (12)
    if remember_previous:
        for a in range(n):
            j = idx[a]
            it.alpha_p[j] = alpha[j]
            it.g_p[j] = g[j]
        fs[_FP] = f
        fs[_W] = (1.0 - lam) * 2.0 * f + lam * gi
        it.ist[_HASPREV] = 1
    for a in range(n):
        j = idx[a]
        alpha[j] *= (1.0 - lam)
        g[j] = (1.0 - lam) * g[j] + lam * row[a]
    alpha[i] += lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _away_step_s(v, rowv, it, ast):
    """`_away_step` on A, rowv = Kt_{v,A}."""
    alpha, g, fs = it.alpha, it.g, it.fs
    n = ast.ist[_NA]
    idx = ast.idx
    f = fs[_F]
    gv = g[v]
    lam_max = alpha[v] / (1.0 - alpha[v])
    den = 2.0 * f - 2.0 * gv + it.diag[v]
    lam = lam_max
    if den > 1e-300:
        lam = min((gv - 2.0 * f) / den, lam_max)
    if lam < 0.0:
        lam = 0.0
    fnew = f + lam * (2.0 * f - gv) + 0.5 * lam * lam * den
    for a in range(n):
        j = idx[a]
        alpha[j] *= (1.0 + lam)
        g[j] = (1.0 + lam) * g[j] - lam * rowv[a]
    if lam >= lam_max:
        alpha[v] = 0.0
    else:
        alpha[v] -= lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _swap_vertex_s(i, row, it, ast):
    """`_swap_vertex` on A (i in A, row = Kt_{i,A})."""
    g, alpha = it.g, it.alpha
    f = it.fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    v = _argmax_active(g, alpha, ast.idx, ast.ist[_NA], i)
    if v < 0 or not g[v] > gi:
        return -1
    q = Kii + it.diag[v] - 2.0 * row[ast.pos[v]]
    lam_sw = alpha[v]
    if q > 1e-300:
        lam_sw = min((g[v] - gi) / q, alpha[v])
    dec_sw = lam_sw * (gi - g[v]) + 0.5 * lam_sw * lam_sw * q
    lam_fw = _fw_step_size(f, gi, Kii)
    dec_fw = lam_fw * (gi - 2.0 * f) + 0.5 * lam_fw * lam_fw * (2.0 * f - 2.0 * gi + Kii)
    return v if dec_sw < dec_fw else -1


@njit(cache=True)
def _swap_step_s(i, v, row, rowv, it, ast):
    """`_swap_step` on A."""
    alpha, g, fs = it.alpha, it.g, it.fs
    n = ast.ist[_NA]
    idx = ast.idx
    f = fs[_F]
    gi = g[i]
    q = it.diag[i] + it.diag[v] - 2.0 * row[ast.pos[v]]
    lam = alpha[v]
    if q > 1e-300:
        lam = min((g[v] - gi) / q, alpha[v])
    fnew = f + lam * (gi - g[v]) + 0.5 * lam * lam * q
    for a in range(n):
        j = idx[a]
        g[j] += lam * (row[a] - rowv[a])
    alpha[i] += lam
    if lam >= alpha[v]:
        alpha[v] = 0.0
    else:
        alpha[v] -= lam
    fs[_F] = fnew
    fs[_LAM] = lam


@njit(cache=True)
def _partan_step_s(i, row, it, ast):
    """`_partan_step` on A (i in A, row = Kt_{i,A}): (7) with (11)-(12), then (8) with
    (13)-(15), mu clipped to the simplex."""
    alpha, alpha_p, g, g_p, fs = it.alpha, it.alpha_p, it.g, it.g_p, it.fs
    n = ast.ist[_NA]
    idx = ast.idx
    f = fs[_F]
    gi = g[i]
    Kii = it.diag[i]
    lam = _fw_step_size(f, gi, Kii)                                   # (11)
    ft = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii  # (12)
    W = fs[_W]
    fp = fs[_FP]
    V = (1.0 - lam) * W + lam * g_p[i]
    q = 2.0 * (ft - V + fp)
    mu = 0.0
    if q > 1e-300:
        mu = (V - 2.0 * ft) / q                 # (13)
    lo = -np.inf
    hi = np.inf
    jlo = -1
    jhi = -1
    for a in range(n):                           # `_partan_interval` over A
        j = idx[a]
        aj = alpha[j]
        ap = alpha_p[j]
        if aj == 0.0 and ap == 0.0 and j != i:
            continue
        at = (1.0 - lam) * aj
        if j == i:
            at += lam
        d = at - ap
        if d < 0.0:
            bnd = at / (-d)
            if bnd < hi:
                hi = bnd
                jhi = j
        elif d > 0.0:
            bnd = -at / d
            if bnd > lo:
                lo = bnd
                jlo = j
    jzero = -1
    if mu > hi:
        mu = hi
        jzero = jhi
    elif mu < lo:
        mu = lo
        jzero = jlo
    fnew = ft + mu * (2.0 * ft - V) + 0.5 * mu * mu * q             # (15)
    Wnew = (1.0 + mu) * ((1.0 - lam) * 2.0 * f + lam * gi) - mu * W  # (14)
    for a in range(n):
        j = idx[a]
        aj = alpha[j]
        at = (1.0 - lam) * aj
        if j == i:
            at += lam
        an = at + mu * (at - alpha_p[j])
        if an < 0.0:
            an = 0.0
        alpha_p[j] = aj
        alpha[j] = an
        gj = g[j]
        gt = (1.0 - lam) * gj + lam * row[a]
        g[j] = gt + mu * (gt - g_p[j])
        g_p[j] = gj
    if jzero >= 0:
        alpha[jzero] = 0.0
    fs[_FP] = f
    fs[_F] = fnew
    fs[_W] = Wnew
    fs[_LAM] = lam
    fs[_MU] = mu


@njit(cache=True)
def _step_s(i, gi, method, it, cc, ast):
    """`_step` on the sample-only gradient: i the sampled vertex, gi its gradient entry.
    The MFW away test needs only gi and the gradient on the support, so an away step
    computes the row of v only; the other steps the row of i (and SWAP that of v)."""
    ist = it.ist
    ist[_LASTI] = i
    ist[_LASTV] = -1
    it.fs[_MU] = 0.0
    n = ast.ist[_NA]
    if method == 1:
        g, alpha = it.g, it.alpha
        f = it.fs[_F]
        v = _argmax_active(g, alpha, ast.idx, n, -1)
        if v >= 0 and alpha[v] < 1.0 and (2.0 * f - g[v]) < (gi - 2.0 * f):
            ist[_LASTV] = v
            rowv = np.empty(n)
            _kt_row(v, cc, ast, rowv)
            _away_step_s(v, rowv, it, ast)
            return 1
    row = np.empty(n + 1)
    _enter(i, it, cc, ast, row)
    if method == 2:
        v = _swap_vertex_s(i, row, it, ast)
        if v >= 0:
            ist[_LASTV] = v
            rowv = np.empty(ast.ist[_NA])
            _kt_row(v, cc, ast, rowv)
            _swap_step_s(i, v, row, rowv, it, ast)
            return 2
    elif method == 3 and ist[_HASPREV] == 1:
        _partan_step_s(i, row, it, ast)
        return 3
    _fw_step_s(i, row, it, ast, method == 3)
    return 0


#: Iterations between two looks at the active set for indices that left the support.
COMPACT_EVERY = 64


@njit(cache=True)
def _compact(it, ast):
    """Drop from A the indices with alpha_j = alpha^(k-1)_j = 0 (they left the support by a
    drop or a clipped PARTAN step) once they are more than an eighth of A, so that |A| stays
    the |I(k)| of the paper's cost O(|S| |I(k)|).  Changes only the order of the sums."""
    n = ast.ist[_NA]
    idx = ast.idx
    alive = 0
    for a in range(n):
        j = idx[a]
        if it.alpha[j] > 0.0 or it.alpha_p[j] > 0.0:
            alive += 1
    if n - alive < 16 or 8 * (n - alive) < n:
        return
    d = ast.XA.shape[1]
    k = 0
    for a in range(n):
        j = idx[a]
        if it.alpha[j] > 0.0 or it.alpha_p[j] > 0.0:
            if k != a:
                for t in range(d):
                    ast.XA[k, t] = ast.XA[a, t]
                ast.sqnA[k] = ast.sqnA[a]
                ast.yA[k] = ast.yA[a]
                idx[k] = j
            ast.pos[j] = k
            k += 1
        else:
            ast.pos[j] = -1
    ast.ist[_NA] = k


@njit(cache=True)
def _iterate_s(n_steps, method, tol, sample_size, n_resample, full_check, it, cc, ast):
    """`_iterate` on the sample-only gradient (0 < sample_size < m)."""
    fs = it.fs
    for _ in range(n_steps):
        f = fs[_F]
        i, gi, gap, stop = _fw_vertex_s(f, tol, sample_size, n_resample, full_check, it, cc,
                                        ast)
        fs[_GAP] = gap
        if not (np.isfinite(gap) and np.isfinite(f)):
            return NONFINITE
        if stop:
            return CONVERGED
        it.ist[_STEPTYPE] = _step_s(i, gi, method, it, cc, ast)
        it.ist[_IT] += 1
        ast.ist[_SINCE_COMPACT] += 1
        if ast.ist[_SINCE_COMPACT] >= COMPACT_EVERY:
            ast.ist[_SINCE_COMPACT] = 0
            _compact(it, ast)
    return RAN


@njit(cache=True)
def _exact_gap_s(it, cc, ast):
    """The exact duality gap (3) at the current iterate, from the whole gradient."""
    _i, gmin = _full_min_s(it, cc, ast)
    return 2.0 * it.fs[_F] - gmin


class SimplexFWSolver:
    """Driver for the numba core: state, kernel-column cache, trace.

    Parameters
    ----------
    X : ndarray (m, d) of features, or (m, m) Gram matrix (``kernel_kind`` 3) or the
        simplex-QP matrix itself (``kernel_kind`` 4, then ``y`` and ``C`` are unused).
    y : ndarray (m,) of +-1.
    kernel_kind, gamma, coef0, degree : see `structfw.svm._kernels`.
    C : float > 0.
    method : "fw" | "mfw" | "swap" | "partan".
    tol : duality-gap tolerance.  max_iter : iteration cap.
    sample_size : None or int, size of the random vertex sample (10).
    sample_check : "resample" (the paper's safeguard: sample ``n_resample`` more times
        before stopping) or "full" (additionally confirm with the exact gap; with the
        sample-only gradient the exact gap costs (m - |A|) |A| kernel evaluations and is
        rate-limited, see `_fw_vertex_s`).
    gradient : "full" or "sample", how the randomised search (0 < sample_size < m)
        evaluates the gradient.  "full": the whole gradient is kept and updated from one
        cached kernel column per step (O(m) per iteration, a column of m kernel
        evaluations per new vertex).  "sample": the paper's randomised iteration, the
        gradient on the sample only, from the sample's kernel rows against the active set
        (|S - A| |A| kernel evaluations per draw, nothing of size m per iteration, no
        column cache).  Both draw the same samples from the same seed and take the same
        steps (up to rounding); they differ in cost, and in the trace (below).
        Ignored without sampling.
    cache_size : MB of kernel columns kept (LRU), at least two columns (unused by the
        sample-only gradient).
    trace_every : record gap/objective/time every this many iterations.
    seed : int seed of the sampler.
    kernel_dtype : "float64" or "float32": precision of the training matrix used for the
        kernel columns and of the column cache (kernels 0..2 only); the gradient, the
        objective and the gap are accumulated in float64.
    block : number of kernel columns computed per BLAS-3 product on a miss (1 = one
        matrix-vector product per column).
    blas_threads : BLAS threads during `run` (threadpoolctl; None leaves the
        setting alone).  Default 1: the column blocks (block x n_features x m) are too
        small for threads to pay off, and on a loaded machine OpenBLAS threads made the
        fashion-MNIST fit 2-5x slower.

    Attributes
    ----------
    converged : bool
        The stopping test fired (gap <= tol; sampled gap <= tol on 1 + n_resample
        samples with ``sample_check="resample"``).
    sampled_gradient : bool
        The sample-only gradient is in use.  Then the trace's intermediate gaps are the
        sampled gaps Delta_S that the stopping test saw at the last search (lower bounds
        on the exact gap); its first and last records, and `gap`, are exact.
    stopped : str or None
        Why `run` ended: "converged", "max_iter", "interrupted" (Ctrl-C, taken
        between chunks of compiled iterations; the iterate is the current one, which
        is also the best: every method decreases f monotonically) or "nonfinite"
        (the gap or the objective became NaN/inf; the iterate is then unusable).
    """

    def __init__(self, X, y, kernel_kind=1, gamma=1.0, coef0=0.0, degree=3, C=1.0,
                 method="partan", tol=1e-4, max_iter=100000, sample_size=None,
                 sample_check="resample", n_resample=2, cache_size=200.0,
                 trace_every=10, seed=0, diag=None, block=16, kernel_dtype="float64",
                 blas_threads=1, gradient="full"):
        from .._compile import install_compile_notice

        install_compile_notice()
        X = np.require(X, np.float64, ["C", "W"])
        m = X.shape[0]
        kdt = np.dtype(kernel_dtype)
        if kdt not in (np.float32, np.float64):
            raise ValueError(f"kernel_dtype must be 'float32' or 'float64', got {kernel_dtype!r}")
        kind = int(kernel_kind)
        if kind not in (0, 1, 2):
            kdt = np.dtype(np.float64)   # Gram / raw matrices are used as given
        self.kernel_dtype = kdt
        self.m = m
        self.method = METHODS[method]
        self.method_name = str(method)
        self.max_iter = int(max_iter)
        self.trace_every = max(1, int(trace_every))
        self.seed = int(seed)
        self.blas_threads = blas_threads
        invC = 0.0 if kind == 4 else 1.0 / float(C)
        if diag is None:
            from ._kernels import kernel_diagonal
            kd = kernel_diagonal(X, kind, float(gamma), float(coef0), float(degree))
            diag = kd if kind == 4 else kd + 1.0 + invC
        if gradient not in ("full", "sample"):
            raise ValueError(f"gradient must be 'full' or 'sample', got {gradient!r}")
        self.sample_size = 0 if sample_size is None else int(sample_size)
        # a sample of all m points is the deterministic search, on the full gradient
        self.sampled_gradient = gradient == "sample" and 0 < self.sample_size < m
        n_slots = int(cache_size * 2 ** 20 // (kdt.itemsize * max(m, 1)))
        n_slots = 2 if self.sampled_gradient else max(2, min(m, n_slots))
        # squared norms from the float64 data (the RBF distance is formed in float64)
        sqn = np.einsum("ij,ij->i", X, X) if kind in (0, 1, 2) else np.zeros(m)
        Xk = X if kdt == np.float64 else np.ascontiguousarray(X, dtype=np.float32)
        # plain namespaces for Python-side access (reading a structref field from
        # Python boxes it anew each time); the structrefs share the same arrays
        self._c = SimpleNamespace(
            X=Xk, XT=Xk.T,  # XT: F-ordered view for the BLAS-3 block of kernel columns
            sqn=sqn, y=np.ones(m) if y is None else np.require(y, np.float64, ["C", "W"]),
            kind=kind, gamma=float(gamma), coef0=float(coef0), degree=float(degree),
            invC=invC, block=int(block),
            # kernel columns are cached in kernel_dtype; the gradient is accumulated in float64
            cols=np.zeros((n_slots, m), kdt), slot_of=-np.ones(m, np.int64),
            idx_of=-np.ones(n_slots, np.int64), last_used=np.zeros(n_slots, np.int64),
            counters=np.zeros(9, np.int64))
        self._i = SimpleNamespace(
            alpha=np.zeros(m), alpha_p=np.zeros(m), g=np.zeros(m), g_p=np.zeros(m),
            diag=np.require(diag, np.float64, ["C", "W"]), fs=np.zeros(8),
            ist=np.zeros(6, np.int64), perm=np.arange(m, dtype=np.int64),
            rng=np.zeros(1, np.uint64))
        self.cc = _new_column_cache(*(getattr(self._c, k) for k in _CACHE_FIELDS))
        self.it = _new_iterate(*(getattr(self._i, k) for k in _ITERATE_FIELDS))
        self.ast = None
        if self.sampled_gradient:
            cap = min(m, 64)
            ncol = Xk.shape[1] if kind in (0, 1, 2) else 0
            # idx, pos and ist keep their arrays; XA, sqnA, yA and w are replaced when
            # they grow, so Python reads only the former
            self._a = SimpleNamespace(
                idx=-np.ones(m, np.int64), pos=-np.ones(m, np.int64),
                XA=np.zeros((cap, ncol), kdt), sqnA=np.zeros(cap), yA=np.zeros(cap),
                w=np.zeros(cap), ist=np.zeros(2, np.int64))
            self.ast = _new_active_set(*(getattr(self._a, k) for k in _ACTIVE_FIELDS))
        # method and stopping test, the scalar arguments of _iterate after n_steps
        self.tol = float(tol)
        self.n_resample = int(n_resample)
        self.full_check = sample_check == "full"
        self._opts = (self.method, self.tol, self.sample_size, self.n_resample,
                      self.full_check)
        self.converged = False
        self.stopped = None
        self._initialised = False

    # the arrays of the bundles, under the names the tests and the classifier use
    alpha = property(lambda self: self._i.alpha)
    alpha_p = property(lambda self: self._i.alpha_p)
    g = property(lambda self: self._i.g)
    g_p = property(lambda self: self._i.g_p)
    diag = property(lambda self: self._i.diag)
    cache = property(lambda self: self._c.cols)

    # ------------------------------------------------------------------ helpers
    def column(self, i):
        s = _get_col(int(i), self.cc)
        return self._c.cols[s].astype(np.float64)

    def initialize(self):
        """alpha^(0) = e_i0, i0 = argmin of the diagonal (first index on ties).

        The sampler restarts from ``seed``; the sample-only gradient starts with the
        active set {i0} and the gradient entry g_i0 = Kt_i0i0 (no kernel column)."""
        it = self._i
        it.rng[0] = np.uint64(self.seed % 2 ** 64)
        it.perm[:] = np.arange(self.m)
        i0 = int(np.argmin(it.diag))
        it.alpha[:] = 0.0
        it.alpha_p[:] = 0.0
        it.alpha[i0] = 1.0
        it.ist[:] = 0
        it.ist[_XGAPIT] = -1
        if self.sampled_gradient:
            a = self._a
            a.idx[:] = -1
            a.pos[:] = -1
            a.ist[:] = 0
            _activate(i0, self.cc, self.ast)
            it.g[:] = 0.0
            it.g[i0] = it.diag[i0]
        else:
            it.g[:] = self.column(i0)
        it.fs[_F] = 0.5 * it.g[i0]
        self._t0 = time.perf_counter()
        self._elapsed = 0.0
        self._trace = {"iteration": [], "gap": [], "objective": [], "time_s": []}
        self._initialised = True
        self._record()

    @property
    def f(self):
        return float(self._i.fs[_F])

    @property
    def n_iter(self):
        return int(self._i.ist[_IT])

    @property
    def gap(self):
        """Exact duality gap (3) at the current iterate.

        With the sample-only gradient this needs the whole gradient, (m - |A|) |A| kernel
        evaluations, unless a full check already computed it at this iterate."""
        it = self._i
        if not self.sampled_gradient:
            return float(2.0 * it.fs[_F] - it.g.min())
        if it.ist[_XGAPIT] != it.ist[_IT]:
            it.fs[_XGAP] = _exact_gap_s(self.it, self.cc, self.ast)
            it.ist[_XGAPIT] = it.ist[_IT]
        return float(it.fs[_XGAP])

    @property
    def active_size(self):
        """|A| of the sample-only gradient (the support, and PARTAN's previous one), else
        the number of nonzero alpha."""
        if self.sampled_gradient:
            return int(self._a.ist[_NA])
        return int(np.count_nonzero(self._i.alpha))

    @property
    def last_step(self):
        ist, fs = self._i.ist, self._i.fs
        return {"type": int(ist[_STEPTYPE]), "i": int(ist[_LASTI]),
                "v": int(ist[_LASTV]), "lam": float(fs[_LAM]), "mu": float(fs[_MU])}

    def _record(self, exact=True):
        tr = self._trace
        tr["iteration"].append(self.n_iter)
        # the sample-only gradient records the sampled gap of the last search in between
        tr["gap"].append(self.gap if exact or not self.sampled_gradient
                         else float(self._i.fs[_GAP]))
        tr["objective"].append(self.f)
        tr["time_s"].append(self._elapsed)

    def _resync(self):
        # recompute the scalars kept by recursion from the maintained gradients (on the
        # active set with the sample-only gradient: alpha vanishes outside it)
        it = self._i
        if it.ist[_XGAPIT] == it.ist[_IT]:
            return       # an exact gap was computed with the current f: keep them paired
        if self.sampled_gradient:
            A = self._a.idx[:self._a.ist[_NA]]
            alpha, g, alpha_p, g_p = it.alpha[A], it.g[A], it.alpha_p[A], it.g_p[A]
        else:
            alpha, g, alpha_p, g_p = it.alpha, it.g, it.alpha_p, it.g_p
        it.fs[_F] = 0.5 * float(alpha @ g)
        if it.ist[_HASPREV]:
            it.fs[_FP] = 0.5 * float(alpha_p @ g_p)
            it.fs[_W] = float(alpha @ g_p)

    def _advance(self, n):
        """Run at most n compiled iterations; returns the status of `_iterate`."""
        if not self._initialised:
            self.initialize()
        t = time.perf_counter()
        if self.sampled_gradient:
            status = _iterate_s(int(n), *self._opts, self.it, self.cc, self.ast)
        else:
            status = _iterate(int(n), *self._opts, self.it, self.cc)
        self._elapsed += time.perf_counter() - t
        self.converged = bool(status == CONVERGED)
        if status == NONFINITE:
            self.stopped = "nonfinite"
        elif self.converged:
            self.stopped = "converged"
        return status

    def step(self, n=1):
        """Run at most n iterations; returns True when the stopping test fired."""
        self._advance(n)
        return self.converged

    def run(self):
        """Iterate until the gap test, ``max_iter``, a non-finite gap or a Ctrl-C."""
        with deferred_sigint():
            if self.blas_threads is None:
                return self._run()
            from threadpoolctl import threadpool_limits
            with threadpool_limits(limits=int(self.blas_threads), user_api="blas"):
                return self._run()

    def _run(self):
        if not self._initialised:
            self.initialize()
        # a command running many fits (a benchmark) shows them on one bar (`structfw._progress`)
        bar = _progress.listener()
        if bar is None:
            return self._iterations(None, -1)
        key = bar.started(f"svm {self.method_name}", float(self.max_iter))
        try:
            return self._iterations(bar, key)
        finally:
            bar.ended(key)

    def _iterations(self, bar, key):
        self.stopped = None
        since_record = 0
        while self.n_iter < self.max_iter:
            # the Ctrl-C flag is polled after each chunk, so that even an interrupted
            # run makes its first chunk of progress
            if self.n_iter > 0 and interrupt_requested():
                self.stopped = "interrupted"
                break
            # chunks end at trace points; long ones are cut so the flag is polled often
            n = min(self.trace_every - since_record, self.max_iter - self.n_iter,
                    POLL_EVERY)
            status = self._advance(n)
            since_record += n
            if bar is not None:
                bar.advanced(key, self.n_iter)
            if status == NONFINITE:
                self._record()
                break
            if status == CONVERGED or since_record >= self.trace_every \
                    or self.n_iter >= self.max_iter:
                self._resync()
                last = status == CONVERGED or self.n_iter >= self.max_iter
                self._record(exact=last)
                since_record = 0
            if status == CONVERGED:
                break
        else:
            self.stopped = "max_iter"
        if self.stopped == "interrupted" and since_record:
            self._resync()
            self._record()
        elif self.stopped == "interrupted" and self.sampled_gradient and self._trace["gap"]:
            self._trace["gap"][-1] = self.gap       # the last record is exact
        return self

    @property
    def trace(self):
        return {k: np.asarray(v, dtype=np.int64 if k == "iteration" else np.float64)
                for k, v in self._trace.items()}

    @property
    def cache_stats(self):
        """Column-cache counters (hits, misses, prefetched columns, slots) and the cost
        counts: ``kernel_evals`` (every k(x_j, x_l) computed: m per kernel column, |A| per
        row against the active set), ``check_evals`` (those of them spent on exact gaps:
        full checks and the reported gap of the sample-only gradient), ``full_checks``
        (exact-gap checks before a sampled stop, sample-only gradient) and ``active``
        (`active_size`)."""
        ctr = self._c.counters
        return {"hits": int(ctr[_HITS]), "misses": int(ctr[_MISSES]),
                "prefetched": int(ctr[_PREFETCHED]), "slots": int(self._c.cols.shape[0]),
                "kernel_evals": int(ctr[_KEVALS]), "check_evals": int(ctr[_KCHECK]),
                "full_checks": int(ctr[_NCHECKS]), "active": self.active_size}


def solve_simplex_qp(Q, method="partan", tol=1e-6, max_iter=1000000, **kw):
    """Minimise 1/2 a^T Q a over the unit simplex (Q symmetric PSD), for tests/low level use.

    Returns the finished `SimplexFWSolver` (``.alpha``, ``.f``, ``.gap``, ``.trace``).
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
        raise ValueError(f"Q must be a square matrix, got shape {Q.shape}")
    s = SimplexFWSolver(Q, None, kernel_kind=4, method=method, tol=tol, max_iter=max_iter,
                        diag=np.diag(Q).copy(), **kw)
    return s.run()
