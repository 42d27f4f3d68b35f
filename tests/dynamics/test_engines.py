"""Every engine returns the one run record, lagjax/dynamics/trajectory.py's Trajectory
(docs/theory.md §5, §6): the same fields and record grid on the same plan and language, and
equal values where two engines apply.

Tolerance 1e-12. The engines compute the same dynamics by different arithmetic: the closed
form raises eigenvalues to the power t (output_phase.output_gd_path) where the loop takes t
steps, scaling's joint GD writes θ - η∇R/k where the loop applies optax's SGD to ∇R/k.
Both differ by float64 roundoff of O(d) sums per step (a few 1e-16 relative), far below
1e-12 over tens of steps, while a real difference (one wrong step, a shifted grid, a
per-token value on the wrong group) moves θ or R by far more than 1e-12.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quick import some_quick

import lagjax as lj
from lagjax.dynamics import engines, runner
from lagjax.dynamics.trajectory import Trajectory

EXACT = 1e-12
STEPS = 12
FIELDS = ("params", "steps", "risk", "alpha", "beta", "diverged", "diverged_step", "time",
          "records", "summary", "partition", "cls", "info")


def per_token(run):
  """(steps, risk, α, β) of a run, α and β per token (the records' common ground)."""
  return (np.asarray(run.steps), np.asarray(run.risk), np.asarray(run.expand(run.alpha)),
          np.asarray(run.expand(run.beta)))


def assert_same_records(run, other):
  """Same record grid (exactly), risk and per-token α, β to 1e-12 (relative where they are
  large: a diverging run reaches R ~ 1e10, where one ulp is ~1e-6), same divergence."""
  steps, *values = per_token(run)
  other_steps, *other_values = per_token(other)
  np.testing.assert_array_equal(steps, other_steps)
  for name, value, other_value in zip(("risk", "alpha", "beta"), values, other_values):
    np.testing.assert_allclose(value, other_value, rtol=EXACT, atol=EXACT, err_msg=name)
  assert bool(run.diverged) == bool(other.diverged)
  assert int(run.diverged_step) == int(other.diverged_step)


def test_trajectory_fields_are_the_one_record():
  """The record has the fields every engine fills (and `time`, for a continuous-time one).
  Fails if a field is renamed, dropped or added without updating the engines."""
  assert tuple(field.name for field in dataclasses.fields(Trajectory)) == FIELDS


ENGINE_PLANS = [
    lj.plans.three_phase(3.0, 30.0, 1.0, STEPS),
    lj.plans.attention_first(30.0, 1.0, STEPS, phase_steps=(2,)),
    lj.plans.output_only(2.0, STEPS),
    lj.plans.three_phase(3.0, 30.0, 40.0, STEPS),   # η3 λ > 2: the last phase diverges
]


# The quick loop runs the three-phase plan and its diverging variant.
@pytest.mark.parametrize("plan", some_quick(ENGINE_PLANS, [ENGINE_PLANS[0], ENGINE_PLANS[3]]),
                         ids=["three_phase", "attention_first", "output_only", "diverging"])
def test_closed_form_steps_engine_and_train_agree(plan):
  """On the grid 0…T (num_records = T), the closed form, the steps engine and lj.train give
  Trajectories with the same grid and, per token, equal risk, α and β to 1e-12 (and the
  same divergence step). Fails if an engine returns another type, records on another grid,
  or computes another trajectory."""
  lang = lj.occurrence(4)
  closed = engines.build(lang, plan, num_records=STEPS + 1, engine="closed_form")
  steps = engines.build(lang, plan, num_records=STEPS + 1, engine="steps")
  etas, key = jnp.asarray(plan.etas), jax.random.key(0)
  by_closed_form, by_steps = closed.evaluate(etas, key), steps.evaluate(etas, key)
  trained = lj.train(lang, plan)
  for run in (by_closed_form, by_steps, trained):
    assert type(run) is Trajectory
  np.testing.assert_array_equal(by_closed_form.steps, np.arange(plan.total_steps + 1))
  assert by_closed_form.partition == by_steps.partition == lj.partition.of_language(lang)
  assert trained.partition is None  # lj.train records per token
  assert_same_records(by_closed_form, by_steps)
  assert_same_records(by_steps, trained)
  if plan.phases[-1].eta == 40.0:
    assert bool(trained.diverged) and int(trained.diverged_step) > 2
  # The lag metrics are computed in the same (per-token) norm by every engine.
  for name in ("lag_gap", "half_time_alpha", "half_time_beta"):
    np.testing.assert_allclose(float(getattr(by_closed_form.lag(), name)),
                               float(getattr(trained.lag(), name)), rtol=0, atol=EXACT)


def test_scaling_joint_gd_equals_train_on_the_joint_plan():
  """scaling.make_joint_gd (its own loop, without the stop at τ_ε) and lj.train on the joint
  plan give Trajectories on the grid 0…T, equal per token to 1e-12 (docs/theory.md §9a).
  Fails if joint GD steps with another gradient scaling or records another state."""
  lang, eta = lj.occurrence(5), 4.0
  joint = jax.jit(lj.scaling.make_joint_gd(lang, epsilon=1e-9, max_steps=STEPS,
                                           stop_at_epsilon=False))(eta)
  trained = lj.train(lang, lj.plans.joint(eta, STEPS))
  assert type(joint) is Trajectory and trained.route == "laplace"
  assert int(joint.tau_eps) == -1 and int(joint.steps_run) == STEPS
  assert_same_records(joint, trained)
  np.testing.assert_allclose(float(joint.final_risk), float(trained.risk[-1]), rtol=0,
                             atol=EXACT)
  assert float(jnp.abs(trained.alpha[-1]).max()) > 0.1   # attention really moved


def test_task_and_erf_trainers_record_on_the_loops_grid():
  """The task trainer and the erf-SLR trainer return the same record, on the loop's grid
  every(T, k) (runner.every), with their own further records. Fails if one of them builds
  another type or records on another grid."""
  plan, every = lj.plans.three_phase(0.05, 0.05, 0.05, 5), 2
  grid = runner.every(plan.total_steps, every).tolist()
  task = lj.tasks.get_task("occurrence", d=3, max_len=4)
  model = lj.models.Model(
      lambda key: (lj.init_params(3), {}),
      lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask),
      lj.models.direct.PARAM_GROUPS)
  task_run = lj.task_train.train_task(task, model, plan, jax.random.key(0), batch_size=4,
                                      record_every=every, test_size=8)
  slr = lj.tasks.get_task("slr", m=3)
  start = {"k": jnp.array([1.0, 0.0, 0.0]), "v": jnp.array([0.0, 1.0, 0.0])}
  erf_run = lj.dynamics.erf_train.train_erf(slr, plan, 1.0, start, record_every=every)
  assert type(task_run) is Trajectory and type(erf_run) is Trajectory
  assert task_run.steps[0].tolist() == grid and erf_run.steps.tolist() == grid
  assert set(task_run.records) == {"test_metric"} and task_run.metric_name == "accuracy"
  assert set(erf_run.records) == {"k_overlap", "v_overlap"}
  assert task_run.alpha.shape == (1, len(grid), 3) and erf_run.alpha.shape == (len(grid), 3)
  np.testing.assert_array_equal(erf_run.alpha[0], start["k"])   # the first record is θ0
  np.testing.assert_array_equal(erf_run.alpha[-1], erf_run.params["k"])   # the last θ_T


def test_reprs_are_short():
  """A long run prints in a few lines, never its numbers; so do its lag metrics. Fails if a
  repr falls back to the dataclass's (hundreds of numbers)."""
  run = lj.train(lj.occurrence(3), lj.plans.three_phase(3.0, 9.0, 1.0, 500))
  text, lag = repr(run), repr(run.lag())
  assert len(text.splitlines()) <= 5 and len(text) < 400, text
  assert "503 records, steps 0…502" in text and "info: route=" in text
  assert len(lag.splitlines()) == 1 and len(lag) < 200, lag
  seeds = lj.train(lj.occurrence(3), lj.plans.output_only(1.0, 300), num_seeds=3,
                   tied=False)
  assert "(runs (3,))" in repr(seeds) and len(repr(seeds)) < 400


def test_flow_engine_is_registered_but_never_chosen_by_auto():
  """engine="flow" runs a plan's gradient flow (lagjax/dynamics/flow.py) only when asked for:
  "auto" picks GD engines for GD plans. Fails if "flow" enters ORDER or leaves ENGINES."""
  assert "flow" in engines.ENGINES and "flow" not in engines.ORDER
  lang = lj.occurrence(3)
  assert engines.choose(lang, lj.plans.joint(1.0, 10)) == "steps"
  assert engines.choose(lang, lj.plans.joint(1.0, 10), engine="flow") == "flow"
  assert engines.ENGINES["flow"].supports(lang, lj.plans.joint(0.0, 10), "squared", "auto") == (
      "plan phase 0 has duration k·η = 0 (eta = 0.0): a flow phase needs a duration > 0")
