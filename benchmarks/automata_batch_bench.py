"""Census languages of one size batched with vmap against a loop over one shared program
(docs/theory.md §10a; docs/decisions/shared-programs.md).

Issue 38 asks the census to batch automata of equal size and to record the batched-over-
looped throughput. Three-state census languages under one length law lower to one program
whose arrays (transition tables, accepting flags) are its arguments. This benchmark traces
each language's program (`jax.make_jaxpr`, with closed-over arrays as the jaxpr's constants),
checks that the languages share the jaxpr, and runs it two ways after one compiling call each:
- the baseline: a Python loop over the languages through one jitted program that takes the
  constants as arguments (what the census does now: one compilation, one call per language);
- batched: the same program under `jax.vmap` over the constants that differ between the
  languages, one call for all of them.
Cases, on the first B languages of census_sample:3,200,0 under its most common length law:
R and ∇R at one θ (the route), joint GD of 1000 steps at η = 1 (lj.train's runner), and the
joint gradient flow to t = 100 (lj.flow's Rodas5P program; under vmap its adaptive loop runs
until the last language's flow ends). Batched and looped results must agree (route and GD:
1e-12 relative; flow: 1e-6, its tolerances rtol = 1e-8 amplified over the run), else the run
fails. Target: batched ≥ 1× the loop's throughput.

Usage (from the repo root):
  python -m benchmarks.automata_batch_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Closed-over arrays as the jaxpr's constants (JAX's classic tracing), so that make_jaxpr
# hands them over and vmap can batch them; read by JAX at import, hence before it.
os.environ["JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS"] = "False"

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import collections  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.analysis import automata, optimum  # noqa: E402
from lagjax.dynamics import flow, train  # noqa: E402
from lagjax.models import direct  # noqa: E402
from lagjax.risk import risk_fn  # noqa: E402

SAMPLE = "census_sample:3,200,0"
LAYOUTS = ("cls", "cls+first_last")
TARGET_RATIO = 1.0
GD_STEPS, FLOW_TIME = 1000, 100.0
AGREE = {"R and ∇R": 1e-12, f"joint GD, {GD_STEPS} steps": 1e-12,
         f"joint flow to t = {FLOW_TIME:g}": 1e-6}
REPEATS = 3


def languages(size: int) -> tuple[str, list]:
  """The first `size` languages of SAMPLE under its most common length law."""
  by_law = collections.defaultdict(list)
  for entry in automata.expand(SAMPLE):
    lang = entry.language()
    by_law[str(lang.length)].append(lang)
  law, langs = max(by_law.items(), key=lambda item: len(item[1]))
  return law, langs[:size]


def case_builders(layout: str) -> dict:
  """case -> (lang -> (function of arguments only, its arguments)): each closes over the
  language, as the census's programs do."""
  parts = optimum.LAYOUTS[layout]

  def route(lang):
    theta0 = direct.init_params(lang.d, **parts._asdict())
    flat, unravel = jax.flatten_util.ravel_pytree(theta0)
    risk = risk_fn(lang, **parts._asdict()).risk
    theta = flat + 0.1 * jnp.arange(flat.size) / flat.size   # off every symmetric point
    return jax.value_and_grad(lambda z: risk(unravel(z))), (theta,)

  def gd(lang):
    plan = lj.plans.joint(1.0, GD_STEPS)
    theta0 = direct.zero_params(lang.d, parts)
    partition = train.choose_partition(lang, theta0, plan, "auto")
    run = train.make_runner(lang, plan.slots(), partition, num_steps=GD_STEPS, layout=parts,
                            record_every=GD_STEPS // 10, zero_one=False)
    return (lambda grouped, data: run(grouped, jax.random.key(0), data).risk,
            (direct.zero_params(partition.num_groups, parts), plan.data()))

  def flow_case(lang):
    plan = lj.plans.joint(1.0, int(FLOW_TIME))
    theta0 = direct.zero_params(lang.d, parts)
    partition = train.choose_partition(lang, theta0, plan, "auto")
    run = flow.make_flow(lang, partition, num_phases=1, layout=parts, num_records=16)
    arguments = (direct.zero_params(partition.num_groups, parts), plan.flow_form().data(),
                 jnp.float64(FLOW_TIME), jnp.float64(-1.0), jnp.float64(0.5))
    return lambda *args: run(*args).risk, arguments

  names = tuple(AGREE)
  return dict(zip(names, (route, gd, flow_case)))


def shared_program(build, langs):
  """The one jaxpr of `langs`' programs, each language's constants, and which constants
  differ between languages (the batched axes). Raises if the jaxprs differ."""
  traced = []
  for lang in langs:
    fn, arguments = build(lang)
    traced.append(jax.make_jaxpr(fn)(*arguments))
  first = traced[0]
  shapes = [np.shape(c) for c in first.consts]
  for other in traced[1:]:
    if str(other.jaxpr) != str(first.jaxpr) or [np.shape(c) for c in other.consts] != shapes:
      raise AssertionError("the languages do not share one program")
  consts = [[np.asarray(c) for c in t.consts] for t in traced]
  differs = [not all(np.array_equal(c[i], consts[0][i]) for c in consts)
             for i in range(len(shapes))]
  return first.jaxpr, consts, differs, arguments


def measure(build, langs) -> dict:
  """Loop and batched times, and the largest relative disagreement, of one case."""
  jaxpr, consts, differs, arguments = shared_program(build, langs)

  def program(const_values, *args):
    return jax.core.eval_jaxpr(jaxpr, const_values, *jax.tree.leaves(args))

  single = jax.jit(program)
  axes = ([0 if d else None for d in differs],) + (None,) * len(arguments)
  batched = jax.jit(jax.vmap(program, in_axes=axes))
  stacked = [np.stack([c[i] for c in consts]) if d else consts[0][i]
             for i, d in enumerate(differs)]

  def loop():
    return [single(c, *arguments) for c in consts]

  times = harness.interleaved_times([(loop, ()), (batched, (stacked, *arguments))], REPEATS)
  looped, together = loop(), batched(stacked, *arguments)
  worst = 0.0
  for i, outputs in enumerate(looped):
    for one, many in zip(outputs, together):
      one, many = np.asarray(one, np.float64), np.asarray(many[i], np.float64)
      scale = np.maximum(np.abs(one), 1e-300)
      worst = max(worst, float(np.max(np.abs(one - many) / scale)))
  loop_seconds, batched_seconds = np.median(times, axis=0)
  return {"loop_seconds": float(loop_seconds), "batched_seconds": float(batched_seconds),
          "ratio": float(loop_seconds / batched_seconds), "disagreement": worst,
          "batched_constants": int(sum(differs)), "constants": len(differs)}


def run(quick: bool) -> dict:
  size = 4 if quick else 16
  law, langs = languages(size)
  cases = []
  for layout in LAYOUTS:
    for case, build in case_builders(layout).items():
      found = measure(build, langs)
      if not found["disagreement"] <= AGREE[case]:
        raise AssertionError(f"{case}, {layout}: batched and looped disagree by "
                             f"{found['disagreement']:.2g} > {AGREE[case]:g}")
      cases.append({"case": case, "layout": layout, **found,
                    "passed": found["ratio"] >= TARGET_RATIO})
  return {"machine": harness.machine(), "quick": quick, "law": law, "languages": len(langs),
          "cases": cases}


def table(results: dict) -> str:
  rows = [(case["case"], case["layout"],
           f"{case['batched_constants']}/{case['constants']}",
           harness.format_seconds(case["loop_seconds"]),
           harness.format_seconds(case["batched_seconds"]),
           f"{case['ratio']:.2f}× (target ≥ {TARGET_RATIO:g}: {harness.status(case['passed'])})",
           f"{case['disagreement']:.1e}")
          for case in results["cases"]]
  lines = harness.markdown_table(("case", "layout", "batched constants", "loop",
                                  "vmap", "loop / vmap", "disagreement (rel.)"), rows)
  return "\n".join([harness.machine_line(results["machine"]),
                    f"{results['languages']} languages of {SAMPLE} under {results['law']}, "
                    f"one shared program each way, after one compiling call; medians of "
                    f"{REPEATS} round-robin repeats; float64", "", *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "4 languages instead of 16", argv)


if __name__ == "__main__":
  main()
