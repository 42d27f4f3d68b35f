"""lj.flow, the gradient flow of a plan (lagjax/dynamics/flow.py; docs/theory.md §5, §5b).

Quick tests share one compiled program (occurrence d = 3, one phase, 8 geometric records,
default tolerances): durations, rates, t1 and ε are traced, so the flows to other times
reuse it, which test_second_flow_does_not_recompile checks. Tolerances: the solver's
local error per step is held at rtol·|θ| + atol = 1e-8·|θ| + 1e-10; over a run of a few
dozen steps on a contracting flow the global error stays within ~1e-7 relative, so
comparisons between two flows (or a flow and an event found by bisection on the dense
output, 2^-40 of a record gap) use 1e-6. GD at step η is the explicit Euler scheme of the
flow, with a global error O(η): its test checks the order, not a tolerance.
"""

import dataclasses
import logging

import jax
import numpy as np
import optax
import pytest

import lagjax as lj
from lagjax.dynamics import engines, flow, plans
from lagjax.dynamics.trajectory import Trajectory

LANG = lj.occurrence(3)
RECORDS = 8
SOLVER_TOLERANCE = 1e-6


def quick_flow(plan, **options):
  """A flow through the quick tests' one compiled program: the solver, also on the
  output-only plans, whose exact linear solution (closed_form=True) is tested apart."""
  return lj.flow(LANG, plan, num_records=RECORDS, closed_form=False, **options)


@pytest.fixture(scope="module")
def output_run():
  return quick_flow(lj.plans.output_only(1.0, 100))


@pytest.mark.slow
def test_output_only_plans_follow_the_exact_linear_solution(output_run):
  """closed_form=True (the default) runs an output-only plan through
  output_phase.output_flow_solver: no solver steps, and the solver's path to its tolerance
  (local error 1e-8·|θ| per step, ~1e-7 over the run)."""
  exact = lj.flow(LANG, lj.plans.output_only(1.0, 100), num_records=RECORDS)
  assert int(exact.num_steps) == 0 and int(output_run.num_steps) > 0
  np.testing.assert_allclose(np.asarray(exact.beta), np.asarray(output_run.beta),
                             atol=1e-6)
  np.testing.assert_allclose(np.asarray(exact.risk), np.asarray(output_run.risk), rtol=1e-6)
  assert np.all(np.asarray(exact.alpha) == 0.0)


# ---------------------------------------------------------------------------------------
# Bad input: one line naming the field.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "field"), [
    ({"t1": 0.0}, "t1"), ({"t1": -3.0}, "t1"), ({"t1": float("inf")}, "t1"),
    ({"t1": float("nan")}, "t1"), ({"rtol": 0.0}, "rtol"), ({"rtol": -1e-8}, "rtol"),
    ({"atol": 0.0}, "atol"), ({"atol": float("nan")}, "atol"),
    ({"solver": "euler"}, "solver"), ({"solver": "Kvaerno5"}, "solver"),
    ({"records": "log"}, "records"), ({"records": [0.0, 5.0]}, "records"),
    ({"epsilon": 0.0}, "epsilon"), ({"plateau_drop": 1.0}, "plateau_drop"),
    ({"num_records": 0}, "num_records"), ({"max_risk": 0.0}, "max_risk"),
    ({"optimization_level": 4}, "optimization_level"),
])
def test_bad_options_fail_in_one_line_naming_the_field(options, field):
  with pytest.raises(ValueError) as error:
    lj.flow(LANG, lj.plans.joint(1.0, 10), **options)
  message = str(error.value)
  assert "\n" not in message and message.startswith(field), message


@pytest.mark.slow   # two compiles of one flow
def test_optimization_level_changes_the_program_not_the_flow(jit_options):
  """A flow compiled at XLA level 2 (not the suite's -O0; the option reaches jax.jit) ends
  where the default one does, within roundoff carried by the solver: both take the same
  accepted steps here (the step controller reads the error estimate only to ~1e-3, far above
  1e-16 changes)."""
  plan = lj.plans.joint(1.0, 30)
  default = lj.flow(LANG, plan, num_records=8)
  assert {"xla_backend_optimization_level": 2} not in jit_options
  level_2 = lj.flow(LANG, plan, num_records=8, optimization_level=2)
  assert {"xla_backend_optimization_level": 2} in jit_options
  assert int(level_2.summary["num_steps"]) == int(default.summary["num_steps"])
  np.testing.assert_allclose(np.asarray(level_2.risk), np.asarray(default.risk), rtol=1e-12)


def test_unknown_solver_lists_the_solvers():
  with pytest.raises(ValueError, match="kvaerno5.*tsit5"):
    lj.flow(LANG, lj.plans.joint(1.0, 10), solver="bdf")


@pytest.mark.parametrize(("plan", "says"), [
    (lj.plans.joint(0.0, 10), "phase 0 has duration k·η = 0"),
    (lj.plans.three_phase(1.0, 0.0, 1.0, 5), "phase 1 has duration k·η = 0"),
    (lj.plans.joint(optax.constant_schedule(0.1), 10), "schedule"),
    (lj.plans.joint(0.1, 10, optimizer=optax.adam), "optimizer adam"),
    (lj.plans.joint(0.1, 10, objective=lj.plans.Empirical(100)), "population risk"),
    ("joint", "lj.plans.Plan or lj.plans.FlowPlan"),
])
def test_plans_without_a_flow_form_are_refused_in_one_line(plan, says):
  with pytest.raises(ValueError) as error:
    lj.flow(LANG, plan)
  assert says in str(error.value) and "\n" not in str(error.value)


def test_flow_engine_refuses_what_it_does_not_support_in_one_line():
  plan = lj.plans.joint(0.1, 10, optimizer=optax.adam)
  with pytest.raises(ValueError, match=r"^engine 'flow' cannot run plan 'joint': plan phase 0 "
                                       r"uses the optimizer adam[^\n]*$"):
    engines.choose(LANG, plan, engine="flow")


@pytest.mark.parametrize(("build", "field"), [
    (lambda: lj.plans.FlowPhase("output", 0.0), "FlowPhase duration"),
    (lambda: lj.plans.FlowPhase("output", 1.0, rate=0.0), "FlowPhase rate"),
    (lambda: lj.plans.FlowPhase("output", float("inf")), "FlowPhase duration"),
    (lambda: lj.plans.FlowPhase("beta", 1.0), "FlowPhase group"),
    (lambda: lj.plans.FlowPlan(()), "a flow plan needs at least one phase"),
    (lambda: lj.plans.flow_plan("three_phase", (1.0, 2.0)), "flow plan 'three_phase' takes"),
    (lambda: lj.plans.flow_plan("joint", (1.0,), rates=(-1.0,)), "FlowPhase rate"),
])
def test_bad_flow_phases_fail_in_one_line(build, field):
  with pytest.raises(ValueError) as error:
    build()
  assert str(error.value).startswith(field) and "\n" not in str(error.value)


# ---------------------------------------------------------------------------------------
# Flow forms of plans.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", lj.plans.plan_names())
def test_every_named_plan_has_a_flow_form(name):
  """k steps of η become duration k·η at rate 1 on the phase's groups, η kept for `steps`."""
  spec = lj.plans.get_plan(name)
  etas = [0.5 * (i + 1) for i in range(len(spec.step_sizes))]
  plan = spec.build(etas, 7, phase_steps=(3,) * (len(spec.groups) - 1))
  form = plan.flow_form()
  assert form.name == name
  assert [p.group for p in form.phases] == list(spec.groups)
  assert [p.duration for p in form.phases] == [p.eta * p.steps for p in plan.phases]
  assert [p.step_size for p in form.phases] == [p.eta for p in plan.phases]
  continuous = lj.plans.flow_plan(name, [p.duration for p in form.phases])
  np.testing.assert_array_equal(continuous.boundaries, form.boundaries)
  np.testing.assert_array_equal(continuous.data().rates, form.data().rates)


def test_flow_form_of_three_phase_boundaries_and_rates():
  form = lj.plans.three_phase(50.0, 2500.0, 1.0, 300).flow_form()
  assert form.boundaries.tolist() == [0.0, 50.0, 2550.0, 2850.0]
  assert form.data().rates.tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
  assert lj.plans.flow_form(form) is form


# ---------------------------------------------------------------------------------------
# The run record.
# ---------------------------------------------------------------------------------------


def test_flow_returns_trains_record_with_time(output_run):
  gd = lj.train(LANG, lj.plans.output_only(1.0, 3))
  assert isinstance(output_run, Trajectory)
  assert [f.name for f in dataclasses.fields(output_run)] == [
      f.name for f in dataclasses.fields(gd)]
  assert output_run.alpha.shape[1:] == gd.alpha.shape[1:]
  assert output_run.params.keys() == gd.params.keys()
  time = np.asarray(output_run.time)
  # 0, then geometric from 1 to t1 = 100.
  np.testing.assert_allclose(time, np.append(0.0, np.geomspace(1.0, 100.0, RECORDS)),
                             rtol=1e-15)
  assert np.asarray(output_run.steps).tolist() == np.floor(time * (1 + 1e-12)).astype(
      int).tolist()
  assert flow.status(output_run) == "completed at t = 100"
  assert not bool(output_run.diverged) and int(output_run.diverged_step) == -1


def test_untrained_group_stays_exactly_put_and_lag_reads_time(output_run):
  """Output-only from 0: α never moves (exactly), so its half-time is NaN (-1 in lag()); β's
  half-time from the dense output lies in the record gap where r_β crosses ½."""
  assert np.all(np.asarray(output_run.alpha) == 0.0)
  assert np.isnan(float(output_run.half_time_alpha))
  lag = output_run.lag()
  assert int(lag.half_time_alpha) == -1
  time = np.asarray(output_run.time)
  half = float(output_run.half_time_beta)
  crossing = int(np.argmax(np.asarray(lag.r_beta) >= 0.5))
  assert time[crossing - 1] < half <= time[crossing]
  assert float(lag.half_time_beta) == time[crossing]  # the record, in time units


def test_half_time_is_where_beta_has_moved_half_its_largest_move(output_run):
  beta = np.asarray(output_run.beta)
  largest = np.linalg.norm(beta - beta[0], axis=1).max()
  half = float(output_run.half_time_beta)
  there = quick_flow(lj.plans.output_only(1.0, 100), t1=half)
  moved = np.linalg.norm(np.asarray(there.beta[-1]) - beta[0])
  np.testing.assert_allclose(moved, 0.5 * largest, rtol=SOLVER_TOLERANCE)


def test_flow_to_a_shorter_t1_is_the_same_path(output_run):
  """The flow to t = 10 ends where the flow to 100 passes at 10 (dense output vs a run)."""
  short = quick_flow(lj.plans.output_only(1.0, 100), t1=10.0)
  assert float(short.time[-1]) == 10.0
  long_beta = np.asarray(output_run.beta)
  long_time = np.asarray(output_run.time)
  # Records at 1, 1.93, 3.73, 7.20, 13.9 … in the long run: compare the shared record at 1.
  np.testing.assert_allclose(np.asarray(short.beta[1]), long_beta[1], rtol=SOLVER_TOLERANCE)
  assert long_time[1] == float(short.time[1]) == 1.0


def test_epsilon_ends_the_run_at_the_crossing():
  """R ≤ ε ends the run at τ_ε (bisected on the dense output), where R = ε: a flow to
  t1 = τ_ε ends at risk ε, to the solver's tolerance."""
  epsilon = 0.2
  run = quick_flow(lj.plans.output_only(1.0, 100), epsilon=epsilon)
  assert flow.STATUS[int(run.status)] == "epsilon reached" and not bool(run.diverged)
  tau = float(run.tau_eps)
  assert 0 < tau == float(run.t_end) < 100.0  # the run ends at the crossing
  at_tau = quick_flow(lj.plans.output_only(1.0, 100), t1=tau)
  np.testing.assert_allclose(float(at_tau.risk[-1]), epsilon, rtol=SOLVER_TOLERANCE)
  # Records past the end hold the state at τ_ε, where R = ε.
  time = np.asarray(run.time)
  after = time > tau
  assert after.any() and not after[np.asarray(run.risk) > epsilon + 1e-12].any()
  np.testing.assert_allclose(np.asarray(run.risk)[after], epsilon, rtol=SOLVER_TOLERANCE)
  np.testing.assert_allclose(np.asarray(run.beta)[after],
                             np.broadcast_to(np.asarray(at_tau.beta[-1]),
                                             np.asarray(run.beta)[after].shape),
                             rtol=SOLVER_TOLERANCE)


def test_plateau_exit_is_where_the_risk_falls_below_the_level_a_decade_earlier():
  """R(t_exit) = (1 - drop)·R(t_exit/10), checked with flows to t_exit and t_exit/10; drop
  0.3 (not ½, where drop and 1 - drop would agree)."""
  drop = 0.3
  run = quick_flow(lj.plans.output_only(1.0, 100), plateau_drop=drop)
  exit_time = float(run.plateau_exit)
  assert 0 < exit_time < 100.0
  at_exit = quick_flow(lj.plans.output_only(1.0, 100), t1=exit_time)
  earlier = quick_flow(lj.plans.output_only(1.0, 100), t1=exit_time / 10)
  np.testing.assert_allclose(float(at_exit.risk[-1]), (1 - drop) * float(earlier.risk[-1]),
                             rtol=SOLVER_TOLERANCE)


def test_second_flow_does_not_recompile(output_run, caplog):
  """New durations, rates (a continuous plan), t1 and ε: nothing compiles (JAX logs one
  "Compiling" record per XLA compilation under jax.log_compiles)."""
  del output_run  # compiled the program
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level(logging.DEBUG, logger="jax"):
    quick_flow(lj.plans.output_only(0.5, 30), epsilon=0.3)
    quick_flow(lj.plans.flow_plan("output_only", (12.0,), rates=(2.0,)), t1=20.0)
  compiled = [r.getMessage()[:120] for r in caplog.records if "Compiling" in r.getMessage()]
  assert compiled == []


# ---------------------------------------------------------------------------------------
# Agreement with GD, the engine contract, divergence, phases (each compiles its own).
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_output_flow_is_the_limit_of_gd_at_order_one():
  """GD at η for t/η steps is the explicit Euler scheme of the flow: its error at t = 10
  halves when η halves (fitted order within 1 ± 0.1) and is below η in size."""
  run = lj.flow(LANG, lj.plans.output_only(1.0, 10), records="uniform", num_records=2)
  errors = []
  for eta in (0.02, 0.01):
    gd = lj.train(LANG, lj.plans.output_only(eta, round(10 / eta)), record_every=10**6)
    errors.append(abs(float(gd.risk[-1]) - float(run.risk[-1])))
  order = np.log2(errors[0] / errors[1])
  assert abs(order - 1.0) < 0.1, (errors, order)
  assert errors[1] < 0.01


@pytest.mark.slow
def test_flow_engine_keeps_the_engine_contract():
  """engine="flow" records on the steps engine's grid (its steps), at the times of those
  steps; same fields; "auto" never takes it."""
  plan = lj.plans.three_phase(3.0, 30.0, 1.0, 12)
  assert engines.choose(LANG, lj.plans.joint(1.0, 10)) == "steps"
  by_flow = engines.build(LANG, plan, engine="flow", num_records=4)
  by_steps = engines.build(LANG, plan, engine="steps", num_records=4)
  flow_run = jax.jit(by_flow.evaluate)(np.array([3.0, 30.0, 1.0]), jax.random.key(0))
  steps_run = by_steps.evaluate(np.array([3.0, 30.0, 1.0]), jax.random.key(0))
  assert by_flow.engine == "flow"
  np.testing.assert_array_equal(np.asarray(flow_run.steps), np.asarray(steps_run.steps))
  # Step s of the plan is at time 3·min(s, 1) + 30·min(max(s - 1, 0), 1) + max(s - 2, 0).
  steps = np.asarray(flow_run.steps)
  expected = (3.0 * np.minimum(steps, 1) + 30.0 * np.clip(steps - 1, 0, 1)
              + np.maximum(steps - 2, 0))
  np.testing.assert_allclose(np.asarray(flow_run.time), expected, rtol=1e-15)
  assert flow_run.alpha.shape == steps_run.alpha.shape
  assert flow_run.partition == steps_run.partition


@pytest.mark.slow
def test_phase_boundaries_are_hit_and_rates_switch_there():
  """Three-phase flow with boundaries at t = 2 and 4: α is exactly 0 inside the first
  output phase (record t = 1) and moves in the attention phase; β stays put through it.
  Boundary records (t = 2, 4) are read from the dense output of the step that starts one
  ulp after the boundary, exact to the solver's tolerance (atol + rtol·|θ| ≈ 1e-8 here)."""
  plan = lj.plans.flow_plan("three_phase", (2.0, 2.0, 4.0))
  run = lj.flow(LANG, plan, num_records=4)
  time = np.asarray(run.time).tolist()
  assert {1.0, 2.0, 4.0, 8.0} <= set(time)
  alpha, beta = np.asarray(run.alpha), np.asarray(run.beta)
  inside_first, start, end, last = (time.index(t) for t in (1.0, 2.0, 4.0, 8.0))
  assert np.all(alpha[inside_first] == 0.0) and np.any(beta[inside_first] != 0.0)
  np.testing.assert_allclose(alpha[start], 0.0, atol=1e-8)
  assert np.abs(alpha[end]).max() > 1e-4  # attention moved in [2, 4]
  np.testing.assert_allclose(beta[end], beta[start], atol=1e-8)  # β did not
  np.testing.assert_allclose(alpha[last], alpha[end], atol=1e-8)  # α stops at t = 4
  assert np.abs(beta[last] - beta[end]).max() > 1e-4


@pytest.mark.slow
def test_a_non_finite_risk_stops_the_run_with_a_status_never_a_crash():
  """A loss that is NaN once |f| > 0.3: the flow from 0 reaches it, and the run ends
  diverged with the reason, before t1, its records finite up to the stop."""
  def loss(f, y):
    return jax.numpy.where(abs(f) > 0.3, jax.numpy.nan, 0.5 * (f - y) ** 2)

  run = lj.flow(LANG, lj.plans.output_only(1.0, 100), loss=loss, num_records=8)
  assert bool(run.diverged)
  assert flow.status(run).startswith("diverged: non-finite")
  assert float(run.t_end) < 100.0
  assert int(run.diverged_step) == int(np.floor(float(run.t_end)))
  before = np.asarray(run.time) < float(run.t_end)
  assert np.all(np.isfinite(np.asarray(run.risk)[before]))


@pytest.mark.slow
def test_dense_path_passes_through_the_records():
  run, path = lj.flow(LANG, lj.plans.joint(1.0, 50), num_records=4, dense=True)
  for t, beta in zip(np.asarray(run.time), np.asarray(run.beta)):
    np.testing.assert_allclose(np.asarray(path(t)["beta"]), beta, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_explicit_solver_agrees_with_the_implicit_one():
  plan = lj.plans.joint(1.0, 50)
  implicit = lj.flow(LANG, plan, num_records=4)
  explicit = lj.flow(LANG, plan, num_records=4, solver="tsit5")
  assert explicit.solver == "tsit5"
  np.testing.assert_allclose(np.asarray(explicit.risk), np.asarray(implicit.risk),
                             rtol=SOLVER_TOLERANCE)


def test_flow_problem_names_each_reason():
  assert plans.flow_problem(lj.plans.joint(0.5, 2)) is None
  assert "schedule" in plans.flow_problem(
      lj.plans.joint(optax.linear_schedule(1.0, 0.1, 5), 5))
