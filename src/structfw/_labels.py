"""Class labels of any kind for the estimator: strings, other integers, floats (docs/guide/estimator.md).

The models work with states 0..n_states-1.  ``StructuredSVM.fit`` maps the labels it is
given to those states and ``predict`` maps the states back:

* integer labels (or booleans, or integral floats) already in 0..n_states-1 are the states
  themselves: ``classes_ = arange(n_states)`` and nothing is converted, so integer data run
  exactly as the models take them;
* any other labels (strings, integers outside 0..n_states-1, non-integral floats) are encoded
  as their index in ``classes_ = numpy.unique(all labels of Y)``, which must hold at most
  ``n_states`` entries.

Only models whose labels are class labels (``model.class_labels``) are encoded; the others
(matching: a label is a target position) get their labels as given and ``classes_ = None``.
"""
from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .models.base import StructuredModel

#: dtype kinds read as numbers; bool counts as 0/1
_NUMERIC = "biuf"


def _as_list(Y: Iterable[Any] | None, name: str) -> list[Any]:
    if isinstance(Y, (str, bytes)) or Y is None:
        raise ValueError(f"{name} must be a list of labellings, got {type(Y).__name__}")
    try:
        return list(Y)
    except TypeError:
        raise ValueError(f"{name} must be a list of labellings, got {type(Y).__name__}") from None


def _as_labels(y: Any, name: str) -> np.ndarray:
    """y as an ndarray of numeric or unicode dtype (object arrays of str or numbers converted)."""
    if type(y) is np.ndarray and y.dtype.kind in "biuU":
        return y  # the common case, taken first: this runs once per example of every fit
    try:
        a = np.asarray(y)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be converted to an array of labels: {exc}") from None
    if a.dtype.kind == "O":
        items = a.ravel().tolist()
        # numpy would turn a mix of numbers and strings into strings: refuse it instead
        if all(isinstance(v, str) for v in items):
            a = a.astype(str)
        elif all(isinstance(v, numbers.Real) for v in items):
            a = np.asarray(items).reshape(a.shape) if items else a.astype(np.int64)
        else:
            raise ValueError(f"{name} must hold labels that are all strings or all numbers")
    if a.dtype.kind not in _NUMERIC + "U":
        raise ValueError(f"{name} must hold integer, float or string labels, got dtype {a.dtype}")
    if a.dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite labels")
    return a


def _item(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _kind(a: np.ndarray) -> str:
    return "string" if a.dtype.kind == "U" else "numeric"


def _are_states(a: np.ndarray, n_states: int) -> bool:
    if a.size == 0:
        return True
    if a.dtype.kind == "f" and np.any(a != np.round(a)):
        return False
    return bool(a.min() >= 0 and a.max() < n_states)


def is_identity(classes: np.ndarray | None, n_states: int) -> bool:
    """True when ``classes`` are the states 0..n_states-1 themselves (no conversion needed)."""
    return (classes is not None and classes.dtype.kind in "iu" and classes.shape == (n_states,)
            and bool(np.all(classes == np.arange(n_states))))


# `StructuredModel` declares no n_states (only the models with class labels have one), hence
# getattr(model, "n_states") below
def fit_classes(model: StructuredModel, Y: Iterable[Any], name: str = "Y") -> tuple[np.ndarray | None, list[Any]]:
    """``(classes, Y_states)``: the classes of the labels in Y and Y in the model's states.

    ``classes`` is None for models whose labels are not class labels; Y is then returned as a list,
    unconverted, as it is for integer labels in 0..n_states-1.
    """
    Y = _as_list(Y, name)
    if not getattr(model, "class_labels", False):
        return None, Y
    K = int(getattr(model, "n_states"))
    arrays = [_as_labels(y, f"{name}[{i}]") for i, y in enumerate(Y)]
    kinds = {_kind(a) for a in arrays}
    if len(kinds) > 1:
        i = next(i for i, a in enumerate(arrays) if _kind(a) != _kind(arrays[0]))
        raise ValueError(f"{name} mixes label kinds: {name}[0] holds {_kind(arrays[0])} labels, "
                         f"{name}[{i}] {_kind(arrays[i])} ones")
    flat = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(0, np.int64)
    if kinds <= {"numeric"} and _are_states(flat, K):
        return np.arange(K, dtype=np.int64), Y
    classes = np.unique(flat)
    if classes.size > K:
        extra = classes[K:]
        i = next(i for i, a in enumerate(arrays) if np.isin(a, extra).any())
        label = _item(arrays[i][np.isin(arrays[i], extra)].ravel()[0])
        raise ValueError(
            f"{name}[{i}] has label {label!r}: {name} holds {classes.size} distinct labels, more than the "
            f"model's {K} states (n_states={K}); labels other than the integers 0..{K - 1} are encoded as "
            f"states 0..{K - 1} in sorted order, so there can be at most {K} of them")
    return classes, [_encode_one(classes, a, f"{name}[{i}]") for i, a in enumerate(arrays)]


def _encode_one(classes: np.ndarray, a: np.ndarray, name: str) -> int | np.ndarray:
    if _kind(a) != _kind(classes):
        raise ValueError(f"{name} holds {_kind(a)} labels but the estimator was fitted on {_kind(classes)} "
                         "labels (classes_)")
    codes = np.searchsorted(classes, a)
    found = classes[np.minimum(codes, classes.size - 1)] == a
    if not np.all(found):
        bad = _item(np.asarray(a)[~found].ravel()[0])
        raise ValueError(f"{name} has label {bad!r}, which is not among the labels seen by fit (classes_ = "
                         f"{_short_list(classes)}); structfw.metrics compares predictions with any labels "
                         "(an unseen one counts as an error)")
    codes = codes.astype(np.int64)
    return int(codes) if codes.ndim == 0 else codes


def encode(model: StructuredModel, classes: np.ndarray | None, Y: Iterable[Any], name: str = "Y") -> list[Any]:
    """Y (a list) in the model's states for the fitted ``classes``; unconverted when no encoding applies."""
    Y = _as_list(Y, name)
    if classes is None or is_identity(classes, int(getattr(model, "n_states"))):
        return Y
    return [_encode_one(classes, _as_labels(y, f"{name}[{i}]"), f"{name}[{i}]") for i, y in enumerate(Y)]


def decode(model: StructuredModel, classes: np.ndarray | None, P: Sequence[Any]) -> Sequence[Any]:
    """Predicted states P as labels (P itself when no encoding applies)."""
    if classes is None or is_identity(classes, int(getattr(model, "n_states"))):
        return P
    n = classes.size
    out = []
    for i, p in enumerate(P):
        p = np.asarray(p)
        if p.size and p.max() >= n:
            # a state no training label named: there is no label to return for it
            raise ValueError(
                f"the prediction of X[{i}] uses state {int(p.max())}, which no training label named: fit saw "
                f"{n} distinct labels for the model's {int(getattr(model, 'n_states'))} states (classes_ = "
                f"{_short_list(classes)}); fit on data holding every label, or give the model "
                f"n_states={n}")
        d = classes[p]
        out.append(d if p.ndim else _item(d))
    return out


def check_warm_start(previous: np.ndarray | None, classes: np.ndarray | None) -> bool:
    """False (with a warning) when a warm start's previous fit had other classes than this one."""
    if previous is None and classes is None:
        return True
    same = (previous is not None and classes is not None and previous.shape == classes.shape
            and _kind(previous) == _kind(classes) and bool(np.all(previous == classes)))
    if not same:
        warnings.warn(f"warm start: the previous fit had other labels (classes_ = {_short_list(previous)}) than "
                      f"this fit ({_short_list(classes)}), so its states mean other labels; starting afresh",
                      RuntimeWarning, stacklevel=3)
    return same


def _short_list(classes: np.ndarray | None, n: int = 8) -> str:
    if classes is None:
        return "None"
    vals = [_item(v) for v in classes[:n]]
    return "[" + ", ".join(repr(v) for v in vals) + (", ...]" if classes.size > n else "]")


# ---------------------------------------------------------------- model files
_FILE_KINDS = {"U": "str", "i": "int", "u": "int", "f": "float"}


def classes_to_header(model: StructuredModel, classes: np.ndarray | None) -> dict[str, Any] | None:
    """The header field of ``classes`` (JSON, no pickle), or None when they need no field (no
    encoding: integer states, or a model without class labels)."""
    if classes is None or is_identity(classes, int(getattr(model, "n_states"))):
        return None
    kind = _FILE_KINDS[classes.dtype.kind]
    return {"kind": kind, "values": [_item(v) for v in classes]}


def classes_from_header(field: object, model: StructuredModel, src: str) -> np.ndarray | None:
    """``classes_`` of a model file's field (None: the default for the model), every value checked."""
    if not getattr(model, "class_labels", False):
        if field is not None:
            raise ValueError(f"{src}: field 'classes' is set, but {type(model).__name__} has no class labels")
        return None
    K = int(getattr(model, "n_states"))
    if field is None:
        return np.arange(K, dtype=np.int64)
    if not isinstance(field, dict) or set(field) != {"kind", "values"}:
        raise ValueError(f"{src}: field 'classes' must be an object with the keys 'kind' and 'values'")
    kind, values = field["kind"], field["values"]
    types = {"str": (str,), "int": (int,), "float": (int, float)}
    if kind not in types:
        raise ValueError(f"{src}: field 'classes': 'kind' must be one of {sorted(types)}, got {kind!r}")
    if not isinstance(values, list) or not 1 <= len(values) <= K:
        raise ValueError(f"{src}: field 'classes': 'values' must be a list of 1 to n_states={K} labels")
    if not all(isinstance(v, types[kind]) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{src}: field 'classes': every value must be a {kind}")
    try:
        classes: np.ndarray = np.array(values, dtype={"str": str, "int": np.int64, "float": np.float64}[kind])
    except OverflowError:
        raise ValueError(f"{src}: field 'classes': an integer label is outside int64") from None
    if kind == "float" and not np.all(np.isfinite(classes)):
        raise ValueError(f"{src}: field 'classes': the labels must be finite")
    if classes.size > 1 and not np.all(classes[1:] > classes[:-1]):
        raise ValueError(f"{src}: field 'classes': the labels must be distinct and sorted")
    return classes


# ------------------------------------------------------------- loss weights
def check_no_unlabelled(model: StructuredModel, Y: Sequence[Any], name: str = "Y") -> None:
    """A ValueError when a labelling of a model with per-node labels marks nodes unlabelled (-1).

    StructuredSVM needs every node labelled; partial labels are the latent SVM's
    (`structfw.LatentStructuredSVM`) or, with any label filled in, a per-node weight of 0."""
    if not getattr(model, "per_node_labels", False):
        return
    for i, y in enumerate(Y):
        if isinstance(y, np.ndarray) and y.dtype.kind not in "iuf":
            continue
        try:
            a = np.asarray(y)
        except (ValueError, TypeError):
            continue  # fit_classes names the problem
        if a.dtype.kind in "iuf" and a.size and bool(np.any(a == -1)):
            raise ValueError(
                f"{name}[{i}] marks nodes unlabelled (-1): StructuredSVM trains on fully labelled examples. "
                "Partial labels need structfw.LatentStructuredSVM, which imputes the missing labels; or fill "
                "in any label there and give those nodes a weight of 0 in fit's sample_weight (the loss then "
                "ignores them)")


def resolve_class_weight(model: StructuredModel, classes: np.ndarray | None, Y: Sequence[Any],
                         class_weight: Any) -> np.ndarray | None:
    """The estimator's ``class_weight`` as an array over the model's states (None for None).

    ``"balanced"``: scikit-learn's rule n / (n_classes * count_k), counting the nodes of the
    training labellings (Y in states; the examples for multiclass), n_classes the number of
    states present; a state absent from Y gets 1.  A dict maps labels as the user gives them (the
    entries of ``classes_``) to weights >= 0; labels it omits weigh 1.
    """
    if class_weight is None:
        return None
    if classes is None:
        raise ValueError(f"class_weight applies to models with class labels; {type(model).__name__}'s labels are "
                         "not classes (use fit's sample_weight to weigh examples)")
    K = int(getattr(model, "n_states"))
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict {{label: weight}}, got {class_weight!r}")
        flat = np.concatenate([np.asarray(y, np.int64).ravel() for y in Y]) if len(Y) else np.zeros(0, np.int64)
        counts = np.bincount(flat, minlength=K).astype(np.float64)
        present = counts > 0
        cw = np.ones(K)
        cw[present] = flat.size / (present.sum() * counts[present])
        return cw
    if not isinstance(class_weight, Mapping):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict {{label: weight}}, got "
                         f"{type(class_weight).__name__}")
    cw = np.ones(K)
    for label, weight in class_weight.items():
        where = np.flatnonzero(classes == label) if _comparable(classes, label) else np.zeros(0, np.int64)
        if where.size != 1:
            raise ValueError(f"class_weight has label {label!r}, which is not among the labels of Y "
                             f"(classes_ = {_short_list(classes)})")
        try:
            f = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"class_weight[{label!r}] must be a number >= 0, got {weight!r}") from None
        if isinstance(weight, (bool, np.bool_)) or not np.isfinite(f) or f < 0:
            raise ValueError(f"class_weight[{label!r}] must be a finite number >= 0, got {weight!r}")
        cw[int(where[0])] = f
    return cw


def _comparable(classes: np.ndarray, label: Any) -> bool:
    if classes.dtype.kind == "U":
        return isinstance(label, (str, np.str_))
    return isinstance(label, (numbers.Real, np.number)) and not isinstance(label, (bool, np.bool_))


def example_weights(model: StructuredModel, Y: Sequence[Any], sample_weight: Any,
                    class_weight: np.ndarray | None) -> list[tuple[Any, ...]] | None:
    """Per example, the weights to give `StructuredModel.weight_example`, in order (one or two of
    them: class weights as per-node weights, then a per-example weight); None when there are none.

    ``sample_weight`` is None or a sequence of n items, each a float >= 0 or (models with per-node
    labels) an array of per-node weights >= 0; ``class_weight`` an array over states (or None).
    """
    n = len(Y)
    if sample_weight is None and class_weight is None:
        return None
    if sample_weight is not None:
        if isinstance(sample_weight, (str, bytes, Mapping)):
            raise ValueError(f"sample_weight must be None or a sequence of {n} weights (one per example), got "
                             f"{type(sample_weight).__name__}")
        try:
            sw = list(sample_weight)
        except TypeError:
            raise ValueError(f"sample_weight must be None or a sequence of {n} weights (one per example), got "
                             f"{type(sample_weight).__name__}") from None
        if len(sw) != n:
            raise ValueError(f"sample_weight must have one entry per example: got {len(sw)} for {n} examples")
    else:
        sw = [None] * n
    per_node = bool(getattr(model, "per_node_labels", False))
    out: list[tuple[Any, ...]] = []
    for i, (y, s) in enumerate(zip(Y, sw)):
        steps: list[Any] = []
        if class_weight is not None:
            c = class_weight[np.asarray(y, np.int64)]
            if per_node:
                c = np.ascontiguousarray(c, dtype=np.float64).ravel()
                if s is not None and np.ndim(s) > 0:
                    # per-node sample weights times the class weights: one array
                    try:
                        arr = np.asarray(s, dtype=np.float64)
                    except (TypeError, ValueError):
                        raise ValueError(f"sample_weight[{i}] must hold numbers, got {s!r}") from None
                    if arr.size != c.size:
                        raise ValueError(f"sample_weight[{i}] must have one weight per node ({c.size}), got shape "
                                         f"{arr.shape}")
                    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                        raise ValueError(f"sample_weight[{i}] must hold finite weights >= 0")
                    if not arr.sum() > 0:
                        raise ValueError(f"sample_weight[{i}]: the per-node weights are all zero, so the example "
                                         "has no loss; drop the example, or give its nodes weights")
                    c = arr.ravel() * c
                    s = None
                if not c.sum() > 0:
                    raise ValueError(f"sample_weight[{i}] and class_weight give every node of example {i} the "
                                     "weight 0, so the example has no loss; drop it, or weigh its classes")
                steps.append(c)
            else:
                steps.append(float(c))
        if s is not None:
            steps.append(s)
        out.append(tuple(steps))
    return out
