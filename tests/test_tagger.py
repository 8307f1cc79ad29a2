"""structfw.make_tagger / features.Tagger: the tagger as one object (issue 51).

n_states from the tags, the estimator's prediction methods on raw sentences, the whole tagger in
one model file (round trip, crafted files refused), clone and GridSearchCV.
"""
import io
import json
import re

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold

import structfw as sf
from structfw import io as sfio
from structfw.features import TAGGER_KIND, SequenceVectorizer, Tagger

FAST = dict(n_features=2 ** 10, max_passes=8, tol=None, random_state=0)


def _corpus(n, seed, tags=("DET", "ADJ", "NOUN", "VERB")):
    """Sentences "det [adj] noun verb" with string tags; the words say their tag."""
    rng = np.random.default_rng(seed)
    words = {"DET": ["the", "a"], "ADJ": ["big", "red", "tiny"], "NOUN": ["cat", "dog", "bird"],
             "VERB": ["runs", "sings", "sat"]}
    X, Y = [], []
    for _ in range(n):
        t = [tg for tg in tags if tg != "ADJ" or rng.random() < 0.5]
        X.append([str(rng.choice(words[tg])) for tg in t])
        Y.append(t)
    return X, Y


@pytest.fixture(scope="module")
def fitted():
    X, Y = _corpus(30, 0)
    return sf.make_tagger(window=1, **FAST).fit(X, Y), X, Y


# ------------------------------------------------------------------ n_states and fit
def test_make_tagger_with_no_argument_counts_the_string_tags(fitted):
    tagger, X, Y = fitted
    assert isinstance(tagger, Tagger) and tagger.n_states is None
    model = tagger.named_steps["svm"].model
    assert (model.n_states, model.n_features) == (4, 2 ** 10)
    assert tagger.classes_.tolist() == ["ADJ", "DET", "NOUN", "VERB"]
    Xt, Yt = _corpus(10, 1)
    assert sf.metrics.token_accuracy(Yt, tagger.predict(Xt)) == 1.0
    assert tagger.predict([["a", "tiny", "bird", "sings"]])[0].tolist() == ["DET", "ADJ", "NOUN", "VERB"]


def test_the_default_tagger_fits_with_its_default_sizes():
    X, Y = _corpus(12, 2, tags=("DET", "NOUN", "VERB"))
    tagger = sf.make_tagger(max_passes=3, random_state=0).fit(X, Y)
    assert tagger.named_steps["svm"].model.n_states == 3
    assert tagger.predict(X[:1])[0].dtype.kind == "U"


def test_n_states_given_is_kept_and_checked():
    X, Y = _corpus(12, 3)
    tagger = sf.make_tagger(6, **FAST).fit(X, Y)
    assert tagger.named_steps["svm"].model.n_states == 6
    with pytest.raises(ValueError, match="n_states=3"):
        sf.make_tagger(3, **FAST).fit(X, Y)
    with pytest.raises(ValueError, match="n_states"):
        Tagger(sf.make_tagger(**FAST).steps, n_states=1).fit(X, Y)
    with pytest.raises(ValueError, match="n_states"):
        sf.make_tagger("four")


def test_one_tag_gives_a_two_state_model():
    X = [["a", "b"], ["b"]]
    tagger = sf.make_tagger(**FAST).fit(X, [["O", "O"], ["O"]])
    assert tagger.named_steps["svm"].model.n_states == 2
    assert tagger.predict([["a"]])[0].tolist() == ["O"]


def test_feature_dicts_with_string_tags_and_a_vocabulary_sized_to_the_data():
    X, Y = _corpus(20, 4)
    D = [[{"w": w, "len": len(w), "first": j == 0} for j, w in enumerate(s)] for s in X]
    tagger = sf.make_tagger(hashing=False, n_features=None, max_passes=8, tol=None, random_state=0).fit(D, Y)
    vec = tagger.named_steps["features"]
    assert tagger.named_steps["svm"].model.n_features == vec.n_features_ == len(vec.vocabulary_)
    assert sf.metrics.token_accuracy(Y, tagger.predict(D)) == 1.0


def test_a_refit_on_other_tags_resizes_the_model(fitted):
    tagger, _, _ = fitted
    again = clone(tagger)
    X, Y = _corpus(10, 5, tags=("DET", "NOUN"))
    again.fit(X, Y)
    assert again.named_steps["svm"].model.n_states == 2 and again.classes_.tolist() == ["DET", "NOUN"]
    assert tagger.named_steps["svm"].model.n_states == 4  # the original is untouched


def test_the_tagged_corpus_slice():
    pytest.importorskip("hironsan")
    X, Y = sf.datasets.load_tagged_corpus("train")
    X, Y = X[:40], Y[:40]
    tagger = sf.make_tagger(n_features=2 ** 12, max_passes=3, tol=None, random_state=0).fit(X, Y)
    n_tags = len(set(np.concatenate(Y).tolist()))
    assert tagger.named_steps["svm"].model.n_states == n_tags == tagger.classes_.size
    pred = tagger.predict(X[:5])
    assert [p.shape for p in pred] == [(len(x),) for x in X[:5]]
    assert set(np.concatenate(pred).tolist()) <= set(tagger.classes_.tolist())


def test_bad_steps_and_an_unfitted_tagger_are_clear_errors():
    X, Y = _corpus(4, 6)
    with pytest.raises(ValueError, match="steps"):
        Tagger([("features", SequenceVectorizer())]).fit(X, Y)
    with pytest.raises(ValueError, match="ChainModel"):
        Tagger([("f", SequenceVectorizer()), ("s", sf.StructuredSVM(sf.models.MulticlassModel(2, 3)))]).fit(X, Y)
    tagger = sf.make_tagger()
    for call in (lambda: tagger.predict(X), lambda: tagger.predict_marginals(X), lambda: tagger.save("x")):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()


# ------------------------------------------------------------------ prediction methods
def test_marginals_top_k_scores_and_probabilities_agree(fitted):
    tagger, X, _ = fitted
    Xq = X[:6] + [["the", "bird"]]
    pred = tagger.predict(Xq)
    marg = tagger.predict_marginals(Xq)
    top = tagger.predict_top_k(Xq, 3)
    scores = tagger.decision_function(Xq)
    proba = tagger.predict_proba_sequence(Xq)
    assert scores.shape == proba.shape == (len(Xq),)
    for x, p, m, (ys, s), sc, pr in zip(Xq, pred, marg, top, scores, proba):
        assert m.shape == (len(x), 4) and np.allclose(m.sum(axis=1), 1.0) and np.all(m >= 0)
        assert ys.shape == (min(3, 4 ** len(x)), len(x)) and ys.dtype.kind == "U"
        assert ys[0].tolist() == p.tolist()  # the best of the k best is predict's (no ties here)
        assert np.all(np.diff(s) <= 1e-12) and s[0] == pytest.approx(sc, rel=1e-9, abs=1e-12)
        assert 0.0 < pr <= 1.0
    with pytest.raises(ValueError, match="k"):
        tagger.predict_top_k(Xq, 0)


def test_calibrate_temperature_and_score(fitted):
    tagger, _, _ = fitted
    tagger = clone(tagger).fit(*_corpus(30, 0))
    Xv, Yv = _corpus(10, 7)
    assert tagger.calibrate_temperature(Xv, Yv) is tagger
    T = tagger.named_steps["svm"].temperature_
    assert T > 0
    cold = tagger.predict_marginals(Xv[:1], temperature=T)[0]
    assert np.allclose(tagger.predict_marginals(Xv[:1])[0], cold)
    svm, vec = tagger.named_steps["svm"], tagger.named_steps["features"]
    assert tagger.score(Xv, Yv) == pytest.approx(svm.score(vec.transform(Xv), Yv))
    assert 0.0 <= tagger.score(Xv, Yv) <= 1.0
    with pytest.raises(ValueError, match="not among the labels"):
        tagger.score(Xv[:1], [["XYZ"] * len(Xv[0])])


# ------------------------------------------------------------------ files
def _same_predictions(a, b, X):
    assert [p.tolist() for p in a.predict(X)] == [p.tolist() for p in b.predict(X)]
    for m, n in zip(a.predict_marginals(X), b.predict_marginals(X)):
        assert np.allclose(m, n, rtol=1e-12, atol=1e-15)
    assert np.allclose(a.decision_function(X), b.decision_function(X), rtol=1e-12)


@pytest.mark.parametrize("options", [dict(window=1), dict(hashing=False, n_features=None),
                                     dict(hashing=False, n_features=20)])
def test_save_load_round_trip_gives_identical_predictions(options, tmp_path):
    X, Y = _corpus(24, 8)
    opts = {**FAST, **options}
    tagger = sf.make_tagger(**opts).fit(X, Y)
    path = tagger.save(tmp_path / "tagger")
    assert path.suffix == ".npz" and sfio.model_kind(path) == TAGGER_KIND
    loaded = sf.load(tmp_path / "tagger")
    assert isinstance(loaded, Tagger)
    Xq = _corpus(8, 9)[0] + [["unseen", "words", "here"]]
    _same_predictions(tagger, loaded, Xq)
    assert loaded.classes_.tolist() == tagger.classes_.tolist()
    lv, tv = loaded.named_steps["features"], tagger.named_steps["features"]
    assert (lv.window, lv.hashing, lv.n_features_, lv.vocabulary_) == (tv.window, tv.hashing, tv.n_features_,
                                                                        tv.vocabulary_)
    assert Tagger.load(path).get_params(deep=False)["n_states"] is None
    # a loaded tagger is an estimator like any other: it clones and refits
    again = clone(loaded).fit(X, Y)
    assert [p.tolist() for p in again.predict(Xq)] == [p.tolist() for p in tagger.predict(Xq)]


def test_round_trip_of_dict_input_and_a_calibrated_temperature(tmp_path):
    X, Y = _corpus(20, 10)
    D = [[{"w": w, "suffix": w[-2:], "len": len(w)} for w in s] for s in X]
    tagger = sf.make_tagger(5, **FAST).fit(D, Y)
    tagger.calibrate_temperature(D[:8], Y[:8])
    loaded = sf.load(tagger.save(tmp_path / "t.npz"))
    _same_predictions(tagger, loaded, D[:6])
    assert loaded.n_states == 5 and loaded.named_steps["features"].input_kind_ == "dicts"
    assert loaded.named_steps["svm"].temperature_ == pytest.approx(tagger.named_steps["svm"].temperature_)
    with pytest.raises(ValueError, match="feature dicts"):
        loaded.predict(X[:1])  # fitted on dicts, as the original


def test_structfw_load_still_loads_an_estimator_file(tmp_path):
    X, Y = _corpus(10, 11)
    svm = sf.make_tagger(**FAST).fit(X, Y).named_steps["svm"]
    loaded = sf.load(svm.save(tmp_path / "svm"))
    assert type(loaded) is sf.StructuredSVM
    with pytest.raises(ValueError, match=r"svm\.npz holds a 'StructuredSVM' model, not a 'Tagger'"):
        Tagger.load(tmp_path / "svm.npz")


# ------------------------------------------------------------------ crafted files
@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    X, Y = _corpus(16, 12)
    tagger = sf.make_tagger(hashing=False, n_features=None, **{k: v for k, v in FAST.items() if k != "n_features"})
    path = tagger.fit(X, Y).save(tmp_path_factory.mktemp("crafted") / "tagger.npz")
    return path.read_bytes(), X


def _members(data):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k != "digest"}


def _seal(path, members):
    """Write members with a recomputed digest: the loader must catch the change itself."""
    members = {**members, "digest": np.array(sfio.members_digest(members))}
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    return path


def _with_header(mem, change):
    doc = json.loads(str(mem["header"]))
    change(doc)
    return {**mem, "header": np.array(json.dumps(doc))}


def _set_vec(field, value):
    def change(doc):
        doc["vectorizer"][field] = value
    return change


CRAFTED = {
    "vocabulary a dict": (lambda m: {**m, "vocabulary": np.array(json.dumps({"w=the": 0}))}, "'vocabulary'"),
    "vocabulary of numbers": (lambda m: {**m, "vocabulary": np.array(json.dumps([1, 2, 3]))}, "entry 0 is of type int"),
    "vocabulary a number array": (lambda m: {**m, "vocabulary": np.arange(3)}, "'vocabulary'"),
    "vocabulary with a repeat": (lambda m: {**m, "vocabulary": np.array(json.dumps(["a", "a"]))}, "twice"),
    "vocabulary with a lone surrogate": (lambda m: {**m, "vocabulary": np.array(json.dumps(["a", "\ud800"]))},
                                         "entry 1 .*lone surrogate"),
    "vocabulary missing": (lambda m: {k: v for k, v in m.items() if k != "vocabulary"}, "vocabulary"),
    "negative window": (lambda m: _with_header(m, _set_vec("window", -1)), "'window'"),
    "window a string": (lambda m: _with_header(m, _set_vec("window", "1")), "'window'"),
    "unknown template": (lambda m: _with_header(m, _set_vec("templates", ["lower", "os.system"])), "'templates'"),
    "width below the vocabulary": (lambda m: _with_header(m, _set_vec("n_features_", 1)), "'n_features_'"),
    "width not the model's": (lambda m: _with_header(m, _set_vec("n_features_", 10 ** 6)), "n_features_"),
    "input kind unknown": (lambda m: _with_header(m, _set_vec("input_kind", "bytes")), "'input_kind'"),
    "hashing not a bool": (lambda m: _with_header(m, _set_vec("hashing", 0)), "'hashing'"),
    "extra vectorizer field": (lambda m: _with_header(m, _set_vec("n_jobs", 4)), "unexpected"),
    "n_states not the model's": (lambda m: _with_header(m, lambda d: d.update(n_states=9)), "'n_states'"),
    "n_states of 1": (lambda m: _with_header(m, lambda d: d.update(n_states=1)), "'n_states'"),
    "step names with __": (lambda m: _with_header(m, lambda d: d.update(steps=["a__b", "svm"])), "'steps'"),
    "one step name": (lambda m: _with_header(m, lambda d: d.update(steps=["svm"])), "'steps'"),
    "estimator member of floats": (lambda m: {**m, "estimator": m["estimator"].astype(np.float64)}, "'estimator'"),
    "estimator member damaged": (lambda m: {**m, "estimator": _flip(m["estimator"])}, r"\[estimator\]"),
    "estimator member not a file": (lambda m: {**m, "estimator": np.zeros(10, np.uint8)}, r"\[estimator\]"),
    "kind StructuredSVM": (lambda m: _with_header(m, lambda d: d.update(kind="StructuredSVM")), "tagger.npz"),
}


def _flip(blob):
    out = blob.copy()
    out[len(out) // 2] ^= 0xFF
    return out


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_tagger_files_are_refused_naming_the_file(vocab_file, tmp_path, case):
    data, X = vocab_file
    craft, field = CRAFTED[case]
    path = _seal(tmp_path / "tagger.npz", craft(_members(data)))
    with pytest.raises(ValueError, match="tagger.npz") as info:
        sf.load(path)
    assert re.search(field, str(info.value)), str(info.value)
    with pytest.raises(ValueError, match="tagger.npz"):
        Tagger.load(path)


def test_an_estimator_file_claiming_to_be_a_tagger_is_refused(tmp_path):
    X, Y = _corpus(8, 14)
    svm = sf.make_tagger(**FAST).fit(X, Y).named_steps["svm"]
    mem = _with_header(_members(svm.save(tmp_path / "svm.npz").read_bytes()), lambda d: d.update(kind=TAGGER_KIND))
    path = _seal(tmp_path / "svm.npz", mem)
    with pytest.raises(ValueError, match=r"svm\.npz: missing field\(s\) \['steps'"):
        sf.load(path)


def test_the_untouched_crafting_loads(vocab_file, tmp_path):
    data, X = vocab_file
    path = _seal(tmp_path / "tagger.npz", _members(data))  # resealing alone changes nothing
    assert len(sf.load(path).predict(X[:2])) == 2


def test_a_changed_member_without_a_new_digest_is_refused(vocab_file, tmp_path):
    data, _ = vocab_file
    mem = _with_header(_members(data), _set_vec("window", 3))
    digest = np.load(io.BytesIO(data))["digest"]
    with open(tmp_path / "t.npz", "wb") as fh:
        np.savez(fh, **mem, digest=digest)
    with pytest.raises(ValueError, match="digest does not match"):
        sf.load(tmp_path / "t.npz")


def test_header_mutations_are_value_errors_or_load(vocab_file, tmp_path):
    """Every header field of a tagger file set to odd values: a ValueError, or a tagger that predicts."""
    data, X = vocab_file
    mem = _members(data)
    doc = json.loads(str(mem["header"]))
    paths = [(k,) for k in doc] + [("vectorizer", k) for k in doc["vectorizer"]]
    odd = [None, True, 0, -1, 2, 10 ** 400, 1.5, "", "tokens", [], ["lower"], {}, {"a": 1}]
    for path in paths:
        for value in odd:
            d = json.loads(str(mem["header"]))
            target = d
            for k in path[:-1]:
                target = target[k]
            target[path[-1]] = value
            p = _seal(tmp_path / "m.npz", {**mem, "header": np.array(json.dumps(d))})
            try:
                tagger = sf.load(p)
            except ValueError:
                continue
            tagger.predict(X[:2])


# ------------------------------------------------------------------ scikit-learn
def test_clone_and_params(fitted):
    tagger, _, _ = fitted
    c = clone(tagger)
    assert isinstance(c, Tagger) and not hasattr(c.named_steps["svm"], "coef_")
    params = tagger.get_params()
    assert params["n_states"] is None and params["svm__max_passes"] == 8 and params["features__window"] == 1
    c.set_params(n_states=5, svm__lam=0.5, features__window=2)
    assert (c.n_states, c.named_steps["svm"].lam, c.named_steps["features"].window) == (5, 0.5, 2)


def test_grid_search_over_lam_window_and_width():
    X, Y = _corpus(24, 13)
    gs = GridSearchCV(sf.make_tagger(**FAST), {"svm__lam": [0.01, 1.0], "features__window": [0, 1],
                                               "features__n_features": [2 ** 8, 2 ** 10]},
                      scoring=sf.metrics.token_accuracy_scorer, cv=KFold(2), error_score="raise")
    gs.fit(X, Y)
    scores = gs.cv_results_["mean_test_score"]
    assert len(scores) == 8 and np.all((0 <= scores) & (scores <= 1))
    best = gs.best_estimator_
    assert isinstance(best, Tagger) and best.named_steps["svm"].model.n_features == best.get_params()[
        "features__n_features"]
    assert best.predict(X[:2])[0].dtype.kind == "U"


def test_the_default_feature_space_is_the_training_vocabulary_with_sparse_rows():
    X, Y = _corpus(12, 3)
    fast = {k: v for k, v in FAST.items() if k != "n_features"}
    tagger = sf.make_tagger(**fast).fit(X, Y)
    vec, svm = tagger.named_steps["features"], tagger.named_steps["svm"]
    assert vec.hashing is False and vec.vocabulary_ is not None
    assert vec.n_features_ == len(vec.vocabulary_) == svm.model.n_features
    assert svm.solver.block_storage == "sparse"
    # hashing on request keeps its fixed width
    hashed = sf.make_tagger(hashing=True, **fast).fit(X, Y)
    assert hashed.named_steps["features"].n_features_ == 2 ** 18
    # the same features give the same fit, whatever the rows' storage
    dense = sf.make_tagger(solver=sf.solvers.BCFW(block_storage="dense"), **fast).fit(X, Y)
    np.testing.assert_allclose(dense.named_steps["svm"].coef_, svm.coef_, rtol=1e-9, atol=1e-12)
