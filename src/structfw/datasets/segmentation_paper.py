"""Segmentation at the papers' scale: 649-dimensional superpixel features, generated sets of the
papers' sizes, and loaders for a user's copy of HorseSeg and Stanford Background.

The MP-BCFW paper (Shah, Kolmogorov & Lampert 2015, App. A) trains on 2,376 HorseSeg images
(figure-ground, graph-cut oracle) and the 715 Stanford Background images (nine labels,
alpha-expansion oracle); each image is cut into SLIC superpixels and each superpixel is
described by a 649-dimensional feature vector, whose composition the paper does not give.
This module builds a 649-dimensional vector of its own from the cues the project already
computes (`structfw.features.PixelFeatures`: CIE Lab colour, local binary patterns, gradient
orientations; `structfw.datasets.segmentation`: the generators' quantised cues), in one function
(`superpixel_graph`) that the generated sets and the real-data loaders share:

| block | width | what |
|---|---|---|
| **appearance** (of the superpixel) | 295 | the seven parts below |
| Lab mean and standard deviation | 6 | L/100, a/128, b/128 (as ``PixelFeatures``' "lab") |
| Lab histograms | 48 | 16 bins each of L in [0, 100], a and b in [-80, 80] |
| hue x saturation histogram | 64 | 16 hue x 4 saturation bins (HSV), joint |
| the generators' cue bins | 38 | intensity 12, hue 8, saturation 4, LoG texture 8, gradient magnitude 6 (``PixelFeatures``' "bins") |
| LBP histograms, three scales | 54 | uniform LBP with (P, R) = (8, 1), (16, 2), (24, 3): P + 2 codes each ("lbp") |
| gradient orientations, three scales | 51 | 16 unsigned orientation bins weighted by the magnitude, and the mean magnitude, of Gaussian derivatives at sigma = 1, 2, 4 ("gradient") |
| filter bank mean and std | 34 | the 17 filters of Winn et al. (2005) that Gould et al. (2009) used on Stanford Background: Gaussians sigma = 1, 2, 4 on L, a, b (9), LoG sigma = 1, 2, 4, 8 on L (4), x and y derivatives of Gaussians sigma = 2, 4 on L (4) |
| **context** | 295 | the appearance block averaged over the adjacent superpixels, weighted by the shared boundary |
| **layout** | 49 | the fraction of the superpixel's pixels in each cell of a 7 x 7 grid over the image |
| **shape** | 9 | centroid (row, column), area / image area, bounding-box height and width / image sides, variances and covariance of the pixel positions, number of neighbours / the image's mean |
| **bias** | 1 | a constant 1 |

Every feature is computed from the image alone; labels only decide the superpixels' labels (the
majority label of their pixels).  Edges join adjacent superpixels (they share a 4-neighbour
pixel pair), with the three edge features of ``PixelFeatures``: exp(-beta ||Lab_u - Lab_v||^2),
the shared boundary length over its mean, and 1.  Node and edge features are divided by the
number of superpixels, as in the other segmentation sets (`structfw.datasets.segmentation`).
`feature_names` lists the 649 names.

Generated sets (`make_horseseg_paper`, `make_stanford_paper`; by name through
`structfw.datasets.load_segmentation("seg-binary-paper" | "seg-multi-paper")`, cached) use the
images of the existing generators: figure-ground images of `make_horseseg_like` (horse, coins and
blob shapes textured with scikit-image photographs) and scene mosaics of `make_stanford_like`
with nine classes (its eight textures and ``astronaut()``).  Each image is drawn from its own
seeded generator (``SeedSequence(seed, spawn_key=(i,))``), so the first n images of a set do not
depend on how many are made.

Real data (`load_stanford_background`, `load_horseseg`) is read from a user's copy and goes
through the same `superpixel_graph`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from .._image import check_image, contrast, normalised_graph, pixel_codes
from .segmentation import (
    _BG_SOURCES,
    _FG_SOURCES,
    _SCENE_SOURCES,
    _SETS,
    _figure_ground_image,
    _render_scene,
    _shape_masks,
    _skimage,
    _sources,
)

if TYPE_CHECKING:
    from ..models.graphcut import GraphLabellingModel
    from .segmentation import SegmentationData

__all__ = ["N_FEATURES", "N_EDGE_FEATURES", "feature_names", "superpixel_graph", "make_horseseg_paper",
           "make_stanford_paper", "load_stanford_background", "load_horseseg", "STANFORD_CLASSES",
           "PAPER_SETS"]

#: The paper's superpixel feature width (MP-BCFW, App. A).
N_FEATURES = 649
#: Edge features: colour contrast, shared boundary, bias.
N_EDGE_FEATURES = 3
#: Stanford Background's region classes (``labels/*.regions.txt``: 0..7, -1 unknown); the
#: loader maps unknown to the ninth class, as the paper's nine labels.
STANFORD_CLASSES = ("sky", "tree", "road", "grass", "water", "building", "mountain", "foreground", "unknown")
#: The generated sets at the papers' sizes: name -> (n_classes, train kwargs, test kwargs), as
#: registered in `structfw.datasets.load_segmentation` (2,376 / 500 and 715 / 143 images).
PAPER_SETS: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {
    name: (K, dict(_SETS[name][1]), dict(_SETS[name][2])) for name, K in (("seg-binary-paper", 2),
                                                                      ("seg-multi-paper", 9))}

_Graph = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]

# the appearance block, in column order: (name, width)
_LAB_BINS, _HS_BINS = 16, (16, 4)
_LBP = ((8, 1.0), (16, 2.0), (24, 3.0))
_GRAD_SIGMAS, _N_ORIENT = (1.0, 2.0, 4.0), 16
_GRID = 7
_FILTERS = ([f"gauss{s}_{c}" for s in (1, 2, 4) for c in "Lab"] + [f"log{s}_L" for s in (1, 2, 4, 8)]
            + [f"dgauss{s}_{ax}_L" for s in (2, 4) for ax in "xy"])
_CUES = (("intensity", 12), ("hue", 8), ("saturation", 4), ("texture", 8), ("gradient", 6))
_SHAPE = ("row", "col", "area", "bbox_height", "bbox_width", "row_var", "col_var", "row_col_cov", "degree")


def _appearance_names() -> list[str]:
    names = ["lab_L", "lab_a", "lab_b", "lab_L_std", "lab_a_std", "lab_b_std"]
    names += [f"lab_{c}_hist_{b}" for c in "Lab" for b in range(_LAB_BINS)]
    names += [f"hue{h}_sat{s}" for h in range(_HS_BINS[0]) for s in range(_HS_BINS[1])]
    names += [f"{cue}_bin_{b}" for cue, nb in _CUES for b in range(nb)]
    names += [f"lbp{P}r{int(R)}_{c}" for P, R in _LBP for c in range(P + 2)]
    for s in _GRAD_SIGMAS:
        names += [f"grad{int(s)}_orientation_{b}" for b in range(_N_ORIENT)] + [f"grad{int(s)}_magnitude"]
    names += [f"{f}_mean" for f in _FILTERS] + [f"{f}_std" for f in _FILTERS]
    return names


def feature_names() -> list[str]:
    """The names of the 649 superpixel features, in column order (see the module docstring).

    Returns
    -------
    list of str
        Appearance (295), ``context_``-prefixed appearance (295), ``grid_<row>_<col>`` (49),
        shape (9) and ``bias``.
    """
    app = _appearance_names()
    return (app + [f"context_{n}" for n in app] + [f"grid_{r}_{c}" for r in range(_GRID) for c in range(_GRID)]
            + list(_SHAPE) + ["bias"])


# ------------------------------------------------------------------ features of one image
def _region_sums(s: npt.NDArray[np.int64], n: int, cols: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per region, the sums of the pixel columns ``cols`` (HW, k): one sparse product."""
    P = sp.csr_matrix((np.ones(s.size), (s, np.arange(s.size))), shape=(n, s.size))
    return np.asarray(P @ cols)


def _hist(s: npt.NDArray[np.int64], n: int, codes: npt.NDArray[np.int64], nb: int,
          weights: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
    """Per region the normalised histogram of integer codes 0..nb-1 (optionally weighted)."""
    h = np.bincount(s * nb + codes.ravel(), None if weights is None else weights.ravel(), n * nb).reshape(n, nb)
    tot = h.sum(1, keepdims=True)
    return np.divide(h, tot, out=np.zeros_like(h, dtype=np.float64), where=tot > 0)


def _bins(v: npt.NDArray[np.float64], nb: int, lo: float, hi: float) -> npt.NDArray[np.int64]:
    return np.clip(((v - lo) / (hi - lo) * nb).astype(np.int64), 0, nb - 1)


def _appearance(rgb: npt.NDArray[np.float64], s: npt.NDArray[np.int64], n: int,
                count: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(n, 295) appearance block and the (n, 3) raw Lab means (for the edge contrast)."""
    from scipy import ndimage
    from skimage.color import rgb2gray, rgb2hsv, rgb2lab
    from skimage.feature import local_binary_pattern
    from skimage.util import img_as_ubyte

    lab = rgb2lab(rgb)
    labs = lab / np.array([100.0, 128.0, 128.0])
    grey = rgb2gray(rgb)
    hsv = rgb2hsv(rgb)
    L = lab[..., 0]
    # continuous maps whose region means (and second moments) are features
    filt = [ndimage.gaussian_filter(lab[..., c] / (100.0 if c == 0 else 128.0), sig)
            for sig in (1, 2, 4) for c in range(3)]
    filt += [ndimage.gaussian_laplace(L / 100.0, sig) * sig ** 2 for sig in (1, 2, 4, 8)]
    filt += [ndimage.gaussian_filter(L / 100.0, sig, order=order) * sig
             for sig in (2, 4) for order in ((0, 1), (1, 0))]
    grads = [(ndimage.gaussian_filter(grey, sig, order=(1, 0)), ndimage.gaussian_filter(grey, sig, order=(0, 1)))
             for sig in _GRAD_SIGMAS]
    mags = [np.hypot(gy, gx) * sig for (gy, gx), sig in zip(grads, _GRAD_SIGMAS)]
    cont = np.stack([labs[..., c] for c in range(3)] + [labs[..., c] ** 2 for c in range(3)] + filt
                    + [f ** 2 for f in filt] + mags, -1).reshape(s.size, -1)
    means = _region_sums(s, n, cont) / count[:, None]
    nf = len(filt)
    lab_mean, lab_sq = means[:, :3], means[:, 3:6]
    f_mean, f_sq = means[:, 6:6 + nf], means[:, 6 + nf:6 + 2 * nf]
    mag_mean = means[:, 6 + 2 * nf:]
    cols = [lab_mean, np.sqrt(np.maximum(lab_sq - lab_mean ** 2, 0.0))]
    cols += [_hist(s, n, _bins(lab[..., 0], _LAB_BINS, 0.0, 100.0), _LAB_BINS)]
    cols += [_hist(s, n, _bins(lab[..., c], _LAB_BINS, -80.0, 80.0), _LAB_BINS) for c in (1, 2)]
    hb, sb = _HS_BINS
    cols.append(_hist(s, n, _bins(hsv[..., 0], hb, 0.0, 1.0) * sb + _bins(hsv[..., 1], sb, 0.0, 1.0), hb * sb))
    codes, _ = pixel_codes(rgb)
    cols += [_hist(s, n, c, nb) for c, (_, nb) in zip(codes, _CUES)]
    g8 = img_as_ubyte(grey)
    for P, R in _LBP:
        lbp = local_binary_pattern(g8, P, R, method="uniform").astype(np.int64)
        cols.append(_hist(s, n, lbp, P + 2))
    for k, (gy, gx) in enumerate(grads):
        theta = np.mod(np.arctan2(gy, gx), np.pi)
        orient = np.minimum((theta / np.pi * _N_ORIENT).astype(np.int64), _N_ORIENT - 1)
        cols += [_hist(s, n, orient, _N_ORIENT, mags[k]), mag_mean[:, k:k + 1]]
    cols += [f_mean, np.sqrt(np.maximum(f_sq - f_mean ** 2, 0.0))]
    return np.concatenate(cols, 1), lab_mean * np.array([100.0, 128.0, 128.0])


def _adjacency(seg: npt.NDArray[np.int64], n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(edges (E, 2), u < v, sorted; shared 4-neighbour pixel pairs of each)."""
    a = np.concatenate([seg[:, :-1].ravel(), seg[:-1, :].ravel()])
    b = np.concatenate([seg[:, 1:].ravel(), seg[1:, :].ravel()])
    cross = a != b
    lo, hi = np.minimum(a[cross], b[cross]), np.maximum(a[cross], b[cross])
    pairs, length = np.unique(lo * n + hi, return_counts=True)
    return np.stack([pairs // n, pairs % n], 1).astype(np.int64), length.astype(np.float64)


def _layout_and_shape(seg: npt.NDArray[np.int64], s: npt.NDArray[np.int64], n: int, count: npt.NDArray[np.float64],
                      edges: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """(n, 49 + 9): the 7 x 7 grid occupancy and the shape block."""
    H, W = seg.shape
    ii, jj = np.mgrid[0:H, 0:W]
    cell = ((ii * _GRID) // H) * _GRID + (jj * _GRID) // W
    grid = _hist(s, n, cell, _GRID * _GRID)
    r, c = (ii / max(H - 1, 1)).ravel(), (jj / max(W - 1, 1)).ravel()
    m = _region_sums(s, n, np.stack([r, c, r * r, c * c, r * c], 1)) / count[:, None]
    order = np.argsort(s, kind="stable")
    starts = np.searchsorted(s[order], np.arange(n))
    iis, jjs = ii.ravel()[order], jj.ravel()[order]
    height = (np.maximum.reduceat(iis, starts) - np.minimum.reduceat(iis, starts) + 1) / H
    width = (np.maximum.reduceat(jjs, starts) - np.minimum.reduceat(jjs, starts) + 1) / W
    degree = np.bincount(edges.ravel(), minlength=n).astype(np.float64)
    degree /= max(degree.mean(), 1e-12)
    shape = np.stack([m[:, 0], m[:, 1], count / (H * W), height, width, np.maximum(m[:, 2] - m[:, 0] ** 2, 0.0),
                      np.maximum(m[:, 3] - m[:, 1] ** 2, 0.0), m[:, 4] - m[:, 0] * m[:, 1], degree], 1)
    return np.concatenate([grid, shape], 1)


def _segment(rgb: npt.NDArray[np.float64], n_segments: int, compactness: float) -> npt.NDArray[np.int64]:
    from skimage.segmentation import slic

    seg = slic(rgb, n_segments=int(n_segments), compactness=float(compactness), sigma=1.0, start_label=0,
               channel_axis=-1)
    _, inv = np.unique(seg, return_inverse=True)  # labels 0..S-1 without gaps
    return inv.reshape(seg.shape).astype(np.int64)


def superpixel_graph(image: npt.ArrayLike, labels: npt.ArrayLike | None = None, n_classes: int | None = None,
                     n_segments: int = 150, compactness: float = 20.0
                     ) -> tuple[_Graph, npt.NDArray[np.int64] | None]:
    """The superpixel graph of one image with the 649 features, and the superpixels' labels.

    Parameters
    ----------
    image : (H, W) or (H, W, 3) array
        Floats in [0, 1] or integers scaled by their dtype's range (uint8 by 255).
    labels : (H, W) int array, optional
        Per-pixel labels in 0..n_classes-1; each superpixel takes the label most of its pixels
        carry (ties: the smallest).  Labels never enter the features.
    n_classes : int, optional
        K; default ``labels.max() + 1``.
    n_segments : int >= 1
        SLIC's target number of superpixels (``skimage.segmentation.slic``, sigma 1).
    compactness : float > 0
        SLIC's balance of colour and space proximity.

    Returns
    -------
    (node_features (V, 649), edges (E, 2) int64, edge_features (E, 3)), labels (V,) int64 or None
        Node and edge features divided by V; the input of ``GraphCutModel(649, 3)`` or
        ``PottsModel(K, 649, 3)``.
    """
    if isinstance(n_segments, bool) or not isinstance(n_segments, (int, np.integer)) or n_segments < 1:
        raise ValueError(f"n_segments must be an integer >= 1, got {n_segments!r}")
    if not (isinstance(compactness, (int, float, np.integer, np.floating)) and np.isfinite(compactness)
            and compactness > 0):
        raise ValueError(f"compactness must be a finite number > 0, got {compactness!r}")
    rgb = check_image(image, "image")
    seg = _segment(rgb, int(n_segments), float(compactness))
    s = seg.ravel()
    n = int(s.max()) + 1
    count = np.bincount(s, minlength=n).astype(np.float64)
    app, lab_mean = _appearance(rgb, s, n, count)
    edges, length = _adjacency(seg, n)
    if len(edges):
        adj = sp.csr_matrix((np.concatenate([length, length]), (np.concatenate([edges[:, 0], edges[:, 1]]),
                                                                np.concatenate([edges[:, 1], edges[:, 0]]))),
                            shape=(n, n))
        tot = np.asarray(adj.sum(1)).ravel()
        context = np.asarray(sp.diags(1.0 / np.maximum(tot, 1e-12)) @ adj @ app)
        ef = np.stack([contrast(lab_mean[edges[:, 0]], lab_mean[edges[:, 1]]), length / length.mean(),
                       np.ones(len(edges))], 1)
    else:  # one superpixel: no neighbours, no context
        context = np.zeros_like(app)
        ef = np.zeros((0, N_EDGE_FEATURES))
    nodes = np.concatenate([app, context, _layout_and_shape(seg, s, n, count, edges), np.ones((n, 1))], 1)
    assert nodes.shape[1] == N_FEATURES, nodes.shape
    y = None
    if labels is not None:
        lab = np.asarray(labels)
        if lab.shape != seg.shape:
            raise ValueError(f"labels has shape {lab.shape}, but image is {seg.shape}")
        if not (np.issubdtype(lab.dtype, np.integer) or lab.dtype == np.bool_):
            raise ValueError(f"labels must hold integers, got dtype {lab.dtype}")
        lab = lab.astype(np.int64).ravel()
        K = int(lab.max()) + 1 if n_classes is None else int(n_classes)
        if lab.min() < 0 or lab.max() >= K:
            raise ValueError(f"labels must be in 0..{K - 1} (n_classes={K}), found {int(lab.min())}..{int(lab.max())}")
        votes = np.bincount(s * K + lab, minlength=n * K).reshape(n, K)
        y = votes.argmax(1).astype(np.int64)
    nodes, edges, ef = normalised_graph(np.ascontiguousarray(nodes), edges, np.ascontiguousarray(ef))
    return (nodes, edges, ef), y


def _labelled(image: npt.ArrayLike, labels: npt.ArrayLike, n_classes: int, n_segments: int,
              compactness: float = 20.0) -> tuple[_Graph, npt.NDArray[np.int64]]:
    g, y = superpixel_graph(image, labels, n_classes, n_segments, compactness)
    assert y is not None  # labels were given
    return g, y


# ------------------------------------------------------------------ generated sets
def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _image_rng(seed: int, i: int) -> np.random.Generator:
    """Image i's own generator: the first n images do not depend on how many are drawn."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(i,)))


def _report(verbose: bool, what: str, i: int, n: int, t0: float) -> None:
    if verbose and (i + 1 == n or (i + 1) % 100 == 0):
        print(f"{what}: {i + 1}/{n} images, {time.perf_counter() - t0:.1f} s", flush=True)


def make_horseseg_paper(n_images: int = 2376, size: int = 128, n_segments: int = 100, seed: int = 0,
                        noise: float = 0.12, verbose: bool = False
                        ) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
    """Figure-ground segmentation over SLIC superpixels with 649 features, HorseSeg's size.

    The images are those of `structfw.datasets.make_horseseg_like` (the horse silhouette,
    coins and blob shapes, textured with scikit-image photographs, plus noise); each is cut
    into superpixels and described by `superpixel_graph`.  A superpixel is figure when most of
    its pixels are.

    Parameters
    ----------
    n_images : int
        Number of images; default 2,376, the MP-BCFW paper's HorseSeg subset.
    size : int >= 16
        Images are size x size pixels.
    n_segments : int
        SLIC's target number of superpixels (about 100-110 come out at the defaults).
    seed : int
        Image i is drawn from ``SeedSequence(seed, spawn_key=(i,))``: equal seeds give equal
        data, and the first images do not depend on ``n_images``.
    noise : float
        Standard deviation of the Gaussian pixel noise (images in [0, 1]).
    verbose : bool
        Print progress every 100 images.

    Returns
    -------
    X : list of (node_features (V, 649), edges (E, 2) int64, edge_features (E, 3))
    Y : list of (V,) int64 in {0 (background), 1 (figure)}
        Inputs for ``GraphCutModel(n_features=649, n_edge_features=3)``.
    """
    n_images = _check_count(n_images, "n_images")
    size = _check_count(size, "size")
    if size < 16:
        raise ValueError(f"size must be >= 16, got {size}")
    shapes = _shape_masks()
    fg_src, bg_src = _sources(_FG_SOURCES), _sources(_BG_SOURCES)
    X, Y = [], []
    t0 = time.perf_counter()
    for t in range(n_images):
        img, mask = _figure_ground_image(_image_rng(seed, t), size, t % 3, shapes, fg_src, bg_src, noise)
        g, y = _labelled(img, mask, 2, n_segments)
        X.append(g)
        Y.append(y)
        _report(verbose, "seg-binary-paper", t, n_images, t0)
    return X, Y


_SCENE9 = _SCENE_SOURCES + ("astronaut",)


def make_stanford_paper(n_images: int = 715, size: int = 160, n_classes: int = 9, n_segments: int = 200,
                        seed: int = 0, noise: float = 0.08, verbose: bool = False
                        ) -> tuple[list[_Graph], list[npt.NDArray[np.int64]]]:
    """Scene-like multi-class segmentation over SLIC superpixels with 649 features, Stanford's size.

    The scenes are those of `structfw.datasets.make_stanford_like` (a warped Voronoi
    partition whose regions prefer class-specific heights, class k textured with a tinted crop
    of its own photograph, plus noise), with nine classes by default: its eight textures
    (grass, brick, gravel, moon, camera, coffee, chelsea, rocket) and ``astronaut()``.  Each is
    cut into superpixels and described by `superpixel_graph`.

    Parameters
    ----------
    n_images : int
        Number of images; default 715, the Stanford Background set.
    size : int >= 16
        Images are size x size pixels.
    n_classes : int in 2..9
        K, the paper's nine by default.
    n_segments : int
        SLIC's target number of superpixels (about 170-200 come out at the defaults).
    seed : int
        Image i is drawn from ``SeedSequence(seed, spawn_key=(i,))``.
    noise : float
        Standard deviation of the Gaussian pixel noise.
    verbose : bool
        Print progress every 100 images.

    Returns
    -------
    X : list of (node_features (V, 649), edges (E, 2) int64, edge_features (E, 3))
    Y : list of (V,) int64 in 0..n_classes-1
        Inputs for ``PottsModel(n_classes, 649, 3)``.
    """
    n_images = _check_count(n_images, "n_images")
    size = _check_count(size, "size")
    if size < 16:
        raise ValueError(f"size must be >= 16, got {size}")
    K = _check_count(n_classes, "n_classes")
    if not 2 <= K <= len(_SCENE9):
        raise ValueError(f"n_classes must be in 2..{len(_SCENE9)}, got {n_classes}")
    src = _sources(_SCENE9[:K])
    tints = 0.75 + 0.5 * np.random.default_rng(1234).random((K, 3))  # fixed class colours
    X, Y = [], []
    t0 = time.perf_counter()
    for t in range(n_images):
        rng = _image_rng(seed, t)
        img, lab = _render_scene(rng, src, tints, size, noise)
        g, y = _labelled(img, lab, K, n_segments)
        X.append(g)
        Y.append(y)
        _report(verbose, "seg-multi-paper", t, n_images, t0)
    return X, Y


def paper_model_factory(name: str) -> Callable[..., GraphLabellingModel]:
    """``make_model(**kwargs)`` for a set of `PAPER_SETS` (or ``"horseseg"`` / ``"stanford"``)."""
    from ..models import GraphCutModel, PottsModel

    if name in ("seg-binary-paper", "horseseg"):
        return lambda **kw: GraphCutModel(n_features=N_FEATURES, n_edge_features=N_EDGE_FEATURES, **kw)
    K = PAPER_SETS["seg-multi-paper"][0]
    return lambda **kw: PottsModel(n_states=K, n_features=N_FEATURES, n_edge_features=N_EDGE_FEATURES, **kw)


def _generator(name: str) -> Callable[..., tuple[list[_Graph], list[npt.NDArray[np.int64]]]]:
    return make_horseseg_paper if name == "seg-binary-paper" else make_stanford_paper


# ------------------------------------------------------------------ a user's copy of the real data
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


def _read_image(path: Path) -> npt.NDArray[Any]:
    from skimage.io import imread

    _skimage()
    try:
        img = np.asarray(imread(str(path)))
    except Exception as exc:  # imageio raises several types for unreadable files
        raise ValueError(f"{path}: cannot be read as an image ({type(exc).__name__}: {exc})") from None
    if img.ndim == 3 and img.shape[2] == 4:
        img = img[..., :3]  # PNG alpha
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] != 3):
        raise ValueError(f"{path}: expected a grey or RGB image, got an array of shape {img.shape}")
    return img


def _image_files(root: Any, sub: str, name: str) -> tuple[Path, list[Path]]:
    if not isinstance(root, (str, Path)):
        raise ValueError(f"root must be a directory path, got {type(root).__name__}")
    base = Path(root).expanduser()
    if not base.is_dir():
        raise ValueError(f"root {str(base)!r} is not a directory")
    d = base / sub
    if not d.is_dir():
        raise ValueError(f"{name}: no directory {str(d)!r} under root {str(base)!r}")
    files = sorted(p for p in d.iterdir() if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"{name}: {str(d)!r} holds no images ({', '.join(_IMAGE_SUFFIXES)})")
    return base, files


def _limit(files: list[Path], max_images: int | None) -> list[Path]:
    if max_images is None:
        return files
    return files[:_check_count(max_images, "max_images")]


def _read_regions(path: Path, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """A Stanford ``.regions.txt``: whitespace-separated integers, one row per image row."""
    if not path.is_file():
        raise ValueError(f"{path}: label file missing (expected for image {path.name.split('.')[0]})")
    try:
        with open(path) as f:
            rows = [line.split() for line in f if line.strip()]
        widths = {len(r) for r in rows}
        if len(widths) > 1:
            raise ValueError(f"rows of different lengths {sorted(widths)}")
        lab = np.array(rows, dtype=np.int64)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{path}: not a matrix of integer labels ({exc})") from None
    if lab.shape != tuple(shape):
        raise ValueError(f"{path}: label matrix has shape {lab.shape}, but its image is {tuple(shape)}")
    bad = (lab < -1) | (lab > 7)
    if bad.any():
        raise ValueError(f"{path}: labels must be in -1..7 (-1 = unknown), found {int(lab[bad][0])}")
    return lab


def load_stanford_background(root: str | Path, n_segments: int = 200, compactness: float = 20.0,
                             max_images: int | None = None, verbose: bool = False) -> SegmentationData:
    """Stanford Background (Gould et al. 2009) from a user's copy, as the MP-BCFW paper's task.

    Layout (the archive ``iccv09Data``): ``root/images/<stem>.jpg`` and
    ``root/labels/<stem>.regions.txt``, the latter an integer matrix of the image's size with
    0 sky, 1 tree, 2 road, 3 grass, 4 water, 5 building, 6 mountain, 7 foreground and -1
    unknown.  Unknown becomes the ninth class (8), as the paper's nine labels
    (`STANFORD_CLASSES`).  Each image goes through `superpixel_graph` (SLIC, 649 features),
    as the generated "seg-multi-paper" set.

    Parameters
    ----------
    root : path
        The directory holding ``images/`` and ``labels/``.
    n_segments : int
        SLIC's target number of superpixels per image.
    compactness : float
        SLIC's compactness.
    max_images : int, optional
        Only the first images, in the order of their file names.
    verbose : bool
        Print progress every 100 images.

    Returns
    -------
    SegmentationData
        ``(X, Y, make_model)``, images in the order of their file names; ``make_model()`` is
        ``PottsModel(9, 649, 3)``.

    Raises
    ------
    ValueError
        Naming the file: a missing or unreadable label file, a label matrix whose shape is not
        the image's, labels outside -1..7, an unreadable image.
    """
    from .segmentation import SegmentationData

    _, files = _image_files(root, "images", "root")
    files = _limit(files, max_images)
    X, Y = [], []
    t0 = time.perf_counter()
    for i, img_path in enumerate(files):
        img = _read_image(img_path)
        lab = _read_regions(img_path.parent.parent / "labels" / f"{img_path.stem}.regions.txt", img.shape[:2])
        lab = np.where(lab < 0, 8, lab)
        g, y = _labelled(img, lab, 9, n_segments, compactness)
        X.append(g)
        Y.append(y)
        _report(verbose, "stanford", i, len(files), t0)
    return SegmentationData(X, Y, paper_model_factory("stanford"))


def _read_mask(path: Path, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    from skimage.io import imread

    try:
        m = np.asarray(imread(str(path)))
    except Exception as exc:
        raise ValueError(f"{path}: cannot be read as a mask image ({type(exc).__name__}: {exc})") from None
    if m.ndim == 3:
        if m.shape[2] == 4:
            m = m[..., :3]
        if not (m == m[..., :1]).all():
            raise ValueError(f"{path}: a colour mask; expected a binary (grey) mask")
        m = m[..., 0]
    if m.shape != tuple(shape):
        raise ValueError(f"{path}: mask has shape {m.shape}, but its image is {tuple(shape)}")
    values = np.unique(m)
    if m.dtype == np.bool_:
        return m.astype(np.int64)
    hi = values.max()
    if not (set(values.tolist()) <= {0, 1} or set(values.tolist()) <= {0, 255}):
        raise ValueError(f"{path}: a binary mask must hold 0 and 1 or 0 and 255 only, found values "
                         f"{values[:6].tolist()}{'...' if values.size > 6 else ''}")
    return (m == hi).astype(np.int64) if hi > 0 else np.zeros(m.shape, np.int64)


def load_horseseg(root: str | Path, image_dir: str = "images", mask_dir: str = "masks", n_segments: int = 100,
                  compactness: float = 20.0, max_images: int | None = None, verbose: bool = False
                  ) -> SegmentationData:
    """Figure-ground data in a HorseSeg-style layout, as the MP-BCFW paper's HorseSeg task.

    Layout: ``root/<image_dir>/<stem>.<jpg|png|...>`` and ``root/<mask_dir>/<stem>.png``, a
    binary mask of the image's size (0 / 1 or 0 / 255; 1 or 255 is the figure).  Each image
    goes through `superpixel_graph` (SLIC, 649 features), as the generated "seg-binary-paper"
    set; a superpixel is figure when most of its pixels are.

    Parameters
    ----------
    root : path
        The directory holding the two subdirectories.
    image_dir, mask_dir : str
        Their names.
    n_segments : int
        SLIC's target number of superpixels per image.
    compactness : float
        SLIC's compactness.
    max_images : int, optional
        Only the first images, in the order of their file names.
    verbose : bool
        Print progress every 100 images.

    Returns
    -------
    SegmentationData
        ``(X, Y, make_model)``, images in the order of their file names; ``make_model()`` is
        ``GraphCutModel(649, 3)``.

    Raises
    ------
    ValueError
        Naming the file: a missing mask, a mask whose shape is not the image's, values other
        than 0/1 or 0/255, an unreadable image or mask.
    """
    from .segmentation import SegmentationData

    base, files = _image_files(root, image_dir, "image_dir")
    files = _limit(files, max_images)
    masks = base / mask_dir
    if not masks.is_dir():
        raise ValueError(f"mask_dir: no directory {str(masks)!r} under root {str(base)!r}")
    X, Y = [], []
    t0 = time.perf_counter()
    for i, img_path in enumerate(files):
        img = _read_image(img_path)
        mask_path = masks / f"{img_path.stem}.png"
        if not mask_path.is_file():
            raise ValueError(f"{mask_path}: mask missing for image {img_path}")
        mask = _read_mask(mask_path, img.shape[:2])
        g, y = _labelled(img, mask, 2, n_segments, compactness)
        X.append(g)
        Y.append(y)
        _report(verbose, "horseseg", i, len(files), t0)
    return SegmentationData(X, Y, paper_model_factory("horseseg"))


def describe(X: Sequence[_Graph]) -> dict[str, float]:
    """Sizes of a set of superpixel graphs: images, mean / min / max superpixels, mean edges, MB."""
    V = np.array([x[0].shape[0] for x in X])
    E = np.array([x[1].shape[0] for x in X])
    mb = sum(x[0].nbytes + x[1].nbytes + x[2].nbytes for x in X) / 2 ** 20
    return dict(n=len(X), V_mean=float(V.mean()), V_min=int(V.min()), V_max=int(V.max()),
                E_mean=float(E.mean()), MB=float(mb))
