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
from lagjax.risk import laplace, quadrature, registry

# One quadrature window bound per factor e^16 of the mean length, so that every d up to
# ~9e6 shares one compiled function (extra nodes only add accuracy).
LOG_MEAN_BUCKET = 16.0


@dataclasses.dataclass(frozen=True)
class Grid:
  """The static quadrature grid of `moments` (one compiled function per value; §3a, §8.4).

  The window's left extent is rounded up to a bucket of LOG_MEAN_BUCKET in log E[n], so
  that one grid serves a wide range of d.

  Attributes:
    cls (bool): whether the scores carry the CLS token last.
    left (float): each window's left extent (at least quadrature.window_left).
    width (int): points per window, quadrature.window_width at that left.
    num_points (int): the static number of quadrature nodes.

  Example:
    >>> lang = lj.occurrence(4)
    >>> grid, _ = lj.risk.moments.problem(lang, lj.partition.token_group_ids(lang), False)
    >>> grid  # left = 38 + 16 ⌈log 3 / 16⌉; two windows of 235 nodes
    Grid(cls=False, left=54.0, width=235, num_points=470)
  """

  cls: bool
  left: float
  width: int
  num_points: int


class Problem(NamedTuple):
  """A language on token groups as traced arrays: every number that changes with d (§3a, §8.4).

  Attributes:
    masses (jax.Array): π_g 1{g ⊆ S_k} (K, G).
    coefs (jax.Array): the inclusion-exclusion coefficients (K,).
    law (object): the length law (a pytree).
    metric (jax.Array): token-group sizes k_g (G[+1],), 1 for CLS.

  Example:
    Occurrence's token groups {a} and the other d - 1 letters:

    >>> lang = lj.occurrence(4)
    >>> _, problem = lj.risk.moments.problem(lang, lj.partition.token_group_ids(lang), False)
    >>> problem.metric.tolist(), problem.masses.tolist()
    ([1.0, 3.0], [[0.25, 0.75], [0.0, 0.75]])
  """

  masses: jax.Array    # (K, G) π_g 1{g ⊆ S_k}
  coefs: jax.Array     # (K,) inclusion-exclusion coefficients
  law: object          # the length law (a pytree)
  metric: jax.Array    # (G[+1],) token-group sizes (1 for CLS)


def moments_route(lang: languages.Language) -> str:
  """The first exact route of the registry that gives the moments of lang's squared risk
  (registry.first_supporting with quantity "moments"; §3a, §3d).

  Args:
    lang: the language (§1b).

  Returns:
    "laplace" (PresenceLabels) or "transfer" (AutomatonLabels) among the built-in routes.

  Raises:
    ValueError: in one line with each route's reason, when none is exact.

  Example:
    >>> lj.risk.moments.moments_route(lj.occurrence(4))
    'laplace'
    >>> lj.risk.moments.moments_route(lj.data.regular_builtins.even_pairs())
    'transfer'
  """
  name, reasons = registry.first_supporting(lang, quantity="moments")
  if name is None:
    raise ValueError("the moments of the attention masses need an exact route: "
                     + "; ".join(reasons.values()) + ".")
  return name


def _check_presence(lang) -> None:
  reason = languages.missing(lang, languages.PresenceLabels,
                             "labels from presence, which the traced problem is built from")
  if reason:
    raise ValueError(f"the moments on a static grid need the Laplace route: {reason}.")


def moments_fn(lang: languages.Language, partition: partition_lib.Partition | None = None, *,
               cls: bool = False):
  """params -> (H, g) on token groups `partition` (CLS last when cls); reads only α.

  H = E[W Wᵀ] and g = E[y W] of the token-group attention masses, so that at fixed α
  R(β) = ½ βᵀHβ - gᵀβ + ½ (docs/theory.md §3a; from the transfer route for regular
  languages, §3d).

  Args:
    lang: the language; its route is moments_route(lang).
    partition: token groups; None means one group per token.
    cls: whether params carry the CLS scalars.

  Returns:
    fn(params) -> (H (G[+1], G[+1]), g (G[+1],)).

  Example:
    At α = 0 on occurrence's token groups, g = (1/d, -1/d) (§4):

    >>> lang = lj.occurrence(4)
    >>> moments = lj.risk.moments.moments_fn(lang, lj.partition.of_language(lang))
    >>> H, g = jax.jit(moments)({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
    >>> np.round(np.asarray(g), 6).tolist()
    [0.25, -0.25]
  """
  return registry.ROUTES[moments_route(lang)].attention_moments(lang, partition, cls=cls)


def problem(lang: languages.Language, index: np.ndarray, cls: bool) -> tuple[Grid, Problem]:
  """The language on the token groups `index` (d,) (ids 0…G-1) as (static grid, traced arrays),
  in O(d) NumPy with no per-token objects (Laplace route: PresenceLabels only; §3a, §8.4).

  Args:
    lang: the language; it must declare PresenceLabels.
    index: the token group of every token (d,), e.g. partition.token_group_ids(lang).
    cls: whether the scores carry the CLS token last.

  Returns:
    (Grid, Problem).

  Raises:
    ValueError: if the language does not declare PresenceLabels.

  Example:
    >>> lang = lj.occurrence(4)
    >>> grid, problem = lj.risk.moments.problem(lang, lj.partition.token_group_ids(lang), True)
    >>> grid.num_points, problem.metric.tolist()  # three windows: {a}, the rest, CLS
    (705, [1.0, 3.0, 1.0])
  """
  _check_presence(lang)
  registry.ROUTES["laplace"].check_length_law(lang)  # the Laplace route's G, G', G''
  sizes = np.bincount(index).astype(np.float64)
  first = partition_lib.first_tokens(index, sizes.size)
  coefs, supports = lang.inclusion_exclusion()
  masses = supports[:, first] * np.bincount(index, weights=lang.pi_array)[None, :]
  log_mean = max(math.log(max(lang.length.mean, 1.0)), 0.0)
  left = 38.0 + LOG_MEAN_BUCKET * math.ceil(max(log_mean, 1e-9) / LOG_MEAN_BUCKET)
  width = quadrature.window_width(lang, left=left)
  grid = Grid(cls, left, width, quadrature.default_num_points(sizes.size + int(cls), width))
  metric = np.concatenate([sizes, [1.0]]) if cls else sizes
  return grid, Problem(masses, coefs, lang.length, metric)


def moments(grid: Grid, problem: Problem, alpha):
  """(H, g) at stacked token-group scores α (G[+1],), traced in the problem's arrays.

  The formulas of laplace.group_moments (docs/theory.md §3a); the language enters as
  traced arrays, so one compiled function serves every d with the same Grid (§8.4).

  Args:
    grid: the static quadrature grid (hashable, so a static argument under jit).
    problem: the language as traced arrays.
    alpha: stacked token-group scores (G[+1],), CLS last when grid.cls.

  Returns:
    (H (G[+1], G[+1]), g (G[+1],)).

  Example:
    One compiled function for d = 4 and d = 8; at α = 0, g = (1/d, -1/d) (§4):

    >>> moments = jax.jit(lj.risk.moments.moments, static_argnums=0)
    >>> for d in (4, 8):
    ...   lang = lj.occurrence(d)
    ...   grid, problem = lj.risk.moments.problem(lang, lj.partition.token_group_ids(lang),
    ...                                           False)
    ...   H, g = moments(grid, problem, jnp.zeros(2))
    ...   print(grid.num_points, np.round(np.asarray(g), 6).tolist())
    470 [0.25, -0.25]
    470 [0.125, -0.125]
  """
  return laplace.group_moments(alpha, problem.masses, problem.coefs, problem.law, cls=grid.cls,
                               step=quadrature.STEP, left=grid.left, width=grid.width,
                               num_points=grid.num_points)
