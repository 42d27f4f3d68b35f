"""Timing of multi-seed task training (docs/theory.md section 7; issue: seeds vmapped vs a loop).

For three tasks of the Table 1 config (occurrence at d = 50, even pairs, ICL
bigram at k = 10), joint SGD with η from the config's grid, T = 500 steps,
batch 32, records every 50 steps, 8 seeds, times after compilation:
  1. lagjax: the 8 seeds vmapped in one compiled call (lagjax.dynamics.task_train);
  2. baseline "loop of runs": a Python loop over the 8 seeds, each one call of the
     same compiled single-seed runner (the whole T-step scan compiled once);
  3. baseline "loop of steps": a Python loop over seeds and steps of one jitted
     training step (sample a batch, gradient, optax update), as one writes it
     without lagjax, with the same records.
The ratios are baseline / lagjax. The issue's target is ≥ 3× over a Python loop
over seeds for 8 seeds.

Count form (issue 19), occurrence at d = 50 in the same run: the padded token form
(strings of max_len = 336 tokens) against the count form (50 counts per string) of the
same batches, for the KQV transformer and the direct (α, β) model:
  1. per training step on the same batches: a scan of T gradient + SGD steps over T
     batches sampled beforehand (the model's work alone); target ≥ 4×;
  2. end to end in the Table 1 runner (8 seeds vmapped, sampling and records included):
     the sampler draws the same padded strings in both forms, so it bounds this ratio.

Usage (from the repo root):
  python -m benchmarks.table1_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from experiments import table1_protocol as protocol  # noqa: E402
from experiments.configs import table1 as table1_config  # noqa: E402
from lagjax.dynamics.task_train import make_batched_runner, make_task_runner  # noqa: E402

SEEDS, BATCH, RECORDS = 8, 32, 10
TASKS = ("occurrence", "even_pairs", "icl_bigram")
TARGET_SPEEDUP = 3.0


def step_loop(task, init, apply, eta: float, steps: int, record_every: int):
  """The baseline without lagjax: one jitted SGD step driven by a Python loop."""
  tx = optax.sgd(eta)

  @jax.jit
  def start(key):
    init_key, test_key, train_key = jax.random.split(key, 3)
    params, fixed = init(init_key)
    return params, fixed, tx.init(params), task.sample(test_key, 512), train_key

  @jax.jit
  def step(params, fixed, state, train_key, t):
    batch = task.sample(jax.random.fold_in(train_key, t), BATCH)
    grads = jax.grad(lambda p: task.loss(apply(p, fixed, batch), batch))(params)
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  @jax.jit
  def record(params, fixed, test_batch):
    return task.metric(apply(params, fixed, test_batch), test_batch)[task.metric_name]

  def run(keys):
    finals = []
    for key in keys:
      params, fixed, state, test_batch, train_key = start(key)
      for t in range(steps):
        if t % record_every == 0:
          record(params, fixed, test_batch)
        params, state = step(params, fixed, state, train_key, t)
      finals.append(record(params, fixed, test_batch))
    return jnp.stack(finals)

  return run


COUNT_TARGET = 4.0


def count_form_rows(quick: bool, repeats: int) -> list[dict]:
  """Token form vs count form on occurrence at d = 50 (module docstring), per model."""
  steps = 100 if quick else 300
  rows = []
  for model_name in ("transformer", "direct"):
    config = table1_config.get_config().unlock()
    config.task_settings.occurrence.model = model_name
    forms = {}
    for count_form in (False, True):
      config.count_form = count_form
      task, model = protocol.build("occurrence", config)
      batches = jax.vmap(lambda k, task=task: task.sample(k, BATCH))(
          jax.random.split(jax.random.key(1), steps))
      params, fixed = model.init(jax.random.key(2))

      @jax.jit
      def train(params, batches, task=task, model=model, fixed=fixed):
        def step(params, batch):
          grads = jax.grad(lambda p: task.loss(model.apply(p, fixed, batch), batch))(params)
          return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), None
        return jax.lax.scan(step, params, batches)[0]

      plan = lj.plans.joint(1.0, steps)
      runner = make_batched_runner(task, model, plan.slots(), num_steps=steps,
                                   batch_size=BATCH, record_every=steps // RECORDS,
                                   test_size=512)
      data = jax.tree_util.tree_map(lambda x: jnp.stack([x] * SEEDS), plan.data())
      keys = jax.random.split(jax.random.key(0), SEEDS)
      forms[count_form] = dict(step=(train, (params, batches)), runner=(runner, (keys, data)),
                               final=lambda runner=runner, keys=keys, data=data: np.asarray(
                                   runner(keys, data).risk[:, -1]))
    times = np.median(harness.interleaved_times(
        [forms[False]["step"], forms[True]["step"], forms[False]["runner"],
         forms[True]["runner"]], repeats), axis=0)
    rows.append({"model": model_name, "steps": steps,
                 "token_step_s": float(times[0]) / steps, "count_step_s": float(times[1]) / steps,
                 "token_runner_s": float(times[2]), "count_runner_s": float(times[3]),
                 "max_abs_diff_final_loss": float(np.max(np.abs(
                     forms[False]["final"]() - forms[True]["final"]())))})
  return rows


def run(quick: bool) -> dict:
  steps = 100 if quick else 500
  repeats = 1 if quick else 3
  config = table1_config.get_config().unlock()
  record_every = steps // RECORDS
  keys = jax.random.split(jax.random.key(0), SEEDS)
  rows, checks = [], {}
  for name in TASKS:
    task, model = protocol.build(name, config)
    settings = config.task_settings[name]
    eta = float(settings.eta_grid[1 if len(settings.eta_grid) > 1 else 0])
    plan = lj.plans.joint(eta, steps)
    options = dict(batch_size=BATCH, record_every=record_every, test_size=512)
    data = jax.tree_util.tree_map(lambda x: jnp.stack([x] * SEEDS), plan.data())
    vmapped = make_batched_runner(task, model, plan.slots(), num_steps=steps, **options)
    single = jax.jit(make_task_runner(task, model, plan.slots(), num_steps=steps, **options))

    row = plan.data()

    def run_loop(keys, single=single, row=row):
      return [single(key, row) for key in keys]

    stepped = step_loop(task, model.init, model.apply, eta, steps, record_every) if (
        settings.optimizer == "sgd") else None
    calls = [(vmapped, (keys, data)), (run_loop, (keys,))]
    if stepped is not None:
      calls.append((stepped, (keys,)))
    times = np.median(harness.interleaved_times(calls, repeats), axis=0)
    together = np.asarray(vmapped(keys, data).test_metric[:, -1])
    alone = np.array([float(r.test_metric[-1]) for r in run_loop(keys)])
    checks[name] = float(np.max(np.abs(together - alone)))
    rows.append({"task": name, "optimizer": settings.optimizer, "eta": eta,
                 "vmapped_s": float(times[0]), "loop_of_runs_s": float(times[1]),
                 "loop_of_steps_s": float(times[2]) if stepped is not None else None})
  return {"machine": harness.machine(), "steps": steps, "seeds": SEEDS, "repeats": repeats,
          "rows": rows, "max_abs_diff_vmapped_vs_loop": checks,
          "count_form": count_form_rows(quick, repeats)}


def table(results: dict) -> str:
  fmt = harness.format_seconds
  lines = harness.markdown_table(
      ("task", "8 seeds vmapped", "loop of runs", "ratio", "loop of steps", "ratio",
       f"target ≥ {TARGET_SPEEDUP:g}× (loop of runs)"),
      [(row["task"], fmt(row["vmapped_s"]), fmt(row["loop_of_runs_s"]),
        f"{row['loop_of_runs_s'] / row['vmapped_s']:.2f}×",
        "—" if row["loop_of_steps_s"] is None else fmt(row["loop_of_steps_s"]),
        "—" if row["loop_of_steps_s"] is None else
        f"{row['loop_of_steps_s'] / row['vmapped_s']:.2f}×",
        harness.status(row["loop_of_runs_s"] / row["vmapped_s"] >= TARGET_SPEEDUP))
       for row in results["rows"]])
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"joint plan, T = {results['steps']}, batch {BATCH}, {results['seeds']} seeds, median of "
      f"{results['repeats']} after compilation; float64",
      "", *lines, "",
      "loop of steps: Python loop over seeds and steps of one jitted SGD step (SGD tasks only).",
      "check, final held-out metric, |vmapped − loop of runs| per task: "
      + ", ".join(f"{k} {v:.1e}" for k, v in results["max_abs_diff_vmapped_vs_loop"].items()),
      "", "Count form vs padded token form, occurrence d = 50 (same batches, same run):", "",
      *harness.markdown_table(
          ("model", "token step", "count step", "ratio", f"target ≥ {COUNT_TARGET:g}×",
           "runner, token (8 seeds)", "runner, count", "ratio", "|Δ final loss|"),
          [(row["model"], fmt(row["token_step_s"]), fmt(row["count_step_s"]),
            f"{row['token_step_s'] / row['count_step_s']:.2f}×",
            harness.status(row["token_step_s"] / row["count_step_s"] >= COUNT_TARGET),
            fmt(row["token_runner_s"]), fmt(row["count_runner_s"]),
            f"{row['token_runner_s'] / row['count_runner_s']:.2f}×",
            f"{row['max_abs_diff_final_loss']:.1e}")
           for row in results["count_form"]]),
  ])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "T = 100, 1 repeat", argv)


if __name__ == "__main__":
  main()
