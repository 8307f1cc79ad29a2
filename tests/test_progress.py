"""The fit's progress bar moves after every pass, not only at checkpoints (issue 51)."""
import re

import structfw as sf
from structfw.solvers import base


def test_the_bar_moves_every_pass_between_checkpoints(monkeypatch):
    X, Y = sf.datasets.load_ocr("train")
    X, Y = X[:40], Y[:40]
    seen = []
    advance = base.Monitor.advance

    def spy(self, passes):
        advance(self, passes)
        if self._bar is not None:
            seen.append(self._bar.n)

    monkeypatch.setattr(base.Monitor, "advance", spy)
    svm = sf.StructuredSVM(sf.models.ChainModel(26, 128), lam=0.01, max_passes=9, tol=None, check_every=4,
                           verbose=1, random_state=0)
    svm.fit(X, Y)
    # checkpoints after 4 and 8 passes (and the last); the bar stood at every pass in between
    assert seen == [float(k) for k in range(1, 10)]


def test_the_bar_shows_each_pass(capsys):
    X, Y = sf.datasets.load_ocr("train")
    sf.StructuredSVM(sf.models.ChainModel(26, 128), lam=0.01, max_passes=6, tol=None, check_every=6, verbose=1,
                     random_state=0).fit(X[:30], Y[:30])
    err = capsys.readouterr().err
    shown = {float(m) for m in re.findall(r"(\d+\.\d)/6 passes", err)}
    assert {1.0, 2.0, 3.0, 4.0, 5.0} <= shown
