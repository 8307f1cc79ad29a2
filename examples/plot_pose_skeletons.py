"""
Pose estimation with a tree of parts: predicted skeletons against the truth
===========================================================================

`PoseModel` is a pictorial structure (the pose model of Osokin et al. 2016, after Chen &
Yuille 2014): 14 body joints on a 60 x 60 grid of candidate positions, one linear part
filter per joint over the HOG blocks around it, and quadratic springs between the joints
of LSP's skeleton tree whose quadratic weights the solver keeps non-negative, so that
the max oracle is exact max-product with generalized distance transforms (a few ms per
call).

A small fit for the documentation build: 40 training images of `load_pose`'s synthetic
stick figures (generated and cached on first use), BCFW with pairwise steps, gap
sampling and the cache (the paper's recommendation for costly oracles), then the
predicted skeletons on test images (solid) next to the truth (dashed).  Trained on 40
images only, the estimator is much weaker than the converged fits of
docs/results/pose.md (the full task: ``structfw train --data pose`` and
``structfw bench pose-oracle --fit-train 200``).
"""
import matplotlib.pyplot as plt
import numpy as np

import structfw as sf
from structfw.datasets import load_pose
from structfw.datasets.pose import STICKS, pck, pcp, pose_image, to_pixels
from structfw.solvers import BCFW

n_train, n_test = 40, 6
tr, te = load_pose("train", n=n_train), load_pose("test", n=n_test)
model = tr.make_model()
print(f"{n_train} training images; d = {model.size_joint_feature} weights, "
      f"{model.nonnegative_indices.size} of them kept >= 0")

# lam = 0.1: the better test PCP of the two values that docs/results/pose.md tried (on
# 200 images)
svm = sf.StructuredSVM(model, solver=BCFW(step="pairwise", sampling="gap", cache=True),
                       lam=0.1, max_passes=15, tol=None, check_every=5, random_state=0)
svm.fit(tr.X, tr.Y)
pred = svm.predict(te.X)
print(f"duality gap {svm.gap_:.3f} after {svm.trace_['passes'][-1]:.0f} effective "
      f"passes; test PCP {pcp(te.Y, pred):.2f}, PCK {pck(te.Y, pred):.2f} "
      f"on {n_test} images")

fig, axes = plt.subplots(2, 3, figsize=(9, 6.2))
for i, ax in enumerate(axes.ravel()):
    img, y_true = pose_image("test", i)
    ax.imshow(img)
    for y, style, colour in ((y_true, "--", "white"), (pred[i], "-", "red")):
        px = to_pixels(y)
        for a, b in STICKS:
            ax.plot(px[[a, b], 1], px[[a, b], 0], style, color=colour, lw=2)
        ax.plot(px[:, 1], px[:, 0], "o", color=colour, ms=3)
    ok = pcp([y_true], [pred[i]])
    ax.set_title(f"test image {i}: PCP {ok:.2f}", fontsize=9)
    ax.set_axis_off()
fig.suptitle("PoseModel: prediction (red) and truth (white, dashed)", fontsize=10)
fig.tight_layout()
plt.show()
