"""Token groups: partitions of Σ into interchangeable tokens (docs/theory.md section 3b).

Tokens in one group share α and β and play the same role for the language and
for π, so f depends only on the group counts. A "grouped" parameter has one
entry per group; `expand` maps it back to one entry per token.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagjax.data import protocol


@dataclasses.dataclass(frozen=True)
class Partition:
  """A partition of {0, …, d-1} into token groups (docs/theory.md §1a, §3b): blocks of
  interchangeable tokens, each a sorted tuple of tokens.

  Attributes:
    blocks: the token groups g = 0, …, G-1, each a sorted tuple of tokens.

  Example:
    >>> part = lj.partition.Partition(((0,), (1, 2, 3)))
    >>> part.d, part.num_groups, part.sizes.tolist(), part.index.tolist()
    (4, 2, [1.0, 3.0], [0, 1, 1, 1])
    >>> part.masses([0.25, 0.25, 0.25, 0.25]).tolist()   # π_g
    [0.25, 0.75]
    >>> part.expand(np.array([2.0, -1.0])).tolist()      # one entry per group -> per token
    [2.0, -1.0, -1.0, -1.0]
  """

  blocks: tuple[tuple[int, ...], ...]

  @property
  def d(self) -> int:
    return sum(len(b) for b in self.blocks)

  @property
  def num_groups(self) -> int:
    return len(self.blocks)

  @property
  def sizes(self) -> np.ndarray:
    """Group sizes k_g (G,)."""
    return np.array([len(b) for b in self.blocks], dtype=np.float64)

  def metric(self, cls: bool = False) -> np.ndarray:
    """Token-group sizes k_g, with the CLS token as one more group of size 1 when cls: the
    per-token metric D = diag(k) of docs/theory.md §5 (G[+1],)."""
    return np.concatenate([self.sizes, [1.0]]) if cls else self.sizes

  @property
  def index(self) -> np.ndarray:
    """Group id of every token (d,)."""
    index = np.empty(self.d, dtype=np.int64)
    for g, block in enumerate(self.blocks):
      index[list(block)] = g
    return index

  def masses(self, pi) -> np.ndarray:
    """π_g = Σ_{σ∈g} π_σ (G,)."""
    pi = np.asarray(pi, dtype=np.float64)
    return np.array([pi[list(b)].sum() for b in self.blocks])

  def expand(self, grouped):
    """Per-group values (..., G) -> per-token values (..., d)."""
    return grouped[..., self.index]

  def group(self, per_token):
    """Per-token values that are constant on blocks (..., d) -> per-group values (..., G)."""
    return per_token[..., np.array([b[0] for b in self.blocks])]

  def support_masses(self, pi, supports: np.ndarray) -> np.ndarray:
    """(K, G) matrix of π_g 1{g ⊆ S_k}; every block must lie inside or outside each S_k."""
    member = np.stack([supports[:, list(b)].all(axis=1) for b in self.blocks], axis=1)
    touches = np.stack([supports[:, list(b)].any(axis=1) for b in self.blocks], axis=1)
    if np.any(member != touches):
      raise ValueError("partition splits a support set of the language; refine it first.")
    return member * self.masses(pi)[None, :]


def singletons(d: int) -> Partition:
  """The finest partition: every token its own token group, so nothing is tied (§1a).

  Args:
    d: alphabet size.

  Returns:
    The Partition of d one-token blocks.

  Example:
    >>> lj.partition.singletons(3).blocks
    ((0,), (1,), (2,))
  """
  return Partition(tuple((s,) for s in range(d)))


def _blocks_from_keys(keys) -> Partition:
  blocks: dict = {}
  for token, key in enumerate(keys):
    blocks.setdefault(key, []).append(token)
  return Partition(tuple(tuple(b) for b in sorted(blocks.values())))


def first_tokens(index: np.ndarray, num_groups: int) -> np.ndarray:
  """The first token of each group id in `index` (d,), in O(d) without sorting (§1a).

  Args:
    index: the token group id of every token (d,), every id in {0, …, num_groups-1}
      present.
    num_groups: G.

  Returns:
    The smallest token of every group (G,), int.

  Example:
    >>> lj.partition.first_tokens(np.array([1, 0, 1, 0, 2]), 3).tolist()
    [1, 0, 4]
  """
  first = np.empty(num_groups, np.int64)
  first[index[::-1]] = np.arange(index.size - 1, -1, -1)  # the last write is the first token
  return first


def token_group_ids(lang: protocol.Language) -> np.ndarray:
  """Token group of every token (d,) for `of_language`, token groups numbered by their first token.

  Tokens share a token group when they have the same role (Language.token_roles) and
  equal π (docs/theory.md §1a, §1b). Vectorized and O(d) for uniform π (d reaches 10^5 in
  the regime tables).

  Args:
    lang: the language.

  Returns:
    The token group id of every token (d,), int, in {0, …, G-1}.

  Example:
    >>> lj.partition.token_group_ids(lj.any_of(5, (0, 1))).tolist()   # roles L and Σ∖L
    [0, 0, 1, 1, 1]
    >>> lang = lj.any_of(5, (0, 1), pi=(0.1, 0.3, 0.2, 0.2, 0.2))   # unequal π splits L
    >>> lj.partition.token_group_ids(lang).tolist()
    [0, 1, 2, 2, 2]
  """
  role = np.asarray(lang.token_roles(), np.int64)
  pi = lang.pi_array
  pi_class = (np.zeros(lang.d, np.int64) if pi.min() == pi.max() else
              np.unique(pi, return_inverse=True)[1].reshape(-1))
  key = pi_class * (role.max() + 1) + role
  present = np.zeros(key.max() + 1, bool)
  present[key] = True
  compact = np.cumsum(present) - 1  # keys that occur, numbered 0..G-1
  key = compact[key]
  first = first_tokens(key, int(present.sum()))
  rank = np.empty_like(first)
  rank[np.argsort(first)] = np.arange(first.size)
  return rank[key]


def of_language(lang: protocol.Language) -> Partition:
  """Coarsest partition into token groups that the language declares interchangeable.

  Tokens are merged when they have equal π and the same role (Language.token_roles:
  for the occurrence family, every letter of an occurrence/any_of language plays
  one role, since the label depends only on their total count; docs/theory.md §1a).

  Args:
    lang: the language.

  Returns:
    The Partition, its blocks numbered by their first token.

  Example:
    >>> lj.partition.of_language(lj.occurrence(5)).blocks   # a, and the d-1 others
    ((0,), (1, 2, 3, 4))
  """
  index = token_group_ids(lang)
  tokens = np.split(np.argsort(index, kind="stable"), np.cumsum(np.bincount(index))[:-1])
  return Partition(tuple(tuple(block.tolist()) for block in tokens))


def of_params(lang: protocol.Language, params) -> Partition:
  """Coarsest refinement of `of_language(lang)` on which every per-token table is constant
  (α and β; the position tables and, under the last query, α's rows and columns too;
  docs/theory.md §1a, §3b).

  Args:
    lang: the language.
    params: per-token parameters {"alpha": (d,), "beta": (d,), …} (§2, §2b).

  Returns:
    The Partition, its blocks numbered by their first token.

  Example:
    >>> params = {"alpha": np.array([1.0, 0.0, 0.0, 0.0, 0.0]),
    ...           "beta": np.array([1.0, -1.0, -1.0, 0.5, 0.5])}
    >>> lj.partition.of_params(lj.occurrence(5), params).blocks
    ((0,), (1, 2), (3, 4))
  """
  base = token_group_ids(lang)  # = of_language(lang).index, without building the blocks
  alpha = np.asarray(params["alpha"], dtype=np.float64)
  beta = np.asarray(params["beta"], dtype=np.float64)
  if alpha.ndim == 1 and "alpha_first" not in params:
    return _blocks_from_keys([(int(base[s]), alpha[s], beta[s]) for s in range(lang.d)])
  tables = [np.asarray(value, dtype=np.float64) for value in params.values()]
  return _blocks_from_keys([(int(base[s]),) + tuple(
      np.take(table, s, axis=axis).tobytes() for table in tables for axis in range(table.ndim))
      for s in range(lang.d)])
