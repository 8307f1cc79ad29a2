"""Expectation oracles (online-EG's marginals) against brute-force enumeration."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from structfw.models import ChainModel, MulticlassModel
from structfw.oracles.marginals import chain_marginals


def _brute(model, x, y_true, v, c, labellings):
    logits = np.array([c * (model.loss(y_true, y) if y_true is not None else 0.0)
                       + float(np.dot(model.joint_feature(x, y).toarray(), v)) for y in labellings])
    m = logits.max()
    p = np.exp(logits - m)
    Z = p.sum()
    p /= Z
    E_phi = sum(pk * model.joint_feature(x, y).toarray() for pk, y in zip(p, labellings))
    E_loss = sum(pk * model.loss(y_true, y) for pk, y in zip(p, labellings)) if y_true is not None else 0.0
    return E_phi, E_loss, m + np.log(Z)


@pytest.mark.parametrize("L, scale, c", [(1, 1.0, 0.0), (3, 1.0, 0.7), (4, 30.0, -2.0), (4, 300.0, 5.0)])
def test_chain_expectation_against_enumeration(L, scale, c):
    rng = np.random.default_rng(L)
    S, F = 3, 2
    model = ChainModel(S, F)
    x = rng.normal(size=(L, F))
    y_true = rng.integers(0, S, L)
    v = scale * rng.normal(size=model.size_joint_feature)
    labellings = [np.array(y) for y in itertools.product(range(S), repeat=L)]
    E_phi, E_loss, logZ = model.expectation(x, y_true, v, c)
    B_phi, B_loss, B_logZ = _brute(model, x, y_true, v, c, labellings)
    assert np.all(np.isfinite(E_phi))
    np.testing.assert_allclose(E_phi, B_phi, atol=1e-9, rtol=1e-9)
    assert E_loss == pytest.approx(B_loss, abs=1e-9)
    assert logZ == pytest.approx(B_logZ, rel=1e-12, abs=1e-9)
    # sparse features give the same marginals; no loss term without y_true
    E2 = model.expectation(sp.csr_matrix(x), y_true, v, c)
    np.testing.assert_allclose(E2[0], E_phi, atol=1e-12)
    E3, l3, z3 = model.expectation(x, None, v, c)
    B3 = _brute(model, x, None, v, 0.0, labellings)
    np.testing.assert_allclose(E3, B3[0], atol=1e-9)
    assert l3 == 0.0 and z3 == pytest.approx(B3[2], abs=1e-9)


def test_chain_marginals_are_distributions():
    rng = np.random.default_rng(0)
    node, edge, _ = chain_marginals(rng.normal(size=(5, 4)) * 10, rng.normal(size=(4, 4)) * 10)
    np.testing.assert_allclose(node.sum(1), 1.0)
    np.testing.assert_allclose(edge.sum((1, 2)), 1.0)
    np.testing.assert_allclose(edge.sum(2), node[:-1], atol=1e-12)


@pytest.mark.parametrize("scale, c", [(1.0, 0.0), (1.0, 1.3), (500.0, -3.0)])
def test_multiclass_expectation_against_enumeration(scale, c):
    rng = np.random.default_rng(3)
    model = MulticlassModel(4, 3)
    x = rng.normal(size=3)
    v = scale * rng.normal(size=model.size_joint_feature)
    E_phi, E_loss, logZ = model.expectation(x, 2, v, c)
    B = _brute(model, x, 2, v, c, list(range(4)))
    np.testing.assert_allclose(E_phi, B[0], atol=1e-9)
    assert E_loss == pytest.approx(B[1], abs=1e-9) and logZ == pytest.approx(B[2], abs=1e-9)
