"""Bipartite matching (word alignment) kernels: edge scores, assignment, joint features.

The setting of Taskar, Lacoste-Julien and Klein (2005), "A discriminative matching
approach to word alignment" -- the BCFW paper's third task (Sec. 6, n = 5000, d = 82):
a sentence pair has m_s source and m_t target words, every pair (j, k) is a candidate
edge with a feature vector x_jk in R^F, and an alignment is a one-to-one *partial*
matching, written y (m_s,) with y[j] the target aligned to source word j or -1 (null).

With a score s_jk per edge and score 0 for a null alignment, the best alignment is

    argmax_y  sum_{j : y[j] >= 0} s_{j, y[j]}

over partial matchings.  Since null scores 0, this equals the maximum-weight *complete*
assignment of the smaller side on the clipped scores max(s, 0), with the edges of score
<= 0 dropped afterwards: any partial matching extends to a complete one (the graph is
complete bipartite) without lowering the clipped value, and dropping the clipped edges of
an optimal complete one gives a partial matching of the same value.  So one rectangular
``scipy.optimize.linear_sum_assignment`` call on an (m_s, m_t) matrix solves it, with no
dummy rows or columns.

Layouts: dense features x (m_s, m_t, F); CSR features with row j*m_t + k for edge (j, k).
The weight vector is w (F,), phi(x, y) = sum_{j : y[j] >= 0} x_{j, y[j]}.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)
from scipy.optimize import linear_sum_assignment

from .._linalg import coalesce


# ------------------------------------------------------------ edge scores
@njit(cache=True, nogil=True)
def _add_hamming_bonus(Sc, y_true, fn_cost, norm):
    """Sc[j, k] += (1 - (1 + fn_cost) [y_true[j] == k]) / norm.

    The edge Hamming loss of the matching model, norm * Delta(y_true, y) =
    fn_cost |E_true minus E| + |E minus E_true| = fn_cost |E_true| + sum_{e in E} (1 - (1 + fn_cost)[e in E_true]),
    is a constant plus a sum over the chosen edges, so loss-augmented decoding stays
    an assignment problem with these per-edge bonuses."""
    ms, mt = Sc.shape
    inv = 1.0 / norm
    hit = (1.0 - (1.0 + fn_cost)) * inv
    for j in range(ms):
        for k in range(mt):
            Sc[j, k] += hit if y_true[j] == k else inv


@njit(cache=True, nogil=True)
def matching_scores_dense(x, w, y_true, augment, fn_cost, norm):
    """(m_s, m_t) edge scores ⟨w, x_jk⟩ (+ the loss bonuses when ``augment``).

    Parameters
    ----------
    x : (m_s, m_t, F) float64;  w : (F,) float64
    y_true : (m_s,) int64, -1 = null (read only when augment)
    augment : bool;  fn_cost : float, weight of a missed true edge;  norm : float > 0
    """
    ms, mt, F = x.shape
    Sc = np.empty((ms, mt))
    for j in range(ms):
        for k in range(mt):
            acc = 0.0
            for f in range(F):
                acc += x[j, k, f] * w[f]
            Sc[j, k] = acc
    if augment:
        _add_hamming_bonus(Sc, y_true, fn_cost, norm)
    return Sc


@njit(cache=True, nogil=True)
def matching_scores_csr(indptr, indices, data, ms, mt, w, y_true, augment, fn_cost, norm):
    """As `matching_scores_dense` for CSR edge features (row j*m_t + k)."""
    Sc = np.empty((ms, mt))
    for j in range(ms):
        for k in range(mt):
            r = j * mt + k
            acc = 0.0
            for p in range(indptr[r], indptr[r + 1]):
                acc += data[p] * w[indices[p]]
            Sc[j, k] = acc
    if augment:
        _add_hamming_bonus(Sc, y_true, fn_cost, norm)
    return Sc


# ------------------------------------------------------------ assignment
def max_weight_partial_matching(scores):
    """argmax over one-to-one partial matchings of the sum of the chosen edges' scores.

    Null alignment scores 0, so an edge is used only when its score is > 0 (ties go to
    null).  Solved as one rectangular linear assignment on max(scores, 0) (see the
    module docstring for why that is exact).

    Parameters
    ----------
    scores : (m_s, m_t) float array, finite

    Returns
    -------
    y : (m_s,) int64, y[j] = target of source j or -1; targets are used at most once.
    """
    scores = np.asarray(scores, dtype=np.float64)
    ms, mt = scores.shape
    y = np.full(ms, -1, np.int64)
    if ms == 0 or mt == 0:
        return y
    gain = np.maximum(scores, 0.0)
    rows, cols = linear_sum_assignment(gain, maximize=True)
    keep = scores[rows, cols] > 0.0
    y[rows[keep]] = cols[keep]
    return y


def matching_value(scores, y):
    """sum_{j : y[j] >= 0} scores[j, y[j]] (the objective `max_weight_partial_matching` maximises)."""
    y = np.asarray(y)
    on = y >= 0
    return float(np.asarray(scores)[np.flatnonzero(on), y[on]].sum())


# ------------------------------------------------------------ loss
@njit(cache=True, nogil=True)
def matching_hamming(y_true, y, fn_cost):
    """Edge Hamming loss of two alignments, normalised to [0, 1]:

        (fn_cost |E_true minus E| + |E minus E_true|) / ((1 + fn_cost) m_s),

    E the edge set {(j, y[j]) : y[j] >= 0}.  A source word has at most one edge, so the
    sets differ source word by source word: a wrong link costs 1 + fn_cost, a missed one
    fn_cost, a spurious one 1 (then divided by (1 + fn_cost) m_s)."""
    ms = y_true.shape[0]
    if ms == 0:
        return 0.0
    acc = 0.0
    for j in range(ms):
        a = y_true[j]
        b = y[j]
        if a != b:
            if a >= 0:
                acc += fn_cost
            if b >= 0:
                acc += 1.0
    return acc / ((1.0 + fn_cost) * ms)


# ------------------------------------------------------------ joint features
@njit(cache=True, nogil=True)
def matching_phi_diff_dense(x, ya, yb):
    """Sparse phi(x, ya) - phi(x, yb) for dense x (m_s, m_t, F), summing only the source
    words whose edges differ; yb = -1 everywhere gives phi(x, ya).  Returns sorted
    indices and values with exact zeros dropped."""
    ms, mt, F = x.shape
    buf = np.zeros(F)
    touched = False
    for j in range(ms):
        a = ya[j]
        b = yb[j]
        if a == b:
            continue
        touched = True
        if a >= 0:
            for f in range(F):
                buf[f] += x[j, a, f]
        if b >= 0:
            for f in range(F):
                buf[f] -= x[j, b, f]
    n = 0
    if touched:
        for f in range(F):
            if buf[f] != 0.0:
                n += 1
    idx = np.empty(n, np.int64)
    val = np.empty(n)
    if n:
        m = 0
        for f in range(F):
            if buf[f] != 0.0:
                idx[m] = f
                val[m] = buf[f]
                m += 1
    return idx, val


@njit(cache=True, nogil=True)
def matching_phi_diff_csr(indptr, indices, data, mt, ya, yb):
    """As `matching_phi_diff_dense` for CSR edge features (row j*m_t + k); never
    builds a length-F buffer (the pairs are sorted and summed instead)."""
    ms = ya.shape[0]
    cnt = 0
    for j in range(ms):
        if ya[j] != yb[j]:
            if ya[j] >= 0:
                r = j * mt + ya[j]
                cnt += indptr[r + 1] - indptr[r]
            if yb[j] >= 0:
                r = j * mt + yb[j]
                cnt += indptr[r + 1] - indptr[r]
    ti = np.empty(cnt, np.int64)
    tv = np.empty(cnt)
    n = 0
    for j in range(ms):
        a = ya[j]
        b = yb[j]
        if a == b:
            continue
        if a >= 0:
            r = j * mt + a
            for p in range(indptr[r], indptr[r + 1]):
                ti[n] = indices[p]
                tv[n] = data[p]
                n += 1
        if b >= 0:
            r = j * mt + b
            for p in range(indptr[r], indptr[r + 1]):
                ti[n] = indices[p]
                tv[n] = -data[p]
                n += 1
    return coalesce(ti, tv)
