"""Counting languages: labels decided by token counts and the string's two ends (docs/theory.md
§1d), the non-regular languages the formal-language literature cites most.

- majority(): over {0, 1}, y = +1 iff #1 > #0; a tie is negative (FLaRe);
- plurality(letter, d): over {0, …, d-1}, d ≤ 3, y = +1 iff #letter exceeds every other
  token's count; a tie is negative (majority's rule; plurality(1, 2) is majority);
- dyck1(): 0 = "(", 1 = ")", y = +1 iff w is balanced, at any depth (Dyck-1);
- anbn(): y = +1 iff w = 0^m 1^m with m ≥ 1.

Sources. Majority follows FLaRe (Butoi et al. 2025), the rycolab/neural-network-recognizers
file src/recognizers/hand_picked_languages/majority.py (commit 019de1a): a string is positive
iff n_1s > n_0s, so ties are negative. (The Chomsky-hierarchy suite's compare_occurrence,
google-deepmind/neural_networks_chomsky_hierarchy tasks/dcf/compare_occurrence.py, labels
n_1 >= n_0 as class 1 although its docstring says "higher"; lagjax follows FLaRe.) Dyck-1
and aⁿbⁿ follow Bhattamishra, Ahuja & Goyal (2020), satwik77/Transformer-Formal-Languages:
Dyck-1 is the language of S → (S) | SS | ε (src/utils/dyck_generator.py, pair "()"), aⁿbⁿ
the counter language a^n b^n with n ≥ 1 (src/utils/data_generator.py, CounterLanguage with
two letters). Neither is a task of the Chomsky-hierarchy suite (Delétang et al. 2023), whose
deterministic context-free tasks are stack_manipulation, reverse_string,
modular_arithmetic_brackets and solve_equation; its classification of counting languages as
deterministic context-free is the one the literature uses.

Each language declares CountLabels (lagjax/data/protocol.py): given its length n, its count
vector c and its first and last tokens a, b, a string with iid tokens is a uniformly random
arrangement of c with those ends, and q(c, a, b) = P(y = +1 | c, a, b) is::

  majority, plurality: 1{c_letter > c_x for every x ≠ letter}, whatever a and b;
  dyck1: for c = (m, m), a = "(", b = ")": Catalan(m) / C(2m-2, m-1) = 2(2m-1) / (m(m+1))
    (every balanced string starts with "(" and ends with ")"; the middle is any of the
    C(2m-2, m-1) arrangements of m-1 of each); 0 otherwise;
  anbn: for c = (m, m), a = 0, b = 1: 1 / C(2m-2, m-1) (one arrangement of the middle is
    0^(m-1) 1^(m-1)); 0 otherwise.

The count route (lagjax/risk/count.py) sums the direct model's risk over (n, c, a, b) with q.
Length law: Geometric(0.1) by default (mean length 10). No geometric law balances Dyck-1 or
aⁿbⁿ (P(y = +1) is 0.0437 and 0.0282 at Geometric(0.1) under uniform π): for them the
class-weighted risk `lj.risk_fn(lang, class_weights="balanced")` (½ E[ℓ | y = +1] +
½ E[ℓ | y = -1]) is the one to use, and `default_class_weights()` says so to the routes.
Majority, with ties negative, has P(y = +1) = ½ - P(tie)/2 < ½ under uniform π (0.4281 at
Geometric(0.1)).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import protocol, registry
from lagjax.data.lengths import LengthLaw, check_law, truncation_length
from lagjax.data.regular import DEFAULT_UNBALANCED_LENGTH

KINDS = ("majority", "plurality", "dyck1", "anbn")
MAX_PLURALITY_D = 3          # the count lattice of d ≤ 3 stays small (docs/theory.md §1d)
RATE_TAIL = 1e-16            # P(n > N) left out of positive_rate's sum over lengths
MAX_RATE_LENGTH = 10**7      # the longest length positive_rate sums to (O(N) kinds)
MAX_RATE_LENGTH_PLURALITY3 = 20_000   # O(N²) for plurality over three letters


@dataclasses.dataclass(frozen=True)
class CountingLanguage(protocol.Language, protocol.CountLabels):
  """A counting language with its token law π and length law (docs/theory.md §1d): a
  Language that declares CountLabels, with one count block per token.

  Attributes:
    kind: one of KINDS.
    d: alphabet size (2, or 3 for plurality).
    letter: the letter that must win the count (majority: 1; plurality: the letter; dyck1
      and anbn: 0, unused).
    pi: token law π, a tuple of d probabilities.
    length: the length law L.

  Example:
    >>> lang = lj.data.counting.dyck1()
    >>> lang.describe(), lang.count_blocks(2), lang.default_class_weights()
    ('dyck1(d=2)', ((0,), (1,)), 'balanced')
    >>> # m = 3 of each, "(" first, ")" last: Catalan(3)/C(4, 2) = 5/6 of the strings balance
    >>> lang.label_probability(np.array([[3, 3], [3, 3]]), np.array([0, 1]),
    ...                        np.array([1, 1])).tolist()
    [0.8333333333333334, 0.0]
  """

  kind: str
  d: int
  letter: int
  pi: tuple[float, ...]
  length: LengthLaw

  def describe(self) -> str:
    if self.kind == "plurality":
      return f"plurality(d={self.d}, letter={self.letter})"
    return f"{self.kind}(d={self.d})"

  def token_roles(self) -> np.ndarray:
    if self.kind == "plurality":
      # The other letters enter the label symmetrically (max of their counts).
      roles = np.zeros(self.d, np.int64)
      roles[self.letter] = 1
      return roles
    return np.arange(self.d)

  def default_class_weights(self) -> str:
    """"balanced" where positives are rare and no geometric law balances the classes (dyck1,
    anbn), else "population": the class_weights a risk route uses when none is given."""
    return "balanced" if self.kind in ("dyck1", "anbn") else "population"

  def label_probability(self, counts, first, last) -> np.ndarray:
    counts, first, last = _count_arguments(counts, first, last, self.d)
    if self.kind in ("majority", "plurality"):
      others = np.delete(counts, self.letter, axis=1)
      return (counts[:, self.letter] > others.max(axis=1)).astype(np.float64)
    m = counts[:, 0]
    ends = (counts[:, 1] == m) & (m >= 1) & (first == 0) & (last == 1)
    if self.kind == "dyck1":
      safe = np.where(ends, m, 1).astype(np.float64)
      return np.where(ends, 2.0 * (2.0 * safe - 1.0) / (safe * (safe + 1.0)), 0.0)
    return np.where(ends, _inverse_central_binomial(np.where(ends, m, 1)), 0.0)

  def label_tokens(self, tokens, mask):
    tokens = jnp.asarray(tokens)
    mask = jnp.asarray(mask, bool)
    if self.kind in ("majority", "plurality"):
      counts = jnp.sum((tokens[..., None] == jnp.arange(self.d)) & mask[..., None], axis=-2)
      others = counts[..., [x for x in range(self.d) if x != self.letter]]
      positive = counts[..., self.letter] > jnp.max(others, axis=-1)
    elif self.kind == "dyck1":
      # The depth after each prefix; padding adds 0, so it keeps the final depth.
      depth = jnp.cumsum(jnp.where(mask, jnp.where(tokens == 0, 1, -1), 0), axis=-1)
      positive = (jnp.min(depth, axis=-1) >= 0) & (depth[..., -1] == 0)
    else:
      zeros = jnp.sum((tokens == 0) & mask, axis=-1)
      ones = jnp.sum((tokens == 1) & mask, axis=-1)
      # 0^m 1^m: equal counts and no 1 followed by a 0 among the real tokens.
      descents = (tokens[..., :-1] == 1) & (tokens[..., 1:] == 0) & mask[..., 1:]
      positive = (zeros == ones) & (zeros >= 1) & ~jnp.any(descents, axis=-1)
    return jnp.where(positive, 1.0, -1.0)

  def length_rates(self, n_max: int) -> np.ndarray:
    """P(y = +1 | n) for n = 1, …, n_max (docs/theory.md §1d), in float64.

    majority/plurality of two letters (s = π_letter, t = 1 - s): the walk S_n = c_letter -
    c_other gives r(n + 1) = r(n) + s P(S_n = 0) - t P(S_n = 1) with P(S_2k = 0) = C(2k, k)
    (st)^k; plurality of three letters: Σ_k P(c_letter = k) P(every other count < k | k);
    dyck1: Catalan(m) (π_0 π_1)^m at n = 2m; anbn: (π_0 π_1)^m at n = 2m; 0 at odd n. The
    central terms are running products of exact ratios, relative error ≤ 3nε (ε = 2^-53).

    Args:
      n_max: the longest length, at least 1.

    Returns:
      (n_max,) array, entry n - 1 for length n.

    Example:
      >>> lj.data.counting.majority().length_rates(4).tolist()   # 1/2, 1/4, 1/2, 5/16
      [0.5, 0.25, 0.5, 0.3125]
    """
    n_max = validation.check_int("n_max", n_max, 1)
    pi = self.pi_array
    if self.kind in ("majority", "plurality") and self.d == 2:
      return _two_letter_majority_rates(pi[self.letter], n_max)
    if self.kind == "plurality":
      return _three_letter_plurality_rates(pi, self.letter, n_max)
    half = np.arange(1, n_max // 2 + 1, dtype=np.float64)        # m = 1, …, ⌊n_max/2⌋
    x = pi[0] * pi[1]
    if self.kind == "dyck1":
      # Catalan(m) x^m: Catalan(1) = 1, Catalan(m+1)/Catalan(m) = 2(2m+1)/(m+2).
      ratios = np.concatenate([[x], x * 2.0 * (2.0 * half[:-1] + 1.0) / (half[:-1] + 2.0)])
    else:
      ratios = np.full(half.shape, x)
    rates = np.zeros(n_max)
    rates[1::2] = np.cumprod(ratios)
    return rates

  def positive_rate(self) -> float:
    """Σ_{n ≤ N} P(n) P(y = +1 | n), N the first length with P(n > N) ≤ RATE_TAIL: exact up
    to that neglected mass (docs/theory.md §1d)."""
    limit = MAX_RATE_LENGTH_PLURALITY3 if self.kind == "plurality" and self.d == 3 else (
        MAX_RATE_LENGTH)
    n_max = truncation_length(self.length, RATE_TAIL, limit=limit)
    lengths = np.arange(1, n_max + 1)
    masses = np.exp(np.asarray(self.length.log_pmf(lengths), dtype=np.float64))
    return math.fsum(masses * self.length_rates(n_max))


def _count_arguments(counts, first, last, blocks: int):
  """counts (K, blocks), first and last (K,) as int64 arrays, or one line naming the field."""
  counts = np.asarray(counts)
  if counts.ndim != 2 or counts.shape[1] != blocks:
    raise ValueError(f"counts must have shape (K, {blocks}) (one column per count block); got "
                     f"shape {counts.shape}.")
  counts = counts.astype(np.int64)
  ends = []
  for name, value in (("first", first), ("last", last)):
    value = np.asarray(value)
    if value.shape != (counts.shape[0],):
      raise ValueError(f"{name} must have shape ({counts.shape[0]},) to match counts; got "
                       f"shape {value.shape}.")
    ends.append(value.astype(np.int64))
  return counts, ends[0], ends[1]


def _inverse_central_binomial(m: np.ndarray) -> np.ndarray:
  """1 / C(2m - 2, m - 1) for integers m ≥ 1: exact Python integers and one correctly rounded
  division (no overflow; underflows to 0 beyond m ≈ 540, where the value is < 1e-320)."""
  # int / int is correctly rounded in Python (1.0 / int would round the int first, and
  # overflow beyond 2^1024).
  values = {int(k): 1 / math.comb(2 * int(k) - 2, int(k) - 1) for k in np.unique(m)}
  return np.array([values[int(k)] for k in m.ravel()], np.float64).reshape(m.shape)


def _two_letter_majority_rates(s: float, n_max: int) -> np.ndarray:
  """P(c_letter > n/2 | n) for n = 1..n_max, π_letter = s over two letters."""
  t = 1.0 - s
  k = np.arange((n_max + 1) // 2, dtype=np.float64)              # 2k < n_max
  # e_k = P(S_2k = 0) = C(2k, k) (st)^k, e_{k+1} / e_k = st · 2(2k+1)/(k+1).
  central = np.cumprod(np.concatenate([[1.0], s * t * 2.0 * (2.0 * k[:-1] + 1.0)
                                       / (k[:-1] + 1.0)]))
  steps = np.empty(2 * len(k))
  steps[0::2] = s * central                                       # r(2k+1) - r(2k)
  steps[1::2] = -t * s * central * (2.0 * k + 1.0) / (k + 1.0)    # r(2k+2) - r(2k+1)
  return np.cumsum(steps)[:n_max]


def _three_letter_plurality_rates(pi: np.ndarray, letter: int, n_max: int) -> np.ndarray:
  """P(c_letter > c_b and c_letter > c_c | n) over three letters, n = 1..n_max.

  With k = c_letter and m = n - k, c_b ~ Bin(m, ρ), ρ = π_b/(π_b + π_c), and the event is
  m - k + 1 ≤ c_b ≤ k - 1. Log-factorials by math.lgamma (a few ulps each): the relative
  error of each term is below 1e-16·(10 + 4 log n_max!) (≤ 1e-12 for n_max ≤ 400).
  """
  s = pi[letter]
  b, c = (pi[x] for x in range(3) if x != letter)
  rho = b / (b + c)
  log_factorial = np.array([math.lgamma(i + 1.0) for i in range(n_max + 1)])
  rates = np.zeros(n_max + 1)
  for m in range(n_max):
    j = np.arange(m + 1)
    pmf = np.exp(log_factorial[m] - log_factorial[j] - log_factorial[m - j]
                 + j * math.log(rho) + (m - j) * math.log1p(-rho))
    cdf = np.concatenate([[0.0], np.cumsum(pmf)])                 # cdf[i] = P(c_b < i)
    k = np.arange(max(1, (m + 3) // 2), n_max - m + 1)           # m ≤ 2k - 2, n ≤ n_max
    if not len(k):
      continue
    low = np.maximum(m - k + 1, 0)
    high = np.minimum(k - 1, m)
    inside = cdf[high + 1] - cdf[low]
    log_letter = (log_factorial[m + k] - log_factorial[k] - log_factorial[m]
                  + k * math.log(s) + m * math.log1p(-s))
    rates[m + k] += np.exp(log_letter) * inside
  return rates[1:]


def _length_or_default(kind: str, length) -> LengthLaw:
  if length is None:
    return DEFAULT_UNBALANCED_LENGTH
  return check_law(length, f"the {kind} language")


def majority(*, pi=None, length=None) -> CountingLanguage:
  """Majority over {0, 1} (docs/theory.md §1d): y = +1 iff the string has more 1s than 0s;
  a tie is negative.

  Source: FLaRe (Butoi et al. 2025), rycolab/neural-network-recognizers,
  src/recognizers/hand_picked_languages/majority.py: positive iff n_1s > n_0s. q(c, a, b) =
  1{c_1 > c_0}. Under uniform π, P(y = +1) = ½ - P(tie)/2 < ½ for every length law (no
  geometric law balances it; ½ only at n = 1); 0.428102 at Geometric(0.1).

  Args:
    pi: token law π (2,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The CountingLanguage "majority".

  Example:
    >>> lang = lj.data.counting.majority()
    >>> lang.describe(), lang.length, round(lang.positive_rate(), 6)
    ('majority(d=2)', Geometric(p=0.1), 0.428102)
    >>> tokens = jnp.array([[1, 1, 0, 0], [1, 0, 1, 0]])   # 110 and the tie 1010
    >>> mask = jnp.array([[True, True, True, False], [True, True, True, True]])
    >>> lang.label_tokens(tokens, mask).tolist()
    [1.0, -1.0]
  """
  pi = protocol.check_pi(2, pi)
  return CountingLanguage("majority", 2, 1, pi, _length_or_default("majority", length))


def plurality(letter: int = 0, d: int = 3, *, pi=None, length=None) -> CountingLanguage:
  """Plurality over {0, …, d-1}, d ∈ {2, 3} (docs/theory.md §1d): y = +1 iff #letter is
  larger than every other token's count; a tie for the most is negative, as in majority.

  plurality(1, 2) labels like majority(); over three letters q(c, a, b) =
  1{c_letter > max_{x ≠ letter} c_x}. The two other letters share one token role (the label
  is symmetric in them) but not one count block.

  Args:
    letter: the letter that must win, in {0, …, d-1}.
    d: alphabet size, 2 or 3.
    pi: token law π (d,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The CountingLanguage "plurality".

  Example:
    >>> lang = lj.data.counting.plurality(0, 3)
    >>> lang.describe(), lang.token_roles().tolist()
    ('plurality(d=3, letter=0)', [1, 0, 0])
    >>> # n = 1: 1/3; n = 2: only 00, 1/9; n = 3: 000 and the 6 orders of 001, 002: 7/27
    >>> np.round(lang.length_rates(3) * [3, 9, 27], 12).tolist()
    [1.0, 1.0, 7.0]
  """
  d = protocol.check_alphabet(d)
  if d > MAX_PLURALITY_D:
    raise ValueError(f"plurality d must be 2 or 3; got {d}.")
  if not (validation.is_int(letter) and 0 <= letter < d):
    raise ValueError(f"plurality letter must be an integer in {{0, …, {d - 1}}}; got "
                     f"{letter!r}.")
  pi = protocol.check_pi(d, pi)
  return CountingLanguage("plurality", d, int(letter), pi, _length_or_default("plurality", length))


def dyck1(*, pi=None, length=None) -> CountingLanguage:
  """Dyck-1 (docs/theory.md §1d): 0 = "(", 1 = ")"; y = +1 iff w is balanced (every prefix
  has at least as many "(" as ")", and w as many of each), at any depth.

  Source: Bhattamishra, Ahuja & Goyal (2020), satwik77/Transformer-Formal-Languages,
  src/utils/dyck_generator.py (S → (S) | SS | ε with the pair "()"); lengths start at 1, so
  the empty member never occurs. The bounded-depth regular language is
  lj.data.regular_builtins.dyck(depth). q(c, a, b) = 2(2m-1)/(m(m+1)) = Catalan(m)/
  C(2m-2, m-1) for c = (m, m), a = "(", b = ")", else 0. Under Geometric(p), with
  z = (1-p)² π_0 π_1, P(y = +1) = p/(1-p) · ((1 - √(1 - 4z))/(2z) - 1): 0.0437 at
  p = 0.1 under uniform π, and no p balances it (P(y = +1) < ¼ always): use the
  class-weighted risk, lj.risk_fn(lang, class_weights="balanced"), the default_class_weights.

  Args:
    pi: token law π (2,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The CountingLanguage "dyck1".

  Example:
    >>> lang = lj.data.counting.dyck1()
    >>> z = 0.81 / 4                     # (1-p)² π_0 π_1 at p = 0.1
    >>> round(lang.positive_rate(), 12) == round(0.1 / 0.9 * ((1 - (1 - 4 * z) ** 0.5)
    ...                                                         / (2 * z) - 1), 12)
    True
    >>> tokens = jnp.array([[0, 1, 0, 1], [0, 1, 1, 0], [0, 0, 1, 1]])   # ()(), ())(, (())
    >>> lang.label_tokens(tokens, jnp.ones((3, 4), bool)).tolist()
    [1.0, -1.0, 1.0]
  """
  pi = protocol.check_pi(2, pi)
  return CountingLanguage("dyck1", 2, 0, pi, _length_or_default("dyck1", length))


def anbn(*, pi=None, length=None) -> CountingLanguage:
  """aⁿbⁿ (docs/theory.md §1d): y = +1 iff w = 0^m 1^m with m ≥ 1.

  Source: the counter language a^n b^n, n ≥ 1, of Bhattamishra, Ahuja & Goyal (2020),
  satwik77/Transformer-Formal-Languages, src/utils/data_generator.py (CounterLanguage with
  two letters). q(c, a, b) = 1/C(2m-2, m-1) for c = (m, m), a = 0, b = 1 (1 at m = 1: "01"),
  else 0. Under Geometric(p), with z = (1-p)² π_0 π_1, P(y = +1) = p/(1-p) · z/(1-z):
  0.0282 at p = 0.1 under uniform π; no p balances it: use the class-weighted risk,
  lj.risk_fn(lang, class_weights="balanced"), the default_class_weights.

  Args:
    pi: token law π (2,), uniform when None.
    length: the length law, Geometric(0.1) when None.

  Returns:
    The CountingLanguage "anbn".

  Example:
    >>> lang = lj.data.counting.anbn()
    >>> z = 0.81 / 4
    >>> round(lang.positive_rate(), 12) == round(0.1 / 0.9 * z / (1 - z), 12)
    True
    >>> # m = 1, 2, 3 with 0 first and 1 last: 1/C(0,0), 1/C(2,1), 1/C(4,2)
    >>> lang.label_probability(np.array([[1, 1], [2, 2], [3, 3]]), np.zeros(3, int),
    ...                        np.ones(3, int)).tolist()
    [1.0, 0.5, 0.16666666666666666]
  """
  pi = protocol.check_pi(2, pi)
  return CountingLanguage("anbn", 2, 0, pi, _length_or_default("anbn", length))


registry.register("majority", majority)
registry.register("plurality", plurality)
registry.register("dyck1", dyck1)
registry.register("anbn", anbn)

__all__ = ["KINDS", "CountingLanguage", "anbn", "dyck1", "majority", "plurality"]
