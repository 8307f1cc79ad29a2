"""The command line is strict and safe: options that do not apply are usage errors naming them,
data errors are one line naming the file, outputs are checked before training, the model is
written first and every output independently; ``structfw --help`` imports nothing heavy."""
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from structfw.cli import COMMANDS, main
from structfw_bench import COMMANDS as BENCH_COMMANDS

QUICK = ["--passes", "1", "--quiet"]


def invoke(args):
    return CliRunner().invoke(main, args)


def assert_clean_error(res, *needles, code=2):
    """Exit code, no traceback, every needle in the one-line message."""
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in res.output, (needle, res.output)


@pytest.fixture
def svmlight_file(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 60)
    X = rng.normal(size=(60, 4)) + 3 * np.eye(3, 4)[y]
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    return path


# --------------------------------------------------------------------------- --help is light
def test_top_level_help_imports_neither_sklearn_nor_numba():
    code = ("import sys; from structfw.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('sklearn', 'numba', 'structfw.solvers', 'structfw.estimator') if m in sys.modules]\n"
            "print('HEAVY', bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout
    for name in COMMANDS:
        assert name in out.stdout


@pytest.mark.parametrize("group,registry", [([], COMMANDS), (["bench"], BENCH_COMMANDS)])
def test_registered_commands_resolve_and_their_listed_help_matches(group, registry):
    for name, (_, _, short) in registry.items():
        res = invoke(group + [name, "--help"])
        assert res.exit_code == 0, res.output
        # the listing's line and the command's own docstring start alike (a command registered
        # under the wrong name, or a listing that drifted away from its command, fails here)
        docstring = " ".join(res.output.split("\n\n", 1)[1].split())
        assert docstring.split()[:2] == short.split()[:2], (name, short, docstring[:80])


# --------------------------------------------------------------------------- inapplicable options
@pytest.mark.parametrize("args,needles", [
    (["--solver", "fw", "--cache"], ["--cache", "fw"]),
    (["--solver", "fw", "--sampling", "gap"], ["--sampling", "fw"]),
    (["--solver", "ssg", "--step", "pairwise"], ["--step", "ssg"]),
    (["--solver", "cutting-plane", "--averaging", "weighted"], ["--averaging", "cutting-plane"]),
    (["--solver", "online-eg", "--gap-refresh", "3"], ["--gap-refresh", "online-eg"]),
    (["--solver", "bcfw", "--eta", "0.5"], ["--eta", "bcfw"]),
    (["--solver", "fw", "--cache", "--step", "away"], ["--cache", "--step"]),
])
def test_options_of_another_solver_are_usage_errors(args, needles):
    assert_clean_error(invoke(["train"] + QUICK + args), *needles)


@pytest.mark.parametrize("args,needles", [
    (["--solver", "ssg", "--averaging", "suffix", "--sampling", "gap"], ["--sampling", "gap"]),
    (["--cache-size", "1"], ["--cache-size", "cache_size"]),
    (["--gap-refresh", "0"], ["--gap-refresh"]),
    (["--lam", "-1"], ["--lam", "lam"]),
    (["--passes", "0"], ["--passes"]),
    (["--check-every", "zero"], ["--check-every"]),
    (["--check-every", "0"], ["--check-every"]),
    (["--executor", "thread"], ["--executor", "--n-jobs"]),
    (["--n-jobs", "0"], ["--n-jobs"]),
    (["--save-state"], ["--save-state", "--save"]),
])
def test_bad_option_values_are_usage_errors(args, needles):
    assert_clean_error(invoke(["train"] + QUICK + args), *needles)


@pytest.mark.parametrize("model", ["grid", "chain", "potts"])
def test_a_model_that_does_not_fit_the_data_is_an_error(svmlight_file, model):
    assert_clean_error(invoke(["train", "--data", str(svmlight_file), "--model", model] + QUICK),
                       "--model", model, "multiclass")


def test_multiclass_model_on_ocr_is_an_error():
    assert_clean_error(invoke(["train", "--data", "ocr", "--model", "multiclass"] + QUICK), "--model", "chain")


# --------------------------------------------------------------------------- data errors
def _write(path, content, mode="w"):
    with open(path, mode) as f:
        f.write(content)
    return path


@pytest.mark.parametrize("kind,needle", [
    ("missing", "no such file"),
    ("directory", "is a directory"),
    ("empty", "is empty"),
    ("malformed", "not an svmlight"),
    ("binary", "not an svmlight"),
    ("one_class", "single class"),
    ("too_few", "at least 5"),
    ("nonfinite", "non-finite"),
])
def test_data_errors_are_one_line_naming_the_file(tmp_path, kind, needle):
    path = tmp_path / f"{kind}.svm"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        _write(path, "")
    elif kind == "malformed":
        _write(path, "1 3:abc 4:1\n0 1:2\n")
    elif kind == "binary":
        _write(path, bytes(range(256)) * 4, "wb")
    elif kind == "one_class":
        _write(path, "".join(f"1 1:{i} 2:{i * 2}\n" for i in range(10)))
    elif kind == "too_few":
        _write(path, "1 1:1\n0 1:2\n1 1:3\n")
    elif kind == "nonfinite":
        _write(path, "1 1:nan\n0 1:2\n1 1:3\n0 1:1\n1 1:5\n0 1:7\n")
    res = invoke(["train", "--data", str(path)] + QUICK)
    assert_clean_error(res, "--data", str(path), needle)
    assert len(res.output.strip().splitlines()) == 1


# --------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("option,name,needle", [
    ("--trace", "missing_dir/t.json", "does not exist"),
    ("--trace", "t.txt", ".json or .csv"),
    ("--trace", ".", "directory"),
    ("--plot", "p.pdf", ".png"),
    ("--save", "missing_dir/m.npz", "does not exist"),
])
def test_output_paths_are_checked_before_training(tmp_path, option, name, needle):
    res = invoke(["train", option, str(tmp_path / name)] + QUICK)
    assert_clean_error(res, option, needle)
    assert "stopped: " not in res.output  # nothing was trained


def test_model_is_saved_first_and_outputs_are_independent(tmp_path, svmlight_file, monkeypatch):
    from structfw.trace import Trace

    def broken_save(self, path):
        raise OSError("disk full")

    monkeypatch.setattr(Trace, "save", broken_save)
    res = invoke(["train", "--data", str(svmlight_file), "--save", str(tmp_path / "m"), "--trace",
                  str(tmp_path / "t.json"), "--plot", str(tmp_path / "p.png")] + QUICK)
    assert res.exit_code == 1
    assert "could not write the trace" in res.output and "disk full" in res.output
    assert (tmp_path / "m.npz").exists() and (tmp_path / "p.png").exists()
    import structfw as sf

    assert sf.load(tmp_path / "m.npz").coef_.shape == (12,)


def test_save_state_writes_a_resumable_model(tmp_path, svmlight_file):
    res = invoke(["train", "--data", str(svmlight_file), "--save", str(tmp_path / "m.npz"), "--save-state"] + QUICK)
    assert res.exit_code == 0, res.output
    import structfw as sf

    assert sf.load(tmp_path / "m.npz").state_.n == 48


# --------------------------------------------------------------------------- sparse data
def test_svmlight_data_stays_sparse_and_trains_in_bounded_memory(tmp_path):
    """Feature ids up to 10^6: densified, X alone would be n * 10^6 * 8 bytes (2.4 GB here)."""
    import tracemalloc

    rng = np.random.default_rng(1)
    n, width = 300, 1_000_000
    y = rng.integers(0, 2, n)
    lines = []
    for i in range(n):
        ids = np.sort(rng.choice(width - 10, 20, replace=False)) + 1
        ids[0] = 1 + y[i]  # an informative feature
        lines.append(f"{y[i]} " + " ".join(f"{j}:{1.0 if k == 0 else rng.normal():.3f}"
                                          for k, j in enumerate(ids)))
    path = _write(tmp_path / "wide.svm", "\n".join(lines) + f"\n0 {width}:0.5\n")
    tracemalloc.start()
    res = invoke(["train", "--data", str(path), "--passes", "3", "--quiet", "--lam", "0.1"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.exit_code == 0, res.output
    assert "test error" in res.output
    assert peak < 400e6, f"peak {peak / 1e6:.0f} MB"


# --------------------------------------------------------------------------- first run
def test_first_run_is_announced_above_the_progress_bar(monkeypatch):
    """numba compiles during a fit's first pass, after its progress bar is drawn: while the bar
    is up, the compile notice (:func:`structfw._compile.announce`) writes through it, above it;
    the bar is handed back when the fit ends.  (The notice itself: tests/test_cli_ux.py.)"""
    import structfw as sf
    from structfw import _compile
    from structfw.solvers import base

    X = [np.ones((3, 2)), np.zeros((2, 2))]
    Y = [np.array([0, 1, 0]), np.array([1, 1])]
    record, seen = base.Monitor.record, []

    def spy(self, *args, **kwargs):
        seen.append(self._bar is not None and _compile.active_bar is self._bar)
        return record(self, *args, **kwargs)

    monkeypatch.setattr(base.Monitor, "record", spy)
    sf.StructuredSVM(sf.models.ChainModel(2, 2), max_passes=1, verbose=1).fit(X, Y)
    assert seen and all(seen)
    assert _compile.active_bar is None
    seen.clear()
    sf.StructuredSVM(sf.models.ChainModel(2, 2), max_passes=1, verbose=0).fit(X, Y)
    assert seen and not any(seen)


def test_kernels_cached_reads_the_numba_cache():
    from structfw import _compile

    assert _compile.kernels_cached() is True  # this test session has compiled them
    assert _compile.kernels_cached([("structfw.no_such_module", "f")]) is None


def test_a_cold_cache_compiles_the_leaf_kernels_in_a_second_process(tmp_path):
    """On a cold cache the first compiled pass starts a helper that compiles the step kernels
    (which do not need the oracle) while this process compiles the oracle; afterwards they are
    cached, and a second call in the same process starts nothing."""
    import os

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nbcache"))
    code = ("from structfw.solvers import _warmup as c\n"
            "from structfw.oracles.compiled import CHAIN_DENSE\n"
            "assert c.kernels_cached(c.LEAF_KERNELS) is False\n"
            "p = c.compile_leaves_in_background(CHAIN_DENSE)\n"
            "assert p and c.compile_leaves_in_background(CHAIN_DENSE) is p\n"
            "assert p.wait(timeout=600) == 0\n"
            "print(c.kernels_cached(c.LEAF_KERNELS), c.kernels_cached(c.CHAIN_LEAF_KERNELS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
    # a warm cache starts no helper
    again = subprocess.run([sys.executable, "-c", "from structfw.solvers import _warmup as c; "
                            "print(c.compile_leaves_in_background(0))"], capture_output=True, text=True, env=env,
                           timeout=600)
    assert again.stdout.strip() == "None", again.stderr


def test_a_process_that_ends_while_its_compile_helper_runs_waits_for_it(tmp_path):
    """A process that ends right after starting the compile helper waits for it at exit: no child is
    left running (Python's ResourceWarning, seen at the end of cold-cache test runs), and the helper's
    kernels reach the cache."""
    import os

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nbcache"))
    code = ("from structfw.solvers import _warmup as c\n"
            "from structfw.oracles.compiled import CHAIN_DENSE\n"
            "assert c.compile_leaves_in_background(CHAIN_DENSE).poll() is None\n")
    out = subprocess.run([sys.executable, "-X", "dev", "-W", "always::ResourceWarning", "-c", code],
                         capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "ResourceWarning" not in out.stderr and "still running" not in out.stderr, out.stderr
    after = subprocess.run([sys.executable, "-c", "from structfw.solvers import _warmup as c; "
                            "print(c.kernels_cached(c.LEAF_KERNELS), c.kernels_cached(c.CHAIN_LEAF_KERNELS))"],
                           capture_output=True, text=True, env=env, timeout=600)
    assert after.stdout.split() == ["True", "True"], after.stderr


@pytest.mark.slow
def test_warmup_fills_a_fresh_cache(tmp_path):
    """In a fresh numba cache nothing is cached; after `structfw warmup` a fit announces nothing."""
    import os

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nbcache"))
    code = ("import structfw as sf, numpy as np\n"
            "X = [np.ones((3, 2)), np.zeros((2, 2))]; Y = [np.array([0, 1, 0]), np.array([1, 1])]\n"
            "sf.StructuredSVM(sf.models.ChainModel(2, 2), max_passes=1, verbose=1).fit(X, Y)\n")
    before = subprocess.run([sys.executable, "-c", "from structfw._compile import kernels_cached; "
                             "print(kernels_cached())"], capture_output=True, text=True, env=env, timeout=600)
    assert before.stdout.strip() == "False", before.stderr
    warm = subprocess.run([sys.executable, "-m", "structfw.cli", "warmup"], capture_output=True, text=True,
                          env=env, timeout=900)
    assert warm.returncode == 0, warm.stderr
    assert "done in" in warm.stdout
    after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert after.returncode == 0, after.stderr
    assert "compiling numba kernels" not in after.stderr
