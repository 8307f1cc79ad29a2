"""The papers' reproduction is a distribution of its own (issue 47): structfw-bench in bench/.

`structfw bench` finds its commands in ``structfw_bench.COMMANDS`` when the package is there and
says where to get it when it is not; the two distributions' metadata agree; the bench's own numba
kernels keep structfw's cache stamp; its child processes import the same packages as the parent.
"""
import ast
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import structfw
import structfw_bench
from structfw import cli

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PKG = Path(structfw_bench.__file__).resolve().parent


def _toml(path):
    return tomllib.loads(path.read_text())


# ------------------------------------------------------------------ without the package
@pytest.fixture
def no_bench_package(monkeypatch):
    """structfw_bench made unimportable, and the group's memory of its commands cleared."""
    monkeypatch.setitem(sys.modules, "structfw_bench", None)  # import raises ModuleNotFoundError
    monkeypatch.setattr(cli.bench, "commands", {})
    monkeypatch.setattr(cli.bench, "lazy_commands", {})


def _says_where(output):
    return "pip install structfw-bench" in output and "pip install ./bench" in output


def test_bench_help_without_the_package_says_where_the_benchmarks_are(no_bench_package):
    res = CliRunner().invoke(cli.main, ["bench", "--help"])
    assert res.exit_code == 0, res.output
    assert _says_where(" ".join(res.output.split())), res.output
    assert "fig1" not in res.output
    top = CliRunner().invoke(cli.main, ["--help"])  # the group itself is still listed
    assert top.exit_code == 0 and "bench" in top.output


@pytest.mark.parametrize("args", [["fig1"], ["fig1", "--help"], ["gaps", "--passes", "1"], ["no-such"]])
def test_a_bench_command_without_the_package_is_a_usage_error(no_bench_package, args):
    res = CliRunner().invoke(cli.main, ["bench", *args])
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)  # click's UsageError, no ImportError
    assert "Traceback" not in res.output and "ImportError" not in res.output
    assert _says_where(" ".join(res.output.split())), res.output


def test_a_command_added_to_the_group_runs_without_the_package(no_bench_package, monkeypatch):
    import click

    @click.command()
    def probe():
        click.echo("probed")

    monkeypatch.setitem(cli.bench.commands, "probe", probe)
    res = CliRunner().invoke(cli.main, ["bench", "probe"])
    assert res.exit_code == 0 and "probed" in res.output, res.output


def test_an_error_inside_an_installed_package_is_not_taken_for_its_absence(tmp_path, monkeypatch):
    """Only structfw_bench itself missing means "not installed"; a dependency it lacks propagates."""
    broken = tmp_path / "structfw_bench"
    broken.mkdir()
    (broken / "__init__.py").write_text("import structfw_bench_lacks_this_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "structfw_bench")
    importlib.invalidate_caches()
    with pytest.raises(ModuleNotFoundError, match="structfw_bench_lacks_this_dependency"):
        cli._bench_commands()
    monkeypatch.delitem(sys.modules, "structfw_bench", raising=False)  # the broken one, half imported


# ------------------------------------------------------------------ with the package
def test_the_group_lists_the_packages_commands():
    res = CliRunner().invoke(cli.main, ["bench", "--help"])
    assert res.exit_code == 0, res.output
    for name in structfw_bench.COMMANDS:
        assert name in res.output, name


def test_every_command_of_the_table_is_a_module_of_the_package():
    """Each entry names a module of structfw_bench that defines the command (read, not imported)."""
    assert len(structfw_bench.COMMANDS) >= 20
    for name, (module, attr, short) in structfw_bench.COMMANDS.items():
        assert module.startswith("structfw_bench."), (name, module)
        path = PKG / (module.split(".", 1)[1].replace(".", "/") + ".py")
        assert path.exists(), (name, path)
        body = ast.parse(path.read_text()).body
        defined = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        defined |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert attr in defined, (name, attr)
        assert short and short == short.strip(), name


def test_importing_the_cli_or_its_help_does_not_import_the_package():
    code = ("import sys; from structfw.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('BENCH', 'structfw_bench' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(structfw.__file__).parents[1]),
                                                                         str(BENCH / "src")])))
    assert out.returncode == 0, out.stderr
    assert "BENCH False" in out.stdout


def test_the_package_imports_the_core_absolutely():
    """The modules moved out of structfw: a relative import can reach only this package's modules."""
    assert not (Path(structfw.__file__).parent / "bench").exists()
    for path in sorted(PKG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1, f"{path.name}:{node.lineno} imports from above the package"


# ------------------------------------------------------------------ the two distributions
def test_the_distributions_metadata_agree():
    core, bench = _toml(ROOT / "pyproject.toml")["project"], _toml(BENCH / "pyproject.toml")
    version = core["version"]
    project = bench["project"]
    assert project["name"] == "structfw-bench" and project["version"] == version
    assert project["license"] == core["license"] == "BSD-3-Clause"
    assert f"structfw=={version}" in project["dependencies"]
    assert any(d.startswith("matplotlib") for d in project["dependencies"])
    assert project["optional-dependencies"]["baselines"] == ["sklearn-crfsuite>=0.5"]
    assert bench["tool"]["setuptools"]["packages"]["find"]["where"] == ["src"]
    extras = core["optional-dependencies"]
    assert extras["bench"] == [f"structfw-bench=={version}", "sklearn-crfsuite>=0.5"]
    # not on an index: the tests take it from bench/src (tests/conftest.py)
    assert not any(d.startswith("structfw-bench") for d in extras["test"])
    assert (BENCH / "README.md").exists()


def test_the_tests_import_the_checkouts_package():
    assert PKG == (BENCH / "src" / "structfw_bench").resolve() or "site-packages" in str(PKG)
    assert str(BENCH / "src") in os.environ["PYTHONPATH"].split(os.pathsep)


# ------------------------------------------------------------------ numba's cache and the children
def test_the_bench_kernels_carry_both_packages_stamps():
    from structfw._numba_cache import package_stamp
    from structfw_bench import _numba_cache as bench_cache
    from structfw_bench.block_state import replay_dense_rows

    locator = replay_dense_rows._cache._impl.locator
    assert getattr(type(locator), "structfw_bench_stamped", False)
    own, core, mine = locator.get_source_stamp()
    assert own and core == package_stamp() and mine == package_stamp(bench_cache.PACKAGE_DIR) != core


def test_a_bench_child_imports_the_same_packages_as_its_parent(tmp_path):
    from structfw_bench._common import child_env

    env = child_env({"PYTHONPATH": os.pathsep.join(["/elsewhere", str(BENCH / "src")]), "PATH": os.environ["PATH"]})
    parts = env["PYTHONPATH"].split(os.pathsep)
    core_root, bench_root = str(Path(structfw.__file__).resolve().parents[1]), str(PKG.parent)
    assert parts[:2] == [core_root, bench_root] or parts[:1] == [core_root] == [bench_root]
    assert "/elsewhere" in parts and len(parts) == len(set(parts))
    code = "import structfw, structfw_bench; print(structfw.__file__); print(structfw_bench.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=child_env(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(Path(structfw.__file__).resolve()), str(Path(structfw_bench.__file__).resolve())]
