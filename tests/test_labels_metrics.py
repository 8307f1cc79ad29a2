"""Labels of any kind (strings, other integers) through the estimator, structfw.metrics and its scorers,
and the error for one example passed where a list is expected."""
import json
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

import structfw as sf
from structfw.metrics import hamming_accuracy, span_f1, tag_spans, token_accuracy
from structfw.models import ChainModel, GraphCutModel, GridModel, MatchingModel, MulticlassModel

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


@pytest.fixture(scope="module")
def ocr():
    X, Y = sf.datasets.load_ocr("train")
    # every 37th word: 150 words holding all 26 letters (the first words of the file repeat one word)
    idx = np.arange(0, len(X), 37)[:150]
    X, Y = [X[i] for i in idx], [Y[i] for i in idx]
    assert np.unique(np.concatenate(Y)).size == 26
    return X, Y


def _svm(model=None, **kw):
    kw = {"lam": 0.05, "max_passes": 2, "tol": None, "random_state": 0, **kw}
    return sf.StructuredSVM(model or ChainModel(26, 128), **kw)


@pytest.fixture(scope="module")
def int_fit(ocr):
    X, Y = ocr
    return _svm().fit(X, Y)


# ------------------------------------------------------------------ labels
def test_integer_states_are_used_as_they_are(ocr, int_fit, tmp_path):
    X, Y = ocr
    np.testing.assert_array_equal(int_fit.classes_, np.arange(26))
    pred = int_fit.predict(X[:3])
    assert all(p.dtype == np.int64 for p in pred)
    path = int_fit.save(tmp_path / "m")
    with np.load(path, allow_pickle=False) as z:
        assert "classes" not in json.loads(str(z["header"]))  # files of integer fits are unchanged
    np.testing.assert_array_equal(sf.load(path).classes_, np.arange(26))


def test_string_labels_fit_predict_score_save_load(ocr, int_fit, tmp_path):
    X, Y = ocr
    Ys = [LETTERS[y] for y in Y]
    svm = _svm().fit(X, Ys, X_test=X[:10], Y_test=Ys[:10])
    np.testing.assert_array_equal(svm.classes_, LETTERS)
    # 'a'..'z' sort as 0..25: the same problem as the integer one
    np.testing.assert_array_equal(svm.coef_, int_fit.coef_)
    pred = svm.predict(X[:5])
    assert all(p.dtype.kind == "U" for p in pred)
    assert [list(p) for p in pred] == [list(LETTERS[p]) for p in int_fit.predict(X[:5])]
    assert svm.score(X, Ys) == int_fit.score(X, Y)
    assert svm.trace_["test_loss"][-1] == pytest.approx(1 - svm.score(X[:10], Ys[:10]))
    path = svm.save(tmp_path / "s")
    with np.load(path, allow_pickle=False) as z:  # no pickle: the labels are JSON in the header
        assert set(z.files) == {"coef", "header", "trace", "digest"}
    back = sf.load(path)
    np.testing.assert_array_equal(back.classes_, svm.classes_)
    assert [list(p) for p in back.predict(X[:5])] == [list(p) for p in pred]


def test_fewer_string_labels_than_states(ocr):
    X, Y = ocr
    keep = [i for i, y in enumerate(Y) if np.all(y < 20)]
    Xk, Yk = [X[i] for i in keep], [LETTERS[Y[i]] for i in keep]
    svm = _svm().fit(Xk, Yk)
    assert svm.classes_.size == np.unique(np.concatenate(Yk)).size <= 20
    assert set(np.concatenate(svm.predict(Xk))) <= set(svm.classes_)


def test_a_state_no_label_named_is_not_decoded_to_a_made_up_label():
    rng = np.random.default_rng(1)
    X = list(rng.normal(size=(20, 4)))
    svm = sf.StructuredSVM(MulticlassModel(3, 4), lam=0.1, max_passes=2, tol=None, random_state=0)
    svm.fit(X, ["cat", "dog"] * 10)
    assert list(svm.classes_) == ["cat", "dog"]
    svm.coef_ = np.concatenate([np.zeros(8), np.ones(4)])  # state 2 wins wherever sum(x) > 0
    x = [np.ones(4)]
    with pytest.raises(ValueError, match="uses state 2, which no training label named"):
        svm.predict(x)


def test_non_contiguous_integer_labels(ocr, int_fit):
    X, Y = ocr
    Y10 = [10 * y + 5 for y in Y]
    svm = _svm().fit(X, Y10)
    np.testing.assert_array_equal(svm.classes_, 10 * np.arange(26) + 5)
    np.testing.assert_array_equal(svm.coef_, int_fit.coef_)
    assert [list(p) for p in svm.predict(X[:3])] == [list(10 * p + 5) for p in int_fit.predict(X[:3])]
    assert svm.score(X, Y10) == int_fit.score(X, Y)


def test_multiclass_string_labels(tmp_path):
    rng = np.random.default_rng(0)
    names = np.array(["cat", "dog", "eel"])
    y = rng.integers(0, 3, 120)
    X = list(rng.normal(size=(3, 4))[y] * 3 + rng.normal(size=(120, 4)))
    Y = list(names[y])
    svm = sf.StructuredSVM(MulticlassModel(3, 4), lam=0.01, max_passes=20, tol=None, random_state=0).fit(X, Y)
    np.testing.assert_array_equal(svm.classes_, names)
    pred = svm.predict(X)
    assert all(isinstance(p, str) for p in pred)
    assert svm.score(X, Y) > 0.9
    assert token_accuracy(Y, pred) == pytest.approx(svm.score(X, Y))
    back = sf.load(svm.save(tmp_path / "mc"))
    assert back.predict(X) == pred
    # scalar labels: scikit-learn's own metrics apply as they are
    scores = cross_val_score(svm, X, Y, scoring="accuracy", cv=2, error_score="raise")
    assert np.all(scores > 0.8)
    # floats that are not states are classes too
    svm.fit(X, [0.5 + k for k in y])
    np.testing.assert_array_equal(svm.classes_, [0.5, 1.5, 2.5])
    assert set(svm.predict(X)) <= {0.5, 1.5, 2.5}


def test_y_test_with_a_label_fit_did_not_see(ocr):
    X, Y = ocr
    Ys = [LETTERS[y] for y in Y]
    Yt = [y.copy() for y in Ys[:5]]
    Yt[3][0] = "?"
    with pytest.raises(ValueError, match=r"Y_test\[3\] has label '\?', which is not among the labels seen by fit"):
        _svm().fit(X, Ys, X_test=X[:5], Y_test=Yt)
    with pytest.raises(ValueError, match="Y_test\\[0\\] holds numeric labels but the estimator was fitted on string"):
        _svm().fit(X, Ys, X_test=X[:5], Y_test=Y[:5])
    svm = _svm(max_passes=1).fit(X, Ys)
    with pytest.raises(ValueError, match=r"Y\[3\] has label '\?'"):
        svm.score(X[:5], Yt)
    # the metrics compare any labels: the unseen one is one error
    pred = svm.predict(X[:5])
    was_right = pred[3][0] == Ys[3][0]
    assert token_accuracy(Yt, pred) == pytest.approx(token_accuracy(Ys[:5], pred) - was_right / sum(map(len, Yt)))


def test_bad_label_sets(ocr):
    X, Y = ocr
    with pytest.raises(ValueError, match=r"Y\[\d+\] has label 'z': Y holds 26 distinct labels, more than the "
                                         r"model's 25 states"):
        _svm(ChainModel(25, 128)).fit(X, [LETTERS[y] for y in Y])
    mixed = [LETTERS[y] for y in Y[:4]] + Y[4:8]
    with pytest.raises(ValueError, match=r"Y mixes label kinds: Y\[0\] holds string labels, Y\[4\] numeric"):
        _svm().fit(X[:8], mixed)
    nan = [y.astype(float) for y in Y[:4]]
    nan[2][1] = np.nan
    with pytest.raises(ValueError, match=r"Y\[2\] contains NaN"):
        _svm().fit(X[:4], nan)
    with pytest.raises(ValueError, match=r"Y\[5\]"):  # one label beyond the states is still named
        bad = [y.copy() for y in Y]
        bad[5][0] = 26
        _svm().fit(X, bad)


def test_matching_labels_are_integer_positions():
    model = MatchingModel(3)
    x = np.zeros((2, 2, 3))
    with pytest.raises(ValueError, match="positions, not class labels"):
        _svm(model).fit([x], [np.array(["a", "b"])])
    svm = _svm(model, max_passes=1).fit([x], [np.array([0, 1])])
    assert svm.classes_ is None


def test_warm_start_with_other_labels_starts_afresh(ocr):
    X, Y = ocr
    upper = np.char.upper(LETTERS)
    svm = _svm(warm_start=True).fit(X, [LETTERS[y] for y in Y])
    # the same states (the data's fingerprint agrees), but they name other labels
    with pytest.warns(RuntimeWarning, match="other labels"):
        svm.fit(X, [upper[y] for y in Y])
    np.testing.assert_array_equal(svm.classes_, upper)
    fresh = _svm().fit(X, [upper[y] for y in Y])
    np.testing.assert_array_equal(svm.coef_, fresh.coef_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svm.fit(X, [upper[y] for y in Y])  # same labels again: continued, no warning
    assert svm.trace_["gap"][0] == pytest.approx(fresh.gap_)


def test_tampered_classes_in_a_model_file(ocr, tmp_path):
    X, Y = ocr
    path = _svm(max_passes=1).fit(X, [LETTERS[y] for y in Y]).save(tmp_path / "t")
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    header = json.loads(str(members["header"]))
    for bad in ({"kind": "str", "values": ["b", "a"]}, {"kind": "str", "values": list("abcdefghijklmnopqrstuvwxyz!")},
                {"kind": "str", "values": [1, 2]}, {"kind": "pickle", "values": ["a"]}, ["a", "b"]):
        header["classes"] = bad
        members["header"] = np.array(json.dumps(header))
        members["digest"] = np.array(sf.io.members_digest(members))   # sealed: the field check must catch it
        np.savez(tmp_path / "bad.npz", **members)
        with pytest.raises(ValueError, match="classes"):
            sf.load(tmp_path / "bad.npz")


# ------------------------------------------------------------------ metrics
def test_token_and_hamming_accuracy_by_hand():
    Y_true = [np.array(["a", "a", "a", "a"]), np.array(["b"])]
    Y_pred = [np.array(["a", "a", "a", "b"]), np.array(["c"])]
    assert token_accuracy(Y_true, Y_pred) == pytest.approx(3 / 5)
    assert hamming_accuracy(Y_true, Y_pred) == pytest.approx((3 / 4 + 0) / 2)
    assert token_accuracy(["x", "y", "z"], ["x", "q", "z"]) == pytest.approx(2 / 3)  # multiclass scalars
    with pytest.raises(ValueError, match="same length"):
        token_accuracy(Y_true, Y_pred[:1])
    with pytest.raises(ValueError, match=r"Y_true\[1\] has shape \(1,\) but Y_pred\[1\] has shape \(2,\)"):
        hamming_accuracy(Y_true, [Y_pred[0], np.array(["b", "b"])])


def test_span_f1_by_hand():
    # exact match of type and both ends: NP(0,2) right, VP(3,4) predicted as NP
    assert span_f1([["B-NP", "I-NP", "O", "B-VP"]], [["B-NP", "I-NP", "O", "B-NP"]]) == pytest.approx(0.5)
    # a chunk cut in two is two wrong chunks
    assert span_f1([["B-NP", "I-NP", "I-NP"]], [["B-NP", "I-NP", "B-NP"]]) == 0.0
    # over examples: 4 true chunks, 3 predicted, 2 right -> P = 2/3, R = 1/2, F1 = 4/7
    Y_true = [["B-NP", "O", "B-VP", "I-VP"], ["B-PP", "B-NP"]]
    Y_pred = [["B-NP", "O", "B-VP", "O"], ["B-PP", "O"]]
    assert span_f1(Y_true, Y_pred) == pytest.approx(4 / 7)
    assert span_f1(Y_true, Y_true) == 1.0


def test_span_f1_malformed_tags_and_schemes():
    # I- without B- starts a chunk; I- of another type starts another
    assert tag_spans(["O", "I-NP", "I-NP", "O"]) == [("NP", 1, 3)]
    assert tag_spans(["B-NP", "I-VP", "I-VP"]) == [("NP", 0, 1), ("VP", 1, 3)]
    assert span_f1([["O", "I-NP", "I-NP", "O"]], [["O", "B-NP", "I-NP", "O"]]) == 1.0
    assert tag_spans(["B-NP", "B-NP", "I-NP"], scheme="IOB1") == [("NP", 0, 1), ("NP", 1, 3)]
    # chunks end with their example
    assert tag_spans(["B-NP", "I-NP"]) == [("NP", 0, 2)]
    assert span_f1([["B-NP", "I-NP"], ["I-NP"]], [["B-NP", "I-NP"], ["B-NP"]]) == 1.0
    # BIOES: E and S end a chunk; a lone E- is a one-token chunk
    assert tag_spans(["S-PER", "B-LOC", "I-LOC", "E-LOC", "O", "E-LOC", "S-LOC"], scheme="BIOES") == [
        ("PER", 0, 1), ("LOC", 1, 4), ("LOC", 5, 6), ("LOC", 6, 7)]
    assert tag_spans(["B-LOC", "E-LOC", "E-LOC"], scheme="BIOES") == [("LOC", 0, 2), ("LOC", 2, 3)]
    # no chunk at all
    assert span_f1([["O", "O"]], [["O", "O"]]) == 0.0
    assert span_f1([["O", "O"]], [["O", "O"]], zero_division=1.0) == 1.0
    for tags, scheme, msg in ((["E-NP"], "BIO", "not a BIO tag"), (["X-NP"], "BIOES", "not a BIOES tag"),
                              (["O-NP"], "BIO", "not a BIO tag"), ([3], "BIO", "string tags"),
                              (["O"], "BILOU", "scheme")):
        with pytest.raises(ValueError, match=msg):
            tag_spans(tags, scheme=scheme)


# ------------------------------------------------------------------ scorers
def test_cross_val_score_and_grid_search_with_the_scorers(ocr):
    X, Y = ocr
    X, Y = X[:60], [LETTERS[y] for y in Y[:60]]
    scores = cross_val_score(_svm(), X, Y, scoring=sf.metrics.token_accuracy_scorer, cv=2, error_score="raise")
    assert scores.shape == (2,) and np.all(np.isfinite(scores)) and np.all((0 <= scores) & (scores <= 1))
    # the scorer passes the lists through: it is the metric of predict
    svm = _svm().fit(X[:30], Y[:30])
    assert sf.metrics.token_accuracy_scorer(svm, X[30:], Y[30:]) == token_accuracy(Y[30:], svm.predict(X[30:]))
    assert sf.metrics.hamming_accuracy_scorer(svm, X[:30], Y[:30]) == pytest.approx(svm.score(X[:30], Y[:30]))
    gs = GridSearchCV(_svm(), {"lam": [0.01, 0.1]}, scoring=sf.metrics.token_accuracy_scorer, cv=KFold(2),
                      error_score="raise").fit(X, Y)
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"])) and gs.best_params_["lam"] in (0.01, 0.1)


def test_span_f1_scorer(ocr):
    X, Y = ocr
    tags = np.array([f"{'BI'[k % 2]}-T{k // 2}" for k in range(26)])  # 26 distinct BIO tags
    X, Y = X[:60], [tags[y] for y in Y[:60]]
    scores = cross_val_score(_svm(), X, Y, scoring=sf.metrics.span_f1_scorer, cv=2, error_score="raise")
    assert np.all(np.isfinite(scores)) and np.all((0 <= scores) & (scores <= 1))


# --------------------------------------------------------- one example, not a list
def test_one_sequence_instead_of_a_list(ocr, int_fit):
    X, Y = ocr
    msg = r"X must be a list of examples \(one \(L_i, F\) array per sequence\).*to predict one sequence pass \[x\]"
    with pytest.raises(ValueError, match=msg):
        int_fit.predict(X[0])
    with pytest.raises(ValueError, match=msg):
        int_fit.score(X[0], Y[0])
    assert len(int_fit.predict([X[0]])) == 1
    import scipy.sparse as sp
    with pytest.raises(ValueError, match=msg):
        int_fit.predict(sp.csr_matrix(X[0]))


def test_one_example_instead_of_a_list_for_the_other_models():
    with pytest.raises(ValueError, match=r"one \(h, w, F\) array per grid.*pass \[x\]"):
        GridModel(2, 3).check_X(np.zeros((4, 5, 3)))
    graph = (np.zeros((3, 2)), np.array([[0, 1], [1, 2]]), np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"tuple per graph.*pass \[x\]"):
        GraphCutModel(2, 1).check_X(graph)
    assert len(GraphCutModel(2, 1).check_X([graph])) == 1
    with pytest.raises(ValueError, match=r"got a single example.*pass \[x\] or x.reshape\(1, -1\)"):
        MulticlassModel(3, 4).check_X(np.zeros(4))
    with pytest.raises(ValueError, match=r"per sentence pair.*pass \[x\]"):
        MatchingModel(3).check_X(np.zeros((2, 2, 3)))
