"""MatchingModel (word alignment as bipartite matching) and the synthetic alignment task."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import structfw as sf
from structfw.datasets.alignment import N_FEATURES, make_alignment
from structfw.models import MatchingInput, MatchingModel
from structfw.oracles.matching import max_weight_partial_matching
from toy import corners_primal, primal_qp_optimum


def all_partial_matchings(ms, mt):
    """Every one-to-one partial matching of ms sources into mt targets (y[j] = -1: null)."""
    for y in itertools.product(range(-1, mt), repeat=ms):
        linked = [t for t in y if t >= 0]
        if len(linked) == len(set(linked)):
            yield np.array(y, np.int64)


def random_pair(rng, F, sparse=False):
    ms, mt = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    x = rng.normal(size=(ms, mt, F))
    x[rng.random(x.shape) < 0.3] = 0.0
    if sparse:
        return MatchingInput.from_dense(x), x
    return x, x


def test_assignment_is_the_best_partial_matching():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ms, mt = int(rng.integers(0, 5)), int(rng.integers(0, 5))
        scores = rng.normal(size=(ms, mt))
        y = max_weight_partial_matching(scores)
        linked = y[y >= 0]
        assert len(set(linked.tolist())) == linked.size
        value = scores[np.flatnonzero(y >= 0), linked].sum()
        best = max((scores[np.flatnonzero(z >= 0), z[z >= 0]].sum() for z in all_partial_matchings(ms, mt)),
                   default=0.0)
        assert value == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fn_cost", [1.0, 3.0])
def test_oracles_match_brute_force(sparse, fn_cost):
    rng = np.random.default_rng(1)
    F = 4
    model = MatchingModel(F, fn_cost=fn_cost)
    for _ in range(60):
        x, dense = random_pair(rng, F, sparse)
        x = model.check_X([x])[0]
        ms, mt = dense.shape[:2]
        cands = list(all_partial_matchings(ms, mt))
        y_true = cands[int(rng.integers(len(cands)))]
        w = rng.normal(size=F)

        def phi(y):
            return sum((dense[j, y[j]] for j in range(ms) if y[j] >= 0), np.zeros(F))

        aug = max(model.loss(y_true, z) + phi(z) @ w for z in cands)
        y = model.loss_augmented_decode(x, y_true, w)
        assert model.loss(y_true, y) + phi(y) @ w == pytest.approx(aug, abs=1e-10)
        plain = max(phi(z) @ w for z in cands)
        assert phi(model.decode(x, w)) @ w == pytest.approx(plain, abs=1e-10)
        np.testing.assert_allclose(model.psi(x, y_true, y).toarray(), phi(y_true) - phi(y), atol=1e-12)
        np.testing.assert_allclose(model.joint_feature(x, y).toarray(), phi(y), atol=1e-12)


def test_loss_counts_wrong_missed_and_spurious_links():
    model = MatchingModel(2, fn_cost=3.0)
    yt = np.array([0, 1, -1, 2])
    assert model.loss(yt, yt) == 0.0
    # one wrong link (1 + 3), one missed (3), one spurious (1), normalised by (1 + 3) * 4
    y = np.array([1, -1, 0, 2])
    assert model.loss(yt, y) == pytest.approx((4 + 3 + 1) / 16)
    assert 0.0 <= model.loss(yt, np.array([-1, -1, -1, -1])) <= 1.0


def test_bcfw_reaches_the_qp_optimum_on_a_tiny_task():
    rng = np.random.default_rng(3)
    F, lam = 3, 0.1
    model = MatchingModel(F)
    X = [random_pair(rng, F)[0] for _ in range(4)]
    X = model.check_X(X)
    Y = [list(all_partial_matchings(*x.shape[:2]))[-1] for x in X]
    corners = [(i, model.psi(x, yt, z).toarray(), model.loss(yt, z))
               for i, (x, yt) in enumerate(zip(X, Y)) for z in all_partial_matchings(*x.shape[:2])]
    P_star = corners_primal(corners, len(X), lam, primal_qp_optimum(corners, len(X), F, lam))
    svm = sf.StructuredSVM(model, solver=sf.solvers.BCFW(step="pairwise"), lam=lam, max_passes=400, tol=1e-10,
                           random_state=0, check_every=1).fit(X, Y)
    sub = corners_primal(corners, len(X), lam, svm.coef_) - P_star
    assert -1e-9 < sub < 1e-6 and svm.gap_ >= sub - 1e-10


def test_bad_inputs_name_the_argument():
    model = MatchingModel(3)
    with pytest.raises(ValueError, match="fn_cost"):
        MatchingModel(3, fn_cost=0)
    with pytest.raises(ValueError, match="3-D"):
        model.check_X([np.ones((2, 3))])
    with pytest.raises(ValueError, match="features per edge"):
        model.check_X([np.ones((2, 3, 4))])
    with pytest.raises(ValueError, match="sentence lengths"):
        model.check_X([sp.csr_matrix(np.ones((6, 3)))])
    x = model.check_X([np.ones((2, 3, 3))])[0]
    with pytest.raises(ValueError, match="more than one source"):
        model.check_y(x, [1, 1])
    with pytest.raises(ValueError, match="outside -1..2"):
        model.check_y(x, [3, -1])
    with pytest.raises(ValueError, match="shape"):
        model.check_y(x, [0, 1, 2])


def test_save_and_load_round_trip(tmp_path):
    X, Y = make_alignment(60, random_state=2)
    model = MatchingModel(N_FEATURES, fn_cost=2.0)
    svm = sf.StructuredSVM(model, lam=0.01, max_passes=2, random_state=0).fit(X, Y)
    back = sf.load(svm.save(tmp_path / "m"))
    assert back.model.get_config() == model.get_config()
    np.testing.assert_array_equal(back.coef_, svm.coef_)
    assert all(np.array_equal(a, b) for a, b in zip(back.predict(X), svm.predict(X)))


def test_alignment_task_is_deterministic_and_learnable():
    X1, Y1 = make_alignment(300, random_state=5)
    X2, Y2 = make_alignment(300, random_state=5)
    assert all(np.array_equal(a, b) for a, b in zip(Y1, Y2))
    assert all((a.features != b.features).nnz == 0 for a, b in zip(X1, X2))
    assert all(x.features.shape == (x.n_source * x.n_target, N_FEATURES) for x in X1)
    assert any((y == -1).any() for y in Y1)  # null alignments occur
    model = MatchingModel(N_FEATURES)
    svm = sf.StructuredSVM(model, lam=0.01, max_passes=10, random_state=0).fit(X1[:240], Y1[:240])
    null = np.mean([model.loss(y, np.full_like(y, -1)) for y in Y1[240:]])
    assert 1 - svm.score(X1[240:], Y1[240:]) < 0.5 * null
    with pytest.raises(ValueError, match="n must be"):
        make_alignment(0)
