"""``structfw train --resume MODEL`` and ``--state-dir DIR`` (issue 52): a run saved with --save-state
continues from the command line, on in-memory data (serial and sharded) and on shard files whose
workers keep their states in a folder; the continued run is the uninterrupted one."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

import structfw as sf
from structfw.cli import main
from test_cli_shards import D, blobs, write_svmlight


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    X, y = blobs(80, seed=1)
    whole = write_svmlight(folder / "whole.svm", X, y)
    for k in range(2):
        write_svmlight(folder / f"part-{k}.svm", *blobs(25, seed=10 + k))
    return folder, whole


def train(*args):
    return CliRunner().invoke(main, ["train", "--lam", "0.1", "--tol", "0", "--check-every", "1", "--quiet",
                                     *map(str, args)])


def trace(path):
    return json.loads(path.read_text())


def ok(out):
    assert out.exit_code == 0, out.output
    return out


@pytest.mark.parametrize("options", [[], ["--shards", "2"], ["--shards", "2", "--executor", "process"]],
                         ids=["serial", "threads", "processes"])
def test_two_runs_continued_by_resume_are_one_run(data, tmp_path, options):
    folder, whole = data
    ok(train("--data", whole, "--passes", 6, "--save", tmp_path / "one.npz", "--trace", tmp_path / "one.json",
             *options))
    ok(train("--data", whole, "--passes", 3, "--save", tmp_path / "a.npz", "--save-state", *options))
    ok(train("--data", whole, "--passes", 3, "--resume", tmp_path / "a.npz", "--save", tmp_path / "b.npz",
             "--trace", tmp_path / "b.json", *options[2:]))
    one, two = sf.load(tmp_path / "one.npz"), sf.load(tmp_path / "b.npz")
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=0, atol=1e-12)
    assert trace(tmp_path / "b.json")["columns"]["engine_passes"][-1] == 6
    np.testing.assert_allclose(trace(tmp_path / "b.json")["columns"]["gap"][-1],
                               trace(tmp_path / "one.json")["columns"]["gap"][-1], rtol=1e-9)


def test_shard_files_continue_from_their_state_dir(data, tmp_path):
    folder, _ = data
    shards = ["--data", folder / "part-*.svm", "--n-features", D, "--labels", "0,1,2"]
    ok(train(*shards, "--passes", 6, "--save", tmp_path / "one.npz"))
    ok(train(*shards, "--passes", 3, "--state-dir", tmp_path / "states", "--save", tmp_path / "a.npz",
             "--save-state"))
    assert sorted(p.name for p in (tmp_path / "states").iterdir()) == ["shard-0.npz", "shard-1.npz"]
    ok(train(*shards, "--passes", 3, "--resume", tmp_path / "a.npz", "--save", tmp_path / "b.npz"))
    np.testing.assert_allclose(sf.load(tmp_path / "b.npz").coef_, sf.load(tmp_path / "one.npz").coef_,
                               rtol=0, atol=1e-12)


def test_a_new_lam_continues_to_its_own_optimum(data, tmp_path):
    _, whole = data
    ok(train("--data", whole, "--passes", 3, "--save", tmp_path / "a.npz", "--save-state"))
    out = ok(CliRunner().invoke(main, ["train", "--data", str(whole), "--lam", "0.05", "--passes", "500",
                                       "--tol", "1e-3", "--quiet", "--resume", str(tmp_path / "a.npz"),
                                       "--save", str(tmp_path / "b.npz")]))
    assert "stopped: tol" in out.output
    continued = sf.load(tmp_path / "b.npz")
    assert continued.lam == 0.05 and continued.gap_ <= 1e-3


def assert_usage_error(out, *fragments):
    assert out.exit_code == 2, out.output
    for f in fragments:
        assert f in out.output, out.output


def test_what_cannot_be_resumed_is_a_usage_error_naming_it(data, tmp_path):
    folder, whole = data
    ok(train("--data", whole, "--passes", 2, "--save", tmp_path / "plain.npz"))
    assert_usage_error(train("--data", whole, "--resume", tmp_path / "plain.npz"), "--resume", "no solver state",
                       "--save-state")
    ok(train("--data", whole, "--passes", 2, "--save", tmp_path / "a.npz", "--save-state"))
    for flag in (["--solver", "ssg"], ["--step", "pairwise"], ["--shards", "2"], ["--seed", "3"],
                 ["--model", "multiclass"]):
        assert_usage_error(train("--data", whole, "--resume", tmp_path / "a.npz", *flag), flag[0], "--resume")
    other = write_svmlight(tmp_path / "other.svm", *blobs(80, seed=2))
    assert_usage_error(train("--data", other, "--resume", tmp_path / "a.npz"), "cannot continue on --data",
                       "other data")
    assert_usage_error(train("--data", whole, "--resume", tmp_path / "missing.npz"), "--resume")
    assert_usage_error(train("--data", whole, "--state-dir", tmp_path / "s"), "--state-dir", "--shards")


def test_shard_files_save_their_state_only_with_a_state_dir(data, tmp_path):
    folder, _ = data
    shards = ["--data", folder / "part-*.svm", "--n-features", D, "--labels", "0,1,2"]
    assert_usage_error(train(*shards, "--save", tmp_path / "a.npz", "--save-state"), "--save-state", "--state-dir")
