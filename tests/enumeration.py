"""Every string of one length of a regular language, for brute-force checks of exact routes."""

import itertools

import numpy as np


def labelled_strings(lang, n: int):
  """(strings (dⁿ, n), labels y = ±1 from walking the automaton's table, π-weights)."""
  table, accepting, start = lang.automaton()
  strings = np.array(list(itertools.product(range(lang.d), repeat=n)))
  state = np.full(len(strings), start)
  for position in range(n):
    state = table[state, strings[:, position]]
  return strings, np.where(accepting[state], 1.0, -1.0), np.prod(lang.pi_array[strings], axis=1)
