"""Kernelized BCFW as a storage of the engine (BCFW paper, App. B.5, Alg. B.1).

Alg. B.1 runs BCFW on the SSVM dual with w = A alpha "only given implicitly as a sparse combination
of the corresponding kernel functions" (App. B.5).  The joint kernel of a chain decomposes over
positions (`structfw.oracles.kernel_chain`):

    k((x, y), (x', y')) = sum_{t,s} [y_t == y'_s] kappa(x_t, x'_s) + ⟨E(y), E(y')⟩,

kappa "linear", "rbf" or "poly" on the features of one position, E(y) the transition counts of
ChainModel (kept linear); MulticlassModel is a chain of length 1.  Every w = A alpha lies in the span
of the feature vectors phi(x_p) of the N training positions, so the dual depends on kappa only through
their Gram matrix G = [kappa(x_p, x_q)].  `KernelMap` factors it once, G = Z Z^T with Z (N x r) the
pivoted Cholesky factor, and row z_p of Z is the coordinate vector of phi(x_p) in an orthonormal basis
of the span: ⟨phi(x_p), phi(x_q)⟩ = ⟨z_p, z_q⟩.  The kernel problem is therefore the linear problem
of the same model on the inputs z_p -- the same dual, block gaps, line search (its dot products "the
suitable sum of kernel evaluations", App. B.5, precomputed) and oracle -- and `KernelBCFW` is the
engine (`BCFW`) run on those coordinates: w_i and w are stored as their coordinates in the span, and
every engine option applies (steps, sampling, the cache, averaging, MP-BCFW, minibatches, the compiled
passes).  docs/guide/kernel-bcfw.md explains the choice and its costs.

**Prediction.**  The first r pivots S of the factorisation span the same space, so phi(x) projects to
z(x) = L_S^{-1} kappa(x_S, x) (L_S = Z[S], lower triangular), and the unary score of label c is
⟨z(x), W_c⟩ = sum_{s in S} kappa(x, x_s) coef[s, c] with coef = L_S^{-T} W: a `KernelExpansion` over
the r pivot positions, exact for every x because w lies in the span.

**Tolerance and rank.**  The factorisation stops when the largest diagonal entry of the residual
G - Z Z^T falls to ``kernel_tol`` times the largest kappa(x_p, x_p) (the residual is PSD: its other
entries are smaller still).  ``kernel_rank`` caps r: Nystrom's approximation with greedy (pivoted)
landmarks, computed a column at a time without the N x N Gram matrix; the fit then solves the problem
of the kernel Z Z^T exactly, and the trace's ``kernel_residual`` says how far that is from kappa.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.linalg import lapack, solve_triangular

from ..oracles.kernel_chain import KERNELS, chain_decode, gram, squared_norms
from .base import Monitor, Param, continue_or_restart
from .bcfw import BCFW
from .plan import ENGINE_PARAMS, check_combination, engine_label, keeps_rows
from .problem import Problem

if TYPE_CHECKING:
    from .base import SolveResult, StopRule

#: training or support positions: a dense (N, F) array or a CSR matrix
Positions: TypeAlias = "npt.NDArray[np.float64] | sp.csr_matrix"
#: (kernel, gamma, degree, coef0): the kernel kappa
KernelSpec: TypeAlias = "tuple[str, float, int, float]"

#: methods that define a model's joint features, loss and oracles: a subclass of ChainModel or
#: MulticlassModel that overrides one of them is another model, which the joint kernel does not describe
_DEFINING = ("joint_feature", "psi", "loss", "loss_augmented_decode", "decode", "fixed_score", "score")


def _kernel_owner(model: object) -> type:
    """The class that declares the joint kernel ``model``'s features, loss and oracles define
    (ChainModel or MulticlassModel); ValueError for any other model."""
    # the model declares its kind (``joint_kernel_kind``); the solver imports no model class
    owner = next((c for c in type(model).__mro__ if "joint_kernel_kind" in vars(c)), None)
    if owner is not None and all(getattr(type(model), m, None) is getattr(owner, m, None) for m in _DEFINING):
        if not (getattr(model, "has_fixed_score", False) or getattr(model, "nonnegative_indices", None) is not None):
            return owner
    raise ValueError(
        f"solver 'kernel-bcfw' kernelizes ChainModel (unary features per position, transitions, normalised "
        f"Hamming loss) and MulticlassModel (a chain of length 1); got {type(model).__name__}, whose joint "
        "features, loss or oracles it cannot express as a kernel expansion: use a linear solver such as 'bcfw'")


def kernel_model_kind(model: object) -> str:
    """"chain" for ChainModel, "multiclass" for MulticlassModel (a chain of length 1, no transitions).

    Raises ValueError for any other model: the joint kernel describes exactly the joint features,
    Hamming / 0-1 loss and oracles of these two."""
    return str(_kernel_owner(model).joint_kernel_kind)  # type: ignore[attr-defined]  # declared by the owner


# ================================================================= size of a fit
#: a fit estimated above this many bytes, or this many multiply-adds per pass, is announced before
#: it starts (`warn_if_large`)
LARGE_FIT_BYTES = 2 ** 30
LARGE_FIT_FLOPS_PER_PASS = 1e11


class LargeFitWarning(RuntimeWarning):
    """A kernelized fit whose estimated memory or work per pass is large (said before it starts)."""


def estimate_fit_size(n_positions: int, n_features: int, n_states: int, n_examples: int,
                      kernel_rank: int | None = None, n_edges: bool = True, rows: bool = False) -> dict[str, float]:
    """Memory and work of a kernelized fit, before it starts (r = N: the worst case of the full map).

    Setting up, the full factorisation holds the N x N Gram matrix (8 N^2 bytes; none with a
    ``kernel_rank``); the fit holds the coordinates Z (8 N r bytes, and about as much again for the
    compiled oracle's non-zeros) and the engine's w_i: factored, N K + n K^2 numbers, or as rows of
    d = r K + K^2 coordinates (8 n d bytes when dense).  A pass computes the unary scores, N r K
    multiply-adds.

    Parameters
    ----------
    n_positions, n_features, n_states, n_examples : int
        N training positions (letters of all words; 1 per multiclass example), F features
        per position, K labels, n examples.
    kernel_rank : int or None
        The solver's ``kernel_rank`` (None: r = N, the most the full factorisation can give).
    n_edges : bool
        Chains have K x K transition weights; multiclass has none.
    rows : bool
        The options store the w_i as rows (`structfw.solvers.plan.keeps_rows`: minibatches), not factored.

    Returns
    -------
    dict
        ``rank`` (r), ``gram_bytes``, ``coords_bytes`` (Z), ``rows_bytes`` (the w_i: dense rows, or factored),
        ``memory_bytes`` (the larger of the set-up's and the fit's), ``flops_per_pass`` and
        ``setup_flops`` (N^2 F for G and N r^2 / 3 for the factor; N r F and N r^2 with a rank).
    """
    N, F, K, n = (int(v) for v in (n_positions, n_features, n_states, n_examples))
    r = N if kernel_rank is None else min(N, int(kernel_rank))
    gram_bytes = 8.0 * N * N if kernel_rank is None else 0.0
    coords = 8.0 * N * r
    edges = K * K if n_edges else 0
    w_i = 8.0 * n * (r * K + edges) if rows else 8.0 * (N * K + n * edges)
    setup = N * N * F + N * r * r / 3.0 if kernel_rank is None else N * r * F + N * r * r
    return dict(rank=float(r), gram_bytes=gram_bytes, coords_bytes=coords, rows_bytes=w_i,
                memory_bytes=max(gram_bytes + coords, 2.0 * coords + w_i), flops_per_pass=float(N) * r * K,
                setup_flops=float(setup))


def large_fit_message(est: dict[str, float], n_positions: int, n_features: int) -> str | None:
    """The warning for a fit that `estimate_fit_size` finds large, or None."""
    if est["memory_bytes"] <= LARGE_FIT_BYTES and est["flops_per_pass"] <= LARGE_FIT_FLOPS_PER_PASS:
        return None
    gb = 2.0 ** 30
    return (f"kernel-bcfw on {n_positions:,} training positions ({n_features} features each): about "
            f"{est['memory_bytes'] / gb:.1f} GB (Gram matrix {est['gram_bytes'] / gb:.1f} GB while it is factored, "
            f"coordinates {est['coords_bytes'] / gb:.1f} GB for rank {int(est['rank']):,}, the w_i "
            f"{est['rows_bytes'] / gb:.1f} GB) and {est['flops_per_pass']:.1e} multiply-adds a pass. Smaller and "
            "faster: cap the rank (kernel_rank, --kernel-rank: Nystrom's approximation of the kernel), train on a "
            "subsample, or use the linear BCFW (solver 'bcfw')")


def warn_if_large(n_positions: int, n_features: int, n_states: int, n_examples: int,
                  kernel_rank: int | None = None, n_edges: bool = True, stacklevel: int = 2,
                  rows: bool = False) -> str | None:
    """Issue a `LargeFitWarning` when the fit is large (see `estimate_fit_size`); returns the message
    or None."""
    msg = large_fit_message(estimate_fit_size(n_positions, n_features, n_states, n_examples, kernel_rank,
                                              n_edges, rows), n_positions, n_features)
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


# ================================================================= positions
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
        """argmax_y ⟨w, phi(x, y)⟩ for every input of a validated list X (the model's check_X)."""
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


# ================================================================= the map
def kernel_diagonal(positions: Positions, sqnorms: npt.NDArray[np.float64], spec: KernelSpec
                    ) -> npt.NDArray[np.float64]:
    """kappa(x_p, x_p) of every position (the diagonal of G, without G)."""
    kernel, gamma, degree, coef0 = spec
    if kernel == "rbf":
        return np.ones(sqnorms.shape[0])
    if kernel == "linear":
        return sqnorms.copy()
    return (gamma * sqnorms + coef0) ** degree


def _full_factor(positions: Positions, sq: npt.NDArray[np.float64], spec: KernelSpec,
                 floor: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """(Z, pivots) from LAPACK's pivoted Cholesky (dpstrf) of the whole Gram matrix.

    Why LAPACK: blocked and multithreaded, it factors OCR's 7,558 positions of 1,000 words in
    2.3-2.5 s (rank 7,375: duplicate letters), where a column-at-a-time loop reads the growing
    factor once per column (O(N r^2) memory traffic).  G is overwritten in place."""
    G = gram(positions, sq, positions, sq, *spec)
    # G is symmetric: its C-ordered buffer is the Fortran-ordered matrix LAPACK wants, uncopied
    c, piv, rank, info = lapack.dpstrf(G.T, tol=floor, lower=1, overwrite_a=1)
    if info < 0:  # pragma: no cover - an argument error of ours, not of the data
        raise RuntimeError(f"dpstrf failed with info={info}")
    for j in range(1, rank):  # above the diagonal c still holds G (columns: contiguous, no N x r temporary)
        c[:j, j] = 0.0
    Z = np.empty((G.shape[0], rank))
    Z[piv - 1] = c[:, :rank]
    return Z, (piv[:rank] - 1).astype(np.int64)


def _greedy_factor(positions: Positions, sq: npt.NDArray[np.float64], spec: KernelSpec,
                   diag: npt.NDArray[np.float64], floor: float, max_rank: int
                   ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """(Z, pivots) of at most ``max_rank`` pivoted Cholesky steps, one Gram column each: the
    largest remaining diagonal is the next pivot (Nystrom with greedy landmarks; O(N r) memory)."""
    N = diag.shape[0]
    Z = np.zeros((N, max_rank), order="F")
    d = diag.astype(np.float64, copy=True)
    pivots: list[int] = []
    for j in range(max_rank):
        p = int(np.argmax(d))
        if not d[p] > floor:
            break
        z = gram(positions[p:p + 1], sq[p:p + 1], positions, sq, *spec)[0]
        z -= Z[:, :j] @ Z[p, :j]
        z /= math.sqrt(d[p])
        z[pivots] = 0.0  # the residual vanishes on earlier pivots: keeps Z[pivots] triangular
        Z[:, j] = z
        d -= z * z
        pivots.append(p)
        d[p] = 0.0  # exactly (the earlier pivots' stay 0: z is 0 there)
    r = len(pivots)
    return np.ascontiguousarray(Z[:, :r]), np.array(pivots, np.int64)


class KernelMap:
    """Coordinates of the training positions' feature vectors: G = Z Z^T (module docstring).

    Parameters
    ----------
    model : ChainModel or MulticlassModel
        Whose joint kernel (`kernel_model_kind`); its K labels.
    X : list
        The training inputs, validated by the model.
    spec : (kernel, gamma, degree, coef0)
        kappa.
    tol : float >= 0
        The factorisation stops at a largest residual diagonal <= tol * max_p kappa(x_p, x_p)
        (never below N * machine epsilon of it: what is left is rounding).
    max_rank : int or None
        At most this many pivots (Nystrom's approximation), computed without the Gram matrix.

    Attributes
    ----------
    Z : ndarray (N, r)          coordinates of every training position, block after block
    pivots : ndarray (r,)       the positions S that span the space (Z[S] is lower triangular)
    residual : float            largest diagonal entry of G - Z Z^T left out
    offsets : ndarray (n + 1,)  example i owns positions offsets[i]:offsets[i+1]
    """

    def __init__(self, model: Any, X: Sequence[Any], spec: KernelSpec, tol: float = 1e-10,
                 max_rank: int | None = None) -> None:
        self.owner = _kernel_owner(model)
        self.kind = str(self.owner.joint_kernel_kind)  # type: ignore[attr-defined]  # declared by the owner
        self.K = int(model.n_states)
        self.spec, self.tol, self.max_rank = spec, float(tol), max_rank
        rows = [_as_rows(x, self.kind) for x in X]
        self.positions = _stack(rows)
        self.offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([r.shape[0] for r in rows], out=self.offsets[1:])
        sq = squared_norms(self.positions)
        diag = kernel_diagonal(self.positions, sq, spec)
        N = diag.shape[0]
        scale = float(diag.max()) if N else 0.0
        floor = max(self.tol, N * np.finfo(float).eps) * scale
        if max_rank is None or max_rank >= N:
            self.Z, self.pivots = _full_factor(self.positions, sq, spec, floor)
        else:
            self.Z, self.pivots = _greedy_factor(self.positions, sq, spec, diag, floor, int(max_rank))
        self.residual = float(np.max(diag - np.einsum("pr,pr->p", self.Z, self.Z), initial=0.0))
        self._L = np.ascontiguousarray(self.Z[self.pivots])
        if self.Z.shape[1] == 0:
            # kappa vanishes on every training position (all-zero inputs under a linear kernel): the
            # span is {0}; one zero coordinate keeps the linear model well-formed, and scores nothing
            self.Z = np.zeros((N, 1))
        support = self.positions[self.pivots]
        self.support = sp.csr_matrix(support) if sp.issparse(support) else _frozen(support)

    @property
    def rank(self) -> int:
        return int(self.Z.shape[1])

    def same(self, X_positions: Positions, spec: KernelSpec, tol: float, max_rank: int | None) -> bool:
        """Is this the map of these positions and kernel (a warm start may keep it)?"""
        if (spec, float(tol), max_rank) != (self.spec, self.tol, self.max_rank):
            return False
        P, Q = self.positions, X_positions
        if P.shape != Q.shape or sp.issparse(P) != sp.issparse(Q):
            return False
        return bool((P != Q).nnz == 0) if sp.issparse(P) else bool(np.array_equal(P, Q))

    # ------------------------------------------------------------ the linear problem
    def linear_model(self) -> Any:
        """The model whose linear problem on `inputs` is the kernel problem (r features)."""
        return self.owner(self.K, self.rank)

    def inputs(self) -> list[Any]:
        """The training inputs in coordinates: each example's rows of Z (views)."""
        o = self.offsets
        if self.kind == "multiclass":
            return [self.Z[i] for i in range(len(o) - 1)]
        return [self.Z[o[i]:o[i + 1]] for i in range(len(o) - 1)]

    def transform(self, positions: Positions) -> npt.NDArray[np.float64]:
        """z(x) = L_S^{-1} kappa(x_S, x) of every row: the coordinates of the projection of phi(x)
        on the span (of phi(x) itself for a training position)."""
        if self.pivots.shape[0] == 0:
            return np.zeros((positions.shape[0], self.rank))
        kx = gram(positions, squared_norms(positions), self.support, squared_norms(self.support), *self.spec)
        return np.ascontiguousarray(solve_triangular(self._L, kx.T, lower=True, check_finite=False).T)

    def expansion(self, w: npt.NDArray[np.float64]) -> KernelExpansion:
        """The predictor of a w in coordinates (the linear model's layout): coef = L_S^{-T} W."""
        K, r = self.K, self.rank
        W = np.asarray(w, dtype=np.float64)[:K * r].reshape(K, r).T
        m = self.pivots.shape[0]  # = r, but for a span {0}
        coef = solve_triangular(self._L, W, lower=True, trans="T", check_finite=False) if m else np.zeros((0, K))
        P = np.asarray(w, dtype=np.float64)[K * r:].reshape(K, K) if self.kind == "chain" else np.zeros((K, K))
        return KernelExpansion(self.support, coef, P, self.spec, self.kind)


class KernelState:
    """A kernelized fit's state: the engine's state (`BCFWState`) on the map's coordinates, and the map.

    Attributes of the engine's state are read through (``state.k``, ``state.w``, ...); ``n``, ``d``
    and ``fingerprint`` are those of the kernel problem's data, so that a warm start on other data
    is noticed (`continue_or_restart`)."""

    def __init__(self, engine: Any, kmap: KernelMap, problem: Problem) -> None:
        self.engine, self.kmap = engine, kmap
        self.n, self.d, self.fingerprint = problem.n, problem.d, problem.fingerprint

    def __getattr__(self, name: str) -> Any:
        if name == "engine":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.engine, name)


# ================================================================= the solver
KERNEL_PARAMS: tuple[Param, ...] = (
    Param("kernel", "rbf", "choice", KERNELS,
          help="Kernel-BCFW: kappa on one position's features: rbf, linear or poly."),
    Param("gamma", 0.05, "float", low=0.0, low_open=True,
          help="Kernel-BCFW: gamma of rbf exp(-gamma||x-x'||^2) and poly (gamma<x,x'> + coef0)^degree."),
    Param("degree", 3, "int", low=1, help="Kernel-BCFW: degree of the poly kernel."),
    Param("coef0", 1.0, "float", help="Kernel-BCFW: coef0 of the poly kernel."),
    Param("kernel_tol", 1e-10, "float", low=0.0,
          help="Kernel-BCFW: the factorisation of the Gram matrix stops at a residual diagonal <= this times "
               "the largest kappa(x, x)."),
    Param("kernel_rank", None, "int", low=1, none_ok=True,
          help="Kernel-BCFW: at most this many pivots (Nystrom's approximation of kappa); None (CLI: none): "
               "as many as the tolerance needs, an exact factorisation."),
)


class KernelBCFW(BCFW):
    """Kernelized BCFW (BCFW paper, App. B.5, Alg. B.1): the engine on the coordinates of the span
    of the training positions' feature vectors under a kernel kappa (`KernelMap`).

    Works for `ChainModel` and, as a chain of length 1, `MulticlassModel`; any other model is
    refused.  The dual, the block gaps, the line search and the oracle are those of Alg. B.1 (its
    dot products are the kernel's, factored once), and every option of `BCFW` applies.  The fitted
    predictor is a `KernelExpansion` over the factorisation's pivot positions (``SolveResult.w``;
    the estimator keeps it as ``kernel_expansion_``).  With ``kernel="linear"`` the iterates are
    those of ``BCFW`` with the same options and ``random_state`` (up to rounding).

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly"}
        kappa on the features of one position: exp(-gamma ||x - x'||^2), ⟨x, x'⟩, or
        (gamma ⟨x, x'⟩ + coef0)^degree.
    gamma : float > 0
        Of "rbf" and "poly".  The default 0.05 suits features of OCR's scale (binary 16x8
        images, mean ||x - x'||^2 = 41): of 0.01, 0.02, 0.05 and 0.1 it gave the lowest test
        error on 300- and 1,000-word subsets (docs/guide/kernel-bcfw.md).  For other data scale it
        as about 2 / (mean ||x - x'||^2) and tune it.
    degree, coef0 : int >= 1, float
        Of "poly"; coef0 = 1 keeps the lower-degree monomials in the kernel.
    kernel_tol : float >= 0
        The pivoted Cholesky factorisation of the Gram matrix stops when the largest diagonal of its
        residual is at most ``kernel_tol`` times the largest kappa(x_p, x_p): what is left out is
        below rounding at the default 1e-10.
    kernel_rank : int or None
        Cap the rank r of the factorisation: Nystrom's approximation of kappa with greedy landmarks,
        computed without the N x N Gram matrix, for training sets whose Gram matrix does not fit in
        memory.  The fit is then exact for the kernel Z Z^T; ``kernel_residual`` in the trace is the
        largest kappa(x_p, x_p) - ||z_p||^2 left out.
    step_size, oracle_quality, sampling, step, cache, cache_F, cache_nu, cache_size, averaging, \
gap_refresh, block_storage, max_dense_bytes, check_oracle, multi_plane, max_planes, max_approx_passes, \
plane_timeout, approx_rule, oracle_work, minibatch, asynchronous
        The engine's options (`BCFW`), on the kernel problem.  ``block_storage="auto"`` stores the
        w_i factored -- per-position label weights, no rows of r K coordinates, corner sets of
        labellings -- one block at a time, and as dense rows for minibatches.

    Notes
    -----
    Set-up computes the Gram matrix of the N training positions and factors it (LAPACK's dpstrf,
    O(N^2 F + N r^2)); a block step then costs O(T_i r K) for the unary scores plus the engine's
    step on rows of d = r K + K^2 coordinates.  The state (a `KernelState`) continues a run
    exactly; a new lam rescales w = A alpha as in `BCFW`; a new kernel starts afresh (its
    coordinates are those of another space).  Ctrl-C ends the solve after the current block step
    with the best evaluated iterate.
    """

    name = "kernel-bcfw"
    PARAMS = KERNEL_PARAMS + ENGINE_PARAMS
    #: when the options need rows, block_storage="auto" stores them dense: in the map's coordinates a
    #: row has r K numbers, dense in every label its block has taken, so sparse rows only add indices
    #: and merges (1,000 OCR words, rbf: 1.24 against 0.42 s a pass and 6.1 against 3.7 GB peak);
    #: one block at a time the w_i are stored factored, as for every `BCFW`
    dense_rows = True

    kernel: str
    gamma: float
    degree: int
    coef0: float
    kernel_tol: float
    kernel_rank: int | None

    def __init__(self, kernel: str = "rbf", gamma: float = 0.05, degree: int = 3, coef0: float = 1.0,
                 kernel_tol: float = 1e-10, kernel_rank: int | None = None, step_size: str = "linesearch",
                 sampling: str = "uniform", step: str = "fw", cache: bool = False, cache_F: float = 0.25,
                 cache_nu: float = 0.01, cache_size: int = 50, averaging: str | None = None,
                 gap_refresh: int | None = 10, block_storage: str = "auto", max_dense_bytes: int = 2 * 1024 ** 3,
                 check_oracle: bool = True, multi_plane: bool = False, max_planes: int = 1000,
                 max_approx_passes: int = 1000, plane_timeout: int = 10, approx_rule: str = "work",
                 oracle_work: float = 10.0, minibatch: int = 1, asynchronous: bool = False,
                 oracle_quality: float = 1.0) -> None:
        self._init_params(locals())
        check_combination(self)

    @property
    def label(self) -> str:
        """E.g. "kernel-BCPFW-rbf-wavg": the engine's label with the kernel after the step's name."""
        parts = engine_label(self).split("-")
        at = next(j for j, p in enumerate(parts) if p.startswith("BC")) + 1
        return "-".join(["kernel", *parts[:at], self.kernel, *parts[at:]])

    @property
    def spec(self) -> KernelSpec:
        return (self.kernel, float(self.gamma), int(self.degree), float(self.coef0))

    def kernel_map(self, problem: Problem) -> KernelMap:
        """The map of ``problem``'s training positions under this solver's kernel."""
        N, F, K, n, chain = fit_shape(problem.model, problem.X)
        warn_if_large(N, F, K, n, self.kernel_rank, chain, stacklevel=4, rows=keeps_rows(self))
        return KernelMap(problem.model, problem.X, self.spec, self.kernel_tol, self.kernel_rank)

    def solve(self, problem: Problem, stop: StopRule, state: object | None = None,
              rng: int | np.random.Generator | None = None, monitor: Monitor | None = None) -> SolveResult:
        """`Solver.solve` of the engine on the map's coordinates; the result's w is a `KernelExpansion`
        and its state a `KernelState`."""
        self.validate_params()
        _kernel_owner(problem.model)
        prev = continue_or_restart(state, KernelState, problem)
        kmap = _kept_map(self, prev, problem)
        if kmap is None:
            kmap = self.kernel_map(problem)
        mapped = _MappedProblem(kmap, problem)
        if monitor is None:
            monitor = Monitor(problem, stop, {"solver": self.label})
        monitor.present = kmap.expansion
        try:
            res = super().solve(mapped, stop, prev.engine if prev is not None and prev.kmap is kmap else None,
                                rng, monitor)
        finally:
            monitor.present = None
        res.trace.meta["kernel_map_rank"] = int(kmap.pivots.shape[0])
        res.trace.meta["kernel_residual"] = kmap.residual
        continued = prev is not None and res.state is prev.engine
        res.state = prev if continued else KernelState(res.state, kmap, problem)
        return res

    def result_w(self, ctx: Any) -> KernelExpansion:  # type: ignore[override]  # the predictor, not w
        return cast(_MappedProblem, ctx.problem).kmap.expansion(super().result_w(ctx))


class _MappedProblem(Problem):
    """The linear problem on a kernel map's coordinates, with the map that turns its w into the
    kernel predictor (`KernelMap.expansion`): the solve's own, so the solver object keeps none."""

    def __init__(self, kmap: KernelMap, problem: Problem) -> None:
        super().__init__(kmap.linear_model(), kmap.inputs(), problem.Y, problem.lam, executor=problem.executor)
        self.kmap = kmap


def _kept_map(solver: KernelBCFW, prev: KernelState | None, problem: Problem) -> KernelMap | None:
    """The previous state's map when it is this problem's under this kernel, else None (with a
    warning when a state was given: its coordinates are those of another feature space)."""
    if prev is None:
        return None
    positions = _stack([_as_rows(x, prev.kmap.kind) for x in problem.X])
    if prev.kmap.same(positions, solver.spec, solver.kernel_tol, solver.kernel_rank):
        return prev.kmap
    warnings.warn("warm start: the kernel (kernel, gamma, degree, coef0, kernel_tol or kernel_rank) changed, so "
                  "the previous state's coordinates are those of another feature space; starting afresh",
                  RuntimeWarning, stacklevel=4)
    return None
