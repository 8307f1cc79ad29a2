"""Promises mended after the second reliability probe (docs/reliability.md): trace and path files
checked for values a solver cannot record, every text-file reader naming its file, a Ctrl-C while
the path's modules load, and n_iter_ counting a continued run."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import structfw as sf
from structfw.path import RegularizationPath
from structfw.trace import Trace


def _trace_doc(**columns):
    base = {"passes": [1.0, 2.0, 3.0], "time_s": [0.1, 0.2, 0.3], "primal": [1.0, 0.8, 0.7],
            "dual": [0.1, 0.5, 0.6], "gap": [0.9, 0.3, 0.1]}
    base.update(columns)
    return {"meta": {"lam": 0.1}, "columns": base}


def test_a_valid_trace_round_trips(tmp_path):
    tr = Trace.from_json(json.dumps(_trace_doc()))
    assert len(tr) == 3
    tr.save(tmp_path / "t.csv")
    np.testing.assert_allclose(Trace.load(tmp_path / "t.csv")["gap"], [0.9, 0.3, 0.1])


@pytest.mark.parametrize("columns,needle", [
    (dict(passes=[1.0, -2.0, 3.0]), "'passes' holds a negative count"),
    (dict(passes=[1.0, 3.0, 2.0]), "'passes' decreases"),
    (dict(oracle_calls=[10.0, 5.0, 20.0]), "'oracle_calls' decreases"),
    (dict(time_s=[0.3, 0.2, 0.1]), "'time_s' decreases"),
    (dict(gap=[0.9, -0.3, 0.1]), "'gap' holds -0.3 at checkpoint 1"),
    (dict(primal=[1.0, -0.8, 0.7]), "'primal' holds a negative value"),
    (dict(test_loss=[0.1, -0.1, 0.1]), "'test_loss' holds a negative value"),
    (dict(oracle_time_frac=[0.5, 1.5, 0.5]), "oracle_time_frac"),
])
def test_trace_values_no_solver_records_are_refused(tmp_path, columns, needle):
    text = json.dumps(_trace_doc(**columns))
    with pytest.raises(ValueError, match=needle):
        Trace.from_json_text(text)
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=str(path)):
        Trace.from_json(path)
    csv = tmp_path / "t.csv"
    Trace.from_json_text(json.dumps(_trace_doc())).to_csv(csv)
    cols = _trace_doc(**columns)["columns"]
    names = list(cols)
    csv.write_text(",".join(names) + "\n" + "".join(
        ",".join(repr(float(cols[c][t])) for c in names) + "\n" for t in range(3)))
    with pytest.raises(ValueError, match=str(csv)):
        Trace.from_csv(csv)


def test_missing_values_and_rounding_sized_negative_gaps_pass():
    doc = _trace_doc(gap=[0.9, -1e-15, None], passes=[1.0, None, 3.0])
    tr = Trace.from_json_text(json.dumps(doc))
    assert np.isnan(tr["gap"][2]) and np.isnan(tr["passes"][1])


@pytest.mark.parametrize("meta", ['{"lam": 1e999}', '{"x": [1, {"y": -1e999}]}'])
def test_infinite_numbers_in_the_meta_block_are_refused(meta):
    text = '{"meta": %s, "columns": {"gap": [1.0]}}' % meta
    with pytest.raises(ValueError, match="meta.*float range"):
        Trace.from_json_text(text)


@pytest.mark.parametrize("reader", [RegularizationPath.from_json, Trace.from_json])
@pytest.mark.parametrize("content", [bytes(range(256)) * 8, b"\xff\xfe{", b"{\"format\": \xc3\x28}"])
def test_random_bytes_name_the_file(tmp_path, reader, content):
    path = tmp_path / "random.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=str(path)):
        reader(path)
    with pytest.raises(ValueError, match=str(path)):
        reader(str(path))


@pytest.mark.parametrize("reader", [RegularizationPath.from_json, Trace.from_json])
def test_missing_and_unreadable_names(tmp_path, reader):
    with pytest.raises(FileNotFoundError, match="absent.json"):
        reader(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="cannot be read"):
        reader("bad\0name")


_CTRL_C_IN_IMPORT = textwrap.dedent("""
    import importlib.abc, signal, sys
    import numpy as np
    import structfw as sf

    class CtrlCWhileLoading(importlib.abc.MetaPathFinder):
        # Ctrl-C pressed while structfw.path (and the solver modules it pulls in) load
        def find_spec(self, name, path, target=None):
            if name == "structfw.path":
                signal.raise_signal(signal.SIGINT)
            return None

    sys.meta_path.insert(0, CtrlCWhileLoading())
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 30)
    X = list(np.eye(3, 4)[y] * 3 + rng.normal(size=(30, 4)))
    p = sf.regularization_path(sf.models.MulticlassModel(3, 4), X, list(y), eps=0.5, random_state=0)
    print("STATUS", p.status, len(p))
""")


def test_a_ctrl_c_while_the_path_modules_load_gives_an_interrupted_path():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    r = subprocess.run([sys.executable, "-c", _CTRL_C_IN_IMPORT], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "STATUS interrupted" in r.stdout, r.stdout + r.stderr[-2000:]


def test_n_iter_counts_a_continued_run_as_its_trace_does():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 40)
    X = list(np.eye(3, 4)[y] * 3 + rng.normal(size=(40, 4)))
    kw = dict(lam=0.05, tol=None, check_every=1, random_state=0)
    split = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), max_passes=3, warm_start=True, **kw).fit(X, list(y))
    assert split.n_iter_ == 3
    split.fit(X, list(y))
    once = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), max_passes=6, **kw).fit(X, list(y))
    assert split.n_iter_ == once.n_iter_ == 6 == split.trace_["engine_passes"][-1]
    assert split.n_iter_ - split.trace_.meta["resumed_from"]["engine_passes"] == 3


def test_saving_into_a_missing_directory_names_the_path(tmp_path):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 20)
    X = list(np.eye(3, 4)[y] * 3 + rng.normal(size=(20, 4)))
    est = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), max_passes=1, tol=None).fit(X, list(y))
    target = tmp_path / "no" / "such" / "m.npz"
    with pytest.raises(FileNotFoundError, match=r"cannot write .*m\.npz: the directory .*such does not exist"):
        est.save(target)
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        est.save(tmp_path / "d.npz")
    assert not list(tmp_path.glob("**/*.tmp"))


def test_integers_beyond_float_range_are_value_errors_naming_the_parameter():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 10)
    X = list(np.eye(3, 4)[y] * 3 + rng.normal(size=(10, 4)))
    with pytest.raises(ValueError, match="'lam'"):
        sf.StructuredSVM(sf.models.MulticlassModel(3, 4), lam=10 ** 400).fit(X, list(y))
    from structfw.solvers.problem import check_lam
    with pytest.raises(ValueError, match="lam must be a positive finite number"):
        check_lam(10 ** 400)
    with pytest.raises(ValueError, match="'eps'"):
        sf.regularization_path(sf.models.MulticlassModel(3, 4), X, list(y), eps=10 ** 400)


def test_worker_processes_never_print_the_compile_notice():
    """Each worker of a pool (or of a sharded fit) compiled its kernels and printed the first-use
    notice, one line per worker; the process that started them says it once."""
    code = ("import os; from structfw import _compile, executor\n"
            "executor._init_worker({}, os.getppid())\n"
            "print('announced' if _compile.announce() else 'silent')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "silent" and "compiling" not in r.stderr
