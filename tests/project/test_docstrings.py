"""Every public name of lagjax has a complete docstring, and every docstring example runs.

"Complete" is defined once, in docs/_ext/public_api.py, which also fails the Sphinx build:
a docs/theory.md section cited, Args:/Returns: where they apply, and an Example: with
`>>>` lines. The examples run here as doctests, one test per module, with `jax`, `jnp`,
`np` and `lj` (lagjax) in scope and float64 on (conftest.py), as docs/api/index.md says.
"""

import doctest
import importlib
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "docs" / "_ext"))
import public_api  # noqa: E402

MODULES = public_api.modules()
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_public_api_is_not_empty():
  # A vacuous enumeration would pass the completeness test below.
  names = list(public_api.public_names())
  assert len(names) > 200
  assert "lagjax.dynamics.train.train" in {name.qualified for name in names}


def test_every_public_name_has_a_complete_docstring():
  problems = public_api.all_problems()
  assert not problems, "\n".join(problems)


def test_the_completeness_check_can_fail():
  def undocumented(x):
    return x

  def documented(x):
    """Doubles x (docs/theory.md §1).

    Args:
      x: a number.

    Returns:
      2x.

    Example:
      >>> 2 * 2
      4
    """
    return 2 * x

  check = public_api.docstring_problems
  assert check(public_api.PublicName("m", "f", undocumented)) == ["no docstring"]
  assert check(public_api.PublicName("m", "f", documented)) == []
  undocumented.__doc__ = "Doubles x.\n\nReturns:\n  2x."
  assert set(check(public_api.PublicName("m", "f", undocumented))) == {
      "no docs/theory.md section cited (write '§3a')", "no Args: section",
      "no Example: with a >>> line"}


@pytest.mark.slow  # the documentation's examples, like the README's: about a minute
@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
  module = importlib.import_module(module_name)
  globs = {"jax": jax, "jnp": jnp, "np": np, "lj": lagjax}
  finder = doctest.DocTestFinder(exclude_empty=True)
  runner = doctest.DocTestRunner(optionflags=OPTIONS)
  for test in finder.find(module, module_name, globs=globs):
    # Re-exports are found again through their importers; run each docstring where defined.
    if test.name.rsplit(".", 1)[0] != module_name and not test.name.startswith(module_name + "."):
      continue
    runner.run(test)
  results = runner.summarize(verbose=False)
  assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
