"""App. C of Osokin et al. (2016): a toy problem where gap sampling is n times faster.

The paper (Sec. 3.1, "Adaptive procedure") states that App. C constructs an example where the
convergence of gap sampling is *tightly* n times faster than sampling proportionally to the
Lipschitz constants.  The appendix itself is not part of the text this project works from
(docs/results/gaps-paper.md says so); the construction below is derived from the main text's
claim and from Theorems 1 and 2, and is written as a structured model with the project's model
interface (`GapToyModel`).

Construction (lam = 1/n, so lam n = 1; every psi has norm 1, so every block has the same
bound R_i = max_y ||psi_i(y)|| = 1 and the same curvature bound 4 R_i^2 / (lam n^2) of
Lacoste-Julien et al. (2013, App. A): Lipschitz sampling *is* uniform sampling here):

- coordinates are private to blocks, so the dual (3) separates into n independent problems;
- block 0 (hard): labels {0 (truth), 1, 2} with psi_0(1) = e_0, psi_0(2) = e_1 and losses
  L = 0.9, 0.7.  Its dual is min over the triangle conv{0, e_0, e_1} of
  1/(2 lam n^2) ||p||^2 - ⟨p, t⟩/n, t = (0.9, 0.7): the projection of t onto the triangle,
  which lies inside the edge [e_0, e_1] (0.9 + 0.7 > 1, |0.9 - 0.7| < 1), while the Frank-Wolfe
  iterates start at the opposite vertex 0 and the first step stops inside the edge [0, e_0]
  (0.9 < 1).  Frank-Wolfe with line search then zig-zags between e_0 and e_1 and its gap
  decreases as Theta(1/k) (Wolfe's classical example; about 0.38/k here);
- blocks i = 1..n-1 (easy): labels {0, 3} with psi_i(3) = e_{i+1}, L = 1.5.  Their optimum is
  the vertex 3 (1.5 lam n >= 1), reached by the first line-search step; their block gap is 0
  from then on.

Uniform sampling spends (n-1)/n of its steps on solved blocks: its k-th hard-block step comes
after about k passes.  Gap sampling (p_i proportional to the gap estimates, Sec. 3.1) visits
each easy block once or twice and then only block 0: its k-th hard-block step comes after
about a constant + k/n passes.  The number of passes to reach a small gap therefore differs by
a factor that tends to n as the target gap decreases (Theorem 1's 2n/(k + 2n) against the
rate 2/(k + 2) of Frank-Wolfe on the one hard block).  The benchmark measures, for several n,
the effective passes (oracle calls / n, gap passes included) to reach gaps tau / n and their
ratio uniform / gap.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from structfw._linalg import SparseVector
from structfw.models.base import StructuredModel
from ._common import bands, crossing, environment, int_list_callback, on_grid, pyplot, write_json

#: losses of the labels: 1, 2 of the hard block, 3 of the easy blocks (label 0 is the truth)
LOSSES = {1: 0.9, 2: 0.7, 3: 1.5}
#: targets on the scaled gap n * g (the hard block's gap is ~0.38 / (n k) after k steps on it)
TARGETS = (3e-2, 1e-2, 3e-3, 1e-3)
ARMS = {"uniform": dict(sampling="uniform"), "gap": dict(sampling="gap", gap_refresh=10),
        "gap-inf": dict(sampling="gap", gap_refresh=None)}


class GapToyModel(StructuredModel):
    """The toy structured model of App. C (as derived in the module docstring).

    x is the example's index i in 0..n-1; a labelling is an int: block 0 takes labels
    {0, 1, 2}, every other block {0, 3}; the ground truth is 0 everywhere.
    phi(x_i, 0) = 0 and phi(x_i, y) = -e_c(i, y), so psi_i(y) = e_c(i, y) with c(0, 1) = 0,
    c(0, 2) = 1 and c(i, 3) = i + 1; Delta(0, y) = `LOSSES`[y].

    Parameters
    ----------
    n : int
        Number of examples (blocks), >= 2; d = n + 1.
    """

    def __init__(self, n):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
            raise ValueError(f"n must be an integer >= 2, got {n!r}")
        self.n = int(n)
        self.size_joint_feature = self.n + 1

    def labels(self, x):
        """The labellings of example x."""
        return (0, 1, 2) if int(x) == 0 else (0, 3)

    def _coord(self, x, y):
        return {1: 0, 2: 1}[int(y)] if int(x) == 0 else int(x) + 1

    def joint_feature(self, x, y):
        v = np.zeros(self.size_joint_feature)
        if int(y) != 0:
            v[self._coord(x, y)] = -1.0
        return v

    def psi(self, x, y_true, y):
        if int(y) == int(y_true):
            return SparseVector.zeros(self.size_joint_feature)
        return SparseVector(np.array([self._coord(x, y)], np.int64), np.array([1.0]), self.size_joint_feature)

    def loss(self, y_true, y):
        return 0.0 if int(y) == int(y_true) else LOSSES[int(y)]

    def loss_augmented_decode(self, x, y_true, w):
        labs = self.labels(x)
        scores = [self.loss(y_true, y) - (0.0 if y == 0 else w[self._coord(x, y)]) for y in labs]
        return labs[int(np.argmax(scores))]

    def decode(self, x, w):
        labs = self.labels(x)
        scores = [0.0 if y == 0 else -w[self._coord(x, y)] for y in labs]
        return labs[int(np.argmax(scores))]

    def label_key(self, y):
        return int(y)

    def check_X(self, X):
        X = list(X)
        for j, x in enumerate(X):
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < self.n:
                raise ValueError(f"X[{j}] must be an example index in 0..{self.n - 1}, got {x!r}")
        return [int(x) for x in X]

    def check_y(self, x, y, name="Y"):
        if isinstance(y, bool) or not isinstance(y, (int, np.integer)) or int(y) not in self.labels(x):
            raise ValueError(f"{name} must be one of {self.labels(x)} for example {x}, got {y!r}")
        return int(y)

    def get_config(self):
        return dict(n=self.n)


def make_gap_toy(n):
    """(model, X, Y, lam) of the toy problem with n blocks; lam = 1/n."""
    model = GapToyModel(n)
    return model, list(range(n)), [0] * n, 1.0 / n


def run_toy(ns=(2, 4, 8, 16, 32, 64), passes=600, seeds=3, out="bench_out/toy_gap_sampling", log=print):
    """Run the arms at every n; write ``toy_gap_sampling.json`` / ``.png`` to ``out``; return the doc.

    Every run stops at the checkpoint where n * gap <= the smallest target (``tol``), or after
    ``passes`` engine passes."""
    from ._common import run_fit

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    doc = dict(benchmark="toy-gap-sampling", figure="Osokin et al. 2016, App. C (derived; see the module docstring)",
               ns=list(ns), passes=int(passes), seeds=int(seeds), targets_scaled=list(TARGETS),
               losses={str(k): v for k, v in LOSSES.items()}, lam="1/n", arms={k: v for k, v in ARMS.items()},
               x_axis="effective passes = oracle calls / n (gap passes of gap sampling included)",
               environment=environment(), results={})
    for n in ns:
        model, X, Y, lam = make_gap_toy(int(n))
        tol = 0.9 * min(TARGETS) / n
        entry = dict(n=int(n), arms={})
        for arm, opts in ARMS.items():
            from structfw import solvers

            runs = []
            for s in range(int(seeds)):
                run, _ = run_fit(model, solvers.BCFW(**opts), X, Y, lam, passes, s, check_every=1, tol=tol)
                c = run["columns"]
                p = np.asarray(c["passes"], float)
                g = np.asarray(c["gap"], float) * n
                runs.append(dict(seed=s, wall_s=run["wall_s"], passes=p.tolist(), scaled_gap=g.tolist(),
                                 stopped=run["stopped"],
                                 passes_to={f"{t:g}": crossing(p, g, t) for t in TARGETS}))
            entry["arms"][arm] = dict(runs=runs, passes_to={f"{t:g}": _med([r["passes_to"][f"{t:g}"] for r in runs])
                                                            for t in TARGETS})
        entry["speedup"] = {arm: {f"{t:g}": _ratio(entry["arms"]["uniform"]["passes_to"][f"{t:g}"],
                                                    entry["arms"][arm]["passes_to"][f"{t:g}"]) for t in TARGETS}
                            for arm in ("gap", "gap-inf")}
        doc["results"][str(n)] = entry
        sp = entry["speedup"]["gap"][f"{min(TARGETS):g}"]
        log(f"[toy] n={n}: speed-up of gap sampling at n*gap={min(TARGETS):g}: "
            f"{'-' if sp is None else format(sp, '.1f')} ({time.perf_counter() - t0:.0f}s)")
    grid = np.arange(0, int(passes) + 1, dtype=float)
    doc["grid_passes"] = grid.tolist()
    for entry in doc["results"].values():
        for a in entry["arms"].values():
            a["scaled_gap_vs_passes"] = bands([on_grid(r["passes"], r["scaled_gap"], grid) for r in a["runs"]])
    doc["wall_s"] = time.perf_counter() - t0
    write_json(out / "toy_gap_sampling.json", doc)
    plot_toy(doc, out / "toy_gap_sampling.png")
    return doc


def _med(vals):
    a = np.asarray([math.nan if v is None else v for v in vals], float)
    return float(np.nanmedian(a)) if np.isfinite(a).all() and a.size else None


def _ratio(a, b):
    return None if a is None or b is None or not b > 0 else a / b


def plot_toy(doc, path):
    from structfw.plotting import plot_bands

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    grid = np.asarray(doc["grid_passes"])
    cmap = plt.get_cmap("viridis")
    ns = doc["ns"]
    for j, n in enumerate(ns):
        e = doc["results"][str(n)]
        color = cmap(j / max(len(ns) - 1, 1))
        for arm, ls in (("uniform", "-"), ("gap", "--")):
            b = e["arms"][arm]["scaled_gap_vs_passes"]
            arr = np.array([[np.nan if v is None else v for v in b[k]] for k in ("min", "median", "max")])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                line = plot_bands(ax, grid[1:], arr[:, 1:], f"n={n} {arm}", color=color)
            line.set_linestyle(ls)
    ax.set_xscale("log")
    ax.set_xlabel("effective passes (oracle calls / n)")
    ax.set_ylabel("n x duality gap")
    ax.set_title("gap against passes: uniform (solid), gap sampling (dashed)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1]
    for t, mk in zip(doc["targets_scaled"], "os^v"):
        for arm, ls in (("gap", "-"), ("gap-inf", ":")):
            sp = [doc["results"][str(n)]["speedup"][arm][f"{t:g}"] for n in ns]
            ax.plot(ns, [np.nan if v is None else v for v in sp], marker=mk, ls=ls,
                    label=f"{arm}, n*gap <= {t:g}")
    ax.plot(ns, ns, color="k", lw=1, label="n (App. C's claim)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("n")
    ax.set_ylabel("passes(uniform) / passes(gap sampling)")
    ax.set_title("measured speed-up against n", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(f"Osokin et al. 2016, App. C (derived toy): one hard block, n - 1 easy ones; lam = 1/n; median and "
                 f"min-max over {doc['seeds']} seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(doc):
    ts = doc["targets_scaled"]
    lines = [f"{'n':>5} " + " ".join(f"{'unif@' + format(t, 'g'):>11} {'gap@' + format(t, 'g'):>10} {'x':>6}"
                                     for t in ts)]
    for n in doc["ns"]:
        e = doc["results"][str(n)]
        cells = []
        for t in ts:
            k = f"{t:g}"
            u, g, s = e["arms"]["uniform"]["passes_to"][k], e["arms"]["gap"]["passes_to"][k], e["speedup"]["gap"][k]
            cells.append(f"{_f(u):>11} {_f(g):>10} {_f(s):>6}")
        lines.append(f"{n:>5} " + " ".join(cells))
    return "\n".join(lines)


def _f(v):
    return "-" if v is None else f"{v:.1f}"


@click.command("toy-gap-sampling")
@click.option("--n", "ns", default="2,4,8,16,32,64", show_default=True, callback=int_list_callback(2),
              help="Numbers of blocks (comma-separated, each >= 2).")
@click.option("--passes", default=600, show_default=True, type=click.IntRange(min=2),
              help="Most engine passes per run (runs stop once n * gap <= the smallest target).")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Random seeds per arm and n.")
@click.option("--out-dir", "--out", "out", default="bench_out/toy_gap_sampling", show_default=True,
              type=click.Path(file_okay=False), help="Writes toy_gap_sampling.json and toy_gap_sampling.png here.")
def bench_toy_gap_sampling(ns, passes, seeds, out):
    """Osokin et al. 2016 App. C: a toy problem where gap sampling is n times faster than uniform."""
    doc = run_toy(ns, passes, seeds, out, log=click.echo)
    click.echo(format_table(doc))
    click.echo(f"wrote {Path(out) / 'toy_gap_sampling.json'} and {Path(out) / 'toy_gap_sampling.png'}")
