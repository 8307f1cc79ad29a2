"""The training problem as the solvers see it: data, lam, and validated corners.

Solvers reach the model only through :class:`Problem` (docs/design.md, "Layers"):
it turns a labelling into a *corner* (psi_i(y), L_i(y)) -- the column of A
times lam*n and the entry of b times n of the dual (2) of Osokin et al. 2016 --
and checks what the oracle returned.
"""
from __future__ import annotations

import copy
import hashlib
import math

import numpy as np

from .._linalg import SparseVector, dot
from ..executor import SerialExecutor
from ._kernels import project_nonneg

#: Slack allowed when checking that an exact oracle is not worse than y_i.
_H_TOL = 1e-9


def check_lam(lam, name="lam"):
    try:
        lam_f = float(lam)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number; got {lam!r}") from None
    if not math.isfinite(lam_f) or lam_f <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {lam!r}")
    return lam_f


def as_corner_vector(v, d):
    """Corners are stored sparse: coordinates outside the labelling's support are 0."""
    if isinstance(v, SparseVector):
        return v
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (d,):
        raise ValueError(f"model.psi returned a vector of shape {v.shape}; expected ({d},)")
    return SparseVector.from_dense(v)


class Problem:
    """Data, regularisation and model of one SSVM training problem.

    Parameters
    ----------
    model : StructuredModel
    X, Y : lists
        Training inputs and labellings (validated by the model).
    lam : float
        Regularisation lambda > 0 of the primal P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w).
    executor : executor object, optional
        Runs batch oracle passes (see :mod:`structfw.executor`).
    validated : bool
        Skip re-validation when the caller already checked X and Y.
    """

    def __init__(self, model, X, Y, lam, executor=None, validated=False):
        self.model = model
        if not validated:
            X, Y = model.check_data(X, Y)
        if len(X) == 0:
            raise ValueError("X must contain at least one example; got an empty list")
        self.X, self.Y = X, Y
        self.lam = check_lam(lam)
        self.n = len(X)
        self.d = int(model.size_joint_feature)
        self.executor = executor or SerialExecutor()
        self.data_key = self.executor.bind(model, X, Y)  # the workers keep the data; calls send w
        self.approximate = bool(getattr(model, "approximate_oracle", False))
        self.truth_keys = [model.label_key(y) for y in Y]
        self._fingerprint = None
        self.nonneg_idx, self.nonneg_mask = _nonneg_set(model, self.d)

    @property
    def constrained(self):
        """True when the model asks for w_S >= 0 on its ``nonnegative_indices``."""
        return self.nonneg_idx is not None

    def project(self, v, out=None):
        """Pi(v): the closest point of {w : w_S >= 0}, i.e. v with w_S clipped at 0."""
        out = np.array(v, dtype=np.float64, copy=True) if out is None else out
        if self.nonneg_idx is not None:
            project_nonneg(np.asarray(v, dtype=np.float64), out, self.nonneg_idx)
        elif out is not v:
            out[:] = v
        return out

    @property
    def fingerprint(self):
        """A digest of the training set (shapes, labellings and per-example feature sums).

        Solver states carry it, so that a warm start on other data is noticed
        instead of silently continuing another problem's dual point."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=16)
            h.update(f"{self.n}:{self.d}".encode())
            for x, key in zip(self.X, self.truth_keys):
                h.update(repr(key).encode() if not isinstance(key, bytes) else key)
                h.update(repr(_feature_summary(x)).encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    # ------------------------------------------------------------ corners
    def corner(self, i, y):
        """(psi_i(y) as SparseVector, L_i(y)) for labelling y of example i."""
        psi = as_corner_vector(self.model.psi(self.X[i], self.Y[i], y), self.d)
        L = float(self.model.loss(self.Y[i], y))
        if self.model.has_fixed_score:
            # the fixed score's difference is part of the corner's constant (MP-BCFW Sec. 3)
            x = self.X[i]
            L += float(self.model.fixed_score(x, y)) - float(self.model.fixed_score(x, self.Y[i]))
        return psi, L

    def check_oracle_output(self, i, y):
        name = f"the labelling returned by {type(self.model).__name__}.loss_augmented_decode for example {i}"
        return self.model.check_labelling(self.X[i], y, name=name)

    def check_oracle_value(self, i, H):
        """An exact oracle can never do worse than y_i itself (H_i(y_i; w) = 0)."""
        if H < -_H_TOL * max(1.0, abs(H)) and not self.approximate:
            raise ValueError(
                f"the labelling returned by {type(self.model).__name__}.loss_augmented_decode for "
                f"example {i} has H_i = {H:.3g} < 0 = H_i(y_i): the oracle is not a maximiser. "
                "Set model.approximate_oracle = True if it is approximate."
            )

    def oracle_corner(self, i, y, w, validate=False):
        """Corner of an oracle's labelling y for example i at w: (y, psi, L, H).

        With ``validate`` the labelling is checked by the model and an exact
        oracle must not do worse than y_i (H_i(y_i; w) = 0).  An approximate
        oracle that did worse is replaced by the ground-truth corner, so that
        H >= 0 always holds for what the solvers receive.
        """
        if validate:
            y = self.check_oracle_output(i, y)
        psi, L = self.corner(i, y)
        H = L - dot(psi, w)
        if validate:
            self.check_oracle_value(i, H)
        if H < 0.0 and self.approximate:
            return self.Y[i], SparseVector.zeros(self.d), 0.0, 0.0
        return y, psi, L, H

    def compiled_oracle(self):
        """The model's compiled corner kernel over this training set, or None.

        ``(kind, data)`` for :func:`structfw.oracles.compiled.corner`, which returns
        ``(psi_idx, psi_val, L)`` of the loss-augmented labelling of example i; built
        once per problem.  Approximate oracles are never compiled into the engine's
        fast pass (their outputs need the ground-truth guard)."""
        if not hasattr(self, "_compiled"):
            make = getattr(self.model, "compiled_oracle", None)
            usable = make is not None and not self.approximate and not overrides_compiled_methods(self.model)
            self._compiled = make(self.X, self.Y) if usable else None
        return self._compiled

    def expectation(self, i, v, c):
        """The model's expectation oracle on example i: (E_phi, E_loss, log_Z) of
        p(y) ∝ exp(c L_i(y) + <v, phi(x_i, y)>) (online exponentiated gradient needs it)."""
        return self.model.expectation(self.X[i], self.Y[i], v, c)

    def joint_feature_true(self, i):
        """phi(x_i, y_i)."""
        return self.model.joint_feature(self.X[i], self.Y[i])

    def max_oracle(self, i, w):
        """y_i* = argmax_y H_i(y; w), the model's labelling as it returned it (unchecked)."""
        return self.model.loss_augmented_decode(self.X[i], self.Y[i], w)

    def oracle(self, i, w, validate=False):
        """Call the max oracle on example i at w; returns (y, psi, L, H)."""
        return self.oracle_corner(i, self.max_oracle(i, w), w, validate)

    def batch_oracle(self, w, indices=None, validate=True):
        """Oracle over many examples through the executor; a list of (y, psi, L, H)."""
        idx = range(self.n) if indices is None else list(indices)
        labels = self.executor.loss_augmented_decode(self.data_key, w, None if indices is None else idx)
        return [self.oracle_corner(i, y, w, validate) for i, y in zip(idx, labels)]

    def batch_hinges(self, w, validate=True):
        """H_i(y_i*; w) of every example, (n,): what a gap pass needs when it keeps no corner.

        With the model's compiled oracle and no workers it is one numba call (no psi is
        merged or handed to Python); otherwise :meth:`batch_oracle` through the executor.
        ``validate`` checks that an exact oracle did no worse than y_i."""
        compiled = self.compiled_oracle()
        if compiled is None or type(self.executor) is not SerialExecutor:
            return np.array([r[3] for r in self.batch_oracle(w, validate=validate)])
        from ._fastpass import hinge_pass  # numba kernels load on first use, not on import

        H = hinge_pass(compiled, self.n, np.ascontiguousarray(w, np.float64))
        if validate and self.n:
            worst = int(np.argmin(H))
            self.check_oracle_value(worst, float(H[worst]))
        return H

    def submit_oracle(self, w, i):
        """Start example i's max oracle at w on the executor; a future of [labelling].
        The caller keeps w unchanged until the result is in."""
        return self.executor.submit(self.data_key, w, [i])

    def decode_all(self, w):
        """argmax_y <w, phi(x_i, y)> for every training example (through the executor)."""
        return self.executor.decode(self.data_key, w)

    def primal(self, w, hinge_sum):
        """P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w)   (eq. (1))."""
        return 0.5 * self.lam * float(np.dot(w, w)) + hinge_sum / self.n

    def with_lam(self, lam):
        """The same data and model at another lam (corners do not depend on lam)."""
        p = copy.copy(self)  # shallow: data, model and executor are shared; subclasses survive
        p.lam = check_lam(lam)
        return p


#: what a compiled corner kernel computes in place of the model's Python methods
COMPILED_METHODS = ("loss_augmented_decode", "psi", "loss", "joint_feature", "fixed_score")


def overrides_compiled_methods(model):
    """True if a subclass redefines a method that the compiled oracle it inherits embodies.

    A ``ChainModel`` subclass with its own loss (and loss-augmented decoding) but no
    ``compiled_oracle`` of its own would otherwise be trained by the base class's kernel,
    which maximises another objective: a silently wrong model.  Such a model is trained
    through its Python methods instead."""
    cls = type(model)
    owner = next((c for c in cls.__mro__ if "compiled_oracle" in vars(c)), None)
    if owner is None:
        return False
    return any(getattr(cls, name, None) is not getattr(owner, name, None) for name in COMPILED_METHODS)


def _feature_summary(x):
    """(shape, sum) of an input: cheap, and it changes when the input does."""
    try:
        if hasattr(x, "shape") and hasattr(x, "sum"):
            return (tuple(x.shape), float(x.sum()))
        arr = np.asarray(x, dtype=float)
        return (arr.shape, float(arr.sum()))
    except (TypeError, ValueError):
        return repr(x)[:200]


def _nonneg_set(model, d):
    """(sorted indices, boolean mask) of the model's ``nonnegative_indices``, or (None, None)."""
    S = getattr(model, "nonnegative_indices", None)
    if S is None:
        return None, None
    try:
        S = np.asarray(S)
    except Exception:  # pragma: no cover - exotic objects
        raise ValueError(f"model.nonnegative_indices must be an array of integer indices; got {S!r}") from None
    if S.size == 0:
        return None, None
    if S.ndim != 1 or not np.issubdtype(S.dtype, np.integer):
        raise ValueError(f"model.nonnegative_indices must be a 1-D array of integer indices; got dtype {S.dtype} "
                         f"and shape {S.shape}")
    if S.min() < 0 or S.max() >= d:
        raise ValueError(f"model.nonnegative_indices must lie in 0..{d - 1} (d = size_joint_feature); got values "
                         f"from {S.min()} to {S.max()}")
    idx = np.unique(S.astype(np.int64))
    mask = np.zeros(d, np.bool_)
    mask[idx] = True
    return idx, mask
