"""Superpixel region-adjacency graphs for `structfw.models.GraphModel` (the "seg-graph" tasks).

The graphs are those of the segmentation tasks of `structfw.datasets.segmentation`, built
offline from scikit-image's bundled photographs: scene-like mosaics whose classes are
textured with crops of ``skimage.data`` images, cut into SLIC superpixels.  One example
is one image:

* nodes: its superpixels, with the 41 dense features of `make_stanford_like` (histograms
  of intensity, hue, saturation, texture and gradient bins, mean position, a bias);
* edges: pairs of superpixels that share a boundary (the region adjacency graph, RAG),
  each pair once; the RAG of a partition of the plane has cycles, so `GraphModel`'s
  ``inference="auto"`` takes the loopy back-ends (TRW-S; QPBO for K = 2 when the energy
  is submodular);
* edge features (3): exp(-beta ||mean colour_u - mean colour_v||^2) with beta the inverse
  of twice the image's mean squared difference, the shared boundary length over its
  mean, and 1;
* labels: the majority class of each superpixel's pixels.

Node and edge features are divided by the number of superpixels, as in the
segmentation tasks (see `structfw._image.normalised_graph`).

``seg-graph`` is the 6-class task (the same images and graphs as ``seg-multi``, 60 train
/ 40 test images of about 280 superpixels), ``seg-graph-binary`` a 2-class one made by
the same generator (grass against brick textures, seeds 0 and 1).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .segmentation import _VERSION, _load, _save, data_home, load_segmentation, make_stanford_like

#: name -> (number of classes, generator keyword arguments of the train and test splits)
GRAPH_SETS: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {
    "seg-graph": (6, dict(n_images=60, n_classes=6, seed=0), dict(n_images=40, n_classes=6, seed=1)),
    "seg-graph-binary": (2, dict(n_images=60, n_classes=2, seed=0), dict(n_images=40, n_classes=2, seed=1)),
}
N_FEATURES = 41
N_EDGE_FEATURES = 3


class SuperpixelGraphs(NamedTuple):
    """What `load_superpixel_graphs` returns: ``X, Y, make_model = load_superpixel_graphs(...)``."""

    X: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]]
    Y: list[npt.NDArray[np.int64]]
    make_model: Callable[..., Any]


def load_superpixel_graphs(name: str = "seg-graph", split: str = "train", n_images: int | None = None,
                           cache: bool = True) -> SuperpixelGraphs:
    """Superpixel region-adjacency graphs of generated scene images, with per-superpixel labels.

    Parameters
    ----------
    name : {"seg-graph", "seg-graph-binary"}
        "seg-graph": 6 classes (the images of the "seg-multi" task); "seg-graph-binary":
        2 classes.  See the module docstring.
    split : {"train", "test"}
        60 training and 40 test images, from different seeds.
    n_images : int, optional
        Only the first ``n_images`` images of the split (the same images as in the whole
        split: each image is drawn after the previous ones from one seeded generator).
        When the split is not cached yet only these are generated, and nothing is cached.
    cache : bool
        Read/write the whole split under ``<data_home()>/segmentation/`` (``.npz``), as
        `structfw.datasets.load_segmentation` does; "seg-graph" shares the "seg-multi"
        files.

    Returns
    -------
    SuperpixelGraphs
        ``(X, Y, make_model)``: X a list of ``(node_features (V, 41), edges (E, 2),
        edge_features (E, 3))``, Y a list of (V,) int64 labels, and ``make_model(**kwargs)``
        a `GraphModel` for them (``pairwise="potts"`` unless given; kwargs go to its
        constructor).
    """
    if name not in GRAPH_SETS:
        raise ValueError(f"name must be one of {tuple(GRAPH_SETS)}, got {name!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    K, train_kw, test_kw = GRAPH_SETS[name]
    kwargs = dict(train_kw if split == "train" else test_kw)
    full = kwargs["n_images"]
    if n_images is not None:
        n_images = int(n_images)
        if not 1 <= n_images <= full:
            raise ValueError(f"n_images must be in 1..{full} for the {split} split, got {n_images}")
    if name == "seg-graph":
        path = data_home() / "segmentation" / f"seg-multi-{split}-v{_VERSION}.npz"
    else:
        path = data_home() / "segmentation" / f"{name}-{split}-v{_VERSION}.npz"
    if n_images is not None and n_images < full and not (cache and path.exists()):
        # a slice: the generator's images are a prefix-stable sequence, so the first
        # n_images are generated alone (a gallery example need not build all 60)
        X, Y = make_stanford_like(**{**kwargs, "n_images": n_images})
    elif name == "seg-graph":
        X, Y, _ = load_segmentation("seg-multi", split, cache=cache)
    elif cache and (loaded := _load(path)) is not None:
        X, Y = loaded
    else:
        X, Y = make_stanford_like(**kwargs)
        if cache:
            _save(path, X, Y)
    X, Y = list(X[:n_images]), list(Y[:n_images])
    return SuperpixelGraphs(X, Y, _graph_model_factory(K))


def _graph_model_factory(K: int) -> Callable[..., Any]:
    from ..models import GraphModel

    def make_model(**kwargs: Any) -> GraphModel:
        # Potts by default: a learned agreement bonus per edge feature (3 parameters), which
        # fits a scene's regions better than a K x K table (a 6-class table is 63 parameters
        # per edge feature, mostly for label pairs that rarely touch)
        kwargs.setdefault("pairwise", "potts")
        return GraphModel(n_states=K, n_features=N_FEATURES, n_edge_features=N_EDGE_FEATURES, **kwargs)

    return make_model


def without_edges(X: Sequence[tuple[Any, ...]]) -> list[tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
    """The same graphs with no edges: a `GraphModel` on them has unary terms only.

    The baseline "no pairwise terms" on the same node features: each node is then labelled
    on its own (an edgeless graph is a forest, so inference is exact), which is a
    per-superpixel multiclass SVM with the normalised Hamming loss.

    Parameters
    ----------
    X : list of (node_features, edges[, edge_features])

    Returns
    -------
    list of (node_features, (0, 2) int64 edges, (0, Fe) edge features)
    """
    out = []
    for x in X:
        Fe = np.shape(x[2])[1] if len(x) > 2 else 1
        out.append((x[0], np.zeros((0, 2), np.int64), np.zeros((0, Fe))))
    return out


__all__ = ["load_superpixel_graphs", "without_edges", "SuperpixelGraphs", "GRAPH_SETS"]
