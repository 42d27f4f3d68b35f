"""Exact 0-1 error on a regular language, by dynamic programming (docs/theory.md §3d).

Since B > 0, sign f = sign A with A = Σ_i e^{s_i - s_max} v_i. For the direct model A is
linear in the token-group counts c once the first token's group f and the last one's l
are known (docs/theory.md §2b): with W_k[l, g] = e^{s} v of an entry of kind k (middle,
first, last, both) in query row l (one row under the CLS query)::

    A = Σ_g c_g W_mid[l, g] + (W_first - W_mid)[l, f] + (W_last - W_mid)[l, l] + W_cls[l]

for n ≥ 2, and A = W_both[l, l] + W_cls[l] for n = 1. The joint law of (automaton state,
f, l, counts) after n tokens is propagated one token at a time,
dist_{n+1}[r, f, g, c + e_g] = Σ_{q,l} dist_n[q, f, l, c] (Σ_{x∈g, δ(q,x)=r} π_x), and each
length adds P(n) Σ dist_n 1{sign A ≠ y(q)} (sign 0 counts as an error, as everywhere).
The paper's model (CLS query, no position tables) needs neither f nor l: those axes then
have size 1 and the corrections vanish. Lengths beyond N = truncation_length(L, tol) are
left out, and their mass P(n > N) ≤ tol is the certified bound. The count axes hold G - 1
counts (the last group's is n minus the others), so the whole costs O(Q² F L N^G) with
F = L = G when tracked: the route applies where that fits, MAX_CELLS.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import automaton, base, entries

MAX_GROUPS = 3
MAX_CELLS = 2 * 10**7   # Q · F · L · N^G, the work of one evaluation


def _ends(partition: partition_lib.Partition, layout: direct.Layout) -> int:
  """Size of each of the f and l axes: 1 for the paper's model, else one per token group."""
  return 1 if layout.plain else partition.num_groups


def _shift(values, axis: int):
  """values moved one count up along `axis`."""
  pad = [(0, 0)] * values.ndim
  pad[axis] = (1, 0)
  return jnp.pad(values, pad)[tuple(slice(0, size) for size in values.shape)]


class AutomatonErrorRoute(base.RouteSpec):
  """The automaton error route (docs/theory.md §3d): the exact 0-1 error of the direct model
  in every layout on a regular language, by the DP over (state, first group, last group,
  counts), where it fits MAX_GROUPS token groups and MAX_CELLS.

  Example:
    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> route = lj.risk.ROUTES["automaton"]
    >>> print(route.supports(pairs, quantity="error", partition=lj.partition.of_language(pairs)))
    None
    >>> route.supports(pairs, partition=lj.partition.of_language(pairs))
    "route 'automaton' gives the error, not the risk"
  """

  name = "automaton"
  capability = languages.AutomatonLabels
  capability_use = "a DFA that decides the label"
  any_layout = True
  provides = frozenset({"error"})

  def limits(self, lang, *, quantity, loss, layout, partition, tol) -> str | None:
    """The DP's size: at most MAX_GROUPS token groups, and Q·F·L·N^G <= MAX_CELLS."""
    del quantity, loss
    partition = partition or partition_lib.singletons(lang.d)
    if partition.num_groups > MAX_GROUPS:
      return (f"route 'automaton' tracks at most {MAX_GROUPS} token groups; got "
              f"{partition.num_groups}")
    table, _, _ = lang.automaton()
    n_max = lengths_lib.truncation_length(lang.length, tol)
    cells = table.shape[0] * _ends(partition, layout) ** 2 * (n_max + 1) ** partition.num_groups
    if cells > MAX_CELLS:
      return f"route 'automaton' would propagate {cells:,} cells, over {MAX_CELLS:,}"
    return None

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            tol: float = 1e-12) -> base.Route:
    """Builds the exact 0-1 error on grouped params of `layout` (docs/theory.md §3d).

    The DP over (automaton state, first group, last group, counts), one token at a time up
    to N = truncation_length(L, tol); sign 0 counts as an error.

    Args:
      lang: a language with AutomatonLabels.
      partition: the token groups of the parameters (at most MAX_GROUPS).
      loss: unused (the 0-1 error).
      layout: the model's parts, direct.Layout (§2b).
      key: unused.
      tol: the length tail left out, the certified bound.

    Returns:
      A Route without a risk; report(params) gives "error" and "error_bound".

    Raises:
      ValueError: in one line, where the route does not apply (`supports`).

    Example:
      With β = (1, 1), f ≡ 1 predicts y = +1 on every string, so the error is
      P(y = -1) = 0.45 on even pairs under Geometric(0.1) (P(y = +1) = ½ + P(n = 1)/2):

      >>> pairs = lj.data.regular_builtins.even_pairs()
      >>> route = lj.risk.ROUTES["automaton"].build(pairs, lj.partition.of_language(pairs))
      >>> report = jax.jit(route.report)({"alpha": jnp.array([2.0, -1.0]), "beta": jnp.ones(2)})
      >>> round(float(report["error"]), 6), bool(report["error_bound"] < 1e-12)
      (0.45, True)
    """
    del loss, key
    partition = partition or partition_lib.singletons(lang.d)
    reason = self.supports(lang, quantity="error", layout=layout, partition=partition, tol=tol)
    if reason is not None:
      raise ValueError(f"the automaton error route does not apply to {lang.describe()} on "
                       f"{partition.num_groups} token groups: {reason}.")
    _, accepting, start = lang.automaton()
    letters = jnp.asarray(automaton.group_letter_matrices(lang, partition))   # (G, Q, Q)
    groups, num_states = letters.shape[0], letters.shape[1]
    ends = _ends(partition, layout)
    n_max = lengths_lib.truncation_length(lang.length, tol)
    length_pmf = jnp.exp(lang.length.log_pmf(jnp.arange(1, n_max + 1)))
    tail = float(lang.length.tail(n_max))
    labels = jnp.where(jnp.asarray(accepting), 1.0, -1.0)[:, None, None]
    count_axes = (n_max + 1,) * (groups - 1)
    counts = jnp.meshgrid(*[jnp.arange(n_max + 1.0)] * (groups - 1), indexing="ij")
    end_of = (lambda g: g) if ends > 1 else (lambda g: 0)      # the f or l index of group g
    # The first token: dist_1[r, f = g, l = g, e_g] = (Σ_{x∈g} π_x P_x)[start, r].
    first_dist = jnp.zeros((num_states, ends, ends) + count_axes)
    for g in range(groups):
      unit = tuple(int(k == g) for k in range(groups - 1))
      first_dist = first_dist.at[(slice(None), end_of(g), end_of(g)) + unit].add(letters[g, start])

    def entry_weights(params):
      """W_k (4, L, G) per kind [middle, first, last, both] and W_cls (L,), each query row
      scaled by its own largest score (sign-preserving, so nothing underflows to a tie)."""
      scores, values, _ = entries.entry_table(params)
      weights = jnp.exp(scores - jax.lax.stop_gradient(scores.max(1, keepdims=True))) * values
      cls = weights[:, -1] if direct.has_cls(params) else jnp.zeros(weights.shape[0])
      kinds = entries.entry_kinds(weights, groups, direct.has_positions(params))
      rows = jnp.arange(ends) if weights.shape[0] > 1 else jnp.zeros(ends, int)
      return jnp.moveaxis(kinds[rows], 1, 0), cls[rows]

    def report(params):
      (middle, first, last, both), cls = entry_weights(params)
      index = jnp.arange(ends)
      diagonal = index, index
      # corrections (f, l) for n ≥ 2 and for n = 1, added to Σ_g c_g W_mid[l, g]
      longer = ((first - middle)[index[None, :], index[:, None]]
                + ((last - middle)[diagonal] + cls)[None, :])
      single = jnp.broadcast_to(((both - middle)[diagonal] + cls)[None, :], (ends, ends))

      def wrong(dist, n):
        rest = n - sum(counts, 0.0)                                  # the last group's count
        linear = sum((c[None] * middle[:, g].reshape((-1,) + (1,) * (groups - 1))
                      for g, c in enumerate(counts)), 0.0) + rest[None] * middle[:, -1].reshape(
                          (-1,) + (1,) * (groups - 1))               # (L, counts)
        correction = jnp.where(n == 1, single, longer).reshape((ends, ends) + (1,) * (groups - 1))
        sign = jnp.sign(linear[None] + correction)                    # (F, L, counts)
        return jnp.sum(dist * jnp.where(sign[None] == labels.reshape(
            labels.shape + (1,) * (groups - 1)), 0.0, 1.0))

      def step(dist, n):
        read = dist.sum(2)                                           # over l: (Q, F, counts)
        moved = [jnp.tensordot(letters[g].T, read, 1) for g in range(groups)]
        moved = [_shift(m, 2 + g) if g < groups - 1 else m for g, m in enumerate(moved)]
        dist = jnp.stack(moved, 2) if ends > 1 else sum(moved)[:, :, None]
        return dist, wrong(dist, n)

      _, later = jax.lax.scan(step, first_dist, jnp.arange(2.0, n_max + 1))
      per_length = jnp.concatenate([wrong(first_dist, 1.0)[None], later])
      return {"error": length_pmf @ per_length, "error_bound": tail}

    return base.Route(self.name, None, report, partition)


__all__ = ["MAX_CELLS", "MAX_GROUPS", "AutomatonErrorRoute"]
