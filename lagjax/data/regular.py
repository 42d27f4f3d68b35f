"""Regular languages: labels decided by a finite automaton (docs/theory.md section 1c).

regular(transitions, accepting) gives y = +1 iff the DFA accepts w. The automaton is
completed with a sink state, its unreachable states are dropped and it is
minimised (Moore's partition refinement), so two tables for one language give
one automaton up to state names. Its letter matrices P_x (P_x[q, r] = 1 iff
transitions[q, x] = r) and the token law give the transfer matrix
T = Σ_x π_x P_x of one position, so P(y = +1) = Σ_n P(n) e_start·Tⁿ·1_acc
exactly (lengths.*.matrix_pgf), and the transfer route of docs/theory.md §3d
computes the risk.

Tokens whose columns of the table are equal and whose π are equal are
interchangeable (one role): for the occurrence automaton every letter but a
shares one role.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.data import protocol
from lagjax.data.lengths import Geometric, LengthLaw, check_law
from lagjax.linalg.resolvent import left_solve

DEFAULT_UNBALANCED_LENGTH = Geometric(0.1)   # mean length 10
BALANCE_SEARCH = np.geomspace(1e-6, 1.0 - 1e-9, 400)      # geometric p tried for balance


@dataclasses.dataclass(frozen=True)
class RegularLanguage(protocol.Language, protocol.AutomatonLabels):
  """A regular language: a minimal complete DFA, a token law π and a length law
  (docs/theory.md §1c); a Language that declares AutomatonLabels. Build it with `regular`.

  Attributes:
    name: how messages name it, e.g. "even_pairs".
    d: alphabet size.
    table: transitions as a tuple of Q rows of d states.
    accept: the accepting states as a tuple of Q booleans.
    start_state: the start state (0 after minimisation).
    pi: token law π, a tuple of d probabilities.
    length: the length law L.

  Example:
    >>> lang = lj.regular([[0, 1], [1, 0]], [1], balance=False, name="odd_ones")   # #1 odd
    >>> lang.describe(), lang.length, round(lang.positive_rate(), 6)
    ('odd_ones(d=2, states=2)', Geometric(p=0.1), 0.5)
    >>> # δ runs over the real tokens only: the masked 1 of the second string is not read.
    >>> tokens = jnp.array([[1, 0, 0], [1, 1, 1]])
    >>> mask = jnp.array([[True, True, True], [True, True, False]])
    >>> lang.label_tokens(tokens, mask).tolist()
    [1.0, -1.0]
  """

  name: str
  d: int
  table: tuple[tuple[int, ...], ...]
  accept: tuple[bool, ...]
  start_state: int
  pi: tuple[float, ...]
  length: LengthLaw

  @property
  def num_states(self) -> int:
    return len(self.table)

  def automaton(self) -> tuple[np.ndarray, np.ndarray, int]:
    return (np.asarray(self.table, np.int64), np.asarray(self.accept, bool), self.start_state)

  def describe(self) -> str:
    return f"{self.name}(d={self.d}, states={self.num_states})"

  def token_roles(self) -> np.ndarray:
    roles: dict = {}
    keys = [(tuple(row[x] for row in self.table), self.pi[x]) for x in range(self.d)]
    return np.array([roles.setdefault(key, len(roles)) for key in keys])

  def positive_rate(self) -> float:
    return acceptance_probability(self.automaton(), self.pi_array, self.length)

  def label_tokens(self, tokens, mask):
    return read_labels(jnp.asarray(self.table), jnp.asarray(self.accept), self.start_state,
                       jnp.asarray(tokens), jnp.asarray(mask, bool))


@jax.jit
def read_labels(table, accepting, start, tokens, mask):
  """y = +1 where the DFA accepts the real tokens of each padded string, else -1 (§1c).

  The automaton is an argument, not a constant: one compilation per shape serves every
  DFA of that size (the sampled route pads tables to a few sizes).

  Args:
    table: transitions (Q, d), int.
    accepting: (Q,) bool.
    start: the start state, an int.
    tokens: token ids (..., n), int.
    mask: True at real positions (..., n); δ skips the others.

  Returns:
    y (...,), ±1.0.

  Example:
    Parity (y = +1 iff the number of 1s is odd); the masked 1 is not read:

    >>> table, accepting = jnp.array([[0, 1], [1, 0]]), jnp.array([False, True])
    >>> tokens = jnp.array([[1, 0, 0], [1, 1, 1]])
    >>> mask = jnp.array([[True, True, True], [True, True, False]])
    >>> lj.data.regular.read_labels(table, accepting, 0, tokens, mask).tolist()
    [1.0, -1.0]
  """

  def read(state, position):
    token, real = position
    return jnp.where(real, table[state, token], state), None

  first = jnp.full(tokens.shape[:-1], start, table.dtype)
  final, _ = jax.lax.scan(read, first, (jnp.moveaxis(tokens, -1, 0),
                                        jnp.moveaxis(mask, -1, 0)))
  return jnp.where(accepting[final], 1.0, -1.0)


def transfer_matrix(table: np.ndarray, weights) -> np.ndarray:
  """Σ_x weights[x] P_x (Q, Q) with P_x[q, r] = 1{table[q, x] = r}: with weights π, the
  move of the state distribution by one position (T of docs/theory.md §1c).

  Args:
    table: transitions (Q, d), int, complete.
    weights: one weight per letter (d,); π gives T.

  Returns:
    The (Q, Q) float matrix.

  Example:
    >>> table = np.array([[0, 1], [1, 0]])   # parity: letter 1 flips the state
    >>> lj.data.regular.transfer_matrix(table, [0.25, 0.75]).tolist()
    [[0.25, 0.75], [0.75, 0.25]]
  """
  num_states = table.shape[0]
  matrix = np.zeros((num_states, num_states))
  for x, weight in enumerate(weights):
    np.add.at(matrix, (np.arange(num_states), table[:, x]), weight)
  return matrix


def acceptance(automaton, pi):
  """law -> P(w accepted) = Σ_n P(n) e_start·Tⁿ·1_acc with T = transfer_matrix(table, π)
  (exact; jittable in the law, which is a pytree; docs/theory.md §1c).

  Args:
    automaton: (transitions (Q, d), accepting (Q,) bool, start), complete.
    pi: token law π (d,).

  Returns:
    A function of a length law that returns P(w accepted), a JAX scalar.

  Example:
    >>> parity = (np.array([[0, 1], [1, 0]]), np.array([False, True]), 0)   # #1 odd
    >>> rate = lj.data.regular.acceptance(parity, np.array([0.25, 0.75]))
    >>> # (1 - G(1 - 2π_1))/2 with G(-1/2) = -0.2 under Geometric(0.5)
    >>> round(float(rate(lj.geometric(0.5))), 6)
    0.6
  """
  inputs = _pgf_inputs(automaton, pi)

  def rate(law):
    if jax.tree_util.tree_leaves(law) == [law]:   # a user's law that is not a pytree
      return law.matrix_pgf(*inputs)
    return _accepted_mass(*inputs, law)

  return rate


def _pgf_inputs(automaton, pi):
  """(e_start, T, 1_acc) of Σ_n P(n) e_start·Tⁿ·1_acc."""
  table, accepting, start = automaton
  return np.eye(table.shape[0])[start], transfer_matrix(table, pi), np.asarray(accepting, float)


def _mass(start_row, transfer, accepted, law):
  return law.matrix_pgf(start_row, transfer, accepted)


# One compilation per number of states and kind of law (laws are pytrees), shared by every
# automaton and every law of that kind; op by op, each new automaton size recompiled every
# operation. The batched form takes a law whose leaves carry a leading axis.
_accepted_mass = jax.jit(_mass)


@jax.jit
def _geometric_masses(start_row, transfer, accepted, stop_probabilities):
  """P(w accepted) under Geometric(p) at every p of a (N,) array: p (e_start T)(I - qT)⁻¹ 1_acc,
  q = 1 - p, with the N resolvents solved along a trailing batch axis by plain-array Gauss-Jordan
  (linalg.resolvent.left_solve): I - qT is strictly row-diagonally dominant (margin p, T is
  stochastic), and a vmap of Geometric.matrix_pgf would batch LAPACK's LU, which can deadlock
  XLA's CPU thread pool (docs/decisions/no-batched-lapack.md). Equal to that vmap within
  4 Q ε / p (tests/data/test_regular.py)."""
  q = 1.0 - stop_probabilities
  system = jnp.eye(transfer.shape[0])[..., None] - q * transfer[..., None]    # (Q, Q, N)
  rows = jnp.broadcast_to((start_row @ transfer)[:, None], (transfer.shape[0], q.shape[0]))
  return stop_probabilities * (accepted @ left_solve(rows, system))


def acceptance_probability(automaton, pi, law: LengthLaw) -> float:
  """P(w accepted) under `law` (see acceptance; docs/theory.md §1c).

  Args:
    automaton: (transitions (Q, d), accepting (Q,) bool, start), complete.
    pi: token law π (d,).
    law: the length law.

  Returns:
    P(w accepted), a Python float.

  Example:
    >>> parity = (np.array([[0, 1], [1, 0]]), np.array([False, True]), 0)   # #1 odd
    >>> p = lj.data.regular.acceptance_probability(parity, np.array([0.5, 0.5]), lj.geometric(0.5))
    >>> round(p, 6)   # ½ at every length under uniform π
    0.5
  """
  return float(acceptance(automaton, pi)(law))


def _check_table(transitions) -> np.ndarray:
  table = np.asarray(transitions)
  if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 2:
    raise ValueError(f"transitions must be an integer table of shape (Q, d) with Q >= 1 states "
                     f"and d >= 2 letters; got shape {table.shape}.")
  if table.dtype.kind not in "iu":
    if (table.dtype.kind != "f" or not np.all(np.isfinite(table))
        or np.any(table != np.round(table))):
      raise ValueError(f"transitions must hold integers (a state, or -1 for a missing "
                       f"transition); got dtype {table.dtype}.")
  table = table.astype(np.int64)
  num_states = table.shape[0]
  bad = np.argwhere((table < -1) | (table >= num_states))
  if bad.size:
    q, x = bad[0]
    raise ValueError(f"transitions[{q}, {x}] = {table[q, x]} is out of range: a state in "
                     f"{{0, …, {num_states - 1}}}, or -1 for a missing transition.")
  return table


def _check_accepting(accepting, num_states: int) -> np.ndarray:
  states = [validation.check_int("accepting state", q, 0) for q in np.ravel(accepting).tolist()]
  bad = [q for q in states if q >= num_states]
  if bad:
    raise ValueError(f"accepting states must lie in {{0, …, {num_states - 1}}}; got {bad}.")
  if not states:
    raise ValueError("accepting must name at least one state.")
  mask = np.zeros(num_states, bool)
  mask[states] = True
  return mask


def complete(table: np.ndarray, accepting: np.ndarray):
  """Adds a rejecting sink state for the -1 entries (missing transitions), if any
  (docs/theory.md §1c, step 1).

  Args:
    table: transitions (Q, d), int, -1 for a missing transition.
    accepting: (Q,) bool.

  Returns:
    (table, accepting): with a sink, state Q, that loops on every letter and rejects, when
    some entry is -1; else the inputs.

  Example:
    >>> table = np.array([[-1, 0]])   # 1*: reading a 0 leaves the language for good
    >>> table, accepting = lj.data.regular.complete(table, np.array([True]))
    >>> table.tolist(), accepting.tolist()
    ([[1, 0], [1, 1]], [True, False])
  """
  if not np.any(table < 0):
    return table, accepting
  sink = table.shape[0]
  table = np.where(table < 0, sink, table)
  table = np.vstack([table, np.full((1, table.shape[1]), sink)])
  return table, np.append(accepting, False)


def reachable(table: np.ndarray, accepting: np.ndarray, start: int):
  """The automaton restricted to the states reachable from start, start renamed 0
  (docs/theory.md §1c, step 2): the rest are numbered breadth-first, letters in order.

  Args:
    table: transitions (Q, d), int, complete.
    accepting: (Q,) bool.
    start: the start state.

  Returns:
    (table, accepting, 0) of the reachable states.

  Example:
    >>> table = np.array([[0, 2], [1, 1], [2, 0]])   # state 1 is never reached from 0
    >>> accepting = np.array([False, True, True])
    >>> table, accepting, start = lj.data.regular.reachable(table, accepting, 0)
    >>> table.tolist(), accepting.tolist(), start
    ([[0, 1], [1, 0]], [False, True], 0)
  """
  order, seen = [start], {start}
  for q in order:
    for r in table[q]:
      if int(r) not in seen:
        seen.add(int(r))
        order.append(int(r))
  rename = {q: i for i, q in enumerate(order)}
  new = np.array([[rename[int(r)] for r in table[q]] for q in order], np.int64)
  return new, accepting[order], 0


def minimize(table: np.ndarray, accepting: np.ndarray, start: int):
  """Moore's partition refinement: states are merged until no letter tells them apart.

  Returns the minimal complete automaton (table, accepting, start) with states
  numbered in breadth-first order from start (docs/theory.md §1c, step 3).

  Args:
    table: transitions (Q, d), int, complete.
    accepting: (Q,) bool.
    start: the start state.

  Returns:
    (table, accepting, start) of the minimal complete DFA, start = 0.

  Example:
    >>> # Parity with 4 states: 0 and 2 have read an even number of 1s, 1 and 3 an odd one.
    >>> table = np.array([[2, 1], [3, 0], [0, 3], [1, 2]])
    >>> accepting = np.array([False, True, False, True])
    >>> table, accepting, start = lj.data.regular.minimize(table, accepting, 0)
    >>> table.tolist(), accepting.tolist(), start
    ([[0, 1], [1, 0]], [False, True], 0)
  """
  # Blocks numbered 0, …, k-1 (all-accepting states must give one block 0, not block 1).
  block = np.unique(accepting, return_inverse=True)[1].reshape(-1)
  while True:
    signature = np.concatenate([block[:, None], block[table]], axis=1)
    _, refined = np.unique(signature, axis=0, return_inverse=True)
    refined = refined.reshape(-1)
    if len(np.unique(refined)) == len(np.unique(block)):
      break
    block = refined
  num_blocks = int(block.max()) + 1
  representative = np.array([np.flatnonzero(block == b)[0] for b in range(num_blocks)])
  merged = block[table[representative]]
  return reachable(merged, accepting[representative], int(block[start]))


def is_star_free(lang) -> bool:
  """Whether the language is star-free (first-order definable): by Schützenberger's theorem,
  iff the transition monoid of its minimal DFA is aperiodic, i.e. every element f has
  f^k = f^(k+1) for some k. The monoid is generated by the letters' maps (breadth-first)."""
  table, accepting, start = lang.automaton()
  table, accepting, start = minimize(table, accepting, start)
  letters = [tuple(int(r) for r in table[:, x]) for x in range(table.shape[1])]
  identity = tuple(range(table.shape[0]))
  monoid, frontier = {identity}, [identity]
  while frontier:
    element = frontier.pop()
    for letter in letters:
      product = tuple(letter[q] for q in element)     # read element, then letter
      if product not in monoid:
        monoid.add(product)
        frontier.append(product)
  for element in monoid:
    seen, power = [], element
    while power not in seen:
      seen.append(power)
      power = tuple(element[q] for q in power)
    if seen.index(power) != len(seen) - 1:          # the powers cycle with period > 1
      return False
  return True


def _one_class(rate: float) -> bool:
  return not 1e-15 < rate < 1.0 - 1e-15


def _one_class_everywhere(automaton, pi) -> bool:
  """Whether every string of length n ≥ 1 over the letters of positive π has one label, so
  that no length law gives two classes: the states reached after one or more such letters
  are all accepting or all rejecting (a reachability check, exact at any length)."""
  table, accepting, start = automaton
  letters = np.flatnonzero(np.asarray(pi) > 0)
  reached = np.zeros(table.shape[0], bool)
  frontier = set(table[start, letters].tolist())
  while frontier:
    state = frontier.pop()
    if not reached[state]:
      reached[state] = True
      frontier.update(table[state, letters].tolist())
  labels = np.asarray(accepting, bool)[reached]
  return bool(labels.all() or not labels.any())


# Where the advice leads to a language with two unequal classes: the class-weighted risk.
# Never offered for a one-class language: no weight turns one class into two.
CLASS_WEIGHTS_ADVICE = ('then lj.risk_fn(lang, class_weights="balanced") weights its two '
                        'classes equally (the transfer route\'s class-balanced risk, '
                        'docs/theory.md §3d)')


def _one_class_advice(automaton, pi, name: str) -> str:
  """What to do about a language with one class under the given length law: another length
  law when one exists (and the class-weighted risk for the unequal classes it gives), else a
  statement that there is no classification risk to learn."""
  if _one_class_everywhere(automaton, pi):
    return (f"{name} is one class under every length law (a classification risk needs both "
            "labels), so change the automaton's accepting states or π.")
  rate = acceptance_probability(automaton, np.asarray(pi), DEFAULT_UNBALANCED_LENGTH)
  if _one_class(rate):  # both labels occur, but only at lengths the default law barely reaches
    return "pass a length law that puts more mass on the lengths where both labels occur."
  return (f"pass another length law, e.g. length={DEFAULT_UNBALANCED_LENGTH} (the default of "
          f"balance=False), which gives P(y = +1) = {rate:.4g}; {CLASS_WEIGHTS_ADVICE}.")


def _unbalanced_advice(automaton, pi, name: str) -> str:
  """What to do when no geometric law balances the language. balance=False is advised only
  when it works, i.e. when its default law gives two classes; the unequal classes it gives
  can then be weighted equally by the class-balanced risk (CLASS_WEIGHTS_ADVICE), which is
  offered only then."""
  rate = acceptance_probability(automaton, np.asarray(pi), DEFAULT_UNBALANCED_LENGTH)
  if _one_class_everywhere(automaton, pi) or _one_class(rate):
    return _one_class_advice(automaton, pi, name)
  return (f"Pass balance=False (the default length {DEFAULT_UNBALANCED_LENGTH} gives "
          f"P(y = +1) = {rate:.4g}, unbalanced) or a length law of your own; "
          f"{CLASS_WEIGHTS_ADVICE}.")


def balanced_geometric(automaton, pi, name: str = "the language") -> Geometric:
  """The geometric law with P(y = +1) = ½: the default Geometric(0.1) if it already balances
  (to 1e-12), else the p found by a sign change on BALANCE_SEARCH and bisection (the last
  sign change: the largest p, the shortest mean length; docs/theory.md §1c).

  Args:
    automaton: (transitions (Q, d), accepting (Q,) bool, start), complete.
    pi: token law π (d,).
    name: how the error names the language.

  Returns:
    Geometric(p) with P(y = +1) = ½.

  Raises:
    ValueError: when P(y = +1) - ½ keeps its sign on BALANCE_SEARCH (one line, with the
      range of P(y = +1)).

  Example:
    >>> # w contains 01: state 1 has read a 0, state 2 has read 01; p = √5 - 2
    >>> contains_01 = (np.array([[1, 0], [1, 2], [2, 2]]), np.array([False, False, True]), 0)
    >>> law = lj.data.regular.balanced_geometric(contains_01, np.array([0.5, 0.5]))
    >>> round(law.p, 6), round(5**0.5 - 2, 6)
    (0.236068, 0.236068)
  """
  inputs = _pgf_inputs(automaton, pi)

  def excess(p):
    return float(_accepted_mass(*inputs, Geometric(p))) - 0.5

  if abs(excess(DEFAULT_UNBALANCED_LENGTH.p)) <= 1e-12:
    return DEFAULT_UNBALANCED_LENGTH
  # Every p of the search in one call, the resolvents batched without LAPACK.
  values = np.asarray(_geometric_masses(*inputs, BALANCE_SEARCH)) - 0.5
  change = np.flatnonzero(np.sign(values[:-1]) != np.sign(values[1:]))
  if change.size == 0:
    found = (f"no geometric length law balances {name}: over p in [{BALANCE_SEARCH[0]:.0e}, 1) "
             f"P(y = +1) stays in [{values.min() + 0.5:.4g}, {values.max() + 0.5:.4g}]")
    raise ValueError(f"{found}. {_unbalanced_advice(automaton, pi, name)}")
  lo, hi = BALANCE_SEARCH[change[-1]], BALANCE_SEARCH[change[-1] + 1]
  low_sign = np.sign(values[change[-1]])
  for _ in range(100):
    mid = 0.5 * (lo + hi)
    if np.sign(excess(mid)) == low_sign:
      lo = mid
    else:
      hi = mid
    if hi - lo <= 1e-15 * hi:
      break
  return Geometric(0.5 * (lo + hi))


def regular(transitions, accepting, *, start: int = 0, pi=None, length=None,
            balance: bool = True, name: str = "regular") -> RegularLanguage:
  """The regular language of a DFA: y = +1 iff it accepts w (docs/theory.md §1c).

  The table is completed, restricted to its reachable states and minimised, so two tables
  of one language give one automaton.

  Args:
    transitions: integer table (Q, d); transitions[q, x] is the state after reading x in q,
      or -1 for a missing transition (the automaton is completed with a rejecting sink).
    accepting: the accepting states (a sequence of state indices).
    start: the start state.
    pi: token law π (d,), uniform by default.
    length: the length law; None gives the balanced geometric law when balance is True,
      else Geometric(0.1) (mean length 10).
    balance: solve for the geometric p with P(y = +1) = ½ when no length is given.
    name: how messages and tables name the language.

  Returns:
    The RegularLanguage of the minimal complete DFA.

  Raises:
    ValueError: in one line naming the field, for a malformed table, a start or an
      accepting state out of range, no accepting state, a π that is not a distribution,
      or P(y = +1) in {0, 1} under the length law.

  Example:
    >>> # Tomita 1, 1*: -1 marks a missing transition, completed with a sink (2 states).
    >>> lang = lj.regular([[-1, 0]], [0], balance=False, name="ones")
    >>> lang.describe(), lang.length
    ('ones(d=2, states=2)', Geometric(p=0.1))
    >>> # 2⁻ⁿ of the strings of length n are members: Σ_n P(n) 2⁻ⁿ = G(½) = p/(1+p) = 1/11
    >>> round(lang.positive_rate(), 6), round(1 / 11, 6)
    (0.090909, 0.090909)
  """
  table = _check_table(transitions)
  num_states, d = table.shape
  start = validation.check_int("start", start, 0)
  if start >= num_states:
    raise ValueError(f"start must be a state in {{0, …, {num_states - 1}}}; got {start}.")
  mask = _check_accepting(accepting, num_states)
  pi = protocol.check_pi(d, pi)
  table, mask = complete(table, mask)
  table, mask, start = minimize(*reachable(table, mask, start))
  automaton = (table, mask, start)
  if length is None:
    length = (balanced_geometric(automaton, np.asarray(pi), name) if balance
              else DEFAULT_UNBALANCED_LENGTH)
  length = check_law(length, "lj.languages.regular", ("required", "matrix_pgf"))
  rate = acceptance_probability(automaton, np.asarray(pi), length)
  if _one_class(rate):
    raise ValueError(f"{name} has P(y = +1) = {rate:.3g} under {length}: one class only, so "
                     f"there is nothing to learn; {_one_class_advice(automaton, pi, name)}")
  return RegularLanguage(name, d, tuple(tuple(int(r) for r in row) for row in table),
                         tuple(bool(a) for a in mask), start, pi, length)


__all__ = ["RegularLanguage", "acceptance", "acceptance_probability", "balanced_geometric",
           "complete", "minimize", "reachable", "read_labels", "regular", "transfer_matrix"]
