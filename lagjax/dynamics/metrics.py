"""Attention-lag metrics of a trajectory θ_t (docs/theory.md sections 6 and 6b).

Run-normalised metric (section 6; `lag_metrics`, used by Table 1):

    r_α(t) = ‖α_t - α_0‖ / max_s ‖α_s - α_0‖,   r_β(t) likewise.

It depends on the horizon T, since the largest move within the run sets the scale.

Horizon-free metric (section 6b; `horizon_free_lag`): τ_ε is the first step with
risk <= ε, and progress is measured against the state at τ_ε,

    r_α(t) = ‖α_t - α_0‖ / ‖α_{τ_ε} - α_0‖,   r_β(t) likewise,

which does not change when the run is continued past τ_ε.

In both, the lag gap mean_t (r_β(t) - r_α(t)) is positive when attention lags the
output layer. Half-progress times are the first recorded steps with r >= 1/2; a
group that never moves has r ≡ 0 and half-progress time -1 (and the ratio is -1).

Every function takes the record axis as `steps`: the steps of a step engine, or the record
times of a gradient flow (lj.flow; Trajectory.lag passes `time` when a run has it), so
half-times and τ_ε come out in the run's own units.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class LagMetrics(NamedTuple):
  """The run-normalised attention-lag metrics of docs/theory.md §6 (`lag_metrics`).

  Attributes:
    r_alpha: (R,) r_α(t) = ‖α_t - α_0‖ / max_s ‖α_s - α_0‖ at the records.
    r_beta: (R,) r_β(t), likewise for β.
    lag_gap: mean_t (r_β(t) - r_α(t)); positive when attention lags the output layer.
    half_time_alpha: t_α^{1/2}, the first recorded step with r_α >= ½ (-1 if none).
    half_time_beta: t_β^{1/2}, likewise for β.
    half_time_ratio: t_α^{1/2} / t_β^{1/2}; -1 unless both half-times are > 0.

  Example:
    >>> lag = lj.metrics.lag_metrics(jnp.zeros((3, 2)), jnp.ones((3, 2)))  # nothing moves
    >>> lag.r_alpha.tolist(), int(lag.half_time_alpha), float(lag.half_time_ratio)
    ([0.0, 0.0, 0.0], -1, -1.0)
    >>> lag  # the scalars, and the shapes of the curves
    LagMetrics(lag_gap=0, half_time_alpha=-1, half_time_beta=-1, half_time_ratio=-1, r_α/r_β (3,))
  """

  r_alpha: jnp.ndarray
  r_beta: jnp.ndarray
  lag_gap: jnp.ndarray
  half_time_alpha: jnp.ndarray
  half_time_beta: jnp.ndarray
  half_time_ratio: jnp.ndarray

  def __repr__(self) -> str:
    return _short_repr(self)


def _short_repr(lag) -> str:
  """One line: the scalar metrics (their shapes under vmap), and the curves' shape."""
  def scalar(value):
    if np.ndim(value) or isinstance(value, jax.core.Tracer):
      return f"{tuple(np.shape(value))}"
    return f"{float(value):.6g}"

  scalars = ", ".join(f"{name}={scalar(getattr(lag, name))}" for name in lag._fields
                      if name not in ("r_alpha", "r_beta"))
  return f"{type(lag).__name__}({scalars}, r_α/r_β {tuple(np.shape(lag.r_alpha))})"


def relative_progress(trajectory) -> jnp.ndarray:
  """r(t) = ‖x_t - x_0‖ / max_s ‖x_s - x_0‖ for a trajectory (T+1, ...); 0 if it never moves
  (docs/theory.md §6).

  Args:
    trajectory: (R, ...) recorded values x_t of one parameter group (α or β), the first
      record x_0; trailing axes are flattened into the norm.

  Returns:
    (R,) r(t) in [0, 1]; r ≡ 0 when x never moves.

  Example:
    >>> x = jnp.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])  # ‖x_t - x_0‖ = 0, 5, 10
    >>> lj.metrics.relative_progress(x).tolist()
    [0.0, 0.5, 1.0]
  """
  distance = _distance(trajectory)
  largest = distance.max()
  return jnp.where(largest > 0, distance / jnp.where(largest > 0, largest, 1.0), 0.0)


def half_time(progress, steps) -> jnp.ndarray:
  """t^{1/2}: the first recorded step with progress r >= ½, or -1 if there is none
  (docs/theory.md §6); resolved to the record spacing.

  Args:
    progress: (R,) r(t) at the records (`relative_progress`).
    steps: (R,) the recorded steps (or times, for a flow).

  Returns:
    The step (or time), a scalar array (-1 when r never reaches ½).

  Example:
    >>> steps = jnp.array([0, 10, 20, 30])
    >>> int(lj.metrics.half_time(jnp.array([0.0, 0.25, 0.5, 1.0]), steps))
    20
    >>> int(lj.metrics.half_time(jnp.zeros(4), steps))  # never moved
    -1
  """
  reached = progress >= 0.5
  return jnp.where(reached.any(), steps[jnp.argmax(reached)], -1)


def lag_metrics(alpha, beta, steps=None) -> LagMetrics:
  """Lag metrics of docs/theory.md §6 from recorded α_t (T+1, d), β_t (T+1, d) at recorded
  steps (default 0…T).

  The lag gap is a plain mean over the records, a time average only when the records are
  uniformly spaced.

  Args:
    alpha: (R, d) recorded α_t (any trailing shape: flattened into the norm).
    beta: (R, d) recorded β_t.
    steps: (R,) the recorded steps (or times, for a flow); None for 0…R-1.

  Returns:
    LagMetrics: r_α, r_β, the lag gap mean_t (r_β - r_α), both half-times and their
    ratio t_α^{1/2} / t_β^{1/2}.

  Example:
    >>> alpha = jnp.array([[0.0], [0.0], [1.0]])  # attention moves last
    >>> beta = jnp.array([[0.0], [1.0], [1.0]])   # the output layer first
    >>> lag = lj.metrics.lag_metrics(alpha, beta)
    >>> round(float(lag.lag_gap), 6)  # mean of r_β - r_α = (0, 1, 0)
    0.333333
    >>> int(lag.half_time_alpha), int(lag.half_time_beta), float(lag.half_time_ratio)
    (2, 1, 2.0)
  """
  steps = jnp.arange(alpha.shape[0]) if steps is None else jnp.asarray(steps)
  r_alpha, r_beta = relative_progress(alpha), relative_progress(beta)
  t_alpha, t_beta, ratio = _half_times(r_alpha, r_beta, steps)
  return LagMetrics(r_alpha, r_beta, jnp.mean(r_beta - r_alpha), t_alpha, t_beta, ratio)


def _half_times(r_alpha, r_beta, steps):
  """(t_α^{1/2}, t_β^{1/2}, their ratio); the ratio is -1 unless both are > 0."""
  t_alpha, t_beta = half_time(r_alpha, steps), half_time(r_beta, steps)
  ratio = jnp.where((t_alpha > 0) & (t_beta > 0), t_alpha / jnp.maximum(t_beta, 1), -1.0)
  return t_alpha, t_beta, ratio


# Lag metrics relative to the state at τ_ε (docs/theory.md section 6b): the fields of
# LagMetrics and τ_ε; -1 where undefined.
HorizonFreeLag = NamedTuple("HorizonFreeLag",
                            [*LagMetrics.__annotations__.items(), ("tau_eps", jnp.ndarray)])
HorizonFreeLag.__repr__ = _short_repr
HorizonFreeLag.__doc__ = """The horizon-free lag metrics of docs/theory.md §6b (`horizon_free_lag`).

The fields of `LagMetrics`, with progress measured against the state at τ_ε, and τ_ε.

Attributes:
  r_alpha: (R,) r_α(t) = ‖α_t - α_0‖ / ‖α_{τ_ε} - α_0‖ for t <= τ_ε, 0 after.
  r_beta: (R,) r_β(t), likewise for β.
  lag_gap: the mean of r_β - r_α over the records up to τ_ε (NaN if ε is never reached).
  half_time_alpha: t_α^{1/2}, the first step with r_α >= ½ (-1 if none).
  half_time_beta: t_β^{1/2}, likewise for β.
  half_time_ratio: t_α^{1/2} / t_β^{1/2} (> 1: attention lags); -1 unless both are > 0.
  tau_eps: τ_ε, the first recorded step with risk <= ε (-1 if none).

Example:
  >>> lj.metrics.HorizonFreeLag._fields[-2:]
  ('half_time_ratio', 'tau_eps')
"""


def first_step_at_most(risk, epsilon, steps=None) -> jnp.ndarray:
  """τ_ε: the first recorded step with risk <= ε, or -1 if there is none (NaN never counts;
  docs/theory.md §6b).

  Args:
    risk: (R,) the risk R(θ_t) at the records.
    epsilon: the risk level ε.
    steps: (R,) the recorded steps; None for 0…R-1.

  Returns:
    τ_ε, an integer scalar array.

  Example:
    >>> risk = jnp.array([0.5, jnp.nan, 0.2, 0.05, 0.01])
    >>> int(lj.metrics.first_step_at_most(risk, 0.1))
    3
    >>> int(lj.metrics.first_step_at_most(risk, 0.1, steps=jnp.array([0, 5, 10, 15, 20])))
    15
    >>> int(lj.metrics.first_step_at_most(risk, 1e-3))  # ε never reached
    -1
  """
  steps = jnp.arange(risk.shape[0]) if steps is None else jnp.asarray(steps)
  reached = risk <= epsilon
  return jnp.where(reached.any(), steps[jnp.argmax(reached)], -1)


def _distance(trajectory, weights=None):
  """‖x_t - x_0‖ per record; weights w_g (G,) give sqrt(Σ_g w_g (x_tg - x_0g)²), the
  per-token norm of grouped parameters when w_g is the group size."""
  flat = trajectory.reshape(trajectory.shape[0], -1)
  moved = (flat - flat[0]) ** 2
  return jnp.sqrt(moved.sum(-1) if weights is None else moved @ jnp.asarray(weights))


def horizon_free_lag(alpha, beta, risk, epsilon, steps=None, weights=None) -> HorizonFreeLag:
  """Lag metrics of docs/theory.md section 6b from records taken at `steps` (default 0…T).

  Args:
    alpha, beta: recorded parameters (R, G); risk: (R,) risk at the same records.
    epsilon: the risk level ε that defines τ_ε.
    steps: recorded steps (R,); half-times are exact steps when every step is recorded.
    weights: optional per-coordinate weights of the norm (group sizes for tied runs).

  Returns:
    HorizonFreeLag. Progress is normalised by the move up to τ_ε; the lag gap is the
    mean of r_β - r_α over the records up to τ_ε. When the risk never reaches ε, the
    times and the ratio are -1, r ≡ 0 and the lag gap is NaN; a group that has not
    moved by τ_ε has r ≡ 0.

  Example:
    >>> risk = jnp.array([0.5, 0.4, 0.2, 0.05, 0.01])         # τ_ε = 3 at ε = 0.1
    >>> alpha = jnp.array([[0.0], [0.0], [1.0], [2.0], [3.0]])
    >>> beta = jnp.array([[0.0], [2.0], [4.0], [4.0], [4.0]])
    >>> lag = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
    >>> int(lag.tau_eps), lag.r_alpha.tolist(), lag.r_beta.tolist()
    (3, [0.0, 0.0, 0.5, 1.0, 0.0], [0.0, 0.5, 1.0, 1.0, 0.0])
    >>> int(lag.half_time_alpha), int(lag.half_time_beta), float(lag.half_time_ratio)
    (2, 1, 2.0)
    >>> float(lag.lag_gap)  # mean of (0, 0.5, 0.5, 0) up to τ_ε
    0.25
  """
  return _horizon_free_lag(alpha, beta, risk, epsilon, steps, weights)


@jax.jit  # one program per shape; on a concrete run its operations would compile one by one
def _horizon_free_lag(alpha, beta, risk, epsilon, steps, weights) -> HorizonFreeLag:
  """horizon_free_lag's computation (its docstring)."""
  steps = jnp.arange(alpha.shape[0]) if steps is None else jnp.asarray(steps)
  tau = first_step_at_most(risk, epsilon, steps)
  reached = tau >= 0
  until = reached & (steps <= tau)
  index = jnp.argmax(steps == tau)

  def progress(trajectory):
    distance = _distance(trajectory, weights)
    scale = distance[index]
    moved = reached & (scale > 0)
    return jnp.where(moved & until, distance / jnp.where(moved, scale, 1.0), 0.0)

  r_alpha, r_beta = progress(alpha), progress(beta)
  # r is 0 after τ_ε and when ε is never reached, so the half-times are those up to τ_ε or -1.
  t_alpha, t_beta, ratio = _half_times(r_alpha, r_beta, steps)
  count = jnp.maximum(until.sum(), 1)
  gap = jnp.where(reached, jnp.sum(jnp.where(until, r_beta - r_alpha, 0.0)) / count, jnp.nan)
  return HorizonFreeLag(r_alpha, r_beta, gap, t_alpha, t_beta, ratio, tau)



def sharpness_summary(sharpness, steps, etas) -> dict:
  """The sharpness figures of a run (docs/theory.md §5d): its largest λ_max, λ_max at the
  end, and the first record where GD's step is unstable along the top direction.

  Args:
    sharpness: (..., R) λ_max at the records (NaN where the risk was not finite).
    steps: (R,) the record axis (steps, or a flow's times).
    etas: the step size of the step at each record, (R,) or a scalar.

  Returns:
    {"max_sharpness": max_t λ_t (NaNs ignored), "end_sharpness": λ at the last record,
    "first_unstable_step": the first record step with η·λ > 2, -1 if none}.

  Example:
    >>> summary = lj.metrics.sharpness_summary(jnp.array([1.0, 1.5, 2.5, 1.0]),
    ...                                        jnp.array([0, 1, 2, 4]), 1.0)
    >>> {name: float(value) for name, value in summary.items()}
    {'max_sharpness': 2.5, 'end_sharpness': 1.0, 'first_unstable_step': 2.0}
  """
  sharpness = jnp.asarray(sharpness)
  unstable = jnp.asarray(etas) * sharpness > 2.0
  first = jnp.where(unstable.any(-1), jnp.asarray(steps)[jnp.argmax(unstable, -1)], -1)
  return {"max_sharpness": jnp.nanmax(sharpness, -1), "end_sharpness": sharpness[..., -1],
          "first_unstable_step": first}
