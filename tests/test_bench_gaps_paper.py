"""Smoke tests of the Osokin et al. (2016) Figure 1, Figure 2 and App. C benchmarks
(`structfw bench staleness`, `cache-regimes`, `toy-gap-sampling`): tiny sizes, seconds each.
JSON keys and shapes, and checks the theory can fail."""
import itertools
import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from structfw_bench._gap_probe import chi, probed_fit
from structfw.cli import main
from structfw_bench import COMMANDS as BENCH_COMMANDS

MINE = ("staleness", "cache-regimes", "toy-gap-sampling")


def invoke(args):
    return CliRunner().invoke(main, args)


@pytest.fixture(scope="module")
def ocr_small():
    from structfw_bench._common import load_ocr_data

    X, Y, _, _, model = load_ocr_data(40, seed=1)
    return X, Y, model


# ------------------------------------------------------------------------ registration
@pytest.mark.parametrize("name", MINE)
def test_listed_help_is_the_docstring_first_line(name):
    import importlib

    module, attr, short = BENCH_COMMANDS[name]
    cmd = getattr(importlib.import_module(module, "structfw.cli"), attr)
    assert cmd.help.strip().splitlines()[0] == short
    res = invoke(["bench", name, "--help"])
    assert res.exit_code == 0 and "--out-dir" in res.output and "--seeds" in res.output


@pytest.mark.parametrize("args,needle", [
    (["staleness", "--refresh", "0"], "--refresh"),
    (["staleness", "--refresh", "a,b"], "--refresh"),
    (["staleness", "--lam", "-1"], "--lam"),
    (["staleness", "--seeds", "0"], "--seeds"),
    (["cache-regimes", "--F", "0,1"], "--F"),
    (["cache-regimes", "--nu", "x"], "--nu"),
    (["cache-regimes", "--target", "0"], "--target"),
    (["toy-gap-sampling", "--n", "1,4"], "--n"),
    (["toy-gap-sampling", "--passes", "1"], "--passes"),
])
def test_bad_options_are_usage_errors_naming_the_option(args, needle):
    res = invoke(["bench"] + args)
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------ Theorem 2's chi
def test_chi_is_one_for_uniform_and_sqrt_n_for_one_block():
    assert chi(np.ones(7)) == pytest.approx(1.0)
    assert chi(np.eye(9)[3]) == pytest.approx(3.0)
    # definition: sqrt(1 + n^2 Var[p]), p = x / ||x||_1
    x = np.array([1.0, 2.0, 5.0, 0.0])
    p = x / x.sum()
    assert chi(x) == pytest.approx(math.sqrt(1 + 16 * np.var(p)))
    assert math.isnan(chi(np.zeros(3)))


# ------------------------------------------------------------------------ Figure 1
def test_probe_ratio_is_one_right_after_a_refresh(ocr_small):
    X, Y, model = ocr_small
    r = probed_fit(model, X, Y, 0.01, dict(sampling="gap", gap_refresh=1), 4, 0, probe_norms=True)
    recs = r["records"]
    assert all(q["refreshed"] for q in recs)  # gap_refresh=1: every checkpoint is the algorithm's gap pass
    for q in recs:
        assert q["est_after"] / q["gap"] == pytest.approx(1.0, rel=1e-9, abs=1e-12)
    # between refreshes the estimates are stale: the ratio before a refresh differs from 1
    assert any(abs(q["est_before"] / q["gap"] - 1.0) > 1e-3 for q in recs[1:])
    # the probe's gap is the trace's (the same gap pass)
    assert np.allclose([q["gap"] for q in recs], r["columns"]["gap"], rtol=1e-9)
    assert all(q["chi_factor"] > 0 for q in recs)


def test_staleness_json_keys_shapes_and_budget(tmp_path, ocr_small):
    from structfw_bench.staleness import engine_passes_for, run_staleness

    assert [engine_passes_for(10, r) for r in ("uniform", 1, 4, None)] == [10, 4, 7, 9]
    doc = run_staleness(lam="0.01", passes=5, seeds=2, refresh=(1,), out=tmp_path, subsample=30, log=lambda *a: None)
    saved = json.loads((tmp_path / "staleness.json").read_text())
    assert (tmp_path / "staleness.png").stat().st_size > 0
    assert set(saved["arms"]) == {"Uniform", "Gap 1", "Gap Inf"}
    for name, arm in saved["arms"].items():
        assert len(arm["runs"]) == 2
        for key in ("gap_vs_passes", "ratio_vs_passes", "chi_factor_vs_passes"):
            assert len(arm[key]["median"]) == len(saved["grid_passes"]) == 6
        for r in arm["runs"]:
            assert len(r["passes"]) == len(r["gap"]) == len(r["est_before"]) == len(r["chi_factor"])
            assert max(r["passes"]) <= 5 + 1e-9  # the budget of effective passes holds
    gi = saved["arms"]["Gap Inf"]["runs"][0]
    assert gi["refreshed"][0] and not any(gi["refreshed"][1:])  # 'Gap Inf': only the first gap pass
    assert saved["arms"]["Gap 1"]["ratio_after_refresh"]["min"] == pytest.approx(1.0, abs=1e-9)
    assert saved["arms"]["Gap 1"]["ratio_after_refresh"]["max"] == pytest.approx(1.0, abs=1e-9)
    assert saved["arms"]["Uniform"]["ratio_final"] is None  # uniform sampling keeps no estimates
    assert doc["arms"]["Uniform"]["runs"][0]["passes"][0] == 0.0
    # --no-chi: the figure drops panel (c) instead of drawing an empty one
    from structfw_bench.staleness import plot_staleness

    for arm in saved["arms"].values():
        arm["chi_factor_vs_passes"] = {k: [None] * 6 for k in ("min", "median", "max")}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        plot_staleness(saved, tmp_path / "no_chi.png")


# ------------------------------------------------------------------------ Figure 2
def test_cache_regimes_grid_and_the_rules_extremes(tmp_path):
    from structfw_bench.cache_regimes import run_cache_regimes

    n = 30
    F, nu = (1e-4, 0.25), (1e-5, 10.0 * n)
    doc = run_cache_regimes(lam="0.01", passes=4, seeds=1, F=F, nu=nu, out=tmp_path, subsample=n,
                            log=lambda *a: None)
    saved = json.loads((tmp_path / "cache_regimes.json").read_text())
    assert (tmp_path / "cache_regimes.png").stat().st_size > 0
    assert len(saved["pairs"]) == 4 and saved["target"] > 0
    assert {(p["F"], p["nu"]) for p in saved["pairs"]} == set(itertools.product(F, nu))
    for p in saved["pairs"]:
        for key in ("passes_to_target", "time_to_target", "hit_rate", "local_share", "regime", "gap_vs_passes"):
            assert key in p
        assert p["regime"] in ("never hit", "global", "local", "stalls")
        assert all(max(r["passes"]) <= 4 + 1e-9 for r in p["runs"])
    by = {(p["F"], p["nu"]): p for p in doc["pairs"]}
    # nu/n = 10 > 1: the global threshold 10 g^(k0) exceeds every block's gap (g_i <= g), so no hit
    # unless the gap grew tenfold since the last full gap pass (Sec. 3.3)
    assert by[(1e-4, 10.0 * n)]["hit_rate"] == 0.0 and by[(1e-4, 10.0 * n)]["regime"] == "never hit"
    # both thresholds tiny: almost every step after a block's first oracle call is a hit
    assert by[(1e-4, 1e-5)]["hit_rate"] > 0.5
    assert by[(1e-4, 1e-5)]["local_share"] >= 0.5  # F g_i sets the threshold when nu is tiny
    assert by[(0.25, 10.0 * n)]["local_share"] < 0.5  # and nu/n g when nu is large


# ------------------------------------------------------------------------ App. C toy
def test_toy_model_oracle_is_the_maximiser():
    from structfw_bench.toy_gap_sampling import GapToyModel

    model = GapToyModel(5)
    rng = np.random.default_rng(0)
    for _ in range(50):
        w = rng.normal(size=model.size_joint_feature)
        for x in range(5):
            best = model.loss_augmented_decode(x, 0, w)
            psi = {y: model.joint_feature(x, 0) - model.joint_feature(x, y) for y in model.labels(x)}
            H = {y: model.loss(0, y) - psi[y] @ w for y in model.labels(x)}
            assert all(np.array_equal(model.psi(x, 0, y).toarray(), psi[y]) for y in psi)
            assert all(np.linalg.norm(p) in (0.0, 1.0) for p in psi.values())  # R_i = 1 for every block
            assert H[best] == pytest.approx(max(H.values()))
    with pytest.raises(ValueError, match="Y"):
        model.check_y(1, 2)


def test_toy_gap_sampling_needs_fewer_passes_and_gains_about_n(tmp_path):
    from structfw_bench.toy_gap_sampling import run_toy

    doc = run_toy(ns=(2, 8), passes=200, seeds=1, out=tmp_path, log=lambda *a: None)
    saved = json.loads((tmp_path / "toy_gap_sampling.json").read_text())
    assert (tmp_path / "toy_gap_sampling.png").stat().st_size > 0
    assert set(saved["results"]) == {"2", "8"}
    e = doc["results"]["8"]
    for t in ("0.01", "0.003"):
        u, g = e["arms"]["uniform"]["passes_to"][t], e["arms"]["gap"]["passes_to"][t]
        assert g is not None and u is not None and g < u  # gap sampling reaches the target first
    # the speed-up grows towards n = 8 (measured 6.7 at n*gap = 3e-3); uniform sampling cannot
    # beat 1/n of its steps on the hard block, so a speed-up well above 1 needs gap sampling to work
    assert e["speedup"]["gap"]["0.003"] > 4.0
    assert doc["results"]["2"]["speedup"]["gap"]["0.003"] < e["speedup"]["gap"]["0.003"]


def test_toy_command_writes_its_files(tmp_path):
    res = invoke(["bench", "toy-gap-sampling", "--n", "2,3", "--passes", "30", "--seeds", "1",
                  "--out-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "toy_gap_sampling.json").exists() and (tmp_path / "toy_gap_sampling.png").exists()
