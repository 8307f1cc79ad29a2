"""Why the graph guide's recipe stalls on the snakes grids, and what shrinks which part of the gap.

    python scripts/graph_stalled_gap.py [--n 200] [--only NAME ...]

The snakes grids (`structfw.datasets.load_snakes`, 200 training and 100 test grids of about
6 x 6 cells, 11 labels) as `GraphModel` examples: one node per cell with its one-hot colour
features (`snakes_one_hot`), the 4-neighbour edges with the edge features (1, 0) horizontal
and (0, 1) vertical, ``pairwise="full"`` (the snake runs from head to tail, so the pairs are
directed), ``inference="auto"`` (TRW-S: the grids have cycles).  Each row is one fit, ending
at the recipe's tol = 0.01 or its passes, and reports at the returned w (`StructuredSVM.gap_split`):

- ``certified``: the certified gap P_up(w) - D(alpha), an upper bound of the true gap;
- ``oracle``: the oracle's gap P(w) - D(alpha) from its labellings, a lower bound of it;
- ``loose``: P_up(w) - P(w), the relaxation's looseness (sum of bound_i - hinge_i, / n);
- ``progress``: P(w) - D(alpha), the solver's part (``oracle`` itself), and ``dual``, D(alpha);
- ``loose_ex``: the examples whose bound is above their labelling's hinge;
- the passes, the time of the fit, that of `gap_split` (two passes of the oracle and its bound) and the
  test accuracy (`structfw.metrics.token_accuracy`).

The row ``lp-bound`` is the recipe's fit again, with the LP relaxation (exact LP bound)
certifying its w in place of TRW-S: no refit.  The ``binary-*`` rows are the two-label task
(snake against background) with Potts weights kept >= 0, where "auto" takes QPBO, exact.
"""
import argparse
import time

import numpy as np

import structfw as sf
from structfw.datasets import load_snakes, snakes_one_hot
from structfw.metrics import token_accuracy
from structfw.models import GraphModel

N_STATES = 11


def snakes_graphs(split, n=None):
    """The snakes grids of ``split`` as `GraphModel` inputs (x, y): nodes row-major, horizontal
    edges (edge feature (1, 0)) then vertical ones ((0, 1))."""
    X, Y = load_snakes(split)
    X, Y = snakes_one_hot(X[:n]), Y[:n]
    graphs = []
    for x in X:
        h, w, F = x.shape
        cell = np.arange(h * w).reshape(h, w)
        horizontal = np.stack([cell[:, :-1].ravel(), cell[:, 1:].ravel()], 1)
        vertical = np.stack([cell[:-1, :].ravel(), cell[1:, :].ravel()], 1)
        edge_features = np.zeros((len(horizontal) + len(vertical), 2))
        edge_features[:len(horizontal), 0] = 1.0
        edge_features[len(horizontal):, 1] = 1.0
        graphs.append((x.reshape(h * w, F), np.concatenate([horizontal, vertical]), edge_features))
    return graphs, [y.ravel() for y in Y]


def normalised(X):
    """Node and edge features divided by the graph's node count V, as `load_superpixel_graphs` gives
    them: phi then sums to O(1) like the normalised Hamming loss (features scaled by c are the
    problem at lam / c^2, so this is lam about V^2 times larger)."""
    return [(nodes / len(nodes), edges, edge_features / len(nodes)) for nodes, edges, edge_features in X]


def multi_label(n_features, **model):
    return GraphModel(N_STATES, n_features, 2, pairwise="full", **model)


def binary(n_features, **model):
    # Potts weights >= 0 on edge features >= 0: an attractive, submodular binary energy
    return GraphModel(2, n_features, 2, pairwise="potts", nonnegative_pairwise=True, **model)


#: name -> (model factory, model options, binary labels?, estimator options beyond the recipe's)
RUNS = {
    "recipe": (multi_label, {}, False, {}),
    "trws-1000it": (multi_label, {"inference_options": {"trws": {"max_iter": 1000, "tol": 1e-9}}}, False, {}),
    "trws-3it": (multi_label, {"inference_options": {"trws": {"max_iter": 3}}}, False, {}),
    "lp-bound": (multi_label, {}, False, {}),
    "bcfw": (multi_label, {}, False, {"solver": "bcfw"}),
    "averaged": (multi_label, {}, False, {"solver": sf.solvers.MPBCFW(averaging="weighted")}),
    "500-passes": (multi_label, {}, False, {"max_passes": 500, "check_every": 10}),
    "lam-x10": (multi_label, {}, False, {"lam_factor": 10.0}),
    "lam-x100": (multi_label, {}, False, {"lam_factor": 100.0}),
    "features/V": (multi_label, {}, False, {"normalise": True}),
    "binary-qpbo": (binary, {}, True, {}),
    "binary-trws": (binary, {"inference": "trws"}, True, {}),
}


#: (key, width, format) of the printed table's columns
COLUMNS = (("run", 12, ""), ("passes", 6, ".0f"), ("time_s", 7, ".1f"), ("split_s", 7, ".1f"),
           ("certified", 9, ".4f"), ("oracle", 8, ".4f"), ("loose", 9, ".2e"), ("progress", 8, ".4f"),
           ("dual", 7, ".4f"), ("loose_ex", 8, "d"), ("accuracy", 8, ".3f"))


def fit(name, X, Y):
    """The recipe of docs/guide/graphs.md (MP-BCFW, lam = 1/n, tol = 0.01, a checkpoint every
    pass, the default 50 passes) with the row's changes."""
    make, model_options, _, options = RUNS[name]
    options = dict(options)
    lam = options.pop("lam_factor", 1.0) / len(X)
    if options.pop("normalise", False):
        X = normalised(X)
    settings = dict(solver=sf.solvers.MPBCFW(), lam=lam, tol=0.01, check_every=1, random_state=0)
    settings.update(options)
    svm = sf.StructuredSVM(make(X[0][0].shape[1], **model_options), **settings)
    t0 = time.perf_counter()
    svm.fit(X, Y)
    return svm, time.perf_counter() - t0


def row(name, svm, seconds, X, Y, Xt, Yt):
    if RUNS[name][3].get("normalise"):
        X, Xt = normalised(X), normalised(Xt)
    if name == "lp-bound":
        svm.model.inference = "lp"  # the same w, certified by the LP's bound
    t0 = time.perf_counter()
    split = svm.gap_split(X, Y)
    split_s = time.perf_counter() - t0
    accuracy = token_accuracy(Yt, svm.predict(Xt))
    return dict(run=name, passes=float(svm.n_iter_), time_s=seconds, split_s=split_s, certified=split.certified_gap,
                oracle=svm.gap_, loose=split.looseness, progress=split.progress, dual=split.dual,
                loose_ex=int(np.count_nonzero(split.example_looseness > 1e-9)), accuracy=accuracy)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="training grids (of 200)")
    ap.add_argument("--only", nargs="*", choices=sorted(RUNS), help="run these rows only")
    args = ap.parse_args()
    data = {}
    for is_binary in (False, True):
        X, Y = snakes_graphs("train", args.n)
        Xt, Yt = snakes_graphs("test")
        if is_binary:  # the snake against the background
            Y, Yt = [(y > 0).astype(np.int64) for y in Y], [(y > 0).astype(np.int64) for y in Yt]
        data[is_binary] = X, Y, Xt, Yt
    print(" ".join(f"{key:>{width}}" if key != "run" else f"{key:<{width}}" for key, width, _ in COLUMNS))
    fitted = {}
    for name in args.only or RUNS:
        X, Y, Xt, Yt = data[RUNS[name][2]]
        if name == "lp-bound" and "recipe" in fitted:
            svm, seconds = fitted["recipe"]  # no refit: only the certificate changes
        else:
            svm, seconds = fitted[name] = fit(name, X, Y)
        r = row(name, svm, seconds, X, Y, Xt, Yt)
        print(" ".join(f"{r[key]:{'<' if key == 'run' else '>'}{width}{form}}" for key, width, form in COLUMNS),
              flush=True)


if __name__ == "__main__":
    main()
