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
  """A risk route built once for a language, a partition and a loss (docs/theory.md §3).

  Every builder (`risk.risk_fn`, and each route's `build`) returns one; `risk` is what
  training differentiates, `report` what records and tests read.

  Attributes:
    name (str): "laplace", "lattice", "transfer" or "sampled".
    risk (Callable): params -> scalar risk R(θ); jittable and differentiable.
    report (Callable): params -> dict of the risk and the route's diagnostics (0-1 error,
      certified truncation bound, standard error, quadrature coverage, ...).
    partition (object): the Partition whose token groups index the parameters.

  Example:
    >>> route = lj.risk_fn(lj.occurrence(4))
    >>> route.name, route.partition.num_groups
    ('laplace', 4)
  """

  name: str
  risk: Callable
  report: Callable
  partition: object


def squared_risk(mean_yf, mean_f2):
  """R = ½ (E f² - 2 E[y f] + 1) for labels ±1 (docs/theory.md §3a): the quadrature routes'
  risk from their two moments.

  Args:
    mean_yf: E[y f].
    mean_f2: E f².

  Returns:
    The squared-loss risk, of the inputs' type (a float or a scalar array).

  Example:
    >>> lj.risk.base.squared_risk(0.0, 0.0)  # f ≡ 0 (θ = 0): ½ E y² = ½
    0.5
    >>> lj.risk.base.squared_risk(1.0, 1.0)  # f = y on every string
    0.0
  """
  return 0.5 * (mean_f2 - 2.0 * mean_yf + 1.0)


def loss_bound(loss, max_abs_beta):
  """sup ℓ(f, y) over ``|f| <= max|β|`` and y = ±1, the factor of the certified tail bound
  of docs/theory.md §3b.

  Since f is a convex combination of the β's, no string's loss exceeds it: ½(max|β| + 1)²
  for the squared loss, log(1 + e^{max|β|}) for the logistic one.

  Args:
    loss: "squared", "logistic", one of their functions, or a callable (f, y) -> ℓ
      (then valid for losses monotone in y·f).
    max_abs_beta: max|β| over the values, β_cls included.

  Returns:
    The bound sup ℓ, a scalar.

  Example:
    >>> lj.risk.base.loss_bound("squared", 1.0)  # ½ (1 + 1)²
    2.0
    >>> round(float(lj.risk.base.loss_bound("logistic", 1.0)), 6)  # log(1 + e)
    1.313262
  """
  if loss is squared_loss or loss == "squared":
    return 0.5 * (max_abs_beta + 1.0) ** 2
  if loss is logistic_loss or loss == "logistic":
    return jax.nn.softplus(max_abs_beta)
  # A user loss: evaluate at the extremes, valid for losses monotone in y·f.
  return jnp.maximum(loss(-max_abs_beta, 1.0), loss(max_abs_beta, -1.0))
