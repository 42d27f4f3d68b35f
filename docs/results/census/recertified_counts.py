"""The 50-class census with position tables, before and after R* became the lowest value known.

Reads the committed rows of three_states_cls_first_last and three_states_last_first_last (R*
from lj.optimum's 16 starts alone) and replaces the pairs that three_states_tables_recertified
recomputed with R* restarted from the contained layouts' optima and from runs that end below
it (lagjax/analysis/horizons.py). Prints, per layout, the counts of census.md's tables before
and after, as Markdown:

  python docs/results/census/recertified_counts.py
"""

import csv
import pathlib
import statistics

HERE = pathlib.Path(__file__).resolve().parent
LAYOUTS = {"cls+first_last": "three_states_cls_first_last",
           "last+first_last": "three_states_last_first_last"}


def read(folder: str) -> dict:
  with open(HERE / folder / "rows.csv") as handle:
    return {(row["spec"], row["layout"], row["plan"], row["dynamics"]): row
            for row in csv.DictReader(handle)}


def _number(cell: str) -> float | None:
  """A cell's number, or None for a reason in words ("attention never moved")."""
  try:
    return float(cell)
  except ValueError:
    return None


def counts(rows: dict, layout: str) -> dict:
  """census.md's counts of one layout: learned per (plan, dynamics), the star-free split of
  joint flow, and attention lagging in the joint flows that learn."""
  mine = [row for key, row in rows.items() if key[1] == layout]
  learned = lambda plan, kind: [r for r in mine if r["plan"] == plan and r["dynamics"] == kind
                                and r["learned"] == "True"]
  classes = {r["spec"]: r["star_free"] == "True" for r in mine}
  joint_flow = learned("joint", "flow")
  ratios = [number for number in map(_number, (r["half_time_ratio"] for r in joint_flow))
            if number is not None]
  star_free = sum(classes.values())
  return {
      "classes": len(classes),
      "joint flow learns": len(joint_flow),
      "joint GD learns": len(learned("joint", "gd")),
      "three_phase learns, flow / GD": (f"{len(learned('three_phase', 'flow'))} / "
                                        f"{len(learned('three_phase', 'gd'))}"),
      "joint flow, star-free / not": (
          f"{sum(classes[r['spec']] for r in joint_flow)}/{star_free}, "
          f"{sum(not classes[r['spec']] for r in joint_flow)}/{len(classes) - star_free}"),
      "attention lags in learning joint flows (median ratio)": (
          f"{sum(ratio > 1 for ratio in ratios)}/{len(joint_flow)} "
          f"({statistics.median(ratios):.3g})"),
  }


def main() -> None:
  before = {}
  for folder in LAYOUTS.values():
    before.update(read(folder))
  recertified = read("three_states_tables_recertified")
  after = {**before, **recertified}
  assert set(after) == set(before), "the recertified pairs are pairs of the 50-class census"
  pairs = sorted({key[:2] for key in recertified})
  print(f"{len(pairs)} pairs recomputed; counts over the 50 classes\n")
  table = {layout: (counts(before, layout), counts(after, layout)) for layout in LAYOUTS}
  print("| | " + " | ".join(f"{layout}, before | {layout}, after" for layout in LAYOUTS) + " |")
  print("|---|" + "---|---|" * len(LAYOUTS))
  for name in table["cls+first_last"][0]:
    cells = [str(value[name]) for layout in LAYOUTS for value in table[layout]]
    print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  main()
