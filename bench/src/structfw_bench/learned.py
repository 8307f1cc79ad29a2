"""Learned features on OCR (issue 48): a small CNN under structfw's max-margin chain layer.

The bundled OCR letters (16x8 binary images, 26 tags; train and test of fold 0) are read word by
word.  One small convolutional network maps each letter to 26 unary scores; it is trained with the
same seed, the same initial weights, the same batches and the same optimiser (Adam) under three
objectives: the structured hinge of `structfw.torch.MaxMarginChain` (normalised-Hamming margin,
learned transitions), per-letter cross-entropy (decoded letter by letter) and the negative
log-likelihood of a linear-chain CRF (`structfw.torch.chain_crf_nll`, Viterbi-decoded).  Against
them: structfw's linear chain on the raw pixels (BCFW with weighted averaging, one pass an epoch),
and the last-layer certificate: the hinge network's penultimate features frozen and its final
linear layer refitted by `structfw.torch.fit_last_layer`, whose duality gap certifies the refit.

Times: training time is the optimiser's loop only (the test evaluation after each epoch is timed
apart).  The layer's overhead is measured after training on the same batches, one phase at a
time: the network's forward, the structured loss's forward, the loss's backward down to the
emissions (with the transitions' gradient) and the network's backward from there.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import click
import numpy as np

from ._common import environment, pyplot, write_json

N_STATES = 26
IMAGE = (16, 8)
TARGET = 0.05  # the target for the CNN + chain hinge at full size
NETWORKS = ("cnn_hinge", "cnn_ce", "cnn_crf")
LABELS = {
    "cnn_hinge": "CNN + chain hinge (MaxMarginChain)",
    "linear_bcfw": "linear chain on pixels (BCFW-wavg)",
    "cnn_ce": "CNN, per-letter cross-entropy",
    "cnn_crf": "CNN + CRF (chain_crf_nll)",
    "last_layer": "last layer refitted by BCFW (frozen features)",
}


# ------------------------------------------------------------------------------------ torch
def _torch():
    """torch, or a click error saying how to install it (the core install has no torch)."""
    try:
        import torch
    except ImportError:
        raise click.ClickException('structfw bench learned needs PyTorch: pip install "structfw[torch]"') from None
    return torch


def _sft():
    """`structfw.torch` (imported on use: it needs torch, and ``--help`` must not)."""
    _torch()
    from structfw import torch as sft

    return sft


def resolve_device(torch, name):
    """A torch.device for "auto" (cuda when torch sees one), "cpu" or "cuda"."""
    if name not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device: expected 'auto', 'cpu' or 'cuda', got {name!r}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise click.BadParameter("cuda was asked for but torch sees no GPU", param_hint="'--device'")
    return torch.device(name)


def _sync(torch, device):
    # CUDA kernels run asynchronously: a timer must wait for them
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------------------------- data
def load_words(n_train=None, n_test=None, seed=0):
    """OCR fold 0's train and test words as (X, Y, Xt, Yt); ``n_train`` / ``n_test`` keep that
    many words drawn at random with ``seed`` (None or 0: all)."""
    from structfw import datasets

    X, Y = datasets.load_ocr("train", fold=0)
    Xt, Yt = datasets.load_ocr("test", fold=0)
    X, Y = _subsample(X, Y, n_train, seed)
    Xt, Yt = _subsample(Xt, Yt, n_test, seed + 1)
    return X, Y, Xt, Yt


def _subsample(X, Y, k, seed):
    if not k or k >= len(X):
        return list(X), list(Y)
    idx = np.sort(np.random.default_rng(seed).choice(len(X), int(k), replace=False))
    return [X[i] for i in idx], [Y[i] for i in idx]


class Words:
    """A set of words as tensors on the network's device: every letter image stacked in one
    (N, 1, 16, 8) tensor and every tag in one (N,) tensor, with the words' offsets into them."""

    def __init__(self, torch, X, Y, device):
        self.torch, self.device, self.Y = torch, device, [np.asarray(y, np.int64) for y in Y]
        self.letters = torch.as_tensor(np.concatenate(X), dtype=torch.float32).reshape(-1, 1, *IMAGE).to(device)
        self.tags = torch.as_tensor(np.concatenate(self.Y), dtype=torch.int64).to(device)
        self.starts = np.concatenate([[0], np.cumsum([len(y) for y in self.Y])]).astype(np.int64)

    def __len__(self):
        return len(self.Y)

    def batch(self, idx):
        """(letters (N, 1, 16, 8), tags (N,), padded tags (B, T), mask (B, T)) of the words ``idx``."""
        torch = self.torch
        idx = np.asarray(idx, np.int64)
        lengths = self.starts[idx + 1] - self.starts[idx]
        rows = np.concatenate([np.arange(self.starts[i], self.starts[i + 1]) for i in idx])
        rows = torch.as_tensor(rows, device=self.device)
        mask = (torch.arange(int(lengths.max()), device=self.device)[None, :]
                < torch.as_tensor(lengths, device=self.device)[:, None])
        tags = self.tags[rows]
        padded = torch.zeros(mask.shape, dtype=torch.int64, device=self.device)
        padded[mask] = tags
        return self.letters[rows], tags, padded, mask


def pad(flat, mask):
    """(B, T, K) emissions from the (N, K) letter scores of a batch, zeros past each word's end
    (the mask's row-major order is the letters' order)."""
    out = flat.new_zeros(mask.shape + flat.shape[1:])
    out[mask] = flat
    return out


def batches(rng, n, size):
    """The word indices of one epoch's batches: a permutation cut into pieces of ``size``."""
    order = rng.permutation(n)
    return [order[i:i + size] for i in range(0, n, size)]


# ---------------------------------------------------------------------------------- network
def make_network(torch, hidden=256, width=32, dropout=0.2):
    """(features, head): two 3x3 conv layers with 2x2 max-pooling and one hidden layer (the
    penultimate features, ``hidden`` of them), then a bias-free linear layer to 26 unaries, so
    that the head is exactly a ChainModel's unary weights over the features."""
    nn = torch.nn
    features = nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),           # 16x8 -> 8x4
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 8x4 -> 4x2
        nn.Flatten(), nn.Linear(2 * width * 8, hidden), nn.ReLU(), nn.Dropout(dropout))
    head = nn.Linear(hidden, N_STATES, bias=False)
    return features, head


class Objective:
    """The loss and the decoder one method puts on the network's letter scores.

    ``loss(em, tags, mask)`` takes the (B, T, K) emissions, the (B, T) padded tags and the mask;
    ``decode(em, mask)`` returns one int array per word; ``params`` are the objective's own
    parameters (the transitions), ``transitions()`` their current (K, K) value.  Every objective
    is a function of the padded emissions alone, so that the overhead's timers can cut the
    backward pass there.
    """

    def __init__(self, torch, sft, method, device):
        self.torch, self.method = torch, method
        self.layer, self.params = None, []
        if method == "cnn_hinge":
            self.layer = sft.MaxMarginChain(N_STATES).to(device)
            self.params = list(self.layer.parameters())
        elif method == "cnn_crf":
            self.crf = sft.chain_crf_nll
            self.params = [torch.nn.Parameter(torch.zeros(N_STATES, N_STATES, device=device))]
        elif method != "cnn_ce":
            raise ValueError(f"method: expected one of {NETWORKS}, got {method!r}")

    def transitions(self):
        if self.method == "cnn_hinge":
            return self.layer.transitions
        return self.params[0] if self.params else None

    def loss(self, em, tags, mask):
        if self.method == "cnn_hinge":
            return self.layer(em, tags, mask)
        if self.method == "cnn_crf":
            return self.crf(em, self.params[0], tags, mask)
        return self.torch.nn.functional.cross_entropy(em[mask], tags[mask])

    def decode(self, em, mask):
        lengths = mask.sum(1).tolist()
        if self.method == "cnn_hinge":
            return [np.asarray(p, np.int64) for p in self.layer.decode(em, mask)]
        if self.method == "cnn_ce":
            return np.split(em[mask].argmax(1).cpu().numpy(), np.cumsum(lengths)[:-1])
        from structfw.oracles import viterbi

        P = self.params[0].detach().cpu().double().numpy()
        U = em.detach().cpu().double().numpy()
        return [viterbi(np.ascontiguousarray(U[b, :L]), P)[0] for b, L in enumerate(lengths)]


def errors(Y, P):
    """(letter error, word error) of predictions ``P`` against ``Y``."""
    wrong = [np.asarray(p) != y for p, y in zip(P, Y)]
    letters = sum(int(w.sum()) for w in wrong) / max(1, sum(len(w) for w in wrong))
    return letters, sum(bool(w.any()) for w in wrong) / max(1, len(wrong))


def predict_words(torch, features, head, objective, words, chunk=512):
    """The method's decoding of every word (eval mode, no gradients)."""
    features.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(words), chunk):
            letters, _, _, mask = words.batch(np.arange(i, min(i + chunk, len(words))))
            out += objective.decode(pad(head(features(letters)), mask), mask)
    return out


def train_network(method, train, test, *, epochs, lr, batch_size, seed, hidden, width, dropout, device,
                  log=print):
    """Train one network under ``method``'s objective.

    Parameters
    ----------
    method : {"cnn_hinge", "cnn_ce", "cnn_crf"}
    train, test : Words
    epochs, lr, batch_size, seed : int, float, int, int
        Adam's epochs and learning rate, words a batch; ``seed`` fixes the initial weights and
        the batches, so every method starts from the same network and sees the same batches.
    hidden, width, dropout : int, int, float
        The network's size (`make_network`).
    device : torch.device
    log : callable

    Returns
    -------
    record : dict
        Final test letter and word errors, training time and the per-epoch curve.
    parts : (features, head, Objective)
        The trained network.
    """
    torch = _torch()
    torch.manual_seed(seed)  # the same initial network for every method
    features, head = make_network(torch, hidden, width, dropout)
    features, head = features.to(device), head.to(device)
    objective = Objective(torch, _sft(), method, device)
    params = list(features.parameters()) + list(head.parameters()) + objective.params
    opt = torch.optim.Adam(params, lr=lr)
    rng = np.random.default_rng(seed)  # the same batches for every method
    curve, train_s = [], 0.0
    for epoch in range(1, epochs + 1):
        features.train()
        t0 = time.perf_counter()
        total = 0.0
        for idx in batches(rng, len(train), batch_size):
            letters, _, tags, mask = train.batch(idx)
            loss = objective.loss(pad(head(features(letters)), mask), tags, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        _sync(torch, device)
        train_s += time.perf_counter() - t0
        letter, word = errors(test.Y, predict_words(torch, features, head, objective, test))
        curve.append(dict(epoch=epoch, train_loss=total / len(train), test_letter_error=letter,
                          test_word_error=word, train_s=train_s))
        log(f"{method} epoch {epoch}: loss {total / len(train):.4f}, test letter error {letter:.4f}, "
            f"word error {word:.4f} ({train_s:.1f} s)")
    record = dict(label=LABELS[method], test_letter_error=curve[-1]["test_letter_error"],
                  test_word_error=curve[-1]["test_word_error"], train_s=train_s, curve=curve)
    return record, (features, head, objective)


# --------------------------------------------------------------------------------- overhead
def measure_overhead(parts, train, batch_size, seed, device, repeats=20, warmup=3):
    """Median ms per batch of the network's forward, the structured loss's forward, the loss's
    backward to the emissions (and transitions) and the network's backward from there."""
    torch = _torch()
    features, head, objective = parts
    features.train()
    rng = np.random.default_rng(seed + 7)
    idxs = batches(rng, len(train), batch_size)
    times = {k: [] for k in ("net_forward", "loss_forward", "loss_backward", "net_backward")}
    for r in range(warmup + repeats):
        letters, _, tags, mask = train.batch(idxs[r % len(idxs)])
        _sync(torch, device)
        t0 = time.perf_counter()
        em = pad(head(features(letters)), mask)
        _sync(torch, device)
        t1 = time.perf_counter()
        loss = objective.loss(em, tags, mask)
        _sync(torch, device)
        t2 = time.perf_counter()
        grads = torch.autograd.grad(loss, [em] + objective.params)
        _sync(torch, device)
        t3 = time.perf_counter()
        em.backward(grads[0])
        _sync(torch, device)
        t4 = time.perf_counter()
        if r >= warmup:
            for k, a, b in zip(times, (t0, t1, t2, t3), (t1, t2, t3, t4)):
                times[k].append(1e3 * (b - a))
    for p in list(features.parameters()) + list(head.parameters()):
        p.grad = None
    ms = {f"{k}_ms": float(np.median(v)) for k, v in times.items()}
    layer = ms["loss_forward_ms"] + ms["loss_backward_ms"]
    net = ms["net_forward_ms"] + ms["net_backward_ms"]
    return dict(ms, layer_ms=layer, network_ms=net, ratio=layer / net, batch_size=batch_size, repeats=repeats)


# ---------------------------------------------------------------------------- linear, last layer
def run_linear(X, Y, Xt, Yt, *, epochs, lam, seed, log=print):
    """structfw's linear chain on the pixels: BCFW with weighted averaging, one pass an epoch."""
    from structfw import StructuredSVM
    from structfw.models import ChainModel
    from structfw.solvers import BCFW

    svm = StructuredSVM(ChainModel(N_STATES, X[0].shape[1]), solver=BCFW(averaging="weighted"), lam=lam,
                        max_passes=1, tol=None, check_every=1, random_state=seed, warm_start=True)
    StructuredSVM(ChainModel(N_STATES, X[0].shape[1]), max_passes=1).fit(X[:2], Y[:2])  # load the kernels untimed
    curve, train_s = [], 0.0
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        svm.fit(X, Y)
        train_s += time.perf_counter() - t0
        letter, word = errors(Yt, svm.predict(Xt))
        curve.append(dict(epoch=epoch, test_letter_error=letter, test_word_error=word, train_s=train_s,
                          gap=float(svm.gap_)))
        log(f"linear_bcfw pass {epoch}: test letter error {letter:.4f}, gap {svm.gap_:.4g} ({train_s:.1f} s)")
    return dict(label=LABELS["linear_bcfw"], lam=lam, test_letter_error=curve[-1]["test_letter_error"],
                test_word_error=curve[-1]["test_word_error"], train_s=train_s, gap=float(svm.gap_),
                primal=float(svm.primal_), dual=float(svm.dual_), curve=curve)


def frozen_features(torch, features, words, chunk=512):
    """The penultimate features of every word, (L_i, hidden) float64 arrays (eval mode)."""
    features.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(words), chunk):
            idx = np.arange(i, min(i + chunk, len(words)))
            letters, _, _, mask = words.batch(idx)
            F = features(letters).double().cpu().numpy()
            out += np.split(F, np.cumsum(mask.sum(1).tolist())[:-1])
    return out


def network_primal(head, objective, F, Y, lam):
    """The refit's objective at the network's own last layer: lam/2 ||w||^2 + the mean chain
    hinge of its unary weights and transitions over the training words (an upper bound that the
    refit's dual bounds from below)."""
    torch = _torch()
    sft = _sft()
    with torch.no_grad():
        W = head.weight.detach().double().cpu()
        T = objective.transitions().detach().double().cpu()
        hinge = sum(float(sft.chain_hinge(torch.as_tensor(f) @ W.T, T, torch.as_tensor(y))) for f, y in zip(F, Y))
    return 0.5 * lam * float((W ** 2).sum() + (T ** 2).sum()) + hinge / len(F)


def run_last_layer(parts, train, test, *, lam, passes, seed, log=print):
    """Refit the trained network's final linear layer (unaries and transitions) on its frozen
    penultimate features with `structfw.torch.fit_last_layer`; its test errors and certificate."""
    torch = _torch()
    features, head, objective = parts
    F, Ft = frozen_features(torch, features, train), frozen_features(torch, features, test)
    t0 = time.perf_counter()
    # no bias column: the refit is a layer of the network's own form (its head has no bias), so
    # the network's layer is a point of the refit's problem and the dual bounds it too
    svm = _sft().fit_last_layer(F, train.Y, n_states=N_STATES, lam=lam, bias=False, max_passes=passes, tol=None,
                                random_state=seed)
    fit_s = time.perf_counter() - t0
    letter, word = errors(test.Y, svm.predict(Ft))
    net = network_primal(head, objective, F, train.Y, lam)
    log(f"last layer: test letter error {letter:.4f}, gap {svm.gap_:.3g} ({fit_s:.1f} s)")
    return dict(label=LABELS["last_layer"], lam=lam, passes=passes, n_features=int(F[0].shape[1]),
                test_letter_error=letter, test_word_error=word, fit_s=fit_s, gap=float(svm.gap_),
                primal=float(svm.primal_), dual=float(svm.dual_), network_primal=net,
                network_bound=net - float(svm.dual_))


# ------------------------------------------------------------------------------------- bench
def run_learned(*, n_train=None, n_test=None, epochs=10, seed=0, out="bench_out/learned", threads=None,
                device="auto", batch_size=32, lr=2e-3, hidden=256, width=32, dropout=0.2, lam=0.01,
                last_lam=1e-3, last_passes=30, overhead_repeats=20, log=print):
    """Run every method and write ``out``/learned.json and learned.png.

    Parameters
    ----------
    n_train, n_test : int or None
        Words drawn at random from fold 0's train and test sets (None: all).
    epochs, seed, batch_size, lr, hidden, width, dropout
        The networks' training (`train_network`); ``epochs`` is also the linear chain's passes.
    out : path
        Folder of the JSON and the figure.
    threads : int or None
        ``torch.set_num_threads`` during the run (None: torch's default); restored afterwards.
    device : {"auto", "cpu", "cuda"}
        Where the networks run; the oracles run on the CPU whatever it is.
    lam, last_lam, last_passes : float, float, int
        lam of the linear chain on pixels; lam and BCFW passes of the last-layer refit.
    overhead_repeats : int
        Batches the overhead's medians are taken over.
    log : callable

    Returns
    -------
    dict, the document written to learned.json.
    """
    torch = _torch()
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        return _run_learned(torch, n_train, n_test, epochs, seed, out, device, batch_size, lr, hidden, width,
                            dropout, lam, last_lam, last_passes, overhead_repeats, log)
    finally:
        torch.set_num_threads(before)


def _run_learned(torch, n_train, n_test, epochs, seed, out, device, batch_size, lr, hidden, width, dropout, lam,
                 last_lam, last_passes, overhead_repeats, log):
    dev = resolve_device(torch, device)
    t_start = time.perf_counter()
    X, Y, Xt, Yt = load_words(n_train, n_test, seed)
    train, test = Words(torch, X, Y, dev), Words(torch, Xt, Yt, dev)
    log(f"OCR: {len(X)} training words ({len(train.tags)} letters), {len(Xt)} test words "
        f"({len(test.tags)} letters); device {dev}, {torch.get_num_threads()} torch threads")
    methods, parts = {}, {}
    opts = dict(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, hidden=hidden, width=width,
                dropout=dropout, device=dev, log=log)
    methods["cnn_hinge"], parts["cnn_hinge"] = train_network("cnn_hinge", train, test, **opts)
    methods["linear_bcfw"] = run_linear(X, Y, Xt, Yt, epochs=epochs, lam=lam, seed=seed, log=log)
    for method in ("cnn_ce", "cnn_crf"):
        methods[method], parts[method] = train_network(method, train, test, **opts)
    methods["last_layer"] = run_last_layer(parts["cnn_hinge"], train, test, lam=last_lam, passes=last_passes,
                                           seed=seed, log=log)
    overhead = {m: measure_overhead(parts[m], train, batch_size, seed, dev, repeats=overhead_repeats)
                for m in ("cnn_hinge", "cnn_crf")}
    doc = dict(n_train=len(X), n_test=len(Xt), letters_train=int(len(train.tags)), letters_test=int(len(test.tags)),
               epochs=epochs, seed=seed, device=str(dev), threads=torch.get_num_threads(), batch_size=batch_size,
               lr=lr, hidden=hidden, width=width, dropout=dropout, optimiser="Adam", target=TARGET,
               target_met=methods["cnn_hinge"]["test_letter_error"] <= TARGET,
               torch=torch.__version__,
               cpus=os.cpu_count(), load=os.getloadavg()[0], wall_s=time.perf_counter() - t_start,
               environment=environment(), methods=methods, overhead=overhead)
    out = Path(out)
    write_json(out / "learned.json", doc)
    plot_learned(doc, out / "learned.png")
    return doc


def plot_learned(doc, path):
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 5.2), gridspec_kw=dict(width_ratios=(1.6, 1)))
    for name, m in doc["methods"].items():
        if "curve" in m:
            c = m["curve"]
            ax.plot([p["epoch"] for p in c], [p["test_letter_error"] for p in c], "o-", ms=3, label=m["label"])
    last = doc["methods"]["last_layer"]
    ax.axhline(last["test_letter_error"], color="k", ls=":", lw=1,
               label=f"{last['label']}, gap {last['gap']:.2g}")
    ax.axhline(doc["target"], color="r", ls="--", lw=0.8, label=f"target {doc['target']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("epoch (linear chain: BCFW pass)")
    ax.set_ylabel("test letter error")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    names = list(doc["overhead"])
    phases = (("net_forward_ms", "network forward"), ("net_backward_ms", "network backward"),
              ("loss_forward_ms", "loss forward"), ("loss_backward_ms", "loss backward"))
    bottom = np.zeros(len(names))
    for key, label in phases:
        vals = np.array([doc["overhead"][n][key] for n in names])
        bx.bar(range(len(names)), vals, bottom=bottom, label=label)
        bottom += vals
    for i, n in enumerate(names):
        bx.text(i, bottom[i], f"layer {doc['overhead'][n]['ratio']:.2f}x net", ha="center", va="bottom", fontsize=8)
    bx.set_xticks(range(len(names)), [{"cnn_hinge": "chain hinge", "cnn_crf": "CRF"}.get(n, n) for n in names])
    bx.set_ylabel(f"ms per batch of {doc['batch_size']} words")
    bx.set_ylim(0, 1.15 * bottom.max())
    bx.legend(fontsize=7)
    fig.suptitle(f"OCR, {doc['n_train']} training words, {doc['epochs']} epochs, Adam lr {doc['lr']:g}, "
                 f"seed {doc['seed']} ({doc['device']}, {doc['threads']} torch threads)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(doc):
    lines = [f"{'method':>48} {'letter err':>10} {'word err':>9} {'train s':>8}"]
    for m in doc["methods"].values():
        t = m.get("train_s", m.get("fit_s"))
        lines.append(f"{m['label']:>48} {m['test_letter_error']:>10.4f} {m['test_word_error']:>9.4f} {t:>8.1f}")
    last = doc["methods"]["last_layer"]
    lines.append(f"last-layer certificate: gap {last['gap']:.4g} (primal {last['primal']:.4f}, dual "
                 f"{last['dual']:.4f}); the network's own last layer: primal {last['network_primal']:.4f}")
    for name, o in doc["overhead"].items():
        lines.append(f"{name} per batch: layer {o['layer_ms']:.1f} ms, network {o['network_ms']:.1f} ms "
                     f"(ratio {o['ratio']:.2f})")
    return "\n".join(lines)


@click.command("learned")
@click.option("--n-train", default=0, show_default=True, type=click.IntRange(min=0),
              help="Training words to draw at random (0: all 6,251).")
@click.option("--n-test", default=0, show_default=True, type=click.IntRange(min=0),
              help="Test words to draw at random (0: all 626).")
@click.option("--epochs", default=10, show_default=True, type=click.IntRange(min=1),
              help="Epochs of every network (and BCFW passes of the linear chain).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the weights, batches and samplers.")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1), help="Words a batch.")
@click.option("--lr", default=2e-3, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Adam's learning rate.")
@click.option("--hidden", default=256, show_default=True, type=click.IntRange(min=1),
              help="Penultimate features (the last layer's inputs).")
@click.option("--width", default=32, show_default=True, type=click.IntRange(min=1),
              help="Channels of the first conv layer (the second has twice as many).")
@click.option("--lam", default=0.01, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="lam of the linear chain on pixels.")
@click.option("--last-lam", default=1e-3, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="lam of the last-layer refit.")
@click.option("--last-passes", default=30, show_default=True, type=click.IntRange(min=1),
              help="BCFW passes of the last-layer refit.")
@click.option("--threads", default=0, show_default=True, type=click.IntRange(min=0),
              help="torch.set_num_threads (0: torch's default).")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where the network runs (auto: cuda when torch sees a GPU); the oracles stay on the CPU.")
@click.option("--out-dir", "--out", "out", default="bench_out/learned", show_default=True,
              type=click.Path(file_okay=False), help="Writes learned.json and learned.png here.")
def bench_learned(n_train, n_test, epochs, seed, batch_size, lr, hidden, width, lam, last_lam, last_passes,
                  threads, device, out):
    """Learned features on OCR: a CNN under the chain hinge against linear, cross-entropy and CRF."""
    t0 = time.perf_counter()
    doc = run_learned(n_train=n_train or None, n_test=n_test or None, epochs=epochs, seed=seed, out=out,
                      threads=threads or None, device=device, batch_size=batch_size, lr=lr, hidden=hidden,
                      width=width, lam=lam, last_lam=last_lam, last_passes=last_passes, log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'learned.json'} and {Path(out) / 'learned.png'} ({time.perf_counter() - t0:.0f} s)")
