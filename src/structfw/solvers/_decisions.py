"""The engine's decisions, each written once, as compiled functions that both routes call.

A block iteration decides which block comes next, the step size rule, whether the away step
is taken, how the corner weights move, what leaves the corner set, how the sampler learns the
block's gap and how the average of the iterates advances.  The compiled passes
(`structfw.solvers._fastpass`) call these functions inside their chunks; the Python route
(`structfw.solvers.passes.python_pass`, `structfw.solvers.parts`, `sampling`, `averaging`) calls
the same functions from Python, one call per decision, so that no decision has a Python twin
that could drift from the compiled one (tests/test_decisions.py holds the Python modules to
this).  The cache's hit rule is `structfw.solvers._kernels.cache_hit`, shared the same way.

`DECISIONS` names them; docs/design.md, "The engine and its parts" (its paragraph "One decision, two
callers") says where a new one goes.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from ._kernels import fenwick_add, fenwick_find, fenwick_total, first_argmax
from .corners import ALPHA_EPS, cs_clip, cs_drop_inactive, cs_evict, cs_expire

#: sampler kinds: ORDER (blocks from an order: uniform, perm), GAP (p_i ~ g_i), MAX_GAP (the
#: largest estimate); ORDER_GAPS: blocks from an order, each step's block gap recorded in the
#: estimates but not in the Fenwick tree (the caller rebuilds it: sharded rounds, whose blocks
#: are drawn at the round's start, `structfw.solvers.sharded`)
ORDER, GAP, MAX_GAP, ORDER_GAPS = 0, 1, 2, 3
#: the sampler kind of each `BlockSampler` kind, for the decisions below
SAMPLER_CODES = {"uniform": ORDER, "perm": ORDER, "gap": GAP, "max_gap": MAX_GAP}
#: averaging kinds (0: none)
AVG_CODES = {None: 0, "weighted": 1, "uniform": 2, "suffix": 3}
#: what a block step does to its corner set afterwards
DROP_INACTIVE, EVICT_OVER, EXPIRE = 0, 1, 2

#: the decisions of a block iteration (tests/test_decisions.py: each is called by the compiled
#: chunks and by the Python route, and the Python modules call none of the kernels they wrap)
DECISIONS = ("draw_block", "record_gap", "fixed_step", "away_taken", "fw_alpha", "pairwise_alpha", "away_alpha",
             "tidy_block", "averaging_rate", "average_close", "cache_hit")


# ------------------------------------------------------------------ sampler
@njit(cache=True, nogil=True, inline="always")
def draw_block(sampler, s, n):
    """Block of step s: from the order (uniform, perm), by the gap estimates (p_i ~ g_i, eq.
    (8) of Osokin et al. 2016, from the Fenwick tree; uniform while every estimate is 0) or the
    largest estimate.  ``sampler`` = (kind, order, draws, estimates, tree); ``draws[s]`` is the
    step's uniform number in [0, 1)."""
    sampling, order, draws, estimates, tree = sampler
    if sampling == ORDER or sampling == ORDER_GAPS:
        return order[s]
    if sampling == GAP:
        total = fenwick_total(tree)
        if total <= 0.0:
            return min(int(draws[s] * n), n - 1)
        return fenwick_find(tree, draws[s] * total)
    return first_argmax(estimates)


# left to LLVM's inliner: with numba's inline="always" (IR inlining, numba 0.68) plain_fw_chunk
# lost its writes to the estimates (the gap sampler then drew uniformly;
# tests/test_engine_reference.py's gap fits caught it)
@njit(cache=True, nogil=True)
def record_gap(sampling, estimates, tree, i, g):
    """The sampler's new estimate of block i's gap, max(g, 0) (Osokin et al. 2016, Sec. 3.1):
    the gap sampler keeps its Fenwick tree in step; ORDER samplers keep none."""
    if sampling == ORDER:
        return
    g = g if g > 0.0 else 0.0
    if sampling == GAP:
        fenwick_add(tree, i, g - estimates[i])
    estimates[i] = g


# ------------------------------------------------------------------ the step
@njit(cache=True, nogil=True)
def fixed_step(nu_step, k, n):
    """The predefined step 2n/(nu k + 2n) (BCFW paper Alg. 3; App. C, Alg. C.2 for oracle
    quality nu), or -1 (the line search) when nu_step = 0."""
    return 2.0 * n / (nu_step * k + 2.0 * n) if nu_step > 0.0 else -1.0


@njit(cache=True, nogil=True)
def away_taken(g_i, g_away, alpha_a):
    """Does the block away step replace the FW step (Osokin et al. 2016, App. D, Alg. 4)?  When
    its gap g_away = lam ⟨w, w_a - w_i⟩ + l_i - l_a beats the FW gap g_i, and the away corner
    does not hold all of the block's weight (its step size alpha_a / (1 - alpha_a) is then
    unbounded)."""
    return g_i < g_away and alpha_a < 1.0 - ALPHA_EPS


@njit(cache=True, nogil=True)
def _scale_alpha(S, i, c):
    alpha = S[3]
    for k in range(S[0][i]):
        alpha[i, k] *= c


@njit(cache=True, nogil=True)
def fw_alpha(S, i, slot, gamma):
    """The corner weights after a FW step of size gamma toward corner ``slot``:
    alpha_i <- (1 - gamma) alpha_i + gamma e_slot."""
    if gamma > 0.0:
        _scale_alpha(S, i, 1.0 - gamma)
        S[3][i, slot] += gamma
        cs_clip(S, i)


@njit(cache=True, nogil=True)
def pairwise_alpha(S, i, a, slot, gamma):
    """The corner weights after a pairwise step: gamma moves from the away corner ``a`` to ``slot``."""
    if gamma > 0.0:
        S[3][i, a] -= gamma
        S[3][i, slot] += gamma
        cs_clip(S, i)


@njit(cache=True, nogil=True)
def away_alpha(S, i, a, gamma):
    """The corner weights after an away step of size gamma from corner ``a``:
    alpha_i <- (1 + gamma) alpha_i - gamma e_a."""
    if gamma > 0.0:
        _scale_alpha(S, i, 1.0 + gamma)
        S[3][i, a] -= gamma
        cs_clip(S, i)


@njit(cache=True, nogil=True)
def tidy_block(S, i, tidy_kind, limit, keeps):
    """What a step does to block i's corner set afterwards (`structfw.solvers.plan.BlockPlan.tidy_rule`):
    evict the longest-unused corners over ``limit`` (the cache's size, MP-BCFW's N planes), expire
    those last used before outer iteration ``limit`` (MP-BCFW's approximate passes, timeout T), or,
    when the set is kept only as the active set, drop the corners of zero weight."""
    if tidy_kind == EVICT_OVER:
        if S[0][i] > limit:
            cs_evict(S, i, limit)
    elif tidy_kind == EXPIRE:
        cs_expire(S, i, limit)
    elif keeps:
        cs_drop_inactive(S, i)


# ------------------------------------------------------------------ averaging
@njit(cache=True, nogil=True, inline="always")
def averaging_rate(kind, t):
    """rho_t of the average of the iterates for the t-th iterate (t >= 1), ``kind`` an `AVG_CODES`
    code: weighted 2/(t + 1) (eq. (14) of the BCFW paper), uniform 1/t, suffix 1/(t - 2^j + 1) with
    2^j the last power of two <= t (the doubling trick of the 0.5-suffix average (15))."""
    if kind == 1:
        return 2.0 / (t + 1.0)
    if kind == 2:
        return 1.0 / t
    start = 1
    while start * 2 <= t:
        start *= 2
    return 1.0 / (t - start + 1.0)


@njit(cache=True, nogil=True)
def average_close(rho, u, c, lbar, ell):
    """Close a step in the lazy average wbar = c u + w (`structfw.solvers.averaging`), after u got
    -delta / c: returns (c, lbar) with c *= 1 - rho (u renormalised into c = 1 before c underflows;
    zeroed when rho = 1) and lbar = (1 - rho) lbar + rho l."""
    if rho >= 1.0:
        u[:] = 0.0
        c = 1.0
    else:
        c *= 1.0 - rho
        if c < 1e-150:
            u *= c
            c = 1.0
    return c, (1.0 - rho) * lbar + rho * ell
