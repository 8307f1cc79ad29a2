"""Prediction beyond one labelling: scores, marginals, temperatures and the k best (docs/guide/estimator.md).

`StructuredSVM` reads its model's score as a log-potential: p(y | x) ∝ exp(⟨w, phi(x, y)⟩ / T).
Where that distribution has exact, tractable marginals this module computes them, in the
model's states; the estimator validates the inputs and decodes the states as its labels.

* chains: ⟨w, phi⟩ = sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}], so node marginals and log Z come
  from sum-product in log space (`structfw.oracles.marginals.chain_log_node_marginals`) and the
  k best labellings from list Viterbi (`structfw.oracles.kbest.chain_top_k`);
* multiclass: a chain of one position (a softmax; the k best are the sorted class scores);
* `GraphModel` on forests: its own `marginals` (tree sum-product) and the k best labellings by
  list max-product (`structfw.oracles.kbest.tree_top_k`).

On graphs with a cycle the marginals are #P-hard.  Asked for explicitly (``approximate=True``),
`approximate_marginals` gives the loopy-belief-propagation (Bethe) approximation, or
tree-reweighted BP's (`structfw.oracles.marginals.loopy_marginals`) for `GraphModel` examples with cycles and for
`GridModel`, `PottsModel` and `GraphCutModel`; without it they raise NotImplementedError up front.
A matching's labellings are permutations: it has neither.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: what each model kind supports besides `decision_function` (which every model has)
_MARGINAL_KINDS = ("chain", "multiclass", "graph")
_TOP_K_KINDS = ("chain", "multiclass", "graph")
#: the kinds with approximate (loopy BP) marginals, on request: graphs with cycles, grids, graph cuts
_APPROX_KINDS = ("graph", "grid", "graphcut")
#: the options of `structfw.oracles.marginals.loopy_marginals` that ``approximate`` may set
_LOOPY_OPTIONS = ("method", "damping", "max_iter", "tol")


def model_kind(model: Any) -> str | None:
    """"chain", "multiclass", "graph" or None (no exact marginals for this model)."""
    from .models.chain import ChainModel
    from .models.graph import GraphModel
    from .models.multiclass import MulticlassModel

    if isinstance(model, ChainModel):
        return "chain"
    if isinstance(model, MulticlassModel):
        return "multiclass"
    if isinstance(model, GraphModel):
        return "graph"
    return None


def approx_kind(model: Any) -> str | None:
    """"graph", "grid", "graphcut" (`GraphCutModel`, `PottsModel`) or None: the models whose
    approximate marginals `approximate_marginals` computes."""
    from .models.graph import GraphModel
    from .models.graphcut import GraphLabellingModel
    from .models.grid import GridModel

    if isinstance(model, GraphModel):
        return "graph"
    if isinstance(model, GridModel):
        return "grid"
    if isinstance(model, GraphLabellingModel):
        return "graphcut"
    return None


def check_approximate(approximate: Any) -> dict[str, Any] | None:
    """None for ``approximate=False``; the loopy-BP options (possibly empty) for True or a dict."""
    if approximate is False or approximate is None:
        return None
    if approximate is True:
        return {}
    if isinstance(approximate, dict):
        unknown = sorted(set(approximate) - set(_LOOPY_OPTIONS))
        if unknown:
            raise ValueError(f"approximate: unknown option(s) {unknown}; loopy belief propagation takes "
                             f"{list(_LOOPY_OPTIONS)}")
        return dict(approximate)
    raise ValueError(f"approximate must be True, False or a dict of loopy-BP options {list(_LOOPY_OPTIONS)}, "
                     f"got {approximate!r}")


def check_support(model: Any, what: str, expansion: Any = None) -> str:
    """The model's kind, or NotImplementedError naming the model when ``what`` is not exact for it.

    ``what`` is "marginals", "approximate_marginals" (exact where possible, loopy BP on the
    models of `approx_kind`) or "top_k"; ``expansion`` the kernel expansion of a kernelized fit
    (chains and multiclass only, whose unary scores it gives)."""
    kind = model_kind(model)
    name = type(model).__name__
    if what == "approximate_marginals":
        if kind in ("chain", "multiclass"):
            pass
        elif approx_kind(model) is not None:
            kind = approx_kind(model)
        else:
            raise NotImplementedError(
                f"predict_marginals is exact for ChainModel, MulticlassModel and GraphModel on forests, and "
                f"approximate (loopy belief propagation) for GraphModel, GridModel, PottsModel and GraphCutModel; "
                f"{name}'s labellings are not per-node class labels, and it has neither")
    if what == "marginals" and kind not in _MARGINAL_KINDS:
        hint = (" (approximate=True gives loopy-belief-propagation marginals for it)"
                if approx_kind(model) is not None else "")
        raise NotImplementedError(
            f"predict_marginals is exact for ChainModel, MulticlassModel and GraphModel on forests only; "
            f"{name} has no exact marginals (its graph is loopy, or its labellings are not per-node "
            f"class labels){hint}")
    if what == "top_k" and kind not in _TOP_K_KINDS:
        raise NotImplementedError(
            f"predict_top_k is exact for ChainModel (list Viterbi), MulticlassModel (sorted scores) and "
            f"GraphModel on forests (list max-product) only; {name} has no exact k-best decoder")
    if expansion is not None and kind not in ("chain", "multiclass"):
        raise NotImplementedError(f"a kernelized fit of {name} has no {what}")  # pragma: no cover - no such fit
    return kind or ""


def check_forests(model: Any, X: Sequence[Any], what: str = "marginals") -> None:
    """NotImplementedError naming the first example whose graph has a cycle (`GraphModel` only)."""
    for i, x in enumerate(X):
        if getattr(x, "tree", None) is None:
            if what == "top_k":
                raise NotImplementedError(
                    f"predict_top_k: X[{i}]'s graph has a cycle; {type(model).__name__}'s k best labellings are "
                    "exact on forests only (list max-product), and none is computed on loopy graphs")
            raise NotImplementedError(
                f"predict_marginals: X[{i}]'s graph has a cycle; {type(model).__name__}'s marginals are exact on "
                "forests only (marginals of loopy graphs are #P-hard); predict_marginals(X, approximate=True) "
                "gives the loopy-belief-propagation approximation")


def check_temperature(temperature: Any) -> float:
    try:
        T = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}") from None
    if not (np.isfinite(T) and T > 0.0):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    return T


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


# ----------------------------------------------------------------- potentials
def chain_potentials(kind: str, model: Any, x: Any, w: npt.NDArray[np.float64] | None,
                     expansion: Any = None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(U (L, K), P (K, K)) with ⟨w, phi(x, y)⟩ = sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}];
    a multiclass input is one position with P = 0."""
    K = int(model.n_states)
    if expansion is not None:
        from .solvers.kernel_bcfw import _as_rows

        U = expansion.unary_scores(_as_rows(x, kind))
        P = np.asarray(expansion.transitions, dtype=np.float64) if kind == "chain" else np.zeros((K, K))
    elif kind == "chain":
        U = model.unary_scores(x, w)
        P = model.transition_weights(w)
    else:
        U = np.asarray(model.scores(x, w), dtype=np.float64).reshape(1, K)
        P = np.zeros((K, K))
    return np.ascontiguousarray(U, dtype=np.float64), np.ascontiguousarray(P, dtype=np.float64)


def labelling_score(U: npt.NDArray[np.float64], P: npt.NDArray[np.float64], y: npt.ArrayLike) -> float:
    y = np.atleast_1d(np.asarray(y, dtype=np.int64))
    return float(U[np.arange(y.size), y].sum() + P[y[:-1], y[1:]].sum())


class Potentials:
    """One example's log-potentials, computed once and rescaled per temperature: a calibration
    evaluates the marginals at many temperatures, and only the division by T changes."""

    def __init__(self, kind: str, model: Any, x: Any, w: npt.NDArray[np.float64] | None,
                 expansion: Any = None) -> None:
        self.kind, self.model, self.x, self.w = kind, model, x, w
        if kind == "graph":
            self.U = self.P = None
        else:
            self.U, self.P = chain_potentials(kind, model, x, w, expansion)

    def log_marginals(self, T: float) -> tuple[npt.NDArray[np.float64], float]:
        """(log node marginals (L, K), log Z) of p(y) ∝ exp(score(y) / T)."""
        if self.kind == "graph":
            mu, _, logZ = self.model.marginals(self.x, self.w, temperature=T)
            with np.errstate(divide="ignore"):
                return np.log(np.asarray(mu, dtype=np.float64)), float(logZ)
        U = self.U / T
        if self.kind == "multiclass":
            m = U.max()
            logZ = float(m + np.log(np.exp(U - m).sum()))
            return U - logZ, logZ
        from .oracles.marginals import chain_log_node_marginals

        log_node, logZ = chain_log_node_marginals(U, np.ascontiguousarray(self.P / T))
        return log_node, float(logZ)


def top_k(kind: str, U: npt.NDArray[np.float64], P: npt.NDArray[np.float64],
          k: int, n_states: int | None = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(Y (m, L) states, scores (m,)), m = min(k, n_states^L), best first.

    ``n_states`` (default: all of U's columns) counts the states allowed; the caller sets
    the others' unary scores to -inf, and the cap keeps those labellings out of the result."""
    L, K = U.shape
    if n_states is not None:
        K = n_states
    k = min(k, K) if kind == "multiclass" else k
    if kind == "multiclass":
        order = np.argsort(-U[0], kind="stable")[:k]
        return order.astype(np.int64).reshape(-1, 1), U[0, order].copy()
    from .oracles.kbest import chain_top_k

    # K^L labellings in all: cap k there before the kernel allocates (L, K, k) lists
    n_all = 1
    for _ in range(L):
        n_all *= K
        if n_all >= k:
            break
    return chain_top_k(U, P, min(k, n_all))



# ----------------------------------------------------------------- forests and loopy graphs
def graph_top_k(model: Any, x: Any, w: npt.NDArray[np.float64], k: int,
                n_states: int | None = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(Y (m, V) states, scores (m,)) of a `GraphModel` example on a forest, best first (list
    max-product, `structfw.oracles.kbest.tree_top_k`).  ``n_states`` restricts the search to the
    states 0..n_states-1 (those a training label named)."""
    from .oracles.kbest import tree_top_k

    U, P = model.potentials(x, w)
    if n_states is not None and n_states < U.shape[1]:
        U = np.ascontiguousarray(U[:, :n_states])
        P = np.ascontiguousarray(P[:, :n_states, :n_states])
    return tree_top_k(U, x.edges, P, k, schedule=x.tree)


def loopy_potentials(kind: str, model: Any, x: Any, w: npt.NDArray[np.float64]
                     ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(unary (V, K), edges (E, 2), pairwise (E, K, K)) of a validated example with
    ⟨w, phi(x, y)⟩ = sum_v unary[v, y_v] + sum_e pairwise[e, y_u, y_v] (+ `PottsModel`'s fixed
    term -C #cut(y), which its decoder maximises too).  Nodes: a graph's; a grid's cells in
    row-major order."""
    try:  # a training input may carry loss weights (`WeightedInput`): the potentials ignore them
        from .models.base import unweighted
    except ImportError:  # pragma: no cover - older models module
        def unweighted(x: Any) -> Any:
            return x

    x = unweighted(x)
    K = int(model.n_states)
    if kind == "graph":
        U, P = model.potentials(x, w)
        return U, x.edges, P
    if kind == "grid":
        from .models.grid import _grid_edges

        h, wd, F = x.shape
        U = np.ascontiguousarray(x.reshape(h * wd, F) @ model.unary_weights(w).T)
        edges, horizontal = _grid_edges(h, wd)
        P = np.where(horizontal[:, None, None], model.horizontal_weights(w)[None], model.vertical_weights(w)[None])
        return U, np.ascontiguousarray(edges), np.ascontiguousarray(P, dtype=np.float64)
    nodes, edges, ef = x[0], x[1], x[2]
    U = np.ascontiguousarray(np.asarray(nodes @ model.unary_weights(w).T), dtype=np.float64)
    c = np.asarray(ef, dtype=np.float64) @ model.edge_weights(w) + float(getattr(model, "potts_constant", 0.0))
    P = -c[:, None, None] * (1.0 - np.eye(K))[None]  # a cut edge costs c_e
    return U, np.ascontiguousarray(edges, dtype=np.int64), np.ascontiguousarray(P)


def approximate_marginals(kind: str, model: Any, x: Any, w: npt.NDArray[np.float64], T: float,
                          options: dict[str, Any]) -> tuple[npt.NDArray[np.float64], dict[str, Any]]:
    """(node marginals (V, K) -- (h, w, K) for a grid --, info) by loopy belief propagation, or the
    exact tree marginals for a `GraphModel` example on a forest (info then says ``exact``)."""
    if kind == "graph" and getattr(x, "tree", None) is not None:
        mu = model.marginals(x, w, temperature=T)[0]
        return np.asarray(mu), {"exact": True, "method": "exact", "converged": True, "n_iter": 0,
                                "max_change": 0.0}
    from .oracles.marginals import loopy_marginals

    U, edges, P = loopy_potentials(kind, model, x, w)
    mu, _, _, info = loopy_marginals(U, edges, P, temperature=T, **options)
    info["exact"] = False
    if kind == "grid":
        mu = mu.reshape(*np.shape(x)[:2], -1)
    return mu, info
