"""What every risk route returns, and the loss registry (docs/theory.md sections 2-3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp


class Route(NamedTuple):
  """A risk route built once for a language, a partition and a loss.

  Attributes:
    name: "laplace", "lattice" or "sampled".
    risk: params -> scalar risk; jittable and differentiable.
    report: params -> dict of the risk and the route's diagnostics (0-1 error,
      certified truncation bound, standard error, quadrature coverage, ...).
    partition: the Partition whose groups index the parameters.
  """

  name: str
  risk: Callable
  report: Callable
  partition: object


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


def loss_bound(loss, max_abs_beta):
  """sup over |f| <= max|β|, y = ±1 of ℓ(f, y), for the certified tail bound of 3b."""
  if loss is squared_loss or loss == "squared":
    return 0.5 * (max_abs_beta + 1.0) ** 2
  if loss is logistic_loss or loss == "logistic":
    return jax.nn.softplus(max_abs_beta)
  # A user loss: evaluate at the extremes, valid for losses monotone in y·f.
  return jnp.maximum(loss(-max_abs_beta, 1.0), loss(max_abs_beta, -1.0))
