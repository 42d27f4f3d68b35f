"""Engines: what runs a plan on a language, behind one contract (docs/theory.md section 5).

An engine declares what it supports,

    supports(lang, plan, loss, route) -> None, or one line naming what is missing,

and builds an `Evaluation`: evaluate(etas, key) -> Trajectory, with the plan's
step sizes etas (#phases,) traced (vmap it over a grid) and the key used by
empirical objectives. Every engine records on the same grid,
runner.record_grid(T, num_records), and returns token-group values
(lagjax/dynamics/trajectory.py), so callers never rescale, pad or re-derive.

- "closed_form": output phases in closed form, O(1) in their length, attention
  phases by exact steps (lagjax/dynamics/closed_form.py);
- "steps": the one training loop with exact population or empirical gradients
  (lagjax/dynamics/train.py), for every plan the loop can run;
- "flow": the plan's gradient flow (lagjax/dynamics/flow.py), a phase of k steps of size η
  read as duration k·η, recorded at the times of the same step grid. Only when asked for
  (engine="flow"): it is not GD, so "auto" never takes it.

`build(..., engine="auto")` takes the first engine of ORDER that supports the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from lagjax import risk as risk_lib
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.dynamics import closed_form, flow, plans, runner, train
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models import direct


class Evaluation(NamedTuple):
  """An engine built for one (language, plan structure) by `build` (docs/theory.md §5b).

  Attributes:
    engine: the engine's name.
    evaluate: (etas (#phases,), key) -> Trajectory; jittable and vmappable.
    partition: the token groups the Trajectory's values live on.
    record_steps: (R,) the record grid; uniform: (R,) mask of its uniformly spaced
      records (the lag metrics' grid, docs/theory.md §6).

  Example:
    >>> lang, plan = lj.occurrence(3), lj.plans.output_only(3.0, 4)
    >>> evaluation = lj.dynamics.engines.build(lang, plan, num_records=2)
    >>> evaluation.engine, evaluation.partition
    ('closed_form', Partition(blocks=((0,), (1, 2))))
    >>> evaluation.record_steps.tolist()  # {0, 2, 4} ∪ {1, 4}: uniform ∪ geometric
    [0, 1, 2, 4]
    >>> evaluation.uniform.tolist()
    [True, False, True, True]
  """

  engine: str
  evaluate: Callable
  partition: partition_lib.Partition
  record_steps: np.ndarray
  uniform: np.ndarray


class Engine(NamedTuple):
  """An entry of the registry ``ENGINES`` (docs/theory.md §5b): supports(lang, plan, loss,
  route) -> None | str; build(lang, plan, loss, route, num_records, max_risk) ->
  (evaluate, partition).

  Attributes:
    supports: (lang, plan, loss, route) -> None, or one line naming what is missing.
    build: (lang, plan, loss, route, num_records, max_risk) -> (evaluate, partition),
      with evaluate(etas, key) -> Trajectory.

  Example:
    >>> closed_form = lj.dynamics.engines.ENGINES["closed_form"]
    >>> closed_form.supports(lj.occurrence(3), lj.plans.joint(1.0, 10), "squared", "auto")
    "the closed form simulates output and attention phases; phase 0 trains 'both' (use lj.train)"
  """

  supports: Callable
  build: Callable


def _build_closed_form(lang, plan, loss, route, num_records, max_risk):
  del loss, route  # supports() has checked them
  partition = partition_lib.of_language(lang)
  trajectory = closed_form.make_trajectory(lang, plan, num_records=num_records,
                                           partition=partition, max_risk=max_risk)
  return (lambda etas, key: trajectory(etas)), partition


def _supports_steps(lang, plan, loss, route) -> str | None:
  try:
    risk_lib.resolve_route(lang, loss, route)
  except ValueError as error:
    return str(error).rstrip(".")
  if any(isinstance(phase.objective, plans.Empirical) for phase in plan.phases):
    return languages.missing(lang, languages.PresenceLabels,
                             "labels from token counts, which empirical objectives sample")
  return None


def _build_steps(lang, plan, loss, route, num_records, max_risk, num_points=None):
  partition = train.choose_partition(lang, direct.zero_params(lang.d), plan, "auto")
  run_plan = train.make_runner(lang, plan.slots(), partition, num_steps=plan.total_steps,
                               loss=loss, route=route, max_risk=max_risk,
                               record_steps=runner.record_grid(plan.total_steps, num_records),
                               num_points=num_points)
  theta0 = direct.zero_params(partition.num_groups)

  def evaluate(etas, key) -> Trajectory:
    run = run_plan(theta0, key, plan.data(etas=etas))
    grouped = dict(run.params, alpha=partition.group(run.params["alpha"]),
                   beta=partition.group(run.params["beta"]))
    # On the token groups, with the fields the closed form gives (no 0-1 error or margin).
    return Trajectory(params=grouped, steps=run.steps, risk=run.risk,
                      alpha=partition.group(run.alpha), beta=partition.group(run.beta),
                      diverged=run.diverged, diverged_step=run.diverged_step,
                      partition=partition)

  return evaluate, partition


def _supports_flow(lang, plan, loss, route) -> str | None:
  problem = plans.flow_problem(plan)
  if problem is not None:
    return problem
  try:
    risk_lib.resolve_route(lang, loss, route)
  except ValueError as error:
    return str(error).rstrip(".")
  return None


def _build_flow(lang, plan, loss, route, num_records, max_risk):
  partition = train.choose_partition(lang, direct.zero_params(lang.d), plan, "auto")
  record_steps = runner.record_grid(plan.total_steps, num_records)
  run_flow = flow.make_flow(lang, partition, num_phases=len(plan.phases), loss=loss,
                            route=route, record_steps=record_steps, max_risk=max_risk)
  theta0 = direct.zero_params(partition.num_groups)
  phase_steps = np.array([phase.steps for phase in plan.phases], np.float64)
  rates = plans.flow_form(plan).data().rates

  def evaluate(etas, key) -> Trajectory:
    del key  # the flow is deterministic
    etas = np.nan_to_num(plan.etas) if etas is None else etas
    data = plans.FlowData(durations=phase_steps * etas, rates=rates, step_sizes=etas)
    run = run_flow(theta0, data, (phase_steps * etas).sum(), -1.0, 0.5)
    return Trajectory(params=run.params, steps=run.steps, risk=run.risk,
                      alpha=partition.group(run.alpha), beta=partition.group(run.beta),
                      diverged=run.diverged, diverged_step=run.diverged_step, time=run.time,
                      summary=run.summary, partition=partition)

  return evaluate, partition


ENGINES = {"closed_form": Engine(closed_form.supports, _build_closed_form),
           "steps": Engine(_supports_steps, _build_steps),
           "flow": Engine(_supports_flow, _build_flow)}
# "auto" takes the first engine, in this order, that supports the plan ("flow" only when
# asked for: it runs the plan's flow, not its GD steps).
ORDER = ("closed_form", "steps")


def choose(lang: languages.Language, plan: plans.Plan, loss="squared", route: str = "auto",
           engine: str = "auto") -> str:
  """The engine to use: `engine` itself if it supports the plan, or for "auto" the first of
  ORDER that does; otherwise a ValueError naming what each one misses (docs/theory.md §5b).

  Args:
    lang: the language (§1b).
    plan: the plan (its structure).
    loss: the loss ("squared", "logistic" or a callable).
    route: the population route ("auto" or a name).
    engine: "auto", "closed_form", "steps" or "flow".

  Returns:
    The engine's name, a key of ``ENGINES``.

  Raises:
    ValueError: when the engine asked for, or every engine for "auto", refuses the plan.

  Example:
    >>> lang = lj.occurrence(3)
    >>> lj.dynamics.engines.choose(lang, lj.plans.three_phase(1.0, 1.0, 1.0, 10))
    'closed_form'
    >>> lj.dynamics.engines.choose(lang, lj.plans.joint(1.0, 10))  # "both": the loop only
    'steps'
    >>> lj.dynamics.engines.choose(lang, lj.plans.joint(1.0, 10), engine="closed_form")
    Traceback (most recent call last):
    ...
    ValueError: engine 'closed_form' cannot run plan 'joint': the closed form simulates ...
  """
  languages.check_language(lang, "an engine")
  if engine != "auto":
    if engine not in ENGINES:
      raise ValueError(f"engine must be one of {('auto', *ENGINES)}; got {engine!r}.")
    reason = ENGINES[engine].supports(lang, plan, loss, route)
    if reason is not None:
      raise ValueError(f"engine {engine!r} cannot run plan {plan.name!r}: {reason}.")
    return engine
  reasons = {name: ENGINES[name].supports(lang, plan, loss, route) for name in ORDER}
  chosen = next((name for name, reason in reasons.items() if reason is None), None)
  if chosen is None:
    raise ValueError(f"no engine runs plan {plan.name!r} on {lang.describe()}: "
                     + "; ".join(f"{name}: {reason}" for name, reason in reasons.items()) + ".")
  return chosen


def build(lang: languages.Language, plan: plans.Plan, *, loss="squared", route: str = "auto",
          num_records: int = 64, max_risk: float = runner.MAX_VALUE,
          engine: str = "auto", num_points: int | None = None) -> Evaluation:
  """Builds the chosen engine's evaluator for `plan`'s structure from θ0 = 0
  (docs/theory.md §5b).

  Args:
    lang, plan: the language and the plan (its step sizes are placeholders: evaluate
      takes them).
    loss, route: the loss and the population route of the objective.
    num_records: K of the record grid runner.record_grid(T, K).
    max_risk: the divergence cap (docs/theory.md §5).
    engine: "auto", "closed_form" or "steps".
    num_points: the static quadrature grid of the steps engine's route (risk/coverage.py;
      None for the route's default); other engines take their default.

  Returns:
    An Evaluation; its evaluate(etas (#phases,), key) -> Trajectory is jittable and
    vmappable over etas.

  Raises:
    ValueError: when no engine (or not the one asked for) runs the plan (`choose`).

  Example:
    One output step from zero gives β_a = η/d and β_σ = -η/(d(d-1)) (§4):

    >>> lang, plan = lj.occurrence(3), lj.plans.output_only(3.0, 4)
    >>> evaluation = lj.dynamics.engines.build(lang, plan, num_records=2)
    >>> evaluate = jax.jit(jax.vmap(evaluation.evaluate, in_axes=(0, None)))
    >>> runs = evaluate(jnp.array([[1.5], [3.0]]), jax.random.key(0))  # two step sizes
    >>> runs.steps.shape, runs.beta.shape  # (etas, records[, groups])
    ((2, 4), (2, 4, 2))
    >>> np.round(np.asarray(runs.beta[:, 1]), 6).tolist()  # at t = 1, groups {0}, {1, 2}
    [[0.5, -0.25], [1.0, -0.5]]
  """
  name = choose(lang, plan, loss, route, engine)
  grid = {"num_points": num_points} if num_points is not None and name == "steps" else {}
  evaluate, partition = ENGINES[name].build(lang, plan, loss, route, num_records, max_risk,
                                            **grid)
  return Evaluation(name, evaluate, partition,
                    runner.record_grid(plan.total_steps, num_records),
                    runner.uniform_records(plan.total_steps, num_records))


__all__ = ["ENGINES", "ORDER", "Engine", "Evaluation", "Trajectory", "build", "choose"]
