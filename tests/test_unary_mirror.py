"""The feature-major copy of the unary weights that passes over sparse chain inputs keep for their
oracle (structfw.solvers.passes.unary_mirror): the same scores, corners and fits to the bit."""
import numpy as np
import pytest
import scipy.sparse as sp

import structfw as sf
from structfw_bench.synthetic import make_chain_problem
from structfw.oracles.chain import chain_unary_csr, chain_unary_csr_fm
from structfw.solvers import passes

S, F = 10, 200


@pytest.fixture(scope="module")
def chain():
    return make_chain_problem(n=60, n_states=S, n_features=F, sparse=True, seed=5, n_test=0)[:2]


@pytest.mark.parametrize("augment", [False, True])
def test_feature_major_unary_scores_are_the_state_major_ones(augment):
    rng = np.random.default_rng(0)
    x = sp.random(9, 300, density=0.05, format="csr", random_state=1)
    x.indices = x.indices.astype(np.int32)  # the loaders' index type
    w = rng.standard_normal(7 * 300 + 49)
    WT = np.ascontiguousarray(w[:7 * 300].reshape(7, 300).T)
    y = rng.integers(0, 7, 9)
    U = chain_unary_csr(x.indptr.astype(np.int64), x.indices, x.data, w, 7, 300, y, augment)
    Ufm = chain_unary_csr_fm(x.indptr.astype(np.int64), x.indices, x.data, WT, y, augment)
    np.testing.assert_array_equal(Ufm, U)  # the same products summed in the same order


def _fit(X, Y, solver):
    return sf.StructuredSVM(sf.models.ChainModel(S, F), solver=solver, lam=0.01, max_passes=4, check_every=2,
                            random_state=0).fit(X, Y)


def _recording(monkeypatch, build=None):
    """unary_mirror wrapped to keep the copies it made (or made by ``build`` instead)."""
    made = []
    original = passes.unary_mirror

    def record(plan, st, problem):
        WT = build(plan, st, problem) if build is not None else original(plan, st, problem)
        made.append((WT, st))
        return WT

    monkeypatch.setattr(passes, "unary_mirror", record)
    return made


@pytest.mark.parametrize("options", [dict(averaging="weighted"), dict(step="pairwise"), dict(cache=True),
                                     dict(step="away", sampling="gap"), dict(multi_plane=True)])
def test_a_pass_with_the_mirror_takes_the_steps_of_one_without(chain, monkeypatch, options):
    """Sparse rows on CSR inputs keep the copy; every entry a step writes to w is copied to it, so
    at the end of each pass it equals w's unary weights, and the fit is the one without it."""
    X, Y = chain
    solver = lambda: sf.solvers.BCFW(block_storage="sparse", **options)  # noqa: E731
    made = _recording(monkeypatch)
    with_mirror = _fit(X, Y, solver())
    assert made and all(WT.shape == (F, S) for WT, _ in made)
    WT, st = made[-1]
    np.testing.assert_array_equal(WT, st.w[:S * F].reshape(S, F).T)
    monkeypatch.setattr(passes, "unary_mirror", lambda plan, st, problem: passes._NO_MIRROR)
    without = _fit(X, Y, solver())
    np.testing.assert_array_equal(with_mirror.coef_, without.coef_)
    np.testing.assert_array_equal(with_mirror.trace_["gap"], without.trace_["gap"])


def test_dense_rows_keep_the_mirror_too(chain, monkeypatch):
    """The engine keeps the copy with sparse rows only; a pass on dense rows given one copies every
    unary entry of w after a step that reads the row, and still takes the same steps."""
    X, Y = chain

    def build(plan, st, problem):
        return np.ascontiguousarray(st.w[:S * F].reshape(S, F).T)

    made = _recording(monkeypatch, build)
    forced = _fit(X, Y, sf.solvers.BCFW(block_storage="dense", cache=True))
    WT, st = made[-1]
    np.testing.assert_array_equal(WT, st.w[:S * F].reshape(S, F).T)
    monkeypatch.undo()
    plain = _fit(X, Y, sf.solvers.BCFW(block_storage="dense", cache=True))
    np.testing.assert_array_equal(forced.coef_, plain.coef_)


def test_only_sparse_rows_on_csr_chains_get_the_mirror(chain, monkeypatch):
    X, Y = chain
    made = _recording(monkeypatch)
    _fit(X, Y, sf.solvers.BCFW(block_storage="dense", cache=True))
    assert made and all(WT.shape == (0, 0) for WT, _ in made)
    made.clear()
    Xo, Yo = sf.datasets.load_ocr("train")
    sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=sf.solvers.BCFW(block_storage="sparse", cache=True),
                     lam=0.01, max_passes=1, random_state=0).fit(Xo[:20], Yo[:20])
    assert made and all(WT.shape == (0, 0) for WT, _ in made)  # dense inputs: no CSR oracle


def test_a_gap_pass_over_csr_inputs_gives_each_examples_hinge(chain):
    """The gap pass's kernel for sparse chains (feature-major unary scores) gives chain_csr_hinge's
    H_i of every example, to the bit."""
    from structfw.oracles.compiled import chain_csr_hinge, pack_chain_csr
    from structfw.solvers._fastpass import hinge_pass

    X, Y = chain
    compiled = pack_chain_csr(X, Y, S, F)
    w = np.random.default_rng(3).standard_normal(S * F + S * S)
    H = hinge_pass(compiled, len(X), w)
    np.testing.assert_array_equal(H, [chain_csr_hinge(*compiled[1], i, w) for i in range(len(X))])
    assert (H >= 0).all()
