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


def test_chunk_store_failed_write_leaves_no_chunk(tmp_path, monkeypatch, savez_that_dies):
  """A write that dies midway leaves no file at the chunk's path, so `has` is False and a
  resumed sweep recomputes the chunk instead of loading a partial file; a normal save then
  load round-trips."""
  store = chunk_store.ChunkStore(str(tmp_path))
  arrays = {"rows": np.arange(5), "risk": np.linspace(0.0, 1.0, 5)}
  real_savez = np.savez

  monkeypatch.setattr(np, "savez", savez_that_dies(b"PK\x03\x04 partial",
                                                   "disk full (simulated)"))
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


# --- a process that dies inside the write -----------------------------------------------------

# The child runs the sweep of TABLE with every file it opens for binary writing under the
# chunks folder wrapped so that the `die_in`-th such file gets only `budget` bytes, then the
# process exits at once (os._exit: no cleanup, no finally, as a kill or a power cut). Files are
# unbuffered, so the bytes written are on disk. The injection knows nothing of how the store
# names or writes its files.
CHILD = r"""
import builtins, io, os, sys
workdir, die_in, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
chunks = os.path.realpath(os.path.join(workdir, "chunks"))
opened = [0]
real_open = io.open


class DiesMidway:
  def __init__(self, raw):
    self.raw, self.written = raw, 0

  def write(self, data):
    data = bytes(data)
    if self.written + len(data) >= budget:
      self.raw.write(data[:budget - self.written])
      os._exit(17)
    self.written += len(data)
    return self.raw.write(data)

  def __getattr__(self, name):
    return getattr(self.raw, name)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.raw.close()


def crashing_open(file, mode="r", *args, **kwargs):
  inside = (isinstance(file, (str, os.PathLike))
            and os.path.dirname(os.path.realpath(file)) == chunks)
  if inside and "b" in mode and any(flag in mode for flag in "wax+"):
    opened[0] += 1
    if opened[0] == die_in:
      kwargs.pop("buffering", None)
      return DiesMidway(real_open(file, mode, *args, buffering=0, **kwargs))
  return real_open(file, mode, *args, **kwargs)


builtins.open = io.open = crashing_open
import jax
jax.config.update("jax_enable_x64", True)
import lagjax as lj
from tests.sweep.test_chunk_store import TABLE_ARGS, SWEEP_OPTIONS
if sys.argv[4] == "sweep":
  lj.sweep.run_sweep(lj.sweep.build_table(*TABLE_ARGS), workdir, lj.occurrence, **SWEEP_OPTIONS)
else:  # overwrite chunk (0, 0) with other numbers
  import numpy as np
  lj.sweep.chunk_store.ChunkStore(workdir).save(0, 0, {"rows": np.arange(1000)})
sys.exit(0)  # the write finished: the injection missed it
"""

TABLE_ARGS = (["output_only"], [3], [2], {"eta": [0.25, 0.5, 1.0, 1.5]})
SWEEP_OPTIONS = dict(chunk_size=2, batch_size=2, num_records=3)  # two chunks of two rows


def _crash(workdir, die_in: int, budget: int, what: str = "sweep"):
  """Runs CHILD; asserts it died inside the write (exit 17), not before or after it."""
  import subprocess
  import sys
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  result = subprocess.run([sys.executable, "-c", CHILD, str(workdir), str(die_in), str(budget),
                           what], cwd=repo, capture_output=True, text=True, timeout=300)
  assert result.returncode == 17, (result.returncode, result.stderr[-2000:])


def _assert_same_results(results, reference):
  assert set(results) == set(reference)
  for name, value in reference.items():
    if isinstance(value, list):
      for got, want in zip(results[name], value):
        np.testing.assert_array_equal(got, want)
    else:
      np.testing.assert_array_equal(results[name], value)


@pytest.mark.slow   # starts Python subprocesses that die mid-write
def test_a_chunk_being_written_when_the_process_dies_is_never_read_as_finished(tmp_path):
  """A sweep process dies half-way through writing its second chunk (after the first chunk
  is finished). The store must not report the half-written chunk as finished (`has`, the
  finished count), a resume recomputes it, and the results equal an uninterrupted run's.
  Then an overwrite of a finished chunk dies half-way: the finished chunk is still there,
  whole and unchanged. And a truncated file left at a chunk's own name (a writer that wrote
  in place) is not finished either: a resume recomputes it."""
  import lagjax as lj
  table = lj.sweep.build_table(*TABLE_ARGS)
  reference = lj.sweep.run_sweep(table, str(tmp_path / "reference"), lj.occurrence,
                                 **SWEEP_OPTIONS)
  reference_store = chunk_store.ChunkStore(str(tmp_path / "reference"))
  assert reference_store.count_finished() == 2
  size = os.path.getsize(reference_store.path(0, 1))

  workdir = tmp_path / "crashed"
  _crash(workdir, die_in=2, budget=size // 2)
  store = chunk_store.ChunkStore(str(workdir))
  assert store.has(0, 0) and not store.has(0, 1)
  assert store.count_finished() == 1
  seen = []
  resumed = lj.sweep.run_sweep(table, str(workdir), lj.occurrence, **SWEEP_OPTIONS,
                               progress=lambda done, total: seen.append(done))
  assert seen[0] == 2  # the finished chunk's rows were loaded; the other was recomputed
  assert store.has(0, 1) and store.count_finished() == 2
  _assert_same_results(resumed, reference)

  # A failed overwrite keeps the finished chunk.
  before = store.load(0, 0)
  _crash(workdir, die_in=1, budget=size // 2, what="overwrite")
  assert store.has(0, 0) and store.count_finished() == 2
  _assert_same_results(store.load(0, 0), before)

  # A truncated file at the chunk's name: not finished, recomputed on resume.
  with open(reference_store.path(0, 1), "rb") as whole:
    head = whole.read(size // 2)
  with open(store.path(0, 1), "wb") as truncated:
    truncated.write(head)
  assert not store.has(0, 1) and store.count_finished() == 1
  again = lj.sweep.run_sweep(table, str(workdir), lj.occurrence, **SWEEP_OPTIONS)
  assert store.has(0, 1)
  _assert_same_results(again, reference)


def test_is_whole_refuses_an_empty_archive_and_a_corrupted_member(tmp_path):
  """is_whole asks both: at least one array, and every member's checksum right. A zip with no
  member, and a chunk whose array bytes were overwritten in place (the zip directory intact,
  so it opens), are not whole (issue 34's mutation campaign: `and` -> `or` survived, the
  tests only truncated files, which fail to open)."""
  import zipfile
  empty = str(tmp_path / "empty.npz")
  zipfile.ZipFile(empty, "w").close()
  assert not chunk_store.is_whole(empty)
  corrupted = str(tmp_path / "group000_chunk000000.npz")
  chunk_store.save_atomically(corrupted, {"risk": np.arange(1000.0)})
  assert chunk_store.is_whole(corrupted)
  with open(corrupted, "r+b") as handle:
    handle.seek(os.path.getsize(corrupted) // 2)   # inside the array's bytes
    handle.write(b"\xff" * 16)
  assert not chunk_store.is_whole(corrupted)


def test_sync_folder_is_silent_where_a_folder_cannot_be_synced(tmp_path):
  """The folder fsync is best effort (not possible on Windows): an OSError there, here a
  folder that does not exist, is swallowed, never raised from a finished write (issue 34's
  mutation campaign)."""
  chunk_store._sync_folder(str(tmp_path / "no_such_folder"))
