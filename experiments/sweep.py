"""Batch sweeps of training plans: which step-size regimes learn, which fail.

  python -m experiments.sweep --config experiments/configs/sweep.py --workdir runs/pd

Writes to --workdir: results.csv (one row per configuration), metadata.json,
phase_diagram.png, risk_vs_step.png, trajectories.npz (config.save_trajectories)
and prints a regime report. Interrupted sweeps resume from workdir/chunks.

Several hosts: start the same command on every host with
  --coordinator=HOST0:PORT --num_processes=P --process_id=p
(jax.distributed, experiments/distributed.py); workdir must be a folder every host
sees. Each process takes every P-th chunk; process 0 waits for all chunks and writes
the outputs.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import time

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

import lagjax as lj
from experiments import cli, common, distributed, grids, plotting, regimes_overlay
from lagjax import sweep
from lagjax.sweep import chunk_store

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/sweep", "Output folder (resumable).")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a workdir holding another config.")
_QUIET = flags.DEFINE_bool("quiet", False, "No progress bar: log progress lines instead.")



# config.dynamics -> the engine of lj.dynamics.engines: GD by the closed form where it applies
# (else the steps), or the plans' gradient flow.
DYNAMICS = {"gd": "auto", "flow": "flow"}


def grid_values(config, name: str) -> np.ndarray:
  """The step sizes of grid config.<name>, validated."""
  values = grids.values(config[name], f"config.{name}")
  if values.size == 0:
    raise ValueError(f"config.{name} is empty; give points=(...) or num >= 1.")
  if not np.all(np.isfinite(values)) or np.any(values < 0):
    raise ValueError(f"config.{name} step sizes must be finite and >= 0; got {values.min()}.")
  return values


def validate(config) -> dict:
  """Checks every field before any compute; returns the step-size grids."""
  unknown = [p for p in config.plans if p not in lj.plans.PLANS]
  if unknown or not config.plans:
    raise ValueError(f"config.plans has unknown or no plans {unknown}; known plans: "
                     f"{sorted(lj.plans.PLANS)}.")
  exact = ("auto", *lj.risk.names("risk", exact=True))
  lj.validation.check_choice("config.route (exact routes only in sweeps)", config.route, exact)
  if not config.d_list or any(int(d) != d or d < 2 for d in config.d_list):
    raise ValueError(f"config.d_list must be non-empty integers >= 2; got {config.d_list}.")
  if not config.steps_list or any(int(t) != t or t < 1 for t in config.steps_list):
    raise ValueError(f"config.steps_list (T) must be non-empty integers >= 1; got "
                     f"{config.steps_list}.")
  if not config.n_samples_list or any(n < 0 for n in config.n_samples_list):
    raise ValueError(f"config.n_samples_list must be integers >= 0 (0 = population); got "
                     f"{config.n_samples_list}.")
  if not 0 < config.success_risk < 0.5:
    # Every run starts at f = 0, where R = ½ for labels ±1: an ε >= ½ is met before training.
    raise ValueError(f"config.success_risk (ε) must lie in (0, 0.5), below the starting risk "
                     f"R(θ0 = 0) = ½; got {config.success_risk}.")
  for name in ("num_seeds", "num_records", "chunk_size", "batch_size"):
    if config[name] < 1:
      raise ValueError(f"config.{name} must be >= 1; got {config[name]}.")
  if not config.max_risk > 0:
    raise ValueError(f"config.max_risk must be > 0; got {config.max_risk}.")
  lj.validation.check_choice("config.dynamics", config.dynamics, DYNAMICS)
  for d in config.d_list:
    lj.risk.resolve_route(config_language(config, d), config.loss, config.route)
  used = {name for plan in config.plans for name in lj.plans.PLANS[plan].eta_names}
  return {name: grid_values(config, name) for name in sorted(used)}


def config_table(config) -> dict[str, np.ndarray]:
  """The sweep table of a config, validated first: every plan's own step-size grids (NaN in
  the step-size columns a plan does not use), d, T, N and seeds."""
  grids = validate(config)
  grids.update({name: [np.nan] for name in sweep.ETA_NAMES if name not in grids})
  return sweep.build_table(config.plans, config.d_list, config.steps_list, grids,
                           n_samples_list=config.n_samples_list, seeds=range(config.num_seeds))


def config_language(config, d: int) -> lj.Language:
  """The config's language at alphabet size d: any registered name, with integer arguments
  after a colon ('tomita:3'); config.letters go to the families that take them."""
  length = common.config_length(config)
  try:
    return lj.languages.from_spec(config.language, d, letters=tuple(config.letters),
                                  length=length)
  except ValueError as error:
    raise ValueError(f"config.language / config.d_list / config.length: {error}") from None


def prepare_workdir(workdir: str, config_json: str, overwrite: bool) -> None:
  """Refuses a workdir that holds another config (unless overwrite); records this one."""
  path = os.path.join(workdir, "config.json")
  if os.path.exists(path):
    with open(path) as f:
      previous = f.read()
    if previous != config_json:
      if not overwrite:
        raise ValueError(f"workdir {workdir} holds a different config (see {path}); use another "
                         "--workdir or pass --overwrite to discard it.")
      shutil.rmtree(workdir)
  os.makedirs(workdir, exist_ok=True)
  if not os.path.exists(path):
    # Every process of a multi-process run writes the same config: a name of its own, so
    # no process renames another's half-written file (or finds it already renamed).
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
      f.write(config_json)
    os.replace(temporary, path)


RESULT_COLUMNS = ("plan", "d", "T", "N", "seed", *sweep.ETA_NAMES, "final_risk", "error",
                  "margin", "lag_gap", "status", "diverged_step", "engine")
# Appended when the sweep labels its runs (config.sharpness; label is a run_label.LABELS name).
REGIME_COLUMNS = ("label", "period", "max_sharpness", "end_sharpness", "first_unstable_step",
                  "initial_sharpness")


def write_results(results: dict, workdir: str) -> str:
  """results.csv, one row per configuration; floats in repr (round-trip) form.

  Columns are formatted whole (csv_field); no field holds a comma, quote or line
  break, so rows are joined directly, with the csv module's CRLF line ends.
  """
  columns = [*map(csv_field, (results[name] for name in ("plan", "d", "steps", "n_samples",
                                                         "seed"))),
             *(csv_field(results[name], blank_nan=True) for name in sweep.ETA_NAMES),
             *(csv_field(results[name]) for name in ("final_risk", "error", "margin", "lag_gap")),
             csv_field(np.where(results["diverged"], "diverged", "ok")),
             csv_field(results["diverged_step"]), csv_field(results["engine"])]
  header = RESULT_COLUMNS
  if "label" in results:
    names = np.asarray(lj.dynamics.run_label.LABELS, dtype=object)
    columns += [csv_field(names[np.asarray(results["label"], np.int64)]),
                *(csv_field(results[name]) for name in REGIME_COLUMNS[1:])]
    header += REGIME_COLUMNS
  lines = map(",".join, zip(*columns))
  path = os.path.join(workdir, "results.csv")
  with open(path, "w", newline="") as f:
    f.write("\r\n".join([",".join(header), *lines, ""]))
  return path


def csv_field(values: np.ndarray, blank_nan: bool = False) -> list[str]:
  """The CSV text of a column: str of each value, repr (round-trip) for floats, NaN as ""
  when blank_nan.

  Each distinct number is formatted once; floats are told apart by bit pattern, so
  -0.0 keeps its sign.
  """
  if values.dtype.kind in "OU":
    return values.tolist()
  floats = values.dtype.kind == "f"
  unique, inverse = np.unique(values.astype(np.float64).view(np.int64) if floats else values,
                              return_inverse=True)
  text = ["" if blank_nan and math.isnan(v) else repr(v) for v in
          unique.view(np.float64).tolist()] if floats else [str(v) for v in unique.tolist()]
  return np.asarray(text, dtype=object)[inverse.reshape(-1)].tolist()


def regime_report(results: dict, success_risk: float, config=None) -> str:
  """Per (plan, d, T) and η1: the smallest succeeding η2 and the largest η2 before divergence;
  with `config`, an η1 where none succeeds says why when the exact regime knows."""
  lines = []
  rows = results["plan"] == "three_phase"
  for d in np.unique(results["d"][rows]):
    for steps in np.unique(results["steps"][rows]):
      sel = rows & (results["d"] == d) & (results["steps"] == steps)
      lines.append(f"three_phase, d = {d}, T = {steps}: success means final risk <= "
                   f"{success_risk:g}")
      # Per η1 column at once: the smallest succeeding and the largest stable η2.
      index = np.flatnonzero(sel)
      columns, column = np.unique(results["eta1"][index], return_inverse=True)
      column, eta2 = column.reshape(-1), results["eta2"][index]
      stable = ~results["diverged"][index]
      success = stable & (results["final_risk"][index] <= success_risk)
      smallest, largest = np.full(columns.size, np.inf), np.full(columns.size, -np.inf)
      np.minimum.at(smallest, column[success], eta2[success])
      np.maximum.at(largest, column[stable], eta2[stable])
      highest = np.full(columns.size, -np.inf)
      np.maximum.at(highest, column, eta2)
      for k, eta1 in enumerate(columns):
        none = (config is not None and np.isinf(smallest[k]) and regimes_overlay.no_success_reason(
            config, int(d), int(steps), float(eta1), highest[k:k + 1], results["eta3"][index]))
        succeeds = f"no η2 succeeds: {none}" if none else "smallest η2 that succeeds " + (
            f"{'none' if np.isinf(smallest[k]) else f'{smallest[k]:.4g}':>10}")
        lines.append(f"  η1 = {eta1:10.4g}: {succeeds}, largest η2 before divergence "
                     f"{'none' if np.isinf(largest[k]) else f'{largest[k]:.4g}':>10}")
  return "\n".join(lines)


def save_trajectories(results: dict, workdir: str) -> None:
  """trajectories.npz: per static group, its rows, record steps and risk at each record."""
  arrays = {}
  for key, rows in sweep.group_rows(results).items():
    name = f"{key.plan}_d{key.d}_T{key.steps}_N{key.n_samples}"
    steps, risk = sweep.risk_paths(results, rows)
    arrays[f"{name}_rows"] = rows
    arrays[f"{name}_risk"] = risk
    arrays[f"{name}_steps"] = steps
  np.savez(os.path.join(workdir, "trajectories.npz"), **arrays)


def main(argv):
  del argv
  # On CPU, one XLA device per core so that chunks shard over every core (an explicit device
  # count in XLA_FLAGS wins); multi-process runs keep one device per process (each process
  # is one host's share).
  experiment = common.start(
      _CONFIG.value, _WORKDIR.value,
      host_devices=None if distributed.COORDINATOR.value else os.cpu_count() or 1)
  config = experiment.config
  distributed.initialize()
  try:
    table = config_table(config)
    config_json = common.json_of(config)
    prepare_workdir(_WORKDIR.value, config_json, _OVERWRITE.value)
  except ValueError as error:
    raise app.UsageError(str(error)) from error
  workdir = _WORKDIR.value
  reloaded = chunk_store.ChunkStore(workdir).count_finished()
  start = time.time()
  progress = experiment.progress("configurations", quiet=_QUIET.value)
  results = sweep.run_sweep(
      table, workdir, functools.partial(config_language, config),
      loss=config.loss, route=config.route, chunk_size=config.chunk_size,
      batch_size=config.batch_size, num_records=config.num_records, max_risk=config.max_risk,
      engine=DYNAMICS[config.dynamics], sharpness=bool(config.sharpness),
      # Risk paths are 8 bytes per record and row: keep only those the outputs use.
      path_rows=None if config.save_trajectories else plotting.curve_rows(table, config),
      progress=progress,
      process_index=jax.process_index(), process_count=jax.process_count())
  wall = time.time() - start
  if results is None:
    return
  csv_path = write_results(results, workdir)
  languages_by_d = {str(d): config_language(config, int(d)) for d in config.d_list}
  computed = int(table["plan"].shape[0]) - (progress.done_at_start or 0)
  metadata = experiment.write_metadata(
      languages={d: {"language": lang.describe(), "length_law": str(lang.length)}
                 for d, lang in languages_by_d.items()},
      # A resumed run reloads finished chunks: wall time and throughput cover the
      # configurations this run computed, not the reloaded ones.
      resumed=reloaded > 0, chunks_at_start=reloaded,
      process_count=jax.process_count(),   # devices, host and environment: common
      configurations=int(table["plan"].shape[0]), configurations_computed=computed,
      wall_seconds=wall, configs_per_second=computed / max(wall, 1e-9))
  if config.save_trajectories:
    save_trajectories(results, workdir)
  figures = plotting.sweep_figures(results, config, workdir)
  report = regime_report(results, config.success_risk, config)
  with open(os.path.join(workdir, "regime_report.txt"), "w") as f:
    f.write(report + "\n")
  lines = report.splitlines()
  if len(lines) > 24:  # keep the printed report short; the file has every η1
    keep = np.unique(np.linspace(0, len(lines) - 1, 24).astype(int))
    lines = [lines[i] for i in keep] + [f"  … {len(lines)} lines in regime_report.txt"]
  print("\n".join(lines))
  print(f"{table['plan'].shape[0]} configurations in {wall:.1f} s "
        f"({metadata['configs_per_second']:.0f}/s); wrote {csv_path}, metadata.json, "
        f"{', '.join(os.path.basename(p) for p in figures)} in {workdir}")


if __name__ == "__main__":
  cli.run(main)
