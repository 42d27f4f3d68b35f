"""Every citation of docs/theory.md in the repository names a section that exists there.

Citations take the forms "docs/theory.md section 3b", "docs/theory.md sections 5-7",
"docs/theory.md sections 2 and 7", "docs/theory.md 3a", "docs/theory.md, numerics" and
"§4" / "§5–7" anywhere. Sections are the headings "## 3. …", "### 3a. …", "## Numerics".
Pure text: no JAX, well under a second.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
THEORY = ROOT / "docs" / "theory.md"
SCANNED_DIRS = ("lagjax", "experiments", "tests", "benchmarks", "docs")
SCANNED_FILES = ("README.md", "CHANGELOG.md")

HEADING = re.compile(r"^#{2,4} (?:(\d+[a-z]?)\.|(Numerics)\b)", re.MULTILINE)
ITEM = r"\d+[a-z]?(?:\s*[-–]\s*\d+)?"
CITATION = re.compile(
    rf"docs/theory\.md(?:\s+sections\s+(?P<many>{ITEM}(?:(?:,\s*|\s+and\s+){ITEM})*)"
    rf"|\s+section\s+(?P<one>{ITEM})|\s+(?P<bare>\d+[a-z]?)\b|,\s+(?P<named>[a-z]+))"
    rf"|§\s*(?P<sign>{ITEM})")


def section_ids() -> set[str]:
  """Ids of the headings of docs/theory.md: "3", "3a", "6b", "numerics", …."""
  return {(number or name).lower() for number, name in HEADING.findall(THEORY.read_text("utf-8"))}


def cited_ids(text: str) -> list[str]:
  """Section ids cited in `text`, ranges expanded ("5-7" -> 5, 6, 7)."""
  ids = []
  for match in CITATION.finditer(text):
    group = next(g for g in match.groups() if g is not None)
    for item in re.split(r",\s*|\s+and\s+", group):
      bounds = re.fullmatch(r"(\d+)\s*[-–]\s*(\d+)", item)
      ids += ([str(n) for n in range(int(bounds[1]), int(bounds[2]) + 1)] if bounds
              else [item.lower()])
  return ids


def citations() -> list[tuple[str, int, str]]:
  """(file, line, section id) of every citation in the scanned files."""
  paths = [ROOT / name for name in SCANNED_FILES]
  for directory in SCANNED_DIRS:
    paths += sorted(p for p in (ROOT / directory).rglob("*") if p.suffix in (".py", ".md"))
  found = []
  for path in paths:
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
      found += [(str(path.relative_to(ROOT)), number, i) for i in cited_ids(line)]
  return found


def test_parser_reads_every_citation_form():
  text = ("docs/theory.md section 3b; docs/theory.md sections 5-7 and docs/theory.md sections "
          "2 and 7, docs/theory.md sections 3b, 5; docs/theory.md 3a, docs/theory.md, numerics; "
          "§4, §5–6; docs/theory.md is the contract")
  assert cited_ids(text) == ["3b", "5", "6", "7", "2", "7", "3b", "5", "3a", "numerics", "4",
                             "5", "6"]


def test_every_citation_resolves():
  sections = section_ids()
  found = citations()
  # The scan is not vacuous: the code cites the theory about a hundred times.
  assert len(found) > 50
  missing = [f"{path}:{line} cites §{section}" for path, line, section in found
             if section not in sections]
  assert not missing, (f"docs/theory.md has no section for: {missing} "
                       f"(its sections: {sorted(sections)})")
