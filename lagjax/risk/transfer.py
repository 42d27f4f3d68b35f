"""Transfer route: exact squared-loss risk on regular languages (docs/theory.md §3d).

With f = A/B, the Laplace route's integrals 1/B = ∫ e^{-tB} dt and
1/B² = ∫ t e^{-tB} dt hold for any label; what changes is the sum over strings.
For a DFA with letter matrices P_x, weight each position by
w_x(s) = e^{-t u_x} (1 + s t v_x + ½ s² t² v_x²) and let T(s) = Σ_x π_x w_x(s) P_x.
Then Σ_n P(n) e_start·T(s)ⁿ·1_acc (the length law's matrix_pgf) is a polynomial
generating function in s whose first and second derivatives at s = 0 are
E[1{acc} t A e^{-tB}] and E[1{acc} t² A² e^{-tB}]: the marked positions of the
Laplace route's identities, now in the order the automaton reads them. The length
law gives both derivatives exactly (matrix_pgf_derivatives: the resolvent in closed
form for geometric lengths, nested jax.jvp otherwise). The quadrature in x = log t,
its windows and its kernels are the Laplace route's, with the same error bound, since ‖T(s=0)‖_∞ ≤ 1
in the strip |Im x| < π/2 just as |M| ≤ 1 there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import languages, regular
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, laplace

CLASS_WEIGHTS = ("population", "balanced")


def supports(lang: languages.Language, loss) -> str | None:
  """None if this route is exact for (lang, loss), else what is missing (one line)."""
  if loss != "squared":
    return f"route 'transfer' is exact for loss 'squared' only; got loss {loss!r}"
  return languages.missing(lang, languages.AutomatonLabels, "a DFA that decides the label")


def group_letter_matrices(lang: languages.Language, partition: partition_lib.Partition):
  """Σ_{x∈g} π_x P_x for every token group g (G, Q, Q), with P_x[q, r] = 1{δ(q, x) = r}."""
  table, _, _ = lang.automaton()
  return np.stack([regular.transfer_matrix(table, np.where(partition.index == g, lang.pi_array,
                                                            0.0))
                   for g in range(partition.num_groups)])


def build(lang: languages.Language, partition: partition_lib.Partition | None = None, *,
          cls: bool = False, step: float = laplace.STEP, max_clusters: int | None = None,
          num_points: int | None = None, left: float | None = None,
          class_weights: str = "population") -> base.Route:
  """Builds the exact squared-loss risk of the direct model on a regular language.

  Args:
    lang: a language with AutomatonLabels (its π and length law enter through T and
      matrix_pgf).
    partition: groups of tied tokens; None means one group per token.
    cls: whether params carry the CLS scalars.
    step, max_clusters, num_points: the quadrature, as in laplace.build.
    left: the windows' left extent (default laplace.window_left(lang)); a wider one only
      adds nodes, so one value serves a family of length laws (which may then be traced).
    class_weights: "population" (the risk E ℓ) or "balanced" (½ E[ℓ | y = +1] +
      ½ E[ℓ | y = -1], for languages that no length law balances; docs/theory.md §3d).

  Returns:
    A Route whose risk takes {"alpha": (G,), "beta": (G,)[, "alpha_cls", "beta_cls"]};
    report adds mean_yf, mean_f2 and the quadrature coverage, as the Laplace route does.
  """
  validation.check_choice("class_weights", class_weights, CLASS_WEIGHTS)
  partition = partition or partition_lib.singletons(lang.d)
  _, accepting, start = lang.automaton()
  if class_weights == "balanced":
    positive = lang.positive_rate()
    weight_pos, weight_neg = 0.5 / positive, 0.5 / (1.0 - positive)
  else:
    weight_pos = weight_neg = 1.0
  letters = jnp.asarray(group_letter_matrices(lang, partition))
  num_states = letters.shape[-1]
  start_row = jnp.eye(num_states)[start]
  ends = jnp.stack([jnp.asarray(accepting, jnp.float64), jnp.ones(num_states)], axis=1)
  law = lang.length
  groups = partition.num_groups
  left = laplace.window_left(lang) if left is None else left
  width = laplace.window_width(lang, step, left)
  if num_points is None:
    num_points = laplace.default_num_points(groups + int(cls), width, max_clusters)

  def at_node(decay, first, second):
    """F'(0) = (E-terms of 1{acc}·tA, 1·tA) and F''(0) (of 1{acc}·t²A², 1·t²A²) at a node, for the
    position weight w(s) = decay + s·first + ½s²·second per token group (CLS last)."""
    matrices = tuple(jnp.tensordot(weights[:groups], letters, 1)
                     for weights in (decay, first, second))
    value, slope, curvature = law.matrix_pgf_derivatives(start_row, matrices, ends)
    if cls:  # the CLS weight multiplies F(s): product rule
      value, slope, curvature = (decay[groups] * value,
                                 first[groups] * value + decay[groups] * slope,
                                 second[groups] * value + 2.0 * first[groups] * slope
                                 + decay[groups] * curvature)
    del value
    return slope, curvature

  def moments(params):
    """E[y f] and E[f²] by quadrature, and the lattice points the grid needs."""
    beta = jnp.concatenate([params["beta"], jnp.reshape(params["beta_cls"], (1,))]) if cls \
        else params["beta"]
    x_weights, decay, kernel1, kernel2, needed = laplace.kernels(params, step, left, width,
                                                                 num_points)
    first, second = jax.vmap(at_node, in_axes=(1, 1, 1))(decay, beta[:, None] * kernel1,
                                                         beta[:, None] ** 2 * kernel2)
    mean_f_accepted, mean_f = x_weights @ first
    mean_f2_accepted, mean_f2 = x_weights @ second
    # E[w y f] and E[w f²] with class weights w(±1) (both 1: the population risk); E w = 1.
    mean_yf = weight_pos * mean_f_accepted - weight_neg * (mean_f - mean_f_accepted)
    mean_f2 = weight_pos * mean_f2_accepted + weight_neg * (mean_f2 - mean_f2_accepted)
    return mean_yf, mean_f2, needed

  def report(params):
    mean_yf, mean_f2, needed = moments(params)
    return {"risk": base.squared_risk(mean_yf, mean_f2), "mean_yf": mean_yf,
            "mean_f2": mean_f2, "grid_points_needed": needed,
            "grid_covered": needed <= num_points}

  def risk(params):
    mean_yf, mean_f2, _ = moments(params)
    return base.squared_risk(mean_yf, mean_f2)

  return base.Route("transfer", risk, report, partition)


def attention_moments(lang: languages.Language, partition: partition_lib.Partition | None = None,
                      *, cls: bool = False, step: float = laplace.STEP,
                      num_points: int | None = None):
  """Builds (H, g) = (E[W Wᵀ], E[y W]) of the token-group attention masses at given scores.

  The squared risk is exactly quadratic in β, R(β) = ½ βᵀHβ - gᵀβ + ½ (docs/theory.md §5),
  and so is this route's quadrature of it; so H = ∇²_β R and g = -∇_β R(β = 0), by
  autodiff of the route (CLS last when cls).

  Returns:
    fn(params) -> (H, g), reading only params["alpha"] (and "alpha_cls").
  """
  route = build(lang, partition, cls=cls, step=step, num_points=num_points)

  def moments(params):
    def risk_of_beta(beta):
      return route.risk(direct.unstack(params, "beta", beta))

    origin = jnp.zeros_like(direct.stack(params, "alpha"))
    return jax.hessian(risk_of_beta)(origin), -jax.grad(risk_of_beta)(origin)

  return moments


__all__ = ["attention_moments", "build", "group_letter_matrices", "supports"]
