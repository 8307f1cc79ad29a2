"""Every file structfw reads is untrusted data (issue "Nothing lost, nobody fooled").

- Solver-state sections: a forger can recompute the digest, so every field of every section of
  every solver that saves state is fuzzed (hypothesis): load + warm-started fit either raise a
  ValueError naming the state, or return finite weights and a gap >= -tolerance, under an
  address-space limit (a huge allocation is a MemoryError, a failure here).
- svmlight files: memory bounded by the file, feature ids as int64, errors naming line and id.
- Trace files (JSON / CSV): corrupt or ragged ones are ValueErrors naming the file.
"""
import contextlib
import json
import math
import resource
import time
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import structfw as sf  # noqa: E402
from structfw import io as sfio  # noqa: E402
from structfw.datasets import load_svmlight  # noqa: E402
from structfw.datasets import svmlight as svmlight_mod  # noqa: E402
from structfw.solvers import state_file  # noqa: E402
from structfw.trace import Trace  # noqa: E402

S = sf.solvers

#: one configuration per kind of state section: dense / sparse / stale rows, tracked and untracked
#: corner sets, every sampler, both averages, and every other solver that saves its state
CONFIGS = {
    "bcfw": lambda: S.BCFW(sampling="perm"),
    "bcpfw-gap-cache-wavg": lambda: S.BCFW(sampling="gap", step="pairwise", cache=True, averaging="weighted"),
    "bcafw-sparse": lambda: S.BCFW(step="away", block_storage="sparse", averaging="suffix"),
    "mpbcfw": lambda: S.MPBCFW(averaging="weighted", approx_rule="work"),
    "fw": lambda: S.FW(),
    "ssg-wavg": lambda: S.SSG(averaging="weighted"),
    "cutting-plane": lambda: S.CuttingPlane(),
    "online-eg": lambda: S.OnlineEG(),
}


def _estimator(solver, passes):
    return sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=0.1, max_passes=passes, tol=None,
                            random_state=0, check_every=1)


@pytest.fixture(scope="module")
def toy():
    X, Y = sf.datasets.load_ocr("train")
    return X[:12], Y[:12]


@pytest.fixture(scope="module")
def saved(toy, tmp_path_factory):
    """Per configuration: (header, arrays) of a file saved with state after 2 passes."""
    X, Y = toy
    d = tmp_path_factory.mktemp("saved")
    out = {}
    for name, make in CONFIGS.items():
        path = _estimator(make(), 2).fit(X, Y).save(d / name, state=True)
        header, arrays = sfio.read_model_file(path, "StructuredSVM")
        out[name] = (dict(header), dict(arrays))
    return out


# ------------------------------------------------------------------ the guard
def _vm_bytes():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return None


@contextlib.contextmanager
def address_space_limit(extra=1 << 30):
    """At most ``extra`` more bytes of address space: a huge allocation is a MemoryError, at once."""
    now = _vm_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if now is None:
        yield
        return
    limit = now + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ------------------------------------------------------------------ mutations
def _state_nodes(node, path=()):
    """(path, node) of every scalar or array node of a state tree."""
    t = node.get("t")
    if t == "obj":
        for k, v in node["v"].items():
            yield from _state_nodes(v, path + (k,))
    elif t in ("list", "tuple"):
        for i, v in enumerate(node["v"][:2]):
            yield from _state_nodes(v, path + (i,))
    elif t in ("i", "f", "b", "s", "arr", "ragged", "rng"):
        yield path, node


def _targets(header):
    return [p for p, _ in _state_nodes(header["state"]["root"])]


def _node(tree, path):
    node = tree["root"]
    for k in path:
        node = node["v"][k]
    return node


SCALARS = [math.nan, math.inf, -math.inf, 1e300, -1e300, -1, 0, 1e-320, 2 ** 62, -(2 ** 62), 10 ** 9, 0.5,
           True, "x", None]
ARRAY_EDITS = ["nan", "inf", "-inf", "huge", "-huge", "neg", "zero", "big-int", "float32", "int32", "as-int",
               "truncate", "empty", "extra-dim", "transpose", "swap", "scale", "shuffle"]


def _edit_array(a, how, rng, other):
    a = a.copy()
    pos = int(rng.integers(a.size)) if a.size else None
    if how in ("nan", "inf", "-inf", "huge", "-huge", "neg", "zero", "big-int") and a.size:
        if a.dtype.kind == "f":
            val = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "huge": 1e300, "-huge": -1e300,
                   "neg": -abs(a.flat[pos]) - 1.0, "zero": 0.0, "big-int": 2.0 ** 62}[how]
        else:
            big = np.iinfo(a.dtype).max
            val = {"nan": big, "inf": big, "-inf": 0 if a.dtype.kind == "u" else -big, "huge": 10 ** 9,
                   "-huge": 0 if a.dtype.kind == "u" else -(10 ** 9), "neg": 0 if a.dtype.kind == "u" else -1,
                   "zero": 0, "big-int": 2 ** 40}[how]
        a.flat[pos] = val
        return a
    if how == "float32":
        return a.astype(np.float32)
    if how == "int32":
        return a.astype(np.int32)
    if how == "as-int":
        return a.astype(np.int64) if a.dtype.kind == "f" else a.astype(np.float64)
    if how == "truncate":
        return a[:-1] if a.ndim and a.shape[0] else a
    if how == "empty":
        return a[:0]
    if how == "extra-dim":
        return a[None]
    if how == "transpose":
        return a.T.copy() if a.ndim == 2 else a[::-1].copy()
    if how == "swap":
        return other.copy()
    if how == "scale":
        return a * 3 if a.dtype.kind in "fi" else a
    if how == "shuffle":
        return rng.permutation(a.reshape(-1)).reshape(a.shape) if a.size else a
    return a


def _forge(header, arrays, path, edit, rng):
    """A copy of the file's fields with one state node edited and the digest recomputed (as a forger would)."""
    header = json.loads(json.dumps(header))
    arrays = {k: v for k, v in arrays.items()}
    tree = header["state"]
    node = _node(tree, path)
    state_arrays = {k[len("state/"):]: v for k, v in arrays.items() if k.startswith("state/")}
    if node["t"] in ("arr", "ragged"):
        names = [node["v"]] if node["t"] == "arr" else [node[k] for k in ("lens", "v", "idx") if k in node]
        name = names[int(rng.integers(len(names)))]
        others = sorted(state_arrays)
        other = state_arrays[others[int(rng.integers(len(others)))]]
        state_arrays[name] = _edit_array(state_arrays[name], edit, rng, other)
    elif node["t"] == "rng":
        node["v"]["state"] = {"state": -1, "inc": "x"} if edit % 2 else {"state": 2 ** 200, "inc": 3}
    else:
        value = SCALARS[edit % len(SCALARS)]
        if node["t"] == "f":
            node["v"] = repr(value) if isinstance(value, float) else str(value)
        elif node["t"] == "i" and isinstance(value, float) and math.isfinite(value):
            node["v"] = int(value)
        else:
            node["v"] = value if not (isinstance(value, float) and not math.isfinite(value)) else None
    tree["digest"] = state_file.state_digest(tree["root"], state_arrays)
    out_arrays = {k: v for k, v in arrays.items() if not k.startswith("state/") and k != "trace"}
    out_arrays.update({f"state/{k}": v for k, v in state_arrays.items()})
    return header, out_arrays, str(arrays["trace"][()])


def _check_forged(toy, saved, tmp_path, name, path, edit, seed):
    X, Y = toy
    header, arrays = saved[name]
    rng = np.random.default_rng(seed)
    hdr, arr, trace = _forge(header, arrays, path, edit, rng)
    hdr.pop("params", None)
    params = header["params"]
    f = sfio.write_model_file(tmp_path / "forged", "StructuredSVM", {"params": params, **hdr}, arr,
                              texts={"trace": trace})
    t0 = time.perf_counter()
    try:
        with address_space_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = sf.load(f)
            est.set_params(warm_start=True, max_passes=1)
            est.fit(X, Y)
    except ValueError as exc:
        msg = str(exc)
        assert "state" in msg, msg  # names the section (the file's state, or the warm start's)
        return "refused"
    finally:
        assert time.perf_counter() - t0 < 30
    what = f"{name} {path} edit {edit}"
    assert np.isfinite(est.coef_).all(), what
    if CONFIGS[name]().has_dual:
        assert math.isfinite(est.gap_) and est.gap_ >= -1e-6 * max(1.0, abs(est.primal_)), (what, est.gap_)
        assert math.isfinite(est.primal_) and math.isfinite(est.dual_), what
    return "fitted"


def _case_strategy(saved_targets):
    names = sorted(saved_targets)

    @st.composite
    def case(draw):
        name = draw(st.sampled_from(names))
        path = draw(st.sampled_from(saved_targets[name]))
        edit = draw(st.integers(0, max(len(SCALARS), len(ARRAY_EDITS)) - 1))
        return name, path, edit

    return case()


def _edit_name(node_t, edit):
    return ARRAY_EDITS[edit % len(ARRAY_EDITS)] if node_t in ("arr", "ragged") else edit


def _run_fuzz(toy, saved, tmp_path_factory, max_examples):
    targets = {name: _targets(h) for name, (h, _) in saved.items()}
    seen = {"refused": 0, "fitted": 0}

    @settings(max_examples=max_examples, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(_case_strategy(targets), st.integers(0, 2 ** 16))
    def fuzz(case, seed):
        name, path, edit = case
        node = _node(saved[name][0]["state"], path)
        tmp = tmp_path_factory.mktemp("fuzz")
        seen[_check_forged(toy, saved, tmp, name, path, _edit_name(node["t"], edit), seed)] += 1

    fuzz()
    assert seen["refused"] > 0


def test_forged_state_fields_fuzzed(toy, saved, tmp_path_factory):
    """Default suite: a sample of single-field forgeries over every solver's section (~20 s)."""
    _run_fuzz(toy, saved, tmp_path_factory, max_examples=120)


@pytest.mark.slow
def test_forged_state_fields_fuzzed_long(toy, saved, tmp_path_factory):
    _run_fuzz(toy, saved, tmp_path_factory, max_examples=2000)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_field_edited_once(toy, saved, tmp_path, name):
    """Every field of every section, each with the edit most likely to hurt (non-finite or out of range)."""
    header, _ = saved[name]
    for i, path in enumerate(_targets(header)):
        node = _node(header["state"], path)
        edit = ("nan" if node["t"] in ("arr", "ragged") else 0)
        _check_forged(toy, saved, tmp_path, name, path, edit, i)
        edit = ("huge" if node["t"] in ("arr", "ragged") else 3)
        _check_forged(toy, saved, tmp_path, name, path, edit, i)


# ------------------------------------------------------------------ named forgeries
def _forge_and_load(saved, tmp_path, name, edit_fn):
    header, arrays = saved[name]
    header = json.loads(json.dumps(header))
    tree = header["state"]
    sa = {k[len("state/"):]: v.copy() for k, v in arrays.items() if k.startswith("state/")}
    edit_fn(tree, sa)
    tree["digest"] = state_file.state_digest(tree["root"], sa)
    arr = {k: v for k, v in arrays.items() if not k.startswith("state/") and k != "trace"}
    arr.update({f"state/{k}": v for k, v in sa.items()})
    f = sfio.write_model_file(tmp_path / "f", "StructuredSVM", header, arr, texts={"trace": str(arrays["trace"][()])})
    return sf.load(f)


@pytest.mark.parametrize("field,value,needle", [
    ("meta", 10 ** 9, r"corners.meta' counts 1000000000 live entries"),
    ("alpha", -0.5, r"corners.alpha.*convex weights"),
    ("loss", math.nan, r"corners.loss.*NaN"),
])
def test_capacity_and_weights_of_the_corner_pool(saved, tmp_path, field, value, needle):
    def edit(tree, sa):
        name = _node(tree, ("corners", field))["v"]
        sa[name] = sa[name].copy()
        sa[name].flat[1 if field == "meta" else 0] = value
    with pytest.raises(ValueError, match=needle):
        _forge_and_load(saved, tmp_path, "bcpfw-gap-cache-wavg", edit)


@pytest.mark.parametrize("path,value,needle", [
    (("lam",), "nan", r"BCFWState.lam.*positive finite"),
    (("ell",), "1e+300", r"BCFWState.ell.*l = sum_i l_i"),
    (("avg", "c"), "0.0", r"avg.c"),
    (("k",), -1, r"BCFWState.k.*integer in \[0"),
    (("sampler", "_pos"), 10 ** 6, r"sampler._pos"),
])
def test_scalar_forgeries_name_the_field(saved, tmp_path, path, value, needle):
    def edit(tree, sa):
        _node(tree, path)["v"] = value
    with pytest.raises(ValueError, match=needle):
        _forge_and_load(saved, tmp_path, "bcpfw-gap-cache-wavg", edit)


def test_shared_arrays_are_refused(saved, tmp_path):
    def edit(tree, sa):
        og = _node(tree, ("oracle_gaps",))
        li = _node(tree, ("li",))
        tree["root"]["v"]["oracle_gaps"] = {"t": "ref", "v": li["n"]}
        del sa[og["v"]]
    with pytest.raises(ValueError, match="same object"):
        _forge_and_load(saved, tmp_path, "bcfw", edit)


def test_consistent_forgery_is_caught_by_weak_duality(toy, saved, tmp_path):
    """ell raised in FW's state (nothing to cross-check it against in the file): the warm start's first
    gap is negative, which no dual point allows."""
    X, Y = toy

    def edit(tree, sa):
        node = _node(tree, ("ell",))
        node["v"] = repr(float(node["v"]) + 5.0)
    est = _forge_and_load(saved, tmp_path, "fw", edit)
    est.set_params(warm_start=True, max_passes=1)
    with pytest.raises(ValueError, match="warm start: the solver state does not fit"):
        est.fit(X, Y)


@pytest.mark.parametrize("name", ["bcfw", "fw", "cutting-plane"])
@pytest.mark.parametrize("lam", [4.6e18, 0.2, 1e-13])
def test_a_forged_lam_in_the_state_is_refused(saved, tmp_path, name, lam):
    """The state's lam scales every stored block: one that is not the lam of the fit that wrote the
    state (the trace's meta.lam), or is below the floor no fit goes under, is refused at load."""
    def edit(tree, sa):
        _node(tree, ("lam",))["v"] = repr(lam)
    with pytest.raises(ValueError, match=r"state.*lam"):
        _forge_and_load(saved, tmp_path, name, edit)


def test_valid_states_still_resume(toy, saved, tmp_path):
    X, Y = toy
    for name in CONFIGS:
        est = _forge_and_load(saved, tmp_path, name, lambda t, a: None)
        est.set_params(warm_start=True, max_passes=1)
        est.fit(X, Y)
        assert np.isfinite(est.coef_).all()


# ------------------------------------------------------------------ svmlight files
def _write(path, text):
    path.write_text(text)
    return path


def test_svmlight_ids_beyond_int32_are_ids_not_a_crash(tmp_path):
    f = _write(tmp_path / "a.svm", "1 1:0.5 3000000000:1\n-1 2:2\n")
    with pytest.raises(ValueError, match=r"feature id 3000000000 on line 1 .*remap_features"):
        load_svmlight(f, dense=False)
    X, y, ids = load_svmlight(f, dense=False, remap_features=True)
    assert X.shape == (2, 3) and ids.dtype == np.int64
    np.testing.assert_array_equal(ids, [1, 2, 3000000000])
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 1], [0, 2, 0]])
    with pytest.raises(ValueError, match="beyond int64"):
        load_svmlight(_write(tmp_path / "b.svm", f"1 {2 ** 70}:1\n"), dense=False)


def test_svmlight_28kb_file_with_ids_up_to_1e9_fails_fast_or_remaps(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(700):
        ids = np.sort(rng.choice(10 ** 9, 3, replace=False)) + 1
        lines.append(f"{i % 2} " + " ".join(f"{j}:1" for j in ids))
    f = _write(tmp_path / "wide.svm", "\n".join(lines) + "\n")
    assert 20_000 < f.stat().st_size < 40_000
    t0 = time.perf_counter()
    with address_space_limit(1 << 29):
        with pytest.raises(ValueError, match=r"wide.svm: feature id \d+ on line \d+ makes \d+ features"):
            load_svmlight(f)
        with pytest.raises(ValueError, match="feature id"):
            load_svmlight(f, n_features=1000, dense=False)
        X, y, ids = load_svmlight(f, dense=False, remap_features=True)
    assert time.perf_counter() - t0 < 1.0
    assert X.shape == (700, len(ids)) and X.nnz == 2100
    # and it trains, in memory bounded by the file
    model = sf.models.MulticlassModel(2, X.shape[1])
    with address_space_limit(1 << 30):
        est = sf.StructuredSVM(model, max_passes=2, tol=None, random_state=0).fit(model.check_X(X), list(y.astype(int)))
    assert np.isfinite(est.coef_).all()


def test_svmlight_within_the_limit_stays_sparse(tmp_path):
    f = _write(tmp_path / "w.svm", "1 1:1 1000000:2\n" + "0 5:1\n" * 39)
    X, y = load_svmlight(f, dense=False)
    assert X.shape == (40, 10 ** 6) and X.nnz == 41
    with pytest.raises(ValueError, match="dense=False"):
        load_svmlight(f)  # 4 * 10^7 dense entries (320 MB) for 41 non-zeros
    assert svmlight_mod.feature_limit(10) == svmlight_mod.MAX_FEATURES_FLOOR


@pytest.mark.parametrize("text,needle", [
    ("1 1:1e150 2:3\n0 1:2\n", None),
    ("1 1:0.5 2:1e400\n0 2:3\n", r"value 1e400 \(feature 2\) on line 1 overflows float64"),
    ("1 1:1\n0 1:nan\n", r"non-finite value nan \(feature 1\) on line 2"),
    ("1 1:1\ninf 1:2\n", r"non-finite label inf on line 2"),
    ("1 1:1\n0 x:2\n", r"line 2: feature id 'x' is not an integer"),
    ("1 3:1 2:1\n", r"line 1: feature ids must increase"),
    ("1 0:1\n", None),
    ("1 0:1 3:1\n0 2:1\n", None),
])
def test_svmlight_values(tmp_path, text, needle):
    f = _write(tmp_path / "v.svm", text)
    if needle is None:
        X, y = load_svmlight(f)
        assert np.isfinite(X).all()
        if "1e150" in text:
            assert X[0, 0] == 1e150
    else:
        with pytest.raises(ValueError, match=needle):
            load_svmlight(f)


def test_svmlight_one_based_ids_below_one(tmp_path):
    f = _write(tmp_path / "z.svm", "1 0:1 2:1\n")
    with pytest.raises(ValueError, match=r"feature id 0 on line 1 is below 1"):
        load_svmlight(f, zero_based=False)


# ------------------------------------------------------------------ trace files
@pytest.mark.parametrize("name,content,needle", [
    ("empty.csv", b"", "empty"),
    ("ragged.csv", b"passes,gap\n1,2\n3\n", r"line 3 has 1 fields; the header names 2"),
    ("long.csv", b"passes,gap\n1,2,3\n", r"line 2 has 3 fields"),
    ("text.csv", b"passes,gap\n1,x\n", r"line 2, column 'gap': 'x' is not a number"),
    ("binary.csv", bytes(range(256)) * 4, "not a trace CSV"),
    ("dup.csv", b"a,a\n1,2\n", "distinct"),
    ("empty.json", b"", "not valid JSON"),
    ("ragged.json", b'{"columns": {"a": [1, 2], "b": [1]}}', "different lengths"),
    ("deep.json", b"{\"columns\": " + b"[" * 100000 + b"]" * 100000 + b"}", "JSON"),
    ("list.json", b"[1, 2]", "must be an object"),
    ("strings.json", b'{"columns": {"a": "xyz"}}', "must be a list"),
    ("objects.json", b'{"columns": {"a": [{"b": 1}]}}', "non-number"),
    ("inf.json", b'{"columns": {"a": [1e999]}}', "out of float range"),
    ("bigint.json", b'{"columns": {"a": [' + b"9" * 400 + b"]}}", "out of float range"),
    ("nan.json", b'{"columns": {"a": [NaN]}}', "not valid JSON"),
    ("meta.json", b'{"meta": [], "columns": {}}', "meta"),
    ("binary.json", bytes(range(256)) * 4, "not UTF-8"),
])
def test_corrupt_trace_files_are_value_errors_naming_the_file(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(ValueError, match=needle) as info:
        Trace.load(p)
    assert name in str(info.value)


def test_trace_round_trips_still_work(tmp_path):
    tr = Trace({"solver": "x"})
    tr.append(passes=1, gap=0.5)
    tr.append(passes=2, gap=float("nan"))
    for suffix in (".csv", ".json"):
        tr.save(tmp_path / f"t{suffix}")
        back = Trace.load(tmp_path / f"t{suffix}")
        np.testing.assert_array_equal(back["passes"], [1, 2])
        assert math.isnan(back["gap"][1])


def test_a_forged_plane_is_refused_when_a_later_step_uses_it(toy, saved, tmp_path):
    """A working-set plane with a forged (finite, huge) loss passes every field check and leaves the
    loaded dual point feasible; MP-BCFW's approximate passes use it only after the first checkpoint
    (the case the long fuzz found).  Weak duality is checked at every checkpoint of a continued fit."""
    assert _check_forged(toy, saved, tmp_path, "mpbcfw", ("corners", "loss"), "big-int", 1) == "refused"
