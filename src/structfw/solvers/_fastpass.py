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

from .._compile import compile_leaves_in_background
from .._linalg import sparse_dot_dense
from ..oracles.compiled import corner
from .corners import (ALPHA_EPS, corner_key, cs_clip, cs_drop_inactive, cs_entries, cs_evict, cs_expire, cs_find,
                      cs_put, cs_room, cs_scan)
from ._kernels import (_add_to_w, block_step, fenwick_add, fenwick_find, fenwick_total, first_argmax,
                       step_along)
from .rows import _dense_axpy, _dense_axpy_avg, _dense_dot_sqnorm, _dense_rescale, row_dot, row_room

#: sampler kinds understood by the kernel
ORDER, GAP, MAX_GAP = 0, 1, 2
#: averaging kinds understood by the kernel (0: none)
AVG_CODES = {None: 0, "weighted": 1, "uniform": 2, "suffix": 3}

_H_TOL = 1e-9
_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)


def hinge_pass(compiled, n, w):
    """H_i(y_i*; w) = L_i(y_i*) - <psi_i(y_i*), w> of every block, in one numba call: the
    measuring mode of `plain_fw_chunk`, called with the argument types of a pass so that
    both share one compiled specialisation."""
    kind, data = compiled
    H = np.empty(n)
    if n == 0:
        return H
    compile_leaves_in_background(kind)
    none_2d = np.empty((0, 0))
    plain_fw_chunk(kind, data, int(n), ORDER, _EMPTY_I, _EMPTY_V, _EMPTY_V, _EMPTY_V, w, none_2d, _EMPTY_V,
                   _EMPTY_V, 0.0, 1.0, 0, 0.0, 0, _EMPTY_V, 0, 1.0, 0.0, False, _EMPTY_V, H)
    return H


@njit(cache=True, nogil=True, inline="always")
def _avg_rate(kind, t):
    """rho_t of `structfw.solvers.averaging.averaging_rate`."""
    if kind == 1:
        return 2.0 / (t + 1.0)
    if kind == 2:
        return 1.0 / t
    start = 1
    while start * 2 <= t:
        start *= 2
    return 1.0 / (t - start + 1.0)


@njit(cache=True, nogil=True)
def fw_block_step(w, vi, ci, idx, val, pw, inv_ln, dl, lam, gfixed, u, inv_c, scratch):
    """FW step of block i toward w_s = psi/(lam n), w_i stored scaled (w_i = ci * vi).

    The step of `structfw.solvers._kernels.block_step` on dense rows with d = w_s - w_i,
    to the bit: gamma = (d_l - lam <w, d>) / (lam ||d||^2) clipped to [0, 1] (Alg. 1
    lines 6-7 of Lacoste-Julien et al. 2013); the row is read, only psi's entries of it
    are written.  psi is given as unmerged entries: ||psi||^2 merges repeated indices in
    ``scratch`` (zero on entry and on exit).  ``pw`` = <psi, w>, which the caller computes
    (`structfw._linalg.sparse_dot_dense`) to check the oracle anyway.
    Returns (gamma, slope = lam <w, d> - d_l, c_i')."""
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
def plain_fw_chunk(kind_oracle, data, m, sampling, order, draws, estimates, tree, w, wi, wi_scale, li, ell, lam, k,
                   nu_step, avg_kind, u, avg_t, avg_c, avg_lbar, check, scratch, hinges):
    """m block iterations of plain BCFW, or (``hinges`` non-empty) the hinge terms of blocks 0..m-1.

    With ``hinges`` of length m the kernel only measures: hinges[i] = H_i(y_i*; w) =
    L_i(y_i*) - <psi_i(y_i*), w>, the hinge terms of the primal (eq. (3) of Osokin et al.
    2016) and of the block gaps (eq. (6)) -- all a gap pass needs when no corner is kept
    (`structfw.solvers.problem.Problem.batch_hinges`); nothing else is read or changed.
    One kernel does both jobs because each compiled caller of the oracle re-links and
    re-optimises it: a separate hinge kernel cost ~1 s of every first run.

    Parameters
    ----------
    kind_oracle, data : the model's compiled corner kind and its packed training set (oracles.compiled)
    m : int                 block iterations to run
    sampling : int          ORDER (blocks from ``order``), GAP (p_i ~ estimates, uniforms ``draws``)
                            or MAX_GAP (the largest estimate)
    estimates, tree : block-gap estimates and their Fenwick tree (updated in place)
    w, wi, wi_scale, li : w, the block parts w_i = wi_scale[i] * wi[i] ((n, d) and (n,)) and l_i
                            (updated in place; see `fw_block_step`)
    ell, lam, k : l, lambda and the block-step counter
    nu_step : float         > 0: the predefined step 2n/(nu k + 2n) of oracle quality nu (BCFW paper
                            App. C, Alg. C.2; nu = 1: Alg. 3's 2n/(k+2n)); 0: the line search
    avg_kind, u, avg_t, avg_c, avg_lbar : the lazy average (see averaging.py)
    check : bool            stop at an oracle labelling with H_i < 0 = H_i(y_i) (not a maximiser)
    scratch : float64[d]    zeros, for merging repeated psi entries
    hinges : float64[m] or empty   measure instead of stepping (see above)

    Returns
    -------
    ell, k, avg_t, avg_c, avg_lbar, steps done, index of an example whose oracle did
    worse than its ground truth (-1 if none: then the chunk stopped before its step)
    """
    if hinges.shape[0] > 0:
        for i in range(m):
            idx, val, L = corner(kind_oracle, data, i, w, False)
            hinges[i] = L - sparse_dot_dense(idx, val, w)
        return ell, k, avg_t, avg_c, avg_lbar, m, -1
    n = wi.shape[0]
    inv_ln = 1.0 / (lam * n)
    for s in range(m):
        if sampling == ORDER:
            i = order[s]
        elif sampling == GAP:
            total = fenwick_total(tree)
            if total <= 0.0:
                i = min(int(draws[s] * n), n - 1)
            else:
                i = fenwick_find(tree, draws[s] * total)
        else:
            i = first_argmax(estimates)
        gfixed = 2.0 * n / (nu_step * k + 2.0 * n) if nu_step > 0.0 else -1.0
        rho = 0.0
        inv_c = 0.0
        if avg_kind != 0:
            avg_t += 1
            rho = _avg_rate(avg_kind, avg_t)
            inv_c = 1.0 / avg_c
        idx, val, L = corner(kind_oracle, data, i, w, False)
        pw = sparse_dot_dense(idx, val, w)
        if check:
            H = L - pw
            if H < -_H_TOL * max(1.0, abs(H)):
                return ell, k, avg_t, avg_c, avg_lbar, s, i
        dl = L / n - li[i]
        gamma, slope, wi_scale[i] = fw_block_step(w, wi[i], wi_scale[i], idx, val, pw, inv_ln, dl, lam, gfixed,
                                                  u, inv_c, scratch)
        li[i] += gamma * dl
        ell += gamma * dl
        if sampling != ORDER:
            g = -slope if -slope > 0.0 else 0.0
            if sampling == GAP:
                fenwick_add(tree, i, g - estimates[i])
            estimates[i] = g
        k += 1
        if avg_kind != 0:
            if rho >= 1.0:
                u[:] = 0.0
                avg_c = 1.0
            else:
                avg_c *= 1.0 - rho
                if avg_c < 1e-150:
                    u *= avg_c
                    avg_c = 1.0
            avg_lbar = (1.0 - rho) * avg_lbar + rho * ell
    return ell, k, avg_t, avg_c, avg_lbar, m, -1


# ===================================================================== general
#: block steps understood by the general kernel
FW_STEP, PAIRWISE_STEP, AWAY_STEP = 0, 1, 2
#: slots of the integer and float state arrays of `general_chunk`
K, AVG_T, ORACLE_CALLS, CACHE_HITS, BAD, NEED = 0, 1, 2, 3, 4, 5
ELL, AVG_C, AVG_LBAR, FULL_GAP = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _avg_end(avg_kind, rho, u, fl):
    if avg_kind == 0:
        return
    if rho >= 1.0:
        u[:] = 0.0
        fl[AVG_C] = 1.0
    else:
        fl[AVG_C] *= 1.0 - rho
        if fl[AVG_C] < 1e-150:
            u *= fl[AVG_C]
            fl[AVG_C] = 1.0
    fl[AVG_LBAR] = (1.0 - rho) * fl[AVG_LBAR] + rho * fl[ELL]


@njit(cache=True, nogil=True)
def _scale_alpha(S, i, c):
    alpha = S[3]
    for k in range(S[0][i]):
        alpha[i, k] *= c


#: what a block step does to its corner set afterwards
DROP_INACTIVE, EVICT_OVER, EXPIRE = 0, 1, 2


@njit(cache=True, nogil=True)
def general_chunk(kind_oracle, data, S, s0, m, sampling, order, draws, estimates, tree, w, B, li, lam,
                  step_kind, cache, F, nu, track_alpha, nu_step, avg_kind, check,
                  oracle_gaps, u, it, fl, approx, stamp, tidy_kind, limit, keep_rows):
    """Block iterations s0..m-1 of the engine with corner sets (cache, pairwise, away, MP-BCFW) in numba.

    The same iteration as the Python parts (`structfw.solvers.parts`): corner source
    (the cache corner when its gap estimate reaches max(F g_i, nu/n g), else the compiled
    oracle, its corner added to the block's set; with ``approx`` the best corner of the
    set, no oracle: MP-BCFW's approximate pass, eq. (6) of Shah et al.), block step (FW,
    pairwise or away with the line search or 2n/(k+2n)), tidy (``tidy_kind``: drop the
    inactive; evict the longest-unused over ``limit`` corners; or expire corners last used
    before ``limit``), sampler (not in approximate passes) and average updates.  Corners
    used or added are stamped with ``stamp`` (the block step k when stamp < 0).
    ``it`` and ``fl`` hold the integer and float state (slots K.., ELL..).  Without
    ``keep_rows`` (pairwise steps with tracked weights, which never read w_i) the rows of
    ``wi`` are not written: the caller marks them stale.

    Returns (s, status): status 0 when the chunk is done; 1 when block ``it[BAD]`` or the
    pool needs room before step s (nothing of step s was done: grow and call again from
    s); 2 when the oracle did worse than the ground truth on example ``it[BAD]``.
    """
    n = li.shape[0]
    inv_ln = 1.0 / (lam * n)
    keeps = cache or track_alpha or tidy_kind != DROP_INACTIVE
    size, key, loss, alpha, last, start, nnz, pidx, pval, meta = S
    needs_gap = cache or sampling != ORDER or step_kind == AWAY_STEP
    scratch = np.zeros(w.shape[0]) if step_kind == PAIRWISE_STEP else np.empty(0)
    for s in range(s0, m):
        if sampling == ORDER:
            i = order[s]
        elif sampling == GAP:
            total = fenwick_total(tree)
            i = min(int(draws[s] * n), n - 1) if total <= 0.0 else fenwick_find(tree, draws[s] * total)
        else:
            i = first_argmax(estimates)
        k = it[K]
        mark = k if stamp < 0 else stamp
        # the best corner of the set (approximate pass, cache) and the away corner (pairwise,
        # away) come from one sweep, each corner scored once (it gathers ~200 entries from w).
        # lam <w_i, w> - l_i, the block gap's part from w_i, is read only by the cache rule, the
        # gap sampler and the away test: the dense dot streams the block's row from memory; with
        # tracked weights it is the weighted score of the active corners, from the same sweep
        # (the corner added below has no weight, so it changes neither)
        wants_best = approx or (cache and size[i] > 0)
        wants_away = step_kind != FW_STEP or (track_alpha and needs_gap)
        best, Hb, sb, a, score, sa = -1, 0.0, 0.0, -1, 0.0, 0.0
        if wants_best or wants_away:
            best, Hb, sb, a, score, sa = cs_scan(S, i, w, wants_best, wants_away)
        wiw = 0.0
        if needs_gap:
            wiw = score * inv_ln if track_alpha else B[0][i] * row_dot(B, i, w)
        base = lam * wiw - li[i]
        # ---- corner source (nothing is changed until the room check has passed)
        slot = -1
        hit = False
        g_i = 0.0
        ss = 0.0  # <psi_s, w> of the corner s moved toward
        if approx:
            slot, H, ss = best, Hb, sb
            hit = True
            g_i = base + H / n
        elif cache and size[i] > 0:
            c, H, sc = best, Hb, sb
            ghat = base + H / n
            if ghat >= max(F * oracle_gaps[i], nu / n * fl[FULL_GAP]):
                hit = True
                slot = c
                ss = sc
                g_i = ghat
        if hit:
            ps_i, ps_v = cs_entries(S, i, slot)
            L_s = loss[i, slot]
        else:
            ps_i, ps_v, L_s = corner(kind_oracle, data, i, w, True)
            ss = sparse_dot_dense(ps_i, ps_v, w)
            H = L_s - ss
            if check and H < -_H_TOL * max(1.0, abs(H)):
                it[BAD] = i
                return s, 2
            if keeps:
                h_s = corner_key(ps_i, ps_v, L_s)
                slot = cs_find(S, i, h_s, ps_i, ps_v, L_s)
                if slot < 0 and cs_room(S, i, ps_i.shape[0]) != 0:
                    it[BAD] = i
                    it[NEED] = ps_i.shape[0]
                    return s, 1
            g_i = base + H / n
        # sparse rows grow by the corners' entries (a step with kept rows): room first
        if keep_rows:
            extra = ps_i.shape[0] + (cs_entries(S, i, a)[0].shape[0] if a >= 0 else 0)
            if row_room(B, i, extra) != 0:
                it[BAD] = i
                it[NEED] = extra
                return s, 3
        # ---- from here on the step changes the state
        if hit:
            if not approx:
                it[CACHE_HITS] += 1
            last[i, slot] = mark
        else:
            it[ORACLE_CALLS] += 1
            if needs_gap:
                oracle_gaps[i] = g_i
            if keeps:
                slot = cs_put(S, i, h_s, slot, ps_i, ps_v, L_s, 0.0, mark)
        gfixed = 2.0 * n / (nu_step * k + 2.0 * n) if nu_step > 0.0 else -1.0
        rho = 0.0
        inv_c = 0.0
        if avg_kind != 0:
            it[AVG_T] += 1
            rho = _avg_rate(avg_kind, it[AVG_T])
            inv_c = 1.0 / fl[AVG_C]
        kind = step_kind
        if kind != FW_STEP:
            if kind == AWAY_STEP:
                g_away = lam * (sa * inv_ln - wiw) + li[i] - loss[i, a] / n
                if g_i >= g_away or alpha[i, a] >= 1.0 - ALPHA_EPS:
                    kind = FW_STEP
        if kind == FW_STEP:
            dl = L_s / n - li[i]
            gamma, slope = block_step(w, B, i, -1.0, ps_i, ps_v, inv_ln, ss, _EMPTY_I, _EMPTY_V, 0.0, 0.0, dl,
                                      lam, 1.0, gfixed, u, inv_c, scratch)
            if track_alpha and gamma > 0.0:
                _scale_alpha(S, i, 1.0 - gamma)
                alpha[i, slot] += gamma
                cs_clip(S, i)
        elif kind == PAIRWISE_STEP:
            pa_i, pa_v = cs_entries(S, i, a)
            dl = (L_s - loss[i, a]) / n
            if keep_rows:
                gamma, slope = block_step(w, B, i, 0.0, ps_i, ps_v, inv_ln, ss, pa_i, pa_v, -inv_ln, sa, dl, lam,
                                          alpha[i, a], gfixed, u, inv_c, scratch)
            else:  # the rows are not kept: only the scales are passed
                gamma, slope = block_step(w, (B[0],), i, 0.0, ps_i, ps_v, inv_ln, ss, pa_i, pa_v, -inv_ln, sa, dl,
                                          lam, alpha[i, a], gfixed, u, inv_c, scratch)
            if gamma > 0.0:
                alpha[i, a] -= gamma
                alpha[i, slot] += gamma
                cs_clip(S, i)
        else:
            pa_i, pa_v = cs_entries(S, i, a)
            dl = li[i] - loss[i, a] / n
            gamma, slope = block_step(w, B, i, 1.0, pa_i, pa_v, -inv_ln, sa, _EMPTY_I, _EMPTY_V, 0.0, 0.0, dl, lam,
                                      alpha[i, a] / (1.0 - alpha[i, a]), gfixed, u, inv_c, scratch)
            if gamma > 0.0:
                _scale_alpha(S, i, 1.0 + gamma)
                alpha[i, a] -= gamma
                cs_clip(S, i)
        li[i] += gamma * dl
        fl[ELL] += gamma * dl
        # ---- tidy the block's set, sampler, counters, average
        if tidy_kind == EVICT_OVER:
            if size[i] > limit:
                cs_evict(S, i, limit)
        elif tidy_kind == EXPIRE:
            cs_expire(S, i, limit)
        elif keeps:
            cs_drop_inactive(S, i)
        if sampling != ORDER and not approx:
            g = g_i if g_i > 0.0 else 0.0
            if sampling == GAP:
                fenwick_add(tree, i, g - estimates[i])
            estimates[i] = g
        it[K] = k + 1
        _avg_end(avg_kind, rho, u, fl)
    return m, 0
