"""The general single-layer transformer and the SLR model (docs/theory.md sections 2 and 7)."""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lagjax as lj
from lagjax import models, plans, runner
from lagjax.models import direct as model
from lagjax.models import slr
from lagjax.models import transformer as tf


def random_strings(rng, vocab, batch, n_max, min_len=1):
  """Padded tokens (batch, n_max), lengths in min_len..n_max, padding holding arbitrary tokens."""
  lengths = rng.integers(min_len, n_max + 1, size=batch)
  tokens = rng.integers(0, vocab, size=(batch, n_max))
  return tokens, np.arange(n_max)[None, :] < lengths[:, None]


def random_params(rng, config, scale=1.0):
  """N(0, scale²) params and the fixed embeddings of tf.init (one-hot, or N(0, 1/width) rows
  drawn here), with init's shapes; built in numpy, since compiling tf.init for every config
  would cost more than the tests themselves (init has tests of its own)."""
  seed = int(rng.integers(1 << 30))
  table = np.random.default_rng(seed).standard_normal((config.vocab + 1, config.token_dim))
  params = {name: jnp.asarray(scale * rng.standard_normal(shape))
            for name, shape in sorted(tf.param_shapes(config).items())}
  fixed = tf._fixed_embeddings(config, table)   # init's rule, on a numpy draw
  chex.assert_trees_all_equal_shapes_and_dtypes(
      (params, fixed), jax.eval_shape(lambda key: tf.init(key, config), jax.random.key(0)))
  return params, fixed


# ---------------------------------------------------------------------------
# Agreement with the direct (α, β) model and with a loop over positions.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("embedding,width", [("one_hot", None), ("one_hot", 9), ("random", 4)])
@pytest.mark.parametrize("cls", [True, False])
@pytest.mark.parametrize("attention", tf.ATTENTIONS)
def test_reduces_to_direct_model(embedding, width, cls, attention):
  """One head, no positions, CLS query, scalar output: f equals model.forward_tokens(to_direct)."""
  rng = np.random.default_rng(0)
  config = tf.TransformerConfig(vocab=6, width=width, embedding=embedding, key_dim=3, cls=cls,
                                attention=attention)
  params, fixed = random_params(rng, config)
  tokens, mask = random_strings(rng, 6, batch=64, n_max=12)

  @jax.jit  # one compiled program per case
  def both_models(params):
    direct = tf.to_direct(params, fixed, config)
    return direct, model.forward_tokens(direct, tokens, mask), tf.apply(params, fixed, config,
                                                                        tokens, mask)

  direct, expected, got = both_models(params)
  assert model.has_cls(direct) == cls
  chex.assert_shape(got, (64,))
  assert np.std(np.asarray(expected)) > 1e-3  # a non-constant function is being compared
  chex.assert_trees_all_close(got, expected, atol=1e-12, rtol=0)


def reference_apply(params, fixed, config, tokens, mask):
  """The model one string, one position, one head at a time in numpy / math."""
  p = jax.tree.map(np.asarray, params)
  table, e_cls = np.asarray(fixed["E"]), np.asarray(fixed["e_cls"])
  t, m, k = config.token_dim, config.dim, config.head_key_dim
  outputs = []
  for row, keep in zip(tokens, mask):
    real = [i for i in range(len(row)) if keep[i]]
    stream = {}
    for i in real:
      x = np.zeros(m)
      x[:t] = table[row[i]]
      if config.previous_token and i - 1 in real:
        x[t:2 * t] = table[row[i - 1]]
      if config.positional == "first_last":
        x[m - 2] += i == real[0]
        x[m - 1] += i == real[-1]
      if config.positional == "learned":
        x += p["pos"][i]
      if config.positional == "sinusoidal":
        for j in range(m):
          angle = i / 10000 ** (2 * (j // 2) / m)
          x[j] += math.sin(angle) if j % 2 == 0 else math.cos(angle)
      stream[i] = x
    x_cls = np.concatenate([e_cls, np.zeros(m - t)])
    query = x_cls if config.query == "cls" else stream[real[-1]]
    keys = [stream[i] for i in real] + ([x_cls] if config.cls else [])
    total = np.zeros(config.outputs)
    for h in range(config.heads):
      if config.attention == "direct":
        u = p["scores"][h]
        scores = [float(x @ u) if config.query == "cls" else float(query @ u @ x) for x in keys]
        value_map = p["values"][h]
      else:
        q = query @ p["W_Q"][h]
        scores = [float(q @ (x @ p["W_K"][h])) / math.sqrt(k) for x in keys]
        value_map = p["W_V"][h] @ p["W_O"][h] @ p["readout"].reshape(m, config.outputs)
      top = max(scores)
      e = [math.exp(s - top) for s in scores]
      total += sum(w / sum(e) * (x @ value_map) for w, x in zip(e, keys))
    outputs.append(total[0] if config.outputs == 1 else total)
  return np.array(outputs)


REFERENCE_CONFIGS = {
    "two_heads_learned": dict(vocab=3, heads=2, key_dim=2, positional="learned", max_len=5),
    "learned_logits_no_cls": dict(vocab=3, heads=2, positional="learned", max_len=6, outputs=3,
                                  cls=False),
    "random_last_previous": dict(vocab=4, width=3, embedding="random", heads=2, key_dim=2,
                                 query="last", previous_token=True, outputs=2),
    "sinusoidal": dict(vocab=3, heads=2, positional="sinusoidal"),
    "first_last": dict(vocab=2, heads=3, key_dim=2, positional="first_last"),
    "direct_cls": dict(vocab=3, heads=2, attention="direct", positional="learned", max_len=5),
    "direct_last_previous": dict(vocab=4, heads=2, attention="direct", query="last",
                                 previous_token=True, outputs=2),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_CONFIGS))
def test_matches_loop_over_positions(name):
  """apply (vectorized, stabilized) equals a plain loop over strings, heads and positions."""
  rng = np.random.default_rng(1)
  config = tf.TransformerConfig(**REFERENCE_CONFIGS[name])
  params, fixed = random_params(rng, config, scale=0.7)
  tokens, mask = random_strings(rng, config.vocab, batch=6, n_max=5)
  got = tf.apply(params, fixed, config, tokens, mask)
  chex.assert_shape(got, (6,) if config.outputs == 1 else (6, config.outputs))
  chex.assert_trees_all_close(got, reference_apply(params, fixed, config, tokens, mask),
                              atol=1e-12, rtol=1e-12)


def test_jit_and_leading_axes_agree_with_plain():
  """jit (config static) and an extra leading axis give the same outputs as a plain call."""
  rng = np.random.default_rng(2)
  config = tf.TransformerConfig(vocab=4, heads=2, positional="learned", max_len=7, outputs=2)
  params, fixed = random_params(rng, config)
  tokens, mask = random_strings(rng, 4, batch=6, n_max=7)
  plain = tf.apply(params, fixed, config, tokens, mask)
  jitted = jax.jit(tf.apply, static_argnums=2)(params, fixed, config, tokens, mask)
  stacked = tf.apply(params, fixed, config, tokens.reshape(2, 3, 7), mask.reshape(2, 3, 7))
  chex.assert_trees_all_close(jitted, plain, atol=1e-13)
  chex.assert_trees_all_close(stacked.reshape(6, 2), plain, atol=1e-13)


TOKEN_PATH_CONFIGS = dict(
    REFERENCE_CONFIGS,
    random_first_last_previous=dict(vocab=5, width=4, embedding="random", heads=2,
                                    positional="first_last", previous_token=True),
    last_query_first_last_logits=dict(vocab=3, heads=2, query="last", positional="first_last",
                                      outputs=3),
    last_query_learned=dict(vocab=4, heads=1, query="last", positional="learned", max_len=6,
                            cls=False),
    # Above ONE_HOT_MAX_VOCAB the lookups gather and the masses are segment sums.
    large_vocab_last_query=dict(vocab=70, width=6, embedding="random", heads=2, query="last",
                                positional="first_last", previous_token=True))


@pytest.mark.parametrize("name", sorted(TOKEN_PATH_CONFIGS))
def test_token_lookup_path_matches_the_stream_path(name):
  """Integer tokens take the table-lookup path, continuous E[w] the explicit stream: same
  outputs and parameter gradients to rounding (both are sums of the same O(1) terms)."""
  rng = np.random.default_rng(3)
  config = tf.TransformerConfig(**TOKEN_PATH_CONFIGS[name])
  params, fixed = random_params(rng, config, scale=0.7)
  tokens, mask = random_strings(rng, config.vocab, batch=8, n_max=config.max_len or 6)
  mask[0] = False  # an empty row as well
  embedded = fixed["E"][tokens]

  def loss(p, inputs):
    return jnp.sum(jnp.sin(tf.apply(p, fixed, config, inputs, mask)))

  @jax.jit  # both paths, outputs and gradients, in one compiled program
  def outputs_and_gradients(params, embedded, tokens):
    return ((tf.apply(params, fixed, config, embedded, mask),
             tf.apply(params, fixed, config, tokens, mask)),
            (jax.grad(loss)(params, embedded), jax.grad(loss)(params, tokens)))

  (stream, lookup), (stream_grad, lookup_grad) = outputs_and_gradients(params, embedded, tokens)
  chex.assert_trees_all_close(stream, lookup, atol=1e-12)
  chex.assert_trees_all_close(stream_grad, lookup_grad, atol=1e-11)


def test_init_shapes_and_fixed_embeddings():
  config = tf.TransformerConfig(vocab=5, heads=3, key_dim=2, outputs=4, positional="learned",
                                max_len=8)
  params, fixed = tf.init(jax.random.key(0), config)
  m = 6  # five tokens + CLS
  assert config.dim == m
  chex.assert_shape([params["W_Q"], params["W_K"]], (3, m, 2))
  chex.assert_shape([params["W_V"], params["W_O"]], (3, m, m))
  chex.assert_shape(params["readout"], (m, 4))
  chex.assert_shape(params["pos"], (8, m))
  chex.assert_trees_all_equal(fixed["E"], jnp.eye(5, 6))
  chex.assert_trees_all_equal(fixed["e_cls"], jnp.eye(6)[5])
  random = tf.TransformerConfig(vocab=50, width=400, embedding="random")
  _, fixed = tf.init(jax.random.key(1), random)
  # N(0, 1/m) entries: squared row norms average about 1.
  assert abs(float((fixed["E"] ** 2).sum(1).mean()) - 1.0) < 0.05


def test_parameter_groups_are_declared_and_followed_by_plans():
  """W_Q, W_K (SLR: κ) are the attention group; everything else, positions included, is output;
  an attention-only plan step moves exactly the attention group."""
  config = tf.TransformerConfig(vocab=3, positional="learned", max_len=4)
  params, fixed = tf.init(jax.random.key(0), config)
  labels = functools.partial(models.group_labels, tf.PARAM_GROUPS)
  attention = {k for k, group in labels(params).items() if group == "attention"}
  assert attention == {"W_Q", "W_K"}
  slr_params = slr.init(jax.random.key(1), 3)
  assert {k for k, g in models.group_labels(slr.PARAM_GROUPS, slr_params).items()
          if g == "attention"} == {"kappa"}
  tokens, mask = np.array([[0, 1, 2, 1]]), np.array([[True] * 4])
  tx = plans.attention_only(0.5, 1).transformation(labels)

  @jax.jit  # the gradient and the plan's step in one compiled program
  def step(params):
    grads = jax.grad(lambda p: tf.apply(p, fixed, config, tokens, mask).sum())(params)
    updates, _ = tx.update(grads, tx.init(params), params)
    return optax.apply_updates(params, updates)

  new = step(params)
  for name in params:
    moved = not np.allclose(new[name], params[name])
    assert moved == (name in attention), name


# ---------------------------------------------------------------------------
# SLR.
# ---------------------------------------------------------------------------


def test_slr_hand_computed():
  """κ = (1, 0), ν = (0, 2); X_1 = (0, 1), X_2 = (log 3, 1/2), X_3 masked with a huge score:
  weights 1/4, 3/4 on values 2, 1, so f = 1/2 + 3/4 = 5/4."""
  params = {"kappa": jnp.array([1.0, 0.0]), "nu": jnp.array([0.0, 2.0])}
  inputs = jnp.array([[[0.0, 1.0], [math.log(3.0), 0.5], [1e6, 7.0]]])
  mask = jnp.array([[True, True, False]])
  chex.assert_trees_all_close(slr.apply(params, inputs, mask), jnp.array([1.25]), atol=1e-14)
  # Unmasked, the third position takes all the weight: f = ⟨X_3, ν⟩ = 14.
  chex.assert_trees_all_close(slr.apply(params, inputs), jnp.array([14.0]), atol=1e-12)


def test_slr_init_and_zero_init():
  params = slr.init(jax.random.key(0), 7)
  chex.assert_shape([params["kappa"], params["nu"]], (7,))
  zero = slr.init(jax.random.key(0), 7, scale=0.0)
  inputs = np.random.default_rng(7).standard_normal((3, 5, 7))
  chex.assert_trees_all_equal(slr.apply(zero, inputs), jnp.zeros(3))
  # At zero the output group still has a gradient (zero is not a saddle).
  grad = jax.grad(lambda p: slr.apply(p, inputs).sum())(zero)
  assert float(jnp.abs(grad["nu"]).sum()) > 0


# ---------------------------------------------------------------------------
# Numerics.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [True, False])
def test_stable_for_huge_weights_and_empty_rows(cls):
  """Scores of order 1e80 and rows with no real token: finite outputs and gradients."""
  rng = np.random.default_rng(4)
  config = tf.TransformerConfig(vocab=4, heads=2, cls=cls, positional="first_last")
  params, fixed = random_params(rng, config, scale=1e40)
  tokens, mask = random_strings(rng, 4, batch=5, n_max=6)
  mask[0] = False  # an all-masked row
  loss = lambda p: (tf.apply(p, fixed, config, tokens, mask) * 1e-120).sum()
  out, grads = jax.jit(lambda p: (tf.apply(p, fixed, config, tokens, mask), jax.grad(loss)(p)))(
      params)
  chex.assert_tree_all_finite((out, grads))
  assert (float(out[0]) == 0.0) == (not cls)  # only CLS is left to attend to


def test_empty_rows_give_zero():
  """No real token and no attended CLS: the output is 0, whichever query (SLR too)."""
  for query in ("cls", "last"):
    config = tf.TransformerConfig(vocab=3, cls=False, query=query)
    params, fixed = tf.init(jax.random.key(0), config)
    chex.assert_trees_all_equal(
        tf.apply(params, fixed, config, np.zeros((2, 3), int), np.zeros((2, 3), bool)),
        jnp.zeros(2))
  slr_params = {"kappa": jnp.array([1e150, -1e150]), "nu": jnp.array([1.0, 2.0])}
  inputs = jnp.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [2.0, 2.0]]])
  out = slr.apply(slr_params, inputs, jnp.array([[True, True], [False, False]]))
  chex.assert_trees_all_close(out, jnp.array([1.0, 0.0]))


# ---------------------------------------------------------------------------
# Positional information.
# ---------------------------------------------------------------------------


def test_first_last_markers_flag_first_and_last_real_tokens():
  config = tf.TransformerConfig(vocab=2, positional="first_last")
  params, fixed = tf.init(jax.random.key(0), config)
  tokens = np.array([[0, 1, 1, 0, 1], [1, 0, 0, 0, 0], [0, 0, 1, 1, 0]])
  mask = np.array([[1, 1, 1, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]], bool)
  x, x_cls = tf.embed(params, fixed, config, tokens, mask)
  chex.assert_shape(x, (3, 5, 5))
  np.testing.assert_array_equal(x[..., 3], [[1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0] * 5])
  np.testing.assert_array_equal(x[..., 4], [[0, 0, 0, 1, 0], [1, 0, 0, 0, 0], [0] * 5])
  # Token content: one-hot over [a, b, CLS], nothing at the padded position.
  np.testing.assert_array_equal(x[0, :, :3], [[1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0], [0] * 3])
  np.testing.assert_array_equal(x_cls, [0, 0, 1, 0, 0])


def even_pairs_weights(t=2.0, bias_score=0.0, big=40.0):
  """Two heads on [a, b, CLS, first, last] that decide first = last for lengths >= 2.

  Head 1 (head 2) scores a (b) at t, the markers at `big` and CLS at big + bias_score;
  it averages the marker dims, with value v_c on CLS. Its output is 1 + (v_c - 1) C/(N + C),
  N = e^{t·#a among first, last} summed over the two, C = e^{bias_score}: concave in #a, so
  the two heads' sum is larger when first ≠ last; v_c puts the threshold at zero.
  """
  c = math.exp(bias_score)
  share = lambda n: c / (n + c)
  ends = share(2.0) + share(2.0 * math.exp(t))
  middle = 2.0 * share(1.0 + math.exp(t))
  v_c = 1.0 - 4.0 / (ends + middle)
  m = 5
  w_q = np.zeros((2, m, 1))
  w_q[:, 2, 0] = 1.0
  w_k = np.zeros((2, m, 1))
  w_k[0, :, 0] = [t, 0.0, big + bias_score, big, big]
  w_k[1, :, 0] = [0.0, t, big + bias_score, big, big]
  w_v = np.zeros((2, m, m))
  w_v[:, :, 0] = [0.0, 0.0, v_c, 1.0, 1.0]
  w_o = np.zeros((2, m, m))
  w_o[:, 0, 0] = 1.0
  readout = -np.eye(m)[0]
  return {"W_Q": w_q, "W_K": w_k, "W_V": w_v, "W_O": w_o, "readout": readout}


def test_first_last_markers_make_first_equals_last_detectable():
  """With first/last markers, two heads compute sign f = +1 iff first = last (even pairs)."""
  rng = np.random.default_rng(5)
  config = tf.TransformerConfig(vocab=2, heads=2, key_dim=1, positional="first_last")
  _, fixed = tf.init(jax.random.key(0), config)
  params = jax.tree.map(jnp.asarray, even_pairs_weights())
  tokens, mask = random_strings(rng, 2, batch=400, n_max=12, min_len=2)
  lengths = mask.sum(1)
  label = np.where(tokens[:, 0] == tokens[np.arange(400), lengths - 1], 1, -1)
  unequal_pairs = [np.sum(row[1:n] != row[:n - 1]) for row, n in zip(tokens, lengths)]
  np.testing.assert_array_equal(label == 1, np.array(unequal_pairs) % 2 == 0)  # even pairs
  assert 0.3 < np.mean(label == 1) < 0.7
  out = np.asarray(tf.apply(params, fixed, config, tokens, mask))
  np.testing.assert_array_equal(np.sign(out), label)
  assert np.min(np.abs(out)) > 0.1


def test_without_positions_the_model_sees_only_counts():
  """No positional information: permuting a string leaves f unchanged (so even pairs is
  out of reach); learned positions break that symmetry."""
  rng = np.random.default_rng(6)
  tokens = np.array([[0, 0, 1, 2], [2, 0, 1, 0]])
  mask = np.ones((2, 4), bool)
  plain = tf.TransformerConfig(vocab=3, heads=2)
  params, fixed = random_params(rng, plain)
  out = tf.apply(params, fixed, plain, tokens, mask)
  assert abs(float(out[0] - out[1])) < 1e-13
  learned = tf.TransformerConfig(vocab=3, heads=2, positional="learned", max_len=4)
  params, fixed = random_params(rng, learned)
  out = tf.apply(params, fixed, learned, tokens, mask)
  assert abs(float(out[0] - out[1])) > 1e-3


@pytest.mark.parametrize("attention", tf.ATTENTIONS)
@pytest.mark.parametrize("inputs", ["tokens", "embeddings"])
def test_last_token_query_is_the_last_real_position(attention, inputs):
  """The last-token query is the last True entry of the mask, not entry (count - 1): with
  holes in the mask ([F, T, T, F], [T, F, T, F]) f equals f of the same string with the
  masked-out entries removed (a full mask). Without positions f sees only the real tokens
  and the query, so both sides are the same float64 terms, summed in another order
  (zeros in place of the masked entries): 1e-12 is rounding only (outputs are O(1))."""
  rng = np.random.default_rng(8)
  config = tf.TransformerConfig(vocab=4, heads=2, query="last", attention=attention)
  params, fixed = random_params(rng, config)
  tokens = np.array([[0, 1, 2, 3], [2, 3, 1, 0]])
  mask = np.array([[False, True, True, False], [True, False, True, False]])
  kept = np.array([[1, 2], [2, 1]])  # the real tokens of each row, in order
  if inputs == "embeddings":  # the explicit-stream path instead of the token lookup
    tokens, kept = fixed["E"][tokens], fixed["E"][kept]
  full = np.ones((2, 2), bool)

  @jax.jit  # the three calls in one compiled program
  def outputs(params):
    return (tf.apply(params, fixed, config, tokens, mask),
            tf.apply(params, fixed, config, kept, full),
            tf.apply(params, fixed, config, kept[:, ::-1], full))

  holes, prefix, reversed_prefix = outputs(params)
  chex.assert_trees_all_close(holes, prefix, atol=1e-12, rtol=0)
  # The rows' second-to-last real tokens differ from their last ones, so a query taken at
  # entry (count - 1) would change f.
  assert np.all(np.abs(np.asarray(prefix - reversed_prefix)) > 1e-3)


# ---------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fields,match", [
    (dict(vocab=0), "vocab"),
    (dict(vocab=3.5), "vocab"),
    (dict(vocab=3, embedding="learned"), r"embedding must be one of \('one_hot', 'random'\)"),
    (dict(vocab=3, positional="rotary"),
     r"positional must be one of \('none', 'learned', 'sinusoidal', 'first_last'\)"),
    (dict(vocab=3, query="first"), r"query must be one of \('cls', 'last'\)"),
    (dict(vocab=3, embedding="random"), "width"),
    (dict(vocab=3, width=3), "width"),
    (dict(vocab=3, heads=0), "heads"),
    (dict(vocab=3, heads=True), "heads"),
    (dict(vocab=3, key_dim=0), "key_dim"),
    (dict(vocab=3, outputs=0), "outputs"),
    (dict(vocab=3, positional="learned"), "max_len"),
    (dict(vocab=3, cls="yes"), "cls"),
    (dict(vocab=3, previous_token=1), "previous_token"),
])
def test_config_validation(fields, match):
  with pytest.raises(ValueError, match=match):
    tf.TransformerConfig(**fields)


def test_bad_calls():
  config = tf.TransformerConfig(vocab=3, positional="learned", max_len=4)
  params, fixed = tf.init(jax.random.key(0), config)
  tokens, mask = np.zeros((2, 4), int), np.ones((2, 4), bool)
  with pytest.raises(ValueError, match="scale"):
    tf.init(jax.random.key(0), config, scale=0.0)
  with pytest.raises(ValueError, match="max_len"):
    tf.apply(params, fixed, config, np.zeros((2, 5), int), np.ones((2, 5), bool))
  with pytest.raises(ValueError, match="mask"):
    tf.apply(params, fixed, config, tokens, mask[:, :3])
  with pytest.raises(ValueError, match=r"tokens must lie in 0\.\.2"):
    tf.apply(params, fixed, config, tokens + 3, mask)
  with pytest.raises(ValueError, match="continuous inputs"):
    tf.apply(params, fixed, config, np.zeros((2, 4, 7)), mask)
  with pytest.raises(ValueError, match=r"^params \(for this config\) is missing keys: 'pos'; "):
    tf.apply({k: v for k, v in params.items() if k != "pos"}, fixed, config, tokens, mask)
  with pytest.raises(ValueError, match=r"^params \(for this config\) has unknown keys: 'beta'"):
    tf.apply({**params, "beta": params["W_V"]}, fixed, config, tokens, mask)
  with pytest.raises(ValueError, match="W_V"):
    tf.apply({**params, "W_V": params["W_V"][0]}, fixed, config, tokens, mask)
  with pytest.raises(ValueError, match="positional = 'none'"):
    tf.to_direct(params, fixed, config)
  two_heads = tf.TransformerConfig(vocab=3, heads=2)
  with pytest.raises(ValueError, match="heads = 1"):
    tf.to_direct(*tf.init(jax.random.key(0), two_heads), two_heads)
  with pytest.raises(ValueError, match="config must be"):
    tf.init(jax.random.key(0), {"vocab": 3})
  with pytest.raises(ValueError, match="SLR width m"):
    slr.init(jax.random.key(0), 0)
  with pytest.raises(ValueError, match="SLR inputs"):
    slr.apply(slr.init(jax.random.key(0), 3), np.zeros((2, 4, 2)))


def test_direct_attention_from_zero_trains_like_the_direct_model():
  """attention = "direct", one head, one-hot E, CLS query, from zero: the plan's exact
  trajectory through the one training loop equals lj.train's (α, β) model with CLS
  (untied) to 1e-10; both take the same arithmetic up to the order of a few sums."""
  d = 5
  lang = lj.occurrence(d)
  plan = lj.plans.three_phase(3.0, 40.0, 1.0, 6)
  config = tf.TransformerConfig(vocab=d, attention="direct")
  params, fixed = tf.init(jax.random.key(0), config)
  chex.assert_trees_all_equal(params, jax.tree.map(jnp.zeros_like, params))  # θ0 = 0
  route = lj.risk_fn(lang, cls=True)
  value_and_grad = jax.value_and_grad(lambda p: route.risk(tf.to_direct(p, fixed, config)))
  loop = runner.make_loop(
      plan.slots(), functools.partial(models.group_labels, tf.PARAM_GROUPS),
      lambda key: lambda p, t, phase: value_and_grad(p),
      lambda p: tf.to_direct(p, fixed, config), num_steps=plan.total_steps)
  trace = jax.jit(loop)(params, jax.random.key(0), plan.data())
  reference = lj.train(lang, plan, lj.init_params(d, cls=True), tied=False)
  chex.assert_trees_all_close(trace.alpha, reference.alpha, atol=1e-10)
  chex.assert_trees_all_close(trace.beta, reference.beta, atol=1e-10)
  assert float(jnp.abs(reference.alpha[-1]).max()) > 0.1  # attention really moved
