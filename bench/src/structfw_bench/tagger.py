"""structfw's tagger against sklearn-crfsuite (issue 51): accuracy, fit time and fit memory.

Tasks: ``"ocr"``, the bundled OCR words on the BCFW paper's split (train on folds 1..9, test on
fold 0), every letter a feature dict ``{"bias": 1.0, "p<j>": 1.0 for each lit pixel j}``;
``"corpus"``, the Japanese named-entity corpus of `structfw.datasets.load_tagged_corpus`
(``features="dicts"``, its 450/50 split, plus ``"bias": 1.0`` on every token); and, with
``conll=PATH``, ``"conll"``: a user's CoNLL column file read by
`structfw.datasets.corpus_files.read_conll_file` (tokens and tags: the middle columns are not
read), cut 90/10 in file order, each token a dict of word features (`token_dicts`).  Both
taggers are given the same feature dicts and the same string tags, so that they differ only in
what they learn and how.

Configurations (`CONFIGS`): ``"structfw"``, `structfw.make_tagger` at its defaults (only
``random_state`` is set, for reproducible pairs); ``"structfw-auto"``, the same with
``lam="auto"`` (the selection runs inside ``fit``, so its cost is in the fit time); ``"crf"``,
``sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100)``.

Every fit runs in a fresh Python process of its own (`run_child`), so that its peak memory is its
own.  The child loads the data and builds the feature dicts, then measures its baseline resident
set; the fit's memory is the peak resident set during the fit minus that baseline.  On Linux the
peak is ``VmHWM`` of ``/proc/self/status``, reset to the current resident set just before the fit
(``/proc/self/clear_refs``): ``getrusage(RUSAGE_SELF).ru_maxrss`` in a child carries the
*parent's* peak across ``exec`` (a child of a 1.5 GB parent reads 1.5 GB before it has allocated
anything), so it is recorded beside it but not used.  Elsewhere ru_maxrss is all there is.

Compilation: the first structfw fit of each configuration and task runs with ``NUMBA_CACHE_DIR``
pointing at an empty folder (a cold start: every kernel is compiled inside the fit), the others
with that folder as the first run left it (loaded from the cache).  The warm runs are alternated
with CRF fits, structfw then CRF, ``pairs`` times per structfw configuration, so that the load of
the (shared) machine falls on both alike; medians over the pairs and each pair's ratios are
reported.
"""
from __future__ import annotations

import gc
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from structfw._memory import reset_peak, status_bytes as _status_bytes
from ._common import child_env, environment, pyplot, write_json

TASKS = ("ocr", "corpus")
CONFIGS = ("structfw", "structfw-auto", "crf")
STRUCTFW_CONFIGS = ("structfw", "structfw-auto")
LABELS = {
    "structfw": "structfw make_tagger() (defaults)",
    "structfw-auto": 'structfw make_tagger(lam="auto")',
    "crf": "sklearn-crfsuite CRF (L-BFGS, c1 = c2 = 0.1)",
}
CRF_PARAMS = dict(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100)
#: the issue's targets for structfw against the CRF
TARGETS = dict(accuracy="token accuracy >= CRF's", time="fit wall time <= 0.5 x CRF's", memory="fit memory <= CRF's")
CONLL_TEST_FRACTION = 0.1
_RESULT = "TAGGER-BENCH-RESULT "  # marks the child's one line of JSON among anything else it prints
_MB = 1024.0 * 1024.0


# ------------------------------------------------------------------------------------ features
def ocr_letter_dicts(word):
    """One feature dict per letter of an OCR word ((L, 128) 0/1 pixels): a bias and ``p<j>`` for
    every lit pixel j, the sparse form of the pixels that both taggers read alike."""
    return [dict({"bias": 1.0}, **{f"p{j}": 1.0 for j in np.flatnonzero(row)}) for row in np.asarray(word)]


def token_dicts(tokens):
    """One feature dict per token of a sentence (for a CoNLL file): a bias, the lowercased word,
    its 2- and 3-letter suffixes, three case and digit flags, and the neighbours' lowercased words."""
    out = []
    for i, tok in enumerate(tokens):
        low = tok.lower()
        out.append({"bias": 1.0, "lower": low, "suffix2": low[-2:], "suffix3": low[-3:], "is_title": tok.istitle(),
                    "is_upper": tok.isupper(), "is_digit": tok.isdigit(),
                    "prev": tokens[i - 1].lower() if i else "<s>",
                    "next": tokens[i + 1].lower() if i + 1 < len(tokens) else "</s>"})
    return out


def _subsample(X, Y, k, seed):
    """k sequences drawn at random with ``seed`` (kept in corpus order); all of them for None or 0."""
    if not k or k >= len(X):
        return list(X), list(Y)
    idx = np.sort(np.random.default_rng(seed).choice(len(X), int(k), replace=False))
    return [X[i] for i in idx], [Y[i] for i in idx]


def _ocr_data():
    """The raw words (pixels, letter tags): featurized after any subsampling, which is cheaper."""
    from structfw import datasets

    def words(split):
        X, Y = datasets.load_ocr(split, fold=0)
        return list(X), [[chr(ord("a") + int(v)) for v in y] for y in Y]

    return (*words("train"), *words("test"))


def _corpus_data():
    from structfw.datasets import load_tagged_corpus

    def sentences(split):
        X, Y = load_tagged_corpus(split, features="dicts")
        return [[dict(tok, bias=1.0) for tok in s] for s in X], [[str(t) for t in y] for y in Y]

    return (*sentences("train"), *sentences("test"))


def _conll_data(path):
    from structfw.datasets.corpus_files import read_conll_file

    corpus = read_conll_file(path)
    X = [token_dicts(s) for s in corpus.sentences]
    Y = [list(t) for t in corpus.tags]
    cut = len(X) - max(1, math.ceil(CONLL_TEST_FRACTION * len(X)))
    if cut < 1:
        raise ValueError(f"conll: {path} holds {len(X)} sentence(s); a 90/10 split needs at least 2")
    return X[:cut], Y[:cut], X[cut:], Y[cut:]


def load_task(task, *, max_train=None, max_test=None, seed=0, conll=None):
    """(X, Y, Xt, Yt, is_iob) of a task: lists of per-token feature dicts and of string tags.

    Parameters
    ----------
    task : {"ocr", "corpus", "conll"}
    max_train, max_test : int or None
        Keep that many training / test sequences, drawn at random with ``seed`` (None: all).
    seed : int
    conll : path, needed for ``task="conll"``
    """
    if task == "ocr":
        X, Y, Xt, Yt = _ocr_data()
    elif task == "corpus":
        X, Y, Xt, Yt = _corpus_data()
    elif task == "conll":
        if conll is None:
            raise ValueError("task 'conll' needs the path of a CoNLL file (conll=PATH)")
        X, Y, Xt, Yt = _conll_data(conll)
    else:
        raise ValueError(f"task: expected one of {TASKS + ('conll',)}, got {task!r}")
    X, Y = _subsample(X, Y, max_train, seed)
    Xt, Yt = _subsample(Xt, Yt, max_test, seed + 1)
    if task == "ocr":
        X, Xt = [ocr_letter_dicts(x) for x in X], [ocr_letter_dicts(x) for x in Xt]
    is_iob = all(t == "O" or t[:2] in ("B-", "I-") for y in Y for t in y)
    return X, Y, Xt, Yt, is_iob


# -------------------------------------------------------------------------------------- memory
def _ru_maxrss_bytes():
    import resource

    v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return v if sys.platform == "darwin" else v * 1024  # bytes on macOS, kilobytes on Linux


def peak_bytes(source):
    """The peak resident set by ``source``: "VmHWM" (this process's own) or "ru_maxrss"."""
    return _status_bytes("VmHWM") if source == "VmHWM" else _ru_maxrss_bytes()


# ---------------------------------------------------------------------------------------- fits
def make_estimator(config, *, seed=0, max_passes=None, crf_iterations=CRF_PARAMS["max_iterations"]):
    """The tagger of a configuration: a `structfw.Tagger` or an ``sklearn_crfsuite.CRF``."""
    if config == "crf":
        import sklearn_crfsuite

        return sklearn_crfsuite.CRF(**dict(CRF_PARAMS, max_iterations=int(crf_iterations)))
    if config not in STRUCTFW_CONFIGS:
        raise ValueError(f"config: expected one of {CONFIGS}, got {config!r}")
    from structfw import make_tagger

    options = dict(random_state=seed)
    if max_passes is not None:
        options["max_passes"] = max_passes
    if config == "structfw-auto":
        options["lam"] = "auto"
    return make_tagger(**options)


def scores(Y, P, is_iob):
    """Token accuracy, sequence (word) accuracy and, for IOB tags, span F1 of predictions P."""
    from structfw.metrics import span_f1, token_accuracy

    Y = [np.asarray(y) for y in Y]
    P = [np.asarray(p) for p in P]
    seq = float(np.mean([np.array_equal(y, p) for y, p in zip(Y, P)]))
    return dict(token_accuracy=float(token_accuracy(Y, P)), sequence_accuracy=seq,
                span_f1=float(span_f1(Y, P, scheme="IOB2")) if is_iob else None)


def _fit_details(config, est):
    """What the fit chose and did: structfw's lam, passes and stop reason; the CRF's iterations."""
    if config == "crf":
        log = getattr(est, "training_log_", None)
        return dict(iterations=getattr(log, "last_iteration", {}).get("num") if log is not None else None)
    svm = est[-1]
    return dict(lam=float(svm.lam_), passes=float(svm.n_iter_), gap=float(svm.gap_), stopped=str(svm.stopped_),
                n_features=int(est[0].n_features_))


# Spelled in two pieces: the package stamps the JIT cache of every kernel with the text of each of
# its modules that names the compiler (the ``_..._cache`` module), and this module compiles nothing: an edit of it must not
# make every kernel compile again.
_JIT = "nu" "mba"
_JIT_EVENTS = _JIT + ".core.event"


class CompileCounter:
    """Counts the structfw kernels the JIT compiles (not those loaded from its cache) while
    installed: the check that a warm run was warm.  ``count`` stays None without the event API."""

    def __init__(self):
        self.count = None
        self._listener = None

    def __enter__(self):
        try:
            event = importlib.import_module(_JIT_EVENTS)
        except ImportError:  # pragma: no cover - a JIT without the event API
            return self
        counter = self
        self.count = 0

        class Listener(event.Listener):
            def on_start(self, ev):
                dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
                module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
                if module.startswith("structfw."):
                    counter.count += 1

            def on_end(self, ev):
                pass

        self._event, self._listener = event, Listener()
        event.register(_JIT + ":compile", self._listener)
        return self

    def __exit__(self, *exc):
        if self._listener is not None:
            self._event.unregister(_JIT + ":compile", self._listener)
        return False


def _package_stamp():
    """The stamp of the package's compiled sources (a change between runs makes warm runs compile)."""
    if not any(m.startswith("structfw.solvers") for m in sys.modules):
        return None
    return importlib.import_module(f"structfw._{_JIT}_cache").package_stamp()


def fit_one(spec):
    """Load a task, fit one configuration and score it, in this process; a dict of the numbers.

    ``spec`` holds ``task``, ``config``, ``seed`` and optionally ``max_train``, ``max_test``,
    ``max_passes``, ``crf_iterations``, ``conll``.  Meant to run in a fresh process
    (`run_child`): the memory figures are this process's.
    """
    t_start = time.perf_counter()
    config = spec["config"]
    # the fit's library is imported before the baseline, so that its import is not fit memory
    est = make_estimator(config, seed=spec.get("seed", 0), max_passes=spec.get("max_passes"),
                         crf_iterations=spec.get("crf_iterations", CRF_PARAMS["max_iterations"]))
    X, Y, Xt, Yt, is_iob = load_task(spec["task"], max_train=spec.get("max_train"), max_test=spec.get("max_test"),
                                     seed=spec.get("seed", 0), conll=spec.get("conll"))
    gc.collect()
    source = "VmHWM" if reset_peak() else "ru_maxrss"
    baseline = _status_bytes("VmRSS") if source == "VmHWM" else _ru_maxrss_bytes()
    with CompileCounter() as compiled:
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit(X, Y)
        fit_wall, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = peak_bytes(source)
    t1 = time.perf_counter()
    P = est.predict(Xt)
    predict_s = time.perf_counter() - t1
    return dict(task=spec["task"], config=config, seed=spec.get("seed", 0), n_train=len(X), n_test=len(Xt),
                tokens_train=sum(map(len, Y)), tokens_test=sum(map(len, Yt)), fit_wall_s=fit_wall, fit_cpu_s=fit_cpu,
                predict_s=predict_s, baseline_rss_mb=baseline / _MB, peak_rss_mb=peak / _MB,
                fit_memory_mb=max(peak - baseline, 0) / _MB, ru_maxrss_mb=_ru_maxrss_bytes() / _MB,
                memory_source=source, kernels_compiled=compiled.count, package_stamp=_package_stamp(),
                child_wall_s=time.perf_counter() - t_start, **scores(Yt, P, is_iob),
                **_fit_details(config, est))


def child_main():
    """The child's entry point: a JSON spec on stdin, one marked line of JSON results on stdout."""
    spec = json.loads(sys.stdin.read())
    print(_RESULT + json.dumps(fit_one(spec)), flush=True)


def run_child(spec, *, cache_dir, timeout=None):
    """`fit_one` in a fresh Python process with ``NUMBA_CACHE_DIR=cache_dir`` (None: the
    environment's own cache); its result dict."""
    # the child imports the same structfw and structfw_bench as this process (source trees or
    # installed copies)
    env = child_env(os.environ if cache_dir is None else dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir)))
    code = "from structfw_bench.tagger import child_main; child_main()"
    try:
        proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(spec), capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise click.ClickException(f"the {spec['config']} fit on {spec['task']} ran past --timeout "
                                   f"({timeout:g} s)") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_RESULT)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise click.ClickException(f"the {spec['config']} fit on {spec['task']} failed (exit {proc.returncode}):\n"
                                   + "\n".join(tail))
    return json.loads(lines[-1][len(_RESULT):])


# -------------------------------------------------------------------------------- the schedule
def schedule(configs, pairs):
    """The warm runs in order, as (pair, config): per pair, each structfw configuration followed
    at once by a CRF fit (s, c, s, c, ...); without "crf", the structfw fits alone; with only
    "crf", one CRF fit a pair."""
    sf = [c for c in configs if c in STRUCTFW_CONFIGS]
    crf = "crf" in configs
    order = []
    for p in range(pairs):
        for c in sf:
            order.append((p, c))
            if crf:
                order.append((p, "crf"))
        if crf and not sf:
            order.append((p, "crf"))
    return order


def _median(values):
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(vals)) if vals else None


SUMMARY_KEYS = ("fit_wall_s", "fit_cpu_s", "predict_s", "fit_memory_mb", "peak_rss_mb", "baseline_rss_mb",
                "token_accuracy", "sequence_accuracy", "span_f1")


def summarise(runs):
    """Medians of `SUMMARY_KEYS` over runs."""
    return {k: _median([r.get(k) for r in runs]) for k in SUMMARY_KEYS} | dict(runs=len(runs))


def _ratio(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def pair_ratios(warm):
    """Each (structfw run, the CRF run right after it): time, CPU and memory ratios structfw/CRF
    and the token accuracy difference structfw - CRF."""
    out = []
    for s, c in zip(warm, warm[1:]):
        if s["config"] in STRUCTFW_CONFIGS and c["config"] == "crf":
            out.append(dict(config=s["config"], pair=s["pair"], time_ratio=_ratio(s["fit_wall_s"], c["fit_wall_s"]),
                            cpu_ratio=_ratio(s["fit_cpu_s"], c["fit_cpu_s"]),
                            memory_ratio=_ratio(s["fit_memory_mb"], c["fit_memory_mb"]),
                            accuracy_diff=s["token_accuracy"] - c["token_accuracy"]))
    return out


def verdicts(summary, ratios):
    """Per structfw configuration, whether the medians meet each of `TARGETS` against the CRF."""
    crf = summary.get("crf")
    out = {}
    for config in STRUCTFW_CONFIGS:
        mine = [r for r in ratios if r["config"] == config]
        if crf is None or config not in summary or not mine:
            continue
        t = _median([r["time_ratio"] for r in mine])
        m = _median([r["memory_ratio"] for r in mine])
        a = _median([r["accuracy_diff"] for r in mine])
        out[config] = dict(time_ratio=t, memory_ratio=m, accuracy_diff=a,
                           accuracy_met=a is not None and a >= 0, time_met=t is not None and t <= 0.5,
                           memory_met=summary[config]["fit_memory_mb"] <= crf["fit_memory_mb"])
    return out


def cold_runs(base, configs, root, *, seed, timeout, log):
    """The first fit of each structfw configuration, each with an empty Numba cache of its own
    under ``root`` (every kernel compiled inside the fit): ({config: record}, {config: cache})."""
    cold, caches = {}, {}
    for config in (c for c in configs if c in STRUCTFW_CONFIGS):
        caches[config] = Path(root) / config
        caches[config].mkdir()
        rec = run_child(dict(base, config=config, seed=seed), cache_dir=caches[config], timeout=timeout)
        cold[config] = dict(rec, pair=None, cache="cold")
        log(_line(cold[config]))
    return cold, caches


def warm_runs(base, configs, pairs, caches, *, seed, timeout, log):
    """The alternated runs of `schedule`: each structfw fit with the cache its cold run filled
    (or, without cold runs, the environment's own Numba cache), pair p with ``random_state=seed + p``."""
    warm = []
    for pair, config in schedule(configs, pairs):
        cache = caches.get(config)
        rec = run_child(dict(base, config=config, seed=seed + pair), cache_dir=cache, timeout=timeout)
        kind = "none" if config == "crf" else "warm" if cache is not None else "environment"
        warm.append(dict(rec, pair=pair, cache=kind))
        log(_line(warm[-1]))
    return warm


def run_task(task, *, configs, pairs, seed, max_train, max_test, max_passes, crf_iterations, conll, timeout, cold,
             log):
    """The cold runs (when ``cold``) and the alternated warm runs of one task; its section of the JSON."""
    base = dict(task=task, max_train=max_train, max_test=max_test, max_passes=max_passes,
                crf_iterations=crf_iterations, conll=str(conll) if conll else None)
    with tempfile.TemporaryDirectory(prefix="structfw-tagger-bench-") as tmp:
        first, caches = cold_runs(base, configs, tmp, seed=seed, timeout=timeout, log=log) if cold else ({}, {})
        warm = warm_runs(base, configs, pairs, caches, seed=seed, timeout=timeout, log=log)
    summary = {c: summarise([r for r in warm if r["config"] == c]) for c in configs}
    ratios = pair_ratios(warm)
    crf_time = summary.get("crf", {}).get("fit_wall_s")
    cold_vs = {c: dict(fit_wall_s=r["fit_wall_s"], warm_median_s=summary[c]["fit_wall_s"],
                       time_ratio_to_crf=_ratio(r["fit_wall_s"], crf_time)) for c, r in first.items()}
    size = warm[0]
    # a warm run that compiled (another edit of the package's compiled code mid-run) is flagged
    compiled_warm = {c: sum(r["kernels_compiled"] or 0 for r in warm if r["config"] == c)
                     for c in configs if c in STRUCTFW_CONFIGS}
    stamps = sorted({r["package_stamp"] for r in [*first.values(), *warm] if r["package_stamp"]})
    return dict(n_train=size["n_train"], n_test=size["n_test"], tokens_train=size["tokens_train"],
                tokens_test=size["tokens_test"], cold=first, cold_vs_warm=cold_vs, runs=warm, summary=summary,
                pairs=ratios, verdicts=verdicts(summary, ratios), kernels_compiled_in_warm_runs=compiled_warm,
                package_stamps=stamps)


def _line(r):
    mem = f"fit memory {r['fit_memory_mb']:.0f} MB (peak {r['peak_rss_mb']:.0f} MB)"
    where = "cold" if r["cache"] == "cold" else f"pair {r['pair'] + 1}"
    return (f"{r['task']} {r['config']} [{where}]: token accuracy {r['token_accuracy']:.4f}, fit "
            f"{r['fit_wall_s']:.2f} s wall / {r['fit_cpu_s']:.2f} s CPU, predict {r['predict_s']:.2f} s, {mem}")


def run_tagger(*, tasks=TASKS, configs=CONFIGS, pairs=3, seed=0, max_train=None, max_test=None, max_passes=None,
               crf_iterations=CRF_PARAMS["max_iterations"], conll=None, timeout=None, cold=True,
               out="bench_out/tagger", log=print):
    """Run every task and write ``out``/tagger.json and tagger.png.

    Parameters
    ----------
    tasks : sequence of {"ocr", "corpus"}
        ``"conll"`` is added when ``conll`` is given.
    configs : sequence of {"structfw", "structfw-auto", "crf"}
    pairs : int >= 1
        Warm (structfw, CRF) pairs per structfw configuration.
    seed : int
        Sampling of ``max_train`` / ``max_test``; pair p's fits use ``random_state=seed + p``.
    max_train, max_test : int or None
        Sequences per task (None: all).
    max_passes : float or None
        structfw's ``max_passes`` (None: make_tagger's default).
    crf_iterations : int
        The CRF's ``max_iterations``.
    conll : path or None
    timeout : float or None
        Seconds a fit's process may run.
    cold : bool
        First fit each structfw configuration with an empty Numba cache (the cold start); False:
        every structfw fit uses the environment's cache as it is.
    out : path
    log : callable

    Returns
    -------
    dict, the document written to tagger.json.
    """
    t_start = time.perf_counter()
    tasks = list(tasks) + (["conll"] if conll else [])
    doc = dict(configs={c: LABELS[c] for c in configs}, crf_params=dict(CRF_PARAMS, max_iterations=crf_iterations),
               pairs=pairs, seed=seed, max_train=max_train, max_test=max_test, max_passes=max_passes,
               cold=cold, targets=TARGETS, cpus=os.cpu_count(), load_before=os.getloadavg()[0],
               environment=environment(), tasks={})
    for task in tasks:
        doc["tasks"][task] = run_task(task, configs=list(configs), pairs=pairs, seed=seed, max_train=max_train,
                                      max_test=max_test, max_passes=max_passes, crf_iterations=crf_iterations,
                                      conll=conll, timeout=timeout, cold=cold, log=log)
    doc["load_after"] = os.getloadavg()[0]
    doc["wall_s"] = time.perf_counter() - t_start
    out = Path(out)
    write_json(out / "tagger.json", doc)
    plot_tagger(doc, out / "tagger.png")
    return doc


# ------------------------------------------------------------------------------------- outputs
def plot_tagger(doc, path):
    """Per task a row of three bar charts: token accuracy, fit time (warm median, the cold first
    fit hatched behind it) and fit memory, one bar per configuration, each pair's value a dot."""
    plt = pyplot()
    tasks = list(doc["tasks"])
    fig, axes = plt.subplots(len(tasks), 3, figsize=(12, 3.4 * len(tasks)), squeeze=False)
    panels = (("token_accuracy", "test token accuracy"), ("fit_wall_s", "fit wall time (s)"),
              ("fit_memory_mb", "fit memory (MB, peak - baseline)"))
    for row, task in zip(axes, tasks):
        t = doc["tasks"][task]
        names = list(t["summary"])
        for ax, (key, label) in zip(row, panels):
            vals = [t["summary"][c][key] or 0.0 for c in names]
            if key == "fit_wall_s":
                cold = [t["cold"][c]["fit_wall_s"] if c in t["cold"] else 0.0 for c in names]
                ax.bar(range(len(names)), cold, color="none", edgecolor="grey", hatch="//", label="first fit (cold)")
            ax.bar(range(len(names)), vals, color=[f"C{i}" for i in range(len(names))])
            for i, c in enumerate(names):
                pts = [r[key] for r in t["runs"] if r["config"] == c and r[key] is not None]
                ax.plot([i] * len(pts), pts, "k.", ms=4)
            if key == "token_accuracy":
                lo = min(v for v in vals) if vals else 0.0
                ax.set_ylim(max(0.0, lo - 0.1), 1.0)
            elif key == "fit_wall_s" and t["cold"]:
                ax.legend(fontsize=7)
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_title(f"{task}: {label}", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"structfw tagger vs sklearn-crfsuite: medians of {doc['pairs']} pair(s), dots each run", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def format_table(doc):
    lines = []
    for task, t in doc["tasks"].items():
        lines.append(f"{task}: {t['n_train']} training and {t['n_test']} test sequences "
                     f"({t['tokens_train']} / {t['tokens_test']} tokens)")
        lines.append(f"{'config':>14} {'token acc':>9} {'seq acc':>8} {'span F1':>8} {'fit s':>7} {'cpu s':>7} "
                     f"{'cold s':>7} {'mem MB':>7} {'predict s':>9}")
        for c, s in t["summary"].items():
            cold = t["cold"].get(c, {}).get("fit_wall_s")
            lines.append(f"{c:>14} {_fmt(s['token_accuracy'], '.4f'):>9} {_fmt(s['sequence_accuracy'], '.4f'):>8} "
                         f"{_fmt(s['span_f1'], '.4f'):>8} {_fmt(s['fit_wall_s'], '.2f'):>7} "
                         f"{_fmt(s['fit_cpu_s'], '.2f'):>7} {_fmt(cold, '.2f'):>7} "
                         f"{_fmt(s['fit_memory_mb'], '.0f'):>7} {_fmt(s['predict_s'], '.3f'):>9}")
        for c, v in t["verdicts"].items():
            lines.append(f"  {c} vs crf: time x{_fmt(v['time_ratio'], '.2f')} "
                         f"({'meets' if v['time_met'] else 'misses'} <= 0.5), memory x{_fmt(v['memory_ratio'], '.2f')} "
                         f"({'meets' if v['memory_met'] else 'misses'} <= 1), accuracy "
                         f"{_fmt(v['accuracy_diff'], '+.4f')} ({'meets' if v['accuracy_met'] else 'misses'} >= 0)")
    return "\n".join(lines)


def _configs_option(ctx, param, value):
    names = tuple(v.strip() for v in str(value).split(",") if v.strip())
    unknown = [v for v in names if v not in CONFIGS]
    if not names or unknown or len(set(names)) != len(names):
        raise click.BadParameter(f"expected distinct comma-separated names from {', '.join(CONFIGS)}; got {value!r}")
    return names


def _tasks_option(ctx, param, value):
    names = tuple(v.strip() for v in str(value).split(",") if v.strip())
    if any(v not in TASKS for v in names) or len(set(names)) != len(names):
        raise click.BadParameter(f"expected distinct comma-separated names from {', '.join(TASKS)} (or none, with "
                                 f"--conll); got {value!r}")
    return names


@click.command("tagger")
@click.option("--tasks", default=",".join(TASKS), show_default=True, callback=_tasks_option,
              help="Comma-separated tasks: ocr (OCR words, folds 1..9 / 0), corpus (the hironsancorpus NE corpus).")
@click.option("--conll", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also a CoNLL column file of your own (token first, tag last), split 90/10 in file order.")
@click.option("--configs", default=",".join(CONFIGS), show_default=True, callback=_configs_option,
              help="Comma-separated: structfw (make_tagger defaults), structfw-auto (lam='auto'), crf.")
@click.option("--pairs", default=3, show_default=True, type=click.IntRange(min=1),
              help="Warm (structfw, CRF) pairs per structfw configuration, run back to back.")
@click.option("--max-train", default=0, show_default=True, type=click.IntRange(min=0),
              help="Training sequences per task, drawn at random (0: all).")
@click.option("--max-test", default=0, show_default=True, type=click.IntRange(min=0),
              help="Test sequences per task, drawn at random (0: all).")
@click.option("--max-passes", default=None, type=click.FloatRange(min=0, min_open=True),
              help="structfw's max_passes (default: make_tagger's own).")
@click.option("--crf-iterations", default=CRF_PARAMS["max_iterations"], show_default=True,
              type=click.IntRange(min=1), help="The CRF's max_iterations.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Sampling seed; pair p's fits use random_state = seed + p.")
@click.option("--timeout", default=0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds one fit's process may run (0: no limit).")
@click.option("--cold/--no-cold", default=True, show_default=True,
              help="First fit each structfw configuration with an empty Numba cache (compiling every kernel).")
@click.option("--out-dir", "--out", "out", default="bench_out/tagger", show_default=True,
              type=click.Path(file_okay=False), help="Writes tagger.json and tagger.png here.")
def bench_tagger(tasks, conll, configs, pairs, max_train, max_test, max_passes, crf_iterations, seed, timeout, cold,
                 out):
    """structfw's tagger against sklearn-crfsuite: accuracy, fit time and memory, back to back."""
    if not tasks and not conll:
        raise click.BadParameter("no task: name one of ocr, corpus or give --conll", param_hint="'--tasks'")
    if "crf" in configs:
        import importlib.util

        if importlib.util.find_spec("sklearn_crfsuite") is None:
            raise click.ClickException('the crf configuration needs sklearn-crfsuite: pip install '
                                       '"structfw-bench[baselines]" (or leave it out of --configs)')
    t0 = time.perf_counter()
    doc = run_tagger(tasks=tasks, configs=configs, pairs=pairs, seed=seed, max_train=max_train or None,
                     max_test=max_test or None, max_passes=max_passes, crf_iterations=crf_iterations, conll=conll,
                     timeout=timeout or None, cold=cold, out=out, log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'tagger.json'} and {Path(out) / 'tagger.png'} ({time.perf_counter() - t0:.0f} s)")
