"""The closed-form engine: output phases in closed form, O(1)-in-T plans (docs/theory.md §5).

Output phases are solved by the closed form of lagjax/dynamics/output_phase.py at their
record steps (O(1) in their length), attention phases are taken as exact gradient steps
on the moments' route; `make_trajectory` returns the one run record (Trajectory) on the
engines' record grid, `three_phase_outcome` the three-phase plan's end state, finite T
or T = ∞, and `supports` says which plans it simulates exactly.
"""


from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import risk as risk_lib
from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.dynamics import plans, runner
from lagjax.dynamics import trajectory as trajectory_lib
from lagjax.dynamics.output_phase import (
  gram_factors,
  gram_risk,
  output_gd_solver,
  zero_score_constants,
)
from lagjax.models import direct
from lagjax.risk import moments as moments_lib


def supports(lang: languages.Language, plan: plans.Plan, loss="squared",
             route: str = "auto") -> str | None:
  """None if the closed form simulates `plan` on `lang` exactly, else what is missing.

  It needs squared loss on an exact route that gives the moments (H, g)
  (risk.moments), population objectives, and phases that train one parameter
  group with plain SGD at a constant step size (output phases are solved as GD
  in closed form and attention phases stepped as plain GD, so any other
  optimizer or a schedule would be silently simulated as plain GD); docs/theory.md §5.

  Args:
    lang: the language (§1b).
    plan: the plan (its structure; step sizes do not matter).
    loss: the loss; only "squared" is supported.
    route: the population route ("auto" or a name).

  Returns:
    None, or one line naming what is missing.

  Example:
    >>> lang = lj.occurrence(3)
    >>> lj.closed_form.supports(lang, lj.plans.three_phase(1.0, 1.0, 1.0, 10)) is None
    True
    >>> lj.closed_form.supports(lang, lj.plans.joint(1.0, 10))
    "the closed form simulates output and attention phases; phase 0 trains 'both' (use lj.train)"
  """
  if loss != "squared":
    return f"the closed form needs loss 'squared'; got {loss!r}"
  try:
    chosen = risk_lib.resolve_route(lang, loss, route)
    if "moments" not in risk_lib.ROUTES[chosen].provides:
      return (f"the closed form needs the moments (H, g) of a route in "
              f"{sorted(risk_lib.names('moments'))}; got route {chosen!r}")
  except ValueError as error:
    return str(error).rstrip(".")
  return phases_support(plan)


def phases_support(plan: plans.Plan) -> str | None:
  """None if every phase of `plan` is one the closed forms simulate exactly, else what is
  missing: population objectives, one group ("output" or "attention") per phase, plain SGD
  at a constant step size (docs/theory.md §5). Shared by `supports` and lagjax/dynamics/hybrid.py.

  Args:
    plan: the plan.

  Returns:
    None, or one line naming the first phase that does not fit.

  Example:
    >>> lj.closed_form.phases_support(lj.plans.three_phase(1.0, 1.0, 1.0, 10)) is None
    True
  """
  for i, phase in enumerate(plan.phases):
    if not isinstance(phase.objective, plans.Population):
      return f"the closed form needs population objectives; phase {i} has {phase.objective!r}"
    if phase.group == "both":
      return (f"the closed form simulates output and attention phases; phase {i} trains "
              "'both' (use lj.train)")
    if callable(phase.eta) or phase.optimizer is not plans.optax.sgd:
      return (f"closed-form phases need plain SGD with a constant step size; phase {i} "
              f"({phase.group}) has eta={phase.eta!r}, optimizer={phase.optimizer!r} "
              "(use lj.train)")
  return None


def make_simulator(lang: languages.Language, plan: plans.Plan, *, cls: bool = False,
                   partition: partition_lib.Partition | None = None):
  """Builds simulate(etas) -> (grouped params, final risk) from θ0 = 0.

  The final state of `make_trajectory` with records only at 0 and T: output
  phases in closed form (O(1) in their length), attention phases by exact
  gradient steps on the moments' route (Laplace, or transfer for regular languages).
  etas (#phases,) may be traced and vmapped (docs/theory.md §5).

  Args:
    lang: the language (§1b).
    plan: the plan's structure (phases, groups, lengths); its step sizes are unused.
    cls: whether the model has the CLS token.
    partition: the token groups; None for ``partition.of_language(lang)``.

  Returns:
    A function simulate(etas) of the step sizes (#phases,), returning the final
    grouped params {"alpha": (G,), "beta": (G,)} and the final risk.

  Example:
    One output step of size η = d from zero gives β_a = η/d = 1 and β_σ = -η/(d(d-1))
    (§4):

    >>> lang = lj.occurrence(3)  # p = ½, so E[1/n] = ln 2
    >>> simulate = jax.jit(lj.closed_form.make_simulator(lang, lj.plans.output_only(3.0, 1)))
    >>> params, risk = simulate(jnp.array([3.0]))
    >>> np.round(np.asarray(params["beta"]), 6).tolist()  # token groups {0}, {1, 2}
    [1.0, -0.5]
    >>> round(float(risk), 6)  # ln(2)/4
    0.173287
  """
  trajectory = make_trajectory(lang, plan, num_records=1, cls=cls, partition=partition)

  def simulate(etas):
    run = trajectory(etas)
    return run.params, run.risk[-1]

  return simulate


def three_phase_outcome(lang: languages.Language, eta1: float, eta2: float, eta3: float,
                        steps: int | float, *, cls: bool = False) -> dict:
  """The three-phase plan from zero in closed form: one output step (η1), one attention
  step (η2), then `steps` output steps (η3); steps may be math.inf (docs/theory.md §5).

  Compiled once per (language, cls): step sizes and steps are arguments of the
  compiled function, so a repeated call with new numbers costs no compilation.

  Args:
    lang: the language (§1b), on its token groups ``partition.of_language(lang)``.
    eta1: η1, the first output step.
    eta2: η2, the attention step.
    eta3: η3, the last phase's output step.
    steps: the last phase's number of steps T (an int, or math.inf).
    cls: whether the model has the CLS token.

  Returns:
    A dict with the final per-token params, the squared risk (quadratic_risk at
    the final α), the exact 0-1 error (threshold, lattice or automaton route, certified
    to 1e-12; NaN where neither is feasible or the run diverged), whether the run
    diverged and the step at which (-1 if not), by the runner's rule
    (docs/theory.md §5): then params and risk are those of the state at that step,
    as lj.train reports them, and the risk is above the cap or not finite.

  Example:
    >>> lang = lj.occurrence(3)
    >>> out = lj.closed_form.three_phase_outcome(lang, 3.0, 9.0, 1.0, float("inf"))
    >>> out["diverged"], out["diverged_step"]
    (False, -1)
    >>> out["risk"] < 0.139326  # below the output-only floor ½ - 1/(4 ln 2) of §4
    True
    >>> abs(float(out["params"]["alpha"].sum())) < 1e-12  # Σ_σ α_σ = 0 (§2)
    True
    >>> lj.closed_form.three_phase_outcome(lang, 3.0, 9.0, 100.0, 5)["diverged"]  # ηλ > 2
    True
  """
  validation.require_float64("lj.closed_form.three_phase_outcome")
  plans.three_phase(eta1, eta2, eta3, 1 if steps == math.inf else steps)  # checks η and T
  run = _three_phase_kernel(lang, bool(cls))
  params, final_risk, diverged, diverged_step = run(
      jnp.asarray([eta1, eta2, eta3], dtype=jnp.float64), jnp.asarray(steps, dtype=jnp.float64))
  partition = partition_lib.of_language(lang)
  token_params = dict(params, alpha=partition.expand(params["alpha"]),
                      beta=partition.expand(params["beta"]))
  error = None if diverged else risk_lib.exact_error(lang, token_params)
  return {"params": token_params, "risk": float(final_risk),
          "error": float(np.nan) if error is None else error.value, "diverged": bool(diverged),
          "diverged_step": int(diverged_step)}


# Bisection steps that locate divergence in the last phase: any step count below 2^62.
_LAST_PHASE_ITERATIONS = 64


@functools.lru_cache(maxsize=32)
def _three_phase_kernel(lang: languages.Language, cls: bool):
  """Jitted (etas (3,), steps) -> (grouped params, risk, diverged, diverged_step) of the
  three-phase plan.

  The first two phases run through make_trajectory (one step each, the third
  phase with η = 0); the last output phase is output_gd with a traced step count,
  so finite T and T = ∞ share one compilation. Divergence in it is located by
  runner.locate_divergence on the exact states β_t (bracketed by t = 0 and the
  last step judged, min(T, 2^62) - 1).
  """
  partition = partition_lib.of_language(lang)
  trajectory = make_trajectory(lang, plans.three_phase(1.0, 1.0, 1.0, 1), num_records=1,
                               cls=cls, partition=partition)
  moments = moments_lib.moments_fn(lang, partition, cls=cls)
  metric = jnp.asarray(partition.metric(cls))

  def run(etas, steps):
    start = trajectory(etas.at[2].set(0.0))
    hessian, target = moments(start.params)
    factors = gram_factors(hessian, target)
    alpha = direct.stack(start.params, "alpha")

    solver = output_gd_solver(hessian, target, metric, start.beta[-1], etas[2])

    def state_at(t):
      beta = solver(jnp.asarray(t)[None])[0]
      return gram_risk(factors, beta), alpha, beta

    # The end state is judged at T itself (T = ∞: the limit, with output_gd's null-space
    # rule), the bisection runs over finite steps below min(T, 2^62).
    last = jnp.minimum(steps, 2.0**62)
    probes = jnp.stack([jnp.asarray(0.0), steps])
    risk, _, beta = jax.vmap(state_at)(probes)
    records = {"risk": risk, "alpha": jnp.broadcast_to(alpha, beta.shape), "beta": beta}
    late, late_step = runner.locate_divergence(records, probes, last, state_at,
                                               runner.MAX_VALUE, _LAST_PHASE_ITERATIONS)
    # Phases 1-2 judge global steps 0-2 (step 2 is the last phase's start).
    diverged = start.diverged | late
    diverged_step = jnp.where(start.diverged, start.diverged_step,
                              jnp.where(late, 2 + late_step, -1))
    stop = jnp.where(late & ~start.diverged, late_step, steps)
    final_risk, _, beta = state_at(stop)
    params = direct.unstack(start.params, "beta", beta)
    final_risk = jnp.where(start.diverged, start.risk[-1], final_risk)
    params = jax.tree_util.tree_map(lambda frozen, new: jnp.where(start.diverged, frozen, new),
                                    start.params, params)
    return params, final_risk, diverged, diverged_step

  return jax.jit(run)


@functools.lru_cache(maxsize=32)
def _constants_at_zero(lang: languages.Language, partition: partition_lib.Partition, cls: bool):
  """(H, g, gram_factors(H, g), B, C) at α = 0 from one compiled call (see make_trajectory),
  as read-only NumPy arrays; cached, so every trajectory of one language, partition and CLS
  choice (the plans of a sweep, the three-phase kernel) shares one compilation."""
  moments = moments_lib.moments_fn(lang, partition, cls=cls)
  zero = direct.zero_params(partition.num_groups, cls)
  size = partition.metric(cls).shape[0]

  @jax.jit
  def constants():
    hessian, target, linear, quadratic = zero_score_constants(
        lambda alpha: moments(direct.unstack(zero, "alpha", alpha)), size)
    return hessian, target, gram_factors(hessian, target), linear, quadratic

  arrays = tuple(np.array(x) for x in constants())
  for array in arrays:
    array.setflags(write=False)
  return arrays


def make_trajectory(lang: languages.Language, plan: plans.Plan, *, num_records: int = 64,
                    cls: bool = False, partition: partition_lib.Partition | None = None,
                    max_risk: float = runner.MAX_VALUE):
  """Builds trajectory(etas) -> Trajectory from θ0 = 0, exact at every record.

  Output phases are evaluated in closed form at their record steps (the risk is
  the quadratic ½βᵀHβ - gᵀβ + ½ of the phase's fixed α); attention phases take
  exact gradient steps on the moments' route (Laplace, or transfer for regular
  languages; §3a, §3d). While α is still 0, H and g are constants, and the
  attention gradient ∂R/∂α_g = E[(f - y) W_g (β_g - f)] is a quadratic form in β
  with zero constant term, Bβ + ½ C[β, β], whose coefficients come once from the
  derivatives of (H, g) at α = 0; so the three-phase plan's
  attention step costs O(G³). Divergence follows the runner's rule (docs/theory.md §5):
  the first step t < T whose state has a non-finite or capped risk or non-finite
  parameters, located exactly between records; the run then stays at θ_t, as in
  the runner.

  Args:
    lang: the language (§1b).
    plan: the plan's structure (checked by `supports`); its step sizes are unused.
    num_records: K of the record grid runner.record_grid(T, K) (§5b).
    cls: whether the model has the CLS token.
    partition: the token groups; None for ``partition.of_language(lang)``.
    max_risk: the divergence cap.

  Returns:
    trajectory(etas (#phases,)) -> Trajectory on the token groups, jitted, and vmappable
    over etas.

  Raises:
    ValueError: when `supports` refuses the plan.

  Example:
    Output-only training for T = 1000 steps costs what one step does, and reaches the
    output-only floor ½ - 1/(4 ln 2) of §4 (d = 3: π_a = ⅓, E[1/n] = ln 2):

    >>> lang, plan = lj.occurrence(3), lj.plans.output_only(3.0, 1000)
    >>> trajectory = lj.closed_form.make_trajectory(lang, plan, num_records=2)
    >>> run = trajectory(jnp.array([3.0]))
    >>> run.steps.tolist()
    [0, 1, 500, 1000]
    >>> round(float(run.risk[-1]), 6)
    0.139326
  """
  validation.require_float64("lj.closed_form.make_trajectory")
  reason = supports(lang, plan)
  if reason is not None:
    raise ValueError(f"{reason}.")
  partition = partition or partition_lib.of_language(lang)
  groups = partition.num_groups
  metric = jnp.asarray(partition.metric(cls))
  route = risk_lib.risk_fn(lang, route=moments_lib.moments_route(lang), partition=partition,
                           cls=cls)
  moments = moments_lib.moments_fn(lang, partition, cls=cls)
  value_and_grad = jax.value_and_grad(route.risk)
  steps = runner.record_grid(plan.total_steps, num_records)
  bounds = plan.boundaries
  # Each record belongs to the phase running at its step (the last one to the end).
  owner = np.minimum(np.searchsorted(bounds[1:], steps, side="right"), len(plan.phases) - 1)

  stack, unstack = direct.stack, direct.unstack
  zero = direct.zero_params(groups, cls)
  # Constants while α = 0, computed once here (one compiled call), not per configuration
  # of a vmapped sweep: H, g, the Gram factors and the attention gradient's coefficients
  # B, C (zero_score_constants).
  zero_hessian, zero_target, zero_factors, linear, quadratic = _constants_at_zero(
      lang, partition, bool(cls))
  scale = metric

  total = plan.total_steps
  # Bisection steps that locate the first bad state between two records (docs/theory.md §5).
  locate_iterations = max(1, int(np.ceil(np.log2(max(np.diff(steps).max(initial=1), 1)))) + 1)

  def trajectory(etas):
    params = zero
    alpha_is_zero = True  # static: no attention phase has run yet
    risks, alphas, betas, states = [], [], [], []
    for i, phase in enumerate(plan.phases):
      local = jnp.asarray(steps[owner == i] - bounds[i])
      if phase.group == "output":
        hessian, target = (zero_hessian, zero_target) if alpha_is_zero else moments(params)
        factors = zero_factors if alpha_is_zero else gram_factors(hessian, target)
        start_alpha, start_beta = stack(params, "alpha"), stack(params, "beta")
        solver = output_gd_solver(hessian, target, metric, start_beta, etas[i])
        path = solver(jnp.concatenate([local, jnp.asarray([phase.steps])]))
        risks.append(gram_risk(factors, path[:-1]))
        alphas.append(jnp.broadcast_to(start_alpha, (local.shape[0], metric.shape[0])))
        betas.append(path[:-1])
        params = unstack(params, "beta", path[-1])

        def state(t, solver=solver, factors=factors, alpha=start_alpha):
          beta_t = solver(jnp.asarray(t)[None])[0]
          return gram_risk(factors, beta_t), alpha, beta_t
      else:
        def attention_step(params, _, eta=etas[i]):
          risk, grads = value_and_grad(params)
          new = unstack(params, "alpha", stack(params, "alpha") - eta * stack(grads, "alpha")
                        / scale)
          return new, (risk, stack(params, "alpha"))
        start_beta = stack(params, "beta")
        remaining = phase.steps
        if alpha_is_zero:
          first_risk = gram_risk(zero_factors, start_beta)
          gradient = linear @ start_beta + 0.5 * jnp.einsum("gij,i,j->g", quadratic, start_beta,
                                                            start_beta)
          params = unstack(params, "alpha", -etas[i] * gradient / scale)
          remaining -= 1
        params, (risk_path, alpha_path) = jax.lax.scan(attention_step, params, None,
                                                       length=remaining)
        if alpha_is_zero:
          risk_path = jnp.concatenate([first_risk[None], risk_path])
          alpha_path = jnp.concatenate([jnp.zeros((1, metric.shape[0])), alpha_path])
        if i == len(plan.phases) - 1:  # the record at T: the state after the last step
          risk_path = jnp.concatenate([risk_path, route.risk(params)[None]])
          alpha_path = jnp.concatenate([alpha_path, stack(params, "alpha")[None]])
        alpha_is_zero = False
        risks.append(risk_path[local])
        alphas.append(alpha_path[local])
        betas.append(jnp.broadcast_to(start_beta, (local.shape[0], metric.shape[0])))

        def state(t, risk_path=risk_path, alpha_path=alpha_path, beta=start_beta):
          index = jnp.clip(t, 0, risk_path.shape[0] - 1).astype(jnp.int64)
          return risk_path[index], alpha_path[index], beta
      states.append(state)

    def state_at(t):
      """(R(θ_t), α_t, β_t) at global step t, exactly, from the phase running at t."""
      index = jnp.minimum(jnp.searchsorted(jnp.asarray(bounds[1:]), t, side="right"),
                          len(plan.phases) - 1)
      return jax.lax.switch(index, states, t - jnp.asarray(bounds)[index])

    records = {"risk": jnp.concatenate(risks), "alpha": jnp.concatenate(alphas),
               "beta": jnp.concatenate(betas)}
    diverged, diverged_step = runner.locate_divergence(records, jnp.asarray(steps), total,
                                                       state_at, max_risk, locate_iterations)
    # As in the runner, the run stays at θ_{t*} from the step t* where it diverged on.
    frozen_risk, frozen_alpha, frozen_beta = state_at(jnp.maximum(diverged_step, 0))
    after = diverged & (jnp.asarray(steps) > diverged_step)
    records = {"risk": jnp.where(after, frozen_risk, records["risk"]),
               "alpha": jnp.where(after[:, None], frozen_alpha, records["alpha"]),
               "beta": jnp.where(after[:, None], frozen_beta, records["beta"])}
    final = unstack(unstack(params, "alpha", records["alpha"][-1]), "beta",
                    records["beta"][-1])
    return trajectory_lib.Trajectory(
        params=final, steps=jnp.asarray(steps), risk=records["risk"], alpha=records["alpha"],
        beta=records["beta"], diverged=diverged, diverged_step=diverged_step,
        partition=partition, cls=cls)

  # Jitted here, so that a caller who evaluates it eagerly (engines.build's evaluate) runs
  # one compiled program, not some 400 operations dispatched one by one and each compiled
  # on its first call (Tomita 4, three-phase: 16-33 s once, then 1.5-3 s per call).
  return jax.jit(trajectory)
