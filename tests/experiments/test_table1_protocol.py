"""Table 1's protocol (experiments/table1_protocol.py): the selection step of run_task.

This test closes a blind spot of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): it kills the surviving mutants named in its docstring and
passes on the real code. It runs no training: a fake runner stands in for make_runner, so
nothing compiles.
"""

import types
from typing import NamedTuple

import jax
import numpy as np
import pytest

from experiments import table1_protocol as protocol
from experiments.configs import table1 as table1_configs


class _FakeRun(NamedTuple):
  risk: np.ndarray         # (R, records): the held-out loss
  test_metric: np.ndarray  # (R, records)
  diverged: np.ndarray     # (R,)


def _fake_runner_factory(diverge_above):
  """make_runner stand-in: a run's held-out metric is its largest step size (so a larger η is
  better), and a run diverges when that η exceeds `diverge_above`. No compilation."""

  def make_runner(task, model, slots, **options):
    def runner(keys, data):
      eta = np.asarray(data.etas).max(axis=1)  # runs (seeds, plans): make_grid_runner's form
      records = np.broadcast_to(np.stack([np.zeros_like(eta), eta], axis=1),
                                (keys.shape[0],) + eta.shape + (2,))
      diverged = np.broadcast_to(eta > diverge_above, records.shape[:2])
      return _FakeRun(np.zeros_like(records), records, diverged)
    return runner

  return make_runner


@pytest.mark.parametrize("metric_name", ["accuracy", "risk"])
def test_table1_selection_picks_the_best_non_diverged_candidate(metric_name):
  """run_task chooses, per row, the candidate with the best mean validation metric, and a
  diverged candidate scores worst. Metric: accuracy = η (higher is better) or risk = -η (lower
  is better), so both directions pick the largest η that does not diverge. Exact: the fake
  metric values are distinct floats, so ties and tolerances play no part.
  Kills: -np.inf -> np.inf for diverged runs (with accuracy a diverged candidate would win);
  also the missing sign flip for higher-is-better metrics."""

  config = table1_configs.get_config()
  protocol.quick(config)
  config.validation_seeds, config.num_seeds = 2, 2
  config.attention_multipliers = (1.0, 10.0)
  config.task_settings["occurrence"].eta_grid = (0.1, 0.3, 1.0, 3.0)
  config.task_settings["occurrence"].select_by = "metric"  # every loss is 0 here
  sign = 1.0 if metric_name == "accuracy" else -1.0
  diverge_above = 2.0
  base = _fake_runner_factory(diverge_above)

  def make_runner(*args, **options):
    runner = base(*args, **options)
    return lambda keys, data: runner(keys, data)._replace(
        test_metric=sign * runner(keys, data).test_metric)

  task = types.SimpleNamespace(metric_name=metric_name)
  selected, results = protocol.run_task(config, "occurrence", (task, None), jax.random.key(0),
                                        jax.random.key(1), make_runner=make_runner)
  found = protocol.candidates(config, "occurrence")
  assert set(results) == set(protocol.table_rows(config))
  for row, run in results.items():
    chosen = selected.chosen[row]
    competing = [c for c in found if row in c.rows]
    ok = [c for c in competing if max(c.etas().values()) <= diverge_above]
    expected = max(ok, key=lambda c: max(c.etas().values()))
    assert chosen == expected, (row, chosen, expected)
    np.testing.assert_array_equal(np.asarray(run.test_metric)[:, -1],
                                  sign * max(expected.etas().values()))
