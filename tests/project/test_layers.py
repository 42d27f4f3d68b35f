"""The import graph of lagjax/ (docs/design.md, "Layers"): no cycle, and no upward import.

The graph is read from the source with `ast`, so nothing is imported or executed. A node is a
module (`lagjax.risk.transfer`) or a package (`lagjax.risk`, its `__init__.py`); an edge is an
import statement between two of them, in any form: `import lagjax.x`, `from lagjax.x import
y` (an edge to `lagjax.x.y` when that is a module, else to `lagjax.x`) and the relative forms
`from . import y`, `from .x import y`, `from .. import y`. Python's implicit import of a
module's parent packages is no edge: it is what makes `lagjax.data.occurrence` importable at
all, not a dependency the module chose.

- Cycles are checked over the imports a module runs when it is imported: the statements of its
  body (also inside `if`, `try` and class bodies), not those inside functions, which run later,
  nor those under `if TYPE_CHECKING:`.
- Layers are checked over every import, deferred ones included: an import inside a function is
  still a dependency of the layer.

Each check also runs on a planted graph that breaks it, so that it is seen to fail.
"""

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# The layers in order (docs/design.md "Layers", lagjax/__init__.py's docstring): a package may
# import its own layer and earlier ones. The leaves are shared by every layer. The top-level
# package `lagjax` re-exports the public names and is above every layer.
LAYERS = (
    ("validation", "losses", "linalg", "batched", "xla_flags"),
    ("data",),
    ("tasks",),
    ("models",),
    ("risk",),
    ("dynamics",),
    ("analysis",),
    ("sweep",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_files(package_root: pathlib.Path) -> dict[str, pathlib.Path]:
  """Maps each module's dotted name to its file; a package is named by its __init__.py."""
  modules = {}
  for path in sorted(package_root.rglob("*.py")):
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
      parts.pop()
    modules[".".join(parts)] = path
  return modules


def _is_type_checking(node: ast.If) -> bool:
  test = node.test
  return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
      isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_statements(tree: ast.Module, deferred: bool):
  """The import statements of a module: those its body runs at import, plus (`deferred`) the
  ones inside functions and under `if TYPE_CHECKING:`."""
  pending = list(tree.body)
  while pending:
    node = pending.pop()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      yield node
      continue
    if not deferred and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      continue
    if not deferred and isinstance(node, ast.If) and _is_type_checking(node):
      pending.extend(node.orelse)
      continue
    pending.extend(ast.iter_child_nodes(node))


def _known(name: str, modules) -> str | None:
  """`name` if it is a module, else its longest prefix that is one (None outside lagjax)."""
  while name and name not in modules:
    name = name.rpartition(".")[0]
  return name or None


def imported_modules(name: str, path: pathlib.Path, modules, deferred: bool) -> set[str]:
  """The lagjax modules that module `name` (file `path`) imports."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = set()
  for node in import_statements(ast.parse(path.read_text(), str(path)), deferred):
    if isinstance(node, ast.Import):
      targets = [alias.name for alias in node.names]
    else:
      if node.level:
        base = package.split(".")
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
      else:
        source = node.module or ""
      # `from p import y`: y is a submodule of p when one exists, else a name defined in p.
      targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                 for alias in node.names]
    found.update(target for target in map(lambda t: _known(t, modules), targets) if target)
  found.discard(name)
  return found


def import_graph(package_root: pathlib.Path, deferred: bool = False) -> dict[str, set[str]]:
  """The lagjax module graph: module -> the lagjax modules it imports."""
  modules = module_files(package_root)
  return {name: imported_modules(name, path, modules, deferred)
          for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """A cycle of the graph as a path [a, b, ..., a], or None (depth-first search)."""
  state = {}  # absent: unvisited; 1: on the current path; 2: done
  path = []

  def visit(node):
    state[node] = 1
    path.append(node)
    for successor in sorted(graph.get(node, ())):
      if state.get(successor) == 1:
        return path[path.index(successor):] + [successor]
      if successor not in state:
        cycle = visit(successor)
        if cycle:
          return cycle
    state[node] = 2
    path.pop()
    return None

  for node in sorted(graph):
    if node not in state:
      cycle = visit(node)
      if cycle:
        return cycle
  return None


def layer_of(module: str) -> str | None:
  """The layer of a lagjax module: its first name below lagjax (None for lagjax itself)."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
  """Imports of a later layer, and modules in no layer, one line each."""
  problems = []
  for module in sorted(graph):
    layer = layer_of(module)
    if layer is None:
      continue  # the top-level package: above every layer
    if layer not in RANK:
      problems.append(f"{module}: package {layer!r} is in no layer of LAYERS (docs/design.md)")
      continue
    for imported in sorted(graph[module]):
      target = layer_of(imported)
      if target is None:
        problems.append(f"{module} imports the top-level package lagjax (above every layer)")
      elif target in RANK and RANK[target] > RANK[layer]:
        problems.append(f"{module} ({layer}) imports {imported} of the later layer {target}")
  return problems


@pytest.fixture(scope="module")
def runtime_graph():
  return import_graph(REPO / "lagjax")


def test_the_graph_reads_the_library(runtime_graph):
  """The parser sees the library's real imports (a reader that found no edge would pass the
  cycle check vacuously): the top-level package imports every layer."""
  assert len(runtime_graph) > 40
  assert {layer_of(m) for m in runtime_graph["lagjax"]} >= {"data", "risk", "dynamics",
                                                            "analysis", "sweep"}
  assert sum(len(edges) for edges in runtime_graph.values()) > 100


def test_the_import_graph_of_lagjax_has_no_cycle(runtime_graph):
  """Importing any lagjax module never re-enters a module still being initialised."""
  cycle = find_cycle(runtime_graph)
  assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_package_imports_a_later_layer():
  """Every lagjax package is in a layer, and imports (deferred ones too) only its own and
  earlier layers."""
  problems = layer_violations(import_graph(REPO / "lagjax", deferred=True))
  assert not problems, "\n".join(problems)


def test_find_cycle_on_synthetic_graphs():
  """The cycle search finds a planted cycle, also one off the first node searched and one of a
  module with itself through a package, and reports none in a diamond."""
  diamond = {"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}
  assert find_cycle(diamond) is None
  looped = {**diamond, "d": {"e"}, "e": {"c"}}
  assert find_cycle(looped) == ["d", "e", "c", "d"]  # a -> b -> d -> e -> c -> d
  assert find_cycle({"p": {"p.m"}, "p.m": {"p"}}) == ["p", "p.m", "p"]


def _plant(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
  for name, text in files.items():
    path = root / "lagjax" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return root / "lagjax"


def test_a_planted_bottom_import_cycle_is_found(tmp_path):
  """The shape of the data-layer cycle issue 33 removed: a namespace module imports its
  families at the bottom, and each family imports the namespace back, once by the absolute form
  and once by the relative one. Both edges are read and the cycle is found; a deferred import
  inside a function is no cycle."""
  package = _plant(tmp_path, {
      "__init__.py": "from lagjax import data\n",
      "data/__init__.py": "from lagjax.data import languages\n",
      "data/languages.py": ("import math\n\nclass Language:\n  pass\n\n"
                            "from lagjax.data import regular  # noqa: E402\n"),
      "data/regular.py": "from .languages import Language\n",
      "data/lazy.py": "def build():\n  from lagjax.data import languages\n",
  })
  graph = import_graph(package)
  assert graph["lagjax.data.regular"] == {"lagjax.data.languages"}
  assert graph["lagjax.data.languages"] == {"lagjax.data.regular"}
  assert graph["lagjax.data.lazy"] == set()
  assert import_graph(package, deferred=True)["lagjax.data.lazy"] == {"lagjax.data.languages"}
  assert find_cycle(graph) == ["lagjax.data.languages", "lagjax.data.regular",
                               "lagjax.data.languages"]
  (package / "data" / "languages.py").write_text("class Language:\n  pass\n")
  assert find_cycle(import_graph(package)) is None


def test_planted_upward_and_unplaced_imports_are_reported(tmp_path):
  """A model importing the risk layer (absolute form, and relative `from ..risk import`), a
  deferred upward import, an import of the top-level package and a package in no layer are each
  reported; downward imports are not."""
  package = _plant(tmp_path, {
      "__init__.py": "",
      "validation.py": "",
      "models/__init__.py": "",
      "models/direct.py": "from lagjax import validation\nfrom lagjax.risk import laplace\n",
      "models/kqv.py": "from ..risk import base\n",
      "models/slr.py": "def f():\n  import lagjax.dynamics.plans\n",
      "risk/__init__.py": "",
      "risk/laplace.py": "from lagjax.models import direct\nimport lagjax\n",
      "risk/base.py": "",
      "dynamics/__init__.py": "",
      "dynamics/plans.py": "",
      "gadgets/__init__.py": "",
  })
  problems = layer_violations(import_graph(package, deferred=True))
  assert problems == [
      "lagjax.gadgets: package 'gadgets' is in no layer of LAYERS (docs/design.md)",
      "lagjax.models.direct (models) imports lagjax.risk.laplace of the later layer risk",
      "lagjax.models.kqv (models) imports lagjax.risk.base of the later layer risk",
      "lagjax.models.slr (models) imports lagjax.dynamics.plans of the later layer dynamics",
      "lagjax.risk.laplace imports the top-level package lagjax (above every layer)",
  ]
