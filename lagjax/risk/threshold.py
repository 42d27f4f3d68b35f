"""Threshold route: the exact 0-1 error for two-group partitions by per-length thresholds.

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

import jax.numpy as jnp
import numpy as np

from lagjax.data import languages
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base

MAX_TABLE_LENGTH = 4096


def _letters_group(lang, partition) -> int | None:
  """The token group that is L (y = +1 iff a token of L occurs), or None where the labels
  are not of that kind or the partition is not {L, the rest}."""
  letters = getattr(lang, "positive_if_any", None)
  if letters is None or partition.num_groups != 2:
    return None
  return next((g for g, b in enumerate(partition.blocks) if set(b) == set(letters)), None)


class ThresholdRoute(base.RouteSpec):
  """The threshold route (docs/theory.md §3b): the exact 0-1 error of the plain model, O(N) per
  evaluation, where y = +1 iff a token of L occurs (PresenceLabels.positive_if_any) and θ is
  tied on the two token groups L and the rest.

  Example:
    >>> lang = lj.occurrence(4)
    >>> route = lj.risk.ROUTES["threshold"]
    >>> print(route.supports(lang, quantity="error", partition=lj.partition.of_language(lang)))
    None
    >>> reason = route.supports(lang, quantity="error", partition=lj.partition.singletons(4))
    >>> reason.split(";")[1]
    ' got 4 token groups'
  """

  name = "threshold"
  capability = languages.PresenceLabels
  capability_use = "labels from presence"
  provides = frozenset({"error"})

  def limits(self, lang, *, quantity, loss, layout, partition, tol) -> str | None:
    """The labels and the partition of the threshold case, and a length table that fits
    MAX_TABLE_LENGTH."""
    del quantity, loss, layout
    partition = partition or partition_lib.singletons(lang.d)
    if _letters_group(lang, partition) is None:
      return (f"route 'threshold' needs labels 'some token of L occurs' on two token groups "
              f"(L and the rest); got {partition.num_groups} token groups")
    n_max = lengths_lib.truncation_length(lang.length, tol)
    if n_max > MAX_TABLE_LENGTH:
      return (f"route 'threshold' tabulates lengths up to {MAX_TABLE_LENGTH}; this length law "
              f"needs {n_max} for tail {tol:g}")
    return None

  def build(self, lang: languages.Language, partition: partition_lib.Partition | None = None, *,
            loss="squared", layout: direct.Layout = direct.PLAIN, key=None,
            tol: float = 1e-12) -> base.Route:
    """Builds the exact 0-1 error on grouped params (G = 2; docs/theory.md §3b).

    The per-length thresholds: O(N) per evaluation, the binomial CDFs tabulated once for
    n <= N, the tail P(n > N) <= tol left out.

    Args:
      lang: an occurrence/any_of language (supports holds).
      partition: its two token groups, L and the rest.
      loss: unused (the 0-1 error).
      layout: the plain model's layout (the CLS scalars are read from params).
      key: unused.
      tol: the length tail left out, the certified bound.

    Returns:
      A Route without a risk; report(params) gives "error" and "error_bound", on params
      with "alpha" and "beta" of shape (2,) [and the CLS scalars].

    Raises:
      ValueError: if the partition is not the two-group partition of an
        occurrence/any_of language, or the lengths needed exceed MAX_TABLE_LENGTH.

    Example:
      With β = (1, 0) and α = 0, f = c_a/n: right on every string with an a, and 0 (an
      error) on every other, so the error is P(y = -1) = ½:

      >>> lang = lj.occurrence(4)
      >>> route = lj.risk.ROUTES["threshold"].build(lang, lj.partition.of_language(lang))
      >>> report = jax.jit(route.report)({"alpha": jnp.zeros(2), "beta": jnp.array([1.0, 0.0])})
      >>> round(float(report["error"]), 6), bool(report["error_bound"] < 1e-12)
      (0.5, True)
    """
    del loss, layout, key
    self.check_length_law(lang)
    partition = partition or partition_lib.singletons(lang.d)
    letters = (_letters_group(lang, partition) if isinstance(lang, languages.PresenceLabels)
               else None)
    if letters is None:
      raise ValueError(f"the threshold error route needs labels 'some token of L occurs' on two "
                       f"token groups (L and the rest); {lang.describe()} on "
                       f"{partition.num_groups} token groups is not that case.")
    n_max = lengths_lib.truncation_length(lang.length, tol)
    if n_max > MAX_TABLE_LENGTH:
      raise ValueError(f"threshold error route tabulates lengths up to {MAX_TABLE_LENGTH}; this "
                       f"length law needs {n_max} for tail {tol:g}.")
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
      present = [alpha[g] for g in groups] + ([params["alpha_cls"]] if direct.has_cls(params)
                                              else [])
      shift = jnp.max(jnp.stack(present))
      u = jnp.exp(jnp.minimum(alpha - shift, 0.0))
      beta = params["beta"]
      extra = jnp.exp(params["alpha_cls"] - shift) * params["beta_cls"] if direct.has_cls(params) \
          else 0.0
      return u[letters] * beta[letters], u[other] * beta[other], extra

    def report(params):
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
      return {"error": length_pmf @ per_length, "error_bound": tail}

    return base.Route(self.name, None, report, partition)


__all__ = ["MAX_TABLE_LENGTH", "ThresholdRoute"]
