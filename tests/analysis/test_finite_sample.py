"""Sample complexity helpers (lagjax/analysis/finite_sample.py, docs/theory.md §9d): the bracket
check, N* and its bootstrap interval, the seed error and success rule, the empirical Gram matrix
and the rate models.

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code. The driver (success curves, N* against a direct Monte Carlo) is tested
in tests/analysis/test_scaling.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagjax.analysis import finite_sample
from lagjax.models import direct


def test_check_bracket_reads_the_last_grid_point():
  """check_bracket: success must start below the level and END at or above it, read at the
  largest N (docstring) — a rate above the level at an inner N does not bracket when the
  last one is below. Kills: rates[-2] for the last rate."""
  n_grid = np.array([10, 20, 40])
  finite_sample.check_bracket(5, n_grid, np.array([0.1, 0.3, 0.7]))
  with pytest.raises(ValueError, match="larger N"):
    finite_sample.check_bracket(5, n_grid, np.array([0.1, 0.7, 0.3]))


def test_n_star_replicates_below_the_grid_are_zero():
  """n_star: a bootstrap replicate that already reaches the level at the smallest N is 0
  (docstring: "+inf (above) or 0 (below)"), and one that never reaches it is +inf. Every
  seed succeeds at every N (or none does), so every replicate is 0 (or +inf): exact. (The
  interval of all-+inf replicates is NaN, inf - inf inside np.percentile, so only the
  replicates are checked.)
  Kills: 1.0 in place of 0.0 for replicates below the grid."""
  n_grid = np.array([10, 20, 40])
  estimate, low, high, replicates = finite_sample.n_star(n_grid, np.ones((4, 3), bool), 0.5,
                                                         resamples=20)
  assert estimate == -np.inf and (low, high) == (0.0, 0.0)
  np.testing.assert_array_equal(replicates, 0.0)
  with np.errstate(invalid="ignore"):  # the percentiles of all-+inf replicates: inf - inf
    _, _, _, replicates = finite_sample.n_star(n_grid, np.zeros((4, 3), bool), 0.5,
                                               resamples=20)
  np.testing.assert_array_equal(replicates, np.inf)


@pytest.mark.parametrize("confidence, percentiles", [(0.95, (2.5, 97.5)), (0.9, (5.0, 95.0))])
def test_n_star_interval_is_the_two_sided_percentile_interval(confidence, percentiles):
  """(low, high) are the (1-c)/2 and (1+c)/2 percentiles of the returned replicates.

  Computed here with np.percentile at fixed percentiles, so a tail of 100(1-c) instead of
  50(1-c) (the (5, 95) interval at c = 0.95) fails: the replicates below are spread, so the
  two intervals differ (asserted). Same numpy call on the same array: equality is exact.
  """
  n_grid = np.array([10, 20, 40, 80, 160, 320])
  rng = np.random.default_rng(0)
  # 12 seeds whose success probability rises along the grid: bootstrap curves cross 0.5 at
  # many different N.
  success = rng.random((12, n_grid.size)) < np.linspace(0.05, 0.95, n_grid.size)
  estimate, low, high, replicates = finite_sample.n_star(n_grid, success, 0.5, resamples=400,
                                                         confidence=confidence)
  assert replicates.shape == (400,)
  expected_low, expected_high = np.percentile(replicates, percentiles)
  assert (low, high) == (expected_low, expected_high)
  # The test can tell the right tail from the doubled one.
  wrong_tail = 100.0 * (1.0 - confidence)
  assert (low, high) != tuple(np.percentile(replicates, [wrong_tail, 100.0 - wrong_tail]))
  assert estimate == finite_sample.crossing(n_grid, success.mean(0), 0.5)


def test_a_diverged_seed_reports_error_one():
  """finite_sample.seed_error: a seed whose phase-3 β has an inf or a NaN reports 0-1 error 1
  (docs/theory.md §9d: every string wrong), a finite one its own error; exact.
  Kills: the diverged error 1.0 -> 2.0 (the success flags alone cannot see it)."""
  for bad in (jnp.inf, -jnp.inf, jnp.nan):
    assert float(finite_sample.seed_error(jnp.array([0.5, bad]), 0.25)) == 1.0
  assert float(finite_sample.seed_error(jnp.array([0.5, -3.0]), 0.25)) == 0.25


def test_success_includes_an_error_equal_to_the_threshold():
  """finite_sample.succeeded: error <= threshold (docs/theory.md §9d), so a perfect fit at
  threshold 0 and an error exactly at the threshold succeed; exact comparisons.
  Kills: <= -> < on the success threshold."""
  errors = jnp.array([0.0, 1e-3, 1.5e-3, 1.0])
  np.testing.assert_array_equal(finite_sample.succeeded(errors, 1e-3),
                                [True, True, False, False])
  np.testing.assert_array_equal(finite_sample.succeeded(errors, 0.0), [True, False, False, False])


@functools.partial(jax.jit, static_argnames="block")
def _empirical_gram(alpha, counts, labels, n, *, block):
  """finite_sample.empirical_gram with n traced: one compiled program serves every n."""
  return finite_sample.empirical_gram(alpha, counts, labels, n, block=block)


@pytest.mark.parametrize("n", [1, 4, 5, 7])
def test_empirical_gram_is_the_gram_of_the_first_n_rows(n):
  """empirical_gram(α, c, y, n) = (WᵀW/n, Wᵀy/n) over the first n rows, W =
  direct.attention_masses(α, c), whatever n is modulo the block size (here 4: n = 1 and 5 end
  with a block of one row). Against a direct product on the same rows: the same float64
  products (masses <= 1, n <= 7 terms) summed block by block instead of at once, so they
  differ by rounding only; rtol 1e-13.
  Kills: (n + block - 2) // block blocks (drops the last block when n ≡ 1 mod block)."""
  rng = np.random.default_rng(0)
  counts = jnp.asarray(rng.integers(0, 4, size=(9, 3)) + np.eye(3, dtype=int)[[0, 1, 2] * 3])
  labels = jnp.asarray(rng.choice([-1.0, 1.0], size=9))
  alpha = jnp.array([0.4, -0.3, 0.1])
  gram, target = _empirical_gram(alpha, counts, labels, n, block=4)
  masses = np.asarray(direct.attention_masses(alpha, counts[:n]))
  np.testing.assert_allclose(gram, masses.T @ masses / n, rtol=1e-13, atol=0)
  np.testing.assert_allclose(target, masses.T @ np.asarray(labels[:n]) / n, rtol=1e-13, atol=1e-16)


def test_rate_model_d_log_squared_d_fits_its_own_law():
  """fit_rate_models: N* = C d ln²d exactly (C = 3) is fitted by the "C d ln^2 d" model with
  residuals at rounding level (log of a product of a few floats: ~1e-15, so chi² ~ 1e-26 at
  σ = 0.1; bound 1e-20) and C recovered to rtol 1e-12, while C d and C d ln d misfit
  (chi² > 1). Kills: "C d ln^2 d" as d ln³ d."""
  d = np.array([10.0, 20.0, 40.0, 80.0, 160.0])
  fits = finite_sample.fit_rate_models(d, 3.0 * d * np.log(d) ** 2, np.full(d.size, 0.1))
  exact = fits["C d ln^2 d"]
  assert exact["chi2"] < 1e-20 and exact["dof"] == 4
  np.testing.assert_allclose(exact["C"], 3.0, rtol=1e-12)
  assert fits["C d"]["chi2"] > 1.0 and fits["C d ln d"]["chi2"] > 1.0
