"""Horizon-free lag metrics, exact tied joint GD, η_max and the finite-sample machinery
(docs/theory.md sections 6b and 9)."""

import math

import jax

jax.config.update("jax_enable_x64", True)

import chex  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lagjax as lj  # noqa: E402
from experiments import scaling_protocol as experiment  # noqa: E402
from experiments.configs import scaling as scaling_config  # noqa: E402
from lagjax import finite_sample, metrics, scaling  # noqa: E402
from lagjax import partition as partition_lib  # noqa: E402
from lagjax.data import sampling  # noqa: E402
from lagjax.dynamics import output_phase  # noqa: E402

EPSILON = 1e-3
D = 8
ETA = 2.0      # reaches ε at d = 8 after ~100 steps (η_max(8) ≈ 4.6)
CAP = 600


@pytest.fixture(scope="module")
def joint_runs():
  """One compiled tied run at d = 8 that does not stop at τ_ε, called with two horizons."""
  lang = lj.occurrence(D)
  run = jax.jit(scaling.make_joint_gd(lang, epsilon=EPSILON, max_steps=2 * CAP,
                                      stop_at_epsilon=False))
  return lang, run(ETA, CAP), run(ETA, 2 * CAP)


def test_horizon_free_metric_ignores_the_horizon(joint_runs):
  """Doubling T leaves τ_ε, the half-times and the lag gap unchanged; the run-normalised
  metric of section 6 (normalised by the largest move within the run) changes."""
  lang, short, long = joint_runs
  sizes = partition_lib.of_language(lang).sizes
  lags = [metrics.horizon_free_lag(run.alpha[:T + 1], run.beta[:T + 1],
                                   run.risk[:T + 1], EPSILON, weights=sizes)
          for run, T in ((short, CAP), (long, 2 * CAP))]
  assert 0 < int(lags[0].tau_eps) < CAP
  for field in ("tau_eps", "half_time_alpha", "half_time_beta", "half_time_ratio"):
    assert float(getattr(lags[0], field)) == float(getattr(lags[1], field)), field
  # The lag gap sums the same τ_ε + 1 terms (each in [-1, 1]) from arrays of different
  # lengths, so only the summation order differs: error <= (τ_ε + 1)·2^-53 < 1e-13.
  np.testing.assert_allclose(lags[0].lag_gap, lags[1].lag_gap, rtol=0, atol=1e-13)
  old = [metrics.lag_metrics(run.alpha[:T + 1], run.beta[:T + 1])
         for run, T in ((short, CAP), (long, 2 * CAP))]
  # The records of the first CAP steps are the same numbers in both runs, so any change in
  # the old metric comes from its horizon; it is far above roundoff (~1e-16).
  assert abs(float(old[0].lag_gap) - float(old[1].lag_gap)) > 1e-3


def test_half_times_equal_bisection_on_the_untied_trajectory(joint_runs):
  """Half-times from every-step tied records equal the first t with r(t) >= ½ found by
  bisection over t on an independent trajectory: per-token GD on all d tokens (Laplace
  route on singletons, a plain loop), with per-token norms."""
  lang, short, _ = joint_runs
  sizes = partition_lib.of_language(lang).sizes
  lag = metrics.horizon_free_lag(short.alpha, short.beta, short.risk,
                                 EPSILON, weights=sizes)
  tau = int(lag.tau_eps)
  value_and_grad = jax.jit(jax.value_and_grad(lj.risk.ROUTES["laplace"].build(lang).risk))
  params, states, risks = {"alpha": jnp.zeros(D), "beta": jnp.zeros(D)}, [], []
  for _ in range(tau + 1):
    risk, grads = value_and_grad(params)
    states.append(params)
    risks.append(float(risk))
    params = {k: params[k] - ETA * grads[k] for k in params}
  # τ_ε agrees too; the tied and untied risks differ by roundoff only (~1e-15).
  assert risks[tau] <= EPSILON < risks[tau - 1]

  def first_half(name):
    scale = float(jnp.linalg.norm(states[tau][name]))
    low, high = 0, tau                                 # r(0) = 0 < ½ <= r(τ) = 1
    while high - low > 1:
      mid = (low + high) // 2
      if float(jnp.linalg.norm(states[mid][name])) / scale >= 0.5:
        high = mid
      else:
        low = mid
    return high

  assert int(lag.half_time_alpha) == first_half("alpha")
  assert int(lag.half_time_beta) == first_half("beta")
  # Every record is the state of its own step: r(t) on the records equals the untied
  # trajectory's at every t <= τ_ε. The tied (2 groups) and untied (d singletons) Laplace
  # sums differ by roundoff (~1e-16 per step); over τ_ε ≈ 170 steps 1e-10 is ample.
  for name, r in (("alpha", lag.r_alpha), ("beta", lag.r_beta)):
    oracle = [float(jnp.linalg.norm(state[name])) for state in states]
    np.testing.assert_allclose(r[:tau + 1], np.asarray(oracle) / oracle[tau], rtol=0, atol=1e-10)


def test_eta_max_by_bisection_at_d20():
  """0.95·η_max reaches ε within the cap and 1.05·η_max does not (bracket ratio 2^(1/32))."""
  lang = lj.occurrence(20)
  cap = 3000
  run = jax.jit(scaling.make_joint_gd(lang, epsilon=EPSILON, max_steps=cap, record=False))
  found = scaling.eta_max(run, 1.0, iterations=5)
  eta_max = found["eta_max"]
  assert found["eta_fail"] / eta_max < 1.05 / 0.95
  assert int(run(0.95 * eta_max).tau_eps) >= 0
  above = run(1.05 * eta_max)
  assert int(above.tau_eps) == -1
  # And η_max is far below 2/λ_max(θ0) = 2d = 40 (docs/theory.md §9).
  np.testing.assert_allclose(scaling.edge_of_stability(lang), 40.0, rtol=1e-10)
  assert eta_max < 0.2 * 40.0


def test_poisson_count_sampler_matches_the_length_law():
  """Counts by Poissonisation: P(w ⊆ Σ∖{a}) = G(1 - π_a), E n = 1/p, E c_σ = π_σ/p, for a
  geometric and a shifted-Poisson law and a non-uniform π; 4.5 standard errors."""
  n = 40_000
  pi = np.array([0.1, 0.2, 0.3, 0.4])
  for lang in (lj.occurrence(4, pi=pi, length=lj.geometric(0.2)),
               lj.occurrence(4, pi=pi, length=lj.shifted_poisson(3.0))):
    counts, labels = jax.jit(lambda k, lang=lang: sampling.sample_counts_poisson(k, lang, n))(
        jax.random.key(1))
    counts = np.asarray(counts)
    avoid = float(lang.length.pgf(1.0 - pi[0]))
    assert abs(np.mean(counts[:, 0] == 0) - avoid) < 4.5 * math.sqrt(avoid * (1 - avoid) / n)
    np.testing.assert_array_equal(np.asarray(labels), np.where(counts[:, 0] > 0, 1.0, -1.0))
    lengths = counts.sum(1)
    assert abs(lengths.mean() - lang.length.mean) < 4.5 * lengths.std() / math.sqrt(n)
    per_token = counts.mean(0) - lang.length.mean * pi
    assert np.all(np.abs(per_token) < 4.5 * counts.std(0) / math.sqrt(n))


def test_gram_recurrence_equals_the_closed_form():
  """Phase 3 by T steps on the Gram matrix equals output_phase.output_gd (eigenbasis), and
  T = ∞ is the least-squares solution; agreement to 1e-12 (roundoff of 300 matvecs)."""
  rng = np.random.default_rng(0)
  masses = rng.dirichlet(np.ones(6), size=40)
  labels = rng.choice([-1.0, 1.0], size=40)
  gram, target = jnp.asarray(masses.T @ masses / 40), jnp.asarray(masses.T @ labels / 40)
  beta0 = jnp.asarray(rng.normal(size=6))
  # Jitted (T static): three programs instead of ~70 single-operation compiles.
  phase = jax.jit(finite_sample.output_phase, static_argnums=(3, 4))
  looped = phase(gram, target, beta0, 1.0, 300)
  closed = jax.jit(output_phase.output_gd, static_argnums=(4, 5))(gram, target, jnp.ones(6),
                                                                   beta0, 1.0, 300)
  np.testing.assert_allclose(looped, closed, rtol=0, atol=1e-12)
  limit = phase(gram, target, beta0, 1.0, math.inf)
  np.testing.assert_allclose(gram @ limit, target, rtol=0, atol=1e-10)


def test_phase_three_continues_from_beta1_at_finite_and_infinite_t():
  """docs/theory.md §9d: phase 3 starts at phase 1's β, for finite T and T = ∞ alike. With
  fewer strings than tokens H_N is singular: GD never moves β1's null-space component,
  and the T = ∞ path keeps it too, so long finite-T GD (every non-null direction
  contracted below 1e-13 by T) and T = ∞ agree to 1e-10; restarting at β = 0 would not."""
  rng = np.random.default_rng(3)
  masses = rng.dirichlet(np.ones(6), size=4)                      # rank 4 < 6
  labels = np.array([1.0, -1.0, 1.0, -1.0])
  gram, target = jnp.asarray(masses.T @ masses / 4), jnp.asarray(masses.T @ labels / 4)
  eigenvalues = np.linalg.eigvalsh(np.asarray(gram))
  smallest = eigenvalues[eigenvalues > 1e-10].min()
  steps = int(np.ceil(np.log(1e-13) / np.log1p(-smallest)))       # (1 - λ)^T <= 1e-13
  beta1 = jnp.asarray(rng.normal(size=6))
  long = finite_sample.output_phase(gram, target, beta1, 1.0, steps)
  limit = finite_sample.output_phase(gram, target, beta1, 1.0, math.inf)
  np.testing.assert_allclose(long, limit, rtol=0, atol=1e-10)
  restarted = finite_sample.output_phase(gram, target, jnp.zeros(6), 1.0, math.inf)
  assert float(jnp.abs(limit - restarted).max()) > 1e-3         # the start matters


def direct_monte_carlo(lang, n_grid, seeds, eta1, eta2, eta3, steps, threshold):
  """Success rates of the three-phase plan by an independent route: explicit token strings
  (numpy), per-step GD on the empirical risk for all three phases, exact 0-1 error."""
  rng = np.random.default_rng(12345)
  d, p = lang.d, lang.length.p
  report, route = finite_sample.error_route(lang, 1)
  assert route == "lattice"   # exact 0-1 error by enumeration
  error = jax.jit(jax.vmap(lambda a, b: report({"alpha": a, "beta": b})["error"]))

  def draw(n):
    counts = np.zeros((seeds, n, d))
    lengths = rng.geometric(p, size=(seeds, n))
    for s in range(seeds):
      for i in range(n):
        counts[s, i] = np.bincount(rng.integers(0, d, lengths[s, i]), minlength=d)
    return counts, np.where(counts[..., 0] > 0, 1.0, -1.0)

  def forward(alpha, beta, counts):
    weights = counts * np.exp(alpha - alpha.max(-1, keepdims=True))[:, None, :]
    masses = weights / weights.sum(-1, keepdims=True)
    return masses, np.einsum("snd,sd->sn", masses, beta)

  rates = []
  for n in n_grid:
    (c1, y1), (c2, y2), (c3, y3) = draw(n), draw(n), draw(n)
    zero = np.zeros((seeds, d))
    masses, f = forward(zero, zero, c1)
    beta = -eta1 * np.einsum("sn,snd->sd", f - y1, masses) / n
    masses, f = forward(zero, beta, c2)
    alpha = -eta2 * np.einsum("sn,snd->sd", f - y2, masses * (beta[:, None, :] - f[..., None])) / n
    for _ in range(steps):
      masses, f = forward(alpha, beta, c3)
      beta = beta - eta3 * np.einsum("sn,snd->sd", f - y3, masses) / n
    rates.append(np.mean(np.asarray(error(jnp.asarray(alpha), jnp.asarray(beta))) <= threshold))
  return np.asarray(rates)


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_n_star_agrees_with_direct_monte_carlo():
  """At d = 3 with 200 seeds, the success rates of the fast route (Poisson counts, closed
  form phase 3) agree with the direct route within 4.5 combined binomial standard errors, and
  the direct N*_50 lies inside the fast route's 95% bootstrap interval."""
  lang = lj.occurrence(3)
  grid, seeds = (1, 2, 4, 8, 16), 200
  # η1 = 2d, η2 = 4d²: at d = 3 the default η1 = d, η2 = d² succeeds less often as N grows.
  options = dict(eta1=6.0, eta2=36.0, eta3=1.0, steps=300, error_threshold=1e-3)
  curve = jax.jit(finite_sample.make_success_curve(lang, grid, **options))
  _, success = curve(jax.random.split(jax.random.key(0), seeds))
  fast = np.asarray(success).mean(0)
  direct = direct_monte_carlo(lang, grid, seeds, 6.0, 36.0, 1.0, 300, 1e-3)
  spread = np.sqrt((fast * (1 - fast) + direct * (1 - direct)) / seeds)
  assert np.all(np.abs(fast - direct) <= 4.5 * np.maximum(spread, 1 / seeds)), (fast, direct)
  estimate, low, high, _ = finite_sample.n_star(grid, success, 0.5, resamples=500)
  finite_sample.check_bracket(3, grid, fast)
  assert low <= finite_sample.crossing(grid, direct, 0.5) <= high, (estimate, low, high, direct)


def test_bracket_check_names_d_and_direction():
  grid = np.array([10, 20, 40])
  with pytest.raises(ValueError, match=r"d = 16.*downward"):
    finite_sample.check_bracket(16, grid, np.array([0.6, 0.9, 1.0]))
  with pytest.raises(ValueError, match=r"d = 32.*upward"):
    finite_sample.check_bracket(32, grid, np.array([0.0, 0.1, 0.4]))


@pytest.mark.parametrize("field, value, message", [
    ("kappas", (0.5, 1.0), "config.kappas"),
    ("kappas", (0.0,), "config.kappas"),
    ("epsilon", 0.5, "epsilon"),
    ("epsilon", 0.0, "epsilon"),
    ("lag_d", (1, 8), "config.lag_d"),
    ("sample_d", (8, 1), "config.sample_d"),
    ("num_seeds", 1, "config.num_seeds"),
])
def test_bad_config_fails_before_compute(field, value, message):
  config = scaling_config.get_config()
  with config.unlocked():
    setattr(config, field, value)
  with pytest.raises(ValueError, match=message):
    experiment.validate(config)


def test_library_rejects_bad_epsilon_and_d():
  with pytest.raises(ValueError, match="epsilon"):
    scaling.make_joint_gd(lj.occurrence(8), epsilon=0.7, max_steps=10)
  with pytest.raises(ValueError, match="alphabet size d"):
    lj.occurrence(1)


@pytest.mark.slow
def test_binary_smoke(tmp_path):
  """experiments.scaling with a tiny config writes every file, with the issue's columns."""
  import csv
  import os
  import subprocess
  import sys

  args = [sys.executable, "-m", "experiments.scaling", "--config",
          "experiments/configs/scaling.py", f"--workdir={tmp_path}",
          "--config.languages=('occurrence',)", "--config.lag_d=(8,)", "--config.kappas=(0.5,)",
          "--config.max_steps=2000", "--config.bisection_max_steps=2000",
          "--config.bisection_iterations=2", "--config.regime_d_range=(8,8)",
          "--config.regime_eta_points=3", "--config.regime_max_steps=300",
          "--config.sample_d=(8,)", "--config.sample_c=(0.125,4.0)", "--config.num_seeds=4",
          "--config.bootstrap=100", "--config.error_samples=2000"]
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  done = subprocess.run(args, cwd=repo, env=dict(os.environ, JAX_PLATFORMS="cpu"),
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stdout + done.stderr
  for name in ("joint_lag.csv", "eta_max.csv", "joint_lag.png", "joint_regimes.csv",
               "joint_regimes.png", "sample_complexity.csv", "sample_curves.csv",
               "sample_complexity.png", "scaling.md", "timing.json"):
    assert (tmp_path / name).exists(), name
  with open(tmp_path / "joint_lag.csv") as f:
    rows = list(csv.DictReader(f))
  assert list(rows[0])[:9] == ["language", "d", "kappa", "eta", "tau_eps", "t_half_alpha",
                               "t_half_beta", "ratio", "lag_gap"]
  assert rows[0]["status"] == "reached" and int(rows[0]["tau_eps"]) > 0
  with open(tmp_path / "sample_complexity.csv") as f:
    header = next(csv.reader(f))
  assert header == ["d", "n_star_50", "n_star_50_lo", "n_star_50_hi", "n_star_90",
                    "n_star_90_lo", "n_star_90_hi"]


@pytest.mark.parametrize("alpha, path", [
    ((1000.0, 0.3, -2.0, 1.0, 0.0, 5.0), "two clusters"),         # past float64's exp range
    ((1000.0, 0.3, -2.0, 1.0, -900.0, 5.0), "log-sum-exp"),       # three clusters
    ((0.5, 0.3, -2.0, 1.0, 0.0, 5.0), "two clusters"),            # one cluster
])
@pytest.mark.parametrize("cls", [False, True])
def test_forward_counts_paths_agree_past_the_exp_range(alpha, path, cls):
  del path  # the case's name
  """models.direct.forward_counts (two-cluster products, or log-sum-exp for three clusters)
  equals the per-string log-sum-exp form on strings with and without the top token: no 0/0.
  Both are ratios of sums of <= 50 positive terms: 1e-12 is roundoff."""
  rng = np.random.default_rng(1)
  counts = jnp.asarray(rng.poisson(0.5, size=(300, 6)).astype(float))
  counts = counts.at[:, 1].add(1.0)                       # no empty string
  lowest = jnp.zeros((2, 6)).at[:, 4].set(jnp.asarray([1.0, 3.0]))
  counts = jnp.concatenate([counts, lowest])              # strings of the lowest token only
  params = {"alpha": jnp.asarray(alpha), "beta": jnp.asarray(rng.normal(size=6))}
  if cls:
    params.update(alpha_cls=jnp.asarray(-1.0), beta_cls=jnp.asarray(0.7))
  assert np.any(np.asarray(counts[:, 0]) == 0) and np.any(np.asarray(counts[:, 0]) > 0)
  reference = lj.models.direct._forward_counts_stable(params, counts)
  fast = lj.models.direct.forward_counts(params, counts)
  np.testing.assert_allclose(fast, reference, rtol=1e-12, atol=1e-12)
  chex.assert_tree_all_finite(fast)


@pytest.mark.parametrize("n_grid, message", [
    ((10, 2.5), r"n_grid\[1\] \(a sample size N\) must be an integer >= 1; got 2.5"),
    ((0, 10), r"n_grid\[0\] \(a sample size N\) must be an integer >= 1; got 0"),
    ((20, 10), "n_grid must be increasing"),
    ((), "n_grid must be increasing"),
])
def test_success_curve_rejects_bad_sample_sizes(n_grid, message):
  with pytest.raises(ValueError, match=message):
    finite_sample.make_success_curve(lj.occurrence(8), n_grid, eta1=8.0, eta2=64.0, eta3=1.0,
                                     steps=10, error_threshold=0.1)
