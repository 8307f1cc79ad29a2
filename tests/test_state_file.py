"""The solver state in a model file: a loaded estimator continues the run exactly, and a damaged or
forged state section is a ValueError naming the file, never a crash or a silently different run."""
import json

import numpy as np
import pytest

import structfw as sf
from structfw import io as sfio
from structfw.solvers import state_file

S = sf.solvers

CONFIGS = {
    "bcfw": lambda: S.BCFW(),
    "bcpfw-gap-cache-wavg": lambda: S.BCFW(sampling="gap", step="pairwise", cache=True, averaging="weighted"),
    "bcfw-away-sparse": lambda: S.BCFW(step="away", block_storage="sparse"),
    "bcfw-perm-predefined": lambda: S.BCFW(sampling="perm", step_size="predefined"),
    "mpbcfw": lambda: S.MPBCFW(averaging="weighted", approx_rule="work"),
    "bcfw-minibatch": lambda: S.BCFW(minibatch=3),
    "fw": lambda: S.FW(),
    "ssg-wavg": lambda: S.SSG(averaging="weighted"),
    "cutting-plane": lambda: S.CuttingPlane(),
    "online-eg": lambda: S.OnlineEG(),
}


@pytest.fixture(scope="module")
def ocr40():
    X, Y = sf.datasets.load_ocr("train")
    return X[:40], Y[:40], sf.models.ChainModel(26, 128)


def _fit(model, solver, X, Y, passes):
    return sf.StructuredSVM(model, solver=solver, lam=0.1, max_passes=passes, tol=None, random_state=0,
                            check_every=1).fit(X, Y)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_saved_state_resumes_exactly(ocr40, tmp_path, name):
    X, Y, model = ocr40
    full = _fit(model, CONFIGS[name](), X, Y, 6)
    half = _fit(model, CONFIGS[name](), X, Y, 3)
    loaded = sf.load(half.save(tmp_path / "m", state=True))
    loaded.set_params(warm_start=True)
    loaded.fit(X, Y)
    np.testing.assert_array_equal(loaded.coef_, full.coef_)
    if hasattr(loaded.state_, "passes"):
        assert loaded.state_.passes == full.state_.passes


def test_state_is_optional_and_off_by_default(ocr40, tmp_path):
    X, Y, model = ocr40
    est = _fit(model, S.BCFW(), X, Y, 1)
    small = tmp_path / "small.npz"
    big = tmp_path / "big.npz"
    est.save(small)
    est.save(big, state=True)
    assert small.stat().st_size < big.stat().st_size
    assert getattr(sf.load(small), "state_", None) is None
    assert sf.load(big).state_.n == 40
    with pytest.raises(ValueError, match="no solver state"):
        sf.load(small).save(tmp_path / "again", state=True)
    with pytest.raises(ValueError, match="state must be True or False"):
        est.save(tmp_path / "x", state="yes")


def test_a_state_from_other_data_is_not_reused(ocr40, tmp_path):
    X, Y, model = ocr40
    loaded = sf.load(_fit(model, S.BCFW(), X, Y, 2).save(tmp_path / "m", state=True))
    loaded.set_params(warm_start=True, max_passes=1)
    with pytest.warns(RuntimeWarning, match="other data"):
        loaded.fit(X[:30], Y[:30])


def _section(ocr40, solver=None):
    X, Y, model = ocr40
    est = _fit(model, solver or S.BCFW(sampling="gap", step="pairwise", cache=True), X, Y, 2)
    return state_file.encode_state(est.state_)


def _redigest(tree, arrays):
    tree = dict(tree)
    tree["digest"] = state_file.state_digest(tree["root"], arrays)
    return tree


def test_damaged_sections_fail_the_digest(ocr40, tmp_path):
    X, Y, model = ocr40
    path = _fit(model, S.BCFW(cache=True), X, Y, 2).save(tmp_path / "m", state=True)
    header, arrays = sfio.read_model_file(path, "StructuredSVM")
    names = [k for k in arrays if k.startswith("state/")]
    rng = np.random.default_rng(0)
    for k in rng.choice(names, 5, replace=False):
        hdr, arr = dict(header), dict(arrays)
        a = arr[k].copy()
        if a.size == 0:
            continue
        a.flat[rng.integers(a.size)] += 1
        arr[k] = a
        bad = sfio.write_model_file(tmp_path / "bad", "StructuredSVM", hdr,
                                    {n: v for n, v in arr.items() if n != "trace"},
                                    texts={"trace": str(arrays["trace"])})
        with pytest.raises(ValueError, match="digest mismatch"):
            sf.load(bad)


def _forge(tree, arrays, edit):
    tree = json.loads(json.dumps(tree))
    arrays = {k: v.copy() for k, v in arrays.items()}
    edit(tree, arrays)
    return _redigest(tree, arrays), arrays


def _field(tree, *path):
    node = tree["root"]
    for name in path:
        node = node["v"][name]
    return node


@pytest.mark.parametrize("case,needle", [
    ("foreign class", "not a solver-state class"),
    ("bit generator", "unknown bit generator"),
    ("corner coordinate", r"corners.pidx.*expected coordinates"),
    ("corner pool", r"corners.start.*expected pool offsets"),
    ("corner size", r"corners.size.*expected corner set sizes"),
    ("w shape", r"BCFWState.w' is .* expected a float64 array of shape \(4004,\)"),
    ("sampler", "sampler"),
    ("missing array", "missing array"),
    ("node type", "unknown node type"),
])
def test_forged_sections_are_value_errors(ocr40, case, needle):
    tree, arrays = _section(ocr40)

    def edit(t, a):
        if case == "foreign class":
            _field(t, "corners")["cls"] = "subprocess.Popen"
        elif case == "bit generator":
            _field(t, "rng")["v"]["bit_generator"] = "os.system"
        elif case == "corner coordinate":
            a[_field(t, "corners", "pidx")["v"]][:5] = 10 ** 9
        elif case == "corner pool":
            a[_field(t, "corners", "start")["v"]][0, 0] = 10 ** 9
        elif case == "corner size":
            a[_field(t, "corners", "size")["v"]][0] = 10 ** 6
        elif case == "w shape":
            name = _field(t, "w")["v"]
            a[name] = a[name][:-1]
        elif case == "sampler":
            name = _field(t, "sampler", "_tree")["v"]
            a[name] = a[name][:3]
        elif case == "missing array":
            del a[_field(t, "li")["v"]]
        elif case == "node type":
            _field(t, "li")["t"] = "pickle"
    tree, arrays = _forge(tree, arrays, edit)
    with pytest.raises(ValueError, match=needle):
        state_file.decode_state(tree, arrays, source="f.npz")


def test_unknown_objects_are_not_saved():
    class Thing:
        pass

    with pytest.raises(ValueError, match="cannot save"):
        state_file.encode_state(Thing())


def test_corner_keys_are_recomputed_on_load(ocr40):
    """The corners' keys are derived from their entries: a file whose keys were forged (or written
    by another hash) loads with the keys the engine computes, so its corners are found again."""
    X, Y, model = ocr40
    est = _fit(model, S.BCFW(step="pairwise", cache=True, block_storage="dense"), X, Y, 2)
    tree, arrays = state_file.encode_state(est.state_)
    true_keys = est.state_.corners.key.copy()
    assert np.any(true_keys != 0)

    def edit(t, a):
        a[_field(t, "corners", "key")["v"]][:] = 12345
    tree, arrays = _forge(tree, arrays, edit)
    st = state_file.decode_state(tree, arrays, source="f.npz")
    live = np.arange(true_keys.shape[1])[None, :] < st.corners.size[:, None]
    np.testing.assert_array_equal(st.corners.key[live], true_keys[live])
    i = int(np.argmax(st.corners.size))
    psi = st.corners.psi(i, 0)
    assert st.corners.add(i, psi, st.corners.loss[i, 0]) == 0  # found, not added again
