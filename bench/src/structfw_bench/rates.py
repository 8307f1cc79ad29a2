"""The O(1/eps) theorems of the BCFW paper (Lacoste-Julien et al. 2013), measured: gap x k against k.

An O(1/k) rate means that k times the error stays bounded: a flat or falling curve of
k * g_k against k, under the theorem's constant.  This benchmark runs, on an OCR subset,
BCFW with line search and with the predefined step 2n/(k+2n), batch FW and SSG, with a
checkpoint every pass, and draws beside the measured curves the bounds the paper proves.

The statements (full ICML version, App. C; its main-text Theorem 2 is split into C.1 and C.3,
and App. B's Theorems 1' and 3 specialise them to the structural SVM):

- Thm. C.1 (primal convergence of BCFW; the SSVM *dual* suboptimality here), for each k >= 0,
  with the predefined step or with line search and an exact oracle:
  E[h(alpha^(k))] <= 2n / (k + 2n) * (C_f^⊗ + h_0),  h_0 = D* - D(alpha^(0));
- Thm. C.3 (primal-dual convergence), for each K >= 0 some iterate k_hat <= K has
  E[g(alpha^(k_hat))] <= 2 beta n / (K + 1) * (C_f^⊗ + h_0) with beta = 3: the *smallest*
  expected gap up to K is under 6n / (K + 1) * (C_f^⊗ + h_0);
- batch FW (Thm. 1', quoting Frank & Wolfe, Dunn & Harshbarger, Jaggi): for each k >= 1,
  h(alpha^(k)) <= 2 C_f / (k + 2), and after K >= 1 iterations some 1 <= k_hat <= K has
  g(alpha^(k_hat)) <= 6 C_f / (K + 1);
- the curvature bounds of App. A (Lemmas A.1, A.2, as used in the proofs of Thms. 1' and 3):
  C_f <= 4 R^2 / lam and C_f^⊗ <= 4 R^2 / (lam n), R = max_{i,y} ||psi_i(y)||;
- SSG: the paper states its rate only in O-notation -- O~(R^2 / (lam eps)) for the primal error
  (Table 1, after Shalev-Shwartz et al. 2010a) and O(1/k) instead of O(log k / k) for the
  0.5-suffix average SSG-tavg (Sec. 6, after Rakhlin et al. 2012) -- with no constant this
  benchmark could compute: its primal suboptimality k * (P(w_k) - P*) is drawn without a bound.

k counts block steps (BCFW, SSG: n per pass) or batch iterations (FW: one per pass); the
figure's x-axis is passes p = k / n (FW: p = k), and its curves are p * error with the bound
in the same units (BCFW: p * 2nC / (pn + 2n) and p * 6nC / (pn + 1), both below their limits
2C and 6C, the "bound constants" of the JSON; FW: 2 C_f and 6 C_f).

The constants are computed on the data:

- R: for the chain model, ``||psi_i(y)||^2 = ||phi(y_i)||^2 + ||phi(y)||^2 - 2⟨phi(y_i), phi(y)⟩``;
  with the Gram matrix G = x x^T of example i's positions, ``||phi(y)||^2 <= sum max(G, 0) + (L-1)^2``
  (the unary part is sum_{t,u} G_tu [y_t = y_u], the transition counts sum to L - 1) and
  ``-2⟨phi(y_i), phi(y)⟩ <= 2 sum max(-G, 0)`` (the transition counts are non-negative): an upper
  bound.  The largest ||psi_i(y)|| over the constant labellings y = (s, ..., s) is a lower one;
  with non-negative features (OCR's pixels) and a label absent from the word the two meet.
- h_0 = D* - D(alpha^(0)), D(alpha^(0)) from the runs' initial checkpoint (0 at the ground
  truth start), D* bracketed by the best dual and the best primal of every run, including a
  long reference run (`REFERENCE`, the BCFW engine with multi-plane pairwise steps, which
  reaches a small gap in far fewer passes than plain BCFW).

The verdict is conservative on both sides: the measured h_k uses the upper end of D*'s bracket
(it can only be overestimated) and the bound the lower ends of R's and h_0's brackets (it can
only be underestimated), so "under the bound" holds for the true constants.  The expectations
of the theorems are estimated by the mean over seeds.  Checkpoints come once a pass: the
running minimum over them is at least the minimum over every step, so Thm. C.3's check on it
is, if anything, stricter than the theorem.

Output: ``rates.json`` and ``rates.png`` in ``out``.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import click
import numpy as np

from ._common import col, environment, load_ocr_data, parse_lam, pyplot, run_fit, write_json

#: the solvers measured, by their Figure 1 names (`structfw_bench.fig1.make_fig1_solver`)
RATE_SOLVERS = ("BCFW", "BCFW-fixed", "FW", "SSG", "SSG-tavg")
#: the dual solvers of the theorems: block-coordinate (Thms. C.1, C.3) and batch (Thm. 1')
BLOCK_SOLVERS = ("BCFW", "BCFW-fixed")
BATCH_SOLVERS = ("FW",)
PRIMAL_SOLVERS = ("SSG", "SSG-tavg")
DETERMINISTIC = ("FW",)
#: the reference run for D*: the BCFW engine with multi-plane pairwise steps (as Figure 1's)
REFERENCE = "MP-BCPFW"
REF_TOL = 1e-7
#: a curve is "flat or falling" when log(p * error) against log p has a slope below this over the
#: last decade of passes (a rate 1/k^a has slope 1 - a: 0 for O(1/k), 1 for no decrease at all)
FLAT_SLOPE = 0.1
SSG_NO_BOUND = ("the paper states SSG's rate only in O-notation: O~(R^2 / (lam eps)) primal error (Table 1, "
                "after Shalev-Shwartz et al. 2010a) and O(1/k) for SSG-tavg (Sec. 6, after Rakhlin et al. "
                "2012), with no constant to compute: drawn without a bound")
_STYLE = {"BCFW": "tab:blue", "BCFW-fixed": "tab:cyan", "FW": "tab:gray", "SSG": "tab:red", "SSG-tavg": "tab:pink"}


# ------------------------------------------------------------------------------------------- constants
def chain_psi_norm_bounds(X, Y, model):
    """Lower and upper bounds of R = max_{i,y} ||psi_i(y)|| for a `structfw.models.ChainModel`.

    Parameters
    ----------
    X, Y : sequences
        The training inputs (each (L, F), dense or scipy.sparse) and labellings ((L,) ints).
    model : ChainModel

    Returns
    -------
    dict
        ``lower``: the largest ||psi_i(y)|| over the constant labellings y = (s, ..., s);
        ``upper``: the bound of the module docstring (Gram matrix of the positions and the
        transition counts); ``l_max``: the largest loss of those labellings (a lower estimate of
        L_max; 1 for the normalised Hamming loss).
    """
    from structfw.models import ChainModel

    if not isinstance(model, ChainModel):
        raise TypeError(f"model must be a ChainModel (the bound uses its joint features); got {type(model).__name__}")
    if len(X) != len(Y) or len(X) == 0:
        raise ValueError(f"X and Y must be non-empty and of the same length; got {len(X)} and {len(Y)}")
    lower2 = upper2 = l_max = 0.0
    for x, y in zip(X, Y):
        y = np.asarray(y, dtype=np.int64)
        lo2, up2, loss = _example_psi_bounds(x, y, model)
        lower2, upper2, l_max = max(lower2, lo2), max(upper2, up2), max(l_max, loss)
    return dict(lower=math.sqrt(lower2), upper=math.sqrt(upper2), l_max=l_max)


def _example_psi_bounds(x, y, model):
    """(lower^2, upper^2, largest loss) of max_y ||psi_i(y)|| for one example."""
    length = len(y)
    gram = x @ x.T
    gram = gram.toarray() if hasattr(gram, "toarray") else np.asarray(gram, float)
    phi_true = model.joint_feature(x, y).toarray()
    upper2 = (float(phi_true @ phi_true) + float(np.clip(gram, 0, None).sum())
              + 2.0 * float(np.clip(-gram, 0, None).sum()) + float((length - 1) ** 2))
    lower2 = loss = 0.0
    for s in range(model.n_states):
        other = np.full(length, s, np.int64)
        psi = model.psi(x, y, other).toarray()
        lower2 = max(lower2, float(psi @ psi))
        loss = max(loss, float(model.loss(y, other)))
    return lower2, upper2, loss


def theorem_constants(r, lam, n, h0):
    """The constants of the bounds for one lam, from R and h_0 (module docstring).

    Returns
    -------
    dict
        ``C_prod`` = 4 R^2 / (lam n) (bound of C_f^⊗), ``C_f`` = 4 R^2 / lam, ``C_block`` =
        C_prod + h_0 (Thms. C.1, C.3), and the limits of p * bound in pass units:
        ``dual_block`` = 2 C_block, ``gap_block`` = 6 C_block, ``dual_batch`` = 2 C_f,
        ``gap_batch`` = 6 C_f.
    """
    for name, v in (("r", r), ("lam", lam), ("h0", h0)):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (name == "lam" and v == 0):
            raise ValueError(f"{name} must be a finite number >= 0 (lam > 0); got {v!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1; got {n!r}")
    c_prod = 4.0 * r * r / (lam * n)
    c_f = 4.0 * r * r / lam
    c_block = c_prod + h0
    return dict(C_prod=c_prod, C_f=c_f, C_block=c_block, dual_block=2 * c_block, gap_block=6 * c_block,
                dual_batch=2 * c_f, gap_batch=6 * c_f)


def dual_bound(name, steps, n, const):
    """Thm. C.1 (block solvers: 2nC / (k + 2n), k >= 0) or Thm. 1' (FW: 2 C_f / (k + 2), k >= 1;
    NaN at k = 0) at ``steps`` k."""
    k = np.asarray(steps, float)
    if name in BATCH_SOLVERS:
        return np.where(k >= 1, 2.0 * const["C_f"] / (k + 2.0), np.nan)
    return 2.0 * n * const["C_block"] / (k + 2.0 * n)


def gap_bound(name, steps, n, const):
    """Thm. C.3 (block solvers: 6nC / (K + 1), K >= 0) or Thm. 1' (FW: 6 C_f / (K + 1), K >= 1;
    NaN at K = 0) at ``steps`` K: a bound of the smallest expected gap up to K."""
    k = np.asarray(steps, float)
    if name in BATCH_SOLVERS:
        return np.where(k >= 1, 6.0 * const["C_f"] / (k + 1.0), np.nan)
    return 6.0 * n * const["C_block"] / (k + 1.0)


# ------------------------------------------------------------------------------------------- verdicts
def tail_slope(p, y):
    """Least-squares slope of log y against log p over the last decade of passes (p >= p_max / 10,
    p >= 1), on the finite positive values; NaN with fewer than three."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    keep = (p >= max(1.0, np.nanmax(p) / 10.0)) & np.isfinite(y) & (y > 0)
    if keep.sum() < 3:
        return math.nan
    return float(np.polyfit(np.log(p[keep]), np.log(y[keep]), 1)[0])


#: the statement each verdict row is judged against, by measure and kind of solver
THEOREMS = {("gap", "block"): "Thm. C.3 (6n (C_f^⊗ + h_0) / (K+1))",
            ("gap", "batch"): "Thm. 1' (6 C_f / (K+1), K >= 1)",
            ("dual", "block"): "Thm. C.1 (2n (C_f^⊗ + h_0) / (k+2n))",
            ("dual", "batch"): "Thm. 1' (2 C_f / (k+2), k >= 1)"}


def dual_verdict(name, p, n, gaps, duals, dstar, const_lo):
    """Verdict of one dual solver against Thms. C.1 / C.3 (block) or 1' (batch).

    Parameters
    ----------
    p : (m,) engine passes of the checkpoints; gaps, duals : (seeds, m) the runs' values;
    dstar : (lower, upper) bracket of D*; const_lo : `theorem_constants` at the lower R and h_0.
    """
    kind = "batch" if name in BATCH_SOLVERS else "block"
    steps = np.asarray(p, float) * (1 if kind == "batch" else n)
    return dict(gap=_gap_row(kind, p, gaps, gap_bound(name, steps, n, const_lo), const_lo[f"gap_{kind}"]),
                dual_subopt=_dual_row(kind, p, duals, dstar, dual_bound(name, steps, n, const_lo),
                                      const_lo[f"dual_{kind}"]))


def _gap_row(kind, p, gaps, bound, constant):
    """Thm. C.3 / 1' bound the smallest expected gap up to K: judged on the running minimum of the
    seeds' mean; the single checkpoints and the single seeds are reported too (stronger claims)."""
    gap_mean = np.nanmean(gaps, axis=0)
    running_min = np.minimum.accumulate(gap_mean)
    ok = np.isfinite(bound)
    sel = ok & (p >= 1)
    return dict(theorem=THEOREMS["gap", kind], bound_constant=constant,
                max_k_g_over_constant=float(np.nanmax(p[sel] * gap_mean[sel]) / constant),
                max_min_gap_over_bound=float(np.nanmax(running_min[ok] / bound[ok])),
                under_bound=bool(np.all(running_min[ok] <= bound[ok])),
                every_checkpoint_under=bool(np.all(gap_mean[ok] <= bound[ok])),
                every_seed_under=bool(np.all(np.minimum.accumulate(gaps, axis=1)[:, ok] <= bound[ok])),
                k_g_tail_slope=tail_slope(p, p * gap_mean))


def _dual_row(kind, p, duals, dstar, bound, constant):
    """Thm. C.1 / 1' bound the expected dual suboptimality at every k: judged with D* at the upper
    end of its bracket (h never underestimated), plotted and sloped with D* at the lower end."""
    dual_mean = np.nanmean(duals, axis=0)
    h_lo, h_hi = dstar[0] - dual_mean, dstar[1] - dual_mean
    ok = np.isfinite(bound)
    sel = ok & (p >= 1)
    # below ten brackets the measured h is mostly the reference's own error: no slope there
    above = np.where(h_lo > 10 * (dstar[1] - dstar[0]), p * h_lo, np.nan)
    return dict(theorem=THEOREMS["dual", kind], bound_constant=constant,
                max_k_h_over_constant=float(np.nanmax(p[sel] * h_lo[sel]) / constant),
                max_h_over_bound=float(np.nanmax(h_hi[ok] / bound[ok])),
                under_bound=bool(np.all(h_hi[ok] <= bound[ok])),
                k_h_tail_slope=tail_slope(p, above))


def primal_verdict(p, primals, dstar):
    """SSG: k * (P(w_k) - P*) with P* at the lower end of D*'s bracket (overestimating the error);
    no bound (`SSG_NO_BOUND`)."""
    sub = np.nanmean(primals, axis=0) - dstar[0]
    sel = np.asarray(p) >= 1
    return dict(primal_subopt=dict(theorem=None, bound_constant=None, why_no_bound=SSG_NO_BOUND,
                                   max_k_subopt=float(np.nanmax(p[sel] * sub[sel])),
                                   k_subopt_tail_slope=tail_slope(p, p * sub)))


def summary(row):
    """One line of a verdict row: the curve's shape and, where the paper gives one, the bound."""
    slope = next((row[k] for k in ("k_g_tail_slope", "k_h_tail_slope", "k_subopt_tail_slope") if k in row), math.nan)
    shape = f"p x error {flat_or_falling(slope)} (tail slope {slope:.2f})" if math.isfinite(slope) else \
        "p x error: too few points above the reference's bracket for a slope"
    if row["bound_constant"] is None:
        return shape + "; no bound with computable constants in the paper"
    ratio = row.get("max_min_gap_over_bound", row.get("max_h_over_bound"))
    where = "under" if row["under_bound"] else "NOT under"
    return f"{shape}; {where} {row['theorem']} (largest measured / bound {ratio:.2g})"


def flat_or_falling(slope):
    """"flat or falling" (O(1/k) or faster), "rising" or "unknown" from a tail slope."""
    if not math.isfinite(slope):
        return "unknown"
    return "flat or falling" if slope <= FLAT_SLOPE else "rising"


# ------------------------------------------------------------------------------------------- runs
def _check_run_args(n, passes, seeds, ref_passes, solvers):
    for name, v, low in (("n", n, 2), ("passes", passes, 2), ("seeds", seeds, 1), ("ref_passes", ref_passes, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {v!r}")
    names = tuple(solvers) if solvers else RATE_SOLVERS
    bad = [s for s in names if s not in RATE_SOLVERS]
    if bad:
        raise ValueError(f"solvers: unknown {bad}; choose from {', '.join(RATE_SOLVERS)}")
    return tuple(dict.fromkeys(names))


def _reference(model, X, Y, lam, ref_passes):
    """The long reference run for D* (a checkpoint every tenth of it: only its best values count)."""
    from .fig1 import make_reference_solver

    run, _ = run_fit(model, make_reference_solver(), X, Y, lam, ref_passes, 0, tol=REF_TOL,
                     check_every=max(1, int(ref_passes) // 10))
    return run, dict(solver=REFERENCE, passes=float(col(run, "passes")[-1]), final_gap=run["columns"]["gap"][-1],
                     best_dual=float(np.nanmax(col(run, "dual"))), best_primal=float(np.nanmin(col(run, "primal"))),
                     wall_s=run["wall_s"])


def _aligned(runs, name):
    """(engine passes, {column: (seeds, m)}) of runs that all checkpointed every pass."""
    m = min(len(r["columns"]["engine_passes"]) for r in runs)
    p = col(runs[0], "engine_passes")[:m]
    cols = {c: np.array([col(r, c)[:m] for r in runs]) for c in ("primal", "dual", "gap")}
    for r in runs:
        if not np.array_equal(col(r, "engine_passes")[:m], p):
            raise RuntimeError(f"{name}: the seeds' checkpoints differ; expected one per engine pass")
    return p, cols


def run_rates(n=300, lams=("0.01", "1/n"), passes=100, seeds=3, ref_passes=2000, out="bench_out/rates",
              solvers=None, log=print):
    """Run the rate benchmark on ``n`` OCR words; writes ``rates.json`` and ``rates.png`` to ``out``
    and returns the JSON document.

    Parameters
    ----------
    n : int >= 2
        OCR training words (a random subset, seed 0).
    lams : sequence of str or float
        Regularisation values; "1/n" and "c/n" allowed (`structfw_bench._common.parse_lam`).
    passes : int >= 2
        Passes of every run (a checkpoint each pass).
    seeds : int >= 1
        Seeds of the stochastic solvers (FW runs once); the theorems' expectations are the means.
    ref_passes : int >= 0
        Passes of the reference run for D* (0: the runs' best values only).
    solvers : sequence of str or None
        Names from `RATE_SOLVERS` (None: all).
    """
    from .fig1 import make_fig1_solver

    solvers = _check_run_args(n, passes, seeds, ref_passes, solvers)
    lam_specs = [str(v) for v in lams]
    if not lam_specs:
        raise ValueError("lams must name at least one lam")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, _, _, model = load_ocr_data(n)
    n = len(X)
    r = chain_psi_norm_bounds(X, Y, model)
    log(f"[rates] n = {n}: R in [{r['lower']:.4g}, {r['upper']:.4g}]")
    doc = dict(benchmark="rates", paper="Lacoste-Julien, Jaggi, Schmidt, Pletscher 2013 (BCFW), full version App. A-C",
               n=n, d=int(model.size_joint_feature),
               data=dict(source="structfw.datasets.load_ocr", subsample=n, seed=0),
               passes=int(passes), seeds=int(seeds), ref_passes=int(ref_passes), solvers=list(solvers),
               R=r, environment=environment(), x_axis="engine passes p (k = p n block steps; FW: k = p iterations)",
               judging=("means over seeds; h_k with D* at the upper end of its bracket, bounds with R and h_0 at the "
                        "lower ends: 'under_bound' holds for the true constants"), lams={})
    t_start = time.perf_counter()
    for spec in lam_specs:
        lam = parse_lam(spec, n)
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lams: lam must be positive and finite; got {spec!r}")
        entry = _run_one_lam(model, X, Y, lam, spec, solvers, passes, seeds, ref_passes, r, make_fig1_solver, log,
                             t_start)
        doc["lams"][spec] = entry
    doc["wall_s"] = time.perf_counter() - t_start
    write_json(out / "rates.json", doc)
    plot_rates(doc, out / "rates.png")
    return doc


def _run_one_lam(model, X, Y, lam, spec, solvers, passes, seeds, ref_passes, r, make_solver, log, t_start):
    n = len(X)
    entry = dict(lam=lam, lam_spec=spec, solvers={}, verdict={})
    best_dual, best_primal = -math.inf, math.inf
    if ref_passes:
        _, entry["reference"] = _reference(model, X, Y, lam, ref_passes)
        best_dual, best_primal = entry["reference"]["best_dual"], entry["reference"]["best_primal"]
        log(f"[rates] lam={spec} ({lam:.3g}): reference gap {entry['reference']['final_gap']:.3g}")
    raw, start_duals = {}, []
    for name in solvers:
        runs = [run_fit(model, make_solver(name), X, Y, lam, passes, s, check_every=1)[0]
                for s in range(1 if name in DETERMINISTIC else int(seeds))]
        for run in runs:
            d = col(run, "dual")
            if np.isfinite(d).any():
                best_dual = max(best_dual, float(np.nanmax(d)))
                start_duals.append(float(d[0]))
            best_primal = min(best_primal, float(np.nanmin(col(run, "primal"))))
        raw[name] = runs
        log(f"[rates] lam={spec}: {name} x{len(runs)} done ({time.perf_counter() - t_start:.0f}s)")
    dstar = (best_dual, best_primal)
    d0 = max(start_duals) if start_duals else 0.0     # D(alpha^(0)): 0 at the ground-truth start
    h0 = (max(0.0, dstar[0] - d0), max(0.0, dstar[1] - d0))
    const_lo = theorem_constants(r["lower"], lam, n, h0[0])
    const_hi = theorem_constants(r["upper"], lam, n, h0[1])
    entry.update(dstar=dict(lower=dstar[0], upper=dstar[1], bracket=dstar[1] - dstar[0]),
                 d_alpha0=d0, h0=dict(lower=h0[0], upper=h0[1]), constants=const_lo, constants_upper=const_hi,
                 conditions=dict(l_max=r["l_max"], C_prod=const_lo["C_prod"],
                                 thm3_l_max_le_4R2_over_lam_n=bool(r["l_max"] <= const_lo["C_prod"]),
                                 note="Thms. C.1 and C.3 with h_0 need only an exact oracle (Viterbi here); Thm. 3's "
                                      "O(R^2/(lam eps)) form drops h_0 when L_max <= 4 R^2 / (lam n)"))
    for name, runs in raw.items():
        p, cols = _aligned(runs, name)
        entry["solvers"][name] = dict(label=runs[0]["meta"].get("solver", name), n_runs=len(runs), passes=p.tolist(),
                                      gap=cols["gap"].tolist(), dual=cols["dual"].tolist(),
                                      primal=cols["primal"].tolist(), wall_s=[run["wall_s"] for run in runs])
        if name in PRIMAL_SOLVERS:
            verdict = primal_verdict(p, cols["primal"], dstar)
        else:
            verdict = dual_verdict(name, p, n, cols["gap"], cols["dual"], dstar, const_lo)
        for row in verdict.values():
            row["summary"] = summary(row)
        entry["verdict"][name] = verdict
    return entry


# ------------------------------------------------------------------------------------------- figure
def plot_rates(doc, path):
    """Three rows per lam (a column each): p * gap, p * dual suboptimality (both with their
    theorems' bounds, dashed) and SSG's p * primal suboptimality (no bound)."""
    plt = pyplot()
    keys = list(doc["lams"])
    fig, axes = plt.subplots(3, len(keys), figsize=(max(7.0, 5.6 * len(keys)), 11.5), squeeze=False)
    n = doc["n"]
    for j, key in enumerate(keys):
        e = doc["lams"][key]
        for name, s in e["solvers"].items():
            _plot_solver(axes[:, j], name, s, e, n)
        titles = ("duality gap x passes: p g_p (dotted: p min_{k<=p} g_k)", "dual suboptimality x passes: p h_p",
                  "SSG: primal suboptimality x passes (no bound in the paper)")
        for row, ax in enumerate(axes[:, j]):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_xlabel("passes p (k = p n block steps; FW: k = p)", fontsize=8)
            ax.set_title(f"lam = {key} ({e['lam']:.3g}), n = {n}\n{titles[row]}", fontsize=8)
            if ax.lines:
                ax.legend(fontsize=6)
    fig.suptitle("BCFW paper: O(1/k) means p x error flat or falling, under the theorems' bounds\n(dashed: "
                 "Thm. C.3 / C.1 for BCFW, Thm. 1' for FW; C_f^⊗ <= 4R^2/(lam n), C_f <= 4R^2/lam; "
                 f"means over {doc['seeds']} seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_solver(col_axes, name, s, e, n):
    color = _STYLE.get(name)
    p = np.asarray(s["passes"], float)
    sel = p >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if name in PRIMAL_SOLVERS:
            sub = np.nanmean(np.array(s["primal"], float), axis=0) - e["dstar"]["lower"]
            col_axes[2].plot(p[sel], np.where(sub > 0, p * sub, np.nan)[sel], color=color, label=name)
            return
        gap = np.nanmean(np.array(s["gap"], float), axis=0)
        h = e["dstar"]["lower"] - np.nanmean(np.array(s["dual"], float), axis=0)
        steps = p * (1 if name in BATCH_SOLVERS else n)
        const = e["constants"]
        col_axes[0].plot(p[sel], (p * gap)[sel], color=color, label=name)
        col_axes[0].plot(p[sel], (p * np.minimum.accumulate(gap))[sel], color=color, ls=":", lw=1)
        col_axes[1].plot(p[sel], np.where(h > 0, p * h, np.nan)[sel], color=color, label=name)
        if name == "BCFW-fixed":   # the block bound is the same for both step rules: draw it once
            return
        which = "Thm. 1' (FW)" if name in BATCH_SOLVERS else "Thm. C.3 (BCFW)"
        col_axes[0].plot(p[sel], (p * gap_bound(name, steps, n, const))[sel], color=color, ls="--", lw=1.2,
                         label=f"bound, {which}")
        which = "Thm. 1' (FW)" if name in BATCH_SOLVERS else "Thm. C.1 (BCFW)"
        col_axes[1].plot(p[sel], (p * dual_bound(name, steps, n, const))[sel], color=color, ls="--", lw=1.2,
                         label=f"bound, {which}")


# ------------------------------------------------------------------------------------------- command
def _lams_callback(ctx, param, value):
    from .fig1 import parse_lam_specs

    try:
        return parse_lam_specs(value, name="--lams")
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--lams: ")) from None


@click.command("rates")
@click.option("--n", "n", default=300, show_default=True, type=click.IntRange(min=2),
              help="OCR training words (a random subset).")
@click.option("--lams", default="0.01,1/n", show_default=True, callback=_lams_callback,
              help="Comma-separated lambdas; '1/n' and 'c/n' allowed; a column of panels each.")
@click.option("--passes", default=100, show_default=True, type=click.IntRange(min=2),
              help="Passes per run, a checkpoint each.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Seeds per stochastic solver (FW runs once); the theorems' expectations are the means.")
@click.option("--ref-passes", default=2000, show_default=True, type=click.IntRange(min=0),
              help="Passes of the reference run (MP-BCFW, pairwise) for D* (0: the runs' best values).")
@click.option("--solver", "solver_names", multiple=True, type=click.Choice(RATE_SOLVERS),
              help="Solvers to run (default: all).")
@click.option("--out-dir", "--out", "out", default="bench_out/rates", show_default=True,
              type=click.Path(file_okay=False), help="Directory; writes rates.json and rates.png.")
def bench_rates(n, lams, passes, seeds, ref_passes, solver_names, out):
    """Convergence rates of the BCFW paper's theorems: gap x k against k beside the bounds."""
    doc = run_rates(n=n, lams=lams, passes=passes, seeds=seeds, ref_passes=ref_passes, out=out,
                    solvers=solver_names or None, log=click.echo)
    click.echo(f"R in [{doc['R']['lower']:.4g}, {doc['R']['upper']:.4g}]")
    click.echo(f"{'lam':>10} {'solver':>10} {'measure':>12} {'max p*err':>11} {'constant':>11} {'under':>6} "
               f"{'tail':>16}")
    for key, e in doc["lams"].items():
        for name, v in e["verdict"].items():
            for what, row in v.items():
                peak = row.get("max_k_g_over_constant", row.get("max_k_h_over_constant"))
                const = row["bound_constant"]
                value = row.get("max_k_subopt") if const is None else peak * const
                slope = row.get("k_g_tail_slope", row.get("k_h_tail_slope", row.get("k_subopt_tail_slope")))
                under = "-" if const is None else ("yes" if row["under_bound"] else "no")
                click.echo(f"{key:>10} {name:>10} {what:>12} {value:>11.4g} "
                           f"{'-' if const is None else f'{const:.4g}':>11} {under:>6} {flat_or_falling(slope):>16}")
    click.echo(f"wrote {Path(out) / 'rates.json'} and {Path(out) / 'rates.png'} ({doc['wall_s']:.0f}s)")
