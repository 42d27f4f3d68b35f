"""A user's own language in the binaries with no package edit (issue 34): config language
specs also take an automaton file 'path.json' and a factory 'module:function', through
lj.languages.from_spec, with one-line errors."""

import csv
import json
import os
import pathlib
import subprocess
import sys

import pytest

import lagjax as lj

REPO = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 240

# Ends in 1 over {0, 1}: the last letter read is the state.
ENDS_IN_ONE = {"transitions": [[0, 1], [0, 1]], "accepting": [1], "start": 0,
               "pi": [0.5, 0.5]}

FACTORIES = '''
import lagjax as lj

def ends_in_one(length=None):
  return lj.regular([[0, 1], [0, 1]], [1], length=length, name="ends_in_one")

def first_letter(d, length=None):
  return lj.occurrence(d, length=length)

def not_a_language():
  return 3
'''


@pytest.fixture
def user_files(tmp_path, monkeypatch):
  """An automaton file and a module of factories on the Python path; returns the folder."""
  (tmp_path / "ends_in_one.json").write_text(json.dumps(ENDS_IN_ONE))
  (tmp_path / "my_languages.py").write_text(FACTORIES)
  monkeypatch.syspath_prepend(str(tmp_path))
  return tmp_path


def test_an_automaton_file_is_lj_regular_of_its_fields(user_files):
  lang = lj.languages.from_spec(str(user_files / "ends_in_one.json"), 2,
                                length=lj.geometric(0.2))
  expected = lj.regular(ENDS_IN_ONE["transitions"], ENDS_IN_ONE["accepting"],
                        length=lj.geometric(0.2), name="ends_in_one")
  assert lang.describe() == expected.describe() == "ends_in_one(d=2, states=2)"
  assert lang.positive_rate() == expected.positive_rate()
  assert lang.length == lj.geometric(0.2)
  balanced = lj.languages.from_spec(str(user_files / "ends_in_one.json"))
  assert abs(balanced.positive_rate() - 0.5) < 1e-9   # lj.regular's default: balanced law


def test_a_factory_gets_d_and_the_options_it_takes(user_files):
  lang = lj.languages.from_spec("my_languages:first_letter", 5, letters=(2,),
                                length=lj.geometric(0.3))
  assert lang.describe() == "occurrence(d=5, letters=(0,))" and lang.length == lj.geometric(0.3)
  assert lj.languages.from_spec("my_languages:ends_in_one").d == 2
  assert lj.languages.from_spec("tomita:3").describe().startswith("tomita")   # unchanged


@pytest.mark.parametrize("write, spec, message", [
    (None, "nosuch.json", r"^language file '.*nosuch.json' does not exist\.$"),
    ("{not json", "bad.json", r"^language file '.*bad.json' is not valid JSON \(.*\)\.$"),
    ('{"transitions": [[0, 1], [0, 1]]}', "half.json",
     r"^language file '.*half.json' lacks the key 'accepting'; it needs transitions, accepting"),
    ('{"transitions": [[0, 1], [0, 1]], "accepting": [1], "starts": 0}', "typo.json",
     r"has unknown keys 'starts'; allowed: transitions, accepting, start, pi, name\.$"),
    ('[1, 2]', "list.json", r"must hold a JSON object with the keys transitions, accepting; "
                            r"got a list\.$"),
    ('{"transitions": [[0, 2], [0, 1]], "accepting": [1]}', "range.json",
     r"^language file '.*range.json': .*"),
    (None, "no_such_module:f", r"^language 'no_such_module:f': module 'no_such_module' does "
                               r"not import"),
    (None, "my_languages:nosuch", r"^language 'my_languages:nosuch': my_languages.nosuch does "
                                  r"not exist; 'module:function' names a function"),
    (None, "my_languages:not_a_language", r"^language 'my_languages:not_a_language': the "
                                          r"factory returned int, not an lj.Language"),
    (None, "my_languages:ends_in_one@3", r"^language 'my_languages:ends_in_one' has alphabet "
                                         r"size 2; got d = 3\.$"),
])
def test_errors_are_one_line_naming_the_spec(user_files, write, spec, message):
  spec, _, d = spec.partition("@")
  if write is not None:
    (user_files / spec).write_text(write)
  path = str(user_files / spec) if spec.endswith(".json") else spec
  with pytest.raises(ValueError, match=message) as error:
    lj.languages.from_spec(path, int(d) if d else None)
  assert "\n" not in str(error.value)


@pytest.mark.slow  # starts the atlas binary (about 20 s)
def test_the_atlas_binary_runs_a_json_and_a_factory_language(user_files, tmp_path):
  """The cheapest binary that takes language specs, on a tiny config: both user languages
  become rows named after the file and the function; nothing in the package is edited."""
  workdir = tmp_path / "atlas"
  languages = (str(user_files / "ends_in_one.json"), "my_languages:ends_in_one")
  args = [sys.executable, "-m", "experiments.atlas",
          "--config=experiments/configs/atlas.py:quick", f"--workdir={workdir}",
          f"--config.languages={languages!r}", "--config.plans=('joint',)",
          "--config.dynamics=('gd',)", "--config.horizons.gd_steps=20",
          "--config.horizons.gd_settle_steps=5", "--config.horizons.gd_grid=(1.0,)",
          "--config.horizons.optimum_starts=1", "--config.horizons.optimum_iterations=10"]
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join([str(user_files), str(REPO)]))
  result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
                          env=env)
  assert result.returncode == 0, result.stderr[-2000:]
  with open(workdir / "rows.csv") as f:
    rows = list(csv.DictReader(f))
  assert [row["name"] for row in rows] == ["ends_in_one", "ends_in_one"]
  assert rows[0]["final_risk"] == rows[1]["final_risk"]   # one language, two routes to it
  with open(workdir / "metadata.json") as f:
    described = json.load(f)["languages"]
  assert "ends_in_one(d=2, states=2)" in str(described)


def test_the_sweep_builds_a_json_language_at_its_alphabet_size(user_files):
  """The sweep's language (config_language) goes through from_spec: a file's table fixes d,
  so d_list must hold its alphabet size; another d is one line naming the fields."""
  from experiments import sweep as sweep_binary
  from experiments.configs import sweep as sweep_config
  config = sweep_config.get_config().unlock()
  config.language = str(user_files / "ends_in_one.json")
  assert sweep_binary.config_language(config, 2).describe() == "ends_in_one(d=2, states=2)"
  with pytest.raises(ValueError, match=r"^config.language / config.d_list / config.length: "
                                       r"language '.*ends_in_one.json' has alphabet size 2; "
                                       r"got d = 5\.$"):
    sweep_binary.config_language(config, 5)


@pytest.mark.slow  # starts the regimes binary (it stops at validation)
def test_the_regimes_binary_builds_its_language_through_from_spec(user_files, tmp_path):
  """regimes takes 'module:function' too: a factory that returns no Language is refused in
  the one line of from_spec, before any compute, with exit status 2."""
  args = [sys.executable, "-m", "experiments.regimes", "--config=experiments/configs/regimes.py",
          f"--workdir={tmp_path / 'regimes'}", "--config.language=my_languages:not_a_language"]
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join([str(user_files), str(REPO)]))
  result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
                          env=env)
  assert result.returncode == 2, result.stderr[-2000:]
  assert (result.stdout + result.stderr).strip() == (
      "regimes.py: error: config.language: language 'my_languages:not_a_language': the factory "
      "returned int, not an lj.Language (build one with lj.regular(...) or a registered family).")


def test_a_file_names_its_language_and_a_module_attribute_must_be_a_function(user_files):
  """Issue 34 mutation survivors of from_spec: the "name" of an automaton file names the
  language (not the file's stem), and a module attribute that exists but is not a function is
  called "not callable" (not "does not exist")."""
  (user_files / "named.json").write_text(json.dumps({**ENDS_IN_ONE, "name": "last_is_one"}))
  lang = lj.languages.from_spec(str(user_files / "named.json"))
  assert lang.describe() == "last_is_one(d=2, states=2)"
  (user_files / "constants.py").write_text("LETTERS = 3\n")
  with pytest.raises(ValueError, match=r"^language 'constants:LETTERS': constants.LETTERS is "
                                       r"not callable; 'module:function' names a function "
                                       r"returning an lj.Language\.$"):
    lj.languages.from_spec("constants:LETTERS")
