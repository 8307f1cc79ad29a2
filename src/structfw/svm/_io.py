"""FrankWolfeSVC model files (format of `structfw.io`, kind ``"FrankWolfeSVC"``).

Header fields: ``params`` (the constructor parameters; ``random_state`` only as an
int or null), ``classes`` and ``classes_type`` ("int", "float", "bool" or "str"),
``n_features_in``, ``feature_names_in`` (list of str or null), ``gamma`` (the
resolved kernel gamma), ``stopped``, ``converged``, ``fit_time``.
Arrays: ``alpha`` (n_machines, n_train), ``support``, ``support_vectors``,
``dual_coef``, ``intercept``, ``n_support``, ``n_iter``, ``objective``, ``gap`` and the
traces ``trace.<machine>.<column>``.

Everything is validated against the classifier it builds: the parameters through
``_parameter_constraints``, every shape against ``n_features_in`` / the number of
classes / the support, alpha on the simplex, every float finite.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from .. import io as sfio

if TYPE_CHECKING:
    from .classifier import FrankWolfeSVC

_SVC = TypeVar("_SVC", bound="FrankWolfeSVC")

KIND = "FrankWolfeSVC"
_TRACE_COLS = ("iteration", "gap", "objective", "time_s")
_STOPPED = ("converged", "max_iter", "interrupted")
#: Bounds on sizes read from a file (far above any model this code trains).
MAX_SAMPLES = 10 ** 8
MAX_FEATURES = 10 ** 8
MAX_CLASSES = 10 ** 5


def _classes_type(classes: npt.NDArray[Any]) -> str:
    k = classes.dtype.kind
    if k == "b":
        return "bool"
    if k in "iu":
        return "int"
    if k == "f":
        return "float"
    if k in "UO" and all(isinstance(c, str) for c in classes):
        return "str"
    raise ValueError(f"cannot save classes_ of dtype {classes.dtype} (only int, float, "
                     "bool or str labels)")


def _json_params(est: FrankWolfeSVC) -> dict[str, Any]:
    params = est.get_params(deep=False)
    rs = params["random_state"]
    # a RandomState / Generator cannot be written as data; the fit is done anyway
    params["random_state"] = int(rs) if isinstance(rs, (int, np.integer)) else None
    out = {}
    for k, v in params.items():
        if isinstance(v, np.integer):
            v = int(v)
        elif isinstance(v, np.floating):
            v = float(v)
        out[k] = v
    return out


def save_svc(est: FrankWolfeSVC, path: str | os.PathLike[str]) -> Path:
    classes = np.asarray(est.classes_)
    ctype = _classes_type(classes)
    header = {
        "params": _json_params(est),
        "classes": [c.item() if hasattr(c, "item") else c for c in classes],
        "classes_type": ctype,
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": (None if getattr(est, "feature_names_in_", None) is None
                             else [str(n) for n in est.feature_names_in_]),
        "gamma": float(est._gamma),
        "stopped": est.stopped_,
        "converged": bool(est.converged_),
        "fit_time": float(est.fit_time_),
    }
    arrays: dict[str, npt.ArrayLike] = {"alpha": est.alpha_, "support": est.support_.astype(np.int64),
              "support_vectors": est.support_vectors_, "dual_coef": est.dual_coef_,
              "intercept": est.intercept_, "n_support": est.n_support_.astype(np.int64),
              "n_iter": est.n_iter_, "objective": est.objective_, "gap": est.gap_}
    traces = [est.trace_] if isinstance(est.trace_, dict) else list(est.trace_)
    for m, tr in enumerate(traces):
        for col in _TRACE_COLS:
            arrays[f"trace.{m}.{col}"] = np.asarray(tr[col])
    return sfio.write_model_file(path, KIND, header, arrays)


def _params(cls: type[_SVC], header: sfio.FieldMap) -> _SVC:
    p = sfio.header_dict(header, "params")
    names = set(cls().get_params(deep=False))
    # parameters added since the first files were written; absent, they take their
    # default, which is what those files' fits did
    later = {"gradient"}
    sfio.check_fields(p, sorted(names - later), optional=sorted(later))
    rs = p["random_state"]
    if rs is not None and not (sfio._is_int(rs) and 0 <= rs < 2 ** 32):
        raise ValueError(f"{p.source}: field 'random_state' must be null or an int in "
                         "[0, 2**32)")
    for k, v in p.items():
        if not (v is None or isinstance(v, (bool, int, float, str))):
            raise ValueError(f"{p.source}: field {k!r} must be a JSON scalar")
        if isinstance(v, str) and len(v) > 64:
            raise ValueError(f"{p.source}: field {k!r} is too long")
    est = cls(**p)
    try:
        est._check_params()
    except ValueError as exc:
        raise ValueError(f"{p.source}: {exc}") from None
    return est


def _classes(header: sfio.FieldMap) -> npt.NDArray[Any]:
    ctype = sfio.header_str_choice(header, "classes_type", ("int", "float", "bool", "str"))
    raw = sfio.header_list(header, "classes", max_len=MAX_CLASSES)
    src = header.source
    check: Callable[[Any], bool] = {"int": sfio._is_int, "bool": lambda v: isinstance(v, bool),
             "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
             and math.isfinite(v),
             "str": lambda v: isinstance(v, str) and len(v) <= 10_000}[ctype]
    if len(raw) < 2 or not all(check(v) for v in raw):
        raise ValueError(f"{src}: field 'classes' must list at least 2 labels of type {ctype}")
    if ctype == "int" and not all(-2 ** 63 <= v < 2 ** 63 for v in raw):
        raise ValueError(f"{src}: field 'classes' has labels outside int64")
    dtype: npt.DTypeLike = {"int": np.int64, "float": np.float64, "bool": bool, "str": str}[ctype]
    classes = np.asarray(raw, dtype=dtype)
    if not np.array_equal(np.unique(classes), classes):
        raise ValueError(f"{src}: field 'classes' must be sorted and unique")
    return classes


def load_svc(cls: type[_SVC], path: str | os.PathLike[str]) -> _SVC:
    header, arrays = sfio.read_model_file(path, KIND)
    src = header.source
    sfio.check_fields(header, ["params", "classes", "classes_type", "n_features_in",
                               "feature_names_in", "gamma", "stopped", "converged",
                               "fit_time"])
    est = _params(cls, header)
    classes = _classes(header)
    n_classes = len(classes)
    n_machines = 1 if n_classes == 2 else n_classes
    n_features = sfio.header_int(header, "n_features_in", 1, MAX_FEATURES)
    names = header["feature_names_in"]
    if names is not None:
        if not (isinstance(names, list) and len(names) == n_features
                and all(isinstance(n, str) and len(n) <= 10_000 for n in names)):
            raise ValueError(f"{src}: field 'feature_names_in' must be null or a list of "
                             f"{n_features} strings")
        names = np.asarray(names, dtype=object)
    gamma = sfio.header_float(header, "gamma", lo=0.0)
    if not gamma > 0:
        raise ValueError(f"{src}: field 'gamma' must be > 0")
    stopped = sfio.header_str_choice(header, "stopped", _STOPPED)
    converged = sfio.header_bool(header, "converged")
    if converged != (stopped == "converged"):
        raise ValueError(f"{src}: fields 'converged' and 'stopped' disagree")
    fit_time = sfio.header_float(header, "fit_time", lo=0.0)

    expected = {"alpha", "support", "support_vectors", "dual_coef", "intercept",
                "n_support", "n_iter", "objective", "gap"}
    expected |= {f"trace.{m}.{c}" for m in range(n_machines) for c in _TRACE_COLS}
    sfio.check_fields(arrays, sorted(expected))
    alpha = sfio.array_field(arrays, "alpha", shape=(n_machines, None), lo=0.0)
    n_train = alpha.shape[1]
    if not 2 <= n_train <= MAX_SAMPLES:
        raise ValueError(f"{src}: field 'alpha' must have between 2 and {MAX_SAMPLES} columns")
    with np.errstate(over="ignore", invalid="ignore"):
        on_simplex = np.allclose(alpha.sum(axis=1), 1.0, rtol=0, atol=1e-6)
    if not on_simplex:
        raise ValueError(f"{src}: field 'alpha' rows must lie on the unit simplex (sum 1)")
    support = sfio.array_field(arrays, "support", shape=(None,), dtype="i", lo=0,
                               hi=n_train - 1)
    n_sv = support.shape[0]
    if n_sv < 1 or np.any(np.diff(support) <= 0):
        raise ValueError(f"{src}: field 'support' must be non-empty and strictly increasing")
    if not np.array_equal(support, np.flatnonzero((alpha > 0).any(axis=0))):
        raise ValueError(f"{src}: field 'support' does not match the non-zeros of 'alpha'")
    if est.kernel == "precomputed":
        if n_features != n_train:
            raise ValueError(f"{src}: field 'n_features_in' must equal the number of "
                             "training samples for kernel='precomputed'")
        sv = sfio.array_field(arrays, "support_vectors", shape=(0, 0))
    else:
        sv = sfio.weight_field(arrays, "support_vectors", shape=(n_sv, n_features))
    dual = sfio.weight_field(arrays, "dual_coef", shape=(n_machines, n_sv))
    inter = sfio.weight_field(arrays, "intercept", shape=(n_machines,))
    n_support = sfio.array_field(arrays, "n_support", shape=(n_classes,), dtype="i", lo=0)
    if int(n_support.sum()) != n_sv:
        raise ValueError(f"{src}: field 'n_support' must sum to the number of support vectors")
    n_iter = sfio.array_field(arrays, "n_iter", shape=(n_machines,), dtype="i", lo=0)
    objective = sfio.array_field(arrays, "objective", shape=(n_machines,), lo=0.0)
    gap = sfio.array_field(arrays, "gap", shape=(n_machines,))
    traces = []
    for m in range(n_machines):
        tr = {}
        length = None
        for col in _TRACE_COLS:
            key = f"trace.{m}.{col}"
            a = sfio.array_field(arrays, key, shape=(None,),
                                 dtype="i" if col == "iteration" else "f",
                                 lo=0 if col in ("iteration", "time_s") else None)
            if length is not None and a.shape[0] != length:
                raise ValueError(f"{src}: field {key!r} length differs from the other "
                                 "trace columns")
            length = a.shape[0]
            tr[col] = a
        traces.append(tr)
    fitted = dict(classes_=classes, _gamma=gamma, fit_time_=fit_time, alpha_=alpha,
                  support_=support.astype(np.int32), dual_coef_=dual, intercept_=inter,
                  support_vectors_=sv, n_support_=n_support.astype(np.int32),
                  n_iter_=n_iter, objective_=objective, gap_=gap, converged_=converged,
                  stopped_=stopped, trace_=traces[0] if n_classes == 2 else traces,
                  n_features_in_=n_features)
    if names is not None:
        fitted["feature_names_in_"] = names
    est.__dict__.update(fitted)
    return est
