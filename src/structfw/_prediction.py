"""Prediction beyond one labelling: scores, marginals, temperatures and the k best (docs/guide/estimator.md).

`StructuredSVM` reads its model's score as a log-potential: p(y | x) ∝ exp(<w, phi(x, y)> / T).
Where that distribution has exact, tractable marginals this module computes them, in the
model's states; the estimator validates the inputs and decodes the states as its labels.

* chains: <w, phi> = sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}], so node marginals and log Z come
  from sum-product in log space (`structfw.oracles.marginals.chain_log_node_marginals`) and the
  k best labellings from list Viterbi (`structfw.oracles.kbest.chain_top_k`);
* multiclass: a chain of one position (a softmax; the k best are the sorted class scores);
* `GraphModel` on forests: its own `marginals` (tree sum-product); on graphs with a cycle the
  marginals are #P-hard and none is offered.

Grids, Potts, graph cuts and matchings have no exact marginals here (their graphs are loopy, or
a matching's labellings are permutations): they raise NotImplementedError up front.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: what each model kind supports besides `decision_function` (which every model has)
_MARGINAL_KINDS = ("chain", "multiclass", "graph")
_TOP_K_KINDS = ("chain", "multiclass")


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


def check_support(model: Any, what: str, expansion: Any = None) -> str:
    """The model's kind, or NotImplementedError naming the model when ``what`` is not exact for it.

    ``what`` is "marginals" or "top_k"; ``expansion`` the kernel expansion of a kernelized fit
    (chains and multiclass only, whose unary scores it gives)."""
    kind = model_kind(model)
    name = type(model).__name__
    if what == "marginals" and kind not in _MARGINAL_KINDS:
        raise NotImplementedError(
            f"predict_marginals is exact for ChainModel, MulticlassModel and GraphModel on forests only; "
            f"{name} has no exact marginals (its graph is loopy, or its labellings are not per-node "
            "class labels), and no approximation is offered")
    if what == "top_k" and kind not in _TOP_K_KINDS:
        raise NotImplementedError(
            f"predict_top_k is exact for ChainModel (list Viterbi) and MulticlassModel (sorted scores) only; "
            f"{name} has no exact k-best decoder")
    if expansion is not None and kind not in ("chain", "multiclass"):
        raise NotImplementedError(f"a kernelized fit of {name} has no {what}")  # pragma: no cover - no such fit
    return kind or ""


def check_forests(model: Any, X: Sequence[Any]) -> None:
    """NotImplementedError naming the first example whose graph has a cycle (`GraphModel` only)."""
    for i, x in enumerate(X):
        if getattr(x, "tree", None) is None:
            raise NotImplementedError(
                f"predict_marginals: X[{i}]'s graph has a cycle; {type(model).__name__}'s marginals are exact on "
                "forests only (marginals of loopy graphs are #P-hard) and no approximation is offered")


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
    """(U (L, K), P (K, K)) with <w, phi(x, y)> = sum_l U[l, y_l] + sum_l P[y_l, y_{l+1}];
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

