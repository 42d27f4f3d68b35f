"""Every Python example of the README runs, and prints what the README says it prints.

The blocks run in order in one namespace (tests/project/readme_examples.py). Numbers must agree
to 1e-9 relative, or to the rounding of the digits the README shows. The README's values
are exact routes (quadrature error below 1e-12 relative, docs/theory.md, numerics) or
sampled estimates with a fixed key; between machines and XLA settings they move only by
roundoff of reordered sums, below 1e-12 relative, so 1e-9 catches any real drift.
"""

import pytest
import readme_examples

RTOL = 1e-9


def test_the_readme_has_examples_that_print():
  found = readme_examples.examples()
  assert len(found) >= 5
  assert sum(example.expected is not None for example in found) >= 4


def test_the_comparison_catches_a_drifted_number():
  compare = readme_examples.mismatches
  assert compare("R = 0.5 (n=3)\n", "R = 0.5000000000001 (n=3)\n", RTOL) == []
  assert compare("R = 0.123\n", "R = 0.1234\n", RTOL) == []          # shown rounded
  assert compare("R = 0.123\n", "R = 0.1236\n", RTOL) != []
  assert compare("R = 0.5 ...\n", "R = 0.5, more text\n", RTOL) == []
  assert compare("R = 0.5\n", "S = 0.5\n", RTOL) != []


@pytest.mark.slow  # every README example, with their trainings: about half a minute
def test_readme_examples_print_what_the_readme_shows():
  namespace = {"__name__": "readme"}
  problems = []
  for example in readme_examples.examples():
    printed = readme_examples.run(example, namespace)
    if example.expected is not None:
      problems += [f"README.md:{example.line}: {p}"
                   for p in readme_examples.mismatches(example.expected, printed, RTOL)]
  assert not problems, "\n".join(problems)
