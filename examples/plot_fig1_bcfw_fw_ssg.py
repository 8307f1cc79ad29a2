"""
BCFW against FW and SSG (BCFW paper, Figure 1)
==============================================

Primal suboptimality against effective passes on 400 OCR words at lam = 0.01:
block-coordinate Frank-Wolfe (with and without weighted averaging) makes progress from
its first pass, batch Frank-Wolfe needs a pass per step, and the stochastic subgradient
method trails both (Lacoste-Julien et al. 2013, Fig. 1). The full-size figure:
``structfw bench fig1``.
"""
import matplotlib.pyplot as plt
import numpy as np

import structfw as sf

X, Y = sf.datasets.load_ocr("train")
X, Y = X[:400], Y[:400]
model = sf.models.ChainModel(n_states=26, n_features=128)
runs = {
    "BCFW": sf.solvers.BCFW(),
    "BCFW-wavg": sf.solvers.BCFW(averaging="weighted"),
    "FW": sf.solvers.FW(),
    "SSG-wavg": sf.solvers.SSG(averaging="weighted"),
}
traces = {}
for name, solver in runs.items():
    svm = sf.StructuredSVM(model, solver=solver, lam=0.01, max_passes=15, tol=None,
                           check_every=1, random_state=0).fit(X, Y)
    traces[name] = svm.trace_
# a reference optimum: the best dual value any run reached, after a longer BCPFW-gap run
ref = sf.StructuredSVM(model, solver=sf.solvers.BCFW(step="pairwise", sampling="gap"),
                       lam=0.01, max_passes=60, tol=1e-6, random_state=0).fit(X, Y)
# (SSG has no dual: its trace's dual column is NaN throughout and takes no part)
duals = [ref.trace_["dual"]] + [t["dual"] for t in traces.values()
                                 if np.isfinite(t["dual"]).any()]
d_best = max(np.nanmax(d) for d in duals)

fig, ax = plt.subplots(figsize=(5, 3.5))
for name, tr in traces.items():
    after = tr["passes"] > 0  # log axes: from the first pass on
    ax.loglog(tr["passes"][after], tr["primal"][after] - d_best, marker=".", label=name)
ax.set_xlabel("effective passes")
ax.set_ylabel("primal suboptimality (upper bound)")
ax.legend()
ax.set_title("OCR, 400 words, lam = 0.01")
fig.tight_layout()
