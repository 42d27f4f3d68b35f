"""The paper's Table 1: six tasks x five plans, seeds vmapped, and joint-training lag curves.

  python -m experiments.table1 --config experiments/configs/table1.py --workdir docs/results/table1

For every (task, plan) the step size η is chosen on validation seeds (all η of
the task's grid and all validation seeds in one vmapped call), then the test
seeds run at that η (one vmapped call). Writes

- table1.md: the settings, test metric mean ± std per task and plan over the
  seeds that did not diverge (exclusions counted), and the lag gap and
  half-progress times of joint training;
- table1.csv: the same, one row per (task, plan);
- lag_curves.png: r_α(t), r_β(t) of joint training per task, bands over seeds.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax
from absl import app, flags
from ml_collections import config_flags

import lagjax as lj
from experiments import common
from lagjax import metrics, tasks, transformer
from lagjax.task_train import make_batched_runner

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/table1", "Output folder.")

LOWER_IS_BETTER = {"accuracy": False, "risk": True, "kl_to_bayes": True}
OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}
SETTINGS_FIELDS = ("model", "heads", "query", "positional", "max_len", "optimizer", "steps",
                   "eta_grid")
# Models per task: the general transformer, the direct (α, β) model of THEORY.md section 2
# (from θ0 = 0, the theory's setting; languages only) and the SLR model of section 7.
MODELS = {"transformer": ("occurrence", "or", "and", "even_pairs", "icl_bigram"),
          "direct": ("occurrence", "or", "and"), "slr": ("slr",)}


def quick(config) -> None:
  """The CI smoke version: small width, few steps and seeds."""
  config.width, config.batch_size, config.records, config.test_size = 6, 16, 4, 128
  config.validation_seeds, config.num_seeds = 1, 2
  for name, settings in config.task_settings.items():
    settings.steps = 20
    settings.eta_grid = settings.eta_grid[1:2]
    if name == "icl_bigram":
      settings.k, settings.mean_length, settings.max_len = 4, 8, 16
    elif name == "even_pairs":
      settings.max_len = 16


def _fail(field: str, allowed: str, value) -> None:
  raise app.UsageError(f"config.{field} must be {allowed}; got {value!r}.")


def _is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def validate(config) -> None:
  """Every field the run reads, checked before any compute; errors name the field."""
  for name in config.tasks:
    if name not in tasks.TASKS:
      _fail("tasks", f"a tuple of task names from {sorted(tasks.TASKS)}", config.tasks)
  for name in config.plans:
    if name not in lj.plans.PLANS:
      _fail("plans", f"a tuple of plan names from {sorted(lj.plans.PLANS)}", config.plans)
  for field, minimum in (("width", 2), ("batch_size", 1), ("records", 1), ("test_size", 1),
                         ("validation_seeds", 1), ("num_seeds", 1), ("seed", 0)):
    if not (_is_int(config[field]) and config[field] >= minimum):
      _fail(field, f"an integer >= {minimum}", config[field])
  if not (isinstance(config.init_scale, float | int) and math.isfinite(config.init_scale)
          and config.init_scale > 0):
    _fail("init_scale", "a finite number > 0", config.init_scale)
  for name in config.tasks:
    if name not in config.task_settings:
      _fail("task_settings", f"a block for every task of config.tasks (missing {name!r})",
            sorted(config.task_settings))
    settings = config.task_settings[name]
    field = f"task_settings.{name}"
    for key in SETTINGS_FIELDS:
      if key not in settings:
        _fail(field, f"a block with the fields {SETTINGS_FIELDS}", sorted(settings))
    allowed = tuple(model for model, names in MODELS.items() if name in names)
    if settings.model not in allowed:
      _fail(f"{field}.model", f"one of {allowed} for the task {name!r} (models: "
            f"{tuple(MODELS)})", settings.model)
    if not (_is_int(settings.heads) and settings.heads >= 1):
      _fail(f"{field}.heads", "an integer >= 1", settings.heads)
    if settings.query not in transformer.QUERIES:
      _fail(f"{field}.query", f"one of {transformer.QUERIES}", settings.query)
    if settings.positional not in transformer.POSITIONAL:
      _fail(f"{field}.positional", f"one of {tuple(transformer.POSITIONAL)}", settings.positional)
    if settings.max_len is not None and not (_is_int(settings.max_len) and settings.max_len >= 1):
      _fail(f"{field}.max_len", "None (the task's default) or an integer >= 1", settings.max_len)
    if settings.optimizer not in OPTIMIZERS:
      _fail(f"{field}.optimizer", f"one of {tuple(OPTIMIZERS)}", settings.optimizer)
    if not (_is_int(settings.steps) and settings.steps >= 4):
      _fail(f"{field}.steps", "an integer >= 4 (three_phase needs T/4 >= 1)", settings.steps)
    grid = settings.eta_grid
    if not (isinstance(grid, tuple | list) and grid and all(
        isinstance(eta, float | int) and math.isfinite(eta) and eta > 0 for eta in grid)):
      _fail(f"{field}.eta_grid", "a non-empty tuple of finite step sizes > 0", grid)
    if name == "icl_bigram":
      if not (_is_int(settings.k) and settings.k >= 2):
        _fail(f"{field}.k", "an integer >= 2", settings.k)
      if not (isinstance(settings.mean_length, float | int) and settings.mean_length > 1):
        _fail(f"{field}.mean_length", "a number > 1", settings.mean_length)


def build(name: str, config):
  """(task, init(key), apply(params, fixed, batch)) for a task name and its settings."""
  settings = config.task_settings[name]
  if name == "slr":
    task = tasks.get_task("slr", m=config.width, max_len=settings.max_len)
    return (task, lambda key: (transformer.slr_init(key, config.width, config.init_scale), {}),
            lambda params, fixed, batch: transformer.slr_apply(params, batch.inputs, batch.mask))
  if settings.model == "direct":
    task = tasks.get_task(name, d=config.width, max_len=settings.max_len)
    return (task, lambda key: (lj.init_params(config.width), {}),
            lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask))
  model = dict(heads=settings.heads, query=settings.query, positional=settings.positional)
  if name == "icl_bigram":
    task = tasks.get_task(name, k=settings.k, length=lj.geometric(1.0 / settings.mean_length),
                          max_len=settings.max_len)
    model.update(vocab=settings.k, outputs=settings.k, previous_token=True)
  elif name == "even_pairs":
    task = tasks.get_task(name, max_len=settings.max_len)
    model.update(vocab=2)
  else:
    task = tasks.get_task(name, d=config.width, max_len=settings.max_len)
    model.update(vocab=config.width)
  model = transformer.TransformerConfig(max_len=task.max_len, **model)
  return (task, lambda key: transformer.init(key, model, config.init_scale),
          lambda params, fixed, batch: transformer.apply(params, fixed, model, batch.inputs,
                                                         batch.mask))


def make_plan(name: str, eta: float, steps: int, optimizer: str) -> lj.plans.Plan:
  """The plan `name` with step size eta in every phase (phase lengths in the config doc)."""
  options = {"optimizer": OPTIMIZERS[optimizer]}
  if name == "three_phase":
    return lj.plans.three_phase(eta, eta, eta, steps - 2 * (steps // 4), steps1=steps // 4,
                                steps2=steps // 4, **options)
  if name == "attention_first":
    return lj.plans.custom([lj.plans.Phase("attention", eta, steps // 2, **options),
                            lj.plans.Phase("output", eta, steps - steps // 2, **options)], name)
  return lj.plans.get_plan(name)(eta, steps, **options)


def final_scores(run):
  """Final held-out metric per run and which runs did not diverge."""
  final = np.asarray(run.test_metric[:, -1])
  return final, ~np.asarray(run.diverged) & np.isfinite(final)


def mean_std(values, ok) -> tuple:
  """(mean, std) over the runs in `ok`, ("", "") when none is."""
  values = np.asarray(values)[ok]
  return (float(values.mean()), float(values.std())) if values.size else ("", "")


def run_cell(config, name: str, plan_name: str, built, validation_key, test_key):
  """Chooses η on the validation seeds, then runs the test seeds; returns (η, test run)."""
  task, init, apply = built
  settings = config.task_settings[name]
  grid = [float(eta) for eta in settings.eta_grid]
  plan = make_plan(plan_name, grid[0], settings.steps, settings.optimizer)
  runner = make_batched_runner(
      task, init, apply, plan, batch_size=config.batch_size, test_size=config.test_size,
      record_every=max(1, settings.steps // config.records))
  phases = len(plan.phases)
  seeds = config.validation_seeds
  keys = jnp.tile(jax.random.split(validation_key, seeds), len(grid))
  etas = jnp.repeat(jnp.asarray(grid), seeds)[:, None] * jnp.ones(phases)
  final, ok = final_scores(runner(keys, etas))
  lower = LOWER_IS_BETTER[task.metric_name]
  # Diverged validation seeds count as the worst score, so a diverging η loses.
  scores = np.where(ok, final, np.inf if lower else -np.inf).reshape(len(grid), seeds).mean(1)
  eta = grid[int(np.argmin(scores) if lower else np.argmax(scores))]
  keys = jax.random.split(test_key, config.num_seeds)
  return eta, runner(keys, jnp.full((config.num_seeds, phases), eta))


def main(argv):
  del argv
  common.quiet_jax_logs()
  config = _CONFIG.value
  if config.quick:
    quick(config)
  validate(config)
  validation_key, test_key = jax.random.split(jax.random.key(config.seed))
  rows, joint_runs, lengths = [], {}, {}
  begin = time.time()
  for name in config.tasks:
    built = build(name, config)
    task = built[0]
    lengths[name] = (f"{describe_law(task.length)}, n ≤ {task.max_len} "
                     f"(P(n > {task.max_len}) = {task.truncated_mass:.2g})")
    for plan_name in config.plans:
      start = time.time()
      eta, run = run_cell(config, name, plan_name, built, validation_key, test_key)
      final, ok = final_scores(run)
      # Seeds that diverged are excluded and counted; with none left the cell is empty.
      row = {"task": name, "plan": plan_name, "metric": task.metric_name,
             "optimizer": config.task_settings[name].optimizer, "eta": eta}
      row["mean"], row["std"] = mean_std(final, ok)
      row["loss_mean"], row["loss_std"] = mean_std(run.test_loss[:, -1], ok)
      row.update({"seeds": int(ok.sum()), "diverged": int((~ok).sum()),
                  "lag_gap": "", "half_time_alpha": "", "half_time_beta": ""})
      if plan_name == "joint":
        joint_runs[name] = run
        lag = jax.vmap(metrics.lag_metrics)(run.attention, run.output, run.steps)
        row.update(lag_gap=float(np.mean(lag.lag_gap)),
                   half_time_alpha=float(np.mean(lag.half_time_alpha)),
                   half_time_beta=float(np.mean(lag.half_time_beta)))
      rows.append(row)
      print(f"{name:11s} {plan_name:16s} η = {eta:<6g} {task.metric_name} {summary(row)} "
            f"[{time.time() - start:.1f}s]", flush=True)
  elapsed = time.time() - begin
  workdir = _WORKDIR.value
  common.write_csv(rows, os.path.join(workdir, "table1.csv"))
  with open(os.path.join(workdir, "table1.md"), "w") as f:
    f.write(markdown_report(config, rows, lengths, elapsed))
  if joint_runs:
    plot_lag_curves(joint_runs, os.path.join(workdir, "lag_curves.png"))
  print(f"wrote table1.md, table1.csv and lag_curves.png in {workdir} ({elapsed:.0f} s of runs)")


def describe_law(law) -> str:
  """'Geometric(p=0.0139)': a length law with its parameters to 4 significant digits."""
  fields = ", ".join(f"{field.name}={getattr(law, field.name):.4g}"
                     for field in dataclasses.fields(law))
  return f"{type(law).__name__}({fields})"


def summary(row: dict, column: str = "") -> str:
  """'mean ± std' of the metric (or of `column`_mean/_std), with the diverged seeds if any."""
  mean, std = row[f"{column}_mean" if column else "mean"], row[f"{column}_std" if column else "std"]
  if mean == "":
    return f"all {row['diverged']} seeds diverged"
  return f"{mean:.4g} ± {std:.2g}" + (f" ({row['diverged']} div.)" if row["diverged"] else "")


def pivot(config, rows: list[dict], column: str, label) -> list[str]:
  """Markdown lines of a task x plan table of summary(row, column); label(row) heads a row."""
  plans = list(config.plans)
  lines = ["| task | " + label(None) + " | " + " | ".join(plans) + " |",
           "|---|---|" + "---|" * len(plans)]
  for name in config.tasks:
    cells = {row["plan"]: row for row in rows if row["task"] == name}
    lines.append(f"| {name} | {label(next(iter(cells.values())))} | " + " | ".join(
        summary(cells[p], column) + ("" if column else f" (η={cells[p]['eta']:g})")
        for p in plans) + " |")
  return lines


def markdown_report(config, rows: list[dict], lengths: dict, elapsed: float) -> str:
  """Settings, the task x plan table of test metrics, and joint training's lag.

  lengths maps a task name to a description of its length law and max_len.
  """
  lines = ["# Table 1: six tasks x five plans", "",
           f"Test seeds: {config.num_seeds} (mean ± std over the seeds that did not diverge; "
           f"'k div.' counts exclusions). η chosen per (task, plan) on {config.validation_seeds} "
           f"validation seeds. Batch {config.batch_size}, init scale {config.init_scale}, "
           f"{config.test_size} held-out samples. Run time {elapsed:.0f} s.", ""]
  lines += pivot(config, rows, "", lambda row: "metric" if row is None else
                 f"{row['metric']} {'↓' if LOWER_IS_BETTER[row['metric']] else '↑'}")
  lines += ["", "## Held-out training loss (same runs)", "",
            "Squared loss ½(f − y)² for occurrence/OR/AND/even pairs and SLR, cross-entropy "
            "for the ICL bigram; lower is better.", ""]
  lines += pivot(config, rows, "loss", lambda row: "loss" if row is None else
                 ("cross-entropy" if row["task"] == "icl_bigram" else "squared"))
  lines += ["", "## Task settings", "",
            "| task | optimizer | T | η grid | model | lengths |", "|---|---|---|---|---|---|"]
  for name in config.tasks:
    s = config.task_settings[name]
    if name == "slr":
      model = f"SLR (κ, ν), m = {config.width}"
    elif s.model == "direct":
      model = f"direct (α, β) from 0, d = {config.width}"
    else:
      size = (f"k = {s.k} tokens, current ⊕ previous" if name == "icl_bigram" else
              "d = 2" if name == "even_pairs" else f"d = {config.width}")
      model = f"{size}, {s.heads} head(s), {s.query} query, positions: {s.positional}"
    lines.append(f"| {name} | {s.optimizer} | {s.steps} | {tuple(s.eta_grid)} | {model} | "
                 f"{lengths[name]} |")
  joint = [row for row in rows if row["plan"] == "joint"]
  if joint:
    lines += ["", "## Lag of joint training (THEORY.md section 6, mean over test seeds)", "",
              "| task | lag gap | half-progress step, attention | half-progress step, output |",
              "|---|---|---|---|"]
    lines += [f"| {row['task']} | {row['lag_gap']:.3g} | {row['half_time_alpha']:.4g} | "
              f"{row['half_time_beta']:.4g} |" for row in joint]
  return "\n".join(lines) + "\n"


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
  fig.suptitle("Joint training: attention (r_α) vs output (r_β) progress, bands = seed range")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


if __name__ == "__main__":
  app.run(main)
