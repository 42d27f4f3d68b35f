"""What a traced program holds, for tests that check how a function is compiled."""

import jax
import jax.numpy as jnp


def cond_predicate_shapes(jaxpr) -> list:
  """The shapes of the predicates of every lax.cond in a jaxpr, nested ones included: () where
  the cond stays a branch under vmap (lagjax/batched.py); a cond whose predicate vmap batched
  is gone, a select in its place."""
  shapes = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "cond":
      shapes.append(eqn.invars[0].aval.shape)
    for value in eqn.params.values():
      for sub in value if isinstance(value, tuple) else (value,):
        if hasattr(sub, "jaxpr"):
          shapes += cond_predicate_shapes(getattr(sub.jaxpr, "jaxpr", sub.jaxpr))
  return shapes


def batched_and_alone(value_and_grad, batches):
  """For each batch (a list of params): (the vmapped (value, grads), [each member's alone]),
  after checking that every lax.cond of the vmapped program kept an unbatched predicate."""
  on_batch, on_one = jax.jit(jax.vmap(value_and_grad)), jax.jit(value_and_grad)
  for batch in batches:
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *batch)
    shapes = cond_predicate_shapes(jax.make_jaxpr(jax.vmap(value_and_grad))(stacked).jaxpr)
    assert shapes and all(shape == () for shape in shapes), shapes
    yield on_batch(stacked), [on_one(params) for params in batch]
