"""In-context bigram (docs/theory.md section 7).

Each sequence draws its own Markov chain on k tokens: the rows P_i of its
transition matrix are iid Dirichlet(1). Then x_1 is uniform, x_{t+1} ~ P_{x_t},
the model sees x_1 … x_n (n ~ L conditioned on n <= max_len, see
lagjax/tasks/base.py) and predicts the target x_{n+1} from k logits at the last
position; the loss is the cross-entropy.

Bayes-optimal reference. Rows are independent Dirichlet(1) a priori, so given
the sequence the posterior of the row P_i is Dirichlet(1 + c_i·), with c_ij the
number of transitions i → j among x_1 … x_n, and the predictive law of x_{n+1}
is the add-one-smoothed bigram q_j = (c_ij + 1)/(c_i + k), i = x_n.
metric reports the cross-entropy, KL(q ‖ softmax(logits)) (the excess
cross-entropy over the Bayes-optimal predictor, averaged over contexts) and the
Bayes predictor's own cross-entropy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lagjax.data.lengths import Geometric, check_law
from lagjax.tasks import base


def bayes_bigram(tokens, mask, k: int):
  """Add-one-smoothed in-context bigram (c_ij + 1)/(c_i + k) at i = the last token: the Bayes
  predictor of the next token (docs/theory.md §7).

  Args:
    tokens: (..., L) ints in {0, …, k-1}.
    mask: (..., L) bool, a prefix of True of length n >= 1.
    k: number of token types (static).

  Returns:
    (..., k) probabilities of the next token, summing to 1.

  Example:
    >>> q = lj.tasks.bayes_bigram(jnp.array([0, 0, 0, 1, 0]), jnp.ones(5, bool), 2)
    >>> np.round(np.asarray(q), 6).tolist()  # from 0: 0→0 twice, 0→1 once; ((2+1)/5, (1+1)/5)
    [0.6, 0.4]
  """
  tokens = jnp.asarray(tokens)
  mask = jnp.asarray(mask, dtype=bool)
  last_index = jnp.maximum(jnp.sum(mask, axis=-1) - 1, 0)
  last = jnp.take_along_axis(tokens, last_index[..., None], axis=-1)
  # Transition t → t+1 counts when both positions are in the string and x_t = x_n.
  from_last = mask[..., 1:] & mask[..., :-1] & (tokens[..., :-1] == last)
  counts = jnp.sum(jax.nn.one_hot(tokens[..., 1:], k) * from_last[..., None], axis=-2)
  return (counts + 1.0) / (jnp.sum(counts, axis=-1, keepdims=True) + k)


def embed_current_previous(tokens, mask, k: int):
  """Input features one_hot(x_t) ⊕ one_hot(x_{t-1}) (zero previous at t = 1) of
  docs/theory.md §7.

  Padded positions embed to zero. With this embedding one attention layer can
  count the transitions out of the last token.

  Args:
    tokens: (..., L) ints in {0, …, k-1}.
    mask: (..., L) bool, True at real tokens, real tokens first.
    k: number of token types.

  Returns:
    (..., L, 2k) floats: current one-hot, then previous one-hot.

  Example:
    >>> x = lj.tasks.embed_current_previous(jnp.array([1, 0, 1]), jnp.array([True, True, False]), 2)
    >>> x.tolist()
    [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
  """
  mask = jnp.asarray(mask, dtype=bool)
  current = jax.nn.one_hot(tokens, k) * mask[..., None]
  previous = jnp.concatenate([jnp.zeros_like(current[..., :1, :]), current[..., :-1, :]], axis=-2)
  return jnp.concatenate([current, previous * mask[..., None]], axis=-1)


def icl_bigram_task(*, k: int = 50, length=None, max_len=None) -> base.Task:
  """In-context bigram on k tokens (docs/theory.md §7).

  Args:
    k: number of token types, >= 2.
    length: length law of the visible sequence; None for Geometric(1/(2k))
      (mean 2k, two transitions per row on average).
    max_len: static padded length; None for the smallest N with P(n > N) <= 1e-3.

  Returns:
    A next_token Task with token inputs (B, max_len), targets x_{n+1} (B,) and outputs
    k logits per sequence.

  Example:
    >>> task = lj.tasks.icl_bigram.icl_bigram_task(k=3, max_len=6)
    >>> task.n_outputs, task.metric_name
    (3, 'kl_to_bayes')
    >>> batch = task.sample(jax.random.PRNGKey(0), 4)
    >>> bayes_logits = jnp.log(lj.tasks.bayes_bigram(batch.inputs, batch.mask, 3))
    >>> round(float(task.metric(bayes_logits, batch)["kl_to_bayes"]), 6)  # KL(q ‖ q)
    0.0
  """
  k = base.check_int("k", k, 2)
  if length is None:
    length = Geometric(1.0 / (2 * k))
  length = check_law(length, "the task 'icl_bigram'")
  max_len = base.check_max_len(max_len, length)
  sample_lengths = base.truncated_length_sampler(length, max_len)

  def sample(key, batch_size: int) -> base.Batch:
    length_key, chain_key, first_key, step_key = jax.random.split(key, 4)
    lengths = sample_lengths(length_key, (batch_size,))
    # Dirichlet(1) rows are iid Exp(1) vectors normalized to sum 1: exact, and ~60x
    # cheaper than jax.random.dirichlet's rejection-sampled gammas.
    exponentials = jax.random.exponential(chain_key, (batch_size, k, k))
    transitions = exponentials / jnp.sum(exponentials, axis=-1, keepdims=True)
    # Inverse CDF: next = #{j < k-1 : cdf_ij <= u}; the last boundary is 1 by construction.
    cdfs = jnp.cumsum(transitions, axis=-1)[..., :-1]
    rows = jnp.arange(batch_size)

    def step(current, uniforms):
      following = jnp.sum(uniforms[:, None] >= cdfs[rows, current], axis=-1, dtype=jnp.int32)
      return following, following

    first = jax.random.randint(first_key, (batch_size,), 0, k, dtype=jnp.int32)
    _, rest = jax.lax.scan(step, first, jax.random.uniform(step_key, (max_len, batch_size)))
    sequence = jnp.concatenate([first[:, None], rest.T], axis=1)  # x_1 … x_{max_len+1}
    mask = base.length_mask(lengths, max_len)
    tokens = sequence[:, :max_len] * mask
    return base.Batch(tokens, mask, sequence[rows, lengths], lengths, {})

  def log_probs(outputs, batch):
    base.check_outputs(outputs, (batch.targets.shape[0], k), "k logits per sequence")
    return jax.nn.log_softmax(outputs, axis=-1)

  def cross_entropy(outputs, batch: base.Batch):
    picked = jnp.take_along_axis(log_probs(outputs, batch), batch.targets[:, None], axis=-1)
    return -jnp.mean(picked)

  def metric(outputs, batch: base.Batch):
    model = log_probs(outputs, batch)
    bayes = jnp.log(bayes_bigram(batch.inputs, batch.mask, k))
    target = batch.targets[:, None]
    return {
        "cross_entropy": -jnp.mean(jnp.take_along_axis(model, target, axis=-1)),
        "kl_to_bayes": jnp.mean(jnp.sum(jnp.exp(bayes) * (bayes - model), axis=-1)),
        "bayes_cross_entropy": -jnp.mean(jnp.take_along_axis(bayes, target, axis=-1)),
    }

  return base.make_task(
      name="icl_bigram", kind="next_token", input_kind="tokens", input_dim=k, n_outputs=k,
      max_len=max_len, length=length, metric_name="kl_to_bayes",
      options={"k": k, "length": length, "max_len": max_len},
      sample=sample, loss=cross_entropy, metric=metric)
