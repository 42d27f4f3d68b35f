"""How Table 1 chooses step sizes (docs/theory.md §7): held-out loss first, the task metric
as tie-break, on grids that bracket the choice.

A candidate is one plan with its step sizes: one η, or (η_out, η_attn = m·η_out) for the
two-step-size plans (m from the attention multipliers). Each table row picks, among the
candidates that compete in it, the one with the lowest mean validation loss; equal losses
(every seed diverged, or identical runs) go to the better metric, then to grid order. The
loss sees what accuracy hides: on occurrence every multiplier reaches accuracy 1, but not
the same loss.

Grids bracket: when a plan's chosen η (η_out for two-step-size plans) is the smallest or
the largest of its grid and strictly better than the next η inward, the grid grows by its
own ratio at that edge (g1/g0 below, g_k/g_{k-1} above) and the new candidates are
evaluated, until every choice is interior, ties its inward neighbour (a flat objective),
or the next point would leave the cap [low, high]. A one-point grid has no ratio and is not
extended. The same rule serves the sampled rows (validation seeds) and the exact rows
(population GD), through `select(..., evaluate)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

import lagjax as lj

PER_PHASE = "_per_phase"  # row suffix of a two-step-size plan with η_attn = m·η_out chosen
SELECT_BY = ("loss", "metric")  # what a row is chosen by first; the other breaks ties


def step_size_groups(plan_name: str) -> dict[str, str] | None:
  """For a plan with an output and an attention step size, each step-size name's group
  ({"eta1": "output", "eta2": "attention", ...}, from the plan registry, plans.PLANS):
  η_out feeds the output ones, η_attn the attention ones. None for a one-step-size plan."""
  groups = lj.plans.get_plan(plan_name).step_size_groups()
  return groups if set(groups.values()) == {"output", "attention"} else None


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One validation candidate: the table rows it competes in, and its plan."""

  rows: tuple[str, ...]
  plan_name: str
  eta_out: float
  eta_attn: float | None     # None for one-η plans

  def etas(self) -> dict:
    if self.eta_attn is None:
      return {"eta": self.eta_out}
    by_group = {"output": self.eta_out, "attention": self.eta_attn}
    return {name: by_group[group] for name, group in step_size_groups(self.plan_name).items()}

  def describe(self) -> str:
    if self.eta_attn is None:
      return f"η={self.eta_out:g}"
    return f"η_out={self.eta_out:g}, η_attn={self.eta_attn:g}"


def rows_of(plan_name: str) -> tuple[str, ...]:
  """The table rows of a plan: itself, and its per-phase row if it has two step sizes."""
  return (plan_name, plan_name + PER_PHASE) if step_size_groups(plan_name) else (plan_name,)


def candidates(grids: dict[str, Sequence[float]], multipliers) -> list[Candidate]:
  """Every candidate of the plans in `grids` (plan -> its η grid): one per η, or one per
  (η, m) for two-step-size plans; one with m = 1 also competes in the plan's one-η row."""
  found = []
  for plan_name, grid in grids.items():
    for eta in grid:
      if not step_size_groups(plan_name):
        found.append(Candidate((plan_name,), plan_name, float(eta), None))
        continue
      for m in multipliers:
        rows = rows_of(plan_name) if m == 1 else (plan_name + PER_PHASE,)
        found.append(Candidate(rows, plan_name, float(eta), float(eta) * m))
  return found


def choose(found: Sequence[Candidate], loss, metric, select_by: str = "loss") -> dict:
  """{row: Candidate}: per row the lowest mean validation `loss` (NaN or inf: worst), equal
  losses broken by `metric` (lower is better; negate accuracies), then by order. With
  select_by="metric" the two keys swap."""
  loss, metric = (np.nan_to_num(np.asarray(x, np.float64), nan=np.inf) for x in (loss, metric))
  first, second = (loss, metric) if select_by == "loss" else (metric, loss)
  chosen = {}
  for row in dict.fromkeys(row for c in found for row in c.rows):
    competing = np.array([i for i, c in enumerate(found) if row in c.rows])
    best = competing[np.lexsort((competing, second[competing], first[competing]))[0]]
    chosen[row] = found[best]
  return chosen


def grow(grid: Sequence[float], chosen: Sequence[float], cap: Sequence[float]):
  """One bracketing step of a sorted grid given the η chosen by its plan's rows: the grid
  with a point added beyond each edge that was chosen (if inside `cap`), and the edges that
  would leave the cap ('low', 'high')."""
  grid = sorted(grid)
  if len(grid) < 2:
    return grid, ()
  added, capped = [], []
  for side, edge, ratio in (("low", grid[0], grid[0] / grid[1]),
                            ("high", grid[-1], grid[-1] / grid[-2])):
    if not any(np.isclose(eta, edge, rtol=1e-12) for eta in chosen):
      continue
    beyond = edge * ratio
    if cap[0] * (1 - 1e-12) <= beyond <= cap[1] * (1 + 1e-12):
      added.append(beyond)
    else:
      capped.append(side)
  return sorted(grid + added), tuple(capped)


def beats_neighbour(found, scores, row, choice, grid, select_by) -> bool:
  """Whether `choice`, at an edge of the sorted grid, scores strictly better in `row` than
  every candidate at the next η inward. A tie (a flat objective, e.g. attention alone from
  θ0 = 0, which never moves) hides no better step size beyond the edge: no extension."""
  grid = sorted(grid)
  if len(grid) < 2 or not any(np.isclose(choice.eta_out, edge, rtol=1e-12)
                              for edge in (grid[0], grid[-1])):
    return False
  inward = grid[1] if np.isclose(choice.eta_out, grid[0], rtol=1e-12) else grid[-2]
  order = (lambda c: scores[c]) if select_by == "loss" else (lambda c: scores[c][::-1])
  rivals = [order(c) for c in found
            if row in c.rows and np.isclose(c.eta_out, inward, rtol=1e-12)]
  return all(order(choice) < rival for rival in rivals)


@dataclasses.dataclass(frozen=True)
class Selection:
  """The choice per row, each plan's final grid, the η it gained and the edges that hit
  the cap, and the validation scores of every candidate evaluated."""

  chosen: dict
  grids: dict
  added: dict
  capped: dict
  scores: dict  # Candidate -> (loss, metric)

  def note(self, row: str) -> str:
    """'' for a row whose grid was not extended; else which edge grew or hit the cap."""
    plan_name = self.chosen[row].plan_name
    parts = [f"extended by {', '.join(f'{eta:.3g}' for eta in self.added[plan_name])}"
             ] if self.added[plan_name] else []
    parts += [f"{side} edge at cap" for side in self.capped[plan_name]]
    return "; ".join(parts)


def select(plans: Sequence[str], grid: Sequence[float], cap: Sequence[float], multipliers,
           evaluate: Callable, select_by: str = "loss") -> Selection:
  """Chooses every row of `plans`, growing each plan's copy of `grid` until its choice is
  interior or capped.

  evaluate(candidates) -> (loss, metric) arrays, one mean per candidate, metric lower is
  better; it is called once per round with the candidates not yet evaluated.
  """
  grids = {plan_name: sorted(float(eta) for eta in grid) for plan_name in plans}
  scores, capped = {}, {plan_name: () for plan_name in plans}
  while True:
    found = candidates(grids, multipliers)
    new = [c for c in found if c not in scores]
    if new:
      loss, metric = evaluate(new)
      scores.update({c: (float(a), float(b)) for c, a, b in zip(new, loss, metric)})
    chosen = choose(found, [scores[c][0] for c in found], [scores[c][1] for c in found],
                    select_by)
    grown = False
    for plan_name in plans:
      edges = [chosen[row].eta_out for row in rows_of(plan_name)
               if beats_neighbour(found, scores, row, chosen[row], grids[plan_name], select_by)]
      new_grid, capped[plan_name] = grow(grids[plan_name], edges, cap)
      grown |= len(new_grid) > len(grids[plan_name])
      grids[plan_name] = new_grid
    if not grown:
      break
  original = sorted(float(eta) for eta in grid)
  added = {plan_name: tuple(eta for eta in grids[plan_name]
                            if not np.isclose(original, eta, rtol=1e-12).any())
           for plan_name in plans}
  return Selection(chosen, grids, added, capped, scores)
