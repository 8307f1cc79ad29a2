"""The eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)."""
import json
import math
import warnings

import numpy as np
import pytest

import structfw as sf
from structfw.path import RegularizationPath, regularization_path
from structfw.solvers import BCFW, FW, MPBCFW, Monitor, Problem, StopRule

from toy import exact_optimum, make_toy, primal


def _query_lams(path, max_pieces=25):
    """lam values inside every piece (sampled when there are many), at breakpoints and above lam_1."""
    bp = path.breakpoints
    lams = [bp[0] * 1.5, bp[0] * 40.0, bp[0]]
    idx = np.unique(np.linspace(0, len(bp) - 1, min(len(bp), max_pieces)).astype(int))
    for j in idx:
        lo = bp[j + 1] if j + 1 < len(bp) else (path.lam_end if path.lam_end > 0 else bp[j] / 20)
        lams += [bp[j], math.sqrt(bp[j] * lo), lo, lo * (1 + 1e-9)]
    return lams


@pytest.fixture(scope="module")
def toy():
    return make_toy(n=5, m=4, d=3, seed=3)


@pytest.mark.parametrize("solver", [None, BCFW(), BCFW(step="away", sampling="perm"),
                                    BCFW(sampling="uniform", cache=True), MPBCFW(approx_rule="work"),
                                    MPBCFW(step="pairwise", sampling="gap")],
                         ids=["default", "fw", "away", "cache", "mpbcfw", "mpbcfw-pairwise-gap"])
def test_path_is_eps_approximate_against_exact_qp(toy, solver):
    model, X, Y = toy
    eps = 0.1
    path = regularization_path(model, X, Y, eps=eps, kappa=0.5, solver=solver, min_lam=0.02, random_state=0)
    bp = path.breakpoints
    assert len(bp) >= 3
    assert np.all(np.diff(bp) < 0), "breakpoints must decrease"
    assert np.all(path.gaps <= 0.5 * eps + 1e-12)
    assert path.status in ("ended", "min_lam")
    worst = 0.0
    for lam in _query_lams(path):
        w = path.coef_at(lam)
        D, _ = exact_optimum(model, X, Y, lam)
        sub = primal(model, X, Y, lam, w) - D
        assert sub <= eps + 1e-6, (lam, sub)
        worst = max(worst, sub)
        if lam <= bp[0]:
            assert path.gap_bound_at(lam) <= eps + 1e-9
    assert worst > 0.2 * eps  # the check is not vacuous: the path uses its eps budget


def test_lam_inf_and_initial_point(toy):
    model, X, Y = toy
    eps = 0.2
    n = len(X)
    # by hand: y~_i = argmax L_i, psi~, theta_i = max_y -<psi~, psi_i(y)>
    m = model.phi.shape[1]
    psis = []
    for i in range(n):
        yl = int(np.argmax([model.loss(Y[i], i * 1000 + b) for b in range(m)]))
        psis.append(model.psi(X[i], Y[i], i * 1000 + yl))
    psi_t = np.mean(psis, axis=0)
    theta = [max(-model.psi(X[i], Y[i], i * 1000 + b) @ psi_t for b in range(m)) for i in range(n)]
    lam_inf = (psi_t @ psi_t + np.mean(theta)) / eps
    path = regularization_path(model, X, Y, eps=eps, min_lam=1.0)
    assert path.breakpoints[0] == pytest.approx(lam_inf, rel=1e-12)
    np.testing.assert_allclose(path.w_inf, psi_t / lam_inf, atol=1e-14)
    # (lam_1/lam) w_inf is eps-approximate for lam >= lam_1
    for lam in (lam_inf, 2 * lam_inf, 1e3 * lam_inf):
        D, _ = exact_optimum(model, X, Y, lam)
        assert primal(model, X, Y, lam, path.coef_at(lam)) - D <= eps + 1e-7
    # the initial dual point's gap at lam_inf is <= eps, for both state layouts
    for solver in (BCFW(), BCFW(step="pairwise")):
        prob = Problem(model, X, Y, lam_inf)
        res0 = prob.batch_oracle(np.zeros(prob.d))
        st = solver.state_at_corners(prob, [r[0] for r in res0])
        np.testing.assert_allclose(st.w, psi_t / lam_inf, atol=1e-14)
        _, gaps, _ = solver.gap_pass(prob, st)
        assert gaps.sum() <= eps + 1e-12


@pytest.mark.parametrize("step", ["fw", "pairwise", "away"])
def test_proposition_1_invariants(toy, step):
    model, X, Y = toy
    lam = 0.3
    solver = BCFW(step=step, sampling="perm")
    prob = Problem(model, X, Y, lam)
    res = solver.solve(prob, StopRule(max_passes=3, tol=None), rng=0, monitor=Monitor(prob, StopRule(3, None), {}))
    st = res.state
    _, gaps, _ = solver.gap_pass(prob, st)
    g_old, delta = gaps.sum(), st.delta()
    assert delta > 0
    w_old = st.w.copy()
    for rho in (0.9, 0.5, 0.1):
        lam_new = rho * st.lam
        g_before, d_before = solver.gap_pass(prob.with_lam(st.lam), st)[1].sum(), st.delta()
        st.keep_w_change_lam(lam_new)
        np.testing.assert_array_equal(st.w, w_old)
        g_new = solver.gap_pass(prob.with_lam(lam_new), st)[1].sum()
        assert g_new == pytest.approx(g_before + (1 - rho) * d_before, abs=1e-9)
        if st.corners is not None and st.track_alpha:
            from toy import exact_dual_from_alpha

            D, w_alpha, _ = exact_dual_from_alpha(prob.with_lam(lam_new), st)
            np.testing.assert_allclose(w_alpha, w_old, atol=1e-10)
            assert D == pytest.approx(st.dual(), abs=1e-10)
            for cs in st.corners:
                assert sum(cs.alpha) == pytest.approx(1.0, abs=1e-12)
                assert min(cs.alpha) >= 0.0
    assert g_old >= 0


def test_path_multiclass_against_long_solve():
    from sklearn.datasets import load_digits

    Xd, yd = load_digits(return_X_y=True)
    Xd = Xd[:80] / 16.0
    yd = yd[:80]
    model = sf.models.MulticlassModel(10, Xd.shape[1])
    X, Y = list(Xd), [int(v) for v in yd]
    eps = 0.1
    path = regularization_path(model, X, Y, eps=eps, min_lam=1e-3, random_state=0)
    assert np.all(np.diff(path.breakpoints) < 0)
    bp = path.breakpoints
    lams = [2 * bp[0], bp[0], math.sqrt(bp[len(bp) // 3] * bp[len(bp) // 3 + 1]), bp[-1],
            math.sqrt(bp[-2] * bp[-1]), max(path.lam_end, bp[-1] / 5)]
    solver = BCFW(sampling="gap", step="pairwise")
    for lam in lams:
        prob = Problem(model, X, Y, lam)
        stop = StopRule(max_passes=2000, tol=1e-4)
        ref = solver.solve(prob, stop, rng=0, monitor=Monitor(prob, stop, {}))
        assert ref.gap <= 1e-3  # only the dual value D(alpha_ref) <= P* is used below
        w = path.coef_at(lam)
        P_w = prob.primal(w, sum(r[3] for r in prob.batch_oracle(w)))
        # P(w) - P* <= P(w) - D(alpha_ref)
        assert P_w - ref.dual <= eps + 1e-9, (lam, P_w - ref.dual)


def test_json_roundtrip_and_coef_at(tmp_path, toy):
    model, X, Y = toy
    path = regularization_path(model, X, Y, eps=0.1, min_lam=0.05)
    assert path.status == "min_lam"
    f = tmp_path / "p.json"
    path.to_json(f)
    back = RegularizationPath.from_json(f)
    back2 = RegularizationPath.from_json(path.to_json())
    for p in (back, back2):
        np.testing.assert_array_equal(p.breakpoints, path.breakpoints)
        np.testing.assert_array_equal(p.coefs, path.coefs)
        np.testing.assert_array_equal(p.gaps, path.gaps)
        assert p.lam_end == path.lam_end and p.status == path.status
    json.loads(f.read_text())
    bp = path.breakpoints
    np.testing.assert_array_equal(path.coef_at(bp[1]), path.coefs[1])
    np.testing.assert_array_equal(path.coef_at(0.5 * (bp[1] + bp[2])), path.coefs[1])
    np.testing.assert_allclose(path.coef_at(3 * bp[0]), path.w_inf / 3)
    assert path.lam_end < 0.05
    path.coef_at(path.lam_end)
    with pytest.raises(ValueError, match="computed down to"):
        path.coef_at(path.lam_end / 2)
    with pytest.raises(ValueError, match="lam"):
        path.coef_at(-1.0)
    assert len(path.cumulative_passes) == len(bp)
    assert np.all(np.diff(path.cumulative_passes) > 0)


def test_ended_path_covers_small_lam():
    # separable multiclass data: the training loss reaches 0, Delta -> 0, rho <= 0 ends the path
    rng = np.random.default_rng(0)
    centers = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]])
    Y = [int(k) for k in rng.integers(0, 3, 30)]
    X = [centers[k] + 0.3 * rng.normal(size=2) for k in Y]
    model = sf.models.MulticlassModel(3, 2)
    path = regularization_path(model, X, Y, eps=0.1, min_lam=1e-9)
    assert path.ended and path.lam_end == 0.0
    w = path.coef_at(1e-12)
    np.testing.assert_array_equal(w, path.coefs[-1])


def test_argument_errors(toy):
    model, X, Y = toy
    for kw, name in ((dict(eps=0), "eps"), (dict(eps=-1), "eps"), (dict(eps=float("nan")), "eps"),
                     (dict(kappa=0), "kappa"), (dict(kappa=1), "kappa"), (dict(kappa=1.5), "kappa"),
                     (dict(min_lam=0), "min_lam"), (dict(min_lam=-1e-3), "min_lam"),
                     (dict(max_passes_per_lam=0), "max_passes_per_lam"),
                     (dict(solver=FW()), "solver"), (dict(solver=BCFW(averaging="weighted")), "solver")):
        with pytest.raises(ValueError, match=name):
            regularization_path(model, X, Y, **kw)


def test_top_level_export_and_cli(tmp_path):
    from click.testing import CliRunner

    from structfw.cli import main

    # the top-level name loads the path module inside the path's Ctrl-C context and calls it
    assert sf.regularization_path.__module__ == "structfw" and "structfw.path" in sf.regularization_path.__doc__
    out = tmp_path / "p.json"
    r = CliRunner().invoke(main, ["path", "--subsample", "40", "--min-lam", "0.01", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "lambda" in r.output and "breakpoints" in r.output
    p = RegularizationPath.from_json(out)
    assert len(p) >= 2
    r = CliRunner().invoke(main, ["path", "--kappa", "2"])
    assert r.exit_code != 0 and "kappa" in r.output


def test_not_converged_keeps_valid_prefix(toy):
    model, X, Y = toy
    with pytest.warns(RuntimeWarning, match="max_passes_per_lam"):
        path = regularization_path(model, X, Y, eps=0.02, kappa=0.1, min_lam=1e-4, max_passes_per_lam=1,
                                   solver=BCFW(sampling="perm"))
    assert path.status == "not_converged"
    assert np.all(path.gaps[np.isfinite(path.gaps)] < 0.02)
    path.coef_at(path.lam_end)
    with pytest.raises(ValueError, match="computed down to"):
        path.coef_at(path.lam_end * 0.99)


# ------------------------------------------------------------ progress, caps, files, resume, Ctrl-C
def _assert_valid(path, eps):
    bp = path.breakpoints
    assert np.all(np.diff(bp) < 0)
    g = path.gaps[np.isfinite(path.gaps)]
    assert np.all(g < eps)
    assert path.lam_end <= bp[-1]


def test_default_min_lam_is_ten_over_n(toy):
    model, X, Y = toy
    path = regularization_path(model, X, Y, eps=0.1)
    assert path.min_lam == pytest.approx(10 / len(X))
    assert path.status in ("ended", "min_lam")


def test_progress_bar_and_lines(toy, capsys):
    model, X, Y = toy
    path = regularization_path(model, X, Y, eps=0.1, min_lam=0.05, progress=True, verbose=1)
    err = capsys.readouterr().err
    assert "log(lam_1/lam)" in err and "breakpoints" in err and "lam=" in err
    assert len(path) >= 3


def test_max_breakpoints_warns_up_front_and_stops(toy):
    model, X, Y = toy
    with pytest.warns(RuntimeWarning) as rec:
        path = regularization_path(model, X, Y, eps=1e-3, min_lam=1e-3, max_breakpoints=5)
    msgs = [str(w.message) for w in rec]
    assert any("may need up to" in m and "max_breakpoints=5" in m for m in msgs), msgs
    assert any("stopped after max_breakpoints=5" in m for m in msgs), msgs
    assert path.status == path.stop_reason == "max_breakpoints" and len(path) == 5
    _assert_valid(path, 1e-3)
    path.coef_at(path.lam_end)
    # the bound of eq. (12) holds on a path that runs to its end
    full = regularization_path(model, X, Y, eps=0.1, min_lam=0.02)
    from structfw.path import breakpoint_bound

    Lbar = full.meta["mean_max_loss"]
    assert len(full) <= breakpoint_bound(full.breakpoints[0], full.min_lam, 0.1, 0.5, Lbar)


def test_resume_continues_exactly_from_memory_and_from_files(toy, tmp_path):
    model, X, Y = toy
    direct = regularization_path(model, X, Y, eps=0.1, min_lam=0.01, random_state=0)
    first = regularization_path(model, X, Y, eps=0.1, min_lam=0.08, random_state=0, keep_state=True)
    assert first.status == "min_lam" and first.state is not None and len(first) < len(direct)
    first.to_json(tmp_path / "p.json")
    first.save_state(tmp_path / "p.state.npz")
    resumed = regularization_path(model, X, Y, min_lam=0.01, resume=first)
    assert first.state is None  # taken over
    from_files = regularization_path(model, X, Y, min_lam=0.01, resume=str(tmp_path / "p.json"))
    for p in (resumed, from_files):
        np.testing.assert_array_equal(p.breakpoints, direct.breakpoints)
        np.testing.assert_array_equal(p.coefs, direct.coefs)
        assert p.status == direct.status and p.lam_end == direct.lam_end
    with pytest.raises(ValueError, match="eps"):
        regularization_path(model, X, Y, eps=0.2, min_lam=0.01, resume=str(tmp_path / "p.json"))
    other_model, Xo, Yo = make_toy(n=5, m=4, d=3, seed=4)
    with pytest.raises(ValueError, match="other training data"):
        regularization_path(other_model, Xo, Yo, min_lam=0.01, resume=str(tmp_path / "p.json"))


def test_resume_without_state_is_still_eps_approximate(toy, tmp_path):
    model, X, Y = toy
    first = regularization_path(model, X, Y, eps=0.1, min_lam=0.08)
    first.to_json(tmp_path / "p.json")
    path = regularization_path(model, X, Y, min_lam=0.01, resume=str(tmp_path / "p.json"))
    assert len(path) > len(first)
    np.testing.assert_array_equal(path.breakpoints[:len(first)], first.breakpoints)
    _assert_valid(path, 0.1)
    for lam in _query_lams(path, 8):
        D, _ = exact_optimum(model, X, Y, lam)
        assert primal(model, X, Y, lam, path.coef_at(lam)) - D <= 0.1 + 1e-6


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(eps=float("nan")), "eps"),
    (lambda d: d.update(eps=-1), "eps"),
    (lambda d: d.update(kappa=1.5), "kappa"),
    (lambda d: d["breakpoints"].reverse(), "breakpoints"),
    (lambda d: d["breakpoints"].__setitem__(1, d["breakpoints"][0]), "breakpoints"),
    (lambda d: d["breakpoints"].__setitem__(2, float("inf")), "breakpoints"),
    (lambda d: d["coefs"][1].pop(), "coefs"),
    (lambda d: d["coefs"].pop(), "coefs"),
    (lambda d: d["w_inf"].__setitem__(0, "x"), "w_inf"),
    (lambda d: d.update(status="done"), "status"),
    (lambda d: d.update(lam_end=1e9), "lam_end"),
    (lambda d: d.update(lam_end=0.0), "lam_end"),
    (lambda d: d["gaps"].__setitem__(0, 5.0), "gaps"),
    (lambda d: d["passes"].pop(), "passes"),
    (lambda d: d.update(min_lam=0), "min_lam"),
    (lambda d: d.update(n=-3), "n"),
    (lambda d: d.update(meta=[1]), "meta"),
    (lambda d: d.update(version=2), "version"),
    (lambda d: d.pop("eps"), "eps"),
])
def test_from_json_validates_every_field(toy, edit, field):
    model, X, Y = toy
    doc = regularization_path(model, X, Y, eps=0.1, min_lam=0.05).to_dict()
    assert doc["status"] == "min_lam"
    edit(doc)
    text = json.dumps(doc)  # NaN is written as the NaN constant, as a careless editor would
    with pytest.raises(ValueError, match=f"field '{field}"):
        RegularizationPath.from_json(text)


class _SigintModel:
    """Wraps the toy model: sends SIGINT from inside the k-th oracle (or decode) call."""

    def __new__(cls, base, k, method="loss_augmented_decode"):
        from toy import EnumModel

        class M(EnumModel):
            calls = 0

            def loss_augmented_decode(self, x, y_true, w):
                self._tick("loss_augmented_decode")
                return super().loss_augmented_decode(x, y_true, w)

            def decode(self, x, w):
                self._tick("decode")
                return super().decode(x, w)

            def _tick(self, name):
                import signal

                if name == method:
                    M.calls += 1
                    if M.calls == k:
                        signal.raise_signal(signal.SIGINT)

        return M(base.phi, base.loss_table)


def _check_interrupted(path, model, X, Y, eps, min_lam, solver):
    from structfw.solvers.state_file import check_state

    assert path.status in ("interrupted", "min_lam", "ended")
    if path.interrupted and len(path) == 0:
        assert path.state is None
    if len(path):
        _assert_valid(path, eps)
        path.coef_at(path.lam_end)
    if path.state is not None:
        check_state(path.state, d=len(path.w_inf))
        assert path.state.lam >= path.lam_end
    # it continues to a valid complete path
    done = regularization_path(model.__class__.__mro__[1](model.phi, model.loss_table), X, Y, min_lam=min_lam,
                               resume=path if len(path) else None, eps=None if len(path) else eps, solver=solver)
    assert done.status in ("min_lam", "ended")
    _assert_valid(done, eps)
    if len(path):
        np.testing.assert_array_equal(done.breakpoints[:len(path) - (path.gaps[-1] != path.gaps[-1])],
                                      path.breakpoints[:len(path) - (path.gaps[-1] != path.gaps[-1])])
    return done


@pytest.mark.parametrize("k, method", [(1, "loss_augmented_decode"), (5, "loss_augmented_decode"),
                                       (2, "decode"), (6, "loss_augmented_decode"), (9, "loss_augmented_decode"),
                                       (40, "loss_augmented_decode"), (150, "loss_augmented_decode")])
def test_ctrl_c_at_every_point_returns_the_path_so_far(toy, k, method):
    base, X, Y = toy
    model = _SigintModel(base, k, method)
    eps, min_lam = 0.1, 0.02
    path = regularization_path(model, X, Y, eps=eps, min_lam=min_lam, keep_state=True,
                               solver=BCFW(sampling="perm"))
    if k <= 5 or method == "decode":
        assert path.interrupted and len(path) == 0   # during the initialisation's passes
    else:
        assert path.interrupted
    _check_interrupted(path, model, X, Y, eps, min_lam, BCFW(sampling="perm"))


def test_ctrl_c_between_breakpoints_from_a_callback(toy):
    import signal

    model, X, Y = toy

    def cb(j, lam, w, info):
        if j == 2:
            signal.raise_signal(signal.SIGINT)

    path = regularization_path(model, X, Y, eps=0.1, min_lam=0.02, callback=cb, keep_state=True, random_state=0)
    assert path.interrupted and len(path) == 3
    assert path.lam_end < path.breakpoints[-1]  # the last piece reaches down to its eq. (12) end
    assert path.state.lam == path.lam_end  # Prop. 1 applied, as the uninterrupted run does
    direct = regularization_path(model, X, Y, eps=0.1, min_lam=0.02, random_state=0)
    done = regularization_path(model, X, Y, min_lam=0.02, resume=path)
    np.testing.assert_array_equal(done.breakpoints, direct.breakpoints)
    np.testing.assert_array_equal(done.coefs, direct.coefs)


def test_ctrl_c_by_timer_on_a_longer_path():
    """SIGINT from a timer at random moments, as a user presses it."""
    import _thread
    import threading

    from sklearn.datasets import load_digits

    Xd, yd = load_digits(return_X_y=True)
    model = sf.models.MulticlassModel(10, Xd.shape[1])
    X, Y = list(Xd[:400] / 16.0), [int(v) for v in yd[:400]]
    regularization_path(model, X[:20], Y[:20], eps=0.5, min_lam=0.5)  # compile first
    rng = np.random.default_rng(0)
    for delay in rng.uniform(0.02, 1.0, 4):   # the path takes ~4 s: the signal always falls inside
        timer = threading.Timer(float(delay), _thread.interrupt_main)
        timer.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the max_breakpoints notices
                path = regularization_path(model, X, Y, eps=0.02, min_lam=1e-3, max_breakpoints=300,
                                           keep_state=True, random_state=0)
        finally:
            timer.cancel()
        assert path.status == "interrupted"
        if len(path):
            _assert_valid(path, 0.02)
        if path.state is not None:
            from structfw.solvers.state_file import check_state

            check_state(path.state, d=model.size_joint_feature)
            assert np.all(np.isfinite(path.state.w))


def test_cli_progress_out_state_and_resume(tmp_path):
    from click.testing import CliRunner

    from structfw.cli import main
    from structfw.path import state_path_for

    out = tmp_path / "p.json"
    r = CliRunner().invoke(main, ["path", "--subsample", "40", "--min-lam", "10", "--out", str(out), "--no-test",
                                  "--no-progress"])
    assert r.exit_code == 0, r.output
    assert state_path_for(out).exists() and "state:" in r.output
    first = RegularizationPath.from_json(out)
    r = CliRunner().invoke(main, ["path", "--subsample", "40", "--min-lam", "0.01", "--resume", str(out),
                                  "--out", str(tmp_path / "q.json"), "--no-test", "--no-progress"])
    assert r.exit_code == 0, r.output
    second = RegularizationPath.from_json(tmp_path / "q.json")
    assert len(second) > len(first)
    np.testing.assert_array_equal(second.breakpoints[:len(first)], first.breakpoints)
    # the lines are printed as the breakpoints come: numbered from where the first run stopped
    assert f"{len(first) + 1:4d} " in r.output


def test_trivial_path_when_no_labelling_moves_w():
    """psi~ = 0 and theta = 0 (every joint feature is the same for every labelling): w = 0 is optimal
    for every lam, and the path is that one piece (it used to fail building it)."""
    from toy import EnumModel

    model, X, Y = make_toy(n=3, m=3, d=2, seed=1)
    flat = np.repeat(model.phi[:, :1, :], model.phi.shape[1], axis=1)
    path = regularization_path(EnumModel(flat, model.loss_table), X, Y, eps=0.1, min_lam=1e-3)
    assert path.status == "ended"
    np.testing.assert_array_equal(path.coefs, 0.0)
    assert path.eps == 0.1 and path.coef_at(1e-2).shape == (2,)


def test_corners_of_the_oracle_at_zero_place_with_lazy_rows():
    """Pairwise steps on dense rows build the rows lazily: the placement sums w as it goes, and
    the path's labellings (the oracle's at w = 0) must be checked at w = 0, not at that partial sum
    (this chain failed at example 3 with 'the oracle is not a maximiser')."""
    from test_sharded import tiny_chain

    model, X, Y = tiny_chain(n=8, seed=2)
    problem = Problem(model, X, Y, 0.1)
    labellings = [r[0] for r in problem.batch_oracle(np.zeros(problem.d), validate=True)]
    lazy = BCFW(step="pairwise", block_storage="dense").state_at_corners(problem, labellings, rng=0)
    eager = BCFW(step="fw", block_storage="dense").state_at_corners(problem, labellings, rng=0)
    np.testing.assert_allclose(lazy.w, eager.w, rtol=0, atol=1e-12 * (1 + np.abs(eager.w).max()))
    assert lazy.ell == pytest.approx(eager.ell, rel=1e-12)
