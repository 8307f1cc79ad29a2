"""The complete state of the block-coordinate engine (`BCFWState`) and its starting point.

docs/design.md, "State, warm starts and exact resume": w_i = A alpha_[i], l_i = b^T alpha_[i],
w = sum_i w_i, l = sum_i l_i, D(alpha) = -lam/2 ||w||^2 + l (Osokin et al. 2016, Alg. 1).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector
from ._factored import FactoredBlocks
from ._kernels import projected_line_search
from .averaging import LazyAverage
from .corners import CornerStore, cs_away_and_weighted_score, cs_entries, cs_weighted_rows
from .rows import SparseRows, dense_dot, sparse_row_dot

if TYPE_CHECKING:
    from .problem import Problem
    from .sampling import BlockSampler


def ground_truth_corners(n: int, d: int, capacity: int, weighted: bool, truths: Any = None) -> CornerStore:
    """Corner sets holding only the ground truth's corner psi_i(y_i) = 0, L_i(y_i) = 0 (slot 0),
    where alpha^(0) sits (weight 1 when the weights are tracked).  With ``truths`` (the labellings
    y_i) the sets keep labellings (the factored storage, `CornerStore`'s ``labels``)."""
    store = CornerStore(n, d, capacity=capacity, labels=truths is not None)
    zero = SparseVector.zeros(d)
    for i in range(n):
        store.add(i, zero, 0.0, alpha=1.0 if weighted else 0.0, y=None if truths is None else truths[i])
    return store


def psi_corners(store: CornerStore, problem: Problem) -> CornerStore:
    """A store of labellings as a store of their corners (psi_i(y), L_i(y)), slot by slot: the same
    losses, weights and stamps."""
    out = CornerStore(store.n, store.d, capacity=store.key.shape[1])
    for i in range(store.n):
        scalar = np.ndim(problem.Y[i]) == 0  # a multiclass label, stored as a labelling of length 1
        for k in range(int(store.size[i])):
            y = store.labelling(i, k)
            psi, _ = problem.corner(i, int(y[0]) if scalar else y)
            before = int(out.size[i])
            slot = out.add(i, psi, float(store.loss[i, k]), float(store.alpha[i, k]), int(store.last[i, k]))
            if int(out.size[i]) == before:  # two labellings with one psi (equal positions): their weights add
                out.alpha[i, slot] += float(store.alpha[i, k])
    return out


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
    #: the factored w_i of a chain (`structfw.solvers._factored.FactoredBlocks`) instead of rows; set on
    #: the instance only when used, so that states with rows are saved and read as before
    factored: FactoredBlocks | None = None

    def __init__(self, problem: Problem, dense_blocks: bool, track_alpha: bool, keep_corners: bool,
                 corner_capacity: int = 8, lazy_rows: bool = False,
                 factored: tuple[npt.NDArray[np.int64], int] | None = None) -> None:
        n, d = problem.n, problem.d
        self.lam = problem.lam
        self.n, self.d = n, d
        self.w = np.zeros(d)
        # v = A alpha; the primal iterate is w = Pi(v) (w_S >= 0).  Without constraints Pi is
        # the identity and v is w itself (one array)
        self.v = np.zeros(d) if problem.constrained else self.w
        self.ell = 0.0
        self.dense_blocks = dense_blocks
        if factored is not None:  # (block starts, K): label weights per position, no rows
            self.factored = FactoredBlocks(*factored)
            self.dense_blocks = True
            self.wi = np.zeros((n, 0))
        elif dense_blocks:
            wi = np.zeros((n, d))
            if not lazy_rows:
                wi.fill(0.0)  # touch the pages now: first-touch faults would otherwise slow the first pass
            self.wi = wi
        else:
            self.wi = SparseRows(n, d, _pool_hint(problem))
        self.li = np.zeros(n)
        self.track_alpha = track_alpha
        # the factored storage's corner sets keep labellings (its steps score them from the unary scores)
        truths = problem.Y if factored is not None else None
        self.corners: CornerStore | None = (ground_truth_corners(n, d, corner_capacity, track_alpha, truths)
                                            if keep_corners else None)
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
        # MP-BCFW: the dual before the last exact pass and its cost (work or seconds), which the
        # slope rule of its approximate passes measures from; cost 0: none are due
        self.mp_exact_dual = 0.0
        self.mp_exact_cost = 0.0

    #: the stored rows v_i (w_i = wi_scale[i] v_i): an (n, d) array (dense_blocks) or `SparseRows`
    _wi: Any
    wi_scale: npt.NDArray[np.float64]
    wi_scaled: bool

    @property
    def storage(self) -> str:
        """How the w_i are stored: "dense" or "sparse" rows, or "factored"."""
        if self.factored is not None:
            return "factored"
        return "dense" if self.dense_blocks else "sparse"

    def _no_rows(self) -> None:
        if self.factored is not None:
            raise ValueError("this state stores its w_i factored (block_storage='factored': per-position label "
                             "weights, no rows); continue it with plain FW steps, or fit with block_storage="
                             "'dense' or 'sparse' for a state with rows")

    def unfactor(self, Xc: npt.NDArray[np.float64], dense: bool, problem: Problem) -> None:
        """Store the factored w_i as rows (dense, or sparse), for options that need rows: the same
        w_i, to rounding, in the model's layout (`FactoredBlocks.row`); corner sets of labellings
        become sets of their psi (the same corners, weights and stamps)."""
        fb = cast(FactoredBlocks, self.factored)
        if self.corners is not None and self.corners.labels:
            self.corners = psi_corners(self.corners, problem)
        if dense:
            rows: Any = np.empty((self.n, self.d))
            for i in range(self.n):
                rows[i] = fb.row(Xc, i, self.d)
        else:
            rows = SparseRows(self.n, self.d)
            for i in range(self.n):
                r = fb.row(Xc, i, self.d)
                nz = np.flatnonzero(r)
                rows.set_row(i, SparseVector(nz, r[nz], self.d))
        del self.factored  # the class default (None): a state with rows again
        self.dense_blocks = dense
        self.wi = rows
        self.rows_stale = False

    @property
    def wi(self) -> npt.NDArray[np.float64] | list[SparseVector]:
        """w_i of every block, a new (n, d) array or list of n SparseVector when the rows are
        scaled or sparse.  To write w_i in place call `unscaled_blocks`."""
        self._no_rows()
        self._rebuild_stale_rows()
        if isinstance(self._wi, SparseRows):
            return [self._wi.row(i) * float(self.wi_scale[i]) for i in range(self.n)]
        if self.wi_scaled:
            return self._wi * self.wi_scale[:, None]
        return self._wi

    @wi.setter
    def wi(self, value: npt.NDArray[np.float64] | SparseRows | list[SparseVector]) -> None:
        if isinstance(value, list):  # a list of sparse blocks (states saved before SparseRows)
            rows = SparseRows(len(value), self.d)
            for i, v in enumerate(value):
                rows.set_row(i, v)
            value = rows
        self._wi = value
        self.wi_scale = np.ones(value.shape[0] if isinstance(value, np.ndarray) else value.n)
        self.wi_scaled = False

    def scaled_blocks(self, stale_ok: bool = False) -> tuple[Any, npt.NDArray[np.float64]]:
        """(rows, scales) with w_i = scales[i] * v_i, which the block steps keep up to date
        (`structfw.solvers._kernels.block_step`).  ``stale_ok``: for a pass that neither reads
        nor writes them (it then marks them stale)."""
        if not stale_ok:
            self._rebuild_stale_rows()
        self.wi_scaled = True
        return self._wi, self.wi_scale

    def layout(self, keep_rows: bool = True) -> tuple[Any, ...]:
        """The rows as the compiled block step takes them (`structfw.solvers.rows`): dense
        (scales, rows), sparse (scales, start, nnz, cap, idx, val, meta), or (scales,) for a
        pass that does not keep the rows (it marks them stale)."""
        self._no_rows()
        rows, scales = self.scaled_blocks(stale_ok=not keep_rows)
        if not keep_rows:
            return (scales,)
        if isinstance(rows, SparseRows):
            return rows.arrays(scales)
        return (scales, rows)

    def make_row_room(self, i: int, extra: int) -> None:
        """Room for ``extra`` more entries in block i's sparse row (nothing for dense rows)."""
        if isinstance(self._wi, SparseRows):
            self._wi.make_room(i, extra)

    def _rebuild_stale_rows(self) -> None:
        """w_i = A alpha_[i] = sum_y alpha_i(y) psi_i(y) / (lam n) from the tracked weights,
        when pairwise passes left the rows stale.  Skipping the rows saved those passes their
        writes into n rows of d floats that no longer fit in any cache (~9% of an OCR pass);
        the rebuilt rows agree with kept ones to rounding."""
        if not self.rows_stale:
            return
        # stale rows belong to a state that tracks its corners' weights
        corners = cast(CornerStore, self.corners)
        inv = 1.0 / (self.lam * self.n)
        if isinstance(self._wi, SparseRows):
            for i in range(self.n):
                acc: dict[int, float] = {}
                for k in range(int(corners.size[i])):
                    a = float(corners.alpha[i, k])
                    if a != 0.0:
                        idx, val = cs_entries(corners.arrays, i, k)
                        for j, x in zip(idx.tolist(), val.tolist()):
                            acc[j] = acc.get(j, 0.0) + a * x * inv
                keys = np.array(sorted(acc), np.int64)
                self._wi.set_row(i, SparseVector(keys, np.array([acc[j] for j in keys.tolist()]), self.d))
        else:
            cs_weighted_rows(corners.arrays, self._wi, inv)
        self.wi_scale[:] = 1.0
        self.wi_scaled = False
        self.rows_stale = False

    def unscaled_blocks(self) -> Any:
        """The stored w_i with the scales folded into the rows (all 1 afterwards): for code that
        writes w_i itself.  Folding rounds, so a fit that continues another is not folded."""
        self._no_rows()
        self._rebuild_stale_rows()
        if self.wi_scaled:
            scaled = np.flatnonzero(self.wi_scale != 1.0)
            if isinstance(self._wi, SparseRows):
                for i in scaled.tolist():
                    self._wi.scale_row(i, float(self.wi_scale[i]))
            else:
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
        self.wi_scale *= r
        self.wi_scaled = True
        if self.factored is not None:
            self.factored.rescale(r)
        for avg in (self.avg, self.avg2):  # avg2: MP-BCFW's average over approximate steps
            if avg is not None:
                avg.u *= r
                avg.renormalise()
        self.lam = lam_new
        self.needs_refresh = True
        self.mp_exact_cost = 0.0  # the dual the slope rule measures from was at the old lam

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
                # the ground-truth corner (its labelling in a store of labellings), re-added if dropped
                gt = store.add(i, zero, 0.0, 0.0, self.k, y=self.truth[1][i])
                store.alpha[i, gt] += 1.0 - store.alpha[i, :store.size[i]].sum()
        self.lam = lam_new
        self.needs_refresh = True
        self.mp_exact_cost = 0.0  # the dual the slope rule measures from was at the old lam

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
        """⟨w_i, w⟩ (without rescaling the stored rows; from the tracked weights, the sum of
        alpha_i(y) ⟨psi_i(y), w⟩ / (lam n), while the rows are stale).  Factored w_i are read with
        the data (`structfw.solvers._factored.block_w_dots`)."""
        self._no_rows()
        if self.rows_stale:
            # stale rows are dense rows of a state that tracks its corners' weights
            corners = cast(CornerStore, self.corners)
            return cs_away_and_weighted_score(corners.arrays, i, w)[1] * (1.0 / (self.lam * self.n))
        if isinstance(self._wi, SparseRows):
            return float(self.wi_scale[i]) * sparse_row_dot(self._wi.arrays(self.wi_scale), i, w)
        return float(self.wi_scale[i]) * dense_dot(self._wi[i], w)

    def n_active(self) -> float:
        if self.corners is None:
            return math.nan
        return self.corners.n_active(weighted=self.track_alpha)


def _pool_hint(problem: Any) -> int:
    """Initial entries of the sparse rows' pool: at least the inputs' stored features.  A row holds
    the entries of the corners its block has taken, which differ from the truth at a few
    positions, each carrying that position's features under two labels; a pool that starts at
    64 n entries grew three times in the first pass of the CoNLL-scale chain (0.14-0.2 s of
    faulting in and copying; its rows hold 0.65 of the features' count after 5 passes).  Pages
    of the pool that no row reaches are never touched, so they cost no memory."""
    stored = sum(int(getattr(x, "nnz", 0)) for x in problem.X)
    return max(1024, 64 * problem.n, stored)
