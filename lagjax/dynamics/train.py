"""Running a plan with exact population or empirical gradients (docs/theory.md sections 3b, 5).

`train(lang, plan)` runs the whole plan through the one training loop of
lagjax.dynamics.runner, compiled once per slot structure and total number of steps:
step sizes, phase lengths and groups enter as the plan's arrays (PlanData), so sweeps
vmap over them without recompiling. This module supplies the loop's objective (the
exact population risk, or the empirical risk of each phase's sample) and records.

Tied fast path: when θ0 is constant on the groups of `partition.of_language`
and every phase uses the population risk, gradient descent keeps the tie, and
the simulation runs on the groups. The per-token gradient is the gradient with
respect to the tied parameter divided by the group size (docs/theory.md 3b); the
optimizer is applied to that, so the run equals the full-d run.

Divergence: a step whose objective or new parameters are not finite, or whose
objective exceeds `max_risk`, freezes the run at its last finite parameters and
marks it diverged at that step (runner.guard_divergence).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import models, validation, xla_flags
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.data.sampling import sample_counts
from lagjax.dynamics import metrics, plans, runner
from lagjax.dynamics import sharpness as sharpness_lib
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models import direct, kqv
from lagjax.risk import ROUTES, base, coverage, resolve_route
from lagjax.risk import error as error_lib
from lagjax.risk import risk_fn as build_route


def choose_partition(lang, theta0, plan, tied) -> partition_lib.Partition:
  """The token-group partition to simulate on (see module docstring; docs/theory.md §3b).

  ``partition.of_language(lang)`` when θ0 is constant on its token groups and every
  phase uses the population risk (then GD keeps the tie), else one group per token; the
  last-token query always runs on every token (§2b).

  Args:
    lang: the language (§1b).
    theta0: per-token initial parameters.
    plan: the plan (its objectives matter).
    tied: "auto" (tie when exact), True (require the tie) or False (every token).

  Returns:
    The Partition.

  Raises:
    ValueError: for tied=True when the tie is not exact, or a tied outside the three.

  Example:
    >>> lang, plan = lj.occurrence(3), lj.plans.output_only(1.0, 5)
    >>> lj.dynamics.train.choose_partition(lang, lj.init_params(3), plan, "auto")
    Partition(blocks=((0,), (1, 2)))
    >>> theta0 = dict(lj.init_params(3), beta=jnp.array([0.0, 0.1, 0.2]))  # not tied
    >>> lj.dynamics.train.choose_partition(lang, theta0, plan, "auto")
    Partition(blocks=((0,), (1,), (2,)))
  """
  if tied not in (True, False, "auto"):
    raise ValueError(f"tied must be True, False or 'auto'; got {tied!r}.")
  base_partition = partition_lib.of_language(lang)
  if direct.layout(theta0).query == "last":
    # GD does not keep α (d, d) constant on blocks × blocks: α[x, x] (x read as the last
    # token and scored) and α[c, x], c ≠ x in x's block, get different gradients
    # (docs/theory.md §2b). So the last query runs on every token.
    base_partition = partition_lib.singletons(lang.d)
  population_only = all(isinstance(p.objective, plans.Population) for p in plan.phases)
  regrouped = direct.expand_params(base_partition, direct.group_params(base_partition, theta0))
  is_tied = all(np.array_equal(np.asarray(regrouped[k]), np.asarray(theta0[k])) for k in theta0)
  if tied is True and not (is_tied and population_only and base_partition.num_groups < lang.d):
    raise ValueError("tied=True needs θ0 constant on the language's groups, population "
                     "objectives in every phase, and the CLS query.")
  if tied is not False and is_tied and population_only:
    return base_partition
  return partition_lib.singletons(lang.d)



def step_phase(data: plans.PlanData, steps):
  """The phase of the step taken at each record step t: phase(t), or the last step's phase
  at the end t = T (no step is taken there; §5).

  Args:
    data: the plan's PlanData.
    steps: record steps (any shape, possibly traced).

  Returns:
    The slot index, an int array of the shape of steps.

  Example:
    >>> data = lj.plans.three_phase(1.0, 2.0, 3.0, 2).data()  # steps 1, 1, 2
    >>> lj.dynamics.train.step_phase(data, jnp.arange(5)).tolist()
    [0, 1, 2, 2, 2]
  """
  last = jnp.maximum(jnp.sum(data.steps) - 1, 0)
  return plans.phase_index(jnp.minimum(jnp.asarray(steps), last), data.steps)


def record_step_sizes(slots: Sequence[plans.Slot], data: plans.PlanData, steps):
  """The step size η of the step taken at each record (`step_phase`); NaN in a phase with
  a schedule (its η is not one number). What η·λ_max is compared with 2 by (§5d).

  Args:
    slots: the plan's slots.
    data: the plan's PlanData.
    steps: (R,) record steps.

  Returns:
    (R,) step sizes.

  Example:
    >>> plan = lj.plans.three_phase(1.0, 2.0, 3.0, 2)
    >>> lj.dynamics.train.record_step_sizes(plan.slots(), plan.data(), jnp.arange(5)).tolist()
    [1.0, 2.0, 3.0, 3.0, 3.0]
  """
  scheduled = jnp.asarray([slot.schedule is not None for slot in slots])
  phase = step_phase(data, steps)
  return jnp.where(scheduled[phase], jnp.nan, data.etas[phase])


def stepped_sharpness(risk, params, k: int, *, sizes=None, trains=None, labels=None):
  """The top k eigenvalues of the Hessian of `risk` on the parameters a step trains, in the
  per-token metric (docs/theory.md §5d): what decides GD's stability at θ.

  On token groups of sizes k_g, GD steps θ_g ← θ_g − η ∂R/∂θ_g / k_g (§3b), which is plain
  GD in u = √k ⊙ θ (along every token axis; the CLS scalars have size 1). So the Hessian
  recorded is ∇²_u R = D^{-1/2} ∇²_θ R D^{-1/2}, D = diag(k): equal to the per-token
  Hessian restricted to the tied directions, which GD never leaves; GD at η is unstable
  along its top direction iff η·λ_max > 2. With `trains` (attention, output) only the
  groups the step trains enter (the others are held: M ∇² M with M their mask, whose
  other eigenvalues are 0), so an output phase's sharpness is its β-Hessian's.

  Args:
    risk: params -> the population risk (grouped parameters).
    params: θ, on the token groups (or KQV weights with sizes None).
    k: how many eigenvalues (lagjax.dynamics.sharpness.top_eigenvalues: dense up to
      DENSE_MAX_PARAMS parameters, else Lanczos).
    sizes: the group sizes k_g (G,), or None for no rescaling.
    trains: (2,) bools, whether the step trains the attention and the output group, or
      None for every parameter.
    labels: {name: "attention" | "output"} for params (models.group_labels); with trains.

  Returns:
    (k,) eigenvalues, largest first.

  Example:
    >>> risk = lambda p: 0.5 * (p["alpha"] ** 2).sum() + 2.0 * (p["beta"] ** 2).sum()
    >>> theta = {"alpha": jnp.zeros(2), "beta": jnp.zeros(2)}
    >>> labels = {"alpha": "attention", "beta": "output"}
    >>> sharp = lj.dynamics.train.stepped_sharpness
    >>> sharp(risk, theta, 1).tolist()  # ∂²R/∂β² = 4
    [4.0]
    >>> sharp(risk, theta, 1, sizes=jnp.array([1.0, 2.0])).tolist()  # 4 / k_g, largest 4
    [4.0]
    >>> np.round(sharp(risk, theta, 2, sizes=jnp.array([2.0, 4.0])), 12).tolist()  # 4/2, 4/4
    [2.0, 1.0]
    >>> sharp(risk, theta, 1, trains=jnp.array([True, False]), labels=labels).tolist()
    [1.0]
  """
  root = None if sizes is None else jnp.sqrt(jnp.asarray(sizes, jnp.float64))
  # per_token_gradients divides along every token axis: by 1/√k it gives u = √k ⊙ θ.
  point = params if root is None else direct.per_token_gradients(params, 1.0 / root)

  def in_metric(u):
    return u if root is None else direct.per_token_gradients(u, root)

  if trains is None:
    held = in_metric
  else:
    mask = {name: trains[0] if group == "attention" else trains[1]
            for name, group in labels.items()}

    def held(v):
      moved = {name: point[name] + mask[name] * (v[name] - point[name]) for name in point}
      return in_metric(moved)

  return sharpness_lib.top_eigenvalues(lambda v: risk(held(v)), point, k)


def make_runner(lang: languages.Language, slots: Sequence[plans.Slot],
                partition: partition_lib.Partition, *, num_steps: int, loss="squared",
                route="auto", layout: direct.Layout = direct.PLAIN, record_every: int = 1,
                record_steps=None, max_risk: float = runner.MAX_VALUE,
                error_samples: int = error_lib.ERROR_SAMPLES, kqv_form: bool = False,
                num_points: int | None = None, sharpness: int = 0, zero_one: bool = True):
  """Builds run(theta0_grouped, key, data) -> Trajectory for one slot structure (not jitted).

  theta0_grouped holds one entry per group of `partition`; data is the plan's
  PlanData (traceable: vmap it for sweeps; any plan with these slots and at most
  num_steps steps). With `kqv_form` the trained parameters are the KQV weights and
  run takes kqv_fixed, the fixed embeddings of models.kqv.init_kqv (traceable,
  so a new init reuses the compiled run); they map the weights to (α, β) for the
  objective and the records. `layout` is θ's (direct.layout): the CLS token, the query and
  the position tables. The gradient is the per-token one, tied gradient / k_g
  (docs/theory.md §3b), and the loop is runner.make_loop (§5).

  Args:
    lang: the language (§1b).
    slots: the plan's slots, ``plan.slots()``.
    partition: the token groups the parameters live on (`choose_partition`).
    num_steps: the scan length; plans of at most this many steps run through it.
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: the population route of the objective and the risk records.
    layout: θ's layout (§2b).
    record_every: record every this many steps (and at the end).
    record_steps: the record grid instead (e.g. runner.record_grid), or None.
    max_risk: the divergence cap (§5).
    error_samples: strings in the fixed sample of the 0-1 error where no exact route fits.
    kqv_form: train the KQV weights instead of (α, β) (§2).
    num_points: the static quadrature grid of a quadrature route (risk/coverage.py); None
      for the route's default. Outside it the objective is NaN and the run stops there.
    sharpness: k > 0 records the top k eigenvalues of the population risk's Hessian at
      every record (`stepped_sharpness`, §5d) and the summary of
      metrics.sharpness_summary; 0 (default) records none.
    zero_one: record the 0-1 error (records error); False leaves it out.

  Returns:
    run(theta0_grouped, key, data[, kqv_fixed]) -> Trajectory (as `train` returns it),
    jittable and vmappable over data.

  Example:
    >>> lang, plan = lj.occurrence(3), lj.plans.output_only(3.0, 1)
    >>> partition = lj.partition.of_language(lang)
    >>> run = jax.jit(lj.dynamics.train.make_runner(lang, plan.slots(), partition,
    ...                                             num_steps=1))
    >>> theta0 = lj.models.direct.zero_params(partition.num_groups)
    >>> sweep = jax.vmap(lambda eta: run(theta0, jax.random.key(0), plan.data(etas=eta[None])))
    >>> runs = sweep(jnp.array([1.5, 3.0]))  # two step sizes, one compiled program
    >>> np.round(np.asarray(runs.beta[:, -1]), 6).tolist()  # per token: η/d, -η/(d(d-1))
    [[0.5, -0.25, -0.25], [1.0, -0.5, -0.5]]
  """
  if not layout.plain and not all(isinstance(slot.objective, plans.Population)
                                  for slot in slots):
    raise ValueError("empirical objectives train the plain model (CLS query, no position "
                     "tables) on count vectors; with the last-token query or position tables "
                     "use population objectives.")
  loss_fn = base.get_loss(loss)

  def build(name):
    """The route `name` on the run's grid (num_points, for a quadrature route)."""
    chosen = resolve_route(lang, loss, name, layout)
    return build_route(lang, loss=loss, route=chosen, partition=partition,
                       **coverage.grid_options(chosen, num_points), **layout._asdict())

  population = build(route)
  report = population.report
  sizes = jnp.asarray(partition.sizes)
  error_report, error_route = (error_lib.best_route(lang, partition, error_samples,
                                                    layout=layout) if zero_one else (None, "none"))
  letters = lang.margin_letters()
  groups = kqv.PARAM_GROUPS if kqv_form else direct.PARAM_GROUPS

  def per_token(grads):
    """Gradient w.r.t. one token's parameter: tied gradient / group size (docs/theory.md 3b)."""
    return grads if kqv_form else direct.per_token_gradients(grads, sizes)

  def population_objective(objective: plans.Population, to_direct):
    same = objective.route in ("auto", population.name)
    risk = population.risk if same else build(objective.route).risk
    value_and_grad = jax.value_and_grad(lambda p: risk(to_direct(p)))
    return lambda params, step_key: value_and_grad(params)

  def empirical_samples(key):
    """{slot index: (counts, labels)}, each slot's sample drawn from fold_in(key, index); the
    slots of one sample size share one vmapped sampler (the same draws, one copy to compile)."""
    by_size = {}
    for i, slot in enumerate(slots):
      if isinstance(slot.objective, plans.Empirical):
        by_size.setdefault(slot.objective.n_samples, []).append(i)
    samples = {}
    for n_samples, indices in by_size.items():
      keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(indices))
      counts, labels = jax.vmap(sample_counts, in_axes=(0, None, None))(keys, lang, n_samples)
      samples.update({i: (counts[j], labels[j]) for j, i in enumerate(indices)})
    return samples

  def empirical_objective(objective: plans.Empirical, sample, to_direct):
    counts, labels = sample

    def empirical(params, step_key):
      if objective.batch_size is None:
        batch_counts, batch_labels = counts, labels
      else:
        rows = jax.random.randint(step_key, (objective.batch_size,), 0, objective.n_samples)
        batch_counts, batch_labels = counts[rows], labels[rows]
      outputs = direct.forward_counts(to_direct(params), batch_counts)
      return jnp.mean(loss_fn(outputs, batch_labels))

    return jax.value_and_grad(empirical)

  # Slots with equal population objectives share one branch (one copy in the program);
  # each empirical slot has its own branch and sample, drawn from the key folded with its
  # index. A branch is named by its population objective, or by its slot index.
  names = [slot.objective if isinstance(slot.objective, plans.Population) else i
           for i, slot in enumerate(slots)]
  branch_names = list(dict.fromkeys(names))
  slot_branch = jnp.asarray([branch_names.index(name) for name in names])

  def make_loop(to_direct, data):
    """The one training loop (lagjax/dynamics/runner.py) with the model read through to_direct."""
    def objective(key):
      samples = empirical_samples(key)
      branches = [population_objective(name, to_direct) if isinstance(name, plans.Population)
                  else empirical_objective(slots[name].objective, samples[name], to_direct)
                  for name in branch_names]

      def step_objective(params, t, phase):
        step_key = jax.random.fold_in(key, t)
        if len(branches) == 1:
          value, grads = branches[0](params, step_key)
        else:
          value, grads = jax.lax.switch(slot_branch[phase], branches, params, step_key)
        return value, per_token(grads)

      return step_objective

    def record(params, step):
      extra = {}
      if sharpness:
        trains = data.trains[step_phase(data, step)]
        extra["sharpness"] = stepped_sharpness(
            lambda p: population.risk(to_direct(p)), params, sharpness,
            sizes=None if kqv_form else sizes, trains=trains,
            labels=models.group_labels(groups, params))
      params = to_direct(params)
      population_report = report(params)
      token_params = direct.expand_params(partition, params)
      margin = (direct.attention_margin(token_params, letters) if layout.plain
                else jnp.array(jnp.nan))
      if zero_one:
        extra["error"] = error_report(params)["error"]
      return {"risk": population_report["risk"], "alpha": direct.attention_vector(token_params),
              "beta": direct.output_vector(token_params), "margin": margin,
              "grid_covered": population_report.get("grid_covered", jnp.array(True)), **extra}

    return runner.make_loop(slots, functools.partial(models.group_labels, groups), objective,
                            record, num_steps=num_steps, record_every=record_every,
                            record_steps=record_steps, max_value=max_risk,
                            record_takes_step=True, batch_chunk=runner.BATCH_CHUNK,
                            records_per_member=True)

  info = (("route", population.name), ("error_route", error_route),
          ("tied", partition.num_groups < lang.d))

  def run(theta0, key, data: plans.PlanData, kqv_fixed=None) -> Trajectory:
    if (kqv_fixed is not None) != kqv_form:
      raise ValueError("run takes kqv_fixed (the fixed KQV embeddings) exactly when built with "
                       "kqv_form=True.")
    to_direct = functools.partial(kqv.kqv_to_direct, fixed=kqv_fixed) if kqv_form else (
        lambda params: params)
    trajectory = make_loop(to_direct, data)(theta0, key, data)
    records = dict(trajectory.records)
    summary = {"grid_covered": jnp.all(records.pop("grid_covered"))}
    if sharpness:
      etas = record_step_sizes(slots, data, trajectory.steps)
      summary.update(metrics.sharpness_summary(records["sharpness"][:, 0], trajectory.steps,
                                               etas))
    return dataclasses.replace(
        trajectory, params=direct.expand_params(partition, to_direct(trajectory.params)),
        records=records, summary=summary, info=info)

  return run


def train(lang: languages.Language, plan: plans.Plan, theta0=None, *, loss="squared",
          route: str = "auto", record_every: int = 1, key=None, num_seeds: int | None = None,
          tied="auto", max_risk: float = runner.MAX_VALUE,
          num_points: int | None = None, sharpness: int = 0,
          zero_one: bool = True, optimization_level: int | None = None) -> Trajectory:
  """Runs `plan` on `lang` from θ0 (default zero) and records the trajectory, by exact
  population (or empirical) GD in one scan (docs/theory.md §5; tying: §3b).

  Args:
    lang: the language.
    plan: a lj.plans.Plan.
    theta0: per-token initial parameters; None is θ0 = 0 (no CLS).
    loss: "squared" (default), "logistic" or a callable.
    route: population route for the objective and the records ("auto", "laplace",
      "lattice", "transfer", ...: a route of risk.ROUTES, §3).
    record_every: record every this many steps (and at the end).
    key: PRNG key for empirical objectives (default key 0).
    num_seeds: if given, vmaps the run over this many seeds split from `key`.
    tied: "auto" (tie when exact), True (require), False (simulate all d tokens).
    max_risk: an objective above this marks the run diverged.
    num_points: the static quadrature grid of a quadrature route (Laplace, transfer).
      None (default): the route's default grid, and a run that stops because θ left it
      is run again on the smallest larger grid of risk.coverage.ladder that covers θ
      there, so it equals a run on that grid from the start and never ends because of the
      grid. "smallest": the same from the smallest size of the ladder that covers θ0
      (cheaper where θ stays near it: 362 nodes against 1,448 under the position tables).
      An int fixes the grid: a run that leaves it stops (the divergence rule, §5)
      and says so in info diverged_because ("quadrature grid exceeded at step k: …").
    sharpness: k ≥ 1 records the k largest eigenvalues of the population risk's Hessian at
      every record, on the parameters the step there trains, in the per-token metric
      (`stepped_sharpness`, docs/theory.md §5d); 0 (default): none. At most the number
      of parameters the run steps (those of the token groups when tied).
    zero_one: record the 0-1 error (default). False leaves records error out: on the
      automaton route it costs several times the step itself (even pairs, 17 parameters:
      10⁴ steps recorded at every step take 45 s with it, 8 s without), and a run that
      reads only R, α and β (the atlas, §10) does not need it.
    optimization_level: XLA's backend optimisation level (0-3) for this run's program
      (xla_flags.compiler_options), whatever XLA_FLAGS say; None (default) leaves it to
      them. A setting of speed, never of the mathematics: a run of many steps compiled at
      level 0 (which a test suite may set for compile speed) runs several times slower.

  Returns:
    A Trajectory (lagjax/dynamics/trajectory.py; a leading seed axis on every array when
    num_seeds is given) with per-token values (partition None), records every
    record_every steps and at T:

    - risk, alpha, beta (R,), (R, d), (R, d): the population risk by `route`, the
      attention and output tables (direct.attention_vector, output_vector);
    - records: error (R,), the 0-1 error (exact by the threshold, lattice or automaton
      route, or sampled on a fixed sample: info error_route; absent, and error_route
      "none", with zero_one=False), and margin (R,), the attention margin
      min_{a∈L} α_a - max_{σ∉L} α_σ (L = the language's margin_letters(); NaN when it has
      none);
    - summary: grid_covered, whether every Laplace evaluation had enough quadrature nodes;
    - with sharpness = k: records sharpness (R, k), λ_1 ≥ … ≥ λ_k at each record, and
      summary max_sharpness, end_sharpness and first_unstable_step, the first record step
      with η·λ_1 > 2 (-1 if none; metrics.sharpness_summary, η from `record_step_sizes`);
    - info: route (of the risk records), error_route, tied (whether the run was simulated
      on token groups, §3b); after a re-size, grid_points (the grid the run used); after a
      stop because of a fixed grid, diverged_because.

  Example:
    >>> lang = lj.occurrence(3)  # p = ½, so E[1/n] = ln 2 (§4)
    >>> run = lj.train(lang, lj.plans.output_only(3.0, 1))
    >>> run
    Trajectory: 2 records, steps 0…1, not diverged
      risk 0.5 → 0.173287; alpha (2, 3), beta (2, 3)
      records: error, margin; summary: grid_covered
      info: route='laplace', error_route='threshold', tied=True
    >>> round(float(run.risk[0]), 6), round(float(run.risk[-1]), 6)  # ½, then ln(2)/4
    (0.5, 0.173287)
    >>> np.round(np.asarray(run.beta[-1]), 6).tolist()  # η/d and -η/(d(d-1)) (§4)
    [1.0, -0.5, -0.5]
    >>> run.margin.tolist()  # output steps leave α = 0
    [0.0, 0.0]
    >>> round(float(run.error[0]), 6)  # f ≡ 0 at θ0 = 0, and sign 0 counts as an error
    1.0
    >>> int(run.lag().half_time_alpha)  # attention never moved (§6)
    -1
  """
  validation.require_float64("lj.train")
  languages.check_language(lang, "lj.train")
  record_every, max_risk = runner.check_run_options(plan, record_every, max_risk)
  theta0 = direct.init_params(lang.d) if theta0 is None else theta0
  direct.check_params(theta0, lang.d)
  num_points = coverage.check_num_points(num_points)
  partition = choose_partition(lang, theta0, plan, tied)
  layout = direct.layout(theta0)
  grouped = direct.group_params(partition, theta0)
  sharpness = check_sharpness(sharpness, grouped)
  xla_flags.compiler_options(optimization_level)   # checked here, before any work
  key = jax.random.key(0) if key is None else key
  data = plan.data()

  def attempt(size):
    run = _compiled_runner(lang, plan.slots(), plan.total_steps, partition, loss, route,
                           layout, record_every, max_risk, num_points=size,
                           sharpness=sharpness, zero_one=bool(zero_one),
                           optimization_level=optimization_level)
    if num_seeds is None:
      return run(grouped, key, data)
    keys = jax.random.split(key, num_seeds)
    return jax.vmap(run, in_axes=(None, 0, None))(grouped, keys, data)

  if not build_route_spec(lang, loss, route, layout).quadrature:
    return attempt(None)
  windows = coverage.windows(partition.num_groups, layout)
  first, fixed = coverage.first_size(lang, num_points, windows,
                                     lambda: coverage.needed(lang, theta0))
  resized = coverage.resize(attempt, lang, windows, stopped_at=stopped_params,
                            num_points=first, fixed=fixed)
  return with_grid_info(resized, fixed)


def check_sharpness(sharpness, params) -> int:
  """The sharpness option k checked: an integer in [0, P], P the number of parameters
  the run steps (§5d).

  Args:
    sharpness: k, the number of top Hessian eigenvalues to record (0: none).
    params: the parameters the run steps (on the token groups when tied).

  Returns:
    k as an int.

  Raises:
    ValueError: in one line naming k, for a k outside [0, P] or not an integer.

  Example:
    >>> theta = {"alpha": jnp.zeros(2), "beta": jnp.zeros(2)}
    >>> lj.dynamics.train.check_sharpness(3, theta)
    3
    >>> lj.dynamics.train.check_sharpness(5, theta)
    Traceback (most recent call last):
    ...
    ValueError: sharpness (k, the number of top Hessian eigenvalues) must be an integer in ...
  """
  size = sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params))
  if (isinstance(sharpness, bool) or not isinstance(sharpness, (int, np.integer))
      or not 0 <= sharpness <= size):
    raise ValueError(f"sharpness (k, the number of top Hessian eigenvalues) must be an "
                     f"integer in [0, {size}] (0: off; {size} parameters are stepped); "
                     f"got {sharpness!r}.")
  return int(sharpness)


def build_route_spec(lang, loss, route, layout) -> base.RouteSpec:
  """The registered RouteSpec that `route` resolves to for (lang, loss, layout) (§3)."""
  return ROUTES[resolve_route(lang, loss, route, layout)]


def stopped_params(run: Trajectory):
  """The params where each seed of `run` that met a non-finite risk stopped (a list), or None:
  the state the divergence rule froze, whose objective was not finite or over the cap (§5),
  or the final state, which no step judges, where its record left the grid."""
  diverged = np.asarray(run.diverged) | ~np.asarray(run.summary["grid_covered"])
  if not diverged.any():
    return None
  params = jax.tree_util.tree_map(np.asarray, run.params)
  if diverged.ndim == 0:
    return [params]
  return [jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], params)
          for i in np.flatnonzero(diverged)]


def with_grid_info(resized: coverage.Resized, fixed: bool) -> Trajectory:
  """The run of coverage.resize, its info saying which grid it used after a re-size
  (grid_points) and why it stopped when its grid stopped it (diverged_because; §3a, §5)."""
  run, info = resized.result, ()
  if resized.failures and not resized.exceeded:
    info = (("grid_points", resized.num_points),)
  if resized.exceeded:
    points = resized.failures[-1][1]
    steps = sorted({int(s) for s in np.atleast_1d(np.asarray(run.diverged_step)) if s >= 0})
    # No step judges the final state: its record alone may leave the grid.
    steps = steps or [int(np.max(np.asarray(run.steps)))]
    where = "step " + ", ".join(map(str, steps)) if len(steps) <= 3 else f"steps {steps[0]}…"
    detail = coverage.describe(points, resized.num_points).split(": ", 1)[1]
    info = (("diverged_because", f"quadrature grid exceeded at {where}: {detail}"
             + ("" if fixed else " (no grid of the ladder covers θ)")),)
  if not info:
    return run
  return dataclasses.replace(run, info=tuple(run.info) + info)


@functools.lru_cache(maxsize=32)
def _compiled_runner(lang, slots, num_steps, partition, loss, route, layout, record_every,
                     max_risk, kqv_form=False, num_points=None, sharpness=0, zero_one=True,
                     optimization_level=None):
  return jax.jit(make_runner(lang, slots, partition, num_steps=num_steps, loss=loss,
                             route=route, layout=layout, record_every=record_every,
                             max_risk=max_risk, kqv_form=kqv_form, num_points=num_points,
                             sharpness=sharpness, zero_one=zero_one),
                 compiler_options=xla_flags.compiler_options(optimization_level))


def train_kqv(lang: languages.Language, plan: plans.Plan, key, *, scale: float = 0.1,
              width: int | None = None, key_dim: int | None = None, loss="squared",
              route: str = "auto", record_every: int = 1,
              max_risk: float = runner.MAX_VALUE) -> Trajectory:
  """Runs `plan` on the KQV form from a small random init (docs/theory.md section 2).

  Attention group: W_Q, W_K; output group: W_V, w_o. Zero is a saddle of this
  form, so it starts at scale·N(0, 1) weights drawn from `key`. The Trajectory's
  records are the (α, β) the weights realize, comparable with `train`.

  Args:
    lang: the language (§1b).
    plan: a lj.plans.Plan.
    key: PRNG key of the initial weights (and of empirical objectives).
    scale: the initial weights' standard deviation.
    width: the embedding width m; None for d (one-hot embeddings).
    key_dim: the query/key width k of W_Q, W_K; None for m.
    loss: "squared" (default), "logistic" or a callable.
    route: population route for the objective and the records.
    record_every: record every this many steps (and at the end).
    max_risk: an objective above this marks the run diverged.

  Returns:
    A Trajectory on every token (tied is False), with per-token α and β records; a run
    that leaves its quadrature grid runs again on a covering one (as in `train`).

  Example:
    >>> run = lj.train_kqv(lj.occurrence(3), lj.plans.output_only(3.0, 1), jax.random.key(0))
    >>> run.alpha.shape, run.tied
    ((2, 3), False)
    >>> bool(jnp.all(run.alpha[1] == run.alpha[0]))  # an output step leaves W_Q, W_K
    True
  """
  validation.require_float64("lj.train_kqv")
  languages.check_language(lang, "lj.train_kqv")
  record_every, max_risk = runner.check_run_options(plan, record_every, max_risk)
  init_key, run_key = jax.random.split(key)
  trainable, fixed = kqv.init_kqv(init_key, lang.d, width=width, key_dim=key_dim, scale=scale)

  def attempt(size):
    run = _compiled_runner(lang, plan.slots(), plan.total_steps,
                           partition_lib.singletons(lang.d), loss, route, direct.Layout(),
                           record_every, max_risk, kqv_form=True, num_points=size)
    return run(trainable, run_key, plan.data(), fixed)

  if not build_route_spec(lang, loss, route, direct.Layout()).quadrature:
    return attempt(None)
  # A run that leaves its quadrature grid runs again on a covering one, as in `train`.
  return with_grid_info(coverage.resize(attempt, lang, coverage.windows(lang.d),
                                        stopped_at=stopped_params), False)


# build_route_spec, stopped_params and with_grid_info are shared with lagjax/dynamics/flow.py,
# not public API.
__all__ = ["check_sharpness", "choose_partition", "make_runner", "record_step_sizes",
           "step_phase", "stepped_sharpness", "train", "train_kqv"]
