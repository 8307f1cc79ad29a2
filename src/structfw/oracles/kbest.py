"""The k best labellings of a chain: list Viterbi (numba).

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
