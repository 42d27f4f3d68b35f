"""Attention-lag metrics (docs/theory.md section 6) on trajectories with a known answer.

The synthetic trajectories are exact multiples of fixed vectors, so the
relative progress is the multiplier up to float64 roundoff of a norm and a
division (~1e-16 relative); 1e-13 is far from any real discrepancy.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax import metrics

T = 20
TOL = 1e-13


def synthetic(steps_total=T):
  """α_t = (t/T)² v, β_t = (t/T) w for t = 0…T, from nonzero starting points."""
  t = np.arange(steps_total + 1) / steps_total
  v, w = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.0, -4.0])
  alpha0, beta0 = np.array([0.1, 0.2, -0.3]), np.array([1.0, 1.0, 1.0])
  return alpha0 + np.outer(t**2, v), beta0 + np.outer(t, w), t


def test_relative_progress_and_lag_gap():
  """r_α = (t/T)², r_β = t/T, lag gap = mean(t/T - (t/T)²) by hand."""
  alpha, beta, t = synthetic()
  lag = metrics.lag_metrics(jnp.asarray(alpha), jnp.asarray(beta))
  np.testing.assert_allclose(lag.r_alpha, t**2, rtol=0, atol=TOL)
  np.testing.assert_allclose(lag.r_beta, t, rtol=0, atol=TOL)
  # mean over t = 0…T of (t/T - t²/T²) = 1/2 - (2T + 1)/(6T) = (T - 1)/(6T).
  expected_gap = (T - 1) / (6 * T)
  np.testing.assert_allclose(np.mean(t - t**2), expected_gap, rtol=0, atol=TOL)
  np.testing.assert_allclose(lag.lag_gap, expected_gap, rtol=0, atol=TOL)
  assert lag.lag_gap > 0  # attention lags the output layer


def test_half_times():
  """First step with r >= 1/2: (t/T)² >= 1/2 at t = ceil(T/√2) = 15, t/T >= 1/2 at t = 10."""
  alpha, beta, _ = synthetic()
  lag = metrics.lag_metrics(jnp.asarray(alpha), jnp.asarray(beta))
  assert int(lag.half_time_alpha) == 15
  assert int(lag.half_time_beta) == 10
  np.testing.assert_allclose(lag.half_time_ratio, 1.5, rtol=0, atol=TOL)
  # With recorded steps 0, 5, 10, …: the half times are read off the step labels.
  lag = metrics.lag_metrics(jnp.asarray(alpha), jnp.asarray(beta), 5 * np.arange(T + 1))
  assert int(lag.half_time_alpha) == 75 and int(lag.half_time_beta) == 50
  np.testing.assert_allclose(lag.half_time_ratio, 1.5, rtol=0, atol=TOL)


def test_swapped_groups_give_negative_gap():
  """Swapping the groups negates the gap and inverts the ratio."""
  alpha, beta, _ = synthetic()
  lag = metrics.lag_metrics(jnp.asarray(beta), jnp.asarray(alpha))
  np.testing.assert_allclose(lag.lag_gap, -(T - 1) / (6 * T), rtol=0, atol=TOL)
  np.testing.assert_allclose(lag.half_time_ratio, 10 / 15, rtol=0, atol=TOL)


def test_group_that_never_moves():
  """A group that never moves has r ≡ 0, half time -1 and ratio -1 (no NaN from 0/0)."""
  _, beta, t = synthetic()
  still = np.tile(np.array([0.4, -0.4, 2.0]), (T + 1, 1))
  lag = metrics.lag_metrics(jnp.asarray(still), jnp.asarray(beta))
  np.testing.assert_array_equal(lag.r_alpha, np.zeros(T + 1))
  assert int(lag.half_time_alpha) == -1
  assert int(lag.half_time_beta) == 10
  assert float(lag.half_time_ratio) == -1.0
  np.testing.assert_allclose(lag.lag_gap, np.mean(t), rtol=0, atol=TOL)


def test_non_monotone_trajectory():
  """r is normalized by the largest excursion, not by the final distance."""
  s = np.arange(T + 1) / T
  bump = np.sin(np.pi * s)
  alpha = np.outer(bump, [3.0, 4.0])  # distance 5 sin(π t/T), back to the start at T
  beta = np.outer(s, [1.0, 0.0])
  lag = metrics.lag_metrics(jnp.asarray(alpha), jnp.asarray(beta))
  np.testing.assert_allclose(lag.r_alpha, bump, rtol=0, atol=TOL)
  # sin(π t/20) >= 1/2 first at t/20 >= 1/6, i.e. t = 4.
  assert int(lag.half_time_alpha) == 4


@pytest.mark.parametrize("shape", [(T + 1, 3), (T + 1, 2, 2)])
def test_relative_progress_of_arrays(shape):
  """relative_progress flattens every record: the Frobenius distance to the start."""
  rng = np.random.default_rng(0)
  trajectory = rng.normal(size=shape)
  flat = trajectory.reshape(T + 1, -1)
  distance = np.linalg.norm(flat - flat[0], axis=1)
  np.testing.assert_allclose(metrics.relative_progress(jnp.asarray(trajectory)),
                             distance / distance.max(), rtol=0, atol=TOL)


def test_run_lag_of_three_phase():
  """On a three_phase run, α moves only in the attention step (step 1 → 2): r_α = 0, 0, 1, 1, …."""
  lang = lj.occurrence(5)
  run = lj.train(lang, lj.plans.three_phase(5.0, 25.0, 1.0, 6))
  lag = run.lag()
  expected = metrics.lag_metrics(run.alpha, run.beta, run.steps)
  for name in lag._fields:
    np.testing.assert_array_equal(getattr(lag, name), getattr(expected, name))
  np.testing.assert_array_equal(lag.r_alpha, [0, 0] + [1] * 7)
  assert int(lag.half_time_alpha) == 2
  assert float(lag.r_beta[0]) == 0.0 and float(lag.r_beta[1]) > 0


# --- blind spots of the issue-17 mutation campaign (docs/results/mutation/campaign.md)


def test_half_time_ratio_counts_a_half_time_of_one():
  """The half-time ratio t_α / t_β is defined when both half-times are > 0, so a half-time
  at step 1 counts (only -1, "never", and 0 are excluded). Exact: small integers.
  Kills: the condition t_alpha > 1."""
  alpha = jnp.array([[0.0], [1.0], [1.0], [1.0], [1.0]])  # r_α reaches 1/2 at step 1
  beta = jnp.array([[0.0], [0.0], [0.1], [0.9], [1.0]])   # r_β reaches 1/2 at step 3
  out = lj.metrics.lag_metrics(alpha, beta)
  assert (int(out.half_time_alpha), int(out.half_time_beta)) == (1, 3)
  assert float(out.half_time_ratio) == 1.0 / 3.0


def test_first_step_at_most_counts_risk_equal_to_epsilon():
  """τ_ε is the first record with risk <= ε (docstring): a record exactly at ε counts.
  Exact: compared floats are the same literal. Kills: `risk < epsilon`."""
  risk = jnp.array([0.5, 0.25, 0.125, 0.0625])
  assert int(lj.metrics.first_step_at_most(risk, 0.25)) == 1
  assert int(lj.metrics.first_step_at_most(risk, 0.01)) == -1


def test_horizon_free_lag_by_hand():
  """horizon_free_lag (docs/theory.md 6b) on a hand-worked record: τ_ε = 3; progress is
  normalised by the move up to τ_ε and is 0 after it; the lag gap is the mean of r_β - r_α
  over records 0…τ_ε: ((0-0) + (0-½) + (¼-1) + (1-1)) / 4 = -0.3125. Every value is a
  dyadic fraction, so float64 is exact. Never reaching ε gives τ = -1, r ≡ 0 and a NaN gap.
  Kills: the gap as the mean of r_β + r_α; first_step_at_most returning 1 for "never"."""
  alpha = jnp.array([[0.0], [1.0], [2.0], [2.0], [5.0]])  # |α_t - α_0| = 0, 1, 2, 2, 5
  beta = jnp.array([[0.0], [0.0], [1.0], [4.0], [4.0]])   # |β_t - β_0| = 0, 0, 1, 4, 4
  risk = jnp.array([1.0, 0.5, 0.25, 0.0625, 0.03125])
  out = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
  assert int(out.tau_eps) == 3
  np.testing.assert_array_equal(out.r_alpha, [0.0, 0.5, 1.0, 1.0, 0.0])
  np.testing.assert_array_equal(out.r_beta, [0.0, 0.0, 0.25, 1.0, 0.0])
  assert float(out.lag_gap) == -0.3125
  assert (int(out.half_time_alpha), int(out.half_time_beta)) == (1, 3)
  never = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.01)
  assert int(never.tau_eps) == -1 and np.isnan(float(never.lag_gap))
  assert int(never.half_time_alpha) == int(never.half_time_beta) == -1
  np.testing.assert_array_equal(never.r_alpha, 0.0)


def test_horizon_free_lag_weights_the_groups_of_a_tied_run():
  """With weights w_g (the group sizes of a tied run) the distance is
  sqrt(Σ_g w_g (x_tg - x_0g)²): α moves (1, 0) then (1, 2) under w = (4, 1), distances 0, 2,
  √8, so r_α(1) = 2/√8 = 1/√2 ≥ ½ and t_α^{1/2} = 1 (unweighted: 1/√5 < ½, t = 2); β moves
  along the first group only, r_β = 0, 1, 1. The gap is (1 - 1/√2)/3 over records 0…τ_ε = 2.
  r_α(1) is a square root and a division of exact numbers: within 1e-15 relative.
  Kills: the weights dropped from the progress."""
  alpha = jnp.array([[0.0, 0.0], [1.0, 0.0], [1.0, 2.0], [1.0, 2.0]])
  beta = jnp.array([[0.0, 0.0], [2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
  risk = jnp.array([0.5, 0.3, 0.05, 0.01])
  out = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1, weights=jnp.array([4.0, 1.0]))
  assert int(out.tau_eps) == 2
  np.testing.assert_allclose(out.r_alpha, [0.0, 2.0 ** -0.5, 1.0, 0.0], rtol=1e-15, atol=0)
  np.testing.assert_array_equal(out.r_beta, [0.0, 1.0, 1.0, 0.0])
  assert (int(out.half_time_alpha), int(out.half_time_beta)) == (1, 1)
  # A few roundings of numbers near 1, then 1 - 0.707 (relative error ≤ ~8 ulp): 4e-15.
  np.testing.assert_allclose(float(out.lag_gap), (1.0 - 2.0 ** -0.5) / 3, rtol=4e-15)
  unweighted = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
  assert int(unweighted.half_time_alpha) == 2


def test_horizon_free_lag_of_a_group_that_never_moves_is_zero():
  """"A group that has not moved by τ_ε has r ≡ 0" (docstring): r_α ≡ 0 (not 0/0 = NaN) and
  the gap is the mean of r_β alone, (0 + 0 + ¼ + 1) / 4 = 0.3125 (dyadic: exact); its
  half-time is -1. Kills: `scale >= 0` in progress (divides 0 by 0)."""
  alpha = jnp.zeros((5, 2))
  beta = jnp.array([[0.0], [0.0], [1.0], [4.0], [4.0]])
  risk = jnp.array([1.0, 0.5, 0.25, 0.0625, 0.03125])
  out = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
  np.testing.assert_array_equal(out.r_alpha, 0.0)
  assert float(out.lag_gap) == 0.3125
  assert int(out.half_time_alpha) == -1 and float(out.half_time_ratio) == -1.0
