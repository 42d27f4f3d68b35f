"""The table of a sweep (docs/theory.md §5b): one row per configuration, and its static groups.

A row is a plan name, d, the number of steps T, the plan's step sizes (the names of
plans.step_size_names(): a plan's unused ones are NaN), and for finite-sample plans the
sample size N and a seed. Rows sharing (plan, d, T, N) form a static group: one compiled
evaluator (lagjax/sweep/evaluator.py) serves them all.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagjax.dynamics import plans

# The step-size columns of a sweep table: every step-size name of the plan registry
# (plans.PLANS), in the results' column order.
ETA_NAMES = plans.step_size_names()


@dataclasses.dataclass(frozen=True)
class GroupKey:
  """The static part of a configuration (plan, d, T, N): one compiled evaluator per key (§5b).

  Attributes:
    plan: the plan's registry name (plans.PLANS).
    d: the alphabet size.
    steps: T, the length of the plan's last phase.
    n_samples: N for empirical objectives; 0 means population objectives.

  Example:
    >>> table = lj.sweep.build_table(["joint"], [3, 4], [10], {"eta": [0.5, 1.0]})
    >>> list(lj.sweep.group_rows(table))
    [GroupKey(plan='joint', d=3, steps=10, n_samples=0),
     GroupKey(plan='joint', d=4, steps=10, n_samples=0)]
  """

  plan: str
  d: int
  steps: int
  n_samples: int  # 0 means population objectives


def build_table(plan_names, d_list, steps_list, eta_grids: dict, *, n_samples_list=(0,),
                seeds=(0,)) -> dict[str, np.ndarray]:
  """The flattened sweep grid (§5b): per plan, the product of d, T, N, seed and its step sizes.

  Rows are in itertools.product order (the last factor varies fastest). Step
  sizes a plan does not use are NaN in its rows. Seeds only matter for empirical
  objectives: with every N = 0 the table has seed 0 alone.

  Args:
    plan_names: registry names (plans.PLANS).
    d_list: alphabet sizes d.
    steps_list: lengths T of the plans' last phases.
    eta_grids: {step-size name: values} for every name the plans use (ETA_NAMES).
    n_samples_list: sample sizes N (0: population objectives).
    seeds: the seeds of empirical runs.

  Returns:
    A dict of (rows,) arrays, one per column ("plan", "d", "steps", "n_samples", "seed"
    and ETA_NAMES).

  Example:
    >>> grids = {"eta1": [1.0, 2.0], "eta2": [10.0], "eta3": [0.5], "eta": [0.5]}
    >>> table = lj.sweep.build_table(["three_phase", "joint"], [3], [4], grids)
    >>> table["plan"].tolist()
    ['three_phase', 'three_phase', 'joint']
    >>> table["eta1"].tolist(), table["eta"].tolist()
    ([1.0, 2.0, nan], [nan, nan, 0.5])
  """
  seeds = tuple(seeds) if any(n_samples_list) else (0,)
  columns: dict[str, list] = {k: [] for k in ("plan", "d", "steps", "n_samples", "seed",
                                              *ETA_NAMES)}
  for plan in plan_names:
    names = plans.PLANS[plan].eta_names
    factors = [np.asarray(d_list, np.int64), np.asarray(steps_list, np.int64),
               np.asarray(n_samples_list, np.int64), np.asarray(seeds, np.int64),
               *(np.asarray(eta_grids[name], np.float64) for name in names)]
    grid = [axis.ravel() for axis in np.meshgrid(*factors, indexing="ij")]
    size = grid[0].size
    columns["plan"].append(np.full(size, plan))
    for name, values in zip(("d", "steps", "n_samples", "seed"), grid):
      columns[name].append(values)
    for name in ETA_NAMES:
      columns[name].append(grid[4 + names.index(name)] if name in names else np.full(size, np.nan))
  return {k: np.concatenate(v) if v else np.zeros(0) for k, v in columns.items()}


def group_rows(table) -> dict[GroupKey, np.ndarray]:
  """Row indices of each static group (plan, d, T, N), groups in order of first appearance (§5b).

  Args:
    table: a sweep table (build_table).

  Returns:
    A dict from each GroupKey to its (rows,) int row indices, rising.

  Example:
    >>> table = lj.sweep.build_table(["joint", "output_only"], [3], [10], {"eta": [0.5, 1.0]})
    >>> {key.plan: rows.tolist() for key, rows in lj.sweep.group_rows(table).items()}
    {'joint': [0, 1], 'output_only': [2, 3]}
  """
  names, plan_code = np.unique(table["plan"], return_inverse=True)
  columns = (plan_code.reshape(-1), table["d"], table["steps"], table["n_samples"])
  # One integer per row: its key's distinct-value indices read as a mixed-radix number.
  code = np.zeros(columns[0].size, np.int64)
  for column in columns:
    distinct, index = np.unique(column, return_inverse=True)
    code = code * distinct.size + index.reshape(-1)
  _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
  inverse = inverse.reshape(-1)
  rows = np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse))[:-1])
  return {GroupKey(str(names[columns[0][first[g]]]), *(int(c[first[g]]) for c in columns[1:])):
          rows[g] for g in np.argsort(first)}


__all__ = ["ETA_NAMES", "GroupKey", "build_table", "group_rows"]
