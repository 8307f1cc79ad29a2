"""
The eps-approximate regularisation path (Osokin et al. 2016, Sec. 4)
====================================================================

Breakpoints lam_1 > lam_2 > ... with one w per piece whose duality gap is at most eps on
the whole interval, on 150 OCR words with eps = 0.2. The full comparison with grid
search (Figure 4): ``structfw bench path``.
"""
import matplotlib.pyplot as plt

import structfw as sf

X, Y = sf.datasets.load_ocr("train")
X, Y = X[:150], Y[:150]
model = sf.models.ChainModel(n_states=26, n_features=128)
path = sf.regularization_path(model, X, Y, eps=0.2, kappa=0.5, min_lam=1e-3,
                              random_state=0)
print(f"{len(path)} breakpoints, valid down to lam = {path.lam_end:.3g} "
      f"({path.status})")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(path.breakpoints, path.gaps, "o-")
ax.axhline(0.2, color="gray", ls="--", label="eps")
ax.set_xlabel("lambda (breakpoints)")
ax.set_ylabel("duality gap at the breakpoint")
ax.legend()
fig.tight_layout()
