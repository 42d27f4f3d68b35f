"""Even pairs as a sampled task (docs/theory.md section 7).

The language is the one of lagjax/data/regular_builtins.py (`even_pairs`): binary strings,
y = +1 iff the number of adjacent unequal pairs #{i < n : w_i ≠ w_{i+1}} is even, which
holds iff w_1 = w_n. The task samples it with n ~ L (conditioned on n <= max_len, see
lagjax/tasks/base.py) and tokens iid uniform. A model needs positional information
(positional embeddings, or first/last markers) to solve it.

The task's default length law is its own, Geometric(0.05) (mean length 20; the language's
default is Geometric(0.1)), passed to the language explicitly. Strings of length 1 are
always positive, so P(y = +1) = (1 + P(n = 1)) / 2 = 0.525 under it.
"""

from __future__ import annotations

import jax

from lagjax.data import regular_builtins
from lagjax.data.lengths import Geometric, check_law
from lagjax.tasks import base

DEFAULT_LENGTH = Geometric(0.05)


def even_pairs_task(*, length=None, max_len=None, loss: str = "squared") -> base.Task:
  """Even pairs over Σ = {0, 1} (docs/theory.md §7): y = +1 iff w_1 = w_n.

  Args:
    length: length law; None for Geometric(0.05).
    max_len: static padded length; None for the smallest N with P(n > N) <= 1e-3.
    loss: "squared" (½(f - y)²) or "logistic".

  Returns:
    A classification Task with token inputs (vocabulary 2); ``extras["language"]`` is the
    language (regular_builtins.even_pairs with this length law).

  Example:
    >>> task = lj.tasks.even_pairs.even_pairs_task(max_len=8)
    >>> batch = task.sample(jax.random.PRNGKey(0), 16)
    >>> inputs, n = np.asarray(batch.inputs), np.asarray(batch.lengths)
    >>> first, last = inputs[:, 0], inputs[np.arange(16), n - 1]
    >>> bool(np.all((np.asarray(batch.targets) == 1) == (first == last)))
    True
    >>> lj.tasks.even_pairs.even_pairs_task().max_len  # 0.95^N <= 1e-3 under Geometric(0.05)
    135
  """
  if length is None:
    length = DEFAULT_LENGTH
  length = check_law(length, "the task 'even_pairs'")
  language = regular_builtins.even_pairs(length=length)
  max_len = base.check_max_len(max_len, length)
  loss_fn, metric = base.classification_fns(loss)
  sample_lengths = base.truncated_length_sampler(length, max_len)

  def sample(key, batch_size: int) -> base.Batch:
    length_key, token_key = jax.random.split(key)
    lengths = sample_lengths(length_key, (batch_size,))
    mask = base.length_mask(lengths, max_len)
    # π is uniform on {0, 1} (the language's default): one fair bit per position
    tokens = jax.random.bernoulli(token_key, 0.5, (batch_size, max_len)) & mask
    tokens = tokens.astype(lengths.dtype)
    return base.Batch(tokens, mask, language.label_tokens(tokens, mask), lengths, {})

  return base.make_task(
      name="even_pairs", kind="classification", input_kind="tokens", input_dim=2, n_outputs=1,
      max_len=max_len, length=length, metric_name="accuracy",
      options={"length": length, "max_len": max_len, "loss": loss},
      extras={"language": language}, sample=sample, loss=loss_fn, metric=metric)


__all__ = ["DEFAULT_LENGTH", "even_pairs_task"]
