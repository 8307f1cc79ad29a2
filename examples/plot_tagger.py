"""
A named-entity tagger from raw tokens
=====================================

Tokens in, tags out: `structfw.features.make_tagger` chains a `SequenceVectorizer`
(features of each token from templates: the word, its affixes and shape, its neighbours,
hashed into 2**16 columns) and a `StructuredSVM` over a `ChainModel`, in one
scikit-learn pipeline. It is fitted on the Japanese named-entity corpus that the
``hironsancorpus`` package ships (``pip install "structfw[text]"``; IOB2 tags such as
``B-LOC``/``I-LOC``, the corpus's own 450/50 split of its 500 sentences), scored by
token accuracy and chunk F1 on the test sentences, and then tags a new sentence. The
corpus's tokens are morphemes; the new sentence is written with a space between its
morphemes and split on them.
"""
import matplotlib.pyplot as plt
import numpy as np

import structfw as sf
from structfw.features import make_tagger

X_train, Y_train = sf.datasets.load_tagged_corpus("train")
X_test, Y_test = sf.datasets.load_tagged_corpus("test")
tags = sorted(set(np.concatenate(Y_train).tolist()))
print(f"{len(X_train)} training sentences, {sum(map(len, X_train))} tokens, "
      f"{len(tags)} tags: {tags}")

tagger = make_tagger(n_states=len(tags), lam=1e-3, n_features=2 ** 16, max_passes=30,
                     tol=None, random_state=0)
tagger.fit(X_train, Y_train)

Y_pred = tagger.predict(X_test)
print(f"test token accuracy {sf.metrics.token_accuracy(Y_test, Y_pred):.3f}, "
      f"entity span F1 {sf.metrics.span_f1(Y_test, Y_pred, scheme='IOB2'):.3f}")

# %%
# A new sentence ("In April 2010 an international conference was held in Tokyo by the
# United Nations."), tagged token by token; the entities are read back from the tags
# with `structfw.metrics.tag_spans`.
sentence = ("2010 年 4 月 、 国際 連合 に よる "
            "国際 会議 が 東京 で 開か れ た 。").split()
predicted = tagger.predict([sentence])[0]
print(" ".join(f"{w}/{t}" for w, t in zip(sentence, predicted)))
for kind, start, end in sf.metrics.tag_spans(predicted, "IOB2"):
    print(f"  {kind}: {''.join(sentence[start:end])}")

# %%
# The duality gap over the passes: the certificate of how far the fit is from the
# optimum of its objective.
svm = tagger.named_steps["svm"]
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(svm.trace_["passes"], svm.trace_["gap"], "o-")
ax.set_xlabel("effective passes")
ax.set_ylabel("duality gap")
ax.set_title(f"BCFW, lam = {svm.lam:g}, d = {svm.model.size_joint_feature:,}")
fig.tight_layout()
