"""Attention-lag metrics of a trajectory θ_t (docs/theory.md section 6).

    r_α(t) = ‖α_t - α_0‖ / max_s ‖α_s - α_0‖,   r_β(t) likewise.

The lag gap mean_t (r_β(t) - r_α(t)) is positive when attention lags the output
layer. Half-progress times are the first recorded steps with r >= 1/2; a group
that never moves has r ≡ 0 and half-progress time -1 (and the ratio is -1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class LagMetrics(NamedTuple):
  r_alpha: jnp.ndarray
  r_beta: jnp.ndarray
  lag_gap: jnp.ndarray
  half_time_alpha: jnp.ndarray
  half_time_beta: jnp.ndarray
  half_time_ratio: jnp.ndarray


def relative_progress(trajectory) -> jnp.ndarray:
  """r(t) = ‖x_t - x_0‖ / max_s ‖x_s - x_0‖ for a trajectory (T+1, ...); 0 if it never moves."""
  flat = trajectory.reshape(trajectory.shape[0], -1)
  distance = jnp.linalg.norm(flat - flat[0], axis=-1)
  largest = distance.max()
  return jnp.where(largest > 0, distance / jnp.where(largest > 0, largest, 1.0), 0.0)


def half_time(progress, steps) -> jnp.ndarray:
  """First recorded step with progress >= 1/2, or -1 if there is none."""
  reached = progress >= 0.5
  return jnp.where(reached.any(), steps[jnp.argmax(reached)], -1)


def lag_metrics(alpha, beta, steps=None) -> LagMetrics:
  """Lag metrics from recorded α_t (T+1, d), β_t (T+1, d) at recorded steps (default 0…T)."""
  steps = jnp.arange(alpha.shape[0]) if steps is None else jnp.asarray(steps)
  r_alpha, r_beta = relative_progress(alpha), relative_progress(beta)
  t_alpha, t_beta = half_time(r_alpha, steps), half_time(r_beta, steps)
  ratio = jnp.where((t_alpha > 0) & (t_beta > 0), t_alpha / jnp.maximum(t_beta, 1), -1.0)
  return LagMetrics(r_alpha, r_beta, jnp.mean(r_beta - r_alpha), t_alpha, t_beta, ratio)
