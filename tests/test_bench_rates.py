"""`structfw bench rates`: the BCFW paper's O(1/eps) theorems against measured gaps (structfw_bench/rates.py)."""
import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from structfw_bench import rates
from structfw.cli import main
from structfw.models import ChainModel, MulticlassModel


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The bench at tiny size through the command: 20 OCR words, 8 passes, 3 seeds, two lams."""
    out = tmp_path_factory.mktemp("rates")
    res = CliRunner().invoke(main, ["bench", "rates", "--n", "20", "--passes", "8", "--seeds", "3",
                                    "--ref-passes", "40", "--lams", "1/n,0.01", "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "rates.json").read_text()), res.output


def test_the_bench_writes_its_json_and_png(tiny):
    out, doc, output = tiny
    assert (out / "rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert doc["benchmark"] == "rates" and doc["n"] == 20 and list(doc["lams"]) == ["1/n", "0.01"]
    assert doc["R"]["lower"] <= doc["R"]["upper"]
    for e in doc["lams"].values():
        assert {"reference", "dstar", "h0", "constants", "verdict", "solvers", "conditions"} <= set(e)
        assert set(e["solvers"]) == set(rates.RATE_SOLVERS) == set(e["verdict"])
        for name in ("BCFW", "BCFW-fixed", "FW"):
            v = e["verdict"][name]
            assert {"max_k_g_over_constant", "under_bound", "bound_constant", "summary"} <= set(v["gap"])
            assert {"max_k_h_over_constant", "under_bound", "bound_constant"} <= set(v["dual_subopt"])
        for name in rates.PRIMAL_SOLVERS:
            row = e["verdict"][name]["primal_subopt"]
            assert row["bound_constant"] is None and "O-notation" in row["why_no_bound"]
        assert len(e["solvers"]["BCFW"]["gap"]) == 3 and len(e["solvers"]["FW"]["gap"]) == 1
        assert e["solvers"]["BCFW"]["passes"] == list(range(9))
    assert "under" in output and "rates.png" in output


def test_bcfw_gap_stays_under_theorem_c3_bound(tiny):
    """Thm. C.3: min_{k <= K} E[g(alpha^(k))] <= 6n (C_f^⊗ + h_0) / (K + 1), computed here from the
    raw gaps of the JSON, R recomputed from the data and h_0 from the reference's bracket."""
    _, doc, _ = tiny
    from structfw_bench._common import load_ocr_data

    X, Y, _, _, model = load_ocr_data(doc["n"])
    n = len(X)
    r = rates.chain_psi_norm_bounds(X, Y, model)["lower"]
    for e in doc["lams"].values():
        h0 = e["dstar"]["lower"] - e["d_alpha0"]        # the smaller end: a smaller, stricter bound
        c = 4 * r * r / (e["lam"] * n) + h0
        for name in ("BCFW", "BCFW-fixed"):
            gaps = np.array(e["solvers"][name]["gap"], float)
            k = np.array(e["solvers"][name]["passes"], float) * n
            expected = np.minimum.accumulate(gaps.mean(axis=0))
            assert np.all(expected <= 6 * n * c / (k + 1)), (name, e["lam_spec"])
            assert e["verdict"][name]["gap"]["under_bound"]
            # and Thm. C.1 on the dual suboptimality, with D* at the upper end of its bracket
            h = e["dstar"]["upper"] - np.array(e["solvers"][name]["dual"], float).mean(axis=0)
            assert np.all(h <= 2 * n * c / (k + 2 * n)), (name, e["lam_spec"])


def _brute_force_r2(x, y, model):
    length = len(y)
    return max(float(np.sum(model.psi(x, y, np.array(z)).toarray() ** 2))
               for z in itertools.product(range(model.n_states), repeat=length))


def test_r_bounds_bracket_the_brute_force_maximum():
    rng = np.random.default_rng(3)
    model = ChainModel(n_states=3, n_features=2)
    X = [rng.normal(size=(3, 2)), rng.normal(size=(4, 2))]   # negative features: the bounds differ
    Y = [np.array([0, 1, 1]), np.array([2, 2, 0, 1])]
    exact = math.sqrt(max(_brute_force_r2(x, y, model) for x, y in zip(X, Y)))
    b = rates.chain_psi_norm_bounds(X, Y, model)
    assert b["lower"] <= exact * (1 + 1e-9) and exact <= b["upper"] * (1 + 1e-9)
    assert b["lower"] < b["upper"] and b["l_max"] == pytest.approx(1.0, rel=1e-12)


def test_r_bounds_meet_on_non_negative_features():
    """OCR's case: pixels >= 0 and a label absent from the word, so the constant labelling attains R."""
    rng = np.random.default_rng(4)
    model = ChainModel(n_states=3, n_features=3)
    X = [rng.random((3, 3)), rng.random((2, 3))]
    Y = [np.array([0, 1, 0]), np.array([1, 1])]
    exact = math.sqrt(max(_brute_force_r2(x, y, model) for x, y in zip(X, Y)))
    b = rates.chain_psi_norm_bounds(X, Y, model)
    assert b["lower"] == pytest.approx(exact, rel=1e-9) and b["upper"] == pytest.approx(exact, rel=1e-9)


def test_constants_and_bounds_follow_the_paper():
    c = rates.theorem_constants(2.0, 0.5, 4, 0.25)
    assert c["C_prod"] == pytest.approx(4 * 4 / (0.5 * 4), rel=1e-12)
    assert c["C_f"] == pytest.approx(4 * 4 / 0.5, rel=1e-12)
    assert c["gap_block"] == pytest.approx(6 * (c["C_prod"] + 0.25), rel=1e-12)
    k = np.array([0.0, 4.0, 40.0])
    assert rates.dual_bound("BCFW", k, 4, c) == pytest.approx(2 * 4 * c["C_block"] / (k + 8), rel=1e-12)
    assert rates.gap_bound("BCFW", k, 4, c) == pytest.approx(6 * 4 * c["C_block"] / (k + 1), rel=1e-12)
    fw = rates.gap_bound("FW", k, 4, c)
    assert math.isnan(fw[0]) and fw[1] == pytest.approx(6 * c["C_f"] / 5, rel=1e-12)
    # p x bound stays below its constant: the "bound constant" of the table is a limit
    p = np.arange(1.0, 200.0)
    assert np.all(p * rates.gap_bound("BCFW", p * 4, 4, c) < c["gap_block"])
    assert np.all(p * rates.dual_bound("FW", p, 4, c) < c["dual_batch"])


def test_the_verdict_sees_a_curve_above_the_bound():
    c = rates.theorem_constants(1.0, 1.0, 2, 0.0)          # gap bound 6 * 2 * 2 / (K + 1)
    p = np.arange(0.0, 6.0)
    under = rates.dual_verdict("BCFW", p, 2, np.full((2, 6), 0.1), np.zeros((2, 6)), (0.0, 0.0), c)
    assert under["gap"]["under_bound"] and under["dual_subopt"]["under_bound"]
    over = rates.dual_verdict("BCFW", p, 2, np.full((2, 6), 100.0), np.full((2, 6), -100.0), (0.0, 0.0), c)
    assert not over["gap"]["under_bound"] and not over["dual_subopt"]["under_bound"]
    assert over["gap"]["max_min_gap_over_bound"] > 1


def test_tail_slope_reads_the_rate():
    p = np.arange(1.0, 101.0)
    assert rates.tail_slope(p, p * (3.0 / p)) == pytest.approx(0.0, abs=1e-9)       # O(1/k): flat
    assert rates.tail_slope(p, p * (3.0 / np.sqrt(p))) == pytest.approx(0.5, rel=1e-6)
    assert rates.flat_or_falling(0.5) == "rising" and rates.flat_or_falling(-0.2) == "flat or falling"
    assert math.isnan(rates.tail_slope(p[:2], p[:2]))


@pytest.mark.parametrize("kwargs,needle", [
    (dict(n=1), "n must be"), (dict(passes=1), "passes must be"), (dict(seeds=0), "seeds must be"),
    (dict(solvers=["BCFW", "nope"]), "solvers"), (dict(lams=()), "lams"),
])
def test_bad_arguments_are_clear_errors(kwargs, needle, tmp_path):
    with pytest.raises(ValueError, match=needle):
        rates.run_rates(out=tmp_path, **kwargs)


def test_bad_inputs_of_the_helpers():
    with pytest.raises(ValueError, match="lam"):
        rates.theorem_constants(1.0, 0.0, 3, 0.0)
    with pytest.raises(ValueError, match="n must be"):
        rates.theorem_constants(1.0, 0.1, 0, 0.0)
    with pytest.raises(TypeError, match="ChainModel"):
        rates.chain_psi_norm_bounds([np.zeros(2)], [0], MulticlassModel(n_classes=2, n_features=2))
    with pytest.raises(ValueError, match="same length"):
        rates.chain_psi_norm_bounds([np.zeros((2, 2))], [], ChainModel(n_states=2, n_features=2))
    res = CliRunner().invoke(main, ["bench", "rates", "--lams", "0.01,-1"])
    assert res.exit_code == 2 and "--lams" in res.output
