"""What a traced program holds, for tests that check how a function is compiled."""


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
