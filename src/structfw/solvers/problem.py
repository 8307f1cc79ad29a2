"""The training problem as the solvers see it: data, lam, and validated corners.

Solvers reach the model only through `Problem` (docs/design.md, "Layers"):
it turns a labelling into a *corner* (psi_i(y), L_i(y)) -- the column of A
times lam*n and the entry of b times n of the dual (2) of Osokin et al. 2016 --
and checks what the oracle returned.
"""
from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self, cast

import numpy as np
import numpy.typing as npt

from .._linalg import SparseVector, dot
from ..executor import SerialExecutor
from ..models.base import unchecked_method
from ._kernels import project_nonneg

if TYPE_CHECKING:
    from ..executor import PendingCall
    from ..models.base import StructuredModel

#: (y, psi, L, H): an oracle's labelling, its corner psi_i(y), L_i(y), and H_i(y; w)
OracleCorner = tuple[Any, SparseVector, float, float]

#: Slack allowed when checking that an exact oracle is not worse than y_i.
_H_TOL = 1e-9


#: The smallest lam accepted.  The iterates are w = A alpha = 1/(lam n) sum_i psi_i(y_i'), of norm
#: up to max ||psi|| / lam, and the dual D = -lam/2 ||w||^2 + l subtracts terms of size
#: ||psi||^2 / lam from l <= max loss: about -log10(lam) of float64's 16 digits cancel (12 at
#: lam = 1e-12, leaving gaps meaningful to ~1e-4 with features of order 1), and below ~1e-154
#: ||w||^2 overflows and the whole model is NaN.  A problem that needs a smaller lam has
#: badly scaled features: scaling them by c is the same problem at lam / c^2.
LAM_FLOOR = 1e-12


def check_lam(lam: object, name: str = "lam") -> float:
    """lam as a float, or a ValueError naming ``name``: it must be finite and >= `LAM_FLOOR` (1e-12)."""
    if isinstance(lam, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive number; got {lam!r}")
    try:
        lam_f = float(lam)  # type: ignore[arg-type]  # any object float() takes; others are the ValueError below
    except OverflowError:  # an integer beyond float range
        raise ValueError(f"{name} must be a positive finite number; got an integer out of float range") from None
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number; got {lam!r}") from None
    if not math.isfinite(lam_f) or lam_f <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {lam!r}")
    if lam_f < LAM_FLOOR:
        raise ValueError(
            f"{name}={lam_f!r} is below the smallest lam accepted, {LAM_FLOOR:g}: the iterates "
            f"w = A alpha / ... grow like 1/{name}, the dual values lose about {-math.log10(lam_f):.0f} of float64's "
            f"16 digits{' and ||w||^2 overflows (a NaN model)' if lam_f < 1e-150 else ''}; rescale the features "
            f"instead (features scaled by c are the same problem at {name} / c^2)")
    return lam_f


def check_user_labelling(model: object, method: str, i: int, y: Any, y_true: Any) -> None:
    """Cheap checks of a labelling a user (Python) model's ``method`` returned for example i.

    A NaN, a labelling of another shape than the ground truth's, or (for models with
    ``class_labels``) a state outside 0..n_states-1 would otherwise surface as numpy's
    error deep in ``psi`` -- or, for a NaN or a negative state, as a silently wrong corner.
    Raises a ValueError naming the model, the method, the example and the problem."""
    problem = _labelling_problem(model, y, y_true)
    if problem is not None:
        raise ValueError(f"{type(model).__name__}.{method} returned an invalid labelling for example {i}: "
                         f"{problem}")


def _labelling_problem(model: object, y: Any, y_true: Any) -> str | None:
    if y is None:
        return "None"
    numeric = isinstance(y, (np.ndarray, np.generic, int, float, complex)) and not isinstance(y, (bool, np.bool_))
    if not numeric:
        if isinstance(y, (list, tuple)) and isinstance(y_true, np.ndarray):
            y = np.asarray(y)
            if y.dtype == object:
                return f"a {type(y).__name__} of mixed entries (the ground truth is an array of {y_true.dtype})"
        else:
            return None  # a structured labelling of the model's own type: the model checks it
    a = np.asarray(y)
    if a.dtype.kind not in "biufc":
        return None
    if a.dtype.kind in "fc" and a.size and not np.all(np.isfinite(a)):
        return f"it has non-finite entries ({np.count_nonzero(~np.isfinite(a))} of {a.size})"
    if isinstance(y_true, (np.ndarray, np.generic, int, float)) and not isinstance(y_true, bool):
        t = np.asarray(y_true)
        if a.shape != t.shape:
            return f"shape {a.shape}, the ground truth has shape {t.shape}"
        if t.dtype.kind in "iu" and a.dtype.kind in "fc" and a.size and not np.all(a == np.round(a)):
            return "non-integer entries (the ground truth's are integers)"
    k = getattr(model, "n_states", None)
    if getattr(model, "class_labels", False) and isinstance(k, (int, np.integer)) and a.size:
        lo, hi = a.min(), a.max()
        if lo < 0 or hi >= k:
            return f"states {lo!r}..{hi!r} outside 0..{k - 1} (n_states={k})"
    return None


def _is_user_model(model: object) -> bool:
    """A model defined outside structfw (its oracle's outputs are checked by `check_user_labelling`)."""
    return not type(model).__module__.startswith("structfw.")


def as_corner_vector(v: npt.ArrayLike | SparseVector, d: int) -> SparseVector:
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
        Runs batch oracle passes (see `structfw.executor`).
    validated : bool
        Skip re-validation when the caller already checked X and Y.
    """

    def __init__(self, model: StructuredModel, X: Sequence[Any], Y: Sequence[Any], lam: float,
                 executor: SerialExecutor | None = None, validated: bool = False) -> None:
        self.model = model
        if not validated:
            # a Y given is returned as a list (None only for Y=None)
            X, Y = cast("tuple[list[Any], list[Any]]", model.check_data(X, Y))
        if len(X) == 0:
            raise ValueError("X must contain at least one example; got an empty list")
        self.X, self.Y = X, Y
        self.lam = check_lam(lam)
        self.n = len(X)
        self.d = int(model.size_joint_feature)
        self.executor = executor or SerialExecutor()
        self.data_key = self.executor.bind(model, X, Y)  # the workers keep the data; calls send w
        # the model's methods on the data validated once: without the checks of a user's call
        self._psi = unchecked_method(model, "psi")
        self._example_loss = unchecked_method(model, "example_loss")
        self._max_oracle = unchecked_method(model, "loss_augmented_decode")
        self._calls: dict[str, Any] = {}
        self.approximate = bool(getattr(model, "approximate_oracle", False))
        self.truth_keys = [model.label_key(y) for y in Y]
        self._fingerprint: str | None = None
        self.nonneg_idx: npt.NDArray[np.int64] | None
        self.nonneg_mask: npt.NDArray[np.bool_] | None
        self.nonneg_idx, self.nonneg_mask = _nonneg_set(model, self.d)

    @property
    def constrained(self) -> bool:
        """True when the model asks for w_S >= 0 on its ``nonnegative_indices``."""
        return self.nonneg_idx is not None

    def project(self, v: npt.ArrayLike, out: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
        """Pi(v): the closest point of {w : w_S >= 0}, i.e. v with w_S clipped at 0."""
        return project_onto(self.nonneg_idx, v, out)

    @property
    def fingerprint(self) -> str:
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
    def corner(self, i: int, y: Any) -> tuple[SparseVector, float]:
        """(psi_i(y) as SparseVector, L_i(y)) for labelling y of example i."""
        psi = as_corner_vector(self._psi(self.X[i], self.Y[i], y), self.d)
        L = float(self._example_loss(self.X[i], self.Y[i], y))
        if self.model.has_fixed_score:
            # the fixed score's difference is part of the corner's constant (MP-BCFW Sec. 3)
            x, fixed = self.X[i], self._unchecked("fixed_score")
            L += float(fixed(x, y)) - float(fixed(x, self.Y[i]))
        return psi, L

    def check_oracle_output(self, i: int, y: Any) -> Any:
        name = f"the labelling returned by {type(self.model).__name__}.loss_augmented_decode for example {i}"
        return self.model.check_labelling(self.X[i], y, name=name)

    def check_oracle_value(self, i: int, H: float) -> None:
        """An exact oracle can never do worse than y_i itself (H_i(y_i; w) = 0)."""
        if H < -_H_TOL * max(1.0, abs(H)) and not self.approximate:
            raise ValueError(
                f"the labelling returned by {type(self.model).__name__}.loss_augmented_decode for "
                f"example {i} has H_i = {H:.3g} < 0 = H_i(y_i): the oracle is not a maximiser. "
                "Set model.approximate_oracle = True if it is approximate."
            )

    def oracle_corner(self, i: int, y: Any, w: npt.NDArray[np.float64], validate: bool = False) -> OracleCorner:
        """Corner of an oracle's labelling y for example i at w: (y, psi, L, H).

        With ``validate`` the labelling is checked by the model and an exact
        oracle must not do worse than y_i (H_i(y_i; w) = 0).  An approximate
        oracle that did worse is replaced by the ground-truth corner, so that
        H >= 0 always holds for what the solvers receive.
        """
        if validate:
            y = self.check_oracle_output(i, y)
        if self.user_model:
            check_user_labelling(self.model, "loss_augmented_decode", i, y, self.Y[i])
        psi, L = self.corner(i, y)
        H = L - dot(psi, w)
        if validate:
            self.check_oracle_value(i, H)
        if H < 0.0 and self.approximate:
            return self.Y[i], SparseVector.zeros(self.d), 0.0, 0.0
        return y, psi, L, H

    def compiled_oracle(self) -> tuple[str, Any] | None:
        """The model's compiled corner kernel over this training set, or None.

        ``(kind, data)`` for `structfw.oracles.compiled.corner`, which returns
        ``(psi_idx, psi_val, L)`` of the loss-augmented labelling of example i; built
        once per problem.  Approximate oracles are never compiled into the engine's
        fast pass (their outputs need the ground-truth guard)."""
        if not hasattr(self, "_compiled"):
            make: Any = getattr(self.model, "compiled_oracle", None)  # an optional method
            usable = make is not None and not self.approximate and not overrides_compiled_methods(self.model)
            self._compiled = make(self.X, self.Y) if usable else None
        return self._compiled

    def expectation(self, i: int, v: npt.ArrayLike,
                    c: float) -> tuple[npt.NDArray[np.float64] | SparseVector, float, float]:
        """The model's expectation oracle on example i: (E_phi, E_loss, log_Z) of
        p(y) ∝ exp(c L_i(y) + ⟨v, phi(x_i, y)⟩) (online exponentiated gradient needs it)."""
        return self._unchecked("expectation")(self.X[i], self.Y[i], v, c)

    def joint_feature_true(self, i: int) -> npt.NDArray[np.float64] | SparseVector:
        """phi(x_i, y_i)."""
        return self._unchecked("joint_feature")(self.X[i], self.Y[i])

    def max_oracle(self, i: int, w: npt.NDArray[np.float64]) -> Any:
        """y_i* = argmax_y H_i(y; w), the model's labelling as it returned it (for a user model,
        after `check_user_labelling`)."""
        y = self._max_oracle(self.X[i], self.Y[i], w)
        if self.user_model:
            check_user_labelling(self.model, "loss_augmented_decode", i, y, self.Y[i])
        return y

    def oracle(self, i: int, w: npt.NDArray[np.float64], validate: bool = False) -> OracleCorner:
        """Call the max oracle on example i at w; returns (y, psi, L, H).  (`oracle_corner`
        checks a user model's labelling, so the raw call, not `max_oracle`, which checks too.)"""
        return self.oracle_corner(i, self._max_oracle(self.X[i], self.Y[i], w), w, validate)

    def batch_oracle(self, w: npt.NDArray[np.float64], indices: Iterable[int] | None = None,
                     validate: bool = True) -> list[OracleCorner]:
        """Oracle over many examples through the executor; a list of (y, psi, L, H)."""
        idx = range(self.n) if indices is None else list(indices)
        labels = self.executor.loss_augmented_decode(self.data_key, w, None if indices is None else idx)
        return [self.oracle_corner(i, y, w, validate) for i, y in zip(idx, labels)]

    def batch_hinges(self, w: npt.NDArray[np.float64], validate: bool = True) -> npt.NDArray[np.float64]:
        """H_i(y_i*; w) of every example, (n,): what a gap pass needs when it keeps no corner.

        With the model's compiled oracle and no workers it is one numba call (no psi is
        merged or handed to Python); otherwise `batch_oracle` through the executor.
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

    def submit_oracle(self, w: npt.NDArray[np.float64], i: int) -> PendingCall:
        """Start example i's max oracle at w on the executor; a future of [labelling].
        The caller keeps w unchanged until the result is in."""
        return self.executor.submit(self.data_key, w, [i])

    def decode_all(self, w: npt.NDArray[np.float64]) -> list[Any]:
        """argmax_y ⟨w, phi(x_i, y)⟩ for every training example (through the executor)."""
        out = self.executor.decode(self.data_key, w)
        if self.user_model:
            for i, y in enumerate(out):
                check_user_labelling(self.model, "decode", i, y, self.Y[i])
        return out

    @property
    def user_model(self) -> bool:
        """True for a model defined outside structfw: its labellings are checked cheaply
        (`check_user_labelling`) where the engine receives them."""
        if not hasattr(self, "_user_model"):
            self._user_model = _is_user_model(self.model)
        return self._user_model

    @property
    def certifies(self) -> bool:
        """True when the model's oracle is approximate but bounds its own maximum
        (``loss_augmented_decode_with_bound``): the duality gap is then computed twice, from
        the oracle's labellings (a lower bound of the true gap) and from the bounds (an
        upper bound of it, a certificate; `hinge_bounds`)."""
        return self.approximate and callable(getattr(self.model, "loss_augmented_decode_with_bound", None))

    def hinge_bounds(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """U_i >= max_y H_i(y; w) for every example, (n,), from the model's bounds.

        The model's ``loss_augmented_decode_with_bound(x_i, y_i, w)`` returns a labelling and
        B_i >= max_y [Delta(y_i, y) + ⟨w, phi(x_i, y)⟩ + f(x_i, y)] (a relaxation's dual value:
        TRW-S, the LP; f is the model's fixed score, 0 for most models); then
        U_i = B_i - ⟨w, phi(x_i, y_i)⟩ - f(x_i, y_i).  With an approximate oracle the primal
        P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w) is out of reach, but
        lam/2 ||w||^2 + 1/n sum_i U_i >= P(w), so that bound minus any dual value D(alpha)
        is >= P(w) - P*: a certified gap (BCFW paper, App. C, where the oracle's own gap is
        only a lower bound of the true one).  Each U_i is also at least the hinge of the
        labelling found (0 for y_i), which a bound of a relaxation always is."""
        U = np.empty(self.n)
        model: Any = self.model  # loss_augmented_decode_with_bound is an optional method
        with_bound, score = self._unchecked("loss_augmented_decode_with_bound"), self._unchecked("score")
        for i in range(self.n):
            x, y_true = self.X[i], self.Y[i]
            y, bound = with_bound(x, y_true, w)
            bound = float(bound)
            if not np.isfinite(bound):
                raise ValueError(f"{type(model).__name__}.loss_augmented_decode_with_bound returned the "
                                 f"bound {bound!r} for example {i}: a finite upper bound was expected")
            truth = float(score(x, y_true, w))
            if model.has_fixed_score:  # the bound covers the fixed term too (MP-BCFW Sec. 3)
                truth += float(self._unchecked("fixed_score")(x, y_true))
            U[i] = max(bound - truth, 0.0)
        return U

    def _unchecked(self, name: str) -> Any:
        """The model's method ``name`` on this problem's validated data (`unchecked_method`), looked up once."""
        method = self._calls.get(name)
        if method is None:
            method = self._calls[name] = unchecked_method(self.model, name)
        return method

    def primal(self, w: npt.NDArray[np.float64], hinge_sum: float) -> float:
        """P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w)   (eq. (1))."""
        return 0.5 * self.lam * float(np.dot(w, w)) + hinge_sum / self.n

    def with_lam(self, lam: float) -> Self:
        """The same data and model at another lam (corners do not depend on lam)."""
        p = copy.copy(self)  # shallow: data, model and executor are shared; subclasses survive
        p.lam = check_lam(lam)
        return p


#: what a compiled corner kernel computes in place of the model's Python methods
COMPILED_METHODS = ("loss_augmented_decode", "psi", "loss", "example_loss", "joint_feature", "fixed_score")


def overrides_compiled_methods(model: object) -> bool:
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


def _feature_summary(x: Any) -> tuple[tuple[int, ...], float] | str:
    """(shape, sum) of an input: cheap, and it changes when the input does."""
    try:
        if hasattr(x, "shape") and hasattr(x, "sum"):
            return (tuple(x.shape), float(x.sum()))
        arr = np.asarray(x, dtype=float)
        return (arr.shape, float(arr.sum()))
    except (TypeError, ValueError):
        return repr(x)[:200]


def project_onto(S: npt.NDArray[np.int64] | None, v: npt.ArrayLike,
                 out: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
    """Pi(v) for the constraint set w_S >= 0 (S None: no constraint), into ``out`` when given."""
    out = np.array(v, dtype=np.float64, copy=True) if out is None else out
    if S is not None:
        project_nonneg(np.asarray(v, dtype=np.float64), out, S)
    elif out is not v:
        out[:] = v
    return out


def _nonneg_set(model: object, d: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | tuple[None, None]:
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
