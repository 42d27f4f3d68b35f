"""The (α, β) model and its KQV form (docs/theory.md section 2)."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxprs import batched_and_alone

import lagjax as lj
from lagjax.models import direct as model
from lagjax.models import kqv

D = 5


def random_strings(rng, d, batch, n_max):
  """Padded token batches (batch, n_max) with lengths in 1..n_max and the matching mask."""
  lengths = rng.integers(1, n_max + 1, size=batch)
  tokens = rng.integers(0, d, size=(batch, n_max))
  mask = np.arange(n_max)[None, :] < lengths[:, None]
  # Padding holds arbitrary tokens: the mask alone must exclude them.
  return tokens, mask


def token_counts(tokens, mask, d):
  return np.stack([((tokens == s) & mask).sum(axis=1) for s in range(d)], axis=1)


def direct_f(params, tokens, mask):
  """f = Σ_i softmax_i(α_{w_i}) β_{w_i} (+ CLS once), one string at a time in plain Python."""
  alpha, beta = np.asarray(params["alpha"]), np.asarray(params["beta"])
  out = []
  for row, keep in zip(tokens, mask):
    scores = [alpha[t] for t in row[keep]]
    values = [beta[t] for t in row[keep]]
    if "alpha_cls" in params:
      scores.append(float(params["alpha_cls"]))
      values.append(float(params["beta_cls"]))
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    out.append(sum(w * v for w, v in zip(weights, values)) / sum(weights))
  return np.array(out)


def random_params(rng, d, cls, scale=2.0):
  params = {"alpha": jnp.asarray(scale * rng.standard_normal(d)),
            "beta": jnp.asarray(scale * rng.standard_normal(d))}
  if cls:
    params.update(alpha_cls=jnp.asarray(scale * rng.standard_normal()),
                  beta_cls=jnp.asarray(scale * rng.standard_normal()))
  return params


def test_init_params_is_zero():
  """θ0 = 0, with scalar CLS entries when asked."""
  params = lj.init_params(D, cls=True)
  chex.assert_shape((params["alpha"], params["beta"]), (D,))
  chex.assert_shape((params["alpha_cls"], params["beta_cls"]), ())
  chex.assert_trees_all_equal(params, jax.tree.map(jnp.zeros_like, params))
  assert set(lj.init_params(D)) == {"alpha", "beta"}


@pytest.mark.parametrize("cls", [False, True])
def test_forward_tokens_counts_and_direct_agree(cls):
  """forward_tokens, forward_counts on the same strings and the per-string softmax agree."""
  rng = np.random.default_rng(0)
  tokens, mask = random_strings(rng, D, batch=200, n_max=12)
  params = random_params(rng, D, cls)
  expected = direct_f(params, tokens, mask)
  from_tokens = model.forward_tokens(params, tokens, mask)
  from_counts = model.forward_counts(params, token_counts(tokens, mask, D))
  chex.assert_shape((from_tokens, from_counts), (200,))
  # Convex combinations of |β| <= ~8 summed in different orders: rounding < 1e-14.
  np.testing.assert_allclose(from_tokens, expected, rtol=0, atol=1e-13)
  np.testing.assert_allclose(from_counts, expected, rtol=0, atol=1e-13)


def test_forward_matches_count_formula():
  """f = Σ c e^α β / Σ c e^α on hand-made count vectors."""
  params = {"alpha": jnp.array([0.0, math.log(2.0), math.log(3.0)]),
            "beta": jnp.array([1.0, -1.0, 2.0])}
  counts = np.array([[1, 0, 0], [1, 1, 0], [2, 1, 1], [0, 0, 4]])
  # Weights c_σ e^{α_σ}: (1,0,0), (1,2,0), (2,2,3), (0,0,12).
  expected = np.array([1.0, (1 - 2) / 3, (2 - 2 + 6) / 7, 2.0])
  np.testing.assert_allclose(model.forward_counts(params, counts), expected, rtol=1e-15,
                             atol=1e-15)
  with_cls = dict(params, alpha_cls=jnp.asarray(math.log(4.0)), beta_cls=jnp.asarray(-3.0))
  # The CLS token adds weight 4 and value -3 to every string.
  expected_cls = np.array([(1 - 12) / 5, (1 - 2 - 12) / 7, (6 - 12) / 11, (24 - 12) / 16])
  np.testing.assert_allclose(model.forward_counts(with_cls, counts), expected_cls, rtol=1e-15,
                             atol=1e-15)


@pytest.mark.parametrize("cls", [False, True])
def test_forward_invariant_to_common_score_shift(cls):
  """Adding one constant to every score (α and α_cls) does not change f (section 2)."""
  rng = np.random.default_rng(1)
  counts = rng.integers(0, 4, size=(50, D))
  counts[:, 0] += 1
  params = random_params(rng, D, cls)
  reference = model.forward_counts(params, counts)
  for shift in (-700.0, 5.0, 900.0):
    shifted = dict(params, alpha=params["alpha"] + shift)
    if cls:
      shifted["alpha_cls"] = params["alpha_cls"] + shift
    # Rounding of α + c (|c| <= 900: ulp 1.1e-13) moves f by at most that times
    # the spread of β (< 20) plus the rounding of f itself.
    np.testing.assert_allclose(model.forward_counts(shifted, counts), reference, rtol=0,
                               atol=3e-12)


def test_forward_stable_for_huge_scores():
  """Score spreads of 1e4 give the hard-attention limit, finite values and gradients."""
  params = {"alpha": jnp.array([1e4, 0.0, -1e4, 800.0]), "beta": jnp.array([1.0, 2.0, 3.0, 4.0])}
  counts = np.array([[1, 5, 5, 0], [0, 5, 5, 0], [0, 0, 7, 0], [0, 3, 0, 1], [2, 0, 0, 3]])
  # The present token of largest score takes all the attention.
  expected = np.array([1.0, 2.0, 3.0, 4.0, 1.0])
  f = model.forward_counts(params, counts)
  np.testing.assert_array_equal(f, expected)
  tokens = np.array([[0, 1, 2, 2], [2, 2, 2, 1], [2, 2, 2, 2], [3, 1, 1, 1], [3, 0, 3, 3]])
  mask = np.ones_like(tokens, dtype=bool)
  np.testing.assert_array_equal(model.forward_tokens(params, tokens, mask), expected)
  grad_counts = jax.jit(jax.grad(lambda p: model.forward_counts(p, counts).sum()))
  chex.assert_tree_all_finite(grad_counts(params))
  grad_tokens = jax.jit(jax.grad(lambda p: model.forward_tokens(p, tokens, mask).sum()))
  chex.assert_tree_all_finite(grad_tokens(params))
  with_cls = dict(params, alpha_cls=jnp.asarray(2e4), beta_cls=jnp.asarray(-5.0))
  np.testing.assert_array_equal(model.forward_counts(with_cls, counts), np.full(5, -5.0))
  chex.assert_tree_all_finite(grad_counts(with_cls))


def test_a_vmapped_batch_takes_one_branch_and_each_members_value():
  """Under vmap forward_counts' branch (two clusters, or the log-sum-exp form where the rest
  spreads beyond the cluster gap) is one unbatched cond (lagjax/batched.py), not a select
  that computes both for every member; each member's value and gradient is its unbatched
  one, to roundoff, whether the batch agrees or not (then every member takes the
  log-sum-exp form; measured: 3e-16 relative in the value, 6e-15 in the gradient)."""
  counts = np.array([[1, 5, 5, 0], [0, 5, 5, 0], [0, 0, 7, 1], [2, 3, 0, 1]])
  narrow = {"alpha": jnp.array([0.3, -0.2, 0.1, 0.0]), "beta": jnp.array([1.0, 2.0, 3.0, 4.0])}
  other = {"alpha": jnp.array([1.0, 0.5, -0.4, 0.2]), "beta": jnp.array([-1.0, 0.5, 2.0, 1.0])}
  wide = dict(other, alpha=jnp.array([900.0, 0.0, -900.0, 0.5]))
  value_and_grad = jax.value_and_grad(lambda p: (model.forward_counts(p, counts) ** 2).sum())
  for (values, grads), alone in batched_and_alone(value_and_grad,
                                                   ([narrow, other], [narrow, wide])):
    for i, (value, grad) in enumerate(alone):
      np.testing.assert_allclose(values[i], value, rtol=1e-14)
      for name in grad:
        np.testing.assert_allclose(grads[name][i], grad[name], rtol=1e-13, atol=1e-14)


def test_forward_jit_matches_eager():
  """The forward pass traces once per shape and gives the eager values under jit."""
  rng = np.random.default_rng(2)
  tokens, mask = random_strings(rng, D, batch=20, n_max=6)
  params = random_params(rng, D, cls=True)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def forward(p, t, m):
    return model.forward_tokens(p, t, m)

  first = forward(params, tokens, mask)
  second = forward(random_params(rng, D, cls=True), tokens, mask)
  np.testing.assert_allclose(first, model.forward_tokens(params, tokens, mask), rtol=0,
                             atol=1e-15)
  chex.assert_tree_all_finite(second)


@pytest.mark.parametrize("letter", [2, np.int64(2), np.int32(2), np.uint8(2)])
def test_attention_margin_takes_any_integer_scalar_as_one_letter(letter):
  """A NumPy integer is one letter, as a Python int is (np.int64(0) used to raise "'numpy.int64'
  object is not iterable"). Exact: α_2 - max(α_0, α_1) = 3 - 1."""
  params = {"alpha": jnp.array([1.0, -1.0, 3.0]), "beta": jnp.zeros(3)}
  assert float(model.attention_margin(params, letter)) == 2.0


def test_kqv_to_direct_hand_computed():
  """α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = (E_σ W_V)·w_o on a 2-token example.

  With E = I, e_cls = (1, 1)/√2, k = 2:
    q = e_cls W_Q = (1+3, 2+4)/√2 = (4, 6)/√2;
    keys = rows of W_K: (1, 1) and (0, 2);
    α_0 = (4 + 6)/(√2 √2) = 5, α_1 = (0 + 12)/2 = 6;
    β_0 = (1, 2)·(2, 1) = 4, β_1 = (3, 4)·(2, 1) = 10.
  """
  trainable = {"W_Q": jnp.array([[1.0, 2.0], [3.0, 4.0]]),
               "W_K": jnp.array([[1.0, 1.0], [0.0, 2.0]]),
               "W_V": jnp.array([[1.0, 2.0], [3.0, 4.0]]),
               "w_o": jnp.array([2.0, 1.0])}
  fixed = {"E": jnp.eye(2), "e_cls": jnp.ones(2) / math.sqrt(2)}
  direct = kqv.kqv_to_direct(trainable, fixed)
  np.testing.assert_allclose(direct["alpha"], [5.0, 6.0], rtol=1e-15)
  np.testing.assert_allclose(direct["beta"], [4.0, 10.0], rtol=1e-15)


def test_kqv_to_direct_with_embeddings_and_key_dim():
  """Non-one-hot embeddings and k ≠ m: compare with explicit sums over indices."""
  d, width, key_dim = 3, 4, 2
  rng = np.random.default_rng(3)
  embeddings = rng.standard_normal((d, width))
  query = rng.standard_normal(width)
  trainable, fixed = kqv.init_kqv(jax.random.key(0), d, key_dim=key_dim, scale=1.0,
                                    embeddings=embeddings, query=query)
  chex.assert_shape([trainable["W_Q"], trainable["W_K"]], (width, key_dim))
  chex.assert_shape(trainable["W_V"], (width, width))
  chex.assert_shape(trainable["w_o"], (width,))
  w_q, w_k = np.asarray(trainable["W_Q"]), np.asarray(trainable["W_K"])
  w_v, w_o = np.asarray(trainable["W_V"]), np.asarray(trainable["w_o"])
  alpha = [sum(query[i] * w_q[i, j] * embeddings[s, m] * w_k[m, j]
               for i in range(width) for j in range(key_dim) for m in range(width))
           / math.sqrt(key_dim) for s in range(d)]
  beta = [sum(embeddings[s, i] * w_v[i, j] * w_o[j] for i in range(width) for j in range(width))
          for s in range(d)]
  direct = kqv.kqv_to_direct(trainable, fixed)
  np.testing.assert_allclose(direct["alpha"], alpha, rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(direct["beta"], beta, rtol=1e-12, atol=1e-14)


def test_init_kqv_defaults():
  """Defaults: one-hot E (m = d), k = m, e_cls = 1/√m, entries of size `scale`."""
  d = 4
  trainable, fixed = kqv.init_kqv(jax.random.key(1), d, scale=0.1)
  np.testing.assert_array_equal(fixed["E"], np.eye(d))
  np.testing.assert_allclose(fixed["e_cls"], np.full(d, 0.5), rtol=1e-15)
  chex.assert_shape([trainable["W_Q"], trainable["W_K"], trainable["W_V"]], (d, d))
  chex.assert_shape(trainable["w_o"], (d,))
  for value in trainable.values():
    # Standard normal times 0.1: nonzero and (16 entries at most) below 0.1 · 6.
    assert 0 < np.abs(np.asarray(value)).max() < 0.6


def test_kqv_zero_is_a_saddle():
  """At zero KQV parameters every gradient of the risk vanishes (section 2)."""
  d = 3
  lang = lj.occurrence(d, length=lj.geometric(0.5))
  route = lj.risk_fn(lang)
  trainable, fixed = kqv.init_kqv(jax.random.key(2), d)
  zero = jax.tree.map(jnp.zeros_like, trainable)
  grad_fn = jax.jit(jax.grad(lambda t: route.risk(kqv.kqv_to_direct(t, fixed))))
  chex.assert_trees_all_equal(grad_fn(zero), zero)
  # At the small random init the output weights do receive a gradient.
  grad = grad_fn(trainable)
  assert np.abs(np.asarray(grad["w_o"])).max() > 1e-6


def _zeros(*names, d=3):
  from lagjax.models import direct_params
  return {name: np.zeros(() if name == "beta_cls" else (d,)) for name in names
          if name in direct_params.PARAM_GROUPS or name == "gamma"}


@pytest.mark.parametrize("theta, message", [
    # Missing keys of every layout are named: CLS scalars and position tables too.
    (_zeros("alpha"), r"^params is missing keys: 'beta'; it must have the keys 'alpha', 'beta'"),
    (_zeros("beta"), r"^params is missing keys: 'alpha'; "),
    (_zeros("alpha", "beta", "alpha_cls"), r"^params is missing keys: 'beta_cls'; "),
    (_zeros("alpha", "beta", "beta_cls"), r"^params is missing keys: 'alpha_cls'; "),
    (_zeros("alpha", "beta", "alpha_first", "beta_first", "alpha_last"),
     r"^params is missing keys: 'beta_last'; params must have all four position tables"),
    (_zeros("alpha", "beta", "alpha_first"),
     r"^params is missing keys: 'beta_first', 'alpha_last', 'beta_last'; "),
    # Extra keys are named, with the allowed set.
    (_zeros("alpha", "beta", "gamma"), r"^params has unknown keys: 'gamma'; allowed: the keys "
                                       r"'alpha', 'beta' \(optional: 'alpha_cls', "),
    ({**_zeros("alpha", "beta"), "W_Q": 1, "a": 2}, r"^params has unknown keys: 'W_Q', 'a'; "),
    ([np.zeros(3)], r"^params must be a dict with keys 'alpha', 'beta' .*; got list\.$"),
])
def test_check_params_names_missing_and_extra_keys(theta, message):
  """Issue 34: θ without 'beta' used to say only 'must be a dict with keys …; got dict'."""
  from lagjax.models import direct_params
  with pytest.raises(ValueError, match=message) as error:
    direct_params.check_params(theta, 3)
  assert "\n" not in str(error.value)


@pytest.mark.parametrize("theta, message", [
    ({"kappa": np.zeros(2)}, r"^SLR params is missing keys: 'nu'; it must have the keys "
                             r"'kappa', 'nu'\.$"),
    ({"kappa": np.zeros(2), "nu": np.zeros(2), "mu": 0}, r"^SLR params has unknown keys: 'mu'"),
])
def test_slr_params_name_missing_and_extra_keys(theta, message):
  with pytest.raises(ValueError, match=message):
    lj.models.slr.apply(theta, np.zeros((3, 2)))


def test_check_params_reads_the_query_from_alpha_and_names_it():
  """Issue 34 mutation survivors of check_params (`last = ndim(alpha) == 2` and the query in
  the message): last-token params, whose α is (d, d) and α_cls (d,), are accepted, and a shape
  mismatch names the query of the params given, CLS or last-token."""
  from lagjax.models import direct_params
  for positions in ("none", "first_last"):
    direct_params.check_params(lj.init_params(3, cls=True, query="last", positions=positions), 3)
  with pytest.raises(ValueError, match=r"^params\['alpha'\] must have shape \(4,\) under the "
                                       r"CLS query \(alpha of shape \(4,\)\) with d = 4; "
                                       r"got \(3,\)\.$"):
    direct_params.check_params(lj.init_params(3), 4)
  with pytest.raises(ValueError, match=r"^params\['alpha'\] must have shape \(4, 4\) under the "
                                       r"last-token query \(alpha of shape \(4, 4\)\) with G = 4; "
                                       r"got \(3, 3\)\.$"):
    direct_params.check_params(lj.init_params(3, query="last"), 4, field="G")
