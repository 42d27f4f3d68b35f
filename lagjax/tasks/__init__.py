"""The paper's six tasks by name (docs/theory.md section 7).

  task = get_task("occurrence", d=50, max_len=400)
  batch = task.sample(key, 64)            # jitted, batch size static
  loss = task.loss(outputs, batch)        # outputs: (B,) scores or (B, k) logits
  report = task.metric(outputs, batch)    # report[task.metric_name] is the headline

Lengths are drawn from each task's law conditioned on n <= max_len (inverse
CDF, no rejection); see lagjax/tasks/base.py.

The registry TASKS maps each name to a TaskSpec: its factory and what consumers may ask
of the task without building it or comparing its name (`spec`, `names`, `options`). A new
task is one module with its factory, plus its entry in TASKS (or a `register` call).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Mapping

from lagjax import validation
from lagjax.tasks import base, even_pairs, icl_bigram, occurrence, slr
from lagjax.tasks.base import Batch, Task, count_form  # noqa: F401 (public)
from lagjax.tasks.icl_bigram import bayes_bigram, embed_current_previous

# The direct (α, β) model's layouts, as lj.init_params options (docs/theory.md §2, §2b).
_PLAIN_WITH_CLS = types.MappingProxyType({"cls": True})
_LAST_QUERY_FIRST_LAST = types.MappingProxyType(
    {"cls": True, "query": "last", "positions": "first_last"})


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """A registered task: its factory and what it declares (docs/theory.md §7).

  Attributes:
    factory: keyword options -> Task.
    language: whether the labels come from a lagjax Language, task.extras["language"],
      so the exact population routes apply to it (docs/theory.md §3).
    direct_layout: the lj.init_params options (cls, query, positions) of the direct (α, β)
      model that can express the task (§2b), or None when that model cannot.
    previous_token: whether a model needs the previous token beside the current one at
      each position (current ⊕ previous, the bigram task).

  Example:
    >>> spec = lj.tasks.spec("even_pairs")
    >>> spec.language, dict(spec.direct_layout), spec.previous_token
    (True, {'cls': True, 'query': 'last', 'positions': 'first_last'}, False)
  """

  factory: Callable[..., Task]
  language: bool = False
  direct_layout: Mapping[str, object] | None = None
  previous_token: bool = False


TASKS: dict[str, TaskSpec] = {
    "occurrence": TaskSpec(occurrence.occurrence_task, language=True,
                           direct_layout=_PLAIN_WITH_CLS),
    "or": TaskSpec(occurrence.or_task, language=True, direct_layout=_PLAIN_WITH_CLS),
    "and": TaskSpec(occurrence.and_task, language=True, direct_layout=_PLAIN_WITH_CLS),
    # w_1 = w_n: the last-token query with first/last tables expresses it (§2b)
    "even_pairs": TaskSpec(even_pairs.even_pairs_task, language=True,
                           direct_layout=_LAST_QUERY_FIRST_LAST),
    "icl_bigram": TaskSpec(icl_bigram.icl_bigram_task, previous_token=True),
    "slr": TaskSpec(slr.slr_task),
}


def register(name: str, task_spec: TaskSpec) -> None:
  """Registers a task under `name` (get_task then builds it; docs/theory.md §7).

  Args:
    name: the task's name, as get_task takes it.
    task_spec: its TaskSpec.

  Raises:
    ValueError: when another spec is already registered under `name`.

  Example:
    >>> lj.tasks.register("even_pairs_short", lj.tasks.TaskSpec(
    ...     lambda **options: lj.tasks.even_pairs.even_pairs_task(max_len=8, **options)))
    >>> lj.tasks.get_task("even_pairs_short").max_len
    8
    >>> del lj.tasks.TASKS["even_pairs_short"]   # leave the registry as it was
  """
  if name in TASKS and TASKS[name] is not task_spec:
    raise ValueError(f"a task is already registered as {name!r}.")
  TASKS[name] = task_spec


def spec(name: str) -> TaskSpec:
  """The TaskSpec registered as `name`; an unknown name lists the known ones (§7).

  Args:
    name: a key of TASKS.

  Returns:
    Its TaskSpec.

  Raises:
    ValueError: for an unknown name.

  Example:
    >>> lj.tasks.spec("icl_bigram").previous_token
    True
  """
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}.")
  return TASKS[name]


def names(**declared) -> tuple[str, ...]:
  """The registered task names, in registry order, whose TaskSpec has every attribute value
  given (docs/theory.md §7).

  Args:
    **declared: TaskSpec attributes and the values wanted, e.g. language=True.

  Returns:
    The names, a tuple.

  Raises:
    ValueError: for a name that is not a TaskSpec attribute.

  Example:
    >>> lj.tasks.names(language=True)   # the tasks with exact population routes
    ('occurrence', 'or', 'and', 'even_pairs')
  """
  fields = [field.name for field in dataclasses.fields(TaskSpec)]
  unknown = sorted(set(declared) - set(fields))
  if unknown:
    raise ValueError(f"unknown TaskSpec attribute(s) {unknown}; attributes: {fields}.")
  return tuple(name for name, task_spec in TASKS.items()
               if all(getattr(task_spec, key) == value for key, value in declared.items()))


def options(name: str) -> tuple[str, ...]:
  """The keyword options of the task registered as `name`, sorted (docs/theory.md §7).

  Args:
    name: a key of TASKS.

  Returns:
    The option names its factory takes.

  Raises:
    ValueError: for an unknown name.

  Example:
    >>> "d" in lj.tasks.options("occurrence"), "d" in lj.tasks.options("even_pairs")
    (True, False)
  """
  return tuple(sorted(inspect.signature(spec(name).factory).parameters))


def get_task(name: str, **task_options) -> Task:
  """Builds the task of docs/theory.md §7 registered as `name` in TASKS.

  Args:
    name: one of "occurrence", "or", "and", "even_pairs", "icl_bigram", "slr".
    **task_options: the keyword options of that task's factory (e.g. d, letters, length,
      max_len, loss for the languages of §1); those left out take the factory's defaults.

  Returns:
    The Task; ``task.options`` holds the resolved options, so
    ``get_task(name, **task.options)`` rebuilds it.

  Raises:
    ValueError: for an unknown name (listing the known ones), an unknown option
      (listing the task's options) or an invalid option value (naming it).

  Example:
    >>> task = lj.tasks.get_task("occurrence", d=4, max_len=8)
    >>> task.kind, task.input_dim, task.max_len, task.metric_name
    ('classification', 4, 8, 'accuracy')
    >>> task.length  # the balanced geometric law of §1: p = 1/(d-1)
    Geometric(p=0.333...)
    >>> lj.tasks.get_task("occurrence", width=8)
    Traceback (most recent call last):
    ...
    ValueError: unknown option(s) ['width'] for task 'occurrence'; its options: [...].
  """
  validation.require_float64("lj.tasks.get_task")
  known = options(name)
  unknown = sorted(set(task_options) - set(known))
  if unknown:
    raise ValueError(f"unknown option(s) {unknown} for task {name!r}; its options: "
                     f"{list(known)}.")
  return spec(name).factory(**task_options)


__all__ = ["TASKS", "Batch", "Task", "TaskSpec", "base", "bayes_bigram",
           "embed_current_previous", "even_pairs", "get_task", "icl_bigram", "names",
           "occurrence", "options", "register", "slr", "spec"]
