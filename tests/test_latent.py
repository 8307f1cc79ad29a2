"""LatentStructuredSVM (CCCP, Yu & Joachims 2009) and the latent completions (structfw.models.latent).

The CCCP objective is the latent SSVM objective
P(w) = lam/2 ||w||^2 + 1/n sum_i [max_{(y,h)} (Delta(y_i, y) + <w, phi(x_i, y, h)>) - max_h <w, phi(x_i, y_i, h)>];
every round's convex step is solved to a small duality gap g_t, and CCCP guarantees
P(w_{t+1}) <= P(w_t) + g_t, which is what "non-increasing" is checked against.
"""
import itertools

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

import structfw as sf
import structfw.latent as latent_mod
from structfw.latent import LatentStructuredSVM
from structfw.models import ChainModel, GraphModel, MulticlassModel
from structfw.models.latent import LatentSubclassModel, complete_chain, complete_graph, path_edges
from structfw.solvers import BCFW


# ---------------------------------------------------------------- data
def chains(n, S=3, F=4, L=(4, 9), stay=0.8, noise=2.0, seed=0):
    """Sticky Markov chains with Gaussian emissions (features scaled to about unit norm)."""
    rng = np.random.default_rng(seed)
    M = np.random.default_rng(12345).normal(size=(S, F))
    T = np.full((S, S), (1 - stay) / (S - 1))
    np.fill_diagonal(T, stay)
    X, Y = [], []
    for _ in range(n):
        Lx = int(rng.integers(L[0], L[1] + 1))
        y = [int(rng.integers(S))]
        for _ in range(1, Lx):
            y.append(int(rng.choice(S, p=T[y[-1]])))
        y = np.array(y)
        X.append((M[y] + noise * rng.normal(size=(Lx, F))) / np.sqrt(F))
        Y.append(y)
    return X, Y


def hide(Y, frac, seed=0):
    rng = np.random.default_rng(seed)
    return [np.where(rng.random(len(y)) < frac, -1, y) for y in Y]


def xor_classes(n, noise=0.35, seed=0):
    """Two classes, each the union of two clusters at +-mu_c (XOR): no single linear template per
    class separates them, two per class do.  The third feature is a constant 1 (a bias)."""
    rng = np.random.default_rng(seed)
    mus = np.array([[1.0, 1.0], [1.0, -1.0]])
    X, Y = [], []
    for _ in range(n):
        c = int(rng.integers(2))
        s = 1.0 if rng.random() < 0.5 else -1.0
        X.append(np.concatenate([s * mus[c] + noise * rng.normal(size=2), [1.0]]))
        Y.append(c)
    return np.array(X), np.array(Y)


def tree_graph(V, F, rng):
    parent = [int(rng.integers(v)) for v in range(1, V)]
    edges = np.array([[p, v] for v, p in zip(range(1, V), parent)], dtype=np.int64).reshape(-1, 2)
    return (rng.normal(size=(V, F)), edges)


def _pairwise_solver():
    return BCFW(step="pairwise")


# ---------------------------------------------------------------- completions against brute force
def test_subclass_model_against_brute_force():
    rng = np.random.default_rng(0)
    K, H, F = 3, 2, 4
    m = LatentSubclassModel(K, H, F)
    assert m.size_joint_feature == K * H * F and m.n_states == K * H
    for _ in range(20):
        x, w = rng.normal(size=F), rng.normal(size=m.size_joint_feature)
        s_true = int(rng.integers(K * H))
        phis = [m.joint_feature(x, s).toarray() for s in range(K * H)]
        for s, phi in enumerate(phis):
            assert np.allclose(phi[s * F:(s + 1) * F], x) and np.count_nonzero(phi) <= F
        scores = np.array([phi @ w for phi in phis])
        losses = np.array([float(s // H != s_true // H) for s in range(K * H)])
        assert [m.loss(s_true, s) for s in range(K * H)] == list(losses)
        assert np.isclose((scores + losses)[m.loss_augmented_decode(x, s_true, w)], (scores + losses).max())
        c = s_true // H
        comp = m.complete(x, c, w)
        assert comp // H == c and np.isclose(scores[comp], scores[c * H:(c + 1) * H].max())
        assert np.isclose(scores[m.decode(x, w)], scores.max())
        assert np.allclose(m.psi(x, s_true, 0).toarray(), phis[s_true] - phis[0])


def test_subclass_expectation_matches_enumeration():
    rng = np.random.default_rng(1)
    m = LatentSubclassModel(2, 3, 3)
    x, v, c = rng.normal(size=3), rng.normal(size=m.size_joint_feature), 0.7
    E_phi, E_loss, logZ = m.expectation(x, 4, v, c)
    z = np.array([m.joint_feature(x, s).toarray() @ v + c * m.loss(4, s) for s in range(6)])
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    assert np.isclose(logZ, z.max() + np.log(np.exp(z - z.max()).sum()))
    assert np.isclose(E_loss, sum(p[s] * m.loss(4, s) for s in range(6)))
    assert np.allclose(E_phi, sum(p[s] * m.joint_feature(x, s).toarray() for s in range(6)))


def _brute_completion(model, x, y, w, S):
    hidden = np.flatnonzero(y < 0)
    best = -np.inf
    for fill in itertools.product(range(S), repeat=hidden.size):
        yc = y.copy()
        yc[hidden] = fill
        best = max(best, model.score(x, yc, w))
    return best


def test_chain_completion_against_brute_force():
    rng = np.random.default_rng(2)
    S, F = 3, 2
    m = ChainModel(S, F)
    for _ in range(25):
        L = int(rng.integers(1, 6))
        x = rng.normal(size=(L, F))
        w = rng.normal(size=m.size_joint_feature) * 2
        y = np.where(rng.random(L) < 0.5, -1, rng.integers(0, S, size=L))
        yc = complete_chain(m, x, y, w)
        assert np.all(yc[y >= 0] == y[y >= 0]) and np.all((yc >= 0) & (yc < S))
        assert np.isclose(m.score(x, yc, w), _brute_completion(m, x, y, w, S))


@pytest.mark.parametrize("inference", ["tree", "exhaustive"])
def test_graph_completion_against_brute_force(inference):
    rng = np.random.default_rng(3)
    K, F = 3, 2
    m = GraphModel(K, F, inference=inference)
    for _ in range(15):
        V = int(rng.integers(2, 7))
        x = m.check_X([tree_graph(V, F, rng)])[0]
        if inference == "exhaustive" and V >= 4:  # a cycle: exhaustive search stays exact
            x = m.check_X([(x.nodes, np.vstack([x.edges, [[0, V - 1]]]) if not any(
                set(e) == {0, V - 1} for e in x.edges.tolist()) else x.edges)])[0]
        w = rng.normal(size=m.size_joint_feature) * 2
        y = np.where(rng.random(V) < 0.5, -1, rng.integers(0, K, size=V))
        yc, exact = complete_graph(m, x, y, w)
        assert exact and np.all(yc[y >= 0] == y[y >= 0])
        assert np.isclose(m.score(x, yc, w), _brute_completion(m, x, y, w, K))


def test_loopy_completion_is_labelled_approximate_and_keeps_observed_nodes():
    rng = np.random.default_rng(4)
    m = GraphModel(2, 2, inference="trws")
    cycle = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    x = m.check_X([(rng.normal(size=(4, 2)), cycle)])[0]
    y = np.array([1, -1, 0, -1])
    yc, exact = complete_graph(m, x, y, rng.normal(size=m.size_joint_feature))
    assert not exact and yc[0] == 1 and yc[2] == 0


def test_chain_and_path_graph_share_the_weight_layout():
    rng = np.random.default_rng(5)
    m = ChainModel(3, 2)
    from structfw.models.latent import chain_as_graph
    g = chain_as_graph(m)
    assert g.size_joint_feature == m.size_joint_feature
    for L in (1, 2, 5):
        x, y = rng.normal(size=(L, 2)), rng.integers(0, 3, size=L)
        xg = g.check_X([(x, path_edges(L))])[0]
        assert np.allclose(m.joint_feature(x, y).toarray(), g.joint_feature(xg, y).toarray())


# ---------------------------------------------------------------- the objective
def _brute_objective_chain(m, X, Yp, w, lam):
    S = m.n_states
    total = 0.0
    for x, y in zip(X, Yp):
        obs = y >= 0
        if not obs.any():
            continue
        best_aug = max(m.score(x, np.array(z), w) + np.mean(np.array(z)[obs] != y[obs])
                       for z in itertools.product(range(S), repeat=len(y)))
        total += best_aug - _brute_completion(m, x, y, w, S)
    return 0.5 * lam * w @ w + total / len(X)


def test_objective_against_brute_force():
    rng = np.random.default_rng(6)
    m = ChainModel(3, 2)
    X = [rng.normal(size=(int(rng.integers(1, 5)), 2)) for _ in range(6)]
    Yp = [np.where(rng.random(len(x)) < 0.5, -1, rng.integers(0, 3, size=len(x))) for x in X]
    Yp[0][:] = 0
    Yp[1][:] = -1  # no labelled node: its term is 0
    Yp[2][0] = 1
    est = LatentStructuredSVM(m, lam=0.3)
    for _ in range(3):
        w = rng.normal(size=m.size_joint_feature)
        assert np.isclose(est.objective(X, Yp, w), _brute_objective_chain(m, X, Yp, w, 0.3))

    sm = LatentSubclassModel(2, 2, 3)
    Xs, Ys = xor_classes(10, seed=1)
    w = rng.normal(size=sm.size_joint_feature)
    brute = 0.0
    for x, c in zip(Xs, Ys):
        s = np.array([sm.joint_feature(x, k).toarray() @ w for k in range(4)])
        brute += max(s[k] + (k // 2 != c) for k in range(4)) - s[2 * c:2 * c + 2].max()
    est = LatentStructuredSVM(sm, lam=0.1)
    assert np.isclose(est.objective(Xs, Ys, w), 0.05 * w @ w + brute / 10)


# ---------------------------------------------------------------- CCCP
def _check_monotone(est, slack=1e-9):
    obj = est.objective_history_
    assert len(obj) == est.n_rounds_ == len(est.rounds_) >= 2
    for t in range(len(obj) - 1):
        # CCCP: P(w_{t+1}) <= F_t(w_{t+1}) <= F_t(w_t) + g = P(w_t) + g, g the convex step's gap
        assert obj[t + 1] <= obj[t] + est.rounds_[t + 1]["convex_gap"] + slack, (t, obj)
    for r in est.rounds_:
        assert r["convex_primal"] >= r["objective"] - slack  # F_t >= P everywhere


@pytest.mark.slow  # 42 s of the default suite (cold cache, 2 cores): CI's slow stage runs it
def test_cccp_objective_non_increasing_on_chains():
    X, Y = chains(40, seed=1)
    Yp = hide(Y, 0.5)
    est = LatentStructuredSVM(ChainModel(3, 4), solver=_pairwise_solver(), lam=0.1, tol=1e-5, max_passes=400,
                              cccp_tol=0.0, max_rounds=5, random_state=0).fit(X, Yp)
    _check_monotone(est)
    assert np.isclose(est.objective(X, Yp), est.objective_history_.min())
    assert all(np.all(z[y >= 0] == y[y >= 0]) for z, y in zip(est.latent_, Yp))


def test_cccp_objective_non_increasing_on_subclasses():
    X, Y = xor_classes(50, seed=3)
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), solver=_pairwise_solver(), lam=0.05, tol=1e-4,
                              max_passes=150, init="random", cccp_tol=0.0, max_rounds=6, random_state=0).fit(X, Y)
    _check_monotone(est)
    assert est.stopped_ in ("completion_fixed", "cccp_tol", "max_rounds")


def test_latent_chain_beats_observed_only():
    """Half of the nodes hidden.  "Observed only": StructuredSVM with per-node loss weights 1 on
    the labelled nodes and 0 on the hidden ones, which are filled with the most common labelled state
    (they still enter phi(x_i, y_i)); examples with no labelled node dropped.  That is also CCCP's
    first round (init="fill"); CCCP then re-imputes the hidden labels."""
    S, F = 3, 4
    X, Y = chains(80, S, F, seed=11)
    Xt, Yt = chains(200, S, F, seed=12)
    Yp = hide(Y, 0.5, seed=1)
    lat = LatentStructuredSVM(ChainModel(S, F), lam=0.1, tol=1e-3, max_passes=200, random_state=0).fit(X, Yp)
    fill = int(np.bincount(np.concatenate([y[y >= 0] for y in Yp])).argmax())
    keep = [i for i, y in enumerate(Yp) if (y >= 0).any()]
    base = sf.StructuredSVM(ChainModel(S, F), lam=0.1, tol=1e-3, max_passes=200, random_state=0)
    if "sample_weight" in base.fit.__code__.co_varnames:
        base.fit([X[i] for i in keep], [np.where(Yp[i] >= 0, Yp[i], fill) for i in keep],
                 sample_weight=[(Yp[i] >= 0).astype(float) for i in keep])
    else:  # pragma: no cover - before sample_weight: CCCP's first round is the same model
        base = LatentStructuredSVM(ChainModel(S, F), lam=0.1, tol=1e-3, max_passes=200, max_rounds=1,
                                   random_state=0).fit(X, Yp)
    full = sf.StructuredSVM(ChainModel(S, F), lam=0.1, tol=1e-3, max_passes=200, random_state=0).fit(X, Y)
    acc_lat, acc_base, acc_full = lat.score(Xt, Yt), base.score(Xt, Yt), full.score(Xt, Yt)
    assert acc_lat > acc_base + 0.05, (acc_lat, acc_base, acc_full)
    assert acc_lat > acc_full - 0.1, (acc_lat, acc_base, acc_full)
    pred = lat.predict(Xt[:3])
    assert all(p.shape == y.shape and p.min() >= 0 for p, y in zip(pred, Yt[:3]))  # full labellings


def test_latent_subclasses_beat_a_plain_multiclass_svm():
    X, Y = xor_classes(150, seed=1)
    Xt, Yt = xor_classes(400, seed=2)
    lat = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.05, tol=1e-3, random_state=0).fit(X, Y)
    plain = sf.StructuredSVM(MulticlassModel(2, 3), lam=0.05, tol=1e-3, random_state=0).fit(X, Y)
    assert lat.score(Xt, Yt) > 0.9 > 0.7 > plain.score(Xt, Yt)
    assert set(lat.predict(Xt[:20])) <= {0, 1}
    states = lat.predict_latent(Xt[:20])
    assert all(0 <= s < 4 for s in states)


def test_subclass_string_labels_round_trip():
    X, Y = xor_classes(60, seed=4)
    names = np.array(["left", "right"])[Y]
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, tol=1e-3, max_rounds=3,
                              random_state=0).fit(X, list(names))
    assert list(est.classes_) == ["left", "right"]
    assert set(est.predict(X)) <= {"left", "right"} and est.score(X, list(names)) > 0.8


def test_examples_without_labelled_nodes_leave_the_convex_step():
    X, Y = chains(12, seed=5)
    Yp = hide(Y, 0.5, seed=2)
    Yp[0][:] = -1
    Yp[5][:] = -1
    est = LatentStructuredSVM(ChainModel(3, 4), lam=0.2, tol=1e-3, max_rounds=2, random_state=0).fit(X, Yp)
    assert np.isclose(est.convex_estimator_.lam, 0.2 * 12 / 10)
    assert len(est.latent_) == 12 and est.latent_[0].min() >= 0
    with pytest.raises(ValueError, match="no labelled node"):
        LatentStructuredSVM(ChainModel(3, 4)).fit(X[:2], [np.full(len(X[0]), -1), np.full(len(X[1]), -1)])


def test_chain_routes_agree():
    """The convex step through GraphModel's per-node weights and through StructuredSVM's sample_weight."""
    if "sample_weight" not in sf.StructuredSVM.fit.__code__.co_varnames:  # pragma: no cover
        pytest.skip("StructuredSVM.fit has no sample_weight")
    X, Y = chains(10, seed=6)
    Yp = hide(Y, 0.5, seed=3)
    w, radius = {}, 0.0
    try:
        for route in ("graph", "sample_weight"):
            latent_mod.CHAIN_ROUTE = route
            est = LatentStructuredSVM(ChainModel(3, 4), solver=_pairwise_solver(), lam=3.0, tol=1e-6,
                                      max_passes=200, max_rounds=1, random_state=0).fit(X, Yp)
            g = est.rounds_[0]["convex_gap"]
            assert g < 1e-3
            w[route] = est.coef_
            # lam-strong convexity: ||w - w*||^2 <= 2 g / lam (g in the same units as the objective)
            radius += np.sqrt(2 * g / 3.0)
    finally:
        latent_mod.CHAIN_ROUTE = "auto"
    assert np.linalg.norm(w["graph"] - w["sample_weight"]) <= radius + 1e-9


def test_graphs_with_unlabelled_nodes():
    rng = np.random.default_rng(7)
    K, F = 2, 3
    X, Yp = [], []
    for _ in range(12):
        V = int(rng.integers(3, 7))
        nodes, edges = tree_graph(V, F, rng)
        y = (nodes[:, 0] > 0).astype(np.int64)
        X.append((nodes, edges))
        Yp.append(np.where(rng.random(V) < 0.4, -1, y))
    est = LatentStructuredSVM(GraphModel(K, F), lam=0.1, tol=1e-3, max_passes=100, max_rounds=3,
                              random_state=0).fit(X, Yp)
    assert est.exact_ and est.score(X, Yp) > 0.8
    assert all(p.shape == (len(x[0]),) for p, x in zip(est.predict(X), X))
    loopy = [(n, np.vstack([path_edges(len(n)), [[len(n) - 1, 0]]])) for n, _ in X]  # cycles (V >= 3)
    est2 = LatentStructuredSVM(GraphModel(K, F, inference="trws"), lam=0.1, tol=1e-3, max_passes=30, max_rounds=2,
                               random_state=0).fit(loopy, Yp)
    assert not est2.exact_ and np.isfinite(est2.objective_history_).all()


def test_warm_start_resumes_when_the_completion_is_fixed():
    X, Y = xor_classes(60, seed=5)
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.05, tol=1e-9, max_passes=5, max_rounds=3,
                              cccp_tol=0.0, random_state=0).fit(X, Y)
    resumed = [r for r in est.rounds_ if r["resumed"]]
    assert resumed, est.rounds_  # k-means init: the completion is fixed at once, the convex step is continued
    assert all(r["changed"] == 0 for r in est.rounds_[:-1] if r["resumed"])


def test_user_given_initial_completion_and_reproducibility():
    X, Y = xor_classes(50, seed=6)
    h = [int(x[0] * (2 * c - 1) > 0) for x, c in zip(X, Y)]
    a = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, tol=1e-3, random_state=3).fit(X, Y, Y_init=h)
    b = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, tol=1e-3, random_state=3).fit(X, Y, Y_init=h)
    assert np.allclose(a.coef_, b.coef_) and a.score(X, Y) > 0.9
    Xc, Yc = chains(6, seed=7)
    Yp = hide(Yc, 0.5, seed=4)
    full = [np.where(y >= 0, y, 0) for y in Yp]
    LatentStructuredSVM(ChainModel(3, 4), lam=0.1, max_rounds=1).fit(Xc, Yp, Y_init=full)
    bad = [f.copy() for f in full]
    i = next(i for i, y in enumerate(Yp) if (y >= 0).any())
    j = int(np.flatnonzero(Yp[i] >= 0)[0])
    bad[i][j] = (Yp[i][j] + 1) % 3
    with pytest.raises(ValueError, match=r"Y_init\[%d\] differs" % i):
        LatentStructuredSVM(ChainModel(3, 4), lam=0.1).fit(Xc, Yp, Y_init=bad)
    with pytest.raises(ValueError, match=r"Y_init\[0\] must be a sub-class"):
        LatentStructuredSVM(LatentSubclassModel(2, 2, 3)).fit(X, Y, Y_init=[5] * len(Y))


def test_verbose_prints_a_line_per_round(capsys):
    X, Y = xor_classes(40, seed=8)
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, tol=1e-3, init="random", max_rounds=3,
                              verbose=1, random_state=0).fit(X, Y)
    out = capsys.readouterr().out
    assert out.count("[LatentStructuredSVM] round") == est.n_rounds_


# ---------------------------------------------------------------- errors and scikit-learn
@pytest.mark.parametrize("kw, match", [
    (dict(model=MulticlassModel(2, 3)), "model must be"),
    (dict(lam=-1.0), "lam"),
    (dict(max_rounds=0), "max_rounds"),
    (dict(cccp_tol=-1.0), "cccp_tol"),
    (dict(tol=float("nan")), "tol"),
    (dict(max_passes=0), "max_passes"),
    (dict(init="spectral"), "init"),
    (dict(solver="newton"), "solver"),
    (dict(verbose=-1), "verbose"),
])
def test_parameters_are_checked_at_fit(kw, match):
    X, Y = xor_classes(10)
    kw.setdefault("model", LatentSubclassModel(2, 2, 3))
    est = LatentStructuredSVM(**kw)  # the constructor only stores
    with pytest.raises(ValueError, match=match):
        est.fit(X, Y)


def test_data_errors():
    X, Y = chains(4, seed=9)
    m = ChainModel(3, 4)
    with pytest.raises(ValueError, match="same length"):
        LatentStructuredSVM(m).fit(X, Y[:3])
    with pytest.raises(ValueError, match=r"Y\[1\] has label -2"):
        LatentStructuredSVM(m).fit(X, [Y[0], np.full(len(Y[1]), -2)] + Y[2:])
    with pytest.raises(ValueError, match=r"Y\[0\] has label 3"):
        LatentStructuredSVM(m).fit(X, [np.full(len(Y[0]), 3)] + Y[1:])
    with pytest.raises(ValueError, match=r"Y\[0\] has shape"):
        LatentStructuredSVM(m).fit(X, [Y[0][:-1]] + Y[1:])
    with pytest.raises(ValueError, match="init='kmeans' is for LatentSubclassModel"):
        LatentStructuredSVM(m, init="kmeans").fit(X, Y)
    with pytest.raises(ValueError, match="not fitted"):
        LatentStructuredSVM(m).predict(X)
    Xs, Ys = xor_classes(10)
    with pytest.raises(ValueError, match="more than the model's 2 states"):
        LatentStructuredSVM(LatentSubclassModel(2, 2, 3)).fit(Xs, np.arange(10) % 3)


def test_clone_get_params_and_grid_search():
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), solver=_pairwise_solver(), lam=0.1, tol=1e-3,
                              max_rounds=3, random_state=0)
    c = clone(est)
    assert c.get_params()["lam"] == 0.1 and c.solver is not est.solver
    assert c.get_params()["solver__step"] == "pairwise"
    X, Y = xor_classes(40, seed=10)
    gs = GridSearchCV(est, {"lam": [0.03, 0.1]}, cv=KFold(2, shuffle=True, random_state=0),
                      error_score="raise").fit(X, Y)
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))
    assert gs.best_estimator_.n_rounds_ >= 1 and 0 <= gs.score(X, Y) <= 1
    est2 = LatentStructuredSVM(ChainModel(3, 4), lam=0.1, max_rounds=2).set_params(solver__step="pairwise")
    assert isinstance(est2.solver, BCFW) and est2.solver.step == "pairwise"


def test_exported_from_the_package():
    assert sf.LatentStructuredSVM is LatentStructuredSVM
    assert "LatentStructuredSVM" in sf.__all__


def test_subclass_model_is_registered_and_fitted_estimators_pickle(tmp_path):
    import pickle

    X, Y = xor_classes(40, seed=11)
    svm = sf.StructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, max_passes=5, random_state=0).fit(X, 2 * Y)
    back = sf.load(svm.save(tmp_path / "m.npz"))
    assert isinstance(back.model, LatentSubclassModel) and back.model.n_subclasses == 2
    assert np.allclose(back.coef_, svm.coef_) and back.predict(X[:5]) == svm.predict(X[:5])
    est = LatentStructuredSVM(LatentSubclassModel(2, 2, 3), lam=0.1, tol=1e-3, max_rounds=2, random_state=0).fit(X, Y)
    again = pickle.loads(pickle.dumps(est))
    assert again.predict(X[:10]) == est.predict(X[:10])


def test_graph_objective_with_class_weights_matches_the_convex_step():
    """The objective (brute force over all labellings) counts the graph model's class weights on the
    labelled nodes only, as the convex step's loss does; and it is at most the convex step's primal."""
    rng = np.random.default_rng(12)
    X, Yp = [], []
    for _ in range(8):
        nodes, edges = tree_graph(5, 2, rng)
        X.append((nodes, edges))
        Yp.append(np.where(rng.random(5) < 0.4, -1, (nodes[:, 0] > 0).astype(np.int64)))
    est = LatentStructuredSVM(GraphModel(2, 2, class_weight=[1.0, 3.0]), lam=0.2, tol=1e-6, max_passes=300,
                              max_rounds=1, random_state=0).fit(X, Yp)
    r = est.rounds_[0]
    assert r["objective"] <= r["convex_primal"] + 1e-9
    Yc = est.latent_  # the completion at coef_
    m = GraphModel(2, 2, class_weight=[1.0, 3.0])
    xs = m.check_X([(n, e, None, (y >= 0).astype(float)) for (n, e), y in zip(X, Yp)])
    hinge = [max(m.example_loss(x, yc, z) + m.score(x, z, est.coef_)
                 for z in map(np.array, itertools.product(range(2), repeat=5))) - m.score(x, yc, est.coef_)
             for x, yc in zip(xs, Yc)]
    assert np.isclose(r["objective"], 0.1 * est.coef_ @ est.coef_ + np.mean(hinge))
