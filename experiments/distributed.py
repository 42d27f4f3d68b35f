"""Runs of one binary over several processes or hosts on jax.distributed (sweep, Table 1).

Start the same command on every host with
  --coordinator=HOST0:PORT --num_processes=P --process_id=p
and a workdir that every host sees. Importing this module defines the three flags.

`SharedChunks` splits a list of chunks over the processes: process p computes the chunks
with index ≡ p (mod P) and stores them in the workdir; after a barrier of the distributed
runtime every process reads all of them. Every process then holds the same results and
makes the same next choice (Table 1's step-size rounds), and process 0 writes the outputs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import jax
import numpy as np
from absl import flags

from lagjax.sweep import chunk_store
from lagjax.sweep.run import wait_for_processes

COORDINATOR = flags.DEFINE_string("coordinator", None, "host:port of process 0 (multi-host).")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", 1, "Processes in a multi-host run.")
PROCESS_ID = flags.DEFINE_integer("process_id", 0, "This process's index (multi-host).")


def initialize() -> bool:
  """Joins the jax.distributed runtime when --coordinator is given; True if it did."""
  if not COORDINATOR.value:
    return False
  jax.distributed.initialize(COORDINATOR.value, NUM_PROCESSES.value, PROCESS_ID.value)
  return True


class SharedChunks:
  """Chunks computed once across the processes and read by all (module docstring)."""

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
    for i in range(self.index, num_chunks, self.count):
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
