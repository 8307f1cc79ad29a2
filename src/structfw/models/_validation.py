"""Shared input checks of the bundled models (clear ValueErrors naming the argument).

Sizes.  Every bundled model bounds, in its constructor and before it allocates anything, the
sizes its arguments imply (`check_size`): the joint-feature dimension d (`MAX_SIZE_JOINT_FEATURE`)
and the largest table its oracle builds for one example whose size the constructor fixes
(`MAX_TABLE_ENTRIES`).  Model files declare their model by its constructor arguments, so the
file loaders (`structfw.estimator`) apply the same bounds.
"""
from __future__ import annotations

import json

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt


#: Largest joint-feature dimension d (``size_joint_feature``, the length of w) of a model.  w alone
#: is 8 d bytes (8 GB here), and a fit keeps several d-vectors besides it (the averaged iterate,
#: dense block rows): a larger d is a mistake in the arguments, not a model any fit could train.
MAX_SIZE_JOINT_FEATURE = 10 ** 9

#: Largest number of entries of one table a model's oracle builds for every example when the
#: constructor fixes the table's size whatever the example (the K x K pairwise table of an edge
#: of the graph models, the part-filter responses P k^2 H W of `PoseModel`): 8 GB of float64.
MAX_TABLE_ENTRIES = 10 ** 9


def check_size(owner: str, expression: str, value: int, limit: int, quantity: str) -> int:
    """``value`` (the size ``expression`` of ``owner``'s arguments), or a ValueError naming the
    arguments, the value and the ``limit`` on ``quantity``.

    Called before anything of that size is allocated: the sizes are Python integers, so the check
    itself costs nothing whatever the arguments."""
    if value > limit:
        raise ValueError(f"{owner}: {expression} = {value} exceeds the limit on {quantity}: at most {limit} "
                         f"({8 * limit / 2 ** 30:.1f} GiB of float64)")
    return value


def check_joint_feature_size(owner: str, expression: str, d: int) -> int:
    """d = ``expression`` of ``owner``'s arguments, checked against `MAX_SIZE_JOINT_FEATURE`."""
    return check_size(owner, expression, d, MAX_SIZE_JOINT_FEATURE, "size_joint_feature (d, the length of w)")


def check_weight_vector(w: npt.ArrayLike, d: int, name: str) -> npt.NDArray[np.float64]:
    """w as a C-contiguous float64 vector of length d with finite entries, or a ValueError naming ``name``."""
    arr = as_float_array(w, name)
    if arr.shape != (d,):
        raise ValueError(f"{name} must be a vector of length d = {d} (size_joint_feature), got shape {arr.shape}")
    check_finite(arr, name)
    return np.ascontiguousarray(arr, dtype=np.float64)


def check_real(value: object, name: str) -> float:
    """A finite real number as a float, or a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    f = float(value)
    if not np.isfinite(f):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return f


_INT64 = np.dtype(np.int64)


def check_int_param(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_label_array(y: npt.ArrayLike, name: str, n_states: int, shape: Iterable[int]) -> npt.NDArray[np.int64]:
    """Convert ``y`` to a C-contiguous int64 array of ``shape`` with values in 0..n_states-1."""
    shape = tuple(shape)
    if (type(y) is np.ndarray and y.dtype == _INT64 and y.shape == shape and y.flags.c_contiguous
            and not (y.size and (y.min() < 0 or y.max() >= n_states))):
        return y  # already what the kernels take (a labelling an oracle returned): two reductions only
    try:
        arr = np.asarray(y)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
        or arr.dtype == np.bool_
    ):
        raise ValueError(f"{name} must hold integer labels (states 0..{n_states - 1}), got dtype {arr.dtype}; "
                         "StructuredSVM encodes labels of other kinds, such as strings, as states")
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer labels, got non-integer values")
    if arr.size and (arr.min() < 0 or arr.max() >= n_states):
        bad = arr[(arr < 0) | (arr >= n_states)].ravel()[0].item()
        raise ValueError(
            f"{name} has label {bad!r} outside 0..{n_states - 1} (n_states={n_states})"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_label_pair(y_true: npt.ArrayLike, y: npt.ArrayLike, where: str, n_states: int,
                     ndim: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The two labellings a loss compares, checked without their input: ``ndim``-d integer arrays
    of one shape with at least one entry, states in 0..n_states-1; errors name ``where``."""
    shape, other = _shape(y_true, f"{where}: y_true"), _shape(y, f"{where}: y")
    if len(shape) != ndim or 0 in shape:
        raise ValueError(f"{where}: y_true must be a non-empty {ndim}-d array of states 0..{n_states - 1}, "
                         f"got shape {shape}")
    if other != shape:
        raise ValueError(f"{where}: y_true and y must have the same shape, got {shape} and {other}")
    return (as_label_array(y_true, f"{where}: y_true", n_states, shape),
            as_label_array(y, f"{where}: y", n_states, shape))


def _shape(a: npt.ArrayLike, name: str) -> tuple[int, ...]:
    try:
        return tuple(np.shape(a))
    except ValueError as exc:  # a ragged nested list
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None


def check_finite(arr: npt.ArrayLike, name: str) -> None:
    """Finite values whose squared norm is finite too, or a ValueError naming ``name``.

    Features (and weights) enter the block steps through ||psi_i(y)||^2 and ⟨w, psi⟩: values
    beyond ~1e154 overflow them, every step size becomes 0 and the fit silently stays at w = 0
    (a certified but useless model), so such values are refused like infinities."""
    a = arr if type(arr) is np.ndarray and arr.dtype.kind == "f" else None
    with np.errstate(over="ignore", invalid="ignore"):
        if a is not None:
            flat = a.reshape(-1)
            if np.isfinite(np.dot(flat, flat)):
                return  # a NaN, an infinity or a value whose square overflows makes the sum of squares non-finite
        elif np.all(np.isfinite(arr)):
            flat = np.asarray(arr, dtype=np.float64).reshape(-1)
            if np.isfinite(np.dot(flat, flat)):
                return
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    top = float(np.max(np.abs(np.asarray(arr, dtype=np.float64))))
    raise ValueError(f"{name} has values too large for float64 arithmetic (largest magnitude {top:.3g}: its squared "
                     "norm overflows, so every block step would be 0); rescale the features (features scaled "
                     "by c are the same problem at lam / c^2)")


def as_float_array(x: npt.ArrayLike, name: str) -> np.ndarray:
    if type(x) is np.ndarray and x.dtype.kind == "f":
        return x  # real floats already (np.asarray would return x itself)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    ):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real-valued, got dtype {arr.dtype}")
    return arr


def one_example_error(X: object, example: str, what: str) -> ValueError:
    """The error for one input passed where a list of them is expected (``predict(X[0])``)."""
    shape = getattr(X, "shape", None)
    got = f"{type(X).__name__} of shape {shape}" if shape is not None else type(X).__name__
    return ValueError(f"X must be a list of examples (one {example} per {what}), got a single {what} "
                      f"({got}); to predict one {what} pass [x]")


def check_sequence_of_inputs(X: Iterable[Any], name: str = "X") -> list[Any]:
    if isinstance(X, (str, bytes)) or X is None:
        raise ValueError(f"{name} must be a list of inputs, got {type(X).__name__}")
    try:
        return list(X)
    except TypeError as exc:
        raise ValueError(f"{name} must be a list of inputs, got {type(X).__name__}") from exc


def from_json_text(value: object, name: str) -> Any:
    """A constructor argument given as a value or as the JSON text `get_config` wrote for it
    (model files hold JSON scalars only, so arrays and dicts travel as text)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ValueError(f"{name} must be a value or its JSON text, got {value!r}") from None
