"""Shards that load their own data (issue 52): ``fit(source)`` with shard files or a dataset object.

Each worker -- a process or a Ray actor -- calls ``source.load(k)`` itself, so the calling process never
holds the training set: a source that leaves a marker file with the loading process's pid shows who
loaded.  A fit from shard files takes the steps of the sharded fit of the same data held in memory
(shard k's file holds the examples k, k + K, ... of the in-memory set, the strided split), and a
killed worker reloads its shard from the source.
"""
import os
import uuid

import numpy as np
import pytest

import structfw as sf
from structfw.datasets.shard_source import ShardFiles, is_shard_source, write_shard_npz
from structfw.solvers.sharded import shard_indices

LAM = 0.5


def tiny_chain(n=9, S=3, F=4, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(1, 4)), F)) for _ in range(n)]
    Y = [rng.integers(0, S, x.shape[0]) for x in X]
    return sf.models.ChainModel(S, F), X, Y


class MarkedFiles(ShardFiles):
    """Shard files whose every load leaves a marker naming the process that loaded and the shard."""

    def __init__(self, paths, marks, **options):
        super().__init__(paths, **options)
        self.marks = str(marks)

    def load(self, k):
        with open(os.path.join(self.marks, f"{os.getpid()}-{k}-{uuid.uuid4().hex}"), "w"):
            pass
        return super().load(k)


def loads(marks):
    """(pid, shard) of every load so far."""
    return sorted((int(p), int(k)) for p, k, _ in (name.split("-") for name in os.listdir(marks)))


def write_shards(folder, X, Y, K):
    """Shard k's npz file: the in-memory set's examples k, k + K, ... (the strided split of fit(X, Y))."""
    paths = []
    for k, idx in enumerate(shard_indices(len(X), K)):
        paths.append(write_shard_npz(folder / f"part-{k}.npz", [X[i] for i in idx], [Y[i] for i in idx]))
    return paths


def rounds_of_one(executor):
    """Rounds of one block step a shard: a kill lands between many rounds."""
    from structfw.solvers.sharded import ShardedBCFW

    return ShardedBCFW(shards=3, combine="linesearch", round_length=1, executor=executor)


def fit_kw(**kw):
    return dict(lam=LAM, max_passes=6, tol=None, check_every=2, random_state=0, **kw)


@pytest.fixture(scope="module")
def chain_files(tmp_path_factory):
    model, X, Y = tiny_chain()
    folder = tmp_path_factory.mktemp("shards")
    write_shards(folder, X, Y, 3)
    memory = sf.StructuredSVM(model, shards=3, executor="thread", **fit_kw()).fit(X, Y)
    return model, X, Y, folder, memory


def marked_source(folder, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    return MarkedFiles(str(folder / "part-*.npz"), marks), marks


# ====================================================================== the source
def test_shard_files_read_every_format_as_fit_takes_it(tmp_path):
    model, X, Y = tiny_chain(n=4)
    write_shard_npz(tmp_path / "a.npz", X, Y)
    Xa, Ya = ShardFiles(tmp_path / "a.npz").load(0)
    assert len(Xa) == 4 and all(np.array_equal(a, b) for a, b in zip(Xa, X))
    assert all(np.array_equal(a, b) for a, b in zip(Ya, Y))
    (tmp_path / "b.svm").write_text("2 1:0.5 3:1\n-1 2:2\n2 1:1\n")
    Xb, Yb = ShardFiles([tmp_path / "b.svm"], n_features=5, labels=[-1, 2]).load(0)
    assert Xb.shape == (3, 5) and Yb == [1, 0, 1]
    (tmp_path / "c.conll").write_text("The DT\ncat NN\n\nA DT\n")
    Xc, Yc = ShardFiles(tmp_path / "c.conll", tags=["DT", "NN"], featurize=word_lengths).load(0)
    assert [y.tolist() for y in Yc] == [[0, 1], [0]] and Xc[0].shape == (2, 1)
    assert is_shard_source(ShardFiles(tmp_path / "a.npz")) and not is_shard_source([X, Y])


def word_lengths(sentences):
    return [np.array([[float(len(w))] for w in s]) for s in sentences]


def test_shard_files_errors_name_the_file_or_the_option(tmp_path):
    with pytest.raises(ValueError, match="matches no file"):
        ShardFiles(str(tmp_path / "none-*.npz"))
    with pytest.raises(ValueError, match="no such file.*missing.npz"):
        ShardFiles([tmp_path / "missing.npz"])
    (tmp_path / "b.svm").write_text("1 1:0.5\n")
    with pytest.raises(ValueError, match="needs n_features"):
        ShardFiles(tmp_path / "b.svm")
    with pytest.raises(TypeError, match="no option 'tags'"):
        ShardFiles(tmp_path / "b.svm", n_features=2, tags=["A"])
    with pytest.raises(ValueError, match=r"b\.svm: example 0 has label 1, which is not in labels"):
        ShardFiles(tmp_path / "b.svm", n_features=2, labels=[3, 4]).load(0)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"bad\.npz: not a readable \.npz shard file"):
        ShardFiles(tmp_path / "bad.npz").load(0)
    (tmp_path / "x.dat").write_text("1 1:0.5\n")
    with pytest.raises(ValueError, match="cannot tell the format"):
        ShardFiles(tmp_path / "x.dat")


# ====================================================================== processes
def test_the_caller_never_loads_and_the_fit_is_the_in_memory_one(chain_files, tmp_path):
    model, X, Y, folder, memory = chain_files
    source, marks = marked_source(folder, tmp_path)
    svm = sf.StructuredSVM(model, executor="process", **fit_kw()).fit(source)
    assert sorted(k for _, k in loads(marks)) == [0, 1, 2]
    assert os.getpid() not in {pid for pid, _ in loads(marks)}
    np.testing.assert_allclose(svm.coef_, memory.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(svm.trace_["gap"], memory.trace_["gap"], rtol=1e-9, atol=1e-12)
    assert svm.trace_.meta["n"] == len(X) and svm.state_.K == 3
    assert svm.score(X, Y) == pytest.approx(memory.score(X, Y))


def kill_after_rounds(monkeypatch, shard, rounds):
    """Kill the worker of ``shard`` (a real process or Ray actor) after each of these rounds."""
    import structfw.solvers.sharded as sharded

    real, done = sharded.one_round, [0]

    def one_round(ctx, rule):
        gamma = real(ctx, rule)
        done[0] += 1
        if done[0] in rounds:
            ctx.shards[shard].kill()
        return gamma

    monkeypatch.setattr(sharded, "one_round", one_round)


def test_a_killed_worker_reloads_its_shard_and_the_fit_is_unchanged(chain_files, tmp_path, monkeypatch):
    model, X, Y, folder, memory = chain_files
    source, marks = marked_source(folder, tmp_path)
    kill_after_rounds(monkeypatch, shard=1, rounds=(2, 9))  # before and after the first checkpoint file
    svm = sf.StructuredSVM(model, executor="process", solver=rounds_of_one("process"), **fit_kw()).fit(source)
    ref = sf.StructuredSVM(model, shards=3, executor="thread", solver=rounds_of_one("thread"), **fit_kw()).fit(X, Y)
    assert sorted(k for _, k in loads(marks)) == [0, 1, 1, 1, 2]  # shard 1 loaded again after each kill
    assert os.getpid() not in {pid for pid, _ in loads(marks)}
    np.testing.assert_allclose(svm.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_a_source_fit_refuses_what_cannot_work_by_name(chain_files, tmp_path):
    model, X, Y, folder, _ = chain_files
    source = ShardFiles(str(folder / "part-*.npz"))
    with pytest.raises(ValueError, match=r"shards=2 and the shard source's 3 shards"):
        sf.StructuredSVM(model, shards=2, executor="process", lam=LAM).fit(source)
    with pytest.raises(ValueError, match="executor='thread'"):
        sf.StructuredSVM(model, executor="thread", lam=LAM).fit(source)
    with pytest.raises(ValueError, match="lam='auto' with a shard source"):
        sf.StructuredSVM(model, executor="process", lam="auto").fit(source)
    with pytest.raises(ValueError, match="Y must be a list"):
        sf.StructuredSVM(model, executor="process", lam=LAM).fit(X)


def test_a_shard_file_gone_or_bad_at_load_time_is_named(tmp_path):
    import multiprocessing

    model, X, Y = tiny_chain(n=4)
    paths = write_shards(tmp_path, X, Y, 2)
    source = ShardFiles(paths)
    os.remove(paths[1])
    with pytest.raises(ValueError, match=r"part-1\.npz: shard 1's file is missing"):
        sf.StructuredSVM(model, executor="process", lam=LAM, max_passes=1).fit(source)
    write_shard_npz(paths[1], [X[1]], [np.full(X[1].shape[0], 7)])  # a state beyond the model's 3
    with pytest.raises(ValueError, match=r"shard 1 \(.*part-1\.npz\)"):
        sf.StructuredSVM(model, executor="process", lam=LAM, max_passes=1).fit(source)
    assert multiprocessing.active_children() == []


# ====================================================================== Ray
@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    import ray.cloudpickle

    import sys

    from structfw import executor_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # this test module is not on the actors' path
    # a session of its own with 3 CPUs (one actor a shard, K = 3): a session an earlier test left
    # (the machine's 2 CPUs, oracle actors holding them) would refuse K = 3
    if ray.is_initialized():
        executor_ray.shutdown()
        ray.shutdown()
    ray.init(num_cpus=3, include_dashboard=False, logging_level="WARNING")
    yield ray
    executor_ray.shutdown()
    ray.shutdown()


# a Ray session takes a minute to start on 2 cores: in CI's slow stage
@pytest.mark.slow
def test_ray_actors_own_their_shards_and_take_the_process_steps(ray_session, chain_files, tmp_path):
    model, X, Y, folder, memory = chain_files
    source, marks = marked_source(folder, tmp_path)
    svm = sf.StructuredSVM(model, executor="ray", **fit_kw()).fit(source)
    assert sorted(k for _, k in loads(marks)) == [0, 1, 2] and os.getpid() not in {p for p, _ in loads(marks)}
    np.testing.assert_allclose(svm.coef_, memory.coef_, rtol=1e-9, atol=1e-12)
    sent = sf.StructuredSVM(model, shards=3, executor="ray", **fit_kw()).fit(X, Y)  # each actor sent its shard
    np.testing.assert_allclose(sent.coef_, memory.coef_, rtol=1e-9, atol=1e-12)
    assert sent.state_.states[0] is not None  # gathered from the actors (the caller held the data anyway)


# a Ray session takes a minute to start on 2 cores: in CI's slow stage
@pytest.mark.slow
def test_a_killed_ray_actor_reloads_its_shard(ray_session, chain_files, tmp_path, monkeypatch):
    model, X, Y, folder, memory = chain_files
    source, marks = marked_source(folder, tmp_path)
    kill_after_rounds(monkeypatch, shard=2, rounds=(3,))
    svm = sf.StructuredSVM(model, executor="ray", solver=rounds_of_one("ray"), **fit_kw()).fit(source)
    ref = sf.StructuredSVM(model, shards=3, executor="thread", solver=rounds_of_one("thread"), **fit_kw()).fit(X, Y)
    assert sorted(k for _, k in loads(marks)) == [0, 1, 2, 2]
    np.testing.assert_allclose(svm.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


# a Ray session takes a minute to start on 2 cores: in CI's slow stage
@pytest.mark.slow
def test_more_shards_than_free_ray_cpus_is_refused(ray_session, tmp_path):
    model, X, Y = tiny_chain(n=8)
    source = ShardFiles(write_shards(tmp_path, X, Y, 8))
    with pytest.raises(ValueError, match=r"shards=8 with executor='ray'.*free"):
        sf.StructuredSVM(model, executor="ray", lam=LAM, max_passes=1).fit(source)
