"""``structfw bench svm``: reproduce Tables 2-4 of Frandi et al. (2015) (registered by the
main CLI; this module only defines the click command)."""
from __future__ import annotations

import click

from .bench import HEART_DEFAULT


@click.command("svm")
@click.option("--out", "out", default="bench_out/svm", show_default=True,
              type=click.Path(file_okay=False), help="Directory for JSON, markdown and PNG.")
@click.option("--quick", is_flag=True, default=False,
              help="Small smoke run: heart_scale + breast-cancer, tol 1e-3/1e-4, "
                   "fashion-mnist subsampled to 2,000 training images.")
@click.option("--large/--no-large", default=True, show_default=True,
              help="Include the fashion-mnist 5-vs-7 task (skipped with a message if the "
                   "Debian dataset-fashion-mnist files are absent).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the train/test splits and of the vertex sampler.")
@click.option("--heart-path", default=HEART_DEFAULT, show_default="the copy bundled "
              "with structfw", help="heart_scale file in svmlight format.")
@click.option("--C", "C", default=1.0, show_default=True, type=float,
              help="SVM C, shared by all methods and libsvm.")
def bench_svm(out, quick, large, seed, heart_path, C):
    """Kernel SVM benchmark: FW / MFW / SWAP / PARTAN (and randomised search) vs libsvm."""
    from .bench import run_benchmark
    if C <= 0:
        raise click.BadParameter("C must be > 0", param_hint="--C")
    run_benchmark(out=out, quick=quick, large=large, seed=seed, heart_path=heart_path, C=C,
                  log=click.echo)
    click.echo(f"wrote {out}/svm_tables.json, svm_tables.md, svm_convergence.png")


if __name__ == "__main__":  # pragma: no cover
    bench_svm()
