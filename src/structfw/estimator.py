"""StructuredSVM: the scikit-learn style estimator (DESIGN.md section 3)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from sklearn.base import BaseEstimator

from ._interrupt import deferred_sigint
from .executor import get_executor
from .models.base import MODEL_REGISTRY, StructuredModel
from .solvers import SOLVER_NAMES, Monitor, Problem, Solver, StopRule, make_solver
from .solvers.problem import check_lam
from .trace import Trace

_FORMAT = "structfw-ssvm-1"


class StructuredSVM(BaseEstimator):
    """Structural SVM  min_w lam/2 ||w||^2 + 1/n sum_i max_y [Delta(y_i, y) - <w, psi_i(y)>].

    Parameters
    ----------
    model : StructuredModel
        Joint features, loss and oracles (e.g. ``structfw.models.ChainModel``).
    solver : str or Solver
        "bcfw", "fw", "ssg" (each with its defaults) or a configured solver object
        such as ``structfw.solvers.BCFW(sampling="gap", step="pairwise")``.
    lam : float
        Regularisation lambda > 0.
    max_passes : float
        Passes over the data (n block iterations, or one batch step, each).
    tol : float or None
        Stop when the duality gap P(w) - D(alpha) at a checkpoint is <= tol
        (absolute).  Averaged solvers report the gap of the averaged iterate.
        SSG has no dual, so it runs ``max_passes``.
    check_every : int
        Passes between checkpoints; each is one full oracle pass to measure the
        gap, counted apart from the optimisation's oracle calls.
    time_budget : float or None
        Seconds of optimisation time.
    random_state : int, Generator or None
    warm_start : bool
        Continue from the previous fit's dual state (also after ``set_params(lam=...)``:
        the corners do not depend on lam).
    verbose : int
        0 silent, 1 progress bar (pass, gap, time), 2 also a line per checkpoint.
    n_jobs : int or None
        Processes for batch oracle passes (gap passes, FW steps, prediction).

    Attributes
    ----------
    coef_ : ndarray (d,)
        w.
    trace_ : Trace
        Per checkpoint: passes, oracle_calls, time_s, primal, dual, gap (and test_loss).
    gap_, primal_, dual_ : float
        At the returned iterate.
    stopped_ : str
        Why the fit ended: "tol", "max_passes", "time_budget" or "interrupted".
    state_ : object
        Solver state for warm starts.
    n_iter_ : float
        Passes done.
    """

    def __init__(self, model, solver="bcfw", lam=0.01, max_passes=50, tol=1e-3, check_every=1,
                 time_budget=None, random_state=None, warm_start=False, verbose=0, n_jobs=None):
        self.model = model
        self.solver = solver
        self.lam = lam
        self.max_passes = max_passes
        self.tol = tol
        self.check_every = check_every
        self.time_budget = time_budget
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.n_jobs = n_jobs

    # ------------------------------------------------------------ scikit-learn
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # inputs are lists of structured objects (sequences, graphs), not a 2-D array
        tags.input_tags.two_d_array = False
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    # ---------------------------------------------------------------- fit
    def _check_model(self):
        if not isinstance(self.model, StructuredModel):
            raise ValueError(f"model must be a structfw StructuredModel; got {type(self.model).__name__}")

    def fit(self, X, Y, X_test=None, Y_test=None):
        """Train on (X, Y); with (X_test, Y_test) the trace also records ``test_loss``.

        With ``warm_start=True`` a previous fit's solver state is continued exactly
        (same data and lam: 5 passes and then 5 more give the iterates of one
        10-pass fit; its random generator is continued and ``random_state`` is
        not re-read).  A state from other data is not reused (a warning says so).
        Ctrl-C ends the fit "interrupted" with the best iterate evaluated so far;
        all fitted attributes are then set together, as after a normal end.
        """
        with deferred_sigint():
            self._check_model()
            lam = check_lam(self.lam)
            solver = make_solver(self.solver)
            stop = StopRule(max_passes=self.max_passes, tol=self.tol, check_every=self.check_every,
                            time_budget=self.time_budget)
            X, Y = self.model.check_data(X, Y)
            if (X_test is None) != (Y_test is None):
                raise ValueError("X_test and Y_test must be given together")
            if X_test is not None:
                X_test, Y_test = self.model.check_data(X_test, Y_test)
            executor = get_executor(self.n_jobs)
            problem = Problem(self.model, X, Y, lam, executor=executor, validated=True)
            meta = dict(solver=getattr(solver, "label", solver.name),
                        solver_params=_jsonable(solver.get_params()), lam=lam, n=problem.n, d=problem.d,
                        model=type(self.model).__name__,
                        random_state=self.random_state if isinstance(self.random_state, (int, type(None)))
                        else None)
            monitor = Monitor(problem, stop, meta, X_test, Y_test, verbose=self.verbose)
            state = getattr(self, "state_", None) if self.warm_start else None
            try:
                res = solver.solve(problem, stop, state=state, rng=self.random_state, monitor=monitor)
            finally:
                executor.close()
            n_features = getattr(self.model, "n_features", None)
            fitted = dict(coef_=res.w, trace_=res.trace, state_=res.state, stopped_=res.stopped,
                          gap_=res.gap, primal_=res.primal, dual_=res.dual,
                          n_iter_=float(res.trace.last("engine_passes", res.trace.last("passes"))))
            if isinstance(n_features, int):
                fitted["n_features_in_"] = n_features
            # set together: an estimator is never half old, half new
            self.__dict__.update(fitted)
        return self

    # ------------------------------------------------------------ predict
    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise ValueError("this StructuredSVM is not fitted yet; call fit(X, Y) first")

    def predict(self, X):
        """argmax_y <w, phi(x, y)> for every input."""
        self._check_fitted()
        X, _ = self.model.check_data(X)
        executor = get_executor(self.n_jobs)
        try:
            return executor.decode(self.model, X, self.coef_)
        finally:
            executor.close()

    def score(self, X, Y):
        """1 - mean task loss (for chains: 1 - mean normalised Hamming loss)."""
        self._check_fitted()
        X, Y = self.model.check_data(X, Y)
        return 1.0 - self.model.mean_loss(Y, self.predict(X))

    # --------------------------------------------------------- save/load
    def save(self, path):
        """Write the fitted model to ``path`` (.npz: arrays plus a JSON header, no pickle)."""
        self._check_fitted()
        header = dict(format=_FORMAT, model=type(self.model).__name__, model_config=self.model.get_config(),
                      params={k: _jsonable(v) for k, v in self.get_params(deep=False).items() if k != "model"},
                      stopped=self.stopped_, gap=_f(self.gap_), primal=_f(self.primal_), dual=_f(self.dual_),
                      n_iter=self.n_iter_)
        header["params"]["solver"] = _solver_spec(self.solver)
        np.savez_compressed(path, coef=self.coef_, header=np.array(json.dumps(header)),
                            trace=np.array(self.trace_.to_json()))

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`."""
        path = Path(path)
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(str(z["header"]))
            if header.get("format") != _FORMAT:
                raise ValueError(f"{path} is not a structfw model file (format {header.get('format')!r})")
            coef = z["coef"].copy()
            trace = Trace.from_json(str(z["trace"]))
        mcls = MODEL_REGISTRY.get(header["model"])
        if mcls is None:
            raise ValueError(f"model class {header['model']!r} is not registered; import the module defining it")
        model = mcls(**header["model_config"])
        params = dict(header["params"])
        params["solver"] = _solver_from_spec(params["solver"])
        est = cls(model, **params)
        est.coef_, est.trace_, est.stopped_ = coef, trace, header["stopped"]
        est.gap_, est.primal_, est.dual_ = (_nan(header[k]) for k in ("gap", "primal", "dual"))
        est.n_iter_ = header["n_iter"]
        est.n_features_in_ = coef.shape[0]
        return est


def load(path):
    """Load a StructuredSVM saved with ``StructuredSVM.save``."""
    return StructuredSVM.load(path)


def _solver_spec(solver):
    if isinstance(solver, Solver):
        return {"name": solver.name, "params": _jsonable(solver.get_params())}
    return {"name": str(solver), "params": {}}


def _solver_from_spec(spec):
    cls = SOLVER_NAMES[spec["name"]]
    return cls(**spec["params"]) if spec["params"] else spec["name"]


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    return repr(v)


def _f(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _nan(x):
    return math.nan if x is None else float(x)
