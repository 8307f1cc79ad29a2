"""`structfw bench svm --dataset fashion-60k`: the PARTAN paper's tables at its own scale.

Fast checks of the large setting's parts on tiny data (a synthetic set, so they run without
Fashion-MNIST; the one test that reads Fashion-MNIST skips cleanly when Debian's
``dataset-fashion-mnist`` is absent).  No timing assertions.
"""
import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from structfw.bench.svm import (C_GRID, METHODS, PAPER_TABLE2, bench_svm, cvm_gamma,  # noqa: E402
                                format_large, resolve_bench_gamma, run_large, select_C)
from structfw.datasets.fashion import FASHION_MNIST_DIR  # noqa: E402


def _tiny(n=160, seed=0):
    from sklearn.datasets import make_classification
    X, y = make_classification(n + 60, 6, n_informative=4, random_state=seed)
    y = np.where(y == 1, 1, -1)
    return X[:n], X[n:], y[:n], y[n:]


def test_cvm_gamma_is_one_over_mean_squared_pairwise_distance():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(23, 5)) * [1.0, 2.0, 0.5, 3.0, 1.0] + 4.0
    m = X.shape[0]
    total = 0.0
    for i in range(m):  # by hand: every ordered pair, i = j included (Tsang et al. 2005)
        for j in range(m):
            total += float(np.sum((X[i] - X[j]) ** 2))
    beta = total / m ** 2
    assert cvm_gamma(X) == pytest.approx(1.0 / beta, rel=1e-12)
    assert resolve_bench_gamma("cvm", X) == cvm_gamma(X)
    assert resolve_bench_gamma(0.5, X) == 0.5
    with pytest.raises(ValueError, match="X"):
        cvm_gamma(np.ones((4, 3)))
    with pytest.raises(ValueError, match="gamma"):
        resolve_bench_gamma(-1.0, X)


def test_select_C_picks_from_the_grid():
    Xtr, _, ytr, _ = _tiny()
    grid = (0.5, 5.0, 50.0)
    sel = select_C(Xtr, ytr, gamma=cvm_gamma(Xtr), grid=grid, log=lambda *a: None)
    assert sel["C"] in grid
    assert len(sel["val_acc"]) == len(grid)
    assert sel["val_acc"][grid.index(sel["C"])] == max(sel["val_acc"])
    # the paper's split: 70 % to fit, 30 % to validate
    assert sel["m_fit"] + sel["m_val"] == len(ytr)
    assert sel["m_val"] == pytest.approx(0.3 * len(ytr), abs=1)
    sub = select_C(Xtr, ytr, gamma=1.0, grid=grid, n_select=100, log=lambda *a: None)
    assert sub["m_fit"] + sub["m_val"] == 100
    with pytest.raises(ValueError, match="grid"):
        select_C(Xtr, ytr, gamma=1.0, grid=(1.0, -2.0))


def test_run_large_on_a_tiny_set_selects_C_then_refits(tmp_path):
    data = _tiny()
    res = run_large(out=str(tmp_path), data=data, dataset="synthetic", pairs="-",
                    grid=(0.1, 1.0, 10.0), n_select=None, runs=1, tols=(1e-3, 1e-4),
                    log=lambda *a: None)
    C = res["config"]["C"]
    assert C == res["selection"]["C"] and C in (0.1, 1.0, 10.0)
    # the tables are fitted on the whole training set, not the 70 % of the selection
    assert res["config"]["m"] == len(data[2]) > res["selection"]["m_fit"]
    assert res["config"]["gamma"] == pytest.approx(cvm_gamma(data[0]))
    assert [r["method"] for r in res["table2"]] == METHODS
    assert [r["method"] for r in res["table4"]] == METHODS
    assert all(r["sample_size"] == 194 for r in res["table4"])
    assert {(r["method"], r["tol"]) for r in res["table3"]} == {
        (m, t) for m in METHODS for t in (1e-3, 1e-4)}
    for r in res["table2"]:
        assert r["cpu_s"] >= 0 and r["time_s"] > 0 and r["svs"] > 0
    assert "table2_fw_over_partan_time_s" in res["ratios"]
    assert "partan_deterministic_over_sampled_cpu_s" in res["ratios"]
    saved = json.loads((tmp_path / "svm_large.json").read_text())
    assert "### Table 2" in saved["markdown"] and "### Table 4" in saved["markdown"]
    assert (tmp_path / "svm_large.png").stat().st_size > 0
    assert not (tmp_path / "svm_large.partial.json").exists()
    # a given C and no sampling
    res = run_large(out=str(tmp_path / "b"), data=data, select=False, C=2.0, sampling=False,
                    gamma="scale", tols=(1e-4,), log=lambda *a: None)
    assert res["config"]["C"] == 2.0 and "selection" not in res and res["table4"] == []
    with pytest.raises(ValueError, match="C must"):
        run_large(out=str(tmp_path / "c"), data=data, select=False, C=None)


def test_paper_tables_give_the_papers_mean_speedup():
    # "improving on the running times of the plain FW by a factor of 2.52 on average"
    ratios = [rows["fw"][1] / rows["partan"][1] for rows in PAPER_TABLE2.values()]
    assert np.mean(ratios) == pytest.approx(2.52, abs=0.01)
    assert len(C_GRID) >= 3


@pytest.mark.parametrize("args, option", [
    (["--select-C"], "--select-C"),
    (["--gamma", "cvm"], "--gamma"),
    (["--sampling"], "--sampling"),
    (["--dataset", "fashion-60k", "--gamma", "wide"], "--gamma"),
    (["--dataset", "fashion-60k", "--gamma", "-1"], "--gamma"),
    (["--dataset", "fashion-60k", "--C-grid", "1,x"], "--C-grid"),
    (["--dataset", "fashion-60k", "--C-grid", "1,-3"], "--C-grid"),
    (["--dataset", "fashion-60k", "--tols", "0"], "--tols"),
    (["--dataset", "fashion-60k", "--select-C", "--C", "1"], "--select-C"),
    (["--dataset", "fashion-60k", "--no-select-C"], "--no-select-C"),
    (["--dataset", "fashion-60k", "--sample-size", "0"], "--sample-size"),
    (["--dataset", "fashion-60k", "--runs", "0"], "--runs"),
    (["--dataset", "fashion-60k", "--n-train", "5"], "--n-train"),
    (["--dataset", "fashion-60k", "--C", "-1"], "--C"),
    (["--dataset", "fashion-60k", "--cache-size", "0"], "--cache-size"),
    (["--cache-size", "50"], "--cache-size"),
    (["--dataset", "mnist"], "--dataset"),
])
def test_usage_errors_name_the_option(args, option, tmp_path):
    res = CliRunner().invoke(bench_svm, args + ["--out", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert option in res.output
    assert not list(tmp_path.iterdir())  # nothing ran


def test_format_large_shows_the_papers_numbers():
    data = {"config": {"dataset": "d", "pairs": "p", "m": 1, "t": 1, "n": 1, "gamma": 1.0,
                       "gamma_rule": "cvm", "C": 1.0, "tols_table3": [], "sample_size": 194,
                       "runs": 1},
            "table2": [], "table3": [], "table4": [], "ratios": {}}
    text = format_large(data)
    assert "Web w8a" in text and "KDD99-binary" in text


@pytest.mark.skipif(not (FASHION_MNIST_DIR / "train-labels-idx1-ubyte.gz").is_file(),
                    reason="Fashion-MNIST absent (apt-get install -y dataset-fashion-mnist)")
def test_cli_fashion_60k_on_a_subsample(tmp_path):
    res = CliRunner().invoke(bench_svm, [
        "--dataset", "fashion-60k", "--n-train", "300", "--select-n", "200", "--C-grid", "1,10",
        "--runs", "1", "--tols", "1e-3,1e-4", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "svm_large.json").read_text())
    assert saved["config"]["m"] == 300 and saved["config"]["t"] == 10000
    assert saved["config"]["pairs"] == "tops" and saved["config"]["C"] in (1.0, 10.0)
    assert saved["config"]["gamma_rule"] == "cvm"
    assert (tmp_path / "svm_large.png").is_file()
