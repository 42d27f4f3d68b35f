"""The one XLA flag lagjax sets: YNNPACK fusions off on CPU (BUILD_NOTES.md, "YNNPACK off").

XLA's CPU backend hands small dots and reductions to YNNPACK by default. On lagjax's
float64 arrays, a batch of 5×5 products along the quadrature nodes or a vmapped sweep,
that is 1.2–4× slower than XLA's own fused loops; the transfer route (docs/theory.md §3d)
is 2–4× slower with it. `import lagjax` appends
`--xla_cpu_experimental_ynn_fusion_type=` (no library fusions) to XLA_FLAGS unless the
user's XLA_FLAGS already set that option. XLA reads the flags when JAX first computes, so
it applies when lagjax is imported before any JAX computation; `enabled()` says whether
this process asked for it.
"""

from __future__ import annotations

import os

YNN_OPTION = "--xla_cpu_experimental_ynn_fusion_type"


def _switch_off_ynn() -> None:
  """Append YNN_OPTION= to XLA_FLAGS unless the user already set the option."""
  flags = os.environ.get("XLA_FLAGS", "")
  if YNN_OPTION not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} {YNN_OPTION}=".strip()


def enabled() -> bool:
  """Whether XLA_FLAGS switches YNNPACK fusions off (lagjax's default; the transfer route's
  products along the quadrature nodes, docs/theory.md §3d, are the main reason).

  Returns:
    True when XLA_FLAGS holds the option with an empty value.

  Example:
    >>> lj.xla_flags.enabled()
    True
  """
  return f"{YNN_OPTION}= " in os.environ.get("XLA_FLAGS", "") + " "


_switch_off_ynn()
