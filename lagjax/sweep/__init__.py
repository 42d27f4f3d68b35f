"""Vectorized, sharded, resumable sweeps over training plans (docs/theory.md §5b).

One concept per module: the table of configurations and its static groups (table.py), the
evaluator of one group and its sharded chunk run (evaluator.py), the resumable run and its
results (run.py), the on-disk store of finished chunks (chunk_store.py), and the work shared
by the processes of a jax.distributed run (processes.py).
"""

from lagjax.sweep import chunk_store, processes
from lagjax.sweep.evaluator import (
           OUTPUTS,
           SHARPNESS_OUTPUTS,
           Evaluator,
           chunked,
           make_evaluator,
           make_plan,
)
from lagjax.sweep.run import ProgressFn, risk_paths, run_sweep
from lagjax.sweep.table import ETA_NAMES, GroupKey, build_table, group_rows

__all__ = ["ETA_NAMES", "OUTPUTS", "SHARPNESS_OUTPUTS", "Evaluator", "GroupKey", "ProgressFn",
           "build_table", "chunk_store", "chunked", "group_rows", "make_evaluator", "make_plan",
           "processes", "risk_paths", "run_sweep"]
