"""Potential-level oracles: the loss-augmented max oracle of every model family on given scores.

docs/design.md, "Inference on potentials".  A model's score decomposes over factors,
⟨w, phi(x, y)⟩ = sum_f theta_f(y_f), so its max oracle depends on (x, w) only through the
potentials theta.  Here each family has one function that takes theta itself (what a network
would produce) and returns, as a `HingeResult`,

    y*     = argmax_y Delta(y_true, y) + s_theta(y)       (the loss-augmented labelling)
    value  = Delta(y_true, y*) + s_theta(y*),  truth = s_theta(y_true),
    hinge  = value - truth  (the structured hinge, >= 0),
    grad   = d hinge / d theta = 1[y*_f] - 1[y_true,f]    (one array per potential),

with ``bound`` >= max_y Delta + s_theta(y) (the value itself for exact back-ends).  Delta is the
family's own loss, on the scale of the model's ``loss``, times ``loss_scale`` (0 gives the
perceptron-like hinge max_y s(y) - s(y_true)).  A labelling an approximate back-end returns that
scores below y_true is replaced by y_true (hinge 0, grad 0), as the models do.

The linear models compute theta from (x, w) and call the same code without its checks (the
``*_search`` functions below, on arrays they own: the loss is added in place), so loss
augmentation and maximisation are written once.  The work runs in numba kernels that release the
GIL (the maximisers of `structfw.oracles.chain`, `.graph`, `.potts`, `.maxflow`, `.pose`, the
assignment below), so a batch can run on a thread pool; the LP back-end (scipy's HiGHS) and QPBO's
component bookkeeping run partly in Python.

Every public function checks its arguments: a ValueError names the function and the argument
("chain_hinge: transitions must be (K, K) = (3, 3) for unary of shape (5, 3), got (3, 4)").
"""
from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from numba import njit
from structfw import _numba_cache  # noqa: F401 (before the first @njit: the package's cache stamp)

from .chain import add_node_loss_weights, labelling_score, loss_augmented_into, viterbi_into
from .graph import (EXHAUSTIVE_LIMIT, TreeSchedule, add_node_loss, check_graph, energy, exhaustive, forest_schedule,
                    tree_max_product)
from .matching import _add_hamming_bonus, matching_value, max_weight_partial_matching
from .maxflow import BACKENDS as MAXFLOW_BACKENDS
from .maxflow import min_cut
from .multiclass import weighted_augmented_argmax
from .pose import pose_energy, pose_max_product, tree_order
from .potts import alpha_expansion, binary_graph_cut, potts_score, unary_argmax

__all__ = ["HingeResult", "chain_hinge", "multiclass_hinge", "graph_hinge", "graph_cut_hinge", "potts_hinge",
           "matching_hinge", "pose_hinge", "GRAPH_INFERENCE", "INFERENCE_OPTIONS"]

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_EMPTY_F = np.zeros(0)


class HingeResult(NamedTuple):
    """What a potential-level oracle returns (module docstring).

    Attributes
    ----------
    y : ndarray or int
        The loss-augmented labelling, in the model's label format.
    value : float
        Delta(y_true, y) + s_theta(y).
    bound : float
        >= max_y' [Delta(y_true, y') + s_theta(y')]; equal to ``value`` when exact (+inf when
        the back-end has no bound).
    truth : float
        s_theta(y_true).
    grad : tuple of ndarray
        d(value - truth)/d theta, one float64 array per potential argument, of the same shapes
        and in the same order as the potential arguments.
    exact : bool
        True when y is a proven maximiser.
    """

    y: npt.NDArray[np.int64] | int
    value: float
    bound: float
    truth: float
    grad: tuple[_F64, ...]
    exact: bool

    @property
    def hinge(self) -> float:
        """value - truth (>= 0: y_true is a candidate)."""
        return self.value - self.truth

    @property
    def hinge_bound(self) -> float:
        """bound - truth: an upper bound of the hinge, which certifies it."""
        return self.bound - self.truth


# ====================================================================== argument checks
def _array(a: Any, where: str, name: str) -> npt.NDArray[Any]:
    """``np.asarray(a)``, or a ValueError naming the argument."""
    try:
        return np.asarray(a)
    except Exception as exc:
        raise ValueError(f"{where}: {name} could not be converted to an array: {exc}") from None


def _floats(a: Any, where: str, name: str) -> _F64:
    """``a`` as a finite C-contiguous float64 array (any real dtype)."""
    arr = _array(a, where, name)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: {name} must hold real numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}: {name} must be finite (it holds NaN or infinite values)")
    return arr


def _potential(a: Any, where: str, name: str, ndim: int, form: str) -> _F64:
    """A potential of ``ndim`` dimensions (``form`` names them), finite float64."""
    arr = _floats(a, where, name)
    if arr.ndim != ndim:
        raise ValueError(f"{where}: {name} must be {form}, got shape {arr.shape}")
    return arr


def _shaped(a: Any, where: str, name: str, shape: tuple[int, ...], form: str, context: str) -> _F64:
    """A potential that must have ``shape`` (``form`` its symbols, ``context`` what fixes them); an
    empty array stands for one of a shape with a zero (no edges)."""
    arr = _floats(a, where, name)
    if arr.size == 0 and 0 in shape:
        arr = arr.reshape(shape)
    if arr.shape != shape:
        raise ValueError(f"{where}: {name} must be {form} = {shape} for {context}, got {arr.shape}")
    return arr


def _labels(y: Any, where: str, name: str, shape: tuple[int, ...], low: int, high: int) -> _I64:
    """``y`` as C-contiguous int64 of ``shape`` with values in low..high."""
    arr = _array(y, where, name)
    if arr.dtype == object or arr.dtype.kind not in "iuf":
        raise ValueError(f"{where}: {name} must hold integer labels, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{where}: {name} must have shape {shape}, got {arr.shape}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{where}: {name} must hold integer labels, got non-integer values")
    out = np.ascontiguousarray(arr, dtype=np.int64)
    bad = np.flatnonzero((out < low) | (out > high))
    if bad.size:
        at = np.unravel_index(int(bad[0]), shape)
        raise ValueError(f"{where}: {name}[{', '.join(str(int(t)) for t in at)}] = {out[at]} is outside "
                         f"{low}..{high}")
    return out


def _real(value: Any, where: str, name: str, low: float, strict: bool = False) -> float:
    """A finite real number >= low (> low when ``strict``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: {name} must be a real number, got {value!r}")
    v = float(value)
    if not np.isfinite(v) or v < low or (strict and v == low):
        raise ValueError(f"{where}: {name} must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}")
    return v


def _int_at_least(value: Any, where: str, name: str, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _node_weights(a: Any, where: str, name: str, n: int) -> _F64:
    """Per-node weights: n finite floats >= 0."""
    arr = _potential(a, where, name, 1, f"({n},), one weight per node")
    if arr.shape != (n,):
        raise ValueError(f"{where}: {name} must have shape ({n},), one weight per node, got {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{where}: {name} must be >= 0")
    return arr


def _class_label(y: Any, where: str, K: int) -> int:
    """One class label in 0..K-1 (an integer, an integral float or a one-element array of one)."""
    arr = np.asarray(y) if not isinstance(y, (bool, np.bool_)) else None
    ok = arr is not None and arr.size == 1 and arr.ndim <= 1 and arr.dtype.kind in "iuf"
    v = float(arr.reshape(())) if ok and arr is not None else float("nan")
    if not ok or not (np.isfinite(v) and v == np.round(v)):
        raise ValueError(f"{where}: y_true must be one integer class label, got {y!r}")
    label = int(v)
    if not 0 <= label < K:
        raise ValueError(f"{where}: y_true = {label} is outside 0..{K - 1}")
    return label


def _class_weight(cw: Any, where: str, K: int) -> _F64:
    arr = _potential(cw, where, "class_weight", 1, f"({K},), one weight per state")
    if arr.shape != (K,) or np.any(arr <= 0):
        raise ValueError(f"{where}: class_weight must be {K} positive floats (one per state), got shape {arr.shape}"
                         + ("" if arr.shape != (K,) else " with an entry <= 0"))
    return arr


def _edges_of(V: int, edges: Any, where: str) -> _I64:
    """A general graph's edges: (E, 2) int64, no self-loop, each pair once (`check_graph`)."""
    return check_graph(V, edges, f"{where}: edges")


def _cut_edges(V: int, edges: Any, where: str) -> _I64:
    """A cut model's edges: (E, 2) int64 nodes in 0..V-1, no self-loop (a pair may repeat: its costs add)."""
    e = _array(edges, where, "edges")
    if e.size == 0 and (e.ndim != 2 or e.shape[1] != 2):
        e = e.reshape(0, 2)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"{where}: edges must have shape (E, 2), got {e.shape}")
    if e.size and e.dtype.kind not in "iu":
        raise ValueError(f"{where}: edges must hold integer node indices, got dtype {e.dtype}")
    e = np.ascontiguousarray(e, dtype=np.int64)
    bad = np.flatnonzero(((e < 0) | (e >= V)).any(axis=1))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"{where}: edges[{j}] = ({e[j, 0]}, {e[j, 1]}) refers to a node outside 0..{V - 1}")
    loops = np.flatnonzero(e[:, 0] == e[:, 1])
    if loops.size:
        j = int(loops[0])
        raise ValueError(f"{where}: edges[{j}] = ({e[j, 0]}, {e[j, 1]}) is a self-loop")
    return e


def _finish(y: Any, value: float, bound: float, truth: float, exact: bool, y_true: Any,
            grad: Callable[[Any], tuple[_F64, ...]]) -> HingeResult:
    """The result, with y_true in place of a labelling that scores below it (an approximate
    back-end's, or an exact one's at a tie broken by rounding), so that the hinge is >= 0."""
    if value < truth:
        y = y_true.copy() if isinstance(y_true, np.ndarray) else y_true
        value = truth
    return HingeResult(y, float(value), float(max(bound, value)), float(truth), grad(y), bool(exact))


@njit(cache=True, nogil=True)
def _node_grad(y, y_true, K):
    """1[y_v = k] - 1[y_true_v = k] as (V, K)."""
    V = y.shape[0]
    d = np.zeros((V, K))
    for v in range(V):
        d[v, y[v]] += 1.0
        d[v, y_true[v]] -= 1.0
    return d


@njit(cache=True, nogil=True)
def _cut_grad(y, y_true, tails, heads):
    """d/dc_e of -sum_e c_e [y cuts e] + sum_e c_e [y_true cuts e]."""
    E = tails.shape[0]
    d = np.zeros(E)
    for e in range(E):
        if y[tails[e]] != y[heads[e]]:
            d[e] -= 1.0
        if y_true[tails[e]] != y_true[heads[e]]:
            d[e] += 1.0
    return d


# ====================================================================== chain
@njit(cache=True, nogil=True)
def _chain_search(U, P, y_true, a):
    """(y, value, truth) of max_y sum_l a_l [y_l != y_true_l] + s(y); ``a`` empty: the normalised
    Hamming loss (1/L per position, the arithmetic of the chain model's oracle)."""
    L, K = U.shape
    V = np.empty((L, K))
    if a.shape[0] == 0:
        loss_augmented_into(V, U, y_true)
    else:
        for t in range(L):
            for k in range(K):
                V[t, k] = U[t, k]
        add_node_loss_weights(V, y_true, a)
    y = np.empty(L, np.int64)
    viterbi_into(V, P, np.empty((L, K)), np.empty(K), y)
    flat = P.reshape(K * K)
    # the loss adds nothing at y_true's states, so V scores y_true as U does
    return y, labelling_score(V, flat, y), labelling_score(V, flat, y_true)


@njit(cache=True, nogil=True)
def _chain_grad(y, y_true, K):
    L = y.shape[0]
    dU = _node_grad(y, y_true, K)
    dP = np.zeros((K, K))
    for t in range(L - 1):
        dP[y[t], y[t + 1]] += 1.0
        dP[y_true[t], y_true[t + 1]] -= 1.0
    return dU, dP


def chain_hinge(unary: npt.ArrayLike, transitions: npt.ArrayLike, y_true: npt.ArrayLike, *, loss_scale: float = 1.0,
                loss_weights: npt.ArrayLike | None = None) -> HingeResult:
    """The structured hinge of a linear chain, by exact Viterbi.

    Parameters
    ----------
    unary : (L, K) array
        unary[l, k], the score of state k at position l.
    transitions : (K, K) array
        transitions[a, b], the score of a -> b between neighbouring positions.
    y_true : (L,) int array
        The true states, in 0..K-1.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    loss_weights : (L,) array of floats >= 0, optional
        a_l of the weighted loss sum_l a_l [y_l != y_true_l]; default the normalised Hamming
        loss (1/L) sum_l [y_l != y_true_l] of `structfw.models.ChainModel`.

    Returns
    -------
    HingeResult
        y (L,) int64, exact; grad = (1[y*] - 1[y_true] (L, K), transition counts of y* minus
        those of y_true (K, K)).
    """
    where = "chain_hinge"
    U = _potential(unary, where, "unary", 2, "(L, K)")
    L, K = U.shape
    if L < 1 or K < 1:
        raise ValueError(f"{where}: unary must have at least one position and one state, got shape {U.shape}")
    P = _shaped(transitions, where, "transitions", (K, K), "(K, K)", f"unary of shape {U.shape}")
    yt = _labels(y_true, where, "y_true", (L,), 0, K - 1)
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    if loss_weights is None:
        a = _EMPTY_F if scale == 1.0 else np.full(L, scale / L)
    else:
        a = _node_weights(loss_weights, where, "loss_weights", L)
        a = a * scale if scale != 1.0 else a
    y, value, truth = _chain_search(U, P, yt, a)
    return _finish(y, value, value, truth, True, yt, lambda z: _chain_grad(z, yt, K))


# ====================================================================== multiclass
def multiclass_hinge(scores: npt.ArrayLike, y_true: int, *, loss_scale: float = 1.0,
                     class_weight: npt.ArrayLike | None = None) -> HingeResult:
    """The structured hinge of a K-way classification: max_k c [k != y_true] + s_k - s_{y_true}.

    Parameters
    ----------
    scores : (K,) array
        The class scores.
    y_true : int
        The true class, in 0..K-1.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    class_weight : (K,) array of positive floats, optional
        The loss of an example of class k is ``class_weight[k] * [y != k]`` (the 0-1 loss of
        `structfw.models.MulticlassModel` by default), so c = loss_scale class_weight[y_true].

    Returns
    -------
    HingeResult
        y an int, exact; grad = (e_{y*} - e_{y_true} (K,),).
    """
    where = "multiclass_hinge"
    s = _potential(scores, where, "scores", 1, "(K,)")
    K = s.shape[0]
    if K < 1:
        raise ValueError(f"{where}: scores must have at least one class, got shape {s.shape}")
    yt = _class_label(y_true, where, K)
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    c = scale if class_weight is None else scale * float(_class_weight(class_weight, where, K)[yt])
    k = int(weighted_augmented_argmax(s, yt, c))
    value = float(s[k] + (c if k != yt else 0.0))

    def grad(z: int) -> tuple[_F64, ...]:
        g = np.zeros(K)
        g[z] += 1.0
        g[yt] -= 1.0
        return (g,)
    return _finish(k, value, value, float(s[yt]), True, yt, grad)


# ====================================================================== general graphs
#: the back-ends of `graph_hinge` (and of `structfw.models.GraphModel`'s ``inference``)
GRAPH_INFERENCE = ("tree", "exhaustive", "trws", "lp", "qpbo")
_EXACT = ("tree", "exhaustive")
_LOOPY_FUNCTIONS = {"trws": "trws", "lp": "lp_relaxation", "qpbo": "qpbo"}


class _BadOption(ValueError):
    """An option's value is not what its back-end takes (the message says what it takes)."""


def _int_option(lo: int, hi: int | None) -> Callable[[object], object]:
    def check(v: object) -> object:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo or (
                hi is not None and v > hi):
            raise _BadOption(f"an integer in [{lo}, {'inf' if hi is None else hi}]")
        return int(v)
    return check


def _real_option(lo: float, hi: float | None) -> Callable[[object], object]:
    def check(v: object) -> object:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) or not (
                np.isfinite(v) and v >= lo and (hi is None or v < hi)):
            raise _BadOption(f"a finite number in [{lo}, {'inf' if hi is None else hi})")
        return float(v)
    return check


def _order_option(v: object) -> object:
    """A node order for TRW-S: distinct integers >= 0 (a permutation of each graph's nodes, checked
    against the graph by its caller), kept as a list (a model's config is JSON)."""
    a = np.asarray(v) if isinstance(v, (list, tuple, np.ndarray)) else np.zeros((0, 0))
    if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)) or (a.size and a.min() < 0) \
            or np.unique(a).size != a.size:
        raise _BadOption("a list of distinct node indices >= 0 (a permutation of the nodes of every graph)")
    return [int(t) for t in a]


_MAX_ITER = 10 ** 6  # TRW-S keeps a bound per iteration: a larger count is a typo, and memory
#: the options each back-end takes, each with the check of its value (the value converted, or a
#: ValueError saying what is expected); "tree" and "exhaustive" take none
INFERENCE_OPTIONS: dict[str, dict[str, Callable[[object], object]]] = {
    "trws": {"max_iter": _int_option(1, _MAX_ITER), "tol": _real_option(0.0, None), "icm_sweeps": _int_option(0, None),
             "order": _order_option},
    "lp": {"icm_sweeps": _int_option(0, None), "integral_tol": _real_option(0.0, 1.0)},
    # exhaustive_max: a component of n nodes takes 2^n steps, already minutes at 2^32
    "qpbo": {"exhaustive_max": _int_option(0, 32), "trws_iter": _int_option(1, _MAX_ITER),
             "icm_sweeps": _int_option(0, None)},
}


def check_inference_options(options: object, name: str = "inference_options") -> dict[str, dict[str, Any]]:
    """``options`` as {back-end: {option: value}}, every key and value checked (`INFERENCE_OPTIONS`);
    a ValueError naming ``<name>[back-end][option]`` otherwise.  None is no options."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"{name} must be a dict {{back-end: {{option: value}}}}, got {options!r}")
    out: dict[str, dict[str, Any]] = {}
    for backend, kw in options.items():
        if backend not in GRAPH_INFERENCE:
            raise ValueError(f"{name} has an entry for {backend!r}, which is not a back-end "
                             f"(one of {GRAPH_INFERENCE})")
        if not isinstance(kw, Mapping) or not all(isinstance(k, str) for k in kw):
            raise ValueError(f"{name}[{backend!r}] must be a dict of keyword arguments, got {kw!r}")
        if kw and backend in _EXACT:
            raise ValueError(f"{name}[{backend!r}]: the {backend!r} back-end takes no options, got {kw!r}")
        known = INFERENCE_OPTIONS.get(backend, {})
        out[backend] = {}
        for key, value in kw.items():
            if key not in known:
                raise ValueError(f"{name}[{backend!r}] has the option {key!r}, which the {backend!r} back-end "
                                 f"does not take (it takes {sorted(known)})")
            try:
                out[backend][key] = known[key](value)
            except _BadOption as exc:
                raise ValueError(f"{name}[{backend!r}][{key!r}] must be {exc}, got {value!r}") from None
    return out


def is_submodular(pairwise: _F64) -> bool:
    """True when every (E, 2, 2) pairwise term of a maximisation is submodular:
    theta(0,0) + theta(1,1) >= theta(0,1) + theta(1,0) (QPBO is then exact)."""
    P = pairwise
    return bool(np.all(P[:, 0, 0] + P[:, 1, 1] >= P[:, 0, 1] + P[:, 1, 0]))


def _loopy_backend(name: str) -> Callable[..., tuple[_I64, float, float]]:
    """The back-end function of `structfw.oracles.loopy` (imported on first use)."""
    try:
        from . import loopy
    except ImportError as exc:  # pragma: no cover - a broken installation
        raise ImportError(f"inference {name!r} needs the loopy back-ends of structfw.oracles.loopy, which "
                          f"could not be imported: {exc}") from exc
    fn: Callable[..., tuple[_I64, float, float]] = getattr(loopy, _LOOPY_FUNCTIONS[name])
    return fn


def graph_backend(inference: str, schedule: TreeSchedule | None, pairwise: _F64 | None) -> str:
    """The back-end ``inference`` means for a graph: "auto" is max-product on a forest (a
    ``schedule``), QPBO for K = 2 with submodular ``pairwise`` terms (exact then), TRW-S
    otherwise; any other name is itself.  ``pairwise`` may be None when the graph is a forest."""
    if inference != "auto":
        return inference
    if schedule is not None:
        return "tree"
    if pairwise is None:
        raise ValueError("graph_backend: inference='auto' on a graph with a cycle needs its pairwise terms")
    return "qpbo" if pairwise.shape[1] == 2 and is_submodular(pairwise) else "trws"


def graph_maximise(unary: _F64, edges: _I64, pairwise: _F64, inference: str, options: Mapping[str, Mapping[str, Any]],
                   schedule: TreeSchedule | None) -> tuple[_I64, float, float, bool]:
    """(labels, value, bound, exact) of max_y E(y) by the back-end ``inference`` means
    (`graph_backend`); ``schedule`` is the graph's `forest_schedule` (None: it has a cycle).
    ``exact`` is True for the exact back-ends (tree, exhaustive) only."""
    mode = graph_backend(inference, schedule, pairwise)
    if mode == "tree":
        if schedule is None:
            raise ValueError("inference='tree' needs a forest, but this graph has a cycle; "
                             "use inference='auto' or a loopy back-end")
        y, value, bound = tree_max_product(unary, edges, pairwise, schedule=schedule)
        return y, value, bound, True
    if mode == "exhaustive":
        y, value, bound = exhaustive(unary, edges, pairwise)
        return y, value, bound, True
    y, value, bound = _loopy_backend(mode)(unary, edges, pairwise, **options.get(mode, {}))
    return np.ascontiguousarray(y, dtype=np.int64), float(value), float(bound), False


def graph_node_coefficients(y_true: _I64, class_weight: _F64 | None,
                            node_weights: _F64 | None) -> float | _F64:
    """c_v, the share of node v in the graph loss (they sum to 1): omega_v cw[y_v] / sum_u omega_u cw[y_u]
    (1/V, a float, without class or node weights; an empty ``class_weight`` is none)."""
    has_cw = class_weight is not None and class_weight.shape[0] > 0
    if not has_cw and node_weights is None:
        return 1.0 / y_true.shape[0]
    c = np.ones(y_true.shape[0]) if class_weight is None or not has_cw else class_weight[y_true]
    if node_weights is not None:
        c = c * node_weights
    total = c.sum()
    if not total > 0:
        raise ValueError("the node weights of this example give its labelled classes no weight "
                         "(sum of node_weights * class_weight[y] is 0): its loss is undefined")
    return np.asarray(c / total)


def add_graph_loss(unary: _F64, y_true: _I64, class_weight: _F64 | None, node_weights: _F64 | None,
                   scale: float) -> _F64:
    """unary + scale c_v [k != y_true_v] in place (c_v of `graph_node_coefficients`): the graph
    loss as unary terms.  ``class_weight`` None or empty means none."""
    if node_weights is None:
        cw = _EMPTY_F if class_weight is None else class_weight
        return np.asarray(add_node_loss(unary, y_true, cw, float(scale)))
    c = np.asarray(graph_node_coefficients(y_true, class_weight, node_weights))
    return np.asarray(add_node_loss_weights(unary, y_true, scale * c if scale != 1.0 else c))


def graph_search(unary: _F64, edges: _I64, pairwise: _F64, y_true: _I64, class_weight: _F64 | None,
                 node_weights: _F64 | None, scale: float, inference: str, options: Mapping[str, Mapping[str, Any]],
                 schedule: TreeSchedule | None, truth: bool = True) -> tuple[_I64, float, float, float, bool]:
    """(y, value, bound, s(y_true), exact) of the loss-augmented graph oracle, unchecked.

    ``unary`` is augmented in place (`add_graph_loss`), then maximised (`graph_maximise`).  The
    truth is scored when ``truth`` or when the back-end is approximate (NaN otherwise); a labelling
    scoring below it is replaced by y_true."""
    if node_weights is None:  # the common case without the wrappers' calls (a tree's oracle takes a few us)
        add_node_loss(unary, y_true, _EMPTY_F if class_weight is None else class_weight, float(scale))
    else:
        add_graph_loss(unary, y_true, class_weight, node_weights, scale)
    if schedule is not None and (inference == "auto" or inference == "tree"):
        y, value, bound = tree_max_product(unary, edges, pairwise, schedule=schedule)
        exact = True
    else:
        y, value, bound, exact = graph_maximise(unary, edges, pairwise, inference, options, schedule)
    t = float("nan")
    if truth or not exact:
        t = float(energy(unary, edges, pairwise, y_true))
        if value < t:
            y, value = y_true.copy(), t
    return y, value, bound, t, exact


@njit(cache=True, nogil=True)
def _graph_grad(y, y_true, edges, K):
    E = edges.shape[0]
    dP = np.zeros((E, K, K))
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        dP[e, y[u], y[v]] += 1.0
        dP[e, y_true[u], y_true[v]] -= 1.0
    return _node_grad(y, y_true, K), dP


def _check_inference(inference: Any, where: str, V: int, K: int) -> str:
    if not isinstance(inference, str) or (inference != "auto" and inference not in GRAPH_INFERENCE):
        raise ValueError(f"{where}: inference must be 'auto' or one of {GRAPH_INFERENCE}, got {inference!r}")
    if inference == "qpbo" and K != 2:
        raise ValueError(f"{where}: inference='qpbo' needs K = 2 states, got unary with K = {K}")
    if inference == "exhaustive" and V * np.log2(K) > np.log2(EXHAUSTIVE_LIMIT) + 1e-9:
        raise ValueError(f"{where}: inference='exhaustive' would enumerate K^V = {K}^{V} labellings, more than 2^20")
    return inference


def graph_hinge(unary: npt.ArrayLike, edges: npt.ArrayLike, pairwise: npt.ArrayLike, y_true: npt.ArrayLike, *,
                inference: str = "auto", loss_scale: float = 1.0, class_weight: npt.ArrayLike | None = None,
                node_weights: npt.ArrayLike | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> HingeResult:
    """The structured hinge of a pairwise model on any graph (`structfw.models.GraphModel`'s oracle).

    s(y) = sum_v unary[v, y_v] + sum_e pairwise[e, y_{u_e}, y_{v_e}], (u_e, v_e) = edges[e];
    Delta = loss_scale sum_v c_v [y_v != y_true_v] with c_v = omega_v cw[y_true_v] / sum_u omega_u
    cw[y_true_u] (the normalised Hamming loss without weights).

    Parameters
    ----------
    unary : (V, K) array
        Node scores.
    edges : (E, 2) int array
        Each unordered pair of distinct nodes at most once.
    pairwise : (E, K, K) array
        pairwise[e, a, b], the score of y_{u_e} = a, y_{v_e} = b.
    y_true : (V,) int array
        The true states, in 0..K-1.
    inference : {"auto", "tree", "exhaustive", "trws", "lp", "qpbo"}, default "auto"
        The back-end, as `structfw.models.GraphModel` takes it: "auto" is max-product on a
        forest, QPBO for K = 2 and submodular pairwise terms, TRW-S otherwise.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    class_weight : (K,) array of positive floats, optional
        cw, the weights of the classes in the loss.
    node_weights : (V,) array of floats >= 0, optional
        omega, the weights of the nodes in the loss.
    options : dict, optional
        The back-ends' keyword arguments by back-end name, e.g. ``{"trws": {"max_iter": 200}}``
        (`INFERENCE_OPTIONS`).

    Returns
    -------
    HingeResult
        y (V,) int64; exact for the tree and exhaustive back-ends, and for a loopy one whose
        bound meets its value; bound is the loopy back-end's (TRW-S's dual, the LP's, QPBO's);
        grad = (1[y*] - 1[y_true] (V, K), pair indicators of y* minus those of y_true (E, K, K)).
    """
    where = "graph_hinge"
    U = _potential(unary, where, "unary", 2, "(V, K)")
    V, K = U.shape
    if V < 1 or K < 1:
        raise ValueError(f"{where}: unary must have at least one node and one state, got shape {U.shape}")
    e = _edges_of(V, edges, where)
    P = _shaped(pairwise, where, "pairwise", (e.shape[0], K, K), "(E, K, K)",
                f"unary of shape {U.shape} and {e.shape[0]} edges")
    yt = _labels(y_true, where, "y_true", (V,), 0, K - 1)
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    cw = _EMPTY_F if class_weight is None else _class_weight(class_weight, where, K)
    omega = None if node_weights is None else _node_weights(node_weights, where, "node_weights", V)
    if omega is not None and not float((omega * (cw[yt] if cw.size else 1.0)).sum()) > 0:
        raise ValueError(f"{where}: node_weights give the nodes no weight in the loss (their weighted sum is 0)")
    mode = _check_inference(inference, where, V, K)
    opts = check_inference_options(options, f"{where}: options")
    order = opts.get("trws", {}).get("order")
    if order is not None and sorted(order) != list(range(V)):
        raise ValueError(f"{where}: options['trws']['order'] must be a permutation of the {V} nodes, "
                         f"got {len(order)} entries")
    schedule = forest_schedule(V, e)
    if mode == "tree" and schedule is None:
        raise ValueError(f"{where}: inference='tree' needs a forest, but edges contain a cycle; "
                         "use inference='auto' or a loopy back-end")
    y, value, bound, truth, exact = graph_search(U.copy(), e, P, yt, cw, omega, scale, mode, opts, schedule)
    return _finish(y, value, bound, truth, exact or bound <= value, yt, lambda z: _graph_grad(z, yt, e, K))


# ====================================================================== cut models (graph cut, Potts)
@njit(cache=True, nogil=True)
def node_loss(U, y_true, a, scale):
    """U[v, k] += scale a_v for k != y_true[v], in place (``a`` empty: a_v = 1/V, the normalised
    Hamming loss): the loss of the cut models (`structfw.models.GraphCutModel`, `PottsModel`)."""
    if a.shape[0] == 0:
        return add_node_loss(U, y_true, a, scale)
    return add_node_loss_weights(U, y_true, a if scale == 1.0 else scale * a)


@njit(cache=True, nogil=True)
def _graph_cut_numba(U, tails, heads, c, y_true, a, scale):
    node_loss(U, y_true, a, scale)
    y = binary_graph_cut(U, tails, heads, c)
    return y, potts_score(U, tails, heads, c, y), potts_score(U, tails, heads, c, y_true)


def graph_cut_maximise(unary: _F64, tails: _I64, heads: _I64, costs: _F64, backend: str = "auto") -> _I64:
    """argmax over y in {0, 1}^V of sum_v unary[v, y_v] - sum_e c_e [y cuts e] (c_e >= 0): one
    exact min cut by the max-flow ``backend`` ("auto" and "numba": the numba kernel)."""
    if backend in ("auto", "numba"):
        return np.asarray(binary_graph_cut(unary, tails, heads, costs))
    y, _ = min_cut(-unary[:, 0], -unary[:, 1], np.stack([tails, heads], 1), costs, backend=backend)
    return np.ascontiguousarray(y, dtype=np.int64)


def graph_cut_search(unary: _F64, tails: _I64, heads: _I64, costs: _F64, y_true: _I64, a: _F64, scale: float,
                     backend: str = "auto") -> tuple[_I64, float, float]:
    """(y, value, s(y_true)) of the loss-augmented binary cut oracle, unchecked: ``unary`` (V, 2)
    augmented in place (`node_loss`), then `graph_cut_maximise`."""
    if backend in ("auto", "numba"):  # one compiled call, the GIL released throughout
        y, value, truth = _graph_cut_numba(unary, tails, heads, costs, y_true, a, scale)
        return y, float(value), float(truth)
    node_loss(unary, y_true, a, scale)
    y = graph_cut_maximise(unary, tails, heads, costs, backend)
    return y, float(potts_score(unary, tails, heads, costs, y)), float(potts_score(unary, tails, heads, costs, y_true))


def _cut_arguments(where: str, unary: Any, edges: Any, edge_costs: Any, y_true: Any, loss_scale: Any,
                   loss_weights: Any, K: int | None
                   ) -> tuple[_F64, _I64, _F64, _I64, _F64, float]:
    """The checked (unary, edges (E, 2), costs, y_true, a, scale) of the cut families."""
    form = "(V, 2)" if K == 2 else "(V, K)"
    U = _potential(unary, where, "unary", 2, form)
    V, k = U.shape
    if V < 1 or k < 1 or (K is not None and k != K):
        raise ValueError(f"{where}: unary must be {form} with V >= 1, got shape {U.shape}")
    e = _cut_edges(V, edges, where)
    c = _shaped(edge_costs, where, "edge_costs", (e.shape[0],), "(E,)", f"{e.shape[0]} edges")
    if c.size and c.min() < 0:
        j = int(np.argmin(c))
        raise ValueError(f"{where}: edge_costs must be >= 0 (the cut is then exact / the Potts term a metric), "
                         f"got edge_costs[{j}] = {c[j]:.4g}")
    yt = _labels(y_true, where, "y_true", (V,), 0, k - 1)
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    a = _EMPTY_F if loss_weights is None else _node_weights(loss_weights, where, "loss_weights", V)
    return U.copy(), e, c, yt, a, scale


def graph_cut_hinge(unary: npt.ArrayLike, edges: npt.ArrayLike, edge_costs: npt.ArrayLike, y_true: npt.ArrayLike, *,
                    loss_scale: float = 1.0, loss_weights: npt.ArrayLike | None = None,
                    backend: str = "auto") -> HingeResult:
    """The structured hinge of a binary labelling with cut costs, by one exact min cut
    (`structfw.models.GraphCutModel`'s oracle).

    s(y) = sum_v unary[v, y_v] - sum_e c_e [y_{u_e} != y_{v_e}] with c_e >= 0; Delta = loss_scale
    sum_v a_v [y_v != y_true_v], a_v = 1/V (the normalised Hamming loss) unless given.

    Parameters
    ----------
    unary : (V, 2) array
        Node scores of the labels 0 and 1.
    edges : (E, 2) int array
        Each unordered pair of distinct nodes at most once.
    edge_costs : (E,) array of floats >= 0
        c_e, charged when the labelling cuts edge e.
    y_true : (V,) int array of 0 and 1
        The true labels.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    loss_weights : (V,) array of floats >= 0, optional
        a_v of the weighted loss.
    backend : {"auto", "numba", "pymaxflow", "ortools", "scipy"}, default "auto"
        The max-flow back-end (`structfw.oracles.maxflow`); "auto" is the numba kernel (which
        releases the GIL).

    Returns
    -------
    HingeResult
        y (V,) int64, exact; grad = (1[y*] - 1[y_true] (V, 2), [y_true cuts e] - [y* cuts e] (E,)).
    """
    where = "graph_cut_hinge"
    if not isinstance(backend, str) or (backend != "auto" and backend not in MAXFLOW_BACKENDS):
        raise ValueError(f"{where}: backend must be 'auto' or one of {MAXFLOW_BACKENDS}, got {backend!r}")
    U, e, c, yt, a, scale = _cut_arguments(where, unary, edges, edge_costs, y_true, loss_scale, loss_weights, 2)
    tails, heads = np.ascontiguousarray(e[:, 0]), np.ascontiguousarray(e[:, 1])
    y, value, truth = graph_cut_search(U, tails, heads, c, yt, a, scale, backend)
    return _finish(y, value, value, truth, True, yt,
                   lambda z: (_node_grad(z, yt, 2), _cut_grad(z, yt, tails, heads)))


@njit(cache=True, nogil=True)
def _potts_numba(U, tails, heads, c, y_true, a, scale, max_cycles):
    node_loss(U, y_true, a, scale)
    y, s = alpha_expansion(U, tails, heads, c, unary_argmax(U), max_cycles)
    t = potts_score(U, tails, heads, c, y_true)
    if s < t:
        return y_true.copy(), t, t
    return y, s, t


def potts_search(unary: _F64, tails: _I64, heads: _I64, costs: _F64, y_true: _I64, a: _F64, scale: float,
                 max_cycles: int) -> tuple[_I64, float, float]:
    """(y, value, s(y_true)) of the loss-augmented Potts oracle, unchecked: ``unary`` augmented in
    place (`node_loss`), alpha-expansion from its argmax (c_e >= 0), y_true when that ends below it."""
    y, value, truth = _potts_numba(unary, tails, heads, costs, y_true, a, scale, max_cycles)
    return y, float(value), float(truth)


def potts_certificate(unary: _F64, tails: _I64, heads: _I64, costs: _F64, y: _I64) -> tuple[_I64, float]:
    """(the better of y and TRW-S's labelling, TRW-S's bound) on the Potts score of ``unary`` and
    the edge ``costs`` (any sign): the bound of the local-polytope relaxation's dual."""
    from .loopy import trws

    K = unary.shape[1]
    pairwise = np.ascontiguousarray(-costs[:, None, None] * (1.0 - np.eye(K))[None])
    edges = np.ascontiguousarray(np.stack([tails, heads], axis=1))
    y_t, _, bound = trws(np.ascontiguousarray(unary), edges, pairwise)
    if potts_score(unary, tails, heads, costs, y_t) > potts_score(unary, tails, heads, costs, y):
        y = y_t
    return y, float(bound)


def potts_hinge(unary: npt.ArrayLike, edges: npt.ArrayLike, edge_costs: npt.ArrayLike, y_true: npt.ArrayLike, *,
                loss_scale: float = 1.0, loss_weights: npt.ArrayLike | None = None, max_cycles: int = 10,
                certify: bool = False) -> HingeResult:
    """The structured hinge of a K-label Potts model, by alpha-expansion (`structfw.models.PottsModel`'s
    oracle).

    s(y) = sum_v unary[v, y_v] - sum_e c_e [y_{u_e} != y_{v_e}] with c_e >= 0; Delta = loss_scale
    sum_v a_v [y_v != y_true_v], a_v = 1/V unless given.

    Parameters
    ----------
    unary : (V, K) array
        Node scores.
    edges : (E, 2) int array
        Each unordered pair of distinct nodes at most once.
    edge_costs : (E,) array of floats >= 0
        c_e, the Potts weight of edge e.
    y_true : (V,) int array
        The true states, in 0..K-1.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    loss_weights : (V,) array of floats >= 0, optional
        a_v of the weighted loss.
    max_cycles : int >= 1, default 10
        Alpha-expansion cycles over the K labels at most.
    certify : bool, default False
        Also run TRW-S: its bound becomes ``bound`` (else +inf) and its labelling is taken when it
        scores higher.

    Returns
    -------
    HingeResult
        y (V,) int64; exact only when certified (the bound meets the value); grad =
        (1[y*] - 1[y_true] (V, K), [y_true cuts e] - [y* cuts e] (E,)).
    """
    where = "potts_hinge"
    cycles = _int_at_least(max_cycles, where, "max_cycles", 1)
    if not isinstance(certify, (bool, np.bool_)):
        raise ValueError(f"{where}: certify must be True or False, got {certify!r}")
    U, e, c, yt, a, scale = _cut_arguments(where, unary, edges, edge_costs, y_true, loss_scale, loss_weights, None)
    tails, heads = np.ascontiguousarray(e[:, 0]), np.ascontiguousarray(e[:, 1])
    y, value, truth = potts_search(U, tails, heads, c, yt, a, scale, cycles)
    bound = float("inf")
    if certify:
        y, bound = potts_certificate(U, tails, heads, c, y)
        value = float(potts_score(U, tails, heads, c, y))
    K = U.shape[1]
    return _finish(y, value, bound, truth, bound <= value, yt,
                   lambda z: (_node_grad(z, yt, K), _cut_grad(z, yt, tails, heads)))


# ====================================================================== matching
@njit(cache=True, nogil=True)
def _matching_augment(S, y_true, scale, fn_cost):
    """The loss bonuses added to S in place; returns the loss's constant part (the missed true
    edges' cost when nothing is chosen), so that Delta(y_true, y) = const + sum of y's bonuses."""
    ms = S.shape[0]
    if scale <= 0.0:
        return 0.0
    norm = (1.0 + fn_cost) * ms
    if scale != 1.0:
        norm = norm / scale
    _add_hamming_bonus(S, y_true, fn_cost, norm)
    n_true = 0
    for j in range(ms):
        if y_true[j] >= 0:
            n_true += 1
    return fn_cost * n_true / norm


def matching_search(scores: _F64, y_true: _I64, scale: float, fn_cost: float) -> tuple[_I64, float, float]:
    """(y, value, s(y_true)) of the loss-augmented matching oracle, unchecked: the loss bonuses added
    to ``scores`` (m_s, m_t) in place, then one exact assignment
    (`structfw.oracles.matching.max_weight_partial_matching`, scipy's linear_sum_assignment: a
    well-kept solver, preferred to an assignment written here although it holds the GIL, so a
    batch of matchings does not run in parallel threads)."""
    const = float(_matching_augment(scores, y_true, float(scale), float(fn_cost)))
    y = max_weight_partial_matching(scores)
    return y, const + matching_value(scores, y), const + matching_value(scores, y_true)


@njit(cache=True, nogil=True)
def _matching_grad(y, y_true, mt):
    ms = y.shape[0]
    d = np.zeros((ms, mt))
    for j in range(ms):
        if y[j] >= 0:
            d[j, y[j]] += 1.0
        if y_true[j] >= 0:
            d[j, y_true[j]] -= 1.0
    return d


def matching_hinge(edge_scores: npt.ArrayLike, y_true: npt.ArrayLike, *, loss_scale: float = 1.0,
                   fn_cost: float = 1.0) -> HingeResult:
    """The structured hinge of a one-to-one partial matching (`structfw.models.MatchingModel`'s oracle).

    s(y) = sum_{j : y_j >= 0} edge_scores[j, y_j]; Delta = loss_scale (fn_cost |E_true minus E| +
    |E minus E_true|) / ((1 + fn_cost) m_s), the model's edge Hamming loss.

    Parameters
    ----------
    edge_scores : (m_s, m_t) array
        The score of aligning source j to target k.
    y_true : (m_s,) int array
        The true alignment: a target in 0..m_t-1 or -1 (null) per source, no target twice.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    fn_cost : float > 0, default 1.0
        The cost of a missed true edge relative to a spurious one (`MatchingModel`'s default).

    Returns
    -------
    HingeResult
        y (m_s,) int64 (-1 = null), exact; grad = (edge indicators of y* minus those of y_true
        (m_s, m_t),).
    """
    where = "matching_hinge"
    S = _potential(edge_scores, where, "edge_scores", 2, "(m_s, m_t)")
    ms, mt = S.shape
    if ms < 1 or mt < 1:
        raise ValueError(f"{where}: edge_scores must have at least one source and one target, got shape {S.shape}")
    yt = _labels(y_true, where, "y_true", (ms,), -1, mt - 1)
    linked = yt[yt >= 0]
    if np.unique(linked).size != linked.size:
        vals, counts = np.unique(linked, return_counts=True)
        raise ValueError(f"{where}: y_true aligns target {int(vals[counts > 1][0])} to more than one source "
                         "(alignments are one-to-one)")
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    fn = _real(fn_cost, where, "fn_cost", 0.0, strict=True)
    y, value, truth = matching_search(S.copy(), yt, scale, fn)
    return _finish(y, value, value, truth, True, yt, lambda z: (_matching_grad(z, yt, mt),))


# ====================================================================== pose (tree of parts)
@njit(cache=True, nogil=True)
def pose_loss(S, y_true, tol2, scale):
    """S[p, r, c] += scale / P where (r, c) is farther than sqrt(tol2) cells from y_true[p], in
    place: the pose loss (the fraction of misplaced parts) as unary terms."""
    P, H, W = S.shape
    c = scale * (1.0 / P)
    for p in range(P):
        r0 = y_true[p, 0]
        c0 = y_true[p, 1]
        for r in range(H):
            dr = r - r0
            for q in range(W):
                dc = q - c0
                if dr * dr + dc * dc > tol2:
                    S[p, r, q] += c
    return S


def pose_grid_coefficients(springs: _F64, displacement_scale: float) -> _F64:
    """The springs (a, b, c, d) per part in units of ``displacement_scale`` s as coefficients per grid
    cell of offset, (a/s^2, b/s, c/s^2, d/s): what `structfw.oracles.pose` maximises with."""
    s = displacement_scale
    return np.asarray(springs * np.array([1.0 / (s * s), 1.0 / s, 1.0 / (s * s), 1.0 / s]))


def pose_search(unary: _F64, parent: _I64, order: _I64, coef: _F64, y_true: _I64, tolerance: float, scale: float,
                brute: bool = False) -> tuple[_I64, float, float]:
    """(y, value, s(y_true)) of the loss-augmented pose oracle, unchecked: ``unary`` (P, H, W)
    augmented in place (`pose_loss`), then exact max-product on the tree of parts with the grid
    ``coef`` (P, 4) (`structfw.oracles.pose.pose_max_product`)."""
    pose_loss(unary, y_true, tolerance ** 2, float(scale))
    y, value = pose_max_product(unary, parent, coef, order, brute=brute)
    return y, float(value), float(pose_energy(unary, parent, coef, y_true))


@njit(cache=True, nogil=True)
def _pose_grad(y, y_true, parent, H, W, s):
    P = y.shape[0]
    dS = np.zeros((P, H, W))
    dC = np.zeros((P, 4))
    for p in range(P):
        dS[p, y[p, 0], y[p, 1]] += 1.0
        dS[p, y_true[p, 0], y_true[p, 1]] -= 1.0
        r = parent[p]
        if r < 0:
            continue
        # the spring's joint feature is -(dx^2, dx, dy^2, dy), offsets in units of s
        dy = (y[p, 0] - y[r, 0]) / s
        dx = (y[p, 1] - y[r, 1]) / s
        ty = (y_true[p, 0] - y_true[r, 0]) / s
        tx = (y_true[p, 1] - y_true[r, 1]) / s
        dC[p, 0] = tx * tx - dx * dx
        dC[p, 1] = tx - dx
        dC[p, 2] = ty * ty - dy * dy
        dC[p, 3] = ty - dy
    return dS, dC


def _check_tree(parent: Any, where: str, P: int) -> _I64:
    """parent as int64 (P,): one root (-1), parents in 0..P-1 other than the part, no cycle."""
    arr = _labels(parent, where, "parent", (P,), -1, P - 1)
    roots = np.flatnonzero(arr == -1)
    if roots.size != 1:
        raise ValueError(f"{where}: parent must have exactly one root (-1), got {roots.size}: {arr.tolist()}")
    own = np.flatnonzero(arr == np.arange(P))
    if own.size:
        raise ValueError(f"{where}: parent[{int(own[0])}] is the part itself")
    child = np.flatnonzero(arr >= 0)
    if forest_schedule(P, np.stack([arr[child], child], 1)) is None:
        raise ValueError(f"{where}: parent {arr.tolist()} has a cycle: it must describe a tree")
    return arr


def pose_hinge(unary: npt.ArrayLike, parent: npt.ArrayLike, springs: npt.ArrayLike, y_true: npt.ArrayLike, *,
               loss_scale: float = 1.0, tolerance: float = 2.0, displacement_scale: float = 1.0,
               inference: str = "dt") -> HingeResult:
    """The structured hinge of a pictorial structure, by exact max-product on the tree of parts
    (`structfw.models.PoseModel`'s oracle).

    s(y) = sum_p unary[p, y_p] - sum_{p != root} (a_p dx_p^2 + b_p dx_p + c_p dy_p^2 + d_p dy_p)
    with (dy_p, dx_p) = (y_p - y_parent(p)) / s, (a_p, b_p, c_p, d_p) = springs[p];
    Delta = loss_scale (1/P) sum_p [||y_p - y_true_p|| > tolerance].

    Parameters
    ----------
    unary : (P, H, W) array
        unary[p, row, col], the score of part p at grid position (row, col).
    parent : (P,) int array
        The tree: parent[p] is the part p hangs from, -1 for the single root.
    springs : (P, 4) array
        (a_p, b_p, c_p, d_p) of part p's spring to its parent, as `PoseModel.spring_weights` gives
        them (the root's row is ignored; a_p, c_p >= 0 take the fast distance transforms, any sign
        is exact).
    y_true : (P, 2) int array
        The true (row, col) of every part.
    loss_scale : float >= 0, default 1.0
        Multiplies the loss.
    tolerance : float >= 0, default 2.0
        A part is misplaced when farther than this many cells from the truth.
    displacement_scale : float > 0, default 1.0
        s, the unit of the offsets.
    inference : {"dt", "brute"}, default "dt"
        Messages by distance transforms or by brute force (both exact).

    Returns
    -------
    HingeResult
        y (P, 2) int64, exact; grad = (1[y*] - 1[y_true] (P, H, W), the spring features
        -(dx^2, dx, dy^2, dy) of y* minus those of y_true (P, 4), zero for the root).
    """
    where = "pose_hinge"
    S = _potential(unary, where, "unary", 3, "(P, H, W)")
    P, H, W = S.shape
    if P < 1 or H < 1 or W < 1:
        raise ValueError(f"{where}: unary must be (P, H, W) with P, H, W >= 1, got shape {S.shape}")
    par = _check_tree(parent, where, P)
    springs_ = _shaped(springs, where, "springs", (P, 4), "(P, 4)", f"unary of shape {S.shape}")
    yt = _labels(y_true, where, "y_true", (P, 2), 0, max(H, W) - 1)
    off = np.flatnonzero((yt[:, 0] >= H) | (yt[:, 1] >= W))
    if off.size:
        p = int(off[0])
        raise ValueError(f"{where}: y_true[{p}] = {tuple(yt[p].tolist())} is outside the {H} x {W} grid")
    scale = _real(loss_scale, where, "loss_scale", 0.0)
    tol = _real(tolerance, where, "tolerance", 0.0)
    s = _real(displacement_scale, where, "displacement_scale", 0.0, strict=True)
    if inference not in ("dt", "brute"):
        raise ValueError(f"{where}: inference must be 'dt' or 'brute', got {inference!r}")
    coef = pose_grid_coefficients(springs_, s)
    y, value, truth = pose_search(S.copy(), par, tree_order(par), coef, yt, tol, scale, inference == "brute")
    return _finish(y, value, value, truth, True, yt, lambda z: _pose_grad(z, yt, par, H, W, s))
