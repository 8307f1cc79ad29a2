"""General graph CRFs: exact tree inference against brute force, graph checks, GraphModel."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import structfw as sf
from structfw._linalg import as_dense
from structfw.models import MODEL_REGISTRY, GraphExample, GraphModel
from structfw.solvers import BCFW
from structfw.oracles.graph import (
    check_graph,
    connected_components,
    energy,
    exhaustive,
    forest_schedule,
    is_forest,
    tree_marginals,
    tree_max_product,
)


def random_forest(rng, V, n_trees=1, shuffle=True):
    """Edges of a random forest on V nodes with n_trees components, random orientations."""
    perm = rng.permutation(V) if shuffle else np.arange(V)
    roots = set(range(min(n_trees, V)))
    edges = []
    for i in range(V):
        if i in roots:
            continue
        p = int(rng.integers(0, i))
        u, v = int(perm[p]), int(perm[i])
        edges.append((u, v) if rng.random() < 0.5 else (v, u))
    edges = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return edges[rng.permutation(len(edges))]


def random_potentials(rng, V, K, E, scale=1.0):
    return rng.normal(size=(V, K)), scale * rng.normal(size=(E, K, K))


def all_labellings(V, K):
    return np.array(list(itertools.product(range(K), repeat=V)), dtype=np.int64)


def brute_energies(unary, edges, pairwise):
    Ys = all_labellings(*unary.shape)
    return Ys, np.array([energy(unary, edges, pairwise, y) for y in Ys])


# ------------------------------------------------------------------ tree inference
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("n_trees", [1, 2, 3])
def test_tree_max_product_matches_exhaustive(K, n_trees):
    rng = np.random.default_rng(10 * K + n_trees)
    for trial in range(15):
        V = int(rng.integers(n_trees, 9))
        edges = random_forest(rng, V, n_trees)
        U, P = random_potentials(rng, V, K, len(edges), scale=2.0)
        for augment in (False, True):
            Ua = U.copy()
            if augment:  # normalised Hamming loss as unary terms, as the models add it
                yt = rng.integers(0, K, V)
                Ua += 1.0 / V
                Ua[np.arange(V), yt] -= 1.0 / V
            y, value, bound = tree_max_product(Ua, edges, P)
            y_ex, v_ex, _ = exhaustive(Ua, edges, P)
            assert y.dtype == np.int64 and y.shape == (V,)
            assert value == bound
            assert value == pytest.approx(energy(Ua, edges, P, y), abs=1e-12)
            assert value == pytest.approx(v_ex, abs=1e-10)
            _, Es = brute_energies(Ua, edges, P)
            assert v_ex == pytest.approx(Es.max(), abs=1e-12)


def test_tree_max_product_chain_and_edgeless_and_single_node():
    rng = np.random.default_rng(3)
    U, P = random_potentials(rng, 6, 3, 5)
    chain = np.array([[i, i + 1] for i in range(5)])
    assert tree_max_product(U, chain, P)[1] == pytest.approx(exhaustive(U, chain, P)[1])
    y, value, _ = tree_max_product(U, np.empty((0, 2), np.int64), np.empty((0, 3, 3)))
    np.testing.assert_array_equal(y, U.argmax(1))
    assert value == pytest.approx(U.max(1).sum())
    y, value, _ = tree_max_product(U[:1], [], np.empty((0, 3, 3)))
    assert y.tolist() == [int(U[0].argmax())]


def test_tree_max_product_refuses_cycles():
    U = np.zeros((3, 2))
    with pytest.raises(ValueError, match="cycle"):
        tree_max_product(U, [[0, 1], [1, 2], [2, 0]], np.zeros((3, 2, 2)))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("K", [2, 3])
def test_tree_marginals_match_enumeration(K, temperature):
    rng = np.random.default_rng(int(100 * temperature) + K)
    for trial in range(6):
        V = int(rng.integers(1, 8))
        edges = random_forest(rng, V, n_trees=1 + trial % 3)
        U, P = random_potentials(rng, V, K, len(edges))
        mu, mu_e, logZ = tree_marginals(U, edges, P, temperature)
        Ys, Es = brute_energies(U, edges, P)
        s = Es / temperature
        logZ_ref = s.max() + np.log(np.exp(s - s.max()).sum())
        p = np.exp(s - logZ_ref)
        mu_ref = np.zeros((V, K))
        for v in range(V):
            np.add.at(mu_ref[v], Ys[:, v], p)
        mu_e_ref = np.zeros((len(edges), K, K))
        for e, (a, b) in enumerate(edges):
            np.add.at(mu_e_ref[e], (Ys[:, a], Ys[:, b]), p)
        assert logZ == pytest.approx(logZ_ref, abs=1e-10)
        np.testing.assert_allclose(mu, mu_ref, atol=1e-10)
        np.testing.assert_allclose(mu_e, mu_e_ref, atol=1e-10)


def test_tree_marginals_argument_checks():
    U = np.zeros((3, 2))
    with pytest.raises(ValueError, match="temperature"):
        tree_marginals(U, [[0, 1]], np.zeros((1, 2, 2)), temperature=0.0)
    with pytest.raises(ValueError, match="cycle"):
        tree_marginals(U, [[0, 1], [1, 2], [0, 2]], np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="finite"):
        tree_marginals(np.full((2, 2), np.nan), [[0, 1]], np.zeros((1, 2, 2)))


def test_exhaustive_limit_and_shape_checks():
    with pytest.raises(ValueError, match="2\\^20"):
        exhaustive(np.zeros((21, 2)), [], np.zeros((0, 2, 2)))
    exhaustive(np.zeros((10, 4)), [], np.zeros((0, 4, 4)))  # 4^10 = 2^20: allowed
    with pytest.raises(ValueError, match="pairwise must have shape"):
        exhaustive(np.zeros((3, 2)), [[0, 1]], np.zeros((1, 3, 3)))
    with pytest.raises(ValueError, match="unary must have shape"):
        exhaustive(np.zeros(3), [], np.zeros((0, 2, 2)))


# ------------------------------------------------------------------ graph utilities
def test_check_graph_errors_name_the_edge():
    assert check_graph(3, []).shape == (0, 2)
    e = check_graph(3, [[0, 1], [2, 1]])
    assert e.dtype == np.int64 and e.flags.c_contiguous
    with pytest.raises(ValueError, match=r"edges must have shape \(E, 2\)"):
        check_graph(3, [[0, 1, 2]])
    with pytest.raises(ValueError, match="integer"):
        check_graph(3, [[0.0, 1.0]])
    with pytest.raises(ValueError, match=r"edges\[1\] = \(1, 3\) refers to node 3, outside 0..2"):
        check_graph(3, [[0, 1], [1, 3]])
    with pytest.raises(ValueError, match=r"edges\[1\] = \(-1, 0\) refers to node -1"):
        check_graph(3, [[0, 1], [-1, 0]])
    with pytest.raises(ValueError, match=r"G: edges\[2\] = \(2, 2\) is a self-loop"):
        check_graph(3, [[0, 1], [1, 2], [2, 2]], "G: edges")
    with pytest.raises(ValueError, match=r"edges\[2\] = \(1, 0\) repeats edges\[0\] = \(0, 1\)"):
        check_graph(3, [[0, 1], [1, 2], [1, 0]])
    with pytest.raises(ValueError, match=r"edges\[3\] = \(1, 2\) repeats edges\[1\] = \(1, 2\)"):
        check_graph(4, [[0, 1], [1, 2], [2, 3], [1, 2]])


def test_forest_checks_and_components():
    rng = np.random.default_rng(0)
    edges = random_forest(rng, 10, n_trees=3)
    assert is_forest(10, edges)
    n, comp = connected_components(10, edges)
    assert n == 3 and comp[0] == 0 and set(comp.tolist()) == {0, 1, 2}
    for a, b in edges:
        assert comp[a] == comp[b]
    s = forest_schedule(10, edges)
    pos = np.empty(10, int)
    pos[s.order] = np.arange(10)
    assert sorted(s.order.tolist()) == list(range(10))
    assert (s.parent < 0).sum() == 3
    for v in range(10):
        if s.parent[v] >= 0:  # parents come first, and the parent edge joins the two
            assert pos[s.parent[v]] < pos[v]
            assert set(edges[s.parent_edge[v]].tolist()) == {v, s.parent[v]}
    cyc = np.vstack([edges, [[int(edges[0, 0]), int(edges[1, 1])]]])
    if comp[edges[0, 0]] == comp[edges[1, 1]]:
        assert not is_forest(10, cyc) and forest_schedule(10, cyc) is None
    assert not is_forest(4, [[0, 1], [1, 2], [2, 3], [3, 0]])
    assert forest_schedule(4, [[0, 1], [1, 2], [2, 0]]) is None  # a cycle even with E < V
    assert connected_components(4, [[0, 1], [2, 3]])[0] == 2
    assert is_forest(1, np.empty((0, 2), np.int64))


# ------------------------------------------------------------------ GraphModel
def make_graph(rng, V, F, Fe, n_trees=1, sparse=False, loopy=False):
    edges = random_forest(rng, V, n_trees)
    if loopy and V >= 3:
        edges = np.array([[i, (i + 1) % V] for i in range(V)])
    X = rng.normal(size=(V, F)) * (rng.random((V, F)) < 0.6)
    if sparse:
        X = sp.csr_matrix(X)
    return X, edges, rng.normal(size=(len(edges), Fe))


def score(model, x, y, w):
    return float(as_dense(model.joint_feature(x, y)) @ w)


@pytest.mark.parametrize("pairwise", ["full", "symmetric", "potts"])
def test_joint_feature_is_the_energy_of_the_potentials(pairwise):
    rng = np.random.default_rng(1)
    K, F, Fe = 3, 4, 2
    m = GraphModel(K, F, Fe, pairwise=pairwise)
    assert m.size_joint_feature == K * F + {"full": K * K, "symmetric": 6, "potts": 1}[pairwise] * Fe
    for trial in range(5):
        x = m.check_X([make_graph(rng, 7, F, Fe, n_trees=1 + trial % 2, loopy=trial == 4)])[0]
        w = rng.normal(size=m.size_joint_feature)
        U, P = m.potentials(x, w)
        assert U.shape == (7, K) and P.shape == (len(x.edges), K, K)
        if pairwise != "full":
            np.testing.assert_allclose(P, P.transpose(0, 2, 1))
        if pairwise == "potts":
            assert np.all(P[:, 0, 1] == 0)
        yt = rng.integers(0, K, 7)
        for _ in range(4):
            y = rng.integers(0, K, 7)
            phi = m.joint_feature(x, y)
            assert phi.dim == m.size_joint_feature and np.all(np.diff(phi.indices) > 0)
            assert score(m, x, y, w) == pytest.approx(energy(U, x.edges, P, y), abs=1e-10)
            psi = m.psi(x, yt, y)
            assert np.all(np.diff(psi.indices) > 0)
            np.testing.assert_allclose(as_dense(psi), as_dense(m.joint_feature(x, yt)) - as_dense(phi), atol=1e-12)
        # the pairwise block views of w agree with the potentials
        Wp = m.pairwise_weights(w)
        np.testing.assert_allclose(P, np.einsum("klf,ef->ekl", Wp, x.edge_features))
        np.testing.assert_allclose(U, x.nodes @ m.unary_weights(w).T)


@pytest.mark.parametrize("pairwise", ["full", "symmetric", "potts"])
def test_sparse_node_features_match_dense(pairwise):
    rng = np.random.default_rng(2)
    K, F, Fe = 3, 6, 2
    m = GraphModel(K, F, Fe, pairwise=pairwise)
    X, edges, ef = make_graph(rng, 9, F, Fe, n_trees=2)
    xd, xs = m.check_X([(X, edges, ef), (sp.csr_matrix(X), edges, ef)])
    assert sp.issparse(xs.nodes)
    w = rng.normal(size=m.size_joint_feature)
    for a, b in zip(m.potentials(xd, w), m.potentials(xs, w)):
        np.testing.assert_allclose(a, b, atol=1e-12)
    yt, y = rng.integers(0, K, 9), rng.integers(0, K, 9)
    for f in (lambda x: m.joint_feature(x, y), lambda x: m.psi(x, yt, y)):
        a, b = f(xd), f(xs)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(a.values, b.values, atol=1e-12)
    np.testing.assert_array_equal(m.loss_augmented_decode(xd, yt, w), m.loss_augmented_decode(xs, yt, w))
    Ed, ld, zd = m.expectation(xd, yt, w, 0.7)
    Es, ls, zs = m.expectation(xs, yt, w, 0.7)
    assert not isinstance(Ed, type(Es)) and hasattr(Es, "indices")
    np.testing.assert_allclose(Ed, as_dense(Es), atol=1e-12)
    assert ld == pytest.approx(ls) and zd == pytest.approx(zs)


@pytest.mark.parametrize("pairwise", ["full", "symmetric", "potts"])
@pytest.mark.parametrize("class_weight", [None, [1.0, 3.0, 0.5]])
def test_loss_augmented_decode_matches_brute_force(pairwise, class_weight):
    rng = np.random.default_rng(4)
    K, F, Fe = 3, 3, 2
    m = GraphModel(K, F, Fe, pairwise=pairwise, class_weight=class_weight)
    for trial in range(6):
        V = int(rng.integers(1, 7))
        x = m.check_X([make_graph(rng, V, F, Fe, n_trees=1 + trial % 2)])[0]
        w = 2 * rng.normal(size=m.size_joint_feature)
        yt = rng.integers(0, K, V)
        Ys = all_labellings(V, K)
        H = np.array([m.loss(yt, y) + score(m, x, y, w) for y in Ys])
        y, bound = m.loss_augmented_decode_with_bound(x, yt, w)
        assert m.loss(yt, y) + score(m, x, y, w) == pytest.approx(H.max(), abs=1e-10)
        assert bound == pytest.approx(H.max(), abs=1e-10)
        np.testing.assert_array_equal(m.loss_augmented_decode(x, yt, w), y)
        S = np.array([score(m, x, yy, w) for yy in Ys])
        assert score(m, x, m.decode(x, w), w) == pytest.approx(S.max(), abs=1e-10)


def test_class_weighted_loss():
    m = GraphModel(3, 1, class_weight=[1.0, 2.0, 4.0])
    yt = np.array([0, 1, 2, 2])
    assert m.loss(yt, yt) == 0.0
    assert m.loss(yt, np.array([1, 1, 2, 2])) == pytest.approx(1 / 11)
    assert m.loss(yt, np.array([1, 0, 0, 0])) == pytest.approx(1.0)
    assert GraphModel(3, 1).loss(yt, np.array([1, 1, 2, 0])) == pytest.approx(0.5)


@pytest.mark.parametrize("pairwise", ["full", "potts"])
def test_marginals_and_expectation_match_enumeration(pairwise):
    rng = np.random.default_rng(5)
    K, F, Fe = 2, 3, 2
    m = GraphModel(K, F, Fe, pairwise=pairwise, class_weight=[1.0, 2.0])
    V = 6
    x = m.check_X([make_graph(rng, V, F, Fe, n_trees=2)])[0]
    w, yt, c = rng.normal(size=m.size_joint_feature), rng.integers(0, K, V), 0.8
    Ys = all_labellings(V, K)
    phis = np.array([as_dense(m.joint_feature(x, y)) for y in Ys])
    losses = np.array([m.loss(yt, y) for y in Ys])
    s = c * losses + phis @ w
    logZ = np.log(np.exp(s - s.max()).sum()) + s.max()
    p = np.exp(s - logZ)
    E_phi, E_loss, lz = m.expectation(x, yt, w, c)
    np.testing.assert_allclose(E_phi, p @ phis, atol=1e-10)
    assert E_loss == pytest.approx(p @ losses, abs=1e-10)
    assert lz == pytest.approx(logZ, abs=1e-10)
    E_phi0, E_loss0, lz0 = m.expectation(x, None, w, c)
    p0 = np.exp(phis @ w - lz0)
    assert E_loss0 == 0.0 and p0.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(E_phi0, p0 @ phis, atol=1e-10)
    mu, mu_e, lz1 = m.marginals(x, w, temperature=0.5)
    q = np.exp(2 * (phis @ w) - lz1)
    assert q.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(mu[:, 1], q @ Ys, atol=1e-10)
    assert m.has_expectation_oracle


def test_marginals_refuse_loopy_graphs():
    rng = np.random.default_rng(6)
    m = GraphModel(2, 2)
    x = m.check_X([make_graph(rng, 4, 2, 1, loopy=True)[:2]])[0]
    assert x.tree is None
    with pytest.raises(NotImplementedError, match="forests"):
        m.marginals(x, np.zeros(m.size_joint_feature))
    with pytest.raises(NotImplementedError, match="cycle"):
        m.expectation(x, None, np.zeros(m.size_joint_feature), 1.0)


def test_input_validation_names_the_example():
    m = GraphModel(3, 2, 2)
    rng = np.random.default_rng(7)
    good = make_graph(rng, 4, 2, 2)
    X = [good, good, good, (good[0], [[0, 1], [1, 2], [2, 3], [3, 1], [1, 3]], np.ones((5, 2)))]
    with pytest.raises(ValueError, match=r"X\[3\]: edges\[4\] = \(1, 3\) repeats edges\[3\] = \(3, 1\)"):
        m.check_X(X)
    X[3] = (good[0], [[0, 1], [1, 2], [2, 3], [3, 1], [1, 1]], np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"X\[3\]: edges\[4\] = \(1, 1\) is a self-loop"):
        m.check_X(X)
    X[3] = (good[0], [[0, 4]], np.ones((1, 2)))
    with pytest.raises(ValueError, match=r"X\[3\]: edges\[0\] = \(0, 4\) refers to node 4"):
        m.check_X(X)
    with pytest.raises(ValueError, match=r"X\[0\]: edge_features must have shape"):
        m.check_X([(good[0], good[1], np.ones((len(good[1]), 3)))])
    with pytest.raises(ValueError, match=r"X\[0\]: node_features has 3 features"):
        m.check_X([(np.ones((4, 3)), good[1], good[2])])
    with pytest.raises(ValueError, match=r"X\[0\]: edge_features contains NaN"):
        m.check_X([(good[0], good[1], np.full_like(good[2], np.nan))])
    with pytest.raises(ValueError, match=r"X\[0\] has no edge_features, but n_edge_features = 2"):
        m.check_X([good[:2]])
    with pytest.raises(ValueError, match="single graph"):
        m.check_X(good)
    with pytest.raises(ValueError, match=r"X\[0\] must be a tuple"):
        m.check_X([good[0]])
    x = m.check_X([good])[0]
    with pytest.raises(ValueError, match=r"Y\[0\] has label 3 outside 0..2"):
        m.check_data([good], [np.array([0, 1, 2, 3])])
    with pytest.raises(ValueError, match=r"Y\[0\] has shape"):
        m.check_data([good], [np.array([0, 1])])
    assert m.check_y(x, [0, 1, 2, 0]).dtype == np.int64
    # (node_features, edges): all-ones edge features when n_edge_features == 1
    m1 = GraphModel(2, 2)
    a = m1.check_X([good[:2]])[0]
    b = m1.check_X([(good[0], good[1], np.ones(len(good[1])))])[0]
    np.testing.assert_array_equal(a.edge_features, b.edge_features)
    assert isinstance(a, GraphExample) and a.tree is not None


def test_constructor_validation_and_config_round_trip():
    with pytest.raises(ValueError, match="n_states"):
        GraphModel(1, 2)
    with pytest.raises(ValueError, match="pairwise must be one of"):
        GraphModel(2, 2, pairwise="ising")
    with pytest.raises(ValueError, match="inference must be"):
        GraphModel(2, 2, inference="bp")
    with pytest.raises(ValueError, match="qpbo.*n_states = 2"):
        GraphModel(3, 2, inference="qpbo")
    with pytest.raises(ValueError, match="class_weight"):
        GraphModel(3, 2, class_weight=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="class_weight"):
        GraphModel(3, 2, class_weight=[1.0, 1.0])
    with pytest.raises(ValueError, match="not a back-end"):
        GraphModel(3, 2, inference_options={"bp": {}})
    with pytest.raises(ValueError, match="keyword arguments"):
        GraphModel(3, 2, inference_options={"trws": 10})
    with pytest.raises(ValueError, match="takes no options"):
        GraphModel(3, 2, inference_options={"tree": {"max_iter": 3}})
    m = GraphModel(3, 4, 2, pairwise="symmetric", inference="trws", inference_options={"trws": {"max_iter": 7}},
                   class_weight=[1, 2, 3])
    cfg = m.get_config()
    import json
    assert all(v is None or isinstance(v, (bool, int, float, str)) for v in cfg.values())
    m2 = MODEL_REGISTRY["GraphModel"](**json.loads(json.dumps(cfg)))
    assert m2.get_config() == cfg and m2.size_joint_feature == m.size_joint_feature
    np.testing.assert_array_equal(m2.class_weight, [1, 2, 3])
    assert m2.inference_options == {"trws": {"max_iter": 7}}
    assert GraphModel(3, 2).get_config()["class_weight"] is None
    with pytest.raises(ValueError, match="JSON text"):
        GraphModel(3, 2, class_weight="[1, 2")


def test_save_and_load_a_fit(tmp_path):
    rng = np.random.default_rng(13)
    _, X, Y = planted_trees(rng, n=6, V_range=(4, 8), K=3, F=3)
    model = GraphModel(3, 3, pairwise="symmetric", class_weight=[1.0, 2.0, 1.0])
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=3, random_state=0).fit(X, Y)
    svm.save(tmp_path / "fit.npz")
    loaded = sf.load(tmp_path / "fit.npz")
    assert loaded.model.get_config() == model.get_config()
    for a, b in zip(loaded.predict(X), svm.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_inference_modes_and_approximate_flag():
    rng = np.random.default_rng(8)
    tree = make_graph(rng, 5, 2, 1)[:2]
    loop = make_graph(rng, 5, 2, 1, loopy=True)[:2]
    Y = [np.zeros(5, np.int64)]
    assert not GraphModel(3, 2, inference="tree").approximate_oracle
    assert not GraphModel(3, 2, inference="exhaustive").approximate_oracle
    assert GraphModel(3, 2, inference="trws").approximate_oracle
    m = GraphModel(3, 2)
    assert m.approximate_oracle  # nothing seen yet: conservative
    m.check_data([tree], Y)
    assert not m.approximate_oracle
    m.check_X([loop])  # unlabelled (prediction) graphs do not matter
    assert not m.approximate_oracle
    m.check_data([loop], Y)
    assert m.approximate_oracle
    with pytest.raises(ValueError, match=r"X\[0\]: edges contain a cycle.*inference='tree'"):
        GraphModel(3, 2, inference="tree").check_X([loop])
    with pytest.raises(ValueError, match=r"X\[0\] has 21 nodes.*exhaustive"):
        GraphModel(2, 2, inference="exhaustive").check_X([(np.ones((21, 2)), [])])
    # exhaustive inference is exact on loopy graphs too
    me = GraphModel(3, 2, inference="exhaustive")
    x = me.check_X([loop])[0]
    w = rng.normal(size=me.size_joint_feature)
    yt = rng.integers(0, 3, 5)
    Ys = all_labellings(5, 3)
    H = [me.loss(yt, y) + score(me, x, y, w) for y in Ys]
    y, bound = me.loss_augmented_decode_with_bound(x, yt, w)
    assert bound == pytest.approx(max(H)) and me.loss(yt, y) + score(me, x, y, w) == pytest.approx(max(H))
    assert GraphModel(3, 2).inference_backend(tree, w) == "tree"


# ------------------------------------------------------------------ loopy back-ends (structfw.oracles.loopy)
@pytest.mark.parametrize("K", [2, 3])
def test_loopy_auto_dispatch_bounds_the_maximum(K):
    pytest.importorskip("structfw.oracles.loopy")
    rng = np.random.default_rng(9)
    m = GraphModel(K, 3, pairwise="full")
    Xs = [make_graph(rng, 6, 3, 1, loopy=True)[:2] for _ in range(3)]
    Xv = m.check_X(Xs)
    for x in Xv:
        w = rng.normal(size=m.size_joint_feature)
        if K == 2:  # attractive pairwise table: submodular, so QPBO (exact)
            w[m.pairwise_offset:] = [1.0, -0.5, -0.5, 1.0]
        yt = rng.integers(0, K, 6)
        Ys = all_labellings(6, K)
        H = np.array([m.loss(yt, y) + score(m, x, y, w) for y in Ys])
        y, bound = m.loss_augmented_decode_with_bound(x, yt, w)
        Hy = m.loss(yt, y) + score(m, x, y, w)
        assert Hy >= score(m, x, yt, w) - 1e-9  # never below the ground truth
        assert Hy <= H.max() + 1e-9 and bound >= H.max() - 1e-7
        assert m.inference_backend(x, w) == ("qpbo" if K == 2 else "trws")
        if K == 2:
            assert Hy == pytest.approx(H.max(), abs=1e-9)
    for name in ("trws", "lp") + (("qpbo",) if K == 2 else ()):
        mf = GraphModel(K, 3, inference=name)
        x = mf.check_X(Xs[:1])[0]
        w = rng.normal(size=mf.size_joint_feature)
        y = mf.decode(x, w)
        assert y.shape == (6,) and y.dtype == np.int64 and mf.approximate_oracle


# ------------------------------------------------------------------ fitting
def planted_trees(rng, n, V_range, K, F, scale=0.1):
    """Random forests labelled by decoding a planted symmetric model.  Node and edge features
    are scaled by ``scale`` so that ||psi|| is of the order of the (normalised) loss: BCFW's
    rate depends on R^2 / lam, R = max ||psi|| (the decoded labels do not depend on it)."""
    m = GraphModel(K, F, pairwise="symmetric")
    w_star = rng.normal(size=m.size_joint_feature)
    Wp = 1.5 * np.eye(K) - 0.3  # planted smoothness: neighbours tend to agree
    w_star[m.pairwise_offset:] = Wp[np.triu_indices(K)]
    X, Y = [], []
    for _ in range(n):
        V = int(rng.integers(*V_range))
        nodes, edges, _ = make_graph(rng, V, F, 1, n_trees=1 + int(rng.integers(0, 2)))
        x = (scale * nodes, edges, np.full((len(edges), 1), scale))
        X.append(x)
        Y.append(m.decode(m.check_X([x])[0], w_star))
    return m, X, Y


def test_fit_on_planted_trees_reaches_small_gap():
    rng = np.random.default_rng(12)
    model, X, Y = planted_trees(rng, n=30, V_range=(6, 12), K=3, F=5)
    svm = sf.StructuredSVM(model, lam=0.01, max_passes=30, tol=1e-3, random_state=0).fit(X, Y)
    assert not model.approximate_oracle
    assert svm.gap_ < 1e-2
    assert svm.score(X, Y) > 0.9
    # sparse node features: the same data gives the same fit
    Xs = [(sp.csr_matrix(x[0]), x[1], x[2]) for x in X]
    svm_s = sf.StructuredSVM(model, lam=0.01, max_passes=30, tol=1e-3, random_state=0).fit(Xs, Y)
    np.testing.assert_allclose(svm_s.coef_, svm.coef_, atol=1e-8)


def test_bcfw_gap_certifies_the_exact_qp_optimum():
    pytest.importorskip("cvxopt")
    from toy import corners_primal, primal_qp_optimum

    rng = np.random.default_rng(12)
    K, F, lam = 2, 2, 0.1
    model = GraphModel(K, F, pairwise="full")
    X, Y = [], []
    for _ in range(4):
        nodes, edges, _ = make_graph(rng, 3, F, 1)
        X.append((nodes, edges))
        Y.append(rng.integers(0, K, 3))
    Xv, Yv = model.check_data(X, Y)
    corners = []
    for i, (x, y) in enumerate(zip(Xv, Yv)):
        for yy in all_labellings(3, K):
            corners.append((i, as_dense(model.psi(x, y, yy)), model.loss(y, yy)))
    d = model.size_joint_feature
    w_star = primal_qp_optimum(corners, len(X), d, lam)
    P_star = corners_primal(corners, len(X), lam, w_star)
    # the reported gap bounds the primal suboptimality at every stage (exact oracle on trees)
    for passes in (1, 3, 10, 30):
        svm = sf.StructuredSVM(model, lam=lam, max_passes=passes, tol=1e-12, check_every=1,
                               random_state=0).fit(X, Y)
        P = corners_primal(corners, len(X), lam, svm.coef_)
        assert svm.gap_ >= -1e-12
        assert P - P_star <= svm.gap_ + 1e-9
    # and pairwise steps (linear convergence) reach the QP optimum itself
    svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise"), lam=lam, max_passes=2000, tol=1e-10,
                           random_state=0).fit(X, Y)
    assert svm.stopped_ == "tol"
    assert corners_primal(corners, len(X), lam, svm.coef_) - P_star < 1e-8
    np.testing.assert_allclose(svm.coef_, w_star, atol=1e-3)
