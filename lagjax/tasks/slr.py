"""Single-location regression (Marion et al. 2024; docs/theory.md section 7).

Tokens X_ℓ ∈ R^m, ℓ = 1 … n: X_ℓ ~ N(0, I_m) except one position J, uniform on
{1, …, n}, with X_J ~ N(√(m/2) k*, γ² I_m). The target is y = ⟨X_J, v*⟩ + ξ,
ξ ~ N(0, σ²). k* ⊥ v* are unit vectors fixed per task by `seed`, so
⟨X_J, v*⟩ ~ N(0, γ²) carries no trace of the mean √(m/2) k*. The loss is
squared, ℓ = ½(f - y)², and the metric is its mean (the empirical risk; the
noise alone costs σ²/2).

Marion et al.'s erf model on this data (docs/theory.md §7b): its exact population
risk is in lagjax.risk.erf_gaussian, its exact projected GD in lagjax.dynamics.erf_train.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data.lengths import Fixed, check_law
from lagjax.tasks import base

DEFAULT_LENGTH = Fixed(10)


def orthonormal_directions(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Unit vectors k* ⊥ v* in R^m from Gaussian draws and one Gram-Schmidt step
  (docs/theory.md §7).

  Args:
    m: the width, >= 2.
    seed: the NumPy seed that fixes both.

  Returns:
    (k*, v*), two (m,) float64 arrays.

  Example:
    >>> k_star, v_star = lj.tasks.slr.orthonormal_directions(5, seed=0)
    >>> round(float(k_star @ k_star), 12), round(float(v_star @ v_star), 12)
    (1.0, 1.0)
    >>> abs(float(k_star @ v_star)) < 1e-12
    True
  """
  k_draw, v_draw = np.random.default_rng(seed).standard_normal((2, m))
  k_star = k_draw / np.linalg.norm(k_draw)
  v_star = v_draw - (v_draw @ k_star) * k_star
  return k_star, v_star / np.linalg.norm(v_star)


def slr_task(*, m: int = 50, length=None, max_len=None, gamma: float = 1.0,
             noise_std: float = 0.1, seed: int = 0) -> base.Task:
  """Single-location regression in width m (docs/theory.md §7).

  Args:
    m: token width, >= 2 (k* ⊥ v* needs two dimensions).
    length: length law; None for Fixed(10). J is uniform on the drawn length.
    max_len: static padded length; None for the smallest N with P(n > N) <= 1e-3
      (10 for the default).
    gamma: γ > 0, the spread of X_J around √(m/2) k*.
    noise_std: σ >= 0, the target noise.
    seed: integer >= 0 that fixes k* and v*.

  Returns:
    A regression Task with feature inputs (B, max_len, m); Batch.info["location"]
    holds J (0-based), and ``extras`` holds k* and v*.

  Example:
    >>> task = lj.tasks.slr.slr_task(m=4, noise_std=0.0)  # Fixed(10): max_len 10
    >>> batch = task.sample(jax.random.PRNGKey(0), 3)
    >>> batch.inputs.shape
    (3, 10, 4)
    >>> signal = np.asarray(batch.inputs)[np.arange(3), batch.info["location"]]  # X_J
    >>> bool(np.allclose(signal @ task.extras["v_star"], batch.targets))  # y = ⟨X_J, v*⟩
    True
  """
  m = base.check_int("m", m, 2)
  length = DEFAULT_LENGTH if length is None else check_law(length, "the task 'slr'")
  max_len = base.check_max_len(max_len, length)
  gamma = base.check_positive("gamma", gamma)
  noise_std = base.check_positive("noise_std", noise_std, allow_zero=True)
  seed = base.check_int("seed", seed, 0)
  k_star, v_star = orthonormal_directions(m, seed)
  k_star.flags.writeable = False
  v_star.flags.writeable = False
  sample_lengths = base.truncated_length_sampler(length, max_len)
  signal_mean = jnp.asarray(np.sqrt(m / 2.0) * k_star)

  def sample(key, batch_size: int) -> base.Batch:
    length_key, location_key, token_key, signal_key, noise_key = jax.random.split(key, 5)
    lengths = sample_lengths(length_key, (batch_size,))
    location = jnp.minimum(
        jnp.floor(jax.random.uniform(location_key, (batch_size,)) * lengths).astype(lengths.dtype),
        lengths - 1)
    noise_tokens = jax.random.normal(token_key, (batch_size, max_len, m))
    signal = signal_mean + gamma * jax.random.normal(signal_key, (batch_size, m))
    at_location = jnp.arange(max_len)[None, :] == location[:, None]
    mask = base.length_mask(lengths, max_len)
    features = jnp.where(at_location[..., None], signal[:, None, :], noise_tokens)
    features = features * mask[..., None]
    targets = signal @ v_star + noise_std * jax.random.normal(noise_key, (batch_size,))
    return base.Batch(features, mask, targets, lengths, {"location": location})

  def risk(outputs, batch: base.Batch):
    base.check_outputs(outputs, batch.targets.shape, "one prediction f per sequence")
    return jnp.mean(0.5 * (outputs - batch.targets) ** 2)

  return base.make_task(
      name="slr", kind="regression", input_kind="features", input_dim=m, n_outputs=1,
      max_len=max_len, length=length, metric_name="risk",
      options={"m": m, "length": length, "max_len": max_len, "gamma": gamma,
               "noise_std": noise_std, "seed": seed},
      extras={"k_star": k_star, "v_star": v_star},
      sample=sample, loss=risk, metric=lambda outputs, batch: {"risk": risk(outputs, batch)})
