"""Laplace route: exact squared-loss population risk for any θ (docs/theory.md section 3a).

With f = A/B, 1/B = ∫ e^{-tB} dt and 1/B² = ∫ t e^{-tB} dt turn expectations
over unbounded strings into one-dimensional integrals of the generating
function G of the length law:

    E[1{w⊆S} A/B]   = ∫ G'(M) M1 dt,
    E[1{w⊆S} A²/B²] = ∫ t [G'(M) M2 + G''(M) M1²] dt.

Numerics. In x = log t and with s_g = x + log u_g = log(t u_g), every factor is
bounded: e^{-t u_g} = exp(-e^s), t u_g e^{-t u_g} = exp(s - e^s) and
(t u_g)² e^{-t u_g} = exp(2s - e^s), where u_g = e^{α_g - α_max} <= 1. So no
score spread overflows. Group g's mass sits in the window
x ∈ [c_g - left, c_g + right] with c_g = α_max - α_g; left = 38 + log E[n]
bounds the neglected tail ∫_{-∞} e^x E[n] max|β| dx by e^{-38} max|β|, and
right = 4.5 leaves exp(-e^{4.5}) < 1e-39. The integrand is analytic in the
strip ``|Im x| < π/2``, so the trapezoid rule on the lattice x = h·j converges like
exp(-2π a / h) (a < π/2); h = 0.25 gives < 1e-15. The windows of all groups are
merged on that one lattice, so gaps between far-apart score clusters cost
nothing and spreads of 1e4 need no more points than spreads of 1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base

STEP = 0.25
RIGHT = 4.5
MAX_CLUSTERS = 2


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
    >>> round(lj.risk.laplace.window_left(lang) - 38, 6)  # log 3
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
    >>> lj.risk.laplace.window_width(lj.occurrence(4))  # ⌈(38 + log 3 + 4.5)/0.25⌉ + 1
    176
    >>> lj.risk.laplace.window_width(lj.occurrence(50))  # E[n] = 49, as in §3a
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
    of lattice points the union needs (covered iff <= num_points).

  Example:
    Two windows of 4 points, [-2, 1] and [8, 11], in 10 slots:

    >>> merged_windows = jax.jit(lj.risk.laplace.merged_windows, static_argnums=(1, 2, 3, 4))
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
  needed = cumulative[-1]
  weights = jnp.where(slot < needed, step, 0.0)
  return step * index, weights, needed


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
    >>> left, width = lj.risk.laplace.window_left(lang), lj.risk.laplace.window_width(lang)
    >>> kernels = jax.jit(lj.risk.laplace.kernels, static_argnums=(1, 2, 3, 4))
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
    >>> lj.risk.laplace.default_num_points(3, 176)
    528
    >>> lj.risk.laplace.default_num_points(10, 176)  # MAX_CLUSTERS = 2 windows
    352
  """
  if max_clusters is None:
    max_clusters = windows if windows <= 8 else MAX_CLUSTERS
  return min(windows, max_clusters) * width


def supports(lang: languages.Language, loss) -> str | None:
  """None if this route is exact for (lang, loss), else what is missing (one line; §1b, §3a).

  Args:
    lang: the language; it must declare PresenceLabels.
    loss: the loss; only "squared".

  Returns:
    None, or one line saying what is missing.

  Example:
    >>> print(lj.risk.laplace.supports(lj.occurrence(4), "squared"))
    None
    >>> lj.risk.laplace.supports(lj.occurrence(4), "logistic")
    "route 'laplace' is exact for loss 'squared' only; got loss 'logistic'"
  """
  if loss != "squared":
    return f"route 'laplace' is exact for loss 'squared' only; got loss {loss!r}"
  return languages.missing(lang, languages.PresenceLabels,
                           "labels from presence, y = Σ_k coef_k 1{w ⊆ S_k}")


def build(lang: languages.Language, partition: partition_lib.Partition | None = None, *,
          cls: bool = False, step: float = STEP, max_clusters: int | None = None,
          num_points: int | None = None) -> base.Route:
  """Builds the exact squared-loss risk on grouped parameters (docs/theory.md §3a).

  R = ½ (E f² - 2 E[y f] + 1), with E[1{w⊆S} A/B] = ∫ G'(M) M1 dt and
  E[A²/B²] = ∫ t [G'(M) M2 + G''(M) M1²] dt by the trapezoid rule in x = log t.

  Args:
    lang: the language (its π and length law enter through G and the supports).
    partition: groups of tied tokens; None means one group per token.
    cls: whether params carry the CLS scalars.
    step: lattice step h of the trapezoid rule in x = log t.
    max_clusters: how many well-separated score clusters the static grid holds
      (default: every group, or MAX_CLUSTERS = 2 when there are more than 8 groups).
    num_points: static number of quadrature nodes (overrides max_clusters).

  Returns:
    A Route whose risk takes "alpha" and "beta" of shape (G,) [and "alpha_cls", "beta_cls"].
    report(params)["grid_covered"] is False if the score clusters need more nodes
    than the grid holds; `lj.population_risk` sizes the grid so that never happens.

  Example:
    On the two token groups {a} and the rest of occurrence, with β ≡ b constant, f ≡ b
    for every α, so R = ½ (b² - 2b E y + 1) = ½ (b² + 1) (balanced: E y = 0):

    >>> lang = lj.occurrence(4)
    >>> route = lj.risk.laplace.build(lang, lj.partition.of_language(lang))
    >>> report = jax.jit(route.report)
    >>> round(float(report({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})["risk"]), 6)
    0.5
    >>> out = report({"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})
    >>> round(float(out["risk"]), 6), bool(out["grid_covered"])
    (0.625, True)
  """
  partition = partition or partition_lib.singletons(lang.d)
  coefs, supports = lang.inclusion_exclusion()
  masses = jnp.asarray(partition.support_masses(lang.pi_array, supports))  # (K, G)
  coefs = jnp.asarray(coefs)
  law = lang.length
  left = window_left(lang)
  width = window_width(lang, step)
  windows = partition.num_groups + int(cls)
  if num_points is None:
    num_points = default_num_points(windows, width, max_clusters)

  def moments(params):
    """E[y f] and E[f²] by quadrature, and the lattice points the grid needs."""
    beta = direct.stack(params, "beta")
    x_weights, decay, kernel1, kernel2, needed = kernels(direct.stack(params, "alpha"), step,
                                                         left, width, num_points)
    token_beta = params["beta"]
    groups = token_beta.shape[0]

    def over_groups(weights, kernel):
      """Σ_g weights[..., g] kernel[g] -> (..., N): a fused sum for a few groups (a tiny
      matmul would not fuse), a matrix product for many."""
      if groups > 8:
        return weights @ kernel[:groups]
      return (weights[..., None] * kernel[:groups]).sum(-2)

    m0 = over_groups(masses, decay)                          # M(t) per support, (K, N)
    m1 = over_groups(masses * token_beta, kernel1)           # t·M1(t) per support
    m2 = over_groups(masses[0] * token_beta**2, kernel2)     # t²·M2(t) on Σ, (N,)
    g1 = law.pgf_d1(m0)
    first = g1 * m1
    second = g1[0] * m2 + law.pgf_d2(m0[0]) * m1[0] ** 2
    if cls:
      g0 = law.pgf(m0)
      cls_decay, cls_kernel1, cls_kernel2 = decay[-1], kernel1[-1], kernel2[-1]
      cls_beta = beta[-1]
      first = cls_kernel1 * cls_beta * g0 + cls_decay * first
      second = (cls_kernel2 * cls_beta**2 * g0[0] + 2 * cls_beta * cls_kernel1 * g1[0] * m1[0]
                + cls_decay * second)
    mean_yf = coefs @ (first @ x_weights)
    mean_f2 = second @ x_weights
    return mean_yf, mean_f2, needed

  def risk(params):
    mean_yf, mean_f2, _ = moments(params)
    return base.squared_risk(mean_yf, mean_f2)

  def report(params):
    mean_yf, mean_f2, needed = moments(params)
    return {"risk": base.squared_risk(mean_yf, mean_f2), "mean_yf": mean_yf, "mean_f2": mean_f2,
            "grid_points_needed": needed, "grid_covered": needed <= num_points}

  return base.Route("laplace", risk, report, partition)


def points_needed(lang: languages.Language, params, step: float = STEP) -> int:
  """Lattice points the merged windows need for concrete params, or concrete stacked scores
  (G[+1],) (to size the grid; docs/theory.md §3a).

  Args:
    lang: the language (for window_left and window_width).
    params: concrete grouped params, or concrete stacked scores (G[+1],).
    step: the lattice step h.

  Returns:
    The number of points, an int.

  Example:
    Equal scores share one window; scores 100 apart need two:

    >>> lang = lj.occurrence(4)
    >>> lj.risk.laplace.points_needed(lang, np.array([0.0, 0.0]))
    176
    >>> lj.risk.laplace.points_needed(lang, np.array([0.0, -100.0]))
    352
  """
  alpha = np.asarray(direct.stack(params, "alpha") if isinstance(params, dict) else params)
  _, _, needed = merged_windows(jnp.asarray(alpha.max() - alpha), step, window_left(lang),
                                window_width(lang, step), 1)
  return int(needed)


def attention_moments(lang: languages.Language, partition: partition_lib.Partition | None = None,
                      *, cls: bool = False, step: float = STEP, num_points: int | None = None):
  """Builds (H, g) = (E[W Wᵀ], E[y W]) of the group attention masses W at given scores.

  W_g = Σ_{σ∈g} c_σ u_σ / B (plus W_cls = u_cls / B last when cls); see group_moments. At
  fixed α the squared risk is R(β) = ½ βᵀHβ - gᵀβ + ½ (docs/theory.md §3a).

  Args:
    lang: the language; it must declare PresenceLabels.
    partition: token groups; None means one group per token.
    cls: whether params carry the CLS scalars (then W_cls is last).
    step: the lattice step h.
    num_points: static number of quadrature nodes; None for default_num_points.

  Returns:
    fn(params) -> (H, g), reading only params["alpha"] (and "alpha_cls").

  Example:
    At α = 0 on occurrence's token groups, W = (c_a/n, 1 - c_a/n), so g = (1/d, -1/d) and,
    as W sums to 1, H sums to 1:

    >>> lang = lj.occurrence(4)
    >>> moments = lj.risk.laplace.attention_moments(lang, lj.partition.of_language(lang))
    >>> H, g = jax.jit(moments)({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
    >>> np.round(np.asarray(g), 6).tolist(), round(float(H.sum()), 6)
    ([0.25, -0.25], 1.0)
  """
  partition = partition or partition_lib.singletons(lang.d)
  coefs, supports = lang.inclusion_exclusion()
  masses = jnp.asarray(partition.support_masses(lang.pi_array, supports))  # (K, G)
  left, width = window_left(lang), window_width(lang, step)
  windows = partition.num_groups + int(cls)
  if num_points is None:
    num_points = default_num_points(windows, width)

  def moments(params):
    return group_moments(direct.stack(params, "alpha"), masses, jnp.asarray(coefs),
                         lang.length, cls=cls, step=step, left=left, width=width,
                         num_points=num_points)

  return moments


def group_moments(alpha, masses, coefs, law, *, cls: bool, step: float, left: float, width: int,
                  num_points: int):
  """(H, g) = (E[W Wᵀ], E[y W]) at stacked scores α (G[+1],), CLS last when cls.

  The language enters only through masses (K, G) = π_g 1{g ⊆ S_k}, the
  inclusion-exclusion coefficients (K,) and the length law (a pytree, so all
  three may be traced). By docs/theory.md §3a::

    H_gh = ∫ [G''(M) π_g π_h k1_g k1_h + δ_gh G'(M) π_g k2_g] dx,
    E[1{w⊆S} W_g] = ∫ G'(M_S) π_{g,S} k1_g dx,

  with kernels k1 = exp(s - e^s), k2 = exp(2s - e^s); the CLS entries follow from
  the same identities with e^{-t u_cls} factored out. At fixed α the squared
  risk is R(β) = ½ βᵀHβ - gᵀβ + ½.

  Args:
    alpha: stacked token-group scores (G[+1],), CLS last when cls.
    masses: π_g 1{g ⊆ S_k} (K, G), Partition.support_masses.
    coefs: the inclusion-exclusion coefficients (K,).
    law: the length law.
    cls: whether α carries the CLS score last.
    step: the lattice step h.
    left: each window's left extent, window_left.
    width: points per window, window_width.
    num_points: the static number of quadrature nodes.

  Returns:
    (H (G[+1], G[+1]), g (G[+1],)).

  Example:
    At α = 0, W_g = C_g/n, so the rows of H sum to E W_g = π_g:

    >>> lang = lj.occurrence(4)
    >>> coefs, supports = lang.inclusion_exclusion()
    >>> masses = lj.partition.of_language(lang).support_masses(lang.pi, supports)
    >>> left, width = lj.risk.laplace.window_left(lang), lj.risk.laplace.window_width(lang)
    >>> @jax.jit
    ... def moments(alpha):
    ...   return lj.risk.laplace.group_moments(alpha, masses, coefs, lang.length, cls=False,
    ...                                        step=0.25, left=left, width=width,
    ...                                        num_points=2 * width)
    >>> H, g = moments(jnp.zeros(2))
    >>> np.round(np.asarray(H.sum(1)), 6).tolist()
    [0.25, 0.75]
  """
  x_weights, decay, kernel1, kernel2, _ = kernels(alpha, step, left, width, num_points)
  decay, kernel1, kernel2 = decay.T, kernel1.T, kernel2.T
  groups = masses.shape[1]
  m0 = decay[:, :groups] @ masses.T                          # (N, K)
  g1 = law.pgf_d1(m0)                                        # G'(M_S) per support
  g2 = law.pgf_d2(m0[:, 0])
  weighted = kernel1[:, :groups] * masses[0]                 # π_g k1_g on Σ
  token_factor = decay[:, -1] if cls else 1.0                # e^{-t u_cls}
  # Written as matrix products so that no (N, K, G) or (N, G, G) array is formed.
  hessian = weighted.T @ ((x_weights * token_factor * g2)[:, None] * weighted)
  hessian += jnp.diag((x_weights * token_factor * g1[:, 0]) @ kernel2[:, :groups]
                      * masses[0])
  per_support = ((x_weights * token_factor)[:, None] * g1).T @ kernel1[:, :groups] * masses
  if cls:
    cls_kernel1, cls_kernel2 = kernel1[:, -1], kernel2[:, -1]
    cross = (x_weights * cls_kernel1 * g1[:, 0]) @ weighted
    corner = x_weights @ (cls_kernel2 * law.pgf(m0[:, 0]))
    hessian = jnp.block([[hessian, cross[:, None]], [cross[None, :], corner[None, None]]])
    cls_column = (x_weights * cls_kernel1) @ law.pgf(m0)
    per_support = jnp.concatenate([per_support, cls_column[:, None]], axis=1)
  return hessian, coefs @ per_support
