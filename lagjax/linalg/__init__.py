"""Small-matrix calculus in plain array operations, never the batched LAPACK kernels
(docs/theory.md §3d, §5).

`symmetric` holds the Jacobi eigendecomposition of the closed forms and the regime analysis
(`symmetric_eigh`); `resolvent` the geometric resolvent calculus of the transfer route and
the geometric length law (`resolvent_series`, `left_solve`, `diagonally_dominant_inverse`,
`batched_dot`). A leaf package: it imports only JAX.
"""

from lagjax.linalg import resolvent, symmetric
from lagjax.linalg.resolvent import (
    batched_dot,
    diagonally_dominant_inverse,
    left_solve,
    resolvent_series,
)
from lagjax.linalg.symmetric import MAX_SIZE, SWEEPS, symmetric_eigh

__all__ = ["MAX_SIZE", "SWEEPS", "batched_dot", "diagonally_dominant_inverse", "left_solve",
           "resolvent", "resolvent_series", "symmetric", "symmetric_eigh"]
