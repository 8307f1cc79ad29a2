"""FrankWolfeSVC: a scikit-learn classifier trained on the L2-SVM simplex dual."""
from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._kernels import KERNELS, kernel_matrix, resolve_gamma
from ._solver import METHODS, SimplexFWSolver


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

    over the unit simplex :math:`\Sigma = \{\alpha \ge 0, \sum_i \alpha_i = 1\}`.
    The modified kernel absorbs the bias (the ``+1``) and the squared slacks (the
    ``delta_ij / C``).  The primal solution is recovered as
    :math:`w = \sum_i \alpha_i y_i \phi(x_i)`, :math:`b = \sum_i \alpha_i y_i`,
    :math:`\xi_i = \alpha_i / C`, :math:`\rho = \alpha^T \tilde K \alpha = 2 f(\alpha)`;
    at any feasible alpha the primal objective minus the dual value
    :math:`-\alpha^T \tilde K \alpha` is twice the FW duality gap (3).
    The stored model is rescaled to unit margin: ``dual_coef_ = alpha_i y_i / rho``,
    ``intercept_ = b / rho``, so that
    ``decision_function(x) = sum_i dual_coef_i k(x_i, x) + intercept_``.

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly", "precomputed"}, default "rbf"
    C : float > 0, default 1.0
        Weight of the squared slacks.
    gamma : "scale", "auto" or float > 0, default "scale"
        As in scikit-learn: "scale" is ``1 / (n_features * X.var())``, "auto" is
        ``1 / n_features``.
    degree : int >= 0, default 3 (poly kernel).   coef0 : float, default 0.0 (poly kernel).
    method : {"fw", "mfw", "swap", "partan"}, default "partan"
        ``fw``: Algorithm 1 with exact line search; ``mfw``: modified FW with away steps;
        ``swap``: pairwise step ``e_i - e_v`` chosen greedily against the FW step;
        ``partan``: Algorithm 2 with the closed-form steps (11)-(15).
    tol : float > 0, default 1e-4
        Stop when the duality gap ``2 f(alpha) - min_i (Kt alpha)_i`` is <= tol
        (absolute, as in the paper).
    sample_size : None or int >= 1, default None
        If set, the FW vertex is searched over a random subset of this many vertices
        (randomised search (10); the paper uses 194) and the stopping test uses the
        sampled gap.  Safeguard: before stopping, the sample is drawn ``n_resample``
        more times (paper: twice) and the run stops only if no sample shows a gap
        above tol; with ``sample_check="full"`` the exact gap must confirm it too.
    sample_check : {"resample", "full"}, default "resample"
    n_resample : int >= 0, default 2
    max_iter : int >= 1, default 200000
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
    (n_machines,: final f and exact duality gap), converged_, fit_time_,
    trace_ (binary: dict of arrays iteration, gap, objective, time_s; multiclass: a
    list of such dicts, one per machine; gap is the exact gap even when sampling).
    """

    def __init__(self, kernel="rbf", C=1.0, gamma="scale", degree=3, coef0=0.0,
                 method="partan", tol=1e-4, sample_size=None, sample_check="resample",
                 n_resample=2, max_iter=200000, cache_size=200.0, trace_every=10,
                 random_state=None, kernel_dtype="auto", block="auto"):
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
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.trace_every = trace_every
        self.random_state = random_state
        self.kernel_dtype = kernel_dtype
        self.block = block

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        def real(v):
            return isinstance(v, numbers.Real) and not isinstance(v, bool)

        def integer(v):
            return isinstance(v, numbers.Integral) and not isinstance(v, bool)

        if not isinstance(self.kernel, str) or self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        if not real(self.C) or not self.C > 0 or not np.isfinite(self.C):
            raise ValueError(f"C must be a positive finite number, got {self.C!r}")
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise ValueError(f"method must be one of {sorted(METHODS)}, got {self.method!r}")
        if not real(self.tol) or not self.tol > 0:
            raise ValueError(f"tol must be > 0, got {self.tol!r}")
        if self.sample_size is not None and (not integer(self.sample_size)
                                             or self.sample_size < 1):
            raise ValueError(f"sample_size must be None or an int >= 1, got {self.sample_size!r}")
        if self.sample_check not in ("resample", "full"):
            raise ValueError(f"sample_check must be 'resample' or 'full', got {self.sample_check!r}")
        if not integer(self.n_resample) or self.n_resample < 0:
            raise ValueError(f"n_resample must be an int >= 0, got {self.n_resample!r}")
        if not integer(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an int >= 1, got {self.max_iter!r}")
        if not real(self.cache_size) or not self.cache_size > 0:
            raise ValueError(f"cache_size must be > 0 (MB), got {self.cache_size!r}")
        if not integer(self.trace_every) or self.trace_every < 1:
            raise ValueError(f"trace_every must be an int >= 1, got {self.trace_every!r}")
        if isinstance(self.gamma, str):
            if self.gamma not in ("scale", "auto"):
                raise ValueError(f"gamma must be 'scale', 'auto' or a float > 0, got {self.gamma!r}")
        elif not real(self.gamma) or not self.gamma > 0:
            raise ValueError(f"gamma must be 'scale', 'auto' or a float > 0, got {self.gamma!r}")
        if not real(self.degree) or self.degree < 0:
            raise ValueError(f"degree must be >= 0, got {self.degree!r}")
        if not real(self.coef0):
            raise ValueError(f"coef0 must be a number, got {self.coef0!r}")
        if not isinstance(self.kernel_dtype, str) or self.kernel_dtype not in (
                "auto", "float32", "float64"):
            raise ValueError("kernel_dtype must be 'auto', 'float32' or 'float64', "
                             f"got {self.kernel_dtype!r}")
        if not (isinstance(self.block, str) and self.block == "auto") and (
                not integer(self.block) or self.block < 1):
            raise ValueError(f"block must be 'auto' or an int >= 1, got {self.block!r}")

    @staticmethod
    def _dense(X):
        return X.toarray() if sp.issparse(X) else X

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit one (binary) or n_classes (one-vs-rest) simplex-dual L2-SVMs."""
        self._check_params()
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc", "coo"],
                             dtype=np.float64)
        check_classification_targets(y)
        X = np.require(self._dense(X), np.float64, ["C", "W"])
        if self.kernel == "precomputed" and X.shape[0] != X.shape[1]:
            raise ValueError("X must be a square kernel matrix (n_samples, n_samples) when "
                             f"kernel='precomputed', got shape {X.shape}")
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError("The number of classes has to be at least 2; got 1 class "
                             f"({self.classes_[0]!r}) in y")
        kind = KERNELS[self.kernel]
        self._gamma = resolve_gamma(self.gamma, X, self.kernel)
        rng = check_random_state(self.random_state)
        targets = [1] if n_classes == 2 else list(range(n_classes))
        large = X.size >= 1_000_000 and kind in (0, 1, 2)
        kdt = self.kernel_dtype
        if kdt == "auto":
            kdt = "float32" if large else "float64"
        block = (64 if large else 16) if self.block == "auto" else int(self.block)
        alphas, coefs, inters, iters, objs, gaps, convs, traces = [], [], [], [], [], [], [], []
        t0 = time.perf_counter()
        for c in targets:
            ypm = np.where(y_enc == c, 1.0, -1.0)
            s = SimplexFWSolver(
                X, ypm, kernel_kind=kind, gamma=self._gamma, coef0=self.coef0,
                degree=self.degree, C=self.C, method=self.method, tol=self.tol,
                max_iter=self.max_iter, sample_size=self.sample_size,
                sample_check=self.sample_check, n_resample=self.n_resample,
                cache_size=self.cache_size, trace_every=self.trace_every,
                seed=rng.randint(np.iinfo(np.int32).max), kernel_dtype=kdt,
                block=block).run()
            rho = 2.0 * s.f
            alphas.append(s.alpha.copy())
            coefs.append(s.alpha * ypm / rho)
            inters.append(float(s.alpha @ ypm) / rho)
            iters.append(s.n_iter)
            objs.append(s.f)
            gaps.append(s.gap)
            convs.append(s.converged)
            traces.append(s.trace)
        self.fit_time_ = time.perf_counter() - t0
        if not all(convs):
            warnings.warn(f"FrankWolfeSVC ({self.method}) reached max_iter={self.max_iter} "
                          "before the duality gap fell below tol", ConvergenceWarning)
        self.alpha_ = np.vstack(alphas)
        self.support_ = np.flatnonzero((self.alpha_ > 0).any(axis=0)).astype(np.int32)
        self.dual_coef_ = np.vstack(coefs)[:, self.support_]
        self.intercept_ = np.asarray(inters)
        self.support_vectors_ = (np.empty((0, 0)) if self.kernel == "precomputed"
                                 else X[self.support_].copy())
        self.n_support_ = np.array([np.sum(y_enc[self.support_] == k)
                                    for k in range(n_classes)], dtype=np.int32)
        self.n_iter_ = np.asarray(iters, dtype=np.int64)
        self.objective_ = np.asarray(objs)
        self.gap_ = np.asarray(gaps)
        self.converged_ = bool(all(convs))
        self.trace_ = traces[0] if n_classes == 2 else traces
        return self

    # ------------------------------------------------------------------ predict
    def decision_function(self, X):
        """Unit-margin decision values: (n_samples,) for binary, (n_samples, n_classes) else."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"], dtype=np.float64,
                          reset=False)
        X = self._dense(X)
        if self.kernel == "precomputed":
            Kx = X[:, self.support_]
        else:
            Kx = kernel_matrix(X, self.support_vectors_, KERNELS[self.kernel], self._gamma,
                               float(self.coef0), float(self.degree))
        dec = Kx @ self.dual_coef_.T + self.intercept_
        return dec.ravel() if len(self.classes_) == 2 else dec

    def predict(self, X):
        dec = self.decision_function(X)
        if len(self.classes_) == 2:
            return self.classes_[(dec > 0).astype(int)]
        return self.classes_[np.argmax(dec, axis=1)]
