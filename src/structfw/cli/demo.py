"""``structfw demo``: the main job on the bundled OCR data."""
from __future__ import annotations


import click

from ._common import EXIT_INTERRUPTED, check_output_path, format_gap, print_table, stop_message, write_outputs


@click.command("demo")
@click.option("--lam", default=0.01, show_default=True, help="Regularisation lambda.")
@click.option("--passes", default=10, show_default=True, help="Passes over the training data.")
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--out", default="structfw_demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the convergence plot and trace.")
def demo(lam, passes, seed, out):
    """BCFW-wavg on the bundled OCR letters: progress, table and convergence plot.

    The gap is checked after every pass (so the plot has a point per pass); a
    plain fit checks less often (check_every="auto").  Ctrl-C stops it at a safe
    point; the table, trace and plot of the passes done are still written, and the
    command exits with status 130.
    """
    from .. import datasets, models, solvers
    from ..estimator import StructuredSVM

    if passes < 1:
        raise click.BadParameter(f"must be >= 1; got {passes}", param_hint="--passes")
    outdir = check_output_path(out, "--out", directory=True)
    X, Y = datasets.load_ocr("train")
    Xt, Yt = datasets.load_ocr("test")
    click.echo(f"OCR letters: {len(X)} training words, {len(Xt)} test words; BCFW-wavg, lam={lam}")
    model = models.ChainModel(n_states=26, n_features=128)
    svm = StructuredSVM(model, solver=solvers.BCFW(averaging="weighted"), lam=lam, max_passes=passes,
                        tol=None, check_every=1, random_state=seed, verbose=1)
    try:
        svm.fit(X, Y, X_test=Xt, Y_test=Yt)
    except ValueError as exc:
        lam_error = getattr(exc, "param", None) == "lam" or str(exc).startswith("lam")
        raise click.BadParameter(str(exc), param_hint="--lam" if lam_error else "--passes") from None
    print_table(svm.trace_)
    outdir.mkdir(parents=True, exist_ok=True)
    writers = [("trace", lambda: _saved(svm.trace_.save, outdir / "demo_trace.json"))]
    try:
        from ..plotting import plot_convergence

        writers.append(("plot", lambda: _saved(
            lambda p: plot_convergence(svm.trace_, p, title=f"BCFW-wavg on OCR, lam={lam}"),
            outdir / "demo_convergence.png")))
    except ImportError as exc:
        click.echo(f"(no plot: {exc}; pip install 'structfw[plot]')")
    write_outputs(writers)
    click.echo(f"test error {1 - svm.score(Xt, Yt):.4f}   duality gap {format_gap(svm.gap_, spec='.3e')}   "
               + stop_message(svm.stopped_, save_hint=None))
    if svm.stopped_ == "interrupted":
        raise SystemExit(EXIT_INTERRUPTED)


def _saved(save, path):
    save(path)
    return path
