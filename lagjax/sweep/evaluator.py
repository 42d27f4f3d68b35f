"""The evaluator of one static group of a sweep (docs/theory.md §5b) and its sharded chunk run.

make_evaluator picks the engine (closed form where the plan allows it, else the scan of
lj.train; lagjax/dynamics/engines.py) and summarises a run in OUTPUTS; chunked compiles it
over a chunk of step sizes and seeds, split over the local devices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lagjax import models
from lagjax.data import languages
from lagjax.dynamics import engines, metrics, plans, run_label, runner, train
from lagjax.models import direct
from lagjax.risk import ROUTES, coverage, error, resolve_route
from lagjax.risk import risk_fn as build_route
from lagjax.sweep.table import GroupKey

OUTPUTS = ("final_risk", "error", "margin", "lag_gap", "diverged", "diverged_step")
# With sharpness=True (docs/theory.md §5d): the run's regime (an index into
# run_label.LABELS) and its period, its largest and final λ_max, the first record step
# with η·λ_max > 2 (-1 if none), and λ_max at θ0 (2/λ_max(θ0) bounds the first step size).
SHARPNESS_OUTPUTS = ("label", "period", "max_sharpness", "end_sharpness",
                     "first_unstable_step", "initial_sharpness")


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
    evaluate: (etas (P,), seed) -> dict of OUTPUTS, "risk_path" (R,) at record_steps and
      "grid_needed", the quadrature nodes the final state needs (more than num_points:
      the run stopped because of its grid, §3a); jittable and vmappable.
    engine: the engine's name, "closed_form" or "steps" (lagjax/dynamics/engines.py).
    record_steps: (R,) the record grid, runner.record_grid(T, K).
    num_points: the static quadrature grid of the steps engine's route (risk/coverage.py),
      or None (the engine's default, or a route without a grid).

  Example:
    >>> key = lj.sweep.GroupKey("output_only", d=3, steps=2, n_samples=0)
    >>> evaluator = lj.sweep.make_evaluator(lj.occurrence(3), key, num_records=2)
    >>> evaluator.engine, evaluator.record_steps.tolist()
    ('closed_form', [0, 1, 2])
  """

  evaluate: Callable
  engine: str  # the engine's name (lagjax/dynamics/engines.py)
  record_steps: np.ndarray
  num_points: int | None = None


def make_evaluator(lang: languages.Language, key: GroupKey, *, loss: str = "squared",
                   route: str = "auto", num_records: int = 64,
                   max_risk: float = runner.MAX_VALUE,
                   num_points: int | None = None, engine: str = "auto",
                   sharpness: bool = False) -> Evaluator:
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
    num_points: the static quadrature grid of the steps engine (risk/coverage.py); None
      for coverage.default_size where its route has a grid.
    engine: "auto" (closed form, else steps), or an engine of engines.ENGINES ("flow").
    sharpness: also give SHARPNESS_OUTPUTS: λ_max at every record, from the recorded
      (α, β) on the token groups by train.stepped_sharpness (the parameters the step
      there trains, per-token metric), and run_label.label_code on the risk path. The
      label reads the record grid: rises, catapults and divergence are seen between
      records, and a period counts records (steps where the grid is every step, T ≤ K).

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
  plan = make_plan(key.plan, key.steps, key.n_samples)
  if num_points is None and grid_route(lang, plan, loss, route):
    partition = train.choose_partition(lang, direct.zero_params(lang.d), plan, "auto")
    num_points = coverage.default_size(lang, coverage.windows(partition.num_groups))
  evaluation = engines.build(lang, plan, loss=loss, route=route, num_records=num_records,
                             max_risk=max_risk, num_points=num_points, engine=engine)
  regime = (regime_outputs(lang, plan, evaluation.partition, loss, route, num_points)
            if sharpness else None)
  if evaluation.engine != "steps":
    num_points = None
  error_report, _ = error.best_route(lang, evaluation.partition)
  letters = lang.margin_letters()
  grid_needed = coverage.needed_fn(lang)

  def evaluate(etas, seed):
    run = evaluation.evaluate(etas, jax.random.key(seed))
    out = {"final_risk": run.risk[-1], "error": error_report(run.params)["error"],
           "margin": direct.attention_margin({"alpha": run.expand(run.alpha[-1])}, letters),
           # The lag gap is a mean over t: over the uniformly spaced records only.
           "lag_gap": run.lag(evaluation.uniform).lag_gap,
           "diverged": run.diverged, "diverged_step": run.diverged_step, "risk_path": run.risk,
           "grid_needed": grid_needed(run.params)}
    if regime is not None:
      out.update(regime(run, etas))
    return out

  return Evaluator(evaluate, evaluation.engine, evaluation.record_steps, num_points)


def regime_outputs(lang: languages.Language, plan: plans.Plan, partition, loss, route,
                   num_points) -> Callable:
  """(run, etas) -> the SHARPNESS_OUTPUTS of a sweep run on `partition` (§5d).

  λ_max at each record is train.stepped_sharpness of the population risk at the recorded
  (α, β) (θ0 = 0 has no CLS or position tables, so they are the whole θ), on the groups
  the step at that record trains; η at a record is train.record_step_sizes'.

  Args:
    lang: the language.
    plan: the group's plan (placeholder step sizes: etas replace them).
    partition: the token groups of the engine's Trajectory.
    loss, route: the population risk's loss and route.
    num_points: its quadrature grid (None: the route's default).

  Returns:
    regime(run, etas) -> dict of SHARPNESS_OUTPUTS, jittable and vmappable.

  Example:
    >>> lang, plan = lj.occurrence(3), lj.sweep.make_plan("output_only", 8)
    >>> partition = lj.partition.of_language(lang)
    >>> regime = lj.sweep.evaluator.regime_outputs(lang, plan, partition, "squared",
    ...                                            "auto", None)
    >>> etas = jnp.array([1.0])
    >>> run = lj.dynamics.engines.build(lang, plan, num_records=8).evaluate(etas, None)
    >>> out = regime(run, etas)
    >>> lj.dynamics.run_label.LABELS[int(out["label"])], round(float(out["max_sharpness"]), 6)
    ('monotone', 0.333333)
  """
  chosen = resolve_route(lang, loss, route)
  risk = build_route(lang, loss=loss, route=chosen, partition=partition,
                     **coverage.grid_options(chosen, num_points)).risk
  sizes = jax.numpy.asarray(partition.sizes)
  slots = plan.slots()
  labels = models.group_labels(direct.PARAM_GROUPS, direct.zero_params(partition.num_groups))

  def regime(run, etas):
    data = plan.data(etas=etas)
    trains = data.trains[train.step_phase(data, run.steps)]

    def top(alpha, beta, trains):
      return train.stepped_sharpness(risk, {"alpha": alpha, "beta": beta}, 1, sizes=sizes,
                                     trains=trains, labels=labels)[0]

    sharpness = jax.vmap(top)(run.alpha, run.beta, trains)
    step_sizes = train.record_step_sizes(slots, data, run.steps)
    label = run_label.label_code(run.risk, diverged=run.diverged, sharpness=sharpness,
                                 etas=step_sizes)
    return {"label": label.code, "period": label.period,
            **metrics.sharpness_summary(sharpness, run.steps, step_sizes),
            "initial_sharpness": sharpness[0]}

  return regime


def grid_route(lang: languages.Language, plan: plans.Plan, loss, route) -> bool:
  """Whether the steps engine would run `plan` on a route with a quadrature grid (§3a).

  Args:
    lang: the language.
    plan: the plan.
    loss: the loss.
    route: the risk route.

  Returns:
    True for the Laplace and transfer routes (and any route declaring quadrature).

  Example:
    >>> plan = lj.sweep.make_plan("joint", 2)
    >>> lj.sweep.evaluator.grid_route(lj.occurrence(3), plan, "squared", "auto")
    True
    >>> lj.sweep.evaluator.grid_route(lj.occurrence(3), plan, "logistic", "auto")
    False
  """
  del plan
  try:
    name = resolve_route(lang, loss, route)
  except ValueError:
    return False
  return ROUTES[name].quadrature


def chunked(evaluate: Callable, batch_size: int, devices, manual: bool = True) -> Callable:
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
    manual: split the chunk by shard_map; False leaves the split to the compiler (jit on
      the sharded chunk), for evaluators that cannot run under shard_map (the flow engine:
      lineax's implicit solves reject its manual axes).

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
                                   check_vma=False) if manual else per_device)
  sharding = NamedSharding(mesh, split)

  def run(etas, seeds):
    out = compiled(jax.device_put(etas, sharding), jax.device_put(seeds, sharding))
    return lambda: {k: np.asarray(v) for k, v in out.items()}

  return run


__all__ = ["OUTPUTS", "SHARPNESS_OUTPUTS", "Evaluator", "chunked", "grid_route",
           "make_evaluator", "make_plan", "regime_outputs"]
