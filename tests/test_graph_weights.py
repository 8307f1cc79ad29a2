"""Per-node loss weights of GraphModel: the loss-augmented oracle, the corners and the exact QP
see the weighted loss sum_v c_v [y_v != y_v^true], c_v = omega_v cw[y_v] / sum_u omega_u cw[y_u]."""
import itertools

import numpy as np
import pytest

import structfw as sf
from structfw._linalg import as_dense
from structfw.models import GraphModel
from structfw.solvers import BCFW

TREE = np.array([(0, 1), (1, 2), (1, 3)], np.int64)


def weighted_examples(rng, n, K, F, with_weights=True):
    X, Y = [], []
    for _ in range(n):
        omega = rng.uniform(0.0, 3.0, 4)
        omega[rng.integers(0, 4)] = 0.0  # an unweighted node: its mistakes cost nothing
        x = (rng.normal(size=(4, F)), TREE, None, omega) if with_weights else (rng.normal(size=(4, F)), TREE)
        X.append(x)
        Y.append(rng.integers(0, K, 4))
    return X, Y


def brute(model, x, y, w, K):
    return max((model.example_loss(x, y, np.array(c)) + model.score(x, np.array(c), w), c)
               for c in itertools.product(range(K), repeat=len(y)))


@pytest.mark.parametrize("class_weight", [None, [1.0, 2.0, 0.5]])
def test_weighted_loss_augmented_decoding_against_brute_force(class_weight):
    rng = np.random.default_rng(0)
    K = 3
    model = GraphModel(K, 2, class_weight=class_weight)
    X, Y = weighted_examples(rng, 6, K, 2)
    Xv, Yv = model.check_data(X, Y)
    for x, y in zip(Xv, Yv):
        w = rng.normal(size=model.size_joint_feature)
        best, _ = brute(model, x, y, w, K)
        y_hat = model.loss_augmented_decode(x, y, w)
        assert model.example_loss(x, y, y_hat) + model.score(x, y_hat, w) == pytest.approx(best, abs=1e-9)
        # the weighted loss is normalised: all wrong gives 1, the truth 0
        assert model.example_loss(x, y, y) == 0.0
        assert model.example_loss(x, y, (y + 1) % K) == pytest.approx(1.0)


def test_node_weights_change_the_loss_and_equal_weights_do_not():
    rng = np.random.default_rng(1)
    model = GraphModel(3, 2)
    nodes = rng.normal(size=(4, 2))
    y = np.array([0, 1, 2, 0])
    y_hat = np.array([1, 1, 2, 0])
    (plain, ones, heavy), _ = model.check_data([(nodes, TREE), (nodes, TREE, None, np.ones(4)),
                                                (nodes, TREE, None, np.array([3.0, 1, 1, 1]))])
    assert model.example_loss(plain, y, y_hat) == pytest.approx(0.25)
    assert model.example_loss(ones, y, y_hat) == pytest.approx(0.25)
    assert model.example_loss(heavy, y, y_hat) == pytest.approx(0.5)


def test_fit_with_node_weights_reaches_the_weighted_qp_optimum():
    pytest.importorskip("cvxopt")
    from toy import corners_primal, primal_qp_optimum

    rng = np.random.default_rng(2)
    K, lam = 2, 0.1
    model = GraphModel(K, 2)
    X, Y = weighted_examples(rng, 4, K, 2)
    Xv, Yv = model.check_data(X, Y)
    corners = [(i, as_dense(model.psi(x, y, np.array(c))), model.example_loss(x, y, np.array(c)))
               for i, (x, y) in enumerate(zip(Xv, Yv)) for c in itertools.product(range(K), repeat=4)]
    w_star = primal_qp_optimum(corners, len(X), model.size_joint_feature, lam)
    P_star = corners_primal(corners, len(X), lam, w_star)
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=lam, max_passes=2000, tol=1e-10,
                           random_state=0).fit(X, Y)
    assert corners_primal(corners, len(X), lam, svm.coef_) - P_star < 1e-7
    # the unweighted problem has another optimum: the weights matter
    Xu = [x[:2] for x in X]
    plain = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=lam, max_passes=300, tol=1e-8,
                             random_state=0).fit(Xu, Y)
    assert np.linalg.norm(plain.coef_ - svm.coef_) > 1e-3


@pytest.mark.parametrize("omega, needle", [(np.ones(3), "shape"), (np.array([1.0, -1, 1, 1]), ">= 0"),
                                           (np.zeros(4), "all zero"), (np.array([1.0, np.nan, 1, 1]), "finite")])
def test_bad_node_weights_are_named(omega, needle):
    model = GraphModel(3, 2)
    with pytest.raises(ValueError, match=needle):
        model.check_X([(np.ones((4, 2)), TREE, None, omega)])
