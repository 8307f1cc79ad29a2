"""The segmentation tasks' test accuracy with and without the learned pairwise terms, and the
cost of one oracle call.

    python scripts/segmentation_accuracy.py [--passes 20]

For seg-binary (GraphCutModel, exact min cut, lam = 1e-2) and seg-multi (PottsModel,
alpha expansion, lam = 1e-3): BCFW for ``--passes`` passes on the training images, once with
the graphs' edges and once with every edge removed (the unary-only model: the same node
features, no pairwise term), then 1 - mean normalised Hamming loss on the test images.  The
oracle cost is the median over the training images of one loss-augmented decoding at the
learned w (after one warm-up call, so compilation is not counted).
"""
import argparse
import time

import numpy as np

import structfw as sf

TASKS = (("seg-binary", 1e-2), ("seg-multi", 1e-3))


def strip_edges(X):
    """The same inputs with no edges: a model with no pairwise term."""
    return [(nodes, edges[:0], edge_features[:0]) for nodes, edges, edge_features in X]


def oracle_ms(model, X, Y, w):
    X, Y = model.check_data(X, Y)
    model.loss_augmented_decode(X[0], Y[0], w)
    times = []
    for x, y in zip(X, Y):
        t0 = time.perf_counter()
        model.loss_augmented_decode(x, y, w)
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=20)
    args = ap.parse_args()
    for name, lam in TASKS:
        X, Y, make_model = sf.datasets.load_segmentation(name, "train")
        Xt, Yt, _ = sf.datasets.load_segmentation(name, "test")
        fit = lambda X_: sf.StructuredSVM(make_model(), lam=lam, max_passes=args.passes, tol=None,  # noqa: E731
                                          random_state=0).fit(X_, Y)
        full, unary = fit(X), fit(strip_edges(X))
        print(f"{name}: test accuracy {full.score(Xt, Yt):.3f} with the pairwise terms, "
              f"{unary.score(strip_edges(Xt), Yt):.3f} unary-only; "
              f"{oracle_ms(full.model, X, Y, full.coef_):.2f} ms per oracle call (n = {len(X)}, lam = {lam:g})")


if __name__ == "__main__":
    main()
