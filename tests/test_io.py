"""Model files are untrusted input: every broken file is a ValueError, never another
exception, a crash or a hang (fuzzed with hypothesis, deterministic)."""
import io
import json
import pickle
import zipfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import structfw as sf  # noqa: E402
from structfw import io as sfio  # noqa: E402
from structfw.models import MulticlassModel  # noqa: E402
from structfw.svm import FrankWolfeSVC  # noqa: E402

FUZZ = settings(max_examples=40, derandomize=True, deadline=None,
                suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------ fixtures
def _svc_binary():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=40) > 0, "pos", "neg")
    return FrankWolfeSVC(C=2.0, tol=1e-3).fit(X, y), X


def _svc_multiclass():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(45, 2)) + np.repeat(np.eye(3, 2) * 4, 15, axis=0)
    y = np.repeat([0, 1, 2], 15)
    return FrankWolfeSVC(method="mfw", tol=1e-3).fit(X, y), X


def _ssvm():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 60)
    X = np.eye(3, 4)[y] * 3 + rng.normal(size=(60, 4))
    est = sf.StructuredSVM(MulticlassModel(3, 4), solver=sf.solvers.BCFW(sampling="gap"),
                           lam=0.05, max_passes=2, tol=None, random_state=0)
    return est.fit(list(X), list(y)), list(X)


def _ssvm_rbf_chain():
    """A kernelized fit (no explicit w): the file holds its expansion, dense support rows."""
    rng = np.random.default_rng(3)
    Y = [rng.integers(0, 3, L) for L in (3, 5, 4, 2, 6, 3)]
    X = [np.eye(3, 4)[y] * 2 + rng.normal(size=(len(y), 4)) for y in Y]
    est = sf.StructuredSVM(sf.models.ChainModel(3, 4), solver=sf.solvers.KernelBCFW(kernel="rbf", gamma=0.3),
                           lam=0.05, max_passes=2, tol=None, random_state=0)
    return est.fit(X, Y), X


def _ssvm_poly_sparse():
    """A kernelized multiclass fit on sparse rows: CSR support positions in the file."""
    import scipy.sparse as sparse

    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 40)
    X = sparse.csr_matrix(np.where(rng.random((40, 6)) < 0.5, 0.0, rng.normal(size=(40, 6)) + np.eye(3, 6)[y]))
    est = sf.StructuredSVM(MulticlassModel(3, 6), solver=sf.solvers.KernelBCFW(kernel="poly", gamma=0.5, degree=2),
                           lam=0.05, max_passes=2, tol=None, random_state=0)
    return est.fit(X, list(y)), X


SSVMS = ("ssvm", "ssvm-rbf", "ssvm-poly")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, make, cls in [("svc2", _svc_binary, FrankWolfeSVC),
                            ("svc3", _svc_multiclass, FrankWolfeSVC),
                            ("ssvm", _ssvm, sf.StructuredSVM),
                            ("ssvm-rbf", _ssvm_rbf_chain, sf.StructuredSVM),
                            ("ssvm-poly", _ssvm_poly_sparse, sf.StructuredSVM)]:
        est, X = make()
        path = est.save(d / name)
        out[name] = dict(est=est, X=X, cls=cls, path=path, data=path.read_bytes())
    return out


def _members(data):
    """The members of a (trusted) model file but its digest, for building mutated ones
    (`_write` seals them again)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k != "digest"}


def _write(path, members, compress=False, seal=True):
    """Write mutated members; ``seal`` recomputes the digest, so that the mutation itself
    (not the digest) is what the loader must catch."""
    if seal and "header" in members:
        members = {**members, "digest": np.array(sfio.members_digest(members))}
    with open(path, "wb") as fh:
        (np.savez_compressed if compress else np.savez)(fh, **members)


def _outcome(cls, path, X):
    """Load (and use) a file: returns "ok" or "ValueError"; any other exception fails."""
    try:
        est = cls.load(path)
    except ValueError:
        return "ValueError"
    try:
        est.predict(X)
    except ValueError:
        return "ValueError"
    return "ok"


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("name", ["svc2", "svc3", *SSVMS])
def test_roundtrip(models, name, tmp_path):
    m = models[name]
    back = m["cls"].load(m["path"])
    ref = m["est"]
    if name in SSVMS:
        if ref.coef_ is None:  # kernelized: the expansion comes back whole
            assert back.coef_ is None
            a, b = ref.kernel_expansion_, back.kernel_expansion_
            assert a.spec == b.spec and a.kind == b.kind and a.n_support == b.n_support > 0
            np.testing.assert_array_equal(a.coef, b.coef)
            np.testing.assert_array_equal(a.transitions, b.transitions)
            dense = lambda S: S.toarray() if hasattr(S, "toarray") else S  # noqa: E731
            np.testing.assert_array_equal(dense(a.support), dense(b.support))
        else:
            np.testing.assert_array_equal(back.coef_, ref.coef_)
        assert back.solver.get_params() == ref.solver.get_params()
        assert np.array_equal(np.concatenate([np.ravel(p) for p in back.predict(m["X"])]),
                              np.concatenate([np.ravel(p) for p in ref.predict(m["X"])]))
        assert back.score(m["X"], ref.predict(m["X"])) == 1.0
        assert back.n_jobs is None and back.verbose == 0
    else:
        np.testing.assert_array_equal(back.predict(m["X"]), ref.predict(m["X"]))
        np.testing.assert_allclose(back.decision_function(m["X"]), ref.decision_function(m["X"]))
        assert back.get_params() == ref.get_params()
        assert back.stopped_ == ref.stopped_ and back.converged_ == ref.converged_
    with np.load(m["path"], allow_pickle=False) as z:
        assert all(z[k].dtype.kind != "O" for k in z.files)


def test_suffix_is_handled_identically(models, tmp_path):
    est = models["svc2"]["est"]
    assert est.save(tmp_path / "m") == tmp_path / "m.npz"
    FrankWolfeSVC.load(tmp_path / "m")
    FrankWolfeSVC.load(tmp_path / "m.npz")
    est.save(str(tmp_path / "k.npz"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.npz", "m.npz"]  # no temp left
    sf.svm.load(tmp_path / "k")
    with pytest.raises(FileNotFoundError):
        FrankWolfeSVC.load(tmp_path / "absent")


def test_kind_mismatch_and_version(models, tmp_path):
    with pytest.raises(ValueError, match="StructuredSVM"):
        FrankWolfeSVC.load(models["ssvm"]["path"])
    with pytest.raises(ValueError, match="FrankWolfeSVC"):
        sf.StructuredSVM.load(models["svc2"]["path"])
    mem = _members(models["svc2"]["data"])
    h = json.loads(str(mem["header"]))
    h["version"] = 99
    mem["header"] = np.array(json.dumps(h))
    _write(tmp_path / "v.npz", mem)
    with pytest.raises(ValueError, match="newer"):
        FrankWolfeSVC.load(tmp_path / "v.npz")


# ------------------------------------------------------------------ other formats
def _other_files(models):
    svc = models["svc2"]["data"]
    mem = _members(svc)
    yield "empty", b""
    yield "csv", b"a,b,c\n1,2,3\n"
    yield "json", json.dumps({"format": "structfw-model"}).encode()
    yield "pickle", pickle.dumps({"coef": np.zeros(3)})
    yield "npy", (lambda b: (np.save(b, np.zeros(3)), b.getvalue())[1])(io.BytesIO())
    b = io.BytesIO()
    np.savez(b, **mem, extra=np.array([{"x": 1}], dtype=object))   # pickled member
    yield "pickle-npz", b.getvalue()
    b = io.BytesIO()
    obj = dict(mem)
    obj["header"] = np.array([str(mem["header"])], dtype=object)
    np.savez(b, **obj)
    yield "pickled-header", b.getvalue()
    b = io.BytesIO()
    np.savez_compressed(b, **mem)
    yield "compressed", b.getvalue()
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        zf.writestr("readme.txt", "hello")
    yield "zip-other", b.getvalue()
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        pass
    yield "zip-empty", b.getvalue()
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        zf.writestr("header.npy", svc[:10])
        zf.writestr("header.npy", svc[:10])
    yield "zip-dup", b.getvalue()
    # a member whose .npy header declares an absurd shape
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 100000), }"
        raw = b"\x93NUMPY\x01\x00" + len(hdr.ljust(118) + "\n").to_bytes(2, "little") \
            + (hdr.ljust(118) + "\n").encode()
        zf.writestr("alpha.npy", raw + b"\0" * 64)
        h = io.BytesIO()
        np.save(h, mem["header"])
        zf.writestr("header.npy", h.getvalue())
    yield "huge-shape", b.getvalue()
    deep = np.array("[" * 100000 + "]" * 100000)
    yield "deep-json", (lambda b: (np.savez(b, header=deep), b.getvalue())[1])(io.BytesIO())
    nan = np.array('{"format": "structfw-model", "version": NaN}')
    yield "nan-json", (lambda b: (np.savez(b, header=nan), b.getvalue())[1])(io.BytesIO())


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("cls", [FrankWolfeSVC, sf.StructuredSVM])
def test_other_formats_are_value_errors(models, tmp_path, cls):
    for name, data in _other_files(models):
        p = tmp_path / f"{name}.npz"
        p.write_bytes(data)
        with pytest.raises(ValueError) as exc:
            cls.load(p)
        assert "pickled" not in str(exc.value).lower() or "no pickled" in str(exc.value), name


# ------------------------------------------------------------------ truncation / corruption
@pytest.mark.parametrize("name", ["svc2", *SSVMS])
def test_truncated_at_every_length_class(models, tmp_path, name):
    m = models[name]
    data = m["data"]
    n = len(data)
    cuts = sorted(set([0, 1, 2, 3, 4, 10, 29, 30, 31, 64, 100, 127, 128, 200, 500, n // 4,
                       n // 2, 3 * n // 4, n - 100, n - 23, n - 22, n - 21, n - 1]
                      + list(range(0, n, max(1, n // 60)))))
    p = tmp_path / "t.npz"
    for c in cuts:
        p.write_bytes(data[:c])
        assert _outcome(m["cls"], p, m["X"]) == "ValueError", c


@pytest.mark.parametrize("name", ["svc2", "svc3", *SSVMS])
def test_random_byte_corruption(models, tmp_path, name):
    m = models[name]
    data = m["data"]
    p = tmp_path / "c.npz"

    @FUZZ
    @given(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)),
                    min_size=1, max_size=8))
    def run(edits):
        b = bytearray(data)
        for pos, val in edits:
            b[pos] = val
        p.write_bytes(bytes(b))
        _outcome(m["cls"], p, m["X"])   # ok or ValueError; anything else fails the test

    run()


def test_an_npy_header_cut_mid_statement_is_a_value_error(models, tmp_path):
    """numpy parses a member's header with Python's tokenizer: a header whose dict never closes
    raises tokenize.TokenError there (found by the fuzzing above); loading says the file is damaged."""
    m = models["ssvm-poly"]
    p = tmp_path / "cut.npz"
    b = bytearray(m["data"])
    at = bytes(b).index(b"'shape': (")  # the first member's header dict, stored uncompressed
    end = bytes(b).index(b"}", at)
    b[end] = ord(" ")
    p.write_bytes(bytes(b))
    with pytest.raises(ValueError, match="not a valid .npy array|corrupted"):
        m["cls"].load(p)


# ------------------------------------------------------------------ field mutations
WEIRD = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
    st.sampled_from([0, -1, 1, 2, 10 ** 400, 1e308, -1e308, 1e-320, 0.5, 2.5]),
    st.text(max_size=12), st.sampled_from(["rbf", "poly", "precomputed", "partan", "bcfw",
                                           "MulticlassModel", "ChainModel", "tol"]),
    st.lists(st.integers(-3, 3), max_size=4), st.dictionaries(st.text(max_size=4),
                                                              st.integers(), max_size=3))


def _paths(doc, prefix=()):
    out = []
    for k, v in doc.items():
        out.append(prefix + (k,))
        if isinstance(v, dict):
            out.extend(_paths(v, prefix + (k,)))
    return out


def _set(doc, path, value, delete=False):
    d = doc
    for k in path[:-1]:
        d = d[k]
    if delete:
        del d[path[-1]]
    else:
        d[path[-1]] = value


@pytest.mark.parametrize("name", ["svc2", "svc3", *SSVMS])
def test_header_field_mutations(models, tmp_path, name):
    m = models[name]
    mem = _members(m["data"])
    doc = json.loads(str(mem["header"]))
    paths = _paths(doc)
    p = tmp_path / "h.npz"

    @FUZZ
    @given(st.sampled_from(paths), WEIRD, st.booleans())
    def run(path, value, delete):
        d = json.loads(str(mem["header"]))
        _set(d, path, value, delete)
        _write(p, {**mem, "header": np.array(json.dumps(d))})
        _outcome(m["cls"], p, m["X"])

    run()
    # extra fields are refused, at the top and inside params
    for where in ((), ("params",)):
        d = json.loads(str(mem["header"]))
        target = d
        for k in where:
            target = target[k]
        target["n_jobs"] = 64
        _write(p, {**mem, "header": np.array(json.dumps(d))})
        with pytest.raises(ValueError, match="unexpected"):
            m["cls"].load(p)


def _array_variants(a):
    shape = a.shape
    if a.dtype.kind == "U":   # a JSON text member
        text = str(a)
        return [np.array(text[: len(text) // 2]), np.array("{}"), np.array("[]"),
                np.array('{"columns": {"gap": [1, "x"]}}'),
                np.array('{"columns": {"gap": [1, 2], "primal": [1]}}'),
                np.array('{"columns": {"gap": [1e999]}}'), np.array("[" * 50000),
                np.array([text]), np.zeros(3), np.array(3.0)]
    return [
        a.astype(np.float32), a.astype(np.int64), a.astype(bool), a.astype(np.complex128),
        np.full(shape, np.nan), np.full(shape, np.inf), np.full(shape, -1e308),
        np.full(shape, 1e308), a[..., :1] if a.ndim else a, a.reshape(-1),
        np.zeros((0,)), np.zeros(shape + (2,)), np.array(3.0), np.zeros((3, 3, 3)),
        np.array(["x"] * max(1, a.size)), np.asarray(a, dtype=">f8") if a.dtype.kind == "f"
        else np.asarray(a, dtype=">i8"),
    ]


@pytest.mark.parametrize("name", ["svc2", "svc3", *SSVMS])
def test_array_field_mutations(models, tmp_path, name):
    m = models[name]
    mem = _members(m["data"])
    keys = [k for k in mem if k != "header"]
    p = tmp_path / "a.npz"
    for key in keys:
        for v in _array_variants(mem[key]):
            _write(p, {**mem, key: v})
            _outcome(m["cls"], p, m["X"])
        _write(p, {k: x for k, x in mem.items() if k != key})   # missing member
        assert _outcome(m["cls"], p, m["X"]) == "ValueError", key
    _write(p, {**mem, "surplus": np.zeros(3)})
    assert _outcome(m["cls"], p, m["X"]) == "ValueError"

    @FUZZ
    @given(st.sampled_from(keys), st.integers(0, 10 ** 6), st.sampled_from(
        [np.nan, np.inf, -np.inf, 1e308, -1e308, -1.0, 0.0, 1e-320, 2 ** 62]))
    def run(key, pos, value):
        arr = mem[key]
        if arr.dtype.kind == "U" or arr.size == 0:
            return
        arr = arr.astype(np.float64 if arr.dtype.kind == "f" else arr.dtype).copy()
        flat = arr.reshape(-1)
        try:
            flat[pos % flat.size] = value
        except (OverflowError, ValueError):
            return
        _write(p, {**mem, key: arr})
        _outcome(m["cls"], p, m["X"])

    run()


def test_trace_text_is_never_read_as_a_path(models, tmp_path):
    m = models["ssvm"]
    mem = _members(m["data"])
    secret = tmp_path / "trace.json"
    secret.write_text(str(mem["trace"]))
    _write(tmp_path / "t.npz", {**mem, "trace": np.array(str(secret))})
    with pytest.raises(ValueError, match="trace"):
        sf.StructuredSVM.load(tmp_path / "t.npz")
    with pytest.raises(ValueError):
        sf.trace.Trace.from_json_text(str(secret))


def test_state_section_hook(models, tmp_path):
    est = models["ssvm"]["est"]
    header = dict(model="MulticlassModel", x=1)
    sh, sa = sfio.pack_state({"k": 5}, {"alpha": np.ones(3)})
    path = sfio.write_model_file(tmp_path / "s", "Thing", {**header, **sh}, sa)
    h, a = sfio.read_model_file(path, "Thing")
    meta, arrs = sfio.unpack_state(h, a)
    assert meta == {"k": 5} and np.array_equal(arrs["alpha"], np.ones(3))
    assert "state" not in h and not a
    assert est is not None


def test_validators_name_file_and_field(tmp_path):
    path = sfio.write_model_file(tmp_path / "v", "Thing", {"n": 3, "s": "a", "x": 1.5},
                                 {"coef": np.arange(4.0)})
    h, a = sfio.read_model_file(path, "Thing")
    assert sfio.header_int(h, "n", 0, 5) == 3
    with pytest.raises(ValueError, match=r"v\.npz.*'n'"):
        sfio.header_int(h, "n", 4, 5)
    with pytest.raises(ValueError, match="'s' must be one of"):
        sfio.header_str_choice(h, "s", ("b",))
    with pytest.raises(ValueError, match="'x' must be an integer"):
        sfio.header_int(h, "x")
    with pytest.raises(ValueError, match="missing field 'y'"):
        sfio.header_float(h, "y")
    assert sfio.array_field(a, "coef", shape=(4,)).sum() == 6
    with pytest.raises(ValueError, match=r"'coef' has shape \(4,\), expected \(5\)"):
        sfio.array_field(a, "coef", shape=(5,))
    with pytest.raises(ValueError, match="integer array"):
        sfio.array_field(a, "coef", dtype="i")


# ------------------------------------------------------------------ the whole-file digest
@pytest.mark.parametrize("name", ["svc2", "svc3", *SSVMS])
def test_a_member_replaced_by_another_valid_array_breaks_the_digest(models, tmp_path, name):
    """Swapping one member for a valid array of the same shape and dtype (which every
    field check accepts) is refused by the digest, naming the file."""
    m = models[name]
    mem = _members(m["data"])
    with np.load(io.BytesIO(m["data"]), allow_pickle=False) as z:
        digest = z["digest"]
    assert str(digest).startswith("sha256:")
    numeric = [k for k, a in mem.items() if a.dtype.kind == "f" and a.size]
    assert numeric
    for key in numeric:
        forged = mem[key] + 1.0
        p = tmp_path / f"{key.replace('/', '_')}.npz"
        _write(p, {**mem, key: forged, "digest": digest}, seal=False)
        with pytest.raises(ValueError, match=r"digest does not match") as exc:
            m["cls"].load(p)
        assert str(p) in str(exc.value)
    # the same file sealed again loads: the digest, not a field check, refused it
    _write(tmp_path / "resealed.npz", {**mem, numeric[0]: mem[numeric[0]]})
    m["cls"].load(tmp_path / "resealed.npz")


def test_digest_missing_wrong_or_not_text(models, tmp_path):
    m = models["ssvm"]
    mem = _members(m["data"])
    p = tmp_path / "d.npz"
    _write(p, mem, seal=False)
    with pytest.raises(ValueError, match="'digest' is missing"):
        sf.StructuredSVM.load(p)
    for bad in (np.array("sha256:" + "0" * 64), np.array(["x"]), np.zeros(3), np.array("")):
        _write(p, {**mem, "digest": bad}, seal=False)
        with pytest.raises(ValueError, match="digest"):
            sf.StructuredSVM.load(p)


def test_version_1_files_without_digest_load_with_a_warning(models, tmp_path):
    m = models["ssvm"]
    mem = _members(m["data"])
    h = json.loads(str(mem["header"]))
    h["version"] = 1
    p = tmp_path / "v1.npz"
    _write(p, {**mem, "header": np.array(json.dumps(h))}, seal=False)
    with pytest.warns(UserWarning, match="version-1 model file without a digest"):
        est = sf.StructuredSVM.load(p)
    np.testing.assert_allclose(est.coef_, sf.StructuredSVM.load(m["path"]).coef_, rtol=0, atol=0)


def test_digest_ignores_storage_details():
    """Byte order and member order do not change the digest; content does."""
    a = {"header": np.array('{"a": 1}'), "coef": np.arange(4.0), "n": np.arange(3)}
    b = {"n": np.arange(3).astype(">i8"), "coef": np.arange(4.0).astype(">f8"), "header": np.array('{"a": 1}')}
    assert sfio.members_digest(a) == sfio.members_digest(b)
    c = {**a, "coef": np.arange(4.0).reshape(2, 2)}
    assert sfio.members_digest(a) != sfio.members_digest(c)
    d = {**a, "coef_": a["coef"]}
    d.pop("coef")
    assert sfio.members_digest(a) != sfio.members_digest(d)


@pytest.mark.parametrize("name", ["svc2", *SSVMS])
@pytest.mark.parametrize("value", [1e308, -1e200, 1e101])
def test_finite_but_huge_weights_are_refused(models, tmp_path, name, value):
    """Weights that no fit produces, whose scores overflow and tie every label."""
    m = models[name]
    mem = _members(m["data"])
    key = {"svc2": "dual_coef", "ssvm": "coef"}.get(name, "expansion/coef")
    arr = mem[key].astype(np.float64).copy()
    arr.reshape(-1)[0] = value
    p = tmp_path / "huge.npz"
    _write(p, {**mem, key: arr})
    with pytest.raises(ValueError, match=rf"{key}.*magnitude.*above 1e\+100"):
        m["cls"].load(p)


def test_digest_is_a_reserved_member_name(tmp_path):
    with pytest.raises(ValueError, match="invalid array name"):
        sfio.write_model_file(tmp_path / "x", "K", {}, {"digest": np.zeros(2)})
    with pytest.raises(ValueError, match="invalid text name"):
        sfio.write_model_file(tmp_path / "x", "K", {}, {}, texts={"digest": "x"})
