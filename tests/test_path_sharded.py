"""The regularisation path with a sharded engine (issue 52): regularization_path(..., solver=ShardedBCFW(...)).

On a tiny chain whose dual QP is solved exactly (tests/test_sharded.py's `chain_optimum`): every w of
the path is eps-approximate at lam inside every piece (tests/test_path.py's query points), the path
ends like the serial one, Proposition 1 on the shards keeps w and scales l (and the state still reads
back through the model files' checks), the shards' state at the oracle's corners is the serial
initial point, and what the path cannot run on shards is refused by name.
"""
import math

import numpy as np
import pytest

from structfw.path import regularization_path
from structfw.solvers import BCFW, Problem, StopRule
from structfw.solvers.sharded import ShardedBCFW
from structfw.solvers.state_file import decode_state, encode_state
from test_path import _query_lams
from test_sharded import chain_optimum, tiny_chain

EPS, KAPPA, MIN_LAM = 0.25, 0.5, 0.3
# the path's default engine: pairwise steps (lazy rows on a compiled chain) and gap sampling
ENGINE = dict(step="pairwise", sampling="gap", gap_refresh=2)


def sharded(**options):
    return ShardedBCFW(**dict(dict(shards=2, block_storage="dense", **ENGINE), **options))


def primal_at(model, X, Y, lam, w):
    prob = Problem(model, X, Y, lam)
    return prob.primal(w, float(prob.batch_hinges(w).sum()))


@pytest.fixture(scope="module")
def data():
    return tiny_chain(n=8, seed=2)


@pytest.fixture(scope="module")
def paths(data):
    model, X, Y = data
    common = dict(eps=EPS, kappa=KAPPA, min_lam=MIN_LAM, random_state=0)
    serial = regularization_path(model, X, Y, solver=BCFW(block_storage="dense", **ENGINE), **common)
    threads = regularization_path(model, X, Y, solver=sharded(), **common)
    return serial, threads


def test_every_breakpoint_of_the_sharded_path_is_eps_approximate(data, paths):
    model, X, Y = data
    serial, path = paths
    bp = path.breakpoints
    assert len(bp) >= 3 and np.all(np.diff(bp) < 0)
    assert np.all(path.gaps <= KAPPA * EPS + 1e-12)
    assert path.status == serial.status and path.status in ("ended", "min_lam")
    assert path.meta["solver"].endswith("2shards")
    assert path.breakpoints[0] == serial.breakpoints[0]  # lam^inf does not depend on the engine
    np.testing.assert_allclose(path.w_inf, serial.w_inf, rtol=0, atol=1e-14)
    worst = 0.0
    for lam in _query_lams(path):
        D, _ = chain_optimum(model, X, Y, lam)
        sub = primal_at(model, X, Y, lam, path.coef_at(lam)) - D
        assert sub <= EPS + 1e-6, (lam, sub)
        worst = max(worst, sub)
        if lam <= bp[0]:
            assert path.gap_bound_at(lam) <= EPS + 1e-9
    assert worst > 0.2 * EPS  # not vacuous: the path uses its eps budget


def test_proposition_1_on_the_shards_keeps_w_scales_l_and_reads_back(data):
    model, X, Y = data
    lam = 0.5
    prob = Problem(model, X, Y, lam)
    res = sharded().solve(prob, StopRule(max_passes=3, tol=None), rng=0)
    st = res.state
    n = prob.n
    gap0 = primal_at(model, X, Y, lam, st.w) - st.dual()
    delta0, ell0, w0 = st.delta(), st.ell, st.w.copy()
    assert delta0 > 0 and gap0 >= -1e-12
    rho = 0.6
    st.keep_w_change_lam(rho * lam)
    assert st.lam == rho * lam and st.needs_refresh
    np.testing.assert_allclose(st.w, w0, rtol=0, atol=1e-12 * (1 + np.abs(w0).max()))
    assert st.ell == pytest.approx(rho * ell0, rel=1e-12)
    for s in st.states:
        assert s.lam == rho * lam * n / (s.n * st.sigma)
    assert st.ell == pytest.approx(sum(s.n * s.ell for s in st.states) / n, rel=1e-12)
    # the gap at the new lam is g + (1 - rho) Delta (Proposition 1), the dual read from the state
    gap1 = primal_at(model, X, Y, rho * lam, st.w) - st.dual()
    assert gap1 == pytest.approx(gap0 + (1 - rho) * delta0, abs=1e-10)
    # the model files' checks of a sharded state (lam_k, l and w as the shards' sums) hold
    back = decode_state(*encode_state(st))
    assert back.lam == st.lam
    np.testing.assert_array_equal(back.w, st.w)
    # a solve continues it at the new lam without rescaling (the shards' block sums checked): its
    # first gap pass, which meets the tolerance, is gap1 at the same w
    res2 = sharded().solve(prob.with_lam(rho * lam), StopRule(max_passes=1, tol=1e9), state=st, rng=0)
    assert res2.state is st
    np.testing.assert_array_equal(st.w, w0)
    assert res2.gap == pytest.approx(gap1, abs=1e-10)


def test_state_at_corners_is_fresh_at_the_truth_and_the_serial_start_at_the_oracles_corners(data):
    model, X, Y = data
    lam = 2.0
    prob = Problem(model, X, Y, lam)
    solver = sharded()
    st = solver.state_at_corners(prob, list(Y), rng=0)
    fresh = solver.new_state(prob, 0, st.combine, subs=None)
    assert st.entropy == fresh.entropy and st.sigma == fresh.sigma
    assert np.all(st.w == 0) and st.ell == 0.0
    for s, f in zip(st.states, fresh.states):
        assert s.lam == f.lam and s.n == f.n
        assert np.all(s.wi == 0) and np.all(s.li == 0) and np.all(s.w == 0)
        assert s.rng.bit_generator.state == f.rng.bit_generator.state
    decode_state(*encode_state(st))
    # at the oracle's labellings at w = 0: the serial initialisation's w_inf and l
    labellings = [r[0] for r in prob.batch_oracle(np.zeros(prob.d))]
    serial = BCFW(block_storage="dense", **ENGINE).state_at_corners(prob, labellings, rng=0)
    st = solver.state_at_corners(prob, labellings, rng=0)
    assert np.abs(st.w).max() > 0
    np.testing.assert_allclose(st.w, serial.w, rtol=1e-12, atol=1e-15)
    assert st.ell == pytest.approx(serial.ell, rel=1e-12)
    assert st.delta() == pytest.approx(serial.delta(), rel=1e-12)
    back = decode_state(*encode_state(st))
    np.testing.assert_array_equal(back.w, st.w)
    for s in st.states:
        assert s.lam == lam * prob.n / (s.n * st.sigma)
        np.testing.assert_array_equal(s.w, st.w)


def test_what_the_path_cannot_run_on_shards_is_refused_by_name(data, tmp_path):
    model, X, Y = data
    with pytest.raises(ValueError, match="block_storage='factored'"):
        regularization_path(model, X, Y, eps=EPS, solver=sharded(block_storage="factored"))
    with pytest.raises(ValueError, match="averaging='weighted'"):
        regularization_path(model, X, Y, eps=EPS, solver=sharded(averaging="weighted"))

    class Source:  # a shard source: len() and load(k)
        def __len__(self):
            return 2

        def load(self, k):
            return X[k::2], Y[k::2]

    with pytest.raises(ValueError, match="shard source"):
        regularization_path(model, Source(), None, eps=EPS, solver=sharded(executor="process"))


def test_auto_storage_runs_as_rows_and_leaves_the_given_solver_alone(data):
    model, X, Y = data
    solver = sharded(block_storage="auto")
    path = regularization_path(model, X, Y, eps=EPS, kappa=KAPPA, min_lam=2.0, solver=solver, random_state=0,
                               keep_state=True)
    assert solver.block_storage == "auto"
    assert path.meta["solver_params"]["block_storage"] == "dense"
    assert all(s.factored is None and s.dense_blocks for s in path.state.states)
    assert len(path) >= 1 and np.all(path.gaps <= KAPPA * EPS + 1e-12)


def test_a_path_on_processes_is_the_threads_path(data):
    model, X, Y = data
    common = dict(eps=EPS, kappa=KAPPA, min_lam=1.0, random_state=0)
    rounds = dict(round_length=2, combine="linesearch")
    threads = regularization_path(model, X, Y, solver=sharded(**rounds), **common)
    procs = regularization_path(model, X, Y, solver=sharded(executor="process", **rounds), **common)
    assert procs.status == threads.status and len(procs) == len(threads) >= 2
    np.testing.assert_allclose(procs.breakpoints, threads.breakpoints, rtol=1e-9)
    np.testing.assert_allclose(procs.coefs, threads.coefs, rtol=1e-9, atol=1e-12)
    assert math.isclose(procs.lam_end, threads.lam_end, rel_tol=1e-9)


@pytest.mark.slow  # a Ray session takes most of a minute to start on 2 cores: in CI's slow stage
def test_a_path_on_ray_actors_is_the_threads_path(data):
    """The path's states travel to the actors and back (sent at each breakpoint, rescaled in this process by
    Proposition 1): pickled both ways, they stay writable on each side."""
    ray = pytest.importorskip("ray")
    from structfw import executor_ray

    model, X, Y = data
    common = dict(eps=EPS, kappa=KAPPA, min_lam=1.0, random_state=0)
    rounds = dict(round_length=2, combine="linesearch")
    threads = regularization_path(model, X, Y, solver=sharded(**rounds), **common)
    if ray.is_initialized():  # a session of its own with a CPU for each of the 2 shards' actors
        executor_ray.shutdown()
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        actors = regularization_path(model, X, Y, solver=sharded(executor="ray", **rounds), **common)
    finally:
        executor_ray.shutdown()
        ray.shutdown()
    assert actors.status == threads.status and len(actors) == len(threads) >= 2
    np.testing.assert_allclose(actors.breakpoints, threads.breakpoints, rtol=1e-9)
    np.testing.assert_allclose(actors.coefs, threads.coefs, rtol=1e-9, atol=1e-12)


def test_a_sharded_path_resumes_exactly_from_its_state_in_memory_and_from_files(data, tmp_path):
    model, X, Y = data
    common = dict(eps=EPS, kappa=KAPPA, min_lam=1.0, solver=sharded())
    whole = regularization_path(model, X, Y, random_state=0, **common)
    with pytest.warns(RuntimeWarning, match="max_breakpoints"):
        part = regularization_path(model, X, Y, random_state=0, max_breakpoints=4, keep_state=True, **common)
    assert part.status == "max_breakpoints" and len(part) == 4 < len(whole)
    json_path = tmp_path / "p.json"
    part.to_json(json_path)
    part.save_state(tmp_path / "p.state.npz")
    from_files = regularization_path(model, X, Y, resume=json_path, **common)
    from_memory = regularization_path(model, X, Y, resume=part, **common)
    for resumed in (from_memory, from_files):
        assert resumed.status == whole.status and len(resumed) == len(whole)
        np.testing.assert_allclose(resumed.breakpoints, whole.breakpoints, rtol=1e-12)
        np.testing.assert_allclose(resumed.coefs, whole.coefs, rtol=1e-12, atol=1e-14)
    # a serial engine does not continue a sharded state (its state file is read back as one)
    with pytest.warns(RuntimeWarning, match="max_breakpoints"):
        short = regularization_path(model, X, Y, random_state=0, max_breakpoints=2, keep_state=True, **common)
    short.to_json(tmp_path / "q.json")
    short.save_state(tmp_path / "q.state.npz")
    with pytest.raises(ValueError, match="not a BCFWState"):
        regularization_path(model, X, Y, resume=tmp_path / "q.json",
                            **dict(common, solver=BCFW(block_storage="dense", **ENGINE)))
