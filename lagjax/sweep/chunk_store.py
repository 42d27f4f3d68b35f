"""The on-disk store of a sweep's finished chunks: one .npz file per chunk, written atomically.

A chunk (g, c) is the c-th slice of rows of static group g of a sweep (lagjax/sweep/run.py,
docs/theory.md section 5b). Its file holds the table rows it covers ("rows") and the
outputs computed for them.
Each file is written under a temporary name in the same folder, flushed to disk (fsync) and
renamed into place (os.replace, atomic on POSIX and Windows), so a killed sweep leaves only
whole chunks, and a failed overwrite keeps the chunk that was there. A restarted sweep finds
every finished chunk with `has` and skips it; `has` and `count_finished` also check that the
file is a whole .npz (its zip directory and checksums), so a truncated file at a chunk's name
(a writer that wrote in place and died) is never read as finished: it is recomputed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import zipfile

import numpy as np


def save_atomically(path: str, arrays: dict) -> None:
  """Writes an .npz next to `path`, flushes it to disk and renames it into place (never a
  partial file at `path`, and a failed overwrite keeps the previous file; a failed write
  removes its temporary file).

  A Ctrl-C during the write is held until the file is in place and raised then: raised
  inside numpy's zip writer it surfaced as a ValueError from the half-closed zip, and the
  binary exited with a traceback instead of its one-line interrupt message.

  Args:
    path: the file to write (an .npz name).
    arrays: {name: array}, saved by np.savez (the sweep's chunk outputs, §5b).

  Raises:
    KeyboardInterrupt: after the file is in place, if Ctrl-C came during the write.

  Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...   path = os.path.join(folder, "chunk.npz")
    ...   lj.sweep.chunk_store.save_atomically(path, {"rows": np.arange(3)})
    ...   with np.load(path) as stored:
    ...     print(os.listdir(folder), stored["rows"].tolist())
    ['chunk.npz'] [0, 1, 2]
  """
  temporary = f"{path}.tmp-{os.getpid()}.npz"
  held = []
  in_main = threading.current_thread() is threading.main_thread()
  previous = signal.signal(signal.SIGINT, lambda *_: held.append(True)) if in_main else None
  try:
    with open(temporary, "wb") as handle:
      np.savez(handle, **arrays)
      handle.flush()
      os.fsync(handle.fileno())  # the bytes are on disk before the name says "finished"
    os.replace(temporary, path)
    _sync_folder(os.path.dirname(path) or ".")
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(temporary)
    raise
  finally:
    if in_main:
      # None: the previous handler was not installed from Python; the default is the best
      # restorable stand-in.
      signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
  if held:
    raise KeyboardInterrupt


def _sync_folder(folder: str) -> None:
  """fsync of the folder, so that the rename survives a power cut (not possible on Windows)."""
  with contextlib.suppress(OSError):
    descriptor = os.open(folder, os.O_RDONLY)
    try:
      os.fsync(descriptor)
    finally:
      os.close(descriptor)


def is_whole(path: str) -> bool:
  """Whether `path` is a complete .npz: it opens as a zip, holds at least one array, and
  every member's checksum matches (a truncated or corrupted file is not whole), so a chunk
  cut short by a crash is recomputed on resume (docs/theory.md §5b).

  Args:
    path: a chunk file's path.

  Returns:
    True for a whole .npz; False for a missing, truncated or corrupted file.

  Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "chunk.npz")
    >>> np.savez(path, risk=np.zeros(3))
    >>> lj.sweep.chunk_store.is_whole(path)
    True
    >>> with open(path, "r+b") as f:
    ...   _ = f.truncate(os.path.getsize(path) // 2)
    >>> lj.sweep.chunk_store.is_whole(path)
    False
  """
  try:
    with zipfile.ZipFile(path) as archive:
      return bool(archive.namelist()) and archive.testzip() is None
  except (OSError, zipfile.BadZipFile, EOFError, ValueError):
    return False


FINISHED = re.compile(r"group\d{3}_chunk\d{6}\.npz")   # the names ChunkStore.path writes


class ChunkStore:
  """Chunk files under workdir/chunks, named by group and chunk index (the sweep of §5b).

  Args:
    workdir: the sweep's working folder; workdir/chunks is created if missing.

  Attributes:
    folder: workdir/chunks.

  Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as workdir:
    ...   store = lj.sweep.chunk_store.ChunkStore(workdir)
    ...   print(store.has(0, 0), store.count_finished())
    ...   store.save(0, 0, {"rows": np.arange(4), "final_risk": np.full(4, 0.5)})
    ...   print(store.has(0, 0), store.count_finished(), store.load(0, 0)["rows"].tolist())
    ...   print(os.path.basename(store.path(0, 0)))
    False 0
    True 1 [0, 1, 2, 3]
    group000_chunk000000.npz
  """

  def __init__(self, workdir: str):
    self.folder = os.path.join(workdir, "chunks")
    os.makedirs(self.folder, exist_ok=True)

  def path(self, group: int, chunk: int) -> str:
    """The file of chunk `chunk` of group `group`: folder/groupGGG_chunkCCCCCC.npz."""
    return os.path.join(self.folder, f"group{group:03d}_chunk{chunk:06d}.npz")

  def count_finished(self) -> int:
    """Finished chunk files in the folder: whole files at chunk names (temporary files and
    truncated files of interrupted writes excluded)."""
    return sum(1 for name in os.listdir(self.folder)
               if FINISHED.fullmatch(name) and is_whole(os.path.join(self.folder, name)))

  def has(self, group: int, chunk: int) -> bool:
    """Whether the chunk is finished: its file is in place and whole (is_whole)."""
    return is_whole(self.path(group, chunk))

  def save(self, group: int, chunk: int, arrays: dict) -> None:
    """Writes the chunk's arrays atomically (save_atomically)."""
    save_atomically(self.path(group, chunk), arrays)

  def load(self, group: int, chunk: int) -> dict[str, np.ndarray]:
    """The chunk's arrays, read into memory."""
    with np.load(self.path(group, chunk)) as stored:
      return {name: stored[name] for name in stored.files}  # each access re-reads the zip
