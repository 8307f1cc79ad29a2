"""structfw's inference as a max-margin structured layer for PyTorch (``pip install "structfw[torch]"``).

A network produces the potentials theta of a structure (unary scores per position or node,
pairwise scores per transition or edge); the structured hinge

    H(theta; y) = max_y' [Delta(y, y') + s_theta(y')] - s_theta(y)

is the max-margin loss of the structural SVM with the linear scores replaced by theta
(docs/design.md, "Inference on potentials").  Its subgradient with respect to each potential is the
indicator of the maximiser y* minus that of y (1[y*_f] - 1[y_f]), which the potential-level oracles
of `structfw.oracles.potentials` return beside y*.  The oracle runs on the CPU in compiled code (a
batch over a thread pool: the kernels release the GIL); tensors on a GPU are copied to the CPU for
the oracle and their gradients copied back to the tensor's device and dtype.

What is here:

- `chain_hinge`, `structured_hinge`: the hinge of one example (chain; any model family);
- `MaxMarginChain`: the max-margin counterpart of a linear-chain CRF layer (``forward`` = the mean
  hinge of a padded batch, ``decode``, ``score``), with its transitions as a parameter;
- `StructuredHingeLoss`: the hinge of a batch of examples with structures of their own (graphs,
  matchings, poses);
- `chain_crf_nll`: the CRF negative log-likelihood of the same potentials from the project's
  sum-product (`structfw.oracles.marginals`), for comparisons;
- `fit_last_layer`: the last linear layer refitted by structfw's solver on the network's frozen
  features, which certifies that layer with a duality gap (`StructuredSVM.gap_`), and
  `last_layer_weights` to copy it back into the network.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('structfw.torch needs PyTorch: pip install "structfw[torch]"') from exc

from .estimator import StructuredSVM
from .models.chain import ChainModel
from .oracles import potentials as _potentials
from .oracles.chain import viterbi
from .oracles.marginals import chain_marginal_sums

__all__ = ["FAMILIES", "MaxMarginChain", "StructuredHingeLoss", "chain_crf_nll", "chain_hinge", "fit_last_layer",
           "last_layer_weights", "structured_hinge"]

#: model family -> (its potential-level oracle, the names of the potentials it differentiates, in
#: order); the structure (``edges``, a pose's ``parent``) and the options go by keyword
FAMILIES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "chain": (_potentials.chain_hinge, ("unary", "transitions")),          # (L, K), (K, K)
    "multiclass": (_potentials.multiclass_hinge, ("scores",)),             # (K,)
    "graph": (_potentials.graph_hinge, ("unary", "pairwise")),             # (V, K), (E, K, K); edges=
    "graph_cut": (_potentials.graph_cut_hinge, ("unary", "edge_costs")),   # (V, 2), (E,); edges=
    "potts": (_potentials.potts_hinge, ("unary", "edge_costs")),           # (V, K), (E,); edges=
    "matching": (_potentials.matching_hinge, ("edge_scores",)),            # (m_s, m_t)
    "pose": (_potentials.pose_hinge, ("unary", "springs")),                # (P, H, W), (P, 4); parent=
}


# ------------------------------------------------------------------------ checks
def _check_float_tensor(t: Any, name: str, ndim: int | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must be a {ndim}-d tensor, got shape {tuple(t.shape)}")
    return t


def _as_labels(y: Any, name: str) -> npt.NDArray[np.int64]:
    """y as an int64 array on the CPU (a tensor, an array or a list)."""
    if isinstance(y, torch.Tensor):
        if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer labels, got dtype {y.dtype}")
        return np.ascontiguousarray(y.detach().cpu().numpy(), dtype=np.int64)
    arr = np.asarray(y)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer labels, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _to_numpy(t: torch.Tensor) -> npt.NDArray[np.float64]:
    """A float64 C-contiguous copy on the CPU, where the oracles run."""
    return np.ascontiguousarray(t.detach().to("cpu", torch.float64).numpy())


def _like(a: npt.NDArray[np.float64], t: torch.Tensor) -> torch.Tensor:
    """The gradient a on t's device and in t's dtype."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(device=t.device, dtype=t.dtype)


def _lengths_from_mask(mask: Any, B: int, T: int, name: str = "mask") -> npt.NDArray[np.int64]:
    """Sequence lengths of a (B, T) mask whose True entries must be a prefix of each row."""
    if mask is None:
        return np.full(B, T, np.int64)
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(np.asarray(mask))
    if tuple(mask.shape) != (B, T):
        raise ValueError(f"{name} must have shape (B, T) = ({B}, {T}) like emissions' first two axes, "
                         f"got {tuple(mask.shape)}")
    m = mask.detach().cpu().numpy().astype(bool)
    lengths = m.sum(axis=1).astype(np.int64)
    prefix = np.arange(T)[None, :] < lengths[:, None]
    if not np.array_equal(m, prefix):
        bad = int(np.flatnonzero((m != prefix).any(axis=1))[0])
        raise ValueError(f"{name}[{bad}] must be True on a prefix of the sequence and False after it "
                         f"(left-aligned padding)")
    return lengths


def _check_n_jobs(n_jobs: Any) -> int:
    if n_jobs is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise ValueError(f"n_jobs must be None or an int >= 1, got {n_jobs!r}")
    return int(n_jobs)


def _check_reduction(reduction: Any) -> str:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return str(reduction)


def _check_loss_scale(loss_scale: Any) -> float:
    try:
        c = float(loss_scale)
    except (TypeError, ValueError):
        raise TypeError(f"loss_scale must be a real number >= 0, got {loss_scale!r}") from None
    if not (np.isfinite(c) and c >= 0):
        raise ValueError(f"loss_scale must be a finite number >= 0, got {loss_scale!r}")
    return c


def _check_class_weight(class_weight: Any, K: int | None) -> npt.NDArray[np.float64] | None:
    if class_weight is None:
        return None
    cw = np.asarray(class_weight.detach().cpu().numpy() if isinstance(class_weight, torch.Tensor) else class_weight,
                    dtype=np.float64)
    if cw.ndim != 1 or (K is not None and cw.shape[0] != K):
        raise ValueError(f"class_weight must be a 1-d array of one weight per tag ({K}), got shape {cw.shape}")
    if not (np.isfinite(cw).all() and (cw > 0).all()):
        raise ValueError("class_weight must hold finite weights > 0")
    return cw


def _chain_loss_weights(cw: npt.NDArray[np.float64] | None, y: npt.NDArray[np.int64]
                        ) -> npt.NDArray[np.float64] | None:
    """a_l = cw[y_l] / sum_m cw[y_m]: the class-weighted Hamming loss, normalised as the plain one
    (1/L each when every weight is equal), as `GraphModel` normalises its class weights."""
    if cw is None:
        return None
    a = cw[y]
    return a / a.sum()


def _reduce(h: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return h.mean()
    if reduction == "sum":
        return h.sum()
    return h


# -------------------------------------------------------------- the thread pool
_POOLS: dict[int, ThreadPoolExecutor] = {}


def _map(fn: Callable[[int], Any], n: int, n_jobs: int) -> list[Any]:
    """[fn(0), ..., fn(n-1)], over a shared pool of n_jobs threads when it pays (the oracles
    release the GIL, so the threads run the compiled kernels side by side)."""
    if n_jobs == 1 or n < 2:
        return [fn(i) for i in range(n)]
    pool = _POOLS.get(n_jobs)
    if pool is None:
        pool = _POOLS[n_jobs] = ThreadPoolExecutor(n_jobs, thread_name_prefix="structfw-torch")
    chunks = np.array_split(np.arange(n), min(n, 4 * n_jobs))

    def run(idx: npt.NDArray[np.int64]) -> list[Any]:
        return [fn(int(i)) for i in idx]

    out: list[Any] = []
    for part in pool.map(run, chunks):
        out.extend(part)
    return out


# ------------------------------------------------------------ one example, any family
def _family(family: Any) -> Callable[..., Any]:
    """The family's oracle, called as oracle(*potentials, y, **options)."""
    spec = FAMILIES.get(family) if isinstance(family, str) else None
    if spec is None:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    fn, names = spec

    def oracle(*arrays: Any, **options: Any) -> Any:
        *potentials, y = arrays
        if len(potentials) != len(names):
            raise ValueError(f"family {family!r} takes {len(names)} potential tensors ({', '.join(names)}), "
                             f"got {len(potentials)}")
        return fn(**dict(zip(names, potentials)), y_true=y, **options)

    return oracle


class _BatchHinge(torch.autograd.Function):
    """Per-example hinges (B,) of B examples of one family; potentials flattened in *flat, each
    example owning ``k`` consecutive tensors."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], k: int, ys: list[Any], options: list[dict[str, Any]],
                n_jobs: int, *flat: torch.Tensor) -> torch.Tensor:
        B = len(ys)
        arrays = [_to_numpy(t) for t in flat]

        def one(b: int) -> Any:
            return fn(*arrays[b * k:(b + 1) * k], ys[b], **options[b])

        results = _map(one, B, n_jobs)
        ctx.grads = [g for r in results for g in r.grad]
        ctx.like = flat
        ref = flat[0]
        return torch.tensor([r.hinge for r in results], dtype=ref.dtype, device=ref.device)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        k = len(ctx.grads) // max(len(g), 1)
        gc = g.detach().to("cpu", torch.float64).numpy()
        grads = [_like(gc[j // k] * a, t) for j, (a, t) in enumerate(zip(ctx.grads, ctx.like))]
        return (None, None, None, None, None, *grads)


def structured_hinge(family: str, *potentials: torch.Tensor, y: Any, **options: Any) -> torch.Tensor:
    """The structured hinge max_y' [Delta(y, y') + s_theta(y')] - s_theta(y) of one example.

    Parameters
    ----------
    family : str
        One of `FAMILIES` ("chain", "multiclass", "graph", "graph_cut", "potts", "matching",
        "pose"): the potential-level oracle of `structfw.oracles.potentials` that runs.
    *potentials : torch.Tensor
        The family's potentials in the order `FAMILIES` names them (for "chain": unary (L, K),
        transitions (K, K); for "graph": unary (V, K), pairwise (E, K, K)); gradients flow to
        each of them.
    y : tensor, array or list of int
        The true labelling, in the family's label format.
    **options
        The oracle's keyword arguments: the structure (``edges`` for "graph", "graph_cut" and
        "potts", ``parent`` for "pose") and its options (``loss_scale``, the back-end
        ``inference`` of "graph", ...; see each oracle).

    Returns
    -------
    0-d tensor on the potentials' device, in their dtype.  Its backward gives the subgradient
    1[y*] - 1[y] per potential (the oracle's ``grad``), where y* is the loss-augmented labelling.
    With an approximate back-end (loopy graphs, Potts), y* is the back-end's labelling (never
    scoring below y), so the value is a lower bound of the hinge.
    """
    fn = _family(family)
    if not potentials:
        raise ValueError(f"structured_hinge({family!r}) needs the family's potentials as tensors")
    for j, t in enumerate(potentials):
        _check_float_tensor(t, f"potentials[{j}]")
    return _BatchHinge.apply(fn, len(potentials), [_labels_for(family, y)], [options], 1, *potentials)[0]


def _labels_for(family: str, y: Any) -> Any:
    if family == "multiclass":
        arr = _as_labels(y, "y")
        if arr.ndim != 0 and arr.size != 1:
            raise ValueError(f"y must be one class label for family 'multiclass', got shape {arr.shape}")
        return int(arr.reshape(-1)[0])
    return _as_labels(y, "y")


def chain_hinge(unary: torch.Tensor, transitions: torch.Tensor, y: Any, *, loss_scale: float = 1.0,
                class_weight: Any = None) -> torch.Tensor:
    """Structured hinge of a chain: max_y' [Delta(y, y') + s(y')] - s(y).

    Parameters
    ----------
    unary : (L, K) float tensor
        Score of tag k at position l.
    transitions : (K, K) float tensor
        Score of tag a followed by tag b at [a, b].
    y : (L,) int64 tensor (or array)
        The true tags, in 0..K-1.
    loss_scale : float >= 0
        Margin rescaling: Delta = loss_scale x the normalised Hamming loss of `ChainModel`
        ((1/L) #{l : y'_l != y_l}); 0 gives max_y' s(y') - s(y).
    class_weight : (K,) array of weights > 0, optional
        Weights the positions' mistakes by their true tag's weight: Delta = loss_scale
        sum_l a_l [y'_l != y_l] with a_l = class_weight[y_l] / sum_m class_weight[y_m].

    Returns
    -------
    0-d tensor; s(y') = sum_l unary[l, y'_l] + sum_l transitions[y'_l, y'_{l+1}].  Its backward is
    the potential-space subgradient: one-hot(y*) - one-hot(y) for ``unary`` and the transition
    counts of y* minus those of y for ``transitions`` (BCFW paper, eq. (2), with the linear
    scores ⟨w, phi⟩ replaced by the potentials).
    """
    _check_float_tensor(unary, "unary", 2)
    _check_float_tensor(transitions, "transitions", 2)
    cw = _check_class_weight(class_weight, unary.shape[1])
    labels = _as_labels(y, "y")
    extra = {} if cw is None or labels.shape != (unary.shape[0],) or labels.min(initial=0) < 0 or \
        labels.max(initial=0) >= cw.shape[0] else {"loss_weights": _chain_loss_weights(cw, labels)}
    return structured_hinge("chain", unary, transitions, y=labels, loss_scale=_check_loss_scale(loss_scale), **extra)


# ------------------------------------------------------------------ chain layer
def _check_emissions(emissions: Any, tags: Any, mask: Any, K: int
                     ) -> tuple[torch.Tensor, npt.NDArray[np.int64] | None, npt.NDArray[np.int64]]:
    _check_float_tensor(emissions, "emissions", 3)
    B, T, K_e = emissions.shape
    if K_e != K:
        raise ValueError(f"emissions must have shape (B, T, num_tags) with num_tags = {K}, got {tuple(emissions.shape)}")
    lengths = _lengths_from_mask(mask, B, T)
    if (lengths == 0).any():
        raise ValueError(f"mask[{int(np.flatnonzero(lengths == 0)[0])}] is all False: every sequence needs a tag")
    Y = None
    if tags is not None:
        Y = _as_labels(tags, "tags")
        if Y.shape != (B, T):
            raise ValueError(f"tags must have shape (B, T) = ({B}, {T}) like emissions' first two axes, got {Y.shape}")
        for b in range(B):
            seq = Y[b, :lengths[b]]
            if seq.size and (seq.min() < 0 or seq.max() >= K):
                raise ValueError(f"tags[{b}] must be in 0..{K - 1} where mask is True, got values "
                                 f"{int(seq.min())}..{int(seq.max())}")
    return emissions, Y, lengths


def _chain_batch_grads(ctx: Any, g: torch.Tensor, grads: list[tuple[Any, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(d emissions (B, T, K), d transitions (K, K)) of a padded batch: each sequence's (dU (L_b, K),
    dT (K, K)) scaled by its incoming gradient, dU into its first L_b positions (padding gets 0)."""
    gc = g.detach().to("cpu", torch.float64).numpy()
    K = ctx.shape[2]
    dE, dP = np.zeros(ctx.shape), np.zeros((K, K))
    for b, (dU, dT) in enumerate(grads):
        if gc[b] != 0.0:
            dE[b, :ctx.lengths[b]] = gc[b] * dU
            dP += gc[b] * dT
    return _like(dE, ctx.emissions_like), _like(dP, ctx.transitions_like)


class _ChainBatchHinge(torch.autograd.Function):
    """Per-sequence hinges (B,) of padded emissions (B, T, K) with shared transitions (K, K)."""

    @staticmethod
    def forward(ctx: Any, emissions: torch.Tensor, transitions: torch.Tensor, Y: npt.NDArray[np.int64],
                lengths: npt.NDArray[np.int64], loss_scale: float, n_jobs: int,
                cw: npt.NDArray[np.float64] | None) -> torch.Tensor:
        E, P = _to_numpy(emissions), _to_numpy(transitions)

        def one(b: int) -> Any:
            L = int(lengths[b])
            y = Y[b, :L]
            return _potentials.chain_hinge(E[b, :L], P, y, loss_scale=loss_scale,
                                           loss_weights=_chain_loss_weights(cw, y))

        results = _map(one, E.shape[0], n_jobs)
        ctx.results, ctx.shape, ctx.lengths = results, E.shape, lengths
        ctx.emissions_like, ctx.transitions_like = emissions, transitions
        return torch.tensor([r.hinge for r in results], dtype=emissions.dtype, device=emissions.device)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        return (*_chain_batch_grads(ctx, g, [r.grad for r in ctx.results]), None, None, None, None, None)


class MaxMarginChain(torch.nn.Module):
    """A linear-chain structured layer trained by the structured hinge (max-margin), the
    counterpart of a CRF layer: the same emissions and transitions, the same ``decode``, the hinge
    in place of the negative log-likelihood.

    Parameters
    ----------
    num_tags : int >= 2
        K, the number of tags.
    loss_scale : float >= 0, default 1.0
        Margin rescaling by ``loss_scale`` x the normalised Hamming loss (`chain_hinge`).
    class_weight : (K,) array of weights > 0, optional
        The Hamming loss weighted by the true tags' weights (`chain_hinge`), for rare tags.
    n_jobs : int or None
        Threads the batch's oracles run on (None: one per CPU).
    reduction : {"mean", "sum", "none"}
        Over the batch's per-sequence hinges.  "mean" with ``weight_decay = lam`` on the linear
        parameters is the structural SVM's primal (eq. (1) of the BCFW paper).

    Attributes
    ----------
    transitions : torch.nn.Parameter (K, K)
        [a, b] = score of tag a followed by tag b; starts at 0.

    Examples
    --------
    >>> layer = MaxMarginChain(5)
    >>> emissions = torch.randn(2, 7, 5, requires_grad=True)   # (batch, time, tags) from a network
    >>> tags = torch.randint(5, (2, 7))
    >>> loss = layer(emissions, tags)                           # mean structured hinge
    >>> loss.backward()
    >>> paths = layer.decode(emissions)                         # list of tag lists
    """

    def __init__(self, num_tags: int, *, loss_scale: float = 1.0, class_weight: Any = None,
                 n_jobs: int | None = None, reduction: str = "mean") -> None:
        super().__init__()
        if isinstance(num_tags, bool) or not isinstance(num_tags, (int, np.integer)) or num_tags < 2:
            raise ValueError(f"num_tags must be an int >= 2, got {num_tags!r}")
        self.num_tags = int(num_tags)
        self.loss_scale = _check_loss_scale(loss_scale)
        self.class_weight = _check_class_weight(class_weight, self.num_tags)
        self.n_jobs = _check_n_jobs(n_jobs)
        self.reduction = _check_reduction(reduction)
        self.transitions = torch.nn.Parameter(torch.zeros(self.num_tags, self.num_tags))

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, loss_scale={self.loss_scale}, reduction={self.reduction!r}"

    def forward(self, emissions: torch.Tensor, tags: Any, mask: Any = None) -> torch.Tensor:
        """The batch's structured hinge (reduced by ``reduction``).

        Parameters
        ----------
        emissions : (B, T, K) float tensor
            Unary scores; sequences shorter than T are padded at the end.
        tags : (B, T) int tensor
            The true tags (any value where ``mask`` is False).
        mask : (B, T) bool tensor or None
            True on each sequence's positions (a prefix of each row); None: all of length T.
        """
        return _reduce(self.hinge(emissions, tags, mask), self.reduction)

    def loss(self, emissions: torch.Tensor, tags: Any, mask: Any = None) -> torch.Tensor:
        """Same as calling the layer."""
        return self.forward(emissions, tags, mask)

    def hinge(self, emissions: torch.Tensor, tags: Any, mask: Any = None) -> torch.Tensor:
        """(B,) per-sequence structured hinges (`chain_hinge` of each sequence)."""
        emissions, Y, lengths = _check_emissions(emissions, tags, mask, self.num_tags)
        assert Y is not None
        return _ChainBatchHinge.apply(emissions, self.transitions, Y, lengths, self.loss_scale, self.n_jobs,
                                      self.class_weight)

    def score(self, emissions: torch.Tensor, tags: Any, mask: Any = None) -> torch.Tensor:
        """(B,) scores s(y) = sum_l emissions[l, y_l] + sum_l transitions[y_l, y_{l+1}] (differentiable)."""
        emissions, Y, lengths = _check_emissions(emissions, tags, mask, self.num_tags)
        assert Y is not None
        B, T, _ = emissions.shape
        dev = emissions.device
        tags_t = torch.as_tensor(Y, device=dev)
        on = torch.as_tensor(np.arange(T)[None, :] < lengths[:, None], device=dev)
        unary = emissions.gather(2, tags_t.unsqueeze(2)).squeeze(2)
        total = (unary * on).sum(1)
        if T > 1:
            P = self.transitions.to(device=dev, dtype=emissions.dtype)
            pair = P[tags_t[:, :-1], tags_t[:, 1:]]
            total = total + (pair * on[:, 1:]).sum(1)
        return total

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: Any = None) -> list[list[int]]:
        """The best tag sequence of each sequence (Viterbi, on the CPU, in threads)."""
        emissions, _, lengths = _check_emissions(emissions, None, mask, self.num_tags)
        E, P = _to_numpy(emissions), _to_numpy(self.transitions)

        def one(b: int) -> list[int]:
            y, _ = viterbi(np.ascontiguousarray(E[b, :int(lengths[b])]), P)
            return [int(v) for v in y]

        return _map(one, E.shape[0], self.n_jobs)


# --------------------------------------------------------------- many structures
class StructuredHingeLoss(torch.nn.Module):
    """The structured hinge over a batch of examples with structures of their own.

    Parameters
    ----------
    family : str
        One of `FAMILIES`.
    reduction : {"mean", "sum", "none"}
    n_jobs : int or None
        Threads for the batch's oracles (None: one per CPU).
    **options
        Oracle options shared by every example (``loss_scale``, ``inference``, ...).

    Call it with ``potentials``, a list of B tuples of tensors (one tuple per example, the
    family's potentials in the oracle's order), ``ys``, B labellings, and optionally
    ``example_options``, B dicts of per-example options (the ``edges`` of each graph).

    Examples
    --------
    >>> loss_fn = StructuredHingeLoss("graph", inference="auto")
    >>> loss = loss_fn([(unary_a, pairwise_a), (unary_b, pairwise_b)], [y_a, y_b],
    ...                [{"edges": edges_a}, {"edges": edges_b}])           # doctest: +SKIP
    """

    def __init__(self, family: str, *, reduction: str = "mean", n_jobs: int | None = None, **options: Any) -> None:
        super().__init__()
        self._fn = _family(family)
        self.family = family
        self.reduction = _check_reduction(reduction)
        self.n_jobs = _check_n_jobs(n_jobs)
        self.options = options

    def forward(self, potentials: Sequence[Sequence[torch.Tensor]], ys: Sequence[Any],
                example_options: Sequence[dict[str, Any]] | None = None) -> torch.Tensor:
        B = len(potentials)
        if B == 0:
            raise ValueError("potentials must hold at least one example")
        if len(ys) != B:
            raise ValueError(f"ys must hold one labelling per example: {B} potentials, {len(ys)} labellings")
        if example_options is not None and len(example_options) != B:
            raise ValueError(f"example_options must hold one dict per example: {B} potentials, "
                             f"{len(example_options)} dicts")
        ks = {len(p) if isinstance(p, (tuple, list)) else -1 for p in potentials}
        if len(ks) != 1 or -1 in ks or 0 in ks:
            raise ValueError("potentials must be a list of tuples of tensors, the same number of tensors per example")
        k = ks.pop()
        flat = []
        for b, p in enumerate(potentials):
            for j, t in enumerate(p):
                flat.append(_check_float_tensor(t, f"potentials[{b}][{j}]"))
        opts = [{**self.options, **(example_options[b] if example_options else {})} for b in range(B)]
        labels = [_labels_for(self.family, y) for y in ys]
        return _reduce(_BatchHinge.apply(self._fn, k, labels, opts, self.n_jobs, *flat), self.reduction)


# ------------------------------------------------------------------- CRF baseline
class _ChainCRF(torch.autograd.Function):
    """Per-sequence negative log-likelihoods log Z - s(y) of a linear-chain CRF; the gradient is
    the marginals minus the indicators (forward-backward, `chain_marginal_sums`)."""

    @staticmethod
    def forward(ctx: Any, emissions: torch.Tensor, transitions: torch.Tensor, Y: npt.NDArray[np.int64],
                lengths: npt.NDArray[np.int64], n_jobs: int) -> torch.Tensor:
        E, P = _to_numpy(emissions), _to_numpy(transitions)

        def one(b: int) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
            L = int(lengths[b])
            U, y = np.ascontiguousarray(E[b, :L]), Y[b, :L]
            node, pair, logZ = chain_marginal_sums(U, P)
            node[np.arange(L), y] -= 1.0
            np.subtract.at(pair, (y[:-1], y[1:]), 1.0)
            s = float(U[np.arange(L), y].sum() + P[y[:-1], y[1:]].sum())
            return logZ - s, node, pair

        out = _map(one, E.shape[0], n_jobs)
        ctx.out, ctx.shape, ctx.lengths = out, E.shape, lengths
        ctx.emissions_like, ctx.transitions_like = emissions, transitions
        return torch.tensor([o[0] for o in out], dtype=emissions.dtype, device=emissions.device)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        return (*_chain_batch_grads(ctx, g, [(node, pair) for _, node, pair in ctx.out]), None, None, None)


def chain_crf_nll(emissions: torch.Tensor, transitions: torch.Tensor, tags: Any, mask: Any = None,
                  reduction: str = "mean", n_jobs: int | None = None) -> torch.Tensor:
    """Negative log-likelihood -log p(y) of a linear-chain CRF, p(y) ∝ exp s(y), with the same
    potentials as `MaxMarginChain` (emissions (B, T, K), transitions (K, K), tags (B, T), mask
    (B, T) or None).  log Z and the marginals come from the project's forward-backward
    (`structfw.oracles.marginals.chain_marginal_sums`); the gradient is the marginals minus
    the indicators of y."""
    _check_float_tensor(transitions, "transitions", 2)
    K = transitions.shape[0]
    if tuple(transitions.shape) != (K, K):
        raise ValueError(f"transitions must be square (K, K), got {tuple(transitions.shape)}")
    emissions, Y, lengths = _check_emissions(emissions, tags, mask, K)
    assert Y is not None
    return _reduce(_ChainCRF.apply(emissions, transitions, Y, lengths, _check_n_jobs(n_jobs)),
                   _check_reduction(reduction))


# ----------------------------------------------------------- last-layer certificate
def _feature_arrays(features: Sequence[Any], bias: bool) -> list[npt.NDArray[np.float64]]:
    if isinstance(features, (torch.Tensor, np.ndarray)) or not len(features):
        raise ValueError("features must be a non-empty list of (L_i, D) arrays or tensors, one per sequence")
    out: list[npt.NDArray[np.float64]] = []
    for i, f in enumerate(features):
        a = _to_numpy(f) if isinstance(f, torch.Tensor) else np.ascontiguousarray(f, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"features[{i}] must be (L_i, D), got shape {a.shape}")
        if out and a.shape[1] != out[0].shape[1] - bias:
            raise ValueError(f"features[{i}] has {a.shape[1]} columns, features[0] {out[0].shape[1] - bias}")
        out.append(np.hstack([a, np.ones((a.shape[0], 1))]) if bias else a)
    return out


def fit_last_layer(features: Sequence[Any], Y: Sequence[Any], *, n_states: int | None = None, lam: float = 1e-3,
                   bias: bool = True, **svm_params: Any) -> StructuredSVM:
    """Refit a chain network's last linear layer with structfw's solver on frozen features.

    The network's layers up to the last give per-position features f_l (D,); its last layer
    scores tag k by ⟨W_k, f_l⟩ + b_k and the chain layer adds the transitions.  That last layer
    is a linear chain model on the features, so `StructuredSVM` (BCFW by default) fits it to a
    duality gap: ``svm.gap_`` certifies that its primal
    lam/2 ||w||^2 + (1/n) sum_i H_i(w) is within gap_ of the best last layer on these features
    (BCFW paper, Sec. 3: the gap bounds the primal suboptimality).  `last_layer_weights` gives
    the layer back as tensors to load into the network.

    Parameters
    ----------
    features : list of (L_i, D) arrays or tensors
        The frozen features of each training sequence (detached; on any device).
    Y : list of (L_i,) int labellings
    n_states : int or None
        Number of tags; None: one more than the largest tag in Y.
    lam : float > 0
        The regularisation of the primal.
    bias : bool, default True
        Append a constant feature, so that the fitted layer has a bias per tag.
    **svm_params
        Further `StructuredSVM` parameters (``solver``, ``max_passes``, ``tol``, ``random_state``...).

    Returns
    -------
    StructuredSVM, fitted, with ``gap_``, ``primal_``, ``dual_`` and the trace.
    """
    X = _feature_arrays(features, bias)
    Yl = [_as_labels(y, f"Y[{i}]") for i, y in enumerate(Y)]
    if len(Yl) != len(X):
        raise ValueError(f"Y must hold one labelling per sequence: {len(X)} feature arrays, {len(Yl)} labellings")
    if n_states is None:
        n_states = max(2, int(max(int(y.max()) for y in Yl if y.size)) + 1)
    model = ChainModel(n_states=int(n_states), n_features=X[0].shape[1])
    svm = StructuredSVM(model, lam=lam, **svm_params)
    return svm.fit(X, Yl)


def last_layer_weights(svm: StructuredSVM, bias: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(W (K, D), b (K,) or None, transitions (K, K)) of a `fit_last_layer` fit, as float32
    tensors to copy into the network's last ``torch.nn.Linear`` (weight, bias) and the
    `MaxMarginChain`'s transitions."""
    model = svm.model
    if not isinstance(model, ChainModel) or not hasattr(svm, "coef_"):
        raise ValueError("svm must be a fitted StructuredSVM on a ChainModel (fit_last_layer's result)")
    w = np.asarray(svm.coef_, dtype=np.float64)
    U = model.unary_weights(w)
    W, b = (U[:, :-1], U[:, -1]) if bias else (U, None)
    as_t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
    return as_t(W), (as_t(b) if b is not None else None), as_t(model.transition_weights(w))
