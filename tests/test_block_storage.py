"""How the engine stores its block parts: scaled dense rows w_i = c_i v_i, and the flat corner
pool (compaction in place, the active set's weighted score)."""
import numpy as np
import pytest

import structfw as sf
from structfw._linalg import SparseVector, sparse_dot_dense, sparse_dot_sparse, sparse_dot_sparse_scattered
from structfw.solvers import corners
from structfw.solvers._fastpass import fw_block_step
from structfw.solvers._kernels import block_step
from structfw.solvers.rows import SparseRows


def dense_block_step(w, v, c, a, i1, v1, b1, i2, v2, b2, dl, lam, gmax, gfixed, u, inv_c):
    """The block step on one dense row v (written in place); (gamma, slope, c')."""
    scales, rows = np.array([c]), v.reshape(1, -1)
    g, slope = block_step(w, (scales, rows), 0, a, (i1, v1, b1, sparse_dot_dense(i1, v1, w)),
                          (i2, v2, b2, sparse_dot_dense(i2, v2, w)), dl, (lam, gmax, gfixed), (u, inv_c),
                          np.empty(0))
    return g, slope, scales[0]


def scored_block_step(w, v, c, a, i1, v1, b1, s1w, i2, v2, b2, s2w, dl, lam, gmax, gfixed, u, inv_c, scratch):
    scales, rows = np.array([c]), v.reshape(1, -1)
    g, slope = block_step(w, (scales, rows), 0, a, (i1, v1, b1, s1w), (i2, v2, b2, s2w), dl, (lam, gmax, gfixed),
                          (u, inv_c), scratch)
    return g, slope, scales[0]


def sparse_block_step(w, v, c, a, i1, v1, b1, i2, v2, b2, dl, lam, gmax, gfixed, u, inv_c, pool=None):
    """The same step with v held as a sparse row of a pool; (gamma, slope, c', v' dense)."""
    rows = SparseRows(3, v.shape[0], pool=pool)
    rows.set_row(1, SparseVector.from_dense(v))
    rows.make_room(1, len(i1) + len(i2))
    scales = np.array([1.0, c, 1.0])
    g, slope = block_step(w, rows.arrays(scales), 1, a, (i1, v1, b1, sparse_dot_dense(i1, v1, w)),
                          (i2, v2, b2, sparse_dot_dense(i2, v2, w)), dl, (lam, gmax, gfixed), (u, inv_c),
                          np.empty(0))
    assert rows.nnz[0] == 0 and rows.nnz[2] == 0
    return g, slope, scales[1], rows.row(1).toarray()

_EI, _EV = np.empty(0, np.int64), np.empty(0)


def _sparse(rng, d, m):
    idx = np.sort(rng.choice(d, m, replace=False)).astype(np.int64)
    return idx, rng.normal(size=m)


def _reference_step(w, wi, a, s1, b1, s2, b2, dl, lam, gmax):
    """The line-search step along d = a w_i + b1 s1 + b2 s2 computed densely with numpy."""
    d = a * wi
    for (idx, val), b in ((s1, b1), (s2, b2)):
        np.add.at(d, idx, b * val)
    nrm = float(d @ d)
    slope = lam * float(w @ d) - dl
    gamma = min(max(-slope / (lam * nrm), 0.0), gmax) if nrm > 0 else (gmax if slope < 0 else 0.0)
    return gamma, w + gamma * d, wi + gamma * d


@pytest.mark.parametrize("a, b2, gmax", [(-1.0, 0.0, 1.0), (0.0, -0.3, 0.7), (1.0, 0.0, 4.0)])
@pytest.mark.parametrize("c", [1.0, 0.37, 2.5e-7])
def test_a_step_on_a_scaled_row_is_the_step_on_w_i(a, b2, gmax, c):
    """FW (a = -1), pairwise (a = 0) and away (a = +1) directions: w and c_i' v_i' after the
    step equal the dense numpy step on w_i = c_i v_i."""
    rng = np.random.default_rng(7)
    d, lam = 40, 0.3
    v = rng.normal(size=d)
    w = rng.normal(size=d)
    s1, s2 = _sparse(rng, d, 6), _sparse(rng, d, 5) if b2 else (_EI, _EV)
    b1 = 0.8
    # d_l puts the unclipped step at gmax / 2
    direction = a * c * v
    for (idx, val), b in ((s1, b1), (s2, b2)):
        np.add.at(direction, idx, b * val)
    dl = lam * float(w @ direction) + 0.5 * gmax * lam * float(direction @ direction)
    gamma_ref, w_ref, wi_ref = _reference_step(w, c * v, a, s1, b1, s2, b2, dl, lam, gmax)
    w2, v2 = w.copy(), v.copy()
    gamma, _, c2 = dense_block_step(w2, v2, c, a, *s1, b1, *s2, b2, dl, lam, gmax, -1.0, _EV, 0.0)
    assert gamma == pytest.approx(gamma_ref, rel=1e-10)
    assert gamma == pytest.approx(0.5 * gmax, rel=1e-9)
    np.testing.assert_allclose(w2, w_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c2 * v2, wi_ref, rtol=1e-10, atol=1e-12)
    # the row itself is written only at the corners' entries unless the scale was folded in
    if c2 != 1.0 or c == 1.0 and a == 0.0:
        touched = np.union1d(s1[0], s2[0])
        untouched = np.setdiff1d(np.arange(d), touched)
        np.testing.assert_array_equal(v2[untouched], v[untouched])


@pytest.mark.parametrize("a, b2, gmax", [(-1.0, 0.0, 1.0), (0.0, -0.3, 0.7), (1.0, 0.0, 4.0), (-1.0, 0.0, 1.0)])
@pytest.mark.parametrize("c", [1.0, 0.37, 2.5e-7])
@pytest.mark.parametrize("pool", [None, 4])
def test_a_step_on_a_sparse_row_is_the_step_on_a_dense_row(a, b2, gmax, c, pool):
    """Sparse rows (a pool of sorted entries) and dense rows give the same step, w and w_i;
    the row grows into new entries (a pool too small to start with is grown)."""
    rng = np.random.default_rng(11)
    d, lam = 60, 0.3
    v = np.zeros(d)
    support = rng.choice(d, 15, replace=False)
    v[support] = rng.normal(size=15)
    w = rng.normal(size=d)
    s1 = _sparse(rng, d, 9)
    s2 = _sparse(rng, d, 7) if b2 else (_EI, _EV)
    u = rng.normal(size=d)
    dl = 0.05
    wd, vd, ud = w.copy(), v.copy(), u.copy()
    gd, sd, cd = dense_block_step(wd, vd, c, a, *s1, 0.8, *s2, b2, dl, lam, gmax, -1.0, ud, 0.9)
    ws, us = w.copy(), u.copy()
    gs, ss, cs, vs = sparse_block_step(ws, v, c, a, *s1, 0.8, *s2, b2, dl, lam, gmax, -1.0, us, 0.9, pool=pool)
    assert gs == pytest.approx(gd, rel=1e-12, abs=1e-15) and ss == pytest.approx(sd, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(ws, wd, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(us, ud, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cs * vs, cd * vd, rtol=1e-12, atol=1e-14)


def test_a_sparse_row_that_fills_its_pool_grows_it():
    rows = SparseRows(4, 1000, pool=8)
    rng = np.random.default_rng(0)
    dense = np.zeros((4, 1000))
    for _ in range(30):
        i = int(rng.integers(4))
        idx = np.sort(rng.choice(1000, int(rng.integers(1, 20)), replace=False)).astype(np.int64)
        val = rng.normal(size=idx.size)
        rows.add(i, idx, val)
        dense[i, idx] += val
    for i in range(4):
        np.testing.assert_allclose(rows.row(i).toarray(), dense[i], rtol=1e-14)
        r = rows.row(i)
        assert np.all(np.diff(r.indices) > 0)


def test_adding_entries_the_row_has_updates_them_in_place():
    """A corner whose indices the row already holds (one forward merge) and one with new indices
    too (the merge from the back) give the dense sums, sorted and unique, with the row's
    count growing by the new indices only."""
    rng = np.random.default_rng(3)
    rows = SparseRows(2, 200, pool=4096)
    base_idx = np.sort(rng.choice(200, 40, replace=False)).astype(np.int64)
    rows.add(1, base_idx, rng.normal(size=40))
    dense = rows.row(1).toarray()
    sub = np.sort(rng.choice(base_idx, 15, replace=False)).astype(np.int64)
    val = rng.normal(size=15)
    rows.add(1, sub, val)
    dense[sub] += val
    assert rows.nnz[1] == 40
    np.testing.assert_array_equal(rows.row(1).toarray(), dense)
    fresh = np.setdiff1d(np.arange(200), base_idx)[:7]
    mixed = np.sort(np.r_[sub[:5], fresh]).astype(np.int64)
    val = rng.normal(size=mixed.size)
    rows.add(1, mixed, val)
    dense[mixed] += val
    assert rows.nnz[1] == 47 and np.all(np.diff(rows.row(1).indices) > 0)
    np.testing.assert_array_equal(rows.row(1).toarray(), dense)


def test_a_full_fw_step_replaces_the_row():
    """gamma = 1 (the predefined step at k = 0) sets w_i = w_s: the row is zeroed, c_i = 1."""
    rng = np.random.default_rng(1)
    d = 30
    v, w = rng.normal(size=d), rng.normal(size=d)
    idx, val = _sparse(rng, d, 4)
    inv_ln = 0.5
    gamma, _, c2 = fw_block_step(w, v, 0.3, (idx, val, inv_ln, val @ w[idx]), 0.1, (1.0, 1.0), (_EV, 0.0),
                                 np.zeros(d))
    assert gamma == 1.0 and c2 == 1.0
    expected = np.zeros(d)
    expected[idx] = inv_ln * val
    np.testing.assert_array_equal(v, expected)


def test_a_tiny_scale_is_folded_into_the_row():
    rng = np.random.default_rng(2)
    d = 20
    v, w = rng.normal(size=d), rng.normal(size=d)
    idx, val = _sparse(rng, d, 3)
    wi_before = 1e-6 * v
    gamma, _, c2 = fw_block_step(w, v, 1e-6, (idx, val, 1.0, val @ w[idx]), 0.0, (1.0, 1.0 - 1e-7), (_EV, 0.0),
                                 np.zeros(d))
    assert c2 == 1.0
    expected = (1.0 - gamma) * wi_before
    expected[idx] += gamma * val
    np.testing.assert_allclose(v, expected, rtol=1e-9, atol=1e-18)


@pytest.mark.parametrize("c", [1.0, 0.61])
def test_the_fw_kernel_is_the_fw_case_of_the_general_step(c):
    """The compiled plain pass and the Python parts must give the same iterates."""
    rng = np.random.default_rng(3)
    d = 50
    v, w = rng.normal(size=d), rng.normal(size=d)
    idx, val = _sparse(rng, d, 8)
    u1, u2 = rng.normal(size=d), None
    u2 = u1.copy()
    out = []
    for kernel in ("fw", "general"):
        w_, v_, u_ = w.copy(), v.copy(), (u1 if kernel == "fw" else u2)
        if kernel == "fw":
            pw = sparse_dot_dense(idx, val, w_)
            res = fw_block_step(w_, v_, c, (idx, val, 0.7, pw), 0.02, (0.4, -1.0), (u_, 0.9), np.zeros(d))
        else:
            g, slope, c2 = dense_block_step(w_, v_, c, -1.0, idx, val, 0.7, _EI, _EV, 0.0, 0.02, 0.4, 1.0, -1.0,
                                            u_, 0.9)
            res = (g, slope, c2)
        out.append((res, w_, v_, u_))
    # two compiled kernels: the same arithmetic, but each compiled on its own, so a CPU's FMA
    # contraction may round them differently; a different step would be off by far more
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12, atol=1e-14)
    for a, b in zip(out[0][1:], out[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_the_scattered_sparse_dot_is_the_merge():
    rng = np.random.default_rng(3)
    d = 300
    scratch = np.zeros(d)
    for _ in range(200):
        a = _sparse(rng, d, int(rng.integers(0, 60)))
        b = _sparse(rng, d, int(rng.integers(0, 60)))
        if rng.random() < 0.5 and len(a[0]):  # share some indices
            common = rng.choice(a[0], min(len(a[0]), 10), replace=False)
            idx = np.unique(np.r_[b[0], common]).astype(np.int64)
            b = idx, rng.normal(size=idx.size)
        merged = sparse_dot_sparse(*a, *b)
        assert sparse_dot_sparse_scattered(*a, *b, scratch) == pytest.approx(merged, rel=1e-12, abs=1e-13)
        assert not scratch.any()
        assert sparse_dot_sparse_scattered(*a, *b, np.empty(0)) == pytest.approx(merged, rel=1e-12, abs=1e-13)


def test_a_step_given_the_corners_scores_is_the_step_that_computes_them():
    rng = np.random.default_rng(4)
    d = 80
    for a in (-1.0, 0.0, 1.0):
        w = rng.normal(size=d)
        vi = rng.normal(size=d)
        s1, s2 = _sparse(rng, d, 12), _sparse(rng, d, 9)
        args = (0.7, 0.5, -0.4)
        out = []
        for scored in (False, True):
            w_, v_ = w.copy(), vi.copy()
            if scored:
                r = scored_block_step(w_, v_, 1.3, a, *s1, args[1], sparse_dot_dense(*s1, w), *s2, args[2],
                                      sparse_dot_dense(*s2, w), 0.02, 0.4, 1.0, -1.0, _EV, 0.0, np.zeros(d))
            else:
                r = dense_block_step(w_, v_, 1.3, a, *s1, args[1], *s2, args[2], 0.02, 0.4, 1.0, -1.0, _EV, 0.0)
            out.append((r, w_, v_))
        np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-12, atol=1e-14)


@pytest.fixture(scope="module")
def ocr30():
    X, Y = sf.datasets.load_ocr("train")
    return X[:30], Y[:30]


def test_the_state_reads_w_i_through_the_scales(ocr30):
    X, Y = ocr30
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=sf.solvers.BCFW(block_storage="dense"), lam=0.1,
                           max_passes=3, random_state=0).fit(X, Y)
    st = svm.state_
    assert st.wi_scaled and np.any(st.wi_scale != 1.0)
    wi = st.wi
    np.testing.assert_allclose(wi, st._wi * st.wi_scale[:, None])
    np.testing.assert_allclose(wi.sum(axis=0), st.w, atol=1e-12)
    for i in range(len(X)):
        assert st.block_w_dot(i, st.w) == pytest.approx(float(wi[i] @ st.w), rel=1e-12)
    folded = st.unscaled_blocks()
    np.testing.assert_array_equal(st.wi_scale, 1.0)
    assert not st.wi_scaled and st.wi is folded
    np.testing.assert_allclose(folded, wi, rtol=1e-15, atol=1e-18)


def test_a_state_file_with_bad_scales_is_refused(ocr30, tmp_path):
    from structfw.solvers.state_file import check_state

    X, Y = ocr30
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=sf.solvers.BCFW(block_storage="dense"), lam=0.1,
                           max_passes=2, random_state=0).fit(X, Y)
    st = svm.state_
    check_state(st)
    good = st.wi_scale.copy()
    for bad in (np.zeros(len(X)), np.full(len(X), np.nan), good[:-1]):
        st.wi_scale = bad
        with pytest.raises(ValueError, match="wi_scale"):
            check_state(st)
    st.wi_scale = good


def test_pairwise_passes_leave_the_rows_stale_and_reading_rebuilds_them(ocr30, tmp_path):
    """Compiled pairwise passes skip the writes into w_i's rows; w_i is then A alpha_[i], and any
    read (wi, scaled_blocks, unscaled_blocks) rebuilds the rows from the tracked weights."""
    from structfw.solvers.state_file import check_state

    X, Y = ocr30
    lam = 0.1
    solver = sf.solvers.BCFW(step="pairwise", block_storage="dense")
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=lam,
                           max_passes=3, random_state=0).fit(X, Y)
    st = svm.state_
    assert st.rows_stale
    # the flag and the stale rows travel through a state file unchanged
    loaded = sf.load(svm.save(tmp_path / "m", state=True)).state_
    assert loaded.rows_stale
    np.testing.assert_array_equal(loaded._wi, st._wi)
    dots = [st.block_w_dot(i, st.w) for i in range(len(X))]  # from the weights, rows untouched
    assert st.rows_stale
    wi = st.wi
    assert not st.rows_stale and not st.wi_scaled
    S = st.corners.arrays
    for i in range(len(X)):
        expect = np.zeros(st.d)
        for k in range(S[0][i]):
            idx, val = corners.cs_entries(S, i, k)
            np.add.at(expect, idx, S[3][i, k] * val / (lam * len(X)))
        np.testing.assert_allclose(wi[i], expect, rtol=1e-12, atol=1e-15)
        assert dots[i] == pytest.approx(float(wi[i] @ st.w), rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(wi.sum(axis=0), st.w, atol=1e-12)
    # the loaded state rebuilds the same rows, and continues the fit
    np.testing.assert_allclose(loaded.unscaled_blocks(), wi, rtol=1e-15, atol=0)
    # a state that cannot rebuild its rows is refused
    plain = sf.StructuredSVM(sf.models.ChainModel(26, 128), lam=lam, max_passes=1, random_state=0).fit(X, Y).state_
    plain.rows_stale = True
    with pytest.raises(ValueError, match="rows_stale"):
        check_state(plain)
    plain.rows_stale = 1
    with pytest.raises(ValueError, match="rows_stale.*(true or false|bool)"):
        check_state(plain)


def test_a_warm_start_with_fw_steps_rebuilds_the_stale_rows_first(ocr30):
    """FW steps read w_i and stop tracking the weights: the rows are rebuilt while they still are."""
    X, Y = ocr30
    solver = sf.solvers.BCFW(step="pairwise", block_storage="dense")
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=0.1,
                           max_passes=2, random_state=0, warm_start=True).fit(X, Y)
    assert svm.state_.rows_stale
    svm.set_params(solver__step="fw", solver__cache=True).fit(X, Y)
    st = svm.state_
    assert not st.rows_stale and not st.track_alpha
    np.testing.assert_allclose(st.wi.sum(axis=0), st.w, atol=1e-12)


# ------------------------------------------------------------------ the corner pool
def _store_with_garbage(rng, n=5, d=60):
    store = corners.CornerStore(n, d, capacity=4, pool=200)
    kept = {}
    for rnd in range(6):
        for i in range(n):
            idx, val = _sparse(rng, d, int(rng.integers(1, 9)))
            k = store.add(i, SparseVector(idx, val, d), float(rnd + i), alpha=0.1)
            if store.size[i] > 2:  # drop the oldest: its entries become garbage in the pool
                corners.cs_remove(store.arrays, i, 0)
    for i in range(n):
        kept[i] = [(store.psi(i, k).indices.copy(), store.psi(i, k).values.copy(), store.loss[i, k])
                   for k in range(store.size[i])]
    return store, kept


def test_compaction_in_place_keeps_every_corner():
    rng = np.random.default_rng(4)
    store, kept = _store_with_garbage(rng)
    P, live = store.pidx.shape[0], int(store.meta[1])
    assert store.meta[0] > live  # there is garbage to remove
    pool = store.pidx
    store._grow_pool(1)  # live + 1 <= P // 2: compacts without a new pool
    assert store.pidx is pool and store.pidx.shape[0] == P
    assert store.meta[0] == live
    for i, cs in kept.items():
        assert store.size[i] == len(cs)
        for k, (idx, val, L) in enumerate(cs):
            np.testing.assert_array_equal(store.psi(i, k).indices, idx)
            np.testing.assert_array_equal(store.psi(i, k).values, val)
            assert store.loss[i, k] == L
    # corners can still be added and found after the move
    idx, val, L = kept[0][0]
    assert store.add(0, SparseVector(idx, val, store.d), L) == 0


def test_the_active_sets_weighted_score_is_lam_n_w_i_dot_w(ocr30):
    """With tracked weights, sum_k alpha_k <psi_k, w> = lam n <w_i, w>; the away corner is cs_away's, and
    its score is <psi_a, w> to rounding (a step along it reuses it)."""
    X, Y = ocr30
    lam = 0.1
    solver = sf.solvers.BCFW(step="pairwise", block_storage="dense")
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=lam,
                           max_passes=3, random_state=0).fit(X, Y)
    st = svm.state_
    S = st.corners.arrays
    for i in range(len(X)):
        away, score, away_score = corners.cs_away_and_weighted_score(S, i, st.w)
        assert away == corners.cs_away(S, i, st.w)
        # the same dot product compiled inside different kernels: equal up to FMA contraction
        close = dict(rel=1e-12, abs=1e-13)
        assert away_score == pytest.approx(corners.cs_dot(S, i, away, st.w), **close)
        best, H, best_score = corners.cs_best(S, i, st.w)
        assert best_score == pytest.approx(corners.cs_dot(S, i, best, st.w), **close)
        assert H == pytest.approx(max(S[2][i, k] - corners.cs_dot(S, i, k, st.w) for k in range(S[0][i])), **close)
        scan = corners.cs_scan(S, i, st.w, True, True, corners.NO_LABELS)
        assert (scan[0], scan[3]) == (best, away)
        assert scan[1:3] + scan[4:] == pytest.approx((H, best_score, score, away_score), **close)
        assert score == pytest.approx(lam * len(X) * st.block_w_dot(i, st.w), rel=1e-9, abs=1e-12)


def test_a_state_file_keeps_only_the_used_part_of_the_corner_pool(ocr30, tmp_path):
    X, Y = ocr30
    solver = sf.solvers.BCFW(step="pairwise", block_storage="dense")
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=solver, lam=0.1,
                           max_passes=2, random_state=0).fit(X, Y)
    store = svm.state_.corners
    top = int(store.meta[0])
    loaded = sf.load(svm.save(tmp_path / "m", state=True)).state_.corners
    assert loaded.pidx.shape[0] == loaded.pval.shape[0] == top
    for i in range(len(X)):
        for a, b in zip(store[i].psi, loaded[i].psi):
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.values, b.values)


def test_sparse_block_states_resume_and_old_list_states_are_read(ocr30):
    """A sparse-row state survives the state file; a state saved with a list of sparse blocks
    (before sparse rows) is converted on reading, to the same w_i."""
    from structfw.solvers import state_file
    from structfw.solvers.rows import SparseRows

    X, Y = ocr30
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), solver=sf.solvers.BCFW(block_storage="sparse"),
                           max_passes=2, check_every=10, random_state=0).fit(X, Y)
    st = svm.state_
    assert isinstance(st._wi, SparseRows)
    tree, arrays = state_file.encode_state(st)
    back = state_file.decode_state(tree, arrays, model=svm.model)
    np.testing.assert_allclose(np.array([v.toarray() for v in back.wi]), np.array([v.toarray() for v in st.wi]))
    # the old layout: a list of SparseVector with no scales
    blocks = st.wi
    st._wi, st.wi_scale, st.wi_scaled = blocks, None, False
    tree, arrays = state_file.encode_state(st)
    old = state_file.decode_state(tree, arrays, model=svm.model)
    assert isinstance(old._wi, SparseRows) and old.wi_scale.shape == (30,)
    np.testing.assert_allclose(np.array([v.toarray() for v in old.wi]), np.array([v.toarray() for v in blocks]))


def test_the_sparse_pool_starts_at_the_inputs_features_and_a_small_one_grows_to_the_same_fit(monkeypatch):
    """With sparse (CSR) inputs the rows' pool starts with room for as many entries as the inputs
    store (no growth in the first passes of a text task); started at its floor instead, the pool
    grows inside the compiled passes and the fit takes the same steps."""
    from structfw_bench.synthetic import make_chain_problem
    from structfw.solvers import block_state

    X, Y = make_chain_problem(n=40, sparse=True, seed=3, n_test=0)[:2]

    def fit():
        return sf.StructuredSVM(sf.models.ChainModel(10, 200), solver=sf.solvers.BCFW(block_storage="sparse"),
                                lam=0.01, max_passes=3, check_every=10, random_state=0).fit(X, Y)

    big = fit()
    stored = sum(x.nnz for x in X)
    assert big.state_._wi.idx.shape[0] >= stored > 64 * 40
    monkeypatch.setattr(block_state, "_pool_hint", lambda problem: 16)
    small = fit()
    assert small.state_._wi.idx.shape[0] > 16  # grown
    np.testing.assert_allclose(small.coef_, big.coef_, rtol=1e-12, atol=1e-14)
