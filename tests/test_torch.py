"""structfw.torch: the structured hinge as a PyTorch layer (issue 48).

The hinge and its gradient against brute force and the linear estimator's objective, batches
against one example at a time, finite differences, dtypes and devices, and the errors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import structfw as sf  # noqa: E402
import structfw.torch as sft  # noqa: E402
from structfw.solvers.problem import Problem  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _score(U, P, y):
    return float(U[np.arange(len(y)), y].sum() + P[y[:-1], y[1:]].sum())


def _brute_chain(U, P, y, c=1.0):
    """(value, maximiser) of max_y' c (1/L) #{y'_l != y_l} + s(y') by enumeration."""
    L, K = U.shape
    best, arg = -np.inf, None
    for cand in itertools.product(range(K), repeat=L):
        cand = np.array(cand)
        v = c * np.mean(cand != y) + _score(U, P, cand)
        if v > best:
            best, arg = v, cand
    return best, arg


def _indicators(y, K):
    L = len(y)
    dU = np.zeros((L, K))
    dU[np.arange(L), y] = 1.0
    dP = np.zeros((K, K))
    np.add.at(dP, (y[:-1], y[1:]), 1.0)
    return dU, dP


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("loss_scale", [1.0, 0.0, 2.5])
def test_chain_hinge_is_brute_force_value_and_subgradient(seed, loss_scale):
    rng = np.random.default_rng(seed)
    L, K = rng.integers(1, 5), rng.integers(2, 4)
    U, P = rng.normal(size=(L, K)), rng.normal(size=(K, K))
    y = rng.integers(K, size=L)
    u = torch.tensor(U, requires_grad=True)
    p = torch.tensor(P, requires_grad=True)
    h = sft.chain_hinge(u, p, torch.tensor(y), loss_scale=loss_scale)
    best, arg = _brute_chain(U, P, y, loss_scale)
    assert h.dim() == 0
    assert h.item() == pytest.approx(best - _score(U, P, y), abs=1e-10)
    assert h.item() >= -1e-12
    h.backward()
    (aU, aP), (tU, tP) = _indicators(arg, K), _indicators(y, K)
    np.testing.assert_allclose(u.grad.numpy(), aU - tU, atol=1e-12)
    np.testing.assert_allclose(p.grad.numpy(), aP - tP, atol=1e-12)


def test_chain_hinge_gradient_against_finite_differences():
    rng = np.random.default_rng(3)
    L, K = 6, 4
    U, P, y = rng.normal(size=(L, K)), rng.normal(size=(K, K)), rng.integers(K, size=L)
    u = torch.tensor(U, requires_grad=True)
    p = torch.tensor(P, requires_grad=True)
    sft.chain_hinge(u, p, y).backward()

    def h(U_, P_):
        return sft.chain_hinge(torch.tensor(U_), torch.tensor(P_), y).item()

    eps = 1e-6  # the hinge is piecewise linear: away from ties a central difference is exact up to rounding
    for arr, grad in ((U, u.grad.numpy()), (P, p.grad.numpy())):
        for idx in np.ndindex(arr.shape):
            e = np.zeros_like(arr)
            e[idx] = eps
            a, b = (U + e, P) if arr is U else (U, P + e)
            c, d = (U - e, P) if arr is U else (U, P - e)
            fd = (h(a, b) - h(c, d)) / (2 * eps)
            assert fd == pytest.approx(grad[idx], abs=1e-6)


def test_linear_layer_reproduces_the_estimators_objective_and_subgradient():
    """unary = X W^T and the transitions from the same w: lam/2 ||w||^2 + the mean torch hinge is the
    estimator's primal P(w) (eq. (1)), and autograd's gradient is its subgradient lam w + mean psi."""
    rng = np.random.default_rng(0)
    K, F, n, lam = 3, 5, 12, 0.1
    X = [rng.normal(size=(rng.integers(2, 6), F)) for _ in range(n)]
    Y = [rng.integers(K, size=len(x)) for x in X]
    model = sf.models.ChainModel(K, F)
    w = rng.normal(size=model.size_joint_feature)
    problem = Problem(model, X, Y, lam)
    primal = problem.primal(w, float(problem.batch_hinges(w).sum()))
    sub = lam * w
    for i in range(n):
        y_star = model.loss_augmented_decode(X[i], Y[i], w)
        sub = sub + (model.joint_feature(X[i], y_star).toarray() - model.joint_feature(X[i], Y[i]).toarray()) / n

    wt = torch.tensor(w, requires_grad=True)
    W = wt[:K * F].reshape(K, F)
    T = wt[K * F:].reshape(K, K)
    hinges = torch.stack([sft.chain_hinge(torch.tensor(x) @ W.T, T, y) for x, y in zip(X, Y)])
    objective = 0.5 * lam * (wt * wt).sum() + hinges.mean()
    objective.backward()
    assert objective.item() == pytest.approx(primal, rel=1e-10)
    np.testing.assert_allclose(wt.grad.numpy(), np.ravel(sub), atol=1e-10)


def _padded(rng, B, K, lengths):
    T = max(lengths)
    E = rng.normal(size=(B, T, K))
    tags = rng.integers(K, size=(B, T))
    mask = np.arange(T)[None, :] < np.array(lengths)[:, None]
    return E, tags, mask


@pytest.mark.parametrize("n_jobs", [1, 3])
def test_batched_layer_equals_one_sequence_at_a_time(n_jobs):
    rng = np.random.default_rng(1)
    B, K, lengths = 7, 4, [5, 1, 3, 5, 2, 4, 5]
    E, tags, mask = _padded(rng, B, K, lengths)
    layer = sft.MaxMarginChain(K, n_jobs=n_jobs, reduction="sum").double()
    with torch.no_grad():
        layer.transitions.copy_(torch.tensor(rng.normal(size=(K, K))))
    e = torch.tensor(E, requires_grad=True)
    loss = layer(e, torch.tensor(tags), torch.tensor(mask))
    loss.backward()

    e1 = torch.tensor(E, requires_grad=True)
    p1 = layer.transitions.detach().clone().requires_grad_(True)
    total = sum(sft.chain_hinge(e1[b, :lengths[b]], p1, tags[b, :lengths[b]]) for b in range(B))
    total.backward()
    assert loss.item() == pytest.approx(total.item(), rel=1e-12)
    np.testing.assert_allclose(e.grad.numpy(), e1.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(layer.transitions.grad.numpy(), p1.grad.numpy(), atol=1e-12)
    # padding gets no gradient
    assert np.all(e.grad.numpy()[~mask] == 0.0)


def test_reductions_and_per_sequence_hinges():
    rng = np.random.default_rng(2)
    E, tags, mask = _padded(rng, 4, 3, [3, 2, 3, 1])
    e, t, m = torch.tensor(E), torch.tensor(tags), torch.tensor(mask)
    h = sft.MaxMarginChain(3, reduction="none")(e, t, m)
    assert h.shape == (4,)
    assert sft.MaxMarginChain(3)(e, t, m).item() == pytest.approx(h.mean().item(), rel=1e-12)
    assert sft.MaxMarginChain(3, reduction="sum")(e, t, m).item() == pytest.approx(h.sum().item(), rel=1e-12)


def test_decode_and_score_against_brute_force():
    rng = np.random.default_rng(4)
    K, lengths = 3, [4, 2, 3]
    E, tags, mask = _padded(rng, 3, K, lengths)
    layer = sft.MaxMarginChain(K).double()
    P = rng.normal(size=(K, K))
    with torch.no_grad():
        layer.transitions.copy_(torch.tensor(P))
    paths = layer.decode(torch.tensor(E), torch.tensor(mask))
    scores = layer.score(torch.tensor(E), torch.tensor(tags), torch.tensor(mask))
    for b, L in enumerate(lengths):
        _, arg = _brute_chain(E[b, :L], P, np.zeros(L, np.int64), 0.0)
        assert paths[b] == list(arg)
        assert scores[b].item() == pytest.approx(_score(E[b, :L], P, tags[b, :L]), rel=1e-12)


def test_crf_nll_against_brute_force_and_autograd():
    rng = np.random.default_rng(5)
    K, lengths = 3, [3, 1, 2]
    E, tags, mask = _padded(rng, 3, K, lengths)
    P = rng.normal(size=(K, K))
    e = torch.tensor(E, requires_grad=True)
    p = torch.tensor(P, requires_grad=True)
    nll = sft.chain_crf_nll(e, p, torch.tensor(tags), torch.tensor(mask), reduction="sum")
    nll.backward()

    e2 = torch.tensor(E, requires_grad=True)
    p2 = torch.tensor(P, requires_grad=True)
    ref = 0.0
    for b, L in enumerate(lengths):
        def s(y):
            y = torch.tensor(y)
            return e2[b, torch.arange(L), y].sum() + p2[y[:-1], y[1:]].sum()
        logZ = torch.logsumexp(torch.stack([s(list(c)) for c in itertools.product(range(K), repeat=L)]), 0)
        ref = ref + logZ - s(list(tags[b, :L]))
    ref.backward()
    assert nll.item() == pytest.approx(ref.item(), rel=1e-10)
    np.testing.assert_allclose(e.grad.numpy(), e2.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(p.grad.numpy(), p2.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_are_kept(device, dtype):
    rng = np.random.default_rng(6)
    E, tags, mask = _padded(rng, 3, 4, [4, 2, 3])
    layer = sft.MaxMarginChain(4).to(device=device, dtype=dtype)
    e = torch.tensor(E, dtype=dtype, device=device, requires_grad=True)
    loss = layer(e, torch.tensor(tags, device=device), torch.tensor(mask, device=device))
    loss.backward()
    assert loss.dtype == dtype and loss.device.type == device
    assert e.grad.dtype == dtype and e.grad.device.type == device
    assert layer.transitions.grad.dtype == dtype
    u = torch.tensor(E[0], dtype=dtype, device=device, requires_grad=True)
    h = sft.chain_hinge(u, layer.transitions, torch.tensor(tags[0], device=device))
    assert h.dtype == dtype and h.device.type == device


def test_structured_hinge_loss_batches_any_family():
    rng = np.random.default_rng(7)
    scores = [torch.tensor(rng.normal(size=5), requires_grad=True) for _ in range(4)]
    ys = [int(v) for v in rng.integers(5, size=4)]
    loss = sft.StructuredHingeLoss("multiclass", reduction="sum", n_jobs=2)([(s,) for s in scores], ys)
    loss.backward()
    for s, y in zip(scores, ys):
        v = s.detach().numpy()
        aug = v + (np.arange(5) != y)
        k = int(np.argmax(aug))
        g = np.zeros(5)
        g[k] += 1.0
        g[y] -= 1.0
        np.testing.assert_allclose(s.grad.numpy(), g, atol=1e-12)
    ref = sum(float(np.max(s.detach().numpy() + (np.arange(5) != y)) - s.detach().numpy()[y]) for s, y in zip(scores, ys))
    assert loss.item() == pytest.approx(ref, rel=1e-12)


def test_graph_family_with_per_example_edges_matches_one_by_one():
    rng = np.random.default_rng(8)
    examples = []
    for V in (3, 4):
        edges = np.array([[v, v + 1] for v in range(V - 1)] + [[0, V - 1]], np.int64)
        examples.append((torch.tensor(rng.normal(size=(V, 2)), requires_grad=True),
                         torch.tensor(rng.normal(size=(len(edges), 2, 2)), requires_grad=True),
                         rng.integers(2, size=V), edges))
    loss = sft.StructuredHingeLoss("graph", reduction="sum", inference="exhaustive")(
        [(u, p) for u, p, _, _ in examples], [y for _, _, y, _ in examples], [{"edges": e} for *_, e in examples])
    one = sum(sft.structured_hinge("graph", u.detach(), p.detach(), y=y, edges=e, inference="exhaustive")
              for u, p, y, e in examples)
    assert loss.item() == pytest.approx(one.item(), rel=1e-12)
    loss.backward()
    assert all(u.grad is not None and p.grad is not None for u, p, _, _ in examples)


def test_last_layer_fit_certifies_and_loads_back():
    rng = np.random.default_rng(9)
    K, D = 3, 4
    feats = [torch.tensor(rng.normal(size=(rng.integers(2, 6), D)), dtype=torch.float32) for _ in range(30)]
    Y = [np.argmax(f.numpy()[:, :K], axis=1) for f in feats]
    svm = sft.fit_last_layer(feats, Y, lam=0.01, max_passes=3000, tol=1e-3, random_state=0)
    assert svm.gap_ <= 1e-3
    assert svm.gap_ == pytest.approx(svm.primal_ - svm.dual_, abs=1e-9)
    W, b, T = sft.last_layer_weights(svm)
    assert W.shape == (K, D) and b.shape == (K,) and T.shape == (K, K)
    layer = sft.MaxMarginChain(K)
    with torch.no_grad():
        layer.transitions.copy_(T)
    for f, y_pred in zip(feats[:10], svm.predict([np.hstack([f.numpy(), np.ones((len(f), 1))]) for f in feats[:10]])):
        emissions = (f @ W.T + b).unsqueeze(0)
        assert layer.decode(emissions)[0] == list(y_pred)


# ------------------------------------------------------------------------ errors
def test_bad_inputs_name_the_argument():
    u, p = torch.zeros(4, 3), torch.zeros(3, 3)
    with pytest.raises(ValueError, match="unary"):
        sft.chain_hinge(torch.zeros(4), p, [0, 0, 0, 0])
    with pytest.raises(ValueError, match="transitions"):
        sft.chain_hinge(u, torch.zeros(3, 4), [0, 0, 0, 0])
    with pytest.raises(ValueError, match="y"):
        sft.chain_hinge(u, p, [0, 0, 0])
    with pytest.raises(ValueError, match="y"):
        sft.chain_hinge(u, p, [0, 0, 0, 3])
    with pytest.raises(TypeError, match="y"):
        sft.chain_hinge(u, p, torch.zeros(4))
    with pytest.raises(TypeError, match="unary"):
        sft.chain_hinge(torch.zeros(4, 3, dtype=torch.int64), p, [0, 0, 0, 0])
    with pytest.raises(ValueError, match="loss_scale"):
        sft.chain_hinge(u, p, [0, 0, 0, 0], loss_scale=-1)
    layer = sft.MaxMarginChain(3)
    with pytest.raises(ValueError, match="emissions"):
        layer(torch.zeros(2, 4, 5), torch.zeros(2, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="tags"):
        layer(torch.zeros(2, 4, 3), torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"tags\[1\]"):
        layer(torch.zeros(2, 4, 3), torch.tensor([[0, 0, 0, 0], [0, 5, 0, 0]]))
    with pytest.raises(ValueError, match=r"mask\[0\]"):
        layer(torch.zeros(2, 4, 3), torch.zeros(2, 4, dtype=torch.int64),
              torch.tensor([[True, False, True, False], [True, True, True, True]]))
    with pytest.raises(ValueError, match="mask"):
        layer(torch.zeros(2, 4, 3), torch.zeros(2, 4, dtype=torch.int64), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_tags"):
        sft.MaxMarginChain(1)
    with pytest.raises(ValueError, match="reduction"):
        sft.MaxMarginChain(3, reduction="avg")
    with pytest.raises(ValueError, match="n_jobs"):
        sft.MaxMarginChain(3, n_jobs=0)
    with pytest.raises(ValueError, match="family"):
        sft.StructuredHingeLoss("crf")
    with pytest.raises(ValueError, match="ys"):
        sft.StructuredHingeLoss("multiclass")([(torch.zeros(3),)], [0, 1])
    with pytest.raises(ValueError, match="features"):
        sft.fit_last_layer(np.zeros((3, 2)), [np.zeros(3, np.int64)])


def test_class_weight_weights_the_mistakes_by_the_true_tag():
    rng = np.random.default_rng(10)
    L, K = 4, 3
    U, P, y = rng.normal(size=(L, K)), rng.normal(size=(K, K)), np.array([0, 2, 2, 1])
    cw = np.array([1.0, 3.0, 0.5])
    a = cw[y] / cw[y].sum()
    best = max(float(a @ (np.array(c) != y)) + _score(U, P, np.array(c)) for c in itertools.product(range(K), repeat=L))
    h = sft.chain_hinge(torch.tensor(U), torch.tensor(P), y, class_weight=cw)
    assert h.item() == pytest.approx(best - _score(U, P, y), abs=1e-10)
    layer = sft.MaxMarginChain(K, class_weight=cw).double()
    with torch.no_grad():
        layer.transitions.copy_(torch.tensor(P))
    assert layer(torch.tensor(U[None]), torch.tensor(y[None])).item() == pytest.approx(h.item(), rel=1e-12)
    # equal weights are the plain normalised Hamming loss
    plain = sft.chain_hinge(torch.tensor(U), torch.tensor(P), y)
    same = sft.chain_hinge(torch.tensor(U), torch.tensor(P), y, class_weight=np.full(K, 2.0))
    assert same.item() == pytest.approx(plain.item(), rel=1e-12)
    with pytest.raises(ValueError, match="class_weight"):
        sft.MaxMarginChain(K, class_weight=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="class_weight"):
        sft.chain_hinge(torch.tensor(U), torch.tensor(P), y, class_weight=[1.0, 1.0])


def test_the_core_package_never_imports_torch():
    """torch is an extra: importing structfw, its models, solvers, estimator and CLI must not load it."""
    import subprocess
    import sys

    code = ("import sys, structfw, structfw.models, structfw.solvers, structfw.oracles.potentials, "
            "structfw.estimator, structfw.cli; import structfw.cli.train; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_torch_the_extra_is_named():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import structfw.torch\nexcept ImportError as e:\n    assert 'structfw[torch]' in str(e), e\n"
            "else:\n    raise SystemExit('no ImportError')")
    subprocess.run([sys.executable, "-c", code], check=True)


def _family_cases(rng):
    edges = np.array([[0, 1], [1, 2], [2, 3], [0, 3]])
    return [
        ("chain", (rng.normal(size=(4, 3)), rng.normal(size=(3, 3))), np.array([0, 2, 1, 1]), {}),
        ("multiclass", (rng.normal(size=5),), 3, {}),
        ("graph", (rng.normal(size=(4, 2)), rng.normal(size=(4, 2, 2))), np.array([0, 1, 1, 0]),
         {"edges": edges, "inference": "exhaustive"}),
        ("graph_cut", (rng.normal(size=(4, 2)), np.abs(rng.normal(size=4))), np.array([0, 1, 1, 0]), {"edges": edges}),
        ("potts", (rng.normal(size=(4, 3)), np.abs(rng.normal(size=4))), np.array([0, 2, 1, 0]), {"edges": edges}),
        ("matching", (rng.normal(size=(3, 4)),), np.array([0, -1, 2]), {}),
        ("pose", (rng.normal(size=(3, 4, 4)), np.abs(rng.normal(size=(3, 4)))), np.array([[0, 0], [1, 1], [2, 2]]),
         {"parent": np.array([-1, 0, 0])}),
    ]


@pytest.mark.parametrize("case", range(7))
def test_every_family_runs_its_potential_oracle_with_its_gradient(case):
    from structfw.oracles import potentials

    name, arrays, y, opts = _family_cases(np.random.default_rng(11))[case]
    fn, names = sft.FAMILIES[name]
    ref = fn(**dict(zip(names, arrays)), y_true=y, **opts)
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    h = sft.structured_hinge(name, *tensors, y=y, **opts)
    h.backward()
    assert h.item() == pytest.approx(ref.hinge, rel=1e-12, abs=1e-12)
    for t, g in zip(tensors, ref.grad):
        np.testing.assert_allclose(t.grad.numpy(), g, atol=1e-12)
    assert fn is getattr(potentials, f"{name}_hinge")
    with pytest.raises(ValueError, match="potential tensors"):
        sft.structured_hinge(name, *tensors[:-1], torch.zeros(1), torch.zeros(1), y=y, **opts)
