"""What every risk route returns (docs/theory.md section 3); the losses are lagjax/losses.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lagjax.losses import (  # noqa: F401 (the routes read the losses through this module)
    LOSSES,
    get_loss,
    logistic_loss,
    squared_loss,
    zero_one_error,
)


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


def squared_risk(mean_yf, mean_f2):
  """R = ½ (E f² - 2 E[y f] + 1) for labels ±1 (docs/theory.md §3a): the quadrature routes'
  risk from their two moments."""
  return 0.5 * (mean_f2 - 2.0 * mean_yf + 1.0)


def loss_bound(loss, max_abs_beta):
  """sup over |f| <= max|β|, y = ±1 of ℓ(f, y), for the certified tail bound of 3b."""
  if loss is squared_loss or loss == "squared":
    return 0.5 * (max_abs_beta + 1.0) ** 2
  if loss is logistic_loss or loss == "logistic":
    return jax.nn.softplus(max_abs_beta)
  # A user loss: evaluate at the extremes, valid for losses monotone in y·f.
  return jnp.maximum(loss(-max_abs_beta, 1.0), loss(max_abs_beta, -1.0))
