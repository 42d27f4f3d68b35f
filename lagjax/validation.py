"""Small input checks shared by every layer of lagjax.

Each check raises ValueError with a message that names the field and the
allowed values, and returns the value normalized (an int, a float). Library
builders, config validation in the binaries and task factories all call these,
so one kind of bad input gets one kind of message.
"""

from __future__ import annotations

import math

import numpy as np


def is_int(value) -> bool:
  """Whether value is an integer (Python or NumPy), bools excluded."""
  return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value, minimum: int, *, optional: bool = False,
              integral_floats: bool = False) -> int | None:
  """An integer >= minimum (None allowed when optional).

  Args:
    name: the field, as the user wrote it (e.g. "config.num_seeds", "Phase steps").
    value: the value to check.
    minimum: the smallest allowed value.
    optional: whether None is allowed (and returned as is).
    integral_floats: whether a float with an integral value (3.0) is accepted.
  """
  if optional and value is None:
    return None
  ok = is_int(value) or (integral_floats and isinstance(value, float) and value.is_integer())
  if not (ok and value >= minimum):
    allowed = f"an integer >= {minimum}"
    raise ValueError(f"{name} must be {'None or ' if optional else ''}{allowed}; got {value!r}.")
  return int(value)


def check_ints(name: str, values, minimum: int) -> tuple[int, ...]:
  """A non-empty sequence of integers >= minimum (e.g. a list of alphabet sizes d)."""
  values = tuple(values)
  if not values:
    raise ValueError(f"{name} must list at least one integer >= {minimum}; got {values!r}.")
  return tuple(check_int(f"{name} entries", value, minimum) for value in values)


def check_real(name: str, value, *, minimum: float | None = None, strict: bool = False,
               maximum: float | None = None, strict_max: bool = False) -> float:
  """A finite real number in the given range (bools and non-numbers rejected)."""
  try:
    number = float(value)
  except (TypeError, ValueError):
    number = math.nan
  low_ok = minimum is None or (number > minimum if strict else number >= minimum)
  high_ok = maximum is None or (number < maximum if strict_max else number <= maximum)
  if isinstance(value, bool) or not math.isfinite(number) or not (low_ok and high_ok):
    bounds = []
    if minimum is not None:
      bounds.append(f"{'>' if strict else '>='} {minimum:g}")
    if maximum is not None:
      bounds.append(f"{'<' if strict_max else '<='} {maximum:g}")
    where = f" {' and '.join(bounds)}" if bounds else ""
    raise ValueError(f"{name} must be a finite real{where}; got {value!r}.")
  return number


def check_risk_threshold(name: str, value) -> float:
  """A success threshold ε on the squared risk: 0 < ε < R(θ0 = 0) = ½ (docs/theory.md §2)."""
  return check_real(name, value, minimum=0.0, strict=True, maximum=0.5, strict_max=True)


def check_positive(name: str, value, allow_zero: bool = False) -> float:
  """A finite real > 0 (or >= 0 with allow_zero)."""
  return check_real(name, value, minimum=0.0, strict=not allow_zero)


def check_choice(name: str, value, choices):
  """One of `choices` (listed in the message in their own order)."""
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}.")
  return value


def check_bool(name: str, value) -> bool:
  if not isinstance(value, bool | np.bool_):
    raise ValueError(f"{name} must be True or False; got {value!r}.")
  return bool(value)


def require_float64(what: str = "lagjax") -> None:
  """Raises unless JAX computes in float64 (lagjax's exactness claims assume it).

  lagjax does not switch the process to float64 at import; the user opts in
  once, with jax.config.update("jax_enable_x64", True), before building anything.
  """
  import jax  # local: this module is otherwise free of JAX

  if not jax.config.jax_enable_x64:
    raise ValueError(f"{what} needs float64: call jax.config.update(\"jax_enable_x64\", True) "
                     "once, before building anything with lagjax (docs/theory.md, numerics).")
