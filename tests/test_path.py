"""The eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)."""
import json
import math

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

    assert sf.regularization_path is regularization_path
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
