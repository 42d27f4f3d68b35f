"""Training plans (docs/theory.md section 5): the optax plan equals a hand-written phase loop.

The hand loops below apply each phase's update rule coordinate by coordinate
with the gradient of the per-token Laplace risk (partition None), and are
compared with lj.train(..., tied=False). Both use the same risk, so the
comparison isolates the plan machinery (phase switching, group masking,
per-phase optimizer state and schedules); the only differences are float64
roundoff of a few operations per step, far below the 1e-12 tolerance.
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lagjax as lj
from lagjax import partition as partition_lib
from lagjax.dynamics.plans import Empirical, Phase
from lagjax.dynamics.train import make_runner

D = 5
EXACT = 1e-12
GROUP_KEYS = {"attention": ("alpha",), "output": ("beta",), "both": ("alpha", "beta")}


@functools.cache
def per_token_risk(d):
  """Jitted risk and gradient of the per-token Laplace route of occurrence(d)."""
  route = lj.risk_fn(lj.occurrence(d))
  return jax.jit(route.risk), jax.jit(jax.grad(route.risk))


def sgd_rule(eta):
  def rule(grad, state, local_step):
    del local_step
    return eta * grad, state
  return rule


def schedule_rule(schedule):
  def rule(grad, state, local_step):
    return schedule(local_step) * grad, state
  return rule


def momentum_rule(eta, momentum):
  """optax.sgd(eta, momentum): trace ← g + μ trace, θ ← θ - η trace."""
  def rule(grad, state, local_step):
    del local_step
    trace = grad if state is None else grad + momentum * state
    return eta * trace, trace
  return rule


def adam_rule(eta, b1=0.9, b2=0.999, eps=1e-8):
  """Adam (Kingma & Ba) with bias correction, the phase's own step count from 1."""
  def rule(grad, state, local_step):
    m, v = (np.zeros_like(grad), np.zeros_like(grad)) if state is None else state
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad**2
    count = local_step + 1
    m_hat, v_hat = m / (1 - b1**count), v / (1 - b2**count)
    return eta * m_hat / (np.sqrt(v_hat) + eps), (m, v)
  return rule


def hand_run(theta0, phases):
  """Runs [(group, rule, steps), ...] by hand; returns the (α, β) and risk after every step."""
  risk, grad = per_token_risk(D)
  params = {k: np.asarray(v) for k, v in theta0.items()}
  alphas, betas, risks = [params["alpha"]], [params["beta"]], [float(risk(params))]
  for group, rule, steps in phases:
    states = {k: None for k in GROUP_KEYS[group]}  # every phase starts a fresh optimizer
    for local_step in range(steps):
      grads = grad(params)
      new = dict(params)
      for key in GROUP_KEYS[group]:
        update, states[key] = rule(np.asarray(grads[key]), states[key], local_step)
        new[key] = params[key] - update
      params = new
      alphas.append(params["alpha"])
      betas.append(params["beta"])
      risks.append(float(risk(params)))
  return np.array(alphas), np.array(betas), np.array(risks)


def assert_run_matches(run, expected):
  alphas, betas, risks = expected
  np.testing.assert_array_equal(run.steps, np.arange(len(risks)))
  np.testing.assert_allclose(run.alpha, alphas, rtol=0, atol=EXACT)
  np.testing.assert_allclose(run.beta, betas, rtol=0, atol=EXACT)
  np.testing.assert_allclose(run.risk, risks, rtol=0, atol=EXACT)


def random_theta(seed):
  rng = np.random.default_rng(seed)
  return {"alpha": jnp.asarray(rng.normal(0, 0.5, D)), "beta": jnp.asarray(rng.normal(0, 0.5, D))}


THREE_PHASE_ETAS = (5.0, 25.0, 1.0)


def three_phase_by_hand(etas):
  """three_phase from zero, output 1 step, attention 1 step, output 5 steps, by hand."""
  eta1, eta2, eta3 = etas
  return hand_run(lj.init_params(D), [("output", sgd_rule(eta1), 1),
                                      ("attention", sgd_rule(eta2), 1),
                                      ("output", sgd_rule(eta3), 5)])


def test_three_phase_equals_hand_loop():
  """three_phase(5, 25, 1) with 1, 1, 5 steps from zero: the optax plan = the phase loop."""
  plan = lj.plans.three_phase(*THREE_PHASE_ETAS, 5)
  assert [p.group for p in plan.phases] == ["output", "attention", "output"]
  assert [p.steps for p in plan.phases] == [1, 1, 5]
  run = lj.train(lj.occurrence(D), plan, tied=False)
  expected = three_phase_by_hand(THREE_PHASE_ETAS)
  assert_run_matches(run, expected)
  # Every phase moved its own group only, and the attention step really moved α.
  alphas, betas, _ = expected
  assert np.abs(alphas[2] - alphas[1]).max() > 1e-3
  np.testing.assert_array_equal(alphas[2:], np.broadcast_to(alphas[2], alphas[2:].shape))
  np.testing.assert_array_equal(betas[1], betas[2])


def test_custom_plan_with_adam_momentum_and_schedule_equals_hand_loop():
  """Adam on the output group, SGD with momentum on attention, a scheduled joint phase."""
  schedule = lambda count: 0.5 / (1.0 + count)
  plan = lj.plans.custom([
      Phase("output", 0.05, 3, optimizer=optax.adam),
      Phase("attention", 2.0, 3, optimizer=functools.partial(optax.sgd, momentum=0.9)),
      Phase("both", schedule, 2),
      Phase("output", 0.5, 2),
  ])
  theta0 = random_theta(0)
  run = lj.train(lj.occurrence(D), plan, theta0, tied=False)
  expected = hand_run(theta0, [("output", adam_rule(0.05), 3),
                               ("attention", momentum_rule(2.0, 0.9), 3),
                               ("both", schedule_rule(schedule), 2),
                               ("output", sgd_rule(0.5), 2)])
  assert_run_matches(run, expected)
  # The rules are distinguishable at this tolerance: plain SGD in the Adam and
  # momentum phases would give a different trajectory.
  plain = hand_run(theta0, [("output", sgd_rule(0.05), 3), ("attention", sgd_rule(2.0), 3),
                            ("both", schedule_rule(schedule), 2), ("output", sgd_rule(0.5), 2)])
  assert np.abs(plain[1][3] - expected[1][3]).max() > 1e-3
  assert np.abs(plain[0][6] - expected[0][6]).max() > 1e-3


def test_runner_is_traced_once_across_step_sizes():
  """make_runner's run(θ0, key, data) jits once; new etas are data, not a new trace."""
  lang = lj.occurrence(D)
  plan = lj.plans.three_phase(*THREE_PHASE_ETAS, 5)
  run = jax.jit(chex.assert_max_traces(make_runner(
      lang, plan.slots(), partition_lib.singletons(D), num_steps=plan.total_steps), n=1))
  theta0 = lj.init_params(D)
  other_etas = (2.0, 10.0, 0.5)
  first = run(theta0, jax.random.key(0), plan.data(etas=jnp.asarray(THREE_PHASE_ETAS)))
  second = run(theta0, jax.random.key(0), plan.data(etas=jnp.asarray(other_etas)))
  assert_run_matches(first, three_phase_by_hand(THREE_PHASE_ETAS))
  assert_run_matches(second, three_phase_by_hand(other_etas))


def test_learning_rate_and_phase_index_join_the_phases():
  """plan.learning_rate() is η of the phase active at each global step (join_schedules)."""
  plan = lj.plans.three_phase(5.0, 25.0, 1.0, 4, steps1=2, steps2=3)
  assert plan.total_steps == 9
  np.testing.assert_array_equal(plan.boundaries, [0, 2, 5, 9])
  learning_rate = plan.learning_rate()
  expected = [5.0, 5.0, 25.0, 25.0, 25.0, 1.0, 1.0, 1.0, 1.0]
  np.testing.assert_array_equal([float(learning_rate(t)) for t in range(9)], expected)
  np.testing.assert_array_equal([int(plan.phase_index(t)) for t in range(11)],
                                [0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2])
  np.testing.assert_array_equal(plan.etas, [5.0, 25.0, 1.0])


def test_named_plans():
  """The named plans of docs/theory.md section 5 have the documented phases."""
  expected = {
      "joint": ((1.5, 7), [("both", 1.5, 7)]),
      "three_phase": ((1.0, 2.0, 3.0, 7), [("output", 1.0, 1), ("attention", 2.0, 1),
                                           ("output", 3.0, 7)]),
      "attention_first": ((2.0, 3.0, 7), [("attention", 2.0, 1), ("output", 3.0, 7)]),
      "output_only": ((1.5, 7), [("output", 1.5, 7)]),
      "attention_only": ((1.5, 7), [("attention", 1.5, 7)]),
  }
  for name, (args, phases) in expected.items():
    plan = lj.plans.get_plan(name)(*args)
    assert plan.name == name
    assert [(p.group, p.eta, p.steps) for p in plan.phases] == phases
    assert all(p.objective == lj.plans.Population() for p in plan.phases)


def test_phase_trains_its_group():
  assert Phase("attention").trains("attention") and not Phase("attention").trains("output")
  assert Phase("output").trains("output") and not Phase("output").trains("attention")
  assert Phase("both").trains("attention") and Phase("both").trains("output")


# ---------------------------------------------------------------------------
# Bad input: ValueError naming the field.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eta", [-1.0, -1e-300, math.nan, math.inf, -math.inf])
def test_bad_eta(eta):
  with pytest.raises(ValueError, match="eta"):
    Phase("output", eta, 3)
  with pytest.raises(ValueError, match="eta"):
    lj.plans.three_phase(1.0, eta, 1.0, 3)
  with pytest.raises(ValueError, match="eta"):
    lj.plans.output_only(eta, 3)


@pytest.mark.parametrize("steps", [0, -2, 1.5, True])
def test_bad_steps(steps):
  with pytest.raises(ValueError, match="steps"):
    Phase("output", 1.0, steps)
  with pytest.raises(ValueError, match="steps"):
    lj.plans.joint(1.0, steps)


def test_bad_group():
  with pytest.raises(ValueError, match="group") as error:
    Phase("embedding", 1.0, 3)
  assert "attention" in str(error.value)  # the message lists the known groups


def test_plan_without_phases():
  with pytest.raises(ValueError, match="phase"):
    lj.plans.custom([])
  with pytest.raises(ValueError, match="phase"):
    lj.plans.custom([("output", 1.0, 3)])


@pytest.mark.parametrize("n_samples", [0, -5, 2.5])
def test_bad_empirical(n_samples):
  with pytest.raises(ValueError, match="n_samples"):
    Empirical(n_samples)
  with pytest.raises(ValueError, match="batch_size"):
    Empirical(10, batch_size=0)


def test_bad_objective():
  with pytest.raises(ValueError, match="objective"):
    Phase("output", 1.0, 3, objective="population")


def test_unknown_plan_name():
  with pytest.raises(ValueError, match="nope") as error:
    lj.plans.get_plan("nope")
  assert "three_phase" in str(error.value)  # the message lists the known plans


# --- blind spots found by mutmut on lagjax/dynamics/plans.py (docs/decisions/mutation-campaign.md)


@pytest.mark.parametrize("build, num_etas", [
    (lj.plans.joint, 1), (lj.plans.output_only, 1), (lj.plans.attention_only, 1),
    (lj.plans.attention_first, 2), (lj.plans.three_phase, 3),
    (lj.plans.get_plan("joint"), 1)])
def test_every_builder_keeps_the_steps_and_the_phase_options(build, num_etas):
  """The last phase has `steps` steps and every phase gets the shared options (here the
  optimizer). Kills: steps dropped (None) and **phase_options dropped, in joint,
  output_only and PlanSpec.__call__."""
  plan = build(*[0.25] * num_etas, 7, optimizer=optax.adam)
  assert plan.phases[-1].steps == 7
  assert all(phase.optimizer is optax.adam for phase in plan.phases)


def test_learning_rate_follows_a_schedule_phase():
  """A phase whose η is an optax schedule contributes that schedule (of the phase's own
  step), a constant phase its constant. Kills: the schedule replaced by a constant."""
  schedule = optax.linear_schedule(1.0, 0.0, 4)
  plan = lj.plans.custom([lj.plans.Phase("output", 0.5, 2), lj.plans.Phase("output", schedule, 4)])
  rate = plan.learning_rate()
  np.testing.assert_allclose([float(rate(t)) for t in range(6)],
                             [0.5, 0.5, 1.0, 0.75, 0.5, 0.25], rtol=0, atol=1e-15)


def test_unknown_plan_name_is_named_in_the_message():
  with pytest.raises(ValueError, match=r"^plan name must be one of \('joint', "):
    lj.plans.get_plan("jiont")


def test_empirical_accepts_the_smallest_and_integral_sizes_only():
  """n_samples >= 1 (integral floats allowed), batch_size None or >= 1. Kills: the bounds
  moved to 2 and integral_floats dropped."""
  assert lj.plans.Empirical(1).n_samples == 1
  assert lj.plans.Empirical(300.0).n_samples == 300.0
  assert lj.plans.Empirical(5, batch_size=1).batch_size == 1
  for bad in (0, 2.5, "3"):
    with pytest.raises(ValueError, match=r"Empirical n_samples \(N\)"):
      lj.plans.Empirical(bad)
  with pytest.raises(ValueError, match=r"Empirical batch_size must be None or an integer >= 1"):
    lj.plans.Empirical(5, batch_size=0)


def test_empirical_stores_integer_sizes():
  """Empirical keeps n_samples and batch_size as Python ints (integral floats converted, as
  Phase does with steps) and refuses a non-integral batch_size (2.5 used to pass)."""
  objective = lj.plans.Empirical(300.0, batch_size=10.0)
  assert (objective.n_samples, objective.batch_size) == (300, 10)
  assert type(objective.n_samples) is int and type(objective.batch_size) is int
  assert lj.plans.Empirical(5).batch_size is None
  for bad in (2.5, True, "3"):
    with pytest.raises(ValueError, match=r"^Empirical batch_size must be None or an integer "
                                         r">= 1; got "):
      lj.plans.Empirical(5, batch_size=bad)


# --- blind spots of the issue-17 mutation campaign (docs/results/mutation/campaign.md)


def test_phase_index_clips_to_the_last_phase_and_skips_empty_slots():
  """phase_index: the slot active at a global step, clipped to the last slot past the end;
  zero-length slots are never active (docstring). Integer searchsorted: exact.
  Kills: the clip at ends.shape[0] + 1 instead of - 1."""
  slot_steps = np.array([2, 0, 3])
  got = [int(lj.plans.phase_index(step, slot_steps)) for step in range(8)]
  assert got == [0, 0, 2, 2, 2, 2, 2, 2]
  plan = lj.plans.three_phase(0.1, 0.2, 0.3, 4)
  assert [int(plan.phase_index(step)) for step in (0, 1, 2, 5, 6, 50)] == [0, 1, 2, 2, 2, 2]


def test_empirical_accepts_one_sample():
  """Empirical(n_samples) takes any integer N >= 1 (validation bound 1); 0 is refused.
  Kills: the lower bound 2."""
  assert lj.plans.Empirical(1).n_samples == 1
  assert lj.plans.Empirical(1.0, batch_size=1).n_samples == 1
  with pytest.raises(ValueError, match="n_samples"):
    lj.plans.Empirical(0)


def test_phase_default_step_size_is_one():
  """Phase(group) without eta trains with η = 1 (the dataclass default, what a plan built
  from bare phases runs with). Exact. Kills: the default 2.0."""
  plan = lj.plans.custom([lj.plans.Phase("output", steps=2), lj.plans.Phase("both")])
  np.testing.assert_array_equal(plan.etas, [1.0, 1.0])
  assert float(plan.learning_rate()(0)) == 1.0


def test_plan_padding_to_num_slots():
  """Plan.slots / Plan.data pad a plan to num_slots >= #phases: exactly #phases slots is
  allowed (no padding), 5 slots add 2 zero-length slots with η = 0 that train nothing, and
  fewer slots than phases are refused. Exact: integers and the literal step sizes.
  Kills: `num_slots <= len(plan.phases)` refusing a full plan; padding = num_slots +
  #phases."""
  plan = lj.plans.three_phase(0.1, 0.2, 0.3, 4)
  assert len(plan.slots(3)) == 3
  np.testing.assert_array_equal(plan.data(3).steps, [1, 1, 4])
  slots, data = plan.slots(5), plan.data(5)
  assert len(slots) == 5 and slots[3] == slots[4] == slots[2]
  np.testing.assert_array_equal(data.steps, [1, 1, 4, 0, 0])
  np.testing.assert_array_equal(data.etas, [0.1, 0.2, 0.3, 0.0, 0.0])
  assert data.trains.shape == (5, 2) and not np.asarray(data.trains)[3:].any()
  with pytest.raises(ValueError, match="num_slots"):
    plan.slots(2)


@pytest.mark.parametrize("eta", ["1.0", b"1", True, None])
def test_a_step_size_that_is_not_a_number_is_refused(eta):
  """issue 34: `lj.plans.joint('1.0', 10)` ran, float() taking the string; the shared check
  refuses strings and bools in one line naming the field."""
  with pytest.raises(ValueError, match=r"Phase eta \(step size\) must be a finite real"):
    lj.plans.joint(eta, 10)
  assert lj.plans.joint(1, 10).phases[0].eta == 1.0


def test_phase_stores_the_checked_step_size_and_an_integral_step_count():
  """Phase keeps the step size as check_real returns it, a Python float (a NumPy float32
  would otherwise stay strongly typed in the update), and an integral float step count as an
  int, 2.0 -> 2, and names its steps field (issue 34's mutation campaign)."""
  phase = Phase("output", np.float32(0.5), 2.0)
  assert type(phase.eta) is float and phase.eta == 0.5
  assert type(phase.steps) is int and phase.steps == 2
  schedule = optax.constant_schedule(0.5)
  assert Phase("output", schedule, 2).eta is schedule  # a schedule is kept, not checked as a number
  with pytest.raises(ValueError, match=r"^Phase steps must be an integer >= 1; got 0\.$"):
    Phase("output", 1.0, 0)
