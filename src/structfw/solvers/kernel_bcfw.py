"""Kernelized block-coordinate Frank-Wolfe for the SSVM dual (BCFW paper, App. B.5, Alg. B.1).

Alg. B.1 runs BCFW on the dual with the dual variables alpha kept *explicitly* instead of
w: "the classifier is only given implicitly as a sparse combination of the corresponding
kernel functions, i.e. w = A alpha" (App. B.5).  Here the joint kernel decomposes over the
parts of a chain labelling (`structfw.oracles.kernel_chain`):

    k((x, y), (x', y')) = sum_{t,s} [y_t == y'_s] kappa(x_t, x'_s) + <E(y), E(y')>,

kappa "linear", "rbf" or "poly" on the features of one position and E(y) the transition
counts of ChainModel (kept linear).  So w = A alpha has two parts:

- unary: for every training position p = (i, s) and label c the dual coefficient

      beta[p, c] = 1/(lam n) sum_y alpha_i(y) ([y_i,s == c] - [y_s == c]),

  and the unary score of label c at any position x_t is sum_p kappa(x_t, x_p) beta[p, c];
- transitions: the explicit weights P = 1/(lam n) sum_i sum_y alpha_i(y) (E(y_i) - E(y)).

A block's own part w_i = A alpha_[i] is its rows of beta (T_i x K) and its P_i (K x K), and
l_i = b^T alpha_[i]; the dual is D(alpha) = -lam/2 ||w||^2 + l as in the linear engine
(docs/design.md, "Notation").  One block step (Alg. B.1 lines 3-6):

1. i from the sampler; the unary scores of x_i at w are U_i = K_i beta, K_i the kernel rows
   kappa(x_i,t, all training positions) (Alg. B.1 line 4: H_i at w = A alpha);
2. y* = argmax_y H_i(y; w) by loss-augmented Viterbi on (U_i, P);
3. the corner s_[i] = e_{y*}: w_s has rows 1/(lam n) ([y_i,t == c] - [y*_t == c]) and
   transitions (E(y_i) - E(y*))/(lam n); l_s = Delta(y_i, y*)/n;
4. gamma by the line search of Alg. 4 (BCFW paper), "re-interpreting dot products as the
   suitable sum of kernel evaluations" (App. B.5): with d = w_s - w_i,

       gamma = (lam <w_i - w_s, w> - l_i + l_s) / (lam ||w_i - w_s||^2),  clipped to [0, 1],
       <d, w>   = sum_{t,c} dB[t, c] U_i[t, c] + <dP, P>,
       ||d||^2  = sum_c dB[:, c]^T K_ii dB[:, c] + ||dP||^2,

   where dB, dP are the beta rows and transition parts of d and K_ii the kernel among the
   positions of x_i; or gamma = 2n/(k+2n) (``step_size="predefined"``);
5. alpha_i <- (1 - gamma) alpha_i + gamma e_{y*} (Alg. B.1 line 6), and beta's rows of
   block i, P_i, P and l_i move along the same direction: O(T_i K + K^2) per step, beside
   the O(T_i N K) product of step 1 (N = number of training positions).

The block gap -- the numerator of the line search -- is g_i = lam <w_i - w_s, w> - l_i + l_s
(eq. (16) of the BCFW paper, in kernel terms as above).

**The certificate.**  At each checkpoint beta, P and l are rebuilt from the explicit alpha
(not from the incrementally updated copies the steps use), every training example is
decoded at that w (loss-augmented Viterbi on its unary scores), and the trace reports

    P(w) = lam/2 ||w||^2 + 1/n sum_i max_y H_i(y; w),   D(alpha) = -lam/2 ||w||^2 + l,

with ||w||^2 = sum_{p,c} beta[p, c] (K beta)[p, c] + ||P||^2; their difference is the
duality gap, >= P(w) - P(w*) whatever rounding did to the step's copies.

The kernel rows of a block are needed by every step on it and every checkpoint; they are
kept in a bounded least-recently-used cache (``kernel_cache_mb``; see `KernelRowCache`).
"""
from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from numba import njit

from ..oracles.chain import hamming_loss
from ..oracles.kernel_chain import (KERNELS, block_coefficients, chain_decode, chain_max_oracle, gram,
                                    labelling_score, squared_norms)
from ._kernels import cache_hit, step_along
from .averaging import LazyAverage
from .base import Param, Solver, continue_or_restart
from .corners import ALPHA_EPS
from .plan import ENGINE_PARAMS, refresh_due
from .sampling import BlockSampler, take_full_gaps

if TYPE_CHECKING:
    from .._interrupt import InterruptFlag
    from .base import Monitor
    from .problem import Problem

#: training or support positions: a dense (N, F) array or a CSR matrix
Positions: TypeAlias = "npt.NDArray[np.float64] | sp.csr_matrix"
#: (kernel, gamma, degree, coef0): the kernel kappa
KernelSpec: TypeAlias = "tuple[str, float, int, float]"

KERNEL_STEP_SIZES = ("linesearch", "predefined")
KERNEL_AVERAGINGS = (None, "weighted", "suffix")

_NO_ROWS = np.zeros((0, 0))
#: the engine's declarations of the options kernel BCFW shares with it (one table: solvers/plan.py)
_ENGINE = {p.name: p for p in ENGINE_PARAMS}

#: methods that define a model's joint features, loss and oracles: a subclass of ChainModel or
#: MulticlassModel that overrides one of them is another model, which the joint kernel does not describe
_DEFINING = ("joint_feature", "psi", "loss", "loss_augmented_decode", "decode", "fixed_score", "score")


def kernel_model_kind(model: object) -> str:
    """"chain" for ChainModel, "multiclass" for MulticlassModel (a chain of length 1, no transitions).

    Raises ValueError for any other model: the joint kernel of this solver describes exactly
    the joint features, Hamming / 0-1 loss and oracles of these two."""
    # the model declares its kind (``joint_kernel_kind``); the solver imports no model class
    owner = next((c for c in type(model).__mro__ if "joint_kernel_kind" in vars(c)), None)
    if owner is not None and all(getattr(type(model), m, None) is getattr(owner, m, None) for m in _DEFINING):
        if not (getattr(model, "has_fixed_score", False) or getattr(model, "nonnegative_indices", None) is not None):
            return owner.joint_kernel_kind  # type: ignore[attr-defined]  # owner declares it (found above)
    raise ValueError(
        f"solver 'kernel-bcfw' kernelizes ChainModel (unary features per position, transitions, normalised "
        f"Hamming loss) and MulticlassModel (a chain of length 1); got {type(model).__name__}, whose joint "
        "features, loss or oracles it cannot express as a kernel expansion: use a linear solver such as 'bcfw'")


# ================================================================= size of a fit
#: a fit estimated above this many bytes, or this many kernel-feature products per pass, is
#: announced before it starts (`warn_if_large`)
LARGE_FIT_BYTES = 2 ** 30
LARGE_FIT_FLOPS_PER_PASS = 1e11


class LargeFitWarning(RuntimeWarning):
    """A kernelized fit whose estimated memory or work per pass is large (said before it starts)."""


def estimate_fit_size(n_positions: int, n_features: int, n_states: int, n_examples: int,
                      kernel_cache_mb: float = 1024.0, n_edges: bool = True) -> dict[str, float]:
    """Memory and work of a kernelized BCFW fit, before it starts.

    The kernel rows of all blocks together are the N x N Gram matrix of the training
    positions (8 N^2 bytes); the row cache keeps at most ``kernel_cache_mb`` of them, and
    the rows that do not fit are recomputed (O(F) each entry) by every pass and every
    checkpoint.  The rest is small beside it: the stacked positions (8 N F), beta and its
    checkpoint copies (a few 8 N K), the blocks' transition parts (8 n K^2).

    Parameters
    ----------
    n_positions, n_features, n_states, n_examples : int
        N training positions (letters of all words; 1 per multiclass example), F features
        per position, K labels, n examples.
    kernel_cache_mb : float
        The solver's ``kernel_cache_mb``.
    n_edges : bool
        Chains keep a K x K transition part per block; multiclass does not.

    Returns
    -------
    dict
        ``gram_bytes`` (the whole Gram matrix), ``cache_bytes`` (what the cache will hold),
        ``memory_bytes`` (the estimated peak: the cache plus the arrays above),
        ``cached_fraction`` (of the kernel rows), ``flops_per_pass`` (kernel-feature products
        a pass recomputes: the uncached fraction of N^2 F).
    """
    N, F, K, n = (int(v) for v in (n_positions, n_features, n_states, n_examples))
    gram = 8.0 * N * N
    cache = min(gram, max(0.0, float(kernel_cache_mb)) * 2.0 ** 20)
    arrays = 8.0 * (N * F + 4 * N * K + (n * K * K if n_edges else 0))
    cached = cache / gram if gram else 1.0
    return dict(gram_bytes=gram, cache_bytes=cache, memory_bytes=cache + arrays, cached_fraction=cached,
                flops_per_pass=(1.0 - cached) * N * N * F)


def large_fit_message(est: dict[str, float], n_positions: int, n_features: int) -> str | None:
    """The warning for a fit that `estimate_fit_size` finds large, or None."""
    if est["memory_bytes"] <= LARGE_FIT_BYTES and est["flops_per_pass"] <= LARGE_FIT_FLOPS_PER_PASS:
        return None
    gb = 2.0 ** 30
    text = (f"kernel-bcfw on {n_positions:,} training positions ({n_features} features each): about "
            f"{est['memory_bytes'] / gb:.1f} GB (kernel-row cache {est['cache_bytes'] / gb:.1f} GB")
    if est["cached_fraction"] < 1.0:
        text += (f" of the {est['gram_bytes'] / gb:.0f} GB Gram matrix; every pass and checkpoint recomputes "
                 f"the other {1 - est['cached_fraction']:.0%} of it, {est['flops_per_pass']:.1e} multiply-adds: "
                 "expect minutes per pass")
    return (text + "). Faster and smaller: train on a subsample, or use the linear BCFW (solver 'bcfw'), "
            "which needs no Gram matrix; smaller but slower: lower kernel_cache_mb (--kernel-cache-mb)")


def warn_if_large(n_positions: int, n_features: int, n_states: int, n_examples: int, kernel_cache_mb: float = 1024.0,
                  n_edges: bool = True, stacklevel: int = 2) -> str | None:
    """Issue a `LargeFitWarning` when the fit is large (see `estimate_fit_size`); returns the message
    or None."""
    import warnings

    msg = large_fit_message(estimate_fit_size(n_positions, n_features, n_states, n_examples, kernel_cache_mb,
                                              n_edges), n_positions, n_features)
    if msg is not None:
        warnings.warn(msg, LargeFitWarning, stacklevel=stacklevel + 1)
    return msg


def fit_shape(model: Any, X: Sequence[Any]) -> tuple[int, int, int, int, bool]:
    """(N positions, F features, K labels, n examples, chain?) of a kernelized fit on ``X``, from the
    shapes alone (nothing is copied)."""
    kind = kernel_model_kind(model)
    if kind == "chain":
        N = sum(int(np.shape(x)[0]) for x in X)
    else:
        N = len(X)
    return N, int(model.n_features), int(model.n_states), len(X), kind == "chain"


# ================================================================= data and kernel rows
class KernelRowCache:
    """Kernel rows kappa(x_i,t, every training position) of recently used blocks, least recently used out.

    Why a cache: a block's rows cost O(T_i N F) to compute (F features per position), against
    O(T_i N K) for the product with beta that uses them -- on 1,000 OCR words (F = 128, K = 26,
    N = 7,558) 1.7 ms against 0.2 ms for all the rest of a step -- and every step on the block and
    every checkpoint needs them.  Why bounded: all rows together are the N x N Gram matrix of the
    training positions, 8 N^2 bytes (18 GB for the 47,535 letters of OCR's training words).  With
    uniform sampling a cache holding a fraction f of the blocks serves about a fraction f of the
    steps.  Rows are float64 and always computed by the same call, so what the cache holds never
    changes the iterates.
    """

    def __init__(self, budget_bytes: float) -> None:
        self.budget = int(budget_bytes)
        self.used = 0
        self.rows: OrderedDict[int, npt.NDArray[np.float64]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, i: int, compute: Callable[[int], npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        G = self.rows.get(i)
        if G is not None:
            self.rows.move_to_end(i)
            self.hits += 1
            return G
        self.misses += 1
        G = compute(i)
        if G.nbytes <= self.budget:
            while self.used + G.nbytes > self.budget:
                _, old = self.rows.popitem(last=False)
                self.used -= old.nbytes
            self.rows[i] = G
            self.used += G.nbytes
        return G


class KernelData:
    """The training set as the kernel sees it: positions stacked, block offsets, labels, kernel rows.

    Built once per solve from the problem (it is data, not state: a warm start rebuilds it).

    Attributes
    ----------
    kind : {"chain", "multiclass"}
    positions : ndarray (N, F) or CSR matrix   every training position x_i,t, block after block
    sqnorms : ndarray (N,)                     ||x_p||^2 (RBF)
    offsets : ndarray (n + 1,)                 block i owns positions offsets[i]:offsets[i+1]
    labels : list of int64 arrays              y_i as a labelling of its positions
    K : int                                    number of labels
    edges : bool                               chains have transitions; multiclass has none
    """

    def __init__(self, problem: Problem, kind: str, spec: KernelSpec, cache_bytes: float) -> None:
        self.kind = kind
        self.spec = spec
        model: Any = problem.model  # a ChainModel or MulticlassModel (kernel_model_kind)
        self.K = int(model.n_states)
        self.edges = kind == "chain"
        rows = [_as_rows(x, kind) for x in problem.X]
        self.positions = _stack(rows)
        self.sqnorms = squared_norms(self.positions)
        lengths = np.array([r.shape[0] for r in rows], np.int64)
        self.offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        self.labels = [np.ascontiguousarray(np.atleast_1d(np.asarray(y, np.int64))) for y in problem.Y]
        self.cache = KernelRowCache(cache_bytes)

    @property
    def N(self) -> int:
        return int(self.offsets[-1])

    def _block_rows(self, i: int) -> npt.NDArray[np.float64]:
        o0, o1 = self.offsets[i], self.offsets[i + 1]
        return gram(self.positions[o0:o1], self.sqnorms[o0:o1], self.positions, self.sqnorms, *self.spec)

    def rows(self, i: int) -> npt.NDArray[np.float64]:
        """K_i: kappa(x_i,t, x_p) for the T_i positions of block i and every training position p."""
        return self.cache.get(i, self._block_rows)


def _as_rows(x: Any, kind: str) -> Positions:
    """A training input as a matrix of positions (a multiclass input is one position)."""
    if kind == "chain":
        return x
    if isinstance(x, np.ndarray):
        return x.reshape(1, -1)
    # a SparseVector row of MulticlassModel
    return sp.csr_matrix((x.values, x.indices, np.array([0, x.indices.shape[0]])), shape=(1, x.dim))


def _stack(rows: Sequence[Positions]) -> Positions:
    if any(sp.issparse(r) for r in rows):
        P = sp.vstack([sp.csr_matrix(r) for r in rows], format="csr", dtype=np.float64)
        P.sort_indices()
        return P
    return np.ascontiguousarray(np.concatenate(rows, axis=0), dtype=np.float64)


# ================================================================= the predictor
class KernelExpansion:
    """The implicit weight vector w = A alpha of a kernelized fit, as a predictor.

    The unary score of label c at a position x_t is sum_j kappa(x_t, sv_j) coef[j, c] over the
    support positions sv_j (the training positions with a nonzero row of beta), and a labelling
    scores sum_t U[t, y_t] + sum_t transitions[y_t, y_t+1].  Immutable (its arrays are read-only),
    so ``copy`` may share them.

    Attributes
    ----------
    support : ndarray (m, F) or CSR matrix    the support positions
    coef : ndarray (m, K)                     their rows of beta
    transitions : ndarray (K, K)              explicit transition weights (zero for multiclass)
    kernel, gamma, degree, coef0              kappa
    kind : {"chain", "multiclass"}
    """

    #: test positions x support positions entries computed at once when predicting (bounds memory)
    CHUNK = 1 << 22

    def __init__(self, support: Positions, coef: npt.ArrayLike, transitions: npt.ArrayLike, spec: KernelSpec,
                 kind: str) -> None:
        self.coef = _frozen(coef)
        self.transitions = _frozen(transitions)
        self.kernel, self.gamma, self.degree, self.coef0 = spec
        self.kind = kind
        self.support = _frozen(support) if isinstance(support, np.ndarray) else support
        self.support_sqnorms = _frozen(squared_norms(support))

    @property
    def spec(self) -> KernelSpec:
        return (self.kernel, self.gamma, self.degree, self.coef0)

    @property
    def n_support(self) -> int:
        """Number of support positions (training positions with a nonzero dual coefficient row)."""
        return int(self.coef.shape[0])

    def copy(self) -> KernelExpansion:
        """A new handle on the same read-only arrays (Monitor keeps the best iterate's copy)."""
        other = object.__new__(KernelExpansion)
        other.__dict__.update(self.__dict__)
        return other

    def unary_scores(self, positions: Positions) -> npt.NDArray[np.float64]:
        """(T, K) unary scores of a (T, F) matrix of positions: kappa(x_t, support) @ coef."""
        K = self.coef.shape[1]
        T = positions.shape[0]
        if self.n_support == 0 or T == 0:
            return np.zeros((T, K))
        out = np.empty((T, K))
        step = max(1, self.CHUNK // self.n_support)
        with np.errstate(over="ignore", invalid="ignore"):
            p2 = squared_norms(positions)
            for a in range(0, T, step):
                G = gram(positions[a:a + step], p2[a:a + step], self.support, self.support_sqnorms, *self.spec)
                out[a:a + step] = G @ self.coef
        if not np.isfinite(out).all():
            # argmax over NaN or inf scores would return arbitrary labellings
            raise ValueError("the kernel expansion's scores overflow on these inputs (kappa or the "
                             f"coefficients are too large: max |coef| = {np.abs(self.coef).max():.3g}); "
                             "no prediction is made")
        return out

    def decode_all(self, X: Sequence[Any]) -> list[Any]:
        """argmax_y <w, phi(x, y)> for every input of a validated list X (the model's check_X)."""
        rows = [_as_rows(x, self.kind) for x in X]
        if not rows:
            return []
        U = self.unary_scores(_stack(rows))
        out = []
        o = 0
        for r in rows:
            T = r.shape[0]
            y = chain_decode(np.ascontiguousarray(U[o:o + T]), self.transitions)
            out.append(int(y[0]) if self.kind == "multiclass" else y)
            o += T
        return out

    def decode(self, x: Any) -> Any:
        return self.decode_all([x])[0]

    def linear_coef(self) -> npt.NDArray[np.float64] | None:
        """The explicit w in the model's layout (ChainModel / MulticlassModel) for kernel="linear",
        else None (an RBF or polynomial w lives in a feature space of kappa, not in R^d)."""
        if self.kernel != "linear":
            return None
        unary = np.asarray(self.support.T @ self.coef)   # (F, K): sum_j coef[j, c] sv_j
        w = np.ascontiguousarray(unary.T).ravel()
        if self.kind == "chain":
            w = np.concatenate([w, self.transitions.ravel()])
        return w


def _frozen(a: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A read-only C-contiguous float64 version of ``a`` (a copy when ``a`` is not one already)."""
    a = np.array(a, dtype=np.float64, order="C", copy=True)
    a.setflags(write=False)
    return a


# ================================================================= state
class BlockAlpha:
    """alpha_i, explicit and sparse (App. B.5): the labellings with weight and their weights.

    Starts at e_{y_i} (Alg. B.1 line 1).  ``Ys[:m]`` are the labellings, ``weights[:m]`` their
    alpha_i(y); ``slots`` maps a labelling's bytes to its row."""

    __slots__ = ("Ys", "weights", "slots", "m")

    def __init__(self, y_true: npt.NDArray[np.int64]) -> None:
        self.Ys = np.empty((4, y_true.shape[0]), np.int64)
        self.weights = np.zeros(4)
        self.Ys[0] = y_true
        self.weights[0] = 1.0
        self.slots = {y_true.tobytes(): 0}
        self.m = 1

    def fw_update(self, y: npt.NDArray[np.int64], gamma: float) -> None:
        """alpha_i <- (1 - gamma) alpha_i + gamma e_y (Alg. B.1 line 6)."""
        if gamma <= 0.0:
            return
        if gamma >= 1.0:
            self.Ys[0] = y
            self.weights[:self.m] = 0.0
            self.weights[0] = 1.0
            self.slots = {y.tobytes(): 0}
            self.m = 1
            return
        self.weights[:self.m] *= 1.0 - gamma
        key = y.tobytes()
        slot = self.slots.get(key)
        if slot is None:
            slot = self._append(y, key)
        self.weights[slot] += gamma

    def _append(self, y: npt.NDArray[np.int64], key: bytes) -> int:
        if self.m == self.weights.shape[0]:
            self.Ys = np.concatenate([self.Ys, np.empty_like(self.Ys)])
            self.weights = np.concatenate([self.weights, np.zeros_like(self.weights)])
        slot = self.m
        self.Ys[slot] = y
        self.weights[slot] = 0.0
        self.slots[key] = slot
        self.m += 1
        return slot

    def pairwise_update(self, a_slot: int, y: npt.NDArray[np.int64], gamma: float) -> None:
        """alpha_i(y_a) -= gamma, alpha_i(y) += gamma (block pairwise step); a labelling whose
        weight reaches exactly 0 (gamma = alpha_i(y_a), a drop step) leaves the support."""
        if gamma <= 0.0:
            return
        key = y.tobytes()
        slot = self.slots.get(key)
        if slot is None:
            slot = self._append(y, key)
        self.weights[slot] += gamma
        self.weights[a_slot] -= gamma
        if self.weights[a_slot] <= 0.0:
            self._remove(a_slot)

    def away_update(self, a_slot: int, gamma: float) -> None:
        """alpha_i <- (1 + gamma) alpha_i - gamma e_{y_a} (block away step); at gamma =
        alpha_i(y_a) / (1 - alpha_i(y_a)), a drop step, y_a leaves the support."""
        if gamma <= 0.0:
            return
        self.weights[:self.m] *= 1.0 + gamma
        self.weights[a_slot] -= gamma
        if self.weights[a_slot] <= 0.0:
            self._remove(a_slot)

    def _remove(self, slot: int) -> None:
        """Remove a labelling of zero weight (the last row moves into its slot)."""
        last = self.m - 1
        del self.slots[self.Ys[slot].tobytes()]
        if slot != last:
            self.Ys[slot] = self.Ys[last]
            self.weights[slot] = self.weights[last]
            self.slots[self.Ys[slot].tobytes()] = slot
        self.weights[last] = 0.0
        self.m = last


class KernelBCFWState:
    """Complete state of the kernelized BCFW: everything needed to continue a run.

    Attributes
    ----------
    alpha : list of BlockAlpha     the dual point, explicit and sparse per block
    theta : ndarray (N K + K^2,)   [beta.ravel(), P.ravel()]: the coefficients of w = A alpha
    beta : ndarray (N, K)          view of theta: unary dual coefficients, one row per training position
    wp : ndarray (K, K)            view of theta: transition weights P
    wpi : ndarray (n, K, K)        P_i of each block ((n, 0, 0) for multiclass: no transitions)
    li : ndarray (n,), ell : float l_i = b^T alpha_[i], l = sum_i l_i
    k, passes : int                block steps and complete passes done
    rng, sampler                   the sampler's generator and state (continued by warm starts)
    oracle_gaps, full_gap          block gaps at their last oracle call, the last full gap (gap
                                   sampling, the cache); needs_refresh: the first gap pass is due
    avg : LazyAverage or None      running average of theta (and l)
    lam, n, d, fingerprint         the problem it belongs to
    """

    def __init__(self, problem: Problem, data: KernelData, rng: int | np.random.Generator | None,
                 sampling: str) -> None:
        n, K, N = problem.n, data.K, data.N
        self.n, self.d, self.lam = n, problem.d, problem.lam
        self.fingerprint = problem.fingerprint
        self.K, self.N = K, N
        self.theta = np.zeros(N * K + K * K)
        self.wpi = np.zeros((n, K, K) if data.edges else (n, 0, 0))
        self.li = np.zeros(n)
        self.ell = 0.0
        self.alpha = [BlockAlpha(y) for y in data.labels]
        self.k = 0
        self.passes = 0
        self.rng = np.random.default_rng(rng)
        self.sampler = BlockSampler(sampling, n, self.rng)
        self.avg: LazyAverage | None = None
        # gap sampling and the cache (Osokin et al. 2016, Sec. 3.1, 3.3): each block's gap at its
        # last oracle call, the last full gap, and whether the first full gap pass is still due
        self.oracle_gaps = np.zeros(n)
        self.full_gap = 0.0
        self.needs_refresh = True

    @property
    def beta(self) -> npt.NDArray[np.float64]:
        return self.theta[:self.N * self.K].reshape(self.N, self.K)

    @property
    def wp(self) -> npt.NDArray[np.float64]:
        return self.theta[self.N * self.K:].reshape(self.K, self.K)

    def rescale_lam(self, lam_new: float) -> None:
        """Keep alpha, change lam: w = A alpha scales by lam / lam_new (so do beta, P, P_i and
        the average of theta); l does not depend on lam."""
        r = self.lam / lam_new
        self.theta *= r
        self.wpi *= r
        if self.avg is not None:
            self.avg.u *= r
            self.avg.renormalise()
        self.lam = lam_new

    def averaged(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float] | None:
        """(beta, P, l) of the averaged iterate, or None without averaging."""
        if self.avg is None:
            return None
        tb = self.avg.wbar(self.theta)
        NK = self.N * self.K
        return tb[:NK].reshape(self.N, self.K), tb[NK:].reshape(self.K, self.K), self.avg.lbar


# ================================================================= the compiled block step
@njit(cache=True, nogil=True)
def _unary_direction(Bi, a, y_from, y_to, inv_ln):
    """dB = a B_i + the beta rows of w(y_to) - w(y_from): inv_ln at (t, y_from[t]), -inv_ln at
    (t, y_to[t]) where they differ (the y_i terms of the two corners cancel)."""
    T, K = Bi.shape
    dB = np.empty((T, K))
    for t in range(T):
        for c in range(K):
            dB[t, c] = a * Bi[t, c]
        f, g = y_from[t], y_to[t]
        if f != g:
            dB[t, f] += inv_ln
            dB[t, g] -= inv_ln
    return dB


@njit(cache=True, nogil=True)
def _unary_terms(dB, U, Kii):
    """(<d, w>, ||d||^2) of the unary part: sum dB * U and sum_c dB[:, c]^T K_ii dB[:, c]."""
    T, K = dB.shape
    wd = 0.0
    for t in range(T):
        for c in range(K):
            wd += dB[t, c] * U[t, c]
    nrm = 0.0
    for t in range(T):
        for s in range(T):
            kts = Kii[t, s]
            if kts != 0.0:
                acc = 0.0
                for c in range(K):
                    acc += dB[t, c] * dB[s, c]
                nrm += kts * acc
    return wd, nrm


@njit(cache=True, nogil=True)
def _transition_direction(wpi, a, y_from, y_to, inv_ln):
    """dP = a P_i + the transition counts of w(y_to) - w(y_from), inv_ln (E(y_from) - E(y_to))."""
    K = wpi.shape[0]
    dP = np.empty((K, K))
    for p in range(K):
        for q in range(K):
            dP[p, q] = a * wpi[p, q]
    for t in range(y_from.shape[0] - 1):
        a0, b0, a1, b1 = y_from[t], y_from[t + 1], y_to[t], y_to[t + 1]
        if a0 != a1 or b0 != b1:
            dP[a0, b0] += inv_ln
            dP[a1, b1] -= inv_ln
    return dP


@njit(cache=True, nogil=True)
def _kernel_move(Bi, dB, trans, dP, gamma, avg):
    """B_i += gamma dB and P_i, P += gamma dP, the lazy averages' buffers by -inv_c times that."""
    wp, wpi, edges = trans
    uB, uP, inv_c = avg
    T, K = Bi.shape
    has_u = uB.shape[0] > 0
    for t in range(T):
        for c in range(K):
            step = gamma * dB[t, c]
            Bi[t, c] += step
            if has_u:
                uB[t, c] -= inv_c * step
    if edges:
        for p in range(K):
            for q in range(K):
                step = gamma * dP[p, q]
                wpi[p, q] += step
                wp[p, q] += step
                if has_u:
                    uP[p, q] -= inv_c * step


@njit(cache=True, nogil=True)
def kernel_block_step(block, trans, direction, rule, avg):
    """One block step along d = a w_i + (w(y_to) - w(y_from)) in kernel terms; updates B_i,
    P_i, P (and the average's buffers) in place.

    The Frank-Wolfe step (Alg. B.1 lines 5-6) is a = -1, y_from = y_i, y_to = y*: d = w_s - w_i.
    The pairwise step is a = 0, y_from = the away labelling y_a, y_to = y*: weight moves from
    alpha_i(y_a) to alpha_i(y*), d = w_s - w_a.  The away step is a = 1, y_from = y_a, y_to = y_i:
    d = w_i - w_a (w(y_i) = 0).  Here w(y) is the corner e_y of block i in w-space: beta rows
    inv_ln ([y_i,t == c] - [y_t == c]), transitions inv_ln (E(y_i) - E(y)).

    Parameters
    ----------
    block : (Kii, U, Bi)   kappa among block i's positions (T, T), its unary scores at w
                           (K_i beta, (T, K)) and its rows of beta (w_i's unary part, (T, K))
    trans : (wp, wpi, edges)   transition weights P and block i's part P_i ((K, K)); ``edges``:
                           chains have transitions (multiclass: none, (0, 0) arrays)
    direction : (a, y_from, y_to, inv_ln, dl)   a in {-1, 0, 1}, the two labellings (T,),
                           1/(lam n) and the change of l_i per unit step
    rule : (lam, gmax, gfixed)   gmax: 1 for FW, alpha_i(y_a) for pairwise, alpha_i(y_a) /
                           (1 - alpha_i(y_a)) for away; gfixed: the
                           predefined step, or -1 for the exact line search
    avg : (uB, uP, inv_c)  the lazy average's buffers of B_i and P (empty (0, 0) without
                           averaging) and 1/c

    Returns
    -------
    gamma : float
        min(gmax, max(0, (dl - lam <w, d>) / (lam ||d||^2))) (BCFW paper Alg. 4 line 7 in kernel
        terms: <w, d> = sum dB * U + <dP, P>, ||d||^2 = sum_c dB[:, c]^T K_ii dB[:, c] + ||dP||^2).
    gap : float
        dl - lam <w, d>: for the FW step the block gap g_i = lam <w_i - w_s, w> - l_i + l_s.
    """
    Kii, U, Bi = block
    wp, wpi, edges = trans
    a, y_from, y_to, inv_ln, dl = direction
    lam, gmax, gfixed = rule
    dB = _unary_direction(Bi, a, y_from, y_to, inv_ln)
    wd, nrm = _unary_terms(dB, U, Kii)
    dP = np.empty((0, 0))
    if edges:
        dP = _transition_direction(wpi, a, y_from, y_to, inv_ln)
        for p in range(dP.shape[0]):
            for q in range(dP.shape[1]):
                wd += dP[p, q] * wp[p, q]
                nrm += dP[p, q] * dP[p, q]
    slope = lam * wd - dl   # derivative of -D along d at gamma = 0
    gamma = step_along(slope, nrm, lam, gmax, gfixed)
    if gamma > 0.0:
        _kernel_move(Bi, dB, trans, dP, gamma, avg)
    return gamma, -slope


@njit(cache=True, nogil=True)
def away_slot(Ys, weights, m, U, P, y_true):
    """The away labelling of block i: argmin over y with alpha_i(y) > 0 of H_i(y; w)
    (= argmin of Delta(y_i, y) + <w, phi(x_i, y)>: the <w, phi(x_i, y_i)> term is common).
    Ties go to the first slot."""
    best = -1
    best_v = 0.0
    for j in range(m):
        if weights[j] <= 0.0:
            continue
        v = hamming_loss(y_true, Ys[j]) + labelling_score(U, P, Ys[j])
        if best < 0 or v < best_v:
            best, best_v = j, v
    return best


@njit(cache=True, nogil=True)
def best_slot(Ys, m, U, P, y_true):
    """The cache's corner of block i: argmax over its stored labellings (alpha_i(y) > 0) of
    H_i(y; w) = Delta(y_i, y) + <w, phi(x_i, y) - phi(x_i, y_i)>, and that value (the
    `chain_max_oracle` formula over the stored set).  Ties go to the first slot."""
    base = labelling_score(U, P, y_true)
    best = -1
    best_v = 0.0
    for j in range(m):
        v = hamming_loss(y_true, Ys[j]) + labelling_score(U, P, Ys[j]) - base
        if best < 0 or v > best_v:
            best, best_v = j, v
    return best, best_v


# ================================================================= solver
class KernelBCFW(Solver):
    """Kernelized block-coordinate Frank-Wolfe (BCFW paper, App. B.5, Alg. B.1) for chains.

    The dual variables alpha are kept explicitly and sparsely per block; w = A alpha is
    implicit, as dual coefficients of the training positions under a kernel kappa on
    position features, plus explicit transition weights (see the module docstring).  Works
    for `ChainModel` and, as a chain of length 1,
    `MulticlassModel`; any other model is refused.

    The fitted predictor is a `KernelExpansion` (``SolveResult.w``; the estimator keeps
    it as ``kernel_expansion_``).  With ``kernel="linear"`` the iterates are those of
    ``BCFW(step_size=...)`` with the same ``random_state`` (up to rounding).

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly"}
        kappa on the features of one position: exp(-gamma ||x - x'||^2),
        <x, x'>, or (gamma <x, x'> + coef0)^degree.
    gamma : float > 0
        Of "rbf" and "poly".  The default 0.05 suits features of OCR's scale (binary 16x8
        images, mean ||x - x'||^2 = 41): of 0.01, 0.02, 0.05 and 0.1 it gave the lowest test
        error on 300- and 1,000-word subsets (docs/guide/kernel-bcfw.md).  For other data scale it
        as about 2 / (mean ||x - x'||^2) and tune it.
    degree : int >= 1
        Of "poly".
    coef0 : float
        Of "poly".  The default 1 keeps the lower-degree monomials in the kernel.
    step_size : {"linesearch", "predefined"}
        The exact line search in kernel terms (Alg. B.1 "or optimize gamma by line-search")
        or 2n/(k+2n).
    sampling : {"uniform", "perm", "gap", "max_gap"}
        Block choice: uniform at random (Alg. B.1 line 3), a new permutation each pass, or by the
        block gaps as in `BCFW` (Osokin et al. 2016, Sec. 3.1: p_i proportional to the last gap
        estimate, or the largest), with a full gap pass every ``gap_refresh`` passes.
    gap_refresh : int or None
        Passes between the full gap passes of gap sampling and the cache (their oracle calls
        count); None: the first only.
    cache, cache_F, cache_nu
        The gap-based cache of `BCFW` (Osokin et al. 2016, Sec. 3.3) over the labellings alpha_i
        holds: the best of them, argmax H_i(y; w) from the unary scores the step computes anyway,
        replaces the Viterbi call when its gap estimate reaches max(F g_i, nu/n g).  Here the
        kernel-row product, not Viterbi, is the cost of a step, so the cache saves oracle calls
        rather than time.
    step : {"fw", "pairwise", "away"}
        The Frank-Wolfe step of Alg. B.1, the block pairwise step (BCPFW, Osokin et al. 2016,
        App. D Alg. 3): weight moves from the away labelling argmin_{alpha_i(y) > 0} H_i(y; w) to
        y*, which the explicit alpha makes cheap (H_i of a stored labelling is a sum of its unary
        scores and transitions), or the block away step (BCAFW): away from that labelling when its
        gap beats the FW gap, as in `BCFW`.  FW steps converge at the sublinear rate when the
        optimum lies on a face of the block simplices, as it usually does; pairwise and away steps
        converge fast.
    averaging : {None, "weighted", "suffix"}
        Report the weighted (14) or 0.5-suffix (15) average of the iterates (Alg. B.1, optional
        line 7); kept lazily in O(T_i K + K^2) per step.  A checkpoint then decodes twice.
    kernel_cache_mb : float >= 0
        Memory for cached kernel rows of training blocks (`KernelRowCache`); all of them
        take 8 N^2 bytes for N training positions.

    Notes
    -----
    A block step costs one kernel-row product O(T_i N K) (plus O(T_i N F) to compute the rows
    when not cached) and O(T_i K + K^2) for the update; the time per step therefore grows with
    the number of training positions N, not with the number of iterations (the expansion is
    over training positions, not over visited corners).  The state (`KernelBCFWState`)
    is complete: a warm start continues the run exactly, a new lam rescales w = A alpha, a new
    kernel keeps alpha (a point of the same dual domain).  Ctrl-C ends the solve after the
    current block step with the best evaluated iterate.
    """

    name = "kernel-bcfw"
    PARAMS = (
        Param("kernel", "rbf", "choice", KERNELS,
              help="Kernel-BCFW: kappa on one position's features: rbf, linear or poly."),
        Param("gamma", 0.05, "float", low=0.0, low_open=True,
              help="Kernel-BCFW: gamma of rbf exp(-gamma||x-x'||^2) and poly (gamma<x,x'> + coef0)^degree."),
        Param("degree", 3, "int", low=1, help="Kernel-BCFW: degree of the poly kernel."),
        Param("coef0", 1.0, "float", help="Kernel-BCFW: coef0 of the poly kernel."),
        Param("step_size", "linesearch", "choice", KERNEL_STEP_SIZES,
              help="Line search (Alg. 1 line 7) or the predefined 2n/(k+2n)."),
        _ENGINE["sampling"],
        _ENGINE["step"],
        Param("averaging", None, "choice", KERNEL_AVERAGINGS, help="Averaging of the iterates (eqs. (14), (15))."),
        _ENGINE["gap_refresh"], _ENGINE["cache"], _ENGINE["cache_F"], _ENGINE["cache_nu"],
        Param("kernel_cache_mb", 1024.0, "float", low=0.0,
              help="Kernel-BCFW: memory (MB) for cached kernel rows of training examples."),
    )

    kernel: str
    gamma: float
    degree: int
    coef0: float
    step_size: str
    sampling: str
    step: str
    averaging: str | None
    gap_refresh: int | None
    cache: bool
    cache_F: float
    cache_nu: float
    kernel_cache_mb: float

    def __init__(self, kernel: str = "rbf", gamma: float = 0.05, degree: int = 3, coef0: float = 1.0,
                 step_size: str = "linesearch", sampling: str = "uniform", step: str = "fw",
                 averaging: str | None = None, kernel_cache_mb: float = 1024.0, gap_refresh: int | None = 10,
                 cache: bool = False, cache_F: float = 0.25, cache_nu: float = 0.01) -> None:
        self._init_params(locals())

    @property
    def _uses_gaps(self) -> bool:
        """Gap sampling and the cache read the block gaps (and need the full gap passes)."""
        return self.sampling in ("gap", "max_gap") or bool(self.cache)

    @property
    def label(self) -> str:
        parts = [f"kernel-{ {'pairwise': 'BCPFW', 'away': 'BCAFW'}.get(self.step, 'BCFW')}-{self.kernel}"]
        if self.sampling != "uniform":
            parts.append(self.sampling)
        if self.cache:
            parts.append("cache")
        if self.step_size == "predefined":
            parts.append("fixed")
        if self.averaging:
            parts.append({"weighted": "wavg", "suffix": "tavg"}[self.averaging])
        return "-".join(parts)

    @property
    def spec(self) -> KernelSpec:
        return (self.kernel, float(self.gamma), int(self.degree), float(self.coef0))

    # ------------------------------------------------------------ state
    def init_state(self, problem: Problem, state: object | None,
                   rng: int | np.random.Generator | None) -> KernelBCFWState:
        kind = kernel_model_kind(problem.model)
        data = KernelData(problem, kind, self.spec, self.kernel_cache_mb * 2.0 ** 20)
        model: Any = problem.model  # a ChainModel or MulticlassModel (kernel_model_kind)
        warn_if_large(data.N, int(model.n_features), data.K, problem.n, self.kernel_cache_mb, data.edges,
                      stacklevel=4)
        st = continue_or_restart(state, KernelBCFWState, problem)
        if st is not None:
            self._continue(problem, st)
        else:
            st = KernelBCFWState(problem, data, rng, self.sampling)
            self._new_average(st)
        self._data, self._problem = data, problem
        self._one_blas_thread = _blas_limiter()
        self._calls = 0
        self._hits = 0
        self._passes_done = 0
        self._last: tuple[int, KernelExpansion] | None = None  # (k, expansion) of the last checkpoint
        return st

    def _new_average(self, st: KernelBCFWState) -> None:
        st.avg = LazyAverage(self.averaging, st.theta, st.ell) if self.averaging else None

    def _continue(self, problem: Problem, st: KernelBCFWState) -> None:
        """Carry a previous state into this solve: rescale to a new lam, adapt sampler and average."""
        if st.lam != problem.lam:
            st.rescale_lam(problem.lam)
            st.needs_refresh = True  # the block gaps were those of another w
        if st.sampler.kind != self.sampling:
            st.sampler = BlockSampler(self.sampling, problem.n, st.rng)
            st.needs_refresh = True
        if (st.avg.kind if st.avg is not None else None) != self.averaging:
            self._new_average(st)

    def checkpoint_due(self, st: KernelBCFWState, since_check: int, done: int, stop: Any, monitor: Monitor) -> bool:
        return refresh_due(self._uses_gaps, self.gap_refresh, st.passes) or super().checkpoint_due(
            st, since_check, done, stop, monitor)

    # ------------------------------------------------------------ passes
    def run_pass(self, problem: Problem, st: KernelBCFWState, flag: InterruptFlag) -> None:
        """n block steps (fewer if Ctrl-C arrives: the pass ends after the current step)."""
        st.sampler.start_pass()
        with self._one_blas_thread():
            for _ in range(problem.n):
                if flag.requested:
                    break
                self._block_step(problem, st, st.sampler.next())
            else:
                st.passes += 1
                self._passes_done += 1
        if st.avg is not None:
            st.avg.renormalise()

    def _block_step(self, problem: Problem, st: KernelBCFWState, i: int) -> None:
        """Alg. B.1 lines 4-7 on block i (with ``step="pairwise"``: the block pairwise step)."""
        data = self._data
        n, lam = problem.n, problem.lam
        o0, o1 = data.offsets[i], data.offsets[i + 1]
        Ki = data.rows(i)
        beta = st.beta
        U = Ki @ beta                      # unary scores of x_i at w = A alpha (Alg. B.1 line 4)
        y_true = data.labels[i]
        # lam <w_i, w> - l_i, the block gap's part from w_i, from the same scores (read by gap
        # sampling, the cache and the away test only)
        base = 0.0
        if self._uses_gaps or self.step == "away":
            wiw = float(np.sum(beta[o0:o1] * U)) + (float(np.sum(st.wpi[i] * st.wp)) if data.edges else 0.0)
            base = lam * wiw - st.li[i]
        y_star, H, hit = self._corner(st, i, U, y_true, base, n)
        L_s = hamming_loss(y_true, y_star) / n
        gfixed = 2.0 * n / (st.k + 2.0 * n) if self.step_size == "predefined" else -1.0
        avg = st.avg
        if avg is not None:
            rho, inv_c = avg.begin_step()
            NK = st.N * st.K
            uB = avg.u[:NK].reshape(st.N, st.K)[o0:o1]
            uP = avg.u[NK:].reshape(st.K, st.K)
        else:
            rho, inv_c, uB, uP = 0.0, 0.0, _NO_ROWS, _NO_ROWS
        alpha_i = st.alpha[i]
        block, trans = (Ki[:, o0:o1], U, beta[o0:o1]), (st.wp, st.wpi[i], data.edges)
        step, a_slot, H_a = self.step, -1, 0.0
        if step != "fw":
            a_slot = away_slot(alpha_i.Ys, alpha_i.weights, alpha_i.m, U, st.wp, y_true)
        if step == "away":  # the away step only when its gap beats the FW gap (Osokin et al. Alg. 2)
            H_a = hamming_loss(y_true, alpha_i.Ys[a_slot]) + labelling_score(U, st.wp, alpha_i.Ys[a_slot]) - \
                labelling_score(U, st.wp, y_true)
            if base + H / n >= -(base + H_a / n) or alpha_i.weights[a_slot] >= 1.0 - ALPHA_EPS:
                step = "fw"
        if step == "away":
            y_away = alpha_i.Ys[a_slot].copy()
            dl = st.li[i] - hamming_loss(y_true, y_away) / n
            w_a = alpha_i.weights[a_slot]
            gamma, _ = kernel_block_step(block, trans, (1.0, y_away, y_true, 1.0 / (lam * n), dl),
                                         (lam, w_a / (1.0 - w_a), gfixed), (uB, uP, inv_c))
            alpha_i.away_update(a_slot, gamma)
        elif step == "pairwise":
            # BCPFW (Osokin et al. 2016, App. D Alg. 3): weight moves from the away labelling to y*
            y_away = alpha_i.Ys[a_slot].copy()
            dl = L_s - hamming_loss(y_true, y_away) / n
            gamma, _ = kernel_block_step(block, trans, (0.0, y_away, y_star, 1.0 / (lam * n), dl),
                                         (lam, alpha_i.weights[a_slot], gfixed), (uB, uP, inv_c))
            alpha_i.pairwise_update(a_slot, y_star, gamma)
        else:
            dl = L_s - st.li[i]
            gamma, _ = kernel_block_step(block, trans, (-1.0, y_true, y_star, 1.0 / (lam * n), dl), (lam, 1.0, gfixed),
                                         (uB, uP, inv_c))
            alpha_i.fw_update(y_star, gamma)
        if self._uses_gaps:  # g_i before the step (eq. (6) of Osokin et al.): the sampler's and the cache's
            self._record_gap(st, i, base + H / n, hit)
        st.li[i] += gamma * dl
        st.ell += gamma * dl
        st.k += 1
        if avg is not None:
            avg.end_step(rho, st.ell)

    def _corner(self, st: KernelBCFWState, i: int, U: npt.NDArray[np.float64], y_true: npt.NDArray[np.int64],
                base: float, n: int) -> tuple[npt.NDArray[np.int64], float, bool]:
        """(y*, H_i(y*; w), cache hit): the best stored labelling when the cache rule takes it,
        else the loss-augmented Viterbi labelling (an oracle call)."""
        alpha_i = st.alpha[i]
        if self.cache and not st.needs_refresh:
            slot, H = best_slot(alpha_i.Ys, alpha_i.m, U, st.wp, y_true)
            if cache_hit(base + H / n, st.oracle_gaps[i], st.full_gap, self.cache_F, self.cache_nu, n):
                self._hits += 1
                return alpha_i.Ys[slot].copy(), H, True
        y_star, H = chain_max_oracle(U, st.wp, y_true)
        self._calls += 1
        return y_star, H, False

    @staticmethod
    def _record_gap(st: KernelBCFWState, i: int, g: float, hit: bool) -> None:
        if st.sampler.adaptive:
            st.sampler.update(i, g)
        if not hit:
            st.oracle_gaps[i] = g

    # ------------------------------------------------------------ certificate
    def exact_point(self, problem: Problem,
                    st: KernelBCFWState) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
        """(beta, P, l) of w = A alpha rebuilt from the explicit alpha (the certificate's point)."""
        data = self._data
        inv_ln = 1.0 / (problem.lam * problem.n)
        beta = np.zeros((st.N, st.K))
        P = np.zeros((st.K, st.K))
        ell = 0.0
        for i, a in enumerate(st.alpha):
            B, Pi, loss = block_coefficients(a.Ys[:a.m], a.weights[:a.m], data.labels[i], st.K, inv_ln)
            beta[data.offsets[i]:data.offsets[i + 1]] = B
            if data.edges:
                P += Pi
            ell += loss / problem.n
        return beta, P, ell

    def decoding_pass(self, problem: Problem,
                      points: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]],
                      gaps_of: KernelBCFWState | None = None
                      ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
        """Decode every training example at each point (beta, P): per point (hinge sum, ||w||^2),
        and with ``gaps_of`` (the state whose exact point is points[0]) its block gaps.

        sum_i max_y H_i(y; w) >= 0 by loss-augmented Viterbi on the unary scores K_i beta (one
        product for all points), and ||w||^2 = sum beta * (K beta) + ||P||^2 from the same scores.
        The block gap g_i = lam <w_i, w> - l_i + H_i / n (eq. (6) of Osokin et al. 2016) takes
        <w_i, w> = sum beta_i * (K_i beta) + <P_i, P> from them too."""
        data = self._data
        K, n, lam = data.K, problem.n, problem.lam
        Bs = np.concatenate([b for b, _ in points], axis=1) if len(points) > 1 else points[0][0]
        hinge = np.zeros(len(points))
        sq = np.array([float(np.sum(P * P)) for _, P in points])
        gaps = None if gaps_of is None else np.zeros(n)
        for i in range(n):
            o0, o1 = data.offsets[i], data.offsets[i + 1]
            U_all = data.rows(i) @ Bs
            for j, (beta, P) in enumerate(points):
                U = np.ascontiguousarray(U_all[:, j * K:(j + 1) * K])
                _, H = chain_max_oracle(U, P, data.labels[i])
                hinge[j] += max(H, 0.0)  # y_i itself has H_i = 0: the max is never below
                wiw = float(np.sum(beta[o0:o1] * U))
                sq[j] += wiw
                if j == 0 and gaps is not None and gaps_of is not None:
                    if data.edges:
                        wiw += float(np.sum(gaps_of.wpi[i] * P))
                    gaps[i] = lam * wiw - gaps_of.li[i] + H / n
        return hinge, sq, gaps

    def checkpoint(self, problem: Problem, st: KernelBCFWState, monitor: Monitor, initial: bool,
                   monitoring_only: bool = False) -> float:
        """Rebuild w = A alpha from alpha, decode every example there: P(w), D(alpha), gap."""
        n, lam = problem.n, problem.lam
        refresh = self._uses_gaps and not monitoring_only and (
            st.needs_refresh if initial else refresh_due(True, self.gap_refresh, st.passes))
        with monitor.monitoring(), self._one_blas_thread():
            beta, P, ell = self.exact_point(problem, st)
            points = [(beta, P)]
            avg = st.averaged()
            if avg is not None:
                points.append((np.ascontiguousarray(avg[0]), np.ascontiguousarray(avg[1])))
            hinge, sq, gaps = self.decoding_pass(problem, points, st if refresh else None)
            monitor.monitor_calls += n * (len(points) - refresh)
            if gaps is not None:  # the algorithm's own gap pass: its oracle calls count
                self._refresh(st, gaps)
            j = len(points) - 1          # the reported iterate: the average when averaging
            ell_rep = ell if avg is None else avg[2]
            primal = 0.5 * lam * sq[j] + hinge[j] / n
            dual = -0.5 * lam * sq[j] + ell_rep
            gap = primal - dual
            expansion = self.expansion(*points[j])
            self._last = (st.k, expansion)
            cache = self._data.cache
            monitor.record(expansion, self._calls / n, self._calls, primal, dual, gap,
                           engine_passes=self._passes_done, iterations=st.k, support=expansion.n_support,
                           cache_hits=self._hits,
                           alpha_support=float(np.mean([a.m for a in st.alpha])),
                           kernel_cache_hit_rate=cache.hits / max(cache.hits + cache.misses, 1))
        return gap

    def _refresh(self, st: KernelBCFWState, gaps: npt.NDArray[np.float64]) -> None:
        """A full gap pass's block gaps become the sampler's and the cache's estimates; its
        oracle calls count."""
        take_full_gaps(st, gaps)
        self._calls += st.n

    def expansion(self, beta: npt.NDArray[np.float64], P: npt.NDArray[np.float64]) -> KernelExpansion:
        """The predictor of w given by (beta, P): the support positions and their rows."""
        data = self._data
        keep = np.flatnonzero(np.any(beta != 0.0, axis=1))
        support = data.positions[keep]
        if sp.issparse(support):
            support = sp.csr_matrix(support)
        return KernelExpansion(support, beta[keep].copy(), P.copy(), self.spec, data.kind)

    def result_w(self, st: KernelBCFWState) -> KernelExpansion:
        if self._last is not None and self._last[0] == st.k:
            return self._last[1]
        avg = st.averaged()
        if avg is not None:
            return self.expansion(np.ascontiguousarray(avg[0]), np.ascontiguousarray(avg[1]))
        beta, P, _ = self.exact_point(self._problem, st)  # a solve ends at a checkpoint: rarely reached
        return self.expansion(beta, P)


def _blas_limiter() -> Callable[[], AbstractContextManager[Any]]:
    """A callable giving a context in which BLAS runs on one thread (a null context without threadpoolctl).

    Why: the products of a step are small (T_i rows times N columns), and OpenBLAS's threads only add
    synchronisation to them.  Measured on 1,000 OCR words (N = 7,558, 2 cores): the (8 x N) @ (N x 26)
    product takes 0.13 ms on one thread against 0.27 ms on two; with the other core busy, two threads
    made a whole pass 15x slower (4.7 ms a step).  threadpoolctl comes with scikit-learn."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - scikit-learn depends on it
        return contextlib.nullcontext
    controller = ThreadpoolController()
    return functools.partial(controller.limit, limits=1, user_api="blas")

