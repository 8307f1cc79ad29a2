"""The engine's passes: n block iterations of Alg. 1 (Osokin et al. 2016), as the plan says.

docs/design.md, "The engine and its parts".  `run_pass` is one call of the solve skeleton's
``run_pass``: a pass of block steps, or with MP-BCFW the approximate passes of one outer iteration
and the exact pass that starts the next (Shah et al. 2015, Alg. 3; `mp_outer_iteration`).  A pass
takes one of three routes, fixed by the `BlockPlan`:

- compiled, plain: FW steps with the exact compiled oracle in numba chunks (`plain_fw_chunk`, or
  `factored_fw_chunk` on the factored storage);
- compiled, general: cache / pairwise / away / MP-BCFW on the flat corner sets (`general_chunk`, on
  rows or on the factored storage with corners stored as labellings);
- Python: the parts (`structfw.solvers.parts`) step by step, with minibatches, projections,
  sparse storage and models without a compiled oracle.

Everything here reads the plan (``ctx.plan``), never the solver's options.
"""
from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._warmup import compile_leaves_in_background
from ._decisions import AVG_CODES, GAP, ORDER, SAMPLER_CODES, fixed_step
from ._fastpass import PAIRWISE_STEP, counters, factored_fw_chunk, general_chunk, plain_fw_chunk, read_average
from .._linalg import sparse_dot_dense
from ._factored import factored_arrays, no_factored
from ..oracles.compiled import csr_feature_major
from ._kernels import NO_CORNER, block_step
from .corners import CornerStore

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .parts import BlockContext

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)
_NO_MIRROR = np.zeros((0, 0))

#: block iterations per compiled call: Ctrl-C is polled between chunks
COMPILED_CHUNK = 1024


def run_pass(ctx: BlockContext, flag: InterruptFlag) -> None:
    """n block iterations (fewer if Ctrl-C arrives: the pass ends after the current step).

    With ``multi_plane`` one call is the approximate passes of the last outer iteration of
    MP-BCFW (Alg. 3 line 6, until the rule of Sec. 3.4 stops them) and the next exact pass
    (line 5): a call ends after an exact pass (`mp_outer_iteration`)."""
    if not ctx.plan.multi_plane:
        block_pass(ctx, flag)
        return
    mp_outer_iteration(ctx, flag)


# ================================================================ MP-BCFW
def mp_outer_iteration(ctx: BlockContext, flag: InterruptFlag) -> None:
    """The approximate passes that follow the last exact pass, then the next exact pass
    (Shah et al. 2015, Alg. 3 lines 6 and 5).

    Alg. 3 runs E A .. A E A .. A ..., an exact pass E and then approximate passes A until the
    slope rule of Sec. 3.4 stops them.  Every iterate between the k-th and the (k+1)-th exact
    pass has cost the same k n oracle calls; a call ends after an exact pass, so a checkpoint
    (the trace, the returned w) reads the iterate just after it.  The approximate passes raise
    the dual but, while the working sets hold few planes, move w toward the minimiser of the
    working-set model lam/2 ||w||^2 + sum_i max_{W_i} H_i, where labellings not yet in W_i
    score high: on OCR at lam = 1/n the primal after them is 0.05-0.5 above the one after the
    exact pass that precedes them (first 12 iterations), which the next exact pass corrects
    (docs/results/mpbcfw.md).
    The sequence of steps is Alg. 3's either way; only where a call ends moves.  The slope rule
    of the approximate passes measures from the start of their outer iteration, the exact pass
    before them (its dual and cost are kept in the state, so a warm start continues exactly)."""
    plan, st = ctx.plan, ctx.st
    clock = (lambda: st.mp_work) if plan.approx_rule == "work" else time.perf_counter
    st.mp_approx_passes = mp_approx_passes(ctx, flag, clock) if st.mp_exact_cost > 0.0 else 0
    if flag.requested:
        return
    st.mp_iter += 1
    ctx.stamp = st.mp_iter
    t0, D0 = clock(), st.dual()
    mp_pass(ctx, flag, approx=False)
    if not flag.requested:
        st.mp_exact_dual = D0
        st.mp_exact_cost = max(clock() - t0, 1e-300)  # > 0: its approximate passes are due


def mp_approx_passes(ctx: BlockContext, flag: InterruptFlag, clock: Any) -> int:
    """Approximate passes while the last one raised the dual faster (per unit of work or per
    second) than the outer iteration so far, its exact pass included (Sec. 3.4); at most
    ``max_approx_passes`` (M).  Returns how many ran."""
    plan, st = ctx.plan, ctx.st
    ctx.stamp = st.mp_iter  # the planes they use are active in the exact pass's outer iteration
    D0, cost0 = st.mp_exact_dual, st.mp_exact_cost
    st.mp_exact_cost = 0.0  # not due again, whatever happens below
    t_start = clock()
    t_prev, D_prev = t_start, st.dual()
    done = 0
    while done < plan.max_approx_passes and not flag.requested:
        mp_pass(ctx, flag, approx=True)
        done += 1
        t, D = clock(), st.dual()
        if slope_rule_stops((D_prev, t_prev), (D, t), (D0, cost0, t_start)):
            break
        t_prev, D_prev = t, D
    ctx.counters["approx_passes"] = ctx.counters.get("approx_passes", 0) + done
    return done


def slope_rule_stops(last: tuple[float, float], now: tuple[float, float],
                     start: tuple[float, float, float]) -> bool:
    """Sec. 3.4's rule: stop the approximate passes when the last one raised the dual more slowly (per
    unit of work or per second) than the outer iteration so far, its exact pass included.  ``last`` and
    ``now``: (dual, clock) before and after the pass; ``start``: the dual before the exact pass, its
    cost, and the clock when the approximate passes began."""
    (D_prev, t_prev), (D, t), (D0, cost0, t_start) = last, now, start
    slope_last = (D - D_prev) / max(t - t_prev, 1e-300)
    slope_iter = (D - D0) / max(cost0 + (t - t_start), 1e-300)
    return slope_last < slope_iter


def mp_pass(ctx: BlockContext, flag: InterruptFlag, approx: bool) -> None:
    """An exact or approximate pass; the other kind's average is held fixed meanwhile (Sec. 3.5)."""
    plan, st, problem = ctx.plan, ctx.st, ctx.problem
    ctx.approx = approx
    live, held = (st.avg2, st.avg) if approx else (st.avg, st.avg2)
    frozen = held.wbar(st.v) if held is not None else None
    if plan.approx_rule == "work":
        # an exact pass costs n oracle calls, an approximate one a dot product per plane
        st.mp_work += float(st.corners.size.sum()) + problem.n if approx else problem.n * (plan.oracle_work + 1.0)
    try:
        block_pass(ctx, flag, order=st.rng.permutation(problem.n) if approx else None, approx=approx, avg=live)
    finally:
        ctx.approx = False
        if held is not None:
            held.set_from(frozen, st.v)


# ================================================================ one pass
def block_pass(ctx: BlockContext, flag: InterruptFlag, order: Any = None, approx: bool = False,
               avg: Any = None) -> None:
    """One pass of n block steps: blocks from the sampler (or ``order``), the live average ``avg``."""
    plan, st = ctx.plan, ctx.st
    if avg is None and not approx:
        avg = st.avg
    ctx.validate = plan.check_oracle and st.passes == 0 and not st.resumed and not approx
    if order is None:
        st.sampler.start_pass()
    if plan.compiled is not None:
        if plan.factored is not None and plan.plain:
            compiled_factored_pass(ctx, flag)
        elif plan.plain and plan.dense:
            compiled_plain_pass(ctx, flag)
        else:
            compiled_general_pass(ctx, flag, order, approx, avg)
        return
    python_pass(ctx, flag, order, approx, avg)


def python_pass(ctx: BlockContext, flag: InterruptFlag, order: Any, approx: bool, avg: Any) -> None:
    """The pass through the parts: corner source -> block step -> sampler, one Python call per step."""
    plan, st = ctx.plan, ctx.st
    n = ctx.n
    fast = plan.plain and plan.compilable and plan.dense and not ctx.validate
    ctx.u = avg.u if avg is not None else _EMPTY_V
    ctx.inv_c = 0.0
    tau = plan.tau if not approx else 1
    window: deque[tuple[int, Any]] | None = deque() if plan.asynchronous and tau > 1 else None
    batch: list[int] = []
    for s in range(n):
        if flag.requested:
            break
        if window is not None:
            i = next_in_window(ctx, window, order, s + len(window), min(s + tau, n))
        elif not batch:
            # the next tau blocks; their oracles run at once at the current w (Wang et al. 2016)
            batch = [int(order[t]) if order is not None else st.sampler.next() for t in range(s, min(s + tau, n))]
            if tau > 1:
                ctx.source.prefetch(ctx, batch)
            batch.reverse()
        if window is None:
            i = batch.pop()
        ctx.gfixed = fixed_step(plan.nu_step, st.k, n)
        rho = 0.0
        if avg is not None:
            rho, ctx.inv_c = avg.begin_step()
        if fast:
            plain_fw_block(ctx, i)
        else:
            slot, psi, L, g_i, _ = ctx.source.fw_corner(ctx, i)
            ctx.step.move(ctx, i, slot, psi, L, g_i)
            ctx.source.tidy(ctx, i)
            if st.sampler.adaptive and not approx:
                st.sampler.update(i, g_i)
        st.k += 1
        if avg is not None:
            avg.end_step(rho, st.ell)
        if window is not None:
            ctx.prefetched.pop(i, None)  # a step that took no oracle corner leaves none for later steps
    else:
        if not approx:
            st.passes += 1
            ctx.passes_done += 1
    # an interrupted batch leaves no corner and no hit/miss decision for the next pass
    ctx.prefetched.clear()
    ctx.drawn_hits.clear()
    ctx.pending_misses.clear()
    if avg is not None:
        avg.renormalise()


def next_in_window(ctx: BlockContext, window: deque[tuple[int, Any]], order: Any, drawn: int, stop: int) -> int:
    """Asynchronous minibatch: top the window of oracle calls in flight up to step ``stop``
    (each starts at the current w), then wait for the oldest; its block."""
    st = ctx.st
    while drawn < stop:
        b = int(order[drawn]) if order is not None else st.sampler.next()
        window.append((b, ctx.source.submit(ctx, b)))
        drawn += 1
    i, pending = window.popleft()
    ctx.source.collect(ctx, i, pending)
    return i


def plain_fw_block(ctx: BlockContext, i: int) -> None:
    """Alg. 1 lines 4-11 with the dense block kernel (FW step, exact oracle, dense w_i)."""
    st, problem = ctx.st, ctx.problem
    t0 = time.perf_counter()
    y = problem.max_oracle(i, st.w)
    ctx.counters["oracle_time"] += time.perf_counter() - t0
    psi, L = problem.corner(i, y)
    ctx.counters["oracle_calls"] += 1
    li = st.li[i]
    dl = L / ctx.n - li
    s = (psi.indices, psi.values, ctx.inv_ln, sparse_dot_dense(psi.indices, psi.values, st.w))
    gamma, slope = block_step(st.w, st.layout(), i, -1.0, s, NO_CORNER, dl, (ctx.lam, 1.0, ctx.gfixed),
                              (ctx.u, ctx.inv_c), _EMPTY_V)
    st.li[i] = li + gamma * dl
    st.ell += gamma * dl
    if st.sampler.adaptive:
        st.sampler.update(i, -slope)


# ================================================================ compiled routes
def chunk_plan(st: Any, m: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(sampling code, block order, uniform draws) for the next m steps."""
    sampler = st.sampler
    kind = SAMPLER_CODES[sampler.kind]
    order = sampler.take_order(m) if kind == ORDER else _EMPTY_I
    draws = st.rng.random(m) if kind == GAP else _EMPTY_V
    return kind, order, draws


def compiled_general_pass(ctx: BlockContext, flag: InterruptFlag, order: Any = None, approx: bool = False,
                          avg: Any = None) -> None:
    """Cache / pairwise / away / MP-BCFW steps on the flat corner sets, in numba chunks
    (`general_chunk`)."""
    plan, st, problem = ctx.plan, ctx.st, ctx.problem
    n, store = problem.n, st.corners
    if store is None:  # plain FW steps keep no corners: the kernel gets an empty set per block
        store = CornerStore(n, problem.d, capacity=1, pool=1)
    tidy_kind, limit, stamp = plan.tidy_rule(st.mp_iter, approx)
    avg_kind = AVG_CODES[avg.kind if avg is not None else None]
    u = avg.u if avg is not None else _EMPTY_V
    c = counters(st.k, st.ell, avg, st.full_gap)
    # pairwise steps with tracked weights never read w_i: the pass leaves the rows stale
    keep_rows = not (plan.step_code == PAIRWISE_STEP and st.track_alpha) and st.factored is None
    fac = no_factored()
    if st.factored is not None:  # no rows: the label weights, read and written by the factored step
        fac = factored_arrays(plan.compiled, st.factored, plan.factored)
        B: tuple[Any, ...] = (_EMPTY_V,)  # never read: the rows' branch of the step does not run
    else:
        B = st.layout(keep_rows)
    WT = unary_mirror(plan, st, problem)
    done = 0
    while done < n and not flag.requested:
        m = min(COMPILED_CHUNK, n - done)
        if order is None:
            kind, chunk_order, draws = chunk_plan(st, m)
        else:
            kind, chunk_order, draws = ORDER, np.ascontiguousarray(order[done:done + m], np.int64), _EMPTY_V
        s = 0
        while True:
            s, status = general_chunk(
                plan.compiled, store.arrays, (s, m), (kind, chunk_order, draws, st.sampler.estimates,
                                                      st.sampler._tree),
                st.w, (B, st.li, WT), (problem.lam, plan.step_code, plan.nu_step, plan.check_oracle),
                (plan.cache, plan.cache_F, plan.cache_nu, st.oracle_gaps),
                (st.track_alpha, approx, stamp, tidy_kind, limit, keep_rows), (avg_kind, u), c, fac)
            st.rows_stale = st.rows_stale or (not keep_rows and st.factored is None)
            if status == 0:
                break
            B = mend_chunk_stop(problem, st, store, status, c, keep_rows, B)
        done += m
    take_chunk_counts(ctx, st, c)
    read_average(c, avg)
    if avg is not None:
        avg.renormalise()
    if done == n and not approx:
        st.passes += 1
        ctx.passes_done += 1


def mend_chunk_stop(problem: Any, st: Any, store: Any, status: int, c: np.ndarray, keep_rows: bool,
                    B: tuple[Any, ...]) -> tuple[Any, ...]:
    """What `general_chunk` stopped for (status 2, 3 or 4) mended before it starts again; returns
    the row layout to pass next (a new one after a sparse row grew).  ``c``: the chunk's record."""
    bad, need = int(c["bad"][0]), int(c["need"][0])
    if status == 2:  # not a maximiser: the checked Python call names the example
        problem.oracle(bad, st.w, validate=True)
        problem.check_oracle_value(bad, -np.inf)
    if status == 3:  # a sparse row must grow: the pool is grown, the step starts again
        st.make_row_room(bad, need)
        return cast("tuple[Any, ...]", st.layout(keep_rows))
    store.make_room(bad, need)
    return B


def take_chunk_counts(ctx: BlockContext, st: Any, c: np.ndarray) -> None:
    """The state's step count and l, and the solve's oracle calls and cache hits, from a chunk's
    record (`structfw.solvers._fastpass.counters`)."""
    st.k, st.ell = int(c["k"][0]), float(c["ell"][0])
    ctx.counters["oracle_calls"] += int(c["oracle_calls"][0])
    ctx.counters["cache_hits"] += int(c["cache_hits"][0])


def unary_mirror(plan: Any, st: Any, problem: Any) -> np.ndarray:
    """The feature-major copy WT (F, S) of w's unary weights that a pass over sparse chain inputs on
    sparse rows keeps for its oracle (`structfw.oracles.compiled.corner_fm`), made from w at the
    pass's start; (0, 0) for every other pass.  The oracle's unary scores gather a feature's S
    weights from one row of WT instead of S cache lines of w (docs/results/engine.md, "The
    CoNLL-scale tagging task").  Python never changes w within a pass, and the steps copy each entry
    they write (`structfw.solvers._kernels.mirror_row`), so WT equals w at every oracle call."""
    if st.storage != "sparse" or problem.constrained:
        return _NO_MIRROR
    WT = csr_feature_major(plan.compiled, st.w)
    return _NO_MIRROR if WT is None else WT


def compiled_plain_pass(ctx: BlockContext, flag: InterruptFlag) -> None:
    """The (FW, exact oracle, dense) pass in numba chunks (`plain_fw_chunk`)."""
    plan, problem = ctx.plan, ctx.problem
    scratch = np.zeros(problem.d)
    rows, scales = ctx.st.scaled_blocks()
    compile_leaves_in_background(plan.compiled[0])

    def chunk(m: int, sampler: tuple[Any, ...], rule: tuple[Any, ...], avg: tuple[Any, ...],
              c: np.ndarray) -> tuple[int, int]:
        return plain_fw_chunk(plan.compiled, m, sampler, ctx.st.w, (rows, scales, ctx.st.li), rule, avg, c,
                              scratch, _EMPTY_V)

    _plain_chunks(ctx, flag, chunk)


def compiled_factored_pass(ctx: BlockContext, flag: InterruptFlag) -> None:
    """The plain FW pass on the factored storage (`structfw.solvers._fastpass.factored_fw_chunk`)."""
    plan, st = ctx.plan, ctx.st
    fac = factored_arrays(plan.compiled, st.factored, plan.factored)

    def chunk(m: int, sampler: tuple[Any, ...], rule: tuple[Any, ...], avg: tuple[Any, ...],
              c: np.ndarray) -> tuple[int, int]:
        return factored_fw_chunk(fac, m, sampler, st.w, st.li, rule, avg, c)

    _plain_chunks(ctx, flag, chunk)


def _plain_chunks(ctx: BlockContext, flag: InterruptFlag, chunk: Any) -> None:
    """A plain FW pass in numba chunks of ``chunk``(m, sampler, rule, avg, c) -> (steps, bad example), ``c``
    the chunks' record of counters (`structfw.solvers._fastpass.counters`)."""
    plan, st, problem = ctx.plan, ctx.st, ctx.problem
    n, sampler, avg = problem.n, st.sampler, st.avg
    avg_kind = AVG_CODES[avg.kind if avg is not None else None]
    u = avg.u if avg is not None else _EMPTY_V
    c = counters(st.k, st.ell, avg)
    rule = (problem.lam, plan.nu_step, plan.check_oracle)
    done = 0
    while done < n and not flag.requested:
        m = min(COMPILED_CHUNK, n - done)
        kind, order, draws = chunk_plan(st, m)
        steps, bad = chunk(m, (kind, order, draws, sampler.estimates, sampler._tree), rule, (avg_kind, u), c)
        ctx.counters["oracle_calls"] += steps + (bad >= 0)
        if bad >= 0:  # the compiled oracle is not a maximiser: the checked Python call names the example
            problem.oracle(bad, st.w, validate=True)
            problem.check_oracle_value(bad, -np.inf)
        done += m
    st.k, st.ell = int(c["k"][0]), float(c["ell"][0])
    read_average(c, avg)
    if avg is not None:
        avg.renormalise()
    if done == n:
        st.passes += 1
        ctx.passes_done += 1
