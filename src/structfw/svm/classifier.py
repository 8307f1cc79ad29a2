"""FrankWolfeSVC: a scikit-learn classifier trained on the L2-SVM simplex dual."""
from __future__ import annotations

import os
import time
import warnings
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._interrupt import deferred_sigint
from .._params import NONE, InstanceOf, Interval, Options, validate_params
from ._kernels import KERNELS, kernel_matrix, resolve_gamma
from ._solver import METHODS, SimplexFWSolver

if TYPE_CHECKING:
    from pathlib import Path

#: Largest magnitude allowed for an entry of the modified kernel Kt: the line
#: searches form sums of a few (at most ~8) such entries, which must stay finite.
KT_MAX = np.finfo(np.float64).max / 64


class FrankWolfeSVC(ClassifierMixin, BaseEstimator):
    r"""Kernel L2-SVM trained by Frank-Wolfe methods on the unit simplex.

    Implements Frandi, Nanculef & Suykens (2015), "A PARTAN-accelerated Frank-Wolfe
    algorithm for large-scale SVM classification".  The binary L2-SVM with bias,

    .. math::
        \min_{w, b, \rho, \xi}\; \|w\|^2 + b^2 - 2\rho + C \sum_i \xi_i^2
        \quad \text{s.t.}\quad y_i (w^T\phi(x_i) + b) \ge \rho - \xi_i,

    has the dual (problem (5) of the paper, core-vector-machine form)

    .. math::
        \min_{\alpha \in \Sigma} f(\alpha) = \tfrac12 \alpha^T \tilde K \alpha, \qquad
        \tilde K_{ij} = y_i y_j \,(k(x_i, x_j) + 1) + \delta_{ij} / C,

    over the unit simplex `\Sigma = \{\alpha \ge 0, \sum_i \alpha_i = 1\}`.
    The modified kernel absorbs the bias (the ``+1``) and the squared slacks (the
    ``delta_ij / C``).  The primal solution is recovered as
    `w = \sum_i \alpha_i y_i \phi(x_i)`, `b = \sum_i \alpha_i y_i`,
    `\xi_i = \alpha_i / C`, `\rho = \alpha^T \tilde K \alpha = 2 f(\alpha)`;
    at any feasible alpha the primal objective minus the dual value
    `-\alpha^T \tilde K \alpha` is twice the FW duality gap (3).
    The stored model is rescaled to unit margin: ``dual_coef_ = alpha_i y_i / rho``,
    ``intercept_ = b / rho``, so that
    ``decision_function(x) = sum_i dual_coef_i k(x_i, x) + intercept_``.

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "precomputed"}, default "rbf"
        The kernel k(x, x'); "precomputed" takes X as the Gram matrix (checked positive
        semi-definite at fit).
    C : float > 0, default 1.0
        Weight of the squared slacks.
    gamma : "scale", "auto" or float > 0, default "scale"
        As in scikit-learn: "scale" is ``1 / (n_features * X.var())``, "auto" is
        ``1 / n_features``.
    degree : int >= 0, default 3
        The polynomial kernel's degree, (gamma ⟨x, x'⟩ + coef0)^degree.
    coef0 : float, default 0.0
        The polynomial kernel's constant term.
    method : {"fw", "mfw", "swap", "partan"}, default "partan"
        ``fw``: Algorithm 1 with exact line search; ``mfw``: modified FW with away steps;
        ``swap``: pairwise step ``e_i - e_v`` chosen greedily against the FW step;
        ``partan``: Algorithm 2 with the closed-form steps (11)-(15).
    tol : float > 0, default 1e-4
        Stop when the duality gap ``2 f(alpha) - min_i (Kt alpha)_i`` is <= tol
        (absolute, as in the paper).
    sample_size : None or int >= 1, default None
        If set, the FW vertex is searched over a random subset S of this many vertices
        (randomised search (10); the paper uses 194), drawn afresh at each iteration,
        and the stopping test uses the sampled gap
        ``Delta_S = 2 f(alpha) - min_{i in S} (Kt alpha)_i``.  Safeguard: before stopping,
        the sample is drawn ``n_resample`` more times (paper: twice) and the run stops
        only if no sample shows a gap above tol.  A sample of at least n_samples points is
        the deterministic search.
    sample_check : {"resample", "full"}, default "resample"
        What confirms a sampled stop.  ``"resample"`` (the paper's rule) guarantees only
        that every one of the ``1 + n_resample`` samples showed a gap <= tol: since
        ``Delta_S <= gap`` (3)/(9) the exact gap may be larger, and the stop is premature
        with a probability that falls with the share of points violating the tolerance:
        if q of them have ``(Kt alpha)_i < 2 f - tol`` the run stops there with probability
        at most ``(1 - q) ** ((1 + n_resample) * sample_size)`` (for the paper's 194 and 2
        resamples: < 1e-5 once q >= 2 %); the exact gap at the stop is in ``gap_``.
        ``"full"`` stops only when the exact gap is <= tol too, so ``gap_ <= tol`` whenever
        ``converged_`` (with ``gradient="sample"`` the exact gap costs a pass over all
        points, rate-limited so that checks cost at most as much as the sampled searches,
        see `structfw.svm._solver._fw_vertex_s`).
    n_resample : int >= 0, default 2
        Extra samples drawn before a sampled run stops.
    gradient : {"full", "sample"}, default "full"
        How the randomised search evaluates the gradient (ignored without
        ``sample_size``).  ``"sample"`` is the paper's randomised iteration: the gradient
        on the sample only, each entry from the kernel row of the sampled point against
        the active set (support), ``|S| |I|`` kernel evaluations per iteration and nothing
        of size n_samples; the gradient on the support is kept up to date from one kernel
        row per step.  ``"full"`` keeps the whole gradient up to date from one cached kernel
        column per step, ``O(n_samples)`` per iteration plus one column of n_samples kernel
        evaluations per new support vector.  Both draw the same samples from the same
        ``random_state`` and take the same steps, up to rounding: only the cost differs
        (with float32 kernel columns, the default on large data, the full gradient's cached
        entries are rounded to float32, and a near-tie between two sampled points can then
        send the two runs different ways: of 12 paired fashion-MNIST runs at 12,000 points,
        5 kept the same iteration count, the others differed by 1-17 %).
        Default "full" because it is the cheaper one whenever ``sample_size * n_SV``
        exceeds n_samples, which held on every data set measured here (fashion-MNIST: the
        sample-only gradient costs 21-64x more kernel evaluations and 11-36x more CPU time
        at 12,000 points, 5-9x and 3-5x at 60,000, docs/results/kernel-svm.md); "sample"
        pays off for very large n_samples with small supports and short runs (fewer than
        about ``2 n_samples / sample_size`` iterations: the paper's KDD99-like regime).
    max_iter : int >= 1, default 200000
        Iterations at most.
    cache_size : float > 0, default 200
        Memory (MB) for the LRU cache of kernel columns (at least two columns).
    trace_every : int >= 1, default 10
        Record gap/objective/time every this many iterations in ``trace_``.
    random_state : None, int or RandomState
        Seeds the vertex sampler (only used with ``sample_size``).
    kernel_dtype : {"auto", "float32", "float64"}, default "auto"
        Precision of the training matrix used to compute kernel columns and of the
        cached columns (kernels "linear", "rbf", "poly"; a precomputed Gram matrix is
        used in float64).  The gradient, objective and duality gap are accumulated in
        float64 from these columns.  "auto" is float32 when ``n_samples * n_features
        >= 1e6`` (where the column computation is memory-bound and float32 halves its
        cost) and float64 otherwise.  float32 kernel entries carry an absolute error of
        about 1e-6, far below the default ``tol``.
    block : "auto" or int >= 1, default "auto"
        On a cache miss, the requested kernel column is computed together with the
        columns of the ``block - 1`` uncached indices of smallest gradient in one
        matrix-matrix product (does not change the iterates).  "auto" is 64 when
        ``n_samples * n_features >= 1e6`` and 16 otherwise.

    Multiclass
    ----------
    One-vs-rest: one binary machine per class (that class +1, the rest -1) on all the
    data; ``predict`` takes the argmax of the unit-margin decision values.
    ``decision_function`` returns shape (n_samples,) for two classes (positive means
    ``classes_[1]``) and (n_samples, n_classes) otherwise.

    Attributes
    ----------
    classes_, n_features_in_, support_ (indices, union over machines),
    support_vectors_ (empty for precomputed), n_support_ (per class),
    dual_coef_ (n_machines, n_SV), intercept_ (n_machines,), alpha_ (n_machines,
    n_samples; the simplex solution), n_iter_ (n_machines,), objective_ and gap_
    (n_machines,: final f and exact duality gap), converged_ (every machine's gap
    test fired), stopped_, fit_time_,
    trace_ (binary: dict of arrays iteration, gap, objective, time_s; multiclass: a
    list of such dicts, one per machine; gap is the exact gap, even when sampling,
    except with ``gradient="sample"``, whose intermediate records hold the sampled gap
    Delta_S that the stopping test saw, a lower bound on the exact gap; its first and
    last records are exact).
    Fitting with ``gradient="sample"`` computes the exact final gap ``gap_`` from the
    whole gradient once per machine (n_samples x n_SV kernel evaluations).
    fit_stats_ (list, one dict per machine: the solver's ``cache_stats``, i.e. kernel
    evaluations in all and for exact gaps, full checks, column-cache hits / misses /
    prefetched columns; diagnostics of this fit, not stored in model files).

    stopped_ : str
        Why the fit ended: "converged" (every machine reached tol), "max_iter" (some
        machine hit ``max_iter``; a ConvergenceWarning is issued) or "interrupted"
        (Ctrl-C; ``converged_`` is then False and a ConvergenceWarning says so).
        A Ctrl-C is taken between chunks of compiled iterations (at most
        ``min(trace_every, 1000)`` iterations); every machine runs at least its first
        chunk, so an interrupted fit is a complete, consistent model made of each
        machine's current (= best: every method decreases f) iterate.

    Robustness
    ----------
    Parameters are declared once in ``_parameter_constraints`` and checked at fit.
    Degenerate inputs are refused before the solve with a ValueError naming the
    argument: a non-square, non-symmetric, negative-diagonal or indefinite (`_check_psd`)
    precomputed kernel,
    features or kernel parameters (gamma, coef0, degree, C) for which the entries of
    the modified kernel overflow float64, a ``gamma="scale"`` that resolves to a
    non-finite value.  If the duality gap or the objective still becomes NaN/inf
    during the solve (e.g. an indefinite precomputed kernel), or the final objective
    is not positive (no unit-margin rescaling exists), fit raises a ValueError and
    the estimator keeps its previous fitted state: fitted attributes are computed
    into locals and committed together at the end of fit.

    Saving
    ------
    `save` / `load` use the model-file format of `structfw.io`
    (no pickle; every field validated on load).
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "kernel": [Options(tuple(KERNELS))],
        "C": [Interval(0.0, low_open=True)],
        "gamma": [Options(("scale", "auto")), Interval(0.0, low_open=True)],
        "degree": [Interval(0, integer=True)],
        "coef0": [Interval()],
        "method": [Options(tuple(METHODS))],
        "tol": [Interval(0.0, low_open=True)],
        "sample_size": [NONE, Interval(1, integer=True)],
        "sample_check": [Options(("resample", "full"))],
        "n_resample": [Interval(0, integer=True)],
        "gradient": [Options(("full", "sample"))],
        "max_iter": [Interval(1, integer=True)],
        "cache_size": [Interval(0.0, low_open=True)],
        "trace_every": [Interval(1, integer=True)],
        # what sklearn.utils.check_random_state takes
        "random_state": [NONE, Interval(0, 2 ** 32 - 1, integer=True),
                         InstanceOf((np.random.RandomState,), "a numpy RandomState")],
        "kernel_dtype": [Options(("auto", "float32", "float64"))],
        "block": [Options(("auto",)), Interval(1, integer=True)],
    }

    def __init__(self, kernel: str = "rbf", C: float = 1.0, gamma: float | str = "scale", degree: int = 3,
                 coef0: float = 0.0, method: str = "partan", tol: float = 1e-4, sample_size: int | None = None,
                 sample_check: str = "resample", n_resample: int = 2, gradient: str = "full",
                 max_iter: int = 200000,
                 cache_size: float = 200.0, trace_every: int = 10,
                 random_state: int | np.random.RandomState | None = None, kernel_dtype: str = "auto",
                 block: int | str = "auto") -> None:
        self.kernel = kernel
        self.C = C
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.method = method
        self.tol = tol
        self.sample_size = sample_size
        self.sample_check = sample_check
        self.n_resample = n_resample
        self.gradient = gradient
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.trace_every = trace_every
        self.random_state = random_state
        self.kernel_dtype = kernel_dtype
        self.block = block

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        """Every parameter against ``_parameter_constraints`` (`structfw._params`, the estimators'
        one idiom), with an error naming the parameter, the value and what is accepted."""
        validate_params(self, self._parameter_constraints)

    @staticmethod
    def _dense(X):
        return X.toarray() if sp.issparse(X) else X

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: npt.ArrayLike) -> Self:
        """Fit one (binary) or n_classes (one-vs-rest) simplex-dual L2-SVMs.

        Runs under `structfw._interrupt.deferred_sigint`: a Ctrl-C ends the
        solve at a consistent iterate (``stopped_ = "interrupted"``).  Every fitted
        attribute is computed first and committed at the end, all at once, so a fit
        that raises or is interrupted never leaves a mix of old and new attributes.
        """
        self._check_params()
        with deferred_sigint():
            fitted = self._fit(X, y)
            _commit(self, fitted)
        self._warn_if_not_converged()
        return self

    def _validate_training_data(self, X, y):
        """validate_data without leaving n_features_in_ / feature_names_in_ of a fit
        that may still fail on the estimator: they are returned for the commit."""
        names = ("n_features_in_", "feature_names_in_")
        previous = {k: self.__dict__[k] for k in names if k in self.__dict__}
        try:
            X, y = validate_data(self, X, y, accept_sparse=["csr", "csc", "coo"],
                                 dtype=np.float64)
        finally:
            meta = {k: self.__dict__.pop(k) for k in names if k in self.__dict__}
            self.__dict__.update(previous)
        if "feature_names_in_" not in meta:
            meta["feature_names_in_"] = None  # committed as "absent" (deleted below)
        return X, y, meta

    def _fit(self, X, y):
        X, y, meta = self._validate_training_data(X, y)
        check_classification_targets(y)
        X = np.require(self._dense(X), np.float64, ["C", "W"])
        classes, y_enc = np.unique(y, return_inverse=True)
        n_classes = len(classes)
        if n_classes < 2:
            raise ValueError("The number of classes has to be at least 2; got 1 class "
                             f"({classes[0]!r}) in y")
        kind = KERNELS[self.kernel]
        gamma = _check_kernel_inputs(X, self.kernel, self.gamma, float(self.coef0),
                                     int(self.degree), float(self.C))
        rng = check_random_state(self.random_state)
        targets = [1] if n_classes == 2 else list(range(n_classes))
        large = X.size >= 1_000_000 and kind in (0, 1, 2)
        kdt = self.kernel_dtype
        if kdt == "auto":
            kdt = "float32" if large else "float64"
        block = (64 if large else 16) if self.block == "auto" else int(self.block)
        t0 = time.perf_counter()
        runs = []
        for c in targets:
            ypm = np.where(y_enc == c, 1.0, -1.0)
            s = SimplexFWSolver(
                X, ypm, kernel_kind=kind, gamma=gamma, coef0=float(self.coef0),
                degree=int(self.degree), C=self.C, method=self.method, tol=self.tol,
                max_iter=self.max_iter, sample_size=self.sample_size,
                sample_check=self.sample_check, n_resample=self.n_resample,
                gradient=self.gradient, cache_size=self.cache_size, trace_every=self.trace_every,
                seed=rng.randint(np.iinfo(np.int32).max), kernel_dtype=kdt,
                block=block).run()
            runs.append(_machine_result(s, ypm, c))
        fit_time = time.perf_counter() - t0
        return _assemble(runs, X, y_enc, classes, self.kernel, gamma, fit_time, meta)

    def _warn_if_not_converged(self):
        if self.stopped_ == "interrupted":
            warnings.warn(f"FrankWolfeSVC ({self.method}) was interrupted (Ctrl-C) after "
                          f"{self.n_iter_.tolist()} iterations; the model is the current "
                          "iterate, converged_ is False", ConvergenceWarning)
        elif self.stopped_ == "max_iter":
            warnings.warn(f"FrankWolfeSVC ({self.method}) reached max_iter={self.max_iter} "
                          "before the duality gap fell below tol", ConvergenceWarning)

    # ------------------------------------------------------------------ predict
    def decision_function(self, X: Any) -> npt.NDArray[np.float64]:
        """Unit-margin decision values: (n_samples,) for binary, (n_samples, n_classes) else."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"], dtype=np.float64,
                          reset=False)
        X = self._dense(X)
        if self.kernel == "precomputed":
            Kx = X[:, self.support_]
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                Kx = kernel_matrix(X, self.support_vectors_, KERNELS[self.kernel],
                                   self._gamma, float(self.coef0), float(self.degree))
        with np.errstate(over="ignore", invalid="ignore"):
            dec = Kx @ self.dual_coef_.T + self.intercept_
        if not np.isfinite(dec).all():
            raise ValueError("X: the kernel values between X and the support vectors "
                             "overflow float64 (feature values too large for this kernel)")
        return dec.ravel() if len(self.classes_) == 2 else dec

    def predict(self, X: Any) -> npt.NDArray[Any]:
        dec = self.decision_function(X)
        if len(self.classes_) == 2:
            return self.classes_[(dec > 0).astype(int)]
        return self.classes_[np.argmax(dec, axis=1)]

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted classifier to a model file (see `structfw.io`).

        ``.npz`` is appended to ``path`` when missing; returns the path written."""
        from ._io import save_svc
        check_is_fitted(self)
        return save_svc(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """Read a classifier written by `save`, validating every field.

        Raises ValueError for any file that is not a valid FrankWolfeSVC model file."""
        from ._io import load_svc
        return load_svc(cls, path)


# ---------------------------------------------------------------------- helpers
def _commit(est, fitted):
    """Replace the fitted state of ``est`` by ``fitted`` in one assignment (one
    bytecode: a Ctrl-C or an exception cannot land between two attributes).
    ``feature_names_in_ = None`` means absent."""
    state = {k: v for k, v in est.__dict__.items() if k != "feature_names_in_"}
    state.update({k: v for k, v in fitted.items()
                  if not (k == "feature_names_in_" and v is None)})
    est.__dict__ = state


def _check_kernel_inputs(X, kernel, gamma, coef0, degree, C):
    """Refuse, before the solve, inputs whose modified kernel Kt cannot be formed in
    float64; returns the numeric gamma.

    Kt_ij = y_i y_j (k(x_i, x_j) + 1) + delta_ij / C (problem (5)).  Its entries
    are bounded by ``B + 1 + 1/C`` with B = max |k|: the largest squared norm
    (linear), ``(gamma max ||x||^2 + |coef0|)^degree`` (poly, Cauchy-Schwarz), 1
    (rbf) or max |K_ij| (precomputed).  The line searches (11)-(15) add a few such
    entries, so the bound must stay below `KT_MAX`.
    """
    inv_c = 1.0 / C
    if not np.isfinite(inv_c) or inv_c > KT_MAX:
        raise ValueError(f"C={C!r} is too small: 1/C overflows float64")
    if kernel == "precomputed":
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError("X must be a square kernel matrix (n_samples, n_samples) when "
                             f"kernel='precomputed', got shape {X.shape}")
        bound = float(np.abs(X).max()) if X.size else 0.0
        if np.any(np.diag(X) < 0):
            raise ValueError("X (kernel='precomputed') has a negative diagonal entry "
                             f"(min {np.diag(X).min():.3g}): not a positive semi-definite "
                             "kernel matrix")
        tol = 1e-8 * max(1.0, bound)
        if np.abs(X - X.T).max() > tol:
            raise ValueError("X (kernel='precomputed') is not symmetric "
                             f"(max |K - K^T| = {np.abs(X - X.T).max():.3g})")
        if np.isfinite(bound):
            _check_psd(X)
        g = 1.0
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            sqn = np.einsum("ij,ij->i", X, X)
        max_sq = float(sqn.max()) if sqn.size else 0.0
        if not np.isfinite(max_sq):
            raise ValueError("X has feature values so large that squared norms overflow "
                             "float64 (max |x| = "
                             f"{np.abs(X).max():.3g}); scale the features")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            g = resolve_gamma(gamma, X, kernel)
        if not (np.isfinite(g) and g > 0):
            raise ValueError(f"gamma={gamma!r} resolves to {g!r} on this X (X.var() = "
                             f"{float(X.var()):.3g}); pass a positive finite gamma")
        if kernel == "linear":
            bound = max_sq
        elif kernel == "rbf":
            bound = 1.0
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                bound = float(np.power(np.float64(g * max_sq + abs(coef0)), degree))
    total = bound + 1.0 + inv_c
    if not np.isfinite(total) or total > KT_MAX:
        what = {"linear": "X (feature values too large)",
                "poly": "X, gamma, coef0 or degree (poly kernel values overflow)",
                "precomputed": "X (kernel values too large)"}.get(kernel, "X")
        raise ValueError(f"{what}: the kernel values (up to {bound:.3g}) overflow "
                         "float64 in the solver's line searches; scale the features or "
                         "lower gamma/degree")
    return float(g)


#: A precomputed kernel is refused when its smallest eigenvalue is below -PSD_RTOL times its
#: largest: well below the rounding of a Gram matrix computed in float64 (~m * 1e-16) or even
#: float32 (~1e-7), far above what an indefinite similarity (a sigmoid "kernel", a distance)
#: shows.
PSD_RTOL = 1e-6
#: up to this size all eigenvalues are computed (LAPACK, milliseconds); above, Lanczos
PSD_DENSE_MAX = 600


def _check_psd(K):
    """Refuse an indefinite precomputed kernel (a ValueError naming it).

    An indefinite K with a positive diagonal can still give a convex simplex QP (the
    modified kernel adds 1/C to every eigenvalue), which then "converges" to a model that
    is no kernel machine at all.  Rule: lambda_min(K) >= -`PSD_RTOL` * lambda_max(K).
    m <= `PSD_DENSE_MAX`: exact eigenvalues.  Larger m: Lanczos (ARPACK) for the extreme
    eigenvalues with a bounded number of iterations, each a product with K (m^2 flops).
    Its estimate of lambda_min is a Rayleigh quotient v^T K v / v^T v, never below the true
    lambda_min, so a PSD kernel is never refused; an indefinite one whose negative
    direction Lanczos does not find within the bound passes, as before this check."""
    m = K.shape[0]
    if m < 2:
        return
    if m <= PSD_DENSE_MAX:
        ev = np.linalg.eigvalsh(K)
        lmin, lmax = float(ev[0]), float(ev[-1])
    else:
        from scipy.sparse.linalg import ArpackNoConvergence, eigsh

        v0 = np.ones(m) / np.sqrt(m) + np.linspace(-1e-3, 1e-3, m)  # deterministic start
        lmax = float(eigsh(K, k=1, which="LA", v0=v0, tol=1e-3, return_eigenvectors=False)[0])
        try:
            lmin = float(eigsh(K, k=1, which="SA", v0=v0, tol=1e-3, maxiter=50, ncv=min(m, 40),
                               return_eigenvectors=False)[0])
        except ArpackNoConvergence as exc:
            found = np.asarray(exc.eigenvalues, float)
            lmin = float(found.min()) if found.size else 0.0
    if lmin < -PSD_RTOL * max(lmax, 0.0) or (lmax <= 0.0 and lmin < 0.0):
        raise ValueError(
            f"X (kernel='precomputed') is not positive semi-definite: its smallest eigenvalue is {lmin:.3g} "
            f"against a largest of {lmax:.3g} (allowed: >= -{PSD_RTOL:g} x largest); an SVM needs a kernel "
            "matrix (a Gram matrix) -- clip its negative eigenvalues or add their magnitude to the diagonal")


def _machine_result(s, ypm, target):
    """Per-machine results of a finished solver, checked for a usable model."""
    if s.stopped == "nonfinite":
        raise ValueError(
            f"FrankWolfeSVC: the duality gap became non-finite at iteration {s.n_iter} "
            f"of the machine for class index {target} (the kernel matrix is probably not "
            "positive semi-definite, or its values overflow); no model was fitted")
    rho = 2.0 * s.f
    if not (np.isfinite(rho) and rho > 0):
        raise ValueError(
            f"FrankWolfeSVC: the dual objective reached f = {s.f!r} <= 0 for class index "
            f"{target}: the modified kernel is not positive definite (a precomputed "
            "kernel that is not PSD?); no unit-margin model exists")
    alpha = s.alpha.copy()
    coef = alpha * ypm / rho
    inter = float(alpha @ ypm) / rho
    if not (np.isfinite(coef).all() and np.isfinite(inter)):
        raise ValueError("FrankWolfeSVC: non-finite dual coefficients; no model was fitted")
    gap = s.gap   # before the stats: with the sample-only gradient it costs kernel evaluations
    return dict(alpha=alpha, coef=coef, intercept=inter, n_iter=s.n_iter, f=s.f,
                gap=gap, stopped=s.stopped, trace=s.trace, stats=s.cache_stats)


def _assemble(runs, X, y_enc, classes, kernel, gamma, fit_time, meta):
    """The fitted attributes, as one dict to commit at once."""
    n_classes = len(classes)
    stopped = [r["stopped"] for r in runs]
    if "interrupted" in stopped:
        status = "interrupted"
    elif all(st == "converged" for st in stopped):
        status = "converged"
    else:
        status = "max_iter"
    alpha = np.vstack([r["alpha"] for r in runs])
    support = np.flatnonzero((alpha > 0).any(axis=0)).astype(np.int32)
    fitted = dict(
        classes_=classes, _gamma=gamma, fit_time_=fit_time, alpha_=alpha, support_=support,
        dual_coef_=np.vstack([r["coef"] for r in runs])[:, support],
        intercept_=np.asarray([r["intercept"] for r in runs]),
        support_vectors_=(np.empty((0, 0)) if kernel == "precomputed"
                          else X[support].copy()),
        n_support_=np.array([np.sum(y_enc[support] == k) for k in range(n_classes)],
                            dtype=np.int32),
        n_iter_=np.asarray([r["n_iter"] for r in runs], dtype=np.int64),
        objective_=np.asarray([r["f"] for r in runs]),
        gap_=np.asarray([r["gap"] for r in runs]),
        converged_=status == "converged", stopped_=status,
        trace_=runs[0]["trace"] if n_classes == 2 else [r["trace"] for r in runs],
        fit_stats_=[r["stats"] for r in runs], **meta)
    return fitted


def load(path: str | os.PathLike[str]) -> FrankWolfeSVC:
    """Load a `FrankWolfeSVC` written by its ``save`` (`FrankWolfeSVC.load`)."""
    return FrankWolfeSVC.load(path)
