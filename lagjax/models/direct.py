"""The direct single-head (α, β) model (docs/theory.md section 2).

    f_θ(w) = Σ_i softmax_i(α_{w_i}) β_{w_i}
           = Σ_σ c_σ e^{α_σ} β_σ / Σ_σ c_σ e^{α_σ}.

Parameters are a dict {"alpha": (d,), "beta": (d,)} with optional scalars
"alpha_cls", "beta_cls" for a CLS token present once in every string. The same
functions accept grouped parameters (one entry per group of a Partition) when
given group counts instead of token counts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.models.softmax import masked_softmax

Params = dict

# e^-600 ≈ 1e-261: a score this far below the maximum weighs nothing in float64 (forward_counts).
CLUSTER_GAP = 600.0

# Parameter groups (docs/theory.md §5): plans train "attention" and "output" separately.
GROUPS = {"alpha": "attention", "alpha_cls": "attention", "beta": "output", "beta_cls": "output"}


def init_params(d: int, cls: bool = False) -> Params:
  """Zero initialization θ0 = 0, the paper's setting."""
  validation.require_float64("lj.init_params")
  return zero_params(validation.check_int("d", d, 2, integral_floats=True), cls)


def zero_params(size: int, cls: bool = False) -> Params:
  """θ = 0 on `size` entries (tokens or token groups), with the CLS scalars when cls."""
  params = {"alpha": jnp.zeros(size), "beta": jnp.zeros(size)}
  if cls:
    params.update(alpha_cls=jnp.zeros(()), beta_cls=jnp.zeros(()))
  return params


def has_cls(params: Params) -> bool:
  return "alpha_cls" in params


def stack(params: Params, name: str):
  """params[name] with the CLS scalar (name + "_cls") last when present: (G[+1],)."""
  value = params[name]
  return jnp.concatenate([value, jnp.reshape(params[name + "_cls"], (1,))]) if has_cls(
      params) else value


def unstack(params: Params, name: str, value) -> Params:
  """The inverse of stack: params with name (and name + "_cls") replaced from value."""
  groups = params[name].shape[-1]
  new = dict(params, **{name: value[:groups]})
  if has_cls(params):
    new[name + "_cls"] = value[groups]
  return new


def check_params(params: Params, size: int, field: str = "d") -> None:
  """Raises ValueError unless params match `size` entries per group and are finite."""
  if not isinstance(params, dict) or "alpha" not in params or "beta" not in params:
    raise ValueError(
        "params must be a dict with keys 'alpha', 'beta' (and optionally 'alpha_cls', "
        f"'beta_cls'); got {type(params).__name__}."
    )
  extra = set(params) - {"alpha", "beta", "alpha_cls", "beta_cls"}
  if extra:
    raise ValueError(f"params has unknown keys {sorted(extra)}; allowed: alpha, beta, alpha_cls, "
                     "beta_cls.")
  if ("alpha_cls" in params) != ("beta_cls" in params):
    raise ValueError("params must have both 'alpha_cls' and 'beta_cls' or neither.")
  for name in ("alpha", "beta"):
    shape = np.shape(params[name])
    if shape != (size,):
      raise ValueError(f"params['{name}'] must have shape ({size},) to match {field} = {size}; "
                       f"got {shape}.")
  for name in ("alpha_cls", "beta_cls"):
    if name in params and np.shape(params[name]) != ():
      raise ValueError(f"params['{name}'] must be a scalar; got shape {np.shape(params[name])}.")
  if not isinstance(params["alpha"], jax.core.Tracer):
    for name, value in params.items():
      if not np.all(np.isfinite(np.asarray(value))):
        raise ValueError(f"params['{name}'] must be finite; got {value}.")


def _attention_readout(logits, values, present, params):
  """Σ softmax(logits) values over present entries (+ the CLS token), stable for any scores."""
  if has_cls(params):
    logits = jnp.concatenate([logits, jnp.broadcast_to(params["alpha_cls"], logits.shape[:-1])[
        ..., None]], axis=-1)
    values = jnp.concatenate([jnp.broadcast_to(values, logits.shape[:-1] + values.shape[-1:]),
                              jnp.broadcast_to(params["beta_cls"], logits.shape[:-1])[..., None]],
                             axis=-1)
    present = jnp.concatenate([present, jnp.ones(present.shape[:-1] + (1,), bool)], axis=-1)
  return (masked_softmax(logits, present) * values).sum(-1)


def _forward_counts_stable(params: Params, counts):
  """f_θ on count vectors with logits log c_σ + α_σ and a log-sum-exp per row: exact for any
  scores, at one log and one exp per entry."""
  present = counts > 0
  logits = jnp.log(jnp.where(present, counts, 1.0)) + params["alpha"]
  return _attention_readout(logits, params["beta"], present, params)


def _cluster_scales(alpha):
  """u_top = e^{α - max α} on the top cluster (α >= max α - CLUSTER_GAP), u_rest =
  e^{α - max α_rest} on the rest, and the top cluster's mask; the shifts carry no gradient
  (f is invariant to them)."""
  top = alpha >= jnp.max(alpha) - CLUSTER_GAP
  top_max = jax.lax.stop_gradient(jnp.max(alpha))
  rest_max = jax.lax.stop_gradient(jnp.max(jnp.where(top, -jnp.inf, alpha)))
  u_top = jnp.where(top, jnp.exp(alpha - top_max), 0.0)
  u_rest = jnp.where(top, 0.0, jnp.exp(jnp.where(top, 0.0, alpha - rest_max)))
  return u_top, u_rest, top


def attention_masses(alpha, counts):
  """W_iσ = c_iσ e^{α_σ} / Σ_τ c_iτ e^{α_τ}, the attention mass of each entry of count vectors
  (..., G), with the two-cluster scales of `forward_counts` (no exponential per entry)."""
  u_top, u_rest, top = _cluster_scales(alpha)
  has_top = (counts @ top.astype(counts.dtype)) > 0
  weighted = counts * jnp.where(has_top[..., None], u_top, u_rest)
  return weighted / weighted.sum(-1, keepdims=True)


def forward_counts(params: Params, counts):
  """f_θ on count vectors c (..., G) (docs/theory.md §2): Σ c u β / Σ c u, u = e^{α - m}.

  The one implementation for every caller (empirical objectives, the lattice route,
  the finite-sample plan). Scores split into a top cluster (α >= max α - CLUSTER_GAP)
  and the rest; a string with a top token is scaled by max α (the rest weigh
  < e^-600 relative: nothing in float64), one without by the rest's maximum. So f is
  four matrix-vector products with no exponential per entry, exact while the rest
  spans at most CLUSTER_GAP. Wider spreads (three or more clusters) take the
  log-sum-exp path instead, exact for any scores; under vmap both paths are computed.
  The CLS token, when present, is one more entry with count 1 in every string.
  """
  counts = jnp.asarray(counts, dtype=jnp.float64)
  alpha, beta = stack(params, "alpha"), stack(params, "beta")
  if has_cls(params):
    counts = jnp.concatenate([counts, jnp.ones(counts.shape[:-1] + (1,))], axis=-1)

  def two_clusters(_):
    u_top, u_rest, top = _cluster_scales(alpha)
    has_top = (counts @ top.astype(counts.dtype)) > 0
    numerator = jnp.where(has_top, counts @ (u_top * beta), counts @ (u_rest * beta))
    return numerator / jnp.where(has_top, counts @ u_top, counts @ u_rest)

  def stable(_):
    return _forward_counts_stable(params, counts[..., :params["alpha"].shape[-1]])

  top = alpha >= jnp.max(alpha) - CLUSTER_GAP
  rest = jnp.where(top, jnp.nan, alpha)
  narrow = ~(jnp.nanmax(rest) - jnp.nanmin(rest) > CLUSTER_GAP)  # NaN (no rest) counts as narrow
  return jax.lax.cond(jax.lax.stop_gradient(narrow), two_clusters, stable, None)


def forward_tokens(params: Params, tokens, mask):
  """f_θ on padded token batches (..., n_max) with boolean mask (True = real token)."""
  tokens = jnp.asarray(tokens)
  return _attention_readout(params["alpha"][tokens], params["beta"][tokens], jnp.asarray(mask),
                            params)


def attention_margin(params: Params, letters=(0,)):
  """min_{a∈L} α_a - max_{σ∉L} α_σ, the lead of the letters' scores (docs/theory.md §2);
  α_a - max_{σ≠a} α_σ for one letter a. NaN when L is empty."""
  alpha = params["alpha"]
  letters = (letters,) if isinstance(letters, int) else tuple(letters)
  if not letters:
    return jnp.full(alpha.shape[:-1], jnp.nan)
  inside = np.isin(np.arange(alpha.shape[-1]), letters)
  return (jnp.min(jnp.where(inside, alpha, jnp.inf), -1)
          - jnp.max(jnp.where(inside, -jnp.inf, alpha), -1))
