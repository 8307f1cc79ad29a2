"""`structfw bench tagger`: structfw's tagger against sklearn-crfsuite at a tiny size, its
schedule, its memory measurement and its CLI."""
import json
import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from structfw_bench import tagger
from structfw.cli import main

# 60 OCR words: n d 8 bytes is over the engine's dense-row budget, so the fit stays small and fast
TINY = ["--tasks", "ocr", "--max-train", "60", "--max-test", "20", "--pairs", "1", "--max-passes", "5",
        "--crf-iterations", "10", "--configs", "structfw,crf", "--no-cold"]
RUN_KEYS = {"fit_wall_s", "fit_cpu_s", "predict_s", "baseline_rss_mb", "peak_rss_mb", "fit_memory_mb",
            "token_accuracy", "sequence_accuracy", "span_f1", "n_train", "n_test", "memory_source",
            "kernels_compiled", "pair", "cache"}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    pytest.importorskip("sklearn_crfsuite")
    out = tmp_path_factory.mktemp("tagger")
    res = CliRunner().invoke(main, ["bench", "tagger", *TINY, "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output, json.loads((out / "tagger.json").read_text()), out


@pytest.mark.slow  # 75 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_the_bench_writes_both_taggers_with_sane_numbers(tiny_run):
    output, doc, out = tiny_run
    assert set(doc["tasks"]) == {"ocr"} and set(doc["configs"]) == {"structfw", "crf"}
    t = doc["tasks"]["ocr"]
    assert (t["n_train"], t["n_test"]) == (60, 20) and t["cold"] == {}
    assert [(r["config"], r["pair"]) for r in t["runs"]] == [("structfw", 0), ("crf", 0)]
    for r in t["runs"]:
        assert RUN_KEYS <= set(r), r["config"]
        assert 0 <= r["token_accuracy"] <= 1 and 0 <= r["sequence_accuracy"] <= r["token_accuracy"] + 1e-12
        assert r["span_f1"] is None  # letters are not IOB tags
        assert r["fit_wall_s"] > 0 and r["fit_cpu_s"] >= 0 and r["predict_s"] > 0
        assert r["baseline_rss_mb"] > 0 and r["peak_rss_mb"] >= r["baseline_rss_mb"] - 1e-9
        assert math.isclose(r["fit_memory_mb"], r["peak_rss_mb"] - r["baseline_rss_mb"], rel_tol=1e-9,
                            abs_tol=1e-9)
    sf = t["runs"][0]
    assert sf["fit_memory_mb"] > 0 and sf["passes"] <= 5 + 1e-9
    (pair,) = t["pairs"]
    assert pair["config"] == "structfw" and math.isfinite(pair["time_ratio"]) and pair["time_ratio"] > 0
    assert pair["memory_ratio"] is None or math.isfinite(pair["memory_ratio"])
    assert math.isclose(pair["accuracy_diff"], sf["token_accuracy"] - t["runs"][1]["token_accuracy"], abs_tol=1e-12)
    v = t["verdicts"]["structfw"]
    assert v["time_met"] == (v["time_ratio"] <= 0.5) and v["accuracy_met"] == (v["accuracy_diff"] >= 0)
    assert (out / "tagger.png").stat().st_size > 1000
    assert "structfw vs crf" in output and "wrote" in output


def test_the_schedule_alternates_structfw_and_crf():
    assert tagger.schedule(("structfw", "structfw-auto", "crf"), 2) == [
        (0, "structfw"), (0, "crf"), (0, "structfw-auto"), (0, "crf"),
        (1, "structfw"), (1, "crf"), (1, "structfw-auto"), (1, "crf")]
    assert tagger.schedule(("crf",), 2) == [(0, "crf"), (1, "crf")]
    assert tagger.schedule(("structfw",), 2) == [(0, "structfw"), (1, "structfw")]


def _fake(config, pair, wall, mem, acc):
    return dict(config=config, pair=pair, fit_wall_s=wall, fit_cpu_s=wall, fit_memory_mb=mem, token_accuracy=acc)


def test_pairs_compare_each_structfw_run_with_the_crf_run_after_it():
    runs = [_fake("structfw", 0, 1.0, 10.0, 0.9), _fake("crf", 0, 4.0, 20.0, 0.8),
            _fake("structfw-auto", 0, 8.0, 40.0, 0.7), _fake("crf", 0, 2.0, 0.0, 0.75)]
    a, b = tagger.pair_ratios(runs)
    assert (a["config"], a["time_ratio"], a["memory_ratio"]) == ("structfw", 0.25, 0.5)
    assert math.isclose(a["accuracy_diff"], 0.1, rel_tol=1e-9)
    assert (b["config"], b["time_ratio"], b["memory_ratio"]) == ("structfw-auto", 4.0, None)  # no memory to divide by
    summary = {c: tagger.summarise([r for r in runs if r["config"] == c]) for c in ("structfw", "structfw-auto", "crf")}
    v = tagger.verdicts(summary, [a, b])
    assert (v["structfw"]["time_met"], v["structfw"]["accuracy_met"], v["structfw"]["memory_met"]) == (True, True, True)
    assert (v["structfw-auto"]["time_met"], v["structfw-auto"]["accuracy_met"]) == (False, False)


def test_cold_runs_get_empty_caches_and_warm_runs_the_filled_one(monkeypatch, tmp_path):
    """Each structfw configuration's first fit sees an empty cache folder of its own; its warm
    fits see that folder again, the CRF none of them."""
    seen = []

    def fake_child(spec, *, cache_dir, timeout=None):
        if cache_dir is not None:
            was_empty = not any(cache_dir.iterdir())
            (cache_dir / "kernel.nbi").write_text("x")  # what a compiling fit leaves
        else:
            was_empty = None
        seen.append((spec["config"], spec["seed"], cache_dir, was_empty))
        return dict(_fake(spec["config"], None, 1.0, 1.0, 0.5), task=spec["task"], n_train=3, n_test=1,
                    tokens_train=9, tokens_test=3, fit_cpu_s=1.0, predict_s=0.1, peak_rss_mb=2.0,
                    baseline_rss_mb=1.0, sequence_accuracy=0.0, span_f1=None, kernels_compiled=0,
                    package_stamp="s", memory_source="VmHWM")

    monkeypatch.setattr(tagger, "run_child", fake_child)
    t = tagger.run_task("ocr", configs=["structfw", "structfw-auto", "crf"], pairs=2, seed=5, max_train=3,
                        max_test=1, max_passes=None, crf_iterations=10, conll=None, timeout=None, cold=True,
                        log=lambda s: None)
    cold, warm = seen[:2], seen[2:]
    assert [(c, e) for c, _, _, e in cold] == [("structfw", True), ("structfw-auto", True)]
    assert cold[0][2] != cold[1][2]
    caches = {c: d for c, _, d, _ in cold}
    for config, seed, cache, was_empty in warm:
        if config == "crf":
            assert cache is None
        else:
            assert cache == caches[config] and was_empty is False
    assert [s for c, s, _, _ in warm if c == "structfw"] == [5, 6]  # pair p: random_state seed + p
    assert set(t["cold"]) == {"structfw", "structfw-auto"} and len(t["runs"]) == 8 and len(t["pairs"]) == 4
    assert all(r["cache"] == "cold" for r in t["cold"].values())
    assert t["kernels_compiled_in_warm_runs"] == {"structfw": 0, "structfw-auto": 0}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_the_peak_is_reset_to_the_current_resident_set():
    """After the reset the peak is this process's current size, not an earlier peak (nor a
    parent's), and it grows by what is touched afterwards."""
    big = np.ones(40 * 2 ** 20 // 8)  # 40 MB touched, then freed: an earlier peak
    del big
    if not tagger.reset_peak():
        pytest.skip("/proc/self/clear_refs is not writable here")
    rss, peak = tagger._status_bytes("VmRSS"), tagger.peak_bytes("VmHWM")
    assert peak <= rss + 8 * 2 ** 20  # within what the interpreter allocates between the two reads
    block = np.ones(32 * 2 ** 20 // 8)
    assert tagger.peak_bytes("VmHWM") - rss >= 30 * 2 ** 20
    del block


def test_ocr_letters_become_pixel_dicts_with_a_bias():
    word = np.zeros((2, 128))
    word[0, [3, 127]] = 1
    assert tagger.ocr_letter_dicts(word) == [{"bias": 1.0, "p3": 1.0, "p127": 1.0}, {"bias": 1.0}]


def test_the_corpus_task_is_iob_and_keeps_its_split():
    pytest.importorskip("hironsan")
    X, Y, Xt, Yt, is_iob = tagger.load_task("corpus")
    assert (len(X), len(Xt), is_iob) == (450, 50, True)
    assert all(tok["bias"] == 1.0 and "word" in tok for s in X[:5] for tok in s)
    X, Y, Xt, Yt, _ = tagger.load_task("corpus", max_train=7, max_test=3, seed=1)
    assert (len(X), len(Xt)) == (7, 3) and all(len(x) == len(y) for x, y in zip(X, Y))


def test_a_conll_file_is_split_90_10_in_file_order(tmp_path):
    path = tmp_path / "tiny.conll"
    path.write_text("\n\n".join(f"w{i} B-NP\nx{i} I-NP\n. O" for i in range(10)) + "\n")
    X, Y, Xt, Yt, is_iob = tagger.load_task("conll", conll=path)
    assert (len(X), len(Xt), is_iob) == (9, 1, True)
    assert Xt[0][0]["lower"] == "w9" and Xt[0][0]["next"] == "x9" and Xt[0][2]["next"] == "</s>"


def test_help_lists_the_options():
    res = CliRunner().invoke(main, ["bench", "tagger", "--help"])
    assert res.exit_code == 0, res.output
    for flag in ("--tasks", "--conll", "--configs", "--pairs", "--max-train", "--max-test", "--max-passes",
                 "--crf-iterations", "--no-cold", "--out"):
        assert flag in res.output
    assert "tagger" in CliRunner().invoke(main, ["bench", "--help"]).output


@pytest.mark.parametrize("args,needle", [(["--configs", "structfw,svm"], "--configs"), (["--pairs", "0"], "--pairs"),
                                         (["--tasks", "ocr,pos"], "--tasks"), (["--tasks", ""], "--tasks"),
                                         (["--max-train", "-1"], "--max-train"),
                                         (["--conll", "/no/such/file.conll"], "--conll")])
def test_bad_options_are_usage_errors_naming_the_flag(args, needle):
    res = CliRunner().invoke(main, ["bench", "tagger", *args])
    assert res.exit_code == 2 and needle in res.output, res.output
