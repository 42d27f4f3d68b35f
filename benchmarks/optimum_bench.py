"""lj.optimum's multi-start L-BFGS (docs/theory.md §3e): the starts one after the other
(lax.map, what lj.optimum runs) against the starts vmapped (what it ran before).

In one run, on three (language, layout) pairs of the atlas and the census, with the atlas's
optimum settings (horizons.Horizons: 16 starts, 200 iterations) on the route's default grid:
both forms of the L-BFGS program on the same starts, after one compiling call each, timed
round-robin. Under vmap the zoom line search's while loop runs, at every iteration, until
the slowest start's search has ended, and its branches run as selects; in sequence each
start runs its own trials. Target: the sequence at least 1× the vmap's throughput (issue
38: what lj.optimum runs is the faster form). The best risk over the starts must agree
between the forms to 1e-9 (relative), the optimum's agree_tol: each start's path is the same
up to roundoff in how XLA vectorizes a batch (else the run fails).

Usage (from the repo root):
  python -m benchmarks.optimum_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.analysis import automata, horizons  # noqa: E402
from lagjax.analysis import optimum as optimum_lib  # noqa: E402
from lagjax.data import partition as partition_lib  # noqa: E402
from lagjax.models import direct  # noqa: E402
from lagjax.risk import registry  # noqa: E402

# A three-state census language (sample index 154, an infimum at infinity), a census minimum
# (index 155) and the atlas benchmark's pair.
CASES = (("census_sample:3,200,0#154", "last"), ("census_sample:3,200,0#155", "last"),
         ("even_pairs", "cls+first_last"))
TARGET_RATIO = 1.0
AGREE = 1e-9
REPEATS = 3


def _language(spec: str):
  if "#" in spec:
    census, index = spec.split("#")
    return automata.expand(census)[int(index)].language()
  return lj.languages.from_spec(spec)


def _problem(lang, layout_name: str):
  """lj.optimum's problem on the route's default grid, its starts and its iterations."""
  layout = optimum_lib.LAYOUTS[layout_name]
  partition = partition_lib.singletons(lang.d)
  grouped = direct.group_params(partition, jax.tree_util.tree_map(
      jnp.asarray, direct.zero_params(lang.d, layout)))
  name = registry.resolve_route(lang, "squared", "auto", layout)
  _, sizes = optimum_lib._grid_sizes(lang, partition, layout, name)
  problem = optimum_lib._Problem(lang, layout, partition, "squared", name, grouped,
                                 list(grouped), sizes[0])
  h = horizons.Horizons()
  starts = optimum_lib._starts(problem, h.optimum_starts, seed=0, start_scale=1.0)
  return problem, jnp.asarray(starts), h.optimum_iterations


def run(quick: bool) -> dict:
  info = harness.machine()
  cases = CASES[:1] if quick else CASES
  rows = []
  for spec, layout in cases:
    problem, starts, iterations = _problem(_language(spec), layout)
    chunks = min(8, iterations)
    forms = {"vmap": jax.jit(jax.vmap(optimum_lib._lbfgs_run(problem, iterations, chunks))),
             "sequence": optimum_lib._lbfgs_program(problem, iterations, chunks)}
    times = harness.interleaved_times([(form, (starts,)) for form in forms.values()],
                                      1 if quick else REPEATS)
    best = {}
    for label, form in forms.items():
      x = form(starts)[0]
      best[label] = float(np.nanmin(np.asarray(jax.vmap(problem.objective)(x))))
    gap = abs(best["vmap"] - best["sequence"]) / max(1.0, abs(best["vmap"]))
    if not gap <= AGREE:
      raise AssertionError(f"{spec}, {layout}: the forms' best risks differ by {gap:.3g}")
    vmap_s, sequence_s = np.median(times, axis=0)
    rows.append({"case": f"{spec}, {layout}", "starts": int(starts.shape[0]),
                 "iterations": iterations, "vmap": float(vmap_s),
                 "sequence": float(sequence_s), "ratio": float(vmap_s / sequence_s),
                 "best_risk": best["sequence"], "gap": gap})
  ratios = [row["ratio"] for row in rows]
  return {"machine": info, "repeats": 1 if quick else REPEATS, "rows": rows,
          "passed": min(ratios) >= TARGET_RATIO}


def table(results: dict) -> str:
  lines = harness.markdown_table(
      ("(language, layout)", "starts × iterations", "vmap (s)", "sequence (s)",
       "sequence / vmap throughput", "best R", "|Δ best R| (rel.)"),
      [(row["case"], f"{row['starts']} × {row['iterations']}", f"{row['vmap']:.2f}",
        f"{row['sequence']:.2f}", f"{row['ratio']:.1f}×", f"{row['best_risk']:.12f}",
        f"{row['gap']:.1e}") for row in results["rows"]])
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"lj.optimum's L-BFGS program on the route's default grid, the same starts, after one "
      f"compiling call per form; medians of {results['repeats']} round-robin repeats; "
      f"float64. Target: sequence ≥ {TARGET_RATIO:g}× the vmap's throughput on every case: "
      f"{harness.status(results['passed'])}", "", *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "the first case only, one repeat", argv)


if __name__ == "__main__":
  main()
