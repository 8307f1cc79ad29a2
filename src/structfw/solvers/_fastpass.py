"""The compiled pass of the block-coordinate engine: (FW step, exact oracle, dense w_i).

When the model offers a compiled corner kernel (:mod:`structfw.oracles.compiled`)
a chunk of block iterations -- sampling, oracle, psi, line search, block update,
gap estimate, averaging -- runs in one numba call: Alg. 1 lines 3-11 of Osokin
et al. (2016) with no Python in the loop.  The arithmetic is that of the Python
path (:func:`structfw.solvers._kernels.dense_block_step`), so the iterates agree.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .._linalg import sparse_dot_dense
from ._kernels import (_dot_and_sqnorm, _scale_into, _scale_into_avg, add_scaled_entries, fenwick_add,
                       fenwick_find, fenwick_total, step_along)

#: sampler kinds understood by the kernel
ORDER, GAP, MAX_GAP = 0, 1, 2
#: averaging kinds understood by the kernel (0: none)
AVG_CODES = {None: 0, "weighted": 1, "uniform": 2, "suffix": 3}

_H_TOL = 1e-9
_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)


@njit(cache=True, nogil=True)
def _avg_rate(kind, t):
    """rho_t of :func:`structfw.solvers.averaging.averaging_rate`."""
    if kind == 1:
        return 2.0 / (t + 1.0)
    if kind == 2:
        return 1.0 / t
    start = 1
    while start * 2 <= t:
        start *= 2
    return 1.0 / (t - start + 1.0)


@njit(cache=True, nogil=True)
def fw_block_step(w, wi, idx, val, inv_ln, dl, lam, gfixed, u, inv_c, scratch):
    """FW step of block i toward w_s = psi/(lam n) with psi given as unmerged entries.

    The same step as :func:`structfw.solvers._kernels.dense_block_step` with
    d = w_s - w_i: gamma = (d_l - lam <w, d>) / (lam ||d||^2) clipped to [0, 1].
    ||psi||^2 merges repeated indices in ``scratch`` (zero on entry and on exit).
    Returns (gamma, slope = lam <w, d> - d_l)."""
    wiw, wiwi = _dot_and_sqnorm(wi, w)
    pw = 0.0
    pwi = 0.0
    for t in range(idx.shape[0]):
        j = idx[t]
        pw += val[t] * w[j]
        pwi += val[t] * wi[j]
        scratch[j] += val[t]
    pp = 0.0
    for t in range(idx.shape[0]):
        j = idx[t]
        pp += scratch[j] * scratch[j]
        scratch[j] = 0.0
    slope = lam * (inv_ln * pw - wiw) - dl
    nrm = wiwi + inv_ln * inv_ln * pp - 2.0 * inv_ln * pwi
    gamma = step_along(slope, nrm, lam, 1.0, gfixed)
    if gamma == 0.0:
        return gamma, slope
    has_u = u.shape[0] > 0
    c = -gamma
    if has_u:
        _scale_into_avg(wi, w, u, c, inv_c)
    else:
        _scale_into(wi, w, c)
    add_scaled_entries(w, wi, u, inv_c, idx, val, gamma * inv_ln)
    return gamma, slope


@njit(cache=True, nogil=True)
def plain_fw_chunk(corner, data, m, sampling, order, draws, estimates, tree, w, wi, li, ell, lam, k,
                   predefined, avg_kind, u, avg_t, avg_c, avg_lbar, check, scratch):
    """m block iterations of plain BCFW.

    Parameters
    ----------
    corner, data : the model's compiled corner kernel and its packed training set
    m : int                 block iterations to run
    sampling : int          ORDER (blocks from ``order``), GAP (p_i ~ estimates, uniforms ``draws``)
                            or MAX_GAP (the largest estimate)
    estimates, tree : block-gap estimates and their Fenwick tree (updated in place)
    w, wi, li : w, the (n, d) block parts and l_i (updated in place)
    ell, lam, k : l, lambda and the block-step counter
    predefined : bool       step 2n/(k+2n) instead of line search
    avg_kind, u, avg_t, avg_c, avg_lbar : the lazy average (see averaging.py)
    check : bool            stop at an oracle labelling with H_i < 0 = H_i(y_i) (not a maximiser)
    scratch : float64[d]    zeros, for merging repeated psi entries

    Returns
    -------
    ell, k, avg_t, avg_c, avg_lbar, steps done, index of an example whose oracle did
    worse than its ground truth (-1 if none: then the chunk stopped before its step)
    """
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
            i = int(np.argmax(estimates))
        gfixed = 2.0 * n / (k + 2.0 * n) if predefined else -1.0
        rho = 0.0
        inv_c = 0.0
        if avg_kind != 0:
            avg_t += 1
            rho = _avg_rate(avg_kind, avg_t)
            inv_c = 1.0 / avg_c
        idx, val, L = corner(data, i, w)
        if check:
            H = L - sparse_dot_dense(idx, val, w)
            if H < -_H_TOL * max(1.0, abs(H)):
                return ell, k, avg_t, avg_c, avg_lbar, s, i
        dl = L / n - li[i]
        gamma, slope = fw_block_step(w, wi[i], idx, val, inv_ln, dl, lam, gfixed, u, inv_c, scratch)
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
