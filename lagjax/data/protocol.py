"""What a language declares: the protocol that routes and engines read (docs/theory.md §1, §1b).

A language over Σ = {0, …, d-1} is a label y(w) = ±1 on strings w, with a token
law π (tokens iid given the length) and a length law L. Every language declares

- `d`, `pi`, `length`, and `label_tokens(tokens, mask)`: enough for sampling,
  hence for the sampled route and the sampled tasks;
- `positive_rate()`, P(y = +1);
- `describe()`, how it is named in messages;
- `token_roles()`: tokens with equal role and equal π are interchangeable, so
  parameters may be tied on them (token groups, docs/theory.md §3b); the
  default gives every token its own role;
- `margin_letters()`: the letters whose attention margin is reported (may be none).

Exact routes need more structure, which a language declares by also being one
of the capability classes here; routes check for the class and name it when it
is missing (`missing`), so no code branches on a family's name:

- `PresenceLabels`: the label depends only on which tokens occur,
  y(w) = Σ_k coef_k 1{w ⊆ S_k} (the Laplace, lattice and threshold routes);
- `AutomatonLabels`: a deterministic finite automaton decides the label, y = +1 iff
  it accepts w (the transfer route, docs/theory.md §3d).

Users reach all of this as `lj.languages` (lagjax/data/languages.py); a family module
imports this module and lagjax/data/registry.py, never lagjax/data/languages.py.
"""

from __future__ import annotations

import abc

import numpy as np

from lagjax import validation
from lagjax.data.lengths import LengthLaw


class Language(abc.ABC):
  """A language with its token law π and length law L (docs/theory.md §1b; see the module
  docstring).

  Subclasses are frozen dataclasses with at least the fields d, pi (a tuple of
  d probabilities) and length, so a language is hashable and may be a static
  argument of a compiled function.

  Attributes:
    d: alphabet size, Σ = {0, …, d-1}.
    pi: token law π, a tuple of d probabilities.
    length: the length law L (lagjax/data/lengths.py).

  Example:
    >>> lang = lj.occurrence(4)
    >>> isinstance(lang, lj.Language), lang.d, lang.pi
    (True, 4, (0.25, 0.25, 0.25, 0.25))
    >>> lang.describe(), round(float(lang.positive_rate()), 6)
    ('occurrence(d=4, letters=(0,))', 0.5)
    >>> # Padded batches: the mask hides the last 0 of the second string, so it has no 0.
    >>> tokens = jnp.array([[2, 0, 1], [1, 3, 0]])
    >>> mask = jnp.array([[True, True, True], [True, True, False]])
    >>> lang.label_tokens(tokens, mask).tolist()
    [1.0, -1.0]
  """

  d: int
  pi: tuple[float, ...]
  length: LengthLaw

  @property
  def pi_array(self) -> np.ndarray:
    return np.asarray(self.pi, dtype=np.float64)

  def margin_letters(self) -> tuple[int, ...]:
    """The letters L of the attention margin min_{a∈L} α_a - max_{σ∉L} α_σ (docs/theory.md
    §2); none by default."""
    return ()

  @abc.abstractmethod
  def label_tokens(self, tokens, mask):
    """Label ±1 of padded token batches (..., n_max) with a boolean mask (True = real token)."""

  @abc.abstractmethod
  def positive_rate(self) -> float:
    """P(y = +1) under π and the length law."""

  @abc.abstractmethod
  def describe(self) -> str:
    """The language as messages name it, e.g. 'occurrence(d=8, letters=(0,))'."""

  def token_roles(self) -> np.ndarray:
    """Role of every token (d,): tokens with equal role and π are interchangeable."""
    return np.arange(self.d)


class PresenceLabels(abc.ABC):
  """Capability: labels decided by which tokens occur (docs/theory.md §1, §1b).

  y(w) = Σ_k coef_k 1{w ⊆ S_k}, so for any length law P(w ⊆ S) = G(π_S) gives
  exact class balances and the Laplace route's moments; the label of a count
  vector is a function of its support.

  Example:
    >>> lang = lj.any_of(5, (0, 1))
    >>> isinstance(lang, lj.languages.PresenceLabels)
    True
    >>> coefs, supports = lang.inclusion_exclusion()   # y = 1 - 2·1{w ⊆ Σ∖L}
    >>> coefs.tolist(), supports.astype(int).tolist()
    ([1.0, -2.0], [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    >>> lang.positive_if_any
    (0, 1)
  """

  @abc.abstractmethod
  def inclusion_exclusion(self) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients (K,) and support masks (K, d) with y = Σ_k coef_k 1{w ⊆ S_k};
    the first support is Σ itself."""

  @abc.abstractmethod
  def label_counts(self, counts):
    """Label ±1 of count vectors (..., d)."""

  @property
  def positive_if_any(self) -> tuple[int, ...] | None:
    """L when y = +1 iff some token of L occurs (the threshold error route's case), else None."""
    return None


class AutomatonLabels(abc.ABC):
  """Capability: y = +1 iff a complete DFA accepts w (docs/theory.md §1c, §3d).

  Example:
    >>> lang = lj.data.regular_builtins.parity()   # y = +1 iff #1 is odd
    >>> isinstance(lang, lj.languages.AutomatonLabels)
    True
    >>> table, accepting, start = lang.automaton()
    >>> table.tolist(), accepting.tolist(), start
    ([[0, 1], [1, 0]], [False, True], 0)
  """

  @abc.abstractmethod
  def automaton(self) -> tuple[np.ndarray, np.ndarray, int]:
    """(transitions (Q, d) int, accepting (Q,) bool, start): transitions[q, x] is the state
    after reading x in state q; every state is reachable from start."""


class CountLabels(abc.ABC):
  """Capability: P(y = +1 | counts, first token, last token) is known (docs/theory.md §1d, §3g).

  Given its length n, its count vector c and its first and last tokens, a string drawn with
  iid tokens is a uniformly random arrangement of c with those two ends. A language declares
  the probability that such a string is positive, q(c, a, b) ∈ [0, 1]; the count route
  (lagjax/risk/count.py) sums over (n, c, a, b) with it. The counts are taken over the
  blocks of `count_blocks()` (default: one block per token), and a, b are block indices.
  Counting languages (majority, Dyck-1, aⁿbⁿ) and many regular ones (occurrence, parity,
  even pairs) declare it.

  Example:
    A language with d = 2 declaring "more 1s than 0s", ignoring the ends:

    >>> class More1s(lj.languages.CountLabels):
    ...   def label_probability(self, counts, first, last):
    ...     return (counts[:, 1] > counts[:, 0]).astype(float)
    >>> More1s().count_blocks(2)
    ((0,), (1,))
    >>> More1s().label_probability(np.array([[1, 2], [2, 2]]), None, None).tolist()
    [1.0, 0.0]
  """

  def count_blocks(self, d: int) -> tuple[tuple[int, ...], ...]:
    """The token blocks whose counts decide the label, a partition of {0, …, d-1} (one block
    per token by default); any partition of the parameters that refines it may be used."""
    return tuple((token,) for token in range(d))

  @abc.abstractmethod
  def label_probability(self, counts, first, last) -> np.ndarray:
    """q(c, a, b) = P(y = +1 | c, w_1 ∈ block a, w_n ∈ block b) (K,) in [0, 1], for count
    vectors c (K, B) over `count_blocks()` with n = Σc ≥ 1 and block indices a, b (K,) of the
    first and last tokens (a = b when n = 1); numpy in, numpy out."""


def presence_rate(lang: PresenceLabels) -> float:
  """P(y = +1) = (1 + E y) / 2 with E y = Σ_k coef_k G(π_{S_k}) (docs/theory.md §1).

  Args:
    lang: a PresenceLabels language with fields pi and length (§1b).

  Returns:
    P(y = +1), a Python float.

  Example:
    >>> # occurrence of letter 0, d = 4, every string of length 2: 1 - (3/4)² = 7/16
    >>> lang = lj.occurrence(4, length=lj.fixed(2))
    >>> round(float(lj.languages.presence_rate(lang)), 6)
    0.4375
  """
  coefs, supports = lang.inclusion_exclusion()
  mean_label = sum(c * float(lang.length.pgf(float(lang.pi_array[s].sum())))
                   for c, s in zip(coefs, supports))
  return 0.5 * (1.0 + mean_label)


def missing(lang, capability: type, what: str) -> str | None:
  """None if `lang` has the capability, else the one-line reason naming what is missing
  (docs/theory.md §1b): what a route's `supports(lang, loss)` returns.

  Args:
    lang: a language.
    capability: a capability class, PresenceLabels or AutomatonLabels.
    what: what needs the capability, shown in parentheses.

  Returns:
    None, or "⟨describe()⟩ does not declare ⟨capability⟩ (⟨what⟩)".

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.languages.missing(lang, lj.languages.PresenceLabels, "the Laplace route") is None
    True
    >>> lj.languages.missing(lang, lj.languages.AutomatonLabels, "the transfer route")
    'occurrence(d=4, letters=(0,)) does not declare AutomatonLabels (the transfer route)'
  """
  if isinstance(lang, capability):
    return None
  return f"{lang.describe()} does not declare {capability.__name__} ({what})"


def check_language(lang, where: str) -> Language:
  """A Language (docs/theory.md §1b), or a ValueError naming `where` and what a language is.

  Args:
    lang: the object to check.
    where: what needs the language, named in the error.

  Returns:
    `lang` itself.

  Raises:
    ValueError: when `lang` is not a Language.

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.languages.check_language(lang, "population_risk") is lang
    True
    >>> lj.languages.check_language("occurrence", "population_risk")
    Traceback (most recent call last):
    ...
    ValueError: population_risk needs a lj.languages.Language (e.g. lj.occurrence(d)); got str.
  """
  if not isinstance(lang, Language):
    raise ValueError(f"{where} needs a lj.languages.Language (e.g. lj.occurrence(d)); got "
                     f"{type(lang).__name__}.")
  return lang


# Shared checks of a family's fields.


def check_alphabet(d) -> int:
  """The alphabet size d of a family's factory, checked: an integer >= 2 (docs/theory.md §1).

  Args:
    d: the value given.

  Returns:
    d as an int.

  Raises:
    ValueError: naming the field, for anything else.

  Example:
    >>> lj.data.protocol.check_alphabet(4.0)
    4
  """
  return validation.check_int("alphabet size d", d, 2, integral_floats=True)


def check_pi(d: int, pi) -> tuple[float, ...]:
  """The token law π of a family's factory, checked: d probabilities > 0 summing to 1
  (docs/theory.md §1); None is uniform.

  Args:
    d: the alphabet size.
    pi: a sequence of d probabilities, or None.

  Returns:
    π as a tuple of d floats.

  Raises:
    ValueError: for a wrong shape or a value that is not a distribution.

  Example:
    >>> lj.data.protocol.check_pi(4, None)
    (0.25, 0.25, 0.25, 0.25)
  """
  if pi is None:
    return (1.0 / d,) * d
  pi = np.asarray(pi, dtype=np.float64)
  if pi.shape != (d,):
    raise ValueError(f"pi must have shape ({d},) to match d; got shape {pi.shape}.")
  if not np.all(np.isfinite(pi)) or np.any(pi <= 0) or abs(pi.sum() - 1.0) > 1e-12:
    raise ValueError(
        f"pi must be a distribution: finite, every entry > 0, summing to 1 (±1e-12); "
        f"got min {pi.min()!r}, sum {pi.sum()!r}."
    )
  return tuple(float(x) for x in pi)


__all__ = ["AutomatonLabels", "CountLabels", "Language", "PresenceLabels", "check_alphabet",
           "check_language", "check_pi", "missing", "presence_rate"]
