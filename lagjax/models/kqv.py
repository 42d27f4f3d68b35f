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

PARAM_GROUPS = {"W_Q": "attention", "W_K": "attention", "W_V": "output", "w_o": "output"}


def init_kqv(key, d: int, *, width: int | None = None, key_dim: int | None = None,
             scale: float = 0.1, embeddings=None, query=None) -> tuple[Params, dict]:
  """Small random init of the KQV form of docs/theory.md §2 (zero is a saddle of it).

  Returns (trainable, fixed): trainable {"W_Q": (m,k), "W_K": (m,k), "W_V": (m,m), "w_o": (m,)},
  fixed {"E": (d,m), "e_cls": (m,)}. Defaults: one-hot E (m = d), k = m, e_cls = 1/√m.

  Args:
    key: PRNG key.
    d: alphabet size.
    width: the embedding width m; None for the width of `embeddings` (d when one-hot).
    key_dim: the query/key width k; None for m.
    scale: the standard deviation of every trainable entry, > 0.
    embeddings: the fixed token embeddings E (d, m); None for one-hot.
    query: the fixed query embedding e_cls (m,); None for 1/√m in every entry.

  Returns:
    The pair (trainable, fixed) of dicts above.

  Example:
    >>> trainable, fixed = lj.models.kqv.init_kqv(jax.random.PRNGKey(0), 3)
    >>> {name: value.shape for name, value in trainable.items()}
    {'W_Q': (3, 3), 'W_K': (3, 3), 'W_V': (3, 3), 'w_o': (3,)}
    >>> np.round(np.asarray(fixed["e_cls"]) ** 2, 6).tolist()  # e_cls = 1/√m
    [0.333333, 0.333333, 0.333333]
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
  """Maps KQV parameters to the (α, β) they realize (docs/theory.md §2):
  α_σ = (e_cls W_Q)·(E_σ W_K)/√k, β_σ = (E_σ W_V)·w_o.

  Args:
    trainable: {"W_Q", "W_K", "W_V", "w_o"} from `init_kqv`.
    fixed: {"E", "e_cls"} from `init_kqv`.

  Returns:
    The direct model's {"alpha": (d,), "beta": (d,)}.

  Example:
    >>> _, fixed = lj.models.kqv.init_kqv(jax.random.PRNGKey(0), 2)  # one-hot E, e_cls = 1/√2
    >>> trainable = {"W_Q": jnp.eye(2), "W_K": jnp.eye(2), "W_V": jnp.eye(2),
    ...              "w_o": jnp.array([1.0, -1.0])}
    >>> direct = lj.models.kqv.kqv_to_direct(trainable, fixed)
    >>> np.round(np.asarray(direct["alpha"]), 6).tolist()  # (1/√2)/√2
    [0.5, 0.5]
    >>> direct["beta"].tolist()
    [1.0, -1.0]
  """
  key_dim = trainable["W_Q"].shape[-1]
  query = fixed["e_cls"] @ trainable["W_Q"]
  keys = fixed["E"] @ trainable["W_K"]
  alpha = keys @ query / math.sqrt(key_dim)
  beta = fixed["E"] @ trainable["W_V"] @ trainable["w_o"]
  return {"alpha": alpha, "beta": beta}
