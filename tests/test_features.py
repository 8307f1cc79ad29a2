"""structfw.features: token sequences -> CSR feature matrices, and the tagger pipeline."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

import structfw as sf
from structfw.features import DEFAULT_TEMPLATES, SequenceVectorizer, make_tagger


def _names(vec, row):
    """The feature names of one row of a vocabulary-mode matrix, as {name: value}."""
    inv = {j: name for name, j in vec.vocabulary_.items()}
    row = sp.csr_matrix(row)
    return {inv[j]: v for j, v in zip(row.indices, row.data)}


def test_templates_give_the_right_features_for_hand_made_tokens():
    vec = SequenceVectorizer(templates=("bias", "word", "lower", "prefix2", "suffix3", "shape", "is_title",
                                        "is_upper", "is_digit", "has_hyphen", "is_punct", "prev_word",
                                        "next_word", "bos", "eos"), hashing=False)
    (x,) = vec.fit_transform([["Paris", "1999", "e-mail", "NASA", ","]])
    assert _names(vec, x[0]) == {"bias": 1, "word=Paris": 1, "lower=paris": 1, "prefix2=pa": 1, "suffix3=ris": 1,
                                 "shape=Xx": 1, "is_title": 1, "prev_word=<s>": 1, "next_word=1999": 1, "bos": 1}
    assert _names(vec, x[1]) == {"bias": 1, "word=1999": 1, "lower=1999": 1, "prefix2=19": 1, "suffix3=999": 1,
                                 "shape=d": 1, "is_digit": 1, "prev_word=paris": 1, "next_word=e-mail": 1}
    assert {"shape=x-x", "has_hyphen"} <= set(_names(vec, x[2]))
    assert {"is_upper", "shape=X"} <= set(_names(vec, x[3])) and "is_title" not in _names(vec, x[3])
    last = _names(vec, x[4])
    assert {"is_punct", "eos", "next_word=</s>", "suffix3=,", "prefix2=,"} <= set(last)


def test_window_adds_the_neighbours_features_by_offset():
    vec = SequenceVectorizer(templates=("lower", "bos"), window=2, hashing=False)
    (x,) = vec.fit_transform([["A", "b", "C"]])
    assert _names(vec, x[0]) == {"lower=a": 1, "bos": 1, "+1:lower=b": 1, "+2:lower=c": 1}
    # positional templates are not copied from the neighbours
    assert _names(vec, x[1]) == {"lower=b": 1, "-1:lower=a": 1, "+1:lower=c": 1}


def test_dict_input_gives_the_dicts_features():
    X = [[{"word.lower()": "the", "postag": "DT", "word.istitle()": True, "bias": 1.0, "len": 3},
          {"word.lower()": "cat", "postag": "NN", "word.istitle()": False, "tags": ["a", "b"], "none": None}]]
    vec = SequenceVectorizer(hashing=False, window=1)
    (x,) = vec.fit_transform(X)
    assert vec.input_kind_ == "dicts"
    assert _names(vec, x[0]) == {"word.lower()=the": 1, "postag=DT": 1, "word.istitle()": 1, "bias": 1, "len": 3,
                                 "+1:word.lower()=cat": 1, "+1:postag=NN": 1, "+1:tags=a": 1, "+1:tags=b": 1}
    assert _names(vec, x[1])["-1:len"] == 3 and "word.istitle()" not in _names(vec, x[1])


def test_hashing_mode_matches_the_vocabulary_mode_up_to_the_column_map():
    X = [["The", "cat", "sat"], ["A", "dog"]]
    hashed = SequenceVectorizer(n_features=2 ** 20).fit_transform(X)
    vocab = SequenceVectorizer(hashing=False).fit_transform(X)
    for h, v in zip(hashed, vocab):
        assert h.shape == (v.shape[0], 2 ** 20)
        assert np.array_equal(np.sort(h.getnnz(axis=1)), np.sort(v.getnnz(axis=1)))  # no collision at 2**20
        assert np.all(h.data == 1.0)  # alternate_sign=False: no negative counts
    assert SequenceVectorizer().fit(X).n_features_ == 2 ** 18


def test_output_is_csr_float64_with_the_lengths_and_width_preserved():
    X = [["a"], ["b", "c", "d"], [], ["e", "f"]]
    for vec in (SequenceVectorizer(n_features=64), SequenceVectorizer(hashing=False)):
        Xs = vec.fit_transform(X)
        assert len(Xs) == 4
        for x, seq in zip(Xs, X):
            assert type(x) is sp.csr_matrix and x.dtype == np.float64
            assert x.shape == (len(seq), vec.n_features_)
            assert x.indices.dtype in (np.int32, np.int64)
        # transform gives the same matrices as fit_transform
        for a, b in zip(Xs, vec.transform(X)):
            assert (a != b).nnz == 0


def test_unseen_features_are_dropped_without_hashing_and_hashed_with_it():
    vec = SequenceVectorizer(templates=("lower",), hashing=False).fit([["a", "b"]])
    (x,) = vec.transform([["a", "zzz"]])
    assert x.shape == (2, 2) and x[1].nnz == 0 and x[0].nnz == 1
    hv = SequenceVectorizer(templates=("lower",), n_features=1024).fit([["a", "b"]])
    assert hv.transform([["zzz"]])[0].nnz == 1


def test_vocabulary_mode_with_n_features_keeps_the_most_frequent_features():
    X = [["a", "a", "a", "b", "b", "c"]]
    vec = SequenceVectorizer(templates=("lower",), hashing=False, n_features=5).fit(X)
    assert vec.n_features_ == 5 and len(vec.vocabulary_) == 3  # padded to the width asked for
    vec = SequenceVectorizer(templates=("lower",), hashing=False, n_features=2).fit(X)
    assert set(vec.vocabulary_) == {"lower=a", "lower=b"}
    assert vec.transform(X)[0].shape == (6, 2)


def test_sklearn_api_get_set_params_and_clone():
    vec = SequenceVectorizer(window=1)
    assert vec.get_params() == {"templates": DEFAULT_TEMPLATES, "window": 1, "hashing": True, "n_features": None}
    vec.set_params(window=2, hashing=False)
    c = clone(vec)
    assert c.window == 2 and c.hashing is False and not hasattr(c, "n_features_")


@pytest.mark.parametrize("X, match", [
    ("the cat", r"X must be a list of sequences"),
    (["the", "cat"], r"X\[0\] is a str.*pass \[tokens\]"),
    ([{"w": "the"}], r"X\[0\] is a dict"),
    ([["the", 3]], r"X\[0\]\[1\] is a int.*must be a\s+string"),
    ([["the"], [{"w": "a"}]], r"X\[1\]\[0\] is a dict but earlier tokens are strings"),
    ([[{"w": object()}]], r"X\[0\]\[0\]\['w'\] is a object"),
    ([[{"w": float("nan")}]], r"X\[0\]\[0\]\['w'\].*finite"),
    ([], r"X holds no sequences"),
    ([[], []], r"X holds no tokens"),
    (5, r"X must be a list of sequences"),
])
def test_bad_input_is_a_value_error_naming_the_argument(X, match):
    with pytest.raises(ValueError, match=match):
        SequenceVectorizer(n_features=16).fit(X)


@pytest.mark.parametrize("params, match", [
    (dict(templates="lower"), "templates must be a list"),
    (dict(templates=("lower", "suffix0", "nope")), r"templates: unknown template\(s\) \['suffix0', 'nope'\]"),
    (dict(window=-1), "window must be an integer >= 0"),
    (dict(window=1.5), "window must be an integer >= 0"),
    (dict(hashing="yes"), "hashing must be True or False"),
    (dict(n_features=0), r"n_features must be an integer in \[1"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        SequenceVectorizer(**params).fit([["a"]])


def test_transform_checks_fitted_and_input_kind():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SequenceVectorizer().transform([["a"]])
    vec = SequenceVectorizer(n_features=16).fit([["a"]])
    with pytest.raises(ValueError, match="fitted on strings"):
        vec.transform([[{"w": "a"}]])


# ------------------------------------------------------------------ the tagger pipeline
def _toy_corpus(n, seed):
    """Determiner-adjective-noun-verb sentences: the tag follows from the word's suffix and place."""
    rng = np.random.default_rng(seed)
    dets, adjs = ["the", "a", "this"], ["big", "red", "old", "tiny"]
    nouns, verbs = ["cat", "dog", "bird", "house"], ["runs", "sleeps", "eats", "sings"]
    X, Y = [], []
    for _ in range(n):
        words, tags = [str(rng.choice(dets))], ["DET"]
        for _ in range(rng.integers(0, 3)):
            words.append(str(rng.choice(adjs)))
            tags.append("ADJ")
        words += [str(rng.choice(nouns)), str(rng.choice(verbs))]
        tags += ["NOUN", "VERB"]
        X.append(words)
        Y.append(np.array(tags))
    return X, Y


def test_make_tagger_fits_and_tags_raw_tokens():
    X, Y = _toy_corpus(30, 0)
    tagger = make_tagger(4, lam=0.01, n_features=2 ** 12, window=1, max_passes=10, random_state=0)
    assert tagger.named_steps["features"].window == 1 and tagger.named_steps["svm"].max_passes == 10
    tagger.fit(X, Y)
    Xt, Yt = _toy_corpus(10, 1)
    assert sf.metrics.token_accuracy(Yt, tagger.predict(Xt)) == 1.0
    assert tagger.predict([["a", "tiny", "bird", "sings"]])[0].tolist() == ["DET", "ADJ", "NOUN", "VERB"]
    with pytest.raises(TypeError, match="unexpected option"):
        make_tagger(4, windows=1)


def test_make_tagger_without_hashing_has_a_fixed_width():
    X, Y = _toy_corpus(20, 0)
    tagger = make_tagger(4, hashing=False, n_features=50, max_passes=5, random_state=0).fit(X, Y)
    assert tagger.named_steps["features"].n_features_ == 50


def test_pipeline_in_grid_search_over_lam_and_a_vectorizer_option():
    X, Y = _toy_corpus(24, 2)
    tagger = make_tagger(4, n_features=2 ** 12, max_passes=5, tol=None, random_state=0)
    gs = GridSearchCV(tagger, {"svm__lam": [0.01, 1.0], "features__window": [0, 1]},
                      scoring=sf.metrics.token_accuracy_scorer, cv=KFold(2), error_score="raise")
    gs.fit(X, Y)
    scores = gs.cv_results_["mean_test_score"]
    assert len(scores) == 4 and np.all(np.isfinite(scores)) and np.all((0 <= scores) & (scores <= 1))
    assert gs.best_params_["svm__lam"] in (0.01, 1.0)
    assert gs.best_estimator_.predict(X[:2])[0].dtype.kind == "U"


# ------------------------------------------------------------------ the corpus
def test_load_tagged_corpus():
    pytest.importorskip("hironsan")
    X, Y = sf.datasets.load_tagged_corpus("train")
    Xt, Yt = sf.datasets.load_tagged_corpus("test")
    assert len(X) == 450 and len(Xt) == 50
    assert all(len(x) == len(y) for x, y in zip(X + Xt, Y + Yt))
    assert sum(map(len, X + Xt)) == 15520
    tags = set(np.concatenate(Y + Yt))
    assert "O" in tags and "B-LOC" in tags and len(tags) == 17
    assert sf.metrics.span_f1(Y, Y) == 1.0
    Xd, Yd = sf.datasets.load_tagged_corpus("test", features="dicts")
    assert [d["word"] for d in Xd[0]] == Xt[0] and all("pos" in d for d in Xd[0])
    with pytest.raises(ValueError, match="split must be one of"):
        sf.datasets.load_tagged_corpus("dev")
    with pytest.raises(ValueError, match="features must be"):
        sf.datasets.load_tagged_corpus(features="words")


def test_load_tagged_corpus_says_how_to_install_it(monkeypatch):
    import importlib.resources

    from structfw.datasets import corpus

    def missing(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(importlib.resources, "files", missing)
    monkeypatch.setattr(corpus.resources, "files", missing)
    with pytest.raises(ModuleNotFoundError, match=r"structfw\[text\]"):
        corpus.load_tagged_corpus()
