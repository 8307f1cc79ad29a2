"""Convergence and regularisation-path figures (needs matplotlib: ``pip install structfw[plot]``)."""
from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from .trace import Trace


def _plt() -> ModuleType:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'structfw[plot]'") from exc
    return plt


def plot_convergence(traces: Trace | list[Trace] | tuple[Trace, ...], path: str | os.PathLike[str] | None = None,
                     x: str = "passes", title: str | None = None, labels: list[str] | None = None) -> Figure:
    """Duality gap, primal and (if recorded) test loss against ``x`` for one or more traces.

    Parameters
    ----------
    traces : Trace or list of Trace
    path : str or None
        Write a PNG there when given.
    x : {"passes", "engine_passes", "time_s", "oracle_calls"}
        The x-axis: ``passes`` are effective passes (all oracle calls / n, the papers'
        x-axis and the ``oracle/n`` column of the CLI's table), ``engine_passes`` the
        solver's own passes (what ``max_passes`` counts, the table's ``pass`` column).
        They differ for gap sampling and the cache; the axis label then also names the
        last checkpoint's solver pass.  Every checkpoint is drawn as a marker: with
        ``check_every="auto"`` there are few of them.
    labels : list of str, optional
        Legend entries (default: each trace's ``meta["solver"]``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    if not isinstance(traces, (list, tuple)):
        traces = [traces]
    labels = labels or [t.meta.get("solver", f"run {k}") for k, t in enumerate(traces)]
    has_test = any("test_loss" in t for t in traces)
    ncol = 3 if has_test else 2
    fig, axes = plt.subplots(1, ncol, figsize=(5 * ncol, 4))
    style = dict(marker="o", markersize=3)
    for tr, lab in zip(traces, labels):
        xs = tr[x]
        gap = tr["gap"]
        if np.isfinite(gap).any():
            axes[0].semilogy(xs, np.maximum(gap, 1e-16), label=lab, **style)
        else:  # SSG: no dual, no gap; keep the legend entry
            axes[0].plot([], [], label=f"{lab} (no duality gap)", **style)
        axes[1].plot(xs, tr["primal"], label=lab, **style)
        if has_test and "test_loss" in tr:
            axes[2].plot(xs, tr["test_loss"], label=lab, **style)
    xlabel = {"passes": "effective passes (oracle calls / n)", "engine_passes": "solver passes",
              "time_s": "time (s)", "oracle_calls": "oracle calls"}.get(x, x)
    if x == "passes" and len(traces) == 1 and "engine_passes" in traces[0] and len(traces[0]):
        eff, eng = traces[0].last("passes"), traces[0].last("engine_passes")
        if np.isfinite(eng) and abs(eff - eng) > 1e-9:
            xlabel += f"; last point = solver pass {eng:g}"
    axes[0].set_ylabel("duality gap")
    axes[1].set_ylabel("primal P(w)")
    axes[1].set_yscale("log")
    if has_test:
        axes[2].set_ylabel("test loss")
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def plot_bands(ax: Axes, x: npt.ArrayLike, runs: npt.ArrayLike, label: str, color: str | None = None,
               log: bool = True) -> Line2D:
    """Median line and min-max band over runs (rows of ``runs``) on ``ax``."""
    runs = np.asarray(runs, float)
    med = np.nanmedian(runs, axis=0)
    lo, hi = np.nanmin(runs, axis=0), np.nanmax(runs, axis=0)
    line, = ax.plot(x, med, label=label, color=color)
    ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color())
    if log:
        ax.set_yscale("log")
    return line
