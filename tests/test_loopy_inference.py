"""The loopy inference back-ends (structfw.oracles.loopy) against exhaustive search.

Every back-end returns (labels, value, bound) with value = E(labels) and bound >= max E;
TRW-S and the LP are exact on trees, QPBO is exact on submodular energies and its
partial labelling is persistent.
"""
import itertools

import numpy as np
import pytest

from structfw.oracles.loopy import graph_energy, icm, lp_relaxation, qpbo, qpbo_partial, trws

TOL = 1e-9


# ---------------------------------------------------------------- brute force
def all_labellings(V, K):
    """The K^V labellings as rows (digit v of the row index in base K is y_v)."""
    idx = np.arange(K ** V, dtype=np.int64)[:, None]
    return (idx // K ** np.arange(V - 1, -1, -1, dtype=np.int64)[None, :]) % K


def energies(unary, edges, pairwise, Y):
    """E(y) for every row y of Y (vectorised)."""
    V = unary.shape[0]
    val = unary[np.arange(V), Y].sum(axis=1)
    for e, (u, v) in enumerate(edges):
        val += pairwise[e, Y[:, u], Y[:, v]]
    return val


def brute_force(unary, edges, pairwise):
    Y = all_labellings(*unary.shape)
    val = energies(unary, edges, pairwise, Y)
    return Y, val


# ---------------------------------------------------------------- instances
def tree_edges(V, rng):
    parent = [int(rng.integers(0, i)) for i in range(1, V)]
    # shuffled node names and edge orientations: the back-ends must not rely on parent < child
    perm = rng.permutation(V)
    edges = [(perm[p], perm[c]) if rng.random() < 0.5 else (perm[c], perm[p])
             for p, c in zip(parent, range(1, V))]
    return np.array(edges, np.int64).reshape(-1, 2)


def cycle_edges(V):
    return np.array([(i, (i + 1) % V) for i in range(V)], np.int64)


def grid_edges(h, w):
    idx = np.arange(h * w).reshape(h, w)
    return np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                           np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)]).astype(np.int64)


def complete_edges(V):
    return np.array(list(itertools.combinations(range(V), 2)), np.int64)


FAMILIES = ("tree", "cycle", "grid3x3", "K4", "K5")


def make_graph(family, rng):
    if family == "tree":
        V = int(rng.integers(4, 8))
        return V, tree_edges(V, rng)
    if family == "cycle":
        V = int(rng.integers(3, 8))
        return V, cycle_edges(V)
    if family == "grid3x3":
        return 9, grid_edges(3, 3)
    n = int(family[1:])
    return n, complete_edges(n)


def make_instance(family, K, seed, augment):
    """Random potentials; ``augment`` adds the normalised Hamming loss (labels != y_true) / V
    to the unaries, as the loss-augmented oracle of a structural SVM does."""
    rng = np.random.default_rng(seed)
    V, edges = make_graph(family, rng)
    unary = rng.normal(size=(V, K))
    pairwise = rng.normal(size=(edges.shape[0], K, K))
    if augment:
        y_true = rng.integers(0, K, V)
        unary = unary + (np.arange(K)[None, :] != y_true[:, None]) / V
    return unary, edges, pairwise


CASES = [(f, K, seed, aug) for f in FAMILIES for K in (2, 3, 4) for seed in range(3) for aug in (False, True)]


def case_id(c):
    return f"{c[0]}-K{c[1]}-s{c[2]}{'-aug' if c[3] else ''}"


# ---------------------------------------------------------------- TRW-S
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_trws_against_brute_force(case):
    family, K, seed, aug = case
    unary, edges, pairwise = make_instance(family, K, 100 * seed + K, aug)
    _, val = brute_force(unary, edges, pairwise)
    best = val.max()
    y, value, bound, info = trws(unary, edges, pairwise, return_info=True)
    assert y.dtype == np.int64 and y.shape == (unary.shape[0],)
    assert value == pytest.approx(graph_energy(unary, edges, pairwise, y), abs=1e-12)
    assert value <= best + TOL
    assert bound >= best - TOL
    # every iteration's bound is valid, and the sequence never increases (Kolmogorov 2006)
    hist = info["bound_history"]
    assert np.all(hist >= best - TOL)
    assert np.all(np.diff(hist) <= 1e-9 * (1 + abs(best)))
    if family == "tree":
        assert value == pytest.approx(best, abs=TOL)


def test_trws_large_tree_is_certified_exact():
    """On a tree the LP relaxation is tight: TRW-S's bound meets the max (tree DP)."""
    rng = np.random.default_rng(5)
    V, K = 500, 4
    parent = np.array([rng.integers(0, i) for i in range(1, V)])
    edges = np.stack([parent, np.arange(1, V)], 1).astype(np.int64)
    unary = rng.normal(size=(V, K))
    pairwise = rng.normal(size=(V - 1, K, K))
    msg = unary.copy()
    for c in range(V - 1, 0, -1):  # children have larger indices: leaves first
        msg[parent[c - 1]] += (pairwise[c - 1] + msg[c][None, :]).max(axis=1)
    best = msg[0].max()
    y, value, bound = trws(unary, edges, pairwise, max_iter=500, tol=1e-12)
    assert value == pytest.approx(best, abs=1e-8)
    assert bound == value  # the gap closed: certified


def test_trws_options_and_edge_cases():
    rng = np.random.default_rng(0)
    unary = rng.normal(size=(5, 3))
    no_edges = np.zeros((0, 2), np.int64)
    y, value, bound = trws(unary, no_edges, np.zeros((0, 3, 3)))
    assert np.array_equal(y, unary.argmax(1)) and bound == value == pytest.approx(unary.max(1).sum())
    y, value, bound = trws(np.zeros((0, 2)), no_edges, np.zeros((0, 2, 2)))
    assert y.shape == (0,) and value == bound == 0.0
    unary, edges, pairwise = make_instance("K5", 3, 7, False)
    _, val = brute_force(unary, edges, pairwise)
    for order in (None, np.array([4, 2, 0, 1, 3])):
        for sweeps in (0, 3):
            y, value, bound = trws(unary, edges, pairwise, order=order, icm_sweeps=sweeps)
            assert value == pytest.approx(graph_energy(unary, edges, pairwise, y))
            assert bound >= val.max() - TOL
    with pytest.raises(ValueError):
        trws(unary, edges, pairwise, order=np.array([0, 0, 1, 2, 3]))


# ---------------------------------------------------------------- LP relaxation
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_lp_relaxation_against_brute_force(case):
    family, K, seed, aug = case
    unary, edges, pairwise = make_instance(family, K, 100 * seed + K, aug)
    _, val = brute_force(unary, edges, pairwise)
    best = val.max()
    y, value, bound, info = lp_relaxation(unary, edges, pairwise, return_info=True)
    assert value == pytest.approx(graph_energy(unary, edges, pairwise, y), abs=1e-12)
    assert bound >= best - TOL
    assert value <= best + TOL
    if bound != value:
        # the dual-certified bound is the LP optimum HiGHS reports
        assert bound == pytest.approx(info["lp_value"], rel=1e-7, abs=1e-7)
    if info["integral"]:
        assert bound == value == pytest.approx(best, abs=1e-7)
    if family == "tree":
        assert value == pytest.approx(best, abs=TOL)
        assert info["integral"] and bound == value
    # the LP optimum is the best bound of its kind: TRW-S's fixed point is never tighter
    _, _, tb = trws(unary, edges, pairwise, max_iter=300, tol=1e-9)
    assert tb >= bound - 1e-6 * (1 + abs(bound))


# ---------------------------------------------------------------- QPBO
QPBO_CASES = [c for c in CASES if c[1] == 2] + [("K5", 2, s, a) for s in range(3, 8) for a in (False, True)]


def check_persistency(unary, edges, pairwise, x, Y, val):
    """Labelled nodes agree with some maximiser (max over labellings that fix them = the
    global max), and the stronger autarky: overwriting any labelling on the labelled nodes
    with x never lowers E."""
    lab = x >= 0
    fixed = np.all(Y[:, lab] == x[lab], axis=1)
    assert val[fixed].max() == pytest.approx(val.max(), abs=TOL)
    Z = Y.copy()
    Z[:, lab] = x[lab]
    assert np.all(energies(unary, edges, pairwise, Z) >= val - TOL)


@pytest.mark.parametrize("case", QPBO_CASES, ids=case_id)
def test_qpbo_against_brute_force(case):
    family, K, seed, aug = case
    unary, edges, pairwise = make_instance(family, K, 100 * seed + K, aug)
    Y, val = brute_force(unary, edges, pairwise)
    best = val.max()
    x, roof = qpbo_partial(unary, edges, pairwise)
    assert set(np.unique(x)) <= {-1, 0, 1}
    assert roof >= best - TOL
    check_persistency(unary, edges, pairwise, x, Y, val)
    y, value, bound, info = qpbo(unary, edges, pairwise, return_info=True)
    assert value == pytest.approx(graph_energy(unary, edges, pairwise, y), abs=1e-12)
    assert np.all(y[x >= 0] == x[x >= 0])
    # at most 9 unlabelled nodes: the completion is exhaustive, hence exact
    assert value == pytest.approx(best, abs=TOL) and bound == value
    # forcing the TRW-S completion keeps the bound valid
    y, value, bound = qpbo(unary, edges, pairwise, exhaustive_max=0)
    assert value == pytest.approx(graph_energy(unary, edges, pairwise, y), abs=1e-12)
    assert value <= best + TOL and bound >= best - TOL
    assert bound <= roof + 1e-12


def submodular_instance(family, seed, augment):
    unary, edges, pairwise = make_instance(family, 2, seed, augment)
    # pairwise = random table + an attractive coupling big enough to make every edge submodular
    excess = pairwise[:, 0, 1] + pairwise[:, 1, 0] - pairwise[:, 0, 0] - pairwise[:, 1, 1]
    bonus = np.maximum(excess, 0) / 2 + 0.1
    pairwise[:, 0, 0] += bonus
    pairwise[:, 1, 1] += bonus
    return unary, edges, pairwise


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("augment", (False, True))
def test_qpbo_exact_on_submodular(family, augment):
    for seed in range(4):
        unary, edges, pairwise = submodular_instance(family, seed, augment)
        _, val = brute_force(unary, edges, pairwise)
        x, roof = qpbo_partial(unary, edges, pairwise)
        assert np.all(x >= 0)  # unique maximiser (continuous random potentials): all labelled
        assert graph_energy(unary, edges, pairwise, x) == pytest.approx(val.max(), abs=TOL)
        assert roof == pytest.approx(val.max(), abs=1e-9)
        y, value, bound = qpbo(unary, edges, pairwise)
        assert np.array_equal(y, x) and bound == value == pytest.approx(val.max(), abs=TOL)


def frustrated_instance(family, seed):
    """Mixed attractive / repulsive couplings (non-submodular edges on frustrated cycles) and
    unaries strong on some nodes and weak on others: roof duality then labels some nodes and
    leaves others, which random Gaussian potentials on small graphs almost never do."""
    rng = np.random.default_rng(seed)
    if family == "grid3x4":
        V, edges = 12, grid_edges(3, 4)
    else:
        V, edges = int(family[1:]), complete_edges(int(family[1:]))
    unary = rng.normal(size=(V, 2)) * rng.choice([0.1, 3.0], V)[:, None]
    coupling = rng.uniform(0.5, 1.5, len(edges)) * rng.choice([-1.0, 1.0], len(edges))
    pairwise = coupling[:, None, None] * np.array([[0.0, 1.0], [1.0, 0.0]]) + 0.2 * rng.normal(size=(len(edges), 2, 2))
    return unary, edges, pairwise


@pytest.mark.parametrize("family", ("K5", "K6", "grid3x4"))
def test_qpbo_persistency_on_partial_labellings(family):
    n_partial = 0
    for seed in range(25):
        unary, edges, pairwise = frustrated_instance(family, seed)
        Y, val = brute_force(unary, edges, pairwise)
        x, roof = qpbo_partial(unary, edges, pairwise)
        assert roof >= val.max() - TOL
        check_persistency(unary, edges, pairwise, x, Y, val)
        n_partial += bool(np.any(x < 0) and np.any(x >= 0))
        y, value, bound = qpbo(unary, edges, pairwise)
        assert value == pytest.approx(val.max(), abs=TOL) and bound == value
        y, value, bound = qpbo(unary, edges, pairwise, exhaustive_max=1)
        assert value == pytest.approx(graph_energy(unary, edges, pairwise, y), abs=1e-12)
        assert bound >= val.max() - TOL
    assert n_partial >= 2  # the check above ran on genuinely partial labellings


def test_qpbo_frustrated_cycle_leaves_nodes_unlabelled():
    """Zero unaries and repulsive (non-submodular) edges on an odd cycle: both labellings
    of every node are optimal somewhere, roof duality labels nothing, and the completion
    still finds a maximiser."""
    V = 5
    edges = cycle_edges(V)
    pairwise = np.tile(np.array([[0.0, 1.0], [1.0, 0.0]]), (V, 1, 1))
    unary = np.zeros((V, 2))
    _, val = brute_force(unary, edges, pairwise)
    x, roof = qpbo_partial(unary, edges, pairwise)
    assert np.all(x == -1)
    assert roof == pytest.approx(V)  # the half-integral relaxation cuts every edge
    y, value, bound, info = qpbo(unary, edges, pairwise, return_info=True)
    assert value == val.max() == V - 1 and bound == value
    assert info["n_unlabelled"] == V and info["components"] == [V]


def test_qpbo_submodular_ties_are_resolved_exactly():
    """A Potts chain with no unary preference: both constant labellings are optimal, QPBO
    labels nothing, and the submodular shortcut returns a maximiser beyond exhaustive_max."""
    V = 30
    edges = np.stack([np.arange(V - 1), np.arange(1, V)], 1).astype(np.int64)
    pairwise = np.tile(np.array([[1.0, 0.0], [0.0, 1.0]]), (V - 1, 1, 1))
    unary = np.zeros((V, 2))
    x, roof = qpbo_partial(unary, edges, pairwise)
    assert np.all(x == -1) and roof == pytest.approx(V - 1)
    y, value, bound = qpbo(unary, edges, pairwise, exhaustive_max=4)
    assert value == bound == V - 1


def test_back_ends_without_edges():
    unary = np.random.default_rng(3).normal(size=(4, 2))
    edges, pairwise = np.zeros((0, 2), np.int64), np.zeros((0, 2, 2))
    for backend in (trws, lp_relaxation, qpbo):
        y, value, bound = backend(unary, edges, pairwise)
        assert np.array_equal(y, unary.argmax(1))
        assert bound == value == pytest.approx(unary.max(1).sum())


def test_qpbo_rejects_more_than_two_labels():
    unary, edges, pairwise = make_instance("cycle", 3, 0, False)
    with pytest.raises(ValueError):
        qpbo_partial(unary, edges, pairwise)
    with pytest.raises(ValueError):
        qpbo(unary, edges, pairwise)


def test_icm_never_lowers_the_value():
    unary, edges, pairwise = make_instance("grid3x3", 3, 1, True)
    rng = np.random.default_rng(1)
    for _ in range(5):
        y0 = rng.integers(0, 3, unary.shape[0])
        y, value = icm(unary, edges, pairwise, y0)
        assert value >= graph_energy(unary, edges, pairwise, y0) - 1e-12
        assert value == pytest.approx(graph_energy(unary, edges, pairwise, y))


def test_graph_inference_benchmark_smoke(tmp_path):
    import json

    pytest.importorskip("matplotlib")
    from structfw_bench.graph_inference import run_graph_inference

    doc = run_graph_inference(sizes=(16, 30), K=3, repeats=1, pgmpy=False, out=tmp_path, log=lambda *a: None)
    names = {(r["backend"], r["graph"]) for r in doc["rows"]}
    assert {("trws", "grid"), ("lp", "grid"), ("qpbo", "grid"), ("trws", "tree")} <= names
    for r in doc["rows"]:
        assert r["bound"] >= r["value"] and r["seconds_per_call"] > 0
        if r["backend"] == "tree":
            assert r["exact"]
    assert json.loads((tmp_path / "graph_inference.json").read_text())["benchmark"] == "graph-inference"
    assert (tmp_path / "graph_inference.png").stat().st_size > 1000
