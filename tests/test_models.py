import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from structfw._linalg import SparseVector
from structfw.models import ChainModel
from structfw.oracles import loss_augmented_viterbi, viterbi


def dense(v):
    return v.toarray() if isinstance(v, SparseVector) else np.asarray(v, float)


def check_sparse_vector(v, d):
    assert isinstance(v, SparseVector)
    assert v.dim == d
    assert v.indices.dtype == np.int64 and v.values.dtype == np.float64
    assert np.all(np.diff(v.indices) > 0)
    assert np.all(v.values != 0)


def chain_phi_direct(x, y, S, F):
    phi = np.zeros(S * F + S * S)
    for l, s in enumerate(y):
        phi[s * F:(s + 1) * F] += x[l]
    for a, b in zip(y[:-1], y[1:]):
        phi[S * F + a * S + b] += 1
    return phi


# ---------------------------------------------------------------- chain
def brute_chain(model, x, y_true, w, augment):
    S = model.n_states
    best, best_y = -np.inf, None
    for y in itertools.product(range(S), repeat=x.shape[0]):
        y = np.array(y)
        v = w @ chain_phi_direct(x, y, S, model.n_features)
        if augment:
            v += np.mean(y != y_true)
        if v > best:
            best, best_y = v, y
    return best, best_y


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5])
def test_chain_oracles_vs_brute_force(L):
    rng = np.random.default_rng(L)
    S, F = 3, 4
    m = ChainModel(S, F)
    for _ in range(8):
        x = rng.standard_normal((L, F))
        y_true = rng.integers(0, S, L)
        w = rng.standard_normal(m.size_joint_feature)
        for augment in (True, False):
            best, _ = brute_chain(m, x, y_true, w, augment)
            y = m.loss_augmented_decode(x, y_true, w) if augment else m.decode(x, w)
            assert y.shape == (L,) and y.dtype == np.int64
            val = w @ chain_phi_direct(x, y, S, F) + (m.loss(y_true, y) if augment else 0)
            assert val == pytest.approx(best, abs=1e-10)


@pytest.mark.parametrize("S", [1, 2, 3, 4, 5])
def test_chain_unary_scores_two_states_per_sweep(S):
    """The unary kernel scores states in pairs (an odd S's last one twice): every S, every
    word length, with and without the loss augmentation, against x W^T."""
    from structfw.oracles import chain_unary_dense

    rng = np.random.default_rng(S)
    F = 7
    for L in range(0, 4):
        x = rng.standard_normal((L, F))
        w = rng.standard_normal(S * F + S * S)
        y_true = rng.integers(0, S, L)
        expected = x @ w[:S * F].reshape(S, F).T
        np.testing.assert_allclose(chain_unary_dense(x, w, S, F, y_true, False), expected, atol=1e-12)
        if L:
            expected += (np.arange(S)[None, :] != y_true[:, None]) / L
        np.testing.assert_allclose(chain_unary_dense(x, w, S, F, y_true, True), expected, atol=1e-12)


def test_viterbi_kernels_vs_brute_force():
    rng = np.random.default_rng(0)
    for L in range(1, 6):
        U = rng.standard_normal((L, 3))
        P = rng.standard_normal((3, 3))
        y_true = rng.integers(0, 3, L)
        for aug in (False, True):
            best = -np.inf
            for y in itertools.product(range(3), repeat=L):
                v = sum(U[l, y[l]] for l in range(L)) + sum(P[y[l], y[l + 1]] for l in range(L - 1))
                if aug:
                    v += np.mean(np.array(y) != y_true)
                best = max(best, v)
            y, score = loss_augmented_viterbi(U, P, y_true) if aug else viterbi(U, P)
            assert score == pytest.approx(best)


@pytest.mark.parametrize("S", [1, 2, 4, 5, 7, 9])
def test_viterbi_returns_a_maximiser_under_ties(S):
    """Half-integer scores make ties common; S from 1 to 9 runs the forward pass's four-state
    sweeps and their remainder.  The score is the brute-force maximum and the labelling attains it."""
    rng = np.random.default_rng(S)
    for L in range(1, 5):
        for _ in range(4):
            U = rng.integers(-2, 3, (L, S)) * 0.5
            P = rng.integers(-2, 3, (S, S)) * 0.5

            def value(y):
                return sum(U[l, y[l]] for l in range(L)) + sum(P[y[l], y[l + 1]] for l in range(L - 1))
            best = max(value(y) for y in itertools.product(range(S), repeat=L))
            y, score = viterbi(U, P)
            assert score == best
            assert value(tuple(y)) == best


def test_chain_joint_feature_and_psi():
    rng = np.random.default_rng(1)
    S, F = 4, 6
    m = ChainModel(S, F)
    assert m.size_joint_feature == S * F + S * S
    for L in (1, 2, 5, 9, 40):  # 40: many repeated and cancelling transitions
        x = rng.standard_normal((L, F))
        x[:, 0] = 0.0  # zeros must be dropped
        for _ in range(5):
            a = rng.integers(0, S, L)
            b = a.copy()
            k = rng.integers(0, L + 1)
            b[rng.choice(L, k, replace=False)] = rng.integers(0, S, k)
            phi = m.joint_feature(x, a)
            check_sparse_vector(phi, m.size_joint_feature)
            np.testing.assert_allclose(dense(phi), chain_phi_direct(x, a, S, F))
            p = m.psi(x, a, b)
            check_sparse_vector(p, m.size_joint_feature)
            np.testing.assert_allclose(
                dense(p), chain_phi_direct(x, a, S, F) - chain_phi_direct(x, b, S, F), atol=1e-12
            )
    p = m.psi(x, a, a)
    assert p.nnz == 0


def test_chain_sparse_features_match_dense():
    rng = np.random.default_rng(2)
    S, F = 5, 30
    m = ChainModel(S, F)
    for L in (1, 3, 7):
        xd = rng.standard_normal((L, F)) * (rng.random((L, F)) < 0.3)
        xs = sp.csr_matrix(xd)
        (xd_c,), (xs_c,) = m.check_X([xd]), m.check_X([xs])
        assert sp.issparse(xs_c)
        y_true = rng.integers(0, S, L)
        w = rng.standard_normal(m.size_joint_feature)
        np.testing.assert_array_equal(
            m.loss_augmented_decode(xd_c, y_true, w), m.loss_augmented_decode(xs_c, y_true, w)
        )
        np.testing.assert_array_equal(m.decode(xd_c, w), m.decode(xs_c, w))
        y = rng.integers(0, S, L)
        for u, v in [(m.psi(xd_c, y_true, y), m.psi(xs_c, y_true, y)),
                     (m.joint_feature(xd_c, y), m.joint_feature(xs_c, y))]:
            check_sparse_vector(v, m.size_joint_feature)
            np.testing.assert_array_equal(u.indices, v.indices)
            np.testing.assert_allclose(u.values, v.values)


def test_chain_keeps_canonical_csr_and_canonicalises_the_rest():
    """CSR input already in the kernels' form (float64, int64 index arrays, sorted, no duplicates)
    is used as it is; anything else gets a canonical copy and the user's matrix is left alone."""
    from structfw._linalg import as_chain_csr, is_chain_csr

    m = ChainModel(3, 5)
    # unsorted columns and a duplicate (3, twice in row 0), int32 indices
    data, indices, indptr = np.array([1.0, 2.0, 0.5, 4.0]), np.array([3, 1, 3, 0], np.int32), np.array([0, 3, 4])
    raw = sp.csr_matrix((data.copy(), indices.copy(), indptr.copy()), shape=(2, 5))
    (checked,) = m.check_X([raw])
    assert checked is not raw and is_chain_csr(checked)
    np.testing.assert_array_equal(checked.toarray(), raw.toarray())
    np.testing.assert_array_equal(raw.indices, indices)  # the input was not sorted in place
    built = as_chain_csr(data, indices, indptr, (2, 5))
    assert is_chain_csr(built) and built.indices.dtype == np.int64
    np.testing.assert_array_equal(built.toarray(), raw.toarray())
    (kept,) = m.check_X([built])
    assert kept is built
    # the fast path still checks what it must
    bad = as_chain_csr(np.array([np.nan]), np.array([1]), np.array([0, 1]), (1, 5))
    with pytest.raises(ValueError, match="X\\[0\\]"):
        m.check_X([bad])
    with pytest.raises(ValueError, match="features"):
        m.check_X([as_chain_csr(np.ones(1), np.array([1]), np.array([0, 1]), (1, 6))])
    assert not is_chain_csr(sp.csr_matrix((data, indices, indptr), shape=(2, 5)))


def test_chain_large_sparse_features_stay_small():
    import tracemalloc

    rng = np.random.default_rng(3)
    S, F = 9, 200_000
    m = ChainModel(S, F)
    X = []
    for _ in range(20):
        L = int(rng.integers(5, 30))
        nnz = 15
        rows = np.repeat(np.arange(L), nnz)
        cols = rng.integers(0, F, L * nnz)
        X.append(sp.csr_matrix((np.ones(L * nnz), (rows, cols)), shape=(L, F)))
    Y = [rng.integers(0, S, x.shape[0]) for x in X]
    X, Y = m.check_data(X, Y)
    w = rng.standard_normal(m.size_joint_feature) * 0.01
    m.loss_augmented_decode(X[0], Y[0], w)  # compile
    m.psi(X[0], Y[0], Y[1][: X[0].shape[0]] if len(Y[1]) >= X[0].shape[0] else Y[0])
    tracemalloc.start()
    for x, y in zip(X, Y):
        ys = m.loss_augmented_decode(x, y, w)
        p = m.psi(x, y, ys)
        assert p.nnz <= 2 * x.nnz + 2 * x.shape[0]
        m.decode(x, w)
        m.joint_feature(x, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5_000_000  # a dense (L, F) copy would be > 8 MB


def test_chain_loss():
    m = ChainModel(3, 2)
    assert m.loss(np.array([0, 1, 2, 0]), np.array([0, 2, 2, 1])) == pytest.approx(0.5)
    assert m.loss(np.array([1]), np.array([1])) == 0.0


def test_chain_ocr_smoke():
    from structfw.datasets import load_ocr

    X, Y = load_ocr("test")
    m = ChainModel(26, 128)
    X, Y = m.check_data(X[:50], Y[:50])
    w = np.zeros(m.size_joint_feature)
    for x, y in zip(X, Y):
        ys = m.loss_augmented_decode(x, y, w)
        m.check_labelling(x, ys)
        # with w = 0 the loss-augmented maximiser gets every position wrong
        assert m.loss(y, ys) == 1.0


# ------------------------------------------------------------- validation
def test_chain_constructor_validation():
    with pytest.raises(ValueError, match="n_states"):
        ChainModel(1, 3)
    with pytest.raises(ValueError, match="n_states"):
        ChainModel(2.5, 3)
    with pytest.raises(ValueError, match="n_features"):
        ChainModel(3, 0)
    assert ChainModel(3, 4).get_config() == {"n_states": 3, "n_features": 4}


def test_chain_input_validation():
    m = ChainModel(3, 4)
    good = [np.zeros((2, 4)), np.ones((3, 4))]
    with pytest.raises(ValueError, match=r"X\[1\] has 3 features, expected 4"):
        m.check_X([np.zeros((2, 4)), np.zeros((2, 3))])
    with pytest.raises(ValueError, match=r"X\[0\].*NaN"):
        m.check_X([np.array([[np.nan, 0, 0, 0]])])
    with pytest.raises(ValueError, match=r"X\[0\].*NaN or inf"):
        m.check_X([np.array([[np.inf, 0, 0, 0]])])
    with pytest.raises(ValueError, match=r"X\[0\].*NaN"):
        m.check_X([sp.csr_matrix(np.array([[np.nan, 0, 0, 0]]))])
    with pytest.raises(ValueError, match=r"X\[0\] has 5 features"):
        m.check_X([sp.csr_matrix((2, 5))])
    with pytest.raises(ValueError, match=r"X\[0\] must be 2-D"):
        m.check_X([np.zeros(4)])
    with pytest.raises(ValueError, match=r"X\[0\]"):
        m.check_X([np.zeros((0, 4))])
    with pytest.raises(ValueError, match="X"):
        m.check_X(None)
    with pytest.raises(ValueError, match=r"Y\[1\] has label 3 outside 0..2"):
        m.check_data(good, [np.zeros(2, int), np.array([0, 3, 1])])
    with pytest.raises(ValueError, match=r"Y\[0\] has label -1"):
        m.check_data(good, [np.array([0, -1]), np.zeros(3, int)])
    with pytest.raises(ValueError, match=r"Y\[1\] has shape \(2,\), expected \(3,\)"):
        m.check_data(good, [np.zeros(2, int), np.zeros(2, int)])
    with pytest.raises(ValueError, match=r"Y\[0\].*integer"):
        m.check_data(good, [np.array([0.5, 1.0]), np.zeros(3, int)])
    with pytest.raises(ValueError, match="same length"):
        m.check_data(good, [np.zeros(2, int)])
    X, Y = m.check_data(good, [np.array([0.0, 1.0]), [2, 1, 0]])
    assert Y[0].dtype == np.int64 and Y[1].tolist() == [2, 1, 0]
    with pytest.raises(ValueError, match="labelling"):
        m.check_labelling(X[0], np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="labelling"):
        m.check_labelling(X[0], np.array([0, 5]))


# ----------------------------------------------------------- multiclass
def test_multiclass_oracle_vs_enumeration():
    from structfw.models import MulticlassModel

    rng = np.random.default_rng(4)
    K, F = 5, 7
    m = MulticlassModel(K, F)
    assert m.size_joint_feature == K * F
    X = m.check_X(rng.standard_normal((30, F)))
    for x in X:
        y_true = int(rng.integers(0, K))
        w = rng.standard_normal(m.size_joint_feature)
        phis = [np.zeros(K * F) for _ in range(K)]
        for k in range(K):
            phis[k][k * F:(k + 1) * F] = x
            np.testing.assert_allclose(dense(m.joint_feature(x, k)), phis[k])
        vals = [w @ phis[k] + (k != y_true) for k in range(K)]
        y = m.loss_augmented_decode(x, y_true, w)
        assert vals[y] == pytest.approx(max(vals))
        assert m.decode(x, w) == int(np.argmax([w @ p for p in phis]))
        for k in range(K):
            p = m.psi(x, y_true, k)
            check_sparse_vector(p, m.size_joint_feature)
            np.testing.assert_allclose(dense(p), phis[y_true] - phis[k])
            assert m.loss(y_true, k) == float(k != y_true)


def test_multiclass_validation():
    from structfw.models import MulticlassModel

    with pytest.raises(ValueError, match="n_classes"):
        MulticlassModel(1, 3)
    with pytest.raises(ValueError, match="n_features"):
        MulticlassModel(3, -2)
    m = MulticlassModel(3, 4)
    X, Y = m.check_data(np.ones((3, 4)), np.array([0, 2, 1]))
    assert len(X) == 3 and Y == [0, 2, 1] and X[1].flags.c_contiguous
    with pytest.raises(ValueError, match="X has 5 features, expected 4"):
        m.check_X(np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"X\[1\] has 3 features, expected 4"):
        m.check_X([np.ones(4), np.ones(3)])
    with pytest.raises(ValueError, match="X.*NaN"):
        m.check_X(np.full((2, 4), np.nan))
    with pytest.raises(ValueError, match=r"X\[0\].*NaN"):
        m.check_X([np.array([0, np.inf, 0, 0])])
    with pytest.raises(ValueError, match="X must be a 2-D"):
        m.check_X(np.ones((2, 4, 1)))
    with pytest.raises(ValueError, match=r"Y\[2\] has label 3 outside 0..2"):
        m.check_data(np.ones((3, 4)), [0, 1, 3])
    with pytest.raises(ValueError, match=r"Y\[0\].*integer"):
        m.check_data(np.ones((3, 4)), [0.5, 1, 2])
    with pytest.raises(ValueError, match="labelling"):
        m.check_labelling(X[0], -1)


# ----------------------------------------------------------------- grid
def grid_phi_direct(m, x, y):
    S, F = m.n_states, m.n_features
    phi = np.zeros(m.size_joint_feature)
    h, wd = y.shape
    offH = S * F
    offV = S * F + (S * S if m.directional else 0)
    for i in range(h):
        for j in range(wd):
            phi[y[i, j] * F:(y[i, j] + 1) * F] += x[i, j]
            if j + 1 < wd:
                phi[offH + y[i, j] * S + y[i, j + 1]] += 1
            if i + 1 < h:
                phi[offV + y[i, j] * S + y[i + 1, j]] += 1
    return phi


@pytest.mark.parametrize("directional", [True, False])
def test_grid_joint_feature_and_psi(directional):
    from structfw.models import GridModel

    rng = np.random.default_rng(5)
    S, F = 3, 4
    m = GridModel(S, F, directional=directional)
    assert m.size_joint_feature == S * F + (2 if directional else 1) * S * S
    for shape in [(1, 1), (2, 3), (4, 4)]:
        x = rng.standard_normal(shape + (F,))
        a = rng.integers(0, S, shape)
        b = a.copy()
        b.ravel()[0] = (b.ravel()[0] + 1) % S
        c = rng.integers(0, S, shape)
        phi = m.joint_feature(x, a)
        check_sparse_vector(phi, m.size_joint_feature)
        np.testing.assert_allclose(dense(phi), grid_phi_direct(m, x, a))
        for yy in (a, b, c):
            p = m.psi(x, a, yy)
            check_sparse_vector(p, m.size_joint_feature)
            np.testing.assert_allclose(
                dense(p), grid_phi_direct(m, x, a) - grid_phi_direct(m, x, yy), atol=1e-12
            )
        w = rng.standard_normal(m.size_joint_feature)
        assert m.energy(x, c, w) == pytest.approx(w @ grid_phi_direct(m, x, c))


def test_grid_oracle_vs_brute_force_2x2():
    from structfw.models import GridModel

    rng = np.random.default_rng(6)
    S, F = 3, 2
    m = GridModel(S, F)
    assert m.approximate_oracle
    exact = 0
    trials = 30
    for _ in range(trials):
        x = rng.standard_normal((2, 2, F))
        y_true = rng.integers(0, S, (2, 2))
        w = rng.standard_normal(m.size_joint_feature)
        vals = {}
        for lab in itertools.product(range(S), repeat=4):
            y = np.array(lab).reshape(2, 2)
            vals[lab] = w @ grid_phi_direct(m, x, y) + m.loss(y_true, y)
        best = max(vals.values())
        y = m.loss_augmented_decode(x, y_true, w)
        v = vals[tuple(y.ravel())]
        assert v >= vals[tuple(y_true.ravel())] - 1e-12
        exact += v >= best - 1e-10
        # the energy helper agrees with the direct computation
        assert m.energy(x, y, w, y_true) == pytest.approx(v)
        # plain decoding returns a labelling of the right shape
        yd = m.decode(x, w)
        assert yd.shape == (2, 2) and yd.dtype == np.int64
    assert exact >= 0.9 * trials


def test_grid_oracle_never_worse_than_ground_truth_snakes():
    from structfw.datasets import load_snakes, snakes_one_hot
    from structfw.models import GridModel

    X, Y = load_snakes("test")
    X = snakes_one_hot(X[:30])
    m = GridModel(11, X[0].shape[2])
    X, Y = m.check_data(X, Y[:30])
    rng = np.random.default_rng(7)
    for scale in (0.0, 0.1, 10.0):
        w = rng.standard_normal(m.size_joint_feature) * scale
        for x, y in zip(X, Y):
            ys = m.loss_augmented_decode(x, y, w)
            m.check_labelling(x, ys)
            # H_i(y*) = L_i(y*) - <w, psi_i(y*)> >= H_i(y_i) = 0
            H = m.loss(y, ys) - dense(m.psi(x, y, ys)) @ w
            assert H >= -1e-10


def test_grid_validation():
    from structfw.models import GridModel

    with pytest.raises(ValueError, match="n_states"):
        GridModel(1, 3)
    with pytest.raises(ValueError, match="n_features"):
        GridModel(3, 0)
    with pytest.raises(ValueError, match="damping"):
        GridModel(3, 2, damping=1.5)
    with pytest.raises(ValueError, match="directional"):
        GridModel(3, 2, directional="yes")
    m = GridModel(3, 2)
    assert GridModel(**m.get_config()).get_config() == m.get_config()
    good = [np.zeros((2, 3, 2))]
    with pytest.raises(ValueError, match=r"X\[0\] has 3 features, expected 2"):
        m.check_X([np.zeros((2, 3, 3))])
    with pytest.raises(ValueError, match=r"X\[0\] must be 3-D"):
        m.check_X([np.zeros((2, 3))])
    with pytest.raises(ValueError, match=r"X\[0\].*NaN"):
        m.check_X([np.full((2, 2, 2), np.nan)])
    with pytest.raises(ValueError, match=r"Y\[0\] has shape \(3, 2\), expected \(2, 3\)"):
        m.check_data(good, [np.zeros((3, 2), int)])
    with pytest.raises(ValueError, match=r"Y\[0\] has label 3"):
        m.check_data(good, [np.full((2, 3), 3)])
    with pytest.raises(ValueError, match="labelling"):
        m.check_labelling(good[0], np.zeros(6, int))


def test_multiclass_sparse_rows_match_dense_rows():
    """A scipy.sparse X stays sparse (SparseVector rows) and gives the dense rows' oracle, psi,
    scores and fit (to rounding: the sparse and dense dot products sum in different orders)."""
    import scipy.sparse as sp

    import structfw as sf
    from structfw._linalg import SparseVector

    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 80)
    X = rng.normal(size=(80, 6)) + 2 * np.eye(3, 6)[y]
    X[np.abs(X) < 0.5] = 0.0
    model = sf.models.MulticlassModel(3, 6)
    rows = model.check_X(sp.csr_matrix(X))
    assert all(isinstance(r, SparseVector) for r in rows)
    w = rng.normal(size=18)
    for i in range(20):
        for yt in (int(y[i]), -1):
            assert model._oracle(rows[i], w, yt, yt >= 0) == model._oracle(X[i], w, yt, yt >= 0)
        np.testing.assert_array_equal(model.psi(rows[i], y[i], 2).toarray(), model.psi(X[i], y[i], 2).toarray())
        np.testing.assert_allclose(model.scores(rows[i], w), model.scores(X[i], w))
    a = sf.StructuredSVM(model, lam=0.01, max_passes=4, random_state=0).fit(sp.csr_matrix(X), y)
    b = sf.StructuredSVM(model, lam=0.01, max_passes=4, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.predict(sp.csr_matrix(X)), b.predict(X))
    with pytest.raises(ValueError, match="features"):
        model.check_X(sp.csr_matrix(np.ones((2, 5))))
    with pytest.raises(ValueError, match="increasing"):
        model.check_X([SparseVector(np.array([3, 1]), np.array([1.0, 2.0]), 6)])
