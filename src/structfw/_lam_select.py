"""``lam="auto"``: the regularisation chosen on a held-out part of the training data.

`StructuredSVM.fit` with ``lam="auto"`` calls `select_lam` once its data are validated and in
the model's states: the examples are split by ``random_state`` into a training part and a
validation part (``validation_fraction`` of them), one estimator is fitted on the training part
at every value of the grid, from the largest lam down, each fit warm-started from the previous
one's solver state (``warm_start=True`` with ``set_params(lam=...)``: the corners do not depend
on lam, so the state is rescaled, not rebuilt), and each is scored on the validation part with
the estimator's own `StructuredSVM.score` (1 - the mean task loss).  The best lam is then refitted
on all the data by the caller.

Why a warm-started grid rather than the eps-approximate path (`structfw.path.regularization_path`):
the path certifies every lam of a range to duality gap eps, but it places its own breakpoints,
and their number grows as lam falls (each breakpoint gains a factor rho = 1 - (eps - g) / Delta of
eq. (12), which nears 1 where the dual moves most), so reaching the small lams a selection has to
look at costs many solves; the grid solves exactly the values it scores, to the estimator's own
``tol``, and a validation score needs no certificate at the other lams.  Measured on a noisy
3-class problem (`MulticlassModel`, 200 training examples, d = 20, 30 % of the labels random;
numba compiled beforehand, one core): the default grid for n = 200 (10 values from 1 down to
5e-4) with warm starts, ``tol=1e-3`` and at most 200 passes per value, took 0.15 s and 1,097
passes in all (0.19 s and 1,216 passes started cold at each value); the path with eps = 0.1 from
its lam_inf = 10.2 down to the same 5e-4 had 82 breakpoints and took 1.1 s, and with eps = 0.01
(still ten times the fits' tol) it stopped at its cap of 1,000 breakpoints at lam = 4.7e-3 after
5.5 s.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .solvers.problem import LAM_FLOOR

if TYPE_CHECKING:
    from .estimator import StructuredSVM

#: values in the default grid
DEFAULT_GRID_SIZE = 10
#: the columns of ``lam_curve_``, one entry per grid value, in the order fitted (lam decreasing)
CURVE_COLUMNS = ("lam", "score", "passes", "gap", "time_s")


def is_lam_grid(v: object) -> bool:
    """True for a valid ``lam_grid``: a non-empty 1-D list, tuple or array of finite real numbers
    >= `LAM_FLOOR` (the smallest lam a fit accepts).  Used by the estimator's constraints table."""
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple, np.ndarray)):
        return False
    a = np.asarray(v)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iuf":
        return False
    return bool(np.all(np.isfinite(a)) and np.all(a >= LAM_FLOOR))


def default_lam_grid(n: int) -> npt.NDArray[np.float64]:
    """`DEFAULT_GRID_SIZE` values, geometric, from 1 down to max(1e-4, 0.1 / n).

    Why these ends: the task losses are normalised (at most 1), so P(0) <= 1 bounds the optimum's
    ||w||^2 by 2 / lam; at lam = 1 the weights are too small for the margins of features of unit
    scale, and larger values only shrink w further (underfitting).  lam n is the inverse of
    SVM-struct's C (the objective is lam/2 ||w||^2 + 1/n sum xi_i), so lam = 0.1 / n is C = 10,
    nearly hard-margin: below it the predictions hardly change while the passes a fit needs grow
    like 1 / (lam n).  The floor 1e-4 keeps a large n from reaching lams whose fits cost hundreds of
    passes (1e-4 is below 1 / n = 1.6e-4 of OCR's 6,251 words, the papers' choice)."""
    low = max(1e-4, 0.1 / max(int(n), 1))
    return np.geomspace(1.0, low, DEFAULT_GRID_SIZE)


def grid_values(lam_grid: Sequence[float] | npt.ArrayLike | None, n: int) -> npt.NDArray[np.float64]:
    """The grid to fit, decreasing and without repeats: the warm starts go from the most
    regularised fit (the one closest to w = 0, cheap) to the least."""
    grid = default_lam_grid(n) if lam_grid is None else np.asarray(lam_grid, dtype=np.float64)
    return np.unique(grid)[::-1].copy()


def split_indices(n: int, fraction: float, random_state: Any) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(training, validation) example indices: ceil(fraction n) of the n examples, drawn by
    ``random_state`` (an int gives the same split every time) for validation; both sorted."""
    n_val = math.ceil(fraction * n)
    if n < 2 or not 1 <= n_val <= n - 1:
        raise ValueError(f"lam='auto' needs a training and a validation part: validation_fraction={fraction!r} of "
                         f"{n} example(s) leaves {n_val} for validation and {n - n_val} for training; give more "
                         "examples, another validation_fraction, or a number for lam")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    perm = rng.permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


@dataclass
class LamSelection:
    """What `select_lam` found: the chosen ``lam``, the ``curve`` (`CURVE_COLUMNS`, arrays) and
    the sizes of the two parts; ``interrupted`` when Ctrl-C ended the selection early."""

    lam: float
    curve: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    n_train: int = 0
    n_validation: int = 0
    time_s: float = 0.0
    interrupted: bool = False

    def meta(self) -> dict[str, Any]:
        """A JSON summary for the refit's ``trace_.meta["lam_selection"]``."""
        return dict(lam=self.lam, n_train=self.n_train, n_validation=self.n_validation, time_s=self.time_s,
                    interrupted=self.interrupted)


def _subset(items: Sequence[Any] | None, idx: npt.NDArray[np.intp]) -> list[Any] | None:
    return None if items is None else [items[int(i)] for i in idx]


def _selection_estimator(est: StructuredSVM, class_weight: npt.NDArray[np.float64] | None,
                         lam: float) -> StructuredSVM:
    """The estimator fitted along the grid: ``est``'s parameters, warm-started, silent, and with
    the class weights resolved on all the data (its labels are the model's states, so a dict
    {state: weight}): a class rare in the training part weighs what it weighs in the refit."""
    params = est.get_params(deep=False)
    params.update(lam=lam, warm_start=True, verbose=0,
                  class_weight=None if class_weight is None else {k: float(c) for k, c in enumerate(class_weight)})
    return type(est)(**params)


def select_lam(est: StructuredSVM, X: Sequence[Any], Y: Sequence[Any], sample_weight: Sequence[Any] | None,
               class_weight: npt.NDArray[np.float64] | None) -> LamSelection:
    """Fit ``est``'s settings along the lam grid on a training part of (X, Y), score each on the
    validation part, and return the best lam (ties: the largest, the most regularised).

    X and Y are validated, Y in the model's states (`structfw._labels.fit_classes`), so the two
    parts share one encoding whatever labels each happens to hold.  ``sample_weight`` is fit's,
    split with the examples; ``class_weight`` the weights resolved on all the data.  Ctrl-C ends
    the selection at the last fitted value (``interrupted``)."""
    from ._interrupt import interrupt_requested

    start = time.perf_counter()
    grid = grid_values(est.lam_grid, len(X))
    train, val = split_indices(len(X), float(est.validation_fraction), est.random_state)
    X_tr, Y_tr, sw_tr = _subset(X, train), _subset(Y, train), _subset(sample_weight, train)
    X_val, Y_val = _subset(X, val), _subset(Y, val)
    sub = _selection_estimator(est, class_weight, float(grid[0]))
    rows: dict[str, list[float]] = {c: [] for c in CURVE_COLUMNS}
    interrupted = False
    for lam in grid:
        t0 = time.perf_counter()
        passes_before = float(getattr(sub, "n_iter_", 0.0))
        sub.set_params(lam=float(lam))
        sub.fit(X_tr, Y_tr, sample_weight=sw_tr)
        rows["lam"].append(float(lam))
        rows["score"].append(float(sub.score(X_val, Y_val)))
        rows["passes"].append(float(sub.n_iter_) - passes_before)
        rows["gap"].append(float(sub.gap_) if sub.gap_ is not None else math.nan)
        rows["time_s"].append(time.perf_counter() - t0)
        if sub.stopped_ == "interrupted" or interrupt_requested():
            interrupted = True
            break
    curve = {c: np.asarray(v, dtype=np.float64) for c, v in rows.items()}
    best = int(np.argmax(curve["score"]))  # the first maximum: the largest lam among ties
    return LamSelection(lam=float(curve["lam"][best]), curve=curve, n_train=len(train), n_validation=len(val),
                        time_s=time.perf_counter() - start, interrupted=interrupted)


# ------------------------------------------------------------------ model files
def curve_to_header(lam: float, curve: dict[str, npt.NDArray[np.float64]]) -> dict[str, Any]:
    """The ``lam_selection`` field of a model file: the chosen lam and the curve (NaN as null)."""
    def col(a: npt.NDArray[np.float64]) -> list[float | None]:
        return [float(x) if math.isfinite(x) else None for x in a]

    return {"lam": float(lam), "curve": {c: col(curve[c]) for c in CURVE_COLUMNS if c in curve}}


def curve_from_header(field_value: Any, src: str) -> tuple[float, dict[str, npt.NDArray[np.float64]]]:
    """(lam_, lam_curve_) from a file's ``lam_selection`` field, every entry checked: lam a valid
    lam, the curve's columns lists of one length (at most 10,000) of numbers or null, the chosen
    lam among the grid's."""
    from .solvers.problem import check_lam

    where = f"{src}: field 'lam_selection'"
    if not isinstance(field_value, dict) or set(field_value) != {"lam", "curve"}:
        raise ValueError(f"{where} must be an object with keys 'lam' and 'curve'")
    try:
        lam = check_lam(field_value["lam"], "lam_selection.lam")
    except ValueError as exc:
        raise ValueError(f"{src}: {exc}") from None
    raw = field_value["curve"]
    if not isinstance(raw, dict) or set(raw) != set(CURVE_COLUMNS):
        raise ValueError(f"{where}: 'curve' must be an object with keys {list(CURVE_COLUMNS)}")
    curve: dict[str, npt.NDArray[np.float64]] = {}
    for c in CURVE_COLUMNS:
        v = raw[c]
        ok = isinstance(v, list) and 0 < len(v) <= 10_000 and all(
            x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)) for x in v)
        if not ok:
            raise ValueError(f"{where}: curve column {c!r} must be a non-empty list of finite numbers or null")
        curve[c] = np.array([math.nan if x is None else float(x) for x in v], dtype=np.float64)
    if len({a.size for a in curve.values()}) != 1:
        raise ValueError(f"{where}: the curve's columns differ in length")
    if not np.any(np.isclose(curve["lam"], lam, rtol=1e-12, atol=0.0)):
        raise ValueError(f"{where}: the chosen lam {lam!r} is not among the curve's lam values")
    return lam, curve
