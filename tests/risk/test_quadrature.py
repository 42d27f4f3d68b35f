"""The shared quadrature of the exact routes (lagjax/risk/quadrature.py, docs/theory.md §3a,
§3d): the grid's sizing.

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code.
"""

import jax
import numpy as np

import lagjax as lj
from lagjax.risk import quadrature


def _three_letters():
  """d = 3, uniform π, geometric lengths of mean 2: strings often lack the top-score token,
  so every score window carries mass."""
  return lj.occurrence(3, 0, length=lj.geometric(0.5))


def test_points_needed_equals_the_routes_own_count():
  """points_needed (the grid sizing of lj.population_risk) counts the lattice points of the
  windows the Laplace route itself lays, centred at max α - α. Both counts are integers from
  the same merged_windows call on the same centres, so they agree exactly. At
  α = (0, -0.1, -30.6) the reflected centres max α + α floor onto the lattice differently
  (297 points, not 296).
  Kills: points_needed with alpha.max() + alpha."""
  lang = _three_letters()
  params = {"alpha": np.array([0.0, -0.1, -30.6]), "beta": np.array([1.0, -0.5, 2.0])}
  report = jax.jit(lj.risk.ROUTES["laplace"].build(lang).report)(params)
  assert bool(report["grid_covered"])
  assert quadrature.points_needed(lang, params) == int(report["grid_points_needed"]) == 296


def test_default_grid_holds_every_window_up_to_eight():
  """default_num_points: every window gets its nodes when there are at most 8 (docstring),
  MAX_CLUSTERS windows beyond. Integer arithmetic: exact.
  Kills: `windows < 8` instead of `windows <= 8`."""
  width = 174
  assert quadrature.default_num_points(8, width) == 8 * width
  assert quadrature.default_num_points(9, width) == quadrature.MAX_CLUSTERS * width
