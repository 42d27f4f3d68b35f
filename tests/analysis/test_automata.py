"""The census's automata (docs/theory.md §10a): star-freeness against known cases and against
a brute-force check on labels, one class per length against labels, and the census counts
against a count by label vectors that never minimises an automaton."""

import itertools
import re

import numpy as np
import pytest

import lagjax as lj
from lagjax.analysis import automata
from lagjax.data import regular_builtins


@pytest.mark.parametrize("name, factory, expected", [
    ("parity", regular_builtins.parity, False),
    ("tomita 3", lambda: regular_builtins.tomita(3), False),
    ("tomita 5", lambda: regular_builtins.tomita(5), False),
    ("tomita 6", lambda: regular_builtins.tomita(6), False),
    ("even pairs", regular_builtins.even_pairs, True),
    ("tomita 1", lambda: regular_builtins.tomita(1), True),
    ("tomita 2", lambda: regular_builtins.tomita(2), True),
    ("tomita 4", lambda: regular_builtins.tomita(4), True),
    ("tomita 7", lambda: regular_builtins.tomita(7), True),
    ("dyck 1", lambda: regular_builtins.dyck(1), True),
    ("dyck 3", lambda: regular_builtins.dyck(3), True)])
def test_star_free_known_cases(name, factory, expected):
  """Issue 38's list: counting modulo 2 or 3 is not star-free, the rest are."""
  lang = factory()
  assert automata.star_free(lang) is expected
  # The same answer from the bare table, as a census passes it.
  table, accepting, start = lang.automaton()
  assert automata.star_free((table, np.flatnonzero(accepting), start)) is expected


def _labels(table, accepting, words):
  """Labels of words (tuples of letters) read from state 0 of a complete table."""
  labels = []
  for word in words:
    state = 0
    for letter in word:
      state = table[state][letter]
    labels.append(bool(accepting[state]))
  return np.array(labels)


def _words(max_length, min_length=0):
  return [w for n in range(min_length, max_length + 1)
          for w in itertools.product((0, 1), repeat=n)]


def test_star_free_agrees_with_a_check_on_labels():
  """Aperiodic iff L(u v^Q w) = L(u v^(Q+1) w) for all words u, v, w (m^Q = m^(Q+1) for a map
  m of Q points, when it ever holds). For Q ≤ 2 the monoid has at most 4 elements, all
  reached by a word v of length ≤ 3; u of length ≤ 1 reaches every state and w of length
  ≤ 1 separates them (the DFA is minimal)."""
  results = []
  for entry in automata.census(2):
    q = entry.num_states
    short = _words(3)
    periodic = False
    for v in _words(3, 1):
      pumped = [u + v * q + w for u in short for w in short]
      once_more = [u + v * (q + 1) + w for u in short for w in short]
      if not np.array_equal(_labels(entry.table, entry.accepting, pumped),
                            _labels(entry.table, entry.accepting, once_more)):
        periodic = True
        break
    assert entry.star_free is (not periodic), entry.name
    results.append(entry.star_free)
  assert any(results) and not all(results)   # both answers occur


def test_star_free_refuses_a_malformed_automaton():
  with pytest.raises(ValueError, match="accepting states must lie in"):
    automata.star_free(([[0, 1], [1, 0]], [2]))
  with pytest.raises(ValueError, match="automaton must be a Language"):
    automata.star_free("parity")


def _final_states(tables, max_length):
  """(N, S) the state each of N tables (N, Q, 2) reaches on each word of length 1…max_length
  (S = 2 + 4 + … words, grouped by length)."""
  finals, states = [], np.zeros((tables.shape[0], 1), np.int64)
  rows = np.arange(tables.shape[0])[:, None]
  for _ in range(max_length):
    states = np.concatenate([tables[rows, states, 0], tables[rows, states, 1]], axis=1)
    finals.append(states)
  return np.concatenate(finals, axis=1)


def _classes_by_labels(max_states, max_length):
  """The census classes by brute force: every table with at most max_states states and every
  accepting set, labelled on all words of length 1…max_length; a class is a label vector up to
  negation (normalised so the word "0" is rejected); vectors with one label per length are
  dropped. Returns {class: fewest states}."""
  bounds = np.cumsum([0] + [2 ** n for n in range(1, max_length + 1)])
  classes = {}
  for q in range(1, max_states + 1):
    tables = np.array(list(itertools.product(range(q), repeat=2 * q))).reshape(-1, q, 2)
    finals = _final_states(tables, max_length)
    for flags in itertools.product((False, True), repeat=q):
      labels = np.asarray(flags)[finals]
      labels ^= labels[:, :1]                      # up to complement
      constant = np.ones(labels.shape[0], bool)
      for lo, hi in zip(bounds[:-1], bounds[1:]):
        block = labels[:, lo:hi]
        constant &= block.all(axis=1) | ~block.any(axis=1)
      for row in labels[~constant]:
        classes.setdefault(row.tobytes(), q)
  return classes


def test_census_counts_agree_with_label_vectors():
  """Words of length ≤ 5 separate two classes with at most 2 states (their DFAs on Σ⁺ have at
  most 3 states: a difference shows by length 3 + 3 - 2), and the subset sequence of 2 states
  repeats by length 4, so the brute-force count is exact."""
  by_labels = _classes_by_labels(2, 5)
  census = automata.census(2)
  assert len(census) == len(by_labels) == 9
  assert [entry.num_states for entry in census] == [2] * 9


@pytest.mark.slow
def test_three_state_census_count_agrees_with_label_vectors():
  """Up to 3 states: DFAs on Σ⁺ with at most 4 states differ by length 6, and the subset
  sequence of 3 states repeats by length 8."""
  by_labels = _classes_by_labels(3, 8)
  census = automata.census(3)
  assert len(census) == len(by_labels) == 472
  assert sum(q == 3 for q in by_labels.values()) == sum(e.num_states == 3 for e in census)


def test_one_class_per_length_agrees_with_labels():
  """Every table with at most 2 states and accepting set: the exact decision against the
  labels of all words of length 1…6 (the subset sequence repeats within 2² steps)."""
  decided = []
  for q in (1, 2):
    for flat in itertools.product(range(q), repeat=2 * q):
      table = np.array(flat).reshape(q, 2)
      for flags in itertools.product((False, True), repeat=q):
        by_length = [set(_labels(table, flags, _words(n, n)).tolist()) for n in range(1, 7)]
        expected = all(len(labels) == 1 for labels in by_length)
        answer = automata.one_class_per_length((table, np.flatnonzero(flags)))
        assert answer is expected, (table.tolist(), flags)
        decided.append(answer)
  assert any(decided) and not all(decided)


def test_one_class_per_length_sees_a_late_second_class():
  """Length ≡ 0 (mod 3) with a twist: both labels occur first at length 3 (an automaton whose
  only mixed subset is reached after three letters)."""
  # States 0→1→2 on any letter; at 2, letter 1 goes to the accepting 3 and 0 to the rejecting
  # 4; 3 and 4 stay. Lengths 1, 2 have one class, length 3 has two.
  table = [[1, 1], [2, 2], [4, 3], [3, 3], [4, 4]]
  assert automata.one_class_per_length((table, [3])) is False
  assert automata.one_class_per_length(([[1, 1], [2, 2], [0, 0]], [0])) is True


def test_census_sample_is_seeded_and_of_the_size_asked():
  sample = automata.census_sample(3, size=200, seed=1)
  assert len(sample) == 200 and len({entry.name for entry in sample}) == 200
  assert all(entry.num_states == 3 for entry in sample)
  assert sample == automata.census_sample(3, size=200, seed=1)
  assert sample != automata.census_sample(3, size=200, seed=2)
  assert len(automata.census_sample(2, size=200)) == 9   # all of them when there are fewer
  with pytest.raises(ValueError, match="max_states must be an integer in"):
    automata.census(4)


def test_census_language_reads_back_its_labels():
  """The name names the table, and the RegularLanguage built from it labels words as the
  table does."""
  entry = automata.census(2)[0]
  lang = entry.language()
  words = _words(4, 4)
  tokens = np.array(words)
  mask = np.ones_like(tokens, bool)
  expected = np.where(_labels(entry.table, entry.accepting, words), 1.0, -1.0)
  np.testing.assert_array_equal(np.asarray(lang.label_tokens(tokens, mask)), expected)
  assert isinstance(lang, lj.data.regular.RegularLanguage)


def test_a_census_name_reads_back_to_its_entry():
  """from_name inverts CensusLanguage.name on every class with at most 3 states (the table,
  the accepting states, the fewest states and star-freeness), and expand names them."""
  census = automata.census(3)
  assert [automata.from_name(entry.name) for entry in census] == census
  assert automata.expand("census:3") == census
  assert automata.expand("census_sample:3,7,1") == automata.census_sample(3, 7, 1)
  assert automata.expand("dfa:01.10:1") == [automata.from_name("dfa:01.10:1")]
  assert automata.expand("tomita:3") is None


@pytest.mark.parametrize("spec, message", [
    ("dfa:01.12:1", "census language 'dfa:01.12:1': expected 'dfa:<rows>:<accepting>'"),
    ("dfa:01.10:2", "census language 'dfa:01.10:2': expected"),
    ("dfa:011.10:1", "census language 'dfa:011.10:1': expected"),
    ("dfa:01.10", "census language 'dfa:01.10': expected"),
    ("census:x", "language 'census:x': expected 'census:Q' with integers"),
    ("census_sample:3,200", "language 'census_sample:3,200': expected "
                            "'census_sample:Q,size,seed'"),
    ("census:4", "max_states must be an integer in {1, …, 3}; got 4."),
])
def test_a_bad_census_spec_names_itself(spec, message):
  with pytest.raises(ValueError, match="^" + re.escape(message)):
    automata.expand(spec)
