"""Count vectors of fresh strings, for languages whose label is a function of counts.

A string's token counts c ∈ N^d (with n = Σc ~ L and the tokens iid π) are all
that the direct model reads (docs/theory.md §2), so empirical objectives and
sampled 0-1 errors draw count vectors instead of strings. The label must then
be a function of the counts: the language must declare PresenceLabels.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import protocol
from lagjax.data.lengths import provides


def _check_count_labels(lang) -> None:
  reason = protocol.missing(lang, protocol.PresenceLabels, "labels from token counts")
  if reason:
    raise ValueError(f"count-vector sampling needs labels that are a function of token counts: "
                     f"{reason}.")


def sample_counts(key, lang: protocol.Language, n_samples: int):
  """Token counts (N, d) and labels (N,) of N fresh strings (multinomial as chained binomials).

  Given n ~ L, c_σ ~ Binomial(n - Σ_{τ<σ} c_τ, π_σ / (1 - Σ_{τ<σ} π_τ)), the last letter
  taking the remainder; one lax.scan over the letters (docs/theory.md §1).

  Args:
    key: a PRNG key.
    lang: a language that declares PresenceLabels (§1b).
    n_samples: N.

  Returns:
    A pair: the counts (N, d), float, each row summing to its length n, and the labels
    (N,) in {-1, +1}.

  Raises:
    ValueError: when `lang` does not declare PresenceLabels.

  Example:
    >>> lang = lj.occurrence(4, length=lj.fixed(5))
    >>> counts, labels = lj.data.sampling.sample_counts(jax.random.PRNGKey(0), lang, 3)
    >>> counts, labels = np.asarray(counts), np.asarray(labels)
    >>> counts.shape, counts.sum(axis=1).tolist()   # Σ_σ c_σ = n = 5
    ((3, 4), [5.0, 5.0, 5.0])
    >>> bool(np.all(labels == np.where(counts[:, 0] > 0, 1.0, -1.0)))   # y = +1 iff c_0 > 0
    True
  """
  _check_count_labels(lang)
  length_key, count_key = jax.random.split(key)
  lengths = lang.length.sample(length_key, (n_samples,)).astype(jnp.float64)
  pi = lang.pi_array
  # P(σ | not one of 0…σ-1); a scan keeps one binomial sampler in the compiled graph.
  conditional = np.minimum(1.0, pi[:-1] / (1.0 - np.concatenate([[0.0], np.cumsum(pi)[:-2]])))

  def next_count(remaining, inputs):
    step_key, p = inputs
    count = jax.random.binomial(step_key, remaining, p)
    return remaining - count, count

  remaining, columns = jax.lax.scan(
      next_count, lengths, (jax.random.split(count_key, lang.d - 1), jnp.asarray(conditional)))
  counts = jnp.concatenate([columns.T, remaining[:, None]], axis=1)
  return counts, lang.label_counts(counts)


POISSON_BLOCK = 24


def _poisson_inverse_cdf(uniforms, rates, value_index, block: int):
  """Poisson(μ) draws by inversion, #{k >= 0 : P(K <= k) < u}, for μ = rates[i, value_index[σ]].

  rates (N, V) holds the V distinct means of each row; uniforms (N, d). The CDF
  table is built per row and distinct mean (O(N V) per block of `block` values of
  k), so each entry costs `block` comparisons per block; blocks are added until
  every u is covered or the table stops gaining mass (u within float64 roundoff
  of 1, probability < 1e-15 per entry).
  """
  # One distinct mean per row (uniform π) broadcasts; otherwise gather per token.
  spread = (lambda x: x) if rates.shape[1] == 1 else (lambda x: x[:, jnp.asarray(value_index)])

  def table(start, before):
    k = start + jnp.arange(block, dtype=jnp.float64)
    log_pmf = (jax.scipy.special.xlogy(k, rates[..., None]) - rates[..., None]
               - jax.scipy.special.gammaln(k + 1.0))
    return before[..., None] + jnp.cumsum(jnp.exp(log_pmf), axis=-1)   # (N, V, block)

  def body(state):
    start, counts, before, _ = state
    cdf = table(start, before)
    for j in range(block):
      counts = counts + (uniforms > spread(cdf[..., j]))
    gained = cdf[..., -1] > before
    return start + block, counts, cdf[..., -1], jnp.any((uniforms > spread(cdf[..., -1]))
                                                        & spread(gained))

  def more(state):
    return state[3]

  state = (jnp.asarray(0.0), jnp.zeros(uniforms.shape), jnp.zeros(rates.shape), jnp.asarray(True))
  return jax.lax.while_loop(more, body, state)[1]


def sample_counts_poisson(key, lang: protocol.Language, n_samples: int,
                          block: int = POISSON_BLOCK):
  """Token counts (N, d) and labels (N,) of N fresh strings, without forming a string.

  Poissonisation (docs/theory.md §9d): when n - 1 ~ Poisson(λ) given a mixing rate
  λ, the counts of tokens 2…n are independent Poisson(λ π_σ) given λ, and token 1
  is one draw from π. This holds exactly for Geometric(p) (λ ~ Exponential of
  mean (1-p)/p) and shifted Poisson (λ fixed), the laws with the capability
  "poisson_mixture" (`poisson_rate`, lagjax/data/lengths.py); other laws fall back to
  `sample_counts`. Cost O(N d) with one uniform and a few comparisons per entry,
  against d - 1 sequential binomial draws per string for `sample_counts`.

  Args:
    key: a PRNG key.
    lang: a language that declares PresenceLabels (§1b).
    n_samples: N.
    block: how many values k of the Poisson CDF each pass of the inversion adds.

  Returns:
    A pair: the counts (N, d), float, each row summing to its length n ≥ 1, and the
    labels (N,) in {-1, +1}.

  Raises:
    ValueError: when `lang` does not declare PresenceLabels.

  Example:
    >>> lang = lj.occurrence(4)   # Geometric(1/3): n - 1 is Poisson(λ), λ exponential
    >>> key = jax.random.PRNGKey(0)
    >>> # A smaller block compiles faster and draws the same counts, in more passes.
    >>> counts, labels = lj.data.sampling.sample_counts_poisson(key, lang, 3, block=4)
    >>> counts, labels = np.asarray(counts), np.asarray(labels)
    >>> counts.shape, bool(np.all(counts.sum(axis=1) >= 1))   # n ≥ 1
    ((3, 4), True)
    >>> bool(np.all(labels == np.where(counts[:, 0] > 0, 1.0, -1.0)))   # y = +1 iff c_0 > 0
    True
  """
  _check_count_labels(lang)
  if not provides(lang.length, "poisson_mixture"):
    return sample_counts(key, lang, n_samples)
  rate_key, first_key, count_key = jax.random.split(key, 3)
  values, value_index = np.unique(lang.pi_array, return_inverse=True)
  rates = lang.length.poisson_rate(rate_key, (n_samples, 1)) * jnp.asarray(values)[None, :]
  uniforms = jax.random.uniform(count_key, (n_samples, lang.d), dtype=jnp.float64)
  counts = _poisson_inverse_cdf(uniforms, rates, value_index, block)
  first = jax.random.categorical(first_key, jnp.log(jnp.asarray(lang.pi_array)),
                                 shape=(n_samples,))
  counts = counts.at[jnp.arange(n_samples), first].add(1.0)
  return counts, lang.label_counts(counts)
