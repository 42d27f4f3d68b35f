"""Sampled route: Monte Carlo risk with its standard error (docs/theory.md section 3c).

Strings are drawn as n ~ L, then tokens iid π, and padded with a mask. Lengths
are unbounded, so samples are sorted into buckets of maximum length 2^k and
each bucket is cut into fixed-size chunks: a handful of static shapes, hence a
handful of compilations, and padding at most doubles the work.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base

CHUNK = 4096


class Batch(NamedTuple):
  """Padded strings: tokens (B, n_max) int, mask (B, n_max) bool, labels (B,), weight (B,)."""

  tokens: jax.Array
  mask: jax.Array
  labels: jax.Array
  weight: jax.Array


def bucket_length(n: int) -> int:
  """Smallest power of two >= n (at least 8)."""
  return max(8, 1 << int(np.ceil(np.log2(max(n, 1)))))


@functools.partial(jax.jit, static_argnums=(0, 3))
def _draw_chunk(lang: languages.Language, key, lengths, width: int) -> Batch:
  """Tokens iid π for strings of the given lengths, padded to `width` (lengths 0 = unused row)."""
  # Inverse-CDF sampling: one uniform per token instead of d Gumbels.
  cdf = jnp.cumsum(jnp.asarray(lang.pi_array))[:-1]
  uniforms = jax.random.uniform(key, (lengths.shape[0], width))
  tokens = jnp.searchsorted(cdf, uniforms, side="right")
  mask = jnp.arange(width)[None, :] < lengths[:, None]
  return Batch(tokens, mask, lang.label_tokens(tokens, mask), (lengths > 0).astype(jnp.float64))


def sample_batches(key, lang: languages.Language, n_samples: int,
                   chunk: int = CHUNK) -> list[Batch]:
  """Draws n_samples strings of `lang`, bucketed by length into padded chunks of `chunk` rows."""
  validation.check_int("n_samples", n_samples, 2, integral_floats=True)
  length_key, token_key = jax.random.split(key)
  lengths = np.asarray(lang.length.sample(length_key, (int(n_samples),)))
  buckets = np.maximum(8, 2 ** np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64))
  rows = min(chunk, bucket_length(int(n_samples)))
  chunks = []
  for width in np.unique(buckets):
    bucket_lengths = lengths[buckets == width]
    for start in range(0, bucket_lengths.size, rows):
      padded = np.zeros(rows, dtype=np.int64)
      part = bucket_lengths[start:start + rows]
      padded[: part.size] = part
      chunks.append((padded, int(width)))
  keys = jax.random.split(token_key, len(chunks))
  return [_draw_chunk(lang, k, jnp.asarray(padded), width)
          for k, (padded, width) in zip(keys, chunks)]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _chunk_sums(partition: partition_lib.Partition, loss_fn, params, batch: Batch):
  """Weighted sums of (ℓ, ℓ², error, error²) over one chunk. Compiled once per (partition,
  loss, chunk shape): a new key or new params reuse it, as chunk shapes come from a
  handful of power-of-two buckets."""
  # The barrier keeps XLA from constant-folding the position flags of a fixed sample (a
  # closed-over batch), which takes seconds per chunk at compile time and saves nothing.
  tokens, mask = jax.lax.optimization_barrier((batch.tokens, batch.mask))
  f = direct.forward_tokens(direct.expand_params(partition, params), tokens, mask)
  losses, errors = loss_fn(f, batch.labels), base.zero_one_error(f, batch.labels)
  return batch.weight @ jnp.stack([losses, losses**2, errors, errors**2], axis=1)


def supports(lang: languages.Language, loss) -> str | None:
  """The sampled route reads only label_tokens, which every Language has."""
  del lang, loss
  return None


def build(key, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
          loss="squared", n_samples: int = 10**5) -> base.Route:
  """Builds a Monte Carlo risk on a fixed sample of n_samples strings.

  The sample is drawn once, so risk(params) is a deterministic, differentiable
  empirical risk; report(params) adds its standard error and the 0-1 error.
  """
  partition = partition or partition_lib.singletons(lang.d)
  batches = sample_batches(key, lang, n_samples)
  total = float(sum(float(b.weight.sum()) for b in batches))
  loss_fn = base.get_loss(loss)

  def sums(params):
    return sum(_chunk_sums(partition, loss_fn, params, batch) for batch in batches) / total

  def risk(params):
    return sums(params)[0]

  def report(params):
    mean, mean_sq, error, error_sq = sums(params)
    stderr = jnp.sqrt(jnp.maximum(mean_sq - mean**2, 0.0) / (total - 1))
    error_stderr = jnp.sqrt(jnp.maximum(error_sq - error**2, 0.0) / (total - 1))
    return {"risk": mean, "stderr": stderr, "error": error, "error_stderr": error_stderr,
            "n_samples": int(total)}

  return base.Route("sampled", risk, report, partition)
