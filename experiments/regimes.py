"""Exact step-size regimes of the three-phase plan from θ0 = 0 against d (docs/theory.md §8).

  python -m experiments.regimes --config experiments/configs/regimes.py --workdir runs/regimes

Writes to --workdir:
  regimes.csv / regimes.md  per d: b, c, Δ_ε, the wall η1_max = b/|c|, inf η1η2 on the
                            boundary, the η3 limit, the paper's margin Δ(d, d²)/Δ_ε and the
                            phase-3 steps it needs; power-law fits with residuals and range;
  collapse.png              phase diagrams on the Δ axis (one R*(Δ) curve per d), and R*(Δ)
                            on normalised axes across d;
  boundary.png              exact boundaries η2_min(η1) with the paper's point (d, d²);
  lengths.csv / lengths.md / lengths.png   bounded against unbounded lengths at equal mean;
  kqv.csv / kqv.md / kqv.png               the KQV form from init scale s (item 5).

Any other language with an exact moments route (lj.regimes.exact_route: a regular language,
a user's automaton file or factory), or a tuple of specs in config.languages, writes instead
  languages.csv / languages.md / languages.png   per language: the three-phase regime at a
                            fixed ε (config.eps) and at the language's own midpoint ε between
                            its output-only floor R*(0) and min_Δ R*(Δ) (docs/theory.md §8.8).

  python -m experiments.regimes --config experiments/configs/regimes_languages.py \
      --workdir docs/results/regimes
"""

from __future__ import annotations

import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from ml_collections import config_flags

import lagjax as lj
from experiments import cli, common, grids
from lagjax import regimes

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/regimes", "Where to write tables and figures.")

LENGTH_LAWS = {"geometric": lambda m: lj.geometric(1.0 / m),
               "shifted_poisson": lambda m: lj.shifted_poisson(m - 1.0),
               "fixed": lambda m: lj.fixed(int(m))}


# (column, fit kinds): power C·d^p, or log A + B ln d for the columns that grow like ln d.
FITS = (("b", ("power",)), ("abs_c", ("power",)), ("eta1_max", ("power",)),
        ("min_eta1_eta2", ("power",)), ("paper_margin", ("power",)), ("paper_steps", ("power",)),
        ("delta_eps", ("power", "log")), ("b_d2", ("log",)), ("abs_c_d4", ("log",)))


def d_values(config) -> np.ndarray:
  """The d grid: num integers log-spaced from d_min to d_max, validated naming the field."""
  grid = config.d_grid
  lj.validation.check_int("config.d_grid.num (an empty d grid has num = 0)", grid.num, 1)
  d_min = lj.validation.check_int("config.d_grid.d_min (alphabet size d)", grid.d_min, 2,
                                  integral_floats=True)
  lj.validation.check_int(f"config.d_grid.d_max (>= d_min = {d_min})", grid.d_max, d_min,
                          integral_floats=True)
  ds = np.unique(np.round(grids.points(d_min, grid.d_max, grid.num)).astype(int))
  if ds.size < 4:
    raise ValueError(f"config.d_grid must give at least 4 distinct alphabet sizes d (the scaling "
                     f"fits use 4 or more); num = {grid.num} from d_min = {d_min} to d_max = "
                     f"{grid.d_max} gives {ds.size}.")
  return ds


def validate(config) -> np.ndarray | list[tuple[str, lj.Language]]:
  """Checks every field before any compute. Returns the d grid (an occurrence-family
  config.language, empty config.languages), else the (spec, language) pairs of the
  language table, each checked to have an exact moments route."""
  common.config_length(config)
  lj.validation.check_risk_threshold("config.eps (ε)", config.eps)
  lj.validation.check_positive("config.eta3", config.eta3)
  lj.validation.check_real("config.fit_rtol", config.fit_rtol, minimum=0.0, strict=True)
  for name in ("collapse_d", "boundary_d"):
    lj.validation.check_ints(f"config.{name}", config[name], 2)
  lj.validation.check_int("config.collapse_points", config.collapse_points, 2)
  lj.validation.check_int("config.collapse_steps", config.collapse_steps, 1)
  lj.validation.check_int("config.lengths.d", config.lengths.d, 2)
  if not config.lengths.laws or any(law not in LENGTH_LAWS for law in config.lengths.laws):
    raise ValueError(f"config.lengths.laws must be a non-empty tuple of {tuple(LENGTH_LAWS)}; "
                     f"got {config.lengths.laws!r}.")
  lj.validation.check_ints("config.lengths.means", config.lengths.means, 2)
  kqv = config.kqv
  lj.validation.check_int("config.kqv.d", kqv.d, 2)
  lj.validation.check_int("config.kqv.seeds", kqv.seeds, 1)
  lj.validation.check_int("config.kqv.eta2_num", kqv.eta2_num, 2)
  if len(kqv.scales) < 2 or any(not (isinstance(s, float) and 0 < s < math.inf)
                                for s in kqv.scales):
    raise ValueError(f"config.kqv.scales must be a tuple of at least 2 finite floats > 0 (the "
                     f"scaling fit needs two); got {kqv.scales!r}.")
  lj.validation.check_positive("config.kqv.eta1_over_d", kqv.eta1_over_d)
  lj.validation.check_positive("config.kqv.eta2_min", kqv.eta2_min)
  lj.validation.check_real("config.kqv.eta2_max", kqv.eta2_max, minimum=kqv.eta2_min, strict=True)
  ds = d_values(config)
  if config.languages:
    return [table_language(config, spec, f"config.languages[{k}]", int(ds[0]))
            for k, spec in enumerate(config.languages)]
  try:
    # The language and its length law build (a file or a factory can give any language).
    lang = language(config, int(ds[0]))
  except ValueError as error:
    if config.language.endswith(".json") or config.language.partition(":")[2].isidentifier():
      raise ValueError(f"config.language: {error}") from None
    lang = None   # a family of its own alphabet size (parity, tomita): built at its own d
  if isinstance(lang, lj.languages.PresenceLabels):
    return ds     # the occurrence family: the laws in d
  return [table_language(config, config.language, "config.language", int(ds[0]))]


def table_language(config, spec: str, field: str, d_min: int) -> tuple[str, lj.Language]:
  """(spec, language) for the language table: built at its own alphabet size (at d_min for
  a family or factory that needs one), with an exact moments route (regimes.exact_route);
  else one line naming `field`."""
  options = {"letters": tuple(config.letters), "length": common.config_length(config)}
  try:
    try:
      lang = lj.languages.from_spec(spec, None, **options)
    except ValueError:
      lang = lj.languages.from_spec(spec, d_min, **options)
    regimes.exact_route(lang)
  except ValueError as error:
    raise ValueError(f"{field}: {error}") from None
  return spec, lang


def language(config, d, **options):
  """The config's language at alphabet size d, with config.length unless `options` give one."""
  options.setdefault("length", common.config_length(config))
  return lj.languages.from_spec(config.language, int(d), letters=tuple(config.letters), **options)


def regime_rows(config, ds) -> tuple[list[dict], dict]:
  """One row per d; also the Regime objects by d."""
  rows, by_d = [], {}
  progress = common.progress_reporter("alphabet sizes d")
  for k, d in enumerate(ds):
    progress(k, len(ds))
    regime = regimes.three_phase_regime(language(config, d), config.eps, eta3=config.eta3)
    paper_delta = float(regime.delta_of(float(d), float(d) ** 2))
    by_d[int(d)] = regime
    rows.append({"d": int(d), "b": regime.b, "c": regime.c, "abs_c": abs(regime.c),
                 "b_d2": regime.b * d**2, "abs_c_d4": abs(regime.c) * float(d) ** 4,
                 "delta_eps": regime.delta_eps, "eta1_max": regime.eta1_max,
                 "min_eta1_eta2": regime.min_product, "eta3_limit": regime.eta3_limit,
                 "risk_floor": regime.risk_floor, "paper_delta": paper_delta,
                 "paper_margin": paper_delta / regime.delta_eps,
                 "paper_steps": float(regime.steps_needed(float(d), float(d) ** 2)),
                 "monotone": regime.monotone})
  progress(len(ds), len(ds))
  return rows, by_d


def fit(ds, values, rtol: float, kind: str = "power") -> dict:
  """Least-squares fit on the largest d first: power (log y = log C + p log d) or log
  (y = A + B ln d). Returns the fit on the widest tail [d_from, d_max] whose every relative
  residual is <= rtol (at least 4 points), else on the last 4 points, with its residual."""
  ds, values = np.asarray(ds, float), np.asarray(values, float)
  best = None
  for start in range(len(ds) - 4, -1, -1):
    x = np.log(ds[start:])
    y = np.log(values[start:]) if kind == "power" else values[start:]
    slope, intercept = np.polyfit(x, y, 1)
    model = slope * x + intercept
    predicted = np.exp(model) if kind == "power" else model
    residual = float(np.max(np.abs(predicted / values[start:] - 1)))
    candidate = {"kind": kind, "slope": float(slope),
                 "constant": float(np.exp(intercept)) if kind == "power" else float(intercept),
                 "max_rel_residual": residual, "d_from": int(ds[start]), "d_to": int(ds[-1]),
                 "holds": residual <= rtol}
    if best is None or candidate["holds"]:
      best = candidate
  return best


def fit_rows(rows, rtol) -> list[dict]:
  ds = [r["d"] for r in rows]
  out = []
  for name, kinds in FITS:
    for kind in kinds:
      result = fit(ds, [r[name] for r in rows], rtol, kind)
      law = (f"{result['constant']:.4g} · d^{result['slope']:.4f}" if kind == "power" else
             f"{result['constant']:.4g} + {result['slope']:.4f} ln d")
      out.append({"quantity": name, "law": law, "max_rel_residual": result["max_rel_residual"],
                  "range": f"{result['d_from']}..{result['d_to']}",
                  "holds_to_rtol": result["holds"]})
  return out


ROUNDOFF_RISK = 1e-13   # float64 roundoff of a risk summed from O(1) terms, with margin


def collapse_figure(config, regime_by_d, path) -> list[dict]:
  """Left: sweep-range grids at each collapse d, final risk at T = collapse_steps against Δ,
  with R*(Δ). Right: R*(Δ)/R*(0) against Δ/Δ_ε across d (regime_by_d: the T = ∞ regime of
  every collapse_d and boundary_d). Returns the collapse residuals."""
  plt = common.pyplot()
  eta1 = grids.points(1.0, 1e4, config.collapse_points)
  eta2 = grids.points(1.0, 1e6, config.collapse_points)
  grid1, grid2 = (g.ravel() for g in np.meshgrid(eta1, eta2, indexing="ij"))
  fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
  residuals = []
  for d in config.collapse_d:
    regime = regimes.three_phase_regime(language(config, d), config.eps, eta3=config.eta3,
                                 steps=config.collapse_steps)
    risk = np.asarray(regime.risk_of(grid1, grid2))
    delta = np.asarray(regime.delta_of(grid1, grid2))
    curve = np.asarray(regime.risk_of_delta(delta))
    gap = np.abs(risk - curve)
    near = (curve <= 10 * config.eps) & (curve >= 0.1 * config.eps)
    residuals.append({"d": d, "T": config.collapse_steps, "points": risk.size,
                      "max_gap_delta_nonnegative": float(gap[delta >= 0].max(initial=0.0)),
                      "max_gap_beyond_wall": float(gap[delta < 0].max(initial=0.0)),
                      "max_gap_near_boundary": float(gap[near].max(initial=0.0))})
    line = left.scatter(delta, np.maximum(risk, 1e-16), s=3, alpha=0.4, label=f"d = {d} grid")
    order = np.argsort(delta)
    left.plot(delta[order], np.maximum(curve[order], 1e-16), color=line.get_facecolor()[0],
              alpha=1.0, lw=1)
  left.axhline(config.eps, color="k", ls=":", lw=1, label=f"ε = {config.eps:g}")
  left.set_xscale("symlog", linthresh=1.0)
  left.set(xlim=(-1e4, 1e6), yscale="log", xlabel="Δ = η1η2(b + cη1) (symlog)",
           ylabel=f"final risk, T = {config.collapse_steps}",
           title="phase diagrams on the invariant axis (dots: grid, line: R*(Δ))")
  left.legend(fontsize=7)
  for d in sorted(set(config.collapse_d) | set(config.boundary_d)):
    regime = regime_by_d[d]
    x = np.linspace(0.0, 3.0, 200)
    risk = np.asarray(regime.risk_of_delta(x * regime.delta_eps))
    # R* is ½βᵀHβ - gᵀβ + ½, a difference of O(1) terms: below ROUNDOFF_RISK it is roundoff.
    right.plot(x, np.where(risk > ROUNDOFF_RISK, risk, np.nan) / regime.risk_floor,
               label=f"d = {d}")
  right.set(yscale="log", xlabel="Δ / Δ_ε", ylabel="R*(Δ) / R*(0)",
            title=f"R*(Δ) on normalised axes (R* < {ROUNDOFF_RISK:g}: roundoff, not drawn)")
  common.save_figure(fig, path, legend=right)
  return residuals


def boundary_figure(config, regime_by_d, path) -> None:
  plt = common.pyplot()
  fig, ax = plt.subplots(figsize=(6.5, 4.8))
  for d in config.boundary_d:
    regime = regime_by_d[d]
    eta1 = grids.points(1e-4 * regime.eta1_max, 0.999 * regime.eta1_max, 300)
    (line,) = ax.plot(eta1, regime.eta2_min(eta1), label=f"d = {d}")
    ax.axvline(regime.eta1_max, color=line.get_color(), ls=":", lw=0.8)
    ax.plot([d], [d**2], marker="*", ms=10, color=line.get_color(), ls="none")
  ax.set(xscale="log", yscale="log", xlabel="η1", ylabel="η2_min(η1)",
         title=f"exact boundary R*(Δ) = ε = {config.eps:g}; ★ paper (d, d²); ⋮ wall b/|c|")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=130)
  plt.close(fig)


def uniform_attention_errors(lang, floor_beta) -> tuple[float, float]:
  """Exact 0-1 errors at α = 0 (uniform attention) of the least-squares β* (`floor_beta`,
  where output-only training converges) and of the rule β = (1, -1/(2m)) (m the mean
  length), which separates c_a >= 1 from c_a = 0 when every string has length m.

  At α = 0, f = β_σ + (β_a - β_σ) c_a/n: a string without the letter is an error iff
  β_σ >= 0, one with c_a >= 1 iff c_a <= τ n, τ = -β_σ/(β_a - β_σ). So
  P(error) = Σ_n P(n) [(1-π)^n 1{β_σ >= 0} + P(1 <= c_a <= ⌊τ n⌋ | n)], c_a | n ~ Bin(n, π),
  summed to the n with P(n > n_max) <= 1e-13 (the dropped tail bounds the error). It agrees
  with the threshold route of lagjax/risk/error.py to 1e-12 (checked at means 5 and 50).
  """
  import scipy.stats  # here, not at the top: 2.3 s of import that a refused config never needs

  n = np.arange(1, lj.lengths.truncation_length(lang.length, 1e-13) + 1)
  pmf = np.exp(np.asarray(lang.length.log_pmf(n.astype(np.float64))))
  pi = lang.pi_array[lang.letters[0]]
  errors = []
  for beta_a, beta_other in (floor_beta, (1.0, -1.0 / (2.0 * lang.length.mean))):
    cut = np.floor(-beta_other / (beta_a - beta_other) * n)
    positives = np.where(cut >= 1, scipy.stats.binom.cdf(cut, n, pi) - (1 - pi) ** n, 0.0)
    errors.append(float(pmf @ ((1 - pi) ** n * (beta_other >= 0) + positives)))
  return tuple(errors)


LENGTHS_NOTE = """\
Uniform attention (α = 0) predicts f = β_σ + (β_a - β_σ) c_a/n, a threshold τ on the letter's
frequency c_a/n. Columns: the output-only floor of the squared risk (min over β at α = 0);
the exact 0-1 error at α = 0 of the least-squares β* (where output-only training converges)
and of the rule β = (1, -1/(2m)) (τ = 1/(2m+1)). With fixed length n = m the rule, and here
β* too, has zero 0-1 error: c_a >= 1 against c_a = 0 at known n. With unbounded lengths no β
reaches zero error: every τ > 0 misclassifies the strings with 1 <= c_a <= τn, which have
positive probability; the infimum over β is 0 and is not attained. The squared-risk floor is
positive for every law: least squares on c_a/n cannot fit the ±1 step. b, c, Δ_ε, η1_max: the
three-phase law of regimes.md for each length law (no wall, η1_max = inf, when c > 0).
"""


def lengths_table(config, workdir) -> tuple[list[dict], str]:
  plt = common.pyplot()
  rows, curves = [], {}
  d = config.lengths.d
  for mean in config.lengths.means:
    for name in config.lengths.laws:
      lang = lj.occurrence(d, length=LENGTH_LAWS[name](mean))
      regime = regimes.three_phase_regime(lang, config.eps, eta3=config.eta3)
      error_ls, error_rule = uniform_attention_errors(lang, regime.floor_beta)
      rows.append({"mean_length": mean, "law": name, "P(y=+1)": lang.positive_rate(),
                   "output_only_floor": regime.risk_floor,
                   "uniform_error_least_squares": error_ls,
                   "uniform_error_rule_1/(2m)": error_rule, "b": regime.b, "c": regime.c,
                   "delta_eps": regime.delta_eps, "eta1_max": regime.eta1_max})
      curves[(mean, name)] = regime
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
  x = np.linspace(0.0, 15.0, 300)
  for name, style in zip(config.lengths.laws, ("-", "--", ":")):
    for k, mean in enumerate(config.lengths.means):
      axes[0].plot(x, np.maximum(np.asarray(curves[(mean, name)].risk_of_delta(x)), 1e-16),
                   ls=style, color=f"C{k}", label=f"{name}, mean {mean}")
    axes[1].plot(config.lengths.means, [curves[(m, name)].delta_eps for m in config.lengths.means],
                 marker="o", ls=style, label=name)
  axes[0].axhline(config.eps, color="k", lw=0.8)
  axes[0].set(yscale="log", xlabel="Δ", ylabel="R*(Δ)",
              title=f"R*(Δ) at d = {d} (colour: mean length; line: law)")
  axes[0].legend(fontsize=6, ncol=2)
  axes[1].set(xscale="log", xlabel="mean length", ylabel="Δ_ε",
              title=f"smallest Δ with R* <= ε = {config.eps:g}")
  axes[1].legend(fontsize=8)
  fig.tight_layout()
  path = os.path.join(workdir, "lengths.png")
  fig.savefig(path, dpi=130)
  plt.close(fig)
  return rows, path


def log_edges(values) -> np.ndarray:
  """Cell edges of a log-spaced axis: geometric midpoints, extended by half a step."""
  logs = np.log(np.asarray(values, float))
  middle = 0.5 * (logs[1:] + logs[:-1])
  return np.exp(np.concatenate([[2 * logs[0] - middle[0]], middle, [2 * logs[-1] - middle[-1]]]))


def kqv_table(config, workdir) -> tuple[list[dict], list[dict], str]:
  """The KQV three-phase plan: exact α after its first two steps (quadratic in η2), then
  R*(α) (phase 3 to convergence at that α). Returns per-(seed, s) rows, scaling fits, figure."""
  plt = common.pyplot()
  kqv = config.kqv
  lang = lj.occurrence(kqv.d)
  eta1 = kqv.eta1_over_d * kqv.d
  step = regimes.kqv_attention_step(lang, lj.models.kqv.init_kqv(jax.random.key(0), kqv.d)[1])
  units = [lj.models.kqv.init_kqv(jax.random.split(jax.random.key(seed))[0], kqv.d, scale=1.0)[0]
           for seed in range(kqv.seeds)]
  scales = np.asarray(kqv.scales)
  params = jax.tree_util.tree_map(
      lambda *leaves: jnp.stack([s * leaf for leaf in leaves for s in scales]), *units)
  alpha0, alpha1, alpha2 = (np.asarray(a) for a in jax.jit(jax.vmap(step, in_axes=(0, None)))(
      params, eta1))
  eta2 = grids.points(kqv.eta2_min, kqv.eta2_max, kqv.eta2_num)
  alpha = (alpha0[:, None] + eta2[None, :, None] * alpha1[:, None]
           + eta2[None, :, None] ** 2 * alpha2[:, None])
  risk = np.asarray(regimes.limit_risk(lang)(alpha)).reshape(kqv.seeds, scales.size, -1)

  def margin(a):
    return a[..., 0] - a[..., 1:].mean(-1)

  coefficients = [margin(a).reshape(kqv.seeds, scales.size) for a in (alpha0, alpha1, alpha2)]
  success = risk <= config.eps
  rows = []
  for seed in range(kqv.seeds):
    for j, s in enumerate(scales):
      ok = eta2[success[seed, j]]
      rows.append({"seed": seed, "s": float(s), "delta0": float(coefficients[0][seed, j]),
                   "delta_linear": float(coefficients[1][seed, j]),
                   "delta_quadratic": float(coefficients[2][seed, j]),
                   "succeeds": bool(ok.size), "eta2_success_min": float(ok.min()) if ok.size
                   else math.nan, "eta2_success_max": float(ok.max()) if ok.size else math.nan})
  fits = []
  for k, name in ((1, "|Δ linear coefficient|"), (2, "|Δ quadratic coefficient|"),
                  (0, "|Δ0| (init margin)")):
    median = np.median(np.abs(coefficients[k]), axis=0)
    slope, intercept = np.polyfit(np.log(scales), np.log(median), 1)
    residual = float(np.max(np.abs(np.exp(slope * np.log(scales) + intercept) / median - 1)))
    fits.append({"quantity": f"median over seeds of {name}", "law":
                 f"{math.exp(intercept):.4g} · s^{slope:.3f}", "max_rel_residual": residual})
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
  fraction = success.mean(0)
  mesh = axes[0].pcolormesh(log_edges(scales), log_edges(eta2), fraction.T, cmap="viridis",
                            vmin=0, vmax=1)
  fig.colorbar(mesh, ax=axes[0], label=f"fraction of {kqv.seeds} inits with R* <= ε")
  axes[0].set(xscale="log", yscale="log", xlabel="init scale s", ylabel="η2",
              title=f"KQV three-phase success, d = {kqv.d}, η1 = {eta1:g}")
  for j, s in enumerate(scales):
    for seed in range(kqv.seeds):
      delta = coefficients[0][seed, j] + eta2 * coefficients[1][seed, j] \
          + eta2**2 * coefficients[2][seed, j]
      axes[1].plot(eta2, delta, color=plt.cm.viridis(j / max(scales.size - 1, 1)), lw=0.7,
                   label=f"s = {s:g}" if seed == 0 else None)
  axes[1].axhline(0.0, color="k", lw=0.5)
  axes[1].set(xscale="log", yscale="symlog", xlabel="η2", ylabel="Δ after the attention step",
              title="Δ = Δ0 + η2 L1 + η2² L2 (exact), one line per init")
  axes[1].legend(fontsize=7)
  fig.tight_layout()
  path = os.path.join(workdir, "kqv.png")
  fig.savefig(path, dpi=130)
  plt.close(fig)
  return rows, fits, path


DELTA_GRID = np.logspace(-3, 6, 91)   # |Δ| points (10 a decade) where R*(Δ) is tabulated
FLAT_C = 1e-12                        # |c| <= FLAT_C·b: c is roundoff (no wall, no η1 gain)
STILL = 1e-12                         # centred |a1|, |a2| below this: roundoff of O(1) moments


def reachable_deltas(b: float, c: float) -> np.ndarray:
  """The Δ = η1η2(b + cη1) of the grid that some η1, η2 > 0 reach: the sign of b for small
  η1, and the other sign too beyond the wall (c of the other sign)."""
  c = 0.0 if abs(c) <= FLAT_C * abs(b) else c
  signs = {math.copysign(1.0, b)} | ({math.copysign(1.0, c)} if c else set())
  return np.concatenate([sign * DELTA_GRID for sign in sorted(signs)])


def language_row(config, spec: str, lang) -> tuple[dict, tuple | None]:
  """One row of the language table (docs/theory.md §8.8): the regime at config.eps and at the
  midpoint ε between the output-only floor R*(0) and the grid's min R*(Δ); also the R*(Δ)
  curve (Δ, R*) for the figure (None with two invariant coordinates)."""
  started = time.time()
  regime = regimes.three_phase_regime(lang, config.eps, eta3=config.eta3)
  row = {"language": spec, "describe": lang.describe(), "route": regime.route,
         "coordinates": regime.coordinates, "b": regime.b, "c": regime.c,
         "eta1_max": regime.eta1_max, "eta1_stable": regime.eta1_stable,
         "output_floor": regime.risk_floor}
  eta1 = np.asarray([config.table_eta1])
  a1, a2 = (np.asarray(a) - np.mean(a) for a in regime.coefficients)  # α modulo constants
  row.update(a1_norm=float(np.linalg.norm(a1)), a2_norm=float(np.linalg.norm(a2)))
  if max(row["a1_norm"], row["a2_norm"]) <= STILL:
    # α = η1η2(a1 + η1 a2) = 0 for every (η1, η2): the plan ends at the output-only floor
    # (b, c, the wall b/|c| and the regime's count of coordinates are then made of roundoff,
    # which differs between XLA builds: not shown; coordinates 0, α does not move).
    floor = float(np.asarray(regime.risk_of(eta1, np.zeros(1)))[0])
    row.update(coordinates=0, b=math.nan, c=math.nan, eta1_max=math.nan, output_floor=floor,
               learns_at_eps=bool(floor <= config.eps), seconds=time.time() - started,
               note=f"a1 = a2 = 0 to roundoff (norms <= {STILL:g}): the first two steps leave "
                    "α = 0, so every (η1, η2) ends at the output-only floor R*(0)")
    return row, None
  if regime.coordinates != 1:
    # No Δ law: α moves in two coordinates; success read off the η2 scan at one η1.
    intervals = regime.eta2_intervals(eta1)[0]
    row.update(learns_at_eps=bool(intervals.size), note=regime.note,
               seconds=time.time() - started)
    return row, None
  deltas = reachable_deltas(regime.b, regime.c)
  curve = np.asarray(regime.risk_of_delta(deltas))
  best = int(np.argmin(curve))
  row.update(best_risk=float(curve[best]), best_delta=float(deltas[best]),
             learns_at_eps=bool(math.isfinite(regime.delta_eps)
                                and np.any(np.sign(deltas) == np.sign(regime.delta_eps))))
  if row["learns_at_eps"] and regime.monotone and regime.c <= FLAT_C * abs(regime.b):
    row["min_eta1_eta2_at_eps"] = regime.min_product   # Δ_ε/b, approached as η1 → 0
  notes = []
  if not row["best_risk"] < regime.risk_floor * (1 - 1e-9):
    notes.append("attention never lowers R* below the output-only floor on the Δ grid")
    row.update(eps_mid=math.nan, note="; ".join(notes), seconds=time.time() - started)
    return row, (deltas, curve)
  eps_mid = 0.5 * (regime.risk_floor + row["best_risk"])
  mid = regimes.three_phase_regime(lang, eps_mid, eta3=config.eta3)
  flat = abs(mid.c) <= FLAT_C * abs(mid.b)
  # inf η1η2 on {Δ >= Δ_ε}: Δ_ε/b as η1 → 0 (c <= 0); with c ≈ 0 every η1 attains it.
  row.update(eps_mid=eps_mid, delta_eps_mid=mid.delta_eps,
             min_eta1_eta2=mid.min_product if (flat or mid.c < 0) else 0.0,
             single_crossing=mid.monotone)
  if flat:
    notes.append("c ≈ 0: Δ = b·η1η2, so success depends on η1η2 alone")
  elif mid.c > 0:
    notes.append("c > 0: η1η2 → 0 as η1 → ∞ (min_eta1_eta2 = 0, not attained)")
  if not mid.monotone:
    intervals = mid.eta2_intervals(eta1)[0]
    slope = config.table_eta1 * (mid.b + mid.c * config.table_eta1)
    notes.append("not a single crossing: success for η2 in "
                 + ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in intervals)
                 + f" at η1 = {config.table_eta1:g} (Δ in "
                 + ", ".join(f"[{lo * slope:.4g}, {hi * slope:.4g}]" for lo, hi in intervals)
                 + "): too large an attention step overshoots")
  row.update(note="; ".join(notes), seconds=time.time() - started)
  return row, (deltas, curve)


LANGUAGES_NOTE = """\
The three-phase plan from θ0 = 0 on the plain model (CLS query, no position tables), exact
at T = ∞ (phase 3 to the minimiser at the learned α; docs/theory.md §8.8). route: the exact
moments route; coordinates: 1 when α moves along one Δ = η1η2(b + cη1), 0 when it does not
move; a1_norm, a2_norm:
the norms of a1, a2 modulo constants (α = η1η2(a1 + η1 a2); both 0 to roundoff: the first
two steps never move attention, whatever η1, η2, and the row ends there). eta1_max: the wall
b/|c| (inf: none); eta1_stable: 2/λ_max of the output phase at α = 0. output_floor: R*(0),
the output-only floor; best_risk: the smallest R*(Δ) over the reachable Δ grid (|Δ| in
[1e-3, 1e6], 10 points a decade), at best_delta. learns_at_eps: whether some (η1, η2) reaches
R* <= ε at the fixed ε (min_eta1_eta2_at_eps: the infimum of η1η2 that does, Δ_ε/b, where
the success set is {Δ >= Δ_ε} and c <= 0). eps_mid: each language's own threshold,
halfway between output_floor and best_risk (attention gains half of what this plan can
give it); delta_eps_mid: the smallest Δ reaching it; min_eta1_eta2: the infimum of η1η2
that reaches it (Δ_ε/b); single_crossing: whether the success set along Δ is {Δ >= Δ_ε}
(checked on 257 points).
"""


def languages_table(config, pairs, workdir) -> list[dict]:
  """languages.csv / .md / .png: one row per (spec, language) of `pairs`."""
  plt = common.pyplot()
  progress = common.progress_reporter("languages")
  rows = []
  fig, ax = plt.subplots(figsize=(7, 4.8))
  for k, (spec, lang) in enumerate(pairs):
    progress(k, len(pairs))
    row, curve = language_row(config, spec, lang)
    rows.append(row)
    if curve is not None:
      deltas, risk = curve
      positive = deltas > 0
      floor = row["output_floor"]
      (line,) = ax.plot(deltas[positive], risk[positive] / floor, label=spec)
      if math.isfinite(row.get("eps_mid", math.nan)):
        ax.plot([row["delta_eps_mid"]], [row["eps_mid"] / floor], marker="o", ms=4,
                color=line.get_color())
  progress(len(pairs), len(pairs))
  ax.set(xscale="log", xlabel="Δ = η1η2(b + cη1) > 0",
         ylabel="R*(Δ) / R*(0) (phase 3 at T = ∞, over the output-only floor)",
         title="three-phase outcome along Δ; ● Δ_ε at each language's eps_mid")
  common.save_figure(fig, os.path.join(workdir, "languages.png"), legend=ax)
  columns = ("language", "describe", "route", "coordinates", "a1_norm", "a2_norm", "b", "c",
             "eta1_max", "eta1_stable", "output_floor", "best_risk", "best_delta",
             "learns_at_eps", "min_eta1_eta2_at_eps", "eps_mid", "delta_eps_mid",
             "min_eta1_eta2", "single_crossing", "note", "seconds")
  rows = [{name: row.get(name, math.nan) for name in columns} for row in rows]
  common.write_csv(rows, os.path.join(workdir, "languages.csv"))
  command = ("python -m experiments.regimes --config experiments/configs/regimes_languages.py "
             "--workdir docs/results/regimes" if config.languages else
             f"python -m experiments.regimes --config.language={config.language}")
  with open(os.path.join(workdir, "languages.md"), "w") as f:
    f.write(f"# Three-phase regimes on every language with exact moments (ε = {config.eps:g}, "
            f"η3 = {config.eta3:g})\n\n`{command}`\n\n" + LANGUAGES_NOTE + "\n"
            + common.markdown_table(rows))
  return rows


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=validate)
  config, ds, workdir = experiment.config, experiment.validated, experiment.workdir
  start = experiment.started
  if isinstance(ds, list):   # (spec, language) pairs: the language table
    rows = languages_table(config, ds, workdir)
    wall = time.time() - start
    print(common.markdown_table([{k: r[k] for k in ("language", "learns_at_eps", "eps_mid",
                                                     "min_eta1_eta2", "seconds")} for r in rows]))
    experiment.write_metadata(seconds=wall, languages=[spec for spec, _ in ds])
    print(f"{len(ds)} languages in {wall:.1f} s; wrote languages.csv/.md/.png, metadata.json "
          f"in {workdir}")
    return
  parts = experiment.progress("parts (regimes, lengths, KQV plan)")
  parts(0, 3)
  rows, by_d = regime_rows(config, ds)
  for d in set(config.collapse_d) | set(config.boundary_d):  # the figures' d, once each
    if d not in by_d:
      by_d[d] = regimes.three_phase_regime(language(config, d), config.eps, eta3=config.eta3)
  fits = fit_rows(rows, config.fit_rtol)
  residuals = collapse_figure(config, by_d, os.path.join(workdir, "collapse.png"))
  boundary_figure(config, by_d, os.path.join(workdir, "boundary.png"))
  timings = {"regimes": time.time() - start}
  common.write_csv(rows, os.path.join(workdir, "regimes.csv"))
  with open(os.path.join(workdir, "regimes.md"), "w") as f:
    f.write(f"# Exact three-phase regimes from θ0 = 0 ({config.language}, ε = {config.eps:g}, "
            f"η3 = {config.eta3:g})\n\nΔ = η1η2(b + cη1); success iff Δ >= Δ_ε; wall "
            "η1_max = b/|c|; min_eta1_eta2 = Δ_ε/b (the infimum, approached as η1 → 0); "
            "paper point (η1, η2) = (d, d²); paper_steps: phase-3 steps at η3 to come within "
            "ε of R*(Δ).\n\n" + common.markdown_table(rows)
            + f"\n## Fits (a fit holds where every relative residual is <= {config.fit_rtol:g}; "
            "range: the widest tail of the d grid where it does, else the last 4 points)\n\n"
            + common.markdown_table(fits)
            + "\n## Collapse: gap = |R_T - R*(Δ)| on the sweep grid (near the boundary: "
            "ε/10 <= R* <= 10ε; at finite T, slow phase-3 directions keep some points off the "
            "T = ∞ curve)\n\n"
            + common.markdown_table(residuals))
  parts(1, 3)
  lengths_rows, _ = lengths_table(config, workdir)
  common.write_csv(lengths_rows, os.path.join(workdir, "lengths.csv"))
  with open(os.path.join(workdir, "lengths.md"), "w") as f:
    f.write(f"# Bounded against unbounded lengths (occurrence, d = {config.lengths.d}, equal "
            f"mean length m, ε = {config.eps:g})\n\n" + LENGTHS_NOTE + "\n"
            + common.markdown_table(lengths_rows))
  timings["lengths"] = time.time() - start - timings["regimes"]
  parts(2, 3)
  kqv_rows, kqv_fits, _ = kqv_table(config, workdir)
  common.write_csv(kqv_rows, os.path.join(workdir, "kqv.csv"))
  with open(os.path.join(workdir, "kqv.md"), "w") as f:
    f.write(f"# KQV three-phase plan (d = {config.kqv.d}, η1 = {config.kqv.eta1_over_d:g}·d)"
            "\n\n" + common.markdown_table(kqv_fits) + "\n" + common.markdown_table(kqv_rows))
  parts(3, 3)
  wall = time.time() - start
  print(common.markdown_table([{k: r[k] for k in ("d", "b", "c", "delta_eps", "eta1_max",
                                                   "paper_margin")} for r in rows]))
  print(common.markdown_table(fits))
  experiment.write_metadata(seconds=wall, timings=timings,
                        length_law=str(language(config, int(ds[0])).length) + " (at d_min)")
  print(f"{len(ds)} d values in {timings['regimes']:.1f} s, lengths {timings['lengths']:.1f} s, "
        f"total {wall:.1f} s; wrote regimes.csv/.md, collapse.png, boundary.png, "
        f"lengths.csv/.md/.png, kqv.csv/.md/.png, metadata.json in {workdir}")


if __name__ == "__main__":
  cli.run(main)
