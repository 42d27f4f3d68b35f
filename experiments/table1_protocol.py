"""The Table 1 protocol: task settings, models, plans, the choice of η (docs/theory.md §7).

Used by the experiments.table1 binary (and its benchmark and tests) without
defining any flag:

- validate(config): every field the run reads, errors naming the field;
- build(name, config): the task and its model (transformer, direct (α, β), SLR);
- make_plan(name, eta, steps, optimizer): the five plans with the config's phase lengths;
- run_cell(...): η chosen on validation seeds (grid x seeds in one vmapped call),
  then the test seeds at that η (one vmapped call).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app

import lagjax as lj
from lagjax import models, tasks, validation
from lagjax.models import slr, transformer
from lagjax.task_train import make_batched_runner

LOWER_IS_BETTER = {"accuracy": False, "risk": True, "kl_to_bayes": True}
OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}
SETTINGS_FIELDS = ("model", "heads", "query", "positional", "max_len", "optimizer", "steps",
                   "eta_grid")
# Models per task: the general transformer, the direct (α, β) model of docs/theory.md section 2
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
    if not (validation.is_int(config[field]) and config[field] >= minimum):
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
    if not (validation.is_int(settings.heads) and settings.heads >= 1):
      _fail(f"{field}.heads", "an integer >= 1", settings.heads)
    if settings.query not in transformer.QUERIES:
      _fail(f"{field}.query", f"one of {transformer.QUERIES}", settings.query)
    if settings.positional not in transformer.POSITIONAL:
      _fail(f"{field}.positional", f"one of {tuple(transformer.POSITIONAL)}", settings.positional)
    if settings.max_len is not None and not (validation.is_int(settings.max_len)
                                             and settings.max_len >= 1):
      _fail(f"{field}.max_len", "None (the task's default) or an integer >= 1", settings.max_len)
    if settings.optimizer not in OPTIMIZERS:
      _fail(f"{field}.optimizer", f"one of {tuple(OPTIMIZERS)}", settings.optimizer)
    if not (validation.is_int(settings.steps) and settings.steps >= 4):
      _fail(f"{field}.steps", "an integer >= 4 (three_phase needs T/4 >= 1)", settings.steps)
    grid = settings.eta_grid
    if not (isinstance(grid, tuple | list) and grid and all(
        isinstance(eta, float | int) and math.isfinite(eta) and eta > 0 for eta in grid)):
      _fail(f"{field}.eta_grid", "a non-empty tuple of finite step sizes > 0", grid)
    if name == "icl_bigram":
      if not (validation.is_int(settings.k) and settings.k >= 2):
        _fail(f"{field}.k", "an integer >= 2", settings.k)
      if not (isinstance(settings.mean_length, float | int) and settings.mean_length > 1):
        _fail(f"{field}.mean_length", "a number > 1", settings.mean_length)


def build(name: str, config):
  """(task, lagjax.models.Model) for a task name and its settings."""
  settings = config.task_settings[name]
  if name == "slr":
    task = tasks.get_task("slr", m=config.width, max_len=settings.max_len)
    return task, models.Model(
        lambda key: (slr.init(key, config.width, config.init_scale), {}),
        lambda params, fixed, batch: slr.apply(params, batch.inputs, batch.mask), slr.GROUPS)
  if settings.model == "direct":
    task = tasks.get_task(name, d=config.width, max_len=settings.max_len)
    return task, models.Model(
        lambda key: (lj.init_params(config.width), {}),
        lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask),
        models.direct.GROUPS)
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
  return task, models.Model(
      lambda key: transformer.init(key, model, config.init_scale),
      lambda params, fixed, batch: transformer.apply(params, fixed, model, batch.inputs,
                                                     batch.mask), transformer.GROUPS)


# Phase lengths of the multi-phase plans as fractions of T (the last phase takes the rest).
PHASE_FRACTIONS = {"three_phase": (4, 4), "attention_first": (2,)}


def make_plan(name: str, eta: float, steps: int, optimizer: str) -> lj.plans.Plan:
  """The plan `name` with step size eta in every phase (phase lengths in the config doc)."""
  spec = lj.plans.get_plan(name)
  earlier = tuple(steps // k for k in PHASE_FRACTIONS.get(name, ()))
  return spec.build({eta_name: eta for eta_name in spec.step_sizes}, steps - sum(earlier),
                    phase_steps=earlier, optimizer=OPTIMIZERS[optimizer])


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
  task, model = built
  settings = config.task_settings[name]
  grid = [float(eta) for eta in settings.eta_grid]
  plan = make_plan(plan_name, grid[0], settings.steps, settings.optimizer)
  runner = make_batched_runner(
      task, model, plan.slots(), num_steps=plan.total_steps, batch_size=config.batch_size,
      test_size=config.test_size, record_every=max(1, settings.steps // config.records))
  phases = len(plan.phases)

  def data(etas):
    return jax.vmap(lambda row: plan.data(etas=row))(etas)

  seeds = config.validation_seeds
  keys = jnp.tile(jax.random.split(validation_key, seeds), len(grid))
  etas = jnp.repeat(jnp.asarray(grid), seeds)[:, None] * jnp.ones(phases)
  final, ok = final_scores(runner(keys, data(etas)))
  lower = LOWER_IS_BETTER[task.metric_name]
  # Diverged validation seeds count as the worst score, so a diverging η loses.
  scores = np.where(ok, final, np.inf if lower else -np.inf).reshape(len(grid), seeds).mean(1)
  eta = grid[int(np.argmin(scores) if lower else np.argmax(scores))]
  keys = jax.random.split(test_key, config.num_seeds)
  return eta, runner(keys, data(jnp.full((config.num_seeds, phases), eta)))
