"""The parameters of the direct (α, β) model (docs/theory.md sections 2, 2b, 3b).

Parameters are a dict {"alpha": (d,), "beta": (d,)} with optional scalars "alpha_cls",
"beta_cls" for a CLS token present once in every string, and optionally

- position tables "alpha_first", "beta_first", "alpha_last", "beta_last" (d,), added to the
  score and value of the token at position 1 and at position n;
- the last-token query: "alpha" (d, d), alpha[c, x] the score of token x when the last
  token is c, and then "alpha_cls" (d,).

Which of these parts a dict has is its `Layout`. This module builds (`init_params`,
`zero_params`), reads (`layout`, `has_cls`, `has_positions`) and checks (`check_params`)
parameter dicts, and moves them between tokens and token groups (`group_params`,
`expand_params`, `per_token_gradients`; every axis of every table is a token axis). The
forward passes are in lagjax/models/direct.py. `PARAM_GROUPS` maps every parameter name to
its plan group, "attention" or "output".
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation

Params = dict

# Parameter groups (docs/theory.md §5): plans train "attention" and "output" separately.
PARAM_GROUPS = {"alpha": "attention", "alpha_cls": "attention", "alpha_first": "attention",
          "alpha_last": "attention", "beta": "output", "beta_cls": "output",
          "beta_first": "output", "beta_last": "output"}
QUERIES = ("cls", "last")
POSITIONS = ("none", "first_last")
POSITION_TABLES = ("alpha_first", "beta_first", "alpha_last", "beta_last")


class _LayoutFields(NamedTuple):
  cls: bool
  query: str
  positions: str


class Layout(_LayoutFields):
  """Which parts the parameters have: the CLS token, the query, the position tables
  (docs/theory.md §2, §2b).

  Attributes:
    cls: whether the CLS token's α_cls, β_cls are present.
    query: "cls" (α (d,)) or "last" (α (d, d), α[c, x] for last token c).
    positions: "none" or "first_last" (the tables α^F, β^F, α^L, β^L).

  Raises:
    ValueError: for a cls that is not a bool, or a query or positions not listed above.

  Example:
    >>> lj.models.direct_params.Layout().plain  # the paper's model
    True
    >>> lj.models.direct_params.Layout(cls=True, query="last").plain
    False
  """

  __slots__ = ()

  # Checked here: a NamedTuple has no __post_init__ and cannot override __new__, and Layout
  # stays a NamedTuple because callers spread it with _asdict().
  def __new__(layout_type, cls: bool = False, query: str = "cls", positions: str = "none"):
    return super().__new__(layout_type, validation.check_bool("cls", cls),
                           validation.check_choice("query", query, QUERIES),
                           validation.check_choice("positions", positions, POSITIONS))

  @property
  def plain(self) -> bool:
    """The paper's model: CLS query, no position tables (f depends on counts only)."""
    return self.query == "cls" and self.positions == "none"

  def contains(self, other: Layout) -> bool:
    """Whether every f of the Layout `other` is an f of this one (docs/theory.md §2b): the
    last query contains the CLS query (every row of α equal), the position tables contain
    their absence (tables 0), the CLS token its absence (α_cls = −∞ is not a parameter, so
    only a Layout with the CLS token contains one with it). `widen` carries θ across.

    Example:
      >>> last_tables = lj.models.direct_params.Layout(query="last", positions="first_last")
      >>> last_tables.contains(lj.models.direct_params.Layout(positions="first_last"))
      True
      >>> lj.models.direct_params.Layout().contains(last_tables)
      False
    """
    return (self.cls == other.cls and self.query in (other.query, "last")
            and other.positions in ("none", self.positions))


PLAIN = Layout()


def widen(params: Params, to: Layout) -> Params:
  """θ of a contained Layout as θ of `to` with the same f (docs/theory.md §2b): under the
  last query every row of α (and α_cls) is the CLS query's α (α_cls); absent position tables
  are 0.

  Args:
    params: a parameter dict of a Layout that `to` contains.
    to: the Layout of the result.

  Returns:
    The parameter dict of Layout `to`.

  Raises:
    ValueError: when `to` does not contain the Layout of `params`.

  Example:
    >>> wide = lj.models.direct_params.widen(
    ...     {"alpha": np.array([1.0, 2.0]), "beta": np.array([3.0, 4.0])},
    ...     lj.models.direct_params.Layout(query="last", positions="first_last"))
    >>> wide["alpha"].tolist(), wide["alpha_first"].tolist()
    ([[1.0, 2.0], [1.0, 2.0]], [0.0, 0.0])
  """
  source = layout(params)
  if not to.contains(source):
    raise ValueError(f"to must contain the layout of params, {source}; got {to}.")
  size = np.shape(params["beta"])[0]
  wide = dict(zero_params(size, to), **params)
  if to.query == "last" and source.query == "cls":
    wide["alpha"] = jnp.broadcast_to(params["alpha"], (size, size))
    if to.cls:
      wide["alpha_cls"] = jnp.broadcast_to(params["alpha_cls"], (size,))
  return wide


def layout(params: Params) -> Layout:
  """The Layout of a parameter dict (read from its keys and α's rank; docs/theory.md §2b).

  Args:
    params: a parameter dict of the direct model.

  Returns:
    Its Layout.

  Example:
    >>> lj.models.direct_params.layout(lj.init_params(3, query="last", positions="first_last"))
    Layout(cls=False, query='last', positions='first_last')
  """
  return Layout("alpha_cls" in params, "last" if jnp.ndim(params["alpha"]) == 2 else "cls",
                "first_last" if "alpha_first" in params else "none")


def init_params(d: int, cls: bool = False, query: str = "cls",
                positions: str = "none") -> Params:
  """Zero initialization θ0 = 0, the paper's setting (docs/theory.md §2, §2b).

  Args:
    d: alphabet size.
    cls: add the CLS token's score and value.
    query: "cls" (α (d,)) or "last" (α (d, d), α[c, x] for last token c).
    positions: "none" or "first_last" (the four position tables, (d,) each).

  Returns:
    The parameter dict, every entry 0: "alpha", "beta" and the parts asked for.

  Example:
    >>> params = lj.init_params(3, cls=True)
    >>> {name: value.shape for name, value in params.items()}
    {'alpha': (3,), 'beta': (3,), 'alpha_cls': (), 'beta_cls': ()}
    >>> lj.init_params(3, query="last")["alpha"].shape  # α[c, x]
    (3, 3)
  """
  validation.require_float64("lj.init_params")
  return zero_params(validation.check_int("d", d, 2, integral_floats=True),
                     Layout(bool(cls), query, positions))


def zero_params(size: int, layout_or_cls: Layout | bool = False) -> Params:
  """θ = 0 on `size` entries (tokens or token groups, docs/theory.md §3b) in the given Layout
  (or plain, with the CLS scalars when True).

  Unlike `init_params`, it checks nothing: the routes call it on G token groups.

  Args:
    size: the number of entries per token axis, d or G.
    layout_or_cls: a Layout, or a bool for the plain model with (True) or without the CLS
      scalars.

  Returns:
    The parameter dict, every entry 0.

  Example:
    >>> params = lj.models.direct_params.zero_params(2, True)  # two token groups and the CLS token
    >>> {name: value.shape for name, value in params.items()}
    {'alpha': (2,), 'beta': (2,), 'alpha_cls': (), 'beta_cls': ()}
    >>> last = lj.models.direct_params.Layout(cls=True, query="last")
    >>> lj.models.direct_params.zero_params(2, last)["alpha_cls"].shape  # α_cls[c]
    (2,)
  """
  parts = layout_or_cls if isinstance(layout_or_cls, Layout) else Layout(bool(layout_or_cls))
  last = parts.query == "last"
  params = {"alpha": jnp.zeros((size, size) if last else size), "beta": jnp.zeros(size)}
  if parts.cls:
    params.update(alpha_cls=jnp.zeros(size if last else ()), beta_cls=jnp.zeros(()))
  if parts.positions == "first_last":
    params.update({name: jnp.zeros(size) for name in POSITION_TABLES})
  return params


def has_cls(params: Params) -> bool:
  """Whether the parameters have the CLS token's α_cls, β_cls (docs/theory.md §2).

  Args:
    params: a parameter dict of the direct model.

  Returns:
    True when "alpha_cls" is a key.

  Example:
    >>> lj.models.direct_params.has_cls(lj.init_params(3, cls=True))
    True
  """
  return "alpha_cls" in params


def map_token_axes(fn, params: Params) -> Params:
  """fn applied along every token axis of every table (each axis of each table is one;
  docs/theory.md §2b).

  Args:
    fn: a map of the last axis, e.g. from d tokens to G token groups.
    params: a parameter dict of the direct model.

  Returns:
    The dict with fn applied along each axis of each entry in turn.

  Example:
    >>> params = {"alpha": jnp.arange(9.0).reshape(3, 3), "beta": jnp.arange(3.0)}
    >>> first_two = lj.models.direct_params.map_token_axes(lambda v: v[..., :2], params)
    >>> first_two["alpha"].tolist(), first_two["beta"].tolist()
    ([[0.0, 1.0], [3.0, 4.0]], [0.0, 1.0])
  """
  def along_axes(value):
    value = jnp.asarray(value)
    for axis in range(value.ndim):
      value = jnp.moveaxis(fn(jnp.moveaxis(value, axis, -1)), -1, axis)
    return value

  return {name: along_axes(value) for name, value in params.items()}


def group_params(partition, params: Params) -> Params:
  """Per-token params constant on the partition's blocks -> one entry per token group: the
  tied parameters of docs/theory.md §3b.

  Args:
    partition: a ``lagjax.data.partition.Partition`` of the d tokens into G groups.
    params: per-token parameters, constant on each block along every token axis.

  Returns:
    The grouped parameters, G entries per token axis.

  Example:
    >>> partition = lj.partition.of_language(lj.occurrence(3))  # blocks {0}, {1, 2}
    >>> params = {"alpha": jnp.array([1.0, -0.5, -0.5]), "beta": jnp.array([1.0, 0.0, 0.0])}
    >>> grouped = lj.models.direct_params.group_params(partition, params)
    >>> grouped["alpha"].tolist(), grouped["beta"].tolist()
    ([1.0, -0.5], [1.0, 0.0])
  """
  return map_token_axes(partition.group, params)


def expand_params(partition, params: Params) -> Params:
  """Grouped params -> per-token params (the inverse of group_params; docs/theory.md §3b).

  Args:
    partition: a ``lagjax.data.partition.Partition`` of the d tokens into G groups.
    params: grouped parameters, G entries per token axis.

  Returns:
    The per-token parameters, d entries per token axis, constant on each block.

  Example:
    >>> partition = lj.partition.of_language(lj.occurrence(3))  # blocks {0}, {1, 2}
    >>> grouped = {"alpha": jnp.array([1.0, -0.5]), "beta": jnp.array([1.0, 0.0])}
    >>> lj.models.direct_params.expand_params(partition, grouped)["alpha"].tolist()
    [1.0, -0.5, -0.5]
  """
  return map_token_axes(partition.expand, params)


def per_token_gradients(grads: Params, sizes) -> Params:
  """The gradient w.r.t. one token's entry from the gradient w.r.t. a tied entry: divided by
  the group size along every token axis (k_g, or k_c k_x for α under the last query;
  docs/theory.md §3b).

  Args:
    grads: gradients w.r.t. grouped parameters, G entries per token axis.
    sizes: the group sizes k_g, (G,).

  Returns:
    The per-token gradients, the same shapes as grads; the CLS scalars are unchanged.

  Example:
    >>> sizes = np.array([1.0, 2.0])
    >>> grads = {"alpha": jnp.array([2.0, 6.0]), "beta": jnp.array([1.0, 4.0])}
    >>> per_token = lj.models.direct_params.per_token_gradients(grads, sizes)
    >>> per_token["alpha"].tolist(), per_token["beta"].tolist()
    ([2.0, 3.0], [1.0, 2.0])
    >>> last = lj.models.direct_params.per_token_gradients({"alpha": jnp.ones((2, 2))}, sizes)
    >>> last["alpha"].tolist()  # 1/(k_c k_x)
    [[1.0, 0.5], [0.5, 0.25]]
  """
  def scaled(value):
    scale = 1.0
    for axis in range(value.ndim):
      scale = scale * jnp.reshape(sizes, (-1,) + (1,) * (value.ndim - 1 - axis))
    return value / scale

  return {name: scaled(value) for name, value in grads.items()}


def attention_vector(params: Params):
  """The attention tables (α, then α_first, α_last when present) as one vector: what the
  lag metrics of docs/theory.md §6 measure (the CLS score is left out, as in the plain
  model; §2b).

  Args:
    params: a parameter dict of the direct model.

  Returns:
    A flat vector: d entries, d² under the last query, plus 2d with position tables.

  Example:
    >>> params = dict(lj.init_params(2, cls=True, positions="first_last"),
    ...               alpha=jnp.array([1.0, 2.0]), alpha_last=jnp.array([3.0, 4.0]))
    >>> lj.models.direct_params.attention_vector(params).tolist()  # α, α^F, α^L
    [1.0, 2.0, 0.0, 0.0, 3.0, 4.0]
  """
  return _flat(params, ("alpha", "alpha_first", "alpha_last"))


def output_vector(params: Params):
  """The output tables (β, then β_first, β_last when present) as one vector: what the lag
  metrics of docs/theory.md §6 measure (β_cls is left out; §2b).

  Args:
    params: a parameter dict of the direct model.

  Returns:
    A flat vector: d entries, plus 2d with position tables.

  Example:
    >>> params = dict(lj.init_params(2, cls=True), beta=jnp.array([1.0, -1.0]),
    ...               beta_cls=jnp.array(5.0))
    >>> lj.models.direct_params.output_vector(params).tolist()
    [1.0, -1.0]
  """
  return _flat(params, ("beta", "beta_first", "beta_last"))


def _flat(params, names):
  return jnp.concatenate([jnp.reshape(params[n], (-1,)) for n in names if n in params])


def has_positions(params: Params) -> bool:
  """Whether the parameters have the position tables of docs/theory.md §2b.

  Args:
    params: a parameter dict of the direct model.

  Returns:
    True when "alpha_first" is a key (then all four tables are).

  Example:
    >>> lj.models.direct_params.has_positions(lj.init_params(3, positions="first_last"))
    True
  """
  return "alpha_first" in params


def stack(params: Params, name: str):
  """params[name] with the CLS entry (name + "_cls") last along the token axis when present:
  (G[+1],), or (G, G[+1]) for α under the last query. The CLS token is one more entry of
  count 1 (docs/theory.md §2).

  Args:
    params: a parameter dict of the direct model.
    name: "alpha" or "beta".

  Returns:
    The stacked table.

  Example:
    >>> params = {"alpha": jnp.array([1.0, 2.0]), "beta": jnp.array([3.0, 4.0]),
    ...           "alpha_cls": jnp.array(5.0), "beta_cls": jnp.array(6.0)}
    >>> lj.models.direct_params.stack(params, "alpha").tolist()
    [1.0, 2.0, 5.0]
  """
  value = params[name]
  if not has_cls(params):
    return value
  return jnp.concatenate([value, jnp.asarray(params[name + "_cls"])[..., None]], axis=-1)


def unstack(params: Params, name: str, value) -> Params:
  """The inverse of stack: params with name (and name + "_cls") replaced from value
  (docs/theory.md §2).

  Args:
    params: a parameter dict of the direct model.
    name: "alpha" or "beta".
    value: the stacked table, the CLS entry last.

  Returns:
    A new dict; params is not changed.

  Example:
    >>> params = {"alpha": jnp.array([1.0, 2.0]), "beta": jnp.array([3.0, 4.0]),
    ...           "alpha_cls": jnp.array(5.0), "beta_cls": jnp.array(6.0)}
    >>> new = lj.models.direct_params.unstack(params, "beta", jnp.array([7.0, 8.0, 9.0]))
    >>> new["beta"].tolist(), float(new["beta_cls"])
    ([7.0, 8.0], 9.0)
  """
  groups = params[name].shape[-1]
  new = dict(params, **{name: value[..., :groups]})
  if has_cls(params):
    new[name + "_cls"] = value[..., groups]
  return new


def check_params(params: Params, size: int, field: str = "d") -> None:
  """Raises ValueError unless params match `size` entries per group, their Layout's shapes
  (docs/theory.md §2, §2b), and are finite.

  Args:
    params: a parameter dict of the direct model.
    size: the entries per token axis, d or the number of token groups G.
    field: the name of size in the message.

  Example:
    >>> lj.models.direct_params.check_params(lj.init_params(3), 3)
    >>> lj.models.direct_params.check_params(lj.init_params(3), 4)
    Traceback (most recent call last):
    ...
    ValueError: params['alpha'] must have shape (4,) under the CLS query ... with d = 4; got (3,).
  """
  validation.check_keys("params", params, ("alpha", "beta"),
                        tuple(name for name in PARAM_GROUPS if name not in ("alpha", "beta")))
  if ("alpha_cls" in params) != ("beta_cls" in params):
    missing = "beta_cls" if "alpha_cls" in params else "alpha_cls"
    raise ValueError(f"params is missing keys: '{missing}'; params must have both "
                     "'alpha_cls' and 'beta_cls' or neither (the CLS entries).")
  tables = [name for name in POSITION_TABLES if name in params]
  if tables and len(tables) != len(POSITION_TABLES):
    missing = ", ".join(repr(name) for name in POSITION_TABLES if name not in params)
    raise ValueError(f"params is missing keys: {missing}; params must have all four position "
                     f"tables {', '.join(POSITION_TABLES)} or none; got {', '.join(tables)}.")
  last = np.ndim(params["alpha"]) == 2
  query = (f"the last-token query (alpha of shape ({size}, {size}))" if last else
           f"the CLS query (alpha of shape ({size},))")
  expected = {"alpha": (size, size) if last else (size,), "beta": (size,),
              "alpha_cls": (size,) if last else (), "beta_cls": (),
              **{name: (size,) for name in POSITION_TABLES}}
  for name, value in params.items():
    if np.shape(value) != expected[name]:
      raise ValueError(f"params['{name}'] must have shape {expected[name]} under {query} with "
                       f"{field} = {size}; got {np.shape(value)}.")
  if not isinstance(params["alpha"], jax.core.Tracer):
    for name, value in params.items():
      if not np.all(np.isfinite(np.asarray(value))):
        raise ValueError(f"params['{name}'] must be finite; got {value}.")
