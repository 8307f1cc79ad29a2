"""Pairwise CRFs on any graph: node labelling with learned unary and pairwise terms.

Each example is a graph with node features x_v in R^F and edge features f_e in R^Fe on
its edges e = (u_e, v_e); a labelling gives every node a state y_v in 0..K-1.  The joint
feature (parametrisation "full") is

    phi(x, y) = [ sum_v x_v ⊗ e_{y_v}  (K F) ,  sum_e f_e ⊗ E_{y_u, y_v}  (K K Fe) ]

so that ⟨w, phi(x, y)⟩ is the energy E(y) of the shared inference interface
(`structfw.oracles.graph`) with

    unary[v, k] = ⟨W_unary[k], x_v⟩,   pairwise[e, k, l] = ⟨W_pair[k, l], f_e⟩.

"symmetric" ties W_pair[k, l] = W_pair[l, k] (K(K+1)/2 Fe parameters, for undirected
relations); "potts" keeps one vector on the diagonal, pairwise[e, k, l] = [k = l] ⟨w_p, f_e⟩
(Fe parameters; w_p > 0 rewards agreement).  In w the unary block comes first (state k,
feature f at k F + f), then the pairwise slots (slot s, edge feature f at K F + s Fe + f);
the slots are (k, l) -> k K + l ("full"), the pairs k <= l in row-major order
("symmetric"), the diagonal ("potts").

The task loss is the normalised Hamming loss over nodes, optionally class-weighted:
node v counts c_v = cw[y_v^true] / sum_u cw[y_u^true].  It adds c_v [k != y_v^true] to the
unary term, so loss-augmented decoding (the max oracle) is again max_y E(y).  Which
back-end maximises E is the model's ``inference``: exact max-product on forests
(`structfw.oracles.graph.tree_max_product`), brute force on tiny graphs, and on graphs
with cycles the loopy back-ends of `structfw.oracles.loopy` (TRW-S, the LP relaxation,
QPBO), which also return an upper bound on max_y E(y) (`GraphModel.loss_augmented_decode_with_bound`).
The oracle is the potential-level one, `structfw.oracles.potentials.graph_hinge`, on the
potentials at w (`GraphModel.potentials`).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._linalg import SparseVector
from ..oracles.graph import (
    EXHAUSTIVE_LIMIT,
    TreeSchedule,
    check_graph,
    forest_schedule,
    graph_phi_diff_csr,
    graph_phi_diff_dense,
    tree_marginals,
)
from ..oracles.potentials import (
    GRAPH_INFERENCE,
    INFERENCE_OPTIONS,
    add_graph_loss,
    check_inference_options,
    graph_backend,
    graph_maximise,
    graph_node_coefficients,
    graph_search,
    is_submodular,
)
from ._validation import (MAX_TABLE_ENTRIES, as_float_array, as_label_array, check_int_param,
                          check_joint_feature_size, check_sequence_of_inputs, check_size, from_json_text)
from .base import CheckedModel, check_example_weight, checked, register_model
from .graphcut import _check_nodes

PAIRWISE = ("full", "symmetric", "potts")
#: every back-end name ``inference`` takes; "auto" picks one per graph (`structfw.oracles.potentials`)
BACKENDS = GRAPH_INFERENCE
_EXACT = ("tree", "exhaustive")


class GraphExample(NamedTuple):
    """A validated input of `GraphModel` (what `GraphModel.check_X` returns).

    nodes : (V, F) C-contiguous float64 array, or CSR matrix (float64, int64 indices)
    edges : (E, 2) C-contiguous int64, each unordered pair once, no self-loops
    edge_features : (E, Fe) C-contiguous float64
    tree : `TreeSchedule` when the graph is a forest (the message order, computed once
        here and reused by every oracle call), None when it has a cycle
    node_weights : (V,) float64 >= 0 with a positive sum, or None (every node weighs 1)
    loss_scale : float >= 0, default 1
        The example's weight s: its loss is s sum_v c_v [y_v != y_v^true]
        (`GraphModel.weight_example` sets it from a per-example ``sample_weight``).
    """

    nodes: npt.NDArray[np.float64] | sp.csr_matrix
    edges: npt.NDArray[np.int64]
    edge_features: npt.NDArray[np.float64]
    tree: TreeSchedule | None
    node_weights: npt.NDArray[np.float64] | None = None
    loss_scale: float = 1.0


@register_model
class GraphModel(CheckedModel):
    """Pairwise CRF on general graphs: exact on forests, certified bounds on loopy graphs.

    Parameters
    ----------
    n_states : int >= 2
        K, the number of labels.
    n_features : int >= 1
        F, node features (dense or scipy.sparse rows).
    n_edge_features : int >= 1, default 1
        Fe, edge features (any sign).  With 1, an input may omit them (all ones: one
        learned K x K pairwise table shared by every edge).
    pairwise : {"full", "symmetric", "potts"}, default "full"
        The parametrisation of the pairwise term (module docstring): K^2 Fe, K(K+1)/2 Fe
        or Fe parameters.
    inference : {"auto", "tree", "exhaustive", "trws", "lp", "qpbo"}, default "auto"
        The back-end of the max oracle and of `decode`.  "auto" decides per graph:
        max-product on a forest; QPBO when K = 2 and every pairwise term is submodular
        (exact then); TRW-S otherwise.  "tree" refuses graphs with cycles; "exhaustive"
        graphs with K^V > 2^20; "qpbo" needs K = 2.
    inference_options : dict, optional
        Keyword arguments of the back-ends, by back-end name, e.g.
        ``{"trws": {"max_iter": 200, "tol": 1e-6}}`` (or its JSON text).  Each back-end takes
        its own (`INFERENCE_OPTIONS`): "trws" max_iter (1..10^6), tol (>= 0), icm_sweeps (>= 0)
        and order (a permutation of the nodes, checked against every graph); "lp" icm_sweeps
        and integral_tol (in [0, 1)); "qpbo" exhaustive_max (0..32), trws_iter (1..10^6) and
        icm_sweeps.  Checked here (and when the attribute is set), not at the first oracle call.
    class_weight : array-like of K positive floats, optional
        (or its JSON text, as `get_config` writes it).  Weights of the loss: node v
        counts cw[y_v^true] / sum_u cw[y_u^true], so the loss stays in [0, 1] and rare
        classes can weigh more.  Default: uniform, the plain
        normalised Hamming loss (1/V) sum_v [y_v != y_v^true].
    nonnegative_pairwise : bool, default False
        With ``pairwise="potts"`` only: keep the Fe Potts weights w_p >= 0 (they become
        the model's ``nonnegative_indices``, which every solver respects).  With
        non-negative edge features every edge then rewards agreement, so the energy is
        attractive: submodular for K = 2 (``inference="auto"`` takes QPBO, exact).

    Attributes
    ----------
    size_joint_feature : int
        d = K F + n_slots Fe (n_slots = K^2, K(K+1)/2 or 1).
    approximate_oracle : bool
        False when the oracle is exact on the training graphs: ``inference`` "tree" or
        "exhaustive", or "auto" when every labelled graph the model has validated
        (`check_data` with labels, as `StructuredSVM.fit` does) is a forest.  True
        otherwise (a loopy back-end may return a non-maximiser; its bound still certifies
        the gap).

    Notes
    -----
    Inputs: ``x = (node_features (V, F), edges (E, 2), edge_features (E, Fe))``, or
    ``(node_features, edges)`` when ``n_edge_features == 1``; `check_X` returns
    `GraphExample` tuples (sparse node features kept as CSR).  Labellings: (V,) int64 in
    0..K-1.  ``psi`` and ``joint_feature`` return `SparseVector`.  Called by a user, every
    method checks its arguments; the engine calls them unchecked on the graphs it validated
    once (`structfw.models.base.checked`).  d is at most
    `structfw.models._validation.MAX_SIZE_JOINT_FEATURE` and K^2 (the pairwise table of an
    edge) at most `structfw.models._validation.MAX_TABLE_ENTRIES`.
    """

    _unchecked_loss_augmented_decode_with_bound: Callable[..., Any]

    class_labels = True
    per_node_labels = True

    def __init__(self, n_states: int, n_features: int, n_edge_features: int = 1, pairwise: str = "full",
                 inference: str = "auto", inference_options: Mapping[str, Mapping[str, Any]] | str | None = None,
                 class_weight: npt.ArrayLike | str | None = None, nonnegative_pairwise: bool = False) -> None:
        self.n_states = K = check_int_param(n_states, "n_states", 2)
        self.n_features = check_int_param(n_features, "n_features", 1)
        self.n_edge_features = check_int_param(n_edge_features, "n_edge_features", 1)
        if pairwise not in PAIRWISE:
            raise ValueError(f"pairwise must be one of {PAIRWISE}, got {pairwise!r}")
        self.pairwise = pairwise
        _check_graph_sizes(K, self.n_features, self.n_edge_features, pairwise)
        if inference != "auto" and inference not in BACKENDS:
            raise ValueError(f"inference must be 'auto' or one of {BACKENDS}, got {inference!r}")
        if inference == "qpbo" and K != 2:
            raise ValueError(f"inference='qpbo' needs n_states = 2 (binary labels), got n_states={K}")
        self.inference = inference
        self.inference_options = inference_options  # checked (and stored) by the property
        self.class_weight = None if class_weight is None else _check_class_weight(class_weight, K)
        self._cw = np.zeros(0) if class_weight is None else self.class_weight
        # slot[k, l]: the pairwise parameter block of the label pair (k, l), -1 for none
        if pairwise == "full":
            slot = np.arange(K * K, dtype=np.int64).reshape(K, K)
        elif pairwise == "symmetric":
            slot = np.empty((K, K), np.int64)
            iu = np.triu_indices(K)
            slot[iu] = np.arange(iu[0].size)
            slot[iu[1], iu[0]] = slot[iu]
        else:
            slot = np.full((K, K), -1, np.int64)
            np.fill_diagonal(slot, 0)
        self.slot = slot
        self.n_slots = int(slot.max()) + 1
        self.pairwise_offset = K * self.n_features
        self.size_joint_feature = self.pairwise_offset + self.n_slots * self.n_edge_features
        self._slot_csr: sp.csr_matrix | None = None  # built by the first expectation call
        self._seen_labelled = False
        self._seen_loopy = False
        if not isinstance(nonnegative_pairwise, (bool, np.bool_)):
            raise ValueError(f"nonnegative_pairwise must be True or False, got {nonnegative_pairwise!r}")
        if nonnegative_pairwise and pairwise != "potts":
            # a sign constraint on a full or symmetric table makes no label pair attractive
            # or repulsive as such; on the Potts weights it is the smoothness prior
            raise ValueError("nonnegative_pairwise=True applies to pairwise='potts' (the agreement weights), "
                             f"got pairwise={pairwise!r}")
        self.nonnegative_pairwise = bool(nonnegative_pairwise)
        if self.nonnegative_pairwise:
            self.nonnegative_indices = np.arange(self.pairwise_offset, self.size_joint_feature, dtype=np.int64)

    def get_config(self) -> dict[str, Any]:
        # JSON scalars only (a saved fit's header holds no nested values): the two
        # structured arguments travel as JSON text, which the constructor also takes
        return {"n_states": self.n_states, "n_features": self.n_features,
                "n_edge_features": self.n_edge_features, "pairwise": self.pairwise,
                "inference": self.inference,
                "inference_options": json.dumps(self.inference_options) if self.inference_options else None,
                "class_weight": None if self.class_weight is None else json.dumps(self.class_weight.tolist()),
                "nonnegative_pairwise": self.nonnegative_pairwise}

    @property
    def inference_options(self) -> dict[str, dict[str, Any]]:
        """The back-ends' keyword arguments (class docstring), checked whenever they are set."""
        return self._inference_options

    @inference_options.setter
    def inference_options(self, options: Mapping[str, Mapping[str, Any]] | str | None) -> None:
        self._inference_options = _check_options(options)

    @property
    def _slot_matrix(self) -> sp.csr_matrix:
        """0/1 (K K, n_slots) membership of label pairs in slots (folds edge marginals onto slots),
        sparse: K^2 entries where a dense one would hold K^2 n_slots (K^4 for "full")."""
        if self._slot_csr is None:
            K = self.n_states
            flat = self.slot.ravel()
            has = np.flatnonzero(flat >= 0)
            self._slot_csr = sp.csr_matrix((np.ones(has.size), (has, flat[has])), shape=(K * K, self.n_slots))
        return self._slot_csr

    @property
    def approximate_oracle(self) -> bool:  # type: ignore[override]  # read-only: from the graphs validated
        """False when the oracle is exact on the training graphs (see the class docstring)."""
        if self.inference in _EXACT:
            return False
        if self.inference == "auto":
            return not self._seen_labelled or self._seen_loopy
        return True

    # ------------------------------------------------------------ weights
    def unary_weights(self, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """View of w's unary part as (K, F): row k is W_unary[k]."""
        return np.asarray(w)[: self.pairwise_offset].reshape(self.n_states, self.n_features)

    def pairwise_weights(self, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """w's pairwise part as (K, K, Fe): [k, l] is W_pair[k, l] (zeros where the
        parametrisation has no parameter, tied slots repeated)."""
        Wp = np.asarray(w)[self.pairwise_offset:self.size_joint_feature]
        Wp = np.vstack([Wp.reshape(self.n_slots, self.n_edge_features), np.zeros((1, self.n_edge_features))])
        return Wp[np.where(self.slot >= 0, self.slot, self.n_slots)]

    def potentials(self, x: GraphExample | Sequence[Any],
                   w: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(unary (V, K), pairwise (E, K, K)) of x at w, so that E(y) = ⟨w, phi(x, y)⟩."""
        x = self._example(x)
        return self._potentials(x, np.ascontiguousarray(w, dtype=np.float64))

    def _potentials(self, x: GraphExample,
                    w: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        K, Fe = self.n_states, self.n_edge_features
        W = w[: self.pairwise_offset].reshape(K, self.n_features)
        U = x.nodes @ W.T
        U = np.ascontiguousarray(U, dtype=np.float64)
        Wp = w[self.pairwise_offset:self.size_joint_feature].reshape(self.n_slots, Fe)
        theta = x.edge_features @ Wp.T  # (E, n_slots)
        E = theta.shape[0]
        if self.pairwise == "full":
            P = theta.reshape(E, K, K)
        elif self.pairwise == "symmetric":
            P = theta[:, self.slot]
        else:
            P = theta[:, 0, None, None] * np.eye(K)
        return U, np.ascontiguousarray(P)

    def _node_loss_weights(self, y_true: npt.NDArray[np.int64],
                           node_weights: npt.NDArray[np.float64] | None = None) -> float | npt.NDArray[np.float64]:
        """c_v, the share of node v in the loss (sums to 1): omega_v cw[y_v] / sum_u omega_u cw[y_u]."""
        return graph_node_coefficients(y_true, self.class_weight, node_weights)

    def _augment(self, U: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
                 scale: float = 1.0, node_weights: npt.NDArray[np.float64] | None = None
                 ) -> npt.NDArray[np.float64]:
        """U + scale c_v [k != y_v^true] in place: the loss as unary terms (`add_graph_loss`, the
        potential-level oracle's)."""
        return add_graph_loss(U, y_true, self._cw, node_weights, scale)

    # ------------------------------------------------------------ inference
    def _maximise(self, x: GraphExample, U: npt.NDArray[np.float64],
                  P: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], float, float, bool]:
        """(labels, value, bound, exact) of max_y E(y) by the chosen back-end (`graph_maximise`)."""
        return graph_maximise(U, x.edges, P, self.inference, self.inference_options, x.tree)

    def inference_backend(self, x: GraphExample | Sequence[Any], w: npt.ArrayLike) -> str:
        """The back-end name ("tree", "qpbo", ...) the oracle uses for x at w."""
        x = self._example(x)
        if self.inference != "auto" or x.tree is not None:
            return graph_backend(self.inference, x.tree, None)
        return graph_backend(self.inference, x.tree, self._potentials(x, np.ascontiguousarray(w, dtype=np.float64))[1])

    @checked
    def loss_augmented_decode_with_bound(self, x: GraphExample | Sequence[Any], y_true: npt.ArrayLike,
                                         w: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], float]:
        """The max oracle with a certificate: (y, B) with B >= max_y Delta(y_true, y) + ⟨w, phi(x, y)⟩.

        For the exact back-ends B is the value of y; for the loopy ones it is the
        back-end's bound (its dual or LP value; +inf if it has none).  Then
        B - ⟨w, phi(x, y_true)⟩ bounds the block's hinge max_y H_i(y; w) from above, which
        certifies the duality gap even when y is not a maximiser.  When an approximate
        back-end's labelling scores below y_true, y_true is returned (H_i >= 0)."""
        x = self._example(x)
        w = np.ascontiguousarray(w, dtype=np.float64)
        y_true = np.ascontiguousarray(y_true, dtype=np.int64)
        U, P = self._potentials(x, w)
        # the potential-level oracle (structfw.oracles.potentials.graph_hinge) on the potentials at w
        y, value, bound, _, _ = graph_search(U, x.edges, P, y_true, self._cw, x.node_weights, x.loss_scale,
                                             self.inference, self.inference_options, x.tree, truth=False)
        return y, max(float(bound), value)

    @checked
    def loss_augmented_decode(self, x: GraphExample | Sequence[Any], y_true: npt.ArrayLike,
                              w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y Delta(y_true, y) + ⟨w, phi(x, y)⟩ by the model's back-end (exact on
        forests; on loopy graphs approximate, and never below y_true)."""
        return self._unchecked_loss_augmented_decode_with_bound(x, y_true, w)[0]

    @checked
    def decode(self, x: GraphExample | Sequence[Any], w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y ⟨w, phi(x, y)⟩ by the model's back-end."""
        x = self._example(x)
        U, P = self._potentials(x, np.ascontiguousarray(w, dtype=np.float64))
        return self._maximise(x, U, P)[0]

    def marginals(self, x: GraphExample | Sequence[Any], w: npt.ArrayLike, temperature: float = 1.0
                  ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
        """Exact marginals of p(y) ∝ exp(⟨w, phi(x, y)⟩ / T) on a forest (sum-product).

        Returns ``(node_marginals (V, K), edge_marginals (E, K, K), log_partition)``, the
        edge marginals indexed [e, label of edges[e, 0], label of edges[e, 1]].

        Raises
        ------
        NotImplementedError
            When x's graph has a cycle (exact marginals of loopy graphs are #P-hard;
            none of the loopy back-ends computes them).
        """
        x = self._example(x)
        self._need_forest(x, "marginals")
        U, P = self._potentials(x, np.ascontiguousarray(w, dtype=np.float64))
        return tree_marginals(U, x.edges, P, temperature, schedule=x.tree)

    @checked
    def expectation(self, x: GraphExample | Sequence[Any], y_true: npt.ArrayLike | None, v: npt.ArrayLike,
                    c: float) -> tuple[npt.NDArray[np.float64] | SparseVector, float, float]:
        """Expectation oracle on a forest (online exponentiated gradient; see
        `StructuredModel.expectation`): p(y) ∝ exp(c Delta(y_true, y) + ⟨v, phi(x, y)⟩).

        The loss adds c c_v [k != y_v^true] to the unary terms; node and edge marginals
        then give E_phi = [sum_v x_v ⊗ mu_v, sum_e f_e ⊗ (mu_e folded onto the slots)].
        E_phi is a SparseVector for sparse node features, dense otherwise.  Raises
        NotImplementedError on graphs with cycles."""
        v, c = self._expectation_args(v, c)
        x = self._example(x)
        self._need_forest(x, "expectation")
        U, P = self._potentials(x, v)
        Vn = U.shape[0]
        if y_true is not None:
            y_true = as_label_array(y_true, "y_true", self.n_states, (Vn,))
            self._augment(U, y_true, c * x.loss_scale, node_weights=x.node_weights)
        mu, mu_e, logZ = tree_marginals(U, x.edges, P, 1.0, schedule=x.tree)
        E = mu_e.shape[0]
        E_phi: npt.NDArray[np.float64] | SparseVector
        pair = ((self._slot_matrix.T @ mu_e.reshape(E, -1).T) @ x.edge_features).ravel()
        if sp.issparse(x.nodes):
            un = (sp.csr_matrix(mu.T) @ x.nodes).tocoo()
            idx = un.row.astype(np.int64) * self.n_features + un.col
            order = np.argsort(idx)
            keep = np.flatnonzero(pair)
            E_phi = SparseVector(np.concatenate([idx[order], self.pairwise_offset + keep]),
                                 np.concatenate([un.data[order], pair[keep]]), self.size_joint_feature)
        else:
            E_phi = np.concatenate([(mu.T @ x.nodes).ravel(), pair])
        E_loss = 0.0
        if y_true is not None:
            cv = np.broadcast_to(self._node_loss_weights(y_true, x.node_weights), (Vn,))
            E_loss = x.loss_scale * float(np.dot(cv, 1.0 - mu[np.arange(Vn), y_true]))
        return E_phi, E_loss, logZ

    @staticmethod
    def _need_forest(x: GraphExample, what: str) -> None:
        if x.tree is None:
            raise NotImplementedError(f"GraphModel.{what} is exact on forests only, and this graph has a "
                                      "cycle: marginals of loopy graphs are not implemented")

    # ------------------------------------------------------------------ core
    @checked
    def joint_feature(self, x: GraphExample | Sequence[Any], y: npt.ArrayLike) -> SparseVector:
        """phi(x, y) as a SparseVector."""
        y = np.ascontiguousarray(y, dtype=np.int64)
        return self._phi_diff(self._example(x), y, np.full(y.shape[0], -1, np.int64))

    @checked
    def psi(self, x: GraphExample | Sequence[Any], y_true: npt.ArrayLike, y: npt.ArrayLike) -> SparseVector:
        """phi(x, y_true) - phi(x, y) as a SparseVector: only nodes whose labels differ and
        edges whose label pair changes slot are read."""
        return self._phi_diff(self._example(x), np.ascontiguousarray(y_true, np.int64),
                              np.ascontiguousarray(y, np.int64))

    def _phi_diff(self, x: GraphExample, ya: npt.NDArray[np.int64], yb: npt.NDArray[np.int64]) -> SparseVector:
        K = self.n_states
        if sp.issparse(x.nodes):
            X = cast("sp.csr_matrix", x.nodes)
            i, v = graph_phi_diff_csr(X.indptr, X.indices, X.data, x.edge_features, x.edges, ya, yb,
                                      self.slot, self.n_slots, K, self.n_features)
        else:
            i, v = graph_phi_diff_dense(x.nodes, x.edge_features, x.edges, ya, yb, self.slot,
                                        self.n_slots, K)
        return SparseVector(i, v, self.size_joint_feature)

    @checked
    def loss(self, y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """(Class-weighted) normalised Hamming loss sum_v c_v [y_v != y_v^true]."""
        y_true = np.asarray(y_true)
        wrong = y_true != np.asarray(y)
        if self.class_weight is None:
            return float(np.count_nonzero(wrong)) / y_true.size
        c = self.class_weight[y_true]
        return float(c[wrong].sum() / c.sum())

    @checked
    def example_loss(self, x: GraphExample | Sequence[Any], y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """The loss of example x: with per-node weights omega (x's fourth item),
        sum_v c_v [y_v != y_v^true] with c_v = omega_v cw[y_v^true] / sum_u omega_u cw[y_u^true];
        without them `loss`.  The engine's corners use this, so the loss-augmented oracle,
        the gaps and the path all see the weighted loss."""
        x = self._example(x)
        if x.node_weights is None:
            loss = float(self._unchecked_loss(y_true, y))
            return loss * x.loss_scale if x.loss_scale != 1.0 else loss
        y_true = np.asarray(y_true)
        c = np.asarray(self._node_loss_weights(y_true, x.node_weights))
        return x.loss_scale * float(c[y_true != np.asarray(y)].sum())

    def weight_example(self, x: GraphExample | Sequence[Any], y_true: Any, weight: float | npt.NDArray[np.float64],
                       name: str = "sample_weight") -> GraphExample:
        """x (a `GraphExample`) with its loss weighted, through the same fields as x's own
        ``node_weights``: a per-example weight s sets ``loss_scale`` (the loss is s times
        `example_loss`), per-node weights c multiply ``node_weights`` (so c_v omega_v cw[y_v],
        normalised, weighs node v); see `StructuredModel.weight_example`."""
        x = self._example(x)
        V = x.nodes.shape[0]
        wt = check_example_weight(weight, name, V)
        if isinstance(wt, float):
            return x._replace(loss_scale=x.loss_scale * wt)
        omega = wt if x.node_weights is None else wt * x.node_weights
        y = np.ascontiguousarray(y_true, dtype=np.int64)
        c = omega if self.class_weight is None else omega * self.class_weight[y]
        if not c.sum() > 0:
            raise ValueError(f"{name}: the node weights of this example give its labelled nodes no weight "
                             "(with the model's class_weight and the input's node_weights): its loss is undefined")
        return x._replace(node_weights=np.ascontiguousarray(omega))

    def label_key(self, y: npt.ArrayLike) -> bytes:
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes())

    # ------------------------------------------------------------ validation
    def _example(self, x: GraphExample | Sequence[Any]) -> GraphExample:
        """A GraphExample of x, cheaply when it is one already (oracle calls of a fit)."""
        if type(x) is GraphExample:
            return x
        return self._check_x(x, "x")

    def _check_x(self, x: GraphExample | Sequence[Any], name: str) -> GraphExample:
        Fe = self.n_edge_features
        if isinstance(x, GraphExample):
            if x.loss_scale != 1.0:  # weighted by weight_example: the scale kept, the rest checked again
                scale = float(x.loss_scale)
                if not (np.isfinite(scale) and scale >= 0):
                    raise ValueError(f"{name}: loss_scale must be a finite number >= 0, got {x.loss_scale!r}")
                return self._check_x(x._replace(loss_scale=1.0), name)._replace(loss_scale=scale)
            x = tuple(x[:3]) if x.node_weights is None else (*x[:3], x.node_weights)
        if not isinstance(x, (tuple, list)) or len(x) not in (2, 3, 4):
            raise ValueError(f"{name} must be a tuple (node_features, edges, edge_features[, node_weights]) "
                             f"or (node_features, edges), got {type(x).__name__}")
        nodes = _check_nodes(x[0], self.n_features, f"{name}: node_features")
        V = nodes.shape[0]
        edges = check_graph(V, x[1], f"{name}: edges")
        E = edges.shape[0]
        if len(x) == 2:
            if Fe != 1:
                raise ValueError(f"{name} has no edge_features, but n_edge_features = {Fe}: pass "
                                 "(node_features, edges, edge_features)")
            ef = np.ones((E, 1))
        elif x[2] is None and Fe == 1:
            ef = np.ones((E, 1))
        else:
            ef = _check_edge_features(x[2], E, Fe, f"{name}: edge_features")
        omega = _check_node_weights(x[3], V, f"{name}: node_weights") if len(x) == 4 and x[3] is not None else None
        if self.inference == "exhaustive" and V * np.log2(self.n_states) > np.log2(EXHAUSTIVE_LIMIT) + 1e-9:
            raise ValueError(f"{name} has {V} nodes: inference='exhaustive' would enumerate "
                             f"{self.n_states}^{V} labellings, more than 2^20")
        tree = forest_schedule(V, edges)
        if tree is None and self.inference == "tree":
            raise ValueError(f"{name}: edges contain a cycle, but inference='tree' needs a forest; "
                             "use inference='auto' or a loopy back-end")
        order = self.inference_options.get("trws", {}).get("order")
        if order is not None and sorted(order) != list(range(V)):
            raise ValueError(f"{name} has {V} nodes, but inference_options['trws']['order'] is not a permutation "
                             f"of 0..{V - 1} (it has {len(order)} entries)")
        return GraphExample(nodes, edges, ef, tree, omega)

    def check_X(self, X: Iterable[Any]) -> list[GraphExample]:
        # one graph is a tuple whose first item is its node-feature matrix (a list of graphs holds tuples)
        if (isinstance(X, tuple) and len(X) in (2, 3, 4)
                and (sp.issparse(X[0]) or (isinstance(X[0], np.ndarray) and X[0].ndim == 2))):
            raise ValueError("X must be a list of examples (one (node_features, edges, edge_features) tuple "
                             "per graph), got a single graph; to predict one graph pass [x]")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_data(self, X: Iterable[Any],
                   Y: Iterable[Any] | None = None) -> tuple[list[Any], list[Any] | None]:
        X, Y = super().check_data(X, Y)
        if Y is not None:
            # the oracle is exact on the labelled (training) graphs when all are forests
            self._seen_labelled = True
            self._seen_loopy = self._seen_loopy or any(x.tree is None for x in X)
        return X, Y

    def check_y(self, x: GraphExample | Sequence[Any], y: npt.ArrayLike, name: str = "Y") -> npt.NDArray[np.int64]:
        V = x.nodes.shape[0] if type(x) is GraphExample else np.shape(x[0])[0]
        return as_label_array(y, name, self.n_states, (V,))


def _check_node_weights(omega: npt.ArrayLike, V: int, name: str) -> npt.NDArray[np.float64]:
    f = as_float_array(omega, name)
    if f.shape != (V,):
        raise ValueError(f"{name} must have shape (V,) = ({V},), got {f.shape}")
    if not np.all(np.isfinite(f)) or np.any(f < 0):
        raise ValueError(f"{name} must hold finite weights >= 0")
    if V and not f.sum() > 0:
        raise ValueError(f"{name} are all zero: the example would have no loss")
    return np.ascontiguousarray(f, dtype=np.float64)


def _check_edge_features(ef: npt.ArrayLike, E: int, Fe: int, name: str) -> npt.NDArray[np.float64]:
    f = as_float_array(ef, name)
    if f.ndim == 1 and Fe == 1 and f.shape[0] == E:
        f = f.reshape(E, 1)
    if f.size == 0 and E == 0:
        f = f.reshape(0, Fe)
    if f.shape != (E, Fe):
        raise ValueError(f"{name} must have shape (E, n_edge_features) = ({E}, {Fe}), got {f.shape}")
    f = np.ascontiguousarray(f, dtype=np.float64)
    if not np.all(np.isfinite(f)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return f


def _check_class_weight(cw: object, K: int) -> npt.NDArray[np.float64]:
    cw = from_json_text(cw, "class_weight")
    try:
        a = np.asarray(cw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"class_weight must be an array of {K} positive floats, got {cw!r}") from None
    if a.shape != (K,) or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"class_weight must be an array of n_states = {K} positive finite floats, got {cw!r}")
    return a


def _check_graph_sizes(K: int, F: int, Fe: int, pairwise: str) -> None:
    """The sizes a `GraphModel`'s arguments imply, bounded before anything is allocated: d and
    the K x K pairwise table of an edge (every oracle call builds one per edge)."""
    n_slots = {"full": K * K, "symmetric": K * (K + 1) // 2, "potts": 1}[pairwise]
    slots = {"full": "n_states ** 2", "symmetric": "n_states * (n_states + 1) / 2", "potts": "1"}[pairwise]
    check_joint_feature_size("GraphModel", f"n_states * n_features + {slots} * n_edge_features "
                             f"(pairwise={pairwise!r})", K * F + n_slots * Fe)
    check_size("GraphModel", "n_states ** 2", K * K, MAX_TABLE_ENTRIES, "the K x K pairwise table of an edge")


def _check_options(options: object) -> dict[str, dict[str, Any]]:
    """``inference_options`` (a dict or its JSON text) as {back-end: {option: value}}, every key and
    value checked (`INFERENCE_OPTIONS`); a ValueError naming ``inference_options[back-end][option]``."""
    return check_inference_options(from_json_text(options, "inference_options"))


__all__ = ["GraphModel", "GraphExample", "is_submodular", "INFERENCE_OPTIONS"]
