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
its windows and its kernels are the Laplace route's (risk/quadrature.py), with the same
error bound, since ‖T(s=0)‖_∞ ≤ 1 in the strip ``|Im x| < π/2`` just as ``|M| ≤ 1`` there.
The automaton's arrays are risk/automaton.py, the layout's entry table risk/entries.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lagjax import validation
from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.linalg.resolvent import batched_dot, resolvent_series
from lagjax.models import direct
from lagjax.risk import automaton as automaton_lib
from lagjax.risk import base, entries
from lagjax.risk import quadrature as quadrature_lib

CLASS_WEIGHTS = ("population", "balanced")


def _block_series(block_letters, block_starts, block_ends, middle, first, last, q):
  """y(s) b(s) and its s-derivatives in one block (linalg.resolvent_series). Every product
  runs along the quadrature nodes, the trailing axis N; the automaton's constant matrices
  get a trailing axis of 1."""
  rows = jnp.unstack(batched_dot(first, block_starts[..., None]))      # a_k (K, N)
  columns = batched_dot(last, block_ends[..., None])                   # b_k (3, K, 2, N)
  m0, m1, m2 = jnp.unstack(middle)
  system = jnp.eye(rows[0].shape[0])[..., None] - q * batched_dot(m0, block_letters[..., None])
  letters_after = jnp.moveaxis(block_letters, 0, 1)[..., None]         # (K, G, K, 1)

  def times(weight):  # y C_k = Σ_g m_k,g (y L_g)
    return lambda y: batched_dot(weight, batched_dot(y, letters_after))

  return resolvent_series(rows, columns, system, q, (times(m1), times(m2)))


def _geometric_blocks(weights, last_groups, automaton: automaton_lib.Automaton, ends,
                      stop_probability, first_last: bool):
  """F, F', F'' (each (2, N)) under a geometric length law at all nodes at once, for the
  layouts with position tables or the last query (docs/theory.md §3d; the plain one takes
  the law's matrix_pgf_derivatives).

  A path of length 1 takes the 'both' weights; a longer one enters by a first weight, stays
  by middle ones and leaves by a last one. So with q = 1 - p, F(s) = p·e B(s) ends +
  p q·y(s) b(s), where y(s) = a(s)(I - q C(s))⁻¹, a = e A, b = D ends and C the middle
  transfer matrix: linalg.resolvent_series, summed over automaton.inside_blocks, since C
  never leaves a block.

  Args:
    weights: the entry weights by order of s, (3, E, N) (CLS split off).
    last_groups: the token groups the last token may take in this query row (G,).
    automaton: the language's Automaton on the params' token groups.
    ends: the end columns [1_acc, 1] (Q, 2).
    stop_probability: the law's p.
    first_last: whether the params have position tables.

  Returns:
    (F, F', F''), each (2, N).
  """
  letters = automaton.letters
  groups = letters.shape[0]
  q = 1.0 - stop_probability
  starts = jnp.einsum("q,gqr->gr", automaton.start, letters)          # e L_g
  # The states after the first token, as m blocks of size K (one block of all Q states
  # when the automaton is traced); index Q pads blocks with a weightless state.
  blocks = automaton_lib.inside_blocks(automaton)
  padded = jnp.pad(letters, ((0, 0), (0, 1), (0, 1)))
  block_constants = (  # per block: L_g (G, K, K), e L_g (G, K), L_g ends (G, K, 2)
      padded[:, blocks[:, :, None], blocks[:, None, :]],
      jnp.pad(starts, ((0, 0), (0, 1)))[:, blocks],
      (padded @ jnp.pad(ends, ((0, 1), (0, 0))))[:, blocks])
  block_constants = tuple(jnp.moveaxis(each, 1, 0) for each in block_constants)
  # Each array is split once (jnp.unstack), never indexed: reverse mode then stacks the
  # cotangents instead of padding each one with zeros.
  if first_last:  # [middle, first, last, both], each (3, G, N)
    middle, first, last, both = jnp.unstack(
        weights.reshape((3, 4, groups) + weights.shape[-1:]), axis=1)
  else:
    middle = first = last = both = weights
  mask = last_groups[:, None]
  singles = jnp.unstack(batched_dot(both * mask, (starts @ ends)[..., None]))  # e B_k ends
  many = jax.vmap(_block_series, in_axes=(0, 0, 0, None, None, None, None))(
      *block_constants, middle, first, last * mask, q)
  return tuple(stop_probability * (one + q * each.sum(0)) for one, each in zip(singles, many))


def moments(params, automaton: automaton_lib.Automaton, law, *, step: float, left: float,
            width: int, num_points: int | None = None, max_clusters: int | None = None):
  """The route's moments at grouped params of any layout (docs/theory.md §3d).

  F'(0) and F''(0) of F(s) = Σ_n P(n) e_start·T(s)ⁿ·[1_acc, 1], integrated in x = log t on
  the merged windows of risk/quadrature.py; under position tables the automaton reads
  (state, phase), and under the last query the rows of the entry table are summed.

  Args:
    params: grouped params of any layout (§2b).
    automaton: the language's Automaton on the params' token groups.
    law: the length law (a pytree, so it may be traced).
    step: the lattice step h.
    left: each window's left extent.
    width: points per window.
    num_points: the static number of nodes; None for the layout's windows.
    max_clusters: windows the default grid holds (quadrature.default_num_points).

  Returns:
    ((E[1{acc} f], E f), (E[1{acc} f²], E f²), lattice points needed, whether the
    num_points grid covers them); the moments are NaN (value and gradient) where it does
    not.

  Example:
    With β ≡ b constant, f ≡ b whatever α is: E f = b, E[1{acc} f] = b P(y = +1), and
    P(y = +1) = ½ + P(n = 1)/2 = 0.55 for even pairs under Geometric(0.1):

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.automaton.automaton_arrays(pairs)
    >>> left = lj.risk.quadrature.window_left(pairs)
    >>> width = lj.risk.quadrature.window_width(pairs)
    >>> @jax.jit
    ... def moments(params):
    ...   return lj.risk.transfer.moments(params, automaton, pairs.length, step=0.25,
    ...                                   left=left, width=width)
    >>> mean_f, mean_f2, needed, covered = moments(
    ...     {"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})
    >>> np.round(np.asarray(mean_f), 6).tolist(), np.round(np.asarray(mean_f2), 6).tolist()
    ([0.275, 0.5], [0.1375, 0.25])
  """
  letters = automaton.letters
  groups, num_states = letters.shape[0], letters.shape[-1]
  layout = direct.layout(params)
  points = num_points or quadrature_lib.default_num_points(
      quadrature_lib.num_windows(groups, layout), width, max_clusters)
  ends = jnp.stack([automaton.accepting, jnp.ones(num_states)], axis=1)
  if layout.plain:
    start_row, end_columns = automaton.start, ends
  else:
    # The automaton reads (state, phase): phase 0 before the first token, 1 inside, 2 after
    # the last. The first token moves 0 -> 1 (0 -> 2 when it is also the last), the last
    # one moves into 2, which has no way out.
    start_row = jnp.concatenate([automaton.start, jnp.zeros(2 * num_states)])
    end_columns = jnp.concatenate([jnp.zeros((2 * num_states, 2)), ends])

  def letter_sum(weights):
    return jnp.tensordot(weights, letters, 1)

  def matrix(weights, last_groups):
    """T at one order in s from the entry weights; (3Q, 3Q) blocks unless plain."""
    if layout.plain:
      return letter_sum(weights[:groups])
    middle, first, last, both = _kinds(weights)
    zero = jnp.zeros((num_states, num_states))
    return jnp.block([[zero, letter_sum(first), letter_sum(both * last_groups)],
                      [zero, letter_sum(middle), letter_sum(last * last_groups)],
                      [zero, zero, zero]])

  def _kinds(weights):
    return entries.entry_kinds(weights, groups, layout.positions == "first_last")

  def at_node(weights, last_groups):
    """F, F', F'' at one node from its entry weights (3, E) (decay, first, second), by the
    law's matrix_pgf_derivatives."""
    matrices = tuple(matrix(each, last_groups) for each in jnp.unstack(weights))
    return law.matrix_pgf_derivatives(start_row, matrices, end_columns)

  def row_moments(scores, values, last_groups):
    """F'(0) and F''(0) (of 1{acc}·tA, 1·tA and their squares) integrated over the nodes,
    for the position weight w(s) = decay + s·first + ½s²·second per entry (CLS last)."""
    x_weights, decay, kernel1, kernel2, needed = quadrature_lib.kernels(scores, step, left, width,
                                                                    points)
    # (3, E, N) by order of s; the CLS entry split off once
    weights = jnp.stack([decay, values[:, None] * kernel1, values[:, None] ** 2 * kernel2])
    if layout.cls:
      weights, cls_weights = jnp.split(weights, [weights.shape[1] - 1], axis=1)
    geometric = lengths_lib.provides(law, "geometric")  # one resolvent (linalg.resolvent)
    if geometric and layout.plain:
      # T_k = Σ_g w_k,g L_g (Q, Q, N): a matrix product over the G groups
      matrices = jnp.unstack(jnp.einsum("kgn,gqr->kqrn", weights, letters))
      value, slope, curvature = law.matrix_pgf_derivatives(automaton.start, matrices, ends)
    elif geometric:
      value, slope, curvature = _geometric_blocks(weights, last_groups, automaton, ends,
                                                  law.stop_probability,
                                                  layout.positions == "first_last")
    else:
      value, slope, curvature = jax.vmap(at_node, in_axes=(2, None), out_axes=-1)(
          weights, last_groups)
    if layout.cls:  # the CLS weight multiplies F(s): product rule
      decay, first, second = jnp.unstack(cls_weights.reshape(3, -1))
      slope, curvature = (first * value + decay * slope,
                          second * value + 2.0 * first * slope + decay * curvature)
    return slope @ x_weights, curvature @ x_weights, needed

  mean_f, mean_f2, needed = jax.vmap(row_moments)(*entries.entry_table(params))
  needed = needed.max()
  # NaN outside the grid's coverage, value and gradient (docs/theory.md §3a, §3d).
  covered = quadrature_lib.nan_unless_covered(needed, points)
  return mean_f.sum(0) * covered, mean_f2.sum(0) * covered, needed, needed <= points


def squared_risk_of(mean_f, mean_f2, weight_pos=1.0, weight_neg=1.0):
  """R from the moments' (accepted, all) pairs with class weights w(±1) (both 1: the
  population risk): E[w y f] and E[w f²], E w = 1 (docs/theory.md §3d).

  With y = 2·1{acc} - 1: E[w y f] = w₊ E[1{acc} f] - w₋ (E f - E[1{acc} f]) and
  E[w f²] = w₊ E[1{acc} f²] + w₋ (E f² - E[1{acc} f²]).

  Args:
    mean_f: (E[1{acc} f], E f).
    mean_f2: (E[1{acc} f²], E f²).
    weight_pos: w(+1).
    weight_neg: w(-1).

  Returns:
    (R, E[w y f], E[w f²]).

  Example:
    The moments of f ≡ ½ on even pairs (see moments): R = ½ (¼ - 2·½·0.1 + 1):

    >>> risk, mean_yf, mean_f2 = lj.risk.transfer.squared_risk_of((0.275, 0.5), (0.1375, 0.25))
    >>> round(risk, 6), round(mean_yf, 6), mean_f2
    (0.575, 0.05, 0.25)
  """
  mean_yf = weight_pos * mean_f[0] - weight_neg * (mean_f[1] - mean_f[0])
  mean_f2 = weight_pos * mean_f2[0] + weight_neg * (mean_f2[1] - mean_f2[0])
  return base.squared_risk(mean_yf, mean_f2), mean_yf, mean_f2


def report_fn(automaton: automaton_lib.Automaton, law, *, step: float, left: float, width: int,
              num_points: int | None = None, max_clusters: int | None = None,
              class_weights=(1.0, 1.0)):
  """The transfer route's report on arrays: what TransferRoute.build returns, for an automaton
  and a length law that may be traced (a consumer that vmaps over languages; §3d).

  Args:
    automaton: the language's Automaton on the params' token groups.
    law: the length law (a pytree).
    step: the lattice step h.
    left: each window's left extent (at least quadrature.window_left of the language).
    width: points per window, quadrature.window_width at that left.
    num_points: the static number of nodes; None for the layout's windows.
    max_clusters: windows the default grid holds (quadrature.default_num_points).
    class_weights: (w(+1), w(-1)); (1, 1) for the population risk.

  Returns:
    report(params) -> {"risk", "mean_yf", "mean_f2", "grid_points_needed",
    "grid_covered"}, the risk and moments NaN (value and gradient) where the grid does not
    cover θ.

  Example:
    f ≡ ½ on even pairs: R = ½ (¼ - 2·½·0.1 + 1) (see squared_risk_of):

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.automaton.automaton_arrays(pairs)
    >>> left = lj.risk.quadrature.window_left(pairs)
    >>> report = jax.jit(lj.risk.transfer.report_fn(
    ...     automaton, pairs.length, step=0.25, left=left,
    ...     width=lj.risk.quadrature.window_width(pairs, 0.25, left)))
    >>> out = report({"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})
    >>> round(float(out["risk"]), 6), bool(out["grid_covered"])
    (0.575, True)
  """
  grid = dict(step=step, left=left, width=width, num_points=num_points,
              max_clusters=max_clusters)

  def report(params):
    mean_f, mean_f2, needed, covered = moments(params, automaton, law, **grid)
    risk, mean_yf, mean_f2 = squared_risk_of(mean_f, mean_f2, *class_weights)
    return {"risk": risk, "mean_yf": mean_yf, "mean_f2": mean_f2,
            "grid_points_needed": needed, "grid_covered": covered}

  return report


class TransferRoute(base.RouteSpec):
  """The transfer route (docs/theory.md §3d): exact squared-loss risk and moments (H, g) of
  the direct model in every layout on languages with AutomatonLabels, by quadrature.

  Example:
    >>> route = lj.risk.ROUTES["transfer"]
    >>> print(route.supports(lj.data.regular_builtins.even_pairs()))
    None
    >>> route.any_layout, route.quadrature
    (True, True)
  """

  name = "transfer"
  capability = languages.AutomatonLabels
  capability_use = "a DFA that decides the label"
  length_needs = ("required", "matrix_pgf_derivatives")   # F, F', F'' of Σ_n P(n) a·T(s)ⁿ·b
  losses = ("squared",)
  any_layout = True
  provides = frozenset({"risk", "moments"})
  quadrature = True

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            step: float = quadrature_lib.STEP, max_clusters: int | None = None,
            num_points: int | None = None, left: float | None = None,
            class_weights: str = "population") -> base.Route:
    """Builds the exact squared-loss risk of the direct model on a regular language.

    Args:
      lang: a language with AutomatonLabels (its π and length law enter through T and
        matrix_pgf).
      partition: groups of tied tokens; None means one group per token.
      loss: "squared" (checked by supports).
      layout: unused (the route reads the CLS token, like the rest of the layout, from
        params).
      key: unused.
      step, max_clusters, num_points: the quadrature, as in the Laplace route (the default
        grid is sized from the params' layout).
      left: the windows' left extent (default quadrature.window_left(lang)); a wider one
        only adds nodes, so one value serves a family of length laws (which may then be
        traced).
      class_weights: "population" (the risk E ℓ) or "balanced" (½ E[ℓ | y = +1] +
        ½ E[ℓ | y = -1], for languages that no length law balances; docs/theory.md §3d).

    Returns:
      A Route whose risk takes grouped params in any layout (direct.Layout, that is the CLS
      token, the last-token query, the position tables); report adds mean_yf, mean_f2 and
      the quadrature coverage, as the Laplace route does.

    Example:
      On even pairs (P(y = +1) = 0.55, so E y = 0.1), f ≡ b for β ≡ b, whatever α is, and
      R = ½ (b² - 2b E y + 1): ½ at b = 0, 0.575 at b = ½:

      >>> pairs = lj.data.regular_builtins.even_pairs()
      >>> route = lj.risk.ROUTES["transfer"].build(pairs, lj.partition.of_language(pairs))
      >>> risk = jax.jit(route.risk)
      >>> round(float(risk({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})), 6)
      0.5
      >>> round(float(risk({"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})),
      ...       6)
      0.575
    """
    del loss, layout, key
    self.check_length_law(lang)
    validation.check_choice("class_weights", class_weights, CLASS_WEIGHTS)
    partition = partition or partition_lib.singletons(lang.d)
    if class_weights == "balanced":
      positive = lang.positive_rate()
      weights = (0.5 / positive, 0.5 / (1.0 - positive))
    else:
      weights = (1.0, 1.0)
    automaton = automaton_lib.automaton_arrays(lang, partition)
    left = quadrature_lib.window_left(lang) if left is None else left
    report = report_fn(automaton, lang.length, step=step, left=left,
                       width=quadrature_lib.window_width(lang, step, left),
                       num_points=num_points, max_clusters=max_clusters,
                       class_weights=weights)

    def risk(params):
      return report(params)["risk"]

    return base.Route(self.name, risk, report, partition)


  def attention_moments(self, lang, partition=None, *, cls: bool = False, **options):
    """(H, g) by `attention_moments` below (§3d)."""
    self.check_length_law(lang)
    return attention_moments(lang, partition, cls=cls, **options)


def attention_moments(lang: languages.Language, partition: partition_lib.Partition | None = None,
                      *, cls: bool = False, step: float = quadrature_lib.STEP,
                      num_points: int | None = None):
  """Builds (H, g) = (E[W Wᵀ], E[y W]) of the token-group attention masses at given scores.

  The squared risk is exactly quadratic in β, R(β) = ½ βᵀHβ - gᵀβ + ½ (docs/theory.md §5),
  and so is this route's quadrature of it; so H = ∇²_β R and g = -∇_β R(β = 0), by
  forward-mode autodiff of the route in β, both from one trace (CLS last when cls).

  Args:
    lang: a language with AutomatonLabels.
    partition: token groups; None means one group per token.
    cls: whether params carry the CLS scalars (then the CLS entries are last).
    step: the lattice step h.
    num_points: static number of quadrature nodes; None for the layout's windows.

  Returns:
    fn(params) -> (H, g), reading only params["alpha"] (and "alpha_cls").

  Example:
    The masses W sum to 1, so H sums to 1 and g to E y = 0.1 on even pairs (§3d):

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> moments = lj.risk.transfer.attention_moments(pairs, lj.partition.of_language(pairs))
    >>> H, g = jax.jit(moments)({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
    >>> round(float(H.sum()), 6), round(float(g.sum()), 6)
    (1.0, 0.1)
  """
  route = TransferRoute().build(lang, partition, layout=direct.Layout(cls=cls), step=step,
                                num_points=num_points)

  def moments(params):
    def risk_of_beta(beta):
      return route.risk(direct.unstack(params, "beta", beta))

    def gradient(beta):
      slope = jax.jacfwd(risk_of_beta)(beta)
      return slope, slope

    # Forward over forward, and ∇_β R as the inner Jacobian's own value: one trace of the
    # route, which stays cheap to compile under the closed form's ∂/∂α at α = 0 (§5).
    origin = jnp.zeros_like(direct.stack(params, "alpha"))
    hessian, slope = jax.jacfwd(gradient, has_aux=True)(origin)
    return hessian, -slope

  return moments


__all__ = ["CLASS_WEIGHTS", "TransferRoute", "attention_moments", "moments", "report_fn",
           "squared_risk_of"]
