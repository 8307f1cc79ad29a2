"""structfw.features.PixelFeatures: images -> grid / pixel-graph / superpixel-graph inputs."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import Pipeline

import structfw as sf
from structfw.features import EDGE_FEATURES, PIXEL_FEATURES, PixelFeatures, superpixel_labels
from structfw.models import GraphModel, GridModel, PottsModel


def _images(n=4, size=16, seed=0):
    """Two-region images (a bright textured left half or a dark smooth one) and their label images."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for t in range(n):
        lab = np.zeros((size, size), np.int64)
        cut = int(rng.integers(size // 3, 2 * size // 3))
        lab[:, cut:] = 1
        img = np.where(lab[..., None] == 1, [0.2, 0.3, 0.8], [0.9, 0.7, 0.2]) + 0.05 * rng.standard_normal((size, size, 3))
        X.append(np.clip(img, 0, 1) if t % 2 == 0 else (np.clip(img, 0, 1) * 255).astype(np.uint8))
        Y.append(lab)
    return X, Y


@pytest.mark.parametrize("output", ["superpixels", "pixels", "grid"])
def test_shapes_dtypes_and_widths(output):
    X, _ = _images(3)
    X.append((X[0].mean(axis=2) if X[0].dtype != np.uint8 else X[1].mean(axis=2)).astype(np.float64) / (
        255.0 if X[0].dtype == np.uint8 else 1.0))  # a grey image
    X[-1] = np.clip(X[-1], 0, 1)
    pf = PixelFeatures(output=output, n_segments=8)
    out = pf.fit_transform(X)
    assert len(out) == len(X) and len(pf.feature_names_) == pf.n_features_
    assert pf.n_features_ == 3 + 3 * (output == "superpixels") + 2 + 10 + 9 + 1
    for img, o in zip(X, out):
        H, W = img.shape[:2]
        if output == "grid":
            assert o.shape == (H, W, pf.n_features_) and o.dtype == np.float64
            assert pf.n_edge_features_ is None
            continue
        nodes, edges, ef = o
        V = nodes.shape[0]
        assert nodes.dtype == np.float64 and nodes.shape == (V, pf.n_features_) and nodes.flags.c_contiguous
        assert edges.dtype == np.int64 and edges.shape[1] == 2 and np.all(edges[:, 0] < edges[:, 1])
        assert ef.dtype == np.float64 and ef.shape == (edges.shape[0], pf.n_edge_features_) == (len(edges), 3)
        assert np.all(ef >= 0) and np.all(np.isfinite(nodes))
        if output == "pixels":
            assert V == H * W and edges.shape[0] == H * (W - 1) + W * (H - 1)
        else:
            seg = pf.segments([img])[0]
            assert V == seg.max() + 1 and np.array_equal(np.unique(seg), np.arange(V))
        # normalize=True divides by V: the bias column is 1/V
        np.testing.assert_allclose(nodes[:, -1], 1.0 / V)


def test_deterministic_and_transform_equals_fit_transform():
    X, _ = _images(3)
    a = PixelFeatures(n_segments=6).fit_transform(X)
    pf = PixelFeatures(n_segments=6).fit(X)
    b = pf.transform(X)
    for (n1, e1, f1), (n2, e2, f2) in zip(a, b):
        np.testing.assert_array_equal(n1, n2)
        np.testing.assert_array_equal(e1, e2)
        np.testing.assert_array_equal(f1, f2)


def test_superpixel_features_are_region_statistics():
    """On a two-colour image the superpixels do not straddle the colour edge, and their Lab
    means are the two colours; the contrast feature is low across the edge."""
    img = np.zeros((12, 12, 3))
    img[:, :6] = [1.0, 0.0, 0.0]
    img[:, 6:] = [0.0, 0.0, 1.0]
    pf = PixelFeatures(n_segments=4, features=("lab", "position"), edge_features=("contrast", "bias"),
                       normalize=False, compactness=1.0, sigma=0.0)
    (nodes, edges, ef), = pf.fit_transform([img])
    seg = pf.segments([img])[0]
    left = seg[:, :6]
    assert nodes.shape[0] >= 2 and not np.isin(left, seg[:, 6:]).any()  # no superpixel straddles the edge
    from skimage.color import rgb2lab

    for colour, region in (([1.0, 0, 0], left), ([0, 0, 1.0], seg[:, 6:])):
        ref = rgb2lab(np.array([[colour]]))[0, 0] / [100, 128, 128]
        for v in np.unique(region):
            np.testing.assert_allclose(nodes[v, :3], ref, atol=1e-9)
    np.testing.assert_allclose(nodes[:, 3:6], 0.0, atol=1e-6)  # no colour spread inside a region
    across = np.isin(edges[:, 0], left) != np.isin(edges[:, 1], left)
    assert across.any()
    np.testing.assert_allclose(ef[~across, 0], 1.0)  # equal colours: contrast exp(0)
    assert np.all(ef[across, 0] < 0.5)
    np.testing.assert_allclose(ef[:, 1], 1.0)


def test_superpixel_labels_majority_ties_and_unlabelled():
    seg = np.array([[0, 0, 1], [0, 2, 1]])
    lab = np.array([[1, 1, 0], [2, -1, 1]])
    (y,) = superpixel_labels([seg], [lab])
    assert y.dtype == np.int64 and y.tolist() == [1, 0, -1]  # 0/1 tie in segment 1 -> 0; segment 2 unlabelled
    with pytest.raises(ValueError, match="label_images\\[0\\] has shape"):
        superpixel_labels([seg], [lab[:, :2]])
    with pytest.raises(ValueError, match="differ in length"):
        superpixel_labels([seg], [])


def test_transform_labels_and_to_pixels_round_trip():
    X, Y = _images(2)
    for output in ("superpixels", "pixels", "grid"):
        pf = PixelFeatures(output=output, n_segments=6)
        Yn = pf.transform_labels(X, Y)
        back = pf.to_pixels(X, Yn)
        for y, b, img in zip(Y, back, X):
            assert b.shape == img.shape[:2]
            # superpixels follow the colour edge here, so the majority labels give back the image's labels
            assert np.mean(b == y) > 0.9
            if output != "superpixels":
                np.testing.assert_array_equal(b, y)


@pytest.mark.parametrize("output,model", [("superpixels", "graph"), ("pixels", "potts"), ("grid", "grid")])
def test_in_a_pipeline_fit_and_predict(output, model):
    X, Y = _images(6, size=12)
    pf = PixelFeatures(output=output, n_segments=6, features=("lab", "position", "bias"))
    pf.fit(X[:1])  # the widths depend on the parameters only
    F, Fe = pf.n_features_, pf.n_edge_features_
    m = {"graph": lambda: GraphModel(2, F, Fe, pairwise="potts"), "potts": lambda: PottsModel(2, F, Fe),
         "grid": lambda: GridModel(2, F)}[model]()
    pipe = Pipeline([("features", pf), ("svm", sf.StructuredSVM(m, lam=1e-3, max_passes=20, tol=None,
                                                                 random_state=0))])
    Yn = pf.transform_labels(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X[:4], Yn[:4])
    P = pipe.predict(X[4:])
    assert len(P) == 2
    acc = np.mean([np.mean(p == y) for p, y in zip(P, Yn[4:])])
    assert acc > 0.8  # colour separates the two regions
    pix = pf.to_pixels(X[4:], P)
    assert pix[0].shape == X[4].shape[:2]
    # the clone of the pipeline fits alike
    assert clone(pipe).get_params()["features__output"] == output


def test_get_params_clone_and_feature_names():
    pf = PixelFeatures(output="grid", features=("lab", "bias"), window=3)
    c = clone(pf)
    assert c.get_params() == pf.get_params()
    assert c.get_params()["window"] == 3 and not hasattr(c, "n_features_")
    c.set_params(features=("position",))
    X, _ = _images(1)
    assert list(c.fit(X).get_feature_names_out()) == ["row", "col"]
    assert set(PIXEL_FEATURES) == {"lab", "position", "lbp", "gradient", "bins", "bias"}
    assert set(EDGE_FEATURES) == {"contrast", "boundary", "bias"}


def test_error_paths_name_the_argument():
    X, _ = _images(1)
    pf = PixelFeatures()
    with pytest.raises(ValueError, match="X holds no images"):
        pf.fit([])
    with pytest.raises(ValueError, match="list of images"):
        pf.fit(X[0])  # one image, not a list
    with pytest.raises(ValueError, match=r"X\[1\] must be a grey \(H, W\) or colour \(H, W, 3\) image"):
        pf.fit([X[0], np.zeros((4, 4, 2))])
    with pytest.raises(ValueError, match=r"X\[0\] must be a grey"):
        pf.fit([np.zeros(5)])
    with pytest.raises(ValueError, match="RGBA"):
        pf.fit([np.zeros((4, 4, 4))])
    with pytest.raises(ValueError, match=r"X\[0\] is a float image with values in"):
        pf.fit([np.full((4, 4), 2.0)])
    with pytest.raises(ValueError, match=r"X\[0\] has negative values"):
        pf.fit([np.full((4, 4), -3, np.int16)])
    with pytest.raises(ValueError, match="NaN"):
        pf.fit([np.full((4, 4), np.nan)])
    with pytest.raises(ValueError, match="output must be"):
        PixelFeatures(output="voxels").fit(X)
    with pytest.raises(ValueError, match="features: unknown"):
        PixelFeatures(features=("colour",)).fit(X)
    with pytest.raises(ValueError, match="edge_features is empty"):
        PixelFeatures(edge_features=()).fit(X)
    with pytest.raises(ValueError, match="window must be odd"):
        PixelFeatures(window=4).fit(X)
    with pytest.raises(ValueError, match="n_segments must be an integer"):
        PixelFeatures(n_segments=0).fit(X)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        PixelFeatures().transform(X)
    with pytest.raises(ValueError, match="X holds no images"):
        PixelFeatures().fit(X).transform([])


def test_superpixel_pipeline_with_approximate_marginals_as_in_the_guide():
    """docs/guide/features.md: GraphModel on superpixel graphs (loopy), labels painted back,
    approximate marginals on the transformed test images."""
    X, Y = _images(5, size=16, seed=3)
    features = PixelFeatures(output="superpixels", n_segments=8).fit(X[:1])
    pipe = Pipeline([("features", features),
                     ("svm", sf.StructuredSVM(GraphModel(2, features.n_features_, features.n_edge_features_,
                                                         pairwise="potts"), lam=1e-3, max_passes=10, tol=None,
                                              random_state=0))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X[:3], features.transform_labels(X[:3], Y[:3]))
    maps = features.to_pixels(X[3:], pipe.predict(X[3:]))
    assert [m.shape for m in maps] == [(16, 16), (16, 16)]
    M = pipe[-1].predict_marginals(pipe[0].transform(X[3:]), approximate=True)
    for m, (nodes, _, _) in zip(M, pipe[0].transform(X[3:])):
        assert m.shape == (nodes.shape[0], 2)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)


def test_bins_are_the_generated_segmentation_sets_features():
    """features=("bins",) reuses structfw.datasets.segmentation's cues: the same columns as its pixel
    and superpixel features, and the same region adjacency."""
    from structfw.datasets.segmentation import _pixel_features, _superpixel_graph

    img = np.random.default_rng(0).random((20, 20, 3))
    pf = PixelFeatures(output="pixels", features=("bins",), normalize=False)
    (nodes, _, _), = pf.fit_transform([img])
    assert pf.n_features_ == 38 and pf.feature_names_[0] == "intensity_bin_0"
    np.testing.assert_array_equal(nodes, _pixel_features(img)[0].toarray()[:, :38])
    pf.set_params(output="superpixels", n_segments=6)
    (nodes, edges, _), = pf.fit_transform([img])
    ref_nodes, ref_edges, _, _ = _superpixel_graph(img, pf.segments([img])[0], np.zeros((20, 20), np.int64), 2)
    np.testing.assert_allclose(nodes, ref_nodes[:, :38], atol=1e-12)
    np.testing.assert_array_equal(edges, ref_edges)
