"""Each decision of a block iteration is written once (structfw.solvers._decisions) and called by
both routes: the compiled chunks and the Python route.  These tests fail when a decision gets a
Python twin (a Python module of the engine calling the low-level kernels a decision wraps, or a
decision no longer called by one of the routes) and check the decisions' arithmetic against the
papers' closed forms."""
import ast
from pathlib import Path

import numpy as np
import pytest

from structfw.solvers import _decisions
from structfw.solvers._decisions import AVG_CODES, DECISIONS, average_close, averaging_rate, away_taken, draw_block
from structfw.solvers.averaging import LazyAverage, averaging_rate as py_rate
from structfw.solvers.sampling import BlockSampler

SOLVERS = Path(_decisions.__file__).parent
#: the compiled chunks, and the Python route of the engine
COMPILED = ("_fastpass.py",)
PYTHON_ROUTE = ("parts.py", "passes.py", "sampling.py", "averaging.py")
#: the kernels the decisions wrap: outside the modules that define them and the decisions, a call
#: of one of these is a decision written a second time
WRAPPED = {"cs_evict", "cs_expire", "cs_drop_inactive", "cs_clip", "fenwick_add", "fenwick_find", "fenwick_total",
           "first_argmax"}
DEFINING = {"_decisions.py", "corners.py", "_kernels.py"}


def _names(path):
    """Every name the module reads (calls, references, imports)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            out.update(a.asname or a.name for a in node.names)
    return out


def _called(path):
    """Names called in the module, outside import statements."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


@pytest.mark.parametrize("name", DECISIONS)
def test_every_decision_is_compiled_and_called_by_both_routes(name):
    from structfw.solvers import _kernels

    fn = getattr(_decisions, name, None) or getattr(_kernels, name)
    assert hasattr(fn, "py_func"), f"{name} is not a compiled (numba) function"
    compiled = set().union(*(_called(SOLVERS / f) for f in COMPILED))
    python = set().union(*(_called(SOLVERS / f) for f in PYTHON_ROUTE))
    assert name in compiled, f"the compiled chunks no longer call {name}: a decision of their own?"
    assert name in python, f"the Python route no longer calls {name}: a Python twin of it?"


def test_no_module_calls_the_kernels_a_decision_wraps():
    twins = []
    for path in sorted(SOLVERS.rglob("*.py")):
        if path.name in DEFINING:
            continue
        hit = _called(path) & WRAPPED
        if hit:
            twins.append(f"{path.name} calls {sorted(hit)}")
    assert not twins, "decisions written again beside structfw.solvers._decisions: " + "; ".join(twins)


def test_the_ban_list_catches_a_twin(tmp_path):
    """The AST scan sees a call of a wrapped kernel (so the test above can fail)."""
    p = tmp_path / "twin.py"
    p.write_text("from structfw.solvers.corners import cs_evict\n\ndef tidy(S, i):\n    cs_evict(S, i, 3)\n")
    assert _called(p) & WRAPPED == {"cs_evict"}


# ------------------------------------------------------------------ the arithmetic
def test_weighted_average_is_eq_14():
    """xbar_t = 2/(t(t+1)) sum_s s x_s (BCFW paper eq. (14)) from the lazy recursion."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(40, 5))
    w = np.zeros(5)
    avg = LazyAverage("weighted", w, 0.0)
    for t, x in enumerate(xs, start=1):
        rho, inv_c = avg.begin_step()
        avg.u -= (x - w) * inv_c  # u_t = u_{t-1} - delta / c_{t-1}
        w = x.copy()
        avg.end_step(rho, float(t))
        want = 2.0 / (t * (t + 1.0)) * (np.arange(1, t + 1)[:, None] * xs[:t]).sum(0)
        np.testing.assert_allclose(avg.wbar(w), want, rtol=1e-10, atol=1e-12)
        lbar = 2.0 / (t * (t + 1.0)) * sum(s * s for s in range(1, t + 1))
        assert avg.lbar == pytest.approx(lbar, rel=1e-12)


def test_suffix_average_restarts_at_powers_of_two():
    for t in range(1, 70):
        start = 1 << (t.bit_length() - 1)
        assert py_rate("suffix", t) == pytest.approx(1.0 / (t - start + 1.0))
        assert py_rate("uniform", t) == pytest.approx(1.0 / t)
        assert averaging_rate(AVG_CODES["weighted"], t) == pytest.approx(2.0 / (t + 1.0))


def test_averaging_rate_names_an_unknown_scheme():
    with pytest.raises(ValueError, match="unknown averaging 'mean'.*weighted"):
        py_rate("mean", 3)


def test_average_close_renormalises_before_underflow():
    u = np.full(3, 2.0)
    c, lbar = average_close(1.0 - 1e-160, u, 1.0, 0.5, 1.5)
    assert c == 1.0 and np.all(u < 1e-150) and lbar == pytest.approx(1.5)
    u = np.full(3, 2.0)
    c, _ = average_close(1.0, u, 0.3, 0.0, 0.0)
    assert c == 1.0 and not u.any()


def test_away_step_taken_only_with_room():
    assert away_taken(0.1, 0.2, 0.5)
    assert not away_taken(0.2, 0.2, 0.5)  # ties go to the FW step
    assert not away_taken(0.1, 0.2, 1.0)  # all the weight on the away corner: step unbounded


@pytest.mark.parametrize("kind", ["gap", "max_gap"])
def test_python_sampler_draws_as_the_compiled_chunk(kind):
    """BlockSampler.next draws from one uniform number a step, as a compiled gap chunk's
    ``draws``; the estimates and the Fenwick tree move the same way."""
    n = 17
    a = BlockSampler(kind, n, np.random.default_rng(3))
    b = BlockSampler(kind, n, np.random.default_rng(3))
    gaps = np.random.default_rng(1).random(n)
    a.set_all(gaps)
    b.set_all(gaps)
    a.start_pass()
    b.start_pass()
    code = _decisions.SAMPLER_CODES[kind]
    for s in range(60):
        i = a.next()
        draws = b.rng.random(1) if kind == "gap" else np.empty(0)
        j = draw_block((code, np.empty(0, np.int64), draws, b.estimates, b._tree), 0, n)
        assert i == j
        g = float(np.sin(s)) * 0.1
        a.update(i, g)
        _decisions.record_gap(code, b.estimates, b._tree, j, g)
        assert a.estimates[i] == max(g, 0.0)
    np.testing.assert_array_equal(a.estimates, b.estimates)
    np.testing.assert_allclose(a._tree, b._tree, atol=1e-12)


def test_gap_sampler_draws_uniformly_while_every_estimate_is_zero():
    s = BlockSampler("gap", 5, np.random.default_rng(0))
    s.start_pass()
    drawn = {s.next() for _ in range(200)}
    assert drawn == set(range(5))

