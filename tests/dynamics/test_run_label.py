"""Regime labels of runs (docs/theory.md §5d), on problems whose behaviour is known."""

import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import run_label

MAX_VALUE = 1e8


def _gd_quadratic(lam, eta, steps=200):
  """GD on R(x) = ½λx² from x = 1, with the divergence rule's cap."""
  x, risks, diverged = 1.0, [], False
  for _ in range(steps + 1):
    risk = 0.5 * lam * x * x
    if risk > MAX_VALUE:
      diverged = True
      break
    risks.append(risk)
    x -= eta * lam * x
  risks += [risks[-1]] * (steps + 1 - len(risks))
  return np.array(risks), diverged


@pytest.mark.parametrize("eta, expected", [(0.5, "monotone"),   # η < 1/λ: x shrinks
                                           (1.5, "monotone"),   # 1/λ < η < 2/λ: x flips sign,
                                           (2.5, "diverged")])  # R still falls; η > 2/λ
def test_gd_on_a_quadratic(eta, expected):
  risks, diverged = _gd_quadratic(1.0, eta)
  assert run_label.label_code(risks, diverged=diverged).label == expected


def test_uv_model_catapults():
  """GD on ½(uv − 1)² from (2.5, 0.1) at η = 0.5: η·λ_0 = η(u² + v²) ≈ 3.1 > 2, so the risk
  rises (0.28 → 3.8), the sharpness falls below 2/η, and the run ends below its start."""
  u, v, risks, lams = 2.5, 0.1, [], []
  for _ in range(60):
    r = u * v - 1.0
    risks.append(0.5 * r * r)
    lams.append(u * u + v * v)  # the top eigenvalue of the Hessian at a fit, to first order
    u, v = u - 0.5 * r * v, v - 0.5 * r * u
  label = run_label.label_code(np.array(risks))
  assert label.label == "catapult"
  assert float(label.max_rise) > 1.0
  assert lams[-1] * 0.5 < 2.0 < lams[0] * 0.5


def test_a_cycle_is_oscillating_with_its_period():
  three = np.tile([0.3, 0.2, 0.25], 12)
  assert run_label.label_code(three).label == "oscillating"
  assert int(run_label.label_code(three).period) == 3
  drifting = np.tile([0.3, 0.2], 20) - 1e-4 * np.arange(40)   # a slowly sinking 2-cycle
  label = run_label.label_code(drifting)
  assert (label.label, int(label.period)) == ("oscillating", 2)


def test_a_damped_oscillation_and_a_slow_tail_are_not_oscillating():
  t = np.arange(1.0, 400.0)
  assert run_label.label_code(1.0 / t).label == "monotone"             # a 1/t tail
  damped = 0.1 + 0.5 ** t * np.where(t % 2 == 0, 1.0, -1.0) * 0.05 + 0.01 / t
  assert run_label.label_code(damped).label == "non_monotone"  # it ends above its start


def test_edge_of_stability_by_sharpness():
  risks = 0.2 + 0.01 * np.tile([1.0, 0.0], 30) * np.exp(-np.arange(60) / 5)
  sharp = np.full(60, 1.98)
  assert run_label.label_code(risks, sharpness=sharp, etas=1.0).label == "edge_of_stability"
  assert run_label.label_code(risks, sharpness=sharp / 2, etas=1.0).label != "edge_of_stability"


def test_rises_that_end_above_the_start_are_non_monotone():
  risks = np.concatenate([np.linspace(0.5, 0.6, 10), np.full(30, 0.6)])
  assert run_label.label_code(risks).label == "non_monotone"


@pytest.mark.parametrize("option, value, message", [
    ("tolerance", 0.0, "tolerance must be > 0"), ("tolerance", -1.0, "tolerance must be > 0"),
    ("tail_fraction", 0.0, "tail_fraction must be in"), ("eos_band", 0.0, "eos_band must be"),
    ("max_period", 0, "max_period must be"), ("tolerance", "1e-9", "tolerance")])
def test_bad_options_are_named(option, value, message):
  with pytest.raises(ValueError, match=message):
    run_label.label_code(np.ones(10), **{option: value})


def test_too_few_records_and_sharpness_without_steps_are_refused():
  with pytest.raises(ValueError, match="at least 8 records"):
    run_label.label_code(np.ones(5))
  with pytest.raises(ValueError, match="etas must be given"):
    run_label.label_code(np.ones(10), sharpness=np.ones(10))


@pytest.mark.slow
def test_tomita4_at_eta_2_oscillates_with_period_2():
  """Exact joint GD at η = 2 on Tomita 4 (CLS token, position tables) falls into a two-step
  cycle by step 500 (issue 36's example). Its 600 steps run longer than they compile, so
  the run compiles at XLA level 2, not the suite's level 0 (19.8 -> 8.3 s)."""
  lang = lj.data.regular_builtins.tomita(4)
  run = lj.train(lang, lj.plans.joint(2.0, 600),
                 lj.init_params(lang.d, cls=True, positions="first_last"),
                 optimization_level=2)
  label = run_label.label_code(run.risk)
  assert (label.label, int(label.period)) == ("oscillating", 2)


def test_label_code_jits_and_vmaps_over_runs():
  """The sweep labels its runs under jit and vmap: the same labels as one at a time."""
  import jax
  runs = np.stack([np.tile([1.0, 0.5], 8), 0.5 * 0.25 ** np.arange(16.0)])
  batched = jax.jit(jax.vmap(lambda risk: run_label.label_code(risk)))(runs)
  assert [run_label.LABELS[int(c)] for c in batched.code] == ["oscillating", "monotone"]
  assert batched.period.tolist() == [2, 0]
