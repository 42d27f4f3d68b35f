"""The sweep's chunk store (lagjax/sweep/chunk_store.py): a resumed sweep finds the chunks saved
before, and a write that dies midway leaves no chunk.

These tests close blind spots of the issue-17 mutation study
(docs/results/mutation/campaign.md): each fails on the planted bug named in its docstring and
passes on the real code. The sweep binary's resume tests (tests/sweep/test_sweep.py) cover the
same store end to end, but are slow.
"""

import os

import numpy as np
import pytest

from lagjax.sweep import chunk_store


def test_chunk_store_reopens_an_existing_workdir(tmp_path):
  """A resumed sweep opens a ChunkStore on a workdir whose chunks/ folder already exists and
  finds the chunks saved before. Kills: os.makedirs(..., exist_ok=False)."""
  first = chunk_store.ChunkStore(str(tmp_path))
  first.save(0, 1, {"rows": np.arange(3)})
  again = chunk_store.ChunkStore(str(tmp_path))
  assert again.has(0, 1) and not again.has(0, 2)
  np.testing.assert_array_equal(again.load(0, 1)["rows"], np.arange(3))


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
