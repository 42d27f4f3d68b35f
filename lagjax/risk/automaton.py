"""A language's automaton on token groups as arrays, and its blocks (docs/theory.md §1c, §3d).

The transfer route (§3d) and the automaton error route read a regular language through its
DFA: the letter matrices Σ_{x∈g} π_x P_x of each token group, the accepting states and the
start state, as arrays (traceable, so the atlas can stack languages), and the connected
components of its transitions after the first token (`inside_blocks`), which make the
transfer route's resolvent block diagonal.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.data import languages, regular
from lagjax.data import partition as partition_lib


def group_letter_matrices(lang: languages.Language, partition: partition_lib.Partition):
  """Σ_{x∈g} π_x P_x for every token group g (G, Q, Q), with P_x[q, r] = 1{δ(q, x) = r}.

  Tied parameters enter the transfer matrix through these (docs/theory.md §3d).

  Args:
    lang: a language with AutomatonLabels.
    partition: the token groups.

  Returns:
    The matrices, a NumPy array (G, Q, Q).

  Example:
    Each P_x has one 1 per row, so the rows of Σ_g Σ_{x∈g} π_x P_x sum to Σ_x π_x = 1:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> letters = lj.risk.automaton.group_letter_matrices(pairs, lj.partition.of_language(pairs))
    >>> letters.shape, letters.sum(0).sum(1).tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 1.0, 1.0])
  """
  table, _, _ = lang.automaton()
  return np.stack([regular.transfer_matrix(table, np.where(partition.index == g, lang.pi_array,
                                                            0.0))
                   for g in range(partition.num_groups)])


class Automaton(NamedTuple):
  """A DFA on token groups as arrays (traceable, so languages can be vmapped): letters
  (G, Q, Q) = Σ_{x∈g} π_x P_x, accepting (Q,) 0/1, start (Q,) one-hot (§1c, §3d).

  Attributes:
    letters (jax.Array): Σ_{x∈g} π_x P_x per token group (G, Q, Q).
    accepting (jax.Array): 1.0 at accepting states (Q,).
    start (jax.Array): the start state, one-hot (Q,).

  Example:
    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.automaton.automaton_arrays(pairs)
    >>> automaton.letters.shape, automaton.accepting.tolist(), automaton.start.tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0])
  """

  letters: jax.Array
  accepting: jax.Array
  start: jax.Array


def automaton_arrays(lang: languages.Language,
                     partition: partition_lib.Partition | None = None) -> Automaton:
  """The automaton of `lang` on token groups `partition` as arrays (docs/theory.md §3d).

  Args:
    lang: a language with AutomatonLabels.
    partition: the token groups; None means one group per token.

  Returns:
    An Automaton.

  Example:
    Even pairs accepts the empty prefix and the states where the first symbol equals the
    last:

    >>> pairs = lj.data.regular_builtins.even_pairs()
    >>> automaton = lj.risk.automaton.automaton_arrays(pairs, lj.partition.of_language(pairs))
    >>> automaton.letters.shape, automaton.accepting.tolist()
    ((2, 5, 5), [1.0, 1.0, 1.0, 0.0, 0.0])
  """
  partition = partition or partition_lib.singletons(lang.d)
  _, accepting, start = lang.automaton()
  letters = group_letter_matrices(lang, partition)
  return Automaton(jnp.asarray(letters), jnp.asarray(accepting, jnp.float64),
                   jnp.eye(letters.shape[-1])[start])


def inside_blocks(automaton: Automaton) -> np.ndarray:
  """The states the automaton can be in after its first token, as the connected components
  of its transitions there, padded to one size K with the index Q (docs/theory.md §3d).

  The middle of a string never leaves a component, so the transfer route's resolvent is
  block diagonal: m blocks of K states instead of Q. A traced automaton (the atlas stacks
  languages) gives one block of all Q states.

  Args:
    automaton: an Automaton.

  Returns:
    Indices into the Q states (Q marks padding), an int array (m, K).

  Example:
    Even pairs: after the first symbol only the last one moves, so the four states after
    it form two blocks of two:

    >>> lj.risk.automaton.inside_blocks(lj.risk.automaton.automaton_arrays(
    ...     lj.data.regular_builtins.even_pairs())).tolist()
    [[1, 3], [2, 4]]
  """
  if isinstance(automaton.letters, jax.core.Tracer):
    return np.arange(automaton.letters.shape[-1])[None]

  def closure(relation):  # the transitive closure of a boolean relation (Q, Q)
    while not np.array_equal(grown := relation | (relation @ relation), relation):
      relation = grown
    return relation

  step = np.asarray(automaton.letters).sum(0) > 0                      # q -> r by a token
  num_states = step.shape[0]
  inside = closure(step)[np.asarray(automaton.start).argmax()]         # after >= 1 token
  linked = closure((step | step.T | np.eye(num_states, dtype=bool)) & inside & inside[:, None])
  blocks = [list(block) for block in dict.fromkeys(  # each component once, in state order
      tuple(np.flatnonzero(row).tolist()) for row in linked[inside])]
  size = max(len(block) for block in blocks)
  return np.array([block + [num_states] * (size - len(block)) for block in blocks])


__all__ = ["Automaton", "automaton_arrays", "group_letter_matrices", "inside_blocks"]
