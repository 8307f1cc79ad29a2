"""Tree-structured part models for pose estimation (pictorial structures).

The LSP pose experiment of Osokin et al. (2016, Sec. 5 and App. I, after Chen & Yuille
2014): P parts (joints) on a candidate grid of H x W positions, joined by a tree.  A pose
is y = (y_1..y_P), y_p = (row, col) in the grid, and

    ⟨w, phi(x, y)⟩ = sum_p ⟨w_p, f(x, y_p)⟩
                     - sum_{p != root} (a_p dx_p^2 + b_p dx_p + c_p dy_p^2 + d_p dy_p),

with (dy_p, dx_p) = (y_p - y_parent(p)) / s the offset of part p from its parent in units
of ``displacement_scale`` s (rows, columns).  The joint feature is therefore

    phi(x, y) = [ f(x, y_1) ; ... ; f(x, y_P) ;  -(dx_p^2, dx_p, dy_p^2, dy_p) for p != root ],

P F unary coordinates (part p, feature k at p F + k) followed by 4 per edge (in the order
of the non-root parts, ``edge_offset + 4 slot[p] + (0: a, 1: b, 2: c, 3: d)``).  The rest
position of a part is learned by the linear weights (a (dx - r)^2 = a dx^2 - 2 a r dx + const).

The quadratic weights a_p, c_p are the model's ``nonnegative_indices``: with a_p, c_p >= 0
every spring is a concave function of the offset, so the messages of max-product are
generalized distance transforms (Felzenszwalb & Huttenlocher 2005), O(H W) per edge
instead of O((H W)^2) (`structfw.oracles.pose`).  This is the positivity constraint of the
paper's App. H; every solver keeps those coordinates >= 0.  (The oracle stays exact for any
sign, by a slower fallback on lines where a weight is negative.)

The task loss is the fraction of parts placed farther than ``tolerance`` grid cells
(Euclidean) from the truth,

    Delta(y_true, y) = (1/P) sum_p [ ||y_p - y_p^true|| > tolerance ],

a sum over parts, so loss-augmented decoding adds (1/P) [dist > tolerance] to part p's
unary scores and is again one exact tree max-product: the potential-level oracle
`structfw.oracles.potentials.pose_hinge` on the part scores and springs at w.

Inputs: one shared feature map per image, ``x`` of shape (H, W, F) (e.g. HOG cells of the
image, `structfw.datasets.load_pose`), read by every part through its own weights w_p.  A
shared map keeps memory at H W F numbers per image instead of P H W F for per-part
features; float32 maps are kept as float32 (scores are computed in float64).

Part filters.  With ``window = k > 1`` the appearance feature of a part at position u is
not the single map entry x[u] but the k x k map entries around it,

    f(x, u) = [ x[u + s o] for o in {-(k-1)/2 .. (k-1)/2}^2 ]     (zeros off the grid),

``s = window_stride`` cells apart: a linear filter of k x k HOG blocks per part, the part
templates of pictorial structures / deformable part models (Felzenszwalb et al. 2010; Yang &
Ramanan 2011 use 5 x 5 cells), the unaries of the paper's model being CNN scores instead.
The unary score map is then the correlation of the feature map with each part's filter
(one matrix product and k^2 shifted sums), and phi has P k^2 F unary coordinates.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..oracles.graph import forest_schedule
from ..oracles.potentials import pose_grid_coefficients, pose_loss, pose_search
from ..oracles.pose import pose_energy, pose_max_product, tree_order
from ._validation import (MAX_TABLE_ENTRIES, as_float_array, check_int_param, check_joint_feature_size,
                          check_sequence_of_inputs, check_size, from_json_text, one_example_error)
from .base import CheckedModel, checked, register_model

INFERENCE = ("dt", "brute")


def check_parent(parent: object, n_parts: int) -> npt.NDArray[np.int64]:
    """A parent array as int64 (P,): exactly one root (-1), parents in 0..P-1, no cycle."""
    parent = from_json_text(parent, "parent")
    try:
        arr = np.asarray(parent)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"parent could not be converted to an array: {exc}") from exc
    if arr.shape != (n_parts,) or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"parent must be {n_parts} integers (n_parts), one -1 for the root, got {parent!r}")
    arr = arr.astype(np.int64)
    roots = np.flatnonzero(arr == -1)
    if roots.size != 1:
        raise ValueError(f"parent must have exactly one root (-1), got {roots.size}: {arr.tolist()}")
    bad = np.flatnonzero((arr < -1) | (arr >= n_parts) | (arr == np.arange(n_parts)))
    if bad.size:
        p = int(bad[0])
        raise ValueError(f"parent[{p}] = {arr[p]} is not a part other than {p} (0..{n_parts - 1}) or -1")
    child = np.flatnonzero(arr >= 0)
    edges = np.stack([arr[child], child], 1)
    if forest_schedule(n_parts, edges) is None:
        raise ValueError(f"parent {arr.tolist()} has a cycle: it must describe a tree")
    return arr


def _check_grid(grid_shape: object) -> tuple[int, int]:
    g = from_json_text(grid_shape, "grid_shape")
    try:
        H, W = (int(t) for t in g)
        ok = all(float(t) == int(t) for t in g)
    except (TypeError, ValueError):
        raise ValueError(f"grid_shape must be (H, W), two integers >= 1, got {grid_shape!r}") from None
    if not ok or H < 1 or W < 1:
        raise ValueError(f"grid_shape must be (H, W), two integers >= 1, got {grid_shape!r}")
    return H, W


def _positive_float(value: object, name: str, allow_zero: bool) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero) or isinstance(value, bool):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {value!r}")
    return v


@register_model
class PoseModel(CheckedModel):
    """Pictorial structure: parts on a grid, a tree of quadratic springs (module docstring).

    Parameters
    ----------
    n_parts : int >= 1
        P, the number of parts.
    parent : array-like of P ints, or its JSON text
        The tree: parent[p] is the part p hangs from, -1 for the single root.
    n_features : int >= 1
        F, features per grid position of the shared feature map.
    grid_shape : (H, W), or its JSON text
        The candidate positions of every part.
    tolerance : float >= 0, default 2.0
        A part counts as wrong in the loss when it is more than this many grid cells from
        the truth.
    displacement_scale : float > 0, default 1.0
        s: offsets enter phi in units of s grid cells, so that the spring features have
        the scale of the unary ones (s about a limb length keeps them near 1).
    inference : {"dt", "brute"}, default "dt"
        Messages by distance transforms, O(P H W), or by brute force, O(P (H W)^2) (a
        reference; both exact).
    window : odd int >= 1, default 1
        k: each part reads the k x k map entries around its position (a part filter,
        module docstring); 1 reads the entry at the position only.
    window_stride : int >= 1, default 1
        s: grid cells between the entries of the window (the window spans s (k - 1) + 1
        cells).

    Attributes
    ----------
    size_joint_feature : int
        d = P k^2 F + 4 (P - 1).
    edge_offset : int
        P k^2 F, where the spring weights start.
    offsets : (k^2, 2) int64
        The (row, col) offsets of the window's entries, row-major.
    slot : (P,) int64
        The edge slot of each non-root part (-1 for the root).
    nonnegative_indices : (2 (P - 1),) int64
        The coordinates of the quadratic weights a_p, c_p.

    Notes
    -----
    Inputs: ``x`` an (H, W, F) float array (float32 kept).  Labellings: (P, 2) int64 of
    (row, col) grid positions.  ``joint_feature`` and ``psi`` return dense vectors.  Called by a
    user, every method checks its arguments; the engine calls them unchecked on the data it
    validated once (`structfw.models.base.checked`).  d is at most
    `structfw.models._validation.MAX_SIZE_JOINT_FEATURE`, and the part-filter responses of one
    image, P k^2 H W, at most `structfw.models._validation.MAX_TABLE_ENTRIES`.
    """

    def __init__(self, n_parts: int, parent: npt.ArrayLike | str, n_features: int,
                 grid_shape: Sequence[int] | str, tolerance: float = 2.0, displacement_scale: float = 1.0,
                 inference: str = "dt", window: int = 1, window_stride: int = 1) -> None:
        self.n_parts = P = check_int_param(n_parts, "n_parts", 1)
        self.n_features = F = check_int_param(n_features, "n_features", 1)
        self.grid_shape = H, W = _check_grid(grid_shape)
        self.window = k = check_int_param(window, "window", 1)
        if k % 2 == 0:
            raise ValueError(f"window must be an odd integer >= 1 (the window is centred on the part), got {window!r}")
        # before the tree, the window's offsets or any map of the grid is built
        check_joint_feature_size("PoseModel", "n_parts * window ** 2 * n_features + 4 * (n_parts - 1)",
                                 P * k * k * F + 4 * (P - 1))
        check_size("PoseModel", "n_parts * window ** 2 * H * W (grid_shape = (H, W))", P * k * k * H * W,
                   MAX_TABLE_ENTRIES, "the part-filter responses of one image")
        self.parent = check_parent(parent, P)
        self.tolerance = _positive_float(tolerance, "tolerance", True)
        self.displacement_scale = _positive_float(displacement_scale, "displacement_scale", False)
        if inference not in INFERENCE:
            raise ValueError(f"inference must be one of {INFERENCE}, got {inference!r}")
        self.inference = inference
        self.window_stride = check_int_param(window_stride, "window_stride", 1)
        r = np.arange(k, dtype=np.int64) - k // 2
        self.offsets = np.stack(np.meshgrid(r, r, indexing="ij"), -1).reshape(-1, 2) * self.window_stride
        self.order = tree_order(self.parent)
        self.root = int(self.order[0])
        self.children = np.flatnonzero(self.parent >= 0)  # one edge slot each, in part order
        self.slot = np.full(P, -1, np.int64)
        self.slot[self.children] = np.arange(self.children.size)
        self.edge_offset = P * k * k * F
        self.size_joint_feature = self.edge_offset + 4 * self.children.size
        base = self.edge_offset + 4 * np.arange(self.children.size, dtype=np.int64)
        self.nonnegative_indices = np.sort(np.concatenate([base, base + 2]))

    def get_config(self) -> dict[str, Any]:
        # JSON scalars only: the tree and the grid travel as JSON text, which the constructor takes
        return {"n_parts": self.n_parts, "parent": json.dumps(self.parent.tolist()),
                "n_features": self.n_features, "grid_shape": json.dumps(list(self.grid_shape)),
                "tolerance": self.tolerance, "displacement_scale": self.displacement_scale,
                "inference": self.inference, "window": self.window, "window_stride": self.window_stride}

    # ------------------------------------------------------------ weights
    def unary_weights(self, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """w's unary part as (P, k^2, F): [p, j] is part p's filter at window offset ``offsets[j]``."""
        return np.asarray(w, dtype=np.float64)[: self.edge_offset].reshape(self.n_parts, -1, self.n_features)

    def spring_weights(self, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """(P, 4) rows (a_p, b_p, c_p, d_p) in w's units (zeros for the root)."""
        coef = np.zeros((self.n_parts, 4))
        coef[self.children] = np.asarray(w, dtype=np.float64)[self.edge_offset:self.size_joint_feature].reshape(-1, 4)
        return coef

    def _grid_coef(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Spring coefficients per grid cell of offset: the oracle's C_p (a/s^2, b/s, c/s^2, d/s)."""
        return pose_grid_coefficients(self.spring_weights(w), self.displacement_scale)

    @checked
    def unary_scores(self, x: npt.ArrayLike, w: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """S[p, row, col] = ⟨w_p, f(x, (row, col))⟩, (P, H, W) float64."""
        x = self._example(x)
        return self._scores(x, np.ascontiguousarray(w, dtype=np.float64))

    def _scores(self, x: np.ndarray, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        H, W = self.grid_shape
        P, K = self.n_parts, self.offsets.shape[0]
        Wu = w[: self.edge_offset].reshape(P * K, self.n_features)
        # (H W, F) @ (F, P K): the map's rows stay contiguous (float32 maps are promoted here, once)
        R = x.reshape(H * W, self.n_features).astype(np.float64) @ Wu.T
        if K == 1:
            return np.ascontiguousarray(R.T.reshape(P, H, W))
        # correlation with the part filters: S[u, p] = sum_j R[u + o_j, p, j] (zeros off the grid)
        R = R.reshape(H, W, P, K)
        S = np.zeros((H, W, P))
        for j, (oy, ox) in enumerate(self.offsets):
            r0, r1 = max(0, -oy), min(H, H - oy)
            c0, c1 = max(0, -ox), min(W, W - ox)
            if r0 < r1 and c0 < c1:
                S[r0:r1, c0:c1] += R[r0 + oy:r1 + oy, c0 + ox:c1 + ox, :, j]
        return np.ascontiguousarray(S.transpose(2, 0, 1))

    @checked
    def part_features(self, x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """f(x, y_p) of every part, (P, k^2 F): the window of map entries around each part."""
        x = self._example(x)
        y = np.ascontiguousarray(y, dtype=np.int64)
        return self._part_features(x, y)

    def _part_features(self, x: np.ndarray, y: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        if self.offsets.shape[0] == 1:
            return x[y[:, 0], y[:, 1]].astype(np.float64)
        H, W = self.grid_shape
        pos = y[:, None, :] + self.offsets[None, :, :]  # (P, K, 2)
        inside = (pos[..., 0] >= 0) & (pos[..., 0] < H) & (pos[..., 1] >= 0) & (pos[..., 1] < W)
        f = x[np.clip(pos[..., 0], 0, H - 1), np.clip(pos[..., 1], 0, W - 1)].astype(np.float64)
        f[~inside] = 0.0
        return f.reshape(self.n_parts, -1)

    # ------------------------------------------------------------ inference
    def _maximise(self, S: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        y, _ = pose_max_product(S, self.parent, self._grid_coef(w), self.order, brute=self.inference == "brute")
        return y

    @checked
    def loss_augmented_decode(self, x: npt.ArrayLike, y_true: npt.ArrayLike, w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y Delta(y_true, y) + ⟨w, phi(x, y)⟩: exact max-product on the part tree."""
        x = self._example(x)
        w = np.ascontiguousarray(w, dtype=np.float64)
        # the potential-level oracle (structfw.oracles.potentials.pose_hinge) on the part scores at w
        y, _, _ = pose_search(self._scores(x, w), self.parent, self.order, self._grid_coef(w),
                              np.ascontiguousarray(y_true, dtype=np.int64), self.tolerance, 1.0,
                              self.inference == "brute")
        return y

    @checked
    def decode(self, x: npt.ArrayLike, w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """argmax_y ⟨w, phi(x, y)⟩: exact max-product on the part tree."""
        x = self._example(x)
        w = np.ascontiguousarray(w, dtype=np.float64)
        return self._maximise(self._scores(x, w), w)

    @checked
    def energy(self, x: npt.ArrayLike, y: npt.ArrayLike, w: npt.ArrayLike, y_true: npt.ArrayLike | None = None) -> float:
        """⟨w, phi(x, y)⟩ (+ Delta(y_true, y) when ``y_true`` is given), by the oracle's arithmetic."""
        x = self._example(x)
        w = np.ascontiguousarray(w, dtype=np.float64)
        S = self._scores(x, w)
        if y_true is not None:
            pose_loss(S, np.ascontiguousarray(y_true, dtype=np.int64), self.tolerance ** 2, 1.0)
        return float(pose_energy(S, self.parent, self._grid_coef(w), np.ascontiguousarray(y, dtype=np.int64)))

    # ------------------------------------------------------------------ core
    @checked
    def joint_feature(self, x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """phi(x, y), dense (module docstring)."""
        x = self._example(x)
        y = np.ascontiguousarray(y, dtype=np.int64)
        phi = np.empty(self.size_joint_feature)
        phi[: self.edge_offset] = self._part_features(x, y).ravel()
        ch = self.children
        off = (y[ch] - y[self.parent[ch]]) / self.displacement_scale  # (E, 2): (dy, dx)
        dy, dx = off[:, 0], off[:, 1]
        phi[self.edge_offset:] = -np.stack([dx * dx, dx, dy * dy, dy], 1).ravel()
        return phi

    @checked
    def psi(self, x: npt.ArrayLike, y_true: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """phi(x, y_true) - phi(x, y), dense."""
        x = self._example(x)
        phi = self._unchecked_joint_feature
        return phi(x, y_true) - phi(x, y)  # type: ignore[no-any-return]

    @checked
    def loss(self, y_true: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """Fraction of parts farther than ``tolerance`` cells from the truth."""
        d = np.asarray(y_true, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        return float(np.count_nonzero((d * d).sum(axis=1) > self.tolerance ** 2)) / self.n_parts

    def label_key(self, y: npt.ArrayLike) -> bytes:
        return y.tobytes() if type(y) is np.ndarray and y.dtype == np.int64 and y.flags.c_contiguous else (
            np.ascontiguousarray(y, dtype=np.int64).tobytes())

    def _check_label_pair(self, y_true: Any, y: Any, where: str) -> tuple[Any, Any]:
        return self.check_y(None, y_true, f"{where}: y_true"), self.check_y(None, y, f"{where}: y")

    # ------------------------------------------------------------ validation
    def _example(self, x: npt.ArrayLike) -> np.ndarray:
        if type(x) is np.ndarray and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous and \
                x.shape == (*self.grid_shape, self.n_features):
            return x
        return self._check_x(x, "x")

    def _check_x(self, x: npt.ArrayLike, name: str) -> np.ndarray:
        H, W = self.grid_shape
        arr = as_float_array(x, name)
        if arr.shape != (H, W, self.n_features):
            raise ValueError(f"{name} must be a feature map of shape (H, W, n_features) = "
                             f"({H}, {W}, {self.n_features}), got {arr.shape}")
        dtype = np.float32 if arr.dtype == np.float32 else np.float64
        arr = np.ascontiguousarray(arr, dtype=dtype)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        return arr

    def check_X(self, X: Iterable[Any]) -> list[np.ndarray]:
        if isinstance(X, np.ndarray) and X.ndim == 3:
            raise one_example_error(X, "(H, W, F) feature map", "image")
        X = check_sequence_of_inputs(X, "X")
        return [self._check_x(x, f"X[{i}]") for i, x in enumerate(X)]

    def check_y(self, x: Any, y: npt.ArrayLike, name: str = "Y") -> npt.NDArray[np.int64]:
        P = self.n_parts
        H, W = self.grid_shape
        try:
            arr = np.asarray(y)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} could not be converted to an array: {exc}") from exc
        if arr.shape != (P, 2):
            raise ValueError(f"{name} must be the (row, col) grid positions of the {P} parts, shape ({P}, 2), "
                             f"got shape {arr.shape}")
        if not (np.issubdtype(arr.dtype, np.integer) or (np.issubdtype(arr.dtype, np.floating)
                                                         and np.all(arr == np.round(arr)))):
            raise ValueError(f"{name} must hold integer grid positions, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.int64)
        bad = np.flatnonzero((arr[:, 0] < 0) | (arr[:, 0] >= H) | (arr[:, 1] < 0) | (arr[:, 1] >= W))
        if bad.size:
            p = int(bad[0])
            raise ValueError(f"{name}: part {p} is at {tuple(arr[p].tolist())}, outside the {H} x {W} grid")
        return arr


__all__ = ["PoseModel", "check_parent"]
