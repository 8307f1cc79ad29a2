"""Weighted losses (docs/guide/weights.md): per-example and per-node sample weights and class weights,
exact in loss-augmented decoding (brute force), in the compiled corners (against the Python oracle)
and at the optimum (the exact QP of the weighted problem), for every model that takes them."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.class_weight import compute_class_weight

import structfw as sf
from structfw._linalg import as_dense
from structfw.models import ChainModel, GraphModel, GridModel, MulticlassModel
from structfw.models.base import WeightedInput
from structfw.models.graphcut import GraphCutModel
from structfw.models.matching import MatchingModel
from structfw.models.potts import PottsModel
from structfw.oracles.compiled import corner
from structfw.solvers import BCFW, FW, SSG, Problem

TREE = np.array([(0, 1), (1, 2), (1, 3)], np.int64)


def chain_data(rng, n=5, S=3, F=4, L=(2, 5), sparse=False):
    X = [rng.normal(size=(int(rng.integers(*L)), F)) for _ in range(n)]
    X = [np.where(rng.random(x.shape) < 0.3, 0.0, x) for x in X]
    if sparse:
        X = [sp.csr_matrix(x) for x in X]
    Y = [rng.integers(0, S, x.shape[0]) for x in X]
    return X, Y


def node_weights(rng, Y, zero=True):
    out = []
    for y in Y:
        c = rng.uniform(0.1, 3.0, np.size(y))
        if zero and c.size > 1:
            c[rng.integers(0, c.size)] = 0.0
        out.append(c)
    return out


def brute_max(model, x, y, w, K, n_nodes, shape=None):
    """max_y example_loss + score by enumeration (the weighted loss-augmented objective)."""
    best = -np.inf
    for c in itertools.product(range(K), repeat=n_nodes):
        yy = np.array(c, np.int64) if shape is None else np.array(c, np.int64).reshape(shape)
        best = max(best, model.example_loss(x, y, yy) + model.score(x, yy, w))
    return best


def weighted_inputs(model, X, Y, sample_weight=None, class_weight=None):
    """The training inputs StructuredSVM.fit builds (after check_data)."""
    svm = sf.StructuredSVM(model, class_weight=class_weight)
    from structfw import _labels
    classes, Ys = _labels.fit_classes(model, Y)
    Xv, Yv = model.check_data(X, Ys)
    cw = _labels.resolve_class_weight(model, classes, Yv, class_weight)
    return svm._weighted_inputs(Xv, Yv, sample_weight, cw), Yv


# ------------------------------------------------------------- brute force
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kind", ["node", "example", "class"])
def test_chain_weighted_decoding_matches_brute_force(sparse, kind):
    rng = np.random.default_rng(1 + sparse)
    S = 3
    model = ChainModel(S, 4)
    X, Y = chain_data(rng, n=8, S=S, L=(1, 5), sparse=sparse)
    sw = {"node": node_weights(rng, Y), "example": list(rng.uniform(0, 3, len(X))), "class": None}[kind]
    cw = {0: 3.0, 2: 0.5} if kind == "class" else None
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    for x, y in zip(Xw, Yv):
        assert type(x) is WeightedInput
        w = rng.normal(size=model.size_joint_feature)
        y_hat = model.loss_augmented_decode(x, y, w)
        value = model.example_loss(x, y, y_hat) + model.score(x, y_hat, w)
        assert value == pytest.approx(brute_max(model, x, y, w, S, len(y)), abs=1e-9)
        assert model.example_loss(x, y, y) == 0.0


def test_chain_node_weights_define_the_loss():
    model = ChainModel(3, 2)
    x = np.ones((4, 2))
    y = np.array([0, 1, 2, 0])
    xw = model.weight_example(x, y, np.array([2.0, 1.0, 1.0, 0.0]))
    np.testing.assert_allclose(xw.loss_weights, [0.5, 0.25, 0.25, 0.0])
    assert model.example_loss(xw, y, np.array([1, 1, 2, 0])) == pytest.approx(0.5)
    assert model.example_loss(xw, y, (y + 1) % 3) == pytest.approx(1.0)
    # a weight-0 node does not count: any label there costs nothing
    assert model.example_loss(xw, y, np.array([0, 1, 2, 2])) == 0.0
    # a per-example weight multiplies the loss; weights compose
    xs = model.weight_example(x, y, 2.5)
    assert model.example_loss(xs, y, np.array([1, 1, 2, 0])) == pytest.approx(2.5 / 4)
    assert model.example_loss(model.weight_example(xw, y, 2.0), y, (y + 1) % 3) == pytest.approx(2.0)
    # the unweighted input's methods see no difference
    w = np.random.default_rng(0).normal(size=model.size_joint_feature)
    assert model.decode(xw, w).tolist() == model.decode(x, w).tolist()
    np.testing.assert_allclose(as_dense(model.psi(xw, y, (y + 1) % 3)), as_dense(model.psi(x, y, (y + 1) % 3)))


def test_weight_zero_node_is_ignored_by_the_oracle():
    """With node l of weight 0 the oracle maximises the loss of the others plus the score: the label
    at l is the one the score prefers, whatever the true label written there."""
    rng = np.random.default_rng(3)
    S = 3
    model = ChainModel(S, 2)
    x = rng.normal(size=(3, 2))
    c = np.array([1.0, 0.0, 1.0])
    w = rng.normal(size=model.size_joint_feature)
    outs = []
    for filler in range(S):
        y = np.array([0, filler, 2])
        xw = model.weight_example(x, y, c)
        outs.append(model.loss_augmented_decode(xw, y, w))
        # the loss-augmented value is the same for every filler label
        assert model.example_loss(xw, y, outs[-1]) + model.score(xw, outs[-1], w) == pytest.approx(
            brute_max(model, xw, y, w, S, 3), abs=1e-12)
    assert all(o.tolist() == outs[0].tolist() for o in outs)


@pytest.mark.parametrize("kind", ["example", "class"])
def test_multiclass_weighted_decoding_matches_brute_force(kind):
    rng = np.random.default_rng(4)
    K = 4
    model = MulticlassModel(K, 3)
    X = rng.normal(size=(30, 3))
    Y = rng.integers(0, K, 30)
    sw = list(rng.uniform(0, 3, 30)) if kind == "example" else None
    cw = "balanced" if kind == "class" else None
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    for x, y in zip(Xw, Yv):
        w = rng.normal(size=model.size_joint_feature) * 0.3
        y_hat = model.loss_augmented_decode(x, y, w)
        best = max(model.example_loss(x, y, k) + model.score(x, k, w) for k in range(K))
        assert model.example_loss(x, y, y_hat) + model.score(x, y_hat, w) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("kind", ["node", "class"])
def test_graph_model_estimator_weights_match_brute_force(kind):
    rng = np.random.default_rng(5)
    K = 3
    model = GraphModel(K, 2)
    X = [(rng.normal(size=(4, 2)), TREE) for _ in range(5)]
    Y = [rng.integers(0, K, 4) for _ in range(5)]
    sw = node_weights(rng, Y) if kind == "node" else [1.5] * 5
    cw = {1: 4.0} if kind == "class" else None
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    for x, y in zip(Xw, Yv):
        w = rng.normal(size=model.size_joint_feature)
        y_hat = model.loss_augmented_decode(x, y, w)
        value = model.example_loss(x, y, y_hat) + model.score(x, y_hat, w)
        assert value == pytest.approx(brute_max(model, x, y, w, K, 4), abs=1e-9)
    if kind == "class":  # a per-example weight is the loss's scale: everything wrong costs 1.5
        assert model.example_loss(Xw[0], Yv[0], (Yv[0] + 1) % K) == pytest.approx(1.5)


def test_graph_model_sample_weight_is_node_weights():
    """Per-node sample weights go through GraphModel's node_weights: the same fit either way."""
    rng = np.random.default_rng(6)
    model = GraphModel(2, 2)
    X = [(rng.normal(size=(4, 2)), TREE) for _ in range(6)]
    Y = [rng.integers(0, 2, 4) for _ in range(6)]
    c = node_weights(rng, Y)
    kw = dict(solver=BCFW(step="pairwise"), lam=0.1, max_passes=30, tol=None, random_state=0)
    a = sf.StructuredSVM(model, **kw).fit(X, Y, sample_weight=c)
    b = sf.StructuredSVM(model, **kw).fit([(*x, None, ci) for x, ci in zip(X, c)], Y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)


def test_grid_weighted_augmentation_is_exact():
    """On a 1 x 4 grid the oracle (row Viterbi in block ICM) is exact: brute force; on 2 x 2 the
    augmented energy is exactly loss + score and TRW-S's bound covers the brute-force maximum."""
    rng = np.random.default_rng(7)
    S = 2
    model = GridModel(S, 2)
    for shape in [(1, 4), (2, 2)]:
        x = rng.normal(size=(*shape, 2))
        y = rng.integers(0, S, shape)
        c = rng.uniform(0, 2, shape)
        xw = model.weight_example(x, y, c)
        w = rng.normal(size=model.size_joint_feature)
        best = brute_max(model, xw, y, w, S, 4, shape)
        for yy in itertools.product(range(S), repeat=4):
            yy = np.array(yy).reshape(shape)
            assert model.energy(xw, yy, w, y) == pytest.approx(model.example_loss(xw, y, yy) + model.score(xw, yy, w))
        y_hat, bound = model.loss_augmented_decode_with_bound(xw, y, w)
        assert bound >= best - 1e-9
        if shape[0] == 1:
            assert model.example_loss(xw, y, y_hat) + model.score(xw, y_hat, w) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("which", ["graphcut", "potts"])
def test_graph_cut_and_potts_weighted_decoding(which):
    rng = np.random.default_rng(8)
    V, E = 5, 6
    edges = np.array([(0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (1, 3)], np.int64)
    if which == "graphcut":
        model, K = GraphCutModel(2, 1), 2
    else:
        model, K = PottsModel(3, 2, 1), 3
    for trial in range(5):
        x = (rng.normal(size=(V, 2)), edges, rng.uniform(0, 1, (E, 1)))
        y = rng.integers(0, K, V)
        (xv,), (yv,) = model.check_data([x], [y])
        xw = model.weight_example(xv, yv, node_weights(rng, [yv])[0])
        w = rng.normal(size=model.size_joint_feature)
        w[model.nonnegative_indices] = np.abs(w[model.nonnegative_indices])
        best = brute_max(model, xw, yv, w, K, V)
        y_hat = model.loss_augmented_decode(xw, yv, w)
        value = model.example_loss(xw, yv, y_hat) + model.score(xw, y_hat, w)
        assert model.score_labelling(xw, y_hat, w, yv) == pytest.approx(value)
        if which == "graphcut":  # one min cut: exact
            assert value == pytest.approx(best, abs=1e-9)
        else:  # alpha expansion: never below the truth; TRW-S's bound covers the maximum
            assert value >= model.score(xw, yv, w) - 1e-12
            assert model.loss_augmented_decode_with_bound(xw, yv, w)[1] >= best - 1e-9


# ------------------------------------------------------------- compiled corners
@pytest.mark.parametrize("case", ["dense", "csr", "multiclass"])
def test_compiled_weighted_corners_match_the_python_oracle(case):
    rng = np.random.default_rng(9)
    if case == "multiclass":
        model = MulticlassModel(4, 5)
        X, Y = rng.normal(size=(12, 5)), rng.integers(0, 4, 12)
        sw, cw = list(rng.uniform(0, 2, 12)), {1: 3.0}
    else:
        model = ChainModel(3, 4)
        X, Y = chain_data(rng, n=10, sparse=case == "csr")
        sw, cw = node_weights(rng, Y), "balanced"
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    problem = Problem(model, Xw, Yv, 0.1, validated=True)
    kind, data = problem.compiled_oracle()
    assert kind >= 3  # the weighted kinds
    for trial in range(3):
        w = rng.normal(size=model.size_joint_feature)
        for i in range(len(Xw)):
            for merged in (False, True):
                idx, val, L = corner(kind, data, i, w, merged)
                y = model.loss_augmented_decode(Xw[i], Yv[i], w)
                psi = as_dense(model.psi(Xw[i], Yv[i], y))
                got = np.zeros(model.size_joint_feature)
                np.add.at(got, idx, val)
                np.testing.assert_allclose(got, psi, atol=1e-9)
                assert L == pytest.approx(model.example_loss(Xw[i], Yv[i], y), abs=1e-12)
        H = problem.batch_hinges(w)
        H_py = [model.example_loss(x, y, model.loss_augmented_decode(x, y, w))
                - as_dense(model.psi(x, y, model.loss_augmented_decode(x, y, w))) @ w for x, y in zip(Xw, Yv)]
        np.testing.assert_allclose(H, H_py, atol=1e-9)


def test_weights_of_one_give_the_unweighted_fit():
    rng = np.random.default_rng(10)
    model = ChainModel(3, 4)
    X, Y = chain_data(rng, n=6)
    kw = dict(lam=0.1, max_passes=20, tol=None, random_state=0)
    a = sf.StructuredSVM(model, **kw).fit(X, Y)
    b = sf.StructuredSVM(model, **kw).fit(X, Y, sample_weight=[1.0] * 6)
    c = sf.StructuredSVM(model, **kw).fit(X, Y, sample_weight=[np.ones(len(y)) for y in Y])
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-12)
    np.testing.assert_allclose(c.coef_, a.coef_, atol=1e-12)
    np.testing.assert_allclose(a.class_weight_, np.ones(3))


def test_class_weight_equals_the_per_node_weights_it_resolves_to():
    rng = np.random.default_rng(11)
    model = ChainModel(3, 4)
    X, Y = chain_data(rng, n=6)
    labels = ["a", "b", "c"]
    Ys = [np.array(labels)[y] for y in Y]
    kw = dict(solver=BCFW(step="pairwise"), lam=0.1, max_passes=15, tol=None, random_state=0)
    a = sf.StructuredSVM(model, class_weight={"a": 2.0, "c": 0.5}, **kw).fit(X, Ys)
    cw = np.array([2.0, 1.0, 0.5])
    np.testing.assert_allclose(a.class_weight_, cw)
    b = sf.StructuredSVM(model, **kw).fit(X, Ys, sample_weight=[cw[y] for y in Y])
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)


def test_balanced_class_weight_follows_scikit_learn():
    rng = np.random.default_rng(12)
    model = ChainModel(4, 3)
    X, Y = chain_data(rng, n=8, S=3, F=3)  # state 3 never occurs
    svm = sf.StructuredSVM(model, class_weight="balanced", max_passes=1, tol=None).fit(X, Y)
    flat = np.concatenate(Y)
    expected = compute_class_weight("balanced", classes=np.unique(flat), y=flat)
    np.testing.assert_allclose(svm.class_weight_[:3], expected)
    assert svm.class_weight_[3] == 1.0
    # multiclass counts examples
    mc = MulticlassModel(3, 2)
    Xm, Ym = rng.normal(size=(20, 2)), np.array([0] * 12 + [1] * 6 + [2] * 2)
    s = sf.StructuredSVM(mc, class_weight="balanced", max_passes=1, tol=None).fit(Xm, Ym)
    np.testing.assert_allclose(s.class_weight_, compute_class_weight("balanced", classes=np.arange(3), y=Ym))


def test_clone_and_get_params_keep_class_weight():
    for cw in [None, "balanced", {0: 2.0, 1: 0.5}]:
        svm = sf.StructuredSVM(ChainModel(2, 2), class_weight=cw)
        assert svm.get_params()["class_weight"] == cw
        c = clone(svm)
        assert c.get_params()["class_weight"] == cw
        assert c.set_params(class_weight="balanced").class_weight == "balanced"
    assert "class_weight" in (sf.StructuredSVM.__doc__ or "")


# ------------------------------------------------------------- exact QP optimum
def chain_corners(model, Xw, Yv, S):
    out = []
    for i, (x, y) in enumerate(zip(Xw, Yv)):
        for c in itertools.product(range(S), repeat=len(y)):
            yy = np.array(c, np.int64)
            out.append((i, as_dense(model.psi(x, y, yy)), model.example_loss(x, y, yy)))
    return out


@pytest.fixture(scope="module")
def weighted_chain():
    pytest.importorskip("cvxopt")
    from toy import corners_primal, primal_qp_optimum

    rng = np.random.default_rng(13)
    S, lam = 2, 0.1
    model = ChainModel(S, 2)
    X, Y = chain_data(rng, n=4, S=S, F=2, L=(2, 4))
    sw = node_weights(rng, Y)
    sw[1] = 2.5  # a per-example weight beside the per-node ones
    cw = {0: 1.5}
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    corners = chain_corners(model, Xw, Yv, S)
    w_star = primal_qp_optimum(corners, len(X), model.size_joint_feature, lam)
    P_star = corners_primal(corners, len(X), lam, w_star)
    return model, X, Y, sw, cw, lam, corners, P_star, w_star


@pytest.mark.parametrize("solver", [BCFW(step="pairwise"), BCFW(step="away"),
                                    BCFW(step="pairwise", cache=True, sampling="gap", gap_refresh=2),
                                    BCFW(step="pairwise", block_storage="sparse"),
                                    BCFW(step="away", cache=True, block_storage="sparse")],
                         ids=lambda s: f"{s.label}-{s.block_storage}")
def test_bcfw_reaches_the_weighted_qp_optimum(weighted_chain, solver):
    from toy import corners_primal

    model, X, Y, sw, cw, lam, corners, P_star, w_star = weighted_chain
    svm = sf.StructuredSVM(model, solver=solver, lam=lam, max_passes=3000, tol=1e-10, random_state=0,
                           class_weight=cw).fit(X, Y, sample_weight=sw)
    P = corners_primal(corners, len(X), lam, svm.coef_)
    assert P - P_star < 1e-7
    assert svm.primal_ == pytest.approx(P, abs=1e-9)  # the engine's primal is the weighted one
    assert svm.gap_ >= P - P_star - 1e-9
    np.testing.assert_allclose(svm.coef_, w_star, atol=1e-3)


@pytest.mark.parametrize("solver", [BCFW(), FW(), SSG(averaging="weighted")], ids=lambda s: s.label)
def test_sublinear_solvers_approach_the_weighted_optimum(weighted_chain, solver):
    from toy import corners_primal

    model, X, Y, sw, cw, lam, corners, P_star, w_star = weighted_chain
    svm = sf.StructuredSVM(model, solver=solver, lam=lam, max_passes=1500, tol=None, check_every=100,
                           random_state=0, class_weight=cw).fit(X, Y, sample_weight=sw)
    P = corners_primal(corners, len(X), lam, svm.coef_)
    P0 = corners_primal(corners, len(X), lam, np.zeros(model.size_joint_feature))
    assert P - P_star < 0.05 * (P0 - P_star)
    if solver.has_dual:
        assert svm.gap_ >= P - P_star - 1e-9


def test_weighted_multiclass_reaches_the_qp_optimum():
    pytest.importorskip("cvxopt")
    from toy import corners_primal, primal_qp_optimum

    rng = np.random.default_rng(14)
    K, lam = 3, 0.1
    model = MulticlassModel(K, 2)
    X, Y = rng.normal(size=(8, 2)), rng.integers(0, K, 8)
    sw = list(rng.uniform(0, 3, 8))
    Xw, Yv = weighted_inputs(model, X, Y, sw, "balanced")
    corners = [(i, as_dense(model.psi(x, y, k)), model.example_loss(x, y, k))
               for i, (x, y) in enumerate(zip(Xw, Yv)) for k in range(K)]
    w_star = primal_qp_optimum(corners, 8, model.size_joint_feature, lam)
    P_star = corners_primal(corners, 8, lam, w_star)
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=lam, max_passes=3000, tol=1e-10,
                           random_state=0, class_weight="balanced").fit(X, Y, sample_weight=sw)
    assert corners_primal(corners, 8, lam, svm.coef_) - P_star < 1e-7


def test_the_path_takes_weighted_inputs(weighted_chain):
    """Weighted inputs pass check_data again, so the regularisation path sees the weighted corners."""
    from structfw.path import regularization_path

    model, X, Y, sw, cw, lam, corners, P_star, w_star = weighted_chain
    Xw, Yv = weighted_inputs(model, X, Y, sw, cw)
    Xc, _ = model.check_data(Xw, Yv)
    assert all(type(x) is WeightedInput for x in Xc)
    np.testing.assert_array_equal(Xc[0].loss_weights, Xw[0].loss_weights)
    path = regularization_path(model, Xw, Yv, eps=0.05, min_lam=1.0, random_state=0)
    assert len(path) >= 1
    from toy import corners_primal, primal_qp_optimum

    for lam_q in [path.lam_end, 0.5 * (path.lam_end + path.lam_inf)]:
        # the path's gap bound certifies its iterate on the weighted problem
        w_q = primal_qp_optimum(corners, len(X), model.size_joint_feature, lam_q)
        P_q = corners_primal(corners, len(X), lam_q, w_q)
        assert corners_primal(corners, len(X), lam_q, path.coef_at(lam_q)) - P_q <= path.gap_bound_at(lam_q) + 1e-7


# ------------------------------------------------------------- errors
@pytest.mark.parametrize("sw, needle", [
    ([1.0, -1.0, 1.0], r"sample_weight\[1\] must be a finite number >= 0"),
    ([1.0, float("nan"), 1.0], r"sample_weight\[1\] must be a finite number >= 0"),
    ([1.0, 1.0], "one entry per example"),
    ("abc", "sequence"),
    ([1.0, "x", 1.0], r"sample_weight\[1\]"),
    ([np.zeros(3), 1.0, 1.0], r"sample_weight\[0\].*all zero"),
    ([np.ones(2), 1.0, 1.0], r"sample_weight\[0\] must have one weight per node"),
    ([np.array([1.0, np.nan, 1.0]), 1.0, 1.0], r"sample_weight\[0\] must hold finite"),
    ([np.array([1.0, -1.0, 1.0]), 1.0, 1.0], r"sample_weight\[0\] must hold finite weights >= 0"),
])
def test_bad_sample_weight_is_named(sw, needle):
    model = ChainModel(2, 2)
    X = [np.ones((3, 2))] * 3
    Y = [np.array([0, 1, 0])] * 3
    with pytest.raises(ValueError, match=needle):
        sf.StructuredSVM(model, max_passes=1).fit(X, Y, sample_weight=sw)


@pytest.mark.parametrize("cw, needle", [("bal", "class_weight' must be"), ({5: 1.0}, "class_weight has label 5"),
                                        ({0: -1.0}, r"class_weight\[0\]"), ([1.0, 2.0], "class_weight' must be"),
                                        ({0: float("nan")}, r"class_weight\[0\]")])
def test_bad_class_weight_is_named(cw, needle):
    X = [np.ones((3, 2))] * 3
    Y = [np.array([0, 1, 0])] * 3
    with pytest.raises(ValueError, match=needle):
        sf.StructuredSVM(ChainModel(2, 2), class_weight=cw, max_passes=1).fit(X, Y)


def test_class_weights_that_zero_an_example_are_named():
    X = [np.ones((2, 2))] * 2
    Y = [np.array([0, 0]), np.array([0, 1])]
    with pytest.raises(ValueError, match=r"sample_weight\[0\] and class_weight"):
        sf.StructuredSVM(ChainModel(2, 2), class_weight={0: 0.0}, max_passes=1).fit(X, Y)


def test_unlabelled_nodes_are_refused_with_a_pointer_to_the_latent_svm():
    X = [np.ones((3, 2))] * 2
    Y = [np.array([0, -1, 1]), np.array([0, 1, 1])]
    with pytest.raises(ValueError, match=r"Y\[0\] marks nodes unlabelled.*LatentStructuredSVM.*weight of 0"):
        sf.StructuredSVM(ChainModel(2, 2), max_passes=1).fit(X, Y)


def test_models_without_per_node_weights_refuse_them():
    rng = np.random.default_rng(15)
    model = MatchingModel(2)
    X = [rng.normal(size=(3, 3, 2)) for _ in range(2)]
    Y = [np.array([0, 1, -1]), np.array([2, -1, 0])]  # -1 is "no link" here, not unlabelled
    with pytest.raises(ValueError, match=r"sample_weight\[0\].*no nodes to weigh"):
        sf.StructuredSVM(model, max_passes=1).fit(X, Y, sample_weight=[np.ones(3), np.ones(3)])
    with pytest.raises(ValueError, match="class_weight applies to models with class labels"):
        sf.StructuredSVM(model, class_weight="balanced", max_passes=1).fit(X, Y)
    # per-example weights scale the matching loss exactly
    Xw, Yv = weighted_inputs(model, X, Y, [2.0, 0.0])
    w = rng.normal(size=2)
    for x, y in zip(Xw, Yv):
        y_hat = model.loss_augmented_decode(x, y, w)
        best = max(model.example_loss(x, y, np.array(p)) + model.score(x, np.array(p), w)
                   for p in itertools.product(range(-1, 3), repeat=3)
                   if len([t for t in p if t >= 0]) == len({t for t in p if t >= 0}))
        assert model.example_loss(x, y, y_hat) + model.score(x, y_hat, w) == pytest.approx(best, abs=1e-9)
    with pytest.raises(ValueError, match=r"sample_weight\[0\] must be a number >= 0"):
        MulticlassModel(2, 2).weight_example(np.ones(2), 0, np.ones(2), name="sample_weight[0]")


def test_kernel_bcfw_and_user_models_refuse_weights():
    X = [np.ones((3, 2))] * 2
    Y = [np.array([0, 1, 0])] * 2
    with pytest.raises(ValueError, match="kernel-bcfw"):
        sf.StructuredSVM(ChainModel(2, 2), solver="kernel-bcfw", max_passes=1).fit(X, Y, sample_weight=[2.0, 1.0])
    from toy import make_toy

    model, Xt, Yt = make_toy()
    with pytest.raises(ValueError, match=r"sample_weight\[0\]: EnumModel cannot weigh its loss"):
        sf.StructuredSVM(model, max_passes=1).fit(Xt, Yt, sample_weight=[2.0] * len(Xt))
    sf.StructuredSVM(model, max_passes=1, tol=None).fit(Xt, Yt, sample_weight=[1.0] * len(Xt))  # 1 is accepted


def test_warm_start_sees_changed_weights_and_workers_get_weighted_inputs():
    rng = np.random.default_rng(16)
    model = ChainModel(3, 4)
    X, Y = chain_data(rng, n=6, L=(3, 5))
    sw = node_weights(rng, Y)
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, tol=None, warm_start=True, random_state=0)
    svm.fit(X, Y, sample_weight=sw)
    with pytest.warns(RuntimeWarning):
        svm.fit(X, Y, sample_weight=[c[::-1].copy() for c in sw])  # other weights: another problem
    # the oracle calls on worker processes see the weighted inputs (FW's batch passes run there)
    kw = dict(solver="fw", lam=0.1, max_passes=4, tol=None, random_state=0)
    a = sf.StructuredSVM(model, **kw).fit(X, Y, sample_weight=sw)
    b = sf.StructuredSVM(model, n_jobs=2, **kw).fit(X, Y, sample_weight=sw)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)


def test_online_eg_takes_per_example_weights():
    """The expectation oracle sees the weighted loss: online EG on a weighted multiclass problem
    approaches the weighted QP optimum; per-node weights on chains are refused clearly."""
    pytest.importorskip("cvxopt")
    from toy import corners_primal, primal_qp_optimum

    rng = np.random.default_rng(17)
    K, lam = 3, 0.1
    model = MulticlassModel(K, 2)
    X, Y = rng.normal(size=(8, 2)), rng.integers(0, K, 8)
    sw = list(rng.uniform(0.2, 3, 8))
    Xw, Yv = weighted_inputs(model, X, Y, sw)
    corners = [(i, as_dense(model.psi(x, y, k)), model.example_loss(x, y, k))
               for i, (x, y) in enumerate(zip(Xw, Yv)) for k in range(K)]
    P_star = corners_primal(corners, 8, lam, primal_qp_optimum(corners, 8, model.size_joint_feature, lam))
    P0 = corners_primal(corners, 8, lam, np.zeros(model.size_joint_feature))
    svm = sf.StructuredSVM(model, solver="online-eg", lam=lam, max_passes=300, tol=None, check_every=50,
                           random_state=0).fit(X, Y, sample_weight=sw)
    assert corners_primal(corners, 8, lam, svm.coef_) - P_star < 0.02 * (P0 - P_star)
    chain = ChainModel(2, 2)
    Xc, Yc = chain_data(rng, n=3, S=2, F=2)
    with pytest.raises(NotImplementedError, match="per-node loss weights"):
        sf.StructuredSVM(chain, solver="online-eg", max_passes=1, tol=None).fit(Xc, Yc,
                                                                                 sample_weight=node_weights(rng, Yc))


@pytest.mark.parametrize("cw", ["balanced", {"a": 2.0, "b": 0.5}, {0: 1.5}])
def test_class_weight_survives_a_model_file(tmp_path, cw):
    import structfw as sf

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) for _ in range(8)]
    labels = ["a", "b", "c"] if isinstance(cw, dict) and "a" in cw else [0, 1, 2]
    Y = [np.array([labels[k] for k in rng.integers(0, 3, 4)], dtype=object if labels[0] == "a" else np.int64)
         for _ in range(8)]
    svm = sf.StructuredSVM(sf.models.ChainModel(3, 3), class_weight=cw, max_passes=2, random_state=0).fit(X, Y)
    svm.save(tmp_path / "m.npz")
    back = sf.load(tmp_path / "m.npz")
    assert back.class_weight == cw
    assert back.get_params()["class_weight"] == cw
