"""The analysis layer (docs/theory.md sections 8-9): what the dynamics imply.

- `regimes`: exact step-size regimes of the three-phase plan from zero;
- `scaling`: exact tied joint GD to τ_ε, η_max, outcome classes;
- `finite_sample`: the three-phase plan on N samples per phase, N* with bootstrap.
"""

from lagjax.analysis import finite_sample, regimes, scaling

__all__ = ["finite_sample", "regimes", "scaling"]
