"""The scaling-law protocol behind experiments.scaling: validation, the three parts, fits,
figures and the summary (docs/theory.md §9). experiments/scaling.py is the binary.

Three parts (config.parts):
- lag: per language and d, η_max(d) by bisection on exact tied joint GD and 2/λ_max
  of the Hessian at θ0 (eta_max.csv); runs at η = κ·η_max recorded at every step
  until τ_ε, with the horizon-free lag metrics of docs/theory.md §6b
  (joint_lag.csv); power-law fits of τ_ε and of the half-time ratio in d with
  residuals (joint_fits.csv, joint_lag.png).
- regimes: the outcome class of exact joint GD over (d, η) (joint_regimes.csv/png).
- sample: the three-phase plan on N strings per phase, seeds vmapped, phase 3 through
  the empirical Gram matrix; N*_50, N*_90 with bootstrap intervals
  (sample_complexity.csv, sample_curves.csv) and the rate models C·d, C·d ln d,
  C·d ln² d and C·d^p (rate_models.csv, sample_complexity.png).
Everything is summarised in scaling.md with the wall time of each part (timing.json).
"""

from __future__ import annotations

import math
import time

import jax
import numpy as np

from experiments import common, grids
from lagjax import finite_sample, languages, metrics, scaling, validation
from lagjax import partition as partition_lib

PARTS = ("lag", "regimes", "sample")
LETTERS = {"occurrence": (0,), "any_of": (0, 1), "all_of": (0, 1)}
LABELS = {"occurrence": "occurrence", "any_of": "OR", "all_of": "AND"}
STATUS = {"reaches": "reached", "trapped_reversed": "capped", "stalled": "capped",
          "diverged": "diverged"}
CLASS_COLORS = ("#2ca02c", "#9467bd", "#bdbdbd", "#d62728")


def make_language(name: str, d: int) -> languages.Language:
  return languages.make(name, d, LETTERS[name])


def validate(config) -> None:
  """Every check that needs no compute; raises ValueError naming the field."""
  for part in config.parts:
    validation.check_choice("config.parts entries", part, PARTS)
  for name in config.languages:
    validation.check_choice("config.languages entries", name, tuple(LETTERS))
  validation.check_risk_threshold("config.epsilon (ε)", config.epsilon)
  for field in ("lag_d", "sample_d", "regime_d_range"):
    validation.check_ints(f"config.{field} (alphabet sizes d)", getattr(config, field), 2)
  if len(config.regime_d_range) != 2 or config.regime_d_range[0] > config.regime_d_range[1]:
    raise ValueError(f"config.regime_d_range must be (d_min, d_max) with d_min <= d_max; got "
                     f"{tuple(config.regime_d_range)}.")
  for kappa in config.kappas:
    validation.check_real("config.kappas entries (κ = η/η_max)", kappa, minimum=0.0,
                          strict=True, maximum=1.0, strict_max=True)
  for field in ("max_steps", "bisection_max_steps", "regime_max_steps", "regime_d_per_octave",
                "regime_eta_points", "bisection_iterations", "error_samples"):
    validation.check_int(f"config.{field}", getattr(config, field), 1)
  validation.check_positive("config.bisection_start", config.bisection_start)
  low, high = (validation.check_positive("config.regime_eta_fractions", f)
               for f in config.regime_eta_fractions)
  if not low < high:
    raise ValueError(f"config.regime_eta_fractions must be (low, high) with low < high; got "
                     f"{tuple(config.regime_eta_fractions)}.")
  validation.check_int("config.num_seeds (seeds for the bootstrap)", config.num_seeds, 2)
  validation.check_int("config.bootstrap", config.bootstrap, 100)
  sample_c = [validation.check_positive("config.sample_c entries", c) for c in config.sample_c]
  if len(sample_c) < 2 or np.any(np.diff(sample_c) <= 0):
    raise ValueError(f"config.sample_c must be at least two increasing multipliers of d ln d; "
                     f"got {tuple(config.sample_c)}.")
  for field in ("eta1_over_d", "eta2_over_d2", "eta3", "error_threshold"):
    validation.check_positive(f"config.{field}", getattr(config, field))
  validation.check_int("config.steps (T of phase 3)", config.steps, 1)
  for name in config.languages if {"lag", "regimes"} & set(config.parts) else ():
    for d in (*config.lag_d, *config.regime_d_range):
      make_language(name, d)       # e.g. OR and AND need d >= 3
  for d in config.sample_d:
    make_language("occurrence", d)


# ---------------------------------------------------------------------------
# Joint-GD lag.
# ---------------------------------------------------------------------------


def regime_d_grid(config) -> np.ndarray:
  """d = d_min·2^(k/regime_d_per_octave) rounded, up to d_max (regime_d_range)."""
  low, high = config.regime_d_range
  octaves = np.arange(0, math.floor(math.log2(high / low) * config.regime_d_per_octave + 1e-9) + 1)
  return np.unique(np.round(low * 2.0 ** (octaves / config.regime_d_per_octave)).astype(int))


def joint_part(config, log):
  """η_max, κ runs (part "lag") and the regime sweep (part "regimes"), one compiled
  exact joint-GD run per (language, d) serving all of them."""
  eta_rows, lag_rows, regime_rows = [], [], []
  lag_d = set(config.lag_d) if "lag" in config.parts else set()
  regime_d = set(regime_d_grid(config).tolist()) if "regimes" in config.parts else set()
  fractions = grids.points(*config.regime_eta_fractions, config.regime_eta_points)
  largest_cap = max(config.max_steps, config.bisection_max_steps, config.regime_max_steps)
  for name in config.languages:
    for d in sorted(lag_d | regime_d):
      start = time.time()
      lang = make_language(name, d)
      edge = scaling.edge_of_stability(lang)
      run = jax.jit(scaling.make_joint_gd(lang, epsilon=config.epsilon, max_steps=largest_cap))
      if d in lag_d:
        eta_row, rows = lag_runs(config, lang, run, edge)
        eta_rows.append(eta_row)
        lag_rows += rows
        log(f"lag {LABELS[name]:10s} d={d:5d} 2/λmax={edge:9.4g} η_max={eta_row['eta_max']:8.4g}"
            f" ({eta_row['probes']} probes) τ_ε={[r['tau_eps'] for r in rows]} "
            f"ratio={[round(r['ratio'], 3) for r in rows]} [{time.time() - start:.1f}s]")
      if d in regime_d:
        for fraction in fractions:
          result = run(edge * fraction, config.regime_max_steps)
          regime_rows.append({"language": name, "d": d, "eta": edge * fraction,
                              "eta_over_edge": fraction,
                              "outcome": scaling.OUTCOMES[int(scaling.outcome(result))],
                              "tau_eps": int(result.tau_eps),
                              "final_risk": float(result.final_risk),
                              "margin": float(result.margin)})
        mine = regime_rows[-fractions.size:]
        counts = {c: sum(r["outcome"] == c for r in mine) for c in scaling.OUTCOMES}
        log(f"regimes {LABELS[name]:10s} d={d:5d} {counts} [{time.time() - start:.1f}s]")
  return eta_rows, lag_rows, regime_rows


def lag_runs(config, lang, run, edge):
  """η_max by bisection at the cap bisection_max_steps, then the κ runs recorded at every step."""
  found = scaling.eta_max(lambda eta: run(eta, config.bisection_max_steps),
                          config.bisection_start, iterations=config.bisection_iterations)
  eta_max = found["eta_max"]
  eta_row = {"language": lang.kind, "d": lang.d, "eta_max": eta_max, "eta_fail": found["eta_fail"],
             "two_over_lambda_max": edge, "eta_max_over_edge": eta_max / edge,
             "probes": found["probes"]}
  sizes = partition_lib.of_language(lang).sizes
  rows = []
  # No η reached ε: the run at the bracket's smallest η, to the cap, shows where it ends.
  stuck = run(found["eta_fail"], config.max_steps) if math.isnan(eta_max) else None
  for kappa in config.kappas:
    row = {"language": lang.kind, "d": lang.d, "kappa": kappa, "eta": kappa * eta_max}
    if stuck is not None:
      result = stuck
      rows.append(dict(row, tau_eps=-1, t_half_alpha=-1, t_half_beta=-1, ratio=-1.0,
                       lag_gap=math.nan, status="no_eta_max", final_risk=float(result.final_risk),
                       margin=float(result.margin)))
      continue
    result = run(kappa * eta_max, config.max_steps)
    lag = metrics.horizon_free_lag(result.alpha, result.beta, result.risk,
                                   config.epsilon, weights=sizes)
    rows.append(dict(
        row, tau_eps=int(lag.tau_eps), t_half_alpha=int(lag.half_time_alpha),
        t_half_beta=int(lag.half_time_beta), ratio=float(lag.half_time_ratio),
        lag_gap=float(lag.lag_gap), status=STATUS[scaling.OUTCOMES[int(scaling.outcome(result))]],
        final_risk=float(result.final_risk), margin=float(result.margin)))
  return eta_row, rows


def power_law(d, values):
  """OLS of log value on log d: (exponent, its standard error, prefactor, residuals)."""
  x, y = np.log(np.asarray(d, float)), np.log(np.asarray(values, float))
  design = np.stack([np.ones_like(x), x], axis=1)
  coef, *_ = np.linalg.lstsq(design, y, rcond=None)
  residuals = y - design @ coef
  dof = max(x.size - 2, 1)
  covariance = np.linalg.inv(design.T @ design) * (residuals @ residuals) / dof
  return float(coef[1]), float(np.sqrt(covariance[1, 1])), float(np.exp(coef[0])), residuals


def lag_fits(config, lag_rows):
  fits = []
  for name in config.languages:
    for kappa in config.kappas:
      rows = [r for r in lag_rows if r["language"] == name and r["kappa"] == kappa
              and r["status"] == "reached"]
      for quantity in ("tau_eps", "ratio"):
        usable = [r for r in rows if r[quantity] > 0]
        if len(usable) < 3:
          continue
        d = [r["d"] for r in usable]
        exponent, se, prefactor, residuals = power_law(d, [r[quantity] for r in usable])
        fits.append({"language": name, "kappa": kappa, "quantity": quantity,
                     "exponent": exponent, "exponent_se": se, "prefactor": prefactor,
                     "points": len(usable), "max_abs_log_residual": float(np.abs(residuals).max()),
                     "log_residuals": " ".join(f"{di}:{ri:+.3f}" for di, ri in zip(d, residuals))})
  return fits


def plot_lag(config, lag_rows, fits, path):
  plt = common.pyplot()
  names = list(config.languages)
  fig, axes = plt.subplots(2, len(names), figsize=(4.5 * len(names), 7), squeeze=False)
  colors = plt.cm.viridis(np.linspace(0, 0.9, len(config.kappas)))
  for column, name in enumerate(names):
    for color, kappa in zip(colors, config.kappas):
      rows = [r for r in lag_rows if r["language"] == name and r["kappa"] == kappa]
      for row_index, quantity in enumerate(("tau_eps", "ratio")):
        ax = axes[row_index, column]
        good = [r for r in rows if r["status"] == "reached" and r[quantity] > 0]
        ax.plot([r["d"] for r in good], [r[quantity] for r in good], "o", color=color,
                label=f"κ = {kappa:g}")
        fit = next((f for f in fits if f["language"] == name and f["kappa"] == kappa
                    and f["quantity"] == quantity), None)
        if fit:
          grid = np.geomspace(min(r["d"] for r in good), max(r["d"] for r in good), 50)
          ax.plot(grid, fit["prefactor"] * grid ** fit["exponent"], "-", color=color, lw=1,
                  label=f"∝ d^{fit['exponent']:.2f}")
        bad = [r for r in rows if r["status"] != "reached"]
        if bad:
          ax.plot([r["d"] for r in bad], [1.0] * len(bad), "x", color="red")
    axes[0, column].set(xscale="log", yscale="log", title=f"{LABELS[name]}: τ_ε (ε = "
                        f"{config.epsilon:g})", xlabel="d", ylabel="steps to risk ≤ ε")
    axes[1, column].set(xscale="log", yscale="log", xlabel="d",
                        ylabel="t½(α) / t½(β)  (> 1: attention lags)",
                        title=f"{LABELS[name]}: half-time ratio")
    axes[1, column].axhline(1.0, color="k", lw=0.8, ls=":")
    for ax in axes[:, column]:
      ax.legend(fontsize=6)
  fig.suptitle("exact joint GD from θ0 = 0 at η = κ·η_max(d)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


# ---------------------------------------------------------------------------
# Regime diagram.
# ---------------------------------------------------------------------------


def plot_regimes(config, rows, eta_rows, path):
  plt = common.pyplot()
  names = list(config.languages)
  fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4.5), squeeze=False)
  from matplotlib.colors import ListedColormap
  from matplotlib.patches import Patch
  cmap = ListedColormap(CLASS_COLORS)
  for ax, name in zip(axes[0], names):
    mine = [r for r in rows if r["language"] == name]
    ds = np.unique([r["d"] for r in mine])
    fractions = np.unique([r["eta_over_edge"] for r in mine])
    grid = np.zeros((fractions.size, ds.size))
    for r in mine:
      grid[np.searchsorted(fractions, r["eta_over_edge"]), np.searchsorted(ds, r["d"])] = \
          scaling.OUTCOMES.index(r["outcome"])
    ax.pcolormesh(ds, fractions, grid, shading="nearest", cmap=cmap, vmin=-0.5, vmax=3.5)
    marks = [r for r in eta_rows if r["language"] == name and np.isfinite(r["eta_max"])]
    if marks:
      ax.plot([r["d"] for r in marks], [r["eta_max_over_edge"] for r in marks], "k^-", ms=4,
              label="η_max(d) (bisection)")
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="η = 2/λ_max(θ0)")
    ax.set(xscale="log", yscale="log", xlabel="d", ylabel="η · λ_max(θ0) / 2",
           title=f"{LABELS[name]}: exact joint GD, cap {config.regime_max_steps} steps")
    ax.legend(fontsize=7, loc="lower left")
  handles = [Patch(color=c, label=o.replace("_", " "))
             for c, o in zip(CLASS_COLORS, ("reaches ε", "trapped, attention reversed",
                                             "stalled", "diverged"))]
  fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8)
  fig.tight_layout(rect=(0, 0, 1, 0.93))
  fig.savefig(path, dpi=120)
  plt.close(fig)


# ---------------------------------------------------------------------------
# Finite-sample rate.
# ---------------------------------------------------------------------------


def sample_grid(config, d):
  return np.unique(np.maximum(1, np.round(np.asarray(config.sample_c) * d * math.log(d)))
                   .astype(int))


def sample_part(config, log):
  rows, curves, replicates = [], [], {}
  key = jax.random.key(config.seed)
  for d in config.sample_d:
    start = time.time()
    lang = make_language("occurrence", d)
    grid = sample_grid(config, d)
    curve = jax.jit(finite_sample.make_success_curve(
        lang, grid, eta1=config.eta1_over_d * d, eta2=config.eta2_over_d2 * d**2,
        eta3=config.eta3, steps=config.steps, error_threshold=config.error_threshold,
        error_samples=config.error_samples))
    _, success = curve(jax.random.split(jax.random.fold_in(key, d), config.num_seeds))
    success = np.asarray(success)
    rate = success.mean(0)
    try:
      finite_sample.check_bracket(d, grid, rate)
    except ValueError as error:
      raise ValueError(f"config.sample_c (N = c·d ln d): {error}") from error
    row = {"d": d}
    for level in (50, 90):
      estimate, low, high, draws = finite_sample.n_star(grid, success, level / 100,
                                                        resamples=config.bootstrap, key=d)
      row.update({f"n_star_{level}": estimate, f"n_star_{level}_lo": low,
                  f"n_star_{level}_hi": high})
      replicates[(d, level)] = draws
    rows.append(row)
    for n, r in zip(grid, rate):
      curves.append({"d": d, "N": int(n), "N_over_d_ln_d": n / (d * math.log(d)), "success": r,
                     "success_se": math.sqrt(r * (1 - r) / config.num_seeds)})
    log(f"sample d={d:4d} N grid {grid[0]}…{grid[-1]} ({grid.size}) success "
        f"{np.round(rate, 2).tolist()} N*_50={row['n_star_50']:.4g} "
        f"[{row['n_star_50_lo']:.4g}, {row['n_star_50_hi']:.4g}] N*_90={row['n_star_90']:.4g} "
        f"[{time.time() - start:.1f}s]")
  return rows, curves, replicates


def rate_models(config, rows, replicates):
  """Fits of N*_50 and N*_90 by each rate model, with bootstrap intervals of C and p."""
  d = np.asarray([r["d"] for r in rows], float)
  results = []
  if d.size < 3:   # two parameters and a residual need three alphabet sizes
    return results
  for level in (50, 90):
    estimate = np.asarray([r[f"n_star_{level}"] for r in rows])
    if not np.all(np.isfinite(estimate) & (estimate > 0)):
      continue
    draws = np.stack([replicates[(int(di), level)] for di in d], axis=1)   # (B, K)
    usable = np.all(np.isfinite(draws) & (draws > 0), axis=1)
    # σ of log N* from the bootstrap spread (floored at 0.05: the interpolation
    # between grid points 2^(1/2) apart is not resolved more finely than this).
    sigma = np.maximum(np.std(np.log(draws[usable]), axis=0), 0.05)
    fits = finite_sample.fit_rate_models(d, estimate, sigma)
    boot = [finite_sample.fit_rate_models(d, b, sigma) for b in draws[usable]]
    best_aic = min(f["aic"] for f in fits.values())
    weights = {k: math.exp(-(f["aic"] - best_aic) / 2) for k, f in fits.items()}
    total = sum(weights.values())
    for model_name, fit in fits.items():
      constants = np.asarray([b[model_name]["C"] for b in boot])
      row = {"quantity": f"n_star_{level}", "model": model_name, "C": fit["C"],
             "C_lo": float(np.percentile(constants, 2.5)),
             "C_hi": float(np.percentile(constants, 97.5)),
             "p": fit.get("p", {"C d": 1.0}.get(model_name, math.nan)),
             "p_lo": math.nan, "p_hi": math.nan, "chi2": fit["chi2"], "dof": fit["dof"],
             "delta_aic": fit["aic"] - best_aic, "akaike_weight": weights[model_name] / total,
             "log_residuals": " ".join(f"{int(di)}:{ri:+.3f}" for di, ri in
                                       zip(d, fit["residuals"]))}
      if model_name == "C d^p":
        exponents = np.asarray([b[model_name]["p"] for b in boot])
        row.update(p_lo=float(np.percentile(exponents, 2.5)),
                   p_hi=float(np.percentile(exponents, 97.5)))
      results.append(row)
  return results


def plot_samples(config, rows, curves, models, path):
  plt = common.pyplot()
  fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
  colors = plt.cm.viridis(np.linspace(0, 0.9, len(config.sample_d)))
  for color, d in zip(colors, config.sample_d):
    mine = [c for c in curves if c["d"] == d]
    left.errorbar([c["N_over_d_ln_d"] for c in mine], [c["success"] for c in mine],
                  yerr=[c["success_se"] for c in mine], color=color, marker="o", ms=3,
                  capsize=2, label=f"d = {d}")
  left.axhline(0.5, color="k", ls=":", lw=0.8)
  left.axhline(0.9, color="k", ls=":", lw=0.8)
  left.set(xscale="log", xlabel="N / (d ln d)", ylabel=f"P(0-1 error ≤ {config.error_threshold:g})",
           title=f"three-phase plan, N strings per phase ({config.num_seeds} seeds)")
  left.legend(fontsize=7)
  d = np.asarray([r["d"] for r in rows], float)
  grid = np.geomspace(d.min(), d.max(), 100)
  for level, marker in ((50, "o"), (90, "s")):
    value = np.asarray([r[f"n_star_{level}"] for r in rows])
    low = np.asarray([r[f"n_star_{level}_lo"] for r in rows])
    high = np.asarray([r[f"n_star_{level}_hi"] for r in rows])
    scale = d * np.log(d)
    right.errorbar(d, value / scale, yerr=[np.clip(value - low, 0, None) / scale,
                                           np.clip(high - value, 0, np.nanmax(value)) / scale],
                   fmt=marker, capsize=3, label=f"N*_{level}")
    for model in (m for m in models if m["quantity"] == f"n_star_{level}"):
      shape = {"C d": grid, "C d ln d": grid * np.log(grid),
               "C d ln^2 d": grid * np.log(grid) ** 2}.get(model["model"])
      curve = model["C"] * (shape if shape is not None else grid ** model["p"])
      right.plot(grid, curve / (grid * np.log(grid)), lw=0.8,
                 label=f"{model['model']} (N*_{level}, w={model['akaike_weight']:.2f})")
  right.set(xscale="log", yscale="log", xlabel="d", ylabel="N* / (d ln d)",
            title="N* (95% bootstrap intervals) and rate models")
  right.legend(fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


# ---------------------------------------------------------------------------


def summary(config, timing, eta_rows, lag_rows, fits, regime_rows, sample_rows, models) -> str:
  lines = ["# Scaling laws of the exact dynamics", "",
           "Written by `python -m experiments.scaling --config experiments/configs/scaling.py`.",
           "", "Wall and process CPU time per part (s): "
           + ", ".join(f"{k} {v:.0f}" for k, v in timing.items()),
           ""]
  if eta_rows:
    lines += ["## η_max(d) and 2/λ_max(θ0)", "", common.markdown_table(eta_rows),
              "## Joint-GD lag at η = κ·η_max (horizon-free metrics, docs/theory.md §6b)", "",
              common.markdown_table(lag_rows)]
  if fits:
    lines += ["## Power-law fits in d (OLS in log-log; residuals in log units)", "",
              common.markdown_table(fits)]
  if regime_rows:
    lines += ["## Regime diagram: outcome counts", ""]
    for name in config.languages:
      mine = [r for r in regime_rows if r["language"] == name]
      counts = {c: sum(r["outcome"] == c for r in mine) for c in scaling.OUTCOMES}
      lines.append(f"- {LABELS[name]}: {counts}")
    lines.append("")
  if sample_rows:
    lines += ["## Finite-sample rate: N*_50, N*_90 (95% bootstrap intervals over seeds)", "",
              common.markdown_table(sample_rows)]
  if models:
    lines += ["## Rate models", "", common.markdown_table(models)]
  return "\n".join(lines)
