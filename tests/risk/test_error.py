"""The 0-1 error routes and the choice among them (lagjax/risk/error.py, threshold.py, §3).

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code.
"""

import jax
import numpy as np
import pytest

import lagjax as lj
from lagjax.data import lengths as lengths_lib
from lagjax.risk import error as error_lib
from lagjax.risk import lattice

THRESHOLD = lj.risk.ROUTES["threshold"]
LATTICE = lj.risk.ROUTES["lattice"]


def threshold_error(lang, partition, params):
  """The threshold route's (error, certified tail bound) at params."""
  report = jax.jit(THRESHOLD.build(lang, partition).report)(params)
  return report["error"], report["error_bound"]


def threshold_applies(lang, partition) -> bool:
  return THRESHOLD.supports(lang, quantity="error", partition=partition) is None


def test_threshold_error_route_equals_the_lattice_error():
  """The threshold 0-1 error route (binomial count law of the letters, O(N)) equals the
  lattice route's exact 0-1 error on the same two-group θ. π_L = 0.4, so the binomial pmf
  depends on log π_L; β of opposite signs put the decision threshold inside (0, n) for every
  length. Both routes are exact up to their certified tails (threshold: `tail`; lattice:
  error_bound, both from tol = 1e-12) plus float64 rounding of < 10⁴ terms of size <= 1
  (< 1e-12). Kills: c / log π_L in place of c · log π_L."""
  lang = lj.any_of(5, (0, 1), length=lj.geometric(0.3))  # uniform π: π_L = 0.4
  partition = lj.partition.of_language(lang)
  params = {"alpha": np.array([0.3, -0.2]), "beta": np.array([1.0, -0.8])}
  value, tail = threshold_error(lang, partition, params)
  report = jax.jit(LATTICE.build(lang, partition, tol=1e-12).report)(params)
  assert 0.05 < float(report["error"]) < 0.95
  assert abs(float(value) - float(report["error"])) <= (float(tail) + float(report["error_bound"])
                                                        + 1e-12)


def test_threshold_error_route_needs_the_letters_as_one_of_two_groups():
  """ThresholdRoute.supports: the threshold route applies on two token groups exactly when one
  of them is L, the letters (docstring: "on the two token groups L and the rest"); a two-group
  partition that splits L is refused, by supports and by build (ValueError, as its docstring
  says), and choose falls through to the lattice. Exact: booleans.
  Kills: `set(b) != set(letters)` in supports (true for any two-group partition, since a
  split never equals L; build then dies on StopIteration, not ValueError)."""
  lang = lj.any_of(5, (0, 1), length=lj.geometric(0.3))
  assert threshold_applies(lang, lj.partition.of_language(lang))
  for blocks in (((0, 2), (1, 3, 4)), ((0,), (1, 2, 3, 4))):
    split = lj.partition.Partition(blocks)
    assert not threshold_applies(lang, split)
    assert error_lib.choose(lang, split) == "lattice"
    with pytest.raises(ValueError, match="threshold error route"):
      THRESHOLD.build(lang, split)


def test_error_choose_picks_the_lattice_only_where_the_lattice_builds():
  """error.choose says "lattice" only where lattice.build accepts the enumeration: both size it
  with lengths up to N(tol/2). At d = 3 (three singleton groups) and geometric p = 0.085,
  N(tol/2) = 319 needs 5,512,639 count vectors (> lattice.MAX_VECTORS = 5,000,000) while
  N(2 tol) = 304 would need 4,775,384, so choose must not say "lattice" (today it gives None
  and best_route samples the error) where lattice.build refuses. Integer counts: exact.
  Kills: tol * 2 for tol / 2 in choose (it would pick a lattice that then refuses to build)."""
  lang = lj.occurrence(3, 0, length=lj.geometric(0.085))
  partition = lj.partition.singletons(3)
  tol = 1e-12
  assert lattice.num_count_vectors(3, lengths_lib.truncation_length(lang.length, 2 * tol)) <= \
      lattice.MAX_VECTORS
  assert error_lib.choose(lang, partition, tol) != "lattice"
  with pytest.raises(ValueError, match="max_vectors"):
    LATTICE.build(lang, partition, tol=tol)


def test_best_route_uses_the_route_choose_picks():
  """error.best_route builds the route `choose` names: the O(N) threshold route for a tied
  occurrence language (two groups, the letter and the rest), the lattice for all_of on
  singletons at d = 3, and returns that name; its error is the chosen route's own (the same
  function on the same θ, so equal exactly).
  Kills: `name != "threshold"` in best_route (the threshold case fell to the sampled route,
  the lattice case into the threshold builder, which refuses it)."""
  lang = lj.occurrence(3, 0, length=lj.geometric(0.5))
  partition = lj.partition.of_language(lang)
  report, name = error_lib.best_route(lang, partition)
  assert name == "threshold"
  params = {"alpha": np.array([0.3, -0.2]), "beta": np.array([1.0, -0.8])}
  assert float(jax.jit(report)(params)["error"]) == float(
      threshold_error(lang, partition, params)[0])
  lang = lj.all_of(3, (0, 1), length=lj.geometric(0.5))
  singletons = lj.partition.singletons(3)
  report, name = error_lib.best_route(lang, singletons)
  assert name == "lattice"
  params = {"alpha": np.array([0.3, -0.2, 0.1]), "beta": np.array([1.0, -0.8, 0.5])}
  assert float(jax.jit(report)(params)["error"]) == float(
      jax.jit(LATTICE.build(lang, singletons).report)(params)["error"])


def test_threshold_error_route_tabulates_lengths_up_to_4096():
  """The threshold route tabulates the binomial CDFs for n <= N <= threshold.MAX_TABLE_LENGTH =
  4096 (docs/theory.md §3): fixed length 4096 takes it, fixed length 4097 does not (today
  choose gives None there: the lattice would need C(4099, 2) - 1 = 8,398,850 count vectors
  on two groups, over lattice.MAX_VECTORS, so best_route samples) and build refuses it.
  Pure Python, no table built; integers: exact. Kills: MAX_TABLE_LENGTH = 4097."""
  fits, over = (lj.occurrence(2, 0, length=lj.fixed(n0)) for n0 in (4096, 4097))
  assert error_lib.choose(fits, lj.partition.of_language(fits)) == "threshold"
  assert error_lib.choose(over, lj.partition.of_language(over)) != "threshold"
  with pytest.raises(ValueError, match="tabulates lengths up to 4096"):
    THRESHOLD.build(over, lj.partition.of_language(over))
