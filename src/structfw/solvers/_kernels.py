"""Compiled block updates of the block-coordinate engine.

Every block step of the engine (FW, pairwise, away) moves w_i along a direction

    d = a * w_i + b1 * s1 + b2 * s2          (s1, s2 sparse corners psi, already in R^d)

with the loss part d_l, and w along the same d (w = sum_i w_i).  The optimal
step is the closed-form line search of Alg. 1 line 7 (BCFW) generalised to any
direction:  gamma = (d_l - lam ⟨w, d⟩) / (lam ||d||^2), clipped to [0, gamma_max].
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from numba.extending import overload

from .._linalg import sparse_dot_dense, sparse_dot_sparse_scattered
from .rows import _layout, row_add_entries, row_axpy_into, row_dot_entries, row_dot_sqnorm, row_rescale
from .rows import dense_dot  # noqa: F401  (re-exported)

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)


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


@njit(cache=True, nogil=True, inline="always")
def _add_to_w(w, u, inv_c, idx, val, cw):
    """w += cw s for s given by entries (idx, val) (repeats add up); the lazy average buffer (if
    any: u non-empty) gets -inv_c times w's change."""
    has_u = u.shape[0] > 0
    for t in range(idx.shape[0]):
        j = idx[t]
        step = cw * val[t]
        w[j] += step
        if has_u:
            u[j] -= inv_c * step


@njit(cache=True, nogil=True, inline="always")
def _sqsum(v):
    """sum_j v_j^2 in index order.  Not np.dot: numba hands that to BLAS, whose ddot sums in
    the order of the kernel OpenBLAS picks for the CPU (AVX2 and AVX-512 kernels differ in the
    last bit), and a corner's ||psi||^2 feeds the step size, so the iterates would depend on
    the CPU (tests/test_engine_reference.py's synthetic fits did)."""
    s = 0.0
    for j in range(v.shape[0]):
        s += v[j] * v[j]
    return s


#: the second corner of a step that has one corner (FW, away): no entries, no weight
NO_CORNER = (_EMPTY_I, _EMPTY_V, 0.0, 0.0)


@njit(cache=True, nogil=True)
def block_step(w, B, i, a, s1, s2, dl, rule, avg, scratch):
    """The block step of the engine, for every step kind and every layout of the w_i.

    Block i's part is w_i = c_i v_i with c_i = B[0][i] and v_i a row of the layout B
    (`structfw.solvers.rows`: dense rows, sparse rows, or none for passes that never read
    them).  Along d = a w_i + b1 s1 + b2 s2 (corners in w-space, FW: a = -1, pairwise: a = 0,
    away: a = 1) the closed-form line search gamma = (d_l - lam ⟨w, d⟩) / (lam ||d||^2),
    clipped to [0, gmax] (Alg. 1 line 7 of Lacoste-Julien et al. 2013, generalised to any
    direction), or the fixed step gfixed >= 0.  The new part w_i + gamma d is c_i' v_i' with
    c_i' = (1 + gamma a) c_i and v_i' = v_i + gamma (b1 s1 + b2 s2) / c_i': a step reads the
    row (for ⟨w_i, w⟩, ||w_i||^2 and the update of w) but writes only the corners' entries.
    w (and the lazy average u, u -= inv_c gamma d) move along the same d.

    Parameters
    ----------
    w, B, i : w, the layout of the w_i and the block
    a : float            the coefficient of w_i in d
    s1, s2 : tuples      (indices, values, b, ⟨s, w⟩): a corner, its coefficient in d and its
                         score at w, which the caller has (the oracle check, the best-corner
                         and away searches score the corners); `NO_CORNER` when there is one
    dl : float           d_l, the loss part of the direction
    rule : tuple         (lam, gmax, gfixed): gfixed < 0 for the line search
    avg : tuple          (u, inv_c): the lazy average buffer (empty: none) and 1 / its scale
    scratch : float64[d] zeros, for ⟨s1, s2⟩ (`structfw._linalg.sparse_dot_sparse_scattered`)

    With sparse rows the corners' indices are sorted and unique and the row has room for them
    (`rows.row_room`).

    Returns
    -------
    gamma : float
    slope : float
        lam ⟨w, d⟩ - d_l, the directional derivative at gamma = 0 (minus the gap along d).
    """
    i1, v1, b1, s1w = s1
    i2, v2, b2, s2w = s2
    lam, gmax, gfixed = rule
    u, inv_c = avg[0], avg[1]
    scales = B[0]
    ci = scales[i]
    wd = 0.0
    ww = 0.0
    if a != 0.0:
        vw, vv = row_dot_sqnorm(B, i, w)
        wd = a * (ci * vw)
        ww = ci * ci * vv
    wd += b1 * s1w + b2 * s2w
    nrm = a * a * ww + b1 * b1 * _sqsum(v1) + b2 * b2 * _sqsum(v2)
    if a != 0.0:
        nrm += 2.0 * a * b1 * (ci * row_dot_entries(B, i, i1, v1)) + 2.0 * a * b2 * (ci * row_dot_entries(B, i, i2, v2))
    nrm += 2.0 * b1 * b2 * sparse_dot_sparse_scattered(i1, v1, i2, v2, scratch)
    slope = lam * wd - dl
    gamma = step_along(slope, nrm, lam, gmax, gfixed)
    if gamma == 0.0:
        return gamma, slope
    # the dense part a*w_i first: it reads the row before the sparse parts move it
    c_new = ci
    if a != 0.0:
        row_axpy_into(B, i, w, u, gamma * a * ci, inv_c)
        mirror_row(avg, w, B, i)  # before the rescale, which may empty the row
        c_new = row_rescale(B, i, (1.0 + gamma * a) * ci)
    _add_to_w(w, u, inv_c, i1, v1, gamma * b1)
    mirror_entries(avg, w, i1)
    row_add_entries(B, i, i1, v1, gamma * b1 / c_new)
    _add_to_w(w, u, inv_c, i2, v2, gamma * b2)
    mirror_entries(avg, w, i2)
    row_add_entries(B, i, i2, v2, gamma * b2 / c_new)
    scales[i] = c_new
    return gamma, slope


# ---------------------------------------------------------------- the unary weights' mirror
# A pass over sparse chain inputs may keep a feature-major copy WT (F, S) of w's unary weights,
# WT[f, s] = w[s F + f], for its oracle (`structfw.oracles.compiled.corner_fm`: a feature's S
# weights adjacent instead of S cache lines apart).  It comes as a third field of the step's
# ``avg`` tuple, (u, inv_c, WT); every entry of w a step writes is copied to it after the write
# (a copy, not the same update: equal to the bit whatever the arithmetic's contraction).  With a
# 2-tuple ``avg`` (every other pass) the mirror calls compile to nothing.
def mirror_entries(avg, w, idx):  # pragma: no cover - resolved by the overload
    """WT[f, s] = w[s F + f] for the unary entries among ``idx``."""
    raise NotImplementedError


def mirror_row(avg, w, B, i):  # pragma: no cover - resolved by the overload
    """`mirror_entries` for the entries of row i of the layout B (all of w's for dense rows)."""
    raise NotImplementedError


@njit(cache=True, nogil=True, inline="always")
def _mirror(WT, w, j):
    F, S = WT.shape
    if j < F * S:
        s = j // F
        WT[j - s * F, s] = w[j]


def _has_mirror(avg):
    return isinstance(avg, types.BaseTuple) and len(avg.types) > 2


@overload(mirror_entries, inline="always", jit_options={"nogil": True})
def _ov_mirror_entries(avg, w, idx):
    if not _has_mirror(avg):
        return lambda avg, w, idx: None

    def impl(avg, w, idx):
        WT = avg[2]
        if WT.shape[0] > 0:
            for t in range(idx.shape[0]):
                _mirror(WT, w, idx[t])
    return impl


@overload(mirror_row, inline="always", jit_options={"nogil": True})
def _ov_mirror_row(avg, w, B, i):
    kind = _layout(B)
    if not _has_mirror(avg) or kind == "none":
        return lambda avg, w, B, i: None
    if kind == "dense":
        def dense(avg, w, B, i):
            WT = avg[2]
            if WT.shape[0] > 0:
                for j in range(WT.shape[0] * WT.shape[1]):
                    _mirror(WT, w, j)
        return dense

    def sparse(avg, w, B, i):
        WT = avg[2]
        if WT.shape[0] > 0:
            start, nnz, idx = B[1][i], B[2][i], B[4]
            for t in range(start, start + nnz):
                _mirror(WT, w, idx[t])
    return sparse


def scored_step(w, B, i, a, s1, b1, s2, b2, dl, rule, avg):
    """`block_step` from Python with corners given as (indices, values) pairs (or None): scores
    them at w first.  ``rule`` = (lam, gmax, gfixed), ``avg`` = (u, inv_c).  Returns gamma."""
    c1, c2 = NO_CORNER, NO_CORNER
    if s1 is not None:
        c1 = (s1[0], s1[1], b1, sparse_dot_dense(s1[0], s1[1], w))
    if s2 is not None:
        c2 = (s2[0], s2[1], b2, sparse_dot_dense(s2[0], s2[1], w))
    gamma, _ = block_step(w, B, i, a, c1, c2, dl, rule, avg, _EMPTY_V)
    return gamma


@njit(cache=True, nogil=True)
def cache_hit(ghat, g_oracle, full_gap, F, nu, n):
    """The gap-based cache's hit rule (Osokin et al. 2016, Sec. 3.3): the best cached corner is
    used when its block gap estimate ghat reaches max(F g_i, nu/n g), with g_i the block gap
    at block i's last oracle call and g the last full gap."""
    return ghat >= max(F * g_oracle, nu / n * full_gap)


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
    """f'(gamma) = d_l - lam ⟨Pi(v + gamma d), d⟩ of the constrained dual along d.

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
