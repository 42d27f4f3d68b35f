"""A general single-layer transformer and the SLR model (docs/theory.md sections 2 and 7).

One attention layer read out at a single query position, H heads:

    x_l  = E[w_l] (⊕ E[w_{l-1}]) + p_l                   fixed embedding + positional info
    s_hl = (q W_Q[h]) · (x_l W_K[h]) / √k                 q = e_cls, or x at the last token
    f(w) = Σ_h (Σ_l softmax_l(s_h) x_l W_V[h]) W_O[h] readout

The softmax runs over the real tokens and, when `cls`, the CLS token itself
(embedding e_cls, no position). With one head, no positional information, a
CLS query and a scalar output, f is the direct model f_θ of section 2 with
α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = E_σ W_V W_O readout (`to_direct`).

Parameter groups (lagjax.plans.ATTENTION_KEYS): "W_Q", "W_K" are the attention
group; "W_V", "W_O", "readout" and learned positions "pos" are the output group.
Learned positions sit with the output group: like β they are per-position
features, and keeping the attention group to W_Q, W_K makes an attention-only
phase move exactly the score map, as for α in the direct model.

The SLR model of section 7, f(X) = Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩, is its own
small model (`slr_init`, `slr_apply`) with κ under "W_K" and ν under "readout".
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation

Params = dict

EMBEDDINGS = ("one_hot", "random")
QUERIES = ("cls", "last")


def _check_int(name: str, value, minimum: int, optional: bool = False) -> None:
  validation.check_int(f"TransformerConfig {name}", value, minimum, optional=optional)


def _check_choice(name: str, value, allowed) -> None:
  validation.check_choice(f"TransformerConfig {name}", value, allowed)


# ---------------------------------------------------------------------------
# Positional information: a registry of additive terms on the (..., L, m) stream.
# ---------------------------------------------------------------------------


def _no_positions(params, config, mask):
  return 0.0


def _learned_positions(params, config, mask):
  return params["pos"][: mask.shape[-1]]


def _sinusoidal_positions(params, config, mask):
  """PE[p, i] = sin(p ω_i) for even i, cos(p ω_i) for odd i, ω_i = 10000^{-2⌊i/2⌋/m}."""
  m = config.dim
  index = jnp.arange(m)
  frequency = 10000.0 ** (-(2 * (index // 2)) / m)
  angle = jnp.arange(mask.shape[-1])[:, None] * frequency
  return jnp.where(index % 2 == 0, jnp.sin(angle), jnp.cos(angle))


def _last_index(present):
  """Index of the last real position of each row (0 for an empty row)."""
  return present.shape[-1] - 1 - jnp.argmax(present[..., ::-1], axis=-1)


def _first_last_flags(mask):
  """(..., L, 2) floats: 1 at the first and at the last real token (all 0 in an empty row)."""
  first = jnp.argmax(mask, axis=-1)
  last = _last_index(mask)
  anything = mask.any(-1, keepdims=True)
  positions = jnp.arange(mask.shape[-1])
  is_first = (positions == first[..., None]) & anything
  is_last = (positions == last[..., None]) & anything
  return jnp.stack([is_first, is_last], axis=-1).astype(jnp.float64)


def _first_last_markers(params, config, mask):
  """One-hots in the last two stream dims at the first and the last real token."""
  zeros = jnp.zeros(mask.shape + (config.dim - 2,))
  return jnp.concatenate([zeros, _first_last_flags(mask)], axis=-1)


POSITIONAL: dict[str, Callable] = {
    "none": _no_positions,
    "learned": _learned_positions,
    "sinusoidal": _sinusoidal_positions,
    "first_last": _first_last_markers,
}


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Shape and options of the single-layer transformer.

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

  def __post_init__(self):
    _check_int("vocab", self.vocab, 1)
    _check_choice("embedding", self.embedding, EMBEDDINGS)
    _check_choice("positional", self.positional, tuple(POSITIONAL))
    _check_choice("query", self.query, QUERIES)
    if self.embedding == "random" and self.width is None:
      raise ValueError("TransformerConfig width must be an integer >= 1 for embedding='random'; "
                       "got None.")
    _check_int("width", self.width, self.vocab + 1 if self.embedding == "one_hot" else 1,
               optional=True)
    _check_int("heads", self.heads, 1)
    _check_int("key_dim", self.key_dim, 1, optional=True)
    _check_int("outputs", self.outputs, 1)
    _check_int("max_len", self.max_len, 1, optional=self.positional != "learned")
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
            + (2 if self.positional == "first_last" else 0))

  @property
  def head_key_dim(self) -> int:
    return self.dim if self.key_dim is None else self.key_dim


def _check_config(config) -> None:
  if not isinstance(config, TransformerConfig):
    raise ValueError(f"config must be a lagjax.transformer.TransformerConfig; got "
                     f"{type(config).__name__}.")


def param_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
  """Shapes of the trainable parameters for `config`."""
  _check_config(config)
  m, k, heads = config.dim, config.head_key_dim, config.heads
  shapes = {"W_Q": (heads, m, k), "W_K": (heads, m, k), "W_V": (heads, m, m),
            "W_O": (heads, m, m), "readout": (m,) if config.outputs == 1 else (m, config.outputs)}
  if config.positional == "learned":
    shapes["pos"] = (config.max_len, m)
  return shapes


def init(key, config: TransformerConfig, scale: float = 0.1) -> tuple[Params, dict]:
  """Small random init (zero is a saddle, as for the KQV form of section 2).

  Args:
    key: PRNG key.
    config: the model's TransformerConfig.
    scale: standard deviation of every trainable entry.

  Returns:
    (params, fixed): params as in `param_shapes`; fixed {"E": (vocab, token_dim),
    "e_cls": (token_dim,)}, one-hot (e_cls the extra dim) or N(0, 1/token_dim).
  """
  validation.require_float64("lj.transformer.init")
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
  params = {name: scale * value for name, value in arrays.items()}
  width = config.token_dim
  if config.embedding == "one_hot":
    table = jnp.eye(config.vocab + 1, width)
  else:
    table = table / math.sqrt(width)
  return params, {"E": table[:-1], "e_cls": table[-1]}


def _check_params(params, config) -> None:
  if not isinstance(params, dict):
    raise ValueError(f"params must be a dict; got {type(params).__name__}.")
  shapes = param_shapes(config)
  if set(params) != set(shapes):
    raise ValueError(f"params must have keys {sorted(shapes)} for this config; got "
                     f"{sorted(params)}.")
  for name, shape in shapes.items():
    if np.shape(params[name]) != shape:
      raise ValueError(f"params['{name}'] must have shape {shape}; got {np.shape(params[name])}.")


def _masked_softmax(scores, present):
  """softmax over present entries of the last axis; all-zero weights when none is present.

  Shifted by the largest present score (no gradient flows through the shift:
  softmax is shift invariant); absent entries are zeroed before exp, so no inf
  or NaN appears for any finite scores.
  """
  shift = jnp.where(present, scores, -jnp.inf).max(-1, keepdims=True)
  shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
  weights = jnp.where(present, jnp.exp(jnp.where(present, scores - shift, 0.0)), 0.0)
  total = weights.sum(-1, keepdims=True)
  return weights / jnp.where(total > 0, total, 1.0)


def embed(params: Params, fixed: dict, config: TransformerConfig, tokens, mask=None):
  """The stream x (..., L, m) and the CLS embedding (m,).

  Args:
    params, fixed: from `init`.
    config: the model's TransformerConfig.
    tokens: integer tokens (..., L), or continuous token embeddings
      (..., L, token_dim) used in place of E[w_l].
    mask: boolean (..., L), True at real tokens; None means all real.
      Positions are array indices, so padding belongs at the end.

  Returns:
    (x, x_cls). Padded positions carry no token content.
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
  if config.positional == "learned" and shape[-1] > config.max_len:
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
  x = jnp.concatenate(parts, axis=-1) + POSITIONAL[config.positional](params, config, mask)
  return x, x_cls


def apply(params: Params, fixed: dict, config: TransformerConfig, tokens, mask=None):
  """The model's output at the query position.

  Args:
    params, fixed: from `init`.
    config: the model's TransformerConfig (static under jit).
    tokens: integer tokens (..., L) or continuous inputs (..., L, token_dim).
    mask: boolean (..., L), True at real tokens; None means all real.

  Returns:
    (...,) scalars when config.outputs == 1, else (..., outputs) logits. A row
    with no real token (and no attended CLS) gives 0.
  """
  validation.require_float64("lj.transformer.apply")
  _check_config(config)
  _check_params(params, config)
  tokens, mask = _check_inputs(config, tokens, mask)
  return _apply(params, fixed, config, tokens, mask)


@functools.partial(jax.jit, static_argnums=2)
def _apply(params, fixed, config, tokens, present):
  if jnp.issubdtype(tokens.dtype, jnp.integer):
    return _apply_tokens(params, fixed, config, tokens, present)
  return _apply_stream(params, fixed, config, tokens, present)


def _apply_tokens(params, fixed, config, tokens, present):
  """`_apply_stream` for integer tokens, without forming the (..., L, m) stream.

  The stream is a sum of parts: E[w_l], E[w_{l-1}] (previous_token), the two
  first/last flags, and a dense position term p_l shared by all rows. A score
  x_l · u_h is then a lookup in the per-type table E u_h plus the flag and
  position terms, and a head's value Σ_l a_hl x_l W_V[h] W_O[h] readout is a
  lookup in E M_h, M_h = W_V[h] W_O[h] readout: the direct model's α and β of
  section 2, per head. Memory per row is O(L H outputs) instead of O(L m); the
  floating-point result equals the stream form to rounding.
  """
  t = config.token_dim
  table = fixed["E"]
  x_cls = _cls_stream(fixed, config)
  readout = params["readout"].reshape(config.dim, config.outputs)
  value_maps = jnp.einsum("hmv,hvn,no->hmo", params["W_V"], params["W_O"], readout)
  # Parts of the stream: (tokens, has-token mask, slice of the stream they fill).
  parts = [(tokens, present, slice(0, t))]
  if config.previous_token:
    shifted = lambda a, fill: jnp.concatenate(
        [jnp.full_like(a[..., :1], fill), a[..., :-1]], axis=-1)
    parts.append((shifted(tokens, 0), shifted(present, False), slice(t, 2 * t)))
  flags = _first_last_flags(present) if config.positional == "first_last" else None
  dense = (POSITIONAL[config.positional](params, config, present)
           if config.positional in ("learned", "sinusoidal") else None)  # (L, m)
  last = _last_index(present)

  if config.query == "cls":
    query = jnp.broadcast_to(x_cls, tokens.shape[:-1] + (config.dim,))
  else:
    pieces = [jnp.where(jnp.take_along_axis(has, last[..., None], -1),
                        table[jnp.take_along_axis(w, last[..., None], -1)[..., 0]], 0.0)
              for w, has, _ in parts]
    pieces.append(jnp.zeros(tokens.shape[:-1] + (config.dim - t * len(parts),)))
    query = jnp.concatenate(pieces, axis=-1)
    if flags is not None:
      at_last = jnp.take_along_axis(flags, last[..., None, None], -2)[..., 0, :]
      query = query.at[..., -2:].add(at_last)
    if dense is not None:
      query = query + dense[last]
    query = jnp.where(present.any(-1, keepdims=True), query, 0.0)
  directions = jnp.einsum("...m,hmk,hnk->...hn", query, params["W_Q"], params["W_K"])
  directions = directions / math.sqrt(config.head_key_dim)

  def lookup(rows, w):
    """rows (..., H, V, c) at tokens w (..., L) -> (..., H, L, c)."""
    rows = jnp.broadcast_to(rows, w.shape[:-1] + rows.shape[-3:])
    index = jnp.broadcast_to(w[..., None, :, None], w.shape[:-1] + (rows.shape[-3],) +
                             w.shape[-1:] + (1,))
    return jnp.take_along_axis(rows, index, axis=-2)

  scores = 0.0
  head_values = 0.0  # (..., H, L, outputs)
  for w, has, part in parts:
    score_table = jnp.einsum("vt,...ht->...hv", table, directions[..., part])[..., None]
    scores = scores + lookup(score_table, w)[..., 0] * has[..., None, :]
    value_table = jnp.einsum("vt,hto->hvo", table, value_maps[:, part])
    head_values = head_values + lookup(value_table, w) * has[..., None, :, None]
  if flags is not None:
    scores = scores + jnp.einsum("...lf,...hf->...hl", flags, directions[..., -2:])
    head_values = head_values + jnp.einsum("...lf,hfo->...hlo", flags, value_maps[:, -2:])
  if dense is not None:
    scores = scores + jnp.einsum("lm,...hm->...hl", dense, directions)
    head_values = head_values + jnp.einsum("lm,hmo->hlo", dense, value_maps)
  present_hl = jnp.broadcast_to(present[..., None, :], scores.shape)
  if config.cls:
    scores = jnp.concatenate([scores, (directions @ x_cls)[..., None]], axis=-1)
    present_hl = jnp.concatenate([present_hl, jnp.ones(present_hl.shape[:-1] + (1,), bool)], -1)
  weights = _masked_softmax(scores, present_hl)
  out = jnp.einsum("...hl,...hlo->...o", weights[..., : tokens.shape[-1]], head_values)
  if config.cls:
    out = out + jnp.einsum("...h,hmo,m->...o", weights[..., -1], value_maps, x_cls)
  return out[..., 0] if config.outputs == 1 else out


def _apply_stream(params, fixed, config, tokens, present):
  """The model on the explicit stream x (..., L, m): continuous inputs, any options."""
  x, x_cls = _embed(params, fixed, config, tokens, present)
  if config.query == "cls":
    query = jnp.broadcast_to(x_cls, x.shape[:-2] + x_cls.shape)
  else:
    last = _last_index(present)
    query = jnp.take_along_axis(x, last[..., None, None], axis=-2)[..., 0, :]
    query = jnp.where(present.any(-1, keepdims=True), query, 0.0)
  # s_hl = x_l · u_h with u_h = W_K[h] (q W_Q[h]) / √k, so no (..., H, L, k) keys are formed.
  directions = jnp.einsum("...m,hmk,hnk->...hn", query, params["W_Q"], params["W_K"])
  directions = directions / math.sqrt(config.head_key_dim)
  scores = jnp.einsum("...lm,...hm->...hl", x, directions)
  present = jnp.broadcast_to(present[..., None, :], scores.shape)
  if config.cls:
    scores = jnp.concatenate([scores, (directions @ x_cls)[..., None]], axis=-1)
    present = jnp.concatenate([present, jnp.ones(present.shape[:-1] + (1,), bool)], axis=-1)
  weights = _masked_softmax(scores, present)
  # Σ_l softmax_l x_l W_V = (Σ_l softmax_l x_l) W_V: average the stream first.
  attended = jnp.einsum("...hl,...lm->...hm", weights[..., : x.shape[-2]], x)
  if config.cls:
    attended = attended + weights[..., -1:] * x_cls
  heads = jnp.einsum("...hm,hmv,hvn->...n", attended, params["W_V"], params["W_O"])
  return heads @ params["readout"]


def to_direct(params: Params, fixed: dict, config: TransformerConfig) -> Params:
  """The (α, β) (and α_cls, β_cls when cls) of lagjax.model realizing the same f.

  Needs one head, no positional information, no previous-token features, the
  CLS query and a scalar output (any fixed embedding, one-hot or random):
  α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = E_σ W_V W_O readout (docs/theory.md section 2).
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
  query = fixed["e_cls"] @ params["W_Q"][0]
  score_map = params["W_K"][0] @ query / math.sqrt(config.head_key_dim)
  value_map = params["W_V"][0] @ params["W_O"][0] @ params["readout"]
  direct = {"alpha": fixed["E"] @ score_map, "beta": fixed["E"] @ value_map}
  if config.cls:
    direct.update(alpha_cls=fixed["e_cls"] @ score_map, beta_cls=fixed["e_cls"] @ value_map)
  return direct


# ---------------------------------------------------------------------------
# SLR (docs/theory.md section 7): f(X) = Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩.
# ---------------------------------------------------------------------------


def slr_init(key, m: int, scale: float = 0.1) -> Params:
  """κ ("W_K", attention group) and ν ("readout", output group), each scale · N(0, I_m).

  scale = 0 is allowed: unlike the KQV form, zero is not a saddle here (∂f/∂ν ≠ 0).
  """
  validation.require_float64("lj.transformer.slr_init")
  validation.check_int("SLR width m", m, 1)
  if not (isinstance(scale, int | float) and math.isfinite(scale) and scale >= 0):
    raise ValueError(f"scale must be finite and >= 0; got {scale!r}.")
  return _slr_init(key, m, scale)


@functools.partial(jax.jit, static_argnums=1)
def _slr_init(key, m, scale):
  kappa, nu = scale * jax.random.normal(key, (2, m))
  return {"W_K": kappa, "readout": nu}


def slr_apply(params: Params, inputs, mask=None):
  """Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩ over real positions, for inputs X (..., L, m).

  Args:
    params: {"W_K": κ (m,), "readout": ν (m,)}.
    inputs: X, shape (..., L, m).
    mask: boolean (..., L), True at real positions; None means all real.

  Returns:
    (...,) outputs; 0 for a row with no real position.
  """
  validation.require_float64("lj.transformer.slr_apply")
  if not isinstance(params, dict) or set(params) != {"W_K", "readout"}:
    raise ValueError("SLR params must be a dict with keys 'W_K' (κ) and 'readout' (ν); got "
                     f"{sorted(params) if isinstance(params, dict) else type(params).__name__}.")
  inputs = jnp.asarray(inputs, jnp.float64)
  m = np.shape(params["W_K"])
  if inputs.ndim < 2 or inputs.shape[-1:] != m or np.shape(params["readout"]) != m:
    raise ValueError(f"SLR inputs must have shape (..., L, m) with κ, ν of shape (m,); got inputs "
                     f"{inputs.shape}, κ {m}, ν {np.shape(params['readout'])}.")
  mask = jnp.ones(inputs.shape[:-1], bool) if mask is None else jnp.asarray(mask)
  if mask.shape != inputs.shape[:-1] or mask.dtype != jnp.bool_:
    raise ValueError(f"mask must be boolean with shape {inputs.shape[:-1]}; got {mask.dtype} "
                     f"{mask.shape}.")
  return _slr_apply(params, inputs, mask)


@jax.jit
def _slr_apply(params, inputs, mask):
  weights = _masked_softmax(inputs @ params["W_K"], mask)
  return (weights * (inputs @ params["readout"])).sum(-1)
