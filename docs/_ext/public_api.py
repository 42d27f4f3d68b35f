"""The public API of lagjax and what each public name's docstring must hold.

A public name is a function or class defined in a lagjax module (not re-exported) whose
name has no leading underscore, restricted to the module's `__all__` where it has one:
exactly what `automodule` with `:members:` documents. Its docstring must
  * cite docs/theory.md (a "§3a" or a "docs/theory.md section 3a"),
  * have `Args:` (or `Attributes:` for a class) when it takes arguments,
  * have `Returns:` (or `Yields:`) when it is a function that returns something,
  * have an `Example:` with at least one `>>>` line (run by tests/project/test_docstrings.py).

The Sphinx extension below warns (so `sphinx -W` fails the build) on any name that misses
one of these, and on a lagjax module that no page of docs/api/ documents.
tests/project/test_docstrings.py runs the same check and every example.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import pkgutil
import re
from collections.abc import Iterator

THEORY_CITATION = re.compile(r"§\s*\d|docs/theory\.md")
API_DIR = pathlib.Path(__file__).resolve().parents[1] / "api"


@dataclasses.dataclass(frozen=True)
class PublicName:
  module: str
  name: str
  obj: object

  @property
  def qualified(self) -> str:
    return f"{self.module}.{self.name}"


def modules() -> list[str]:
  """Every importable lagjax module, packages included, private ones excluded."""
  import lagjax
  names = ["lagjax"]
  for info in pkgutil.walk_packages(lagjax.__path__, "lagjax."):
    if not any(part.startswith("_") for part in info.name.split(".")):
      names.append(info.name)
  return sorted(names)


def documentable_modules() -> list[str]:
  """Modules the API pages must document: every module that is not a package, and every
  package that defines a public name of its own (lagjax.risk defines RiskResult)."""
  owners = {public.module for public in public_names()}
  return [name for name in modules()
          if name in owners or not hasattr(importlib.import_module(name), "__path__")]


def public_names() -> Iterator[PublicName]:
  for module_name in modules():
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    for name, obj in vars(module).items():
      if name.startswith("_") or (exported is not None and name not in exported):
        continue
      # inspect.unwrap: a jax.jit or custom_jvp function is public like a plain one
      # (automodule lists jitted ones; docs/api names a custom_jvp one with autofunction).
      if not (inspect.isfunction(inspect.unwrap(obj)) or inspect.isclass(obj)):
        continue
      if getattr(obj, "__module__", None) != module_name:
        continue
      yield PublicName(module_name, name, obj)


def _takes_arguments(obj) -> bool:
  try:
    signature = inspect.signature(obj)
  except (TypeError, ValueError):
    return False
  return any(name not in ("self", "cls") for name in signature.parameters)


def _returns_something(obj) -> bool:
  try:
    annotation = inspect.signature(obj).return_annotation
  except (TypeError, ValueError):
    return True
  return annotation not in (None, "None")


def docstring_problems(public: PublicName) -> list[str]:
  """What the docstring of `public` lacks; empty when it is complete."""
  doc = inspect.getdoc(public.obj) or ""
  if not doc.strip():
    return ["no docstring"]
  problems = []
  if not THEORY_CITATION.search(doc):
    problems.append("no docs/theory.md section cited (write '§3a')")
  is_class = inspect.isclass(public.obj)
  if _takes_arguments(public.obj):
    wanted = ("Args:", "Attributes:") if is_class else ("Args:",)
    if not any(word in doc for word in wanted):
      problems.append(f"no {' or '.join(wanted)} section")
  if not is_class and _returns_something(public.obj):
    if "Returns:" not in doc and "Yields:" not in doc:
      problems.append("no Returns: section")
  if "Example" not in doc or ">>>" not in doc:
    problems.append("no Example: with a >>> line")
  return problems


def documented_modules() -> set[str]:
  """Modules named by an `automodule` directive on a page of docs/api/."""
  found = set()
  for page in API_DIR.glob("*.md"):
    found |= set(re.findall(r"automodule::\s*(\S+)", page.read_text("utf-8")))
  return found


def all_problems() -> list[str]:
  problems = [f"{public.qualified}: {problem}"
              for public in public_names() for problem in docstring_problems(public)]
  missing = sorted(set(documentable_modules()) - documented_modules())
  problems += [f"{module}: not documented on any page of docs/api/" for module in missing]
  return problems


def _check(app):
  # One warning per problem: `sphinx -W` turns them into a failed build.
  from sphinx.util import logging
  logger = logging.getLogger(__name__)
  for problem in all_problems():
    logger.warning("incomplete docstring: %s", problem, type="lagjax", subtype="docstring")


def setup(app):
  app.connect("builder-inited", _check)
  return {"parallel_read_safe": True, "parallel_write_safe": True}
