"""Training a model on a sampled task with a plan (docs/theory.md sections 5-7).

The model is a lagjax.models.Model: init(key) -> (params, fixed), apply(params,
fixed, batch) -> outputs, and its declared parameter groups. Each step draws a
fresh minibatch from the task (online SGD on the population); the one training
loop of lagjax.dynamics.runner applies the plan; records hold the test metric on a fixed
held-out batch and the flattened attention and output parameters, from which
the lag metrics of section 6 follow. Seeds and step sizes are vmapped, and any
plan with the same slots runs through the same compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from lagjax import models, validation
from lagjax.dynamics import metrics, plans, runner


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["steps", "test_loss", "test_metric", "attention", "output",
                                "diverged", "diverged_step"],
                   meta_fields=["metric_name"])
@dataclasses.dataclass(frozen=True)
class TaskRun:
  """Records at `steps`: held-out loss and headline metric, flattened group parameters."""

  steps: jax.Array
  test_loss: jax.Array
  test_metric: jax.Array
  attention: jax.Array
  output: jax.Array
  diverged: jax.Array
  diverged_step: jax.Array
  metric_name: str = "accuracy"

  def lag(self) -> metrics.LagMetrics:
    """r_α (attention group) and r_β (output group) of docs/theory.md section 6."""
    return metrics.lag_metrics(self.attention, self.output, self.steps)


def _flatten(params, labels, group: str):
  leaves = [jnp.ravel(params[k]) for k in sorted(params) if labels[k] == group]
  return jnp.concatenate(leaves) if leaves else jnp.zeros(0)


def make_task_runner(task, model: models.Model, slots: Sequence[plans.Slot], *, num_steps: int,
                     batch_size: int = 64, record_every: int = 10, test_size: int = 2048,
                     max_loss: float = runner.MAX_VALUE):
  """Builds run(key, data) -> TaskRun for one slot structure (jit and vmap it).

  Args:
    task: a lagjax.tasks Task.
    model: the Model to train.
    slots: the plan's static slots (plans.Plan.slots(num_slots)).
    num_steps: scan length, at least the total steps of every plan run through it.
    batch_size, record_every, test_size: minibatch size, record spacing, held-out size.
    max_loss: a training loss above this marks the run diverged.
  """
  if not isinstance(model, models.Model):
    raise ValueError(f"model must be a lagjax.models.Model; got {type(model).__name__}.")
  for name, value in (("batch_size", batch_size), ("record_every", record_every),
                      ("test_size", test_size), ("num_steps", num_steps)):
    validation.check_int(name, value, 1, integral_floats=True)
  label_fn = functools.partial(models.group_labels, model.groups)

  def run(key, data: plans.PlanData) -> TaskRun:
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
      return {"test_loss": task.loss(outputs, test_batch),
              "test_metric": task.metric(outputs, test_batch)[task.metric_name],
              "attention": _flatten(params, labels, "attention"),
              "output": _flatten(params, labels, "output")}

    loop = runner.make_loop(slots, label_fn, objective, record, num_steps=num_steps,
                            record_every=record_every, max_value=max_loss, always_step=True)
    trace = loop(params, key, data)
    records = trace.records
    return TaskRun(records["steps"], records["test_loss"], records["test_metric"],
                   records["attention"], records["output"], trace.diverged,
                   trace.diverged_step, task.metric_name)

  return run


def make_batched_runner(task, model: models.Model, slots: Sequence[plans.Slot], **options):
  """jit(vmap(run)) over keys (R,) and plan data (R, ...) (stack PlanData rows).

  One compilation per R serves every step size, phase length and plan with these
  slots, so a validation sweep over plans x η x seeds is a single call.
  """
  return jax.jit(jax.vmap(make_task_runner(task, model, slots, **options)))


def make_grid_runner(task, model: models.Model, slots: Sequence[plans.Slot], **options):
  """jit of runs[s, c] = run(keys[s], data[c]) over keys (S,) and plan data (C, ...).

  The C plans of one key see the same init, minibatches and held-out batch (common random
  numbers), and each of them is computed once: under the inner vmap over plans the key is
  not batched, so neither is anything drawn from it. Where sampling a batch costs more than
  the model's step (long padded strings, count forms), this runs C plans at close to the
  cost of one. Returns a TaskRun with leading axes (S, C).
  """
  over_plans = jax.vmap(make_task_runner(task, model, slots, **options), in_axes=(None, 0))
  return jax.jit(jax.vmap(over_plans, in_axes=(0, None)))


def train_task(task, model: models.Model, plan: plans.Plan, key, *, num_seeds: int = 1,
               **options) -> TaskRun:
  """Runs `plan` on `task` for num_seeds seeds (vmapped); every array gets a seed axis."""
  if not isinstance(plan, plans.Plan):
    raise ValueError(f"plan must be a lj.plans.Plan; got {type(plan).__name__}.")
  validation.check_int("num_seeds", num_seeds, 1, integral_floats=True)
  runner_fn = make_batched_runner(task, model, plan.slots(), num_steps=plan.total_steps,
                                  **options)
  data = jax.tree_util.tree_map(lambda x: jnp.stack([x] * num_seeds), plan.data())
  return runner_fn(jax.random.split(key, num_seeds), data)
