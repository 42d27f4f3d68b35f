"""The quadrature of the exact routes in x = log t (docs/theory.md sections 3a and 3d).

With f = A/B, 1/B = ∫ e^{-tB} dt and 1/B² = ∫ t e^{-tB} dt turn expectations over unbounded
strings into integrals in t. In x = log t and with s_g = x + log u_g = log(t u_g), every
factor is bounded: e^{-t u_g} = exp(-e^s), t u_g e^{-t u_g} = exp(s - e^s) and
(t u_g)² e^{-t u_g} = exp(2s - e^s) (`kernels`), u_g = e^{α_g - α_max} <= 1, so no score
spread overflows. Group g's mass sits in the window x ∈ [c_g - left, c_g + right] with
c_g = α_max - α_g; left = 38 + log E[n] bounds the neglected tail by e^{-38} max|β|, and
right = 4.5 leaves exp(-e^{4.5}) < 1e-39. The integrand is analytic in the strip
``|Im x| < π/2``, so the trapezoid rule on the lattice x = h·j converges like exp(-2π a / h)
(a < π/2); h = 0.25 gives < 1e-15. The windows of all groups are merged on that one lattice
(`merged_windows`), so gaps between far-apart score clusters cost nothing. The Laplace route
(§3a) and the transfer route (§3d) share this module; a route that integrates here declares
`quadrature = True`, and the eager conveniences size its grid with `points_needed`.

Coverage: the grid has a static number of nodes. Where θ's windows need more, or lie beyond
MAX_INDEX lattice steps (where the nodes stop being exact lattice points), the route
multiplies what it returns by `nan_unless_covered`: NaN, value and gradient, never a finite
wrong number. risk/coverage.py holds the ladder of grid sizes consumers re-size along.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import languages
from lagjax.models import direct
from lagjax.risk import entries

STEP = 0.25
RIGHT = 4.5
MAX_CLUSTERS = 2
# Lattice indices x/h stay below this, so every node and every start is an exact float64
# integer (2^53 is the limit); a score spread beyond ≈ 2^52 h nats has no exact grid.
MAX_INDEX = 2.0 ** 52


def window_left(lang: languages.Language) -> float:
  """The left extent of a token group's window, left = 38 + log E[n] (docs/theory.md §3a).

  Below the window the integrand is at most E[n] max|β| π_g e^{s_g}, so the tail it leaves
  out is at most e^{-38} max|β| ≈ 3.1e-17 max|β|.

  Args:
    lang: the language; its length law gives E[n] (at least 1 is used).

  Returns:
    left, a float.

  Example:
    >>> lang = lj.occurrence(4)  # balanced geometric lengths, E[n] = d - 1 = 3
    >>> round(lj.risk.quadrature.window_left(lang) - 38, 6)  # log 3
    1.098612
  """
  return 38.0 + math.log(max(lang.length.mean, 1.0))


def window_width(lang: languages.Language, step: float = STEP, left: float | None = None) -> int:
  """Lattice points in one window [c - left, c + right], ⌈(left + right)/h⌉ + 1 (§3a).

  Args:
    lang: the language (for the default left).
    step: the lattice step h.
    left: the window's left extent; None for window_left(lang).

  Returns:
    The number of points, an int.

  Example:
    >>> lj.risk.quadrature.window_width(lj.occurrence(4))  # ⌈(38 + log 3 + 4.5)/0.25⌉ + 1
    176
    >>> lj.risk.quadrature.window_width(lj.occurrence(50))  # E[n] = 49, as in §3a
    187
  """
  left = window_left(lang) if left is None else left
  return int(math.ceil((left + RIGHT) / step)) + 1


def merged_windows(centers, step: float, left: float, width: int, num_points: int):
  """Trapezoid nodes and weights on the union of windows [c - left, c + right] (§3a).

  All windows lie on the lattice x = step·j and have `width` points; the union is
  listed in increasing order into `num_points` static slots, so far-apart score
  clusters cost one window each and the gaps between them nothing.

  Args:
    centers: the windows' centers c_g = α_max - α_g (G,).
    step: the lattice step h.
    left: each window's left extent.
    width: points per window, window_width.
    num_points: the static number of slots.

  Returns:
    x (num_points,), weights (num_points,) (zero on unused slots) and the number
    of lattice points the union needs (covered iff <= num_points); inf where a
    window lies beyond MAX_INDEX lattice steps (a score spread of ≈ 1e15 nats or a
    non-finite score), where no grid is exact.

  Example:
    Two windows of 4 points, [-2, 1] and [8, 11], in 10 slots:

    >>> merged_windows = jax.jit(lj.risk.quadrature.merged_windows, static_argnums=(1, 2, 3, 4))
    >>> x, weights, needed = merged_windows(jnp.array([0.0, 10.0]), 1.0, 2.0, 4, 10)
    >>> np.asarray(x).tolist()
    [-2.0, -1.0, 0.0, 1.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0]
    >>> np.asarray(weights).tolist(), int(needed)
    ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0], 8)
  """
  starts = jnp.sort(jnp.floor((centers - left) / step))
  # Window k adds the points of its right end not already in window k-1.
  new = jnp.concatenate([jnp.full((1,), width, starts.dtype),
                         jnp.minimum(width, jnp.diff(starts))])
  cumulative = jnp.cumsum(new)
  slot = jnp.arange(num_points)
  method = "compare_all" if starts.shape[0] <= 64 else "scan"  # tiny arrays: no loop
  window = jnp.minimum(jnp.searchsorted(cumulative, slot, side="right", method=method),
                       starts.shape[0] - 1)
  first_new = starts[window] + width - new[window]
  index = first_new + slot - (cumulative[window] - new[window])
  # Beyond MAX_INDEX the nodes are no longer exact lattice points (the ±1e300-score case
  # once gave a finite wrong risk): no grid covers such scores.
  exact = starts[-1] + width < MAX_INDEX
  needed = jnp.where(exact, cumulative[-1], jnp.inf)
  weights = jnp.where(slot < needed, step, 0.0)
  return step * index, weights, needed


# merged_windows as one program per (shape, grid), for calls on concrete scores.
_merged_windows = jax.jit(merged_windows, static_argnums=(1, 2, 3, 4))


def kernels(alpha, step, left, width, num_points):
  """Quadrature weights and the kernels exp(-e^s), exp(s - e^s), exp(2s - e^s), s = log(t u_g),
  at the scores α (G[+1],) of the groups (and the CLS token) (docs/theory.md §3a).

  Scores are shifted by α_max (behind stop_gradient) and s is clipped at 40, so no score
  spread overflows and gradients never meet inf·0.

  Args:
    alpha: stacked scores (G[+1],), CLS last.
    step: the lattice step h.
    left: each window's left extent, window_left.
    width: points per window, window_width.
    num_points: the static number of nodes N.

  Returns:
    (x_weights (N,), decay, kernel1, kernel2 (G[+1], N), lattice points needed).
    Groups lead and quadrature nodes trail, so vectorized loops run along the nodes.

  Example:
    ∫ exp(s - e^s) ds = ∫ exp(2s - e^s) ds = Γ(1) = Γ(2) = 1, and exp(s - e^s) peaks at
    s = 0 with value e^{-1}:

    >>> lang = lj.occurrence(4)
    >>> left, width = lj.risk.quadrature.window_left(lang), lj.risk.quadrature.window_width(lang)
    >>> kernels = jax.jit(lj.risk.quadrature.kernels, static_argnums=(1, 2, 3, 4))
    >>> x_weights, decay, kernel1, kernel2, needed = kernels(jnp.zeros(2), 0.25, left, width,
    ...                                                      width)
    >>> kernel1.shape, int(needed)
    ((2, 176), 176)
    >>> round(float(x_weights @ kernel1[0]), 6), round(float(x_weights @ kernel2[0]), 6)
    (1.0, 1.0)
    >>> round(float(kernel1.max()), 6)  # 1/e
    0.367879
  """
  log_u = alpha - jax.lax.stop_gradient(alpha.max())
  x, x_weights, needed = merged_windows(jax.lax.stop_gradient(-log_u), step, left, width,
                                        num_points)
  # Beyond s = 40 every kernel is 0 to double precision; the clip keeps exp(s)
  # finite so gradients never meet inf·0.
  s = jnp.minimum(log_u[:, None] + x[None, :], 40.0)
  e_s = jnp.exp(s)
  decay = jnp.exp(-e_s)
  kernel1 = e_s * decay
  return x_weights, decay, kernel1, e_s * kernel1, needed


def nan_unless_covered(needed, num_points: int):
  """1.0 where the grid of num_points nodes covers θ (needed <= num_points), NaN elsewhere:
  the factor by which every quadrature route multiplies what it returns (docs/theory.md §3a).

  A product, not a select, so the value and every derivative of a route outside its grid
  are NaN (never a finite wrong number), and inside it the route is unchanged (x·1 = x).

  Args:
    needed: the lattice points θ needs (merged_windows), a traced scalar.
    num_points: the grid's static number of nodes.

  Returns:
    A float scalar, 1.0 or NaN.

  Example:
    >>> cover = lj.risk.quadrature.nan_unless_covered
    >>> float(cover(jnp.array(300.0), 352)), float(cover(jnp.array(400.0), 352))
    (1.0, nan)
    >>> float(jax.grad(lambda v: v * cover(jnp.array(400.0), 352))(2.0))
    nan
  """
  return jnp.where(needed <= num_points, 1.0, jnp.nan)


def default_num_points(windows: int, width: int, max_clusters: int | None = None) -> int:
  """Quadrature nodes for `windows` score windows of `width` nodes each: every window when
  there are at most 8, else MAX_CLUSTERS of them (score clusters share windows; §3a).

  Args:
    windows: the number of score windows (token groups, plus one for CLS).
    width: points per window, window_width.
    max_clusters: windows the grid holds; None for the rule above.

  Returns:
    The static number of nodes, an int.

  Example:
    >>> lj.risk.quadrature.default_num_points(3, 176)
    528
    >>> lj.risk.quadrature.default_num_points(10, 176)  # MAX_CLUSTERS = 2 windows
    352
  """
  if max_clusters is None:
    max_clusters = windows if windows <= 8 else MAX_CLUSTERS
  return min(windows, max_clusters) * width


def num_windows(groups: int, layout: direct.Layout) -> int:
  """Score windows of the quadrature: one per kind of position (middle, and with position
  tables first, last, both) and token group, plus the CLS token (docs/theory.md §3d).

  Args:
    groups: G, the number of token groups.
    layout: the model's parts, direct.Layout (§2b).

  Returns:
    The number of windows, an int.

  Example:
    >>> Layout = lj.models.direct.Layout
    >>> lj.risk.quadrature.num_windows(2, Layout()), lj.risk.quadrature.num_windows(
    ...     2, Layout(cls=True, positions="first_last"))
    (2, 9)
  """
  return (4 if layout.positions == "first_last" else 1) * groups + int(layout.cls)


def points_needed(lang: languages.Language, params, step: float = STEP) -> int:
  """Lattice points the merged windows of the worst query row need, for concrete params of
  any layout or concrete stacked scores (G[+1],) (to size the grid; docs/theory.md §3a, §3d).

  Args:
    lang: the language (for window_left and window_width).
    params: concrete grouped params of any layout (§2b), or concrete stacked scores.
    step: the lattice step h.

  Returns:
    The number of points, an int; math.inf where no grid is exact (merged_windows).

  Example:
    Equal scores share one window; scores 100 apart need two, and so does a first-position
    score 100 below the rest:

    >>> lang = lj.occurrence(4)
    >>> lj.risk.quadrature.points_needed(lang, np.array([0.0, 0.0]))
    176
    >>> lj.risk.quadrature.points_needed(lang, np.array([0.0, -100.0]))
    352
    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> params = lj.init_params(2, positions="first_last")
    >>> lj.risk.quadrature.points_needed(pairs, params)
    181
    >>> params["alpha_first"] = jnp.array([-100.0, -100.0])
    >>> lj.risk.quadrature.points_needed(pairs, params)
    362
    >>> lj.risk.quadrature.points_needed(lang, np.array([1e300, -1e300]))
    inf
  """
  scores = entries.entry_table(params)[0] if isinstance(params, dict) else params
  left, width = window_left(lang), window_width(lang, step)
  needed = max(float(_merged_windows(jnp.asarray(row.max() - row), step, left, width, 1)[2])
               for row in np.atleast_2d(np.asarray(scores)))
  return int(needed) if math.isfinite(needed) else math.inf


__all__ = ["MAX_CLUSTERS", "MAX_INDEX", "RIGHT", "STEP", "default_num_points", "kernels",
           "merged_windows", "nan_unless_covered", "num_windows", "points_needed", "window_left",
           "window_width"]
