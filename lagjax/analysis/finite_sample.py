"""The three-phase plan on N samples per phase, with phase 3 in closed form (docs/theory.md §9).

Phase 1 takes one output step of size η1 from θ0 = 0 on the empirical risk of N
fresh strings, phase 2 one attention step of size η2 on N fresh strings, and
phase 3 T output steps of size η3 on N fresh strings. Phase 3 is least squares
on the empirical attention masses W (N, d) at the phase-2 scores, so with the
empirical Gram matrix H_N = WᵀW/N and g_N = Wᵀy/N its T steps are
closed_form.output_gd(H_N, g_N, 1, β_1, η3, T) (docs/theory.md §5), exact and
O(N d² + d³) whatever T is.

One seed draws N_max strings per phase (count vectors, sampling.sample_counts_poisson)
and every N of the grid uses the first N of them (common random numbers: each N's
success rate is unbiased, and the curves over N are smoother).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import languages, sampling
from lagjax.data import partition as partition_lib
from lagjax.dynamics import closed_form
from lagjax.models import direct
from lagjax.risk import base
from lagjax.risk import error as error_lib

MEMORY_PER_BATCH = 2**29   # bytes of count vectors held per vmapped batch of seeds
GRAM_BLOCK = 256           # rows of W per block of the Gram matrix
DIVERGED_ERROR = 1.0       # a seed whose β3 is not finite counts every string as wrong


def empirical_risk(params, counts, labels, weights):
  """Σ_i weights_i ½ (f_θ(c_i) - y_i)², the empirical risk R̂_N with weights 1/N on the
  first N strings and 0 on the rest (docs/theory.md §2)."""
  return jnp.sum(weights * base.squared_loss(direct.forward_counts(params, counts), labels))


def empirical_gram(alpha, counts, labels, n, block: int = GRAM_BLOCK):
  """(H_N, g_N) = (WᵀW/N, Wᵀy/N) over the first n strings, W = direct.attention_masses(α, c).

  A loop over blocks of `block` rows whose trip count is ceil(n/block), so the work
  is O(n d²) for a traced n while one compiled function serves every n.
  """
  d = counts.shape[1]
  padded = -(-counts.shape[0] // block) * block
  counts = jnp.pad(counts, ((0, padded - counts.shape[0]), (0, 0)), constant_values=1.0)
  labels = jnp.pad(labels, (0, padded - labels.shape[0]))

  def add_block(b, sums):
    gram, target = sums
    rows = jax.lax.dynamic_slice_in_dim(counts, b * block, block)
    keep = (b * block + jnp.arange(block)) < n
    masses = direct.attention_masses(alpha, rows) * keep[:, None]
    y = jax.lax.dynamic_slice_in_dim(labels, b * block, block)
    return gram + masses.T @ masses, target + masses.T @ y

  blocks = (n + block - 1) // block
  gram, target = jax.lax.fori_loop(0, blocks, add_block, (jnp.zeros((d, d)), jnp.zeros(d)))
  return gram / n, target / n


def error_route(lang: languages.Language, error_samples: int):
  """report(params) -> {"error": 0-1 error} for per-token params, by error.best_route: exact
  where a route fits, else the mean over a fixed sample of `error_samples` strings drawn
  with sample_counts_poisson (standard error <= sqrt(e(1-e)/error_samples))."""
  return error_lib.best_route(lang, partition_lib.singletons(lang.d), error_samples,
                              sampler=sampling.sample_counts_poisson)


def output_phase(gram, target, beta0, eta, steps):
  """β after `steps` GD steps of size η on ½βᵀH_Nβ - g_Nᵀβ (+ const), the empirical risk of
  phase 3 (docs/theory.md §5). Finite T: T steps of β ← β - η(H_N β - g_N), O(T d²) and no
  sample touched (cheaper than an eigendecomposition for T < d); T = ∞:
  closed_form.output_gd's eigendecomposition. The two agree (tests/test_scaling.py)."""
  if math.isinf(steps):
    return closed_form.output_gd(gram, target, jnp.ones(gram.shape[0]), beta0, eta, steps)
  return jax.lax.fori_loop(0, int(steps), lambda _, beta: beta - eta * (gram @ beta - target),
                           beta0)


def make_success_curve(lang: languages.Language, n_grid, *, eta1: float, eta2: float,
                       eta3: float, steps: float, error_threshold: float,
                       error_samples: int = error_lib.ERROR_SAMPLES):
  """Builds curve(keys) -> (errors (S, #N), success (S, #N)) for seeds `keys` (S,).

  Args:
    lang: the language (d = lang.d); n_grid: increasing sample sizes N per phase.
    eta1, eta2, eta3: step sizes of the three phases; steps: T of phase 3 (may be inf).
    error_threshold: success means population 0-1 error <= this (see error_route).
    error_samples: size of the fixed sample of the 0-1 error where no exact route fits.

  Returns:
    curve(keys), jittable; seeds run vmapped in batches that hold at most
    MEMORY_PER_BATCH bytes of count vectors, sample sizes one after another.
  """
  validation.require_float64("lj.finite_sample.make_success_curve")
  n_grid = np.asarray([validation.check_int(f"n_grid[{i}] (a sample size N)", n, 1)
                       for i, n in enumerate(n_grid)], np.int64)
  if n_grid.size == 0 or np.any(np.diff(n_grid) <= 0):
    raise ValueError(f"n_grid must be increasing sample sizes >= 1; got {n_grid.tolist()}.")
  n_max = int(n_grid[-1])
  d = lang.d
  report, _ = error_route(lang, error_samples)
  output_gradient = jax.grad(lambda beta, c, y, w: empirical_risk(
      {"alpha": jnp.zeros(d), "beta": beta}, c, y, w))
  attention_gradient = jax.grad(lambda alpha, beta, c, y, w: empirical_risk(
      {"alpha": alpha, "beta": beta}, c, y, w))
  rows = jnp.arange(n_max)

  def one_seed(key):
    (c1, y1), (c2, y2), (c3, y3) = (sampling.sample_counts_poisson(k, lang, n_max)
                                    for k in jax.random.split(key, 3))

    def at(n):
      weights = jnp.where(rows < n, 1.0 / n, 0.0)
      beta1 = -eta1 * output_gradient(jnp.zeros(d), c1, y1, weights)
      alpha2 = -eta2 * attention_gradient(jnp.zeros(d), beta1, c2, y2, weights)
      gram, target = empirical_gram(alpha2, c3, y3, n)
      beta3 = output_phase(gram, target, beta1, eta3, steps)
      return seed_error(beta3, report({"alpha": alpha2, "beta": beta3})["error"])

    return jax.lax.map(at, jnp.asarray(n_grid))

  batch = max(1, MEMORY_PER_BATCH // (3 * n_max * d * 8 * 2))

  def curve(keys):
    errors = jax.lax.map(one_seed, keys, batch_size=min(batch, keys.shape[0]))
    return errors, succeeded(errors, error_threshold)

  return curve


def seed_error(beta3, error):
  """One seed's population 0-1 error, or DIVERGED_ERROR where phase 3's β3 is not finite."""
  return jnp.where(jnp.all(jnp.isfinite(beta3)), error, DIVERGED_ERROR)


def succeeded(errors, error_threshold: float):
  """Success (docs/theory.md §9d): population 0-1 error <= the threshold, equality included."""
  return errors <= error_threshold


def crossing(n_grid, success, level: float) -> float:
  """Smallest N at which the success rate reaches `level`, interpolated linearly in log N
  between the last grid point below and the first at or above; NaN if never reached, and
  -inf if the first grid point already reaches it (the grid does not bracket the level)."""
  rates = np.asarray(success, dtype=np.float64)
  above = np.nonzero(rates >= level)[0]
  if above.size == 0:
    return math.nan
  j = above[0]
  if j == 0:
    return -math.inf
  low, high = math.log(n_grid[j - 1]), math.log(n_grid[j])
  fraction = (level - rates[j - 1]) / (rates[j] - rates[j - 1])
  return math.exp(low + fraction * (high - low))


def check_bracket(d: int, n_grid, rates, level: float = 0.5) -> None:
  """Raises ValueError, naming d and the way to widen the grid, unless the success rates over
  n_grid start below `level` and end at or above it (so N*_level lies inside the grid)."""
  if rates[0] >= level:
    raise ValueError(
        f"the N grid cannot bracket the {level:g} crossing at d = {d}: success is already "
        f"{rates[0]:.2f} at the smallest N = {n_grid[0]}; widen the grid downward (smaller N).")
  if rates[-1] < level:
    raise ValueError(
        f"the N grid cannot bracket the {level:g} crossing at d = {d}: success is only "
        f"{rates[-1]:.2f} at the largest N = {n_grid[-1]}; widen the grid upward (larger N).")


def n_star(n_grid, success_by_seed, level: float, *, resamples: int, key: int = 0,
           confidence: float = 0.95) -> tuple[float, float, float, np.ndarray]:
  """N*_level with a percentile bootstrap interval over seeds.

  Args:
    n_grid: (#N,) sample sizes; success_by_seed: (S, #N) booleans.
    resamples: bootstrap replicates (seeds drawn with replacement).

  Returns:
    (estimate, low, high, replicates (resamples,)). Replicates that do not reach the
    level inside the grid are +inf (above) or 0 (below), so the interval is honest
    about the grid's edges.
  """
  success_by_seed = np.asarray(success_by_seed, dtype=np.float64)
  estimate = crossing(n_grid, success_by_seed.mean(0), level)
  rng = np.random.default_rng(key)
  seeds = success_by_seed.shape[0]
  draws = rng.integers(0, seeds, size=(resamples, seeds))
  curves = success_by_seed[draws].mean(1)                     # (B, #N)
  replicates = np.array([crossing(n_grid, c, level) for c in curves])
  replicates = np.where(np.isnan(replicates), np.inf, np.where(np.isneginf(replicates), 0.0,
                                                               replicates))
  tail = 50.0 * (1.0 - confidence)
  low, high = np.percentile(replicates, [tail, 100.0 - tail])
  return estimate, float(low), float(high), replicates


# Candidate laws N*(d) = C · h(d), compared in log N* (docs/theory.md §9).
RATE_MODELS = {"C d": lambda d: d, "C d ln d": lambda d: d * np.log(d),
               "C d ln^2 d": lambda d: d * np.log(d) ** 2}


def fit_rate_models(d, n_stars, log_sigma) -> dict:
  """Weighted least squares of log N* on log C + log h(d) for each RATE_MODELS entry,
  and on log C + p log d (free exponent).

  Args:
    d: (K,) alphabet sizes; n_stars: (K,) estimates; log_sigma: (K,) standard errors of
      log N* (from the bootstrap intervals).

  Returns:
    {name: {"C", "p" (free model only), "chi2", "dof", "residuals" (K,) in log N*,
    "aic"}}; chi2 is the weighted residual sum of squares, aic = chi2 + 2·#parameters.
  """
  d = np.asarray(d, dtype=np.float64)
  y = np.log(np.asarray(n_stars, dtype=np.float64))
  w = 1.0 / np.asarray(log_sigma, dtype=np.float64) ** 2
  fits = {}
  for name, shape in RATE_MODELS.items():
    offset = y - np.log(shape(d))
    log_c = np.sum(w * offset) / np.sum(w)
    residuals = offset - log_c
    chi2 = float(np.sum(w * residuals**2))
    fits[name] = {"C": float(np.exp(log_c)), "C_se_rel": float(1 / np.sqrt(np.sum(w))),
                  "chi2": chi2, "dof": d.size - 1, "residuals": residuals, "aic": chi2 + 2}
  design = np.stack([np.ones_like(d), np.log(d)], axis=1)
  normal = design.T @ (w[:, None] * design)
  coef = np.linalg.solve(normal, design.T @ (w * y))
  residuals = y - design @ coef
  chi2 = float(np.sum(w * residuals**2))
  covariance = np.linalg.inv(normal)
  fits["C d^p"] = {"C": float(np.exp(coef[0])), "p": float(coef[1]),
                   "p_se": float(np.sqrt(covariance[1, 1])), "chi2": chi2, "dof": d.size - 2,
                   "residuals": residuals, "aic": chi2 + 4}
  return fits
