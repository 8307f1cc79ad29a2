"""Numerical guards: a user oracle's invalid labelling, a lam too small for float64, MP-BCFW's
reproducible default, an indefinite precomputed SVC kernel."""
import warnings

import numpy as np
import pytest

import structfw as sf
from structfw.solvers import BCFW, MPBCFW, Problem
from structfw.solvers.problem import LAM_FLOOR, check_lam

from toy import EnumModel, make_toy


# ----------------------------------------------------------------- B1: user labellings
class _BadOracle(EnumModel):
    """The toy model whose oracle (or decoder) returns ``bad`` for example ``where`` from call ``after`` on."""

    def __init__(self, base, bad, where=2, after=0, method="loss_augmented_decode"):
        super().__init__(base.phi, base.loss_table)
        self.bad, self.where, self.after, self.method, self.calls = bad, where, after, method, 0

    def loss_augmented_decode(self, x, y_true, w):
        y = super().loss_augmented_decode(x, y_true, w)
        if self.method == "loss_augmented_decode" and int(x) == self.where:
            self.calls += 1
            if self.calls > self.after:
                return self.bad
        return y

    def decode(self, x, w):
        y = super().decode(x, w)
        return self.bad if self.method == "decode" and int(x) == self.where else y


@pytest.mark.parametrize("bad, what", [(float("nan"), "non-finite"), (np.array([1, 2]), "shape"),
                                       (None, "None"), (np.array([[1]]), "shape")])
@pytest.mark.parametrize("after", [0, 3], ids=["first-pass", "later-pass"])
def test_user_oracle_invalid_labelling_names_model_method_example(bad, what, after):
    base, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    model = _BadOracle(base, bad, where=2, after=after)
    svm = sf.StructuredSVM(model, solver=BCFW(sampling="perm"), lam=0.1, max_passes=20, tol=None, random_state=0)
    with pytest.raises(ValueError) as err:
        svm.fit(X, Y)
    msg = str(err.value)
    assert "_BadOracle.loss_augmented_decode" in msg and "example 2" in msg and what in msg, msg


def test_user_decode_invalid_labelling_is_named():
    base, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    model = _BadOracle(base, float("nan"), where=4, method="decode")
    prob = Problem(model, X, Y, 0.1)
    with pytest.raises(ValueError, match=r"_BadOracle\.decode returned an invalid labelling for example 4: .*non-finite"):
        prob.decode_all(np.ones(prob.d))


def test_out_of_range_state_of_a_user_chain_model():
    class MyChain(sf.models.ChainModel):
        def loss_augmented_decode(self, x, y_true, w):
            y = np.asarray(super().loss_augmented_decode(x, y_true, w)).copy()
            y[0] = -1  # would silently index the last state
            return y

    X, Y = sf.datasets.load_ocr("train")
    model = MyChain(26, 128)
    prob = Problem(model, X[:3], Y[:3], 0.1)
    with pytest.raises(ValueError, match=r"MyChain\.loss_augmented_decode .*example 0: .*outside 0\.\.25"):
        prob.oracle(0, np.zeros(prob.d))


def test_valid_user_labellings_pass():
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    svm = sf.StructuredSVM(model, lam=0.1, max_passes=5, tol=None, random_state=0).fit(X, Y)
    assert np.all(np.isfinite(svm.coef_))


# ----------------------------------------------------------------- B2: lam floor
@pytest.mark.parametrize("lam", [1e-160, 1e-200, 5e-13])
def test_lam_below_the_floor_is_refused(lam):
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    with pytest.raises(ValueError, match=r"lam=.* below the smallest lam accepted, 1e-12"):
        sf.StructuredSVM(model, lam=lam, max_passes=2).fit(X, Y)
    with pytest.raises(ValueError, match="min_lam"):
        sf.regularization_path(model, X, Y, min_lam=lam)


def test_lam_at_the_floor_fits_a_finite_model():
    assert check_lam(LAM_FLOOR) == LAM_FLOOR
    model, X, Y = make_toy(n=5, m=4, d=3, seed=1)
    svm = sf.StructuredSVM(model, lam=LAM_FLOOR, max_passes=3, tol=None, random_state=0).fit(X, Y)
    assert np.all(np.isfinite(svm.coef_)) and np.isfinite(svm.gap_)


# ----------------------------------------------------------------- B3: MP-BCFW reproducible
def test_mpbcfw_default_rule_is_reproducible_and_resumes_exactly():
    assert MPBCFW().approx_rule == "work" and BCFW(multi_plane=True).approx_rule == "work"
    MPBCFW(approx_rule="time")  # still available
    X, Y = sf.datasets.load_ocr("train")
    X, Y = X[:60], Y[:60]
    model = sf.models.ChainModel(26, 128)

    def fit(passes, warm=None):
        svm = sf.StructuredSVM(model, solver=MPBCFW(), lam=0.01, max_passes=passes, tol=None, random_state=0,
                               check_every=1)
        if warm is not None:
            svm = warm.set_params(warm_start=True, max_passes=passes)
        return svm.fit(X, Y)

    one = fit(4)
    again = fit(4)
    np.testing.assert_array_equal(one.coef_, again.coef_)
    split = fit(2)
    split = fit(2, warm=split)
    np.testing.assert_array_equal(one.coef_, split.coef_)


# ----------------------------------------------------------------- B4: indefinite SVC kernel
def _labels(m, rng):
    y = np.where(rng.normal(size=m) > 0, 1, -1)
    y[:2] = [1, -1]
    return y


def test_indefinite_precomputed_kernel_with_positive_diagonal_is_refused():
    from structfw.svm import FrankWolfeSVC

    rng = np.random.default_rng(0)
    m = 40
    F = rng.normal(size=(m, 5))
    v = rng.normal(size=m)
    v /= np.linalg.norm(v)
    # a Gram matrix minus a rank-one bump: positive diagonal, one eigenvalue near -0.3, above
    # -1/C, so the simplex QP is still convex and the solve converges -- to a meaningless model
    K = F @ F.T - (np.linalg.eigvalsh(F @ F.T)[0] + 0.3) * np.outer(v, v)
    K = 0.5 * (K + K.T)
    assert np.all(np.diag(K) > 0) and np.linalg.eigvalsh(K)[0] < -0.1
    with pytest.raises(ValueError, match=r"kernel='precomputed'\) is not positive semi-definite"):
        FrankWolfeSVC(kernel="precomputed").fit(K, _labels(m, rng))


def test_psd_check_accepts_rank_deficient_gram_matrices_and_scales():
    from structfw.svm.classifier import _check_psd

    rng = np.random.default_rng(1)
    for m, rank in ((30, 3), (700, 4)):   # exact eigenvalues, then Lanczos
        F = rng.normal(size=(m, rank)) * 1e3
        _check_psd(F @ F.T)               # eigenvalues ~ -1e-9 from rounding: accepted
    F = rng.normal(size=(700, 20))
    K = F @ F.T
    v = rng.normal(size=700)
    v /= np.linalg.norm(v)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        _check_psd(K - 50.0 * np.outer(v, v))


def test_psd_kernel_still_fits():
    from structfw.svm import FrankWolfeSVC

    rng = np.random.default_rng(2)
    F = rng.normal(size=(50, 4))
    y = np.where(F[:, 0] > 0, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = FrankWolfeSVC(kernel="precomputed").fit(F @ F.T, y)
    assert clf.score(F @ F.T, y) > 0.8
