"""One bar over a command's fits (structfw._progress): every fit reports to it, it moves per pass,
it counts finished fits against the plan, and the bench group installs it."""
import io
import re

import numpy as np
import pytest

from structfw import StructuredSVM, _progress
from structfw.models import MulticlassModel


def _data(n=30, d=4, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = rng.integers(k, size=n)
    return list(X), list(Y), MulticlassModel(k, d)


class Recorder(_progress.FitsBar):
    """A bar that keeps every report (and still draws, to a string)."""

    def __init__(self, **kw):
        super().__init__("test", file=io.StringIO(), disable=False, mininterval=0.0, **kw)
        self.events = []

    def started(self, label, max_passes):
        key = super().started(label, max_passes)
        self.events.append(("started", key, label, max_passes))
        return key

    def advanced(self, key, passes):
        super().advanced(key, passes)
        self.events.append(("advanced", key, passes))

    def recorded(self, key, passes, gap):
        super().recorded(key, passes, gap)
        self.events.append(("recorded", key, passes, gap))

    def ended(self, key):
        super().ended(key)
        self.events.append(("ended", key))


def test_every_fit_reports_each_pass_and_its_end():
    X, Y, model = _data()
    bar = Recorder()
    with _progress.listening(bar):
        for seed in range(2):
            StructuredSVM(model, lam=0.1, max_passes=5, tol=None, check_every=5, random_state=seed).fit(X, Y)
    assert _progress.listener() is None  # the previous listener (none) is back
    kinds = [e[0] for e in bar.events]
    assert kinds.count("started") == 2 and kinds.count("ended") == 2
    first = [e for e in bar.events if e[1] == 0]
    advanced = [e[2] for e in first if e[0] == "advanced"]
    # per pass, not per checkpoint (checkpoints every 5 passes here)
    assert advanced == [1, 2, 3, 4, 5]
    assert first[0][3] == 5.0 and first[-1][0] == "ended"
    assert bar.finished == 2
    assert re.search(r"2 fits", bar.file.getvalue())


def test_plan_gives_a_total_and_the_fit_in_flight_is_shown():
    bar = _progress.FitsBar("bench x", file=io.StringIO(), disable=False, mininterval=0.0)
    bar.plan(3)
    key = bar.started("BCFW", 10)
    bar.advanced(key, 2)
    bar.recorded(key, 2, 0.125)
    text = bar.file.getvalue()
    assert "0/3" in text and "BCFW pass 2/10 gap 0.125" in text and "left)" in text
    bar.ended(key)
    assert "1/3" in bar.file.getvalue()
    bar.close()


def test_a_fit_that_fails_mid_solve_still_ends_on_the_bar(monkeypatch):
    from structfw.solvers.bcfw import BCFW

    X, Y, model = _data()

    def broken_pass(self, ctx, flag):
        raise RuntimeError("oracle failed")

    monkeypatch.setattr(BCFW, "run_pass", broken_pass)
    bar = Recorder()
    with _progress.listening(bar), pytest.raises(RuntimeError, match="oracle failed"):
        StructuredSVM(model, lam=0.1, max_passes=3).fit(X, Y)
    kinds = [e[0] for e in bar.events]
    assert kinds.count("started") == 1 and kinds.count("ended") == 1
    assert bar.finished == 1


def test_no_listener_no_reports():
    X, Y, model = _data()
    assert _progress.listener() is None
    StructuredSVM(model, lam=0.1, max_passes=2).fit(X, Y)  # nothing to report to: runs as before


def test_the_kernel_svm_reports_too():
    from structfw.svm import FrankWolfeSVC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    bar = Recorder()
    with _progress.listening(bar):
        FrankWolfeSVC(C=1.0, max_iter=5000).fit(X, y)
    kinds = [e[0] for e in bar.events]
    assert kinds[0] == "started" and kinds[-1] == "ended" and "advanced" in kinds


def test_the_bench_group_listens_while_its_command_runs(monkeypatch):
    import click
    from click.testing import CliRunner

    from structfw import cli

    seen = []

    @click.command()
    def probe():
        seen.append(_progress.listener())

    monkeypatch.setitem(cli.bench.commands, "probe", probe)
    result = CliRunner().invoke(cli.main, ["bench", "probe"])
    assert result.exit_code == 0, result.output
    assert isinstance(seen[0], _progress.FitsBar) and seen[0].desc == "bench probe"
    assert _progress.listener() is None
