"""The absl binaries and their configs (docs/design.md).

The binaries' one JAX setting that must precede `import jax`, which reads it there: every
closed-over array becomes an argument of the compiled program instead of a constant in it
(https://docs.jax.dev/en/latest/internals/constants.html). Two automata of one size then
lower to one program, which the persistent compilation cache (experiments.common.start)
compiles once for a whole census (docs/decisions/shared-programs.md). A setting of speed and
compilation, never of the mathematics; a user's own value wins, and child processes inherit
it. The library itself changes no JAX setting (docs/decisions/float64-opt-in.md).
"""

import os

HOIST_CONSTANTS = {"JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS": "True",
                   "JAX_EMBEDDED_CONSTANTS_MAX_BYTES": "0"}
for _name, _value in HOIST_CONSTANTS.items():
  os.environ.setdefault(_name, _value)
