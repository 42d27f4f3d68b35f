"""Length laws on n ∈ {1, 2, …} (docs/theory.md section 1).

Each law gives its log-pmf, a jittable sampler, its probability generating
function G(z) = Σ_n P(n) z^n with G' and G'', its matrix form
Σ_n P(n) a·Mⁿ·b (for automata, docs/theory.md §3d), its mean G'(1) and its tail
P(n > N). Laws are frozen dataclasses, so they are hashable and can be static
arguments of jitted functions.

A length law is a protocol, not a class: any object with `mean`, `log_pmf(n)`,
`sample(key, shape)` and `tail(n_max)` (REQUIRED) is accepted where a language or a task
takes `length=`. Consumers ask for more by capability (CAPABILITIES), never by type:
`check_law(law, consumer, needs)` raises one line naming the missing method and the
consumer, `provides(law, capability)` asks for an optional one. Regular languages need
`matrix_pgf` for P(y = +1); the exact routes need `pgf` (Laplace, lattice) or
`matrix_pgf_derivatives` (transfer; `pgf_derivatives_by_jvp` is a ready default given
`matrix_pgf`); `geometric` laws (a `stop_probability`) take the transfer route's block path
and stack in the atlas. `from_spec('fixed:20')` builds a built-in law from a config string.
A new law is one class here (or in your own code) and, to be named in configs, an entry
of LAWS.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.linalg.resolvent import batched_dot, resolvent_series

# The probability mass a truncated sum over lengths may leave out (ShiftedPoisson.matrix_pgf).
TAIL = 1e-17


def _is_number(value) -> bool:
  """Whether a law's parameter is a number: strings that spell one ('0.5') and bools are not."""
  return not isinstance(value, str | bytes | bool | np.bool_)


def _check_probability(name: str, value: float) -> float:
  number = float(value) if _is_number(value) else math.nan
  if not (math.isfinite(number) and 0.0 < number < 1.0):
    raise ValueError(f"{name} must be a probability in the open interval (0, 1); got {value!r}.")
  return number


MAX_FIXED_LENGTH_BITS = 24   # Fixed(n0).matrix_pgf serves n0 < 2^24


@dataclasses.dataclass(frozen=True)
class Geometric:
  """Geometric(p) on {1, 2, …}: P(n) = p (1-p)^(n-1), G(z) = p z / (1 - (1-p) z) (§1).

  Mean 1/p, tail P(n > N) = (1-p)^N; the matrix form is one linear solve (§1c).

  Attributes:
    p: the stopping probability, in the open interval (0, 1).

  Example:
    >>> law = lj.geometric(0.25)
    >>> law.mean, round(law.tail(2), 6)       # 1/p and (1-p)²
    (4.0, 0.5625)
    >>> round(float(law.pgf(0.5)), 6)         # p z / (1 - (1-p) z) = 0.125 / 0.625
    0.2
  """

  p: float

  def __post_init__(self):
    object.__setattr__(self, "p", _check_probability("geometric p", self.p))

  @property
  def mean(self) -> float:
    return 1.0 / self.p

  def log_pmf(self, n):
    return jnp.log(self.p) + (n - 1) * jnp.log1p(-self.p)

  def sample(self, key, shape):
    return jax.random.geometric(key, self.p, shape)

  def pgf(self, z):
    return self.p * z / (1.0 - (1.0 - self.p) * z)

  def pgf_d1(self, z):
    return self.p / (1.0 - (1.0 - self.p) * z) ** 2

  def pgf_d2(self, z):
    return 2.0 * self.p * (1.0 - self.p) / (1.0 - (1.0 - self.p) * z) ** 3

  def matrix_pgf(self, left, matrix, right):
    """Σ_n P(n) left·Mⁿ·right = p (left·M)(I - (1-p) M)⁻¹ right, one linear solve.

    One law, one LU solve: lagjax never vmaps it. A family of p in one program goes through
    plain-array Gauss-Jordan instead (regular._geometric_masses, the balance search), as
    batched LU can deadlock XLA's CPU thread pool (docs/decisions/no-batched-lapack.md).
    """
    system = jnp.eye(matrix.shape[0]) - (1.0 - self.p) * matrix
    return self.p * (left @ matrix) @ jnp.linalg.solve(system, right)

  def matrix_pgf_derivatives(self, left, matrices, right):
    """F, F', F'' at s = 0 of F(s) = Σ_n P(n) left·Mⁿ·right with M = M(s) = M0 + s M1 + ½ s² M2.

    With q = 1 - p, F(s) = p·(left M)(I - q M)⁻¹ right, a row vector through a resolvent:
    resolvent_series with rows left·M_k and the constant column right. The matrices may
    carry one trailing batch axis, (Q, Q, N), with left (Q,) and right (Q, J) shared: the
    transfer route passes all quadrature nodes at once.
    """
    batched = matrices[0].ndim == 3
    m0, m1, m2 = (each if batched else each[..., None] for each in matrices)
    left, right = left[:, None], right[..., None]
    q = 1.0 - self.p
    rows = tuple(batched_dot(left, each) for each in (m0, m1, m2))
    system = jnp.eye(m0.shape[0])[..., None] - q * m0
    series = resolvent_series(rows, right[None], system, q,
                              (lambda y: batched_dot(y, m1), lambda y: batched_dot(y, m2)))
    return tuple(self.p * (each if batched else each[..., 0]) for each in series)

  def tail(self, n_max: int) -> float:
    """P(n > n_max) = (1-p)^n_max."""
    return float(math.exp(n_max * math.log1p(-self.p)))

  @property
  def stop_probability(self):
    """p: the law is geometric, so its matrix form is one resolvent (capability `geometric`)."""
    return self.p

  def poisson_rate(self, key, shape):
    """λ with n - 1 ~ Poisson(λ) given λ: Exponential of mean (1-p)/p (a Gamma(1) mixture)."""
    return jax.random.exponential(key, shape) * ((1.0 - self.p) / self.p)

  def truncation_length(self, tail_mass: float) -> int:
    """The smallest N with (1-p)^N <= tail_mass: ⌈log ε / log(1-p)⌉."""
    return max(1, math.ceil(math.log(tail_mass) / math.log1p(-self.p)))


@dataclasses.dataclass(frozen=True)
class Fixed:
  """Every string has length n0: G(z) = z^n0 (the bounded-length contrast, §1).

  Attributes:
    n0: the length, an integer in {1, …, 2^24 - 1}.

  Example:
    >>> law = lj.fixed(3)
    >>> law.mean, law.pgf(0.5), law.tail(2), law.tail(3)   # P(n > N) = 1{N < n0}
    (3.0, 0.125, 1.0, 0.0)
  """

  n0: int

  def __post_init__(self):
    object.__setattr__(self, "n0", validation.check_int("fixed length n0", self.n0, 1,
                                                        integral_floats=True))
    if self.n0 >= 2**MAX_FIXED_LENGTH_BITS:
      raise ValueError(f"fixed length n0 must be < 2^{MAX_FIXED_LENGTH_BITS}; got {self.n0}.")

  @property
  def mean(self) -> float:
    return float(self.n0)

  def log_pmf(self, n):
    return jnp.where(n == self.n0, 0.0, -jnp.inf)

  def sample(self, key, shape):
    del key
    return jnp.full(shape, self.n0, dtype=jnp.int64)

  def pgf(self, z):
    return z**self.n0

  def pgf_d1(self, z):
    return self.n0 * z ** (self.n0 - 1)

  def pgf_d2(self, z):
    # No branch on n0 (it may be traced): at n0 = 1 the coefficient is 0 and z^0 = 1.
    return self.n0 * (self.n0 - 1) * z ** jnp.maximum(self.n0 - 2, 0)

  def matrix_pgf(self, left, matrix, right):
    """left·M^n0·right by repeated squaring over the bits of n0: as many as n0 has when it is
    a Python int, MAX_FIXED_LENGTH_BITS when it is traced."""
    def square(bit, carry):
      power, product = carry
      take = (self.n0 >> bit) & 1
      return power @ power, jnp.where(take, product @ power, product)

    bits = self.n0.bit_length() if isinstance(self.n0, int) else MAX_FIXED_LENGTH_BITS
    _, product = jax.lax.fori_loop(0, bits, square,
                                   (matrix, jnp.eye(matrix.shape[0], dtype=matrix.dtype)))
    return left @ product @ right

  def matrix_pgf_derivatives(self, left, matrices, right):
    """F, F', F'' at s = 0 of Σ_n P(n) left·M(s)ⁿ·right, M(s) = M0 + s M1 + ½ s² M2."""
    return pgf_derivatives_by_jvp(self, left, matrices, right)

  def tail(self, n_max: int) -> float:
    return 1.0 if n_max < self.n0 else 0.0

  def truncation_length(self, tail_mass: float) -> int:
    """n0, for every tail_mass < 1."""
    del tail_mass
    return self.n0


# exponential_by_squaring: Taylor degree and the most squarings (‖A‖∞ up to 2^31: λ < 2^30).
EXP_TAYLOR_DEGREE = 16
EXP_MAX_SQUARINGS = 32


def exponential_by_squaring(matrix):
  """exp(A) for a small square A by scaling and squaring of its Taylor polynomial, in plain
  array operations (matrix products and selects): no LAPACK call, so a vmapped family never
  reaches the batched LU that expm's Padé step takes (docs/decisions/no-batched-lapack.md).

  With s = ⌈log2(2‖A‖∞)⌉ squarings (at least 0), ‖A/2^s‖∞ ≤ ½, and the Taylor polynomial of
  degree 16 leaves a relative error below (½)^17 e^½ / 17! < 4e-20, far under roundoff; each
  squaring adds a relative error of order Q·ε for the nonnegative exp(λ(M - I)) of a
  substochastic M (docs/theory.md §3d). The loop runs EXP_MAX_SQUARINGS times, selecting the
  squared matrix while fewer than s squarings are done, so the number s may be traced.

  Args:
    matrix: (Q, Q), with ‖A‖∞ ≤ 2^(EXP_MAX_SQUARINGS - 1) (for λ(M - I): λ < 2^30).

  Returns:
    exp(A), (Q, Q).

  Example:
    >>> rotation = jnp.array([[0.0, -1.0], [1.0, 0.0]])   # exp(t J) turns by the angle t
    >>> turned = lj.data.lengths.exponential_by_squaring(2.0 * rotation)
    >>> bool(jnp.allclose(turned, jnp.array([[np.cos(2), -np.sin(2)], [np.sin(2), np.cos(2)]]),
    ...                   rtol=0, atol=1e-15))
    True
  """
  norm = jax.lax.stop_gradient(jnp.max(jnp.sum(jnp.abs(matrix), axis=1)))
  squarings = jnp.maximum(0.0, jnp.ceil(jnp.log2(jnp.maximum(2.0 * norm, 1e-300))))
  scaled = matrix / 2.0**squarings
  identity = jnp.eye(matrix.shape[0], dtype=scaled.dtype)
  power_sum = identity
  for k in range(EXP_TAYLOR_DEGREE, 0, -1):   # Horner: I + A/1 (I + A/2 (I + …))
    power_sum = identity + (scaled @ power_sum) / k

  def square(result, step):
    return jnp.where(step < squarings, result @ result, result), None

  result, _ = jax.lax.scan(square, power_sum, jnp.arange(EXP_MAX_SQUARINGS, dtype=scaled.dtype))
  return result


@dataclasses.dataclass(frozen=True)
class ShiftedPoisson:
  """n = 1 + K with K ~ Poisson(lam): G(z) = z exp(lam (z - 1)), unbounded support (§1).

  Attributes:
    lam: the Poisson rate λ > 0; the mean length is 1 + λ.

  Example:
    >>> law = lj.shifted_poisson(2.0)
    >>> law.mean
    3.0
    >>> round(law.tail(1), 6), round(1 - float(np.exp(-2.0)), 6)   # P(K ≥ 1) = 1 - e^{-λ}
    (0.864665, 0.864665)
  """

  lam: float

  def __post_init__(self):
    lam = float(self.lam) if _is_number(self.lam) else math.nan
    if not (math.isfinite(lam) and lam > 0):
      raise ValueError(f"shifted Poisson lam must be finite and > 0; got {self.lam!r}.")
    object.__setattr__(self, "lam", lam)

  @property
  def mean(self) -> float:
    return 1.0 + self.lam

  def log_pmf(self, n):
    k = n - 1
    return k * jnp.log(self.lam) - self.lam - jax.scipy.special.gammaln(k + 1.0)

  def sample(self, key, shape):
    return 1 + jax.random.poisson(key, self.lam, shape)

  def pgf(self, z):
    return z * jnp.exp(self.lam * (z - 1.0))

  def pgf_d1(self, z):
    return jnp.exp(self.lam * (z - 1.0)) * (1.0 + self.lam * z)

  def pgf_d2(self, z):
    return jnp.exp(self.lam * (z - 1.0)) * (2.0 * self.lam + self.lam**2 * z)

  def matrix_pgf(self, left, matrix, right):
    """Σ_n P(n) left·Mⁿ·right = left·M·exp(λ(M - I))·right (§3d).

    For a concrete λ, the sum itself up to the N with P(n > N) ≤ TAIL, by Horner's rule in
    matrix-vector products: the error is at most TAIL when every row of M has absolute sum
    ≤ 1, as the transfer route's T(0) does. No LAPACK call: under vmap over quadrature
    nodes, expm's batched LU can deadlock XLA's CPU thread pool
    (docs/decisions/no-batched-lapack.md). For a traced λ (a law passed through jit, or a
    vmapped family of laws) N is unknown at trace time, so exp(λ(M - I)) is taken by
    scaling and squaring of its Taylor polynomial (exponential_by_squaring), again in plain
    array operations.
    """
    if not isinstance(self.lam, float):
      exponent = self.lam * (matrix - jnp.eye(matrix.shape[0]))
      return (left @ matrix) @ exponential_by_squaring(exponent) @ right
    lengths = np.arange(1.0, self.lam + 40.0 * math.sqrt(self.lam) + 61.0)
    with jax.ensure_compile_time_eval():  # concrete numbers, also inside a trace
      pmf = np.exp(np.asarray(self.log_pmf(lengths)))
    beyond = np.cumsum(pmf[::-1])[::-1] - pmf                         # P(n > lengths)
    pmf = pmf[:np.argmax(beyond <= TAIL) + 1][::-1]                   # P(N), ..., P(1)

    def horner(vector, probability):  # v <- P(n) right + M v, from n = N down to 1
      return probability * right + matrix @ vector, None

    vector, _ = jax.lax.scan(horner, jnp.zeros_like(right * matrix[0, 0]), pmf)
    return left @ (matrix @ vector)

  def matrix_pgf_derivatives(self, left, matrices, right):
    """F, F', F'' at s = 0 of Σ_n P(n) left·M(s)ⁿ·right, M(s) = M0 + s M1 + ½ s² M2."""
    return pgf_derivatives_by_jvp(self, left, matrices, right)

  def poisson_rate(self, key, shape):
    """λ with n - 1 ~ Poisson(λ): λ itself, fixed."""
    del key
    return jnp.full(shape, self.lam)

  def tail(self, n_max: int) -> float:
    """P(n > n_max) = P(K >= n_max), summed in log space from the first term on."""
    if n_max < 1:
      return 1.0
    k = np.arange(n_max, n_max + 20 * int(self.lam + 20))
    log_terms = k * math.log(self.lam) - self.lam - np.array([math.lgamma(i + 1.0) for i in k])
    return float(np.exp(log_terms).sum())


class LengthLaw(Protocol):
  """What every length law gives (REQUIRED): sampling, truncation and the mean (§1).

  Geometric, Fixed and ShiftedPoisson are the built-in ones; any object with these
  members is a law. Consumers that need more ask by capability (check_law, provides).

  Attributes:
    mean: E[n].
    log_pmf: n -> log P(n), jittable.
    sample: (key, shape) -> lengths n >= 1, jittable.
    tail: N -> P(n > N), a Python float.

  Example:
    >>> law = lj.shifted_poisson(2.0)
    >>> all(hasattr(law, name) for name in lj.lengths.REQUIRED), law.mean
    (True, 3.0)
  """

  @property
  def mean(self) -> float: ...

  def log_pmf(self, n): ...

  def sample(self, key, shape): ...

  def tail(self, n_max: int) -> float: ...


# What every law must give (sampling, truncation, the mean).
REQUIRED = ("mean", "log_pmf", "sample", "tail")

# The capabilities a consumer may ask a law for, each by the members it needs.
CAPABILITIES = {
    "required": REQUIRED,                              # languages, tasks, the sampled route
    "pgf": ("pgf", "pgf_d1", "pgf_d2"),                # the Laplace and lattice routes (§1c)
    "matrix_pgf": ("matrix_pgf",),                     # P(y = +1) of a regular language (§1c)
    "matrix_pgf_derivatives": ("matrix_pgf_derivatives",),  # the transfer route (§3d)
    "geometric": ("stop_probability",),                # its block path, the atlas (§1c)
    "truncation": ("truncation_length",),              # a closed-form truncation_length
    "poisson_mixture": ("poisson_rate",),              # n - 1 Poisson given λ (§9d sampling)
}

BUILT_IN = "lj.geometric, lj.fixed, lj.shifted_poisson"


def _missing(law, capability: str) -> list[str]:
  if capability not in CAPABILITIES:
    raise ValueError(f"unknown length-law capability {capability!r}; known capabilities: "
                     f"{sorted(CAPABILITIES)}.")
  return [name for name in CAPABILITIES[capability] if not hasattr(law, name)]


def provides(law, capability: str) -> bool:
  """Whether `law` has every member of `capability` (a key of CAPABILITIES), for consumers
  with an optional faster path (§1c).

  Args:
    law: any object.
    capability: a key of CAPABILITIES.

  Returns:
    True when the law has each member the capability names.

  Raises:
    ValueError: for an unknown capability.

  Example:
    >>> lj.lengths.provides(lj.geometric(0.1), "geometric")
    True
    >>> lj.lengths.provides(lj.fixed(3), "geometric"), lj.lengths.provides(lj.fixed(3), "pgf")
    (False, True)
  """
  return not _missing(law, capability)


def check_law(law, consumer: str, needs: tuple[str, ...] = ("required",), *,
              field: str = "length"):
  """`law` as given when it has what `consumer` needs; one line naming the missing members,
  the capability and the consumer otherwise (the one length-law protocol check, §1).

  Args:
    law: the value given as a length law.
    consumer: what needs it, as the message names it (e.g. "lj.occurrence").
    needs: keys of CAPABILITIES; "required" (the members every law has) by default.
    field: the option's name in the message.

  Returns:
    The law, unchanged.

  Raises:
    ValueError: naming the field, the members the law lacks and the consumer.

  Example:
    >>> lj.lengths.check_law(lj.fixed(3), "the transfer route", ("matrix_pgf_derivatives",))
    Fixed(n0=3)
    >>> lj.lengths.check_law(10, "lj.tasks.make")
    Traceback (most recent call last):
    ...
    ValueError: length must be a length law (...) for lj.tasks.make; got 10, which lacks mean, ...
    >>> lj.lengths.check_law(lj.fixed(3), "the atlas", ("geometric",))
    Traceback (most recent call last):
    ...
    ValueError: the atlas needs a geometric length law (...); got Fixed(n0=3), which lacks ...
  """
  for capability in needs:
    missing = _missing(law, capability)
    if not missing:
      continue
    if capability == "required":
      raise ValueError(
          f"{field} must be a length law ({BUILT_IN}, or an object with {', '.join(REQUIRED)}) "
          f"for {consumer}; got {law!r}, which lacks {', '.join(missing)}.")
    raise ValueError(
        f"{consumer} needs a {capability} length law (with "
        f"{', '.join(CAPABILITIES[capability])}); got {law!r}, which lacks "
        f"{', '.join(missing)}.")
  return law


def pgf_derivatives_by_jvp(law, left, matrices, right):
  """F, F', F'' at s = 0 of F(s) = law.matrix_pgf(left, M0 + s M1 + ½ s² M2, right),
  by nested jax.jvp (exact; the laws without a cheaper closed form use this; §1c, §3d).

  Args:
    law: a length law with matrix_pgf(left, matrix, right).
    left: row vector (Q,).
    matrices: (M0, M1, M2), each (Q, Q).
    right: column vector (Q,).

  Returns:
    (F, F', F''), three scalars.

  Example:
    >>> # Q = 1 and M(s) = 1 + s: F(s) = E (1+s)ⁿ, so F' = E n = 3 and F'' = E n(n-1) = 6.
    >>> one = np.ones(1)
    >>> matrices = (np.eye(1), np.eye(1), np.zeros((1, 1)))
    >>> values = lj.lengths.pgf_derivatives_by_jvp(lj.fixed(3), one, matrices, one)
    >>> [round(float(v), 6) for v in values]
    [1.0, 3.0, 6.0]
  """
  m0, m1, m2 = matrices

  def generating(s):
    return law.matrix_pgf(left, m0 + s * m1 + 0.5 * s * s * m2, right)

  def slope(s):
    return jax.jvp(generating, (s,), (jnp.ones_like(s),))
  zero = jnp.zeros((), m0.dtype)
  (value, first), (_, second) = jax.jvp(slope, (zero,), (jnp.ones_like(zero),))
  return value, first, second


LAWS = {"geometric": lambda p: Geometric(float(p)), "fixed": lambda n0: Fixed(n0),
        "shifted_poisson": lambda lam: ShiftedPoisson(float(lam))}


def from_spec(spec: str) -> LengthLaw:
  """A length law from 'geometric:0.1', 'fixed:20' or 'shifted_poisson:3.0', as configs
  name it; one line naming the spec and the allowed forms otherwise (§1).

  Args:
    spec: "geometric:p", "fixed:n0" or "shifted_poisson:lam".

  Returns:
    The law: Geometric, Fixed or ShiftedPoisson.

  Raises:
    ValueError: for any other form, or a value that is not a number.

  Example:
    >>> lj.lengths.from_spec("fixed:20")
    Fixed(n0=20)
    >>> lj.lengths.from_spec("geometric:0.1").mean
    10.0
  """
  name, _, value = str(spec).partition(":")
  forms = "'geometric:p', 'fixed:n0' or 'shifted_poisson:lam'"
  if name not in LAWS or not value:
    raise ValueError(f"length law {spec!r} must be {forms}.")
  try:
    number = float(value)
  except ValueError:
    raise ValueError(f"length law {spec!r}: {value!r} is not a number; use {forms}.") from None
  return LAWS[name](number)


# The constructors users call, lj.geometric(0.1), lj.fixed(20), lj.shifted_poisson(3.0): the
# classes themselves, which check their arguments (§1).
geometric, fixed, shifted_poisson = Geometric, Fixed, ShiftedPoisson


def truncation_length(law: LengthLaw, tail_mass: float, limit: int = 10**7) -> int:
  """Smallest N with P(n > N) <= tail_mass (§1).

  The law's own closed form when it has one (capability `truncation`: ⌈log ε / log(1-p)⌉
  for Geometric(p), n0 for Fixed(n0)); for other laws N is doubled until the tail is small
  enough, then bisected.

  Args:
    law: a length law with tail(N).
    tail_mass: ε, the probability allowed beyond N.
    limit: the largest N tried before giving up.

  Returns:
    N, an int ≥ 1.

  Raises:
    ValueError: unless 0 < tail_mass < 1, or when N would exceed `limit`.

  Example:
    >>> lj.lengths.truncation_length(lj.geometric(0.5), 1e-3)   # 2^-10 ≤ 1e-3 < 2^-9
    10
    >>> # P(K ≥ 5) ≈ 3.7e-3 and P(K ≥ 6) ≈ 5.9e-4 for K ~ Poisson(1)
    >>> lj.lengths.truncation_length(lj.shifted_poisson(1.0), 1e-3)
    6
  """
  tail_mass = validation.check_real("tail_mass", tail_mass, minimum=0.0, strict=True,
                                    maximum=1.0, strict_max=True)
  if provides(law, "truncation"):
    return law.truncation_length(tail_mass)
  n = 1
  while law.tail(n) > tail_mass:
    n = n * 2
    if n > limit:
      raise ValueError(f"length law {law} needs more than {limit} lengths for tail {tail_mass}.")
  lo, hi = n // 2, n
  while lo + 1 < hi:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if law.tail(mid) > tail_mass else (lo, mid)
  return hi


def _register_pytree(law_type, fields: tuple[str, ...], static: tuple[str, ...] = ()):
  """Length laws as pytrees: `fields` are leaves (traceable, so one compiled function serves
  every value), `static` ones are structure. Unflattening skips validation, since leaves
  may be tracers."""

  def unflatten(aux, children):
    law = object.__new__(law_type)
    for name, value in zip(static + fields, tuple(aux) + tuple(children)):
      object.__setattr__(law, name, value)
    return law

  jax.tree_util.register_pytree_node(
      law_type, lambda law: (tuple(getattr(law, f) for f in fields),
                             tuple(getattr(law, f) for f in static)), unflatten)


_register_pytree(Geometric, ("p",))
_register_pytree(ShiftedPoisson, ("lam",))
_register_pytree(Fixed, ("n0",))
