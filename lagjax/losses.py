"""The losses ℓ(f, y) and the 0-1 error, by name (docs/theory.md section 2).

A leaf module like validation.py: the risk routes and the sampled tasks both read it.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def squared_loss(f, y):
  """The squared loss ℓ = ½ (f - y)², lagjax's default (docs/theory.md §2).

  Args:
    f: the model's output f_θ(w), a float or an array.
    y: the label y(w) ∈ {-1, +1}, broadcastable against f.

  Returns:
    ℓ elementwise, of the broadcast shape of f and y.

  Example:
    >>> float(lj.losses.squared_loss(0.0, 1.0))  # θ = 0 gives f ≡ 0, so R(0) = ½
    0.5
    >>> lj.losses.squared_loss(jnp.array([1.0, 0.5]), 1.0).tolist()
    [0.0, 0.125]
  """
  return 0.5 * (f - y) ** 2


def logistic_loss(f, y):
  """The logistic loss ℓ = log(1 + e^{-y f}), computed as softplus(-y f) (docs/theory.md §2).

  softplus stays finite where e^{-y f} would overflow (docs/theory.md, numerics).

  Args:
    f, y: as for squared_loss.

  Returns:
    ℓ elementwise.

  Example:
    >>> round(float(lj.losses.logistic_loss(0.0, 1.0)), 6)  # log 2
    0.693147
    >>> float(lj.losses.logistic_loss(-1000.0, 1.0))  # y f = -1000: ℓ = 1000, no overflow
    1000.0
  """
  return jax.nn.softplus(-y * f)


def zero_one_error(f, y):
  """The 0-1 error 1{sign f ≠ y}; sign 0 counts as an error (docs/theory.md §2).

  Args:
    f, y: as for squared_loss.

  Returns:
    1.0 where sign f ≠ y, else 0.0, of the broadcast shape of f and y.

  Example:
    >>> lj.losses.zero_one_error(jnp.array([0.3, -0.3, 0.0]), 1.0).tolist()  # f = 0 is wrong
    [0.0, 1.0, 1.0]
  """
  return jnp.where(jnp.sign(f) == y, 0.0, 1.0)


LOSSES = {"squared": squared_loss, "logistic": logistic_loss}


def get_loss(loss) -> Callable:
  """Looks a loss ℓ(f, y) of docs/theory.md §2 up by name in ``LOSSES``; a callable
  (f, y) -> ℓ is returned as is.

  Args:
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.

  Returns:
    The loss function (f, y) -> ℓ.

  Raises:
    ValueError: for an unknown name, listing the known ones.

  Example:
    >>> lj.losses.get_loss("squared") is lj.losses.squared_loss
    True
    >>> float(lj.losses.get_loss(lambda f, y: abs(f - y))(0.25, 1.0))  # a user loss
    0.75
  """
  if callable(loss):
    return loss
  if loss not in LOSSES:
    raise ValueError(f"unknown loss {loss!r}; known losses: {sorted(LOSSES)} or a callable (f, y).")
  return LOSSES[loss]
