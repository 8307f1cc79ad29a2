"""The model interface: the only thing a user writes for a new structured task.

docs/design.md, "Notation".  A model knows the joint feature map phi(x, y) in R^d, the
task loss Delta(y_true, y), and how to solve the loss-augmented decoding problem

    y* = argmax_y  H_i(y; w) = L_i(y) - <w, psi_i(y)>,   psi_i(y) = phi(x_i, y_i) - phi(x_i, y)

(eq. (2) of Osokin et al. 2016), which is equivalent to
argmax_y  Delta(y_i, y) + <w, phi(x_i, y)>.  Solvers only ever call the methods
defined here.
"""
from __future__ import annotations

import numpy as np

from .._linalg import SparseVector, as_dense, dot


class StructuredModel:
    """Base class of structured models.

    Subclasses must set ``size_joint_feature`` (d) and implement
    :meth:`joint_feature`, :meth:`loss`, :meth:`loss_augmented_decode` and
    :meth:`decode`.  They may override :meth:`psi` (a faster corner),
    :meth:`label_key`, :meth:`check_X`, :meth:`check_y` and
    :meth:`check_labelling`.

    Attributes
    ----------
    size_joint_feature : int
        d, the length of phi(x, y) and of the weight vector w.
    approximate_oracle : bool
        True when :meth:`loss_augmented_decode` may return a non-maximiser
        (then duality gaps are lower bounds only, BCFW paper eqs. (11)-(13)).
    nonnegative_indices : ndarray of int or None
        Coordinates of w that must stay non-negative (e.g. pairwise weights of a
        graph-cut model, for submodularity).
    """

    size_joint_feature: int = 0
    approximate_oracle: bool = False
    nonnegative_indices = None

    # ------------------------------------------------------------------ core
    def joint_feature(self, x, y):  # pragma: no cover - abstract
        """phi(x, y) in R^d, a dense ndarray or a SparseVector."""
        raise NotImplementedError

    def loss(self, y_true, y):  # pragma: no cover - abstract
        """Delta(y_true, y) >= 0 with Delta(y, y) = 0."""
        raise NotImplementedError

    def loss_augmented_decode(self, x, y_true, w):  # pragma: no cover - abstract
        """argmax_y Delta(y_true, y) + <w, phi(x, y)> (the max oracle)."""
        raise NotImplementedError

    def decode(self, x, w):  # pragma: no cover - abstract
        """argmax_y <w, phi(x, y)> (prediction)."""
        raise NotImplementedError

    # -------------------------------------------------------------- defaults
    def psi(self, x, y_true, y):
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

    def score(self, x, y, w):
        """<w, phi(x, y)>."""
        return dot(self.joint_feature(x, y), w)

    def label_key(self, y):
        """A hashable identity of a labelling (corner sets use it)."""
        return np.ascontiguousarray(y).tobytes()

    def mean_loss(self, Y_true, Y_pred):
        """Mean task loss over a data set (the test error that traces report)."""
        if len(Y_true) == 0:
            return float("nan")
        return float(np.mean([self.loss(a, b) for a, b in zip(Y_true, Y_pred)]))

    # ------------------------------------------------------------ validation
    def check_X(self, X):
        """Validate and convert a list of inputs; raise ValueError naming ``X``."""
        return list(X)

    def check_y(self, x, y, name="Y"):
        """Validate and convert one labelling for input x; raise ValueError naming ``name``."""
        return y

    def check_labelling(self, x, y, name="labelling"):
        """Validate a labelling produced by an oracle (default: same checks as check_y)."""
        return self.check_y(x, y, name=name)

    def check_data(self, X, Y=None):
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

    def expectation(self, x, y_true, v, c):
        """Optional expectation oracle (marginals), needed by online exponentiated gradient.

        For the Gibbs distribution over all labellings y of x

            p(y) ∝ exp(c Delta(y_true, y) + <v, phi(x, y)>)

        return ``(E_phi, E_loss, log_Z)``: E_phi = E_p[phi(x, y)] (a dense ndarray of
        length d or a :class:`~structfw._linalg.SparseVector`), E_loss = E_p[Delta(y_true, y)]
        and log_Z = log sum_y exp(c Delta(y_true, y) + <v, phi(x, y)>).  ``y_true=None``
        drops the loss term (plain marginals; E_loss = 0).

        Online EG (Collins et al. 2008) keeps alpha_i(y) ∝ exp(theta_i(y)) with
        theta_i(y) = c_i L_i(y) + <v_i, phi(x_i, y)> + const, so the block parts are
        w_i = (phi(x_i, y_i) - E_phi) / (lam n) and l_i = E_loss / n
        (:class:`structfw.solvers.OnlineEG`).  Check :attr:`has_expectation_oracle`
        before calling.

        Raises
        ------
        NotImplementedError
            In the base class: a model opts in by overriding this method.
        """
        raise NotImplementedError(f"{type(self).__name__} has no expectation oracle (marginals); implement "
                                  "expectation(x, y_true, v, c) to use it with online exponentiated gradient")

    @property
    def has_expectation_oracle(self):
        """True when this model implements :meth:`expectation` (overrides the base stub)."""
        return getattr(type(self), "expectation", None) is not StructuredModel.expectation

    def _expectation_args(self, v, c):
        """(v as C-contiguous float64 (d,), c as float) for :meth:`expectation`, or a
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

    #: True when :meth:`fixed_score` is not identically zero (the engine then adds it to L_i)
    has_fixed_score = False

    def fixed_score(self, x, y):
        """Optional fixed, unlearned part of the score, <w_o, phi_o(x, y)> (MP-BCFW paper Sec. 3).

        The model scores a labelling as <w, phi(x, y)> + fixed_score(x, y), and its oracles
        maximise that.  The engine's corners then carry it in their constant term,
        L_i(y) = Delta(y_i, y) + fixed_score(x_i, y) - fixed_score(x_i, y_i), so the block
        gaps and the duality gap stay those of the problem the oracle solves.  Models that
        override it set ``has_fixed_score = True``.  Default: 0."""
        return 0.0

    def compiled_oracle(self, X, Y):
        """Optional: ``(kind, data)``, the training set (X, Y) packed for a compiled corner kernel.

        :func:`structfw.oracles.compiled.corner` ``(kind, data, i, w, merged)`` then returns
        ``(psi_idx, psi_val, L)`` of y_i* = argmax_y H_i(y; w) in numba, and the engine runs
        whole chunks of a pass in one call.  Default: None (the engine calls
        :meth:`loss_augmented_decode` from Python)."""
        return None

    def get_config(self):
        """Constructor arguments as JSON-able values (for saving without pickle)."""
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


MODEL_REGISTRY: dict[str, type] = {}


def register_model(cls):
    """Class decorator: make a model reconstructible by name when loading a saved fit."""
    MODEL_REGISTRY[cls.__name__] = cls
    return cls
