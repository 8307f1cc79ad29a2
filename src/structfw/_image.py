"""Image helpers shared by the feature pipeline (`structfw.features`) and the segmentation data
(`structfw.datasets.segmentation`, `structfw.datasets.segmentation_paper`): one module both import,
so that neither reaches into the other's private names.

`check_image` validates and converts an image; `pixel_codes` quantises the per-pixel cues
(`CUE_SIZES` bins each); `grid_edges`, `contrast` and `normalised_graph` build the graph of an image's
pixels or regions with its edge features.  scikit-image is imported inside the functions that need
it (the ``seg`` extra).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

#: a graph of an image: (node features, edges (E, 2), edge features)
Graph = tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.float64]]

#: bins of the quantised cues of `pixel_codes`: intensity, hue, saturation, texture, gradient
CUE_SIZES = (12, 8, 4, 8, 6)


def check_image(img: Any, where: str) -> np.ndarray:
    """An image as float64 RGB in [0, 1], (H, W, 3); integer images are scaled by their dtype's range."""
    from skimage.color import gray2rgb
    from skimage.util import img_as_float64

    if sp.issparse(img) or isinstance(img, (str, bytes, Mapping)):
        raise ValueError(f"{where} must be an image array (H, W) or (H, W, 3); got {type(img).__name__}")
    try:
        a = np.asarray(img)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{where} could not be converted to an array: {exc}") from exc
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"{where} must hold numbers, got dtype {a.dtype}")
    if a.ndim == 3 and a.shape[2] == 4:
        raise ValueError(f"{where} has 4 channels (RGBA?): pass RGB images, e.g. img[..., :3]")
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] != 3):
        raise ValueError(f"{where} must be a grey (H, W) or colour (H, W, 3) image, got shape {a.shape}")
    if a.shape[0] < 2 or a.shape[1] < 2:
        raise ValueError(f"{where} must be at least 2 x 2 pixels, got shape {a.shape}")
    if np.issubdtype(a.dtype, np.floating):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{where} contains NaN or infinite values")
        if a.min() < 0.0 or a.max() > 1.0:
            raise ValueError(f"{where} is a float image with values in [{a.min():.3g}, {a.max():.3g}]; float "
                             "images must be in [0, 1] (integer images are scaled by their dtype, e.g. uint8 / 255)")
        a = a.astype(np.float64)
    else:
        a = img_as_float64(a)
        if a.min() < 0.0:  # a signed integer image with negative values maps to [-1, 0)
            raise ValueError(f"{where} has negative values (dtype {np.asarray(img).dtype}); pass intensities "
                             ">= 0, e.g. uint8 or floats in [0, 1]")
    if a.ndim == 2:
        a = gray2rgb(a)
    return np.ascontiguousarray(a, dtype=np.float64)


def pixel_codes(img: np.ndarray) -> tuple[list[npt.NDArray[np.int64]], np.ndarray]:
    """Per-pixel integer codes of the quantised cues: (intensity 12, hue 8, saturation 4,
    texture 8, gradient 6) and the grey image (used by the edge features)."""
    from scipy import ndimage
    from skimage.color import rgb2gray, rgb2hsv

    grey = rgb2gray(img)
    smooth = ndimage.gaussian_filter(grey, 1.0)
    hsv = rgb2hsv(np.clip(img, 0, 1))
    log = ndimage.gaussian_laplace(grey, 1.5)
    tex = np.sqrt(ndimage.uniform_filter(log ** 2, 5))
    grad = ndimage.gaussian_gradient_magnitude(grey, 1.0)

    def bins(v: np.ndarray, n: int, hi: float) -> npt.NDArray[np.int64]:
        return np.clip((v / hi * n).astype(np.int64), 0, n - 1)

    return [bins(smooth, 12, 1.0), bins(hsv[..., 0], 8, 1.0), bins(hsv[..., 1], 4, 1.0),
            bins(tex, 8, 0.12), bins(grad, 6, 0.3)], grey


def grid_edges(h: int, w: int) -> npt.NDArray[np.int64]:
    """The 4-neighbour edges (E, 2) of an h x w pixel grid, row-major node ids: horizontal then vertical."""
    idx = np.arange(h * w).reshape(h, w)
    return np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                           np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)]).astype(np.int64)


def contrast(colour_u: np.ndarray, colour_v: np.ndarray) -> npt.NDArray[np.float64]:
    """exp(-beta ||c_u - c_v||^2) per edge, beta = 1 / (2 mean ||c_u - c_v||^2): the contrast-sensitive
    Potts weight of interactive segmentation (1 on flat regions, near 0 across strong edges)."""
    d2 = ((colour_u - colour_v) ** 2).sum(1)
    beta = 1.0 / (2.0 * d2.mean()) if d2.mean() > 0 else 1.0
    return np.exp(-beta * d2)


def normalised_graph(nodes: Any, edges: npt.NDArray[np.int64], ef: npt.NDArray[np.float64]) -> Graph:
    """Node and edge features divided by the number of nodes V.

    phi sums over nodes and edges while the normalised Hamming loss is a mean, so
    without this ||psi|| grows like V, the regularisation lam that matters grows like
    V^2 and BCFW's rate (R^2 / lam) degrades; with it the useful lam is in the usual
    1e-4 .. 1e-1 range for every image size."""
    V = nodes.shape[0]
    return nodes * (1.0 / V), edges, ef * (1.0 / V)
