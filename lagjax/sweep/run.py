"""Resumable sweeps over training plans (docs/theory.md sections 5-6): run_sweep and its results.

run_sweep evaluates a sweep table (lagjax/sweep/table.py) group by group with one
compiled evaluator each (lagjax/sweep/evaluator.py). A group is cut into fixed-size
chunks, each sharded over the local devices and kept in a
lagjax.sweep.chunk_store.ChunkStore, so an interrupted sweep resumes where it stopped and
recomputes nothing finished. With several processes (jax.distributed), each takes its
share of the chunks and process 0 reads the others' after a barrier
(lagjax/sweep/processes.py). Progress goes to an optional callback; this module prints
nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from lagjax import validation
from lagjax.data import languages
from lagjax.dynamics import plans, runner, train
from lagjax.models import direct
from lagjax.risk import coverage
from lagjax.sweep import chunk_store
from lagjax.sweep.evaluator import OUTPUTS, SHARPNESS_OUTPUTS, chunked, make_evaluator, make_plan
from lagjax.sweep.processes import my_chunks, wait_for_processes
from lagjax.sweep.table import group_rows

# progress(done, total): configurations finished (computed here or found in the store) so far.
ProgressFn = Callable[[int, int], None]


class _Chunk(NamedTuple):
  group: int
  index: int
  rows: np.ndarray


def run_sweep(table: dict, workdir: str, make_language: Callable[[int], languages.Language], *,
              loss: str = "squared", route: str = "auto", chunk_size: int = 4096,
              batch_size: int = 32, num_records: int = 64, max_risk: float = runner.MAX_VALUE,
              path_rows=None, progress: ProgressFn | None = None, process_index: int = 0,
              process_count: int = 1, devices=None, wait_timeout: float = 3600.0,
              engine: str = "auto", sharpness: bool = False) -> dict | None:
  """Evaluates every row of `table`, persisting each finished chunk under workdir/chunks (§5b).

  Chunks already in the store are loaded, not recomputed. progress(done, total) is
  called before the first chunk and after each chunk.

  Args:
    table: the sweep table (build_table).
    workdir: the folder of the chunk store (a lagjax.sweep.chunk_store.ChunkStore).
    make_language: d -> the Language (§1b) of each group.
    loss: "squared" or "logistic".
    route: the risk route (§3).
    chunk_size: rows per chunk (rounded down to a multiple of #devices x batch_size).
    batch_size: configurations per vmapped batch on a device.
    num_records: K of the record grid (§5b).
    max_risk: the divergence cap (§5).
    engine: the engine ("auto"; "flow" runs each plan's gradient flow, §5: a phase of k steps
      at η flows for k·η time units, i.e. η is its rate and k its duration).
    sharpness: also write SHARPNESS_OUTPUTS per row (the regime label of run_label.LABELS,
      its period, λ_max figures; lagjax/sweep/evaluator.py; docs/theory.md §5d).
    path_rows: the rows whose risk path is kept (default all: a risk path is 8 bytes per
      record, which dominates the store).
    progress: optional progress(done, total) callback.
    process_index: this process's index in a jax.distributed run.
    process_count: the number of processes; process p takes chunks ≡ p mod process_count.
    devices: the devices to shard chunks over (default jax.local_devices()).
    wait_timeout: seconds to wait for the other processes (wait_for_processes).

  Returns:
    The results dict on process 0, None on the others. It holds the input columns plus
    OUTPUTS (and SHARPNESS_OUTPUTS with sharpness), "engine" and "group" (the row's index
    in group_rows(table)) per row;
    "record_steps", a list with each group's record steps (R_g,); "path_rows" (K,), the
    sorted rows whose risk path is kept; and "risk_path" (K, max R_g), their risk at
    their group's record steps, NaN-padded past R_g (read them with risk_paths).

  Example:
    >>> import tempfile
    >>> table = lj.sweep.build_table(["output_only"], [3], [2], {"eta": [0.5, 1.0]})
    >>> with tempfile.TemporaryDirectory() as workdir:
    ...   results = lj.sweep.run_sweep(table, workdir, lj.occurrence, chunk_size=2, batch_size=2,
    ...                                num_records=2, progress=print)
    ...   # Run again: it finds the finished chunk in the store and computes nothing.
    ...   again = lj.sweep.run_sweep(table, workdir, lj.occurrence, chunk_size=2, batch_size=2,
    ...                              num_records=2, progress=print)
    0 2
    2 2
    2 2
    >>> results["engine"].tolist(), results["record_steps"][0].tolist()
    (['closed_form', 'closed_form'], [0, 1, 2])
    >>> np.round(results["risk_path"][:, 0], 6).tolist()  # R(θ0 = 0) = ½ on every row
    [0.5, 0.5]
    >>> bool(np.array_equal(again["risk_path"], results["risk_path"]))
    True
  """
  validation.require_float64("lj.sweep.run_sweep")
  devices = list(devices or jax.local_devices())
  store = chunk_store.ChunkStore(workdir)
  groups = group_rows(table)
  # Chunks are padded to a multiple of devices × batch so every chunk of a group has one shape.
  unit = len(devices) * batch_size
  chunk_size = max(unit, chunk_size // unit * unit)
  chunks = [_Chunk(g, c, rows[start:start + chunk_size]) for g, rows in enumerate(groups.values())
            for c, start in enumerate(range(0, rows.size, chunk_size))]
  stored = [store.has(chunk.group, chunk.index) for chunk in chunks]
  todo = [chunks[i] for i in my_chunks(len(chunks), process_index, process_count)
          if not stored[i]]
  total = table["plan"].shape[0]
  keep_path = np.zeros(total, bool)
  keep_path[slice(None) if path_rows is None else np.asarray(path_rows, np.int64)] = True
  done = sum(chunk.rows.size for chunk, found in zip(chunks, stored) if found)
  if progress:
    progress(done, total)
  computed = {}
  for group, group_chunks in itertools.groupby(todo, key=lambda chunk: chunk.group):
    key, rows = list(groups.items())[group]
    lang = make_language(key.d)
    evaluator = make_evaluator(lang, key, loss=loss, route=route, num_records=num_records,
                               max_risk=max_risk, engine=engine, sharpness=sharpness)
    # Step-by-step runs gain nothing from vectorizing on a CPU (measured: 0.3-0.8x of a
    # loop, docs/decisions/batching-on-cpu.md), so there devices walk them one by one.
    cpu_steps = evaluator.engine == "steps" and devices[0].platform == "cpu"
    per_batch = 1 if cpu_steps else batch_size
    run = chunked(evaluator.evaluate, per_batch, devices, manual=evaluator.engine != "flow")
    shape = min(chunk_size, -(-rows.size // unit) * unit)  # a small group is one small chunk
    names = plans.PLANS[key.plan].eta_names

    def regrid(result, chunk_rows, key=key, lang=lang, evaluator=evaluator, names=names,
               per_batch=per_batch):
      """Recomputes the rows that stopped because of the quadrature grid (§3a)."""
      return _regrid(result, chunk_rows, table, names, lang, key, evaluator,
                     dict(loss=loss, route=route, num_records=num_records, max_risk=max_risk,
                          engine=evaluator.engine, sharpness=sharpness), per_batch, devices,
                     unit)

    waiting = None
    for chunk in [*group_chunks, None]:
      if chunk is not None:  # dispatch this chunk before finishing the previous one
        padded = np.concatenate([chunk.rows, np.full(shape - chunk.rows.size, chunk.rows[-1])])
        etas = np.stack([table[name][padded] for name in names], axis=1).astype(np.float64)
        pending = (chunk, run(etas, table["seed"][padded].astype(np.uint32)))
      if waiting is not None:
        finished, wait = waiting
        result = regrid({k: v[:finished.rows.size] for k, v in wait().items()}, finished.rows)
        kept = keep_path[finished.rows]
        result.update(rows=finished.rows, engine=np.array(evaluator.engine),
                      record_steps=evaluator.record_steps, path_rows=finished.rows[kept],
                      risk_path=result["risk_path"][kept])
        store.save(finished.group, finished.index, result)
        computed[finished.group, finished.index] = result
        done += finished.rows.size
        if progress:
          progress(done, total)
      waiting = pending if chunk is not None else None
  wait_for_processes(process_count, wait_timeout)
  if process_index != 0:
    return None
  loaded = [computed.get((chunk.group, chunk.index)) or store.load(chunk.group, chunk.index)
            for chunk in chunks]
  names = OUTPUTS + (SHARPNESS_OUTPUTS if sharpness else ())
  lacking = [chunk for chunk, found in zip(chunks, loaded) if any(n not in found for n in names)]
  if lacking:
    raise ValueError(f"the store in {workdir} holds chunks without the sharpness outputs (e.g. "
                     f"group {lacking[0].group}, chunk {lacking[0].index}): it was written with "
                     "sharpness=False; use another workdir.")
  results = _assemble(table, loaded, [chunk.group for chunk in chunks], len(groups), names)
  missing = np.setdiff1d(np.flatnonzero(keep_path), results["path_rows"])
  if missing.size:
    raise ValueError(f"the store in {workdir} lacks the risk paths of {missing.size} requested "
                     f"rows (e.g. row {missing[0]}): it was written with other path_rows.")
  return results


def _regrid(result: dict, rows: np.ndarray, table: dict, names, lang, key, evaluator,
            options: dict, per_batch: int, devices, unit: int) -> dict:
  """`result` with the rows that stopped because of the quadrature grid recomputed on the
  smallest grid of coverage.ladder that covers where they stopped, until none does (§3a).

  A run's stop is the grid's when its final state (the one the divergence rule froze, or
  θ_T) needs more nodes than the grid holds (result["grid_needed"]); each recomputation runs
  from scratch, so the row equals a run on the larger grid from the start. The
  "grid_needed" column is dropped, so the store holds OUTPUTS and the risk path only.
  """
  result = dict(result)
  needed = result.pop("grid_needed")
  # The final state is the one the divergence rule froze, or θ_T, which no step judges: a
  # state outside the grid means a NaN risk there, the grid's doing either way.
  if evaluator.num_points is None or not (needed > evaluator.num_points).any():
    return result
  result = {name: np.array(values) for name, values in result.items()}  # writable copies
  needed = np.array(needed)
  windows = coverage.windows(train.choose_partition(
      lang, direct.zero_params(lang.d), make_plan(key.plan, key.steps, key.n_samples),
      "auto").num_groups)
  size = evaluator.num_points
  while True:
    failed = np.flatnonzero(needed > size)
    larger = (coverage.size_covering(lang, needed[failed].max(), windows) if failed.size
              else None)
    if larger is None or larger <= size:
      return result
    size = larger
    bigger = make_evaluator(lang, key, num_points=size, **options)
    padded = np.concatenate([failed, np.full(-failed.size % unit, failed[-1])])
    etas = np.stack([table[name][rows[padded]] for name in names], axis=1).astype(np.float64)
    again = chunked(bigger.evaluate, per_batch, devices)(
        etas, table["seed"][rows[padded]].astype(np.uint32))()
    for name, values in again.items():
      target = needed if name == "grid_needed" else result[name]
      target[failed] = values[:failed.size]


def _assemble(table: dict, chunks: list[dict], chunk_groups: list[int], num_groups: int,
              names=OUTPUTS) -> dict:
  """The results table from every chunk's arrays (see run_sweep)."""
  total = table["plan"].shape[0]
  record_steps = [np.zeros(0, np.int64)] * num_groups
  for chunk, group in zip(chunks, chunk_groups):
    record_steps[group] = chunk["record_steps"]
  outputs = {name: np.zeros(total, chunks[0][name].dtype) for name in names} if chunks else {}
  outputs.update(engine=np.empty(total, object), group=np.zeros(total, np.int64))
  for chunk, group in zip(chunks, chunk_groups):
    rows = chunk["rows"]
    for name in names:
      outputs[name][rows] = chunk[name]
    outputs["engine"][rows] = str(chunk["engine"])
    outputs["group"][rows] = group
  # Chunks stored before path_rows existed hold every row's path.
  path_rows = [chunk.get("path_rows", chunk["rows"]) for chunk in chunks]
  order = np.argsort(np.concatenate(path_rows or [np.zeros(0, np.int64)]), kind="stable")
  width = max((steps.size for steps in record_steps), default=0)
  risk_path = np.full((order.size, width), np.nan)
  start = 0
  for chunk, rows in zip(chunks, path_rows):
    risk_path[start:start + rows.size, :chunk["risk_path"].shape[1]] = chunk["risk_path"]
    start += rows.size
  return dict(table, **outputs, record_steps=record_steps,
              path_rows=np.concatenate(path_rows or [np.zeros(0, np.int64)])[order],
              risk_path=risk_path[order])


def risk_paths(results: dict, rows) -> tuple[np.ndarray, np.ndarray]:
  """Record steps (R_g,) and risk paths (len(rows), R_g) of rows of one static group (§5b).

  Args:
    results: run_sweep's results.
    rows: row indices of the table, all of one static group.

  Returns:
    (record_steps (R_g,), risk paths (len(rows), R_g)).

  Raises:
    ValueError: if the rows span several groups or a row's path was not kept.

  Example:
    >>> # Two groups of record grids of 3 and 2 steps (run_sweep's layout, NaN-padded).
    >>> results = {"group": np.array([0, 0, 1]),
    ...            "record_steps": [np.array([0, 1, 2]), np.array([0, 5])],
    ...            "path_rows": np.array([0, 1, 2]),
    ...            "risk_path": np.array([[0.5, 0.4, 0.3], [0.5, 0.2, 0.1], [0.5, 0.6, np.nan]])}
    >>> steps, paths = lj.sweep.risk_paths(results, [2])
    >>> steps.tolist(), paths.tolist()
    ([0, 5], [[0.5, 0.6]])
    >>> lj.sweep.risk_paths(results, [1, 0])[1].tolist()
    [[0.5, 0.2, 0.1], [0.5, 0.4, 0.3]]
  """
  rows = np.asarray(rows, np.int64)
  groups = np.unique(results["group"][rows])
  if groups.size != 1:
    raise ValueError(f"risk_paths needs rows of one static group; got groups {groups.tolist()}.")
  steps = results["record_steps"][int(groups[0])]
  position = np.minimum(np.searchsorted(results["path_rows"], rows),
                        results["path_rows"].size - 1)
  if results["path_rows"].size == 0 or np.any(results["path_rows"][position] != rows):
    raise ValueError("some rows' risk paths were not kept (run_sweep's path_rows).")
  return steps, results["risk_path"][position, :steps.size]


__all__ = ["ProgressFn", "risk_paths", "run_sweep"]
