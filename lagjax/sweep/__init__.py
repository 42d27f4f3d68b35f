"""Vectorized, sharded, resumable sweeps over training plans (lagjax/sweep/run.py), with the
on-disk store of finished chunks (lagjax/sweep/chunk_store.py)."""

from lagjax.sweep import chunk_store
from lagjax.sweep.run import (
    ETA_NAMES,
    OUTPUTS,
    Evaluator,
    GroupKey,
    ProgressFn,
    build_table,
    chunked,
    group_rows,
    make_evaluator,
    make_plan,
    risk_paths,
    run_sweep,
)

__all__ = ["ETA_NAMES", "OUTPUTS", "Evaluator", "GroupKey", "ProgressFn", "build_table",
           "chunk_store", "chunked", "group_rows", "make_evaluator", "make_plan", "risk_paths",
           "run_sweep"]
