"""The estimator: API, bad input, trace persistence, save/load, interrupts, warm starts."""
import json

import numpy as np
import pytest

import structfw as sf
from structfw.models import ChainModel, MulticlassModel
from structfw.solvers import BCFW, SSG
from structfw.trace import Trace


@pytest.fixture(scope="module")
def ocr_small():
    X, Y = sf.datasets.load_ocr("train")
    Xt, Yt = sf.datasets.load_ocr("test")
    return X[:300], Y[:300], Xt[:100], Yt[:100]


def chain():
    return ChainModel(n_states=26, n_features=128)


def test_fit_predict_score_and_trace_columns(ocr_small):
    X, Y, Xt, Yt = ocr_small
    svm = sf.StructuredSVM(chain(), solver="bcfw", lam=0.01, max_passes=4, tol=None, random_state=0,
                           check_every=1)
    svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    tr = svm.trace_
    for col in ("passes", "oracle_calls", "time_s", "primal", "dual", "gap", "test_loss"):
        assert isinstance(tr[col], np.ndarray) and len(tr[col]) == 5
    np.testing.assert_allclose(tr["gap"], tr["primal"] - tr["dual"], atol=1e-12)
    assert np.all(np.diff(tr["passes"]) > 0) and np.all(np.diff(tr["time_s"]) >= 0)
    assert tr["gap"][-1] < tr["gap"][0]
    pred = svm.predict(Xt)
    assert len(pred) == len(Xt) and all(p.shape == y.shape for p, y in zip(pred, Yt))
    acc = svm.score(Xt, Yt)
    assert acc == pytest.approx(1 - tr["test_loss"][-1])
    assert 0.5 < acc <= 1.0
    assert svm.coef_.shape == (chain().size_joint_feature,)
    params = svm.get_params()
    assert params["lam"] == 0.01 and params["solver"] == "bcfw"


def test_tol_stops_early(ocr_small):
    X, Y, _, _ = ocr_small
    svm = sf.StructuredSVM(chain(), lam=0.1, max_passes=200, tol=0.05, random_state=0).fit(X, Y)
    assert svm.stopped_ == "tol" and svm.gap_ <= 0.05 and svm.n_iter_ < 200


def test_averaged_solver_reports_gap_of_averaged_iterate(ocr_small):
    X, Y, _, _ = ocr_small
    svm = sf.StructuredSVM(chain(), solver=BCFW(averaging="weighted"), lam=0.01, max_passes=3, tol=None,
                           random_state=0).fit(X, Y)
    problem = sf.solvers.Problem(chain(), X, Y, 0.01)
    res = problem.batch_oracle(svm.coef_)
    P = problem.primal(svm.coef_, sum(r[3] for r in res))
    assert svm.trace_["primal"][-1] == pytest.approx(P)
    assert svm.gap_ == pytest.approx(P - svm.dual_)


@pytest.mark.parametrize("solver", ["bcfw", "fw", "ssg"])
def test_solver_names(ocr_small, solver):
    X, Y, _, _ = ocr_small
    svm = sf.StructuredSVM(chain(), solver=solver, lam=0.01, max_passes=2, tol=None, random_state=0).fit(X, Y)
    assert np.isfinite(svm.trace_["primal"]).all()


def test_same_seed_same_result(ocr_small):
    X, Y, _, _ = ocr_small
    a = sf.StructuredSVM(chain(), lam=0.01, max_passes=2, tol=None, random_state=3).fit(X, Y).coef_
    b = sf.StructuredSVM(chain(), lam=0.01, max_passes=2, tol=None, random_state=3).fit(X, Y).coef_
    np.testing.assert_array_equal(a, b)


def test_trace_json_csv_roundtrip(ocr_small, tmp_path):
    X, Y, Xt, Yt = ocr_small
    svm = sf.StructuredSVM(chain(), lam=0.01, max_passes=2, tol=None, random_state=0).fit(X, Y, Xt, Yt)
    for name in ("t.json", "t.csv"):
        svm.trace_.save(tmp_path / name)
        back = Trace.load(tmp_path / name)
        for col in svm.trace_.columns:
            np.testing.assert_allclose(back[col], svm.trace_[col], equal_nan=True)
    meta = json.loads(svm.trace_.to_json())["meta"]
    assert meta["lam"] == 0.01 and meta["n"] == len(X)
    with pytest.raises(KeyError, match="no column"):
        svm.trace_["nope"]


def test_save_load_without_pickle(ocr_small, tmp_path):
    X, Y, Xt, Yt = ocr_small
    svm = sf.StructuredSVM(chain(), solver=BCFW(step="pairwise", sampling="gap"), lam=0.01, max_passes=2,
                           tol=None, random_state=0).fit(X, Y)
    path = tmp_path / "model.npz"
    svm.save(path)
    with np.load(path, allow_pickle=False) as z:  # loads with pickling disabled
        assert set(z.files) == {"coef", "header", "trace", "digest"}
    back = sf.load(path)
    np.testing.assert_array_equal(back.coef_, svm.coef_)
    assert back.solver.get_params() == svm.solver.get_params()
    assert back.score(Xt, Yt) == svm.score(Xt, Yt)
    assert len(back.trace_) == len(svm.trace_)


def test_keyboard_interrupt_keeps_best_iterate(ocr_small):
    X, Y, _, _ = ocr_small
    calls = {"n": 0}

    class Flaky(ChainModel):
        # a subclass's own oracle runs from Python (the inherited compiled kernel is not used)
        def loss_augmented_decode(self, x, y, w):
            calls["n"] += 1
            if calls["n"] == 3 * len(X) + 50:  # in the middle of the third pass
                raise KeyboardInterrupt
            return super().loss_augmented_decode(x, y, w)

    model = Flaky(n_states=chain().n_states, n_features=chain().n_features)
    svm = sf.StructuredSVM(model, lam=0.01, max_passes=50, tol=None, random_state=0).fit(X, Y)
    assert svm.stopped_ == "interrupted"
    assert svm.primal_ == pytest.approx(np.min(svm.trace_["primal"]))
    assert np.linalg.norm(svm.coef_) > 0  # not the initial w = 0


def test_warm_start_continues(ocr_small):
    X, Y, _, _ = ocr_small
    svm = sf.StructuredSVM(chain(), lam=0.01, max_passes=3, tol=None, random_state=0, warm_start=True)
    svm.fit(X, Y)
    g3 = svm.gap_
    svm.fit(X, Y)
    assert svm.trace_["gap"][0] == pytest.approx(g3, rel=1e-9)
    svm.set_params(lam=0.005)
    svm.fit(X, Y)
    assert svm.trace_.meta["lam"] == 0.005


# ------------------------------------------------------------------ bad input
def test_bad_lam(ocr_small):
    X, Y, _, _ = ocr_small
    for lam in (0, -1.0, float("nan"), "a"):
        with pytest.raises(ValueError, match="lam"):
            sf.StructuredSVM(chain(), lam=lam).fit(X, Y)


def test_length_mismatch(ocr_small):
    X, Y, _, _ = ocr_small
    with pytest.raises(ValueError, match="X and Y"):
        sf.StructuredSVM(chain()).fit(X, Y[:-1])


def test_label_out_of_range(ocr_small):
    # labels other than the states 0..n_states-1 are encoded (test_labels_metrics.py); one beyond what
    # the model's states can hold is named
    X, Y, _, _ = ocr_small
    Y = [y.copy() for y in Y]
    Y[5][0] = 26
    K = np.unique(np.concatenate(Y)).size - 1
    with pytest.raises(ValueError, match=rf"Y\[5\] has label 26: Y holds {K + 1} distinct labels, more than the "
                                         rf"model's {K} states"):
        sf.StructuredSVM(ChainModel(K, 128)).fit(X, Y)


def test_nan_and_inf_features(ocr_small):
    X, Y, _, _ = ocr_small
    for bad in (np.nan, np.inf):
        Xb = [x.copy() for x in X]
        Xb[2][0, 0] = bad
        with pytest.raises(ValueError, match=r"X\[2\]"):
            sf.StructuredSVM(chain()).fit(Xb, Y)


def test_feature_width_mismatch(ocr_small):
    X, Y, _, _ = ocr_small
    with pytest.raises(ValueError, match="X"):
        sf.StructuredSVM(ChainModel(26, 127)).fit(X, Y)


def test_bad_solver_and_params(ocr_small):
    X, Y, _, _ = ocr_small
    with pytest.raises(ValueError, match="solver"):
        sf.StructuredSVM(chain(), solver="sgd").fit(X, Y)
    with pytest.raises(ValueError, match="max_passes"):
        sf.StructuredSVM(chain(), max_passes=0).fit(X, Y)
    with pytest.raises(ValueError, match="check_every"):
        sf.StructuredSVM(chain(), check_every=0).fit(X, Y)
    # regression: the time_budget check sat after a return (unreachable), so 0, -1 and nan were accepted
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="time_budget"):
            sf.StructuredSVM(chain(), time_budget=bad).fit(X, Y)
    with pytest.raises(ValueError, match="sampling"):
        BCFW(sampling="importance")
    with pytest.raises(ValueError, match="step"):
        BCFW(step="newton")
    with pytest.raises(ValueError, match="averaging"):
        SSG(averaging="median")
    with pytest.raises(ValueError, match="X_test"):
        sf.StructuredSVM(chain()).fit(X, Y, X_test=X)
    with pytest.raises(ValueError, match="not fitted"):
        sf.StructuredSVM(chain()).predict(X)
    with pytest.raises(ValueError, match="model"):
        sf.StructuredSVM("chain").fit(X, Y)


class _BadOracle(ChainModel):
    def __init__(self, mode):
        super().__init__(26, 128)
        self.mode = mode

    def get_config(self):
        return {}

    def loss_augmented_decode(self, x, y_true, w):
        y = super().loss_augmented_decode(x, y_true, w)
        if self.mode == "range":
            y = y.copy()
            y[0] = 30
        elif self.mode == "length":
            y = y[:-1]
        elif self.mode == "worse":
            # a labelling worse than the ground truth: the lowest-scoring state everywhere
            y = np.full_like(y_true, int(np.argmin(w[:26 * 128].reshape(26, 128).sum(1))))
            y[:] = (y_true + 1) % 26
        return y


@pytest.mark.parametrize("mode", ["range", "length"])
def test_oracle_returning_invalid_labelling(ocr_small, mode):
    X, Y, _, _ = ocr_small
    with pytest.raises(ValueError, match="labelling returned by"):
        sf.StructuredSVM(_BadOracle(mode), lam=0.01, max_passes=2).fit(X, Y)


def test_oracle_worse_than_ground_truth_is_caught(ocr_small):
    X, Y, _, _ = ocr_small
    with pytest.raises(ValueError, match="not a maximiser"):
        sf.StructuredSVM(_BadOracle("worse"), lam=0.01, max_passes=3, tol=None).fit(X, Y)


def test_multiclass_model_end_to_end():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 5)) * 3
    y = rng.integers(0, 3, 150)
    X = centers[y] + rng.normal(size=(150, 5))
    svm = sf.StructuredSVM(MulticlassModel(3, 5), lam=0.01, max_passes=30, tol=1e-4, random_state=0)
    svm.fit(list(X), list(y))
    assert svm.score(list(X), list(y)) > 0.9
    assert svm.gap_ <= 1e-4 or svm.stopped_ == "max_passes"


@pytest.mark.slow
@pytest.mark.parametrize("lam", [0.01, 0.001])
def test_ocr_bcfw_beats_ssg_after_5_passes(lam):
    """BCFW paper, Fig. 1 (a)-(b): BCFW (line search) has a lower primal than SSG after 5 passes."""
    X, Y = sf.datasets.load_ocr("train")
    res = {}
    for name in ("bcfw", "ssg"):
        svm = sf.StructuredSVM(chain(), solver=name, lam=lam, max_passes=5, tol=None, check_every=5,
                               random_state=0).fit(X, Y)
        res[name] = svm.trace_["primal"][-1]
    assert res["bcfw"] < res["ssg"]


def test_time_budget_stops_the_fit(ocr_small):
    X, Y, _, _ = ocr_small
    svm = sf.StructuredSVM(chain(), lam=0.001, max_passes=10_000, tol=0, time_budget=0.3,
                           random_state=0).fit(X, Y)
    assert svm.stopped_ == "time_budget"
    assert svm.trace_["time_s"][-1] >= 0.3


def test_process_executor_gives_the_same_results(ocr_small):
    X, Y, Xt, Yt = ocr_small
    kw = dict(solver="fw", lam=0.01, max_passes=3, tol=None, random_state=0)
    a = sf.StructuredSVM(chain(), **kw).fit(X, Y)
    b = sf.StructuredSVM(chain(), n_jobs=2, **kw).fit(X, Y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)
    np.testing.assert_allclose(a.trace_["gap"], b.trace_["gap"], atol=1e-12)
    pa, pb = a.predict(Xt), b.predict(Xt)
    assert all(np.array_equal(u, v) for u, v in zip(pa, pb))
    with pytest.raises(ValueError, match="n_jobs"):
        sf.StructuredSVM(chain(), n_jobs=0, **kw).fit(X, Y)


def test_time_s_excludes_monitoring(ocr_small, monkeypatch):
    """A slow test-set evaluation (monitoring) must not show up in time_s."""
    import time as _time

    X, Y, Xt, Yt = ocr_small
    from structfw.solvers.base import Monitor

    orig = Monitor.test_loss

    def slow(self, w):
        _time.sleep(0.2)
        return orig(self, w)

    monkeypatch.setattr(Monitor, "test_loss", slow)
    svm = sf.StructuredSVM(chain(), lam=0.01, max_passes=3, tol=None, random_state=0).fit(X, Y, Xt, Yt)
    assert svm.trace_["time_s"][0] < 0.1
    assert np.all(np.diff(svm.trace_["time_s"]) < 0.2)


def test_auto_check_every_keeps_monitoring_under_a_tenth(ocr_small):
    """A checkpoint costs an oracle pass plus predicting the test set: "auto" spaces them so that
    their oracle calls are at most 10 % of all (the last checkpoint at max_passes aside)."""
    X, Y, Xt, Yt = ocr_small
    svm = sf.StructuredSVM(chain(), lam=0.01, max_passes=40, tol=None, random_state=0)
    assert svm.check_every == "auto"
    svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    engine = svm.trace_["engine_passes"]
    every = int(np.ceil(9 * (1 + len(Xt) / len(X))))
    np.testing.assert_array_equal(engine[1:-1], np.arange(every, 40, every))
    assert engine[-1] == 40
    checkpoints = len(engine) - 1  # the initial one is not a pass's work
    monitor_work = checkpoints * (len(X) + len(Xt))
    assert (monitor_work - (len(X) + len(Xt))) / (40 * len(X) + monitor_work) <= 0.10
    with pytest.raises(ValueError, match="check_every"):
        sf.StructuredSVM(chain(), check_every="sometimes").fit(X, Y)
