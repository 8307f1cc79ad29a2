"""Expectation oracles (online-EG's marginals) against brute-force enumeration."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from structfw._linalg import SparseVector, as_dense
from structfw.models import ChainModel, MulticlassModel, StructuredModel
from structfw.oracles import chain_marginals, chain_marginal_sums


def _brute(model, x, y_true, v, c, labellings):
    """(E_phi, E_loss, log Z) of p(y) ∝ exp(c Delta + <v, phi>) by enumerating ``labellings``."""
    phis = [as_dense(model.joint_feature(x, y)) for y in labellings]
    losses = np.array([model.loss(y_true, y) if y_true is not None else 0.0 for y in labellings])
    logits = c * losses + np.array([phi @ v for phi in phis])
    m = logits.max()
    p = np.exp(logits - m)
    Z = p.sum()
    p /= Z
    E_phi = sum(pk * phi for pk, phi in zip(p, phis))
    return E_phi, float(p @ losses), m + np.log(Z)


def _chain_labellings(S, L):
    return [np.array(y, dtype=np.int64) for y in itertools.product(range(S), repeat=L)]


def _check_close(got, want, scale):
    E_phi, E_loss, logZ = got
    B_phi, B_loss, B_logZ = want
    E_phi = as_dense(E_phi)
    assert np.all(np.isfinite(E_phi)) and np.isfinite(E_loss) and np.isfinite(logZ)
    np.testing.assert_allclose(E_phi, B_phi, atol=1e-9, rtol=1e-9)
    assert E_loss == pytest.approx(B_loss, abs=1e-9)
    assert logZ == pytest.approx(B_logZ, rel=1e-12, abs=1e-9 * max(1.0, scale))


@pytest.mark.parametrize("L, S, scale, c", [
    (1, 3, 1.0, 0.0), (2, 2, 1.0, 1.0), (3, 3, 1.0, 0.7), (4, 3, 30.0, -2.0), (4, 3, 300.0, 5.0),
    (5, 3, 3.0, 2.5), (5, 2, 1e4, 1e3), (3, 3, 1e6, -1e5),
])
def test_chain_expectation_against_enumeration(L, S, scale, c):
    rng = np.random.default_rng(10 * L + S)
    F = 2
    model = ChainModel(S, F)
    x = rng.normal(size=(L, F))
    y_true = rng.integers(0, S, L)
    v = scale * rng.normal(size=model.size_joint_feature)
    labellings = _chain_labellings(S, L)
    want = _brute(model, x, y_true, v, c, labellings)
    got = model.expectation(x, y_true, v, c)
    assert isinstance(got[0], np.ndarray) and got[0].shape == (model.size_joint_feature,)
    _check_close(got, want, scale)
    # plain marginals: no loss term without y_true
    got0 = model.expectation(x, None, v, c)
    assert got0[1] == 0.0
    _check_close(got0, _brute(model, x, None, v, 0.0, labellings), scale)


@pytest.mark.parametrize("scale, c", [(1.0, 0.0), (2.0, 1.5), (500.0, -4.0)])
def test_chain_expectation_sparse_features(scale, c):
    """CSR features (some rows empty, a repeated feature) give the same marginals, as a SparseVector."""
    rng = np.random.default_rng(7)
    S, F, L = 3, 6, 4
    model = ChainModel(S, F)
    dense = rng.normal(size=(L, F)) * (rng.random((L, F)) < 0.4)
    dense[2] = 0.0
    x = model.check_X([sp.csr_matrix(dense)])[0]
    y_true = rng.integers(0, S, L)
    v = scale * rng.normal(size=model.size_joint_feature)
    E, loss, logZ = model.expectation(x, y_true, v, c)
    assert isinstance(E, SparseVector) and E.dim == model.size_joint_feature
    assert np.all(np.diff(E.indices) > 0)
    # only the features present in x (and the transitions) can be non-zero
    present = np.flatnonzero(np.abs(dense).sum(0))
    allowed = {s * F + f for s in range(S) for f in present} | set(range(S * F, model.size_joint_feature))
    assert set(E.indices.tolist()) <= allowed
    _check_close((E, loss, logZ), _brute(model, dense, y_true, v, c, _chain_labellings(S, L)), scale)
    Ed = model.expectation(dense, y_true, v, c)
    np.testing.assert_allclose(E.toarray(), Ed[0], atol=1e-12)


def test_chain_marginals_are_consistent_distributions():
    rng = np.random.default_rng(0)
    for scale in (1.0, 10.0, 1e5):
        U = rng.normal(size=(6, 4)) * scale
        P = rng.normal(size=(4, 4)) * scale
        node, edge, logZ = chain_marginals(U, P)
        assert np.all(np.isfinite(node)) and np.all(np.isfinite(edge)) and np.isfinite(logZ)
        np.testing.assert_allclose(node.sum(1), 1.0, atol=1e-12)
        np.testing.assert_allclose(edge.sum((1, 2)), 1.0, atol=1e-12)
        np.testing.assert_allclose(edge.sum(2), node[:-1], atol=1e-12)
        np.testing.assert_allclose(edge.sum(1), node[1:], atol=1e-9)
        n2, T, z2 = chain_marginal_sums(U, P)
        np.testing.assert_allclose(n2, node)
        np.testing.assert_allclose(T, edge.sum(0), atol=1e-12)
        assert z2 == logZ


def test_chain_marginals_underflow_fallback_is_exact():
    """Transitions so peaked that the shifted products underflow: the exact path takes over."""
    S, L = 3, 5
    P = np.full((S, S), -2000.0)
    P[0, 1] = 1500.0   # row 0 max; column 1's max
    P[2, 2] = 0.0
    U = np.zeros((L, S))
    U[:, 2] = 800.0    # pulls towards state 2, whose only good transition is 2 -> 2
    node, edge, logZ = chain_marginals(U, P)
    labellings = _chain_labellings(S, L)
    scores = np.array([U[np.arange(L), y].sum() + P[y[:-1], y[1:]].sum() for y in labellings])
    m = scores.max()
    p = np.exp(scores - m)
    bz = m + np.log(p.sum())
    p /= p.sum()
    assert logZ == pytest.approx(bz, rel=1e-14)
    bnode = np.zeros((L, S))
    for pk, y in zip(p, labellings):
        bnode[np.arange(L), y] += pk
    np.testing.assert_allclose(node, bnode, atol=1e-12)
    assert np.all(np.isfinite(edge))


def test_chain_marginals_empty_chain():
    node, edge, logZ = chain_marginals(np.zeros((0, 3)), np.zeros((3, 3)))
    assert node.shape == (0, 3) and edge.shape == (0, 3, 3) and logZ == 0.0


@pytest.mark.parametrize("scale, c", [(1.0, 0.0), (1.0, 1.3), (500.0, -3.0), (1e6, 1e4)])
def test_multiclass_expectation_against_enumeration(scale, c):
    rng = np.random.default_rng(3)
    model = MulticlassModel(4, 3)
    x = rng.normal(size=3)
    v = scale * rng.normal(size=model.size_joint_feature)
    got = model.expectation(x, 2, v, c)
    _check_close(got, _brute(model, x, 2, v, c, list(range(4))), scale)
    got0 = model.expectation(x, None, v, c)
    assert got0[1] == 0.0
    _check_close(got0, _brute(model, x, None, v, 0.0, list(range(4))), scale)


def test_expectation_capability_flag():
    assert ChainModel(2, 1).has_expectation_oracle
    assert MulticlassModel(2, 1).has_expectation_oracle

    class NoMarginals(StructuredModel):
        size_joint_feature = 1

    m = NoMarginals()
    assert not m.has_expectation_oracle
    with pytest.raises(NotImplementedError, match="expectation"):
        m.expectation(None, None, np.zeros(1), 0.0)


def test_expectation_validation_errors():
    chain = ChainModel(3, 2)
    x = np.zeros((4, 2))
    v = np.zeros(chain.size_joint_feature)
    with pytest.raises(ValueError, match="v must"):
        chain.expectation(x, None, np.zeros(5), 0.0)
    with pytest.raises(ValueError, match="c must"):
        chain.expectation(x, None, v, float("nan"))
    with pytest.raises(ValueError, match="c must"):
        chain.expectation(x, None, v, "a")
    with pytest.raises(ValueError, match="y_true"):
        chain.expectation(x, np.zeros(3, int), v, 1.0)
    with pytest.raises(ValueError, match="y_true"):
        chain.expectation(x, np.array([0, 1, 2, 3]), v, 1.0)
    with pytest.raises(ValueError, match=r"x (must|has \d+ features)"):
        chain.expectation(np.zeros((4, 3)), None, v, 0.0)
    mc = MulticlassModel(3, 2)
    with pytest.raises(ValueError, match="y_true"):
        mc.expectation(np.zeros(2), 3, np.zeros(6), 1.0)
    with pytest.raises(ValueError, match=r"x (must|has \d+ features)"):
        mc.expectation(np.zeros(3), 0, np.zeros(6), 1.0)
    with pytest.raises(ValueError, match="v must"):
        mc.expectation(np.zeros(2), 0, np.zeros(7), 1.0)


def test_expectation_is_gradient_of_log_partition():
    """d log Z / dv = E_phi and d log Z / dc = E_loss (finite differences on an OCR-like chain)."""
    rng = np.random.default_rng(5)
    S, F, L = 5, 4, 7
    model = ChainModel(S, F)
    x = rng.normal(size=(L, F))
    y = rng.integers(0, S, L)
    v = rng.normal(size=model.size_joint_feature)
    E, El, z = model.expectation(x, y, v, 0.8)
    h = 1e-6
    for j in rng.choice(model.size_joint_feature, 8, replace=False):
        dv = np.zeros_like(v)
        dv[j] = h
        g = (model.expectation(x, y, v + dv, 0.8)[2] - model.expectation(x, y, v - dv, 0.8)[2]) / (2 * h)
        assert g == pytest.approx(E[j], abs=1e-6)
    g = (model.expectation(x, y, v, 0.8 + h)[2] - model.expectation(x, y, v, 0.8 - h)[2]) / (2 * h)
    assert g == pytest.approx(El, abs=1e-6)


# --------------------------------------------------------------------------- loopy belief propagation
def _graph_brute(U, edges, P, T=1.0):
    """Exact node marginals and log Z of p(y) ∝ exp(E(y) / T) by enumeration."""
    from structfw.oracles.graph import energy

    V, S = U.shape
    ys = np.array(list(itertools.product(range(S), repeat=V)), np.int64)
    s = np.array([energy(U, edges, P, y) for y in ys]) / T
    logZ = np.logaddexp.reduce(s)
    p = np.exp(s - logZ)
    mu = np.zeros((V, S))
    for y, q in zip(ys, p):
        mu[np.arange(V), y] += q
    return mu, logZ


def test_loopy_marginals_are_exact_on_forests():
    from structfw.oracles.graph import tree_marginals
    from structfw.oracles.marginals import loopy_marginals

    rng = np.random.default_rng(0)
    for trial in range(20):
        V, S = int(rng.integers(1, 7)), int(rng.integers(2, 4))
        edges = np.array([[int(rng.integers(0, v)), v] for v in range(1, V) if rng.random() < 0.8],
                         np.int64).reshape(-1, 2)
        U, P = 2 * rng.normal(size=(V, S)), 2 * rng.normal(size=(len(edges), S, S))
        mu, mu_e, logZ, info = loopy_marginals(U, edges, P, temperature=0.7)
        t_mu, t_mu_e, t_logZ = tree_marginals(U, edges, P, 0.7)
        assert info["converged"] and info["max_change"] < 1e-8
        np.testing.assert_allclose(mu, t_mu, atol=1e-7)
        np.testing.assert_allclose(mu_e, t_mu_e, atol=1e-7)
        assert logZ == pytest.approx(t_logZ, abs=1e-6)  # the Bethe log Z is exact on a forest


def test_loopy_marginals_huge_potentials_use_the_exact_log_sums():
    """Pairwise terms of +-1e3: the shifted exponential sums underflow and the exact log-domain
    sums take over; on a chain the result is still the exact one, finite."""
    from structfw.oracles.graph import tree_marginals
    from structfw.oracles.marginals import loopy_marginals

    rng = np.random.default_rng(4)
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    U = rng.normal(size=(4, 3))
    P = 1e3 * rng.normal(size=(3, 3, 3))
    mu, mu_e, logZ, info = loopy_marginals(U, edges, P)
    t_mu, t_mu_e, t_logZ = tree_marginals(U, edges, P)
    assert info["converged"] and np.all(np.isfinite(mu)) and np.isfinite(logZ)
    np.testing.assert_allclose(mu, t_mu, atol=1e-7)
    assert logZ == pytest.approx(t_logZ, rel=1e-9)


@pytest.mark.parametrize("coupling, atol", [(0.1, 1e-3), (0.5, 3e-2)])
def test_loopy_marginals_against_enumeration_on_small_loopy_graphs(coupling, atol):
    """The Bethe approximation's error grows with the coupling: within 1e-3 for |theta_e| ~ 0.1,
    3e-2 for ~0.5, on rings with chords and a 3 x 3 grid."""
    from structfw.oracles.marginals import loopy_marginals

    rng = np.random.default_rng(1)
    grid = [[r * 3 + c, r * 3 + c + 1] for r in range(3) for c in range(2)] + \
           [[r * 3 + c, r * 3 + c + 3] for r in range(2) for c in range(3)]
    graphs = [[[0, 1], [1, 2], [2, 0]], [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [0, 2]], grid]
    for edges in graphs:
        edges = np.array(edges, np.int64)
        V = int(edges.max()) + 1
        for S in (2, 3):
            U = rng.normal(size=(V, S))
            P = coupling * rng.normal(size=(len(edges), S, S))
            mu, mu_e, logZ, info = loopy_marginals(U, edges, P)
            ref, ref_logZ = _graph_brute(U, edges, P)
            assert info["converged"]
            np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)
            np.testing.assert_allclose(mu_e.sum(axis=(1, 2)), 1.0, atol=1e-12)
            # at a fixed point the edge beliefs are consistent with the node beliefs
            np.testing.assert_allclose(mu_e.sum(axis=2), mu[edges[:, 0]], atol=1e-6)
            np.testing.assert_allclose(mu_e.sum(axis=1), mu[edges[:, 1]], atol=1e-6)
            np.testing.assert_allclose(mu, ref, atol=atol)
            assert logZ == pytest.approx(ref_logZ, abs=10 * atol * len(edges))


def test_loopy_marginals_validation_and_strong_couplings_stay_distributions():
    from structfw.oracles.marginals import loopy_marginals

    edges = np.array([[0, 1], [1, 2], [2, 0]])
    U, P = np.zeros((3, 2)), np.zeros((3, 2, 2))
    P[:, 0, 1] = P[:, 1, 0] = 50.0  # a frustrated (anti-ferromagnetic) triangle, strongly coupled
    mu, mu_e, _, info = loopy_marginals(U, edges, P, damping=0.0, max_iter=7)
    assert info["n_iter"] <= 7 and np.all(np.isfinite(mu)) and np.all(np.isfinite(mu_e))
    np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)
    for kw, msg in [({"temperature": 0}, "temperature"), ({"damping": -0.1}, "damping"),
                    ({"max_iter": 0}, "max_iter"), ({"tol": 0}, "tol")]:
        with pytest.raises(ValueError, match=msg):
            loopy_marginals(U, edges, P, **kw)
    with pytest.raises(ValueError, match="pairwise must have shape"):
        loopy_marginals(U, edges, P[:2])
    with pytest.raises(ValueError, match="finite"):
        loopy_marginals(np.full((3, 2), np.nan), edges, P)


def test_trw_is_exact_on_forests_and_bounds_log_z_on_loopy_graphs():
    """Tree-reweighted BP: rho = 1 on a forest (then it is BP, exact); on loopy graphs rho is a
    point of the spanning-tree polytope (in (0, 1], summing to V - #components) and the TRW
    value at the fixed point is an upper bound on log Z."""
    from structfw.oracles.graph import tree_marginals
    from structfw.oracles.marginals import edge_appearance, loopy_marginals

    rng = np.random.default_rng(2)
    tree = np.array([[0, 1], [1, 2], [1, 3], [4, 5]])
    U, P = rng.normal(size=(6, 3)), rng.normal(size=(4, 3, 3))
    mu, _, logZ, info = loopy_marginals(U, tree, P, method="trw")
    np.testing.assert_array_equal(info["rho"], 1.0)
    t_mu, _, t_logZ = tree_marginals(U, tree, P)
    np.testing.assert_allclose(mu, t_mu, atol=1e-7)
    assert logZ == pytest.approx(t_logZ, abs=1e-6)
    grid = np.array([[r * 3 + c, r * 3 + c + 1] for r in range(3) for c in range(2)]
                    + [[r * 3 + c, r * 3 + c + 3] for r in range(2) for c in range(3)])
    ring_and_triangle = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 4]])
    for edges, V, n_comp in ((grid, 9, 1), (ring_and_triangle, 7, 2)):
        rho = edge_appearance(V, edges)
        assert np.all(rho > 0) and np.all(rho <= 1) and rho.sum() == pytest.approx(V - n_comp)
        for coupling in (0.3, 1.5):
            U = rng.normal(size=(V, 2))
            P = coupling * rng.normal(size=(len(edges), 2, 2))
            mu, mu_e, logZ, info = loopy_marginals(U, edges, P, method="trw", tol=1e-10, max_iter=5000)
            ref, ref_logZ = _graph_brute(U, edges, P)
            assert info["converged"] and info["method"] == "trw"
            np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)
            assert logZ >= ref_logZ - 1e-8  # the upper bound
            np.testing.assert_allclose(mu, ref, atol=0.25)  # pseudo-marginals: only roughly right
    with pytest.raises(ValueError, match="method must be"):
        loopy_marginals(U, edges, P, method="mean-field")
