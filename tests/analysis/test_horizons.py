"""An atlas row at any horizon (lagjax/analysis/horizons.py, docs/theory.md §10): every cell
is what a direct lj.flow / lj.train call on that language and layout gives, a cell without a
number says why, and the plans, the plateau rule and the step-size bracketing do what their
docstrings say."""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.analysis import horizons, tails
from lagjax.dynamics import metrics, run_label

# The row's flow and the direct call run the same solver steps (a padding phase past t1 never
# changes the next stop, so the programs take the same steps): they agree to roundoff, far
# below this.
TOL = 1e-10


def short(**fields):
  """A short horizon: the row's machinery at a test's cost."""
  base = dict(t1=200.0, settle=20.0, attention=5.0, num_records=24, tail_window=(20.0, 200.0),
              gd_steps=120, gd_settle_steps=20, gd_grid=(1.0, 2.0),
              gd_attention_grid=(1.0, 10.0), optimum_starts=2, optimum_iterations=30)
  return horizons.Horizons(**{**base, **fields})


@pytest.mark.parametrize("field, value, message", [
    ("t1", 0.0, "horizons t1 must be a finite real > 0"),
    ("rtol", -1e-8, "horizons rtol must be a finite real > 0"),
    ("num_records", 0, "horizons num_records"),
    ("plateau_drop", 1.0, "horizons plateau_drop"),
    ("gd_grid", (), "horizons gd_grid must be a non-empty tuple"),
    ("gd_attention_grid", (1.0, -1.0), "horizons gd_attention_grid step size"),
    ("gd_cap", (2.0, 1.0), "horizons gd_cap must be \\(low, high\\)"),
    ("tail_window", (0.0, 1.0), "horizons tail_window"),
    ("settle", 1e6, "horizons settle \\+ attention must be < t1"),
    ("gd_settle_steps", 9999, "horizons gd_settle_steps must be <= gd_steps - 2"),
    ("gd_record_every", 2000, "horizons gd_record_every must leave >= 8 records"),
])
def test_bad_horizons_name_the_field(field, value, message):
  with pytest.raises(ValueError, match=f"^{message}"):
    horizons.Horizons(**{field: value})


def test_row_refuses_an_unknown_layout_plan_or_dynamics():
  lang = lj.languages.from_spec("parity")
  for options, field in ((dict(layout="first"), "layout"),
                         (dict(layout="cls", plan_names=("warmup",)), "plan name"),
                         (dict(layout="cls", dynamics=("sgd",)), "dynamics")):
    with pytest.raises(ValueError, match=f"^{field} must be one of"):
      horizons.row(lang, **options)


def test_every_plan_has_three_phases_of_its_own_durations_and_steps():
  """The flow plans end at t1 (three_phase: settle, attention, the rest) and the padding lies
  past t1; the GD plans keep their steps and step sizes, the padding splitting the last phase."""
  h = horizons.Horizons()
  for name in horizons.PLAN_NAMES:
    plan = horizons.flow_plan(name, h)
    assert math.isclose(plan.total_duration, h.t1, rel_tol=1e-15)
    padded = horizons.padded_flow_plan(plan, h.t1)
    assert len(padded.phases) == horizons.NUM_PHASES
    assert padded.boundaries[len(plan.phases)] == pytest.approx(h.t1, rel=1e-15)
    assert [p.group for p in padded.phases[:len(plan.phases)]] == list(
        lj.plans.PLANS[name].groups)
    etas = (0.5, 7.0)[:len(horizons.GD_AXES[name])]
    gd = horizons.gd_plan(name, etas, h)
    padded_gd = horizons.padded_gd_plan(gd)
    assert gd.total_steps == padded_gd.total_steps == h.gd_steps
    assert len(padded_gd.phases) == horizons.NUM_PHASES
    per_step = [(p.group, p.eta) for p in gd.phases for _ in range(p.steps)]
    assert per_step == [(p.group, p.eta) for p in padded_gd.phases for _ in range(p.steps)]
  three = horizons.gd_plan("three_phase", (0.5, 7.0), h)
  assert [(p.group, p.eta, p.steps) for p in three.phases] == [
      ("output", 0.5, 1000), ("attention", 7.0, 1), ("output", 0.5, 8999)]


def test_plateau_is_the_first_flat_decade_above_epsilon_and_its_exit_halves_the_excess():
  t = np.geomspace(1.0, 1e5, 101)
  h = horizons.Horizons()
  falling = 0.1 + 0.3 * np.exp(-t / 5.0)            # no flat decade before it is learned
  assert horizons.plateau(t, falling, 0.1, h) == (-1, -1)
  step = 0.2 - 0.1 * np.tanh((t - 3000.0) / 200.0)   # flat at 0.3 until t ≈ 3000
  start, leave = horizons.plateau(t, step, 0.1, h)
  assert t[start] == 1.0
  assert step[leave] - 0.1 <= 0.5 * (step[start] - 0.1) < step[leave - 1] - 0.1
  stuck = np.full_like(t, 0.25)                      # never left
  assert horizons.plateau(t, stuck, 0.1, h) == (0, -1)
  assert horizons.plateau(t, np.full_like(t, 0.1005), 0.1, h) == (-1, -1)  # learned: no plateau


def test_select_extends_an_edge_that_wins_stops_at_the_cap_and_breaks_ties_low():
  calls = []

  def bowl(etas):
    calls.append(etas)
    return (math.log2(etas[0]) - 3.0) ** 2 + (math.log2(etas[1]) - 1.0) ** 2

  chosen, values, note = horizons.select(bowl, [(1.0, 2.0), (1.0, 2.0, 4.0)], (0.1, 100.0))
  assert chosen == (8.0, 2.0) and note == "extended to 4, 8, 16"   # 8 is interior then
  assert len(calls) == len(set(calls)) == len(values)      # nothing evaluated twice
  chosen, _, note = horizons.select(lambda e: -e[0], [(1.0, 2.0)], (0.5, 4.0))
  assert chosen == (4.0,) and note == "extended to 4; capped at 4"
  flat = horizons.select(lambda e: 0.5, [(1.0, 2.0, 4.0)], (0.1, 100.0))
  assert flat[0] == (1.0,) and flat[2] == "interior"        # a tie takes the smallest η


def test_lag_cells_say_why_never_minus_one():
  cells = horizons._lag_cells(-1, -1, -1, "not learned by t = 1e+06")
  assert set(cells.values()) == {"not learned by t = 1e+06"}
  cells = horizons._lag_cells(40.0, np.nan, 8.0, "x")
  assert cells["half_time_attention"] == cells["half_time_ratio"] == "attention never moved"
  assert horizons._lag_cells(40.0, 12.0, 8.0, "x")["half_time_ratio"] == 1.5


@pytest.fixture(scope="module")
def tomita1_row():
  """Tomita 1 (1*), CLS query: joint learns within the short horizon, attention_only never
  moves from θ0 = 0 (β = 0 gives attention no gradient)."""
  lang = lj.languages.from_spec("tomita:1")
  h = short()
  found = lj.optimum(lang, "cls", num_starts=h.optimum_starts, iterations=h.optimum_iterations)
  row = horizons.row(lang, "cls", horizons=h, plan_names=("joint", "attention_only"),
                     found=found)
  return lang, h, found, row


@pytest.mark.slow  # two flow programs and two GD programs compiled
def test_every_cell_is_a_direct_flow_or_train_call(tomita1_row):
  """Each flow cell from lj.flow on the plan's own (unpadded) flow form, each GD cell from
  lj.train on the plan at the chosen step size, to TOL; the chosen η is the best of the grid."""
  lang, h, found, row = tomita1_row
  theta0 = lj.init_params(lang.d)
  r_star = float(found.risk)
  options = dict(rtol=h.rtol, atol=h.atol, num_records=h.num_records, closed_form=False,
                 num_points=lj.risk.coverage.SMALLEST)
  by = {(r["plan"], r["dynamics"]): r for r in row.records}
  for name in ("joint", "attention_only"):
    cells = by[name, "flow"]
    plan = horizons.flow_plan(name, h)
    run = lj.flow(lang, plan, theta0, t1=h.t1, **options)
    assert abs(cells["final_risk"] - float(run.risk[-1])) <= TOL
    assert cells["r_star"] == r_star and cells["excess"] == cells["final_risk"] - r_star
    assert cells["status"] == lj.dynamics.flow.status(run)
    start, leave = horizons.plateau(np.asarray(run.time), np.asarray(run.risk), r_star, h)
    if start >= 0:
      assert abs(cells["plateau_level"] - float(run.risk[start])) <= TOL
    else:
      assert cells["plateau_level"] == "no plateau"
    assert cells["tail"] == tails.fit_tail(np.asarray(run.time)[1:], np.asarray(run.risk)[1:],
                                           r_star, window=h.tail_window, rtol=h.rtol).verdict
    if cells["learned"]:
      stopped = lj.flow(lang, plan, theta0, t1=h.t1, epsilon=r_star + h.epsilon, **options)
      for column, key in (("tau_eps", "tau_eps"), ("half_time_attention", "half_time_alpha"),
                          ("half_time_output", "half_time_beta")):
        assert abs(cells[column] - float(stopped.summary[key])) <= TOL * max(1.0, cells[column])
  assert by["joint", "flow"]["learned"] is True                 # the test covers τ_ε
  for name in ("joint", "attention_only"):
    cells = by[name, "gd"]
    eta = float(cells["etas"].split(" ")[0])
    run = lj.train(lang, lj.plans.PLANS[name](eta, h.gd_steps), theta0,
                   num_points=lj.risk.coverage.SMALLEST)
    assert abs(cells["final_risk"] - float(run.risk[-1])) <= TOL
    for other in h.gd_grid:
      rival = lj.train(lang, lj.plans.PLANS[name](other, h.gd_steps), theta0,
                       num_points=lj.risk.coverage.SMALLEST)
      assert cells["final_risk"] <= float(rival.risk[-1]) + TOL
    lag = metrics.horizon_free_lag(run.alpha, run.beta, run.risk, r_star + h.epsilon, run.steps)
    expected = (float(lag.tau_eps) if int(lag.tau_eps) >= 0 else h.not_learned_gd)
    assert cells["tau_eps"] == expected
    assert cells["regime"] == run_label.label_code(run.risk, diverged=run.diverged).label


@pytest.mark.slow  # shares the row above
def test_a_cell_that_is_not_reached_says_why(tomita1_row):
  """attention_only from θ0 = 0 stays at R(0) = ½: its lag cells are words; no cell anywhere
  in the row is -1 or NaN."""
  _, h, _, row = tomita1_row
  stuck = next(r for r in row.records if r["plan"] == "attention_only" and r["dynamics"] == "flow")
  assert stuck["final_risk"] == 0.5 and stuck["learned"] is False
  for column in ("tau_eps", "half_time_attention", "half_time_output", "half_time_ratio"):
    assert stuck[column] == h.not_learned_flow
  for record in row.records:
    assert set(record) == set(horizons.COLUMNS)
    for column, value in record.items():
      if isinstance(value, float) and column not in ("plateau_lambda", "min_eigenvalue"):
        assert not (math.isnan(value) or value == -1.0), (record["plan"], column, value)


@pytest.mark.slow  # a flow program and two optimum programs compiled
def test_a_run_below_r_star_restarts_the_optimum_from_its_end():
  """R* bounds every run from below: given an R* 0.05 too high, the joint flow ends below it,
  lj.optimum restarts from the flow's final θ, and the row is computed again against the
  lower R*, which the optimum cell says came from that run."""
  lang = lj.languages.from_spec("tomita:1")
  h = short(optimum_starts=4)
  true = lj.optimum(lang, "cls", num_starts=h.optimum_starts, iterations=h.optimum_iterations)
  high = dataclasses.replace(true, risk=float(true.risk) + 0.05, risk_error=1e-13)
  row = horizons.row(lang, "cls", horizons=h, plan_names=("joint",), dynamics=("flow",),
                     found=high)
  [cells] = row.records
  assert cells["r_star"] < float(high.risk) - 0.04
  assert cells["r_star"] <= cells["final_risk"] + 1e-13     # no run below R* any more
  assert cells["r_star"] == pytest.approx(float(true.risk), abs=1e-9)
  assert cells["optimum"].endswith("(restarted from the joint flow run's end)")
  assert cells["excess"] == cells["final_risk"] - cells["r_star"]
  assert row.optimum.source == "restarted from the joint flow run's end"


def _optimum(risk, theta, layout):
  """An Optimum of the given risk and θ (the certificate's other fields are placeholders)."""
  return lj.analysis.optimum.Optimum(
      status="minimum", risk=risk, risk_error=1e-13, theta=theta, grad_norm=0.0,
      min_eigenvalue=0.1, agreeing_starts=1, num_starts=1, agree_tol=1e-9, direction=None,
      ray_risks=(), score_spread=0.0, grid_covered=True, grid_points=0, confirmed_risk=risk,
      route="transfer", layout=layout)


def test_the_optimum_restarts_from_the_contained_layouts_and_refuses_others(monkeypatch):
  """R* under the last query + tables is at most R* of each layout it contains: their θ*,
  widened, are the starts of a restart, whose R* replaces lj.optimum's where it is lower
  (lj.optimum stubbed: its own runs are tested in test_optimum.py); a layout that is not
  contained is refused."""
  lang = lj.languages.from_spec("first")
  layouts = horizons.LAYOUTS
  subs = [_optimum(0.2, lj.init_params(2, **layouts[name]._asdict()), layouts[name])
          for name in ("cls", "cls+first_last", "last")]
  subs[0].theta["alpha"] = jnp.asarray([1.0, -1.0])
  calls = []

  def stub(lang, layout, *, num_starts, iterations, starts=()):
    calls.append((layout, num_starts, list(starts)))
    return _optimum(0.3 if not starts else 0.25, {}, layouts[layout])

  monkeypatch.setattr(horizons.optimum_lib, "optimum", stub)
  h = short()
  found = horizons.optimum(lang, "last+first_last", h, contained=subs)
  own, restart = calls
  assert own[:2] == ("last+first_last", h.optimum_starts) and own[2] == []
  assert restart[:2] == ("last+first_last", 1) and len(restart[2]) == 3
  widened = restart[2][0]
  np.testing.assert_array_equal(widened["alpha"], [[1.0, -1.0], [1.0, -1.0]])
  assert lj.models.direct.layout(widened) == layouts["last+first_last"]
  assert found.risk == 0.25
  assert found.source == "restarted from the cls, cls+first_last, last optima"
  assert horizons.optimum_cells(found)["optimum"] == (
      "minimum (restarted from the cls, cls+first_last, last optima)")
  assert horizons.optimum(lang, "cls", h).source == ""        # nothing contained: no restart
  with pytest.raises(ValueError, match="^contained must hold optima of layouts that cls"):
    horizons.optimum(lang, "cls", h, contained=[found])


def test_a_run_computes_each_optimum_once_restarted_from_its_contained_layouts(monkeypatch):
  """horizons.Optima over the four layouts: each (language, layout) optimum is computed once,
  whatever the order asked, and each is given exactly the optima of the run's layouts it
  contains (horizons.optimum stubbed)."""
  calls = []

  def stub(lang, layout, horizons_, contained=()):
    calls.append((layout, [horizons._layout_name(sub.layout) for sub in contained]))
    return _optimum(0.1, {}, horizons.LAYOUTS[layout])

  monkeypatch.setattr(horizons, "optimum", stub)
  optima = horizons.Optima(short(), tuple(horizons.LAYOUTS))
  lang = lj.languages.from_spec("first")
  for layout in ("last+first_last", "cls", "last", "cls+first_last", "last+first_last"):
    optima("first", lang, layout)
  assert sorted(calls) == [("cls", []), ("cls+first_last", ["cls"]), ("last", ["cls"]),
                           ("last+first_last", ["cls", "cls+first_last", "last"])]
  optima.found.clear()
  calls.clear()
  horizons.Optima(short(), ("last+first_last",))("first", lang, "last+first_last")
  assert calls == [("last+first_last", [])]       # only the run's layouts are contained
