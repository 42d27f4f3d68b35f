"""A general single-layer transformer (docs/theory.md sections 2 and 7).

One attention layer read out at a single query position, H heads:

    x_l  = E[w_l] (⊕ E[w_{l-1}]) + p_l                   fixed embedding + positional info
    s_hl = (q W_Q[h]) · (x_l W_K[h]) / √k                 q = e_cls, or x at the last token
    f(w) = Σ_h (Σ_l softmax_l(s_h) x_l W_V[h]) W_O[h] readout

The softmax runs over the real tokens and, when `cls`, the CLS token itself
(embedding e_cls, no position). With one head, no positional information, a
CLS query and a scalar output, f is the direct model f_θ of section 2 with
α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = E_σ W_V W_O readout (`to_direct`).

Two parameterisations (`TransformerConfig.attention`; each option of the config is declared
once, in lagjax/models/transformer_options.py):

- "kqv" (default): the products above from a small random init (zero is a saddle);
- "direct": the (α, β) analogue of the theory, from zero. Each head has a score
  map u_h ("scores": a vector (m,) with the CLS query, s_hl = x_l·u_h; a matrix
  (m, m) with the last-token query, s_hl = q·A_h x_l) and a value map v_h
  ("values", (m, outputs)), so the head's value is x_l v_h. With one head,
  one-hot embeddings and the CLS query this is exactly f_θ with α = E u,
  β = E v (α_cls, β_cls from the CLS dimension).

Parameter groups (`PARAM_GROUPS`): "W_Q", "W_K" ("scores") are the attention group;
"W_V", "W_O", "readout" ("values") and learned positions "pos" are the output group. Learned
positions sit with the output group: like β they are per-position features,
and keeping the attention group to W_Q, W_K makes an attention-only phase move
exactly the score map, as for α in the direct model.

The module keeps its two forward algorithms (the token-lookup path and the
explicit stream) side by side, since each is the other's test oracle; that is
why it is longer than the others.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.models import positions
from lagjax.models.softmax import masked_softmax
from lagjax.models.transformer_options import (
    ATTENTION,
    ATTENTIONS,
    EMBEDDING,
    EMBEDDINGS,
    QUERIES,
    QUERY,
)

Params = dict

PARAM_GROUPS = {"W_Q": "attention", "W_K": "attention", "scores": "attention", "W_V": "output",
                "W_O": "output", "readout": "output", "values": "output", "pos": "output"}

# Token lookups in vocabularies up to this size are products with one-hot tokens (their
# gradients are products too; a gather's is a scatter-add, slow on CPU).
ONE_HOT_MAX_VOCAB = 64
POSITIONAL = tuple(positions.POSITIONAL)   # the config's choices of positional information


def _check_int(name: str, value, minimum: int, optional: bool = False) -> None:
  validation.check_int(f"TransformerConfig {name}", value, minimum, optional=optional)


def _check_choice(name: str, value, allowed) -> None:
  validation.check_choice(f"TransformerConfig {name}", value, allowed)


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Shape and options of the single-layer transformer of docs/theory.md §2.

  Attributes:
    vocab: alphabet size d (tokens 0..d-1).
    width: token embedding width. One-hot: None (= vocab + 1: one dim per token
      and one for CLS) or larger (zero padded). Random: required, E ~ N(0, 1/width).
    heads: number of heads H.
    key_dim: query/key width k per head; None means the stream width m.
    outputs: 1 for a scalar output, otherwise the number of logits.
    embedding: "one_hot" or "random" (both fixed, not trained).
    positional: "none", "learned" (trainable "pos", needs max_len), "sinusoidal"
      (fixed, added to the stream) or "first_last" (two extra stream dims flagging
      the first and the last real token).
    max_len: longest string for learned positions (ignored otherwise).
    cls: whether the CLS token is attended to (it is always the default query).
    query: "cls" (the CLS embedding, docs/theory.md section 2) or "last" (the stream
      at the last real token, for next-token tasks such as ICL bigram).
    previous_token: append the previous token's embedding to each position
      (current ⊕ previous, docs/theory.md section 7, ICL bigram).
    attention: "kqv" (W_Q, W_K, W_V, W_O, readout from a small init) or "direct"
      (per-head score and value maps from zero, the theory's (α, β) analogue).

  Example:
    >>> TransformerConfig = lj.models.transformer.TransformerConfig
    >>> config = TransformerConfig(vocab=3)
    >>> config.token_dim, config.dim  # one-hot: a dim per token and one for CLS
    (4, 4)
    >>> TransformerConfig(vocab=3, previous_token=True, positional="first_last").dim  # 4+4+2
    10
    >>> TransformerConfig(vocab=3, width=2)
    Traceback (most recent call last):
    ...
    ValueError: TransformerConfig width must be ... >= 4...
  """

  vocab: int
  width: int | None = None
  heads: int = 1
  key_dim: int | None = None
  outputs: int = 1
  embedding: str = "one_hot"
  positional: str = "none"
  max_len: int | None = None
  cls: bool = True
  query: str = "cls"
  previous_token: bool = False
  attention: str = "kqv"

  def __post_init__(self):
    _check_int("vocab", self.vocab, 1)
    _check_choice("embedding", self.embedding, EMBEDDINGS)
    _check_choice("positional", self.positional, POSITIONAL)
    _check_choice("query", self.query, QUERIES)
    _check_choice("attention", self.attention, ATTENTIONS)
    embedding = EMBEDDING[self.embedding]
    if self.width is None and not embedding.default_width:
      raise ValueError(f"TransformerConfig width must be an integer >= "
                       f"{embedding.min_width(self.vocab)} for embedding={self.embedding!r}; "
                       f"got None.")
    _check_int("width", self.width, embedding.min_width(self.vocab), optional=True)
    _check_int("heads", self.heads, 1)
    _check_int("key_dim", self.key_dim, 1, optional=True)
    _check_int("outputs", self.outputs, 1)
    _check_int("max_len", self.max_len, 1,
               optional=not positions.POSITIONAL[self.positional].trainable)
    for name in ("cls", "previous_token"):
      validation.check_bool(f"TransformerConfig {name}", getattr(self, name))

  @property
  def token_dim(self) -> int:
    """Width of one token's fixed embedding."""
    return self.vocab + 1 if self.width is None else self.width

  @property
  def dim(self) -> int:
    """Stream width m: token (⊕ previous token) (⊕ two marker dims)."""
    return (self.token_dim * (2 if self.previous_token else 1)
            + positions.POSITIONAL[self.positional].marker_dims)

  @property
  def head_key_dim(self) -> int:
    return self.dim if self.key_dim is None else self.key_dim


def _check_config(config) -> None:
  if not isinstance(config, TransformerConfig):
    raise ValueError(f"config must be a lagjax.models.transformer.TransformerConfig; got "
                     f"{type(config).__name__}.")


def param_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
  """Shapes of the trainable parameters for `config` (docs/theory.md §2): H heads, stream
  width m, key width k.

  Args:
    config: the model's TransformerConfig.

  Returns:
    {name: shape}; the keys are those of the config's parameterisation (and "pos" for
    learned positions).

  Example:
    >>> TransformerConfig = lj.models.transformer.TransformerConfig
    >>> lj.models.transformer.param_shapes(TransformerConfig(vocab=3))  # m = k = 4
    {'W_Q': (1, 4, 4), 'W_K': (1, 4, 4), 'W_V': (1, 4, 4), 'W_O': (1, 4, 4), 'readout': (4,)}
    >>> lj.models.transformer.param_shapes(
    ...     TransformerConfig(vocab=3, heads=2, query="last", attention="direct"))
    {'scores': (2, 4, 4), 'values': (2, 4, 1)}
  """
  _check_config(config)
  shapes = ATTENTION[config.attention].shapes(config)
  if positions.POSITIONAL[config.positional].trainable:
    shapes["pos"] = (config.max_len, config.dim)
  return shapes


def init(key, config: TransformerConfig, scale: float = 0.1) -> tuple[Params, dict]:
  """Small random init (zero is a saddle, as for the KQV form of docs/theory.md §2). The
  "direct" parameterisation starts at zero instead, whatever the scale.

  Args:
    key: PRNG key.
    config: the model's TransformerConfig.
    scale: standard deviation of every trainable entry.

  Returns:
    The pair (params, fixed). params has the shapes of `param_shapes`; fixed is
    {"E": (vocab, token_dim), "e_cls": (token_dim,)}, one-hot (e_cls the extra dim) or
    N(0, 1/token_dim).

  Example:
    >>> config = lj.models.transformer.TransformerConfig(
    ...     vocab=2, positional="first_last", attention="direct")
    >>> params, fixed = lj.models.transformer.init(jax.random.PRNGKey(0), config)
    >>> {name: value.shape for name, value in params.items()}  # m = 3 + 2 marker dims
    {'scores': (1, 5), 'values': (1, 5, 1)}
    >>> float(np.abs(np.asarray(params["scores"])).max())  # from zero, like θ0 = 0
    0.0
    >>> fixed["E"].tolist(), fixed["e_cls"].tolist()
    ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [0.0, 0.0, 1.0])
  """
  validation.require_float64("lj.models.transformer.init")
  _check_config(config)
  if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
    raise ValueError(f"scale must be finite and > 0; got {scale!r}.")
  return _init(key, config, scale)


@functools.partial(jax.jit, static_argnums=1)
def _init(key, config, scale):
  # One normal draw sliced into every array: a single threefry to compile.
  shapes = dict(param_shapes(config), table=(config.vocab + 1, config.token_dim))
  sizes = [math.prod(shape) for shape in shapes.values()]
  draws = jnp.split(jax.random.normal(key, (sum(sizes),)), np.cumsum(sizes)[:-1])
  arrays = {name: draw.reshape(shape) for draw, (name, shape) in zip(draws, shapes.items())}
  table = arrays.pop("table")
  # The direct parameterisation starts at zero, like θ0 = 0 of the theory.
  factor = 0.0 if ATTENTION[config.attention].from_zero else scale
  params = {name: factor * value for name, value in arrays.items()}
  return params, _fixed_embeddings(config, table)


def _fixed_embeddings(config, normal_table):
  """The fixed embeddings {"E", "e_cls"} from a standard-normal (vocab + 1, token_dim) draw:
  one-hot rows (e_cls the extra one), or the draw's rows scaled to N(0, 1/token_dim)."""
  table = EMBEDDING[config.embedding].table(config.vocab, config.token_dim, normal_table)
  return {"E": table[:-1], "e_cls": table[-1]}


def _check_params(params, config) -> None:
  shapes = param_shapes(config)
  validation.check_keys("params (for this config)", params, tuple(shapes))
  for name, shape in shapes.items():
    if np.shape(params[name]) != shape:
      raise ValueError(f"params['{name}'] must have shape {shape}; got {np.shape(params[name])}.")


def embed(params: Params, fixed: dict, config: TransformerConfig, tokens, mask=None):
  """The stream x (..., L, m) and the CLS embedding (m,) of docs/theory.md §2:
  x_l = E[w_l] (⊕ E[w_{l-1}]) + p_l.

  Args:
    params, fixed: from `init`.
    config: the model's TransformerConfig.
    tokens: integer tokens (..., L), or continuous token embeddings
      (..., L, token_dim) used in place of E[w_l].
    mask: boolean (..., L), True at real tokens; None means all real.
      Positions are array indices, so padding belongs at the end.

  Returns:
    The pair (x, x_cls). Padded positions carry no token content.

  Example:
    >>> config = lj.models.transformer.TransformerConfig(
    ...     vocab=2, positional="first_last", attention="direct")
    >>> params, fixed = lj.models.transformer.init(jax.random.PRNGKey(0), config)
    >>> x, x_cls = lj.models.transformer.embed(params, fixed, config, jnp.array([0, 1, 1]))
    >>> x.tolist()  # one-hot E[w_l], then the first and last flags
    [[1.0, 0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 1.0]]
    >>> x_cls.tolist()
    [0.0, 0.0, 1.0, 0.0, 0.0]
  """
  tokens, mask = _check_inputs(config, tokens, mask)
  return _embed(params, fixed, config, tokens, mask)


def _check_inputs(config, tokens, mask):
  """Validated (tokens, mask) arrays, mask defaulting to all real."""
  _check_config(config)
  tokens = jnp.asarray(tokens)
  continuous = not jnp.issubdtype(tokens.dtype, jnp.integer)
  if continuous and (tokens.ndim < 2 or tokens.shape[-1] != config.token_dim):
    raise ValueError(f"continuous inputs must have shape (..., L, {config.token_dim}) "
                     f"(token_dim); got {tokens.shape}.")
  if not continuous and tokens.ndim < 1:
    raise ValueError(f"tokens must have shape (..., L); got {tokens.shape}.")
  shape = tokens.shape[:-1] if continuous else tokens.shape
  mask = jnp.ones(shape, bool) if mask is None else jnp.asarray(mask)
  if mask.shape != shape or mask.dtype != jnp.bool_:
    raise ValueError(f"mask must be boolean with shape {shape}; got {mask.dtype} {mask.shape}.")
  if positions.POSITIONAL[config.positional].trainable and shape[-1] > config.max_len:
    raise ValueError(f"strings of length {shape[-1]} exceed max_len = {config.max_len} of the "
                     "learned positions.")
  if not continuous and not isinstance(tokens, jax.core.Tracer) and \
      not isinstance(mask, jax.core.Tracer):
    bad = np.asarray(tokens)[np.asarray(mask)]
    if bad.size and (bad.min() < 0 or bad.max() >= config.vocab):
      raise ValueError(f"tokens must lie in 0..{config.vocab - 1} (vocab = {config.vocab}); got "
                       f"values in {bad.min()}..{bad.max()}.")
  return tokens, mask


def _cls_stream(fixed, config):
  """The CLS token on the stream, (m,): e_cls in the token dims, zero elsewhere."""
  return jnp.zeros(config.dim).at[:config.token_dim].set(fixed["e_cls"])


@functools.partial(jax.jit, static_argnums=2)
def _embed(params, fixed, config, tokens, mask):
  continuous = not jnp.issubdtype(tokens.dtype, jnp.integer)
  shape = mask.shape
  content = tokens if continuous else fixed["E"][tokens]
  content = jnp.where(mask[..., None], content, 0.0)
  parts = [content]
  if config.previous_token:
    parts.append(jnp.concatenate([jnp.zeros_like(content[..., :1, :]), content[..., :-1, :]],
                                 axis=-2))
  x_cls = _cls_stream(fixed, config)
  extra = config.dim - config.token_dim * len(parts)
  parts.append(jnp.zeros(shape + (extra,)))
  position_term = positions.POSITIONAL[config.positional].term(params, config, mask)
  x = jnp.concatenate(parts, axis=-1) + position_term
  return x, x_cls


def apply(params: Params, fixed: dict, config: TransformerConfig, tokens, mask=None,
          multiplicity=None):
  """The model's output at the query position, f(w) of docs/theory.md §2.

  Args:
    params, fixed: from `init`.
    config: the model's TransformerConfig (static under jit).
    tokens: integer tokens (..., L) or continuous inputs (..., L, token_dim).
    mask: boolean (..., L), True at real tokens; None means all real.
    multiplicity: optional (..., L) counts c_l >= 1 at real tokens: entry l stands for c_l
      equal tokens (the count form, lagjax.tasks.count_form). Exact for a model that reads
      counts only (CLS query, no positions) or counts plus the first and last token
      (first/last markers); a learned or sinusoidal position or a previous-token feature
      depends on order, so those are refused.

  Returns:
    (...,) scalars when config.outputs == 1, else (..., outputs) logits. A row
    with no real token (and no attended CLS) gives 0.

  Example:
    >>> config = lj.models.transformer.TransformerConfig(
    ...     vocab=2, positional="first_last", attention="direct")
    >>> params, fixed = lj.models.transformer.init(jax.random.PRNGKey(0), config)
    >>> values = jnp.zeros((1, 5, 1)).at[0, :2, 0].set(jnp.array([1.0, -1.0]))  # β = (1, -1)
    >>> tokens = jnp.array([[0, 0, 1], [1, 1, 0]])  # 001 and 11
    >>> mask = jnp.array([[True, True, True], [True, True, False]])
    >>> f = lj.models.transformer.apply(dict(params, values=values), fixed, config, tokens, mask)
    >>> np.round(np.asarray(f), 6).tolist()  # zero scores: uniform over the tokens and CLS
    [0.25, -0.666667]
  """
  validation.require_float64("lj.models.transformer.apply")
  _check_config(config)
  _check_params(params, config)
  tokens, mask = _check_inputs(config, tokens, mask)
  if multiplicity is not None:
    if config.previous_token or positions.POSITIONAL[config.positional].dense:
      raise ValueError("multiplicity (the count form) needs a model that ignores token order: "
                       f"no previous-token feature and positional 'none' or 'first_last'; got "
                       f"previous_token={config.previous_token}, positional="
                       f"{config.positional!r}.")
    multiplicity = jnp.asarray(multiplicity, jnp.float64)
    if multiplicity.shape != mask.shape:
      raise ValueError(f"multiplicity must have the mask's shape {mask.shape}; got "
                       f"{multiplicity.shape}.")
  return _apply(params, fixed, config, tokens, mask, multiplicity)


@functools.partial(jax.jit, static_argnums=2)
def _apply(params, fixed, config, tokens, present, multiplicity=None):
  if jnp.issubdtype(tokens.dtype, jnp.integer):
    return _apply_tokens(params, fixed, config, tokens, present, multiplicity)
  return _apply_stream(params, fixed, config, tokens, present, multiplicity)


def _softmax_with_cls(scores, present, multiplicity, directions, x_cls, config):
  """Attention weights over the L positions (..., H, L) and, when config.cls, the CLS token
  (one more entry of multiplicity 1)."""
  present = jnp.broadcast_to(present[..., None, :], scores.shape)
  if multiplicity is not None:
    multiplicity = jnp.broadcast_to(multiplicity[..., None, :], scores.shape)
  if config.cls:
    cls_scores = jnp.broadcast_to((directions @ x_cls)[..., None], scores.shape[:-1] + (1,))
    scores = jnp.concatenate([scores, cls_scores], axis=-1)
    present = jnp.concatenate([present, jnp.ones(present.shape[:-1] + (1,), bool)], -1)
    if multiplicity is not None:
      multiplicity = jnp.concatenate([multiplicity, jnp.ones(present.shape[:-1] + (1,))], -1)
  return masked_softmax(scores, present, multiplicity)


def _apply_tokens(params, fixed, config, tokens, present, multiplicity=None):
  """`_apply_stream` for integer tokens, without forming the (..., L, m) stream.

  The stream is a sum of parts: E[w_l], E[w_{l-1}] (previous_token), the two
  first/last flags, and a dense position term p_l shared by all rows. A score
  x_l · u_h is then a lookup in the per-type table E u_h plus the flag and
  position terms, and a head's value Σ_l a_hl x_l W_V[h] W_O[h] readout is a
  lookup in E M_h, M_h = W_V[h] W_O[h] readout: the direct model's α and β of
  section 2, per head: the output sums, per part, the attention mass on each token type
  times that table. Memory per row is O(L V H) (one-hot tokens, V <= ONE_HOT_MAX_VOCAB)
  or O(L H) instead of O(L m); the floating-point result equals the stream form to
  rounding.
  """
  t = config.token_dim
  table = fixed["E"]
  x_cls = _cls_stream(fixed, config)
  value_maps = ATTENTION[config.attention].value_maps(params, config)
  # Parts of the stream: (tokens, has-token mask, slice of the stream they fill).
  parts = [(tokens, present, slice(0, t))]
  if config.previous_token:
    shifted = lambda a, fill: jnp.concatenate(
        [jnp.full_like(a[..., :1], fill), a[..., :-1]], axis=-1)
    parts.append((shifted(tokens, 0), shifted(present, False), slice(t, 2 * t)))
  positional = positions.POSITIONAL[config.positional]
  flags = positions.first_last_flags(present) if positional.marker_dims else None
  dense = (positional.term(params, config, present) if positional.dense else None)  # (L, m)
  query = QUERY[config.query].from_parts(parts, table, flags, dense, present, x_cls, config)
  directions = ATTENTION[config.attention].score_directions(params, config, query)

  vocab = table.shape[0]
  small = vocab <= ONE_HOT_MAX_VOCAB

  def at_tokens(rows, w, has):
    """rows (..., H, V) read at tokens w (..., L), 0 where `has` is False -> (..., H, L)."""
    if small:
      return jnp.einsum("...lv,...hv->...hl", jax.nn.one_hot(w, vocab) * has[..., None], rows)
    rows = jnp.broadcast_to(rows, w.shape[:-1] + rows.shape[-2:])
    index = jnp.broadcast_to(w[..., None, :], w.shape[:-1] + rows.shape[-2:-1] + w.shape[-1:])
    return jnp.take_along_axis(rows, index, axis=-1) * has[..., None, :]

  def per_type(weights, w, has):
    """Attention mass per token type, (..., H, L) at tokens w -> (..., H, V)."""
    weights = weights * has[..., None, :]
    if small:
      return jnp.einsum("...hl,...lv->...hv", weights, jax.nn.one_hot(w, vocab))
    flat = weights.reshape(-1, *weights.shape[-2:])                        # (N, H, L)
    rows = jnp.arange(flat.shape[0])[:, None, None]
    heads = jnp.arange(flat.shape[1])[None, :, None]
    mass = jnp.zeros(flat.shape[:2] + (vocab,)).at[
        rows, heads, w.reshape(-1, 1, w.shape[-1])].add(flat)
    return mass.reshape(weights.shape[:-1] + (vocab,))

  scores = 0.0
  for w, has, part in parts:
    score_table = jnp.einsum("vt,...ht->...hv", table, directions[..., part])
    scores = scores + at_tokens(score_table, w, has)
  if flags is not None:
    scores = scores + jnp.einsum("...lf,...hf->...hl", flags, directions[..., -2:])
  if dense is not None:
    scores = scores + jnp.einsum("lm,...hm->...hl", dense, directions)
  weights = _softmax_with_cls(scores, present, multiplicity, directions, x_cls, config)
  on_tokens = weights[..., : tokens.shape[-1]]
  # A head's output Σ_l a_l x_l M_h: per part, the mass on each token type times E M_h.
  out = 0.0
  for w, has, part in parts:
    value_table = jnp.einsum("vt,hto->hvo", table, value_maps[:, part])
    out = out + jnp.einsum("...hv,hvo->...o", per_type(on_tokens, w, has), value_table)
  if flags is not None:
    out = out + jnp.einsum("...hl,...lf,hfo->...o", on_tokens, flags, value_maps[:, -2:])
  if dense is not None:
    out = out + jnp.einsum("...hl,lm,hmo->...o", on_tokens, dense, value_maps)
  if config.cls:
    out = out + jnp.einsum("...h,hmo,m->...o", weights[..., -1], value_maps, x_cls)
  return out[..., 0] if config.outputs == 1 else out


def _apply_stream(params, fixed, config, tokens, present, multiplicity=None):
  """The model on the explicit stream x (..., L, m): continuous inputs, any options."""
  x, x_cls = _embed(params, fixed, config, tokens, present)
  query = QUERY[config.query].from_stream(x, x_cls, present)
  directions = ATTENTION[config.attention].score_directions(params, config, query)
  scores = jnp.einsum("...lm,...hm->...hl", x, directions)
  weights = _softmax_with_cls(scores, present, multiplicity, directions, x_cls, config)
  # Σ_l softmax_l x_l W_V = (Σ_l softmax_l x_l) W_V: average the stream first.
  attended = jnp.einsum("...hl,...lm->...hm", weights[..., : x.shape[-2]], x)
  if config.cls:
    attended = attended + weights[..., -1:] * x_cls
  out = jnp.einsum("...hm,hmo->...o", attended,
                   ATTENTION[config.attention].value_maps(params, config))
  return out[..., 0] if config.outputs == 1 else out


def to_direct(params: Params, fixed: dict, config: TransformerConfig) -> Params:
  """The (α, β) (and α_cls, β_cls when cls) of the direct model (lagjax.models.direct)
  realizing the same f.

  Needs one head, no positional information, no previous-token features, the
  CLS query and a scalar output (any fixed embedding, one-hot or random):
  α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = E_σ W_V W_O readout (docs/theory.md section 2).

  Args:
    params, fixed: from `init`.
    config: the model's TransformerConfig.

  Returns:
    The direct model's parameters {"alpha": (vocab,), "beta": (vocab,)}, with "alpha_cls"
    and "beta_cls" when config.cls.

  Raises:
    ValueError: naming the first option that rules out the reduction.

  Example:
    >>> config = lj.models.transformer.TransformerConfig(vocab=2)
    >>> params, fixed = lj.models.transformer.init(jax.random.PRNGKey(0), config)
    >>> direct = lj.models.transformer.to_direct(params, fixed, config)
    >>> sorted(direct)
    ['alpha', 'alpha_cls', 'beta', 'beta_cls']
    >>> tokens = jnp.array([[0, 0, 1], [1, 1, 0]])
    >>> mask = jnp.array([[True, True, True], [True, True, False]])
    >>> f = lj.models.transformer.apply(params, fixed, config, tokens, mask)
    >>> bool(np.allclose(f, lj.forward_tokens(direct, tokens, mask), rtol=0, atol=1e-12))
    True
  """
  _check_config(config)
  _check_params(params, config)
  needs = {"heads": (config.heads, 1), "positional": (config.positional, "none"),
           "previous_token": (config.previous_token, False), "query": (config.query, "cls"),
           "outputs": (config.outputs, 1)}
  for name, (value, wanted) in needs.items():
    if value != wanted:
      raise ValueError(f"to_direct needs config {name} = {wanted!r} (the direct model of "
                       f"docs/theory.md section 2); got {value!r}.")
  attention = ATTENTION[config.attention]
  score_map = attention.score_directions(params, config, _cls_stream(fixed, config))[0]
  value_map = attention.value_maps(params, config)[0, :, 0]
  direct = {"alpha": fixed["E"] @ score_map, "beta": fixed["E"] @ value_map}
  if config.cls:
    direct.update(alpha_cls=fixed["e_cls"] @ score_map, beta_cls=fixed["e_cls"] @ value_map)
  return direct
