"""Small automata for the atlas's census: star-freeness, one class per length, and the
enumeration of every small binary language (docs/theory.md §10a).

- `star_free`: Schützenberger / McNaughton–Papert: a regular language is star-free iff the
  transition monoid of its minimal DFA is aperiodic (m^k = m^(k+1) for every element m and
  some k). The monoid and the test are those of `lagjax.data.regular.is_star_free` (one copy);
  here it also takes a bare table.
- `one_class_per_length`: whether all strings of each length n ≥ 1 share one label, decided
  exactly on the subset sequence S_n = δ(S_(n-1), Σ) of the states reached at length n.
- `census`: every language over {0, 1} (as the data layer draws it: lengths n ≥ 1, so the
  empty string never counts) whose minimal complete DFA has at most `max_states` states, one
  per class up to state renaming and complement, the one-class-per-length ones dropped;
  `census_sample` draws a seeded sample of those with exactly Q states.

A class's key is the minimal DFA of L ∩ Σ⁺ (a fresh rejecting start state with the old
start's transitions, then Moore minimisation), renamed breadth-first; the pair's key is the
smaller of the keys of L and of its complement. Its representative is the smallest DFA found
for the class (fewest states, then the smaller table).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np

from lagjax import validation
from lagjax.data import protocol, regular

ALPHABET = 2            # the census is over {0, 1}
MAX_ENUMERATED_STATES = 3   # 3^6·2^3 = 5832 tables; 4 states would be 4^8·2^4 ≈ 10⁶


@dataclasses.dataclass(frozen=True)
class CensusLanguage:
  """One class of the census (docs/theory.md §10a): a language and its complement, on the
  strings of length ≥ 1.

  Attributes:
    name: "dfa:<rows>:<accepting>", e.g. "dfa:01.10:1" for parity (rows of the table joined
      by ".", the accepting states' digits), readable back by `language`.
    table: the representative's transitions, a tuple of Q rows of 2 states; start 0.
    accepting: the accepting states' flags, a tuple of Q booleans.
    num_states: Q, the fewest states of a complete DFA for the language or its complement
      on Σ⁺.
    star_free: whether the language is star-free (`star_free`).

  Example:
    >>> entry = lj.analysis.automata.census(2)[0]   # the trailing run of 1s is odd
    >>> entry.name, entry.table, entry.accepting, entry.star_free
    ('dfa:01.00:1', ((0, 1), (0, 0)), (False, True), False)
  """

  name: str
  table: tuple[tuple[int, ...], ...]
  accepting: tuple[bool, ...]
  num_states: int
  star_free: bool

  def language(self, **options) -> regular.RegularLanguage:
    """The census language as a RegularLanguage (docs/theory.md §1c, §10a): the balanced
    geometric length law where one exists, else Geometric(0.1) (lj.regular, balance=False).

    Args:
      **options: pi=, length= for lj.regular (a given length skips the balancing).

    Returns:
      The RegularLanguage named `name`.

    Example:
      >>> lang = lj.analysis.automata.census(2)[2].language()   # parity
      >>> lang.describe(), lang.length
      ('dfa:01.10:1(d=2, states=2)', Geometric(p=0.1))
    """
    accepting = [q for q, flag in enumerate(self.accepting) if flag]
    try:
      return regular.regular(self.table, accepting, name=self.name, **options)
    except ValueError:
      if "length" in options:
        raise
      return regular.regular(self.table, accepting, name=self.name, balance=False, **options)


def _as_automaton(automaton) -> tuple[np.ndarray, np.ndarray, int]:
  """(table, accepting flags, start) of a Language with AutomatonLabels, or of a tuple
  (transitions, accepting states[, start]) completed with a rejecting sink for -1 entries."""
  if isinstance(automaton, protocol.AutomatonLabels):
    table, accepting, start = automaton.automaton()
    return np.asarray(table, np.int64), np.asarray(accepting, bool), int(start)
  if not isinstance(automaton, tuple | list) or len(automaton) not in (2, 3):
    raise ValueError("automaton must be a Language with AutomatonLabels or a tuple "
                     f"(transitions, accepting states[, start]); got {type(automaton).__name__}.")
  table = regular._check_table(automaton[0])
  start = validation.check_int("start", automaton[2] if len(automaton) == 3 else 0, 0)
  if start >= table.shape[0]:
    raise ValueError(f"start must be a state in {{0, …, {table.shape[0] - 1}}}; got {start}.")
  flags = np.zeros(table.shape[0], bool)
  states = [validation.check_int("accepting state", q, 0) for q in np.ravel(automaton[1])]
  if any(q >= table.shape[0] for q in states):
    raise ValueError(f"accepting states must lie in {{0, …, {table.shape[0] - 1}}}; "
                     f"got {states}.")
  flags[states] = True
  table, flags = regular.complete(table, flags)
  return table, flags, start


def star_free(automaton) -> bool:
  """Whether the language is star-free: iff the transition monoid of its minimal DFA is
  aperiodic, every element m having m^k = m^(k+1) for some k (Schützenberger 1965;
  McNaughton & Papert 1971; docs/theory.md §10a). The monoid is the closure of the letters'
  maps under composition (`lagjax.data.regular.is_star_free`, after minimisation).

  Args:
    automaton: a Language with AutomatonLabels (e.g. lj.regular(...)), or a tuple
      (transitions (Q, d), accepting states[, start]) with -1 for a missing transition.

  Returns:
    True iff the language is star-free.

  Raises:
    ValueError: one line naming the field, for a malformed table or state.

  Example:
    >>> automata = lj.analysis.automata
    >>> automata.star_free(([[0, 1], [1, 0]], [1]))   # parity: "1" permutes two states
    False
    >>> automata.star_free(([[1, 0], [2, 0], [-1, 0]], [0, 1, 2]))   # Tomita 4, no 000
    True
  """
  table, accepting, start = _as_automaton(automaton)
  minimal = regular.minimize(*regular.reachable(table, accepting, start))
  return bool(regular.is_star_free(_Automaton(minimal)))


@dataclasses.dataclass(frozen=True)
class _Automaton:
  """The one method regular.is_star_free reads."""
  triple: tuple

  def automaton(self):
    return self.triple


def one_class_per_length(automaton) -> bool:
  """Whether, for every n ≥ 1, all strings of length n over the whole alphabet have one
  label (docs/theory.md §10a). Exact: the states reached by the strings of length n form
  S_n = δ(S_(n-1), Σ), S_0 = {start}, a sequence that repeats within 2^Q steps; the answer
  is whether every S_n, n ≥ 1, up to the first repeat is all accepting or all rejecting.

  Args:
    automaton: as for `star_free`.

  Returns:
    True iff every length n ≥ 1 has a single class (the label may change with n).

  Example:
    >>> automata = lj.analysis.automata
    >>> automata.one_class_per_length(([[1, 1], [0, 0]], [1]))   # odd length: one class per n
    True
    >>> automata.one_class_per_length(([[0, 1], [1, 0]], [1]))   # parity: both at n = 1
    False
  """
  table, accepting, start = _as_automaton(automaton)
  reached, seen = frozenset([start]), set()
  while True:
    reached = frozenset(table[sorted(reached)].ravel().tolist())
    if reached in seen:
      return True
    seen.add(reached)
    labels = accepting[sorted(reached)]
    if labels.any() and not labels.all():
      return False


def _canonical(table: np.ndarray, accepting: np.ndarray, start: int):
  """The minimal DFA, renamed breadth-first from its start: equal for equal languages."""
  table, accepting, _ = regular.minimize(*regular.reachable(table, accepting, start))
  return tuple(map(tuple, table.tolist())), tuple(accepting.tolist())


def _nonempty_key(table: np.ndarray, accepting: np.ndarray, start: int):
  """The canonical minimal DFA of L ∩ Σ⁺: a fresh rejecting start with the start's moves."""
  fresh = np.vstack([table, table[start]])
  return _canonical(fresh, np.append(accepting, False), table.shape[0])


def _name(table, accepting) -> str:
  rows = ".".join("".join(str(r) for r in row) for row in table)
  return f"dfa:{rows}:{''.join(str(q) for q, flag in enumerate(accepting) if flag)}"


@functools.lru_cache(maxsize=MAX_ENUMERATED_STATES)
def _classes(max_states: int) -> tuple[CensusLanguage, ...]:
  """Every class whose fewest states is at most max_states, two classes at some length,
  in order of (states, name)."""
  best: dict = {}
  for num_states in range(1, max_states + 1):
    seen_languages = set()
    for flat in itertools.product(range(num_states), repeat=num_states * ALPHABET):
      table = np.array(flat, np.int64).reshape(num_states, ALPHABET)
      for flags in itertools.product((False, True), repeat=num_states):
        minimal = _canonical(table, np.array(flags), 0)
        if len(minimal[0]) != num_states or minimal in seen_languages:
          continue     # a smaller automaton's language, met at its own size
        seen_languages.add(minimal)
        minimal_table, minimal_flags = np.array(minimal[0]), np.array(minimal[1])
        key = min(_nonempty_key(minimal_table, minimal_flags, 0),
                  _nonempty_key(minimal_table, ~minimal_flags, 0))
        if key not in best or (num_states, minimal) < best[key]:
          best[key] = (num_states, minimal)
  entries = []
  for num_states, (table, flags) in best.values():
    if one_class_per_length((np.array(table), [q for q, f in enumerate(flags) if f])):
      continue
    entries.append(CensusLanguage(_name(table, flags), table, flags, num_states,
                                  star_free((np.array(table), [q for q, f in enumerate(flags)
                                                               if f]))))
  return tuple(sorted(entries, key=lambda entry: (entry.num_states, entry.name)))


def from_name(name: str) -> CensusLanguage:
  """The census entry named `name` ("dfa:<rows>:<accepting>", CensusLanguage.name), read back
  (docs/theory.md §10a): the table as written (start 0), its fewest states and star-freeness.

  Args:
    name: "dfa:" then the Q rows of the table (two digits each, the states after 0 and 1)
      joined by ".", then ":" and the accepting states' digits (possibly none).

  Returns:
    The CensusLanguage with that table; num_states is that of its minimal DFA on Σ⁺ or of
    its complement's, whichever is smaller.

  Raises:
    ValueError: one line naming the name, when it is not of that form or a state is out of
      range.

  Example:
    >>> entry = lj.analysis.automata.from_name("dfa:01.10:1")   # parity
    >>> entry.table, entry.accepting, entry.num_states, entry.star_free
    (((0, 1), (1, 0)), (False, True), 2, False)
  """
  parts = str(name).split(":")
  rows = parts[1].split(".") if len(parts) == 3 and parts[0] == "dfa" else []
  num_states = len(rows)
  digits_ok = (rows and num_states <= 9
               and all(len(row) == ALPHABET and row.isdigit() for row in rows)
               and (parts[2] == "" or parts[2].isdigit()))
  if not digits_ok or any(int(c) >= num_states for c in "".join(rows) + parts[2]):
    raise ValueError(f"census language {name!r}: expected 'dfa:<rows>:<accepting>', Q rows "
                     f"of {ALPHABET} state digits below Q joined by '.', e.g. 'dfa:01.10:1' "
                     f"(parity).")
  table = tuple(tuple(int(c) for c in row) for row in rows)
  accepting = tuple(str(q) in parts[2] for q in range(num_states))
  array, flags = np.array(table, np.int64), np.array(accepting)
  # The fewest states: the smaller minimal DFA of L ∩ Σ⁺ and of its complement's. One of L and
  # its complement rejects the empty string and equals its own Σ⁺ part, so this is never more
  # than the minimal DFA of L.
  fewest = min(len(_nonempty_key(array, flags, 0)[0]), len(_nonempty_key(array, ~flags, 0)[0]))
  states = [q for q, flag in enumerate(accepting) if flag]
  return CensusLanguage(_name(table, accepting), table, accepting, fewest,
                        star_free((array, states)))


def expand(spec: str) -> list[CensusLanguage] | None:
  """The census entries a language spec names (docs/theory.md §10a), or None for a spec that
  is not a census one: "census:Q" (`census(Q)`), "census_sample:Q,size,seed"
  (`census_sample`) or one entry "dfa:<rows>:<accepting>" (`from_name`).

  Args:
    spec: a language spec.

  Returns:
    The CensusLanguages, or None.

  Raises:
    ValueError: one line naming the spec, for bad arguments.

  Example:
    >>> automata = lj.analysis.automata
    >>> len(automata.expand("census:2")), automata.expand("tomita:3")
    (9, None)
    >>> [entry.name for entry in automata.expand("census_sample:3,2,0")]
    ['dfa:11.21.12:2', 'dfa:12.11.00:12']
  """
  name, _, args = str(spec).partition(":")
  if name == "dfa":
    return [from_name(spec)]
  if name not in ("census", "census_sample"):
    return None
  try:
    values = [int(a) for a in args.split(",")] if args else []
  except ValueError:
    values = None
  expected = 1 if name == "census" else 3
  if values is None or len(values) != expected:
    form = "census:Q" if name == "census" else "census_sample:Q,size,seed"
    raise ValueError(f"language {spec!r}: expected {form!r} with integers, e.g. "
                     f"{'census:2' if name == 'census' else 'census_sample:3,200,0'!r}.")
  return census(*values) if name == "census" else census_sample(*values)


def census(max_states: int = 2) -> list[CensusLanguage]:
  """Every binary language of the census with at most `max_states` states (§10a): one per
  class of a language and its complement on the strings of length ≥ 1, up to state renaming,
  dropping those with one class at every length (`one_class_per_length`).

  Every complete DFA with Q ≤ max_states states over {0, 1} (start 0, Q^(2Q)·2^Q tables) is
  minimised; the class of each minimal DFA is keyed by the minimal DFA of L ∩ Σ⁺ and of its
  complement, and represented by the smallest DFA found for it.

  Args:
    max_states: the largest Q, 1 to MAX_ENUMERATED_STATES (3).

  Returns:
    The CensusLanguages, ordered by (num_states, name).

  Raises:
    ValueError: for max_states outside {1, 2, 3}.

  Example:
    >>> languages = lj.analysis.automata.census(2)
    >>> len(languages), [entry.name for entry in languages if entry.star_free]
    (9, ['dfa:01.01:1', 'dfa:01.11:1', 'dfa:10.11:1'])
    >>> len(lj.analysis.automata.census(3))   # 9 with at most 2 states, 463 with 3
    472
  """
  if not (validation.is_int(max_states) and 1 <= max_states <= MAX_ENUMERATED_STATES):
    raise ValueError(f"max_states must be an integer in {{1, …, {MAX_ENUMERATED_STATES}}}; "
                     f"got {max_states!r}.")
  return list(_classes(int(max_states)))


def census_sample(num_states: int = 3, size: int = 200, seed: int = 0) -> list[CensusLanguage]:
  """A seeded sample, without replacement, of the census classes with exactly `num_states`
  states (§10a); all of them when there are at most `size`.

  Args:
    num_states: Q, 1 to MAX_ENUMERATED_STATES (3).
    size: how many to draw, at least 1.
    seed: the seed of numpy's default_rng.

  Returns:
    The drawn CensusLanguages, ordered by name.

  Example:
    >>> sample = lj.analysis.automata.census_sample(3, size=5, seed=0)
    >>> len(sample), {entry.num_states for entry in sample}
    (5, {3})
    >>> sample == lj.analysis.automata.census_sample(3, size=5, seed=0)   # seeded
    True
  """
  size = validation.check_int("size", size, 1)
  seed = validation.check_int("seed", seed, 0)
  population = [entry for entry in census(num_states) if entry.num_states == num_states]
  if len(population) <= size:
    return population
  chosen = np.random.default_rng(seed).choice(len(population), size, replace=False)
  return [population[i] for i in sorted(chosen.tolist())]


__all__ = ["ALPHABET", "CensusLanguage", "MAX_ENUMERATED_STATES", "census", "census_sample",
           "expand", "from_name", "one_class_per_length", "star_free"]
