"""Segmentation at the papers' scale (datasets/segmentation_paper.py): the 649 superpixel
features, the generated HorseSeg- and Stanford-sized sets on small n, and the loaders of a
user's copy of Stanford Background and of HorseSeg-style folders on fixtures written here."""
import numpy as np
import pytest

import structfw as sf
from structfw.datasets import (load_horseseg, load_segmentation, load_stanford_background, make_horseseg_paper,
                               make_stanford_paper)
from structfw.datasets.segmentation_paper import (N_EDGE_FEATURES, N_FEATURES, PAPER_SETS, STANFORD_CLASSES,
                                                  feature_names, superpixel_graph)
from structfw.models import GraphCutModel, PottsModel

skimage_io = pytest.importorskip("skimage.io")


@pytest.fixture(scope="module")
def small_binary():
    return make_horseseg_paper(n_images=3, size=48, n_segments=30, seed=5)


@pytest.fixture(scope="module")
def small_multi():
    return make_stanford_paper(n_images=3, size=64, n_segments=40, seed=5)


def _check_graphs(X, Y, K):
    for (nodes, edges, ef), y in zip(X, Y):
        V = nodes.shape[0]
        assert nodes.shape == (V, N_FEATURES) and nodes.dtype == np.float64 and nodes.flags.c_contiguous
        assert np.isfinite(nodes).all() and np.isfinite(ef).all()
        assert edges.dtype == np.int64 and edges.shape[1] == 2 and ef.shape == (edges.shape[0], N_EDGE_FEATURES)
        assert (edges[:, 0] < edges[:, 1]).all() and edges.max() < V
        assert (ef >= 0).all()
        assert y.shape == (V,) and y.dtype == np.int64 and 0 <= y.min() and y.max() < K
        np.testing.assert_allclose(nodes[:, -1] * V, 1.0)  # the bias, divided by V


def _same(a, b):
    (XA, YA), (XB, YB) = a, b
    assert len(XA) == len(XB)
    for xa, xb in zip(XA, XB):
        for u, v in zip(xa, xb):
            np.testing.assert_array_equal(u, v)
    for ya, yb in zip(YA, YB):
        np.testing.assert_array_equal(ya, yb)


# ------------------------------------------------------------------ features and generators
def test_feature_names_are_649_and_distinct():
    names = feature_names()
    assert len(names) == N_FEATURES == 649 and len(set(names)) == 649
    assert names[-1] == "bias" and names[295] == "context_" + names[0]


def test_generated_shapes_and_models(small_binary, small_multi):
    X, Y = small_binary
    _check_graphs(X, Y, 2)
    assert all(10 < x[0].shape[0] < 80 for x in X)
    assert any(0 < y.mean() < 1 for y in Y)  # figure and ground both present
    GraphCutModel(N_FEATURES, N_EDGE_FEATURES).check_data(X, Y)
    Xm, Ym = small_multi
    _check_graphs(Xm, Ym, 9)
    assert len(np.unique(np.concatenate(Ym))) >= 3
    PottsModel(9, N_FEATURES, N_EDGE_FEATURES).check_data(Xm, Ym)


def test_generators_are_deterministic_and_prefix_stable(small_binary, small_multi):
    _same(small_binary, make_horseseg_paper(n_images=3, size=48, n_segments=30, seed=5))
    _same(small_multi, make_stanford_paper(n_images=3, size=64, n_segments=40, seed=5))
    # the first images do not depend on how many are drawn
    first = make_horseseg_paper(n_images=2, size=48, n_segments=30, seed=5)
    _same(first, (small_binary[0][:2], small_binary[1][:2]))
    other = make_stanford_paper(n_images=1, size=64, n_segments=40, seed=6)
    assert not np.array_equal(other[0][0][0], small_multi[0][0][0])


def test_labels_do_not_enter_the_features():
    rng = np.random.default_rng(0)
    img = rng.random((40, 40, 3))
    a = rng.integers(0, 2, (40, 40))
    (ga, ya) = superpixel_graph(img, a, 2, n_segments=20)
    (gb, yb) = superpixel_graph(img, 1 - a, 2, n_segments=20)
    (gn, yn) = superpixel_graph(img, None, n_segments=20)
    for u, v, w in zip(ga, gb, gn):
        np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(u, w)
    assert yn is None and not np.array_equal(ya, yb)


def test_superpixel_labels_are_the_majority():
    img = np.zeros((32, 32, 3))
    img[:, 16:] = 1.0  # two flat halves: SLIC cuts along the edge
    lab = np.zeros((32, 32), np.int64)
    lab[:, 16:] = 1
    (nodes, edges, ef), y = superpixel_graph(img, lab, 2, n_segments=4)
    V = nodes.shape[0]
    col = nodes[:, feature_names().index("col")] * V
    np.testing.assert_array_equal(y, (col > 0.5).astype(np.int64))


def test_one_superpixel_has_no_edges():
    (nodes, edges, ef), y = superpixel_graph(np.full((8, 8), 0.5), np.zeros((8, 8), np.int64), 2, n_segments=1)
    assert nodes.shape == (1, N_FEATURES) and edges.shape == (0, 2) and ef.shape == (0, N_EDGE_FEATURES)


def test_registry_sizes_and_cli_names():
    from structfw.cli._common import NAMED_DATA
    from structfw.datasets import segmentation as seg

    assert seg._SETS["seg-binary-paper"][1]["n_images"] == 2376
    assert seg._SETS["seg-multi-paper"][1]["n_images"] == 715
    assert PAPER_SETS["seg-multi-paper"][0] == 9 == len(STANFORD_CLASSES)
    assert NAMED_DATA["seg-binary-paper"] == "graphcut" and NAMED_DATA["seg-multi-paper"] == "potts"


@pytest.mark.parametrize("name, model, K", [("seg-binary-paper", GraphCutModel, 2),
                                            ("seg-multi-paper", PottsModel, 9)])
def test_load_segmentation_caches_the_paper_sets(tmp_path, monkeypatch, name, model, K):
    from structfw.datasets import segmentation as seg

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    make = seg._SETS[name][0]  # the registered generator, on a small size
    small = dict(n_images=2, size=40, n_segments=20)
    monkeypatch.setitem(seg._SETS, name, (make, dict(small, seed=0), dict(small, seed=1)))
    X, Y, make_model = load_segmentation(name, "train")
    path = tmp_path / "segmentation" / f"{name}-train-v{seg._VERSION}.npz"
    assert path.exists()
    X2, Y2, _ = load_segmentation(name, "train")  # from the cache
    _same((X, Y), (X2, Y2))
    m = make_model()
    assert isinstance(m, model) and m.n_features == N_FEATURES and m.n_states == K
    _check_graphs(X2, Y2, K)


@pytest.mark.parametrize("name", ["seg-binary-paper", "seg-multi-paper"])
def test_structfw_train_reaches_the_paper_sets(tmp_path, monkeypatch, name):
    from click.testing import CliRunner

    from structfw.cli import main
    from structfw.datasets import segmentation as seg

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    make = seg._SETS[name][0]
    small = dict(n_images=2, size=40, n_segments=20)
    monkeypatch.setitem(seg._SETS, name, (make, dict(small, seed=0), dict(small, seed=1)))
    r = CliRunner().invoke(main, ["train", "--data", name, "--passes", "1", "--quiet", "--lam", "0.01"])
    assert r.exit_code == 0, r.output
    assert "test error" in r.output


def test_a_fit_runs_on_the_paper_features(small_multi):
    X, Y = small_multi
    svm = sf.StructuredSVM(PottsModel(9, N_FEATURES, N_EDGE_FEATURES), lam=0.1, max_passes=2, random_state=0)
    svm.fit(X, Y)
    assert np.isfinite(svm.trace_.last("gap")) and 0.0 <= svm.score(X, Y) <= 1.0


# ------------------------------------------------------------------ the real layouts, on fixtures
def _scene(rng, h=36, w=44):
    lab = np.full((h, w), 0, np.int64)
    lab[h // 2:, :] = 3
    lab[h // 2:, w // 2:] = 7
    lab[:3, :3] = -1
    colours = {0: (0.4, 0.6, 0.9), 3: (0.2, 0.7, 0.2), 7: (0.8, 0.2, 0.2), -1: (0.5, 0.5, 0.5)}
    img = np.zeros((h, w, 3))
    for k, c in colours.items():
        img[lab == k] = c
    img = np.clip(img + 0.03 * rng.standard_normal(img.shape), 0, 1)
    return (img * 255).astype(np.uint8), lab


def _write_stanford(root, n=2, seed=0):
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    labs = []
    for i in range(n):
        img, lab = _scene(rng)
        skimage_io.imsave(str(root / "images" / f"{i:07d}.jpg"), img, check_contrast=False)
        np.savetxt(root / "labels" / f"{i:07d}.regions.txt", lab, fmt="%d")
        labs.append(lab)
    return labs


def test_load_stanford_background_reads_the_layout(tmp_path):
    labs = _write_stanford(tmp_path, n=2)
    X, Y, make_model = load_stanford_background(tmp_path, n_segments=12)
    assert len(X) == len(Y) == 2
    _check_graphs(X, Y, 9)
    m = make_model()
    assert isinstance(m, PottsModel) and m.n_states == 9 and m.n_features == 649
    m.check_data(X, Y)
    # the same pipeline as the generated sets, unknown (-1) mapped to the ninth class
    img = skimage_io.imread(str(tmp_path / "images" / "0000000.jpg"))
    g, y = superpixel_graph(img, np.where(labs[0] < 0, 8, labs[0]), 9, n_segments=12)
    _same(([g], [y]), ([X[0]], [Y[0]]))
    assert {0, 3, 7} <= set(np.concatenate(Y).tolist())
    X1, _, _ = load_stanford_background(tmp_path, n_segments=12, max_images=1)
    assert len(X1) == 1


def _write_horseseg(root, n=2, seed=0, mask_value=255):
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    masks = []
    for i in range(n):
        img, lab = _scene(rng)
        mask = (lab == 7).astype(np.uint8)
        skimage_io.imsave(str(root / "images" / f"horse{i:03d}.png"), img, check_contrast=False)
        skimage_io.imsave(str(root / "masks" / f"horse{i:03d}.png"), mask * mask_value, check_contrast=False)
        masks.append(mask)
    return masks


@pytest.mark.parametrize("mask_value", [255, 1])
def test_load_horseseg_reads_the_layout(tmp_path, mask_value):
    masks = _write_horseseg(tmp_path, n=2, mask_value=mask_value)
    X, Y, make_model = load_horseseg(tmp_path, n_segments=12)
    _check_graphs(X, Y, 2)
    m = make_model()
    assert isinstance(m, GraphCutModel) and m.n_features == 649
    m.check_data(X, Y)
    img = skimage_io.imread(str(tmp_path / "images" / "horse000.png"))
    g, y = superpixel_graph(img, masks[0], 2, n_segments=12)
    _same(([g], [y]), ([X[0]], [Y[0]]))
    assert all(0 < y.mean() < 1 for y in Y)


# ------------------------------------------------------------------ error paths
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # imageio's plugins, trying the broken file
def test_stanford_errors_name_the_file(tmp_path):
    _write_stanford(tmp_path, n=2)
    lab_dir = tmp_path / "labels"
    good = lab_dir / "0000001.regions.txt"
    text = good.read_text()
    good.unlink()
    with pytest.raises(ValueError, match=r"0000001\.regions\.txt.*missing"):
        load_stanford_background(tmp_path, n_segments=12)
    good.write_text("\n".join(text.splitlines()[:-1]))  # one row short
    with pytest.raises(ValueError, match=r"0000001\.regions\.txt.*shape \(35, 44\)"):
        load_stanford_background(tmp_path, n_segments=12)
    good.write_text(text.replace("7", "9", 1))
    with pytest.raises(ValueError, match=r"0000001\.regions\.txt.*-1\.\.7.*9"):
        load_stanford_background(tmp_path, n_segments=12)
    good.write_text(text.replace("0", "x", 1))
    with pytest.raises(ValueError, match=r"0000001\.regions\.txt.*integer"):
        load_stanford_background(tmp_path, n_segments=12)
    rows = text.splitlines()
    good.write_text("\n".join([rows[0] + " 0"] + rows[1:]))
    with pytest.raises(ValueError, match=r"0000001\.regions\.txt.*different lengths"):
        load_stanford_background(tmp_path, n_segments=12)
    (tmp_path / "images" / "0000000.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"0000000\.jpg.*cannot be read"):
        load_stanford_background(tmp_path, n_segments=12)


def test_horseseg_errors_name_the_file(tmp_path):
    _write_horseseg(tmp_path, n=2)
    mask = tmp_path / "masks" / "horse001.png"
    mask.unlink()
    with pytest.raises(ValueError, match=r"horse001\.png.*mask missing"):
        load_horseseg(tmp_path, n_segments=12)
    skimage_io.imsave(str(mask), np.zeros((10, 10), np.uint8), check_contrast=False)
    with pytest.raises(ValueError, match=r"horse001\.png.*shape \(10, 10\)"):
        load_horseseg(tmp_path, n_segments=12)
    bad = np.zeros((36, 44), np.uint8)
    bad[:5] = 128
    bad[5:10] = 255
    skimage_io.imsave(str(mask), bad, check_contrast=False)
    with pytest.raises(ValueError, match=r"horse001\.png.*0 and 1 or 0 and 255.*128"):
        load_horseseg(tmp_path, n_segments=12)
    colour = np.zeros((36, 44, 3), np.uint8)
    colour[..., 0] = 255
    skimage_io.imsave(str(mask), colour, check_contrast=False)
    with pytest.raises(ValueError, match=r"horse001\.png.*colour mask"):
        load_horseseg(tmp_path, n_segments=12)


@pytest.mark.parametrize("call, match", [
    (lambda p: load_stanford_background(p / "nowhere"), "root .* is not a directory"),
    (lambda p: load_stanford_background(p), "no directory .*images"),
    (lambda p: load_horseseg(p, image_dir="."), "image_dir: .* holds no images"),
    (lambda p: load_stanford_background(3), "root must be a directory path"),
    (lambda p: make_horseseg_paper(n_images=0), "n_images"),
    (lambda p: make_horseseg_paper(n_images=1, size=8), "size"),
    (lambda p: make_stanford_paper(n_images=1, n_classes=10), "n_classes"),
    (lambda p: superpixel_graph(np.zeros((8, 8)), np.zeros((8, 9), np.int64)), "labels has shape"),
    (lambda p: superpixel_graph(np.zeros((8, 8)), np.full((8, 8), 2), 2), r"labels must be in 0\.\.1"),
    (lambda p: superpixel_graph(np.zeros((8, 8)), np.zeros((8, 8))), "labels must hold integers"),
    (lambda p: superpixel_graph(np.zeros((8, 8)), n_segments=0), "n_segments"),
    (lambda p: superpixel_graph(np.zeros((8, 8)), compactness=-1.0), "compactness"),
    (lambda p: superpixel_graph(np.full((8, 8), 2.0)), "image"),
])
def test_argument_errors(tmp_path, call, match):
    with pytest.raises(ValueError, match=match):
        call(tmp_path)


def test_a_missing_mask_dir_is_named(tmp_path):
    _write_horseseg(tmp_path, n=1)
    with pytest.raises(ValueError, match="mask_dir: no directory .*gt"):
        load_horseseg(tmp_path, mask_dir="gt")


# ------------------------------------------------------------------ the full sizes (minutes)
@pytest.mark.slow
@pytest.mark.parametrize("name, n, K", [("seg-multi-paper", 715, 9), ("seg-binary-paper", 2376, 2)])
def test_paper_sizes(name, n, K):
    X, Y, make_model = load_segmentation(name, "train")
    assert len(X) == n
    _check_graphs(X[:50], Y[:50], K)
    make_model().check_data(X[:5], Y[:5])
