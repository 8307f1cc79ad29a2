"""Kernel functions for `structfw.svm`.

Kernel *kinds* are small integers so that the numba solver can branch on them:

========  ============  ==============================================
kind      name          k(x, z)
========  ============  ==============================================
0         linear        ⟨x, z⟩
1         rbf           exp(-gamma ||x - z||^2)
2         poly          (gamma ⟨x, z⟩ + coef0) ** degree
3         precomputed   X[i, j] is k(x_i, x_j) (X is the Gram matrix)
4         raw           the matrix *is* the simplex-QP matrix (tests / low level)
========  ============  ==============================================
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

KERNELS = {"linear": 0, "rbf": 1, "poly": 2, "precomputed": 3}
RAW = 4


def resolve_gamma(gamma, X, kernel):
    """Numeric gamma as scikit-learn resolves it ("scale", "auto" or a float > 0)."""
    if kernel in ("linear", "precomputed"):
        return 1.0  # unused
    if isinstance(gamma, str):
        if gamma == "scale":
            var = float(X.var()) if X.size else 0.0
            return 1.0 / (X.shape[1] * var) if var != 0 else 1.0
        if gamma == "auto":
            return 1.0 / X.shape[1]
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive float, got {gamma!r}")
    return float(gamma)


def kernel_matrix(A, B, kind, gamma, coef0, degree, chunk=2048):
    """Dense kernel matrix k(A_i, B_j) (numpy / BLAS; used for prediction)."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[0]))
    if kind == 1:
        bb = np.einsum("ij,ij->i", B, B)
    for s in range(0, A.shape[0], chunk):
        a = A[s:s + chunk]
        dots = a @ B.T
        if kind == 0:
            out[s:s + chunk] = dots
        elif kind == 1:
            aa = np.einsum("ij,ij->i", a, a)
            d2 = aa[:, None] + bb[None, :] - 2.0 * dots
            np.maximum(d2, 0.0, out=d2)
            out[s:s + chunk] = np.exp(-gamma * d2)
        elif kind == 2:
            out[s:s + chunk] = (gamma * dots + coef0) ** degree
        else:  # pragma: no cover
            raise ValueError(f"unknown kernel kind {kind}")
    return out


@njit(cache=True)
def kernel_column(X, sqn, i, kind, gamma, coef0, degree):
    """k(x_j, x_i) for all rows j of X (kind 0..2), or row i of a Gram matrix (3, 4).

    Always returns float64.  X may be float32 (then the dot products are float32 BLAS,
    ``sqn`` holds the float64 squared norms and the RBF distance is formed in float64;
    the RBF diagonal entry is set to exactly 1)."""
    m = X.shape[0]
    out = np.empty(m)
    if kind >= 3:
        for j in range(m):
            out[j] = X[i, j]
        return out
    kernel_from_dots(np.dot(X, X[i]), sqn, i, kind, gamma, coef0, degree, out)
    return out


@njit(cache=True)
def kernel_from_dots(dots, sqn, i, kind, gamma, coef0, degree, out):
    """out[j] = k(x_j, x_i) from the dot products dots[j] = ⟨x_j, x_i⟩ (kind 0..2):
    linear, rbf exp(-gamma ||x_j - x_i||^2) with the distance formed in float64 from
    the squared norms ``sqn`` (diagonal exactly 1), or poly (gamma <.,.> + coef0)^degree."""
    m = out.shape[0]
    if kind == 0:
        for j in range(m):
            out[j] = dots[j]
    elif kind == 1:
        si = sqn[i]
        for j in range(m):
            d2 = sqn[j] + si - 2.0 * dots[j]
            if d2 < 0.0:
                d2 = 0.0
            out[j] = np.exp(-gamma * d2)
        out[i] = 1.0
    else:
        for j in range(m):
            out[j] = (gamma * dots[j] + coef0) ** degree


def kernel_diagonal(X, kind, gamma, coef0, degree):
    if kind >= 3:
        return np.ascontiguousarray(np.diag(X), dtype=np.float64)
    sq = np.einsum("ij,ij->i", X, X)
    if kind == 0:
        return sq
    if kind == 1:
        return np.ones(X.shape[0])
    return (gamma * sq + coef0) ** degree
