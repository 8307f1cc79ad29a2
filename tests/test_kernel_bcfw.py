"""Kernelized BCFW (BCFW paper, App. B.5, Alg. B.1) as the engine on the kernel map's coordinates:
the map itself, against linear BCFW, every engine option against the exact kernel QP, the honesty of
its gap, option and model errors, warm starts, Ctrl-C, prediction, the regularisation path, and OCR.

The exact optimum is computed independently of the solver: every labelling of every example
is enumerated, the joint kernel k((x, y), (x', y')) = sum_{t,s} [y_t == y'_s] kappa(x_t, x'_s)
+ <E(y), E(y')> is evaluated from its definition (scipy's cdist), and the dual QP over the
product of simplices is solved with cvxopt.
"""
import _thread
import itertools
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from sklearn.base import clone

import structfw as sf
from structfw.models import ChainModel, MulticlassModel
from structfw.solvers import BCFW, KernelBCFW, SOLVER_NAMES
from structfw.solvers.kernel_bcfw import KernelMap, KernelState, LargeFitWarning
from toy import make_toy

LAM = 0.1


# ============================================================ independent reference
def kappa(A, B, kernel, gamma, degree=3, coef0=1.0):
    A, B = np.atleast_2d(A), np.atleast_2d(B)
    if kernel == "linear":
        return A @ B.T
    if kernel == "rbf":
        return np.exp(-gamma * cdist(A, B, "sqeuclidean"))
    return (gamma * A @ B.T + coef0) ** degree


def transitions(y, K):
    E = np.zeros((K, K))
    for a, b in zip(y[:-1], y[1:]):
        E[a, b] += 1
    return E


def positions(x):
    return np.atleast_2d(np.asarray(x, float))


def labelling(y):
    return np.atleast_1d(np.asarray(y, np.int64))


def joint_kernel(x, y, xp, yp, K, spec):
    """k((x, y), (x', y')) from its definition."""
    kap = kappa(positions(x), positions(xp), *spec)
    y, yp = labelling(y), labelling(yp)
    return float(np.sum(kap * (y[:, None] == yp[None, :]))) + float(np.sum(transitions(y, K) * transitions(yp, K)))


def all_labellings(x, K):
    return [np.array(y) for y in itertools.product(range(K), repeat=positions(x).shape[0])]


def exact_kernel_dual(X, Y, K, lam, spec):
    """max_alpha -lam/2 ||A alpha||^2 + b^T alpha over the product of simplices, every labelling
    enumerated, <psi_i(y), psi_j(y')> from the joint kernel; returns D*."""
    import cvxopt
    from cvxopt import solvers

    n = len(X)
    items = [(i, y) for i, x in enumerate(X) for y in all_labellings(x, K)]
    M = len(items)
    G = np.zeros((M, M))
    for a, (i, y) in enumerate(items):
        for b, (j, yp) in enumerate(items[:a + 1]):
            yi, yj = labelling(Y[i]), labelling(Y[j])
            G[a, b] = G[b, a] = (joint_kernel(X[i], yi, X[j], yj, K, spec) - joint_kernel(X[i], yi, X[j], yp, K, spec)
                                 - joint_kernel(X[i], y, X[j], yj, K, spec) + joint_kernel(X[i], y, X[j], yp, K, spec))
    Q = G / (lam * n) ** 2
    b = np.array([np.mean(y != labelling(Y[i])) / n for i, y in items])
    Aeq = np.zeros((n, M))
    for a, (i, _) in enumerate(items):
        Aeq[i, a] = 1.0
    solvers.options.update(show_progress=False, abstol=1e-13, reltol=1e-13, feastol=1e-13)
    sol = solvers.qp(cvxopt.matrix(lam * Q + 1e-13 * np.eye(M)), cvxopt.matrix(-b), cvxopt.matrix(-np.eye(M)),
                     cvxopt.matrix(np.zeros(M)), cvxopt.matrix(Aeq), cvxopt.matrix(np.ones(n)))
    alpha = np.array(sol["x"]).ravel()
    return -0.5 * lam * alpha @ Q @ alpha + b @ alpha


def expansion_primal(exp, X, Y, K, lam, spec):
    """P(w) of a fitted expansion by enumeration of every labelling (not the solver's Viterbi)."""
    sv, coef, P = np.asarray(exp.support.todense() if sp.issparse(exp.support) else exp.support), exp.coef, \
        exp.transitions
    sq = float(np.sum(coef * (kappa(sv, sv, *spec) @ coef))) + float(np.sum(P * P))
    hinge = 0.0
    for x, yt in zip(X, Y):
        U = kappa(positions(x), sv, *spec) @ coef if len(sv) else np.zeros((positions(x).shape[0], K))
        yt = labelling(yt)

        def score(y):
            return U[np.arange(len(y)), y].sum() + np.sum(transitions(y, K) * P)

        hinge += max(np.mean(y != yt) + score(y) - score(yt) for y in all_labellings(x, K))
    return 0.5 * lam * sq + hinge / len(X)


def tiny_chain(seed=0, n=4, F=3, K=3, lengths=(2, 4)):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(*lengths)), F)) for _ in range(n)]
    Y = [rng.integers(0, K, len(x)) for x in X]
    return X, Y, ChainModel(K, F)


def small_chain(seed=1, n=12, F=5, K=3):
    return tiny_chain(seed, n, F, K, lengths=(2, 6))


def tiny_multiclass(seed=0, n=6, F=2, K=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    Y = [int(v) for v in rng.integers(0, K, n)]
    return list(X), Y, MulticlassModel(K, F)


def fit(model, X, Y, solver, passes, tol=None, lam=LAM, seed=0, check_every=1, **kw):
    return sf.StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=tol, check_every=check_every,
                            random_state=seed, **kw).fit(X, Y)


# ============================================================ the map
@pytest.mark.parametrize("kernel,gamma", [("rbf", 0.5), ("poly", 0.3), ("linear", 1.0)])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_the_map_factors_the_gram_matrix_and_projects_new_positions(kernel, gamma, sparse):
    """G = Z Z^T to the tolerance; Z[pivots] is lower triangular; the training positions map to their
    rows of Z; a new position maps to the coordinates of its projection on the span, whose inner
    products with the training positions are kappa's."""
    X, Y, model = small_chain()
    Xin = [sp.csr_matrix(x) for x in X] if sparse else X
    spec = (kernel, gamma, 3, 1.0)
    kmap = KernelMap(model, Xin, spec)
    P = np.concatenate(X)
    G = kappa(P, P, kernel, gamma)
    np.testing.assert_allclose(kmap.Z @ kmap.Z.T, G, rtol=0, atol=1e-9 * np.abs(G).max())
    assert kmap.residual <= 1e-9 * np.abs(np.diag(G)).max()
    assert kmap.rank == (5 if kernel == "linear" else kmap.rank) and kmap.rank <= P.shape[0]
    L = kmap.Z[kmap.pivots]
    np.testing.assert_array_equal(L, np.tril(L))
    assert np.all(np.diag(L) > 0)
    np.testing.assert_allclose(kmap.transform(sp.csr_matrix(P) if sparse else P), kmap.Z, rtol=0, atol=1e-8)
    new = np.random.default_rng(9).normal(size=(4, 5))
    np.testing.assert_allclose(kmap.transform(new) @ kmap.Z.T, kappa(new, P, kernel, gamma), rtol=0, atol=1e-8)
    # the inputs of the linear problem are the examples' rows of Z
    assert [z.shape for z in kmap.inputs()] == [(len(x), kmap.rank) for x in X]
    lin = kmap.linear_model()
    assert type(lin) is ChainModel and (lin.n_states, lin.n_features) == (3, kmap.rank)


def test_an_expansion_scores_as_its_w_in_coordinates():
    """kappa(x, support) @ coef == z(x) @ W for training and new positions; transitions kept."""
    X, Y, model = small_chain()
    kmap = KernelMap(model, X, ("rbf", 0.4, 3, 1.0))
    w = np.random.default_rng(2).normal(size=3 * kmap.rank + 9)
    exp = kmap.expansion(w)
    W = w[:3 * kmap.rank].reshape(3, kmap.rank).T
    for pos in (np.concatenate(X), np.random.default_rng(3).normal(size=(6, 5))):
        np.testing.assert_allclose(exp.unary_scores(pos), kmap.transform(pos) @ W, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(exp.transitions, w[-9:].reshape(3, 3))
    assert exp.n_support == kmap.rank


def test_a_capped_rank_is_nystrom_with_greedy_pivots():
    """kernel_rank = N gives the full factorisation's Gram matrix; a smaller cap leaves a residual
    that shrinks as the rank grows, and Z Z^T agrees with G on the pivots' rows."""
    X, Y, model = small_chain()
    spec = ("rbf", 0.5, 3, 1.0)
    full = KernelMap(model, X, spec)
    N = full.Z.shape[0]
    capped = KernelMap(model, X, spec, max_rank=N)
    np.testing.assert_allclose(capped.Z @ capped.Z.T, full.Z @ full.Z.T, rtol=0, atol=1e-9)
    P = np.concatenate(X)
    G = kappa(P, P, "rbf", 0.5)
    residuals = []
    for r in (3, 10, 25):
        m = KernelMap(model, X, spec, max_rank=r)
        assert m.rank == r and len(set(m.pivots.tolist())) == r
        np.testing.assert_allclose((m.Z @ m.Z.T)[m.pivots], G[m.pivots], rtol=0, atol=1e-10)
        residuals.append(m.residual)
    assert residuals[0] > residuals[1] > residuals[2] > 0


# ============================================================ (a) linear kernel == linear BCFW
# not step="pairwise": revisiting a block right after its exact line search makes the away labelling
# a tie (H_i(y*) = H_i(y_a) up to rounding), which rounding breaks differently in the two solvers; both
# reach the QP optimum (test_pairwise_steps_reach_the_exact_kernel_qp_optimum_on_a_tiny_chain)
LINEAR_OPTIONS = [dict(), dict(sampling="perm"), dict(step_size="predefined"), dict(averaging="weighted"),
                  dict(averaging="suffix"), dict(sampling="gap", gap_refresh=3), dict(cache=True),
                  dict(multi_plane=True)]


@pytest.mark.parametrize("options", LINEAR_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "fw")
@pytest.mark.parametrize("problem", ["chain", "multiclass"])
def test_linear_kernel_reproduces_linear_bcfw_iterates(options, problem):
    """Same random_state, same sampling: the same primal, dual and gap after every pass and the same w
    (the coordinates are a rotation of the features: the same dual point)."""
    X, Y, model = small_chain() if problem == "chain" else tiny_multiclass(n=15, F=4)
    ref = fit(model, X, Y, BCFW(**options), passes=8)
    ker = fit(model, X, Y, KernelBCFW(kernel="linear", **options), passes=8)
    assert len(ker.trace_) == len(ref.trace_) == 9
    for col in ("primal", "dual", "gap", "passes"):
        np.testing.assert_allclose(ker.trace_[col], ref.trace_[col], rtol=0, atol=1e-8, err_msg=col)
    np.testing.assert_allclose(ker.coef_, ref.coef_, rtol=0, atol=1e-8)
    assert ker.kernel_expansion_ is not None
    assert ker.predict(X) == ref.predict(X) if problem == "multiclass" else all(
        np.array_equal(a, b) for a, b in zip(ker.predict(X), ref.predict(X)))


# ============================================================ (b) the exact kernel QP optimum
def check_optimum(svm, X, Y, K, lam, spec, Dstar, tol=1e-8):
    tr = svm.trace_
    assert np.all(tr["dual"] <= Dstar + 1e-10) and np.all(tr["primal"] >= Dstar - 1e-10)
    assert svm.stopped_ == "tol" and abs(svm.dual_ - Dstar) < tol and svm.primal_ - Dstar < tol
    # P(w) of the returned predictor, by enumeration with kappa itself, is what the solver reported
    assert expansion_primal(svm.kernel_expansion_, X, Y, K, lam, spec) == pytest.approx(svm.primal_, abs=1e-9)


@pytest.mark.parametrize("kernel,gamma", [("rbf", 0.5), ("poly", 0.3), ("linear", 1.0)])
def test_pairwise_steps_reach_the_exact_kernel_qp_optimum_on_a_tiny_chain(kernel, gamma):
    X, Y, model = tiny_chain()
    spec = (kernel, gamma)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, spec)
    svm = fit(model, X, Y, KernelBCFW(kernel=kernel, gamma=gamma, step="pairwise"), passes=3000, tol=1e-9,
              check_every=10)
    check_optimum(svm, X, Y, 3, LAM, spec, Dstar)


@pytest.mark.parametrize("options", [dict(sampling="gap"), dict(sampling="max_gap", gap_refresh=5),
                                     dict(cache=True), dict(sampling="gap", cache=True, gap_refresh=None)],
                         ids=["gap", "max_gap", "cache", "gap-cache-inf"])
@pytest.mark.parametrize("step", ["fw", "pairwise", "away"])
def test_gap_sampling_and_the_cache_reach_the_exact_kernel_qp_optimum(options, step):
    """Osokin et al.'s gap sampling and gap-based cache with a kernel: the same optimum, an honest gap
    on the way, the cache's hits counted and the gap passes' calls too."""
    X, Y, model = tiny_chain(seed=1)
    spec = ("rbf", 0.5)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, spec)
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5, step=step, **options), passes=3000,
              tol=1e-9 if step != "fw" else None, check_every=10)
    tr = svm.trace_
    assert np.all(tr["dual"] <= Dstar + 1e-10) and np.all(tr["primal"] >= Dstar - 1e-10)
    assert np.all(np.diff(tr["dual"]) >= -1e-12)  # every step is an exact line search: D never falls
    if step != "fw":  # pairwise and away steps: the linear rate
        check_optimum(svm, X, Y, 3, LAM, spec, Dstar)
    else:  # FW steps: the sublinear rate (the optimum lies on a face of the block simplices)
        assert Dstar - svm.dual_ < 3e-4 and tr["gap"][-1] < 0.01 * tr["gap"][0]
    if options.get("cache"):
        assert tr["cache_hits"][-1] > 0
    # the gap passes are the algorithm's: they count as oracle calls
    assert tr["oracle_calls"][-1] + tr["cache_hits"][-1] >= svm.state_.k


# the engine's options Alg. B.1's own implementation never had: MP-BCFW's working sets and approximate
# passes (N = 3 planes kept), minibatches (on threads, and asynchronous windows), sparse block rows
ENGINE_OPTIONS = [dict(multi_plane=True, step="pairwise"), dict(multi_plane=True, step="away", max_planes=3),
                  dict(minibatch=3, step="pairwise"), dict(minibatch=3, asynchronous=True, step="away"),
                  dict(step="pairwise", sampling="gap", cache=True, block_storage="sparse")]


@pytest.mark.parametrize("options", ENGINE_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_every_engine_option_reaches_the_exact_kernel_qp_optimum(options):
    X, Y, model = tiny_chain(seed=4)
    spec = ("rbf", 0.5)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, spec)
    threads = dict(n_jobs=2, executor="thread") if options.get("minibatch", 1) > 1 else {}
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5, **options), passes=3000, tol=1e-8, check_every=5, **threads)
    tr = svm.trace_
    assert np.all(tr["dual"] <= Dstar + 1e-10) and np.all(tr["primal"] >= Dstar - 1e-10)
    check_optimum(svm, X, Y, 3, LAM, spec, Dstar)
    assert isinstance(svm.state_, KernelState)


def test_gap_sampling_draws_by_the_block_gaps():
    """After a gap pass, the sampler's estimates are the block gaps, which sum to the duality gap
    (eq. (7) of Osokin et al.)."""
    X, Y, model = tiny_chain(seed=2)
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5, sampling="gap", gap_refresh=1), passes=3)
    st = svm.state_
    assert st.full_gap == pytest.approx(svm.trace_["gap"][-1], rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(st.oracle_gaps, st.sampler.estimates, rtol=0, atol=1e-12)
    assert np.all(st.oracle_gaps >= -1e-12)


@pytest.mark.parametrize("kernel,gamma", [("rbf", 0.5), ("linear", 1.0)])
def test_away_steps_reach_the_exact_kernel_qp_optimum(kernel, gamma):
    X, Y, model = tiny_chain()
    spec = (kernel, gamma)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, spec)
    svm = fit(model, X, Y, KernelBCFW(kernel=kernel, gamma=gamma, step="away"), passes=3000, tol=1e-9,
              check_every=10)
    check_optimum(svm, X, Y, 3, LAM, spec, Dstar)
    assert KernelBCFW(step="away").label == "kernel-BCAFW-rbf"


def test_rbf_multiclass_reaches_the_exact_qp_optimum():
    """MulticlassModel as a chain of length 1 (no transitions, 0-1 loss)."""
    X, Y, model = tiny_multiclass()
    spec = ("rbf", 0.7)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, spec)
    svm = fit(model, X, Y, KernelBCFW(kernel="rbf", gamma=0.7, step="pairwise"), passes=3000, tol=1e-9,
              check_every=10)
    check_optimum(svm, X, Y, 3, LAM, spec, Dstar)
    pred = svm.predict(X)
    assert all(isinstance(p, int) for p in pred)


# ============================================================ (c) an honest certificate
@pytest.mark.parametrize("options", [dict(), dict(step_size="predefined"), dict(averaging="weighted")],
                         ids=["linesearch", "predefined", "wavg"])
def test_gap_bounds_the_true_suboptimality_at_every_checkpoint(options):
    X, Y, model = tiny_chain(seed=3)
    Dstar = exact_kernel_dual(X, Y, 3, LAM, ("rbf", 0.5))
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5, **options), passes=60)
    tr = svm.trace_
    assert np.all(tr["dual"] <= Dstar + 1e-10)               # weak duality: D(alpha) <= D*
    assert np.all(tr["primal"] >= Dstar - 1e-10)             # and P(w) >= P* = D*
    assert np.all(tr["gap"] >= tr["primal"] - Dstar - 1e-12)  # the gap bounds P(w) - P*
    np.testing.assert_allclose(tr["gap"], tr["primal"] - tr["dual"], atol=1e-13)
    assert tr["gap"][-1] < 0.1 * tr["gap"][0]
    assert expansion_primal(svm.kernel_expansion_, X, Y, 3, LAM, ("rbf", 0.5)) == pytest.approx(svm.primal_,
                                                                                                 abs=1e-9)


def test_a_capped_rank_solves_the_nystrom_kernels_problem():
    """kernel_rank = r: the optimum of the problem of the kernel Z Z^T (its QP from Z itself), with the
    residual in the trace; a rank >= the exact one changes nothing."""
    X, Y, model = tiny_chain(seed=5)
    N = sum(len(x) for x in X)
    exact = fit(model, X, Y, KernelBCFW(gamma=0.5, step="pairwise"), passes=3000, tol=1e-9, check_every=10)
    same = fit(model, X, Y, KernelBCFW(gamma=0.5, step="pairwise", kernel_rank=N), passes=3000, tol=1e-9,
               check_every=10)
    assert same.dual_ == pytest.approx(exact.dual_, abs=1e-8)
    capped = fit(model, X, Y, KernelBCFW(gamma=0.5, step="pairwise", kernel_rank=4), passes=3000, tol=1e-9,
                 check_every=10)
    kmap = KernelMap(model, X, ("rbf", 0.5, 3, 1.0), max_rank=4)
    Zs = [z for z in kmap.inputs()]
    Dnys = exact_kernel_dual(Zs, Y, 3, LAM, ("linear", 1.0))
    assert capped.stopped_ == "tol" and abs(capped.dual_ - Dnys) < 1e-8
    assert capped.trace_.meta["kernel_map_rank"] == 4
    assert capped.trace_.meta["kernel_residual"] == pytest.approx(kmap.residual) and kmap.residual > 1e-3


# ============================================================ (d) errors
BAD_OPTIONS = [("kernel", "sigmoid"), ("gamma", 0.0), ("gamma", -1.0), ("gamma", float("nan")), ("gamma", "scale"),
               ("degree", 0), ("degree", 2.5), ("coef0", float("inf")), ("step_size", "armijo"),
               ("sampling", "importance"), ("gap_refresh", 0), ("cache_F", 0.0), ("step", "newton"),
               ("averaging", "uniform"), ("kernel_tol", -1.0), ("kernel_rank", 0), ("kernel_rank", 2.5),
               ("minibatch", 0)]


@pytest.mark.parametrize("name,value", BAD_OPTIONS)
def test_bad_options_are_errors_naming_the_option(name, value):
    with pytest.raises(ValueError, match=f"^{name} must"):
        KernelBCFW(**{name: value})
    with pytest.raises(ValueError, match=f"^{name} must"):
        KernelBCFW().set_params(**{name: value})
    solver = KernelBCFW()
    setattr(solver, name, value)  # assigned after construction: checked when the fit starts
    X, Y, model = tiny_chain()
    with pytest.raises(ValueError, match=f"^{name} must"):
        sf.StructuredSVM(model, solver=solver).fit(X, Y)


class _HingeChain(ChainModel):
    """A chain with another loss: not what the joint kernel describes."""

    def loss(self, y_true, y):
        return float(np.sum(y_true != y))


def test_models_it_cannot_kernelize_are_refused_with_a_clear_error():
    toy, Xt, Yt = make_toy()
    X, Y, _ = tiny_chain()
    cases = [(toy, Xt, Yt), (_HingeChain(3, 3), X, Y)]
    for model, XX, YY in cases:
        with pytest.raises(ValueError, match=rf"kernel-bcfw.*{type(model).__name__}"):
            sf.StructuredSVM(model, solver="kernel-bcfw").fit(XX, YY)
        with pytest.raises(ValueError, match=rf"kernel-bcfw.*{type(model).__name__}"):
            KernelMap(model, XX, ("rbf", 0.5, 3, 1.0))


def test_kernelized_fits_are_saved_with_their_expansion_and_linear_ones_with_coef(tmp_path):
    X, Y, model = tiny_chain()
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5), passes=3)
    assert svm.coef_ is None
    back = sf.StructuredSVM.load(svm.save(tmp_path / "m"))
    assert back.coef_ is None and back.kernel_expansion_.spec == svm.kernel_expansion_.spec
    assert all(np.array_equal(a, b) for a, b in zip(back.predict(X), svm.predict(X)))
    assert back.score(X, Y) == svm.score(X, Y)
    with pytest.raises(ValueError, match="state=True: the state of solver 'kernel-bcfw' cannot be written"):
        svm.save(tmp_path / "s", state=True)
    # the expansion is checked against the model it is loaded with
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    bad = {**members, "expansion/coef": members["expansion/coef"][:, :2]}
    bad["digest"] = np.array(sf.io.members_digest(bad))   # sealed: the field check must catch it
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValueError, match="expansion/coef.*shape"):
        sf.StructuredSVM.load(tmp_path / "bad.npz")
    lin = fit(model, X, Y, KernelBCFW(kernel="linear"), passes=3)
    loaded = sf.StructuredSVM.load(lin.save(tmp_path / "lin"))
    assert all(np.array_equal(a, b) for a, b in zip(loaded.predict(X), lin.predict(X)))


# ============================================================ (e) warm starts
@pytest.mark.parametrize("options", [dict(), dict(step="pairwise"), dict(averaging="weighted", sampling="perm"),
                                     dict(step_size="predefined"), dict(multi_plane=True)],
                         ids=["fw", "pairwise", "wavg-perm", "predefined", "mp"])
def test_warm_start_continues_the_run_exactly(options):
    """3 + 3 passes == 6 passes: the state keeps its map, the engine continues its run."""
    X, Y, model = small_chain()
    once = fit(model, X, Y, KernelBCFW(gamma=0.3, **options), passes=6, seed=5)
    split = fit(model, X, Y, KernelBCFW(gamma=0.3, **options), passes=3, seed=5, warm_start=True)
    kmap = split.state_.kmap
    split.fit(X, Y)
    assert split.state_.kmap is kmap
    a, b = once.kernel_expansion_, split.kernel_expansion_
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.transitions, b.transitions)
    assert split.primal_ == once.primal_ and split.dual_ == once.dual_
    assert split.n_iter_ == 6 and once.n_iter_ == 6  # a continued run counts on
    assert split.state_.k == once.state_.k


def test_warm_start_at_a_new_lam_keeps_alpha_and_a_new_kernel_starts_afresh():
    """A new lam rescales w = A alpha (the first checkpoint's dual is the rescaled point's) and the fit
    reaches that problem's optimum; a new gamma is another feature space: a warning, a fresh start, and
    the new problem's optimum."""
    X, Y, model = tiny_chain()
    svm = fit(model, X, Y, KernelBCFW(gamma=0.5, step="pairwise"), passes=5, warm_start=True)
    state = svm.state_
    lam2 = 0.03
    svm.set_params(lam=lam2, max_passes=3000, tol=1e-9, check_every=10).fit(X, Y)
    assert svm.state_ is state and svm.stopped_ == "tol"
    assert abs(svm.dual_ - exact_kernel_dual(X, Y, 3, lam2, ("rbf", 0.5))) < 1e-8
    with pytest.warns(RuntimeWarning, match="kernel .* changed.*starting afresh"):
        svm.set_params(solver__gamma=0.2).fit(X, Y)
    assert svm.state_ is not state and svm.stopped_ == "tol"
    assert abs(svm.dual_ - exact_kernel_dual(X, Y, 3, lam2, ("rbf", 0.2))) < 1e-8


def test_a_state_from_other_data_is_not_reused():
    X, Y, model = small_chain()
    svm = fit(model, X, Y, KernelBCFW(), passes=2, warm_start=True)
    with pytest.warns(RuntimeWarning, match="other data"):
        svm.fit(X[:-1], Y[:-1])
    assert isinstance(svm.state_, KernelState) and svm.state_.n == len(X) - 1


def test_time_budget_ends_the_fit():
    X, Y, model = small_chain(n=40)
    svm = fit(model, X, Y, KernelBCFW(), passes=10 ** 6, check_every=1, time_budget=0.3)
    assert svm.stopped_ == "time_budget"


# ============================================================ Ctrl-C
def test_ctrl_c_ends_interrupted_with_the_best_iterate_and_a_usable_state():
    X, Y = sf.datasets.load_ocr("train")
    X, Y = X[:60], Y[:60]
    model = ChainModel(26, 128)
    make = lambda passes: sf.StructuredSVM(model, solver=KernelBCFW(gamma=0.05), lam=0.01, max_passes=passes,  # noqa
                                           tol=None, check_every=5, random_state=0)
    make(1).fit(X, Y)  # compile first, so the timer falls inside the solve
    rng = np.random.default_rng(4)
    for _ in range(2):
        svm = make(10 ** 6)
        timer = threading.Timer(float(rng.uniform(0.1, 0.5)), _thread.interrupt_main)
        timer.start()
        try:
            svm.fit(X, Y)
        finally:
            timer.cancel()
        assert svm.stopped_ == "interrupted"
        assert svm.primal_ == np.min(svm.trace_["primal"])   # the best evaluated iterate
        assert len(svm.predict(X[:3])) == 3
        assert np.all(np.isfinite(svm.state_.w))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            svm.set_params(warm_start=True, max_passes=1).fit(X, Y)
        assert svm.stopped_ == "max_passes"


# ============================================================ estimator, prediction, options, path
def test_estimator_predicts_with_the_kernel_expansion_and_traces_the_test_loss():
    X, Y, model = small_chain(n=30)
    Xt, Yt = X[20:], Y[20:]
    X, Y = X[:20], Y[:20]
    svm = sf.StructuredSVM(model, solver=KernelBCFW(kernel="rbf", gamma=0.3), lam=LAM, max_passes=10, tol=None,
                           check_every=5, random_state=0).fit(X, Y, X_test=Xt, Y_test=Yt)
    exp = svm.kernel_expansion_
    assert svm.coef_ is None and exp.n_support > 0
    pred = svm.predict(Xt)
    assert [p.shape for p in pred] == [y.shape for y in Yt]
    assert svm.trace_["test_loss"][-1] == pytest.approx(1.0 - svm.score(Xt, Yt))
    # a refit with a linear solver leaves no stale expansion behind
    svm.set_params(solver="bcfw").fit(X, Y)
    assert svm.kernel_expansion_ is None and svm.coef_ is not None


def test_sparse_positions_give_the_dense_iterates():
    X, Y, model = small_chain()
    Xs = [sp.csr_matrix(x) for x in X]
    for kernel in ("rbf", "poly"):
        a = fit(model, X, Y, KernelBCFW(kernel=kernel, gamma=0.2), passes=4)
        b = fit(model, Xs, Y, KernelBCFW(kernel=kernel, gamma=0.2), passes=4)
        np.testing.assert_allclose(a.trace_["primal"], b.trace_["primal"], atol=1e-10)
        assert all(np.array_equal(p, q) for p, q in zip(a.predict(X), b.predict(Xs)))


def test_options_table_clone_and_registration():
    assert SOLVER_NAMES["kernel-bcfw"] is KernelBCFW
    solver = KernelBCFW(kernel="poly", gamma=0.5, degree=2, multi_plane=True, minibatch=2)
    assert solver.get_params()["degree"] == 2
    assert set(BCFW().get_params()) < set(solver.get_params())  # every engine option
    est = sf.StructuredSVM(ChainModel(3, 2), solver=solver)
    c = clone(est)
    assert c.solver.get_params() == solver.get_params() and c.solver is not solver
    est.set_params(solver__gamma=0.25)
    assert est.solver.gamma == 0.25
    assert "kernel_tol=1e-10" in repr(KernelBCFW())
    assert KernelBCFW(step="pairwise", averaging="weighted").label == "kernel-BCPFW-rbf-wavg"
    assert KernelBCFW(multi_plane=True, sampling="gap").label == "kernel-MP-BCFW-rbf-gap"
    with pytest.raises(ValueError, match="cache=True and multi_plane=True"):
        KernelBCFW(cache=True, multi_plane=True)


def test_the_regularisation_path_runs_on_the_maps_linear_problem():
    """Osokin et al.'s eps-approximate path with a kernel: the path of the linear problem on the map's
    inputs; at any lam its w, as an expansion, is eps-approximate for the kernel problem (its primal by
    enumeration with kappa against the exact kernel QP)."""
    X, Y, model = tiny_chain(seed=6)
    spec = ("rbf", 0.5)
    kmap = KernelMap(model, X, ("rbf", 0.5, 3, 1.0))
    eps = 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = sf.regularization_path(kmap.linear_model(), kmap.inputs(), Y, eps=eps, min_lam=0.05, random_state=0)
    assert len(path) >= 2
    for lam in (path.breakpoints[0], 0.5 * (path.breakpoints[0] + path.breakpoints[-1]), 0.06):
        exp = kmap.expansion(path.coef_at(lam))
        Pstar = exact_kernel_dual(X, Y, 3, lam, spec)
        assert expansion_primal(exp, X, Y, 3, lam, spec) - Pstar <= eps + 1e-9
    with pytest.raises(ValueError, match="linear BCFW engine.*KernelMap"):
        sf.regularization_path(model, X, Y, eps=eps, solver=KernelBCFW())


def test_rbf_separates_what_a_linear_multiclass_model_cannot():
    """XOR: no linear multiclass model separates it; the RBF expansion does."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(80, 2))
    Y = [int(v) for v in (X[:, 0] * X[:, 1] > 0)]
    model = MulticlassModel(2, 2)
    lin = fit(model, list(X), Y, BCFW(), passes=30, lam=0.001, check_every=10)
    rbf = fit(model, list(X), Y, KernelBCFW(gamma=2.0), passes=30, lam=0.001, check_every=10)
    assert lin.score(list(X), Y) < 0.8
    assert rbf.score(list(X), Y) > 0.95


# ============================================================ (f) OCR
@pytest.mark.slow
def test_rbf_beats_the_linear_model_on_an_ocr_subset():
    """1,000 random OCR training words, the 626 test words, lam = 0.01, 20 passes each: the RBF
    joint kernel (gamma = 0.05) has a clearly lower test error than the linear chain (measured:
    0.09 against 0.21; see docs/guide/kernel-bcfw.md)."""
    X, Y = sf.datasets.load_ocr("train")
    Xt, Yt = sf.datasets.load_ocr("test")
    idx = np.sort(np.random.default_rng(0).choice(len(X), 1000, replace=False))
    X, Y = [X[i] for i in idx], [Y[i] for i in idx]
    model = ChainModel(26, 128)
    lin = sf.StructuredSVM(model, solver=BCFW(), lam=0.01, max_passes=20, tol=None, random_state=0).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeFitWarning)  # factored w_i: 0.9 GB estimated, under the 1 GB warning
        rbf = sf.StructuredSVM(model, solver=KernelBCFW(kernel="rbf", gamma=0.05), lam=0.01, max_passes=20,
                               tol=None, random_state=0).fit(X, Y)
    assert rbf.state_.storage == "factored"
    err_lin, err_rbf = 1 - lin.score(Xt, Yt), 1 - rbf.score(Xt, Yt)
    assert err_rbf < 0.75 * err_lin
    assert rbf.gap_ < lin.gap_


def test_degenerate_spans_fit_and_predict():
    """Inputs a kernel cannot tell apart: all-zero positions under the linear kernel span {0} (only the
    transitions can score), identical positions under rbf span one direction; a rank cap above N is N."""
    Y = [np.array([0, 1]), np.array([2])]
    zero = fit(ChainModel(3, 4), [np.zeros((2, 4)), np.zeros((1, 4))], Y, KernelBCFW(kernel="linear"), passes=5)
    assert zero.trace_.meta["kernel_map_rank"] == 0 and zero.kernel_expansion_.n_support == 0
    assert [p.shape for p in zero.predict([np.zeros((3, 4))])] == [(3,)]
    same = fit(ChainModel(3, 4), [np.ones((2, 4)), np.ones((1, 4))], Y, KernelBCFW(gamma=0.5), passes=5)
    assert same.trace_.meta["kernel_map_rank"] == 1
    X, Y, model = tiny_chain()
    capped = fit(model, X, Y, KernelBCFW(gamma=0.5, kernel_rank=1000), passes=2)
    assert capped.trace_.meta["kernel_map_rank"] == sum(len(x) for x in X)
