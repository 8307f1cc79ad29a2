"""Shared input checks of the bundled models (clear ValueErrors naming the argument)."""
from __future__ import annotations

import json

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt


def check_int_param(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_label_array(y: npt.ArrayLike, name: str, n_states: int, shape: Iterable[int]) -> npt.NDArray[np.int64]:
    """Convert ``y`` to a C-contiguous int64 array of ``shape`` with values in 0..n_states-1."""
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
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} has shape {arr.shape}, expected {tuple(shape)}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer labels, got non-integer values")
    if arr.size and (arr.min() < 0 or arr.max() >= n_states):
        bad = arr[(arr < 0) | (arr >= n_states)].ravel()[0].item()
        raise ValueError(
            f"{name} has label {bad!r} outside 0..{n_states - 1} (n_states={n_states})"
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_finite(arr: npt.ArrayLike, name: str) -> None:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")


def as_float_array(x: npt.ArrayLike, name: str) -> np.ndarray:
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
