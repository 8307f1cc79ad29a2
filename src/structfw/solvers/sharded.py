"""Sharded training: the engine's block steps on K shards of the training set, combined in rounds.

docs/design.md, "Sharded training".  The examples are split into K shards (strided: example i
belongs to shard i mod K).  Each shard owns its blocks' dual state -- a `BCFWState` of the engine on
the sub-problem of its examples, with rows or factored label weights, corner sets, cache and gap
estimates -- and a copy of w.  A round, at the global w:

1. every shard runs m local block steps (the engine's chunks, any block-local option) against the
   local iterate w + sigma' u_k, u_k its own change so far, with the block line search
   gamma = clip((lam <w_i - w_s, w + sigma' u_k> - l_i + l_s) / (lam sigma' ||w_i - w_s||^2), 0, 1);
2. it returns its change (u_k, dl_k); with U = sum_k u_k and dl = sum_k dl_k the combination's
   gamma is 1 ("add", CoCoA+ with sigma' = K: Ma et al. 2015), 1/K ("average", sigma' = 1) or the
   exact line search of the dual along U ("linesearch", sigma' = 1):
   gamma* = clip((dl - lam ⟨w, U⟩) / (lam ||U||^2), 0, 1);
3. w <- w + gamma U, l <- l + gamma dl, and every shard scales its blocks' change by gamma, so
   that w = sum_i w_i holds after every round.

The local problem is the engine's own, rescaled: on shard k's n_k examples with
lam_k = lam n / (n_k sigma') the engine's w_i are sigma' times the global ones, its l_i are n / n_k
times the global ones, and its iterate, started at the global w, is w + sigma' u_k; its block line
search is then the one above and its block gaps are n / n_k times the global g_i.  So every part of
the engine (chunks, corner sources, steps, samplers) runs unchanged.

MP-BCFW (Shah et al. 2015, Alg. 3) runs its outer iterations over the shards (`mp_outer_iteration`):
an exact sharded pass, then approximate sharded passes while the slope rule holds on the global dual
and work counter, every round carrying the pass's kind and outer iteration to the shards.
"""
from __future__ import annotations

import contextvars
import math
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .._linalg import SparseVector, combine
from ._factored import block_w_dots, factored_arrays, no_factored, positions
from ._decisions import ORDER, ORDER_GAPS, fixed_step
from ._fastpass import PAIRWISE_STEP, counters, factored_fw_chunk, general_chunk, plain_fw_chunk
from ._kernels import fenwick_build, projected_line_search
from .base import Param, SolveContext, SolveResult, Solver, continue_or_restart
from .bcfw import BCFW, MPBCFW
from .block_state import BCFWState
from .corners import CornerStore, cs_find, cs_room, cs_put
from .parts import BlockContext
from .passes import mend_chunk_stop, plain_fw_block, slope_rule_stops, take_chunk_counts
from .plan import ENGINE_PARAMS, check_combination, engine_label
from .problem import Problem, project_onto
from .sampling import BlockSampler, take_full_gaps
from .sharded_state import ShardedState

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor, StopRule

COMBINES = ("linesearch", "average", "add")
#: the rules' codes in the compiled rounds
LINESEARCH, AVERAGE, ADD = 0, 1, 2
_RULE_CODES = {"linesearch": LINESEARCH, "average": AVERAGE, "add": ADD}
_EMPTY_I = np.empty(0, np.int64)
EXECUTORS = ("thread", "process", "ray")
_EMPTY_V = np.empty(0, np.float64)
_NO_MIRROR = np.zeros((0, 0))

#: the options of the sharded engine beside the engine's own
SHARD_PARAMS: tuple[Param, ...] = (
    Param("shards", 2, "int", low=1, help="K: shards of the training set (example i in shard i mod K)."),
    Param("combine", None, "choice", (None,) + COMBINES,
          help="How a round's changes combine: the exact line search of the dual along their sum, their "
               "average (gamma = 1/K), or CoCoA+ adding (gamma = 1, local quadratic term times K); None: "
               "the line search for rounds of at most a quarter of a shard, else adding (`resolve_rule`)."),
    Param("round_length", None, "int", low=1, none_ok=True,
          help="Block steps a shard makes between two combinations; None: from the cost model "
               "(`default_round_length`)."),
    Param("executor", "thread", "choice", EXECUTORS,
          help="Where the shards run: threads of this process (the compiled steps release the GIL), one "
               "worker process per shard, or one Ray actor per shard; a worker receives its shard once, or "
               "loads it itself from a shard source."),
    Param("n_jobs", None, "int", low=1, none_ok=True, help="Threads for the shards; None: one per shard."),
    Param("state_dir", None, "path",
          help="A folder where each worker (processes, Ray) writes its shard's state, shard-<k>.npz, at every "
               "checkpoint and at the end: a fit from a shard source continues from them (warm_start); on a "
               "cluster a folder every worker reaches.  None: a private temporary folder (restarts only)."),
)

#: a combination's cost in block steps of a shard, by executor (docs/design.md, "Sharded training"):
#: on threads a barrier and a sum of d-vectors in the compiled rounds (or a Python round trip,
#: ~0.15-0.3 ms, for the other options), on processes w and the change through a pipe each way
#: measured on OCR (`structfw.solvers.sharded.run_compiled_rounds` with rounds of one step: 17.5 us a round
#: on one shard where a step is ~9 us, 60 us on two threads sharing a loaded 2-core machine)
COMBINE_COST_STEPS = {"compiled": 5, "thread": 40, "process": 400}


def default_round_length(n_k: int, route: str) -> int:
    """Block steps a shard makes per round when ``round_length`` is None: ten combinations' cost on the
    route the rounds take ("compiled" rounds on threads, "thread" rounds in Python, "process"), so that
    combining costs about 10 % of a round, at most a whole shard (docs/design.md, "Sharded training")."""
    return int(max(1, min(n_k, 10 * COMBINE_COST_STEPS[route])))


def resolve_rule(combine: str | None, m: int, n_k: int) -> str:
    """The rule of ``combine=None``: the line search for short rounds (m <= n_k / 4), else CoCoA+ adding.
    On OCR (K = 2, lam = 0.01, passes to gap 0.01; serial 51) the line search took 55 passes with rounds
    of 25 steps a shard and 76 with 400, adding 75 and 83; with rounds of half a shard adding took 90 and
    the line search 94, with whole shards 102 and over 120 (docs/design.md, "Sharded training")."""
    if combine is not None:
        return combine
    return "linesearch" if 4 * m <= n_k else "add"


def shard_indices(n: int, K: int) -> list[npt.NDArray[np.int64]]:
    """The examples of each of the K shards: shard k holds k, k + K, k + 2K, ... (strided, so that data
    sorted by length or label still give shards alike)."""
    return [np.arange(k, n, K, dtype=np.int64) for k in range(K)]


def check_shards(options: Any, problem: Problem | None = None) -> None:
    """The options that cannot run on shards (ValueError naming both), and a K beyond the examples."""
    if options.multi_plane:
        check_mp_on_shards(options)
    if options.minibatch > 1:
        raise ValueError(f"minibatch={options.minibatch} with shards={options.shards}: shards already step their "
                         "blocks in parallel; use minibatch=1 with shards, or shards=None with a minibatch")
    state_dir = getattr(options, "state_dir", None)
    if state_dir is not None and getattr(options, "executor", None) == "thread":
        raise ValueError(f"state_dir={os.fspath(state_dir)!r} with executor='thread': the shards' states are in "
                         "this process and saved whole with save(path, state=True); state_dir is where workers "
                         "(executor='process' or 'ray') write theirs")
    if problem is None:
        return
    if options.shards > problem.n:
        raise ValueError(f"shards={options.shards} is more than the {problem.n} training examples: every shard "
                         "needs at least one example")


def check_mp_on_shards(options: Any) -> None:
    """MP-BCFW's options that shards cannot run: the slope rule by the clock (the approximate passes'
    number would follow the shards' timing, so the iterates would depend on more than K and the seed)
    and averaging (the rounds' average and MP-BCFW's two averages, over exact and over approximate
    steps (Sec. 3.5), do not combine)."""
    K = options.shards
    if options.approx_rule == "time":
        raise ValueError(f"approx_rule='time' with shards={K}: the number of approximate passes would follow the "
                         "shards' timing, and the iterates with it; use approx_rule='work' with shards (the "
                         "slope rule counts plane dot products and oracle calls)")
    if options.averaging is not None:
        raise ValueError(f"averaging={options.averaging!r} with multi_plane=True and shards={K}: the rounds' "
                         "average and MP-BCFW's two averages (exact and approximate steps) do not combine; use "
                         "averaging=None with MP-BCFW on shards, or multi_plane=False")


# ====================================================================== one shard
class Shard:
    """Shard k's engine: its sub-problem, its `BlockContext`, and the round in flight.

    Everything here is in the engine's units (w_i^e = sigma' w_i, l_i^e = (n / n_k) l_i); `round`,
    `gaps` and `hinge_sum` return global ones."""

    def __init__(self, sub: Problem, st: BCFWState, engine: BCFW, n: int, sigma: float) -> None:
        self.sub, self.st, self.n, self.sigma = sub, st, n, float(sigma)
        self.scale = sub.n / n  # global l / engine l
        self.ctx = BlockContext(sub, st, engine.plan(sub, st.storage))
        self.pending: tuple[Any, float] | None = None  # (snapshot, engine l at the round's start)
        self.gaps_e: npt.NDArray[np.float64] | None = None  # the last gap pass's block gaps (engine units)
        self._empty_store: CornerStore | None = None

    def round(self, v: npt.NDArray[np.float64], m: int, blend: bool,
              mp: tuple[int, bool] | None = None) -> tuple[npt.NDArray[np.float64], float]:
        """m local block steps from the global v (w = Pi(v)); returns the change (u_k, dl_k) of the shard's
        blocks' sum and l in global units.  With
        ``blend`` the touched blocks are kept so that `combine` can scale their change.  ``mp`` =
        (outer iteration, approximate): a round of MP-BCFW's exact or approximate sharded pass (its
        planes stamped with the fit's outer iteration; an approximate round's blocks from
        `approx_round_blocks`, their corners from the working sets); None: not MP-BCFW."""
        st, ctx = self.st, self.ctx
        self.set_point(v)
        ell0 = st.ell
        approx = False
        if mp is not None:
            st.mp_iter, approx = int(mp[0]), bool(mp[1])
            ctx.stamp = st.mp_iter
        blocks = approx_round_blocks(st, m) if approx else draw_round(st, m)
        snap = snapshot(st, np.unique(blocks)) if blend else None
        ctx.approx = approx
        try:
            run_round(ctx, blocks, self)
        finally:
            ctx.approx = False
        self.pending = (snap, ell0)
        return (st.v - v) / self.sigma, self.scale * (st.ell - ell0)

    def set_point(self, v: npt.NDArray[np.float64]) -> None:
        """The engine's v and w = Pi(v) at the global v (the same array without positivity constraints):
        its iterate at a round's start is then v + sigma' u_k, the projected line search of its steps
        (`structfw.solvers.parts.projected_direction`) that of the local problem."""
        st = self.st
        st.v[:] = v
        if st.v is not st.w:
            self.sub.project(st.v, out=st.w)

    def planes(self) -> int:
        """The planes in the shard's working sets (MP-BCFW: the approximate pass's work, `mp_pass_work`)."""
        corners = self.st.corners
        return 0 if corners is None else int(corners.size.sum())

    def combine(self, gamma: float) -> None:
        """Scale the last round's change of every touched block by gamma (w_i <- w_i^0 + gamma (w_i - w_i^0))."""
        snap, ell0 = self.pending if self.pending is not None else (None, self.st.ell)
        self.pending = None
        if gamma == 1.0:
            return
        if snap is None:
            raise RuntimeError("a round combined with gamma != 1 was run without its snapshot")
        blend(self.st, snap, gamma)
        self.st.ell = ell0 + gamma * (self.st.ell - ell0)

    def counters(self) -> dict[str, Any]:
        return dict(self.ctx.counters)

    def block_sum(self) -> npt.NDArray[np.float64]:
        """sum of this shard's w_i in global units, from its storage (and, for factored label weights,
        its data): what a continued state's w must be the sum of over the shards (`check_block_sums`)."""
        st = self.st
        if st.factored is not None:
            total = st.factored.total(positions(self.sub.compiled_oracle())[0], st.d)
        else:
            rows, scales = st.scaled_blocks()
            if isinstance(rows, np.ndarray):
                total = scales @ rows
            else:
                total = np.zeros(st.d)
                for i in range(st.n):
                    a, m = int(rows.start[i]), int(rows.nnz[i])
                    np.add.at(total, rows.idx[a:a + m], scales[i] * rows.val[a:a + m])
        return total / self.sigma

    def empty_store(self) -> CornerStore:
        """An empty corner set per block for a general chunk of plain FW steps (no corners kept)."""
        if self._empty_store is None:
            self._empty_store = CornerStore(self.sub.n, self.sub.d, capacity=1, pool=1)
        return self._empty_store

    def gaps(self, v: npt.NDArray[np.float64], validate: bool) -> tuple[float, npt.NDArray[np.float64]]:
        """(sum_i H_i(y_i*; w), the block gaps g_i = lam ⟨w_i, w⟩ - l_i + H_i(y_i*; w) / n) of the shard's
        examples at w = Pi(v), v the global one (global units)."""
        st, sub = self.st, self.sub
        self.set_point(v)
        H = sub.batch_hinges(st.w, validate=validate)
        self.gaps_e = sub.lam * block_dots(sub, st) - st.li + H / sub.n
        return float(H.sum()), self.scale * self.gaps_e

    def hinge_sum(self, w: npt.NDArray[np.float64]) -> float:
        """sum_i H_i(y_i*; w) over the shard's examples at any w (the averaged iterate)."""
        return float(self.sub.batch_hinges(np.ascontiguousarray(w, np.float64), validate=False).sum())

    def refresh(self, full_gap: float) -> None:
        """The last gap pass's block gaps become the sampler's and the cache rule's estimates; the cache
        rule's g is the global gap (in the engine's units its nu/n_k g^e reads nu/n g)."""
        take_full_gaps(self.st, self.gaps_e)
        self.st.full_gap = float(full_gap)
        self.ctx.counters["oracle_calls"] += self.sub.n


def block_dots(sub: Problem, st: BCFWState) -> npt.NDArray[np.float64]:
    """⟨w_i, w⟩ of every block of a shard (engine units): from the rows or the factored label weights."""
    if st.factored is not None:
        return block_w_dots(positions(sub.compiled_oracle())[0], st.factored, st.w)
    return np.array([st.block_w_dot(i, st.w) for i in range(sub.n)])


# ====================================================================== drawing a round's blocks
def draw_round(st: BCFWState, m: int) -> npt.NDArray[np.int64]:
    """The m blocks of a round, drawn at its start: the next m of the sampler's passes (uniform, perm), m
    draws by the gap estimates (gap: p_i ~ g_i, uniform while all are 0), or the m largest estimates
    (max_gap).  Drawn ahead so that the round's touched blocks are known before it runs."""
    sampler = st.sampler
    if sampler.kind in ("uniform", "perm"):
        out = []
        while m > 0:
            if sampler._pos >= sampler._buffer.shape[0]:
                sampler.start_pass()
            take = sampler.take_order(min(m, sampler._buffer.shape[0] - sampler._pos))
            out.append(take)
            m -= take.shape[0]
        return np.ascontiguousarray(np.concatenate(out), np.int64)
    if sampler.kind == "max_gap":
        return _round_blocks((2, _EMPTY_I, _EMPTY_V), 0, m, sampler.estimates)
    return _round_blocks((1, _EMPTY_I, st.rng.random(m)), 0, m, sampler.estimates)


def approx_round_blocks(st: BCFWState, m: int) -> npt.NDArray[np.int64]:
    """The m blocks of an approximate round (MP-BCFW): the first m of random permutations of the shard's
    blocks from its generator, one after another -- a serial approximate pass takes a permutation
    (`structfw.solvers.passes.mp_pass`), and the sampler's estimates, which its steps do not update,
    would draw the same blocks again and again (gap, max_gap)."""
    perms = [st.rng.permutation(st.n) for _ in range(-(-m // st.n))]
    return np.ascontiguousarray(np.concatenate(perms)[:m], np.int64)


# ====================================================================== running a round
def run_round(ctx: BlockContext, blocks: npt.NDArray[np.int64], shard: Shard) -> None:
    """The block steps of ``blocks`` in turn, on the route the plan takes for a pass: a compiled chunk
    (plain, factored or general) or the Python parts."""
    plan, st = ctx.plan, ctx.st
    kind = ORDER_GAPS if st.sampler.adaptive else ORDER
    if plan.compiled is not None:
        if plan.factored is not None and plan.plain:
            _plain_round(ctx, blocks, kind, "factored")
        elif plan.plain and plan.dense:
            _plain_round(ctx, blocks, kind, "dense")
        else:
            _general_round(ctx, blocks, kind, shard)
        if st.sampler.kind == "gap":  # the chunk recorded the gaps, not the Fenwick tree
            st.sampler._tree = fenwick_build(st.sampler.estimates)
    else:
        _python_round(ctx, blocks)


def _plain_round(ctx: BlockContext, blocks: npt.NDArray[np.int64], kind: int, storage: str) -> None:
    """Plain FW steps in one compiled chunk (`plain_fw_chunk` on dense rows, `factored_fw_chunk`)."""
    plan, st, sub = ctx.plan, ctx.st, ctx.problem
    m = blocks.shape[0]
    sampler = (kind, blocks, _EMPTY_V, st.sampler.estimates, st.sampler._tree)
    c = counters(st.k, st.ell)
    rule = (sub.lam, plan.nu_step, plan.check_oracle)
    if storage == "factored":
        fac = factored_arrays(plan.compiled, st.factored, plan.factored)
        steps, bad = factored_fw_chunk(fac, m, sampler, st.w, st.li, rule, (0, _EMPTY_V), c)
    else:
        rows, scales = st.scaled_blocks()
        steps, bad = plain_fw_chunk(plan.compiled, m, sampler, st.w, (rows, scales, st.li), rule, (0, _EMPTY_V),
                                    c, np.zeros(sub.d), _EMPTY_V)
    ctx.counters["oracle_calls"] += steps + (bad >= 0)
    if bad >= 0:  # the compiled oracle is not a maximiser: the checked Python call names the example
        sub.oracle(bad, st.w, validate=True)
        sub.check_oracle_value(bad, -np.inf)
    st.k, st.ell = int(c["k"][0]), float(c["ell"][0])


def _general_round(ctx: BlockContext, blocks: npt.NDArray[np.int64], kind: int, shard: Shard) -> None:
    """Cache / pairwise / away steps (and plain FW on sparse rows) in compiled general chunks, growing the
    corner pool or a sparse row where a chunk stops for room (as `structfw.solvers.passes`)."""
    plan, st, sub = ctx.plan, ctx.st, ctx.problem
    store = st.corners if st.corners is not None else shard.empty_store()
    approx = ctx.approx  # MP-BCFW's approximate round: corners from the working sets, no oracle
    tidy_kind, limit, stamp = plan.tidy_rule(st.mp_iter, approx)
    c = counters(st.k, st.ell, full_gap=st.full_gap)
    keep_rows = not (plan.step_code == PAIRWISE_STEP and st.track_alpha) and st.factored is None
    fac = no_factored() if st.factored is None else factored_arrays(plan.compiled, st.factored, plan.factored)
    B: tuple[Any, ...] = (_EMPTY_V,) if st.factored is not None else st.layout(keep_rows)
    m, s = blocks.shape[0], 0
    while True:
        s, status = general_chunk(
            plan.compiled, store.arrays, (s, m), (kind, blocks, _EMPTY_V, st.sampler.estimates, st.sampler._tree),
            st.w, (B, st.li, _NO_MIRROR), (sub.lam, plan.step_code, plan.nu_step, plan.check_oracle),
            (plan.cache, plan.cache_F, plan.cache_nu, st.oracle_gaps),
            (st.track_alpha, approx, stamp, tidy_kind, limit, keep_rows), (0, _EMPTY_V), c, fac)
        st.rows_stale = st.rows_stale or (not keep_rows and st.factored is None)
        if status == 0:
            break
        B = mend_chunk_stop(sub, st, store, status, c, keep_rows, B)
    take_chunk_counts(ctx, st, c)


def _python_round(ctx: BlockContext, blocks: npt.NDArray[np.int64]) -> None:
    """The block steps through the parts (corner source -> block step -> sampler), one Python call a step:
    models without a compiled oracle (`structfw.solvers.passes.python_pass` with an order); in an
    approximate round (``ctx.approx``) the corners come from the working sets and the sampler's
    estimates are left alone, as in a serial approximate pass."""
    plan, st = ctx.plan, ctx.st
    ctx.validate = plan.check_oracle and st.k < ctx.n and not ctx.approx  # the shard's first pass, as the engine's
    fast = plan.plain and plan.compilable and plan.dense and not ctx.validate
    ctx.u, ctx.inv_c = _EMPTY_V, 0.0
    for i in blocks.tolist():
        ctx.gfixed = fixed_step(plan.nu_step, st.k, ctx.n)
        if fast:
            plain_fw_block(ctx, i)
        else:
            slot, psi, L, g_i, _ = ctx.source.fw_corner(ctx, i)
            ctx.step.move(ctx, i, slot, psi, L, g_i)
            ctx.source.tidy(ctx, i)
            if st.sampler.adaptive and not ctx.approx:
                st.sampler.update(i, g_i)
        st.k += 1


# ====================================================================== scaling a round's change
def snapshot(st: BCFWState, blocks: npt.NDArray[np.int64]) -> dict[str, Any]:
    """The dual point of ``blocks`` before a round: l_i, w_i (rows, or the factored label weights) and,
    when the corners' weights are tracked, each block's active corners with their weights."""
    snap: dict[str, Any] = {"blocks": blocks, "li": st.li[blocks].copy()}
    if st.factored is not None:
        fb = st.factored
        snap["A"] = _take_ranges(fb.A, fb.starts, blocks)
        snap["T"] = _take_rows(fb.T.reshape(fb.T.shape[0], -1), blocks, _ONES)
    elif not st.rows_stale:
        rows, scales = st.scaled_blocks()
        if st.dense_blocks:
            snap["rows"] = _take_rows(rows, blocks, scales)
        else:
            snap["rows"] = [rows.row(i) * float(scales[i]) for i in blocks.tolist()]
    if st.track_alpha and st.corners is not None:
        snap["corners"] = _active_corners(st.corners, blocks)
    return snap


def blend(st: BCFWState, snap: dict[str, Any], gamma: float) -> None:
    """Every block of the snapshot at (1 - gamma) * before + gamma * now: l_i, w_i and the corners'
    weights (a corner dropped during the round comes back with its share).  Each block stays a convex
    combination of its corners, so every gamma in [0, 1] is feasible."""
    blocks, g = snap["blocks"], float(gamma)
    st.li[blocks] = (1.0 - g) * snap["li"] + g * st.li[blocks]
    if "A" in snap:
        fb = st.factored
        _blend_ranges(fb.A, fb.starts, blocks, snap["A"], g)
        _blend_rows(fb.T.reshape(fb.T.shape[0], -1), blocks, snap["T"], g, _ONES)
    elif "rows" in snap and st.dense_blocks:
        rows, scales = st.scaled_blocks()
        _blend_rows(rows, blocks, snap["rows"], g, scales)
    elif "rows" in snap:
        _blend_sparse_rows(st, blocks, snap["rows"], g)
    if "corners" in snap:
        _blend_corners(st.corners, snap["corners"], g)


_ONES = np.ones(0)  # no scales: the rows are w_i themselves


@njit(cache=True, nogil=True)
def _take_rows(M, blocks, scales):
    """scales[b] * M[b] of each block b (M[b] itself without scales), one row each."""
    out = np.empty((blocks.shape[0], M.shape[1]))
    for r in range(blocks.shape[0]):
        b = blocks[r]
        c = scales[b] if scales.shape[0] > 0 else 1.0
        for j in range(M.shape[1]):
            out[r, j] = c * M[b, j]
    return out


@njit(cache=True, nogil=True)
def _blend_rows(M, blocks, before, g, scales):
    """M[b] <- (1 - g) before[r] + g scales[b] M[b] for the r-th block b, its scale then 1."""
    for r in range(blocks.shape[0]):
        b = blocks[r]
        c = g * (scales[b] if scales.shape[0] > 0 else 1.0)
        for j in range(M.shape[1]):
            M[b, j] = (1.0 - g) * before[r, j] + c * M[b, j]
        if scales.shape[0] > 0:
            scales[b] = 1.0


@njit(cache=True, nogil=True)
def _take_ranges(A, starts, blocks):
    """The rows starts[b]:starts[b+1] of A of each block b, block after block."""
    total = 0
    for r in range(blocks.shape[0]):
        total += starts[blocks[r] + 1] - starts[blocks[r]]
    out = np.empty((total, A.shape[1]))
    t = 0
    for r in range(blocks.shape[0]):
        for a in range(starts[blocks[r]], starts[blocks[r] + 1]):
            out[t, :] = A[a, :]
            t += 1
    return out


@njit(cache=True, nogil=True)
def _blend_ranges(A, starts, blocks, before, g):
    """A's rows of each block b <- (1 - g) before + g A (the order of `_take_ranges`)."""
    t = 0
    for r in range(blocks.shape[0]):
        for a in range(starts[blocks[r]], starts[blocks[r] + 1]):
            for j in range(A.shape[1]):
                A[a, j] = (1.0 - g) * before[t, j] + g * A[a, j]
            t += 1


def _blend_sparse_rows(st: BCFWState, blocks: npt.NDArray[np.int64], before: list[SparseVector], g: float) -> None:
    rows, scales = st.scaled_blocks()
    for i, r0 in zip(blocks.tolist(), before):
        now = rows.row(i) * float(scales[i])
        rows.set_row(i, combine(1.0 - g, r0, g, now))
        scales[i] = 1.0


def _active_corners(store: CornerStore, blocks: npt.NDArray[np.int64]) -> list[tuple[int, list[Any]]]:
    """(block, [(key, loss, alpha, idx, val), ...]) of the corners with weight > 0 of each block."""
    out = []
    for i in blocks.tolist():
        kept = []
        for k in range(int(store.size[i])):
            a = float(store.alpha[i, k])
            if a > 0.0:
                start, nnz = int(store.start[i, k]), int(store.nnz[i, k])
                val = store.pval[start:start + nnz].copy() if store.pval.shape[0] else np.zeros(0)
                kept.append((store.key[i, k], float(store.loss[i, k]), a, store.pidx[start:start + nnz].copy(), val))
        out.append((i, kept))
    return out


def _blend_corners(store: CornerStore, before: list[tuple[int, list[Any]]], g: float) -> None:
    """alpha_i <- (1 - g) alpha_i^0 + g alpha_i, matching corners by content; a corner of alpha^0 that
    left the set during the round is added back."""
    for i, kept in before:
        store.alpha[i, :int(store.size[i])] *= g
        for key, L, a, idx, val in kept:
            k = cs_find(store.arrays, i, key, idx, val, L)
            if k < 0:
                while cs_room(store.arrays, i, idx.shape[0]) != 0:
                    store.make_room(i, idx.shape[0])
                k = cs_put(store.arrays, i, key, -1, idx, val, L, 0.0, 0)
            store.alpha[i, k] += (1.0 - g) * a


# ====================================================================== a problem whose shards load themselves
class SourceProblem:
    """The training problem of a sharded fit whose workers load their own shards from ``source``
    (`structfw.datasets.shard_source`): the model, lam and sizes, but no examples.

    What the sharded solver reads of a `Problem` -- n, d, lam, the fingerprint, the primal from a
    hinge sum -- is here; n, the shards' sizes and the fingerprint are known once the workers have
    loaded their shards (`opened`).  The test data of a trace's ``test_loss`` are decoded here, on
    ``executor``.

    Parameters
    ----------
    model : StructuredModel
    source : ShardSource
        ``len(source)`` shards, shard k loaded by ``source.load(k)`` on its worker.
    lam : float
    """

    def __init__(self, model: Any, source: Any, lam: float) -> None:
        from ..executor import SerialExecutor
        from .problem import _nonneg_set, check_lam

        self.model, self.source, self.lam = model, source, check_lam(lam)
        self.d = int(model.size_joint_feature)
        self.executor = SerialExecutor()
        self.approximate = bool(getattr(model, "approximate_oracle", False))
        if self.approximate and callable(getattr(model, "loss_augmented_decode_with_bound", None)):
            raise ValueError(f"a shard source with {type(model).__name__}, whose approximate oracle bounds its "
                             "maximum: certified gaps need every example in this process; fit(X, Y) instead")
        self.nonneg_idx, self.nonneg_mask = _nonneg_set(model, self.d)
        self.n: int = 0
        self.sizes: list[int] = []
        self._fingerprint: str | None = None

    certifies = False

    @property
    def constrained(self) -> bool:
        return self.nonneg_idx is not None

    def project(self, v: npt.ArrayLike, out: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
        """Pi(v), as `Problem.project`."""
        return project_onto(self.nonneg_idx, v, out)

    def opened(self, sizes: list[int], fingerprints: list[str]) -> None:
        """The shards' sizes and fingerprints, as their workers loaded them."""
        import hashlib

        self.sizes, self.n = list(sizes), int(sum(sizes))
        h = hashlib.blake2b(digest_size=16)
        h.update(f"source:{self.n}:{self.d}".encode())
        for f in fingerprints:
            h.update(f.encode())
        self._fingerprint = h.hexdigest()

    @property
    def fingerprint(self) -> str:
        """A digest of the shards' own fingerprints (`Problem.fingerprint` of each, on its worker)."""
        if self._fingerprint is None:
            raise RuntimeError("the shard source's fingerprint is known once its workers have loaded the shards")
        return self._fingerprint

    def primal(self, w: npt.NDArray[np.float64], hinge_sum: float) -> float:
        """P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w)   (eq. (1))."""
        return 0.5 * self.lam * float(np.dot(w, w)) + hinge_sum / self.n

    def with_lam(self, lam: float) -> SourceProblem:
        import copy

        from .problem import check_lam

        p = copy.copy(self)
        p.lam = check_lam(lam)
        return p


# ====================================================================== the solver
class ShardedContext(SolveContext):
    """A sharded solve's context: the shards (`Shard` on threads, `RemoteShard` on processes), the rule
    and round length, the threads' number, the plan's gap schedule; ``state`` is the `ShardedState`."""

    def __init__(self, problem: Problem, state: ShardedState, shards: list[Any], rule: str, m: int,
                 n_jobs: int, info: tuple[bool, int | None, bool]) -> None:
        super().__init__(problem, state)
        self.shards, self.rule, self.m, self.n_jobs = shards, rule, m, n_jobs
        self.uses_gaps, self.gap_refresh, self.check_oracle = info
        self.remote = bool(shards) and isinstance(shards[0], RemoteShard)
        self.passes_done = 0
        self.steps0 = state.steps  # block steps before this solve: its trace counts its own passes
        self.pool: ThreadPoolExecutor | None = None
        self.folder: Any = None  # the workers' checkpoint files (processes)
        #: on threads, the rewind to the last checkpoint after a shard's thread raised (`ThreadRecovery`)
        self.recovery = None if self.remote else ThreadRecovery()
        self.solve_owned = False  # `ShardedBCFW.solve` closes this context (its threads may outlive a pass)

    def map(self, name: str, *args: Any) -> list[Any]:
        """shard.name(*args) for every shard, in shard order (the results do not depend on which worker
        finishes first): on the pool's threads while `threads` holds them, or on the workers' processes
        (every call sent before the first reply is read)."""
        if self.remote:
            for s in self.shards:
                s.send(name, *args)
            return [s.recv() for s in self.shards]
        call = self._call if name in _IDEMPOTENT else getattr
        if self.pool is None:
            return [call(s, name)(*args) for s in self.shards]
        futures = [self.pool.submit(call(s, name), *args) for s in self.shards]
        wait(futures)  # every shard's thread done before a failure is raised: none still moves the state
        return [f.result() for f in futures]

    def _call(self, shard: Shard, name: str) -> Any:
        """shard.name, which on threads is called again (up to `ThreadRecovery.MAX_RETRIES` times) when it
        raises what `recoverable` admits: the calls of `_IDEMPOTENT` give the same answer and state again."""
        method = getattr(shard, name)

        def retried(*args: Any) -> Any:
            for attempt in range(ThreadRecovery.MAX_RETRIES + 1):
                try:
                    return method(*args)
                except Exception as exc:
                    if attempt == ThreadRecovery.MAX_RETRIES or not recoverable(exc):
                        raise
                    warnings.warn(f"a shard's thread raised {type(exc).__name__}: {exc}; its {name!r} runs "
                                  "again", RuntimeWarning, stacklevel=2)
            raise AssertionError("unreachable")

        return method if self.recovery is None else retried

    @contextmanager
    def threads(self) -> Iterator[None]:
        """The shards run on n_jobs threads inside: the solve's own (kept from pass to pass: a shard's thread
        keeps its caches, `ShardedBCFW.solve` ends them), or threads that end with the block."""
        if self.remote or self.n_jobs <= 1 or self.pool is not None:
            yield
            return
        if self.solve_owned:
            self.pool = ThreadPoolExecutor(max_workers=self.n_jobs, thread_name_prefix="structfw-shard")
            yield
            return
        with ThreadPoolExecutor(max_workers=self.n_jobs, thread_name_prefix="structfw-shard") as pool:
            self.pool = pool
            try:
                yield
            finally:
                self.pool = None

    def counters(self) -> tuple[int, int]:
        """(oracle calls, cache hits) of every shard in this solve."""
        counts = self.map("counters")
        return sum(c["oracle_calls"] for c in counts), sum(c["cache_hits"] for c in counts)

    def close(self) -> None:
        """End the threads or the workers (processes) and remove their checkpoint files."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.remote:
            for s in self.shards:
                s.close()
            self.remote, self.shards = False, []
        if self.folder is not None:
            self.folder.cleanup()
            self.folder = None
        if self.recovery is not None:
            self.recovery.close()

    def run(self, op: Any, *args: Any) -> Any:
        """op(self, *args), a step of the rounds: on threads through `ThreadRecovery.run`."""
        return op(self, *args) if self.recovery is None else self.recovery.run(self, op, *args)


#: what a shard's thread raises and is not recovered from: bad input or a broken model contract
#: (ValueError, TypeError: "the oracle is not a maximiser", a wrong shape) and an example that hung
#: (`structfw.executor.OracleTimeout`), which a rerun would meet again
_NOT_RECOVERED = (ValueError, TypeError, NotImplementedError, TimeoutError)
#: the shards' calls that a thread may simply make again: the gap pass, the estimates' refresh, the
#: averaged iterate's hinge sum, MP-BCFW's count of planes (the rounds are rerun by `ThreadRecovery`)
_IDEMPOTENT = frozenset(("gaps", "refresh", "hinge_sum", "planes"))


def recoverable(exc: BaseException) -> bool:
    """May a shard's thread be recovered from ``exc``?  An Exception that is not, and was not caused by,
    one of `_NOT_RECOVERED` (an oracle's error reaches the solver wrapped, naming its example)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _NOT_RECOVERED) or not isinstance(seen, Exception):
            return False
        seen = seen.__cause__
    return True


class ThreadRecovery:
    """A shard whose thread raises during a round, on threads: the fit goes back to the last checkpoint and
    runs again what it ran since, then the failed step, so it goes on as it would have without the fault.

    At checkpoints the whole `ShardedState` (every shard's state and the global numbers) is written to a
    private pickle in a temporary folder -- on disk, as the workers of processes write theirs, so that a
    thread fit's memory does not double; at the first and then spaced by what a save costs (`SPACING`)
    -- and the steps of the rounds since (`one_round`,
    `run_compiled_rounds`, the end of a pass) are logged with their arguments.  The steps are determined by
    the state and the seeds (the round's w, the shards' generators), so a rerun gives the same iterates.
    A step that fails ``MAX_RETRIES + 1`` times in a row raises its exception; what `recoverable` refuses
    (bad input, a broken model, an example that hung) is raised at once."""

    MAX_RETRIES = 3
    #: a checkpoint saves the state when the time since the last save is this many times what that save
    #: took: the saves then cost at most about 1/SPACING of the fit (on OCR at every checkpoint they
    #: took 0.5-0.8x the fit's time), and a fault reruns at most about SPACING saves' time of rounds
    SPACING = 20.0

    #: a fresh fit saves its state first at the first checkpoint this many seconds after its start: a
    #: fault before then reruns it from the seeds (a save of OCR's 45 MB of state took 0.1-0.4 s)
    FIRST_SAVE = 5.0

    def __init__(self) -> None:
        self.folder: Any = None
        self.log: list[tuple[Any, tuple[Any, ...]]] = []
        self.marked: int | None = None  # the round of the saved state (0 for the origin)
        self.due = 0.0  # time.monotonic() from which the next checkpoint saves
        #: a fresh fit's (solver, problem, entropy, rule, sub-problems): its first state again, unsaved
        self.origin: tuple[Any, ...] | None = None

    def checkpoint(self, ctx: ShardedContext) -> None:
        """At a checkpoint: the state saved (`mark`) if the last save is long enough ago."""
        if self.marked is None and self.origin is not None:
            self.marked, self.due = 0, time.monotonic() + self.FIRST_SAVE
        elif time.monotonic() >= self.due:
            self.mark(ctx)

    def mark(self, ctx: ShardedContext) -> None:
        """The state now is what a fault rewinds to: written to the folder, the log emptied."""
        import tempfile

        start = time.monotonic()
        if self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix="structfw-threads-")
        save_private(os.path.join(self.folder.name, "state.pkl"), ctx.state)
        self.log, self.marked = [], ctx.state.rounds
        now = time.monotonic()
        self.due = now + self.SPACING * (now - start)

    def run(self, ctx: ShardedContext, op: Any, *args: Any) -> Any:
        if self.marked is None:
            self.checkpoint(ctx)
        failures = 0
        while True:
            try:
                if failures:
                    self._rewind(ctx)
                out = op(ctx, *args)
                break
            except Exception as exc:
                if not recoverable(exc):
                    raise
                failures += 1
                if failures > self.MAX_RETRIES:
                    exc.add_note(f"structfw: a shard's thread raised this {failures} times in a row, each time "
                                 f"after the fit went back to round {self.marked}; giving up")
                    raise
                warnings.warn(f"a shard's thread raised {type(exc).__name__}: {exc}; the fit goes back to its "
                              f"last checkpoint (round {self.marked}) and runs the {len(self.log)} steps "
                              "since again", RuntimeWarning, stacklevel=2)
        self.log.append((op, args))
        return out

    def _rewind(self, ctx: ShardedContext) -> None:
        """Every shard and the global numbers as saved, then the logged steps run again."""
        if self.folder is None:  # not saved yet: a fresh fit's first state, from its seeds
            solver, problem, entropy, rule, subs = cast(tuple[Any, ...], self.origin)
            saved = solver.new_state(problem, entropy, rule, subs=subs)
            saved.combine = rule
        else:
            saved = load_private(os.path.join(self.folder.name, "state.pkl"))
        ctx.state.__dict__.update(saved.__dict__)
        for sh, s in zip(ctx.shards, ctx.state.states):
            counts, plan = sh.ctx.counters, sh.ctx.plan
            sh.st, sh.ctx = s, BlockContext(sh.sub, s, plan)
            sh.ctx.counters = counts  # the failed attempt's oracle calls were made: they count
            sh.pending = sh.gaps_e = None
        for op, args in self.log:
            op(ctx, *args)

    def close(self) -> None:
        if self.folder is not None:
            self.folder.cleanup()
            self.folder = None


class ShardedBCFW(Solver):
    """BCFW on K shards of the training set, combined in rounds (docs/design.md, "Sharded training").

    Every option of `BCFW` that is local to a block works in the shards' local steps: FW, pairwise and
    away steps, uniform, permuted and gap sampling within a shard, the cache, either step size, every
    storage of the w_i; ``averaging`` averages the rounds' iterates (weight 2/(t+1) for round t:
    the serial engine's weighted average with a round in place of a block step).  MP-BCFW
    (``multi_plane``) runs its outer iterations over the shards: an exact sharded pass (rounds with the
    oracle), then approximate sharded passes (rounds whose steps take the working sets' corners) while the
    slope rule holds on the global dual and work counter (`mp_outer_iteration`); with
    ``approx_rule="work"`` only, and without ``averaging``.  Not on shards: minibatches, positivity
    constraints (ValueError naming both).

    Parameters
    ----------
    shards : int
        K, the number of shards (example i in shard i mod K).
    combine : {None, "linesearch", "average", "add"}
        The exact line search of the dual along the round's summed change, the average (gamma = 1/K)
        or CoCoA+ adding (gamma = 1 with the local quadratic term scaled by sigma' = K; Ma et al. 2015).
        Each keeps the dual monotone.  None (default): the line search for rounds of at most a quarter
        of a shard (threads), adding for longer ones (processes): the fewest passes in the measurements
        of `resolve_rule`.
    round_length : int or None
        Block steps per shard between two combinations; None: `default_round_length`.
    executor : {"thread", "process", "ray"}
        Where the shards run: threads, a worker process a shard, or a Ray actor a shard (one CPU of
        the cluster each).  A worker is sent its shard once, or, for a `SourceProblem`, loads it itself.
    n_jobs : int or None
        Threads running the shards (None: one per shard).  Results do not depend on it.
    state_dir : str, path-like or None
        With workers: the folder where worker k writes its shard's state, ``shard-<k>.npz`` (the
        model files' pickle-free format, with the fit's seed and round in its header), at every
        checkpoint and at the end of the fit.  A fit from a shard source keeps its shards' states
        there only (the caller never holds them), so it is continued -- after ``save(path,
        state=True)`` and `structfw.load`, with ``warm_start=True`` -- from these files, checked
        against the caller's state (same fit, same round, the same shard's data).  A fit on
        in-memory data gathers the states into ``state_`` as well.  None: a private temporary
        folder, for restarts of workers that die.
    step_size, sampling, step, cache, cache_F, cache_nu, cache_size, averaging, gap_refresh, block_storage, \
max_dense_bytes, check_oracle, multi_plane, max_planes, max_approx_passes, plane_timeout, approx_rule, \
oracle_work, minibatch, asynchronous, oracle_quality
        As for `BCFW` (the engine's options, in each shard's local passes; the combinations
        shards cannot run are refused by name).
    """

    name = "sharded-bcfw"
    PARAMS: tuple[Param, ...] = ENGINE_PARAMS + SHARD_PARAMS

    # the options the regularisation path (structfw.path) reads, as `BCFW` declares its own
    shards: int
    executor: str
    step: str
    averaging: str | None
    block_storage: str
    max_dense_bytes: int

    def __init__(self, shards: int = 2, combine: str | None = None, round_length: int | None = None,
                 executor: str = "thread", n_jobs: int | None = None, state_dir: str | None = None,
                 step_size: str = "linesearch",
                 sampling: str = "uniform", step: str = "fw", cache: bool = False, cache_F: float = 0.25,
                 cache_nu: float = 0.01, cache_size: int = 50, averaging: str | None = None,
                 gap_refresh: int | None = 10, block_storage: str = "auto", max_dense_bytes: int = 2 * 1024 ** 3,
                 check_oracle: bool = True, multi_plane: bool = False, max_planes: int = 1000,
                 max_approx_passes: int = 1000, plane_timeout: int = 10, approx_rule: str = "work",
                 oracle_work: float = 10.0, minibatch: int = 1, asynchronous: bool = False,
                 oracle_quality: float = 1.0) -> None:
        self._init_params(locals())
        check_combination(self)
        check_shards(self)

    @classmethod
    def from_engine(cls, engine: Solver, shards: int, **options: Any) -> ShardedBCFW:
        """The sharded engine with the options of a configured `BCFW` (``StructuredSVM(shards=K)``)."""
        if type(engine) not in (BCFW, MPBCFW):  # MPBCFW: the engine's preset with multi_plane=True
            raise ValueError(f"shards={shards} runs the block-coordinate engine: give solver='bcfw' or a BCFW "
                             f"object; got solver {getattr(engine, 'name', engine)!r}")
        return cls(shards=shards, **options, **engine.get_params())

    def validate_params(self) -> None:
        super().validate_params()
        check_combination(self)
        check_shards(self)

    @property
    def label(self) -> str:
        return f"{engine_label(self)}-{self.shards}shards" + (f"-{self.combine}" if self.combine else "")

    def engine(self) -> BCFW:
        """The engine of the shards' local steps: these options, without averaging (rounds average)."""
        return BCFW(**self.engine_params())

    def engine_params(self) -> dict[str, Any]:
        params = {p.name: getattr(self, p.name) for p in ENGINE_PARAMS}
        params["averaging"] = None
        return params

    # ------------------------------------------------------------- state
    def solve(self, problem: Problem, stop: StopRule, state: object | None = None, rng: Any = None,
              monitor: Monitor | None = None) -> SolveResult:
        """`Solver.solve`, whose threads and workers end with it on every exit path.  BLAS runs on one
        thread meanwhile: its idle threads spin for milliseconds after each call (the checkpoints' products)
        on the cores the shards need -- on OCR the pass after each checkpoint took 4-5x the others."""
        token = _OPEN.set([])
        try:
            with _one_blas_thread():
                return super().solve(problem, stop, state, rng, monitor)
        finally:
            for ctx in _OPEN.get():
                ctx.close()
            _OPEN.reset(token)

    def init_state(self, problem: Problem, state: object | None, rng: Any) -> ShardedContext:
        """The shards' context: their threads' sub-problems, or their workers started, each with its
        examples (sent once, or loaded by the worker from a `SourceProblem`'s source) and its state."""
        hosts: list[RemoteShard] = []
        try:
            return self._open(problem, state, rng, hosts)
        except BaseException:
            for h in hosts:
                h.close()
            raise

    def _open(self, problem: Problem, state: object | None, rng: Any, hosts: list[RemoteShard]) -> ShardedContext:
        source = isinstance(problem, SourceProblem)
        if source and self.executor == "thread":
            raise ValueError("a shard source with executor='thread': threads share this process's memory, which "
                             "would then hold every shard; use executor='process' or 'ray' (each worker loads its "
                             "own shard), or load the data and fit(X, Y) on threads")
        if not source:
            check_shards(self, problem)
        n_jobs = min(self.n_jobs or self.shards, self.shards)
        folder = None
        if self.executor == "thread":
            sizes = [len(i) for i in shard_indices(problem.n, self.shards)]
            subs = sub_problems(problem, self.shards, 1.0)
        else:
            import tempfile

            folder = tempfile.TemporaryDirectory(prefix="structfw-shards-")
            files = folder.name if self.state_dir is None else _state_folder(self.state_dir)
            hosts.extend(start_hosts(self, problem, files, persistent=self.state_dir is not None))
            sizes, subs = [h.n_k for h in hosts], []
            if source:
                problem.opened(sizes, [h.fingerprint for h in hosts])
                check_shards(self, problem)
        try:
            m, rule = self._round_rule(sizes, subs)
            sigma = float(self.shards) if rule == "add" else 1.0
            subs = [sub.with_lam(problem.lam * problem.n / (sub.n * sigma)) for sub in subs]
            st = _continue_sharded(continue_or_restart(state, ShardedState, problem), self, problem, sigma, sizes)
            continued = st is not None
            if st is None:
                st = self.new_state(problem, rng, rule, states=bool(subs), subs=subs)
            st.combine = rule
            if not subs:
                if continued and any(s is None for s in st.states):
                    _resume_from_files(st, hosts)
                ctx = _remote_context(self, problem, st, rule, m, n_jobs, hosts)
                ctx.folder, folder = folder, None
            else:
                shards = [Shard(sub, s, self.engine(), problem.n, st.sigma) for sub, s in zip(subs, st.states)]
                plan = shards[0].ctx.plan
                ctx = ShardedContext(problem, st, shards, rule, m, n_jobs, (plan.uses_gaps, plan.gap_refresh,
                                                                             plan.check_oracle))
                if not continued and ctx.recovery is not None:  # a fault before the first save: from the seeds
                    ctx.recovery.origin = (self, problem, st.entropy, rule, [sh.sub for sh in shards])
            if continued:
                check_block_sums(ctx)
        finally:
            if folder is not None:
                folder.cleanup()
        opened = _OPEN.get(None)
        if opened is not None:  # `solve` ends its workers
            opened.append(ctx)
            ctx.solve_owned = True
        return ctx

    def _round_rule(self, sizes: list[int], subs: list[Problem]) -> tuple[int, str]:
        """(m, rule): the round length and the combination of a fit on shards of these sizes, by the route
        its rounds take (``subs``: the threads' sub-problems; [] on workers)."""
        n_jobs = min(self.n_jobs or self.shards, self.shards)
        route = "process" if not subs else ("compiled" if n_jobs >= self.shards and self.averaging is None
                                             and _plain_compiled(self.engine().plan(subs[0])) else "thread")
        m = self.round_length or default_round_length(max(sizes), route)
        return m, resolve_rule(self.combine, m, min(sizes))

    def state_at_corners(self, problem: Problem, labellings: Sequence[Any], rng: Any = None) -> ShardedState:
        """The dual point alpha_i(y'_i) = 1 for the given labelling y'_i of every block, on shards.

        The state `new_state` makes for a fit of ``problem`` with these options (the same shards
        i mod K, sigma' of the rule `_open` resolves, shard k's generator from the same seed), with
        each shard's blocks placed at their labellings by the engine's `BCFW.state_at_corners` on the
        shard's sub-problem (lam_k = lam n / (n_k sigma')); then w = sum_k w_k / sigma' and
        l = sum_k (n_k / n) l_k (the identities of `state_file._check_sharded`).  With y'_i = y_i this
        is the fresh state (w = 0, l = 0); the regularisation path starts from the oracle's
        labellings at w = 0 (Osokin et al. 2016, Sec. 4)."""
        if isinstance(problem, SourceProblem):
            raise ValueError("state_at_corners needs the examples in this process: a shard source's workers "
                             "hold them; load the data and give (X, Y)")
        check_shards(self, problem)
        if len(labellings) != problem.n:
            raise ValueError(f"state_at_corners: {len(labellings)} labellings for {problem.n} examples")
        idx = shard_indices(problem.n, self.shards)
        subs = sub_problems(problem, self.shards, 1.0)
        _, rule = self._round_rule([len(i) for i in idx], subs if self.executor == "thread" else [])
        st = self.new_state(problem, rng, rule, states=False)
        engine = self.engine()
        st.states = [engine.state_at_corners(sub.with_lam(problem.lam * problem.n / (sub.n * st.sigma)),
                                             [labellings[i] for i in ix.tolist()],
                                             rng=np.random.default_rng(st.seed(k)))
                     for k, (sub, ix) in enumerate(zip(subs, idx))]
        # a shard's v is its blocks' sum
        set_global_point(st, problem, np.sum([s.v for s in st.states], axis=0) / st.sigma)
        st.ell = float(sum(s.n * s.ell for s in st.states)) / problem.n
        for s in st.states:  # each shard's copy of the global v and w (a round sets them so at its start)
            s.v[:] = st.v
            if s.v is not s.w:
                s.w[:] = st.w
        return st

    def new_state(self, problem: Problem, rng: Any, rule: str = "linesearch", states: bool = True,
                  subs: list[Problem] | None = None) -> ShardedState:
        """A fresh sharded state at alpha = e_{y_i} (w = 0); shard k's generator is seeded from the fit's
        seed and k, so a round depends on K and the seed only.  Without ``states`` the shards' states are
        made by their workers from the seeds (`ShardedState.seed`)."""
        sigma = float(self.shards) if rule == "add" else 1.0
        st = ShardedState(problem, self.shards, sigma, rule, [None] * self.shards, self.averaging,
                          entropy=_entropy(rng))
        if states:
            engine = self.engine()
            subs = subs or sub_problems(problem, self.shards, sigma)
            st.states = [engine.new_state(sub, np.random.default_rng(st.seed(k))) for k, sub in enumerate(subs)]
        return st

    # ------------------------------------------------------------- skeleton
    def run_pass(self, ctx: ShardedContext, flag: InterruptFlag) -> None:
        """Rounds until the shards have made n block steps (one pass), or Ctrl-C (after the round in flight).
        With ``multi_plane`` one call is the approximate sharded passes of the last outer iteration and the
        next exact one (`mp_outer_iteration`), so that a checkpoint reads the iterate after an exact pass."""
        with ctx.threads():
            if self.multi_plane:
                mp_outer_iteration(ctx, flag, self.max_approx_passes, self.oracle_work)
            else:
                sharded_pass(ctx, flag)

    def checkpoint_due(self, ctx: ShardedContext, since_check: int, done: int, stop: StopRule,
                       monitor: Monitor) -> bool:
        return _refresh_due(ctx) or super().checkpoint_due(ctx, since_check, done, stop, monitor)

    def checkpoint(self, ctx: ShardedContext, monitor: Monitor, initial: bool, monitoring_only: bool = False) -> float:
        """The duality gap at the round's w, summed over the shards' block gaps (each shard its own);
        with averaging the gap of the rounds' average, P(w_bar) - D(alpha_bar).  On processes each worker
        then writes its state to its checkpoint file (a worker that dies restarts from there)."""
        st = ctx.state
        refresh = not monitoring_only and ctx.uses_gaps and (st.needs_refresh if initial else _refresh_due(ctx))
        with monitor.monitoring(), ctx.threads():
            primal, gap = shard_gap(ctx, validate=ctx.check_oracle)
            if refresh:
                ctx.run(take_gaps, [sh.gaps_e for sh in ctx.shards] if ctx.recovery else None, gap)
            else:
                monitor.monitor_calls += ctx.problem.n
            dual = st.dual()
            w_rep = st.w
            if st.avg is not None and st.avg[1] > 0:
                w_rep, lbar = ctx.problem.project(st.avg[2]), st.avg[3]
                dual = -0.5 * st.lam * float(np.dot(w_rep, w_rep)) + lbar
                hinge = sum(ctx.map("hinge_sum", w_rep))
                monitor.monitor_calls += ctx.problem.n
                primal = ctx.problem.primal(w_rep, hinge)
                gap = primal - dual
            _record(ctx, monitor, w_rep, (primal, dual, gap), self.multi_plane)
            if ctx.remote and not monitoring_only:
                _write_shard_states(ctx)
            elif ctx.recovery is not None and not monitoring_only:
                ctx.recovery.checkpoint(ctx)
        return gap

    def result(self, ctx: ShardedContext, monitor: Monitor, stopped: str) -> SolveResult:
        """`Solver.result`, with the shards' states gathered from their workers -- except from workers that
        loaded their own shards (a `SourceProblem`): this process then holds no part of the data or of
        the dual state, and the states end with the workers (a warm start starts afresh).  On workers the
        trace's ``meta["worker_memory"]`` holds each shard's dict(baseline=, peak=) in bytes (`ShardHost`'s
        "memory": its resident set at start and its peak since; None off Linux), read while they live."""
        if ctx.remote:
            if self.state_dir is not None and ctx.state.files_round != ctx.state.rounds:
                _write_shard_states(ctx)  # the files then hold the state this fit ends with
            monitor.trace.meta["worker_memory"] = ctx.map("memory")
        if ctx.remote and not isinstance(ctx.problem, SourceProblem):
            ctx.state.states = ctx.map("state")
        return super().result(ctx, monitor, stopped)

    def result_w(self, ctx: ShardedContext) -> npt.NDArray[np.float64]:
        st = ctx.state
        if st.avg is not None and st.avg[1] > 0:
            return ctx.problem.project(st.avg[2])
        return st.w.copy()


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS (and OpenMP) limited to one thread inside, when threadpoolctl (scikit-learn's) is there."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn installs it
        yield
        return
    with threadpool_limits(limits=1):
        yield


#: the contexts opened by the solves of this thread (their workers end with the solve)
_OPEN: contextvars.ContextVar[list[ShardedContext]] = contextvars.ContextVar("structfw_sharded_open")


def start_hosts(solver: ShardedBCFW, problem: Problem, folder: str, persistent: bool = False) -> list[RemoteShard]:
    """A worker a shard (a process, or a Ray actor), each sent its examples once -- or, for a
    `SourceProblem`, the source, from which it loads its own shard (the caller never holds the data);
    each writes its state files into ``folder`` (``persistent``: the solver's ``state_dir``)."""
    kind = solver.executor
    if kind == "ray":
        _check_ray_room(solver.shards)
    hosts: list[RemoteShard] = []
    try:
        if isinstance(problem, SourceProblem):
            for k in range(solver.shards):
                hosts.append(RemoteShard(k, kind, (problem.model, k, problem.source, None, None), folder,
                                         persistent))
        else:
            for k, idx in enumerate(shard_indices(problem.n, solver.shards)):
                X = [problem.X[i] for i in idx.tolist()]
                Y = [problem.Y[i] for i in idx.tolist()]
                hosts.append(RemoteShard(k, kind, (problem.model, k, None, X, Y), folder, persistent))
    except BaseException:
        for h in hosts:
            h.close()
        raise
    return hosts


def _state_folder(state_dir: Any) -> str:
    """``state_dir`` made if missing; a ValueError naming it when it cannot be a folder."""
    path = os.fspath(state_dir)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"state_dir={path!r}: cannot make or use the folder ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK):
        raise ValueError(f"state_dir={path!r}: the folder is not writable")
    return path


def shard_state_path(folder: str, k: int) -> str:
    """Shard k's state file in a ``state_dir``."""
    return os.path.join(folder, f"shard-{k}.npz")


def _write_shard_states(ctx: ShardedContext) -> None:
    """Every worker writes its state to its file (the calls before need no replay any more); into a
    ``state_dir`` with the fit's seed and round, which a continued fit checks."""
    st = ctx.state
    stamp = _fit_stamp(st, st.rounds)
    for s in ctx.shards:
        s.checkpoint(stamp)
    if ctx.shards and ctx.shards[0].persistent:
        st.files_round = st.rounds


def _resume_from_files(st: ShardedState, hosts: list[RemoteShard]) -> None:
    """Each worker starts from its shard's file in the ``state_dir``, which must be of this fit (the
    seed's entropy) at the round the caller's state ends with (`ShardHost` checks the header and the
    state; `check_block_sums` then the sum of the shards' blocks against the caller's w)."""
    for h in hosts:
        h.checkpoint_file = (shard_state_path(h.folder, h.k), dict(_fit_stamp(st, st.files_round), shard=h.k))


def _fit_stamp(st: ShardedState, rounds: int | None) -> dict[str, Any]:
    """The header fields a shard's state file carries of its fit: K, the round it was written at, the
    seed's entropy (`_write_shard_states` writes them, `_resume_from_files` expects them)."""
    return dict(shards=st.K, round=rounds, entropy=str(st.entropy))


def _check_ray_room(K: int) -> None:
    """A shard's actor takes one CPU of the cluster for the whole fit: K of them must be free (an actor
    that cannot be placed would wait forever)."""
    from ..executor_ray import _ray, connect

    import time

    connect()
    ray = _ray()
    deadline = time.monotonic() + 10.0  # a cluster just started reports its CPUs after a moment
    while (free := int(ray.available_resources().get("CPU", 0))) < K and time.monotonic() < deadline:
        time.sleep(0.2)
    if free < K:
        raise ValueError(f"shards={K} with executor='ray': each shard's actor takes one CPU, and the Ray cluster "
                         f"has {free} free; give shards <= {free} or a larger cluster")


def _remote_context(solver: ShardedBCFW, problem: Problem, st: ShardedState, rule: str, m: int,
                    n_jobs: int, hosts: list[RemoteShard]) -> ShardedContext:
    """The workers' shards set up: each its lam_k = lam n / (n_k sigma') and its state (or seed)."""
    for k, h in enumerate(hosts):
        lam_k = problem.lam * problem.n / (h.n_k * st.sigma)
        h.setup((lam_k, solver.engine_params(), st.states[k], st.seed(k), problem.n, st.sigma))
    if any(h.info[3] for h in hosts):  # a worker gave its state from a file the fit's sampler
        st.needs_refresh = True
    return ShardedContext(problem, st, list(hosts), rule, m, n_jobs, hosts[0].info[:3])


def sharded_solver(solver: Solver, shards: int, executor: str, n_jobs: int | None,
                   oracle_timeout: float | None) -> ShardedBCFW:
    """The solver of ``StructuredSVM(shards=K, executor=..., n_jobs=...)``: a `BCFW`'s options on K shards,
    or a given `ShardedBCFW` with the same K (ValueError naming both otherwise)."""
    if executor.startswith("ray:"):  # a cluster's address: join it now, the shards' actors start there
        from ..executor_ray import connect

        connect(executor[4:])
        executor = "ray"
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r} with shards={shards}: shards run on 'thread', 'process' or 'ray' "
                         "workers")
    if oracle_timeout is not None:
        raise ValueError(f"oracle_timeout={oracle_timeout!r} with shards={shards}: a shard's compiled steps cannot "
                         "be pre-empted; use oracle_timeout=None with shards")
    if n_jobs is not None and n_jobs < 1:
        raise ValueError(f"n_jobs={n_jobs} with shards={shards}: give the number of threads (>= 1) or None (one a "
                         "shard)")
    if isinstance(solver, ShardedBCFW):
        if solver.shards != shards:
            raise ValueError(f"shards={shards} and solver=ShardedBCFW(shards={solver.shards}) disagree: give one")
        return solver.set_params(executor=executor, n_jobs=n_jobs) if n_jobs is not None else solver
    return ShardedBCFW.from_engine(solver, shards, executor=executor, n_jobs=n_jobs)


def _entropy(rng: Any) -> Any:
    """Entropy for the shards' seed sequence: the fit's int seed, or drawn from its generator."""
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2 ** 63))
    return rng


def sub_problems(problem: Problem, K: int, sigma: float) -> list[Problem]:
    """Each shard's problem in the engine's units: its examples, lam_k = lam n / (n_k sigma')."""
    out = []
    for idx in shard_indices(problem.n, K):
        X = [problem.X[i] for i in idx.tolist()]
        Y = [problem.Y[i] for i in idx.tolist()]
        out.append(Problem(problem.model, X, Y, problem.lam * problem.n / (len(idx) * sigma), validated=True))
    return out


def _continue_sharded(st: ShardedState | None, solver: ShardedBCFW, problem: Problem,
                      sigma: float, sizes: list[int]) -> ShardedState | None:
    """A previous sharded state if it can continue with these options (the same K and sigma'), rescaled
    to a new lam; None (with a warning) otherwise."""
    if st is None:
        return None
    files = solver.state_dir is not None and st.files_round is not None and solver.executor != "thread"
    if st.K == solver.shards and st.sigma == sigma and any(s is None for s in st.states) and not files:
        warnings.warn("warm start: the previous sharded fit's workers loaded their own shards and kept their "
                      "states, which no state_dir holds (ShardedBCFW(state_dir=...) keeps them in files); starting "
                      "afresh", RuntimeWarning, stacklevel=4)
        return None
    if st.K != solver.shards or st.sigma != sigma:
        warnings.warn(f"warm start: the previous state has {st.K} shards with sigma'={st.sigma:g}; this fit asks "
                      f"for {solver.shards} with sigma'={sigma:g}; starting afresh", RuntimeWarning, stacklevel=4)
        return None
    if st.lam != problem.lam:
        r = st.lam / problem.lam
        for s, n_k in zip(st.states, sizes):
            if s is not None:  # (a worker rescales the state it reads from its file)
                s.rescale_lam(problem.lam * problem.n / (n_k * st.sigma))
        st.v *= r
        if st.v is not st.w:  # Pi(r v) = r Pi(v) for r > 0
            st.w *= r
        if st.avg is not None:
            st.avg = (st.avg[0], st.avg[1], st.avg[2] * r, st.avg[3])
        st.lam, st.needs_refresh = problem.lam, True
        st.mp_exact_cost = 0.0  # the dual the slope rule measures from was at the old lam
    if (st.avg[0] if st.avg is not None else None) != solver.averaging:
        st.avg = None if solver.averaging is None else (solver.averaging, 0, np.zeros(st.d), 0.0)
    for s in st.states:
        if s is not None and renew_sampler(s, solver.sampling):
            st.needs_refresh = True
    return st


def renew_sampler(s: BCFWState, sampling: str) -> bool:
    """A fresh sampler of kind ``sampling`` for a continued shard state whose sampler is of another
    kind (or none); True if replaced (its gap estimates are then stale)."""
    if s.sampler is not None and s.sampler.kind == sampling:
        return False
    s.sampler = BlockSampler(sampling, s.n, s.rng)
    return True


def check_block_sums(ctx: ShardedContext) -> None:
    """A continued state's w is the sum of the shards' blocks (w = sum_k sum_{i in k} w_i), read from
    their storages and data: the one identity of a state saved in parts (the model file's global w, the
    shards' blocks in their own files, factored label weights that need the positions) that no part
    can check alone."""
    sums = ctx.map("block_sum")
    total = np.sum(sums, axis=0)
    scale = 1.0 + float(sum(np.abs(b).sum() for b in sums))
    err = float(np.max(np.abs(total - ctx.state.v), initial=0.0))
    if not err <= 1e-9 * scale:
        raise ValueError(f"warm start: the sharded state's v is not the sum of its shards' blocks (off by {err:.3g}): "
                         "the saved state or a shard's state file was damaged, edited or belongs to another fit "
                         "(fit with warm_start=False to start afresh)")


def _refresh_due(ctx: ShardedContext) -> bool:
    return ctx.uses_gaps and ctx.gap_refresh is not None and ctx.state.passes % ctx.gap_refresh == 0


def _end_pass(ctx: ShardedContext) -> None:
    ctx.state.passes += 1


def sharded_pass(ctx: ShardedContext, flag: InterruptFlag, mp: tuple[int, bool] | None = None) -> bool:
    """Rounds until the shards have made n block steps (one pass) or Ctrl-C (after the round in flight);
    True when the pass is complete.  ``mp`` = (outer iteration, approximate): a pass of MP-BCFW, whose
    rounds carry it (`Shard.round`); an approximate pass is not counted in ``passes``."""
    st = ctx.state
    target = st.steps + ctx.problem.n
    compiled = mp is None and not ctx.remote and compiled_rounds_serve(ctx)
    while st.steps < target and not flag.requested:
        if compiled:
            rounds = -(-(target - st.steps) // (ctx.m * st.K))
            ctx.run(run_compiled_rounds, min(rounds, max(1, ROUNDS_CALL_STEPS // ctx.m)), ctx.rule)
        elif mp is None:
            ctx.run(one_round, ctx.rule)
        else:
            ctx.run(one_round, ctx.rule, mp)
    if st.steps < target:
        return False
    if mp is None or not mp[1]:
        ctx.run(_end_pass)
        ctx.passes_done += 1
    return True


# ---------------------------------------------------------------------- MP-BCFW on shards
# Shah et al. (2015), Alg. 3 with the slope rule of Sec. 3.4 (approx_rule="work"), decided by the caller
# over the global dual and the global work counter, so that every shard runs the same kind of pass.  The
# caller's steps that change the state go through ``ctx.run`` (`ThreadRecovery` logs and reruns them),
# each deterministic in the state and its arguments.
def mp_outer_iteration(ctx: ShardedContext, flag: InterruptFlag, max_approx: int, oracle_work: float) -> None:
    """The approximate sharded passes that follow the last exact pass, then the next exact pass
    (Shah et al. 2015, Alg. 3 lines 6 and 5; `structfw.solvers.passes.mp_outer_iteration` serially).

    A call ends after an exact pass, so a checkpoint reads the iterate just after it.  The exact pass's
    dual and work are kept in the state, so that the slope rule of the approximate passes after it
    measures from the same point in a warm start."""
    st = ctx.state
    done = mp_approx_passes(ctx, flag, max_approx) if st.mp_exact_cost > 0.0 else 0
    ctx.run(_mp_approx_done, done)
    if flag.requested:
        return
    # an exact pass costs n oracle calls, each worth oracle_work plane dot products, and n steps
    work = ctx.problem.n * (oracle_work + 1.0)
    D0 = st.dual()
    ctx.run(_mp_next_iteration, work)
    if sharded_pass(ctx, flag, (st.mp_iter, False)):
        ctx.run(_mp_exact_done, D0, max(work, 1e-300))  # > 0: its approximate passes are due


def mp_approx_passes(ctx: ShardedContext, flag: InterruptFlag, max_approx: int) -> int:
    """Approximate sharded passes while the last one raised the global dual faster per unit of work than
    the outer iteration so far, its exact pass included (Sec. 3.4); at most ``max_approx`` (M).  Returns
    how many ran."""
    st = ctx.state
    D0, cost0 = st.mp_exact_dual, st.mp_exact_cost
    ctx.run(_mp_exact_done, D0, 0.0)  # not due again, whatever happens below
    t_start = t_prev = st.mp_work
    D_prev = st.dual()
    done = 0
    while done < max_approx and not flag.requested:
        ctx.run(_mp_add_work, mp_pass_work(ctx))
        sharded_pass(ctx, flag, (st.mp_iter, True))
        done += 1
        t, D = st.mp_work, st.dual()
        if slope_rule_stops((D_prev, t_prev), (D, t), (D0, cost0, t_start)):
            break
        t_prev, D_prev = t, D
    return done


def mp_pass_work(ctx: ShardedContext) -> float:
    """An approximate pass's work, as `structfw.solvers.passes.mp_pass` counts it: a dot product per plane
    of every working set (over all shards, at the pass's start) and n steps."""
    return float(sum(ctx.map("planes"))) + ctx.problem.n


def _mp_add_work(ctx: ShardedContext, work: float) -> None:
    ctx.state.mp_work += work


def _mp_next_iteration(ctx: ShardedContext, work: float) -> None:
    """An outer iteration starts: its exact pass's planes are stamped with it, its work counted."""
    ctx.state.mp_iter += 1
    ctx.state.mp_work += work


def _mp_exact_done(ctx: ShardedContext, dual: float, cost: float) -> None:
    """The dual before the last exact pass and its work (cost 0: no approximate passes are due)."""
    ctx.state.mp_exact_dual, ctx.state.mp_exact_cost = dual, cost


def _mp_approx_done(ctx: ShardedContext, done: int) -> None:
    ctx.state.mp_approx_passes = done


def take_gaps(ctx: ShardedContext, gaps: list[Any] | None, full_gap: float) -> None:
    """The last gap pass's block gaps become the shards' estimates (`Shard.refresh`); ``gaps``: each
    thread shard's gap pass, set again first (a `ThreadRecovery` rerun comes after a rewind)."""
    if gaps is not None:
        for sh, g in zip(ctx.shards, gaps):
            sh.gaps_e = g
    ctx.map("refresh", full_gap)
    ctx.state.full_gap, ctx.state.needs_refresh = full_gap, False


def one_round(ctx: ShardedContext, rule: str, mp: tuple[int, bool] | None = None) -> float:
    """One round: the shards' local steps from w, the combination, every shard's blocks scaled by its
    gamma.  ``mp``: MP-BCFW's (outer iteration, approximate) of the pass it belongs to.  Returns gamma."""
    st, m = ctx.state, ctx.m
    changes = ctx.map("round", st.v, m, rule != "add", *(() if mp is None else (mp,)))
    Us = np.array([c[0] for c in changes])
    dls = np.array([c[1] for c in changes])
    if st.v is st.w:
        gamma, U, dl = combine_changes(Us, dls, st.w, st.lam, _RULE_CODES[rule], st.K)
    else:
        gamma, U, dl = projected_combination(ctx.problem, st, rule, Us, dls)
    if gamma != 1.0:
        ctx.map("combine", gamma)
    elif not ctx.remote:  # a worker's snapshot is replaced by its next round's
        for s in ctx.shards:
            s.pending = None
    st.v += gamma * U
    if st.v is not st.w:
        ctx.problem.project(st.v, out=st.w)
    st.ell += gamma * dl
    st.rounds += 1
    st.steps += m * st.K
    st.last_gamma = gamma
    st.average_round()
    return gamma


def combination_gamma(rule: str, lam: float, w: npt.NDArray[np.float64], U: npt.NDArray[np.float64], dl: float,
                      K: int) -> float:
    """gamma of a round whose summed change is (U, dl) (`combine_changes`): 1 (add), 1/K (average), or the exact
    line search of D(alpha + gamma dalpha) = -lam/2 ||w + gamma U||^2 + l + gamma dl on [0, 1]:
    gamma* = clip((dl - lam ⟨w, U⟩) / (lam ||U||^2), 0, 1)."""
    return float(combine_changes(np.atleast_2d(U), np.array([dl]), w, lam, _RULE_CODES[rule], K)[0])


def projected_combination(problem: Problem, st: ShardedState, rule: str, Us: npt.NDArray[np.float64],
                          dls: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64], float]:
    """(gamma, U, dl) of a round under w_S >= 0, where D(alpha) = -lam/2 ||Pi(v)||^2 + l: averaging and
    adding as without constraints -- both keep the dual from falling, by the convexity of
    f(v) = 1/2 ||Pi(v)||^2 (v + U is the mean of the K points v + K u_k, and v + U / K of the v + u_k) --
    and the line search exact on the piecewise quadratic D(alpha + gamma dalpha)
    (`structfw.solvers._kernels.projected_line_search`, the engine's own search along a step)."""
    gamma, U, dl = combine_changes(Us, dls, st.v, st.lam, _RULE_CODES[rule if rule != "linesearch" else "add"],
                                   st.K)
    if rule == "linesearch":
        idx = np.flatnonzero(U).astype(np.int64)
        gamma = 1.0 if idx.size == 0 else projected_line_search(st.v, idx, U[idx], problem.nonneg_mask, st.lam,
                                                                 dl, 1.0)
    return float(gamma), U, dl


def set_global_point(st: ShardedState, problem: Problem, v: npt.NDArray[np.float64]) -> None:
    """The global v and w = Pi(v) (one array without positivity constraints)."""
    st.v[:] = v
    if st.v is not st.w:
        problem.project(st.v, out=st.w)


def shard_gap(ctx: ShardedContext, validate: bool) -> tuple[float, float]:
    """(P(w), sum_k sum_{i in S_k} g_i) at the round's w, each shard its own gap pass."""
    st = ctx.state
    out = ctx.map("gaps", st.v, validate)
    hinge = sum(o[0] for o in out)
    gap = float(sum(float(o[1].sum()) for o in out))
    return ctx.problem.primal(st.w, hinge), gap


def _record(ctx: ShardedContext, monitor: Monitor, w_rep: npt.NDArray[np.float64],
            pdg: tuple[float, float, float], multi_plane: bool = False) -> None:
    """One trace row.  With MP-BCFW, as the serial engine's: the oracle calls are the exact passes' (an
    approximate round calls none), ``engine_passes`` the exact passes of this solve (a warm start's
    estimator adds the previous fit's), and the working sets' size, the approximate passes of the last
    outer iteration and the outer iterations are added."""
    st, n = ctx.state, ctx.problem.n
    calls, hits = ctx.counters()
    extra: dict[str, float] = {}
    if multi_plane:
        extra = dict(planes_per_block=float(sum(ctx.map("planes"))) / n, approx_passes=st.mp_approx_passes,
                     outer_iterations=st.mp_iter)
    passes = ctx.passes_done if multi_plane else (st.steps - ctx.steps0) / n  # this solve's, as the engine's
    monitor.record(w_rep, calls / n, calls, *pdg, engine_passes=passes,
                   iterations=st.steps, cache_hits=hits, rounds=st.rounds, shards=st.K, round_length=ctx.m,
                   gamma=st.last_gamma if math.isfinite(st.last_gamma) else 1.0, **extra)


# ====================================================================== compiled rounds (threads)
# A thread runs many rounds of its shard in one compiled call: the local steps, a barrier, the
# combination and the blend, with no Python between rounds.  The barrier is a board of round
# counters, one a shard, written with a release store after the shard's change is on the board and
# read with acquire loads; every shard then sums the board in the same order and computes the same
# gamma, so no shard waits for a coordinator.  The changes are double-buffered by the round's
# parity: a shard writes round r + 2's change into round r's slot only after passing round r + 1's
# barrier, i.e. after every shard published round r + 1 -- which each does after reading round r's
# slot.

@intrinsic
def _load_acquire(typingctx, arr, i):
    """arr[i] of an int64 array, an atomic load with acquire ordering (a barrier's counter)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_item_pointer(context, builder, signature, args), "acquire", 8)

    return types.int64(arr, i), codegen


@intrinsic
def _store_release(typingctx, arr, i, value):
    """arr[i] = value for an int64 array, an atomic store with release ordering."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(v, _item_pointer(context, builder, signature, args), "release", 8)
        return context.get_dummy_value()

    return types.none(arr, i, value), codegen


def _item_pointer(context: Any, builder: Any, signature: Any, args: Any) -> Any:
    aryty, ity = signature.args[0], signature.args[1]
    ary = make_array(aryty)(context, builder, value=args[0])
    index = [context.cast(builder, args[1], ity, types.intp)]
    return cgutils.get_item_pointer2(context, builder, ary.data, cgutils.unpack_tuple(builder, ary.shape),
                                     cgutils.unpack_tuple(builder, ary.strides), aryty.layout, index)


@intrinsic
def _relax(typingctx):
    """Give the core away while spinning: the CPU's pause hint, or sched_yield (``yield_cpu``)."""

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


#: a shard that failed in a compiled round (its oracle was not a maximiser) writes this in its counter
_ABORT = -(2 ** 62)


@njit(cache=True, nogil=True)
def _barrier(flags, target):
    """Wait until every shard's counter reaches ``target``; False when one aborted."""
    for j in range(flags.shape[0]):
        while True:
            f = _load_acquire(flags, j)
            if f >= target or f == _ABORT:
                break
            _relax()
    for j in range(flags.shape[0]):
        if _load_acquire(flags, j) == _ABORT:
            return False
    return True


@njit(cache=True, nogil=True)
def combine_changes(Us, dls, w, lam, rule, K):
    """(gamma, U, dl) of a round from the shards' changes (rows of Us, in shard order: every caller sums
    them in the same order and gets the same gamma): 1 (add), 1/K (average) or the exact line search
    of D(alpha + gamma dalpha) = -lam/2 ||w + gamma U||^2 + l + gamma dl on [0, 1]."""
    d = w.shape[0]
    U = np.zeros(d)
    dl = 0.0
    for j in range(Us.shape[0]):
        dl += dls[j]
        for t in range(d):
            U[t] += Us[j, t]
    if rule == ADD:
        return 1.0, U, dl
    if rule == AVERAGE:
        return 1.0 / K, U, dl
    uu, wu = 0.0, 0.0
    for t in range(d):
        uu += U[t] * U[t]
        wu += w[t] * U[t]
    if uu <= 0.0:
        return 1.0, U, dl  # no change of w: any gamma; 1 keeps the shards' steps (l can only have risen)
    return min(max((dl - lam * wu) / (lam * uu), 0.0), 1.0), U, dl


@njit(cache=True, nogil=True)
def _round_blocks(src, r, m, estimates):
    """The blocks of round r: from the drawn orders (uniform, perm), by the gap estimates with the drawn
    uniforms (as `draw_round`), or the m largest estimates (max_gap)."""
    kind, orders, uniforms = src
    if kind == 0:
        return orders[r * m:(r + 1) * m].copy()
    n = estimates.shape[0]
    out = np.empty(m, np.int64)
    if kind == 2:
        order = np.argsort(-estimates, kind="mergesort")
        for s in range(m):
            out[s] = order[s % n]
        return out
    cum = np.cumsum(estimates)
    total = cum[n - 1]
    for s in range(m):
        u = uniforms[r * m + s]
        if total <= 0.0:
            out[s] = min(int(u * n), n - 1)
        else:
            out[s] = min(np.searchsorted(cum, u * total, side="right"), n - 1)
    return out


@njit(cache=True, nogil=True)
def _publish_and_combine(k, step, w, st_w, dl_k, board, comb):
    """Put shard k's change of round ``step`` on the board, wait for every shard's, and combine them:
    (ok, gamma, U, dl); ok False when a shard aborted."""
    flags, W, Ub, dlb, out = board
    lam, code, K, sigma, scale = comb
    slot = step % 2
    for t in range(w.shape[0]):
        Ub[slot, k, t] = (st_w[t] - w[t]) / sigma
    dlb[slot, k] = dl_k
    _store_release(flags, k, step + 1)
    if not _barrier(flags, step + 1):
        return False, 1.0, Ub[slot, k], 0.0
    g, U, dl = combine_changes(Ub[slot], dlb[slot], w, lam, code, K)
    return True, g, U, dl


@njit(cache=True, nogil=True)
def _close_round(k, r, w, g, U, dl, out):
    """w <- w + gamma U (every shard its own copy, to the same bits); shard 0 records (gamma, dl)."""
    for t in range(w.shape[0]):
        w[t] += g * U[t]
    if k == 0:
        out[r, 0] = g
        out[r, 1] = dl


@njit(cache=True, nogil=True)
def factored_rounds(k, R, m, fac, local, src, board, comb, r0):
    """R rounds of shard k on the factored storage (plain FW steps, `factored_fw_chunk`).  Returns -1, the
    example whose oracle was not a maximiser, or -2 when another shard aborted."""
    st_w, li, est, tree, c, rule, kind = local
    none = np.empty(0)  # no scales, no average (a global array would be read-only here)
    A, T = fac[2]
    T2 = T.reshape(T.shape[0], T.shape[1] * T.shape[2])
    starts = fac[1][1]
    blend = comb[1] != ADD
    w = board[1][k]
    for r in range(R):
        st_w[:] = w
        blocks = _round_blocks(src, r, m, est)
        ell0 = c[0].ell
        ub = np.unique(blocks)
        if blend:
            li0, A0, T0 = li[ub].copy(), _take_ranges(A, starts, ub), _take_rows(T2, ub, none)
        bad = factored_fw_chunk(fac, m, (kind, blocks, none, est, tree), st_w, li, rule, (0, none), c)[1]
        if bad >= 0:
            _store_release(board[0], k, _ABORT)
            return bad
        ok, g, U, dl = _publish_and_combine(k, r0 + r, w, st_w, comb[4] * (c[0].ell - ell0), board, comb)
        if not ok:
            return -2
        if blend and g != 1.0:
            li[ub] = (1.0 - g) * li0 + g * li[ub]
            _blend_ranges(A, starts, ub, A0, g)
            _blend_rows(T2, ub, T0, g, none)
            c[0].ell = ell0 + g * (c[0].ell - ell0)
        _close_round(k, r, w, g, U, dl, board[4])
    return -1


@njit(cache=True, nogil=True)
def dense_rounds(k, R, m, rows, local, src, board, comb, r0):
    """R rounds of shard k on dense rows (plain FW steps, `plain_fw_chunk`); ``rows`` = (oracle, rows,
    scales, scratch).  Returns as `factored_rounds`."""
    st_w, li, est, tree, c, rule, kind = local
    none = np.empty(0)
    oracle, V, scales, scratch = rows
    blend = comb[1] != ADD
    w = board[1][k]
    for r in range(R):
        st_w[:] = w
        blocks = _round_blocks(src, r, m, est)
        ell0 = c[0].ell
        ub = np.unique(blocks)
        if blend:
            li0, V0 = li[ub].copy(), _take_rows(V, ub, scales)
        bad = plain_fw_chunk(oracle, m, (kind, blocks, none, est, tree), st_w, (V, scales, li), rule, (0, none),
                             c, scratch, none)[1]
        if bad >= 0:
            _store_release(board[0], k, _ABORT)
            return bad
        ok, g, U, dl = _publish_and_combine(k, r0 + r, w, st_w, comb[4] * (c[0].ell - ell0), board, comb)
        if not ok:
            return -2
        if blend and g != 1.0:
            li[ub] = (1.0 - g) * li0 + g * li[ub]
            _blend_rows(V, ub, V0, g, scales)
            c[0].ell = ell0 + g * (c[0].ell - ell0)
        _close_round(k, r, w, g, U, dl, board[4])
    return -1


#: block steps a shard makes in one compiled call of rounds (Ctrl-C is polled between calls)
ROUNDS_CALL_STEPS = 2048


def compiled_rounds_serve(ctx: ShardedContext) -> bool:
    """Can the rounds run compiled (`factored_rounds`, `dense_rounds`)?  Plain FW steps with the model's
    compiled oracle on factored or dense rows, no averaging of the rounds, and a thread for every shard
    (the shards wait for each other inside the call)."""
    storable = all(_plain_compiled(sh.ctx.plan) for sh in ctx.shards)
    return storable and ctx.state.avg is None and ctx.n_jobs >= ctx.state.K


def _plain_compiled(plan: Any) -> bool:
    """Plain FW steps with the model's compiled oracle on factored or dense rows: compiled rounds serve."""
    return plan.compiled is not None and plan.plain and (plan.factored is not None or plan.dense)


def run_compiled_rounds(ctx: ShardedContext, R: int, rule: str) -> None:
    """R rounds with every shard's thread in one compiled call (`factored_rounds`, `dense_rounds`): the same
    steps, combinations and blends as R calls of `one_round`."""
    st, K, m = ctx.state, ctx.state.K, ctx.m
    board = (np.full(K, st.rounds, np.int64), np.tile(st.w, (K, 1)), np.zeros((2, K, st.d)), np.zeros((2, K)),
             np.zeros((R, 2)))
    calls = [_rounds_call(sh, k, R, m, board, (st.lam, _RULE_CODES[rule], K), st.rounds)
             for k, sh in enumerate(ctx.shards)]
    if ctx.pool is None:
        results = [_guarded(board, k, fn, args) for k, (fn, args, _) in enumerate(calls)]
    else:
        futures = [ctx.pool.submit(_guarded, board, k, fn, args) for k, (fn, args, _) in enumerate(calls)]
        results = [f.result() for f in futures]
    for sh, (_, _, c), bad in zip(ctx.shards, calls, results):
        sh.st.k, sh.st.ell = int(c["k"][0]), float(c["ell"][0])
        sh.ctx.counters["oracle_calls"] += R * m if bad == -1 else 0
        if sh.st.sampler.kind == "gap":
            sh.st.sampler._tree = fenwick_build(sh.st.sampler.estimates)
        if bad >= 0:  # the compiled oracle is not a maximiser: the checked Python call names the example
            sh.sub.oracle(int(bad), sh.st.w, validate=True)
            sh.sub.check_oracle_value(int(bad), -np.inf)
    if any(bad != -1 for bad in results):
        raise RuntimeError("a shard's compiled rounds stopped without naming the example")
    st.w[:] = board[1][0]
    for g, dl in board[4]:
        st.ell += g * dl
    st.rounds += R
    st.steps += R * m * K
    st.last_gamma = float(board[4][-1, 0])


def _guarded(board: tuple[Any, ...], k: int, fn: Any, args: tuple[Any, ...]) -> int:
    """fn(*args) for shard k; if it raises, shard k's counter says so, so the other shards' barrier ends."""
    try:
        return int(fn(*args))
    except BaseException:
        board[0][k] = _ABORT
        raise


def _rounds_call(sh: Shard, k: int, R: int, m: int, board: tuple[Any, ...], rule: tuple[float, int, int],
                 r0: int) -> tuple[Any, tuple[Any, ...], npt.NDArray[Any]]:
    """(driver, its arguments, the chunks' record of counters) of shard k's R compiled rounds."""
    st, plan = sh.st, sh.ctx.plan
    sampler = st.sampler
    c = counters(st.k, st.ell)
    kind = ORDER_GAPS if sampler.adaptive else ORDER
    local = (st.w, st.li, sampler.estimates, sampler._tree, c, (sh.sub.lam, plan.nu_step, plan.check_oracle), kind)
    if sampler.kind in ("uniform", "perm"):
        src = (0, np.concatenate([draw_round(st, m) for _ in range(R)]), _EMPTY_V)
    elif sampler.kind == "gap":
        src = (1, _EMPTY_I, st.rng.random(R * m))
    else:
        src = (2, _EMPTY_I, _EMPTY_V)
    comb = (float(rule[0]), int(rule[1]), int(rule[2]), sh.sigma, sh.scale)
    if st.factored is not None:
        fac = factored_arrays(plan.compiled, st.factored, plan.factored)
        return factored_rounds, (k, R, m, fac, local, src, board, comb, r0), c
    rows, scales = st.scaled_blocks()
    return dense_rounds, (k, R, m, (plan.compiled, rows, scales, np.zeros(st.d)), local, src, board, comb, r0), c


# ====================================================================== workers: processes and Ray actors
class ShardHost:
    """The worker side of one shard, the same in a worker process and in a Ray actor: it holds the
    shard's examples and its `Shard`, and answers the shard protocol's messages (`call`).

    Messages: ("load", (model, k, source, X, Y)) -- the examples: ``source.load(k)`` when a source is
    given (the worker reads its own shard), else the X, Y sent; returns (n_k, the shard's fingerprint);
    ("init", (lam_k, engine params, state, seed, n, sigma', state file)) -- the `Shard`, from the state
    file (path, stamp: a private pickle when the stamp is None, else a ``state_dir`` file whose header must
    carry the stamp), the state sent (a warm start) or fresh from its seed; returns what the caller needs
    of its plan, and whether the state's sampler was replaced; ("save", (path, stamp)) -- the state into a
    file (`write_shard_state` with a stamp); ("state", ()); ("counters", ()); ("pid", ());
    ("memory", ()) -- dict(baseline=, peak=) in bytes: the worker's resident set when the host was
    made and its peak since (None off Linux); and the `Shard` methods (round, combine, gaps,
    hinge_sum, refresh, block_sum, planes).  "pid" and "memory" are answered before "load" too."""

    def __init__(self) -> None:
        self.sub: Problem | None = None
        self.shard: Shard | None = None
        from .._memory import reset_peak, status_bytes

        # the peak restarts here: a forked worker's mark would otherwise hold its parent's size
        reset_peak()
        self.baseline = status_bytes("VmRSS")

    def call(self, name: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        """("ok", the answer) or ("error", the exception): the caller raises it."""
        try:
            return "ok", self._handle(name, args)
        except Exception as exc:
            return "error", exc

    def call_pickled(self, message: bytes) -> bytes:
        """`call` of a pickled (name, args), its answer pickled (a Ray actor's calls: Ray hands numpy
        arrays over read-only from its object store, and a shard writes its state in place)."""
        from ray import cloudpickle

        return cloudpickle.dumps(self.call(*cloudpickle.loads(message)), protocol=5)

    def _handle(self, name: str, args: tuple[Any, ...]) -> Any:
        if name == "load":
            return self._load(*args)
        if name == "init":
            return self._init(*args)
        if name == "pid":
            return os.getpid()
        if name == "memory":
            from .._memory import status_bytes

            return dict(baseline=self.baseline, peak=status_bytes("VmHWM"))
        shard = cast_shard(self.shard, name)
        if name == "save":
            path, stamp = args
            if stamp is None:  # a private file for restarts: this worker's own state, in its own folder
                save_private(path, shard.st)
            else:
                write_shard_state(path, shard.st, stamp)
            return None
        if name == "state":
            return shard.st
        if name == "counters":
            return dict(shard.ctx.counters)
        return getattr(shard, name)(*args)

    def _load(self, model: Any, k: int, source: Any, X: list[Any] | None, Y: list[Any] | None) -> tuple[int, str]:
        if source is not None:
            X, Y = checked_shard(model, source, k)
        self.sub = Problem(model, X, Y, 1.0, validated=True)
        return self.sub.n, self.sub.fingerprint

    def _init(self, lam_k: float, params: dict[str, Any], state: Any, seed: Any, n: int, sigma: float,
              state_file: tuple[str, dict[str, Any] | None] | None) -> tuple[Any, ...]:
        if self.sub is None:
            raise RuntimeError("a shard's worker was initialised before its examples were loaded")
        sub = self.sub.with_lam(lam_k)
        engine = BCFW(**params)
        fresh_sampler = False
        if state_file is not None and state_file[1] is None:
            state = load_private(state_file[0])
        elif state_file is not None:
            state = read_shard_state(state_file[0], state_file[1], sub)
            if state.lam != lam_k:  # a continued fit at another lam (the caller rescaled w alike)
                state.rescale_lam(lam_k)
            fresh_sampler = renew_sampler(state, params["sampling"])
        if state is None:
            state = engine.new_state(sub, np.random.default_rng(seed))
            state.fingerprint = sub.fingerprint
        self.shard = Shard(sub, state, engine, n, sigma)
        plan = self.shard.ctx.plan
        return plan.uses_gaps, plan.gap_refresh, plan.check_oracle, fresh_sampler


def save_private(path: str, obj: Any) -> None:
    """``obj`` pickled to ``path`` (written aside, then moved in place: a crash leaves the last file
    whole): the private restart files of a worker or of `ThreadRecovery`, which this fit alone reads."""
    import pickle

    with open(path + ".tmp", "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".tmp", path)


def load_private(path: str) -> Any:
    """What `save_private` wrote (never a user's file: those go through `read_shard_state`)."""
    import pickle

    with open(path, "rb") as f:
        return pickle.load(f)


#: the kind of a shard's state file in a ``state_dir`` (a model file of its own kind: no estimator reads it)
SHARD_STATE_KIND = "ShardState"


def write_shard_state(path: str, st: BCFWState, stamp: dict[str, Any]) -> None:
    """Shard ``stamp["shard"]``'s engine state as a pickle-free model file (`structfw.solvers.state_file`),
    its header stamped with the fit (``shards``, ``round``, ``entropy``) and the shard's data fingerprint."""
    from .. import io as sfio
    from .state_file import encode_state

    header, arrays = sfio.pack_state(*encode_state(st))
    header.update(stamp, fingerprint=st.fingerprint)
    sfio.write_model_file(path, SHARD_STATE_KIND, header, arrays)


def read_shard_state(path: str, expect: dict[str, Any], sub: Problem) -> BCFWState:
    """The state of `write_shard_state`, checked: the header is of this fit (``expect``: shard, shards,
    round, entropy) and of this shard's data (its fingerprint); the state field by field, as a shard's
    (`structfw.solvers.state_file.check_state` with its v the global w).  ValueError naming the file."""
    from .. import io as sfio
    from .state_file import decode_state

    if not os.path.exists(path):
        raise ValueError(f"{path}: no such shard state file: the state_dir holds no state of shard "
                         f"{expect['shard']} (fit with warm_start=False to start afresh)")
    header, arrays = sfio.read_model_file(path, SHARD_STATE_KIND)
    for key, want in expect.items():
        got = header.get(key)
        if got != want:
            what = "another fit's state (its seed differs)" if key == "entropy" else \
                f"field {key!r} = {got!r}, expected {want!r}"
            raise ValueError(f"{path}: {what}: not the state the saved model continues (it ended at round "
                             f"{expect['round']}; a later or another fit wrote this file); fit with "
                             "warm_start=False to start afresh")
    unpacked = sfio.unpack_state(header, arrays)
    if unpacked is None:
        raise ValueError(f"{path}: no solver state in the file")
    state = decode_state(dict(unpacked[0]), dict(unpacked[1]), source=path, model=sub.model, owned=True,
                         shard=True)
    if state.fingerprint != sub.fingerprint or header.get("fingerprint") != sub.fingerprint:
        raise ValueError(f"{path}: the state of other data than shard {expect['shard']}'s (its fingerprint "
                         "differs): the shard's files changed since the fit")
    return state


def cast_shard(shard: Shard | None, name: str) -> Shard:
    if shard is None:
        raise RuntimeError(f"a shard's worker was sent {name!r} before its init")
    return shard


def checked_shard(model: Any, source: Any, k: int) -> tuple[list[Any], list[Any]]:
    """``source.load(k)``, checked as `StructuredSVM.fit` checks (X, Y); errors name the shard (its file)."""
    from .. import _labels

    where = _describe(source, k)
    try:
        X, Y = source.load(k)
    except (TypeError, ValueError) as exc:
        if where in str(exc):  # the loader named the file already
            raise
        raise (ValueError if isinstance(exc, ValueError) else TypeError)(f"shard {k} ({where}): {exc}") from None
    try:
        Y = _labels._as_list(Y, "Y")
        _labels.check_no_unlabelled(model, Y)
        classes, Y = _labels.fit_classes(model, Y)
        if classes is not None and not _labels.is_identity(classes, int(getattr(model, "n_states"))):
            raise ValueError(f"its labels are not the model's states 0..{int(getattr(model, 'n_states')) - 1} "
                             f"(it holds {_labels._short_list(classes)}); a shard source gives labels as states, "
                             "every shard alike (ShardFiles: labels= or tags=)")
        X, Y = model.check_data(X, Y)
        if not X:
            raise ValueError("it holds no examples")
    except ValueError as exc:
        raise ValueError(f"shard {k} ({where}): {exc}") from None
    return X, Y


def _describe(source: Any, k: int) -> str:
    describe = getattr(source, "describe", None)
    return str(describe(k)) if callable(describe) else f"{type(source).__name__}.load({k})"


class WorkerDied(Exception):
    """A shard's worker (process or Ray actor) is gone: `RemoteShard` restarts it."""


class _ProcessLink:
    """A shard's worker process (forked), reached through a pipe."""

    kind = "process"

    def __init__(self, k: int) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid()), daemon=True,
                                name=f"structfw-shard-{k}")
        self.proc.start()
        child.close()

    def send(self, message: tuple[str, tuple[Any, ...]]) -> None:
        try:
            self.conn.send(message)
        except (OSError, EOFError):
            pass  # a dead worker: the reply's read finds it

    def recv(self) -> tuple[str, Any]:
        try:
            return self.conn.recv()
        except (OSError, EOFError):
            raise WorkerDied from None

    def kill(self) -> None:
        """SIGKILL the worker (tests of the fault path)."""
        import signal

        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()

    def end(self) -> None:
        self.send(("stop", ()))
        self.proc.join(timeout=2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


class _RayLink:
    """A shard's Ray actor (a `ShardHost`), its calls answered in the order they were sent."""

    kind = "ray"

    def __init__(self, k: int) -> None:
        from ..executor_ray import remote_class

        self.actor = remote_class(ShardHost).remote()
        self.refs: list[Any] = []

    def send(self, message: tuple[str, tuple[Any, ...]]) -> None:
        # pickled both ways, as through a process's pipe: the arrays each side receives are its own,
        # writable (Ray's object store would hand them over read-only: a state sent to a shard, or
        # gathered from it, could not be stepped or rescaled in place)
        from ray import cloudpickle

        self.refs.append(self.actor.call_pickled.remote(cloudpickle.dumps(message, protocol=5)))

    def recv(self) -> tuple[str, Any]:
        from ray import cloudpickle

        from ..executor_ray import _ray

        ray = _ray()
        ref = self.refs.pop(0)
        try:
            return cast(tuple[str, Any], cloudpickle.loads(ray.get(ref)))
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
            raise WorkerDied from None

    def kill(self) -> None:
        """Kill the actor (tests of the fault path)."""
        from ..executor_ray import _ray

        _ray().kill(self.actor)

    def end(self) -> None:
        self.refs = []
        try:
            self.kill()
        except Exception:  # already dead, or the cluster is gone
            pass


_LINKS = {"process": _ProcessLink, "ray": _RayLink}


class RemoteShard:
    """Shard k on its own worker -- a process, or a Ray actor -- which holds the shard's examples (sent
    once, or loaded by the worker itself from a shard source) and keeps its dual state for the whole fit;
    a call sends w (d numbers) and gets the change back.  A worker that dies is restarted -- its examples
    loaded again, its state from its last checkpoint file (or from the start) -- and the calls made
    since are replayed, so the fit goes on as if it had not died."""

    #: calls that change the worker's state (replayed after a restart), and its gap pass (whose block
    #: gaps the next refresh reads)
    REPLAYED = frozenset(("round", "combine", "refresh", "gaps"))
    MAX_RESTARTS = 3

    def __init__(self, k: int, kind: str, load: tuple[Any, ...], folder: str, persistent: bool = False) -> None:
        self.k, self.kind, self.load, self.folder, self.persistent = k, kind, load, folder, persistent
        self.init: tuple[Any, ...] | None = None
        #: the state after the last checkpoint, once one is written: (path, the stamp its header must
        #: have -- None for a private pickle)
        self.checkpoint_file: tuple[str, dict[str, Any] | None] | None = None
        self.log: list[tuple[str, tuple[Any, ...]]] = []
        self.pending: tuple[str, tuple[Any, ...]] | None = None
        self.restarts = 0
        self.link: Any = None
        try:
            self.n_k, self.fingerprint = self._start()
        except BaseException:  # a shard that cannot be loaded: its worker ends here
            self.close()
            raise

    def _start(self) -> Any:
        """A new worker with the shard's examples (and its `Shard`, once `setup` has run); the load's answer."""
        self.link = _LINKS[self.kind](self.k)
        self.link.send(("load", self.load))
        loaded = self._reply()
        if self.init is not None:
            self.link.send(("init", self.init + (self.checkpoint_file,)))
            self.info = self._reply()
        return loaded

    def setup(self, init: tuple[Any, ...]) -> None:
        """The worker's `Shard`: (lam_k, engine params, state, seed, n, sigma')."""
        self.init = init
        self.link.send(("init", init + (self.checkpoint_file,)))
        self.info = self._reply()

    def send(self, name: str, *args: Any) -> None:
        # copies: the caller moves w in place after the call, and a replay needs the w that was sent
        self.pending = (name, tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))
        self.link.send(self.pending)

    def recv(self) -> Any:
        while True:
            try:
                out = self._reply()
                break
            except WorkerDied:
                self._restore()
        name, args = self.pending
        self.pending = None
        if name in self.REPLAYED:
            self.log.append((name, args))
        return out

    def call(self, name: str, *args: Any) -> Any:
        self.send(name, *args)
        return self.recv()

    def _reply(self) -> Any:
        status, value = self.link.recv()
        if status == "error":
            raise value
        return value

    def _restore(self) -> None:
        """A new worker at the last checkpoint, the calls since replayed, the pending call sent again."""
        self.restarts += 1
        if self.restarts > self.MAX_RESTARTS:
            raise RuntimeError(f"the worker of shard {self.k} died {self.restarts} times; giving up")
        self.link.end()
        self._start()
        for name, args in self.log:
            self.link.send((name, args))
            self._reply()
        self.link.send(self.pending)

    def checkpoint(self, stamp: dict[str, Any]) -> None:
        """The worker writes its state to a file -- a private pickle, or into the ``state_dir`` with the
        fit's ``stamp`` (shards, round, entropy) -- and the calls before it need no replay any more."""
        if self.persistent:
            path, stamp = shard_state_path(self.folder, self.k), dict(stamp, shard=self.k)
            self.call("save", path, stamp)
        else:
            path, stamp = os.path.join(self.folder, f"shard-{self.k}.pkl"), None
            self.call("save", path, None)
        self.checkpoint_file, self.log = (path, stamp), []

    def kill(self) -> None:
        """Kill the worker now (tests of the fault path): its next call restores it."""
        self.link.kill()

    def close(self) -> None:
        if self.link is not None:
            self.link.end()
            self.link = None


def _worker_main(conn: Any, parent: int) -> None:
    """A shard's worker process: a `ShardHost` answering the calls from the pipe until "stop"."""
    import signal

    from .._compile import silence_in_worker
    from ..executor import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the fit after a round
    die_with_parent(parent)
    silence_in_worker()
    host = ShardHost()
    while True:
        try:
            name, args = conn.recv()
        except (EOFError, OSError):
            return
        if name == "stop":
            return
        conn.send(host.call(name, args))
