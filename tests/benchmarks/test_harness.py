"""benchmarks/harness.py's results file: each benchmark rewrites its own section of
benchmarks/RESULTS.md and nothing else. Pure Python and a tiny fake benchmark; no timing."""

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # benchmarks/ is a folder of the repository, not installed

from benchmarks import harness  # noqa: E402


def test_write_section_replaces_its_own_section_and_keeps_the_others(tmp_path):
  path = tmp_path / "RESULTS.md"
  path.write_text("# Benchmark results\n\nintro\n\n<!-- a_bench: begin -->\nold a\n"
                  "<!-- a_bench: end -->\n\nbetween\n\n<!-- b_bench: begin -->\nold b\n"
                  "<!-- b_bench: end -->\n")
  harness.write_section("a_bench", "python -m benchmarks.a_bench", "machine: x\n\n| 1 |",
                        path=path, when="2026-12-03 10:00 UTC", commit="abc1234")
  text = path.read_text()
  assert "old a" not in text and "old b" in text and "intro" in text and "between" in text
  assert ("Written by `python -m benchmarks.a_bench` on 2026-12-03 10:00 UTC at commit abc1234."
          in text)
  assert text.index("machine: x") < text.index("between") < text.index("old b")
  assert text.count("<!-- a_bench: begin -->") == 1
  harness.write_section("c_bench", "python -m benchmarks.c_bench --quick", "machine: y",
                        path=path, when="W", commit="C")
  text = path.read_text()
  assert text.rstrip().endswith("<!-- c_bench: end -->") and "old b" in text


def _fake_run(quick):
  return {"quick": quick}


def _fake_table(results):
  return f"machine: fake\n\nquick {results['quick']}"


def test_report_writes_its_section_unless_no_record(tmp_path, monkeypatch, capsys):
  path = tmp_path / "RESULTS.md"
  monkeypatch.setattr(harness, "RESULTS_PATH", path)
  parser = harness.parser("Fake benchmark.\n", "quick help")
  harness.report(parser.parse_args(["--quick", "--no-record"]), _fake_run, _fake_table)
  assert not path.exists()
  harness.report(parser.parse_args(["--quick"]), _fake_run, _fake_table)
  name = harness.benchmark_name(_fake_run)
  assert name == "test_harness"
  text = path.read_text()
  assert f"<!-- {name}: begin -->" in text and "quick True" in text
  assert f"`python -m benchmarks.{name} --quick`" in text
  assert "quick True" in capsys.readouterr().out


def test_report_without_the_record_flag_still_runs(tmp_path, monkeypatch):
  # A benchmark with its own parser (risk_bench adds options) keeps working.
  path = tmp_path / "RESULTS.md"
  monkeypatch.setattr(harness, "RESULTS_PATH", path)
  harness.report(argparse.Namespace(quick=False, json=None), _fake_run, _fake_table)
  assert "quick False" in path.read_text()


def test_every_benchmark_has_its_section():
  text = (ROOT / "benchmarks" / "RESULTS.md").read_text("utf-8")
  for script in sorted((ROOT / "benchmarks").glob("*_bench.py")):
    begin, end = harness.section_markers(script.stem)
    assert begin in text and end in text, f"benchmarks/RESULTS.md has no section {script.stem}"
