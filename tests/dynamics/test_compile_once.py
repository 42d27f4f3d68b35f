"""Compile once, call many: a repeated eager call with new numbers compiles nothing.

Each entry point is called once to warm its cache, then again with new step
sizes, horizons (T finite and ∞), parameters or PRNG keys of the same static
structure (language, partition, route, shapes), while JAX logs every
compilation; the test fails on any. JAX logs one "Compiling ..." record per
XLA compilation when jax_log_compiles is on.
"""

import logging
import math

import jax
import numpy as np
import pytest

import lagjax as lj

D = 8  # the language of test_closed_form.py: one three_phase kernel serves both files
LANG = lj.occurrence(D)


def tied(alpha_letter, beta_letter):
  """θ tied on occurrence's two groups (letter 0, the rest), with the rest at (0, -0.2)."""
  letter = np.arange(D) == 0
  return {"alpha": np.where(letter, alpha_letter, 0.0),
          "beta": np.where(letter, beta_letter, -0.2)}


def compilations(caplog, call) -> list[str]:
  """The compilations that call() triggers."""
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level(logging.DEBUG, logger="jax"):
    call()
  return [r.getMessage()[:120] for r in caplog.records if "Compiling" in r.getMessage()]


CASES = {
    "three_phase": [lambda: lj.closed_form.three_phase_outcome(LANG, 8.0, 64.0, 1.0, 40),
                    lambda: lj.closed_form.three_phase_outcome(LANG, 5.0, 30.0, 0.7, 17),
                    lambda: lj.closed_form.three_phase_outcome(LANG, 6.0, 50.0, 0.9, math.inf)],
    # α within one quadrature window (|α| <= 1): the same grid size for both θ.
    "population_risk": [lambda: lj.population_risk(LANG, tied(0.3, 0.5)),
                        lambda: lj.population_risk(LANG, tied(-0.8, 1.5))],
    "error_rate": [lambda: lj.error_rate(LANG, tied(0.3, 0.5)),
                   lambda: lj.error_rate(LANG, tied(-0.8, 1.5))],
    # A new init (key) and new step sizes of the same plan shape.
    "train_kqv": [lambda: lj.train_kqv(LANG, lj.plans.joint(0.5, 5), jax.random.key(0)),
                  lambda: lj.train_kqv(LANG, lj.plans.joint(0.3, 5), jax.random.key(1),
                                       scale=0.2)],
    # Strings of length <= 8 only (fixed length 8): one chunk shape for every key.
    "sampled_risk": [
        lambda: lj.sampled_risk(jax.random.key(0), lj.occurrence(D, length=lj.fixed(8)),
                                tied(0.3, 0.5), n_samples=64),
        lambda: lj.sampled_risk(jax.random.key(1), lj.occurrence(D, length=lj.fixed(8)),
                                tied(-0.8, 1.5), n_samples=64)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_repeated_call_with_new_numbers_does_not_compile(name, caplog):
  first, *repeats = CASES[name]
  first()
  for call in repeats:
    assert compilations(caplog, call) == [], name
