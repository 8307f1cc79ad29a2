"""The factored block storage of chains: per-position label weights instead of rows.

docs/design.md, "The engine and its parts".  A chain block's part of w, w_i = A alpha_[i], is
(1/(lam n)) sum_y alpha_i(y) (phi(x_i, y_i) - phi(x_i, y)); its unary part is sum_t x_t (x) a_t
with a_t in R^K the position's label weights and its transition part a K x K matrix T_i.  The
factored storage keeps A (one row a_t per training position) and T (n, K, K) instead of the d
numbers of a row, and reads w_i only through

    <w_i, w>   = sum_t <a_t, U_t> + <T_i, W_tr>          U = the unary scores x_t . W_c (the oracle's),
    ||d||^2    = sum_c D[:, c]^T G_i D[:, c] + ||dT||^2   G_i = [<x_t, x_s>] the block's Gram matrix,

for the FW direction d = w_s - w_i (D, dT its label weights and transitions).  w itself stays
explicit: the step adds gamma D[t, c] x_t to label c's weights for the labels a position has
taken.  What it saves is the rows: n d numbers, which for a kernel map's coordinates (d = r K,
r ~ the number of training positions) are most of a fit's memory and of a pass's memory traffic
(docs/results/engine.md, "Kernel BCFW as a storage of the engine").  The same steps as dense
rows, to rounding (tests/test_factored.py); `structfw bench block-state` measured both on
linear chains, where the rows are cheap.

The storage serves the plain FW step with an exact compiled dense-chain oracle, or a multiclass
one (a chain of length 1 without transitions), with any sampling, either step size and averaging;
the options that keep corner sets (cache, pairwise and away steps, MP-BCFW) or batch the oracle
calls keep rows (`structfw.solvers.plan.make_plan`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ..oracles.chain import chain_unary_dense, hamming_loss, loss_augmented_viterbi
from ..oracles.compiled import CHAIN_DENSE, MULTICLASS_DENSE
from ._fastpass import _H_TOL, K, _avg_begin, _close_step, _draw_block, _fixed_step
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

    def rescale(self, r: float) -> None:
        """w_i -> r w_i for every block (a new lam with alpha kept)."""
        self.A *= r
        self.T *= r


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
    for i in range(lengths.shape[0]):
        x = Xc[starts[i]:starts[i + 1]]
        G[offsets[i]:offsets[i + 1]] = (x @ x.T).ravel()
    return G, offsets


def block_w_dots(Xc: np.ndarray, fb: FactoredBlocks, w: np.ndarray) -> np.ndarray:
    """<w_i, w> of every block: sum_t <a_t, U_t> + <T_i, W_tr>, with U = Xc W^T for all positions at once
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
def _direction(A_i, T_i, yt, ys, inv_ln):
    """D = a(w_s) - A_i and dT = T(w_s) - T_i, with w_s = (phi(y_i) - phi(y*)) / (lam n)."""
    D = -A_i
    dT = -T_i
    for t in range(yt.shape[0]):
        D[t, yt[t]] += inv_ln
        D[t, ys[t]] -= inv_ln
    for t in range(yt.shape[0] - 1):
        dT[yt[t], yt[t + 1]] += inv_ln
        dT[ys[t], ys[t + 1]] -= inv_ln
    return D, dT


@njit(cache=True, nogil=True)
def _terms(D, dT, U, G_i, W_tr):
    """(<d, w>, ||d||^2): sum D * U + <dT, W_tr> and sum_c D[:, c]^T G_i D[:, c] + ||dT||^2."""
    T, S = D.shape
    wd = 0.0
    for t in range(T):
        for c in range(S):
            wd += D[t, c] * U[t, c]
    nrm = 0.0
    for t in range(T):
        for s in range(T):
            g = G_i[t * T + s]
            if g != 0.0:
                acc = 0.0
                for c in range(S):
                    acc += D[t, c] * D[s, c]
                nrm += g * acc
    if W_tr.shape[0] > 0:  # a chain's transitions (a multiclass model has none)
        for a in range(S):
            for b in range(S):
                wd += dT[a, b] * W_tr[a * S + b]
                nrm += dT[a, b] * dT[a, b]
    return wd, nrm


@njit(cache=True, nogil=True)
def _move(w, u, inv_c, x, D, dT, gamma, S, F):
    """w += gamma d (the lazy average's buffer u gets -inv_c times the change): gamma D[t, c] x_t
    into label c's weights for every label with D[t, c] != 0, and gamma dT into the transitions."""
    has_u = u.shape[0] > 0
    for t in range(D.shape[0]):
        xt = x[t]
        for c in range(S):
            coef = gamma * D[t, c]
            if coef != 0.0:
                base = c * F
                for f in range(F):
                    step = coef * xt[f]
                    w[base + f] += step
                    if has_u:
                        u[base + f] -= inv_c * step
    off = S * F
    if w.shape[0] == off:  # no transitions
        return
    for a in range(S):
        for b in range(S):
            step = gamma * dT[a, b]
            w[off + a * S + b] += step
            if has_u:
                u[off + a * S + b] -= inv_c * step


@njit(cache=True, nogil=True)
def factored_fw_chunk(data, m, sampler, w, blocks, grams, rule, avg, state):
    """m plain FW block iterations (Alg. 1 of Osokin et al. 2016) on the factored storage.

    ``data`` = (positions, block starts, labels, S, F) (`positions`); ``blocks`` = (A, T, li);
    ``grams`` = (G, offsets)
    (`block_grams`); ``sampler``, ``rule`` = (lam, nu_step, check), ``avg`` and ``state`` as in
    `structfw.solvers._fastpass.plain_fw_chunk`.  Returns (steps done, index of an example whose
    oracle did worse than its ground truth or -1)."""
    Xc, starts, Yc, S, F = data[0], data[1], data[2], data[3], data[4]
    A, T, li = blocks
    G, gofs = grams
    lam, nu_step, check = rule
    avg_kind, u = avg
    it, fl = state
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    W_tr = w[S * F:]
    # a multiclass model has no transitions: Viterbi on one position is the argmax, with P = 0
    P = W_tr.reshape(S, S) if W_tr.shape[0] > 0 else np.zeros((S, S))
    for s in range(m):
        i = _draw_block(sampler, s, n)
        gfixed = _fixed_step(nu_step, it[K], n)
        rho, inv_c = _avg_begin(avg_kind, it, fl)
        a0, a1 = starts[i], starts[i + 1]
        x = Xc[a0:a1]
        yt = Yc[a0:a1]
        U = chain_unary_dense(x, w, S, F, yt, False)
        ys, _ = loss_augmented_viterbi(U, P, yt)
        L = hamming_loss(yt, ys)
        D, dT = _direction(A[a0:a1], T[i], yt, ys, inv_ln)
        wd, nrm = _terms(D, dT, U, G[gofs[i]:gofs[i + 1]], W_tr)
        dl = L / n - li[i]
        if check:
            # H_i(y*) = L - <psi, w>, where <w_s, w> = <psi, w> / (lam n) = wd + <w_i, w>
            wiw = 0.0
            for t in range(a1 - a0):
                for c in range(S):
                    wiw += A[a0 + t, c] * U[t, c]
            if W_tr.shape[0] > 0:
                for a in range(S):
                    for b in range(S):
                        wiw += T[i, a, b] * W_tr[a * S + b]
            H = L - (wd + wiw) / inv_ln
            if H < -_H_TOL * max(1.0, abs(H)):
                return s, i
        slope = lam * wd - dl
        gamma = step_along(slope, nrm, lam, 1.0, gfixed)
        if gamma > 0.0:
            _move(w, u, inv_c, x, D, dT, gamma, S, F)
            A[a0:a1] += gamma * D
            T[i] += gamma * dT
        _close_step(i, gamma, dl, slope, li, sampler, avg, rho, state)
    return m, -1
