"""Chain (sequence) kernels: Viterbi, fused unary-score + Viterbi max oracles, and
the sparse joint-feature differences of the chain model.  All numba-compiled.

Layout of w for a chain with S states and F features (``ChainModel``):
``w[s*F + f]`` is the unary weight of feature f for state s, and
``w[S*F + a*S + b]`` the weight of the transition a -> b.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .._linalg import coalesce


# ---------------------------------------------------------------- Viterbi
@njit(cache=True, fastmath=True, nogil=True)
def _viterbi_core(U, w, off, S):
    """argmax_y sum_l U[l, y_l] + sum_l w[off + y_l*S + y_{l+1}]; returns (y, score) (`viterbi_into`)."""
    L = U.shape[0]
    y = np.empty(L, np.int64)
    if L == 0:
        return y, 0.0
    P = np.empty((S, S))  # the transitions, copied once per call: a contiguous array of its own
    for a in range(S):
        for b in range(S):
            P[a, b] = w[off + a * S + b]
    return y, viterbi_into(U, P, np.empty((L, S)), np.empty(S), y)


@njit(cache=True, fastmath=True, nogil=True)
def viterbi_into(U, P, M, cur, y):
    """Max-sum Viterbi of U (L, S) and contiguous transitions P (S, S) into y (L,), with scratch M
    (at least L x S) and cur (S); returns the labelling's score (0 for L = 0).

    The forward pass stores the max-marginal scores M[l, b] = U[l, b] + max_a (M[l-1, a] +
    P[a, b]) (`_forward_max`).  The backtrack recomputes the argmax at the S candidates of each
    position.  Ties go to the smallest state index.  A max is exact, so the scores and the
    labelling do not depend on the order in which the candidates are compared.  A caller with
    scratch of its own (the factored pass) allocates nothing per call.
    """
    L, S = U.shape
    if L == 0:
        return 0.0
    for s in range(S):
        M[0, s] = U[0, s]
    for l in range(1, L):
        _forward_max(M[l - 1], P, cur, S)
        for b in range(S):
            M[l, b] = cur[b] + U[l, b]
    best = 0
    for s in range(1, S):
        if M[L - 1, s] > M[L - 1, best]:
            best = s
    total = M[L - 1, best]
    y[L - 1] = best
    for l in range(L - 1, 0, -1):
        b = y[l]
        arg = 0
        bv = M[l - 1, 0] + P[0, b]
        for a in range(1, S):
            v = M[l - 1, a] + P[a, b]
            if v > bv:
                bv = v
                arg = a
        y[l - 1] = arg
    return total


@njit(cache=True, fastmath=True, nogil=True)
def _forward_max(prev, P, cur, S):
    """cur[b] = max_a prev[a] + P[a, b]: a running maximum over the states b (a contiguous row
    of P per a, so the S lanes vectorise without a horizontal reduction), four a per sweep so
    that each load and store of cur serves four candidates.  Viterbi takes 1.1-1.2 us against
    2.4-2.8 us a word with the max reduction over a contiguous row of the transposed transitions
    per b (OCR-shaped words, S = 26), same scores and labellings to the bit.  Not inlined: each
    kernel that inlines the oracle would compile its loops again (a cold `structfw demo` took
    0.6-1.3 s longer inlined, for 0.1 us a word)."""
    m0 = prev[0]
    for b in range(S):
        cur[b] = m0 + P[0, b]
    a = 1
    while a + 3 < S:
        m0 = prev[a]
        m1 = prev[a + 1]
        m2 = prev[a + 2]
        m3 = prev[a + 3]
        for b in range(S):
            cur[b] = max(max(cur[b], max(m0 + P[a, b], m1 + P[a + 1, b])),
                         max(m2 + P[a + 2, b], m3 + P[a + 3, b]))
        a += 4
    while a < S:
        m0 = prev[a]
        for b in range(S):
            cur[b] = max(cur[b], m0 + P[a, b])
        a += 1


@njit(cache=True, nogil=True)
def viterbi(U, P):
    """Max-sum Viterbi on a chain.

    Parameters
    ----------
    U : (L, S) float64 unary scores.
    P : (S, S) float64 transition scores, P[a, b] for y_l = a, y_{l+1} = b.

    Returns
    -------
    y : (L,) int64 maximiser of sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}]
    score : float, its value
    """
    S = U.shape[1]
    flat = np.ascontiguousarray(P).reshape(S * S)
    return _viterbi_core(U, flat, 0, S)


@njit(cache=True, nogil=True)
def loss_augmented_viterbi(U, P, y_true):
    """Viterbi on U + (1/L) [y != y_true] (normalised Hamming loss augmentation)."""
    V = U.copy()
    add_hamming_loss(V, y_true)
    return viterbi(V, P)


@njit(cache=True, nogil=True, inline="always")
def add_hamming_loss(U, y_true):
    """U[l, s] += 1/L for every state s != y_true[l], in place: the normalised Hamming loss as unary
    terms (`add_node_loss_weights` with a_l = 1/L)."""
    L, S = U.shape
    if L == 0:
        return
    c = 1.0 / L
    for l in range(L):
        for s in range(S):
            if s != y_true[l]:
                U[l, s] += c


@njit(cache=True, nogil=True, inline="always")
def loss_augmented_into(V, U, yt):
    """V = U + (1/L) [s != y_t]: the unary scores with the normalised Hamming loss added, in one loop
    (in the compiled passes V[:] = U compiled to a scalar copy with clamped indices, and the loss to
    a second loop over V).  The same values as a copy and `add_hamming_loss`: U + 0.0 where s = y_t."""
    L, S = U.shape
    c = 1.0 / L if L > 0 else 0.0
    for t in range(L):
        y = yt[t]
        for s in range(S):
            V[t, s] = U[t, s] + (c if s != y else 0.0)


# ------------------------------------------------ fused chain-model oracles
@njit(cache=True, fastmath=True, nogil=True)
def chain_unary_dense(x, w, S, F, y_true, augment):
    """U[l, s] = ⟨x_l, w[s*F:(s+1)*F]⟩ (+ 1/L when s != y_true[l] and augment).

    Two positions and four states per sweep over the features: each load of a position's
    features feeds four products and each load of a state's weights two, so the sweep is less
    bound by loads (OCR: 2.0 µs a word against 2.4 µs for one position and two states per sweep,
    2.9 µs for one state; four positions by four states spill registers and take 13 µs).  An odd
    L's last position, and the last states of an S that is not a multiple of four, are scored
    twice: one loop nest, not a remainder loop for each."""
    L = x.shape[0]
    U = np.empty((L, S))
    for l in range(0, L, 2):
        m = min(l + 1, L - 1)
        xl = x[l]
        xm = x[m]
        for s in range(0, S, 4):
            s1 = min(s + 1, S - 1)
            s2 = min(s + 2, S - 1)
            s3 = min(s + 3, S - 1)
            w0 = w[s * F:(s + 1) * F]
            w1 = w[s1 * F:(s1 + 1) * F]
            w2 = w[s2 * F:(s2 + 1) * F]
            w3 = w[s3 * F:(s3 + 1) * F]
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            b0 = 0.0
            b1 = 0.0
            b2 = 0.0
            b3 = 0.0
            for f in range(F):
                p = xl[f]
                q = xm[f]
                a0 += p * w0[f]
                a1 += p * w1[f]
                a2 += p * w2[f]
                a3 += p * w3[f]
                b0 += q * w0[f]
                b1 += q * w1[f]
                b2 += q * w2[f]
                b3 += q * w3[f]
            U[l, s] = a0
            U[l, s1] = a1
            U[l, s2] = a2
            U[l, s3] = a3
            U[m, s] = b0
            U[m, s1] = b1
            U[m, s2] = b2
            U[m, s3] = b3
    if augment:
        add_hamming_loss(U, y_true)
    return U


@njit(cache=True, nogil=True)
def chain_unary_csr(indptr, indices, data, w, S, F, y_true, augment):
    """As chain_unary_dense for x given by CSR arrays (L = len(indptr) - 1).

    The loop runs over a position's non-zero features outside and the states inside: each
    feature's S weights w[s F + f] are then S independent loads in flight, where the state-outer
    order waited on one running sum per state (4x slower on the CoNLL-scale chain, F = 74,661).
    The indices are unsigned so that numba adds no negative-index wraparound test to the load of
    w, which kept LLVM from vectorising the loop over the states: the CoNLL-scale unary scores
    of all sentences 0.19 against 0.29 s.  Each U[l, s] still sums its features in index order
    from 0.0, so the scores are the same to the bit."""
    L = indptr.shape[0] - 1
    U = np.zeros((L, S))
    uF = np.uint64(F)
    uS = np.uint64(S)
    for l in range(L):
        u = U[l]
        for k in range(indptr[l], indptr[l + 1]):
            f = np.uint64(indices[k])
            v = data[k]
            for s in range(uS):
                u[s] += v * w[s * uF + f]
    if augment:
        add_hamming_loss(U, y_true)
    return U


def feature_major(w, S, F):
    """The feature-major copy WT (F, S) of a chain's unary weights, WT[f, s] = w[s F + f], which
    `chain_unary_csr_fm` reads."""
    return np.ascontiguousarray(w[:S * F].reshape(S, F).T)


@njit(cache=True, nogil=True)
def chain_unary_csr_fm(indptr, indices, data, WT, y_true, augment):
    """`chain_unary_csr` reading the unary weights from a feature-major copy WT (F, S), WT[f, s] =
    w[s F + f]: a feature's S weights are then adjacent (3 cache lines for S = 22 instead of 22).
    The same products summed in the same order, so the same scores to the bit; all CoNLL-scale
    sentences' scores 0.087 against 0.19 s.  The engine's sparse-row passes keep such a copy
    (`structfw.solvers._kernels.mirror_row`)."""
    L = indptr.shape[0] - 1
    S = WT.shape[1]
    U = np.zeros((L, S))
    flat = WT.reshape(WT.shape[0] * S)
    uS = np.uint64(S)
    for l in range(L):
        u = U[l]
        for k in range(indptr[l], indptr[l + 1]):
            base = np.uint64(indices[k]) * uS
            v = data[k]
            for s in range(uS):
                u[s] += v * flat[base + s]
    if augment:
        add_hamming_loss(U, y_true)
    return U


# The dense chain oracle is inlined into the compiled corner kernels, and the unary scores and
# Viterbi into it: each compiled caller re-optimises the code it links, so every layer of call
# cost a first run ~0.3-0.7 s of compilation.  The inlined copies keep their fastmath flag (an
# inlined body takes its caller's flags: chain_oracle_dense has them too, and no arithmetic of
# its own), so the oracle's arithmetic is unchanged; the other callers keep the plain kernels.
_unary_dense_inlined = njit(fastmath=True, nogil=True, inline="always")(chain_unary_dense.py_func)
_viterbi_inlined = njit(fastmath=True, nogil=True, inline="always")(_viterbi_core.py_func)


@njit(cache=True, fastmath=True, nogil=True, inline="always")
def chain_oracle_dense(x, w, y_true, S, F, augment):
    """Loss-augmented (augment=True) or plain Viterbi decoding of a dense chain."""
    U = _unary_dense_inlined(x, w, S, F, y_true, augment)
    y, _ = _viterbi_inlined(U, w, S * F, S)
    return y


@njit(cache=True, nogil=True)
def chain_oracle_csr(indptr, indices, data, w, y_true, S, F, augment):
    """Loss-augmented or plain Viterbi decoding of a chain with CSR features."""
    U = chain_unary_csr(indptr, indices, data, w, S, F, y_true, augment)
    y, _ = _viterbi_core(U, w, S * F, S)
    return y


# ---------------------------------------- weighted loss (docs/guide/weights.md)
# The weighted normalised Hamming loss sum_l a_l [y_l != y_true_l] (a_l = 1/L unweighted) has
# kernels of its own, so the unweighted ones above stay as they are (and as fast).
@njit(cache=True, nogil=True, inline="always")
def add_node_loss_weights(U, y_true, a):
    """U[l, s] += a[l] for every state s != y_true[l], in place (the loss as unary terms)."""
    L, S = U.shape
    for l in range(L):
        al = a[l]
        yl = y_true[l]
        for s in range(S):
            if s != yl:
                U[l, s] += al
    return U


@njit(cache=True, fastmath=True, nogil=True, inline="always")
def chain_oracle_dense_weighted(x, w, y_true, a, S, F):
    """Viterbi on sum_l a_l [y_l != y_true_l] + ⟨w, phi(x, y)⟩ for a dense chain."""
    U = _unary_dense_inlined(x, w, S, F, y_true, np.bool_(False))
    add_node_loss_weights(U, y_true, a)
    y, _ = _viterbi_inlined(U, w, S * F, S)
    return y


@njit(cache=True, nogil=True)
def chain_oracle_csr_weighted(indptr, indices, data, w, y_true, a, S, F):
    """As `chain_oracle_dense_weighted` for CSR features."""
    U = chain_unary_csr(indptr, indices, data, w, S, F, y_true, np.bool_(False))
    add_node_loss_weights(U, y_true, a)
    y, _ = _viterbi_core(U, w, S * F, S)
    return y


@njit(cache=True, nogil=True, inline="always")
def weighted_hamming_loss(a, b, c):
    """sum_l c_l [a_l != b_l]."""
    t = 0.0
    for l in range(a.shape[0]):
        if a[l] != b[l]:
            t += c[l]
    return t


@njit(cache=True, nogil=True, inline="always")
def labelling_score(U, W_tr, y):
    """⟨phi(x, y), w⟩ from a chain's unary scores U (L, S) and its flat transition weights W_tr (S*S;
    empty for a multiclass model).  The unary and transition sums are two accumulators, so the two
    chains of dependent additions run side by side."""
    S = U.shape[1]
    L = y.shape[0]
    u = 0.0
    e = 0.0
    chain = W_tr.shape[0] > 0
    for t in range(L):
        u += U[t, y[t]]
        if chain and t + 1 < L:
            e += W_tr[y[t] * S + y[t + 1]]
    return u + e


@njit(cache=True, nogil=True)
def score_difference(U, W_tr, ya, yb):
    """⟨phi(x, ya) - phi(x, yb), w⟩ from a chain's unary scores U (L, S) and its flat transition weights
    W_tr (S*S; empty for a multiclass model), position by position: ⟨psi_i(y), w⟩ with ya = y_i, yb = y."""
    S = U.shape[1]
    pw = 0.0
    for t in range(ya.shape[0]):
        pw += U[t, ya[t]] - U[t, yb[t]]
    if W_tr.shape[0] > 0:
        for t in range(ya.shape[0] - 1):
            pw += W_tr[ya[t] * S + ya[t + 1]] - W_tr[yb[t] * S + yb[t + 1]]
    return pw


@njit(cache=True, nogil=True, inline="always")  # inlined, as chain_oracle_dense
def hamming_loss(a, b):
    """Normalised Hamming loss mean_l [a_l != b_l] (0 for empty labellings)."""
    L = a.shape[0]
    if L == 0:
        return 0.0
    m = 0
    for l in range(L):
        if a[l] != b[l]:
            m += 1
    return m / L


# -------------------------------------------- joint feature differences
@njit(cache=True, nogil=True, inline="always")
def edge_label_diff(a0, b0, a1, b1, off, S, ti, tv, n):
    """Append the transition-indicator difference e_{a0,b0} - e_{a1,b1} of one edge to
    (ti, tv) from position n; labels < 0 mean "absent".  Returns the new length."""
    if a0 == a1 and b0 == b1:
        return n
    if a0 >= 0 and b0 >= 0:
        ti[n] = off + a0 * S + b0
        tv[n] = 1.0
        n += 1
    if a1 >= 0 and b1 >= 0:
        ti[n] = off + a1 * S + b1
        tv[n] = -1.0
        n += 1
    return n


@njit(cache=True, nogil=True)
def append_coalesced(ti, tv, n, out_i, out_v, m):
    """Append the sorted, summed, non-zero pairs (ti[:n], tv[:n]) to out_i/out_v from m.

    The caller guarantees that these indices all exceed those already in out_i[:m]."""
    ci, cv = coalesce(ti[:n], tv[:n])
    # an element loop, not a slice assignment: the latter's shape check compiles numba's
    # string formatting of the error message, seconds of a first run
    for t in range(ci.shape[0]):
        out_i[m + t] = ci[t]
        out_v[m + t] = cv[t]
    return m + ci.shape[0]


@njit(cache=True, nogil=True)
def _transition_diff(ya, yb, S, off, out_i, out_v, m):
    """Append the sorted, coalesced nonzeros of e(ya) - e(yb) (transition counts)
    to out_i/out_v from position m; labels < 0 mean "absent" (no transition).

    The caller guarantees room for 2 (L - 1) entries from m and that these indices exceed those
    in out_i[:m].  The edges' entries are written from m, sorted there by an insertion sort (at
    most 2 (L - 1) of them: a fraction of numba's argsort to compile and to run) and summed in
    place; no buffer is allocated."""
    L = ya.shape[0]
    n = m
    for l in range(L - 1):
        n = edge_label_diff(ya[l], ya[l + 1], yb[l], yb[l + 1], off, S, out_i, out_v, n)
    for a in range(m + 1, n):
        key = out_i[a]
        val = out_v[a]
        b = a - 1
        while b >= m and out_i[b] > key:
            out_i[b + 1] = out_i[b]
            out_v[b + 1] = out_v[b]
            b -= 1
        out_i[b + 1] = key
        out_v[b + 1] = val
    a = m
    while a < n:  # the write position never passes the read position
        key = out_i[a]
        total = 0.0
        while a < n and out_i[a] == key:
            total += out_v[a]
            a += 1
        if total != 0.0:
            out_i[m] = key
            out_v[m] = total
            m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def differing_states(ya, yb, S):
    """(mark, k): mark[s] for the k states that ya or yb takes where they differ (labels < 0,
    "absent", are not states)."""
    mark = np.zeros(S, np.bool_)
    k = 0
    for p in range(ya.shape[0]):
        a = ya[p]
        b = yb[p]
        if a != b:
            if a >= 0 and not mark[a]:
                mark[a] = True
                k += 1
            if b >= 0 and not mark[b]:
                mark[b] = True
                k += 1
    return mark, k


@njit(cache=True, nogil=True)
def unary_diff_dense(x, ya, yb, S, F, extra):
    """Unary part of phi(x, ya) - phi(x, yb) for dense per-position features x (P, F):
    sum over positions p where ya != yb of x_p in block ya_p minus x_p in block yb_p
    (labels < 0 mean "absent").  Returns buffers with room for ``extra`` more entries
    and the number m of (sorted, non-zero) entries written."""
    P = x.shape[0]
    mark, k = differing_states(ya, yb, S)
    out_i = np.empty(k * F + extra, np.int64)
    out_v = np.empty(k * F + extra)
    m = 0
    if k > 0:
        buf = np.empty(F)
        for s in range(S):
            if not mark[s]:
                continue
            for f in range(F):
                buf[f] = 0.0
            for p in range(P):
                a = ya[p]
                b = yb[p]
                if a == b:
                    continue
                if a == s:
                    for f in range(F):
                        buf[f] += x[p, f]
                elif b == s:
                    for f in range(F):
                        buf[f] -= x[p, f]
            base = s * F
            for f in range(F):
                if buf[f] != 0.0:
                    out_i[m] = base + f
                    out_v[m] = buf[f]
                    m += 1
    return out_i, out_v, m


@njit(cache=True, nogil=True)
def chain_phi_diff_dense(x, ya, yb, S, F):
    """Sparse phi(x, ya) - phi(x, yb) for dense x (L, F), touching only positions
    where ya and yb differ.  Labels < 0 in yb mean "no labelling" (so yb = -1
    everywhere gives phi(x, ya)).  Returns sorted unique indices and values, zeros dropped.
    """
    out_i, out_v, m = unary_diff_dense(x, ya, yb, S, F, 2 * x.shape[0])
    m = _transition_diff(ya, yb, S, S * F, out_i, out_v, m)
    return out_i[:m].copy(), out_v[:m].copy()


@njit(cache=True, nogil=True)
def chain_phi_diff_csr(indptr, indices, data, ya, yb, S, F):
    """As chain_phi_diff_dense for x given by CSR arrays (never densified)."""
    L = indptr.shape[0] - 1
    cnt = 0
    for l in range(L):
        if ya[l] != yb[l]:
            w = indptr[l + 1] - indptr[l]
            if ya[l] >= 0:
                cnt += w
            if yb[l] >= 0:
                cnt += w
    ui = np.empty(cnt, np.int64)
    uv = np.empty(cnt)
    n = 0
    for l in range(L):
        a = ya[l]
        b = yb[l]
        if a == b:
            continue
        for kk in range(indptr[l], indptr[l + 1]):
            if a >= 0:
                ui[n] = a * F + indices[kk]
                uv[n] = data[kk]
                n += 1
            if b >= 0:
                ui[n] = b * F + indices[kk]
                uv[n] = -data[kk]
                n += 1
    out_i = np.empty(n + 2 * L, np.int64)
    out_v = np.empty(n + 2 * L)
    # unary indices are all below S*F, so the transition part appended after stays sorted
    m = append_coalesced(ui, uv, n, out_i, out_v, np.int64(0))
    m = _transition_diff(ya, yb, S, S * F, out_i, out_v, m)
    return out_i[:m].copy(), out_v[:m].copy()
