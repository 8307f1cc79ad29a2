"""2-D grid (4-connected) kernels: unary scores, energies, approximate max-product.

Scores are maximised.  For a grid of h x w cells with unary scores U (h, w, S),
horizontal pair scores ``w[offH + a*S + b]`` (left cell a, right cell b) and
vertical pair scores ``w[offV + a*S + b]`` (upper cell a, lower cell b), the
score of a labelling y is

    E(y) = sum_c U[c, y_c] + sum_{horizontal (c, c')} PH[y_c, y_c'] + sum_{vertical} PV[y_c, y_c'].

Exact maximisation is NP-hard in general; `grid_max_product` runs loopy
max-product (damped, synchronous) and then *block ICM*: every row, then every
column, is re-labelled exactly by Viterbi with the rest of the grid fixed, until
no row or column improves.  Block ICM never decreases E, so starting it from a
given labelling (e.g. the ground truth) gives a result at least as good.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .chain import _viterbi_core, append_coalesced, edge_label_diff, unary_diff_dense


@njit(cache=True, fastmath=True, nogil=True)
def grid_unary(x, w, S, F, y_true, augment):
    """U[i, j, s] = ⟨x[i, j], w[s*F:(s+1)*F]⟩ (+ 1/(h*w) when s != y_true[i, j])."""
    h, wd = x.shape[0], x.shape[1]
    U = np.empty((h, wd, S))
    c = 1.0 / (h * wd) if h * wd > 0 else 0.0
    for i in range(h):
        for j in range(wd):
            for s in range(S):
                acc = 0.0
                base = s * F
                for f in range(F):
                    acc += x[i, j, f] * w[base + f]
                if augment and s != y_true[i, j]:
                    acc += c
                U[i, j, s] = acc
    return U


@njit(cache=True, nogil=True)
def grid_energy(U, w, offH, offV, y):
    h, wd, S = U.shape
    e = 0.0
    for i in range(h):
        for j in range(wd):
            e += U[i, j, y[i, j]]
            if j + 1 < wd:
                e += w[offH + y[i, j] * S + y[i, j + 1]]
            if i + 1 < h:
                e += w[offV + y[i, j] * S + y[i + 1, j]]
    return e


@njit(cache=True, nogil=True)
def grid_block_icm(U, w, offH, offV, y, max_sweeps):
    """Improve y in place by exact row / column updates (Viterbi); returns its energy."""
    h, wd, S = U.shape
    e = grid_energy(U, w, offH, offV, y)
    R = np.empty((wd, S))
    C = np.empty((h, S))
    for _ in range(max_sweeps):
        for i in range(h):
            for j in range(wd):
                for s in range(S):
                    v = U[i, j, s]
                    if i > 0:
                        v += w[offV + y[i - 1, j] * S + s]
                    if i + 1 < h:
                        v += w[offV + s * S + y[i + 1, j]]
                    R[j, s] = v
            r, _ = _viterbi_core(R, w, offH, S)
            for j in range(wd):
                y[i, j] = r[j]
        for j in range(wd):
            for i in range(h):
                for s in range(S):
                    v = U[i, j, s]
                    if j > 0:
                        v += w[offH + y[i, j - 1] * S + s]
                    if j + 1 < wd:
                        v += w[offH + s * S + y[i, j + 1]]
                    C[i, s] = v
            col, _ = _viterbi_core(C, w, offV, S)
            for i in range(h):
                y[i, j] = col[i]
        e_new = grid_energy(U, w, offH, offV, y)
        if e_new <= e + 1e-12 * (1.0 + abs(e)):
            e = e_new
            break
        e = e_new
    return e


@njit(cache=True, nogil=True)
def _normalise(m, i, j, S):
    mx = m[i, j, 0]
    for s in range(1, S):
        if m[i, j, s] > mx:
            mx = m[i, j, s]
    for s in range(S):
        m[i, j, s] -= mx


@njit(cache=True, nogil=True)
def _send(U, m1, m2, m3, si, sj, w, off, sender_first, out, i, j, t):
    """Max-product message into (i, j) from its neighbour (si, sj).

    The sender's unary plus the messages m1, m2, m3 it received from its other
    neighbours, maximised over the sender's label a through the edge weights:
    w[off + a*S + b] when the sender is the edge's first (left/upper) node,
    w[off + b*S + a] otherwise.  Written to out[i, j, :], normalised."""
    S = t.shape[0]
    for a in range(S):
        t[a] = U[si, sj, a] + m1[si, sj, a] + m2[si, sj, a] + m3[si, sj, a]
    for b in range(S):
        best = -np.inf
        for a in range(S):
            k = off + a * S + b if sender_first else off + b * S + a
            v = t[a] + w[k]
            if v > best:
                best = v
        out[i, j, b] = best
    _normalise(out, i, j, S)


@njit(cache=True, nogil=True)
def grid_loopy_bp(U, w, offH, offV, n_iter, damping):
    """Damped synchronous loopy max-product; returns the belief argmax labelling."""
    h, wd, S = U.shape
    mL = np.zeros((h, wd, S))  # into (i, j) from (i, j-1)
    mR = np.zeros((h, wd, S))  # into (i, j) from (i, j+1)
    mU = np.zeros((h, wd, S))  # into (i, j) from (i-1, j)
    mD = np.zeros((h, wd, S))  # into (i, j) from (i+1, j)
    nL = np.zeros((h, wd, S))
    nR = np.zeros((h, wd, S))
    nU = np.zeros((h, wd, S))
    nD = np.zeros((h, wd, S))
    t = np.empty(S)
    for _ in range(n_iter):
        for i in range(h):
            for j in range(wd):
                # each message into (i, j) excludes what the sender got from (i, j) itself
                if j > 0:
                    _send(U, mL, mU, mD, i, j - 1, w, offH, True, nL, i, j, t)
                if j + 1 < wd:
                    _send(U, mR, mU, mD, i, j + 1, w, offH, False, nR, i, j, t)
                if i > 0:
                    _send(U, mU, mL, mR, i - 1, j, w, offV, True, nU, i, j, t)
                if i + 1 < h:
                    _send(U, mD, mL, mR, i + 1, j, w, offV, False, nD, i, j, t)
        for i in range(h):
            for j in range(wd):
                for s in range(S):
                    mL[i, j, s] = damping * mL[i, j, s] + (1.0 - damping) * nL[i, j, s]
                    mR[i, j, s] = damping * mR[i, j, s] + (1.0 - damping) * nR[i, j, s]
                    mU[i, j, s] = damping * mU[i, j, s] + (1.0 - damping) * nU[i, j, s]
                    mD[i, j, s] = damping * mD[i, j, s] + (1.0 - damping) * nD[i, j, s]
    y = np.empty((h, wd), np.int64)
    for i in range(h):
        for j in range(wd):
            best = 0
            bv = -np.inf
            for s in range(S):
                v = U[i, j, s] + mL[i, j, s] + mR[i, j, s] + mU[i, j, s] + mD[i, j, s]
                if v > bv:
                    bv = v
                    best = s
            y[i, j] = best
    return y


@njit(cache=True, nogil=True)
def grid_max_product(U, w, offH, offV, y_init, use_init, n_iter, damping, max_sweeps):
    """Approximate argmax of E: the best of block ICM started from (a) the unary
    argmax, (b) the loopy max-product labelling, (c) ``y_init`` when ``use_init``.
    Returns (y, E(y))."""
    h, wd, S = U.shape
    y = np.empty((h, wd), np.int64)
    for i in range(h):
        for j in range(wd):
            best = 0
            for s in range(1, S):
                if U[i, j, s] > U[i, j, best]:
                    best = s
            y[i, j] = best
    e = grid_block_icm(U, w, offH, offV, y, max_sweeps)
    if n_iter > 0:
        z = grid_loopy_bp(U, w, offH, offV, n_iter, damping)
        ez = grid_block_icm(U, w, offH, offV, z, max_sweeps)
        if ez > e:
            y, e = z, ez
    if use_init:
        z = y_init.copy()
        ez = grid_block_icm(U, w, offH, offV, z, max_sweeps)
        if ez > e:
            y, e = z, ez
    return y, e


@njit(cache=True, nogil=True)
def grid_phi_diff(x, ya, yb, S, F, offH, offV):
    """Sparse phi(x, ya) - phi(x, yb) of the grid model for dense x (h, w, F),
    touching only differing cells/edges; labels < 0 in yb mean "absent"."""
    h, wd = x.shape[0], x.shape[1]
    n_edges = 2 * h * wd
    # the unary part is the chain's, over the cells in row-major order
    out_i, out_v, m = unary_diff_dense(x.reshape(h * wd, F), ya.reshape(h * wd), yb.reshape(h * wd),
                                       S, F, 2 * n_edges)
    ti = np.empty(2 * n_edges, np.int64)
    tv = np.empty(2 * n_edges)
    n = 0
    for i in range(h):
        for j in range(wd):
            for dirn in range(2):
                if dirn == 0:
                    if j + 1 >= wd:
                        continue
                    i2, j2, off = i, j + 1, offH
                else:
                    if i + 1 >= h:
                        continue
                    i2, j2, off = i + 1, j, offV
                n = edge_label_diff(ya[i, j], ya[i2, j2], yb[i, j], yb[i2, j2], off, S, ti, tv, n)
    # pairwise indices all follow the unary ones, so appending keeps the order
    m = append_coalesced(ti, tv, n, out_i, out_v, m)
    return out_i[:m].copy(), out_v[:m].copy()
