"""Training a model on a sampled task with a plan (docs/theory.md sections 5-7).

The model is a lagjax.models.Model: init(key) -> (params, fixed), apply(params,
fixed, batch) -> outputs, and its declared parameter groups. Each step draws a
fresh minibatch from the task (online SGD on the population); the one training
loop of lagjax.dynamics.runner applies the plan. The run is a Trajectory
(lagjax/dynamics/trajectory.py) whose risk is the loss on a fixed held-out batch, whose
alpha and beta are the attention and output groups' parameters, flattened (the lag
metrics of section 6 follow), and whose records hold the task's headline metric on that
batch (test_metric; info metric_name names it). Seeds and step sizes are vmapped, and any
plan with the same slots runs through the same compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from lagjax import models, validation
from lagjax.dynamics import plans, runner
from lagjax.dynamics.trajectory import Trajectory


def _flatten(params, labels, group: str):
  leaves = [jnp.ravel(params[k]) for k in sorted(params) if labels[k] == group]
  return jnp.concatenate(leaves) if leaves else jnp.zeros(0)


def make_task_runner(task, model: models.Model, slots: Sequence[plans.Slot], *, num_steps: int,
                     batch_size: int = 64, record_every: int = 10, test_size: int = 2048,
                     max_loss: float = runner.MAX_VALUE):
  """Builds run(key, data) -> Trajectory for one slot structure (jit and vmap it; §5, §7).

  Each step t draws a fresh minibatch of the task from the run's key and t (online SGD on
  the population) and applies the plan through the one loop of lagjax.dynamics.runner.
  The key also draws the model's init and the held-out batch.

  Args:
    task: a lagjax.tasks Task.
    model: the Model to train.
    slots: the plan's static slots (plans.Plan.slots(num_slots)).
    num_steps: scan length, at least the total steps of every plan run through it.
    batch_size: the minibatch size of each step.
    record_every: the record spacing (records every this many steps and at the end).
    test_size: the size of the held-out batch.
    max_loss: a training loss above this marks the run diverged.

  Returns:
    run(key, data) -> Trajectory for data a PlanData, with R = num_records(num_steps,
    record_every) records: risk (R,) the held-out loss, alpha (R, P_α) and beta (R, P_β)
    the attention and output groups flattened, records test_metric (R,) the task's
    headline metric (info metric_name).

  Example:
    >>> task = lj.tasks.get_task("occurrence", d=3, max_len=4)
    >>> apply = lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask)
    >>> model = lj.models.Model(lambda key: (lj.init_params(3), {}), apply,
    ...                         lj.models.direct.PARAM_GROUPS)
    >>> plan = lj.plans.joint(1.0, 2)
    >>> run = lj.task_train.make_task_runner(task, model, plan.slots(), num_steps=2,
    ...                                      batch_size=4, record_every=1, test_size=8)
    >>> # The records' shapes, traced without compiling (train_task runs one).
    >>> shapes = jax.eval_shape(run, jax.random.key(0), plan.data())
    >>> shapes.risk.shape, shapes.alpha.shape, shapes.beta.shape, shapes.test_metric.shape
    ((3,), (3, 3), (3, 3), (3,))
  """
  if not isinstance(model, models.Model):
    raise ValueError(f"model must be a lagjax.models.Model; got {type(model).__name__}.")
  for name, value in (("batch_size", batch_size), ("record_every", record_every),
                      ("test_size", test_size), ("num_steps", num_steps)):
    validation.check_int(name, value, 1, integral_floats=True)
  label_fn = functools.partial(models.group_labels, model.groups)

  def run(key, data: plans.PlanData) -> Trajectory:
    init_key, test_key, train_key = jax.random.split(key, 3)
    params, fixed = model.init(init_key)
    test_batch = task.sample(test_key, test_size)
    labels = label_fn(params)
    value_and_grad = jax.value_and_grad(
        lambda p, batch: task.loss(model.apply(p, fixed, batch), batch))

    def objective(_):
      def step_objective(params, t, phase):
        del phase
        return value_and_grad(params, task.sample(jax.random.fold_in(train_key, t), batch_size))
      return step_objective

    def record(params):
      outputs = model.apply(params, fixed, test_batch)
      return {"risk": task.loss(outputs, test_batch),
              "test_metric": task.metric(outputs, test_batch)[task.metric_name],
              "alpha": _flatten(params, labels, "attention"),
              "beta": _flatten(params, labels, "output")}

    loop = runner.make_loop(slots, label_fn, objective, record, num_steps=num_steps,
                            record_every=record_every, max_value=max_loss, always_step=True)
    return dataclasses.replace(loop(params, key, data),
                               info=(("metric_name", task.metric_name),))

  return run


def make_batched_runner(task, model: models.Model, slots: Sequence[plans.Slot], **options):
  """jit(vmap(run)) over keys (R,) and plan data (R, ...) (stack PlanData rows; §5, §7).

  One compilation per R serves every step size, phase length and plan with these
  slots, so a validation sweep over plans x η x seeds is a single call.

  Args:
    task: a lagjax.tasks Task.
    model: the Model to train.
    slots: the plans' shared static slots.
    **options: make_task_runner's keyword arguments (num_steps, batch_size, ...).

  Returns:
    runs(keys (R,), data (R, ...)) -> Trajectory with a leading axis R.

  Example:
    >>> task = lj.tasks.get_task("occurrence", d=3, max_len=4)
    >>> apply = lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask)
    >>> model = lj.models.Model(lambda key: (lj.init_params(3), {}), apply,
    ...                         lj.models.direct.PARAM_GROUPS)
    >>> # Two step sizes of one plan: stack their PlanData rows, one row per run.
    >>> plans = [lj.plans.output_only(eta, 2) for eta in (0.5, 1.0)]
    >>> data = jax.tree_util.tree_map(lambda *rows: jnp.stack(rows), *(p.data() for p in plans))
    >>> data.etas.tolist(), data.steps.tolist()
    ([[0.5], [1.0]], [[2], [2]])
    >>> runs = lj.task_train.make_batched_runner(task, model, plans[0].slots(), num_steps=2,
    ...                                          batch_size=4, record_every=2, test_size=8)
    >>> # One call runs both; their shapes, traced without compiling (train_task runs one).
    >>> shapes = jax.eval_shape(runs, jax.random.split(jax.random.key(0), 2), data)
    >>> shapes.risk.shape, shapes.beta.shape
    ((2, 2), (2, 2, 3))
  """
  return jax.jit(jax.vmap(make_task_runner(task, model, slots, **options)))


def make_grid_runner(task, model: models.Model, slots: Sequence[plans.Slot], **options):
  """jit of runs[s, c] = run(keys[s], data[c]) over keys (S,) and plan data (C, ...) (§5, §7).

  The C plans of one key see the same init, minibatches and held-out batch (common random
  numbers), and each of them is computed once: under the inner vmap over plans the key is
  not batched, so neither is anything drawn from it. Where sampling a batch costs more than
  the model's step (long padded strings, count forms), this runs C plans at close to the
  cost of one.

  Args:
    task: a lagjax.tasks Task.
    model: the Model to train.
    slots: the plans' shared static slots.
    **options: make_task_runner's keyword arguments (num_steps, batch_size, ...).

  Returns:
    runs(keys (S,), data (C, ...)) -> Trajectory with leading axes (S, C).

  Example:
    >>> task = lj.tasks.get_task("occurrence", d=3, max_len=4)
    >>> apply = lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask)
    >>> model = lj.models.Model(lambda key: (lj.init_params(3), {}), apply,
    ...                         lj.models.direct.PARAM_GROUPS)
    >>> # C = 2 plans with the same slots (one optimizer and objective each), S = 3 seeds.
    >>> plans = [lj.plans.joint(0.5, 2), lj.plans.attention_only(0.5, 2)]
    >>> plans[0].slots() == plans[1].slots()
    True
    >>> data = jax.tree_util.tree_map(lambda *rows: jnp.stack(rows), *(p.data() for p in plans))
    >>> runs = lj.task_train.make_grid_runner(task, model, plans[0].slots(), num_steps=2,
    ...                                       batch_size=4, record_every=2, test_size=8)
    >>> # Records of shape (S, C, R, ...), traced without compiling (train_task runs one).
    >>> shapes = jax.eval_shape(runs, jax.random.split(jax.random.key(0), 3), data)
    >>> shapes.risk.shape, shapes.alpha.shape
    ((3, 2, 2), (3, 2, 2, 3))
  """
  over_plans = jax.vmap(make_task_runner(task, model, slots, **options), in_axes=(None, 0))
  return jax.jit(jax.vmap(over_plans, in_axes=(0, None)))


def train_task(task, model: models.Model, plan: plans.Plan, key, *, num_seeds: int = 1,
               **options) -> Trajectory:
  """Runs `plan` on `task` for num_seeds seeds (vmapped; §5, §7); every array gets a seed axis.

  Args:
    task: a lagjax.tasks Task.
    model: the Model to train.
    plan: the Plan (a lagjax.dynamics.plans.Plan).
    key: the PRNG key; seed s runs on split(key, num_seeds)[s].
    num_seeds: the number of seeds S.
    **options: make_task_runner's keyword arguments (batch_size, record_every, ...).

  Returns:
    A Trajectory (as make_task_runner's run returns it) with a leading seed axis S.

  Example:
    >>> task = lj.tasks.get_task("occurrence", d=3, max_len=4)
    >>> apply = lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask)
    >>> model = lj.models.Model(lambda key: (lj.init_params(3), {}), apply,
    ...                         lj.models.direct.PARAM_GROUPS)
    >>> run = lj.task_train.train_task(task, model, lj.plans.joint(1.0, 2), jax.random.key(0),
    ...                                num_seeds=2, batch_size=4, record_every=1, test_size=8)
    >>> run.steps.tolist()
    [[0, 1, 2], [0, 1, 2]]
    >>> run.alpha.shape, run.diverged.tolist(), run.metric_name
    ((2, 3, 3), [False, False], 'accuracy')
    >>> # At θ0 = 0 the output f is 0, so the squared loss ½(f - y)² is ½ on every string.
    >>> np.round(np.asarray(run.risk[:, 0]), 6).tolist()
    [0.5, 0.5]
  """
  if not isinstance(plan, plans.Plan):
    raise ValueError(f"plan must be a lj.plans.Plan; got {type(plan).__name__}.")
  validation.check_int("num_seeds", num_seeds, 1, integral_floats=True)
  runner_fn = make_batched_runner(task, model, plan.slots(), num_steps=plan.total_steps,
                                  **options)
  data = jax.tree_util.tree_map(lambda x: jnp.stack([x] * num_seeds), plan.data())
  return runner_fn(jax.random.split(key, num_seeds), data)
