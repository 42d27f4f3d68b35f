"""Value and gradient of the count route (docs/theory.md §3g) against the transfer route.

In one run, interleaved, after compilation: jit(value_and_grad(risk)) with the last-token
query, position tables and the CLS token, at the default length laws, of
- the transfer route on even_pairs (the baseline; its grid sized to θ as
  lj.population_risk sizes it);
- the count route on majority and Dyck-1 (target ≤ 5× the baseline, issue 37);
- the count route on parity (a regular language it also serves, for scale), and on
  majority with the plain layout (the lattice route's cost).
Prints the machine, each route's build time and a Markdown table of medians and ratios.

Usage (from the repo root):
  python -m benchmarks.count_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.data import counting, regular_builtins  # noqa: E402
from lagjax.models import direct  # noqa: E402
from lagjax.risk import coverage  # noqa: E402

BASELINE = "transfer, even_pairs (baseline)"
TARGET_RATIO = 5.0


def full_params():
  """A θ with every table of the last query + position tables + CLS layout on d = 2."""
  return {"alpha": jnp.array([[0.3, -0.5], [0.1, 0.4]]), "beta": jnp.array([0.7, -1.1]),
          "alpha_cls": jnp.array([0.2, -0.1]), "beta_cls": jnp.asarray(-0.3),
          "alpha_first": jnp.array([0.2, -0.1]), "beta_first": jnp.array([0.5, 0.3]),
          "alpha_last": jnp.array([-0.2, 0.1]), "beta_last": jnp.array([0.1, -0.6])}


def run(quick: bool) -> dict:
  info = harness.machine()
  full = full_params()
  layout = direct.layout(full)
  plain = {"alpha": jnp.array([0.3, -0.5]), "beta": jnp.array([0.7, -1.1])}
  builds = {}

  def case(name, route_name, lang, theta, **options):
    start = time.perf_counter()
    route = lj.risk.ROUTES[route_name].build(lang, layout=direct.layout(theta), **options)
    builds[name] = time.perf_counter() - start
    return jax.jit(jax.value_and_grad(route.risk)), (theta,)

  pairs = regular_builtins.even_pairs()
  grid = coverage.size_covering(pairs, coverage.needed(pairs, full),
                                coverage.windows(2, layout))
  cases = {
      BASELINE: case(BASELINE, "transfer", pairs, full, num_points=grid),
      "count, majority": case("count, majority", "count", counting.majority(), full),
      "count, dyck1": case("count, dyck1", "count", counting.dyck1(), full),
      "count, parity": case("count, parity", "count", regular_builtins.parity(), full),
      "count, majority (plain layout)": case("count, majority (plain layout)", "count",
                                             counting.majority(), plain),
  }
  repeats = 5 if quick else 30
  times = np.median(harness.interleaved_times(list(cases.values()), repeats), axis=0)
  baseline = float(times[0])
  targets = {"count, majority": TARGET_RATIO, "count, dyck1": TARGET_RATIO}
  rows = [{"case": name, "seconds": float(t), "ratio": float(t) / baseline,
           "build_seconds": builds[name], "target_ratio": targets.get(name),
           "passed": None if name not in targets else float(t) / baseline <= targets[name]}
          for name, t in zip(cases, times)]
  return {"machine": info, "repeats": repeats, "rows": rows}


def table(results: dict) -> str:
  lines = harness.markdown_table(
      ("case", "median", "ratio to baseline", "target", "status", "build"),
      [(row["case"], harness.format_seconds(row["seconds"]), f"{row['ratio']:.2f}",
        "—" if row["target_ratio"] is None else f"≤ {row['target_ratio']:g}",
        harness.status(row["passed"]), harness.format_seconds(row["build_seconds"]))
       for row in results["rows"]])
  return "\n".join([harness.machine_line(results["machine"]),
                    f"jit(value_and_grad), last query + position tables + CLS (but the plain "
                    f"row), default length laws, median of {results['repeats']} interleaved "
                    "calls after compilation; float64; build = the route's one-time setup", "",
                    *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "5 repeats instead of 30", argv)


if __name__ == "__main__":
  main()
