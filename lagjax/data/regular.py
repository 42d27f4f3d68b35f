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
from lagjax.data import languages
from lagjax.data import lengths as lengths_lib

DEFAULT_UNBALANCED_LENGTH = lengths_lib.Geometric(0.1)   # mean length 10
BALANCE_SEARCH = np.geomspace(1e-6, 1.0 - 1e-9, 400)      # geometric p tried for balance


@dataclasses.dataclass(frozen=True)
class RegularLanguage(languages.Language, languages.AutomatonLabels):
  """A regular language: a minimal complete DFA, a token law π and a length law.

  Attributes:
    name: how messages name it, e.g. "even_pairs".
    d: alphabet size.
    table: transitions as a tuple of Q rows of d states.
    accept: the accepting states as a tuple of Q booleans.
    start_state: the start state (0 after minimisation).
    pi: token law π, a tuple of d probabilities.
    length: the length law L.
  """

  name: str
  d: int
  table: tuple[tuple[int, ...], ...]
  accept: tuple[bool, ...]
  start_state: int
  pi: tuple[float, ...]
  length: lengths_lib.LengthLaw

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
    table = jnp.asarray(self.table)
    tokens = jnp.asarray(tokens)
    mask = jnp.asarray(mask, bool)

    def read(state, position):
      token, real = position
      return jnp.where(real, table[state, token], state), None

    start = jnp.full(tokens.shape[:-1], self.start_state, table.dtype)
    final, _ = jax.lax.scan(read, start, (jnp.moveaxis(tokens, -1, 0),
                                          jnp.moveaxis(mask, -1, 0)))
    return jnp.where(jnp.asarray(self.accept)[final], 1.0, -1.0)


def transfer_matrix(table: np.ndarray, weights) -> np.ndarray:
  """Σ_x weights[x] P_x (Q, Q) with P_x[q, r] = 1{table[q, x] = r}: with weights π, the
  move of the state distribution by one position (T of docs/theory.md §1c)."""
  num_states = table.shape[0]
  matrix = np.zeros((num_states, num_states))
  for x, weight in enumerate(weights):
    np.add.at(matrix, (np.arange(num_states), table[:, x]), weight)
  return matrix


def acceptance(automaton, pi):
  """law -> P(w accepted) = Σ_n P(n) e_start·Tⁿ·1_acc with T = transfer_matrix(table, π)
  (exact; jittable in the law, which is a pytree)."""
  table, accepting, start = automaton
  transfer = jnp.asarray(transfer_matrix(table, pi))
  start_row = jnp.eye(table.shape[0])[start]
  accepted = jnp.asarray(accepting, jnp.float64)
  return lambda law: law.matrix_pgf(start_row, transfer, accepted)


def acceptance_probability(automaton, pi, law: lengths_lib.LengthLaw) -> float:
  """P(w accepted) under `law` (see acceptance)."""
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
  """Adds a rejecting sink state for the -1 entries (missing transitions), if any."""
  if not np.any(table < 0):
    return table, accepting
  sink = table.shape[0]
  table = np.where(table < 0, sink, table)
  table = np.vstack([table, np.full((1, table.shape[1]), sink)])
  return table, np.append(accepting, False)


def reachable(table: np.ndarray, accepting: np.ndarray, start: int):
  """The automaton restricted to the states reachable from start, start renamed 0."""
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
  numbered in breadth-first order from start.
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


def balanced_geometric(automaton, pi, name: str = "the language") -> lengths_lib.Geometric:
  """The geometric law with P(y = +1) = ½: the default Geometric(0.1) if it already balances
  (to 1e-12), else the p found by a sign change on BALANCE_SEARCH and bisection."""
  rate = jax.jit(acceptance(automaton, pi))   # one compilation for the ~450 laws tried

  def excess(p):
    return float(rate(lengths_lib.Geometric(p))) - 0.5

  if abs(excess(DEFAULT_UNBALANCED_LENGTH.p)) <= 1e-12:
    return DEFAULT_UNBALANCED_LENGTH
  values = np.array([excess(p) for p in BALANCE_SEARCH])
  change = np.flatnonzero(np.sign(values[:-1]) != np.sign(values[1:]))
  if change.size == 0:
    raise ValueError(
        f"no geometric length law balances {name}: over p in [{BALANCE_SEARCH[0]:.0e}, 1) "
        f"P(y = +1) stays in [{values.min() + 0.5:.4g}, {values.max() + 0.5:.4g}]. Pass "
        f"balance=False (and a length), or weight the classes.")
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
  return lengths_lib.Geometric(0.5 * (lo + hi))


def regular(transitions, accepting, *, start: int = 0, pi=None, length=None,
            balance: bool = True, name: str = "regular") -> RegularLanguage:
  """The regular language of a DFA: y = +1 iff it accepts w.

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

  Raises:
    ValueError, in one line naming the field, for a malformed table, a start or an
    accepting state out of range, no accepting state, a π that is not a distribution,
    or P(y = +1) in {0, 1} under the length law.
  """
  table = _check_table(transitions)
  num_states, d = table.shape
  start = validation.check_int("start", start, 0)
  if start >= num_states:
    raise ValueError(f"start must be a state in {{0, …, {num_states - 1}}}; got {start}.")
  mask = _check_accepting(accepting, num_states)
  pi = languages.check_pi(d, pi)
  table, mask = complete(table, mask)
  table, mask, start = minimize(*reachable(table, mask, start))
  automaton = (table, mask, start)
  if length is None:
    length = (balanced_geometric(automaton, np.asarray(pi), name) if balance
              else DEFAULT_UNBALANCED_LENGTH)
  length = languages.check_length(length)
  rate = acceptance_probability(automaton, np.asarray(pi), length)
  if not 1e-15 < rate < 1.0 - 1e-15:
    raise ValueError(f"{name} has P(y = +1) = {rate:.3g} under {length}: one class only, "
                     f"so there is nothing to learn; change the automaton or the length law.")
  return RegularLanguage(name, d, tuple(tuple(int(r) for r in row) for row in table),
                         tuple(bool(a) for a in mask), start, pi, length)


__all__ = ["RegularLanguage", "acceptance", "acceptance_probability", "balanced_geometric",
           "complete", "minimize", "reachable", "regular", "transfer_matrix"]
