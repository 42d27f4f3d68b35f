"""Table 1's exact rows: population gradient descent by an exact route (docs/theory.md §3, §5, §7).

For occurrence, OR and AND (the Laplace route) and even pairs (the transfer route) the
direct (α, β) model runs every plan from θ0 = 0 with the sampled rows' phase fractions, T
and step-size grids, on the exact population risk: no seeds and no held-out sample. Step
sizes are chosen by the rule of the sampled rows (experiments.table1_selection) with the
final exact risk as the loss and the final 0-1 error as the metric. The row is the
population dynamics that the sampled direct rows estimate, up to their truncation of the
length law at max_len (mass ≤ 1e-3, the task's `truncated_mass`).

Models, each with the CLS token (α_cls, β_cls) that the transformer's direct attention
attends to: occurrence, OR, AND: the plain model on d = config.width letters (one head: for
AND the sampled rows use two). Even pairs: the last-token query with first/last position
tables on {0, 1}, the one-head model that can express first = last (docs/theory.md §2b).

A user's language (config.language: a registered family, an automaton file or a factory,
lj.languages.from_spec) gets the same rows under the name of its atlas row, with the model
and schedule of config.task_settings.language.
"""

from __future__ import annotations

import jax
import numpy as np

import lagjax as lj
from experiments import table1_protocol, table1_selection
from lagjax import tasks
from lagjax.dynamics import train
from lagjax.models import direct


def language_and_theta0(name: str, config):
  """The task's language under its (untruncated) length law, and θ0 = 0 in its layout; for
  the rows of config.language (table1_protocol.language_task), that language and θ0 = 0 in
  the layout of task_settings.language."""
  if name == table1_protocol.language_task(config):
    lang = table1_protocol.user_language(config)
    return lang, lj.init_params(lang.d, **_language_layout(config))
  task = tasks.get_task(name, **table1_protocol.task_options(name, config))
  lang = task.extras["language"]
  return lang, lj.init_params(lang.d, **tasks.spec(name).direct_layout)


def _language_layout(config) -> dict:
  """The direct layout of config.language's rows: CLS, and the settings' query and tables."""
  settings = config.task_settings[table1_protocol.LANGUAGE_SETTINGS]
  return {"cls": True, "query": settings.query, "positions": settings.positional}


def describe_model(name: str, config) -> str:
  """The exact rows' model of task `name`, from its layout in the task registry (for
  config.language's rows: the language, its length law and spec, and its settings' layout)."""
  if name == table1_protocol.language_task(config):
    lang = language_and_theta0(name, config)[0]
    return (f"{lang.describe()} under {lang.length} (config.language = {config.language!r}), "
            + _describe_layout(_language_layout(config), lang.d))
  layout = dict(tasks.spec(name).direct_layout)
  d = config.width if "d" in tasks.options(name) else language_and_theta0(name, config)[0].d
  return _describe_layout(layout, d)


def _describe_layout(layout: dict, d: int) -> str:
  query, positions = layout.get("query", "cls"), layout.get("positions", "none")
  if (query, positions) == ("cls", "none"):
    return f"plain (α, β) with CLS, one head, d = {d}"
  tables = "no position tables" if positions == "none" else (
      f"{positions.replace('_', '/')} tables")
  return f"{query}-token query, {tables}, CLS, d = {d}"


def make_exact_runner(lang, theta0, plan: lj.plans.Plan, steps: int, record_every: int):
  """runs[s, c] over keys (S,) x PlanData (C, ...) for every plan with `plan`'s slots, in
  the form of task_train.make_grid_runner: the one training loop of lj.train
  (lagjax.dynamics.train.make_runner) on the exact route (the key is unused)."""
  partition = train.choose_partition(lang, theta0, plan, "auto")
  run = train.make_runner(lang, plan.slots(table1_protocol.NUM_SLOTS), partition,
                          num_steps=steps, layout=direct.layout(theta0),
                          record_every=record_every)
  grouped = direct.group_params(partition, theta0)
  over_plans = jax.vmap(lambda key, data: run(grouped, key, data), in_axes=(None, 0))
  return jax.jit(jax.vmap(over_plans, in_axes=(0, None)))


def run_exact(config, name: str, progress=None, shared=None):
  """(Selection, {row: Trajectory}) for every row of task `name` under exact population GD; shared
  (experiments.distributed.SharedChunks) splits the chunks over processes."""
  settings = table1_protocol.settings_of(config, name)
  lang, theta0 = language_and_theta0(name, config)
  first = table1_protocol.candidate_plan(config, name, table1_protocol.candidates(config, name)[0])
  runner = make_exact_runner(lang, theta0, first, settings.steps,
                             max(1, settings.steps // config.records))
  report = progress or (lambda done, total: None)
  runs, done = {}, [0]

  def evaluate(new):
    out = table1_protocol.evaluate_grid(runner, jax.random.key(config.seed)[None],
                                 table1_protocol.plan_data(config, name, new),
                                 config.chunk_size or len(new), 1,
                                 lambda k: report(done[0] + k, done[0] + len(new)), shared)
    out = jax.tree_util.tree_map(lambda x: x[:, 0], out)  # the one key
    done[0] += len(new)
    for i, candidate in enumerate(new):
      runs[candidate] = jax.tree_util.tree_map(lambda x, i=i: x[i], out)
    ok = ~out.diverged
    return np.where(ok, out.risk[:, -1], np.inf), np.where(ok, out.error[:, -1], np.inf)

  chosen = table1_selection.select(table1_protocol.plan_names(config), settings.eta_grid,
                                   settings.eta_cap, config.attention_multipliers, evaluate,
                                   settings.select_by)
  return chosen, {row: runs[candidate] for row, candidate in chosen.chosen.items()}
