"""The 0-1 error for records and analyses: the exact route the registry picks, else a sample.

docs/theory.md §3b, §3c, §3d. The exact error routes are registered routes that give the
"error" (risk/threshold.py, the lattice route, risk/automaton_error.py); `choose` asks the
registry for the first that applies, `best_route` builds it, or where none does, measures
the error on a fixed sample (`sampled`: count vectors, cheap, for labels from counts; else
the sampled route's token strings).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import languages, sampling
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, registry

ERROR_SAMPLES = 20_000


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
  """The first exact 0-1 error route of the registry for (lang, partition, layout), or None
  where none is feasible (registry.first_supporting with quantity "error").

  With the built-in routes: "threshold" (y = +1 iff a token of L occurs, on two token
  groups, O(N)) when its table of lengths fits, else "lattice" (enumeration) when the
  language declares labels from counts and the enumeration fits, else "automaton" (a DP
  over state × counts, docs/theory.md §3d) for a regular language on at most 3 token
  groups. Under the last query or position tables only the DP applies (it also tracks the
  first and last token).

  Args:
    lang: the language (§1b).
    partition: the token groups of the parameters.
    tol: the probability mass an exact route may leave out.
    layout: the model's parts, direct.Layout (§2b).

  Returns:
    The route's name ("threshold", "lattice", "automaton", ...) or None.

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
  name, _ = registry.first_supporting(lang, quantity="error", layout=layout,
                                      partition=partition, tol=tol)
  return name


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
    >>> name, round(float(jax.jit(report)(theta)["error"]), 6)  # P(y = -1)
    ('threshold', 0.5)
  """
  name = choose(lang, partition, layout=layout)
  if name is not None:
    return registry.ROUTES[name].build(lang, partition, layout=layout).report, name
  if not isinstance(lang, languages.PresenceLabels) or not layout.plain:
    # Labels or a model that depend on token order: strings, not count vectors (sampled.py).
    strings = registry.ROUTES["sampled"].build(lang, partition, key=jax.random.key(2**31 - 1),
                                               n_samples=error_samples)
    return (lambda params: {"error": strings.report(params)["error"]}), "sampled"
  return sampled(lang, partition, error_samples, sampler), "sampled"


__all__ = ["ERROR_SAMPLES", "best_route", "choose", "sampled"]
