"""Sweeps under gradient flow (config.dynamics = "flow", engine "flow"; docs/theory.md §5).

A phase of k steps at η runs as the flow at rate η for k time units, so an output-only row
(η, T) is the linear phase at α = 0 flowed for time ηT: its risk is known in closed form
(output_phase.output_flow_path). The flow engine runs at its default tolerances (rtol 1e-8,
atol 1e-10). At t1, a step end, the linear contracting ODE's global error stays within rtol
(measured: 1.4e-9 relative on the risk). The records between step ends come from the
solver's dense output, an interpolant of lower order than the method (measured: 1.9e-7);
the bounds below leave a margin of five to ten.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from experiments import sweep as sweep_binary
from experiments.configs import sweep as sweep_config
from lagjax import sweep
from lagjax.dynamics import output_phase
from lagjax.models import direct

D, STEPS = 3, 10
ETAS = np.array([0.5, 1.0, 4.0])
END_RTOL, PATH_RTOL = 1e-8, 1e-6


@pytest.mark.slow
def test_output_only_sweep_under_flow_equals_closed_form(tmp_path):
  """Every row's final risk and risk path equal the closed-form linear phase at the
  record times ηs (s the GD step of each record), and the engine column says flow."""
  lang = lj.occurrence(D)
  table = sweep.build_table(["output_only"], [D], [STEPS], {"eta": ETAS})
  results = sweep.run_sweep(table, str(tmp_path), lj.occurrence, chunk_size=4, batch_size=4,
                            num_records=4, engine="flow")
  assert results["engine"].tolist() == ["flow"] * ETAS.size
  partition = lj.partition.of_language(lang)
  hessian, target = jax.jit(lj.risk.moments.moments_fn(lang, partition))(
      direct.zero_params(partition.num_groups))
  steps = results["record_steps"][0]
  for row, eta in enumerate(ETAS):
    _, exact = output_phase.output_flow_path(hessian, target, jnp.asarray(partition.sizes),
                                             jnp.zeros(partition.num_groups), 1.0,
                                             jnp.asarray(eta * steps, jnp.float64))
    _, path = sweep.risk_paths(results, [row])
    np.testing.assert_allclose(path[0], np.asarray(exact), rtol=PATH_RTOL, atol=0)
    np.testing.assert_allclose(results["final_risk"][row], float(exact[-1]), rtol=END_RTOL)
  assert not results["diverged"].any()


def test_dynamics_field_is_validated():
  """config.dynamics outside {gd, flow} fails in one line naming the field."""
  config = sweep_config.get_config()
  config.dynamics = "euler"
  with pytest.raises(ValueError, match=r"config.dynamics must be one of \('gd', 'flow'\)"):
    sweep_binary.validate(config)
