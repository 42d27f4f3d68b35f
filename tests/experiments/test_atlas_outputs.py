"""The atlas binary's row names (experiments/atlas_report.py, no flags, so it imports beside
another binary's module). The second edition's files (verdicts first, reasons instead of -1,
the figures, resuming) are tested in tests/analysis/test_atlas.py."""

import lagjax as lj
from experiments import atlas_report as atlas_binary


def test_language_names_of_every_spec_form():
  """A config.languages entry's row name: a built-in with arguments joins them with '_'
  (':' and ','), an automaton file is its stem, a factory its function (issue 34's mutation
  campaign: language_name was only ever called on plain names)."""
  builtin = sorted(lj.languages.LANGUAGES)[0]
  assert atlas_binary.language_name(f"{builtin}:3") == f"{builtin}_3"
  assert atlas_binary.language_name(f"{builtin}:1,2") == f"{builtin}_1_2"
  assert atlas_binary.language_name("path/to/mine.json") == "mine"
  assert atlas_binary.language_name("my_module:my_factory") == "my_factory"
