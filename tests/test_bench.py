"""The benchmarks run end to end in tiny settings and write valid JSON and PNG."""
import json

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from structfw.bench._common import on_grid, parse_lam  # noqa: E402
from structfw.bench.fig1 import bench_fig1, run_fig1  # noqa: E402
from structfw.bench.gaps import COMBOS, bench_gaps, run_gaps  # noqa: E402
from structfw.bench.speed import bench_speed, run_speed  # noqa: E402
from structfw.bench.synthetic import make_chain_problem  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _check_outputs(out, stem):
    doc = json.loads((out / f"{stem}.json").read_text())  # strict JSON: no NaN
    assert (out / f"{stem}.png").read_bytes()[:8] == PNG
    return doc


def test_parse_lam():
    assert parse_lam("1/n", 200) == pytest.approx(1 / 200)
    assert parse_lam("0.01/n", 100) == pytest.approx(1e-4)
    assert parse_lam("0.001", 5) == 0.001
    assert parse_lam(0.5, 5) == 0.5


def test_on_grid_interpolates_and_masks():
    v = on_grid([0, 2, 4], [1.0, 0.1, 0.01], np.array([0, 1, 4, 5.0]))
    assert v[0] == pytest.approx(1.0) and v[1] == pytest.approx(np.sqrt(0.1)) and v[2] == pytest.approx(0.01)
    assert np.isnan(v[3])


def test_fig1_runs(tmp_path):
    doc = run_fig1(["0.01", "1/n"], passes=2, seeds=2, out=tmp_path, subsample=40, ref_passes=3,
                   log=lambda *_: None)
    disk = _check_outputs(tmp_path, "fig1")
    assert set(disk["lams"]) == {"0.01", "1/n"}
    e = doc["lams"]["1/n"]
    assert e["lam"] == pytest.approx(1 / 40)
    assert set(e["solvers"]) == {"FW", "BCFW", "BCFW-wavg", "BCFW-fixed", "SSG", "SSG-wavg"}
    assert e["solvers"]["BCFW"]["n_runs"] == 2 and e["solvers"]["FW"]["n_runs"] == 1
    sub = e["solvers"]["BCFW"]["primal_subopt"]["median"]
    assert len(sub) == 3 and all(v is not None and v > 0 for v in sub)
    # P* is a dual value: no primal of any run is below it
    for s in e["solvers"].values():
        for r in s["runs"]:
            assert min(r["primal"]) >= e["pstar"] - 1e-9


def test_gaps_runs_both_datasets(tmp_path):
    docs = run_gaps(["0.01"], passes=2, seeds=1, out=tmp_path, dataset="both", subsample=30, check_every=1,
                    gap_refresh=1, log=lambda *_: None)
    for ds in ("ocr", "large"):
        disk = _check_outputs(tmp_path, f"gaps_{ds}")
        variants = disk["lams"]["0.01"]["variants"]
        assert len(variants) == len(COMBOS) == 8
        for var in variants.values():
            assert var["final"]["gap"] is not None and var["final"]["gap"] >= -1e-9
            if var["cache"]:
                assert var["final"]["cache_saving"] is not None
    assert docs["large"]["n"] == 120


def test_speed_runs(tmp_path):
    doc = run_speed(passes=2, out=tmp_path, subsample=40, log=lambda *_: None)
    _check_outputs(tmp_path, "speed")
    assert doc["per_call_us"]["loss_augmented_decode"] > 0 and doc["per_call_us"]["psi"] > 0
    for r in doc["runs"].values():
        assert len(r["per_pass_s"]) == 2 and 0 <= r["test_error"] <= 1


def test_cli_commands(tmp_path):
    runner = CliRunner()
    res = runner.invoke(bench_fig1, ["--lam", "0.01", "--passes", "1", "--seeds", "1", "--subsample", "30",
                                     "--ref-passes", "0", "--solver", "BCFW", "--solver", "SSG",
                                     "--out", str(tmp_path / "f")])
    assert res.exit_code == 0, res.output
    assert "BCFW" in res.output and (tmp_path / "f" / "fig1.json").exists()
    res = runner.invoke(bench_gaps, ["--lams", "1/n", "--passes", "1", "--seeds", "1", "--subsample", "30",
                                     "--dataset", "ocr", "--gap-refresh", "1", "--out", str(tmp_path / "g")])
    assert res.exit_code == 0, res.output
    assert "BCPFW-gap-cache" in res.output and (tmp_path / "g" / "gaps_ocr.png").exists()
    res = runner.invoke(bench_speed, ["--passes", "2", "--subsample", "30", "--out", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert "s/pass" in res.output and (tmp_path / "s" / "speed.json").exists()


def test_structfw_bench_group_lists_commands():
    from structfw.cli import main

    res = CliRunner().invoke(main, ["bench", "--help"])
    assert res.exit_code == 0
    for name in ("fig1", "gaps", "speed"):
        assert name in res.output


@pytest.mark.parametrize("sparse", [True, False])
def test_make_chain_problem_shapes(sparse):
    X, Y, Xt, Yt = make_chain_problem(n=50, n_states=5, n_features=60, sparse=sparse, seed=1, min_len=3,
                                      max_len=6)
    assert len(X) == len(Y) == 50 and len(Xt) == len(Yt) == 5
    for x, y in zip(X + Xt, Y + Yt):
        assert x.shape == (len(y), 60) and 3 <= len(y) <= 6
        assert y.dtype == np.int64 and y.min() >= 0 and y.max() < 5
        assert sp.issparse(x) == sparse
    labels = np.concatenate(Y)
    assert len(np.unique(labels)) == 5  # every state occurs
    X2, Y2, _, _ = make_chain_problem(n=50, n_states=5, n_features=60, sparse=sparse, seed=1, min_len=3, max_len=6)
    assert all(np.array_equal(a, b) for a, b in zip(Y, Y2))


def test_make_chain_problem_is_learnable():
    import structfw as sf

    X, Y, Xt, Yt = make_chain_problem(n=300, n_states=4, n_features=40, sparse=True, seed=0, n_active=5)
    model = sf.models.ChainModel(n_states=4, n_features=40)
    svm = sf.StructuredSVM(model, lam=0.01, max_passes=5, tol=None, random_state=0).fit(X, Y)
    assert svm.score(Xt, Yt) > 0.6  # chance is 0.25


def test_make_chain_problem_errors():
    with pytest.raises(ValueError, match="n_features"):
        make_chain_problem(n=5, n_states=10, n_features=20, sparse=True)
