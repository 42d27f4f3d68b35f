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
from lagjax.data import languages, regular
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base

CHUNK = 4096


class Batch(NamedTuple):
  """Padded strings: tokens (B, n_max) int, mask (B, n_max) bool, labels (B,), weight (B,).

  One chunk of a bucket of the sampled route (docs/theory.md §3c); rows past the sample
  are padding, with weight 0.

  Attributes:
    tokens (jax.Array): token ids (B, n_max), int.
    mask (jax.Array): True at real positions (B, n_max), bool.
    labels (jax.Array): y ∈ {-1, +1} (B,).
    weight (jax.Array): 1 for a drawn string, 0 for a padding row (B,).

  Example:
    >>> lang = lj.occurrence(4, length=lj.fixed(3))
    >>> batch = lj.risk.sampled.sample_batches(jax.random.key(0), lang, 100)[0]
    >>> batch.tokens.shape, int(batch.mask.sum()), int(batch.weight.sum())
    ((128, 8), 300, 100)
  """

  tokens: jax.Array
  mask: jax.Array
  labels: jax.Array
  weight: jax.Array


def bucket_length(n: int) -> int:
  """Smallest power of two >= n (at least 8): the bucket width max(8, 2^⌈log₂ n⌉) (§3c).

  Args:
    n: a string length (or a sample size, for the rows of a chunk).

  Returns:
    The bucket width, an int.

  Example:
    >>> [lj.risk.sampled.bucket_length(n) for n in (1, 8, 9, 100)]
    [8, 8, 16, 128]
  """
  return max(8, 1 << int(np.ceil(np.log2(max(n, 1)))))


@functools.partial(jax.jit, static_argnums=3)
def _draw_tokens(pi, key, lengths, width: int):
  """Tokens iid π for strings of the given lengths, padded to `width` (lengths 0 = unused
  row): (tokens, mask, weight). One compilation per (d, rows, width), whatever the language."""
  # Inverse-CDF sampling: one uniform per token instead of d Gumbels.
  cdf = jnp.cumsum(pi)[:-1]
  uniforms = jax.random.uniform(key, (lengths.shape[0], width))
  tokens = jnp.searchsorted(cdf, uniforms, side="right")
  mask = jnp.arange(width)[None, :] < lengths[:, None]
  return tokens, mask, (lengths > 0).astype(jnp.float64)


@functools.partial(jax.jit, static_argnums=0)
def _labels(lang: languages.Language, tokens, mask):
  return lang.label_tokens(tokens, mask)


def _labeler(lang: languages.Language):
  """(tokens, mask) -> y for `lang`. A DFA's table is padded to bucket_length(Q) states with
  rejecting states that loop on themselves (never reached) and passed as an argument, so
  DFAs of similar size share one compilation; other languages compile their own."""
  if not isinstance(lang, languages.AutomatonLabels):
    return functools.partial(_labels, lang)
  table, accepting, start = lang.automaton()
  extra = np.arange(table.shape[0], bucket_length(table.shape[0]))
  table = jnp.asarray(np.concatenate([table, np.repeat(extra[:, None], table.shape[1], axis=1)]))
  accepting = jnp.asarray(np.concatenate([accepting, np.zeros(extra.size, bool)]))
  return functools.partial(regular.read_labels, table, accepting, start)


def sample_batches(key, lang: languages.Language, n_samples: int,
                   chunk: int = CHUNK) -> list[Batch]:
  """Draws n_samples strings of `lang`, bucketed by length into padded chunks of `chunk` rows.

  Lengths n ~ L first, then tokens iid π by inverse CDF (docs/theory.md §3c). Each string
  goes to the bucket of width bucket_length(n), and each bucket is cut into chunks of
  min(chunk, bucket_length(n_samples)) rows: a handful of static shapes.

  Args:
    key: PRNG key.
    lang: the language (§1b).
    n_samples: the number of strings, >= 2.
    chunk: the most rows of a chunk.

  Returns:
    A list of Batch, the padding rows with weight 0.

  Example:
    Length 3 fits the bucket of width 8; 100 strings fill one chunk of 128 rows:

    >>> lang = lj.occurrence(4, length=lj.fixed(3))
    >>> batches = lj.risk.sampled.sample_batches(jax.random.key(0), lang, 100)
    >>> len(batches), batches[0].tokens.shape
    (1, (128, 8))
  """
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
  pi, label = jnp.asarray(lang.pi_array), _labeler(lang)
  batches = []
  for k, (padded, width) in zip(keys, chunks):
    tokens, mask, weight = _draw_tokens(pi, k, jnp.asarray(padded), width)
    batches.append(Batch(tokens, mask, label(tokens, mask), weight))
  return batches


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


class SampledRoute(base.RouteSpec):
  """The sampled route (docs/theory.md §3c): a Monte Carlo estimate of the risk of any loss
  and of the 0-1 error, with standard errors, for every language (it reads only
  label_tokens) and every layout. Not exact, so "auto" never takes it.

  Example:
    >>> route = lj.risk.ROUTES["sampled"]
    >>> print(route.supports(lj.occurrence(4), loss="logistic"))
    None
    >>> route.exact, route.any_layout
    (False, True)
  """

  name = "sampled"
  any_layout = True
  provides = frozenset({"risk", "error"})
  exact = False

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            n_samples: int = 10**5) -> base.Route:
    """Builds a Monte Carlo risk on a fixed sample of n_samples strings.

    The sample is drawn once, so risk(params) is a deterministic, differentiable
    empirical risk; report(params) adds its standard error and the 0-1 error
    (docs/theory.md §3c)::

      R̂ = (1/N) Σ_j ℓ_j,          SE = √( (mean(ℓ²) - R̂²) / (N - 1) )

    Args:
      lang: the language (§1b).
      partition: token groups of tied parameters; None means one group per token.
      loss: "squared", "logistic" or a callable (f, y) -> ℓ.
      layout: unused (the route reads every layout from params).
      key: PRNG key of the sample (required).
      n_samples: N, the strings drawn.

    Returns:
      A Route whose report(params) gives risk, stderr, error, error_stderr and n_samples;
      it takes params of any layout (§2b).

    Raises:
      ValueError: without a key.

    Example:
      At θ = 0 every string's squared loss is ½ and every string is a 0-1 error (sign 0
      counts as one), so both standard errors are 0:

      >>> lang = lj.occurrence(4, length=lj.fixed(3))
      >>> route = lj.risk.ROUTES["sampled"].build(lang, lj.partition.of_language(lang),
      ...                                         key=jax.random.key(0), n_samples=100)
      >>> report = route.report({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
      >>> [round(float(report[k]), 6) for k in ("risk", "stderr", "error", "error_stderr")]
      [0.5, 0.0, 1.0, 0.0]
    """
    del layout
    self.check_length_law(lang)
    if key is None:
      raise ValueError("route 'sampled' needs a PRNG key: risk_fn(..., key=jax.random.key(0)).")
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

    return base.Route(self.name, risk, report, partition)


__all__ = ["CHUNK", "Batch", "SampledRoute", "bucket_length", "sample_batches"]
