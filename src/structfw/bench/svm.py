"""Reproduction of Tables 2-4 of Frandi, Nanculef & Suykens (2015) on the data available here.

Used by ``structfw bench svm`` (`structfw.cli`) and ``benchmarks/svm_tables.py``.
matplotlib is imported lazily (Agg backend) only when the figure is written.

Tasks (all binary, RBF kernel, gamma="scale" resolved on the training set, C = 1):

* heart_scale  (LIBSVM, svmlight file, bundled: structfw.datasets.load_heart_scale),
  70/30 stratified split;
* digits       (scikit-learn), even vs odd digit, pixels / 16, 70/30 split;
* breast-cancer (scikit-learn), standardised on the training part, 70/30 split;
* fashion-MNIST 5 (sandal) vs 7 (sneaker): all 12,000 training and 2,000 test images of
  the two classes from the Debian package ``dataset-fashion-mnist``, pixels / 255.
"""
from __future__ import annotations

import gzip
import json
import os
import time

import click
import numpy as np

from ..datasets.heart import HEART_SCALE_PATH

#: The heart_scale file bundled with the package (LIBSVM, BSD-3).
HEART_DEFAULT = str(HEART_SCALE_PATH)
FASHION_DIR = "/usr/share/datasets/fashion-mnist"
METHODS = ["fw", "mfw", "swap", "partan"]


# ---------------------------------------------------------------------------- data
def _split(X, y, seed):
    from sklearn.model_selection import train_test_split
    return train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)


def load_tasks(heart_path=HEART_DEFAULT, seed=0, large=True, quick=False, log=print):
    from sklearn.datasets import load_breast_cancer, load_digits, load_svmlight_file
    from sklearn.preprocessing import StandardScaler
    tasks = {}
    if heart_path and os.path.exists(heart_path):
        X, y = load_svmlight_file(heart_path)
        tasks["heart_scale"] = _split(X.toarray(), y, seed)
    else:
        log(f"[svm bench] heart_scale not found at {heart_path!r}: skipped")
    if not quick:
        d = load_digits()
        tasks["digits even/odd"] = _split(d.data / 16.0, d.target % 2, seed)
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = _split(X, y, seed)
    sc = StandardScaler().fit(Xtr)
    tasks["breast-cancer"] = (sc.transform(Xtr), sc.transform(Xte), ytr, yte)
    if large:
        f = load_fashion_pair(5, 7, log=log)
        if f is not None:
            if quick:  # smoke run: 1,000 training images per class
                rng = np.random.default_rng(seed)
                Xtr, Xte, ytr, yte = f
                keep = np.concatenate([rng.choice(np.flatnonzero(ytr == c), 1000, replace=False)
                                       for c in (5, 7)])
                f = (Xtr[keep], Xte, ytr[keep], yte)
            tasks["fashion-mnist 5/7"] = f
    return tasks


def _read_idx(path):
    with gzip.open(path, "rb") as fh:
        data = fh.read()
    nd = data[3]
    dims = [int.from_bytes(data[4 + 4 * k: 8 + 4 * k], "big") for k in range(nd)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load_fashion_pair(a=5, b=7, directory=FASHION_DIR, log=print):
    """All training/test images of classes a and b, or None if the files are absent."""
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    paths = [os.path.join(directory, n) for n in names]
    if not all(os.path.exists(p) for p in paths):
        log(f"[svm bench] fashion-mnist files not found in {directory} "
            "(apt-get install dataset-fashion-mnist): large task skipped")
        return None
    Xtr, ytr, Xte, yte = (_read_idx(p) for p in paths)
    mtr, mte = np.isin(ytr, (a, b)), np.isin(yte, (a, b))
    return (Xtr[mtr].reshape(-1, 784) / 255.0, Xte[mte].reshape(-1, 784) / 255.0,
            ytr[mtr].astype(int), yte[mte].astype(int))


# ---------------------------------------------------------------------------- runs
def _fit_fw(Xtr, Xte, ytr, yte, gamma, C, method, tol, sample_size=None, seed=0,
            max_iter=200000, cache_size=1000.0, trace_every=50, kernel_dtype="auto"):
    import warnings

    from ..svm.classifier import FrankWolfeSVC
    clf = FrankWolfeSVC(C=C, gamma=gamma, method=method, tol=tol, sample_size=sample_size,
                        random_state=seed, max_iter=max_iter, cache_size=cache_size,
                        trace_every=trace_every, kernel_dtype=kernel_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, c = time.perf_counter(), time.process_time()
        clf.fit(Xtr, ytr)
        fit_s, cpu_s = time.perf_counter() - t, time.process_time() - c
    return {"method": method, "sample_size": sample_size, "tol": tol,
            "acc": 100.0 * clf.score(Xte, yte), "time_s": fit_s, "cpu_s": cpu_s,
            "iter": int(clf.n_iter_[0]), "svs": int(len(clf.support_)),
            "gap": float(clf.gap_[0]), "converged": bool(clf.converged_),
            "trace": {k: v.tolist() for k, v in clf.trace_.items()}}


def _fit_svc(Xtr, Xte, ytr, yte, gamma, C, cache_size=1000.0):
    from sklearn.svm import SVC
    t, c = time.perf_counter(), time.process_time()
    s = SVC(C=C, gamma=gamma, cache_size=cache_size).fit(Xtr, ytr)
    fit_s, cpu_s = time.perf_counter() - t, time.process_time() - c
    return {"method": "SVC (libsvm)", "acc": 100.0 * s.score(Xte, yte), "time_s": fit_s,
            "cpu_s": cpu_s,
            "iter": int(np.sum(s.n_iter_)), "svs": int(len(s.support_))}


def _gamma(X):
    v = X.var()
    return 1.0 / (X.shape[1] * v) if v > 0 else 1.0


def _warmup():
    # compile / load the numba kernels so that no timing below includes it
    from sklearn.datasets import make_classification
    X, y = make_classification(60, 5, random_state=0)
    for m in METHODS:
        for dt in ("float64", "float32"):
            _fit_fw(X, X, y, y, 0.2, 1.0, m, 1e-3, kernel_dtype=dt)
            _fit_fw(X, X, y, y, 0.2, 1.0, m, 1e-3, sample_size=10, kernel_dtype=dt)


def run_benchmark(out="bench_out/svm", quick=False, large=True, seed=0,
                  heart_path=HEART_DEFAULT, C=1.0, log=print):
    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    _warmup()
    tasks = load_tasks(heart_path, seed=seed, large=large, quick=quick, log=log)
    tols = [1e-3, 1e-4] if quick else [1e-3, 1e-4, 1e-5, 1e-6]
    n_rand = 1 if quick else 5
    res = {"config": {"C": C, "gamma": "scale (resolved on the training set)", "seed": seed,
                      "quick": quick, "large": large, "sample_size": 194,
                      "randomised_runs": n_rand, "tols_table3": tols},
           "tasks": {}}
    for name, (Xtr, Xte, ytr, yte) in tasks.items():
        g = _gamma(Xtr)
        big = name.startswith("fashion")
        entry = {"m": int(Xtr.shape[0]), "t": int(Xte.shape[0]), "n": int(Xtr.shape[1]),
                 "gamma": g, "table2": [], "table3": [], "table4": []}
        log(f"[svm bench] {name}: m={Xtr.shape[0]} t={Xte.shape[0]} n={Xtr.shape[1]} "
            f"gamma={g:.4g}")
        # Table 2: tol = 1e-4, four methods + libsvm
        for m in METHODS:
            cap = 60000 if big else 200000
            r = _fit_fw(Xtr, Xte, ytr, yte, g, C, m, 1e-4, max_iter=cap)
            entry["table2"].append(r)
            log(f"  T2 {m:7s} acc={r['acc']:.2f} time={r['time_s']:.2f}s iter={r['iter']} "
                f"svs={r['svs']} gap={r['gap']:.2e}")
        r = _fit_svc(Xtr, Xte, ytr, yte, g, C)
        entry["table2"].append(r)
        log(f"  T2 SVC     acc={r['acc']:.2f} time={r['time_s']:.2f}s svs={r['svs']}")
        # Table 3: iterations vs tol (smaller sets only)
        if not big:
            for tol in tols:
                for m in METHODS:
                    r = _fit_fw(Xtr, Xte, ytr, yte, g, C, m, tol, max_iter=3_000_000,
                                trace_every=1000)
                    r.pop("trace")
                    entry["table3"].append(r)
                log(f"  T3 tol={tol:.0e} " + " ".join(
                    f"{r['method']}={r['iter']}" for r in entry["table3"][-4:]))
        # Table 4: randomised search, |S| = 194, averaged over runs
        for m in METHODS:
            runs = [_fit_fw(Xtr, Xte, ytr, yte, g, C, m, 1e-4, sample_size=194,
                            seed=seed + k, max_iter=60000 if big else 200000)
                    for k in range(1 if big else n_rand)]
            agg = {"method": m, "sample_size": 194, "runs": len(runs),
                   **{k: float(np.mean([r[k] for r in runs]))
                      for k in ("acc", "time_s", "iter", "svs", "gap")},
                   "trace": runs[0]["trace"]}
            entry["table4"].append(agg)
            log(f"  T4 {m:7s} acc={agg['acc']:.2f} time={agg['time_s']:.2f}s "
                f"iter={agg['iter']:.0f} svs={agg['svs']:.0f} true gap={agg['gap']:.2e}")
        if big:
            # headline comparison, repeated twice back to back (the machine is shared):
            # min fit time of PARTAN+sampling and of libsvm
            rep = []
            for k in range(2):
                rep.append((_fit_fw(Xtr, Xte, ytr, yte, g, C, "partan", 1e-4,
                                    sample_size=194, seed=seed),
                            _fit_svc(Xtr, Xte, ytr, yte, g, C)))
            entry["headline"] = {
                "partan_sampled_time_s": min(a["time_s"] for a, _ in rep),
                "svc_time_s": min(b["time_s"] for _, b in rep),
                "partan_sampled_acc": rep[0][0]["acc"], "svc_acc": rep[0][1]["acc"],
                "partan_sampled_times": [a["time_s"] for a, _ in rep],
                "svc_times": [b["time_s"] for _, b in rep],
                "partan_sampled_cpu_s": [a["cpu_s"] for a, _ in rep],
                "svc_cpu_s": [b["cpu_s"] for _, b in rep],
                "partan_sampled_true_gap": rep[0][0]["gap"]}
            log(f"  headline: {entry['headline']}")
        res["tasks"][name] = entry
    res["targets"] = targets(res)
    res["total_time_s"] = time.perf_counter() - t_start
    with open(os.path.join(out, "svm_tables.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    _figure(res, os.path.join(out, "svm_convergence.png"))
    text = format_tables(res)
    with open(os.path.join(out, "svm_tables.md"), "w") as fh:
        fh.write(text)
    log(text)
    return res


# ---------------------------------------------------------------------------- report
def targets(res):
    out = {}
    for name, e in res["tasks"].items():
        t2 = {r["method"]: r for r in e["table2"]}
        d = {"fw_over_partan_iter_tol1e-4": t2["fw"]["iter"] / t2["partan"]["iter"],
             "fw_over_partan_time_tol1e-4": t2["fw"]["time_s"] / max(t2["partan"]["time_s"], 1e-9)}
        t3 = e["table3"]
        if t3:
            it = {(r["method"], r["tol"]): r["iter"] for r in t3}
            for m in METHODS:
                for lo, hi in [(1e-4, 1e-5), (1e-5, 1e-6)]:
                    if (m, hi) in it:
                        d[f"{m}_growth_{lo:.0e}_to_{hi:.0e}"] = it[(m, hi)] / it[(m, lo)]
        if "headline" in e:
            h = e["headline"]
            d["partan_sampled_faster_than_svc"] = h["partan_sampled_time_s"] < h["svc_time_s"]
            d["acc_diff_points"] = h["partan_sampled_acc"] - h["svc_acc"]
        out[name] = d
    return out


def _fmt(v):
    return f"{v:.2e}" if isinstance(v, float) and (abs(v) >= 1e4 or (0 < abs(v) < 1e-2)) \
        else (f"{v:.2f}" if isinstance(v, float) else str(v))


def format_tables(res):
    L = []
    L.append("### Table 2: tol = 1e-4 (accuracy %, fit time s, iterations, support vectors)\n")
    L.append("| task | method | acc (%) | time (s) | iter | SVs | final gap |")
    L.append("|---|---|---|---|---|---|---|")
    for name, e in res["tasks"].items():
        for r in e["table2"]:
            L.append(f"| {name} | {r['method']} | {r['acc']:.2f} | {r['time_s']:.3f} | "
                     f"{r['iter']} | {r['svs']} | "
                     f"{(format(r['gap'], '.1e') + ('' if r['converged'] else ' (max_iter)')) if 'gap' in r else '-'} |")
    L.append("\n### Table 3: iterations (and time s) to reach tol\n")
    tols = res["config"]["tols_table3"]
    L.append("| task | method | " + " | ".join(f"{t:.0e}" for t in tols) + " |")
    L.append("|---|---|" + "---|" * len(tols))
    for name, e in res["tasks"].items():
        if not e["table3"]:
            continue
        for m in METHODS:
            cells = []
            for t in tols:
                r = next(r for r in e["table3"] if r["method"] == m and r["tol"] == t)
                cells.append(f"{r['iter']} ({r['time_s']:.2f})")
            L.append(f"| {name} | {m} | " + " | ".join(cells) + " |")
    L.append("\n### Table 4: randomised search |S| = 194, tol = 1e-4 (mean over runs; "
             "'true gap' is the exact duality gap at the stop)\n")
    L.append("| task | method | runs | acc (%) | time (s) | iter | SVs | true gap |")
    L.append("|---|---|---|---|---|---|---|---|")
    for name, e in res["tasks"].items():
        for r in e["table4"]:
            L.append(f"| {name} | {r['method']} | {r['runs']} | {r['acc']:.2f} | "
                     f"{r['time_s']:.3f} | {r['iter']:.0f} | {r['svs']:.0f} | {r['gap']:.1e} |")
    L.append("\n### Targets\n")
    for name, d in res["targets"].items():
        L.append(f"- {name}: " + ", ".join(f"{k} = {_fmt(v) if not isinstance(v, bool) else v}"
                                           for k, v in d.items()))
    for name, e in res["tasks"].items():
        if "headline" in e:
            h = e["headline"]
            L.append(f"- {name} headline (min of 2 back-to-back fits): PARTAN+sampling "
                     f"{h['partan_sampled_time_s']:.2f} s / {h['partan_sampled_acc']:.2f} % vs "
                     f"SVC {h['svc_time_s']:.2f} s / {h['svc_acc']:.2f} % (wall: "
                     f"{', '.join(f'{t:.2f}' for t in h['partan_sampled_times'])} vs "
                     f"{', '.join(f'{t:.2f}' for t in h['svc_times'])} s; process CPU: "
                     f"{', '.join(f'{t:.2f}' for t in h.get('partan_sampled_cpu_s', []))} vs "
                     f"{', '.join(f'{t:.2f}' for t in h.get('svc_cpu_s', []))} s)")
    L.append(f"\nTotal benchmark time: {res.get('total_time_s', 0):.0f} s")
    return "\n".join(L) + "\n"


def _figure(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(res["tasks"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        e = res["tasks"][name]
        for r in e["table2"]:
            if "trace" in r:
                tr = r["trace"]
                ax.semilogy(tr["iteration"], np.maximum(tr["gap"], 1e-12), label=r["method"])
        for r in e["table4"]:
            if r["method"] == "partan":
                tr = r["trace"]
                ax.semilogy(tr["iteration"], np.maximum(tr["gap"], 1e-12), "--",
                            label="partan |S|=194")
        ax.axhline(1e-4, color="k", lw=0.5)
        ax.set_title(name)
        ax.set_xlabel("iteration")
        ax.set_ylabel("duality gap")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ command


@click.command("svm")
@click.option("--out", "out", default="bench_out/svm", show_default=True,
              type=click.Path(file_okay=False), help="Directory for JSON, markdown and PNG.")
@click.option("--quick", is_flag=True, default=False,
              help="Small smoke run: heart_scale + breast-cancer, tol 1e-3/1e-4, "
                   "fashion-mnist subsampled to 2,000 training images.")
@click.option("--large/--no-large", default=True, show_default=True,
              help="Include the fashion-mnist 5-vs-7 task (skipped with a message if the "
                   "Debian dataset-fashion-mnist files are absent).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the train/test splits and of the vertex sampler.")
@click.option("--heart-path", default=HEART_DEFAULT, show_default="the copy bundled "
              "with structfw", help="heart_scale file in svmlight format.")
@click.option("--C", "C", default=1.0, show_default=True, type=float,
              help="SVM C, shared by all methods and libsvm.")
def bench_svm(out, quick, large, seed, heart_path, C):
    """Kernel SVM benchmark: FW / MFW / SWAP / PARTAN (and randomised search) vs libsvm."""
    if C <= 0:
        raise click.BadParameter("C must be > 0", param_hint="--C")
    run_benchmark(out=out, quick=quick, large=large, seed=seed, heart_path=heart_path, C=C,
                  log=click.echo)
    click.echo(f"wrote {out}/svm_tables.json, svm_tables.md, svm_convergence.png")
