"""Whole-training-set corner kernels: the max oracle and psi of example i in one numba call.

A model that can pack its training set into arrays offers
``compiled_oracle(X, Y) -> (kind, data)`` (see :class:`structfw.models.base.StructuredModel`);
:func:`corner` ``(kind, data, i, w, merged)`` returns ``(psi_idx, psi_val, L)`` of the
loss-augmented labelling y_i* = argmax_y H_i(y; w): the corner (psi_i(y_i*), L_i(y_i*)) the
block-coordinate engine moves toward.  The engine's compiled passes
(:mod:`structfw.solvers._fastpass`) call it without entering Python (docs/design.md, "Speed").

Why a kind code and one data layout rather than a kernel function per model: numba cannot
reliably cache a compiled function that takes another compiled function as an argument
(loading it in a new process fails), and an uncached pass kernel would be compiled again in
every process.  Every kind packs its data into the same tuple of typed arrays,
``(F2, F1, I1, I2, I3, I4, S, F)``, using the slots it needs.

With ``merged=False`` ``psi_idx`` may repeat an index (the entries then add up): the plain
pass's step does not need them merged, and merging costs more than half the oracle; corner
sets need them sorted and merged.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .chain import (chain_oracle_csr, chain_oracle_dense, chain_phi_diff_csr, chain_phi_diff_dense, edge_label_diff,
                    hamming_loss)
from .multiclass import multiclass_oracle, multiclass_phi_diff

#: the kinds of compiled corner kernel
CHAIN_DENSE, CHAIN_CSR, MULTICLASS_DENSE = 0, 1, 2

_NO_F2 = np.empty((0, 0))
_NO_F1 = np.empty(0)
_NO_I = np.empty(0, np.int64)


def _layout(F2=_NO_F2, F1=_NO_F1, I1=_NO_I, I2=_NO_I, I3=_NO_I, I4=_NO_I, S=0, F=0):
    return (np.ascontiguousarray(F2, np.float64), np.ascontiguousarray(F1, np.float64),
            np.ascontiguousarray(I1, np.int64), np.ascontiguousarray(I2, np.int64),
            np.ascontiguousarray(I3, np.int64), np.ascontiguousarray(I4, np.int64), np.int64(S), np.int64(F))


def _word_starts(X):
    starts = np.zeros(len(X) + 1, np.int64)
    np.cumsum(np.array([x.shape[0] for x in X], np.int64), out=starts[1:])
    return starts


# ------------------------------------------------------------------ packing
def pack_chain_dense(X, Y, n_states, n_features):
    """CHAIN_DENSE: F2 = the words' positions stacked (N, F), I1 = word starts (n+1,), I2 = labels (N,)."""
    return CHAIN_DENSE, _layout(F2=np.concatenate(X, axis=0), I1=_word_starts(X), I2=np.concatenate(Y),
                                S=n_states, F=n_features)


def pack_chain_csr(X, Y, n_states, n_features):
    """CHAIN_CSR: the CSR rows of all words stacked: I1 = indptr (N+1,), I2 = indices, F1 = values,
    I3 = word starts (n+1,), I4 = labels (N,)."""
    import scipy.sparse as sp

    Xs = sp.vstack(X, format="csr")
    Xs.sort_indices()
    return CHAIN_CSR, _layout(F1=Xs.data, I1=Xs.indptr, I2=Xs.indices, I3=_word_starts(X), I4=np.concatenate(Y),
                              S=n_states, F=n_features)


def pack_multiclass_dense(X, Y, n_classes, n_features):
    """MULTICLASS_DENSE: F2 = the examples (n, F), I2 = labels (n,)."""
    return MULTICLASS_DENSE, _layout(F2=np.vstack(X), I2=np.asarray(Y, np.int64), S=n_classes, F=n_features)


# ------------------------------------------------------------------ kernels
@njit(cache=True, nogil=True)
def corner(kind, data, i, w, merged):
    """(psi_idx, psi_val, L) of the loss-augmented labelling of example i at w."""
    F2, F1, I1, I2, I3, I4, S, F = data
    if kind == CHAIN_DENSE:
        return chain_dense_corner(F2, I1, I2, S, F, i, w, merged)
    if kind == CHAIN_CSR:
        return chain_csr_corner(I1, I2, F1, I3, I4, S, F, i, w)
    return multiclass_dense_corner(F2, I2, S, F, i, w)


@njit(cache=True, nogil=True)
def chain_dense_corner(Xc, starts, Yc, S, F, i, w, merged):
    """Loss-augmented Viterbi on word i, its sparse psi_i(y*) and normalised Hamming loss."""
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
    return idx[:k].copy(), val[:k].copy()


@njit(cache=True, nogil=True)
def chain_csr_corner(indptr, indices, values, starts, Yc, S, F, i, w):
    """As :func:`chain_dense_corner` for sparse (CSR) position features; psi is always merged."""
    a = starts[i]
    b = starts[i + 1]
    ip = indptr[a:b + 1] - indptr[a]
    ix = indices[indptr[a]:indptr[b]]
    vx = values[indptr[a]:indptr[b]]
    yt = Yc[a:b]
    y = chain_oracle_csr(ip, ix, vx, w, yt, S, F, True)
    idx, val = chain_phi_diff_csr(ip, ix, vx, yt, y, S, F)
    return idx, val, hamming_loss(yt, y)


@njit(cache=True, nogil=True)
def multiclass_dense_corner(Xc, labels, K, F, i, w):
    """argmax_k <w_k, x_i> + [k != y_i], its psi (always merged: two sorted blocks) and the 0-1 loss."""
    yt = labels[i]
    y = multiclass_oracle(Xc[i], w, yt, K, F, True)
    idx, val = multiclass_phi_diff(Xc[i], yt, y, F)
    return idx, val, 0.0 if y == yt else 1.0
