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

# Parameter groups (docs/theory.md §5): plans train "attention" and "output" separately.
GROUPS = {"alpha": "attention", "alpha_cls": "attention", "beta": "output", "beta_cls": "output"}


def init_params(d: int, cls: bool = False) -> Params:
  """Zero initialization θ0 = 0, the paper's setting."""
  validation.require_float64("lj.init_params")
  validation.check_int("d", d, 2, integral_floats=True)
  params = {"alpha": jnp.zeros(d), "beta": jnp.zeros(d)}
  if cls:
    params.update(alpha_cls=jnp.zeros(()), beta_cls=jnp.zeros(()))
  return params


def has_cls(params: Params) -> bool:
  return "alpha_cls" in params


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


def forward_counts(params: Params, counts):
  """f_θ from count vectors (..., G): logits log c_σ + α_σ with log-sum-exp stabilization."""
  counts = jnp.asarray(counts, dtype=jnp.float64)
  present = counts > 0
  logits = jnp.log(jnp.where(present, counts, 1.0)) + params["alpha"]
  return _attention_readout(logits, params["beta"], present, params)


def forward_tokens(params: Params, tokens, mask):
  """f_θ on padded token batches (..., n_max) with boolean mask (True = real token)."""
  tokens = jnp.asarray(tokens)
  return _attention_readout(params["alpha"][tokens], params["beta"][tokens], jnp.asarray(mask),
                            params)


def attention_margin(params: Params, letter: int = 0):
  """α_a - max_{σ≠a} α_σ."""
  alpha = params["alpha"]
  others = jnp.where(jnp.arange(alpha.shape[-1]) == letter, -jnp.inf, alpha)
  return alpha[..., letter] - others.max(-1)
