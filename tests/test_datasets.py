import numpy as np
import pytest

from structfw.datasets import load_ocr, load_snakes, load_svmlight, snakes_one_hot
from structfw.datasets._bundled import DATA_DIR


def test_ocr_sizes_and_types():
    X, Y = load_ocr("train")
    Xt, Yt = load_ocr("test")
    assert len(X) == len(Y) == 6251
    assert len(Xt) == len(Yt) == 626
    Xa, Ya = load_ocr("all")
    assert len(Xa) == 6877
    assert sum(len(y) for y in Ya) == 52152
    assert sum(len(y) for y in Y) + sum(len(y) for y in Yt) == 52152
    for x, y in zip(X[:50] + Xt[:50], Y[:50] + Yt[:50]):
        assert x.dtype == np.float64 and x.flags.c_contiguous
        assert x.shape == (len(y), 128)
        assert y.dtype == np.int64
        assert set(np.unique(x)) <= {0.0, 1.0}
    allY = np.concatenate(Ya)
    assert allY.min() == 0 and allY.max() == 25


def test_ocr_other_folds_partition():
    n = 0
    for fold in range(10):
        Xt, _ = load_ocr("test", fold=fold)
        X, _ = load_ocr("train", fold=fold)
        assert len(X) + len(Xt) == 6877
        n += len(Xt)
    assert n == 6877


def test_ocr_cache_not_corruptible():
    X, Y = load_ocr("test")
    X[0][:] = 7.0
    Y[0][:] = 3
    X2, Y2 = load_ocr("test")
    assert X2[0].max() <= 1.0
    assert not np.all(Y2[0] == 3) or len(Y2[0]) == 0


def test_ocr_words():
    X, Y, W = load_ocr("test", return_words=True)
    assert len(W) == len(X)
    for y, word in zip(Y[:100], W[:100]):
        assert "".join(chr(ord("a") + int(c)) for c in y) == word


@pytest.mark.parametrize("kw,name", [({"split": "valid"}, "split"), ({"fold": 10}, "fold"),
                                     ({"fold": -1}, "fold"), ({"fold": 1.5}, "fold")])
def test_ocr_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        load_ocr(**kw)


def test_bundled_file_small():
    assert (DATA_DIR / "ocr.npz").stat().st_size < 1_000_000
    assert (DATA_DIR / "snakes.npz").stat().st_size < 100_000


def test_bundled_identical_to_shared(shared_data):
    with np.load(shared_data / "ocr" / "letters.npz") as ref, np.load(DATA_DIR / "ocr.npz") as b:
        for k in ("pixels", "labels", "lengths", "folds", "words"):
            np.testing.assert_array_equal(ref[k], b[k])
    # and the decoded loader output matches the shared file
    with np.load(shared_data / "ocr" / "letters.npz") as ref:
        pix = np.unpackbits(ref["pixels"], axis=1)
        lab = ref["labels"]
    Xa, Ya = load_ocr("all")
    np.testing.assert_array_equal(np.concatenate(Xa), pix)
    np.testing.assert_array_equal(np.concatenate(Ya), lab)
    with np.load(shared_data / "snakes" / "snakes.npz") as ref, np.load(
        DATA_DIR / "snakes.npz"
    ) as b:
        for k in ref.files:
            np.testing.assert_array_equal(ref[k], b[k])


def test_snakes():
    X, Y = load_snakes("train")
    Xt, Yt = load_snakes("test")
    assert len(X) == 200 and len(Xt) == 100
    for x, y in zip(X + Xt, Y + Yt):
        assert x.ndim == 3 and x.shape[2] == 3 and x.shape[:2] == y.shape
        assert 0.0 <= x.min() and x.max() <= 1.0
        assert y.min() >= 0 and y.max() <= 10
    F = snakes_one_hot(X[:3])
    assert F[0].shape[:2] == X[0].shape[:2]
    np.testing.assert_array_equal(F[0][..., :-1].sum(-1), 1.0)
    with pytest.raises(ValueError, match="split"):
        load_snakes("all")


def test_svmlight(shared_data):
    X, y = load_svmlight(shared_data / "heart_scale" / "heart_scale")
    assert X.shape == (270, 13)
    assert set(np.unique(y)) == {-1.0, 1.0}
    Xs, _ = load_svmlight(shared_data / "heart_scale" / "heart_scale", dense=False)
    assert Xs.shape == (270, 13) and hasattr(Xs, "tocsr")


def test_svmlight_missing_file(tmp_path):
    with pytest.raises(ValueError, match="path"):
        load_svmlight(tmp_path / "nope.txt")
