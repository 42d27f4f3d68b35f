"""Runs of one binary over several processes or hosts on jax.distributed (sweep, Table 1).

Start the same command on every host with
  --coordinator=HOST0:PORT --num_processes=P --process_id=p
and a workdir that every host sees. Importing this module defines the three flags.

The chunks are then split by the library's one mechanism, lagjax/sweep/processes.py:
run_sweep for the sweep, SharedChunks (re-exported here) for Table 1's blocks. Every
process holds the same results and makes the same next choice (Table 1's step-size rounds),
and process 0 writes the outputs.
"""

from __future__ import annotations

import jax
from absl import flags

from lagjax.sweep.processes import SharedChunks

COORDINATOR = flags.DEFINE_string("coordinator", None, "host:port of process 0 (multi-host).")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", 1, "Processes in a multi-host run.")
PROCESS_ID = flags.DEFINE_integer("process_id", 0, "This process's index (multi-host).")


def initialize() -> bool:
  """Joins the jax.distributed runtime when --coordinator is given; True if it did."""
  if not COORDINATOR.value:
    return False
  # jax.distributed's preemption service catches SIGTERM (to reach a sync point lagjax never
  # asks for), so a plain `kill` left the processes running. Off, SIGTERM ends a process as
  # it does a one-process run; the chunk stores resume what was finished.
  jax.config.update("jax_enable_preemption_service", False)
  jax.distributed.initialize(COORDINATOR.value, NUM_PROCESSES.value, PROCESS_ID.value)
  return True


__all__ = ["COORDINATOR", "NUM_PROCESSES", "PROCESS_ID", "SharedChunks", "initialize"]
