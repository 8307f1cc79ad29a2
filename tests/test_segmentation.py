"""Graph-cut and Potts models, the max-flow backends, alpha-expansion and the
segmentation data generators (issue 7, model/data half)."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import structfw as sf
from structfw._linalg import SparseVector
from structfw.models import GraphCutModel, PottsModel
from structfw.models.graphcut import GraphInput
from structfw.oracles.maxflow import (
    available_backends,
    binary_energy,
    min_cut,
    min_cut_directed,
)
from structfw.oracles.potts import alpha_expansion, expansion_move, potts_score
from toy import corners_primal, primal_qp_optimum


# ------------------------------------------------------------------ helpers
def random_graph(rng, V, p=0.5):
    pairs = [(a, b) for a in range(V) for b in range(a + 1, V) if rng.random() < p]
    return np.array(pairs, np.int64).reshape(-1, 2)


def random_input(rng, V, F, Fe, sparse=False, p=0.5):
    nodes = rng.standard_normal((V, F))
    if sparse:
        nodes[rng.random((V, F)) < 0.6] = 0.0
        nodes = sp.csr_matrix(nodes)
    edges = random_graph(rng, V, p)
    ef = rng.exponential(size=(edges.shape[0], Fe))
    return nodes, edges, ef


def dense_phi(model, x, y):
    return model.joint_feature(x, y).toarray()


def brute_force(model, x, w, y_true=None):
    """max over all K^V labellings of Delta(y_true, y) + <w, phi(x, y)> (- C #cut)."""
    V = np.shape(x[0])[0]
    best, arg = -np.inf, None
    edges = np.asarray(x[1]).reshape(-1, 2)
    for y in itertools.product(range(model.n_states), repeat=V):
        y = np.array(y, np.int64)
        s = float(dense_phi(model, x, y) @ w)
        s -= model.potts_constant * np.count_nonzero(y[edges[:, 0]] != y[edges[:, 1]])
        if y_true is not None:
            s += model.loss(y_true, y)
        if s > best + 1e-12:
            best, arg = s, y
    return best, arg


def random_w(rng, model, scale=1.0):
    w = scale * rng.standard_normal(model.size_joint_feature)
    w[model.nonnegative_indices] = np.abs(w[model.nonnegative_indices])
    return w


# ------------------------------------------------------------------ max flow
@pytest.mark.parametrize("directed", [False, True])
def test_min_cut_matches_brute_force(directed):
    rng = np.random.default_rng(0)
    for _ in range(60):
        V = int(rng.integers(1, 9))
        edges = random_graph(rng, V)
        c0, c1 = rng.standard_normal(V), rng.standard_normal(V)
        a = rng.exponential(size=len(edges)) * (rng.random(len(edges)) < 0.8)
        b = rng.exponential(size=len(edges)) if directed else a
        best = min(binary_energy(c0, c1, edges[:, 0].copy(), edges[:, 1].copy(), a, b, np.array(y))
                   for y in itertools.product([0, 1], repeat=V))
        for backend in available_backends():
            y, e = min_cut_directed(c0, c1, edges, a, b, backend=backend)
            assert set(np.unique(y)) <= {0, 1}
            assert e == pytest.approx(best, abs=1e-8), backend


def test_backends_agree_on_grid():
    from structfw_bench.maxflow import grid_instance

    c0, c1, edges, wts = grid_instance(40, 50, seed=3)
    energies = {b: min_cut(c0, c1, edges, wts, backend=b)[1] for b in available_backends()}
    ref = energies["numba"]
    for b, e in energies.items():
        # the integer backends round the capacities (scipy: int32)
        assert e == pytest.approx(ref, rel=1e-7), (b, energies)


def test_min_cut_rejects_bad_input():
    with pytest.raises(ValueError, match="backend"):
        min_cut(np.zeros(2), np.zeros(2), np.array([[0, 1]]), np.ones(1), backend="nope")
    with pytest.raises(ValueError, match="non-negative"):
        min_cut(np.zeros(2), np.zeros(2), np.array([[0, 1]]), -np.ones(1))


def test_min_cut_degenerate_graphs():
    y, e = min_cut(np.array([1.0, -1.0]), np.array([0.0, 0.0]), np.zeros((0, 2), np.int64), np.zeros(0))
    assert list(y) == [1, 0] and e == -1.0
    y, e = min_cut(np.zeros(3), np.zeros(3), np.array([[0, 1], [1, 2]]), np.ones(2))
    assert e == 0.0 and len(set(y)) == 1


# ------------------------------------------------------------------ graph-cut model
@pytest.mark.parametrize("sparse", [False, True])
def test_graphcut_oracles_match_brute_force(sparse):
    rng = np.random.default_rng(1)
    model = GraphCutModel(n_features=3, n_edge_features=2)
    for trial in range(25):
        V = int(rng.integers(1, 9))
        x = model.check_X([random_input(rng, V, 3, 2, sparse=sparse)])[0]
        y_true = rng.integers(0, 2, V)
        w = random_w(rng, model, scale=0.5 if trial % 2 else 2.0)
        best, _ = brute_force(model, x, w, y_true)
        y = model.loss_augmented_decode(x, y_true, w)
        assert model.score_labelling(x, y, w, y_true) == pytest.approx(best, abs=1e-9)
        best, _ = brute_force(model, x, w)
        y = model.decode(x, w)
        assert model.score_labelling(x, y, w) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("backend", available_backends())
def test_graphcut_backends_reach_the_same_score(backend):
    rng = np.random.default_rng(2)
    ref = GraphCutModel(4, 2)
    model = GraphCutModel(4, 2, backend=backend)
    for _ in range(5):
        x = ref.check_X([random_input(rng, 60, 4, 2, p=0.1)])[0]
        y_true = rng.integers(0, 2, 60)
        w = random_w(rng, ref)
        s_ref = ref.score_labelling(x, ref.loss_augmented_decode(x, y_true, w), w, y_true)
        s = ref.score_labelling(x, model.loss_augmented_decode(x, y_true, w), w, y_true)
        assert s == pytest.approx(s_ref, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("K", [2, 3])
def test_joint_feature_and_psi(sparse, K):
    rng = np.random.default_rng(3)
    F, Fe, V = 4, 3, 7
    model = PottsModel(K, F, Fe) if K > 2 else GraphCutModel(F, Fe)
    raw = random_input(rng, V, F, Fe, sparse=sparse)
    x = model.check_X([raw])[0]
    y_true, y = rng.integers(0, K, V), rng.integers(0, K, V)
    # phi by its definition
    nodes = raw[0].toarray() if sparse else raw[0]
    edges, ef = raw[1], raw[2]
    phi = np.zeros(model.size_joint_feature)
    for v in range(V):
        phi[y[v] * F:(y[v] + 1) * F] += nodes[v]
    cut = y[edges[:, 0]] != y[edges[:, 1]]
    phi[K * F:] = -ef[cut].sum(0)
    got = model.joint_feature(x, y)
    assert isinstance(got, SparseVector)
    assert np.all(np.diff(got.indices) > 0)
    np.testing.assert_allclose(got.toarray(), phi, atol=1e-12)
    # the raw tuple gives the same as the validated input
    np.testing.assert_allclose(model.joint_feature(raw, y).toarray(), phi, atol=1e-12)
    psi = model.psi(x, y_true, y)
    assert isinstance(psi, SparseVector)
    np.testing.assert_allclose(psi.toarray(), dense_phi(model, x, y_true) - phi, atol=1e-12)
    assert model.psi(x, y_true, y_true).nnz == 0
    # sparse and dense node features give the same corners
    if sparse:
        xd = model.check_X([(nodes, edges, ef)])[0]
        np.testing.assert_allclose(model.psi(xd, y_true, y).toarray(), psi.toarray(), atol=1e-12)
    w = random_w(rng, model)
    assert model.score_labelling(x, y, w) == pytest.approx(phi @ w)


def test_loss_and_label_key():
    model = GraphCutModel(2, 1)
    a, b = np.array([0, 1, 1, 0]), np.array([0, 0, 1, 1])
    assert model.loss(a, a) == 0.0 and model.loss(a, b) == 0.5
    assert model.label_key(a) == model.label_key(a.astype(np.int32))
    assert model.label_key(a) != model.label_key(b)
    np.testing.assert_array_equal(model.nonnegative_indices, [4])


def test_negative_edge_weights_clip_or_raise():
    rng = np.random.default_rng(4)
    clip = GraphCutModel(3, 2)
    strict = GraphCutModel(3, 2, negative_weights="raise")
    x = clip.check_X([random_input(rng, 6, 3, 2)])[0]
    w = random_w(rng, clip)
    w[clip.edge_offset + 1] = -0.7
    with pytest.raises(ValueError, match=r"w\[7\].*submodular"):
        strict.decode(x, w)
    # clip decodes with Pi(w): brute force at the projected w
    wp = w.copy()
    wp[clip.nonnegative_indices] = np.maximum(wp[clip.nonnegative_indices], 0)
    best, _ = brute_force(clip, x, wp)
    assert float(dense_phi(clip, x, clip.decode(x, w)) @ wp) == pytest.approx(best)
    with pytest.raises(ValueError, match=r"w must (have shape|be a vector of length d = 8)"):
        clip.decode(x, w[:-1])


def _good():
    return np.zeros((3, 2)), np.array([[0, 1], [1, 2]]), np.ones((2, 1))


@pytest.mark.parametrize("mutate, match", [
    (lambda n, e, f: (n, e, f, 1), "must be a tuple"),
    (lambda n, e, f: "abc", "must be a tuple"),
    (lambda n, e, f: (n[:, :1], e, f), r"X\[0\] node_features has 1 features"),
    (lambda n, e, f: (n[0], e, f), r"X\[0\] node_features must be 2-D"),
    (lambda n, e, f: (n[:0], e[:0], f[:0]), r"X\[0\] node_features has no nodes"),
    (lambda n, e, f: (np.where(n == 0, np.nan, n), e, f), r"X\[0\] node_features contains NaN"),
    (lambda n, e, f: (sp.csr_matrix(np.full((3, 2), np.nan)), e, f), r"node_features contains NaN"),
    (lambda n, e, f: (n, e + 1, f), r"X\[0\] edges refers to node 3"),
    (lambda n, e, f: (n, e - 1, f), r"X\[0\] edges refers to node -1"),
    (lambda n, e, f: (n, np.array([[0, 1], [2, 2]]), f), r"X\[0\] edges has a self-loop at row 1"),
    (lambda n, e, f: (n, e[:, :1], f), r"X\[0\] edges must have shape \(E, 2\)"),
    (lambda n, e, f: (n, e.astype(float) + 0.5, f), r"X\[0\] edges must hold integer"),
    (lambda n, e, f: (n, e, f[:1]), r"X\[0\] edge_features must have shape"),
    (lambda n, e, f: (n, e, -f), r"X\[0\] edge_features must be non-negative"),
    (lambda n, e, f: (n, e, f * np.nan), r"X\[0\] edge_features contains NaN"),
])
def test_check_X_errors(mutate, match):
    model = GraphCutModel(2, 1)
    with pytest.raises(ValueError, match=match):
        model.check_X([mutate(*_good())])


def test_check_y_errors_and_data():
    model = PottsModel(3, 2, 1)
    X = [_good()]
    with pytest.raises(ValueError, match=r"Y\[0\] has label 3 outside 0..2"):
        model.check_data(X, [np.array([0, 1, 3])])
    with pytest.raises(ValueError, match=r"Y\[0\] has label -1"):
        model.check_data(X, [np.array([0, -1, 2])])
    with pytest.raises(ValueError, match=r"Y\[0\] has shape \(2,\), expected \(3,\)"):
        model.check_data(X, [np.array([0, 1])])
    with pytest.raises(ValueError, match="same length"):
        model.check_data(X, [])
    Xc, Yc = model.check_data(X, [[0, 1, 2]])
    assert type(Xc[0]) is GraphInput and Yc[0].dtype == np.int64
    assert Xc[0].edges[:, 0].flags.c_contiguous


@pytest.mark.parametrize("make, match", [
    (lambda: GraphCutModel(0, 1), "n_features"),
    (lambda: GraphCutModel(2, 0), "n_edge_features"),
    (lambda: GraphCutModel(2, 1, backend="magic"), "backend"),
    (lambda: GraphCutModel(2, 1, negative_weights="ignore"), "negative_weights"),
    (lambda: PottsModel(1, 2, 1), "n_states"),
    (lambda: PottsModel(3, 2, 1, potts_constant=-1.0), "potts_constant"),
    (lambda: PottsModel(3, 2, 1, potts_constant=float("nan")), "potts_constant"),
    (lambda: PottsModel(3, 2, 1, max_cycles=0), "max_cycles"),
])
def test_constructor_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_get_config_round_trip():
    from structfw.models import MODEL_REGISTRY

    for m in (GraphCutModel(5, 2, backend="scipy"), PottsModel(4, 3, 2, potts_constant=1.0, max_cycles=3)):
        cfg = m.get_config()
        m2 = MODEL_REGISTRY[type(m).__name__](**cfg)
        assert m2.get_config() == cfg and m2.size_joint_feature == m.size_joint_feature
        np.testing.assert_array_equal(m2.nonnegative_indices, m.nonnegative_indices)


# ------------------------------------------------------------------ Potts / alpha-expansion
def _potts_instance(rng, V, K, C=0.0):
    model = PottsModel(K, 3, 2, potts_constant=C)
    x = model.check_X([random_input(rng, V, 3, 2, p=0.6)])[0]
    w = random_w(rng, model)
    return model, x, w


def test_alpha_expansion_is_a_local_optimum_of_every_expansion_move():
    rng = np.random.default_rng(5)
    for trial in range(15):
        V, K = int(rng.integers(2, 8)), int(rng.integers(3, 5))
        model, x, w = _potts_instance(rng, V, K)
        y_true = rng.integers(0, K, V)
        nodes, tails, heads, ef = model._parts(x)
        U = model._unary(nodes, w, y_true, True)
        c = model._costs(ef, w)
        y = model.loss_augmented_decode(x, y_true, w)
        s = potts_score(U, tails, heads, c, y)
        for alpha in range(K):
            free = np.flatnonzero(y != alpha)
            best_move = -np.inf
            for mask in itertools.product([0, 1], repeat=free.size):
                z = y.copy()
                z[free[np.array(mask, bool)]] = alpha
                best_move = max(best_move, potts_score(U, tails, heads, c, z))
            assert s >= best_move - 1e-9
            # and each single move is solved exactly by the min cut
            z = expansion_move(U, tails, heads, c, y, alpha)
            assert potts_score(U, tails, heads, c, z) == pytest.approx(best_move, abs=1e-9)


def test_alpha_expansion_never_below_its_start_and_the_truth():
    rng = np.random.default_rng(6)
    for trial in range(30):
        V, K = int(rng.integers(2, 12)), int(rng.integers(3, 6))
        model, x, w = _potts_instance(rng, V, K, C=0.3 * (trial % 2))
        nodes, tails, heads, ef = model._parts(x)
        y_true = rng.integers(0, K, V)
        U = model._unary(nodes, w * 0.2, y_true, True)  # weak unaries: strong pairwise terms
        c = model._costs(ef, w) * 3.0
        y0 = rng.integers(0, K, V)
        y, s = alpha_expansion(U, tails, heads, c, y0, 10)
        assert s >= potts_score(U, tails, heads, c, y0) - 1e-12
        assert s == pytest.approx(potts_score(U, tails, heads, c, y))
        y = model.loss_augmented_decode(x, y_true, w)
        assert model.score_labelling(x, y, w, y_true) >= model.score_labelling(x, y_true, w, y_true) - 1e-12


def test_potts_oracle_never_below_truth_on_a_frustrated_triangle():
    model = PottsModel(3, 1, 1)
    # all labels tie in the unaries; the truth cuts every edge
    x = model.check_X([(np.ones((3, 1)), np.array([[0, 1], [1, 2], [0, 2]]), np.ones((3, 1)))])[0]
    y_true = np.array([0, 1, 2])
    w = np.array([0.0, 0.0, 0.0, 0.0])
    y = model.loss_augmented_decode(x, y_true, w)
    assert model.score_labelling(x, y, w, y_true) >= model.score_labelling(x, y_true, w, y_true)


@pytest.mark.parametrize("sparse", [False, True])
def test_potts_is_exact_for_two_labels(sparse):
    rng = np.random.default_rng(7)
    potts, gc = PottsModel(2, 3, 2), GraphCutModel(3, 2)
    for _ in range(20):
        V = int(rng.integers(1, 9))
        x = gc.check_X([random_input(rng, V, 3, 2, sparse=sparse)])[0]
        y_true = rng.integers(0, 2, V)
        w = random_w(rng, gc, scale=rng.choice([0.3, 3.0]))
        best, _ = brute_force(gc, x, w, y_true)
        assert potts.score_labelling(x, potts.loss_augmented_decode(x, y_true, w), w, y_true) == \
            pytest.approx(best, abs=1e-9)
        assert gc.score_labelling(x, gc.decode(x, w), w) == \
            pytest.approx(potts.score_labelling(x, potts.decode(x, w), w), abs=1e-9)


def test_potts_brute_force_small_k3():
    """alpha-expansion is within the Potts factor-2 bound and usually optimal; check it is
    never above the optimum and hits it on most tiny instances."""
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(20):
        V = int(rng.integers(2, 7))
        model, x, w = _potts_instance(rng, V, 3, C=0.2)
        y_true = rng.integers(0, 3, V)
        best, _ = brute_force(model, x, w, y_true)
        s = model.score_labelling(x, model.loss_augmented_decode(x, y_true, w), w, y_true)
        assert s <= best + 1e-9
        hits += s >= best - 1e-9
    assert hits >= 15


# ------------------------------------------------------------------ data
from structfw.datasets import load_segmentation, make_horseseg_like, make_stanford_like  # noqa: E402


@pytest.fixture(scope="module")
def small_binary():
    return make_horseseg_like(n_images=4, size=24, seed=3)


@pytest.fixture(scope="module")
def small_multi():
    return make_stanford_like(n_images=3, size=64, n_segments=80, seed=3)


def _same(XA, YA, XB, YB):
    for (a, b) in zip(XA, XB):
        for u, v in zip(a, b):
            u = u.toarray() if sp.issparse(u) else u
            v = v.toarray() if sp.issparse(v) else v
            np.testing.assert_array_equal(u, v)
    for a, b in zip(YA, YB):
        np.testing.assert_array_equal(a, b)


def test_generators_are_deterministic_and_valid(small_binary, small_multi):
    X, Y = small_binary
    _same(X, Y, *make_horseseg_like(n_images=4, size=24, seed=3))
    X2, _ = make_horseseg_like(n_images=4, size=24, seed=4)
    assert any((a[0] != b[0]).nnz for a, b in zip(X, X2))
    model = GraphCutModel(55, 2)
    Xc, Yc = model.check_data(X, Y)
    assert sp.issparse(Xc[0].nodes) and Xc[0].nodes.shape == (24 * 24, 55)
    assert all(0.02 < y.mean() < 0.9 for y in Yc)  # figure and ground both present
    Xm, Ym = small_multi
    _same(Xm, Ym, *make_stanford_like(n_images=3, size=64, n_segments=80, seed=3))
    pm = PottsModel(6, 41, 3)
    Xc, Yc = pm.check_data(Xm, Ym)
    assert all(20 < x.nodes.shape[0] < 200 for x in Xc)
    assert len(np.unique(np.concatenate(Yc))) >= 3


@pytest.mark.parametrize("call, match", [
    (lambda: make_horseseg_like(n_images=0), "n_images"),
    (lambda: make_horseseg_like(size=4), "size"),
    (lambda: make_stanford_like(n_classes=9), "n_classes"),
    (lambda: load_segmentation("seg-other"), "name"),
    (lambda: load_segmentation("seg-binary", split="val"), "split"),
])
def test_data_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_load_segmentation_caches_outside_the_repo(tmp_path, monkeypatch):
    from structfw.datasets import segmentation as seg

    monkeypatch.setenv("STRUCTFW_DATA_HOME", str(tmp_path))
    # a small registry entry keeps this fast; the real ones are the same code path
    monkeypatch.setitem(seg._SETS, "seg-binary", (make_horseseg_like, dict(n_images=2, size=16, seed=0),
                                                  dict(n_images=2, size=16, seed=1)))
    X, Y, make_model = load_segmentation("seg-binary", "test")
    files = list((tmp_path / "segmentation").glob("*.npz"))
    assert len(files) == 1 and "seg-binary-test" in files[0].name
    X2, Y2, _ = load_segmentation("seg-binary", "test")  # from the cache
    _same(X, Y, X2, Y2)
    model = make_model()
    assert isinstance(model, GraphCutModel)
    model.check_data(X2, Y2)


def test_oracle_times_are_in_the_papers_range():
    """~1-5 ms per oracle call at the loaders' sizes (MP-BCFW paper: 1-5 ms) -- only a
    loose upper bound here, the machine is shared."""
    import time

    X, Y = make_horseseg_like(n_images=2, size=64, seed=0)
    model = GraphCutModel(55, 2)
    X, Y = model.check_data(X, Y)
    w = np.random.default_rng(0).standard_normal(model.size_joint_feature)
    w[model.nonnegative_indices] = 1.0
    model.loss_augmented_decode(X[0], Y[0], w)
    t0 = time.perf_counter()
    for x, y in zip(X, Y):
        model.loss_augmented_decode(x, y, w)
    assert (time.perf_counter() - t0) / len(X) < 0.05


def _strip_edges(X):
    return [(n, e[:0], f[:0]) for n, e, f in X]


@pytest.mark.parametrize("kind", ["binary", "multi"])
def test_learned_segmenter_beats_unary_only_baseline(kind):
    if kind == "binary":
        X, Y = make_horseseg_like(n_images=12, size=32, seed=0)
        Xt, Yt = make_horseseg_like(n_images=12, size=32, seed=1)
        make, lam = (lambda: GraphCutModel(55, 2)), 1e-2
    else:
        X, Y = make_stanford_like(n_images=12, size=80, n_segments=150, seed=0)
        Xt, Yt = make_stanford_like(n_images=12, size=80, n_segments=150, seed=1)
        make, lam = (lambda: PottsModel(6, 41, 3)), 1e-3
    full = sf.StructuredSVM(make(), solver="bcfw", lam=lam, max_passes=20, tol=1e-6, random_state=0).fit(X, Y)
    base = sf.StructuredSVM(make(), solver="bcfw", lam=lam, max_passes=20, tol=1e-6,
                            random_state=0).fit(_strip_edges(X), Y)
    acc_full, acc_base = full.score(Xt, Yt), base.score(_strip_edges(Xt), Yt)
    assert acc_full > acc_base + 0.01, (acc_full, acc_base)


def test_potts_constant_is_part_of_every_corner_and_the_gap_is_honest():
    """With a fixed Potts term -C #cut(y) (MP-BCFW Sec. 3, phi_o) the corners carry
    L_i(y) = Delta + C (#cut(y_i) - #cut(y)); K = 2 (exact expansion): BCPFW reaches the optimum
    of the QP over all labellings, and its gap certifies the suboptimality."""
    rng = np.random.default_rng(11)
    C, lam, K = 0.7, 0.1, 2
    model = PottsModel(K, 3, 2, potts_constant=C)
    X = model.check_X([random_input(rng, int(rng.integers(3, 6)), 3, 2, p=0.7) for _ in range(4)])
    Y = [rng.integers(0, K, np.shape(x[0])[0]) for x in X]
    d, n = model.size_joint_feature, len(X)
    corners = []  # (i, psi, L) for every labelling of every example
    for i, (x, yt) in enumerate(zip(X, Y)):
        edges = np.asarray(x[1]).reshape(-1, 2)
        cut = lambda y: np.count_nonzero(y[edges[:, 0]] != y[edges[:, 1]])  # noqa: E731
        for y in itertools.product(range(K), repeat=len(yt)):
            y = np.array(y, np.int64)
            psi = dense_phi(model, x, yt) - dense_phi(model, x, y)
            corners.append((i, psi, model.loss(yt, y) + C * (cut(yt) - cut(y))))
    P_star = corners_primal(corners, n, lam, primal_qp_optimum(corners, n, d, lam, model.nonnegative_indices))
    svm = sf.StructuredSVM(model, solver=sf.solvers.BCFW(step="pairwise"), lam=lam, max_passes=300, tol=1e-9,
                           random_state=0, check_every=1).fit(X, Y)
    sub = corners_primal(corners, n, lam, svm.coef_) - P_star
    assert -1e-8 < sub < 1e-5
    assert svm.gap_ >= sub - 1e-10
    assert svm.primal_ == pytest.approx(corners_primal(corners, n, lam, svm.coef_), abs=1e-9)
