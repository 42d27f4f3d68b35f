"""The quick loop's share of a parametrized test (`python -m pytest -m "not slow" tests`).

Where the cases of one test differ only in their data (a plan, a layout, a language) and each
compiles programs of its own for seconds, the quick loop keeps a few cases that between them
take every branch the test checks; the others are marked slow, and the full suite runs them
all (docs/decisions/test-suite-speed.md).
"""

import pytest


def some_quick(cases, quick):
  """The cases for pytest.mark.parametrize, those not in `quick` marked slow.

  Args:
    cases: the values of the parametrized argument; plain tuples (not a namedtuple such as
      direct.Layout) for several argument names.
    quick: the cases the quick loop keeps; each must be one of `cases`.
  """
  cases, quick = list(cases), list(quick)
  unknown = [case for case in quick if case not in cases]
  assert not unknown, f"quick cases that are not cases: {unknown}"
  return [case if case in quick else
          pytest.param(*(case if type(case) is tuple else (case,)), marks=pytest.mark.slow)
          for case in cases]
