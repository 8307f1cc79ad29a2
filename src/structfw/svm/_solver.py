"""Frank-Wolfe solvers for the L2-SVM dual on the unit simplex (Frandi et al. 2015).

Problem (5) of the paper::

    min_alpha f(alpha) = 1/2 alpha^T Kt alpha   s.t.  sum(alpha) = 1, alpha >= 0,

with the modified (core-vector-machine) kernel
``Kt_ij = y_i y_j (k(x_i, x_j) + 1) + delta_ij / C``.
The gradient g = Kt alpha is kept up to date from kernel columns (one column of Kt per
step, served by a bounded LRU cache).  Because ``alpha^T g = 2 f`` the duality gap (3)
is ``gap = 2 f - min_i g_i`` (the paper's (9) is the same quantity written for the
maximisation form).

Methods (integers in the numba core):

0 ``fw``      Algorithm 1, FW vertex ``e_i``, i = argmin g, exact line search;
1 ``mfw``     modified FW: away direction ``alpha - e_v`` (v = argmax of g over the
              support) when its slope ``2f - g_v`` beats the FW slope ``g_i - 2f``;
              exact line search clipped at the drop step ``alpha_v / (1 - alpha_v)``;
2 ``swap``    pairwise direction ``e_i - e_v``, chosen greedily against the FW step
              by the objective decrease each achieves with its exact line search;
3 ``partan``  Algorithm 2: FW step (7) with the closed form (11)-(12), then the
              PARTAN step (8) along ``alpha~ - alpha^(k-1)`` with the closed forms
              (13)-(15).  Our ``W = alpha^(k)T Kt alpha^(k-1)`` is minus the paper's W
              (its (14) carries the sign of a maximisation); the step mu is clipped to
              the interval that keeps ``alpha^(k+1)`` in the simplex.

All hot loops are compiled with numba (``cache=True``); the Python driver runs them in
chunks of ``trace_every`` iterations to record a trace with wall-clock time.
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit

from ._kernels import kernel_column, kernel_from_dots

METHODS = {"fw": 0, "mfw": 1, "swap": 2, "partan": 3}

# int state layout (ist)
_IT, _CLOCK, _HASPREV, _HITS, _MISSES, _STEPTYPE, _LASTI, _LASTV, _PREFETCHED = range(9)
# float state layout (fs)
_F, _FP, _W, _GAP, _LAM, _MU = range(6)


@njit(cache=True)
def _seed(s):
    np.random.seed(s)


@njit(cache=True)
def _get_col(i, X, sqn, y, kind, gamma, coef0, degree, invC,
             cache, slot_of, idx_of, last_used, ist):
    """Slot of column i of Kt in the LRU cache (computing it on a miss)."""
    ist[_CLOCK] += 1
    s = slot_of[i]
    if s >= 0:
        last_used[s] = ist[_CLOCK]
        ist[_HITS] += 1
        return s
    ist[_MISSES] += 1
    n_slots = cache.shape[0]
    best = 0
    bestt = last_used[0]
    for t in range(n_slots):
        if idx_of[t] < 0:
            best = t
            break
        if last_used[t] < bestt:
            best = t
            bestt = last_used[t]
    if idx_of[best] >= 0:
        slot_of[idx_of[best]] = -1
    col = kernel_column(X, sqn, i, kind, gamma, coef0, degree)
    _store(best, i, col, y, kind, invC, cache, slot_of, idx_of, last_used, ist[_CLOCK])
    return best


@njit(cache=True)
def _store(slot, i, col, y, kind, invC, cache, slot_of, idx_of, last_used, clock):
    m = col.shape[0]
    if kind == 4:
        for j in range(m):
            cache[slot, j] = col[j]
    else:
        yi = y[i]
        for j in range(m):
            cache[slot, j] = yi * y[j] * (col[j] + 1.0)
        cache[slot, i] += invC
    idx_of[slot] = i
    slot_of[i] = slot
    last_used[slot] = clock


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
def _prefetch(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
              cache, slot_of, idx_of, last_used, ist, XT):
    """On a miss of column i, compute it together with the columns of the block-1
    uncached indices of smallest gradient (the likeliest next FW vertices) in one
    matrix-matrix product (BLAS-3 instead of block memory-bound matrix-vector
    products).  Changes only what is cached, never the iterates."""
    m = g.shape[0]
    nb = max(1, min(block, cache.shape[0] - 2, m))
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
    Xb = np.empty((k, X.shape[1]), X.dtype)
    for r in range(k):
        Xb[r] = X[cand[r]]
    D = np.dot(Xb, XT)
    ist[_CLOCK] += 1
    clock0 = ist[_CLOCK]
    ist[_MISSES] += 1
    ist[_PREFETCHED] += k - 1
    first = -1
    col = np.empty(m)
    for r in range(k):
        c = cand[r]
        slot = _lru_slot(idx_of, last_used, clock0)
        if slot < 0:
            break
        if idx_of[slot] >= 0:
            slot_of[idx_of[slot]] = -1
        kernel_from_dots(D[r], sqn, c, kind, gamma, coef0, degree, col)
        # the requested column is the most recent; prefetched ones are stamped older
        _store(slot, c, col, y, kind, invC, cache, slot_of, idx_of, last_used,
               clock0 if r == 0 else clock0 - 1)
        if r == 0:
            first = slot
    return first


@njit(cache=True)
def _col(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
         cache, slot_of, idx_of, last_used, ist, XT):
    if block > 1 and kind <= 2 and slot_of[i] < 0:
        return _prefetch(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                         cache, slot_of, idx_of, last_used, ist, XT)
    return _get_col(i, X, sqn, y, kind, gamma, coef0, degree, invC,
                    cache, slot_of, idx_of, last_used, ist)


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
def _argmax_support(g, alpha, exclude):
    best = -1
    bestv = -np.inf
    for j in range(g.shape[0]):
        if alpha[j] > 0.0 and j != exclude and g[j] > bestv:
            bestv = g[j]
            best = j
    return best


@njit(cache=True)
def _fw_step_size(f, gi, Kii):
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
def _iterate(n_steps, method, tol, sample_size, n_resample, full_check, block, XT,
             X, sqn, y, kind, gamma, coef0, degree, invC, diag,
             alpha, alpha_p, g, g_p, fs, ist, perm,
             cache, slot_of, idx_of, last_used):
    """Run up to n_steps iterations in place.  Returns 1 when the gap test stopped it."""
    m = g.shape[0]
    sampling = sample_size > 0 and sample_size < m
    for _ in range(n_steps):
        f = fs[_F]
        # ---- linear minimisation oracle (6) / randomised search (10) + stopping test
        i = _argmin_sample(g, sample_size, perm)
        gap = 2.0 * f - g[i]
        if gap <= tol:
            stop = True
            if sampling:
                # safeguard: sample again before trusting a small sampled gap
                for _r in range(n_resample):
                    i2 = _argmin_sample(g, sample_size, perm)
                    if g[i2] < g[i]:
                        i = i2
                    gap = 2.0 * f - g[i]
                    if gap > tol:
                        stop = False
                        break
                if stop and full_check:
                    i = np.argmin(g)
                    gap = 2.0 * f - g[i]
                    if gap > tol:
                        stop = False
            if stop:
                fs[_GAP] = gap
                return 1
        fs[_GAP] = gap
        gi = g[i]
        Kii = diag[i]
        ist[_LASTI] = i
        ist[_LASTV] = -1
        fs[_MU] = 0.0
        steptype = 0
        if method == 0:
            steptype = 0
        elif method == 1:
            v = _argmax_support(g, alpha, -1)
            if v >= 0 and alpha[v] < 1.0 and (2.0 * f - g[v]) < (gi - 2.0 * f):
                steptype = 1
                ist[_LASTV] = v
        elif method == 2:
            v = _argmax_support(g, alpha, i)
            if v >= 0 and g[v] > gi:
                si = _col(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                          cache, slot_of, idx_of, last_used, ist, XT)
                q = Kii + diag[v] - 2.0 * cache[si, v]
                lam_sw = alpha[v]
                if q > 1e-300:
                    lam_sw = min((g[v] - gi) / q, alpha[v])
                dec_sw = lam_sw * (gi - g[v]) + 0.5 * lam_sw * lam_sw * q
                lam_fw = _fw_step_size(f, gi, Kii)
                dec_fw = lam_fw * (gi - 2.0 * f) + 0.5 * lam_fw * lam_fw * (2.0 * f - 2.0 * gi + Kii)
                if dec_sw < dec_fw:
                    steptype = 2
                    ist[_LASTV] = v
        else:
            steptype = 3 if ist[_HASPREV] == 1 else 0

        if steptype == 0:
            # ---- FW step, Algorithm 1 with exact line search
            si = _col(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                      cache, slot_of, idx_of, last_used, ist, XT)
            lam = _fw_step_size(f, gi, Kii)
            fnew = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii
            if method == 3:
                # first PARTAN iteration: remember alpha^(0) for the next PARTAN step
                for j in range(m):
                    alpha_p[j] = alpha[j]
                    g_p[j] = g[j]
                fs[_FP] = f
                fs[_W] = (1.0 - lam) * 2.0 * f + lam * gi   # alpha1^T Kt alpha0
                ist[_HASPREV] = 1
            for j in range(m):
                alpha[j] *= (1.0 - lam)
                g[j] = (1.0 - lam) * g[j] + lam * cache[si, j]
            alpha[i] += lam
            fs[_F] = fnew
            fs[_LAM] = lam
        elif steptype == 1:
            # ---- away step: alpha + lam (alpha - e_v), lam in [0, alpha_v / (1 - alpha_v)]
            v = ist[_LASTV]
            sv = _col(v, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                      cache, slot_of, idx_of, last_used, ist, XT)
            gv = g[v]
            lam_max = alpha[v] / (1.0 - alpha[v])
            den = 2.0 * f - 2.0 * gv + diag[v]
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
                alpha[v] = 0.0
            else:
                alpha[v] -= lam
            fs[_F] = fnew
            fs[_LAM] = lam
        elif steptype == 2:
            # ---- swap (pairwise) step: alpha + lam (e_i - e_v), lam in [0, alpha_v]
            v = ist[_LASTV]
            si = _col(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                      cache, slot_of, idx_of, last_used, ist, XT)
            sv = _col(v, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                      cache, slot_of, idx_of, last_used, ist, XT)
            q = Kii + diag[v] - 2.0 * cache[si, v]
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
        else:
            # ---- PARTAN, Algorithm 2
            si = _col(i, g, block, X, sqn, y, kind, gamma, coef0, degree, invC,
                      cache, slot_of, idx_of, last_used, ist, XT)
            lam = _fw_step_size(f, gi, Kii)                                   # (11)
            ft = (1.0 - lam) ** 2 * f + lam * (1.0 - lam) * gi + 0.5 * lam * lam * Kii  # (12)
            W = fs[_W]
            fp = fs[_FP]
            V = (1.0 - lam) * W + lam * g_p[i]          # alpha~^T Kt alpha^(k-1)
            q = 2.0 * (ft - V + fp)                     # ||alpha~ - alpha^(k-1)||^2_Kt
            mu = 0.0
            if q > 1e-300:
                mu = (V - 2.0 * ft) / q                 # (13)
            # feasibility interval of mu (alpha^(k+1) >= 0)
            lo = -np.inf
            hi = np.inf
            jlo = -1
            jhi = -1
            for j in range(m):
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
        ist[_STEPTYPE] = steptype
        ist[_IT] += 1
    return 0


class SimplexFWSolver:
    """Driver for the numba core: state, kernel-column cache, trace.

    Parameters
    ----------
    X : ndarray (m, d) of features, or (m, m) Gram matrix (``kernel_kind`` 3) or the
        simplex-QP matrix itself (``kernel_kind`` 4, then ``y`` and ``C`` are unused).
    y : ndarray (m,) of +-1.
    kernel_kind, gamma, coef0, degree : see :mod:`structfw.svm._kernels`.
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
    blas_threads : BLAS threads during :meth:`run` (threadpoolctl; None leaves the
        setting alone).  Default 1: the column blocks (block x n_features x m) are too
        small for threads to pay off, and on a loaded machine OpenBLAS threads made the
        fashion-MNIST fit 2-5x slower.
    """

    def __init__(self, X, y, kernel_kind=1, gamma=1.0, coef0=0.0, degree=3, C=1.0,
                 method="partan", tol=1e-4, max_iter=100000, sample_size=None,
                 sample_check="resample", n_resample=2, cache_size=200.0,
                 trace_every=10, seed=0, diag=None, block=16, kernel_dtype="float64",
                 blas_threads=1):
        X = np.require(X, np.float64, ["C", "W"])
        m = X.shape[0]
        kdt = np.dtype(kernel_dtype)
        if kdt not in (np.float32, np.float64):
            raise ValueError(f"kernel_dtype must be 'float32' or 'float64', got {kernel_dtype!r}")
        if int(kernel_kind) not in (0, 1, 2):
            kdt = np.dtype(np.float64)   # Gram / raw matrices are used as given
        self.kernel_dtype = kdt
        # squared norms from the float64 data (the RBF distance is formed in float64)
        self.sqn = (np.einsum("ij,ij->i", X, X) if int(kernel_kind) in (0, 1, 2)
                    else np.zeros(m))
        self.X = X if kdt == np.float64 else np.ascontiguousarray(X, dtype=np.float32)
        self.m = m
        self.y = np.ones(m) if y is None else np.require(y, np.float64, ["C", "W"])
        self.kind = int(kernel_kind)
        self.gamma = float(gamma)
        self.coef0 = float(coef0)
        self.degree = float(degree)
        self.invC = 0.0 if self.kind == 4 else 1.0 / float(C)
        self.method = METHODS[method]
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.sample_size = 0 if sample_size is None else int(sample_size)
        self.full_check = sample_check == "full"
        self.n_resample = int(n_resample)
        self.trace_every = max(1, int(trace_every))
        self.seed = int(seed)
        self.block = int(block)
        self.blas_threads = blas_threads
        self.XT = self.X.T  # F-ordered view for the BLAS-3 block of kernel columns
        if diag is None:
            from ._kernels import kernel_diagonal
            kd = kernel_diagonal(X, self.kind, self.gamma, self.coef0, self.degree)
            diag = kd if self.kind == 4 else kd + 1.0 + self.invC
        self.diag = np.require(diag, np.float64, ["C", "W"])
        n_slots = int(cache_size * 2 ** 20 // (kdt.itemsize * max(m, 1)))
        n_slots = max(2, min(m, n_slots))
        # kernel columns are cached in kernel_dtype; the gradient is accumulated in float64
        self.cache = np.zeros((n_slots, m), kdt)
        self.slot_of = -np.ones(m, np.int64)
        self.idx_of = -np.ones(n_slots, np.int64)
        self.last_used = np.zeros(n_slots, np.int64)
        self.alpha = np.zeros(m)
        self.alpha_p = np.zeros(m)
        self.g = np.zeros(m)
        self.g_p = np.zeros(m)
        self.fs = np.zeros(8)
        self.ist = np.zeros(9, np.int64)
        self.perm = np.arange(m, dtype=np.int64)
        self.converged = False
        self._initialised = False

    # ------------------------------------------------------------------ helpers
    def column(self, i):
        s = _get_col(int(i), self.X, self.sqn, self.y, self.kind, self.gamma, self.coef0,
                     self.degree, self.invC, self.cache, self.slot_of, self.idx_of,
                     self.last_used, self.ist)
        return self.cache[s].astype(np.float64)

    def initialize(self):
        """alpha^(0) = e_i0, i0 = argmin of the diagonal (first index on ties)."""
        _seed(self.seed)
        i0 = int(np.argmin(self.diag))
        self.alpha[:] = 0.0
        self.alpha[i0] = 1.0
        self.g[:] = self.column(i0)
        self.fs[_F] = 0.5 * self.g[i0]
        self.ist[_IT] = 0
        self.ist[_HASPREV] = 0
        self._t0 = time.perf_counter()
        self._elapsed = 0.0
        self._trace = {"iteration": [], "gap": [], "objective": [], "time_s": []}
        self._initialised = True
        self._record()

    @property
    def f(self):
        return float(self.fs[_F])

    @property
    def n_iter(self):
        return int(self.ist[_IT])

    @property
    def gap(self):
        """Exact duality gap (3) at the current iterate."""
        return float(2.0 * self.fs[_F] - self.g.min())

    @property
    def last_step(self):
        return {"type": int(self.ist[_STEPTYPE]), "i": int(self.ist[_LASTI]),
                "v": int(self.ist[_LASTV]), "lam": float(self.fs[_LAM]),
                "mu": float(self.fs[_MU])}

    def _record(self):
        tr = self._trace
        tr["iteration"].append(self.n_iter)
        tr["gap"].append(self.gap)
        tr["objective"].append(self.f)
        tr["time_s"].append(self._elapsed)

    def _resync(self):
        # recompute the scalars kept by recursion from the maintained gradients
        self.fs[_F] = 0.5 * float(self.alpha @ self.g)
        if self.ist[_HASPREV]:
            self.fs[_FP] = 0.5 * float(self.alpha_p @ self.g_p)
            self.fs[_W] = float(self.alpha @ self.g_p)

    def step(self, n=1):
        """Run at most n iterations; returns True when the stopping test fired."""
        if not self._initialised:
            self.initialize()
        t = time.perf_counter()
        status = _iterate(int(n), self.method, self.tol, self.sample_size, self.n_resample,
                          self.full_check, self.block, self.XT, self.X, self.sqn, self.y, self.kind, self.gamma,
                          self.coef0, self.degree, self.invC, self.diag, self.alpha,
                          self.alpha_p, self.g, self.g_p, self.fs, self.ist, self.perm,
                          self.cache, self.slot_of, self.idx_of, self.last_used)
        self._elapsed += time.perf_counter() - t
        self.converged = bool(status == 1)
        return self.converged

    def run(self):
        if self.blas_threads is None:
            return self._run()
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=int(self.blas_threads), user_api="blas"):
            return self._run()

    def _run(self):
        if not self._initialised:
            self.initialize()
        while self.n_iter < self.max_iter:
            n = min(self.trace_every, self.max_iter - self.n_iter)
            done = self.step(n)
            self._resync()
            self._record()
            if done:
                break
        return self

    @property
    def trace(self):
        return {k: np.asarray(v, dtype=np.int64 if k == "iteration" else np.float64)
                for k, v in self._trace.items()}

    @property
    def cache_stats(self):
        return {"hits": int(self.ist[_HITS]), "misses": int(self.ist[_MISSES]),
                "prefetched": int(self.ist[_PREFETCHED]),
                "slots": int(self.cache.shape[0])}


def solve_simplex_qp(Q, method="partan", tol=1e-6, max_iter=1000000, **kw):
    """Minimise 1/2 a^T Q a over the unit simplex (Q symmetric PSD), for tests/low level use.

    Returns the finished :class:`SimplexFWSolver` (``.alpha``, ``.f``, ``.gap``, ``.trace``).
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
        raise ValueError(f"Q must be a square matrix, got shape {Q.shape}")
    s = SimplexFWSolver(Q, None, kernel_kind=4, method=method, tol=tol, max_iter=max_iter,
                        diag=np.diag(Q).copy(), **kw)
    return s.run()
