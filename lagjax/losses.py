"""The losses ℓ(f, y) and the 0-1 error, by name (docs/theory.md section 2).

A leaf module like validation.py: the risk routes and the sampled tasks both read it.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def squared_loss(f, y):
  """ℓ = ½ (f - y)²."""
  return 0.5 * (f - y) ** 2


def logistic_loss(f, y):
  """ℓ = log(1 + e^{-y f}), computed as softplus(-y f)."""
  return jax.nn.softplus(-y * f)


def zero_one_error(f, y):
  """1{sign f ≠ y}; sign 0 counts as an error."""
  return jnp.where(jnp.sign(f) == y, 0.0, 1.0)


LOSSES = {"squared": squared_loss, "logistic": logistic_loss}


def get_loss(loss) -> Callable:
  """Looks a loss up by name; a callable (f, y) -> ℓ is returned as is."""
  if callable(loss):
    return loss
  if loss not in LOSSES:
    raise ValueError(f"unknown loss {loss!r}; known losses: {sorted(LOSSES)} or a callable (f, y).")
  return LOSSES[loss]
