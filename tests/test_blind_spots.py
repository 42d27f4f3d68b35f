"""Tests for blind spots a mutation study found (issue 17): each fails on a planted bug.

The modules' own test files (tests/analysis/test_scaling.py, tests/sweep/test_sweep.py) belong to the
finite-sample and sweep drivers; these tests check two helpers those drivers rely on.
"""

import os

import numpy as np
import pytest

from lagjax.analysis import finite_sample
from lagjax.sweep import chunk_store


@pytest.mark.parametrize("confidence, percentiles", [(0.95, (2.5, 97.5)), (0.9, (5.0, 95.0))])
def test_n_star_interval_is_the_two_sided_percentile_interval(confidence, percentiles):
  """(low, high) are the (1-c)/2 and (1+c)/2 percentiles of the returned replicates.

  Computed here with np.percentile at fixed percentiles, so a tail of 100(1-c) instead of
  50(1-c) (the (5, 95) interval at c = 0.95) fails: the replicates below are spread, so the
  two intervals differ (asserted). Same numpy call on the same array: equality is exact.
  """
  n_grid = np.array([10, 20, 40, 80, 160, 320])
  rng = np.random.default_rng(0)
  # 12 seeds whose success probability rises along the grid: bootstrap curves cross 0.5 at
  # many different N.
  success = rng.random((12, n_grid.size)) < np.linspace(0.05, 0.95, n_grid.size)
  estimate, low, high, replicates = finite_sample.n_star(n_grid, success, 0.5, resamples=400,
                                                         confidence=confidence)
  assert replicates.shape == (400,)
  expected_low, expected_high = np.percentile(replicates, percentiles)
  assert (low, high) == (expected_low, expected_high)
  # The test can tell the right tail from the doubled one.
  wrong_tail = 100.0 * (1.0 - confidence)
  assert (low, high) != tuple(np.percentile(replicates, [wrong_tail, 100.0 - wrong_tail]))
  assert estimate == finite_sample.crossing(n_grid, success.mean(0), 0.5)


def test_chunk_store_failed_write_leaves_no_chunk(tmp_path, monkeypatch):
  """A write that dies midway leaves no file at the chunk's path, so `has` is False and a
  resumed sweep recomputes the chunk instead of loading a partial file; a normal save then
  load round-trips."""
  store = chunk_store.ChunkStore(str(tmp_path))
  arrays = {"rows": np.arange(5), "risk": np.linspace(0.0, 1.0, 5)}
  real_savez = np.savez

  def dies_midway(file, *args, **kwargs):
    with open(file, "wb") as handle:
      handle.write(b"PK\x03\x04 partial")
    raise OSError("disk full (simulated)")

  monkeypatch.setattr(np, "savez", dies_midway)
  with pytest.raises(OSError, match="simulated"):
    store.save(3, 7, arrays)
  assert not store.has(3, 7)
  assert not os.path.exists(store.path(3, 7))

  monkeypatch.setattr(np, "savez", real_savez)
  store.save(3, 7, arrays)
  assert store.has(3, 7)
  loaded = store.load(3, 7)
  assert set(loaded) == set(arrays)
  for name, value in arrays.items():
    np.testing.assert_array_equal(loaded[name], value)
