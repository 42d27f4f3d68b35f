"""The paper's Table 1: six tasks x five plans, seeds vmapped, and joint-training lag curves.

  python -m experiments.table1 --config experiments/configs/table1.py --workdir docs/results/table1

Several processes or hosts: the same command with --coordinator=HOST0:PORT
--num_processes=P --process_id=p (experiments/distributed.py) and a workdir every host
sees; the chunks of runs split over the processes, and the table equals a
one-process run's.

For every task (and, for transformer tasks, each attention parameterisation:
KQV products from a small init, or direct score/value maps from zero) every plan
runs through one compiled runner: plans are data. Each row's step sizes are
chosen on validation seeds (one η, or (η_out, η_attn) for the three-phase and
attention-first plans), then the test seeds run at the chosen step sizes. The
XLA compilation cache persists across runs (experiments.common.start). Writes

- table1.md: the settings, test metric mean ± std per task and plan over the
  seeds that did not diverge (exclusions counted), and the lag gap and
  half-progress times of joint training;
- table1.csv: the same, one row per (task, plan);
- lag_curves.png: r_α(t), r_β(t) of joint training per task, bands over seeds;
- selection.csv: every candidate the selection evaluated, with its validation loss and
  metric (means and standard errors over the validation seeds; the exact rows' final risk
  and 0-1 error) and the rows that chose it: what the rule of
  experiments/table1_selection.py saw.

Your own language gets exact rows too, with no package edit: --config.language=path.json (an
automaton file), module:function (a factory) or a registered family, alone with
--config.tasks='()' (experiments/configs/table1.py, "Your own language").
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time

import jax
import numpy as np
from absl import flags
from ml_collections import config_flags

from experiments import cli, common, distributed, table1_exact, table1_protocol
from lagjax import metrics, tasks

# Jitted once: op by op, each lag metric's operations would compile one by one (~50 of them).
LAG = jax.jit(metrics.lag_metrics)
LAG_PER_SEED = jax.jit(jax.vmap(metrics.lag_metrics))

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/table1", "Output folder.")


def main(argv):
  del argv
  config = _CONFIG.value
  table1_protocol.validate(config)  # before start(): it sets the XLA level that validate checks
  experiment = common.start(config, _WORKDIR.value,
                            xla_optimization=config.xla_backend_optimization_level,
                            validate=table1_protocol.validate_language)
  distributed.initialize()
  shared = distributed.SharedChunks(os.path.join(_WORKDIR.value, "shared_chunks"))
  writer = jax.process_index() == 0  # every process computes every choice; one writes
  validation_key, test_key = jax.random.split(jax.random.key(config.seed))
  rows, joint_lags, lengths, scores = [], {}, {}, []
  blocks = [(name, attention) for name in config.tasks
            for attention in (*table1_protocol.attention_variants(config, name),
                              *(("exact",) if config.task_settings[name].exact else ()))]
  if config.language:  # the user's language: exact rows only
    blocks.append((table1_protocol.language_task(config), "exact"))
  begin = time.time()

  def compute(block):
    """(rows, joint lag, candidates' scores, length description or None, seconds) of one
    (task, attention)."""
    name, attention = block
    start = time.time()
    progress = common.progress_reporter(f"runs of {name} ({attention})")
    if attention == "exact":
      return (*exact_rows(config, name, progress, shared), None, time.time() - start)
    built = table1_protocol.build(name, config, attention)
    task = built[0]
    length = (f"{describe_law(task.length)}, n ≤ {task.max_len} "
              f"(P(n > {task.max_len}) = {task.truncated_mass:.2g})")
    return (*sampled_rows(config, name, attention, built, validation_key, test_key, progress,
                          shared), length, time.time() - start)

  # Blocks are independent: with one process, `block_threads` of them run at once (XLA
  # releases the GIL while it compiles and runs). Several processes keep one order, so that
  # their shared chunks match.
  threads = config.block_threads if jax.process_count() == 1 else 1
  with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    for done, (block, future) in enumerate(zip(blocks, [pool.submit(compute, block)
                                                        for block in blocks]), 1):
      (name, attention), (block_rows, lag, block_scores, length, seconds) = (block,
                                                                            future.result())
      rows += block_rows
      scores += block_scores
      if length is not None:
        lengths[name] = length
      if lag is not None:
        joint_lags[f"{name} ({attention})"] = lag
      line = ", ".join(f"{r['plan']} {summary(r)}" for r in block_rows)
      print(f"[{done}/{len(blocks)}, {time.time() - begin:.0f} s] {name} ({attention}) "
            f"{block_rows[0]['metric']}: {line} [{seconds:.1f}s]", flush=True)
      # The tables so far after every block, so a long run that stops keeps what it did.
      if writer:
        write_tables(config, rows, lengths, time.time() - begin, _WORKDIR.value)
        common.write_csv(scores, os.path.join(_WORKDIR.value, "selection.csv"))
  shared.close()
  if not writer:
    return
  if joint_lags:
    plot_lag_curves(joint_lags, os.path.join(_WORKDIR.value, "lag_curves.png"))
  experiment.write_metadata(seconds=time.time() - begin, length_laws=lengths,
                            process_count=jax.process_count(), block_threads=threads)
  print(f"wrote table1.md, table1.csv, selection.csv, lag_curves.png and metadata.json in "
        f"{_WORKDIR.value} "
        f"({time.time() - begin:.0f} s of runs)")


def selection_scores(name: str, attention: str, chosen) -> list[dict]:
  """One row per candidate that a block's selection (table1_selection.Selection) evaluated:
  its plan, step sizes, validation scores (lower is better; accuracies negated) and the
  table rows that chose it."""
  by_candidate = {}
  for row, candidate in chosen.chosen.items():
    by_candidate.setdefault(candidate, []).append(row)
  return [{"task": name, "attention": attention, "plan": candidate.plan_name,
           "eta_out": candidate.eta_out,
           "eta_attn": "" if candidate.eta_attn is None else candidate.eta_attn,
           "loss": score.loss, "loss_se": score.loss_se, "metric": score.metric,
           "metric_se": score.metric_se, "chosen_for": " ".join(by_candidate.get(candidate, ()))}
          for candidate, score in chosen.scores.items()]


def sampled_rows(config, name, attention, built, validation_key, test_key, progress, shared):
  """Table rows of one (task, attention) block from validation and test seeds, joint
  training's (record steps, lag metrics per seed), and the candidates' scores."""
  task = built[0]
  chosen, runs = table1_protocol.run_task(config, name, built, validation_key, test_key,
                                   progress=progress, shared=shared)
  rows, lag = [], None
  for plan_row, run in runs.items():
    final, ok = table1_protocol.final_scores(run)
    # Seeds that diverged are excluded and counted; with none left the cell is empty.
    row = {"task": name, "attention": attention, "plan": plan_row, "metric": task.metric_name,
           "optimizer": config.task_settings[name].optimizer,
           "step_sizes": chosen.chosen[plan_row].describe(), "grid": chosen.note(plan_row),
           "error_route": ""}
    row["mean"], row["std"] = table1_protocol.mean_std(final, ok)
    row["loss_mean"], row["loss_std"] = table1_protocol.mean_std(run.risk[:, -1], ok)
    row.update({"seeds": int(ok.sum()), "diverged": int((~ok).sum()),
                "lag_gap": "", "half_time_alpha": "", "half_time_beta": ""})
    if plan_row == "joint":
      metrics_per_seed = LAG_PER_SEED(run.alpha, run.beta, run.steps)
      lag = (np.asarray(run.steps[0]), metrics_per_seed)
      row.update(lag_gap=float(np.mean(metrics_per_seed.lag_gap)),
                 half_time_alpha=float(np.mean(metrics_per_seed.half_time_alpha)),
                 half_time_beta=float(np.mean(metrics_per_seed.half_time_beta)))
    rows.append(row)
  return rows, lag, selection_scores(name, attention, chosen)


def exact_rows(config, name, progress, shared):
  """Table rows of task `name` by exact population GD (experiments.table1_exact): accuracy
  1 - (0-1 error), loss = the exact risk, no seeds; joint training's lag; the candidates'
  scores."""
  chosen, runs = table1_exact.run_exact(config, name, progress, shared)
  rows, lag = [], None
  for plan_row, run in runs.items():
    diverged = bool(run.diverged)
    row = {"task": name, "attention": "exact", "plan": plan_row, "metric": "accuracy",
           "optimizer": table1_protocol.settings_of(config, name).optimizer,
           "step_sizes": chosen.chosen[plan_row].describe(), "grid": chosen.note(plan_row),
           "mean": "" if diverged else 1.0 - float(run.error[-1]), "std": 0.0,
           "loss_mean": "" if diverged else float(run.risk[-1]), "loss_std": 0.0,
           "seeds": 0, "diverged": int(diverged), "error_route": run.error_route,
           "lag_gap": "", "half_time_alpha": "", "half_time_beta": ""}
    if plan_row == "joint":
      lag_metrics = LAG(run.alpha, run.beta, run.steps)
      lag = (np.asarray(run.steps), jax.tree_util.tree_map(lambda x: np.asarray(x)[None],
                                                            lag_metrics))
      row.update(lag_gap=float(lag_metrics.lag_gap),
                 half_time_alpha=float(lag_metrics.half_time_alpha),
                 half_time_beta=float(lag_metrics.half_time_beta))
    rows.append(row)
  return rows, lag, selection_scores(name, "exact", chosen)


def write_tables(config, rows: list[dict], lengths: dict, elapsed: float, workdir: str) -> None:
  common.write_csv(rows, os.path.join(workdir, "table1.csv"))
  with open(os.path.join(workdir, "table1.md"), "w") as f:
    f.write(markdown_report(config, rows, lengths, elapsed))


def describe_law(law) -> str:
  """'Geometric(p=0.0139)': a length law with its parameters to 4 significant digits."""
  fields = ", ".join(f"{field.name}={getattr(law, field.name):.4g}"
                     for field in dataclasses.fields(law))
  return f"{type(law).__name__}({fields})"


def summary(row: dict, column: str = "") -> str:
  """'mean ± std' of the metric (or of `column`_mean/_std), with the diverged seeds if any."""
  mean, std = row[f"{column}_mean" if column else "mean"], row[f"{column}_std" if column else "std"]
  if row["attention"] == "exact":
    return "diverged" if mean == "" else f"{mean:.4g}"
  if mean == "":
    return f"all {row['diverged']} seeds diverged"
  return f"{mean:.4g} ± {std:.2g}" + (f" ({row['diverged']} div.)" if row["diverged"] else "")


def pivot(config, rows: list[dict], column: str, label) -> list[str]:
  """Markdown lines of a (task, attention) x plan-row table of summary(row, column);
  label(row) heads a line."""
  plan_rows = table1_protocol.table_rows(config)
  lines = ["| task | attention | " + label(None) + " | " + " | ".join(plan_rows) + " |",
           "|---|---|---|" + "---|" * len(plan_rows)]
  blocks = dict.fromkeys((row["task"], row["attention"]) for row in rows)
  for name, attention in blocks:
    cells = {row["plan"]: row for row in rows
             if row["task"] == name and row["attention"] == attention}
    lines.append(f"| {name} | {attention} | {label(next(iter(cells.values())))} | " + " | ".join(
        (summary(cells[p], column) + ("" if column else f" ({cells[p]['step_sizes']})"
                                      + grid_mark(cells[p]["grid"])))
        if p in cells else "—" for p in plan_rows) + " |")
  return lines


def grid_mark(note: str) -> str:
  """' ‡' when the grid hit its cap, ' †' when it was extended, '' otherwise."""
  return " ‡" if "cap" in note else " †" if note else ""


def markdown_report(config, rows: list[dict], lengths: dict, elapsed: float) -> str:
  """Settings, the task x plan table of test metrics, and joint training's lag.

  lengths maps a task name to a description of its length law and max_len.
  """
  lines = ["# Table 1: six tasks x five plans", "",
           f"Test seeds: {config.num_seeds} (mean ± std over the seeds that did not diverge; "
           f"'k div.' counts exclusions). Step sizes chosen per (task, attention, plan row) on "
           f"{config.validation_seeds} validation seeds by the final held-out loss, the metric "
           f"breaking ties, each within one standard error of the best over the seeds (or "
           f"1e-6 relative), then the smallest step sizes (a rule roundoff cannot flip): η "
           f"from the task's grid; the '{table1_protocol.PER_PHASE[1:]}' rows "
           f"choose "
           f"(η_out, η_attn = m·η_out) with m in {tuple(config.attention_multipliers)} (η_out "
           f"for output phases, η_attn for the attention phase), the plain rows keep m = 1. "
           f"A choice at the edge of its grid extends the grid by its ratio at that edge until "
           f"it is interior (†) or the next point leaves the task's cap (‡; see 'Grids' below). "
           f"Attention 'kqv': W_Q, W_K, W_V, W_O, readout from a small init; 'direct': per-head "
           f"score and value maps from zero (the theory's (α, β) parameterisation); 'exact': "
           f"the direct (α, β) model with its CLS token from θ0 = 0 trained by exact "
           f"population GD (Laplace route; transfer route for even pairs) with the same plans, "
           f"T and grids, step sizes chosen "
           f"on the final exact risk, accuracy = 1 - exact 0-1 error, no seeds. Phase lengths "
           f"(fractions of T before the last phase): {dict(config.phase_fractions)}. Batch "
           f"{config.batch_size}, init scale {config.init_scale}, {config.test_size} held-out "
           f"samples. Run time {elapsed:.0f} s.", ""]
  lower_is_better = table1_protocol.LOWER_IS_BETTER
  lines += pivot(config, rows, "", lambda row: "metric" if row is None else
                 f"{row['metric']} {'↓' if lower_is_better[row['metric']] else '↑'}")
  lines += ["", "## Held-out training loss (same runs; the selection's criterion)", "",
            "Squared loss ½(f − y)² for occurrence/OR/AND/even pairs and SLR, cross-entropy "
            "for the ICL bigram, the exact population risk on 'exact' lines; lower is "
            "better.", ""]
  lines += pivot(config, rows, "loss", lambda row: "loss" if row is None else
                 ("cross-entropy" if row["task"] == "icl_bigram" else "squared"))
  lines += ["", "## Task settings", "",
            "| task | optimizer | T | η grid | model | lengths |", "|---|---|---|---|---|---|"]
  for name in lengths:  # the tasks run so far
    s = config.task_settings[name]
    if s.model == "slr":
      model = f"SLR (κ, ν), m = {config.width}"
    elif s.model == "direct":
      model = f"direct (α, β) from 0, d = {config.width}"
    else:
      size = (f"k = {s.k} tokens, current ⊕ previous" if tasks.spec(name).previous_token else
              f"d = {config.width}" if "d" in tasks.options(name) else "d = 2")
      model = f"{size}, {s.heads} head(s), {s.query} query, positions: {s.positional}"
    lines.append(f"| {name} | {s.optimizer} | {s.steps} | {tuple(s.eta_grid)} | {model} | "
                 f"{lengths[name]} |")
  user = table1_protocol.language_task(config)
  if user and any(row["task"] == user for row in rows):  # config.language's exact rows
    s = table1_protocol.settings_of(config, user)
    lang = table1_exact.language_and_theta0(user, config)[0]
    lines.append(f"| {user} | {s.optimizer} | {s.steps} | {tuple(s.eta_grid)} | direct (α, β) "
                 f"with CLS from 0, d = {lang.d}, {s.query} query, positions: {s.positional} | "
                 f"{describe_law(lang.length)}, exact (no truncation) |")
  notes = [row for row in rows
           if row["grid"] and not row["plan"].endswith(table1_protocol.PER_PHASE)]
  if notes:
    lines += ["", "## Grids", "", "Plans whose chosen η was at an edge of the first grid "
              "(the plain and per-phase rows of a plan share its grid).", "",
              "| task | attention | plan | grid |", "|---|---|---|---|"]
    lines += [f"| {row['task']} | {row['attention']} | {row['plan']} | {row['grid']} |"
              for row in notes]
  exact_routes = {row["task"]: row["error_route"] for row in rows if row["attention"] == "exact"}
  if exact_routes:
    lines += ["", "Models of the exact lines: " + "; ".join(
        f"{name}: {table1_exact.describe_model(name, config)}" for name in exact_routes) + "."]
  caveats = {"automaton": "exact but for the length tail its DP leaves out, at most 1e-12 of "
                          "the error, so an accuracy below 1e-12 is 0",
             "sampled": "a fixed sample, not exact"}
  used = [route for route in caveats if route in exact_routes.values()]
  if used:
    lines += ["", "0-1 error routes of the exact lines: " + ", ".join(
        f"{name}: {route}" for name, route in exact_routes.items()) + " (" + "; ".join(
        f"'{route}': {caveats[route]}" for route in used) + ")."]
  joint = [row for row in rows if row["plan"] == "joint"]
  if joint:
    lines += ["", "## Lag of joint training (docs/theory.md section 6, mean over test seeds)", "",
              "| task | attention | lag gap | half-progress step, attention | "
              "half-progress step, output |", "|---|---|---|---|---|"]
    lines += [f"| {row['task']} | {row['attention']} | {row['lag_gap']:.3g} | "
              f"{row['half_time_alpha']:.4g} | {row['half_time_beta']:.4g} |" for row in joint]
  return "\n".join(lines) + "\n"


def plot_lag_curves(lags: dict, path: str) -> None:
  """Panels, three a line: r_α (dashed) and r_β of joint training per task (and attention),
  bands over seeds.

  lags maps a panel title to (record steps, LagMetrics with a leading seed axis).
  """
  plt = common.pyplot()
  columns = 3
  fig, axes = plt.subplots(-(-len(lags) // columns), columns, figsize=(13, 3.5 * -(
      -len(lags) // columns)), squeeze=False)
  for ax, (name, (steps, lag)) in zip(axes.flat, lags.items()):
    for values, label, style in ((lag.r_beta, "r_β (output)", "-"),
                                 (lag.r_alpha, "r_α (attention)", "--")):
      values = np.asarray(values)
      line, = ax.plot(steps, values.mean(0), style, label=label)
      ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
    ax.set(title=name, xlabel="step", ylabel="relative progress", ylim=(0, 1.05))
  for ax in list(axes.flat)[len(lags):]:
    ax.axis("off")
  axes[0][0].legend(fontsize=8)
  fig.suptitle("Joint training: attention (r_α) vs output (r_β) progress, bands = seed range")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


if __name__ == "__main__":
  cli.run(main)
