"""Vectorized, sharded, resumable sweeps over training plans (docs/theory.md sections 5-6).

A sweep is a table of configurations: a plan name, d, the number of steps T,
the plan's step sizes (eta1, eta2, eta3 or eta), and for finite-sample plans
the sample size N and a seed. Rows sharing (plan, d, T, N) form a static group
evaluated by one compiled function vmapped over step sizes and seeds; a group
is cut into fixed-size chunks, each sharded over the local devices and saved
atomically under workdir/chunks, so an interrupted sweep resumes where it
stopped and recomputes nothing finished. With several processes
(jax.distributed), process p takes the chunks with index ≡ p mod #processes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lagjax import closed_form, languages, metrics, plans, validation
from lagjax import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import error as error_lib
from lagjax.risk import resolve_route
from lagjax.train import choose_partition, make_runner

# Which named step sizes feed each plan's phases, in phase order.
PLAN_ETAS = {"three_phase": ("eta1", "eta2", "eta3"), "attention_first": ("eta2", "eta3"),
             "output_only": ("eta",), "attention_only": ("eta",), "joint": ("eta",)}
ETA_NAMES = ("eta1", "eta2", "eta3", "eta")
OUTPUTS = ("final_risk", "error", "margin", "lag_gap", "diverged", "diverged_step")
MAX_RISK = 1e8


@dataclasses.dataclass(frozen=True)
class GroupKey:
  """The static part of a configuration: one compiled evaluator per key."""

  plan: str
  d: int
  steps: int
  n_samples: int  # 0 means population objectives


def build_table(plan_names, d_list, steps_list, eta_grids: dict, *, n_samples_list=(0,),
                seeds=(0,)) -> dict[str, np.ndarray]:
  """The flattened grid: per plan, the product of d, T, N, seed and the plan's own step sizes.

  Step sizes a plan does not use are NaN in its rows. Row order is deterministic.
  """
  columns: dict[str, list] = {k: [] for k in ("plan", "d", "steps", "n_samples", "seed",
                                              *ETA_NAMES)}
  for plan in plan_names:
    names = PLAN_ETAS[plan]
    for d, steps, n, seed, *etas in itertools.product(
        d_list, steps_list, n_samples_list, seeds if any(n_samples_list) else (0,),
        *(eta_grids[name] for name in names)):
      columns["plan"].append(plan)
      columns["d"].append(int(d))
      columns["steps"].append(int(steps))
      columns["n_samples"].append(int(n))
      columns["seed"].append(int(seed))
      for name in ETA_NAMES:
        columns[name].append(etas[names.index(name)] if name in names else np.nan)
  return {k: np.asarray(v) for k, v in columns.items()}


def group_rows(table) -> dict[GroupKey, np.ndarray]:
  """Row indices of each static group, groups in order of first appearance."""
  groups: dict[GroupKey, list] = {}
  for i in range(table["plan"].shape[0]):
    key = GroupKey(str(table["plan"][i]), int(table["d"][i]), int(table["steps"][i]),
                   int(table["n_samples"][i]))
    groups.setdefault(key, []).append(i)
  return {k: np.asarray(v) for k, v in groups.items()}


def make_plan(name: str, steps: int, n_samples: int = 0) -> plans.Plan:
  """The named plan with placeholder step sizes (the sweep passes the real ones)."""
  objective = plans.Empirical(n_samples) if n_samples else plans.Population()
  etas = [1.0] * len(PLAN_ETAS[name])
  if name == "three_phase":
    return plans.three_phase(*etas, steps, objectives=(objective,) * 3)
  return plans.get_plan(name)(*etas, steps, objective=objective)


def make_evaluator(lang: languages.Language, key: GroupKey, *, loss: str = "squared",
                   route: str = "auto", num_records: int = 64,
                   max_risk: float = MAX_RISK) -> tuple[Callable, str]:
  """evaluate(etas (P,), seed) -> dict of OUTPUTS (+ "risk_path", "record_steps" (R,)), engine.

  Engine "closed_form" (population plans without joint phases, squared loss):
  output phases in closed form, O(1) in T. Engine "steps": the scan of lj.train.
  """
  plan = make_plan(key.plan, key.steps, key.n_samples)
  letter = lang.letters[0]
  closed = (key.n_samples == 0 and loss == "squared" and resolve_route(loss, route) == "laplace"
            and all(p.group != "both" for p in plan.phases))
  if closed:
    partition = partition_lib.of_language(lang)
    trajectory = closed_form.make_trajectory(lang, plan, num_records=num_records,
                                             partition=partition, max_risk=max_risk)
    error_report, _ = error_lib.best_route(lang, partition)
    # The lag gap is a mean over t: take it over the uniformly spaced records only.
    uniform = closed_form.uniform_records(plan.total_steps, num_records)

    def evaluate(etas, seed):
      del seed
      run = trajectory(etas)
      alpha, beta = partition.expand(run.alpha), partition.expand(run.beta)
      return _summary(run.risk, error_report(run.params)["error"], alpha, beta, run.steps,
                      run.diverged, run.diverged_step, letter, uniform)

    return evaluate, "closed_form"

  partition = choose_partition(lang, direct.init_params(lang.d), plan, "auto")
  record_every = max(1, math.ceil(plan.total_steps / num_records))
  runner = make_runner(lang, plan.slots(), partition, num_steps=plan.total_steps, loss=loss,
                       route=route, record_every=record_every, max_risk=max_risk)
  theta0 = jax.tree_util.tree_map(jnp.asarray, {"alpha": jnp.zeros(partition.num_groups),
                                                "beta": jnp.zeros(partition.num_groups)})

  def evaluate(etas, seed):
    run = runner(theta0, jax.random.key(seed), plan.data(etas=etas))
    return _summary(run.risk, run.error[-1], run.alpha, run.beta, run.steps, run.diverged,
                    run.diverged_step, letter)

  return evaluate, "steps"


def _summary(risk, error, alpha, beta, steps, diverged, diverged_step, letter, uniform=None):
  lag = metrics.lag_metrics(alpha, beta, steps) if uniform is None else metrics.lag_metrics(
      alpha[uniform], beta[uniform], steps[uniform])
  return {"final_risk": risk[-1], "error": error,
          "margin": direct.attention_margin({"alpha": alpha[-1]}, letter),
          "lag_gap": lag.lag_gap, "diverged": diverged, "diverged_step": diverged_step,
          "risk_path": risk, "record_steps": steps}


def chunked(evaluate: Callable, batch_size: int, devices) -> Callable:
  """jit of evaluate over a chunk (C, P) of step sizes and (C,) seeds.

  The chunk is laid out (#devices, C/#devices) and sharded on the first axis; on
  each device lax.map walks it in vmapped batches of batch_size, which keeps the
  working set in cache (one vmap over thousands of configurations is memory-bound).
  """
  mesh = Mesh(np.asarray(devices), ("devices",))
  sharding = NamedSharding(mesh, PartitionSpec("devices"))

  def per_device(etas, seeds):
    return jax.lax.map(lambda x: evaluate(*x), (etas, seeds), batch_size=batch_size)

  compiled = jax.jit(jax.vmap(per_device), in_shardings=(sharding, sharding),
                     out_shardings=sharding)

  def run(etas, seeds):
    shape = (len(devices), -1)
    etas = jax.device_put(etas.reshape(*shape, etas.shape[-1]), sharding)
    seeds = jax.device_put(seeds.reshape(shape), sharding)
    out = compiled(etas, seeds)
    return {k: np.asarray(v).reshape(-1, *v.shape[2:]) for k, v in out.items()}

  return run


class Progress:
  """A one-line progress bar on stderr: configurations done, rate and ETA."""

  def __init__(self, total: int, quiet: bool = False, stream=None):
    self.total, self.quiet, self.stream = total, quiet, stream or sys.stderr
    self.done, self.computed, self.start = 0, 0, time.time()

  def update(self, count: int, computed: bool = True) -> None:
    self.done += count
    self.computed += count if computed else 0
    if self.quiet:
      return
    elapsed = max(time.time() - self.start, 1e-9)
    rate = self.computed / elapsed
    remaining = (self.total - self.done) / rate if rate > 0 else float("inf")
    filled = int(30 * self.done / max(self.total, 1))
    eta = f"{remaining:6.0f}s" if math.isfinite(remaining) else "     ?"
    self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                      f"configs  {rate:8.1f}/s  ETA {eta}")
    self.stream.flush()

  def close(self) -> None:
    if not self.quiet:
      self.stream.write("\n")
      self.stream.flush()


def save_atomically(path: str, arrays: dict) -> None:
  """Writes an .npz next to `path` and renames it into place (never a partial file)."""
  temporary = f"{path}.tmp-{os.getpid()}.npz"
  np.savez(temporary, **arrays)
  os.replace(temporary, path)


def chunk_path(workdir: str, group: int, chunk: int) -> str:
  return os.path.join(workdir, "chunks", f"group{group:03d}_chunk{chunk:06d}.npz")


def run_sweep(table: dict, workdir: str, make_language: Callable[[int], languages.Language], *,
              loss: str = "squared", route: str = "auto", chunk_size: int = 4096,
              batch_size: int = 32, num_records: int = 64, max_risk: float = MAX_RISK,
              quiet: bool = False, process_index: int = 0, process_count: int = 1,
              devices=None, wait_timeout: float = 3600.0) -> dict | None:
  """Evaluates every row of `table`, persisting each finished chunk under workdir/chunks.

  Returns the results table (the input columns plus OUTPUTS and "engine", and
  dicts row -> array "risk_path", "record_steps") on process 0, None on the
  others. Chunks already on disk are loaded, not recomputed.
  """
  validation.require_float64("lj.sweep.run_sweep")
  devices = list(devices or jax.local_devices())
  os.makedirs(os.path.join(workdir, "chunks"), exist_ok=True)
  groups = group_rows(table)
  # Chunks are padded to a multiple of devices × batch so every chunk has one shape.
  unit = len(devices) * batch_size
  chunk_size = max(unit, chunk_size // unit * unit)
  total = table["plan"].shape[0]
  progress = Progress(total, quiet)
  outputs: dict[str, np.ndarray] = {}
  engines = np.empty(total, dtype=object)
  chunk_counter = 0
  pending = []
  for group_index, (key, rows) in enumerate(groups.items()):
    names = PLAN_ETAS[key.plan]
    evaluator = None
    for chunk_index, start in enumerate(range(0, rows.size, chunk_size)):
      mine = chunk_counter % process_count == process_index
      chunk_counter += 1
      chunk_rows = rows[start:start + chunk_size]
      path = chunk_path(workdir, group_index, chunk_index)
      if os.path.exists(path):
        progress.update(chunk_rows.size, computed=False)
        continue
      if not mine:
        pending.append(path)
        continue
      if evaluator is None:
        lang = make_language(key.d)
        evaluate, engine = make_evaluator(lang, key, loss=loss, route=route,
                                          num_records=num_records, max_risk=max_risk)
        # Step-by-step runs gain nothing from vectorizing on a CPU (measured: 0.3-0.8x of a
        # loop, BUILD_NOTES.md), so there each device walks its configurations one by one.
        cpu_steps = engine == "steps" and devices[0].platform == "cpu"
        evaluator = chunked(evaluate, 1 if cpu_steps else batch_size, devices)
      padded = np.concatenate([chunk_rows, np.full(chunk_size - chunk_rows.size, chunk_rows[-1])])
      etas = np.stack([table[name][padded] for name in names], axis=1).astype(np.float64)
      result = evaluator(etas, table["seed"][padded].astype(np.uint32))
      result = {k: v[: chunk_rows.size] for k, v in result.items()}
      result["record_steps"] = result["record_steps"][0]  # the same for the whole group
      save_atomically(path, dict(result, rows=chunk_rows, engine=np.array(engine)))
      progress.update(chunk_rows.size)
  progress.close()
  if process_index != 0:
    return None
  _wait_for(pending, wait_timeout)
  risk_paths, record_steps = {}, {}
  for group_index, rows in enumerate(groups.values()):
    for chunk_index in range(math.ceil(rows.size / chunk_size)):
      with np.load(chunk_path(workdir, group_index, chunk_index)) as chunk:
        chunk = {name: chunk[name] for name in chunk.files}  # each access re-reads the zip
      chunk_rows = chunk["rows"]
      engines[chunk_rows] = str(chunk["engine"])
      for name in OUTPUTS:
        if name not in outputs:
          outputs[name] = np.zeros(total, dtype=chunk[name].dtype)
        outputs[name][chunk_rows] = chunk[name]
      risk_paths.update(zip(chunk_rows.tolist(), chunk["risk_path"]))
      record_steps.update(dict.fromkeys(chunk_rows.tolist(), chunk["record_steps"]))
  outputs["risk_path"], outputs["record_steps"] = risk_paths, record_steps
  return dict(table, **outputs, engine=engines)


def _wait_for(paths, timeout: float) -> None:
  """Blocks until every chunk file of the other processes exists."""
  deadline = time.time() + timeout
  while any(not os.path.exists(p) for p in paths):
    if time.time() > deadline:
      missing = [p for p in paths if not os.path.exists(p)]
      raise TimeoutError(f"{len(missing)} chunks of other processes never arrived, e.g. "
                         f"{missing[0]}.")
    time.sleep(0.2)
