"""The committed counting results reproduce (issue 37 item 4, docs/results/counting/).

- The script's --quick rows of majority and Dyck-1 under the CLS query, recomputed, equal
  the committed counting_quick.csv to 1e-10 (same code path as the full run, short horizon).
- A row is what a direct lj.train call gives: majority's joint GD row at its chosen η, and
  Dyck-1's (balanced risk, through the weighted loss) with position tables.
- The weighted loss the script hands lj.optimum and lj.train is the count route's
  class_weights="balanced" risk (to 1e-12 at a random θ).
"""

import csv
import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "results" / "counting"
# The same program on the same inputs: differences are XLA's reduction order at most,
# ~1e-15 on risks of order 1.
TOLERANCE = 1e-10


def script():
  spec = importlib.util.spec_from_file_location("counting_results", RESULTS / "counting.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def committed(language, layout):
  with open(RESULTS / "counting_quick.csv") as handle:
    return {row["plan"]: row for row in csv.DictReader(handle)
            if row["language"] == language and row["layout"] == layout}


def test_weighted_loss_is_the_balanced_route():
  counting = script()
  lang = lj.languages.from_spec("dyck1")
  layout = dict(query="cls", positions="first_last")
  params = lj.init_params(2, positions="first_last")
  keys = jax.random.split(jax.random.key(3), len(params))
  params = {name: 0.7 * jax.random.normal(key, jnp.shape(value))
            for key, (name, value) in zip(keys, sorted(params.items()))}
  balanced = lj.risk_fn(lang, route="count", class_weights="balanced", **layout).risk(params)
  positive = float(lang.positive_rate())
  weighted = counting.WeightedSquared(0.5 / positive, 0.5 / (1 - positive))
  through_loss = lj.risk_fn(lang, route="count", loss=weighted, class_weights="population",
                            **layout).risk(params)
  assert abs(float(balanced) - float(through_loss)) <= 1e-12
  assert abs(float(balanced) - 0.5) > 1e-3   # a θ where the weights matter


@pytest.mark.slow
@pytest.mark.parametrize("language", ["majority", "dyck1"])
def test_quick_rows_reproduce(language):
  counting = script()
  lang = lj.languages.from_spec(language)
  rows, *_ = counting.rows_of(lang, language, "cls", dict(counting.QUICK))
  saved = committed(language, "cls")
  assert sorted(saved) == sorted(row["plan"] for row in rows)
  for row in rows:
    old = saved[row["plan"]]
    # A plan that never leaves R(0) ties at every grid point (Dyck-1's three_phase sits at
    # ½ for every η2): its pick among exact ties is decided by roundoff, so only a plan that
    # moved must pick the same η.
    if abs(float(old["final_risk"]) - float(old["risk_at_zero"])) > TOLERANCE:
      assert old["etas"] == row["etas"]
    for column in ("final_risk", "optimum_risk", "excess", "risk_at_zero"):
      assert abs(float(old[column]) - row[column]) <= TOLERANCE, (row["plan"], column)
    assert old["learned"] == str(row["learned"])
    assert old["tau_eps"] == str(row["tau_eps"])


@pytest.mark.slow
@pytest.mark.parametrize("language, layout", [("majority", "cls"),
                                              ("dyck1", "cls+first_last")])
def test_a_row_is_a_direct_train_call(language, layout):
  """The script's joint row at its chosen η is lj.train's joint GD run (θ0 = 0, count route)."""
  counting = script()
  lang = lj.languages.from_spec(language)
  steps = counting.QUICK["steps"]
  entries, grid, trace = counting.train_all(lang, layout, steps, counting.QUICK["records"])
  index = [i for i, (plan, _, _) in enumerate(entries) if plan == "joint"][0]
  eta = entries[index][1][0]
  theta0 = lj.models.direct.zero_params(lang.d, counting.atlas.LAYOUTS[layout])
  run = lj.train(lang, lj.plans.joint(eta, steps), theta0, route="count",
                 loss=counting.objective_loss(lang))
  direct = np.asarray(run.risk)[np.asarray(grid)]
  assert np.max(np.abs(direct - np.asarray(trace.risk[index]))) <= TOLERANCE
  assert np.ptp(direct) > 1e-3      # the run moves: not a comparison of constants


def test_information_floors():
  """Majority's label is a function of the counts: floor 0 in every layout. Dyck-1's floor
  falls as the layout reads more (counts ⊂ counts + last token ⊂ counts + both ends; position
  tables read both ends under either query) and lies below every committed R*."""
  counting = script()
  majority, dyck1 = (lj.languages.from_spec(name) for name in ("majority", "dyck1"))
  assert all(abs(counting.information_floor(majority, layout)) <= 1e-12
             for layout in counting.LAYOUTS)
  floor = {layout: counting.information_floor(dyck1, layout) for layout in counting.LAYOUTS}
  assert floor["cls"] > floor["last"] > floor["last+first_last"] > 0
  assert abs(floor["cls+first_last"] - floor["last+first_last"]) <= 1e-12
  with open(RESULTS / "counting.csv") as handle:
    optima = {row["layout"]: float(row["optimum_risk"]) for row in csv.DictReader(handle)
              if row["language"] == "dyck1"}
  assert optima and all(floor[layout] <= value for layout, value in optima.items())
