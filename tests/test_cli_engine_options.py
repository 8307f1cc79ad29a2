"""`structfw path` and the benchmarks take their engine flags from the engine's option table
(`structfw.cli._solver_options.engine_options`), as `structfw train` does: same help, choices
and bounds; each command keeps its own defaults."""
import importlib

import click
import pytest
from click.testing import CliRunner

from structfw.cli import COMMANDS
from structfw_bench import COMMANDS as BENCH_COMMANDS
from structfw.cli._solver_options import engine_option, engine_options
from structfw.solvers import BCFW

TABLE = BCFW.param_table()


def _command(registry, name):
    module, attr, _ = registry[name]
    return getattr(importlib.import_module(module, "structfw.cli"), attr)


def _options(cmd):
    return {p.name: p for p in cmd.params if isinstance(p, click.Option)}


def _check_from_table(option, name):
    p = TABLE[name]
    assert option.help == p.help, (name, option.help)
    assert option.opts[0] == "--" + name.replace("_", "-")
    if p.kind == "choice":
        assert list(option.type.choices) == ["none" if c is None else c for c in p.choices]
    if p.kind == "bool":
        assert option.is_flag


@pytest.mark.parametrize("registry, name, defaults", [
    (COMMANDS, "path", dict(step="pairwise", sampling="gap", gap_refresh=2)),
    (BENCH_COMMANDS, "path", dict(step="fw", sampling="perm", gap_refresh=2)),
    (BENCH_COMMANDS, "gaps", dict(gap_refresh=10)),
    (BENCH_COMMANDS, "parallel", dict(cache=False)),
])
def test_engine_flags_carry_the_tables_help_and_choices(registry, name, defaults):
    options = _options(_command(registry, name))
    for opt, default in defaults.items():
        _check_from_table(options[opt], opt)
        assert options[opt].default == default, (name, opt)  # the command's own default, as before


def test_no_command_hand_writes_an_engine_flag():
    """A command option named like an engine option is the table's (train's are generated too)."""
    bad = []
    # the kernel SVM's bench is not the block-coordinate engine's: its --cache-size (MB of kernel
    # columns) and --sampling (the randomised search) are FrankWolfeSVC's parameters of those names
    structured = [name for name in BENCH_COMMANDS if name != "svm"]
    for registry, names in ((COMMANDS, ["path"]), (BENCH_COMMANDS, structured)):
        for name in names:
            try:
                cmd = _command(registry, name)
            except ImportError:  # a command whose module needs an optional package
                continue
            for opt_name, option in _options(cmd).items():
                if opt_name in TABLE and option.help != TABLE[opt_name].help:
                    bad.append(f"{name} {option.opts[0]}")
    assert not bad, f"engine flags written by hand (use engine_options): {bad}"


def test_engine_flags_parse_like_the_solver():
    path = _command(COMMANDS, "path")
    ctx = path.make_context("path", ["--gap-refresh", "never", "--step", "away"])
    assert ctx.params["gap_refresh"] is None and ctx.params["step"] == "away"
    assert path.make_context("path", [])   # defaults: pairwise, gap, 2
    res = CliRunner().invoke(path, ["--gap-refresh", "0"])
    assert res.exit_code == 2 and "--gap-refresh" in res.output and ">= 1" in res.output
    res = CliRunner().invoke(path, ["--sampling", "often"])
    assert res.exit_code == 2 and "--sampling" in res.output


def test_engine_options_decorator(tmp_path):
    @click.command()
    @engine_options(averaging=None, cache_F=0.5, check_oracle=True, minibatch=3)
    def cmd(averaging, cache_F, check_oracle, minibatch):
        click.echo(f"{averaging!r} {cache_F!r} {check_oracle!r} {minibatch!r}")

    assert [p.name for p in cmd.params] == ["averaging", "cache_F", "check_oracle", "minibatch"]
    assert CliRunner().invoke(cmd, []).output.strip() == "None 0.5 True 3"
    out = CliRunner().invoke(cmd, ["--averaging", "weighted", "--cache-F", "0.1", "--no-check-oracle"]).output
    assert out.strip() == "'weighted' 0.1 False 3"
    res = CliRunner().invoke(cmd, ["--cache-F", "0"])  # the table's bound: > 0
    assert res.exit_code == 2 and "0.0 is not > 0" in res.output
    with pytest.raises(ValueError, match="name must be an option of the engine"):
        engine_option("lam", 0.1)
    with pytest.raises(ValueError, match="step"):
        engine_option("step", "sideways")
