"""Shared input checks of the bundled models (clear ValueErrors naming the argument)."""
from __future__ import annotations

import numbers

import numpy as np


def check_int_param(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_label_array(y, name, n_states, shape):
    """Convert ``y`` to a C-contiguous int64 array of ``shape`` with values in 0..n_states-1."""
    try:
        arr = np.asarray(y)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
        or arr.dtype == np.bool_
    ):
        raise ValueError(f"{name} must hold integer labels, got dtype {arr.dtype}")
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


def check_finite(arr, name):
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")


def as_float_array(x, name):
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


def check_sequence_of_inputs(X, name="X"):
    if isinstance(X, (str, bytes)) or X is None:
        raise ValueError(f"{name} must be a list of inputs, got {type(X).__name__}")
    try:
        return list(X)
    except TypeError as exc:
        raise ValueError(f"{name} must be a list of inputs, got {type(X).__name__}") from exc
