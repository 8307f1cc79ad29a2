"""Tests for structfw.svm (FW / MFW / SWAP / PARTAN on the L2-SVM simplex dual)."""
import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.svm import SVC

from structfw.svm import FrankWolfeSVC, SimplexFWSolver, solve_simplex_qp
from structfw.svm._kernels import kernel_matrix

METHODS = ["fw", "mfw", "swap", "partan"]


def _qp_simplex(Q):
    """Exact min of 1/2 a^T Q a on the unit simplex with cvxopt (interior point)."""
    pytest.importorskip("cvxopt")
    from cvxopt import matrix, solvers
    m = Q.shape[0]
    sol = solvers.qp(matrix(Q), matrix(np.zeros(m)), matrix(-np.eye(m)), matrix(np.zeros(m)),
                     matrix(np.ones((1, m))), matrix(1.0),
                     options={"show_progress": False, "abstol": 1e-12, "reltol": 1e-12,
                              "feastol": 1e-12})
    assert sol["status"] == "optimal"
    a = np.array(sol["x"]).ravel()
    return a, 0.5 * a @ Q @ a


def _data(n=40, seed=0):
    X, y = make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0,
                               flip_y=0.1, random_state=seed)
    return X, y


def _modified_kernel(K, ypm, C):
    return np.outer(ypm, ypm) * (K + 1.0) + np.eye(len(ypm)) / C


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_all_methods_reach_qp_optimum(method, kernel):
    X, y = _data()
    C = 3.0
    # FW and PARTAN are O(1/eps) in iterations; the away/pairwise variants converge linearly
    tol = 1e-5 if method in ("fw", "partan") else 1e-8
    clf = FrankWolfeSVC(kernel=kernel, C=C, method=method, tol=tol, max_iter=2_000_000,
                        degree=2, coef0=1.0).fit(X, y)
    assert clf.converged_
    kind = {"linear": 0, "rbf": 1, "poly": 2}[kernel]
    K = kernel_matrix(X, X, kind, clf._gamma, 1.0, 2.0)
    ypm = np.where(y == clf.classes_[1], 1.0, -1.0)
    Q = _modified_kernel(K, ypm, C)
    _, fstar = _qp_simplex(Q)
    a = clf.alpha_[0]
    f = 0.5 * a @ Q @ a
    assert abs(f - clf.objective_[0]) < 1e-10          # recursion / maintained gradient exact
    assert -1e-9 <= f - fstar <= clf.gap_[0] + 1e-9     # gap bounds the suboptimality
    assert clf.gap_[0] <= tol
    assert abs(a.sum() - 1) < 1e-9 and a.min() >= 0


@pytest.mark.parametrize("method", METHODS)
def test_gap_bounds_true_suboptimality_along_trace(method):
    rng = np.random.default_rng(1)
    A = rng.normal(size=(30, 6))
    Q = A @ A.T + 0.1 * np.eye(30)
    _, fstar = _qp_simplex(Q)
    tol = 1e-5 if method in ("fw", "partan") else 1e-9
    s = solve_simplex_qp(Q, method=method, tol=tol, trace_every=3)
    tr = s.trace
    assert len(tr["gap"]) > 3
    assert np.all(tr["objective"] - fstar <= tr["gap"] + 1e-11)
    assert np.all(tr["objective"] - fstar >= -1e-11)
    assert np.all(np.diff(tr["iteration"]) >= 0) and np.all(np.diff(tr["time_s"]) >= 0)
    assert s.converged and 0 <= s.f - fstar + 1e-12 <= tol


def test_primal_recovery_matches_dual_optimum():
    X, y = _data(50, seed=3)
    C = 2.0
    clf = FrankWolfeSVC(C=C, method="swap", tol=1e-10, max_iter=10**6).fit(X, y)
    K = kernel_matrix(X, X, 1, clf._gamma, 0.0, 3.0)
    ypm = np.where(y == clf.classes_[1], 1.0, -1.0)
    Q = _modified_kernel(K, ypm, C)
    _, fstar = _qp_simplex(Q)
    a = clf.alpha_[0]
    # primal variables of  min ||w||^2 + b^2 - 2 rho + C sum xi^2,  y_i(w.phi_i + b) >= rho - xi_i
    ay = a * ypm
    w_sq = ay @ K @ ay
    b = ay.sum()
    xi = a / C
    margins = ypm * (K @ ay + b) + xi
    rho = margins.min()                                  # the largest feasible rho
    primal = w_sq + b * b - 2 * rho + C * np.sum(xi ** 2)
    dual = -a @ Q @ a
    assert np.isclose(primal - dual, 2 * clf.gap_[0], atol=1e-12)   # gap identity
    assert abs(primal - (-2 * fstar)) < 1e-8                       # strong duality
    # stored model is the unit-margin rescaling of (w, b)
    dec = clf.decision_function(X)
    assert np.allclose(dec, (K @ ay + b) / (a @ Q @ a))


def _f(Q, a):
    return 0.5 * a @ Q @ a


def test_partan_closed_form_equals_numerical_line_search():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(25, 5))
    Q = A @ A.T + 0.05 * np.eye(25)
    s = SimplexFWSolver(Q, None, kernel_kind=4, method="partan", tol=1e-12, max_iter=10**6,
                        diag=np.diag(Q).copy())
    s.initialize()
    checked = 0
    for _ in range(60):
        a0, ap0 = s.alpha.copy(), s.alpha_p.copy()
        if s.step(1):
            break
        st = s.last_step
        assert np.isclose(s.f, _f(Q, s.alpha), atol=1e-12)          # (15) vs direct
        if st["type"] != 3:
            continue
        i = st["i"]
        e = np.zeros(25)
        e[i] = 1.0
        res = minimize_scalar(lambda t: _f(Q, a0 + t * (e - a0)), bounds=(0, 1),
                              method="bounded", options={"xatol": 1e-12})
        assert abs(st["lam"] - res.x) < 1e-5                          # (11)
        at = a0 + st["lam"] * (e - a0)
        d = at - ap0
        neg, pos = d < -1e-15, d > 1e-15
        hi = np.min(at[neg] / -d[neg]) if neg.any() else 1e3
        lo = np.max(-at[pos] / d[pos]) if pos.any() else -1e3
        res2 = minimize_scalar(lambda t: _f(Q, at + t * d), bounds=(lo, hi), method="bounded",
                               options={"xatol": 1e-12})
        assert abs(st["mu"] - res2.x) < 1e-5 * max(1, abs(res2.x))    # (13) + clipping
        assert _f(Q, s.alpha) <= res2.fun + 1e-12
        assert np.allclose(s.alpha, np.maximum(at + st["mu"] * d, 0), atol=1e-12)
        checked += 1
    assert checked > 20


def _partan_reference(Q, i0, n_iter):
    """Plain numpy transcription of Algorithm 2 (exact line searches along e_i - alpha^(k)
    and alpha~ - alpha^(k-1), momentum point = the previous iterate), no recursions."""
    m = Q.shape[0]
    a = np.zeros(m)
    a[i0] = 1.0
    ap = None
    out = []
    for _ in range(n_iter):
        g = Q @ a
        f = 0.5 * a @ g
        i = int(np.argmin(g))
        e = np.zeros(m)
        e[i] = 1.0
        d = e - a
        lam = min(max(-(g @ d) / (d @ Q @ d), 0.0), 1.0)
        at = a + lam * d
        if ap is None:
            ap, a = a, at
        else:
            dd = at - ap
            mu = -(at @ Q @ dd) / (dd @ Q @ dd)
            ap, a = a, at + mu * dd
            assert a.min() >= -1e-14       # the unclipped PARTAN point stays feasible here
        out.append((i, f, a.copy()))
    return out


def test_partan_matches_numpy_transcription_of_algorithm2():
    X, y = _data(80, seed=3)
    ypm = np.where(y == 1, 1.0, -1.0)
    Q = _modified_kernel(kernel_matrix(X, X, 1, 0.3, 0.0, 3), ypm, 1.0)
    s = SimplexFWSolver(Q, None, kernel_kind=4, method="partan", tol=0.0, max_iter=10**6,
                        diag=np.full(80, Q[0, 0]))
    s.initialize()                         # alpha^(0) = e_0 (ties on the diagonal)
    ref = _partan_reference(Q, 0, 300)
    for k, (i, f, a) in enumerate(ref):
        s.step(1)
        assert s.last_step["i"] == i
        assert abs(s.f - 0.5 * a @ Q @ a) < 1e-12
        assert np.allclose(s.alpha, a, atol=1e-10), k


@pytest.mark.parametrize("method", ["fw", "partan", "swap"])
def test_float32_kernel_columns_keep_gap_accurate(method):
    X, y = make_classification(n_samples=400, n_features=30, n_informative=10,
                               random_state=4)
    ypm = np.where(y == 1, 1.0, -1.0)
    kw = dict(kernel_kind=1, gamma=0.02, C=1.0, method=method, tol=1e-5,
              max_iter=10**6)
    s64 = SimplexFWSolver(X, ypm, kernel_dtype="float64", **kw).run()
    s32 = SimplexFWSolver(X, ypm, kernel_dtype="float32", **kw).run()
    assert s32.cache.dtype == np.float32 and s32.g.dtype == np.float64
    assert s32.converged
    Q = _modified_kernel(kernel_matrix(X, X, 1, 0.02, 0.0, 3), ypm, 1.0)
    g = Q @ s32.alpha                       # exact float64 gradient at the float32 solution
    f = 0.5 * s32.alpha @ g
    assert abs(s32.f - f) < 1e-6
    assert abs(s32.gap - (2 * f - g.min())) < 1e-6     # reported gap is the true one
    assert abs(s32.f - s64.f) < 1e-5
    clf32 = FrankWolfeSVC(gamma=0.02, method=method, kernel_dtype="float32").fit(X, y)
    clf64 = FrankWolfeSVC(gamma=0.02, method=method, kernel_dtype="float64").fit(X, y)
    assert np.mean(clf32.predict(X) == clf64.predict(X)) > 0.99


def test_matches_sklearn_svc_on_separable_data():
    X, y = make_blobs(n_samples=200, centers=[[-3, -3], [3, 3]], cluster_std=1.0,
                      random_state=0)
    Xt, yt = make_blobs(n_samples=400, centers=[[-3, -3], [3, 3]], cluster_std=1.0,
                        random_state=1)
    for kernel in ["rbf", "linear"]:
        ref = SVC(kernel=kernel, C=1.0, gamma="scale").fit(X, y)
        for method in METHODS:
            clf = FrankWolfeSVC(kernel=kernel, C=1.0, method=method).fit(X, y)
            assert np.mean(clf.predict(Xt) == ref.predict(Xt)) >= 0.995
            assert np.array_equal(np.sign(clf.decision_function(Xt)),
                                  np.sign(ref.decision_function(Xt))) or \
                np.mean(np.sign(clf.decision_function(Xt)) ==
                        np.sign(ref.decision_function(Xt))) >= 0.995
            assert clf.score(Xt, yt) >= 0.99


def test_precomputed_equals_rbf_and_attributes():
    X, y = _data(60, seed=5)
    a = FrankWolfeSVC(kernel="rbf", gamma=0.3, tol=1e-8, method="mfw").fit(X, y)
    K = kernel_matrix(X, X, 1, 0.3, 0.0, 3.0)
    b = FrankWolfeSVC(kernel="precomputed", tol=1e-8, method="mfw").fit(K, y)
    assert np.allclose(a.alpha_, b.alpha_, atol=1e-10)
    assert np.allclose(a.decision_function(X), b.decision_function(K), atol=1e-8)
    assert a.dual_coef_.shape == (1, len(a.support_))
    assert a.n_support_.sum() == len(a.support_)
    assert a.intercept_.shape == (1,) and a.n_iter_.shape == (1,)
    assert set(a.trace_) == {"iteration", "gap", "objective", "time_s"}
    assert a.trace_["gap"][-1] <= 1e-8


def test_gamma_scale_and_auto_match_sklearn():
    X, y = _data(40)
    for g in ["scale", "auto", 0.7]:
        ours = FrankWolfeSVC(gamma=g).fit(X, y)._gamma
        ref = SVC(gamma=g).fit(X, y)._gamma
        assert np.isclose(ours, ref)


def test_small_cache_gives_same_solution():
    X, y = _data(80, seed=7)
    a = FrankWolfeSVC(method="swap", tol=1e-7, cache_size=1e-6).fit(X, y)   # 2 slots
    b = FrankWolfeSVC(method="swap", tol=1e-7, cache_size=100).fit(X, y)
    assert np.allclose(a.alpha_, b.alpha_, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_sampled_search(method):
    X, y = _data(300, seed=4)
    full = FrankWolfeSVC(method=method, tol=1e-5).fit(X, y)
    smp = FrankWolfeSVC(method=method, tol=1e-5, sample_size=20, sample_check="full",
                        random_state=0).fit(X, y)
    assert smp.converged_ and smp.gap_[0] <= 1e-5      # full check: exact gap below tol
    assert abs(smp.objective_[0] - full.objective_[0]) <= 2e-5
    rs = FrankWolfeSVC(method=method, tol=1e-5, sample_size=20, random_state=0).fit(X, y)
    rs2 = FrankWolfeSVC(method=method, tol=1e-5, sample_size=20, random_state=0).fit(X, y)
    assert np.array_equal(rs.alpha_, rs2.alpha_)        # reproducible
    assert rs.score(X, y) >= full.score(X, y) - 0.05
    big = FrankWolfeSVC(method=method, tol=1e-5, sample_size=10**6).fit(X, y)
    assert np.array_equal(big.alpha_, full.alpha_)      # sample >= n is the full search


def test_multiclass_one_vs_rest():
    X, y = load_iris(return_X_y=True)
    clf = FrankWolfeSVC(C=10.0).fit(X, y)
    dec = clf.decision_function(X)
    assert dec.shape == (150, 3)
    assert np.array_equal(clf.predict(X), clf.classes_[dec.argmax(1)])
    assert clf.score(X, y) > 0.95
    assert clf.dual_coef_.shape == (3, len(clf.support_))
    assert len(clf.trace_) == 3 and clf.n_iter_.shape == (3,)
    yl = np.array(["a", "b", "c"])[y]
    assert set(FrankWolfeSVC().fit(X, yl).predict(X)) <= {"a", "b", "c"}


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator
    res = check_estimator(FrankWolfeSVC(), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in res
              if r["status"] == "failed"]
    assert not failed, failed


@pytest.mark.parametrize("params, match", [
    ({"C": 0}, "parameter \'C\' must"), ({"C": -1.0}, "parameter \'C\' must"), ({"method": "newton"}, "parameter \'method\' must"),
    ({"kernel": "sigmoidal"}, "parameter \'kernel\' must"), ({"tol": 0}, "parameter \'tol\' must"),
    ({"tol": -1e-3}, "parameter \'tol\' must"), ({"sample_size": 0}, "parameter \'sample_size\' must"),
    ({"sample_size": 2.5}, "parameter \'sample_size\' must"), ({"max_iter": 0}, "parameter \'max_iter\' must"),
    ({"cache_size": 0}, "parameter \'cache_size\' must"), ({"gamma": "wide"}, "parameter \'gamma\' must"),
    ({"gamma": -1.0}, "parameter \'gamma\' must"), ({"sample_check": "x"}, "parameter \'sample_check\' must"),
    ({"trace_every": 0}, "parameter \'trace_every\' must"), ({"degree": -1}, "parameter \'degree\' must"),
    ({"kernel_dtype": "float16"}, "parameter \'kernel_dtype\' must"), ({"block": 0}, "parameter \'block\' must"),
    ({"block": "big"}, "parameter \'block\' must"),
])
def test_bad_parameters(params, match):
    X, y = _data(20)
    with pytest.raises(ValueError, match=match):
        FrankWolfeSVC(**params).fit(X, y)


def test_bad_data():
    X, y = _data(20)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FrankWolfeSVC().fit(Xn, y)
    with pytest.raises(ValueError, match="square"):
        FrankWolfeSVC(kernel="precomputed").fit(X @ X.T[:, :10], y)
    with pytest.raises(ValueError, match="class"):
        FrankWolfeSVC().fit(X, np.zeros(20))
    clf = FrankWolfeSVC().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


@pytest.mark.parametrize("method", METHODS)
def test_block_prefetch_does_not_change_iterates(method):
    X, y = _data(120, seed=8)
    ypm = np.where(y == 1, 1.0, -1.0)
    runs = [SimplexFWSolver(X, ypm, kernel_kind=1, gamma=0.2, C=1.0, method=method,
                            tol=1e-6, block=b, cache_size=cs).run()
            for b, cs in [(1, 100), (16, 100), (16, 0.01)]]   # 0.01 MB: 10 slots, evicting
    for r in runs[1:]:   # same problem; only BLAS-3 vs BLAS-2 rounding of the dot products
        assert r.converged and abs(r.f - runs[0].f) <= 1e-6
        assert np.allclose(r.alpha, runs[0].alpha, atol=1e-3)
    assert runs[1].cache_stats["prefetched"] > 0


def test_bench_cli_help_and_import_is_light():
    import subprocess
    import sys
    code = ("import sys, structfw; had = 'matplotlib' in sys.modules; import structfw.svm; "
            "from structfw_bench.svm import bench_svm; "
            "assert had or 'matplotlib' not in sys.modules; print(bench_svm.name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "svm"
    from click.testing import CliRunner
    from structfw_bench.svm import bench_svm
    r = CliRunner().invoke(bench_svm, ["--help"])
    assert r.exit_code == 0 and "--quick" in r.output and "--large" in r.output
