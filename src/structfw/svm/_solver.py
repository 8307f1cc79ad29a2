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

The numba core works on two bundles (numba structrefs): `ColumnCache`
(training matrix, kernel parameters and the LRU cache of columns of Kt) and
`Iterate` (alpha, gradient, the PARTAN memory and the scalar state); the
method and the stopping test are plain scalar arguments.

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

from .._interrupt import deferred_sigint, interrupt_requested
from ._kernels import kernel_column, kernel_from_dots

METHODS = {"fw": 0, "mfw": 1, "swap": 2, "partan": 3}

# int state layout (Iterate.ist)
_IT, _HASPREV, _STEPTYPE, _LASTI, _LASTV = range(5)
# float state layout (Iterate.fs)
_F, _FP, _W, _GAP, _LAM, _MU = range(6)
# cache counters layout (ColumnCache.counters)
_CLOCK, _HITS, _MISSES, _PREFETCHED = range(4)
# statuses returned by _iterate
RAN, CONVERGED, NONFINITE = 0, 1, 2

#: Longest run of compiled iterations between two polls of the Ctrl-C flag.
POLL_EVERY = 1000

_CACHE_FIELDS = ("X", "XT", "sqn", "y", "kind", "gamma", "coef0", "degree", "invC", "block",
                 "cols", "slot_of", "idx_of", "last_used", "counters")
_ITERATE_FIELDS = ("alpha", "alpha_p", "g", "g_p", "diag", "fs", "ist", "perm")


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
    diagonal of Kt, the float / int scalar state (layouts ``_F..`` and ``_IT..``) and
    the sampler's permutation buffer."""

    def __new__(cls, **fields):
        return structref.StructRefProxy.__new__(cls, *(fields[k] for k in _ITERATE_FIELDS))


structref.define_proxy(ColumnCache, _ColumnCacheType, list(_CACHE_FIELDS))
structref.define_proxy(Iterate, _IterateType, list(_ITERATE_FIELDS))


# Built in compiled code because numba does not cache a structref constructor called from
# Python: it recompiled in every process (~1-3 s of each first fit, warm cache or not).
@njit(cache=True)
def _new_column_cache(X, XT, sqn, y, kind, gamma, coef0, degree, invC, block, cols, slot_of, idx_of,
                      last_used, counters):
    return ColumnCache(X, XT, sqn, y, kind, gamma, coef0, degree, invC, block, cols, slot_of, idx_of,
                       last_used, counters)


@njit(cache=True)
def _new_iterate(alpha, alpha_p, g, g_p, diag, fs, ist, perm):
    return Iterate(alpha, alpha_p, g, g_p, diag, fs, ist, perm)


@njit(cache=True)
def _seed(s):
    np.random.seed(s)


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
@njit(cache=True)
def _argmin_sample(g, sample_size, perm):
    """argmin of g over all indices, or over a fresh random sample (10) of them."""
    m = g.shape[0]
    if sample_size <= 0 or sample_size >= m:
        return np.argmin(g)
    best = -1
    bestv = np.inf
    for t in range(sample_size):
        r = t + np.random.randint(0, m - t)
        tmp = perm[t]
        perm[t] = perm[r]
        perm[r] = tmp
        j = perm[t]
        if g[j] < bestv:
            bestv = g[j]
            best = j
    return best


@njit(cache=True)
def _fw_vertex(g, f, tol, sample_size, n_resample, full_check, perm):
    """FW vertex (6) / randomised search (10) and the stopping test on the gap (3)/(9).

    Returns (i, gap, stop).  With sampling, a small sampled gap is trusted only after
    ``n_resample`` more samples (and, with ``full_check``, the exact gap) agree."""
    m = g.shape[0]
    i = _argmin_sample(g, sample_size, perm)
    gap = 2.0 * f - g[i]
    if gap > tol:
        return i, gap, False
    if sample_size > 0 and sample_size < m:
        for _r in range(n_resample):
            i2 = _argmin_sample(g, sample_size, perm)
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
                                  it.perm)
        fs[_GAP] = gap
        if not (np.isfinite(gap) and np.isfinite(f)):
            return NONFINITE
        if stop:
            return CONVERGED
        it.ist[_STEPTYPE] = _step(i, method, it, cc)
        it.ist[_IT] += 1
    return RAN


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
        before stopping) or "full" (additionally confirm with the exact gap).
    cache_size : MB of kernel columns kept (LRU), at least two columns.
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
        The stopping test fired (gap <= tol).
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
                 blas_threads=1):
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
        self.max_iter = int(max_iter)
        self.trace_every = max(1, int(trace_every))
        self.seed = int(seed)
        self.blas_threads = blas_threads
        invC = 0.0 if kind == 4 else 1.0 / float(C)
        if diag is None:
            from ._kernels import kernel_diagonal
            kd = kernel_diagonal(X, kind, float(gamma), float(coef0), float(degree))
            diag = kd if kind == 4 else kd + 1.0 + invC
        n_slots = int(cache_size * 2 ** 20 // (kdt.itemsize * max(m, 1)))
        n_slots = max(2, min(m, n_slots))
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
            counters=np.zeros(4, np.int64))
        self._i = SimpleNamespace(
            alpha=np.zeros(m), alpha_p=np.zeros(m), g=np.zeros(m), g_p=np.zeros(m),
            diag=np.require(diag, np.float64, ["C", "W"]), fs=np.zeros(8),
            ist=np.zeros(5, np.int64), perm=np.arange(m, dtype=np.int64))
        self.cc = _new_column_cache(*(getattr(self._c, k) for k in _CACHE_FIELDS))
        self.it = _new_iterate(*(getattr(self._i, k) for k in _ITERATE_FIELDS))
        # method and stopping test, the scalar arguments of _iterate after n_steps
        self.tol = float(tol)
        self.sample_size = 0 if sample_size is None else int(sample_size)
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
        """alpha^(0) = e_i0, i0 = argmin of the diagonal (first index on ties)."""
        _seed(self.seed)
        it = self._i
        i0 = int(np.argmin(it.diag))
        it.alpha[:] = 0.0
        it.alpha[i0] = 1.0
        it.g[:] = self.column(i0)
        it.fs[_F] = 0.5 * it.g[i0]
        it.ist[_IT] = 0
        it.ist[_HASPREV] = 0
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
        """Exact duality gap (3) at the current iterate."""
        return float(2.0 * self._i.fs[_F] - self._i.g.min())

    @property
    def last_step(self):
        ist, fs = self._i.ist, self._i.fs
        return {"type": int(ist[_STEPTYPE]), "i": int(ist[_LASTI]),
                "v": int(ist[_LASTV]), "lam": float(fs[_LAM]), "mu": float(fs[_MU])}

    def _record(self):
        tr = self._trace
        tr["iteration"].append(self.n_iter)
        tr["gap"].append(self.gap)
        tr["objective"].append(self.f)
        tr["time_s"].append(self._elapsed)

    def _resync(self):
        # recompute the scalars kept by recursion from the maintained gradients
        it = self._i
        it.fs[_F] = 0.5 * float(it.alpha @ it.g)
        if it.ist[_HASPREV]:
            it.fs[_FP] = 0.5 * float(it.alpha_p @ it.g_p)
            it.fs[_W] = float(it.alpha @ it.g_p)

    def _advance(self, n):
        """Run at most n compiled iterations; returns the status of `_iterate`."""
        if not self._initialised:
            self.initialize()
        t = time.perf_counter()
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
            if status == NONFINITE:
                self._record()
                break
            if status == CONVERGED or since_record >= self.trace_every \
                    or self.n_iter >= self.max_iter:
                self._resync()
                self._record()
                since_record = 0
            if status == CONVERGED:
                break
        else:
            self.stopped = "max_iter"
        if self.stopped == "interrupted" and since_record:
            self._resync()
            self._record()
        return self

    @property
    def trace(self):
        return {k: np.asarray(v, dtype=np.int64 if k == "iteration" else np.float64)
                for k, v in self._trace.items()}

    @property
    def cache_stats(self):
        ctr = self._c.counters
        return {"hits": int(ctr[_HITS]), "misses": int(ctr[_MISSES]),
                "prefetched": int(ctr[_PREFETCHED]), "slots": int(self._c.cols.shape[0])}


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
