"""Synthetic segmentation sets built from real images, for the graph-cut and Potts models.

Stand-ins for the MP-BCFW paper's HorseSeg and Stanford Background set-ups (App. A),
which cannot be shipped: images are composed from scikit-image's bundled photographs
(``skimage.data``, no download needed), so that the features carry real image
statistics while the data stay reproducible from a seed.

``make_horseseg_like`` -- figure-ground (K = 2), one node per pixel, 4-connected
    Shapes: the horse silhouette of ``skimage.data.horse()``, the coins of
    ``skimage.data.coins()`` (Otsu threshold, holes filled) and random
    ``skimage.data.binary_blobs`` shapes, augmented by a random crop, flip, rotation
    (multiple of 90 degrees plus up to +-20 degrees) and scale.  Appearance: the
    figure is textured with a crop of ``chelsea()`` (cat fur), ``coffee()``,
    ``astronaut()`` or ``brick()``, the background with ``grass()``, ``gravel()``,
    ``rocket()`` or ``moon()`` (coins images keep their own photograph), then Gaussian
    noise.  Node features (sparse CSR, 55 columns, 7 non-zeros per pixel): one-hot bins
    of smoothed intensity (12), hue (8) and saturation (4), local texture (std of the
    Laplacian-of-Gaussian response, 8), gradient magnitude (6), a 4x4 position cell (16)
    and a bias.  Edge features: exp(-beta ||colour_u - colour_v||^2) with beta the
    inverse of twice the image's mean squared neighbour difference, and 1.
``make_stanford_like`` -- scene-like mosaics (K = 6 by default), SLIC superpixel nodes
    A smoothly warped Voronoi partition into regions, each of a class drawn with a
    class-specific preference for the vertical position (as sky above ground in the
    Stanford scenes), class k textured with a crop of its own source photograph among
    ``grass(), brick(), gravel(), moon(), camera(), coffee(), chelsea(), rocket()``
    (tinted per class) plus noise; SLIC superpixels (``skimage.segmentation.slic``)
    are the nodes, labelled by their majority class.  Node features (dense, 41): the
    superpixel's histograms of intensity (12), hue (8), saturation (4), texture (8) and
    gradient (6) bins, its mean vertical and horizontal position and a bias.  Edges join
    adjacent superpixels with features exp(-beta ||mean colour difference||^2), the
    shared boundary length over its mean, and 1.

Sizes are chosen so that one oracle call costs about 1-5 ms, as in the paper's HorseSeg
and Stanford oracles: measured here (one core of a shared machine, random w with
pairwise weights on) 1.6 ms median / 3.2 ms max per loss-augmented min cut on 64 x 64
pixel graphs (``make_horseseg_like(size=64)``), 2.5 ms per alpha-expansion oracle on
120 x 120 images with ~280 superpixels and K = 6 (``make_stanford_like()``), 3.4 ms
with ~390 superpixels (``size=140, n_segments=400``).  Node and edge features are
divided by the number of nodes (see `structfw._image.normalised_graph`).

`load_segmentation` generates a named set once and caches it (``.npz``, no
pickle) under ``$STRUCTFW_DATA_HOME`` or ``~/.cache/structfw`` -- never inside the
repository.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._image import CUE_SIZES, contrast, grid_edges, normalised_graph, pixel_codes
from ._cache import CacheFile, data_home, read_cache, write_cache

if TYPE_CHECKING:
    from ..models.graphcut import GraphLabellingModel

# (node features, edges, edge features); the node features are Any, as they are a CSR matrix
# (make_horseseg_like) or a dense array (make_stanford_like)
_Graph = tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.float64]]

_VERSION = 1


# ------------------------------------------------------------------ image sources
def _skimage() -> ModuleType:
    try:
        import skimage  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the segmentation generators need scikit-image: "
                          "pip install 'structfw[seg]'") from exc
    import skimage.data
    return skimage


def _as_rgb(img: npt.ArrayLike) -> npt.NDArray[np.float64]:
    img = np.asarray(img, dtype=np.float64)
    if img.max() > 1.0:
        img = img / 255.0
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    return img[:, :, :3]


def _sources(names: Iterable[str]) -> list[npt.NDArray[np.float64]]:
    data = _skimage().data
    return [_as_rgb(getattr(data, n)()) for n in names]


_FG_SOURCES = ("chelsea", "coffee", "astronaut", "brick")
_BG_SOURCES = ("grass", "gravel", "rocket", "moon")
_SCENE_SOURCES = ("grass", "brick", "gravel", "moon", "camera", "coffee", "chelsea", "rocket")


def _random_crop(rng: np.random.Generator, img: np.ndarray, size: int,
                 scale_range: tuple[float, float] = (0.5, 1.0)) -> np.ndarray:
    """A square crop of a random fraction of the image, resized to size x size."""
    from skimage.transform import resize

    h, w = img.shape[:2]
    side = int(min(h, w) * rng.uniform(*scale_range))
    side = max(side, 8)
    i = int(rng.integers(0, h - side + 1))
    j = int(rng.integers(0, w - side + 1))
    crop = img[i:i + side, j:j + side]
    return resize(crop, (size, size) + img.shape[2:], order=1, anti_aliasing=True, mode="reflect")


def _augment_mask(rng: np.random.Generator, mask: np.ndarray, size: int) -> npt.NDArray[np.bool_]:
    """Random crop, flip, rotation and scale of a binary shape, as a size x size mask."""
    from skimage.transform import resize, rotate

    m = mask.astype(np.float64)
    m = np.rot90(m, int(rng.integers(0, 4)))
    if rng.random() < 0.5:
        m = m[:, ::-1]
    m = rotate(m, rng.uniform(-20, 20), resize=True, mode="constant", cval=0.0, order=1)
    h, w = m.shape
    # crop a window around the shape's bounding box, padded by a random margin (scale)
    ii, jj = np.nonzero(m > 0.5)
    if ii.size == 0:
        return resize(m, (size, size), order=1) > 0.5
    ci, cj = (ii.min() + ii.max()) / 2, (jj.min() + jj.max()) / 2
    extent = max(ii.max() - ii.min(), jj.max() - jj.min()) * rng.uniform(1.1, 1.8)
    ci += rng.uniform(-0.15, 0.15) * extent
    cj += rng.uniform(-0.15, 0.15) * extent
    half = extent / 2
    pad = int(np.ceil(half)) + 1
    m = np.pad(m, pad)
    i0, j0 = int(ci - half) + pad, int(cj - half) + pad
    side = max(int(extent), 8)
    m = m[i0:i0 + side, j0:j0 + side]
    return resize(m, (size, size), order=1, anti_aliasing=False) > 0.5


def _shape_masks() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from scipy import ndimage
    from skimage.filters import threshold_otsu

    data = _skimage().data
    horse = ~data.horse()
    coins = data.coins().astype(np.float64) / 255.0
    coin_mask = ndimage.binary_fill_holes(coins > threshold_otsu(coins))
    coin_mask = ndimage.binary_opening(coin_mask, iterations=2)
    return horse, coins, coin_mask


# ------------------------------------------------------------------ pixel features

def _pixel_features(img: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """CSR (h*w, 55) one-hot pixel features: the cue bins, a 4x4 position cell, a bias."""
    h, w = img.shape[:2]
    codes, grey = pixel_codes(img)
    cols, off = [], 0
    for c, n in zip(codes, CUE_SIZES):
        cols.append(c.ravel() + off)
        off += n
    ii, jj = np.mgrid[0:h, 0:w]
    cols.append(((ii * 4 // h) * 4 + jj * 4 // w).ravel() + off)
    off += 16
    cols.append(np.full(h * w, off))
    F = off + 1
    indices = np.stack(cols, 1).ravel().astype(np.int64)
    k = len(cols)
    indptr = np.arange(0, h * w * k + 1, k, dtype=np.int64)
    X = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(h * w, F))
    return X, grey





# ------------------------------------------------------------------ binary set
def _figure_ground_image(rng: np.random.Generator, size: int, kind: int,
                         shapes: tuple[np.ndarray, np.ndarray, np.ndarray], fg_src: Sequence[np.ndarray],
                         bg_src: Sequence[np.ndarray], noise: float) -> tuple[np.ndarray, npt.NDArray[np.int64]]:
    horse, coins, coin_mask = shapes
    if kind == 1:  # a real photograph: coins on their background
        stack = np.concatenate([_as_rgb(coins), coin_mask[:, :, None].astype(np.float64)], 2)
        crop = _random_crop(rng, stack, size, (0.45, 0.9))
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        img, mask = crop[:, :, :3], crop[:, :, 3] > 0.5
    else:
        if kind == 0:
            shape = horse
        else:
            shape = _skimage().data.binary_blobs(length=128, blob_size_fraction=0.25,
                                                 volume_fraction=0.3, rng=int(rng.integers(2 ** 31)))
        mask = _augment_mask(rng, shape, size)
        fg = _random_crop(rng, fg_src[int(rng.integers(len(fg_src)))], size)
        bg = _random_crop(rng, bg_src[int(rng.integers(len(bg_src)))], size)
        img = np.where(mask[:, :, None], fg, bg)
    img = np.clip(img + noise * rng.standard_normal(img.shape), 0.0, 1.0)
    return img, mask.astype(np.int64)


def make_horseseg_like(n_images: int = 40, size: int = 64, seed: int = 0,
                       noise: float = 0.12) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
    """Figure-ground segmentation of pixel grids from real image content (HorseSeg-like).

    Parameters
    ----------
    n_images : int
        Number of images.
    size : int
        Images are size x size pixels, one node per pixel (4-connected).
    seed : int
        Everything is drawn from ``numpy.random.default_rng(seed)``: equal seeds give
        equal data.
    noise : float
        Standard deviation of the Gaussian pixel noise (images in [0, 1]).

    Returns
    -------
    X : list of (node_features CSR (size^2, 55), edges (E, 2) int64, edge_features (E, 2))
    Y : list of (size^2,) int64 in {0 (background), 1 (figure)}
        Inputs for `structfw.models.GraphCutModel` ``(n_features=55,
        n_edge_features=2)``.  See the module docstring for the images used.
    """
    n_images, size = int(n_images), int(size)
    if n_images < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    if size < 8:
        raise ValueError(f"size must be >= 8, got {size}")
    rng = np.random.default_rng(seed)
    shapes = _shape_masks()
    fg_src, bg_src = _sources(_FG_SOURCES), _sources(_BG_SOURCES)
    edges = grid_edges(size, size)
    X, Y = [], []
    for t in range(n_images):
        img, mask = _figure_ground_image(rng, size, t % 3, shapes, fg_src, bg_src, noise)
        nodes, _ = _pixel_features(img)
        flat = img.reshape(-1, 3)
        ef = np.stack([contrast(flat[edges[:, 0]], flat[edges[:, 1]]), np.ones(len(edges))], 1)
        X.append(normalised_graph(nodes, edges.copy(), ef))
        Y.append(mask.ravel())
    return X, Y


# ------------------------------------------------------------------ multi-label set
def _scene_labels(rng: np.random.Generator, size: int, K: int, n_regions: int) -> npt.NDArray[np.int64]:
    """A warped Voronoi partition; region classes prefer class-specific heights."""
    from scipy import ndimage

    seeds = rng.uniform(0, size, (n_regions, 2))
    pref = np.linspace(0.0, 1.0, K)
    probs = np.exp(-((seeds[:, :1] / size - pref[None, :]) ** 2) / (2 * 0.25 ** 2))
    probs /= probs.sum(1, keepdims=True)
    cls = np.array([rng.choice(K, p=p) for p in probs])
    ii, jj = np.mgrid[0:size, 0:size].astype(np.float64)
    warp = [ndimage.gaussian_filter(rng.standard_normal((size, size)), size / 8) for _ in range(2)]
    warp = [w / (np.abs(w).max() + 1e-12) * size * 0.08 for w in warp]
    pi, pj = ii + warp[0], jj + warp[1]
    d = (pi[..., None] - seeds[:, 0]) ** 2 + (pj[..., None] - seeds[:, 1]) ** 2
    return cls[np.argmin(d, axis=2)]


def _render_scene(rng: np.random.Generator, src: Sequence[np.ndarray], tints: np.ndarray, size: int,
                  noise: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """One scene: 5-9 regions (`_scene_labels`), each filled with a tinted crop of its class's
    photograph, plus Gaussian pixel noise.  Returns (image (size, size, 3) in [0, 1], labels)."""
    K = len(src)
    lab = _scene_labels(rng, size, K, int(rng.integers(5, 10)))
    img = np.zeros((size, size, 3))
    for k in np.unique(lab):
        tex = _random_crop(rng, src[k], size, (0.3, 0.8)) * tints[k]
        img[lab == k] = tex[lab == k]
    return np.clip(img + noise * rng.standard_normal(img.shape), 0.0, 1.0), lab


def _superpixel_graph(img: np.ndarray, seg: npt.NDArray[np.integer], labels_px: npt.NDArray[np.int64], K: int
                      ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64],
                                 npt.NDArray[np.int64]]:
    """Node features, edges, edge features and majority labels of a superpixel map."""
    h, w = seg.shape
    n = int(seg.max()) + 1
    codes, grey = pixel_codes(img)
    s = seg.ravel()
    counts = np.bincount(s, minlength=n).astype(np.float64)
    feats = []
    for c, nb in zip(codes, CUE_SIZES):
        hist = np.zeros((n, nb))
        np.add.at(hist, (s, c.ravel()), 1.0)
        feats.append(hist / counts[:, None])
    ii, jj = np.mgrid[0:h, 0:w]
    feats.append((np.bincount(s, ii.ravel(), n) / counts / h)[:, None])
    feats.append((np.bincount(s, jj.ravel(), n) / counts / w)[:, None])
    feats.append(np.ones((n, 1)))
    nodes = np.ascontiguousarray(np.concatenate(feats, 1))
    # adjacency: pixel pairs across a superpixel boundary, with the boundary length
    a = np.concatenate([seg[:, :-1].ravel(), seg[:-1, :].ravel()])
    b = np.concatenate([seg[:, 1:].ravel(), seg[1:, :].ravel()])
    cross = a != b
    lo, hi = np.minimum(a[cross], b[cross]), np.maximum(a[cross], b[cross])
    pairs, length = np.unique(lo * n + hi, return_counts=True)
    edges = np.stack([pairs // n, pairs % n], 1).astype(np.int64)
    mean_col = np.stack([np.bincount(s, img[..., ch].ravel(), n) for ch in range(3)], 1) / counts[:, None]
    ef = np.stack([contrast(mean_col[edges[:, 0]], mean_col[edges[:, 1]]),
                   length / length.mean(), np.ones(len(edges))], 1)
    votes = np.zeros((n, K))
    np.add.at(votes, (s, labels_px.ravel()), 1.0)
    return nodes, edges, ef, np.argmax(votes, 1).astype(np.int64)


def make_stanford_like(n_images: int = 40, size: int = 120, n_classes: int = 6, n_segments: int = 300,
                       seed: int = 0, noise: float = 0.08) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
    """Scene-like multi-label segmentation over SLIC superpixels (Stanford-Background-like).

    Parameters
    ----------
    n_images : int
    size : int
        Images are size x size pixels before superpixelisation.
    n_classes : int in 2..8
        K; class k is textured with ``skimage.data.<name>()`` for the k-th name of
        grass, brick, gravel, moon, camera, coffee, chelsea, rocket.
    n_segments : int
        Target number of SLIC superpixels per image.
    seed : int
        Equal seeds give equal data.
    noise : float
        Standard deviation of the Gaussian pixel noise.

    Returns
    -------
    X : list of (node_features (V, 41) float64, edges (E, 2) int64, edge_features (E, 3))
    Y : list of (V,) int64 in 0..n_classes-1
        Inputs for `structfw.models.PottsModel` ``(n_classes, 41, 3)``.
    """
    from skimage.segmentation import slic

    n_images, size, K = int(n_images), int(size), int(n_classes)
    if n_images < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    if size < 16:
        raise ValueError(f"size must be >= 16, got {size}")
    if not 2 <= K <= len(_SCENE_SOURCES):
        raise ValueError(f"n_classes must be in 2..{len(_SCENE_SOURCES)}, got {n_classes}")
    rng = np.random.default_rng(seed)
    src = _sources(_SCENE_SOURCES[:K])
    tints = 0.75 + 0.5 * np.random.default_rng(1234).random((K, 3))  # fixed class colours
    X, Y = [], []
    for _ in range(n_images):
        img, lab = _render_scene(rng, src, tints, size, noise)
        seg = slic(img, n_segments=int(n_segments), compactness=20.0, sigma=1.0, start_label=0,
                   channel_axis=-1)
        nodes, edges, ef, y = _superpixel_graph(img, seg, lab, K)
        X.append(normalised_graph(nodes, edges, ef))
        Y.append(y)
    return X, Y


# ------------------------------------------------------------------ loader and cache
_SETS: dict[str, tuple[Callable[..., tuple[list[_Graph], list[npt.NDArray[np.int64]]]],
                       dict[str, Any], dict[str, Any]]] = {
    # name: (generator, train kwargs, test kwargs, model factory)
    "seg-binary": (make_horseseg_like, dict(n_images=60, size=64, seed=0), dict(n_images=40, size=64, seed=1)),
    "seg-multi": (make_stanford_like, dict(n_images=60, seed=0), dict(n_images=40, seed=1)),
}


def _paper_generator(name: str) -> Callable[..., tuple[list[_Graph], list[npt.NDArray[np.int64]]]]:
    """The generator of a papers'-scale set, imported on call (segmentation_paper imports this module)."""
    def make(**kwargs: Any) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
        from .segmentation_paper import _generator

        return _generator(name)(**kwargs)

    return make


# the papers' sizes, 649 superpixel features (datasets/segmentation_paper.py, whose PAPER_SETS reads these)
_SETS["seg-binary-paper"] = (_paper_generator("seg-binary-paper"), dict(n_images=2376, seed=0),
                             dict(n_images=500, seed=1))
_SETS["seg-multi-paper"] = (_paper_generator("seg-multi-paper"), dict(n_images=715, seed=0),
                            dict(n_images=143, seed=1))


def _model_factory(name: str) -> Callable[..., GraphLabellingModel]:
    from ..models import GraphCutModel, PottsModel

    if name.endswith("-paper"):
        from .segmentation_paper import paper_model_factory

        return paper_model_factory(name)
    if name == "seg-binary":
        return lambda **kw: GraphCutModel(n_features=55, n_edge_features=2, **kw)
    return lambda **kw: PottsModel(n_states=6, n_features=41, n_edge_features=3, **kw)


class SegmentationData(NamedTuple):
    """What `load_segmentation` returns: ``X, Y, make_model = load_segmentation(...)``."""

    X: list[_Graph]
    Y: list[npt.NDArray[np.int64]]
    make_model: Callable[..., GraphLabellingModel]


def _save(path: Path, X: Sequence[_Graph], Y: Sequence[npt.NDArray[np.int64]]) -> None:
    # Any: numpy's stubs type savez_compressed's **kwds as its own keyword arguments
    arrays: dict[str, Any] = {"n": np.array([len(X)])}
    for i, ((nodes, edges, ef), y) in enumerate(zip(X, Y)):
        if sp.issparse(nodes):
            nodes = sp.csr_matrix(nodes)
            arrays[f"{i}_data"], arrays[f"{i}_indices"] = nodes.data, nodes.indices
            arrays[f"{i}_indptr"], arrays[f"{i}_shape"] = nodes.indptr, np.array(nodes.shape)
        else:
            arrays[f"{i}_nodes"] = nodes
        arrays[f"{i}_edges"], arrays[f"{i}_ef"], arrays[f"{i}_y"] = edges, ef, y
    write_cache(path, arrays)


def _decode(d: CacheFile) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
    X, Y = [], []
    n = d.array("n", "int", shape=(1,))
    d.check(int(n[0]) >= 0, "n", f"is {int(n[0])}, expected a count >= 0")
    for i in range(int(n[0])):
        if f"{i}_nodes" in d:
            nodes = d.array(f"{i}_nodes", "float", ndim=2)
        else:
            shape = d.array(f"{i}_shape", "int", shape=(2,))
            nodes = sp.csr_matrix((d.array(f"{i}_data", "number", ndim=1), d.array(f"{i}_indices", "int", ndim=1),
                                   d.array(f"{i}_indptr", "int", ndim=1)), shape=tuple(int(v) for v in shape))
        V = nodes.shape[0]
        edges = d.array(f"{i}_edges", "int", shape=(None, 2))
        ef = d.array(f"{i}_ef", "float", shape=(edges.shape[0], None))
        y = d.array(f"{i}_y", "int", shape=(V,))
        d.check(edges.size == 0 or (edges.min() >= 0 and edges.max() < V), f"{i}_edges",
                f"names nodes outside 0..{V - 1}")
        X.append((nodes, edges, ef))
        Y.append(y)
    return X, Y


def _load(path: Path) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]] | None:
    """The cached set at ``path``, or None when it is missing or unreadable (then removed,
    with a `CacheWarning` naming the file and the problem; `structfw.datasets._cache`)."""
    return read_cache(path, _decode)


def load_segmentation(name: str = "seg-binary", split: str = "train", cache: bool = True) -> SegmentationData:
    """A generated segmentation set, cached on disk after its first generation.

    Parameters
    ----------
    name : {"seg-binary", "seg-multi", "seg-binary-paper", "seg-multi-paper"}
        "seg-binary": `make_horseseg_like` (60 train / 40 test images of 64 x 64
        pixels, for `GraphCutModel`); "seg-multi":
        `make_stanford_like` (60 train / 40 test images, 6 classes, ~300
        superpixels, for `PottsModel`).  At the MP-BCFW paper's sizes, with 649
        superpixel features (`structfw.datasets.segmentation_paper`):
        "seg-binary-paper" (2,376 train / 500 test, `make_horseseg_paper`, for
        ``GraphCutModel(649, 3)``) and "seg-multi-paper" (715 train / 143 test,
        9 classes, `make_stanford_paper`, for ``PottsModel(9, 649, 3)``); their
        first generation takes minutes (docs/results/data.md).
    split : {"train", "test"}
        Train and test images come from different seeds.
    cache : bool
        Read/write ``<data_home()>/segmentation/<name>-<split>-v<version>.npz`` (a file that
        cannot be read back is regenerated, with a warning naming it).

    Returns
    -------
    SegmentationData
        ``(X, Y, make_model)``; ``make_model(**kwargs)`` builds the matching model
        (kwargs go to its constructor, e.g. ``potts_constant``).
    """
    if name not in _SETS:
        raise ValueError(f"name must be one of {tuple(_SETS)}, got {name!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    make, train_kw, test_kw = _SETS[name]
    kwargs = train_kw if split == "train" else test_kw
    path = data_home() / "segmentation" / f"{name}-{split}-v{_VERSION}.npz"
    loaded = _load(path) if cache else None
    if loaded is not None:
        X, Y = loaded
    else:
        X, Y = make(**kwargs)
        if cache:
            _save(path, X, Y)
    return SegmentationData(X, Y, _model_factory(name))


def _benchmark_graphs() -> list[tuple[str, tuple[np.ndarray, ...]]]:  # pragma: no cover - used by `structfw bench maxflow`
    """(name, (cost0, cost1, edges, weights)) min-cut instances on SLIC graphs."""
    rng = np.random.default_rng(0)
    out: list[tuple[str, tuple[np.ndarray, ...]]] = []
    for segs in (400, 1500):
        X, _ = make_stanford_like(n_images=1, size=160, n_classes=2, n_segments=segs, seed=segs)
        nodes, edges, ef = X[0]
        c0 = rng.standard_normal(nodes.shape[0]) * 0.5
        out.append((f"SLIC {segs} superpixels", (c0, -c0, edges, ef[:, 0] * 0.3)))
    return out
