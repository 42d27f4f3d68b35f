"""The coverage rule of the quadrature routes, and the one way consumers re-size their grid
(docs/theory.md §3a).

A route that integrates on the merged windows of risk/quadrature.py holds a static number
of nodes, num_points. Where θ's score clusters need more (`quadrature.merged_windows`), the
route's value, gradient and moments are NaN, never a finite wrong number; its report says
grid_covered False and how many nodes θ needs. A long-running consumer (lj.train, the
sweep, the gradient flow, the optimiser) that stops on such a NaN asks this module for a
larger grid and runs again:

- `ladder`: the static grid sizes, width·min(2^k, windows) for k = 0, 1, …: doubling the
  number of windows, so that a run that re-sizes compiles at most log2(windows) more
  programs, and the last size, one window per score window, covers every θ;
- `size_covering`: the smallest size of the ladder that holds the nodes θ needs (the rule of
  `lj.population_risk`);
- `resize`: run, and while the run stopped because of the grid, run again at the size that
  covers where it stopped, unless the user fixed the grid;
- `first_size`: where an engine's run starts: the default size (None), the smallest size
  covering θ0 (SMALLEST) or the user's fixed size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from lagjax import validation
from lagjax.data import languages
from lagjax.models import direct
from lagjax.risk import entries, quadrature, registry

# An engine's num_points (lj.flow, lj.train) that starts its run on the smallest size of the
# ladder covering θ0 and re-sizes upward from there, instead of the default size.
SMALLEST = "smallest"


def windows(num_groups: int, layout: direct.Layout = direct.PLAIN) -> int:
  """Score windows of a quadrature grid on num_groups token groups under `layout` (§3a, §3d).

  Args:
    num_groups: G, the token groups of the params.
    layout: the model's parts, direct.Layout (§2b).

  Returns:
    The number of windows (quadrature.num_windows).

  Example:
    >>> lj.risk.coverage.windows(50), lj.risk.coverage.windows(2, lj.models.direct.Layout(cls=True))
    (50, 3)
  """
  return quadrature.num_windows(num_groups, layout)


def ladder(lang: languages.Language | None, num_windows: int, *, step: float = quadrature.STEP,
           left: float | None = None) -> tuple[int, ...]:
  """The static grid sizes a consumer may compile: width·min(2^k, windows), k = 0, 1, … (§3a).

  Doubling the windows keeps the compilations of a run that re-sizes to at most
  1 + log2(windows); the last size holds one window per score window, which covers every θ
  whose nodes are exact lattice points (quadrature.MAX_INDEX).

  Args:
    lang: the language (its window width); None when left is given.
    num_windows: the grid's score windows (`windows`).
    step: the lattice step h.
    left: the windows' left extent; None for quadrature.window_left(lang).

  Returns:
    The sizes, increasing.

  Example:
    50 untied tokens of occurrence(50), windows of 187 nodes:

    >>> lj.risk.coverage.ladder(lj.occurrence(50), 50)
    (187, 374, 748, 1496, 2992, 5984, 9350)
  """
  width = quadrature.window_width(lang, step, left)
  sizes, clusters = [], 1
  while True:
    sizes.append(width * min(clusters, num_windows))
    if clusters >= num_windows:
      return tuple(sizes)
    clusters *= 2


def default_size(lang: languages.Language | None, num_windows: int, *,
                 step: float = quadrature.STEP, left: float | None = None) -> int:
  """The routes' default grid (quadrature.default_num_points), a size of the ladder (§3a).

  Args:
    lang: the language.
    num_windows: the grid's score windows.
    step: the lattice step h.
    left: the windows' left extent; None for quadrature.window_left(lang).

  Returns:
    The number of nodes.

  Example:
    >>> lj.risk.coverage.default_size(lj.occurrence(50), 50)  # two windows of 187
    374
  """
  return quadrature.default_num_points(num_windows, quadrature.window_width(lang, step, left))


def needed(lang: languages.Language, params, *, step: float = quadrature.STEP) -> int | float:
  """Lattice points that concrete params need (quadrature.points_needed), the largest over a
  sequence of params (e.g. one per seed; §3a).

  Args:
    lang: the language.
    params: concrete params of any layout, grouped or per token, or a list or tuple of them.
    step: the lattice step h.

  Returns:
    The number of nodes, an int; math.inf where no grid is exact (scores spread beyond
    quadrature.MAX_INDEX lattice steps, or not finite).

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.risk.coverage.needed(lang, {"alpha": jnp.array([0.0, -100.0]), "beta": jnp.zeros(2)})
    352
  """
  if isinstance(params, (list, tuple)):
    return max((needed(lang, each, step=step) for each in params), default=0)
  return quadrature.points_needed(lang, params, step)


def needed_fn(lang: languages.Language | None, *, step: float = quadrature.STEP,
              left: float | None = None):
  """params -> the lattice points they need, jittable: `needed` inside a compiled consumer
  (e.g. at the state where a run stopped; §3a).

  Args:
    lang: the language; None when left is given.
    step: the lattice step h.
    left: the windows' left extent; None for quadrature.window_left(lang).

  Returns:
    fn(params of any layout, grouped or per token) -> a float scalar (inf where no grid is
    exact).

  Example:
    >>> lang = lj.occurrence(4)
    >>> fn = jax.jit(lj.risk.coverage.needed_fn(lang))
    >>> float(fn({"alpha": jnp.array([0.0, -100.0]), "beta": jnp.zeros(2)}))
    352.0
  """
  left = quadrature.window_left(lang) if left is None else left
  width = quadrature.window_width(lang, step, left)

  def fn(params):
    scores = entries.entry_table(params)[0]
    return jax.vmap(lambda row: quadrature.merged_windows(row.max() - row, step, left, width,
                                                          1)[2])(scores).max()

  return fn


def size_covering(lang: languages.Language | None, points: int | float, num_windows: int, *,
                  step: float = quadrature.STEP, left: float | None = None) -> int | None:
  """The smallest size of the ladder that holds `points` nodes, None if none does (§3a).

  Args:
    lang: the language.
    points: the nodes θ needs (`needed`).
    num_windows: the grid's score windows.
    step: the lattice step h.
    left: the windows' left extent; None for quadrature.window_left(lang).

  Returns:
    The number of nodes, or None (points beyond the ladder's last size, or inf).

  Example:
    >>> lang = lj.occurrence(50)
    >>> lj.risk.coverage.size_covering(lang, 587, 50), lj.risk.coverage.size_covering(
    ...     lang, float("inf"), 50)
    (748, None)
  """
  return next((size for size in ladder(lang, num_windows, step=step, left=left)
               if size >= points), None)


def check_num_points(num_points):
  """An engine's num_points (§3a): None, SMALLEST or an int ≥ 1.

  Args:
    num_points: the value given to lj.flow or lj.train.

  Returns:
    It, unchanged (an int as an int).

  Raises:
    ValueError: one line naming the field and what it allows.

  Example:
    >>> lj.risk.coverage.check_num_points("smallest"), lj.risk.coverage.check_num_points(362)
    ('smallest', 362)
    >>> lj.risk.coverage.check_num_points("largest")
    Traceback (most recent call last):
    ...
    ValueError: num_points (an int, None or 'smallest') must be an integer >= 1; got 'largest'.
  """
  if num_points is None or (isinstance(num_points, str) and num_points == SMALLEST):
    return num_points
  return validation.check_int(f"num_points (an int, None or {SMALLEST!r})", num_points, 1)


def first_size(lang: languages.Language, num_points, num_windows: int,
               points: Callable[[], int | float]) -> tuple[int | None, bool]:
  """(the first size, fixed) of `resize` for an engine's checked num_points (§3a).

  Args:
    lang: the language.
    num_points: None (the default size, re-sized when needed), SMALLEST (the smallest size of
      the ladder holding points(), None where none does) or an int (fixed).
    num_windows: the grid's score windows.
    points: () -> the nodes θ0 needs, with the engine's margin; called for SMALLEST only.

  Returns:
    (num_points for `resize`, whether the grid is fixed).

  Example:
    >>> lang, points = lj.occurrence(50), lambda: 100
    >>> lj.risk.coverage.first_size(lang, "smallest", 50, points), lj.risk.coverage.first_size(
    ...     lang, None, 50, points), lj.risk.coverage.first_size(lang, 500, 50, points)
    ((187, False), (None, False), (500, True))
  """
  if num_points is None:
    return None, False
  if isinstance(num_points, str):
    return size_covering(lang, points(), num_windows), False
  return int(num_points), True


def grid_options(route, num_points: int | None) -> dict:
  """The build options that put a route on a grid of num_points nodes: {"num_points": n} for
  a quadrature route, {} for any other or for None (§3a).

  Args:
    route: a route's name in lj.risk.ROUTES, or a RouteSpec.
    num_points: the grid size, or None for the route's default.

  Returns:
    A dict of keyword options for lj.risk_fn or a route's build.

  Example:
    >>> lj.risk.coverage.grid_options("laplace", 748), lj.risk.coverage.grid_options(
    ...     "lattice", 748)
    ({'num_points': 748}, {})
  """
  spec = registry.ROUTES[route] if isinstance(route, str) else route
  if num_points is None or not spec.quadrature:
    return {}
  return {"num_points": int(num_points)}


def describe(points: int | float, num_points: int | None = None) -> str:
  """The one line that says a run stopped because of its grid (§3a).

  Args:
    points: the nodes θ needs (inf where no grid is exact).
    num_points: the nodes the grid holds (read only when points is finite).

  Returns:
    A line.

  Example:
    >>> lj.risk.coverage.describe(587, 374)
    'quadrature grid exceeded: θ needs 587 nodes, the grid holds 374'
  """
  if not math.isfinite(points):
    return (f"quadrature grid exceeded: θ's scores spread beyond any exact grid (over "
            f"{quadrature.MAX_INDEX:.3g} lattice steps, or not finite)")
  return f"quadrature grid exceeded: θ needs {int(points)} nodes, the grid holds {num_points}"


class Resized(NamedTuple):
  """What `resize` returns (§3a).

  Attributes:
    result (object): the last run's result.
    num_points (int): the grid size of that run.
    failures (tuple): (num_points, needed) of every run that stopped because of its grid,
      in order; the last one is that of `result` when `exceeded`.
    exceeded (bool): whether `result` itself stopped because of its grid (the user fixed
      the grid, or no size of the ladder covers θ).

  Example:
    >>> resized = lj.risk.coverage.Resized("run", 748, ((374, 587),), False)
    >>> resized.num_points, len(resized.failures), resized.exceeded
    (748, 1, False)
  """

  result: Any
  num_points: int
  failures: tuple
  exceeded: bool


def resize(attempt: Callable[[int], Any], lang: languages.Language, num_windows: int, *,
           stopped_at: Callable[[Any], Any], num_points: int | None = None,
           fixed: bool = False, step: float = quadrature.STEP,
           left: float | None = None) -> Resized:
  """Runs attempt(num_points), and while the run stopped because of its grid, runs it again at
  the smallest size of the ladder that covers where it stopped (§3a).

  A run stopped because of its grid when stopped_at(result) gives the concrete params at
  which it met a non-finite value (or the nodes they need) and those need more nodes than
  the grid holds. Each
  rerun starts from scratch at a size of the ladder, so its result equals a run built at
  that size from the start, and a run compiles at most one program per size it uses.
  Call it outside jit.

  Args:
    attempt: num_points -> result; builds and runs at that static grid size.
    lang: the language; None when left is given and stopped_at gives numbers.
    num_windows: the grid's score windows (`windows`).
    stopped_at: result -> the concrete params (any layout, or a list of them) where the run
      stopped on a non-finite value, or the nodes they need (a number, e.g. the largest
      grid_points_needed of its records), or None where it did not stop.
    num_points: the first size; None for `default_size`.
    fixed: the user fixed the grid: run once, and report a grid stop in `exceeded`.
    step: the lattice step h.
    left: the windows' left extent; None for quadrature.window_left(lang).

  Returns:
    A Resized.

  Example:
    A stand-in run that stops wherever its grid holds fewer than 500 nodes:

    >>> lang = lj.occurrence(50)
    >>> theta = {"alpha": jnp.linspace(0.0, -80.0, 50), "beta": jnp.zeros(50)}
    >>> def attempt(num_points):
    ...   return ("stopped" if num_points < 500 else "done"), num_points
    >>> stopped_at = lambda result: theta if result[0] == "stopped" else None
    >>> resized = lj.risk.coverage.resize(attempt, lang, 50, stopped_at=stopped_at)
    >>> resized.result, resized.failures, resized.exceeded
    (('done', 748), ((374, 507),), False)
  """
  if num_points is None:
    num_points = default_size(lang, num_windows, step=step, left=left)
  size, failures = int(num_points), []
  while True:
    result = attempt(size)
    stopped = stopped_at(result)
    if stopped is None or isinstance(stopped, (int, float)):
      points = stopped
    else:
      points = needed(lang, stopped, step=step)
    if points is None or points <= size:  # finished, or stopped for another reason
      return Resized(result, size, tuple(failures), False)
    failures.append((size, points))
    larger = None if fixed else size_covering(lang, points, num_windows, step=step, left=left)
    if larger is None or larger <= size:
      return Resized(result, size, tuple(failures), True)
    size = larger


__all__ = ["SMALLEST", "Resized", "check_num_points", "default_size", "describe",
           "first_size", "grid_options", "ladder", "needed", "needed_fn", "resize",
           "size_covering", "windows"]
