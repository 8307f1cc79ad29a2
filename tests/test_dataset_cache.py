"""The generated-data caches (structfw.datasets._cache): atomic writes, validated reads,
and what a loader does with a truncated or corrupt cache file (regenerates it, warning)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from structfw import io as sfio
from structfw.datasets import _cache
from structfw.datasets._cache import CacheError, CacheWarning, open_cache, read_cache, write_cache


def _arrays():
    return {"n": np.array([3]), "x": np.arange(12.0).reshape(3, 4), "tags": np.array(["B-NP", "O"])}


def test_round_trip(tmp_path):
    path = write_cache(tmp_path / "sub" / "c.npz", _arrays())  # creates the directory
    assert path == tmp_path / "sub" / "c.npz"
    d = open_cache(path)
    assert set(d) == {"n", "x", "tags"} and len(d) == 3 and "x" in d and "y" not in d
    np.testing.assert_array_equal(d.array("x", "float", shape=(3, None)), _arrays()["x"])
    assert d.array("tags", "str", ndim=1).tolist() == ["B-NP", "O"]
    assert read_cache(path, lambda c: int(c.array("n", "int", shape=(1,))[0])) == 3
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]  # no temporary file left


@pytest.mark.parametrize("call, message", [
    (lambda d: d.array("missing"), "missing key 'missing'"),
    (lambda d: d.array("x", "int"), "key 'x' holds float64 values, expected int"),
    (lambda d: d.array("x", ndim=1), "key 'x' has 2 dimensions, expected 1"),
    (lambda d: d.array("x", shape=(3, 5)), r"key 'x' has shape \(3, 4\), expected \(3, 5\)"),
    (lambda d: d.array("tags", min_size=3), "key 'tags' holds 2 values, expected at least 3"),
    (lambda d: d.check(False, "n", "is wrong"), "key 'n' is wrong"),
])
def test_validated_read_names_the_file_and_the_key(tmp_path, call, message):
    d = open_cache(write_cache(tmp_path / "c.npz", _arrays()))
    with pytest.raises(CacheError, match=message) as err:
        call(d)
    assert str(tmp_path / "c.npz") in str(err.value)


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"
    write_cache(path, _arrays())
    before = path.read_bytes()

    def savez_then_fail(fh, **arrays):
        fh.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt  # interrupted mid-write

    monkeypatch.setattr(np, "savez_compressed", savez_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_cache(path, {"x": np.zeros(5)})
    assert path.read_bytes() == before  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]  # the temporary file is gone
    with pytest.raises(KeyboardInterrupt):
        write_cache(tmp_path / "new.npz", {"x": np.zeros(5)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]  # nothing half-written appears


def test_model_files_and_caches_share_the_atomic_writer():
    assert _cache.write_npz is sfio.write_npz


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "pickle", "missing key"])
def test_a_damaged_file_is_reported_removed_and_read_as_absent(tmp_path, damage):
    path = write_cache(tmp_path / "c.npz", _arrays())
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not an archive at all" * 10)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "pickle":
        np.save(path.with_suffix(".npy"), np.array([{"a": 1}], dtype=object), allow_pickle=True)
        path.write_bytes(path.with_suffix(".npy").read_bytes())
        path.with_suffix(".npy").unlink()
    if damage != "missing key":
        with pytest.raises(CacheError, match="unreadable cache file"):
            open_cache(path)
    decode = lambda d: d.array("y")  # noqa: E731 - "y" is missing from every file here
    with pytest.warns(CacheWarning, match=str(path).replace("\\", "\\\\")):
        assert read_cache(path, decode) is None
    assert not path.exists()  # removed: the loader's regenerated data replaces it
    assert read_cache(path, decode) is None  # a missing file: None, quietly
    assert read_cache(None, decode) is None


def test_inconsistent_arrays_are_invalid_content(tmp_path):
    path = write_cache(tmp_path / "c.npz", {"indptr": np.array([0, 5]), "data": np.ones(2)})

    def decode(d):
        return sp.csr_matrix((d["data"], np.zeros(2, np.int32), d["indptr"]), shape=(1, 3))

    with pytest.warns(CacheWarning, match="invalid content"):
        assert read_cache(path, decode) is None


# ------------------------------------------------------------------ the loaders
def test_segmentation_loader_regenerates_a_truncated_cache(tmp_path, monkeypatch):
    pytest.importorskip("skimage")
    from structfw.datasets import segmentation

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    small = dict(n_images=2, size=32, seed=0)
    monkeypatch.setitem(segmentation._SETS, "seg-binary",
                        (segmentation.make_horseseg_like, small, small))
    X, Y, _ = segmentation.load_segmentation("seg-binary", "train")
    (path,) = (tmp_path / "segmentation").iterdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X2, Y2, _ = segmentation.load_segmentation("seg-binary", "train")  # read back, no warning
    assert sp.issparse(X2[0][0]) and (X2[0][0] != X[0][0]).nnz == 0
    np.testing.assert_array_equal(X2[0][1], X[0][1])
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 3])
    with pytest.warns(CacheWarning, match="segmentation"):
        X3, Y3, _ = segmentation.load_segmentation("seg-binary", "train")
    np.testing.assert_array_equal(Y3[1], Y[1])
    assert path.exists() and open_cache(path)  # cached anew, readable


def test_segmentation_cache_missing_key_names_it(tmp_path):
    from structfw.datasets.segmentation import _load

    path = write_cache(tmp_path / "s.npz", {"n": np.array([1]), "0_nodes": np.ones((3, 2)),
                                            "0_edges": np.array([[0, 1]]), "0_ef": np.ones((1, 2))})
    with pytest.warns(CacheWarning, match="missing key '0_y'"):
        assert _load(path) is None


def test_pose_loader_regenerates_a_corrupt_cache(tmp_path, monkeypatch):
    pytest.importorskip("skimage")
    from structfw.datasets import load_pose

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    a = load_pose("test", n=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load_pose("test", n=1).X[0], a.X[0])  # from the cached n=2 split
    (path,) = (tmp_path / "pose").iterdir()
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 64)
    with pytest.warns(CacheWarning, match=path.name):
        b = load_pose("test", n=1)  # the corrupt larger split is not used...
    np.testing.assert_array_equal(a.Y[0], b.Y[0])
    assert not path.exists()  # ... but removed, and the regenerated split cached
    assert [p.name for p in (tmp_path / "pose").iterdir()] == [path.name.replace("-n2-", "-n1-")]


def test_conll_loader_regenerates_an_invalid_cache(tmp_path, monkeypatch):
    from structfw.datasets import load_conll_scale
    from structfw.datasets.conll import _cache_path

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    first = load_conll_scale(6, 2, seed=1, n_features=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_conll_scale(6, 2, seed=1, n_features=50).info["cached"]
    path = _cache_path(6, 2, 1, 50)
    with np.load(path) as d:
        arrays = {k: d[k] for k in d.files}
    arrays["train_indices"] = arrays["train_indices"] + 1000  # feature indices beyond F
    write_cache(path, arrays)
    with pytest.warns(CacheWarning, match="'train_indices' holds feature indices outside 0..49"):
        again = load_conll_scale(6, 2, seed=1, n_features=50)
    assert not again.info["cached"]
    assert (again.X_train[0] != first.X_train[0]).nnz == 0
    assert load_conll_scale(6, 2, seed=1, n_features=50).info["cached"]
