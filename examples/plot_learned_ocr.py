"""
Learned features: a CNN under a max-margin chain layer, its last layer certified
================================================================================

structfw's chain inference as a PyTorch layer (``pip install "structfw[torch]"``): a
small convolutional network scores each 16x8 letter image of the bundled OCR words for
the 26 tags, and `structfw.torch.MaxMarginChain` puts the structured hinge of a linear
chain on top (its transitions are a parameter of the layer; the oracle is structfw's
compiled loss-augmented Viterbi, on the CPU).  After training, the network's penultimate
features are frozen and its last linear layer (unary weights and transitions) is
refitted by BCFW with `structfw.torch.fit_last_layer`: the fit's duality gap certifies
that layer, which a network trained by gradient steps cannot say of its own.  A small
subset and three epochs keep this example under a minute; `structfw bench learned` runs
the full comparison (see Results).
"""
import matplotlib.pyplot as plt
import numpy as np
import torch

import structfw as sf
import structfw.torch as sft

torch.manual_seed(0)
rng = np.random.default_rng(0)
X, Y = sf.datasets.load_ocr("train")
Xt, Yt = sf.datasets.load_ocr("test")
train = rng.choice(len(X), 600, replace=False)
X, Y, Xt, Yt = [X[i] for i in train], [Y[i] for i in train], Xt[:200], Yt[:200]
print(f"{len(X)} training words ({sum(map(len, Y))} letters), {len(Xt)} test words")


def as_batch(words, tags):
    """Letter images (N, 1, 16, 8), padded tags (B, T) and mask of a list of words."""
    lengths = torch.tensor([len(y) for y in tags])
    mask = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
    padded = torch.zeros(mask.shape, dtype=torch.int64)
    padded[mask] = torch.as_tensor(np.concatenate(tags))
    images = torch.as_tensor(np.concatenate(words), dtype=torch.float32)
    images = images.reshape(-1, 1, 16, 8)
    return images, padded, mask


def emissions(scores, mask):
    """(B, T, 26) from the (N, 26) scores of a batch's letters, in the mask's order."""
    out = scores.new_zeros(mask.shape + (26,))
    out[mask] = scores
    return out


# %%
# The network: two conv layers and one hidden layer (the features), then a bias-free
# linear layer to the 26 unaries, i.e. exactly a `ChainModel`'s unary weights over the
# features.
features = torch.nn.Sequential(
    torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(32 * 8, 128), torch.nn.ReLU())
head = torch.nn.Linear(128, 26, bias=False)
layer = sft.MaxMarginChain(26)
opt = torch.optim.Adam(
    [*features.parameters(), *head.parameters(), *layer.parameters()], lr=3e-3)
test_images, _, test_mask = as_batch(Xt, Yt)


def test_letter_error():
    with torch.no_grad():
        scores = emissions(head(features(test_images)), test_mask)
        paths = layer.decode(scores, test_mask)
    return np.concatenate([np.asarray(p) != y for p, y in zip(paths, Yt)]).mean()


errors = []
for epoch in range(3):
    for idx in np.array_split(rng.permutation(len(X)), len(X) // 16):
        images, tags, mask = as_batch([X[i] for i in idx], [Y[i] for i in idx])
        # the mean structured hinge of the batch
        loss = layer(emissions(head(features(images)), mask), tags, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
    errors.append(test_letter_error())
    print(f"epoch {epoch + 1}: hinge {loss.item():.3f}, "
          f"test letter error {errors[-1]:.3f}")

# %%
# The last-layer certificate: the features of every training word, frozen, and the last
# layer refitted by BCFW on them (``bias=False``: the same form as ``head``).  The
# refit's dual value bounds the primal of *every* last layer on these features from
# below, the network's own included, so ``primal(network) - dual`` bounds how far the
# trained layer is from the best one.
with torch.no_grad():
    F = [features(as_batch([x], [y])[0]) for x, y in zip(X, Y)]
    Ft = [features(as_batch([x], [y])[0]) for x, y in zip(Xt, Yt)]
lam = 1e-2
svm = sft.fit_last_layer(F, Y, n_states=26, lam=lam, bias=False, max_passes=40,
                         tol=None, random_state=0)
refit_error = np.concatenate([p != y for p, y in zip(svm.predict(Ft), Yt)]).mean()
with torch.no_grad():
    hinges = [sft.chain_hinge(f @ head.weight.T, layer.transitions, torch.as_tensor(y))
              for f, y in zip(F, Y)]
    squared_norm = float((head.weight ** 2).sum() + (layer.transitions ** 2).sum())
    net_primal = lam / 2 * squared_norm + float(np.mean(hinges))
print(f"refit: test letter error {refit_error:.3f}, duality gap {svm.gap_:.2e} "
      f"(primal {svm.primal_:.4f}, dual {svm.dual_:.4f})")
print(f"the network's own last layer: primal {net_primal:.4f}, "
      f"at most {net_primal - svm.dual_:.4f} above the best")

fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.5))
ax.plot(range(1, len(errors) + 1), errors, "o-", label="CNN + MaxMarginChain")
ax.axhline(refit_error, color="k", ls=":", label="last layer refitted (BCFW)")
ax.set_xticks(range(1, len(errors) + 1))
ax.set_xlabel("epoch")
ax.set_ylabel("test letter error")
ax.legend()
bx.semilogy(svm.trace_["passes"], svm.trace_["gap"], "o-")
bx.set_xlabel("BCFW passes on the frozen features")
bx.set_ylabel("duality gap of the last layer")
fig.tight_layout()
