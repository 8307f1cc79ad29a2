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

from .._linalg import sparse_dot_dense, sparse_dot_sparse


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
def _scale_into(wi, w, c):
    """w += c * wi ; wi += c * wi."""
    for j in range(wi.shape[0]):
        step = c * wi[j]
        w[j] += step
        wi[j] += step


@njit(cache=True, fastmath=True, nogil=True)
def _scale_into_avg(wi, w, u, c, cu):
    """As _scale_into, and the lazy average buffer u -= cu * (c * wi)."""
    for j in range(wi.shape[0]):
        step = c * wi[j]
        w[j] += step
        u[j] -= cu * step
        wi[j] += step


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


@njit(cache=True)
def dense_block_step(w, wi, a, i1, v1, b1, i2, v2, b2, dl, lam, gmax, gfixed, u, inv_c):
    """Step on block i with w_i stored densely; updates w, w_i (and u) in place.

    Parameters
    ----------
    w, wi : float64[d]
        The weight vector and block i's part w_i = A alpha_[i].
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
    """
    wd = 0.0
    ww = 0.0
    if a != 0.0:
        wd, ww = _dot_and_sqnorm(wi, w)
        wd *= a
    wd += b1 * sparse_dot_dense(i1, v1, w) + b2 * sparse_dot_dense(i2, v2, w)
    nrm = a * a * ww + b1 * b1 * np.dot(v1, v1) + b2 * b2 * np.dot(v2, v2)
    if a != 0.0:
        nrm += 2.0 * a * b1 * sparse_dot_dense(i1, v1, wi) + 2.0 * a * b2 * sparse_dot_dense(i2, v2, wi)
    nrm += 2.0 * b1 * b2 * sparse_dot_sparse(i1, v1, i2, v2)
    slope = lam * wd - dl
    gamma = step_along(slope, nrm, lam, gmax, gfixed)
    if gamma == 0.0:
        return gamma, slope
    has_u = u.shape[0] > 0
    # the dense part a*w_i first: it must use w_i before the sparse parts move it
    if a != 0.0:
        if has_u:
            _scale_into_avg(wi, w, u, gamma * a, inv_c)
        else:
            _scale_into(wi, w, gamma * a)
    add_scaled_entries(w, wi, u, inv_c, i1, v1, gamma * b1)
    add_scaled_entries(w, wi, u, inv_c, i2, v2, gamma * b2)
    return gamma, slope


@njit(cache=True, nogil=True, inline="always")
def add_scaled_entries(w, wi, u, inv_c, idx, val, c):
    """w += c v and w_i += c v for v given by entries (idx, val) (repeats add up); the lazy
    average buffer (if any: u non-empty) gets -inv_c times the same change."""
    has_u = u.shape[0] > 0
    for t in range(idx.shape[0]):
        step = c * val[t]
        j = idx[t]
        w[j] += step
        wi[j] += step
        if has_u:
            u[j] -= inv_c * step


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
