"""The block-coordinate Frank-Wolfe engine: one loop, orthogonal options.

Algorithm 1 of Osokin et al. (2016) -- BCFW in the primal-only form
(Alg. 1 of Lacoste-Julien et al. 2013) -- with the papers' contributions as
options of the same loop, each selecting a part of `structfw.solvers.parts`
once per solve (docs/design.md, "The engine and its parts"):

- ``sampling``: "uniform" | "perm" | "gap" | "max_gap"   (2016 paper Sec. 3.1)
- ``step``: "fw" | "pairwise" | "away"                    (2016 paper Sec. 3.2, App. D Alg. 3/4)
- ``step_size``: "linesearch" (Alg. 1 line 7) | "predefined" 2n/(k+2n) (BCFW paper Alg. 3)
- ``cache``: gap-based oracle cache, hit when ghat_i >= max(F g_i, nu/n g)  (2016 Sec. 3.3, Alg. 5)
- ``averaging``: None | "weighted" (eq. (14)) | "suffix" (eq. (15), doubling trick)

State per block (docs/design.md, "Notation"): w_i = A alpha_[i], l_i = b^T alpha_[i];
w = sum_i w_i, l = sum_i l_i; D(alpha) = -lam/2 ||w||^2 + l.
"""
from __future__ import annotations

import math
import time
import warnings
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from .._compile import compile_leaves_in_background
from .._linalg import SparseVector, axpy, dot
from ._fastpass import (AVG_C, AVG_CODES, AVG_LBAR, AVG_T, AWAY_STEP, BAD, CACHE_HITS, DROP_INACTIVE, ELL, EVICT_OVER,
                        EXPIRE, FW_STEP, GAP, K, MAX_GAP, NEED, ORACLE_CALLS, ORDER, PAIRWISE_STEP, general_chunk,
                        plain_fw_chunk)
from ._kernels import dense_block_step, dense_dot, projected_line_search
from .averaging import LazyAverage
from .base import Param, Solver, continue_or_restart
from .corners import CornerStore, cs_away_and_weighted_score, cs_weighted_rows
from .parts import STEP_PARTS, BlockContext, ExactOracle, GapCache, WorkingSet
from .sampling import SAMPLINGS, BlockSampler

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor, StopRule
    from .problem import OracleCorner, Problem

_EMPTY_I = np.empty(0, np.int64)
_EMPTY_V = np.empty(0, np.float64)
STEPS = ("fw", "pairwise", "away")
STEP_SIZES = ("linesearch", "predefined")
BCFW_AVERAGINGS = (None, "weighted", "suffix")


def ground_truth_corners(n: int, d: int, capacity: int, weighted: bool) -> CornerStore:
    """Corner sets holding only the ground truth's corner psi_i(y_i) = 0, L_i(y_i) = 0 (slot 0),
    where alpha^(0) sits (weight 1 when the weights are tracked)."""
    store = CornerStore(n, d, capacity=capacity)
    zero = SparseVector.zeros(d)
    for i in range(n):
        store.add(i, zero, 0.0, alpha=1.0 if weighted else 0.0)
    return store


class BCFWState:
    """Complete state of the block-coordinate engine: everything needed to continue a run.

    Public interface (used by warm starts and the regularisation path):
    `rescale_lam` (keep alpha), `keep_w_change_lam` (Prop. 1),
    `dual`, `delta`, and `BCFW.state_at_corners` to build one
    at a given dual point.

    Attributes
    ----------
    lam : float
    w : ndarray (d,)
    ell : float                l = b^T alpha
    wi : ndarray (n, d) or list of SparseVector   w_i = A alpha_[i] (read only while dense rows are
                               scaled: it is then their product with the scales, a new array)
    wi_scale : ndarray (n,) or None   dense rows are stored scaled, w_i = wi_scale[i] * row i
                               (`scaled_blocks`; `unscaled_blocks` folds them for writers)
    li : ndarray (n,)          l_i = b^T alpha_[i]
    corners : CornerStore or None (with ``alpha`` when ``track_alpha``)
    k : int                    block iterations done (for 2n/(k+2n))
    passes : int               complete passes done (the gap-pass schedule reads it)
    rng : numpy.random.Generator   the generator of the sampler, continued by warm starts
    sampler : BlockSampler     with its gap estimates and position in the pass
    avg : LazyAverage or None  the running average of the iterates
    oracle_gaps, full_gap      block gaps at the last oracle calls and the last full gap (cache rule)
    needs_refresh : bool       the gap estimates are stale (new state, or lam changed)
    rows_stale : bool          the dense rows were not kept up to date (compiled pairwise passes,
                               which never read them): w_i is then A alpha_[i] from the tracked
                               weights, and reading the rows rebuilds them first
    fingerprint : str          digest of the training set it belongs to
    """

    #: states saved before the flag existed kept their rows
    rows_stale = False

    def __init__(self, problem: Problem, dense_blocks: bool, track_alpha: bool, keep_corners: bool,
                 corner_capacity: int = 8, lazy_rows: bool = False) -> None:
        n, d = problem.n, problem.d
        self.lam = problem.lam
        self.n, self.d = n, d
        self.w = np.zeros(d)
        # v = A alpha; the primal iterate is w = Pi(v) (w_S >= 0).  Without constraints Pi is
        # the identity and v is w itself (one array)
        self.v = np.zeros(d) if problem.constrained else self.w
        self.ell = 0.0
        self.dense_blocks = dense_blocks
        if dense_blocks:
            wi = np.zeros((n, d))
            if not lazy_rows:
                wi.fill(0.0)  # touch the pages now: first-touch faults would otherwise slow the first pass
            self.wi = wi
        else:
            self.wi = [SparseVector.zeros(d) for _ in range(n)]
        self.li = np.zeros(n)
        self.track_alpha = track_alpha
        self.corners: CornerStore | None = (ground_truth_corners(n, d, corner_capacity, track_alpha) if keep_corners
                                            else None)
        self.truth = (problem.truth_keys, problem.Y)
        self.k = 0
        self.passes = 0
        self.rng: np.random.Generator | None = None
        self.sampler: BlockSampler | None = None
        self.avg: LazyAverage | None = None
        self.oracle_gaps = np.full(n, np.inf)  # g_i at the last oracle call on i (cache rule)
        self.full_gap: float = np.inf  # g at the last full gap pass (cache rule)
        self.needs_refresh = True
        self.fingerprint = problem.fingerprint
        # w_i = A alpha_[i] = 0 at the start: a state whose passes will not keep the rows (see
        # BCFW.new_state) starts with them stale, and they are then never touched (OCR: 200 MB)
        self.rows_stale = bool(lazy_rows)
        self.avg2: LazyAverage | None = None  # MP-BCFW: the average over approximate steps
        self.mp_iter = 0              # MP-BCFW: outer iterations done (planes are stamped with it)
        self.mp_approx_passes = 0     # MP-BCFW: approximate passes of the last outer iteration
        self.mp_work = 0.0            # MP-BCFW, approx_rule='work': the work counter

    #: the stored rows: an (n, d) array (dense_blocks) or a list of n SparseVector
    _wi: Any
    wi_scale: npt.NDArray[np.float64] | None
    wi_scaled: bool

    @property
    def wi(self) -> npt.NDArray[np.float64] | list[SparseVector]:
        """w_i of every block: the stored rows, or (while they are scaled) their product with
        the scales, a new array.  To write w_i in place call `unscaled_blocks`."""
        self._rebuild_stale_rows()
        if self.wi_scale is not None and self.wi_scaled:
            return self._wi * self.wi_scale[:, None]
        return self._wi

    @wi.setter
    def wi(self, value: npt.NDArray[np.float64] | list[SparseVector]) -> None:
        self._wi = value
        self.wi_scale = np.ones(len(value)) if isinstance(value, np.ndarray) else None
        self.wi_scaled = False

    def scaled_blocks(self, stale_ok: bool = False) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
        """(rows, scales) with w_i = scales[i] * rows[i], which the dense block steps keep up
        to date (`structfw.solvers._kernels.dense_block_step`).  ``stale_ok``: for a
        pass that neither reads nor writes them (it then marks them stale)."""
        if not stale_ok:
            self._rebuild_stale_rows()
        self.wi_scaled = True
        return self._wi, self.wi_scale

    def _rebuild_stale_rows(self) -> None:
        """w_i = A alpha_[i] = sum_y alpha_i(y) psi_i(y) / (lam n) from the tracked weights,
        when pairwise passes left the rows stale.  Skipping the rows saved those passes their
        writes into n rows of d floats that no longer fit in any cache (~9% of an OCR pass);
        the rebuilt rows agree with kept ones to rounding."""
        if not self.rows_stale:
            return
        # stale rows are dense rows of a state that tracks its corners' weights
        cs_weighted_rows(cast(CornerStore, self.corners).arrays, self._wi, 1.0 / (self.lam * self.n))
        cast("npt.NDArray[np.float64]", self.wi_scale)[:] = 1.0
        self.wi_scaled = False
        self.rows_stale = False

    def unscaled_blocks(self) -> npt.NDArray[np.float64] | list[SparseVector]:
        """The stored w_i with the scales folded into the rows (all 1 afterwards): for code that
        writes w_i itself.  Folding rounds, so a fit that continues another is not folded."""
        self._rebuild_stale_rows()
        if self.wi_scale is not None and self.wi_scaled:
            scaled = np.flatnonzero(self.wi_scale != 1.0)
            self._wi[scaled] *= self.wi_scale[scaled, None]
            self.wi_scale[scaled] = 1.0
            self.wi_scaled = False
        return self._wi

    @property
    def resumed(self) -> bool:
        """True once the state has been through a solve (its oracle outputs were checked)."""
        return self.k > 0

    # ----------------------------------------------------------- lam changes
    def rescale_lam(self, lam_new: float) -> None:
        """Keep alpha, change lam: w_i = A alpha_[i] scales by lam/lam_new (warm start).

        The average of the iterates scales with them (wbar = A alphabar); block gaps change,
        so the next solve refreshes its gap estimates."""
        r = self.lam / lam_new
        self.w *= r
        if self.v is not self.w:
            self.v *= r  # Pi(r v) = r Pi(v) for r > 0
        if self.dense_blocks:
            self.wi_scale *= r  # type: ignore[operator, assignment]  # dense rows always have their scales
            self.wi_scaled = True
        else:
            self.wi = [v * r for v in self.wi]
        if self.avg is not None:
            self.avg.u *= r
            self.avg.renormalise()
        self.lam = lam_new
        self.needs_refresh = True

    def keep_w_change_lam(self, lam_new: float) -> None:
        """Proposition 1 of Osokin et al. (2016): rho = lam_new/lam_old,
        alpha_i(y) <- rho alpha_i(y) for y != y_i, the rest onto y_i; then w is
        unchanged and l_i <- rho l_i."""
        rho = lam_new / self.lam
        self.li *= rho
        self.ell = float(self.li.sum())
        if self.corners is not None and self.track_alpha:
            store = self.corners
            zero = SparseVector.zeros(self.d)
            for i in range(self.n):
                alpha = store.alpha[i, :store.size[i]]
                alpha *= rho
                gt = store.add(i, zero, 0.0, 0.0, self.k)  # the ground-truth corner, re-added if dropped
                store.alpha[i, gt] += 1.0 - store.alpha[i, :store.size[i]].sum()
        self.lam = lam_new
        self.needs_refresh = True

    def averaged(self, problem: Problem) -> tuple[npt.NDArray[np.float64], float] | None:
        """(Pi(vbar), lbar): the primal point and l of the averaged dual variables (None without averaging).

        MP-BCFW keeps two averages, over exact and over approximate steps; the reported
        point is the interpolation between them with the best dual value (Shah et al.,
        Sec. 3.5), found by the exact line search of the (projected) dual."""
        if self.avg is None:
            return None
        v1, l1 = self.avg.wbar(self.v), self.avg.lbar
        if self.avg2 is not None and self.avg2.t > 0:
            v2, l2 = self.avg2.wbar(self.v), self.avg2.lbar
            if self.avg.t == 0:
                v1, l1 = v2, l2
            else:
                d = v1 - v2
                idx = np.flatnonzero(d).astype(np.int64)
                mask = problem.nonneg_mask if problem.constrained else np.zeros(self.d, np.bool_)
                theta = projected_line_search(v2, idx, d[idx], mask, problem.lam, l1 - l2, 1.0)
                v1, l1 = v2 + theta * d, l2 + theta * (l1 - l2)
        return problem.project(v1, out=v1) if self.v is not self.w else v1, l1

    def delta(self) -> float:
        """Delta(alpha, lam) = 1/n sum_i sum_y alpha_i(y) H_i(y; w) = l - lam ||w||^2 (eq. (11))."""
        return self.ell - self.lam * float(np.dot(self.w, self.w))

    def dual(self) -> float:
        return -0.5 * self.lam * float(np.dot(self.w, self.w)) + self.ell

    def block_w_dot(self, i: int, w: npt.NDArray[np.float64]) -> float:
        """<w_i, w> (without rescaling the stored rows; from the tracked weights, the sum of
        alpha_i(y) <psi_i(y), w> / (lam n), while the rows are stale)."""
        if self.rows_stale:
            # stale rows are dense rows of a state that tracks its corners' weights
            corners = cast(CornerStore, self.corners)
            return cs_away_and_weighted_score(corners.arrays, i, w)[1] * (1.0 / (self.lam * self.n))
        if self.dense_blocks:
            return float(self.wi_scale[i]) * dense_dot(self._wi[i], w)  # type: ignore[index]  # dense: scaled
        return dot(self._wi[i], w)

    def n_active(self) -> float:
        if self.corners is None:
            return math.nan
        return self.corners.n_active(weighted=self.track_alpha)


class BCFW(Solver):
    """Block-coordinate Frank-Wolfe for the SSVM dual, with every variant as an option.

    One engine (Alg. 1 of Osokin et al. 2016); each option selects a part
    (`structfw.solvers.parts`) once per solve.  Any combination works.

    Parameters
    ----------
    step_size : {"linesearch", "predefined"}
        Closed-form line search (Alg. 1 line 7 of Osokin et al. 2016) or the
        predefined step 2n/(k+2n) (Alg. 3 of Lacoste-Julien et al. 2013).
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
    gap_refresh : int
        Passes between the full gap passes of gap sampling and the cache.
    block_storage : {"auto", "dense", "sparse"}
        How the n block parts w_i are stored: an (n, d) array (fast for small
        d) or one sparse vector per block (CoNLL-size sparse problems).
        "auto" picks dense when n*d*8 bytes <= ``max_dense_bytes``.
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
    PARAMS: tuple[Param, ...] = (
        Param("step_size", "linesearch", "choice", STEP_SIZES,
              help="Line search (Alg. 1 line 7) or the predefined 2n/(k+2n)."),
        Param("sampling", "uniform", "choice", SAMPLINGS, help="Block sampling (gap: Osokin et al. Sec. 3.1)."),
        Param("step", "fw", "choice", STEPS, help="Block step: Frank-Wolfe, pairwise or away."),
        Param("cache", False, "bool", help="Gap-based oracle cache (Osokin et al. Sec. 3.3)."),
        Param("cache_F", 0.25, "float", low=0.0, low_open=True, help="F of the cache hit rule."),
        Param("cache_nu", 0.01, "float", low=0.0, low_open=True, help="nu of the cache hit rule."),
        Param("cache_size", 50, "int", low=2, help="Largest number of corners cached per block."),
        Param("averaging", None, "choice", BCFW_AVERAGINGS, help="Averaging of the iterates (eqs. (14), (15))."),
        Param("gap_refresh", 10, "int", low=1, help="Passes between full gap passes (gap sampling, cache)."),
        Param("block_storage", "auto", "choice", ("auto", "dense", "sparse"), help="Storage of the w_i."),
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

    step_size: str
    sampling: str
    step: str
    cache: bool
    cache_F: float
    cache_nu: float
    cache_size: int
    averaging: str | None
    gap_refresh: int
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
                 averaging: str | None = None, gap_refresh: int = 10, block_storage: str = "auto",
                 max_dense_bytes: int = 2 * 1024 ** 3, check_oracle: bool = True, multi_plane: bool = False,
                 max_planes: int = 1000, max_approx_passes: int = 1000, plane_timeout: int = 10,
                 approx_rule: str = "work", oracle_work: float = 10.0, minibatch: int = 1,
                 asynchronous: bool = False) -> None:
        self._init_params(locals())
        self._check_combination()

    def _check_combination(self) -> None:
        if self.asynchronous and self.minibatch < 2:
            raise ValueError("asynchronous=True keeps minibatch=tau oracle calls in flight: give minibatch >= 2 "
                             f"(tau >= n_jobs + 1 keeps every worker busy); got minibatch={self.minibatch}")
        if self.multi_plane and self.cache:
            raise ValueError("cache=True and multi_plane=True are two caches of oracle corners: choose one "
                             "(MP-BCFW's working sets replace the gap-based cache)")

    def validate_params(self) -> None:
        super().validate_params()
        self._check_combination()

    @property
    def label(self) -> str:
        """A short name in the papers' style, e.g. "BCPFW-gap-cache-wavg"."""
        base = {"fw": "BCFW", "pairwise": "BCPFW", "away": "BCAFW"}[self.step]
        parts = ["MP-" + base if self.multi_plane else base]
        if self.sampling not in ("uniform",):
            parts.append(self.sampling)
        if self.cache:
            parts.append("cache")
        if self.step_size == "predefined":
            parts.append("fixed")
        if self.averaging:
            parts.append({"weighted": "wavg", "suffix": "tavg"}[self.averaging])
        return "-".join(parts)

    # ================================================================ parts
    def _parts(self):
        """The corner source and block step these options select."""
        step = STEP_PARTS[self.step]()
        if self.multi_plane:
            source = WorkingSet(self.max_planes, self.plane_timeout)
        elif self.cache:
            source = GapCache(self.cache_F, self.cache_nu, self.cache_size)
        else:
            source = ExactOracle()
        return source, step

    @property
    def _uses_gaps(self):
        # gap sampling and the cache rule read block gaps and the full gap: for them a
        # full gap pass every gap_refresh passes is part of the algorithm
        return self.sampling in ("gap", "max_gap") or bool(self.cache)

    # ================================================================ state
    def new_state(self, problem: Problem, rng: int | np.random.Generator | None = None) -> BCFWState:
        """A fresh state at alpha = e_{y_i} for every block (w = 0)."""
        dense = self.block_storage == "dense" or (
            self.block_storage == "auto" and problem.n * problem.d * 8 <= self.max_dense_bytes)
        track = self.step in ("pairwise", "away")
        # compiled pairwise passes never read or write the rows (_compiled_general_pass)
        lazy = self.step == "pairwise" and self._compilable(problem, dense) and problem.compiled_oracle() is not None
        st = BCFWState(problem, dense, track_alpha=track, keep_corners=track or self.cache or self.multi_plane,
                       corner_capacity=self.cache_size + 2 if self.cache else 8, lazy_rows=lazy)
        st.rng = np.random.default_rng(rng)
        st.sampler = BlockSampler(self.sampling, problem.n, st.rng)
        self._new_averages(st)
        return st

    def _new_averages(self, st: BCFWState) -> None:
        """The running average; MP-BCFW keeps one over exact and one over approximate steps (Sec. 3.5)."""
        st.avg = LazyAverage(self.averaging, st.w, st.ell) if self.averaging else None
        st.avg2 = LazyAverage(self.averaging, st.w, st.ell) if self.averaging and self.multi_plane else None

    def state_at_corners(self, problem: Problem, labellings: Sequence[Any],
                         rng: int | np.random.Generator | None = None) -> BCFWState:
        """The dual point alpha_i(y'_i) = 1 for the given labelling y'_i of every block.

        With y'_i = y_i this is the fresh state (w = 0); the regularisation path
        starts from the oracle's labellings at w = 0 (Osokin et al. 2016, Sec. 4)."""
        st = self.new_state(problem, rng)
        inv = 1.0 / (problem.lam * problem.n)
        # rows the state's passes never read stay stale (rebuilt from the weights if ever
        # read): writing them would fault in n*d*8 bytes (200 MB on OCR) for nothing
        lazy = st.rows_stale and st.track_alpha
        if lazy:
            st.v[:] = 0.0
        for i, y in enumerate(labellings):
            y, psi, L, _ = problem.oracle_corner(i, y, st.w, validate=True)
            if lazy:
                np.add.at(st.v, psi.indices, psi.values * inv)
            elif st.dense_blocks:
                row = cast("npt.NDArray[np.float64]", st.unscaled_blocks())[i]  # dense_blocks: an (n, d) array
                row[:] = 0.0
                np.add.at(row, psi.indices, psi.values * inv)
            else:
                st.wi[i] = psi * inv
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
        self._new_averages(st)
        return st

    def init_state(self, problem: Problem, state: object | None, rng: int | np.random.Generator | None) -> BCFWState:
        st = continue_or_restart(state, BCFWState, problem)
        if st is not None:
            st = self._continue(problem, st)
        if st is None:
            st = self.new_state(problem, rng)
        st.fingerprint = problem.fingerprint
        self._ctx = BlockContext(problem, st, *self._parts())
        if self._compilable(problem, st.dense_blocks):
            problem.compiled_oracle()  # pack the data now, before the clock starts
        return st

    def _continue(self, problem, st):
        """Carry a previous state into this solve: rescale to a new lam, adapt the parts."""
        needs_alpha = self.step in ("pairwise", "away")
        if needs_alpha and not st.track_alpha:
            warnings.warn(f"warm start: the previous state has no active sets, which step={self.step!r} needs; "
                          "starting afresh", RuntimeWarning, stacklevel=4)
            return None
        if st.lam != problem.lam:
            st.rescale_lam(problem.lam)
        if (self.cache or needs_alpha or self.multi_plane) and st.corners is None:
            st.corners = ground_truth_corners(problem.n, problem.d, 8, False)
        if not needs_alpha:
            st._rebuild_stale_rows()  # while the weights the rows are rebuilt from are still tracked
        st.track_alpha = needs_alpha
        if st.sampler is None or st.sampler.kind != self.sampling:
            st.sampler = BlockSampler(self.sampling, problem.n, st.rng)
            st.needs_refresh = True
        if ((st.avg.kind if st.avg is not None else None) != self.averaging
                or (st.avg2 is not None) != bool(self.averaging and self.multi_plane)):
            self._new_averages(st)
        return st

    # ============================================================= gap pass
    def gap_pass(self, problem: Problem, state: BCFWState, w: npt.NDArray[np.float64] | None = None,
                 validate: bool = True,
                 corners: bool = False) -> tuple[float, npt.NDArray[np.float64] | None, list[OracleCorner] | None]:
        """One oracle call per block at w: primal, block gaps (6), total gap (7).

        Returns (primal, block_gaps, oracle results or None).  With w = state.w the
        block gaps are g_i = lam <w_i, w> - l_i + H_i(y_i*; w)/n; their sum is
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
            wdots = np.array([state.block_w_dot(i, w) for i in range(problem.n)])
            gaps = problem.lam * wdots - state.li + Hs / problem.n
        return primal, gaps, res

    # ================================================================ skeleton parts
    def checkpoint_due(self, st: BCFWState, since_check: int, done: int, stop: StopRule, monitor: Monitor) -> bool:
        return (self._uses_gaps and st.passes % self.gap_refresh == 0) or super().checkpoint_due(
            st, since_check, done, stop, monitor)

    def checkpoint(self, problem: Problem, st: BCFWState, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """A full gap pass (two with averaging).  It is the algorithm's own gap pass
        (its oracle calls count, its gaps feed the sampler and the cache) on the
        gap_refresh schedule; any other checkpoint only measures."""
        ctx = self._ctx
        if monitoring_only or not self._uses_gaps:
            refresh = False
        elif initial:
            refresh = st.needs_refresh
        else:
            refresh = st.passes % self.gap_refresh == 0
        n = problem.n
        with monitor.monitoring():
            primal, gaps_at_w, res = self.gap_pass(problem, st, validate=self.check_oracle,
                                                   corners=refresh and ctx.source.absorbs_corners)
            gaps = cast("npt.NDArray[np.float64]", gaps_at_w)  # at st.w: the block gaps are computed
            if refresh:
                cast(BlockSampler, st.sampler).set_all(gaps)  # init_state gave the state its sampler
                st.oracle_gaps[:] = gaps
                st.full_gap = float(np.sum(gaps))
                st.needs_refresh = False
                ctx.source.absorb_gap_pass(st, res, problem)
                ctx.counters["oracle_calls"] += n
            else:
                monitor.monitor_calls += n
            gap = float(gaps.sum())
            dual = st.dual()
            w_rep = st.w
            if st.avg is not None:
                w_rep, lbar = cast("tuple[npt.NDArray[np.float64], float]", st.averaged(problem))  # st.avg is set
                primal, _, _ = self.gap_pass(problem, st, w=w_rep, validate=False)
                monitor.monitor_calls += n
                dual = -0.5 * problem.lam * float(np.dot(w_rep, w_rep)) + lbar
                gap = primal - dual
            c = ctx.counters
            extra = {}
            if self.multi_plane:
                corners = cast(CornerStore, st.corners)  # multi_plane keeps the working sets there
                extra = dict(planes_per_block=float(corners.size.mean()), approx_passes=st.mp_approx_passes,
                             outer_iterations=st.mp_iter)
            monitor.record(w_rep, c["oracle_calls"] / n, c["oracle_calls"], primal, dual, gap,
                           engine_passes=ctx.passes_done, iterations=st.k, cache_hits=c["cache_hits"],
                           active_corners=st.n_active(),
                           oracle_time_frac=c["oracle_time"] / max(monitor.opt_time(), 1e-12), **extra)
        return gap

    def result_w(self, st: BCFWState) -> npt.NDArray[np.float64]:
        if st.avg is None:
            return st.w.copy()
        return cast("tuple[npt.NDArray[np.float64], float]", st.averaged(self._ctx.problem))[0]

    # ======================================================= one data pass
    def run_pass(self, problem: Problem, st: BCFWState, flag: InterruptFlag) -> None:
        """n block iterations (fewer if Ctrl-C arrives: the pass ends after the current step).

        With ``multi_plane`` one call is an outer iteration of MP-BCFW (Alg. 3 lines 5-6):
        an exact pass, then approximate passes until the rule of Sec. 3.4 stops them."""
        if not self.multi_plane:
            self._block_pass(problem, st, flag)
            return
        ctx = self._ctx
        st.mp_iter += 1
        ctx.stamp = st.mp_iter
        clock = self._mp_clock(st, problem)
        t0, D0 = clock(), st.dual()
        self._mp_pass(problem, st, flag, approx=False)
        done = 0
        t_prev, D_prev = clock(), st.dual()
        while done < self.max_approx_passes and not flag.requested:
            self._mp_pass(problem, st, flag, approx=True, work=clock)
            done += 1
            t, D = clock(), st.dual()
            # Sec. 3.4: go on while the last pass raised D faster than the iteration so far
            slope_last = (D - D_prev) / max(t - t_prev, 1e-300)
            slope_iter = (D - D0) / max(t - t0, 1e-300)
            if slope_last < slope_iter:
                break
            t_prev, D_prev = t, D
        st.mp_approx_passes = done
        ctx.counters["approx_passes"] = ctx.counters.get("approx_passes", 0) + done

    def _mp_clock(self, st, problem):
        """Seconds, or the deterministic work counter of approx_rule='work'."""
        if self.approx_rule == "time":
            return time.perf_counter
        return lambda: st.mp_work

    def _mp_pass(self, problem, st, flag, approx, work=None):
        """An exact or approximate pass; the other kind's average is held fixed meanwhile."""
        ctx = self._ctx
        ctx.source.approx = approx
        live, held = (st.avg2, st.avg) if approx else (st.avg, st.avg2)
        frozen = held.wbar(st.v) if held is not None else None
        if self.approx_rule == "work":
            # an exact pass costs n oracle calls, an approximate one a dot product per plane
            st.mp_work += float(st.corners.size.sum()) + problem.n if approx else problem.n * (self.oracle_work + 1.0)
        try:
            self._block_pass(problem, st, flag, order=st.rng.permutation(problem.n) if approx else None,
                             approx=approx, avg=live)
        finally:
            ctx.source.approx = False
            if held is not None:
                held.set_from(frozen, st.v)

    def _block_pass(self, problem, st, flag, order=None, approx=False, avg=None):
        """One pass of n block steps: blocks from the sampler (or ``order``), the live average ``avg``."""
        ctx = self._ctx
        if avg is None and not approx:
            avg = st.avg
        ctx.validate = self.check_oracle and st.passes == 0 and not st.resumed and not approx
        if order is None:
            st.sampler.start_pass()
        n = problem.n
        predefined = self.step_size == "predefined"
        plain = self.step == "fw" and not self.cache and not self.multi_plane
        compiled = problem.compiled_oracle() if self._compilable(problem, st.dense_blocks) else None
        if compiled is not None:
            if plain:
                return self._compiled_pass(ctx, compiled, flag)
            return self._compiled_general_pass(ctx, compiled, flag, order, approx, avg)
        fast = plain and self._compilable(problem, st.dense_blocks) and not ctx.validate
        ctx.u = avg.u if avg is not None else _EMPTY_V
        ctx.inv_c = 0.0
        tau = self.minibatch if not approx else 1
        window = deque() if self.asynchronous and tau > 1 else None
        batch = []
        for s in range(n):
            if flag.requested:
                break
            if window is not None:
                i = self._next_in_window(ctx, window, order, s + len(window), min(s + tau, n))
            elif not batch:
                # the next tau blocks; their oracles run at once at the current w (Wang et al. 2016)
                batch = [int(order[t]) if order is not None else st.sampler.next() for t in range(s, min(s + tau, n))]
                if tau > 1:
                    ctx.source.prefetch(ctx, batch)
                batch.reverse()
            if window is None:
                i = batch.pop()
            ctx.gfixed = 2.0 * n / (st.k + 2.0 * n) if predefined else -1.0
            rho = 0.0
            if avg is not None:
                rho, ctx.inv_c = avg.begin_step()
            if fast:
                self._plain_fw_block(ctx, i)
            else:
                slot, psi, L, g_i, _ = ctx.source.fw_corner(ctx, i)
                ctx.step.move(ctx, i, slot, psi, L, g_i)
                ctx.source.tidy(st, i)
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

    @staticmethod
    def _next_in_window(ctx, window, order, drawn, stop):
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

    #: block iterations per compiled call: Ctrl-C is polled between chunks
    COMPILED_CHUNK = 1024

    def _compilable(self, problem, dense_blocks):
        """The compiled passes need dense w_i, an exact oracle compiled by the model, no projection,
        no minibatch (minibatches are for costly oracles, which are not compiled)."""
        return dense_blocks and not problem.approximate and not problem.constrained and self.minibatch == 1

    def _chunk_plan(self, st, m):
        """(sampling code, block order, uniform draws) for the next m steps."""
        sampler = st.sampler
        kind = {"uniform": ORDER, "perm": ORDER, "gap": GAP, "max_gap": MAX_GAP}[sampler.kind]
        order = sampler.take_order(m) if kind == ORDER else _EMPTY_I
        draws = st.rng.random(m) if kind == GAP else _EMPTY_V
        return kind, order, draws

    def _tidy_rule(self, st, approx):
        """(tidy kind, limit, stamp) of the compiled general pass for these options."""
        if self.multi_plane:
            if approx:
                return EXPIRE, st.mp_iter - self.plane_timeout + 1, st.mp_iter
            return EVICT_OVER, self.max_planes, st.mp_iter
        if self.cache:
            return EVICT_OVER, self.cache_size, -1
        return DROP_INACTIVE, 0, -1

    def _compiled_general_pass(self, ctx, compiled, flag, order=None, approx=False, avg=None):
        """Cache / pairwise / away / MP-BCFW steps on the flat corner sets, in numba chunks
        (`general_chunk`)."""
        st, problem = ctx.st, ctx.problem
        oracle_kind, data = compiled
        n, store = problem.n, st.corners
        tidy_kind, limit, stamp = self._tidy_rule(st, approx)
        step_kind = {"fw": FW_STEP, "pairwise": PAIRWISE_STEP, "away": AWAY_STEP}[self.step]
        avg_kind = AVG_CODES[avg.kind if avg is not None else None]
        u = avg.u if avg is not None else _EMPTY_V
        it = np.zeros(6, np.int64)
        it[K], it[AVG_T] = st.k, (avg.t if avg is not None else 0)
        fl = np.array([st.ell, avg.c if avg is not None else 1.0, avg.lbar if avg is not None else 0.0,
                       st.full_gap])
        # pairwise steps with tracked weights never read w_i: the pass leaves the rows stale
        keep_rows = not (step_kind == PAIRWISE_STEP and st.track_alpha)
        rows, scales = st.scaled_blocks(stale_ok=not keep_rows)
        done = 0
        while done < n and not flag.requested:
            m = min(self.COMPILED_CHUNK, n - done)
            if order is None:
                kind, chunk_order, draws = self._chunk_plan(st, m)
            else:
                kind, chunk_order, draws = ORDER, np.ascontiguousarray(order[done:done + m], np.int64), _EMPTY_V
            s = 0
            while True:
                s, status = general_chunk(
                    oracle_kind, data, store.arrays, s, m, kind, chunk_order, draws, st.sampler.estimates,
                    st.sampler._tree, st.w, rows, scales, st.li, problem.lam, step_kind, self.cache, self.cache_F,
                    self.cache_nu, st.track_alpha, self.step_size == "predefined", avg_kind, self.check_oracle,
                    st.oracle_gaps, u, it, fl, approx, stamp, tidy_kind, limit, keep_rows)
                st.rows_stale = st.rows_stale or not keep_rows
                if status == 0:
                    break
                if status == 2:  # not a maximiser: the checked Python call names the example
                    problem.oracle(int(it[BAD]), st.w, validate=True)
                    problem.check_oracle_value(int(it[BAD]), -np.inf)
                store.make_room(int(it[BAD]), int(it[NEED]))
            done += m
        st.k, st.ell = int(it[K]), float(fl[ELL])
        ctx.counters["oracle_calls"] += int(it[ORACLE_CALLS])
        ctx.counters["cache_hits"] += int(it[CACHE_HITS])
        if avg is not None:
            avg.t, avg.c, avg.lbar = int(it[AVG_T]), float(fl[AVG_C]), float(fl[AVG_LBAR])
            avg.renormalise()
        if done == n and not approx:
            st.passes += 1
            ctx.passes_done += 1

    def _compiled_pass(self, ctx, compiled, flag):
        """The (FW, exact oracle, dense) pass in numba chunks (`._fastpass`)."""
        st, problem = ctx.st, ctx.problem
        oracle_kind, data = compiled
        n, sampler, avg = problem.n, st.sampler, st.avg
        avg_kind = AVG_CODES[avg.kind if avg is not None else None]
        u = avg.u if avg is not None else _EMPTY_V
        t, c, lbar = (avg.t, avg.c, avg.lbar) if avg is not None else (0, 1.0, 0.0)
        scratch = np.zeros(problem.d)
        rows, scales = st.scaled_blocks()
        compile_leaves_in_background(oracle_kind)
        done = 0
        while done < n and not flag.requested:
            m = min(self.COMPILED_CHUNK, n - done)
            kind, order, draws = self._chunk_plan(st, m)
            st.ell, st.k, t, c, lbar, steps, bad = plain_fw_chunk(
                oracle_kind, data, m, kind, order, draws, sampler.estimates, sampler._tree, st.w, rows, scales, st.li,
                st.ell, problem.lam, st.k, self.step_size == "predefined", avg_kind, u, t, c, lbar,
                self.check_oracle, scratch, _EMPTY_V)
            ctx.counters["oracle_calls"] += steps + (bad >= 0)
            if bad >= 0:  # the compiled oracle is not a maximiser: the checked Python call names the example
                problem.oracle(bad, st.w, validate=True)
                problem.check_oracle_value(bad, -np.inf)
            done += m
        if avg is not None:
            avg.t, avg.c, avg.lbar = t, c, lbar
            avg.renormalise()
        if done == n:
            st.passes += 1
            ctx.passes_done += 1

    @staticmethod
    def _plain_fw_block(ctx, i):
        """Alg. 1 lines 4-11 with the dense block kernel (FW step, exact oracle, dense w_i)."""
        st, problem = ctx.st, ctx.problem
        t0 = time.perf_counter()
        y = problem.max_oracle(i, st.w)
        ctx.counters["oracle_time"] += time.perf_counter() - t0
        psi, L = problem.corner(i, y)
        ctx.counters["oracle_calls"] += 1
        li = st.li[i]
        dl = L / ctx.n - li
        rows, scales = st.scaled_blocks()
        gamma, slope, scales[i] = dense_block_step(st.w, rows[i], scales[i], -1.0, psi.indices, psi.values,
                                                   ctx.inv_ln, _EMPTY_I, _EMPTY_V, 0.0, dl, ctx.lam, 1.0, ctx.gfixed,
                                                   ctx.u, ctx.inv_c)
        st.li[i] = li + gamma * dl
        st.ell += gamma * dl
        if st.sampler.adaptive:
            st.sampler.update(i, -slope)


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

    Parameters
    ----------
    step_size, sampling, step, cache, cache_F, cache_nu, cache_size, averaging, gap_refresh, block_storage, \
max_dense_bytes, check_oracle, multi_plane, max_planes, max_approx_passes, plane_timeout, approx_rule, \
oracle_work, minibatch, asynchronous
        As for `BCFW`; only the defaults differ: ``multi_plane=True``.
    """

    name = "mpbcfw"
    PARAMS = tuple(replace(p, default=True) if p.name == "multi_plane" else p for p in BCFW.PARAMS)

    def __init__(self, step_size: str = "linesearch", sampling: str = "uniform", step: str = "fw",
                 cache: bool = False, cache_F: float = 0.25, cache_nu: float = 0.01, cache_size: int = 50,
                 averaging: str | None = None, gap_refresh: int = 10, block_storage: str = "auto",
                 max_dense_bytes: int = 2 * 1024 ** 3, check_oracle: bool = True, multi_plane: bool = True,
                 max_planes: int = 1000, max_approx_passes: int = 1000, plane_timeout: int = 10,
                 approx_rule: str = "work", oracle_work: float = 10.0, minibatch: int = 1,
                 asynchronous: bool = False) -> None:
        self._init_params(locals())
        self._check_combination()
