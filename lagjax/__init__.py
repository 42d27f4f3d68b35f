"""lagjax: exact training dynamics of shallow transformers on unbounded inputs.

The notation follows docs/theory.md: a language over Σ = {0, …, d-1} with
token law π and length law L, the single-head model f_θ with θ = (α, β), and
three routes to the population risk that must agree.
"""

import jax

jax.config.update("jax_enable_x64", True)

from lagjax import (  # noqa: E402
    closed_form,
    languages,
    lengths,
    metrics,
    model,
    partition,
    plans,
    regimes,
    risk,
    tasks,
    transformer,
)
from lagjax.languages import Language, all_of, any_of, occurrence  # noqa: E402
from lagjax.lengths import fixed, geometric, shifted_poisson  # noqa: E402
from lagjax.model import forward_counts, forward_tokens, init_params  # noqa: E402
from lagjax.risk import (  # noqa: E402
    RiskResult,
    error_rate,
    population_risk,
    risk_fn,
    sampled_risk,
)
from lagjax.train import Run, train, train_kqv  # noqa: E402

__all__ = [
    "Language", "RiskResult", "Run", "all_of", "any_of", "closed_form", "error_rate", "fixed",
    "forward_counts", "forward_tokens", "geometric", "init_params", "languages", "lengths",
    "metrics", "model", "occurrence", "partition", "plans", "population_risk", "regimes", "risk",
    "risk_fn", "sampled_risk", "shifted_poisson", "tasks", "train", "train_kqv", "transformer",
]
