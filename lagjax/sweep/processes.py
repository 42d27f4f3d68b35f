"""Work shared by the processes of a jax.distributed run (docs/theory.md §5b): which chunks
are this process's, the barrier that waits for the others, and SharedChunks, chunks that
one process computes and every process reads.

Process p of P takes the chunks with index ≡ p (mod P) (my_chunks). run_sweep stores its
chunks in its resumable store and process 0 reads them after the barrier; SharedChunks
(Table 1's blocks) does the same for any pytree results, and every process reads them all.
"""

from __future__ import annotations

import itertools
import shutil
import threading
from collections.abc import Callable

import jax
import numpy as np
from jax.experimental import multihost_utils

from lagjax.sweep import chunk_store


def my_chunks(num_chunks: int, process_index: int, process_count: int) -> range:
  """The chunk indices that process `process_index` of `process_count` computes (§5b).

  Args:
    num_chunks: the number of chunks.
    process_index: this process's index.
    process_count: the number of processes.

  Returns:
    The indices ≡ process_index (mod process_count), rising.

  Example:
    >>> list(lj.sweep.processes.my_chunks(5, 1, 2))
    [1, 3]
  """
  return range(process_index, num_chunks, process_count)


_barriers = itertools.count()  # every process runs the same sweeps, so the ids agree


def wait_for_processes(process_count: int, timeout: float = 3600.0) -> None:
  """Blocks until every process of a jax.distributed run has stored its chunks (§5b, Table 1).

  The public barrier of multihost_utils (every process agrees on the barrier's
  name), waited for in a thread so that a process that never arrives gives a
  TimeoutError after `timeout` seconds instead of a hang.

  Args:
    process_count: the number of processes; with 1 there is nothing to wait for.
    timeout: seconds to wait.

  Raises:
    TimeoutError: when the other processes do not arrive within `timeout`.

  Example:
    >>> lj.sweep.processes.wait_for_processes(1)  # a single process returns at once
  """
  if process_count == 1:
    return
  name = f"lagjax_sweep_{next(_barriers)}"
  failure = []

  def barrier():
    try:
      multihost_utils.sync_global_devices(name)
    except Exception as error:  # noqa: BLE001 (re-raised in the caller's thread)
      failure.append(error)

  waiter = threading.Thread(target=barrier, daemon=True)
  waiter.start()
  waiter.join(timeout)
  if waiter.is_alive():
    raise TimeoutError(f"the other processes did not store their chunks within {timeout:g} s "
                       f"(wait_timeout).")
  if failure:
    raise failure[0]


class SharedChunks:
  """Chunks computed once across the processes and read by all (§5b; module docstring).

  Args:
    folder: a folder every process sees; process 0 empties it first and removes it at close.

  Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...   shared = lj.sweep.processes.SharedChunks(folder)   # one process: no files
    ...   shared.map(lambda i: {"square": np.array(i * i)}, 3, None)
    [{'square': array(0)}, {'square': array(1)}, {'square': array(4)}]
  """

  def __init__(self, folder: str):
    self.folder = folder
    self.index, self.count = jax.process_index(), jax.process_count()
    self.calls = 0  # every process makes the same calls in the same order
    if self.count > 1:
      if self.index == 0:
        shutil.rmtree(folder, ignore_errors=True)  # chunks of an earlier run
      wait_for_processes(self.count)
      self.store = chunk_store.ChunkStore(folder)

  def map(self, compute: Callable[[int], object], num_chunks: int, template):
    """[compute(i) for i < num_chunks], each computed by one process; `template` is a
    pytree with the results' structure (e.g. from jax.eval_shape)."""
    if self.count == 1:
      return [compute(i) for i in range(num_chunks)]
    call, self.calls = self.calls, self.calls + 1
    leaves, treedef = jax.tree_util.tree_flatten(template)
    for i in my_chunks(num_chunks, self.index, self.count):
      computed = jax.tree_util.tree_leaves(compute(i))
      self.store.save(call, i, {f"leaf{k:04d}": np.asarray(x) for k, x in enumerate(computed)})
    wait_for_processes(self.count)
    stored = [self.store.load(call, i) for i in range(num_chunks)]
    return [jax.tree_util.tree_unflatten(treedef, [arrays[f"leaf{k:04d}"]
                                                   for k in range(len(leaves))])
            for arrays in stored]

  def close(self) -> None:
    """After every process has read the last chunks, process 0 removes the folder."""
    if self.count > 1:
      wait_for_processes(self.count)
      if self.index == 0:
        shutil.rmtree(self.folder, ignore_errors=True)


__all__ = ["SharedChunks", "my_chunks", "wait_for_processes"]
