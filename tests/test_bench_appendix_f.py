"""App. F of the BCFW paper (Figures 3-5) in `structfw bench fig1 --appendix-f`: the averaged
variants run, several lams give one column of panels each and one JSON entry each, --lams errors
are usage errors naming the option, --seeds 10 runs at a tiny size, and SSG's averagings are the
paper's definitions computed by hand on the enumerable toy (tests/toy.py)."""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

import structfw as sf  # noqa: E402
from structfw_bench.fig1 import (APPF_SOLVERS, APPF_VARIANTS, DATASETS, FIG1_SOLVERS, bench_fig1,  # noqa: E402
                                 check_solvers, make_fig1_solver, parse_lam_specs, run_fig1, table_passes)
from structfw.solvers import SSG  # noqa: E402
from toy import make_toy  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
QUIET = dict(log=lambda *_: None)


def _png_width(path):
    import matplotlib.image

    return matplotlib.image.imread(str(path)).shape[1]


# ---- the variants and the figure's defaults

def test_appendix_f_defaults_and_labels():
    assert set(APPF_VARIANTS) <= set(APPF_SOLVERS)
    assert check_solvers("ocr", None, appendix_f=True) == APPF_SOLVERS
    # online-EG only on OCR (App. F: "not included in the comparison for the other datasets")
    assert "online-EG" not in check_solvers("conll", None, appendix_f=True)
    assert DATASETS["ocr"]["appf"]["lams"] == ("0.01", "0.001", "1/n")
    # Figure 1's defaults are unchanged
    assert check_solvers("ocr", None) == FIG1_SOLVERS
    labels = {name: make_fig1_solver(name).label for name in APPF_SOLVERS}
    assert labels["SSG-avg"] == "SSG-avg" and labels["SSG-tavg"] == "SSG-tavg"
    assert labels["BCFW-tavg"] == "BCFW-tavg" and labels["BCFW-wavg"] == "BCFW-wavg"
    assert make_fig1_solver("SSG-avg").averaging == "uniform"
    assert make_fig1_solver("SSG-tavg").averaging == "suffix"
    assert make_fig1_solver("BCFW-tavg").averaging == "suffix"


def test_appendix_f_variants_need_the_flag():
    with pytest.raises(ValueError, match="appendix-f"):
        check_solvers("ocr", ["BCFW-tavg"])
    with pytest.raises(ValueError, match="stochastic"):
        check_solvers("ocr", ["FW"], appendix_f=True)
    with pytest.raises(ValueError, match="expectation oracle"):
        check_solvers("matching", ["online-EG"], appendix_f=True)


def test_appendix_f_runs_one_panel_per_lam(tmp_path):
    doc = run_fig1("0.01,1/n", passes=2, seeds=2, out=tmp_path, subsample=30, ref_passes=2, appendix_f=True,
                   **QUIET)
    disk = json.loads((tmp_path / "appf_ocr.json").read_text())  # strict JSON: no NaN
    assert (tmp_path / "appf_ocr.png").read_bytes()[:8] == PNG
    assert not (tmp_path / "fig1.json").exists()
    assert disk["appendix_f"] and disk["figure"] == "App. F" and disk["panels"] == "Fig. 3"
    assert list(disk["lams"]) == ["0.01", "1/n"]
    assert disk["lams"]["1/n"]["lam"] == pytest.approx(1 / 30)
    # one column of panels per lam (figsize 4.6 in x 90 dpi per column)
    assert _png_width(tmp_path / "appf_ocr.png") == round(4.6 * 90 * 2)
    for e in disk["lams"].values():
        assert list(e["solvers"]) == list(APPF_SOLVERS) == list(e["table"])
        assert list(e["table"]["BCFW"]) == ["subopt@1", "subopt@2", "test_error_final"]
        for name, s in e["solvers"].items():
            assert s["n_runs"] == 2 and s["label"] == name
            start = 1 if name == "online-EG" else 0  # its start costs a pass of expectations
            med = s["primal_subopt"]["median"][start:]
            assert len(s["primal_subopt"]["median"]) == 3
            assert all(v is not None and np.isfinite(v) and v > 0 for v in med), (name, med)
            for r in s["runs"]:
                assert min(r["primal"]) >= e["pstar"] - 1e-9  # P* is a dual value
        # SSG-avg is an average, not the last iterate: same start (w = 0), another end
        ssg, avg = e["solvers"]["SSG"]["runs"][0]["primal"], e["solvers"]["SSG-avg"]["runs"][0]["primal"]
        assert ssg[0] == pytest.approx(avg[0]) and ssg[-1] != pytest.approx(avg[-1])
    assert doc["lams"]["0.01"]["table"] == disk["lams"]["0.01"]["table"]


def test_three_lams_three_columns(tmp_path):
    run_fig1(["0.01", "0.001", "2/n"], passes=1, seeds=1, out=tmp_path, subsample=20, ref_passes=0,
             solvers=["BCFW-tavg", "SSG-tavg"], appendix_f=True, **QUIET)
    disk = json.loads((tmp_path / "appf_ocr.json").read_text())
    assert list(disk["lams"]) == ["0.01", "0.001", "2/n"]
    assert _png_width(tmp_path / "appf_ocr.png") == round(4.6 * 90 * 3)


def test_ten_seeds_at_a_tiny_size(tmp_path):
    doc = run_fig1(["0.01"], passes=1, seeds=10, out=tmp_path, subsample=20, ref_passes=0,
                   solvers=["BCFW-wavg", "SSG-tavg"], appendix_f=True, **QUIET)
    for s in doc["lams"]["0.01"]["solvers"].values():
        assert s["n_runs"] == 10 and [r["seed"] for r in s["runs"]] == list(range(10))
        finals = {round(r["primal"][-1], 12) for r in s["runs"]}
        assert len(finals) > 1  # the seeds draw different blocks
    assert doc["seeds"] == 10


def test_table_passes():
    assert table_passes(30) == (1, 5, 10, 30)
    assert table_passes(10) == (1, 5, 10)
    assert table_passes(12) == (1, 5, 10, 12)
    assert table_passes(1) == (1,)


# ---- --lams

def test_parse_lam_specs():
    assert parse_lam_specs("0.01,0.001,1/n") == ("0.01", "0.001", "1/n")
    assert parse_lam_specs(" 0.01 , 2/n ") == ("0.01", "2/n")
    assert parse_lam_specs(["1e-3", 0.5]) == ("1e-3", "0.5")
    for bad, needle in [("0.01,,1/n", "empty"), ("abc", "not a number"), ("-1", "positive"), ("0", "positive"),
                        ("inf", "positive"), ("nan", "positive"), ("0/n", "positive"), ("x/n", "not a number"),
                        ("0.01,0.01", "twice")]:
        with pytest.raises(ValueError, match=needle) as info:
            parse_lam_specs(bad)
        assert str(info.value).startswith("lams: ")
    with pytest.raises(ValueError, match="^lams: "):
        run_fig1("0.01,oops", passes=1, seeds=1, out="never-written", appendix_f=True, **QUIET)


@pytest.mark.parametrize("args,option,needle", [
    (["--lams", "0.01,,1/n"], "--lams", "empty lam"),
    (["--lams", "abc"], "--lams", "'abc'"),
    (["--lams", "0.01,-1"], "--lams", "'-1'"),
    (["--lams", "0/n"], "--lams", "'0/n'"),
    (["--lams", "nan"], "--lams", "positive"),
    (["--lam", "zero"], "--lam", "'zero'"),
    (["--lam", "0.01", "--lams", "0.001,0.01"], "--lams", "twice"),
    (["--solver", "SSG-avg"], "--solver", "--appendix-f"),
    (["--appendix-f", "--solver", "cutting-plane"], "--solver", "stochastic"),
])
def test_cli_usage_errors_name_the_option(tmp_path, args, option, needle):
    res = CliRunner().invoke(bench_fig1, args + ["--passes", "1", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2, res.output  # click's UsageError
    assert f"'{option}" in res.output and needle in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "x").exists()


def test_cli_appendix_f_with_lams(tmp_path):
    res = CliRunner().invoke(bench_fig1, ["--appendix-f", "--lams", "0.01,1/n", "--passes", "1", "--seeds", "2",
                                          "--subsample", "20", "--ref-passes", "0", "--solver", "BCFW-tavg",
                                          "--solver", "SSG-avg", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "ocr: lam = 0.01" in res.output and "ocr: lam = 1/n" in res.output and "SSG-avg" in res.output
    disk = json.loads((tmp_path / "appf_ocr.json").read_text())
    assert list(disk["lams"]) == ["0.01", "1/n"] and disk["seeds"] == 2
    assert list(disk["lams"]["1/n"]["solvers"]) == ["BCFW-tavg", "SSG-avg"]


# ---- SSG's averagings against their definitions, by hand

def _ssg_iterates(model, X, Y, lam, passes, seed):
    """SSG by hand: uniform draws (rng.integers per pass, as the solver draws them), step
    w <- (1 - 1/(k+1)) w + psi_i(y*) / (lam (k+1)); returns [w_1, ..., w_T]."""
    rng = np.random.default_rng(seed)
    n = len(X)
    w = np.zeros(model.size_joint_feature)
    ws, k = [], 0
    for _ in range(passes):
        for i in rng.integers(0, n, n):
            y = model.loss_augmented_decode(X[i], Y[i], w)
            gamma = 1.0 / (k + 1.0)
            w = (1.0 - gamma) * w + gamma * model.psi(X[i], Y[i], y) / lam
            ws.append(w)
            k += 1
    return ws


def _by_definition(ws, averaging):
    T = len(ws)
    W = np.array(ws)
    t = np.arange(1, T + 1)
    if averaging is None:
        return W[-1]
    if averaging == "uniform":  # SSG-avg: 1/T sum_{t=1..T} w_t (App. F: "starts averaging at the beginning")
        return W.mean(axis=0)
    if averaging == "weighted":  # eq. (14): 2/(T(T+1)) sum_t t w_t
        return 2.0 / (T * (T + 1.0)) * (t[:, None] * W).sum(axis=0)
    if averaging == "suffix":  # doubling trick: uniform over t = 2^floor(log2 T), ..., T
        start = 2 ** int(math.floor(math.log2(T)))
        return W[start - 1:].mean(axis=0)
    raise AssertionError(averaging)


@pytest.mark.parametrize("passes", [3, 4])
@pytest.mark.parametrize("averaging", [None, "uniform", "weighted", "suffix"])
def test_ssg_averaging_matches_its_definition(averaging, passes):
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    lam, seed = 0.5, 7
    svm = sf.StructuredSVM(model, solver=SSG(averaging=averaging), lam=lam, max_passes=passes, tol=None,
                           check_every=1, random_state=seed).fit(X, Y)
    ws = _ssg_iterates(model, X, Y, lam, passes, seed)
    assert len(ws) == 5 * passes
    expected = _by_definition(ws, averaging)
    np.testing.assert_allclose(svm.coef_, expected, rtol=1e-9, atol=1e-12)
    if averaging is not None:  # an average, not the last iterate
        assert not np.allclose(expected, ws[-1])


def test_ssg_tavg_is_the_half_suffix_average_15_at_the_end_of_a_round():
    """At T = 2^j - 1 the doubling trick's average is eq. (15) with beta = 0.5: the uniform average
    of w_t for t = ceil(T/2), ..., T."""
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    lam, passes = 0.5, 3  # T = 15 = 2^4 - 1
    svm = sf.StructuredSVM(model, solver=SSG(averaging="suffix"), lam=lam, max_passes=passes, tol=None,
                           random_state=3).fit(X, Y)
    ws = np.array(_ssg_iterates(model, X, Y, lam, passes, 3))
    T = len(ws)
    np.testing.assert_allclose(svm.coef_, ws[math.ceil(0.5 * T) - 1:].mean(axis=0), rtol=1e-9, atol=1e-12)
