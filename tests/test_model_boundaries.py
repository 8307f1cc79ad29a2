"""The bundled models at their boundaries: sizes bounded at construction, inference options
checked at construction, and every public method checking its arguments once -- while the
engine calls the same methods unchecked, and user-written models are called as written."""
from __future__ import annotations

import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import structfw as sf
from structfw._linalg import SparseVector
from structfw.models import (ChainModel, GraphCutModel, GraphModel, GridModel, LatentSubclassModel, MatchingModel,
                             MulticlassModel, PoseModel, PottsModel, StructuredModel)
from structfw.models._validation import MAX_SIZE_JOINT_FEATURE, MAX_TABLE_ENTRIES
from structfw.models.base import CheckedModel, bind_unchecked_twins, unchecked_method
from structfw.solvers import BCFW
from structfw.solvers.problem import Problem

rng = np.random.default_rng(0)

#: the methods every bundled model checks (and `expectation` where the model has it)
CORE = ("joint_feature", "psi", "loss", "example_loss", "loss_augmented_decode", "decode", "score")


@dataclass
class Case:
    """A model with a valid input x, two valid labellings y, y2 of it, an input of the wrong
    width and bad labellings of x (float, out-of-range, wrong length, wrong number of dimensions)."""

    model: Any
    x: Any
    y: Any
    y2: Any
    wide_x: Any
    bad: dict[str, Any] = field(default_factory=dict)


def _labels(y, out_of_range, ndim_wrong):
    y = np.asarray(y)
    return {"float": y + 0.5, "range": out_of_range, "length": y[:-1], "ndim": ndim_wrong}


def _chain():
    y = np.array([0, 1, 2, 0, 1, 2, 0])
    return Case(ChainModel(3, 4), rng.random((7, 4)), y, np.array([1, 1, 0, 2, 2, 0, 1]), rng.random((7, 5)),
                _labels(y, np.array([0, 1, 5, 0, 1, 2, 0]), y[:, None]))


def _class_labels():
    return {"float": 1.5, "range": 5, "length": np.array([1, 2]), "ndim": np.array([[1]])}


def _multiclass():
    return Case(MulticlassModel(3, 4), rng.random(4), 2, 0, rng.random(5), _class_labels())


def _latent():
    return Case(LatentSubclassModel(2, 2, 3), rng.random(3), 3, 1, rng.random(4), _class_labels())


def _grid():
    y = np.array([[0, 1, 2], [2, 1, 0]])
    bad = {"float": y + 0.5, "range": np.array([[0, 1, 3], [2, 1, 0]]), "length": y[:, :2], "ndim": y[..., None]}
    return Case(GridModel(3, 2), rng.random((2, 3, 2)), y, np.array([[1, 1, 2], [0, 1, 0]]), rng.random((2, 3, 3)),
                bad)


_PATH = np.array([[0, 1], [1, 2], [2, 3]])


def _graph():
    y = np.array([0, 2, 1, 2])
    return Case(GraphModel(3, 2), (rng.random((4, 2)), _PATH), y, np.array([1, 2, 0, 0]), (rng.random((4, 3)), _PATH),
                _labels(y, np.array([0, 5, 1, 2]), y[:, None]))


def _graph_cut():
    y = np.array([0, 1, 1, 0])
    ef = np.ones((3, 1))
    return Case(GraphCutModel(2, 1), (rng.random((4, 2)), _PATH, ef), y, np.array([1, 1, 0, 0]),
                (rng.random((4, 3)), _PATH, ef), _labels(y, np.array([0, 2, 1, 0]), y[:, None]))


def _potts():
    y = np.array([0, 2, 1, 0])
    ef = np.ones((3, 1))
    return Case(PottsModel(3, 2, 1, potts_constant=1.0), (rng.random((4, 2)), _PATH, ef), y, np.array([1, 2, 2, 0]),
                (rng.random((4, 3)), _PATH, ef), _labels(y, np.array([0, 3, 1, 0]), y[:, None]))


def _matching():
    y = np.array([0, 2, -1])
    # -2 (not 4, past the 4 target words): the loss, without the input, knows no upper bound
    return Case(MatchingModel(2), rng.random((3, 4, 2)), y, np.array([1, -1, 3]), rng.random((3, 4, 3)),
                _labels(y, np.array([0, -2, -1]), y[:, None]))


def _pose():
    y = np.array([[0, 0], [1, 2], [3, 4]])
    bad = {"float": y + 0.5, "range": np.array([[0, 0], [1, 5], [3, 4]]), "length": y[:2], "ndim": y.ravel()}
    return Case(PoseModel(3, [-1, 0, 1], 2, (4, 5)), rng.random((4, 5, 2)), y, np.array([[1, 1], [2, 2], [3, 3]]),
                rng.random((4, 5, 3)), bad)


CASES = {f.__name__[1:]: f for f in (_chain, _multiclass, _latent, _grid, _graph, _graph_cut, _potts, _matching,
                                      _pose)}


def checked_methods(model):
    """The public methods of the model's class that check their arguments."""
    cls = type(model)
    return sorted(n for n in dir(cls) if not n.startswith("_") and hasattr(getattr(cls, n), "__unchecked__"))


def parameters(model, name):
    import inspect

    return list(inspect.signature(getattr(type(model), name)).parameters)[1:]


def arguments(case, name, **replace):
    """Valid arguments of method ``name`` (by its parameter names), some replaced."""
    model = case.model
    value = {"x": case.x, "y_true": case.y, "y": case.y2, "w": rng.standard_normal(model.size_joint_feature),
             "v": rng.standard_normal(model.size_joint_feature), "c": 0.5}
    value.update(replace)
    return [value[p] for p in parameters(model, name) if p in value]


def same(a, b):
    if isinstance(a, SparseVector):
        np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=1e-12, atol=1e-12)
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            same(p, q)
    else:
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- every method checks
@pytest.mark.parametrize("kind", CASES)
def test_every_bundled_model_checks_the_core_methods(kind):
    case = CASES[kind]()
    have = checked_methods(case.model)
    assert set(CORE) <= set(have)
    if case.model.has_expectation_oracle:
        assert "expectation" in have


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("bad", ["float", "range", "length", "ndim"])
def test_every_labelling_argument_is_checked_and_named(kind, bad):
    case = CASES[kind]()
    cls = type(case.model).__name__
    for name in checked_methods(case.model):
        for p in ("y", "y_true"):
            if p not in parameters(case.model, name):
                continue
            args = arguments(case, name, **{p: case.bad[bad]})
            # the loss takes a pair: two labellings of different shapes are named together
            named = "(y_true and y|y_true|y)" if name == "loss" and bad in ("length", "ndim") else p
            with pytest.raises(ValueError, match=rf"^{cls}\.{name}: {named}\b"):
                getattr(case.model, name)(*args)


@pytest.mark.parametrize("kind", CASES)
def test_an_input_of_the_wrong_width_is_named(kind):
    case = CASES[kind]()
    cls = type(case.model).__name__
    methods = [n for n in checked_methods(case.model) if "x" in parameters(case.model, n)]
    assert methods
    for name in methods:
        with pytest.raises(ValueError, match=rf"^{cls}\.{name}: x\b.*(features|n_features|shape)"):
            getattr(case.model, name)(*arguments(case, name, x=case.wide_x))


@pytest.mark.parametrize("kind", CASES)
def test_a_weight_vector_of_the_wrong_length_is_named(kind):
    case = CASES[kind]()
    model, cls = case.model, type(case.model).__name__
    d = model.size_joint_feature
    for name in checked_methods(model):
        for p in ("w", "v"):
            if p in parameters(model, name):
                with pytest.raises(ValueError, match=rf"^{cls}\.{name}: {p} must be a vector of length d = {d}"):
                    getattr(model, name)(*arguments(case, name, **{p: np.ones(d + 1)}))
                w = rng.standard_normal(d)
                w[0] = np.nan
                with pytest.raises(ValueError, match=rf"^{cls}\.{name}: {p} contains NaN"):
                    getattr(model, name)(*arguments(case, name, **{p: w}))


@pytest.mark.parametrize("kind", CASES)
def test_valid_arguments_give_what_the_unchecked_method_gives(kind):
    """The checks convert (lists, integer-valued floats, float32 maps), and change no result."""
    case = CASES[kind]()
    model = case.model
    x = model.check_X([case.x])[0]
    y, y2 = model.check_y(x, case.y), model.check_y(x, case.y2)
    as_given = {"y_true": np.asarray(case.y).tolist(), "y": np.asarray(case.y2).astype(float)}
    for name in checked_methods(model):
        w = rng.standard_normal(model.size_joint_feature)
        kw = dict(w=w, v=w)
        got = getattr(model, name)(*arguments(case, name, **as_given, **kw))
        want = unchecked_method(model, name)(*arguments(case, name, x=x, y_true=y, y=y2, **kw))
        same(got, want)


def test_the_loss_checks_its_pair_without_an_input():
    m = ChainModel(3, 4)
    y = np.array([0, 1, 2])
    assert m.loss(y, [0, 1, 1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"ChainModel\.loss: y_true and y must have the same shape, got \(3,\) and "
                                         r"\(2,\)"):
        m.loss(y, y[:2])
    with pytest.raises(ValueError, match=r"ChainModel\.loss: y_true must be a non-empty 1-d array"):
        m.loss(y[:, None], y[:, None])  # was numpy's "truth value of an array ... is ambiguous"
    with pytest.raises(ValueError, match=r"MatchingModel\.loss: y aligns target word 1 to more than one"):
        MatchingModel(2).loss([0, 1], [1, 1])
    with pytest.raises(ValueError, match=r"PoseModel\.loss: y_true: part 0 is at \(9, 9\)"):
        PoseModel(1, [-1], 2, (4, 5)).loss([[9, 9]], [[0, 0]])


def test_an_alignment_past_the_target_words_is_named():
    case = _matching()
    w = np.zeros(2)
    for call in (lambda y: case.model.psi(case.x, case.y, y), lambda y: case.model.loss_augmented_decode(case.x, y, w),
                 lambda y: case.model.edge_scores(case.x, w, y)):
        with pytest.raises(ValueError, match=r"MatchingModel\.\w+: y(_true)? has target index 4 outside -1\.\.3"):
            call(np.array([0, 4, -1]))


def test_keyword_arguments_and_defaults_are_checked_too():
    case = _chain()
    m = case.model
    w = np.zeros(m.size_joint_feature)
    same(m.loss_augmented_decode(x=case.x, y_true=case.y, w=w), m.loss_augmented_decode(case.x, case.y, w))
    with pytest.raises(ValueError, match=r"ChainModel\.score: y has label 5"):
        m.score(case.x, w=w, y=case.bad["range"])
    with pytest.raises(TypeError):
        m.decode(case.x)
    grid = _grid()
    with pytest.raises(ValueError, match=r"GridModel\.energy: y_true has label 3"):
        grid.model.energy(grid.x, grid.y, np.zeros(grid.model.size_joint_feature), grid.bad["range"])


def test_mean_loss_refuses_lists_of_different_lengths():
    m = ChainModel(3, 4)
    with pytest.raises(ValueError, match="Y_true and Y_pred must have the same length"):
        m.mean_loss([np.array([0, 1])], [])


# ---------------------------------------------------------------- the engine skips them
@pytest.fixture
def count_checks(monkeypatch):
    calls = []
    original = CheckedModel._check_arguments

    def counting(self, method, *args):
        calls.append(method)
        return original(self, method, *args)

    monkeypatch.setattr(CheckedModel, "_check_arguments", counting)
    return calls


def _chain_data(n=6, L=5, S=3, F=4, seed=1):
    r = np.random.default_rng(seed)
    return [r.random((L, F)) for _ in range(n)], [r.integers(0, S, L) for _ in range(n)]


def test_the_engine_calls_the_methods_of_a_bundled_model_unchecked(count_checks):
    model = ChainModel(3, 4)
    X, Y = model.check_data(*_chain_data())
    problem = Problem(model, X, Y, 0.1, validated=True)
    w = rng.standard_normal(model.size_joint_feature)
    y, psi, L, H = problem.oracle(0, w, validate=True)
    problem.corner(1, problem.max_oracle(1, w))
    problem.expectation(2, w, 1.0)
    problem.joint_feature_true(3)
    assert count_checks == []
    assert isinstance(model.psi(X[0], Y[0], y), SparseVector)  # a user's call is checked
    assert count_checks == ["psi"]


def test_the_executor_and_a_python_route_fit_call_no_check(count_checks):
    from structfw.executor import SerialExecutor

    class Python(ChainModel):
        def compiled_oracle(self, X, Y):
            return None

    model = ChainModel(3, 4)
    X, Y = model.check_data(*_chain_data())
    ex = SerialExecutor()
    key = ex.bind(model, X, Y)
    w = rng.standard_normal(model.size_joint_feature)
    assert len(ex.loss_augmented_decode(key, w)) == len(ex.decode(key, w)) == len(X)
    svm = sf.StructuredSVM(Python(3, 4), solver=BCFW(sampling="gap", cache=True, step="pairwise"), lam=0.1,
                           max_passes=3, tol=None, random_state=0).fit(*_chain_data())
    svm.predict(X)
    assert count_checks == []


def test_a_certified_gap_calls_the_bounds_unchecked(count_checks):
    case = _potts()
    X, Y = case.model.check_data([case.x, case.x], [case.y, case.y2])
    problem = Problem(case.model, X, Y, 0.1, validated=True)
    w = np.abs(rng.standard_normal(case.model.size_joint_feature))
    U = problem.hinge_bounds(w)
    problem.corner(0, Y[1])  # Potts' fixed score is in the corner's constant
    assert U.shape == (2,) and np.all(U >= 0)
    assert count_checks == []


def test_a_fit_gives_the_iterates_it_gave_before_the_checks():
    """A Python-route fit (no compiled oracle) reaches the engine through the unchecked methods;
    the same fit through the checked ones (a subclass calling them) gives the same iterates."""
    class Python(ChainModel):
        def compiled_oracle(self, X, Y):
            return None

    class ThroughTheChecks(Python):
        def loss_augmented_decode(self, x, y_true, w):
            return super().loss_augmented_decode(x, y_true, w)

        def psi(self, x, y_true, y):
            return super().psi(x, y_true, y)

    X, Y = _chain_data(n=12)
    fits = [sf.StructuredSVM(cls(3, 4), solver=BCFW(), lam=0.1, max_passes=3, tol=None, random_state=0).fit(X, Y)
            for cls in (ChainModel, Python, ThroughTheChecks)]
    for f in fits[1:]:
        np.testing.assert_allclose(f.coef_, fits[0].coef_, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- user-written models
class _Counted(StructuredModel):
    """A user model defining only the public methods (psi and score from the base class)."""

    size_joint_feature = 4

    def __init__(self):
        self.calls = {"joint_feature": 0, "loss_augmented_decode": 0, "loss": 0}

    def joint_feature(self, x, y):
        self.calls["joint_feature"] += 1
        phi = np.zeros(4)
        phi[2 * y:2 * y + 2] = x
        return phi

    def loss(self, y_true, y):
        self.calls["loss"] += 1
        return float(y_true != y)

    def loss_augmented_decode(self, x, y_true, w):
        self.calls["loss_augmented_decode"] += 1
        return int(np.argmax([self.loss(y_true, k) + w @ self.joint_feature(x, k) for k in (0, 1)]))

    def decode(self, x, w):
        return int(np.argmax([w @ self.joint_feature(x, k) for k in (0, 1)]))


def test_a_user_model_is_called_as_written():
    model = _Counted()
    X = [np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([1.0, 1.0])]
    Y = [0, 1, 0]
    svm = sf.StructuredSVM(model, solver=BCFW(), lam=0.1, max_passes=3, tol=None, random_state=0).fit(X, Y)
    assert model.calls["loss_augmented_decode"] > 0
    assert model.calls["joint_feature"] > 0  # the base class's psi computes through the user's joint_feature
    assert unchecked_method(model, "loss_augmented_decode") == model.loss_augmented_decode
    assert _Counted._unchecked_joint_feature is _Counted.joint_feature
    # the base class's checked defaults check nothing of a user model (it has no validators)
    np.testing.assert_allclose(model.psi(X[0], 0, 1), [1.0, 0.0, -1.0, 0.0])
    assert len(svm.predict(X)) == 3


def test_an_override_is_what_the_engine_and_the_other_methods_call():
    calls = []

    class Mixin:
        def loss_augmented_decode(self, x, y_true, w):
            calls.append("oracle")
            return super().loss_augmented_decode(x, y_true, w)

        def loss(self, y_true, y):
            calls.append("loss")
            return super().loss(y_true, y)

    cls = type("MixedChain", (Mixin, ChainModel), {})
    model = cls(3, 4)
    assert unchecked_method(model, "loss_augmented_decode").__func__ is Mixin.loss_augmented_decode
    assert cls._unchecked_loss is Mixin.loss
    x, y = rng.random((5, 4)), np.array([0, 1, 2, 1, 0])
    model.example_loss(x, y, y)  # ChainModel's example_loss reaches the mixin's loss
    assert calls == ["loss"]
    X, Y = _chain_data()
    sf.StructuredSVM(model, solver=BCFW(), lam=0.1, max_passes=1, tol=None, random_state=0).fit(X, Y)
    assert calls.count("oracle") >= len(X)


def test_a_wrapper_of_a_model_keeps_its_own_methods():
    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def loss_augmented_decode(self, x, y_true, w):
            return self.inner.loss_augmented_decode(x, y_true, w)

    inner = ChainModel(3, 4)
    wrapped = Wrapper(inner)
    assert unchecked_method(wrapped, "loss_augmented_decode") == wrapped.loss_augmented_decode
    psi = unchecked_method(wrapped, "psi")
    assert psi.__self__ is inner and psi.__func__ is ChainModel.psi.__unchecked__


def test_twins_follow_a_class_patched_and_rebound():
    class Sub(ChainModel):
        pass

    def loss(self, y_true, y):
        return 0.0

    Sub.loss = loss
    bind_unchecked_twins(Sub)
    assert Sub(3, 4).example_loss(np.ones((2, 4)), [0, 1], [1, 0]) == 0.0


# ---------------------------------------------------------------- sizes
_CHAIN14 = [-1] + list(range(13))


def _peak_bytes(make):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as info:
            make()
        return tracemalloc.get_traced_memory()[1], str(info.value)
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("make, names", [
    (lambda: ChainModel(10 ** 9, 4), ("ChainModel", "n_states * n_features", "size_joint_feature")),
    (lambda: ChainModel(4, 10 ** 12), ("ChainModel", "n_features", "size_joint_feature")),
    (lambda: MulticlassModel(10 ** 6, 10 ** 6), ("MulticlassModel", "n_classes * n_features")),
    (lambda: LatentSubclassModel(10 ** 3, 10 ** 3, 10 ** 4), ("LatentSubclassModel", "n_subclasses")),
    (lambda: GridModel(10 ** 5, 10), ("GridModel", "n_states ** 2")),
    (lambda: GraphModel(10 ** 5, 1, pairwise="potts"), ("GraphModel", "n_states ** 2", "pairwise table")),
    (lambda: GraphModel(40_000, 1), ("GraphModel", "size_joint_feature")),
    (lambda: GraphCutModel(10 ** 9, 1), ("GraphCutModel", "n_features", "size_joint_feature")),
    (lambda: PottsModel(10 ** 5, 1, 1), ("PottsModel", "n_states ** 2", "pairwise table")),
    (lambda: MatchingModel(10 ** 10), ("MatchingModel", "n_features")),
    (lambda: PoseModel(14, _CHAIN14, 8, grid_shape=(10 ** 6, 10 ** 6)), ("PoseModel", "grid_shape", "H * W")),
    (lambda: PoseModel(14, _CHAIN14, 8, (60, 60), window=10 ** 5 + 1), ("PoseModel", "window ** 2")),
])
def test_a_size_past_the_limit_is_refused_at_construction_without_allocating(make, names):
    peak, message = _peak_bytes(make)
    for name in names:
        assert name in message
    assert "exceeds the limit" in message
    assert peak < 2 ** 20  # nothing of the size was allocated (the old failure: "Unable to allocate 7.28 TiB")


def test_sizes_at_the_limit_are_accepted():
    assert ChainModel(2, 10 ** 6).size_joint_feature == 2 * 10 ** 6 + 4
    GraphModel(100, 2)  # the (K K, n_slots) slot matrix is sparse: K^4 = 10^8 entries were allocated here
    assert MAX_SIZE_JOINT_FEATURE == 10 ** 9 and MAX_TABLE_ENTRIES == 10 ** 9


def test_the_model_file_loader_uses_the_same_bound():
    from structfw import estimator
    from structfw import io as sfio

    assert estimator._MAX_D == MAX_SIZE_JOINT_FEATURE
    header = sfio.FieldMap({"model": "ChainModel", "model_config": {"n_states": 10 ** 9, "n_features": 4}},
                           "m.npz")
    with pytest.raises(ValueError, match=r"invalid configuration of ChainModel: .*exceeds the limit"):
        estimator._model_from_header(header)


# ---------------------------------------------------------------- GraphModel's inference options
@pytest.mark.parametrize("options, match", [
    ({"trws": {"maxiter": 3}}, r"inference_options\['trws'\] has the option 'maxiter'.*takes \['icm_sweeps'"),
    ({"trws": {"return_info": True}}, r"has the option 'return_info'"),
    ({"trws": {"max_iter": 0}}, r"inference_options\['trws'\]\['max_iter'\] must be an integer in \[1, "),
    ({"trws": {"max_iter": 2.5}}, r"\['max_iter'\] must be an integer"),
    ({"trws": {"tol": float("nan")}}, r"\['tol'\] must be a finite number"),
    ({"trws": {"order": [0, 0, 1]}}, r"\['order'\] must be a list of distinct node indices"),
    ({"lp": {"integral_tol": 1.0}}, r"inference_options\['lp'\]\['integral_tol'\] must be a finite number in "
                                    r"\[0.0, 1.0\)"),
    ({"qpbo": {"exhaustive_max": 64}}, r"\['exhaustive_max'\] must be an integer in \[0, 32\]"),
    ({"qpbo": {"trws_iter": True}}, r"\['trws_iter'\] must be an integer"),
    ('{"trws": {"max_iter": -1}}', r"\['max_iter'\] must be an integer"),
])
def test_inference_options_are_checked_at_construction(options, match):
    with pytest.raises(ValueError, match=match):
        GraphModel(3, 2, inference_options=options)


def test_inference_options_set_later_are_checked_and_valid_ones_round_trip():
    m = GraphModel(3, 2, inference="trws", inference_options={"trws": {"max_iter": 7, "tol": 0}, "qpbo": {}})
    assert m.inference_options == {"trws": {"max_iter": 7, "tol": 0.0}, "qpbo": {}}
    assert GraphModel(**m.get_config()).inference_options == m.inference_options
    with pytest.raises(ValueError, match=r"inference_options\['trws'\]\['icm_sweeps'\] must be an integer"):
        m.inference_options = {"trws": {"icm_sweeps": -1}}
    assert m.inference_options["trws"]["max_iter"] == 7  # unchanged by the refused assignment


def test_a_trws_order_is_checked_against_every_graph_by_name():
    cycle = (rng.random((4, 2)), np.array([[0, 1], [1, 2], [2, 3], [3, 0]]))
    m = GraphModel(3, 2, inference="trws", inference_options={"trws": {"order": [3, 2, 1, 0]}})
    x = m.check_X([cycle])[0]
    assert m.decode(x, rng.standard_normal(m.size_joint_feature)).shape == (4,)
    m.inference_options = {"trws": {"order": [2, 1, 0]}}
    with pytest.raises(ValueError, match=r"X\[0\] has 4 nodes, but inference_options\['trws'\]\['order'\]"):
        m.check_X([cycle])


@pytest.mark.parametrize("value", [1e300, 1e160])
def test_features_whose_squares_overflow_are_refused_at_fit(value):
    """Finite features of 1e160 or 1e300 overflowed ||psi||^2: every step was 0 and the fit stayed at
    w = 0 without a word (gap 1.0). They are refused by name, like infinities."""
    import structfw as sf
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 12)
    X = [np.full(4, value) * (1 + 0.1 * i) for i in range(12)]
    with pytest.raises(ValueError, match=r"X\[0\] has values too large for float64.*rescale"):
        sf.StructuredSVM(sf.models.MulticlassModel(3, 4), max_passes=1).fit(X, list(y))
    Xc = [np.full((3, 4), value)] * 4
    Yc = [np.zeros(3, np.int64)] * 4
    with pytest.raises(ValueError, match=r"X\[0\] has values too large"):
        sf.StructuredSVM(sf.models.ChainModel(3, 4), max_passes=1).fit(Xc, Yc)
    ok = sf.StructuredSVM(sf.models.MulticlassModel(3, 4), max_passes=1, tol=None).fit(
        [x / value for x in X], list(y))
    assert np.isfinite(ok.coef_).all()
