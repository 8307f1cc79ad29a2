"""Expectation oracles: marginals of the Gibbs distribution over labellings (numba).

Online exponentiated gradient (Collins, Globerson, Koo, Carreras, Bartlett 2008, the
"online-EG" baseline of the BCFW paper, Sec. 6 / App. F) keeps dual variables
alpha_i(y) ∝ exp(theta_i(y)) with theta_i(y) = c L_i(y) + <v, phi(x_i, y)> + const; its
block parts need E_p[phi(x_i, y)], E_p[L_i(y)] and log Z under that distribution.

For a chain with the normalised Hamming loss the loss term decomposes over positions and
enters the unary scores (+c/L for every state that differs from y_i at that position), so
forward-backward gives node and edge marginals, and from them E_phi, without enumerating
labellings.

Numerics.  The recursions are those of the log domain, log alpha_l(b) = U[l, b] +
logsumexp_a(log alpha_{l-1}(a) + P[a, b]), but each logsumexp is evaluated as a product
of *shifted* exponentials: with Pr[a] = max_b P[a, b] and EP = exp(P - Pr[:, None]) (all
entries in (0, 1], computed once per call), and g[a] = log alpha_{l-1}(a) + Pr[a] - max(.),

    logsumexp_a(log alpha_{l-1}(a) + P[a, b]) = max(.) + log sum_a exp(g[a]) EP[a, b].

Every factor is <= 1, so nothing overflows for any |v|; a sum that underflows (< _TINY,
which only happens for huge weights) is recomputed by the exact logsumexp.  This costs
O(S) exponentials per position instead of O(S^2) and keeps the log-domain accuracy.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: Below this a shifted sum may have lost its leading terms to underflow: use the exact logsumexp.
_TINY = 1e-280


@njit(cache=True, nogil=True)
def _logsumexp(a):
    """log sum_k exp(a[k]), stable (shift by the max); -inf for an empty or all -inf array."""
    if a.shape[0] == 0:
        return -np.inf
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
def _row_shifted_exp(P):
    """(Pr, EP): row maxima of P and exp(P - Pr[:, None]) (entries in (0, 1])."""
    S = P.shape[0]
    Pr = np.empty(S)
    EP = np.empty((S, S))
    for a in range(S):
        m = P[a, 0]
        for b in range(1, S):
            if P[a, b] > m:
                m = P[a, b]
        Pr[a] = m
        for b in range(S):
            EP[a, b] = np.exp(P[a, b] - m)
    return Pr, EP


@njit(cache=True, nogil=True)
def _forward(U, P, Pr, EP):
    """log alpha: A[l, b] = U[l, b] + logsumexp_a(A[l-1, a] + P[a, b]), A[0] = U[0]."""
    L, S = U.shape
    A = np.empty((L, S))
    g = np.empty(S)
    acc = np.empty(S)
    tmp = np.empty(S)
    for b in range(S):
        A[0, b] = U[0, b]
    for l in range(1, L):
        mg = -np.inf
        for a in range(S):
            g[a] = A[l - 1, a] + Pr[a]
            if g[a] > mg:
                mg = g[a]
        for b in range(S):
            acc[b] = 0.0
        for a in range(S):
            ga = np.exp(g[a] - mg)
            for b in range(S):
                acc[b] += ga * EP[a, b]
        for b in range(S):
            if acc[b] > _TINY:
                A[l, b] = U[l, b] + mg + np.log(acc[b])
            else:  # the shifted products underflowed: exact log-domain sum
                for a in range(S):
                    tmp[a] = A[l - 1, a] + P[a, b]
                A[l, b] = U[l, b] + _logsumexp(tmp)
    return A


@njit(cache=True, nogil=True)
def _backward(U, P, Pr, EP):
    """log beta and what the edge marginals reuse.

    B[l, a] = logsumexp_b(P[a, b] + U[l+1, b] + B[l+1, b]), B[L-1] = 0;
    ET[l+1, b] = exp(t[b] - max t) with t = U[l+1] + B[l+1]; SA[l, a] = the shifted sum
    sum_b EP[a, b] ET[l+1, b] (or -1 where it underflowed and the exact sum was used).
    Then p(y_{l+1} = b | y_l = a) = EP[a, b] ET[l+1, b] / SA[l, a]."""
    L, S = U.shape
    B = np.empty((L, S))
    ET = np.empty((L, S))
    SA = np.empty((L, S))
    t = np.empty(S)
    tmp = np.empty(S)
    for a in range(S):
        B[L - 1, a] = 0.0
    for l in range(L - 2, -1, -1):
        mt = -np.inf
        for b in range(S):
            t[b] = U[l + 1, b] + B[l + 1, b]
            if t[b] > mt:
                mt = t[b]
        for b in range(S):
            ET[l + 1, b] = np.exp(t[b] - mt)
        for a in range(S):
            acc = 0.0
            for b in range(S):
                acc += EP[a, b] * ET[l + 1, b]
            if acc > _TINY:
                B[l, a] = Pr[a] + mt + np.log(acc)
                SA[l, a] = acc
            else:
                for b in range(S):
                    tmp[b] = P[a, b] + t[b]
                B[l, a] = _logsumexp(tmp)
                SA[l, a] = -1.0
    return B, ET, SA


@njit(cache=True, nogil=True)
def _edge_row(l, a, node_la, U, P, B, EP, ET, SA, out):
    """out[b] = p(y_l = a, y_{l+1} = b) = node[l, a] p(y_{l+1} = b | y_l = a)."""
    S = out.shape[0]
    if node_la == 0.0:
        for b in range(S):
            out[b] = 0.0
    elif SA[l, a] > 0.0:
        r = node_la / SA[l, a]
        for b in range(S):
            out[b] = r * EP[a, b] * ET[l + 1, b]
    else:  # the shifted sum underflowed: conditional from the exact log-domain values
        for b in range(S):
            out[b] = node_la * np.exp(P[a, b] + U[l + 1, b] + B[l + 1, b] - B[l, a])


@njit(cache=True, nogil=True)
def _node_marginals(A, B):
    """node[l, s] = exp(A + B - log Z) and log Z (the same at every position; taken at l = L-1)."""
    L, S = A.shape
    logZ = _logsumexp(A[L - 1].copy())
    node = np.empty((L, S))
    for l in range(L):
        for s in range(S):
            node[l, s] = np.exp(A[l, s] + B[l, s] - logZ)
    return node, logZ


@njit(cache=True, nogil=True)
def chain_marginals(U, P):
    """Node and edge marginals and log Z of a chain Gibbs distribution (forward-backward).

    p(y) ∝ exp(sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}]).

    Parameters
    ----------
    U : (L, S) float64 unary scores.
    P : (S, S) float64 transition scores, P[a, b] for y_l = a, y_{l+1} = b.

    Returns
    -------
    node : (L, S) p(y_l = s)
    edge : (L-1, S, S) p(y_l = a, y_{l+1} = b)
    logZ : float, log sum_y exp(score(y)) (0 for L = 0: one empty labelling)
    """
    L, S = U.shape
    if L == 0:
        return np.zeros((0, S)), np.zeros((0, S, S)), 0.0
    Pr, EP = _row_shifted_exp(P)
    A = _forward(U, P, Pr, EP)
    B, ET, SA = _backward(U, P, Pr, EP)
    node, logZ = _node_marginals(A, B)
    edge = np.empty((L - 1, S, S))
    for l in range(L - 1):
        for a in range(S):
            _edge_row(l, a, node[l, a], U, P, B, EP, ET, SA, edge[l, a])
    return node, edge, logZ


@njit(cache=True, nogil=True)
def chain_marginal_sums(U, P):
    """(node (L, S), edge marginals summed over positions (S, S), log Z): what E_phi needs,
    without storing the (L-1, S, S) edge marginals."""
    L, S = U.shape
    T = np.zeros((S, S))
    if L == 0:
        return np.zeros((0, S)), T, 0.0
    Pr, EP = _row_shifted_exp(P)
    A = _forward(U, P, Pr, EP)
    B, ET, SA = _backward(U, P, Pr, EP)
    node, logZ = _node_marginals(A, B)
    row = np.empty(S)
    for l in range(L - 1):
        for a in range(S):
            _edge_row(l, a, node[l, a], U, P, B, EP, ET, SA, row)
            for b in range(S):
                T[a, b] += row[b]
    return node, T, logZ


@njit(cache=True, nogil=True)
def add_hamming_unaries(U, y_true, c):
    """U[l, s] += c / L where s != y_true[l]: c times the normalised Hamming loss, per position."""
    L, S = U.shape
    if L == 0:
        return
    cl = c / L
    for l in range(L):
        for s in range(S):
            if s != y_true[l]:
                U[l, s] += cl


@njit(cache=True, nogil=True)
def expected_hamming(node, y_true):
    """E_p[(1/L) sum_l [y_l != y_true_l]] = 1 - mean_l p(y_l = y_true_l)."""
    L = node.shape[0]
    if L == 0:
        return 0.0
    acc = 0.0
    for l in range(L):
        acc += 1.0 - node[l, y_true[l]]
    # rounding may leave a tiny negative value when p(y_true) ~ 1
    return max(acc / L, 0.0)


@njit(cache=True, nogil=True)
def chain_expectation_dense(x, y_true, V, P, c, has_loss):
    """Expectation oracle of the chain model for dense features.

    p(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>), Delta the normalised Hamming loss,
    phi as in ``ChainModel`` (unary block s*F + f, transition block S*F + a*S + b).

    Parameters
    ----------
    x : (L, F) float64 features.
    y_true : (L,) int64 (ignored unless has_loss).
    V : (S, F) unary weights; P : (S, S) transition weights (the two parts of v).
    c : float, the loss coefficient.
    has_loss : bool, False for plain marginals (no loss term).

    Returns
    -------
    E_phi : (S*F + S*S,) float64;  E_loss : float;  logZ : float
    """
    L = x.shape[0]
    S, F = V.shape
    U = x @ V.T
    if has_loss:
        add_hamming_unaries(U, y_true, c)
    node, T, logZ = chain_marginal_sums(U, P)
    E = np.empty(S * F + S * S)
    Eu = node.T @ x  # (S, F): sum_l p(y_l = s) x_l
    E[:S * F] = Eu.ravel()
    E[S * F:] = T.ravel()
    loss = expected_hamming(node, y_true) if has_loss else 0.0
    return E, loss, logZ


@njit(cache=True, nogil=True)
def _csr_unary_scores(indptr, indices, data, V):
    """U[l, s] = <x_l, V[s]> for CSR rows."""
    L = indptr.shape[0] - 1
    S = V.shape[0]
    U = np.zeros((L, S))
    for l in range(L):
        for k in range(indptr[l], indptr[l + 1]):
            f = indices[k]
            xv = data[k]
            for s in range(S):
                U[l, s] += xv * V[s, f]
    return U


@njit(cache=True, nogil=True)
def chain_expectation_csr(indptr, indices, data, y_true, V, P, c, has_loss):
    """As `chain_expectation_dense` for CSR features, returning E_phi sparse.

    E_phi is non-zero only at s*F + f for the features f present in x (all states s) and
    at the S*S transitions, so it is returned as sorted ``(idx, val)`` (exact zeros
    dropped) and never as a d-vector (d = S*F + S*S is large for sparse tasks).

    Returns
    -------
    idx : int64 array;  val : float64 array;  E_loss : float;  logZ : float
    """
    S, F = V.shape
    U = _csr_unary_scores(indptr, indices, data, V)
    if has_loss:
        add_hamming_unaries(U, y_true, c)
    node, T, logZ = chain_marginal_sums(U, P)
    L = indptr.shape[0] - 1
    cols = np.unique(indices[indptr[0]:indptr[L]])
    nc = cols.shape[0]
    Eu = np.zeros((S, nc))
    for l in range(L):
        for k in range(indptr[l], indptr[l + 1]):
            j = np.searchsorted(cols, indices[k])  # slot among the present columns (no length-F array)
            xv = data[k]
            for s in range(S):
                Eu[s, j] += node[l, s] * xv
    idx = np.empty(S * nc + S * S, np.int64)
    val = np.empty(S * nc + S * S)
    m = 0
    for s in range(S):
        for j in range(nc):
            if Eu[s, j] != 0.0:
                idx[m] = s * F + cols[j]
                val[m] = Eu[s, j]
                m += 1
    for a in range(S):
        for b in range(S):
            if T[a, b] != 0.0:
                idx[m] = S * F + a * S + b
                val[m] = T[a, b]
                m += 1
    loss = expected_hamming(node, y_true) if has_loss else 0.0
    return idx[:m].copy(), val[:m].copy(), loss, logZ


@njit(cache=True, nogil=True)
def softmax_expectation(x, y_true, V, c, has_loss):
    """Expectation oracle of the multiclass model: p(k) ∝ exp(<v_k, x> + c [k != y_true]).

    Returns (E_phi (K*F,) with block k = p(k) x, E_loss = 1 - p(y_true), log Z); the
    softmax is shifted by its maximum, so it never overflows."""
    K = V.shape[0]
    F = V.shape[1]
    s = V @ x
    if has_loss:
        for k in range(K):
            if k != y_true:
                s[k] += c
    logZ = _logsumexp(s)
    p = np.empty(K)
    for k in range(K):
        p[k] = np.exp(s[k] - logZ)
    E = np.empty(K * F)
    for k in range(K):
        for f in range(F):
            E[k * F + f] = p[k] * x[f]
    loss = 0.0
    if has_loss:
        loss = max(1.0 - p[y_true], 0.0)
    return E, loss, logZ


@njit(cache=True, nogil=True)
def chain_log_node_marginals(U, P):
    """Log node marginals and log Z of p(y) ∝ exp(sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}]).

    For prediction and calibration (`StructuredSVM.predict_marginals`): the log values, so a
    negative log-likelihood of a true label stays finite where its probability underflows,
    and no edge marginals are formed.  Each row is renormalised in log space, so its
    exponentials sum to 1 up to rounding even when log Z carries the rounding of L steps.

    Parameters
    ----------
    U : (L, S) float64 unary scores (already divided by the temperature).
    P : (S, S) float64 transition scores (likewise).

    Returns
    -------
    log_node : (L, S) log p(y_l = s)
    logZ : float (0 for L = 0)
    """
    L, S = U.shape
    out = np.empty((L, S))
    if L == 0:
        return out, 0.0
    Pr, EP = _row_shifted_exp(P)
    A = _forward(U, P, Pr, EP)
    B, ET, SA = _backward(U, P, Pr, EP)
    logZ = _logsumexp(A[L - 1].copy())
    row = np.empty(S)
    for l in range(L):
        for s in range(S):
            row[s] = A[l, s] + B[l, s]
        r = _logsumexp(row)
        for s in range(S):
            out[l, s] = row[s] - r
    return out, logZ
