"""Length laws: pmf, generating function, tail, sampler (docs/theory.md section 1)."""

import math

import jax
import jax.extend
import numpy as np
import pytest

import lagjax as lj
from lagjax import lengths

Z = np.array([0.0, 0.25, 0.5, 0.9, 0.99, 1.0])


def reference_pmf(law, n):
  """P(n) from the textbook formulas, independent of the law's log_pmf."""
  if isinstance(law, lengths.Geometric):
    return law.p * (1 - law.p) ** (n - 1)
  if isinstance(law, lengths.ShiftedPoisson):
    return np.array([math.exp(-law.lam) * law.lam ** (k - 1) / math.factorial(k - 1)
                     for k in n.astype(int)])
  return (n == law.n0).astype(float)


# Laws and a support cutoff N whose dropped mass, even weighted by n², is < 1e-30.
LAWS = [
    (lj.geometric(0.3), 400),
    (lj.geometric(1 / 49), 6000),
    (lj.fixed(1), 5),
    (lj.fixed(6), 10),
    (lj.shifted_poisson(3.0), 120),
    (lj.shifted_poisson(0.5), 80),
]
IDS = ["geometric0.3", "geometric1/49", "fixed1", "fixed6", "poisson3", "poisson0.5"]


@pytest.mark.parametrize("law, n_max", LAWS, ids=IDS)
def test_pmf(law, n_max):
  """exp(log_pmf) equals the textbook pmf and sums to one."""
  n = np.arange(1, n_max + 1)
  pmf = np.exp(np.asarray(law.log_pmf(n)))
  np.testing.assert_allclose(pmf, reference_pmf(law, n), rtol=1e-12, atol=1e-300)
  assert abs(pmf.sum() - 1.0) < 1e-13


@pytest.mark.parametrize("law, n_max", LAWS, ids=IDS)
def test_pgf_and_derivatives_match_sums(law, n_max):
  """G, G', G'' equal Σ P(n) z^n, Σ n P(n) z^(n-1), Σ n(n-1) P(n) z^(n-2) (truncated)."""
  n = np.arange(1, n_max + 1)[:, None].astype(float)
  pmf = reference_pmf(law, n[:, 0])[:, None]
  z = Z[None, :]
  pgf = (pmf * z**n).sum(0)
  pgf_d1 = (pmf * n * z ** (n - 1)).sum(0)
  pgf_d2 = (pmf * n * (n - 1) * np.where(n >= 2, z ** np.maximum(n - 2, 0), 0.0)).sum(0)
  # Values are <= G''(1) <= 2(1-p)/p² ≈ 4.7e3; rounding of the sums ~1e-16 relative.
  np.testing.assert_allclose(law.pgf(Z), pgf, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(law.pgf_d1(Z), pgf_d1, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(law.pgf_d2(Z), pgf_d2, rtol=1e-12, atol=1e-15)
  # The mean is G'(1).
  assert law.mean == pytest.approx(float(pgf_d1[-1]), rel=1e-12)


@pytest.mark.parametrize("law, n_max", LAWS, ids=IDS)
def test_tail(law, n_max):
  """tail(N) = P(n > N) = 1 - Σ_{n<=N} P(n), and, for small tails, Σ_{n>N} P(n)."""
  n = np.arange(1, n_max + 1)
  pmf = reference_pmf(law, n)
  for cut in range(0, min(n_max, 40)):
    # 1 - (sum of <= 40 terms): absolute rounding < 1e-15.
    assert abs(law.tail(cut) - (1.0 - pmf[:cut].sum())) < 1e-14
  for cut in (n_max // 4, n_max // 2):
    # Deep tails lose nothing in relative terms when summed from the far side.
    np.testing.assert_allclose(law.tail(cut), pmf[cut:].sum(), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("law", [lj.geometric(0.3), lj.geometric(1 / 49), lj.shifted_poisson(3.0),
                                 lj.shifted_poisson(40.0)], ids=str)
@pytest.mark.parametrize("tail_mass", [0.5, 1e-3, 0.5**10, 1e-12, 1e-16])
def test_truncation_length_is_smallest(law, tail_mass):
  """truncation_length(L, m) is the smallest N with P(n > N) <= m."""
  n_max = lengths.truncation_length(law, tail_mass)
  assert law.tail(n_max) <= tail_mass
  assert n_max == 1 or law.tail(n_max - 1) > tail_mass


def test_truncation_length_fixed():
  """A fixed length n0 is never exceeded: N = n0."""
  assert lengths.truncation_length(lj.fixed(7), 1e-12) == 7
  assert lj.fixed(7).tail(6) == 1.0 and lj.fixed(7).tail(7) == 0.0


@pytest.mark.parametrize("law", [lj.geometric(0.3), lj.geometric(1 / 49), lj.shifted_poisson(3.0)],
                         ids=str)
def test_sample_mean_within_five_standard_errors(law):
  """Samples lie in {1, 2, …} and their mean is within 5 SE of G'(1)."""
  samples = np.asarray(law.sample(jax.random.key(0), (20_000,)))
  assert samples.shape == (20_000,)
  assert samples.min() >= 1
  assert np.issubdtype(samples.dtype, np.integer)
  stderr = samples.std(ddof=1) / math.sqrt(samples.size)
  assert abs(samples.mean() - law.mean) < 5 * stderr


def test_sample_fixed():
  """Fixed(n0) samples n0 everywhere, in the requested shape."""
  samples = np.asarray(lj.fixed(4).sample(jax.random.key(0), (3, 5)))
  np.testing.assert_array_equal(samples, np.full((3, 5), 4))


def test_laws_are_hashable_values():
  """Laws are frozen dataclasses: equal parameters give equal, hashable laws."""
  assert lj.geometric(0.25) == lj.geometric(0.25)
  assert hash(lj.shifted_poisson(2)) == hash(lj.shifted_poisson(2.0))
  assert lj.fixed(3) != lj.fixed(4)


class UserFixed:
  """A length law written by a user (no lagjax base class): every string has length 3."""

  mean = 3.0

  def log_pmf(self, n):
    return jax.numpy.where(n == 3, 0.0, -jax.numpy.inf)

  def sample(self, key, shape):
    del key
    return jax.numpy.full(shape, 3, dtype=jax.numpy.int64)

  def tail(self, n_max):
    return 1.0 if n_max < 3 else 0.0

  def pgf(self, z):
    return z ** 3

  def pgf_d1(self, z):
    return 3 * z ** 2

  def pgf_d2(self, z):
    return 6 * z


def test_a_users_own_length_law_is_accepted_and_exact():
  """A law with the required methods needs no lagjax base class: occurrence with it has the
  same positive rate and exact risk as with lj.fixed(3) (same sums, to roundoff)."""
  mine, ours = lj.occurrence(4, length=UserFixed()), lj.occurrence(4, length=lj.fixed(3))
  assert mine.positive_rate() == pytest.approx(ours.positive_rate(), abs=1e-15)
  theta = {"alpha": np.array([0.3, -0.2, 0.1, 0.0]), "beta": np.array([0.5, -0.4, 0.2, -0.1])}
  assert lj.population_risk(mine, theta).value == pytest.approx(
      lj.population_risk(ours, theta).value, abs=1e-14)


def test_a_law_without_the_required_methods_is_named():
  class Half:
    mean = 3.0

    def log_pmf(self, n):
      return 0.0

  with pytest.raises(ValueError, match=r"length must be a length law .*which lacks sample, tail"):
    lj.occurrence(4, length=Half())


def test_consumers_ask_by_capability_and_name_what_is_missing():
  """One protocol check for every consumer: UserFixed (pgf, no matrix_pgf) serves a task and
  the occurrence family, is refused by a regular language in one line naming the missing
  member and the consumer, and is not taken for a geometric law."""
  law = UserFixed()
  assert lj.tasks.get_task("occurrence", d=4, length=law, max_len=5).length is law
  assert lengths.provides(law, "pgf") and not lengths.provides(law, "geometric")
  assert lengths.provides(lj.geometric(0.2), "geometric")
  assert not lengths.provides(lj.shifted_poisson(2.0), "geometric")
  with pytest.raises(ValueError, match=r"^lj.languages.regular needs a matrix_pgf length law "
                                       r"\(with matrix_pgf\); got .*which lacks matrix_pgf.$"):
    lj.data.regular_builtins.parity(length=law)
  with pytest.raises(ValueError, match=r"for the task 'even_pairs'; got 3, which lacks mean"):
    lj.tasks.get_task("even_pairs", length=3)
  with pytest.raises(ValueError, match=r"unknown length-law capability 'exact'"):
    lengths.provides(law, "exact")


def test_truncation_length_of_a_law_without_closed_form_is_bisected():
  """UserFixed has no truncation_length of its own: the doubling and bisection over its tail
  find n0 = 3, as Fixed(3)'s closed form does."""
  assert not lengths.provides(UserFixed(), "truncation")
  assert lengths.truncation_length(UserFixed(), 1e-6) == lengths.truncation_length(
      lj.fixed(3), 1e-6) == 3


@pytest.mark.parametrize("law", [lj.geometric(0.25), lj.shifted_poisson(2.0)])
def test_poisson_rate_gives_the_length_law(law):
  """n = 1 + Poisson(λ) with λ from law.poisson_rate (the Poisson-mixture sampler's
  capability) has the law's mean within five standard errors."""
  assert lengths.provides(law, "poisson_mixture")
  rate_key, count_key = jax.random.split(jax.random.key(4))
  rates = law.poisson_rate(rate_key, (40_000,))
  n = 1 + np.asarray(jax.random.poisson(count_key, rates))
  assert abs(n.mean() - law.mean) < 5 * n.std() / math.sqrt(n.size)


@pytest.mark.parametrize("lam", [0.5, 3.0, 40.0])
def test_shifted_poisson_matrix_pgf_equals_the_exponential_form(lam):
  """Σ_n P(n) a Mⁿ b by Horner's rule (no LAPACK; docs/theory.md §3d) equals a M exp(λ(M - I)) b
  by jax's expm on one unbatched matrix, for row sums of M below 1.

  Tolerance 1e-13: Horner's roundoff is at most N ε max|term| with N ≤ 400 terms (9e-14)
  for |M| rows ≤ 1, the dropped tail ≤ lengths.TAIL = 1e-17, and expm's Padé error is of
  order ε. Stopping the sum near E[n] instead of its tail fails by 8e-4 to 0.6."""
  rng = np.random.default_rng(int(lam * 10))
  matrix = rng.uniform(size=(4, 4))
  matrix = 0.97 * matrix / matrix.sum(1, keepdims=True)
  left, right = rng.normal(size=4), rng.normal(size=(4, 2))
  law = lj.shifted_poisson(lam)
  exponential = jax.scipy.linalg.expm(lam * (matrix - np.eye(4)))
  expected = left @ matrix @ np.asarray(exponential) @ right
  assert np.abs(np.asarray(jax.jit(law.matrix_pgf)(left, matrix, right)) - expected).max() <= 1e-13


LAPACK_PRIMITIVES = ("lu", "lu_pivots_to_permutation", "triangular_solve", "eigh", "qr",
                     "cholesky", "svd", "custom_linear_solve")


def lapack_primitives(jaxpr) -> set[str]:
  """The LAPACK-backed primitives anywhere in a jaxpr, sub-jaxprs (scan, jit, cond) included."""
  found = set()
  for equation in jaxpr.eqns:
    if equation.primitive.name in LAPACK_PRIMITIVES:
      found.add(equation.primitive.name)
    for sub in jax.extend.core.jaxprs_in_params(equation.params):
      found |= lapack_primitives(sub)
  return found


def _shifted_poisson_with(lam):
  """A ShiftedPoisson whose leaf λ is `lam` as given (a tracer or an array), unchecked."""
  structure = jax.tree_util.tree_structure(lj.shifted_poisson(1.0))
  return jax.tree_util.tree_unflatten(structure, [lam])


def _substochastic(size, seed):
  rng = np.random.default_rng(seed)
  matrix = rng.uniform(size=(size, size))
  return (0.97 * matrix / matrix.sum(1, keepdims=True), rng.normal(size=size),
          rng.normal(size=(size, 2)))


def test_a_family_of_shifted_poisson_laws_calls_no_lapack():
  """Issue 34 item 7: a vmapped family of shifted-Poisson laws (traced λ) used to take expm,
  whose Padé step is a batched LU that can deadlock XLA's CPU thread pool
  (docs/decisions/no-batched-lapack.md). Its program now holds no LAPACK primitive."""
  matrix, left, right = _substochastic(4, 0)

  def family(lams):
    return jax.vmap(lambda lam: _shifted_poisson_with(lam).matrix_pgf(left, matrix, right))(lams)

  jaxpr = jax.make_jaxpr(family)(np.array([0.5, 3.0])).jaxpr
  assert lapack_primitives(jaxpr) == set()
  # The check itself sees expm's LU:
  expm = jax.make_jaxpr(jax.vmap(jax.scipy.linalg.expm))(np.zeros((2, 3, 3))).jaxpr
  assert "lu" in lapack_primitives(expm)


@pytest.mark.parametrize("size", [2, 4, 12])
def test_traced_shifted_poisson_equals_the_sum_and_expm(size):
  """A traced λ (exponential_by_squaring) equals the concrete λ's sum by Horner's rule and
  jax's expm within 1e-13, at λ from 0.05 to 40, and a vmapped family equals its members.

  Bound: Horner's roundoff ≤ N ε max|term| (9e-14, see the test above), s ≤ 7 squarings of a
  nonnegative matrix add about s Q ε (2e-14), the Taylor remainder is below 4e-20. Observed:
  ≤ 8.5e-14 against Horner, ≤ 1.6e-13 between jax's expm and Horner at λ = 200. A wrong
  number of squarings or a Taylor degree of 6 fails by more than 1e-6."""
  matrix, left, right = _substochastic(size, size)
  lams = np.array([0.05, 0.5, 3.0, 40.0])
  traced = jax.jit(lambda lam: _shifted_poisson_with(lam).matrix_pgf(left, matrix, right))
  family = np.asarray(jax.jit(jax.vmap(traced))(lams))
  for lam, member in zip(lams, family, strict=True):
    horner = np.asarray(lj.shifted_poisson(float(lam)).matrix_pgf(left, matrix, right))
    exponential = jax.scipy.linalg.expm(lam * (matrix - np.eye(size)))
    expm = left @ matrix @ np.asarray(exponential) @ right
    value = np.asarray(traced(lam))
    assert np.abs(value - horner).max() <= 1e-13, (lam, value - horner)
    assert np.abs(value - expm).max() <= 1e-13, (lam, value - expm)
    assert np.abs(member - value).max() <= 1e-15


def test_exponential_by_squaring_large_and_zero_norms():
  """exp(0) = I exactly, and exp(λ(M - I)) at λ = 1e4 (16 squarings) is jax's expm within
  1e-10 of its largest entry."""
  assert np.array_equal(np.asarray(lengths.exponential_by_squaring(np.zeros((3, 3)))),
                        np.eye(3))
  matrix, _, _ = _substochastic(3, 1)
  exponent = 1e4 * (matrix - np.eye(3))
  ours = np.asarray(lengths.exponential_by_squaring(exponent))
  theirs = np.asarray(jax.scipy.linalg.expm(exponent))
  assert np.abs(ours - theirs).max() <= 1e-10 * np.abs(theirs).max()


@pytest.mark.parametrize("build, message", [
    (lambda: lj.geometric("0.5"), r"^geometric p must be a probability .*; got '0\.5'\.$"),
    (lambda: lj.geometric(b"0.5"), r"^geometric p must be a probability"),
    (lambda: lj.geometric(np.bool_(True)), r"^geometric p must be a probability"),
    (lambda: lj.shifted_poisson("2.0"), r"^shifted Poisson lam must be finite and > 0; got '2\.0'"),
    (lambda: lj.shifted_poisson(True), r"^shifted Poisson lam must be finite and > 0; got True"),
    (lambda: lj.fixed("3"), r"^fixed length n0 must be an integer >= 1; got '3'\.$"),
    (lambda: lj.fixed(True), r"^fixed length n0 must be an integer >= 1; got True\.$"),
])
def test_law_parameters_refuse_strings_and_bools(build, message):
  """A law's parameter spelled as a string ('0.5') or given as a bool is refused (issue 34:
  numbers are checked for type, as step sizes are); from_spec parses its strings first."""
  with pytest.raises(ValueError, match=message):
    build()
  assert lj.lengths.from_spec("geometric:0.5") == lj.geometric(0.5)
