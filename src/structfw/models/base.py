"""The model interface: the only thing a user writes for a new structured task.

docs/design.md, "Notation".  A model knows the joint feature map phi(x, y) in R^d, the
task loss Delta(y_true, y), and how to solve the loss-augmented decoding problem

    y* = argmax_y  H_i(y; w) = L_i(y) - ⟨w, psi_i(y)⟩,   psi_i(y) = phi(x_i, y_i) - phi(x_i, y)

(eq. (2) of Osokin et al. 2016), which is equivalent to
argmax_y  Delta(y_i, y) + ⟨w, phi(x_i, y)⟩.  Solvers only ever call the methods
defined here.

Checked and unchecked calls.  The public methods of the bundled models check their arguments
(`checked`): a wrong input, a labelling of the wrong length, type or range, or a w of the wrong
length is a ValueError naming the method and the argument, not a numpy or numba error from
inside a kernel (nor an index past d written by one).  The engine validates a training set once
(`StructuredModel.check_data`) and then calls the same methods without their checks
(`unchecked_method`), so a fit pays nothing for them.  A user's model is called as it is
written: its methods are its own, and the engine calls them.
"""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector, as_dense, dot
from ._validation import check_label_pair, check_real, check_weight_vector

_F = TypeVar("_F", bound=Callable[..., Any])

#: the parameter names `checked` reads as labellings (a method without ``x`` checks them as a pair)
_LABELLINGS = ("y", "y_true")
#: the methods every model class has an unchecked twin ``_unchecked_<name>`` of (`bind_unchecked_twins`)
UNCHECKED_TWINS = ("joint_feature", "psi", "loss", "example_loss", "loss_augmented_decode", "decode", "score",
                   "fixed_score", "expectation", "loss_augmented_decode_with_bound", "energy", "scores")


def checked(method: _F) -> _F:
    """Decorator of a model method: its callers' arguments are checked, once, before it runs.

    The parameters are checked by their names (`StructuredModel._check_arguments`): ``x`` is
    validated as one input, ``y`` and ``y_true`` as labellings of it (None passes where it is
    the parameter's default, and for `StructuredModel.expectation`), or, in a method without
    ``x`` (``loss``), as a pair; ``w`` and ``v`` as weight vectors of length d, ``c`` as a
    finite number; any other parameter passes as it is.  The method then runs on the validated
    values.

    The undecorated method stays the function's ``__unchecked__``: `unchecked_method` hands it
    to the engine, which calls it on data validated once by ``check_data``, and every model
    class has it as ``_unchecked_<name>`` for the models' own calls (`bind_unchecked_twins`).
    """
    sig = inspect.signature(method)
    names = tuple(sig.parameters)[1:]
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values()):
        raise TypeError(f"checked: {method.__qualname__} must take positional-or-keyword parameters only")
    optional = frozenset(p for p in names if sig.parameters[p].default is None
                         or (p == "y_true" and method.__name__ == "expectation"))
    n = len(names)

    @functools.wraps(method)
    def public(self: StructuredModel, *args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != n:
            bound = sig.bind(self, *args, **kwargs)  # a TypeError names a missing or unknown argument
            bound.apply_defaults()
            args = bound.args[1:]
        return method(self, *self._check_arguments(method.__name__, names, optional, args))

    setattr(public, "__unchecked__", method)
    return cast(_F, public)


def unchecked_method(model: object, name: str) -> Callable[..., Any]:
    """``model.<name>`` as the engine calls it, on data the model validated (``check_data``).

    A bundled model's checked method (`checked`) without its checks; any other method as it is:
    a user model's, a subclass's or a mixin's override (which may call the checked method of
    its base class through ``super()``), or the method of an object that wraps a model."""
    method = getattr(model, name)
    body = getattr(method, "__unchecked__", None)
    if body is None:
        return cast("Callable[..., Any]", method)
    return types.MethodType(body, method.__self__)


def bind_unchecked_twins(cls: type) -> None:
    """Set ``cls._unchecked_<name>`` for every name of `UNCHECKED_TWINS` that ``cls`` has: the
    method that resolves along the class's MRO, without the checks of `checked`.

    The bundled models call each other's methods through these (a checked ``score`` computes
    its joint feature unchecked), so a subclass's or a mixin's override of one method is still
    the one every other method uses, as it would be through ``self.<name>``."""
    for name in UNCHECKED_TWINS:
        method = getattr(cls, name, None)
        if method is not None:
            setattr(cls, "_unchecked_" + name, getattr(method, "__unchecked__", method))


class WeightedInput:
    """A training input that carries the weights of its loss (what
    `StructuredModel.weight_example` returns for the bundled models that have no input type of
    their own to carry them).

    Parameters
    ----------
    x : object
        The validated input (what the model's ``check_X`` returns).
    loss_weights : float or ndarray
        The model's coefficients of the weighted loss: a float s (per-example weight, the loss is
        s Delta(y_true, y)) or, for per-node labellings, an array a of one coefficient per node
        (the loss is sum_l a_l [y_l != y_true_l]; a sums to the example's weight).

    Every method of the model that takes an input accepts a `WeightedInput`; ``check_X``
    re-validates the input and keeps the weights, so weighted training sets can be passed on
    (to `structfw.path.regularization_path`, say).  ``shape`` and ``sum`` are the input's (the
    sum adds the weights'), so training-set fingerprints see both.
    """

    __slots__ = ("x", "loss_weights")

    def __init__(self, x: Any, loss_weights: float | npt.NDArray[np.float64]) -> None:
        self.x = x
        self.loss_weights: Any = loss_weights  # float or ndarray, by model

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.x)) if not hasattr(self.x, "shape") else tuple(self.x.shape)

    def sum(self) -> float:
        try:
            inner = float(self.x.sum()) if hasattr(self.x, "sum") else float(np.sum(np.asarray(self.x, dtype=float)))
        except (TypeError, ValueError):
            values = getattr(self.x, "values", None)  # a SparseVector: its non-zeros
            inner = float(np.sum(values)) if values is not None else 0.0
        a = np.ravel(self.loss_weights)
        # the weights' sum and their positions' weighted sum: normalised per-node weights all sum to the
        # example's weight, so the fingerprint (`Problem.fingerprint`) also needs where they lie
        return inner + float(a.sum()) + float(np.dot(a, np.arange(1.0, a.size + 1.0)))

    def __getstate__(self) -> tuple[Any, Any]:
        return self.x, self.loss_weights

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self.x, self.loss_weights = state

    def __repr__(self) -> str:
        return f"WeightedInput({self.x!r}, loss_weights={self.loss_weights!r})"


def unweighted(x: Any) -> Any:
    """The input itself of a `WeightedInput` (anything else unchanged)."""
    return x.x if type(x) is WeightedInput else x


def check_example_weight(weight: Any, name: str, n_nodes: int | None) -> float | npt.NDArray[np.float64]:
    """A per-example weight (float >= 0) or, when ``n_nodes`` is given, also an array of ``n_nodes``
    per-node weights >= 0 with a positive sum; a ValueError naming ``name`` otherwise."""
    if isinstance(weight, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number >= 0, got {weight!r}")
    arr = np.asarray(weight) if not isinstance(weight, (int, float)) else None
    if arr is None or arr.ndim == 0:
        try:
            f = float(weight)
        except (TypeError, ValueError):
            kinds = "a number >= 0" if n_nodes is None else "a number >= 0 or an array of per-node weights"
            raise ValueError(f"{name} must be {kinds}, got {weight!r}") from None
        if not np.isfinite(f) or f < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {weight!r}")
        return f
    if n_nodes is None:
        raise ValueError(f"{name} must be a number >= 0 (this model's labellings have no nodes to weigh "
                         f"separately), got an array of shape {arr.shape}")
    if arr.dtype == object or arr.dtype.kind not in "biuf" or arr.dtype.kind == "b":
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64).ravel() if arr.size == n_nodes else arr
    if arr.shape != (n_nodes,):
        raise ValueError(f"{name} must have one weight per node ({n_nodes}), got shape {np.shape(weight)}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must hold finite weights >= 0")
    if not arr.sum() > 0:
        raise ValueError(f"{name}: the per-node weights are all zero, so the example has no loss; drop the "
                         "example, or give its nodes weights")
    return arr


def node_loss_coefficients(weight: float | npt.NDArray[np.float64], n_nodes: int, name: str
                           ) -> npt.NDArray[np.float64]:
    """a_l of the weighted normalised Hamming loss sum_l a_l [y_l != y_true_l]: s / L for a
    per-example weight s, c_l / sum_u c_u for per-node weights c."""
    if isinstance(weight, float):
        return np.full(n_nodes, weight / n_nodes if n_nodes else 0.0)
    total = float(weight.sum())
    if not total > 0:
        raise ValueError(f"{name}: the node weights sum to 0, so the example has no loss")
    return np.ascontiguousarray(weight / total)


def compose_node_coefficients(previous: npt.NDArray[np.float64] | None, weight: float | npt.NDArray[np.float64],
                              n_nodes: int, name: str) -> npt.NDArray[np.float64]:
    """The loss coefficients of an input weighted by ``weight`` (checked by `check_example_weight`)
    when it already has the coefficients ``previous`` (None: unweighted, a_l = 1/L).

    Weights compose: a per-example weight s multiplies the loss (a -> s a), per-node weights c
    multiply the nodes' shares and keep the example's total (a -> sum(a) c a / sum(c a))."""
    if previous is None:
        return node_loss_coefficients(weight, n_nodes, name)
    if isinstance(weight, float):
        return np.ascontiguousarray(previous * weight)
    t = weight * previous
    total = float(t.sum())
    if not total > 0:
        raise ValueError(f"{name}: with the weights the input already has, the per-node weights give its nodes no "
                         "weight (their product sums to 0), so the example has no loss")
    return np.ascontiguousarray(t * (float(previous.sum()) / total))


class StructuredModel:
    """Base class of structured models.

    Subclasses must set ``size_joint_feature`` (d) and implement
    `joint_feature`, `loss`, `loss_augmented_decode` and
    `decode`.  They may override `psi` (a faster corner),
    `label_key`, `check_X`, `check_y` and
    `check_labelling`.

    Attributes
    ----------
    size_joint_feature : int
        d, the length of phi(x, y) and of the weight vector w.
    approximate_oracle : bool
        True when `loss_augmented_decode` may return a non-maximiser
        (then duality gaps are lower bounds only, BCFW paper eqs. (11)-(13)).
    nonnegative_indices : ndarray of int or None
        Coordinates of w that must stay non-negative (e.g. pairwise weights of a
        graph-cut model, for submodularity).
    class_labels : bool
        True when every entry of a labelling is a class label, a state in
        0..n_states-1 (the model then has ``n_states``): `StructuredSVM` then also
        takes labels of any other kind (strings, other integers) and encodes them
        as states (its ``classes_``).  False (the default) passes labels as given.
    """

    size_joint_feature: int = 0
    approximate_oracle: bool = False
    nonnegative_indices: npt.NDArray[np.int64] | None = None
    class_labels: bool = False

    # the unchecked twins of the methods (`bind_unchecked_twins`), set on every class
    _unchecked_joint_feature: Callable[..., Any]
    _unchecked_psi: Callable[..., Any]
    _unchecked_loss: Callable[..., Any]
    _unchecked_example_loss: Callable[..., Any]
    _unchecked_loss_augmented_decode: Callable[..., Any]
    _unchecked_decode: Callable[..., Any]
    _unchecked_score: Callable[..., Any]
    _unchecked_fixed_score: Callable[..., Any]
    _unchecked_expectation: Callable[..., Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        bind_unchecked_twins(cls)

    # ------------------------------------------------------- argument checks
    def _check_arguments(self, method: str, names: tuple[str, ...], optional: frozenset[str],
                         args: Sequence[Any]) -> Sequence[Any]:
        """The arguments of a call of the `checked` ``method``, validated by their ``names``
        (errors name ``<Model>.<method>: <argument>``)."""
        where = f"{type(self).__name__}.{method}"
        if "x" not in names:
            if names[:2] != ("y_true", "y"):
                return args
            return (*self._check_label_pair(args[0], args[1], where), *args[2:])
        out = list(args)
        x = None
        for k, name in enumerate(names):
            a = out[k]
            if name == "x":
                x = out[k] = self._check_input(a, f"{where}: x")
            elif name in _LABELLINGS:
                if not (a is None and name in optional):
                    out[k] = self._check_labelling_of(x, a, f"{where}: {name}")
            elif name in ("w", "v"):
                out[k] = self._check_weights(a, f"{where}: {name}")
            elif name == "c":
                out[k] = check_real(a, f"{where}: c")
        return out

    def _check_input(self, x: Any, name: str) -> Any:
        """One input of a checked method, validated (`CheckedModel`); here: as it is."""
        return x

    def _check_labelling_of(self, x: Any, y: Any, name: str) -> Any:
        """A labelling of the validated input x, validated (`CheckedModel`); here: as it is."""
        return y

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[Any, Any]:
        """The two labellings of a loss, validated (`CheckedModel`); here: as they are."""
        return y_true, y

    def _check_weights(self, w: Any, name: str) -> Any:
        """A weight vector, validated (`CheckedModel`); here: as it is."""
        return w

    # ------------------------------------------------------------------ core
    def joint_feature(self, x: Any, y: Any) -> npt.NDArray[np.float64] | SparseVector:  # pragma: no cover - abstract
        """phi(x, y) in R^d, a dense ndarray or a SparseVector."""
        raise NotImplementedError

    def loss(self, y_true: Any, y: Any) -> float:  # pragma: no cover - abstract
        """Delta(y_true, y) >= 0 with Delta(y, y) = 0."""
        raise NotImplementedError

    @checked
    def example_loss(self, x: Any, y_true: Any, y: Any) -> float:
        """Delta_i(y_true, y) for example x: `loss`, unless the model weighs the loss per
        example (e.g. `GraphModel`'s per-node weights, carried by x).  The engine's corners
        call this; test losses (`mean_loss`) use the unweighted `loss`."""
        return self._unchecked_loss(y_true, y)

    #: True when a labelling is one label per node and the loss their normalised Hamming loss:
    #: the model then takes per-node loss weights (`weight_example`) and marks unlabelled nodes -1
    per_node_labels: bool = False

    def weight_example(self, x: Any, y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> Any:
        """The input x carrying the weights of its loss, for training.

        Parameters
        ----------
        x : object
            A validated input (from ``check_X``).
        y_true : object
            Its validated labelling.
        weight : float or ndarray
            A per-example weight s >= 0 (the loss becomes s Delta(y_true, y)) or, for models with
            ``per_node_labels``, one weight c_l >= 0 per node (the loss becomes
            sum_l c_l [y_l != y_true_l] / sum_l c_l).
        name : str
            The argument named by errors.

        Returns
        -------
        object
            An input every method of the model takes (for training: `example_loss` and
            `loss_augmented_decode` see the weighted loss; `decode`, `psi` and the rest
            ignore the weights).  Weighing an input that is already weighted composes: a
            per-example weight multiplies its loss, per-node weights multiply its nodes' shares.

        Raises
        ------
        ValueError
            When the weight is invalid, or the model cannot weigh its loss.  The base class
            accepts only the weight 1 (returning x itself): a user model weighs its loss by
            overriding this method (and `example_loss` and its oracle).
        """
        w = check_example_weight(weight, name, None)
        if w != 1.0:
            raise ValueError(f"{name}: {type(self).__name__} cannot weigh its loss (it does not implement "
                             "weight_example); only weights of 1 are accepted")
        return x

    def loss_augmented_decode(self, x: Any, y_true: Any,
                              w: npt.NDArray[np.float64]) -> Any:  # pragma: no cover - abstract
        """argmax_y Delta(y_true, y) + ⟨w, phi(x, y)⟩ (the max oracle)."""
        raise NotImplementedError

    def decode(self, x: Any, w: npt.NDArray[np.float64]) -> Any:  # pragma: no cover - abstract
        """argmax_y ⟨w, phi(x, y)⟩ (prediction)."""
        raise NotImplementedError

    # -------------------------------------------------------------- defaults
    @checked
    def psi(self, x: Any, y_true: Any, y: Any) -> npt.NDArray[np.float64] | SparseVector:
        """The corner direction psi_i(y) = phi(x, y_true) - phi(x, y).

        Default: the difference of two joint features (sparse when both are).
        """
        a = self._unchecked_joint_feature(x, y_true)
        b = self._unchecked_joint_feature(x, y)
        if isinstance(a, SparseVector) and isinstance(b, SparseVector):
            return SparseVector.from_pairs(
                np.concatenate([a.indices, b.indices]),
                np.concatenate([a.values, -b.values]),
                self.size_joint_feature,
            )
        return as_dense(a) - as_dense(b)

    @checked
    def score(self, x: Any, y: Any, w: npt.NDArray[np.float64]) -> float:
        """⟨w, phi(x, y)⟩."""
        return dot(self._unchecked_joint_feature(x, y), w)

    def label_key(self, y: Any) -> Hashable:
        """A hashable identity of a labelling (corner sets use it)."""
        return np.ascontiguousarray(y).tobytes()

    def mean_loss(self, Y_true: Sequence[Any], Y_pred: Sequence[Any]) -> float:
        """Mean task loss over a data set (the test error that traces report)."""
        if len(Y_true) != len(Y_pred):
            raise ValueError(f"Y_true and Y_pred must have the same length; got {len(Y_true)} and {len(Y_pred)}")
        if len(Y_true) == 0:
            return float("nan")
        return float(np.mean([self.loss(a, b) for a, b in zip(Y_true, Y_pred)]))

    # ------------------------------------------------------------ validation
    def check_X(self, X: Iterable[Any]) -> list[Any]:
        """Validate and convert a list of inputs; raise ValueError naming ``X``."""
        return list(X)

    def check_y(self, x: Any, y: Any, name: str = "Y") -> Any:
        """Validate and convert one labelling for input x; raise ValueError naming ``name``."""
        return y

    def check_labelling(self, x: Any, y: Any, name: str = "labelling") -> Any:
        """Validate a labelling produced by an oracle (default: same checks as check_y)."""
        return self.check_y(x, y, name=name)

    def check_data(self, X: Iterable[Any],
                   Y: Iterable[Any] | None = None) -> tuple[list[Any], list[Any] | None]:
        """Validate a data set: ``X`` (and ``Y`` of the same length)."""
        X = self.check_X(X)
        if Y is None:
            return X, None
        Y = list(Y)
        if len(X) != len(Y):
            raise ValueError(
                f"X and Y must have the same length; got len(X)={len(X)} and len(Y)={len(Y)}"
            )
        Y = [self.check_y(x, y, name=f"Y[{i}]") for i, (x, y) in enumerate(zip(X, Y))]
        return X, Y

    def expectation(self, x: Any, y_true: Any, v: npt.ArrayLike,
                    c: float) -> tuple[npt.NDArray[np.float64] | SparseVector, float, float]:
        """Optional expectation oracle (marginals), needed by online exponentiated gradient.

        For the Gibbs distribution over all labellings y of x

            p(y) ∝ exp(c Delta(y_true, y) + ⟨v, phi(x, y)⟩)

        return ``(E_phi, E_loss, log_Z)``: E_phi = E_p[phi(x, y)] (a dense ndarray of
        length d or a `SparseVector`), E_loss = E_p[Delta(y_true, y)]
        and log_Z = log sum_y exp(c Delta(y_true, y) + ⟨v, phi(x, y)⟩).  ``y_true=None``
        drops the loss term (plain marginals; E_loss = 0).

        Online EG (Collins et al. 2008) keeps alpha_i(y) ∝ exp(theta_i(y)) with
        theta_i(y) = c_i L_i(y) + ⟨v_i, phi(x_i, y)⟩ + const, so the block parts are
        w_i = (phi(x_i, y_i) - E_phi) / (lam n) and l_i = E_loss / n
        (`structfw.solvers.OnlineEG`).  Check `has_expectation_oracle`
        before calling.

        Raises
        ------
        NotImplementedError
            In the base class: a model opts in by overriding this method.
        """
        raise NotImplementedError(f"{type(self).__name__} has no expectation oracle (marginals); implement "
                                  "expectation(x, y_true, v, c) to use it with online exponentiated gradient")

    @property
    def has_expectation_oracle(self) -> bool:
        """True when this model implements `expectation` (overrides the base stub)."""
        return getattr(type(self), "expectation", None) is not StructuredModel.expectation

    def _expectation_args(self, v: npt.ArrayLike, c: Any) -> tuple[npt.NDArray[np.float64], float]:
        """(v as C-contiguous float64 (d,), c as float) for `expectation`, or a
        ValueError naming ``v`` / ``c``.  Only v's shape is checked, not its values: v is
        the solver's iterate, and scanning d entries per call would cost more than the oracle."""
        v = np.ascontiguousarray(v, dtype=np.float64)
        if v.shape != (self.size_joint_feature,):
            raise ValueError(f"v must be a vector of length d = {self.size_joint_feature}, got shape {v.shape}")
        try:
            c = float(c)
        except (TypeError, ValueError):
            raise ValueError(f"c must be a finite number, got {c!r}") from None
        if not np.isfinite(c):
            raise ValueError(f"c must be a finite number, got {c!r}")
        return v, c

    #: True when `fixed_score` is not identically zero (the engine then adds it to L_i)
    has_fixed_score: bool = False

    def fixed_score(self, x: Any, y: Any) -> float:
        """Optional fixed, unlearned part of the score, ⟨w_o, phi_o(x, y)⟩ (MP-BCFW paper Sec. 3).

        The model scores a labelling as ⟨w, phi(x, y)⟩ + fixed_score(x, y), and its oracles
        maximise that.  The engine's corners then carry it in their constant term,
        L_i(y) = Delta(y_i, y) + fixed_score(x_i, y) - fixed_score(x_i, y_i), so the block
        gaps and the duality gap stay those of the problem the oracle solves.  Models that
        override it set ``has_fixed_score = True``.  Default: 0."""
        return 0.0

    def compiled_oracle(self, X: Sequence[Any], Y: Sequence[Any]) -> tuple[int, tuple[Any, ...]] | None:
        """Optional: ``(kind, data)``, the training set (X, Y) packed for a compiled corner kernel.

        `structfw.oracles.compiled.corner` ``(kind, data, i, w, merged)`` then returns
        ``(psi_idx, psi_val, L)`` of y_i* = argmax_y H_i(y; w) in numba, and the engine runs
        whole chunks of a pass in one call.  Default: None (the engine calls
        `loss_augmented_decode` from Python)."""
        return None

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments as JSON-able values (for saving without pickle)."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


bind_unchecked_twins(StructuredModel)


class CheckedModel(StructuredModel):
    """A model whose `checked` methods validate their arguments with the model's own validators.

    An input by ``_check_x(x, name)`` (what ``check_X`` applies to each input), a labelling of it
    by ``check_y``, the two labellings of a loss by ``_check_label_pair`` (here: 1-d arrays of
    one length with states in 0..n_states-1), a weight vector by its length d and finite entries.
    Every bundled model is one; the checks run when a user calls a method, never when the engine
    does (`unchecked_method`)."""

    def _check_x(self, x: Any, name: str) -> Any:  # pragma: no cover - every bundled model has one
        raise NotImplementedError

    def _check_input(self, x: Any, name: str) -> Any:
        return self._check_x(x, name)

    def _check_labelling_of(self, x: Any, y: Any, name: str) -> Any:
        return self.check_y(x, y, name=name)

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[Any, Any]:
        return check_label_pair(y_true, y, where, int(getattr(self, "n_states")), 1)

    def _check_weights(self, w: Any, name: str) -> npt.NDArray[np.float64]:
        return check_weight_vector(w, self.size_joint_feature, name)


MODEL_REGISTRY: dict[str, type[StructuredModel]] = {}

_M = TypeVar("_M", bound=type[StructuredModel])


def register_model(cls: _M) -> _M:
    """Class decorator: make a model reconstructible by name when loading a saved fit."""
    MODEL_REGISTRY[cls.__name__] = cls
    return cls
