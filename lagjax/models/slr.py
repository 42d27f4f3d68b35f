"""The SLR model (docs/theory.md section 7): f(X) = Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩.

The continuous analogue of (α, β): κ ("kappa") is the attention group and ν
("nu") the output group.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.models.softmax import masked_softmax

Params = dict

PARAM_GROUPS = {"kappa": "attention", "nu": "output"}


def init(key, m: int, scale: float = 0.1) -> Params:
  """κ and ν, each scale · N(0, I_m): the SLR model's init (docs/theory.md §7).

  scale = 0 is allowed: unlike the KQV form, zero is not a saddle here (∂f/∂ν ≠ 0).

  Args:
    key: PRNG key.
    m: the token width, >= 1.
    scale: the standard deviation, finite and >= 0.

  Returns:
    {"kappa": κ (m,), "nu": ν (m,)}.

  Example:
    >>> params = lj.models.slr.init(jax.random.PRNGKey(0), 2, scale=0.0)
    >>> inputs = jnp.array([[1.0, 0.0], [0.0, 1.0]])  # two tokens
    >>> grad = jax.grad(lambda p: lj.models.slr.apply(p, inputs))(params)
    >>> grad["nu"].tolist()  # at κ = 0, ∂f/∂ν is the mean token
    [0.5, 0.5]
  """
  validation.require_float64("lj.models.slr.init")
  validation.check_int("SLR width m", m, 1)
  if not (isinstance(scale, int | float) and math.isfinite(scale) and scale >= 0):
    raise ValueError(f"scale must be finite and >= 0; got {scale!r}.")
  return _init(key, m, scale)


@functools.partial(jax.jit, static_argnums=1)
def _init(key, m, scale):
  kappa, nu = scale * jax.random.normal(key, (2, m))
  return {"kappa": kappa, "nu": nu}


def apply(params: Params, inputs, mask=None):
  """f(X) = Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩ over real positions, for inputs X (..., L, m)
  (docs/theory.md §7).

  Args:
    params: {"kappa": κ (m,), "nu": ν (m,)}.
    inputs: X, shape (..., L, m).
    mask: boolean (..., L), True at real positions; None means all real.

  Returns:
    (...,) outputs; 0 for a row with no real position.

  Example:
    >>> params = {"kappa": jnp.array([jnp.log(3.0), 0.0]), "nu": jnp.array([1.0, -1.0])}
    >>> inputs = jnp.array([[1.0, 0.0], [0.0, 1.0]])  # softmax weights (3/4, 1/4)
    >>> round(float(lj.models.slr.apply(params, inputs)), 6)  # 3/4 - 1/4
    0.5
  """
  validation.require_float64("lj.models.slr.apply")
  validation.check_keys("SLR params", params, tuple(PARAM_GROUPS))   # κ = 'kappa', ν = 'nu'
  inputs = jnp.asarray(inputs, jnp.float64)
  m = np.shape(params["kappa"])
  if inputs.ndim < 2 or inputs.shape[-1:] != m or np.shape(params["nu"]) != m:
    raise ValueError(f"SLR inputs must have shape (..., L, m) with κ, ν of shape (m,); got inputs "
                     f"{inputs.shape}, κ {m}, ν {np.shape(params['nu'])}.")
  mask = jnp.ones(inputs.shape[:-1], bool) if mask is None else jnp.asarray(mask)
  if mask.shape != inputs.shape[:-1] or mask.dtype != jnp.bool_:
    raise ValueError(f"mask must be boolean with shape {inputs.shape[:-1]}; got {mask.dtype} "
                     f"{mask.shape}.")
  return _apply(params, inputs, mask)


@jax.jit
def _apply(params, inputs, mask):
  weights = masked_softmax(inputs @ params["kappa"], mask)
  return (weights * (inputs @ params["nu"])).sum(-1)
