"""Exact gradient noise: the covariance of per-string gradients, which minibatch SGD samples
(docs/theory.md section 3f).

A minibatch of B fresh strings estimates ∇R(θ) = E ∇ℓ(θ; x) with covariance Σ(θ)/B, where

    Σ(θ) = Cov_x[∇ℓ(θ; x)] = E[∇ℓ ∇ℓᵀ] − ∇R ∇Rᵀ.

For a language whose labels follow from the presence of letters, the plain model's output
and its gradient depend on a string only through its count vector, so the lattice route's
enumeration (§3b) gives both moments exactly, up to the mass it leaves out (≤ tol). For a
language with CountLabels, in any layout, the count route's enumeration of (c, a, b)
(§3g) does the same: the strings of one slot share f and ∇f, and their labels split as
q : 1 - q. For any other language, Σ is estimated from sampled strings (§3c), with the
standard error of every entry.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, count, lattice, sampled


class GradientNoise(NamedTuple):
  """Σ(θ) = Cov[∇ℓ(θ; x)] over the parameters flattened as `ravel_pytree(θ)` (§3f).

  Attributes:
    mean: (P,) E ∇ℓ = ∇R(θ), the population gradient.
    covariance: (P, P) Σ(θ).
    standard_error: None where exact; else (P, P), the standard error of each entry.
    exact: whether the moments come from the lattice enumeration.
    mass_left_out: the probability mass the enumeration leaves out (exact only; ≤ tol).
    num_samples: the strings sampled (0 where exact).

  Example:
    >>> noise = lj.gradient_noise(lj.occurrence(3), lj.init_params(3))
    >>> noise.covariance.shape, noise.exact, noise.standard_error is None
    ((6, 6), True, True)
  """

  mean: jnp.ndarray
  covariance: jnp.ndarray
  standard_error: jnp.ndarray | None
  exact: bool
  mass_left_out: float
  num_samples: int


def _per_string_gradients(loss_fn, params, inputs, labels, forward):
  """(K, P) gradients of ℓ(f_θ(x_k), y_k) with respect to the flat parameters."""
  flat, unravel = ravel_pytree(params)

  def gradient(one_input, label):
    return jax.grad(lambda x: loss_fn(forward(unravel(x), one_input), label))(flat)

  return jax.vmap(gradient)(inputs, labels)


def _exact(lang, params, loss_fn, partition, tol):
  partition = partition or partition_lib.singletons(lang.d)
  enum = lattice.enumeration(lang, partition, tol)
  grads = jax.jit(_per_string_gradients, static_argnums=(0, 4))(
      loss_fn, params, enum.counts, enum.targets,
      lambda p, c: direct.forward_counts(p, c[None])[0])
  mean = enum.weights @ grads
  second = (grads * enum.weights[:, None]).T @ grads
  return GradientNoise(mean, second - jnp.outer(mean, mean), None, True,
                       float(enum.tail), 0)


def _exact_count(lang, params, loss_fn, partition, tol):
  """Σ from the count route's slots (§3g): ∇ℓ(f, y) = ℓ'(f, y) ∇f, with ∇f of every slot by
  forward mode over the few parameters, and the slot's masses P₊, P₋ of y = ±1."""
  _, enum = count.checked_enumeration(lang, partition, direct.layout(params), tol)
  flat, unravel = ravel_pytree(params)

  @jax.jit
  def moments(flat):
    def outputs(x):
      return count.outputs(unravel(x), enum).reshape(-1)

    f, jacobian = outputs(flat), jax.jacfwd(outputs)(flat)            # (M,), (M, P)
    mean, second = 0.0, 0.0
    for label, masses in ((1.0, enum.positive), (-1.0, enum.negative)):
      slope = jax.vmap(jax.grad(loss_fn), in_axes=(0, None))(f, label)
      grads = slope[:, None] * jacobian
      masses = masses.reshape(-1)
      mean = mean + masses @ grads
      second = second + (grads * masses[:, None]).T @ grads
    return mean, second

  mean, second = moments(flat)
  return GradientNoise(mean, second - jnp.outer(mean, mean), None, True, float(enum.tail), 0)


def _sampled(lang, params, loss_fn, num_samples, key):
  grads, weights = [], []
  for batch in sampled.sample_batches(key, lang, num_samples):
    inputs = (batch.tokens, batch.mask)
    grads.append(jax.jit(_per_string_gradients, static_argnums=(0, 4))(
        loss_fn, params, inputs, batch.labels,
        lambda p, x: direct.forward_tokens(p, x[0][None], x[1][None])[0]))
    weights.append(batch.weight)
  keep = np.asarray(jnp.concatenate(weights)) > 0
  grads = jnp.concatenate(grads)[keep]
  count = grads.shape[0]
  mean = grads.mean(0)
  centred = grads - mean
  products = centred[:, :, None] * centred[:, None, :]          # (N, P, P)
  covariance = products.sum(0) / (count - 1)
  standard_error = products.std(0, ddof=1) / np.sqrt(count)
  return GradientNoise(mean, covariance, standard_error, False, 0.0, count)


def gradient_noise(lang: languages.Language, params, *, loss="squared",
                   partition: partition_lib.Partition | None = None, tol: float = 1e-12,
                   method: str = "auto", num_samples: int = 100_000,
                   key=None) -> GradientNoise:
  """The covariance of per-string gradients Σ(θ) = Cov[∇ℓ(θ; x)] and its mean ∇R(θ) (§3f).

  "exact" enumerates count vectors (the lattice route's `enumeration`): for languages with
  PresenceLabels and the plain model (CLS query, no position tables; the CLS token
  allowed), on the token groups of `partition` (params then hold one value per group: the
  noise of the tied model's gradient); and for languages with CountLabels in any layout,
  by the count route's enumeration of (c, a, b) (§3g). "sampled" draws `num_samples`
  strings (§3c) and gives each entry's standard error. "auto" takes "exact" where it applies.

  Args:
    lang: the language.
    params: θ, per token (or per group of `partition` for "exact").
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    partition: the token groups params are on ("exact" only); None for one per token.
    tol: the mass the enumeration may leave out, in (0, 1).
    method: "auto", "exact" or "sampled".
    num_samples: strings drawn by "sampled", ≥ 2.
    key: PRNG key of "sampled" (default key 0).

  Returns:
    A GradientNoise.

  Raises:
    ValueError: an unknown method, "exact" where it does not apply, or a bad tol.

  Example:
    At θ = 0, f ≡ 0 and ∇_β ℓ = −y W, W the attention masses: on occurrence's two token
    groups at d = 3 (P(y = +1) = ½), the β-gradient's mean is −(1/3, −1/3) and its
    variance has the second moment E[W_a²] − (1/3)² on the first group:

    >>> lang = lj.occurrence(3)
    >>> groups = lj.partition.of_language(lang)
    >>> noise = lj.risk.gradient_noise(lang, {"alpha": jnp.zeros(2), "beta": jnp.zeros(2)},
    ...                                partition=groups)
    >>> noise.exact, np.round(np.asarray(noise.mean), 6).tolist()
    (True, [0.0, 0.0, -0.333333, 0.333333])
    >>> bool(noise.covariance[2, 2] > 0)
    True
  """
  validation.check_choice("method", method, ("auto", "exact", "sampled"))
  if not 0.0 < tol < 1.0:
    raise ValueError(f"tol must lie in (0, 1); got {tol!r}.")
  loss_fn = base.get_loss(loss)
  layout = direct.layout(params)
  presence = isinstance(lang, languages.PresenceLabels) and layout.plain
  enumerable = presence or isinstance(lang, languages.CountLabels)
  if method == "exact" and not enumerable:
    raise ValueError("method 'exact' enumerates count vectors: it needs a language with "
                     "PresenceLabels and the plain model (CLS query, no position tables), or "
                     f"one with CountLabels; got {lang.describe()} with {layout}. Use "
                     "method='sampled'.")
  if method == "sampled" or not enumerable:
    if partition is not None:
      raise ValueError("partition applies to method 'exact' only; pass per-token params.")
    validation.check_int("num_samples", num_samples, 2, integral_floats=True)
    return _sampled(lang, params, loss_fn, int(num_samples),
                    jax.random.key(0) if key is None else key)
  if presence:
    return _exact(lang, params, loss_fn, partition, tol)
  return _exact_count(lang, params, loss_fn, partition, tol)


__all__ = ["GradientNoise", "gradient_noise"]
