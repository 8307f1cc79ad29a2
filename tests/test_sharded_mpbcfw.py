"""MP-BCFW on shards (issue 52): outer iterations of sharded passes, decided over the global dual.

An outer iteration is an exact sharded pass (rounds with the oracle) and then approximate sharded
passes (rounds whose steps take the working sets' corners) while the slope rule of Shah et al.
(2015), Sec. 3.4, holds on the global dual and work counter.  Checked on the tiny problems of
tests/test_sharded.py (the toy on the Python route, the chain on the compiled general route): the
exact QP optimum for K = 1, 2, 3 and K = n under every rule; approximate passes run and call no
oracle; w = sum_i w_i and a dual that never falls; the same iterates on threads and processes; an
exact resume through a model file; the refusals and an older state file.
"""
import types
import warnings

import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, MPBCFW, Problem, StopRule
from structfw.solvers.sharded import ShardedBCFW, one_round
from structfw.solvers.state_file import decode_state, encode_state, state_digest
from test_sharded import chain, toy  # noqa: F401 (the fixtures: the tiny problems and their exact optima)
from test_sharded import _fail_calls, save_at_every_checkpoint, shard_sum, solve, tiny_chain
from toy import EnumModel

RULES = ("linesearch", "average", "add")
MP = dict(multi_plane=True, step="pairwise")
#: the MP-BCFW fields of a sharded state (absent from files written before MP-BCFW ran on shards)
MP_FIELDS = ("mp_iter", "mp_approx_passes", "mp_work", "mp_exact_dual", "mp_exact_cost")


class CountingModel(EnumModel):
    """The toy's model, counting its max-oracle calls."""

    calls = 0

    def loss_augmented_decode(self, x, y_true, w):
        type(self).calls += 1
        return super().loss_augmented_decode(x, y_true, w)


def no_flag():
    return types.SimpleNamespace(requested=False)


# ====================================================================== the optimum
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("K", [1, 2, 3, 7])
@pytest.mark.parametrize("problem", ["toy", "chain"])
def test_mp_bcfw_on_shards_reaches_the_exact_qp_optimum(request, problem, K, rule):
    """The toy has no compiled oracle (the Python route); the chain's rounds run compiled general chunks."""
    model, X, Y, lam, Dstar = request.getfixturevalue(problem)
    solver = ShardedBCFW(shards=K, combine=rule, round_length=2, **MP)
    plan = solver.init_state(Problem(model, X, Y, lam), None, 0).shards[0].ctx.plan
    assert (plan.compiled is not None and not plan.plain) == (problem == "chain")
    res = solver.solve(Problem(model, X, Y, lam), StopRule(max_passes=300, tol=1e-7, check_every=1), rng=0)
    assert res.stopped == "tol"
    assert abs(res.dual - Dstar) <= 1e-6 * abs(Dstar)
    assert 0.0 <= res.gap < 1e-7
    assert res.primal >= Dstar - 1e-9
    assert res.state.mp_iter == res.state.passes > 0
    assert [s.mp_iter for s in res.state.states] == [res.state.mp_iter] * K  # the planes' stamps


def test_the_mpbcfw_preset_runs_on_shards(chain):
    model, X, Y, lam, Dstar = chain
    svm = sf.StructuredSVM(model, lam=lam, shards=2, solver=MPBCFW(step="pairwise"), max_passes=300, tol=1e-7,
                           executor="thread", random_state=0).fit(X, Y)
    assert svm.stopped_ == "tol" and abs(svm.dual_ - Dstar) <= 1e-6 * abs(Dstar)
    assert svm.state_.mp_iter > 0


# ====================================================================== approximate passes
@pytest.mark.parametrize("problem", ["toy", "chain"])
def test_approximate_passes_run_and_call_no_oracle(request, problem):
    """The trace's oracle calls are the exact rounds' steps only, though the shards made many more steps
    (the chain's compiled chunks count their own); on the toy every call of the model's oracle is an
    exact pass's step or a checkpoint's gap pass."""
    model, X, Y, lam, _ = request.getfixturevalue(problem)
    if problem == "toy":
        model = CountingModel(model.phi, model.loss_table)
        CountingModel.calls = 0
    res = solve(model, X, Y, lam, shards=3, passes=12, tol=None, **MP)
    tr, st = res.trace, res.state
    assert int(np.sum(tr["approx_passes"])) > 0
    assert tr["outer_iterations"][-1] == st.mp_iter == 12
    # n = 7 on 3 shards, rounds of 2 steps: an exact pass is 2 rounds of 6 steps
    assert tr["oracle_calls"][-1] == 12 * 12
    assert st.steps > 2 * 12 * 12
    assert tr["engine_passes"][-1] == 12
    if problem == "toy":
        assert CountingModel.calls == tr["oracle_calls"][-1] + tr["monitor_calls"][-1]


def test_an_approximate_round_calls_no_oracle_and_raises_the_dual(toy):
    model, X, Y, lam, _ = toy
    counting = CountingModel(model.phi, model.loss_table)
    problem = Problem(counting, X, Y, lam)
    ctx = ShardedBCFW(shards=3, round_length=2, combine="linesearch", **MP).init_state(problem, None, 0)
    for _ in range(3):
        one_round(ctx, "linesearch", (1, False))
    CountingModel.calls = 0
    before = ctx.state.dual()
    for _ in range(10):
        one_round(ctx, "linesearch", (1, True))
        assert ctx.state.dual() >= before - 1e-12
        before = ctx.state.dual()
    assert CountingModel.calls == 0
    assert all(not sh.ctx.approx for sh in ctx.shards)


# ====================================================================== invariants
@pytest.mark.parametrize("case", ["toy", "chain-factored", "chain-dense", "chain-fw"])
def test_w_is_the_sum_of_the_blocks_and_the_dual_never_falls_over_checkpoints(request, case):
    name, _, variant = case.partition("-")
    model, X, Y, lam, _ = request.getfixturevalue(name)
    options = dict(MP, block_storage=variant) if variant in ("factored", "dense") else dict(MP)
    if variant == "fw":
        options["step"] = "fw"
    problem = Problem(model, X, Y, lam)
    solver = ShardedBCFW(shards=3, round_length=2, combine="linesearch", **options)
    ctx = solver.init_state(problem, None, 0)
    duals = [ctx.state.dual()]
    try:
        for _ in range(15):
            solver.run_pass(ctx, no_flag())
            w, ell = shard_sum(problem, ctx)
            np.testing.assert_allclose(w, ctx.state.w, rtol=0, atol=1e-10)
            assert ell == pytest.approx(ctx.state.ell, abs=1e-10)
            duals.append(ctx.state.dual())
    finally:
        ctx.close()
    assert np.all(np.diff(duals) >= -1e-12)
    assert ctx.state.mp_approx_passes >= 0 and ctx.state.mp_iter == 15
    res = solve(model, X, Y, lam, shards=3, passes=15, tol=None, **options)
    assert np.all(np.diff(res.trace["dual"]) >= -1e-12)


# ====================================================================== threads and processes
@pytest.mark.parametrize("problem, rule", [("chain", "linesearch"), ("toy", "add")])
def test_processes_take_the_threads_steps(request, problem, rule):
    model, X, Y, lam, _ = request.getfixturevalue(problem)
    kw = dict(shards=3, combine=rule, passes=8, tol=None, **MP)
    threads = solve(model, X, Y, lam, **kw)
    processes = solve(model, X, Y, lam, executor="process", **kw)
    np.testing.assert_array_equal(processes.w, threads.w)
    np.testing.assert_array_equal(processes.trace["gap"], threads.trace["gap"])
    np.testing.assert_array_equal(processes.trace["approx_passes"], threads.trace["approx_passes"])
    assert [s.k for s in processes.state.states] == [s.k for s in threads.state.states]
    assert processes.state.mp_work == threads.state.mp_work
    assert int(np.sum(threads.trace["approx_passes"])) > 0


@pytest.mark.parametrize("first_save", [5.0, 0.0], ids=["from-seeds", "from-the-saved-state"])
def test_a_thread_that_raises_in_an_mp_fit_is_rewound_and_the_fit_unchanged(toy, first_save, monkeypatch):
    """Shard 1's rounds raise on calls 3 (the first approximate round), 20 and 21: the fit goes back to its
    last save and reruns the rounds and the outer iterations' bookkeeping since, to the same iterates."""
    import structfw.solvers.sharded as sharded

    model, X, Y, lam, _ = toy
    solver = ShardedBCFW(shards=3, executor="thread", round_length=2, combine="linesearch", **MP)
    stop = StopRule(max_passes=12, tol=None, check_every=4)
    expected = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    save_at_every_checkpoint(monkeypatch, first_save)
    rounds = _fail_calls(monkeypatch, "round", {3, 20, 21})  # its calls, reruns counted
    flaky, kinds = sharded.Shard.round, []

    def kind_of(self, w, m, blend, mp=None):  # the kind of every call of shard 1, in the same count
        if self is self._fit_shards[1]:
            kinds.append(mp)
        return flaky(self, w, m, blend, mp)

    monkeypatch.setattr(sharded.Shard, "round", kind_of)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    assert rounds == [3, 20, 21] and kinds[2] == (1, True)
    assert sum("goes back to its last checkpoint" in str(c.message) for c in caught) == 3
    np.testing.assert_array_equal(got.w, expected.w)
    np.testing.assert_array_equal(got.trace["gap"], expected.trace["gap"])
    np.testing.assert_array_equal(got.trace["approx_passes"], expected.trace["approx_passes"])
    assert got.state.mp_work == expected.state.mp_work and got.state.mp_iter == expected.state.mp_iter


# ====================================================================== warm starts and files
def _fit(model, X, Y, passes, solver, warm=False):
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=passes, tol=None, random_state=0, check_every=1,
                           warm_start=warm, solver=solver)
    return svm.fit(X, Y)


@pytest.mark.parametrize("options", [dict(), dict(block_storage="dense", combine="add", sampling="gap")],
                         ids=["default", "dense-add-gap"])
def test_five_outer_iterations_and_five_more_are_ten(options, tmp_path):
    model, X, Y = tiny_chain(n=30, seed=3)
    solver = ShardedBCFW(shards=3, round_length=4, **MP, **options)
    one = _fit(model, X, Y, 10, solver)
    assert int(np.sum(one.trace_["approx_passes"])) > 0
    warm = _fit(model, X, Y, 5, solver)
    warm.set_params(warm_start=True)
    warm.fit(X, Y)
    loaded = sf.load(_fit(model, X, Y, 5, solver).save(tmp_path / "m", state=True))
    loaded.set_params(warm_start=True, max_passes=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded.fit(X, Y)
    for two in (warm, loaded):
        np.testing.assert_array_equal(two.coef_, one.coef_)
        assert two.gap_ == one.gap_
        assert two.trace_["engine_passes"][-1] == one.trace_["engine_passes"][-1] == 10
        for field in MP_FIELDS + ("rounds", "steps", "passes"):
            assert getattr(two.state_, field) == getattr(one.state_, field), field


# ====================================================================== refusals and old files
def test_the_time_rule_and_averaging_are_refused_on_shards(chain):
    model, X, Y, lam, _ = chain
    with pytest.raises(ValueError) as err:
        ShardedBCFW(shards=3, multi_plane=True, approx_rule="time")
    for word in ("approx_rule='time'", "shards=3", "approx_rule='work'"):
        assert word in str(err.value)
    with pytest.raises(ValueError, match="approx_rule='time' with shards=2"):
        sf.StructuredSVM(model, lam=lam, shards=2, executor="thread", max_passes=1,
                         solver=BCFW(multi_plane=True, approx_rule="time")).fit(X, Y)
    with pytest.raises(ValueError, match="averaging='weighted' with multi_plane=True and shards=2"):
        ShardedBCFW(shards=2, multi_plane=True, averaging="weighted")
    ShardedBCFW(shards=2, approx_rule="time")  # without MP-BCFW the rule is not read
    ShardedBCFW(shards=2, averaging="weighted")


def _tree_without(tree, arrays, fields):
    """The encoded state with ``fields`` of its root removed (as a file written before they existed)."""
    root = dict(tree["root"], v={k: v for k, v in tree["root"]["v"].items() if k not in fields})
    return {"root": root, "digest": state_digest(root, arrays)}


def _forged(tree, arrays, model, edit):
    st = decode_state(tree, arrays, model=model)
    edit(st)
    return encode_state(st)


def test_an_older_sharded_state_reads_and_the_mp_fields_are_checked(chain):
    model, X, Y, lam, _ = chain
    res = solve(model, X, Y, lam, shards=2, passes=3, tol=None, **MP)
    tree, arrays = encode_state(res.state)
    assert decode_state(tree, arrays, model=model).mp_iter == res.state.mp_iter == 3
    old = solve(model, X, Y, lam, shards=2, passes=3, tol=None)  # a fit without MP-BCFW, as before
    otree, oarrays = encode_state(old.state)
    st = decode_state(_tree_without(otree, oarrays, MP_FIELDS), oarrays, model=model)
    assert [getattr(st, f) for f in MP_FIELDS] == [0, 0, 0.0, 0.0, 0.0]
    cont = ShardedBCFW(shards=2, round_length=2, combine="linesearch").solve(
        Problem(model, X, Y, lam), StopRule(max_passes=2, tol=None, check_every=1), state=st)
    assert cont.state.passes == 5

    def setter(field, value):
        return lambda s: setattr(s, field, value)

    for field, value in (("mp_iter", -1), ("mp_approx_passes", 1.5), ("mp_work", -1.0),
                         ("mp_exact_dual", float("nan")), ("mp_exact_cost", -2.0)):
        with pytest.raises(ValueError, match=rf"ShardedState\.{field}"):
            decode_state(*_forged(tree, arrays, model, setter(field, value)), model=model)

    def ahead(s):
        s.states[1].mp_iter = s.mp_iter + 1
    with pytest.raises(ValueError, match=r"ShardedState.states\[1\].mp_iter"):
        decode_state(*_forged(tree, arrays, model, ahead), model=model)
