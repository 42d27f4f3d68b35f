"""The three-phase plan on N samples per phase, with phase 3 in closed form (docs/theory.md §9).

Phase 1 takes one output step of size η1 from θ0 = 0 on the empirical risk of N
fresh strings, phase 2 one attention step of size η2 on N fresh strings, and
phase 3 T output steps of size η3 on N fresh strings. Phase 3 is least squares
on the empirical attention masses W (N, d) at the phase-2 scores, so with the
empirical Gram matrix H_N = WᵀW/N and g_N = Wᵀy/N its T steps are
dynamics.output_phase.output_gd(H_N, g_N, 1, β_1, η3, T) (docs/theory.md §5), exact and
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
from lagjax.dynamics.output_phase import output_gd
from lagjax.models import direct
from lagjax.risk import base
from lagjax.risk import error as error_lib

MEMORY_PER_BATCH = 2**29   # bytes of count vectors held per vmapped batch of seeds
GRAM_BLOCK = 256           # rows of W per block of the Gram matrix
DIVERGED_ERROR = 1.0       # a seed whose β3 is not finite counts every string as wrong


def empirical_risk(params, counts, labels, weights):
  """Σ_i weights_i ½ (f_θ(c_i) - y_i)², the empirical risk R̂_N of §9d.

  With weights 1/N on the first N strings and 0 on the rest, one array of N_max strings
  serves every N of the grid (common random numbers). f_θ is
  models.direct.forward_counts (docs/theory.md §2, §3b).

  Args:
    params: per-token parameters {"alpha": (d,), "beta": (d,)}.
    counts: count vectors c_i (N_max, d).
    labels: labels y_i ∈ {-1, +1} (N_max,).
    weights: weights of the strings (N_max,), e.g. 1/N on the first N and 0 on the rest.

  Returns:
    R̂_N, a scalar.

  Example:
    >>> counts = jnp.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]])   # two strings over d = 3
    >>> labels, weights = jnp.array([1.0, -1.0]), jnp.array([0.5, 0.5])
    >>> zero = {"alpha": jnp.zeros(3), "beta": jnp.zeros(3)}
    >>> float(lj.finite_sample.empirical_risk(zero, counts, labels, weights))   # f = 0: ½ y²
    0.5
    >>> theta = {"alpha": jnp.zeros(3), "beta": jnp.array([1.0, -1.0, -1.0])}
    >>> # f = (1 - 2)/3 = -1/3 and f = -1: ½ · ½ (4/3)² + 0 = 4/9
    >>> round(float(lj.finite_sample.empirical_risk(theta, counts, labels, weights)), 6)
    0.444444
  """
  return jnp.sum(weights * base.squared_loss(direct.forward_counts(params, counts), labels))


def empirical_gram(alpha, counts, labels, n, block: int = GRAM_BLOCK):
  """(H_N, g_N) = (WᵀW/N, Wᵀy/N) over the first n strings, W = direct.attention_masses(α, c).

  Phase 3's empirical risk at the phase-2 scores α is ½βᵀH_Nβ - g_Nᵀβ + const
  (docs/theory.md §9d). A loop over blocks of `block` rows whose trip count is
  ceil(n/block), so the work is O(n d²) for a traced n while one compiled function serves
  every n.

  Args:
    alpha: per-token scores α (d,).
    counts: count vectors (N_max, d); only the first n rows are read.
    labels: labels y ∈ {-1, +1} (N_max,).
    n: the sample size N <= N_max (may be traced).
    block: rows of W per block.

  Returns:
    (H_N (d, d), g_N (d,)).

  Example:
    >>> counts, labels = jnp.array([[1.0, 1.0], [0.0, 2.0]]), jnp.array([1.0, -1.0])
    >>> gram, target = lj.finite_sample.empirical_gram(jnp.zeros(2), counts, labels, 2)
    >>> # α = 0: W = c/n, rows (½, ½) and (0, 1)
    >>> np.round(np.asarray(gram), 6).tolist(), np.round(np.asarray(target), 6).tolist()
    ([[0.125, 0.125], [0.125, 0.625]], [0.25, -0.25])
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
  """The population 0-1 error of per-token params, exact where a route fits (§9d).

  By error.best_route on the singleton token groups: exact where a route fits (the
  lattice enumeration for d <= 4 here), else the mean over a fixed sample of
  `error_samples` strings drawn with sample_counts_poisson (standard error
  <= sqrt(e(1-e)/error_samples)).

  Args:
    lang: the language.
    error_samples: size of the fixed sample where no exact route fits.

  Returns:
    (report, route name): report(params) -> {"error": 0-1 error}, jittable.

  Example:
    >>> report, route = lj.finite_sample.error_route(lj.occurrence(3), 1000)
    >>> route
    'lattice'
    >>> theta = {"alpha": jnp.array([10.0, 0.0, 0.0]), "beta": jnp.array([1.0, -1.0, -1.0])}
    >>> float(report(theta)["error"])   # attention on the letter: sign f = y on every string
    0.0
  """
  return error_lib.best_route(lang, partition_lib.singletons(lang.d), error_samples,
                              sampler=sampling.sample_counts_poisson)


def output_phase(gram, target, beta0, eta, steps):
  """β after `steps` GD steps of size η on ½βᵀH_Nβ - g_Nᵀβ (+ const), phase 3's empirical risk.

  See docs/theory.md §5 and §9d. Finite T: T steps of β ← β - η(H_N β - g_N), O(T d²) and no
  sample touched (cheaper than an eigendecomposition for T < d); T = ∞:
  dynamics.output_phase.output_gd's eigendecomposition. The two agree
  (tests/analysis/test_scaling.py).

  Args:
    gram: H_N (d, d).
    target: g_N (d,).
    beta0: the start β1 of phase 3 (d,).
    eta: the step size η3.
    steps: T, a Python int or math.inf (not traced).

  Returns:
    β_T (d,).

  Example:
    >>> gram, target = jnp.diag(jnp.array([1.0, 2.0])), jnp.array([1.0, 2.0])
    >>> beta = lj.finite_sample.output_phase(gram, target, jnp.zeros(2), 0.5, 1)
    >>> np.round(np.asarray(beta), 6).tolist()     # one step from 0: η g_N
    [0.5, 1.0]
    >>> beta = lj.finite_sample.output_phase(gram, target, jnp.zeros(2), 0.5, np.inf)
    >>> np.round(np.asarray(beta), 6).tolist()     # T = ∞: the minimiser H_N⁻¹ g_N
    [1.0, 1.0]
  """
  if math.isinf(steps):
    return output_gd(gram, target, jnp.ones(gram.shape[0]), beta0, eta, steps)
  return jax.lax.fori_loop(0, int(steps), lambda _, beta: beta - eta * (gram @ beta - target),
                           beta0)


def make_success_curve(lang: languages.Language, n_grid, *, eta1: float, eta2: float,
                       eta3: float, steps: float, error_threshold: float,
                       error_samples: int = error_lib.ERROR_SAMPLES):
  """Builds curve(keys) -> (errors (S, #N), success (S, #N)) for seeds `keys` (S,).

  The three-phase plan on N fresh strings per phase (docs/theory.md §9d): one output
  step of size η1 from θ0 = 0, one attention step of size η2, then T output steps of
  size η3 through the Gram matrix (output_phase), for every N of the grid on the first N
  of one seed's N_max strings per phase.

  Args:
    lang: the language (d = lang.d).
    n_grid: increasing sample sizes N per phase.
    eta1: step size of phase 1 (output).
    eta2: step size of phase 2 (attention).
    eta3: step size of phase 3 (output).
    steps: T of phase 3 (may be inf).
    error_threshold: success means population 0-1 error <= this (see error_route).
    error_samples: size of the fixed sample of the 0-1 error where no exact route fits.

  Returns:
    curve(keys), jittable; seeds run vmapped in batches that hold at most
    MEMORY_PER_BATCH bytes of count vectors, sample sizes one after another.

  Example:
    >>> curve = lj.finite_sample.make_success_curve(
    ...     lj.occurrence(3), [4, 8], eta1=3.0, eta2=9.0, eta3=1.0, steps=10,
    ...     error_threshold=1e-3)
    >>> errors, success = curve(jax.random.split(jax.random.key(0), 2))   # 2 seeds
    >>> errors.shape, success.shape, str(success.dtype)
    ((2, 2), (2, 2), 'bool')
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
    # One vmapped sampler for the three phases' strings: the same draws as three calls
    # (each key's draws are its own under vmap), one copy of the sampler to compile.
    counts, labels = jax.vmap(lambda k: sampling.sample_counts_poisson(k, lang, n_max))(
        jax.random.split(key, 3))
    (c1, c2, c3), (y1, y2, y3) = counts, labels

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
  """One seed's population 0-1 error, or DIVERGED_ERROR where phase 3's β3 is not finite (§9d).

  A diverged seed counts every string as wrong, so it fails at every threshold below 1.

  Args:
    beta3: phase 3's final β (d,).
    error: the population 0-1 error at (α2, β3).

  Returns:
    The seed's error, a scalar.

  Example:
    >>> float(lj.finite_sample.seed_error(jnp.array([1.0, -0.5]), 0.02))
    0.02
    >>> float(lj.finite_sample.seed_error(jnp.array([1.0, jnp.nan]), 0.02))   # diverged
    1.0
  """
  return jnp.where(jnp.all(jnp.isfinite(beta3)), error, DIVERGED_ERROR)


def succeeded(errors, error_threshold: float):
  """Success (docs/theory.md §9d): population 0-1 error <= the threshold, equality included.

  Args:
    errors: population 0-1 errors, any shape.
    error_threshold: the threshold (0 allowed: a perfect fit succeeds).

  Returns:
    Booleans of the shape of `errors`.

  Example:
    >>> lj.finite_sample.succeeded(jnp.array([0.0, 1e-3, 2e-3]), 1e-3).tolist()
    [True, True, False]
  """
  return errors <= error_threshold


def crossing(n_grid, success, level: float) -> float:
  """N*_q: the smallest N at which the success rate reaches q = `level` (docs/theory.md §9d).

  Interpolated linearly in log N between the last grid point below and the first at or
  above; NaN if never reached, and -inf if the first grid point already reaches it (the
  grid does not bracket the level).

  Args:
    n_grid: increasing sample sizes (#N,).
    success: success rates over seeds at each N (#N,).
    level: the rate q to reach.

  Returns:
    N*_q, a float (NaN or -inf as above).

  Example:
    >>> round(lj.finite_sample.crossing([10, 40], [0.0, 1.0], 0.5), 6)   # halfway: √(10·40)
    20.0
    >>> lj.finite_sample.crossing([10, 40], [0.6, 1.0], 0.5)   # reached at the first N
    -inf
    >>> lj.finite_sample.crossing([10, 40], [0.0, 0.4], 0.5)   # never reached
    nan
  """
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
  """Checks that the N grid brackets N*_q (docs/theory.md §9d).

  Raises ValueError, naming d and the way to widen the grid, unless the success rates over
  n_grid start below `level` and end at or above it (so N*_level lies inside the grid).

  Args:
    d: the alphabet size (named in the message).
    n_grid: the sample sizes (#N,).
    rates: success rates at each N (#N,).
    level: the rate q.

  Example:
    >>> lj.finite_sample.check_bracket(8, [16, 32], [0.2, 0.9])   # brackets ½: no error
    >>> lj.finite_sample.check_bracket(8, [16, 32], [0.7, 0.9])
    Traceback (most recent call last):
    ...
    ValueError: the N grid cannot bracket the 0.5 crossing at d = 8: ... (smaller N).
  """
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
  """N*_level with a percentile bootstrap interval over seeds (docs/theory.md §9d).

  The estimate is `crossing` of the mean success rate over seeds; each replicate is the
  crossing of the rate over seeds drawn with replacement.

  Args:
    n_grid: (#N,) sample sizes.
    success_by_seed: (S, #N) booleans.
    level: the rate q to reach.
    resamples: bootstrap replicates (seeds drawn with replacement).
    key: seed of the NumPy generator that draws them.
    confidence: the interval's coverage (0.95: the 2.5 and 97.5 percentiles).

  Returns:
    (estimate, low, high, replicates (resamples,)). Replicates that do not reach the
    level inside the grid are +inf (above) or 0 (below), so the interval is honest
    about the grid's edges.

  Example:
    >>> success = np.array([[0, 0, 1], [0, 1, 1], [0, 1, 1], [1, 1, 1]], bool)   # 4 seeds
    >>> estimate, low, high, replicates = lj.finite_sample.n_star(
    ...     [10, 20, 40], success, 0.5, resamples=200)
    >>> # rates ¼, ¾, 1: ½ is reached halfway from N = 10 to 20 in log N, at √200
    >>> round(estimate, 6), replicates.shape, bool(low <= estimate <= high)
    (14.142136, (200,), True)
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
  """Rate models of N*(d) (docs/theory.md §9d): weighted least squares in log N*.

  Fits log N* on log C + log h(d) for each RATE_MODELS entry (h = d, d ln d, d ln² d),
  and on log C + p log d (free exponent), with weights 1/σ².

  Args:
    d: (K,) alphabet sizes.
    n_stars: (K,) estimates N*.
    log_sigma: (K,) standard errors of log N* (from the bootstrap intervals).

  Returns:
    {name: {"C", "C_se_rel" (one-parameter models) or "p", "p_se" (free model), "chi2",
    "dof", "residuals" (K,) in log N*, "aic"}}; chi2 is the weighted residual sum of
    squares, aic = chi2 + 2·#parameters.

  Example:
    >>> d = np.array([8.0, 16.0, 32.0])
    >>> fits = lj.finite_sample.fit_rate_models(d, 10 * d * np.log(d), np.full(3, 0.1))
    >>> sorted(fits)
    ['C d', 'C d ln d', 'C d ln^2 d', 'C d^p']
    >>> round(fits["C d ln d"]["C"], 6), round(fits["C d ln d"]["chi2"], 6)   # exact fit
    (10.0, 0.0)
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
