"""Regular languages: regular() and the built-ins (docs/theory.md section 1c).

Every built-in is checked against a membership predicate written from its definition
(never from its automaton) on every string up to a length, its exact P(y = +1) against
π-weighted enumeration, its automaton against brute-force minimality, and the occurrence
automata against the Laplace route's closed form. label_tokens runs once per language, on
one padded batch of every string.
"""

import functools
import itertools
import re

import jax
import jax.extend
import numpy as np
import pytest

import lagjax as lj
from lagjax.data import languages, occurrence, regular
from lagjax.data import regular_builtins as rb

LENGTH = lj.geometric(0.3)      # any law with full support: labels do not depend on it
MAX_LENGTH = {2: 8, 3: 6, 4: 5, 5: 4}   # strings of every length 1..MAX_LENGTH[d]
PI = {2: (0.35, 0.65), 3: (0.2, 0.3, 0.5), 4: (0.1, 0.2, 0.3, 0.4),
      5: (0.3, 0.1, 0.2, 0.25, 0.15)}


def text(w) -> str:
  return "".join(map(str, w))


def tomita3_member(w) -> bool:
  """No maximal odd run of 1s later followed by a maximal odd run of 0s."""
  odd_ones_seen = False
  for letter, run in itertools.groupby(w):
    odd = len(list(run)) % 2 == 1
    if letter == 1 and odd:
      odd_ones_seen = True
    elif letter == 0 and odd and odd_ones_seen:
      return False
  return True


def dyck_member(w, depth: int) -> bool:
  level = 0
  for x in w:
    level += 1 if x == 0 else -1
    if not 0 <= level <= depth:
      return False
  return level == 0


# name: (factory taking pi= and length=, membership predicate on a tuple, alphabet size).
CASES = {
    "parity": (rb.parity, lambda w: w.count(1) % 2 == 1, 2),
    "first": (rb.first, lambda w: w[0] == 1, 2),
    "even_pairs": (rb.even_pairs, lambda w: sum(a != b for a, b in zip(w, w[1:])) % 2 == 0,
                   2),
    "tomita1": (functools.partial(rb.tomita, 1), lambda w: set(w) == {1}, 2),
    "tomita2": (functools.partial(rb.tomita, 2), lambda w: w == (1, 0) * (len(w) // 2), 2),
    "tomita3": (functools.partial(rb.tomita, 3), tomita3_member, 2),
    "tomita4": (functools.partial(rb.tomita, 4), lambda w: "000" not in text(w), 2),
    "tomita5": (functools.partial(rb.tomita, 5),
                lambda w: w.count(0) % 2 == 0 and w.count(1) % 2 == 0, 2),
    "tomita6": (functools.partial(rb.tomita, 6), lambda w: (w.count(0) - w.count(1)) % 3 == 0,
                2),
    "tomita7": (functools.partial(rb.tomita, 7),
                lambda w: re.fullmatch("0*1*0*1*", text(w)) is not None, 2),
    "dyck1": (functools.partial(rb.dyck, 1), lambda w: dyck_member(w, 1), 2),
    "dyck2": (functools.partial(rb.dyck, 2), lambda w: dyck_member(w, 2), 2),
    "dyck3": (functools.partial(rb.dyck, 3), lambda w: dyck_member(w, 3), 2),
    "cycle_navigation2": (functools.partial(rb.cycle_navigation, 2),
                          lambda w: sum(t - 1 for t in w) % 2 == 0, 3),
    "cycle_navigation5": (rb.cycle_navigation, lambda w: sum(t - 1 for t in w) % 5 == 0, 3),
    "mod_count_0_3_0": (functools.partial(rb.mod_count, 0, 3, 0), lambda w: w.count(0) % 3 == 0,
                        2),
    "mod_count_2_3_1_d3": (functools.partial(rb.mod_count, 2, 3, 1, 3),
                           lambda w: w.count(2) % 3 == 1, 3),
    "contains_011": (functools.partial(rb.contains, (0, 1, 1)), lambda w: "011" in text(w), 2),
    "contains_101": (functools.partial(rb.contains, (1, 0, 1)), lambda w: "101" in text(w), 2),
    "contains_20_d3": (functools.partial(rb.contains, (2, 0), 3), lambda w: "20" in text(w), 3),
    "occurrence_automaton": (functools.partial(rb.occurrence_automaton, 3, 1),
                             lambda w: 1 in w, 3),
    "any_of_automaton": (functools.partial(rb.any_of_automaton, 5, (0, 2)),
                         lambda w: 0 in w or 2 in w, 5),
    "all_of_automaton": (functools.partial(rb.all_of_automaton, 4, (1, 3)),
                         lambda w: 1 in w and 3 in w, 4),
}

MINIMAL_STATES = {
    "parity": 2, "first": 3, "even_pairs": 5, "tomita1": 2, "tomita2": 3, "tomita3": 5,
    "tomita4": 4, "tomita5": 4, "tomita6": 3, "tomita7": 5, "dyck1": 3, "dyck2": 4, "dyck3": 5,
    "cycle_navigation2": 2, "cycle_navigation5": 5, "mod_count_0_3_0": 3,
    "mod_count_2_3_1_d3": 3, "contains_011": 4, "contains_101": 4, "contains_20_d3": 3,
    "occurrence_automaton": 2, "any_of_automaton": 2, "all_of_automaton": 4,
}


def all_strings(d: int, n: int) -> np.ndarray:
  return np.array(list(itertools.product(range(d), repeat=n)), dtype=np.int64).reshape(-1, n)


def test_tomita3_predicate_is_the_reference_regex():
  """The run-based predicate is the complement of the lstar_extraction regex."""
  not_tomita3 = re.compile(r"((0|1)*0)*1(11)*(0(0|1)*1)*0(00)*(1(0|1)*)*")
  for n in range(1, 11):
    for w in itertools.product((0, 1), repeat=n):
      assert tomita3_member(w) == (not_tomita3.fullmatch(text(w)) is None), w


@pytest.mark.parametrize("name", sorted(CASES))
def test_labels_match_definition_on_every_string(name):
  """label_tokens (padded with random tokens, masked) = the predicate on all strings."""
  factory, member, d = CASES[name]
  lang = factory(length=LENGTH)
  assert lang.d == d
  strings = [tuple(w) for n in range(1, MAX_LENGTH[d] + 1) for w in all_strings(d, n).tolist()]
  width = MAX_LENGTH[d] + 2
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, d, size=(len(strings), width))
  mask = np.zeros((len(strings), width), dtype=bool)
  for i, w in enumerate(strings):
    tokens[i, :len(w)] = w
    mask[i, :len(w)] = True
  expected = np.array([1.0 if member(w) else -1.0 for w in strings])
  assert 0 < (expected > 0).sum() < len(strings)   # both classes occur
  np.testing.assert_array_equal(np.asarray(lang.label_tokens(tokens, mask)), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_positive_rate_is_the_weighted_count_of_members(name):
  """positive_rate() under fixed(n) = Σ_{w accepted, |w| = n} Π_i π_{w_i}, n = 1..6; a length
  with one class only is refused."""
  factory, member, d = CASES[name]
  pi = np.array(PI[d])
  for n in range(1, 7):
    strings = all_strings(d, n)
    accepted = np.array([member(tuple(w)) for w in strings.tolist()])
    rate = float(np.prod(pi[strings], axis=1)[accepted].sum())
    if accepted.all() or not accepted.any():
      with pytest.raises(ValueError, match=r"P\(y = \+1\) = [01] under .*one class only"):
        factory(pi=tuple(pi), length=lj.fixed(n))
      continue
    lang = factory(pi=tuple(pi), length=lj.fixed(n))
    assert abs(lang.positive_rate() - rate) <= 1e-12, (n, lang.positive_rate(), rate)


def brute_force_classes(table: np.ndarray, accept: np.ndarray, start: int) -> tuple[int, int]:
  """(reachable states, Nerode classes among them) by running every word of length < Q."""
  num_states, d = table.shape
  reached, frontier = {start}, [start]
  while frontier:
    frontier = [int(r) for q in frontier for r in table[q] if int(r) not in reached]
    reached.update(frontier)
  words = [w for n in range(num_states) for w in itertools.product(range(d), repeat=n)]

  def accepted_from(q):
    out = []
    for w in words:
      state = q
      for x in w:
        state = table[state, x]
      out.append(bool(accept[state]))
    return tuple(out)

  return len(reached), len({accepted_from(q) for q in reached})


@pytest.mark.parametrize("name", sorted(CASES))
def test_minimal_state_counts(name):
  """The stored automaton has the reference number of states, every one reachable and no
  two accepting the same suffixes (checked by brute force, not by Moore)."""
  lang = CASES[name][0](length=LENGTH)
  table, accept, start = lang.automaton()
  assert lang.num_states == MINIMAL_STATES[name]
  assert brute_force_classes(table, accept, start) == (lang.num_states, lang.num_states)


def test_dyck_has_depth_plus_two_states():
  for depth in range(1, 7):
    assert rb.dyck(depth, length=LENGTH).num_states == depth + 2


def test_minimisation_gives_the_hand_written_minimal_table():
  """Tomita 4 (no 000): duplicate states, unreachable states and a missing transition give
  the same table as its minimal complete automaton, from any start state name."""
  minimal = regular.regular([[1, 0], [2, 0], [3, 0], [3, 3]], [0, 1, 2], balance=False)
  # States 5 and 6 duplicate 0, states 3 and 4 are unreachable, 2 misses its 0-transition.
  redundant = regular.regular([[1, 5], [2, 0], [-1, 6], [3, 4], [0, 3], [1, 5], [1, 0]],
                              [0, 1, 2, 3, 5, 6], balance=False)
  # The minimal table with states renamed 0 -> 2, 1 -> 0, 2 -> 3, 3 -> 1.
  renamed = regular.regular([[3, 2], [1, 1], [0, 2], [1, 2]], [0, 2, 3], start=2,
                            balance=False)
  assert minimal.table == ((1, 0), (2, 0), (3, 0), (3, 3))
  assert minimal.accept == (True, True, True, False)
  for lang in (redundant, renamed, rb.tomita(4, length=regular.DEFAULT_UNBALANCED_LENGTH)):
    assert (lang.table, lang.accept, lang.start_state) == (minimal.table, minimal.accept, 0)
    assert abs(lang.positive_rate() - minimal.positive_rate()) <= 1e-14


def test_token_roles_group_interchangeable_letters():
  """Equal columns and equal π share a role: every letter but a for the occurrence
  automaton; a letter with another π, or another column, gets its own role."""
  roles = rb.occurrence_automaton(5, 2).token_roles()
  assert len(set(roles[[0, 1, 3, 4]])) == 1 and roles[2] != roles[0]
  roles = rb.occurrence_automaton(5, 2, pi=(0.1, 0.1, 0.2, 0.3, 0.3)).token_roles()
  assert roles[0] == roles[1] and roles[3] == roles[4] and len(set(roles)) == 3
  roles = rb.all_of_automaton(5, (0, 3)).token_roles()
  assert len(set(roles)) == 3 and len(set(roles[[1, 2, 4]])) == 1
  assert list(rb.cycle_navigation(2).token_roles()) == [0, 1, 0]   # moves ±1 agree mod 2


@pytest.mark.parametrize("kind,d,letters", [("occurrence", 6, (4,)), ("any_of", 7, (1, 5)),
                                            ("all_of", 5, (0, 2)), ("all_of", 6, (1, 2, 4))])
def test_occurrence_automata_agree_with_the_laplace_closed_form(kind, d, letters):
  """Same default length law as occurrence.balanced_geometric, and P(y = +1) through the
  automaton = through inclusion-exclusion G(π_S), to 1e-12, for several laws and π."""
  build = {"occurrence": lambda **kw: rb.occurrence_automaton(d, letters[0], **kw),
           "any_of": lambda **kw: rb.any_of_automaton(d, letters, **kw),
           "all_of": lambda **kw: rb.all_of_automaton(d, letters, **kw)}[kind]
  reference = {"occurrence": lambda **kw: lj.occurrence(d, letters[0], **kw),
               "any_of": lambda **kw: lj.any_of(d, letters, **kw),
               "all_of": lambda **kw: lj.all_of(d, letters, **kw)}[kind]
  pi = np.arange(1.0, d + 1.0)[::-1]
  pi = tuple(pi / pi.sum())
  for law_pi in (None, pi):
    automaton = build(pi=law_pi)
    assert automaton.length == occurrence.balanced_geometric(kind, d, letters, law_pi)
    assert abs(automaton.positive_rate() - 0.5) <= 1e-12
  for law in (lj.geometric(0.07), lj.fixed(5), lj.shifted_poisson(3.5)):
    automaton, presence = build(pi=pi, length=law), reference(pi=pi, length=law)
    assert abs(automaton.positive_rate() - presence.positive_rate()) <= 1e-12
  assert build(length=LENGTH).num_states == (2 ** len(letters) if kind == "all_of" else 2)


def test_default_length_laws_and_rates():
  """Balanced built-ins get P(y = +1) = ½; the others Geometric(0.1), whose rates have closed
  forms at p = 0.1 (uniform π)."""
  contains_01 = rb.contains((0, 1))
  for lang in (rb.tomita(3), rb.tomita(4), rb.tomita(7), contains_01):
    assert isinstance(lang.length, lj.lengths.Geometric)
    assert abs(lang.positive_rate() - 0.5) <= 1e-10
  # contains 01: P(no 01 in w | n) = (n + 1) / 2ⁿ (w = 1*0*), and Σ_n P(n) (n + 1) / 2ⁿ = ½
  # solves to p = √5 - 2.
  assert abs(contains_01.length.p - (5**0.5 - 2)) <= 1e-10
  p = 0.1
  closed = {
      rb.parity: 0.5,
      rb.first: 0.5,
      rb.even_pairs: 0.5 + p / 2,                                   # all n = 1, half of n ≥ 2
      functools.partial(rb.tomita, 1): p / (1 + p),                 # Σ P(n) 2⁻ⁿ
      functools.partial(rb.tomita, 2): p * (1 - p) / (4 - (1 - p) ** 2),   # n = 2k: 4⁻ᵏ
      functools.partial(rb.tomita, 5): (1 - p) / (2 * (2 - p)),     # ½ P(n even)
      functools.partial(rb.tomita, 6): (1 + 2 * lj.geometric(p).pgf(-0.5)) / 3,   # T circulant
      functools.partial(rb.dyck, 1): p * (1 - p) / 4 / (1 - (1 - p) ** 2 / 4),   # n = 2k: 4⁻ᵏ
      functools.partial(rb.cycle_navigation, 3): 1 / 3,
  }
  for factory, rate in closed.items():
    lang = factory()
    assert lang.length == regular.DEFAULT_UNBALANCED_LENGTH == lj.geometric(0.1)
    assert abs(lang.positive_rate() - rate) <= 1e-12, (lang.describe(), rate)


def test_registry_builds_every_family():
  names = ["parity", "first", "even_pairs", "tomita", "dyck", "cycle_navigation", "mod_count",
           "contains", "occurrence_automaton", "any_of_automaton", "all_of_automaton"]
  args = {"tomita": (6,), "dyck": (2,), "mod_count": (1, 3, 2), "contains": ((1, 1),),
          "occurrence_automaton": (4, 3), "any_of_automaton": (5, (0, 1)),
          "all_of_automaton": (4, (0, 1))}
  for name in names:
    assert languages.LANGUAGES[name] is getattr(rb, name)
    lang = languages.make(name, *args.get(name, ()), length=LENGTH)
    assert lang == getattr(rb, name)(*args.get(name, ()), length=LENGTH)
    assert isinstance(lang, languages.AutomatonLabels)


TOMITA1 = [[-1, 0]]


@pytest.mark.parametrize("kwargs,message", [
    (dict(transitions=[[0, 5], [1, 0]], accepting=[0]),
     r"transitions\[0, 1\] = 5 is out of range: a state in \{0, …, 1\}"),
    (dict(transitions=[[0, -2]], accepting=[0]), r"transitions\[0, 1\] = -2 is out of range"),
    (dict(transitions=[[0, 0.5], [1, 0]], accepting=[0]), r"transitions must hold integers"),
    (dict(transitions=[["a", "b"]], accepting=[0]), r"transitions must hold integers"),
    (dict(transitions=[0, 1], accepting=[0]), r"transitions must be an integer table of shape"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], start=2),
     r"start must be a state in \{0, …, 1\}; got 2"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], start=-1), r"start must be an integer"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[]), r"accepting must name at least one"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[2]),
     r"accepting states must lie in \{0, …, 1\}; got \[2\]"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[-1]),
     r"^accepting state must be an integer >= 0; got -1\.$"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], pi=(0.2, 0.2)),
     r"pi must be a distribution"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], pi=(0.2, 0.3, 0.5)),
     r"pi must have shape \(2,\)"),
    # Every state accepts: the whole of Σ⁺, one class.
    (dict(transitions=[[0, 1], [1, 0]], accepting=[0, 1], balance=False),
     r"P\(y = \+1\) = 1 under .*one class only"),
    # The accepting state is unreachable: nothing is accepted.
    (dict(transitions=[[0, 0], [1, 1]], accepting=[1], balance=False),
     r"P\(y = \+1\) = 0 under .*one class only"),
    # (10)* has no member of length 3.
    (dict(transitions=[[-1, 1], [0, -1]], accepting=[0], length=lj.fixed(3)),
     r"P\(y = \+1\) = 0 under Fixed\(n0=3\).*one class only"),
])
def test_regular_bad_input_is_one_line(kwargs, message):
  with pytest.raises(ValueError, match=message) as error:
    regular.regular(**kwargs)
  assert "\n" not in str(error.value)


def test_impossible_balance_reports_the_reachable_range():
  """Tomita 1 has P(y = +1) = p/(1+p) < ½ under Geometric(p): the message names the language
  and the range [p/(1+p) at p = 1e-6, ½]."""
  with pytest.raises(ValueError, match=r"no geometric length law balances t1: over p in "
                                       r"\[1e-06, 1\) P\(y = \+1\) stays in \[") as error:
    regular.regular(TOMITA1, [0], name="t1")
  assert "\n" not in str(error.value)
  low, high = map(float, re.search(r"stays in \[([^,]+), ([^\]]+)\]", str(error.value)).groups())
  p_low, p_high = regular.BALANCE_SEARCH[0], regular.BALANCE_SEARCH[-1]
  assert low == pytest.approx(p_low / (1 + p_low), rel=1e-3)
  assert high == pytest.approx(p_high / (1 + p_high), rel=1e-3)


@pytest.mark.parametrize("call,message", [
    (lambda: rb.tomita(8), r"tomita k must be an integer in \{1, …, 7\}; got 8"),
    (lambda: rb.tomita(2.0), r"tomita k must be an integer in \{1, …, 7\}; got 2.0"),
    (lambda: rb.dyck(0), r"dyck depth must be an integer >= 1; got 0"),
    (lambda: rb.cycle_navigation(1), r"cycle_navigation k must be an integer >= 2; got 1"),
    (lambda: rb.mod_count(2, 3, 0), r"mod_count letter must be an integer in \{0, …, 1\}"),
    (lambda: rb.mod_count(0, 1, 0), r"mod_count m must be an integer >= 2; got 1"),
    (lambda: rb.mod_count(0, 3, 3), r"mod_count r must be an integer in \{0, …, 2\}; got 3"),
    (lambda: rb.mod_count(0, 2, 0, d=1), r"alphabet size d must be an integer >= 2"),
    (lambda: rb.contains(()), r"contains word must be a non-empty sequence of letters"),
    (lambda: rb.contains((0, 2)), r"contains word .* in \{0, …, 1\}; got \(0, 2\)"),
    (lambda: rb.contains("01"), r"contains word must be a non-empty sequence"),
    (lambda: rb.contains((0,)), r"no geometric length law balances contains\[word=\(0,\)\]"),
    (lambda: rb.occurrence_automaton(4, 4), r"letters must lie in \{0, …, 3\}"),
    (lambda: rb.all_of_automaton(3, (0, 1, 2)), r"letters must leave at least one other"),
    (lambda: rb.parity(pi=(0.5, 0.6)), r"pi must be a distribution"),
])
def test_builtin_bad_input_is_one_line(call, message):
  with pytest.raises(ValueError, match=message) as error:
    call()
  assert "\n" not in str(error.value)


def test_even_pairs_closed_form_labels_are_its_automatons():
  """Even pairs is defined once: its labels by the closed form w_1 = w_n (label_tokens) equal
  the automaton's (read_labels) on every binary string up to length 7, padded."""
  lang = rb.even_pairs()
  strings = [w for n in range(1, 8) for w in itertools.product((0, 1), repeat=n)]
  tokens = np.array([list(w) + [1] * (7 - len(w)) for w in strings])
  mask = np.arange(7)[None] < np.array([len(w) for w in strings])[:, None]
  table, accepting, start = lang.automaton()
  by_automaton = regular.read_labels(table, accepting, start, tokens, mask)
  np.testing.assert_array_equal(np.asarray(lang.label_tokens(tokens, mask)),
                                np.asarray(by_automaton))
  assert np.mean(np.asarray(by_automaton) > 0) not in (0.0, 1.0)


@pytest.mark.parametrize("kwargs,message", [
    # One past the last state (Q = 2 or 3), in each row and column: JAX would clamp it to Q - 1.
    (dict(transitions=[[0, 2], [1, 0]], accepting=[1]),
     r"^transitions\[0, 1\] = 2 is out of range: a state in \{0, …, 1\}"),
    (dict(transitions=[[0, 1], [2, 0]], accepting=[1]), r"^transitions\[1, 0\] = 2 is out of"),
    (dict(transitions=[[0, 1, 2], [1, 0, 2], [2, 3, 1]], accepting=[1]),
     r"^transitions\[2, 1\] = 3 is out of range: a state in \{0, …, 2\}"),
    # Below the missing-transition marker -1.
    (dict(transitions=[[0, 1], [-2, 0]], accepting=[1]), r"^transitions\[1, 0\] = -2 is out of"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], start=2),
     r"^start must be a state in \{0, …, 1\}; got 2\.$"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[1], start=-1), r"^start must be an integer"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[0, 2]),
     r"^accepting states must lie in \{0, …, 1\}; got \[2\]\.$"),
    (dict(transitions=[[0, 1], [1, 0]], accepting=[-1]), r"^accepting state must be an integer"),
])
def test_regular_refuses_a_state_one_past_the_last(kwargs, message):
  """A transition, start or accepting state equal to the number of states Q (the boundary
  itself), or below the range, is refused in one line; accepted, JAX's clamped indexing would
  read it as state Q - 1, a different automaton. The largest legal values are accepted."""
  with pytest.raises(ValueError, match=message) as error:
    regular.regular(**kwargs, balance=False)
  assert "\n" not in str(error.value)
  lang = regular.regular([[0, 1], [1, 0]], [1], start=1, balance=False)  # Q - 1: legal
  assert lang.num_states == 2 and 0 < lang.positive_rate() < 1


ONE_CLASS = {  # automata whose every string of length >= 1 has one label
    "all accept": dict(transitions=[[0, 1], [1, 0]], accepting=[0, 1]),
    "accepting unreachable": dict(transitions=[[0, 0], [1, 1]], accepting=[1]),
    "only the empty string": dict(transitions=[[1, 1], [1, 1]], accepting=[0]),
}


@pytest.mark.parametrize("name", sorted(ONE_CLASS))
@pytest.mark.parametrize("balance", [True, False])
def test_one_class_advice_never_loops(name, balance):
  """Issue 34: a one-class automaton's message used to advise balance=False, which then
  failed with 'one class only'. Whatever the setting, the message now says the language is
  one class under every length law and recommends no setting of regular() at all, nor the
  class-weighted risk (no weight turns one class into two)."""
  with pytest.raises(ValueError) as error:
    regular.regular(**ONE_CLASS[name], balance=balance)
  message = str(error.value)
  assert "one class under every length law" in message and "\n" not in message
  assert "balance=False" not in message and "length=" not in message
  assert "class_weights" not in message


def test_a_law_that_barely_reaches_both_labels_is_not_weighted():
  """Both labels occur, but only at lengths the default law of balance=False barely reaches
  (here: 1 iff the string is at least 400 long, P = 0.9³⁹⁹ < 1e-18 under Geometric(0.1)):
  the message asks for another length law and offers no class weights, which cannot help a
  language that is one class in practice."""
  table = [[q + 1, q + 1] for q in range(400)] + [[400, 400]]
  with pytest.raises(ValueError) as error:
    regular.regular(table, [400], length=lj.fixed(3))
  message = str(error.value)
  assert message.endswith("pass a length law that puts more mass on the lengths where both "
                          "labels occur.")
  assert "class_weights" not in message and "\n" not in message


def _advice_is_followed(message, kwargs):
  """Follows a message's advice literally: the setting of regular() it names, then the risk
  call it names, copied from the message and evaluated with `lang` bound to the language
  built. Returns (the language, the Route or None when no risk call is advised)."""
  if "Pass balance=False" in message:
    lang = regular.regular(**kwargs, balance=False)
  else:
    advised = re.search(r"length=(Geometric\(p=[0-9.]+\))", message)
    assert advised, message
    p = float(re.search(r"p=([0-9.]+)", advised.group(1)).group(1))
    lang = regular.regular(**{**kwargs, "length": lj.geometric(p)})
  call = re.search(r"lj\.risk_fn\(lang, [^)]*\)", message)
  return lang, (eval(call.group(0), {"lj": lj, "lang": lang}) if call else None)  # noqa: S307


@pytest.mark.parametrize("kwargs", [
    dict(transitions=[[-1, 0]], accepting=[0]),                        # Tomita 1: unbalanceable
    dict(transitions=[[-1, 1], [0, -1]], accepting=[0], length=lj.fixed(3)),   # (10)*, n = 3
])
def test_advised_setting_works(kwargs):
  """When a language has two classes under some length law, the message names a setting,
  and following it builds the language with two classes; it then names the class-weighted
  risk, and the call copied from the message builds it: at α = 0 and β ≡ b, f ≡ b, so the
  balanced risk ½·½(b - 1)² + ½·½(b + 1)² = ½(b² + 1) whatever P(y = +1), where the
  population risk is ½(b² - 2b E y + 1) (docs/theory.md §3d)."""
  with pytest.raises(ValueError) as error:
    regular.regular(**kwargs)
  lang, route = _advice_is_followed(str(error.value),
                                    {k: v for k, v in kwargs.items() if k != "length"})
  positive = lang.positive_rate()
  assert 0 < positive < 1 and abs(positive - 0.5) > 0.1       # two classes, far from equal
  assert route is not None, str(error.value)
  b = 0.7
  theta = {"alpha": jax.numpy.zeros(lang.d), "beta": jax.numpy.full(lang.d, b)}
  # Jitted: one program each instead of hundreds of single-operation compiles.
  balanced, gradient = jax.jit(jax.value_and_grad(route.risk))(theta)
  population = jax.jit(lj.risk_fn(lang).risk)(theta)
  np.testing.assert_allclose(float(balanced), 0.5 * (b**2 + 1), rtol=1e-12)
  np.testing.assert_allclose(float(population), 0.5 * (b**2 - 2 * b * (2 * positive - 1) + 1),
                             rtol=1e-12)
  assert np.all(np.isfinite(np.asarray(gradient["beta"])))    # a training objective


BALANCE_CASES = [rb.parity(), rb.even_pairs(), rb.contains((0, 1)), rb.dyck(3),
                 rb.cycle_navigation(5), rb.mod_count(0, 3, 1)] + [
                     rb.tomita(k, length=lj.geometric(0.3)) for k in range(1, 8)]


@pytest.mark.parametrize("lang", BALANCE_CASES, ids=lambda lang: lang.describe())
def test_balance_search_equals_the_linear_solve_within_its_bound(lang):
  """The balance search's P(y = +1) at the 400 p of BALANCE_SEARCH, by Gauss-Jordan along a
  batch axis (no LAPACK), equals Geometric.matrix_pgf's LU solve at each p within 4 Q ε / p:
  I - (1-p)T is row-diagonally dominant with margin p, so ‖(I - (1-p)T)⁻¹‖∞ ≤ 1/p and both
  backward-stable solves are that close. Observed ≤ 0.07 of the bound (3e-11 at p = 1e-6)."""
  inputs = regular._pgf_inputs(lang.automaton(), lang.pi_array)
  ours = np.asarray(regular._geometric_masses(*inputs, regular.BALANCE_SEARCH))
  solved = np.array([float(regular._accepted_mass(*inputs, lj.geometric(p)))
                     for p in regular.BALANCE_SEARCH[::7]])
  size = inputs[1].shape[0]
  bound = 4 * size * np.finfo(float).eps / regular.BALANCE_SEARCH[::7]
  assert np.all(np.abs(ours[::7] - solved) <= bound), np.max(np.abs(ours[::7] - solved) / bound)


def test_balance_search_calls_no_lapack():
  """Issue 34 item 7: the search used to vmap Geometric.matrix_pgf, a batched LU solve that
  can deadlock XLA's CPU thread pool (docs/decisions/no-batched-lapack.md)."""
  def lapack_primitives(jaxpr):  # as in tests/data/test_lengths.py, sub-jaxprs included
    found = {eq.primitive.name for eq in jaxpr.eqns} & {"lu", "triangular_solve",
                                                         "custom_linear_solve"}
    for eq in jaxpr.eqns:
      for sub in jax.extend.core.jaxprs_in_params(eq.params):
        found |= lapack_primitives(sub)
    return found

  inputs = regular._pgf_inputs(rb.parity().automaton(), rb.parity().pi_array)
  jaxpr = jax.make_jaxpr(regular._geometric_masses)(*inputs, regular.BALANCE_SEARCH).jaxpr
  assert lapack_primitives(jaxpr) == set()
  old = jax.make_jaxpr(jax.vmap(lambda p: lj.geometric(0.5).matrix_pgf.__func__(
      jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(lj.geometric(0.5)), [p]),
      *inputs)))(regular.BALANCE_SEARCH).jaxpr
  assert "lu" in lapack_primitives(old)   # the check sees the old path's LU


FAMILY_STRESS = """
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
import lagjax as lj
from lagjax.data import regular_builtins as rb
lang = rb.cycle_navigation(5)
rate = lj.data.regular.acceptance(lang.automaton(), lang.pi_array)
structure = jax.tree_util.tree_structure(lj.geometric(0.5))
family = jax.jit(jax.vmap(lambda p: rate(jax.tree_util.tree_unflatten(structure, [p]))))
ps = np.geomspace(1e-3, 0.999, 2000)
first = np.asarray(family(ps))
for _ in range(19):
  assert np.array_equal(np.asarray(family(ps + 0.0)), first)
print("done")
"""


@pytest.mark.slow
def test_a_vmapped_family_of_geometric_laws_completes_20_times():
  """The one LAPACK solve left in lagjax/data: Geometric.matrix_pgf keeps its single LU solve
  (so every balanced law stays bit-identical), and a user who vmaps acceptance() over a family
  of geometric laws batches it (the balance search no longer does). A batch of ~1000 LU
  systems hung 3 of 5 runs of the transfer route before (docs/decisions/no-batched-lapack.md),
  so this runs 2000 systems in one program 20 times in a child process under a timeout."""
  import subprocess
  import sys

  done = subprocess.run([sys.executable, "-c", FAMILY_STRESS], capture_output=True, text=True,
                        timeout=300)
  assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


@pytest.mark.parametrize("balance", [True, False])
def test_a_one_class_language_is_told_what_to_change(balance):
  """The one-class message ends with what to change, the automaton's accepting states or π
  (issue 34's mutation campaign: only its first words were read, so the advice itself could
  change unseen)."""
  with pytest.raises(ValueError) as error:
    regular.regular(**ONE_CLASS["accepting unreachable"], balance=balance)
  assert str(error.value).endswith("regular is one class under every length law (a "
                                   "classification risk needs both labels), so change the "
                                   "automaton's accepting states or π.")
