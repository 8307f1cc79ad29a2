"""Smoke tests of the ``structfw`` command line."""
import json

import numpy as np
from click.testing import CliRunner

from structfw.cli import main

EXPECTED_COMMANDS = {"demo", "train", "bench", "path"}
EXPECTED_BENCH = {"fig1", "gaps", "speed", "path", "svm"}


def run(args):
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    return res


def test_every_command_is_registered_and_documented():
    res = run(["--help"])
    assert res.exit_code == 0
    for cmd in EXPECTED_COMMANDS:
        assert cmd in res.output
    res = run(["bench", "--help"])
    for cmd in EXPECTED_BENCH:
        assert cmd in res.output
    res = run(["train", "--help"])
    for flag in ("--data", "--model", "--solver", "--lam", "--passes", "--tol", "--plot", "--trace", "--save",
                 "--sampling", "--step", "--cache", "--averaging"):
        assert flag in res.output


def test_demo_runs(tmp_path):
    res = run(["demo", "--passes", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "test err" in res.output
    assert (tmp_path / "demo_convergence.png").stat().st_size > 1000
    doc = json.loads((tmp_path / "demo_trace.json").read_text())
    assert len(doc["columns"]["gap"]) == 2


def test_train_ocr_writes_trace_plot_and_model(tmp_path):
    res = run(["train", "--data", "ocr", "--solver", "bcfw", "--step", "pairwise", "--sampling", "gap",
               "--passes", "1", "--lam", "0.01", "--quiet", "--trace", str(tmp_path / "t.csv"),
               "--plot", str(tmp_path / "p.png"), "--save", str(tmp_path / "m.npz")])
    assert res.exit_code == 0, res.output
    assert "stopped: " in res.output
    import structfw as sf

    svm = sf.load(tmp_path / "m.npz")
    assert svm.coef_.shape == (26 * 128 + 26 * 26,)
    assert (tmp_path / "p.png").exists() and (tmp_path / "t.csv").exists()


def test_train_svmlight_file_uses_multiclass_model(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 120)
    X = rng.normal(size=(120, 4)) + 3 * np.eye(3, 4)[y]
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    res = run(["train", "--data", str(path), "--passes", "5", "--quiet", "--solver", "fw"])
    assert res.exit_code == 0, res.output
    assert "test error" in res.output


def test_train_bad_arguments_give_clear_errors(tmp_path):
    res = CliRunner().invoke(main, ["train", "--lam", "-1", "--passes", "1", "--quiet"])
    assert res.exit_code != 0 and "lam" in res.output
    res = CliRunner().invoke(main, ["train", "--data", str(tmp_path / "missing.txt")])
    assert res.exit_code != 0 and "--data" in res.output
    res = CliRunner().invoke(main, ["train", "--solver", "newton"])
    assert res.exit_code != 0 and "--solver" in res.output
