"""Figure 1 of the BCFW paper (Lacoste-Julien et al. 2013): all six panels.

Primal suboptimality P(w) - P* against effective passes (log-log), median line and
min-max band over seeds, and the test error against passes, on three data sets:

- ``ocr`` -- panels (a)-(c): OCR at lam = 0.01, 0.001 and 1/n, for cutting plane,
  FW, BCFW (line search), BCFW-wavg, BCFW with the predefined step 2n/(k+2n)
  (App. F, Fig. 2), SSG, SSG-wavg and online-EG;
- ``conll`` -- panels (d) and (e): the large sparse CoNLL-like chain of
  `structfw_bench.synthetic.make_chain_problem` (sparse binary emissions) at
  lam = 1/n, batch and stochastic methods (online-EG is left out by default, as in the
  paper, App. F, but may be asked for);
- ``matching`` -- panel (f): the word-alignment task of
  `structfw.datasets.make_alignment` with `structfw.models.MatchingModel`
  at lam = 0.001, stochastic methods only.  Online-EG cannot run there: MatchingModel has
  no expectation oracle (marginals of a matching distribution need the permanent, #P-hard).

The x-axis is *effective passes* = optimisation oracle calls / n (the trace's
``oracle_calls``; monitoring calls excluded).  It equals the trace's ``passes`` for
every solver but online-EG, whose start (one expectation call per block to evaluate
the initial alpha) costs a pass its ``passes`` column does not count.  Batch FW and
cutting plane are deterministic and run once (a line without band).

P* is estimated by the best (largest) dual value D(alpha) found by any run, including
a reference run of multi-plane BCFW with pairwise steps (``ref_passes`` passes).  Since
D(alpha) <= P*, the plotted P(w) - D_best is an upper bound of the true
suboptimality; the JSON records the remaining bracket min P - max D.

Output: ``fig1.json`` / ``fig1.png`` for OCR (as before), ``fig1_conll.*`` and
``fig1_matching.*`` for the other data sets, in ``out``.

Appendix F (``appendix_f=True``, ``--appendix-f``): Figures 3-4 (OCR, CoNLL) and 5 (matching)
compare the *stochastic* solvers with every averaging of the iterates, at several lam:

- ``-avg``: the uniform average of all iterates from the start, xbar_T = 1/T sum_{t=1..T} x_t
  ("SSG-avg", App. F);
- ``-wavg``: the weighted average (14), xbar_T = 2/(T(T+1)) sum_{t=1..T} t x_t;
- ``-tavg``: the 0.5-suffix average (15) by the doubling trick (App. C, after (15); App. F): the
  uniform average of the iterates since the last step t that was a power of two.

Both SSG and BCFW have all of these as the option ``averaging`` ("uniform", "weighted",
"suffix"; `structfw.solvers.averaging`).  Output stems ``appf_<dataset>``; every lam is a
column of panels in the PNG and an entry of ``lams`` in the JSON.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from ._common import (bands, col, environment, load_ocr_data, on_grid, parse_lam, plan_fits, pyplot, run_fit,
                      write_json)

FIG1_SOLVERS = ("cutting-plane", "FW", "BCFW", "BCFW-wavg", "BCFW-fixed", "SSG", "SSG-wavg", "online-EG")
#: The averaged variants App. F adds (Figures 3-5): SSG-avg (uniform from the start), SSG-tavg and
#: BCFW-tavg (0.5-suffix averaging (15) by the doubling trick).
APPF_VARIANTS = ("SSG-avg", "SSG-tavg", "BCFW-tavg")
#: Every solver name `make_fig1_solver` knows.
SOLVERS = FIG1_SOLVERS + APPF_VARIANTS
#: App. F, Figures 3-5: the stochastic solvers, each with its averagings (online-EG on OCR only:
#: "substantially worse ... and therefore not included in the comparison for the other datasets").
APPF_SOLVERS = ("BCFW", "BCFW-wavg", "BCFW-tavg", "SSG", "SSG-wavg", "SSG-tavg", "SSG-avg", "online-EG")
_APPF_ALLOWED = APPF_SOLVERS + ("BCFW-fixed",)
#: run once, not per seed
DETERMINISTIC = ("cutting-plane", "FW")
_STYLE = {"cutting-plane": ("tab:brown", "-."), "FW": ("tab:gray", "--"), "BCFW": ("tab:blue", "-"),
          "BCFW-wavg": ("tab:green", "-"), "BCFW-fixed": ("tab:cyan", ":"), "SSG": ("tab:red", "-"),
          "SSG-wavg": ("tab:orange", "-"), "online-EG": ("tab:purple", (0, (3, 1, 1, 1, 1, 1))),
          "BCFW-tavg": ("tab:olive", "--"), "SSG-tavg": ("tab:pink", "--"), "SSG-avg": ("tab:brown", ":")}

#: Online-EG's options here.  The solver's defaults (eta = 0.1, init_c = 0: uniform alpha)
#: start far from w = 0 and stay there on OCR (primal 7-80 after 10 passes on 1,000 words,
#: against 0.46 for BCFW); of eta in {0.03, ..., 30} x init_c in {0, -20, -50, -100, -200}
#: on 1,000 OCR words, 10 passes, lam in {0.01, 0.001, 1.6e-4}, this one was best or
#: near-best at every lam (docs/results/fig1.md).  Online-EG is given its best shot.
ONLINE_EG_OPTIONS = dict(eta=0.3, init_c=-100.0)

#: Per data set: defaults and the solvers it allows.  ``n``: training examples (None: all).
#: ``appf``: the same for App. F's figure of that data set (``appendix_f=True``).  The scraped text
#: of the paper names "several values of lam" for Figures 3-4 but not which (the captions are in
#: the figures): the defaults are Figure 1's three OCR values, 0.01, 0.001 and 1/n.
_APPF_STOCHASTIC = tuple(s for s in APPF_SOLVERS if s != "online-EG")
DATASETS = {
    "ocr": dict(panels="(a)-(c)", title="OCR", lams=("0.01", "0.001", "1/n"), n=None,
                solvers=FIG1_SOLVERS, allowed=FIG1_SOLVERS,
                appf=dict(panels="Fig. 3", lams=("0.01", "0.001", "1/n"), solvers=APPF_SOLVERS,
                          allowed=_APPF_ALLOWED)),
    "conll": dict(panels="(d), (e)", title="CoNLL-like sparse chain", lams=("1/n",), n=8936,
                  solvers=("cutting-plane", "FW", "BCFW", "BCFW-wavg", "SSG", "SSG-wavg"), allowed=FIG1_SOLVERS,
                  appf=dict(panels="Fig. 4", lams=("0.01", "0.001", "1/n"), solvers=_APPF_STOCHASTIC,
                            allowed=_APPF_ALLOWED)),
    "matching": dict(panels="(f)", title="word alignment (matching)", lams=("0.001",), n=5000,
                     solvers=("BCFW", "BCFW-wavg", "SSG", "SSG-wavg"),
                     allowed=("BCFW", "BCFW-wavg", "BCFW-fixed", "SSG", "SSG-wavg", "online-EG"),
                     appf=dict(panels="Fig. 5", lams=("0.001",), solvers=_APPF_STOCHASTIC,
                               allowed=_APPF_ALLOWED)),
}
#: Why a solver is not allowed on a data set (the error message).
_NOT_ALLOWED = {
    ("matching", "FW"): "Figure 1(f) compares the stochastic methods only",
    ("matching", "cutting-plane"): "Figure 1(f) compares the stochastic methods only",
}


#: The reference run for P*: multi-plane BCFW with pairwise steps.  On the CoNLL-like chain at
#: lam = 1/n (n = 8,936) 100 passes of BCPFW-gap left a duality gap of 0.21; MP-BCFW reached
#: 3e-3 in as many effective passes, and pairwise steps were better still on OCR at lam = 1/n.
REFERENCE = "MP-BCPFW"
REF_TOL = 1e-6


def make_reference_solver():
    from structfw import solvers

    return solvers.MPBCFW(step="pairwise")


def make_fig1_solver(name):
    from structfw import solvers

    return {"cutting-plane": lambda: solvers.CuttingPlane(),
            "FW": lambda: solvers.FW(step_size="linesearch"),
            "BCFW": lambda: solvers.BCFW(step_size="linesearch"),
            "BCFW-wavg": lambda: solvers.BCFW(step_size="linesearch", averaging="weighted"),
            "BCFW-fixed": lambda: solvers.BCFW(step_size="predefined"),
            "SSG": lambda: solvers.SSG(),
            "SSG-wavg": lambda: solvers.SSG(averaging="weighted"),
            "online-EG": lambda: solvers.OnlineEG(**ONLINE_EG_OPTIONS),
            # App. F: uniform average from the start, and the doubling trick's 0.5-suffix average (15)
            "SSG-avg": lambda: solvers.SSG(averaging="uniform"),
            "SSG-tavg": lambda: solvers.SSG(averaging="suffix"),
            "BCFW-tavg": lambda: solvers.BCFW(step_size="linesearch", averaging="suffix")}[name]()


def out_stem(dataset, appendix_f=False):
    """File stem of a data set's outputs: ``fig1`` for OCR, ``fig1_<dataset>`` otherwise;
    ``appf_<dataset>`` for App. F's figures."""
    if appendix_f:
        return f"appf_{dataset}"
    return "fig1" if dataset == "ocr" else f"fig1_{dataset}"


def figure_spec(dataset, appendix_f=False):
    """The defaults of ``dataset``'s figure: panels, title, lams, solvers and allowed solvers."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {dataset!r}")
    spec = DATASETS[dataset]
    if not appendix_f:
        return dict(spec, figure="Figure 1")
    return dict(spec, **spec["appf"], figure="App. F")


def check_solvers(dataset, solvers, model=None, appendix_f=False):
    """The solvers to run on ``dataset`` (its defaults for None/empty), or a ValueError naming
    ``dataset`` / ``solvers`` and why.  With ``model``, online-EG needs its expectation oracle.
    ``appendix_f``: App. F's figure of the data set (the stochastic solvers and every averaging)."""
    spec = figure_spec(dataset, appendix_f)
    names = tuple(solvers) if solvers else spec["solvers"]
    for name in names:
        if name not in SOLVERS:
            raise ValueError(f"solvers: unknown solver {name!r}; choose from {', '.join(SOLVERS)}")
        if name not in spec["allowed"]:
            if not appendix_f and name in APPF_VARIANTS:
                raise ValueError(f"solvers: {name!r} is an App. F variant (Figures 3-5, the averagings of the "
                                 "stochastic solvers), not in Figure 1: add --appendix-f (appendix_f=True)")
            if appendix_f:
                why = "App. F's Figures 3-5 compare the stochastic solvers; drop --appendix-f for Figure 1"
            else:
                why = _NOT_ALLOWED.get((dataset, name), "not part of this panel")
            raise ValueError(f"solvers: {name!r} is not run on dataset {dataset!r} ({why}); allowed there: "
                             f"{', '.join(a for a in spec['allowed'] if _runnable(a, dataset))}")
        if not _runnable(name, dataset, model):
            raise ValueError(f"solvers: 'online-EG' cannot run on dataset {dataset!r}: "
                             f"{_model_name(dataset)} has no expectation oracle (marginals; for a matching "
                             "they need the permanent, #P-hard), which online exponentiated gradient needs")
    return tuple(dict.fromkeys(names))


def _model_name(dataset):
    return {"ocr": "ChainModel", "conll": "ChainModel", "matching": "MatchingModel"}[dataset]


def _runnable(name, dataset, model=None):
    """online-EG only where the model has an expectation oracle (checked on the model class)."""
    if name != "online-EG":
        return True
    if model is None:
        from structfw import models

        model_cls = getattr(models, _model_name(dataset))
        return getattr(model_cls, "expectation") is not models.StructuredModel.expectation
    return bool(model.has_expectation_oracle)


def load_fig1_data(dataset, subsample=None):
    """(X, Y, X_test, Y_test, model, info): the data set's train and test sets, its model and a
    description for the JSON.  ``subsample``: training examples (OCR: random words kept;
    conll / matching: examples generated, with a tenth as many test examples, at least 10)."""
    from structfw import datasets, models

    if dataset == "ocr":
        X, Y, Xt, Yt, model = load_ocr_data(subsample)
        return X, Y, Xt, Yt, model, dict(source="structfw.datasets.load_ocr", subsample=subsample)
    n = int(subsample or DATASETS[dataset]["n"])
    n_test = max(10, n // 10)
    if dataset == "conll":
        from .synthetic import make_chain_problem

        gen = dict(n=n, n_states=10, n_features=200, sparse=True, seed=0, n_test=n_test)
        X, Y, Xt, Yt = make_chain_problem(**gen)
        model = models.ChainModel(n_states=gen["n_states"], n_features=gen["n_features"])
        return X, Y, Xt, Yt, model, dict(source="structfw_bench.synthetic.make_chain_problem", **gen)
    if dataset == "matching":
        # one generator call: train and test pairs share the lexicon (the same "languages")
        X, Y = datasets.make_alignment(n + n_test, random_state=0)
        model = models.MatchingModel(n_features=datasets.alignment.N_FEATURES)
        return (X[:n], Y[:n], X[n:], Y[n:], model,
                dict(source="structfw.datasets.make_alignment", n=n, n_test=n_test, random_state=0,
                     split="first n pairs train, the rest test"))
    raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {dataset!r}")


def parse_lam_specs(value, name="lams"):
    """The lam specifications in ``value``: a comma-separated string ("0.01,0.001,1/n") or a
    sequence of strings / numbers.  Each is a positive finite float or "c/n" (c > 0; "1/n" = "/n";
    n = the number of training examples, resolved by `parse_lam` once the data are loaded).
    Returns a tuple of strings; a ValueError naming ``name`` for anything else (empty items,
    a non-number, lam <= 0, nan / inf, a value given twice)."""
    items = str(value).split(",") if isinstance(value, str) else list(value)
    specs = []
    for item in items:
        spec = str(item).strip()
        text = spec.replace(" ", "")
        if not text:
            raise ValueError(f"{name}: empty lam in {value!r}; give comma-separated values such as 0.01,0.001,1/n")
        number = text[:-2] if text.endswith("/n") else text
        try:
            c = 1.0 if number in ("", "1") else float(number)
        except ValueError:
            raise ValueError(f"{name}: {spec!r} is not a number or 'c/n' (e.g. 0.01, 1e-3, 1/n, 0.5/n)") from None
        if not math.isfinite(c) or c <= 0:
            raise ValueError(f"{name}: lam must be positive and finite; got {spec!r}")
        if spec in specs:
            raise ValueError(f"{name}: lam {spec!r} is given twice")
        specs.append(spec)
    return tuple(specs)


def effective_passes(run, n):
    """x-axis of every curve: optimisation oracle calls / n (monitoring excluded)."""
    return col(run, "oracle_calls") / n


def run_fig1(lams=None, passes=30, seeds=3, out="bench_out/fig1", solvers=None, subsample=None, ref_passes=100,
             log=print, dataset="ocr", appendix_f=False):
    """Run the Figure 1 benchmark on ``dataset``; writes ``<stem>.json`` and ``<stem>.png``
    (`out_stem`) to ``out``; returns the JSON doc.

    Parameters
    ----------
    lams : str, sequence or None
        The lams, each a column of panels in the PNG and an entry of the JSON's ``lams``:
        "0.01,0.001,1/n" or ["0.01", "1/n"] (`parse_lam_specs`); None: the figure's defaults.
    passes, seeds : int
        Effective passes per run; seeds per stochastic solver (batch FW and cutting plane run once).
    solvers : sequence of str or None
        Names from `SOLVERS`; None: the figure's (``DATASETS``).
    appendix_f : bool
        App. F's figure of the data set (Fig. 3 OCR, 4 CoNLL, 5 matching): the stochastic solvers
        with every averaging (-avg, -wavg (14), -tavg (15)); outputs ``appf_<dataset>.*``.
    """
    solvers = check_solvers(dataset, solvers, appendix_f=appendix_f)
    spec = figure_spec(dataset, appendix_f)
    lams = parse_lam_specs(lams) if lams is not None and len(lams) else spec["lams"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, Xt, Yt, model, data_info = load_fig1_data(dataset, subsample)
    check_solvers(dataset, solvers, model, appendix_f=appendix_f)
    n = len(X)
    grid = np.arange(0, int(math.ceil(passes)) + 1, dtype=float)
    doc = dict(benchmark="fig1", figure=spec["figure"], appendix_f=bool(appendix_f), dataset=dataset,
               panels=spec["panels"], n=n, n_test=len(Xt),
               d=int(model.size_joint_feature), model=type(model).__name__, data=data_info, passes=passes,
               seeds=int(seeds), subsample=subsample, ref_passes=ref_passes, solvers=list(solvers),
               online_eg_options=ONLINE_EG_OPTIONS if "online-EG" in solvers else None,
               environment=environment(),
               x_axis="effective passes = optimisation oracle calls / n (the trace's oracle_calls / n)",
               pstar_estimate=("max dual value D(alpha) over all runs and a reference run of "
                               "MPBCFW(step='pairwise'); suboptimality = P(w) - D_best, an upper bound of "
                               "P(w) - P*; pstar_bracket = min primal - max dual of all runs"),
               grid_passes=grid.tolist(), lams={})
    if dataset == "matching" and "online-EG" not in solvers and not _runnable("online-EG", dataset, model):
        doc["not_run"] = {"online-EG": "MatchingModel has no expectation oracle (marginals of a matching "
                                       "distribution need the permanent, #P-hard)"}
    t_start = time.perf_counter()
    plan_fits(len(lams) * (bool(ref_passes) + sum(1 if s in DETERMINISTIC else int(seeds) for s in solvers)))
    for lam_spec in lams:
        lam = parse_lam(lam_spec, n)
        entry = dict(lam=lam, lam_spec=str(lam_spec), solvers={})
        best_dual, best_primal = -math.inf, math.inf
        if ref_passes:
            from structfw import solvers as S

            # only the best dual matters, and line-search steps never decrease it: a checkpoint
            # every tenth of the run suffices; a gap of REF_TOL is far below any value reported
            run, _ = run_fit(model, make_reference_solver(), X, Y, lam, ref_passes, 0, tol=REF_TOL,
                             check_every=max(1, int(ref_passes) // 10))
            best_dual = max(best_dual, np.nanmax(col(run, "dual")))
            best_primal = min(best_primal, np.nanmin(col(run, "primal")))
            entry["reference"] = dict(solver=REFERENCE, passes=col(run, "passes")[-1],
                                      final_gap=run["columns"]["gap"][-1], final_dual=run["columns"]["dual"][-1],
                                      final_primal=run["columns"]["primal"][-1], wall_s=run["wall_s"])
            log(f"[fig1] {dataset} lam={lam_spec} ({lam:.3g}): reference gap {run['columns']['gap'][-1]:.3g}")
        raw = {}
        for name in solvers:
            runs = []
            n_seeds = 1 if name in DETERMINISTIC else int(seeds)
            # online-EG's start costs one pass of expectation calls: passes - 1 engine passes
            # give it the same budget of oracle calls as the others
            budget = max(1, int(passes) - 1) if name == "online-EG" else passes
            for s in range(n_seeds):
                run, _ = run_fit(model, make_fig1_solver(name), X, Y, lam, budget, s, Xt, Yt, check_every=1)
                runs.append(run)
                d = col(run, "dual")
                if np.isfinite(d).any():
                    best_dual = max(best_dual, np.nanmax(d))
                best_primal = min(best_primal, np.nanmin(col(run, "primal")))
            raw[name] = runs
            log(f"[fig1] {dataset} lam={lam_spec}: {name} x{n_seeds} done ({time.perf_counter() - t_start:.0f}s)")
        pstar = best_dual
        entry.update(pstar=pstar, best_primal=best_primal, pstar_bracket=best_primal - best_dual)
        for name, runs in raw.items():
            xs = [effective_passes(r, n) for r in runs]
            subopt = [np.maximum(col(r, "primal") - pstar, 1e-12) for r in runs]
            sub = [on_grid(x, s, grid) for x, s in zip(xs, subopt)]
            best = [on_grid(x, np.minimum.accumulate(s), grid) for x, s in zip(xs, subopt)]
            te = [on_grid(x, col(r, "test_loss"), grid, log=False) for x, r in zip(xs, runs)]
            tm = [on_grid(x, col(r, "time_s"), grid, log=False) for x, r in zip(xs, runs)]
            entry["solvers"][name] = dict(
                label=runs[0]["meta"].get("solver", name), n_runs=len(runs), deterministic=name in DETERMINISTIC,
                params=runs[0]["meta"].get("solver_params"),
                primal_subopt=bands(sub), best_primal_subopt=bands(best), test_error=bands(te), time_s=bands(tm),
                runs=[dict(seed=r["seed"], wall_s=r["wall_s"], passes=x.tolist(),
                           trace_passes=r["columns"]["passes"], engine_passes=r["columns"].get("engine_passes"),
                           primal=r["columns"]["primal"], dual=r["columns"]["dual"],
                           test_loss=r["columns"].get("test_loss"), time_s=r["columns"]["time_s"])
                      for x, r in zip(xs, runs)])
        entry["table"] = summary_table(entry, grid, at=table_passes(passes))
        doc["lams"][str(lam_spec)] = entry
    doc["wall_s"] = time.perf_counter() - t_start
    stem = out_stem(dataset, appendix_f)
    write_json(out / f"{stem}.json", doc)
    plot_fig1(doc, out / f"{stem}.png")
    return doc


def table_passes(passes):
    """The passes of the summary table: 1, 5, 10, 30 up to ``passes``, and ``passes`` itself."""
    last = int(math.ceil(passes))
    return tuple(p for p in (1, 5, 10, 30) if p < last) + (last,)


def summary_table(entry, grid, at=(1, 5, 10, 30)):
    """Median primal suboptimality at given passes and median final test error, per solver."""
    rows = {}
    for name, s in entry["solvers"].items():
        med = s["primal_subopt"]["median"]
        row = {f"subopt@{p}": (med[p] if p < len(med) else None) for p in at}
        te = [v for v in s["test_error"]["median"] if v is not None]
        row["test_error_final"] = te[-1] if te else None
        rows[name] = row
    return rows


def plot_fig1(doc, path):
    """Primal suboptimality (top) and test error (bottom) against passes, one column per lam;
    with a single lam (conll, matching) the two panels side by side, as the paper's (d)-(e)."""
    from structfw.plotting import plot_bands

    plt = pyplot()
    lam_keys = list(doc["lams"])
    title = DATASETS.get(doc.get("dataset", "ocr"), DATASETS["ocr"])["title"]
    if len(lam_keys) == 1:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), squeeze=False)
        axes = axes.reshape(2, 1)
    else:
        fig, axes = plt.subplots(2, len(lam_keys), figsize=(4.6 * len(lam_keys), 7.4), squeeze=False)
    grid = np.asarray(doc["grid_passes"])
    sel = grid >= 1
    for j, key in enumerate(lam_keys):
        e = doc["lams"][key]
        for name, s in e["solvers"].items():
            color, ls = _STYLE.get(name, (None, "-"))
            for row, what, log in ((0, "primal_subopt", True), (1, "test_error", False)):
                b = s[what]
                runs = np.array([[np.nan if v is None else v for v in b[k]] for k in ("min", "median", "max")])
                ax = axes[row, j]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    if s["n_runs"] == 1:  # deterministic: a line, no band
                        line, = ax.plot(grid[sel], runs[1, sel], label=name, color=color)
                        if log:
                            ax.set_yscale("log")
                    else:
                        line = plot_bands(ax, grid[sel], runs[:, sel], name, color=color, log=log)
                line.set_linestyle(ls)
        for ax in axes[:, j]:
            ax.set_title(f"{title}, lam = {key} ({e['lam']:.3g}), n = {doc['n']}", fontsize=9)
            ax.set_xscale("log")
            ax.set_xlabel("effective passes (oracle calls / n)", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
        axes[0, j].set_ylabel("primal suboptimality P(w) - P*", fontsize=9)
        axes[1, j].set_ylabel("test error", fontsize=9)
        axes[0, j].legend(fontsize=7)
    once = [name for name in DETERMINISTIC if name in doc.get("solvers", ())]
    which = f"App. F, {doc.get('panels', '')}" if doc.get("appendix_f") else f"Fig. 1 {doc.get('panels', '')}"
    fig.suptitle(f"BCFW paper {which}: median and min-max over {doc['seeds']} seeds"
                 + (f" ({', '.join(once)}: one run)" if once else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _defaults_help():
    return "; ".join(f"{ds}: {', '.join(s['lams'])}" for ds, s in DATASETS.items())


def _lams_callback(ctx, param, value):
    """Check --lam / --lams at parse time (usage errors name the option); a tuple of specs."""
    if value is None or (not isinstance(value, str) and not value):
        return ()
    items = ",".join(value) if not isinstance(value, str) else value
    try:
        return parse_lam_specs(items, name=param.opts[0])
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"{param.opts[0]}: ")) from None


@click.command("fig1")
@click.option("--dataset", type=click.Choice(tuple(DATASETS)), default="ocr", show_default=True,
              help="ocr: panels (a)-(c); conll: the CoNLL-like sparse chain, panels (d)-(e); matching: "
                   "word alignment, panel (f), stochastic methods only.")
@click.option("--appendix-f", is_flag=True,
              help="App. F's figure of the dataset (Fig. 3 ocr, 4 conll, 5 matching): the stochastic solvers "
                   "with every averaging (BCFW, BCFW-wavg, BCFW-tavg, SSG, SSG-wavg, SSG-tavg, SSG-avg; "
                   "online-EG on ocr), lams 0.01, 0.001, 1/n on ocr and conll; writes appf_<dataset>.json/.png.")
@click.option("--lam", "lam_list", multiple=True, callback=_lams_callback,
              help="Regularisation lambda; repeat for several; '1/n' or 'c/n' allowed.  Default per dataset: "
                   + _defaults_help() + ".")
@click.option("--lams", "lams", default=None, callback=_lams_callback,
              help="Several lambdas in one option, comma-separated, e.g. 0.01,0.001,1/n (added to any --lam); "
                   "one column of panels per lambda in the PNG, all in the JSON.")
@click.option("--passes", default=30, show_default=True, type=click.IntRange(min=1),
              help="Effective passes (oracle calls / n) per run.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Random seeds per stochastic solver (cutting plane and FW run once).")
@click.option("--out", default="bench_out/fig1", show_default=True, type=click.Path(file_okay=False),
              help="Directory; writes fig1.json/.png (ocr) or fig1_<dataset>.json/.png; appf_<dataset>.json/.png "
                   "with --appendix-f.")
@click.option("--solver", "solver_names", multiple=True, type=click.Choice(SOLVERS),
              help="Solvers to run (default: the dataset's panel -- ocr: all; conll: all but BCFW-fixed and "
                   "online-EG; matching: BCFW, BCFW-wavg, SSG, SSG-wavg).  Not on matching: FW, cutting-plane, "
                   "online-EG (no expectation oracle).  SSG-avg, SSG-tavg, BCFW-tavg: with --appendix-f.")
@click.option("--subsample", default=None, type=click.IntRange(min=1),
              help="Training examples: ocr keeps this many random words (default all 6,251); conll and matching "
                   "generate this many (default 8,936 sequences and 5,000 sentence pairs), plus a tenth as many "
                   "test examples.")
@click.option("--ref-passes", default=100, show_default=True, type=click.IntRange(min=0),
              help="Passes of the MP-BCFW (pairwise) reference run for P* (0: best dual of the runs only).")
def bench_fig1(dataset, appendix_f, lam_list, lams, passes, seeds, out, solver_names, subsample, ref_passes):
    """BCFW paper Figure 1 (and App. F's Figures 3-5): primal suboptimality and test error against passes
    (OCR, CoNLL-like, matching)."""
    try:
        solvers = check_solvers(dataset, solver_names, appendix_f=appendix_f)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("solvers: "), param_hint="'--solver'") from None
    lams = tuple(lam_list) + tuple(lams)
    try:
        lams = parse_lam_specs(lams, name="--lam/--lams") if lams else None
    except ValueError as exc:  # the same value in --lam and --lams
        raise click.BadParameter(str(exc).removeprefix("--lam/--lams: "), param_hint="'--lam' / '--lams'") from None
    doc = run_fig1(lams, passes, seeds, out, solvers=solvers, subsample=subsample, ref_passes=ref_passes,
                   log=click.echo, dataset=dataset, appendix_f=appendix_f)
    for key, e in doc["lams"].items():
        click.echo(f"{dataset}: lam = {key} ({e['lam']:.4g}); P* ~ {e['pstar']:.6f} (bracket {e['pstar_bracket']:.2e})")
        cols = list(next(iter(e["table"].values())))
        click.echo(f"{'solver':>13} " + " ".join(f"{c:>16}" for c in cols))
        for name, row in e["table"].items():
            click.echo(f"{name:>13} " + " ".join(f"{'-' if v is None else f'{v:.4g}':>16}" for v in row.values()))
    stem = out_stem(dataset, appendix_f)
    click.echo(f"wrote {Path(out) / f'{stem}.json'} and {Path(out) / f'{stem}.png'}")
