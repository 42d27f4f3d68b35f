"""The lattice route's enumeration (lagjax/risk/lattice.py, docs/theory.md §3b): the count vectors
it sums over and the size it refuses.

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code. The route's values against the other routes and brute force are
tests/risk/test_routes.py.
"""

import itertools

import pytest

import lagjax as lj
from lagjax.data import lengths as lengths_lib
from lagjax.risk import lattice


@pytest.mark.parametrize("num_groups, n_max", [(1, 5), (2, 3), (3, 4)])
def test_count_vectors_are_every_vector_once_and_num_count_vectors_counts_them(num_groups,
                                                                                n_max):
  """count_vectors lists each c ∈ N^G with 1 <= Σc <= N exactly once (checked against
  itertools), and num_count_vectors = C(N + G, G) - 1 is their number (the size the route
  checks against max_vectors). Integer enumeration: exact.
  Kills: num_count_vectors off by one or two; count_vectors starting from two empty rows."""
  rows = lattice.count_vectors(num_groups, n_max)
  expected = sorted(c for c in itertools.product(range(n_max + 1), repeat=num_groups)
                    if 1 <= sum(c) <= n_max)
  assert sorted(map(tuple, rows.tolist())) == expected
  assert lattice.num_count_vectors(num_groups, n_max) == len(expected)


def test_lattice_max_vectors_refuses_only_larger_enumerations():
  """max_vectors is the largest enumeration the route accepts (docstring: "refuse
  enumerations larger than this"): exactly the needed size builds, one less refuses.
  Kills: `size >= max_vectors`."""
  lang = lj.occurrence(3, 0, length=lj.geometric(0.5))
  tol = 1e-12
  n_max = lengths_lib.truncation_length(lang.length, tol / 2)
  size = lattice.num_count_vectors(3, n_max)
  lj.risk.ROUTES["lattice"].build(lang, tol=tol, max_vectors=size)
  with pytest.raises(ValueError, match="max_vectors"):
    lj.risk.ROUTES["lattice"].build(lang, tol=tol, max_vectors=size - 1)
