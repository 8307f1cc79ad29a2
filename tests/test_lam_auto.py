"""lam="auto": StructuredSVM chooses lam on a held-out part of the training data (issue 51)."""
import json

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import structfw as sf
from structfw import io as sfio
from structfw import _lam_select
from structfw.models import MulticlassModel

D = 60
#: a huge lam underfits, a tiny one overfits the loud noise features; 1e-2 is clearly best here
GRID = [10.0, 1e-2, 1e-5]


def _noisy_multiclass(seed=0, n=400, d=D, K=3, informative=5, noise=0.2):
    """K classes decided by ``informative`` features; the other features are loud noise and a
    ``noise`` fraction of the labels is redrawn at random."""
    rng = np.random.default_rng(seed)
    W = np.zeros((K, d))
    W[:, :informative] = rng.normal(size=(K, informative))
    X = rng.normal(size=(n, d))
    y = np.argmax(X @ W.T, axis=1)
    X[:, informative:] *= 3.0
    flip = rng.random(n) < noise
    y[flip] = rng.integers(0, K, int(flip.sum()))
    return list(X), [int(v) for v in y]


def _auto(**kw):
    kw.setdefault("lam_grid", GRID)
    kw.setdefault("random_state", 0)
    return sf.StructuredSVM(MulticlassModel(3, D), lam="auto", max_passes=200, tol=1e-3, **kw)


@pytest.fixture(scope="module")
def data():
    return _noisy_multiclass()


@pytest.fixture(scope="module")
def fitted(data):
    return _auto().fit(*data)


def test_auto_picks_the_grid_best_on_a_known_case(fitted):
    curve = fitted.lam_curve_
    assert set(curve) == set(_lam_select.CURVE_COLUMNS)
    np.testing.assert_array_equal(curve["lam"], sorted(GRID, reverse=True))  # fitted from the largest down
    best = int(np.argmax(curve["score"]))
    assert fitted.lam_ == curve["lam"][best]
    # the case is one where the answer is known: the middle value wins clearly over both ends
    assert fitted.lam_ == pytest.approx(1e-2)
    others = np.delete(curve["score"], best)
    assert curve["score"][best] >= others.max() + 0.05
    assert np.all(curve["passes"] > 0) and np.all(curve["time_s"] >= 0)
    meta = fitted.trace_.meta["lam_selection"]
    assert (meta["n_train"], meta["n_validation"]) == (320, 80)  # ceil(0.2 * 400) held out
    assert fitted.trace_.meta["lam"] == pytest.approx(fitted.lam_)


def test_the_refit_uses_all_the_data_at_the_chosen_lam(data, fitted):
    plain = sf.StructuredSVM(MulticlassModel(3, D), lam=fitted.lam_, max_passes=200, tol=1e-3,
                             random_state=0).fit(*data)
    np.testing.assert_allclose(fitted.coef_, plain.coef_, rtol=1e-8, atol=1e-10)
    assert fitted.gap_ == pytest.approx(plain.gap_, rel=1e-6, abs=1e-12)
    assert plain.lam_ == fitted.lam_ and plain.lam_curve_ is None


def test_a_fixed_random_state_gives_the_same_selection(data, fitted):
    again = _auto().fit(*data)
    np.testing.assert_allclose(again.lam_curve_["score"], fitted.lam_curve_["score"])
    np.testing.assert_allclose(again.coef_, fitted.coef_, rtol=1e-8, atol=1e-10)
    tr0, va0 = _lam_select.split_indices(50, 0.2, 7)
    tr1, va1 = _lam_select.split_indices(50, 0.2, 7)
    np.testing.assert_array_equal(va0, va1)
    assert len(va0) == 10 and sorted(np.r_[tr0, va0]) == list(range(50))
    assert not np.array_equal(_lam_select.split_indices(50, 0.2, 8)[1], va0)


def test_the_default_grid():
    g = _lam_select.default_lam_grid(10_000)
    assert g.size == 10 and g[0] == 1.0 and g[-1] == pytest.approx(1e-4) and np.all(np.diff(g) < 0)
    assert _lam_select.default_lam_grid(100)[-1] == pytest.approx(1e-3)  # not below 0.1 / n
    X, Y = _noisy_multiclass(n=60)
    est = _auto(lam_grid=None).fit(X, Y)
    np.testing.assert_allclose(est.lam_curve_["lam"], _lam_select.default_lam_grid(60))


@pytest.mark.parametrize("name, value", [("lam_grid", []), ("lam_grid", [0.1, -1.0]), ("lam_grid", "0.1"),
                                         ("lam_grid", [[0.1]]), ("validation_fraction", 0.0),
                                         ("validation_fraction", 1.0), ("validation_fraction", "0.2")])
def test_bad_options_are_refused_naming_them(name, value):
    X, Y = _noisy_multiclass(n=20)
    with pytest.raises(ValueError, match=f"parameter '{name}' must be"):
        _auto(**{name: value}).fit(X, Y)


def test_a_split_that_leaves_a_part_empty_names_validation_fraction():
    X, Y = _noisy_multiclass(n=3)
    with pytest.raises(ValueError, match="validation_fraction=0.9 of 3 example"):
        _auto(validation_fraction=0.9).fit(X, Y)


def test_save_and_load_round_trip(tmp_path, data, fitted):
    path = fitted.save(tmp_path / "auto.npz")
    back = sf.StructuredSVM.load(path)
    assert back.lam == "auto" and back.lam_grid == GRID and back.validation_fraction == 0.2
    assert back.lam_ == fitted.lam_
    for c in _lam_select.CURVE_COLUMNS:
        np.testing.assert_allclose(back.lam_curve_[c], fitted.lam_curve_[c])
    assert [int(v) for v in back.predict(data[0][:50])] == [int(v) for v in fitted.predict(data[0][:50])]
    # a file saved with a numeric lam keeps it as lam_, with no curve
    plain = sf.StructuredSVM(MulticlassModel(3, D), lam=0.05, max_passes=5).fit(data[0][:40], data[1][:40])
    loaded = sf.StructuredSVM.load(plain.save(tmp_path / "plain.npz"))
    assert loaded.lam_ == 0.05 and loaded.lam_curve_ is None


def _rewrite_header(path, out, edit):
    """A copy of model file ``path`` whose JSON header went through ``edit``, digest recomputed."""
    with np.load(path) as f:
        members = {k: f[k] for k in f.files}
    header = json.loads(str(members["header"]))
    edit(header)
    members["header"] = np.array(json.dumps(header))
    del members[sfio.DIGEST_KEY]
    members[sfio.DIGEST_KEY] = np.array(sfio.members_digest(members))
    np.savez(out, **members)
    return out


@pytest.mark.parametrize("edit, field", [
    (lambda h: h["lam_selection"].update(lam=-1.0), "lam_selection"),
    (lambda h: h["lam_selection"].update(lam=0.5), "lam_selection"),  # not a grid value
    (lambda h: h["lam_selection"]["curve"].update(score=[0.1]), "lam_selection"),
    (lambda h: h["params"].update(lam="often"), "lam"),
    (lambda h: h["params"].update(validation_fraction=2.0), "validation_fraction"),
    (lambda h: h["params"].update(lam_grid=["x"]), "lam_grid"),
])
def test_crafted_lam_fields_are_refused(tmp_path, fitted, edit, field):
    bad = _rewrite_header(fitted.save(tmp_path / "auto.npz"), tmp_path / "bad.npz", edit)
    with pytest.raises(ValueError, match=field):
        sf.StructuredSVM.load(bad)


def test_an_unedited_rewrite_loads(tmp_path, fitted):
    """The rewriting of the crafted-file tests alone is no reason for a refusal."""
    same = _rewrite_header(fitted.save(tmp_path / "auto.npz"), tmp_path / "same.npz", lambda h: None)
    assert sf.StructuredSVM.load(same).lam_ == fitted.lam_


def test_clone_and_grid_search_keep_working(data, fitted):
    c = clone(fitted)
    assert c.lam == "auto" and c.lam_grid == GRID and not hasattr(c, "lam_")
    X, Y = data[0][:120], data[1][:120]
    search = GridSearchCV(_auto(lam_grid=[1.0, 1e-2]), {"validation_fraction": [0.2, 0.3]}, cv=2).fit(X, Y)
    assert search.best_estimator_.lam_ in (1.0, 1e-2)


def test_make_tagger_takes_lam_auto():
    X = [["the", "cat", "sat"], ["a", "dog", "ran"], ["the", "dog", "sat"], ["a", "cat", "ran"],
         ["the", "cat", "ran"], ["a", "dog", "sat"]]
    Y = [["D", "N", "V"]] * len(X)
    tagger = sf.make_tagger(lam="auto", lam_grid=[1.0, 0.1], window=1, max_passes=5, n_features=2 ** 8,
                            random_state=0)
    tagger.fit(X, Y)
    assert tagger[-1].lam_ in (1.0, 0.1)
    assert tagger.predict([["the", "dog", "ran"]])[0].tolist() == ["D", "N", "V"]
