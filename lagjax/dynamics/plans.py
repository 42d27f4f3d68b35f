"""Training plans (docs/theory.md section 5): phases, plans as data, the plan registry.

A plan is a sequence of phases. Each phase trains one parameter group
("attention", "output" or "both"; a model declares which of its parameters
form each group, lagjax.models) with its own optax optimizer and step size (a
number or an optax schedule of the phase's own step) for a number of steps, on
an objective (the population risk, or the empirical risk of fresh samples).

Plans as data. For compilation a plan splits into a static part, its slots
(`Plan.slots`: optimizer, schedule and objective of each phase), and arrays
(`Plan.data`: each phase's length, step size and trained groups). Plans that
share their slots run through one compiled program whatever their step sizes,
phase lengths and groups: padding with zero-length slots lets joint, three-phase,
attention-first, output-only and attention-only plans share one compilation.

`transformation(slots, data, labels)` is the plan as one
`optax.GradientTransformation`: the slot active at the step is picked with
`lax.switch`, its optimizer runs on the gradient masked to the slot's groups,
and the update is scaled by the slot's step size. Optimizers are applied with
learning rate 1 and scaled afterwards, which equals optax's own learning-rate
scaling for every optimizer built as chain(..., scale_by_learning_rate(η)).

`PLANS` maps each named plan to its `PlanSpec`: the group of each phase and the
step-size name feeding it; `PlanSpec.build` builds any named plan uniformly. Consumers
read the registry (`plan_names`, `step_size_names`, `PlanSpec.step_sizes`,
`PlanSpec.step_size_groups`) instead of restating it.

(Longer than most modules: a plan's phases, its data form, its optax
transformation and the registry of named plans are one concept, read together.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagjax import validation

# What a phase can train (Phase.group): not a model's GROUPS, which map parameter names to
# the groups "attention" and "output".
TRAINED_GROUPS = ("attention", "output", "both")
_TRAINS = {"attention": (True, False), "output": (False, True), "both": (True, True)}


@dataclasses.dataclass(frozen=True)
class Population:
  """Objective: the exact population risk R(θ) of §3, by a named route.

  Attributes:
    route: "auto" or a route of lagjax.risk.ROUTES: "laplace" (§3a), "lattice" (§3b),
      "transfer" (§3d), ...

  Example:
    >>> lj.plans.Population()
    Population(route='auto')
    >>> lj.plans.Phase("output", 0.5, 3, objective=lj.plans.Population("laplace")).objective
    Population(route='laplace')
  """

  route: str = "auto"


@dataclasses.dataclass(frozen=True)
class Empirical:
  """Objective: the empirical risk of N = `n_samples` fresh strings drawn for this phase (§5).

  batch_size None is full-batch GD on the sample; otherwise minibatch SGD with
  batches drawn uniformly with replacement at every step.

  Attributes:
    n_samples: N, the strings drawn for the phase (>= 1).
    batch_size: None (full batch) or the minibatch size (>= 1).

  Example:
    >>> objective = lj.plans.Empirical(100, batch_size=10)
    >>> objective.n_samples, objective.batch_size
    (100, 10)
    >>> lj.plans.joint(0.5, 20, objective=objective).phases[0].objective
    Empirical(n_samples=100, batch_size=10)
  """

  n_samples: int
  batch_size: int | None = None

  def __post_init__(self):
    object.__setattr__(self, "n_samples", validation.check_int(
        "Empirical n_samples (N)", self.n_samples, 1, integral_floats=True))
    object.__setattr__(self, "batch_size", validation.check_int(
        "Empirical batch_size", self.batch_size, 1, optional=True, integral_floats=True))


@dataclasses.dataclass(frozen=True)
class Phase:
  """One phase of a plan (§5): `steps` steps of size η on one parameter group.

  Attributes:
    group: "attention" (α), "output" (β) or "both".
    eta: step size η, a non-negative finite number or an optax schedule of the phase step.
    steps: number of steps (>= 1).
    optimizer: optax factory called as optimizer(learning_rate); default optax.sgd.
    objective: Population() (default) or Empirical(n_samples, batch_size).

  Example:
    >>> phase = lj.plans.Phase("output", eta=0.5, steps=3)
    >>> phase.trains("attention"), phase.trains("output")
    (False, True)
    >>> phase.eta, phase.steps, phase.objective
    (0.5, 3, Population(route='auto'))
  """

  group: str
  eta: float | Callable = 1.0
  steps: int = 1
  optimizer: Callable = optax.sgd
  objective: Population | Empirical = Population()

  def __post_init__(self):
    if self.group not in TRAINED_GROUPS:
      raise ValueError(f"Phase group must be one of {TRAINED_GROUPS}; got {self.group!r}.")
    if not callable(self.eta):
      # The shared check refuses strings and bools, which float() would take ('1.0' -> 1.0).
      eta = validation.check_real("Phase eta (step size)", self.eta, minimum=0.0)
      object.__setattr__(self, "eta", eta)
    validation.check_int("Phase steps", self.steps, 1, integral_floats=True)
    object.__setattr__(self, "steps", int(self.steps))
    if not isinstance(self.objective, Population | Empirical):
      raise ValueError(f"Phase objective must be Population() or Empirical(N); got "
                       f"{self.objective!r}.")

  def trains(self, group: str) -> bool:
    """Whether this phase updates the parameter group `group` ("attention" or "output")."""
    return _TRAINS[self.group][("attention", "output").index(group)]


class PlanState(NamedTuple):
  """The optimizer state of a plan's transformation (§5): the global step and each slot's state.

  Each slot keeps its own optimizer state, so schedules and Adam moments are phase-local.

  Attributes:
    count: the global step t, a scalar int64 (the number of updates so far).
    inner: one optax state per slot.

  Example:
    >>> plan = lj.plans.three_phase(1.0, 1.0, 1.0, 2)
    >>> labels = lambda p: lj.models.group_labels(lj.models.direct.PARAM_GROUPS, p)
    >>> state = plan.transformation(labels).init({"alpha": jnp.zeros(2), "beta": jnp.zeros(2)})
    >>> int(state.count), len(state.inner)
    (0, 3)
  """

  count: jax.Array
  inner: tuple


class PlanData(NamedTuple):
  """A plan's arrays, one entry per slot (traceable and vmappable; "plans as data", §5).

  Attributes:
    steps: (S,) the number of steps L_i of each slot (0 for a padding slot).
    etas: (S,) step size of each slot (ignored where the slot has a schedule).
    trains: (S, 2) whether each slot trains the attention and the output group.

  Example:
    >>> data = lj.plans.three_phase(1.0, 2.0, 3.0, 5).data(num_slots=4)
    >>> data.steps.tolist(), data.etas.tolist()
    ([1, 1, 5, 0], [1.0, 2.0, 3.0, 0.0])
    >>> data.trains.tolist()
    [[False, True], [True, False], [False, True], [False, False]]
  """

  steps: jax.Array
  etas: jax.Array
  trains: jax.Array


@dataclasses.dataclass(frozen=True)
class Slot:
  """The static part of a phase (§5): what changes the compiled program.

  Attributes:
    optimizer: the phase's optax factory.
    schedule: the phase's optax schedule, or None for a constant step size (in PlanData).
    objective: Population() or Empirical(n_samples, batch_size).

  Example:
    >>> slot, = lj.plans.joint(0.5, 3).slots()
    >>> slot.schedule is None, slot.objective
    (True, Population(route='auto'))
    >>> # Step sizes and lengths are data, so these two plans share one compilation.
    >>> lj.plans.joint(0.5, 3).slots() == lj.plans.joint(2.0, 10).slots()
    True
  """

  optimizer: Callable = optax.sgd
  schedule: Callable | None = None
  objective: Population | Empirical = Population()


def phase_index(step, slot_steps):
  """Index of the slot active at global `step`: phase(t) = #{i : t ≥ L_1 + … + L_i} (§5).

  Clipped to the last slot. Zero-length slots are never active: searchsorted passes over
  equal boundaries.

  Args:
    step: the global step t (an int, or an int array of steps, possibly traced).
    slot_steps: (S,) the number of steps L_i of each slot (PlanData.steps).

  Returns:
    The index of the active slot, an int array of the shape of `step`.

  Example:
    >>> # Slot 1 has length 0 and is skipped; steps past the total stay in the last slot.
    >>> lj.plans.phase_index(jnp.arange(6), [1, 0, 3]).tolist()
    [0, 2, 2, 2, 2, 2]
  """
  ends = jnp.cumsum(jnp.asarray(slot_steps))
  return jnp.minimum(jnp.searchsorted(ends, step, side="right"), ends.shape[0] - 1)


def _check_phases(phases, kind: type, what: str) -> None:
  """One line for an empty plan or a phase of the wrong kind (a Plan's or a FlowPlan's)."""
  if not phases:
    raise ValueError(f"a {what} needs at least one phase; got phases = ().")
  for phase in phases:
    if not isinstance(phase, kind):
      raise ValueError(f"{what} phases must be lj.plans.{kind.__name__} objects; "
                       f"got {phase!r}.")


@dataclasses.dataclass(frozen=True)
class Plan:
  """A named sequence of phases (§5).

  Attributes:
    phases: the phases, run in order (at least one).
    name: the plan's name ("custom" unless built from the registry).

  Example:
    >>> plan = lj.plans.Plan((lj.plans.Phase("output", 0.5, 2),
    ...                       lj.plans.Phase("attention", 1.0, 3)), "mine")
    >>> plan.total_steps, plan.boundaries.tolist()
    (5, [0, 2, 5])
    >>> int(plan.phase_index(2)), plan.etas.tolist()
    (1, [0.5, 1.0])
  """

  phases: tuple[Phase, ...]
  name: str = "custom"

  def __post_init__(self):
    _check_phases(self.phases, Phase, "plan")

  @property
  def total_steps(self) -> int:
    """The plan's total T = L_1 + … + L_n."""
    return sum(p.steps for p in self.phases)

  @property
  def boundaries(self) -> np.ndarray:
    """Global step at which each phase starts, and the total (len = #phases + 1)."""
    return np.concatenate([[0], np.cumsum([p.steps for p in self.phases])])

  def phase_index(self, step):
    """Index of the phase active at global step `step` (clipped to the last phase)."""
    return phase_index(step, np.array([p.steps for p in self.phases]))

  def learning_rate(self) -> Callable:
    """The plan's step size as a function of the global step (optax.join_schedules)."""
    schedules = [p.eta if callable(p.eta) else optax.constant_schedule(p.eta)
                 for p in self.phases]
    return optax.join_schedules(schedules, [int(b) for b in self.boundaries[1:-1]])

  @property
  def etas(self) -> np.ndarray:
    """Constant step sizes of the phases (NaN where a phase has a schedule)."""
    return np.array([np.nan if callable(p.eta) else p.eta for p in self.phases])

  def slots(self, num_slots: int | None = None) -> tuple[Slot, ...]:
    """The static slots, padded to num_slots with copies of the last phase's slot."""
    slots = tuple(Slot(p.optimizer, p.eta if callable(p.eta) else None, p.objective)
                  for p in self.phases)
    return slots + (slots[-1],) * (_num_slots(self, num_slots) - len(slots))

  def data(self, num_slots: int | None = None, etas=None) -> PlanData:
    """The plan's arrays, padded to num_slots with zero-length slots.

    Args:
      num_slots: number of slots (default: the number of phases).
      etas: optional (#phases,) step sizes replacing the constant ones (may be traced).

    Returns:
      PlanData with S = num_slots entries.
    """
    padding = _num_slots(self, num_slots) - len(self.phases)
    etas = np.nan_to_num(self.etas) if etas is None else etas
    return PlanData(
        steps=jnp.asarray([p.steps for p in self.phases] + [0] * padding),
        etas=jnp.concatenate([jnp.asarray(etas, jnp.float64), jnp.zeros(padding)]),
        trains=jnp.asarray([_TRAINS[p.group] for p in self.phases] + [(False, False)] * padding))

  def transformation(self, labels: Callable, etas=None) -> optax.GradientTransformation:
    """The whole plan as one optax transformation.

    Args:
      labels: params -> {name: "attention" | "output"} (a model's declared groups, e.g.
        functools.partial(lagjax.models.group_labels, lagjax.models.direct.PARAM_GROUPS)).
      etas: optional (#phases,) step sizes replacing the constant ones (may be traced).

    Returns:
      The optax.GradientTransformation of `transformation` for this plan.
    """
    return transformation(self.slots(), self.data(etas=etas), labels)

  def flow_form(self) -> FlowPlan:
    """The plan read as gradient flow (§5c): a phase of k steps of size η becomes a flow
    phase of duration k·η at rate 1 on its groups (`flow_form`).

    Returns:
      The FlowPlan, with the same name.
    """
    return flow_form(self)


def _num_slots(plan: Plan, num_slots: int | None) -> int:
  if num_slots is None:
    return len(plan.phases)
  if num_slots < len(plan.phases):
    raise ValueError(f"num_slots = {num_slots} is fewer than the plan's {len(plan.phases)} "
                     "phases.")
  return num_slots


def transformation(slots: Sequence[Slot], data: PlanData,
                   labels: Callable) -> optax.GradientTransformation:
  """A plan given as static slots and (possibly traced) arrays, as one optax transformation (§5).

  At global step t the active slot i = phase(t) is picked with `lax.switch`; its optimizer
  (built with learning rate 1) runs on the gradient masked to the slot's groups, and the
  direction is scaled by η_i (or the slot's schedule at the phase's own step) and masked
  again. For optimizers built as chain(..., scale_by_learning_rate(η)) this equals the
  optimizer run with learning rate η.

  Args:
    slots: the static slots (Plan.slots(num_slots)).
    data: the plan's arrays (Plan.data(num_slots)), with one entry per slot.
    labels: params -> {name: "attention" | "output"} (a model's declared groups).

  Returns:
    An optax.GradientTransformation whose state is a PlanState.

  Example:
    >>> plan = lj.plans.three_phase(0.5, 2.0, 0.5, 1)
    >>> labels = lambda p: lj.models.group_labels(lj.models.direct.PARAM_GROUPS, p)
    >>> tx = lj.plans.transformation(plan.slots(), plan.data(), labels)
    >>> grads = {"alpha": jnp.ones(2), "beta": jnp.ones(2)}
    >>> state = tx.init(grads)
    >>> # Step 0 is the output phase (η1 = 0.5), step 1 the attention phase (η2 = 2).
    >>> for _ in range(2):
    ...   updates, state = tx.update(grads, state)
    ...   print(updates["alpha"].tolist(), updates["beta"].tolist())
    [0.0, 0.0] [-0.5, -0.5]
    [-2.0, -2.0] [0.0, 0.0]
  """
  directions = [slot.optimizer(learning_rate=1.0) for slot in slots]
  starts = jnp.concatenate([jnp.zeros(1, jnp.asarray(data.steps).dtype),
                            jnp.cumsum(data.steps)])

  def init_fn(params):
    return PlanState(jnp.zeros([], jnp.int64), tuple(d.init(params) for d in directions))

  def update_fn(updates, state, params=None):
    index = phase_index(state.count, data.steps)
    local_step = state.count - starts[index]
    group = labels(updates)

    def branch(i):
      def apply(operands):
        grads, inner = operands
        trained = {name: data.trains[i, 0 if group[name] == "attention" else 1]
                   for name in grads}
        masked = {name: jnp.where(trained[name], value, 0.0) for name, value in grads.items()}
        direction, new_inner = directions[i].update(masked, inner[i], params)
        rate = data.etas[i] if slots[i].schedule is None else slots[i].schedule(local_step)
        scaled = {name: jnp.where(trained[name], rate * value, 0.0)
                  for name, value in direction.items()}
        return scaled, inner[:i] + (new_inner,) + inner[i + 1:]
      return apply

    new_updates, inner = jax.lax.switch(index, [branch(i) for i in range(len(slots))],
                                        (updates, state.inner))
    return new_updates, PlanState(state.count + 1, inner)

  return optax.GradientTransformation(init_fn, update_fn)


# ---------------------------------------------------------------------------
# The registry of named plans (docs/theory.md section 5).
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanSpec:
  """A named plan of the registry (§5): the group of each phase and the step-size name feeding it.

  Every phase but the last lasts `phase_steps` (default one step each); the last
  lasts `steps`. Calling the spec with the step sizes then `steps` builds the plan.

  Attributes:
    name: the registry name (a key of PLANS).
    groups: the group of each phase.
    eta_names: the step-size name of each phase ("eta", "eta1", …).

  Example:
    >>> spec = lj.plans.get_plan("three_phase")
    >>> spec.step_sizes
    ('eta1', 'eta2', 'eta3')
    >>> plan = spec(50.0, 2500.0, 1.0, 300)
    >>> [(p.group, p.eta, p.steps) for p in plan.phases]
    [('output', 50.0, 1), ('attention', 2500.0, 1), ('output', 1.0, 300)]
  """

  name: str
  groups: tuple[str, ...]
  eta_names: tuple[str, ...]

  @property
  def step_sizes(self) -> tuple[str, ...]:
    """The plan's distinct step-size names, in order of first use."""
    return tuple(dict.fromkeys(self.eta_names))

  def step_size_groups(self) -> dict[str, str]:
    """{step-size name: the group of the phases it feeds} ("attention", "output" or "both").

    Returns:
      One entry per name of `step_sizes`, in that order.

    Raises:
      ValueError: if one step-size name feeds phases of different groups.

    Example:
      >>> lj.plans.get_plan("three_phase").step_size_groups()
      {'eta1': 'output', 'eta2': 'attention', 'eta3': 'output'}
    """
    groups = {}
    for name, group in zip(self.eta_names, self.groups):
      if groups.setdefault(name, group) != group:
        raise ValueError(f"plan {self.name!r}: step size {name!r} feeds the groups "
                         f"{groups[name]!r} and {group!r}.")
    return groups

  def build(self, etas: Mapping[str, float] | Sequence[float], steps: int, *,
            phase_steps: Sequence[int] | None = None, objectives=None,
            **phase_options) -> Plan:
    """The plan with these step sizes (by name, or in `step_sizes` order) and phase steps.

    Args:
      etas: step sizes, a mapping over `step_sizes` or a sequence in that order.
      steps: the steps of the last phase.
      phase_steps: the steps of the phases before the last (default 1 each).
      objectives: optional objective of each phase (else phase_options' or Population()).
      **phase_options: Phase fields shared by every phase (optimizer, objective).

    Returns:
      The Plan, named after the spec.
    """
    if not isinstance(etas, Mapping):
      etas = list(etas)
      if len(etas) != len(self.step_sizes):
        raise ValueError(f"plan {self.name!r} takes the step sizes {self.step_sizes}; got "
                         f"{len(etas)} values.")
      etas = dict(zip(self.step_sizes, etas))
    missing = [name for name in self.step_sizes if name not in etas]
    if missing:
      raise ValueError(f"plan {self.name!r} needs the step sizes {self.step_sizes}; missing "
                       f"{missing}.")
    earlier = (1,) * (len(self.groups) - 1) if phase_steps is None else tuple(phase_steps)
    if len(earlier) != len(self.groups) - 1:
      raise ValueError(f"plan {self.name!r} takes phase_steps for its first "
                       f"{len(self.groups) - 1} phases; got {phase_steps!r}.")
    steps_per_phase = (*earlier, steps)
    if objectives is not None:
      objectives = tuple(objectives)
      if len(objectives) != len(self.groups):
        raise ValueError(f"plan {self.name!r} takes objectives, one for each of its "
                         f"{len(self.groups)} phases; got {len(objectives)}.")
    phases = []
    for i, (group, eta_name) in enumerate(zip(self.groups, self.eta_names)):
      options = dict(phase_options)
      if objectives is not None:
        options["objective"] = objectives[i]
      phases.append(Phase(group, etas[eta_name], steps_per_phase[i], **options))
    return Plan(tuple(phases), self.name)

  def __call__(self, *etas_then_steps, **options) -> Plan:
    *etas, steps = etas_then_steps
    return self.build(etas, steps, **options)


PLANS: dict[str, PlanSpec] = {spec.name: spec for spec in (
    PlanSpec("joint", ("both",), ("eta",)),
    PlanSpec("three_phase", ("output", "attention", "output"), ("eta1", "eta2", "eta3")),
    PlanSpec("attention_first", ("attention", "output"), ("eta2", "eta3")),
    PlanSpec("output_only", ("output",), ("eta",)),
    PlanSpec("attention_only", ("attention",), ("eta",)),
)}


def plan_names() -> tuple[str, ...]:
  """The names of the registered plans (keys of PLANS, in registry order; §5).

  Returns:
    The names, a tuple.

  Example:
    >>> lj.plans.plan_names()
    ('joint', 'three_phase', 'attention_first', 'output_only', 'attention_only')
  """
  return tuple(PLANS)


def step_size_names() -> tuple[str, ...]:
  """Every step-size name of the registered plans (§5): the per-phase names ("eta1", …)
  in order, then the shared "eta".

  Returns:
    The distinct names of every PlanSpec's `step_sizes`, a tuple.

  Example:
    >>> lj.plans.step_size_names()
    ('eta1', 'eta2', 'eta3', 'eta')
  """
  names = {name for spec in PLANS.values() for name in spec.step_sizes}
  return tuple(sorted(names, key=lambda name: (name == "eta", name)))


def get_plan(name: str) -> PlanSpec:
  """The registered plan `name` (the registry of §5); an unknown name lists the known ones.

  Args:
    name: "joint", "three_phase", "attention_first", "output_only" or "attention_only".

  Returns:
    Its PlanSpec.

  Raises:
    ValueError: for an unknown name.

  Example:
    >>> lj.plans.get_plan("joint")
    PlanSpec(name='joint', groups=('both',), eta_names=('eta',))
    >>> lj.plans.get_plan("attention_first").build({"eta2": 10.0, "eta3": 1.0}, 5).total_steps
    6
  """
  validation.check_choice("plan name", name, tuple(PLANS))
  return PLANS[name]


def custom(phases, name: str = "custom") -> Plan:
  """A plan from any sequence of phases (§5), e.g. with its own optimizers or objectives.

  Args:
    phases: the Phase objects, in order.
    name: the plan's name.

  Returns:
    Plan(tuple(phases), name).

  Example:
    >>> plan = lj.plans.custom([lj.plans.Phase("both", 0.1, 4), lj.plans.Phase("output", 1.0, 2)])
    >>> plan.name, plan.total_steps
    ('custom', 6)
  """
  return Plan(tuple(phases), name)


def joint(eta, steps: int, **phase_options) -> Plan:
  """joint(η, T): both parameter groups, T steps of size η (§5).

  Args:
    eta: the step size η.
    steps: T.
    **phase_options: Phase fields (optimizer, objective).

  Returns:
    The one-phase Plan "joint".

  Example:
    >>> plan = lj.plans.joint(0.5, 10)
    >>> [(p.group, p.eta, p.steps) for p in plan.phases]
    [('both', 0.5, 10)]
  """
  return PLANS["joint"].build([eta], steps, **phase_options)


def three_phase(eta1, eta2, eta3, steps: int, *, steps1: int = 1, steps2: int = 1,
                **options) -> Plan:
  """three_phase(η1, η2, η3, T): output, then attention, then T output steps (§5).

  Output steps1 steps with η1, attention steps2 steps with η2, output T steps with η3.

  Args:
    eta1: η1, the step size of the first output phase.
    eta2: η2, the step size of the attention phase.
    eta3: η3, the step size of the last output phase.
    steps: T, the length of the last output phase.
    steps1: the length of the first output phase (default 1).
    steps2: the length of the attention phase (default 1).
    **options: PlanSpec.build options (objectives) and Phase fields (optimizer, objective).

  Returns:
    The Plan "three_phase", of steps1 + steps2 + T steps.

  Example:
    >>> plan = lj.plans.three_phase(50.0, 2500.0, 1.0, 300, steps2=2)
    >>> [(p.group, p.steps) for p in plan.phases], plan.total_steps
    ([('output', 1), ('attention', 2), ('output', 300)], 303)
  """
  return PLANS["three_phase"].build([eta1, eta2, eta3], steps, phase_steps=(steps1, steps2),
                                    **options)


def attention_first(eta2, eta3, steps: int, **options) -> Plan:
  """attention_first(η2, η3, T): attention 1 step (η2), then output T steps (η3) (§5).

  phase_steps=(k,) makes the attention phase k steps long. From θ0 = 0 it reduces to
  output_only shifted by one step: the attention gradient at β = 0 is exactly 0 (§4).

  Args:
    eta2: the step size of the attention phase.
    eta3: the step size of the output phase.
    steps: T, the length of the output phase.
    **options: PlanSpec.build options (phase_steps, objectives) and Phase fields.

  Returns:
    The Plan "attention_first".

  Example:
    >>> plan = lj.plans.attention_first(10.0, 1.0, 5, phase_steps=(3,))
    >>> [(p.group, p.eta, p.steps) for p in plan.phases]
    [('attention', 10.0, 3), ('output', 1.0, 5)]
  """
  return PLANS["attention_first"].build([eta2, eta3], steps, **options)


def output_only(eta, steps: int, **phase_options) -> Plan:
  """output_only(η, T): the output group β alone, T steps of size η (§5).

  From θ0 = 0 it cannot beat the floor of §4: α stays 0.

  Args:
    eta: the step size η.
    steps: T.
    **phase_options: Phase fields (optimizer, objective).

  Returns:
    The one-phase Plan "output_only".

  Example:
    >>> plan = lj.plans.output_only(1.0, 10)
    >>> plan.phases[0].trains("output"), plan.phases[0].trains("attention")
    (True, False)
  """
  return PLANS["output_only"].build([eta], steps, **phase_options)


def attention_only(eta, steps: int, **phase_options) -> Plan:
  """attention_only(η, T), the counterpart of `output_only`: the attention group α alone,
  T steps of size η (§5). From θ0 = 0 it never moves: with β = 0 the attention gradient
  is exactly 0 (§4).

  Args:
    eta: the step size η.
    steps: T.
    **phase_options: Phase fields (optimizer, objective).

  Returns:
    The one-phase Plan "attention_only".

  Example:
    >>> [(phase.group, phase.eta, phase.steps) for phase in lj.plans.attention_only(1.0, 10).phases]
    [('attention', 1.0, 10)]
  """
  return PLANS["attention_only"].build([eta], steps, **phase_options)


# ---------------------------------------------------------------------------
# Flow forms (docs/theory.md section 5): plans in continuous time, for lj.flow.
# ---------------------------------------------------------------------------

# The optimizers whose constant-step phases are the Euler discretisation of gradient flow.
_FLOW_OPTIMIZERS = (optax.sgd,)


@dataclasses.dataclass(frozen=True)
class FlowPhase:
  """One phase of a plan in continuous time (§5): dθ_g/dt = -r_g ∇_g R for `duration`.

  The rate r_g is `rate` on the trained groups and 0 on the others. A GD phase of k steps
  of size η reads as duration k·η at rate 1, with `step_size` η kept so that the flow's
  records carry the GD step t/η beside the time t (`flow_form`).

  Attributes:
    group: "attention" (α), "output" (β) or "both".
    duration: the phase's length in time units, a finite real > 0.
    rate: r, the rate of the trained groups, a finite real > 0.
    objective: Population() (the flow runs exact population risks only).
    step_size: η of the GD phase it reads (its steps are time/η), or None (steps = time).

  Example:
    >>> phase = lj.plans.FlowPhase("output", duration=10.0, rate=0.5)
    >>> phase.rates, phase.duration
    ((0.0, 0.5), 10.0)
    >>> lj.plans.FlowPhase("both", 0.0)
    Traceback (most recent call last):
    ...
    ValueError: FlowPhase duration must be a finite real > 0; got 0.0.
  """

  group: str
  duration: float
  rate: float = 1.0
  objective: Population = Population()
  step_size: float | None = None

  def __post_init__(self):
    if self.group not in TRAINED_GROUPS:
      raise ValueError(f"FlowPhase group must be one of {TRAINED_GROUPS}; got {self.group!r}.")
    object.__setattr__(self, "duration", _positive("FlowPhase duration", self.duration))
    object.__setattr__(self, "rate", _positive("FlowPhase rate", self.rate))
    if self.step_size is not None:
      object.__setattr__(self, "step_size", _positive("FlowPhase step_size", self.step_size))
    if not isinstance(self.objective, Population):
      raise ValueError(f"FlowPhase objective must be Population(...) (the flow follows the "
                       f"exact population risk); got {self.objective!r}.")

  @property
  def rates(self) -> tuple[float, float]:
    """(r_attention, r_output): `rate` on the trained groups, 0 on the others."""
    attention, output = _TRAINS[self.group]
    return (self.rate if attention else 0.0, self.rate if output else 0.0)


def _positive(name: str, value) -> float:
  """A finite real > 0, refused in one line naming the field."""
  try:
    number = float(value)
  except (TypeError, ValueError):
    number = float("nan")
  if isinstance(value, bool | str) or not (np.isfinite(number) and number > 0):
    raise ValueError(f"{name} must be a finite real > 0; got {value!r}.")
  return number


class FlowData(NamedTuple):
  """A flow plan's arrays, one entry per phase (traceable: lj.flow does not recompile for
  new durations or rates; §5).

  Attributes:
    durations: (P,) each phase's duration.
    rates: (P, 2) each phase's rate on the attention and the output group.
    step_sizes: (P,) η of each phase (1 for a phase with no step size: steps = time).

  Example:
    >>> data = lj.plans.flow_plan("three_phase", (50.0, 2500.0, 300.0)).data()
    >>> data.durations.tolist(), data.rates.tolist()
    ([50.0, 2500.0, 300.0], [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
  """

  durations: jax.Array
  rates: jax.Array
  step_sizes: jax.Array


@dataclasses.dataclass(frozen=True)
class FlowPlan:
  """A plan in continuous time (§5): FlowPhases run in order, each for its duration.

  Attributes:
    phases: the FlowPhases (at least one).
    name: the plan's name ("custom" unless built from the registry or a named GD plan).

  Example:
    >>> plan = lj.plans.joint(1.0, 300).flow_form()  # flows to t = 300
    >>> plan.total_duration, plan.boundaries.tolist()
    (300.0, [0.0, 300.0])
    >>> plan = lj.plans.three_phase(50.0, 2500.0, 1.0, 300).flow_form()
    >>> plan.boundaries.tolist(), plan.phases[1].rates
    ([0.0, 50.0, 2550.0, 2850.0], (1.0, 0.0))
  """

  phases: tuple[FlowPhase, ...]
  name: str = "custom"

  def __post_init__(self):
    _check_phases(self.phases, FlowPhase, "flow plan")

  @property
  def total_duration(self) -> float:
    """The plan's total time D_1 + … + D_P."""
    return float(sum(p.duration for p in self.phases))

  @property
  def boundaries(self) -> np.ndarray:
    """The time at which each phase starts, and the total (len = #phases + 1)."""
    return np.concatenate([[0.0], np.cumsum([p.duration for p in self.phases])])

  @property
  def objective(self) -> Population:
    """The one population objective of every phase (lj.flow follows one route)."""
    return self.phases[0].objective

  def data(self) -> FlowData:
    """The plan's arrays (FlowData), traced by lj.flow."""
    return FlowData(
        durations=jnp.asarray([p.duration for p in self.phases], jnp.float64),
        rates=jnp.asarray([p.rates for p in self.phases], jnp.float64),
        step_sizes=jnp.asarray([1.0 if p.step_size is None else p.step_size
                                for p in self.phases], jnp.float64))

  def flow_form(self) -> FlowPlan:
    """The plan itself (already in continuous time)."""
    return self


def flow_problem(plan: Plan | FlowPlan) -> str | None:
  """What keeps `plan` from having a flow form (§5), in one line, or None if it has one.

  GD at constant step size on the population risk is the Euler discretisation of the flow;
  schedules, other optimizers (momentum, Adam) and empirical objectives have no flow form
  here, and neither has a phase of zero duration (η = 0).

  Args:
    plan: a Plan or a FlowPlan.

  Returns:
    None, or the reason.

  Example:
    >>> lj.plans.flow_problem(lj.plans.joint(0.0, 10))
    'plan phase 0 has duration k·η = 0 (eta = 0.0): a flow phase needs a duration > 0'
    >>> lj.plans.flow_problem(lj.plans.joint(0.5, 10)) is None
    True
  """
  if isinstance(plan, FlowPlan):
    routes = {phase.objective for phase in plan.phases}
    return (None if len(routes) == 1 else
            f"the flow follows one population route; the phases ask for {sorted(routes, key=str)}")
  if not isinstance(plan, Plan):
    return (f"plan must be a lj.plans.Plan or lj.plans.FlowPlan; got {type(plan).__name__}")
  for i, phase in enumerate(plan.phases):
    if callable(phase.eta):
      return f"plan phase {i} has a step-size schedule: a flow phase has one constant rate"
    if phase.optimizer not in _FLOW_OPTIMIZERS:
      return (f"plan phase {i} uses the optimizer {getattr(phase.optimizer, '__name__', '?')}: "
              "only plain GD (optax.sgd) has a gradient-flow form")
    if not isinstance(phase.objective, Population):
      return (f"plan phase {i} has the objective {phase.objective!r}: the flow follows the "
              "exact population risk only")
    if phase.eta * phase.steps <= 0:
      return (f"plan phase {i} has duration k·η = 0 (eta = {phase.eta}): a flow phase needs a "
              "duration > 0")
  if len({phase.objective for phase in plan.phases}) > 1:
    return "the flow follows one population route; the phases ask for several"
  return None


def flow_form(plan: Plan | FlowPlan) -> FlowPlan:
  """The flow form of a plan (§5): a phase of k steps of size η (trained groups g) becomes
  a flow phase of duration k·η with dθ_g/dt = -∇_g R, so GD at η for t/η steps follows
  the flow at time t with an O(η) error (explicit Euler).

  Args:
    plan: a Plan (constant step sizes, optax.sgd, population objectives) or a FlowPlan.

  Returns:
    The FlowPlan, with the plan's name.

  Raises:
    ValueError: one line naming what has no flow form (`flow_problem`).

  Example:
    >>> plan = lj.plans.flow_form(lj.plans.attention_first(10.0, 1.0, 5))
    >>> [(p.group, p.duration, p.step_size) for p in plan.phases]
    [('attention', 10.0, 10.0), ('output', 5.0, 1.0)]
    >>> lj.plans.flow_form(lj.plans.joint(0.0, 3))
    Traceback (most recent call last):
    ...
    ValueError: plan phase 0 has duration k·η = 0 (eta = 0.0): a flow phase needs a duration > 0.
  """
  problem = flow_problem(plan)
  if problem is not None:
    raise ValueError(problem + ".")
  if isinstance(plan, FlowPlan):
    return plan
  return FlowPlan(tuple(FlowPhase(p.group, p.eta * p.steps, 1.0, p.objective, step_size=p.eta)
                        for p in plan.phases), plan.name)


def flow_plan(name: str, durations: Sequence[float], rates: Sequence[float] | None = None, *,
              objective: Population = Population()) -> FlowPlan:
  """A named plan of the registry in continuous time (§5): one duration (and rate) per phase.

  Args:
    name: a key of PLANS ("joint", "three_phase", "attention_first", "output_only",
      "attention_only").
    durations: the duration of each phase, in order.
    rates: the rate of each phase (default 1 each).
    objective: the population objective of every phase.

  Returns:
    The FlowPlan named `name`.

  Raises:
    ValueError: for an unknown name, a wrong number of durations or rates, or a duration
      or rate that is not a finite real > 0.

  Example:
    >>> plan = lj.plans.flow_plan("three_phase", (50.0, 2500.0, 300.0))
    >>> [(p.group, p.duration) for p in plan.phases]
    [('output', 50.0), ('attention', 2500.0), ('output', 300.0)]
    >>> lj.plans.flow_plan("joint", (1e6,), rates=(0.5,)).phases[0].rates
    (0.5, 0.5)
  """
  spec = get_plan(name)
  durations = tuple(durations)
  rates = (1.0,) * len(spec.groups) if rates is None else tuple(rates)
  for field, values in (("durations", durations), ("rates", rates)):
    if len(values) != len(spec.groups):
      raise ValueError(f"flow plan {name!r} takes {field}, one for each of its "
                       f"{len(spec.groups)} phases; got {len(values)}.")
  return FlowPlan(tuple(FlowPhase(group, duration, rate, objective)
                        for group, duration, rate in zip(spec.groups, durations, rates)), name)
