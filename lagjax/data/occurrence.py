"""The occurrence family: labels from the presence of letters (docs/theory.md section 1).

  occurrence(a): y = +1 iff a ∈ w;
  any_of(L) (OR): y = +1 iff some letter of L occurs;
  all_of(L) (AND): y = +1 iff every letter of L occurs.

Every label is a signed sum of support indicators, y(w) = Σ_k coef_k 1{w ⊆ S_k}
(the PresenceLabels capability), so for any length law P(w ⊆ S) = G(π_S) gives
exact class balances. The label is also a function of block counts (CountLabels,
docs/theory.md §1d), which the count route reads for cross-checks. Token roles: for
occurrence and any_of every letter of L plays one role (the label depends only on their
total count), for all_of each letter is its own role; the other tokens share one.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from lagjax.data import protocol, registry
from lagjax.data.lengths import Geometric, LengthLaw, check_law

KINDS = ("occurrence", "any_of", "all_of")


@dataclasses.dataclass(frozen=True)
class OccurrenceLanguage(protocol.Language, protocol.PresenceLabels, protocol.CountLabels):
  """A language of the occurrence family with its token law π and length law (docs/theory.md
  §1, §1b, §1d): a Language that declares PresenceLabels and CountLabels.

  The label is a function of the counts of the count blocks: for occurrence and any_of the
  letters of L form one block and the other tokens another, for all_of each letter of L is
  its own block; blocks are ordered by their smallest token. q(c, a, b) is then 1{c_L > 0}
  (occurrence, any_of) or 1{c_a > 0 for every a ∈ L} (all_of), whatever the ends.

  Attributes:
    kind: one of KINDS.
    d: alphabet size.
    letters: the letters whose presence decides the label.
    pi: token law π, a tuple of d probabilities.
    length: the length law L.

  Example:
    >>> lang = lj.all_of(4, (0, 1))
    >>> lang.kind, lang.letters, lang.token_roles().tolist()   # each letter of L its own role
    ('all_of', (0, 1), [1, 2, 0, 0])
    >>> coefs, supports = lang.inclusion_exclusion()   # 2·Σ_{T⊆L} (-1)^#T 1{w ⊆ Σ∖T} - 1
    >>> coefs.tolist()
    [1.0, -2.0, -2.0, 2.0]
    >>> lang.label_counts(jnp.array([[1.0, 2.0, 0.0, 1.0], [3.0, 0.0, 1.0, 0.0]])).tolist()
    [1.0, -1.0]
    >>> lang.count_blocks(4)   # each letter of L its own block, the others one block
    ((0,), (1,), (2, 3))
    >>> lang.label_probability(np.array([[1, 2, 0], [3, 0, 1]]), np.zeros(2, int),
    ...                        np.zeros(2, int)).tolist()
    [1.0, 0.0]
  """

  kind: str
  d: int
  letters: tuple[int, ...]
  pi: tuple[float, ...]
  length: LengthLaw

  def describe(self) -> str:
    return f"{self.kind}(d={self.d}, letters={self.letters})"

  def margin_letters(self) -> tuple[int, ...]:
    return self.letters

  @property
  def positive_if_any(self) -> tuple[int, ...] | None:
    return self.letters if self.kind in ("occurrence", "any_of") else None

  def token_roles(self) -> np.ndarray:
    role = np.zeros(self.d, np.int64)
    letters = list(self.letters)
    role[letters] = np.arange(1, len(letters) + 1) if self.kind == "all_of" else 1
    return role

  def inclusion_exclusion(self) -> tuple[np.ndarray, np.ndarray]:
    everything = np.ones(self.d, dtype=bool)
    if self.kind in ("occurrence", "any_of"):
      # y = 1 - 2 · 1{w ⊆ Σ∖L}.
      avoid = everything.copy()
      avoid[list(self.letters)] = False
      return np.array([1.0, -2.0]), np.stack([everything, avoid])
    # all_of: 1{all present} = Σ_{T ⊆ L} (-1)^|T| 1{w ⊆ Σ∖T}; y = 2·that - 1.
    coefs, supports = [], []
    for size in range(len(self.letters) + 1):
      for subset in itertools.combinations(self.letters, size):
        support = everything.copy()
        support[list(subset)] = False
        coefs.append(2.0 * (-1.0) ** size)
        supports.append(support)
    coefs[0] -= 1.0
    return np.array(coefs), np.stack(supports)

  def positive_rate(self) -> float:
    return protocol.presence_rate(self)

  def count_blocks(self, d: int) -> tuple[tuple[int, ...], ...]:
    others = tuple(x for x in range(d) if x not in self.letters)
    if self.kind == "all_of":
      letter_blocks = [(a,) for a in self.letters]
    else:
      letter_blocks = [tuple(sorted(self.letters))]
    return tuple(sorted(letter_blocks + [others], key=min))

  def label_probability(self, counts, first, last) -> np.ndarray:
    del first, last   # presence does not depend on the order
    blocks = self.count_blocks(self.d)
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != len(blocks):
      raise ValueError(f"counts must have shape (K, {len(blocks)}) (one column per count "
                       f"block, {blocks}); got shape {counts.shape}.")
    present = counts[:, [i for i, block in enumerate(blocks) if block[0] in self.letters]] > 0
    positive = present.all(axis=1) if self.kind == "all_of" else present.any(axis=1)
    return positive.astype(np.float64)

  def _label(self, present):
    positive = jnp.all(present, axis=-1) if self.kind == "all_of" else jnp.any(present, axis=-1)
    return jnp.where(positive, 1.0, -1.0)

  def label_counts(self, counts):
    return self._label(jnp.asarray(counts)[..., list(self.letters)] > 0)

  def label_tokens(self, tokens, mask):
    tokens = jnp.asarray(tokens)
    return self._label(jnp.stack([jnp.any((tokens == a) & mask, axis=-1) for a in self.letters],
                                 axis=-1))


def _check_letters(d: int, letters: Sequence[int]) -> tuple[int, ...]:
  letters = tuple(int(a) for a in letters)
  if not letters:
    raise ValueError("letters must name at least one letter in {0, …, d-1}.")
  bad = [a for a in letters if not 0 <= a < d]
  if bad:
    raise ValueError(f"letters must lie in {{0, …, {d - 1}}} (d = {d}); got {bad}.")
  if len(set(letters)) != len(letters):
    raise ValueError(f"letters must not repeat; got {letters}.")
  if len(letters) == d:
    raise ValueError(f"letters must leave at least one other letter (d = {d}); got {letters}.")
  return letters


def balanced_geometric(kind: str, d: int, letters, pi=None) -> Geometric:
  """The geometric law with P(y = +1) = 1/2 (docs/theory.md section 1).

  For occurrence/any_of, P(y = -1) = G(z) with z = π_{Σ∖L}, and G(z) = 1/2 solves
  to p = (1 - z)/z. For all_of, the root in p is bracketed and bisected.

  Args:
    kind: one of KINDS.
    d: alphabet size.
    letters: the letters L.
    pi: token law π (d,), uniform when None.

  Returns:
    Geometric(p) with P(y = +1) = 1/2.

  Raises:
    ValueError: when no geometric law balances the language (for occurrence/any_of, when
      z ≤ 1/2).

  Example:
    >>> # occurrence at d = 5: z = 4/5, so p = (1 - z)/z = 1/4 (mean length d - 1)
    >>> law = lj.data.occurrence.balanced_geometric("occurrence", 5, (0,))
    >>> round(law.p, 6)
    0.25
    >>> law = lj.data.occurrence.balanced_geometric("all_of", 4, (0, 1))
    >>> round(float(lj.all_of(4, (0, 1), length=law).positive_rate()), 6)
    0.5
  """
  d = protocol.check_alphabet(d)
  letters = _check_letters(d, letters)
  pi = protocol.check_pi(d, pi)
  if kind in ("occurrence", "any_of"):
    z = 1.0 - sum(pi[a] for a in letters)
    if z <= 0.5:
      raise ValueError(
          f"no geometric length law balances {kind}{letters}: P(y=-1) < π(Σ∖L) = {z:.4g} ≤ 1/2."
      )
    return Geometric((1.0 - z) / z)

  def positive_rate(p):
    return OccurrenceLanguage(kind, d, letters, pi, Geometric(p)).positive_rate() - 0.5

  lo, hi = 1e-12, 1.0 - 1e-12
  if positive_rate(lo) * positive_rate(hi) > 0:
    raise ValueError(f"no geometric length law balances {kind}{letters}.")
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if positive_rate(lo) * positive_rate(mid) <= 0:
      hi = mid
    else:
      lo = mid
    if hi - lo < 1e-16:
      break
  return Geometric(0.5 * (lo + hi))


def _make(kind: str, d, letters, pi, length) -> OccurrenceLanguage:
  d = protocol.check_alphabet(d)
  letters = _check_letters(d, letters)
  pi = protocol.check_pi(d, pi)
  length = balanced_geometric(kind, d, letters, pi) if length is None else length
  return OccurrenceLanguage(kind, d, letters, pi, check_law(length, f"lj.{kind}"))


def occurrence(d: int, letter: int = 0, *, pi=None, length=None) -> OccurrenceLanguage:
  """The occurrence language (docs/theory.md §1): y = +1 iff `letter` occurs in w; balanced
  geometric length by default.

  Args:
    d: alphabet size, at least 2.
    letter: the letter a.
    pi: token law π (d,), uniform when None.
    length: the length law; None gives balanced_geometric, p = (1 - z)/z with z = 1 - π_a
      (p = 1/(d-1) under uniform π).

  Returns:
    An OccurrenceLanguage.

  Example:
    >>> lang = lj.occurrence(5)
    >>> lang.describe(), round(lang.length.p, 6)   # p = 1/(d-1)
    ('occurrence(d=5, letters=(0,))', 0.25)
    >>> round(float(lang.positive_rate()), 6)
    0.5
  """
  return _make("occurrence", d, (letter,), pi, length)


def any_of(d: int, letters: Sequence[int], *, pi=None, length=None) -> OccurrenceLanguage:
  """OR (docs/theory.md §1): y = +1 iff some letter of `letters` occurs; balanced geometric
  length by default.

  Args:
    d: alphabet size, at least 2.
    letters: the letters L (distinct, leaving at least one other letter).
    pi: token law π (d,), uniform when None.
    length: the length law; None gives balanced_geometric, p = (1 - z)/z with z = π_{Σ∖L}
      (p = 2/(d-2) for two letters under uniform π).

  Returns:
    An OccurrenceLanguage.

  Example:
    >>> lang = lj.any_of(6, (0, 1))
    >>> round(lang.length.p, 6), round(float(lang.positive_rate()), 6)   # p = 2/(d-2)
    (0.5, 0.5)
    >>> lang.token_roles().tolist()   # the label depends only on the letters' total count
    [1, 1, 0, 0, 0, 0]
  """
  return _make("any_of", d, letters, pi, length)


def all_of(d: int, letters: Sequence[int], *, pi=None, length=None) -> OccurrenceLanguage:
  """AND (docs/theory.md §1): y = +1 iff every letter of `letters` occurs; balanced geometric
  length by default (bisected).

  Args:
    d: alphabet size, at least 2.
    letters: the letters L (distinct, leaving at least one other letter).
    pi: token law π (d,), uniform when None.
    length: the length law; None gives balanced_geometric.

  Returns:
    An OccurrenceLanguage.

  Example:
    >>> # two letters at d = 4: 1 - 2G(3/4) + G(1/2) = 1/2 gives 3p² + 6p - 1 = 0
    >>> lang = lj.all_of(4, (0, 1))
    >>> round(lang.length.p, 6), round(2 / 3**0.5 - 1, 6)
    (0.154701, 0.154701)
  """
  return _make("all_of", d, letters, pi, length)


# make(name, d, letters, ...) for every kind; occurrence takes the first letter.
registry.register("occurrence", lambda d, letters=(0,), **options: occurrence(
    d, tuple(letters)[0], **options))
registry.register("any_of", lambda d, letters=(0, 1), **options: any_of(d, letters, **options))
registry.register("all_of", lambda d, letters=(0, 1), **options: all_of(d, letters, **options))

__all__ = ["KINDS", "OccurrenceLanguage", "all_of", "any_of", "balanced_geometric", "occurrence"]
