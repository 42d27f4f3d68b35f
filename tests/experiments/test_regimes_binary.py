"""Smoke and bad-input tests of experiments.regimes (a subprocess each, as a user runs it)."""

import csv
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # every test starts the binary
TINY = ["--config.d_grid.d_max=60", "--config.d_grid.num=5", "--config.collapse_d=(20,)",
        "--config.collapse_points=4", "--config.boundary_d=(20,)", "--config.lengths.means=(5,)",
        "--config.lengths.laws=('geometric',)", "--config.kqv.seeds=1",
        "--config.kqv.scales=(0.1, 0.3)", "--config.kqv.eta2_num=4"]


def run(*overrides, workdir):
  return subprocess.run([sys.executable, "-m", "experiments.regimes", "--config",
                         "experiments/configs/regimes.py", f"--workdir={workdir}", *overrides],
                        cwd=REPO, capture_output=True, text=True, timeout=300)


def test_tiny_run_writes_every_output(tmp_path):
  result = run(*TINY, workdir=tmp_path)
  assert result.returncode == 0, result.stderr[-2000:]
  for name in ("regimes.csv", "regimes.md", "collapse.png", "boundary.png", "lengths.csv",
               "lengths.md", "lengths.png", "kqv.csv", "kqv.md", "kqv.png"):
    assert (tmp_path / name).stat().st_size > 0, name
  with open(tmp_path / "regimes.csv") as f:
    rows = list(csv.DictReader(f))
  assert [int(r["d"]) for r in rows] == [8, 13, 22, 36, 60]
  # The paper's point clears the boundary at every d of the grid: margin Δ(d, d²)/Δ_ε > 1.
  assert all(float(r["paper_margin"]) > 1 for r in rows)


@pytest.mark.parametrize("override, field", [
    ("--config.d_grid.num=0", "config.d_grid.num"),
    ("--config.d_grid.d_min=1", "config.d_grid.d_min"),
    ("--config.d_grid.num=3", "config.d_grid must give at least 4 distinct alphabet sizes"),
    ("--config.languages=('parity', 'nope')", "config.languages[1]: unknown language 'nope'"),
    ("--config.length=poisson:3", "config.length: length law 'poisson:3' must be"),
])
def test_bad_config_names_the_field(tmp_path, override, field):
  result = run(override, workdir=tmp_path)
  assert result.returncode != 0 and field in result.stderr, result.stderr[-1000:]
  assert not (tmp_path / "regimes.csv").exists()


def test_a_regular_language_gets_the_language_table(tmp_path):
  """A language outside the occurrence family with an exact moments route (parity: the
  transfer route) gets the three-phase table of docs/theory.md §8.8 instead of the laws in d
  (it was refused by check_language before issue 36)."""
  result = run("--config.language=parity", workdir=tmp_path)
  assert result.returncode == 0, result.stderr[-2000:]
  for name in ("languages.csv", "languages.md", "languages.png", "metadata.json"):
    assert (tmp_path / name).stat().st_size > 0, name
  assert not (tmp_path / "regimes.csv").exists()
  with open(tmp_path / "languages.csv") as f:
    (row,) = list(csv.DictReader(f))
  assert (row["language"], row["route"], row["coordinates"]) == ("parity", "transfer", "1")
  # The output phase at α = 0 is stable below 2/λ_max = 4: β ∝ 1 is the top eigenvector of
  # H(0) = E[WWᵀ], eigenvalue π_σ = ½ (docs/theory.md §9b). No Δ reaches ε = 1e-3: parity
  # needs counts mod 2, which no attention on letters gives.
  assert float(row["eta1_stable"]) == pytest.approx(4.0, rel=1e-12)
  assert row["learns_at_eps"] == "False"
  floor, best, eps_mid = (float(row[k]) for k in ("output_floor", "best_risk", "eps_mid"))
  assert best < eps_mid < floor < 0.5
  assert eps_mid == pytest.approx(0.5 * (floor + best), rel=1e-12)
  # min η1η2 = Δ_ε/b: the product that puts Δ = b·η1η2 (c ≈ 0 on parity) on the boundary.
  assert float(row["min_eta1_eta2"]) == pytest.approx(
      float(row["delta_eps_mid"]) / float(row["b"]), rel=1e-12)


def test_a_factory_language_without_an_exact_route_is_one_line_before_compute(tmp_path):
  """A factory (or file) can give any language; one that no exact route gives the moments of
  (here: a counting language, more 0s than 1s, that declares no exact capability) is refused
  at validation in the library's one plain line (regimes.exact_route)."""
  (tmp_path / "my_regime_languages.py").write_text(
      "import jax.numpy as jnp\nimport lagjax as lj\n\n"
      "class MoreZeros(lj.Language):\n"
      "  def __init__(self, d):\n"
      "    self.d, self.pi, self.length = d, (1.0 / d,) * d, lj.geometric(0.1)\n"
      "  def label_tokens(self, tokens, mask):\n"
      "    zeros = jnp.sum((tokens == 0) & mask, -1)\n"
      "    return jnp.where(2 * zeros > jnp.sum(mask, -1), 1.0, -1.0)\n"
      "  def positive_rate(self):\n"
      "    return 0.4\n"
      "  def describe(self):\n"
      "    return f'more_zeros(d={self.d})'\n\n"
      "def more_zeros(d):\n"
      "  return MoreZeros(d)\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
  result = subprocess.run([sys.executable, "-m", "experiments.regimes", "--config",
                           "experiments/configs/regimes.py", f"--workdir={tmp_path / 'out'}",
                           "--config.language=my_regime_languages:more_zeros"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
  assert result.returncode == 2, result.stderr[-2000:]
  message = (result.stdout + result.stderr).strip()
  assert "\n" not in message, message
  assert message.startswith("regimes.py: error: config.language: lang: more_zeros(d=8) has "
                            "no exact route for the moments (H, g)"), message
  assert "python -m experiments.sweep" in message
  assert not (tmp_path / "out" / "languages.csv").exists()


def test_a_language_whose_first_steps_leave_attention_still_is_told_so(tmp_path):
  """Even pairs: a1 = a2 = 0 modulo constants (to roundoff), so α = η1η2(a1 + η1 a2) = 0 for
  every (η1, η2). The row says so at the output-only floor, instead of a wall b/|c| and a Δ_ε
  made of ratios of roundoff (b ≈ 3e-18 here)."""
  result = run("--config.languages=('even_pairs',)", workdir=tmp_path)
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / "languages.csv") as f:
    (row,) = list(csv.DictReader(f))
  assert row["note"].startswith("a1 = a2 = 0 to roundoff"), row["note"]
  assert row["coordinates"] == "0"
  assert max(float(row["a1_norm"]), float(row["a2_norm"])) <= 1e-12
  assert all(row[k] == "nan" for k in ("b", "c", "eta1_max", "eps_mid", "min_eta1_eta2"))
  assert row["learns_at_eps"] == "False"
  # R*(0) at α = 0: f = β·(c/n), and even pairs' label is not a function of the letter mix.
  assert 0.45 < float(row["output_floor"]) < 0.5
