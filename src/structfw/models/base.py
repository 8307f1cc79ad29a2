"""The model interface: the only thing a user writes for a new structured task.

docs/design.md, "Notation".  A model knows the joint feature map phi(x, y) in R^d, the
task loss Delta(y_true, y), and how to solve the loss-augmented decoding problem

    y* = argmax_y  H_i(y; w) = L_i(y) - <w, psi_i(y)>,   psi_i(y) = phi(x_i, y_i) - phi(x_i, y)

(eq. (2) of Osokin et al. 2016), which is equivalent to
argmax_y  Delta(y_i, y) + <w, phi(x_i, y)>.  Solvers only ever call the methods
defined here.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector, as_dense, dot


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

    # ------------------------------------------------------------------ core
    def joint_feature(self, x: Any, y: Any) -> npt.NDArray[np.float64] | SparseVector:  # pragma: no cover - abstract
        """phi(x, y) in R^d, a dense ndarray or a SparseVector."""
        raise NotImplementedError

    def loss(self, y_true: Any, y: Any) -> float:  # pragma: no cover - abstract
        """Delta(y_true, y) >= 0 with Delta(y, y) = 0."""
        raise NotImplementedError

    def example_loss(self, x: Any, y_true: Any, y: Any) -> float:
        """Delta_i(y_true, y) for example x: `loss`, unless the model weighs the loss per
        example (e.g. `GraphModel`'s per-node weights, carried by x).  The engine's corners
        call this; test losses (`mean_loss`) use the unweighted `loss`."""
        return self.loss(y_true, y)

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
        """argmax_y Delta(y_true, y) + <w, phi(x, y)> (the max oracle)."""
        raise NotImplementedError

    def decode(self, x: Any, w: npt.NDArray[np.float64]) -> Any:  # pragma: no cover - abstract
        """argmax_y <w, phi(x, y)> (prediction)."""
        raise NotImplementedError

    # -------------------------------------------------------------- defaults
    def psi(self, x: Any, y_true: Any, y: Any) -> npt.NDArray[np.float64] | SparseVector:
        """The corner direction psi_i(y) = phi(x, y_true) - phi(x, y).

        Default: the difference of two joint features (sparse when both are).
        """
        a = self.joint_feature(x, y_true)
        b = self.joint_feature(x, y)
        if isinstance(a, SparseVector) and isinstance(b, SparseVector):
            return SparseVector.from_pairs(
                np.concatenate([a.indices, b.indices]),
                np.concatenate([a.values, -b.values]),
                self.size_joint_feature,
            )
        return as_dense(a) - as_dense(b)

    def score(self, x: Any, y: Any, w: npt.NDArray[np.float64]) -> float:
        """<w, phi(x, y)>."""
        return dot(self.joint_feature(x, y), w)

    def label_key(self, y: Any) -> Hashable:
        """A hashable identity of a labelling (corner sets use it)."""
        return np.ascontiguousarray(y).tobytes()

    def mean_loss(self, Y_true: Sequence[Any], Y_pred: Sequence[Any]) -> float:
        """Mean task loss over a data set (the test error that traces report)."""
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

            p(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>)

        return ``(E_phi, E_loss, log_Z)``: E_phi = E_p[phi(x, y)] (a dense ndarray of
        length d or a `SparseVector`), E_loss = E_p[Delta(y_true, y)]
        and log_Z = log sum_y exp(c Delta(y_true, y) + <v, phi(x, y)>).  ``y_true=None``
        drops the loss term (plain marginals; E_loss = 0).

        Online EG (Collins et al. 2008) keeps alpha_i(y) ∝ exp(theta_i(y)) with
        theta_i(y) = c_i L_i(y) + <v_i, phi(x_i, y)> + const, so the block parts are
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
        """Optional fixed, unlearned part of the score, <w_o, phi_o(x, y)> (MP-BCFW paper Sec. 3).

        The model scores a labelling as <w, phi(x, y)> + fixed_score(x, y), and its oracles
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


MODEL_REGISTRY: dict[str, type[StructuredModel]] = {}

_M = TypeVar("_M", bound=type[StructuredModel])


def register_model(cls: _M) -> _M:
    """Class decorator: make a model reconstructible by name when loading a saved fit."""
    MODEL_REGISTRY[cls.__name__] = cls
    return cls
