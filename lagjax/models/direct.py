"""The direct single-head (α, β) model's forward passes (docs/theory.md section 2).

    f_θ(w) = Σ_i softmax_i(α_{w_i}) β_{w_i}
           = Σ_σ c_σ e^{α_σ} β_σ / Σ_σ c_σ e^{α_σ}.

The parameters, their Layout (CLS token, last-token query, position tables; §2b) and
their grouping over token groups are in lagjax/models/direct_params.py; the names are
re-exported here, so `lj.models.direct.Layout` is `lj.models.direct_params.Layout`. The
same functions accept grouped parameters (one entry per group of a Partition) when given
group counts instead of token counts.

Under the last query or position tables f depends on the order of the tokens, so only
`forward_tokens` (and the transfer and sampled routes) compute it; `forward_counts` is the
plain model's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import batched, validation
from lagjax.models import positions
from lagjax.models.direct_params import (  # noqa: F401 (the direct model's namespace)
    PARAM_GROUPS,
    PLAIN,
    POSITION_TABLES,
    POSITIONS,
    QUERIES,
    Layout,
    Params,
    attention_vector,
    check_params,
    expand_params,
    group_params,
    has_cls,
    has_positions,
    init_params,
    layout,
    map_token_axes,
    output_vector,
    per_token_gradients,
    stack,
    unstack,
    widen,
    zero_params,
)
from lagjax.models.softmax import masked_softmax

# e^-600 ≈ 1e-261: a score this far below the maximum weighs nothing in float64 (forward_counts).
CLUSTER_GAP = 600.0


def _attention_readout(logits, values, present, cls_logit=None, cls_value=None):
  """Σ softmax(logits) values over present entries (+ the CLS token when cls_logit is given),
  stable for any scores."""
  if cls_logit is not None:
    logits = jnp.concatenate([logits, jnp.broadcast_to(cls_logit, logits.shape[:-1])[
        ..., None]], axis=-1)
    values = jnp.concatenate([jnp.broadcast_to(values, logits.shape[:-1] + values.shape[-1:]),
                              jnp.broadcast_to(cls_value, logits.shape[:-1])[..., None]],
                             axis=-1)
    present = jnp.concatenate([present, jnp.ones(present.shape[:-1] + (1,), bool)], axis=-1)
  return (masked_softmax(logits, present) * values).sum(-1)


def _cls_entry(params):
  return (params["alpha_cls"], params["beta_cls"]) if has_cls(params) else (None, None)


def _forward_counts_stable(params: Params, counts):
  """f_θ on count vectors with logits log c_σ + α_σ and a log-sum-exp per row: exact for any
  scores, at one log and one exp per entry."""
  present = counts > 0
  logits = jnp.log(jnp.where(present, counts, 1.0)) + params["alpha"]
  return _attention_readout(logits, params["beta"], present, *_cls_entry(params))


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
  (..., G), with the two-cluster scales of `forward_counts` (no exponential per entry;
  docs/theory.md §3b).

  Args:
    alpha: the scores α (G,).
    counts: count vectors (..., G), each with a positive entry.

  Returns:
    (..., G) masses, each row summing to 1; f = W β.

  Example:
    >>> alpha = jnp.log(jnp.array([2.0, 1.0]))
    >>> masses = lj.models.direct.attention_masses(alpha, jnp.array([[1.0, 2.0], [0.0, 3.0]]))
    >>> np.round(np.asarray(masses), 6).tolist()  # c e^α = (2, 2) and (0, 3)
    [[0.5, 0.5], [0.0, 1.0]]
  """
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
  log-sum-exp path instead, exact for any scores; under vmap the batch takes one path, the
  log-sum-exp one where its members disagree (lagjax/batched.py).
  The CLS token, when present, is one more entry with count 1 in every string.
  The plain model only: under the last query or position tables f depends on order.

  Args:
    params: plain parameters (CLS query, no position tables), per token or per token group.
    counts: count vectors c (..., G), each with a positive entry.

  Returns:
    (...,) outputs f_θ.

  Raises:
    ValueError: for the last-token query or position tables.

  Example:
    >>> params = {"alpha": jnp.log(jnp.array([2.0, 1.0])), "beta": jnp.array([1.0, -1.0])}
    >>> counts = jnp.array([[1.0, 1.0], [1.0, 2.0]])
    >>> np.round(np.asarray(lj.forward_counts(params, counts)), 6).tolist()  # 1/3 and 0/4
    [0.333333, 0.0]
    >>> shifted = dict(params, alpha=params["alpha"] + 100.0)  # f is shift invariant
    >>> np.round(np.asarray(lj.forward_counts(shifted, counts)), 6).tolist()
    [0.333333, 0.0]
  """
  if not layout(params).plain:
    raise ValueError("forward_counts computes the plain model (CLS query, no position tables); "
                     "with the last-token query or position tables use forward_tokens.")
  counts = jnp.asarray(counts, dtype=jnp.float64)
  alpha, beta = stack(params, "alpha"), stack(params, "beta")
  if has_cls(params):
    counts = jnp.concatenate([counts, jnp.ones(counts.shape[:-1] + (1,))], axis=-1)

  top = alpha >= jnp.max(alpha) - CLUSTER_GAP
  rest = jnp.where(top, jnp.nan, alpha)
  narrow = ~(jnp.nanmax(rest) - jnp.nanmin(rest) > CLUSTER_GAP)  # NaN (no rest) counts as narrow
  # Module-level branches: lax.cond reuses their traces, so an eager call compiles nothing
  # new. Under vmap one branch for the batch (lagjax/batched.py).
  return jax.lax.cond(batched.every(narrow), _two_cluster_outputs, _log_sum_exp_outputs,
                      (params, alpha, beta, counts))


def _two_cluster_outputs(operands):
  """forward_counts where the rest spans at most CLUSTER_GAP."""
  _, alpha, beta, counts = operands
  u_top, u_rest, top = _cluster_scales(alpha)
  has_top = (counts @ top.astype(counts.dtype)) > 0
  numerator = jnp.where(has_top, counts @ (u_top * beta), counts @ (u_rest * beta))
  return numerator / jnp.where(has_top, counts @ u_top, counts @ u_rest)


def _log_sum_exp_outputs(operands):
  """forward_counts for any scores (CLS count, if any, left to _forward_counts_stable)."""
  params, _, _, counts = operands
  return _forward_counts_stable(params, counts[..., :params["alpha"].shape[-1]])


def forward_tokens(params: Params, tokens, mask):
  """f_θ on padded token batches (..., n_max) with boolean mask (True = real token), real
  tokens first (docs/theory.md §2). Under the last query the scores are α[c, ·] and
  α_cls[c], c the last real token; the position tables add to the first and the last real
  token (§2b).

  Args:
    params: a parameter dict of the direct model, any Layout.
    tokens: (..., n_max) ints in {0, …, d-1}.
    mask: (..., n_max) bool, True at real tokens.

  Returns:
    (...,) outputs f_θ(w).

  Example:
    >>> params = {"alpha": jnp.log(jnp.array([2.0, 1.0])), "beta": jnp.array([1.0, -1.0])}
    >>> tokens = jnp.array([[0, 1, 0], [0, 1, 1]])  # 01 and 011: counts (1, 1) and (1, 2)
    >>> mask = jnp.array([[True, True, False], [True, True, True]])
    >>> np.round(np.asarray(lj.forward_tokens(params, tokens, mask)), 6).tolist()
    [0.333333, 0.0]
    >>> params = dict(lj.init_params(2, positions="first_last"), beta_first=jnp.array([1.0, 0.0]))
    >>> np.round(np.asarray(lj.forward_tokens(params, tokens, mask)), 6).tolist()  # β^F_0 = 1
    [0.5, 0.333333]
  """
  tokens, mask = jnp.asarray(tokens), jnp.asarray(mask)
  cls_logit, cls_value = _cls_entry(params)
  if layout(params).query == "last":
    last = jnp.take_along_axis(tokens, positions.last_index(mask)[..., None], -1)[..., 0]
    logits = params["alpha"][last[..., None], tokens]
    cls_logit = None if cls_logit is None else cls_logit[last]
  else:
    logits = params["alpha"][tokens]
  values = params["beta"][tokens]
  if has_positions(params):
    flags = positions.first_last_flags(mask)
    logits = (logits + flags[..., 0] * params["alpha_first"][tokens]
              + flags[..., 1] * params["alpha_last"][tokens])
    values = (values + flags[..., 0] * params["beta_first"][tokens]
              + flags[..., 1] * params["beta_last"][tokens])
  return _attention_readout(logits, values, mask, cls_logit, cls_value)


def attention_margin(params: Params, letters=(0,)):
  """min_{a∈L} α_a - max_{σ∉L} α_σ, the lead of the letters' scores (docs/theory.md §2);
  α_a - max_{σ≠a} α_σ for one letter a. NaN when L is empty.

  Args:
    params: a parameter dict of the direct model (α of shape (..., d)).
    letters: the letters L, an int or a sequence (the language's ``margin_letters()``).

  Returns:
    The margin, a scalar (or one per leading index of α).

  Example:
    >>> params = {"alpha": jnp.array([2.0, 0.5, 1.0]), "beta": jnp.zeros(3)}
    >>> float(lj.models.direct.attention_margin(params, 0))  # 2 - max(0.5, 1)
    1.0
    >>> float(lj.models.direct.attention_margin(params, (0, 2)))  # min(2, 1) - 0.5
    0.5
    >>> float(lj.models.direct.attention_margin(params, ()))
    nan
  """
  alpha = params["alpha"]
  letters = (letters,) if validation.is_int(letters) else tuple(letters)
  if not letters:
    return jnp.full(alpha.shape[:-1], jnp.nan)
  inside = np.isin(np.arange(alpha.shape[-1]), letters)
  return (jnp.min(jnp.where(inside, alpha, jnp.inf), -1)
          - jnp.max(jnp.where(inside, -jnp.inf, alpha), -1))
