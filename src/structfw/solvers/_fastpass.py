"""The compiled passes of the block-coordinate engine (dense w_i, a model with a compiled oracle).

When the model offers a compiled corner kernel (`structfw.oracles.compiled`)
a chunk of block iterations -- sampling, oracle, psi, line search, block update,
gap estimate, averaging -- runs in one numba call: Alg. 1 lines 3-11 of Osokin
et al. (2016) with no Python in the loop.  The arithmetic is that of the Python
path (`structfw.solvers._kernels.block_step`), so the iterates agree.
`general_chunk` does the same for every other combination of the engine's
parts (cache, pairwise and away steps) on the flat corner sets of
`structfw.solvers.corners`: Python is entered once per chunk, never per corner.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from ._warmup import compile_leaves_in_background
from .._linalg import sparse_dot_dense
from ..oracles.compiled import chain_csr_hinges_fm, corner, corner_fm, corner_hinge, csr_feature_major
from .corners import NO_LABELS, corner_key, cs_entries, cs_find, cs_put, cs_room, cs_scan
from ._decisions import (AVG_CODES, DROP_INACTIVE, EVICT_OVER, EXPIRE, GAP, MAX_GAP, ORDER, ORDER_GAPS,  # noqa: F401
                         average_close, averaging_rate, away_alpha, away_taken, draw_block, fixed_step, fw_alpha,
                         pairwise_alpha, record_gap, tidy_block)
from ._factored import block_unary, factored_block_step, factored_w_dot, labels_of, unary_oracle
from ._borrow import borrowed
from ._prefetch import prefetch_corner_sets, prefetch_corners, prefetch_truths
from ._kernels import NO_CORNER, _add_to_w, block_step, cache_hit, step_along
from .rows import _dense_axpy, _dense_axpy_avg, _dense_dot_sqnorm, _dense_rescale, row_dot, row_room


_H_TOL = 1e-9
_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)


def hinge_pass(compiled, n, w):
    """H_i(y_i*; w) = L_i(y_i*) - ⟨psi_i(y_i*), w⟩ of every block, in one numba call: the
    measuring mode of `plain_fw_chunk`, called with the argument types of a pass so that
    both share one compiled specialisation.  Sparse chain inputs have a kernel of their own that
    scores from a feature-major copy of w's unary weights (`chain_csr_hinges_fm`; CoNLL-scale gap
    passes 0.23 -> 0.19 s)."""
    H = np.empty(n)
    if n == 0:
        return H
    WT = csr_feature_major(compiled, w)
    if WT is not None:  # sparse chain inputs: the unary scores from a feature-major copy
        chain_csr_hinges_fm(*compiled[1], w, WT, H)
        return H
    compile_leaves_in_background(compiled[0])
    sampler = (ORDER, _EMPTY_I, _EMPTY_V, _EMPTY_V, _EMPTY_V)
    blocks = (np.empty((0, 0)), _EMPTY_V, _EMPTY_V)
    plain_fw_chunk(compiled, int(n), sampler, w, blocks, (1.0, 0.0, False), (0, _EMPTY_V), counters(0, 0.0), _EMPTY_V,
                   H)
    return H


# ===================================================================== shared by the passes
#: the chunks' counters and running sums as the named fields of one record ``c`` (a one-element
#: structured array the passes make with `counters` and read back): the step count k, the average's
#: step count, the call's oracle calls and cache hits, the block a stopped chunk needs room for and
#: how much, l, the lazy average's c and lbar, and the last full gap
COUNTERS = np.dtype([("k", np.int64), ("avg_t", np.int64), ("oracle_calls", np.int64), ("cache_hits", np.int64),
                     ("bad", np.int64), ("need", np.int64), ("ell", np.float64), ("avg_c", np.float64),
                     ("avg_lbar", np.float64), ("full_gap", np.float64)], align=True)


def counters(k, ell, avg=None, full_gap=0.0):
    """The record `COUNTERS` of a chunk call: the state's k and l, the live average's t, c and lbar
    (none: 0, 1, 0) and the last full gap."""
    c = np.zeros(1, COUNTERS)
    c["k"], c["ell"], c["full_gap"] = k, ell, full_gap
    c["avg_t"], c["avg_c"], c["avg_lbar"] = (avg.t, avg.c, avg.lbar) if avg is not None else (0, 1.0, 0.0)
    return c


def read_average(c, avg):
    """The live average's t, c and lbar back from a chunk's record (nothing without an average)."""
    if avg is not None:
        avg.t, avg.c, avg.lbar = int(c["avg_t"][0]), float(c["avg_c"][0]), float(c["avg_lbar"][0])


@njit(cache=True, nogil=True)
def _record_gap(sampler, i, g):
    """`record_gap` on a chunk's sampler tuple (kind, order, draws, estimates, tree)."""
    record_gap(sampler[0], sampler[3], sampler[4], i, g)


@njit(cache=True, nogil=True)
def _avg_begin(avg_kind, c):
    """Advance the average's counter: (rho_t, 1 / c) for the step (0, 0 without averaging)."""
    if avg_kind == 0:
        return 0.0, 0.0
    c[0].avg_t += 1
    return averaging_rate(avg_kind, c[0].avg_t), 1.0 / c[0].avg_c


@njit(cache=True, nogil=True)
def _avg_end(avg_kind, rho, u, c):
    """Close the step in the lazy average: c *= 1 - rho (u renormalised before it underflows)
    and lbar = (1 - rho) lbar + rho l."""
    if avg_kind == 0:
        return
    avg_c, avg_lbar = average_close(rho, u, c[0].avg_c, c[0].avg_lbar, c[0].ell)
    c[0].avg_c = avg_c
    c[0].avg_lbar = avg_lbar


@njit(cache=True, nogil=True, inline="always")
def _begin_step(sampler, s, n, nu_step, avg_kind, c):
    """A plain step's start: (block i, the predefined step or -1, the average's rho and 1/c)."""
    i = draw_block(sampler, s, n)
    gfixed = fixed_step(nu_step, c[0].k, n)
    rho, inv_c = _avg_begin(avg_kind, c)
    return i, gfixed, rho, inv_c


@njit(cache=True, nogil=True, inline="always")
def _below_truth(L, score):
    """The oracle's labelling has H_i = L - ⟨psi, w⟩ below H_i(y_i) = 0 (beyond rounding): not a maximiser."""
    H = L - score
    return H < -_H_TOL * max(1.0, abs(H))


@njit(cache=True, nogil=True)
def _close_step(i, gamma, dl, slope, li, sampler, avg, rho, c):
    """The end of a plain FW step on block i: l_i and l move with gamma, the sampler gets the block
    gap -slope, the step counter and the lazy average (``avg`` = (kind, u)) advance."""
    li[i] += gamma * dl
    c[0].ell += gamma * dl
    _record_gap(sampler, i, -slope)
    c[0].k += 1
    _avg_end(avg[0], rho, avg[1], c)


# ===================================================================== plain
@njit(cache=True, nogil=True)
def fw_block_step(w, vi, ci, s, dl, rule, avg, scratch):
    """FW step of block i toward w_s = psi/(lam n), w_i stored scaled (w_i = ci * vi).

    The step of `structfw.solvers._kernels.block_step` on dense rows with d = w_s - w_i,
    to the bit: gamma = (d_l - lam ⟨w, d⟩) / (lam ||d||^2) clipped to [0, 1] (Alg. 1
    lines 6-7 of Lacoste-Julien et al. 2013); the row is read, only psi's entries of it
    are written.  ``s`` = (idx, val, 1/(lam n), ⟨psi, w⟩) is the corner as unmerged entries
    (||psi||^2 merges repeated indices in ``scratch``, zero on entry and on exit) with its
    score, which the caller computes to check the oracle anyway; ``rule`` = (lam, gfixed),
    ``avg`` = (u, inv_c) the lazy average.
    Returns (gamma, slope = lam ⟨w, d⟩ - d_l, c_i')."""
    idx, val, inv_ln, pw = s
    lam, gfixed = rule
    u, inv_c = avg
    vw, vv = _dense_dot_sqnorm(vi, w)
    wiw = ci * vw
    wiwi = ci * ci * vv
    pv = 0.0
    for t in range(idx.shape[0]):
        j = idx[t]
        pv += val[t] * vi[j]
        scratch[j] += val[t]
    pp = 0.0
    for t in range(idx.shape[0]):
        j = idx[t]
        pp += scratch[j] * scratch[j]
        scratch[j] = 0.0
    slope = lam * (inv_ln * pw - wiw) - dl
    nrm = wiwi + inv_ln * inv_ln * pp - 2.0 * inv_ln * (ci * pv)
    gamma = step_along(slope, nrm, lam, 1.0, gfixed)
    if gamma == 0.0:
        return gamma, slope, ci
    if u.shape[0] > 0:
        _dense_axpy_avg(vi, w, u, -gamma * ci, inv_c)
    else:
        _dense_axpy(vi, w, -gamma * ci)
    c_new = _dense_rescale(vi, (1.0 - gamma) * ci)
    step = gamma * inv_ln
    _add_to_w(w, u, inv_c, idx, val, step)
    cv = step / c_new
    for t in range(idx.shape[0]):  # repeated indices add up
        vi[idx[t]] += cv * val[t]
    return gamma, slope, c_new


@njit(cache=True, nogil=True)
def plain_fw_chunk(oracle, m, sampler, w, blocks, rule, avg, c, scratch, hinges):
    """m block iterations of plain BCFW, or (``hinges`` non-empty) the hinge terms of blocks 0..m-1.

    With ``hinges`` of length m the kernel only measures: hinges[i] = H_i(y_i*; w) =
    L_i(y_i*) - ⟨psi_i(y_i*), w⟩, the hinge terms of the primal (eq. (3) of Osokin et al.
    2016) and of the block gaps (eq. (6)) -- all a gap pass needs when no corner is kept
    (`structfw.solvers.problem.Problem.batch_hinges`); nothing else is read or changed.
    One kernel does both jobs because each compiled caller of the oracle re-links and
    re-optimises it: a separate hinge kernel cost ~1 s of every first run.

    Parameters
    ----------
    oracle : (kind, data)   the model's compiled corner kind and packed training set (oracles.compiled)
    m : int                 block iterations to run
    sampler : tuple         (sampling, order, draws, estimates, tree): ORDER (blocks from ``order``),
                            GAP (p_i ~ estimates, uniforms ``draws``) or MAX_GAP; the estimates and
                            their Fenwick tree are updated in place
    w : float64[d]
    blocks : tuple          (wi, wi_scale, li): w_i = wi_scale[i] * wi[i] ((n, d) and (n,)) and l_i,
                            updated in place (see `fw_block_step`)
    rule : tuple            (lam, nu_step, check): nu_step > 0 takes the predefined step
                            2n/(nu k + 2n) (BCFW paper App. C, Alg. C.2), 0 the line search; with
                            ``check`` stop at an oracle labelling with H_i < 0 = H_i(y_i)
    avg : tuple             (kind, u): the lazy average (0: none; see averaging.py)
    c : COUNTERS[1]         the record of k, l and the average's t, c, lbar (`counters`), updated in place
    scratch : float64[d]    zeros, for merging repeated psi entries
    hinges : float64[m] or empty   measure instead of stepping (see above)

    Returns
    -------
    steps done, and the index of an example whose oracle did worse than its ground truth (-1 if
    none: then the chunk stopped before its step)
    """
    # the caller's arrays outlive the chunk: its helpers use them without reference counts (_borrow)
    oracle, sampler, w, blocks, avg, c, scratch, hinges = borrowed(
        (oracle, sampler, w, blocks, avg, c, scratch, hinges))
    kind_oracle, data = oracle
    if hinges.shape[0] > 0:
        for i in range(m):
            hinges[i] = corner_hinge(kind_oracle, data, i, w)
        return m, -1
    wi, wi_scale, li = blocks
    lam, nu_step, check = rule
    avg_kind, u = avg
    n = wi.shape[0]
    inv_ln = 1.0 / (lam * n)
    for s in range(m):
        i, gfixed, rho, inv_c = _begin_step(sampler, s, n, nu_step, avg_kind, c)
        idx, val, L = corner(kind_oracle, data, i, w, False)
        pw = sparse_dot_dense(idx, val, w)
        if check and _below_truth(L, pw):
            return s, i
        dl = L / n - li[i]
        gamma, slope, wi_scale[i] = fw_block_step(w, wi[i], wi_scale[i], (idx, val, inv_ln, pw), dl,
                                                  (lam, gfixed), (u, inv_c), scratch)
        _close_step(i, gamma, dl, slope, li, sampler, avg, rho, c)
    return m, -1


@njit(cache=True, nogil=True)
def factored_fw_chunk(fac, m, sampler, w, li, rule, avg, c):
    """m plain FW block iterations (Alg. 1 of Osokin et al. 2016) on the factored storage.

    ``fac`` = (True, positions, (A, T), grams, scratch) (`factored_arrays`); ``sampler``, ``rule`` =
    (lam, nu_step, check), ``avg`` and ``c`` as in `structfw.solvers._fastpass.plain_fw_chunk`.
    Returns (steps done, index of an example whose oracle did worse than its ground truth or -1).

    The oracle is the loss-augmented Viterbi on the block's unary scores (`unary_oracle`), and the
    step `factored_block_step` reads the same scores; the direction, the transitions' scatter and the
    Viterbi run in the pass's scratch: a step allocates only the unary scores."""
    fac, sampler, w, li, avg, c = borrowed((fac, sampler, w, li, avg, c))  # as plain_fw_chunk (_borrow)
    lam, nu_step, check = rule
    avg_kind, u = avg
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    starts, Yc = fac[1][1], fac[1][2]
    for s in range(m):
        i, gfixed, rho, inv_c = _begin_step(sampler, s, n, nu_step, avg_kind, c)
        prefetch_truths(starts, Yc, sampler[1], s, m if sampler[0] == ORDER else 0, i)
        U = block_unary(fac, i, w)
        ys, zs, L, ss = unary_oracle(fac, i, U, w)
        if check and _below_truth(L, ss):
            return s, i
        dl = L / n - li[i]
        gamma, slope = factored_block_step(w, fac, i, U, -1.0, (ys, zs, inv_ln, ss), NO_CORNER, dl,
                                           (lam, 1.0, gfixed), (u, inv_c))
        _close_step(i, gamma, dl, slope, li, sampler, avg, rho, c)
    return m, -1


# ===================================================================== general
#: block steps understood by the general kernel
FW_STEP, PAIRWISE_STEP, AWAY_STEP = 0, 1, 2
# inlined (it writes nothing): a call passed the corner store's ~80 array fields every step
@njit(cache=True, nogil=True, inline="always")
def _cached_corner(S, i, scan, base, n, cache_rule, approx, full_gap):
    """The corner set's answer for block i: (slot, g_i, ⟨psi_s, w⟩) of its best corner when
    it is taken -- always in an approximate pass (MP-BCFW, eq. (6) of Shah et al.), with the
    cache when its gap estimate reaches max(F g_i^oracle, nu/n g) (Osokin et al. Sec. 3.3)
    -- or slot -1 when the oracle must be called."""
    cache, F, nu, oracle_gaps = cache_rule
    best, Hb, sb = scan[0], scan[1], scan[2]
    if approx:
        return best, base + Hb / n, sb
    size = S[0]
    if cache and size[i] > 0:
        ghat = base + Hb / n
        if cache_hit(ghat, oracle_gaps[i], full_gap, F, nu, n):
            return best, ghat, sb
    return -1, 0.0, 0.0


@njit(cache=True, nogil=True, inline="always")
def _prefetch_step(S, fac, sampler, s, m, i):
    """The prefetches before step s (m = 0 when the blocks are drawn step by step): the corner sets'
    (`prefetch_corner_sets`) and on the factored storage the ground-truth labels (`prefetch_truths`)."""
    prefetch_corner_sets(S, sampler[1], s, m, i)
    if fac[0]:
        prefetch_truths(fac[1][1], fac[1][2], sampler[1], s, m, i)


@njit(cache=True, nogil=True, inline="always")
def _block_of_step(S, fac, sampler, s, m, n, ahead):
    """Block of step s of a chunk ending at m: the one drawn ahead (`_draw_ahead`, >= 0), else drawn now,
    with the prefetches for it and, when the order is known, for the next steps."""
    if ahead >= 0:
        return ahead
    i = draw_block(sampler, s, n)
    _prefetch_step(S, fac, sampler, s, m if sampler[0] == ORDER else 0, i)
    return i


@njit(cache=True, nogil=True, inline="always")
def _draw_ahead(S, fac, sampler, s, m, n):
    """Block of step s < m drawn now, when the blocks are drawn step by step (gap sampling, the largest
    gap), with its prefetches asked for; else -1.  The general chunk calls it once the sampler has
    block i's new gap and before i's block step, which reads and writes neither the sampler nor the
    next block's rows: the draw is the one step s would make, and its loads arrive during the step."""
    if sampler[0] == ORDER or s >= m:
        return -1
    return _block_of_step(S, fac, sampler, s, m, n, -1)


@njit(cache=True, nogil=True, inline="always")
def _move_block(w, B, fac, i, U, a, s1, s2, dl, rule, avg, scratch):
    """The block step along d = a w_i + b1 s1 + b2 s2 on the pass's storage: the factored w_i
    (``fac[0]``, `structfw.solvers._factored.factored_block_step`, corners as labellings), or rows
    (`block_step`; B = (scales,) when the pass does not keep them).  Returns gamma."""
    if fac[0]:
        return factored_block_step(w, fac, i, U, a, s1, s2, dl, rule, avg)[0]
    return block_step(w, B, i, a, s1, s2, dl, rule, avg, scratch)[0]


@njit(cache=True, nogil=True, inline="always")
def _set_step(w, storage, S, i, step_kind, slot, a, corner_s, losses, rule, avg, scratch):
    """FW, pairwise or away step of block i on its corner set (Osokin et al. Alg. 2): moves w_i,
    w and the corner weights (when they are tracked).  ``storage`` = (B, fac) (`_move_block`);
    ``corner_s`` = (idx, val, ⟨psi, w⟩, L) of the FW corner (slot ``slot``); ``a`` the away
    corner's slot and ``losses`` = (⟨psi_a, w⟩, l_i, n, U) with U the block's unary scores on the
    factored storage; ``rule`` = (lam, gfixed, inv_ln, track_alpha, keep_rows).  Returns (gamma, d_l)."""
    B, fac = storage
    ps_i, ps_v, ss, L_s = corner_s
    sa, li_i, n, U = losses
    lam, gfixed, inv_ln, track_alpha, keep_rows = rule
    alpha = S[3]
    if step_kind == FW_STEP:
        dl = L_s / n - li_i
        gamma = _move_block(w, B, fac, i, U, -1.0, (ps_i, ps_v, inv_ln, ss), NO_CORNER, dl, (lam, 1.0, gfixed), avg,
                            scratch)
        if track_alpha:
            fw_alpha(S, i, slot, gamma)
        return gamma, dl
    pa_i, pa_v = cs_entries(S, i, a)
    L_a = S[2][i, a]
    if step_kind == PAIRWISE_STEP:
        dl = (L_s - L_a) / n
        s1, s2, r = (ps_i, ps_v, inv_ln, ss), (pa_i, pa_v, -inv_ln, sa), (lam, alpha[i, a], gfixed)
        if keep_rows:
            gamma = _move_block(w, B, fac, i, U, 0.0, s1, s2, dl, r, avg, scratch)
        else:  # the rows are not kept: only the scales are passed
            gamma = _move_block(w, (B[0],), fac, i, U, 0.0, s1, s2, dl, r, avg, scratch)
        pairwise_alpha(S, i, a, slot, gamma)
        return gamma, dl
    dl = li_i - L_a / n
    gmax = alpha[i, a] / (1.0 - alpha[i, a])
    gamma = _move_block(w, B, fac, i, U, 1.0, (pa_i, pa_v, -inv_ln, sa), NO_CORNER, dl, (lam, gmax, gfixed), avg,
                        scratch)
    away_alpha(S, i, a, gamma)
    return gamma, dl


@njit(cache=True, nogil=True, inline="always")
def _block_scan(S, B, fac, i, w, wants, inv_ln, lam, li_i):
    """One sweep over block i's corners, each scored once (~200 entries gathered from w, or on
    the factored storage O(L_i) from the block's unary scores U): the best corner (approximate
    pass, cache) and the away corner, as `corners.cs_scan`; and lam ⟨w_i, w⟩ - l_i, the block
    gap's part from w_i, which the cache rule, the gap sampler and the away test read -- with
    tracked weights the weighted score of the active corners from the same sweep, else the
    dot over the block's row or label weights.  ``wants`` = (best, away, gap, track_alpha).
    Returns (scan, ⟨w_i, w⟩, that part, U) (U empty on rows)."""
    want_best, want_away, want_gap, track_alpha = wants
    scan = (-1, 0.0, 0.0, -1, 0.0, 0.0)
    U = np.empty((0, 0))
    labels = NO_LABELS
    if fac[0]:
        U = block_unary(fac, i, w)
        if want_best or want_away:
            labels = labels_of(fac, i, U, w)
    if want_best or want_away:
        prefetch_corners(S, i)
        scan = cs_scan(S, i, w, want_best, want_away, labels)
    wiw = 0.0
    if want_gap:
        if track_alpha:
            wiw = scan[4] * inv_ln
        elif fac[0]:
            wiw = factored_w_dot(fac, i, U, w)
        else:
            wiw = B[0][i] * row_dot(B, i, w)
    return scan, wiw, lam * wiw - li_i, U


@njit(cache=True, nogil=True, inline="always")
def _room_status(S, B, i, new_corner, n_s, a, keep_rows, c):
    """1 when the pool needs room for a new corner of n_s entries, 3 when block i's sparse row
    needs room for the step's corners (it grows by their entries), else 0; the record's ``bad``
    and ``need`` say where and how much."""
    if new_corner and cs_room(S, i, n_s) != 0:
        c[0].bad = i
        c[0].need = n_s
        return 1
    if keep_rows:
        extra = n_s + (cs_entries(S, i, a)[0].shape[0] if a >= 0 else 0)
        if row_room(B, i, extra) != 0:
            c[0].bad = i
            c[0].need = extra
            return 3
    return 0


@njit(cache=True, nogil=True, inline="always")
def _record_corner(S, i, slot, hit, corner_s, mark, flags, g_i, oracle_gaps, c):
    """Count the step's corner (a cache hit, or an oracle call whose gap g_i the cache rule
    keeps) and stamp it in block i's set, adding an oracle corner ``corner_s`` = (key, idx,
    val, L) when corners are kept.  ``flags`` = (approx, needs_gap, keeps).  Returns its slot."""
    approx, needs_gap, keeps = flags
    if hit:
        c[0].cache_hits += 0 if approx else 1
        S[4][i, slot] = mark
        return slot
    c[0].oracle_calls += 1
    if needs_gap:
        oracle_gaps[i] = g_i
    if keeps:
        h_s, ps_i, ps_v, L_s = corner_s
        return cs_put(S, i, h_s, slot, ps_i, ps_v, L_s, 0.0, mark)
    return slot


@njit(cache=True, nogil=True, inline="always")
def _oracle_corner(oracle, fac, i, U, w, WT):
    """The max oracle's corner of block i, (entries, values, L_i(y*), ⟨psi_i(y*), w⟩): its labelling from
    the unary scores U on the factored storage, else the compiled model's merged psi (scored from the
    feature-major copy WT of the unary weights when the pass keeps one)."""
    if fac[0]:
        return unary_oracle(fac, i, U, w)
    idx, val, L = corner_fm(oracle[0], oracle[1], i, w, WT)
    return idx, val, L, sparse_dot_dense(idx, val, w)


@njit(cache=True, nogil=True)
def general_chunk(oracle, S, span, sampler, w, blocks, rule, cache_rule, set_rule, avg, c, fac):
    """Block iterations s0..m-1 of the engine with corner sets (cache, pairwise, away, MP-BCFW) in numba.

    The iteration of the Python parts (`structfw.solvers.parts`): corner source (`_cached_corner`,
    else the compiled oracle, its corner added to the block's set), block step (`_set_step`), tidy
    (`tidy_block`), sampler (not in approximate passes), average.  Corners used or added are stamped with
    ``stamp`` (the block step k when stamp < 0).  Arrays are `borrowed` views; rows are prefetched.

    ``oracle`` = (kind, data); ``S`` the corner sets (`corners`); ``span`` = (s0, m); ``sampler`` as in
    `plain_fw_chunk`; ``blocks`` = (B, li, WT) (WT: `passes.unary_mirror`); ``rule`` = (lam, step_kind,
    nu_step, check); ``cache_rule`` = (cache, F, nu, oracle_gaps); ``set_rule`` = (track_alpha, approx,
    stamp, tidy_kind, limit, keep_rows): without ``keep_rows`` (pairwise steps with tracked weights never
    read w_i) the rows are not written and the caller marks them stale; ``avg`` = (kind, u); ``c`` the
    record of counters and running sums (`COUNTERS`); ``fac`` the factored storage
    (`structfw.solvers._factored.factored_arrays`, corners stored as labellings and the oracle run on the
    unary scores the scan computed) or, first field False, none (`no_factored`: rows, compiled corners).

    Returns (s, status): 0 when the chunk is done; 1 (the pool) or 3 (a sparse row) when block ``c.bad``
    needs room before step s (nothing of step s was done: grow and call again from s); 2 when the oracle
    did worse than the ground truth on example ``c.bad``."""
    oracle, S, sampler, w, blocks, cache_rule, avg, c, fac = borrowed(
        (oracle, S, sampler, w, blocks, cache_rule, avg, c, fac))
    B, li, WT = blocks
    lam, step_kind, nu_step, check = rule
    oracle_gaps = cache_rule[3]
    track_alpha, approx, stamp, tidy_kind, limit, keep_rows = set_rule
    avg_kind, u = avg
    n, ahead = li.shape[0], -1  # ahead: the next step's block when drawn ahead (`_draw_ahead`)
    inv_ln = 1.0 / (lam * n)
    keeps = cache_rule[0] or track_alpha or tidy_kind != DROP_INACTIVE
    needs_gap = cache_rule[0] or sampler[0] != ORDER or step_kind == AWAY_STEP
    scratch = np.zeros(w.shape[0]) if step_kind == PAIRWISE_STEP else np.empty(0)
    for s in range(span[0], span[1]):
        i, ahead = _block_of_step(S, fac, sampler, s, span[1], n, ahead), -1
        k = c[0].k
        wants = (approx or (cache_rule[0] and S[0][i] > 0), step_kind != FW_STEP or (track_alpha and needs_gap),
                 needs_gap, track_alpha)
        scan, wiw, base, U = _block_scan(S, B, fac, i, w, wants, inv_ln, lam, li[i])
        a, sa = scan[3], scan[5]
        # ---- corner source (nothing is changed until the room checks have passed)
        slot, g_i, ss = _cached_corner(S, i, scan, base, n, cache_rule, approx, c[0].full_gap)
        hit = slot >= 0
        h_s = np.uint64(0)
        if hit:
            ps_i, ps_v = cs_entries(S, i, slot)
            L_s = S[2][i, slot]
        else:
            ps_i, ps_v, L_s, ss = _oracle_corner(oracle, fac, i, U, w, WT)
            if check and _below_truth(L_s, ss):
                c[0].bad = i
                return s, 2
            if keeps:
                h_s = corner_key(ps_i, ps_v, L_s)
                slot = cs_find(S, i, h_s, ps_i, ps_v, L_s)
            g_i = base + (L_s - ss) / n
        status = _room_status(S, B, i, not hit and keeps and slot < 0, ps_i.shape[0], a, keep_rows, c)
        if status != 0:
            return s, status
        # ---- from here on the step changes the state
        slot = _record_corner(S, i, slot, hit, (h_s, ps_i, ps_v, L_s), k if stamp < 0 else stamp,
                              (approx, needs_gap, keeps), g_i, oracle_gaps, c)
        gfixed = fixed_step(nu_step, k, n)
        rho, inv_c = _avg_begin(avg_kind, c)
        kind = step_kind
        if kind == AWAY_STEP:  # the away step only when its gap beats the FW gap (Alg. 2 of Osokin et al.)
            g_away = lam * (sa * inv_ln - wiw) + li[i] - S[2][i, a] / n
            if not away_taken(g_i, g_away, S[3][i, a]):
                kind = FW_STEP
        if not approx:
            _record_gap(sampler, i, g_i)
            ahead = _draw_ahead(S, fac, sampler, s + 1, span[1], n)
        gamma, dl = _set_step(w, (B, fac), S, i, kind, slot, a, (ps_i, ps_v, ss, L_s), (sa, li[i], n, U),
                              (lam, gfixed, inv_ln, track_alpha, keep_rows), (u, inv_c, WT), scratch)
        li[i] += gamma * dl
        c[0].ell += gamma * dl
        tidy_block(S, i, tidy_kind, limit, keeps)
        c[0].k = k + 1
        _avg_end(avg_kind, rho, u, c)
    return span[1], 0
