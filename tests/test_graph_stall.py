"""The certified gap split into the relaxation's looseness and the solver's progress
(`StructuredSVM.gap_split`, docs/guide/graphs.md "When the certified gap stalls")."""
import numpy as np
import pytest

import structfw as sf
from structfw.estimator import GapSplit
from structfw.models import ChainModel, GraphModel
from structfw.solvers import BCFW

K, F, LAM = 3, 2, 0.05


def frustrated_cycles(n=6, V=5, seed=3):
    """Odd cycles with random features and labels: TRW-S's relaxation is not tight on them."""
    rng = np.random.default_rng(seed)
    edges = np.array([(v, (v + 1) % V) for v in range(V)], np.int64)
    X = [(rng.normal(size=(V, F)), edges) for _ in range(n)]
    Y = [rng.integers(0, K, V) for _ in range(n)]
    return X, Y


def fitted(inference_options=None, passes=6, **model):
    X, Y = frustrated_cycles()
    svm = sf.StructuredSVM(GraphModel(K, F, inference_options=inference_options, **model),
                           solver=BCFW(step="pairwise"), lam=LAM, max_passes=passes, tol=None, check_every=1,
                           random_state=0).fit(X, Y)
    return svm, X, Y


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


@pytest.fixture(scope="module")
def weak():
    """A fit whose TRW-S stops after one iteration, so that its bounds are loose on some examples."""
    return fitted({"trws": {"max_iter": 1}})


def test_the_parts_add_up_to_the_certified_gap_of_the_fit(weak):
    svm, X, Y = weak
    split = svm.gap_split(X, Y)
    assert isinstance(split, GapSplit)
    tr = svm.trace_
    assert close(split.looseness + split.progress, split.certified_gap)
    # the same w and the same oracle as the fit's last checkpoint: the trace's columns, to rounding
    assert close(split.certified_gap, svm.certified_gap_)
    assert close(split.primal, tr.last("primal")) and close(split.primal_bound, tr.last("primal_bound"))
    assert close(split.progress, svm.gap_, rel=1e-8)
    assert close(split.looseness, float(np.mean(split.bound - split.hinge)))
    assert split.hinge.shape == split.bound.shape == (len(X),)
    assert np.all(split.hinge >= 0) and np.all(split.example_looseness >= 0)
    # the task is loopy and the back-end weak: some of the certified gap is the relaxation's
    assert split.looseness > 1e-6 and np.count_nonzero(split.example_looseness > 1e-9) >= 1


def test_a_tighter_back_end_on_the_fitted_w_shrinks_the_looseness_only(weak):
    svm, X, Y = weak
    loose = svm.gap_split(X, Y)
    # exhaustive search on 3^5 labellings: the true hinges, so no looseness at all
    svm.model.inference = "exhaustive"
    try:
        exact = svm.gap_split(X, Y)
    finally:
        svm.model.inference = "auto"
    assert np.all(np.abs(exact.example_looseness) <= 1e-9)
    # TRW-S's labellings score at most the maximum, its bounds at least
    assert np.all(loose.hinge <= exact.hinge + 1e-9) and np.all(exact.hinge <= loose.bound + 1e-9)
    assert close(exact.dual, loose.dual)
    assert exact.certified_gap <= loose.certified_gap + 1e-9


def test_the_lp_bound_is_at_most_trws_bound():
    svm, X, Y = fitted(passes=3)
    trws = svm.gap_split(X, Y)
    svm.model.inference = "lp"
    lp = svm.gap_split(X, Y)
    # TRW-S's bound is a dual value of the local-polytope LP, whose optimum the LP back-end reaches
    assert np.all(lp.bound <= trws.bound + 1e-6)


def test_gap_split_refuses_what_it_cannot_split(weak):
    svm, X, Y = weak
    with pytest.raises(ValueError, match="not fitted"):
        sf.StructuredSVM(GraphModel(K, F)).gap_split(X, Y)
    other_X, other_Y = frustrated_cycles(seed=4)
    with pytest.raises(ValueError, match="not the training data"):
        svm.gap_split(other_X, other_Y)
    with pytest.raises(ValueError, match="X has n=3"):
        _without_state(svm).gap_split(X[:3], Y[:3])
    rng = np.random.default_rng(0)
    Xc = [rng.normal(size=(4, 3)) for _ in range(4)]
    Yc = [rng.integers(0, 2, 4) for _ in range(4)]
    chain = sf.StructuredSVM(ChainModel(2, 3), lam=0.1, max_passes=2).fit(Xc, Yc)
    with pytest.raises(ValueError, match="ChainModel's oracle is exact"):
        chain.gap_split(Xc, Yc)
    ssg = sf.StructuredSVM(GraphModel(K, F), solver="ssg", lam=LAM, max_passes=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="dual value"):
        ssg.gap_split(X, Y)


def _without_state(svm):
    """A copy of a fit as a file saved without its solver state gives it back (no fingerprint)."""
    import copy

    out = copy.copy(svm)
    out.state_ = None
    return out
