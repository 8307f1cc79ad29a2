"""Exact resume of a sharded fit from a saved state (issue 52).

A fit on in-memory data gathers every shard's state into the model file (``save(path,
state=True)``); a fit whose workers loaded their own shards (a shard source) keeps each shard's
state in its worker's file under ``ShardedBCFW(state_dir=...)`` and the model file holds the
caller's part.  Either way five passes, saved, loaded and continued for five more are the ten
passes of one fit; a damaged or forged state is refused by name.
"""
import os
import warnings

import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW
from structfw.solvers.sharded import ShardedBCFW
from structfw.solvers.state_file import decode_state, encode_state
from test_sharded import tiny_chain


def chain(n=30, seed=3):
    return tiny_chain(n=n, seed=seed)


def fit(model, X, Y, passes, solver, warm=False, **kw):
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=passes, tol=None, random_state=0, check_every=1,
                           warm_start=warm, solver=solver, **kw)
    return svm.fit(X, Y)


def continued(svm, path, X, Y, passes=5):
    """``svm`` saved with its state, loaded and fitted ``passes`` more (no warning: it continues)."""
    loaded = sf.load(svm.save(path, state=True))
    loaded.set_params(warm_start=True, max_passes=passes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return loaded.fit(X, Y)


OPTIONS = [dict(), dict(block_storage="dense", step="pairwise", sampling="gap"),
           dict(block_storage="sparse", combine="add"), dict(averaging="weighted"),
           dict(cache=True, combine="average")]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_five_passes_saved_and_continued_are_ten_on_threads(options, tmp_path):
    model, X, Y = chain()
    solver = ShardedBCFW(shards=3, round_length=4, **options)
    one = fit(model, X, Y, 10, solver)
    two = continued(fit(model, X, Y, 5, solver), tmp_path / "m", X, Y)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=0, atol=1e-12)
    assert two.gap_ == pytest.approx(one.gap_, abs=1e-12)
    assert two.state_.rounds == one.state_.rounds


def test_five_passes_saved_and_continued_are_ten_on_processes(tmp_path):
    model, X, Y = chain()
    solver = ShardedBCFW(shards=2, round_length=4, executor="process", step="pairwise")
    one = fit(model, X, Y, 10, solver)
    two = continued(fit(model, X, Y, 5, solver), tmp_path / "m", X, Y)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=0, atol=1e-12)


def test_the_saved_state_is_checked_across_the_shards(tmp_path):
    model, X, Y = chain()
    svm = fit(model, X, Y, 3, ShardedBCFW(shards=2, round_length=4, block_storage="dense"))
    tree, arrays = encode_state(svm.state_)
    decode_state(tree, arrays, model=model)  # as saved: valid

    def forged(edit):
        st = decode_state(tree, arrays, model=model)
        edit(st)
        return encode_state(st)

    def shift_w(st):
        st.w += 0.5  # v, the same array
    with pytest.raises(ValueError, match=r"ShardedState.v.*v = sum_k w_k"):
        decode_state(*forged(shift_w), model=model)

    def apart(st):
        st.v = st.w.copy()
    with pytest.raises(ValueError, match=r"ShardedState.v.*the same array as w"):
        decode_state(*forged(apart), model=model)

    def other_lam(st):
        st.states[1].lam *= 2.0
    with pytest.raises(ValueError, match=r"states\[1\].lam"):
        decode_state(*forged(other_lam), model=model)

    def one_missing(st):
        st.states[0] = None
    with pytest.raises(ValueError, match="null entries"):
        decode_state(*forged(one_missing), model=model)

    def shared(st):
        st.states[1].oracle_gaps = st.states[0].oracle_gaps
    with pytest.raises(ValueError, match="same object"):
        decode_state(*forged(shared), model=model)

    def bad_sigma(st):
        st.sigma = 1.5
    with pytest.raises(ValueError, match="sigma"):
        decode_state(*forged(bad_sigma), model=model)


def test_factored_label_weights_that_do_not_sum_to_w_are_refused_when_continued():
    model, X, Y = chain()
    svm = fit(model, X, Y, 3, ShardedBCFW(shards=2, round_length=4, block_storage="factored"))
    st = decode_state(*encode_state(svm.state_), model=model)  # the file's checks cannot see it: no data
    st.states[0].factored.A[0] += 0.25
    svm.state_ = decode_state(*encode_state(st), model=model)
    svm.set_params(warm_start=True)
    with pytest.raises(ValueError, match="not the sum of its shards' blocks"):
        svm.fit(X, Y)


# ====================================================================== shard sources: state_dir
def source_fit(paths, passes, state_dir, warm=False, random_state=0, **options):
    from structfw.datasets.shard_source import ShardFiles

    solver = ShardedBCFW(shards=len(paths), round_length=4, executor="process", state_dir=state_dir, **options)
    model = sf.models.ChainModel(3, 4)
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=passes, tol=None, random_state=random_state, check_every=2,
                           warm_start=warm, solver=solver)
    return svm.fit(ShardFiles(paths))


@pytest.fixture()
def shard_paths(tmp_path):
    from test_sharded_files import write_shards

    model, X, Y = chain(n=24)
    folder = tmp_path / "data"
    folder.mkdir()
    return write_shards(folder, X, Y, 2), X, Y


def resumed(svm, path, paths, passes):
    from structfw.datasets.shard_source import ShardFiles

    loaded = sf.load(svm.save(path, state=True))
    loaded.set_params(warm_start=True, max_passes=passes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return loaded.fit(ShardFiles(paths))


@pytest.mark.parametrize("options", [dict(), dict(step="pairwise", sampling="gap")], ids=["fw", "pairwise-gap"])
def test_a_source_fit_continues_from_its_workers_state_files(shard_paths, tmp_path, options):
    paths, X, Y = shard_paths
    one = source_fit(paths, 10, tmp_path / "one", **options)
    half = source_fit(paths, 5, tmp_path / "two", **options)
    assert all(s is None for s in half.state_.states)  # the caller holds none of the shards' states
    assert sorted(os.listdir(tmp_path / "two")) == ["shard-0.npz", "shard-1.npz"]
    assert half.state_.files_round == half.state_.rounds
    two = resumed(half, tmp_path / "m", paths, 5)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=0, atol=1e-12)
    assert two.gap_ == pytest.approx(one.gap_, abs=1e-12)


def test_state_files_of_another_round_fit_or_shard_are_refused_by_name(shard_paths, tmp_path):
    import shutil

    paths, X, Y = shard_paths
    saved = source_fit(paths, 4, tmp_path / "s").save(tmp_path / "m", state=True)
    source_fit(paths, 6, tmp_path / "s")  # a later fit overwrote the files
    with pytest.raises(ValueError, match=r"shard-0\.npz: field 'round' = \d+, expected \d+: not the state"):
        resumed(sf.load(saved), tmp_path / "m2", paths, 2)
    source_fit(paths, 4, tmp_path / "s", random_state=1)  # the same round, another seed
    with pytest.raises(ValueError, match=r"shard-0\.npz: another fit's state \(its seed differs\)"):
        resumed(sf.load(saved), tmp_path / "m2", paths, 2)
    saved = source_fit(paths, 4, tmp_path / "s").save(tmp_path / "m3", state=True)
    shutil.copy(tmp_path / "s" / "shard-0.npz", tmp_path / "s" / "shard-1.npz")  # shard 0's state as shard 1's
    with pytest.raises(ValueError, match=r"shard-1\.npz: field 'shard' = 0, expected 1"):
        resumed(sf.load(saved), tmp_path / "m4", paths, 2)
    (tmp_path / "s" / "shard-1.npz").unlink()
    with pytest.raises(ValueError, match=r"shard-1\.npz: no such shard state file"):
        resumed(sf.load(saved), tmp_path / "m5", paths, 2)


def test_without_a_state_dir_a_source_fit_starts_afresh_and_says_why(shard_paths, tmp_path):
    from structfw.datasets.shard_source import ShardFiles

    paths, X, Y = shard_paths
    half = source_fit(paths, 3, None)
    loaded = sf.load(half.save(tmp_path / "m", state=True))
    loaded.set_params(warm_start=True)
    with pytest.warns(RuntimeWarning, match="no state_dir holds"):
        loaded.fit(ShardFiles(paths))


def test_state_dir_is_refused_on_threads_and_checked():
    with pytest.raises(ValueError, match="state_dir='x' with executor='thread'"):
        ShardedBCFW(shards=2, executor="thread", state_dir="x")
    with pytest.raises(ValueError, match="state_dir must be a folder's path"):
        ShardedBCFW(shards=2, executor="process", state_dir=3)


def test_a_loaded_estimator_keeps_its_shards_and_refuses_a_forged_count(tmp_path):
    from test_lam_auto import _rewrite_header

    model, X, Y = chain()
    svm = sf.StructuredSVM(model, lam=0.1, shards=2, executor="thread", max_passes=3, tol=None,
                           random_state=0).fit(X, Y)
    path = svm.save(tmp_path / "m.npz", state=True)
    loaded = sf.load(path)
    assert loaded.shards == 2 and loaded.state_.K == 2
    # continued on processes: K and the seed decide the iterates, not where they run
    loaded.set_params(warm_start=True, max_passes=3, executor="process")
    one = sf.StructuredSVM(model, lam=0.1, shards=2, executor="thread", max_passes=6, tol=None,
                           random_state=0).fit(X, Y)
    np.testing.assert_allclose(loaded.fit(X, Y).coef_, one.coef_, rtol=0, atol=1e-12)
    for bad in (0, 2.5, True, "2"):
        forged = _rewrite_header(path, tmp_path / "bad.npz", lambda h: h["params"].update(shards=bad))
        with pytest.raises(ValueError, match="field 'shards' must be null or an int >= 1"):
            sf.load(forged)
