"""Every string of one length of a regular language, for brute-force checks of exact routes,
and a length law of the tests' own that lets one compiled DP serve several fixed lengths."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np


def padded_automaton(lang, num_states: int):
  """The automaton of `lang` as transfer-route arrays, padded with unreachable states to
  num_states (they add exact zeros), so one compilation serves every language of one
  alphabet size."""
  from lagjax.risk import automaton
  letters, accepting, start = automaton.automaton_arrays(lang)
  pad = num_states - letters.shape[-1]
  assert pad >= 0, (lang.describe(), num_states)
  return automaton.Automaton(jnp.pad(letters, ((0, 0), (0, pad), (0, pad))),
                             jnp.pad(accepting, (0, pad)), jnp.pad(start, (0, pad)))


def labelled_strings(lang, n: int):
  """(strings (dⁿ, n), labels y = ±1 from walking the automaton's table, π-weights)."""
  table, accepting, start = lang.automaton()
  strings = np.array(list(itertools.product(range(lang.d), repeat=n)))
  state = np.full(len(strings), start)
  for position in range(n):
    state = table[state, strings[:, position]]
  return strings, np.where(accepting[state], 1.0, -1.0), np.prod(lang.pi_array[strings], axis=1)


def padded_labelled_strings(lang, n: int, n_max: int):
  """labelled_strings(lang, n) padded to d^n_max rows of n_max tokens, with a mask: one array
  shape for every n <= n_max, so a jitted sum over them compiles once. Padding rows repeat
  the first string (so every row has a real token) with weight 0; padding columns are
  masked out."""
  strings, y, weight = labelled_strings(lang, n)
  rows = lang.d**n_max
  tokens = np.zeros((rows, n_max), np.int64)
  tokens[:len(strings), :n] = strings
  tokens[len(strings):, :n] = strings[0]
  mask = np.zeros((rows, n_max), bool)
  mask[:, :n] = True
  return (tokens, mask, np.concatenate([y, np.full(rows - len(y), y[0])]),
          np.concatenate([weight, np.zeros(rows - len(weight))]))


@jax.tree_util.register_pytree_node_class
class FixedOneOf:
  """Fixed(lengths[index]) with the index a leaf that may be traced, so that one compiled
  function serves every length of `lengths` (a length law of the tests' own; lagjax takes
  any object with these methods, docs/theory.md §1). tail is 0 from the longest length on,
  whatever the index: a bound that needs no concrete index (so truncation_length gives
  max(lengths) and a DP covers every length)."""

  def __init__(self, lengths, index):
    self.lengths = tuple(int(n) for n in lengths)
    self.index = index

  def tree_flatten(self):
    return (self.index,), self.lengths

  @classmethod
  def tree_unflatten(cls, lengths, children):
    return cls(lengths, *children)

  @classmethod
  def of(cls, lengths, n: int):
    """Fixed(n), n one of `lengths`."""
    return cls(lengths, np.int64(tuple(lengths).index(n)))

  @property
  def n0(self):
    return jnp.asarray(self.lengths)[self.index]

  @property
  def mean(self) -> float:
    return float(self.n0)

  def log_pmf(self, n):
    return jnp.where(jnp.asarray(n) == self.n0, 0.0, -jnp.inf)

  def sample(self, key, shape):
    del key
    return jnp.full(shape, self.n0)

  def tail(self, n_max):
    return float(max(self.lengths) > n_max)
