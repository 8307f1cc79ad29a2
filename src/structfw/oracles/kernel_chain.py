"""Joint kernels of chain labellings and their decoding, for the kernelized BCFW.

The joint kernel decomposes over the parts of a chain labelling (BCFW paper, App. B.5:
"re-interpreting dot products as the suitable sum of kernel evaluations"):

    k((x, y), (x', y')) = sum_{t,s} [y_t == y'_s] kappa(x_t, x'_s) + ⟨E(y), E(y')⟩,

where kappa is a kernel on the features of one position ("linear", "rbf", "poly") and
E(y) in R^{K x K} counts the transitions a -> b of y (the transition indicator features
of `ChainModel`, kept linear).  With kappa linear this is exactly
⟨phi(x, y), phi(x', y')⟩ of ChainModel.  A weight vector w = A alpha is then implicit:

    unary score of label c at a position x_t = sum_p kappa(x_t, x_p) coef[p, c]

over support positions p (the pivots of `structfw.solvers.kernel_bcfw.KernelMap`), with explicit
transition weights P (K x K).

Everything here is numba-compiled (``cache=True``, ``nogil=True``) or a BLAS product.
Layering: this module imports only `structfw.oracles.chain`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .chain import viterbi

#: kernels kappa on the features of one position
KERNELS = ("linear", "rbf", "poly")


# ------------------------------------------------------------------ kappa
def squared_norms(P):
    """||x_p||^2 of every row of a dense or CSR positions matrix (the RBF kernel needs them)."""
    if sp.issparse(P):
        return np.asarray(P.multiply(P).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("pf,pf->p", P, P)


def gram(A, a2, B, b2, kernel, gamma, degree, coef0):
    """kappa(A_p, B_q) for every row p of A and q of B: a dense (len(A), len(B)) float64 array.

    The inner products come from one BLAS (or sparse) product; the kernel's transform
    is applied in place by a compiled loop.  ``a2``, ``b2`` are the rows' squared norms
    (used by "rbf" only).  The result for given rows A is always computed by the same
    product, so a block's kernel rows are bit-for-bit the same whenever they are
    recomputed (exact warm-start resume does not depend on what a cache kept).
    """
    G = A @ B.T
    if sp.issparse(G):
        G = G.toarray()
    G = np.ascontiguousarray(G, dtype=np.float64)
    if kernel == "rbf":
        rbf_from_dots(G, a2, b2, float(gamma))
    elif kernel == "poly":
        poly_from_dots(G, float(gamma), float(coef0), int(degree))
    return G


@njit(cache=True, nogil=True)
def rbf_from_dots(G, a2, b2, gamma):
    """In place: G[p, q] = exp(-gamma ||a_p - b_q||^2) from G[p, q] = ⟨a_p, b_q⟩.

    ||a - b||^2 = ||a||^2 + ||b||^2 - 2 ⟨a, b⟩ can come out slightly negative by
    rounding for (near) equal points; it is clipped at 0, so kappa(x, x) = 1 exactly."""
    for p in range(G.shape[0]):
        for q in range(G.shape[1]):
            d2 = a2[p] + b2[q] - 2.0 * G[p, q]
            G[p, q] = np.exp(-gamma * d2) if d2 > 0.0 else 1.0


@njit(cache=True, nogil=True)
def poly_from_dots(G, gamma, coef0, degree):
    """In place: G[p, q] = (gamma ⟨a_p, b_q⟩ + coef0)^degree."""
    for p in range(G.shape[0]):
        for q in range(G.shape[1]):
            base = gamma * G[p, q] + coef0
            v = 1.0
            for _ in range(degree):
                v *= base
            G[p, q] = v


# ------------------------------------------------------------------ decoding
@njit(cache=True, nogil=True)
def chain_decode(U, P):
    """argmax_y ⟨w, phi(x, y)⟩ from unary scores U (T, K) and transition weights P (K, K)."""
    y, _ = viterbi(U, P)
    return y
