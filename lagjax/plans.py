"""Training plans as optax transformations (docs/theory.md section 5).

A plan is a sequence of phases. Each phase trains one parameter group
("attention" = α and α_cls (W_Q, W_K in the KQV form), "output" = β and
β_cls (W_V, w_o), or "both") with its own
optax optimizer and step size (a number or an optax schedule of the phase's
own step) for a number of steps, on an objective (the population risk, or the
empirical risk of fresh samples).

`Plan.transformation()` is one `optax.GradientTransformation`: the phase
active at the global step is picked with `lax.switch`, its optimizer runs
under `optax.partition` with the other group set to zero, and only the active
phase's state advances. So a whole plan jits once, whatever its phases.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagjax import validation

GROUPS = ("attention", "output", "both")
ATTENTION_KEYS = ("alpha", "alpha_cls", "W_Q", "W_K")  # the rest is the output group


@dataclasses.dataclass(frozen=True)
class Population:
  """Objective: the exact population risk by a named route ("auto", "laplace", "lattice")."""

  route: str = "auto"


@dataclasses.dataclass(frozen=True)
class Empirical:
  """Objective: the empirical risk of `n_samples` fresh strings drawn for this phase.

  batch_size None is full-batch GD on the sample; otherwise minibatch SGD with
  batches drawn uniformly with replacement at every step.
  """

  n_samples: int
  batch_size: int | None = None

  def __post_init__(self):
    validation.check_int("Empirical n_samples (N)", self.n_samples, 1, integral_floats=True)
    if self.batch_size is not None and not 1 <= self.batch_size:
      raise ValueError(f"Empirical batch_size must be None or >= 1; got {self.batch_size!r}.")


@dataclasses.dataclass(frozen=True)
class Phase:
  """One phase of a plan.

  Attributes:
    group: "attention", "output" or "both".
    eta: step size, a non-negative finite number or an optax schedule of the phase step.
    steps: number of steps (>= 1).
    optimizer: optax factory called as optimizer(learning_rate); default optax.sgd.
    objective: Population() (default) or Empirical(n_samples, batch_size).
  """

  group: str
  eta: float | Callable = 1.0
  steps: int = 1
  optimizer: Callable = optax.sgd
  objective: Population | Empirical = Population()

  def __post_init__(self):
    if self.group not in GROUPS:
      raise ValueError(f"Phase group must be one of {GROUPS}; got {self.group!r}.")
    if not callable(self.eta):
      eta = float(self.eta)
      if not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"Phase eta (step size) must be finite and >= 0; got {self.eta!r}.")
      object.__setattr__(self, "eta", eta)
    validation.check_int("Phase steps", self.steps, 1, integral_floats=True)
    object.__setattr__(self, "steps", int(self.steps))
    if not isinstance(self.objective, Population | Empirical):
      raise ValueError(f"Phase objective must be Population() or Empirical(N); got "
                       f"{self.objective!r}.")

  def trains(self, key: str) -> bool:
    """Whether this phase updates parameter `key`."""
    return self.group == "both" or (key in ATTENTION_KEYS) == (self.group == "attention")


class PlanState(NamedTuple):
  count: jax.Array
  inner: tuple


@dataclasses.dataclass(frozen=True)
class Plan:
  """A named sequence of phases."""

  phases: tuple[Phase, ...]
  name: str = "custom"

  def __post_init__(self):
    if not self.phases:
      raise ValueError("a plan needs at least one phase; got phases = ().")
    for phase in self.phases:
      if not isinstance(phase, Phase):
        raise ValueError(f"plan phases must be lj.plans.Phase objects; got {phase!r}.")

  @property
  def total_steps(self) -> int:
    return sum(p.steps for p in self.phases)

  @property
  def boundaries(self) -> np.ndarray:
    """Global step at which each phase starts, and the total (len = #phases + 1)."""
    return np.concatenate([[0], np.cumsum([p.steps for p in self.phases])])

  def phase_index(self, step):
    """Index of the phase active at global step `step` (clipped to the last phase)."""
    index = jnp.searchsorted(jnp.asarray(self.boundaries[1:]), step, side="right")
    return jnp.minimum(index, len(self.phases) - 1)

  def learning_rate(self) -> Callable:
    """The plan's step size as a function of the global step (optax.join_schedules)."""
    schedules = [p.eta if callable(p.eta) else optax.constant_schedule(p.eta)
                 for p in self.phases]
    return optax.join_schedules(schedules, [int(b) for b in self.boundaries[1:-1]])

  def structure(self) -> Plan:
    """This plan with constant step sizes zeroed: equal for plans that differ only in
    their constant step sizes, so one compiled runner serves them all."""
    return Plan(tuple(dataclasses.replace(p, eta=p.eta if callable(p.eta) else 0.0)
                      for p in self.phases), self.name)

  @property
  def etas(self) -> np.ndarray:
    """Constant step sizes of the phases (NaN where a phase has a schedule)."""
    return np.array([np.nan if callable(p.eta) else p.eta for p in self.phases])

  def transformation(self, etas=None) -> optax.GradientTransformation:
    """The whole plan as one optax transformation over {"alpha", "beta", ...} params.

    Args:
      etas: optional (#phases,) array of step sizes replacing the constant ones
        (may be traced, e.g. vmapped over a sweep); phases with a schedule keep it.
    """
    etas = [None] * len(self.phases) if etas is None else [etas[i] for i in range(len(self.phases))]
    phase_txs = [_phase_transformation(p, eta) for p, eta in zip(self.phases, etas)]

    def init_fn(params):
      return PlanState(jnp.zeros([], jnp.int64), tuple(tx.init(params) for tx in phase_txs))

    def update_fn(updates, state, params=None):
      def branch(i):
        def apply(operands):
          grads, inner = operands
          new_updates, new_inner_i = phase_txs[i].update(grads, inner[i], params)
          return new_updates, inner[:i] + (new_inner_i,) + inner[i + 1:]
        return apply

      index = self.phase_index(state.count)
      new_updates, inner = jax.lax.switch(index, [branch(i) for i in range(len(phase_txs))],
                                          (updates, state.inner))
      return new_updates, PlanState(state.count + 1, inner)

    return optax.GradientTransformation(init_fn, update_fn)


def _labels(params):
  return {k: ("attention" if k in ATTENTION_KEYS else "output") for k in params}


def _phase_transformation(phase: Phase, eta=None) -> optax.GradientTransformation:
  """The phase's optimizer on its group; the other group receives zero updates."""
  inner = phase.optimizer(learning_rate=phase.eta if eta is None or callable(phase.eta) else eta)
  frozen = optax.set_to_zero()
  transforms = {"attention": inner if phase.trains("alpha") else frozen,
                "output": inner if phase.trains("beta") else frozen}
  return optax.partition(transforms, _labels)


# ---------------------------------------------------------------------------
# The named plans of docs/theory.md section 5.
# ---------------------------------------------------------------------------


def custom(phases, name: str = "custom") -> Plan:
  return Plan(tuple(phases), name)


def joint(eta, steps: int, **phase_options) -> Plan:
  """Both groups, `steps` steps of size eta."""
  return Plan((Phase("both", eta, steps, **phase_options),), "joint")


def three_phase(eta1, eta2, eta3, steps: int, *, steps1: int = 1, steps2: int = 1,
                objectives=(Population(),) * 3, **phase_options) -> Plan:
  """Output steps1 steps (η1), attention steps2 steps (η2), output `steps` steps (η3)."""
  o1, o2, o3 = objectives
  return Plan((Phase("output", eta1, steps1, objective=o1, **phase_options),
               Phase("attention", eta2, steps2, objective=o2, **phase_options),
               Phase("output", eta3, steps, objective=o3, **phase_options)), "three_phase")


def attention_first(eta2, eta3, steps: int, **phase_options) -> Plan:
  """Attention 1 step (η2), then output `steps` steps (η3)."""
  return Plan((Phase("attention", eta2, 1, **phase_options),
               Phase("output", eta3, steps, **phase_options)), "attention_first")


def output_only(eta, steps: int, **phase_options) -> Plan:
  return Plan((Phase("output", eta, steps, **phase_options),), "output_only")


def attention_only(eta, steps: int, **phase_options) -> Plan:
  return Plan((Phase("attention", eta, steps, **phase_options),), "attention_only")


PLANS = {"joint": joint, "three_phase": three_phase, "attention_first": attention_first,
         "output_only": output_only, "attention_only": attention_only}


def get_plan(name: str) -> Callable[..., Plan]:
  if name not in PLANS:
    raise ValueError(f"unknown plan {name!r}; known plans: {sorted(PLANS)}.")
  return PLANS[name]
