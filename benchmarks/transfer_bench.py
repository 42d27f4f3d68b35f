"""Value and gradient of the transfer route (docs/theory.md §3d) against the Laplace route.

In one run, interleaved, after compilation: jit(value_and_grad(risk)) of
- the Laplace route on occurrence(d = 50) with per-token θ (the baseline);
- the transfer route on the same language built as an automaton, same θ and grid
  (target ≤ 2× the baseline);
- the transfer route on even_pairs (CLS; and last query + position tables, the layout the
  issue names) and Tomita 3 (CLS), default length laws (target ≤ 1× the baseline).
Every grid is sized to its θ as lj.population_risk sizes it: the windows θ's score
clusters need, rounded up to a power of two.
Prints the machine and a Markdown table of medians and ratios.

Usage (from the repo root):
  python -m benchmarks.transfer_bench [--quick] [--json PATH]
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
from lagjax.data import regular_builtins  # noqa: E402
from lagjax.risk import quadrature  # noqa: E402

D = 50


def value_and_grad(route):
  return jax.jit(jax.value_and_grad(route.risk))


def sized_grid(lang, needed: int) -> int:
  """population_risk's grid: whole windows for `needed` nodes, a power of two of them."""
  width = quadrature.window_width(lang)
  clusters = -(-needed // width)
  return width * (1 << (clusters - 1).bit_length())


def run(quick: bool) -> dict:
  info = harness.machine()
  rng = np.random.default_rng(0)
  occurrence = lj.occurrence(D)
  params = {"alpha": jnp.asarray(rng.choice([-4.0, 0.0, 5.0], D) + 0.1 * rng.normal(size=D)),
            "beta": jnp.asarray(rng.normal(size=D))}
  points = sized_grid(occurrence, quadrature.points_needed(occurrence, params))
  small = {"alpha": jnp.array([0.3, -0.5]), "beta": jnp.array([0.7, -1.1]),
           "alpha_cls": jnp.asarray(0.2), "beta_cls": jnp.asarray(-0.3)}
  full = {**small, "alpha": jnp.array([[0.3, -0.5], [0.1, 0.4]]),
          "alpha_first": jnp.array([0.2, -0.1]), "beta_first": jnp.array([0.5, 0.3]),
          "alpha_last": jnp.array([-0.2, 0.1]), "beta_last": jnp.array([0.1, -0.6])}

  def transfer_case(lang, theta):
    route = lj.risk.ROUTES["transfer"].build(
        lang, num_points=sized_grid(lang, quadrature.points_needed(lang, theta)))
    return value_and_grad(route), (theta,)

  even_pairs, tomita3 = regular_builtins.even_pairs(), regular_builtins.tomita(3)
  cases = {
      "laplace, occurrence d = 50 (baseline)": (value_and_grad(lj.risk.ROUTES["laplace"].build(
          occurrence, num_points=points)), (params,)),
      "transfer, occurrence automaton d = 50": (value_and_grad(lj.risk.ROUTES["transfer"].build(
          regular_builtins.occurrence_automaton(D), num_points=points)), (params,)),
      "transfer, even_pairs (CLS)": transfer_case(even_pairs, small),
      "transfer, even_pairs (last query + positions + CLS)": transfer_case(even_pairs, full),
      "transfer, tomita 3 (CLS)": transfer_case(tomita3, small),
  }
  repeats = 5 if quick else 30
  times = np.median(harness.interleaved_times(list(cases.values()), repeats), axis=0)
  baseline = float(times[0])
  targets = {"transfer, occurrence automaton d = 50": 2.0, "transfer, even_pairs (CLS)": 1.0,
             "transfer, even_pairs (last query + positions + CLS)": 1.0,
             "transfer, tomita 3 (CLS)": 1.0}
  rows = [{"case": name, "seconds": float(t), "ratio": float(t) / baseline,
           "target_ratio": targets.get(name),
           "passed": None if name not in targets else float(t) / baseline <= targets[name]}
          for name, t in zip(cases, times)]
  return {"machine": info, "repeats": repeats, "rows": rows}


def table(results: dict) -> str:
  lines = harness.markdown_table(
      ("case", "median", "ratio to baseline", "target", "status"),
      [(row["case"], harness.format_seconds(row["seconds"]), f"{row['ratio']:.2f}",
        "—" if row["target_ratio"] is None else f"≤ {row['target_ratio']:g}",
        harness.status(row["passed"])) for row in results["rows"]])
  return "\n".join([harness.machine_line(results["machine"]),
                    f"jit(value_and_grad), median of {results['repeats']} interleaved calls "
                    "after compilation; float64", "", *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "5 repeats instead of 30", argv)


if __name__ == "__main__":
  main()
