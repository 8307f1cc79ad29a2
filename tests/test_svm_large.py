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

from structfw_bench.svm import (C_GRID, METHODS, PAPER_TABLE2, bench_svm, cvm_gamma,  # noqa: E402
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
    # the 60,000-point loader and the CLI's path through it; Table 3's extra tolerance and Table 4's
    # second gradient (test_cli_data_file_runs_tables_2_to_4_with_both_gradients) would add 8 fits
    res = CliRunner().invoke(bench_svm, [
        "--dataset", "fashion-60k", "--n-train", "300", "--select-n", "200", "--C-grid", "1,10",
        "--runs", "1", "--tols", "1e-4", "--gradient", "sample", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "svm_large.json").read_text())
    assert saved["config"]["m"] == 300 and saved["config"]["t"] == 10000
    assert saved["config"]["pairs"] == "tops" and saved["config"]["C"] in (1.0, 10.0)
    assert saved["config"]["gamma_rule"] == "cvm"
    assert (tmp_path / "svm_large.png").is_file()


def _write_svmlight(path, X, y):
    """A LIBSVM text file as a9a / ijcnn1 are distributed: one-based ids, +1 / -1 labels,
    zero features left out."""
    with open(path, "w") as fh:
        for xi, yi in zip(X, y):
            feats = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(xi) if v != 0)
            fh.write(f"{'+1' if yi > 0 else '-1'} {feats}\n")


@pytest.mark.slow  # 17 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_cli_data_file_runs_tables_2_to_4_with_both_gradients(tmp_path):
    """``--data FILE`` (an svmlight file, as a9a / w8a / ijcnn1 would be given): Tables 2-4,
    Table 4 with the paper's sample-only gradient and the full one on the same seeds, and a
    column cache bounded to two columns without prefetch."""
    Xtr, Xte, ytr, yte = _tiny(150, seed=3)
    _write_svmlight(tmp_path / "train.svm", Xtr, ytr)
    _write_svmlight(tmp_path / "test.svm", Xte, yte)
    out = tmp_path / "out"
    res = CliRunner().invoke(bench_svm, [
        "--data", str(tmp_path / "train.svm"), "--test-data", str(tmp_path / "test.svm"),
        "--C", "1", "--sample-size", "20", "--seeds", "2", "--tols", "1e-3",
        "--cache-columns", "2", "--block", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    saved = json.loads((out / "svm_large.json").read_text())
    cfg = saved["config"]
    assert cfg["dataset"] == "train.svm" and cfg["m"] == 150 and cfg["t"] == 60
    assert cfg["runs"] == 2 and cfg["cache_columns"] == 2 and cfg["block"] == 1
    by_grad = saved["table4_by_gradient"]
    assert set(by_grad) == {"sample", "full"} and saved["table4"] == by_grad["sample"]
    for s_row, f_row in zip(by_grad["sample"], by_grad["full"]):
        assert s_row["method"] == f_row["method"] and s_row["runs"] == 2
        # the same seeds draw the same samples: the two gradients take the same steps
        assert [r["iter"] for r in s_row["per_run"]] == [r["iter"] for r in f_row["per_run"]]
        assert s_row["kernel_evals"] > 0 and f_row["kernel_evals"] > 0
    for r in saved["table2"]:
        assert r["cache_slots"] == 2
        # two cached columns and no prefetch: the columns follow the iterations
        assert r["columns"] >= 0.3 * r["iter"] and r["kernel_evals"] == 150 * r["columns"]
    ratios = saved["ratios"]
    assert "partan_full_over_sample_gradient_kernel_evals" in ratios
    assert "table4_sample_fw_over_partan_cpu_s" in ratios
    md = (out / "svm_large.md").read_text()
    assert "gradient on the sample only" in md and "full gradient kept" in md
    assert "2 columns, block 1" in md
    # one file, split 70/30 by the bench, Table 4 with one gradient
    res = CliRunner().invoke(bench_svm, [
        "--data", str(tmp_path / "train.svm"), "--C", "1", "--gradient", "sample",
        "--sample-size", "20", "--seeds", "1", "--tols", "1e-3", "--methods", "fw,partan",
        "--out", str(tmp_path / "one")])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "one" / "svm_large.json").read_text())
    assert saved["config"]["m"] == 105 and saved["config"]["t"] == 45
    assert [r["method"] for r in saved["table2"]] == ["fw", "partan"]
    assert list(saved["table4_by_gradient"]) == ["sample"]


@pytest.mark.parametrize("args, option", [
    (["--test-data", "x.svm"], "--test-data"),
    (["--data", "a.svm", "--dataset", "fashion-60k"], "--data"),
    (["--data", "missing.svm", "--C", "1"], "--data"),
    (["--dataset", "fashion-60k", "--cache-columns", "1"], "--cache-columns"),
    (["--dataset", "fashion-60k", "--block", "0"], "--block"),
    (["--dataset", "fashion-60k", "--block", "wide"], "--block"),
    (["--dataset", "fashion-60k", "--methods", "fw,newton"], "--methods"),
    (["--dataset", "fashion-60k", "--seeds", "0"], "--seeds"),
    (["--dataset", "fashion-60k", "--max-iter", "0"], "--max-iter"),
    (["--dataset", "fashion-60k", "--gradient", "half"], "--gradient"),
    (["--gradient", "sample"], "--gradient"),
    (["--cache-columns", "4"], "--cache-columns"),
])
def test_new_options_usage_errors_name_the_option(args, option, tmp_path):
    res = CliRunner().invoke(bench_svm, args + ["--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert option in res.output
    assert not (tmp_path / "o").exists()


def test_data_file_with_three_labels_is_refused_naming_it(tmp_path):
    X, _, _, _ = _tiny(30)
    _write_svmlight(tmp_path / "three.svm", X, np.ones(30))
    text = (tmp_path / "three.svm").read_text().splitlines()
    text[0] = "3" + text[0][2:]
    text[1] = "-1" + text[1][2:]
    (tmp_path / "three.svm").write_text("\n".join(text) + "\n")
    res = CliRunner().invoke(bench_svm, ["--data", str(tmp_path / "three.svm"), "--C", "1",
                                         "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--data" in res.output and "three.svm" in res.output
    assert "two label values" in res.output


def test_cache_mb_for_columns_gives_that_many_slots():
    from structfw_bench.svm import cache_mb_for_columns
    from structfw.svm import SimplexFWSolver
    X, _, y, _ = _tiny(300)
    for n in (2, 3, 17):
        mb = cache_mb_for_columns(n, X)
        s = SimplexFWSolver(X, y.astype(float), cache_size=mb)
        assert s.cache_stats["slots"] == n
    with pytest.raises(ValueError, match="n_columns"):
        cache_mb_for_columns(1, X)
