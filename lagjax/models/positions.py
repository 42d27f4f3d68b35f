"""Positional information of the transformer (docs/theory.md §2): a registry (POSITIONAL)
of additive terms on the (..., L, m) stream, each called as term(params, config, mask), with
what the transformer needs to know of each. A new kind is one `Positional` entry."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp


def _no_positions(params, config, mask):
  return 0.0


def _learned_positions(params, config, mask):
  return params["pos"][: mask.shape[-1]]


def _sinusoidal_positions(params, config, mask):
  """PE[p, i] = sin(p ω_i) for even i, cos(p ω_i) for odd i, ω_i = 10000^{-2⌊i/2⌋/m}."""
  m = config.dim
  index = jnp.arange(m)
  frequency = 10000.0 ** (-(2 * (index // 2)) / m)
  angle = jnp.arange(mask.shape[-1])[:, None] * frequency
  return jnp.where(index % 2 == 0, jnp.sin(angle), jnp.cos(angle))


def last_index(present):
  """Index of the last real position of each row: where the last-token query of
  docs/theory.md §2b reads. An empty row gives L - 1; its callers mask such rows.

  Args:
    present: (..., L) bool, True at real positions.

  Returns:
    (...,) int indices.

  Example:
    >>> present = jnp.array([[True, True, False], [False, False, False]])
    >>> lj.models.positions.last_index(present).tolist()
    [1, 2]
  """
  return present.shape[-1] - 1 - jnp.argmax(present[..., ::-1], axis=-1)


def first_last_flags(mask):
  """(..., L, 2) floats: 1 at the first and at the last real token (all 0 in an empty row).
  The "first_last" markers of docs/theory.md §2 and the table indicators 1{i = 1},
  1{i = n} of §2b.

  Args:
    mask: (..., L) bool, True at real tokens.

  Returns:
    (..., L, 2) float64 flags (first, last); a string of length 1 gets both.

  Example:
    >>> flags = lj.models.positions.first_last_flags(jnp.array([True, True, True, False]))
    >>> flags.tolist()
    [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
  """
  first = jnp.argmax(mask, axis=-1)
  last = last_index(mask)
  anything = mask.any(-1, keepdims=True)
  positions = jnp.arange(mask.shape[-1])
  is_first = (positions == first[..., None]) & anything
  is_last = (positions == last[..., None]) & anything
  return jnp.stack([is_first, is_last], axis=-1).astype(jnp.float64)


def _first_last_markers(params, config, mask):
  """One-hots in the last two stream dims at the first and the last real token."""
  zeros = jnp.zeros(mask.shape + (config.dim - 2,))
  return jnp.concatenate([zeros, first_last_flags(mask)], axis=-1)


class Positional(NamedTuple):
  """A kind of positional information of the transformer (docs/theory.md §2).

  Attributes:
    term: (params, config, mask) -> the additive term on the (..., L, m) stream.
    marker_dims: the stream dims it adds for its own flags (2 for first/last markers).
    dense: whether the term is one (L, m) table shared by every row, added by position
      index (so the model depends on token order beyond the first and last token).
    trainable: whether it is a trainable table "pos" of max_len rows.

  Example:
    >>> kind = lj.models.positions.POSITIONAL["first_last"]
    >>> kind.marker_dims, kind.dense, kind.trainable
    (2, False, False)
  """

  term: Callable
  marker_dims: int = 0
  dense: bool = False
  trainable: bool = False


POSITIONAL: dict[str, Positional] = {
    "none": Positional(_no_positions),
    "learned": Positional(_learned_positions, dense=True, trainable=True),
    "sinusoidal": Positional(_sinusoidal_positions, dense=True),
    "first_last": Positional(_first_last_markers, marker_dims=2),
}
