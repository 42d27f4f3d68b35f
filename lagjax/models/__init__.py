"""The models lagjax trains (docs/theory.md sections 2 and 7).

- `direct`: the (α, β) model of the theory, on count vectors or token batches;
- `kqv`: its over-parameterized KQV form, a parameter map onto (α, β);
- `transformer`: a general single-layer transformer (heads, embeddings, positions);
- `slr`: the single-location-regression model Σ_l softmax_l(⟨X_l, κ⟩) ⟨X_l, ν⟩.

Each model module declares `GROUPS`, its parameter names mapped to "attention"
or "output"; plans read that declaration (`group_labels`) to decide which
parameters a phase trains. All share one masked softmax (`softmax`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from lagjax.models import direct, kqv, slr, softmax, transformer


class Model(NamedTuple):
  """A trainable model: init(key) -> (params, fixed), apply(params, fixed, batch) -> outputs.

  `groups` maps every trainable parameter name to "attention" or "output".
  """

  init: Callable
  apply: Callable
  groups: Mapping[str, str]


def group_labels(groups: Mapping[str, str], params) -> dict:
  """{name: group} for the parameter dict `params`; every name must be declared."""
  unknown = sorted(set(params) - set(groups))
  if unknown:
    raise ValueError(f"parameters {unknown} have no declared group; declared: {sorted(groups)}.")
  return {name: groups[name] for name in params}


__all__ = ["Model", "direct", "group_labels", "kqv", "slr", "softmax", "transformer"]
