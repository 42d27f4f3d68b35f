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
  """Whether value is an integer (Python or NumPy), bools excluded: what an alphabet size d
  or a count c_σ of docs/theory.md §1 may be.

  Args:
    value: anything.

  Returns:
    True for an int or a NumPy integer that is not a bool, else False.

  Example:
    >>> lj.validation.is_int(3), lj.validation.is_int(np.int64(3))
    (True, True)
    >>> lj.validation.is_int(True), lj.validation.is_int(3.0)  # a bool is no integer here
    (False, False)
  """
  return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value, minimum: int, *, optional: bool = False,
              integral_floats: bool = False) -> int | None:
  """An integer >= minimum (None allowed when optional), such as the alphabet size d of
  docs/theory.md §1 or a phase's number of steps (§5).

  Args:
    name: the field, as the user wrote it (e.g. "config.num_seeds", "Phase steps").
    value: the value to check.
    minimum: the smallest allowed value.
    optional: whether None is allowed (and returned as is).
    integral_floats: whether a float with an integral value (3.0) is accepted.

  Returns:
    The value as a Python int (None when optional and None).

  Raises:
    ValueError: naming the field and the allowed values.

  Example:
    >>> lj.validation.check_int("d", np.int64(5), 2)
    5
    >>> lj.validation.check_int("steps", 3.0, 1, integral_floats=True)
    3
    >>> lj.validation.check_int("d", 1, 2)
    Traceback (most recent call last):
    ...
    ValueError: d must be an integer >= 2; got 1.
  """
  if optional and value is None:
    return None
  ok = is_int(value) or (integral_floats and isinstance(value, float) and value.is_integer())
  if not (ok and value >= minimum):
    allowed = f"an integer >= {minimum}"
    raise ValueError(f"{name} must be {'None or ' if optional else ''}{allowed}; got {value!r}.")
  return int(value)


def check_ints(name: str, values, minimum: int) -> tuple[int, ...]:
  """A non-empty sequence of integers >= minimum (e.g. a list of alphabet sizes d,
  docs/theory.md §1).

  Args:
    name: the field, as the user wrote it; entries are named "<name> entries".
    values: an iterable of integers.
    minimum: the smallest allowed entry.

  Returns:
    The entries as a tuple of Python ints.

  Raises:
    ValueError: when the sequence is empty or an entry is not an integer >= minimum.

  Example:
    >>> lj.validation.check_ints("d", [8, np.int64(16)], 3)
    (8, 16)
    >>> lj.validation.check_ints("d", [], 3)
    Traceback (most recent call last):
    ...
    ValueError: d must list at least one integer >= 3; got ().
  """
  values = tuple(values)
  if not values:
    raise ValueError(f"{name} must list at least one integer >= {minimum}; got {values!r}.")
  return tuple(check_int(f"{name} entries", value, minimum) for value in values)


def check_real(name: str, value, *, minimum: float | None = None, strict: bool = False,
               maximum: float | None = None, strict_max: bool = False) -> float:
  """A finite real number in the given range (bools and non-numbers rejected), such as a
  step size η of docs/theory.md §5.

  Args:
    name: the field, as the user wrote it.
    value: the value to check (a number float() accepts; strings and bools are refused).
    minimum: the lower bound, or None for none.
    strict: whether the lower bound is excluded (value > minimum).
    maximum: the upper bound, or None for none.
    strict_max: whether the upper bound is excluded (value < maximum).

  Returns:
    The value as a Python float.

  Raises:
    ValueError: naming the field and the bounds.

  Example:
    >>> lj.validation.check_real("eta", 1, minimum=0.0, strict=True)
    1.0
    >>> lj.validation.check_real("eta", float("inf"), minimum=0.0, strict=True)
    Traceback (most recent call last):
    ...
    ValueError: eta must be a finite real > 0; got inf.
    >>> lj.validation.check_real("eta", "1.0")  # a string is no number, even one that spells it
    Traceback (most recent call last):
    ...
    ValueError: eta must be a finite real; got '1.0'.
  """
  try:
    # A string that spells a number ('1.0') is refused too: float() would accept it, and a
    # quoted step size is a mistake in the caller's code or config, not a number.
    number = math.nan if isinstance(value, str | bytes) else float(value)
  except (TypeError, ValueError):
    number = math.nan
  low_ok = minimum is None or (number > minimum if strict else number >= minimum)
  high_ok = maximum is None or (number < maximum if strict_max else number <= maximum)
  if isinstance(value, bool | np.bool_) or not math.isfinite(number) or not (low_ok and high_ok):
    bounds = []
    if minimum is not None:
      bounds.append(f"{'>' if strict else '>='} {minimum:g}")
    if maximum is not None:
      bounds.append(f"{'<' if strict_max else '<='} {maximum:g}")
    where = f" {' and '.join(bounds)}" if bounds else ""
    raise ValueError(f"{name} must be a finite real{where}; got {value!r}.")
  return number


def check_risk_threshold(name: str, value) -> float:
  """A success threshold ε on the squared risk: 0 < ε < R(θ0 = 0) = ½ (docs/theory.md §2).

  R(0) = ½ because f ≡ 0 at θ0 = 0, so a threshold of ½ or more is met before training.

  Args:
    name: the field, as the user wrote it.
    value: the threshold ε.

  Returns:
    ε as a Python float.

  Raises:
    ValueError: unless 0 < ε < ½.

  Example:
    >>> lj.validation.check_risk_threshold("epsilon", 1e-3)
    0.001
    >>> lj.validation.check_risk_threshold("epsilon", 0.5)
    Traceback (most recent call last):
    ...
    ValueError: epsilon must be a finite real > 0 and < 0.5; got 0.5.
  """
  return check_real(name, value, minimum=0.0, strict=True, maximum=0.5, strict_max=True)


def check_positive(name: str, value, allow_zero: bool = False) -> float:
  """A finite real > 0 (or >= 0 with allow_zero), such as the spread γ or the noise σ of
  the SLR task (docs/theory.md §7).

  Args:
    name: the field, as the user wrote it.
    value: the value to check.
    allow_zero: whether 0 is allowed.

  Returns:
    The value as a Python float.

  Raises:
    ValueError: naming the field and the bound.

  Example:
    >>> lj.validation.check_positive("noise_std", 0, allow_zero=True)  # σ = 0: no noise
    0.0
    >>> lj.validation.check_positive("gamma", 0)
    Traceback (most recent call last):
    ...
    ValueError: gamma must be a finite real > 0; got 0.
  """
  return check_real(name, value, minimum=0.0, strict=not allow_zero)


def check_choice(name: str, value, choices):
  """One of `choices` (listed in the message in their own order), such as a loss name of
  docs/theory.md §2.

  Args:
    name: the field, as the user wrote it.
    value: the value to check.
    choices: the allowed values (any container; listed as a tuple in the message).

  Returns:
    The value, unchanged.

  Raises:
    ValueError: naming the field and the choices.

  Example:
    >>> lj.validation.check_choice("loss", "squared", ("squared", "logistic"))
    'squared'
    >>> lj.validation.check_choice("loss", "hinge", ("squared", "logistic"))
    Traceback (most recent call last):
    ...
    ValueError: loss must be one of ('squared', 'logistic'); got 'hinge'.
  """
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}.")
  return value


def check_bool(name: str, value) -> bool:
  """A bool (Python or NumPy), such as whether the model has the CLS token of
  docs/theory.md §2; 0 and 1 are refused, so a misplaced count cannot pass as a flag.

  Args:
    name: the field, as the user wrote it.
    value: the value to check.

  Returns:
    The value as a Python bool.

  Raises:
    ValueError: unless value is a bool.

  Example:
    >>> lj.validation.check_bool("cls", np.bool_(True))
    True
    >>> lj.validation.check_bool("cls", 1)
    Traceback (most recent call last):
    ...
    ValueError: cls must be True or False; got 1.
  """
  if not isinstance(value, bool | np.bool_):
    raise ValueError(f"{name} must be True or False; got {value!r}.")
  return bool(value)


def check_keys(name: str, value, required, optional=()) -> dict:
  """A dict whose keys are all of `required` and some of `optional`, such as a parameter dict
  θ of docs/theory.md §2 ({"alpha", "beta"} and the optional CLS and position entries).

  Args:
    name: the field, as the user wrote it (e.g. "params").
    value: the value to check.
    required: the keys that must be present, in the order the message lists them.
    optional: the keys that may be present.

  Returns:
    The dict, unchanged.

  Raises:
    ValueError: in one line naming the missing keys, or the unknown ones and the allowed set.

  Example:
    >>> lj.validation.check_keys("params", {"alpha": 1, "beta": 2}, ("alpha", "beta"))
    {'alpha': 1, 'beta': 2}
    >>> lj.validation.check_keys("params", {"alpha": 1}, ("alpha", "beta"))
    Traceback (most recent call last):
    ...
    ValueError: params is missing keys: 'beta'; it must have the keys 'alpha', 'beta'.
  """
  required, optional = tuple(required), tuple(optional)
  allowed = f"keys {', '.join(repr(key) for key in required)}"
  if optional:
    allowed = f"{allowed} (optional: {', '.join(repr(key) for key in optional)})"
  if not isinstance(value, dict):
    raise ValueError(f"{name} must be a dict with {allowed}; got {type(value).__name__}.")
  missing = [key for key in required if key not in value]
  if missing:
    raise ValueError(f"{name} is missing keys: {', '.join(repr(key) for key in missing)}; it "
                     f"must have the {allowed}.")
  extra = sorted((key for key in value if key not in required + optional), key=repr)
  if extra:
    raise ValueError(f"{name} has unknown keys: {', '.join(repr(key) for key in extra)}; "
                     f"allowed: the {allowed}.")
  return value


def require_float64(what: str = "lagjax") -> None:
  """Raises unless JAX computes in float64 (lagjax's exactness claims assume it;
  docs/theory.md, numerics).

  lagjax does not switch the process to float64 at import; the user opts in
  once, with jax.config.update("jax_enable_x64", True), before building anything.

  Args:
    what: the builder that needs float64, named in the message (e.g. "lj.train").

  Raises:
    ValueError: while float64 is off, naming the line that turns it on.

  Example:
    >>> jax.config.jax_enable_x64  # the examples run in float64
    True
    >>> lj.validation.require_float64("lj.train")  # so this passes silently
  """
  import jax  # local: this module is otherwise free of JAX

  if not jax.config.jax_enable_x64:
    raise ValueError(f"{what} needs float64: call jax.config.update(\"jax_enable_x64\", True) "
                     "once, before building anything with lagjax (docs/theory.md, numerics).")
