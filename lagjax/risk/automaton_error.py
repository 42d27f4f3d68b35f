"""Exact 0-1 error on a regular language, by dynamic programming (docs/theory.md §3d).

For the direct model with a CLS query and no position tables, sign f = sign A with
A(c) = Σ_g c_g u_g β_g + u_cls β_cls linear in the token-group counts c (B > 0). The
joint law of (automaton state, counts) after n tokens is propagated one token at a
time, dist_{n+1}[r, c + e_g] = Σ_q dist_n[q, c] (Σ_{x∈g, δ(q,x)=r} π_x), and each length
adds P(n) Σ_{q,c} dist_n[q, c] 1{sign A(c) ≠ y(q)} (sign 0 counts as an error, as
everywhere). Lengths beyond N = truncation_length(L, tol) are left out, and their mass
P(n > N) ≤ tol is the certified bound. The count axes hold G - 1 counts (the last group's
is n minus the others), so a step costs O(Q² N^{G-1}) and the whole O(Q² N^G): the route
applies where that fits, MAX_CELLS.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import transfer

MAX_GROUPS = 3
MAX_CELLS = 2 * 10**7   # Q · N^G, the work of one evaluation


def supports(lang: languages.Language, partition: partition_lib.Partition,
             tol: float = 1e-12) -> bool:
  """Whether the DP applies: a language with AutomatonLabels on at most MAX_GROUPS token
  groups whose lengths up to the tail tol fit MAX_CELLS."""
  if not isinstance(lang, languages.AutomatonLabels) or partition.num_groups > MAX_GROUPS:
    return False
  table, _, _ = lang.automaton()
  n_max = lengths_lib.truncation_length(lang.length, tol)
  return table.shape[0] * (n_max + 1) ** partition.num_groups <= MAX_CELLS


def _shift(values, axis: int):
  """values moved one count up along `axis` (the count axes follow the state axis)."""
  pad = [(0, 0)] * values.ndim
  pad[axis] = (1, 0)
  return jnp.pad(values, pad)[tuple(slice(0, size) for size in values.shape)]


def build(lang: languages.Language, partition: partition_lib.Partition, *, tol: float = 1e-12):
  """Builds error(params) -> (exact 0-1 error, tail bound) on grouped params.

  Raises:
    ValueError: if `supports` is False (one line saying why).
  """
  if not supports(lang, partition, tol):
    raise ValueError(f"the automaton error route needs AutomatonLabels on at most {MAX_GROUPS} "
                     f"token groups with lengths that fit {MAX_CELLS} cells; got "
                     f"{lang.describe()} on {partition.num_groups} token groups.")
  _, accepting, start = lang.automaton()
  letters = jnp.asarray(transfer.group_letter_matrices(lang, partition))   # (G, Q, Q)
  groups, num_states = letters.shape[0], letters.shape[1]
  n_max = lengths_lib.truncation_length(lang.length, tol)
  lengths = jnp.arange(1, n_max + 1)
  length_pmf = jnp.exp(lang.length.log_pmf(lengths))
  tail = float(lang.length.tail(n_max))
  labels = jnp.where(jnp.asarray(accepting), 1.0, -1.0)
  counts = jnp.meshgrid(*[jnp.arange(n_max + 1.0)] * (groups - 1), indexing="ij")
  start_dist = jnp.zeros((num_states,) + (n_max + 1,) * (groups - 1)).at[
      (start,) + (0,) * (groups - 1)].set(1.0)

  def error(params):
    alpha, beta = direct.stack(params, "alpha"), direct.stack(params, "beta")
    scale = jnp.exp(alpha - jax.lax.stop_gradient(alpha.max()))
    weights = scale * beta                  # u_g β_g (and u_cls β_cls last)
    offset = weights[groups] if direct.has_cls(params) else 0.0

    def step(dist, n):
      moved = sum(_shift(jnp.tensordot(letters[g].T, dist, 1), 1 + g) for g in range(groups - 1))
      moved = moved + jnp.tensordot(letters[groups - 1].T, dist, 1)
      rest = n - sum(counts, 0.0)                               # the last group's count
      numerator = sum((c * w for c, w in zip(counts, weights)), 0.0) + rest * weights[
          groups - 1] + offset
      sign = jnp.sign(numerator)
      wrong = jnp.where(sign[None] == labels.reshape((-1,) + (1,) * (groups - 1)), 0.0, 1.0)
      return moved, jnp.sum(moved * wrong)

    _, per_length = jax.lax.scan(step, start_dist, lengths.astype(jnp.float64))
    return length_pmf @ per_length, tail

  return error


__all__ = ["MAX_CELLS", "MAX_GROUPS", "build", "supports"]
