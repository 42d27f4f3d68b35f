"""How Table 1 chooses step sizes (docs/theory.md §7): held-out loss first, the task metric
as tie-break, within one standard error, on grids that bracket the choice.

A candidate is one plan with its step sizes: one η, or (η_out, η_attn = m·η_out) for the
two-step-size plans (m from the attention multipliers). Each candidate is scored on every
validation seed; its score is the mean over the seeds and its standard error is
std(ddof=1)/√S over S >= 2 seeds (0 for one seed or for the exact rows, which have none).

The rule, which roundoff cannot flip (issue 34: on 2 validation seeds, an argmin followed
the roundoff between close candidates, and a rerun on another machine or with another XLA
flag chose other step sizes):

1. Near-best by the criterion (the held-out loss; the metric with select_by="metric"): the
   candidates of the row whose mean is within the tolerance of the lowest mean, the
   tolerance being the larger of the best candidate's standard error and ROUNDOFF·|best|.
2. Among those, near-best by the other key, with the same tolerance (so the metric breaks
   ties of the loss, and the reverse).
3. Among those, the smallest step sizes: the lowest η_out, then the lowest η_attn (the
   conservative choice), then the grid order of `candidates`.

NaN or inf (a diverged seed) is the worst value; a row whose candidates all diverged ties
on both keys and takes the smallest step sizes. The loss sees what accuracy hides: on
occurrence every multiplier reaches accuracy 1, but not the same loss.

Grids bracket: when a plan's chosen η (η_out for two-step-size plans) is the smallest or
the largest of its grid and clearly better (beyond the same tolerance, by the same keys)
than every candidate at the next η inward, the grid grows by its own ratio at that edge
(g1/g0 below, g_k/g_{k-1} above) and the new candidates are evaluated, until every choice
is interior, ties its inward neighbour within the tolerance (a flat objective), or the
next point would leave the cap [low, high]. A one-point grid has no ratio and is not
extended. The same rule serves the sampled rows (validation seeds) and the exact rows
(population GD), through `select(..., evaluate)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

import lagjax as lj

PER_PHASE = "_per_phase"  # row suffix of a two-step-size plan with η_attn = m·η_out chosen
SELECT_BY = ("loss", "metric")  # what a row is chosen by first; the other breaks ties
# The relative tolerance below which two scores count as equal even with no standard error
# (one validation seed, the exact rows): float64 roundoff of a training run is far below it.
ROUNDOFF = 1e-6


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


class Score(NamedTuple):
  """A candidate's validation score: the means over the seeds and their standard errors."""

  loss: float
  metric: float
  loss_se: float = 0.0
  metric_se: float = 0.0

  def keys(self, select_by: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """((value, standard error) of the criterion, of the tie-break)."""
    by_loss = ((self.loss, self.loss_se), (self.metric, self.metric_se))
    return by_loss if select_by == "loss" else by_loss[::-1]


def summarize(values) -> tuple[np.ndarray, np.ndarray]:
  """(mean, standard error) per candidate of per-seed values (C, S), or of one value per
  candidate (C,) (standard error 0). NaN and inf (diverged) make the mean inf (the worst);
  the standard error is std(ddof=1)/√S, 0 for one seed or a non-finite mean."""
  values = np.nan_to_num(np.asarray(values, np.float64), nan=np.inf, neginf=np.inf)
  values = values[:, None] if values.ndim == 1 else values
  mean = values.mean(1)
  seeds = values.shape[1]
  if seeds < 2:
    return mean, np.zeros_like(mean)
  finite = np.isfinite(mean)
  spread = np.where(finite[:, None], values, 0.0).std(1, ddof=1)
  return mean, np.where(finite, spread / np.sqrt(seeds), 0.0)


def tolerance(best: float, standard_error: float) -> float:
  """How far above `best` a score still counts as equal to it: its standard error or the
  roundoff floor ROUNDOFF·|best|, whichever is larger."""
  return max(float(standard_error), ROUNDOFF * abs(best))


def near_best(indices, values, errors) -> list:
  """The `indices` whose value is within the tolerance of the lowest value among them
  (all of them when the lowest is inf: every one diverged)."""
  best = min(indices, key=lambda i: values[i])
  if not np.isfinite(values[best]):
    return list(indices)
  limit = values[best] + tolerance(values[best], errors[best])
  return [i for i in indices if values[i] <= limit]


def step_order(candidate: Candidate) -> tuple[float, float]:
  """The stated order among near-best candidates: smallest η_out, then smallest η_attn."""
  return (candidate.eta_out,
          candidate.eta_out if candidate.eta_attn is None else candidate.eta_attn)


def choose(found: Sequence[Candidate], loss, metric, select_by: str = "loss",
           loss_se=None, metric_se=None) -> dict:
  """{row: Candidate} by the rule of this module: near-best by the criterion (mean
  validation `loss`, or `metric` with select_by="metric"; lower is better, negate
  accuracies; NaN or inf worst), then near-best by the other key, then the smallest step
  sizes (step_order), then order. "Near" is within tolerance(best, its standard error);
  loss_se and metric_se default to 0 (the roundoff floor alone)."""
  # inf stays inf (nan_to_num's default turns it into the largest float, which near_best
  # would take for a finite best and overflow on).
  loss, metric = (np.nan_to_num(np.asarray(x, np.float64), nan=np.inf, posinf=np.inf,
                                neginf=np.inf) for x in (loss, metric))
  loss_se, metric_se = (np.zeros_like(x) if se is None else np.asarray(se, np.float64)
                        for x, se in ((loss, loss_se), (metric, metric_se)))
  keys = ((loss, loss_se), (metric, metric_se))
  (first, first_se), (second, second_se) = keys if select_by == "loss" else keys[::-1]
  chosen = {}
  for row in dict.fromkeys(row for c in found for row in c.rows):
    competing = [i for i, c in enumerate(found) if row in c.rows]
    near = near_best(near_best(competing, first, first_se), second, second_se)
    chosen[row] = found[min(near, key=lambda i: (step_order(found[i]), i))]
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


def clearly_better(score: Score, rival: Score, select_by: str) -> bool:
  """Whether `score` is better than `rival` beyond the tolerance (of `score`'s standard
  error) by the criterion, or within it by the criterion and beyond it by the tie-break."""
  for (value, error), (other, _) in zip(score.keys(select_by), rival.keys(select_by)):
    if not np.isfinite(value):
      return False
    margin = tolerance(value, error)
    if value < other - margin:
      return True
    if value > other + margin:
      return False
  return False


def beats_neighbour(found, scores, row, choice, grid, select_by) -> bool:
  """Whether `choice`, at an edge of the sorted grid, scores clearly better in `row` than
  every candidate at the next η inward. A tie within the tolerance (a flat objective, e.g.
  attention alone from θ0 = 0, which never moves) hides no better step size beyond the
  edge: no extension."""
  grid = sorted(grid)
  if len(grid) < 2 or not any(np.isclose(choice.eta_out, edge, rtol=1e-12)
                              for edge in (grid[0], grid[-1])):
    return False
  inward = grid[1] if np.isclose(choice.eta_out, grid[0], rtol=1e-12) else grid[-2]
  rivals = [scores[c] for c in found
            if row in c.rows and np.isclose(c.eta_out, inward, rtol=1e-12)]
  return all(clearly_better(scores[choice], rival, select_by) for rival in rivals)


@dataclasses.dataclass(frozen=True)
class Selection:
  """The choice per row, each plan's final grid, the η it gained and the edges that hit
  the cap, and the validation scores of every candidate evaluated."""

  chosen: dict
  grids: dict
  added: dict
  capped: dict
  scores: dict  # Candidate -> Score (means and standard errors over the seeds)

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

  evaluate(candidates) -> (loss, metric) arrays, per candidate and seed (C, S), or one
  value per candidate (C,) (no seeds: standard error 0); metric lower is better, NaN or inf
  for a diverged seed. It is called once per round with the candidates not yet evaluated.
  """
  grids = {plan_name: sorted(float(eta) for eta in grid) for plan_name in plans}
  scores, capped = {}, {plan_name: () for plan_name in plans}
  while True:
    found = candidates(grids, multipliers)
    new = [c for c in found if c not in scores]
    if new:
      (loss, loss_se), (metric, metric_se) = (summarize(x) for x in evaluate(new))
      scores.update({c: Score(*map(float, values))
                     for c, *values in zip(new, loss, metric, loss_se, metric_se)})
    chosen = choose(found, *([getattr(scores[c], key) for c in found]
                             for key in ("loss", "metric")), select_by,
                    *([getattr(scores[c], key) for c in found]
                      for key in ("loss_se", "metric_se")))
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
