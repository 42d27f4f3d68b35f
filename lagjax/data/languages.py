"""Occurrence-family languages over Σ = {0, …, d-1} (docs/theory.md section 1).

A language is a Boolean function of presence events E_σ = {σ occurs in w}:
  occurrence(a): y = +1 iff a ∈ w;
  any_of(L) (OR): y = +1 iff some letter of L occurs;
  all_of(L) (AND): y = +1 iff every letter of L occurs.
Every label is a signed sum of support indicators,
  y(w) = Σ_k coef_k 1{w ⊆ S_k},
so for any length law P(w ⊆ S) = G(π_S) gives exact class balances.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import lengths as lengths_lib

KINDS = ("occurrence", "any_of", "all_of")


@dataclasses.dataclass(frozen=True)
class Language:
  """A language of the occurrence family with its token law π and length law.

  Attributes:
    kind: one of KINDS.
    d: alphabet size.
    letters: the letters whose presence decides the label.
    pi: token law π, a tuple of d probabilities.
    length: the length law L.
  """

  kind: str
  d: int
  letters: tuple[int, ...]
  pi: tuple[float, ...]
  length: lengths_lib.LengthLaw

  @property
  def pi_array(self) -> np.ndarray:
    return np.asarray(self.pi, dtype=np.float64)

  def inclusion_exclusion(self) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients (K,) and support masks (K, d) with y = Σ_k coef_k 1{w ⊆ S_k}.

    The first support is always Σ itself (its indicator is 1).
    """
    everything = np.ones(self.d, dtype=bool)
    if self.kind in ("occurrence", "any_of"):
      # y = 1 - 2 · 1{w ⊆ Σ∖L}.
      avoid = everything.copy()
      avoid[list(self.letters)] = False
      return np.array([1.0, -2.0]), np.stack([everything, avoid])
    # all_of: 1{all present} = Σ_{T ⊆ L} (-1)^|T| 1{w ⊆ Σ∖T}; y = 2·that - 1.
    coefs, supports = [], []
    for size in range(len(self.letters) + 1):
      for subset in itertools.combinations(self.letters, size):
        support = everything.copy()
        support[list(subset)] = False
        coefs.append(2.0 * (-1.0) ** size)
        supports.append(support)
    coefs[0] -= 1.0
    return np.array(coefs), np.stack(supports)

  def positive_rate(self) -> float:
    """P(y = +1) = (1 + E y) / 2 with E y = Σ_k coef_k G(π_{S_k})."""
    coefs, supports = self.inclusion_exclusion()
    mean_label = sum(
        c * float(self.length.pgf(float(self.pi_array[s].sum()))) for c, s in zip(coefs, supports)
    )
    return 0.5 * (1.0 + mean_label)

  def label_counts(self, counts):
    """Label ±1 of count vectors c (..., d)."""
    present = jnp.asarray(counts)[..., list(self.letters)] > 0
    positive = jnp.any(present, axis=-1) if self.kind != "all_of" else jnp.all(present, axis=-1)
    return jnp.where(positive, 1.0, -1.0)

  def label_tokens(self, tokens, mask):
    """Label ±1 of padded token batches (..., n_max) with boolean mask."""
    tokens = jnp.asarray(tokens)
    present = jnp.stack(
        [jnp.any((tokens == a) & mask, axis=-1) for a in self.letters], axis=-1
    )
    positive = jnp.any(present, axis=-1) if self.kind != "all_of" else jnp.all(present, axis=-1)
    return jnp.where(positive, 1.0, -1.0)


def _check_alphabet(d) -> int:
  return validation.check_int("alphabet size d", d, 2, integral_floats=True)


def _check_letters(d: int, letters: Sequence[int]) -> tuple[int, ...]:
  letters = tuple(int(a) for a in letters)
  if not letters:
    raise ValueError("letters must name at least one letter in {0, …, d-1}.")
  bad = [a for a in letters if not 0 <= a < d]
  if bad:
    raise ValueError(f"letters must lie in {{0, …, {d - 1}}} (d = {d}); got {bad}.")
  if len(set(letters)) != len(letters):
    raise ValueError(f"letters must not repeat; got {letters}.")
  if len(letters) == d:
    raise ValueError(f"letters must leave at least one other letter (d = {d}); got {letters}.")
  return letters


def _check_pi(d: int, pi) -> tuple[float, ...]:
  if pi is None:
    return (1.0 / d,) * d
  pi = np.asarray(pi, dtype=np.float64)
  if pi.shape != (d,):
    raise ValueError(f"pi must have shape ({d},) to match d; got shape {pi.shape}.")
  if not np.all(np.isfinite(pi)) or np.any(pi <= 0) or abs(pi.sum() - 1.0) > 1e-12:
    raise ValueError(
        f"pi must be a distribution: finite, every entry > 0, summing to 1 (±1e-12); "
        f"got min {pi.min()!r}, sum {pi.sum()!r}."
    )
  return tuple(float(x) for x in pi)


def balanced_geometric(kind: str, d: int, letters, pi=None) -> lengths_lib.Geometric:
  """The geometric law with P(y = +1) = 1/2 (docs/theory.md section 1).

  For occurrence/any_of, P(y = -1) = G(z) with z = π_{Σ∖L}, and G(z) = 1/2 solves
  to p = (1 - z)/z. For all_of, the root in p is bracketed and bisected.
  """
  d = _check_alphabet(d)
  letters = _check_letters(d, letters)
  pi = _check_pi(d, pi)
  if kind in ("occurrence", "any_of"):
    z = 1.0 - sum(pi[a] for a in letters)
    if z <= 0.5:
      raise ValueError(
          f"no geometric length law balances {kind}{letters}: P(y=-1) < π(Σ∖L) = {z:.4g} ≤ 1/2."
      )
    return lengths_lib.Geometric((1.0 - z) / z)

  def positive_rate(p):
    return Language(kind, d, letters, pi, lengths_lib.Geometric(p)).positive_rate() - 0.5

  lo, hi = 1e-12, 1.0 - 1e-12
  if positive_rate(lo) * positive_rate(hi) > 0:
    raise ValueError(f"no geometric length law balances {kind}{letters}.")
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if positive_rate(lo) * positive_rate(mid) <= 0:
      hi = mid
    else:
      lo = mid
    if hi - lo < 1e-16:
      break
  return lengths_lib.Geometric(0.5 * (lo + hi))


def _make(kind: str, d, letters, pi, length) -> Language:
  d = _check_alphabet(d)
  letters = _check_letters(d, letters)
  pi = _check_pi(d, pi)
  if length is None:
    length = balanced_geometric(kind, d, letters, pi)
  if not isinstance(length, lengths_lib.Geometric | lengths_lib.Fixed | lengths_lib.ShiftedPoisson):
    raise ValueError(
        f"length must be a length law (lj.geometric, lj.fixed, lj.shifted_poisson); got {length!r}."
    )
  return Language(kind, d, letters, pi, length)


def occurrence(d: int, letter: int = 0, *, pi=None, length=None) -> Language:
  """y = +1 iff `letter` occurs; balanced geometric length by default."""
  return _make("occurrence", d, (letter,), pi, length)


def any_of(d: int, letters: Sequence[int], *, pi=None, length=None) -> Language:
  """OR: y = +1 iff some letter of `letters` occurs."""
  return _make("any_of", d, letters, pi, length)


def all_of(d: int, letters: Sequence[int], *, pi=None, length=None) -> Language:
  """AND: y = +1 iff every letter of `letters` occurs."""
  return _make("all_of", d, letters, pi, length)


def sample_counts(key, lang: Language, n_samples: int):
  """Token counts (N, d) and labels (N,) of N fresh strings (multinomial as chained binomials)."""
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


def _exponential_rate(law, key, shape):
  """Geometric(p): n - 1 ~ Poisson(λ) with λ ~ Exponential of mean (1-p)/p (a Gamma(1) mixture)."""
  return jax.random.exponential(key, shape) * ((1.0 - law.p) / law.p)


def _fixed_rate(law, key, shape):
  """Shifted Poisson: n - 1 ~ Poisson(λ) with λ fixed."""
  del key
  return jnp.full(shape, law.lam)


# Length laws with n - 1 a Poisson mixture, and how to draw the mixing rate λ.
POISSON_MIXTURES = {lengths_lib.Geometric: _exponential_rate,
                    lengths_lib.ShiftedPoisson: _fixed_rate}
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


def sample_counts_poisson(key, lang: Language, n_samples: int, block: int = POISSON_BLOCK):
  """Token counts (N, d) and labels (N,) of N fresh strings, without forming a string.

  Poissonisation (docs/theory.md §9): when n - 1 ~ Poisson(λ) given a mixing rate
  λ, the counts of tokens 2…n are independent Poisson(λ π_σ) given λ, and token 1
  is one draw from π. This holds exactly for Geometric(p) (λ ~ Exponential of
  mean (1-p)/p) and shifted Poisson (λ fixed); other laws fall back to
  `sample_counts`. Cost O(N d) with one uniform and a few comparisons per entry,
  against d - 1 sequential binomial draws per string for `sample_counts`.
  """
  mixture = POISSON_MIXTURES.get(type(lang.length))
  if mixture is None:
    return sample_counts(key, lang, n_samples)
  rate_key, first_key, count_key = jax.random.split(key, 3)
  values, value_index = np.unique(lang.pi_array, return_inverse=True)
  rates = mixture(lang.length, rate_key, (n_samples, 1)) * jnp.asarray(values)[None, :]
  uniforms = jax.random.uniform(count_key, (n_samples, lang.d), dtype=jnp.float64)
  counts = _poisson_inverse_cdf(uniforms, rates, value_index, block)
  first = jax.random.categorical(first_key, jnp.log(jnp.asarray(lang.pi_array)),
                                 shape=(n_samples,))
  counts = counts.at[jnp.arange(n_samples), first].add(1.0)
  return counts, lang.label_counts(counts)


LANGUAGES = {"occurrence": lambda d, letters, **kw: occurrence(d, letters[0], **kw),
             "any_of": any_of, "all_of": all_of}


def make(name: str, d: int, letters=(0,), **options) -> Language:
  """Looks a language up by name ("occurrence", "any_of", "all_of")."""
  if name not in LANGUAGES:
    raise ValueError(f"unknown language {name!r}; known languages: {sorted(LANGUAGES)}.")
  return LANGUAGES[name](d, tuple(letters), **options)


__all__ = ["LANGUAGES", "Language", "all_of", "any_of", "balanced_geometric", "make", "occurrence",
           "sample_counts", "sample_counts_poisson"]
