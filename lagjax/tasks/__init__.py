"""The paper's six tasks by name (docs/theory.md section 7).

  task = get_task("occurrence", d=50, max_len=400)
  batch = task.sample(key, 64)            # jitted, batch size static
  loss = task.loss(outputs, batch)        # outputs: (B,) scores or (B, k) logits
  report = task.metric(outputs, batch)    # report[task.metric_name] is the headline

Lengths are drawn from each task's law conditioned on n <= max_len (inverse
CDF, no rejection); see lagjax/tasks/base.py.
"""

from __future__ import annotations

import inspect

from lagjax import validation
from lagjax.tasks import base, even_pairs, icl_bigram, occurrence, slr
from lagjax.tasks.base import Batch, Task, count_form  # noqa: F401 (public)
from lagjax.tasks.icl_bigram import bayes_bigram, embed_current_previous

TASKS = {
    "occurrence": occurrence.occurrence_task,
    "or": occurrence.or_task,
    "and": occurrence.and_task,
    "even_pairs": even_pairs.even_pairs_task,
    "icl_bigram": icl_bigram.icl_bigram_task,
    "slr": slr.slr_task,
}


def get_task(name: str, **options) -> Task:
  """Builds the task of docs/theory.md §7 registered as `name` in TASKS.

  Args:
    name: one of "occurrence", "or", "and", "even_pairs", "icl_bigram", "slr".
    **options: the keyword options of that task's factory (e.g. d, letters, length,
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
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}.")
  factory = TASKS[name]
  known = sorted(inspect.signature(factory).parameters)
  unknown = sorted(set(options) - set(known))
  if unknown:
    raise ValueError(f"unknown option(s) {unknown} for task {name!r}; its options: {known}.")
  return factory(**options)


__all__ = ["TASKS", "Batch", "Task", "base", "bayes_bigram", "embed_current_previous",
           "even_pairs", "get_task", "icl_bigram", "occurrence", "slr"]
