"""The Table 1 protocol: task settings, models, plans, the choice of η (docs/theory.md §7).

Used by the experiments.table1 binary (and its benchmark and tests) without
defining any flag:

- validate(config): every field the run reads, errors naming the field;
- build(name, config, attention): the task and its model (transformer with KQV or
  direct attention, direct (α, β), SLR);
- candidates(config, name): every (row, plan, step sizes) the validation tries first:
  one η for joint / output-only / attention-only; (η_out, η_attn = m·η_out) for the
  two-step-size plans, m from config.attention_multipliers, whose one-η rows keep m = 1;
- run_task(...): candidates x validation seeds in rounds until every choice is bracketed
  (experiments.table1_selection), then the chosen step sizes x test seeds, through ONE
  compiled runner per (task, attention): every plan is data (three padded slots),
  evaluated in fixed blocks of (validation_seeds seeds x chunk_size plans). The plans of
  a block share each seed's minibatches, sampled once (task_train.make_grid_runner).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import numpy as np
import optax
from absl import app

import lagjax as lj
from experiments import atlas_report
from experiments import table1_selection as selection
from experiments.table1_selection import PER_PHASE  # noqa: F401 (re-exported)
from lagjax import models, tasks, validation
from lagjax.dynamics.task_train import make_grid_runner
from lagjax.models import direct, slr, transformer

NUM_SLOTS = 3  # the longest plan (three_phase); shorter plans are padded
# config.task_settings' block of config.language's exact rows, and its fields.
LANGUAGE_SETTINGS = "language"
LANGUAGE_FIELDS = ("d", "query", "positional", "optimizer", "steps", "eta_grid", "eta_cap",
                   "select_by")

# Tasks with exact rows (population GD by an exact route, experiments.table1_exact): the
# language tasks of the task registry.
EXACT_TASKS = tasks.names(language=True)
# Positional options under which the transformer reads counts (and the first and last token).
COUNT_POSITIONS = ("none", "first_last")
LOWER_IS_BETTER = {"accuracy": False, "risk": True, "kl_to_bayes": True}
OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}
SETTINGS_FIELDS = ("model", "heads", "query", "positional", "max_len", "optimizer", "steps",
                   "eta_grid", "eta_cap", "select_by", "exact")
ATTENTIONS = transformer.ATTENTIONS
# Models per task: the general transformer, the direct (α, β) model of docs/theory.md section 2
# (from θ0 = 0, the theory's setting; languages only) and the SLR model of section 7.
# The direct model here is the plain layout (CLS query, no positions): the language tasks whose
# exact layout (lj.tasks.TaskSpec.direct_layout) is that one. The task registry does not
# declare a task's input kind, so the SLR model's tasks (feature vectors) are named.
FEATURE_TASKS = ("slr",)
MODELS = {"transformer": tuple(name for name in tasks.names() if name not in FEATURE_TASKS),
          "direct": tuple(name for name in tasks.names(language=True)
                          if dict(tasks.spec(name).direct_layout) == {"cls": True}),
          "slr": FEATURE_TASKS}


# The smoke variant's own settings of tasks with long strings (config data by task name).
QUICK_SETTINGS = {"icl_bigram": dict(k=4, mean_length=8, max_len=16),
                  "even_pairs": dict(max_len=16)}


def quick(config) -> None:
  """The CI smoke variant (configs/table1.py:quick): small width, few steps and seeds; applied
  when the config is built, before the command line's overrides."""
  config.width, config.batch_size, config.records, config.test_size = 6, 16, 4, 128
  config.validation_seeds, config.num_seeds = 1, 2
  config.attention_multipliers = (1.0, 100.0)
  config.xla_backend_optimization_level = 0  # 20 steps: compiling is the time, not running
  for name, settings in config.task_settings.items():
    settings.steps = 20
    settings.eta_grid = settings.eta_grid[1:2] or settings.eta_grid[:1]
    settings.update(QUICK_SETTINGS.get(name, {}))


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
  multipliers = config.attention_multipliers
  if not (isinstance(multipliers, tuple | list) and 1.0 in multipliers and all(
      isinstance(m, float | int) and math.isfinite(m) and m > 0 for m in multipliers)):
    _fail("attention_multipliers", "a tuple of finite multiples m > 0 of η_out that includes 1 "
          "(the one-η rows)", multipliers)
  if not (isinstance(config.attention_variants, tuple | list) and config.attention_variants
          and all(a in ATTENTIONS for a in config.attention_variants)):
    _fail("attention_variants", f"a non-empty tuple of {ATTENTIONS}", config.attention_variants)
  for plan_name, fractions in config.phase_fractions.items():
    phases = len(lj.plans.get_plan(plan_name).groups) if plan_name in lj.plans.PLANS else -1
    if not (isinstance(fractions, tuple | list) and len(fractions) == phases - 1 and all(
        isinstance(f, float) and f > 0 for f in fractions) and sum(fractions) < 1):
      _fail(f"phase_fractions.{plan_name}", "fractions of T > 0, one per phase but the last, "
            "summing to < 1, for a plan with several phases", fractions)
  if not isinstance(config.count_form, bool):
    _fail("count_form", "True (train order-free models on count vectors) or False (padded "
          "tokens)", config.count_form)
  if not (validation.is_int(config.block_threads) and config.block_threads >= 1):
    _fail("block_threads", "an integer >= 1 ((task, attention) blocks run at once)",
          config.block_threads)
  level = config.xla_backend_optimization_level
  if level is not None and not (validation.is_int(level) and 0 <= level <= 3):
    _fail("xla_backend_optimization_level", "None (XLA's default) or an integer in 0..3 "
          "(0 compiles fastest)", level)
  if not (validation.is_int(config.chunk_size) and config.chunk_size >= 0):
    _fail("chunk_size", "an integer >= 0, plans per compiled call (0: the table rows of a task)",
          config.chunk_size)
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
    _check_schedule(field, settings)
    if settings.exact not in (True, False) or (settings.exact and name not in EXACT_TASKS):
      _fail(f"{field}.exact", f"True for a task with an exact route {EXACT_TASKS} or False",
            settings.exact)
    if "k" in tasks.options(name):  # a task of k tokens (the ICL bigram)
      if not (validation.is_int(settings.k) and settings.k >= 2):
        _fail(f"{field}.k", "an integer >= 2", settings.k)
      if not (isinstance(settings.mean_length, float | int) and settings.mean_length > 1):
        _fail(f"{field}.mean_length", "a number > 1", settings.mean_length)
  _check_language_block(config)


def _check_schedule(field: str, settings) -> None:
  """The optimizer, T, step-size grid, cap and selection key of a settings block."""
  if settings.optimizer not in OPTIMIZERS:
    _fail(f"{field}.optimizer", f"one of {tuple(OPTIMIZERS)}", settings.optimizer)
  if not (validation.is_int(settings.steps) and settings.steps >= 4):
    _fail(f"{field}.steps", "an integer >= 4 (three_phase needs T/4 >= 1)", settings.steps)
  grid = settings.eta_grid
  if not (isinstance(grid, tuple | list) and grid and all(
      isinstance(eta, float | int) and math.isfinite(eta) and eta > 0 for eta in grid)):
    _fail(f"{field}.eta_grid", "a non-empty tuple of finite step sizes > 0", grid)
  cap = settings.eta_cap
  if not (isinstance(cap, tuple | list) and len(cap) == 2 and all(
      isinstance(eta, float | int) and math.isfinite(eta) and eta > 0 for eta in cap)
          and cap[0] <= min(grid) and cap[1] >= max(grid)):
    _fail(f"{field}.eta_cap", f"(low, high), finite step sizes > 0 with low <= min(eta_grid) "
          f"and high >= max(eta_grid) = ({min(grid):g}, {max(grid):g}): the grid extends "
          "within it", cap)
  if settings.select_by not in selection.SELECT_BY:
    _fail(f"{field}.select_by", f"one of {selection.SELECT_BY} (the other breaks ties)",
          settings.select_by)


def _check_language_block(config) -> None:
  """config.language's spec form, its rows' name and its settings (the language itself is
  built by validate_language, once float64 is on)."""
  if not isinstance(config.language, str):
    _fail("language", "a language spec, 'name[:args]', 'path.json' or 'module:function' "
          "(lj.languages.from_spec), or '' for none", config.language)
  if not config.language:
    return
  name = language_task(config)
  if name in config.tasks:
    _fail("language", f"a language whose rows are not named like a task of config.tasks "
          f"(they would be named {name!r}): rename the file or the function, or drop {name!r} "
          "from config.tasks", config.language)
  field = f"task_settings.{LANGUAGE_SETTINGS}"
  if LANGUAGE_SETTINGS not in config.task_settings:
    _fail("task_settings", f"a block {LANGUAGE_SETTINGS!r} with the fields {LANGUAGE_FIELDS} "
          "when config.language is set", sorted(config.task_settings))
  settings = config.task_settings[LANGUAGE_SETTINGS]
  for key in LANGUAGE_FIELDS:
    if key not in settings:
      _fail(field, f"a block with the fields {LANGUAGE_FIELDS}", sorted(settings))
  if settings.d is not None and not (validation.is_int(settings.d) and settings.d >= 2):
    _fail(f"{field}.d", "None (the language's own alphabet size) or an integer >= 2",
          settings.d)
  if settings.query not in direct.QUERIES:
    _fail(f"{field}.query", f"one of {direct.QUERIES}", settings.query)
  if settings.positional not in direct.POSITIONS:
    _fail(f"{field}.positional", f"one of {direct.POSITIONS}", settings.positional)
  _check_schedule(field, settings)


def language_task(config) -> str | None:
  """The task column of config.language's exact rows, named like its atlas row: the file's
  stem, the factory's function, 'tomita_3' for 'tomita:3'; None without config.language."""
  return atlas_report.language_name(config.language) if config.language else None


def settings_of(config, name: str):
  """The settings block of task `name`, or task_settings.language for the rows of
  config.language (name == language_task(config))."""
  if config.language and name == language_task(config):
    return config.task_settings[LANGUAGE_SETTINGS]
  return config.task_settings[name]


def user_language(config):
  """config.language built by lj.languages.from_spec at task_settings.language.d (None: its
  own alphabet size)."""
  d = config.task_settings[LANGUAGE_SETTINGS].d
  try:
    return lj.languages.from_spec(config.language, d)
  except (ValueError, TypeError) as error:
    hint = (" (a family or factory that takes an alphabet size needs "
            "--config.task_settings.language.d)" if d is None and "'d'" in str(error) else "")
    raise ValueError(f"config.language: {error}{hint}") from None


def validate_language(config):
  """config.language's language, built once float64 is on (experiments.common.start's
  validate); None without one. A spec that does not build is one line naming the field."""
  return user_language(config) if config.language else None


def task_options(name: str, config) -> dict:
  """The factory options of task `name` from its settings: max_len, d = config.width for a
  task of width d, and k with a geometric length law of mean config's mean_length for a
  task of k tokens (lj.tasks.options says which a task takes)."""
  settings = config.task_settings[name]
  options = {"max_len": settings.max_len}
  if "d" in tasks.options(name):
    options["d"] = config.width
  if "k" in tasks.options(name):
    options.update(k=settings.k, length=lj.geometric(1.0 / settings.mean_length))
  return options


def build(name: str, config, attention: str = "kqv"):
  """(task, lagjax.models.Model) for a task name, its settings and the transformer's
  attention parameterisation ("kqv" or "direct"; unused by the direct and SLR models).

  With config.count_form, a model that reads only token counts (CLS query, no positions;
  the direct model) trains on count vectors, and one that reads counts plus the first and
  last token (first/last markers, last-token query) on counts and ends
  (lagjax.tasks.count_form): the same strings, labels and random stream as the padded
  token form, at V or V + 2 entries per string instead of max_len.
  """
  settings = config.task_settings[name]
  if settings.model == "slr":
    task = tasks.get_task(name, m=config.width, max_len=settings.max_len)
    return task, models.Model(
        lambda key: (slr.init(key, config.width, config.init_scale), {}),
        lambda params, fixed, batch: slr.apply(params, batch.inputs, batch.mask), slr.PARAM_GROUPS)
  if settings.model == "direct":
    task = tasks.get_task(name, **task_options(name, config))
    if config.count_form:
      return tasks.count_form(task), models.Model(
          lambda key: (lj.init_params(config.width), {}),
          lambda params, fixed, batch: lj.forward_counts(params, batch.multiplicity),
          models.direct.PARAM_GROUPS)
    return task, models.Model(
        lambda key: (lj.init_params(config.width), {}),
        lambda params, fixed, batch: lj.forward_tokens(params, batch.inputs, batch.mask),
        models.direct.PARAM_GROUPS)
  task = tasks.get_task(name, **task_options(name, config))
  # The task declares its vocabulary and logits, the registry whether the model also reads
  # the previous token (lj.tasks.TaskSpec).
  model = transformer.TransformerConfig(
      max_len=task.max_len, heads=settings.heads, query=settings.query,
      positional=settings.positional, attention=attention, vocab=task.input_dim,
      outputs=task.n_outputs, previous_token=tasks.spec(name).previous_token)
  if config.count_form and not model.previous_token and model.positional in COUNT_POSITIONS:
    task = tasks.count_form(task, ends=not (model.query == "cls" and model.positional == "none"))
  return task, models.Model(
      lambda key: transformer.init(key, model, config.init_scale),
      lambda params, fixed, batch: transformer.apply(params, fixed, model, batch.inputs,
                                                     batch.mask, batch.multiplicity),
      transformer.PARAM_GROUPS)


def attention_variants(config, name: str) -> tuple[str, ...]:
  """The transformer's attention parameterisations to report for task `name`."""
  if config.task_settings[name].model != "transformer":  # the SLR and direct models
    return ("kqv",)
  return tuple(config.attention_variants)


def make_plan(name: str, etas: dict, steps: int, optimizer: str,
              fractions=()) -> lj.plans.Plan:
  """The registered plan `name` with step sizes etas (by name) and T = steps in all.

  fractions: the lengths of the phases before the last, as fractions of T (floored).
  """
  earlier = tuple(int(steps * f) for f in fractions)
  return lj.plans.get_plan(name).build(etas, steps - sum(earlier), phase_steps=earlier,
                                       optimizer=OPTIMIZERS[optimizer])


def candidate_plan(config, name: str, candidate) -> lj.plans.Plan:
  """The plan of a candidate of task `name`: its step sizes, the task's T and optimizer, the
  config's phase fractions."""
  settings = settings_of(config, name)
  return make_plan(candidate.plan_name, candidate.etas(), settings.steps, settings.optimizer,
                   tuple(config.phase_fractions.get(candidate.plan_name, ())))


def plan_data(config, name: str, found) -> lj.plans.PlanData:
  """The candidates' plans padded to NUM_SLOTS and stacked (C, ...), in numpy: stacking with
  jnp would compile one small XLA program per shape."""
  rows = [candidate_plan(config, name, c).data(NUM_SLOTS) for c in found]
  return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *rows)


def plan_names(config) -> tuple[str, ...]:
  """The plans run under every attention parameterisation: config.plans."""
  return tuple(config.plans)


def table_rows(config) -> list[str]:
  """The plan rows of the table, in order: each plan, then its per-phase row if it has one."""
  return [row for plan_name in plan_names(config) for row in selection.rows_of(plan_name)]


def candidates(config, name: str) -> list[selection.Candidate]:
  """The candidates of task `name` on its first grid (before any bracketing)."""
  grid = settings_of(config, name).eta_grid
  return selection.candidates({p: grid for p in plan_names(config)},
                              config.attention_multipliers)


def final_scores(run):
  """Final held-out metric per run (any leading axes) and which runs did not diverge."""
  final = np.asarray(run.test_metric[..., -1])
  return final, ~np.asarray(run.diverged) & np.isfinite(final)


def mean_std(values, ok) -> tuple:
  """(mean, std) over the runs in `ok`, ("", "") when none is."""
  values = np.asarray(values)[ok]
  return (float(values.mean()), float(values.std())) if values.size else ("", "")


def evaluate_grid(runner: Callable, keys, data, chunk: int, seed_block: int, progress=None,
                  shared=None):
  """runner over seeds keys (S,) x plans data (C, ...) in blocks of seed_block seeds x chunk
  plans (the last ones padded by repetition): one shape, so one compilation, whatever S and
  C. Returns the runs with leading axes (C, S). progress(runs done) after each block. With
  `shared` (experiments.distributed.SharedChunks) the blocks are split over processes."""
  seeds, plans = keys.shape[0], jax.tree_util.tree_leaves(data)[0].shape[0]
  seed_index = np.minimum(np.arange(-(-seeds // seed_block) * seed_block), seeds - 1)
  plan_index = np.minimum(np.arange(-(-plans // chunk) * chunk), plans - 1)
  # Index on the host: eager jnp gathers would each compile a small XLA program.
  keys = keys if seed_index.size == seeds else keys[seed_index]
  data = jax.tree_util.tree_map(lambda x: np.asarray(x)[plan_index], data)
  blocks = [(s, c) for s in range(0, seed_index.size, seed_block)
            for c in range(0, plan_index.size, chunk)]

  def compute(i):
    s, c = blocks[i]
    part = jax.block_until_ready(runner(keys[s:s + seed_block], jax.tree_util.tree_map(
        lambda x: x[c:c + chunk], data)))
    if progress is not None:
      progress(min(seeds * plans, (i + 1) * seed_block * chunk))
    return part

  if shared is None:
    parts = [compute(i) for i in range(len(blocks))]
  else:
    template = jax.eval_shape(runner, keys[:seed_block], jax.tree_util.tree_map(
        lambda x: x[:chunk], data))
    parts = shared.map(compute, len(blocks), template)
  columns = plan_index.size // chunk
  rows = [jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=1),
                                 *parts[r * columns:(r + 1) * columns])
          for r in range(len(blocks) // columns)]
  return jax.tree_util.tree_map(
      lambda *xs: np.swapaxes(np.concatenate(xs, axis=0)[:seeds, :plans], 0, 1), *rows)


def run_task(config, name: str, built, validation_key, test_key,
             make_runner: Callable = make_grid_runner, progress: Callable | None = None,
             shared=None):
  """Validation then test of every row of task `name` through one compiled runner.

  Returns (Selection, {row: Trajectory of the test seeds}). Each row's step sizes are chosen
  by experiments.table1_selection.select on the validation seeds' final held-out loss
  (then metric, or the reverse: settings.select_by), near-best within one standard error,
  then the smallest step sizes; a diverged validation seed scores the worst value, so a
  diverging candidate loses. progress(done, total) counts runs
  (validation and test seeds) after each chunk; total grows when a grid is extended.
  shared (experiments.distributed.SharedChunks) splits the chunks over processes.
  """
  task, model = built
  settings = config.task_settings[name]
  steps = settings.steps
  slots = candidate_plan(config, name, candidates(config, name)[0]).slots(NUM_SLOTS)
  runner = make_runner(task, model, slots, num_steps=steps, batch_size=config.batch_size,
                       test_size=config.test_size,
                       record_every=max(1, steps // config.records))
  rows = table_rows(config)
  seeds = config.validation_seeds
  chunk = config.chunk_size or len(rows)
  lower = LOWER_IS_BETTER[task.metric_name]
  report = progress or (lambda done, total: None)
  test_runs = len(rows) * config.num_seeds
  done = [0]  # validation runs finished; the total is known one round at a time
  report(0, len(candidates(config, name)) * seeds + test_runs)

  def evaluate(new):
    runs = len(new) * seeds
    run = evaluate_grid(runner, jax.random.split(validation_key, seeds),
                        plan_data(config, name, new), chunk, seeds,
                        lambda k: report(done[0] + k, done[0] + runs + test_runs), shared)
    done[0] += runs
    final, ok = final_scores(run)  # (candidates, seeds)
    loss = np.where(ok, np.asarray(run.risk)[..., -1], np.inf)
    metric = np.where(ok, final if lower else -final, np.inf)
    return loss, metric  # per seed: the selection takes means and standard errors

  chosen = selection.select(plan_names(config), settings.eta_grid, settings.eta_cap,
                            config.attention_multipliers, evaluate, settings.select_by)
  test = evaluate_grid(runner, jax.random.split(test_key, config.num_seeds),
                       plan_data(config, name, [chosen.chosen[row] for row in rows]), chunk,
                       seeds,
                       lambda k: report(done[0] + k, done[0] + test_runs), shared)
  return chosen, {row: jax.tree_util.tree_map(lambda x, i=i: x[i], test)
                  for i, row in enumerate(rows)}
