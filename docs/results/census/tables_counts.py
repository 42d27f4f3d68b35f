"""census.md's counts for the three-state classes run with position tables, under all four
layouts on the same classes.

The classes are those of the given folders (each holds the rows of both tables layouts, or
of one); the CLS and last-query counts come from the committed 200-class runs restricted to
those classes. The 50-class runs (three_states_cls_first_last, three_states_last_first_last)
are read with the pairs that three_states_tables_recertified recomputed replaced:

  python docs/results/census/tables_counts.py three_states_tables_2mod8
  python docs/results/census/tables_counts.py three_states_tables_2mod8 50
"""

import sys

from recertified_counts import LAYOUTS, counts, read

WITHOUT_TABLES = {"cls": "three_states_cls", "last": "three_states_last"}


def fifty() -> dict:
  """The 50-class tables rows, the recertified pairs replaced."""
  rows = {}
  for folder in LAYOUTS.values():
    rows.update(read(folder))
  return {**rows, **read("three_states_tables_recertified")}


def main(folders) -> None:
  rows = {}
  for folder in folders:
    rows.update(fifty() if folder == "50" else read(folder))
  classes = {key[0] for key in rows}
  for folder in WITHOUT_TABLES.values():
    rows.update({key: row for key, row in read(folder).items() if key[0] in classes})
  layouts = [*WITHOUT_TABLES, *LAYOUTS]
  table = {layout: counts(rows, layout) for layout in layouts}
  print(f"{len(classes)} classes: {', '.join(folders)}\n")
  print("| | " + " | ".join(layouts) + " |")
  print("|---|" + "---|" * len(layouts))
  for name in table["cls"]:
    print(f"| {name} | " + " | ".join(str(table[layout][name]) for layout in layouts) + " |")


if __name__ == "__main__":
  main(sys.argv[1:])
