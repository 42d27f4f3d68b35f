"""Lattice route: exact enumeration of group-count vectors (docs/theory.md section 3b).

With tokens tied in G groups, f depends on w only through the group counts
c ∈ N^G. Enumerating every c with n = Σc ≤ N, weighted by
P(n) · n!/Π c_g! · Π π_g^{c_g}, gives the risk of any loss and the exact 0-1
error up to the mass left out, certified by::

    |R - R_N| <= (P(n > N) + dropped) · sup ℓ,  sup ℓ over |f| <= max|β|.

N is the smallest length with P(n > N) <= tol/2, and the lightest count vectors
are dropped while their total weight stays <= tol/2 (most of the N^G/G! vectors
lie deep in the multinomial tails), so the mass left out is <= tol.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base

MAX_VECTORS = 5_000_000


def num_count_vectors(num_groups: int, n_max: int) -> int:
  """#{c ∈ N^G : 1 <= Σc <= N} = C(N + G, G) - 1, the size of the enumeration (§3b).

  Args:
    num_groups: G, the number of token groups.
    n_max: N, the longest length enumerated.

  Returns:
    The number of count vectors, an int.

  Example:
    >>> lj.risk.lattice.num_count_vectors(2, 3)  # C(5, 2) - 1
    9
  """
  return math.comb(n_max + num_groups, num_groups) - 1


def count_vectors(num_groups: int, n_max: int) -> np.ndarray:
  """All c ∈ N^G with 1 <= Σc <= n_max, shape (C(N+G, G) - 1, G) (docs/theory.md §3b).

  Args:
    num_groups: G, the number of token groups.
    n_max: N, the longest length enumerated.

  Returns:
    The count vectors as rows of an int64 array (C(N+G, G) - 1, G).

  Example:
    >>> lj.risk.lattice.count_vectors(2, 2).tolist()
    [[0, 1], [0, 2], [1, 0], [1, 1], [2, 0]]
  """
  rows = np.zeros((1, 0), dtype=np.int64)
  remaining = np.array([n_max])
  for _ in range(num_groups):
    choices = remaining + 1
    starts = np.repeat(np.cumsum(choices) - choices, choices)
    values = np.arange(choices.sum()) - starts
    rows = np.concatenate([np.repeat(rows, choices, axis=0), values[:, None]], axis=1)
    remaining = np.repeat(remaining, choices) - values
  return rows[rows.sum(axis=1) > 0]


def log_weights(counts: np.ndarray, group_masses: np.ndarray,
                law: lengths_lib.LengthLaw) -> np.ndarray:
  """log[P(n) · n!/Π c_g! · Π π_g^{c_g}] for each count vector (docs/theory.md §3b).

  Given n, the token-group counts are multinomial with probabilities π_g; log-factorials
  are cumulative sums of logs, so no factorial overflows.

  Args:
    counts: count vectors (C, G), with n = Σ_g c_g.
    group_masses: π_g (G,).
    law: the length law, P(n).

  Returns:
    The log weights (C,).

  Example:
    Strings of length 2 over token groups of mass ¼ and ¾: the counts (0, 2), (1, 1),
    (2, 0) weigh (¾)², 2·¼·¾, (¼)², and the length-1 vectors nothing:

    >>> counts = lj.risk.lattice.count_vectors(2, 2)
    >>> weights = np.exp(lj.risk.lattice.log_weights(counts, np.array([0.25, 0.75]),
    ...                                              lj.fixed(2)))
    >>> np.round(weights, 6).tolist()
    [0.0, 0.5625, 0.0, 0.375, 0.0625]
  """
  n = counts.sum(axis=1)
  log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n.max() + 1.0)))])
  multinomial = log_factorial[n] - log_factorial[counts].sum(axis=1)
  return np.asarray(law.log_pmf(n)) + multinomial + counts @ np.log(group_masses)


def kept_count_vectors(num_groups: int, n_max: int, group_masses: np.ndarray,
                       law: lengths_lib.LengthLaw, budget: float):
  """The count vectors with 1 ≤ Σc ≤ n_max and their weights, less the lightest ones, dropped
  while their total weight stays ≤ budget (docs/theory.md §3b; the count route's too, §3g).

  Most count vectors lie far in the multinomial tails; dropping the lightest keeps the
  bound certified, since their mass joins the tail.

  Args:
    num_groups: G, the number of token groups.
    n_max: N, the longest length enumerated.
    group_masses: π_g (G,).
    law: the length law, P(n).
    budget: the total weight that may be dropped, ≥ 0.

  Returns:
    (counts (K, G) int64, weights (K,), dropped mass), the kept vectors in count_vectors'
    order.

  Example:
    Length 2 over groups of mass ¼ and ¾: the vectors of length 1 weigh nothing, and with
    a budget of 0.07 the lightest vector of length 2, (2, 0) of weight 1/16, goes too:

    >>> counts, weights, dropped = lj.risk.lattice.kept_count_vectors(
    ...     2, 2, np.array([0.25, 0.75]), lj.fixed(2), 0.07)
    >>> counts.tolist(), np.round(weights, 6).tolist(), round(dropped, 6)
    ([[0, 2], [1, 1]], [0.5625, 0.375], 0.0625)
  """
  counts = count_vectors(num_groups, n_max)
  weights = np.exp(log_weights(counts, group_masses, law))
  order = np.argsort(weights)
  dropped = np.cumsum(weights[order]) <= budget
  keep = np.sort(order[~dropped])
  return counts[keep], weights[keep], float(weights[order[dropped]].sum())


class Enumeration(NamedTuple):
  """The kept count vectors of the lattice route and their weights (docs/theory.md §3b).

  Attributes:
    counts: (K, G) float count vectors c, 1 ≤ Σc ≤ N.
    weights: (K,) P(n) n!/Π c_g! Π π_g^{c_g}.
    targets: (K,) the labels y(c) in {-1, +1}.
    tail: the probability mass left out, P(n > N) + the dropped vectors' weight (≤ tol).
    (A float, or an array where the length law is.)

  Example:
    >>> lang = lj.occurrence(3, length=lj.fixed(2))   # strings of length 2 on groups {a}, rest
    >>> enum = lj.risk.lattice.enumeration(lang, lj.partition.of_language(lang), 1e-12)
    >>> enum.counts.tolist(), enum.targets.tolist()
    ([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], [-1.0, 1.0, 1.0])
  """

  counts: jnp.ndarray
  weights: jnp.ndarray
  targets: jnp.ndarray
  tail: float | jnp.ndarray


def enumeration(lang: languages.Language, partition: partition_lib.Partition,
                tol: float) -> Enumeration:
  """The count vectors the lattice route sums over, with their weights and labels (§3b).

  N is the smallest length with P(n > N) ≤ tol/2; the lightest vectors are dropped while
  their total weight stays ≤ tol/2, so the mass left out, `tail`, is ≤ tol.

  Args:
    lang: a language with PresenceLabels; the partition must refine
      `partition.of_language(lang)`.
    partition: the token groups.
    tol: the probability mass that may be left out, in (0, 1).

  Returns:
    An Enumeration.

  Example:
    >>> lang = lj.occurrence(3)
    >>> enum = lj.risk.lattice.enumeration(lang, lj.partition.of_language(lang), 1e-12)
    >>> enum.counts.shape[1], bool(abs(float(enum.weights.sum()) + enum.tail - 1) < 1e-12)
    (2, True)
  """
  base_partition = partition_lib.of_language(lang)
  if any(len(set(base_partition.index[list(b)])) > 1 for b in partition.blocks):
    raise ValueError("partition must refine the language's partition (lj.partition.of_language).")
  n_max = lengths_lib.truncation_length(lang.length, tol / 2)
  counts_np, weights_np, dropped_mass = kept_count_vectors(
      partition.num_groups, n_max, partition.masses(lang.pi), lang.length, tol / 2)
  # Labels depend on presence only: put each group's presence on its first token.
  presence = np.zeros((counts_np.shape[0], lang.d), dtype=np.int8)
  presence[:, [b[0] for b in partition.blocks]] = counts_np > 0
  return Enumeration(jnp.asarray(counts_np, dtype=jnp.float64), jnp.asarray(weights_np),
                     jnp.asarray(lang.label_counts(presence)),
                     lang.length.tail(n_max) + dropped_mass)


class LatticeRoute(base.RouteSpec):
  """The lattice route (docs/theory.md §3b): the risk of any loss and the exact 0-1 error of
  the plain model on languages with PresenceLabels, by enumerating count vectors, each with
  its certified bound.

  Example:
    >>> route = lj.risk.ROUTES["lattice"]
    >>> print(route.supports(lj.occurrence(4), loss="logistic"))
    None
    >>> route.supports(lj.data.regular_builtins.even_pairs())
    'even_pairs(d=2, states=5) does not declare PresenceLabels (labels from token counts)'
  """

  name = "lattice"
  capability = languages.PresenceLabels
  capability_use = "labels from token counts"
  provides = frozenset({"risk", "error"})

  def limits(self, lang, *, quantity, loss, layout, partition, tol) -> str | None:
    """The 0-1 error is taken here only where the enumeration fits MAX_VECTORS (the risk
    route refuses a larger one when built, naming the remedies)."""
    del loss, layout
    if quantity != "error":
      return None
    partition = partition or partition_lib.singletons(lang.d)
    size = num_count_vectors(partition.num_groups,
                             lengths_lib.truncation_length(lang.length, tol / 2))
    if size > MAX_VECTORS:
      return f"route 'lattice' would enumerate {size:,} count vectors, over {MAX_VECTORS:,}"
    return None

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            tol: float = 1e-12, max_vectors: int = MAX_VECTORS) -> base.Route:
    """Builds the lattice risk on grouped parameters (docs/theory.md §3b).

    R = Σ_c weight(c) ℓ(f(c), y(c)) over the kept count vectors, and
    ``|R - R_kept| <= (P(n > N) + dropped) · sup ℓ`` (report["risk_bound"]).

    Args:
      lang: the language; the partition must refine `partition.of_language(lang)`.
      partition: groups of tied tokens; None means one group per token.
      loss: "squared", "logistic" or a callable (f, y) -> ℓ.
      layout: the plain model's layout (the route reads the CLS scalars from params).
      key: unused.
      tol: the probability mass left out: the length tail P(n > N) <= tol/2 plus
        the lightest count vectors, dropped while their total weight is <= tol/2.
      max_vectors: refuse enumerations larger than this.

    Returns:
      A Route; report(params) gives risk, exact 0-1 error and the certified bounds.

    Example:
      At θ = 0, f ≡ 0: the logistic loss is log 2 on every string, and every string is a
      0-1 error (sign 0 counts as one):

      >>> lang = lj.occurrence(4)
      >>> route = lj.risk.ROUTES["lattice"].build(lang, lj.partition.of_language(lang),
      ...                                         loss="logistic")
      >>> out = jax.jit(route.report)({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
      >>> round(float(out["risk"]), 6), round(float(out["error"]), 6)
      (0.693147, 1.0)
      >>> bool(out["risk_bound"] < 1e-12), int(out["n_max"])
      (True, 70)
    """
    del layout, key
    self.check_length_law(lang)
    partition = partition or partition_lib.singletons(lang.d)
    if not 0 < tol < 1:
      raise ValueError(f"tol must lie in (0, 1); got {tol!r}.")
    n_max = lengths_lib.truncation_length(lang.length, tol / 2)
    size = num_count_vectors(partition.num_groups, n_max)
    if size > max_vectors:
      raise ValueError(
          f"lattice route needs {size:,} count vectors (G = {partition.num_groups} groups, lengths "
          f"up to N = {n_max} for tail {tol:g}), more than max_vectors = {max_vectors:,}. Tie the "
          "parameters in fewer groups, raise tol, or use route='laplace' (squared loss) or "
          "route='sampled'."
      )
    counts, weights, labels, tail = enumeration(lang, partition, tol)
    loss_fn = base.get_loss(loss)

    def outputs(params):
      return direct.forward_counts(params, counts)

    def risk(params):
      return weights @ loss_fn(outputs(params), labels)

    def report(params):
      f = outputs(params)
      max_abs_beta = jnp.abs(direct.stack(params, "beta")).max()
      return {"risk": weights @ loss_fn(f, labels),
              "error": weights @ base.zero_one_error(f, labels),
              "risk_bound": tail * base.loss_bound(loss_fn, max_abs_beta),
              "error_bound": tail, "n_max": n_max}

    return base.Route(self.name, risk, report, partition)


__all__ = ["MAX_VECTORS", "Enumeration", "LatticeRoute", "count_vectors", "enumeration",
           "kept_count_vectors", "log_weights", "num_count_vectors"]
