"""The entry table: the score and value of every kind of position, per layout (docs/theory.md §2b).

Under position tables a first, last or only position adds its own α and β, and under the
last-token query the scores are the row of the last token's group. The transfer route
(§3d), the automaton error route and the quadrature's grid sizing read the params of every
layout through this table.
"""

from __future__ import annotations

import jax.numpy as jnp

from lagjax.models import direct


def entry_table(params):
  """Scores and values of every kind of position (docs/theory.md §3d), one row per
  last-token group c (a single row under the CLS query).

  A first (α + α^F, β + β^F), last (α + α^L, β + β^L) or only (both added) position has
  its own entry; under the last query the scores are the row α[c, ·] of the last group c.

  Args:
    params: grouped params of any layout (§2b).

  Returns:
    scores, values (C, E) with entries [middle, first, last, both] per token group
    (middle only without position tables) and the CLS token last; and last_groups (C, G),
    the token groups the last token may take in that row.

  Example:
    >>> params = lj.init_params(2, cls=True, positions="first_last")
    >>> params["alpha_first"] = jnp.array([1.0, 2.0])
    >>> scores, values, last_groups = lj.risk.entries.entry_table(params)
    >>> scores.tolist()  # [middle, first, last, both] × 2 groups, then CLS
    [[0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0, 0.0]]
    >>> lj.risk.entries.entry_table(lj.init_params(2, query="last"))[0].shape
    (2, 2)
  """
  beta = params["beta"]
  groups = beta.shape[0]
  last_query = jnp.ndim(params["alpha"]) == 2
  alpha = params["alpha"] if last_query else params["alpha"][None]
  rows = alpha.shape[0]
  scores, values = alpha, jnp.broadcast_to(beta, (rows, groups))
  if direct.has_positions(params):
    first, last = params["alpha_first"], params["alpha_last"]
    beta_first, beta_last = params["beta_first"], params["beta_last"]
    scores = jnp.concatenate([alpha, alpha + first, alpha + last, alpha + first + last], -1)
    values = jnp.concatenate([values, values + beta_first, values + beta_last,
                              values + beta_first + beta_last], -1)
  if direct.has_cls(params):
    scores = jnp.concatenate([scores, jnp.broadcast_to(params["alpha_cls"], (rows,))[:, None]],
                             -1)
    values = jnp.concatenate([values, jnp.broadcast_to(params["beta_cls"], (rows, 1))], -1)
  last_groups = jnp.eye(groups) if last_query else jnp.ones((1, groups))
  return scores, values, last_groups


def entry_kinds(weights, groups: int, positions: bool):
  """entry_table's last axis as (..., 4, G): [middle, first, last, both] per token group;
  without position tables all four kinds are the middle entries (docs/theory.md §3d).

  Args:
    weights: an array whose last axis is entry_table's (E,).
    groups: G, the number of token groups.
    positions: whether the params have position tables.

  Returns:
    The entries as (..., 4, G).

  Example:
    >>> weights = jnp.arange(9.0)[None]  # 2 groups with position tables, then CLS
    >>> lj.risk.entries.entry_kinds(weights, 2, True)[0].tolist()
    [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    >>> lj.risk.entries.entry_kinds(weights[:, :2], 2, False)[0].tolist()
    [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]
  """
  if positions:
    return weights[..., :4 * groups].reshape(weights.shape[:-1] + (4, groups))
  return jnp.broadcast_to(weights[..., None, :groups], weights.shape[:-1] + (4, groups))


__all__ = ["entry_kinds", "entry_table"]
