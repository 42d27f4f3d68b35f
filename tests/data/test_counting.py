"""The counting languages (lagjax/data/counting.py) and the CountLabels of the older families.

Every check is against something written here independently of the library: a stack or
counter recogniser, enumeration of all strings of each length grouped by (counts, first,
last) in exact fractions, the closed forms of docs/theory.md §1d under geometric lengths, and
Monte Carlo on fresh strings.
"""

import math
from fractions import Fraction

import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.data import counting, regular_builtins

EPS = 2.0**-52


# Recognisers written from the definitions, sharing no code with lagjax.


def is_majority(word):
  return word.count(1) > word.count(0)


def is_plurality(word, letter, d):
  return all(word.count(letter) > word.count(x) for x in range(d) if x != letter)


def is_dyck1(word):
  stack = []
  for token in word:
    if token == 0:
      stack.append("(")
    elif not stack:
      return False
    else:
      stack.pop()
  return not stack


def is_anbn(word):
  zeros = ones = 0
  for token in word:
    if token == 0:
      if ones:          # a 0 after a 1
        return False
      zeros += 1
    else:
      ones += 1
  return zeros == ones >= 1


BUILT_INS = {
    "majority": (counting.majority(), is_majority),
    "plurality3": (counting.plurality(1, 3), lambda w: is_plurality(w, 1, 3)),
    "plurality2": (counting.plurality(0, 2), lambda w: is_plurality(w, 0, 2)),
    "dyck1": (counting.dyck1(), is_dyck1),
    "anbn": (counting.anbn(), is_anbn),
}


def random_word(rng, name, d):
  """A string of length 1..24 from a mixture that hits both classes and near misses."""
  kind = rng.integers(3)
  n = int(rng.integers(1, 25))
  if kind == 0 or name.startswith("plurality"):
    return [int(x) for x in rng.integers(d, size=n)]
  m = max(1, n // 2)
  if name == "majority":
    word = [0] * m + [1] * (m + int(rng.integers(-1, 2)))   # ties and one-off margins
  elif name == "anbn":
    word = [0] * m + [1] * m
  else:
    word, depth = [], 0
    for remaining in range(2 * m, 0, -1):   # a random balanced string of length 2m
      opens = depth == 0 or (depth < remaining and rng.random() < 0.5)
      word.append(0 if opens else 1)
      depth += 1 if opens else -1
  if kind == 2 and len(word) > 1:   # a near miss: swap two neighbours or flip one token
    i = int(rng.integers(len(word) - 1))
    if rng.random() < 0.5:
      word[i], word[i + 1] = word[i + 1], word[i]
    else:
      word[i] = 1 - word[i]
  return word


def padded(words, width):
  tokens = np.zeros((len(words), width), np.int64)
  mask = np.zeros((len(words), width), bool)
  for row, word in enumerate(words):
    tokens[row, :len(word)] = word
    mask[row, :len(word)] = True
  return jnp.asarray(tokens), jnp.asarray(mask)


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_label_tokens_matches_an_independent_recogniser_on_random_strings(name):
  lang, recognise = BUILT_INS[name]
  rng = np.random.default_rng(37)
  words = [random_word(rng, name, lang.d) for _ in range(10_000)]
  # Padding with the token 1 too: labels must read the mask, not the padding's value.
  tokens, mask = padded(words, 30)
  tokens = jnp.where(mask, tokens, 1)
  expected = np.array([1.0 if recognise(w) else -1.0 for w in words])
  labels = np.asarray(lang.label_tokens(tokens, mask))
  assert 500 < (expected > 0).sum() < 9_500   # both classes are well represented
  np.testing.assert_array_equal(labels, expected)


def all_strings(d, n):
  """The d^n strings of length n, one per row."""
  return (np.arange(d**n)[:, None] // d ** np.arange(n)) % d


def groups_by_counts_and_ends(strings, labels, blocks):
  """{(block counts, first block, last block): Fraction of positive strings}."""
  block_of = np.empty(sum(len(b) for b in blocks), np.int64)
  for index, block in enumerate(blocks):
    block_of[list(block)] = index
  positives, totals = {}, {}
  as_blocks = block_of[strings]
  counts = np.stack([(as_blocks == i).sum(axis=1) for i in range(len(blocks))], axis=1)
  for row in range(len(strings)):
    key = (tuple(counts[row]), int(as_blocks[row, 0]), int(as_blocks[row, -1]))
    totals[key] = totals.get(key, 0) + 1
    positives[key] = positives.get(key, 0) + int(labels[row] > 0)
  return {key: Fraction(positives[key], totals[key]) for key in totals}


def assert_label_probability_matches(lang, fractions, tolerance_ulps=0):
  keys = sorted(fractions)
  counts = np.array([key[0] for key in keys])
  first = np.array([key[1] for key in keys])
  last = np.array([key[2] for key in keys])
  q = lang.label_probability(counts, first, last)
  assert q.shape == (len(keys),) and q.dtype == np.float64
  exact = np.array([float(fractions[key]) for key in keys])
  np.testing.assert_allclose(q, exact, rtol=tolerance_ulps * EPS, atol=0.0)


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_label_probability_is_the_fraction_of_positive_arrangements(name):
  """All strings of each length n ≤ 12 (n ≤ 9 over three letters), grouped by (c, a, b):
  q is the exact fraction, to 4 ulps (dyck1's 2(2m-1)/(m(m+1)) rounds three times)."""
  lang, recognise = BUILT_INS[name]
  longest = 9 if lang.d == 3 else 12
  seen_fractional = False
  for n in range(1, longest + 1):
    strings = all_strings(lang.d, n)
    labels = [1 if recognise(list(w)) else -1 for w in strings.tolist()]
    fractions = groups_by_counts_and_ends(strings, labels, lang.count_blocks(lang.d))
    seen_fractional |= any(0 < f < 1 for f in fractions.values())
    assert_label_probability_matches(lang, fractions, tolerance_ulps=4)
  # Dyck-1 and aⁿbⁿ have strictly fractional q (5/6, 1/6, …): the check is not 0/1 only.
  assert seen_fractional == (name in ("dyck1", "anbn"))


def test_dyck1_and_anbn_closed_forms_at_large_m():
  """2(2m-1)/(m(m+1)) = Catalan(m)/C(2m-2, m-1) and 1/C(2m-2, m-1), exact integers, for m up
  to 800 (C(1598, 799) ≈ 10^479 is not a float; 1/C underflows to 0 past m ≈ 540)."""
  m = np.arange(1, 801)
  counts = np.stack([m, m], axis=1)
  first, last = np.zeros(800, int), np.ones(800, int)
  dyck = counting.dyck1().label_probability(counts, first, last)
  anbn = counting.anbn().label_probability(counts, first, last)
  for k in (1, 2, 3, 50, 399, 400, 530, 800):
    central = math.comb(2 * k - 2, k - 1)
    catalan = math.comb(2 * k, k) // (k + 1)
    assert abs(dyck[k - 1] - catalan / central) <= 4 * EPS * (catalan / central)
    assert anbn[k - 1] == 1 / central   # one correctly rounded division
  assert np.all(np.isfinite(dyck)) and np.all(anbn[:500] > 0) and anbn[-1] == 0.0


FAMILIES = {
    "occurrence(4, 2)": lj.occurrence(4, 2),
    "any_of(5, (1, 3))": lj.any_of(5, (1, 3)),
    "all_of(4, (0, 2))": lj.all_of(4, (0, 2)),
    "parity": regular_builtins.parity(),
    "mod_count(0, 3, 1, d=3)": regular_builtins.mod_count(0, 3, 1, d=3),
    "mod_count(1, 2, 0)": regular_builtins.mod_count(1, 2, 0),
    "tomita(5)": regular_builtins.tomita(5),
    "tomita(6)": regular_builtins.tomita(6),
    "cycle_navigation(2)": regular_builtins.cycle_navigation(2),
    "cycle_navigation(3)": regular_builtins.cycle_navigation(3),
    "even_pairs": regular_builtins.even_pairs(),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_label_probability_agrees_with_its_label_tokens(name):
  """Every string up to length 8 (6 over four or five letters), labelled by the family's own
  label_tokens, grouped by its count_blocks: q is the (0 or 1) fraction."""
  lang = FAMILIES[name]
  assert isinstance(lang, lj.languages.CountLabels)
  blocks = lang.count_blocks(lang.d)
  assert sorted(x for block in blocks for x in block) == list(range(lang.d))
  longest = 8 if lang.d <= 3 else 6
  words = [w for n in range(1, longest + 1) for w in all_strings(lang.d, n).tolist()]
  tokens, mask = padded(words, longest)   # one shape: one compilation
  labels = np.asarray(lang.label_tokens(tokens, mask))
  for n in range(1, longest + 1):
    rows = [i for i, w in enumerate(words) if len(w) == n]
    fractions = groups_by_counts_and_ends(np.array([words[i] for i in rows]), labels[rows],
                                          blocks)
    assert_label_probability_matches(lang, fractions)


def test_the_families_count_blocks():
  assert lj.occurrence(4, 2).count_blocks(4) == ((0, 1, 3), (2,))
  assert lj.any_of(5, (3, 1)).count_blocks(5) == ((0, 2, 4), (1, 3))
  assert lj.all_of(4, (2, 0)).count_blocks(4) == ((0,), (1, 3), (2,))
  assert regular_builtins.mod_count(2, 2, 0, d=3).count_blocks(3) == ((0, 1), (2,))
  assert regular_builtins.cycle_navigation(2).count_blocks(3) == ((0, 2), (1,))
  assert not isinstance(regular_builtins.tomita(3), lj.languages.CountLabels)


# Class balances.


def brute_rate_at(lang, recognise, n):
  """P(y = +1 | n) = Σ_w π(w) 1{w ∈ L} over all strings of length n."""
  log_pi = np.log(lang.pi_array)
  strings = all_strings(lang.d, n)
  weights = np.exp(log_pi[strings].sum(axis=1))
  return math.fsum(weight for weight, w in zip(weights, strings.tolist()) if recognise(w))


SKEWED_PI = {2: (0.3, 0.7), 3: (0.5, 0.3, 0.2)}


@pytest.mark.parametrize("name", sorted(BUILT_INS))
@pytest.mark.parametrize("skewed", [False, True])
def test_length_rates_and_fixed_length_positive_rate_by_enumeration(name, skewed):
  lang, recognise = BUILT_INS[name]
  if skewed:
    lang = type(lang)(lang.kind, lang.d, lang.letter, SKEWED_PI[lang.d], lang.length)
  longest = 9 if lang.d == 3 else 12
  brute = [brute_rate_at(lang, recognise, n) for n in range(1, longest + 1)]
  # Each term of the sums is a product of ≤ 24 roundings: 1e-14 covers the sums of ≤ 3^9 terms.
  np.testing.assert_allclose(lang.length_rates(longest), brute, rtol=0, atol=1e-14)
  for n in (1, 2, longest):
    fixed = type(lang)(lang.kind, lang.d, lang.letter, lang.pi, lj.fixed(n))
    assert abs(fixed.positive_rate() - brute[n - 1]) <= 1e-14


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_positive_rate_under_short_geometric_lengths_by_enumeration(name):
  """Geometric(0.9): Σ_{n ≤ 14} P(n) P(y = +1 | n) by enumeration (n ≤ 10 over three
  letters), the rest at most P(n > N) = 0.1^N."""
  lang, recognise = BUILT_INS[name]
  lang = type(lang)(lang.kind, lang.d, lang.letter, lang.pi, lj.geometric(0.9))
  longest = 10 if lang.d == 3 else 14
  head = math.fsum(0.9 * 0.1 ** (n - 1) * brute_rate_at(lang, recognise, n)
                   for n in range(1, longest + 1))
  rate = lang.positive_rate()
  assert head - 1e-15 <= rate <= head + 0.1**longest + 1e-15


def test_positive_rate_at_the_default_length_law_against_closed_forms():
  """Geometric(0.1), with u = 1 - p: Dyck-1 p/u (C(z) - 1), aⁿbⁿ p/u · z/(1 - z), z = u² π_0π_1
  (C the Catalan generating function); majority p/u · λ/((1 - λ)√(1 - 4stu²)), the walk's
  Σ_n uⁿ P(S_n > 0) with λ = (1 - √(1 - 4stu²))/(2tu) (s = π_1, t = π_0). The truncated sum
  is within P(n > N) ≤ 1e-16 plus roundoff 3Nε ≈ 1.2e-13 (N = 350) of them."""
  p, u = 0.1, 0.9
  for pi in ((0.5, 0.5), (0.3, 0.7)):
    t, s = pi
    z = u * u * s * t
    dyck = p / u * ((1 - math.sqrt(1 - 4 * z)) / (2 * z) - 1)
    anbn = p / u * z / (1 - z)
    root = math.sqrt(1 - 4 * s * t * u * u)
    lam = (1 - root) / (2 * t * u)
    majority = p / u * lam / ((1 - lam) * root)
    for factory, exact in ((counting.dyck1, dyck), (counting.anbn, anbn),
                           (counting.majority, majority)):
      assert abs(factory(pi=pi).positive_rate() - exact) <= 2e-13, factory.__name__
  # The figures the docs quote (uniform π).
  assert round(counting.majority().positive_rate(), 6) == 0.428102
  assert round(counting.dyck1().positive_rate(), 4) == 0.0437
  assert round(counting.anbn().positive_rate(), 4) == 0.0282


def test_plurality_positive_rate_against_a_multinomial_lattice_sum():
  """Σ_n P(n) Σ_c multinomial(n; c) π^c 1{c_0 > c_1, c_2} under Geometric(0.5) up to n = 60
  (the rest ≤ 2^-60), in exact integers times float powers."""
  pi = (0.45, 0.35, 0.2)
  lang = counting.plurality(0, 3, pi=pi, length=lj.geometric(0.5))
  total = []
  for n in range(1, 61):
    for c0 in range(n + 1):
      for c1 in range(n - c0 + 1):
        c2 = n - c0 - c1
        if c0 > c1 and c0 > c2:
          ways = math.comb(n, c0) * math.comb(n - c0, c1)
          total.append(0.5**n * ways * pi[0] ** c0 * pi[1] ** c1 * pi[2] ** c2)
  assert abs(lang.positive_rate() - math.fsum(total)) <= 1e-14


@pytest.mark.slow   # 10 s in all; the exact checks above stay in the quick loop
@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_positive_rate_matches_fresh_strings_within_four_standard_errors(name):
  lang, recognise = BUILT_INS[name]
  rng = np.random.default_rng(7)
  lengths = rng.geometric(lang.length.p, size=100_000)
  tokens = rng.choice(lang.d, size=(100_000, int(lengths.max())), p=lang.pi_array)
  mask = np.arange(tokens.shape[1]) < lengths[:, None]
  frequency = float(np.mean(np.asarray(lang.label_tokens(tokens, mask)) > 0))
  rate = lang.positive_rate()
  assert abs(frequency - rate) <= 4 * math.sqrt(rate * (1 - rate) / 100_000)


# Declarations, registry, bad input.


def test_declarations():
  majority, dyck = counting.majority(), counting.dyck1()
  assert isinstance(majority, lj.Language) and isinstance(majority, lj.languages.CountLabels)
  assert not isinstance(dyck, lj.languages.AutomatonLabels)
  assert not isinstance(dyck, lj.languages.PresenceLabels)
  assert dyck.length == lj.geometric(0.1)
  assert {lang.describe(): lang.default_class_weights() for lang in (
      majority, dyck, counting.anbn(), counting.plurality())} == {
          "majority(d=2)": "population", "dyck1(d=2)": "balanced", "anbn(d=2)": "balanced",
          "plurality(d=3, letter=0)": "population"}
  assert counting.plurality(2, 3).token_roles().tolist() == [0, 0, 1]
  assert majority.token_roles().tolist() == [0, 1]
  assert hash(counting.dyck1()) == hash(dyck) and counting.dyck1() == dyck


def test_registry_round_trip():
  assert lj.languages.from_spec("majority") == counting.majority()
  assert lj.languages.from_spec("dyck1", 2) == counting.dyck1()
  assert lj.languages.make("anbn") == counting.anbn()
  assert lj.languages.from_spec("plurality:2", 3) == counting.plurality(2, 3)
  assert lj.languages.from_spec("plurality:1,2") == counting.plurality(1, 2)
  law = lj.fixed(7)
  assert lj.languages.from_spec("anbn", length=law, pi=(0.4, 0.6)) == counting.anbn(
      pi=(0.4, 0.6), length=law)
  with pytest.raises(ValueError, match="alphabet size 2; got d = 3"):
    lj.languages.from_spec("dyck1", 3)


@pytest.mark.parametrize("build, pattern", [
    (lambda: counting.plurality(0, 4), r"^plurality d must be 2 or 3; got 4\.$"),
    (lambda: counting.plurality(3, 3), r"^plurality letter must be an integer in \{0, …, 2\}"),
    (lambda: counting.plurality(0.5, 3), r"^plurality letter must be an integer"),
    (lambda: counting.plurality(0, 1), r"alphabet size d"),
    (lambda: counting.majority(pi=(0.2, 0.3, 0.5)), r"^pi must have shape \(2,\)"),
    (lambda: counting.dyck1(pi=(1.2, -0.2)), r"^pi must be a distribution"),
    (lambda: counting.anbn(length=10), r"^length must be a length law .* for the anbn language"),
    (lambda: counting.dyck1().label_probability(np.ones((3, 3)), np.zeros(3), np.zeros(3)),
     r"^counts must have shape \(K, 2\)"),
    (lambda: counting.majority().label_probability(np.ones((3, 2)), np.zeros(2), np.zeros(3)),
     r"^first must have shape \(3,\)"),
    (lambda: counting.majority().length_rates(0), r"n_max"),
    (lambda: lj.any_of(5, (1, 3)).label_probability(np.ones((2, 5)), [0, 0], [0, 0]),
     r"^counts must have shape \(K, 2\)"),
    (lambda: regular_builtins.parity().label_probability(np.ones(4), [0], [0]),
     r"^counts must have shape \(K, 2\)"),
])
def test_bad_input_fails_in_one_line_naming_the_field(build, pattern):
  with pytest.raises(ValueError, match=pattern) as error:
    build()
  assert "\n" not in str(error.value)
