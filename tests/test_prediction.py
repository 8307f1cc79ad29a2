"""Prediction beyond one labelling: decision_function, exact marginals, temperature
calibration, the k best labellings, per-sequence confidence, and ``structfw predict``.

Every exact quantity is checked against brute-force enumeration of all labellings."""
import itertools
import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import structfw as sf
from structfw.metrics import expected_calibration_error
from structfw.models import ChainModel, GraphModel, GridModel, MulticlassModel

K = 3
F = 4
LETTERS = np.array(["a", "b", "c"])


def _chain_data(n=12, seed=0, L=(1, 4)):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(L[0], L[1] + 1)), F)) for _ in range(n)]
    Y = [rng.integers(0, K, x.shape[0]) for x in X]
    return X, Y


def _fit(model, X, Y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sf.StructuredSVM(model, max_passes=3, tol=None, random_state=0, **kw).fit(X, Y)


def _random_w(svm, seed=1, scale=1.0):
    """Replace the fitted w by a random one: the maths must hold for any w, and a random one
    makes the distributions far from uniform and from a point mass."""
    svm.coef_ = scale * np.random.default_rng(seed).normal(size=svm.coef_.shape)
    return svm


def _brute(model, x, w, T, n_nodes):
    """All labellings with their scores and probabilities at temperature T."""
    ys = [np.array(y, np.int64) for y in itertools.product(range(K), repeat=n_nodes)]
    s = np.array([model.score(x, y, w) for y in ys])
    logZ = np.logaddexp.reduce(s / T)
    return ys, s, np.exp(s / T - logZ), logZ


def _brute_node_marginals(ys, p, n_nodes):
    mu = np.zeros((n_nodes, K))
    for y, q in zip(ys, p):
        mu[np.arange(n_nodes), y] += q
    return mu


@pytest.fixture(scope="module")
def chain_svm():
    X, Y = _chain_data()
    return _random_w(_fit(ChainModel(K, F), X, Y)), X


@pytest.fixture(scope="module")
def string_chain_svm():
    X, Y = _chain_data(seed=3)
    return _random_w(_fit(ChainModel(K, F), X, [LETTERS[y] for y in Y]), seed=4), X


# --------------------------------------------------------------------------- marginals
@pytest.mark.parametrize("T", [1.0, 0.5])
def test_chain_marginals_match_brute_force(chain_svm, T):
    svm, X = chain_svm
    M = svm.predict_marginals(X, temperature=T)
    for x, m in zip(X, M):
        L = x.shape[0]
        assert m.shape == (L, K)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
        ys, _, p, _ = _brute(svm.model, x, svm.coef_, T, L)
        np.testing.assert_allclose(m, _brute_node_marginals(ys, p, L), atol=1e-10)
    for x, q, y in zip(X, svm.predict_proba_sequence(X, temperature=T), svm.predict(X)):
        ys, _, p, _ = _brute(svm.model, x, svm.coef_, T, x.shape[0])
        assert q == pytest.approx(p[[tuple(v) for v in ys].index(tuple(y))], rel=1e-9)


@pytest.mark.parametrize("T", [1.0, 0.5])
def test_multiclass_marginals_are_the_softmax(T):
    rng = np.random.default_rng(0)
    X = list(rng.normal(size=(10, F)))
    y = [int(v) for v in rng.integers(0, K, 10)]
    svm = _random_w(_fit(MulticlassModel(K, F), X, y))
    for x, m in zip(X, svm.predict_marginals(X, temperature=T)):
        assert m.shape == (K,)
        s = np.array([svm.model.score(x, k, svm.coef_) for k in range(K)]) / T
        np.testing.assert_allclose(m, np.exp(s - np.logaddexp.reduce(s)), atol=1e-12)


def _trees(n=6, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        V = int(rng.integers(2, 5))
        edges = np.array([[int(rng.integers(0, v)), v] for v in range(1, V)], np.int64)  # a random tree
        X.append((rng.normal(size=(V, F)), edges))
        Y.append(rng.integers(0, K, V))
    return X, Y


@pytest.mark.parametrize("T", [1.0, 0.5])
def test_graph_marginals_on_trees_match_brute_force(T):
    X, Y = _trees()
    svm = _random_w(_fit(GraphModel(K, F), X, Y))
    for x, m in zip(X, svm.predict_marginals(X, temperature=T)):
        V = x[0].shape[0]
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
        ys, s, p, logZ = _brute(svm.model, x, svm.coef_, T, V)
        np.testing.assert_allclose(m, _brute_node_marginals(ys, p, V), atol=1e-10)
    # per-sequence confidence: p(y_hat) of the enumeration
    for x, q, y in zip(X, svm.predict_proba_sequence(X, temperature=T), svm.predict(X)):
        ys, s, p, _ = _brute(svm.model, x, svm.coef_, T, x[0].shape[0])
        assert q == pytest.approx(p[[tuple(v) for v in ys].index(tuple(y))], rel=1e-9)


def test_unsupported_models_raise_clearly():
    X, Y = _trees(3)
    cycle = (np.random.default_rng(0).normal(size=(3, F)), np.array([[0, 1], [1, 2], [0, 2]]))
    svm = _fit(GraphModel(K, F), X, Y)
    with pytest.raises(NotImplementedError, match="cycle.*approximate=True"):
        svm.predict_marginals(X + [cycle])
    with pytest.raises(NotImplementedError, match=r"X\[3\]'s graph has a cycle"):
        svm.predict_top_k(X + [cycle], 2)
    grid = GridModel(n_states=2, n_features=2)
    rng = np.random.default_rng(0)
    Xg = [rng.normal(size=(3, 3, 2)) for _ in range(3)]
    Yg = [rng.integers(0, 2, (3, 3)) for _ in range(3)]
    gsvm = _fit(grid, Xg, Yg)
    for call in (lambda: gsvm.predict_marginals(Xg), lambda: gsvm.predict_top_k(Xg, 2),
                 lambda: gsvm.calibrate_temperature(Xg, Yg), lambda: gsvm.predict_proba_sequence(Xg)):
        with pytest.raises(NotImplementedError, match="GridModel"):
            call()
    # decision_function works for every model
    d = gsvm.decision_function(Xg)
    P = gsvm.predict(Xg)
    np.testing.assert_allclose(d, [grid.score(x, y, gsvm.coef_) for x, y in zip(Xg, P)])


# --------------------------------------------------------------------------- scores and the k best
def test_decision_function_is_the_score_of_predict(chain_svm):
    svm, X = chain_svm
    d = svm.decision_function(X)
    assert d.shape == (len(X),)
    np.testing.assert_allclose(d, [svm.model.score(x, y, svm.coef_) for x, y in zip(X, svm.predict(X))])
    for x, v in zip(X, d):  # and it is the maximum score
        assert v == pytest.approx(_brute(svm.model, x, svm.coef_, 1.0, x.shape[0])[1].max())


@pytest.mark.parametrize("k", [1, 5, 200])
def test_chain_top_k_matches_brute_force_ranking(chain_svm, k):
    svm, X = chain_svm
    out = svm.predict_top_k(X, k)
    for x, (Ys, scores), y_hat in zip(X, out, svm.predict(X)):
        L = x.shape[0]
        ys, s, _, _ = _brute(svm.model, x, svm.coef_, 1.0, L)
        m = min(k, K ** L)  # k beyond the number of labellings returns them all
        order = np.argsort(-s, kind="stable")[:m]
        assert Ys.shape == (m, L) and scores.shape == (m,)
        np.testing.assert_allclose(scores, s[order], atol=1e-10)
        np.testing.assert_array_equal(Ys, np.array(ys)[order])
        np.testing.assert_allclose(scores, [svm.model.score(x, y, svm.coef_) for y in Ys], atol=1e-10)
        np.testing.assert_array_equal(Ys[0], y_hat)
    with pytest.raises(ValueError, match="k must be"):
        svm.predict_top_k(X, 0)


def test_multiclass_top_k_is_the_sorted_scores():
    rng = np.random.default_rng(2)
    X = list(rng.normal(size=(8, F)))
    svm = _random_w(_fit(MulticlassModel(K, F), X, [["x", "y", "z"][int(v)] for v in rng.integers(0, K, 8)]))
    n = svm.classes_.size  # labels fit saw; an unnamed state has no label and is left out
    for x, (labels, scores) in zip(X, svm.predict_top_k(X, 5)):
        s = svm.model.scores(x, svm.coef_)[:n]
        assert labels.shape == (n,) and list(labels) == list(svm.classes_[np.argsort(-s)])
        np.testing.assert_allclose(scores, np.sort(s)[::-1])


def test_kernelized_fit_scores_through_its_expansion():
    X, Y = _chain_data(n=10, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svm = sf.StructuredSVM(ChainModel(K, F), solver=sf.solvers.KernelBCFW(kernel="rbf"), max_passes=3,
                               tol=None, random_state=0).fit(X, Y)
    assert svm.coef_ is None
    d = svm.decision_function(X)
    top = svm.predict_top_k(X, 4)
    for (Ys, scores), v, y, m in zip(top, d, svm.predict(X), svm.predict_marginals(X)):
        assert scores[0] == pytest.approx(v) and np.all(np.diff(scores) <= 1e-12)
        np.testing.assert_array_equal(Ys[0], y)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)


# --------------------------------------------------------------------------- string labels
def test_string_labels_decode_in_every_method(string_chain_svm):
    svm, X = string_chain_svm
    assert list(svm.classes_) == ["a", "b", "c"]
    (Ys, _), = svm.predict_top_k(X[:1], 3)
    assert Ys.dtype.kind == "U" and set(Ys.ravel()) <= set("abc")
    np.testing.assert_array_equal(Ys[0], svm.predict(X[:1])[0])
    M = svm.predict_marginals(X)
    # columns ordered as classes_: the argmax column names a label of the max-marginal decoding
    assert all(m.shape == (x.shape[0], K) for m, x in zip(M, X))
    Yv = svm.predict(X)
    svm.calibrate_temperature(X, Yv)
    assert expected_calibration_error(Yv, M, classes=svm.classes_) >= 0.0
    assert svm.decision_function(X).shape == (len(X),)
    assert np.all(svm.predict_proba_sequence(X) <= 1.0)


# --------------------------------------------------------------------------- calibration
def test_calibration_lowers_held_out_nll_and_sets_temperature():
    X, Y = sf.datasets.load_ocr("train")
    Xt, Yt = sf.datasets.load_ocr("test")
    svm = sf.StructuredSVM(ChainModel(26, 128), lam=0.01, max_passes=2, tol=None, random_state=0).fit(X[:400], Y[:400])
    assert not hasattr(svm, "temperature_")
    Xv, Yv, Xh, Yh = Xt[:150], Yt[:150], Xt[150:300], Yt[150:300]

    def nll(T):
        M = svm.predict_marginals(Xh, temperature=T)
        return -np.mean(np.log(np.concatenate([m[np.arange(len(y)), y] for m, y in zip(M, Yh)])))

    assert svm.calibrate_temperature(Xv, Yv) is svm
    T = svm.temperature_
    assert T > 0 and T != 1.0
    rep = svm.calibration_
    assert rep["temperature"] == T and rep["nll_after"] < rep["nll_before"]
    assert rep["ece_after"] < rep["ece_before"]
    assert nll(T) < nll(1.0)  # on data the calibration did not see
    # the fitted temperature is the default of predict_marginals, and survives save/load
    for a, b in zip(svm.predict_marginals(Xh[:3]), svm.predict_marginals(Xh[:3], temperature=T)):
        np.testing.assert_array_equal(a, b)


def test_temperature_is_saved_and_a_refit_does_not_reuse_it(tmp_path, chain_svm):
    X, Y = _chain_data(seed=5)
    svm = _fit(ChainModel(K, F), X, Y)
    svm.calibrate_temperature(X, Y)
    T = svm.temperature_
    loaded = sf.load(svm.save(tmp_path / "m.npz"))
    assert loaded.temperature_ == T
    np.testing.assert_allclose(loaded.predict_proba_sequence(X), svm.predict_proba_sequence(X))
    svm.fit(X, Y)
    with pytest.warns(RuntimeWarning, match="earlier fit"):
        M = svm.predict_marginals(X[:1])
    np.testing.assert_allclose(M[0], svm.predict_marginals(X[:1], temperature=1.0)[0])


def test_expected_calibration_error():
    # 4 tokens at confidence 0.9, 3 of them right (acc 0.75), and 2 at 0.6, 1 right (acc 0.5)
    M = [np.array([[0.9, 0.1], [0.9, 0.1], [0.1, 0.9]]), np.array([[0.1, 0.9], [0.6, 0.4], [0.4, 0.6]])]
    Y = [np.array([0, 0, 1]), np.array([0, 0, 0])]
    assert expected_calibration_error(Y, M) == pytest.approx(4 / 6 * 0.15 + 2 / 6 * 0.1)
    assert expected_calibration_error([np.array(["u", "u", "v"]), np.array(["u", "u", "u"])], M,
                                      classes=["u", "v"]) == pytest.approx(4 / 6 * 0.15 + 2 / 6 * 0.1)
    assert expected_calibration_error([0, 1], [np.array([1.0, 0.0]), np.array([0.0, 1.0])]) == 0.0
    with pytest.raises(ValueError, match="shape"):
        expected_calibration_error(Y, [M[0], M[1][:2]])
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error(Y, M, n_bins=0)


# --------------------------------------------------------------------------- k best on forests
def _forests(n=6, seed=0, V=(1, 5)):
    """Random forests (a node's parent is an earlier node, or none), with random node numbering
    and edge orientation."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        nv = int(rng.integers(V[0], V[1] + 1))
        edges = [[int(rng.integers(0, v)), v] for v in range(1, nv) if rng.random() < 0.75]
        edges = np.array(edges, np.int64).reshape(-1, 2)
        perm = rng.permutation(nv)
        edges = perm[edges] if len(edges) else edges
        flip = rng.random(len(edges)) < 0.5
        edges[flip] = edges[flip][:, ::-1]
        X.append((rng.normal(size=(nv, F)), edges))
        Y.append(rng.integers(0, K, nv))
    return X, Y


@pytest.mark.parametrize("k", [1, 4, 100])
@pytest.mark.parametrize("pairwise", ["full", "potts"])
def test_graph_top_k_on_forests_matches_brute_force_ranking(k, pairwise):
    X, Y = _forests(seed=k)
    svm = _random_w(_fit(GraphModel(K, F, pairwise=pairwise), X, Y), seed=k)
    for x, (Ys, scores), y_hat in zip(X, svm.predict_top_k(X, k), svm.predict(X)):
        V = x[0].shape[0]
        _, s, _, _ = _brute(svm.model, x, svm.coef_, 1.0, V)
        m = min(k, K ** V)  # k beyond the number of labellings returns them all
        assert Ys.shape == (m, V) and scores.shape == (m,)
        # ties may order equal-score labellings differently: compare the scores
        np.testing.assert_allclose(scores, np.sort(s)[::-1][:m], atol=1e-10)
        np.testing.assert_allclose(scores, [svm.model.score(x, y, svm.coef_) for y in Ys], atol=1e-10)
        assert len({tuple(y) for y in Ys}) == m  # distinct labellings
        assert svm.model.score(x, Ys[0], svm.coef_) == pytest.approx(svm.model.score(x, y_hat, svm.coef_))


def test_graph_top_k_with_ties_and_string_labels():
    """All-zero weights: every labelling ties; the k best are k distinct labellings of score 0."""
    X, Y = _forests(n=4, seed=5, V=(3, 4))
    svm = _fit(GraphModel(K, F), X, [LETTERS[y] for y in Y])
    svm.coef_ = np.zeros_like(svm.coef_)
    for x, (Ys, scores) in zip(X, svm.predict_top_k(X, 7)):
        assert Ys.shape == (7, x[0].shape[0]) and set(np.unique(Ys)) <= set(LETTERS)
        np.testing.assert_allclose(scores, 0.0)
        assert len({tuple(y) for y in Ys}) == 7


def test_graph_top_k_leaves_out_states_no_label_named():
    X, Y = _forests(n=4, seed=8, V=(2, 4))
    svm = _random_w(_fit(GraphModel(K, F), X, [LETTERS[np.minimum(y, 1)] for y in Y]))  # "a" and "b" only
    assert svm.classes_.size == 2
    for x, (Ys, scores) in zip(X, svm.predict_top_k(X, 50)):
        V = x[0].shape[0]
        ys = [np.array(y, np.int64) for y in itertools.product(range(2), repeat=V)]
        s = np.sort([svm.model.score(x, y, svm.coef_) for y in ys])[::-1]
        assert Ys.shape == (min(50, 2 ** V), V) and set(np.unique(Ys)) <= {"a", "b"}
        np.testing.assert_allclose(scores, s[:50], atol=1e-10)


def test_tree_top_k_kernel_against_enumeration():
    from structfw.oracles.graph import energy
    from structfw.oracles.kbest import tree_top_k

    rng = np.random.default_rng(3)
    for trial in range(30):
        V, S = int(rng.integers(1, 6)), int(rng.integers(2, 4))
        edges = np.array([[int(rng.integers(0, v)), v] for v in range(1, V) if rng.random() < 0.8],
                         np.int64).reshape(-1, 2)
        U, P = rng.normal(size=(V, S)), rng.normal(size=(len(edges), S, S))
        if trial % 3 == 0:  # integer potentials: many ties
            U, P = np.round(U), np.round(P)
        k = int(rng.integers(1, S ** V + 4))
        Ys, scores = tree_top_k(U, edges, P, k)
        all_s = np.sort([energy(U, edges, P, np.array(y)) for y in itertools.product(range(S), repeat=V)])[::-1]
        assert Ys.shape == (min(k, S ** V), V)
        np.testing.assert_allclose(scores, all_s[:k], atol=1e-10)
        np.testing.assert_allclose([energy(U, edges, P, y) for y in Ys], scores, atol=1e-10)
        assert len({tuple(y) for y in Ys}) == len(Ys)
    with pytest.raises(ValueError, match="cycle"):
        tree_top_k(np.zeros((3, 2)), [[0, 1], [1, 2], [0, 2]], np.zeros((3, 2, 2)), 2)
    with pytest.raises(ValueError, match="k must be"):
        tree_top_k(np.zeros((2, 2)), [[0, 1]], np.zeros((1, 2, 2)), 0)


# --------------------------------------------------------------------------- approximate marginals
def _loopy(n=4, seed=0, V=(3, 6), scale=1.0):
    """Small graphs with cycles: a ring plus a chord or two."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        nv = int(rng.integers(V[0], V[1] + 1))
        edges = [[v, (v + 1) % nv] for v in range(nv)]
        if nv >= 5:
            edges.append([0, nv // 2])
        X.append((scale * rng.normal(size=(nv, F)), np.array(edges, np.int64)))
        Y.append(rng.integers(0, K, nv))
    return X, Y


def test_approximate_marginals_on_trees_are_exact():
    X, Y = _trees()
    svm = _random_w(_fit(GraphModel(K, F), X, Y))
    exact = svm.predict_marginals(X)
    for a, b in zip(svm.predict_marginals(X, approximate=True), exact):
        np.testing.assert_allclose(a, b, atol=1e-12)
    # loopy BP itself on the same trees (the oracle, not the estimator's exact dispatch)
    from structfw._prediction import loopy_potentials
    from structfw.oracles.marginals import loopy_marginals

    for x, m in zip(svm.model.check_X(X), exact):
        mu, _, _, info = loopy_marginals(*loopy_potentials("graph", svm.model, x, svm.coef_))
        assert info["converged"]
        np.testing.assert_allclose(mu, m, atol=1e-7)


def test_approximate_marginals_of_exact_models_are_the_exact_ones(chain_svm):
    svm, X = chain_svm
    for a, b in zip(svm.predict_marginals(X, approximate=True), svm.predict_marginals(X)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("T", [1.0, 2.0])
def test_approximate_marginals_on_loopy_graphs_are_close_for_weak_couplings(T):
    """Loopy BP on cycles with weak couplings (|pairwise| <~ 0.3) is within 1e-2 of the exact marginals."""
    X, Y = _loopy()
    svm = _fit(GraphModel(K, F), X, Y)
    rng = np.random.default_rng(0)
    w = rng.normal(size=svm.coef_.shape)
    w[svm.model.pairwise_offset:] *= 0.1  # weak couplings
    svm.coef_ = w
    with pytest.raises(NotImplementedError, match="approximate=True"):
        svm.predict_marginals(X, temperature=T)
    M = svm.predict_marginals(X, temperature=T, approximate=True)
    for x, m in zip(X, M):
        V = x[0].shape[0]
        assert m.shape == (V, K)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
        ys, _, p, _ = _brute(svm.model, x, svm.coef_, T, V)
        np.testing.assert_allclose(m, _brute_node_marginals(ys, p, V), atol=1e-2)


def test_approximate_marginals_for_grid_and_potts_models():
    from structfw.models import PottsModel

    rng = np.random.default_rng(1)
    Xg = [rng.normal(size=(2, 3, 2)) for _ in range(3)]
    Yg = [rng.integers(0, 2, (2, 3)) for _ in range(3)]
    gsvm = _random_w(_fit(GridModel(n_states=2, n_features=2), Xg, Yg), scale=0.3)
    for x, m in zip(Xg, gsvm.predict_marginals(Xg, approximate=True)):
        assert m.shape == (2, 3, 2)
        ys = [np.array(y).reshape(2, 3) for y in itertools.product(range(2), repeat=6)]
        s = np.array([gsvm.model.score(x, y, gsvm.coef_) for y in ys])
        p = np.exp(s - np.logaddexp.reduce(s))
        ref = sum(q * np.eye(2)[y] for y, q in zip(ys, p))
        np.testing.assert_allclose(m, ref, atol=2e-2)
    # Potts: the score is sum_v U[v, y_v] - sum_{cut e} <w_p, f_e>
    Xp, Yp = [], []
    for _ in range(3):
        Xp.append((rng.normal(size=(4, 2)), np.array([[0, 1], [1, 2], [2, 3], [3, 0]]), rng.random((4, 1))))
        Yp.append(rng.integers(0, 3, 4))
    psvm = _fit(PottsModel(3, 2, 1), Xp, Yp)
    psvm.coef_ = np.r_[rng.normal(size=6), 0.2]
    for x, m in zip(Xp, psvm.predict_marginals(Xp, approximate={"damping": 0.3, "tol": 1e-10})):
        ys = [np.array(y) for y in itertools.product(range(3), repeat=4)]
        s = np.array([psvm.model.score(x, y, psvm.coef_) for y in ys])
        p = np.exp(s - np.logaddexp.reduce(s))
        ref = sum(q * np.eye(3)[y] for y, q in zip(ys, p))
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(m, ref, atol=2e-2)


def test_approximate_marginals_options_and_non_convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    X, Y = _loopy(n=2, scale=1.0)
    svm = _random_w(_fit(GraphModel(K, F), X, Y), scale=3.0)
    with pytest.warns(ConvergenceWarning) as rec:
        M = svm.predict_marginals(X, approximate={"max_iter": 1, "damping": 0.0})
    assert [str(r.message).split(" stopped")[0][-4:] for r in rec] == ["X[0]", "X[1]"]
    assert all("stopped after 1 iterations" in str(r.message) for r in rec)
    np.testing.assert_allclose(M[0].sum(axis=1), 1.0, atol=1e-12)
    M_trw = svm.predict_marginals(X, approximate={"method": "trw", "max_iter": 5000})
    for m in M_trw:
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="unknown option"):
        svm.predict_marginals(X, approximate={"iterations": 3})
    with pytest.raises(ValueError, match="approximate must be"):
        svm.predict_marginals(X, approximate="yes")
    with pytest.raises(ValueError, match="damping must be"):
        svm.predict_marginals(X, approximate={"damping": 1.0})


# --------------------------------------------------------------------------- structfw predict
def test_cli_predict_writes_labels_and_marginals(tmp_path):
    from structfw.cli import main

    X, Y = sf.datasets.load_ocr("train")
    svm = sf.StructuredSVM(ChainModel(26, 128), lam=0.01, max_passes=1, tol=None, random_state=0).fit(X[:200],
                                                                                                         Y[:200])
    model = svm.save(tmp_path / "m.npz")
    out = tmp_path / "pred.json"
    res = CliRunner().invoke(main, ["predict", "--model", str(model), "--data", "ocr", "--out", str(out),
                                    "--marginals"])
    assert res.exit_code == 0, res.output
    assert "token accuracy" in res.output
    doc = json.loads(out.read_text())
    Xt, Yt = sf.datasets.load_ocr("test")
    assert len(doc["labels"]) == len(Xt) == len(doc["marginals"])
    np.testing.assert_array_equal(doc["labels"][0], svm.predict(Xt[:1])[0])
    m0 = np.array(doc["marginals"][0])
    assert m0.shape == (len(Yt[0]), 26) and np.allclose(m0.sum(axis=1), 1.0)
    acc = sf.metrics.token_accuracy(Yt, [np.array(v) for v in doc["labels"]])
    assert doc["token_accuracy"] == pytest.approx(acc)
    # .npz for large outputs: flat arrays and the lengths that split them
    res = CliRunner().invoke(main, ["predict", "--model", str(model), "--data", "ocr", "--split", "train",
                                    "--out", str(tmp_path / "p.npz"), "--marginals"])
    assert res.exit_code == 0, res.output
    with np.load(tmp_path / "p.npz", allow_pickle=False) as z:
        assert z["shapes"].prod(axis=1).sum() == z["labels"].size == z["marginals"].shape[0] == sum(len(y) for y in Y)
    # a bad output suffix and a model that does not fit the data are clean errors
    res = CliRunner().invoke(main, ["predict", "--model", str(model), "--data", "ocr", "--out",
                                    str(tmp_path / "p.txt")])
    assert res.exit_code == 2 and "--out" in res.output
    assert not math.isnan(doc["token_accuracy"])
