"""``structfw train --data 'part-*.svm'``: shard files from the command line (issue 52).

A glob or a comma-separated list of files is a `ShardFiles` source, one file a shard, each loaded
by its own worker process (or Ray actor); the command checks every option before any worker
starts and names the flag or the file it cannot use (exit code 2).
"""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import structfw as sf
from structfw.cli import main
from structfw.datasets.shard_source import ShardFiles, write_shard_npz

D = 4  # features
CENTRES = np.array([[3.0, 0, 0, 1], [0, 3.0, 0, 1], [0, 0, 3.0, 1]])  # three separable classes


def blobs(n, seed):
    """n examples of the three classes around CENTRES, every feature present (the file's width is D)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return CENTRES[y] + rng.normal(scale=0.3, size=(n, D)), y


def write_svmlight(path, X, y):
    lines = [f"{int(label)} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row)) for row, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def svm_shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("svm_shards")
    for k in range(3):
        write_svmlight(folder / f"part-{k}.svm", *blobs(20, seed=k))
    write_svmlight(folder / "test.svm", *blobs(30, seed=9))
    return folder


def train(*args):
    return CliRunner().invoke(main, ["train", "--lam", "0.1", "--passes", "4", "--tol", "0", *map(str, args)])


def assert_usage_error(out, *fragments):
    assert out.exit_code == 2, out.output
    for f in fragments:
        assert f in out.output, out.output


# ====================================================================== fits
def test_a_glob_of_svmlight_shards_trains_on_processes_and_predict_uses_the_model(svm_shards, tmp_path):
    saved = tmp_path / "model.npz"
    out = train("--data", svm_shards / "part-*.svm", "--n-features", D, "--labels", "0,1,2", "--save", saved)
    assert out.exit_code == 0, out.output
    assert "3 svmlight shard files, each loaded by its own worker (process)" in out.output
    assert "no test set" in out.output and "stopped: max_passes" in out.output
    assert "passes" in out.stderr  # the default progress bar, on standard error
    pred = tmp_path / "pred.json"
    out = CliRunner().invoke(main, ["predict", "--model", str(saved), "--data", str(svm_shards / "test.svm"),
                                    "--split", "train", "--out", str(pred)])
    assert out.exit_code == 0, out.output
    doc = json.loads(pred.read_text())
    assert doc["n_examples"] == 24 and doc["token_accuracy"] >= 0.9  # separable blobs: a trained model


def test_a_list_of_npz_chain_shards_fits_as_the_estimator_does(tmp_path):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(1, 4)), D)) for _ in range(8)]
    Y = [rng.integers(0, 3, x.shape[0]) for x in X]
    files = [write_shard_npz(tmp_path / f"s{k}.npz", X[k::2], Y[k::2]) for k in range(2)]
    saved = tmp_path / "chain.npz"
    out = train("--data", ",".join(map(str, files)), "--shards", 2, "--n-states", 3, "--n-features", D,
                "--quiet", "--save", saved)
    assert out.exit_code == 0, out.output
    assert "a ChainModel with 3 states" in out.output and "passes" not in out.stderr  # --quiet: no bar
    ref = sf.StructuredSVM(sf.models.ChainModel(3, D), lam=0.1, max_passes=4, tol=0, random_state=0,
                           executor="process").fit(ShardFiles(files))
    got = sf.StructuredSVM.load(saved)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


# ====================================================================== errors, before any worker starts
def test_shards_that_disagree_with_the_files_are_a_usage_error_naming_both(svm_shards):
    out = train("--data", svm_shards / "part-*.svm", "--shards", 2, "--n-features", D, "--labels", "0,1,2")
    assert_usage_error(out, "--shards 2", "names 3 shard files")


def test_a_missing_file_or_an_empty_pattern_is_named(svm_shards, tmp_path):
    listed = f"{svm_shards / 'part-0.svm'},{tmp_path / 'gone.svm'}"
    assert_usage_error(train("--data", listed, "--n-features", D, "--labels", "0,1,2"), "no such shard file",
                       "gone.svm")
    assert_usage_error(train("--data", tmp_path / "none-*.svm", "--n-features", D, "--labels", "0,1,2"),
                       "none-*.svm", "matches no file")


def test_formats_the_command_line_cannot_read_as_shards_are_refused_by_name(svm_shards, tmp_path):
    glob = svm_shards / "part-*.svm"
    assert_usage_error(train("--data", glob, "--format", "conll", "--n-features", D), "--format conll",
                       "featurize")
    for k in range(2):
        (tmp_path / f"p{k}.dat").write_text("0 1:1\n")
    assert_usage_error(train("--data", tmp_path / "p*.dat", "--n-features", D, "--labels", "0,1"),
                       "cannot tell the format", "p0.dat")
    assert_usage_error(train("--data", svm_shards / "test.svm", "--format", "npz"), "--format npz reads shard files")


def test_options_of_shard_files_are_checked_by_flag(svm_shards):
    glob = svm_shards / "part-*.svm"
    assert_usage_error(train("--data", glob, "--labels", "0,1,2"), "--n-features")
    assert_usage_error(train("--data", glob, "--n-features", D), "--labels", "--n-states")
    assert_usage_error(train("--data", glob, "--n-features", D, "--labels", "0,x"), "--labels", "numbers")
    assert_usage_error(train("--data", glob, "--n-features", D, "--labels", "0,1", "--n-states", 3),
                       "--n-states 3", "2 labels")
    assert_usage_error(train("--data", glob, "--n-features", D, "--labels", "0,1,2", "--executor", "thread"),
                       "--executor thread with shard files")
    assert_usage_error(train("--data", glob, "--n-features", D, "--labels", "0,1,2", "--model", "chain"),
                       "--model chain", "multiclass")
    assert_usage_error(train("--data", svm_shards / "test.svm", "--n-features", D), "--n-features applies to shard")


def test_a_shard_whose_labels_are_not_the_given_ones_is_named_by_its_file(svm_shards):
    out = train("--data", svm_shards / "part-*.svm", "--n-features", D, "--labels", "0,1", "--quiet")
    assert out.exit_code == 2, out.output
    assert "part-0.svm" in out.output and "not in labels" in out.output


# ====================================================================== Ray
# a Ray session takes a minute to start on 2 cores: in CI's slow stage
@pytest.mark.slow
def test_ray_actors_train_on_the_shard_files(svm_shards, tmp_path):
    pytest.importorskip("ray")
    files = [svm_shards / f"part-{k}.svm" for k in range(2)]  # two actors: a 2-core machine has 2 free CPUs
    saved = tmp_path / "ray.npz"
    out = train("--data", ",".join(map(str, files)), "--n-features", D, "--labels", "0,1,2", "--ray", "--quiet",
                "--save", saved)
    assert out.exit_code == 0, out.output
    assert "each loaded by its own worker (ray)" in out.output
    ref = sf.StructuredSVM(sf.models.MulticlassModel(3, D), lam=0.1, max_passes=4, tol=0, random_state=0,
                           executor="process").fit(ShardFiles(files, n_features=D, labels=[0, 1, 2]))
    np.testing.assert_allclose(sf.StructuredSVM.load(saved).coef_, ref.coef_, rtol=1e-9, atol=1e-12)
