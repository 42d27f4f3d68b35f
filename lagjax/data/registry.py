"""The registry of language families (docs/theory.md §1b).

A family registers a factory under a name (`register`, called by the family's own
module when it is imported); `make(name, ...)` builds one, and `from_spec("tomita:3", d)`
builds one from the string a config gives. lagjax/data/languages.py imports every
built-in family, so the registry is full as soon as lagjax.data is imported. A new
family is one module with its class and a `register` call, imported there.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
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
  """Builds a language from the string a config gives (docs/theory.md §1b, §1c): a
  registered family 'name' or 'name:arg,arg' (integer arguments; a family whose first
  parameter is a `word`, such as contains, takes them as one tuple), an automaton file
  'path.json', or 'module:function', a Python factory returning a Language.

  The automaton file is a JSON object with the keys "transitions" (the (Q, d) table, -1 for a
  missing transition) and "accepting" (state indices), and optionally "start" (default 0),
  "pi" (default uniform) and "name" (default the file's stem); it is built by lj.regular. A
  factory, like a registered family, is called with `d` when it has a parameter `d`, and with
  the `options` its signature takes. A family or factory that takes an alphabet size is built at
  `d`; any other language, when `d` is given, must have alphabet size `d`. `options` (letters=,
  pi=, length=) go to the families that take them (an automaton file takes length=).

  Args:
    spec: "name", "name:arg,arg", "path/to/automaton.json" or "module:function", e.g.
      "tomita:3", "contains:0,1", "my_automaton.json", "my_languages:even_blocks".
    d: the alphabet size, or None for the language's own.
    **options: keyword arguments for the families that take them.

  Returns:
    The language.

  Raises:
    ValueError: one line naming the spec, on an unknown name, a non-integer argument,
      arguments the family does not take, an alphabet size other than `d`, an automaton file
      that is missing, not JSON or lacks a key (named), a module that does not import, a
      missing function, or a factory that does not return a Language.

  Example:
    >>> lj.languages.from_spec("occurrence", 6).describe()
    'occurrence(d=6, letters=(0,))'
    >>> lang = lj.languages.from_spec("mod_count:1,2,1")   # #1 ≡ 1 (mod 2): parity
    >>> lang.describe(), round(lang.positive_rate(), 6)
    ('mod_count[letter=1, m=2, r=1](d=2, states=2)', 0.5)
    >>> lj.languages.from_spec("lagjax.data.occurrence:occurrence", 3).describe()
    'occurrence(d=3, letters=(0,))'
  """
  spec = str(spec)
  if spec.endswith(".json"):
    return _check_alphabet(spec, automaton_file(spec, length=options.get("length")), d)
  name, _, args = spec.partition(":")
  if name not in LANGUAGES and args.isidentifier():
    return _check_alphabet(spec, _call(spec, _factory(spec, name, args), [], d, options), d)
  if name not in LANGUAGES:
    raise ValueError(f"unknown language {name!r}; known languages: {sorted(LANGUAGES)}, an "
                     f"automaton file 'path.json', or a factory 'module:function'.")
  try:
    values = [int(a) for a in args.split(",")] if args else []
  except ValueError:
    raise ValueError(f"language {spec!r}: arguments after ':' must be integers separated by "
                     f"commas, e.g. 'tomita:3'.") from None
  factory = LANGUAGES[name]
  if next(iter(inspect.signature(factory).parameters), None) == "word":
    values = [tuple(values)]
  return _check_alphabet(spec, _call(spec, factory, values, d, options), d)


def _call(spec: str, factory: Callable[..., Language], values: list, d: int | None,
          options: dict) -> Language:
  """factory(*values, d=d, **options) with the options its signature takes."""
  accepted = inspect.signature(factory).parameters
  takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
  if d is not None and "d" in accepted:
    options = {**options, "d": int(d)}
  options = {k: v for k, v in options.items() if k in accepted or takes_any}
  try:
    lang = factory(*values, **options)
  except TypeError as error:
    label = spec if spec.partition(":")[0] not in LANGUAGES else spec.partition(":")[0]
    signature = f"{label}{inspect.signature(factory)}"
    raise ValueError(f"language {spec!r} does not take these arguments ({error}); its "
                     f"signature is {signature}.") from None
  if not isinstance(lang, Language):
    raise ValueError(f"language {spec!r}: the factory returned {type(lang).__name__}, not an "
                     f"lj.Language (build one with lj.regular(...) or a registered family).")
  return lang


def _check_alphabet(spec: str, lang: Language, d: int | None) -> Language:
  if d is not None and lang.d != d:
    raise ValueError(f"language {spec!r} has alphabet size {lang.d}; got d = {d}.")
  return lang


def _factory(spec: str, module_name: str, attribute: str) -> Callable[..., Language]:
  """The function `attribute` of module `module_name` ('module:function' specs)."""
  try:
    module = importlib.import_module(module_name)
  except ImportError as error:
    raise ValueError(f"language {spec!r}: module {module_name!r} does not import ({error}); "
                     f"'module:function' needs the module on the Python path (run from its "
                     f"folder or set PYTHONPATH).") from None
  factory = getattr(module, attribute, None)
  if not callable(factory):
    what = "is not callable" if hasattr(module, attribute) else "does not exist"
    raise ValueError(f"language {spec!r}: {module_name}.{attribute} {what}; 'module:function' "
                     f"names a function returning an lj.Language.")
  return factory


AUTOMATON_KEYS = ("transitions", "accepting")
AUTOMATON_OPTIONAL = ("start", "pi", "name")


def automaton_file(path: str, *, length=None) -> Language:
  """The regular language (lj.regular) of the automaton in a JSON file (docs/theory.md §1c).

  Args:
    path: a JSON object with "transitions" ((Q, d) integer table, -1: missing) and
      "accepting" (state indices), optionally "start", "pi" and "name" (default: the stem).
    length: the length law, or None for lj.regular's default (the balanced geometric law).

  Returns:
    The RegularLanguage.

  Raises:
    ValueError: one line naming the file, when it is missing, is not a JSON object, lacks a
      key or has an unknown one (named), or lj.regular refuses the automaton.

  Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ends_in_one.json")
    >>> with open(path, "w") as f:
    ...   json.dump({"transitions": [[0, 1], [0, 1]], "accepting": [1]}, f)
    >>> lj.languages.from_spec(path).describe()   # the route configs take
    'ends_in_one(d=2, states=2)'
  """
  from lagjax.data import regular  # regular.py registers its families here: import it late

  try:
    with open(path) as f:
      fields = json.load(f)
  except FileNotFoundError:
    raise ValueError(f"language file {path!r} does not exist.") from None
  except IsADirectoryError:
    raise ValueError(f"language file {path!r} is a directory, not a JSON file.") from None
  except json.JSONDecodeError as error:
    raise ValueError(f"language file {path!r} is not valid JSON ({error}).") from None
  if not isinstance(fields, dict):
    raise ValueError(f"language file {path!r} must hold a JSON object with the keys "
                     f"{', '.join(AUTOMATON_KEYS)}; got a {type(fields).__name__}.")
  missing = [key for key in AUTOMATON_KEYS if key not in fields]
  if missing:
    raise ValueError(f"language file {path!r} lacks the key {', '.join(map(repr, missing))}; "
                     f"it needs {', '.join(AUTOMATON_KEYS)} (optional: "
                     f"{', '.join(AUTOMATON_OPTIONAL)}).")
  unknown = sorted(set(fields) - set(AUTOMATON_KEYS) - set(AUTOMATON_OPTIONAL))
  if unknown:
    raise ValueError(f"language file {path!r} has unknown keys {', '.join(map(repr, unknown))}; "
                     f"allowed: {', '.join(AUTOMATON_KEYS + AUTOMATON_OPTIONAL)}.")
  name = fields.get("name", os.path.splitext(os.path.basename(path))[0])
  try:
    return regular.regular(fields["transitions"], fields["accepting"],
                           start=fields.get("start", 0), pi=fields.get("pi"), length=length,
                           name=name)
  except (ValueError, TypeError) as error:
    raise ValueError(f"language file {path!r}: {error}") from None


__all__ = ["AUTOMATON_KEYS", "LANGUAGES", "automaton_file", "from_spec", "make", "register"]
