"""The paper's six tasks (docs/theory.md section 7): samplers against direct definitions."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax import tasks

NAMES = ("occurrence", "or", "and", "even_pairs", "icl_bigram", "slr")
LANGUAGE_TASKS = ("occurrence", "or", "and")
BATCH = 2000  # one batch size for the occurrence family: one compilation per task


@functools.cache
def task(name, **options):
  """Tasks are built once per module, so each jitted sampler compiles once per batch size."""
  return tasks.get_task(name, **options)


@functools.cache
def batch(name, batch_size, seed=0, **options):
  return jax.device_get(task(name, **options).sample(jax.random.PRNGKey(seed), batch_size))


def strings(sample):
  """The unpadded token strings of a batch, as Python lists."""
  return [list(row[:n]) for row, n in zip(np.asarray(sample.inputs), np.asarray(sample.lengths))]


def test_registry_lists_the_six_tasks():
  assert tuple(tasks.TASKS) == NAMES
  for name in NAMES:
    assert task(name).name == name


def test_declared_language_is_the_built_tasks_language():
  """TaskSpec.language holds exactly for the tasks whose built Task carries a Language, and
  that Language samples the task's labels: its label_tokens gives the batch's targets."""
  assert tasks.names(language=True) == ("occurrence", "or", "and", "even_pairs")
  for name in NAMES:
    built = task(name)
    assert ("language" in built.extras) == tasks.spec(name).language, name
    if tasks.spec(name).language:
      sample = batch(name, 64)
      labels = built.extras["language"].label_tokens(sample.inputs, sample.mask)
      np.testing.assert_array_equal(np.asarray(labels), np.asarray(sample.targets))
      assert built.extras["language"].length == built.length


def test_declared_direct_layout_builds_the_direct_model():
  """direct_layout is a valid set of lj.init_params options; None for the tasks the direct
  (α, β) model cannot express; an unknown attribute or task is named."""
  assert tasks.names(direct_layout=None) == ("icl_bigram", "slr")
  for name in tasks.names(language=True):
    params = lj.init_params(2, **tasks.spec(name).direct_layout)
    assert "alpha_cls" in params
  assert tasks.names(previous_token=True) == ("icl_bigram",)
  with pytest.raises(ValueError, match=r"unknown TaskSpec attribute\(s\) \['exact'\]"):
    tasks.names(exact=True)
  with pytest.raises(ValueError, match="unknown task 'parity'"):
    tasks.spec("parity")


def test_unknown_task_and_option_are_named():
  with pytest.raises(ValueError, match=r"unknown task 'parity'.*'even_pairs'.*'slr'"):
    tasks.get_task("parity")
  with pytest.raises(ValueError, match=r"unknown option\(s\) \['widht'\].*'m'"):
    tasks.get_task("slr", widht=50)


BAD_OPTIONS = [
    ("occurrence", {"d": 1}, "d"),
    ("occurrence", {"d": 2.5}, "d"),
    ("occurrence", {"letter": 50}, "letter"),
    ("occurrence", {"max_len": 0}, "max_len"),
    ("occurrence", {"pi": (0.5, 0.5)}, "pi"),
    ("or", {"letters": (0, 99)}, "letters"),
    ("or", {"letters": 3}, "letters"),
    ("and", {"letters": (1, 1)}, "letters"),
    ("and", {"loss": "hinge"}, "loss"),
    ("or", {"d": 3}, "length"),  # no geometric law balances OR at d = 3
    ("even_pairs", {"length": 3}, "length"),
    ("even_pairs", {"max_len": True}, "max_len"),
    ("icl_bigram", {"k": 1}, "k"),
    ("icl_bigram", {"max_len": 2.0}, "max_len"),
    ("slr", {"m": 1}, "m"),
    ("slr", {"gamma": 0.0}, "gamma"),
    ("slr", {"gamma": math.inf}, "gamma"),
    ("slr", {"noise_std": -0.1}, "noise_std"),
    ("slr", {"seed": -1}, "seed"),
    ("slr", {"length": lj.fixed(10), "max_len": 5}, "max_len"),
]


@pytest.mark.parametrize("name, options, field", BAD_OPTIONS)
def test_bad_options_raise_naming_the_field(name, options, field):
  with pytest.raises(ValueError, match=rf"^{field} "):
    tasks.get_task(name, **options)


@pytest.mark.parametrize("name", NAMES)
def test_masks_match_lengths_and_padding_is_zero(name):
  t = task(name)
  sample = batch(name, 64)
  lengths = np.asarray(sample.lengths)
  assert lengths.min() >= 1 and lengths.max() <= t.max_len
  np.testing.assert_array_equal(sample.mask, np.arange(t.max_len)[None, :] < lengths[:, None])
  inputs = np.asarray(sample.inputs)
  assert inputs.shape[:2] == (64, t.max_len)
  assert not np.any(inputs[~np.asarray(sample.mask)])
  assert sample.targets.shape == (64,)


def test_lengths_follow_the_law_conditioned_on_max_len():
  """Truncation conditions on n <= max_len (it does not clip): P(n) ∝ p(1-p)^(n-1) on 1..3."""
  t = tasks.get_task("even_pairs", length=lj.geometric(0.5), max_len=3)
  lengths = np.asarray(t.sample(jax.random.PRNGKey(1), 4000).lengths)
  expected = np.array([4.0, 2.0, 1.0]) / 7.0
  observed = np.bincount(lengths, minlength=4)[1:] / lengths.size
  stderr = np.sqrt(expected * (1 - expected) / lengths.size)
  assert np.all(np.abs(observed - expected) < 5 * stderr), (observed, expected)
  assert t.truncated_mass == pytest.approx(0.125)


def test_options_rebuild_the_same_task():
  """task.options resolves every default (the balanced p, max_len, …) and rebuilds the task."""
  for name in NAMES:
    t = task(name)
    rebuilt = tasks.get_task(name, **t.options)
    assert dict(rebuilt.options) == dict(t.options)
    assert (rebuilt.max_len, rebuilt.length) == (t.max_len, t.length)
  # Derived constants too: SLR's k*, v* come from the seed, AND's p from bisection.
  for name in ("and", "slr"):
    rebuilt = tasks.get_task(name, **task(name).options)
    sample = rebuilt.sample(jax.random.PRNGKey(0), 64)
    np.testing.assert_array_equal(sample.inputs, batch(name, 64).inputs)
    np.testing.assert_array_equal(sample.targets, batch(name, 64).targets)


# Occurrence, OR, AND.


def direct_label(kind, letters, string):
  present = [a in set(string) for a in letters]
  return 1.0 if (all(present) if kind == "and" else any(present)) else -1.0


@pytest.mark.parametrize("name", LANGUAGE_TASKS)
def test_language_labels_match_definition_and_label_counts(name):
  t = task(name)
  lang = t.extras["language"]
  sample = batch(name, BATCH)
  expected = np.array([direct_label(name, lang.letters, s) for s in strings(sample)])
  np.testing.assert_array_equal(sample.targets, expected)
  counts = np.array([np.bincount(s, minlength=lang.d) for s in strings(sample)])
  np.testing.assert_array_equal(lang.label_counts(counts), expected)


@pytest.mark.parametrize("name", LANGUAGE_TASKS)
def test_default_config_is_balanced(name):
  """P(y = +1) = 1/2 under the balanced geometric law, within 5 standard errors."""
  t = task(name)
  assert t.options["d"] == 50
  assert lj.data.occurrence.OccurrenceLanguage(**{f: getattr(t.extras["language"], f) for f in (
      "kind", "d", "letters", "pi", "length")}).positive_rate() == pytest.approx(0.5, abs=1e-9)
  positive = np.mean(np.asarray(batch(name, BATCH).targets) > 0)
  assert abs(positive - 0.5) < 5 * 0.5 / math.sqrt(BATCH), positive


def test_and_default_geometric_matches_theory():
  assert task("and").length.p == pytest.approx(0.0113230, abs=1e-7)
  assert task("occurrence").length.p == pytest.approx(1 / 49)
  assert task("or").length.p == pytest.approx(2 / 48)


# Even pairs.


def test_even_pairs_labels_match_the_two_definitions():
  sample = batch("even_pairs", 500)
  labels = np.asarray(sample.targets)
  for string, label in zip(strings(sample), labels):
    changes = sum(a != b for a, b in zip(string[:-1], string[1:]))
    assert label == (1.0 if changes % 2 == 0 else -1.0)
    assert (changes % 2 == 0) == (string[0] == string[-1])
  assert set(np.unique(sample.inputs)) <= {0, 1}
  assert 0.3 < np.mean(labels > 0) < 0.7


# Classification loss and metric.


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_classification_loss_and_accuracy(loss):
  t = tasks.get_task("occurrence", loss=loss)
  sample = batch("occurrence", BATCH)
  y = jnp.asarray(sample.targets)
  assert t.metric(y, sample)["accuracy"] == 1.0
  assert t.metric(-y, sample)["accuracy"] == 0.0
  assert t.metric(jnp.zeros_like(y), sample)["accuracy"] == 0.0  # sign 0 is an error
  expected = 0.0 if loss == "squared" else np.log1p(np.exp(-1.0))
  assert float(t.loss(y, sample)) == pytest.approx(expected)
  with pytest.raises(ValueError, match="outputs must have shape"):
    t.loss(y[:, None], sample)


# ICL bigram.


def hand_bigram(string, k):
  last = string[-1]
  counts = np.zeros(k)
  for current, following in zip(string[:-1], string[1:]):
    if current == last:
      counts[following] += 1
  return (counts + 1) / (counts.sum() + k)


def test_bayes_bigram_on_a_hand_example():
  # Transitions out of the last token 0: 0→1, 0→2, 0→1; padding (2, 0) must not count.
  tokens = np.array([[0, 1, 0, 2, 0, 1, 1, 0, 2, 0],
                     [2, 2, 2, 0, 0, 0, 0, 0, 0, 0]])
  mask = np.array([[True] * 8 + [False] * 2, [True] * 3 + [False] * 7])
  expected = np.array([[1 / 6, 3 / 6, 2 / 6], [1 / 5, 1 / 5, 3 / 5]])
  q = tasks.bayes_bigram(tokens, mask, 3)
  np.testing.assert_allclose(q, expected, rtol=1e-14)
  np.testing.assert_allclose(q, [hand_bigram(s, 3) for s in ([0, 1, 0, 2, 0, 1, 1, 0], [2, 2, 2])])


def test_bayes_bigram_on_sampled_sequences():
  t = task("icl_bigram", k=4, length=lj.geometric(0.1), max_len=40)
  sample = batch("icl_bigram", 64, k=4, length=lj.geometric(0.1), max_len=40)
  q = np.asarray(tasks.bayes_bigram(sample.inputs, sample.mask, 4))
  np.testing.assert_allclose(q.sum(axis=-1), 1.0, rtol=1e-14)
  np.testing.assert_allclose(q, [hand_bigram(s, 4) for s in strings(sample)], rtol=1e-14)
  assert set(np.unique(sample.targets)) <= set(range(4))
  assert t.n_outputs == 4


def test_icl_sequences_carry_in_context_structure():
  """The Bayes predictor beats the uniform one by E[log k - H(Dir(1))] ≈ 0.27 nats at k = 3."""
  options = {"k": 3, "length": lj.fixed(60)}
  t = task("icl_bigram", **options)
  sample = batch("icl_bigram", 500, **options)
  uniform = t.metric(jnp.zeros((500, 3)), sample)
  assert uniform["cross_entropy"] == pytest.approx(np.log(3))
  assert uniform["bayes_cross_entropy"] < np.log(3) - 0.12
  q = tasks.bayes_bigram(sample.inputs, sample.mask, 3)
  expected_kl = float(np.mean(np.sum(q * np.log(3 * q), axis=-1)))
  assert float(uniform["kl_to_bayes"]) == pytest.approx(expected_kl, rel=1e-12)
  at_bayes = t.metric(jnp.log(q), sample)
  assert at_bayes["kl_to_bayes"] == pytest.approx(0.0, abs=1e-14)
  assert float(t.loss(jnp.log(q), sample)) == pytest.approx(at_bayes["bayes_cross_entropy"])


def test_embed_current_previous():
  tokens = np.array([[2, 0, 1, 1]])
  mask = np.array([[True, True, True, False]])
  features = np.asarray(tasks.embed_current_previous(tokens, mask, 3))
  eye = np.eye(3)
  expected = np.stack([np.concatenate([eye[2], np.zeros(3)]), np.concatenate([eye[0], eye[2]]),
                       np.concatenate([eye[1], eye[0]]), np.zeros(6)])
  np.testing.assert_array_equal(features[0], expected)


# SLR.


def test_slr_target_is_the_projection_at_the_location():
  options = {"noise_std": 0.0, "length": lj.geometric(0.2), "max_len": 12}
  t = task("slr", **options)
  k_star, v_star = t.extras["k_star"], t.extras["v_star"]
  assert abs(k_star @ v_star) < 1e-14
  np.testing.assert_allclose([k_star @ k_star, v_star @ v_star], 1.0, rtol=1e-14)
  sample = batch("slr", 256, **options)
  location = np.asarray(sample.info["location"])
  assert np.all(location < np.asarray(sample.lengths)) and np.all(location >= 0)
  x_at_location = np.asarray(sample.inputs)[np.arange(256), location]
  np.testing.assert_allclose(sample.targets, x_at_location @ v_star, rtol=1e-12, atol=1e-12)
  # X_J · k* ~ N(√(m/2), γ²) = N(5, 1); any other position is N(0, 1).
  along_k = x_at_location @ k_star
  assert abs(along_k.mean() - 5.0) < 5 / math.sqrt(256)
  others = np.asarray(sample.mask).copy()
  others[np.arange(256), location] = False
  assert abs((np.asarray(sample.inputs)[others] @ k_star).mean()) < 5 / math.sqrt(others.sum())


def test_slr_defaults_and_risk():
  t = task("slr")
  assert (t.input_dim, t.max_len, t.kind) == (50, 10, "regression")
  sample = batch("slr", 64)
  assert np.all(np.asarray(sample.lengths) == 10)
  y = jnp.asarray(sample.targets)
  assert t.metric(y, sample)["risk"] == 0.0
  assert float(t.loss(y + 2.0, sample)) == pytest.approx(2.0)
