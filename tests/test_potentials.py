"""The potential-level oracles (structfw.oracles.potentials): brute force on tiny structures, the
subgradient against finite differences of the hinge, the linear models' oracles on the potentials
they compute, and the checks of every argument."""
import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import structfw.models as M
from structfw.oracles import potentials as pot

REL = 1e-9


def approx(v):
    return pytest.approx(v, rel=REL, abs=1e-12)


# ------------------------------------------------------------------ brute-force references
def chain_score(U, T, y):
    return U[np.arange(len(y)), y].sum() + sum(T[y[t], y[t + 1]] for t in range(len(y) - 1))


def graph_score(U, edges, P, y):
    return U[np.arange(len(y)), y].sum() + sum(P[e, y[u], y[v]] for e, (u, v) in enumerate(edges))


def cut_score(U, edges, c, y):
    return U[np.arange(len(y)), y].sum() - sum(c[e] for e, (u, v) in enumerate(edges) if y[u] != y[v])


def matching_score(S, y):
    return sum(S[j, k] for j, k in enumerate(y) if k >= 0)


def matching_loss(yt, y, fn):
    acc = sum((fn if a >= 0 else 0.0) + (1.0 if b >= 0 else 0.0) for a, b in zip(yt, y) if a != b)
    return acc / ((1.0 + fn) * len(yt))


def pose_score(S, parent, springs, y, s=1.0):
    total = sum(S[p, y[p][0], y[p][1]] for p in range(len(parent)))
    for p, r in enumerate(parent):
        if r >= 0:
            dy, dx = (y[p][0] - y[r][0]) / s, (y[p][1] - y[r][1]) / s
            a, b, c, d = springs[p]
            total -= a * dx * dx + b * dx + c * dy * dy + d * dy
    return total


def pose_loss(yt, y, tol):
    return np.mean([(a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2 > tol ** 2 for a, b in zip(yt, y)])


def labellings(V, K):
    return [np.array(y) for y in itertools.product(range(K), repeat=V)]


def matchings(ms, mt):
    out = []

    def extend(prefix, used):
        if len(prefix) == ms:
            out.append(np.array(prefix))
            return
        extend(prefix + [-1], used)
        for k in range(mt):
            if k not in used:
                extend(prefix + [k], used | {k})
    extend([], frozenset())
    return out


def hamming(yt, y, a=None):
    a = np.full(len(yt), 1.0 / len(yt)) if a is None else a
    return float(np.sum(a[np.asarray(yt) != np.asarray(y)]))


def check_exact(r, candidates, augmented, truth):
    """r against brute force: value, y's value, truth, hinge, bound (exact back-ends)."""
    best = max(augmented(y) for y in candidates)
    assert r.value == approx(best)
    assert augmented(r.y) == approx(r.value)
    assert r.truth == approx(truth)
    assert r.hinge >= 0.0 and r.hinge == approx(best - truth)
    assert r.bound >= r.value and r.hinge_bound >= r.hinge
    assert r.exact
    return best


def directional(fn, thetas, grads, rng, eps=1e-6):
    """Central difference of fn along a random direction against <grad, direction>."""
    D = [rng.normal(size=t.shape) for t in thetas]
    up = fn(*[t + eps * d for t, d in zip(thetas, D)])
    down = fn(*[t - eps * d for t, d in zip(thetas, D)])
    assert (up - down) / (2 * eps) == pytest.approx(sum(float(np.sum(g * d)) for g, d in zip(grads, D)),
                                                    rel=1e-6, abs=1e-6)


CYCLE = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
PATH = np.array([[0, 1], [1, 2], [3, 2]])


# ------------------------------------------------------------------ chain and multiclass
@pytest.mark.parametrize("seed", range(4))
def test_chain_against_enumeration(seed):
    rng = np.random.default_rng(seed)
    L, K = 4, 3
    U, T = rng.normal(size=(L, K)), rng.normal(size=(K, K))
    yt = rng.integers(0, K, L)
    a = rng.random(L) if seed % 2 else None
    for scale in (1.0, 0.0, 2.5):
        r = pot.chain_hinge(U, T, yt, loss_scale=scale, loss_weights=a)
        aug = lambda y, U=U, T=T: scale * hamming(yt, y, a) + chain_score(U, T, y)  # noqa: E731
        check_exact(r, labellings(L, K), aug, chain_score(U, T, yt))
        dU, dT = r.grad
        assert dU.shape == (L, K) and dT.shape == (K, K)
        onehot = lambda y: np.eye(K)[y]  # noqa: E731
        np.testing.assert_array_equal(dU, onehot(r.y) - onehot(yt))
        np.testing.assert_allclose(dT.sum(), 0.0, atol=1e-12)

        def hinge(U, T, scale=scale):
            return max(scale * hamming(yt, y, a) + chain_score(U, T, y) for y in labellings(L, K)) \
                - chain_score(U, T, yt)
        directional(hinge, (U, T), r.grad, rng)


def test_multiclass_against_enumeration_and_differences():
    rng = np.random.default_rng(1)
    for _ in range(5):
        s = rng.normal(size=5)
        yt = int(rng.integers(5))
        cw = rng.random(5) + 0.5
        for scale in (1.0, 0.0, 3.0):
            c = scale * cw[yt]
            r = pot.multiclass_hinge(s, yt, loss_scale=scale, class_weight=cw)
            check_exact(r, range(5), lambda k: s[k] + c * (k != yt), s[yt])
            g = np.zeros(5)
            g[r.y] += 1
            g[yt] -= 1
            np.testing.assert_array_equal(r.grad[0], g)
            directional(lambda s: np.max(s + c * (np.arange(5) != yt)) - s[yt], (s,), r.grad, rng)


# ------------------------------------------------------------------ general graphs
def graph_grads(y, yt, edges, K):
    dU = np.eye(K)[y] - np.eye(K)[yt]
    dP = np.zeros((len(edges), K, K))
    for e, (u, v) in enumerate(edges):
        dP[e, y[u], y[v]] += 1
        dP[e, yt[u], yt[v]] -= 1
    return dU, dP


@pytest.mark.parametrize("edges,inference", [(PATH, "auto"), (PATH, "tree"), (CYCLE, "exhaustive"),
                                             (CYCLE, "auto")])
def test_graph_exact_back_ends_against_enumeration(edges, inference):
    rng = np.random.default_rng(2)
    V, K = 4, 3
    U, P = rng.normal(size=(V, K)), rng.normal(size=(len(edges), K, K))
    yt = rng.integers(0, K, V)
    cw, omega = rng.random(K) + 0.5, rng.random(V) + 0.1
    c = omega * cw[yt] / np.sum(omega * cw[yt])
    for scale in (1.0, 0.0, 1.7):
        r = pot.graph_hinge(U, edges, P, yt, inference=inference, loss_scale=scale, class_weight=cw,
                            node_weights=omega)
        aug = lambda y, U=U, P=P: scale * hamming(yt, y, c) + graph_score(U, edges, P, y)  # noqa: E731
        truth = graph_score(U, edges, P, yt)
        if inference == "auto" and edges is CYCLE:  # K = 3 on a loopy graph: TRW-S, approximate
            best = max(aug(y) for y in labellings(V, K))
            assert r.value <= best + 1e-9 and r.bound >= best - 1e-9 and r.hinge >= 0
            assert aug(r.y) == approx(r.value) and r.truth == approx(truth)
        else:
            check_exact(r, labellings(V, K), aug, truth)
        for g, ref in zip(r.grad, graph_grads(r.y, yt, edges, K)):
            np.testing.assert_array_equal(g, ref)
        if r.exact:
            def hinge(U, P, scale=scale):
                return max(scale * hamming(yt, y, c) + graph_score(U, edges, P, y) for y in labellings(V, K)) \
                    - graph_score(U, edges, P, yt)
            directional(hinge, (U, P), r.grad, rng)


@pytest.mark.parametrize("inference", ["trws", "lp", "qpbo", "auto"])
def test_graph_loopy_back_ends_bound_the_maximum(inference):
    rng = np.random.default_rng(3)
    V, K = 4, 2
    for _ in range(3):
        U, P = rng.normal(size=(V, K)), rng.normal(size=(len(CYCLE), K, K))
        yt = rng.integers(0, K, V)
        r = pot.graph_hinge(U, CYCLE, P, yt, inference=inference)
        aug = lambda y: hamming(yt, y) + graph_score(U, CYCLE, P, y)  # noqa: E731
        best = max(aug(y) for y in labellings(V, K))
        assert r.value <= best + 1e-9 and r.bound >= best - 1e-9
        assert r.hinge >= 0 and r.hinge_bound >= r.hinge - 1e-12
        assert aug(r.y) == approx(r.value)
        if r.exact:
            assert r.value == approx(best)


# ------------------------------------------------------------------ cut models
@pytest.mark.parametrize("seed", range(3))
def test_graph_cut_against_enumeration(seed):
    rng = np.random.default_rng(seed)
    V = 5
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [1, 3]])
    U, c = rng.normal(size=(V, 2)), rng.random(len(edges))
    yt = rng.integers(0, 2, V)
    a = rng.random(V) if seed else None
    for scale in (1.0, 0.0, 2.0):
        r = pot.graph_cut_hinge(U, edges, c, yt, loss_scale=scale, loss_weights=a)
        aug = lambda y, U=U, c=c: scale * hamming(yt, y, a) + cut_score(U, edges, c, y)  # noqa: E731
        check_exact(r, labellings(V, 2), aug, cut_score(U, edges, c, yt))
        dU, dc = r.grad
        np.testing.assert_array_equal(dU, np.eye(2)[r.y] - np.eye(2)[yt])
        cut = lambda y: (y[edges[:, 0]] != y[edges[:, 1]]).astype(float)  # noqa: E731
        np.testing.assert_array_equal(dc, cut(yt) - cut(r.y))

        def hinge(U, c, scale=scale):
            return max(scale * hamming(yt, y, a) + cut_score(U, edges, c, y) for y in labellings(V, 2)) \
                - cut_score(U, edges, c, yt)
        directional(hinge, (U, c), r.grad, rng)


def test_graph_cut_back_ends_reach_the_same_maximum():
    from structfw.oracles.maxflow import available_backends

    rng = np.random.default_rng(14)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [0, 1]])  # a pair twice: its costs add
    U, c, yt = rng.normal(size=(4, 2)), rng.random(6), rng.integers(0, 2, 4)
    best = max(hamming(yt, y) + cut_score(U, edges, c, y) for y in labellings(4, 2))
    for backend in ["auto"] + available_backends():
        assert pot.graph_cut_hinge(U, edges, c, yt, backend=backend).value == approx(best)


def test_potts_is_never_below_the_truth_and_its_certificate_bounds_the_maximum():
    rng = np.random.default_rng(4)
    V, K = 5, 3
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [1, 3]])
    for _ in range(3):
        U, c = rng.normal(size=(V, K)), rng.random(len(edges))
        yt = rng.integers(0, K, V)
        aug = lambda y: hamming(yt, y) + cut_score(U, edges, c, y)  # noqa: E731
        best = max(aug(y) for y in labellings(V, K))
        plain = pot.potts_hinge(U, edges, c, yt)
        assert plain.bound == np.inf and not plain.exact
        certified = pot.potts_hinge(U, edges, c, yt, certify=True)
        for r in (plain, certified):
            assert r.value <= best + 1e-9 and r.hinge >= 0 and aug(r.y) == approx(r.value)
            assert r.truth == approx(cut_score(U, edges, c, yt))
            np.testing.assert_array_equal(r.grad[0], np.eye(K)[r.y] - np.eye(K)[yt])
        assert certified.bound >= best - 1e-9 and certified.value >= plain.value - 1e-12
        zero = pot.potts_hinge(U, edges, c, yt, loss_scale=0.0)
        assert zero.value <= max(cut_score(U, edges, c, y) for y in labellings(V, K)) + 1e-9


# ------------------------------------------------------------------ matching and pose
@pytest.mark.parametrize("shape", [(3, 3), (3, 4), (4, 2)])
def test_matching_against_enumeration(shape):
    rng = np.random.default_rng(5)
    ms, mt = shape
    cands = matchings(ms, mt)
    for trial in range(3):
        S = rng.normal(size=shape)
        yt = cands[rng.integers(len(cands))]
        for scale, fn in ((1.0, 1.0), (0.0, 1.0), (0.7, 3.0)):
            r = pot.matching_hinge(S, yt, loss_scale=scale, fn_cost=fn)
            aug = lambda y, S=S: scale * matching_loss(yt, y, fn) + matching_score(S, y)  # noqa: E731
            check_exact(r, cands, aug, matching_score(S, yt))
            g = np.zeros(shape)
            for j, k in enumerate(r.y):
                g[j, k] += k >= 0
            for j, k in enumerate(yt):
                g[j, k] -= k >= 0
            np.testing.assert_array_equal(r.grad[0], g)

            def hinge(S, scale=scale, fn=fn):
                return max(scale * matching_loss(yt, y, fn) + matching_score(S, y) for y in cands) \
                    - matching_score(S, yt)
            directional(hinge, (S,), r.grad, rng)


def pose_candidates(P, H, W):
    cells = [(r, c) for r in range(H) for c in range(W)]
    return [np.array(y) for y in itertools.product(cells, repeat=P)]


@pytest.mark.parametrize("inference", ["dt", "brute"])
def test_pose_against_enumeration(inference):
    rng = np.random.default_rng(7)
    P, H, W = 3, 3, 4
    parent = np.array([1, -1, 1])
    cands = pose_candidates(P, H, W)
    S = rng.normal(size=(P, H, W))
    springs = rng.normal(size=(P, 4)) * 0.3
    springs[:, [0, 2]] = np.abs(springs[:, [0, 2]])
    yt = cands[rng.integers(len(cands))]
    for scale, tol, s in ((1.0, 1.0, 1.0), (0.0, 1.0, 1.0), (2.0, 1.5, 2.0)):
        r = pot.pose_hinge(S, parent, springs, yt, loss_scale=scale, tolerance=tol, displacement_scale=s,
                           inference=inference)
        aug = lambda y, S=S, sp=springs: scale * pose_loss(yt, y, tol) + pose_score(S, parent, sp, y, s)  # noqa: E731
        check_exact(r, cands, aug, pose_score(S, parent, springs, yt, s))
        dS, dC = r.grad
        ref = np.zeros((P, H, W))
        for p in range(P):
            ref[p, r.y[p, 0], r.y[p, 1]] += 1
            ref[p, yt[p, 0], yt[p, 1]] -= 1
        np.testing.assert_array_equal(dS, ref)
        assert np.all(dC[1] == 0)  # the root has no spring

        def hinge(S, springs, scale=scale, tol=tol, s=s):
            return max(scale * pose_loss(yt, y, tol) + pose_score(S, parent, springs, y, s) for y in cands) \
                - pose_score(S, parent, springs, yt, s)
        directional(hinge, (S, springs), r.grad, rng)


# ------------------------------------------------------------------ the linear models' oracles
def test_chain_and_multiclass_models_agree_with_their_potentials():
    rng = np.random.default_rng(8)
    chain = M.ChainModel(4, 3)
    for _ in range(5):
        x = rng.normal(size=(6, 3))
        y = rng.integers(0, 4, 6)
        w = rng.normal(size=chain.size_joint_feature)
        for xi in (x, chain.weight_example(x, y, rng.random(6) + 0.1)):
            a = xi.loss_weights if hasattr(xi, "loss_weights") else None
            r = pot.chain_hinge(chain.unary_scores(x, w), chain.transition_weights(w), y, loss_weights=a)
            np.testing.assert_array_equal(r.y, chain.loss_augmented_decode(xi, y, w))
            psi = chain.psi(x, y, r.y)
            assert r.hinge == approx(chain.example_loss(xi, y, r.y) - float(psi.toarray() @ w))
    multi = M.MulticlassModel(5, 3)
    for _ in range(5):
        x, y, w = rng.normal(size=3), int(rng.integers(5)), rng.normal(size=multi.size_joint_feature)
        xi = multi.weight_example(x, y, 2.5)
        assert pot.multiclass_hinge(multi.scores(x, w), y, loss_scale=2.5).y == multi.loss_augmented_decode(xi, y, w)


@pytest.mark.parametrize("inference", ["auto", "trws", "exhaustive"])
def test_graph_model_agrees_with_its_potentials(inference):
    rng = np.random.default_rng(9)
    cw = np.array([1.0, 2.0, 0.5])
    model = M.GraphModel(3, 2, 2, inference=inference, class_weight=cw)
    for edges in (PATH, CYCLE):
        nodes, ef, y = rng.normal(size=(4, 2)), rng.normal(size=(len(edges), 2)), rng.integers(0, 3, 4)
        omega = rng.random(4) + 0.1
        x = model.weight_example(model.check_X([(nodes, edges, ef, omega)])[0], y, 1.7)
        w = rng.normal(size=model.size_joint_feature)
        U, P = model.potentials(x, w)
        r = pot.graph_hinge(U, edges, P, y, inference=inference, loss_scale=1.7, class_weight=cw, node_weights=omega)
        y_model, bound = model.loss_augmented_decode_with_bound(x, y, w)
        np.testing.assert_array_equal(r.y, y_model)
        assert r.bound == approx(bound)
        psi = model.psi(x, y, r.y)
        assert r.hinge == approx(model.example_loss(x, y, r.y) - float(psi.toarray() @ w))


def test_cut_models_agree_with_their_potentials():
    rng = np.random.default_rng(10)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [1, 3]])
    for model, K in ((M.GraphCutModel(3, 2), 2), (M.PottsModel(3, 3, 2), 3)):
        for weighted in (False, True):
            nodes, ef, y = rng.normal(size=(5, 3)), rng.random((len(edges), 2)), rng.integers(0, K, 5)
            x = model.check_X([(nodes, edges, ef)])[0]
            if weighted:
                x = model.weight_example(x, y, rng.random(5) + 0.1)
            w = rng.normal(size=model.size_joint_feature)
            w[model.nonnegative_indices] = np.abs(w[model.nonnegative_indices])
            U = nodes @ model.unary_weights(w).T
            c = ef @ model.edge_weights(w)
            kw = {"loss_weights": x.loss_weights}
            if K == 2:
                r = pot.graph_cut_hinge(U, edges, c, y, **kw)
                np.testing.assert_array_equal(r.y, model.loss_augmented_decode(x, y, w))
            else:
                r = pot.potts_hinge(U, edges, c, y, **kw)
                np.testing.assert_array_equal(r.y, model.loss_augmented_decode(x, y, w))
                rc = pot.potts_hinge(U, edges, c, y, certify=True, **kw)
                y_model, bound = model.loss_augmented_decode_with_bound(x, y, w)
                np.testing.assert_array_equal(rc.y, y_model)
                assert rc.bound == approx(max(bound, rc.value))


def test_matching_and_pose_models_agree_with_their_potentials():
    rng = np.random.default_rng(11)
    model = M.MatchingModel(3, fn_cost=2.0)
    for _ in range(5):
        x = rng.normal(size=(4, 5, 3))
        y = np.array([2, -1, 0, 4])
        w = rng.normal(size=3)
        xi = model.weight_example(x, y, 0.5)
        r = pot.matching_hinge(model.edge_scores(x, w), y, loss_scale=0.5, fn_cost=2.0)
        np.testing.assert_array_equal(r.y, model.loss_augmented_decode(xi, y, w))
        assert r.hinge == approx(model.example_loss(xi, y, r.y) - float(model.psi(x, y, r.y).toarray() @ w))
    pose = M.PoseModel(3, [-1, 0, 1], 2, (5, 6), tolerance=1.0, displacement_scale=2.0)
    for _ in range(3):
        x = rng.normal(size=(5, 6, 2))
        y = np.array([[0, 1], [3, 2], [4, 5]])
        w = rng.normal(size=pose.size_joint_feature)
        w[pose.nonnegative_indices] = np.abs(w[pose.nonnegative_indices])
        r = pot.pose_hinge(pose.unary_scores(x, w), pose.parent, pose.spring_weights(w), y, tolerance=1.0,
                           displacement_scale=2.0)
        np.testing.assert_array_equal(r.y, pose.loss_augmented_decode(x, y, w))
        assert r.hinge == approx(pose.loss(y, r.y) - float(pose.psi(x, y, r.y) @ w))


def test_a_thread_pool_gives_the_serial_results():
    rng = np.random.default_rng(12)
    cases = [(rng.normal(size=(7, 4)), rng.normal(size=(4, 4)), rng.integers(0, 4, 7)) for _ in range(16)]
    serial = [pot.chain_hinge(*c) for c in cases]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda c: pot.chain_hinge(*c), cases))
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a.y, b.y)
        assert a.hinge == approx(b.hinge)


# ------------------------------------------------------------------ argument checks
U53, T33, Y5 = np.zeros((5, 3)), np.zeros((3, 3)), np.zeros(5, np.int64)
U42, E4 = np.zeros((4, 2)), np.array([[0, 1], [1, 2], [2, 3]])
NAN = np.array([[0.0, np.nan, 0.0]] * 5)


@pytest.mark.parametrize("call,match", [
    (lambda: pot.chain_hinge(U53, np.zeros((3, 4)), Y5),
     r"chain_hinge: transitions must be \(K, K\) = \(3, 3\) for unary of shape \(5, 3\), got \(3, 4\)"),
    (lambda: pot.chain_hinge(np.zeros(5), T33, Y5), r"chain_hinge: unary must be \(L, K\), got shape \(5,\)"),
    (lambda: pot.chain_hinge(NAN, T33, Y5), r"chain_hinge: unary must be finite"),
    (lambda: pot.chain_hinge(U53, T33, Y5[:3]), r"chain_hinge: y_true must have shape \(5,\), got \(3,\)"),
    (lambda: pot.chain_hinge(U53, T33, [0, 0, 3, 0, 0]), r"chain_hinge: y_true\[2\] = 3 is outside 0\.\.2"),
    (lambda: pot.chain_hinge(U53, T33, [0, 0, 0.5, 0, 0]), r"chain_hinge: y_true must hold integer labels"),
    (lambda: pot.chain_hinge(U53, T33, Y5, loss_scale=-1.0), r"chain_hinge: loss_scale must be a finite number"),
    (lambda: pot.chain_hinge(U53, T33, Y5, loss_weights=np.ones(4)), r"chain_hinge: loss_weights must have shape"),
    (lambda: pot.chain_hinge(U53.astype(str), T33, Y5), r"chain_hinge: unary must hold real numbers"),
    (lambda: pot.multiclass_hinge(np.zeros((2, 2)), 0), r"multiclass_hinge: scores must be \(K,\)"),
    (lambda: pot.multiclass_hinge(np.zeros(3), 3), r"multiclass_hinge: y_true = 3 is outside 0\.\.2"),
    (lambda: pot.multiclass_hinge(np.zeros(3), True), r"multiclass_hinge: y_true must be one integer class label"),
    (lambda: pot.multiclass_hinge(np.zeros(3), 0, class_weight=[1, 0, 1]), r"multiclass_hinge: class_weight"),
    (lambda: pot.graph_hinge(U42, E4, np.zeros((3, 2, 3)), np.zeros(4, int)),
     r"graph_hinge: pairwise must be \(E, K, K\) = \(3, 2, 2\)"),
    (lambda: pot.graph_hinge(U42, [[0, 0]], np.zeros((1, 2, 2)), np.zeros(4, int)), r"graph_hinge: edges\[0\]"),
    (lambda: pot.graph_hinge(U42, [[0, 1], [1, 0]], np.zeros((2, 2, 2)), np.zeros(4, int)),
     r"graph_hinge: edges\[1\] = \(1, 0\) repeats"),
    (lambda: pot.graph_hinge(U42, E4, np.zeros((3, 2, 2)), np.zeros(4, int), inference="bp"),
     r"graph_hinge: inference must be 'auto' or one of"),
    (lambda: pot.graph_hinge(U42, CYCLE, np.zeros((5, 2, 2)), np.zeros(4, int), inference="tree"),
     r"graph_hinge: inference='tree' needs a forest"),
    (lambda: pot.graph_hinge(U53[:4], E4, np.zeros((3, 3, 3)), np.zeros(4, int), inference="qpbo"),
     r"graph_hinge: inference='qpbo' needs K = 2"),
    (lambda: pot.graph_hinge(np.zeros((30, 2)), [], [], np.zeros(30, int), inference="exhaustive"),
     r"graph_hinge: inference='exhaustive' would enumerate"),
    (lambda: pot.graph_hinge(U42, E4, np.zeros((3, 2, 2)), np.zeros(4, int), options={"trws": {"max_iter": 0}}),
     r"graph_hinge: options\['trws'\]\['max_iter'\] must be an integer"),
    (lambda: pot.graph_hinge(U42, E4, np.zeros((3, 2, 2)), np.zeros(4, int), options={"trws": {"order": [1, 0]}}),
     r"graph_hinge: options\['trws'\]\['order'\] must be a permutation"),
    (lambda: pot.graph_hinge(U42, E4, np.zeros((3, 2, 2)), np.zeros(4, int), node_weights=np.zeros(4)),
     r"graph_hinge: node_weights give the nodes no weight"),
    (lambda: pot.graph_cut_hinge(U42, E4, [1.0, -1.0, 1.0], np.zeros(4, int)),
     r"graph_cut_hinge: edge_costs must be >= 0 .* edge_costs\[1\] = -1"),
    (lambda: pot.graph_cut_hinge(np.zeros((4, 3)), E4, np.ones(3), np.zeros(4, int)),
     r"graph_cut_hinge: unary must be \(V, 2\)"),
    (lambda: pot.graph_cut_hinge(U42, E4, np.ones(2), np.zeros(4, int)),
     r"graph_cut_hinge: edge_costs must be \(E,\) = \(3,\) for 3 edges, got \(2,\)"),
    (lambda: pot.graph_cut_hinge(U42, [[0, 4]], np.ones(1), np.zeros(4, int)), r"graph_cut_hinge: edges\[0\]"),
    (lambda: pot.graph_cut_hinge(U42, E4, np.ones(3), np.zeros(4, int), backend="nope"),
     r"graph_cut_hinge: backend must be"),
    (lambda: pot.potts_hinge(U53, E4, np.ones(3), Y5, max_cycles=0), r"potts_hinge: max_cycles must be an integer"),
    (lambda: pot.potts_hinge(U53, E4, np.ones(3), Y5, certify="yes"), r"potts_hinge: certify must be True or False"),
    (lambda: pot.matching_hinge(np.zeros((3, 3)), [0, 0, -1]), r"matching_hinge: y_true aligns target 0"),
    (lambda: pot.matching_hinge(np.zeros((3, 3)), [0, 3, -1]), r"matching_hinge: y_true\[1\] = 3 is outside -1\.\.2"),
    (lambda: pot.matching_hinge(np.zeros((3, 3)), [0, 1, -1], fn_cost=0.0), r"matching_hinge: fn_cost must be"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 4)), [-1, 2, 1], np.zeros((3, 4)), np.zeros((3, 2), int)),
     r"pose_hinge: parent .* has a cycle"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 4)), [-1, -1, 1], np.zeros((3, 4)), np.zeros((3, 2), int)),
     r"pose_hinge: parent must have exactly one root"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 4)), [-1, 0, 1], np.zeros((2, 4)), np.zeros((3, 2), int)),
     r"pose_hinge: springs must be \(P, 4\) = \(3, 4\)"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 5)), [-1, 0, 1], np.zeros((3, 4)), [[0, 0], [4, 0], [0, 0]]),
     r"pose_hinge: y_true\[1\] = \(4, 0\) is outside the 4 x 5 grid"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 4)), [-1, 0, 1], np.zeros((3, 4)), np.zeros((3, 2), int),
                            displacement_scale=0.0), r"pose_hinge: displacement_scale must be a finite number > 0"),
    (lambda: pot.pose_hinge(np.zeros((3, 4, 4)), [-1, 0, 1], np.zeros((3, 4)), np.zeros((3, 2), int),
                            inference="bp"), r"pose_hinge: inference must be 'dt' or 'brute'"),
])
def test_bad_arguments_are_refused_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_potentials_are_not_changed_and_other_dtypes_are_taken():
    rng = np.random.default_rng(13)
    U, P = rng.normal(size=(4, 2)), rng.normal(size=(3, 2, 2))
    U0, P0 = U.copy(), P.copy()
    y = np.array([0, 1, 1, 0])
    r = pot.graph_hinge(U, E4, P, y)
    np.testing.assert_array_equal(U, U0)
    np.testing.assert_array_equal(P, P0)
    r32 = pot.graph_hinge(U.astype(np.float32), E4.astype(np.int32), P.astype(np.float32), y.astype(np.int8))
    np.testing.assert_array_equal(r32.y, pot.graph_hinge(U.astype(np.float32).astype(float), E4,
                                                          P.astype(np.float32).astype(float), y).y)
    assert all(g.dtype == np.float64 for g in r.grad + r32.grad)
