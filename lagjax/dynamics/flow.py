"""Gradient flow of the population risk (docs/theory.md section 5c): lj.flow.

A plan in continuous time (lagjax.dynamics.plans.FlowPlan, or any GD plan read as its
flow form) is the ODE

    dθ_g/dt = -r_g(t) ∇̃_g R(θ),    t ∈ [0, t1],

with r_g(t) the rate of group g (attention, output) in the phase holding t and ∇̃ the
per-token gradient (the tied gradient divided by the group size, §3b), the vector field
whose explicit Euler steps of size η are lj.train's GD steps. So GD at η for t/η steps
follows the flow at time t up to O(η).

By default the ODE is solved by Rodas5P (lagjax/dynamics/rosenbrock.py), a stiff,
L-stable, linearly implicit Rosenbrock method of order 5: one exact Jacobian (the Hessian,
a few dozen parameters at most, by autodiff) per step and linear solves, no Newton
iterations, with an adaptive step-size controller (rtol, atol). Steps end exactly on the
phase boundaries: a phase's rates never leak into its neighbour, and a plan's whole run is
one solve in one compiled program. The route appears in that program two or three times
only (the solver's evaluations, and one loop after the solve for τ_ε, the records and the
plateau exit), which keeps its compilation near the GD program's. diffrax's ESDIRK methods
(Kvaerno5 with a PI controller, one diffeqsolve with jump_ts) and explicit methods stay
available by name (`solver`), for cross-checks. Durations, rates, t1 and ε are traced, so a
second flow on the same language, layout, options and number of phases does not recompile.
docs/decisions/gradient-flow-solver.md says why this solver.

Events: R ≤ ε ends the run at τ_ε (the solver stops at the end of the step where R ≤ ε;
R never rises along the flow, so τ_ε lies in that step: it is bisected on the dense output
there and the run's end set there);
a non-finite risk or gradient, or a risk above `max_risk`, ends it too, marked
diverged with the reason (`status`), never an exception. Half-progress times of each
group and the plateau exit (below) are located on the dense output by bisection.
"""

from __future__ import annotations

import dataclasses
import functools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from lagjax import models, validation, xla_flags
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.dynamics import output_phase, plans, rosenbrock, runner, train
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models import direct
from lagjax.risk import coverage
from lagjax.risk import moments as moments_lib
from lagjax.risk import risk_fn as build_route

# The solvers by name. The implicit ones (Rosenbrock and ESDIRK, L-stable) suit the stiff
# late phase of attention training, where the Hessian's spread grows with the scores; the
# explicit ones suit short non-stiff runs. "rodas5p" is lagjax's own (rosenbrock.py), the
# others diffrax's.
SOLVERS = {"rodas5p": None, "kvaerno5": diffrax.Kvaerno5, "kvaerno4": diffrax.Kvaerno4,
           "kvaerno3": diffrax.Kvaerno3, "tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5}
IMPLICIT = ("kvaerno5", "kvaerno4", "kvaerno3")
RECORDS = ("geometric", "uniform")

# What ended the run: summary["status"] indexes STATUS.
STATUS = ("completed", "epsilon reached", "diverged: non-finite risk",
          "diverged: risk above max_risk", "diverged: non-finite gradient",
          "diverged: the solver stopped (max_steps reached or the step size collapsed)",
          "diverged: quadrature grid exceeded")
(COMPLETED, EPSILON, NONFINITE_RISK, ABOVE_MAX, NONFINITE_GRADIENT, SOLVER_STOPPED,
 GRID_EXCEEDED) = range(7)
# A quadrature route's run stops when θ needs this share of its grid's nodes: the solver's
# stages probe beyond θ, where the route is NaN, and would shrink its steps to nothing.
GRID_MARGIN = 0.9

# The plateau level at time t is the risk a decade earlier, R(t/10): the run leaves a
# plateau when R(t) <= (1 - plateau_drop)·R(t/10).
PLATEAU_WINDOW = 10.0
# Bisection steps of τ_ε (in the solver's last step), the half-times and the plateau exit
# (between two records): 2^-40 ≈ 1e-12 of the bracket, far below the solver's tolerance, at
# one risk evaluation a step for τ_ε and two for the plateau exit (the half-times read the
# dense output alone).
BISECTION_STEPS = 40
# τ_ε on the exact linear path is bisected on [0, t_end]: 2^-64 of it.
LINEAR_BISECTION_STEPS = 64
# The Newton (chord) iterations of the implicit stages stop at NEWTON_KAPPA·tolerance. The
# default 0.01 fails to converge often at large steps, and each failure rejects the step: on
# the 17-parameter even-pairs flow to 10⁶, kappa 0.01 / 0.1 / 0.5 took 992 / 606 / 467 steps
# (168 / 45 / 7 rejected) with R(10⁶) equal to 3e-10 relative (the step's error estimate
# still bounds the local error).
NEWTON_KAPPA = 0.5
# The PI coefficients for stiff problems (Hairer & Wanner; diffrax's PIDController docs):
# they cut the rejected steps of the 17-parameter even-pairs flow from 920 to 106.
PCOEFF, ICOEFF = 0.3, 0.4


def _record_times(kind, num_records, boundaries, t1, record_steps, data):
  """The record times (traced): 0, the grid of `kind` up to t1, and every phase boundary
  before t1; or the GD-equivalent times of `record_steps` (the engines' grid)."""
  if record_steps is not None:
    steps = jnp.asarray(record_steps, jnp.float64)
    step_bounds = jnp.concatenate([jnp.zeros(1), jnp.cumsum(data.durations / data.step_sizes)])
    phase = jnp.clip(jnp.searchsorted(step_bounds[1:-1], steps, side="right"), 0,
                     data.durations.shape[0] - 1)
    return boundaries[phase] + (steps - step_bounds[phase]) * data.step_sizes[phase]
  if kind == "uniform":
    grid = jnp.linspace(0.0, t1, num_records + 1)
  else:
    first = jnp.minimum(1.0, t1 / num_records)
    # geomspace's last point is t1 only up to roundoff: the run's end is recorded exactly.
    grid = jnp.concatenate([jnp.zeros(1), jnp.geomspace(first, t1, num_records)]).at[-1].set(t1)
  inner = jnp.minimum(boundaries[1:-1], t1)
  return jnp.sort(jnp.concatenate([grid, inner]))


def _steps_of_times(times, boundaries, data):
  """The GD step equivalent of each time, floor(B_i + (t - T_i)/η_i) in phase i."""
  step_bounds = jnp.concatenate([jnp.zeros(1), jnp.cumsum(data.durations / data.step_sizes)])
  phase = jnp.clip(jnp.searchsorted(boundaries[1:-1], times, side="right"), 0,
                   data.durations.shape[0] - 1)
  exact = step_bounds[phase] + (times - boundaries[phase]) / data.step_sizes[phase]
  return jnp.floor(exact * (1 + 1e-12) + 1e-9).astype(jnp.int64)


def _bisect(levels, crossed, times, t_end):
  """The first zeros of K functions: levels(t (K,)) -> (K,), each <= 0 from its first zero
  on. crossed (K, R) says at which records each is <= 0; the bracket is the record before the
  first such record and that record (clipped to t_end), halved BISECTION_STEPS times. NaN
  where no record crossed."""
  first = jnp.argmax(crossed, axis=1)
  hi = jnp.minimum(times[first], t_end)
  lo = jnp.where(first > 0, times[jnp.maximum(first - 1, 0)], 0.0)

  def halve(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    below = levels(mid) <= 0
    return jnp.where(below, lo, mid), jnp.where(below, mid, hi)

  _, crossing = jax.lax.fori_loop(0, BISECTION_STEPS, halve, (lo, hi))
  return jnp.where(crossed.any(axis=1), crossing, jnp.nan)


def make_flow(lang: languages.Language, partition: partition_lib.Partition, *,
              num_phases: int, loss="squared", route="auto",
              layout: direct.Layout = direct.PLAIN, solver: str = "rodas5p",
              rtol: float = 1e-8, atol: float = 1e-10, num_records: int = 64,
              records: str = "geometric", record_steps=None,
              max_risk: float = runner.MAX_VALUE, max_steps: int = 16_384,
              num_points: int | None = None, with_solution: bool = False,
              output_only: bool = False, sharpness: int = 0):
  """Builds run(theta0_grouped, data, t1, epsilon, plateau_drop) -> Trajectory (not jitted;
  docs/theory.md §5).

  Everything numeric is traced: θ0 on the groups of `partition`, the plan's FlowData
  (durations, rates, step sizes), t1, ε and the plateau drop; one compiled program runs
  every plan of `num_phases` phases.

  Args:
    lang: the language (§1b).
    partition: the token groups θ lives on (train.choose_partition).
    num_phases: P, the plan's number of phases.
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: the population route (§3).
    layout: θ's layout (§2b).
    solver: a key of SOLVERS.
    rtol, atol: the step-size controller's tolerances.
    num_records: K of the record grid.
    records: "geometric", "uniform" or "given" (run then takes the times, num_records + 1
      of them, rising from 0 to t1).
    record_steps: GD steps to record at instead (their times in the plan's flow form),
      as the engines do (runner.record_grid), or None.
    max_risk: a risk above this ends the run as diverged.
    max_steps: the solver's step budget (a run that needs more ends as diverged).
    num_points: the static quadrature grid of a quadrature route (risk/coverage.py); None
      for the route's default. The run stops (status GRID_EXCEEDED) when θ needs
      GRID_MARGIN of it.
    with_solution: run returns (Trajectory, dense) instead, dense = (the diffrax Solution,
      the mask of trained coordinates, θ0 and t_end flat); it always runs the solver.
    output_only: every phase trains β alone: on the plain layout with squared loss and a
      moments route, the run follows the exact solution of the linear phase
      (output_phase.output_flow_solver, §4) instead of the solver (summary num_steps 0).
    sharpness: k ≥ 1 records the top k eigenvalues of the Hessian on the groups the phase
      moves, in the per-token metric (train.stepped_sharpness, §5d); 0 records none.

  Returns:
    run(theta0_grouped, data, t1, epsilon, plateau_drop[, times]) -> Trajectory, as lj.flow
    returns it but on the groups of `partition` (and the dense output, with_solution).

  Example:
    >>> lang = lj.occurrence(3)
    >>> partition = lj.partition.of_language(lang)
    >>> run = jax.jit(lj.dynamics.flow.make_flow(lang, partition, num_phases=1,
    ...                                           num_records=4))
    >>> theta0 = lj.models.direct.zero_params(partition.num_groups)
    >>> data = lj.plans.output_only(1.0, 10).flow_form().data()
    >>> trajectory = run(theta0, data, 10.0, -1.0, 0.5)
    >>> np.round(np.asarray(trajectory.time), 6).tolist()  # 0, then geometric from 1 to 10
    [0.0, 1.0, 2.154435, 4.641589, 10.0]
  """
  validation.check_choice("solver", solver, tuple(SOLVERS))
  chosen = train.build_route_spec(lang, loss, route, layout)
  population = build_route(lang, loss=loss, route=chosen.name, partition=partition,
                           **coverage.grid_options(chosen, num_points), **layout._asdict())
  if chosen.quadrature:
    grid_size = (coverage.default_size(lang, coverage.windows(partition.num_groups, layout))
                 if num_points is None else num_points)
    points_needed = coverage.needed_fn(lang)
  else:
    grid_size, points_needed = np.inf, lambda params: jnp.array(0.0)
  risk_of = population.risk
  sizes = jnp.asarray(partition.sizes)
  value_and_grad = jax.value_and_grad(risk_of)
  controller = diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=PCOEFF, icoeff=ICOEFF)
  # Plans whose phases all train β alone (output_only) follow the linear phase's exact
  # solution where the moments (H, g) exist: squared loss, the plain layout (§4).
  linear = output_only and not with_solution and layout.plain and loss == "squared"
  if linear:
    try:
      moments_lib.moments_route(lang)
    except ValueError:
      linear = False
  if linear:
    moments = moments_lib.moments_fn(lang, partition, cls=layout.cls)
    metric = jnp.asarray(partition.metric(layout.cls))
  solver_instance = (SOLVERS[solver](root_finder=diffrax.VeryChord(rtol=rtol, atol=atol,
                                                                    kappa=NEWTON_KAPPA))
                     if solver in IMPLICIT else None if solver == "rodas5p" else SOLVERS[solver]())

  def run(theta0, data: plans.FlowData, t1, epsilon, plateau_drop, times=None) -> Trajectory:
    y0, unravel = ravel_pytree(theta0)
    labels = models.group_labels(direct.PARAM_GROUPS, theta0)
    group_index, _ = ravel_pytree({name: jnp.full(jnp.shape(value), labels[name] == "output",
                                                  jnp.int32)
                                   for name, value in theta0.items()})
    coordinate_rates = data.rates[:, group_index]  # (P, n)
    boundaries = jnp.concatenate([jnp.zeros(1), jnp.cumsum(data.durations)])
    inner = boundaries[1:-1]

    def phase_of(t):
      return jnp.clip(jnp.searchsorted(inner, t, side="right"), 0, num_phases - 1)

    def per_token_gradient(y):
      value, grads = value_and_grad(unravel(y))
      flat, _ = ravel_pytree(direct.per_token_gradients(grads, sizes))
      return value, flat

    def vector_field(t, y, args):
      return -coordinate_rates[phase_of(t)] * per_token_gradient(y)[1]

    def ends_the_run(t, y, args, value=None, **kwargs):
      # One risk evaluation per step decides both events; which one fired is read from
      # the final state (a boolean event ends the step in which it fires).
      params = unravel(y)
      value = risk_of(params) if value is None else value
      return (~jnp.isfinite(value) | (value > max_risk) | (value <= epsilon)
              | (points_needed(params) >= GRID_MARGIN * grid_size))

    if records != "given":
      times = _record_times(records, num_records, boundaries, t1, record_steps, data)
    # A coordinate no phase trains stays at θ0 exactly (the implicit solver's linear
    # solves would leave roundoff of ~1e-31 there, which the lag metrics would read as a move).
    trained = jnp.any(coordinate_rates > 0, axis=0)
    if linear:
      # Every phase moves β alone: R is quadratic in β at the fixed α, and the flow is the
      # linear ODE dβ/dt = -r D^{-1}(Hβ - g), solved exactly (output_phase.output_flow).
      hessian, target = moments(theta0)
      beta0 = direct.stack(theta0, "beta")
      output_rates = data.rates[:, 1]

      def beta_path(t):
        beta, start = jnp.broadcast_to(beta0, t.shape + beta0.shape), beta0
        phase = phase_of(t)
        for i in range(num_phases):
          last_phase = i == num_phases - 1
          local = jnp.maximum(t - boundaries[i], 0.0)
          local = local if last_phase else jnp.minimum(local, data.durations[i])
          solve = output_phase.output_flow_solver(hessian, target, metric, start,
                                                  output_rates[i])
          beta = jnp.where((phase == i)[..., None], solve(local), beta)
          if not last_phase:
            start = solve(data.durations[i][None])[0]
        return beta

      def evaluate(t):
        beta = beta_path(jnp.atleast_1d(t))[0]
        return ravel_pytree(direct.unstack(theta0, "beta", beta))[0]

      t_stop, raw_ys = t1, jax.vmap(evaluate)(times)
      y_stop = evaluate(t1)
      stopped, solver_failed = risk_of(unravel(y_stop)) <= epsilon, jnp.array(False)
      stats = {"num_accepted_steps": jnp.array(0), "num_rejected_steps": jnp.array(0)}
      last_step_start = None
    elif solver == "rodas5p":
      def field(t, y):
        value, gradient = per_token_gradient(y)
        return value, -coordinate_rates[phase_of(t)] * gradient

      def stop(value, f, y):
        # A non-finite gradient ends the run too (status NONFINITE_GRADIENT below).
        return ends_the_run(None, y, None, value=value) | ~jnp.all(jnp.isfinite(f))

      solution = rosenbrock.solve(field, y0, t1, inner, stop, rtol=rtol, atol=atol,
                                  max_steps=max_steps)
      t_stop = solution.t_final
      raw_ys = jax.vmap(solution.evaluate)(jnp.clip(times, 0.0, t_stop))
      y_stop = jnp.where(trained, solution.y_final, y0)
      stopped = solution.result == rosenbrock.STOPPED
      solver_failed = solution.result == rosenbrock.FAILED
      evaluate = solution.evaluate
      stats = {"num_accepted_steps": solution.num_accepted,
               "num_rejected_steps": solution.num_rejected}
      last_step_start = solution.ts[jnp.maximum(solution.num_accepted - 1, 0)]
    else:
      step_controller = (controller if num_phases == 1 else
                         diffrax.ClipStepSizeController(controller, jump_ts=inner))
      solution = diffrax.diffeqsolve(
          diffrax.ODETerm(vector_field), solver_instance, 0.0, t1, None, y0,
          stepsize_controller=step_controller,
          saveat=diffrax.SaveAt(ts=times, t1=True, dense=True),
          event=diffrax.Event(ends_the_run), max_steps=max_steps, throw=False)
      # diffrax writes its saves in order and fills the unused ones with inf: after an
      # event, the final save (t1=True) follows the last record time reached.
      last = jnp.sum(jnp.isfinite(solution.ts)) - 1
      t_stop, raw_ys = solution.ts[last], solution.ys[:-1]
      y_stop = jnp.where(trained, solution.ys[last], y0)
      stopped = solution.result == diffrax.RESULTS.event_occurred
      solver_failed = ~((solution.result == diffrax.RESULTS.successful) | stopped)
      evaluate, stats = solution.evaluate, solution.stats
      steps_taken = solution.interpolation
      last_step_start = steps_taken.ts[jnp.maximum(steps_taken.ts_size - 2, 0)]
    if solver == "rodas5p" and not linear:
      # The solver evaluated the end state (its last Jacobian): no further copy of the route.
      end_value, end_gradient = solution.value_final, solution.f_final
    else:
      end_value, end_gradient = per_token_gradient(y_stop)
    end_points = points_needed(unravel(y_stop))
    status = jnp.select(
        [solver_failed, end_points >= GRID_MARGIN * grid_size, ~jnp.isfinite(end_value),
         end_value > max_risk,
         ~jnp.all(jnp.isfinite(end_gradient)), stopped & (end_value <= epsilon)],
        [SOLVER_STOPPED, GRID_EXCEEDED, NONFINITE_RISK, ABOVE_MAX, NONFINITE_GRADIENT,
         EPSILON], COMPLETED)
    diverged = status >= NONFINITE_RISK

    def state_at(t, until):
      return jnp.where(trained, evaluate(jnp.clip(t, 0.0, until)), y0)

    def record(y, t):
      """The records at state y and time t: one value and gradient of the route."""
      params = unravel(y)
      token_params = direct.expand_params(partition, params)
      value, grads = value_and_grad(params)
      flat_grads, _ = ravel_pytree(grads)
      gradient, _ = ravel_pytree(direct.per_token_gradients(grads, sizes))
      rates = coordinate_rates[phase_of(t)]
      return {"risk": value, "alpha": direct.attention_vector(token_params),
              "beta": direct.output_vector(token_params),
              # -dR/dt = ⟨∇R, r ⊙ ∇̃R⟩, the integrand of the energy identity (§5).
              "dissipation": jnp.vdot(flat_grads, rates * gradient),
              # The route is NaN outside its grid (§3a): covered iff θ needs at most its nodes.
              "grid_covered": points_needed(params) <= grid_size}

    start_alpha = direct.attention_vector(direct.expand_params(partition, theta0))
    start_beta = direct.output_vector(direct.expand_params(partition, theta0))

    def moved(y):
      token_params = direct.expand_params(partition, unravel(y))
      return (jnp.linalg.norm(direct.attention_vector(token_params) - start_alpha),
              jnp.linalg.norm(direct.output_vector(token_params) - start_beta))

    # Everything after the solve that evaluates the route runs in one loop over one `record`
    # (one copy of the route in the compiled program), in three stretches:
    # 1. τ_ε: the run stops at the end of the first step where R ≤ ε; R never rises along the
    #    flow (dR/dt = -⟨∇R, r ⊙ ∇̃R⟩ ≤ 0, §5), so τ_ε lies in that last step, where it is
    #    bisected on the dense output (the exact linear path: on [0, t1], with more halvings);
    #    skipped unless ε was reached;
    # 2. the records at the record times (past the end: the end state, as a diverged loop
    #    holds its last state) and the risk a decade earlier (the plateau level), 2R states;
    # 3. the plateau exit, bracketed by the records, bisected (two risks a halving).
    reached_epsilon = status == EPSILON
    record_count = times.shape[0]
    epsilon_steps = BISECTION_STEPS if last_step_start is not None else LINEAR_BISECTION_STEPS
    epsilon_start = 0.0 if last_step_start is None else last_step_start
    first_record = epsilon_steps
    first_plateau = first_record + 2 * record_count
    total = first_plateau + 2 * BISECTION_STEPS
    stop_ys = jnp.where((times <= t_stop)[:, None] & trained, raw_ys, y_stop)
    template = jax.eval_shape(record, y0, times[0])
    buffers = jax.tree_util.tree_map(
        lambda leaf: jnp.zeros((2 * record_count, *leaf.shape), leaf.dtype), template)

    def ends_of(bracket):
      """(τ_ε or NaN, t_end, the end state) from τ_ε's bracket."""
      tau = jnp.where(reached_epsilon, bracket[1], jnp.nan)
      t_end = jnp.where(reached_epsilon, tau, t_stop)
      return tau, t_end, jnp.where(reached_epsilon, state_at(tau, t_stop), y_stop)

    def plateau_bracket(recorded, t_end):
      """The records that bracket the plateau exit: (lo, hi), and whether any crossed."""
      risks = recorded["risk"]
      crossed = ((times > 0) & (times <= t_end)
                 & (risks[:record_count] - (1 - plateau_drop) * risks[record_count:] <= 0))
      first = jnp.argmax(crossed)
      hi = jnp.minimum(times[first], t_end)
      lo = jnp.where(first > 0, times[jnp.maximum(first - 1, 0)], 0.0)
      return jnp.stack([lo, hi]), crossed.any()

    def post(carry):
      i, epsilon_bracket, recorded, plateau, plateau_risk = carry
      tau, t_end, y_end = ends_of(epsilon_bracket)
      record_index = jnp.clip(i - first_record, 0, 2 * record_count - 1)
      in_records = (i >= first_record) & (i < first_plateau)
      # Entering the plateau stretch: its bracket from the records.
      plateau = jnp.where(i == first_plateau, plateau_bracket(recorded, t_end)[0], plateau)
      epsilon_mid, plateau_mid = 0.5 * epsilon_bracket.sum(), 0.5 * plateau.sum()
      second = (i - first_plateau) % 2 == 1
      record_time = times[record_index % record_count]
      record_y = jnp.where(record_index < record_count,
                           jnp.where(record_time <= t_end, stop_ys[record_index % record_count],
                                     y_end),
                           state_at(record_time / PLATEAU_WINDOW, t_end))
      record_t = jnp.where(record_index < record_count, jnp.minimum(record_time, t_end),
                           record_time / PLATEAU_WINDOW)
      plateau_t = jnp.where(second, plateau_mid / PLATEAU_WINDOW, plateau_mid)
      y = jnp.where(i < first_record, state_at(epsilon_mid, t_stop),
                    jnp.where(in_records, record_y, state_at(plateau_t, t_end)))
      t = jnp.where(i < first_record, epsilon_mid, jnp.where(in_records, record_t, plateau_t))
      out = record(y, t)
      below = out["risk"] - epsilon <= 0
      epsilon_bracket = jnp.where(
          i < first_record,
          jnp.where(below, jnp.stack([epsilon_bracket[0], epsilon_mid]),
                    jnp.stack([epsilon_mid, epsilon_bracket[1]])), epsilon_bracket)
      recorded = jax.tree_util.tree_map(
          lambda buffer, value: buffer.at[record_index].set(
              jnp.where(in_records, value, buffer[record_index])), recorded, out)
      fell = plateau_risk - (1 - plateau_drop) * out["risk"] <= 0
      plateau = jnp.where((i >= first_plateau) & second,
                          jnp.where(fell, jnp.stack([plateau[0], plateau_mid]),
                                    jnp.stack([plateau_mid, plateau[1]])), plateau)
      plateau_risk = jnp.where((i >= first_plateau) & ~second, out["risk"], plateau_risk)
      return i + 1, epsilon_bracket, recorded, plateau, plateau_risk

    _, epsilon_bracket, both, plateau, _ = jax.lax.while_loop(
        lambda carry: carry[0] < total, post,
        (jnp.where(reached_epsilon, 0, first_record),
         jnp.stack([jnp.minimum(epsilon_start, t_stop), t_stop]), buffers,
         jnp.zeros(2), jnp.zeros(())))
    tau_eps, t_end, y_end = ends_of(epsilon_bracket)
    reached = times <= t_end
    ys = jnp.where(reached[:, None], stop_ys, y_end)
    recorded = jax.tree_util.tree_map(lambda value: value[:record_count], both)
    plateau_exit = jnp.where(plateau_bracket(both, t_end)[1], plateau[1], jnp.nan)
    if sharpness:
      # The Hessian of the groups the phase moves, in the per-token metric (§5d).
      recorded["sharpness"] = jax.vmap(lambda y, t: train.stepped_sharpness(
          risk_of, unravel(y), sharpness, sizes=sizes, trains=data.rates[phase_of(t)] > 0,
          labels=labels))(ys, jnp.minimum(times, t_end))
      recorded = {"sharpness": recorded.pop("sharpness"), **recorded}

    # The half-progress times: bracketed by the records, bisected on the dense output alone.
    moved_alpha, moved_beta = jax.vmap(moved)(ys)
    half_alpha, half_beta = 0.5 * moved_alpha.max(), 0.5 * moved_beta.max()

    def levels(t):
      """half - ‖α - α0‖ and half - ‖β - β0‖ at the times t (2,)."""
      return jnp.stack([half_alpha - moved(state_at(t[0], t_end))[0],
                        half_beta - moved(state_at(t[1], t_end))[1]])

    crossed = jnp.stack([(half_alpha > 0) & (half_alpha - moved_alpha <= 0),
                         (half_beta > 0) & (half_beta - moved_beta <= 0)])
    half_times = _bisect(levels, crossed, times, t_end)

    steps = _steps_of_times(times, boundaries, data)
    grid_covered = jnp.all(recorded.pop("grid_covered"))
    fields = {name: recorded.pop(name) for name in ("risk", "alpha", "beta")}
    summary = {"status": status, "t_end": t_end,
               "tau_eps": tau_eps,
               "half_time_alpha": half_times[0], "half_time_beta": half_times[1],
               "plateau_exit": plateau_exit, "grid_covered": grid_covered,
               "grid_points_needed": end_points,
               "num_steps": stats["num_accepted_steps"],
               "num_rejected": stats["num_rejected_steps"]}
    trajectory = Trajectory(params=unravel(y_end), steps=steps, time=times, diverged=diverged,
                      diverged_step=jnp.where(diverged, _steps_of_times(t_end, boundaries,
                                                                        data), -1),
                      records=recorded, summary=summary,
                      info=(("route", population.name), ("solver", solver),
                            ("tied", partition.num_groups < lang.d)), **fields)
    if with_solution:
      return trajectory, (solution, trained, y0, t_end)  # with_solution runs the solver
    return trajectory

  return run


def status(trajectory: Trajectory) -> str:
  """What ended a flow run (docs/theory.md §5c): its summary's status code, in words.

  Args:
    trajectory: a Trajectory returned by lj.flow (one run).

  Returns:
    One of STATUS, with the time the run stopped.

  Example:
    >>> run = lj.flow(lj.occurrence(3), lj.plans.output_only(1.0, 10), num_records=8)
    >>> lj.dynamics.flow.status(run)
    'completed at t = 10'
  """
  return f"{STATUS[int(trajectory.summary['status'])]} at t = {float(trajectory.t_end):.6g}"


def _check_options(t1, rtol, atol, solver, records, num_records, epsilon, plateau_drop,
                   max_steps, num_points):
  if t1 is not None:
    t1 = plans._positive("t1", t1)
  rtol, atol = plans._positive("rtol", rtol), plans._positive("atol", atol)
  validation.check_choice("solver", solver, tuple(SOLVERS))
  if isinstance(records, str):
    validation.check_choice("records", records, RECORDS)
  num_records = validation.check_int("num_records", num_records, 1, integral_floats=True)
  if epsilon is not None:
    epsilon = plans._positive("epsilon", epsilon)
  plateau_drop = validation.check_real("plateau_drop", plateau_drop, minimum=0.0, strict=True,
                                       maximum=1.0, strict_max=True)
  max_steps = validation.check_int("max_steps", max_steps, 1, integral_floats=True)
  num_points = coverage.check_num_points(num_points)
  return t1, rtol, atol, num_records, epsilon, plateau_drop, max_steps, num_points


def _given_times(records, t1) -> np.ndarray:
  """Record times given as an array: finite, rising (ties allowed) from 0 to t1."""
  times = np.asarray(records, np.float64)
  if (times.ndim != 1 or times.size < 2 or not np.all(np.isfinite(times)) or times[0] != 0.0
      or times[-1] != t1 or np.any(np.diff(times) < 0)):
    raise ValueError(f"records must be 'geometric', 'uniform' or an array of times rising "
                     f"from 0 to t1 = {t1:g}; got {np.array2string(times, threshold=6)}.")
  return times


def flow(lang: languages.Language, plan, theta0=None, *, t1: float | None = None,
         loss="squared", route: str = "auto", solver: str = "rodas5p", rtol: float = 1e-8,
         atol: float = 1e-10, num_records: int = 64, records: str = "geometric",
         epsilon: float | None = None, plateau_drop: float = 0.5,
         max_risk: float = runner.MAX_VALUE, max_steps: int = 16_384, tied="auto",
         num_points: int | None = None, dense: bool = False, closed_form: bool = True,
         sharpness: int = 0, optimization_level: int | None = None):
  """Runs `plan` on `lang` from θ0 (default zero) as exact population gradient flow
  (docs/theory.md §5c; per-token gradients on tied groups: §3b), mirroring lj.train.

  A GD plan is read as its flow form (plans.flow_form): a phase of k steps of size η
  lasts k·η time units, so lj.flow(lang, lj.plans.joint(1.0, 300)) flows to t = 300 and
  lj.train's GD at η follows it up to O(η).

  Args:
    lang: the language.
    plan: a lj.plans.Plan (constant step sizes, plain GD, population objectives) or a
      lj.plans.FlowPlan (durations and rates given directly, e.g. plans.flow_plan).
    theta0: per-token initial parameters; None is θ0 = 0 (no CLS).
    t1: the end time; None for the plan's duration. Past it the last phase goes on.
    loss: "squared" (default), "logistic" or a callable.
    route: the population route ("auto" or a name of risk.ROUTES, §3).
    solver: "rodas5p" (default: linearly implicit, stiff; lagjax/dynamics/rosenbrock.py),
      "kvaerno5", "kvaerno4", "kvaerno3" (diffrax's implicit ESDIRK methods, stiff) or
      "tsit5", "dopri5" (explicit).
    rtol, atol: the tolerances of the adaptive step-size controller (and of its Newton
      iterations).
    num_records: K, the number of grid records.
    records: "geometric" (0, then K times from min(1, t1/K) to t1) or "uniform" (K + 1
      times from 0 to t1), every phase boundary recorded too; or an array of times rising
      from 0 to t1 (a new length compiles anew).
    epsilon: R ≤ ε ends the run at τ_ε, the first time R = ε (summary tau_eps); None
      never ends it early.
    plateau_drop: the run leaves a plateau when R(t) ≤ (1 - plateau_drop)·R(t/10).
    max_risk: a risk above this ends the run as diverged.
    max_steps: the solver's step budget; a run that needs more ends as diverged.
    tied: "auto" (tie when exact), True (require), False (simulate all d tokens).
    num_points: the quadrature grid of a quadrature route (Laplace, transfer); None
      starts at the route's default size and re-sizes it (risk/coverage.py's ladder)
      whenever θ nears its edge, so the grid never ends the run; "smallest" does the same
      from the smallest size of the ladder that covers θ0 (a rerun from scratch at each
      re-size; far cheaper where θ stays near that size, e.g. 1,448 → 362 nodes under the
      position tables, with the same risks within roundoff); an int fixes it (then a run
      reaching its edge ends as diverged).
    dense: also return the dense output (then the solver runs every phase).
    closed_form: a plan whose phases all train β alone follows the exact solution of the
      linear phase (§4; on the plain layout, squared loss, a route with the moments H, g)
      instead of the solver; False forces the solver.
    sharpness: k ≥ 1 records the k largest eigenvalues of the Hessian on the groups each
      phase moves, in the per-token metric, at every record (train.stepped_sharpness,
      docs/theory.md §5d), and summary max_sharpness and end_sharpness; 0 (default): none.
    optimization_level: XLA's backend optimisation level (0-3) for this run's program
      (jax.jit's compiler_options), whatever XLA_FLAGS say; None (default) leaves it to them.
      A setting of speed, never of the mathematics: a long flow compiled at level 0 (which
      a test suite may set for compile speed) runs many times slower.

  Returns:
    With dense, the pair (Trajectory, path), path(t) -> per-token θ(t) (jitted) for any
    t in [0, t_end]. Otherwise the Trajectory of lj.train (per-token values), recorded at
    `time` (R,):

    - time (R,) the record times; steps (R,) the GD step of each time (t/η within each
      phase of a GD plan, floor(t) for a FlowPlan);
    - risk, alpha, beta (R,), (R, ·), (R, ·), as lj.train records them; records:
      dissipation (R,), -dR/dt = ⟨∇R, r ⊙ ∇̃R⟩ (the energy identity's integrand);
    - diverged, diverged_step: a non-finite risk or gradient, a risk above max_risk, or a
      solver that stopped; the records past the end hold the final state;
    - summary: status (an index of flow.STATUS; `status(run)` says it in words), t_end,
      tau_eps (the time R = ε, NaN if not reached), half_time_alpha, half_time_beta (the
      times each group first reaches half its largest recorded move, NaN if it never
      moves), plateau_exit (NaN if none), grid_covered, num_steps, num_rejected;
    - info: route, solver, tied, and grid_points when the grid was re-sized.

  Raises:
    ValueError: one line naming the field: t1, rtol, atol, epsilon ≤ 0 or non-finite, an
      unknown solver or records, a plan without a flow form (a phase of zero duration, a
      schedule, another optimizer, an empirical objective).

  Example:
    >>> lang = lj.occurrence(3)  # the output flow from 0 settles at the best β for α = 0 (§4)
    >>> run = lj.flow(lang, lj.plans.output_only(1.0, 1000), num_records=8)
    >>> run
    Trajectory: 9 records, steps 0…1000, not diverged
      risk 0.5 → 0.139326; alpha (9, 3), beta (9, 3)
      time: recorded; records: dissipation; summary: grid_covered, ...
      info: route='laplace', solver='rodas5p', tied=True
    >>> run.time[-1].item(), lj.dynamics.flow.status(run)
    (1000.0, 'completed at t = 1000')
    >>> gd = lj.train(lang, lj.plans.output_only(0.01, 1000))  # GD at η = 0.01 to t = 10
    >>> at_10 = lj.flow(lang, lj.plans.output_only(1.0, 10), num_records=8)
    >>> abs(float(gd.risk[-1]) - float(at_10.risk[-1])) < 0.01  # O(η) apart
    True
    >>> lj.flow(lang, lj.plans.output_only(1.0, 10), rtol=0.0)
    Traceback (most recent call last):
    ...
    ValueError: rtol must be a finite real > 0; got 0.0.
  """
  validation.require_float64("lj.flow")
  languages.check_language(lang, "lj.flow")
  t1, rtol, atol, num_records, epsilon, plateau_drop, max_steps, num_points = _check_options(
      t1, rtol, atol, solver, records, num_records, epsilon, plateau_drop, max_steps,
      num_points)
  xla_flags.compiler_options(optimization_level)   # checked here, before any work
  _, max_risk = runner.check_run_options(plans.joint(1.0, 1), 1, max_risk)
  flow_plan = plans.flow_form(plan)
  theta0 = direct.init_params(lang.d) if theta0 is None else theta0
  direct.check_params(theta0, lang.d)
  partition = train.choose_partition(lang, theta0, plans.joint(1.0, 1), tied)
  layout = direct.layout(theta0)
  t1 = flow_plan.total_duration if t1 is None else t1
  given = None if isinstance(records, str) else _given_times(records, t1)
  kind, size = ("given", given.size - 1) if given is not None else (records, num_records)
  grouped = direct.group_params(partition, theta0)
  sharpness = train.check_sharpness(sharpness, grouped)
  arguments = (grouped, flow_plan.data(), jnp.float64(t1),
               jnp.float64(-1.0 if epsilon is None else epsilon), jnp.float64(plateau_drop))
  if given is not None:
    arguments += (jnp.asarray(given),)
  route = flow_plan.objective.route if route == "auto" else route
  output_only = bool(closed_form) and all(p.group == "output" for p in flow_plan.phases)

  def attempt(points):
    run = _compiled_flow(lang, partition, len(flow_plan.phases), loss, route, layout, solver,
                         rtol, atol, size, kind, max_risk, max_steps, points, dense,
                         output_only, sharpness, optimization_level)
    return run(*arguments)

  def stopped_at(result):
    run = result[0] if dense else result
    if int(run.summary["status"]) != GRID_EXCEEDED:
      return None
    # The stop came at GRID_MARGIN of the grid: ask for a grid a margin above it.
    return float(run.summary["grid_points_needed"]) / GRID_MARGIN + 1

  if train.build_route_spec(lang, loss, route, layout).quadrature:
    windows = coverage.windows(partition.num_groups, layout)
    # A run stops at GRID_MARGIN of its grid: θ0 needs a size a margin above its nodes.
    first, fixed = coverage.first_size(
        lang, num_points, windows, lambda: coverage.needed(lang, theta0) / GRID_MARGIN + 1)
    resized = coverage.resize(attempt, lang, windows, stopped_at=stopped_at,
                              num_points=first, fixed=fixed)
    result = resized.result
    info = (("grid_points", resized.num_points),) if resized.failures else ()
  else:
    result, info = attempt(None), ()
  trajectory = result[0] if dense else result
  summary = dict(trajectory.summary)
  if sharpness:
    # η·λ_max > 2 has no meaning for a flow: its largest and final λ_max only (§5d).
    top = trajectory.records["sharpness"][:, 0]
    summary.update(max_sharpness=jnp.nanmax(top), end_sharpness=top[-1])
  trajectory = dataclasses.replace(
      trajectory, params=direct.expand_params(partition, trajectory.params),
      info=tuple(trajectory.info) + info, summary=summary)
  if not dense:
    return trajectory
  solution, trained, y0, t_end = result[1]
  _, unravel = ravel_pytree(grouped)

  @jax.jit
  def path(t):
    state = jnp.where(trained, solution.evaluate(jnp.clip(t, 0.0, t_end)), y0)
    return direct.expand_params(partition, unravel(state))

  return trajectory, path


@functools.lru_cache(maxsize=16)
def _compiled_flow(lang, partition, num_phases, loss, route, layout, solver, rtol, atol,
                   num_records, records, max_risk, max_steps, num_points, dense,
                   output_only, sharpness=0, optimization_level=None):
  return jax.jit(make_flow(lang, partition, num_phases=num_phases, loss=loss, route=route,
                           layout=layout, solver=solver, rtol=rtol, atol=atol,
                           num_records=num_records, records=records, max_risk=max_risk,
                           max_steps=max_steps, num_points=num_points,
                           with_solution=dense, output_only=output_only,
                           sharpness=sharpness),
                 compiler_options=xla_flags.compiler_options(optimization_level))
