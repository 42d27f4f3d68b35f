"""What every engine returns: a plan's trajectory on token groups (docs/theory.md section 5).

Both engines (lagjax/dynamics/engines.py: the closed form and the step-by-step
loop) return a `Trajectory` on the same record grid (runner.record_grid), with
parameters tied on the token groups of `partition` (and the CLS scalars last
when `cls`). `expand` maps token-group values to per-token values; `lag`
computes the lag metrics of docs/theory.md §6 in the per-token norm without
forming per-token arrays.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from lagjax.data import partition as partition_lib
from lagjax.dynamics import metrics


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["params", "steps", "risk", "alpha", "beta", "diverged",
                                "diverged_step"],
                   meta_fields=["partition", "cls"])
@dataclasses.dataclass(frozen=True)
class Trajectory:
  """A plan simulated from θ0, recorded at `steps`: what both engines of docs/theory.md §5b
  return, on token groups.

  Attributes:
    params: final parameters on token groups ({"alpha": (G,), "beta": (G,)} [+ CLS]),
      those of the last finite record when the run diverged.
    steps: (R,) recorded global steps (a record at t holds the state before step t).
    risk: (R,) population risk at the records.
    alpha, beta: (R, G[+1]) token-group α and β, CLS last when `cls`.
    diverged: whether the run diverged (docs/theory.md §5); diverged_step: where (-1 if not).
    partition: the token groups; cls: whether the model has the CLS token.

  Example:
    >>> partition = lj.partition.of_language(lj.occurrence(3))  # groups {0} and {1, 2}
    >>> run = lj.dynamics.trajectory.Trajectory(  # one output step, as an engine returns it
    ...     params={"alpha": jnp.zeros(2), "beta": jnp.array([1.0, -0.5])},
    ...     steps=jnp.array([0, 1]), risk=jnp.array([0.5, 0.17]), alpha=jnp.zeros((2, 2)),
    ...     beta=jnp.array([[0.0, 0.0], [1.0, -0.5]]), diverged=jnp.array(False),
    ...     diverged_step=jnp.array(-1), partition=partition)
    >>> run.token_params()["beta"].tolist()  # per token: β_a, then the two others
    [1.0, -0.5, -0.5]
    >>> run.expand(run.beta).shape
    (2, 3)
    >>> run.lag().r_beta.tolist(), int(run.lag().half_time_alpha)  # α never moved
    ([0.0, 1.0], -1)
  """

  params: dict
  steps: jax.Array
  risk: jax.Array
  alpha: jax.Array
  beta: jax.Array
  diverged: jax.Array
  diverged_step: jax.Array
  partition: partition_lib.Partition
  cls: bool = False

  def expand(self, values):
    """Token-group values (..., G[+1]) -> per-token values (..., d) (CLS dropped; §3b).

    Args:
      values: (..., G) or (..., G+1) values on the token groups, CLS last.

    Returns:
      (..., d) per-token values.
    """
    return self.partition.expand(values[..., :self.partition.num_groups])

  def token_params(self) -> dict:
    """The final parameters per token (CLS scalars kept; §3b).

    Returns:
      The per-token ``{"alpha": (d,), "beta": (d,)}`` [+ "alpha_cls", "beta_cls"].
    """
    return dict(self.params, alpha=self.partition.expand(self.params["alpha"]),
                beta=self.partition.expand(self.params["beta"]))

  def lag(self, records=None) -> metrics.LagMetrics:
    """Lag metrics of docs/theory.md §6 over the records selected by the mask `records`
    (default all), in the per-token norm: ‖expand(x)‖ = ‖√k ⊙ x‖ for token-group sizes k.

    Args:
      records: (R,) boolean mask of the records to use (e.g. `Evaluation.uniform`), or
        None for all.

    Returns:
      LagMetrics over the selected records.
    """
    weights = np.sqrt(self.partition.metric(self.cls))
    select = slice(None) if records is None else np.asarray(records)
    return metrics.lag_metrics(weights * self.alpha[select], weights * self.beta[select],
                               self.steps[select])
