"""The hybrid engine (lagjax/dynamics/hybrid.py) against lj.train's loop (docs/theory.md §5).

Both compute exact population GD of the same plan; the hybrid engine raises (1 - ηλ) to the
power t in the eigenbasis of the output phase's exact Hessian where the loop takes t steps.
They differ by float64 roundoff: a few ulps per step of O(d) sums, amplified at most by
|1 - ηλ| ≤ 1 in a stable phase, so ≤ 1e-13 over the 60 steps here (measured 4e-16 to 5e-14
over 2,000 steps on every layout), while a wrong closed form (the metric, the constant
½, the step count, the divergence rule) moves R by more than 1e-10. A diverging run reaches
R ~ 1e10, where the tolerance is relative.
"""

import numpy as np
import pytest
from quick import some_quick

import lagjax as lj
from lagjax.dynamics import hybrid

TOL = 1e-10
STEPS = 60
LAYOUTS = {"cls": {}, "cls+first_last": {"positions": "first_last"},
           "last+first_last": {"query": "last", "positions": "first_last"}}
PLANS = {
    "three_phase": lj.plans.three_phase(1.0, 10.0, 1.0, STEPS - 11, steps1=10),
    "attention_first": lj.plans.attention_first(10.0, 1.0, STEPS - 1),
    "output_only": lj.plans.output_only(0.5, STEPS),
    "attention_only": lj.plans.attention_only(1.0, STEPS),
    "diverging": lj.plans.output_only(64.0, STEPS),         # ηλ_max > 2: diverges at step 4
    "diverging_late": lj.plans.three_phase(4.0, 100.0, 4.0, STEPS - 11, steps1=10),
}


@pytest.fixture(scope="module")
def lang():
  return lj.languages.from_spec("even_pairs")


# The quick loop runs each plan once, each layout twice.
QUICK = (("three_phase", "cls"), ("attention_first", "cls+first_last"),
         ("output_only", "last+first_last"), ("attention_only", "cls+first_last"),
         ("diverging", "last+first_last"), ("diverging_late", "cls"))


@pytest.mark.parametrize(("plan", "layout"),
                         some_quick([(plan, layout) for plan in PLANS for layout in LAYOUTS],
                                    QUICK))
def test_hybrid_equals_the_loop(lang, layout, plan):
  """Same record grid, risk, α and β at every step to 1e-10, same divergence step. Fails if
  an output phase's closed form, an attention step or the divergence rule differs."""
  theta0 = lj.init_params(lang.d, **LAYOUTS[layout])
  looped = lj.train(lang, PLANS[plan], theta0, zero_one=False)
  closed = hybrid.train(lang, PLANS[plan], theta0)
  assert closed.info == (("engine", "hybrid"),)
  np.testing.assert_array_equal(np.asarray(closed.steps), np.asarray(looped.steps))
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(np.asarray(getattr(closed, name)),
                               np.asarray(getattr(looped, name)), rtol=TOL, atol=TOL,
                               err_msg=name)
  assert bool(closed.diverged) == bool(looped.diverged)
  assert int(closed.diverged_step) == int(looped.diverged_step)
  for key, value in looped.params.items():
    np.testing.assert_allclose(np.asarray(closed.params[key]), np.asarray(value), rtol=TOL,
                               atol=TOL, err_msg=key)


def test_the_divergence_cases_diverge(lang):
  """The two diverging plans diverge under the loop, inside the run (else the comparison
  above tests nothing of the divergence rule)."""
  for name in ("diverging", "diverging_late"):
    run = lj.train(lang, PLANS[name], lj.init_params(lang.d, positions="first_last"),
                   zero_one=False)
    assert bool(run.diverged) and 0 < int(run.diverged_step) < STEPS, name


def test_record_every_subsamples_the_same_states(lang):
  """record_every = 7 records the steps 0, 7, …, and T of the every-step run."""
  plan = PLANS["three_phase"]
  every = hybrid.train(lang, plan)
  sparse = hybrid.train(lang, plan, record_every=7)
  expected = np.unique(np.r_[np.arange(0, STEPS, 7), STEPS])
  np.testing.assert_array_equal(np.asarray(sparse.steps), expected)
  np.testing.assert_array_equal(np.asarray(sparse.risk), np.asarray(every.risk)[expected])


def test_joint_is_refused_with_the_reason(lang):
  with pytest.raises(ValueError, match="phase 0 trains 'both'"):
    hybrid.train(lang, lj.plans.joint(1.0, 5))
