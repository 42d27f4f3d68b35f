"""Vectorized, sharded, resumable sweeps over training plans (docs/theory.md sections 5-6).

A sweep is a table of configurations: a plan name, d, the number of steps T,
the plan's step sizes (eta1, eta2, eta3 or eta), and for finite-sample plans
the sample size N and a seed. Rows sharing (plan, d, T, N) form a static group
evaluated by one compiled function vmapped over step sizes and seeds (the
engine: closed form where the plan allows it, else the scan of lj.train). A
group is cut into fixed-size chunks, each sharded over the local devices and
kept in a lagjax.sweep.chunk_store.ChunkStore, so an interrupted sweep resumes where
it stopped and recomputes nothing finished. With several processes
(jax.distributed), process p takes the chunks with index ≡ p mod #processes,
and process 0 reads the others' chunks after a barrier of the distributed
runtime. Progress goes to an optional callback; this module prints nothing.

The module is longer than the library's ~300 lines because the table, the engines
and the sharded chunk runs share one layout (groups, chunks, padded shapes); the
store is lagjax/sweep/chunk_store.py and the rendering of progress is the binary's.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lagjax import validation
from lagjax.data import languages
from lagjax.dynamics import engines, plans, runner
from lagjax.models import direct
from lagjax.risk import error as error_lib
from lagjax.sweep import chunk_store

# The step-size columns of a sweep table: every name of the plan registry (plans.PLANS),
# in the results' column order.
ETA_NAMES = ("eta1", "eta2", "eta3", "eta")
OUTPUTS = ("final_risk", "error", "margin", "lag_gap", "diverged", "diverged_step")


# progress(done, total): configurations finished (computed here or found in the store) so far.
ProgressFn = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class GroupKey:
  """The static part of a configuration (plan, d, T, N): one compiled evaluator per key (§5b).

  Attributes:
    plan: the plan's registry name (plans.PLANS).
    d: the alphabet size.
    steps: T, the length of the plan's last phase.
    n_samples: N for empirical objectives; 0 means population objectives.

  Example:
    >>> table = lj.sweep.build_table(["joint"], [3, 4], [10], {"eta": [0.5, 1.0]})
    >>> list(lj.sweep.group_rows(table))
    [GroupKey(plan='joint', d=3, steps=10, n_samples=0),
     GroupKey(plan='joint', d=4, steps=10, n_samples=0)]
  """

  plan: str
  d: int
  steps: int
  n_samples: int  # 0 means population objectives


def build_table(plan_names, d_list, steps_list, eta_grids: dict, *, n_samples_list=(0,),
                seeds=(0,)) -> dict[str, np.ndarray]:
  """The flattened sweep grid (§5b): per plan, the product of d, T, N, seed and its step sizes.

  Rows are in itertools.product order (the last factor varies fastest). Step
  sizes a plan does not use are NaN in its rows. Seeds only matter for empirical
  objectives: with every N = 0 the table has seed 0 alone.

  Args:
    plan_names: registry names (plans.PLANS).
    d_list: alphabet sizes d.
    steps_list: lengths T of the plans' last phases.
    eta_grids: {step-size name: values} for every name the plans use (ETA_NAMES).
    n_samples_list: sample sizes N (0: population objectives).
    seeds: the seeds of empirical runs.

  Returns:
    A dict of (rows,) arrays, one per column ("plan", "d", "steps", "n_samples", "seed"
    and ETA_NAMES).

  Example:
    >>> grids = {"eta1": [1.0, 2.0], "eta2": [10.0], "eta3": [0.5], "eta": [0.5]}
    >>> table = lj.sweep.build_table(["three_phase", "joint"], [3], [4], grids)
    >>> table["plan"].tolist()
    ['three_phase', 'three_phase', 'joint']
    >>> table["eta1"].tolist(), table["eta"].tolist()
    ([1.0, 2.0, nan], [nan, nan, 0.5])
  """
  seeds = tuple(seeds) if any(n_samples_list) else (0,)
  columns: dict[str, list] = {k: [] for k in ("plan", "d", "steps", "n_samples", "seed",
                                              *ETA_NAMES)}
  for plan in plan_names:
    names = plans.PLANS[plan].eta_names
    factors = [np.asarray(d_list, np.int64), np.asarray(steps_list, np.int64),
               np.asarray(n_samples_list, np.int64), np.asarray(seeds, np.int64),
               *(np.asarray(eta_grids[name], np.float64) for name in names)]
    grid = [axis.ravel() for axis in np.meshgrid(*factors, indexing="ij")]
    size = grid[0].size
    columns["plan"].append(np.full(size, plan))
    for name, values in zip(("d", "steps", "n_samples", "seed"), grid):
      columns[name].append(values)
    for name in ETA_NAMES:
      columns[name].append(grid[4 + names.index(name)] if name in names else np.full(size, np.nan))
  return {k: np.concatenate(v) if v else np.zeros(0) for k, v in columns.items()}


def group_rows(table) -> dict[GroupKey, np.ndarray]:
  """Row indices of each static group (plan, d, T, N), groups in order of first appearance (§5b).

  Args:
    table: a sweep table (build_table).

  Returns:
    A dict from each GroupKey to its (rows,) int row indices, rising.

  Example:
    >>> table = lj.sweep.build_table(["joint", "output_only"], [3], [10], {"eta": [0.5, 1.0]})
    >>> {key.plan: rows.tolist() for key, rows in lj.sweep.group_rows(table).items()}
    {'joint': [0, 1], 'output_only': [2, 3]}
  """
  names, plan_code = np.unique(table["plan"], return_inverse=True)
  columns = (plan_code.reshape(-1), table["d"], table["steps"], table["n_samples"])
  # One integer per row: its key's distinct-value indices read as a mixed-radix number.
  code = np.zeros(columns[0].size, np.int64)
  for column in columns:
    distinct, index = np.unique(column, return_inverse=True)
    code = code * distinct.size + index.reshape(-1)
  _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
  inverse = inverse.reshape(-1)
  rows = np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse))[:-1])
  return {GroupKey(str(names[columns[0][first[g]]]), *(int(c[first[g]]) for c in columns[1:])):
          rows[g] for g in np.argsort(first)}


def make_plan(name: str, steps: int, n_samples: int = 0) -> plans.Plan:
  """The named plan with placeholder step sizes (the sweep passes the real ones; §5).

  Args:
    name: the plan's registry name.
    steps: T, the length of its last phase.
    n_samples: N for Empirical(N) objectives in every phase; 0 for Population().

  Returns:
    The Plan, every step size 1.0.

  Example:
    >>> plan = lj.sweep.make_plan("three_phase", 10, n_samples=100)
    >>> plan.total_steps, plan.etas.tolist()
    (12, [1.0, 1.0, 1.0])
    >>> plan.phases[0].objective
    Empirical(n_samples=100, batch_size=None)
  """
  objective = plans.Empirical(n_samples) if n_samples else plans.Population()
  spec = plans.get_plan(name)
  return spec.build([1.0] * len(spec.step_sizes), steps, objective=objective)


class Evaluator(NamedTuple):
  """One static group's evaluator (§5b): evaluate(etas, seed) on the engines' record grid.

  Attributes:
    evaluate: (etas (P,), seed) -> dict of OUTPUTS and "risk_path" (R,) at record_steps;
      jittable and vmappable.
    engine: the engine's name, "closed_form" or "steps" (lagjax/dynamics/engines.py).
    record_steps: (R,) the record grid, runner.record_grid(T, K).

  Example:
    >>> key = lj.sweep.GroupKey("output_only", d=3, steps=2, n_samples=0)
    >>> evaluator = lj.sweep.make_evaluator(lj.occurrence(3), key, num_records=2)
    >>> evaluator.engine, evaluator.record_steps.tolist()
    ('closed_form', [0, 1, 2])
  """

  evaluate: Callable
  engine: str  # the engine's name (lagjax/dynamics/engines.py)
  record_steps: np.ndarray


def make_evaluator(lang: languages.Language, key: GroupKey, *, loss: str = "squared",
                   route: str = "auto", num_records: int = 64,
                   max_risk: float = runner.MAX_VALUE) -> Evaluator:
  """The evaluator of one static group, through the engine contract of §5b.

  The closed form where it supports the plan, else the step-by-step loop
  (lagjax/dynamics/engines.py). Both give a Trajectory on the same record grid; the
  summary reads it the same way: the final risk, the 0-1 error, the margin (§2), the lag
  gap over the uniform records (§6) and the divergence (§5).

  Args:
    lang: the language (§1b) of the group's d.
    key: the group's GroupKey.
    loss: "squared" or "logistic".
    route: the risk route ("auto", "laplace", "lattice", ...; §3).
    num_records: K of the record grid.
    max_risk: the divergence cap.

  Returns:
    An Evaluator.

  Example:
    >>> key = lj.sweep.GroupKey("output_only", d=3, steps=2, n_samples=0)
    >>> evaluator = lj.sweep.make_evaluator(lj.occurrence(3), key, num_records=2)
    >>> out = jax.jit(evaluator.evaluate)(jnp.array([1.0]), 0)
    >>> # R(θ0 = 0) = ½ E y² = ½, then output GD lowers the risk.
    >>> path = out["risk_path"]
    >>> round(float(path[0]), 6), bool(path[2] < path[1] < path[0]), bool(out["diverged"])
    (0.5, True, False)
  """
  evaluation = engines.build(lang, make_plan(key.plan, key.steps, key.n_samples), loss=loss,
                             route=route, num_records=num_records, max_risk=max_risk)
  error_report, _ = error_lib.best_route(lang, evaluation.partition)
  letters = lang.margin_letters()

  def evaluate(etas, seed):
    run = evaluation.evaluate(etas, jax.random.key(seed))
    return {"final_risk": run.risk[-1], "error": error_report(run.params)["error"],
            "margin": direct.attention_margin({"alpha": run.expand(run.alpha[-1])}, letters),
            # The lag gap is a mean over t: over the uniformly spaced records only.
            "lag_gap": run.lag(evaluation.uniform).lag_gap,
            "diverged": run.diverged, "diverged_step": run.diverged_step, "risk_path": run.risk}

  return Evaluator(evaluate, evaluation.engine, evaluation.record_steps)


def chunked(evaluate: Callable, batch_size: int, devices) -> Callable:
  """jit of evaluate over a chunk (C, P) of step sizes and (C,) seeds (the sweep of §5b).

  The chunk is split into #devices contiguous slices, one per device
  (jax.shard_map); on each device lax.map walks its slice in vmapped batches of
  batch_size, which keeps the working set in cache (one vmap over thousands of
  configurations is memory-bound). run(etas, seeds) dispatches the computation and
  returns a function that waits for it and returns host arrays, so the host work
  of one chunk overlaps the computation of the next.

  Args:
    evaluate: (etas (P,), seed) -> dict of arrays (Evaluator.evaluate).
    batch_size: configurations per vmapped batch on a device.
    devices: the devices to shard over; a chunk's length C must be a multiple of their
      number (run_sweep pads chunks to a multiple of #devices x batch_size).

  Returns:
    run(etas (C, P), seeds (C,)) -> wait, where wait() returns a dict of (C, ...) host
    arrays.

  Example:
    >>> evaluate = lambda etas, seed: {"sum": etas.sum() + seed}
    >>> run = lj.sweep.chunked(evaluate, 2, jax.local_devices()[:1])
    >>> wait = run(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0, 10], np.uint32))
    >>> wait()["sum"].tolist()
    [3.0, 17.0]
  """
  mesh = Mesh(np.asarray(devices), ("devices",))
  split = PartitionSpec("devices")

  def per_device(etas, seeds):
    return jax.lax.map(lambda x: evaluate(*x), (etas, seeds), batch_size=batch_size)

  # No collectives inside, so the device-variance typing (check_vma) has nothing to check;
  # it would reject lj.train's lax.cond, whose idle branch carries the unsharded θ0.
  compiled = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=split, out_specs=split,
                                   check_vma=False))
  sharding = NamedSharding(mesh, split)

  def run(etas, seeds):
    out = compiled(jax.device_put(etas, sharding), jax.device_put(seeds, sharding))
    return lambda: {k: np.asarray(v) for k, v in out.items()}

  return run


class _Chunk(NamedTuple):
  group: int
  index: int
  rows: np.ndarray


def run_sweep(table: dict, workdir: str, make_language: Callable[[int], languages.Language], *,
              loss: str = "squared", route: str = "auto", chunk_size: int = 4096,
              batch_size: int = 32, num_records: int = 64, max_risk: float = runner.MAX_VALUE,
              path_rows=None, progress: ProgressFn | None = None, process_index: int = 0,
              process_count: int = 1, devices=None, wait_timeout: float = 3600.0) -> dict | None:
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
    path_rows: the rows whose risk path is kept (default all: a risk path is 8 bytes per
      record, which dominates the store).
    progress: optional progress(done, total) callback.
    process_index: this process's index in a jax.distributed run.
    process_count: the number of processes; process p takes chunks ≡ p mod process_count.
    devices: the devices to shard chunks over (default jax.local_devices()).
    wait_timeout: seconds to wait for the other processes (wait_for_processes).

  Returns:
    The results dict on process 0, None on the others. It holds the input columns plus
    OUTPUTS, "engine" and "group" (the row's index in group_rows(table)) per row;
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
  todo = [chunk for i, (chunk, done) in enumerate(zip(chunks, stored))
          if not done and i % process_count == process_index]
  total = table["plan"].shape[0]
  keep_path = np.zeros(total, bool)
  keep_path[slice(None) if path_rows is None else np.asarray(path_rows, np.int64)] = True
  done = sum(chunk.rows.size for chunk, found in zip(chunks, stored) if found)
  if progress:
    progress(done, total)
  computed = {}
  for group, group_chunks in itertools.groupby(todo, key=lambda chunk: chunk.group):
    key, rows = list(groups.items())[group]
    evaluator = make_evaluator(make_language(key.d), key, loss=loss, route=route,
                               num_records=num_records, max_risk=max_risk)
    # Step-by-step runs gain nothing from vectorizing on a CPU (measured: 0.3-0.8x of a
    # loop, BUILD_NOTES.md), so there each device walks its configurations one by one.
    cpu_steps = evaluator.engine == "steps" and devices[0].platform == "cpu"
    run = chunked(evaluator.evaluate, 1 if cpu_steps else batch_size, devices)
    shape = min(chunk_size, -(-rows.size // unit) * unit)  # a small group is one small chunk
    names = plans.PLANS[key.plan].eta_names
    waiting = None
    for chunk in [*group_chunks, None]:
      if chunk is not None:  # dispatch this chunk before finishing the previous one
        padded = np.concatenate([chunk.rows, np.full(shape - chunk.rows.size, chunk.rows[-1])])
        etas = np.stack([table[name][padded] for name in names], axis=1).astype(np.float64)
        pending = (chunk, run(etas, table["seed"][padded].astype(np.uint32)))
      if waiting is not None:
        finished, wait = waiting
        result = {k: v[:finished.rows.size] for k, v in wait().items()}
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
  results = _assemble(table, loaded, [chunk.group for chunk in chunks], len(groups))
  missing = np.setdiff1d(np.flatnonzero(keep_path), results["path_rows"])
  if missing.size:
    raise ValueError(f"the store in {workdir} lacks the risk paths of {missing.size} requested "
                     f"rows (e.g. row {missing[0]}): it was written with other path_rows.")
  return results


def _assemble(table: dict, chunks: list[dict], chunk_groups: list[int], num_groups: int) -> dict:
  """The results table from every chunk's arrays (see run_sweep)."""
  total = table["plan"].shape[0]
  record_steps = [np.zeros(0, np.int64)] * num_groups
  for chunk, group in zip(chunks, chunk_groups):
    record_steps[group] = chunk["record_steps"]
  outputs = {name: np.zeros(total, chunks[0][name].dtype) for name in OUTPUTS} if chunks else {}
  outputs.update(engine=np.empty(total, object), group=np.zeros(total, np.int64))
  for chunk, group in zip(chunks, chunk_groups):
    rows = chunk["rows"]
    for name in OUTPUTS:
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


_barriers = itertools.count()  # every process runs the same sweeps, so the ids agree


def wait_for_processes(process_count: int, timeout: float = 3600.0) -> None:
  """Blocks until every process of a jax.distributed run has stored its chunks (§5b, Table 1).

  The public barrier of multihost_utils (every process agrees on the barrier's
  name), waited for in a thread so that a process that never arrives gives a
  TimeoutError after `timeout` seconds instead of a hang.

  Args:
    process_count: the number of processes; with 1 there is nothing to wait for.
    timeout: seconds to wait.

  Raises:
    TimeoutError: when the other processes do not arrive within `timeout`.

  Example:
    >>> lj.sweep.run.wait_for_processes(1)  # a single process returns at once
  """
  if process_count == 1:
    return
  name = f"lagjax_sweep_{next(_barriers)}"
  failure = []

  def barrier():
    try:
      multihost_utils.sync_global_devices(name)
    except Exception as error:  # noqa: BLE001 (re-raised in the caller's thread)
      failure.append(error)

  waiter = threading.Thread(target=barrier, daemon=True)
  waiter.start()
  waiter.join(timeout)
  if waiter.is_alive():
    raise TimeoutError(f"the other processes did not store their chunks within {timeout:g} s "
                       f"(wait_timeout).")
  if failure:
    raise failure[0]
