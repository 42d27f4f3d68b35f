"""The masked softmax shared by every model (docs/theory.md §2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def masked_softmax(scores, present, multiplicity=None):
  """softmax over the present entries of the last axis; all-zero weights when none is present.

  multiplicity (optional, same shape, > 0 where present) weighs entry l as c_l copies of
  itself: c_l e^{s_l} / Σ c e^{s}, the token form's softmax on a string with c_l equal tokens
  (the count form of docs/theory.md §7).

  Shifted by the largest present score (no gradient flows through the shift:
  softmax is shift invariant); absent entries are zeroed before exp, so no inf
  or NaN appears for any finite scores (docs/theory.md, numerics).

  Args:
    scores: (..., L) scores s.
    present: (..., L) bool, True at the entries the softmax runs over.
    multiplicity: optional (..., L) counts c_l.

  Returns:
    (..., L) weights, summing to 1 over the present entries of each row (0 elsewhere).

  Example:
    >>> masked_softmax = lj.models.softmax.masked_softmax
    >>> scores = jnp.array([0.0, jnp.log(3.0), 100.0])
    >>> present = jnp.array([True, True, False])
    >>> np.round(np.asarray(masked_softmax(scores, present)), 6).tolist()  # (1, 3)/4
    [0.25, 0.75, 0.0]
    >>> counts = jnp.array([3.0, 1.0, 1.0])  # three copies of the first entry
    >>> np.round(np.asarray(masked_softmax(scores, present, counts)), 6).tolist()
    [0.5, 0.5, 0.0]
    >>> masked_softmax(scores, jnp.zeros(3, bool)).tolist()  # nothing present
    [0.0, 0.0, 0.0]
  """
  shift = jnp.where(present, scores, -jnp.inf).max(-1, keepdims=True)
  shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
  weights = jnp.where(present, jnp.exp(jnp.where(present, scores - shift, 0.0)), 0.0)
  if multiplicity is not None:
    weights = weights * multiplicity
  total = weights.sum(-1, keepdims=True)
  return weights / jnp.where(total > 0, total, 1.0)
