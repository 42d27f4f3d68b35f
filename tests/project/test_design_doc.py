"""docs/design.md names every module of lagjax/ (issue 33: a newcomer finds in it where each
extension goes, so a module it omits is a module nobody can place).

A module counts as named when the page gives its path (`lagjax/risk/transfer.py`) or its dotted
name (`lagjax.risk.transfer`) as a whole word; a package also by its folder (`lagjax/risk/`) or
its `__init__.py`. The root package is named by `lagjax/__init__.py` or `lagjax/`.
"""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]


def library_modules(package_root: pathlib.Path) -> list[pathlib.Path]:
  """Every module file under the package, as paths relative to the repository."""
  return sorted(path.relative_to(package_root.parent)
                for path in package_root.rglob("*.py"))


def spellings(module: pathlib.Path) -> list[str]:
  """The accepted ways of naming a module file (a path relative to the repository)."""
  path = module.as_posix()
  if module.name != "__init__.py":
    return [path, path.removesuffix(".py").replace("/", ".")]
  folder = module.parent.as_posix()
  names = [path, folder + "/"]
  if "/" in folder:  # the root package's dotted name, "lagjax", would be any mention at all
    names.append(folder.replace("/", "."))
  return names


def named(text: str, spelling: str, modules: frozenset[str] = frozenset()) -> bool:
  """Whether `spelling` occurs in `text` as a whole name: not inside a longer word or path (a
  letter, digit, _ or / next to it), and, for a dotted name, not as the front of the dotted name
  of another module in `modules` (`lagjax.risk` in `lagjax.risk.transfer`). An attribute after
  it counts (`lagjax.dynamics.engines.ENGINES` names `lagjax.dynamics.engines`)."""
  for match in re.finditer(rf"(?<![\w./]){re.escape(spelling)}(?![\w/])(\.\w+)?", text):
    if match.group(1) is None or spelling + match.group(1) not in modules:
      return True
  return False


def missing_modules(text: str, modules: list[pathlib.Path]) -> list[str]:
  """The modules that `text` does not name, as paths."""
  dotted = frozenset(name for module in modules for name in spellings(module) if "/" not in name)
  return [module.as_posix() for module in modules
          if not any(named(text, spelling, dotted) for spelling in spellings(module))]


def test_design_doc_names_every_module():
  """Every .py file under lagjax/ is named in docs/design.md."""
  text = (REPO / "docs" / "design.md").read_text()
  missing = missing_modules(text, library_modules(REPO / "lagjax"))
  assert not missing, ("docs/design.md does not name these modules (by path, e.g. "
                       "lagjax/risk/transfer.py, or dotted, e.g. lagjax.risk.transfer): "
                       + ", ".join(missing))


def test_the_check_accepts_either_form_and_only_whole_names():
  """Paths and dotted names count, in prose, code spans and tables; a name that is only the
  prefix or a suffix of a longer one does not; a module left out is reported."""
  modules = [pathlib.Path(p) for p in (
      "lagjax/__init__.py", "lagjax/risk/__init__.py", "lagjax/risk/transfer.py",
      "lagjax/risk/moments.py", "lagjax/linalg.py", "lagjax/data/lengths.py")]
  text = ("The root is lagjax/__init__.py; `lagjax.risk.transfer` builds moments with\n"
          "| lagjax/risk/moments.py | the Hessian |, and lagjax.risk (the registry).\n"
          "See lagjax.linalg.\n")
  assert missing_modules(text, modules) == ["lagjax/data/lengths.py"]
  for near_miss in ("lagjax/data/lengths.pyc", "lagjax/data/lengths_old.py",
                    "lagjax.data.lengths_law", "mylagjax.data.lengths", "xlagjax/data/lengths.py",
                    "old/lagjax/data/lengths.py", "lagjax.data.lengths/x"):
    assert not named(near_miss, "lagjax/data/lengths.py"), near_miss
    assert not named(near_miss, "lagjax.data.lengths"), near_miss
  # A package's dotted name inside a module's is not the package; an attribute's is the module.
  assert missing_modules("lagjax.risk.transfer.moments", modules[1:3]) == [
      "lagjax/risk/__init__.py"]
  assert missing_modules("lagjax.risk.ROUTES, lagjax.risk.transfer.moments", modules[1:3]) == []
  # A package is not named by its modules' names alone.
  assert missing_modules("lagjax/risk/transfer.py", modules[1:3]) == ["lagjax/risk/__init__.py"]
  assert missing_modules("the lagjax/risk/ package", modules[1:2]) == []
