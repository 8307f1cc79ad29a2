"""Binary labelling of the nodes of a graph with an exact graph-cut oracle (HorseSeg).

The figure-ground set-up of the MP-BCFW paper (App. A, "HorseSeg") and of the
"Minding the gaps" paper (Sec. 5, HorseSeg with positivity constraints): nodes are
pixels or superpixels, y_v in {0 (background), 1 (figure)}.

Joint feature (d = 2 F + Fe), see `structfw.oracles.potts`::

    phi(x, y) = [ sum_v x_v placed in block y_v ,  - sum_{e=(u,v) : y_u != y_v} f_e ]

i.e. the class-wise unary construction of eq. (7) of the MP-BCFW paper per node, plus
the *negated* sum of the (non-negative) edge features over the edges the labelling
cuts.  Sign convention: the score ⟨w, phi(x, y)⟩ charges c_e = ⟨w_p, f_e⟩ for every cut
edge, so pairwise weights w_p >= 0 make the energy -⟨w, phi⟩ submodular; those d - 2F
coordinates are the model's ``nonnegative_indices`` and the engine keeps them >= 0
(projection Pi of docs/design.md).  The task loss is the normalised Hamming loss over
nodes, so loss-augmented decoding (eq. (10) of App. A with learned edge weights) and
decoding are both exact s-t minimum cuts (`structfw.oracles.maxflow`); the oracle is the
potential-level one, `structfw.oracles.potentials.graph_cut_hinge`, on the node scores and
edge costs at w.

Negative pairwise weights make the problem non-submodular; the oracle then decodes with
the projection Pi(w) (w_p clipped at 0, ``negative_weights="clip"``, the default) and
returns the ground truth instead when that cut scores below it at w itself, so that
H_i >= 0 holds for any w a solver passes; or it raises a ValueError naming the
coordinate (``negative_weights="raise"``).  Once the engine projects its iterate onto
w_p >= 0 (``nonnegative_indices``) none of this is triggered and the oracle is exact.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import SparseVector
from ..oracles.chain import hamming_loss
from ..oracles.maxflow import BACKENDS
from ..oracles.potentials import graph_cut_maximise, graph_cut_search, node_loss
from ..oracles.potts import (
    edge_costs,
    graph_phi_diff_csr,
    graph_phi_diff_dense,
    node_scores_csr,
    node_scores_dense,
    potts_score,
)
from ._validation import (
    MAX_TABLE_ENTRIES,
    as_float_array,
    as_label_array,
    check_int_param,
    check_joint_feature_size,
    check_sequence_of_inputs,
    check_size,
    one_example_error,
)
from .base import CheckedModel, check_example_weight, checked, compose_node_coefficients, register_model


class GraphInput(NamedTuple):
    """A validated input of the graph models (what `check_X` returns).

    nodes : (V, F) C-contiguous float64 array or CSR matrix (float64, int64 indices)
    edges : (E, 2) int64, Fortran-ordered so that ``edges[:, 0]`` and ``edges[:, 1]``
        are contiguous views (the kernels take tails and heads separately)
    edge_features : (E, Fe) C-contiguous float64 >= 0
    loss_weights : (V,) float64 >= 0 or None
        Set by `GraphLabellingModel.weight_example` for training: the coefficients a_v of the
        weighted loss sum_v a_v [y_v != y_true_v].  None: the normalised Hamming loss.
    """

    nodes: npt.NDArray[np.float64] | sp.csr_matrix
    edges: npt.NDArray[np.int64]
    edge_features: npt.NDArray[np.float64]
    loss_weights: npt.NDArray[np.float64] | None = None


_NEG_MODES = ("clip", "raise")
_NO_WEIGHTS = np.zeros(0)  # the loss weights of an unweighted input: the normalised Hamming loss


class GraphLabellingModel(CheckedModel):
    """Shared part of `GraphCutModel` and `PottsModel`:
    class-wise node features, negated cut edge features, normalised Hamming loss.

    Subclasses set ``n_states`` and implement the oracles.  Called by a user, every method
    checks its arguments; the engine calls them unchecked on the graphs it validated once
    (`structfw.models.base.checked`).  d = K F + Fe is at most
    `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`, and K^2 at most
    `structfw.models._validation.MAX_TABLE_ENTRIES` (the certified bound's pairwise tables)."""

    n_states: int = 2
    class_labels = True
    per_node_labels = True
    potts_constant: float = 0.0

    def _init_sizes(self, n_features: int, n_edge_features: int, negative_weights: str) -> None:
        self.n_features = check_int_param(n_features, "n_features", 1)
        self.n_edge_features = check_int_param(n_edge_features, "n_edge_features", 1)
        owner, K = type(self).__name__, self.n_states
        states = "n_states" if "n_states" in vars(self) else str(K)  # GraphCutModel's K = 2 is no argument
        check_joint_feature_size(owner, f"{states} * n_features + n_edge_features",
                                 K * self.n_features + self.n_edge_features)
        check_size(owner, "n_states ** 2", K * K, MAX_TABLE_ENTRIES, "the K x K pairwise table of an edge")
        if negative_weights not in _NEG_MODES:
            raise ValueError(f"negative_weights must be one of {_NEG_MODES}, got {negative_weights!r}")
        self.negative_weights = negative_weights
        self.edge_offset = self.n_states * self.n_features
        self.size_joint_feature = self.edge_offset + self.n_edge_features
        self.nonnegative_indices = np.arange(self.edge_offset, self.size_joint_feature, dtype=np.int64)

    # ------------------------------------------------------------ weights
    def unary_weights(self, w: npt.ArrayLike) -> np.ndarray:
        """View of w's unary part as (n_states, n_features)."""
        return np.asarray(w)[: self.edge_offset].reshape(self.n_states, self.n_features)

    def edge_weights(self, w: npt.ArrayLike) -> np.ndarray:
        """View of w's pairwise part w_p (n_edge_features,), which must be >= 0."""
        return np.asarray(w)[self.edge_offset:self.size_joint_feature]

    # ------------------------------------------------------------ kernels glue
    @staticmethod
    def _parts(x: GraphInput | Sequence[Any]) -> tuple[npt.NDArray[np.float64] | sp.csr_matrix, npt.NDArray[np.int64],
                                                     npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(nodes, tails, heads, edge_features) of an input, cheaply for a GraphInput."""
        if type(x) is not GraphInput:
            nodes, edges, ef = x[0], x[1], x[2]
            edges = np.asfortranarray(np.asarray(edges, np.int64).reshape(-1, 2))
            x = GraphInput(nodes if sp.issparse(nodes) else np.ascontiguousarray(nodes, np.float64),
                           edges, np.ascontiguousarray(ef, np.float64))
        nodes = x.nodes
        # sp.issparse narrows nothing for mypy: the casts below name the type it establishes
        if sp.issparse(nodes) and not (type(nodes) is sp.csr_matrix
                                       and cast("sp.csr_matrix", nodes).indptr.dtype == np.int64):
            nodes = _as_csr(nodes)
        return nodes, x.edges[:, 0], x.edges[:, 1], x.edge_features

    def _unary(self, nodes: npt.NDArray[np.float64] | sp.csr_matrix, w: npt.NDArray[np.float64],
               y_true: npt.NDArray[np.int64], augment: bool,
               loss_weights: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
        """(V, K) node scores, plus the loss when ``augment``: the normalised Hamming loss, or
        sum_v a_v [y_v != y_true_v] with ``loss_weights`` a (`node_loss`, the oracles' own)."""
        K, F = self.n_states, self.n_features
        if sp.issparse(nodes):
            nodes = cast("sp.csr_matrix", nodes)
            U = node_scores_csr(nodes.indptr, nodes.indices, nodes.data, w, K, F, y_true, False)
        else:
            U = node_scores_dense(nodes, w, K, F, y_true, False)
        if augment:
            node_loss(U, y_true, _NO_WEIGHTS if loss_weights is None else loss_weights, 1.0)
        return U

    @staticmethod
    def _loss_weights(x: GraphInput | Sequence[Any]) -> npt.NDArray[np.float64] | None:
        return x.loss_weights if type(x) is GraphInput else None

    @checked
    def example_loss(self, x: GraphInput | Sequence[Any], y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """The loss the training sees: sum_v a_v [y_v != y_true_v] for an input weighted by
        `weight_example`, `loss` otherwise."""
        a = self._loss_weights(x)
        if a is None:
            return self._unchecked_loss(y_true, y)
        return float(np.sum(a[np.asarray(y_true) != np.asarray(y)]))

    def weight_example(self, x: GraphInput | Sequence[Any], y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> GraphInput:
        """x (a `GraphInput`) with the loss coefficients a_v = s / V (per-example weight s) or
        c_v / sum_u c_u (per-node weights c); see `StructuredModel.weight_example`."""
        if type(x) is not GraphInput:
            x = self._check_x(x, "x")
        V = x.nodes.shape[0]
        a = compose_node_coefficients(x.loss_weights, check_example_weight(weight, name, V), V, name)
        return x._replace(loss_weights=a)

    def _check_w(self, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (self.size_joint_feature,):
            raise ValueError(f"w must have shape ({self.size_joint_feature},), got {w.shape}")
        if self.negative_weights == "raise":
            wp = self.edge_weights(w)
            if wp.size and wp.min() < 0:
                j = int(np.argmin(wp))
                raise ValueError(
                    f"w[{self.edge_offset + j}] = {wp[j]:.4g} < 0 is a pairwise weight: the energy is not "
                    "submodular (pairwise weights must be >= 0; see nonnegative_indices)")
        return w

    def _costs(self, ef: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return edge_costs(ef, w, self.edge_offset, self.potts_constant)

    def _not_below_truth(self, U: npt.NDArray[np.float64], tails: npt.NDArray[np.int64], heads: npt.NDArray[np.int64],
                         ef: npt.NDArray[np.float64], w: npt.NDArray[np.float64], y: npt.NDArray[np.int64],
                         y_true: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """y, or y_true when y scores below it at the given w (H_i(y) < H_i(y_i) = 0).

        Only needed when w has negative pairwise weights: the cut was then computed at
        Pi(w) and may score below the ground truth at w itself."""
        if self.edge_weights(w).min() >= 0.0:
            return y
        c = edge_costs(ef, w, self.edge_offset, self.potts_constant, False)
        if potts_score(U, tails, heads, c, y) < potts_score(U, tails, heads, c, y_true):
            return y_true.copy()
        return y

    @checked
    def score_labelling(self, x: GraphInput | Sequence[Any], y: npt.ArrayLike, w: npt.ArrayLike,
                        y_true: npt.ArrayLike | None = None) -> float:
        """⟨w, phi(x, y)⟩ - potts_constant * #cut edges (+ Delta(y_true, y) when given),
        with w_p clipped at 0 as the oracles use it -- the objective they maximise."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        aug = y_true is not None
        yt = np.ascontiguousarray(y_true, np.int64) if aug else np.zeros(0, np.int64)
        U = self._unary(nodes, w, yt, aug, self._loss_weights(x))
        return float(potts_score(U, tails, heads, self._costs(ef, w), np.ascontiguousarray(y, np.int64)))

    # ------------------------------------------------------------------ core
    @checked
    def joint_feature(self, x: GraphInput | Sequence[Any], y: npt.ArrayLike) -> SparseVector:
        """phi(x, y) as a SparseVector."""
        y = np.ascontiguousarray(y, dtype=np.int64)
        return self._phi_diff(x, y, np.full(y.shape[0], -1, np.int64))

    @checked
    def psi(self, x: GraphInput | Sequence[Any], y_true: npt.NDArray[np.int64], y: npt.ArrayLike) -> SparseVector:
        """phi(x, y_true) - phi(x, y) as a SparseVector (only nodes whose labels differ and
        edges whose cut status differs contribute)."""
        return self._phi_diff(x, y_true, np.ascontiguousarray(y, np.int64))

    def _phi_diff(self, x: GraphInput | Sequence[Any], ya: npt.NDArray[np.int64],
                  yb: npt.NDArray[np.int64]) -> SparseVector:
        nodes, tails, heads, ef = self._parts(x)
        K, F = self.n_states, self.n_features
        if sp.issparse(nodes):
            nodes = cast("sp.csr_matrix", nodes)
            i, v = graph_phi_diff_csr(nodes.indptr, nodes.indices, nodes.data, ef, tails, heads, ya, yb, K, F)
        else:
            i, v = graph_phi_diff_dense(nodes, ef, tails, heads, ya, yb, K, F)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def loss(self, y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """Normalised Hamming loss (1/V) sum_v [y_true_v != y_v]."""
        return hamming_loss(np.asarray(y_true), np.asarray(y))

    def label_key(self, y: npt.ArrayLike) -> bytes:
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes())

    # ------------------------------------------------------------ validation
    def _check_x(self, x: Any, name: str) -> GraphInput:
        if type(x) is GraphInput and x.loss_weights is not None:  # weighted (weight_example): checked again
            inner = self._check_x(tuple(x[:3]), name)
            a = np.ascontiguousarray(x.loss_weights, dtype=np.float64)
            if a.shape != (inner.nodes.shape[0],) or not np.all(np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"{name}: loss_weights must be {inner.nodes.shape[0]} finite floats >= 0")
            return inner._replace(loss_weights=a)
        if type(x) is GraphInput:
            x = tuple(x[:3])
        if not isinstance(x, (tuple, list)) or len(x) != 3:
            raise ValueError(f"{name} must be a tuple (node_features, edges, edge_features), "
                             f"got {type(x).__name__}")
        nodes = _check_nodes(x[0], self.n_features, f"{name} node_features")
        V = nodes.shape[0]
        edges = _check_edges(x[1], V, f"{name} edges")
        ef = _check_edge_features(x[2], edges.shape[0], self.n_edge_features, f"{name} edge_features")
        return GraphInput(nodes, edges, ef)

    def check_X(self, X: Iterable[Sequence[Any]]) -> list[GraphInput]:
        # one graph is a 3-tuple whose first item is its node-feature matrix (a list of graphs holds tuples)
        if (isinstance(X, (tuple, list)) and len(X) == 3
                and (sp.issparse(X[0]) or (isinstance(X[0], np.ndarray) and X[0].ndim == 2))):
            raise one_example_error(X, "(node_features, edges, edge_features) tuple", "graph")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: GraphInput | Sequence[Any], y: npt.ArrayLike, name: str = "Y") -> npt.NDArray[np.int64]:
        V = x.nodes.shape[0] if type(x) is GraphInput else np.shape(x[0])[0]
        return as_label_array(y, name, self.n_states, (V,))


def _as_csr(nodes: Any) -> sp.csr_matrix:
    x = sp.csr_matrix(nodes, dtype=np.float64, copy=True)
    x.sum_duplicates()
    x.sort_indices()
    x.indptr = x.indptr.astype(np.int64)
    x.indices = x.indices.astype(np.int64)
    return x


def _check_nodes(nodes: Any, F: int, name: str) -> npt.NDArray[np.float64] | sp.csr_matrix:
    if sp.issparse(nodes):
        if nodes.ndim != 2:
            raise ValueError(f"{name} must be 2-D (V, {F}), got ndim={nodes.ndim}")
        x = _as_csr(nodes)
        data = x.data
    else:
        x = as_float_array(nodes, name)
        if x.ndim != 2:
            raise ValueError(f"{name} must be 2-D (V, {F}), got shape {x.shape}")
        x = np.ascontiguousarray(x, dtype=np.float64)
        data = x
    if x.shape[1] != F:
        raise ValueError(f"{name} has {x.shape[1]} features, expected n_features={F}")
    if x.shape[0] < 1:
        raise ValueError(f"{name} has no nodes (V = 0)")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return x


def _check_edges(edges: npt.ArrayLike, V: int, name: str) -> npt.NDArray[np.int64]:
    try:
        e = np.asarray(edges)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
    if e.size == 0:
        e = e.reshape(0, 2) if e.ndim != 2 or e.shape[1] != 2 else e
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"{name} must have shape (E, 2), got {e.shape}")
    if e.size and not np.issubdtype(e.dtype, np.integer):
        raise ValueError(f"{name} must hold integer node indices, got dtype {e.dtype}")
    e = np.asfortranarray(e, dtype=np.int64)
    if e.size:
        lo, hi = int(e.min()), int(e.max())
        if lo < 0 or hi >= V:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{name} refers to node {bad}, outside 0..{V - 1} (V = {V} nodes)")
        loops = np.flatnonzero(e[:, 0] == e[:, 1])
        if loops.size:
            raise ValueError(f"{name} has a self-loop at row {loops[0]} (node {e[loops[0], 0]})")
    return e


def _check_edge_features(ef: npt.ArrayLike, E: int, Fe: int, name: str) -> npt.NDArray[np.float64]:
    f = as_float_array(ef, name)
    if f.ndim == 1 and Fe == 1 and f.shape[0] == E:
        f = f.reshape(E, 1)
    if f.shape != (E, Fe):
        raise ValueError(f"{name} must have shape (E, n_edge_features) = ({E}, {Fe}), got {f.shape}")
    f = np.ascontiguousarray(f, dtype=np.float64)
    if not np.all(np.isfinite(f)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if f.size and f.min() < 0:
        raise ValueError(f"{name} must be non-negative (submodular pairwise terms), "
                         f"got a minimum of {f.min():.4g}")
    return f


@register_model
class GraphCutModel(GraphLabellingModel):
    """Binary node labelling with an exact min-cut oracle (HorseSeg-style figure-ground).

    Parameters
    ----------
    n_features : int >= 1
        F, node features (dense or scipy.sparse rows).
    n_edge_features : int >= 1
        Fe, non-negative edge features (e.g. exp(-beta |intensity difference|) and 1).
    negative_weights : {"clip", "raise"}, default "clip"
        What the oracles do with negative pairwise weights (see the module docstring).
    backend : {"auto", "numba", "pymaxflow", "ortools", "scipy"}, default "auto"
        Max-flow backend (`structfw.oracles.maxflow`); "auto" is the numba kernel,
        which releases the GIL.

    Inputs and labellings
    ---------------------
    x : tuple (node_features (V, F), edges (E, 2) int, edge_features (E, Fe) >= 0);
        `check_X` returns `GraphInput` tuples (node features kept sparse as
        CSR when given sparse).
    y : (V,) int64 in {0, 1}.

    ``d = 2 F + Fe``; ``nonnegative_indices`` = the Fe pairwise coordinates.
    """

    n_states = 2

    def __init__(self, n_features: int, n_edge_features: int, negative_weights: str = "clip",
                 backend: str = "auto") -> None:
        self._init_sizes(n_features, n_edge_features, negative_weights)
        if backend != "auto" and backend not in BACKENDS:
            raise ValueError(f"backend must be 'auto' or one of {BACKENDS}, got {backend!r}")
        self.backend = backend

    def get_config(self) -> dict[str, Any]:
        return {"n_features": self.n_features, "n_edge_features": self.n_edge_features,
                "negative_weights": self.negative_weights, "backend": self.backend}

    @checked
    def loss_augmented_decode(self, x: GraphInput | Sequence[Any], y_true: npt.ArrayLike,
                              w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Exact argmax_y Delta(y_true, y) + ⟨Pi(w), phi(x, y)⟩ by one min cut.

        With w_p >= 0 (always, once the engine projects) this is the exact max oracle
        at w.  With a negative pairwise weight (and ``negative_weights="clip"``) the
        cut at Pi(w) is returned unless it scores below y_true at w, in which case
        y_true is, so H_i(y; w) >= 0 holds for whatever the solver passes."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        y_true = np.ascontiguousarray(y_true, np.int64)
        U = self._unary(nodes, w, y_true, False)
        a = self._loss_weights(x)
        # the potential-level oracle (structfw.oracles.potentials.graph_cut_hinge): U gets the loss in place
        y, _, _ = graph_cut_search(U, tails, heads, self._costs(ef, w), y_true, _NO_WEIGHTS if a is None else a, 1.0,
                                   self.backend)
        return self._not_below_truth(U, tails, heads, ef, w, y, y_true)

    @checked
    def decode(self, x: GraphInput | Sequence[Any], w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Exact argmax_y ⟨Pi(w), phi(x, y)⟩ by one min cut."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        U = self._unary(nodes, w, np.zeros(0, np.int64), False)
        return graph_cut_maximise(U, tails, heads, self._costs(ef, w), self.backend)
