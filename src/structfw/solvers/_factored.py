"""The factored block storage of chains: per-position label weights instead of rows.

docs/design.md, "The engine and its parts".  A chain block's part of w, w_i = A alpha_[i], is
(1/(lam n)) sum_y alpha_i(y) (phi(x_i, y_i) - phi(x_i, y)); its unary part is sum_t x_t (x) a_t
with a_t in R^K the position's label weights and its transition part a K x K matrix T_i.  The
factored storage keeps A (one row a_t per training position) and T (n, K, K) instead of the d
numbers of a row, and reads w_i only through

    ⟨w_i, w⟩   = sum_t ⟨a_t, U_t⟩ + ⟨T_i, W_tr⟩              U = the unary scores x_t . W_c (the oracle's),
    ||d||^2    = sum_{t,s} G_i[t, s] ⟨D_t, D_s⟩ + ||dT||^2   G_i = [⟨x_t, x_s⟩] the block's Gram matrix,

for the FW direction d = w_s - w_i (D, dT its label weights and transitions).  w itself stays
explicit: the step adds gamma D[t, c] x_t to label c's weights for the labels a position has
taken.  What it saves is the rows: n d numbers, read from memory at every step (OCR: 32 KB a
step against 7 KB of label weights and transitions; a pass 0.6-0.85x of dense rows'), and for a
kernel map's coordinates (d = r K, r ~ the number of training positions) most of a fit's memory
(docs/results/engine.md, "The factored storage").  The same steps as dense rows, to rounding
(tests/test_factored.py).

The storage serves every block step of the engine with an exact compiled dense-chain oracle, or a
multiclass one (a chain of length 1 without transitions), one block at a time: FW, pairwise and away
steps along d = a w_i + b1 psi(y1) + b2 psi(y2) (`factored_block_step`), any sampling, either step
size, averaging, the cache and MP-BCFW, whose corner sets keep labellings scored from the unary
scores (`structfw.solvers.corners`, ``labels``); ``block_storage="auto"`` takes it there.  Minibatches
keep rows (`structfw.solvers.plan.make_plan`), and a factored state they continue becomes rows
(`structfw.solvers.block_state.BCFWState.unfactor`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from ..oracles.chain import (chain_unary_dense, hamming_loss, labelling_score, loss_augmented_into, score_difference,
                             viterbi_into)
from ..oracles.compiled import CHAIN_DENSE, MULTICLASS_DENSE
from ._kernels import step_along


class FactoredBlocks:
    """The factored w_i of a chain state: label weights A (N, K) and transition parts T (n, K, K).

    State data (a warm start continues it); ``starts`` (n + 1,) says which rows of A are block
    i's.  The Gram matrices of the blocks come with each solve's data (`block_grams`)."""

    def __init__(self, starts: np.ndarray, n_states: int) -> None:
        self.starts = np.ascontiguousarray(starts, np.int64)
        n = self.starts.shape[0] - 1
        self.A = np.zeros((int(self.starts[-1]), n_states))
        self.T = np.zeros((n, n_states, n_states))
        # touch the pages now, as dense rows do (BCFWState): first-touch faults in the first pass
        # made it 2.7x the others on OCR (45 MiB of label weights and transitions)
        self.A.fill(0.0)
        self.T.fill(0.0)

    def rescale(self, r: float) -> None:
        """w_i -> r w_i for every block (a new lam with alpha kept)."""
        self.A *= r
        self.T *= r

    def row(self, Xc: np.ndarray, i: int, d: int) -> np.ndarray:
        """Block i's w_i as a d-row in the model's layout: sum_t x_t (x) a_t, then T_i."""
        a0, a1 = self.starts[i], self.starts[i + 1]
        return _model_layout(self.A[a0:a1], Xc[a0:a1], self.T[i], d)

    def place(self, i: int, y_true: np.ndarray, y: np.ndarray, inv_ln: float, transitions: bool) -> None:
        """Block i at the corner of labelling y: w_i = (phi(x_i, y_i) - phi(x_i, y)) / (lam n)."""
        a0, a1 = self.starts[i], self.starts[i + 1]
        A_i, T_i = self.A[a0:a1], self.T[i]
        A_i[:] = 0.0
        T_i[:] = 0.0
        t = np.arange(a1 - a0)
        np.add.at(A_i, (t, y_true), inv_ln)
        np.add.at(A_i, (t, y), -inv_ln)
        if transitions:
            np.add.at(T_i, (y_true[:-1], y_true[1:]), inv_ln)
            np.add.at(T_i, (y[:-1], y[1:]), -inv_ln)

    def total(self, Xc: np.ndarray, d: int) -> np.ndarray:
        """sum_i w_i in the model's layout: Xc^T A for the unary part, sum_i T_i for the transitions."""
        return _model_layout(self.A, Xc, self.T.sum(axis=0), d)

    def check_layout(self, pos: tuple[Any, ...], w: np.ndarray) -> None:
        """ValueError unless the label weights belong to these positions ((positions, starts, labels,
        K, F) of `positions`) and the blocks sum to w (a state read from a file could claim either)."""
        Xc, starts, _, S, F = pos
        n = starts.shape[0] - 1
        if not np.array_equal(self.starts, starts):
            raise ValueError("field 'BCFWState.factored.starts' does not match the training set's sequences: "
                             "expected the block starts of the data the state was fitted on")
        if self.A.shape != (int(starts[-1]), int(S)) or self.T.shape != (n, int(S), int(S)):
            raise ValueError(f"fields 'BCFWState.factored.A/T' have shapes {self.A.shape}/{self.T.shape}: expected "
                             f"({int(starts[-1])}, {int(S)}) and ({n}, {int(S)}, {int(S)})")
        total = self.total(Xc, w.shape[0])
        scale = float(np.abs(self.A).sum(axis=1) @ np.abs(Xc).sum(axis=1) + np.abs(self.T).sum()) + 1.0
        if not np.allclose(total, w, rtol=0.0, atol=1e-9 * scale):
            raise ValueError("field 'BCFWState.factored' does not sum to w: expected label weights whose blocks "
                             "sum to the state's w")


def _model_layout(A: np.ndarray, X: np.ndarray, T: np.ndarray, d: int) -> np.ndarray:
    """The d-vector of label weights A at positions X (sum_t x_t (x) a_t, label-major blocks of F) followed
    by the transitions T (a chain's K x K; nothing for a multiclass model, d = K F)."""
    SF = A.shape[1] * X.shape[1]
    out = np.empty(d)
    out[:SF] = (A.T @ X).ravel()
    if d > SF:
        out[SF:] = T.ravel()
    return out


#: the compiled oracles whose training sets the storage reads
FACTORED_KINDS = (CHAIN_DENSE, MULTICLASS_DENSE)


def positions(compiled: tuple[Any, Any]) -> tuple[Any, ...]:
    """(positions (N, F), block starts (n + 1,), labels (N,), K, F) of a dense chain's or a
    multiclass model's packed training set (a multiclass example is one position)."""
    kind, data = compiled
    if kind == CHAIN_DENSE:
        return data[:5]
    Xc, labels, K, F = data
    return (Xc, np.arange(len(labels) + 1, dtype=np.int64), labels, K, F)


def block_grams(Xc: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(G, offsets): the Gram matrix x_t . x_s of each block's positions, flattened block after
    block (block i's T_i x T_i entries at offsets[i]:offsets[i+1])."""
    lengths = np.diff(starts)
    offsets = np.zeros(lengths.shape[0] + 1, np.int64)
    np.cumsum(lengths * lengths, out=offsets[1:])
    G = np.empty(int(offsets[-1]))
    _fill_grams(np.ascontiguousarray(Xc, np.float64), np.ascontiguousarray(starts, np.int64), offsets, G)
    return G, offsets


@njit(cache=True, fastmath=True, nogil=True)
def _fill_grams(Xc, starts, offsets, G):
    """`block_grams`' loop, compiled: a solve builds them before its first pass (OCR: 6 against 25-33 ms
    with one BLAS product per block called from Python)."""
    for i in range(starts.shape[0] - 1):
        a0 = starts[i]
        T = starts[i + 1] - a0
        off = offsets[i]
        for t in range(T):
            for s in range(t, T):
                g = 0.0
                for f in range(Xc.shape[1]):
                    g += Xc[a0 + t, f] * Xc[a0 + s, f]
                G[off + t * T + s] = g
                G[off + s * T + t] = g


def block_w_dots(Xc: np.ndarray, fb: FactoredBlocks, w: np.ndarray) -> np.ndarray:
    """⟨w_i, w⟩ of every block: sum_t ⟨a_t, U_t⟩ + ⟨T_i, W_tr⟩, with U = Xc W^T for all positions at once
    (no W_tr for multiclass)."""
    S = fb.A.shape[1]
    F = Xc.shape[1]
    U = Xc @ w[:S * F].reshape(S, F).T
    per_position = np.einsum("pk,pk->p", fb.A, U)
    sums = np.add.reduceat(per_position, fb.starts[:-1]) if per_position.shape[0] else np.zeros(0)
    sums[np.diff(fb.starts) == 0] = 0.0  # reduceat gives an empty block its next position
    if w.shape[0] > S * F:
        sums += np.einsum("iab,ab->i", fb.T, w[S * F:].reshape(S, S))
    return sums


@njit(cache=True, nogil=True)
def _label_direction(A_i, yt, a, y1, b1, y2, b2, D, live):
    """D[:T] = a A_i + b1 a(psi(y1)) + b2 a(psi(y2)), the label weights of the direction d = a w_i + b1 psi(y1)
    + b2 psi(y2) (psi(y) = phi(y_i) - phi(y), whose label weights are e_{y_i,t} - e_{y_t}); y2 empty when the
    step has one corner.  FW: a = -1, b1 = 1/(lam n); pairwise: a = 0, b2 = -b1; away: a = 1, y1 the away
    corner, b1 = -1/(lam n).  D is the chunk's scratch, written in place (no allocation per step), and
    live[t] says whether row t may be non-zero."""
    two = y2.shape[0] > 0
    for t in range(A_i.shape[0]):
        for c in range(A_i.shape[1]):
            D[t, c] = a * A_i[t, c]
        D[t, yt[t]] += b1 + b2
        D[t, y1[t]] -= b1
        if two:
            D[t, y2[t]] -= b2
        # a row without a multiple of A_i is zero where the corners agree (b1 + b2 = 0 then)
        live[t] = a != 0.0 or not two or y1[t] != y2[t] or b1 + b2 != 0.0


@njit(cache=True, fastmath=True, nogil=True)
def _unary_terms(D, U, G_i, live):
    """(⟨d, w⟩, ||d||^2) of d's unary part: sum D * U and sum_{t,s} G_i[t, s] ⟨D_t, D_s⟩, the
    symmetric Gram sum taken over t <= s (each label row D_t a contiguous vector of K) and over the
    positions whose row may be non-zero (``live``: a pairwise step's corners differ in few)."""
    T, S = U.shape
    wd = 0.0
    for t in range(T):
        for c in range(S):
            wd += D[t, c] * U[t, c]
    nrm = 0.0
    for t in range(T):
        if not live[t]:
            continue
        for s in range(t, T):
            if not live[s]:
                continue
            g = G_i[t * T + s]
            if g != 0.0:
                acc = 0.0
                for c in range(S):
                    acc += D[t, c] * D[s, c]
                nrm += g * acc if s == t else 2.0 * g * acc
    return wd, nrm


@njit(cache=True, nogil=True)
def _scatter_transitions(E, yt, y1, b1, y2, b2, S):
    """E += the transitions of b1 psi(y1) + b2 psi(y2) (+(b1 + b2) on y_i's pairs, -b1 on y1's, -b2 on y2's;
    y2 empty for one corner), E flat (K*K) and zero on entry."""
    two = y2.shape[0] > 0
    for t in range(yt.shape[0] - 1):
        E[yt[t] * S + yt[t + 1]] += b1 + b2
        E[y1[t] * S + y1[t + 1]] -= b1
        if two:
            E[y2[t] * S + y2[t + 1]] -= b2


@njit(cache=True, nogil=True)
def _clear_transitions(E, yt, y1, y2, S):
    """E back to zeros: only the entries `_scatter_transitions` touched."""
    two = y2.shape[0] > 0
    for t in range(yt.shape[0] - 1):
        E[yt[t] * S + yt[t + 1]] = 0.0
        E[y1[t] * S + y1[t + 1]] = 0.0
        if two:
            E[y2[t] * S + y2[t + 1]] = 0.0


@njit(cache=True, fastmath=True, nogil=True)
def _transition_terms(T_i, a, E, W_tr):
    """(⟨dT, W_tr⟩, ||dT||^2) for dT = a T_i + E in one sweep over the K*K transitions."""
    wd = 0.0
    nrm = 0.0
    for ab in range(T_i.shape[0]):
        dab = E[ab] + a * T_i[ab]
        wd += dab * W_tr[ab]
        nrm += dab * dab
    return wd, nrm


@njit(cache=True, nogil=True)
def _move_unary(w, u, inv_c, x, D, A_i, gamma, F):
    """w += gamma D[t, c] x_t for every label c of every position t with D[t, c] != 0 (the lazy
    average's buffer u, if any, gets -inv_c times the change), and A_i += gamma D."""
    has_u = u.shape[0] > 0
    for t in range(x.shape[0]):
        xt = x[t]
        for c in range(D.shape[1]):
            coef = gamma * D[t, c]
            if coef != 0.0:
                A_i[t, c] += coef
                base = c * F
                if has_u:
                    cu = -inv_c * coef
                    for f in range(F):
                        w[base + f] += coef * xt[f]
                        u[base + f] += cu * xt[f]
                else:
                    for f in range(F):
                        w[base + f] += coef * xt[f]


@njit(cache=True, nogil=True)
def _move_transitions(W_tr, u_tr, inv_c, T_i, a, E, gamma):
    """W_tr += gamma dT and T_i += gamma dT for dT = a T_i + E in one sweep (u_tr, if any, gets -inv_c
    times W_tr's change)."""
    has_u = u_tr.shape[0] > 0
    for ab in range(T_i.shape[0]):
        step = gamma * (E[ab] + a * T_i[ab])
        W_tr[ab] += step
        T_i[ab] += step
        if has_u:
            u_tr[ab] -= inv_c * step


def factored_arrays(compiled: tuple[Any, Any], fb: FactoredBlocks, grams: tuple[Any, Any]) -> tuple[Any, ...]:
    """What the compiled passes take of a factored state: (True, positions, (A, T), grams, scratch)."""
    data = positions(compiled)
    return (True, data, (fb.A, fb.T), grams, factored_scratch(data[1], int(data[3]), compiled[0] == CHAIN_DENSE))


def no_factored() -> tuple[Any, ...]:
    """The same tuple's types for a pass on rows (its first field False; nothing else is read)."""
    data = (np.zeros((0, 0)), np.zeros(1, np.int64), np.zeros(0, np.int64), 0, 0)
    return (False, data, (np.zeros((0, 0)), np.zeros((0, 0, 0))), (np.zeros(0), np.zeros(1, np.int64)),
            factored_scratch(data[1], 0, False))


@njit(cache=True, nogil=True)
def factored_scratch(starts, S, chain):
    """A pass's scratch for the factored step and the oracle on unary scores: (direction D, transitions'
    scatter E, loss-augmented scores V, Viterbi's max-marginals M, its column cur, labelling ys, no
    values (a labelling corner has none: the store of labellings keeps none), the transitions of a
    multiclass model (zeros), the direction's non-zero rows)."""
    longest = 0
    for i in range(starts.shape[0] - 1):
        longest = max(longest, starts[i + 1] - starts[i])
    return (np.empty((longest, S)), np.zeros(S * S if chain else 0), np.empty((longest, S)),
            np.empty((longest, S)), np.empty(S), np.empty(longest, np.int64), np.zeros(0), np.zeros((S, S)),
            np.empty(longest, np.bool_))


@njit(cache=True, nogil=True, inline="always")
def block_unary(fac, i, w):
    """The unary scores U (L_i, K) of block i's positions at w (the oracle's, which the step reads too)."""
    Xc, starts, Yc, S, F = fac[1]
    a0, a1 = starts[i], starts[i + 1]
    return chain_unary_dense(Xc[a0:a1], w, S, F, Yc[a0:a1], False)


@njit(cache=True, nogil=True, inline="always")
def labels_of(fac, i, U, w):
    """(U, W_tr, y_i, ⟨phi(x_i, y_i), w⟩): what `structfw.solvers.corners.cs_scan` reads to score block
    i's labellings."""
    Xc, starts, Yc, S, F = fac[1]
    yt = Yc[starts[i]:starts[i + 1]]
    return U, w[S * F:], yt, labelling_score(U, w[S * F:], yt)


# not inlined: an inlined body takes its caller's flags, and general_chunk has no fastmath, so the
# inlined sums ran as one chain of scalar additions (the K*K transitions' alone ~1 us a step on OCR)
@njit(cache=True, fastmath=True, nogil=True)
def factored_w_dot(fac, i, U, w):
    """⟨w_i, w⟩ = sum_t ⟨a_t, U_t⟩ + ⟨T_i, W_tr⟩ of block i, from its unary scores U at w."""
    Xc, starts, Yc, S, F = fac[1]
    A, T = fac[2]
    a0 = starts[i]
    A_i = A[a0:a0 + U.shape[0]]
    s = 0.0
    for t in range(U.shape[0]):
        for c in range(S):
            s += A_i[t, c] * U[t, c]
    if w.shape[0] > S * F:
        T_i = T[i].reshape(S * S)
        W_tr = w[S * F:]
        for ab in range(S * S):
            s += T_i[ab] * W_tr[ab]
    return s


@njit(cache=True, nogil=True, inline="always")
def unary_oracle(fac, i, U, w):
    """The max oracle of block i from its unary scores U: (y*, no values, L_i(y*), ⟨psi_i(y*), w⟩), y* a view
    of the scratch (the loss-augmented Viterbi of `structfw.oracles.chain`, Hamming loss)."""
    Xc, starts, Yc, S, F = fac[1]
    scr = fac[4]
    Vs, M, cur, ys_buf, no_values, P0 = scr[2], scr[3], scr[4], scr[5], scr[6], scr[7]
    a0, a1 = starts[i], starts[i + 1]
    yt = Yc[a0:a1]
    W_tr = w[S * F:]
    V = Vs[:a1 - a0]
    loss_augmented_into(V, U, yt)
    ys = ys_buf[:a1 - a0]
    # Viterbi on one position is the argmax, with P = 0
    viterbi_into(V, W_tr.reshape(S, S) if W_tr.shape[0] > 0 else P0, M, cur, ys)
    return ys, no_values, hamming_loss(yt, ys), score_difference(U, W_tr, yt, ys)


@njit(cache=True, nogil=True)
def factored_block_step(w, fac, i, U, a, s1, s2, dl, rule, avg):
    """`structfw.solvers._kernels.block_step` on the factored storage: the step along d = a w_i + b1 psi(y1)
    + b2 psi(y2) (``s1``, ``s2`` = (labelling, -, b, -) corners, `NO_CORNER` for none), with ``rule`` =
    (lam, gmax, gfixed) and ``avg`` = (u, inv_c) as there.  Returns (gamma, slope).

    It reads the block's L x K label weights, its K x K transitions and L x L Gram matrix, not a d-row:
    ⟨d, w⟩ comes from the unary scores U at w, ||d||^2 from the Gram matrix, and the move adds x_t to the
    weights of the labels position t has taken (only the positions where the corners differ, for a
    pairwise step)."""
    Xc, starts, Yc, S, F = fac[1]
    A, T = fac[2]
    G, gofs = fac[3]
    D, E, live = fac[4][0], fac[4][1], fac[4][8]
    lam, gmax, gfixed = rule
    u, inv_c = avg[0], avg[1]
    a0, a1 = starts[i], starts[i + 1]
    yt = Yc[a0:a1]
    y1, b1, y2, b2 = s1[0], s1[2], s2[0], s2[2]
    Di, live_i = D[:a1 - a0], live[:a1 - a0]
    _label_direction(A[a0:a1], yt, a, y1, b1, y2, b2, Di, live_i)
    wd, nrm = _unary_terms(Di, U, G[gofs[i]:gofs[i + 1]], live_i)
    W_tr = w[S * F:]
    chain = W_tr.shape[0] > 0  # a multiclass model has no transitions
    T_i = T[i].reshape(S * S) if chain else E
    if chain:
        _scatter_transitions(E, yt, y1, b1, y2, b2, S)
        wd_tr, nrm_tr = _transition_terms(T_i, a, E, W_tr)
        wd += wd_tr
        nrm += nrm_tr
    slope = lam * wd - dl
    gamma = step_along(slope, nrm, lam, gmax, gfixed)
    if gamma > 0.0:
        _move_unary(w, u, inv_c, Xc[a0:a1], Di, A[a0:a1], gamma, F)
        if chain:
            _move_transitions(W_tr, u[S * F:] if u.shape[0] > 0 else u, inv_c, T_i, a, E, gamma)
    if chain:
        _clear_transitions(E, yt, y1, y2, S)
    return gamma, slope
