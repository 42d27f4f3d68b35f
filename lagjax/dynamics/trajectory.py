"""The one run record of lagjax: a plan's trajectory (docs/theory.md sections 5 and 6).

Every engine returns a `Trajectory`: lj.train and lj.train_kqv (per-token values), the
task trainer (flattened parameter groups), the erf-SLR trainer (k, v), the closed form
and the engines of lagjax/dynamics/engines.py (token-group values on the record grid
runner.record_grid), and scaling's tied joint GD (every step). Its fields are the same
whatever the engine:

- steps (R,): the record grid, the state before step t at a record t; time (R,): the
  record times of a continuous-time engine (None for the step engines);
- risk (R,): the run's objective at the records (the population risk, or the held-out
  loss of a task run); alpha, beta (R, ...): the attention and the output group;
- params: the final parameters; diverged, diverged_step: the divergence rule of §5;
- records: further per-record arrays of the engine (the 0-1 error, the attention
  margin, a task's metric, ...), summary: further per-run values (τ_ε, ...), and info:
  static facts (the route's name, ...). All three read as attributes too: run.error is
  run.records["error"].

`partition` says what alpha and beta are indexed by: token groups (then `expand` maps
them to tokens and `lag` measures in the per-token norm), or None when they are per
token or flat already. `lag` gives the metrics of §6.
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
                                "diverged_step", "time", "records", "summary"],
                   meta_fields=["partition", "cls", "info"])
@dataclasses.dataclass(frozen=True)
class Trajectory:
  """A plan simulated from θ0, recorded at `steps`: what every engine returns (§5, §6).

  Under vmap every array gets the leading axes of the runs (seeds, step sizes).

  Attributes:
    params: the final parameters (those of the step at which the run diverged, if it did).
    steps: (R,) the record grid: a record at t holds the state before step t.
    risk: (R,) the run's objective at the records (population risk, held-out loss, ...).
    alpha: (R, ...) the attention group at the records (α, a model's attention leaves
      flattened, k).
    beta: (R, ...) the output group at the records (β, the output leaves flattened, v).
      (A bare runner.make_loop whose record function gives no "risk", "alpha" or "beta"
      leaves that field None.)
    diverged: whether the run diverged (docs/theory.md §5); diverged_step: where (-1 if not).
    time: (R,) record times of a continuous-time engine; None for step engines.
    records: further per-record arrays, each (R, ...), by name (read as attributes too).
    summary: further per-run values by name (read as attributes too).
    partition: the token groups alpha and beta live on, or None when they are per token
      or flat.
    cls: whether the model has the CLS token (its scalars last on the token groups).
    info: static (name, value) pairs about the run (the route, ...; read as attributes).

  Example:
    >>> partition = lj.partition.of_language(lj.occurrence(3))  # groups {0} and {1, 2}
    >>> run = lj.dynamics.trajectory.Trajectory(  # one output step, as an engine returns it
    ...     params={"alpha": jnp.zeros(2), "beta": jnp.array([1.0, -0.5])},
    ...     steps=jnp.array([0, 1]), risk=jnp.array([0.5, 0.17]), alpha=jnp.zeros((2, 2)),
    ...     beta=jnp.array([[0.0, 0.0], [1.0, -0.5]]), diverged=jnp.array(False),
    ...     diverged_step=jnp.array(-1), records={"margin": jnp.zeros(2)},
    ...     partition=partition, info=(("route", "laplace"),))
    >>> run
    Trajectory: 2 records, steps 0…1, not diverged
      risk 0.5 → 0.17; alpha (2, 2), beta (2, 2) on 2 token groups
      records: margin
      info: route='laplace'
    >>> run.token_params()["beta"].tolist()  # per token: β_a, then the two others
    [1.0, -0.5, -0.5]
    >>> run.expand(run.beta).shape
    (2, 3)
    >>> run.margin.tolist(), run.route  # records and info read as attributes
    ([0.0, 0.0], 'laplace')
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
  time: jax.Array | None = None
  records: dict = dataclasses.field(default_factory=dict)
  summary: dict = dataclasses.field(default_factory=dict)
  partition: partition_lib.Partition | None = None
  cls: bool = False
  info: tuple = ()

  def __getattr__(self, name):
    # Called only when no field has the name: look in records, summary and info.
    fields = self.__dict__
    for source in (fields.get("records", {}), fields.get("summary", {}),
                   dict(fields.get("info", ()))):
      if name in source:
        return source[name]
    raise AttributeError(f"Trajectory has no field, record, summary or info {name!r}.")

  def __repr__(self) -> str:
    steps = self.steps
    grid = f"{steps.shape[-1]} records"
    if _concrete(steps) and steps.ndim == 1 and steps.size:
      grid += f", steps {int(steps[0])}…{int(steps[-1])}"
    if steps.ndim > 1:
      grid += f" (runs {tuple(steps.shape[:-1])})"
    diverged = (("diverged at step " + str(int(self.diverged_step))
                 if bool(self.diverged) else "not diverged")
                if _concrete(self.diverged) and np.ndim(self.diverged) == 0
                else f"diverged {tuple(np.shape(self.diverged))}")
    risk = (f"risk {_number(self.risk[0])} → {_number(self.risk[-1])}"
            if self.risk is not None and _concrete(self.risk) and self.risk.ndim == 1
            and self.risk.size else f"risk {_shape(self.risk)}")
    on = (f" on {self.partition.num_groups} token groups" if self.partition is not None
          else "")
    lines = [f"Trajectory: {grid}, {diverged}",
             f"  {risk}; alpha {_shape(self.alpha)}, beta {_shape(self.beta)}{on}"]
    extras = [f"{label}: {', '.join(names)}" for label, names in (
        ("time", ["recorded"] if self.time is not None else []),
        ("records", list(self.records)), ("summary", list(self.summary))) if names]
    if extras:
      lines.append("  " + "; ".join(extras))
    if self.info:
      lines.append("  info: " + ", ".join(f"{name}={value!r}" for name, value in self.info))
    return "\n".join(lines)

  def expand(self, values):
    """Token-group values (..., G[+1]) -> per-token values (..., d) (CLS dropped; §3b);
    values already per token (partition None) are returned as they are.

    Args:
      values: (..., G) or (..., G+1) values on the token groups, CLS last.

    Returns:
      (..., d) per-token values.
    """
    if self.partition is None:
      return values
    return self.partition.expand(values[..., :self.partition.num_groups])

  def token_params(self) -> dict:
    """The final parameters per token (CLS scalars kept; §3b).

    Returns:
      The per-token ``{"alpha": (d,), "beta": (d,)}`` [+ "alpha_cls", "beta_cls"].
    """
    if self.partition is None:
      return self.params
    return dict(self.params, alpha=self.partition.expand(self.params["alpha"]),
                beta=self.partition.expand(self.params["beta"]))

  def lag(self, records=None) -> metrics.LagMetrics:
    """Lag metrics of docs/theory.md §6 over the records selected by the mask `records`
    (default all), in the per-token norm: ‖expand(x)‖ = ‖√k ⊙ x‖ for token-group sizes k;
    half-times in time units when the run has `time` (a flow), else in steps.

    Args:
      records: (R,) boolean mask of the records to use (e.g. `Evaluation.uniform`), or
        None for all.

    Returns:
      LagMetrics over the selected records.
    """
    select = slice(None) if records is None else np.asarray(records)
    # A continuous-time run measures its half-times in time units (§5), a step run in steps.
    clock = (self.steps if self.time is None else self.time)[select]
    if self.partition is None:
      return metrics.lag_metrics(self.alpha[select], self.beta[select], clock)
    weights = np.sqrt(self.partition.metric(self.cls))
    return metrics.lag_metrics(weights * self.alpha[select], weights * self.beta[select], clock)


def _concrete(array) -> bool:
  """Whether `array` holds numbers (not a tracer under jit or vmap)."""
  return not isinstance(array, jax.core.Tracer)


def _shape(array) -> str:
  return "none" if array is None else str(tuple(array.shape))


def _number(value) -> str:
  return f"{float(value):.6g}"
