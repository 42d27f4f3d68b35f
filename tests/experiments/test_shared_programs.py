"""The binaries' programs are shared by automata of one size (experiments/__init__.py,
docs/decisions/shared-programs.md): with every closed-over array an argument, two census
languages of two states lower to the same program text, so the persistent compilation cache
compiles it once for the census (docs/theory.md §10a)."""

import jax
import jax.numpy as jnp
import pytest
from quick import some_quick

import experiments
import lagjax as lj
from lagjax.analysis import automata, horizons
from lagjax.dynamics import flow, train
from lagjax.models import direct

# Two two-state classes of the census (different letters and accepting states) and one
# three-state class.
TWO_STATES = ("dfa:01.00:1", "dfa:11.10:1")
THREE_STATES = "dfa:01.02.10:1"


def test_the_suite_runs_with_the_binaries_jax_settings():
  assert experiments.HOIST_CONSTANTS["JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS"] == "True"
  assert jax.config.jax_use_simplified_jaxpr_constants
  assert jax.config.jax_embedded_constants_max_bytes == 0


def _languages(names):
  return [automata.from_name(name).language() for name in names]


def _flow_text(lang, layout):
  theta0 = direct.init_params(lang.d, **layout._asdict())
  partition = train.choose_partition(lang, theta0, lj.plans.joint(1.0, 1), "auto")
  run = jax.jit(flow.make_flow(lang, partition, num_phases=1, layout=layout, num_records=4,
                               num_points=128))
  data = lj.plans.flow_form(lj.plans.joint(1.0, 10)).data()
  grouped = direct.group_params(partition, theta0)
  return run.lower(grouped, data, 10.0, -1.0, 0.5).as_text()


def _gd_text(lang, layout):
  plan = lj.plans.joint(1.0, 10)
  theta0 = direct.init_params(lang.d, **layout._asdict())
  partition = train.choose_partition(lang, theta0, plan, "auto")
  run = jax.jit(train.make_runner(lang, plan.slots(), partition, num_steps=10, layout=layout,
                                  num_points=128, zero_one=False))
  grouped = direct.group_params(partition, theta0)
  return run.lower(grouped, jax.random.key(0), plan.data()).as_text()


# The largest layout's programs take longer to trace, and the flow's longer than GD's: the
# quick loop checks GD's under the CLS query.
@pytest.mark.parametrize(
    ("program", "layout"),
    some_quick([(program, horizons.LAYOUTS[layout]) for layout in ("cls", "last+first_last")
                for program in (_gd_text, _flow_text)],
               [(_gd_text, horizons.LAYOUTS["cls"])]),
    ids=["gd-cls", "flow-cls", "gd-last+first_last", "flow-last+first_last"])
def test_two_automata_of_one_size_lower_to_one_program(program, layout):
  first, second = _languages(TWO_STATES)
  assert not jnp.array_equal(lj.risk.automaton.automaton_arrays(first).letters,
                             lj.risk.automaton.automaton_arrays(second).letters)
  assert program(first, layout) == program(second, layout)
  # A different size is a different program (the arrays' shapes are in the text).
  (third,) = _languages((THREE_STATES,))
  assert program(third, layout) != program(first, layout)
