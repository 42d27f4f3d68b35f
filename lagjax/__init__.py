"""lagjax: exact training dynamics of shallow transformers on unbounded inputs.

The notation follows docs/theory.md: a language over Σ = {0, …, d-1} with
token law π and length law L, the single-head model f_θ with θ = (α, β), and
three routes to the population risk that must agree.

lagjax computes in float64 but does not switch JAX to it at import: call
jax.config.update("jax_enable_x64", True) once before building anything. Every
builder checks (validation.require_float64) and says so while float64 is off.
"""

from lagjax import (
    closed_form,
    languages,
    lengths,
    metrics,
    models,
    partition,
    plans,
    regimes,
    risk,
    tasks,
    validation,
)
from lagjax.languages import Language, all_of, any_of, occurrence
from lagjax.lengths import fixed, geometric, shifted_poisson
from lagjax.models.direct import forward_counts, forward_tokens, init_params
from lagjax.risk import (
    RiskResult,
    error_rate,
    population_risk,
    risk_fn,
    sampled_risk,
)
from lagjax.train import Run, train, train_kqv

__all__ = [
    "Language", "RiskResult", "Run", "all_of", "any_of", "closed_form", "error_rate", "fixed",
    "forward_counts", "forward_tokens", "geometric", "init_params", "languages", "lengths",
    "metrics", "models", "occurrence", "partition", "plans", "population_risk", "regimes", "risk",
    "risk_fn", "sampled_risk", "shifted_poisson", "tasks", "train", "train_kqv", "validation",
]
