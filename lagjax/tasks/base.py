"""What every task of docs/theory.md section 7 provides, and the checks its options share.

A task is built once by a factory from validated options and carries pure
functions: `sample(key, batch_size) -> Batch`, `loss(outputs, batch) -> scalar`
and `metric(outputs, batch) -> dict`. `sample` is jitted with `batch_size`
static, so a task compiles one sampler per batch size.

Lengths. Every sample is padded to a static maximum length `max_len`. Lengths
are drawn from the task's length law L *conditioned on n <= max_len*, by
inverse CDF on the table P(n | n <= max_len), n = 1..max_len: no rejection
loop, no clipping (clipping would pile the tail mass onto n = max_len). The
mass removed, P(n > max_len), is `Task.truncated_mass`; by default `max_len`
is the smallest N with P(n > N) <= DEFAULT_TAIL.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import losses
from lagjax.data.lengths import LengthLaw, truncation_length
from lagjax.validation import check_choice, check_int, check_positive  # noqa: F401 (re-exported to the task files)

KINDS = ("classification", "regression", "next_token")
DEFAULT_TAIL = 1e-3


class Batch(NamedTuple):
  """A padded batch of B strings of at most L = max_len positions (docs/theory.md §7).

  Attributes:
    inputs: tokens (B, L) int32, or features (B, L, m) float; 0 at padded positions.
    mask: (B, L) bool, True on the first `lengths` positions.
    targets: (B,) labels ±1 (classification), (B,) reals (regression) or (B,)
      int32 next tokens (next_token).
    lengths: (B,) int32 sequence lengths n, 1 <= n <= L.
    info: task-specific ground truth the model must not see (e.g. the SLR
      location J); an empty dict for most tasks.
    multiplicity: None in the token form; in the count form (`count_form`), (B, L') float
      counts: entry l stands for multiplicity[l] equal tokens inputs[l].

  Example:
    >>> lengths = np.array([3, 1])  # the strings 011 and 1, padded to L = 4
    >>> inputs = np.array([[0, 1, 1, 0], [1, 0, 0, 0]])
    >>> mask = np.arange(4) < lengths[:, None]
    >>> batch = lj.tasks.Batch(inputs, mask, np.array([-1.0, 1.0]), lengths, {})
    >>> batch.inputs.shape, batch.targets.shape, batch.multiplicity  # the token form
    ((2, 4), (2,), None)
    >>> task = lj.tasks.get_task("even_pairs", max_len=4)
    >>> float(task.loss(jnp.zeros(2), batch))  # the mean of ½(0 - y)²
    0.5
  """

  inputs: jax.Array
  mask: jax.Array
  targets: jax.Array
  lengths: jax.Array
  info: dict
  multiplicity: jax.Array | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
  """A task of docs/theory.md §7, built once from its options (compared and hashed by identity).

  Attributes:
    name: the registry name ("occurrence", "or", "and", "even_pairs",
      "icl_bigram", "slr").
    kind: one of KINDS.
    input_kind: "tokens" or "features".
    input_dim: vocabulary size for token inputs, feature width m for features.
    n_outputs: 1 for a scalar output f, k logits for next-token tasks.
    max_len: the static padded length L.
    length: the length law L before conditioning on n <= max_len.
    metric_name: the headline entry of metric(...) (what a results table shows).
    options: the resolved options; ``get_task(name, **options)`` rebuilds the task.
    extras: derived constants (the Language, the SLR directions k*, v*, ...).
    sample: (key, batch_size) -> Batch; jitted, batch_size static.
    loss: (outputs, batch) -> scalar mean loss; differentiable in outputs.
    metric: (outputs, batch) -> dict of scalars.

  Example:
    >>> task = lj.tasks.get_task("even_pairs")  # n ~ Geometric(0.05)
    >>> task.max_len  # the smallest N with 0.95^N <= 1e-3
    135
    >>> round(task.truncated_mass, 6)  # P(n > max_len) = 0.95^135
    0.000983
  """

  name: str
  kind: str
  input_kind: str
  input_dim: int
  n_outputs: int
  max_len: int
  length: LengthLaw
  metric_name: str
  options: Mapping[str, Any]
  extras: Mapping[str, Any]
  sample: Callable[..., Batch]
  loss: Callable[..., jax.Array]
  metric: Callable[..., dict]

  @property
  def truncated_mass(self) -> float:
    """P(n > max_len) under the unconditioned length law."""
    return float(self.length.tail(self.max_len))


def make_task(**fields) -> Task:
  """Builds a Task of docs/theory.md §7, freezing its option and extra mappings and jitting
  `sample` (batch size static). Each task factory ends with this call.

  Args:
    **fields: the fields of Task; ``sample`` is the plain sampler, ``extras`` may be left out.

  Returns:
    The Task.

  Raises:
    ValueError: when ``kind`` is not one of KINDS.

  Example:
    >>> def sample(key, batch_size):  # every string is the single token 0, labelled +1
    ...   ones = jnp.ones(batch_size, jnp.int32)
    ...   return lj.tasks.Batch(jnp.zeros((batch_size, 1), jnp.int32),
    ...                         jnp.ones((batch_size, 1), bool), jnp.ones(batch_size), ones, {})
    >>> loss, metric = lj.tasks.base.classification_fns("squared")
    >>> task = lj.tasks.base.make_task(
    ...     name="constant", kind="classification", input_kind="tokens", input_dim=1,
    ...     n_outputs=1, max_len=1, length=lj.fixed(1), metric_name="accuracy", options={},
    ...     sample=sample, loss=loss, metric=metric)
    >>> task.sample(jax.random.PRNGKey(0), 2).targets.tolist()
    [1.0, 1.0]
  """
  if fields["kind"] not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}; got {fields['kind']!r}.")
  fields["options"] = types.MappingProxyType(dict(fields["options"]))
  fields["extras"] = types.MappingProxyType(dict(fields.get("extras", {})))
  fields["sample"] = jax.jit(fields["sample"], static_argnums=1)
  return Task(**fields)


def count_form(task: Task, ends: bool = False) -> Task:
  """The task with each sampled string compressed to its token counts (docs/theory.md §7).

  The strings, labels and random stream are the token form's; only the batch's layout
  changes. Without `ends`, inputs are the V token types (B, V), the mask marks the types
  that occur and `multiplicity` holds their counts: all a model that ignores order (CLS
  query, no positions) reads. With `ends`, the first and the last token keep entries of
  their own, [w_1, types of w_2 … w_{n-1}, w_n] (B, V + 2), w_n absent when n = 1: all a
  model with first/last markers or the last-token query reads. The padded length max_len
  (and so the length law's truncation) is unchanged; the batch is V or V + 2 wide.

  Args:
    task: a task with token inputs.
    ends: keep the first and the last token as entries of their own.

  Returns:
    The same Task with a count-form sampler; ``extras["form"]`` says which form.

  Raises:
    ValueError: for a task with feature inputs (SLR).

  Example:
    >>> task = lj.tasks.count_form(lj.tasks.get_task("occurrence", d=3, max_len=5))
    >>> batch = task.sample(jax.random.PRNGKey(0), 2)
    >>> batch.inputs.tolist()  # the V = 3 token types
    [[0, 1, 2], [0, 1, 2]]
    >>> bool(jnp.all(batch.multiplicity.sum(-1) == batch.lengths))  # counts sum to n
    True
  """
  if task.input_kind != "tokens":
    raise ValueError(f"count_form needs a token task; {task.name!r} has {task.input_kind} "
                     "inputs.")
  vocab = task.input_dim
  token_sample = task.sample

  def counts_of(tokens, mask):  # a scatter-add: O(B L), where a one-hot sum is O(B L V)
    rows = jnp.broadcast_to(jnp.arange(tokens.shape[0])[:, None], tokens.shape)
    return jnp.zeros((tokens.shape[0], vocab)).at[rows, tokens].add(mask.astype(jnp.float64))

  def sample(key, batch_size: int) -> Batch:
    batch = token_sample(key, batch_size)
    type_ids = jnp.broadcast_to(jnp.arange(vocab, dtype=batch.inputs.dtype), (batch_size, vocab))
    if not ends:
      counts = counts_of(batch.inputs, batch.mask)
      return batch._replace(inputs=type_ids, mask=counts > 0, multiplicity=counts)
    positions = jnp.arange(batch.inputs.shape[-1])
    last = batch.lengths - 1
    middle = batch.mask & (positions > 0) & (positions[None, :] < last[:, None])
    counts = counts_of(batch.inputs, middle)
    last_token = jnp.take_along_axis(batch.inputs, last[:, None], -1)
    has_last = (batch.lengths >= 2)[:, None]
    one = jnp.ones((batch_size, 1))
    return batch._replace(
        inputs=jnp.concatenate([batch.inputs[:, :1], type_ids, last_token], -1),
        mask=jnp.concatenate([jnp.ones((batch_size, 1), bool), counts > 0, has_last], -1),
        multiplicity=jnp.concatenate([one, counts, one * has_last], -1))

  extras = dict(task.extras, form="counts and ends" if ends else "counts")
  return dataclasses.replace(task, sample=jax.jit(sample, static_argnums=1),
                             extras=types.MappingProxyType(extras))


# Option checks: each error names the field (integers and reals: lagjax.validation).


def check_max_len(max_len, length: LengthLaw) -> int:
  """max_len as given (an integer >= 1 with P(n <= max_len) > 0), or the default for `length`:
  the smallest N with P(n > N) <= DEFAULT_TAIL (docs/theory.md §7).

  Args:
    max_len: the value given for a task's ``max_len`` option; None for the default.
    length: the task's length law L.

  Returns:
    The static padded length max_len.

  Raises:
    ValueError: for a non-integer or max_len < 1, or when P(n <= max_len) = 0.

  Example:
    >>> lj.tasks.base.check_max_len(None, lj.geometric(0.5))  # 0.5^10 <= 1e-3 < 0.5^9
    10
    >>> lj.tasks.base.check_max_len(4, lj.fixed(10))
    Traceback (most recent call last):
    ...
    ValueError: max_len = 4 leaves no mass under the length law Fixed(n0=10): P(n <= max_len) = 0.
  """
  if max_len is None:
    return truncation_length(length, DEFAULT_TAIL)
  max_len = check_int("max_len", max_len, 1)
  if length.tail(max_len) >= 1.0:
    raise ValueError(
        f"max_len = {max_len} leaves no mass under the length law {length}: P(n <= max_len) = 0.")
  return max_len


# Lengths and tokens.


def truncated_pmf(length: LengthLaw, max_len: int) -> np.ndarray:
  """P(n | n <= max_len) for n = 1 … max_len, the law every task samples its lengths from
  (docs/theory.md §7).

  Args:
    length: the length law L.
    max_len: the truncation N.

  Returns:
    (max_len,) float64 probabilities, entry n - 1 for length n, summing to 1.

  Example:
    >>> pmf = lj.tasks.base.truncated_pmf(lj.geometric(0.5), 3)  # (1/2, 1/4, 1/8) / (7/8)
    >>> np.round(pmf * 7, 6).tolist()
    [4.0, 2.0, 1.0]
  """
  pmf = np.exp(np.asarray(length.log_pmf(np.arange(1, max_len + 1, dtype=np.float64)),
                          dtype=np.float64))
  return pmf / pmf.sum()


def truncated_length_sampler(length: LengthLaw, max_len: int) -> Callable:
  """Sampler of n ~ L conditioned on n <= max_len, by inverse CDF (no rejection;
  docs/theory.md §7).

  Args:
    length: the length law L.
    max_len: the truncation N.

  Returns:
    sample(key, shape) -> int array of lengths in {1, …, max_len}; jittable.

  Example:
    >>> sample = lj.tasks.base.truncated_length_sampler(lj.geometric(0.5), 3)
    >>> n = np.asarray(sample(jax.random.PRNGKey(0), (10_000,)))
    >>> int(n.min()), int(n.max())
    (1, 3)
    >>> bool(abs(n.mean() - 11 / 7) < 0.05)  # E[n | n <= 3] = (4 + 2·2 + 3)/7
    True
  """
  cdf = np.cumsum(truncated_pmf(length, max_len))
  cdf[-1] = 1.0  # u < 1 then never runs past max_len.
  cdf = jnp.asarray(cdf)

  def sample(key, shape):
    uniforms = jax.random.uniform(key, shape, dtype=jnp.float64)
    # n = 1 + #{m : P(n <= m) <= u}; empty lengths (pmf 0) are skipped.
    return 1 + jnp.searchsorted(cdf, uniforms, side="right").astype(jnp.int32)

  return sample


def length_mask(lengths, max_len: int):
  """The padding mask of docs/theory.md §7: True on the first lengths[b] positions.

  Args:
    lengths: (B,) ints n_b.
    max_len: the padded length L.

  Returns:
    (B, max_len) bool.

  Example:
    >>> lj.tasks.base.length_mask(jnp.array([1, 3]), 4).tolist()
    [[True, False, False, False], [True, True, True, False]]
  """
  return jnp.arange(max_len)[None, :] < lengths[:, None]


def iid_tokens(key, pi, shape):
  """Tokens iid π by inverse CDF, one uniform per token (docs/theory.md §1, §7).

  Args:
    key: PRNG key.
    pi: the token law π, d probabilities.
    shape: the output shape, e.g. (B, max_len).

  Returns:
    int32 tokens in {0, …, d-1} of that shape; a token with π_σ = 0 never occurs.

  Example:
    >>> tokens = lj.tasks.base.iid_tokens(jax.random.PRNGKey(0), [0.5, 0.0, 0.5], (10_000,))
    >>> counts = np.bincount(np.asarray(tokens), minlength=3)
    >>> int(counts[1])  # π_1 = 0
    0
    >>> bool(abs(counts[0] / 10_000 - 0.5) < 0.02)
    True
  """
  cdf = jnp.cumsum(jnp.asarray(pi, dtype=jnp.float64))[:-1]
  uniforms = jax.random.uniform(key, shape, dtype=jnp.float64)
  return jnp.searchsorted(cdf, uniforms, side="right").astype(jnp.int32)


def check_outputs(outputs, expected_shape, what: str):
  """Checks a model's outputs against a task's loss (docs/theory.md §7). Shapes are static
  under jit, so a mismatch raises at trace time.

  Args:
    outputs: the model's outputs.
    expected_shape: what the loss needs, e.g. (B,) or (B, k).
    what: the expectation in words, for the message.

  Returns:
    None.

  Raises:
    ValueError: naming both shapes, when they differ.

  Example:
    >>> lj.tasks.base.check_outputs(jnp.zeros(3), (3,), "one score f per sequence")
    >>> lj.tasks.base.check_outputs(jnp.zeros((3, 2)), (3,), "one score f per sequence")
    Traceback (most recent call last):
    ...
    ValueError: outputs must have shape (3,) (one score f per sequence); got (3, 2).
  """
  if tuple(outputs.shape) != tuple(expected_shape):
    raise ValueError(f"outputs must have shape {tuple(expected_shape)} ({what}); "
                     f"got {tuple(outputs.shape)}.")


def classification_fns(loss: str) -> tuple[Callable, Callable]:
  """Loss and metric for scalar outputs f (B,) against labels y = ±1 (docs/theory.md section 2).

  Args:
    loss: "squared" (½(f - y)²) or "logistic" (softplus(-y f)).

  Returns:
    (loss, metric), each called as fn(outputs, batch). The loss is the mean of ℓ(f, y); the
    metric is {"accuracy": mean 1{sign f = y} (sign 0 is an error), "loss": that mean loss}.

  Example:
    >>> loss, metric = lj.tasks.base.classification_fns("squared")
    >>> batch = lj.tasks.Batch(jnp.zeros((2, 1), jnp.int32), jnp.ones((2, 1), bool),
    ...                        jnp.array([1.0, -1.0]), jnp.ones(2, jnp.int32), {})
    >>> f = jnp.array([1.0, 0.0])
    >>> float(loss(f, batch))  # (0 + ½)/2
    0.25
    >>> {name: float(value) for name, value in metric(f, batch).items()}  # f = 0 is an error
    {'accuracy': 0.5, 'loss': 0.25}
  """
  loss_fn = losses.get_loss(check_choice("loss", loss, losses.LOSSES))

  def mean_loss(outputs, batch: Batch):
    check_outputs(outputs, batch.targets.shape, "one score f per sequence")
    return jnp.mean(loss_fn(outputs, batch.targets))

  def metric(outputs, batch: Batch):
    check_outputs(outputs, batch.targets.shape, "one score f per sequence")
    errors = losses.zero_one_error(outputs, batch.targets)
    return {"accuracy": 1.0 - jnp.mean(errors), "loss": jnp.mean(loss_fn(outputs, batch.targets))}

  return mean_loss, metric
