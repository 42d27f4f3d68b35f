"""0-1 error routes; the exact one for two-group partitions by per-length thresholds.

docs/theory.md §3b. For occurrence/any_of with θ tied on the language's two groups (L = the
letters, R = the rest), f has the sign of the numerator::

    num(c, n) = c u_L β_L + (n - c) u_R β_R + u_0 β_0,

c = #letters of L in w, n = the length of w, u = e^{α - α_max} (u_0 β_0 = 0 without CLS).
Strings with c = 0 have y = -1 (error iff num >= 0); strings with c >= 1 have
y = +1 (error iff num <= 0). num is linear in c, so for each n the erroneous c
in 1 <= c <= n - 1 form an interval, and::

    P(error) = Σ_{n<=N} P(n) [P(c=0|n) 1{num(0,n) >= 0} + P(c=n|n) 1{num(n,n) <= 0}
                              + P(c ∈ interval | n)],

with c | n ~ Binomial(n, π_L). The binomial CDFs for n <= N are tabulated once,
so each evaluation costs O(N); the dropped tail is at most P(n > N).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import languages, sampling
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import automaton_error, base, lattice
from lagjax.risk import sampled as sampled_route

MAX_TABLE_LENGTH = 4096
ERROR_SAMPLES = 20_000


def supports(lang: languages.Language, partition: partition_lib.Partition) -> bool:
  """Whether the threshold route applies: y = +1 iff a token of L occurs
  (PresenceLabels.positive_if_any), on the two token groups L and the rest (§3b).

  Args:
    lang: the language.
    partition: the token groups of the parameters.

  Returns:
    True where the threshold route applies.

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.risk.error.supports(lang, lj.partition.of_language(lang))
    True
    >>> lj.risk.error.supports(lang, lj.partition.singletons(4))
    False
  """
  letters = lang.positive_if_any if isinstance(lang, languages.PresenceLabels) else None
  return (letters is not None and partition.num_groups == 2
          and any(set(b) == set(letters) for b in partition.blocks))


def build(lang: languages.Language, partition: partition_lib.Partition, *, tol: float = 1e-12):
  """Builds error(params) -> (exact 0-1 error, tail bound) on grouped params (G = 2).

  The per-length thresholds of docs/theory.md §3b: O(N) per evaluation, the binomial
  CDFs tabulated once for n <= N, the tail P(n > N) <= tol left out.

  Args:
    lang: an occurrence/any_of language (supports holds).
    partition: its two token groups, L and the rest.
    tol: the length tail left out, the certified bound.

  Returns:
    error(params) -> (0-1 error, tail bound), on params with "alpha" and "beta" of shape
    (2,) [and the CLS scalars].

  Raises:
    ValueError: if the partition is not the two-group partition of an
      occurrence/any_of language, or the lengths needed exceed MAX_TABLE_LENGTH.

  Example:
    With β = (1, 0) and α = 0, f = c_a/n: right on every string with an a, and 0 (an
    error) on every other, so the error is P(y = -1) = ½:

    >>> lang = lj.occurrence(4)
    >>> error = jax.jit(lj.risk.error.build(lang, lj.partition.of_language(lang)))
    >>> value, bound = error({"alpha": jnp.zeros(2), "beta": jnp.array([1.0, 0.0])})
    >>> round(float(value), 6), bool(bound < 1e-12)
    (0.5, True)
  """
  if not supports(lang, partition):
    raise ValueError(f"the threshold error route needs labels 'some token of L occurs' on two "
                     f"token groups (L and the rest); {lang.describe()} on "
                     f"{partition.num_groups} token groups is not that case.")
  n_max = lengths_lib.truncation_length(lang.length, tol)
  if n_max > MAX_TABLE_LENGTH:
    raise ValueError(f"threshold error route tabulates lengths up to {MAX_TABLE_LENGTH}; this "
                     f"length law needs {n_max} for tail {tol:g}.")
  letters = next(g for g, b in enumerate(partition.blocks)
                 if set(b) == set(lang.positive_if_any))
  pi_letters = float(partition.masses(lang.pi)[letters])
  n = np.arange(n_max + 1)
  c = np.arange(n_max + 1)
  log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, n_max + 1)))])
  log_binomial = (log_factorial[n][:, None] - log_factorial[c][None, :]
                  - log_factorial[np.maximum(n[:, None] - c[None, :], 0)]
                  + c[None, :] * math.log(pi_letters)
                  + (n[:, None] - c[None, :]) * math.log1p(-pi_letters))
  pmf = np.where(c[None, :] <= n[:, None], np.exp(log_binomial), 0.0)
  cdf = jnp.asarray(np.cumsum(pmf, axis=1))                   # P(c <= k | n), (N+1, N+1)
  length_pmf = np.exp(np.asarray(lang.length.log_pmf(n[1:])))
  length_pmf = jnp.asarray(np.concatenate([[0.0], length_pmf]))
  lengths = jnp.asarray(n, dtype=jnp.float64)
  rows = jnp.arange(n_max + 1)
  tail = lang.length.tail(n_max)
  other = 1 - letters

  def cdf_at(k):
    """P(c <= k | n) for real k per row (k < 0 gives 0)."""
    index = jnp.clip(jnp.floor(k), -1, n_max).astype(jnp.int64)
    return jnp.where(index < 0, 0.0, cdf[rows, jnp.maximum(index, 0)])

  def numerator(params, groups):
    """num(c, n) = c·a + (n - c)·b + e, scores shifted by their max over `groups` (+ CLS)."""
    alpha = params["alpha"]
    present = [alpha[g] for g in groups] + ([params["alpha_cls"]] if direct.has_cls(params) else [])
    shift = jnp.max(jnp.stack(present))
    u = jnp.exp(jnp.minimum(alpha - shift, 0.0))
    beta = params["beta"]
    extra = jnp.exp(params["alpha_cls"] - shift) * params["beta_cls"] if direct.has_cls(params) \
        else 0.0
    return u[letters] * beta[letters], u[other] * beta[other], extra

  def error(params):
    no_letter_pmf, all_letter_pmf = pmf[:, 0], pmf[rows, rows]
    # Strings with one kind of token are scaled by their own maximum score, so a
    # score spread that underflows the other group cannot flip their sign.
    _, b, e = numerator(params, [other])
    no_letter = no_letter_pmf * (lengths * b + e >= 0)            # c = 0: y = -1
    a, _, e = numerator(params, [letters])
    all_letter = all_letter_pmf * (lengths * a + e <= 0)          # c = n: y = +1
    # 1 <= c <= n - 1: both groups present; num is linear in c with this slope.
    a, b, e = numerator(params, [letters, other])
    slope, offset = a - b, lengths * b + e
    root = -offset / jnp.where(slope != 0, slope, 1.0)
    below = cdf_at(jnp.minimum(root, lengths - 1)) - cdf_at(0.0)          # slope > 0: c <= root
    above = cdf_at(lengths - 1) - cdf_at(jnp.maximum(jnp.ceil(root), 1.0) - 1)  # slope < 0
    flat = jnp.where(offset <= 0, cdf_at(lengths - 1) - cdf_at(0.0), 0.0)
    middle = jnp.maximum(jnp.where(slope > 0, below, jnp.where(slope < 0, above, flat)), 0.0)
    per_length = no_letter + all_letter + middle
    return length_pmf @ per_length, tail

  return error


def sampled(lang: languages.Language, partition: partition_lib.Partition, n_samples: int,
            sampler=sampling.sample_counts):
  """0-1 error on a fixed sample of n_samples strings, as count vectors (fast; for records).

  `sampler(key, lang, n)` draws the count vectors (sampling.sample_counts or
  sampling.sample_counts_poisson). Its standard error is at most
  sqrt(e (1 - e) / n_samples) for true error e (docs/theory.md §3b).

  Args:
    lang: a language with PresenceLabels (labels from counts).
    partition: the token groups of the parameters.
    n_samples: the strings drawn, once, with a fixed key.
    sampler: draws (count vectors, labels).

  Returns:
    report(params) -> a dict whose "error" is the sample's 0-1 error.

  Example:
    A sampler that returns two fixed strings, "a c c" and "b c d", in place of fresh ones.
    With β = (1, 0) and α = 0, f = c_a/n is right on the first and 0 (an error) on the
    second:

    >>> lang = lj.occurrence(4)
    >>> def two_strings(key, lang, n):
    ...   counts = jnp.array([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    ...   return counts, lang.label_counts(counts)
    >>> report = lj.risk.error.sampled(lang, lj.partition.of_language(lang), 2, two_strings)
    >>> float(jax.jit(report)({"alpha": jnp.zeros(2), "beta": jnp.array([1.0, 0.0])})["error"])
    0.5
  """
  counts, labels = sampler(jax.random.key(2**31 - 1), lang, n_samples)
  identity = np.array_equal(partition.index, np.arange(lang.d))
  group_counts = counts if identity else jax.ops.segment_sum(
      counts.T, jnp.asarray(partition.index), partition.num_groups).T

  def report(params):
    return {"error": jnp.mean(base.zero_one_error(direct.forward_counts(params, group_counts),
                                                  labels))}

  return report


def choose(lang: languages.Language, partition: partition_lib.Partition,
           tol: float = 1e-12, layout: direct.Layout = direct.PLAIN) -> str | None:
  """The cheapest exact 0-1 error route for (lang, partition), or None where none is feasible.

  "threshold" (y = +1 iff a token of L occurs, on two token groups, O(N)) when its
  table of lengths fits, else "lattice" (enumeration) when the language declares
  labels from counts and the enumeration fits, else "automaton" (a DP over state ×
  counts, docs/theory.md §3d) for a regular language on at most 3 token groups. Under the
  last query or position tables only the DP applies (it also tracks the first and last
  token). The one place where this is decided.

  Args:
    lang: the language (§1b).
    partition: the token groups of the parameters.
    tol: the probability mass an exact route may leave out.
    layout: the model's parts, direct.Layout (§2b).

  Returns:
    "threshold", "lattice", "automaton" or None.

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.risk.error.choose(lang, lj.partition.of_language(lang))
    'threshold'
    >>> lj.risk.error.choose(lang, lj.partition.singletons(4))
    'lattice'
    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> lj.risk.error.choose(pairs, lj.partition.of_language(pairs))
    'automaton'
  """
  if not layout.plain:
    return "automaton" if automaton_error.supports(lang, partition, tol, layout) else None
  n_max = lengths_lib.truncation_length(lang.length, tol)
  if supports(lang, partition) and n_max <= MAX_TABLE_LENGTH:
    return "threshold"
  if lattice.supports(lang, "squared") is None and lattice.num_count_vectors(
      partition.num_groups, lengths_lib.truncation_length(lang.length, tol / 2)) <= \
      lattice.MAX_VECTORS:
    return "lattice"
  if automaton_error.supports(lang, partition, tol):
    return "automaton"
  return None


def best_route(lang, partition, error_samples: int = ERROR_SAMPLES,
               sampler=sampling.sample_counts, layout: direct.Layout = direct.PLAIN):
  """report(params) -> {"error": ...} by the route `choose` picks, else on a fixed sample of
  `error_samples` strings (count vectors drawn by `sampler`, or token strings where the
  label or the model depends on order); returns (report, route name).

  The exact routes of docs/theory.md §3b and §3d, the sampled fallback of §3c.

  Args:
    lang: the language (§1b).
    partition: the token groups of the parameters.
    error_samples: the sample's size where no exact route is feasible.
    sampler: draws count vectors (labels from counts).
    layout: the model's parts, direct.Layout (§2b).

  Returns:
    (report, name), with report(params) -> a dict with "error", and the route's name
    ("threshold", "lattice", "automaton" or "sampled").

  Example:
    >>> lang = lj.occurrence(4)
    >>> report, name = lj.risk.error.best_route(lang, lj.partition.of_language(lang))
    >>> theta = {"alpha": jnp.zeros(2), "beta": jnp.array([1.0, 0.0])}
    >>> name, round(float(jax.jit(report)(theta)["error"]), 6)  # P(y = -1), as in build
    ('threshold', 0.5)
  """
  name = choose(lang, partition, layout=layout)
  if name == "threshold":
    threshold = build(lang, partition)
    return (lambda params: {"error": threshold(params)[0]}), name
  if name == "lattice":
    return lattice.build(lang, partition).report, name
  if name == "automaton":
    dynamic = automaton_error.build(lang, partition, layout=layout)
    return (lambda params: {"error": dynamic(params)[0]}), name
  if not isinstance(lang, languages.PresenceLabels) or not layout.plain:
    # Labels or a model that depend on token order: strings, not count vectors (sampled.py).
    strings = sampled_route.build(jax.random.key(2**31 - 1), lang, partition,
                                  n_samples=error_samples)
    return (lambda params: {"error": strings.report(params)["error"]}), "sampled"
  return sampled(lang, partition, error_samples, sampler), "sampled"
