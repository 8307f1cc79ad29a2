"""What a newcomer sees: the compile notice, Ctrl-C in the CLI, stop reasons, gaps without a dual,
plot axes, warm starts from a file without state, and the warning before a large kernelized fit."""
import os
import select
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import structfw as sf
from structfw import _compile
from structfw.cli import main
from structfw.cli._common import format_gap, stop_message
from structfw.solvers.kernel_bcfw import (LARGE_FIT_BYTES, LargeFitWarning, estimate_fit_size, fit_shape,
                                          warn_if_large)

NOTICE = "compiling numba kernels"


# ------------------------------------------------------------------ the compile notice
TINY_FIT = ("import numpy as np, structfw as sf\n"
            "rng = np.random.default_rng(0)\n"
            "X = list(rng.normal(size=(12, 3))); Y = [int(v) for v in rng.integers(0, 3, 12)]\n"
            "sf.StructuredSVM(sf.models.MulticlassModel(3, 3), lam=0.1, max_passes=2, tol=None,\n"
            "                 random_state=0).fit(X, Y)\n"
            "print('fitted')\n")


def _run_tiny_fit(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    env.pop("STRUCTFW_COMPILE_NOTICE", None)
    out = subprocess.run([sys.executable, "-c", TINY_FIT], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "fitted" in out.stdout
    return out.stderr


# slow: a fresh cache compiles the whole multiclass fit, 50-60 s on a 2-core machine; the default suite
# keeps the notice's logic (below) and the cold-cache check on a fresh cache (test_cli_strict.py)
@pytest.mark.slow
def test_a_cold_cache_is_announced_once_and_a_warm_one_not_at_all(tmp_path):
    """A plain fit (verbose=0) on a fresh numba cache says it compiles, once; the same fit again,
    now on the warm cache, says nothing."""
    cold = _run_tiny_fit(tmp_path / "nbcache")
    assert cold.count(NOTICE) == 1, cold
    warm = _run_tiny_fit(tmp_path / "nbcache")
    assert NOTICE not in warm, warm


def test_the_notice_is_printed_once_per_process_and_can_be_silenced(monkeypatch, capsys):
    monkeypatch.setattr(_compile, "_announced", False)
    monkeypatch.delenv("STRUCTFW_COMPILE_NOTICE", raising=False)
    assert _compile.announce("the kernel SVM") is True
    assert _compile.announce() is False
    err = capsys.readouterr().err
    assert err.count(NOTICE) == 1 and "for the kernel SVM" in err and "structfw warmup" in err
    monkeypatch.setattr(_compile, "_announced", False)
    monkeypatch.setenv("STRUCTFW_COMPILE_NOTICE", "0")
    assert _compile.announce() is False
    assert capsys.readouterr().err == ""


def test_the_notice_is_written_above_an_active_progress_bar(monkeypatch):
    written = []

    class Bar:
        def write(self, msg, file=None):
            written.append(msg)

    monkeypatch.setattr(_compile, "_announced", False)
    monkeypatch.delenv("STRUCTFW_COMPILE_NOTICE", raising=False)
    monkeypatch.setattr(_compile, "active_bar", Bar())
    _compile.announce()
    assert len(written) == 1 and NOTICE in written[0]


# ------------------------------------------------------------------ Ctrl-C in the CLI
def _interrupt_train(tmp_path, *extra):
    """Start ``structfw train`` on OCR, send SIGINT once its progress bar is drawn (inside the fit),
    and return (return code, stdout, stderr)."""
    cmd = [sys.executable, "-m", "structfw.cli", "train", "--data", "ocr", "--passes", "1000", "--tol", "0",
           "--check-every", "1", *extra]
    # a background shell may hand its children SIGINT ignored: restore the default disposition
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = b""
    try:
        deadline = time.monotonic() + 900  # a guard against a hang, not a timing assertion
        while b"passes" not in err:
            assert proc.poll() is None, err.decode(errors="replace")
            assert time.monotonic() < deadline, "no progress output"
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                err += os.read(proc.stderr.fileno(), 4096)
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out.decode(), (err + rest).decode(errors="replace")


def test_ctrl_c_saves_the_model_says_so_and_exits_130(tmp_path):
    code, out, err = _interrupt_train(tmp_path, "--save", str(tmp_path / "m"))
    assert code == 130, out + err
    assert f"stopped: interrupted (model saved to {tmp_path / 'm.npz'})" in out, out
    assert "stopped by" not in out
    svm = sf.load(tmp_path / "m.npz")
    assert svm.stopped_ == "interrupted" and np.isfinite(svm.coef_).all()


def test_ctrl_c_without_save_names_the_option_and_exits_130(tmp_path):
    code, out, err = _interrupt_train(tmp_path, "--seed", "1")
    assert code == 130, out + err
    assert "stopped: interrupted (not saved: pass --save PATH)" in out, out


def test_stop_messages_are_readable():
    assert stop_message("max_passes") == "stopped: max_passes (--passes done)"
    assert stop_message("tol") == "stopped: tol (the duality gap reached --tol)"
    assert stop_message("time_budget") == "stopped: time_budget (--time-budget used up)"
    assert stop_message("interrupted", "m.npz") == "stopped: interrupted (model saved to m.npz)"
    assert stop_message("interrupted", save_hint=None) == "stopped: interrupted"


# ------------------------------------------------------------------ no dual, no gap
def _svmlight(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 60)
    X = rng.normal(size=(60, 4)) + 3 * np.eye(3, 4)[y]
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    return path


def test_ssg_prints_a_dash_for_its_gap(tmp_path):
    res = CliRunner().invoke(main, ["train", "--data", str(_svmlight(tmp_path)), "--solver", "ssg", "--passes", "3",
                                    "--check-every", "1", "--quiet"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "nan" not in res.output.lower()
    rows = [line.split() for line in res.output.splitlines() if line[:7].strip().replace(".", "").isdigit()]
    assert rows and all(r[2] == "-" for r in rows), res.output
    assert "gap -" in res.output and "stopped: max_passes" in res.output
    assert format_gap(float("nan"), 11) == " " * 10 + "-"
    assert format_gap(0.5) == "5.0000e-01"


def test_a_solver_with_a_dual_prints_its_gap(tmp_path):
    res = CliRunner().invoke(main, ["train", "--data", str(_svmlight(tmp_path)), "--solver", "online-eg",
                                    "--passes", "2", "--check-every", "1", "--quiet"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "gap -" not in res.output and "nan" not in res.output.lower()


# ------------------------------------------------------------------ plots
def test_the_plot_axis_is_effective_passes_and_covers_every_checkpoint():
    pytest.importorskip("matplotlib")
    from structfw.plotting import plot_convergence
    from structfw.trace import Trace

    tr = Trace({"solver": "BCFW-cache"})
    # the cache: 30 solver passes took 11 passes' worth of oracle calls
    for eng, eff in ((0, 0), (10, 4), (20, 8), (30, 11)):
        tr.append(passes=eff, engine_passes=eng, oracle_calls=eff * 10, time_s=eng, primal=1.0 / (1 + eng),
                  dual=0.0, gap=1.0 / (1 + eng))
    fig = plot_convergence(tr)
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("effective passes (oracle calls / n)")
    assert "solver pass 30" in ax.get_xlabel()
    lo, hi = ax.get_xlim()
    assert lo <= 0 and hi >= 11
    assert len(ax.lines[0].get_xdata()) == 4 and ax.lines[0].get_marker() == "o"
    fig = plot_convergence(tr, x="engine_passes")
    assert fig.axes[0].get_xlabel() == "solver passes" and fig.axes[0].get_xlim()[1] >= 30


# ------------------------------------------------------------------ warm starts
def _multiclass_data():
    rng = np.random.default_rng(0)
    X = list(rng.normal(size=(30, 3)))
    Y = [int(v) for v in rng.integers(0, 3, 30)]
    return X, Y, sf.models.MulticlassModel(3, 3)


def test_warm_start_from_a_file_without_state_warns_and_restarts_from_zero(tmp_path):
    X, Y, model = _multiclass_data()
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, tol=None, check_every=1, random_state=0).fit(X, Y)
    loaded = sf.load(svm.save(tmp_path / "m"))
    loaded.set_params(warm_start=True)
    with pytest.warns(RuntimeWarning, match=r"no solver state.*starts afresh from w = 0.*state=True"):
        loaded.fit(X, Y)
    assert loaded.trace_["gap"][0] == pytest.approx(1.0)  # w = 0: P(0) = 1, D = 0
    assert loaded.trace_["passes"][0] == 0.0 and "resumed_from" not in loaded.trace_.meta
    with_state = sf.load(svm.save(tmp_path / "s", state=True))
    with_state.set_params(warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with_state.fit(X, Y)


def test_a_resumed_trace_continues_the_pass_count_and_time():
    X, Y, model = _multiclass_data()
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, tol=None, check_every=1, random_state=0,
                           warm_start=True).fit(X, Y)
    first = svm.trace_
    svm.fit(X, Y)
    second = svm.trace_
    for col in ("passes", "engine_passes", "oracle_calls"):
        np.testing.assert_allclose(second[col], first[col][-1] + np.arange(4.0) * (first[col][1] - first[col][0]))
    assert second["time_s"][0] >= first["time_s"][-1]
    assert second.meta["resumed_from"]["passes"] == first["passes"][-1]
    assert svm.n_iter_ == 6  # the run's passes, as its trace counts them
    assert svm.n_iter_ - second.meta["resumed_from"]["engine_passes"] == 3  # this fit's
    once = sf.StructuredSVM(model, lam=0.1, max_passes=6, tol=None, check_every=1, random_state=0).fit(X, Y)
    np.testing.assert_allclose(second["passes"], once.trace_["passes"][3:])


# ------------------------------------------------------------------ a large kernelized fit
def test_the_size_estimate_on_small_inputs():
    est = estimate_fit_size(100, 5, 3, 20)  # factored w_i: a row of label weights per position
    assert est["rank"] == 100 and est["gram_bytes"] == 8 * 100 * 100 and est["coords_bytes"] == 8 * 100 * 100
    assert est["rows_bytes"] == 8 * (100 * 3 + 20 * 9)
    rows = estimate_fit_size(100, 5, 3, 20, rows=True)
    assert rows["rows_bytes"] == 8 * 20 * (100 * 3 + 9)
    assert rows["memory_bytes"] == max(2 * 8 * 100 * 100, 2 * 8 * 100 * 100 + 8 * 20 * (100 * 3 + 9))
    assert est["flops_per_pass"] == rows["flops_per_pass"] == 100 * 100 * 3
    capped = estimate_fit_size(100, 5, 3, 20, kernel_rank=10, n_edges=False, rows=True)
    assert capped["gram_bytes"] == 0.0 and capped["coords_bytes"] == 8 * 100 * 10
    assert capped["rows_bytes"] == 8 * 20 * 10 * 3 and capped["flops_per_pass"] == 100 * 10 * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_large(100, 5, 3, 20) is None


def test_an_ocr_sized_kernel_fit_is_announced_without_running_it():
    X, Y = sf.datasets.load_ocr("train")
    model = sf.models.ChainModel(26, 128)
    N, F, K, n, chain = fit_shape(model, X)
    assert (F, K, n, chain) == (128, 26, len(X), True) and N == sum(len(y) for y in Y)
    est = estimate_fit_size(N, F, K, n)
    assert est["memory_bytes"] > LARGE_FIT_BYTES
    with pytest.warns(LargeFitWarning, match=r"GB.*kernel_rank.*subsample.*linear BCFW"):
        warn_if_large(N, F, K, n)


def test_the_cli_warns_before_a_large_kernel_fit(monkeypatch):
    def no_fit(svm, *a, **k):
        raise SystemExit(3)  # the warning comes first; the fit itself is not what this test is about

    monkeypatch.setattr(sf.StructuredSVM, "fit", no_fit)
    res = CliRunner().invoke(main, ["train", "--data", "ocr", "--solver", "kernel-bcfw", "--passes", "1", "--quiet"])
    assert res.exit_code == 3
    assert "Warning: kernel-bcfw on" in res.output and "GB" in res.output
