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
in the strip ``|Im x| < π/2`` just as ``|M| ≤ 1`` there.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import languages, regular
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, laplace

CLASS_WEIGHTS = ("population", "balanced")


def supports(lang: languages.Language, loss) -> str | None:
  """None if this route is exact for (lang, loss), else what is missing (one line; §1b, §3d).

  Args:
    lang: the language; it must declare AutomatonLabels.
    loss: the loss; only "squared".

  Returns:
    None, or one line saying what is missing.

  Example:
    >>> print(lj.risk.transfer.supports(lj.data.regular_builtins.even_pairs(), "squared"))
    None
    >>> lj.risk.transfer.supports(lj.occurrence(4), "squared")
    'occurrence(d=4, letters=(0,)) does not declare AutomatonLabels (a DFA that decides the label)'
  """
  if loss != "squared":
    return f"route 'transfer' is exact for loss 'squared' only; got loss {loss!r}"
  return languages.missing(lang, languages.AutomatonLabels, "a DFA that decides the label")


def group_letter_matrices(lang: languages.Language, partition: partition_lib.Partition):
  """Σ_{x∈g} π_x P_x for every token group g (G, Q, Q), with P_x[q, r] = 1{δ(q, x) = r}.

  Tied parameters enter the transfer matrix through these (docs/theory.md §3d).

  Args:
    lang: a language with AutomatonLabels.
    partition: the token groups.

  Returns:
    The matrices, a NumPy array (G, Q, Q).

  Example:
    Each P_x has one 1 per row, so the rows of Σ_g Σ_{x∈g} π_x P_x sum to Σ_x π_x = 1:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> letters = lj.risk.transfer.group_letter_matrices(pairs, lj.partition.of_language(pairs))
    >>> letters.shape, letters.sum(0).sum(1).tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 1.0, 1.0])
  """
  table, _, _ = lang.automaton()
  return np.stack([regular.transfer_matrix(table, np.where(partition.index == g, lang.pi_array,
                                                            0.0))
                   for g in range(partition.num_groups)])


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
    >>> lj.risk.transfer.num_windows(2, Layout()), lj.risk.transfer.num_windows(
    ...     2, Layout(cls=True, positions="first_last"))
    (2, 9)
  """
  return (4 if layout.positions == "first_last" else 1) * groups + int(layout.cls)


def entry_table(params):
  """Scores and values of every kind of position (docs/theory.md §3d), one row per
  last-token group c (a single row under the CLS query).

  A first (α + α^F, β + β^F), last (α + α^L, β + β^L) or only (both added) position has
  its own entry; under the last query the scores are the row α[c, ·] of the last group c.

  Args:
    params: grouped params of any layout (§2b).

  Returns:
    scores, values (C, E) with entries [middle, first, last, both] per token group
    (middle only without position tables) and the CLS token last; and last_groups (C, G),
    the token groups the last token may take in that row.

  Example:
    >>> params = lj.init_params(2, cls=True, positions="first_last")
    >>> params["alpha_first"] = jnp.array([1.0, 2.0])
    >>> scores, values, last_groups = lj.risk.transfer.entry_table(params)
    >>> scores.tolist()  # [middle, first, last, both] × 2 groups, then CLS
    [[0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0, 0.0]]
    >>> lj.risk.transfer.entry_table(lj.init_params(2, query="last"))[0].shape
    (2, 2)
  """
  beta = params["beta"]
  groups = beta.shape[0]
  last_query = jnp.ndim(params["alpha"]) == 2
  alpha = params["alpha"] if last_query else params["alpha"][None]
  rows = alpha.shape[0]
  scores, values = alpha, jnp.broadcast_to(beta, (rows, groups))
  if direct.has_positions(params):
    first, last = params["alpha_first"], params["alpha_last"]
    beta_first, beta_last = params["beta_first"], params["beta_last"]
    scores = jnp.concatenate([alpha, alpha + first, alpha + last, alpha + first + last], -1)
    values = jnp.concatenate([values, values + beta_first, values + beta_last,
                              values + beta_first + beta_last], -1)
  if direct.has_cls(params):
    scores = jnp.concatenate([scores, jnp.broadcast_to(params["alpha_cls"], (rows,))[:, None]],
                             -1)
    values = jnp.concatenate([values, jnp.broadcast_to(params["beta_cls"], (rows, 1))], -1)
  last_groups = jnp.eye(groups) if last_query else jnp.ones((1, groups))
  return scores, values, last_groups


def entry_kinds(weights, groups: int, positions: bool):
  """entry_table's last axis as (..., 4, G): [middle, first, last, both] per token group;
  without position tables all four kinds are the middle entries (docs/theory.md §3d).

  Args:
    weights: an array whose last axis is entry_table's (E,).
    groups: G, the number of token groups.
    positions: whether the params have position tables.

  Returns:
    The entries as (..., 4, G).

  Example:
    >>> weights = jnp.arange(9.0)[None]  # 2 groups with position tables, then CLS
    >>> lj.risk.transfer.entry_kinds(weights, 2, True)[0].tolist()
    [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    >>> lj.risk.transfer.entry_kinds(weights[:, :2], 2, False)[0].tolist()
    [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
  """
  if positions:
    return weights[..., :4 * groups].reshape(weights.shape[:-1] + (4, groups))
  return jnp.broadcast_to(weights[..., None, :groups], weights.shape[:-1] + (4, groups))


def points_needed(lang: languages.Language, params, step: float = laplace.STEP) -> int:
  """Lattice points the merged windows of the worst row need, for concrete params (§3a, §3d).

  Args:
    lang: the language (for the window's extent).
    params: concrete grouped params of any layout (§2b).
    step: the lattice step h.

  Returns:
    The number of points, an int.

  Example:
    One window at θ = 0 (E[n] = 10 for even pairs); a first-position score 100 below
    the rest needs a second:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> params = lj.init_params(2, positions="first_last")
    >>> lj.risk.transfer.points_needed(pairs, params)
    181
    >>> params["alpha_first"] = jnp.array([-100.0, -100.0])
    >>> lj.risk.transfer.points_needed(pairs, params)
    362
  """
  scores, _, _ = entry_table(params)
  return max(laplace.points_needed(lang, row, step) for row in np.asarray(scores))


class Automaton(NamedTuple):
  """A DFA on token groups as arrays (traceable, so languages can be vmapped): letters
  (G, Q, Q) = Σ_{x∈g} π_x P_x, accepting (Q,) 0/1, start (Q,) one-hot (§1c, §3d).

  Attributes:
    letters (jax.Array): Σ_{x∈g} π_x P_x per token group (G, Q, Q).
    accepting (jax.Array): 1.0 at accepting states (Q,).
    start (jax.Array): the start state, one-hot (Q,).

  Example:
    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.transfer.automaton_arrays(pairs)
    >>> automaton.letters.shape, automaton.accepting.tolist(), automaton.start.tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0])
  """

  letters: jax.Array
  accepting: jax.Array
  start: jax.Array


def automaton_arrays(lang: languages.Language,
                     partition: partition_lib.Partition | None = None) -> Automaton:
  """The automaton of `lang` on token groups `partition` as arrays (docs/theory.md §3d).

  Args:
    lang: a language with AutomatonLabels.
    partition: the token groups; None means one group per token.

  Returns:
    An Automaton.

  Example:
    Even pairs accepts the empty prefix and the states where the first symbol equals the
    last:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.transfer.automaton_arrays(pairs, lj.partition.of_language(pairs))
    >>> automaton.letters.shape, automaton.accepting.tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 0.0, 0.0])
  """
  partition = partition or partition_lib.singletons(lang.d)
  _, accepting, start = lang.automaton()
  letters = group_letter_matrices(lang, partition)
  return Automaton(jnp.asarray(letters), jnp.asarray(accepting, jnp.float64),
                   jnp.eye(letters.shape[-1])[start])


def inside_blocks(automaton: Automaton) -> np.ndarray:
  """The states the automaton can be in after its first token, as the connected components
  of its transitions there, padded to one size K with the index Q (docs/theory.md §3d).

  The middle of a string never leaves a component, so the transfer route's resolvent is
  block diagonal: m blocks of K states instead of Q. A traced automaton (the atlas stacks
  languages) gives one block of all Q states.

  Args:
    automaton: an Automaton.

  Returns:
    Indices into the Q states (Q marks padding), an int array (m, K).

  Example:
    Even pairs: after the first symbol only the last one moves, so the four states after
    it form two blocks of two:

    >>> lj.risk.transfer.inside_blocks(lj.risk.transfer.automaton_arrays(
    ...     lj.data.regular_builtins.even_pairs())).tolist()
    [[1, 3], [2, 4]]
  """
  if isinstance(automaton.letters, jax.core.Tracer):
    return np.arange(automaton.letters.shape[-1])[None]

  def closure(relation):  # the transitive closure of a boolean relation (Q, Q)
    while not np.array_equal(grown := relation | (relation @ relation), relation):
      relation = grown
    return relation

  step = np.asarray(automaton.letters).sum(0) > 0                      # q -> r by a token
  num_states = step.shape[0]
  inside = closure(step)[np.asarray(automaton.start).argmax()]         # after >= 1 token
  linked = closure((step | step.T | np.eye(num_states, dtype=bool)) & inside & inside[:, None])
  blocks = [list(block) for block in dict.fromkeys(  # each component once, in state order
      tuple(np.flatnonzero(row).tolist()) for row in linked[inside])]
  size = max(len(block) for block in blocks)
  return np.array([block + [num_states] * (size - len(block)) for block in blocks])


def moments(params, automaton: Automaton, law, *, step: float, left: float, width: int,
            num_points: int | None = None, max_clusters: int | None = None):
  """The route's moments at grouped params of any layout (docs/theory.md §3d).

  F'(0) and F''(0) of F(s) = Σ_n P(n) e_start·T(s)ⁿ·[1_acc, 1], integrated in x = log t on
  the Laplace route's merged windows; under position tables the automaton reads
  (state, phase), and under the last query the rows of the entry table are summed.

  Args:
    params: grouped params of any layout (§2b).
    automaton: the language's Automaton on the params' token groups.
    law: the length law (a pytree, so it may be traced).
    step: the lattice step h.
    left: each window's left extent.
    width: points per window.
    num_points: the static number of nodes; None for the layout's windows.
    max_clusters: windows the default grid holds (laplace.default_num_points).

  Returns:
    ((E[1{acc} f], E f), (E[1{acc} f²], E f²), lattice points needed, whether the
    num_points grid covers them).

  Example:
    With β ≡ b constant, f ≡ b whatever α is: E f = b, E[1{acc} f] = b P(y = +1), and
    P(y = +1) = ½ + P(n = 1)/2 = 0.55 for even pairs under Geometric(0.1):

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.transfer.automaton_arrays(pairs)
    >>> left = lj.risk.laplace.window_left(pairs)
    >>> width = lj.risk.laplace.window_width(pairs)
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
  points = num_points or laplace.default_num_points(num_windows(groups, layout), width,
                                                    max_clusters)
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

  # Every product runs along the quadrature nodes, the trailing axis N; the automaton's
  # constant matrices get a trailing axis of 1.
  dot = lengths_lib.batched_dot

  def block_series(block_letters, block_starts, block_ends, middle, first, last, q):
    """y(s) b(s) and its s-derivatives in one block (lengths.resolvent_series)."""
    rows = jnp.unstack(dot(first, block_starts[..., None]))              # a_k (K, N)
    columns = dot(last, block_ends[..., None])                           # b_k (3, K, 2, N)
    m0, m1, m2 = jnp.unstack(middle)
    system = jnp.eye(rows[0].shape[0])[..., None] - q * dot(m0, block_letters[..., None])
    letters_after = jnp.moveaxis(block_letters, 0, 1)[..., None]         # (K, G, K, 1)

    def times(weight):  # y C_k = Σ_g m_k,g (y L_g)
      return lambda y: dot(weight, dot(y, letters_after))

    return lengths_lib.resolvent_series(rows, columns, system, q, (times(m1), times(m2)))

  def geometric(weights, last_groups):
    """F, F', F'' (each (2, N)) under Geometric(p) at all nodes at once, for the layouts
    with position tables or the last query (the plain one takes the law's
    matrix_pgf_derivatives). A path of length 1 takes the 'both' weights; a longer one
    enters by a first weight, stays by middle ones and leaves by a last one. So with
    q = 1 - p, F(s) = p·e B(s) ends + p q·y(s) b(s), where y(s) = a(s)(I - q C(s))⁻¹,
    a = e A, b = D ends and C the middle transfer matrix: lengths.resolvent_series,
    summed over inside_blocks, since C never leaves a block."""
    q = 1.0 - law.p
    starts = jnp.einsum("q,gqr->gr", automaton.start, letters)          # e L_g
    # The states after the first token, as m blocks of size K (one block of all Q states
    # when the automaton is traced); index Q pads blocks with a weightless state.
    blocks = inside_blocks(automaton)
    padded = jnp.pad(letters, ((0, 0), (0, 1), (0, 1)))
    block_constants = (  # per block: L_g (G, K, K), e L_g (G, K), L_g ends (G, K, 2)
        padded[:, blocks[:, :, None], blocks[:, None, :]],
        jnp.pad(starts, ((0, 0), (0, 1)))[:, blocks],
        (padded @ jnp.pad(ends, ((0, 1), (0, 0))))[:, blocks])
    block_constants = tuple(jnp.moveaxis(each, 1, 0) for each in block_constants)
    # Each array is split once (jnp.unstack), never indexed: reverse mode then stacks the
    # cotangents instead of padding each one with zeros.
    if layout.positions == "first_last":  # [middle, first, last, both], each (3, G, N)
      middle, first, last, both = jnp.unstack(
          weights.reshape((3, 4, groups) + weights.shape[-1:]), axis=1)
    else:
      middle = first = last = both = weights
    mask = last_groups[:, None]
    singles = jnp.unstack(dot(both * mask, (starts @ ends)[..., None]))  # e B_k ends (2, N)
    many = jax.vmap(block_series, in_axes=(0, 0, 0, None, None, None, None))(
        *block_constants, middle, first, last * mask, q)
    return tuple(law.p * (one + q * each.sum(0)) for one, each in zip(singles, many))

  def _kinds(weights):
    return entry_kinds(weights, groups, layout.positions == "first_last")

  def at_node(weights, last_groups):
    """F, F', F'' at one node from its entry weights (3, E) (decay, first, second), by the
    law's matrix_pgf_derivatives."""
    matrices = tuple(matrix(each, last_groups) for each in jnp.unstack(weights))
    return law.matrix_pgf_derivatives(start_row, matrices, end_columns)

  def row_moments(scores, values, last_groups):
    """F'(0) and F''(0) (of 1{acc}·tA, 1·tA and their squares) integrated over the nodes,
    for the position weight w(s) = decay + s·first + ½s²·second per entry (CLS last)."""
    x_weights, decay, kernel1, kernel2, needed = laplace.kernels(scores, step, left, width,
                                                                 points)
    # (3, E, N) by order of s; the CLS entry split off once
    weights = jnp.stack([decay, values[:, None] * kernel1, values[:, None] ** 2 * kernel2])
    if layout.cls:
      weights, cls_weights = jnp.split(weights, [weights.shape[1] - 1], axis=1)
    if isinstance(law, lengths_lib.Geometric) and layout.plain:
      # T_k = Σ_g w_k,g L_g (Q, Q, N): a matrix product over the G groups
      matrices = jnp.unstack(jnp.einsum("kgn,gqr->kqrn", weights, letters))
      value, slope, curvature = law.matrix_pgf_derivatives(automaton.start, matrices, ends)
    elif isinstance(law, lengths_lib.Geometric):
      value, slope, curvature = geometric(weights, last_groups)
    else:
      value, slope, curvature = jax.vmap(at_node, in_axes=(2, None), out_axes=-1)(
          weights, last_groups)
    if layout.cls:  # the CLS weight multiplies F(s): product rule
      decay, first, second = jnp.unstack(cls_weights.reshape(3, -1))
      slope, curvature = (first * value + decay * slope,
                          second * value + 2.0 * first * slope + decay * curvature)
    return slope @ x_weights, curvature @ x_weights, needed

  mean_f, mean_f2, needed = jax.vmap(row_moments)(*entry_table(params))
  needed = needed.max()
  return mean_f.sum(0), mean_f2.sum(0), needed, needed <= points


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


def build(lang: languages.Language, partition: partition_lib.Partition | None = None, *,
          cls: bool = False, step: float = laplace.STEP, max_clusters: int | None = None,
          num_points: int | None = None, left: float | None = None,
          class_weights: str = "population") -> base.Route:
  """Builds the exact squared-loss risk of the direct model on a regular language.

  Args:
    lang: a language with AutomatonLabels (its π and length law enter through T and
      matrix_pgf).
    partition: groups of tied tokens; None means one group per token.
    cls: unused (the route reads the CLS token, like the rest of the layout, from params).
    step, max_clusters, num_points: the quadrature, as in laplace.build (the default grid
      is sized from the params' layout).
    left: the windows' left extent (default laplace.window_left(lang)); a wider one only
      adds nodes, so one value serves a family of length laws (which may then be traced).
    class_weights: "population" (the risk E ℓ) or "balanced" (½ E[ℓ | y = +1] +
      ½ E[ℓ | y = -1], for languages that no length law balances; docs/theory.md §3d).

  Returns:
    A Route whose risk takes grouped params in any layout (direct.Layout, that is the CLS
    token, the last-token query, the position tables); report adds mean_yf, mean_f2 and the
    quadrature coverage, as the Laplace route does.

  Example:
    On even pairs (P(y = +1) = 0.55, so E y = 0.1), f ≡ b for β ≡ b, whatever α is, and
    R = ½ (b² - 2b E y + 1): ½ at b = 0, 0.575 at b = ½:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> route = lj.risk.transfer.build(pairs, lj.partition.of_language(pairs))
    >>> risk = jax.jit(route.risk)
    >>> round(float(risk({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})), 6)
    0.5
    >>> round(float(risk({"alpha": jnp.array([1.0, -1.0]), "beta": jnp.array([0.5, 0.5])})), 6)
    0.575
  """
  del cls
  validation.check_choice("class_weights", class_weights, CLASS_WEIGHTS)
  partition = partition or partition_lib.singletons(lang.d)
  if class_weights == "balanced":
    positive = lang.positive_rate()
    weights = (0.5 / positive, 0.5 / (1.0 - positive))
  else:
    weights = (1.0, 1.0)
  automaton = automaton_arrays(lang, partition)
  left = laplace.window_left(lang) if left is None else left
  quadrature = dict(step=step, left=left, width=laplace.window_width(lang, step, left),
                    num_points=num_points, max_clusters=max_clusters)

  def report(params):
    mean_f, mean_f2, needed, covered = moments(params, automaton, lang.length, **quadrature)
    risk, mean_yf, mean_f2 = squared_risk_of(mean_f, mean_f2, *weights)
    return {"risk": risk, "mean_yf": mean_yf, "mean_f2": mean_f2, "grid_points_needed": needed,
            "grid_covered": covered}

  def risk(params):
    return report(params)["risk"]

  return base.Route("transfer", risk, report, partition)


def attention_moments(lang: languages.Language, partition: partition_lib.Partition | None = None,
                      *, cls: bool = False, step: float = laplace.STEP,
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
  route = build(lang, partition, cls=cls, step=step, num_points=num_points)

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


__all__ = ["Automaton", "attention_moments", "automaton_arrays", "build", "entry_kinds",
           "entry_table", "group_letter_matrices", "inside_blocks", "moments", "num_windows",
           "points_needed", "squared_risk_of", "supports"]
