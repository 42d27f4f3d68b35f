"""The options of the transformer's config, each declared once (docs/theory.md §2, §2b).

One table per string option of lagjax.models.transformer.TransformerConfig, so no forward
pass branches on an option's name: `QUERY` (where the query is read: "cls", "last"),
`EMBEDDING` (the fixed token embedding: "one_hot", "random") and `ATTENTION` (the
parameterisation: "kqv", "direct"). Positional information is the registry
lagjax/models/positions.py (POSITIONAL). A new choice of an option is one entry here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp

from lagjax.models import positions

# The query positions (TransformerConfig.query), each declared once: how the query is read
# from the stream (or from the token parts without forming it) and the shape of the direct
# parameterisation's score map at it.


def _cls_query_from_stream(x, x_cls, present):
  del present
  return jnp.broadcast_to(x_cls, x.shape[:-2] + x_cls.shape)


def _last_query_from_stream(x, x_cls, present):
  del x_cls
  last = positions.last_index(present)
  query = jnp.take_along_axis(x, last[..., None, None], axis=-2)[..., 0, :]
  return jnp.where(present.any(-1, keepdims=True), query, 0.0)


def _cls_query_from_parts(parts, table, flags, dense, present, x_cls, config):
  del parts, table, flags, dense, present, config
  return x_cls  # one query for every row: the score directions are computed once


def _last_query_from_parts(parts, table, flags, dense, present, x_cls, config):
  del x_cls
  last = positions.last_index(present)
  pieces = [jnp.where(jnp.take_along_axis(has, last[..., None], -1),
                      table[jnp.take_along_axis(w, last[..., None], -1)[..., 0]], 0.0)
            for w, has, _ in parts]
  pieces.append(jnp.zeros(present.shape[:-1] + (config.dim - config.token_dim * len(parts),)))
  query = jnp.concatenate(pieces, axis=-1)
  if flags is not None:
    at_last = jnp.take_along_axis(flags, last[..., None, None], -2)[..., 0, :]
    query = query.at[..., -2:].add(at_last)
  if dense is not None:
    query = query + dense[last]
  return jnp.where(present.any(-1, keepdims=True), query, 0.0)


class Query(NamedTuple):
  """A query position of the transformer (docs/theory.md §2, §2b).

  Attributes:
    from_stream: (x (..., L, m), x_cls (m,), present (..., L)) -> the query (..., m).
    from_parts: (parts, table, flags, dense, present, x_cls, config) -> the query, from the
      token parts of the stream without forming it (the token-lookup forward pass).
    direct_scores: (heads, m) -> the shape of the direct parameterisation's score map.
    direct_directions: (scores, query (..., m)) -> its score directions (..., H, m).

  Example:
    >>> lj.models.transformer_options.QUERY["last"].direct_scores(2, 5)   # a matrix A_h per head
    (2, 5, 5)
  """

  from_stream: Callable
  from_parts: Callable
  direct_scores: Callable
  direct_directions: Callable


QUERY = {
    # the CLS embedding, one query for every string (docs/theory.md §2)
    "cls": Query(_cls_query_from_stream, _cls_query_from_parts,
                 lambda heads, m: (heads, m),
                 lambda scores, query: jnp.broadcast_to(scores, query.shape[:-1] + scores.shape)),
    # the stream at the last real token (next-token tasks, §2b)
    "last": Query(_last_query_from_stream, _last_query_from_parts,
                  lambda heads, m: (heads, m, m),
                  lambda scores, query: jnp.einsum("...m,hmn->...hn", query, scores)),
}
QUERIES = tuple(QUERY)


# The fixed token embeddings (TransformerConfig.embedding), each declared once: the table of
# its vocab + 1 rows (the last is e_cls) and the widths it allows.


def _one_hot_table(vocab, width, normal_table):
  del normal_table
  return jnp.eye(vocab + 1, width)


def _random_table(vocab, width, normal_table):
  del vocab
  return jnp.asarray(normal_table) / math.sqrt(width)


class Embedding(NamedTuple):
  """A fixed token embedding of the transformer (docs/theory.md §2).

  Attributes:
    table: (vocab, width, normal_table) -> the (vocab + 1, width) table, e_cls its last row;
      normal_table is a standard-normal draw of that shape.
    min_width: vocab -> the smallest width allowed.
    default_width: whether width None is allowed, meaning vocab + 1.

  Example:
    >>> embedding = lj.models.transformer_options.EMBEDDING["one_hot"]
    >>> embedding.min_width(3), embedding.table(2, 3, None).tolist()
    (4, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
  """

  table: Callable
  min_width: Callable
  default_width: bool


EMBEDDING = {
    "one_hot": Embedding(_one_hot_table, lambda vocab: vocab + 1, True),
    "random": Embedding(_random_table, lambda vocab: 1, False),   # E ~ N(0, 1/width)
}
EMBEDDINGS = tuple(EMBEDDING)


# The attention parameterisations (TransformerConfig.attention), each declared once: its
# trainable shapes, whether it starts at zero, and the two maps every forward pass reads.


def _kqv_shapes(config) -> dict[str, tuple[int, ...]]:
  m, k, heads = config.dim, config.head_key_dim, config.heads
  return {"W_Q": (heads, m, k), "W_K": (heads, m, k), "W_V": (heads, m, m),
          "W_O": (heads, m, m), "readout": (m,) if config.outputs == 1 else (m, config.outputs)}


def _kqv_directions(params, config, query):
  # u_h = W_K[h] (q W_Q[h]) / √k, so no (..., H, L, k) keys are formed.
  directions = jnp.einsum("...m,hmk,hnk->...hn", query, params["W_Q"], params["W_K"])
  return directions / math.sqrt(config.head_key_dim)


def _kqv_values(params, config):
  readout = params["readout"].reshape(config.dim, config.outputs)
  return jnp.einsum("hmv,hvn,no->hmo", params["W_V"], params["W_O"], readout)


def _direct_shapes(config) -> dict[str, tuple[int, ...]]:
  scores = QUERY[config.query].direct_scores(config.heads, config.dim)
  return {"scores": scores, "values": (config.heads, config.dim, config.outputs)}


def _direct_directions(params, config, query):
  return QUERY[config.query].direct_directions(params["scores"], query)


def _direct_values(params, config):
  del config
  return params["values"]


class Attention(NamedTuple):
  """An attention parameterisation of the transformer (docs/theory.md §2).

  Attributes:
    shapes: config -> {name: shape} of its trainable parameters.
    from_zero: whether `init` starts it at zero (else at scale · N(0, 1)).
    score_directions: (params, config, query (..., m)) -> u_h per row, (..., H, m): the
      score of position l in head h is x_l · u_h.
    value_maps: (params, config) -> v_h, (H, m, outputs): a head's value at x_l is x_l v_h.

  Example:
    >>> attention = lj.models.transformer_options.ATTENTION["direct"]
    >>> config = lj.models.transformer.TransformerConfig(vocab=2, attention="direct")
    >>> attention.from_zero, attention.shapes(config)
    (True, {'scores': (1, 3), 'values': (1, 3, 1)})
  """

  shapes: Callable
  from_zero: bool
  score_directions: Callable
  value_maps: Callable


ATTENTION = {
    # W_Q, W_K, W_V, W_O, readout from a small random init (zero is a saddle)
    "kqv": Attention(_kqv_shapes, False, _kqv_directions, _kqv_values),
    # per-head score and value maps from zero, the theory's (α, β) analogue
    "direct": Attention(_direct_shapes, True, _direct_directions, _direct_values),
}
ATTENTIONS = tuple(ATTENTION)


__all__ = ["ATTENTION", "ATTENTIONS", "Attention", "EMBEDDING", "EMBEDDINGS", "Embedding",
           "QUERIES", "QUERY", "Query"]
