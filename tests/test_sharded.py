"""Sharded training (issue 52): K shards step their own blocks and combine in rounds.

Checked on tiny problems whose dual QP is solved exactly (tests/toy.py's enumerable model on the
Python route, and a small dense chain whose labellings are enumerated, on the compiled routes:
factored label weights and dense rows): the optimum is reached for K = 1, 2, 3 and K = n (shards of
one example); w = sum_i w_i after every round; the dual never decreases under the rules; the gap
is the serial definition at the same w; a run depends on K and the seed only.
"""
import itertools
import threading
import warnings

import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, Problem, StopRule
from structfw.solvers.sharded import (ShardedBCFW, combination_gamma, default_round_length, one_round,
                                      shard_indices)
from toy import EnumModel, exact_optimum, make_toy, primal

RULES = ("linesearch", "average", "add")


# ====================================================================== problems and references
def tiny_chain(n=7, S=3, F=4, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(1, 4)), F)) for _ in range(n)]
    Y = [rng.integers(0, S, x.shape[0]) for x in X]
    return sf.models.ChainModel(S, F), X, Y


def chain_optimum(model, X, Y, lam):
    """D* and w* of the dual QP of a tiny chain problem, every labelling enumerated (cvxopt)."""
    import cvxopt
    from cvxopt import solvers

    n = len(X)
    cols, b, block = [], [], []
    for i, (x, y) in enumerate(zip(X, Y)):
        for z in itertools.product(range(model.n_states), repeat=x.shape[0]):
            psi = model.psi(x, y, np.array(z))
            psi = psi.toarray() if hasattr(psi, "toarray") else np.asarray(psi, float)
            cols.append(psi / (lam * n))
            b.append(model.loss(y, np.array(z)) / n)
            block.append(i)
    A, b = np.array(cols).T, np.array(b)
    N = A.shape[1]
    Aeq = np.zeros((n, N))
    Aeq[block, np.arange(N)] = 1.0
    solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    sol = solvers.qp(cvxopt.matrix(lam * A.T @ A + 1e-12 * np.eye(N)), cvxopt.matrix(-b), cvxopt.matrix(-np.eye(N)),
                     cvxopt.matrix(np.zeros(N)), cvxopt.matrix(Aeq), cvxopt.matrix(np.ones(n)))
    alpha = np.array(sol["x"]).ravel()
    w = A @ alpha
    return -0.5 * lam * w @ w + b @ alpha, w


@pytest.fixture(scope="module")
def toy():
    model, X, Y = make_toy(n=7, m=4, d=3, seed=1)
    lam = 0.1
    return model, X, Y, lam, exact_optimum(model, X, Y, lam)[0]


@pytest.fixture(scope="module")
def chain():
    model, X, Y = tiny_chain()
    lam = 1.0
    return model, X, Y, lam, chain_optimum(model, X, Y, lam)[0]


def solve(model, X, Y, lam, passes=200, tol=1e-10, seed=0, **options):
    options.setdefault("round_length", 2)
    options.setdefault("combine", "linesearch")
    return ShardedBCFW(**options).solve(Problem(model, X, Y, lam), StopRule(max_passes=passes, tol=tol, check_every=1),
                                        rng=seed)


def shard_sum(problem, ctx):
    """sum_i w_i and sum_i l_i over every shard's blocks, in global units (w_i^e / sigma', l_i^e n_k / n)."""
    w, ell = np.zeros(problem.d), 0.0
    for sh in ctx.shards:
        st = sh.st
        if st.factored is not None:
            from structfw.solvers._factored import positions

            rows = st.factored.total(positions(sh.sub.compiled_oracle())[0], problem.d)
        else:
            rows = np.sum(st.wi, axis=0)
        w += rows / sh.sigma
        ell += float(st.li.sum()) * sh.scale
    return w, ell


# ====================================================================== the optimum
@pytest.mark.parametrize("K", [1, 2, 3, 7])
@pytest.mark.parametrize("options", [dict(step="pairwise"), dict(step="away"),
                                     dict(step="pairwise", sampling="gap"), dict(step="pairwise", cache=True)],
                         ids=["pairwise", "away", "pairwise-gap", "pairwise-cache"])
def test_line_search_rounds_reach_the_exact_optimum_on_the_python_route(toy, K, options):
    model, X, Y, lam, Dstar = toy
    res = solve(model, X, Y, lam, shards=K, passes=400, **options)
    assert res.dual == pytest.approx(Dstar, abs=1e-8)
    assert 0.0 <= res.gap < 1e-6


@pytest.mark.parametrize("storage", ["factored", "dense"])
@pytest.mark.parametrize("K", [1, 2, 3, 7])
@pytest.mark.parametrize("options", [dict(step="pairwise"), dict(step="away"), dict(step="pairwise", sampling="gap")],
                         ids=["pairwise", "away", "pairwise-gap"])
def test_line_search_rounds_reach_the_exact_optimum_on_the_compiled_routes(chain, storage, K, options):
    model, X, Y, lam, Dstar = chain
    res = solve(model, X, Y, lam, shards=K, block_storage=storage, **options)
    assert res.state.states[0].storage == storage
    assert res.dual == pytest.approx(Dstar, abs=1e-7)
    assert 0.0 <= res.gap < 1e-5


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("options", [dict(), dict(step="pairwise"), dict(cache=True), dict(sampling="gap"),
                                     dict(sampling="perm", step="away"), dict(step_size="predefined")],
                         ids=["fw", "pairwise", "cache", "gap", "perm-away", "predefined"])
def test_every_rule_and_option_approaches_the_optimum_with_a_valid_certificate(chain, rule, options):
    """Each rule converges with each block-local option (FW steps at their O(1/k) rate); the reported
    gap bounds the distance to the optimum from both sides (weak duality)."""
    model, X, Y, lam, Dstar = chain
    res = solve(model, X, Y, lam, shards=3, combine=rule, passes=150, **options)
    assert res.dual <= Dstar + 1e-9
    assert res.primal >= Dstar - 1e-9
    assert Dstar - res.dual <= res.gap + 1e-9
    # the predefined step 2n/(k+2n) is O(1/k) and averaging takes 1/K of each round's change
    slack = 5.0 if options.get("step_size") == "predefined" else 1.0
    assert res.gap < 0.05 * slack
    assert Dstar - res.dual < 0.01 * slack


def test_shards_of_one_example_with_every_rule(chain):
    """K = n: the line search reaches the optimum; averaging moves by 1/K of each round's change, so
    it (and adding, with its K-fold local quadratic term) are slower, but converge."""
    model, X, Y, lam, Dstar = chain
    assert [len(i) for i in shard_indices(len(X), len(X))] == [1] * len(X)
    for rule, within in (("linesearch", 1e-7), ("add", 2e-3), ("average", 2e-2)):
        res = solve(model, X, Y, lam, shards=len(X), combine=rule, step="pairwise", passes=300)
        assert Dstar - 1e-9 <= res.primal and res.dual <= Dstar + 1e-9
        assert Dstar - res.dual < within, rule


# ====================================================================== round invariants
def _rounds(model, X, Y, lam, rule, rounds=40, **options):
    """(problem, ctx, duals, sums): the dual and sum_i w_i - w after each of ``rounds`` rounds."""
    problem = Problem(model, X, Y, lam)
    solver = ShardedBCFW(shards=3, combine=rule, round_length=3, **options)
    ctx = solver.init_state(problem, None, 0)
    duals, errors = [ctx.state.dual()], []
    for _ in range(rounds):
        one_round(ctx, rule)
        w, ell = shard_sum(problem, ctx)
        errors.append(max(float(np.abs(w - ctx.state.w).max()), abs(ell - ctx.state.ell)))
        duals.append(ctx.state.dual())
    return problem, ctx, np.array(duals), np.array(errors)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("options", [dict(block_storage="factored"), dict(block_storage="dense"),
                                     dict(block_storage="dense", step="pairwise"), dict(step="away"),
                                     dict(cache=True, block_storage="dense"), dict(sampling="gap")],
                         ids=["factored", "dense", "pairwise-stale-rows", "away", "cache", "gap"])
def test_w_is_the_sum_of_the_blocks_and_the_dual_never_falls_after_every_round(chain, rule, options):
    model, X, Y, lam, _ = chain
    _, _, duals, errors = _rounds(model, X, Y, lam, rule, **options)
    assert errors.max() < 1e-10
    assert np.all(np.diff(duals) >= -1e-12)
    assert duals[-1] > duals[0]


@pytest.mark.parametrize("rule", RULES)
def test_the_same_on_the_python_route(toy, rule):
    model, X, Y, lam, _ = toy
    for options in (dict(), dict(step="pairwise"), dict(cache=True)):
        problem = Problem(model, X, Y, lam)
        ctx = ShardedBCFW(shards=3, combine=rule, round_length=2, **options).init_state(problem, None, 0)
        before = ctx.state.dual()
        for _ in range(30):
            one_round(ctx, rule)
            w, ell = shard_sum(problem, ctx)
            np.testing.assert_allclose(w, ctx.state.w, rtol=0, atol=1e-12)
            assert ell == pytest.approx(ctx.state.ell, abs=1e-12)
            assert ctx.state.dual() >= before - 1e-12
            before = ctx.state.dual()


def test_the_line_search_gamma_maximises_the_dual_along_the_summed_change():
    rng = np.random.default_rng(3)
    lam, w, U = 0.3, rng.normal(size=5), rng.normal(size=5)
    for dl in (-1.0, 0.1, 1.0, 10.0):
        g = combination_gamma("linesearch", lam, w, U, dl, 4)
        D = lambda t: -0.5 * lam * np.sum((w + t * U) ** 2) + t * dl
        grid = np.linspace(0, 1, 2001)
        assert D(g) >= max(D(t) for t in grid) - 1e-12
        assert 0.0 <= g <= 1.0
    assert combination_gamma("average", lam, w, U, 1.0, 4) == 0.25
    assert combination_gamma("add", lam, w, U, -5.0, 4) == 1.0


# ====================================================================== the certificate
@pytest.mark.parametrize("rule", ["linesearch", "add"])
def test_the_gap_is_the_serial_definition_at_the_same_w(toy, rule):
    """P(w) from the model's own oracle, D from the shards' l: their difference is the summed shard gap."""
    model, X, Y, lam, _ = toy
    res = solve(model, X, Y, lam, shards=3, combine=rule, passes=5, tol=None)
    problem = Problem(model, X, Y, lam)
    P = primal(model, X, Y, lam, res.w)
    D = -0.5 * lam * res.w @ res.w + res.state.ell
    assert res.primal == pytest.approx(P, abs=1e-12)
    assert res.dual == pytest.approx(D, abs=1e-12)
    assert res.gap == pytest.approx(P - D, abs=1e-10)
    # the serial engine's own gap pass at the same dual point agrees
    serial = BCFW().gap_pass(problem, _serial_state(problem, res.w))[0]
    assert serial == pytest.approx(P, abs=1e-12)


def _serial_state(problem, w):
    st = BCFW().new_state(problem, 0)
    st.w[:] = w
    return st


def test_averaging_reports_the_rounds_average_and_its_gap(chain):
    model, X, Y, lam, Dstar = chain
    res = solve(model, X, Y, lam, shards=2, averaging="weighted", passes=30, tol=None)
    avg = res.state.avg
    assert avg[0] == "weighted" and avg[1] == res.state.rounds
    np.testing.assert_array_equal(res.w, avg[2])
    assert res.dual == pytest.approx(-0.5 * lam * avg[2] @ avg[2] + avg[3], abs=1e-12)
    assert res.dual <= Dstar + 1e-9 <= res.primal + 2e-9
    assert res.gap == pytest.approx(res.primal - res.dual, abs=1e-12)


# ====================================================================== determinism
@pytest.mark.parametrize("options", [dict(), dict(sampling="gap", step="pairwise"), dict(cache=True)])
def test_a_run_depends_on_K_and_the_seed_only(chain, options):
    model, X, Y, lam, _ = chain
    runs = [solve(model, X, Y, lam, shards=3, passes=10, tol=None, n_jobs=j, **options) for j in (1, 3, 3)]
    # n_jobs=1 runs the rounds in Python, n_jobs=3 in compiled rounds: the same steps, the same
    # values to rounding (the two routes compile their sums differently, e.g. without FMA)
    for r in runs[1:]:
        np.testing.assert_allclose(r.w, runs[0].w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(r.trace["gap"], runs[0].trace["gap"], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(runs[2].w, runs[1].w)   # the same route twice: to the bit
    other = solve(model, X, Y, lam, shards=3, passes=10, tol=None, seed=1, **options)
    assert not np.array_equal(other.w, runs[0].w)


@pytest.mark.parametrize("storage", ["factored", "dense"])
@pytest.mark.parametrize("sampling", ["uniform", "perm", "gap", "max_gap"])
@pytest.mark.parametrize("rule", RULES)
def test_compiled_rounds_take_the_python_rounds_steps(chain, storage, sampling, rule, monkeypatch):
    """A thread per shard runs its rounds in one compiled call (barrier, combination and blend inside);
    one thread for all runs them round by round in Python: the same steps, the same iterates to
    rounding (the two routes' kernels may round sums differently on another CPU target)."""
    import structfw.solvers.sharded as sharded

    model, X, Y, lam, _ = chain
    calls = []
    real = sharded.run_compiled_rounds
    monkeypatch.setattr(sharded, "run_compiled_rounds", lambda *a: calls.append(1) or real(*a))
    kw = dict(shards=3, combine=rule, passes=6, tol=None, block_storage=storage, sampling=sampling)
    python = solve(model, X, Y, lam, n_jobs=1, **kw)
    assert not calls
    compiled = solve(model, X, Y, lam, n_jobs=3, **kw)
    assert calls
    np.testing.assert_allclose(compiled.w, python.w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(compiled.trace["gap"], python.trace["gap"], rtol=1e-9, atol=1e-12)
    assert compiled.state.ell == pytest.approx(python.state.ell, rel=1e-9, abs=1e-12)
    assert compiled.state.rounds == python.state.rounds


# ====================================================================== the skeleton: warm starts, budget, Ctrl-C
def test_two_fits_of_five_passes_are_one_of_ten(chain):
    model, X, Y, lam, _ = chain
    kw = dict(shards=2, lam=lam, tol=None, random_state=0, check_every=1, executor="thread",
              solver=BCFW(step="pairwise", sampling="gap"))
    one = sf.StructuredSVM(model, max_passes=10, **kw).fit(X, Y)
    two = sf.StructuredSVM(model, max_passes=5, warm_start=True, **kw).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        two.fit(X, Y)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=0, atol=1e-13)
    assert two.gap_ == pytest.approx(one.gap_, abs=1e-13)
    # the continued trace counts on from the first fit's passes, once (it read about 17 when the sharded
    # trace recorded the state's total and the estimator added the first fit's)
    assert two.n_iter_ == pytest.approx(one.n_iter_) and one.n_iter_ < 12  # (rounds overshoot a pass)
    np.testing.assert_allclose(two.trace_["engine_passes"], one.trace_["engine_passes"][-6:])


def test_a_warm_start_with_other_shards_starts_afresh(chain):
    model, X, Y, lam, _ = chain
    svm = sf.StructuredSVM(model, lam=lam, max_passes=2, shards=2, executor="thread", warm_start=True).fit(X, Y)
    svm.set_params(shards=3)
    with pytest.warns(RuntimeWarning, match="shards"):
        svm.fit(X, Y)
    assert svm.state_.K == 3


def test_a_warm_start_at_a_new_lam_continues_to_its_optimum(chain):
    model, X, Y, lam, _ = chain
    svm = sf.StructuredSVM(model, lam=lam, max_passes=20, tol=None, shards=2, executor="thread", warm_start=True,
                           solver=BCFW(step="pairwise")).fit(X, Y)
    svm.set_params(lam=0.5, max_passes=300, tol=1e-9)
    svm.fit(X, Y)
    assert svm.dual_ == pytest.approx(chain_optimum(model, X, Y, 0.5)[0], abs=1e-7)


def test_the_estimator_reports_what_a_serial_fit_reports(chain):
    model, X, Y, lam, Dstar = chain
    svm = sf.StructuredSVM(model, lam=lam, max_passes=300, tol=1e-8, shards=3, executor="thread",
                           solver=ShardedBCFW(shards=3, step="pairwise", combine="linesearch"), random_state=0).fit(X, Y)
    assert svm.stopped_ == "tol" and svm.gap_ <= 1e-8
    assert svm.dual_ == pytest.approx(Dstar, abs=1e-7)
    assert svm.primal_ - svm.dual_ == pytest.approx(svm.gap_, abs=1e-9)
    tr = svm.trace_
    assert tr["gap"][-1] == svm.gap_ and tr["shards"][-1] == 3
    assert np.all(np.diff(tr["engine_passes"]) >= 0)
    assert svm.score(X, Y) > 0.5


def test_time_budget_and_max_passes_stop_a_sharded_fit(chain):
    model, X, Y, lam, _ = chain
    svm = sf.StructuredSVM(model, lam=lam, max_passes=3, tol=None, shards=2, executor="thread").fit(X, Y)
    assert svm.stopped_ == "max_passes" and svm.n_iter_ >= 3
    svm = sf.StructuredSVM(model, lam=lam, max_passes=1e9, tol=None, time_budget=0.3, shards=2,
                           executor="thread").fit(X, Y)
    assert svm.stopped_ == "time_budget"


def test_ctrl_c_stops_after_the_round_in_flight():
    from interrupts import check_interrupted_fits

    model, X, Y = tiny_chain(n=40, seed=2)

    def check_state(st):
        problem = Problem(model, X, Y, 0.1)
        ctx = ShardedBCFW(shards=2).init_state(problem, st, 0)
        w, ell = shard_sum(problem, ctx)
        np.testing.assert_allclose(w, st.w, rtol=0, atol=1e-10)

    check_interrupted_fits(lambda p: sf.StructuredSVM(model, lam=0.1, max_passes=p, tol=None, shards=2,
                                                      executor="thread", check_every=5),
                           X, Y, np.random.default_rng(0), 3, check_state)


# ====================================================================== processes
@pytest.mark.parametrize("options", [dict(), dict(step="pairwise", sampling="gap"), dict(cache=True),
                                     dict(averaging="weighted", step="away")], ids=["fw", "pairwise-gap", "cache", "avg"])
@pytest.mark.parametrize("rule", ["linesearch", "add"])
def test_processes_take_the_threads_steps(chain, options, rule):
    """Each worker process receives its shard once and keeps its state; the iterates are the threads'."""
    model, X, Y, lam, _ = chain
    kw = dict(shards=3, combine=rule, passes=8, tol=None, **options)
    threads = solve(model, X, Y, lam, executor="thread", **kw)
    processes = solve(model, X, Y, lam, executor="process", **kw)
    np.testing.assert_allclose(processes.w, threads.w, rtol=0, atol=1e-14)
    np.testing.assert_allclose(processes.trace["gap"], threads.trace["gap"], rtol=0, atol=1e-14)
    assert [s.k for s in processes.state.states] == [s.k for s in threads.state.states]


def _kill_worker_after(monkeypatch, rounds, shard=1):
    """SIGKILL shard ``shard``'s worker once the caller has finished each round listed in ``rounds`` (a dead
    worker's next call finds its pipe closed)."""
    import structfw.solvers.sharded as sharded

    real, done, killed = sharded.one_round, [0], []
    restore = sharded.RemoteShard._restore

    def counted(self):
        killed.append("restored")
        return restore(self)

    monkeypatch.setattr(sharded.RemoteShard, "_restore", counted)

    def one_round(ctx, rule):
        gamma = real(ctx, rule)
        done[0] += 1
        if done[0] in rounds:
            ctx.shards[shard].kill()  # SIGKILL, waited for
            killed.append("killed")
        return gamma

    monkeypatch.setattr(sharded, "one_round", one_round)
    return killed


@pytest.mark.parametrize("options", [dict(), dict(step="pairwise", sampling="gap", cache=True)], ids=["fw", "mixed"])
def test_a_killed_worker_is_restored_and_the_fit_unchanged(chain, monkeypatch, options):
    """Killed before the first checkpoint file (restored from its seed) and after one (from the file), the
    calls since replayed: the fit's iterates are those of the fit without the kills."""
    model, X, Y, lam, _ = chain
    solver = ShardedBCFW(shards=3, executor="process", round_length=2, **options)
    stop = StopRule(max_passes=12, tol=None, check_every=4)
    expected = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    killed = _kill_worker_after(monkeypatch, {2, 12, 13})  # 2 rounds a pass; files at rounds 8, 16
    got = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    assert killed == ["killed", "restored"] * 3
    np.testing.assert_array_equal(got.w, expected.w)
    np.testing.assert_array_equal(got.trace["gap"], expected.trace["gap"])


def test_a_worker_that_always_dies_gives_up_naming_its_shard(chain, monkeypatch):
    import structfw.solvers.sharded as sharded

    model, X, Y, lam, _ = chain
    monkeypatch.setattr(sharded.RemoteShard, "MAX_RESTARTS", 1)
    _kill_worker_after(monkeypatch, set(range(1, 1000)))
    with pytest.raises(RuntimeError, match="the worker of shard 1 died 2 times"):
        solve(model, X, Y, lam, shards=3, executor="process", passes=5, tol=None)


class FlakyToy(EnumModel):
    """The toy model whose oracle raises ``error`` on the calls numbered in ``fail_at`` (counted over every
    thread)."""

    def __init__(self, model, fail_at=(), error=MemoryError):
        super().__init__(model.phi, model.loss_table)
        self.calls, self.fired, self.fail_at, self.error = 0, 0, set(fail_at), error
        self.lock = threading.Lock()

    def loss_augmented_decode(self, x, y_true, w):
        with self.lock:
            self.calls += 1
            fail = self.calls in self.fail_at
            self.fired += fail
        if fail:
            raise self.error("transient")
        return super().loss_augmented_decode(x, y_true, w)


def save_at_every_checkpoint(monkeypatch, first_save):
    """`ThreadRecovery` saves at every checkpoint from ``first_save`` seconds on (before: the seeds), and each
    `Shard` knows its fit's shards (``_fit_shards``), so that `_fail_calls` can pick one."""
    import structfw.solvers.sharded as sharded

    monkeypatch.setattr(sharded.ThreadRecovery, "FIRST_SAVE", first_save)
    monkeypatch.setattr(sharded.ThreadRecovery, "SPACING", 0.0)
    shards_of = sharded.ShardedContext.__init__

    def remember(ctx, problem, state, shards, *args):
        shards_of(ctx, problem, state, shards, *args)
        for sh in shards:
            sh._fit_shards = shards

    monkeypatch.setattr(sharded.ShardedContext, "__init__", remember)


def _fail_calls(monkeypatch, method, numbers, shard=1):
    """Shard ``shard``'s ``method`` (round or gaps) raises MemoryError on its calls numbered in ``numbers``,
    before it runs: a transient fault of its thread.  Returns the list of the calls that raised."""
    import structfw.solvers.sharded as sharded

    real, seen, fired = getattr(sharded.Shard, method), {}, []

    def flaky(self, *args):
        if self.sub.n and self is self._fit_shards[shard]:
            seen[id(self)] = seen.get(id(self), 0) + 1
            if seen[id(self)] in numbers:
                fired.append(seen[id(self)])
                raise MemoryError("transient")
        return real(self, *args)

    monkeypatch.setattr(sharded.Shard, method, flaky)
    return fired


@pytest.mark.parametrize("options", [dict(), dict(step="pairwise", sampling="gap", cache=True)], ids=["fw", "mixed"])
@pytest.mark.parametrize("first_save", [5.0, 0.0], ids=["from-seeds", "from-the-saved-state"])
def test_a_thread_that_raises_is_rewound_and_the_fit_unchanged(toy, options, first_save, monkeypatch):
    """A round that raises (rerun after a rewind to the last save, or from the seeds before the first) and a gap
    pass that raises (made again): the fit's iterates are those of the fit without the faults, a warning each."""
    import structfw.solvers.sharded as sharded

    model, X, Y, lam, _ = toy
    solver = ShardedBCFW(shards=3, executor="thread", round_length=2, **options)
    stop = StopRule(max_passes=12, tol=None, check_every=4)
    expected = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    save_at_every_checkpoint(monkeypatch, first_save)
    rounds = _fail_calls(monkeypatch, "round", {2, 20, 21})  # its calls, reruns counted: one early, two in a row
    gaps = _fail_calls(monkeypatch, "gaps", {2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    warned = [str(c.message) for c in caught if issubclass(c.category, RuntimeWarning)]
    assert rounds == [2, 20, 21] and gaps == [2]
    back = [m for m in warned if "goes back to its last checkpoint" in m]
    assert len(back) == 3
    assert ("(round 0)" in back[-1]) == (first_save > 0)  # the seeds, or the state saved at a later checkpoint
    assert sum("its 'gaps' runs again" in m for m in warned) == 1
    np.testing.assert_array_equal(got.w, expected.w)
    np.testing.assert_array_equal(got.trace["gap"], expected.trace["gap"])
    assert [s.k for s in got.state.states] == [s.k for s in expected.state.states]


def test_a_compiled_round_that_raises_is_rewound_and_the_fit_unchanged(chain, monkeypatch):
    """Shard 1's thread fails at the start of two compiled calls (the others stop at their barrier)."""
    import structfw.solvers.sharded as sharded

    model, X, Y, lam, _ = chain
    stop = StopRule(max_passes=12, tol=None, check_every=4)
    solver = ShardedBCFW(shards=3, executor="thread", round_length=2)
    expected = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    real, calls = sharded._guarded, [0]

    def flaky(board, k, fn, args):
        if k == 1:
            calls[0] += 1
            if calls[0] in (2, 5):
                board[0][k] = sharded._ABORT
                raise MemoryError("transient")
        return real(board, k, fn, args)

    monkeypatch.setattr(sharded, "_guarded", flaky)
    with pytest.warns(RuntimeWarning, match="goes back to its last checkpoint"):
        got = solver.solve(Problem(model, X, Y, lam), stop, rng=0)
    assert calls[0] > 5  # the compiled route ran
    np.testing.assert_array_equal(got.w, expected.w)
    np.testing.assert_array_equal(got.trace["gap"], expected.trace["gap"])


def test_a_thread_that_always_raises_gives_up_and_bad_input_is_not_retried(toy):
    model, X, Y, lam, _ = toy
    stop = StopRule(max_passes=12, tol=None, check_every=4)
    always = FlakyToy(model, range(10, 10 ** 6))
    with pytest.warns(RuntimeWarning), pytest.raises(MemoryError) as raised:
        ShardedBCFW(shards=3, executor="thread", round_length=2).solve(Problem(always, X, Y, lam), stop, rng=0)
    assert "4 times in a row" in " ".join(getattr(raised.value, "__notes__", []))
    wrong = FlakyToy(model, (10,), error=ValueError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a retry would warn, and the warning would be raised instead
        with pytest.raises(Exception, match="transient") as raised:
            ShardedBCFW(shards=3, executor="thread", round_length=2).solve(Problem(wrong, X, Y, lam), stop, rng=0)
    assert isinstance(raised.value, ValueError) or isinstance(raised.value.__cause__, ValueError)
    assert wrong.fired == 1


def test_a_thread_fit_leaves_no_threads(chain):
    import threading

    model, X, Y, lam, _ = chain
    sf.StructuredSVM(model, lam=lam, max_passes=3, shards=3, executor="thread", check_every=1).fit(X, Y)
    with pytest.raises(ValueError):
        sf.StructuredSVM(model, lam=lam, shards=3, executor="thread", solver=BCFW(sampling="nope")).fit(X, Y)
    assert not [t for t in threading.enumerate() if t.name.startswith("structfw-shard")]


def test_a_process_fit_leaves_no_workers_and_no_files(chain, tmp_path, monkeypatch):
    import multiprocessing
    import tempfile

    model, X, Y, lam, _ = chain
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    svm = sf.StructuredSVM(model, lam=lam, max_passes=3, shards=2, executor="process", check_every=1).fit(X, Y)
    assert svm.state_.states[0] is not None and svm.n_iter_ >= 3
    assert multiprocessing.active_children() == []
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError):  # a fit that fails ends its workers too
        sf.StructuredSVM(model, lam=lam, shards=2, executor="process", solver=BCFW(sampling="nope")).fit(X, Y)
    assert multiprocessing.active_children() == []


# ====================================================================== what cannot work
@pytest.mark.parametrize("kwargs, words", [
    (dict(solver=BCFW(multi_plane=True, approx_rule="time")), ["approx_rule='time'", "shards=2"]),
    (dict(solver=BCFW(multi_plane=True, averaging="weighted")), ["averaging='weighted'", "multi_plane=True",
                                                                 "shards=2"]),
    (dict(solver=BCFW(minibatch=4)), ["minibatch", "shards"]),
    (dict(solver="fw"), ["shards", "solver"]),
    (dict(oracle_timeout=1.0), ["oracle_timeout", "shards"]),
    (dict(solver=ShardedBCFW(shards=3)), ["shards=2", "shards=3"]),
])
def test_combinations_that_cannot_work_name_both_options(chain, kwargs, words):
    model, X, Y, lam, _ = chain
    kwargs.setdefault("executor", "thread")
    with pytest.raises(ValueError) as err:
        sf.StructuredSVM(model, lam=lam, shards=2, max_passes=1, **kwargs).fit(X, Y)
    for word in words:
        assert word in str(err.value)


def test_more_shards_than_examples_are_refused(chain):
    model, X, Y, lam, _ = chain
    with pytest.raises(ValueError, match="shards=8 is more than the 7 training examples"):
        sf.StructuredSVM(model, lam=lam, shards=8, executor="thread", max_passes=1).fit(X, Y)
    with pytest.raises(ValueError, match="multi_plane=True and shards=2"):
        ShardedBCFW(shards=2, multi_plane=True, averaging="weighted")


def test_the_default_round_length_follows_the_cost_model():
    assert default_round_length(10, "thread") == 10  # at most a whole shard
    assert default_round_length(10 ** 6, "thread") < default_round_length(10 ** 6, "process")


# ====================================================================== the command line
def test_train_takes_shards_and_checks_its_executor():
    import click

    from structfw.cli.train import _check_execution_options

    assert _check_execution_options(None, None, None, shards=2) == "thread"
    assert _check_execution_options(None, "process", None, shards=2) == "process"
    with pytest.raises(click.UsageError, match="--shards runs its shards on threads or processes"):
        _check_execution_options(None, None, "local", shards=2)


@pytest.mark.slow
def test_structfw_train_with_shards_on_ocr():
    from click.testing import CliRunner

    from structfw.cli import main

    out = CliRunner().invoke(main, ["train", "--data", "ocr", "--passes", "2", "--shards", "2", "--quiet"])
    assert out.exit_code == 0, out.output
    assert "stopped: max_passes" in out.output


# ====================================================================== the benchmark
def test_the_benchmark_summarises_time_and_passes_to_the_target_per_seed():
    from structfw_bench.sharded import first_at, format_table, summarise

    tr = {"gap": [1.0, 0.05, 0.009, 0.001], "time_s": [0.0, 1.0, 2.0, 3.0], "passes": [0, 10, 20, 30]}
    assert first_at(tr, "time_s", 0.01) == 2.0 and first_at(tr, "passes", 0.1) == 10 and first_at(tr, "gap", 1e-9) is None

    def run(t):
        return dict(time_s={"0.1": t / 2, "0.01": t}, passes={"0.1": 5.0, "0.01": 10.0 * t}, curve={})

    doc = dict(targets=[0.1, 0.01], arms=summarise({"serial A": [run(2.0), run(4.0)], "serial B": [run(3.0), run(3.0)],
                                                      "K=2": [run(1.0), run(2.4)]}))
    assert doc["arms"]["K=2"]["median_ratio_to_best_serial"] == pytest.approx(np.median([1.0 / 2.0, 2.4 / 3.0]))
    assert doc["arms"]["serial A"]["median_time_s"]["0.01"] == 3.0
    assert "K=2" in format_table(doc)


def test_grid_search_clones_a_sharded_estimator_whose_state_is_saved_whole(tmp_path):
    from sklearn.model_selection import GridSearchCV

    model, X, Y = tiny_chain(n=30, seed=3)
    grid = GridSearchCV(sf.StructuredSVM(model, shards=2, executor="thread", max_passes=5), {"lam": [0.1, 1.0]},
                        cv=2).fit(X, Y)
    assert grid.best_estimator_.shards == 2 and grid.best_estimator_.state_.K == 2
    loaded = sf.load(grid.best_estimator_.save(tmp_path / "m.npz", state=True))
    assert loaded.state_.K == 2 and loaded.shards == 2
    np.testing.assert_array_equal(loaded.state_.w, grid.best_estimator_.state_.w)
