"""The tail-exponent fit (docs/theory.md §10b) on synthetic curves with relative noise at the
flow solver's tolerance (1e-8): it recovers a = 1 and a = 0.5, and says "no power-law tail" on
an exponential and on a plateau."""

import numpy as np
import pytest

from lagjax.analysis import tails

RTOL = 1e-8                               # lj.flow's default rtol
TIMES = np.geomspace(1.0, 1e6, 193)       # 32 records a decade, as a dense flow run


def _noisy(risks, seed=0):
  return risks * (1.0 + RTOL * np.random.default_rng(seed).standard_normal(risks.shape))


@pytest.mark.parametrize("exponent, constant, r_star", [(1.0, 2.0, 0.15), (0.5, 0.5, 0.3)])
def test_recovers_the_exponent_under_solver_noise(exponent, constant, r_star):
  """With e = C t^(-a) ≥ 2e-6 and noise 1e-8·R ≤ 3e-9, σ(ln e) ≤ 2e-3 on 65 points: the global
  slope is good to ~1e-4 (its standard error), so 2e-3 is a loose bound that still fails for
  a wrong fit, and the interval (≥ ± 2 standard errors) holds the true a."""
  fit = tails.fit_tail(TIMES, _noisy(r_star + constant * TIMES**-exponent), r_star,
                       rtol=RTOL)
  assert fit.power_law, fit
  assert abs(fit.exponent - exponent) < 2e-3
  assert fit.interval[0] <= exponent <= fit.interval[1]
  assert fit.interval[1] - fit.interval[0] < 0.02
  assert abs(fit.constant / constant - 1.0) < 0.05
  assert fit.num_points == 65 and fit.verdict.startswith("a = ")


def test_a_log_corrected_tail_is_one_power():
  """1/(t ln t): local exponents 1 + 1/ln t drift from 1.11 to 1.07, within the rule."""
  fit = tails.fit_tail(TIMES, _noisy(0.1 + 1.0 / (TIMES * np.log(TIMES + 1.0))), 0.1)
  assert fit.power_law and 1.07 < fit.exponent < 1.11
  assert fit.interval[0] <= 1.08 and fit.interval[1] >= 1.1


@pytest.mark.parametrize("scale", [2e5, 3e4])
def test_an_exponential_is_no_power_law(scale):
  fit = tails.fit_tail(TIMES, _noisy(0.2 + 0.1 * np.exp(-TIMES / scale)), 0.2)
  assert not fit.power_law
  assert fit.verdict.startswith("no power-law tail (")


def test_an_exponential_below_the_noise_is_no_power_law():
  """e^(-t/10³) is below 1e-8·R from t ≈ 2·10⁴ on: nothing left to fit."""
  fit = tails.fit_tail(TIMES, _noisy(0.2 + 0.1 * np.exp(-TIMES / 1e3)), 0.2)
  assert not fit.power_law and "within 100·rtol·R of zero" in fit.reason


def test_a_plateau_is_no_power_law():
  """A run stuck above R*: flat, with solver noise, and a slow drift of 1 % over the window."""
  flat = tails.fit_tail(TIMES, _noisy(np.full_like(TIMES, 0.2368)), 0.1572)
  assert not flat.power_law and "plateau" in flat.reason
  drifting = tails.fit_tail(TIMES, _noisy(0.1572 + 0.08 * (1 + 0.01 * np.log(TIMES))), 0.1572)
  assert not drifting.power_law


def test_a_power_law_outside_the_window_does_not_count():
  """A 1/t fall onto a plateau at 0.25 above R* = 0.2: a power on [1, 100] towards the plateau,
  a plateau on [10⁴, 10⁶] over R*."""
  risks = _noisy(0.25 + 1e-3 / TIMES)
  assert tails.fit_tail(TIMES, risks, 0.25, window=(1.0, 100.0)).power_law
  assert not tails.fit_tail(TIMES, risks, 0.2).power_law


def test_bad_input_names_the_field():
  with pytest.raises(ValueError, match="times and risks must be 1-D of one length"):
    tails.fit_tail(TIMES, TIMES[:-1], 0.0)
  with pytest.raises(ValueError, match="window must be"):
    tails.fit_tail(TIMES, TIMES, 0.0, window=(1e6, 1e4))
  with pytest.raises(ValueError, match="rtol must be a finite real > 0"):
    tails.fit_tail(TIMES, TIMES, 0.0, rtol=0.0)
  with pytest.raises(ValueError, match="times must be strictly increasing"):
    tails.fit_tail(TIMES[::-1], TIMES, 0.0)
