"""Built-in regular languages (docs/theory.md section 1c), each a `regular.regular` automaton.

- ``parity``: #1 odd (Chomsky-hierarchy parity_check, FLaRe; Bhattamishra et al. 2020
  use the complement);
- ``first``: the first symbol is 1 (FLaRe, Butoi et al. 2025);
- ``even_pairs``: #01 + #10 even, i.e. first symbol = last symbol (Chomsky-hierarchy suite);
- ``tomita(k)``: Tomita grammars 1-7 (Tomita 1982; tech-srl/lstar_extraction, with
  Tomita 6 as #0 − #1 ≡ 0 mod 3);
- ``dyck(depth)``: Dyck-1 of depth at most `depth`, D_n (Bhattamishra et al. 2020);
- ``cycle_navigation``: final position 0 on a cycle of k (Chomsky-hierarchy suite, binary
  form);
- ``mod_count``: #letter ≡ r (mod m) (parity and Tomita 5/6 generalised);
- ``contains``: a word occurs as a contiguous substring (prefix/KMP automaton);
- ``occurrence_automaton``, ``any_of_automaton``, ``all_of_automaton``: the occurrence
  family of lagjax/data/occurrence.py as automata, for cross-checks of the transfer route
  against the Laplace route.

The alphabet is {0, 1} unless a docstring says otherwise. Every factory takes pi and
length (keyword-only) and passes them to `regular.regular`; with length None a language
that a geometric law can balance gets the balanced geometric law, the others get
Geometric(0.1) (mean length 10), as each docstring says. Lengths start at 1, so the
empty string never occurs. Each family is registered under its name (lj.languages.make).

The languages decided by counts and ends also declare CountLabels (docs/theory.md §1d), for
cross-checks of the count route: parity, mod_count, Tomita 5 and 6 and cycle navigation
(their letters commute: CommutingAutomatonLanguage) and even pairs (w_1 = w_n).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import occurrence, protocol, registry, regular

# Minimal complete automata of the Tomita grammars: (transitions, accepting); -1 is a
# missing transition (completed with a rejecting sink).
_TOMITA = {
    # 1*.
    1: ([[-1, 0]], [0]),
    # (10)*: state 1 has read a 1 and waits for its 0.
    2: ([[-1, 1], [0, -1]], [0]),
    # No maximal odd run of 1s later followed by a maximal odd run of 0s. States: clean,
    # in an odd run of 1s, then (after such a run) in an odd run of 0s / anything else.
    3: ([[0, 1], [2, 0], [3, -1], [2, 3]], [0, 1, 3]),
    # No 000: the state counts the trailing 0s.
    4: ([[1, 0], [2, 0], [-1, 0]], [0, 1, 2]),
    # #0 and #1 even: the state is (#0 mod 2) + 2 (#1 mod 2).
    5: ([[1, 2], [0, 3], [3, 0], [2, 1]], [0]),
    # #0 − #1 ≡ 0 (mod 3): the state is that difference mod 3.
    6: ([[1, 2], [2, 0], [0, 1]], [0]),
    # 0*1*0*1*: the state is the block being read.
    7: ([[0, 1], [2, 1], [2, 3], [-1, 3]], [0, 1, 2, 3]),
}
_TOMITA_BALANCED = (3, 4, 7)   # every length-1 string is a member and long ones are not
_TOMITA_COMMUTING = (5, 6)     # decided by the counts: they declare CountLabels


@dataclasses.dataclass(frozen=True)
class CommutingAutomatonLanguage(regular.RegularLanguage, protocol.CountLabels):
  """A regular language whose letters commute (δ(δ(q, x), y) = δ(δ(q, y), x)), so the state
  after w, hence the label, depends only on the counts (docs/theory.md §1c, §1d): a
  RegularLanguage that also declares CountLabels. Parity, mod_count, Tomita 5 and 6 and
  cycle navigation are such languages.

  The count blocks are the tokens with equal columns of the table (ordered by their smallest
  token); q(c, a, b) = 1{δ*(start, c) accepts}, whatever the ends, where δ* applies each
  block's map c_β times (by repeated squaring of the map).

  Attributes:
    name, d, table, accept, start_state, pi, length: those of RegularLanguage.

  Example:
    >>> lang = lj.data.regular_builtins.mod_count(0, 3, 1, d=3)   # #0 ≡ 1 (mod 3)
    >>> lang.count_blocks(3)   # tokens 1 and 2 leave the state alone: one block
    ((0,), (1, 2))
    >>> lang.label_probability(np.array([[1, 5], [3, 0], [7, 2]]), np.zeros(3, int),
    ...                        np.zeros(3, int)).tolist()
    [1.0, 0.0, 1.0]
  """

  def count_blocks(self, d: int) -> tuple[tuple[int, ...], ...]:
    blocks: dict = {}
    for x in range(d):
      blocks.setdefault(tuple(row[x] for row in self.table), []).append(x)
    return tuple(tuple(block) for block in blocks.values())

  def label_probability(self, counts, first, last) -> np.ndarray:
    del first, last   # the letters commute: the order does not matter
    blocks = self.count_blocks(self.d)
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != len(blocks):
      raise ValueError(f"counts must have shape (K, {len(blocks)}) (one column per count "
                       f"block, {blocks}); got shape {counts.shape}.")
    counts = counts.astype(np.int64)
    table = np.asarray(self.table, np.int64)
    state = np.full(counts.shape[0], self.start_state, np.int64)
    for column, block in enumerate(blocks):
      power, remaining = table[:, block[0]], counts[:, column].copy()
      while np.any(remaining > 0):   # state <- δ_x^c(state), bit by bit of c
        state = np.where(remaining & 1, power[state], state)
        power, remaining = power[power], remaining >> 1
    return np.asarray(self.accept, bool)[state].astype(np.float64)


def _counted(lang: regular.RegularLanguage) -> CommutingAutomatonLanguage:
  """`lang` as a CommutingAutomatonLanguage (same fields), after checking that its letters
  commute."""
  table = np.asarray(lang.table)
  for x in range(lang.d):
    for y in range(x):
      if not np.array_equal(table[table[:, x], y], table[table[:, y], x]):
        raise AssertionError(f"{lang.describe()}: letters {y} and {x} do not commute.")
  return CommutingAutomatonLanguage(**{field.name: getattr(lang, field.name)
                                       for field in dataclasses.fields(lang)})


def _check_range(name: str, value, low: int, high: int) -> int:
  """An integer in {low, …, high}."""
  if not (validation.is_int(value) and low <= value <= high):
    raise ValueError(f"{name} must be an integer in {{{low}, …, {high}}}; got {value!r}.")
  return int(value)


def parity(*, pi=None, length=None) -> regular.RegularLanguage:
  """y = +1 iff the number of 1s is odd (2 states, not star-free).

  Source: the Chomsky-hierarchy suite's parity_check (class = #1 mod 2, so class 1 is
  "odd") and FLaRe's parity (odd number of 1s); Bhattamishra et al. (2020) accept the
  complement (#1 even), which is the same task with y negated. Length: Geometric(0.1)
  (balance=False): under uniform π every length gives P(y = +1) = ½ exactly, under any
  other π no geometric law does (docs/theory.md §1c).

  Args:
    pi, length: the token law π (2,) and the length law; None: uniform, Geometric(0.1).

  Returns:
    The RegularLanguage named "parity".

  Example:
    >>> lang = lj.data.regular_builtins.parity()
    >>> lang.describe(), lang.length, round(lang.positive_rate(), 6)
    ('parity(d=2, states=2)', Geometric(p=0.1), 0.5)
    >>> # π_1 = 1/4: (1 - G(1 - 2π_1))/2 = (1 - G(½))/2 = (1 - 1/11)/2 = 5/11
    >>> round(lj.data.regular_builtins.parity(pi=(0.75, 0.25)).positive_rate(), 6)
    0.454545
  """
  return _counted(regular.regular([[0, 1], [1, 0]], [1], pi=pi, length=length, balance=False,
                                  name="parity"))


def first(*, pi=None, length=None) -> regular.RegularLanguage:
  """y = +1 iff the first symbol is 1 (3 states with the sink, star-free).

  Source: FLaRe (Butoi et al. 2025), "first". Length: Geometric(0.1) (balance=False):
  P(y = +1) = π_1 under every length law (docs/theory.md §1c).

  Args:
    pi, length: the token law π (2,) and the length law; None: uniform, Geometric(0.1).

  Returns:
    The RegularLanguage named "first".

  Example:
    >>> lang = lj.data.regular_builtins.first(pi=(0.3, 0.7))
    >>> lang.describe(), round(lang.positive_rate(), 6)   # π_1
    ('first(d=2, states=3)', 0.7)
  """
  return regular.regular([[-1, 1], [1, 1]], [1], pi=pi, length=length, balance=False,
                         name="first")


def even_pairs_label(tokens, mask):
  """y = +1 iff the number of adjacent unequal pairs in the unpadded string is even, that is
  iff w_1 = w_n: every change of letter flips the current letter (docs/theory.md §1c, §7).

  Args:
    tokens: (..., L) tokens in {0, 1}, real tokens first.
    mask: (..., L) bool, True at real tokens.

  Returns:
    (...,) float labels ±1.

  Example:
    >>> tokens = jnp.array([[0, 1, 1, 0], [0, 1, 1, 0]])
    >>> mask = jnp.array([[True, True, True, True], [True, True, True, False]])
    >>> lj.data.regular_builtins.even_pairs_label(tokens, mask).tolist()  # 0110 and 011
    [1.0, -1.0]
  """
  changes = (tokens[..., 1:] != tokens[..., :-1]) & mask[..., 1:]
  return jnp.where(jnp.sum(changes, axis=-1) % 2 == 0, 1.0, -1.0)


@dataclasses.dataclass(frozen=True)
class EvenPairsLanguage(regular.RegularLanguage, protocol.CountLabels):
  """Even pairs (see `even_pairs`): its automaton for the exact routes, and labels by the
  closed form w_1 = w_n (even_pairs_label), one comparison per string instead of a scan of
  the automaton over it; both give the same labels (docs/theory.md §1c). The label is a
  function of the ends alone, so it declares CountLabels with q(c, a, b) = 1{a = b}
  (docs/theory.md §1d).

  Attributes:
    name, d, table, accept, start_state, pi, length: those of RegularLanguage.

  Example:
    >>> lang = lj.data.regular_builtins.even_pairs()
    >>> tokens, mask = jnp.array([[1, 0, 1]]), jnp.array([[True, True, True]])
    >>> lang.label_tokens(tokens, mask).tolist(), lj.data.regular.read_labels(
    ...     jnp.asarray(lang.table), jnp.asarray(lang.accept), 0, tokens, mask).tolist()
    ([1.0], [1.0])
    >>> lang.label_probability(np.array([[2, 1], [2, 1]]), np.array([0, 1]),
    ...                        np.array([0, 0])).tolist()
    [1.0, 0.0]
  """

  def label_tokens(self, tokens, mask):
    return even_pairs_label(jnp.asarray(tokens), jnp.asarray(mask, bool))

  def label_probability(self, counts, first, last) -> np.ndarray:
    del counts   # w_1 = w_n decides
    return (np.asarray(first) == np.asarray(last)).astype(np.float64)


def even_pairs(*, pi=None, length=None) -> EvenPairsLanguage:
  """y = +1 iff #01 + #10 (adjacent unequal pairs) is even, i.e. the first symbol equals
  the last (5 states, star-free). The one definition of even pairs: the task
  (lagjax/tasks/even_pairs.py) builds on it with its own length law.

  Source: the Chomsky-hierarchy suite's even_pairs (class = parity of #01 + #10); FLaRe.
  Length: Geometric(0.1) (balance=False): every length-1 string is a member and half of
  the longer ones under uniform π, so P(y = +1) = ½ + P(n = 1)/2 > ½ for every law
  (docs/theory.md §1c).

  Args:
    pi: token law π (2,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The EvenPairsLanguage, a RegularLanguage.

  Example:
    >>> lang = lj.data.regular_builtins.even_pairs()
    >>> lang.num_states, round(lang.positive_rate(), 6)   # ½ + p/2 with p = 0.1
    (5, 0.55)
  """
  # States: start, then (first, last) = (0, 0), (0, 1), (1, 1), (1, 0).
  table = [[1, 3], [1, 2], [1, 2], [4, 3], [4, 3]]
  lang = regular.regular(table, [0, 1, 3], pi=pi, length=length, balance=False,
                         name="even_pairs")
  return EvenPairsLanguage(**{field.name: getattr(lang, field.name)
                              for field in dataclasses.fields(lang)})


def tomita(k: int, *, pi=None, length=None) -> regular.RegularLanguage:
  """Tomita grammar k ∈ {1, …, 7} over {0, 1} (docs/theory.md §1c).

  - 1: ``1*``; 2 states, star-free.
  - 2: ``(10)*``; 3 states, star-free.
  - 3: no maximal odd-length run of 1s that is later followed by a maximal odd-length
    run of 0s (a trailing run counts as maximal); 5 states, not star-free.
  - 4: no substring 000; 4 states, star-free.
  - 5: #0 even and #1 even; 4 states, not star-free.
  - 6: #0 − #1 ≡ 0 (mod 3); 3 states, not star-free.
  - 7: ``0*1*0*1*``; 5 states, star-free.

  Source: Tomita (1982); the definitions of tech-srl/lstar_extraction, Tomita_Grammars.py,
  with Tomita 6 corrected there from mod 5 to mod 3. Length: the balanced geometric law for
  3, 4 and 7 (all length-1 strings are members, long strings are not), Geometric(0.1) for
  1, 2, 5 and 6, which no geometric law balances under uniform π (P(y = +1) < ½ for
  every p).

  Args:
    k: the grammar, 1 to 7.
    pi: token law π (2,), uniform when None.
    length: the length law; None gives the default above.

  Returns:
    The RegularLanguage, named "tomita[k=⟨k⟩]".

  Example:
    >>> lang = lj.data.regular_builtins.tomita(6)   # T is circulant: (1 + 2G(-½))/3 = 9/29
    >>> lang.describe(), round(lang.positive_rate(), 6), round(9 / 29, 6)
    ('tomita[k=6](d=2, states=3)', 0.310345, 0.310345)
  """
  k = _check_range("tomita k", k, 1, 7)
  table, accepting = _TOMITA[k]
  lang = regular.regular(table, accepting, pi=pi, length=length,
                         balance=k in _TOMITA_BALANCED, name=f"tomita[k={k}]")
  return _counted(lang) if k in _TOMITA_COMMUTING else lang


def dyck(depth: int, *, pi=None, length=None) -> regular.RegularLanguage:
  """Dyck-1 of depth at most `depth`: 0 = '(' and 1 = ')'; y = +1 iff w is balanced and
  never nested deeper than `depth` (depth + 2 states with the sink, star-free).

  Source: D_n = (a D_{n−1} b)* of Bhattamishra, Ahuja & Goyal (2020). Strings have length
  ≥ 1, so the empty member never occurs. Length: Geometric(0.1) (balance=False): odd
  lengths are never members and under uniform π P(y = +1) ≤ ¼ for every length law
  (docs/theory.md §1c).

  Args:
    depth: the largest depth allowed, at least 1.
    pi: token law π (2,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The RegularLanguage, named "dyck[depth=⟨depth⟩]".

  Example:
    >>> lang = lj.data.regular_builtins.dyck(1)   # (01)*: p(1-p)/(4 - (1-p)²) at p = 0.1
    >>> lang.describe(), round(lang.positive_rate(), 6), round(0.09 / (4 - 0.81), 6)
    ('dyck[depth=1](d=2, states=3)', 0.028213, 0.028213)
  """
  depth = validation.check_int("dyck depth", depth, 1)
  # State s < depth + 1 is the current depth; -1 (the sink) is a ')' at depth 0 or a '('
  # at the maximal depth.
  table = [[s + 1 if s < depth else -1, s - 1 if s > 0 else -1] for s in range(depth + 1)]
  return regular.regular(table, [0], pi=pi, length=length, balance=False,
                         name=f"dyck[depth={depth}]")


def cycle_navigation(k: int = 5, *, pi=None, length=None) -> regular.RegularLanguage:
  """Alphabet {0, 1, 2}: token t moves by t − 1 on a cycle of k positions, from 0;
  y = +1 iff the final position is 0 (k states, not star-free).

  Source: the Chomsky-hierarchy suite's cycle_navigation (k = 5, the class is the final
  position), here its binary form. Length: Geometric(0.1) (balance=False): under uniform
  π, P(y = +1) < ½ for every geometric law (exactly 1/3 at every length when k = 3;
  docs/theory.md §1c).

  Args:
    k: the number of positions on the cycle, at least 2.
    pi: token law π (3,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The RegularLanguage, named "cycle_navigation[k=⟨k⟩]".

  Example:
    >>> lang = lj.data.regular_builtins.cycle_navigation(3)
    >>> lang.num_states, round(lang.positive_rate(), 6)   # ⅓ at every length
    (3, 0.333333)
    >>> # k = 2: the moves -1 and +1 agree mod 2, so tokens 0 and 2 share a role
    >>> lj.data.regular_builtins.cycle_navigation(2).token_roles().tolist()
    [0, 1, 0]
  """
  k = validation.check_int("cycle_navigation k", k, 2)
  table = [[(s - 1) % k, s, (s + 1) % k] for s in range(k)]
  return _counted(regular.regular(table, [0], pi=pi, length=length, balance=False,
                                  name=f"cycle_navigation[k={k}]"))


def mod_count(letter: int, m: int, r: int, d: int = 2, *, pi=None,
              length=None) -> regular.RegularLanguage:
  """Alphabet {0, …, d-1}: y = +1 iff #letter ≡ r (mod m) (m states, not star-free).

  mod_count(1, 2, 1) is parity; the other letters share one token role. Length:
  Geometric(0.1) (balance=False; whether a geometric law balances depends on m, r and π;
  docs/theory.md §1c).

  Args:
    letter: the letter counted, in {0, …, d-1}.
    m: the modulus, at least 2.
    r: the residue accepted, in {0, …, m-1}.
    d: alphabet size.
    pi: token law π (d,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The RegularLanguage, named "mod_count[letter=⟨letter⟩, m=⟨m⟩, r=⟨r⟩]".

  Example:
    >>> lang = lj.data.regular_builtins.mod_count(0, 2, 0, d=3)   # #0 even over {0, 1, 2}
    >>> lang.token_roles().tolist()
    [0, 1, 1]
    >>> # (1 + G(1 - 2π_0))/2 = (1 + G(⅓))/2 = (1 + 1/21)/2 = 11/21 under Geometric(0.1)
    >>> round(lang.positive_rate(), 6), round(11 / 21, 6)
    (0.52381, 0.52381)
  """
  d = protocol.check_alphabet(d)
  letter = _check_range("mod_count letter", letter, 0, d - 1)
  m = validation.check_int("mod_count m", m, 2)
  r = _check_range("mod_count r", r, 0, m - 1)
  table = [[(s + 1) % m if x == letter else s for x in range(d)] for s in range(m)]
  return _counted(regular.regular(table, [r], pi=pi, length=length, balance=False,
                                  name=f"mod_count[letter={letter}, m={m}, r={r}]"))


def contains(word: Sequence[int], d: int = 2, *, pi=None,
             length=None) -> regular.RegularLanguage:
  """Alphabet {0, …, d-1}: y = +1 iff `word` occurs in w as a contiguous substring
  (len(word) + 1 states, star-free).

  The automaton is the prefix (Knuth–Morris–Pratt) automaton: state i < len(word) is the
  longest prefix of `word` that ends w so far, and len(word) is the accepting trap.
  Length: the balanced geometric law (balance=True): P(y = +1) rises from its value at
  n = 1 to 1 as n grows, so this fails (the error gives the reachable range) only for a
  one-letter word with π_word ≥ ½, e.g. contains((0,)) with d = 2. Under uniform π the
  balancing p is √5 - 2 ≈ 0.236068 for the word 01 (docs/theory.md §1c).

  Args:
    word: the letters of the word, a non-empty sequence in {0, …, d-1}.
    d: alphabet size.
    pi: token law π (d,), uniform when None.
    length: the length law; None gives the balanced geometric law.

  Returns:
    The RegularLanguage, named "contains[word=⟨word⟩]".

  Example:
    >>> # Strings of length 3 without 01 are 1…10…0: 4 of 8, so P(y = +1) = ½.
    >>> lang = lj.data.regular_builtins.contains((0, 1), length=lj.fixed(3))
    >>> lang.describe(), round(lang.positive_rate(), 6)
    ('contains[word=(0, 1)](d=2, states=3)', 0.5)
  """
  d = protocol.check_alphabet(d)
  letters = tuple(word) if isinstance(word, Sequence) and not isinstance(word, str) else ()
  if not letters or not all(validation.is_int(x) and 0 <= x < d for x in letters):
    raise ValueError(f"contains word must be a non-empty sequence of letters in "
                     f"{{0, …, {d - 1}}}; got {word!r}.")
  word = tuple(int(x) for x in letters)

  def step(matched: int, x: int) -> int:
    if matched == len(word):
      return matched
    read = word[:matched] + (x,)
    return max(j for j in range(len(read) + 1) if read[len(read) - j:] == word[:j])

  table = [[step(i, x) for x in range(d)] for i in range(len(word) + 1)]
  return regular.regular(table, [len(word)], pi=pi, length=length, balance=True,
                         name=f"contains[word={word}]")


def _presence_automaton(lang: occurrence.OccurrenceLanguage) -> regular.RegularLanguage:
  """The automaton of an occurrence-family language, with its π and length law. The state
  is the set of letters of L seen so far (a bit mask); occurrence and any_of only need
  whether one was seen."""
  letters = lang.letters
  every = lang.kind == "all_of"
  num_states = 2 ** len(letters) if every else 2
  table = [[state for _ in range(lang.d)] for state in range(num_states)]
  for state in range(num_states):
    for i, a in enumerate(letters):
      table[state][a] = state | (1 << i) if every else 1
  name = f"{lang.kind}_automaton[letters={letters}]"
  return regular.regular(table, [num_states - 1], pi=lang.pi, length=lang.length, name=name)


def occurrence_automaton(d: int, letter: int = 0, *, pi=None,
                         length=None) -> regular.RegularLanguage:
  """Alphabet {0, …, d-1}: y = +1 iff `letter` occurs (2 states, star-free).

  Source: the occurrence language of lagjax/data/occurrence.py (Han & Ghoshdastidar 2026).
  Length: occurrence.balanced_geometric("occurrence", d, (letter,), pi), as for
  occurrence(d, letter) (no geometric law balances it when π_letter ≥ ½, e.g. d = 2;
  docs/theory.md §1, §1c).

  Args:
    d, letter, pi, length: as for occurrence(d, letter, pi=pi, length=length).

  Returns:
    The RegularLanguage, with the π and length law of occurrence.

  Example:
    >>> lang = lj.data.regular_builtins.occurrence_automaton(4)
    >>> lang.num_states, lang.length == lj.occurrence(4).length   # p = 1/(d-1)
    (2, True)
    >>> round(lang.positive_rate(), 6), lang.token_roles().tolist()
    (0.5, [0, 1, 1, 1])
  """
  return _presence_automaton(occurrence.occurrence(d, letter, pi=pi, length=length))


def any_of_automaton(d: int, letters: Sequence[int], *, pi=None,
                     length=None) -> regular.RegularLanguage:
  """Alphabet {0, …, d-1}: y = +1 iff some letter of `letters` occurs (2 states, star-free):
  any_of of lagjax/data/occurrence.py as an automaton (docs/theory.md §1, §1c).

  Args:
    d, letters, pi, length: as for any_of; length None gives its balanced geometric law.

  Returns:
    The RegularLanguage, with the π and length law of any_of.

  Example:
    >>> lang = lj.data.regular_builtins.any_of_automaton(6, (0, 1))
    >>> lang.num_states, round(lang.length.p, 6), round(lang.positive_rate(), 6)   # p = 2/(d-2)
    (2, 0.5, 0.5)
  """
  return _presence_automaton(occurrence.any_of(d, letters, pi=pi, length=length))


def all_of_automaton(d: int, letters: Sequence[int], *, pi=None,
                     length=None) -> regular.RegularLanguage:
  """The automaton of all_of (lagjax/data/occurrence.py): y = +1 iff every letter of
  `letters` occurs. Its state is the set of those letters seen so far: 2^|letters| states,
  star-free (docs/theory.md §1, §1c).

  Args:
    d, letters, pi, length: passed to all_of (length None: its balanced geometric law).

  Returns:
    The RegularLanguage, with the π and length law of all_of.

  Example:
    >>> lang = lj.data.regular_builtins.all_of_automaton(4, (0, 1))   # the state: letters seen
    >>> lang.num_states, round(lang.positive_rate(), 6)
    (4, 0.5)
  """
  return _presence_automaton(occurrence.all_of(d, letters, pi=pi, length=length))


for _name, _factory in [
    ("parity", parity), ("first", first), ("even_pairs", even_pairs), ("tomita", tomita),
    ("dyck", dyck), ("cycle_navigation", cycle_navigation), ("mod_count", mod_count),
    ("contains", contains), ("occurrence_automaton", occurrence_automaton),
    ("any_of_automaton", any_of_automaton), ("all_of_automaton", all_of_automaton)]:
  registry.register(_name, _factory)

__all__ = ["CommutingAutomatonLanguage", "EvenPairsLanguage", "all_of_automaton",
           "any_of_automaton", "contains", "cycle_navigation", "dyck", "even_pairs",
           "even_pairs_label", "first", "mod_count", "occurrence_automaton", "parity", "tomita"]
