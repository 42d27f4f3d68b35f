"""The language protocol and the engine contract (lagjax/data/languages.py,
lagjax/dynamics/engines.py).

A language family defined and registered in this file alone runs through the
routes that need nothing but its labels, and is refused, in one line naming
what is missing, by those that need more. Both engines, given the same plan on
the same language, return Trajectories on the same record grid with the same
values.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import engines


@dataclasses.dataclass(frozen=True)
class FirstToken(lj.languages.Language):
  """y = +1 iff the string starts with `letter`: order-dependent, so labels are not a
  function of presence or counts (no PresenceLabels)."""

  d: int
  letter: int
  pi: tuple
  length: object

  def label_tokens(self, tokens, mask):
    del mask  # every string has a first token (n >= 1)
    return jnp.where(jnp.asarray(tokens)[..., 0] == self.letter, 1.0, -1.0)

  def positive_rate(self) -> float:
    return self.pi[self.letter]

  def describe(self) -> str:
    return f"first_token(d={self.d}, letter={self.letter})"


def first_token(d: int, letter: int = 0) -> FirstToken:
  return FirstToken(d, letter, (1.0 / d,) * d, lj.geometric(0.25))


lj.languages.register("first_token", first_token)


def test_a_family_registered_here_runs_through_the_sampled_route():
  """R(θ) for α = 0, β ≡ b is ½[(b-1)² P(y=+1) + (b+1)² P(y=-1)] whatever the strings:
  the estimate on 20,000 strings lies within 5 standard errors of it."""
  lang = lj.languages.make("first_token", 4, letter=1)
  b = 0.3
  theta = {"alpha": np.zeros(4), "beta": np.full(4, b)}
  rate = lang.positive_rate()
  exact = 0.5 * ((b - 1.0) ** 2 * rate + (b + 1.0) ** 2 * (1.0 - rate))
  # With α ≠ 0 the estimate must still be a finite risk between 0 and max (|β| + 1)²/2.
  estimate = lj.population_risk(lang, theta, route="sampled", n_samples=20_000)
  assert estimate.risk_route == "sampled"
  # f ≡ b, so the loss takes two values: the standard error is that of a Bernoulli mean.
  assert abs(estimate.value - exact) < 5 * estimate.details["stderr"]
  assert estimate.details["stderr"] > 0


def test_routes_that_need_presence_labels_refuse_it_in_one_line():
  lang = first_token(4)
  theta = {"alpha": np.zeros(4), "beta": np.zeros(4)}
  with pytest.raises(ValueError, match=r"route 'laplace' does not support first_token\(d=4, "
                     r"letter=0\): first_token\(d=4, letter=0\) does not declare PresenceLabels"
                     ) as refused:
    lj.population_risk(lang, theta, route="laplace")
  assert "\n" not in str(refused.value)
  with pytest.raises(ValueError, match="route 'lattice' does not support first_token"):
    lj.risk_fn(lang, route="lattice", loss="logistic")
  with pytest.raises(ValueError, match="no exact route supports first_token.*route='sampled'"):
    lj.population_risk(lang, theta)
  with pytest.raises(ValueError, match="count-vector sampling needs labels .* PresenceLabels"):
    lj.data.sampling.sample_counts(jax.random.key(0), lang, 8)


def test_engines_refuse_it_naming_what_each_misses():
  plan = lj.plans.three_phase(1.0, 1.0, 1.0, 3)
  with pytest.raises(ValueError, match="no engine runs plan 'three_phase' on first_token.*"
                     "closed_form: .*PresenceLabels.*steps: .*PresenceLabels"):
    engines.build(first_token(4), plan)


def test_engines_choose_the_closed_form_where_it_applies():
  lang = lj.occurrence(6)
  assert engines.choose(lang, lj.plans.three_phase(1.0, 1.0, 1.0, 3)) == "closed_form"
  assert engines.choose(lang, lj.plans.joint(1.0, 3)) == "steps"
  assert engines.choose(lang, lj.plans.three_phase(1.0, 1.0, 1.0, 3,
                                                   objective=lj.plans.Empirical(8))) == "steps"
  with pytest.raises(ValueError, match="engine 'closed_form' cannot run plan 'joint'.*'both'"):
    engines.build(lang, lj.plans.joint(1.0, 3), engine="closed_form")


@pytest.mark.parametrize("plan", [
    lj.plans.three_phase(8.0, 64.0, 1.0, 30, steps1=3),
    lj.plans.custom([lj.plans.Phase("output", 8.0, 2), lj.plans.Phase("attention", 64.0, 2),
                     lj.plans.Phase("output", 1.0, 10), lj.plans.Phase("attention", 10.0, 3)]),
])
def test_both_engines_give_one_trajectory_on_one_grid(plan):
  """The closed form and the step-by-step loop record the same steps, token groups, risks and
  parameters. Both are exact: the output phases' closed form (eigenbasis, then powers)
  and T plain GD steps agree to roundoff, ~1e-15 relative per step over 35 steps; the
  risks are the Gram form and the Laplace quadrature (< 1e-15); 1e-12 bounds both."""
  lang = lj.occurrence(8)
  etas = jnp.asarray(plan.etas)
  runs = {}
  for engine in ("closed_form", "steps"):
    evaluation = engines.build(lang, plan, num_records=16, engine=engine)
    assert evaluation.engine == engine
    runs[engine] = jax.jit(evaluation.evaluate)(etas, jax.random.key(0))
  closed, steps = runs["closed_form"], runs["steps"]
  np.testing.assert_array_equal(closed.steps, steps.steps)
  assert closed.partition == steps.partition and closed.cls == steps.cls
  for field in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(closed, field), getattr(steps, field), rtol=1e-12,
                               atol=1e-12, err_msg=field)
  assert not bool(closed.diverged) and not bool(steps.diverged)
  np.testing.assert_allclose(closed.expand(closed.beta[-1]), steps.token_params()["beta"],
                             rtol=1e-12, atol=1e-12)
  assert float(jnp.abs(closed.alpha[-1]).max()) > 0.1  # attention really moved
