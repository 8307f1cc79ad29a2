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

The paper's own scale (``--dataset fashion-60k``, `run_large`): one binary task on all 60,000
Fashion-MNIST training images (test: the 10,000 test images), C chosen by validation on a
70/30 split of the training set (section 4 of the paper) and refitted on all of it, the RBF
width by the heuristic of Tsang, Kwok & Cheung (2005) that the paper cites ([17]; `cvm_gamma`),
Tables 2-4 re-run at that size with and without the randomised search (|S| = 194).
"""
from __future__ import annotations

import gzip
import json
import os
import resource
import time

import click
import numpy as np

from structfw.datasets.heart import HEART_SCALE_PATH
from ._common import parse_number_list

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
def cache_mb_for_columns(n_columns, X, kernel_dtype="auto"):
    """The ``cache_size`` (MB) that holds exactly ``n_columns`` kernel columns of X.

    The columns have len(X) entries in the kernel dtype that FrankWolfeSVC uses
    (``kernel_dtype="auto"``: float32 when ``X.size >= 1e6``).  Half a column more than
    needed keeps the solver's floor division from losing one to rounding."""
    n_columns = int(n_columns)
    if n_columns < 2:
        raise ValueError(f"n_columns must be >= 2 (the solver keeps at least two columns); "
                         f"got {n_columns}")
    large = X.size >= 1_000_000
    itemsize = 4 if kernel_dtype == "float32" or (kernel_dtype == "auto" and large) else 8
    return (n_columns + 0.5) * itemsize * X.shape[0] / 2 ** 20


def _fit_fw(Xtr, Xte, ytr, yte, gamma, C, method, tol, sample_size=None, seed=0,
            max_iter=200000, cache_size=1000.0, trace_every=50, kernel_dtype="auto",
            gradient="full", sample_check="resample", block="auto", cache_columns=None):
    """One FrankWolfeSVC fit: accuracy, wall and process CPU time, iterations, SVs, exact
    final gap and the solver's cost counters (kernel evaluations; ``cache_columns`` bounds
    the column cache to that many columns instead of ``cache_size`` MB)."""
    import warnings

    from structfw.svm.classifier import FrankWolfeSVC
    if cache_columns is not None:
        cache_size = cache_mb_for_columns(cache_columns, Xtr, kernel_dtype)
    clf = FrankWolfeSVC(C=C, gamma=gamma, method=method, tol=tol, sample_size=sample_size,
                        random_state=seed, max_iter=max_iter, cache_size=cache_size,
                        trace_every=trace_every, kernel_dtype=kernel_dtype, gradient=gradient,
                        sample_check=sample_check, block=block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, c = time.perf_counter(), time.process_time()
        clf.fit(Xtr, ytr)
        fit_s, cpu_s = time.perf_counter() - t, time.process_time() - c
    st = clf.fit_stats_[0]
    return {"method": method, "sample_size": sample_size, "tol": tol,
            "gradient": gradient if sample_size else "deterministic",
            "acc": 100.0 * clf.score(Xte, yte), "time_s": fit_s, "cpu_s": cpu_s,
            "iter": int(clf.n_iter_[0]), "svs": int(len(clf.support_)),
            "gap": float(clf.gap_[0]), "converged": bool(clf.converged_),
            "kernel_evals": st["kernel_evals"], "check_evals": st["check_evals"],
            "full_checks": st["full_checks"], "columns": st["misses"] + st["prefetched"],
            "cache_slots": st["slots"],
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


# ======================================================================= the paper's scale
#: C grid of the validation (``--C-grid``): a decade grid around the L2-SVM's usual range.
C_GRID = (0.1, 1.0, 10.0, 100.0)
#: Sample size of the randomised search (10) used by the paper (footnote 6: with probability
#: >= 0.98 the sampled minimiser lies in the 2 % smallest gradient entries).
PAPER_SAMPLE_SIZE = 194
#: Table 2 and Table 4 of the paper (accuracy %, CPU time s, iterations, SVs), read from its text.
PAPER_TABLE2 = {
    "Adult a9a": {"fw": (84.21, 158, 20200, 13900), "mfw": (83.29, 157, 20000, 12800),
                  "swap": (83.53, 226, 17600, 14100), "partan": (84.00, 107, 13400, 11800)},
    "Web w8a": {"fw": (99.30, 378, 16500, 6920), "mfw": (99.32, 316, 13800, 4480),
                "swap": (99.28, 356, 9240, 4970), "partan": (99.30, 107, 4620, 2830)},
    "IJCNN1": {"fw": (98.50, 51.3, 15900, 3230), "mfw": (98.22, 45.7, 14100, 2730),
               "swap": (98.40, 50.9, 13500, 3160), "partan": (98.36, 19.8, 5480, 2730)},
    "USPS-ext": {"fw": (99.52, 1980, 21500, 3930), "mfw": (99.52, 844, 9170, 3640),
                 "swap": (99.53, 946, 8100, 3670), "partan": (99.52, 738, 7790, 3510)},
    "KDD99-binary": {"fw": (99.94, 702, 17100, 5250), "mfw": (99.93, 526, 12700, 3630),
                     "swap": (99.94, 551, 7820, 3860), "partan": (99.93, 189, 4370, 2820)},
    "RCV1-binary": {"fw": (97.55, 13700, 37700, 37500), "mfw": (96.64, 13600, 38100, 35800),
                    "swap": (97.17, 17100, 36500, 36500), "partan": (97.50, 12300, 33800, 33700)},
}
PAPER_TABLE4 = {
    "Adult a9a": {"fw": (83.94, 169, 18900, 13500), "mfw": (83.86, 163, 19800, 12400),
                  "swap": (83.52, 164, 16500, 13500), "partan": (84.08, 108, 12400, 11100)},
    "Web w8a": {"fw": (99.17, 83.9, 6780, 3660), "mfw": (99.21, 66.9, 9100, 3010),
                "swap": (99.16, 71.2, 4970, 3190), "partan": (99.10, 48.9, 3250, 2310)},
    "IJCNN1": {"fw": (98.57, 34.5, 11200, 4120), "mfw": (97.98, 21.0, 11400, 2450),
               "swap": (98.34, 22.1, 7100, 3430), "partan": (98.37, 19.5, 5760, 3340)},
    "USPS-ext": {"fw": (99.53, 219, 3610, 2960), "mfw": (99.57, 260, 6490, 2480),
                 "swap": (99.55, 225, 3590, 2940), "partan": (99.53, 207, 3280, 2860)},
    "KDD99-binary": {"fw": (99.73, 28.4, 1880, 1710), "mfw": (99.93, 94.6, 12900, 2350),
                     "swap": (99.78, 20.3, 1570, 1450), "partan": (99.82, 12.0, 1150, 1110)},
}
#: The paper's Table 1 sizes m (training points) of the sets above.
PAPER_M = {"Adult a9a": 32561, "Web w8a": 49749, "IJCNN1": 49990, "USPS-ext": 266079,
           "KDD99-binary": 395216, "RCV1-binary": 677399}


def cvm_gamma(X):
    """The RBF width heuristic of Tsang, Kwok & Cheung (2005), cited by the paper as [17].

    The Gaussian kernel ``k(x, z) = exp(-||x - z||^2 / beta)`` with ``beta`` the mean
    squared distance over all ordered pairs of training points,
    ``beta = 1/m^2 sum_{i,j} ||x_i - x_j||^2``, so ``gamma = 1 / beta``.  Computed in
    O(m n) from the identity ``beta = 2/m sum_i ||x_i - xbar||^2`` (xbar the mean).

    Parameters
    ----------
    X : array (m, n)
        Training points.

    Returns
    -------
    float
        gamma = 1 / beta.

    Raises
    ------
    ValueError
        X is empty or all its rows are equal (beta = 0), naming X.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"X must be a non-empty 2-d array; got shape {X.shape}")
    centred = X - X.mean(axis=0)
    beta = 2.0 * float(np.einsum("ij,ij->", centred, centred)) / X.shape[0]
    if not (np.isfinite(beta) and beta > 0):
        raise ValueError(f"X: all rows are equal (mean squared distance {beta!r}); "
                         "the heuristic gamma = 1/beta is undefined")
    return 1.0 / beta


def resolve_bench_gamma(gamma, X):
    """``"cvm"`` (`cvm_gamma`), ``"scale"`` (scikit-learn's) or a positive float."""
    if gamma == "cvm":
        return cvm_gamma(X)
    if gamma == "scale":
        return _gamma(X)
    g = float(gamma)
    if not (np.isfinite(g) and g > 0):
        raise ValueError(f"gamma must be 'cvm', 'scale' or a positive float; got {gamma!r}")
    return g


def load_fashion_60k(pairs="tops", n_train=None, seed=0, path=None):
    """All 60,000 Fashion-MNIST training images as one binary task, the 10,000 test images.

    Parameters
    ----------
    pairs : str or pair
        The pairing of `structfw.datasets.load_fashion_mnist` ("tops": T-shirt, pullover,
        dress, coat, shirt against trouser, sandal, sneaker, bag, ankle boot).
    n_train : int, optional
        Keep a random stratified subset of this many training images (smoke runs, tests).
    seed : int
        Seed of that subset.
    path : str, optional
        Folder of the IDX files (default: Debian's).

    Returns
    -------
    Xtr, Xte, ytr, yte : arrays; pixels / 255 (float64), labels +1 / -1.
    """
    from structfw.datasets.fashion import load_fashion_mnist
    Xtr, ytr = load_fashion_mnist(path, split="train", pairs=pairs)
    Xte, yte = load_fashion_mnist(path, split="test", pairs=pairs)
    if n_train is not None and n_train < len(ytr):
        Xtr, ytr = _stratified_subset(Xtr, ytr, n_train, seed)
    return Xtr, Xte, ytr, yte


def load_svmlight_task(train, test=None, seed=0, n_train=None):
    """A binary task from LIBSVM files (a9a, w8a, ijcnn1 as distributed): training file and
    optional test file (same columns, `structfw.datasets.svmlight.load_svmlight_pair`), or
    one file split 70/30 at random (stratified, ``seed``).

    Parameters
    ----------
    train : str or Path
        svmlight/LIBSVM file with exactly two label values (the larger becomes +1).
    test : str or Path, optional
        Its test file (a9a.t ...).
    seed : int
        Seed of the split (and of the subsample).
    n_train : int, optional
        Stratified subsample of the training part (smoke runs).

    Returns
    -------
    Xtr, Xte, ytr, yte : dense float64 arrays, labels +1 / -1.

    Raises
    ------
    ValueError
        The file is not a two-class svmlight file, naming it.
    """
    from structfw.datasets.svmlight import load_svmlight, load_svmlight_pair
    if test is not None:
        Xtr, ytr, Xte, yte = load_svmlight_pair(train, test, dense=True, binary=True)
    else:
        X, y = load_svmlight(train, dense=True)
        values = np.unique(y)
        if values.shape[0] != 2:
            raise ValueError(f"{train}: a binary task needs exactly two label values; found "
                             f"{values.shape[0]}: {values[:10].tolist()}")
        y = np.where(y == values[1], 1, -1)
        if min(np.sum(y == 1), np.sum(y == -1)) < 2:
            raise ValueError(f"{train}: each of the two labels needs at least two examples for "
                             "the 70/30 split")
        Xtr, Xte, ytr, yte = _split(np.asarray(X, dtype=np.float64), y, seed)
    if n_train is not None and n_train < len(ytr):
        Xtr, ytr = _stratified_subset(Xtr, ytr, n_train, seed)
    return (np.asarray(Xtr, dtype=np.float64), np.asarray(Xte, dtype=np.float64),
            np.asarray(ytr), np.asarray(yte))


def _stratified_subset(X, y, n, seed):
    from sklearn.model_selection import train_test_split
    if n >= len(y):
        return X, y
    Xs, _, ys, _ = train_test_split(X, y, train_size=n, random_state=seed, stratify=y)
    return Xs, ys


def select_C(X, y, gamma, grid=C_GRID, seed=0, n_select=None, method="partan", tol=1e-3,
             max_iter=200000, log=print):
    """C by the paper's validation: fit on a random 70 % of the training set, score on 30 %.

    Section 4 of the paper: "a single validation set is built by randomly extracting 70 % of
    the training examples, and the remaining 30 % is reserved for testing".  The best
    validation accuracy wins (ties: the smaller C).  With ``n_select`` both parts are
    stratified subsamples (of 0.7 n_select and 0.3 n_select points) to bound the cost.

    Parameters
    ----------
    X, y : arrays
        The training set (the test set is never seen here).
    gamma : float
        The RBF gamma (fixed before, by the heuristic).
    grid : sequence of float > 0
        Candidate values of C.
    seed : int
        Seed of the split and subsample.
    n_select : int, optional
        Points used by the validation (default: all).
    method, tol, max_iter
        The FrankWolfeSVC fitted for each C.

    Returns
    -------
    dict
        ``C`` (the chosen value), ``grid``, ``val_acc`` (per C, %), ``m_fit``, ``m_val``,
        ``method``, ``tol``, ``time_s``, ``cpu_s``.
    """
    from sklearn.model_selection import train_test_split
    grid = [float(c) for c in grid]
    if not grid or any(not (np.isfinite(c) and c > 0) for c in grid):
        raise ValueError(f"grid must be a non-empty list of positive C values; got {grid!r}")
    if n_select is not None:
        X, y = _stratified_subset(X, y, int(n_select), seed)
    Xf, Xv, yf, yv = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    t, c = time.perf_counter(), time.process_time()
    accs = []
    for C in grid:
        r = _fit_fw(Xf, Xv, yf, yv, gamma, C, method, tol, max_iter=max_iter, seed=seed,
                    trace_every=200)
        accs.append(r["acc"])
        log(f"  select C={C:g}: validation acc={r['acc']:.2f} % ({r['iter']} iter, "
            f"{r['time_s']:.1f} s)")
    best = grid[int(np.argmax(accs))]  # argmax takes the first, i.e. the smaller C on ties
    return {"C": best, "grid": grid, "val_acc": accs, "m_fit": int(len(yf)),
            "m_val": int(len(yv)), "method": method, "tol": tol,
            "time_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}


def _rusage_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _fit_timed(Xtr, Xte, ytr, yte, gamma, C, method, tol, sample_size=None, seed=0,
               max_iter=200000, cache_size=1000.0, trace_every=100, **kw):
    """`_fit_fw` plus rusage CPU time and the load average before and after the fit."""
    load0, ru0 = os.getloadavg()[0], _rusage_cpu()
    r = _fit_fw(Xtr, Xte, ytr, yte, gamma, C, method, tol, sample_size=sample_size, seed=seed,
                max_iter=max_iter, cache_size=cache_size, trace_every=trace_every, **kw)
    r["rusage_cpu_s"] = _rusage_cpu() - ru0
    r["loadavg"] = [load0, os.getloadavg()[0]]
    return r


def run_large(out="bench_out/svm-large", data=None, dataset="fashion-60k", pairs="tops",
              gamma="cvm", C=None, select=True, grid=C_GRID, n_select=10000, select_tol=1e-3,
              sampling=True, sample_size=PAPER_SAMPLE_SIZE, runs=2, tols=(1e-3, 1e-4),
              n_train=None, seed=0, max_iter=200000, cache_size=1000.0,
              gradients=("sample", "full"), cache_columns=None, block="auto",
              sample_check="resample", methods=None, log=print):
    """Tables 2-4 of Frandi et al. (2015) on one large binary task (``--dataset fashion-60k``
    or an svmlight file, ``--data``).

    Steps: gamma by the heuristic (on the training set); C by `select_C` (or given); then,
    with those, Table 2 (tol = 1e-4, FW / MFW / SWAP / PARTAN: accuracy, time, iterations,
    SVs, kernel evaluations), Table 3 (iterations to reach each of ``tols``; 1e-4 is Table
    2's runs) and, with ``sampling``, Table 4 (randomised search with |S| =
    ``sample_size``, the paper's safeguard of two more samples before stopping, mean over
    ``runs`` seeds) once per entry of ``gradients``: ``"sample"``, the paper's iteration
    (gradient on the sample only), and ``"full"``, the full-gradient variant, on the same
    seeds (so on the same samples).  Every fit records wall time, process CPU time, the
    load average and its kernel evaluations; PARTAN/FW ratios are taken within this run.
    Writes ``svm_large.json`` (with the tables as markdown under ``"markdown"``),
    ``svm_large.md`` and ``svm_large.png`` to ``out``.

    Parameters
    ----------
    out : str
        Output folder.
    data : tuple (Xtr, Xte, ytr, yte), optional
        Use these arrays instead of loading ``dataset`` (tests, other data, `load_svmlight_task`).
    dataset : str
        Name recorded in the output ("fashion-60k" loads `load_fashion_60k`).
    pairs : str
        The Fashion-MNIST pairing.
    gamma : "cvm", "scale" or float
        RBF gamma (`resolve_bench_gamma`).
    C : float, optional
        Used when ``select`` is False.
    select : bool
        Choose C by validation over ``grid`` (``n_select`` points, tol ``select_tol``).
    sampling : bool
        Run Table 4.
    sample_size, runs : int
        |S| and the number of seeds of Table 4 (the paper: 194 and 10).
    tols : sequence of float
        Tolerances of Table 3.
    n_train : int, optional
        Stratified subsample of the training set (smoke runs).
    seed, max_iter, cache_size
        As in FrankWolfeSVC.
    gradients : sequence of {"sample", "full"}
        The gradient modes of Table 4 (FrankWolfeSVC's ``gradient``); the first is the one
        reported as ``table4``, each under ``table4_by_gradient``.
    cache_columns : int >= 2, optional
        Bound the kernel-column cache to this many columns (overrides ``cache_size``), e.g. 2
        with ``block=1``: every step whose vertex column is not among the last two computes
        it, so the time follows the iterations instead of the support.
    block : "auto" or int >= 1
        FrankWolfeSVC's ``block`` (1: no prefetched columns).
    sample_check : {"resample", "full"}
        FrankWolfeSVC's ``sample_check`` for Table 4 (the paper: "resample").
    methods : sequence of str, optional
        A subset of FW / MFW / SWAP / PARTAN (default all).

    Returns
    -------
    dict
        What ``svm_large.json`` holds.
    """
    t_start, c_start = time.perf_counter(), time.process_time()
    if not select and (C is None or not C > 0):
        raise ValueError(f"C must be a positive float when select is False; got {C!r}")
    gradients = tuple(gradients)
    if not gradients or any(g not in ("sample", "full") for g in gradients) \
            or len(set(gradients)) != len(gradients):
        raise ValueError(f"gradients must list 'sample' and/or 'full' once each; got {gradients!r}")
    methods = list(METHODS if methods is None else methods)
    if not methods or any(m not in METHODS for m in methods):
        raise ValueError(f"methods must be a non-empty subset of {METHODS}; got {methods!r}")
    os.makedirs(out, exist_ok=True)
    _warmup()
    if data is None:
        Xtr, Xte, ytr, yte = load_fashion_60k(pairs=pairs, n_train=n_train, seed=seed)
    else:
        Xtr, Xte, ytr, yte = data
        if n_train is not None:
            Xtr, ytr = _stratified_subset(Xtr, ytr, n_train, seed)
    g = resolve_bench_gamma(gamma, Xtr)
    log(f"[svm large] {dataset} ({pairs}): m={len(ytr)} t={len(yte)} n={Xtr.shape[1]} "
        f"positives={np.mean(ytr == np.max(ytr)):.3f} gamma={g:.5g} ({gamma})")
    res = {"config": {"dataset": dataset, "pairs": pairs, "m": int(len(ytr)),
                      "t": int(len(yte)), "n": int(Xtr.shape[1]), "gamma_rule": str(gamma),
                      "gamma": g, "seed": seed, "sample_size": sample_size, "runs": runs,
                      "tols_table3": list(tols), "max_iter": max_iter,
                      "cache_size_mb": cache_size, "cache_columns": cache_columns,
                      "block": block, "gradients": list(gradients),
                      "sample_check": sample_check, "methods": methods,
                      "cpu_count": os.cpu_count()}}
    if select:
        sel = select_C(Xtr, ytr, g, grid=grid, seed=seed, n_select=n_select, tol=select_tol,
                       max_iter=max_iter, log=log)
        C = sel["C"]
        res["selection"] = sel
        log(f"[svm large] C = {C:g} (validation {sel['m_fit']} fit / {sel['m_val']} held out, "
            f"{sel['time_s']:.0f} s)")
    res["config"]["C"] = float(C)
    fit = dict(max_iter=max_iter, cache_size=cache_size, cache_columns=cache_columns,
               block=block)
    partial = os.path.join(out, "svm_large.partial.json")

    def save_partial(key, rows):  # a killed or late run still leaves its finished fits
        res[key] = rows
        with open(partial, "w") as fh:
            json.dump({k: v for k, v in res.items()}, fh, indent=1)

    # FW and PARTAN first (the paper's headline ratio), Table 3's extra tolerances last
    order = [m for m in ["fw", "partan", "mfw", "swap"] if m in methods]
    t2 = []
    for m in order:
        r = _fit_timed(Xtr, Xte, ytr, yte, g, C, m, 1e-4, seed=seed, **fit)
        t2.append(r)
        save_partial("table2", t2)
        log(f"  T2 {m:7s} acc={r['acc']:.2f} wall={r['time_s']:.1f}s cpu={r['cpu_s']:.1f}s "
            f"iter={r['iter']} svs={r['svs']} kevals={r['kernel_evals']:.3g} "
            f"gap={r['gap']:.1e} load={r['loadavg']}")
    res["table2"] = t2 = sorted(t2, key=lambda r: METHODS.index(r["method"]))
    by_grad = {}
    if sampling:
        for grad in gradients:
            t4 = []
            for m in order:
                rs = [_fit_timed(Xtr, Xte, ytr, yte, g, C, m, 1e-4, sample_size=sample_size,
                                 seed=seed + k, gradient=grad, sample_check=sample_check,
                                 **fit) for k in range(runs)]
                t4.append(_aggregate_runs(m, sample_size, grad, rs))
                save_partial("table4_by_gradient", {**by_grad, grad: t4})
                a = t4[-1]
                log(f"  T4 {grad:6s} {m:7s} acc={a['acc']:.2f} wall={a['time_s']:.1f}s "
                    f"cpu={a['cpu_s']:.1f}s iter={a['iter']:.0f} svs={a['svs']:.0f} "
                    f"kevals={a['kernel_evals']:.3g} true gap={a['gap']:.1e}")
            by_grad[grad] = sorted(t4, key=lambda r: METHODS.index(r["method"]))
    res["table4_by_gradient"] = by_grad
    res["table4"] = by_grad.get(gradients[0], [])
    t3 = []
    for tol in tols:
        for m in [m for m in METHODS if m in methods]:
            if tol == 1e-4:
                r = dict(next(x for x in t2 if x["method"] == m))
            else:
                r = _fit_timed(Xtr, Xte, ytr, yte, g, C, m, tol, seed=seed, **fit)
            r = {k: v for k, v in r.items() if k != "trace"}
            t3.append(r)
            save_partial("table3", t3)
        log(f"  T3 tol={tol:.0e} " + " ".join(f"{x['method']}={x['iter']}"
                                              for x in t3[-len(methods):]))
    res["table3"] = t3
    res["ratios"] = large_ratios(res)
    res["total_time_s"] = time.perf_counter() - t_start
    res["total_cpu_s"] = time.process_time() - c_start
    res["markdown"] = format_large(res)
    with open(os.path.join(out, "svm_large.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.join(out, "svm_large.md"), "w") as fh:
        fh.write(res["markdown"])
    _figure_large(res, os.path.join(out, "svm_large.png"))
    if os.path.exists(partial):
        os.remove(partial)
    log(res["markdown"])
    return res


def _aggregate_runs(method, sample_size, gradient, rs):
    """Table 4's row of one method: means over the seeds, and each run."""
    keys = ("acc", "time_s", "cpu_s", "rusage_cpu_s", "iter", "svs", "gap", "kernel_evals",
            "check_evals", "full_checks")
    return {"method": method, "sample_size": sample_size, "gradient": gradient,
            "runs": len(rs), **{k: float(np.mean([r[k] for r in rs])) for k in keys},
            "per_run": [{k: r[k] for k in ("acc", "time_s", "cpu_s", "iter", "svs", "gap",
                                           "kernel_evals", "check_evals", "loadavg")}
                        for r in rs],
            "trace": rs[0]["trace"]}


def large_ratios(res):
    """FW / method ratios of wall time, CPU time, iterations and kernel evaluations (Table 2
    and Table 4 per gradient mode), deterministic / sampled ratios per method, and full /
    sample-only gradient ratios per method, all from the same run."""
    out = {}
    tables = [("table2", res.get("table2", []))]
    tables += [(f"table4_{g}", rows) for g, rows in res.get("table4_by_gradient", {}).items()]
    keys = ("time_s", "cpu_s", "iter", "kernel_evals")
    for tab, rows in tables:
        rows = {r["method"]: r for r in rows}
        if "fw" not in rows:
            continue
        for m in METHODS[1:]:
            if m in rows:
                for k in keys:
                    if k in rows[m]:
                        out[f"{tab}_fw_over_{m}_{k}"] = rows["fw"][k] / max(rows[m][k], 1e-12)
    d2 = {r["method"]: r for r in res.get("table2", [])}
    by_grad = res.get("table4_by_gradient", {})
    for r in res.get("table4", []):
        m = r["method"]
        for k in ("time_s", "cpu_s", "iter"):
            out[f"{m}_deterministic_over_sampled_{k}"] = d2[m][k] / max(r[k], 1e-12)
    if "sample" in by_grad and "full" in by_grad:
        full = {r["method"]: r for r in by_grad["full"]}
        for r in by_grad["sample"]:
            m = r["method"]
            for k in keys:
                out[f"{m}_full_over_sample_gradient_{k}"] = full[m][k] / max(r[k], 1e-12)
    return out


def format_large(res):
    """Tables 2-4 of the large run as markdown, with the paper's numbers for comparison."""
    cfg = res["config"]
    L = [f"Task: {cfg['dataset']} ({cfg['pairs']}), m = {cfg['m']}, t = {cfg['t']}, "
         f"n = {cfg['n']}; RBF gamma = {cfg['gamma']:.5g} ({cfg['gamma_rule']}), "
         f"C = {cfg['C']:g}."]
    if "selection" in res:
        s = res["selection"]
        L.append(f"C selection ({s['method']}, tol {s['tol']:g}, {s['m_fit']} fit / {s['m_val']} "
                 "validation points): " + ", ".join(
                     f"C={c:g}: {a:.2f} %" for c, a in zip(s["grid"], s["val_acc"]))
                 + f" -> C = {s['C']:g} ({s['time_s']:.0f} s).")
    L.append(f"Kernel-column cache: {_cache_text(cfg)}.")
    L.append("\n### Table 2: tol = 1e-4\n")
    L.append("| method | acc (%) | wall (s) | CPU (s) | iter | SVs | kernel evals | columns "
             "| final gap | load avg |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in res["table2"]:
        L.append(f"| {r['method']} | {r['acc']:.2f} | {r['time_s']:.1f} | {r['cpu_s']:.1f} | "
                 f"{r['iter']} | {r['svs']} | {_evals(r.get('kernel_evals'))} | "
                 f"{r.get('columns', '-')} | {r['gap']:.1e}"
                 f"{'' if r['converged'] else ' (max_iter)'} | "
                 f"{r['loadavg'][0]:.1f}-{r['loadavg'][1]:.1f} |")
    L.append("\n### Table 3: iterations (wall s, CPU s) to reach tol\n")
    tols = cfg["tols_table3"]
    L.append("| method | " + " | ".join(f"{t:.0e}" for t in tols) + " |")
    L.append("|---|" + "---|" * len(tols))
    for m in METHODS:
        cells = []
        for t in tols:
            r = next((r for r in res["table3"] if r["method"] == m and r["tol"] == t), None)
            cells.append("-" if r is None else
                         f"{r['iter']} ({r['time_s']:.1f}, {r['cpu_s']:.1f})")
        L.append(f"| {m} | " + " | ".join(cells) + " |")
    by_grad = res.get("table4_by_gradient") or ({"full": res["table4"]} if res["table4"] else {})
    for grad, rows in by_grad.items():
        what = ("gradient on the sample only (the paper's)" if grad == "sample"
                else "full gradient kept")
        L.append(f"\n### Table 4: randomised search |S| = {cfg['sample_size']}, {what}, "
                 f"tol = 1e-4, stop: {cfg.get('sample_check', 'resample')}, mean of "
                 f"{cfg['runs']} runs ('true gap': exact duality gap at the stop; 'of which "
                 "exact gap': kernel evaluations spent on exact gaps)\n")
        L.append("| method | acc (%) | wall (s) | CPU (s) | iter | SVs | kernel evals | of which "
                 "exact gap | true gap |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            L.append(f"| {r['method']} | {r['acc']:.2f} | {r['time_s']:.1f} | {r['cpu_s']:.1f} | "
                     f"{r['iter']:.0f} | {r['svs']:.0f} | {_evals(r.get('kernel_evals'))} | "
                     f"{_evals(r.get('check_evals'))} | {r['gap']:.1e} |")
    L.append("\n### Ratios within this run (FW / method; deterministic / sampled; full / "
             "sample-only gradient)\n")
    L.append("| ratio | wall | CPU | iter | kernel evals |")
    L.append("|---|---|---|---|---|")
    rt = res["ratios"]
    suffixes = ("time_s", "cpu_s", "iter", "kernel_evals")
    bases = sorted({k[:-len(x) - 1] for k in rt for x in suffixes if k.endswith("_" + x)})
    for base in bases:
        vals = [rt.get(f"{base}_{k}") for k in suffixes]
        L.append(f"| {base} | " + " | ".join("-" if v is None else f"{v:.2f}"
                                             for v in vals) + " |")
    L.append("\n### The paper's Tables 2 and 4 (acc %, CPU s, iter, SVs), FW/PARTAN time ratio\n")
    L.append("| data set | m | table | FW | MFW | SWAP | PARTAN | FW/PARTAN time |")
    L.append("|---|---|---|---|---|---|---|---|")
    for tab, name in ((PAPER_TABLE2, "2"), (PAPER_TABLE4, "4")):
        for ds, rows in tab.items():
            cells = [f"{a:.2f} / {t:g} / {i:g} / {s:g}" for a, t, i, s in
                     (rows[m] for m in METHODS)]
            L.append(f"| {ds} | {PAPER_M[ds]} | {name} | " + " | ".join(cells)
                     + f" | {rows['fw'][1] / rows['partan'][1]:.2f} |")
    L.append(f"\nTotal: {res.get('total_time_s', 0):.0f} s wall, "
             f"{res.get('total_cpu_s', 0):.0f} s process CPU.")
    return "\n".join(L) + "\n"


def _evals(v):
    return "-" if v is None else f"{float(v):.3g}"


def _cache_text(cfg):
    cols = cfg.get("cache_columns")
    block = cfg.get("block", "auto")
    size = (f"{cols} columns" if cols is not None
            else f"{cfg.get('cache_size_mb', 1000.0):g} MB")
    return f"{size}, block {block}" + (" (no prefetched columns)" if block == 1 else "")


def _figure_large(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key in zip(axes, ("iteration", "time_s")):
        for r in res["table2"]:
            tr = r["trace"]
            ax.semilogy(tr[key], np.maximum(tr["gap"], 1e-12), label=r["method"])
        for grad, rows in (res.get("table4_by_gradient") or {"full": res["table4"]}).items():
            for r in rows:
                tr = r["trace"]
                ax.semilogy(tr[key], np.maximum(tr["gap"], 1e-12),
                            "--" if grad == "full" else ":",
                            label=f"{r['method']} |S|={r['sample_size']} {grad}")
        ax.axhline(1e-4, color="k", lw=0.5)
        ax.set_xlabel("iteration" if key == "iteration" else "wall time (s)")
        ax.set_ylabel("duality gap (sample-only: sampled gap between the ends)")
        ax.legend(fontsize=7, ncol=2)
    cfg = res["config"]
    fig.suptitle(f"{cfg['dataset']} ({cfg['pairs']}), m={cfg['m']}, C={cfg['C']:g}, "
                 f"gamma={cfg['gamma']:.3g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ command


@click.command("svm")
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Directory for JSON, markdown and PNG  [default: bench_out/svm, or "
                   "bench_out/svm-large with --dataset fashion-60k or --data].")
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
@click.option("--C", "C", default=None, type=float,
              help="SVM C, shared by all methods and libsvm  [default: 1.0; with "
                   "--dataset fashion-60k or --data it disables --select-C].")
@click.option("--dataset", type=click.Choice(["default", "fashion-60k"]), default="default",
              show_default=True,
              help="default: the small tasks above; fashion-60k: the paper's scale, one "
                   "binary task on all 60,000 Fashion-MNIST training images (test: 10,000).")
@click.option("--data", "data_file", default=None, type=click.Path(dir_okay=False),
              help="Tables 2-4 at the paper's scale on this two-class svmlight/LIBSVM file "
                   "(a9a, w8a, ijcnn1 as distributed; .gz/.bz2/.xz read compressed), "
                   "tested on --test-data or, without it, on a stratified 30 %% of it.")
@click.option("--test-data", "test_file", default=None, type=click.Path(dir_okay=False),
              help="--data: the test file (a9a.t, w8a.t, ijcnn1.t).")
@click.option("--pairs", type=click.Choice(["tops", "even-odd"]), default="tops",
              show_default=True, help="fashion-60k: the pairing of classes into +1 / -1.")
@click.option("--select-C/--no-select-C", "select_c", default=None,
              help="Large runs: choose C on a 70/30 validation split of the training set "
                   "(the paper's), then refit  [default: on unless --C is given].")
@click.option("--C-grid", "c_grid", default="0.1,1,10,100", show_default=True,
              help="Large runs: comma-separated C values for --select-C.")
@click.option("--select-n", default=10000, show_default=True, type=int,
              help="Large runs: points used by --select-C (0: the whole training set).")
@click.option("--gamma", "gamma", default=None,
              help="Large runs: RBF gamma, 'cvm' (the paper's heuristic, mean squared "
                   "pairwise distance, Tsang et al. 2005), 'scale' or a number  [default: cvm].")
@click.option("--sampling/--no-sampling", default=None,
              help="Large runs: run Table 4, the randomised search with |S| = "
                   "--sample-size  [default: on].")
@click.option("--sample-size", default=PAPER_SAMPLE_SIZE, show_default=True, type=int,
              help="Large runs: |S| of --sampling.")
@click.option("--gradient", "gradient", type=click.Choice(["sample", "full", "both"]),
              default="both", show_default=True,
              help="Large runs, Table 4: 'sample' evaluates the gradient on the sample only "
                   "(the paper's randomised iteration), 'full' keeps the whole gradient; "
                   "'both' runs the two on the same seeds.")
@click.option("--sample-check", type=click.Choice(["resample", "full"]), default="resample",
              show_default=True,
              help="Large runs, Table 4: the paper's stop (two more samples) or also the "
                   "exact gap.")
@click.option("--seeds", "--runs", "runs", default=2, show_default=True, type=int,
              help="Large runs: seeds averaged in Table 4 (the paper: 10).")
@click.option("--tols", default="1e-3,1e-4", show_default=True,
              help="Large runs: comma-separated tolerances of Table 3.")
@click.option("--methods", default="fw,mfw,swap,partan", show_default=True,
              help="Large runs: comma-separated subset of fw, mfw, swap, partan.")
@click.option("--n-train", default=None, type=int,
              help="Large runs: stratified subsample of the training set (smoke runs, "
                   "moderate sizes).")
@click.option("--max-iter", default=200000, show_default=True, type=int,
              help="Large runs: iterations at most per fit.")
@click.option("--cache-size", default=1000.0, show_default=True, type=float,
              help="Large runs: MB of kernel columns each fit may cache (m = 60,000: "
                   "1000 MB holds about 4,300 float32 columns).")
@click.option("--cache-columns", default=None, type=int,
              help="Large runs: bound the column cache to this many columns instead (>= 2; "
                   "2 with --block 1: the time follows the iterations, not the support).")
@click.option("--block", "block", default="auto", show_default=True,
              help="Large runs: columns computed per cache miss ('auto' or an int >= 1; 1: no "
                   "prefetched columns).")
def bench_svm(out, quick, large, seed, heart_path, C, dataset, data_file, test_file, pairs,
              select_c, c_grid, select_n, gamma, sampling, sample_size, gradient, sample_check,
              runs, tols, methods, n_train, max_iter, cache_size, cache_columns, block):
    """Kernel SVM benchmark: FW / MFW / SWAP / PARTAN (and randomised search) vs libsvm."""
    if C is not None and C <= 0:
        raise click.BadParameter("C must be > 0", param_hint="--C")
    if test_file is not None and data_file is None:
        raise click.UsageError("--test-data needs --data")
    if data_file is not None and dataset != "default":
        raise click.UsageError("--data and --dataset exclude each other: --data is the task")
    if dataset == "default" and data_file is None:
        given = {"--select-C": select_c, "--gamma": gamma, "--sampling": sampling,
                 "--n-train": n_train, "--cache-size": None if cache_size == 1000.0 else cache_size,
                 "--cache-columns": cache_columns, "--block": None if block == "auto" else block,
                 "--gradient": None if gradient == "both" else gradient,
                 "--sample-check": None if sample_check == "resample" else sample_check,
                 "--max-iter": None if max_iter == 200000 else max_iter,
                 "--methods": None if methods == "fw,mfw,swap,partan" else methods}
        for name, v in given.items():
            if v is not None:
                raise click.UsageError(f"{name} needs --dataset fashion-60k or --data FILE")
        out = out or "bench_out/svm"
        run_benchmark(out=out, quick=quick, large=large, seed=seed, heart_path=heart_path,
                      C=1.0 if C is None else C, log=click.echo)
        click.echo(f"wrote {out}/svm_tables.json, svm_tables.md, svm_convergence.png")
        return
    if select_c and C is not None:
        raise click.UsageError("--select-C and --C exclude each other: --select-C chooses C")
    select = (C is None) if select_c is None else select_c
    if not select and C is None:
        raise click.UsageError("--no-select-C needs --C")
    grid = list(parse_number_list(c_grid, float, param_hint="--C-grid"))
    tol_list = list(parse_number_list(tols, float, param_hint="--tols"))
    gamma = _parse_gamma_option(gamma)
    for name, v, lo in (("--sample-size", sample_size, 1), ("--seeds/--runs", runs, 1),
                        ("--select-n", select_n, 0), ("--max-iter", max_iter, 1)):
        if v < lo:
            raise click.BadParameter(f"must be >= {lo}; got {v}", param_hint=name)
    if not cache_size > 0:
        raise click.BadParameter(f"must be > 0; got {cache_size}", param_hint="--cache-size")
    if cache_columns is not None and cache_columns < 2:
        raise click.BadParameter(f"must be >= 2 (the solver keeps two columns at least); got "
                                 f"{cache_columns}", param_hint="--cache-columns")
    block = _parse_block_option(block)
    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    if not method_list or any(m not in METHODS for m in method_list) \
            or len(set(method_list)) != len(method_list):
        raise click.BadParameter(f"expected a comma-separated subset of {', '.join(METHODS)}; "
                                 f"got {methods!r}", param_hint="--methods")
    if n_train is not None and n_train < 20:
        raise click.BadParameter(f"must be >= 20; got {n_train}", param_hint="--n-train")
    data = None
    name = dataset
    if data_file is not None:
        try:
            data = load_svmlight_task(data_file, test_file, seed=seed, n_train=n_train)
        except (OSError, ValueError) as exc:
            hint = ("--test-data" if test_file is not None and str(test_file) in str(exc)
                    else "--data")
            raise click.BadParameter(str(exc), param_hint=hint) from None
        name, pairs, n_train = os.path.basename(data_file), "svmlight labels", None
    out = out or "bench_out/svm-large"
    try:
        run_large(out=out, data=data, dataset=name, pairs=pairs, gamma=gamma, C=C,
                  select=select, grid=grid, n_select=select_n or None,
                  sampling=sampling is not False, sample_size=sample_size, runs=runs,
                  tols=tol_list, n_train=n_train, seed=seed, max_iter=max_iter,
                  cache_size=cache_size, cache_columns=cache_columns, block=block,
                  gradients=("sample", "full") if gradient == "both" else (gradient,),
                  sample_check=sample_check, methods=method_list, log=click.echo)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {out}/svm_large.json, svm_large.md, svm_large.png")


def _parse_gamma_option(gamma):
    if gamma is None:
        return "cvm"
    if gamma in ("cvm", "scale"):
        return gamma
    try:
        g = float(gamma)
    except ValueError:
        g = float("nan")
    if not (np.isfinite(g) and g > 0):
        raise click.BadParameter(f"expected 'cvm', 'scale' or a positive number; got "
                                 f"{gamma!r}", param_hint="--gamma")
    return g


def _parse_block_option(block):
    if block == "auto":
        return "auto"
    try:
        b = int(block)
    except (TypeError, ValueError):
        b = 0
    if b < 1:
        raise click.BadParameter(f"expected 'auto' or an integer >= 1; got {block!r}",
                                 param_hint="--block")
    return b
