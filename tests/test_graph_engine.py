"""Every engine option on `GraphModel`, against the exact QP optimum of a tiny tree problem.

The problem is small enough to enumerate every labelling of every example, so the SSVM
primal QP (all corners as constraints) is solved exactly by cvxopt (`toy.primal_qp_optimum`)
and P(w) is computed exactly (`toy.corners_primal`).  On forests the oracle is exact, so
every solver with a dual must report a gap that bounds P(w) - P*; the fast ones must reach P*.
"""
import itertools

import numpy as np
import pytest

import structfw as sf
import structfw.path
from structfw._linalg import as_dense
from structfw.models import GraphModel
from structfw.solvers import BCFW, FW, MPBCFW, SSG, CuttingPlane, OnlineEG

pytest.importorskip("cvxopt")
from toy import corners_primal, primal_qp_optimum  # noqa: E402

LAM = 0.1
K, F = 2, 2


def _tree_problem(seed=0, n=5, attract=True):
    """n random trees of 3-4 nodes, labels from a planted model (neighbours agree when
    ``attract``, disagree otherwise) with a few flipped, so the QP has active hinges."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        V = int(rng.integers(3, 5))
        edges = np.array([[int(rng.integers(0, v)), v] for v in range(1, V)], np.int64)
        nodes = rng.normal(size=(V, F))
        y = (nodes[:, 0] > 0).astype(np.int64)
        for a, b in edges:  # a planted smoothness (or anti-smoothness) along the tree
            if rng.random() < 0.5:
                y[b] = y[a] if attract else 1 - y[a]
        X.append((nodes, edges))
        Y.append(y)
    return X, Y


def _corners(model, X, Y):
    Xv, Yv = model.check_data(X, Y)
    out = []
    for i, (x, y) in enumerate(zip(Xv, Yv)):
        V = y.shape[0]
        for yy in itertools.product(range(K), repeat=V):
            yy = np.array(yy, np.int64)
            out.append((i, as_dense(model.psi(x, y, yy)), model.loss(y, yy)))
    return out


@pytest.fixture(scope="module")
def tree():
    X, Y = _tree_problem()
    model = GraphModel(K, F, pairwise="symmetric")
    corners = _corners(model, X, Y)
    w_star = primal_qp_optimum(corners, len(X), model.size_joint_feature, LAM)
    return model, X, Y, corners, corners_primal(corners, len(X), LAM, w_star), w_star


def _suboptimality(tree, w, lam=LAM):
    _, X, _, corners, P_star, _ = tree
    return corners_primal(corners, len(X), lam, w) - P_star


def _fit(tree, solver, passes, tol=1e-10, **kw):
    model, X, Y = tree[:3]
    return sf.StructuredSVM(model, solver=solver, lam=LAM, max_passes=passes, tol=tol, random_state=0,
                            **kw).fit(X, Y)


def test_tree_problem_is_exact_and_not_trivial(tree):
    model, X, Y, corners, P_star, w_star = tree
    assert not model.approximate_oracle
    assert np.linalg.norm(w_star[model.pairwise_offset:]) > 1e-3  # the pairwise terms are used
    assert 0.0 < P_star < 1.0


# ------------------------------------------------------------------ solvers with a dual
# linearly convergent (or finite) on this QP: they must reach P* itself
FAST = {
    "bcpfw-uniform": BCFW(step="pairwise"),
    "bcpfw-perm": BCFW(step="pairwise", sampling="perm"),
    "bcpfw-gap": BCFW(step="pairwise", sampling="gap"),
    "bcafw-uniform": BCFW(step="away"),
    "bcafw-gap-cache": BCFW(step="away", sampling="gap", cache=True),
    "bcpfw-cache": BCFW(step="pairwise", cache=True),
    "mpbcfw-pairwise": MPBCFW(step="pairwise"),
    "cutting-plane": CuttingPlane(),
}
# O(1/k) on a face-bound optimum: their reported gap must certify the suboptimality
CERTIFIED = {
    "bcfw-uniform": BCFW(),
    "bcfw-perm": BCFW(sampling="perm"),
    "bcfw-gap": BCFW(sampling="gap", gap_refresh=2),
    "bcfw-cache": BCFW(cache=True),
    "bcfw-wavg": BCFW(averaging="weighted"),
    "bcfw-suffix": BCFW(averaging="suffix"),
    "mpbcfw": MPBCFW(),
    "mpbcfw-wavg": MPBCFW(averaging="weighted"),
    "fw": FW(),
    "online-eg": OnlineEG(),
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_fast_solvers_reach_the_exact_qp_optimum(tree, name):
    svm = _fit(tree, FAST[name], passes=1000)
    assert svm.stopped_ == "tol", svm.stopped_
    sub = _suboptimality(tree, svm.coef_)
    assert -1e-9 <= sub <= max(svm.gap_, 0.0) + 1e-9
    assert sub < 1e-7
    np.testing.assert_allclose(svm.coef_, tree[5], atol=1e-3)


@pytest.mark.parametrize("name", sorted(CERTIFIED))
def test_reported_gap_certifies_the_suboptimality(tree, name):
    for passes in (2, 10, 200):
        svm = _fit(tree, CERTIFIED[name], passes=passes, tol=None, check_every=1)
        sub = _suboptimality(tree, svm.coef_)
        assert sub >= -1e-9
        assert sub <= svm.gap_ + 1e-9, (passes, sub, svm.gap_)
    assert sub < 0.05 * tree[4]  # and it gets close


def test_ssg_approaches_the_optimum(tree):
    # SSG has no dual; its iterate still approaches P* (O(1/k) with averaging)
    svm = _fit(tree, SSG(averaging="weighted"), passes=400, tol=None)
    assert 0.0 <= _suboptimality(tree, svm.coef_) < 0.05 * tree[4]


@pytest.mark.parametrize("executor", ["thread", pytest.param("process", marks=pytest.mark.slow)])
def test_minibatches_on_workers(tree, executor):
    svm = _fit(tree, BCFW(minibatch=3, step="pairwise"), passes=3000, tol=1e-8, n_jobs=2, executor=executor)
    sub = _suboptimality(tree, svm.coef_)
    assert -1e-9 <= sub <= max(svm.gap_, 0.0) + 1e-9
    assert sub < 1e-6
    serial = _fit(tree, BCFW(minibatch=3, step="pairwise"), passes=3000, tol=1e-8)
    np.testing.assert_allclose(svm.coef_, serial.coef_, atol=1e-6)


# ------------------------------------------------------------------ positivity
def test_nonnegative_potts_weights_reach_the_constrained_optimum():
    # neighbours planted to disagree: the free optimum has a negative Potts weight, so w_p >= 0 is active
    X, Y = _tree_problem(seed=1, n=6, attract=False)
    free = GraphModel(K, F, pairwise="potts")
    model = GraphModel(K, F, pairwise="potts", nonnegative_pairwise=True)
    S = model.nonnegative_indices
    np.testing.assert_array_equal(S, [free.pairwise_offset])
    corners = _corners(model, X, Y)
    d = model.size_joint_feature
    w_free = primal_qp_optimum(corners, len(X), d, LAM)
    assert w_free[S[0]] < -1e-3
    w_star = primal_qp_optimum(corners, len(X), d, LAM, S)
    P_star = corners_primal(corners, len(X), LAM, w_star)
    for solver in (BCFW(step="pairwise"), BCFW(step="away", sampling="gap")):
        svm = sf.StructuredSVM(model, solver=solver, lam=LAM, max_passes=2000, tol=1e-9, random_state=0).fit(X, Y)
        assert svm.coef_[S[0]] >= 0.0
        sub = corners_primal(corners, len(X), LAM, svm.coef_) - P_star
        assert -1e-9 <= sub <= svm.gap_ + 1e-9 and sub < 1e-6
        np.testing.assert_allclose(svm.coef_, w_star, atol=1e-3)
    with pytest.raises(ValueError, match="pairwise='potts'"):
        GraphModel(K, F, pairwise="full", nonnegative_pairwise=True)


# ------------------------------------------------------------------ estimator features
def test_regularization_path_is_eps_approximate(tree):
    model, X, Y, corners, *_ = tree
    eps = 0.05
    path = sf.path.regularization_path(model, X, Y, eps=eps, min_lam=0.02, random_state=0)
    assert path.status in ("ended", "min_lam") and len(path) >= 2
    bp = path.breakpoints
    d = model.size_joint_feature
    for lam in (bp[0], np.sqrt(bp[0] * bp[-1]), bp[-1], max(path.lam_end, 0.02)):
        w_lam = primal_qp_optimum(corners, len(X), d, lam)
        P_lam = corners_primal(corners, len(X), lam, w_lam)
        assert corners_primal(corners, len(X), lam, path.coef_at(lam)) - P_lam <= eps + 1e-6


def test_warm_start_five_plus_five_is_ten(tree):
    model, X, Y = tree[:3]
    one = sf.StructuredSVM(model, lam=LAM, max_passes=10, tol=1e-9, check_every=1, random_state=0).fit(X, Y)
    two = sf.StructuredSVM(model, lam=LAM, max_passes=5, tol=1e-9, check_every=1, random_state=0,
                           warm_start=True).fit(X, Y)
    two.fit(X, Y)
    np.testing.assert_allclose(two.coef_, one.coef_, atol=1e-9)
    assert two.gap_ == pytest.approx(one.gap_, rel=1e-6, abs=1e-12)


def test_save_and_load_round_trip(tree, tmp_path):
    X, Y = tree[1], tree[2]
    model = GraphModel(K, F, pairwise="potts", nonnegative_pairwise=True, class_weight=[1.0, 2.0])
    svm = sf.StructuredSVM(model, lam=LAM, max_passes=5, random_state=0).fit(X, Y)
    path = svm.save(tmp_path / "graph")
    loaded = sf.load(path)
    assert loaded.model.get_config() == model.get_config()
    np.testing.assert_array_equal(loaded.model.nonnegative_indices, model.nonnegative_indices)
    np.testing.assert_array_equal(loaded.coef_, svm.coef_)
    for a, b in zip(loaded.predict(X), svm.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_grid_search_over_lam(tree):
    from sklearn.model_selection import GridSearchCV

    model, X, Y = tree[:3]
    svm = sf.StructuredSVM(model, max_passes=10, random_state=0)
    gs = GridSearchCV(svm, {"lam": [0.01, 1.0]}, cv=2, scoring=sf.metrics.token_accuracy_scorer,
                      error_score="raise").fit(X, Y)
    scores = gs.cv_results_["mean_test_score"]
    assert len(scores) == 2 and np.all((scores >= 0) & (scores <= 1))
    assert gs.best_params_["lam"] in (0.01, 1.0)
    assert 0.0 <= sf.metrics.token_accuracy(Y, gs.predict(X)) <= 1.0


def test_keyboard_interrupt_keeps_best_iterate(tree):
    X, Y = tree[1], tree[2]
    calls = {"n": 0}

    class Flaky(GraphModel):
        def loss_augmented_decode(self, x, y, w):
            calls["n"] += 1
            if calls["n"] == 3 * len(X) + 2:  # in the middle of the third pass
                raise KeyboardInterrupt
            return super().loss_augmented_decode(x, y, w)

    svm = sf.StructuredSVM(Flaky(K, F, pairwise="symmetric"), lam=LAM, max_passes=50, tol=None, check_every=1,
                           random_state=0).fit(X, Y)
    assert svm.stopped_ == "interrupted"
    assert svm.primal_ == pytest.approx(np.min(svm.trace_["primal"]))
    assert np.linalg.norm(svm.coef_) > 0  # not the initial w = 0
    assert len(svm.predict(X)) == len(X)


# ------------------------------------------------------------------ the real task (loopy graphs)
@pytest.mark.slow
def test_superpixel_graphs_certified_gap():
    pytest.importorskip("skimage")
    data = sf.datasets.load_superpixel_graphs("seg-graph", "train", n_images=4, cache=False)
    model = data.make_model()
    x = model.check_X(data.X[:1])[0]
    assert x.tree is None  # region adjacency graphs have cycles
    svm = sf.StructuredSVM(model, lam=0.25, max_passes=8, tol=None, random_state=0).fit(data.X, data.Y)
    assert model.approximate_oracle
    tr = svm.trace_
    cert, gap = np.asarray(tr["certified_gap"], float), np.asarray(tr["gap"], float)
    assert np.all(cert >= gap - 1e-9)  # the certificate is never below the oracle's gap
    assert cert[-1] < cert[0]


# ------------------------------------------------------------------ the data set and its command
def test_load_superpixel_graphs_slices_and_checks():
    pytest.importorskip("skimage")
    from structfw.datasets import load_superpixel_graphs, without_edges

    a = load_superpixel_graphs("seg-graph-binary", "test", n_images=2, cache=False)
    b = load_superpixel_graphs("seg-graph-binary", "test", n_images=1, cache=False)
    assert len(a.X) == 2 and len(b.X) == 1
    for u, v in zip(a.X[0], b.X[0]):  # deterministic, and a slice is a prefix of the split
        np.testing.assert_array_equal(u, v)
    nodes, edges, ef = a.X[0]
    assert nodes.shape[1] == 41 and edges.shape[1] == 2 and ef.shape == (len(edges), 3)
    assert set(np.unique(np.concatenate(a.Y))) <= {0, 1}
    model = a.make_model(nonnegative_pairwise=True)
    assert model.n_states == 2 and model.pairwise == "potts"
    x = model.check_X(a.X[:1])[0]
    assert x.tree is None  # a region adjacency graph has cycles
    # non-negative Potts weights and edge features: submodular, so "auto" takes (exact) QPBO
    w = np.ones(model.size_joint_feature)
    assert model.inference_backend(x, w) == "qpbo"
    bare = without_edges(a.X)
    assert bare[0][1].shape == (0, 2) and bare[0][2].shape == (0, 3) and bare[0][0] is nodes
    assert model.check_X(bare[:1])[0].tree is not None
    with pytest.raises(ValueError, match="name must be one of"):
        load_superpixel_graphs("seg-graph-ternary")
    with pytest.raises(ValueError, match="n_images must be in 1..40"):
        load_superpixel_graphs("seg-graph", "test", n_images=41)


@pytest.mark.slow
def test_train_command_on_seg_graph(tmp_path):
    pytest.importorskip("skimage")
    from click.testing import CliRunner

    from structfw.cli import main

    res = CliRunner().invoke(main, ["train", "--data", "seg-graph", "--passes", "2", "--lam", "0.0167", "--quiet",
                                    "--save", str(tmp_path / "m.npz")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    svm = sf.load(tmp_path / "m.npz")
    assert type(svm.model).__name__ == "GraphModel" and svm.model.n_states == 6
    res = CliRunner().invoke(main, ["train", "--data", "seg-graph", "--model", "potts"])
    assert res.exit_code == 2 and "its model is graph" in res.output
