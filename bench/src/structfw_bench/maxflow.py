"""Max-flow back-ends on graph-cut energies: time per minimum cut, energy reached, the GIL.

Used by ``structfw bench maxflow``; the measurements quoted in `structfw.oracles.maxflow`
and in the models guide come from it.

* Instances: 4-connected s x s grids (``sizes``, 100 and 150 by default) with the unaries of
  a noisy disc image and contrast-sensitive Potts weights (`grid_instance`), and, when
  scikit-image is installed, region adjacency graphs of 400 and 1,500 SLIC superpixels of
  `structfw.datasets.make_stanford_like` images
  (`structfw.datasets.segmentation._benchmark_graphs`).
* Per instance and back-end (`structfw.oracles.maxflow.available_backends`): the median
  seconds per `min_cut` call over ``repeats`` calls after a warm-up call (numba
  compilation excluded; the time includes the Python wrapper), the energy reached and its
  relative difference from the numba kernel's energy (the integer back-ends round the
  capacities, so they may differ by about 1e-9 relative).
* GIL: on the largest grid, the time of 2 threads x ``gil_calls`` calls over that of
  2 x ``gil_calls`` serial calls (0.5: the back-end releases the GIL and two cores run it
  in parallel; 1.0: serialised).  ``gil_calls=0`` skips it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ._common import environment, pyplot, write_json

SIZES = (100, 150)


def grid_instance(h, wd, seed):
    """A 4-connected h x wd grid energy: unaries of a noisy disc image, contrast-sensitive Potts.

    Parameters
    ----------
    h, wd : int
        Rows and columns of the grid.
    seed : int
        Seed of the image noise.

    Returns
    -------
    cost0, cost1 : (h * wd,) float64
        Unary costs of labels 0 and 1.
    edges : (E, 2) int64
        The grid's horizontal and vertical neighbour pairs.
    weights : (E,) float64
        Potts weights, larger between pixels of similar intensity.
    """
    rng = np.random.default_rng(seed)
    ii, jj = np.mgrid[0:h, 0:wd]
    img = (((ii - h / 2) ** 2 + (jj - wd / 2) ** 2) < (min(h, wd) / 3) ** 2).astype(float)
    img = img + 0.6 * rng.standard_normal((h, wd))
    idx = np.arange(h * wd).reshape(h, wd)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)])
    flat = img.ravel()
    wts = 0.5 * np.exp(-2.0 * np.abs(flat[edges[:, 0]] - flat[edges[:, 1]]))
    return flat ** 2, (1.0 - flat) ** 2, edges, wts


def instances(sizes=SIZES, slic=True, seed=0, log=print):
    """The benchmark's (name, (cost0, cost1, edges, weights)) instances (module docstring).

    The SLIC graphs are added when ``slic`` is true and scikit-image is installed."""
    cases = [(f"grid {s}x{s}", grid_instance(s, s, seed)) for s in sizes]
    if slic:
        try:
            from structfw.datasets.segmentation import _benchmark_graphs

            cases += _benchmark_graphs()
        except ImportError:
            log("[maxflow] scikit-image is not installed (pip install structfw[seg]): SLIC graphs skipped")
    return cases


def _time_calls(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def gil_ratio(instance, backend, calls):
    """Seconds of 2 threads x ``calls`` calls over seconds of 2 x ``calls`` serial calls."""
    from structfw.oracles.maxflow import min_cut

    c0, c1, edges, wts = instance
    t0 = time.perf_counter()
    for _ in range(2 * calls):
        min_cut(c0, c1, edges, wts, backend=backend)
    serial = time.perf_counter() - t0

    def work():
        for _ in range(calls):
            min_cut(c0, c1, edges, wts, backend=backend)

    threads = [threading.Thread(target=work) for _ in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - t0) / serial


def run_maxflow(sizes=SIZES, repeats=5, gil_calls=5, slic=True, seed=0, out="bench_out/maxflow", log=print):
    """Run the benchmark; write ``maxflow.json`` and ``maxflow.png`` to ``out``; return the doc.

    Parameters
    ----------
    sizes : sequence of int
        Sides of the square grids.
    repeats : int
        Timed calls per instance and back-end (after one warm-up call).
    gil_calls : int
        Calls per thread of the GIL measurement on the largest grid (0: not measured).
    slic : bool
        Also time the SLIC superpixel graphs when scikit-image is installed.
    seed : int
        Seed of the grid images.
    out : path
        Output directory.
    log : callable
        Receives one line per measurement.
    """
    from structfw.oracles.maxflow import available_backends, min_cut

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if gil_calls < 0:
        raise ValueError(f"gil_calls must be >= 0, got {gil_calls}")
    if not sizes:
        raise ValueError("sizes must name at least one grid side")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    backends = available_backends()
    cases = instances(sizes, slic, seed, log)
    rows = []
    for name, (c0, c1, edges, wts) in cases:
        ref = None
        for b in backends:
            min_cut(c0, c1, edges, wts, backend=b)  # compile / warm up
            times, (_, energy) = _time_calls(lambda: min_cut(c0, c1, edges, wts, backend=b), repeats)
            energy = float(energy)
            ref = energy if ref is None else ref
            row = dict(graph=name, backend=b, V=int(c0.shape[0]), E=int(edges.shape[0]),
                       seconds_per_call=float(np.median(times)), min_seconds=float(min(times)), times=times,
                       energy=energy, rel_energy_diff=abs(energy - ref) / max(abs(ref), 1e-300))
            log(f"[maxflow] {name} (V={row['V']}, E={row['E']}) {b:>9s}: {1e3 * row['seconds_per_call']:8.2f} ms "
                f"per cut, energy {energy:.6g} (rel. diff. from {backends[0]} {row['rel_energy_diff']:.0e})")
            rows.append(row)
    gil = []
    if gil_calls:
        side = max(sizes)
        instance = dict(cases)[f"grid {side}x{side}"]
        for b in backends:
            ratio = gil_ratio(instance, b, gil_calls)
            log(f"[maxflow] GIL {b:>9s}: 2 threads x {gil_calls} calls / {2 * gil_calls} serial calls = {ratio:.2f}")
            gil.append(dict(backend=b, graph=f"grid {side}x{side}", calls=gil_calls, ratio=float(ratio)))
    doc = dict(benchmark="maxflow", sizes=list(sizes), repeats=repeats, gil_calls=gil_calls, seed=seed,
               backends=backends, graphs=[name for name, _ in cases],
               instance="grids: noisy disc unaries, Potts weights 0.5 exp(-2 |I_u - I_v|); "
                        "SLIC: make_stanford_like region adjacency graphs, N(0, 0.25) unaries",
               environment=environment(), rows=rows, gil=gil)
    write_json(out / "maxflow.json", doc)
    plot_maxflow(doc, out / "maxflow.png")
    return doc


def plot_maxflow(doc, path):
    """Milliseconds per cut, one group of bars per graph, one bar per back-end (log scale)."""
    plt = pyplot()
    graphs, backends = doc["graphs"], doc["backends"]
    ms = {(r["graph"], r["backend"]): 1e3 * r["seconds_per_call"] for r in doc["rows"]}
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(graphs) + 2), 4))
    width = 0.8 / len(backends)
    x = np.arange(len(graphs))
    for k, b in enumerate(backends):
        ax.bar(x + (k - (len(backends) - 1) / 2) * width, [ms[(g, b)] for g in graphs], width, label=b)
    ax.set_xticks(x)
    ax.set_xticklabels(graphs, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms per min cut (median)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _click_command():
    import click

    from ._common import int_list_callback

    @click.command("maxflow")
    @click.option("--sizes", default="100,150", show_default=True, callback=int_list_callback(2),
                  help="Sides of the square grids.")
    @click.option("--repeats", default=5, show_default=True, type=click.IntRange(1),
                  help="Timed calls per graph and back-end (after a warm-up call).")
    @click.option("--gil-calls", default=5, show_default=True, type=click.IntRange(0),
                  help="Calls per thread of the GIL measurement on the largest grid (0: skip it).")
    @click.option("--slic/--no-slic", default=True, show_default=True,
                  help="Also time SLIC superpixel graphs (needs scikit-image).")
    @click.option("--seed", default=0, show_default=True, type=int)
    @click.option("--out-dir", "--out", "out", default="bench_out/maxflow", show_default=True,
                  type=click.Path(file_okay=False), help="Directory of maxflow.json and maxflow.png.")
    def bench_maxflow(sizes, repeats, gil_calls, slic, seed, out):
        """Max-flow back-ends on grid and superpixel cuts: ms per cut, energy, GIL."""
        run_maxflow(sizes, repeats, gil_calls, slic, seed, out, log=click.echo)
        click.echo(f"wrote {out}/maxflow.json, maxflow.png")

    return bench_maxflow


bench_maxflow = _click_command()
