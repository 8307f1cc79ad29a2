"""Positivity constraints (the model's ``nonnegative_indices``) within shards.

The constrained dual D(alpha) = -lam/2 ||Pi(v)||^2 + l, v = A alpha, is not separable over the
shards, but each shard's engine runs its projected block steps on the local problem at the global v
(`Shard.set_point`), and the rounds combine the changes of v: the line search exactly on the
piecewise quadratic dual along the summed change, averaging and CoCoA+ adding with the dual kept
from falling by the convexity of 1/2 ||Pi(v)||^2 (`projected_combination`).
"""
import numpy as np
import pytest

from structfw.solvers import Problem, StopRule
from structfw.solvers.sharded import ShardedBCFW, combine_changes, one_round, projected_combination, shard_gap
from structfw.solvers.state_file import decode_state, encode_state
from test_positivity import LAM, constrained_optimum
from test_sharded import RULES, shard_sum
from toy import exact_optimum, make_toy, primal


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=5, m=4, d=4, seed=3)
    _, w_free = exact_optimum(model, X, Y, LAM)
    S = np.flatnonzero(w_free < -1e-3)[:2]
    assert len(S) >= 1, "the toy must have an active constraint"
    model.nonnegative_indices = S
    P_star, w_star = constrained_optimum(model, X, Y, LAM, S)
    return model, X, Y, S, P_star, w_star


def solve(toy, passes=3000, tol=1e-9, **options):
    model, X, Y, *_ = toy
    options.setdefault("round_length", 2)
    return ShardedBCFW(**options).solve(Problem(model, X, Y, LAM), StopRule(max_passes=passes, tol=tol,
                                                                              check_every=5), rng=0)


# ====================================================================== the optimum
# (tol 1e-8: below it the line search's rounds stall where a round's gain in D is below the roundoff of
# its change of l, gamma* then 0; about 5e-9 on this toy)
CASES = [(rule, K, dict(step="away")) for rule in RULES for K in (2, 5)] + [
    ("linesearch", 1, dict(step="pairwise")), ("linesearch", 3, dict(step="pairwise")),
    ("add", 3, dict(step="pairwise", sampling="gap", cache=True))]


@pytest.mark.parametrize("rule, K, options", CASES,
                         ids=[f"{r}-K={K}-" + ",".join(map(str, o.values())) for r, K, o in CASES])
def test_every_rule_reaches_the_constrained_optimum_with_a_valid_certificate(toy, rule, K, options):
    """K = 5 on 5 examples: shards of one example."""
    model, X, Y, S, P_star, w_star = toy
    res = solve(toy, tol=1e-8, shards=K, combine=rule, **options)
    assert res.gap <= 1e-8
    assert np.all(res.w[S] >= 0.0)
    sub = primal(model, X, Y, LAM, res.w) - P_star
    assert -1e-9 < sub < 1e-7
    assert res.gap >= sub - 1e-10  # the summed shard gaps certify the suboptimality
    np.testing.assert_allclose(res.w, w_star, atol=1e-3)


def test_plain_fw_steps_approach_it(toy):
    """FW steps converge only at the O(1/k) rate on a face-bound optimum (tests/test_positivity.py)."""
    model, X, Y, S, P_star, _ = toy
    res = solve(toy, passes=600, tol=None, shards=2)
    assert np.all(res.w[S] >= 0.0)
    assert -1e-9 < primal(model, X, Y, LAM, res.w) - P_star < 1e-2


# ====================================================================== after every round
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("options", [dict(), dict(step="pairwise"), dict(step="away", cache=True)],
                         ids=["fw", "pairwise", "away-cache"])
def test_v_is_the_sum_of_the_blocks_w_its_projection_and_the_dual_never_falls(toy, rule, options):
    model, X, Y, S, *_ = toy
    problem = Problem(model, X, Y, LAM)
    ctx = ShardedBCFW(shards=3, combine=rule, round_length=2, **options).init_state(problem, None, 0)
    st = ctx.state
    assert st.v is not st.w
    before = st.dual()
    for _ in range(40):
        one_round(ctx, rule)
        v, ell = shard_sum(problem, ctx)
        np.testing.assert_allclose(v, st.v, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(st.w, problem.project(st.v))
        assert ell == pytest.approx(st.ell, abs=1e-12)
        assert st.dual() == pytest.approx(-0.5 * LAM * st.w @ st.w + st.ell, abs=1e-15)
        assert st.dual() >= before - 1e-12
        before = st.dual()
    assert np.any(st.v[S] < 0.0), "the projection must have been active"


def test_the_line_search_gamma_maximises_the_projected_dual_along_the_summed_change(toy):
    model, X, Y, S, *_ = toy
    problem = Problem(model, X, Y, LAM)
    st = ShardedBCFW(shards=3).init_state(problem, None, 0).state
    rng = np.random.default_rng(4)
    for trial in range(20):
        st.v[:] = rng.normal(size=problem.d)
        Us, dls = rng.normal(size=(3, problem.d)), rng.normal(size=3)
        gamma, U, dl = projected_combination(problem, st, "linesearch", Us, dls)
        np.testing.assert_allclose(U, Us.sum(axis=0))
        D = lambda t: -0.5 * LAM * np.sum(problem.project(st.v + t * U) ** 2) + t * dl
        assert 0.0 <= gamma <= 1.0
        assert D(gamma) >= max(D(t) for t in np.linspace(0, 1, 2001)) - 1e-12
        # averaging and adding are the unconstrained rules' gammas
        for rule in ("average", "add"):
            assert projected_combination(problem, st, rule, Us, dls)[0] == combine_changes(
                Us, dls, st.v, LAM, {"average": 1, "add": 2}[rule], 3)[0]


def test_the_gap_is_the_serial_definition_at_w_the_projection(toy):
    model, X, Y, S, *_ = toy
    problem = Problem(model, X, Y, LAM)
    ctx = ShardedBCFW(shards=2, combine="linesearch", round_length=2).init_state(problem, None, 0)
    for _ in range(15):
        one_round(ctx, "linesearch")
    st = ctx.state
    P, gap = shard_gap(ctx, validate=False)
    assert P == pytest.approx(primal(model, X, Y, LAM, st.w), abs=1e-12)
    assert gap == pytest.approx(P - st.dual(), abs=1e-10)


def test_averaging_reports_the_projection_of_the_averaged_v(toy):
    model, X, Y, S, P_star, _ = toy
    res = solve(toy, passes=400, tol=None, shards=2, step="pairwise", averaging="weighted")
    vbar = res.state.avg[2]
    problem = Problem(model, X, Y, LAM)
    np.testing.assert_array_equal(res.w, problem.project(vbar))
    assert res.dual == pytest.approx(-0.5 * LAM * res.w @ res.w + res.state.avg[3], abs=1e-12)
    assert res.dual <= P_star + 1e-9 <= res.primal + 2e-9


# ====================================================================== executors, files
def test_processes_take_the_threads_steps(toy):
    threads = solve(toy, passes=20, tol=None, shards=2, step="pairwise")
    procs = solve(toy, passes=20, tol=None, shards=2, step="pairwise", executor="process")
    np.testing.assert_allclose(procs.w, threads.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(procs.state.v, threads.state.v, rtol=0, atol=1e-12)


def test_a_saved_state_continues_exactly_and_a_forged_projection_is_refused(toy):
    """The state as a model file holds it (encode_state / decode_state), continued: the same iterates."""
    model, X, Y, *_ = toy
    one = solve(toy, passes=20, tol=None, shards=2, step="away")
    half = solve(toy, passes=10, tol=None, shards=2, step="away")
    tree, arrays = encode_state(half.state)
    st = decode_state(tree, arrays, model=model)
    assert st.v is not st.w
    two = ShardedBCFW(shards=2, round_length=2, step="away").solve(
        Problem(model, X, Y, LAM), StopRule(max_passes=10, tol=None, check_every=5), state=st, rng=0)
    np.testing.assert_allclose(two.w, one.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(two.state.v, one.state.v, rtol=0, atol=1e-12)

    def refused(edit, match):
        forged = decode_state(tree, arrays, model=model)
        edit(forged)
        with pytest.raises(ValueError, match=match):
            decode_state(*encode_state(forged), model=model)

    def unprojected(s):
        s.w[model.nonnegative_indices] -= 1.0
    refused(unprojected, r"ShardedState.w.*w = Pi\(v\)")

    def shifted(s):
        s.v += 0.5
        s.w[:] = problem_project(model, s.v)
    refused(shifted, r"ShardedState.v.*v = sum_k w_k")

    def aliased(s):
        s.v = s.w
    refused(aliased, r"ShardedState.v.*apart from w")


def problem_project(model, v):
    out = v.copy()
    out[model.nonnegative_indices] = np.maximum(out[model.nonnegative_indices], 0.0)
    return out
