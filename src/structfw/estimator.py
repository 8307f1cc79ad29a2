"""StructuredSVM: the scikit-learn style estimator (docs/design.md)."""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self, cast

import numpy as np
import numpy.typing as npt

from sklearn.base import BaseEstimator

from ._compile import install_compile_notice
from ._interrupt import deferred_sigint
from ._params import BOOLEAN, NONE, RANDOM_STATE, Check, InstanceOf, Interval, Options, validate_params
from .executor import get_executor
from .models._validation import MAX_SIZE_JOINT_FEATURE
from .models.base import MODEL_REGISTRY, StructuredModel
from .solvers import SOLVER_NAMES, Monitor, Problem, Solver, StopRule, make_solver
from . import _labels, _lam_select, _prediction
from . import io as sfio
from .solvers.problem import check_lam
from .trace import Trace

if TYPE_CHECKING:
    from sklearn.utils import Tags

    from .models.chain import ChainModel
    from .models.multiclass import MulticlassModel
    from .solvers.kernel_bcfw import KernelExpansion


class GapSplit(NamedTuple):
    """The certified gap of a fit split in two (`StructuredSVM.gap_split`).

    With an approximate oracle the certified gap is P_up(w) - D(alpha), P_up(w) = lam/2 ||w||^2
    + 1/n sum_i U_i with U_i the relaxation's bound of example i's hinge.  Between the two lies
    P(w) computed from the oracle's labellings, lam/2 ||w||^2 + 1/n sum_i H_i, so

        certified gap = (P_up - P)  [looseness: the relaxation]  +  (P - D)  [progress: the solver].

    Attributes
    ----------
    hinge : ndarray (n,)
        H_i, the hinge of the labelling the oracle found for example i at ``coef_``.
    bound : ndarray (n,)
        U_i >= max_y H_i(y), from the model's bound (TRW-S's dual, the LP's, QPBO's roof dual).
    primal : float
        P(w) from the oracle's labellings (the trace's ``primal``): a lower bound of the true P(w).
    primal_bound : float
        P_up(w) (the trace's ``primal_bound``).
    dual : float
        D(alpha) of the fit (``dual_``).
    """

    hinge: npt.NDArray[np.float64]
    bound: npt.NDArray[np.float64]
    primal: float
    primal_bound: float
    dual: float

    @property
    def example_looseness(self) -> npt.NDArray[np.float64]:
        """U_i - H_i per example (>= 0): where the relaxation is loose; 0 where the back-end proved
        its labelling optimal."""
        return self.bound - self.hinge

    @property
    def looseness(self) -> float:
        """P_up - P = mean(U_i - H_i): the part of the certified gap owed to the relaxation; more
        passes do not shrink it, a tighter back-end does."""
        return self.primal_bound - self.primal

    @property
    def progress(self) -> float:
        """P - D, the oracle's duality gap (a lower bound of the true gap): the part owed to the
        solver; more passes (or a larger lam) shrink it."""
        return self.primal - self.dual

    @property
    def certified_gap(self) -> float:
        """P_up - D = looseness + progress (``certified_gap_`` when computed on the training data)."""
        return self.primal_bound - self.dual


class StructuredSVM(BaseEstimator):
    """Structural SVM  min_w lam/2 ||w||^2 + 1/n sum_i max_y [Delta(y_i, y) - ⟨w, psi_i(y)⟩].

    Parameters
    ----------
    model : StructuredModel
        Joint features, loss and oracles (e.g. ``structfw.models.ChainModel``).
    solver : str or Solver
        "bcfw", "fw", "ssg" (each with its defaults) or a configured solver object
        such as ``structfw.solvers.BCFW(sampling="gap", step="pairwise")``.
    lam : float or "auto"
        Regularisation lambda, at least 1e-12 (`structfw.solvers.problem.LAM_FLOOR`:
        the iterates grow like 1/lam and the dual values lose about -log10(lam) of
        float64's 16 digits; scale the features by c instead, the same problem at lam/c^2).
        "auto": chosen at fit (`structfw._lam_select`): fits warm-started along ``lam_grid``
        from the largest value down on a training part of the data, each scored with `score`
        on the held-out ``validation_fraction`` (split by ``random_state``), then one fit on all
        the data at the best value (ties: the largest); ``lam_`` and ``lam_curve_`` record the
        choice, and the fit's time includes the selection's.  A warm-started grid rather than
        the eps-path (`structfw.path.regularization_path`): the path certifies every lam but
        places many breakpoints at small lam, while a score needs only the values scored
        (docs/guide/estimator.md, "Choosing lam").
    max_passes : float
        Passes over the data (n block iterations, or one batch step, each).
    tol : float or None
        Stop when the duality gap P(w) - D(alpha) at a checkpoint is <= tol
        (absolute).  Averaged solvers report the gap of the averaged iterate.
        SSG has no dual, so it runs ``max_passes``.
    check_every : int or "auto"
        Passes between checkpoints; each is one full oracle pass to measure the
        gap (plus predicting ``X_test``, if given), counted apart from the
        optimisation's oracle calls.  "auto" (default) checks every
        ``ceil(9 * (1 + n_test / n))`` passes, so monitoring costs at most 10 % of
        the work (`structfw.solvers.StopRule`); 1 traces every pass, at
        twice the work.
    time_budget : float or None
        Seconds of optimisation time.
    random_state : int, numpy.random.Generator or None
        Seed of the solver's sampling (which block each step updates, the order of a
        permuted pass).  An int makes a fit reproducible: the same data, seed and
        options give the same iterates on this machine -- except with options that read the
        clock: MP-BCFW's ``approx_rule="time"`` (the default "work" is reproducible) and
        ``time_budget``.  None draws fresh entropy.  A warm start continues the saved
        generator instead of re-reading this.
    warm_start : bool
        Continue from the previous fit's dual state (also after ``set_params(lam=...)``:
        the corners do not depend on lam).
    verbose : int
        0 silent, 1 progress bar (pass, gap, time), 2 also a line per checkpoint.
    n_jobs : int or None
        Workers for the oracle calls that run at once: batch passes (gap passes, FW
        steps, cutting-plane rounds, MP-BCFW exact passes, prediction) and the
        minibatches of ``BCFW(minibatch=tau)``.  None: serial (with Ray: one actor per
        cluster CPU); -1: one per CPU.
    executor : {"process", "thread", "ray"} or "ray:ADDRESS"
        Workers for ``n_jobs > 1``: local processes (the data are sent once, when they
        start), threads of this process (for oracles that release the GIL: the numba
        kernels, the graph-cut min cut), or actors of a Ray cluster
        (``structfw[distributed]``; `structfw.executor_ray`): "ray" joins the cluster
        named by RAY_ADDRESS or starts a local one, "ray:ADDRESS" joins ADDRESS.
    oracle_timeout : float or None
        Seconds one example's oracle may take on a worker, timed from that example's own
        start; an example whose oracle takes longer raises `structfw.executor.OracleTimeout`
        naming it (on Ray: a call of k examples is given k times the limit), and the workers
        running it are ended (processes are terminated, Ray actors killed; a thread cannot
        be killed and keeps running the hung oracle).  A serial in-process oracle cannot be
        pre-empted (a numba kernel holds the thread), so with a timeout the oracles always
        run on workers (one for ``n_jobs=None``).  None (default): no limit; a second
        Ctrl-C while the first is pending is then the way out of a hung oracle.
    class_weight : None, "balanced" or dict
        Weights of the loss by true class (docs/guide/weights.md), for models with class labels.
        A dict maps labels, as given in Y (the entries of ``classes_``), to weights >= 0; labels
        it omits weigh 1.  "balanced" follows scikit-learn: class k weighs
        n / (n_classes * count_k), counting the nodes of all training labellings (the examples
        for `MulticlassModel`).  At fit they become per-node weights, multiplied with fit's
        ``sample_weight``: for per-node labellings (chains, grids, graphs) node l of example i
        counts c_l = cw[y_il] / sum_u cw[y_iu] in its loss (the normalised Hamming loss stays in
        [0, 1]; on a single-node labelling class weights therefore cancel), for multiclass the
        example's loss is ``cw[y_i] * [y != y_i]``.  None (default): unweighted.  The loss-augmented
        oracle, the duality gaps and the regularisation path all see the weighted loss.
    shards : int or None
        K >= 1: train on K shards of the training set (example i in shard i mod K), each stepping
        its own blocks at compiled speed on its own worker and combined in rounds
        (`structfw.solvers.sharded.ShardedBCFW`, docs/guide/scaling-out.md): for cheap oracles on
        several cores.  ``solver`` must be "bcfw" or a `BCFW` (whose options the shards use), or a
        `ShardedBCFW` with the same K; ``executor`` is "thread", "process" or "ray" (an actor a
        shard) and ``n_jobs`` defaults to K; ``fit(source)`` with a shard source lets each worker
        load its own shard (K = len(source)).  ``gap_``, ``primal_``, ``dual_`` and the trace mean what they mean for a
        serial fit.  None (default): serial.
    lam_grid : sequence of float or None
        The values ``lam="auto"`` tries (each >= 1e-12; fitted in decreasing order, repeats
        dropped).  None (default): 10 geometric values from 1 down to max(1e-4, 0.1 / n)
        (`structfw._lam_select.default_lam_grid` says why).  Unused for a numeric ``lam``.
    validation_fraction : float in (0, 1)
        The part of the training examples ``lam="auto"`` holds out to score each lam (ceil of
        the fraction times n, at least one example on each side).  Unused for a numeric ``lam``.

    Attributes
    ----------
    coef_ : ndarray (d,) or None
        w (None after a kernelized fit with a non-linear kernel: w is then implicit).
    kernel_expansion_ : KernelExpansion or None
        The predictor of a kernelized fit (``solver="kernel-bcfw"``): support positions, their
        dual coefficients and the transition weights; None for linear solvers.
    classes_ : ndarray or None
        The labels, in the order of the model's states: state k predicts ``classes_[k]``.
        Integer labels in 0..n_states-1 are the states themselves (``classes_ =
        arange(n_states)``); labels of any other kind (strings, other integers, floats) are
        encoded as their index in ``numpy.unique`` of all labels of ``Y``, which may hold at
        most ``n_states`` of them.  None for models whose labels are not class labels
        (matching: target positions).
    trace_ : Trace
        Per checkpoint: passes, oracle_calls, time_s, primal, dual, gap (and test_loss).
    gap_, primal_, dual_ : float
        At the returned iterate.
    certified_gap_ : float or None
        With an approximate oracle that bounds its maximum (`GraphModel` on loopy graphs,
        `GridModel`, `PottsModel`): an upper bound of P(coef_) - P*, from the relaxation's
        bound (docs/design.md, "Certified gaps with approximate oracles"); ``gap_`` is then
        only a lower bound of the true gap.  None for exact oracles, whose ``gap_`` is
        itself the certificate.
    stopped_ : str
        Why the fit ended: "tol", "max_passes", "time_budget" or "interrupted".
    state_ : object
        Solver state for warm starts.
    n_iter_ : float
        Engine passes of the run (``trace_["engine_passes"][-1]``): a fit continued with
        ``warm_start=True`` counts on from the fit it continues, so k passes and then m more
        give k + m, as one fit of k + m passes does.
    class_weight_ : ndarray or None
        The class weights of the last fit, one per state (``class_weight`` resolved: all ones
        for None with models that have class labels; None for models without them).
    temperature_ : float
        Set by `calibrate_temperature` only (absent before): the T of `predict_marginals` and
        `predict_proba_sequence`, for the fit it was calibrated on (a later fit warns and uses
        T = 1 until it is calibrated again).  `save` writes it and `load` restores it.
    calibration_ : dict
        Set by `calibrate_temperature`: the negative log-likelihood and expected calibration
        error before and after.
    lam_ : float
        The lam of the fit: ``lam`` itself, or the value ``lam="auto"`` chose.
    lam_curve_ : dict of ndarray or None
        After ``lam="auto"``: per grid value, in the order fitted (lam decreasing), ``"lam"``,
        ``"score"`` (the validation `score`), ``"passes"`` and ``"gap"`` of its fit on the
        training part and ``"time_s"`` (wall time of that fit and its scoring); None for a
        numeric ``lam``.  ``trace_.meta["lam_selection"]`` holds the sizes of the two parts and
        the selection's total time.
    """

    # the fitted attributes (set by fit and load, all together; declared for the type checker only)
    coef_: npt.NDArray[np.float64] | None
    kernel_expansion_: KernelExpansion | None
    classes_: np.ndarray | None
    trace_: Trace
    gap_: float
    primal_: float
    dual_: float
    certified_gap_: float | None
    stopped_: str
    state_: Any  # the solver's own state class, or None after loading a file saved without it
    n_iter_: float
    n_features_in_: int
    lam_: float
    lam_curve_: dict[str, npt.NDArray[np.float64]] | None

    #: every constructor parameter and what it may be, checked once at the start of `fit`
    _parameter_constraints: dict[str, list[Any]] = {
        "model": [InstanceOf((StructuredModel,), "a structfw StructuredModel")],
        "solver": [Options(tuple(sorted(SOLVER_NAMES))), InstanceOf((Solver,), "a solver object")],
        "lam": [Interval(0.0, low_open=True), Options(("auto",))],
        "max_passes": [Interval(0.0, low_open=True, allow_inf=True)],
        "tol": [NONE, Interval(0.0)],
        "check_every": [Options(("auto",)), Interval(1, integer=True)],
        "time_budget": [NONE, Interval(0.0, low_open=True, allow_inf=True)],
        "random_state": RANDOM_STATE,
        "warm_start": [BOOLEAN],
        "verbose": [BOOLEAN, Interval(0, integer=True)],
        "n_jobs": [NONE, Options((-1,)), Interval(1, integer=True)],
        "executor": [Options(("process", "thread", "ray")),
                     Check(lambda v: isinstance(v, str) and v.startswith("ray:") and len(v) > 4, "'ray:ADDRESS'")],
        "oracle_timeout": [NONE, Interval(0.0, low_open=True)],
        "class_weight": [NONE, Options(("balanced",)), InstanceOf((Mapping,), "a dict {label: weight}")],
        "shards": [NONE, Interval(1, integer=True)],
        "lam_grid": [NONE, Check(_lam_select.is_lam_grid, "a non-empty 1-D list or array of numbers >= 1e-12")],
        "validation_fraction": [Interval(0.0, 1.0, low_open=True, high_open=True)],
    }

    def __init__(self, model: StructuredModel, solver: str | Solver = "bcfw", lam: float | str = 0.01,
                 max_passes: float = 50,
                 tol: float | None = 1e-3, check_every: int | str = "auto", time_budget: float | None = None,
                 random_state: int | np.random.Generator | None = None, warm_start: bool = False, verbose: int = 0,
                 n_jobs: int | None = None, executor: str = "process", oracle_timeout: float | None = None,
                 class_weight: str | Mapping[Any, float] | None = None, shards: int | None = None,
                 lam_grid: Sequence[float] | npt.ArrayLike | None = None, validation_fraction: float = 0.2) -> None:
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
        self.executor = executor
        self.oracle_timeout = oracle_timeout
        self.class_weight = class_weight
        self.shards = shards
        self.lam_grid = lam_grid
        self.validation_fraction = validation_fraction

    # ------------------------------------------------------------ scikit-learn
    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # inputs are lists of structured objects (sequences, graphs), not a 2-D array
        tags.input_tags.two_d_array = False
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags

    def set_params(self, **params: Any) -> Self:
        """As scikit-learn's; ``solver__option`` on a solver given by name first makes the solver
        object of that name (``"bcfw"`` -> ``BCFW()``), so its options can be set and searched."""
        if (isinstance(self.solver, str) and "solver" not in params
                and any(k.startswith("solver__") for k in params)):
            self.solver = make_solver(self.solver)
        return super().set_params(**params)

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    # ---------------------------------------------------------------- fit
    def _check_model(self) -> None:
        if not isinstance(self.model, StructuredModel):
            raise ValueError(f"model must be a structfw StructuredModel; got {type(self.model).__name__}")

    def fit(self, X: Sequence[Any], Y: Sequence[Any] | None = None, X_test: Sequence[Any] | None = None,
            Y_test: Sequence[Any] | None = None, sample_weight: Sequence[Any] | None = None) -> Self:
        """Train on (X, Y); with (X_test, Y_test) the trace also records ``test_loss``.

        ``fit(source)``, with a shard source in place of X and no Y (`structfw.datasets.ShardFiles`, or
        any object with ``len()`` and ``load(k) -> (X_k, Y_k)``), trains on ``len(source)`` shards
        with ``executor="process"`` or ``"ray"``: each worker loads its own shard and this process
        never holds the training set (docs/guide/scaling-out.md, "Shard files").

        X is a list of examples and Y a list of their labellings.  For the models with
        class labels, Y may hold labels of any kind (strings, other integers): they are
        encoded as the model's states, see ``classes_``; Y_test is encoded the same way.

        With ``warm_start=True`` a previous fit's solver state is continued exactly
        (same data and lam: 5 passes and then 5 more give the iterates of one
        10-pass fit; its random generator is continued and ``random_state`` is
        not re-read).  A state from other data is not reused (a warning says so).
        Ctrl-C ends the fit "interrupted" with the best iterate evaluated so far;
        all fitted attributes are then set together, as after a normal end.  Only a fit
        of the main thread receives Ctrl-C, and each fit its own
        (`structfw._interrupt`); a second Ctrl-C before the first is taken (a hung
        oracle) raises KeyboardInterrupt at once, ending the workers and keeping the
        previous fitted attributes.

        A resumed fit's trace continues the previous one's counts: its ``passes``,
        ``engine_passes``, ``oracle_calls``, ``monitor_calls``, ``cache_hits`` and ``time_s``
        start from the previous fit's last entry (``trace_.meta["resumed_from"]`` holds those
        offsets), so the rows of the two fits line up as one run, and so does ``n_iter_`` (the
        run's passes: this fit's are ``n_iter_ - trace_.meta["resumed_from"]["engine_passes"]``).
        An estimator loaded from a file saved without its solver state
        (``save(path)`` rather than ``save(path, state=True)``) has nothing to continue:
        ``warm_start=True`` then warns and the fit starts afresh from w = 0.

        Parameters
        ----------
        X : list
            The training inputs.
        Y : list
            Their labellings (every node labelled: a label of -1, "unlabelled", is refused;
            partial labels need `structfw.LatentStructuredSVM`, or any label filled in with
            a per-node weight of 0).
        X_test, Y_test : list, optional
            Test data, given together: the trace then records ``test_loss``.
        sample_weight : sequence of n items, optional
            Weights of the loss (docs/guide/weights.md).  Item i is a float >= 0, which
            multiplies example i's loss Delta_i, or, for models whose labellings are one label
            per node (`ChainModel`, `GraphModel`, `GridModel`, `PottsModel`, `GraphCutModel`), an
            array of one weight c_l >= 0 per node: Delta_i(y_i, y) = sum_l c_l [y_l != y_il] /
            sum_l c_l, so nodes of weight 0 do not count (their weights must not all be 0).
            Multiplied with ``class_weight``.  The weights scale the loss (margin rescaling):
            an example of weight 0 still keeps its margin constraint, with margin 0.  None
            (default): every weight 1, and the fit is exactly the unweighted one.
        """
        install_compile_notice()
        validate_params(self, self._parameter_constraints)
        from .datasets.shard_source import is_shard_source

        if Y is None and is_shard_source(X):
            return self._fit_shard_source(X, X_test, Y_test, sample_weight)
        with deferred_sigint():
            self._check_model()
            lam = None if isinstance(self.lam, str) else check_lam(self.lam)  # None: "auto", chosen below
            solver = make_solver(self.solver)
            if self.shards is not None:
                from .solvers.sharded import sharded_solver

                solver = sharded_solver(solver, self.shards, self.executor, self.n_jobs, self.oracle_timeout)
            stop = StopRule(max_passes=self.max_passes, tol=self.tol, check_every=self.check_every,
                            time_budget=self.time_budget)
            Y = _labels._as_list(Y, "Y")
            _labels.check_no_unlabelled(self.model, Y)
            classes, Y = _labels.fit_classes(self.model, Y)
            X, Y = cast("tuple[list[Any], list[Any]]", self.model.check_data(X, Y))  # a Y given is returned as a list
            class_weight = _labels.resolve_class_weight(self.model, classes, Y, self.class_weight)
            selection = None
            if lam is None:  # on the checked data in states, before the weights enter X
                selection = _lam_select.select_lam(self, X, Y, sample_weight, class_weight)
                lam = selection.lam
            X = self._weighted_inputs(X, Y, sample_weight, class_weight)
            X_test, Y_test = self._checked_test(X_test, Y_test, classes)
            # with shards the shards' own workers run every oracle (`sharded_solver`)
            executor = get_executor(None if self.shards is not None else self.n_jobs,
                                    "thread" if self.shards is not None else self.executor,  # serial: no Ray actor
                                    None if self.shards is not None else self.oracle_timeout)
            problem = Problem(self.model, X, Y, lam, executor=executor, validated=True)
            meta = dict(solver=getattr(solver, "label", solver.name),
                        solver_params=_jsonable(solver.get_params()), lam=lam, n=problem.n, d=problem.d,
                        model=type(self.model).__name__,
                        random_state=self.random_state if isinstance(self.random_state, (int, type(None)))
                        else None)
            if selection is not None:
                meta["lam_selection"] = selection.meta()
            monitor = Monitor(problem, stop, meta, X_test, Y_test, verbose=self.verbose)
            state = getattr(self, "state_", None) if self.warm_start else None
            if self.warm_start and state is None and hasattr(self, "coef_"):
                _warn_no_state_to_continue()
            if state is not None and hasattr(self, "classes_") and not _labels.check_warm_start(self.classes_,
                                                                                               classes):
                state = None
            try:
                res = solver.solve(problem, stop, state=state, rng=self.random_state, monitor=monitor)
            finally:
                executor.close()
            n_features = getattr(self.model, "n_features", None)
            # a kernelized solver returns its predictor (w exists only implicitly); coef_ is then the
            # explicit w when there is one (linear kernel), else None
            expansion = None if isinstance(res.w, np.ndarray) else res.w
            coef = res.w if expansion is None else expansion.linear_coef()
            if state is not None and res.state is state:  # the solver continued it (it did not start afresh)
                _continue_trace(res.trace, getattr(self, "trace_", None))
            # after _continue_trace: a continued run's passes count from its start, as its trace does
            n_iter = float(res.trace.last("engine_passes", res.trace.last("passes")))
            fitted = dict(coef_=coef, kernel_expansion_=expansion, trace_=res.trace, state_=res.state,
                          classes_=classes, stopped_=res.stopped,
                          class_weight_=class_weight if class_weight is not None or classes is None
                          else np.ones(int(getattr(self.model, "n_states"))),
                          gap_=res.gap, primal_=res.primal, dual_=res.dual, n_iter_=n_iter,
                          certified_gap_=res.certified_gap, lam_=lam,
                          lam_curve_=None if selection is None else selection.curve)
            if isinstance(n_features, int):
                fitted["n_features_in_"] = n_features
            # set together: an estimator is never half old, half new
            self.__dict__.update(fitted)
        return self

    def _checked_test(self, X_test: Sequence[Any] | None, Y_test: Sequence[Any] | None,
                      classes: npt.NDArray[Any] | None) -> tuple[Any, Any]:
        """(X_test, Y_test) checked by the model, Y_test encoded in its states; both None or both given."""
        if (X_test is None) != (Y_test is None):
            raise ValueError("X_test and Y_test must be given together")
        if X_test is None:
            return None, None
        return self.model.check_data(X_test, _labels.encode(self.model, classes, cast("Sequence[Any]", Y_test),
                                                            "Y_test"))

    def _fit_shard_source(self, source: Any, X_test: Sequence[Any] | None, Y_test: Sequence[Any] | None,
                          sample_weight: Sequence[Any] | None) -> Self:
        """`fit` on a shard source: K = len(source) shards, each loaded by its own worker
        (`structfw.solvers.sharded.SourceProblem`); labels are the model's states already."""
        from .solvers.sharded import SourceProblem, sharded_solver

        with deferred_sigint():
            self._check_model()
            K = _source_shards(self, source)
            if isinstance(self.lam, str):
                raise ValueError("lam='auto' with a shard source: choosing lam holds out examples, which this "
                                 "process never sees; give a number")
            if sample_weight is not None or self.class_weight is not None:
                raise ValueError("sample_weight and class_weight with a shard source: weight the examples in the "
                                 "source's load(k) (model.weight_example), or fit(X, Y)")
            if self.executor == "thread":
                raise ValueError("a shard source with executor='thread': threads share this process's memory, "
                                 "which would then hold every shard; use executor='process' or 'ray'")
            solver = sharded_solver(make_solver(self.solver), K, self.executor, self.n_jobs, self.oracle_timeout)
            stop = StopRule(max_passes=self.max_passes, tol=self.tol, check_every=self.check_every,
                            time_budget=self.time_budget)
            classes = np.arange(int(getattr(self.model, "n_states")), dtype=np.int64) \
                if getattr(self.model, "class_labels", False) else None
            X_test, Y_test = self._checked_test(X_test, Y_test, classes)
            # a SourceProblem holds what the monitor and the sharded solver read of a Problem (n, d, lam,
            # the fingerprint, the primal from a hinge sum), without the examples
            source_problem = SourceProblem(self.model, source, check_lam(self.lam))
            problem = cast(Problem, source_problem)
            meta = dict(solver=solver.label, solver_params=_jsonable(solver.get_params()), lam=problem.lam,
                        d=problem.d, model=type(self.model).__name__, shard_source=repr(source),
                        random_state=self.random_state if isinstance(self.random_state, (int, type(None)))
                        else None)
            monitor = Monitor(problem, stop, meta, X_test, Y_test, verbose=self.verbose)
            state = getattr(self, "state_", None) if self.warm_start else None
            res = solver.solve(problem, stop, state=state, rng=self.random_state, monitor=monitor)
            res.trace.meta["n"] = source_problem.n  # known once the workers loaded their shards
            if state is not None and res.state is state:
                _continue_trace(res.trace, getattr(self, "trace_", None))
            fitted = dict(coef_=res.w, kernel_expansion_=None, trace_=res.trace, state_=res.state,
                          classes_=classes, stopped_=res.stopped,
                          class_weight_=None if classes is None else np.ones(classes.size),
                          gap_=res.gap, primal_=res.primal, dual_=res.dual,
                          n_iter_=float(res.trace.last("engine_passes", res.trace.last("passes"))),
                          certified_gap_=res.certified_gap, lam_=problem.lam, lam_curve_=None)
            n_features = getattr(self.model, "n_features", None)
            if isinstance(n_features, int):
                fitted["n_features_in_"] = n_features
            self.__dict__.update(fitted)  # set together, as `fit` does
        return self

    def _weighted_inputs(self, X: list[Any], Y: list[Any], sample_weight: Sequence[Any] | None,
                         class_weight: npt.NDArray[np.float64] | None) -> list[Any]:
        """X with the loss weights of ``sample_weight`` and ``class_weight`` (`StructuredModel.weight_example`);
        X itself when there are none, so an unweighted fit is exactly as before."""
        steps = _labels.example_weights(self.model, Y, sample_weight, class_weight)
        if steps is None or all(len(st) == 1 and _is_one(st[0]) for st in steps):
            return X  # no weights, or per-example weights that are all 1: the unweighted problem itself
        if make_solver(self.solver).name == "kernel-bcfw":
            raise ValueError("sample_weight and class_weight are not supported by solver 'kernel-bcfw' (its joint "
                             "kernel is that of the unweighted loss); use a linear solver such as 'bcfw'")
        out = []
        for i, (x, y, st) in enumerate(zip(X, Y, steps)):
            for weight in st:
                x = self.model.weight_example(x, y, weight, name=f"sample_weight[{i}]")
            out.append(x)
        return out

    # ------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise ValueError("this StructuredSVM is not fitted yet; call fit(X, Y) first")

    def predict(self, X: Sequence[Any]) -> Sequence[Any]:
        """argmax_y ⟨w, phi(x, y)⟩ for every input (through the kernel expansion after a kernelized fit).

        Parameters
        ----------
        X : list
            A list of examples, even for one (``predict([x])``).

        Returns
        -------
        list
            One labelling per example, in the labels `fit` was given (``classes_``): strings for
            string labels, for instance.
        """
        self._check_fitted()
        install_compile_notice()
        X, _ = self.model.check_data(X)
        return _labels.decode(self.model, getattr(self, "classes_", None), self._predict_states(X))

    def _predict_states(self, X: Sequence[Any]) -> list[Any]:
        """The predictions of a validated X in the model's states 0..n_states-1."""
        if getattr(self, "kernel_expansion_", None) is not None:
            return cast("KernelExpansion", self.kernel_expansion_).decode_all(X)
        executor = get_executor(self.n_jobs, self.executor, self.oracle_timeout)
        try:
            # a linear fit (a kernelized one without w has its expansion)
            return executor.decode(executor.bind(self.model, X), cast("npt.NDArray[np.float64]", self.coef_))
        finally:
            executor.close()

    def score(self, X: Sequence[Any], Y: Sequence[Any]) -> float:
        """Mean per-example accuracy, 1 - (1/n) sum_i Delta(Y_i, predict(X)_i).

        For the models with class labels the task loss Delta is the normalised Hamming loss
        (chain, grid, graph cut, Potts: the fraction of positions labelled wrongly) or the
        0-1 loss (multiclass), so this is the mean over examples of each example's fraction
        of correct positions, `structfw.metrics.hamming_accuracy`: every example weighs the
        same, whatever its length.  It is not the per-token accuracy over all positions of
        all examples, where long examples weigh more: that is
        `structfw.metrics.token_accuracy` (``scoring=structfw.metrics.token_accuracy_scorer``
        in scikit-learn's model selection).  For matching it is 1 - the mean normalised
        alignment loss.

        Y is in the labels `fit` was given; a label `fit` did not see is a ValueError here
        (the metrics of `structfw.metrics` count it as an error instead).
        """
        self._check_fitted()
        X, Y = self._checked_labelled(X, Y)
        return 1.0 - self.model.mean_loss(Y, self._predict_states(X))

    def _checked_labelled(self, X: Sequence[Any], Y: Sequence[Any], name: str = "Y") -> tuple[list[Any], list[Any]]:
        """(X, Y) checked by the model, Y encoded in the states of the labels `fit` was given."""
        return cast("tuple[list[Any], list[Any]]",  # a Y given is returned as a list
                    self.model.check_data(X, _labels.encode(self.model, getattr(self, "classes_", None), Y, name)))

    # ------------------------------------------- scores, marginals, the k best
    def _prediction_inputs(self, X: Sequence[Any], what: str | None) -> tuple[list[Any], str]:
        """Fitted check, the model's support of ``what`` (before any work) and the validated X.

        ``what``: None, "marginals" (exact only: a `GraphModel` example with a cycle is refused),
        "approximate_marginals" (exact or loopy BP) or "top_k" (exact: forests only for graphs)."""
        self._check_fitted()
        kind = _prediction.model_kind(self.model) or ""
        if what is not None:
            kind = _prediction.check_support(self.model, what, getattr(self, "kernel_expansion_", None))
        install_compile_notice()
        X, _ = self.model.check_data(X)
        if what in ("marginals", "top_k") and kind == "graph":
            _prediction.check_forests(self.model, X, what)
        return X, kind

    def _potentials(self, kind: str, X: Sequence[Any]) -> list[_prediction.Potentials]:
        return [_prediction.Potentials(kind, self.model, x, self.coef_, getattr(self, "kernel_expansion_", None))
                for x in X]

    def _decode_states(self, P: Sequence[Any]) -> Sequence[Any]:
        return _labels.decode(self.model, getattr(self, "classes_", None), P)

    def _temperature(self, temperature: float | None) -> float:
        """``temperature`` if given, else ``temperature_`` when calibrated for this fit, else 1."""
        if temperature is not None:
            return _prediction.check_temperature(temperature)
        T = getattr(self, "temperature_", None)
        if T is None:
            return 1.0
        if getattr(self, "_temperature_fit", None) is not self.trace_:
            # fit never touches temperature_, so a refit leaves the old fit's value behind
            import warnings

            warnings.warn(f"temperature_ = {T:.4g} was calibrated for an earlier fit, not the current one: "
                          "using T = 1; call calibrate_temperature again", RuntimeWarning, stacklevel=3)
            return 1.0
        return float(T)

    def decision_function(self, X: Sequence[Any]) -> npt.NDArray[np.float64]:
        """The score ⟨w, phi(x, y_hat)⟩ of each example's predicted labelling y_hat = `predict` (x).

        Parameters
        ----------
        X : list
            A list of examples, even for one.

        Returns
        -------
        ndarray (n,)
            ``model.score(x, y_hat, coef_)`` per example (after a kernelized fit, the same score
            through the kernel expansion).  Every model has it.
        """
        X, kind = self._prediction_inputs(X, None)
        states = self._predict_states(X)
        expansion = getattr(self, "kernel_expansion_", None)
        if expansion is None:
            coef = cast("npt.NDArray[np.float64]", self.coef_)
            return np.array([self.model.score(x, y, coef) for x, y in zip(X, states)], dtype=np.float64)
        return np.array([_prediction.labelling_score(*_prediction.chain_potentials(kind, self.model, x, None,
                                                                                   expansion), y)
                         for x, y in zip(X, states)], dtype=np.float64)

    def predict_marginals(self, X: Sequence[Any], temperature: float | None = None,
                          approximate: bool | dict[str, Any] = False) -> list[npt.NDArray[np.float64]]:
        """Node marginals of p(y | x) ∝ exp(⟨w, phi(x, y)⟩ / T): exactly, or approximately on request.

        Exact for `ChainModel` (sum-product in log space), `MulticlassModel` (a softmax) and
        `GraphModel` on forests (tree sum-product).  With ``approximate`` set, also for
        `GraphModel` examples whose graph has a cycle and for `GridModel`, `PottsModel` and
        `GraphCutModel`: the beliefs of loopy belief propagation
        (`structfw.oracles.marginals.loopy_marginals`, damped sum-product in log space), the Bethe
        approximation, which is *not* the exact marginals (close for weak couplings, exact on
        forests, possibly poor on strongly coupled, frustrated graphs).  The per-token confidence
        of a prediction is the row maximum, ``predict_marginals(X)[i].max(axis=-1)``; the
        per-sequence one is `predict_proba_sequence` (exact models only).

        Parameters
        ----------
        X : list
            A list of examples, even for one.
        temperature : float > 0 or None
            T.  None: ``temperature_`` when `calibrate_temperature` was run on this fit, else 1.
        approximate : bool or dict, default False
            False: exact marginals only; a model or example without them raises. True: loopy BP
            where the marginals are not exact (examples whose marginals are exact still get
            them), with its defaults: damping 0.5, at most 500 iterations, stopping when no
            normalised log message changes by more than 1e-8 in an iteration.  A dict sets these
            (``{"damping": 0.7, "max_iter": 1000, "tol": 1e-6}``) and ``"method"``: "bp"
            (default) or "trw" (tree-reweighted BP: a convex problem, more robust on strongly
            coupled graphs, usually less accurate).  An example on which it stops at
            ``max_iter`` without converging gets its last beliefs and a
            ``sklearn.exceptions.ConvergenceWarning``.

        Returns
        -------
        list of ndarray
            Per example an (L_i, K) array (multiclass: (K,); `GridModel`: (h, w, K)) whose rows sum
            to 1.  Column k is state k, the label ``classes_[k]``; when `fit` saw fewer than
            ``n_states`` labels, the last columns are states no label named.

        Raises
        ------
        NotImplementedError
            Without ``approximate``: for the models without exact marginals (grids, Potts, graph
            cuts) and for a `GraphModel` example whose graph has a cycle.  Always for matchings.
        """
        options = _prediction.check_approximate(approximate)
        X, kind = self._prediction_inputs(X, "marginals" if options is None else "approximate_marginals")
        T = self._temperature(temperature)
        out = []
        if kind in _prediction._APPROX_KINDS and options is not None:
            import warnings

            from sklearn.exceptions import ConvergenceWarning

            coef = cast("npt.NDArray[np.float64]", self.coef_)
            for i, x in enumerate(X):
                mu, info = _prediction.approximate_marginals(kind, self.model, x, coef, T, options)
                if not info["converged"]:
                    warnings.warn(f"predict_marginals: {'tree-reweighted' if info['method'] == 'trw' else 'loopy'} "
                                  f"belief propagation on X[{i}] stopped after "
                                  f"{info['n_iter']} iterations with a message change of {info['max_change']:.3g} "
                                  "(above tol): its marginals are the last beliefs; raise max_iter or damping",
                                  ConvergenceWarning, stacklevel=2)
                out.append(mu)
            return out
        for pot in self._potentials(kind, X):
            node = np.exp(pot.log_marginals(T)[0])
            out.append(node[0] if kind == "multiclass" else node)
        return out

    def predict_proba_sequence(self, X: Sequence[Any], temperature: float | None = None
                               ) -> npt.NDArray[np.float64]:
        """The probability of each example's predicted labelling, p(y_hat | x) = exp(s(y_hat) / T - log Z).

        s = ⟨w, phi⟩ (`decision_function`) and log Z = log sum_y exp(s(y) / T), exact for the models
        of `predict_marginals`.  A per-sequence confidence: it can be tiny for a long sequence
        whose every token is confident (there are many near-equal labellings).

        Parameters
        ----------
        X : list
            A list of examples, even for one.
        temperature : float > 0 or None
            As for `predict_marginals`.

        Returns
        -------
        ndarray (n,)

        Raises
        ------
        NotImplementedError
            As `predict_marginals`.
        """
        X, kind = self._prediction_inputs(X, "marginals")
        T = self._temperature(temperature)
        states = self._predict_states(X)
        out = np.empty(len(X))
        for i, (pot, y) in enumerate(zip(self._potentials(kind, X), states)):
            logZ = pot.log_marginals(T)[1]
            if kind == "graph":
                s = self.model.score(pot.x, y, cast("npt.NDArray[np.float64]", pot.w))
            else:
                s = _prediction.labelling_score(cast("npt.NDArray[np.float64]", pot.U),
                                                cast("npt.NDArray[np.float64]", pot.P), y)
            out[i] = math.exp(min(s / T - logZ, 0.0))  # <= 1 up to the rounding of log Z
        return out

    def calibrate_temperature(self, X_val: Sequence[Any], Y_val: Sequence[Any]) -> Self:
        """Fit the temperature T of `predict_marginals` on held-out data.

        T minimises the mean negative log-likelihood of the true labels under the node
        marginals, -(1/N) sum over all N tokens of log p(y_l = y_l^true | x), by bounded
        1-D minimisation (``scipy.optimize.minimize_scalar``) over log T in [log 1e-4, log 1e4].
        A structural SVM's scores are margins, not log-probabilities, so T = 1 is rarely
        calibrated.  Y_val is in the labels `fit` was given.

        Sets ``temperature_`` (used by `predict_marginals` and `predict_proba_sequence` while
        this fit stands; `save` keeps it) and ``calibration_``, a dict with ``temperature``,
        ``temperature_before`` (the T in use before), ``nll_before``, ``nll_after``,
        ``ece_before``, ``ece_after`` (`structfw.metrics.expected_calibration_error`, 10 bins)
        and ``n_tokens``.

        Parameters
        ----------
        X_val, Y_val : list
            Held-out examples and their labellings (not the training set: its margins are
            over-confident by construction).

        Returns
        -------
        self

        Raises
        ------
        NotImplementedError
            For models without exact marginals (as `predict_marginals`).
        """
        from scipy.optimize import minimize_scalar

        from .metrics import expected_calibration_error

        X, kind = self._prediction_inputs(X_val, "marginals")
        _, Y = self._checked_labelled(X, Y_val, "Y_val")
        if not X:
            raise ValueError("X_val holds no examples")
        pots = self._potentials(kind, X)
        truth = [np.atleast_1d(np.asarray(y, dtype=np.int64)) for y in Y]
        n_tokens = int(sum(t.size for t in truth))
        # log p of a true label that underflows to 0 (GraphModel's marginals are not in logs)
        floor = math.log(np.finfo(np.float64).tiny)

        def nll(T: float) -> float:
            total = 0.0
            for pot, t in zip(pots, truth):
                lp = pot.log_marginals(T)[0]
                total -= float(np.maximum(lp[np.arange(t.size), t], floor).sum())
            return total / n_tokens

        def ece(T: float) -> float:
            return expected_calibration_error(truth, [np.exp(p.log_marginals(T)[0]) for p in pots])

        T0 = self._temperature(None)
        lo, hi = math.log(1e-4), math.log(1e4)
        res = minimize_scalar(lambda t: nll(math.exp(t)), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-4})
        T, best = math.exp(float(res.x)), float(res.fun)
        before = nll(T0)
        if not best < before:  # a flat objective may leave Brent's bracket short of T0
            T, best = T0, before
        elif min(res.x - lo, hi - res.x) < 1e-2:
            import warnings

            warnings.warn(f"calibrate_temperature: the best T = {T:.3g} is at the end of the searched range "
                          "[1e-4, 1e4]; the scores may be degenerate (all-zero or huge weights)", RuntimeWarning,
                          stacklevel=2)
        self.calibration_ = dict(temperature=T, temperature_before=T0, nll_before=before, nll_after=best,
                                 ece_before=ece(T0), ece_after=ece(T), n_tokens=n_tokens)
        self.temperature_ = T
        self._temperature_fit = self.trace_
        return self

    def predict_top_k(self, X: Sequence[Any], k: int
                      ) -> list[tuple[np.ndarray, npt.NDArray[np.float64]]]:
        """The k highest-scoring labellings of each example, best first, with their scores.

        Exact: list Viterbi for `ChainModel` (the k best prefix scores per state and position),
        the sorted class scores for `MulticlassModel`, list max-product for `GraphModel` on
        forests (`structfw.oracles.kbest.tree_top_k`: the k best subtree scores per node and
        label).  The first is `predict`'s labelling (up to ties) and its score
        `decision_function`'s.  Among labellings of equal score the order is deterministic but
        not necessarily that of an enumeration.

        Parameters
        ----------
        X : list
            A list of examples, even for one.
        k : int >= 1
            When an example has fewer than k labellings (K^L for a chain of length L or a graph
            of L nodes, K for multiclass) all of them are returned: the arrays then have fewer
            than k rows.  K counts the labels `fit` saw (``classes_``): a state that no training
            label named has no label to return, so labellings using one are left out.

        Returns
        -------
        list of (labellings, scores)
            Per example: labellings, an array (m, L_i) for a chain or a graph, (m,) for
            multiclass, in the labels `fit` was given (``classes_``); scores (m,), ⟨w, phi(x, y)⟩
            of each, decreasing; m = min(k, number of labellings).

        Raises
        ------
        NotImplementedError
            For the other models, and for a `GraphModel` example whose graph has a cycle (no
            exact k-best decoder there).
        """
        k = _prediction.check_k(k)
        X, kind = self._prediction_inputs(X, "top_k")
        classes = getattr(self, "classes_", None)
        K = int(getattr(self.model, "n_states"))  # chain, multiclass or graph (checked above)
        n_named = K if classes is None else min(classes.size, K)
        out = []
        if kind == "graph":
            coef = cast("npt.NDArray[np.float64]", self.coef_)
            for x in X:
                Ys, scores = _prediction.graph_top_k(self.model, x, coef, k, n_named)
                out.append((np.asarray(self._decode_states([Ys])[0]), scores))
            return out
        for pot in self._potentials(kind, X):
            U = cast("npt.NDArray[np.float64]", pot.U)
            if n_named < U.shape[1]:
                # a state no training label named has no label to return: search the named ones only
                U = U.copy()
                U[:, n_named:] = -np.inf
            Ys, scores = _prediction.top_k(kind, U, cast("npt.NDArray[np.float64]", pot.P), k, n_named)
            if kind == "multiclass":
                Ys = Ys[:, 0]
            out.append((np.asarray(self._decode_states([Ys])[0]), scores))
        return out

    # ------------------------------------------------ the certified gap's parts
    def gap_split(self, X: Sequence[Any], Y: Sequence[Any], sample_weight: Sequence[Any] | None = None) -> GapSplit:
        """The certified gap of this fit split into the relaxation's looseness and the solver's progress.

        Two passes over the training data at ``coef_``: the max oracle (each example's hinge
        H_i at the labelling found) and the model's bound U_i >= max_y H_i (what the trace's
        ``primal_bound`` sums).  The totals are in the trace's last row too (``primal_bound -
        primal`` and ``primal - dual``); this gives them per example, so that the loose examples
        can be found, and at the model's current settings, so that a tighter back-end can be
        tried on the fitted w (``model.inference = "lp"``) without refitting
        (docs/guide/graphs.md, "When the certified gap stalls").

        Parameters
        ----------
        X, Y : list
            The training data of the fit (the dual value ``dual_`` is that data's).
        sample_weight : sequence, optional
            The fit's ``sample_weight`` (the weights enter the hinges); ``class_weight`` is
            applied as in `fit`.

        Returns
        -------
        GapSplit
            Per example ``hinge`` and ``bound``; ``looseness``, ``progress`` and their sum
            ``certified_gap``.

        Raises
        ------
        ValueError
            When the estimator is not fitted, has no ``coef_`` (a kernelized fit), its model
            has no bound of its oracle (an exact model: its ``gap_`` is already exact, all
            progress), or X, Y are not the data of the fit.
        """
        self._check_fitted()
        if self.coef_ is None:
            raise ValueError("gap_split needs coef_, and this kernelized fit has none (w is implicit)")
        if not math.isfinite(self.dual_):
            raise ValueError(f"gap_split needs the fit's dual value, and dual_ is {self.dual_!r} (a solver without "
                             "a dual, such as 'ssg', certifies no gap)")
        if not callable(getattr(self.model, "loss_augmented_decode_with_bound", None)):
            raise ValueError(f"gap_split needs a model that bounds its oracle (loss_augmented_decode_with_bound); "
                             f"{type(self.model).__name__}'s oracle is exact, so gap_ is the true gap and all of it "
                             "is the solver's progress")
        Y = _labels._as_list(Y, "Y")
        X, Y = self._checked_labelled(X, Y)
        class_weight = _labels.resolve_class_weight(self.model, getattr(self, "classes_", None), Y,
                                                    self.class_weight)
        X = self._weighted_inputs(X, Y, sample_weight, class_weight)
        problem = Problem(self.model, X, Y, self.lam_, validated=True)
        _check_fit_data(self, problem)
        w = self.coef_  # not None: checked above
        bound = problem.hinge_bounds(w)
        hinge = problem.batch_hinges(w, validate=False)
        # a bound of max_y H_i is at least the hinge of any labelling: equal where the back-end proved optimality
        bound = np.maximum(bound, hinge)
        return GapSplit(hinge=hinge, bound=bound, primal=problem.primal(w, float(hinge.sum())),
                        primal_bound=problem.primal(w, float(bound.sum())), dual=float(self.dual_))

    # --------------------------------------------------------- save/load
    def save(self, path: str | os.PathLike[str], state: bool = False) -> Path:
        """Write the fitted model to a model file (`structfw.io`; no pickle).

        ``.npz`` is appended to ``path`` when missing; returns the path written.
        The file holds the model class and configuration, the parameters (not the
        execution settings ``n_jobs`` / ``verbose``), the labels ``classes_`` when they are
        not the integer states (a JSON list in the header), ``coef`` and the trace; after a
        kernelized fit with a non-linear kernel (``coef_`` is None) it holds the kernel
        expansion instead of ``coef``: kappa's parameters, the support positions (dense
        or CSR), their dual coefficients and the transition weights.

        Parameters
        ----------
        path : str or Path
        state : bool
            Also write the solver's complete state (``state_``: the blocks' w_i,
            corner sets, sampler, averages, random generator), so a loaded estimator
            with ``warm_start=True`` continues the run exactly.  It is large: BCFW
            keeps one d-vector per example (n * d * 8 bytes with dense blocks).
        """
        self._check_fitted()
        if not isinstance(state, (bool, np.bool_)):
            raise ValueError(f"state must be True or False; got {state!r}")
        if state and getattr(self, "state_", None) is None:
            raise ValueError("state=True: this estimator has no solver state to save (it was loaded without one)")
        header = dict(model=type(self.model).__name__, model_config=self.model.get_config(),
                      params=_saved_params(self), stopped=self.stopped_, gap=_f(self.gap_),
                      primal=_f(self.primal_), dual=_f(self.dual_), n_iter=_f(self.n_iter_))
        if getattr(self, "certified_gap_", None) is not None:
            header["certified_gap"] = _f(self.certified_gap_)
        classes = _labels.classes_to_header(self.model, getattr(self, "classes_", None))
        if classes is not None:  # integer states need no field, so such files are unchanged
            header["classes"] = classes
        if getattr(self, "temperature_", None) is not None and getattr(self, "_temperature_fit", None) is self.trace_:
            header["temperature"] = float(self.temperature_)  # only when calibrated: other files are unchanged
        curve = getattr(self, "lam_curve_", None)
        if curve is not None:  # after lam="auto" only
            header["lam_selection"] = _lam_select.curve_to_header(self.lam_, curve)
        if self.coef_ is not None:
            arrays = {"coef": np.asarray(self.coef_, dtype=np.float64)}
        else:  # a non-linear kernel: w is implicit, the file holds its expansion
            header["expansion"], arrays = _expansion_section(cast("KernelExpansion", self.kernel_expansion_))
        section = _state_section(self) if state else None
        if section is not None:
            state_header, state_arrays = sfio.pack_state(*section)
            header.update(state_header)
            arrays.update(state_arrays)
        return sfio.write_model_file(path, _KIND, header, arrays,
                                     texts={"trace": self.trace_.to_json()})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """Read a model written by `save`, validating every field against the
        model it builds (registered model class, its configuration through its
        constructor, ``coef`` of length ``size_joint_feature`` and finite, the
        parameters through the estimator's own checks, the trace as JSON text).

        Raises ValueError for any file that is not a valid StructuredSVM model file.
        Loaded estimators get the default execution settings (``n_jobs``, ``executor``,
        ``verbose``); ``shards`` is kept, since K decides a sharded fit's iterates.
        """
        header, arrays = sfio.read_model_file(path, _KIND)
        state = sfio.unpack_state(header, arrays)
        sfio.check_fields(header, ["model", "model_config", "params", "stopped", "gap",
                                   "primal", "dual", "n_iter"], optional=["expansion", "classes", "certified_gap",
                                                                  "temperature", "lam_selection"])
        model = _model_from_header(header)
        classes = _labels.classes_from_header(header.get("classes"), model,
                                              getattr(header, "source", "model file"))
        est = cls(model, **_params_from_header(header))
        expansion = None
        if "expansion" in header:
            sfio.check_fields(arrays, ["trace", *_EXPANSION_ARRAYS], optional=_ALL_SUPPORT_ARRAYS)
            coef, expansion = None, _expansion_from_file(header, arrays, model)
        else:
            sfio.check_fields(arrays, ["coef", "trace"])
            coef = sfio.weight_field(arrays, "coef", shape=(model.size_joint_feature,))
        try:
            trace = Trace.from_json_text(sfio.text_field(arrays, "trace"))
        except ValueError as exc:
            raise ValueError(f"{arrays.source}: field 'trace': {exc}") from None
        fitted = dict(coef_=coef, kernel_expansion_=expansion, trace_=trace, classes_=classes,
                      stopped_=sfio.header_str_choice(header, "stopped", _STOPPED),
                      gap_=sfio.header_float(header, "gap", allow_none=True),
                      primal_=sfio.header_float(header, "primal", allow_none=True),
                      dual_=sfio.header_float(header, "dual", allow_none=True),
                      n_iter_=sfio.header_float(header, "n_iter", lo=0.0),
                      certified_gap_=sfio.header_float(header, "certified_gap", allow_none=True)
                      if "certified_gap" in header else None)
        n_features = getattr(model, "n_features", None)
        if isinstance(n_features, int):
            fitted["n_features_in_"] = n_features
        fitted.update(_lam_fitted(est, header, trace))
        if "temperature" in header:
            T = sfio.header_float(header, "temperature")
            if not (math.isfinite(T) and T > 0.0):
                raise ValueError(f"{getattr(header, 'source', 'model file')}: field 'temperature' must be a positive "
                                 f"finite number; got {T!r}")
            fitted.update(temperature_=T, _temperature_fit=trace)
        if state is not None:
            fitted.update(_restore_state(est, *state))
            _check_state_lam(fitted["state_"], trace, getattr(header, "source", "model file"))
        est.__dict__.update(fitted)
        return est


def _source_shards(est: StructuredSVM, source: Any) -> int:
    """K for ``fit(source)``: len(source), which ``shards`` (when given) must equal."""
    try:
        K = len(source)
    except TypeError:
        raise ValueError(f"a shard source must have len() (its number of shards); {type(source).__name__} has "
                         "none") from None
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"a shard source must have at least one shard; len(source) = {K!r}")
    if est.shards is not None and est.shards != K:
        raise ValueError(f"shards={est.shards} and the shard source's {K} shards (len(source)) disagree: give "
                         f"shards=None (one worker a shard) or shards={K}")
    return K


def _check_fit_data(est: StructuredSVM, problem: Problem) -> None:
    """A ValueError unless ``problem`` holds the data ``est`` was fitted on: the dual value ``dual_``
    belongs to that data only.  The solver state's fingerprint decides when there is a state (a
    file saved without one keeps the sizes in its trace)."""
    fingerprint = getattr(getattr(est, "state_", None), "fingerprint", None)
    if fingerprint is not None:
        if fingerprint != problem.fingerprint:
            raise ValueError(f"gap_split: X, Y (n={problem.n}) are not the training data of this fit (its dual "
                             "value dual_ is that data's); pass the X, Y (and sample_weight) given to fit")
        return
    n, d = est.trace_.meta.get("n"), est.trace_.meta.get("d")
    if (n, d) != (problem.n, problem.d):
        raise ValueError(f"gap_split: X has n={problem.n} examples (d={problem.d}), the fit had n={n} (d={d}); "
                         "pass the X, Y given to fit")


def _check_state_lam(state: Any, trace: Trace, src: str) -> None:
    """The solver state was written by the fit whose trace the file holds: the two lam agree.

    A state's lam scales every stored block (w_i = A alpha_[i] / (lam n) ... ), so a forged
    one would resume from an infeasible dual point whose gap certifies nothing; the trace's
    ``meta["lam"]`` is written by the same fit (``set_params(lam=...)`` after a fit changes
    ``params`` but neither of these two)."""
    lam = getattr(state, "lam", None)
    saved = trace.meta.get("lam")
    if lam is None or saved is None:
        return
    if isinstance(saved, bool) or not isinstance(saved, (int, float)) or not math.isclose(
            float(lam), float(saved), rel_tol=1e-12):
        raise ValueError(f"{src}: field 'state.lam' = {float(lam)!r} differs from the lam of the fit that wrote "
                         f"the state (the trace's meta.lam = {saved!r})")


def _is_one(weight: Any) -> bool:
    """True for a per-example weight of exactly 1 (a number, not an array of per-node weights)."""
    if isinstance(weight, (bool, np.bool_)) or np.ndim(weight) != 0:
        return False
    try:
        return float(weight) == 1.0
    except (TypeError, ValueError):
        return False


def load(path: str | os.PathLike[str]) -> StructuredSVM:
    """Load a StructuredSVM saved with ``StructuredSVM.save`` (see `StructuredSVM.load`).

    `structfw.load` loads any structfw model file by its kind (a tagger too)."""
    return StructuredSVM.load(path)


# ------------------------------------------------------------- model files
_KIND = "StructuredSVM"
_STOPPED = ("tol", "max_passes", "time_budget", "interrupted")
#: Saved parameters; n_jobs and verbose are execution settings and never come from a file.
_SAVED_PARAMS = ("solver", "lam", "max_passes", "tol", "check_every", "time_budget",
                 "random_state", "warm_start")
_MAX_D = MAX_SIZE_JOINT_FEATURE  # the models' own bound on d (structfw.models._validation)


def _saved_params(est: StructuredSVM) -> dict[str, Any]:
    params = {k: _jsonable(getattr(est, k)) for k in _SAVED_PARAMS}
    params["solver"] = _solver_spec(est.solver)
    cw = est.class_weight
    if cw is not None:
        # a dict's keys are labels of any kind: saved as [label, weight] pairs (JSON keys are strings)
        params["class_weight"] = cw if isinstance(cw, str) else [[_jsonable(k), float(v)] for k, v in cw.items()]
    if not isinstance(est.random_state, (int, np.integer, type(None))):
        params["random_state"] = None  # a Generator is not data; the fit is done anyway
    if est.lam == "auto":  # only then: other files are unchanged
        grid = est.lam_grid
        params["lam_grid"] = None if grid is None else [float(v) for v in np.asarray(grid, dtype=np.float64)]
        params["validation_fraction"] = float(est.validation_fraction)
    if est.shards is not None:  # only then: other files are unchanged.  It decides the fit (K and the
        params["shards"] = int(est.shards)  # seed give the iterates); executor and n_jobs only where it runs
    return params


def _state_section(est: StructuredSVM) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The solver-state section of a model file: ``(tree, arrays)`` (`structfw.solvers.state_file`)."""
    from .solvers.state_file import encode_state

    try:
        return encode_state(est.state_)
    except ValueError as exc:
        raise ValueError(f"state=True: the state of solver {getattr(est.solver, 'name', est.solver)!r} cannot be "
                         f"written to a model file ({exc}); save(path) without state=True writes the model") from None


def _restore_state(est: StructuredSVM, meta: Mapping[str, Any], arrays: Mapping[str, Any]) -> dict[str, Any]:
    """``state_`` rebuilt from a file's solver-state section (digest and structure checked); whether it
    belongs to the data of a later fit is checked there (size and fingerprint of X and Y)."""
    from .solvers.state_file import decode_state

    return {"state_": decode_state(dict(meta), dict(arrays), source=getattr(meta, "source", "state"), model=est.model,
                                   owned=True)}


#: the kernel expansion's arrays in a model file (the support rows are dense, or CSR in three arrays)
_EXPANSION_ARRAYS = ("expansion/coef", "expansion/transitions")
_SUPPORT_ARRAYS = {"dense": ("expansion/support",),
                   "csr": ("expansion/support_data", "expansion/support_indices", "expansion/support_indptr")}
_ALL_SUPPORT_ARRAYS = _SUPPORT_ARRAYS["dense"] + _SUPPORT_ARRAYS["csr"]


def _expansion_section(exp: KernelExpansion) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """(header field, arrays) of a kernelized fit's predictor: kappa's parameters, the support
    positions, their dual coefficients and the explicit transition weights (BCFW paper App. B)."""
    import scipy.sparse as sp

    meta = dict(kind=exp.kind, kernel=exp.kernel, gamma=float(exp.gamma), degree=int(exp.degree),
                coef0=float(exp.coef0), support_format="csr" if sp.issparse(exp.support) else "dense")
    arrays = {"expansion/coef": np.asarray(exp.coef), "expansion/transitions": np.asarray(exp.transitions)}
    if sp.issparse(exp.support):
        S = sp.csr_matrix(exp.support)
        arrays.update({"expansion/support_data": S.data, "expansion/support_indices": S.indices.astype(np.int64),
                       "expansion/support_indptr": S.indptr.astype(np.int64)})
    else:
        arrays["expansion/support"] = np.asarray(exp.support)
    return meta, arrays


def _expansion_from_file(header: sfio.FieldMap, arrays: sfio.FieldMap, model: StructuredModel) -> KernelExpansion:
    """The KernelExpansion of a model file, every field checked against ``model``: its kind
    (chain or multiclass), K labels and F features per position, finite values, a valid CSR."""
    import scipy.sparse as sp

    from .oracles.kernel_chain import KERNELS
    from .solvers.kernel_bcfw import KernelExpansion

    meta = sfio.header_dict(header, "expansion")
    src = meta.source
    sfio.check_fields(meta, ["kind", "kernel", "gamma", "degree", "coef0", "support_format"])
    kind = sfio.header_str_choice(meta, "kind", ("chain", "multiclass"))
    if kind != getattr(model, "joint_kernel_kind", None):
        raise ValueError(f"{src}: field 'kind' is {kind!r}, which {type(model).__name__} is not")
    kernel = sfio.header_str_choice(meta, "kernel", KERNELS)
    gamma = sfio.header_float(meta, "gamma", lo=0.0)
    if not gamma > 0.0:
        raise ValueError(f"{src}: field 'gamma' must be > 0; got {gamma!r}")
    degree = sfio.header_int(meta, "degree", lo=1, hi=1000)
    coef0 = sfio.header_float(meta, "coef0")
    fmt = sfio.header_str_choice(meta, "support_format", tuple(_SUPPORT_ARRAYS))
    labelled = cast("ChainModel | MulticlassModel", model)  # the only kinds (checked above)
    K, F = int(labelled.n_states), int(labelled.n_features)
    coef = sfio.weight_field(arrays, "expansion/coef", shape=(None, K))
    m = coef.shape[0]
    transitions = sfio.weight_field(arrays, "expansion/transitions", shape=(K, K))
    if kind == "multiclass" and np.any(transitions != 0.0):
        raise ValueError(f"{arrays.source}: field 'expansion/transitions' must be zero for a multiclass model")
    present = sfio.FieldMap({k: v for k, v in arrays.items() if k in _ALL_SUPPORT_ARRAYS}, arrays.source)
    sfio.check_fields(present, _SUPPORT_ARRAYS[fmt])
    if fmt == "dense":
        support = sfio.weight_field(arrays, "expansion/support", shape=(m, F))
    else:
        data = sfio.weight_field(arrays, "expansion/support_data", shape=(None,))
        nnz = data.shape[0]
        indices = sfio.array_field(arrays, "expansion/support_indices", shape=(nnz,), dtype="i", lo=0, hi=F - 1)
        indptr = sfio.array_field(arrays, "expansion/support_indptr", shape=(m + 1,), dtype="i", lo=0, hi=nnz)
        if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
            raise ValueError(f"{arrays.source}: field 'expansion/support_indptr' is not a CSR row pointer "
                             f"(0 to {nnz}, non-decreasing)")
        support = sp.csr_matrix((data, indices, indptr), shape=(m, F))
        support.sum_duplicates()
        support.sort_indices()
    return KernelExpansion(support, coef, transitions, (kernel, gamma, degree, coef0), kind)


def _json_scalar(v: object) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _model_from_header(header: sfio.FieldMap) -> StructuredModel:
    name = sfio.header_str_choice(header, "model", sorted(MODEL_REGISTRY))
    config = sfio.header_dict(header, "model_config")
    for k, v in config.items():
        if not _json_scalar(v):
            raise ValueError(f"{config.source}: field {k!r} must be a JSON scalar")
    try:
        model = MODEL_REGISTRY[name](**config)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{config.source}: invalid configuration of {name}: {exc}") from None
    d = getattr(model, "size_joint_feature", None)
    if not (isinstance(d, int) and 1 <= d <= _MAX_D):
        raise ValueError(f"{config.source}: the model's size_joint_feature {d!r} is not an "
                         f"integer in [1, {_MAX_D}]")
    return model


def _params_from_header(header: sfio.FieldMap) -> dict[str, Any]:
    p = sfio.header_dict(header, "params")
    sfio.check_fields(p, list(_SAVED_PARAMS), optional=["class_weight", "lam_grid", "validation_fraction",
                                                        "shards"])
    src = p.source
    auto = p["lam"] == "auto"
    for k in ("max_passes", "tol", "check_every", "time_budget", "random_state",
              "warm_start"):
        if not _json_scalar(p[k]) or (isinstance(p[k], str) and not (k == "check_every" and p[k] == "auto")):
            raise ValueError(f"{src}: field {k!r} must be a number, a bool or null"
                             + (" (or 'auto')" if k == "check_every" else ""))
    if not auto and (not _json_scalar(p["lam"]) or isinstance(p["lam"], str)):
        raise ValueError(f"{src}: field 'lam' must be a number or 'auto'")
    try:
        lam = "auto" if auto else check_lam(p["lam"])
        StopRule(max_passes=p["max_passes"], tol=p["tol"], check_every=p["check_every"],
                 time_budget=p["time_budget"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{src}: {exc}") from None
    rs = p["random_state"]
    if rs is not None and not (isinstance(rs, int) and not isinstance(rs, bool)
                               and 0 <= rs < 2 ** 63):
        raise ValueError(f"{src}: field 'random_state' must be null or an int in [0, 2**63)")
    if not isinstance(p["warm_start"], bool):
        raise ValueError(f"{src}: field 'warm_start' must be true or false")
    out = {k: p[k] for k in _SAVED_PARAMS}
    out["lam"] = lam
    out["class_weight"] = _class_weight_from_header(p.get("class_weight"), src)
    out["solver"] = _solver_from_spec(sfio.header_dict(p, "solver"))
    out.update(_lam_options_from_header(p, src))
    if "shards" in p:
        k = p["shards"]
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"{src}: field 'shards' must be null or an int >= 1")
        out["shards"] = k
    return out


def _lam_options_from_header(p: Mapping[str, Any], src: str) -> dict[str, Any]:
    """``lam_grid`` and ``validation_fraction`` of a ``lam="auto"`` file (absent: the defaults)."""
    out: dict[str, Any] = {}
    if "lam_grid" in p and p["lam_grid"] is not None:
        if not (isinstance(p["lam_grid"], list) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        for v in p["lam_grid"])
                and _lam_select.is_lam_grid(p["lam_grid"])):
            raise ValueError(f"{src}: field 'lam_grid' must be null or a non-empty list of numbers >= 1e-12")
        out["lam_grid"] = [float(v) for v in p["lam_grid"]]
    if "validation_fraction" in p:
        v = p["validation_fraction"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
            raise ValueError(f"{src}: field 'validation_fraction' must be a number in (0, 1)")
        out["validation_fraction"] = float(v)
    return out


def _lam_fitted(est: StructuredSVM, header: sfio.FieldMap, trace: Trace) -> dict[str, Any]:
    """``lam_`` and ``lam_curve_`` of a loaded estimator: from the file's ``lam_selection`` after
    ``lam="auto"``, else the numeric ``lam`` (or, for "auto" without a curve, the trace's lam)."""
    src = getattr(header, "source", "model file")
    if "lam_selection" in header:
        lam, curve = _lam_select.curve_from_header(header["lam_selection"], src)
        return dict(lam_=lam, lam_curve_=curve)
    if est.lam != "auto":
        return dict(lam_=float(est.lam), lam_curve_=None)
    try:
        return dict(lam_=check_lam(trace.meta.get("lam"), "trace meta.lam"), lam_curve_=None)
    except ValueError as exc:
        raise ValueError(f"{src}: lam is 'auto' and the file has no field 'lam_selection': {exc}") from None


def _class_weight_from_header(cw: Any, src: str) -> str | dict[Any, float] | None:
    """null, "balanced", or [[label, weight], ...] (files saved before the field: null)."""
    if cw is None or cw == "balanced":
        return cw
    ok = isinstance(cw, list) and all(isinstance(e, list) and len(e) == 2 and _json_scalar(e[0])
                                      and isinstance(e[1], (int, float)) and not isinstance(e[1], bool)
                                      and math.isfinite(e[1]) and e[1] >= 0 for e in cw)
    if not ok:
        raise ValueError(f"{src}: field 'class_weight' must be null, \"balanced\" or a list of [label, weight >= 0] "
                         "pairs")
    return {e[0]: float(e[1]) for e in cw}


def _solver_spec(solver: str | Solver) -> dict[str, Any]:
    if isinstance(solver, Solver):
        return {"name": solver.name, "params": _jsonable(solver.get_params())}
    return {"name": str(solver), "params": {}}


def _solver_from_spec(spec: sfio.FieldMap) -> str | Solver:
    from .solvers.sharded import ShardedBCFW

    # a sharded solver is given as an object only (``shards=K`` names it), so it is no choice of
    # ``solver=`` by name, but a fit with one is saved and loaded like any other
    classes: dict[str, type[Solver]] = {**SOLVER_NAMES, ShardedBCFW.name: ShardedBCFW}
    sfio.check_fields(spec, ["name", "params"])
    name = sfio.header_str_choice(spec, "name", sorted(classes))
    params = sfio.header_dict(spec, "params")
    if not params and name in SOLVER_NAMES:
        return name
    try:
        solver = classes[name](**params)
        make_solver(solver)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{params.source}: invalid options of solver {name!r}: {exc}") from None
    return solver


def _jsonable(v: object) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    if isinstance(v, os.PathLike):  # a solver's folder (ShardedBCFW's state_dir)
        return os.fspath(v)
    return repr(v)


def _f(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


# ------------------------------------------------------------- warm starts
#: trace columns that count from the start of a fit; a resumed fit continues them
_RUNNING_COLUMNS = ("passes", "engine_passes", "oracle_calls", "monitor_calls", "cache_hits", "time_s")


def _continue_trace(trace: Trace, previous: Trace | None) -> None:
    """Offset ``trace``'s running counts by ``previous``'s last entry, in place, so a resumed
    fit's passes, oracle calls and time continue those of the fit it resumes."""
    if previous is None or not len(previous):
        return
    offsets = {}
    for col in _RUNNING_COLUMNS:
        last = previous.last(col)
        if col in trace and last is not None and math.isfinite(last):
            offsets[col] = float(last)
    if offsets:
        trace.shift(offsets)
        trace.meta["resumed_from"] = offsets


def _warn_no_state_to_continue() -> None:
    import warnings

    warnings.warn("warm_start=True, but this estimator has no solver state to continue (it was loaded from a "
                  "model file saved without one): the fit starts afresh from w = 0, and the loaded coef_ is "
                  "replaced.  To resume a run, save it with save(path, state=True) (structfw train: "
                  "--save-state)", RuntimeWarning, stacklevel=3)
