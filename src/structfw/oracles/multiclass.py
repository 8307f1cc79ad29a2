"""Multiclass kernels: exhaustive max oracle and the two-block joint-feature difference.

Layout of w for K classes and F features: ``w[k*F + f]``.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)


@njit(cache=True, fastmath=True, nogil=True)
def multiclass_scores(x, w, K, F):
    out = np.empty(K)
    for k in range(K):
        acc = 0.0
        base = k * F
        for f in range(F):
            acc += x[f] * w[base + f]
        out[k] = acc
    return out


@njit(cache=True, nogil=True)
def multiclass_oracle(x, w, y_true, K, F, augment):
    """argmax_k ⟨w_k, x⟩ + [k != y_true] (augment) or argmax_k ⟨w_k, x⟩ (ties: smallest k)."""
    return augmented_argmax(multiclass_scores(x, w, K, F), y_true, augment)


@njit(cache=True, nogil=True)
def augmented_argmax(s, y_true, augment):
    """argmax_k s_k + [k != y_true] (augment) or argmax_k s_k; ties: smallest k."""
    best = 0
    bv = s[0] + (1.0 if augment and y_true != 0 else 0.0)
    for k in range(1, s.shape[0]):
        v = s[k] + (1.0 if augment and y_true != k else 0.0)
        if v > bv:
            bv = v
            best = k
    return best


@njit(cache=True, nogil=True)
def weighted_augmented_argmax(s, y_true, c):
    """argmax_k s_k + c [k != y_true] (c >= 0, the example's loss weight); ties: smallest k."""
    best = 0
    bv = s[0] + (c if y_true != 0 else 0.0)
    for k in range(1, s.shape[0]):
        v = s[k] + (c if y_true != k else 0.0)
        if v > bv:
            bv = v
            best = k
    return best


@njit(cache=True, nogil=True)
def multiclass_oracle_weighted(x, w, y_true, c, K, F):
    """argmax_k ⟨w_k, x⟩ + c [k != y_true]: the oracle of the loss c [k != y_true]."""
    return weighted_augmented_argmax(multiclass_scores(x, w, K, F), y_true, c)


@njit(cache=True, nogil=True)
def multiclass_phi_diff(x, ya, yb, F):
    """Sparse phi(x, ya) - phi(x, yb); yb < 0 means phi(x, ya) alone."""
    nz = 0
    for f in range(F):
        if x[f] != 0.0:
            nz += 1
    if ya == yb:
        return np.empty(0, np.int64), np.empty(0)
    n = nz if yb < 0 else 2 * nz
    out_i = np.empty(n, np.int64)
    out_v = np.empty(n)
    m = 0
    if yb < 0 or ya < yb:
        first, s1, second, s2 = ya, 1.0, yb, -1.0
    else:
        first, s1, second, s2 = yb, -1.0, ya, 1.0
    for f in range(F):
        if x[f] != 0.0:
            out_i[m] = first * F + f
            out_v[m] = s1 * x[f]
            m += 1
    if second >= 0:
        for f in range(F):
            if x[f] != 0.0:
                out_i[m] = second * F + f
                out_v[m] = s2 * x[f]
                m += 1
    return out_i, out_v


# -- sparse inputs: x given by its nonzeros (idx, val); O(K nnz) instead of O(K F), so a wide
# -- svmlight file (feature ids up to 10^6) is never densified.
@njit(cache=True, fastmath=True, nogil=True)
def multiclass_scores_sparse(idx, val, w, K, F):
    out = np.zeros(K)
    for k in range(K):
        acc = 0.0
        base = k * F
        for j in range(idx.shape[0]):
            acc += val[j] * w[base + idx[j]]
        out[k] = acc
    return out


@njit(cache=True, nogil=True)
def multiclass_oracle_sparse(idx, val, w, y_true, K, F, augment):
    """`multiclass_oracle` for x given by its nonzeros (sorted ``idx``, ``val``)."""
    return augmented_argmax(multiclass_scores_sparse(idx, val, w, K, F), y_true, augment)


@njit(cache=True, nogil=True)
def multiclass_phi_diff_sparse(idx, val, ya, yb, F):
    """`multiclass_phi_diff` for x given by its nonzeros (sorted ``idx``, ``val``)."""
    nz = idx.shape[0]
    if ya == yb:
        return np.empty(0, np.int64), np.empty(0)
    n = nz if yb < 0 else 2 * nz
    out_i = np.empty(n, np.int64)
    out_v = np.empty(n)
    if yb < 0 or ya < yb:
        first, s1, second, s2 = ya, 1.0, yb, -1.0
    else:
        first, s1, second, s2 = yb, -1.0, ya, 1.0
    for j in range(nz):
        out_i[j] = first * F + idx[j]
        out_v[j] = s1 * val[j]
    if second >= 0:
        for j in range(nz):
            out_i[nz + j] = second * F + idx[j]
            out_v[nz + j] = s2 * val[j]
    return out_i, out_v
