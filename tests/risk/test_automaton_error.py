"""The automaton 0-1 error route's certified tail bound (lagjax/risk/automaton_error.py,
docs/theory.md §3d).

The DP sums the lengths n = 1 … N with N = truncation_length(L, tol), the smallest N with
P(n > N) <= tol, and reports the mass it leaves out, P(n > N), as "error_bound". The bound
must be the law's own tail at exactly that N: at N + 1 it would understate what is left out
of a DP that stops at N, at N - 1 it would exceed tol, and a DP that stops one length early
or late would leave out another mass than the one reported.
"""

import jax
import jax.numpy as jnp
import pytest

import lagjax as lj

TOL = 1e-3  # large enough that P(n = N) and P(n = N + 1) are far above roundoff

LAWS = {"geometric": lj.geometric(0.1),          # its own truncation_length, ⌈log ε / log q⌉
        "shifted_poisson": lj.shifted_poisson(3.0)}  # the bisection on tail(N)


@pytest.mark.parametrize("law_name", sorted(LAWS))
def test_error_bound_is_the_laws_tail_at_the_exact_truncation_length(law_name):
  """error_bound == L.tail(N) for the N the route truncates at, N the smallest length with
  P(n > N) <= tol; and the DP covers exactly n <= N: at θ = 0, f ≡ 0 is an error on every
  string (sign 0 counts as one), so error = P(n <= N) and error + error_bound = 1.

  Tolerance 1e-12: both sides are sums of at most ~100 terms of a pmf in float64; the
  off-by-ones this guards change them by P(n = N) or P(n = N + 1), >= 1e-5 here."""
  law = LAWS[law_name]
  pairs = lj.data.regular_builtins.even_pairs(length=law)
  partition = lj.partition.of_language(pairs)
  n_max = lj.lengths.truncation_length(law, TOL)
  assert law.tail(n_max) <= TOL < law.tail(n_max - 1)     # N is the exact truncation length
  assert min(law.tail(n_max - 1) - law.tail(n_max), law.tail(n_max) - law.tail(n_max + 1)) > 1e-5

  route = lj.risk.ROUTES["automaton"].build(pairs, partition, tol=TOL)
  theta = {"alpha": jnp.zeros(partition.num_groups), "beta": jnp.zeros(partition.num_groups)}
  report = jax.jit(route.report)(theta)
  error, bound = float(report["error"]), float(report["error_bound"])
  assert abs(bound - law.tail(n_max)) <= 1e-12
  assert abs(error + bound - 1.0) <= 1e-12
  assert bound <= TOL
  # β ≡ 1: f ≡ 1 predicts y = +1, wrong on half the strings of each length n >= 2 (uniform
  # π: w_1 = w_n with probability ½) and on none of length 1, so the error is
  # ½ (P(n <= N) - P(n = 1)): each length's mass enters at its own length.
  report = jax.jit(route.report)(dict(theta, beta=jnp.ones(partition.num_groups)))
  first = float(jnp.exp(law.log_pmf(1)))
  assert abs(float(report["error"]) - 0.5 * (1.0 - law.tail(n_max) - first)) <= 1e-12


def test_exact_error_reports_the_same_bound():
  """The eager exact_error on a regular language takes the automaton route and passes its
  bound on: the law's tail at truncation_length(L, tol)."""
  law = LAWS["geometric"]
  pairs = lj.data.regular_builtins.even_pairs(length=law)
  result = lj.risk.exact_error(pairs, lj.init_params(2), tol=TOL)
  assert result.error_route == "automaton"
  bound = law.tail(lj.lengths.truncation_length(law, TOL))
  assert abs(result.details["error_bound"] - bound) <= 1e-12
  assert abs(result.value + bound - 1.0) <= 1e-12
