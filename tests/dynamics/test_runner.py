"""The one training loop (lagjax/dynamics/runner.py, docs/theory.md §5): its record grid, its
divergence rule and cap, and the checks it makes before anything runs.

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code. The loop's trajectories are checked against hand-written loops in
tests/dynamics/test_plans.py and tests/dynamics/test_train.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj


def test_record_grid_by_hand():
  """record_grid(T, K) = round(kT/K), k = 0…K, joined with round(T^(k/(K-1))), k = 0…K-1
  (docstring): for T = 100, K = 4 the uniform part is 0, 25, 50, 75, 100 and the geometric
  part 1, 5 (4.64), 22 (21.5), 100. Integers: exact.
  Kills: the uniform part with K + 2 points (linspace(0, T, K + 2))."""
  grid = lj.runner.record_grid(100, 4)
  np.testing.assert_array_equal(grid, [0, 1, 5, 22, 25, 50, 75, 100])
  np.testing.assert_array_equal(lj.runner.uniform_records(100, 4),
                                [True, False, False, False, True, True, True, True])


def test_divergence_rule_keeps_a_step_at_exactly_max_value():
  """step_is_finite: a step counts when its objective is finite and <= max_value (docs and
  docstring): the objective equal to max_value is kept, the next float above is not, and a
  non-finite parameter is refused. Exact float comparisons.
  Kills: `value < max_value`."""
  params = {"beta": jnp.ones(2)}
  limit = lj.runner.MAX_VALUE
  assert bool(lj.runner.step_is_finite(jnp.float64(limit), limit, params))
  assert not bool(lj.runner.step_is_finite(jnp.nextafter(jnp.float64(limit), jnp.inf), limit,
                                           params))
  assert not bool(lj.runner.step_is_finite(1.0, limit, {"beta": jnp.array([1.0, jnp.nan])}))


def test_make_loop_rejects_a_record_grid_that_does_not_end_at_num_steps():
  """record_steps must rise from 0 to num_steps: a grid that stops short, one that starts
  late and one that falls are each refused before anything runs.
  Kills: the end check joined to the monotonicity check with `and`."""
  plan = lj.plans.joint(0.1, 4)
  for grid in ([0, 2, 3], [1, 2, 4], [0, 3, 2, 4]):
    with pytest.raises(ValueError, match="record_steps"):
      lj.runner.make_loop(plan.slots(), lambda params: params, lambda key: None, num_steps=4,
                          record=lambda params: {}, record_steps=grid)


def test_locate_divergence_at_the_first_record():
  """locate_divergence: when the first record (step 0) already fails the rule, the run
  diverged at step 0, as the loop would mark it (θ_0's objective is judged by step 0); a
  later first failure is bisected to the first failing step. Exact: integer steps, and
  inf / 1e9 against the cap 1e8.
  Kills: the lower end +1 instead of -1 below the first record (then hi = 0 is not above lo
  and the run counts as not diverged)."""
  zeros = jnp.zeros((3, 2))
  steps, total = jnp.array([0, 5, 10]), 10

  @jax.jit  # one compiled program for the four cases (first_bad traced)
  def run(risk, first_bad):
    records = {"risk": risk, "alpha": zeros, "beta": zeros}
    state_at = lambda t: (jnp.where(t >= first_bad, 1e9, 1.0), jnp.zeros(2), jnp.zeros(2))
    return lj.runner.locate_divergence(records, steps, total, state_at, 1e8, 4)

  def locate(risk, first_bad):
    diverged, step = run(jnp.asarray(risk), first_bad)
    return bool(diverged), int(step)

  assert locate([jnp.inf, jnp.inf, jnp.inf], 0) == (True, 0)
  assert locate([1e9, 1e9, 1e9], 0) == (True, 0)
  assert locate([1.0, 1e9, 1e9], 3) == (True, 3)
  assert locate([1.0, 1.0, 1.0], 20) == (False, -1)


def test_default_divergence_cap_is_one_e8():
  """The one divergence cap is lj.runner.MAX_VALUE = 1e8 (docs/theory.md §5, README), the
  default max_value of make_loop: an objective of exactly 1e8 runs on, one of 1e8 + 1 (a
  float64 integer, exact) is not taken and the run diverges at step 0.
  Kills: MAX_VALUE = 100000001.0."""
  plan = lj.plans.output_only(0.5, 3)
  params0 = {"beta": jnp.ones(2)}

  @jax.jit  # one compiled loop for both objective values (value traced)
  def run(value):
    objective = lambda key: lambda params, t, phase: (jnp.asarray(value),
                                                      {"beta": jnp.ones(2)})
    loop = lj.runner.make_loop(plan.slots(), lambda params: {"beta": "output"}, objective,
                               lambda params: {}, num_steps=3)
    return loop(params0, jax.random.key(0), plan.data())

  at_cap, above = run(1e8), run(1e8 + 1)
  assert not bool(at_cap.diverged) and int(at_cap.diverged_step) == -1
  np.testing.assert_array_equal(at_cap.params["beta"], [-0.5, -0.5])  # 3 steps of -0.5
  assert bool(above.diverged) and int(above.diverged_step) == 0
  np.testing.assert_array_equal(above.params["beta"], [1.0, 1.0])


def _primitive_names(jaxpr) -> set:
  """Names of the primitives of a jaxpr and of every jaxpr inside it."""
  names = set()
  for eqn in jaxpr.eqns:
    names.add(eqn.primitive.name)
    for sub in jax.extend.core.jaxprs_in_params(eqn.params):
      names |= _primitive_names(sub)
  return names


def test_map_under_vmap_keeps_a_cond_a_branch_with_the_values_of_vmap():
  """map_under_vmap(fn, None): under vmap the batch goes through lax.map one member at a time,
  so fn's lax.cond stays a cond (a plain vmap makes it a select of both branches, issue 38);
  a tracer fn closes over (here the batched threshold) is passed in, and the values equal
  vmap(fn)'s exactly. Chunks (batch_size 2 of 5 members, a remainder) give the same values.
  Kills: a rule that vmaps fn (no cond left), a rule that drops the closed-over tracer."""
  def make(threshold):
    return lambda x: jax.lax.cond(x > threshold, jnp.sqrt, lambda v: -v, x)

  def plain(x, threshold):
    return make(threshold)(x)

  def mapped(x, threshold, size=None):
    return lj.runner.map_under_vmap(make(threshold), size)(x)

  xs, thresholds = jnp.array([4.0, -1.0, 9.0, 0.5, 2.0]), jnp.array([0.0, 0.0, 10.0, 0.0, 3.0])
  expected = jax.vmap(plain)(xs, thresholds)
  np.testing.assert_array_equal(jax.jit(jax.vmap(mapped))(xs, thresholds), expected)
  np.testing.assert_array_equal(jax.jit(jax.vmap(lambda x, t: mapped(x, t, 2)))(xs, thresholds),
                                expected)
  assert "cond" not in _primitive_names(jax.make_jaxpr(jax.vmap(plain))(xs, thresholds).jaxpr)
  assert "cond" in _primitive_names(jax.make_jaxpr(jax.vmap(mapped))(xs, thresholds).jaxpr)


def test_vmapped_train_runner_in_chunks_equals_the_loop():
  """lj.train's runner (make_loop with batch_chunk and records_per_member) under vmap: 20
  step sizes walk in chunks of BATCH_CHUNK = 16 (a remainder of 4) and take their records one
  at a time, so the compiled batch keeps the records' lax.cond (the sampled 0-1 error on
  occurrence(12), one group per token); every trajectory and record equals the single run's
  to 1e-15: the same operations per member, which vectorized and scalar code may round
  apart by an ulp (observed ≤ 7e-18 on values ≤ 0.5 after 6 steps; before the chunks and
  the per-member records the batch differed from the loop in the same way).
  Kills: records_per_member dropped in train.make_runner (no cond left)."""
  lang, plan = lj.occurrence(12), lj.plans.joint(1.0, 6)
  partition = lj.partition.singletons(12)
  run = lj.dynamics.train.make_runner(lang, plan.slots(), partition, num_steps=6,
                                      record_every=3)
  theta0 = lj.models.direct.zero_params(12)

  def one(eta):
    return run(theta0, jax.random.key(0), plan.data(etas=eta[None]))

  etas = jnp.geomspace(0.1, 3.0, 20)
  assert "cond" in _primitive_names(jax.make_jaxpr(jax.vmap(one))(etas).jaxpr)
  batch, single = jax.jit(jax.vmap(one))(etas), jax.jit(one)
  for i, eta in enumerate(etas):
    alone = single(eta)
    for name in ("risk", "alpha", "beta"):
      np.testing.assert_allclose(getattr(batch, name)[i], getattr(alone, name), rtol=0,
                                 atol=1e-15)
    for name, value in alone.records.items():
      np.testing.assert_allclose(batch.records[name][i], value, rtol=0, atol=1e-15)
