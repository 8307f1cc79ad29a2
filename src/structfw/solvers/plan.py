"""The engine's options and the one place that reads them: `BlockPlan`.

docs/design.md, "The engine and its parts".  `BCFW`'s options (the ``ENGINE_PARAMS`` table,
from which validation, ``get_params``, ``repr`` and the CLI flags are generated) are read once
per solve, by `make_plan`, into a frozen `BlockPlan`: the corner source and block step (parts
objects), the step-size rule, the sampler, the averaging, the storage of the w_i, the
projection, the batching and the compiled oracle.  The passes (`structfw.solvers.passes`) read
the plan only; no other code reads an option string (tests/test_engine_plan.py checks it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._factored import FACTORED_KINDS, block_grams, positions
from ._decisions import DROP_INACTIVE, EVICT_OVER, EXPIRE
from ._fastpass import AWAY_STEP, FW_STEP, PAIRWISE_STEP
from .base import Param
from .parts import STEP_PARTS, ExactOracle, GapCache, WorkingSet
from .sampling import SAMPLINGS

if TYPE_CHECKING:
    from .problem import Problem

STEPS = ("fw", "pairwise", "away")
STEP_SIZES = ("linesearch", "predefined")
BCFW_AVERAGINGS = (None, "weighted", "suffix")
_STEP_CODES = {"fw": FW_STEP, "pairwise": PAIRWISE_STEP, "away": AWAY_STEP}

#: the options of the block-coordinate engine (`BCFW`; `MPBCFW` changes one default)
ENGINE_PARAMS: tuple[Param, ...] = (
    Param("step_size", "linesearch", "choice", STEP_SIZES,
          help="Line search (Alg. 1 line 7) or the predefined 2n/(k+2n)."),
    Param("oracle_quality", 1.0, "float", low=0.0, low_open=True,
          help="nu in (0, 1]: the max oracle's multiplicative quality; the predefined step becomes "
               "2n/(nu k + 2n) (Lacoste-Julien et al. 2013, App. C, Alg. C.2)."),
    Param("sampling", "uniform", "choice", SAMPLINGS, help="Block sampling (gap: Osokin et al. Sec. 3.1)."),
    Param("step", "fw", "choice", STEPS, help="Block step: Frank-Wolfe, pairwise or away."),
    Param("cache", False, "bool", help="Gap-based oracle cache (Osokin et al. Sec. 3.3)."),
    Param("cache_F", 0.25, "float", low=0.0, low_open=True, help="F of the cache hit rule."),
    Param("cache_nu", 0.01, "float", low=0.0, low_open=True, help="nu of the cache hit rule."),
    Param("cache_size", 50, "int", low=2, help="Largest number of corners cached per block."),
    Param("averaging", None, "choice", BCFW_AVERAGINGS, help="Averaging of the iterates (eqs. (14), (15))."),
    Param("gap_refresh", 10, "int", low=1, none_ok=True,
          help="Passes between full gap passes (gap sampling, cache); None (CLI: never): only the first "
               "(Osokin et al. Fig. 1's 'Gap Inf')."),
    Param("block_storage", "auto", "choice", ("auto", "dense", "sparse", "factored"),
          help="Storage of the w_i: rows (dense, sparse), or per-position label weights of a dense chain "
               "('factored': plain FW steps with the model's compiled oracle)."),
    Param("max_dense_bytes", 2 * 1024 ** 3, "int", low=0, help="Largest n*d*8 stored densely by 'auto'."),
    Param("check_oracle", True, "bool", help="Validate oracle outputs in the first pass and gap passes."),
    Param("multi_plane", False, "bool",
          help="MP-BCFW: per-block working sets and approximate passes (Shah et al. 2015, Alg. 3)."),
    Param("max_planes", 1000, "int", low=1, help="MP-BCFW: N, the most planes kept per block."),
    Param("max_approx_passes", 1000, "int", low=0, help="MP-BCFW: M, the most approximate passes per iteration."),
    Param("plane_timeout", 10, "int", low=1,
          help="MP-BCFW: T, outer iterations a plane may stay inactive before it leaves."),
    Param("approx_rule", "work", "choice", ("work", "time"),
          help="MP-BCFW: stop approximate passes when the dual's rise per unit of work ('work': reproducible, "
               "exactly resumable) or per second ('time', Sec. 3.4: depends on the machine's speed, not "
               "reproducible) of the last pass falls below the iteration's."),
    Param("oracle_work", 10.0, "float", low=0.0,
          help="MP-BCFW, approx_rule='work': an oracle call's cost in plane dot products."),
    Param("minibatch", 1, "int", low=1,
          help="tau: blocks whose oracles run at once on the executor's workers, then are applied in turn "
               "(Wang et al. 2016)."),
    Param("asynchronous", False, "bool",
          help="With minibatch=tau: a window of tau oracle calls in flight, each started at the w of the "
               "step before (staleness <= tau - 1; Wang et al. 2016's asynchronous variant)."),
)


def check_combination(options: Any) -> None:
    """The option pairs that exclude each other (ValueError naming both), and bounds a Param
    cannot say."""
    if isinstance(options.oracle_quality, (int, float)) and options.oracle_quality > 1.0:
        raise ValueError(f"oracle_quality must be a number in (0, 1] (nu = 1: an exact oracle); got "
                         f"{options.oracle_quality!r}")
    if options.asynchronous and options.minibatch < 2:
        raise ValueError("asynchronous=True keeps minibatch=tau oracle calls in flight: give minibatch >= 2 "
                         f"(tau >= n_jobs + 1 keeps every worker busy); got minibatch={options.minibatch}")
    if options.multi_plane and options.cache:
        raise ValueError("cache=True and multi_plane=True are two caches of oracle corners: choose one "
                         "(MP-BCFW's working sets replace the gap-based cache)")


def refresh_due(uses_gaps: bool, gap_refresh: int | None, passes: int) -> bool:
    """The gap_refresh schedule: a full gap pass after every ``gap_refresh`` passes when the
    block gaps are used (gap sampling, the cache); never again with ``gap_refresh=None``."""
    return uses_gaps and gap_refresh is not None and passes % gap_refresh == 0


@dataclass(frozen=True)
class BlockPlan:
    """Every decision of one solve of the engine, resolved once (`make_plan`).

    Attributes
    ----------
    source : ExactOracle | GapCache | WorkingSet
        The corner source part (its own per-solve fields: MP-BCFW's ``approx`` flag).
    step : FWStep | PairwiseStep | AwayStep
        The block-step part; ``step_code`` is its code in the compiled passes.
    predefined : bool
        Step size 2n/(nu k + 2n) (BCFW paper Alg. 3; nu < 1: App. C, Alg. C.2) instead of the
        line search; ``nu_step`` is nu then, 0 with the line search.
    sampling, averaging : str, str or None
        The sampler's kind and the averaging ("weighted" eq. (14), "suffix" eq. (15)).
    uses_gaps : bool
        Gap sampling or the cache: a full gap pass every ``gap_refresh`` passes is part of
        the algorithm (its oracle calls count); ``gap_refresh=None``: only the first, the gap
        estimates then come from the block steps alone.
    dense : bool
        The w_i are rows of an (n, d) array (else one sparse vector per block, or factored).
    factored : tuple or None
        (G, offsets), the blocks' Gram matrices, when the w_i are stored as per-position label
        weights (`structfw.solvers._factored`); None for rows.
    track_alpha, keep_corners, corner_capacity, lazy_rows
        What the state keeps: the corners' dual weights (pairwise/away steps), corner sets at
        all, their initial capacity, and whether dense rows may stay stale (compiled pairwise
        passes never read them).
    tau, asynchronous : int, bool
        Minibatch size and the asynchronous window (Wang et al. 2016).
    compilable : bool
        An exact oracle, no projection, tau = 1: the compiled passes apply when the model
        compiled its oracle (and `passes.plain_fw_block` to dense rows otherwise).
    compiled : tuple or None
        The model's compiled whole-training-set oracle ``(kind, data)`` when the passes run in
        numba chunks (exact oracle, no projection, tau = 1); None otherwise.
    plain : bool
        FW step, exact oracle every step (no cache, no working sets): the plain compiled pass.
    """

    source: Any
    step: Any
    step_name: str
    step_code: int
    predefined: bool
    nu_step: float
    sampling: str
    averaging: str | None
    uses_gaps: bool
    gap_refresh: int | None
    dense: bool
    factored: tuple[Any, Any] | None
    track_alpha: bool
    keep_corners: bool
    corner_capacity: int
    lazy_rows: bool
    tau: int
    asynchronous: bool
    compilable: bool
    compiled: tuple[Any, Any] | None
    plain: bool
    check_oracle: bool
    cache: bool
    cache_F: float
    cache_nu: float
    cache_size: int
    multi_plane: bool
    max_planes: int
    plane_timeout: int
    max_approx_passes: int
    approx_rule: str
    oracle_work: float

    def refresh_due(self, passes: int) -> bool:
        """Is the algorithm's full gap pass due after ``passes`` passes?"""
        return refresh_due(self.uses_gaps, self.gap_refresh, passes)

    def tidy_rule(self, mp_iter: int, approx: bool) -> tuple[int, int, int]:
        """(tidy kind, limit, stamp) of the compiled general pass: what leaves the corner sets."""
        if self.multi_plane:
            if approx:
                return EXPIRE, mp_iter - self.plane_timeout + 1, mp_iter
            return EVICT_OVER, self.max_planes, mp_iter
        if self.cache:
            return EVICT_OVER, self.cache_size, -1
        return DROP_INACTIVE, 0, -1


def engine_label(o: Any) -> str:
    """A short name of the options in the papers' style, e.g. "BCPFW-gap-cache-wavg"."""
    base = {"fw": "BCFW", "pairwise": "BCPFW", "away": "BCAFW"}[o.step]
    parts = ["MP-" + base if o.multi_plane else base]
    if o.sampling != "uniform":
        parts.append(o.sampling)
    if o.cache:
        parts.append("cache")
    if o.step_size == "predefined":
        parts.append("fixed")
    if o.averaging:
        parts.append({"weighted": "wavg", "suffix": "tavg"}[o.averaging])
    return "-".join(parts)


def corner_source(o: Any) -> ExactOracle:
    if o.multi_plane:
        return WorkingSet()
    if o.cache:
        return GapCache(o.cache_F, o.cache_nu, o.cache_size)
    return ExactOracle()


def dense_storage(o: Any, problem: Problem) -> bool:
    """Dense w_i rows: asked for, or "auto" and n*d*8 bytes within ``max_dense_bytes`` (always for a
    solver whose rows are dense in every label they have taken: `KernelBCFW`)."""
    return bool(o.block_storage == "dense" or (o.block_storage == "auto" and (
        problem.n * problem.d * 8 <= o.max_dense_bytes or getattr(o, "dense_rows", False))))


def _wants_factored(o: Any) -> bool:
    """``block_storage`` asks for the factored storage or leaves the choice to the plan ("auto"), which
    takes it wherever it serves: on OCR a plain pass took 0.70x the time of dense rows and a multiclass
    pass 0.44x, with n L K numbers in place of n d (docs/results/engine.md, "The factored storage")."""
    return bool(o.block_storage in ("factored", "auto"))


def keeps_rows(o: Any) -> bool:
    """Will a solve with these options store its w_i as rows?  False when "auto" or "factored" can
    store them factored: one block at a time (with the model's compiled dense chain or multiclass
    oracle, which the options cannot tell)."""
    return not (o.minibatch == 1 and _wants_factored(o))


def factored_storage(o: Any, compiled: tuple[Any, Any] | None, tau: int, storage: str | None = None) -> bool:
    """Per-position label weights (`structfw.solvers._factored`): asked for (or the storage of a state
    being continued), or "auto", when the solve allows them -- the model's compiled dense chain or
    multiclass oracle (exact, no projection, no weights), one block at a time, with any step, sampling,
    cache or MP-BCFW (their corner sets then keep labellings); asked for otherwise: ValueError naming
    the option (a continued factored state that the solve does not allow becomes rows,
    `structfw.solvers.block_state.BCFWState.unfactor`)."""
    able = compiled is not None and compiled[0] in FACTORED_KINDS and tau == 1
    if storage is not None:
        return able and storage == "factored"
    if o.block_storage == "factored" and not able:
        raise ValueError("block_storage='factored' keeps per-position label weights of a dense chain (or multiclass "
                         "model) with the model's compiled oracle (ChainModel or MulticlassModel on dense inputs, no "
                         "positivity, no weights, no corner source of one's own) and minibatch=1; use 'auto', "
                         "'dense' or 'sparse' here")
    return able and _wants_factored(o)


def make_plan(o: Any, problem: Problem, storage: str | None = None) -> BlockPlan:
    """The plan of a solve of ``problem`` with the options of ``o`` (a `BCFW`).

    ``storage``: "dense", "sparse" or "factored", that of a state being continued (None: from
    ``block_storage``)."""
    source = o.corner_source()
    # the compiled passes implement the three sources of the option table; a corner source of
    # one's own (docs/design.md, "Adding a corner source") runs on the Python route
    builtin = type(source) in (ExactOracle, GapCache, WorkingSet)
    # the compiled passes need an exact oracle the model compiled, no projection and no
    # minibatch (minibatches are for costly oracles, which are not compiled)
    compilable = not problem.approximate and not problem.constrained and o.minibatch == 1
    compiled = problem.compiled_oracle() if compilable and builtin else None
    plain = o.step == "fw" and type(source) is ExactOracle
    factored = factored_storage(o, compiled, o.minibatch, storage)
    # a factored state continued by options that need rows gets the rows "auto" would give
    dense = dense_storage(o, problem) if storage in (None, "factored") else storage == "dense"
    grams = None
    if factored and compiled is not None:
        pos = positions(compiled)
        grams = block_grams(pos[0], pos[1])
    track = o.step in ("pairwise", "away")
    return BlockPlan(
        source=source, step=STEP_PARTS[o.step](), step_name=o.step, step_code=_STEP_CODES[o.step],
        predefined=o.step_size == "predefined",
        nu_step=float(o.oracle_quality) if o.step_size == "predefined" else 0.0, sampling=o.sampling, averaging=o.averaging,
        uses_gaps=o.sampling in ("gap", "max_gap") or bool(o.cache), gap_refresh=o.gap_refresh,
        dense=dense and not factored, factored=grams, track_alpha=track,
        keep_corners=track or bool(o.cache) or bool(o.multi_plane) or bool(source.keeps_corners),
        corner_capacity=o.cache_size + 2 if o.cache else 8,
        # compiled pairwise passes never read or write the rows (passes.compiled_general_pass)
        lazy_rows=o.step == "pairwise" and compiled is not None and not factored,
        tau=o.minibatch, asynchronous=bool(o.asynchronous), compilable=compilable, compiled=compiled,
        plain=plain, check_oracle=bool(o.check_oracle),
        cache=bool(o.cache), cache_F=o.cache_F, cache_nu=o.cache_nu, cache_size=o.cache_size,
        multi_plane=bool(o.multi_plane), max_planes=o.max_planes, plane_timeout=o.plane_timeout,
        max_approx_passes=o.max_approx_passes, approx_rule=o.approx_rule, oracle_work=o.oracle_work)
