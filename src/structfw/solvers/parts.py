"""The swappable parts of the block-coordinate engine, resolved once per solve.

docs/design.md ("The engine and its parts") explains how they fit together and how
to add one.  A block iteration of `BCFW` is

    corner source  ->  block step (direction + line search)  ->  sampler update

with the step size rule and the averaging applied by the engine around it.

- Corner sources give the Frank-Wolfe corner s_i = argmax_{y} H_i(y; w) of a
  block: `ExactOracle` calls the max oracle every time; `GapCache`
  first tries the best corner of the block's corner set and accepts it when its
  gap estimate reaches max(F g_i, nu/n g) (Osokin et al. 2016, Sec. 3.3, Alg. 5).
- Block steps move alpha_[i] (and so w_i, l_i and w): `FWStep`
  (Alg. 1 lines 5-9), `PairwiseStep` (App. D, Alg. 3: from the away corner
  to s_i) and `AwayStep` (App. D, Alg. 4: the better of FW and away).
  The last two need the block's active set S_i = {y : alpha_i(y) > 0}.

Per-block corner sets (`CornerStore`, flat arrays
with numba kernels) are one structure for the cache, the active sets and, later,
the multi-plane working sets.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np

from .._linalg import SparseVector, dot
from ._decisions import EVICT_OVER, away_alpha, away_taken, fw_alpha, pairwise_alpha, tidy_block
from ._kernels import cache_hit, projected_line_search, scored_step
from .base import SolveContext
from .corners import cs_away, cs_best, cs_dot, cs_entries

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)


class BlockContext(SolveContext):
    """The engine's solve context: what a block iteration needs, fixed for one solve (parts,
    problem, counters), and the pass in progress (``approx``); ``st`` is its ``state``.

    Attributes
    ----------
    problem, st : Problem, BCFWState
    plan : BlockPlan                          every option of the solve, resolved once
    source, step : the plan's corner source and block step
    lam, n, inv_ln : float, int, float      1/(lam n) scales psi into w-space
    validate : bool                           check oracle outputs (first pass of a fresh state)
    u, inv_c : lazy-average buffer and 1/c for the step in progress (empty without averaging)
    gfixed : float                            predefined step size, or -1 for line search
    counters : dict                           oracle_calls, cache_hits, oracle_time of this solve
    """

    def __init__(self, problem, st, plan):
        super().__init__(problem, st)
        self.st, self.plan = st, plan
        self.source, self.step = plan.source, plan.step
        self.lam, self.n = problem.lam, problem.n
        self.inv_ln = 1.0 / (problem.lam * problem.n)
        self.validate = False
        self.u, self.inv_c, self.gfixed = _EMPTY_V, 0.0, -1.0
        self.stamp = -1  # what corners used now are stamped with (MP-BCFW: the outer iteration)
        self.approx = False  # MP-BCFW: the pass in progress is approximate (corners from the working sets)
        self.prefetched = {}  # minibatch: oracle results computed at the batch's starting w
        # minibatch with the cache: blocks drawn as cache hits (a count: uniform sampling may draw
        # a block twice); their steps take the best cache corner without asking the rule again
        self.drawn_hits = Counter()
        self.pending_misses = Counter()  # blocks drawn as misses whose steps have not come yet
        self.counters = dict(oracle_calls=0, cache_hits=0, oracle_time=0.0)
        self.passes_done = 0


# ============================================================== corner sources
class ExactOracle:
    """Corner source: the exact (or approximate) max oracle on every block step."""

    keeps_corners = False
    absorbs_corners = False  # does a full gap pass's corners join the corner sets?

    def fw_corner(self, ctx, i):
        """(slot or -1, psi_s, L_s, g_i, hit) for block i at the current w.

        g_i = lam ⟨w_i, w⟩ - l_i + H_i(s_i; w)/n is the block gap (eq. (6))."""
        base = ctx.lam * ctx.st.block_w_dot(i, ctx.st.w) - ctx.st.li[i]
        return self.call_oracle(ctx, i, base)

    def needs_oracle(self, ctx, i):
        """Will block i's next step call the oracle (at the current w)?"""
        return True

    def prefetch(self, ctx, blocks):
        """Minibatch: run the oracles of these blocks at once (through the executor's workers).

        Hit or miss is decided here, once per drawn block, at the batch's starting w
        (`draw`); a block drawn twice in one batch is a miss at most once: its
        second step finds the first one's corner in the block's corner set."""
        need = sorted({i for i in blocks if self.draw(ctx, i)})
        if not need:
            return
        t0 = time.perf_counter()
        res = ctx.problem.batch_oracle(ctx.st.w, need, validate=ctx.validate)
        ctx.counters["oracle_time"] += time.perf_counter() - t0
        ctx.counters["oracle_calls"] += len(need)
        ctx.prefetched.update(zip(need, res))

    def draw(self, ctx, i):
        """Minibatch: decide now, when block i is drawn, whether its step calls the oracle (True)
        or takes a cache corner (recorded in ``ctx.drawn_hits``).  The decision is not taken
        again at the step: a block found a miss at its step but a hit at its draw would call
        its oracle alone on the stepping thread, one found a hit at its step would waste
        a corner already paid for."""
        return True

    def submit(self, ctx, i):
        """Asynchronous minibatch: start block i's oracle at the current w; None if its step
        will not need it (drawn as a cache hit)."""
        if not self.draw(ctx, i):
            return None
        w = ctx.st.w.copy()  # the steps before its turn change st.w in place
        return w, ctx.problem.submit_oracle(w, i)

    def collect(self, ctx, i, pending):
        """Block i's turn: wait for its oracle and leave the corner where `call_oracle`
        takes it.  oracle_time counts the wait (the time the steps were held up)."""
        if pending is None:
            return
        w, future = pending
        t0 = time.perf_counter()
        y = future.result()[0]
        ctx.counters["oracle_time"] += time.perf_counter() - t0
        ctx.counters["oracle_calls"] += 1
        ctx.prefetched[i] = ctx.problem.oracle_corner(i, y, w, ctx.validate)

    @staticmethod
    def call_oracle(ctx, i, base):
        st, problem = ctx.st, ctx.problem
        if i in ctx.prefetched:
            # computed at the batch's starting w: still a vertex of the block's simplex; its score
            # and the block-gap estimate are taken at the current w
            y, psi, L, _ = ctx.prefetched.pop(i)
            H = L - dot(psi, st.w)
        else:
            t0 = time.perf_counter()
            y = problem.max_oracle(i, st.w)
            ctx.counters["oracle_time"] += time.perf_counter() - t0
            ctx.counters["oracle_calls"] += 1
            y, psi, L, H = problem.oracle_corner(i, y, st.w, ctx.validate)
        g = base + H / ctx.n
        st.oracle_gaps[i] = g
        slot = -1
        if st.corners is not None:
            slot = st.corners.add(i, psi, L, 0.0, st.k)
        return slot, psi, L, g, False

    def tidy(self, ctx, i):
        """After a step, what leaves block i's corner set: the plan's rule (`BlockPlan.tidy_rule`:
        without a cache only the active set is kept), decided as the compiled passes decide it
        (`structfw.solvers._decisions.tidy_block`)."""
        st = ctx.st
        if st.corners is not None:
            kind, limit, _ = ctx.plan.tidy_rule(st.mp_iter, ctx.approx)
            tidy_block(st.corners.arrays, i, kind, limit, True)

    def absorb_gap_pass(self, st, res, problem):
        """A full gap pass's corners (nothing to keep without a cache)."""


class GapCache(ExactOracle):
    """Corner source with the gap-based cache of Osokin et al. (2016), Sec. 3.3.

    The cache corner c = argmax_{y in C_i} H_i(y; w) is used when its gap
    estimate ghat_i reaches max(F g_i^oracle, nu/n g), where g_i^oracle is the
    block gap at the last oracle call on i and g the last full gap; otherwise
    the oracle is called and its corner joins C_i (the longest-unused corner
    with zero weight leaves when C_i is full).
    """

    keeps_corners = True
    absorbs_corners = True

    def __init__(self, F, nu, limit):
        self.F, self.nu, self.limit = F, nu, limit  # limit: cache_size, the most corners per block

    def needs_oracle(self, ctx, i):
        """A cache miss at the current w (decided at the batch start for minibatches)."""
        st, n = ctx.st, ctx.n
        if st.corners.size[i] == 0:
            return True
        _, H, _ = cs_best(st.corners.arrays, i, st.w)
        ghat = ctx.lam * st.block_w_dot(i, st.w) - st.li[i] + H / n
        return not cache_hit(ghat, st.oracle_gaps[i], st.full_gap, self.F, self.nu, n)

    def draw(self, ctx, i):
        if i in ctx.drawn_hits or i in ctx.pending_misses:
            # drawn again in the same batch or window: the earlier draw's corner will be in C_i
            ctx.drawn_hits[i] += 1
            return False
        if self.needs_oracle(ctx, i):
            ctx.pending_misses[i] += 1
            return True
        ctx.drawn_hits[i] += 1
        return False

    def fw_corner(self, ctx, i):
        st, n = ctx.st, ctx.n
        base = ctx.lam * st.block_w_dot(i, st.w) - st.li[i]
        store = st.corners
        if i in ctx.prefetched:  # drawn as a miss: its oracle corner
            take(ctx.pending_misses, i)
            return self.call_oracle(ctx, i, base)
        drawn_hit = take(ctx.drawn_hits, i)
        if store.size[i] > 0:
            c, H, _ = cs_best(store.arrays, i, st.w)
            ghat = base + H / n
            if drawn_hit or cache_hit(ghat, st.oracle_gaps[i], st.full_gap, self.F, self.nu, n):
                ctx.counters["cache_hits"] += 1
                store.last[i, c] = st.k
                return c, corner_vector(st, i, c), store.loss[i, c], ghat, True
        return self.call_oracle(ctx, i, base)

    def absorb_gap_pass(self, st, res, problem):
        for i, (y, psi, L, _) in enumerate(res):
            st.corners.add(i, psi, L, 0.0, st.k, y=y)
            tidy_block(st.corners.arrays, i, EVICT_OVER, self.limit, True)


class WorkingSet(ExactOracle):
    """MP-BCFW's corner source (Shah, Kolmogorov, Lampert 2015, Alg. 3): per-block working sets
    W_i of planes (our corners).

    In an *exact* pass the oracle is called and its plane joins W_i, the longest-inactive
    plane leaving past ``max_planes`` (N); in an *approximate* pass the corner is
    argmax_{W_i} H_i(y; w) (eq. (6)), no oracle call, and planes not active during the last
    ``timeout`` (T) outer iterations leave.  A plane is active when an exact or approximate
    call returns it; ``ctx.stamp`` is the current outer iteration.  N and T are the plan's
    (`BlockPlan.tidy_rule`), which `tidy` reads as every source does."""

    keeps_corners = True

    def fw_corner(self, ctx, i):
        st = ctx.st
        base = ctx.lam * st.block_w_dot(i, st.w) - st.li[i]
        if not ctx.approx:
            slot, psi, L, g, hit = self.call_oracle(ctx, i, base)
            st.corners.last[i, slot] = ctx.stamp
            return slot, psi, L, g, hit
        store = st.corners
        c, H, _ = cs_best(store.arrays, i, st.w)
        store.last[i, c] = ctx.stamp
        return c, corner_vector(st, i, c), store.loss[i, c], base + H / ctx.n, True


# ================================================================= block steps
class FWStep:
    """Frank-Wolfe block step toward s_i: d = w_s - w_i, gamma in [0, 1] (Alg. 1 lines 5-9)."""

    needs_alpha = False

    def move(self, ctx, i, slot, psi_s, L_s, g_i):
        st = ctx.st
        gamma = apply_direction(ctx, i, -1.0, psi_s, ctx.inv_ln, None, 0.0, L_s / ctx.n - st.li[i], 1.0)
        finish_step(ctx, i, gamma, L_s / ctx.n - st.li[i])
        if st.track_alpha:
            fw_alpha(st.corners.arrays, i, slot, gamma)
        return gamma


class PairwiseStep:
    """Block pairwise step (BCPFW, App. D Alg. 3): weight moves from the away corner
    a_i = argmin_{y in S_i} H_i(y; w) to s_i, gamma in [0, alpha_i(a_i)]."""

    needs_alpha = True

    def move(self, ctx, i, slot, psi_s, L_s, g_i):
        st = ctx.st
        store = st.corners
        a = cs_away(store.arrays, i, st.w)
        dl = (L_s - store.loss[i, a]) / ctx.n
        gamma = apply_direction(ctx, i, 0.0, psi_s, ctx.inv_ln, corner_vector(st, i, a), -ctx.inv_ln, dl,
                                store.alpha[i, a])
        finish_step(ctx, i, gamma, dl)
        pairwise_alpha(store.arrays, i, a, slot, gamma)
        return gamma


class AwayStep:
    """Block away step (BCAFW, App. D Alg. 4): the FW step, or the away step
    d = w_i - w_a when its gap lam ⟨w, w_a - w_i⟩ + l_i - l_a is larger;
    gamma in [0, alpha_a / (1 - alpha_a)]."""

    needs_alpha = True

    def move(self, ctx, i, slot, psi_s, L_s, g_i):
        st = ctx.st
        store = st.corners
        a = cs_away(store.arrays, i, st.w)
        L_a, alpha_a = store.loss[i, a], store.alpha[i, a]
        li = st.li[i]
        g_away = ctx.lam * (cs_dot(store.arrays, i, a, st.w) * ctx.inv_ln - st.block_w_dot(i, st.w)) + li - L_a / ctx.n
        if not away_taken(g_i, g_away, alpha_a):
            return FWStep.move(self, ctx, i, slot, psi_s, L_s, g_i)
        dl = li - L_a / ctx.n
        gamma = apply_direction(ctx, i, 1.0, corner_vector(st, i, a), -ctx.inv_ln, None, 0.0, dl,
                                alpha_a / (1.0 - alpha_a))
        finish_step(ctx, i, gamma, dl)
        away_alpha(store.arrays, i, a, gamma)
        return gamma


STEP_PARTS = {"fw": FWStep, "pairwise": PairwiseStep, "away": AwayStep}


# ============================================================ shared mechanics
def take(counter, i):
    """Take one of block i's recorded draws; True if there was one."""
    if not counter[i]:  # a Counter reads a missing key as 0 without inserting it
        return False
    counter[i] -= 1
    if counter[i] == 0:
        del counter[i]
    return True


def corner_vector(st, i, k):
    """psi of corner k of block i as a SparseVector (views into the store's pool)."""
    idx, val = cs_entries(st.corners.arrays, i, k)
    return SparseVector(idx, val, st.d)


def finish_step(ctx, i, gamma, dl):
    """l_i and l move with the same gamma as w_i and w."""
    st = ctx.st
    st.li[i] = st.li[i] + gamma * dl
    st.ell += gamma * dl


def apply_direction(ctx, i, a, s1, b1, s2, b2, dl, gmax):
    """Move w_i and w along d = a w_i + b1 s1 + b2 s2 with the line search
    gamma = (d_l - lam ⟨w, d⟩) / (lam ||d||^2) clipped to [0, gmax] (or the fixed step):
    the compiled `block_step` on the state's rows, dense or sparse."""
    st = ctx.st
    if ctx.problem.constrained:
        return projected_direction(ctx, i, a, s1, b1, s2, b2, dl, gmax)
    c1 = (s1.indices, s1.values) if s1 is not None else None
    c2 = (s2.indices, s2.values) if s2 is not None else None
    if not st.dense_blocks:
        st.make_row_room(i, (len(s1.indices) if s1 is not None else 0) + (len(s2.indices) if s2 is not None else 0))
    return scored_step(st.w, st.layout(), i, a, c1, b1, c2, b2, dl, (ctx.lam, gmax, ctx.gfixed), (ctx.u, ctx.inv_c))


def projected_direction(ctx, i, a, s1, b1, s2, b2, dl, gmax):
    """The same move with w_S >= 0: v = A alpha moves along d, w = Pi(v).

    The dual is D(alpha) = -lam/2 ||Pi(A alpha)||^2 + b^T alpha (minimising over w_S >= 0
    in closed form); it is concave and piecewise quadratic along d, so the line search
    is exact on the piece that holds the root of its slope (``projected_line_search``).
    Its gradient in alpha_i(y) is H_i(y; Pi(v))/n, so corners, block gaps and the duality
    gap are those of the unconstrained engine evaluated at w = Pi(v).  d is built densely:
    constrained models have costly oracles, beside which O(d) per step is nothing."""
    st, problem = ctx.st, ctx.problem
    rows = st.unscaled_blocks()  # w_i is written in place below
    if st.dense_blocks:
        d = a * rows[i] if a != 0.0 else np.zeros(st.d)
    else:
        d = rows.row(i).toarray() * a if a != 0.0 else np.zeros(st.d)
    for s, b in ((s1, b1), (s2, b2)):
        if s is not None:
            np.add.at(d, s.indices, b * s.values)
    idx = np.flatnonzero(d).astype(np.int64)
    val = d[idx]
    if ctx.gfixed >= 0.0:
        gamma = min(max(ctx.gfixed, 0.0), gmax)
    else:
        gamma = projected_line_search(st.v, idx, val, problem.nonneg_mask, ctx.lam, dl, gmax)
    if gamma > 0.0:
        st.v[idx] += gamma * val
        if st.dense_blocks:
            rows[i][idx] += gamma * val
        else:
            rows.add(i, idx, gamma * val)
        if ctx.u.shape[0] > 0:
            ctx.u[idx] -= ctx.inv_c * gamma * val
        problem.project(st.v, out=st.w)
    return gamma
