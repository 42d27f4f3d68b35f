"""The masked softmax shared by every model (docs/theory.md §2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def masked_softmax(scores, present, multiplicity=None):
  """softmax over the present entries of the last axis; all-zero weights when none is present.

  multiplicity (optional, same shape, > 0 where present) weighs entry l as c_l copies of
  itself: c_l e^{s_l} / Σ c e^{s}, the token form's softmax on a string with c_l equal tokens
  (the count form of docs/theory.md §2).

  Shifted by the largest present score (no gradient flows through the shift:
  softmax is shift invariant); absent entries are zeroed before exp, so no inf
  or NaN appears for any finite scores.
  """
  shift = jnp.where(present, scores, -jnp.inf).max(-1, keepdims=True)
  shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
  weights = jnp.where(present, jnp.exp(jnp.where(present, scores - shift, 0.0)), 0.0)
  if multiplicity is not None:
    weights = weights * multiplicity
  total = weights.sum(-1, keepdims=True)
  return weights / jnp.where(total > 0, total, 1.0)
