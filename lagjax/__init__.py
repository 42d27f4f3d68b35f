"""lagjax: exact training dynamics of shallow transformers on unbounded inputs.

The notation follows docs/theory.md: a language over Σ = {0, …, d-1} with
token law π and length law L, the single-head model f_θ with θ = (α, β), and
three routes to the population risk that must agree.

lagjax computes in float64 but does not switch JAX to it at import: call
jax.config.update("jax_enable_x64", True) once before building anything. Every
builder checks (validation.require_float64) and says so while float64 is off.

The subpackages are the layers, each importing only those before it:
data (lengths, languages, token groups) and tasks (sampled tasks) -> models ->
risk (routes to the population risk) -> dynamics (plans, the training loop, the
engines) -> analysis (regimes, scaling, finite samples) -> sweep. `validation`
holds the small input checks every layer shares; `batched` the predicate that keeps a
route's branch a branch under vmap; `linalg` the small symmetric
eigendecompositions of the closed forms, without LAPACK; `xla_flags` switches XLA's
YNNPACK fusions off on CPU, which are slower on lagjax's float64 arrays.
"""

from lagjax import xla_flags  # noqa: I001  (first: XLA reads its flags at the first computation)
from lagjax import analysis, batched, data, dynamics, linalg, models, risk, sweep, tasks, validation
from lagjax.analysis import finite_sample, regimes, scaling
from lagjax.analysis.optimum import optimum
from lagjax.data import languages, lengths, partition
from lagjax.data.languages import Language
from lagjax.data.lengths import fixed, geometric, shifted_poisson
from lagjax.data.occurrence import all_of, any_of, occurrence
from lagjax.data.regular import regular
from lagjax.dynamics import closed_form, metrics, plans, runner, task_train
from lagjax.dynamics.flow import flow
from lagjax.dynamics.train import train, train_kqv
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models.direct import forward_counts, forward_tokens, init_params
from lagjax.risk import (
    RiskResult,
    error_rate,
    gradient_noise,
    population_risk,
    risk_fn,
    sampled_risk,
)

__all__ = [
    "Language", "RiskResult", "Trajectory", "all_of", "analysis", "any_of", "batched",
    "closed_form", "data",
    "dynamics", "error_rate", "finite_sample", "fixed", "flow", "forward_counts", "forward_tokens",
    "geometric", "gradient_noise", "init_params", "languages", "lengths", "linalg", "metrics",
    "models", "occurrence", "optimum", "partition", "plans", "population_risk", "regimes",
    "regular", "risk",
    "risk_fn", "runner", "sampled_risk", "scaling", "shifted_poisson", "sweep", "task_train",
    "tasks", "train", "train_kqv", "validation", "xla_flags",
]
