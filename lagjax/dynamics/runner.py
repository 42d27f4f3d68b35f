"""The one training loop of lagjax (docs/theory.md section 5).

`make_loop` turns a plan's static slots, an objective and a record function
into run(params0, key, data) -> Trajectory (lagjax/dynamics/trajectory.py): the whole
plan in one `lax.scan`, compiled once per slot structure and total number of steps
(it fixes the record grid), with the plan's arrays (`PlanData`: phase lengths, step
sizes, trained groups) as traced arguments. So one compilation serves every step size,
split of the steps into phases and named plan that share the slots and the total, and
`vmap` over (key, data) runs seeds and step-size grids together.

What differs between callers is passed in, never branched on here:

- objective(key) -> step_objective(params, step, phase) -> (value, grads):
  built once per run from the run's key (e.g. the samples of each phase; callers
  derive their own subkeys), then evaluated at every step (the exact risk of
  lj.train, the fresh-minibatch loss of task training, a KQV parameter map in
  front of either);
- record(params) -> dict of arrays, taken on the record grid (every `record_every`
  steps and at the end, or any `record_steps`; the runner adds the step): "risk",
  "alpha" and "beta" fill the Trajectory's fields of those names, the others its
  `records`;
- constrain(params) -> params, applied after each update (projected GD).

Divergence: a step whose objective is not finite or exceeds `max_value`, or
whose new parameters are not finite, is not taken; the run stays at its last
finite parameters and is marked diverged at that step (`guard_divergence`).
Closed forms, which compute their records without stepping, apply the same rule
to the exact states between their records (`locate_divergence`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import core, custom_batching

from lagjax import validation
from lagjax.dynamics import plans
from lagjax.dynamics.trajectory import Trajectory

# The divergence cap (docs/theory.md §5): a step whose objective exceeds it is not taken.
MAX_VALUE = 1e8
# Configurations a vmapped run computes side by side (make_loop's batch_chunk): a batch of
# exact Laplace runs on 50 token groups holds (B, 50, 374) arrays, so a wide vmap is
# memory-bound, and 16 is also the best chunk for the tied runs measured
# (docs/decisions/batching-on-cpu.md).
BATCH_CHUNK = 16


def check_run_options(plan, record_every, max_risk) -> tuple[int, float]:
  """The options every training entry point shares, checked once (docs/theory.md §5).

  Args:
    plan: a `plans.Plan`.
    record_every: the record spacing, an integer >= 1 (an integral float is accepted).
    max_risk: the divergence cap, a real > 0; +inf means no cap.

  Returns:
    (record_every as an int, max_risk as a float).

  Raises:
    ValueError: naming the argument.

  Example:
    >>> lj.runner.check_run_options(lj.plans.output_only(1.0, 4), 2.0, float("inf"))
    (2, inf)
  """
  if not isinstance(plan, plans.Plan):
    raise ValueError(f"plan must be a lj.plans.Plan (e.g. lj.plans.three_phase(...)); got "
                     f"{type(plan).__name__}.")
  record_every = validation.check_int("record_every", record_every, 1, integral_floats=True)
  try:
    cap = float(max_risk)
  except (TypeError, ValueError):
    cap = float("nan")
  if isinstance(max_risk, bool) or not cap > 0:
    raise ValueError(f"max_risk must be a real > 0 (inf: no cap); got {max_risk!r}.")
  return record_every, cap


def step_is_finite(value, max_value, new_params):
  """The divergence rule of §5: whether the step from θ_t to θ_{t+1} is taken.

  A step counts when its objective is finite and <= max_value and every new parameter
  is finite.

  Args:
    value: the step's objective R(θ_t), a scalar.
    max_value: the cap (MAX_VALUE = 1e8 by default in every caller).
    new_params: θ_{t+1}, any pytree of arrays.

  Returns:
    A scalar bool array, True when the step is taken.

  Example:
    >>> beta = {"beta": jnp.ones(2)}
    >>> bool(lj.runner.step_is_finite(1.0, 1e8, beta))
    True
    >>> bool(lj.runner.step_is_finite(2e8, 1e8, beta))
    False
    >>> bool(lj.runner.step_is_finite(1.0, 1e8, {"beta": jnp.array([1.0, jnp.nan])}))
    False
  """
  return jnp.isfinite(value) & (value <= max_value) & jnp.all(jnp.array(
      [jnp.all(jnp.isfinite(v)) for v in jax.tree_util.tree_leaves(new_params)]))


def guard_divergence(value, max_value, proposed, current, t):
  """(params, state, diverged, diverged_step) after step t, by the divergence rule of §5.

  The proposed (params, state) if the objective is finite and <= max_value and the new
  params are finite, else the current ones, with the run marked diverged at step t.

  Args:
    value: the step's objective R(θ_t).
    max_value: the cap.
    proposed: (θ_{t+1}, optimizer state after the step).
    current: (θ_t, optimizer state before the step).
    t: the step.

  Returns:
    The tuple (params, state, diverged, diverged_step) of the kept pair, a scalar bool,
    and t or -1.

  Example:
    >>> current = ({"beta": jnp.zeros(2)}, 0)
    >>> proposed = ({"beta": jnp.full(2, 0.5)}, 1)
    >>> params, state, diverged, step = lj.runner.guard_divergence(1.0, 1e8, proposed, current, 7)
    >>> params["beta"].tolist(), int(state), bool(diverged), int(step)
    ([0.5, 0.5], 1, False, -1)
    >>> params, state, diverged, step = lj.runner.guard_divergence(jnp.inf, 1e8, proposed,
    ...                                                            current, 7)
    >>> params["beta"].tolist(), int(state), bool(diverged), int(step)
    ([0.0, 0.0], 0, True, 7)
  """
  finite = step_is_finite(value, max_value, proposed[0])
  keep = jax.tree_util.tree_map(lambda new, old: jnp.where(finite, new, old), proposed, current)
  return (*keep, ~finite, jnp.where(finite, -1, t))


def locate_divergence(records: dict, steps, total: int, state_at, max_value, iterations: int):
  """(diverged, diverged_step) of records computed without stepping (closed forms, §5).

  By the same rule as guard_divergence: the first step t < total whose state θ_t fails
  step_is_finite (its risk, and θ_t in place of the new parameters). The first
  failing record brackets t* between two records, and `iterations` bisection steps on
  state_at locate it: the first failing step whenever the rule, once failed, keeps
  failing up to that record (a diverging phase crosses the cap along its growing
  direction). The state at `total` is judged by no step, as in the loop.

  Args:
    records: {"risk": (R,), "alpha": (R, ·), "beta": (R, ·)} at `steps`.
    steps: (R,) record steps, rising to total.
    total: the run's length T.
    state_at: t -> (risk, alpha, beta), the exact state at any step t.
    max_value: the cap.
    iterations: bisection steps (log2 of the widest gap between records suffices).

  Returns:
    The tuple (diverged, diverged_step) of a scalar bool and the step t* or -1.

  Example:
    >>> # β_t = 2^t with risk 4^t, which first exceeds the cap 100 at t = 4 (4^3 = 64).
    >>> state_at = lambda t: (4.0 ** t, jnp.zeros(1), 2.0 ** t * jnp.ones(1))
    >>> steps = jnp.array([0, 6, 8])  # the records bracket t* in (0, 6]
    >>> records = {"risk": 4.0 ** steps, "alpha": jnp.zeros((3, 1)),
    ...            "beta": 2.0 ** steps[:, None]}
    >>> # Jitted, as inside the closed forms (run eagerly, the bisection loop is slow).
    >>> locate = jax.jit(lj.runner.locate_divergence, static_argnums=(2, 3, 4, 5))
    >>> diverged, step = locate(records, steps, 8, state_at, 100.0, 3)
    >>> bool(diverged), int(step)
    (True, 4)
  """
  def bad(risk, alpha, beta):
    return ~step_is_finite(risk, max_value, (alpha, beta))

  record_bad = jax.vmap(bad)(records["risk"], records["alpha"], records["beta"])
  first = jnp.argmax(record_bad)
  lo = jnp.where(first > 0, steps[jnp.maximum(first - 1, 0)], -1)
  hi = jnp.minimum(steps[first], total - 1)
  diverged = record_bad.any() & (hi > lo) & bad(*state_at(hi))

  def halve(_, bracket):
    lo, hi = bracket
    # Rounded up, so mid is never lo: lo = -1 stands for "before step 0", not a state.
    mid = (lo + hi + 1) // 2
    mid_bad = bad(*state_at(mid))
    return jnp.where(mid_bad, lo, mid), jnp.where(mid_bad, mid, hi)

  _, hi = jax.lax.fori_loop(0, iterations, halve, (lo, hi))
  return diverged, jnp.where(diverged, hi, -1)


def num_records(num_steps: int, record_every: int) -> int:
  """The number of records of a num_steps loop (§5): every record_every steps from 0, and the end.

  Args:
    num_steps: the loop's length T.
    record_every: the record spacing k.

  Returns:
    ⌈T/k⌉ + 1, the length of every(T, k).

  Example:
    >>> lj.runner.num_records(10, 3)  # steps 0, 3, 6, 9 and 10
    5
  """
  return -(-num_steps // record_every) + 1


def every(num_steps: int, record_every: int) -> np.ndarray:
  """The record grid 0, k, 2k, …, and num_steps (k = record_every; §5).

  Args:
    num_steps: the loop's length T.
    record_every: the record spacing k.

  Returns:
    (num_records(T, k),) int steps, the last one T.

  Example:
    >>> lj.runner.every(10, 3).tolist()
    [0, 3, 6, 9, 10]
  """
  return np.minimum(np.arange(num_records(num_steps, record_every)) * record_every, num_steps)


def record_grid(total_steps: int, num_records: int) -> np.ndarray:
  """The engines' record grid (§5b): {round(kT/K) : k = 0…K} ∪ {round(T^{k/(K-1)}) : k = 0…K-1}.

  The uniform part for the lag metrics (§6), the geometric part for risk curves on a log
  axis (lagjax/dynamics/engines.py); sorted, unique.

  Args:
    total_steps: T.
    num_records: K.

  Returns:
    The sorted unique int64 record steps, from 0 to T.

  Example:
    >>> lj.runner.record_grid(100, 4).tolist()  # uniform 0, 25, …, 100; geometric 1, 5, 22, 100
    [0, 1, 5, 22, 25, 50, 75, 100]
  """
  uniform = np.round(np.linspace(0, total_steps, num_records + 1))
  geometric = np.round(np.geomspace(1, total_steps, num_records))
  return np.unique(np.concatenate([uniform, geometric])).astype(np.int64)


def uniform_records(total_steps: int, num_records: int) -> np.ndarray:
  """Mask of the uniformly spaced records round(kT/K) among record_grid(T, K) (§5b).

  The lag gap of §6 is a plain mean over records, a time average only on these.

  Args:
    total_steps: T.
    num_records: K.

  Returns:
    A bool array of the length of record_grid(T, K).

  Example:
    >>> grid = lj.runner.record_grid(100, 4)
    >>> grid[lj.runner.uniform_records(100, 4)].tolist()
    [0, 25, 50, 75, 100]
  """
  uniform = np.round(np.linspace(0, total_steps, num_records + 1)).astype(np.int64)
  return np.isin(record_grid(total_steps, num_records), uniform)


def map_under_vmap(fn: Callable, batch_size: int | None) -> Callable:
  """fn, whose vmap walks the batch with lax.map: in vmapped chunks of batch_size, or
  one member at a time (batch_size None) (docs/theory.md §5; docs/decisions/batching-on-cpu.md).

  Called without vmap it is fn, the same program. Under vmap the values are those of vmap(fn);
  what changes is how the batch is computed. One member at a time keeps fn's lax.cond a
  branch: vmap turns a cond with a batched predicate into a select that computes every
  branch for every member (the sampled 0-1 error's log-sum-exp path over 20,000 strings in
  lj.train's records). Chunks keep a wide batch's arrays in cache. Tracers fn closes over
  (an outer vmap's, a caller's traced plan) are passed to the batching rule as arguments.

  Args:
    fn: a function of arrays (pytrees) returning a pytree of arrays.
    batch_size: members vectorized at once under vmap; None for one at a time.

  Returns:
    A function with fn's signature and values.

  Example:
    >>> def f(x):  # under a plain vmap, both branches would run on the whole batch
    ...   return jax.lax.cond(x > 0, jnp.sqrt, lambda v: -v, x)
    >>> xs = jnp.array([4.0, -1.0, 9.0])
    >>> jax.vmap(lj.runner.map_under_vmap(f, None))(xs).tolist()
    [2.0, 1.0, 3.0]
    >>> jax.jit(jax.vmap(lj.runner.map_under_vmap(f, 2)))(xs).tolist()
    [2.0, 1.0, 3.0]
  """
  def wrapped(*args):
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    out_tree = jax.tree_util.tree_structure(out_shape)
    consts, flat = list(closed.consts), jax.tree_util.tree_leaves(args)

    def member(consts, flat):
      return core.eval_jaxpr(closed.jaxpr, consts, *flat)

    call = custom_batching.custom_vmap(member)

    @call.def_vmap
    def rule(axis_size, in_batched, consts, flat):
      values, batched = consts + flat, in_batched[0] + in_batched[1]

      def one(members):
        members = iter(members)
        merged = [next(members) if b else v for v, b in zip(values, batched)]
        return member(merged[:len(consts)], merged[len(consts):])

      out = jax.lax.map(one, [v for v, b in zip(values, batched) if b],
                        batch_size=None if batch_size is None else min(batch_size, axis_size))
      return out, [True] * len(out)

    return jax.tree_util.tree_unflatten(out_tree, call(consts, flat))

  return wrapped


def make_loop(slots: Sequence[plans.Slot], labels: Callable, objective: Callable,
              record: Callable, *, num_steps: int, record_every: int = 1, record_steps=None,
              max_value: float = MAX_VALUE, constrain: Callable | None = None,
              always_step: bool = False, record_takes_step: bool = False,
              batch_chunk: int | None = None, records_per_member: bool = False) -> Callable:
  """The one training loop of §5: builds run(params0, key, data) -> Trajectory.

  run is not jitted: jit or vmap it (over keys and stacked PlanData for seeds and grids).

  Args:
    slots: the plan's static slots (plans.Plan.slots(num_slots)).
    labels: params -> {name: "attention" | "output"}, the model's declared groups.
    objective: key -> (params, step, phase) -> (value, grads).
    record: params -> dict of arrays: "risk", "alpha" and "beta" become the Trajectory's
      fields of those names (None when absent), the others its `records`.
    num_steps: length of the scan; the plan's own total Σ data.steps may be shorter
      (the remaining steps are skipped), never longer.
    record_every: record every this many steps (and at the end).
    record_steps: the record grid instead (sorted steps from 0 to num_steps, e.g.
      record_grid(num_steps, K)); a record at step t holds the state before step t.
    max_value: an objective above this marks the run diverged.
    constrain: optional map applied to the parameters after every update.
    always_step: compute every step and keep it only while the run is active, instead of
      skipping inactive steps with lax.cond. Under vmap a cond with a per-run predicate
      runs both branches on operands batched over runs; selecting instead leaves what
      depends only on (key, step) unbatched, so runs that share a key share it
      (task_train.make_grid_runner: one minibatch per key and step for all its plans).
    record_takes_step: call record(params, step) with the record's step (clipped to the
      plan's total), for records that depend on the phase (lj.train's sharpness).
    batch_chunk: under vmap, run the batch in vmapped chunks of this many configurations
      (`map_under_vmap`; BATCH_CHUNK for lj.train), so a wide batch stays in cache; None
      vectorizes the whole batch. Values are unchanged.
    records_per_member: under vmap, take the records one configuration at a time
      (`map_under_vmap`), so a lax.cond in them stays a branch; values are unchanged.

  Returns:
    run(params0, key, data) -> Trajectory, the whole plan in one lax.scan with the plan's
    arrays (data, a PlanData) traced, so one compilation serves every step size and phase
    length.

  Example:
    >>> # Output GD with η = 1/2 on R(β) = ½‖β - 1‖² from β = 0: β_t = 1 - 2^-t.
    >>> labels = lambda p: lj.models.group_labels(lj.models.direct.PARAM_GROUPS, p)
    >>> risk = lambda p: 0.5 * jnp.sum((p["beta"] - 1.0) ** 2)
    >>> objective = lambda key: lambda p, t, phase: jax.value_and_grad(risk)(p)
    >>> record = lambda p: {"risk": risk(p), "beta": p["beta"][0], "beta_sum": p["beta"].sum()}
    >>> plan = lj.plans.output_only(0.5, 3)
    >>> run = lj.runner.make_loop(plan.slots(), labels, objective, record, num_steps=3)
    >>> trace = run({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)}, jax.random.key(0), plan.data())
    >>> trace.steps.tolist(), trace.beta.tolist()
    ([0, 1, 2, 3], [0.0, 0.5, 0.75, 0.875])
    >>> trace.beta_sum.tolist()  # a further record, in trace.records
    [0.0, 1.0, 1.5, 1.75]
    >>> bool(trace.diverged), int(trace.diverged_step)
    (False, -1)

    # GD with η = 3 on the same R: β_t - 1 = -(-2)^t, R(θ_t) = 4^t. R(θ_2) = 16 > 10:
    # step 2 is not taken and the run stays at θ_2.
    >>> plan = lj.plans.output_only(3.0, 3)
    >>> run = lj.runner.make_loop(plan.slots(), labels, objective, record, num_steps=3,
    ...                           max_value=10.0)
    >>> trace = run({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)}, jax.random.key(0), plan.data())
    >>> bool(trace.diverged), int(trace.diverged_step), trace.params["beta"].tolist()
    (True, 2, [-3.0, -3.0])
  """
  grid = every(num_steps, record_every) if record_steps is None else np.asarray(record_steps)
  if grid[0] != 0 or grid[-1] != num_steps or np.any(np.diff(grid) < 0):
    raise ValueError(f"record_steps must rise from 0 to num_steps = {num_steps}; got "
                     f"{grid[0]}…{grid[-1]}.")
  starts, ends = jnp.asarray(grid), jnp.asarray(np.append(grid[1:], grid[-1]))

  def take_record(params, at):
    return record(params, at) if record_takes_step else record(params)

  if records_per_member:
    take_record = map_under_vmap(take_record, None)

  def run(params0, key, data: plans.PlanData) -> Trajectory:
    step_objective = objective(key)
    tx = plans.transformation(slots, data, labels)
    total = jnp.sum(data.steps)

    def step(carry, t):
      params, state, diverged, _ = carry

      def do_step(_):
        value, grads = step_objective(params, t, plans.phase_index(t, data.steps))
        updates, new_state = tx.update(grads, state, params)
        new_params = optax.apply_updates(params, updates)
        if constrain is not None:
          new_params = constrain(new_params)
        return guard_divergence(value, max_value, (new_params, new_state), (params, state), t)

      active = (t < total) & ~diverged
      if always_step:
        return jax.tree_util.tree_map(lambda new, old: jnp.where(active, new, old),
                                      do_step(None), carry), None
      return jax.lax.cond(active, do_step, lambda _: carry, None), None

    def block(carry, bounds):
      start, end = bounds
      at = jnp.minimum(start, total)
      recorded = dict(take_record(carry[0], at), steps=at)
      carry = jax.lax.fori_loop(start, end, lambda t, c: step(c, t)[0], carry)
      return carry, recorded

    init = (params0, tx.init(params0), jnp.array(False), jnp.array(-1))
    (params, _, diverged, diverged_step), records = jax.lax.scan(block, init, (starts, ends))
    fields = {name: records.pop(name, None) for name in ("steps", "risk", "alpha", "beta")}
    return Trajectory(params=params, diverged=diverged, diverged_step=diverged_step,
                      records=records, **fields)

  return run if batch_chunk is None else map_under_vmap(run, batch_chunk)
