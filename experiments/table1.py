"""The paper's Table 1: six tasks x five plans, seeds vmapped, and joint-training lag curves.

  python -m experiments.table1 --config experiments/configs/table1.py --workdir docs/results/table1

Writes table1.md / table1.csv (test metric mean ± std over the seeds that did not
diverge, with the count excluded, the chosen η, and the lag gap and half-progress
times of joint training) and lag_curves.png (r_α, r_β of joint training per task).
"""

from __future__ import annotations

import os
import time

import jax
import matplotlib
import numpy as np
from absl import app, flags
from ml_collections import config_flags

import lagjax as lj
from experiments import common
from lagjax import metrics, tasks, transformer
from lagjax.task_train import train_task

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/table1", "Output folder.")

LOWER_IS_BETTER = {"accuracy": False, "risk": True, "kl_to_bayes": True}


def quick(config):
  """The CI smoke version: small width, few steps and seeds."""
  config.width, config.max_len, config.steps, config.record_every = 6, 16, 20, 5
  config.test_size, config.eta_grid = 128, (1.0,)
  config.validation_seeds, config.num_seeds, config.batch_size = 1, 2, 16


def build(name: str, config):
  """(task, init(key), apply(params, fixed, batch)) for a task name."""
  if name == "slr":
    task = tasks.get_task("slr", m=config.width)
    return (task, lambda key: (transformer.slr_init(key, config.width, config.init_scale), {}),
            lambda params, fixed, batch: transformer.slr_apply(params, batch.inputs, batch.mask))
  if name == "icl_bigram":
    task = tasks.get_task("icl_bigram", k=config.width, max_len=config.max_len)
    model = transformer.TransformerConfig(vocab=config.width, heads=config.heads[name],
                                          outputs=config.width, query="last",
                                          previous_token=True, max_len=config.max_len)
  elif name == "even_pairs":
    task = tasks.get_task(name, max_len=config.max_len)
    model = transformer.TransformerConfig(vocab=2, heads=config.heads[name],
                                          positional="first_last", max_len=config.max_len)
  else:
    task = tasks.get_task(name, d=config.width, max_len=config.max_len)
    model = transformer.TransformerConfig(vocab=config.width, heads=config.heads[name],
                                          max_len=config.max_len)
  return (task, lambda key: transformer.init(key, model, config.init_scale),
          lambda params, fixed, batch: transformer.apply(params, fixed, model, batch.inputs,
                                                         batch.mask))


def make_plan(name: str, eta: float, steps: int) -> lj.plans.Plan:
  if name == "three_phase":
    return lj.plans.three_phase(eta, eta, eta, steps // 2, steps1=steps // 4, steps2=steps // 4)
  if name == "attention_first":
    return lj.plans.custom([lj.plans.Phase("attention", eta, steps // 2),
                            lj.plans.Phase("output", eta, steps - steps // 2)], name)
  return lj.plans.get_plan(name)(eta, steps)


def final_scores(run, lower_is_better):
  """Final metric per seed and which seeds did not diverge."""
  final = np.asarray(run.test_metric[:, -1])
  ok = ~np.asarray(run.diverged) & np.isfinite(final)
  return final, ok, lower_is_better


def choose_eta(config, name, plan_name, built, key):
  """The η of eta_grid with the best mean validation metric (diverged seeds lose)."""
  task, init, apply = built
  lower = LOWER_IS_BETTER[task.metric_name]
  best, best_score = None, None
  for eta in config.eta_grid:
    run = train_task(task, init, apply, make_plan(plan_name, eta, config.steps), key,
                     num_seeds=config.validation_seeds, batch_size=config.batch_size,
                     record_every=config.record_every, test_size=config.test_size)
    final, ok, _ = final_scores(run, lower)
    score = np.where(ok, final, np.inf if lower else -np.inf).mean()
    if best is None or (score < best_score if lower else score > best_score):
      best, best_score = eta, score
  return best


def main(argv):
  del argv
  common.quiet_jax_logs()
  config = _CONFIG.value
  if config.quick:
    quick(config)
  unknown = [t for t in config.tasks if t not in tasks.TASKS]
  if unknown:
    raise app.UsageError(f"config.tasks has unknown tasks {unknown}; known: {sorted(tasks.TASKS)}.")
  for plan_name in config.plans:
    try:
      lj.plans.get_plan(plan_name)
    except ValueError as error:
      raise app.UsageError(str(error)) from error
  if config.num_seeds < 1 or config.validation_seeds < 1 or not config.eta_grid:
    raise app.UsageError("num_seeds and validation_seeds must be >= 1 and eta_grid non-empty.")
  key = jax.random.key(config.seed)
  validation_key, test_key = jax.random.split(key)
  rows, joint_runs = [], {}
  for name in config.tasks:
    built = build(name, config)
    task = built[0]
    for plan_name in config.plans:
      start = time.time()
      eta = choose_eta(config, name, plan_name, built, validation_key)
      run = train_task(task, built[1], built[2], make_plan(plan_name, eta, config.steps),
                       test_key, num_seeds=config.num_seeds, batch_size=config.batch_size,
                       record_every=config.record_every, test_size=config.test_size)
      final, ok, _ = final_scores(run, LOWER_IS_BETTER[task.metric_name])
      # Seeds that diverged are excluded and counted; with none left the cell is empty.
      row = {"task": name, "plan": plan_name, "metric": task.metric_name, "eta": eta,
             "mean": float(final[ok].mean()) if ok.any() else "",
             "std": float(final[ok].std()) if ok.any() else "",
             "seeds": int(ok.sum()), "diverged": int((~ok).sum()),
             "lag_gap": "", "half_time_alpha": "", "half_time_beta": ""}
      if plan_name == "joint":
        joint_runs[name] = run
        lag = jax.vmap(metrics.lag_metrics)(run.attention, run.output, run.steps)
        row.update(lag_gap=float(np.mean(lag.lag_gap)),
                   half_time_alpha=float(np.mean(lag.half_time_alpha)),
                   half_time_beta=float(np.mean(lag.half_time_beta)))
      rows.append(row)
      summary = (f"{row['mean']:.4g} ± {row['std']:.2g}" if ok.any() else "all seeds diverged")
      print(f"{name:11s} {plan_name:16s} η = {eta:<6g} {task.metric_name} {summary} "
            f"({row['diverged']} diverged) [{time.time() - start:.1f}s]", flush=True)
  os.makedirs(_WORKDIR.value, exist_ok=True)
  common.write_table(rows, _WORKDIR.value, "table1")
  plot_lag_curves(joint_runs, os.path.join(_WORKDIR.value, "lag_curves.png"))
  print(f"wrote table1.md, table1.csv and lag_curves.png in {_WORKDIR.value}")


def plot_lag_curves(runs: dict, path: str) -> None:
  """2 x 3 panels: r_α (dashed) and r_β of joint training per task, bands over seeds."""
  fig, axes = plt.subplots(2, 3, figsize=(13, 7), squeeze=False)
  for ax, (name, run) in zip(axes.flat, runs.items()):
    lag = jax.vmap(metrics.lag_metrics)(run.attention, run.output, run.steps)
    steps = np.asarray(run.steps[0])
    for values, label, style in ((lag.r_beta, "r_β (output)", "-"),
                                 (lag.r_alpha, "r_α (attention)", "--")):
      values = np.asarray(values)
      line, = ax.plot(steps, values.mean(0), style, label=label)
      ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
    ax.set(title=name, xlabel="step", ylabel="relative progress", ylim=(0, 1.05))
  for ax in list(axes.flat)[len(runs):]:
    ax.axis("off")
  axes[0][0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


if __name__ == "__main__":
  app.run(main)
