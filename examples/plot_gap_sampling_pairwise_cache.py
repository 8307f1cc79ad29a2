"""
Gap sampling, pairwise steps and the cache (Osokin et al. 2016, Figure 3)
=========================================================================

Duality gap against effective passes (oracle calls / n) on 400 OCR words at lam = 0.01
for plain BCFW and the paper's recommended BCPFW + gap sampling + cache: with the cache,
most block steps need no oracle call, so the gap falls faster per oracle call. The full
8-variant figure: ``structfw bench gaps``.
"""
import matplotlib.pyplot as plt

import structfw as sf

X, Y = sf.datasets.load_ocr("train")
X, Y = X[:400], Y[:400]
model = sf.models.ChainModel(n_states=26, n_features=128)
fig, ax = plt.subplots(figsize=(5, 3.5))
for solver in (sf.solvers.BCFW(), sf.solvers.BCFW(sampling="gap"),
               sf.solvers.BCFW(step="pairwise", sampling="gap", cache=True)):
    svm = sf.StructuredSVM(model, solver=solver, lam=0.01, max_passes=15, tol=None,
                           check_every=1, random_state=0).fit(X, Y)
    ax.semilogy(svm.trace_["passes"], svm.trace_["gap"], marker=".", label=solver.label)
ax.set_xlabel("effective passes (oracle calls / n)")
ax.set_ylabel("duality gap")
ax.legend()
fig.tight_layout()
