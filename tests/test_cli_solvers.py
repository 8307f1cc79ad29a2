"""The command line offers every registered solver and the MP-BCFW benchmark."""
import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

import structfw as sf
from structfw.cli import main
from structfw.cli.train import train
from structfw.solvers import SOLVER_NAMES


def test_solver_choices_and_options_come_from_the_solvers_tables():
    params = {p.name: p for p in train.params}
    assert sorted(params["solver"].type.choices) == sorted(SOLVER_NAMES)
    for cls in SOLVER_NAMES.values():
        for p in cls.PARAMS:
            opt = params[p.name]
            assert "--" + p.name.replace("_", "-") in opt.opts
            if p.kind == "choice":
                assert {"none" if c is None else c for c in p.choices} <= set(opt.type.choices)


@pytest.mark.slow  # 25 s on the 2-core machine: the default suite keeps under ~10 minutes
def test_train_with_mpbcfw_and_the_mpbcfw_bench(tmp_path):
    r = CliRunner().invoke(main, ["train", "--solver", "mpbcfw", "--passes", "1", "--quiet", "--data", "snakes",
                                  "--lam", "0.1"])
    assert r.exit_code == 0, r.output
    assert "MP-BCFW" in r.output
    r = CliRunner().invoke(main, ["bench", "mpbcfw", "--dataset", "digits", "--passes", "2", "--seeds", "1",
                                  "--subsample", "60", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "mpbcfw.json").exists() and (tmp_path / "mpbcfw.md").exists()


@pytest.mark.slow  # 37 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_mpbcfw_bench_gives_bcfw_its_own_budget(tmp_path):
    """--bcfw-passes: BCFW and BCFW-avg run that many passes (and set g_B), the others --passes."""
    import json

    r = CliRunner().invoke(main, ["bench", "mpbcfw", "--dataset", "digits", "--passes", "2", "--bcfw-passes", "5",
                                  "--seeds", "1", "--subsample", "60", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "mpbcfw.json").read_text())
    assert doc["bcfw_passes"] == 5 and doc["passes"] == 2
    runs = doc["datasets"]["digits"]["runs"]
    for label, want in (("BCFW", 5), ("BCFW-avg", 5), ("MP-BCFW", 2), ("MP-BCFW-avg", 2), ("BCPFW-gap-cache", 2)):
        assert runs[label][0]["columns"]["engine_passes"][-1] >= want
        assert runs[label][0]["columns"]["oracle_calls"][-1] <= want * 60 + 1e-9, label
    assert runs["BCFW"][0]["columns"]["oracle_calls"][-1] == 5 * 60
    assert "5 BCFW passes, 2 for the others" in (tmp_path / "mpbcfw.md").read_text()
    r = CliRunner().invoke(main, ["bench", "mpbcfw", "--dataset", "digits", "--bcfw-passes", "0",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--bcfw-passes" in r.output


def test_train_on_the_segmentation_tasks():
    for data in ("seg-binary", "seg-multi"):
        r = CliRunner().invoke(main, ["train", "--data", data, "--passes", "1", "--quiet", "--lam", "0.01"])
        assert r.exit_code == 0, r.output
        assert "test error" in r.output


def test_train_with_kernel_bcfw_on_an_svmlight_file(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 80)
    X = rng.normal(size=(80, 4)) + 3 * np.eye(3, 4)[y]
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    args = ["train", "--data", str(tmp_path / "d.svm"), "--solver", "kernel-bcfw", "--kernel", "rbf", "--gamma",
            "0.5", "--passes", "3", "--quiet", "--trace", str(tmp_path / "t.json")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "stopped: max_passes" in r.output and (tmp_path / "t.json").exists()
    # a non-linear kernel's predictor has no explicit w: the model file holds its expansion
    r = CliRunner().invoke(main, args + ["--save", str(tmp_path / "m.npz")])
    assert r.exit_code == 0, r.output
    back = sf.load(tmp_path / "m.npz")
    assert back.coef_ is None and back.kernel_expansion_.kernel == "rbf"
    assert back.score(sp.csr_matrix(X), list(y)) > 0.9  # the file's data are kept sparse, as here
    r = CliRunner().invoke(main, ["train", "--data", "ocr", "--solver", "bcfw", "--kernel", "rbf"])
    assert r.exit_code == 2 and "--kernel" in r.output
