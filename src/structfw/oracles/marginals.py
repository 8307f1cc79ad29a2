"""Expectation oracles: marginals of the Gibbs distribution over labellings (numba).

Online exponentiated gradient (Collins, Globerson, Koo, Carreras, Bartlett 2008, the
"online-EG" baseline of the BCFW paper, Sec. 6 / App. F) keeps dual variables
alpha_i(y) ∝ exp(theta_i(y)) with theta_i(y) = c L_i(y) + ⟨v, phi(x_i, y)⟩ + const; its
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
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

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

    p(y) ∝ exp(c Delta(y_true, y) + ⟨v, phi(x, y)⟩), Delta the normalised Hamming loss,
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
    """U[l, s] = ⟨x_l, V[s]⟩ for CSR rows."""
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
    """Expectation oracle of the multiclass model: p(k) ∝ exp(⟨v_k, x⟩ + c [k != y_true]).

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


# ------------------------------------------------------------------ loopy graphs (approximate)
@njit(cache=True, nogil=True)
def _bp_incoming(V, edges):
    """CSR lists of the messages into each node: message 2e is u_e -> v_e (over v_e's labels),
    2e + 1 is v_e -> u_e (over u_e's labels)."""
    E = edges.shape[0]
    start = np.zeros(V + 1, np.int64)
    for e in range(E):
        start[edges[e, 0] + 1] += 1
        start[edges[e, 1] + 1] += 1
    for v in range(V):
        start[v + 1] += start[v]
    fill = start[:V].copy()
    inc = np.empty(2 * E, np.int64)
    for e in range(E):
        v = edges[e, 1]
        inc[fill[v]] = 2 * e
        fill[v] += 1
        u = edges[e, 0]
        inc[fill[u]] = 2 * e + 1
        fill[u] += 1
    return start, inc


@njit(cache=True, nogil=True)
def _node_beliefs(th_u, start, inc, msg, rho, B):
    """B[v] = th_u[v] + sum over the messages m into v of rho_e(m) m (unnormalised log beliefs)."""
    V, K = th_u.shape
    for v in range(V):
        for k in range(K):
            B[v, k] = th_u[v, k]
        for t in range(start[v], start[v + 1]):
            m = inc[t]
            r = rho[m // 2]
            for k in range(K):
                B[v, k] += r * msg[m, k]


@njit(cache=True, nogil=True)
def _bp_shifted_pairwise(th_p):
    """Per edge, exp(theta - column max) (for the messages u -> v, a sum over the rows) and
    exp(theta - row max) (v -> u), entries in (0, 1], with the maxima: computed once per call,
    so that an iteration takes O(K) exponentials per message instead of O(K^2)."""
    E, K = th_p.shape[0], th_p.shape[1]
    Cm = np.empty((E, K))
    Rm = np.empty((E, K))
    EC = np.empty((E, K, K))
    ER = np.empty((E, K, K))
    for e in range(E):
        for b in range(K):
            m = th_p[e, 0, b]
            for a in range(1, K):
                if th_p[e, a, b] > m:
                    m = th_p[e, a, b]
            Cm[e, b] = m
            for a in range(K):
                EC[e, a, b] = np.exp(th_p[e, a, b] - m)
        for a in range(K):
            m = th_p[e, a, 0]
            for b in range(1, K):
                if th_p[e, a, b] > m:
                    m = th_p[e, a, b]
            Rm[e, a] = m
            for b in range(K):
                ER[e, a, b] = np.exp(th_p[e, a, b] - m)
    return Cm, Rm, EC, ER


@njit(cache=True, nogil=True)
def _bp_message(cav, th_p, e, shift, EX, out, tmp, ex, to_v):
    """out[j] = log sum_i exp(cav[i] + theta_e(i, j)) (to_v: i the tail's label, j the head's;
    else the reverse), as max(cav) + shift[e, j] + log sum_i exp(cav[i] - max) EX[e, ., .]; a sum
    that underflows (< _TINY: only for huge potentials) is recomputed by the exact logsumexp."""
    K = cav.shape[0]
    mc = cav[0]
    for i in range(1, K):
        if cav[i] > mc:
            mc = cav[i]
    for i in range(K):
        ex[i] = np.exp(cav[i] - mc)
    for j in range(K):
        acc = 0.0
        if to_v:
            for i in range(K):
                acc += ex[i] * EX[e, i, j]
        else:
            for i in range(K):
                acc += ex[i] * EX[e, j, i]
        if acc > _TINY:
            out[j] = mc + shift[e, j] + np.log(acc)
        else:
            for i in range(K):
                tmp[i] = cav[i] + (th_p[e, i, j] if to_v else th_p[e, j, i])
            out[j] = _logsumexp(tmp)


@njit(cache=True, nogil=True)
def _loopy_bp(th_u, edges, th_p, rho, damping, max_iter, tol):
    """Damped synchronous (reweighted) sum-product in log space; returns (msg, iterations, last
    change).  ``th_p`` is already divided by ``rho`` (all ones: plain loopy BP)."""
    V, K = th_u.shape
    E = edges.shape[0]
    start, inc = _bp_incoming(V, edges)
    Cm, Rm, EC, ER = _bp_shifted_pairwise(th_p)
    msg = np.zeros((2 * E, K))
    new = np.zeros((2 * E, K))
    B = np.empty((V, K))
    cav = np.empty(K)
    tmp = np.empty(K)
    ex = np.empty(K)
    change = 0.0
    it = 0
    while it < max_iter:
        it += 1
        _node_beliefs(th_u, start, inc, msg, rho, B)
        for e in range(E):
            u, v = edges[e, 0], edges[e, 1]
            # u -> v: log sum over y_u of exp(cavity_u(y_u) + theta_e(y_u, y_v) / rho_e), the cavity
            # theta_u + sum_w rho_(w,u) m_(w->u) - m_(v->u) (TRW; rho = 1: all messages but v's)
            for a in range(K):
                cav[a] = B[u, a] - msg[2 * e + 1, a]
            _bp_message(cav, th_p, e, Cm, EC, new[2 * e], tmp, ex, True)
            # v -> u
            for b in range(K):
                cav[b] = B[v, b] - msg[2 * e, b]
            _bp_message(cav, th_p, e, Rm, ER, new[2 * e + 1], tmp, ex, False)
        change = 0.0
        for m in range(2 * E):
            # normalise (log sum exp = 0), damp in the log domain, normalise again
            z = _logsumexp(new[m])
            for k in range(K):
                tmp[k] = (1.0 - damping) * (new[m, k] - z) + damping * msg[m, k]
            z = _logsumexp(tmp)
            for k in range(K):
                d = abs(tmp[k] - z - msg[m, k])
                if d > change:
                    change = d
                msg[m, k] = tmp[k] - z
        if change < tol:
            break
    return msg, it, change


@njit(cache=True, nogil=True)
def _entropy(logp):
    """-sum p log p of a normalised log-distribution."""
    h = 0.0
    for i in range(logp.shape[0]):
        if logp[i] > -np.inf:
            h -= np.exp(logp[i]) * logp[i]
    return h


@njit(cache=True, nogil=True)
def _bp_beliefs(th_u, edges, th_p, rho, msg):
    """Node and edge beliefs of the messages, and the free-energy approximation of log Z:

        sum_v (⟨b_v, theta_v⟩ + H(b_v)) + sum_e (⟨b_e, theta_e⟩ - rho_e I(b_e)),
        I(b_e) = H(b_u) + H(b_v) - H(b_e)

    (Bethe for rho = 1; the tree-reweighted upper bound at a TRW fixed point).  ``th_p`` is
    theta_e / rho_e, as `_loopy_bp` takes it."""
    V, K = th_u.shape
    E = edges.shape[0]
    start, inc = _bp_incoming(V, edges)
    B = np.empty((V, K))
    _node_beliefs(th_u, start, inc, msg, rho, B)
    node = np.empty((V, K))
    H = np.empty(V)
    row = np.empty(K)
    logZ = 0.0
    for v in range(V):
        z = _logsumexp(B[v])
        for k in range(K):
            row[k] = B[v, k] - z
            node[v, k] = np.exp(row[k])
        H[v] = _entropy(row)
        logZ += H[v]
        for k in range(K):
            logZ += node[v, k] * th_u[v, k]
    edge = np.empty((E, K, K))
    lb = np.empty(K * K)
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        for a in range(K):
            for b in range(K):
                lb[a * K + b] = (B[u, a] - msg[2 * e + 1, a]) + (B[v, b] - msg[2 * e, b]) + th_p[e, a, b]
        z = _logsumexp(lb)
        for t in range(K * K):
            lb[t] -= z
        energy_e = 0.0
        for a in range(K):
            for b in range(K):
                q = np.exp(lb[a * K + b])
                edge[e, a, b] = q
                energy_e += q * th_p[e, a, b] * rho[e]
        logZ += energy_e - rho[e] * (H[u] + H[v] - _entropy(lb))
    return node, edge, logZ


def edge_appearance(V: int, edges: np.ndarray, max_trees: int = 64, seed: int = 0) -> np.ndarray:
    """Edge appearance probabilities rho_e of a distribution over spanning forests, for TRW.

    Spanning forests are drawn as minimum spanning forests under random weights that favour
    the edges no forest has covered yet (``scipy.sparse.csgraph.minimum_spanning_tree``) until
    every edge is covered (at most ``max_trees``; then the uncovered edges get the smallest rho
    seen); rho_e is the fraction of the forests containing e, a point of the spanning-tree
    polytope (Wainwright, Jaakkola & Willsky 2005).  1 for every edge of a forest."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    E = edges.shape[0]
    if E == 0:
        return np.ones(0)
    rng = np.random.default_rng(seed)
    count = np.zeros(E)
    lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    key = lo * V + hi
    n = 0
    while n < max_trees and (n == 0 or count.min() == 0):
        wgt = 0.01 + rng.random(E) + (count > 0)  # > 0: scipy reads 0 as "no edge"
        tree = minimum_spanning_tree(coo_matrix((wgt, (lo, hi)), shape=(V, V))).tocoo()
        tk = np.minimum(tree.row, tree.col) * V + np.maximum(tree.row, tree.col)
        count[np.isin(key, tk)] += 1
        n += 1
    rho = count / n
    if rho.min() == 0:  # pragma: no cover - more than max_trees forests needed
        rho[rho == 0] = rho[rho > 0].min()
    return rho


def loopy_marginals(unary: np.ndarray, edges: np.ndarray, pairwise: np.ndarray, temperature: float = 1.0,
                    method: str = "bp", damping: float = 0.5, max_iter: int = 500, tol: float = 1e-8
                    ) -> tuple[np.ndarray, np.ndarray, float, dict]:
    """Approximate marginals of p(y) ∝ exp(E(y) / T) on any pairwise graph: loopy or
    tree-reweighted belief propagation.

    E(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}] (the shared inference
    interface of `structfw.oracles.graph`).

    ``method="bp"``: sum-product belief propagation (Pearl 1988) run on a graph with cycles
    ("loopy BP"; Murphy, Weiss & Jordan 1999).  Its fixed points are the stationary points of
    the Bethe free energy (Yedidia, Freeman & Weiss 2005), and its beliefs the Bethe
    approximation of the marginals, not the marginals.  Accuracy degrades with the coupling
    strength |theta_e| / T and the number of short cycles; on strongly coupled, frustrated
    graphs loopy BP may not converge.

    ``method="trw"``: tree-reweighted sum-product (Wainwright, Jaakkola & Willsky 2005, "A new
    class of upper bounds on the log partition function"), with the edge appearance
    probabilities rho_e of a mixture of spanning forests (`edge_appearance`).  It solves a
    convex problem (one fixed point), and at that point ``log_partition`` is an upper bound on
    log Z; its beliefs are pseudo-marginals, often less accurate than BP's where BP converges,
    more robust where it does not.

    Both are exact on forests (rho_e = 1 there, and TRW is BP).  Messages are updated
    synchronously in log space (each normalised to log-sum-exp 0), with damping in the log
    domain, m <- (1 - damping) m_new + damping m_old (renormalised), which helps convergence
    and leaves the fixed points unchanged.  O(E K^2) per iteration, compiled; each message's
    log-sum-exp is a product of shifted exponentials (as for the chains above: exp(theta_e)
    shifted by its row or column maxima once per call, the cavity by its maximum), O(K)
    exponentials per message, with the exact log-domain sum where a shifted sum underflows.

    Convergence criterion: the largest absolute change of any normalised log message in one
    iteration is below ``tol``; at most ``max_iter`` iterations.  ``info["converged"]`` says
    which happened.

    Parameters
    ----------
    unary : (V, K) float64, finite.
    edges : (E, 2) int64, no self-loops or repeated pairs (any graph).
    pairwise : (E, K, K) float64, finite, indexed [e, label of u_e, label of v_e].
    temperature : float > 0
        T.
    method : {"bp", "trw"}
    damping : float in [0, 1)
        The weight of the old message (0: no damping).
    max_iter : int >= 1
    tol : float > 0

    Returns
    -------
    node_marginals : (V, K), rows sum to 1 (the node beliefs).
    edge_marginals : (E, K, K), each sums to 1 (the edge beliefs; consistent with the node
        beliefs at a fixed point).
    log_partition : float, the Bethe approximation of log Z ("bp") or the TRW upper bound at
        the fixed point ("trw"); exact on forests.
    info : dict with ``method``, ``converged`` (bool), ``n_iter`` and ``max_change`` (the last
        iteration's); for "trw" also ``rho`` (E,).
    """
    from .graph import _as_potentials

    try:
        T = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}") from None
    if not (np.isfinite(T) and T > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if method not in ("bp", "trw"):
        raise ValueError(f"method must be 'bp' or 'trw', got {method!r}")
    if not (isinstance(damping, (int, float, np.floating)) and 0.0 <= float(damping) < 1.0):
        raise ValueError(f"damping must be a number in [0, 1), got {damping!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    if not (isinstance(tol, (int, float, np.floating)) and np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    unary, edges, pairwise = _as_potentials(unary, edges, pairwise)
    if not (np.all(np.isfinite(unary)) and np.all(np.isfinite(pairwise))):
        raise ValueError("loopy_marginals needs finite unary and pairwise potentials")
    V = unary.shape[0]
    rho = edge_appearance(V, edges) if method == "trw" else np.ones(edges.shape[0])
    th_u = np.ascontiguousarray(unary / T)
    th_p = np.ascontiguousarray(pairwise / (T * rho[:, None, None]))
    msg, n_iter, change = _loopy_bp(th_u, edges, th_p, rho, float(damping), int(max_iter), float(tol))
    node, edge, logZ = _bp_beliefs(th_u, edges, th_p, rho, msg)
    info: dict = {"method": method, "converged": bool(change < tol), "n_iter": int(n_iter),
                  "max_change": float(change)}
    if method == "trw":
        info["rho"] = rho
    return node, edge, float(logZ), info
