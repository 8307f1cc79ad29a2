"""Whole-training-set corner kernels: the max oracle and psi of example i in one numba call.

A model that can pack its training set into arrays offers
``compiled_oracle(X, Y) -> (kernel, data)`` (see :class:`structfw.models.base.StructuredModel`);
``kernel(data, i, w)`` returns ``(psi_idx, psi_val, L)`` of the loss-augmented
labelling y_i* = argmax_y H_i(y; w): the corner (psi_i(y_i*), L_i(y_i*)) the
block-coordinate engine moves toward.  The engine's compiled pass
(:mod:`structfw.solvers._fastpass`) calls it without entering Python, so a plain
BCFW pass is one numba call (docs/design.md, "Speed").
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .chain import (chain_oracle_csr, chain_oracle_dense, chain_phi_diff_csr, chain_phi_diff_dense, edge_label_diff,
                    hamming_loss)
from .multiclass import multiclass_oracle, multiclass_phi_diff


# ------------------------------------------------------------------ chain
def pack_chain_dense(X, Y, n_states, n_features):
    """(X stacked (N, F), starts (n+1,), Y stacked (N,), S, F) for dense chain inputs."""
    lengths = np.array([x.shape[0] for x in X], np.int64)
    starts = np.zeros(len(X) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    Xc = np.ascontiguousarray(np.concatenate(X, axis=0), dtype=np.float64)
    Yc = np.ascontiguousarray(np.concatenate(Y), dtype=np.int64)
    return Xc, starts, Yc, np.int64(n_states), np.int64(n_features)


@njit(cache=True, nogil=True)
def chain_dense_corner(data, i, w, merged):
    """Loss-augmented Viterbi on word i and its sparse psi_i(y*) and normalised Hamming loss."""
    Xc, starts, Yc, S, F = data
    a = starts[i]
    b = starts[i + 1]
    x = Xc[a:b]
    yt = Yc[a:b]
    y = chain_oracle_dense(x, w, yt, S, F, True)
    if merged:
        idx, val = chain_phi_diff_dense(x, yt, y, S, F)
    else:
        idx, val = chain_psi_entries(x, yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


@njit(cache=True, nogil=True)
def chain_psi_entries(x, ya, yb, S, F):
    """phi(x, ya) - phi(x, yb) as unmerged (index, value) entries: x_p in block ya_p and
    -x_p in block yb_p at every position where the labels differ, +-1 on changed transitions."""
    L = x.shape[0]
    m = 0
    for p in range(L):
        if ya[p] != yb[p]:
            m += 1
    idx = np.empty(2 * m * F + 4 * L, np.int64)
    val = np.empty(2 * m * F + 4 * L)
    k = 0
    for p in range(L):
        a = ya[p]
        b = yb[p]
        if a == b:
            continue
        for f in range(F):
            v = x[p, f]
            if v != 0.0:
                idx[k] = a * F + f
                val[k] = v
                idx[k + 1] = b * F + f
                val[k + 1] = -v
                k += 2
    for p in range(L - 1):
        k = edge_label_diff(ya[p], ya[p + 1], yb[p], yb[p + 1], S * F, S, idx, val, k)
    return idx[:k], val[:k]


def pack_chain_csr(X, Y, n_states, n_features):
    """The CSR rows of all words stacked: (indptr (N+1,), indices, data, word starts (n+1,), Y (N,), S, F)."""
    import scipy.sparse as sp

    lengths = np.array([x.shape[0] for x in X], np.int64)
    starts = np.zeros(len(X) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    Xs = sp.vstack(X, format="csr")
    Xs.sort_indices()
    return (Xs.indptr.astype(np.int64), Xs.indices.astype(np.int64), Xs.data.astype(np.float64), starts,
            np.ascontiguousarray(np.concatenate(Y), dtype=np.int64), np.int64(n_states), np.int64(n_features))


@njit(cache=True, nogil=True)
def chain_csr_corner(data, i, w, merged):
    """As :func:`chain_dense_corner` for sparse (CSR) position features; psi is always merged."""
    indptr, indices, values, starts, Yc, S, F = data
    a = starts[i]
    b = starts[i + 1]
    ip = indptr[a:b + 1] - indptr[a]
    ix = indices[indptr[a]:indptr[b]]
    vx = values[indptr[a]:indptr[b]]
    yt = Yc[a:b]
    y = chain_oracle_csr(ip, ix, vx, w, yt, S, F, True)
    idx, val = chain_phi_diff_csr(ip, ix, vx, yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


# ------------------------------------------------------------- multiclass
def pack_multiclass_dense(X, Y, n_classes, n_features):
    """(X stacked (n, F), labels (n,), K, F) for dense multiclass inputs."""
    Xc = np.ascontiguousarray(np.vstack(X), dtype=np.float64)
    return Xc, np.asarray(Y, np.int64), np.int64(n_classes), np.int64(n_features)


@njit(cache=True, nogil=True)
def multiclass_dense_corner(data, i, w, merged):
    """argmax_k <w_k, x_i> + [k != y_i], its psi (always merged: two sorted blocks) and the 0-1 loss."""
    Xc, labels, K, F = data
    yt = labels[i]
    y = multiclass_oracle(Xc[i], w, yt, K, F, True)
    idx, val = multiclass_phi_diff(Xc[i], yt, y, F)
    return idx, val, 0.0 if y == yt else 1.0
