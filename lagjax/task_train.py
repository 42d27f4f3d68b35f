"""Training a model on a sampled task with a plan (docs/theory.md sections 5-7).

The model is any pair init(key) -> (params, fixed), apply(params, fixed, batch) ->
outputs whose parameter dict uses the group names of lagjax.plans (attention:
W_Q, W_K, alpha, alpha_cls; output: everything else). Each step draws a fresh
minibatch from the task (online SGD on the population), the plan's optax
transformation updates the group its phase trains, and records hold the test
metric on a fixed held-out batch and the flattened attention and output
parameters, from which the lag metrics of section 6 follow. Seeds are vmapped.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagjax import metrics, plans, validation
from lagjax.train import guard_divergence

MAX_LOSS = 1e8


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


def _flatten(params, attention: bool):
  leaves = [jnp.ravel(params[k]) for k in sorted(params)
            if (k in plans.ATTENTION_KEYS) == attention]
  return jnp.concatenate(leaves) if leaves else jnp.zeros(0)


def make_task_runner(task, init: Callable, apply: Callable, plan: plans.Plan, *,
                     batch_size: int = 64, record_every: int = 10, test_size: int = 2048,
                     max_loss: float = MAX_LOSS):
  """Builds run(key, etas) -> TaskRun for one plan structure (jit and vmap it)."""
  if not isinstance(plan, plans.Plan):
    raise ValueError(f"plan must be a lj.plans.Plan; got {type(plan).__name__}.")
  for name, value in (("batch_size", batch_size), ("record_every", record_every),
                      ("test_size", test_size)):
    validation.check_int(name, value, 1, integral_floats=True)
  total_steps = plan.total_steps
  num_records = -(-total_steps // record_every) + 1

  def run(key, etas):
    init_key, test_key, train_key = jax.random.split(key, 3)
    params, fixed = init(init_key)
    test_batch = task.sample(test_key, test_size)
    tx = plan.transformation(etas)

    def loss_fn(p, batch):
      return task.loss(apply(p, fixed, batch), batch)

    def step(carry, t):
      params, state, diverged, diverged_step = carry

      def do_step(_):
        batch = task.sample(jax.random.fold_in(train_key, t), batch_size)
        value, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, new_state = tx.update(grads, state, params)
        new_params = optax.apply_updates(params, updates)
        return guard_divergence(value, max_loss, (new_params, new_state), (params, state), t)

      active = (t < total_steps) & ~diverged
      return jax.lax.cond(active, do_step, lambda _: carry, None), None

    def block(carry, k):
      params = carry[0]
      outputs = apply(params, fixed, test_batch)
      recorded = {"steps": jnp.minimum(k * record_every, total_steps),
                  "test_loss": task.loss(outputs, test_batch),
                  "test_metric": task.metric(outputs, test_batch)[task.metric_name],
                  "attention": _flatten(params, True), "output": _flatten(params, False)}
      carry, _ = jax.lax.scan(step, carry, k * record_every + jnp.arange(record_every))
      return carry, recorded

    init_carry = (params, tx.init(params), jnp.array(False), jnp.array(-1))
    (_, _, diverged, diverged_step), records = jax.lax.scan(block, init_carry,
                                                            jnp.arange(num_records))
    return TaskRun(records["steps"], records["test_loss"], records["test_metric"],
                   records["attention"], records["output"], diverged, diverged_step,
                   task.metric_name)

  return run


def make_batched_runner(task, init: Callable, apply: Callable, plan: plans.Plan, **options):
  """jit(vmap(run)) over keys (R,) and step sizes etas (R, #phases).

  One compilation per R serves every step size of `plan`'s structure, so a
  validation sweep over η x seeds is a single call.
  """
  return jax.jit(jax.vmap(make_task_runner(task, init, apply, plan, **options)))


def train_task(task, init: Callable, apply: Callable, plan: plans.Plan, key, *,
               num_seeds: int = 1, **options) -> TaskRun:
  """Runs `plan` on `task` for num_seeds seeds (vmapped); every array gets a seed axis."""
  validation.check_int("num_seeds", num_seeds, 1, integral_floats=True)
  runner = make_batched_runner(task, init, apply, plan, **options)
  etas = jnp.tile(jnp.asarray(np.nan_to_num(plan.etas)), (num_seeds, 1))
  return runner(jax.random.split(key, num_seeds), etas)
