"""Occurrence-family languages and their partitions (docs/theory.md sections 1 and 3b)."""

import itertools

import numpy as np
import pytest

import lagjax as lj
from lagjax import partition as partition_lib

D = 6
LANGUAGES = {
    "occurrence": lambda: lj.occurrence(D, 2, length=lj.geometric(0.2)),
    "any_of2": lambda: lj.any_of(D, (1, 4), length=lj.geometric(0.2)),
    "any_of3": lambda: lj.any_of(D, (0, 3, 5), length=lj.geometric(0.2)),
    "all_of2": lambda: lj.all_of(D, (1, 4), length=lj.geometric(0.2)),
    "all_of3": lambda: lj.all_of(D, (0, 3, 5), length=lj.geometric(0.2)),
}


def direct_label(lang, string):
  """+1 iff the letters' presence satisfies the language, read off the token sequence."""
  present = [a in set(string) for a in lang.letters]
  positive = all(present) if lang.kind == "all_of" else any(present)
  return 1.0 if positive else -1.0


def random_strings(rng, batch, n_max):
  lengths = rng.integers(1, n_max + 1, size=batch)
  # A small alphabet slice per string makes letters absent often enough.
  strings = []
  for n in lengths:
    alphabet = rng.choice(D, size=rng.integers(1, D + 1), replace=False)
    strings.append(list(rng.choice(alphabet, size=n)))
  return strings


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_labels_match_definition(name):
  """label_tokens (padded, masked) and label_counts equal the definition on random strings."""
  lang = LANGUAGES[name]()
  rng = np.random.default_rng(0)
  strings = random_strings(rng, batch=300, n_max=8)
  expected = np.array([direct_label(lang, s) for s in strings])
  assert 0 < (expected > 0).sum() < len(strings)  # both classes occur
  n_max = 10
  # Padding holds random tokens, letters included: only the mask may hide them.
  tokens = rng.integers(0, D, size=(len(strings), n_max))
  mask = np.zeros((len(strings), n_max), dtype=bool)
  for i, s in enumerate(strings):
    tokens[i, : len(s)] = s
    mask[i, : len(s)] = True
  np.testing.assert_array_equal(lang.label_tokens(tokens, mask), expected)
  counts = np.array([np.bincount(s, minlength=D) for s in strings])
  np.testing.assert_array_equal(lang.label_counts(counts), expected)


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_inclusion_exclusion_reproduces_labels(name):
  """y = Σ_k coef_k 1{support(w) ⊆ S_k} on every support pattern, the first S being Σ."""
  lang = LANGUAGES[name]()
  coefs, supports = lang.inclusion_exclusion()
  assert supports.shape == (coefs.size, D)
  assert supports[0].all()
  for support in itertools.product([False, True], repeat=D):
    support = np.array(support)
    if not support.any():
      continue
    counts = support.astype(int) * 3
    inside = ~(support[None, :] & ~supports).any(axis=1)  # support ⊆ S_k
    expected = direct_label(lang, list(np.flatnonzero(support)))
    assert coefs @ inside == pytest.approx(expected, abs=1e-15)
    assert float(lang.label_counts(counts)) == expected


def test_positive_rate_by_enumerating_strings():
  """P(y = +1) from the pgf equals the π-weighted share of all d^n strings at fixed length n."""
  pi = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
  n0 = 4
  for lang in (lj.occurrence(5, 1, pi=pi, length=lj.fixed(n0)),
               lj.any_of(5, (0, 4), pi=pi, length=lj.fixed(n0)),
               lj.all_of(5, (2, 3), pi=pi, length=lj.fixed(n0))):
    rate = sum(np.prod(pi[list(s)]) for s in itertools.product(range(5), repeat=n0)
               if direct_label(lang, s) > 0)
    # 625 products of 4 numbers: rounding < 1e-15.
    assert lang.positive_rate() == pytest.approx(rate, abs=1e-14)


def test_default_pi_is_uniform():
  """Without π the token law is uniform; the fields are as given."""
  lang = lj.any_of(7, (2, 5))
  np.testing.assert_array_equal(lang.pi_array, np.full(7, 1 / 7))
  assert lang.letters == (2, 5)
  assert lang.kind == "any_of" and lang.d == 7


def blocks_as_set(partition):
  return {frozenset(b) for b in partition.blocks}


def test_partition_of_language_blocks():
  """Coarsest partition: letters together for occurrence/OR, apart for AND; the rest one group."""
  rest = frozenset({0, 2, 3, 5})
  occurrence = partition_lib.of_language(lj.occurrence(D, 4))
  assert blocks_as_set(occurrence) == {frozenset({4}), frozenset({0, 1, 2, 3, 5})}
  either = partition_lib.of_language(lj.any_of(D, (1, 4)))
  assert blocks_as_set(either) == {frozenset({1, 4}), rest}
  both = partition_lib.of_language(lj.all_of(D, (1, 4)))
  assert blocks_as_set(both) == {frozenset({1}), frozenset({4}), rest}
  for partition in (occurrence, either, both):
    assert partition.d == D
    assert sorted(itertools.chain(*partition.blocks)) == list(range(D))
    for g, block in enumerate(partition.blocks):
      assert list(block) == sorted(block)
      np.testing.assert_array_equal(partition.index[list(block)], g)
    np.testing.assert_array_equal(partition.sizes, [len(b) for b in partition.blocks])


def test_partition_splits_unequal_pi():
  """Tokens with different π are not interchangeable and land in different groups."""
  pi = [0.1, 0.1, 0.2, 0.2, 0.2, 0.2]
  partition = partition_lib.of_language(lj.any_of(D, (0, 2), pi=pi))
  assert blocks_as_set(partition) == {frozenset({0}), frozenset({2}), frozenset({1}),
                                      frozenset({3, 4, 5})}
  np.testing.assert_allclose(sorted(partition.masses(pi)), [0.1, 0.1, 0.2, 0.6], rtol=1e-15)


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_label_depends_only_on_group_counts(name):
  """Permuting counts within each block of of_language leaves the label unchanged."""
  lang = LANGUAGES[name]()
  partition = partition_lib.of_language(lang)
  rng = np.random.default_rng(1)
  counts = rng.integers(0, 2, size=(500, D)) * rng.integers(1, 4, size=(500, D))
  counts[counts.sum(axis=1) == 0, 0] = 1
  permuted = counts.copy()
  for block in partition.blocks:
    block = list(block)
    for row in permuted:
      row[block] = rng.permutation(row[block])
  np.testing.assert_array_equal(lang.label_counts(permuted), lang.label_counts(counts))
  assert (permuted != counts).any()


def test_partition_expand_and_group_round_trip():
  """expand maps one value per group to one per token; group inverts it."""
  partition = partition_lib.of_language(lj.all_of(D, (1, 4)))
  grouped = np.array([10.0, 20.0, 30.0])
  per_token = partition.expand(grouped)
  for g, block in enumerate(partition.blocks):
    np.testing.assert_array_equal(per_token[list(block)], grouped[g])
  np.testing.assert_array_equal(partition.group(per_token), grouped)


def test_partition_of_params_refines_language():
  """of_params keeps of_language's groups for tied θ and splits tokens with distinct θ."""
  lang = lj.occurrence(D, 0)
  base = partition_lib.of_language(lang)
  tied = {"alpha": base.expand(np.array([1.0, -2.0])), "beta": base.expand(np.array([0.5, 0.3]))}
  assert partition_lib.of_params(lang, tied).blocks == base.blocks
  untied = dict(tied, beta=tied["beta"].copy())
  untied["beta"][3] = 7.0
  assert blocks_as_set(partition_lib.of_params(lang, untied)) == {
      frozenset({0}), frozenset({3}), frozenset({1, 2, 4, 5})}


def test_support_masses():
  """(K, G) matrix of π_g 1{g ⊆ S_k} for OR: Σ, then Σ minus the letters."""
  lang = lj.any_of(D, (1, 4))
  partition = partition_lib.of_language(lang)
  _, supports = lang.inclusion_exclusion()
  masses = partition.support_masses(lang.pi_array, supports)
  letters = [g for g, b in enumerate(partition.blocks) if 1 in b][0]
  expected = np.zeros((2, 2))
  expected[0, letters], expected[0, 1 - letters] = 2 / D, 4 / D
  expected[1, 1 - letters] = 4 / D
  np.testing.assert_allclose(masses, expected, rtol=1e-15)
  # A partition that merges a letter with a non-letter cuts a support set.
  with pytest.raises(ValueError, match="splits a support"):
    partition_lib.Partition(((0, 1), (2, 3, 4, 5))).support_masses(lang.pi_array, supports)
