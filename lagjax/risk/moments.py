"""The moments of the attention masses that the dynamics and analysis layers need.

At fixed scores α the squared risk is a quadratic in β (docs/theory.md §5),
R(β) = ½ βᵀHβ - gᵀβ + ½ with H = E[W Wᵀ], g = E[y W], W the token-group
attention masses. Closed forms (lagjax/dynamics/closed_form.py), the regime
analysis and joint GD ask this module for (H, g) rather than a route's
internals, so that any exact route able to compute them can serve: the Laplace
route (docs/theory.md §3a) for languages with PresenceLabels, the transfer route
(§3d) for languages with AutomatonLabels.

Two forms:
- `moments_fn(lang, partition, cls)`: params -> (H, g) for one language;
- `problem(lang, index, cls)` and `moments(grid, problem, α)` (Laplace route only): the
  language as traced arrays (token-group masses, inclusion-exclusion coefficients, length
  law) with a static quadrature grid, so one compiled function serves every d.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import numpy as np

from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.risk import laplace, transfer

# One quadrature window bound per factor e^16 of the mean length, so that every d up to
# ~9e6 shares one compiled function (extra nodes only add accuracy).
LOG_MEAN_BUCKET = 16.0


@dataclasses.dataclass(frozen=True)
class Grid:
  """The static quadrature grid of `moments` (one compiled function per value)."""

  cls: bool
  left: float
  width: int
  num_points: int


class Problem(NamedTuple):
  """A language on token groups as traced arrays: every number that changes with d."""

  masses: jax.Array    # (K, G) π_g 1{g ⊆ S_k}
  coefs: jax.Array     # (K,) inclusion-exclusion coefficients
  law: object          # the length law (a pytree)
  metric: jax.Array    # (G[+1],) token-group sizes (1 for CLS)


# The exact routes that give (H, g) for any scores, in the order "auto" tries them.
MOMENT_ROUTES = {"laplace": laplace, "transfer": transfer}


def moments_route(lang: languages.Language) -> str:
  """The first route of MOMENT_ROUTES exact for lang's squared risk, or a one-line error."""
  reasons = {name: module.supports(lang, "squared") for name, module in MOMENT_ROUTES.items()}
  for name, reason in reasons.items():
    if reason is None:
      return name
  raise ValueError("the moments of the attention masses need an exact route: "
                   + "; ".join(reasons.values()) + ".")


def _check_presence(lang) -> None:
  reason = languages.missing(lang, languages.PresenceLabels,
                             "labels from presence, which the traced problem is built from")
  if reason:
    raise ValueError(f"the moments on a static grid need the Laplace route: {reason}.")


def moments_fn(lang: languages.Language, partition: partition_lib.Partition | None = None, *,
               cls: bool = False):
  """params -> (H, g) on token groups `partition` (CLS last when cls); reads only α."""
  return MOMENT_ROUTES[moments_route(lang)].attention_moments(lang, partition, cls=cls)


def problem(lang: languages.Language, index: np.ndarray, cls: bool) -> tuple[Grid, Problem]:
  """The language on the token groups `index` (d,) (ids 0…G-1) as (static grid, traced arrays),
  in O(d) NumPy with no per-token objects (Laplace route: PresenceLabels only)."""
  _check_presence(lang)
  sizes = np.bincount(index).astype(np.float64)
  first = partition_lib.first_tokens(index, sizes.size)
  coefs, supports = lang.inclusion_exclusion()
  masses = supports[:, first] * np.bincount(index, weights=lang.pi_array)[None, :]
  log_mean = max(math.log(max(lang.length.mean, 1.0)), 0.0)
  left = 38.0 + LOG_MEAN_BUCKET * math.ceil(max(log_mean, 1e-9) / LOG_MEAN_BUCKET)
  width = laplace.window_width(lang, left=left)
  grid = Grid(cls, left, width, laplace.default_num_points(sizes.size + int(cls), width))
  metric = np.concatenate([sizes, [1.0]]) if cls else sizes
  return grid, Problem(masses, coefs, lang.length, metric)


def moments(grid: Grid, problem: Problem, alpha):
  """(H, g) at stacked token-group scores α (G[+1],), traced in the problem's arrays."""
  return laplace.group_moments(alpha, problem.masses, problem.coefs, problem.law, cls=grid.cls,
                               step=laplace.STEP, left=grid.left, width=grid.width,
                               num_points=grid.num_points)
