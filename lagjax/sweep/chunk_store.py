"""The on-disk store of a sweep's finished chunks: one .npz file per chunk, written atomically.

A chunk (g, c) is the c-th slice of rows of static group g (lagjax/sweep/run.py). Its
file holds the table rows it covers ("rows") and the outputs computed for them.
Each file is written under a temporary name and renamed into place, so a killed
sweep leaves only whole chunks and a restarted one finds every finished chunk
with `has` and skips it.
"""

from __future__ import annotations

import os
import re
import signal
import threading

import numpy as np


def save_atomically(path: str, arrays: dict) -> None:
  """Writes an .npz next to `path` and renames it into place (never a partial file).

  A Ctrl-C during the write is held until the file is in place and raised then: raised
  inside numpy's zip writer it surfaced as a ValueError from the half-closed zip, and the
  binary exited with a traceback instead of its one-line interrupt message.
  """
  temporary = f"{path}.tmp-{os.getpid()}.npz"
  held = []
  in_main = threading.current_thread() is threading.main_thread()
  previous = signal.signal(signal.SIGINT, lambda *_: held.append(True)) if in_main else None
  try:
    np.savez(temporary, **arrays)
    os.replace(temporary, path)
  finally:
    if in_main:
      signal.signal(signal.SIGINT, previous)
  if held:
    raise KeyboardInterrupt


FINISHED = re.compile(r"group\d{3}_chunk\d{6}\.npz")   # the names ChunkStore.path writes


class ChunkStore:
  """Chunk files under workdir/chunks, named by group and chunk index."""

  def __init__(self, workdir: str):
    self.folder = os.path.join(workdir, "chunks")
    os.makedirs(self.folder, exist_ok=True)

  def path(self, group: int, chunk: int) -> str:
    return os.path.join(self.folder, f"group{group:03d}_chunk{chunk:06d}.npz")

  def count_finished(self) -> int:
    """Finished chunk files in the folder (temporary files of interrupted writes excluded)."""
    return sum(1 for name in os.listdir(self.folder) if FINISHED.fullmatch(name))

  def has(self, group: int, chunk: int) -> bool:
    return os.path.exists(self.path(group, chunk))

  def save(self, group: int, chunk: int, arrays: dict) -> None:
    save_atomically(self.path(group, chunk), arrays)

  def load(self, group: int, chunk: int) -> dict[str, np.ndarray]:
    with np.load(self.path(group, chunk)) as stored:
      return {name: stored[name] for name in stored.files}  # each access re-reads the zip
