"""A branch that stays a branch under vmap (docs/theory.md §3b, §3g, Numerics).

vmap turns a `lax.cond` whose predicate differs across the batch into a select that computes
both branches for every member. lagjax's routes branch where a cheap form of f_θ holds only for
some scores (the count route's scaled masses, `forward_counts`' two clusters) and an exact form
holds for every score: `every(flag)` is the flag itself outside vmap, and under vmap one
unbatched bool, whether the flag holds for every member, so `lax.cond(every(flag), cheap,
exact)` runs one branch for the whole batch. Members under vmap then take the exact branch
where an unbatched call would take the cheap one only when the batch disagrees; both forms
compute f_θ, so their values differ by roundoff. Where no branch serves every member (the
records' sampled 0-1 error), `dynamics.runner.map_under_vmap` walks the batch one member at
a time instead.
"""

import jax
import jax.numpy as jnp
from jax import custom_batching


@custom_batching.custom_vmap
def _every(flag):
  return flag


@_every.def_vmap
def _every_member(axis_size, in_batched, flag):
  del axis_size
  return (jnp.all(flag, axis=0) if in_batched[0] else flag), False


def every(flag):
  """flag outside vmap; under vmap, whether it holds for every member, unbatched (the branch
  of forward_counts, §3b, and of the count route, §3g).

  Args:
    flag: a boolean scalar, e.g. a branch's predicate (it carries no gradient).

  Returns:
    A boolean scalar that a `lax.cond` under vmap keeps as a branch.

  Example:
    >>> flags = jnp.array([True, False, True])
    >>> jax.vmap(lj.batched.every)(flags).tolist()   # one value, broadcast to the batch
    [False, False, False]
    >>> bool(lj.batched.every(flags[0]))
    True
  """
  return _every(jax.lax.stop_gradient(flag))
