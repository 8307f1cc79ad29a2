"""The k best labellings of a chain (list Viterbi) and of a forest (list max-product), numba.

Viterbi keeps, per position l and state b, the best score of a prefix ending in b.  The
k-best variant keeps the k best prefix scores per (l, b), sorted, with a back-pointer
(previous state, its rank) for each.  A prefix of the r-th best labelling is one of the k
best prefixes ending in its state (otherwise k better labellings would share its suffix),
so the k best complete labellings are among the k best entries of the last position's
lists, and the method is exact.

Each list is a merge of S sorted lists (one per previous state a, shifted by P[a, b]),
so taking its k entries by repeatedly picking the best head costs O(k S) per (l, b):
O(L S^2 k) in all, O(L S k) memory.  Ties keep the smaller previous state first, then
the better rank, so the order is deterministic.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)


@njit(cache=True, nogil=True)
def chain_top_k(U, P, k):
    """The k highest-scoring labellings of a chain, best first.

    score(y) = sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}].

    Parameters
    ----------
    U : (L, S) float64 unary scores, L >= 1.
    P : (S, S) float64 transition scores.
    k : int >= 1; at most S^L labellings exist, and the caller caps k at that.

    Returns
    -------
    Y : (m, L) int64, m = min(k, S^L), the labellings in decreasing score.
    scores : (m,) float64 their scores.
    """
    L, S = U.shape
    delta = np.full((L, S, k), -np.inf)
    cnt = np.zeros((L, S), np.int64)
    bp_state = np.zeros((L, S, k), np.int64)
    bp_rank = np.zeros((L, S, k), np.int64)
    for b in range(S):
        delta[0, b, 0] = U[0, b]
        cnt[0, b] = 1
    head = np.empty(S, np.int64)
    for l in range(1, L):
        for b in range(S):
            for a in range(S):
                head[a] = 0
            m = 0
            while m < k:
                best = -np.inf
                ba = -1
                for a in range(S):
                    if head[a] < cnt[l - 1, a]:
                        v = delta[l - 1, a, head[a]] + P[a, b]
                        if ba < 0 or v > best:
                            best = v
                            ba = a
                if ba < 0:
                    break
                delta[l, b, m] = best + U[l, b]
                bp_state[l, b, m] = ba
                bp_rank[l, b, m] = head[ba]
                head[ba] += 1
                m += 1
            cnt[l, b] = m
    # the last position's lists are sorted too: the same merge picks the overall k best
    for b in range(S):
        head[b] = 0
    fin_state = np.empty(k, np.int64)
    fin_rank = np.empty(k, np.int64)
    scores = np.empty(k)
    m = 0
    while m < k:
        best = -np.inf
        bb = -1
        for b in range(S):
            if head[b] < cnt[L - 1, b]:
                v = delta[L - 1, b, head[b]]
                if bb < 0 or v > best:
                    best = v
                    bb = b
        if bb < 0:
            break
        fin_state[m] = bb
        fin_rank[m] = head[bb]
        scores[m] = best
        head[bb] += 1
        m += 1
    Y = np.empty((m, L), np.int64)
    for i in range(m):
        s = fin_state[i]
        r = fin_rank[i]
        for l in range(L - 1, -1, -1):
            Y[i, l] = s
            if l > 0:
                s, r = bp_state[l, s, r], bp_rank[l, s, r]
    return Y, scores[:m].copy()


# ------------------------------------------------------------------ trees and forests
#: the largest list memory `tree_top_k` allocates (bytes)
_TREE_TOP_K_BYTES = 4 * 2 ** 30

# A max-heap of (value, i, j) on three arrays, ordered by value, then by the smaller i, then j:
# the candidates of the k best sums a_i + b_j of two sorted lists.
@njit(cache=True, nogil=True)
def _before(v1, i1, j1, v2, i2, j2):
    """True when (v1, i1, j1) comes out of the heap before (v2, i2, j2)."""
    if v1 != v2:
        return v1 > v2
    if i1 != i2:
        return i1 < i2
    return j1 < j2


@njit(cache=True, nogil=True)
def _heap_push(hv, hi, hj, n, v, i, j):
    t = n
    hv[t], hi[t], hj[t] = v, i, j
    while t > 0:
        p = (t - 1) // 2
        if _before(hv[t], hi[t], hj[t], hv[p], hi[p], hj[p]):
            hv[t], hv[p] = hv[p], hv[t]
            hi[t], hi[p] = hi[p], hi[t]
            hj[t], hj[p] = hj[p], hj[t]
            t = p
        else:
            break
    return n + 1


@njit(cache=True, nogil=True)
def _heap_pop(hv, hi, hj, n):
    """Remove the top (returned by the caller from slot 0 beforehand); the new size."""
    n -= 1
    hv[0], hi[0], hj[0] = hv[n], hi[n], hj[n]
    t = 0
    while True:
        a = 2 * t + 1
        if a >= n:
            break
        b = a + 1
        c = a
        if b < n and _before(hv[b], hi[b], hj[b], hv[a], hi[a], hj[a]):
            c = b
        if _before(hv[c], hi[c], hj[c], hv[t], hi[t], hj[t]):
            hv[t], hv[c] = hv[c], hv[t]
            hi[t], hi[c] = hi[c], hi[t]
            hj[t], hj[c] = hj[c], hj[t]
            t = c
        else:
            break
    return n


@njit(cache=True, nogil=True)
def _k_best_sums(A, na, B, nb, k, out, oa, ob, hv, hi, hj):
    """The k best sums A[i] + B[j] of two lists sorted in decreasing order, best first, into
    ``out`` with their ranks (oa, ob); returns how many (min(k, na nb)).

    Frontier enumeration: (0, 0) is the best pair; after (i, j) the next candidates are
    (i, j+1) and, on the first column only, (i+1, 0), so each pair enters the heap once
    (from its left neighbour, or from above on column 0) and only after a pair that is at
    least as good.  O(k log k)."""
    if na == 0 or nb == 0:
        return 0
    n = _heap_push(hv, hi, hj, 0, A[0] + B[0], 0, 0)
    m = 0
    while m < k and n > 0:
        v, i, j = hv[0], hi[0], hj[0]
        n = _heap_pop(hv, hi, hj, n)
        out[m], oa[m], ob[m] = v, i, j
        m += 1
        if j + 1 < nb:
            n = _heap_push(hv, hi, hj, n, A[i] + B[j + 1], i, j + 1)
        if j == 0 and i + 1 < na:
            n = _heap_push(hv, hi, hj, n, A[i + 1] + B[0], i + 1, 0)
    return m


@njit(cache=True, nogil=True)
def _tree_top_k(unary, edges, pairwise, order, parent, parent_edge, k):
    V, K = unary.shape
    # S[v, l, :cnt[v, l]]: the best scores of v's subtree (the part folded in so far) with y_v = l
    S = np.full((V, K, k), -np.inf)
    cnt = np.zeros((V, K), np.int64)
    for v in range(V):
        for l in range(K):
            S[v, l, 0] = unary[v, l]
            cnt[v, l] = 1
    # message c -> parent over the parent's label l: best (S[c, m, r] + theta(l, m)), with (m, r)
    msgv = np.empty(k)
    msgm = np.zeros((V, K, k), np.int64)
    msgr = np.zeros((V, K, k), np.int64)
    # folding c's message into the parent's list: ranks in the list before and in the message
    folda = np.zeros((V, K, k), np.int64)
    foldb = np.zeros((V, K, k), np.int64)
    head = np.empty(K, np.int64)
    tmp = np.empty(k)
    hv = np.empty(k + 2)
    hi = np.empty(k + 2, np.int64)
    hj = np.empty(k + 2, np.int64)
    for t in range(V - 1, -1, -1):
        c = order[t]
        p = parent[c]
        if p < 0:
            continue
        e = parent_edge[c]
        c_tail = edges[e, 0] == c
        for l in range(K):
            # merge of K sorted lists (one per child label m), shifted by theta(l, m): O(k K)
            for m in range(K):
                head[m] = 0
            nm = 0
            while nm < k:
                best = -np.inf
                bm = -1
                for m in range(K):
                    if head[m] < cnt[c, m]:
                        th = pairwise[e, m, l] if c_tail else pairwise[e, l, m]
                        val = S[c, m, head[m]] + th
                        if bm < 0 or val > best:
                            best = val
                            bm = m
                if bm < 0:
                    break
                msgv[nm] = best
                msgm[c, l, nm] = bm
                msgr[c, l, nm] = head[bm]
                head[bm] += 1
                nm += 1
            n = _k_best_sums(S[p, l], cnt[p, l], msgv, nm, k, tmp, folda[c, l], foldb[c, l], hv, hi, hj)
            S[p, l, :n] = tmp[:n]
            cnt[p, l] = n
    # the trees: each root's list over its labels, then the k best sums across the trees
    n_roots = 0
    for v in range(V):
        if parent[v] < 0:
            n_roots += 1
    roots = np.empty(n_roots, np.int64)
    j = 0
    for t in range(V):
        if parent[order[t]] < 0:
            roots[j] = order[t]
            j += 1
    rootl = np.zeros((n_roots, k), np.int64)
    rootr = np.zeros((n_roots, k), np.int64)
    gfa = np.zeros((n_roots, k), np.int64)
    gfb = np.zeros((n_roots, k), np.int64)
    G = np.zeros(k)
    ng = 1  # the empty forest: one labelling of score 0
    rv = np.empty(k)
    for j in range(n_roots):
        r = roots[j]
        for l in range(K):
            head[l] = 0
        nr = 0
        while nr < k:
            best = -np.inf
            bl = -1
            for l in range(K):
                if head[l] < cnt[r, l]:
                    val = S[r, l, head[l]]
                    if bl < 0 or val > best:
                        best = val
                        bl = l
            if bl < 0:
                break
            rv[nr] = best
            rootl[j, nr] = bl
            rootr[j, nr] = head[bl]
            head[bl] += 1
            nr += 1
        ng = _k_best_sums(G, ng, rv, nr, k, tmp, gfa[j], gfb[j], hv, hi, hj)
        G[:ng] = tmp[:ng]
    # back-tracking: the roots' labels and ranks, then down each tree in BFS order
    Y = np.empty((ng, V), np.int64)
    cur = np.zeros(V, np.int64)
    for s in range(ng):
        g = s
        for j in range(n_roots - 1, -1, -1):
            b = gfb[j, g]
            r = roots[j]
            Y[s, r] = rootl[j, b]
            cur[r] = rootr[j, b]
            g = gfa[j, g]
        for t in range(V):
            v = order[t]
            p = parent[v]
            if p < 0:
                continue
            l = Y[s, p]
            after = cur[p]              # p's rank in its list just after v was folded in
            b = foldb[v, l, after]
            cur[p] = folda[v, l, after]  # ... and just before: the next child's fold
            Y[s, v] = msgm[v, l, b]
            cur[v] = msgr[v, l, b]
    return Y, G[:ng].copy()


def tree_top_k(unary, edges, pairwise, k, schedule=None):  # type: ignore[no-untyped-def]
    """The k highest-energy labellings of a forest, best first, by list max-product.

    E(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}] (the shared inference
    interface of `structfw.oracles.graph`).

    Algorithm: max-product in the k-best (max, +) semiring (Seroussi & Golmard 1994, "An
    algorithm directly finding the K most probable configurations in Bayesian networks";
    the semiring view in Goodman 1999, "Semiring parsing"), the tree generalisation of list
    Viterbi (`chain_top_k`).  For each node v and label l the k best scores of v's subtree
    with y_v = l are kept, sorted, with back-pointers.  From the leaves up, the message of a
    child c over its parent's label l is the merge of the K lists of c (one per label m,
    shifted by theta_e(l, m)), cut at k; the parent's list is the k best sums of its list so
    far and the message (a frontier enumeration over a heap).  A labelling among the k best
    of the forest restricts to one among the k best of every subtree given its root label
    (otherwise k better labellings would share the rest), so the k best at the roots --
    merged over labels, then the k best sums across the trees -- are exact.

    Partitioning (Lawler 1972; Nilsson 1998, "An efficient algorithm for finding the M most
    probable configurations in probabilistic expert systems") is the alternative: it finds
    the labellings one by one, each by max-marginals of a constrained problem, in
    O(k V E K^2) unless the max-marginals are updated incrementally.  The list method takes
    one sweep, O(E K^2 k + V K k log k) time and O(V K k) memory, which for prediction
    (k up to a few hundred) is both simpler and faster.

    Parameters
    ----------
    unary : (V, K) float64, finite.
    edges : (E, 2) int64, a forest.
    pairwise : (E, K, K) float64, finite.
    k : int >= 1.
    schedule : TreeSchedule, optional
        The forest's `structfw.oracles.graph.forest_schedule`; computed (and the graph
        checked) when omitted.

    Returns
    -------
    Y : (m, V) int64, m = min(k, K^V), the labellings in decreasing energy; ties keep a
        deterministic order.
    scores : (m,) float64, their energies.

    Raises
    ------
    ValueError
        When the graph has a cycle, k < 1 or the arrays are malformed.
    """
    from .graph import _as_potentials, forest_schedule

    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if schedule is None:
        unary, edges, pairwise = _as_potentials(unary, edges, pairwise)
        if not (np.all(np.isfinite(unary)) and np.all(np.isfinite(pairwise))):
            raise ValueError("tree_top_k needs finite unary and pairwise potentials")
        schedule = forest_schedule(unary.shape[0], edges)
        if schedule is None:
            raise ValueError("tree_top_k needs a forest, but the graph has a cycle: the k best labellings of a "
                             "loopy graph are not computed exactly here")
    V, K = unary.shape
    n_all = 1
    for _ in range(V):  # K^V labellings in all: cap k before the kernel allocates (V, K, k) lists
        n_all *= K
        if n_all >= k:
            break
    k = int(min(k, n_all))
    need = 5 * 8 * V * K * k  # the kernel's five (V, K, k) arrays of 8-byte entries
    if need > _TREE_TOP_K_BYTES:
        raise ValueError(f"k = {k} needs {need / 2 ** 30:.1f} GiB of lists for V = {V} nodes and K = {K} labels "
                         f"(5 x V x K x k 8-byte entries, limit {_TREE_TOP_K_BYTES / 2 ** 30:.0f} GiB); ask for "
                         "fewer labellings")
    return _tree_top_k(np.ascontiguousarray(unary, dtype=np.float64), edges,
                       np.ascontiguousarray(pairwise, dtype=np.float64), schedule.order, schedule.parent,
                       schedule.parent_edge, k)
