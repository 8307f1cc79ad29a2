"""The block-coordinate Frank-Wolfe engine: one loop, orthogonal options.

Algorithm 1 of Osokin et al. (2016) -- BCFW in the primal-only form
(Alg. 1 of Lacoste-Julien et al. 2013) -- with the papers' contributions as
options of the same loop.  The options (`structfw.solvers.plan.ENGINE_PARAMS`) are read once
per solve into a `BlockPlan`; the passes (`structfw.solvers.passes`) follow the plan, their
steps made by the parts of `structfw.solvers.parts` (docs/design.md, "The engine and its parts"):

- ``sampling``: "uniform" | "perm" | "gap" | "max_gap"   (2016 paper Sec. 3.1)
- ``step``: "fw" | "pairwise" | "away"                    (2016 paper Sec. 3.2, App. D Alg. 3/4)
- ``step_size``: "linesearch" (Alg. 1 line 7) | "predefined" 2n/(k+2n) (BCFW paper Alg. 3)
- ``cache``: gap-based oracle cache, hit when ghat_i >= max(F g_i, nu/n g)  (2016 Sec. 3.3, Alg. 5)
- ``averaging``: None | "weighted" (eq. (14)) | "suffix" (eq. (15), doubling trick)

State per block (docs/design.md, "Notation"): w_i = A alpha_[i], l_i = b^T alpha_[i];
w = sum_i w_i, l = sum_i l_i; D(alpha) = -lam/2 ||w||^2 + l.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from .._linalg import axpy
from .averaging import LazyAverage
from .base import Param, Solver, continue_or_restart
from .block_state import BCFWState, ground_truth_corners
from ._factored import FACTORED_KINDS, FactoredBlocks, block_w_dots, positions
from .corners import CornerStore
from .parts import BlockContext, ExactOracle
from .passes import run_pass
from .rows import SparseRows
from .plan import (BCFW_AVERAGINGS, ENGINE_PARAMS, STEP_SIZES, STEPS, BlockPlan, check_combination, corner_source,
                   engine_label, make_plan)
from .sampling import BlockSampler, take_full_gaps

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor, StopRule
    from .problem import OracleCorner, Problem

__all__ = ["BCFW", "MPBCFW", "BCFWState", "BlockPlan", "STEPS", "STEP_SIZES", "BCFW_AVERAGINGS",
           "ground_truth_corners"]


class BCFW(Solver):
    """Block-coordinate Frank-Wolfe for the SSVM dual, with every variant as an option.

    One engine (Alg. 1 of Osokin et al. 2016); each option selects a part
    (`structfw.solvers.parts`) once per solve.  Any combination works.

    Parameters
    ----------
    step_size : {"linesearch", "predefined"}
        Closed-form line search (Alg. 1 line 7 of Osokin et al. 2016) or the
        predefined step 2n/(k+2n) (Alg. 3 of Lacoste-Julien et al. 2013).
    oracle_quality : float in (0, 1]
        nu, the multiplicative quality of an approximate max oracle: its corner's block gap is
        at least nu times the best one (Lacoste-Julien et al. 2013, eq. (12)).  The
        predefined step is then 2n/(nu k + 2n) (App. C, Alg. C.2), with which the
        O(1/(nu k)) rate of Thm. C.1 holds; the line search needs no correction.  1: an exact
        oracle.
    sampling : {"uniform", "perm", "gap", "max_gap"}
        Block choice; "gap" samples p_i proportional to the last block-gap estimate
        (Sec. 3.1), with a full gap pass every ``gap_refresh`` passes.  With gap
        sampling or the cache these gap passes are part of the algorithm: their
        oracle calls count as effective passes.  Monitoring checkpoints
        (``check_every``) never change the iterates.
    step : {"fw", "pairwise", "away"}
        Frank-Wolfe, block pairwise (BCPFW, Alg. 3 App. D) or block away-step
        (BCAFW) steps; the last two keep per-block active sets.
    cache : bool
        Gap-based oracle cache (Sec. 3.3): the cache corner argmax_{y in C_i} H_i
        is used when its gap estimate reaches max(F g_i, nu/n g).
    cache_F, cache_nu : float
        F (default 0.25) and nu (default 0.01) of the cache hit rule.
    cache_size : int
        Largest number of corners kept per block; the longest-unused corner with
        zero dual weight is evicted first.
    averaging : {None, "weighted", "suffix"}
        Report the weighted average (14) ("BCFW-wavg") or the 0.5-suffix
        average by the doubling trick (15) ("BCFW-tavg") of the iterates.
    gap_refresh : int or None
        Passes between the full gap passes of gap sampling and the cache; None: the first
        gap pass only, after which the estimates come from the block steps alone (the
        "Gap Inf" arm of Osokin et al. 2016, Fig. 1).
    block_storage : {"auto", "dense", "sparse", "factored"}
        How the n block parts w_i are stored: an (n, d) array (fast for small
        d), one sparse vector per block (CoNLL-size sparse problems), or factored
        as per-position label weights of a dense chain or multiclass model
        (docs/design.md, "The engine and its parts"; any step, cache or MP-BCFW with the
        model's compiled oracle, one block at a time: corner sets then keep labellings).
        "auto" takes the factored storage where it serves, else dense rows when
        n*d*8 bytes <= ``max_dense_bytes``, else sparse rows.
    max_dense_bytes : int
        The largest dense block storage "auto" picks, in bytes (default 2 GiB).
    check_oracle : bool
        Validate every labelling returned by the oracle in the first pass of a
        fresh state and in gap passes (ValueError naming the oracle's labelling otherwise).
    multi_plane, max_planes, max_approx_passes, plane_timeout, approx_rule, oracle_work
        MP-BCFW (see `MPBCFW`).
    minibatch : int
        tau >= 1: the engine draws tau blocks, runs their max oracles at once at the current
        w on the executor's workers (``StructuredSVM(n_jobs=..., executor=...)``), then applies
        the tau block steps in turn, each with its own line search at the updated w (Wang,
        Sadhanala, Dai, Neiswanger, Sra, Xing 2016).  A corner computed at the batch's
        starting w is still a vertex of the block's simplex, so every step keeps the
        dual monotone; sequential exact line searches make at least the progress of one joint
        step along the sum of the tau directions in the common case and reuse every step type,
        the cache (hits are decided at the batch start; misses are batched) and MP-BCFW's exact
        passes unchanged.  The compiled passes are for cheap oracles and run tau = 1.
    asynchronous : bool
        With ``minibatch=tau``: keep a window of tau oracle calls in flight instead of
        running them in batches, the asynchronous variant of Wang et al. (2016) with
        staleness bounded by tau - 1 steps: after each block step the next block's oracle
        starts at the w just reached, so the workers never wait for the steps and the
        steps never wait for a whole batch.  Every corner is still a vertex of its
        block's simplex (the dual stays monotone), and the window is filled in program
        order, so the iterates do not depend on the workers' timing (equal to a serial
        run's).  Pick tau >= n_jobs + 1 to keep every worker busy.

    Notes
    -----
    The state (`BCFWState`) is complete: dual point, block parts, corner
    sets, step counter, averages, sampler and random generator.  Passing it back
    (``StructuredSVM(warm_start=True)``) continues the run exactly: 5 passes and
    then 5 more give the iterates of one 10-pass run.
    """

    name = "bcfw"
    # a tuple of any length: MPBCFW redefines it (its own defaults)
    PARAMS: tuple[Param, ...] = ENGINE_PARAMS

    step_size: str
    oracle_quality: float
    sampling: str
    step: str
    cache: bool
    cache_F: float
    cache_nu: float
    cache_size: int
    averaging: str | None
    gap_refresh: int | None
    block_storage: str
    max_dense_bytes: int
    check_oracle: bool
    multi_plane: bool
    max_planes: int
    max_approx_passes: int
    plane_timeout: int
    approx_rule: str
    oracle_work: float
    minibatch: int
    asynchronous: bool

    def __init__(self, step_size: str = "linesearch", sampling: str = "uniform", step: str = "fw",
                 cache: bool = False, cache_F: float = 0.25, cache_nu: float = 0.01, cache_size: int = 50,
                 averaging: str | None = None, gap_refresh: int | None = 10, block_storage: str = "auto",
                 max_dense_bytes: int = 2 * 1024 ** 3, check_oracle: bool = True, multi_plane: bool = False,
                 max_planes: int = 1000, max_approx_passes: int = 1000, plane_timeout: int = 10,
                 approx_rule: str = "work", oracle_work: float = 10.0, minibatch: int = 1,
                 asynchronous: bool = False, oracle_quality: float = 1.0) -> None:
        self._init_params(locals())
        check_combination(self)

    def validate_params(self) -> None:
        super().validate_params()
        check_combination(self)

    @property
    def label(self) -> str:
        """A short name in the papers' style, e.g. "BCPFW-gap-cache-wavg"."""
        return engine_label(self)

    def corner_source(self) -> ExactOracle:
        """The corner source part of a solve: from ``cache`` / ``multi_plane``
        (`structfw.solvers.parts`).  A subclass may return a source of its own
        (docs/design.md, "Adding a corner source"); it then runs on the Python route."""
        return corner_source(self)

    def plan(self, problem: Problem, storage: str | None = None) -> BlockPlan:
        """Every decision of a solve of ``problem``, resolved once (`structfw.solvers.plan.make_plan`);
        ``storage``: that of a state being continued."""
        return make_plan(self, problem, storage)

    # ================================================================ state
    def new_state(self, problem: Problem, rng: int | np.random.Generator | None = None,
                  plan: BlockPlan | None = None) -> BCFWState:
        """A fresh state at alpha = e_{y_i} for every block (w = 0)."""
        plan = self.plan(problem) if plan is None else plan
        factored = None
        if plan.factored is not None:  # per-position label weights of the oracle's positions
            pos = positions(cast("tuple[Any, Any]", plan.compiled))
            factored = (pos[1], int(pos[3]))
        st = BCFWState(problem, plan.dense, track_alpha=plan.track_alpha, keep_corners=plan.keep_corners,
                       corner_capacity=plan.corner_capacity, lazy_rows=plan.lazy_rows, factored=factored)
        st.rng = np.random.default_rng(rng)
        st.sampler = BlockSampler(plan.sampling, problem.n, st.rng)
        _new_averages(plan, st)
        return st

    def state_at_corners(self, problem: Problem, labellings: Sequence[Any],
                         rng: int | np.random.Generator | None = None) -> BCFWState:
        """The dual point alpha_i(y'_i) = 1 for the given labelling y'_i of every block.

        With y'_i = y_i this is the fresh state (w = 0); the regularisation path
        starts from the oracle's labellings at w = 0 (Osokin et al. 2016, Sec. 4)."""
        plan = self.plan(problem)
        st = self.new_state(problem, rng, plan)
        _place_at_corners(problem, st, labellings)
        _new_averages(plan, st)
        return st

    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> BlockContext:
        st = continue_or_restart(state, BCFWState, problem)
        plan = self.plan(problem, None if st is None else st.storage)
        if st is not None:
            st = _continue(plan, problem, st)
            if st is None:  # the previous state cannot serve this plan: afresh, storage from the options
                plan = self.plan(problem)
        if st is None:
            st = self.new_state(problem, rng, plan)
        st.fingerprint = problem.fingerprint
        return BlockContext(problem, st, plan)

    # ============================================================= gap pass
    def gap_pass(self, problem: Problem, state: BCFWState, w: npt.NDArray[np.float64] | None = None,
                 validate: bool = True,
                 corners: bool = False) -> tuple[float, npt.NDArray[np.float64] | None, list[OracleCorner] | None]:
        """One oracle call per block at w: primal, block gaps (6), total gap (7).

        Returns (primal, block_gaps, oracle results or None).  With w = state.w the
        block gaps are g_i = lam ⟨w_i, w⟩ - l_i + H_i(y_i*; w)/n; their sum is
        P(w) - D(alpha).  The oracle results (y, psi, L, H) are built only when
        ``corners`` asks for them (the cache keeps them); otherwise the hinge terms
        H_i alone are computed (`Problem.batch_hinges`).
        """
        w = state.w if w is None else w
        res = None
        if corners:
            res = problem.batch_oracle(w, validate=validate)
            Hs = np.array([r[3] for r in res])
        else:
            Hs = problem.batch_hinges(w, validate=validate)
        primal = problem.primal(w, float(Hs.sum()))
        gaps = None
        if w is state.w:
            gaps = problem.lam * _block_w_dots(problem, state) - state.li + Hs / problem.n
        return primal, gaps, res

    # ================================================================ skeleton parts
    def checkpoint_due(self, ctx: BlockContext, since_check: int, done: int, stop: StopRule,
                       monitor: Monitor) -> bool:
        return ctx.plan.refresh_due(ctx.st.passes) or super().checkpoint_due(ctx, since_check, done, stop, monitor)

    def checkpoint(self, ctx: BlockContext, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """A full gap pass at the reported iterate.  It is the algorithm's own gap pass at w
        (its oracle calls count, its gaps feed the sampler and the cache) on the gap_refresh
        schedule; any other checkpoint only measures.  With averaging the reported iterate is
        w_bar: the pass at w is made only when its gaps refresh the estimates (before the first
        step w_bar = w and one pass serves both)."""
        problem, st, plan = ctx.problem, ctx.st, ctx.plan
        if monitoring_only or not plan.uses_gaps:
            refresh = False
        elif initial:
            refresh = st.needs_refresh
        else:
            refresh = plan.refresh_due(st.passes)
        with monitor.monitoring():
            w_rep, dual = _reported_point(problem, st)
            same = w_rep is st.w or np.array_equal(w_rep, st.w)
            if refresh or same:
                primal, gaps = _gap_pass_at_w(self, ctx, monitor, refresh)
            if not same:
                primal, _, _ = self.gap_pass(problem, st, w=w_rep, validate=plan.check_oracle and not refresh)
                monitor.monitor_calls += problem.n
            # without averaging sum_i g_i = P(w) - D(alpha), summed without the cancellation
            gap = float(gaps.sum()) if st.avg is None else primal - dual
            _record(ctx, st, monitor, w_rep, (primal, dual, gap))
        return gap

    def result_w(self, ctx: BlockContext) -> npt.NDArray[np.float64]:
        st = ctx.st
        if st.avg is None:
            return st.w.copy()
        return cast("tuple[npt.NDArray[np.float64], float]", st.averaged(ctx.problem))[0]

    def run_pass(self, ctx: BlockContext, flag: InterruptFlag) -> None:
        """n block iterations, or an outer iteration of MP-BCFW (`structfw.solvers.passes.run_pass`)."""
        run_pass(ctx, flag)


def _block_w_dots(problem: Problem, st: BCFWState) -> npt.NDArray[np.float64]:
    """⟨w_i, w⟩ of every block: from the rows, or for factored w_i from the chain oracle's positions."""
    if st.factored is not None:
        Xc = positions(cast("tuple[Any, Any]", problem.compiled_oracle()))[0]
        return block_w_dots(Xc, st.factored, st.w)
    return np.array([st.block_w_dot(i, st.w) for i in range(problem.n)])


def _reported_point(problem: Problem, st: BCFWState) -> tuple[npt.NDArray[np.float64], float]:
    """The iterate a checkpoint reports and its dual value: (w, D(alpha)), or with averaging
    (w_bar, -lam/2 ||w_bar||^2 + l_bar), the dual value of the averaged alpha."""
    if st.avg is None:
        return st.w, st.dual()
    w_bar, lbar = cast("tuple[npt.NDArray[np.float64], float]", st.averaged(problem))
    return w_bar, -0.5 * problem.lam * float(np.dot(w_bar, w_bar)) + lbar


def _gap_pass_at_w(solver: BCFW, ctx: BlockContext, monitor: Monitor,
                   refresh: bool) -> tuple[float, npt.NDArray[np.float64]]:
    """P(w) and the block gaps from a full gap pass at w; with ``refresh`` they and the corners
    become the algorithm's (`_refresh_estimates`), else its oracle calls count as monitoring."""
    st = ctx.st
    primal, gaps, res = solver.gap_pass(ctx.problem, st, validate=ctx.plan.check_oracle,
                                        corners=refresh and ctx.source.absorbs_corners)
    gaps = cast("npt.NDArray[np.float64]", gaps)  # at st.w: the block gaps are computed
    if refresh:
        _refresh_estimates(ctx, st, gaps, res)
    else:
        monitor.monitor_calls += ctx.problem.n
    return primal, gaps


def _refresh_estimates(ctx: BlockContext, st: BCFWState, gaps: npt.NDArray[np.float64],
                       res: list[OracleCorner] | None) -> None:
    """The algorithm's own gap pass: its block gaps become the sampler's and the cache rule's
    estimates (Osokin et al. 2016, Sec. 3.1, 3.3), its corners go to the corner source, and its
    oracle calls count."""
    take_full_gaps(st, gaps)  # init_state gave the state its sampler
    ctx.source.absorb_gap_pass(st, res, ctx.problem)
    ctx.counters["oracle_calls"] += ctx.problem.n


def _record(ctx: BlockContext, st: BCFWState, monitor: Monitor, w_rep: npt.NDArray[np.float64],
            pdg: tuple[float, float, float]) -> None:
    """One trace row at the reported iterate: (primal, dual, gap), the counters, and MP-BCFW's
    working-set sizes."""
    c, n = ctx.counters, ctx.problem.n
    extra = {}
    if ctx.plan.multi_plane:
        corners = cast(CornerStore, st.corners)  # multi_plane keeps the working sets there
        extra = dict(planes_per_block=float(corners.size.mean()), approx_passes=st.mp_approx_passes,
                     outer_iterations=st.mp_iter)
    monitor.record(w_rep, c["oracle_calls"] / n, c["oracle_calls"], *pdg,
                   engine_passes=ctx.passes_done, iterations=st.k, cache_hits=c["cache_hits"],
                   active_corners=st.n_active(),
                   oracle_time_frac=c["oracle_time"] / max(monitor.opt_time(), 1e-12), **extra)


def _new_averages(plan: BlockPlan, st: BCFWState) -> None:
    """The running average; MP-BCFW keeps one over exact and one over approximate steps (Sec. 3.5)."""
    st.avg = LazyAverage(plan.averaging, st.w, st.ell) if plan.averaging else None
    st.avg2 = LazyAverage(plan.averaging, st.w, st.ell) if plan.averaging and plan.multi_plane else None


def _place_at_corners(problem: Problem, st: BCFWState, labellings: Sequence[Any]) -> None:
    """Move a fresh state to alpha_i(y'_i) = 1: w_i = psi_i(y'_i)/(lam n), l_i = L_i(y'_i)/n."""
    inv = 1.0 / (problem.lam * problem.n)
    if st.factored is not None:
        _place_factored(problem, st, labellings, inv)
        return
    # rows the state's passes never read stay stale (rebuilt from the weights if ever
    # read): writing them would fault in n*d*8 bytes (200 MB on OCR) for nothing
    lazy = st.rows_stale and st.track_alpha
    if lazy:
        st.v[:] = 0.0
    # the labellings are checked at the fresh state's w = 0 (the path's are the oracle's there): lazy
    # rows sum into st.v as they go, and a corner checked at that half-built w may fail the check
    w0 = np.zeros(problem.d)
    for i, y in enumerate(labellings):
        y, psi, L, _ = problem.oracle_corner(i, y, w0, validate=True)
        if lazy:
            np.add.at(st.v, psi.indices, psi.values * inv)
        elif st.dense_blocks:
            row = cast("npt.NDArray[np.float64]", st.unscaled_blocks())[i]  # dense_blocks: an (n, d) array
            row[:] = 0.0
            np.add.at(row, psi.indices, psi.values * inv)
        else:
            cast(SparseRows, st.unscaled_blocks()).set_row(i, psi * inv)
        st.li[i] = L / problem.n
        if st.corners is not None:
            slot = st.corners.add(i, psi, L, 0.0, 0)
            if st.track_alpha and slot != 0:  # slot 0 is the ground truth's corner
                st.corners.alpha[i, :] = 0.0
                st.corners.alpha[i, slot] = 1.0
    if not lazy:
        st.v[:] = cast("npt.NDArray[np.float64]", st.wi).sum(axis=0) if st.dense_blocks else 0.0
        if not st.dense_blocks:
            for v in st.wi:
                axpy(1.0, v, st.v)
    if st.v is not st.w:
        problem.project(st.v, out=st.w)
    st.ell = float(st.li.sum())


def _place_factored(problem: Problem, st: BCFWState, labellings: Sequence[Any], inv: float) -> None:
    """`_place_at_corners` for the factored storage: each block's label weights and transitions at its
    labelling's corner, then w = sum_i w_i."""
    fb = cast("FactoredBlocks", st.factored)
    Xc, starts, labels, S, F = positions(cast("tuple[Any, Any]", problem.compiled_oracle()))
    transitions = problem.d > S * F
    for i, y in enumerate(labellings):
        y, psi, L, _ = problem.oracle_corner(i, y, st.w, validate=True)  # checks the labelling, gives L
        y_true = labels[starts[i]:starts[i + 1]]
        y = np.atleast_1d(np.asarray(y, np.int64))
        fb.place(i, y_true, y, inv, transitions)
        st.li[i] = L / problem.n
        if st.corners is not None:  # a store of labellings
            slot = st.corners.add(i, None, L, 0.0, 0, y=y)
            if st.track_alpha and slot != 0:  # slot 0 is the ground truth's corner
                st.corners.alpha[i, :] = 0.0
                st.corners.alpha[i, slot] = 1.0
    st.v[:] = fb.total(Xc, problem.d)
    if st.v is not st.w:
        problem.project(st.v, out=st.w)
    st.ell = float(st.li.sum())


def _continue(plan: BlockPlan, problem: Problem, st: BCFWState) -> BCFWState | None:
    """Carry a previous state into this solve: rescale to a new lam, adapt it to the plan."""
    if st.factored is not None:
        compiled = problem.compiled_oracle()
        if compiled is None or compiled[0] not in FACTORED_KINDS:
            warnings.warn("warm start: the previous state stores its w_i factored (per-position label weights of "
                          "the compiled chain oracle's positions), which this problem's model does not compile; "
                          "starting afresh", RuntimeWarning, stacklevel=4)
            return None
        pos = positions(compiled)
        st.factored.check_layout(pos, st.v)
        if plan.factored is None:  # options that need rows: the same w_i (and corners) as rows
            st.unfactor(pos[0], plan.dense, problem)
    if plan.track_alpha and not st.track_alpha:
        warnings.warn(f"warm start: the previous state has no active sets, which step={plan.step_name!r} needs; "
                      "starting afresh", RuntimeWarning, stacklevel=4)
        return None
    if st.lam != problem.lam:
        st.rescale_lam(problem.lam)
    if plan.keep_corners and st.corners is None:
        st.corners = ground_truth_corners(problem.n, problem.d, 8, False,
                                          problem.Y if st.factored is not None else None)
    if not plan.track_alpha:
        st._rebuild_stale_rows()  # while the weights the rows are rebuilt from are still tracked
    st.track_alpha = plan.track_alpha
    if st.sampler is None or st.sampler.kind != plan.sampling:
        st.sampler = BlockSampler(plan.sampling, problem.n, cast(np.random.Generator, st.rng))
        st.needs_refresh = True
    if ((st.avg.kind if st.avg is not None else None) != plan.averaging
            or (st.avg2 is not None) != bool(plan.averaging and plan.multi_plane)):
        _new_averages(plan, st)
    return st


class MPBCFW(BCFW):
    """Multi-plane BCFW (Shah, Kolmogorov, Lampert 2015): the engine with ``multi_plane=True``.

    A preset of `BCFW` (all its options apply): each outer iteration is one exact
    pass -- the max oracle on every block, its plane added to the block's working set
    W_i (at most ``max_planes`` = N, the longest-inactive plane leaving) -- followed by
    approximate passes that step toward argmax_{W_i} H_i(y; w) without an oracle call
    (eq. (6)); planes not active for ``plane_timeout`` = T iterations leave.  The number
    of approximate passes is chosen by the slope rule of Sec. 3.4 (``approx_rule``), at
    most ``max_approx_passes`` = M: the dual's rise per unit of work -- plane dot
    products, an oracle call counting ``oracle_work`` of them -- by default ("work"),
    so runs are reproducible and a warm start continues a run exactly; or, as in the
    paper, per second ("time"), which is **not bitwise reproducible**: the number of
    approximate passes then depends on the machine's speed and load, so two runs with
    the same seed, or a run split by a warm start, can differ.  With ``averaging="weighted"`` two averages, over
    exact and over approximate steps, are kept and the reported point is their
    interpolation with the best dual value (Sec. 3.5: "MP-BCFW-avg").  ``max_passes``
    counts outer iterations (= exact passes); the trace adds ``planes_per_block``,
    ``approx_passes`` and ``outer_iterations`` (the paper's Figure 6).

    A call of ``run_pass`` runs the approximate passes of the previous outer iteration and then
    the next exact pass, so checkpoints and the returned w read the iterate right after an
    exact pass, k n oracle calls after the start (``approx_passes`` in the trace: those that
    preceded it).  Alg. 3's sequence of steps is unchanged; the iterates after the approximate
    passes cost the same k n calls but, while the working sets are small, have a higher primal
    (on OCR at lam = 1/n: above BCFW's for the first ~10 iterations, where the iterate after
    the exact pass is below it; `structfw.solvers.passes.mp_outer_iteration`).

    Parameters
    ----------
    step_size, sampling, step, cache, cache_F, cache_nu, cache_size, averaging, gap_refresh, block_storage, \
max_dense_bytes, check_oracle, multi_plane, max_planes, max_approx_passes, plane_timeout, approx_rule, \
oracle_work, minibatch, asynchronous, oracle_quality
        As for `BCFW`; only the defaults differ: ``multi_plane=True``.
    """

    name = "mpbcfw"
    PARAMS = tuple(replace(p, default=True) if p.name == "multi_plane" else p for p in BCFW.PARAMS)

    def __init__(self, step_size: str = "linesearch", sampling: str = "uniform", step: str = "fw",
                 cache: bool = False, cache_F: float = 0.25, cache_nu: float = 0.01, cache_size: int = 50,
                 averaging: str | None = None, gap_refresh: int | None = 10, block_storage: str = "auto",
                 max_dense_bytes: int = 2 * 1024 ** 3, check_oracle: bool = True, multi_plane: bool = True,
                 max_planes: int = 1000, max_approx_passes: int = 1000, plane_timeout: int = 10,
                 approx_rule: str = "work", oracle_work: float = 10.0, minibatch: int = 1,
                 asynchronous: bool = False, oracle_quality: float = 1.0) -> None:
        self._init_params(locals())
        check_combination(self)
