"""Laplace route: exact squared-loss population risk for any θ (docs/theory.md section 3a).

With f = A/B, 1/B = ∫ e^{-tB} dt and 1/B² = ∫ t e^{-tB} dt turn expectations
over unbounded strings into one-dimensional integrals of the generating
function G of the length law:

    E[1{w⊆S} A/B]   = ∫ G'(M) M1 dt,
    E[1{w⊆S} A²/B²] = ∫ t [G'(M) M2 + G''(M) M1²] dt,

by the trapezoid rule in x = log t on the merged windows of risk/quadrature.py, whose
module docstring gives the numerics and the error bound.
"""

from __future__ import annotations

import jax.numpy as jnp

from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base
from lagjax.risk import quadrature as quadrature_lib


class LaplaceRoute(base.RouteSpec):
  """The Laplace route (docs/theory.md §3a): exact squared-loss risk and moments (H, g) of the
  plain model on languages with PresenceLabels, by quadrature.

  Example:
    >>> route = lj.risk.ROUTES["laplace"]
    >>> print(route.supports(lj.occurrence(4)))
    None
    >>> route.supports(lj.occurrence(4), loss="logistic")
    "route 'laplace' is exact for loss 'squared' only; got loss 'logistic'"
  """

  name = "laplace"
  capability = languages.PresenceLabels
  capability_use = "labels from presence, y = Σ_k coef_k 1{w ⊆ S_k}"
  length_needs = ("required", "pgf")    # G, G', G'' of the length law
  losses = ("squared",)
  provides = frozenset({"risk", "moments"})
  quadrature = True

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            step: float = quadrature_lib.STEP, max_clusters: int | None = None,
            num_points: int | None = None) -> base.Route:
    """Builds the exact squared-loss risk on grouped parameters (docs/theory.md §3a).

    R = ½ (E f² - 2 E[y f] + 1), with E[1{w⊆S} A/B] = ∫ G'(M) M1 dt and
    E[A²/B²] = ∫ t [G'(M) M2 + G''(M) M1²] dt by the trapezoid rule in x = log t.

    Args:
      lang: the language (its π and length law enter through G and the supports).
      partition: groups of tied tokens; None means one group per token.
      loss: "squared" (checked by supports).
      layout: the plain model's layout; layout.cls says whether params carry the CLS scalars.
      key: unused.
      step: lattice step h of the trapezoid rule in x = log t.
      max_clusters: how many well-separated score clusters the static grid holds
        (default: every group, or quadrature.MAX_CLUSTERS = 2 when there are more than 8).
      num_points: static number of quadrature nodes (overrides max_clusters).

    Returns:
      A Route whose risk takes "alpha" and "beta" of shape (G,) [and "alpha_cls",
      "beta_cls"]. Where the score clusters need more nodes than the grid holds,
      report(params)["grid_covered"] is False and the risk, its gradient and the moments
      are NaN (never a finite wrong number); `lj.population_risk` sizes the grid so that
      never happens, and lagjax/risk/coverage.py re-sizes it for the long-running consumers.

    Example:
      On the two token groups {a} and the rest of occurrence, with β ≡ b constant, f ≡ b
      for every α, so R = ½ (b² - 2b E y + 1) = ½ (b² + 1) (balanced: E y = 0):

      >>> lang = lj.occurrence(4)
      >>> route = lj.risk.ROUTES["laplace"].build(lang, lj.partition.of_language(lang))
      >>> report = jax.jit(route.report)
      >>> round(float(report({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})["risk"]), 6)
      0.5
      >>> out = report({"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})
      >>> round(float(out["risk"]), 6), bool(out["grid_covered"])
      (0.625, True)
    """
    del loss, key
    self.check_length_law(lang)
    partition = partition or partition_lib.singletons(lang.d)
    coefs, supports = lang.inclusion_exclusion()
    masses = jnp.asarray(partition.support_masses(lang.pi_array, supports))  # (K, G)
    coefs = jnp.asarray(coefs)
    law = lang.length
    left = quadrature_lib.window_left(lang)
    width = quadrature_lib.window_width(lang, step)
    windows = quadrature_lib.num_windows(partition.num_groups, layout)
    if num_points is None:
      num_points = quadrature_lib.default_num_points(windows, width, max_clusters)
    cls = layout.cls

    def moments(params):
      """E[y f] and E[f²] by quadrature, and the lattice points the grid needs."""
      beta = direct.stack(params, "beta")
      x_weights, decay, kernel1, kernel2, needed = quadrature_lib.kernels(
          direct.stack(params, "alpha"), step, left, width, num_points)
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
      # NaN outside the grid's coverage, value and gradient (docs/theory.md §3a).
      covered = quadrature_lib.nan_unless_covered(needed, num_points)
      mean_yf = coefs @ (first @ x_weights) * covered
      mean_f2 = second @ x_weights * covered
      return mean_yf, mean_f2, needed

    def risk(params):
      mean_yf, mean_f2, _ = moments(params)
      return base.squared_risk(mean_yf, mean_f2)

    def report(params):
      mean_yf, mean_f2, needed = moments(params)
      return {"risk": base.squared_risk(mean_yf, mean_f2), "mean_yf": mean_yf,
              "mean_f2": mean_f2, "grid_points_needed": needed,
              "grid_covered": needed <= num_points}

    return base.Route(self.name, risk, report, partition)

  def attention_moments(self, lang, partition=None, *, cls: bool = False, **options):
    """(H, g) by `attention_moments` below (§3a)."""
    self.check_length_law(lang)
    return attention_moments(lang, partition, cls=cls, **options)


def attention_moments(lang: languages.Language, partition: partition_lib.Partition | None = None,
                      *, cls: bool = False, step: float = quadrature_lib.STEP,
                      num_points: int | None = None):
  """Builds (H, g) = (E[W Wᵀ], E[y W]) of the group attention masses W at given scores.

  W_g = Σ_{σ∈g} c_σ u_σ / B (plus W_cls = u_cls / B last when cls); see group_moments. At
  fixed α the squared risk is R(β) = ½ βᵀHβ - gᵀβ + ½ (docs/theory.md §3a).

  Args:
    lang: the language; it must declare PresenceLabels.
    partition: token groups; None means one group per token.
    cls: whether params carry the CLS scalars (then W_cls is last).
    step: the lattice step h.
    num_points: static number of quadrature nodes; None for quadrature.default_num_points.

  Returns:
    fn(params) -> (H, g), reading only params["alpha"] (and "alpha_cls"); NaN where the
    grid does not cover α.

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
  left, width = quadrature_lib.window_left(lang), quadrature_lib.window_width(lang, step)
  windows = partition.num_groups + int(cls)
  if num_points is None:
    num_points = quadrature_lib.default_num_points(windows, width)

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
    left: each window's left extent, quadrature.window_left.
    width: points per window, quadrature.window_width.
    num_points: the static number of quadrature nodes.

  Returns:
    (H (G[+1], G[+1]), g (G[+1],)); NaN where the num_points grid does not cover α.

  Example:
    At α = 0, W_g = C_g/n, so the rows of H sum to E W_g = π_g:

    >>> lang = lj.occurrence(4)
    >>> coefs, supports = lang.inclusion_exclusion()
    >>> masses = lj.partition.of_language(lang).support_masses(lang.pi, supports)
    >>> left, width = lj.risk.quadrature.window_left(lang), lj.risk.quadrature.window_width(lang)
    >>> @jax.jit
    ... def moments(alpha):
    ...   return lj.risk.laplace.group_moments(alpha, masses, coefs, lang.length, cls=False,
    ...                                        step=0.25, left=left, width=width,
    ...                                        num_points=2 * width)
    >>> H, g = moments(jnp.zeros(2))
    >>> np.round(np.asarray(H.sum(1)), 6).tolist()
    [0.25, 0.75]
  """
  x_weights, decay, kernel1, kernel2, needed = quadrature_lib.kernels(alpha, step, left, width,
                                                                      num_points)
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
  # NaN outside the grid's coverage, value and gradient (docs/theory.md §3a).
  covered = quadrature_lib.nan_unless_covered(needed, num_points)
  return hessian * covered, coefs @ per_support * covered


__all__ = ["LaplaceRoute", "attention_moments", "group_moments"]
