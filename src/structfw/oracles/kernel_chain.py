"""Joint kernels of chain labellings and their decoding, for the kernelized BCFW.

The joint kernel decomposes over the parts of a chain labelling (BCFW paper, App. B.5:
"re-interpreting dot products as the suitable sum of kernel evaluations"):

    k((x, y), (x', y')) = sum_{t,s} [y_t == y'_s] kappa(x_t, x'_s) + <E(y), E(y')>,

where kappa is a kernel on the features of one position ("linear", "rbf", "poly") and
E(y) in R^{K x K} counts the transitions a -> b of y (the transition indicator features
of `ChainModel`, kept linear).  With kappa linear this is exactly
<phi(x, y), phi(x', y')> of ChainModel.  A weight vector w = A alpha is then implicit:

    unary score of label c at a position x_t = sum_p kappa(x_t, x_p) beta[p, c]

over the training positions p, with the dual coefficients beta of the solver
(`structfw.solvers.kernel_bcfw`), and explicit transition weights P (K x K).

Everything here is numba-compiled (``cache=True``, ``nogil=True``) or a BLAS product.
Layering: this module imports only `structfw.oracles.chain`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from .chain import hamming_loss, loss_augmented_viterbi, viterbi

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
    """In place: G[p, q] = exp(-gamma ||a_p - b_q||^2) from G[p, q] = <a_p, b_q>.

    ||a - b||^2 = ||a||^2 + ||b||^2 - 2 <a, b> can come out slightly negative by
    rounding for (near) equal points; it is clipped at 0, so kappa(x, x) = 1 exactly."""
    for p in range(G.shape[0]):
        for q in range(G.shape[1]):
            d2 = a2[p] + b2[q] - 2.0 * G[p, q]
            G[p, q] = np.exp(-gamma * d2) if d2 > 0.0 else 1.0


@njit(cache=True, nogil=True)
def poly_from_dots(G, gamma, coef0, degree):
    """In place: G[p, q] = (gamma <a_p, b_q> + coef0)^degree."""
    for p in range(G.shape[0]):
        for q in range(G.shape[1]):
            base = gamma * G[p, q] + coef0
            v = 1.0
            for _ in range(degree):
                v *= base
            G[p, q] = v


# ------------------------------------------------------------------ decoding
@njit(cache=True, nogil=True)
def labelling_score(U, P, y):
    """<w, phi(x, y)> = sum_t U[t, y_t] + sum_t P[y_t, y_{t+1}] from unary scores U (T, K)."""
    s = 0.0
    T = y.shape[0]
    for t in range(T):
        s += U[t, y[t]]
    for t in range(T - 1):
        s += P[y[t], y[t + 1]]
    return s


@njit(cache=True, nogil=True)
def chain_max_oracle(U, P, y_true):
    """Loss-augmented decoding from unary scores: (y*, H_i(y*; w)).

    y* = argmax_y Delta(y_i, y) + <w, phi(x_i, y)> (Viterbi on U + [y_t != y_i,t]/T, the
    normalised Hamming loss), and H_i(y*) = Delta(y_i, y*) - <w, phi(x_i, y_i) - phi(x_i, y*)>,
    the loss-augmented score (eq. (2) of the BCFW paper)."""
    y, _ = loss_augmented_viterbi(U, P, y_true)
    H = hamming_loss(y_true, y) + labelling_score(U, P, y) - labelling_score(U, P, y_true)
    return y, H


@njit(cache=True, nogil=True)
def chain_decode(U, P):
    """argmax_y <w, phi(x, y)> from unary scores U (T, K) and transition weights P (K, K)."""
    y, _ = viterbi(U, P)
    return y


# ------------------------------------------------------------------ dual coefficients
@njit(cache=True, nogil=True)
def block_coefficients(Ys, weights, y_true, K, inv_ln):
    """(beta rows (T, K), transition part (K, K), sum of alpha-weighted losses) of one block.

    w_i = A alpha_[i] for the explicit sparse alpha_i given as labellings ``Ys`` (m, T)
    with ``weights`` (m,):

        beta_i[t, c] = inv_ln * sum_y alpha_i(y) ([y_i,t == c] - [y_t == c]),
        P_i          = inv_ln * sum_y alpha_i(y) (E(y_i) - E(y)),
        L            = sum_y alpha_i(y) Delta(y_i, y)

    with inv_ln = 1/(lam n).  Positions where y agrees with y_i are skipped (their
    contribution is exactly zero), so a position no labelling of alpha_i gets wrong keeps
    an exactly zero row: it is not a support position of the expansion."""
    m, T = Ys.shape
    B = np.zeros((T, K))
    Pi = np.zeros((K, K))
    loss = 0.0
    for j in range(m):
        a = weights[j]
        if a == 0.0:
            continue
        y = Ys[j]
        wrong = 0
        for t in range(T):
            if y[t] != y_true[t]:
                B[t, y_true[t]] += a
                B[t, y[t]] -= a
                wrong += 1
        if wrong == 0:
            continue
        for t in range(T - 1):
            a0, b0, a1, b1 = y_true[t], y_true[t + 1], y[t], y[t + 1]
            if a0 != a1 or b0 != b1:
                Pi[a0, b0] += a
                Pi[a1, b1] -= a
        loss += a * wrong / T
    for t in range(T):
        for c in range(K):
            B[t, c] *= inv_ln
    for a0 in range(K):
        for b0 in range(K):
            Pi[a0, b0] *= inv_ln
    return B, Pi, loss
