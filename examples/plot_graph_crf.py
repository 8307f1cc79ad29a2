"""
A graph CRF on superpixel adjacency graphs, with a certified duality gap
========================================================================

`GraphModel` with a learned Potts term on the region adjacency graphs of the
``seg-graph`` task (SLIC superpixels of generated scene images, 6 classes), on a slice
of 12 training and 10 test images. The graphs have cycles, so the max oracle is TRW-S,
which is approximate: the gap computed from its labellings (the oracle gap) is only a
lower bound of the true gap, while TRW-S's bound gives the certified gap, an upper bound
of the primal suboptimality. The same model on the same graphs without their edges
(unary terms only) is the baseline. The full task: ``structfw train --data seg-graph``
and ``structfw bench graph-task``.
"""
import matplotlib.pyplot as plt

import structfw as sf
from structfw.datasets import load_superpixel_graphs, without_edges
from structfw.metrics import token_accuracy

X, Y, make_model = load_superpixel_graphs("seg-graph", "train", n_images=12)
Xt, Yt, _ = load_superpixel_graphs("seg-graph", "test", n_images=10)
print(f"{len(X)} graphs, {X[0][0].shape[0]} superpixels and {len(X[0][1])} adjacencies "
      "in the first")

lam = 1.0 / len(X)
crf = sf.StructuredSVM(make_model(), lam=lam, max_passes=20, tol=None, check_every=1,
                       random_state=0)
crf.fit(X, Y)
unary = sf.StructuredSVM(make_model(), lam=lam, max_passes=20, tol=None, random_state=0)
unary.fit(without_edges(X), Y)
print(f"test accuracy with pairwise terms: {token_accuracy(Yt, crf.predict(Xt)):.3f}, "
      f"without: {token_accuracy(Yt, unary.predict(without_edges(Xt))):.3f}")

tr = crf.trace_
print(f"after {tr['passes'][-1]:.0f} passes: oracle gap {tr['gap'][-1]:.2e}, "
      f"certified gap {tr['certified_gap'][-1]:.2e}")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(tr["passes"], tr["certified_gap"], "-o", ms=3,
            label="certified gap (TRW-S bound)")
ax.semilogy(tr["passes"], tr["gap"], ":s", ms=3, label="oracle gap (a lower bound)")
ax.set_xlabel("passes")
ax.set_ylabel("duality gap")
ax.set_title(f"GraphModel, Potts, lam = {lam:.3g}", fontsize=9)
ax.legend()
fig.tight_layout()
