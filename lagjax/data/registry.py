"""The registry of language families (docs/theory.md §1b).

A family registers a factory under a name (`register`, called by the family's own
module when it is imported); `make(name, ...)` builds one, and `from_spec("tomita:3", d)`
builds one from the string a config gives. lagjax/data/languages.py imports every
built-in family, so the registry is full as soon as lagjax.data is imported. A new
family is one module with its class and a `register` call, imported there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from lagjax.data.protocol import Language

LANGUAGES: dict[str, Callable[..., Language]] = {}


def register(name: str, factory: Callable[..., Language]) -> None:
  """Registers a family's factory under `name` (make(name, ...) then builds it;
  docs/theory.md §1b).

  Args:
    name: the family's name, as `make` and `from_spec` take it.
    factory: builds the language from make's arguments.

  Raises:
    ValueError: when another factory is already registered under `name` (registering the
      same one again does nothing).

  Example:
    >>> def letter_zero(d, *, pi=None, length=None):   # y = +1 iff letter 0 occurs
    ...   return lj.occurrence(d, 0, pi=pi, length=length)
    >>> lj.languages.register("letter_zero", letter_zero)
    >>> lj.languages.make("letter_zero", 4).describe()
    'occurrence(d=4, letters=(0,))'
    >>> del lj.languages.LANGUAGES["letter_zero"]   # leave the registry as it was
  """
  if name in LANGUAGES and LANGUAGES[name] is not factory:
    raise ValueError(f"a language family is already registered as {name!r}.")
  LANGUAGES[name] = factory


def make(name: str, *args, **options) -> Language:
  """Builds the language family registered as `name`; an unknown name lists the known ones
  (docs/theory.md §1b).

  Args:
    name: a registered family, a key of LANGUAGES.
    *args: the factory's positional arguments.
    **options: its keyword arguments (pi=, length=, …).

  Returns:
    The language.

  Raises:
    ValueError: for an unknown name.

  Example:
    >>> lang = lj.languages.make("tomita", 1)   # 1*: p/(1+p) = 1/11 under Geometric(0.1)
    >>> lang.describe(), round(lang.positive_rate(), 6)
    ('tomita[k=1](d=2, states=2)', 0.090909)
  """
  if name not in LANGUAGES:
    raise ValueError(f"unknown language {name!r}; known languages: {sorted(LANGUAGES)}.")
  return LANGUAGES[name](*args, **options)


def from_spec(spec: str, d: int | None = None, **options) -> Language:
  """Builds a registered language from a spec 'name' or 'name:arg,arg' (integer arguments;
  a family whose first parameter is a `word`, such as contains, takes them as one tuple),
  as configs name them (docs/theory.md §1b).

  A family that takes an alphabet size (a parameter `d`) is built at `d`; with any other
  family, `d`, when given, must equal its alphabet size. `options` (letters=, pi=,
  length=) go to the families that take them.

  Args:
    spec: "name" or "name:arg,arg", e.g. "tomita:3" or "contains:0,1".
    d: the alphabet size, or None for the family's own.
    **options: keyword arguments for the families that take them.

  Returns:
    The language.

  Raises:
    ValueError: on an unknown name, a non-integer argument, arguments the family does not
      take, or an alphabet size other than `d` (one line each, naming the spec).

  Example:
    >>> lj.languages.from_spec("occurrence", 6).describe()
    'occurrence(d=6, letters=(0,))'
    >>> lang = lj.languages.from_spec("mod_count:1,2,1")   # #1 ≡ 1 (mod 2): parity
    >>> lang.describe(), round(lang.positive_rate(), 6)
    ('mod_count[letter=1, m=2, r=1](d=2, states=2)', 0.5)
  """
  name, _, args = str(spec).partition(":")
  if name not in LANGUAGES:
    raise ValueError(f"unknown language {name!r}; known languages: {sorted(LANGUAGES)}.")
  try:
    values = [int(a) for a in args.split(",")] if args else []
  except ValueError:
    raise ValueError(f"language {spec!r}: arguments after ':' must be integers separated by "
                     f"commas, e.g. 'tomita:3'.") from None
  factory = LANGUAGES[name]
  accepted = inspect.signature(factory).parameters
  if next(iter(accepted), None) == "word":
    values = [tuple(values)]
  takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
  if d is not None and "d" in accepted:
    options["d"] = int(d)
  options = {k: v for k, v in options.items() if k in accepted or takes_any}
  try:
    lang = factory(*values, **options)
  except TypeError as error:
    raise ValueError(f"language {spec!r} does not take these arguments "
                     f"({error}); its signature is {name}{inspect.signature(factory)}.") from None
  if d is not None and lang.d != d:
    raise ValueError(f"language {spec!r} has alphabet size {lang.d}; got d = {d}.")
  return lang


__all__ = ["LANGUAGES", "from_spec", "make", "register"]
