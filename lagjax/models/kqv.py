"""The over-parameterized KQV form of the direct model (docs/theory.md section 2).

    α_σ = (e_cls W_Q)·(E_σ W_K)/√k,   β_σ = (E_σ W_V)·w_o.

Attention group: W_Q, W_K; output group: W_V, w_o. Zero is a saddle of this
form, so it starts from a small random init. `kqv_to_direct` is the parameter
map a plan's objective applies before the direct model's risk.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from lagjax import validation

Params = dict

GROUPS = {"W_Q": "attention", "W_K": "attention", "W_V": "output", "w_o": "output"}


def init_kqv(key, d: int, *, width: int | None = None, key_dim: int | None = None,
             scale: float = 0.1, embeddings=None, query=None) -> tuple[Params, dict]:
  """Small random init of the KQV form (zero is a saddle of it).

  Returns (trainable, fixed): trainable {"W_Q": (m,k), "W_K": (m,k), "W_V": (m,m), "w_o": (m,)},
  fixed {"E": (d,m), "e_cls": (m,)}. Defaults: one-hot E (m = d), k = m, e_cls = 1/√m.
  """
  validation.require_float64("lj.models.kqv.init_kqv")
  validation.check_positive("scale", scale)
  embeddings = jnp.eye(d) if embeddings is None else jnp.asarray(embeddings, jnp.float64)
  width = embeddings.shape[1] if width is None else width
  key_dim = width if key_dim is None else key_dim
  if embeddings.shape != (d, width):
    raise ValueError(f"embeddings must have shape ({d}, {width}); got {embeddings.shape}.")
  query = jnp.ones(width) / math.sqrt(width) if query is None else jnp.asarray(query, jnp.float64)
  kq, kk, kv, ko = jax.random.split(key, 4)
  trainable = {
      "W_Q": scale * jax.random.normal(kq, (width, key_dim)),
      "W_K": scale * jax.random.normal(kk, (width, key_dim)),
      "W_V": scale * jax.random.normal(kv, (width, width)),
      "w_o": scale * jax.random.normal(ko, (width,)),
  }
  return trainable, {"E": embeddings, "e_cls": query}


def kqv_to_direct(trainable: Params, fixed: dict) -> Params:
  """Maps KQV parameters to the (α, β) they realize."""
  key_dim = trainable["W_Q"].shape[-1]
  query = fixed["e_cls"] @ trainable["W_Q"]
  keys = fixed["E"] @ trainable["W_K"]
  alpha = keys @ query / math.sqrt(key_dim)
  beta = fixed["E"] @ trainable["W_V"] @ trainable["w_o"]
  return {"alpha": alpha, "beta": beta}
