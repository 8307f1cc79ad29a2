"""Compiled block updates of the block-coordinate engine.

Every block step of the engine (FW, pairwise, away) moves w_i along a direction

    d = a * w_i + b1 * s1 + b2 * s2          (s1, s2 sparse corners psi, already in R^d)

with the loss part d_l, and w along the same d (w = sum_i w_i).  The optimal
step is the closed-form line search of Alg. 1 line 7 (BCFW) generalised to any
direction:  gamma = (d_l - lam <w, d>) / (lam ||d||^2), clipped to [0, gamma_max].
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .._linalg import sparse_dot_dense, sparse_dot_sparse_scattered


@njit(cache=True, fastmath=True, nogil=True)
def _dot_and_sqnorm(a, b):
    """(<a, b>, ||a||^2) in one sweep (fastmath lets the reductions vectorise)."""
    s = 0.0
    q = 0.0
    for j in range(a.shape[0]):
        s += a[j] * b[j]
        q += a[j] * a[j]
    return s, q


@njit(cache=True, fastmath=True, nogil=True)
def _axpy_row(v, w, c):
    """w += c * v (v is read only)."""
    for j in range(v.shape[0]):
        w[j] += c * v[j]


@njit(cache=True, fastmath=True, nogil=True)
def _axpy_row_avg(v, w, u, c, cu):
    """As _axpy_row, and the lazy average buffer u -= cu * (c * v)."""
    for j in range(v.shape[0]):
        step = c * v[j]
        w[j] += step
        u[j] -= cu * step


@njit(cache=True, inline="always")
def step_along(slope, nrm, lam, gmax, gfixed):
    """Step size along d: the exact line search -slope / (lam ||d||^2) (or the fixed
    step when gfixed >= 0), clipped to [0, gmax]."""
    if gfixed >= 0.0:
        gamma = gfixed
    elif nrm <= 0.0:
        gamma = gmax if slope < 0.0 else 0.0
    else:
        gamma = -slope / (lam * nrm)
    if gamma > gmax:
        gamma = gmax
    if gamma < 0.0:
        gamma = 0.0
    return gamma


#: a block's scale c_i outside [_MIN_SCALE, _MAX_SCALE] is folded into its row (c_i = 1): a
#: dense write, which every step did before rows were scaled, but rare (c_i changes by the
#: factor 1 + gamma a of each step on the block)
_MIN_SCALE, _MAX_SCALE = 1e-12, 1e12


@njit(cache=True, nogil=True, inline="always")
def rescaled_block(vi, c_new):
    """The scale of block i after a step that set it to ``c_new``: 1 with the row folded in
    when c_new is 0 (w_i was replaced: the row is zeroed) or far from 1."""
    if c_new == 0.0:
        vi[:] = 0.0
        return 1.0
    if c_new < _MIN_SCALE or c_new > _MAX_SCALE:
        for j in range(vi.shape[0]):
            vi[j] *= c_new
        return 1.0
    return c_new


@njit(cache=True, nogil=True, inline="always")
def add_block_entries(w, vi, u, inv_c, idx, val, cw, cv):
    """w += cw s and v_i += cv s for s given by entries (idx, val) (repeats add up); the lazy
    average buffer (if any: u non-empty) gets -inv_c times w's change.  An empty v_i is a
    row not kept (see `structfw.solvers._fastpass.general_chunk`)."""
    has_u = u.shape[0] > 0
    has_v = vi.shape[0] > 0
    for t in range(idx.shape[0]):
        j = idx[t]
        step = cw * val[t]
        w[j] += step
        if has_v:
            vi[j] += cv * val[t]
        if has_u:
            u[j] -= inv_c * step


@njit(cache=True, nogil=True)
def dense_block_step(w, vi, ci, a, i1, v1, b1, i2, v2, b2, dl, lam, gmax, gfixed, u, inv_c):
    """Step on block i with w_i stored densely and scaled, w_i = c_i v_i; updates w, v_i (and u)
    in place and returns the new c_i.

    Along d = a w_i + b1 s1 + b2 s2 the new block part w_i + gamma d is c_i' v_i' with
    c_i' = (1 + gamma a) c_i and v_i' = v_i + gamma (b1 s1 + b2 s2) / c_i': a step reads the
    row (for <w_i, w>, ||w_i||^2 and the update of w) but writes only the corners' entries.
    The rows do not fit in any cache (OCR: 6,251 rows of 32 KB), so writing each row back
    cost ~0.7 us of a ~12.5 us block iteration.

    Parameters
    ----------
    w : float64[d]
        The weight vector.
    vi, ci : float64[d], float
        Block i's part w_i = A alpha_[i] = ci * vi.
    a, b1, b2 : float
        Direction d = a w_i + b1 s1 + b2 s2 (s1 = (i1, v1), s2 = (i2, v2) sparse).
    dl : float
        Loss part of the direction (change of l_i per unit step).
    lam : float
    gmax : float
        Largest feasible step (1 for FW, alpha of the away corner for pairwise).
    gfixed : float
        If >= 0 use this step (predefined 2n/(k+2n)) instead of line search.
    u, inv_c : float64[d] or empty, float
        Lazy averaging buffer (see averaging.py): u -= inv_c * gamma * d.

    Returns
    -------
    gamma : float
    slope : float
        lam <w, d> - d_l, the directional derivative at gamma = 0 (minus the gap
        along d).
    c_i' : float
    """
    return scored_block_step(w, vi, ci, a, i1, v1, b1, sparse_dot_dense(i1, v1, w), i2, v2, b2,
                             sparse_dot_dense(i2, v2, w), dl, lam, gmax, gfixed, u, inv_c, np.empty(0))


@njit(cache=True, nogil=True)
def scored_block_step(w, vi, ci, a, i1, v1, b1, s1w, i2, v2, b2, s2w, dl, lam, gmax, gfixed, u, inv_c, scratch):
    """`dense_block_step` for a caller that has scored the corners, s1w = <s1, w> and
    s2w = <s2, w> (the oracle check, the best-corner search and the away search do), so
    they are not gathered from w again, and that lends a zero ``scratch`` of w's length for
    <s1, s2> (`structfw._linalg.sparse_dot_sparse_scattered`); the same arithmetic
    to the bit."""
    wd = 0.0
    ww = 0.0
    if a != 0.0:
        vw, vv = _dot_and_sqnorm(vi, w)
        wd = a * (ci * vw)
        ww = ci * ci * vv
    wd += b1 * s1w + b2 * s2w
    nrm = a * a * ww + b1 * b1 * np.dot(v1, v1) + b2 * b2 * np.dot(v2, v2)
    if a != 0.0:
        nrm += 2.0 * a * b1 * (ci * sparse_dot_dense(i1, v1, vi)) + 2.0 * a * b2 * (ci * sparse_dot_dense(i2, v2, vi))
    nrm += 2.0 * b1 * b2 * sparse_dot_sparse_scattered(i1, v1, i2, v2, scratch)
    slope = lam * wd - dl
    gamma = step_along(slope, nrm, lam, gmax, gfixed)
    if gamma == 0.0:
        return gamma, slope, ci
    # the dense part a*w_i first: it reads the row before the sparse parts move it
    c_new = ci
    if a != 0.0:
        if u.shape[0] > 0:
            _axpy_row_avg(vi, w, u, gamma * a * ci, inv_c)
        else:
            _axpy_row(vi, w, gamma * a * ci)
        c_new = rescaled_block(vi, (1.0 + gamma * a) * ci)
    add_block_entries(w, vi, u, inv_c, i1, v1, gamma * b1, gamma * b1 / c_new)
    add_block_entries(w, vi, u, inv_c, i2, v2, gamma * b2, gamma * b2 / c_new)
    return gamma, slope, c_new


@njit(cache=True, fastmath=True)
def dense_dot(a, b):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j] * b[j]
    return s


@njit(cache=True)
def fenwick_build(values):
    n = values.shape[0]
    tree = np.zeros(n + 1)
    for i in range(n):
        j = i + 1
        while j <= n:
            tree[j] += values[i]
            j += j & (-j)
    return tree


@njit(cache=True, inline="always")
def fenwick_add(tree, i, delta):
    n = tree.shape[0] - 1
    j = i + 1
    while j <= n:
        tree[j] += delta
        j += j & (-j)


@njit(cache=True, inline="always")
def fenwick_find(tree, target):
    """Smallest i with prefix sum(values[:i+1]) > target."""
    n = tree.shape[0] - 1
    pos = 0
    step = 1
    while step * 2 <= n:
        step *= 2
    while step > 0:
        nxt = pos + step
        if nxt <= n and tree[nxt] <= target:
            pos = nxt
            target -= tree[nxt]
        step //= 2
    return min(pos, n - 1)


@njit(cache=True, nogil=True)
def projected_slope(v, idx, val, nonneg, lam, dl, gamma):
    """f'(gamma) = d_l - lam <Pi(v + gamma d), d> of the constrained dual along d.

    Pi clips the coordinates marked in ``nonneg`` at 0 (w_S >= 0); d is given by its
    entries (idx, val) with unique indices.  f' is non-increasing in gamma (D is concave)."""
    s = 0.0
    for t in range(idx.shape[0]):
        j = idx[t]
        x = v[j] + gamma * val[t]
        if nonneg[j] and x < 0.0:
            x = 0.0
        s += x * val[t]
    return dl - lam * s


@njit(cache=True, nogil=True)
def projected_line_search(v, idx, val, nonneg, lam, dl, gmax):
    """argmax_{gamma in [0, gmax]} D(alpha + gamma d) for the dual with w = Pi(A alpha), w_S >= 0.

    D(alpha) = -lam/2 ||Pi(v)||^2 + l is concave and piecewise quadratic along d with a
    breakpoint where a coordinate of S crosses 0 (gamma_j = -v_j / d_j): between
    breakpoints f' is linear, so the root is found exactly on the bracketing piece."""
    if projected_slope(v, idx, val, nonneg, lam, dl, 0.0) <= 0.0:
        return 0.0
    if projected_slope(v, idx, val, nonneg, lam, dl, gmax) >= 0.0:
        return gmax
    nb = 0
    bps = np.empty(idx.shape[0] + 1)
    for t in range(idx.shape[0]):
        j = idx[t]
        if nonneg[j] and val[t] != 0.0:
            g = -v[j] / val[t]
            if 0.0 < g < gmax:
                bps[nb] = g
                nb += 1
    bps[nb] = gmax
    nb += 1
    pts = np.sort(bps[:nb])
    lo = 0.0
    f_lo = projected_slope(v, idx, val, nonneg, lam, dl, 0.0)
    for q in range(nb):
        hi = pts[q]
        f_hi = projected_slope(v, idx, val, nonneg, lam, dl, hi)
        if f_hi <= 0.0:
            # f' is linear on [lo, hi]: its root there
            if f_lo == f_hi:
                return lo
            return lo + (hi - lo) * f_lo / (f_lo - f_hi)
        lo, f_lo = hi, f_hi
    return gmax


@njit(cache=True, nogil=True)
def project_nonneg(v, w, nonneg_idx):
    """w = Pi(v): v with the coordinates of S clipped at 0."""
    w[:] = v
    for t in range(nonneg_idx.shape[0]):
        j = nonneg_idx[t]
        if w[j] < 0.0:
            w[j] = 0.0


@njit(cache=True, nogil=True, inline="always")
def fenwick_total(tree):
    """Sum of all n values: the tree nodes on the path from n."""
    n = tree.shape[0] - 1
    s = 0.0
    j = n
    while j > 0:
        s += tree[j]
        j -= j & (-j)
    return s


@njit(cache=True, nogil=True, inline="always")
def first_argmax(values):
    """Index of the largest value, the first on ties (as np.argmax on NaN-free values): the
    max-gap sampler's block.  A loop rather than np.argmax, whose two overload layers cost
    every compiled pass ~0.15 s of a first run."""
    best = 0
    for j in range(1, values.shape[0]):
        if values[j] > values[best]:
            best = j
    return best
