"""The models lagjax trains (docs/theory.md sections 2 and 7).

- `direct`: the (α, β) model of the theory, its forward passes on count vectors or token
  batches; `direct_params`: its parameters (Layout, init, checks, token groups);
- `kqv`: its over-parameterized KQV form, a parameter map onto (α, β);
- `transformer`: a general single-layer transformer (heads, embeddings, positions);
- `slr`: the single-location-regression model Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩;
- `erf_slr`: Marion et al.'s erf model on the same data (section 7b);
- `transformer_options`: the transformer config's options (query, embedding, attention),
  one table each;
- `positions`: the transformer's positional terms and first/last flags.

Each model module declares `PARAM_GROUPS`, its parameter names mapped to "attention"
or "output"; plans read that declaration (`group_labels`) to decide which
parameters a phase trains. All share one masked softmax (`softmax`). A new model is one
module here with its forward pass and its `PARAM_GROUPS`, imported below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from lagjax.models import (
    direct,
    direct_params,
    erf_slr,
    kqv,
    positions,
    slr,
    softmax,
    transformer,
    transformer_options,
)


class Model(NamedTuple):
  """A trainable model for the tasks of docs/theory.md §7: init(key) -> (params, fixed),
  apply(params, fixed, batch) -> outputs.

  Attributes:
    init: key -> (params, fixed); params is the trainable dict, fixed what is not trained
      (embeddings; {} when there is none).
    apply: (params, fixed, batch) -> the outputs the task's loss takes, (B,) or (B, k).
    groups: maps every trainable parameter name to "attention" or "output" (§1a), the
      model's ``PARAM_GROUPS``.

  Example:
    >>> model = lj.models.Model(
    ...     init=lambda key: (lj.models.slr.init(key, 3), {}),
    ...     apply=lambda params, fixed, batch: lj.models.slr.apply(params, batch.inputs,
    ...                                                            batch.mask),
    ...     groups=lj.models.slr.PARAM_GROUPS)
    >>> params, fixed = model.init(jax.random.PRNGKey(0))
    >>> lj.models.group_labels(model.groups, params)
    {'kappa': 'attention', 'nu': 'output'}
  """

  init: Callable
  apply: Callable
  groups: Mapping[str, str]


def group_labels(groups: Mapping[str, str], params) -> dict:
  """{name: group} for the parameter dict `params`: the parameter groups of docs/theory.md §1a
  that a plan's phases train. Every name must be declared.

  Args:
    groups: a model's ``PARAM_GROUPS``, parameter name -> "attention" or "output".
    params: a parameter dict of that model.

  Returns:
    {name: "attention" or "output"} for the names of params, in their order.

  Raises:
    ValueError: naming the parameters that groups does not declare.

  Example:
    >>> params = lj.init_params(3, cls=True)
    >>> lj.models.group_labels(lj.models.direct.PARAM_GROUPS, params)
    {'alpha': 'attention', 'beta': 'output', 'alpha_cls': 'attention', 'beta_cls': 'output'}
    >>> lj.models.group_labels(lj.models.slr.PARAM_GROUPS, params)
    Traceback (most recent call last):
    ...
    ValueError: parameters ['alpha', 'alpha_cls', 'beta', 'beta_cls'] have no declared group; ...
  """
  unknown = sorted(set(params) - set(groups))
  if unknown:
    raise ValueError(f"parameters {unknown} have no declared group; declared: {sorted(groups)}.")
  return {name: groups[name] for name in params}


__all__ = ["Model", "direct", "direct_params", "erf_slr", "group_labels", "kqv", "positions", "slr",
           "softmax", "transformer", "transformer_options"]
