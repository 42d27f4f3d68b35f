"""lagjax changes no global state at import; float64 is the user's one-line opt-in.

The flag is process-wide (and this suite turns it on in conftest.py), so the
check runs in a fresh interpreter.
"""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = r"""
import jax
import jax.numpy as jnp
import numpy as np

import lagjax as lj

assert not jax.config.jax_enable_x64, "import lagjax switched JAX to float64"
assert jnp.zeros(1).dtype == jnp.float32
lang = lj.occurrence(5)  # plain data: allowed before the opt-in
theta = {"alpha": np.zeros(5), "beta": np.zeros(5)}
builders = {
    "lj.init_params": lambda: lj.init_params(5),
    "lj.risk_fn": lambda: lj.risk_fn(lang),
    "lj.population_risk": lambda: lj.population_risk(lang, theta),
    "lj.error_rate": lambda: lj.error_rate(lang, theta),
    "lj.sampled_risk": lambda: lj.sampled_risk(jax.random.key(0), lang, theta),
    "lj.train": lambda: lj.train(lang, lj.plans.joint(1.0, 2)),
    "lj.closed_form.three_phase_outcome":
        lambda: lj.closed_form.three_phase_outcome(lang, 1.0, 1.0, 1.0, 2),
    "lj.tasks.get_task": lambda: lj.tasks.get_task("occurrence", d=5),
}
for name, build in builders.items():
  try:
    build()
  except ValueError as error:
    assert str(error).startswith(name + " needs float64"), str(error)
    assert 'jax.config.update("jax_enable_x64", True)' in str(error), str(error)
  else:
    raise AssertionError(name + " ran in float32")
jax.config.update("jax_enable_x64", True)
assert float(lj.population_risk(lang, theta)) == 0.5
print("ok")
"""


@pytest.mark.slow  # a fresh interpreter
def test_import_leaves_float32_and_builders_name_the_opt_in():
  """`import lagjax` leaves jax_enable_x64 off; each builder then raises one clear error
  naming itself and the opt-in line; after the opt-in the same call works."""
  result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == "ok"
