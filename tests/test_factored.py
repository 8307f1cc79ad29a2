"""The factored block storage (solvers/_factored.py): per-position label weights of a dense chain
instead of rows.  The same FW steps as dense rows (to rounding: ||d||^2 comes from the block's Gram
matrix), every option it serves, exact warm starts, and the options it does not serve refused."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import structfw as sf
from structfw.models import ChainModel, MulticlassModel
from structfw.solvers import BCFW, KernelBCFW

LAM = 0.1


def chain(seed=1, n=14, F=5, K=3, binary=False):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(1, 7)), F)) for _ in range(n)]
    if binary:  # OCR-like: many exact zeros among the features
        X = [(x > 0.3).astype(float) for x in X]
    Y = [rng.integers(0, K, len(x)) for x in X]
    return X, Y, ChainModel(K, F)


def fit(model, X, Y, solver, passes=8, seed=0, **kw):
    return sf.StructuredSVM(model, solver=solver, lam=LAM, max_passes=passes, tol=None, check_every=1,
                            random_state=seed, **kw).fit(X, Y)


OPTIONS = [dict(), dict(sampling="perm"), dict(sampling="gap", gap_refresh=3), dict(sampling="max_gap"),
           dict(step_size="predefined"), dict(step_size="predefined", oracle_quality=0.5),
           dict(averaging="weighted"), dict(averaging="suffix", sampling="perm"), dict(gap_refresh=None, sampling="gap")]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "fw")
@pytest.mark.parametrize("binary", [False, True], ids=["gaussian", "binary"])
def test_factored_steps_are_the_dense_rows_steps(options, binary):
    """The same blocks, labellings and steps: every checkpoint's primal, dual and gap, and w, agree
    with the dense rows' to rounding."""
    X, Y, model = chain(binary=binary)
    rows = fit(model, X, Y, BCFW(block_storage="dense", **options))
    fact = fit(model, X, Y, BCFW(block_storage="factored", **options))
    assert fact.state_.storage == "factored" and rows.state_.storage == "dense"
    for col in ("primal", "dual", "gap", "oracle_calls"):
        np.testing.assert_allclose(fact.trace_[col], rows.trace_[col], rtol=0, atol=1e-10, err_msg=col)
    np.testing.assert_allclose(fact.coef_, rows.coef_, rtol=0, atol=1e-10)
    assert fact.state_.k == rows.state_.k


def test_the_block_gaps_of_a_factored_state_sum_to_the_gap():
    """A gap pass reads <w_i, w> from the label weights and the unary scores; the block gaps are
    those of the rows and sum to P(w) - D(alpha) (eq. (7) of Osokin et al.)."""
    X, Y, model = chain(seed=3)
    svm = fit(model, X, Y, BCFW(block_storage="factored", sampling="gap", gap_refresh=1), passes=4)
    ref = fit(model, X, Y, BCFW(block_storage="dense", sampling="gap", gap_refresh=1), passes=4)
    np.testing.assert_allclose(svm.state_.sampler.estimates, ref.state_.sampler.estimates, rtol=0, atol=1e-12)
    assert svm.state_.full_gap == pytest.approx(svm.trace_["gap"][-1], rel=1e-9, abs=1e-12)


def test_factored_warm_starts_continue_exactly_and_rescale_to_a_new_lam():
    X, Y, model = chain(seed=4)
    once = fit(model, X, Y, BCFW(block_storage="factored", averaging="weighted"), passes=6, seed=2)
    split = fit(model, X, Y, BCFW(block_storage="factored", averaging="weighted"), passes=3, seed=2,
                warm_start=True)
    split.fit(X, Y)
    np.testing.assert_array_equal(split.coef_, once.coef_)
    assert split.dual_ == once.dual_ and split.state_.k == once.state_.k
    # a new lam keeps alpha: w_i (the label weights) rescale with w, as rows do
    a = fit(model, X, Y, BCFW(block_storage="factored"), passes=4, warm_start=True)
    b = fit(model, X, Y, BCFW(block_storage="dense"), passes=4, warm_start=True)
    a.set_params(lam=0.03, max_passes=4).fit(X, Y)
    b.set_params(lam=0.03, max_passes=4).fit(X, Y)
    np.testing.assert_allclose(a.trace_["dual"], b.trace_["dual"], rtol=0, atol=1e-10)


def test_a_factored_state_has_no_rows_and_round_trips_through_a_file(tmp_path):
    """Saved with state=True, read back and continued, a factored fit goes on exactly as one fit."""
    X, Y, model = chain()
    once = fit(model, X, Y, BCFW(averaging="weighted"), passes=6, seed=2)
    half = fit(model, X, Y, BCFW(averaging="weighted"), passes=3, seed=2, warm_start=True)
    with pytest.raises(ValueError, match="stores its w_i factored"):
        half.state_.wi
    loaded = sf.load(half.save(tmp_path / "m", state=True))
    assert loaded.state_.storage == "factored"
    loaded.fit(X, Y)
    np.testing.assert_array_equal(loaded.coef_, once.coef_)
    assert loaded.dual_ == once.dual_


def _forged(tmp_path, edit):
    X, Y, model = chain()
    svm = fit(model, X, Y, BCFW(), passes=2, warm_start=True)
    edit(svm.state_.factored)
    path = svm.save(tmp_path / "m", state=True)
    return X, Y, path


@pytest.mark.parametrize("edit, match", [
    (lambda fb: setattr(fb, "A", fb.A[:-1]), r"factored\.A"),
    (lambda fb: setattr(fb, "T", fb.T[:, :2]), r"factored\.T"),
    (lambda fb: fb.starts.__setitem__(slice(1, None), fb.starts[1:][::-1].copy()), r"factored\.starts"),
    (lambda fb: fb.A.__setitem__((0, 0), np.nan), r"factored\.A.*NaN"),
], ids=["A-rows", "T-shape", "starts-order", "A-nan"])
def test_a_forged_factored_state_is_refused_when_read(tmp_path, edit, match):
    _, _, path = _forged(tmp_path, edit)
    with pytest.raises(ValueError, match=match):
        sf.load(path)


def test_factored_weights_that_do_not_sum_to_w_are_refused_when_continued(tmp_path):
    X, Y, path = _forged(tmp_path, lambda fb: fb.A.__setitem__((0, 0), fb.A[0, 0] + 1.0))
    svm = sf.load(path)
    with pytest.raises(ValueError, match="factored' does not sum to w"):
        svm.fit(X, Y)


def test_auto_stores_one_block_at_a_time_factored_and_the_other_options_as_rows():
    X, Y, model = chain()
    assert fit(model, X, Y, BCFW(), passes=1).state_.storage == "factored"
    cached = fit(model, X, Y, BCFW(cache=True, step="pairwise"), passes=1).state_
    assert cached.storage == "factored" and cached.corners.labels  # corner sets of labellings
    assert fit(model, X, Y, BCFW(minibatch=2), passes=1).state_.storage == "dense"
    assert fit(model, X, Y, BCFW(block_storage="dense"), passes=1).state_.storage == "dense"
    assert fit(model, [sp.csr_matrix(x) for x in X], Y, BCFW(), passes=1).state_.storage == "dense"


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_options_that_need_rows_continue_a_factored_state_as_rows(storage):
    """A fit with the cache continued with minibatches: the factored w_i become rows (its corner sets of
    labellings sets of psi), and the fit goes on as the same fit stored as rows from the start does (to
    rounding)."""
    X, Y, model = chain()
    fact = fit(model, X, Y, BCFW(cache=True), passes=3, warm_start=True)
    rows = fit(model, X, Y, BCFW(cache=True, block_storage=storage), passes=3, warm_start=True)
    assert fact.state_.corners.labels and not rows.state_.corners.labels
    for svm in (fact, rows):
        svm.set_params(solver=BCFW(cache=True, minibatch=2, block_storage=storage))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            svm.fit(X, Y)
    assert fact.state_.storage == storage and fact.state_.factored is None and not fact.state_.corners.labels
    assert np.array_equal(fact.state_.corners.size, rows.state_.corners.size)

    def as_rows(wi):
        return np.array([v.toarray() for v in wi]) if storage == "sparse" else np.asarray(wi)

    np.testing.assert_allclose(as_rows(fact.state_.wi), as_rows(rows.state_.wi), rtol=0, atol=1e-10)
    for col in ("primal", "dual", "gap"):
        np.testing.assert_allclose(fact.trace_[col], rows.trace_[col], rtol=0, atol=1e-10, err_msg=col)


def test_pairwise_steps_continue_a_factored_state_afresh_as_they_do_rows():
    X, Y, model = chain()
    svm = fit(model, X, Y, BCFW(), passes=2, warm_start=True)
    svm.set_params(solver=BCFW(step="pairwise"))
    with pytest.warns(RuntimeWarning, match="no active sets.*starting afresh"):
        svm.fit(X, Y)
    assert svm.state_.storage == "factored" and svm.state_.corners.labels


@pytest.mark.parametrize("options", [dict(minibatch=2), dict(minibatch=3, asynchronous=True)],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_factored_storage_refuses_the_options_it_does_not_serve(options):
    X, Y, model = chain()
    with pytest.raises(ValueError, match="block_storage='factored'"):
        fit(model, X, Y, BCFW(block_storage="factored", **options), passes=1)


def test_factored_storage_refuses_models_without_a_dense_compiled_oracle():
    X, Y, model = chain()
    with pytest.raises(ValueError, match="block_storage='factored'"):
        fit(model, [sp.csr_matrix(x) for x in X], Y, BCFW(block_storage="factored"), passes=1)
    with pytest.raises(ValueError, match="block_storage='factored'"):  # a weighted loss has its own oracle
        sf.StructuredSVM(model, solver=BCFW(block_storage="factored"), max_passes=1).fit(
            X, Y, sample_weight=np.linspace(1.0, 2.0, len(X)))


def test_kernel_bcfw_stores_factored_when_it_can_and_rows_when_it_cannot():
    X, Y, model = chain()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = fit(model, X, Y, KernelBCFW(gamma=0.5), passes=3)
        pairwise = fit(model, X, Y, KernelBCFW(gamma=0.5, step="pairwise"), passes=3)
        batched = fit(model, X, Y, KernelBCFW(gamma=0.5, minibatch=2), passes=3)
    assert plain.state_.storage == "factored" and pairwise.state_.storage == "factored"
    assert batched.state_.storage == "dense"
    rows = fit(model, X, Y, KernelBCFW(gamma=0.5, block_storage="dense"), passes=3)
    np.testing.assert_allclose(plain.trace_["dual"], rows.trace_["dual"], rtol=0, atol=1e-10)


def multiclass(seed=0, n=30, F=4, K=3):
    rng = np.random.default_rng(seed)
    return list(rng.normal(size=(n, F))), [int(v) for v in rng.integers(0, K, n)], MulticlassModel(K, F)


@pytest.mark.parametrize("options", [dict(), dict(sampling="gap"), dict(averaging="weighted", step_size="predefined")],
                         ids=["fw", "gap", "wavg-predefined"])
def test_multiclass_is_a_chain_of_length_one_without_transitions(options):
    X, Y, model = multiclass()
    rows = fit(model, X, Y, BCFW(block_storage="dense", **options))
    fact = fit(model, X, Y, BCFW(block_storage="factored", **options))
    assert fact.state_.storage == "factored" and fact.state_.factored.A.shape == (30, 3)
    for col in ("primal", "dual", "gap"):
        np.testing.assert_allclose(fact.trace_[col], rows.trace_[col], rtol=0, atol=1e-10, err_msg=col)
    np.testing.assert_allclose(fact.coef_, rows.coef_, rtol=0, atol=1e-10)


def test_the_regularisation_path_asks_for_rows():
    X, Y, model = chain()
    with pytest.raises(ValueError, match="block_storage='factored'"):
        sf.regularization_path(model, X, Y, eps=0.1, solver=BCFW(block_storage="factored"), min_lam=0.05)


@pytest.mark.parametrize("problem", ["chain", "multiclass"])
def test_the_regularisation_path_starts_a_factored_state_at_the_oracles_corners(problem):
    """The path places each block at its labelling's corner (Osokin et al. 2016, Sec. 4): the factored
    state's label weights and transitions there give the rows' start (the first breakpoint and w
    above it), and the path it follows is certified eps-approximate at every lam it covers (the steps
    are the rows' to rounding, so the later breakpoints may differ by more than rounding)."""
    X, Y, model = chain() if problem == "chain" else multiclass()
    eps = 0.1
    fact = sf.regularization_path(model, X, Y, eps=eps, min_lam=0.05, solver=BCFW(), random_state=0)
    rows = sf.regularization_path(model, X, Y, eps=eps, min_lam=0.05, solver=BCFW(block_storage="dense"),
                                  random_state=0)
    assert fact.breakpoints[0] == pytest.approx(rows.breakpoints[0], rel=1e-12)
    np.testing.assert_allclose(fact.coef_at(2 * fact.breakpoints[0]), rows.coef_at(2 * rows.breakpoints[0]),
                               rtol=1e-12, atol=1e-15)
    assert len(fact.breakpoints) >= 3 and np.all(np.diff(fact.breakpoints) < 0)
    for lam in np.geomspace(fact.breakpoints[0], fact.breakpoints[-1], 9):
        assert fact.gap_bound_at(lam) <= eps + 1e-9


# ---------------------------------------------------------------- corner sets of labellings
#: options with FW steps that keep corner sets: the same corners and steps as rows (to rounding)
SET_OPTIONS = [dict(cache=True), dict(cache=True, sampling="gap", gap_refresh=3, averaging="weighted"),
               dict(multi_plane=True), dict(multi_plane=True, averaging="weighted", max_planes=3)]


@pytest.mark.parametrize("options", SET_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("data", ["chain", "multiclass"])
def test_factored_corner_sets_take_the_rows_steps(options, data):
    """The cache and MP-BCFW's working sets keep labellings on the factored storage, scored from the unary
    scores: the same corners, hits and steps as the rows' sets of psi (every checkpoint to rounding)."""
    X, Y, model = chain() if data == "chain" else multiclass()
    rows = fit(model, X, Y, BCFW(block_storage="dense", **options))
    fact = fit(model, X, Y, BCFW(block_storage="factored", **options))
    assert fact.state_.storage == "factored" and fact.state_.corners.labels
    for col in ("primal", "dual", "gap", "oracle_calls"):
        np.testing.assert_allclose(fact.trace_[col], rows.trace_[col], rtol=0, atol=1e-9, err_msg=col)
    np.testing.assert_array_equal(fact.state_.corners.size, rows.state_.corners.size)


@pytest.mark.parametrize("options", [dict(step="pairwise"), dict(step="away"),
                                     dict(step="pairwise", cache=True, sampling="gap"),
                                     dict(step="pairwise", multi_plane=True), dict(step="away", averaging="weighted")],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("data", ["chain", "multiclass"])
def test_factored_pairwise_and_away_steps_reach_the_rows_optimum(options, data):
    """Pairwise and away steps on labellings.  Their trajectories are not compared step by step with the
    rows': a pairwise line search leaves two corners at equal H (to rounding), and the next away search
    meets ties that either arithmetic may break.  Both converge, and their certificates agree: the dual
    optimum lies in [D, D + gap] of each run, so the two intervals overlap."""
    X, Y, model = chain(n=8) if data == "chain" else multiclass(n=12)
    runs = [sf.StructuredSVM(model, solver=BCFW(block_storage=storage, **options), lam=1.0, max_passes=200,
                             tol=1e-10, check_every=20, random_state=0).fit(X, Y) for storage in ("dense", "factored")]
    assert runs[1].state_.storage == "factored" and runs[1].state_.corners.labels
    (D_r, g_r), (D_f, g_f) = [(svm.trace_["dual"][-1], svm.trace_["gap"][-1]) for svm in runs]
    assert g_f < 1e-3 and g_r < 1e-3
    assert D_f <= D_r + g_r + 1e-12 and D_r <= D_f + g_f + 1e-12


def test_the_tracked_weights_of_labellings_give_the_label_weights():
    """w_i = A alpha_[i]: the active labellings' psi weighted by alpha, over lam n, is the factored w_i
    (and l_i = b^T alpha_[i]); a state file whose weights were edited is refused when read."""
    X, Y, model = chain()
    svm = fit(model, X, Y, BCFW(step="pairwise", cache=True), passes=5)
    st, cs = svm.state_, svm.state_.corners
    Xc = np.vstack(X)
    n, d = len(X), st.w.shape[0]
    for i in range(n):
        wi = np.zeros(d)
        for k in range(cs.size[i]):
            psi = model.psi(X[i], Y[i], cs.labelling(i, k))
            psi = psi.toarray().ravel() if hasattr(psi, "toarray") else np.asarray(psi, float).ravel()
            wi += cs.alpha[i, k] * psi / (LAM * n)
        np.testing.assert_allclose(st.factored.row(Xc, i, d), wi, rtol=0, atol=1e-12)
        assert st.li[i] == pytest.approx(float(cs.alpha[i, :cs.size[i]] @ cs.loss[i, :cs.size[i]]) / n, abs=1e-14)


def test_a_factored_state_with_labellings_round_trips_and_forgeries_are_refused(tmp_path):
    X, Y, model = chain()
    once = fit(model, X, Y, BCFW(step="pairwise", cache=True), passes=6, seed=2)
    part = fit(model, X, Y, BCFW(step="pairwise", cache=True), passes=3, seed=2, warm_start=True)
    path = part.save(tmp_path / "m", state=True)
    back = sf.load(path)
    assert back.state_.corners.labels
    back.fit(X, Y)
    np.testing.assert_allclose(back.coef_, once.coef_, rtol=0, atol=1e-12)
    for edit, match in [(lambda cs: cs.pidx.__setitem__(cs.start[0, 1], 7), r"corners\.pidx"),
                        (lambda cs: cs.alpha.__setitem__((0, 0), cs.alpha[0, 0] - 0.25), r"alpha|factored\.A"),
                        (lambda cs: setattr(cs, "labels", False), r"labels|increasing|pval")]:
        forged = sf.load(path)
        edit(forged.state_.corners)
        bad = forged.save(tmp_path / "forged", state=True)
        with pytest.raises(ValueError, match=match):
            sf.load(bad)


def test_a_store_of_labellings_keeps_no_values_and_reads_files_that_kept_zeros(tmp_path):
    """A labelling has no values: the store's ``pval`` is empty (a lookup or a store touches the states
    only).  A file saved when the store kept a zero beside each state still loads, and continues as the
    fit it came from; a nonzero value there is refused."""
    X, Y, model = chain()
    once = fit(model, X, Y, BCFW(multi_plane=True, max_approx_passes=1), passes=6, seed=3)
    part = fit(model, X, Y, BCFW(multi_plane=True, max_approx_passes=1), passes=3, seed=3, warm_start=True)
    cs = part.state_.corners
    assert cs.labels and cs.pval.shape == (0,) and int(cs.meta[0]) > 0
    cs.pval = np.zeros(cs.pidx.shape[0])  # as the store kept them before
    back = sf.load(part.save(tmp_path / "zeros", state=True))
    assert back.state_.corners.pval.shape == (0,)
    back.fit(X, Y)
    np.testing.assert_allclose(back.coef_, once.coef_, rtol=0, atol=1e-12)
    cs.pval[int(cs.start[0, 0])] = 0.5
    with pytest.raises(ValueError, match=r"corners\.pval.*no values"):
        sf.load(part.save(tmp_path / "values", state=True))


def test_the_compiled_block_scores_are_joint_feature_dots():
    """What general_chunk's corner scan and cache rule read on the factored storage: `labelling_score`
    (a labelling's score, the truth's taken once per scan) is <phi(x_i, y), w>, and `factored_w_dot`
    is <w_i, w> with the block's dense row -- on blocks of one position too (no transitions)."""
    from structfw.oracles.chain import labelling_score
    from structfw.solvers._factored import block_grams, block_unary, factored_arrays, factored_w_dot, positions

    X, Y, model = chain(seed=3)
    svm = fit(model, X, Y, BCFW(cache=True), passes=3)
    st = svm.state_
    compiled = model.compiled_oracle(X, Y)
    pos = positions(compiled)
    fac = factored_arrays(compiled, st.factored, block_grams(pos[0], pos[1]))
    w, d, Xc = st.w, st.w.shape[0], np.vstack(X)
    rng = np.random.default_rng(0)
    for i in range(len(X)):
        U = block_unary(fac, i, w)
        for y in (Y[i], rng.integers(0, 3, len(Y[i]))):
            phi = model.joint_feature(X[i], y).toarray()
            assert labelling_score(U, w[3 * 5:], y) == pytest.approx(phi @ w, rel=1e-12, abs=1e-12)
        assert factored_w_dot(fac, i, U, w) == pytest.approx(st.factored.row(Xc, i, d) @ w, rel=1e-12, abs=1e-13)


def test_the_fused_loss_augmentation_is_the_copy_and_the_hamming_loss():
    """`loss_augmented_into` (the factored oracle's V = U + (1/L)[s != y_t] in one loop) against the
    copy and `add_hamming_loss` it replaced: the same values, on words of one and several positions."""
    from structfw.oracles.chain import add_hamming_loss, loss_augmented_into

    rng = np.random.default_rng(4)
    for L, S in ((1, 3), (5, 26), (9, 4)):
        U = rng.standard_normal((L, S))
        yt = rng.integers(0, S, L)
        ref = U.copy()
        add_hamming_loss(ref, yt)
        V = np.full((L, S), np.nan)
        loss_augmented_into(V, U, yt)
        np.testing.assert_allclose(V, ref, rtol=0, atol=0)
        assert np.all(V[np.arange(L), yt] == U[np.arange(L), yt])
