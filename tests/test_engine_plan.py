"""The engine's options are read in one place: `structfw.solvers.plan` (docs/design.md,
"The engine and its parts")."""
import ast
from pathlib import Path

import numpy as np
import pytest

import structfw.solvers.plan as plan_module
from structfw.solvers import BCFW, MPBCFW
from structfw.solvers.base import StopRule
from structfw.solvers.plan import ENGINE_PARAMS, BlockPlan

from structfw.solvers.problem import Problem
from toy import make_toy


def make_toy_problem(seed):
    model, X, Y = make_toy(n=6, m=4, d=3, seed=seed)
    return Problem(model, X, Y, 0.1)

SOLVERS = Path(plan_module.__file__).parent
OPTIONS = {p.name for p in ENGINE_PARAMS}
#: where the engine's option attributes may be read: the table's owner and the label
ALLOWED = {"plan.py"}


def _option_reads(path):
    """(line, attribute) of every read of an engine option as an attribute of self/solver."""
    tree = ast.parse(path.read_text())
    reads = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in OPTIONS and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "solver", "o", "options")):
            reads.append((node.lineno, node.attr))
    return reads


@pytest.mark.parametrize("name", ["bcfw.py", "passes.py", "parts.py", "block_state.py", "corners.py",
                                  "_fastpass.py", "_factored.py", "averaging.py", "sampling.py", "kernel_bcfw.py"])
def test_no_option_is_read_outside_the_plan(name):
    reads = _option_reads(SOLVERS / name)
    assert reads == [], f"{name} reads engine options outside solvers/plan.py: {reads}"


def test_the_grep_sees_an_option_read(tmp_path):
    """The check above can fail: a read of an option is found."""
    p = tmp_path / "m.py"
    p.write_text("def f(self):\n    return self.cache_F * 2\n")
    assert _option_reads(p) == [(2, "cache_F")]


def _count_plans(monkeypatch):
    calls = []
    real = plan_module.make_plan

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr("structfw.solvers.bcfw.make_plan", counted)
    return calls


@pytest.mark.parametrize("solver", [BCFW(), BCFW(step="pairwise", sampling="gap", cache=True, averaging="weighted"),
                                    MPBCFW(max_approx_passes=3)], ids=lambda s: s.label)
def test_one_plan_per_solve(monkeypatch, solver):
    problem = make_toy_problem(seed=3)
    calls = _count_plans(monkeypatch)
    res = solver.solve(problem, StopRule(max_passes=4, check_every=2), rng=0)
    assert len(calls) == 1
    # the plan is not kept on the solver: it holds options only
    assert not hasattr(solver, "_ctx")
    calls.clear()
    solver.solve(problem, StopRule(max_passes=2), state=res.state)  # a warm start plans once too
    assert len(calls) == 1


def test_plan_is_frozen_and_resolves_the_options():
    problem = make_toy_problem(seed=1)
    plan = BCFW(step="away", step_size="predefined", cache=True, cache_size=7).plan(problem)
    assert isinstance(plan, BlockPlan)
    with pytest.raises(Exception):
        plan.cache_size = 3  # frozen dataclass
    assert plan.track_alpha and plan.keep_corners and plan.predefined and plan.uses_gaps
    assert plan.corner_capacity == 9 and not plan.plain
    assert type(plan.source).__name__ == "GapCache" and type(plan.step).__name__ == "AwayStep"
    plain = BCFW(block_storage="sparse").plan(problem)
    assert plain.plain and not plain.dense and plain.compiled is None
    assert np.isfinite(plain.cache_F)


def test_gap_refresh_none_refreshes_only_once():
    """gap_refresh=None: the first gap pass only (Fig. 1's 'Gap Inf'); its calls count once."""
    problem = make_toy_problem(seed=5)
    n = problem.n
    calls = {}
    for refresh in (None, 2):
        solver = BCFW(sampling="gap", gap_refresh=refresh)
        res = solver.solve(problem, StopRule(max_passes=6, check_every=100), rng=0)
        calls[refresh] = res.trace["oracle_calls"][-1]
    assert calls[None] == n + 6 * n  # the first gap pass, then one call per block step
    assert calls[2] == n + 6 * n + 3 * n  # and a gap pass after passes 2, 4 and 6
    assert BCFW(gap_refresh=None).get_params()["gap_refresh"] is None
    with pytest.raises(ValueError, match="gap_refresh must be an integer >= 1 or None"):
        BCFW(gap_refresh=0)


def test_gap_refresh_never_on_the_command_line():
    import click
    from click.testing import CliRunner

    from structfw.cli._solver_options import pop_solver_options, solver_options

    seen = {}

    @click.command()
    @solver_options
    def cmd(**kw):
        kw.pop("solver")
        seen.update(pop_solver_options(kw))

    assert CliRunner().invoke(cmd, ["--gap-refresh", "never"]).exit_code == 0
    assert seen == {"gap_refresh": None}
    out = CliRunner().invoke(cmd, ["--gap-refresh", "often"])
    assert out.exit_code != 0 and "'often' is not an integer or 'never'" in out.output


# ------------------------------------------------------------------ state through the call
class _FailingOracle(Exception):
    pass


def _failing_after(model, calls):
    """The toy model whose max oracle raises after ``calls`` calls (a user model that breaks mid-fit)."""
    cls = type(model)

    class Failing(cls):
        budget = calls

        def loss_augmented_decode(self, x, y_true, w):
            Failing.budget -= 1
            if Failing.budget < 0:
                raise _FailingOracle("the oracle broke")
            return super().loss_augmented_decode(x, y_true, w)

    out = Failing.__new__(Failing)
    out.__dict__.update(model.__dict__)
    return out


def _solvers():
    from structfw.solvers import FW, SSG, CuttingPlane
    return [BCFW(), BCFW(step="pairwise", sampling="gap", cache=True, averaging="weighted"),
            MPBCFW(max_approx_passes=3), FW(), SSG(averaging="weighted"), CuttingPlane()]


@pytest.mark.parametrize("solver", _solvers(), ids=lambda s: s.label)
def test_every_exit_path_leaves_the_solver_as_it_was(solver):
    """init_state returns the solve's context; nothing of a run is kept on the solver object,
    whether the solve returns or raises, and a second solve starts from the same object."""
    before = dict(vars(solver))
    problem = make_toy_problem(seed=4)
    res = solver.solve(problem, StopRule(max_passes=3, check_every=1), rng=0)
    assert vars(solver).keys() == before.keys()
    assert all(vars(solver)[k] is v or vars(solver)[k] == v for k, v in before.items())
    model, X, Y = make_toy(n=6, m=4, d=3, seed=4)
    broken = Problem(_failing_after(model, 8), X, Y, 0.1)
    with pytest.raises(Exception, match="the oracle broke"):   # raw, or named by its example
        solver.solve(broken, StopRule(max_passes=5, check_every=1), rng=0)
    assert vars(solver).keys() == before.keys()
    again = solver.solve(make_toy_problem(seed=4), StopRule(max_passes=3, check_every=1), rng=0)
    np.testing.assert_allclose(again.w, res.w, rtol=1e-12, atol=1e-14)


def test_init_state_returns_a_solve_context():
    from structfw.solvers.base import SolveContext
    problem = make_toy_problem(seed=2)
    for solver in _solvers():
        ctx = solver.init_state(problem, None, 0)
        assert isinstance(ctx, SolveContext) and ctx.problem is problem and ctx.state is not None


# ------------------------------------------------------------------ the options declared once
def _engine_classes():
    from structfw.solvers import KernelBCFW
    from structfw.solvers.sharded import ShardedBCFW
    return [BCFW, MPBCFW, KernelBCFW, ShardedBCFW]


@pytest.mark.parametrize("cls", _engine_classes(), ids=lambda c: c.__name__)
def test_every_engine_signature_is_its_param_table(cls):
    """The engine's options are declared once (plan.ENGINE_PARAMS; MPBCFW changes one default,
    KernelBCFW adds its kernel's): each constructor takes exactly the table's names with its
    defaults, and documents every one."""
    import inspect
    import re
    sig = inspect.signature(cls.__init__)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    table = cls.PARAMS
    assert sorted(p.name for p in params) == sorted(p.name for p in table), cls.__name__
    defaults = {p.name: p.default for p in table}
    for p in params:
        assert p.default == defaults[p.name], (cls.__name__, p.name, p.default, defaults[p.name])
    doc = inspect.getdoc(cls) or ""
    section = doc[doc.index("Parameters"):]
    documented = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", section))
    missing = [p.name for p in table if p.name not in documented]
    assert not missing, f"{cls.__name__}'s docstring does not document {missing}"


def test_constructing_from_the_table_defaults_gives_the_defaults():
    for cls in _engine_classes():
        solver = cls()
        assert solver.get_params() == {p.name: p.default for p in cls.PARAMS}
