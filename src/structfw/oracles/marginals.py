"""Expectation oracles: marginals of the Gibbs distribution over labellings (numba).

Online exponentiated gradient (Collins, Globerson, Koo, Carreras, Bartlett 2008) keeps
alpha_i(y) ∝ exp(c L_i(y) + <v, phi(x_i, y)>); its block parts need
E_p[phi(x_i, y)], E_p[L_i(y)] and log Z.  For a chain with the normalised Hamming loss
the loss term enters the unary scores (c/L per position whose label differs from y_i)
and forward-backward in the log domain gives node and edge marginals without
enumerating labellings.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _logsumexp(a):
    m = a[0]
    for k in range(1, a.shape[0]):
        if a[k] > m:
            m = a[k]
    if m == -np.inf:
        return m
    s = 0.0
    for k in range(a.shape[0]):
        s += np.exp(a[k] - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def chain_marginals(U, P):
    """Node marginals (L, S), edge marginals (L-1, S, S) and log Z of
    p(y) ∝ exp(sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}]) by forward-backward in log space."""
    L, S = U.shape
    A = np.empty((L, S))
    B = np.empty((L, S))
    tmp = np.empty(S)
    A[0] = U[0]
    for l in range(1, L):
        for b in range(S):
            for a in range(S):
                tmp[a] = A[l - 1, a] + P[a, b]
            A[l, b] = U[l, b] + _logsumexp(tmp)
    B[L - 1] = 0.0
    for l in range(L - 2, -1, -1):
        for a in range(S):
            for b in range(S):
                tmp[b] = P[a, b] + U[l + 1, b] + B[l + 1, b]
            B[l, a] = _logsumexp(tmp)
    logZ = _logsumexp(A[L - 1].copy())
    node = np.exp(A + B - logZ)
    edge = np.empty((max(L - 1, 0), S, S))
    for l in range(L - 1):
        for a in range(S):
            for b in range(S):
                edge[l, a, b] = np.exp(A[l, a] + P[a, b] + U[l + 1, b] + B[l + 1, b] - logZ)
    return node, edge, logZ


@njit(cache=True, nogil=True)
def chain_expectation_dense(x, y_true, V, P, c, has_loss):
    """(E_phi as a dense (S*F + S*S,) vector, E_loss, log Z) for a chain with dense features x (L, F);
    V (S, F) unary weights, P (S, S) transition weights."""
    L = x.shape[0]
    S = V.shape[0]
    F = V.shape[1]
    U = x @ V.T
    if has_loss and L > 0:
        for l in range(L):
            for s in range(S):
                if s != y_true[l]:
                    U[l, s] += c / L
    node, edge, logZ = chain_marginals(U, P)
    E = np.zeros(S * F + S * S)
    Eu = node.T @ x  # (S, F): sum_l mu_l(s) x_l
    E[:S * F] = Eu.ravel()
    for l in range(L - 1):
        for a in range(S):
            for b in range(S):
                E[S * F + a * S + b] += edge[l, a, b]
    loss = 0.0
    if has_loss and L > 0:
        for l in range(L):
            loss += 1.0 - node[l, y_true[l]]
        loss /= L
    return E, loss, logZ


@njit(cache=True, nogil=True)
def softmax_expectation(x, y_true, V, c, has_loss):
    """(E_phi (K*F,), E_loss, log Z) for the multiclass model: p(k) ∝ exp(<v_k, x> + c [k != y])."""
    K = V.shape[0]
    F = V.shape[1]
    s = V @ x
    if has_loss:
        for k in range(K):
            if k != y_true:
                s[k] += c
    logZ = _logsumexp(s)
    p = np.exp(s - logZ)
    E = np.empty(K * F)
    for k in range(K):
        for f in range(F):
            E[k * F + f] = p[k] * x[f]
    loss = 0.0
    if has_loss:
        loss = 1.0 - p[y_true]
    return E, loss, logZ
