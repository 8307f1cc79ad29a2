"""LatentStructuredSVM: structural SVMs with latent variables trained by CCCP (Yu & Joachims 2009).

Yu & Joachims (2009), "Learning structural SVMs with latent variables" (ICML), write the
training examples as (x_i, y_i) with a hidden part h_i that the labels do not give, a joint
feature phi(x, y, h), and the (non-convex) latent structural SVM objective (their Sec. 3,
written as a difference of convex functions, with the slack sum averaged and C = 1/(lam n)):

    P(w) = lam/2 ||w||^2 + 1/n sum_i [ max_{(y, h)} (Delta(y_i, y) + ⟨w, phi(x_i, y, h)⟩)
                                       - max_h ⟨w, phi(x_i, y_i, h)⟩ ].

It is a difference of two convex functions.  The concave-convex procedure (their
Algorithm 1, CCCP) alternates

(a) the latent completion h_i* = argmax_h ⟨w_t, phi(x_i, y_i, h)⟩ (the imputation step of
    their Algorithm 1), which makes the concave part linear: F_t(w) = lam/2 ||w||^2 + 1/n sum_i [max_{(y, h)} (Delta +
    ⟨w, phi(x_i, y, h)⟩) - ⟨w, phi(x_i, y_i, h_i*)⟩] >= P(w), with equality at w_t;
(b) w_{t+1} = argmin F_t: a convex structural SVM whose labels are the completions
    (y_i, h_i*), solved by `StructuredSVM` with any structfw solver (the convex step of
    Algorithm 1).

Hence P(w_{t+1}) <= F_t(w_{t+1}) <= F_t(w_t) + g_t = P(w_t) + g_t, where g_t is the duality
gap the convex step ends with: the objective decreases on every round up to the convex
step's inexactness, which `LatentStructuredSVM.rounds_` records next to it.

Two kinds of latent structure are handled (`structfw.models.latent`):

* partial labellings of a `ChainModel` or a `GraphModel`: -1 marks an unlabelled node, the
  hidden part h is the labels of those nodes, and Delta counts the observed nodes only
  (the normalised Hamming loss over them, with the model's class and node weights);
* `LatentSubclassModel`: the label is a class, the hidden part its sub-class.
"""
from __future__ import annotations

import inspect
import math
import numbers
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self, cast

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, clone

from . import _labels
from .estimator import StructuredSVM
from .models.base import StructuredModel
from .models.chain import ChainModel
from .models.graph import GraphExample, GraphModel
from .models.latent import (
    LatentSubclassModel,
    chain_as_graph,
    check_partial_labelling,
    complete_chain,
    complete_graph,
    path_edges,
)
from .oracles.chain import viterbi
from .solvers import Solver, make_solver
from .solvers.problem import check_lam

if TYPE_CHECKING:
    from sklearn.utils import Tags

#: how the convex step of a chain carries the per-node loss weights: "graph" trains the chain as a
#: `GraphModel` on path graphs (same w layout, per-node weights in the inputs); "sample_weight"
#: uses `StructuredSVM.fit(sample_weight=...)` with (L_i,) per-node weights; "auto" takes the latter
#: when `StructuredSVM.fit` accepts it
CHAIN_ROUTE = "auto"

_INITS = ("auto", "fill", "random", "kmeans")


def _fit_takes_sample_weight() -> bool:
    return "sample_weight" in inspect.signature(StructuredSVM.fit).parameters


# ====================================================================== the tasks
class _Task:
    """What CCCP needs of one kind of latent structure (validated data kept on the task)."""

    exact = True  # the completions and the loss-augmented maxima are exact
    n: int
    X: list[Any]
    kept: npt.NDArray[np.int64]  # the examples of the convex step (the others carry no loss)
    convex_model: StructuredModel
    classes: np.ndarray | None = None

    def initial(self, how: str, rng: np.random.Generator) -> list[Any]:
        raise NotImplementedError

    def check_given(self, Y_init: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def completion(self, i: int, w: npt.NDArray[np.float64]) -> Any:
        raise NotImplementedError

    def convex_data(self, Yc: list[Any]) -> tuple[list[Any], list[Any], dict[str, Any]]:
        raise NotImplementedError

    def hinge(self, i: int, w: npt.NDArray[np.float64], yc: Any) -> float:
        """max_{(y,h)} [Delta(y_i, y) + ⟨w, phi(x_i, y, h)⟩] - ⟨w, phi(x_i, y_i, h_c)⟩ for the completion yc."""
        raise NotImplementedError

    def n_changed(self, a: Any, b: Any) -> int:
        raise NotImplementedError


class _PartialTask(_Task):
    """Chains and graphs with unlabelled (-1) nodes."""

    def __init__(self, model: ChainModel | GraphModel, X: Sequence[Any], Y: Sequence[Any], route: str) -> None:
        self.model = model
        self.chain: ChainModel | None = model if isinstance(model, ChainModel) else None
        self.graph: GraphModel | None = model if isinstance(model, GraphModel) else None
        self.is_chain = self.chain is not None
        self.X = model.check_X(X)
        self.n = len(self.X)
        Y = _as_list(Y, "Y")
        if len(Y) != self.n:
            raise ValueError(f"X and Y must have the same length; got len(X)={self.n} and len(Y)={len(Y)}")
        S = model.n_states
        self.Y = [check_partial_labelling(y, S, _n_nodes(x), f"Y[{i}]") for i, (x, y) in enumerate(zip(self.X, Y))]
        self.obs = [y >= 0 for y in self.Y]
        # the loss weight of each node in the convex step: the model's node weights (graphs) times "observed"
        weights = []
        for x, o in zip(self.X, self.obs):
            omega = getattr(x, "node_weights", None)
            c = o.astype(np.float64) if omega is None else o * omega
            weights.append(c)
        self.weights = weights
        #: examples whose loss has some weight: the others drop out of the convex step (their term is 0)
        self.kept = np.array([i for i, c in enumerate(weights) if c.sum() > 0], dtype=np.int64)
        if self.kept.size == 0:
            raise ValueError("Y has no labelled node (every entry is -1, or has node weight 0): there is "
                             "nothing to learn from")
        self.cX: list[Any]
        if self.graph is not None:
            gm = type(self.graph)(**self.graph.get_config())  # a copy: the fits' data checks set flags on it
            self.convex_model = gm
            self.exact = (not any(x.tree is None for x in self.X)
                          or self.graph.inference in ("tree", "exhaustive"))
            self.cX = [GraphExample(x.nodes, x.edges, x.edge_features, x.tree, self.weights[i])
                       for i, x in ((int(i), self.X[int(i)]) for i in self.kept)]
            self.route = "graph"
        else:
            if route == "auto":
                route = "sample_weight" if _fit_takes_sample_weight() else "graph"
            if route not in ("graph", "sample_weight"):
                raise ValueError(f"CHAIN_ROUTE must be 'auto', 'graph' or 'sample_weight', got {route!r}")
            self.route = route
            assert self.chain is not None
            if route == "graph":
                self.convex_model = chain_as_graph(self.chain)
                self.cX = [(self.X[int(i)], path_edges(_n_nodes(self.X[int(i)])), None, self.weights[int(i)])
                           for i in self.kept]
            else:
                self.convex_model = model
                self.cX = [self.X[int(i)] for i in self.kept]

    # ------------------------------------------------------------ init
    def initial(self, how: str, rng: np.random.Generator) -> list[npt.NDArray[np.int64]]:
        S = self.model.n_states
        if how in ("auto", "fill"):
            labelled = np.concatenate([y[y >= 0] for y in self.Y])
            fill = int(np.bincount(labelled, minlength=S).argmax())
            return [np.where(y >= 0, y, fill) for y in self.Y]
        if how == "random":
            return [np.where(y >= 0, y, rng.integers(0, S, size=y.shape[0])) for y in self.Y]
        raise ValueError(f"init={how!r} is for LatentSubclassModel; chains and graphs take 'auto', 'fill' or "
                         "'random'")

    def check_given(self, Y_init: Sequence[Any]) -> list[npt.NDArray[np.int64]]:
        Y_init = _as_list(Y_init, "Y_init")
        if len(Y_init) != self.n:
            raise ValueError(f"Y_init must have one completion per example; got {len(Y_init)} for {self.n}")
        out = []
        for i, (y, yc) in enumerate(zip(self.Y, Y_init)):
            yc = check_partial_labelling(yc, self.model.n_states, y.shape[0], f"Y_init[{i}]")
            if np.any(yc < 0):
                raise ValueError(f"Y_init[{i}] has -1 entries: give a label for every node")
            if np.any(yc[self.obs[i]] != y[self.obs[i]]):
                raise ValueError(f"Y_init[{i}] differs from Y[{i}] at a labelled node: a completion keeps the "
                                 "observed labels")
            out.append(yc)
        return out

    # ------------------------------------------------------------ CCCP steps
    def completion(self, i: int, w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        if self.chain is not None:
            return complete_chain(self.chain, self.X[i], self.Y[i], w)
        y, _ = complete_graph(cast(GraphModel, self.graph), self.X[i], self.Y[i], w)
        return y

    def convex_data(self, Yc: list[Any]) -> tuple[list[Any], list[Any], dict[str, Any]]:
        Yk = [Yc[int(i)] for i in self.kept]
        kw: dict[str, Any] = {}
        if self.route == "sample_weight":
            kw["sample_weight"] = [self.weights[int(i)] for i in self.kept]
        return self.cX, Yk, kw

    def hinge(self, i: int, w: npt.NDArray[np.float64], yc: npt.NDArray[np.int64]) -> float:
        c = self.weights[i]
        if self.graph is not None and self.graph.class_weight is not None:
            c = c * self.graph.class_weight[yc]  # the graph model's class weights (yc = y_i on labelled nodes)
        total = float(c.sum())
        if total <= 0:
            return 0.0  # max_y <w, phi> - max over all completions of the same: exactly 0 (exact inference)
        c = c / total
        if self.chain is not None:
            m = self.chain
            U = m.unary_scores(self.X[i], w)
            P = np.ascontiguousarray(m.transition_weights(w))
            Ua = U + c[:, None]
            Ua[np.arange(U.shape[0]), yc] -= c
            _, top = viterbi(np.ascontiguousarray(Ua), P)
            return float(top) - float(m.score(self.X[i], yc, w))
        gm = cast(GraphModel, self.graph)
        x = self.X[i]
        U, P = gm.potentials(x, w)
        Ua = U + c[:, None]
        Ua[np.arange(U.shape[0]), yc] -= c
        y, value, _, _ = gm._maximise(x, np.ascontiguousarray(Ua), P)
        truth = float(np.sum(U[np.arange(U.shape[0]), yc])) + _pair_energy(x, P, yc)
        # an approximate back-end may return less than the completion itself, whose value is known
        return max(float(value), truth) - truth

    def n_changed(self, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> int:
        return int(np.count_nonzero(a != b))

    # ------------------------------------------------------------ prediction
    def predict(self, X: list[Any], w: npt.NDArray[np.float64]) -> list[npt.NDArray[np.int64]]:
        return [self.model.decode(x, w) for x in X]


def _pair_energy(x: GraphExample, P: npt.NDArray[np.float64], y: npt.NDArray[np.int64]) -> float:
    e = x.edges
    if e.shape[0] == 0:
        return 0.0
    return float(P[np.arange(e.shape[0]), y[e[:, 0]], y[e[:, 1]]].sum())


class _SubclassTask(_Task):
    """Multiclass with a latent sub-class (`LatentSubclassModel`)."""

    def __init__(self, model: LatentSubclassModel, X: Sequence[Any], Y: Sequence[Any]) -> None:
        self.model = model
        self.X = model.check_X(X)
        self.n = len(self.X)
        Y = _as_list(Y, "Y")
        if len(Y) != self.n:
            raise ValueError(f"X and Y must have the same length; got len(X)={self.n} and len(Y)={len(Y)}")
        self.classes, Yenc = _labels.fit_classes(_class_view(model), Y)
        self.Y = [model.check_class(y, f"Y[{i}]") for i, y in enumerate(Yenc)]
        self.convex_model = model
        self.cX = self.X
        self.route = "subclass"
        self.kept = np.arange(self.n, dtype=np.int64)

    def initial(self, how: str, rng: np.random.Generator) -> list[int]:
        m = self.model
        H = m.n_subclasses
        if how == "fill":
            return [m.state(c, 0) for c in self.Y]
        if how == "random":
            return [m.state(c, int(rng.integers(H))) for c in self.Y]
        if how in ("auto", "kmeans"):
            from sklearn.cluster import KMeans

            h = np.zeros(self.n, np.int64)
            Yc = np.asarray(self.Y)
            for c in np.unique(Yc):
                idx = np.flatnonzero(Yc == c)
                if H == 1 or idx.size <= H:
                    h[idx] = np.arange(idx.size) % H
                    continue
                Xc = np.vstack([_dense(self.X[int(i)]) for i in idx])
                km = KMeans(n_clusters=H, n_init=4, random_state=int(rng.integers(2 ** 31 - 1))).fit(Xc)
                h[idx] = km.labels_
            return [m.state(c, int(hh)) for c, hh in zip(self.Y, h)]
        raise ValueError(f"init must be one of {_INITS}, got {how!r}")

    def check_given(self, Y_init: Sequence[Any]) -> list[int]:
        m = self.model
        Y_init = _as_list(Y_init, "Y_init")
        if len(Y_init) != self.n:
            raise ValueError(f"Y_init must have one sub-class per example; got {len(Y_init)} for {self.n}")
        out = []
        for i, (c, h) in enumerate(zip(self.Y, Y_init)):
            if isinstance(h, (bool, np.bool_)) or not isinstance(h, (numbers.Integral, np.integer)) \
                    or not 0 <= int(h) < m.n_subclasses:
                raise ValueError(f"Y_init[{i}] must be a sub-class in 0..{m.n_subclasses - 1}, got {h!r}")
            out.append(m.state(c, int(h)))
        return out

    def completion(self, i: int, w: npt.NDArray[np.float64]) -> int:
        return self.model.complete(self.X[i], self.Y[i], w)

    def convex_data(self, Yc: list[Any]) -> tuple[list[Any], list[Any], dict[str, Any]]:
        return self.cX, list(Yc), {}

    def hinge(self, i: int, w: npt.NDArray[np.float64], yc: int) -> float:
        m = self.model
        s = m.scores(self.X[i], w)
        aug = s + (m.class_of(np.arange(m.n_states)) != self.Y[i])
        return float(aug.max()) - float(s[int(yc)])

    def n_changed(self, a: int, b: int) -> int:
        return int(a != b)

    def predict(self, X: list[Any], w: npt.NDArray[np.float64]) -> list[int]:
        return [int(self.model.class_of(self.model.decode(x, w))) for x in X]


def _class_view(model: LatentSubclassModel) -> Any:
    """The model as `structfw._labels` sees a model with class labels: K states (the classes)."""
    return types.SimpleNamespace(class_labels=True, n_states=model.n_classes)


def _dense(x: Any) -> npt.NDArray[np.float64]:
    return x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=np.float64)


def _n_nodes(x: Any) -> int:
    return int(x.nodes.shape[0]) if isinstance(x, GraphExample) else int(x.shape[0])


def _as_list(Y: Any, name: str) -> list[Any]:
    if Y is None or isinstance(Y, (str, bytes)):
        raise ValueError(f"{name} must be a list of labellings, got {type(Y).__name__}")
    try:
        return list(Y)
    except TypeError:
        raise ValueError(f"{name} must be a list of labellings, got {type(Y).__name__}") from None


# ====================================================================== the estimator
class LatentStructuredSVM(BaseEstimator):
    """Latent structural SVM trained by CCCP (Yu & Joachims 2009, Algorithm 1).

    Minimises the latent SSVM objective (Yu & Joachims 2009, Sec. 3, the slacks averaged,
    C = 1/(lam n))

        P(w) = lam/2 ||w||^2 + 1/n sum_i [ max_{(y,h)} (Delta(y_i, y) + ⟨w, phi(x_i, y, h)⟩)
                                           - max_h ⟨w, phi(x_i, y_i, h)⟩ ]

    by alternating the latent completion h_i* = argmax_h ⟨w, phi(x_i, y_i, h)⟩ and
    the convex structural SVM on the completed labels (their Algorithm 1, CCCP), solved by `StructuredSVM`
    with any structfw solver to a duality gap ``tol``.  Every round decreases P up to that
    gap: P(w_{t+1}) <= P(w_t) + g_t (module docstring); ``rounds_`` records both.

    Parameters
    ----------
    model : ChainModel, GraphModel or LatentSubclassModel
        With a `ChainModel` or a `GraphModel`, a labelling may mark unlabelled nodes with
        -1: their labels are the hidden part, and the loss counts the labelled nodes only
        (the normalised Hamming loss over them, times the model's class and node weights).
        With a `LatentSubclassModel`, a label is a class and the hidden part its sub-class.
    solver : str or Solver
        The convex step's solver, as for `StructuredSVM` ("bcfw", "fw", ... or a configured
        solver object, cloned for every round).
    lam : float
        Regularisation lambda (>= 1e-12).
    max_rounds : int
        CCCP rounds (convex solves) at most.
    cccp_tol : float
        Stop when a round decreases the objective by less than ``cccp_tol * max(1, |P|)``
        (relative), or increases it (the convex step's inexactness dominates).
    init : {"auto", "fill", "random", "kmeans"}
        The first completion of the hidden part (before any w exists).  Chains and graphs:
        "fill" (= "auto") gives every unlabelled node the most common labelled state, so the
        first round is the "observed labels only" model; "random" draws states uniformly.
        `LatentSubclassModel`: "kmeans" (= "auto") clusters each class's inputs into its
        sub-classes (k-means, scikit-learn); "random" draws sub-classes; "fill" puts every
        example in sub-class 0.  `fit` also takes a completion (``Y_init``) instead.
    max_passes : float
        Passes of the convex step, per round.
    tol : float
        Duality gap at which the convex step stops (absolute, in the objective's units).
    check_every : int or "auto"
        As for `StructuredSVM`.
    random_state : int, numpy.random.Generator or None
        Seeds the initial completion ("random", "kmeans") and the convex steps' solvers:
        an int makes a fit reproducible.
    verbose : int
        0 silent; 1 a line per round; 2 also the convex steps' progress.
    n_jobs : int or None
        Workers of the convex steps' oracle calls, as for `StructuredSVM`.

    Attributes
    ----------
    coef_ : ndarray (d,)
        w of the round with the lowest objective (normally the last).
    objective_history_ : ndarray (n_rounds_,)
        P(w_t) after every round t (exact for chains, trees and sub-classes; with a loopy
        graph's approximate back-end, the value its labellings give).
    rounds_ : list of dict
        Per round: ``objective`` (P(w_t)), ``convex_primal`` (F_{t-1}(w_t) >= P(w_t), the
        convex step's objective in the same units), ``convex_gap`` (its duality gap g in
        those units), ``changed`` (hidden labels, or sub-classes, that the completion at
        w_t changes), ``passes``, ``stopped`` (why the convex step ended) and ``resumed``
        (the convex step continued the previous one's solver state exactly: the completion
        had not changed and the previous step had not reached ``tol``).
    n_rounds_ : int
    stopped_ : str
        "cccp_tol", "completion_fixed" (a round changed no hidden label: the next convex
        problem is the one just solved, to ``tol``), "max_rounds" or "interrupted" (Ctrl-C
        ended a convex step, `StructuredSVM`'s way; the fitted attributes are then those of
        the rounds done).
    latent_ : list
        The completion of the training labels at ``coef_``: full labellings (chains,
        graphs) or (class, sub-class) states (`LatentSubclassModel`).
    classes_ : ndarray or None
        `LatentSubclassModel`: the class labels (any kind, as in `StructuredSVM`); None for
        chains and graphs, whose labels are states 0..n_states-1 (or -1).
    exact_ : bool
        False when a loopy graph's approximate back-end made the completions and the
        objective approximate.
    convex_estimator_ : StructuredSVM
        The last round's convex fit (its trace, gap, ...).
    n_features_in_ : int
    """

    def __init__(self, model: StructuredModel, solver: str | Solver = "bcfw", lam: float = 0.01,
                 max_rounds: int = 20, cccp_tol: float = 1e-4, init: str = "auto", max_passes: float = 100,
                 tol: float = 1e-4, check_every: int | str = "auto",
                 random_state: int | np.random.Generator | None = None, verbose: int = 0,
                 n_jobs: int | None = None) -> None:
        self.model = model
        self.solver = solver
        self.lam = lam
        self.max_rounds = max_rounds
        self.cccp_tol = cccp_tol
        self.init = init
        self.max_passes = max_passes
        self.tol = tol
        self.check_every = check_every
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def set_params(self, **params: Any) -> Self:
        """As scikit-learn's; ``solver__option`` on a solver given by name first makes the solver object."""
        if (isinstance(self.solver, str) and "solver" not in params
                and any(k.startswith("solver__") for k in params)):
            self.solver = make_solver(self.solver)
        return super().set_params(**params)

    # ------------------------------------------------------------ checks
    def _check_params(self) -> float:
        if not isinstance(self.model, (ChainModel, GraphModel, LatentSubclassModel)):
            raise ValueError("model must be a structfw ChainModel, GraphModel or LatentSubclassModel; got "
                             f"{type(self.model).__name__}")
        lam = check_lam(self.lam)
        if isinstance(self.max_rounds, bool) or not isinstance(self.max_rounds, numbers.Integral) \
                or self.max_rounds < 1:
            raise ValueError(f"max_rounds must be an integer >= 1, got {self.max_rounds!r}")
        for name in ("cccp_tol", "tol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if isinstance(self.max_passes, bool) or not isinstance(self.max_passes, numbers.Real) \
                or not self.max_passes > 0:
            raise ValueError(f"max_passes must be a number > 0, got {self.max_passes!r}")
        if not isinstance(self.init, str) or self.init not in _INITS:
            raise ValueError(f"init must be one of {_INITS}, got {self.init!r}")
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0:
            raise ValueError(f"verbose must be an integer >= 0, got {self.verbose!r}")
        make_solver(clone(self.solver) if isinstance(self.solver, Solver) else self.solver)  # names the bad solver
        return lam

    def _task(self, X: Sequence[Any], Y: Sequence[Any]) -> _Task:
        if isinstance(self.model, LatentSubclassModel):
            return _SubclassTask(self.model, X, Y)
        return _PartialTask(cast("ChainModel | GraphModel", self.model), X, Y, CHAIN_ROUTE)

    # ------------------------------------------------------------ fit
    def objective(self, X: Sequence[Any], Y: Sequence[Any], w: npt.ArrayLike | None = None) -> float:
        """The latent SSVM objective P(w) on (X, Y) (Yu & Joachims 2009, Sec. 3; ``coef_`` by default).

        Y as `fit` takes it (-1 at unlabelled nodes, or classes)."""
        lam = check_lam(self.lam)
        task = self._task(X, Y)
        if w is None:
            self._check_fitted()
            w = self.coef_
        w = np.ascontiguousarray(w, dtype=np.float64)
        return self._objective(task, lam, w)[0]

    @staticmethod
    def _objective(task: _Task, lam: float, w: npt.NDArray[np.float64]) -> tuple[float, list[Any]]:
        """(P(w), the completions at w)."""
        Yc = [task.completion(i, w) for i in range(task.n)]
        s = sum(task.hinge(i, w, Yc[i]) for i in range(task.n))
        return 0.5 * lam * float(np.dot(w, w)) + s / task.n, Yc

    def fit(self, X: Sequence[Any], Y: Sequence[Any], Y_init: Sequence[Any] | None = None) -> Self:
        """Train by CCCP on (X, Y).

        Parameters
        ----------
        X : list
            The inputs, as the model takes them.
        Y : list
            Chains and graphs: (L_i,) integer labellings with -1 at unlabelled nodes.
            `LatentSubclassModel`: class labels (integers 0..n_classes-1, or any labels,
            encoded as ``classes_``).
        Y_init : list, optional
            The first completion instead of ``init``: full labellings that agree with Y at
            the labelled nodes, or one sub-class per example.

        Notes
        -----
        Examples of a chain or graph with no labelled node carry no loss, and their term of
        the objective, max_y ⟨w, phi⟩ - max over all completions of the same, is 0 for every
        w: they are left out of the convex steps, whose lambda is then lam n / n_kept so that
        the minimiser is the same (F_t = (n_kept / n) times the convex step's primal).
        """
        lam = self._check_params()
        task = self._task(X, Y)
        rng = np.random.default_rng(self.random_state)
        Yc = task.check_given(Y_init) if Y_init is not None else task.initial(self.init, rng)
        n, kept = task.n, task.kept
        scale = kept.size / n
        lam_c = lam / scale
        history: list[float] = []
        rounds: list[dict[str, Any]] = []
        best: tuple[float, Any, Any] | None = None
        svm: StructuredSVM | None = None
        stopped = "max_rounds"
        resume = False
        for t in range(1, int(self.max_rounds) + 1):
            cX, cY, kw = task.convex_data(Yc)
            if not resume:
                solver = clone(self.solver) if isinstance(self.solver, Solver) else self.solver
                svm = StructuredSVM(task.convex_model, solver=solver, lam=lam_c, max_passes=self.max_passes,
                                    tol=self.tol, check_every=self.check_every,
                                    random_state=int(rng.integers(2 ** 31 - 1)), verbose=max(0, self.verbose - 1),
                                    n_jobs=self.n_jobs)
            else:
                svm.set_params(warm_start=True)  # type: ignore[union-attr]  # set in round 1
            assert svm is not None
            svm.fit(cX, cY, **kw)
            w = np.ascontiguousarray(svm.coef_, dtype=np.float64)
            obj, Yc_new = self._objective(task, lam, w)
            changed = sum(task.n_changed(a, b) for a, b in zip(Yc, Yc_new))
            rec = dict(round=t, objective=obj, convex_primal=scale * float(svm.primal_),
                       convex_gap=scale * float(svm.gap_), changed=changed, passes=float(svm.n_iter_),
                       stopped=svm.stopped_, resumed=resume)
            rounds.append(rec)
            history.append(obj)
            if self.verbose:
                dec = "" if t == 1 else f"  decrease {history[-2] - obj:+.3e}"
                print(f"[LatentStructuredSVM] round {t}: objective {obj:.6g}{dec}  convex gap "
                      f"{rec['convex_gap']:.2e} ({rec['passes']:g} passes{', resumed' if resume else ''})  "
                      f"hidden labels changed {changed}", flush=True)
            if best is None or obj < best[0]:
                best = (obj, w, Yc_new)
            if svm.stopped_ == "interrupted":  # Ctrl-C: the convex step ended early, and so does CCCP
                stopped = "interrupted"
                break
            if t > 1 and history[-2] - obj < self.cccp_tol * max(1.0, abs(history[-2])):
                stopped = "cccp_tol"
                break
            if changed == 0:
                # the next convex problem is this one: continue its solver state if it did not reach tol
                if svm.stopped_ == "tol":
                    stopped = "completion_fixed"
                    break
                resume = True
            else:
                resume = False
            Yc = Yc_new
        assert best is not None
        _, w_best, latent = best
        fitted = dict(coef_=w_best, objective_history_=np.asarray(history), rounds_=rounds,
                      n_rounds_=len(rounds), stopped_=stopped, latent_=latent,
                      classes_=getattr(task, "classes", None), exact_=bool(task.exact),
                      convex_estimator_=svm, n_features_in_=int(getattr(self.model, "n_features")))
        self.__dict__.update(fitted)
        return self

    # ------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise ValueError("this LatentStructuredSVM is not fitted yet; call fit(X, Y) first")

    def predict(self, X: Sequence[Any]) -> list[Any]:
        """argmax_{(y,h)} ⟨w, phi(x, y, h)⟩ (the latent prediction rule of Yu & Joachims 2009, Sec. 3), returned as y.

        Chains and graphs: the full labelling of every node.  `LatentSubclassModel`: the
        class of the best (class, sub-class), in the labels `fit` was given."""
        self._check_fitted()
        Xv = self.model.check_X(X)
        w = self.coef_
        if isinstance(self.model, LatentSubclassModel):
            P = [int(self.model.class_of(self.model.decode(x, w))) for x in Xv]
            return list(_labels.decode(_class_view(self.model), self.classes_, P))
        return [self.model.decode(x, w) for x in Xv]

    def predict_latent(self, X: Sequence[Any]) -> list[Any]:
        """The (class, sub-class) state argmax_s ⟨w_s, x⟩ (`LatentSubclassModel`), or the labelling (chains, graphs)."""
        self._check_fitted()
        return [self.model.decode(x, self.coef_) for x in self.model.check_X(X)]

    def score(self, X: Sequence[Any], Y: Sequence[Any]) -> float:
        """Mean per-example accuracy.

        Chains and graphs: the mean over examples of the fraction of labelled nodes (Y >= 0)
        predicted right; examples with no labelled node are skipped.  `LatentSubclassModel`:
        the fraction of examples whose class is predicted right."""
        self._check_fitted()
        P = self.predict(X)
        Y = _as_list(Y, "Y")
        if len(Y) != len(P):
            raise ValueError(f"X and Y must have the same length; got len(X)={len(P)} and len(Y)={len(Y)}")
        if isinstance(self.model, LatentSubclassModel):
            return float(np.mean([p == y for p, y in zip(P, Y)]))
        accs = []
        for i, (p, y) in enumerate(zip(P, Y)):
            y = check_partial_labelling(y, int(getattr(self.model, "n_states")), p.shape[0], f"Y[{i}]")
            obs = y >= 0
            if obs.any():
                accs.append(float(np.mean(p[obs] == y[obs])))
        if not accs:
            raise ValueError("Y has no labelled node to score")
        return float(np.mean(accs))


__all__ = ["LatentStructuredSVM"]
