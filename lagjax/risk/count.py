"""Count route: exact risk and 0-1 error on count-determined languages (docs/theory.md §3g).

Under every layout the direct model reads a string only through its token-group counts c,
its first token's group a and its last token's group b (§2b). A language with CountLabels
gives q(c, a, b) = P(y = +1 | c, a, b) on its count blocks (where a parameter group spans
several blocks, the route enumerates their common refinement and sums back). So with

    w(n, c, a, b) = P(n) · n!/Π c_g! · Π π_g^{c_g} · P(w_1 ∈ a, w_n ∈ b | c),
    P(w_1 ∈ a, w_n ∈ b | c) = c_a (c_b - [a = b]) / (n (n - 1))  (n ≥ 2),  [a = b] c_a  (n = 1),

the risk of any loss is R = Σ w [q ℓ(f, +1) + (1 - q) ℓ(f, -1)] and the 0-1 error
Σ w [q 1{sign f ≠ +1} + (1 - q) 1{sign f ≠ -1}] (sign 0 counts as an error). The
enumeration and its truncation are the lattice route's (§3b): N is the smallest length
with P(n > N) ≤ tol/2 and the lightest count vectors are dropped within tol/2, so::

    |R - R_N| ≤ (P(n > N) + dropped) · sup ℓ,  sup ℓ over |f| ≤ max|β| (all tables).

Strings with the same model input (entry counts, query row) are merged before the model
runs, so the CLS query without position tables costs what the lattice route costs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import batched, validation
from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, entries, lattice
from lagjax.risk.transfer import CLASS_WEIGHTS

MAX_VECTORS = lattice.MAX_VECTORS


class CountEnumeration(NamedTuple):
  """The strings the count route sums over, as (c, a, b) with their label masses
  (docs/theory.md §3g).

  Masses are kept on (c, a, b) only as far as the model reads them: a is the first
  token's group with position tables (else one slot), b the last token's group with position
  tables or the last query (else one slot).

  Attributes:
    counts: (K, G) float group counts c, 1 ≤ Σc ≤ N.
    positive: (K, A, B) Σ w q over the strings of each slot.
    negative: (K, A, B) Σ w (1 - q).
    valid: (K, A, B) bool, the slots that hold strings (P(a, b | c) > 0).
    single_group: (K,) the group of a string of length 1, -1 for longer ones.
    tail: the probability mass left out, P(n > N) + the dropped vectors' weight (≤ tol).
    n_max: N, the longest length enumerated.

  Example:
    Strings of length 2 over two tokens, labelled +1 when they hold more 1s than 0s:

    >>> class More1s(lj.languages.CountLabels):
    ...   d = 2
    ...   def label_probability(self, counts, first, last):
    ...     return (counts[:, 1] > counts[:, 0]).astype(float)
    >>> enum = lj.risk.count.enumeration(More1s(), lj.partition.singletons(2), lj.fixed(2),
    ...                                  np.array([0.5, 0.5]), 1e-12)
    >>> enum.counts.tolist(), enum.positive[:, 0, 0].tolist(), enum.negative[:, 0, 0].tolist()
    ([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], [0.25, 0.0, 0.0], [0.0, 0.5, 0.25])
  """

  counts: jnp.ndarray
  positive: jnp.ndarray
  negative: jnp.ndarray
  valid: jnp.ndarray
  single_group: jnp.ndarray
  tail: float
  n_max: int


def end_pairs(counts: np.ndarray):
  """Every (c, a, b) with P(w_1 ∈ a, w_n ∈ b | c) > 0 and that probability (§3g).

  Given c the string is a uniformly random arrangement of its groups, so the first token is
  in a with probability c_a/n and then the last in b with probability (c_b - [a = b])/(n - 1);
  a string of length 1 has a = b.

  Args:
    counts: count vectors (K, G), n = Σc ≥ 1.

  Returns:
    (vector index, a, b, probability), four (M,) arrays.

  Example:
    >>> index, first, last, prob = lj.risk.count.end_pairs(np.array([[1, 1], [0, 1]]))
    >>> index.tolist(), first.tolist(), last.tolist(), prob.tolist()
    ([0, 0, 1], [0, 1, 1], [1, 0, 1], [0.5, 0.5, 1.0])
  """
  counts = np.asarray(counts, dtype=np.float64)
  size, groups = counts.shape
  n = counts.sum(axis=1)
  same = np.eye(groups)
  # (K, a, b): c_a (c_b - [a = b]) / (n (n - 1)), and [a = b] c_a at n = 1
  pairs = counts[:, :, None] * (counts[:, None, :] - same)
  prob = np.where((n >= 2)[:, None, None], pairs / np.maximum(n * (n - 1), 1.0)[:, None, None],
                  same * counts[:, :, None])
  index, first, last = np.nonzero(prob > 0)
  return index, first, last, prob[index, first, last]


def entry_counts(counts, first: int, last: int):
  """The counts of each entry of risk/entries.py's table with position tables (CLS left
  out), [middle, first, last, both] × G, for strings with group counts c and first and last
  groups a, b (docs/theory.md §2b, §3g): c - e_a - e_b in the middle, e_a first, e_b last,
  and a string of length 1 has its one token in "both".

  Args:
    counts: (K, G) group counts.
    first: a, the first token's group.
    last: b, the last token's group.

  Returns:
    (K, 4G) counts.

  Example:
    >>> lj.risk.count.entry_counts(jnp.array([[2.0, 1.0], [1.0, 0.0]]), 0, 1).tolist()
    [[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]]
  """
  size, groups = counts.shape
  one_hot = jnp.eye(groups)
  single = (counts.sum(axis=1) == 1)[:, None]
  longer = jnp.concatenate([counts - one_hot[first] - one_hot[last],
                            jnp.broadcast_to(one_hot[first], (size, groups)),
                            jnp.broadcast_to(one_hot[last], (size, groups)),
                            jnp.zeros((size, groups))], axis=1)
  alone = jnp.concatenate([jnp.zeros((size, 3 * groups)), counts], axis=1)
  return jnp.where(single, alone, longer)


def refinement(lang, partition: partition_lib.Partition):
  """The common refinement of the parameter groups and the language's count blocks, on which
  the route enumerates (docs/theory.md §3g): each of its parts lies in one group and one
  block. Where a group spans several blocks (tokens tied by role, counted apart by the
  label), the route sums the parts' masses back onto the group.

  Args:
    lang: a language with CountLabels.
    partition: the parameter groups.

  Returns:
    (parts: a Partition, group of each part (P,), block of each part (P,), number of blocks).

  Example:
    Plurality of letter 0 over three letters ties 1 and 2 by role but counts them apart:

    >>> lang = lj.data.counting.plurality()
    >>> parts, group, block, _ = lj.risk.count.refinement(lang, lj.partition.of_language(lang))
    >>> parts.blocks, group.tolist(), block.tolist()
    (((0,), (1,), (2,)), [0, 1, 1], [0, 1, 2])
  """
  blocks = lang.count_blocks(lang.d)
  if sorted(t for block in blocks for t in block) != list(range(lang.d)):
    raise ValueError(f"count_blocks of {lang.describe()} must partition the {lang.d} tokens; "
                     f"got {blocks}.")
  block_of_token = np.empty(lang.d, np.int64)
  for index, block in enumerate(blocks):
    block_of_token[list(block)] = index
  key = partition.index * len(blocks) + block_of_token
  parts = {}
  for token in range(lang.d):   # parts numbered by their first token
    parts.setdefault(int(key[token]), []).append(token)
  part_tokens = tuple(tuple(tokens) for tokens in parts.values())
  first_tokens = [tokens[0] for tokens in part_tokens]
  return (partition_lib.Partition(part_tokens), partition.index[first_tokens],
          block_of_token[first_tokens], len(blocks))


def label_probabilities(lang, block_counts: np.ndarray, first: np.ndarray,
                        last: np.ndarray) -> np.ndarray:
  """q(c, a, b) from the language, checked to be (K,) finite values in [0, 1] (§3g).

  Args:
    lang: a language with CountLabels.
    block_counts: (K, B) counts over its count blocks.
    first, last: (K,) block indices of the first and last tokens.

  Returns:
    q, (K,) float64.

  Raises:
    ValueError: naming label_probability, the language and the first bad value.

  Example:
    >>> class Half(lj.languages.CountLabels):
    ...   def label_probability(self, counts, first, last):
    ...     return np.full(len(counts), 1.5)
    ...   def describe(self):
    ...     return "half()"
    >>> lj.risk.count.label_probabilities(Half(), np.array([[1, 0]]), np.array([0]),
    ...                                   np.array([0]))
    Traceback (most recent call last):
    ...
    ValueError: label_probability of half() must return (1,) values in [0, 1]; got 1.5 at ...
  """
  q = np.asarray(lang.label_probability(block_counts, first, last), dtype=np.float64)

  def where():
    return f"label_probability of {lang.describe()} must return ({len(block_counts)},) values"

  if q.shape != (len(block_counts),):
    raise ValueError(f"{where()}; got shape {q.shape}.")
  bad = np.flatnonzero(~((q >= 0.0) & (q <= 1.0)))
  if bad.size:
    k = bad[0]
    raise ValueError(f"{where()} in [0, 1]; got {q[k]:g} at counts {block_counts[k].tolist()}, "
                     f"first {int(first[k])}, last {int(last[k])}.")
  return q


def _check_length_mean(law) -> None:
  """Raises, in one line naming the length law's mean, unless it is finite (§3g)."""
  mean = float(law.mean)
  if not math.isfinite(mean):
    raise ValueError(f"length law mean must be finite for the count route; got {law} with "
                     f"mean {mean}.")


def _size_reason(num_groups: int, law, tol: float, max_vectors: int = MAX_VECTORS) -> str | None:
  """None where the count route's enumeration fits max_vectors count vectors, else one line
  giving its size and the remedies (§3g)."""
  n_max = lengths_lib.truncation_length(law, tol / 2)
  size = lattice.num_count_vectors(num_groups, n_max)
  if size <= max_vectors:
    return None
  return (f"route 'count' would enumerate {size:,} count vectors (G = {num_groups} groups, "
          f"lengths up to N = {n_max} for tol {tol:g}), more than max_vectors = {max_vectors:,}; "
          "tie tokens in fewer groups or raise tol")


def enumeration(lang, partition: partition_lib.Partition, law, pi, tol: float,
                layout: direct.Layout = direct.PLAIN) -> CountEnumeration:
  """The rows the count route sums over, with their label masses (docs/theory.md §3g).

  Args:
    lang: a language with CountLabels.
    partition: the token groups of the parameters (a group may span count blocks: see
      `refinement`).
    law: the length law.
    pi: the token law π (d,).
    tol: the probability mass that may be left out, in (0, 1).
    layout: the model's parts (§2b): which of (c, a, b) the model reads.

  Returns:
    A CountEnumeration.

  Example:
    Majority at length 2: the strings 01 and 10 (counts (1, 1)) are ties, negative; 11 is
    the one positive string:

    >>> lang = lj.data.counting.majority(length=lj.fixed(2))
    >>> enum = lj.risk.count.enumeration(lang, lj.partition.singletons(2), lang.length,
    ...                                  lang.pi_array, 1e-12)
    >>> enum.counts.tolist(), float(enum.positive.sum()), float(enum.negative.sum())
    ([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], 0.25, 0.75)
  """
  parts, group_of_part, block_of_part, num_blocks = refinement(lang, partition)
  n_max = lengths_lib.truncation_length(law, tol / 2)
  counts, weights, dropped = lattice.kept_count_vectors(
      parts.num_groups, n_max, parts.masses(pi), law, tol / 2)
  index, first, last, prob = end_pairs(counts)
  q = label_probabilities(lang, counts[index] @ np.eye(num_blocks, dtype=np.int64)[block_of_part],
                          block_of_part[first], block_of_part[last])
  mass = weights[index] * prob
  groups = partition.num_groups
  first, last = group_of_part[first], group_of_part[last]
  if parts.num_groups != groups:
    # The model reads group counts: the parts' vectors that sum to the same ones merge.
    counts, merged = np.unique(counts @ np.eye(groups, dtype=np.int64)[group_of_part], axis=0,
                               return_inverse=True)
    index = merged.reshape(-1)[index]
  positions = layout.positions == "first_last"
  firsts = groups if positions else 1
  lasts = groups if positions or layout.query == "last" else 1
  # Masses summed over what the model does not read: slot (a, b), a and b kept as needed.
  slot = (index * firsts + (first if positions else 0)) * lasts + (last if lasts > 1 else 0)
  size = len(counts) * firsts * lasts
  shape = (len(counts), firsts, lasts)
  positive = np.bincount(slot, weights=mass * q, minlength=size).reshape(shape)
  negative = np.bincount(slot, weights=mass * (1.0 - q), minlength=size).reshape(shape)
  valid = np.bincount(slot, minlength=size).reshape(shape) > 0
  single_group = np.where(counts.sum(axis=1) == 1, counts.argmax(axis=1), -1)
  return CountEnumeration(jnp.asarray(counts, dtype=jnp.float64), jnp.asarray(positive),
                          jnp.asarray(negative), jnp.asarray(valid), jnp.asarray(single_group),
                          float(law.tail(n_max)) + dropped, n_max)


def checked_enumeration(lang, partition: partition_lib.Partition | None,
                        layout: direct.Layout, tol: float, max_vectors: int = MAX_VECTORS):
  """`enumeration` for a language's own π and length law, after the checks every consumer
  needs, each failing in one line naming the field: the length law's methods and finite
  mean, tol in (0, 1), an enumeration within max_vectors (§3g).

  Args:
    lang: a language with CountLabels.
    partition: the token groups; None means one group per token.
    layout: the model's parts (§2b).
    tol: the probability mass that may be left out.
    max_vectors: the most count vectors enumerated.

  Returns:
    (partition, CountEnumeration).

  Example:
    >>> lang = lj.data.counting.majority(length=lj.fixed(3))
    >>> partition, enum = lj.risk.count.checked_enumeration(lang, None, lj.models.direct.PLAIN,
    ...                                                     1e-12)
    >>> partition.num_groups, enum.counts.shape, enum.tail
    (2, (4, 2), 0.0)
  """
  CountRoute().check_length_law(lang)
  validation.check_real("tol", tol, minimum=0.0, strict=True, maximum=1.0, strict_max=True)
  _check_length_mean(lang.length)
  partition = partition or partition_lib.singletons(lang.d)
  reason = _size_reason(refinement(lang, partition)[0].num_groups, lang.length, tol,
                       max_vectors)
  if reason is not None:
    raise ValueError(f"{reason}.")
  return partition, enumeration(lang, partition, lang.length, lang.pi_array, tol, layout)


def _row_params(scores, values, row: int, size: int, cls: bool):
  """The plain params of one query row of the entry table: its first `size` entries and
  the CLS entry (last)."""
  params = {"alpha": scores[row, :size], "beta": values[row, :size]}
  if cls:
    params |= {"alpha_cls": scores[row, -1], "beta_cls": values[row, -1]}
  return params


def _products(counts, table):
  """counts @ table.T, (K, G) by (B, G): as a sum of G broadcast products, which XLA fuses
  with what follows (a dot of so few columns, and its transpose over K, is slower on CPU)."""
  return (counts[:, None, :] * table[None]).sum(-1)


def outputs(params, enum: CountEnumeration):
  """f_θ on every slot (c, a, b) of the enumeration (docs/theory.md §2b, §3g), 0 on slots
  that hold no string.

  Without position tables f is the plain model on the query row's scores
  (direct.forward_counts). With them, f = N/D where, for n ≥ 2,
  N = c·x_mid + (x_first - x_mid)_a + (x_last - x_mid)_b (+ x_cls), x = e^{s - max s}·v on
  the query row's entries, and D the same with v = 1: one matrix product per query row
  rather than one per slot. Where a row's scores span more than direct.CLUSTER_GAP, the
  entries' explicit counts go through direct.forward_counts instead, exact for any scores.

  Args:
    params: grouped params of the layout the enumeration was built for.
    enum: the CountEnumeration.

  Returns:
    (K, A, B) outputs.

  Example:
    With α = 0 and β = (-1, 1), f = (c_1 - c_0)/n on the plain layout:

    >>> lang = lj.data.counting.majority(length=lj.fixed(3))
    >>> enum = lj.risk.count.enumeration(lang, lj.partition.singletons(2), lang.length,
    ...                                  lang.pi_array, 1e-12)
    >>> f = lj.risk.count.outputs({"alpha": jnp.zeros(2), "beta": jnp.array([-1.0, 1.0])}, enum)
    >>> np.round(np.asarray(f).reshape(-1), 6).tolist()
    [1.0, 0.333333, -0.333333, -1.0]
  """
  scores, values, _ = entries.entry_table(params)
  cls = direct.has_cls(params)
  counts = enum.counts
  groups = counts.shape[1]
  firsts, lasts = enum.positive.shape[1:]
  query_rows = np.arange(lasts) if scores.shape[0] > 1 else np.zeros(lasts, np.int64)
  if not direct.has_positions(params):
    return jnp.stack([direct.forward_counts(_row_params(scores, values, row, groups, cls),
                                            counts) for row in query_rows], axis=-1)[:, None]

  def masses(weights):
    """N (or D for weights e^{s - max s}) on every slot (K, A, B)."""
    kinds = entries.entry_kinds(weights, groups, True)[query_rows]       # (B, 4, G)
    middle, first, last, both = (kinds[:, k] for k in range(4))
    extra = weights[query_rows, -1] if cls else jnp.zeros(lasts)       # the CLS entry
    longer = (_products(counts, middle)[:, None, :] + (first - middle).T[None]
              + (last - middle)[np.arange(lasts), np.arange(lasts)] + extra)
    # c = e_g for a string of length 1: a product, not a gather (whose gradient is a slow
    # scatter on CPU)
    alone = _products(counts, both) + extra                             # (K, B)
    return jnp.where((enum.single_group >= 0)[:, None, None], alone[:, None, :], longer)

  def scaled(_):
    scale = jnp.exp(scores - jax.lax.stop_gradient(scores.max(axis=1, keepdims=True)))
    numerator, denominator = masses(scale * values), masses(scale)
    return jnp.where(enum.valid, numerator, 0.0) / jnp.where(enum.valid, denominator, 1.0)

  @jax.checkpoint  # its residuals are then θ's tables, not zeros of its own in `scaled`'s
  def explicit(_):
    safe = jnp.zeros(4 * groups).at[3 * groups].set(1.0)  # a string "0" where no string is
    # Every slot's entry counts at once, (K, A, B, 4G): one forward_counts per query row, not
    # one per slot (each is a program of its own size to trace and compile).
    slots = jax.vmap(jax.vmap(lambda a, b: entry_counts(counts, a, b), (None, 0), 1),
                     (0, None), 1)(jnp.arange(firsts), jnp.arange(lasts))
    slots = jnp.where(enum.valid[..., None], slots, safe)
    if scores.shape[0] == 1:   # the CLS query: one row of scores for every slot
      return direct.forward_counts(_row_params(scores, values, 0, 4 * groups, cls), slots)
    return jnp.stack([direct.forward_counts(_row_params(scores, values, b, 4 * groups, cls),
                                            slots[:, :, b]) for b in range(lasts)], axis=-1)

  spread = (scores.max(axis=1) - scores.min(axis=1)).max()
  # Under vmap one branch for the whole batch (lagjax/batched.py): a select would run the
  # explicit counts for every member at every step.
  return jax.lax.cond(batched.every(spread <= direct.CLUSTER_GAP), scaled, explicit, None)


def class_weights_of(lang, class_weights: str | None) -> tuple[float, float]:
  """(w(+1), w(-1)) of the risk (docs/theory.md §3d, §3g): (1, 1) for "population",
  ½ / P(y = ±1) for "balanced"; None takes the language's default_class_weights() where it
  declares one ("balanced" for Dyck-1 and aⁿbⁿ, whose positives are rare), else
  "population".

  Args:
    lang: the language.
    class_weights: "population", "balanced" or None.

  Returns:
    (w(+1), w(-1)), two floats.

  Example:
    >>> lj.risk.count.class_weights_of(lj.data.counting.majority(), None)
    (1.0, 1.0)
    >>> w_pos, w_neg = lj.risk.count.class_weights_of(lj.data.counting.dyck1(), None)
    >>> bool(w_pos > 1.0 > w_neg)
    True
  """
  if class_weights is None:
    class_weights = getattr(lang, "default_class_weights", lambda: "population")()
  validation.check_choice("class_weights", class_weights, CLASS_WEIGHTS)
  if class_weights == "population":
    return 1.0, 1.0
  positive = float(lang.positive_rate())
  return 0.5 / positive, 0.5 / (1.0 - positive)


class CountRoute(base.RouteSpec):
  """The count route (docs/theory.md §3g): the risk of any loss and the exact 0-1 error of
  the direct model in every layout on languages with CountLabels, by enumerating (n, c, a, b)
  with the lattice route's certified truncation; the moments (H, g) of the plain layout.

  Example:
    >>> route = lj.risk.ROUTES["count"]
    >>> route.any_layout, sorted(route.provides)
    (True, ['error', 'moments', 'risk'])
    >>> route.supports(lj.data.regular_builtins.tomita(4))   # no 000: order matters
    'tomita[k=4](d=2, states=4) does not declare CountLabels (labels from counts and ends)'
  """

  name = "count"
  capability = languages.CountLabels
  capability_use = "labels from counts and ends"
  any_layout = True
  provides = frozenset({"risk", "error", "moments"})

  def limits(self, lang, *, quantity, loss, layout, partition, tol) -> str | None:
    """The moments for the plain layout only; a length law of finite mean; an enumeration
    that fits MAX_VECTORS."""
    del loss
    if quantity == "moments" and not layout.plain:
      return "route 'count' gives the moments (H, g) of the plain layout only"
    try:
      _check_length_mean(lang.length)
    except ValueError as error:
      return str(error).removesuffix(".")
    partition = partition or partition_lib.singletons(lang.d)
    return _size_reason(refinement(lang, partition)[0].num_groups, lang.length, tol)

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            tol: float = 1e-12, max_vectors: int = MAX_VECTORS,
            class_weights: str | None = None) -> base.Route:
    """Builds the count route's risk and 0-1 error for one layout (docs/theory.md §3g).

    R = Σ_rows [w₊ P₊ ℓ(f, +1) + w₋ P₋ ℓ(f, -1)] with P± the rows' label masses, and
    ``|R - R_N| <= (P(n > N) + dropped) · sup ℓ · max(w₊, w₋)`` (report["risk_bound"]).

    Args:
      lang: a language with CountLabels (groups that span its count blocks: `refinement`).
      partition: groups of tied tokens; None means one group per token.
      loss: "squared", "logistic" or a callable (f, y) -> ℓ.
      layout: the model's parts (§2b); the params must have this layout.
      key: unused.
      tol: the probability mass left out, in (0, 1): the length tail P(n > N) ≤ tol/2
        plus the lightest count vectors, dropped while their weight is ≤ tol/2.
      max_vectors: refuse enumerations of more count vectors than this.
      class_weights: "population" (E ℓ) or "balanced" (½ E[ℓ | y = +1] + ½ E[ℓ | y = -1],
        w± = ½ / P(y = ±1)); None: the language's default_class_weights() ("balanced" for
        Dyck-1 and aⁿbⁿ, whose positives are rare; "population" otherwise). The 0-1 error
        is the population's either way; report gives w± as "weight_positive",
        "weight_negative".

    Returns:
      A Route; report(params) gives "risk", "error", "risk_bound", "error_bound", "n_max" and
      the class weights.

    Example:
      At θ = 0, f ≡ 0: the squared loss is ½ on every string and every string is a 0-1
      error (sign 0 counts as one), here on majority with the last query and position tables:

      >>> lang = lj.data.counting.majority(length=lj.geometric(0.5))
      >>> layout = lj.models.direct.Layout(query="last", positions="first_last")
      >>> route = lj.risk.ROUTES["count"].build(lang, layout=layout)
      >>> out = jax.jit(route.report)(lj.init_params(2, query="last", positions="first_last"))
      >>> round(float(out["risk"]), 9), round(float(out["error"]), 9), int(out["n_max"])
      (0.5, 1.0, 41)
      >>> bool(out["risk_bound"] < 1e-12)
      True
    """
    del key
    weight_pos, weight_neg = class_weights_of(lang, class_weights)
    partition, enum = checked_enumeration(lang, partition, layout, tol, max_vectors)
    loss_fn = base.get_loss(loss)
    positive, negative = weight_pos * enum.positive, weight_neg * enum.negative

    def risk(params):
      f = outputs(params, enum)
      return jnp.sum(positive * loss_fn(f, 1.0) + negative * loss_fn(f, -1.0))

    def report(params):
      f = outputs(params, enum)
      # f is a convex combination of the entries' values (β plus β^F, β^L; β_cls), §2b.
      bound = base.loss_bound(loss_fn, jnp.abs(entries.entry_table(params)[1]).max())
      return {"risk": jnp.sum(positive * loss_fn(f, 1.0) + negative * loss_fn(f, -1.0)),
              "error": jnp.sum(enum.positive * base.zero_one_error(f, 1.0)
                               + enum.negative * base.zero_one_error(f, -1.0)),
              "risk_bound": enum.tail * bound * max(weight_pos, weight_neg),
              "error_bound": enum.tail, "n_max": enum.n_max,
              "weight_positive": weight_pos, "weight_negative": weight_neg}

    return base.Route(self.name, risk, report, partition)

  def attention_moments(self, lang, partition=None, *, cls: bool = False,
                        tol: float = 1e-12, max_vectors: int = MAX_VECTORS):
    """params -> (H, g) = (E[W Wᵀ], E[y W]) of the token-group attention masses of the plain
    model (CLS last when cls), by the enumeration (§3g, §5); reads only α.

    Example:
      The masses sum to 1, so H sums to 1 and g to E y = 2 P(y = +1) - 1 (§5); majority
      of two tokens: "11" only:

      >>> lang = lj.data.counting.majority(length=lj.fixed(2))
      >>> H, g = lj.risk.ROUTES["count"].attention_moments(lang)(lj.init_params(2))
      >>> round(float(H.sum()), 6), round(float(g.sum()), 6)
      (1.0, -0.5)
    """
    _, enum = checked_enumeration(lang, partition, direct.Layout(cls=cls), tol,
                                   max_vectors)
    counts = enum.counts
    if cls:
      counts = jnp.concatenate([counts, jnp.ones((counts.shape[0], 1))], axis=1)
    total = (enum.positive + enum.negative)[:, 0, 0]
    signed = (enum.positive - enum.negative)[:, 0, 0]

    def moments(params):
      masses = direct.attention_masses(direct.stack(params, "alpha"), counts)
      return (masses * total[:, None]).T @ masses, signed @ masses

    return moments


__all__ = ["CountEnumeration", "CountRoute", "MAX_VECTORS",
           "checked_enumeration", "end_pairs",
           "class_weights_of", "entry_counts", "enumeration", "label_probabilities", "outputs",
           "refinement"]
