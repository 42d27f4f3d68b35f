"""The task training loop: learning, records, lag metrics, divergence, validation."""

import chex
import jax
import numpy as np
import pytest

import lagjax as lj
from lagjax import models, tasks
from lagjax.dynamics.task_train import make_batched_runner, make_task_runner, train_task

D = 8
TASK = tasks.get_task("occurrence", d=D, max_len=32)


def init(key):
  del key
  return lj.init_params(D), {}


def apply(params, fixed, batch):
  del fixed
  return lj.forward_tokens(params, batch.inputs, batch.mask)


MODEL = models.Model(init, apply, models.direct.PARAM_GROUPS)


def test_online_sgd_learns_occurrence():
  """Joint SGD of the (α, β) model on fresh minibatches reaches high held-out accuracy."""
  run = train_task(TASK, MODEL, lj.plans.joint(1.0, 300), jax.random.key(0),
                   num_seeds=2, batch_size=64, record_every=50, test_size=512)
  chex.assert_shape(run.test_metric, (2, 7))
  np.testing.assert_array_equal(np.asarray(run.steps[0]), np.arange(0, 301, 50))
  assert np.all(np.asarray(run.test_metric[:, 0]) <= 0.6)   # f = 0 at θ0: every sign is 0
  assert np.all(np.asarray(run.test_metric[:, -1]) >= 0.9)
  assert not np.any(np.asarray(run.diverged))
  # Records hold the groups: attention = α (D entries), output = β (D entries).
  chex.assert_shape(run.alpha, (2, 7, D))
  np.testing.assert_array_equal(np.asarray(run.alpha[:, 0]), 0.0)


def test_attention_only_from_zero_never_moves():
  """With β = 0 the attention gradient vanishes (docs/theory.md §4), on samples too."""
  run = train_task(TASK, MODEL, lj.plans.attention_only(5.0, 20), jax.random.key(1),
                   record_every=10, test_size=128)
  np.testing.assert_array_equal(np.asarray(run.alpha), 0.0)
  np.testing.assert_array_equal(np.asarray(run.beta), 0.0)


def test_divergence_is_marked_and_records_stay_finite():
  run = train_task(TASK, MODEL, lj.plans.output_only(1e9, 20), jax.random.key(2),
                   record_every=5, test_size=128, max_loss=1e6)
  assert bool(run.diverged[0]) and int(run.diverged_step[0]) >= 0
  chex.assert_tree_all_finite((run.test_metric, run.alpha, run.beta))


def test_lag_metrics_of_records():
  run = train_task(TASK, MODEL, lj.plans.joint(1.0, 40), jax.random.key(3),
                   record_every=10, test_size=128)
  lag = jax.vmap(lj.metrics.lag_metrics)(run.alpha, run.beta, run.steps)
  chex.assert_shape(lag.r_alpha, (1, 5))
  # Both groups move under joint training: r starts at 0, stays in [0, 1] and peaks at 1.
  for progress in (np.asarray(lag.r_alpha[0]), np.asarray(lag.r_beta[0])):
    assert progress[0] == 0.0 and progress.max() == pytest.approx(1.0, abs=1e-15)
    assert np.all((progress >= 0) & (progress <= 1))
  expected_gap = np.mean(np.asarray(lag.r_beta[0]) - np.asarray(lag.r_alpha[0]))
  assert float(lag.lag_gap[0]) == pytest.approx(expected_gap, abs=1e-15)


@pytest.mark.parametrize("field, value", [("batch_size", 0), ("record_every", 0),
                                          ("test_size", 0)])
def test_bad_options_name_the_field(field, value):
  with pytest.raises(ValueError, match=field):
    make_task_runner(TASK, MODEL, lj.plans.joint(1.0, 2).slots(), num_steps=2,
                     **{field: value})


def test_bad_seed_count():
  with pytest.raises(ValueError, match="num_seeds"):
    train_task(TASK, MODEL, lj.plans.joint(1.0, 2), jax.random.key(0), num_seeds=0)


def test_batched_runner_sweeps_step_sizes_in_one_call():
  """One call over (η, seed) pairs equals separate train_task runs at each η, bit for bit
  up to reduction order (1e-12)."""
  plan = lj.plans.three_phase(1.0, 1.0, 1.0, 10, steps1=5, steps2=5)
  runner = make_batched_runner(TASK, MODEL, plan.slots(), num_steps=plan.total_steps,
                               record_every=5, test_size=64)
  key = jax.random.key(4)
  grid = [0.5, 2.0]
  data = jax.vmap(lambda etas: plan.data(etas=etas))(jax.numpy.asarray([[eta] * 3
                                                                         for eta in grid]))
  together = runner(jax.numpy.stack([jax.random.split(key, 1)[0]] * 2), data)
  for i, eta in enumerate(grid):
    alone = train_task(TASK, MODEL, lj.plans.three_phase(eta, eta, eta, 10, steps1=5,
                                                               steps2=5),
                       key, record_every=5, test_size=64)
    chex.assert_trees_all_close(together.beta[i], alone.beta[0], atol=1e-12)
    chex.assert_trees_all_close(together.risk[i], alone.risk[0], atol=1e-12)
  assert not np.allclose(together.beta[0], together.beta[1])  # η really differs
