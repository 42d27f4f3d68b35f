"""The masked softmax shared by every model (docs/theory.md §2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def masked_softmax(scores, present):
  """softmax over the present entries of the last axis; all-zero weights when none is present.

  Shifted by the largest present score (no gradient flows through the shift:
  softmax is shift invariant); absent entries are zeroed before exp, so no inf
  or NaN appears for any finite scores.
  """
  shift = jnp.where(present, scores, -jnp.inf).max(-1, keepdims=True)
  shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
  weights = jnp.where(present, jnp.exp(jnp.where(present, scores - shift, 0.0)), 0.0)
  total = weights.sum(-1, keepdims=True)
  return weights / jnp.where(total > 0, total, 1.0)
