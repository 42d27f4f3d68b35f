"""An atlas row at any horizon: one (language, layout), every plan of §5 from θ0 = 0, under
gradient flow to t = 10⁶ and under GD at its best step sizes (docs/theory.md §10).

`row(lang, layout)` computes, for each plan of the registry (plans.PLANS):

- **flow**: lj.flow (Rodas5P, §5c) from θ0 = 0 to t1 (default 10⁶) on the plan's phases in
  time units (`flow_plan`), recorded on a geometric grid; the final risk, its excess over the
  certified optimum R* (lj.optimum, §3e) and whether the run learned (excess ≤ ε, default
  10⁻³); the plateau (`plateau`: its level, the time it is left, and the exact Hessian's most
  negative eigenvalue at its critical point, saddles.saddle, §10c); τ_ε (the time R = R* + ε)
  and the half-times of attention and output up to τ_ε and their ratio (§6b), from a second
  flow that stops at τ_ε; the tail exponent of R(t) − R* on [10⁴, 10⁶] (tails.fit_tail, §10b);
- **gd**: exact population GD (§5; lj.train for joint, the hybrid engine with its output
  phases in closed form for the other plans) for `gd_steps` steps at every step size of the
  plan's grid, the grid extended at an edge while the edge is chosen (`select`); at the
  chosen step sizes the same columns (τ_ε and half-times in steps, §6b) and the run's regime
  label (run_label.label_code, §5d, from its risk curve alone: edge of stability needs
  sharpness records, which the row does not take).

A cell that has no value says why in words ("not learned by t = 1e+06", "no plateau", "not
left by t = 1e+06", "attention never moved"), never −1.

Compilations: every plan runs as three phases (`padded_flow_plan`, `padded_gd_plan`): a plan
of fewer phases gets phases after its end (past t1 for the flow, one step each for GD, of
the last phase's group, so nothing changes), so all five plans share one compiled flow and
one compiled GD program per (language, layout) (lj.flow and lj.train cache them by the number
of phases; durations, rates, step sizes, t1 and ε are traced).

The row takes one language at a time (a census calls it per language) and returns plain
cells (`Row.records`), one dict per plan and dynamics.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence

import numpy as np
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.analysis import optimum as optimum_lib
from lagjax.analysis import saddles, tails
from lagjax.data import languages
from lagjax.dynamics import flow as flow_lib
from lagjax.dynamics import hybrid, metrics, plans, run_label, train
from lagjax.models import direct
from lagjax.risk import coverage, risk_fn

LAYOUTS = optimum_lib.LAYOUTS
PLAN_NAMES = plans.plan_names()
DYNAMICS = ("flow", "gd")
NUM_PHASES = 3            # every plan of the registry has at most three phases
# Two exact runs whose final risks differ by less than this (relative) tie: float64 roundoff
# of a run is far below it, so a tie is broken by the smaller step sizes, never by roundoff.
TIE = 1e-9


@dataclasses.dataclass(frozen=True)
class Horizons:
  """What a row computes (docs/theory.md §10); frozen, so one value describes a run.

  Attributes:
    t1: the flow's horizon, in time units.
    settle: three_phase's first output phase under the flow, in time units: long enough for
      the output to settle at α = 0 (the linear phase of §4 converges like e^(−λ_min t)).
    attention: the attention phase of three_phase and attention_first under the flow, in time
      units.
    rtol, atol: the flow's tolerances.
    num_records: the flow's geometric records from t = 1 to t1.
    epsilon: learned iff R − R* ≤ epsilon; τ_ε is the first time R = R* + epsilon.
    plateau_flat: a plateau is a record t ≥ 1 with excess > epsilon where R falls by at most
      this fraction over the next decade (R(10t) ≥ (1 − plateau_flat)·R(t)).
    plateau_drop: the plateau is left at the first record where the excess R − R* is at most
      (1 − plateau_drop) times the plateau's.
    tail_window: (t_lo, t_hi) of the tail fit.
    gd_steps: every GD run's length (joint: 10⁴ steps).
    gd_grid: the step sizes η of the output phases and of one-step-size plans (geometric).
    gd_attention_grid: η2, the step size of the one attention step of three_phase and
      attention_first (geometric).
    gd_cap: (low, high): the grids are extended by their ratio at an edge while the edge is
      chosen and clearly better than its inward neighbour, within this range.
    gd_settle_steps: three_phase's first output phase under GD, in steps.
    gd_record_every: GD records every this many steps (1: the regime label sees every step).
    optimum_starts, optimum_iterations: lj.optimum's starts and L-BFGS iterations.
    saddle_tol: a plateau's critical point is a saddle iff λ_min < −saddle_tol.

  Raises:
    ValueError: one line naming the field, for a value out of its range (durations, rates and
      tolerances > 0, settle + attention < t1, integers ≥ 1, grids of positive reals).

  Example:
    >>> from lagjax.analysis import horizons
    >>> short = horizons.Horizons(t1=100.0, settle=10.0, attention=5.0, gd_steps=50,
    ...                           gd_settle_steps=10)
    >>> short.t1, short.not_learned_flow
    (100.0, 'not learned by t = 100')
    >>> horizons.Horizons(settle=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: horizons settle must be a finite real > 0; got -1.0.
  """

  t1: float = 1e6
  settle: float = 1e3
  attention: float = 1e2
  rtol: float = 1e-8
  atol: float = 1e-10
  num_records: int = 121
  epsilon: float = 1e-3
  plateau_flat: float = 0.01
  plateau_drop: float = 0.5
  tail_window: tuple[float, float] = (1e4, 1e6)
  gd_steps: int = 10_000
  gd_grid: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
  gd_attention_grid: tuple[float, ...] = (1.0, 10.0, 100.0)
  gd_cap: tuple[float, float] = (1.0 / 64.0, 1e4)
  gd_settle_steps: int = 1000
  gd_record_every: int = 1
  optimum_starts: int = 16
  optimum_iterations: int = 200
  saddle_tol: float = 1e-8

  def __post_init__(self):
    def positive(name):
      return plans._positive(f"horizons {name}", getattr(self, name))

    checked = {name: positive(name) for name in ("t1", "settle", "attention", "rtol", "atol",
                                                  "epsilon", "saddle_tol")}
    for name in ("num_records", "gd_steps", "gd_settle_steps", "gd_record_every",
                 "optimum_starts", "optimum_iterations"):
      checked[name] = validation.check_int(f"horizons {name}", getattr(self, name), 1)
    for name in ("plateau_flat", "plateau_drop"):
      checked[name] = validation.check_real(f"horizons {name}", getattr(self, name),
                                            minimum=0.0, strict=True, maximum=1.0,
                                            strict_max=True)
    for name in ("gd_grid", "gd_attention_grid"):
      values = getattr(self, name)
      values = tuple(values) if isinstance(values, (tuple, list)) and values else ()
      if not values:
        raise ValueError(f"horizons {name} must be a non-empty tuple of step sizes > 0; got "
                         f"{getattr(self, name)!r}.")
      checked[name] = tuple(sorted(plans._positive(f"horizons {name} step size", eta)
                                   for eta in values))
    for name in ("tail_window", "gd_cap"):
      pair = getattr(self, name)
      pair = tuple(float(x) for x in pair) if np.ndim(pair) == 1 and len(pair) == 2 else ()
      if not pair or not 0 < pair[0] < pair[1] < np.inf:
        raise ValueError(f"horizons {name} must be (low, high) with 0 < low < high < inf; "
                         f"got {getattr(self, name)!r}.")
      checked[name] = pair
    if checked["settle"] + checked["attention"] >= checked["t1"]:
      raise ValueError(f"horizons settle + attention must be < t1 = {checked['t1']:g}; got "
                       f"{checked['settle']:g} + {checked['attention']:g}.")
    if checked["gd_settle_steps"] + 2 > checked["gd_steps"]:
      raise ValueError(f"horizons gd_settle_steps must be <= gd_steps - 2 = "
                       f"{checked['gd_steps'] - 2} (three_phase's attention step and its "
                       f"last output phase); got {checked['gd_settle_steps']}.")
    if checked["gd_steps"] < 8 * checked["gd_record_every"]:
      raise ValueError(f"horizons gd_record_every must leave >= 8 records in gd_steps = "
                       f"{checked['gd_steps']} (the regime label needs 8); got "
                       f"{checked['gd_record_every']}.")
    for name, value in checked.items():
      object.__setattr__(self, name, value)

  @property
  def not_learned_flow(self) -> str:
    """The reason a flow cell is empty when the run did not learn."""
    return f"not learned by t = {self.t1:g}"

  @property
  def not_learned_gd(self) -> str:
    """The reason a GD cell is empty when the run did not learn."""
    return f"not learned in {self.gd_steps} steps"


def flow_plan(name: str, horizons: Horizons) -> plans.FlowPlan:
  """The flow form of plan `name` in the atlas (docs/theory.md §10), rates 1, to t1.

  joint, output_only, attention_only: one phase of duration t1. attention_first: attention
  for `attention` time units, then output to t1. three_phase: output for `settle` (the output
  settles at α = 0), attention for `attention`, then output to t1.

  Args:
    name: a plan of the registry (plans.PLANS).
    horizons: the Horizons (t1, settle, attention are read).

  Returns:
    The FlowPlan, ending at t1.

  Example:
    >>> from lagjax.analysis import horizons
    >>> plan = horizons.flow_plan("three_phase", horizons.Horizons())
    >>> [(p.group, p.duration) for p in plan.phases]
    [('output', 1000.0), ('attention', 100.0), ('output', 998900.0)]
  """
  h, t1 = horizons, horizons.t1
  durations = {"joint": (t1,), "output_only": (t1,), "attention_only": (t1,),
               "attention_first": (h.attention, t1 - h.attention),
               "three_phase": (h.settle, h.attention, t1 - h.settle - h.attention)}
  validation.check_choice("plan name", name, tuple(durations))
  return plans.flow_plan(name, durations[name])


def padded_flow_plan(plan: plans.FlowPlan, t1: float) -> plans.FlowPlan:
  """`plan` with phases of its last group appended after t1, up to NUM_PHASES phases: a flow
  to t1 never enters them (the solver's next stop is the first phase end past t; §5c), so the
  run is the same and every plan shares one compiled flow.

  Args:
    plan: a FlowPlan ending at t1.
    t1: its end time.

  Returns:
    The padded FlowPlan (same name).

  Example:
    >>> from lagjax.analysis import horizons
    >>> plan = horizons.padded_flow_plan(lj.plans.flow_plan("joint", (10.0,)), 10.0)
    >>> [(p.group, p.duration) for p in plan.phases]
    [('both', 10.0), ('both', 10.0), ('both', 10.0)]
  """
  extra = (plans.FlowPhase(plan.phases[-1].group, t1),) * (NUM_PHASES - len(plan.phases))
  return plans.FlowPlan(plan.phases + extra, plan.name)


# The step sizes of each plan, by name: which grid each comes from ("out" or "attention").
GD_AXES = {"joint": ("out",), "output_only": ("out",), "attention_only": ("out",),
           "attention_first": ("attention", "out"), "three_phase": ("out", "attention")}


def gd_plan(name: str, etas: Sequence[float], horizons: Horizons) -> plans.Plan:
  """The GD plan `name` of the atlas at step sizes `etas` (docs/theory.md §10), gd_steps long.

  joint, output_only, attention_only (η): gd_steps steps. attention_first (η2, η3): one
  attention step, then output. three_phase (η_out, η2): gd_settle_steps output steps at
  η_out, one attention step at η2, then output at η3 = η_out.

  Args:
    name: a plan of the registry.
    etas: its step sizes, in the order of GD_AXES[name].
    horizons: the Horizons.

  Returns:
    The Plan, gd_steps steps in all.

  Example:
    >>> from lagjax.analysis import horizons
    >>> plan = horizons.gd_plan("three_phase", (1.0, 10.0), horizons.Horizons(gd_steps=20,
    ...                                                                     gd_settle_steps=5))
    >>> [(p.group, p.eta, p.steps) for p in plan.phases]
    [('output', 1.0, 5), ('attention', 10.0, 1), ('output', 1.0, 14)]
  """
  validation.check_choice("plan name", name, tuple(GD_AXES))
  steps = horizons.gd_steps
  if name == "three_phase":
    out, attention = etas
    return plans.three_phase(out, attention, out, steps - horizons.gd_settle_steps - 1,
                             steps1=horizons.gd_settle_steps)
  if name == "attention_first":
    return plans.attention_first(etas[0], etas[1], steps - 1)
  return plans.PLANS[name](etas[0], steps)


def padded_gd_plan(plan: plans.Plan) -> plans.Plan:
  """`plan` as NUM_PHASES phases with the same steps: its last phase split into one-step
  phases at its end (the same GD steps), so every plan of one length shares one compiled
  training loop (lj.train compiles per number of phases and length; §5).

  Args:
    plan: a Plan whose last phase has at least NUM_PHASES - #phases + 1 steps.

  Returns:
    The padded Plan (same name).

  Example:
    >>> from lagjax.analysis import horizons
    >>> plan = horizons.padded_gd_plan(lj.plans.joint(0.5, 10))
    >>> [(p.group, p.eta, p.steps) for p in plan.phases]
    [('both', 0.5, 8), ('both', 0.5, 1), ('both', 0.5, 1)]
  """
  missing = NUM_PHASES - len(plan.phases)
  last = plan.phases[-1]
  split = [dataclasses.replace(last, steps=last.steps - missing)]
  split += [dataclasses.replace(last, steps=1)] * missing
  return plans.Plan(plan.phases[:-1] + tuple(split), plan.name)


def plateau(times, risks, r_star: float, horizons: Horizons) -> tuple[int, int]:
  """The first plateau of a recorded run and where it is left (docs/theory.md §10).

  The plateau is the first record t ≥ 1 with excess R(t) − R* > epsilon at which R falls by at
  most plateau_flat·R(t) over the next decade (R(10t) read off the records, linear in ln t);
  it is left at the first later record whose excess is at most (1 − plateau_drop) times the
  plateau's.

  Args:
    times: (N,) record times, rising; risks: (N,) R there.
    r_star: the optimum R*.
    horizons: the Horizons (epsilon, plateau_flat, plateau_drop).

  Returns:
    (index of the plateau's record or -1, index of the exit record or -1).

  Example:
    >>> from lagjax.analysis import horizons
    >>> t = np.geomspace(1.0, 1e4, 41)
    >>> r = 0.2 - 0.1 * np.tanh((t - 300.0) / 30.0)   # flat at 0.3 until t ≈ 300
    >>> start, exit = horizons.plateau(t, r, 0.1, horizons.Horizons())
    >>> float(t[start]), round(float(t[exit]), 1)
    (1.0, 316.2)
  """
  times, risks = np.asarray(times, np.float64), np.asarray(risks, np.float64)
  log_t = np.log(np.maximum(times, 1e-300))
  later = np.interp(log_t + np.log(10.0), log_t, risks)
  candidates = ((times >= 1.0) & (10.0 * times <= times[-1])
                & (risks - r_star > horizons.epsilon)
                & (risks - later <= horizons.plateau_flat * np.abs(risks)))
  if not candidates.any():
    return -1, -1
  start = int(np.argmax(candidates))
  left = ((np.arange(times.size) > start)
          & (risks - r_star <= (1 - horizons.plateau_drop) * (risks[start] - r_star)))
  return start, int(np.argmax(left)) if left.any() else -1


def _lag_cells(tau, half_alpha, half_beta, not_learned: str) -> dict:
  """τ_ε, the half-times and their ratio as cells: numbers, or why not (§6b)."""
  if not np.isfinite(tau) or tau < 0:
    return {"tau_eps": not_learned, "half_time_attention": not_learned,
            "half_time_output": not_learned, "half_time_ratio": not_learned}
  cells = {"tau_eps": float(tau)}
  for name, value in (("attention", half_alpha), ("output", half_beta)):
    moved = np.isfinite(value) and value >= 0
    cells[f"half_time_{name}"] = float(value) if moved else f"{name} never moved"
  alpha, beta = cells["half_time_attention"], cells["half_time_output"]
  if isinstance(alpha, str) or isinstance(beta, str):
    cells["half_time_ratio"] = alpha if isinstance(alpha, str) else beta
  elif beta == 0:
    cells["half_time_ratio"] = "output half-time 0"
  else:
    cells["half_time_ratio"] = alpha / beta
  return cells


@dataclasses.dataclass(frozen=True)
class Row:
  """One (language, layout) of the atlas (docs/theory.md §10).

  Attributes:
    language: the language's description.
    layout: the layout's name (a key of LAYOUTS).
    optimum: lj.optimum's Optimum (R*, its certificate or the infimum at infinity).
    records: one dict of cells per (plan, dynamics), PLAN_NAMES × DYNAMICS in order.
    curves: (plan, dynamics) -> (times or steps (R,), risks (R,)) of the run in the row.
    seconds: the row's wall time.

  Example:
    >>> from lagjax.analysis import horizons
    >>> horizons.Row("parity", "cls", None, [], {}, 0.0).layout
    'cls'
  """

  language: str
  layout: str
  optimum: object
  records: list
  curves: dict
  seconds: float


def restarted(lang, layout: str, found, starts: Sequence[dict], horizons: Horizons,
              source: str):
  """`found`, or lj.optimum restarted from `starts` where that reaches a lower R* (§10).

  R* bounds every run's final risk from below and the infimum of a contained layout from
  above (docs/theory.md §10), so a lower value found from such a point replaces R*. The
  restart is lj.optimum with one start of its own (θ0) and `starts`, at the horizons'
  iterations; it replaces `found` when its R* is lower by more than roundoff (NOISE).

  Args:
    lang: the language; layout: a key of LAYOUTS.
    found: the Optimum so far (its `source` attribute says where it came from, if set).
    starts: per-token parameters of the layout (empty: `found` is returned).
    horizons: the Horizons (optimum_iterations).
    source: where the starts came from, in words, for the optimum cell.

  Returns:
    The lower of the two Optima; a restart's carries `source`.

  Example:
    Without starts there is nothing to restart (horizons.Optima's example restarts):

    >>> from lagjax.analysis import horizons
    >>> found = lj.analysis.optimum.Optimum(
    ...     status="minimum", risk=0.25, risk_error=1e-13, theta={}, grad_norm=1e-15,
    ...     min_eigenvalue=0.1, agreeing_starts=3, num_starts=4, agree_tol=1e-9,
    ...     direction=None, ray_risks=(), score_spread=0.0, grid_covered=True,
    ...     grid_points=0, confirmed_risk=0.25, route="transfer",
    ...     layout=lj.models.direct.Layout())
    >>> lang = lj.languages.from_spec("first")
    >>> horizons.restarted(lang, "cls", found, [], horizons.Horizons(), "no starts") is found
    True
  """
  return lower_optimum(lang, layout, float(found.risk), starts, horizons, source) or found


def lower_optimum(lang, layout: str, risk: float, starts: Sequence[dict], horizons: Horizons,
                  source: str):
  """lj.optimum restarted from `starts` (with one start of its own, θ0) if it ends below
  `risk` by more than roundoff (NOISE), else None (`restarted`; docs/theory.md §10).

  Args:
    lang: the language; layout: a key of LAYOUTS; risk: the R* known so far.
    starts: per-token parameters of the layout (empty: None).
    horizons: the Horizons (optimum_iterations).
    source: where the starts came from, in words, for the optimum cell.

  Returns:
    The restart's Optimum, carrying `source`, or None.

  Example:
    Without starts there is nothing to restart (horizons.Optima's example restarts):

    >>> from lagjax.analysis import horizons
    >>> lang = lj.languages.from_spec("first")
    >>> horizons.lower_optimum(lang, "cls", 0.25, [], horizons.Horizons(), "no starts") is None
    True
  """
  if not starts:
    return None
  again = optimum_lib.optimum(lang, layout, num_starts=1, iterations=horizons.optimum_iterations,
                              starts=list(starts))
  if not float(again.risk) < risk - optimum_lib.NOISE * max(1.0, abs(risk)):
    return None
  return dataclasses.replace(again, source=source)


def optimum(lang, layout: str, horizons: Horizons, contained: Sequence = ()):
  """R* of (lang, layout) before any run (docs/theory.md §10): lj.optimum at the horizons'
  starts and iterations, restarted from the optima of the contained layouts widened to this
  one (`restarted`; lj.models.direct.widen).

  Args:
    lang: the language; layout: a key of LAYOUTS; horizons: the Horizons.
    contained: Optima of layouts that `layout` contains (their θ* are widened).

  Returns:
    The Optimum.

  Raises:
    ValueError: when `contained` holds the optimum of a layout that `layout` does not contain.

  Example:
    The CLS query does not contain the last query (horizons.Optima's example computes):

    >>> from lagjax.analysis import horizons
    >>> last = lj.analysis.optimum.Optimum(
    ...     status="minimum", risk=0.25, risk_error=1e-13, theta={}, grad_norm=1e-15,
    ...     min_eigenvalue=0.1, agreeing_starts=3, num_starts=4, agree_tol=1e-9,
    ...     direction=None, ray_risks=(), score_spread=0.0, grid_covered=True,
    ...     grid_points=0, confirmed_risk=0.25, route="transfer",
    ...     layout=horizons.LAYOUTS["last"])
    >>> horizons.optimum(lj.languages.from_spec("first"), "cls", horizons.Horizons(),
    ...                  contained=[last])
    Traceback (most recent call last):
    ...
    ValueError: contained must hold optima of layouts that cls contains; got one of ...
  """
  parts = LAYOUTS[layout]
  for sub in contained:
    if sub.layout == parts or not parts.contains(sub.layout):
      raise ValueError(f"contained must hold optima of layouts that {layout} contains; got "
                       f"one of {sub.layout}.")
  found = optimum_lib.optimum(lang, layout, num_starts=horizons.optimum_starts,
                              iterations=horizons.optimum_iterations)
  starts = [direct.widen(sub.theta, parts) for sub in contained]
  names = ", ".join(_layout_name(sub.layout) for sub in contained)
  return restarted(lang, layout, found, starts, horizons, f"restarted from the {names} optima")


class Optima:
  """R* of each (language, layout) of a run before its rows (`optimum`), restarted from the
  optima of the run's layouts that the layout contains, each computed once (docs/theory.md
  §10).

  Each value is a deterministic function of the language, the layout, the run's layouts and
  the horizons, so it does not depend on which process asks or in what order: P processes
  of the atlas write the rows of one (a process whose share lacks a contained pair computes
  that optimum too).

  Args:
    horizons: the Horizons.
    layouts: the run's layouts (keys of LAYOUTS).

  Example:
    >>> from lagjax.analysis import horizons
    >>> optima = horizons.Optima(horizons.Horizons(optimum_starts=2, optimum_iterations=20),
    ...                          ("cls", "last"))
    >>> lang = lj.languages.from_spec("first")
    >>> float(optima("first", lang, "last").risk) <= float(optima("first", lang, "cls").risk)
    True
    >>> sorted(optima.found)      # the CLS optimum was computed once, for the last query
    [('first', 'cls'), ('first', 'last')]
  """

  def __init__(self, horizons: Horizons, layouts: Sequence[str]):
    for layout in layouts:
      validation.check_choice("layout", layout, tuple(LAYOUTS))
    self.horizons, self.layouts, self.found = horizons, tuple(layouts), {}

  def __call__(self, key: str, lang, layout: str):
    """R* of `lang` (named `key`) under `layout` (`optimum`), restarted from the run's
    contained layouts."""
    if (key, layout) not in self.found:
      parts = LAYOUTS[layout]
      contained = [self(key, lang, other) for other in self.layouts
                   if other != layout and parts.contains(LAYOUTS[other])]
      self.found[key, layout] = optimum(lang, layout, self.horizons, contained)
    return self.found[key, layout]


def _layout_name(parts) -> str:
  return next(name for name, value in LAYOUTS.items() if value == parts)


def optimum_cells(found) -> dict:
  """The optimum's cells: R*, its status in words, the certificate (§3e).

  Args:
    found: an Optimum (with a `source` attribute where a restart found it: `restarted`).

  Returns:
    A dict: r_star, r_star_error, optimum ("minimum", "infimum at infinity", …, with where
    a restart started in parentheses), grad_norm, min_eigenvalue, agreeing_starts ("k/n").

  Example:
    >>> from lagjax.analysis import horizons
    >>> found = lj.optimum(lj.occurrence(3), groups=("output",), num_starts=2, iterations=16)
    >>> cells = horizons.optimum_cells(found)
    >>> cells["optimum"], cells["agreeing_starts"]
    ('minimum', '2/2')
  """
  return {"r_star": float(found.risk), "r_star_error": float(found.risk_error),
          "optimum": found.status.replace("_", " ") + (f" ({found.source})" if found.source
                                                         else ""),
          "grad_norm": float(found.grad_norm),
          "min_eigenvalue": float(found.min_eigenvalue),
          "agreeing_starts": f"{found.agreeing_starts}/{found.num_starts}"}


def _flow_options(horizons: Horizons) -> dict:
  # closed_form=False: output_only runs through the same compiled solver as the other plans.
  # num_points "smallest": a run starts on the smallest grid covering θ0 = 0 and re-sizes as
  # it goes (§3a); under the position tables that is 362 nodes against the default 1,448, and
  # the flows of a census pair take the same steps about 4× faster (risks equal to 2e-13;
  # docs/decisions/batching-on-cpu.md).
  return dict(rtol=horizons.rtol, atol=horizons.atol, num_records=horizons.num_records,
              closed_form=False, num_points=coverage.SMALLEST)


def _flow_cells(lang, theta0, name: str, r_star: float, horizons: Horizons,
               risk: Callable, checked: dict | None = None) -> tuple[dict, tuple, dict]:
  """The flow columns of plan `name` (docs/theory.md §10; module docstring), its curve and
  its final θ.

  Args:
    lang: the language.
    theta0: θ0 of the layout (zeros).
    name: the plan.
    r_star: R*.
    horizons: the Horizons.
    risk: per-token params -> R on the layout (the saddle check's Hessian).
    checked: saddle checks already made in this row, by plateau point (filled in).

  Returns:
    (cells, (times, risks), θ(t1)).
  """
  h = horizons
  checked = {} if checked is None else checked
  plan = padded_flow_plan(flow_plan(name, h), h.t1)
  options = _flow_options(h)
  run = flow_lib.flow(lang, plan, theta0, t1=h.t1, **options)
  times, risks = np.asarray(run.time), np.asarray(run.risk)
  # Phase ends are records too; the padding's ends past t1 repeat t1: one record per time.
  distinct = np.concatenate([[True], np.diff(times) > 0])
  times, risks = times[distinct], risks[distinct]
  final = float(risks[-1])
  excess = final - r_star
  learned = excess <= h.epsilon
  cells = {"status": flow_lib.status(run), "etas": "rate 1", "final_risk": final,
           "excess": excess, "learned": bool(learned)}
  start, leave = plateau(times, risks, r_star, h)
  if start < 0:
    cells.update(plateau_level="no plateau", plateau_exit="no plateau",
                 plateau_saddle="no plateau", plateau_lambda="no plateau")
  else:
    level = float(risks[start])
    cells["plateau_level"] = level
    cells["plateau_exit"] = float(times[leave]) if leave >= 0 else f"not left by t = {h.t1:g}"
    # θ at the plateau: the same flow stopped there (t1 is traced: no recompilation).
    at = flow_lib.flow(lang, plan, theta0, t1=float(times[start]), **options).params
    # Plans that meet the same plateau (output_only and attention_first from θ0 = 0) share
    # one check: each builds and compiles its Hessian anew.
    key = np.round(np.asarray(ravel_pytree(at)[0]), 6).tobytes()
    if key not in checked:
      checked[key] = saddles.saddle(risk, at, tol=h.saddle_tol)
    found = checked[key]
    if not abs(found.risk - level) <= h.plateau_flat * abs(level):
      cells["plateau_saddle"] = (f"no critical point at the plateau (Newton moved "
                                 f"{found.displacement:.3g} to R = {found.risk:.6g})")
      cells["plateau_lambda"] = cells["plateau_saddle"]
    else:
      cells["plateau_saddle"] = "saddle" if found.is_saddle else "not a saddle"
      cells["plateau_lambda"] = found.min_eigenvalue
  tail = tails.fit_tail(times[1:], risks[1:], r_star, window=h.tail_window, rtol=h.rtol)
  cells["tail"] = tail.verdict
  cells["tail_exponent"] = tail.exponent if tail.power_law else tails.NO_TAIL
  if learned:
    stopped = flow_lib.flow(lang, plan, theta0, t1=h.t1, epsilon=r_star + h.epsilon, **options)
    summary = stopped.summary
    cells.update(_lag_cells(float(summary["tau_eps"]), float(summary["half_time_alpha"]),
                            float(summary["half_time_beta"]), h.not_learned_flow))
  else:
    cells.update(_lag_cells(np.nan, np.nan, np.nan, h.not_learned_flow))
  cells["regime"] = "flow (no regime)"
  return cells, (times, risks), run.params


def _gd_run(lang, theta0, name: str, etas, horizons: Horizons):
  """Exact GD of plan `name` at `etas` from θ0, padded to NUM_PHASES phases (§5): lj.train
  for joint, lagjax/dynamics/hybrid.py (the same states, its output phases in closed form)
  for the plans of output and attention phases.

  Args:
    lang: the language; theta0: θ0; name: the plan; etas: its step sizes (GD_AXES order);
    horizons: the Horizons.

  Returns:
    The Trajectory.
  """
  plan = padded_gd_plan(gd_plan(name, etas, horizons))
  if hybrid.supports(plan) is None:  # no joint phase: output phases in closed form (§5)
    return hybrid.train(lang, plan, theta0, record_every=horizons.gd_record_every)
  # The smallest grid covering θ0, re-sized as the run needs (as the flows: _flow_options).
  return train.train(lang, plan, theta0, record_every=horizons.gd_record_every, zero_one=False,
                     num_points=coverage.SMALLEST)


def _final(run) -> float:
  """The final risk of a GD run, inf when it diverged (the worst value of the selection)."""
  value = float(run.risk[-1])
  return np.inf if bool(run.diverged) or not np.isfinite(value) else value


def select(evaluate: Callable, grids: Sequence[Sequence[float]], cap) -> tuple[tuple, dict,
                                                                              str]:
  """The step sizes with the lowest final risk, on grids that bracket them (§10; the rule of
  Table 1, experiments/table1_selection.py, for exact runs).

  Every point of the product of the grids is evaluated; the lowest final risk wins, ties
  within TIE relative going to the smaller step sizes. While a chosen step size is the edge of
  its grid and clearly better (beyond TIE) than the point one step inward on that axis, that
  grid grows by its ratio at that edge, unless the new point leaves `cap`; a one-point grid
  does not grow.

  Args:
    evaluate: etas (tuple) -> final risk (inf for a diverged run).
    grids: one sorted grid per step size.
    cap: (low, high).

  Returns:
    (the chosen etas, {etas: final risk} of every point evaluated, a note: "interior",
    "extended to …" or "capped at …").

  Example:
    >>> from lagjax.analysis import horizons
    >>> chosen, values, note = horizons.select(lambda e: (e[0] - 5.0) ** 2, [(1.0, 2.0)],
    ...                                        (0.1, 100.0))
    >>> chosen, note
    ((4.0,), 'extended to 4, 8')
  """
  grids = [sorted(grid) for grid in grids]
  values: dict = {}
  notes, capped = [], []  # capped: each edge once
  while True:
    for etas in itertools.product(*grids):
      if etas not in values:
        values[etas] = evaluate(etas)
    best = min(values[etas] for etas in itertools.product(*grids))
    ties = [etas for etas in itertools.product(*grids)
            if values[etas] <= best + TIE * max(abs(best), 1e-300)]
    chosen = min(ties)
    grew = False
    for axis, grid in enumerate(grids):
      if len(grid) < 2:
        continue
      for edge, inward, beyond in ((0, 1, grid[0] ** 2 / grid[1]),
                                   (-1, -2, grid[-1] ** 2 / grid[-2])):
        if chosen[axis] != grid[edge]:
          continue
        neighbour = chosen[:axis] + (grid[inward],) + chosen[axis + 1:]
        if not values[chosen] < values[neighbour] - TIE * max(abs(values[neighbour]), 1e-300):
          continue
        if cap[0] * (1 - 1e-12) <= beyond <= cap[1] * (1 + 1e-12):
          grid.insert(0 if edge == 0 else len(grid), beyond)
          notes.append(beyond)
          grew = True
        elif grid[edge] not in capped:
          capped.append(grid[edge])
    if not grew:
      break
  parts = ([f"extended to {', '.join(f'{eta:g}' for eta in notes)}"] if notes else [])
  parts += [f"capped at {', '.join(f'{eta:g}' for eta in capped)}"] if capped else []
  return tuple(chosen), values, "; ".join(parts) or "interior"


def _gd_cells(lang, theta0, name: str, r_star: float,
              horizons: Horizons) -> tuple[dict, tuple, dict | None]:
  """The GD columns of plan `name` at its selected step sizes (docs/theory.md §10).

  Args:
    lang, theta0, name, r_star, horizons: as in `_flow_cells`.

  Returns:
    (cells, (steps, risks), the final θ or None for a diverged run).
  """
  h = horizons
  grids = [h.gd_grid if axis == "out" else h.gd_attention_grid for axis in GD_AXES[name]]
  runs = {}

  def evaluate(etas):
    runs[etas] = _gd_run(lang, theta0, name, etas, h)
    return _final(runs[etas])

  chosen, values, note = select(evaluate, grids, h.gd_cap)
  run = runs[chosen]
  steps, risks = np.asarray(run.steps), np.asarray(run.risk)
  final = float(risks[-1])
  excess = final - r_star
  learned = bool(excess <= h.epsilon) and not bool(run.diverged)
  cells = {"status": "diverged" if bool(run.diverged) else f"completed at step {h.gd_steps}",
           "etas": "/".join(f"{eta:g}" for eta in chosen) + f" ({note})",
           "final_risk": final, "excess": excess, "learned": learned}
  start, leave = plateau(steps, risks, r_star, h)
  none = "no plateau" if start < 0 else None
  cells["plateau_level"] = none or float(risks[start])
  cells["plateau_exit"] = none or (float(steps[leave]) if leave >= 0
                                   else f"not left in {h.gd_steps} steps")
  cells["plateau_saddle"] = cells["plateau_lambda"] = "flow column"
  cells["tail"] = cells["tail_exponent"] = "flow column"
  lag = metrics.horizon_free_lag(run.alpha, run.beta, run.risk, r_star + h.epsilon, run.steps)
  cells.update(_lag_cells(float(lag.tau_eps), float(lag.half_time_alpha),
                          float(lag.half_time_beta), h.not_learned_gd))
  cells["regime"] = run_label.label_code(run.risk, diverged=run.diverged).label
  return cells, (steps, risks), None if bool(run.diverged) else run.params


def row(lang: languages.Language, layout: str, *, horizons: Horizons = Horizons(),
        plan_names: Sequence[str] = PLAN_NAMES, dynamics: Sequence[str] = DYNAMICS,
        found=None, progress: Callable | None = None) -> Row:
  """The atlas row of one language and layout at any horizon (docs/theory.md §10).

  Args:
    lang: the language (an exact route must support it, §3).
    layout: a key of LAYOUTS ("cls", "cls+first_last", "last", "last+first_last").
    horizons: what to compute (Horizons).
    plan_names: the plans (default every plan of the registry).
    dynamics: "flow" and/or "gd".
    found: R* for (lang, layout) if already known (`optimum`, `Optima`: restarted from
      contained layouts); None computes it (`optimum`, no contained layouts).
    progress: called as progress(done, total) after each (plan, dynamics); a row computed
      again (below) counts again from 0.

  R* is the lowest value known (docs/theory.md §10): where a run of the row ends below R* by
  more than R*'s error, lj.optimum restarts from that run's final θ (`restarted`) and the row
  is computed again against the lower R*, once.

  Returns:
    A Row: the optimum and one dict of cells per (plan, dynamics), with keys language,
    layout, plan, dynamics, the optimum's cells (optimum_cells), status, etas, final_risk,
    excess, learned, plateau_level, plateau_exit, plateau_saddle, plateau_lambda, tail,
    tail_exponent, tau_eps, half_time_attention, half_time_output, half_time_ratio, regime.
    A cell without a number holds the reason.

  Raises:
    ValueError: one line naming the field: an unknown layout, plan or dynamics.

  Example:
    A short horizon (the atlas's is t1 = 10⁶, 10⁴ GD steps):

    >>> from lagjax.analysis import horizons
    >>> short = horizons.Horizons(t1=50.0, settle=10.0, attention=5.0, num_records=16,
    ...                           gd_steps=40, gd_settle_steps=10, gd_grid=(1.0,),
    ...                           gd_attention_grid=(1.0,), optimum_starts=2,
    ...                           optimum_iterations=20)
    >>> found = horizons.row(lj.languages.from_spec("first"), "cls", horizons=short,
    ...                      plan_names=("attention_only",))
    >>> [(r["dynamics"], r["final_risk"], r["tau_eps"]) for r in found.records]
    [('flow', 0.5, 'not learned by t = 50'), ('gd', 0.5, 'not learned in 40 steps')]
  """
  started = time.perf_counter()
  validation.check_choice("layout", layout, tuple(LAYOUTS))
  for name in plan_names:
    validation.check_choice("plan name", name, PLAN_NAMES)
  for kind in dynamics:
    validation.check_choice("dynamics", kind, DYNAMICS)
  languages.check_language(lang, "the atlas")
  h = horizons
  parts = LAYOUTS[layout]
  theta0 = direct.init_params(lang.d, **parts._asdict())
  if found is None:
    found = optimum(lang, layout, h)
  risk = risk_fn(lang, **parts._asdict()).risk
  for attempt in range(2):
    r_star = float(found.risk)
    base = {"language": lang.describe(), "layout": layout, **optimum_cells(found)}
    records, curves, checked, ends = [], {}, {}, []
    total, done = len(plan_names) * len(dynamics), 0
    for name in plan_names:
      for kind in dynamics:
        cells_of = _flow_cells if kind == "flow" else _gd_cells
        extra = (risk, checked) if kind == "flow" else ()
        cells, curve, end = cells_of(lang, theta0, name, r_star, h, *extra)
        records.append({**base, "plan": name, "dynamics": kind, **cells})
        curves[name, kind] = curve
        if end is not None and np.isfinite(cells["final_risk"]):  # a failed flow ends NaN
          ends.append((cells["final_risk"], f"the {name} {kind} run's end", end))
        done += 1
        if progress is not None:
          progress(done, total)
    lowest = min(ends, key=lambda end: end[0], default=None)
    slack = max(float(found.risk_error), optimum_lib.NOISE * max(1.0, abs(r_star)))
    if attempt or lowest is None or not lowest[0] < r_star - slack:
      break
    lower = restarted(lang, layout, found, [lowest[2]], h, f"restarted from {lowest[1]}")
    if lower is found:
      break
    found = lower
  return Row(lang.describe(), layout, found, records, curves, time.perf_counter() - started)


COLUMNS = ("language", "layout", "plan", "dynamics", "r_star", "r_star_error", "optimum",
           "grad_norm", "min_eigenvalue", "agreeing_starts", "status", "etas", "final_risk",
           "excess", "learned", "plateau_level", "plateau_exit", "plateau_saddle",
           "plateau_lambda", "tau_eps", "half_time_attention", "half_time_output",
           "half_time_ratio", "tail", "tail_exponent", "regime")

__all__ = ["COLUMNS", "DYNAMICS", "GD_AXES", "Horizons", "LAYOUTS", "NUM_PHASES",
           "Optima", "PLAN_NAMES", "Row", "flow_plan", "gd_plan", "lower_optimum", "optimum",
           "optimum_cells", "padded_flow_plan", "padded_gd_plan", "plateau", "restarted", "row",
           "select"]
