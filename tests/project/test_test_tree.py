"""The test tree mirrors the package (issue 33 item 7): tests/<package>/ holds the tests of
lagjax/<package>/, tests/experiments/ those of the binaries, tests/benchmarks/ those of the
benchmark scripts, and tests/project/ the concepts that span the repository (docs, README,
layers, bad input). conftest.py's file order names existing files.
"""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]
REPO = TESTS.parent
NOT_PACKAGES = {"project", "experiments", "benchmarks"}


def unmirrored_folders(tests: pathlib.Path, repo: pathlib.Path) -> list[str]:
  """The test folders that mirror nothing, one line each."""
  packages = {path.parent.name for path in (repo / "lagjax").glob("*/__init__.py")}
  return [f"tests/{folder.name}/ is no package of lagjax/ nor one of {sorted(NOT_PACKAGES)}"
          for folder in sorted(tests.iterdir())
          if folder.is_dir() and not folder.name.startswith((".", "__"))
          and folder.name not in packages | NOT_PACKAGES]


def test_every_test_folder_mirrors_a_package_or_is_a_concept_folder():
  assert unmirrored_folders(TESTS, REPO) == []


def test_no_test_module_is_left_at_the_top_of_tests():
  """Test modules live in the folder of what they test; only the shared conftest.py and
  helpers (enumeration.py, quick.py) stay at the top."""
  assert sorted(path.name for path in TESTS.glob("test_*.py")) == []


def test_the_folder_check_can_fail(tmp_path):
  (tmp_path / "lagjax" / "risk").mkdir(parents=True)
  (tmp_path / "lagjax" / "risk" / "__init__.py").write_text("")
  for folder in ("risk", "project", "mutants", "__pycache__"):
    (tmp_path / "tests" / folder).mkdir(parents=True)
  assert unmirrored_folders(tmp_path / "tests", tmp_path) == [
      "tests/mutants/ is no package of lagjax/ nor one of "
      "['benchmarks', 'experiments', 'project']"]


def test_longest_first_names_existing_test_files():
  """conftest.LONGEST_FIRST orders files for xdist by their path under tests/; an entry that
  names no file (a renamed or folded module) would silently stop ordering it."""
  tree = ast.parse((TESTS / "conftest.py").read_text())
  (order,) = [ast.literal_eval(node.value) for node in tree.body
              if isinstance(node, ast.Assign)
              and any(getattr(t, "id", None) == "LONGEST_FIRST" for t in node.targets)]
  assert len(order) >= 10
  assert [name for name in order if not (TESTS / name).is_file()] == []
