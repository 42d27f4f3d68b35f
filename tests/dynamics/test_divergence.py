"""One divergence rule (docs/theory.md §5) at every entry point.

A run diverges at the first step t < T whose state θ_t has a risk that is not
finite or exceeds the cap, or non-finite parameters; it then stays at θ_t.
lj.train applies it step by step (runner.guard_divergence), the closed forms
locate it between their records (runner.locate_divergence), and
lj.closed_form.three_phase_outcome in its last phase for finite T and T = ∞.
They must agree on diverged, diverged_step and the state they stop at.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quick import some_quick

import lagjax as lj
from lagjax.dynamics import engines, runner

D = 8
# Around the case of the issue, three_phase(16, 200, 100, T) at d = 8 (phase 3 expands
# from step 2 on): stable and unstable η3, a huge η1 (step 1 already above the cap), and
# records coarser than the steps (num_records = 4). Horizons T = 3 and 6 end around the
# divergence at step 5; the other cases share T = 60, so lj.train and the closed-form engine
# compile one program for all of them.
CASES = [(16.0, 200.0, 100.0, 3), (16.0, 200.0, 100.0, 6), (16.0, 200.0, 100.0, 60),
         (16.0, 200.0, 5.0, 60), (16.0, 200.0, 4.3, 60), (16.0, 200.0, 1.0, 60),
         (1e10, 200.0, 1.0, 60), (16.0, 1e6, 1.0, 60)]


@pytest.fixture(scope="module")
def lang():
  return lj.occurrence(D)


_ENGINES = {}


def closed_form_engine(lang, plan):
  """The closed-form engine of `plan`, built (and compiled) once per horizon: its evaluate
  takes the step sizes as arguments, so the three-phase plans of one T share it."""
  horizon = (lang, plan.total_steps)
  if horizon not in _ENGINES:
    _ENGINES[horizon] = engines.build(lang, plan, num_records=4, engine="closed_form")
  return _ENGINES[horizon]


# The quick loop: the cases of T = 60, one compiled program (T = 3 and 6 compile their own).
@pytest.mark.parametrize("eta1, eta2, eta3, steps", some_quick(CASES, quick=CASES[2:]))
def test_entry_points_agree_on_divergence(lang, eta1, eta2, eta3, steps):
  """diverged and diverged_step agree exactly; the risks at the stopping state agree to
  1e-10 relative (the Gram form's backward error c·ε·‖M‖·‖v‖² and the Laplace route's
  < 1e-15, relative to a risk dominated by ‖M‖‖v‖² once it is past the cap)."""
  plan = lj.plans.three_phase(eta1, eta2, eta3, steps)
  run = lj.train(lang, plan)
  outcome = lj.closed_form.three_phase_outcome(lang, eta1, eta2, eta3, steps)
  evaluation = closed_form_engine(lang, plan)
  trajectory = evaluation.evaluate(jnp.asarray(plan.etas), jax.random.key(0))
  results = {"lj.train": (bool(run.diverged), int(run.diverged_step), float(run.risk[-1])),
             "three_phase_outcome": (outcome["diverged"], outcome["diverged_step"],
                                     outcome["risk"]),
             "closed-form engine": (bool(trajectory.diverged), int(trajectory.diverged_step),
                                    float(trajectory.risk[-1]))}
  reference = results["lj.train"]
  for name, (diverged, step, risk) in results.items():
    assert (diverged, step) == reference[:2], (name, results)
    np.testing.assert_allclose(risk, reference[2], rtol=1e-10, err_msg=name)
  assert not reference[0] or reference[2] > runner.MAX_VALUE or not math.isfinite(reference[2])


def test_the_issue_case_diverges_at_step_5_at_every_horizon(lang):
  """three_phase(16, 200, 100, T) at d = 8: lj.train and the closed form say step 5 for
  T = 50, 60, 90, 120 and ∞ (the closed form used to say 'not diverged' at T = 50 and 90,
  with risks 2.6e168 and 4.3e303)."""
  steps = {int(lj.train(lang, lj.plans.three_phase(16.0, 200.0, 100.0, 60)).diverged_step)}
  for horizon in (50, 60, 90, 120, math.inf):
    outcome = lj.closed_form.three_phase_outcome(lang, 16.0, 200.0, 100.0, horizon)
    assert outcome["diverged"]
    steps.add(outcome["diverged_step"])
  assert steps == {5}


def test_diverged_step_is_the_first_state_past_the_cap(lang):
  """Independently of the guard: with the cap lifted, the recorded risks R(θ_t) of the same
  run first exceed 1e8 at the step the capped run reports (the guard marks the step whose
  objective fails, not the last good one). T = 60, as in CASES (the free run's risk reaches
  ~1e202, still finite)."""
  plan = lj.plans.three_phase(16.0, 200.0, 100.0, 60)
  free = lj.train(lang, plan, max_risk=1e300)
  capped = lj.train(lang, plan)
  risk = np.asarray(free.risk)
  assert not bool(free.diverged)
  first = int(np.argmax(~np.isfinite(risk) | (risk > runner.MAX_VALUE)))
  assert risk[first] > runner.MAX_VALUE >= risk[first - 1]
  assert int(capped.diverged_step) == first
  # It stays at θ_t from there on: its records repeat the state of the first bad step.
  np.testing.assert_array_equal(np.asarray(capped.risk[first:]), risk[first])


def test_a_run_past_the_cap_at_step_0_diverges_at_step_0():
  """When the record at step 0 already breaks the rule, the run diverged at step 0 (§5: the
  first t < T whose θ_t fails), even where the exact state extended to t = -1 would fail
  too: bisection used to evaluate state_at(-1), a step before the run, and report
  diverged = True with diverged_step = -1. Exact: R_t = 1000·4^t against the cap 100
  (R_-1 = 250)."""
  steps, total = jnp.array([0, 5, 10]), 10
  state_at = lambda t: (1e3 * 4.0**t, jnp.zeros(2), jnp.zeros(2))
  records = {"risk": 1e3 * 4.0**steps, "alpha": jnp.zeros((3, 2)), "beta": jnp.zeros((3, 2))}
  locate = jax.jit(runner.locate_divergence, static_argnums=(2, 3, 4, 5))  # one program
  diverged, step = locate(records, steps, total, state_at, 100.0, 4)
  assert (bool(diverged), int(step)) == (True, 0)
