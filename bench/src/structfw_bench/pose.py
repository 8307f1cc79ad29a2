"""The pose oracle: distance-transform messages against brute force, and a fit on a slice.

Used by ``structfw bench pose-oracle``.

* Oracle timing: on grids of H x H positions (20, 40, 60 by default), the loss-augmented
  max oracle of the 14-part LSP tree (`structfw.datasets.pose.PARENT`) with random unary
  scores and random springs (a, c > 0), once with messages by the generalized distance
  transform (O(P H W)) and once by brute force (O(P (H W)^2)); median seconds per call
  over ``repeats`` calls after a compiling call (and the minimum, less sensitive to other
  jobs on a shared machine), and whether both return the same value.
* Optionally (``--fit-train N``): `PoseModel` trained by BCFW with pairwise steps, gap
  sampling and the cache (the paper's recommendation for costly oracles) on the first N
  images of `structfw.datasets.load_pose`'s training split, until the duality gap is below
  ``--tol`` or after ``--passes`` passes, tested on the first ``--fit-test`` test images,
  against the unary-only model (the same model with the springs fixed at zero: every part
  at the argmax of its own detector, trained the same way).  Reports PCP (13 sticks, 0.5 of
  the stick length), PCK (parts within the model's tolerance of 2 cells), and the final
  duality gap, so that a reader sees whether both fits converged.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ._common import environment, pyplot, write_json

SIZES = (20, 40, 60)


def oracle_instance(side, seed=0):
    from structfw.datasets.pose import PARENT

    rng = np.random.default_rng(seed)
    P = PARENT.shape[0]
    S = rng.normal(size=(P, side, side))
    coef = rng.normal(size=(P, 4)) * np.array([0.05, 0.5, 0.05, 0.5])
    coef[:, [0, 2]] = np.abs(coef[:, [0, 2]])
    return S, PARENT, coef


def _time(fn, repeats):
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        if times[-1] > 10.0:
            break
    return float(np.median(times)), times, out


def run_oracle_timing(sizes=SIZES, repeats=5, brute_repeats=2, seed=0, log=print):
    from structfw.oracles.pose import pose_max_product

    S, parent, coef = oracle_instance(4, seed)
    pose_max_product(S, parent, coef)  # compile outside the timings
    pose_max_product(S, parent, coef, brute=True)
    rows = []
    for side in sizes:
        S, parent, coef = oracle_instance(side, seed)
        t_dt, times_dt, (y_dt, v_dt) = _time(lambda: pose_max_product(S, parent, coef), repeats)
        t_bf, times_bf, (y_bf, v_bf) = _time(lambda: pose_max_product(S, parent, coef, brute=True), brute_repeats)
        row = dict(grid=[side, side], positions=side * side, parts=int(S.shape[0]), dt_seconds=t_dt,
                   dt_min_seconds=min(times_dt), brute_seconds=t_bf, brute_min_seconds=min(times_bf), speedup=t_bf / t_dt, dt_times=times_dt, brute_times=times_bf,
                   dt_value=v_dt, brute_value=v_bf, same_value=bool(abs(v_dt - v_bf) <= 1e-9 * (1 + abs(v_bf))))
        # the minimum as well as the median: on a loaded machine the median carries other jobs' time
        log(f"[pose-oracle] {side}x{side}: distance transform {1e3 * t_dt:8.3f} ms (min {1e3 * min(times_dt):.3f}), "
            f"brute force "
            f"{1e3 * t_bf:10.2f} ms ({row['speedup']:.0f}x), same value: {row['same_value']}")
        rows.append(row)
    return rows


def run_fit(n_train=100, n_test=100, lam=0.01, passes=20, seed=0, log=print, tol=None, window=None,
            window_stride=None):
    """PoseModel against the unary-only model on a slice of the pose set (module docstring).

    ``window`` / ``window_stride`` override `make_pose_model`'s part filters (3 x 3 blocks,
    3 cells apart); ``tol`` stops a fit at that duality gap."""
    from structfw import StructuredSVM
    from structfw.datasets import load_pose
    from structfw.datasets.pose import pck, pcp
    from structfw.solvers import BCFW

    t0 = time.perf_counter()
    tr, te = load_pose("train", n=n_train), load_pose("test", n=n_test)
    load_s = time.perf_counter() - t0
    kw = {k: v for k, v in (("window", window), ("window_stride", window_stride)) if v is not None}
    out = dict(n_train=n_train, n_test=n_test, lam=lam, passes=passes, tol=tol, load_seconds=load_s,
               model=tr.make_model(**kw).get_config(), solver="BCFW(step='pairwise', sampling='gap', cache=True)",
               runs={})
    for name in ("tree", "unary-only"):
        model = tr.make_model(**kw)
        solver = BCFW(step="pairwise", sampling="gap", cache=True)
        if name == "unary-only":
            model = _unary_only(model)
        svm = StructuredSVM(model, solver=solver, lam=lam, max_passes=passes, tol=tol, random_state=seed,
                            check_every=max(min(passes // 5, 10), 1))
        t0 = time.perf_counter()
        svm.fit(tr.X, tr.Y)
        fit_s = time.perf_counter() - t0
        pred_tr, pred_te = svm.predict(tr.X), svm.predict(te.X)
        run = dict(fit_seconds=fit_s, gap=float(svm.gap_), primal=float(svm.primal_), stopped=svm.stopped_,
                   passes=float(svm.trace_["passes"][-1]),
                   train_pcp=pcp(tr.Y, pred_tr), test_pcp=pcp(te.Y, pred_te),
                   train_pck=pck(tr.Y, pred_tr), test_pck=pck(te.Y, pred_te),
                   oracle_calls=int(svm.trace_["oracle_calls"][-1]) if "oracle_calls" in svm.trace_.columns else None)
        log(f"[pose-fit] {name:>10s}: test PCP {run['test_pcp']:.3f}, test PCK@2 {run['test_pck']:.3f} "
            f"(train {run['train_pcp']:.3f} / {run['train_pck']:.3f}), gap {run['gap']:.3e} (primal "
            f"{run['primal']:.3f}) after {run['passes']:.0f} passes ({run['stopped']}), {fit_s:.1f} s")
        out["runs"][name] = run
    return out


def _unary_only(model):
    """The same `PoseModel` with its spring features zeroed: psi has no spring part, so the
    spring weights stay 0 and every part is decoded at the argmax of its own detector."""
    from structfw.models.pose import PoseModel

    class UnaryOnlyPoseModel(PoseModel):
        def joint_feature(self, x, y):
            phi = super().joint_feature(x, y)
            phi[self.edge_offset:] = 0.0
            return phi

    return UnaryOnlyPoseModel(**model.get_config())


def run_pose(sizes=SIZES, repeats=5, brute_repeats=2, fit_train=0, fit_test=100, lam=0.01, passes=20, seed=0,
             out="bench_out/pose", log=print, tol=None, window=None, window_stride=None):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = dict(benchmark="pose-oracle", sizes=list(sizes), repeats=repeats, brute_repeats=brute_repeats, seed=seed,
               instance="14-part LSP tree, unary ~ N(0, 1), springs a, c ~ |N(0, 0.05^2)|, b, d ~ N(0, 0.5^2)",
               environment=environment(), oracle=run_oracle_timing(sizes, repeats, brute_repeats, seed, log))
    if fit_train:
        doc["fit"] = run_fit(fit_train, fit_test, lam, passes, seed, log, tol, window, window_stride)
    write_json(out / "pose_oracle.json", doc)
    plot_pose(doc, out / "pose_oracle.png")
    return doc


def plot_pose(doc, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    rows = doc["oracle"]
    n = [r["positions"] for r in rows]
    ax.plot(n, [1e3 * r["dt_seconds"] for r in rows], "-o", label="distance transform, O(P HW)")
    ax.plot(n, [1e3 * r["brute_seconds"] for r in rows], "--s", label="brute-force messages, O(P (HW)^2)")
    for r in rows:
        ax.annotate(f"{r['grid'][0]}x{r['grid'][1]}", (r["positions"], 1e3 * r["dt_seconds"]), fontsize=7,
                    textcoords="offset points", xytext=(0, -12))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("grid positions H W")
    ax.set_ylabel("ms per oracle call (14 parts)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _click_command():
    import click

    from ._common import int_list_callback

    @click.command("pose-oracle")
    @click.option("--sizes", default="20,40,60", show_default=True, callback=int_list_callback(2),
                  help="Grid sides H (= W) of the timed oracle calls.")
    @click.option("--repeats", default=5, show_default=True, type=click.IntRange(1),
                  help="Timed distance-transform calls per grid.")
    @click.option("--brute-repeats", default=2, show_default=True, type=click.IntRange(1),
                  help="Timed brute-force calls per grid.")
    @click.option("--fit-train", default=0, show_default=True, type=click.IntRange(0, 1000),
                  help="Also fit PoseModel and the unary-only model on this many training images (0: no fit).")
    @click.option("--fit-test", default=100, show_default=True, type=click.IntRange(1, 1000),
                  help="Test images of the fit.")
    @click.option("--lam", default=0.01, show_default=True, type=float, help="lam of the fit.")
    @click.option("--passes", default=20, show_default=True, type=click.IntRange(1), help="Passes of the fit.")
    @click.option("--tol", default=None, type=click.FloatRange(0, min_open=True),
                  help="Stop each fit at this duality gap (default: run all --passes).")
    @click.option("--window", default=None, type=click.IntRange(1),
                  help="Part filters of WINDOW x WINDOW HOG blocks (odd; default that of load_pose's model, 3).")
    @click.option("--window-stride", default=None, type=click.IntRange(1),
                  help="Cells between the blocks of a part filter (default 3).")
    @click.option("--seed", default=0, show_default=True, type=int)
    @click.option("--out", default="bench_out/pose", show_default=True, type=click.Path(file_okay=False))
    def bench_pose_oracle(sizes, repeats, brute_repeats, fit_train, fit_test, lam, passes, tol, window, window_stride,
                          seed, out):
        """Pose oracle: distance-transform messages against brute force; optional fit (PCP)."""
        try:
            run_pose(sizes, repeats, brute_repeats, fit_train, fit_test, lam, passes, seed, out, log=click.echo,
                     tol=tol, window=window, window_stride=window_stride)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        click.echo(f"wrote {out}/pose_oracle.json, pose_oracle.png")

    return bench_pose_oracle


bench_pose_oracle = _click_command()
