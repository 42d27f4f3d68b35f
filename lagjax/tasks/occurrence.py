"""Occurrence, OR and AND tasks (docs/theory.md sections 1 and 7).

Strings w over Σ = {0, …, d-1}: n ~ L (conditioned on n <= max_len, see
lagjax/tasks/base.py), then tokens iid π. Labels come from the lagjax.data.languages
label functions:

- occurrence(a): y = +1 iff a ∈ w;
- or (any_of L): y = +1 iff some letter of L occurs;
- and (all_of L): y = +1 iff every letter of L occurs.

By default d = 50, π is uniform and L is the balanced geometric law
(P(y = +1) = 1/2 before truncation; truncation at the default max_len moves
it by at most DEFAULT_TAIL).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np

from lagjax.data.lengths import Geometric, check_law
from lagjax.data.occurrence import all_of, any_of, balanced_geometric, occurrence
from lagjax.tasks import base


def _language_task(name: str, make_language, d, letters, pi, length, max_len,
                   loss: str) -> base.Task:
  d = base.check_int("d", d, 2)
  field = "letter" if name == "occurrence" else "letters"
  if isinstance(letters, str | bytes) or not isinstance(letters, Sequence | np.ndarray):
    raise ValueError(f"letters must be a sequence of letters in {{0, …, d-1}}; got {letters!r}.")
  letters = tuple(base.check_int(field, a, 0) for a in letters)
  if any(a >= d for a in letters):
    raise ValueError(f"{field} must lie in {{0, …, {d - 1}}} (d = {d}); got {letters}.")
  if length is not None:
    check_law(length, f"the task {name!r}")
  # Letters and π are checked first, under a placeholder law when the default is asked for.
  placeholder = Geometric(0.5) if length is None else length
  lang = make_language(d, letters, pi=pi, length=placeholder)
  if length is None:
    try:
      length = balanced_geometric(lang.kind, d, lang.letters, pi)
    except ValueError as error:
      raise ValueError(f"length must be given: the default fails, {error}") from error
    lang = dataclasses.replace(lang, length=length)
  max_len = base.check_max_len(max_len, lang.length)
  loss_fn, metric = base.classification_fns(loss)
  sample_lengths = base.truncated_length_sampler(lang.length, max_len)
  pi_array = lang.pi_array

  def sample(key, batch_size: int) -> base.Batch:
    length_key, token_key = jax.random.split(key)
    lengths = sample_lengths(length_key, (batch_size,))
    mask = base.length_mask(lengths, max_len)
    tokens = base.iid_tokens(token_key, pi_array, (batch_size, max_len)) * mask
    return base.Batch(tokens, mask, lang.label_tokens(tokens, mask), lengths, {})

  return base.make_task(
      name=name, kind="classification", input_kind="tokens", input_dim=d, n_outputs=1,
      max_len=max_len, length=lang.length, metric_name="accuracy",
      options={"d": d, **_letters_option(name, lang.letters),
               "pi": None if pi is None else lang.pi, "length": lang.length,
               "max_len": max_len, "loss": loss},
      extras={"language": lang}, sample=sample, loss=loss_fn, metric=metric)


def _letters_option(name: str, letters: tuple[int, ...]) -> dict:
  return {"letter": letters[0]} if name == "occurrence" else {"letters": letters}


def occurrence_task(*, d: int = 50, letter: int = 0, pi=None, length=None, max_len=None,
                    loss: str = "squared") -> base.Task:
  """Occurrence: y = +1 iff `letter` ∈ w (docs/theory.md §1, §7).

  Args:
    d: alphabet size, >= 2.
    letter: the letter a ∈ {0, …, d-1}.
    pi: token law π (d probabilities); None for uniform.
    length: length law; None for the balanced geometric law p = π_a / (1 - π_a).
    max_len: static padded length; None for the smallest N with P(n > N) <= 1e-3.
    loss: "squared" (½(f - y)²) or "logistic".

  Returns:
    A classification Task with token inputs; ``extras["language"]`` is the Language of §1.

  Example:
    >>> task = lj.tasks.occurrence.occurrence_task(d=4, max_len=6)
    >>> batch = task.sample(jax.random.PRNGKey(0), 8)
    >>> has_letter = np.any((np.asarray(batch.inputs) == 0) & np.asarray(batch.mask), axis=-1)
    >>> bool(np.all((np.asarray(batch.targets) == 1) == has_letter))
    True
    >>> task = lj.tasks.occurrence.occurrence_task()  # d = 50, p = 1/(d-1)
    >>> task.max_len, round(float(task.extras["language"].positive_rate()), 6)
    (336, 0.5)
  """
  return _language_task("occurrence", lambda d, letters, **kw: occurrence(
      d, letters[0], **kw), d, (letter,), pi, length, max_len, loss)


def or_task(*, d: int = 50, letters: Sequence[int] = (0, 1), pi=None, length=None,
            max_len=None, loss: str = "squared") -> base.Task:
  """OR: y = +1 iff some letter of `letters` occurs (docs/theory.md §1, §7).

  Args:
    d, pi, max_len, loss: as for occurrence_task.
    letters: the letters L, in {0, …, d-1}.
    length: length law; None for the balanced geometric law p = π_L / (1 - π_L).

  Returns:
    A classification Task like occurrence_task's, on the language any_of(d, letters).

  Example:
    >>> task = lj.tasks.occurrence.or_task()  # d = 50, two letters: p = 2/(d-2)
    >>> round(task.length.p, 6), task.max_len
    (0.041667, 163)
  """
  return _language_task("or", any_of, d, letters, pi, length, max_len, loss)


def and_task(*, d: int = 50, letters: Sequence[int] = (0, 1), pi=None, length=None,
             max_len=None, loss: str = "squared") -> base.Task:
  """AND: y = +1 iff every letter of `letters` occurs (docs/theory.md §1, §7).

  The balanced geometric p is found by bisection (p ≈ 0.0113 at d = 50, two letters).

  Args:
    d, pi, max_len, loss: as for occurrence_task.
    letters: the letters L, in {0, …, d-1}.
    length: length law; None for the balanced geometric law.

  Returns:
    A classification Task like occurrence_task's, on the language all_of(d, letters).

  Example:
    >>> task = lj.tasks.occurrence.and_task()
    >>> round(task.length.p, 7), task.max_len
    (0.011323, 607)
    >>> round(float(task.extras["language"].positive_rate()), 9)
    0.5
  """
  return _language_task("and", all_of, d, letters, pi, length, max_len, loss)
