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
from lagjax.data import lengths as lengths_lib
from lagjax.validation import check_choice, check_int, check_positive  # noqa: F401 (re-exported to the task files)

KINDS = ("classification", "regression", "next_token")
DEFAULT_TAIL = 1e-3


class Batch(NamedTuple):
  """A padded batch of B sequences of at most L = max_len positions.

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
  """

  inputs: jax.Array
  mask: jax.Array
  targets: jax.Array
  lengths: jax.Array
  info: dict
  multiplicity: jax.Array | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
  """A task built once from its options (compared and hashed by identity).

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
    options: the resolved options; get_task(name, **options) rebuilds the task.
    extras: derived constants (the Language, the SLR directions k*, v*, ...).
    sample: (key, batch_size) -> Batch; jitted, batch_size static.
    loss: (outputs, batch) -> scalar mean loss; differentiable in outputs.
    metric: (outputs, batch) -> dict of scalars.
  """

  name: str
  kind: str
  input_kind: str
  input_dim: int
  n_outputs: int
  max_len: int
  length: lengths_lib.LengthLaw
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
  """Builds a Task, freezing its option and extra mappings and jitting `sample`."""
  if fields["kind"] not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}; got {fields['kind']!r}.")
  fields["options"] = types.MappingProxyType(dict(fields["options"]))
  fields["extras"] = types.MappingProxyType(dict(fields.get("extras", {})))
  fields["sample"] = jax.jit(fields["sample"], static_argnums=1)
  return Task(**fields)


def count_form(task: Task, ends: bool = False) -> Task:
  """The task with each sampled string compressed to its token counts (docs/theory.md §2).

  The strings, labels and random stream are the token form's; only the batch's layout
  changes. Without `ends`, inputs are the V token types (B, V), the mask marks the types
  that occur and `multiplicity` holds their counts: all a model that ignores order (CLS
  query, no positions) reads. With `ends`, the first and the last token keep entries of
  their own, [w_1, types of w_2 … w_{n-1}, w_n] (B, V + 2), w_n absent when n = 1: all a
  model with first/last markers or the last-token query reads. The padded length max_len
  (and so the length law's truncation) is unchanged; the batch is V or V + 2 wide.
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


def check_length(length) -> lengths_lib.LengthLaw:
  if not isinstance(length, lengths_lib.Geometric | lengths_lib.Fixed
                    | lengths_lib.ShiftedPoisson):
    raise ValueError(
        f"length must be a length law (lj.geometric, lj.fixed, lj.shifted_poisson); "
        f"got {length!r}.")
  return length


def check_max_len(max_len, length: lengths_lib.LengthLaw) -> int:
  """max_len as given (an integer >= 1 with P(n <= max_len) > 0), or the default for `length`."""
  if max_len is None:
    return lengths_lib.truncation_length(length, DEFAULT_TAIL)
  max_len = check_int("max_len", max_len, 1)
  if length.tail(max_len) >= 1.0:
    raise ValueError(
        f"max_len = {max_len} leaves no mass under the length law {length}: P(n <= max_len) = 0.")
  return max_len


# Lengths and tokens.


def truncated_pmf(length: lengths_lib.LengthLaw, max_len: int) -> np.ndarray:
  """P(n | n <= max_len) for n = 1 … max_len, the law every task samples its lengths from."""
  pmf = np.exp(np.asarray(length.log_pmf(np.arange(1, max_len + 1, dtype=np.float64)),
                          dtype=np.float64))
  return pmf / pmf.sum()


def truncated_length_sampler(length: lengths_lib.LengthLaw, max_len: int) -> Callable:
  """Sampler of n ~ L conditioned on n <= max_len, by inverse CDF (no rejection).

  Returns:
    sample(key, shape) -> int array of lengths in {1, …, max_len}; jittable.
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
  """(B, max_len) bool, True on the first lengths[b] positions."""
  return jnp.arange(max_len)[None, :] < lengths[:, None]


def iid_tokens(key, pi, shape):
  """Tokens iid π by inverse CDF (one uniform per token), int32."""
  cdf = jnp.cumsum(jnp.asarray(pi, dtype=jnp.float64))[:-1]
  uniforms = jax.random.uniform(key, shape, dtype=jnp.float64)
  return jnp.searchsorted(cdf, uniforms, side="right").astype(jnp.int32)


def check_outputs(outputs, expected_shape, what: str):
  """Shapes are static under jit, so a mismatch raises at trace time."""
  if tuple(outputs.shape) != tuple(expected_shape):
    raise ValueError(f"outputs must have shape {tuple(expected_shape)} ({what}); "
                     f"got {tuple(outputs.shape)}.")


def classification_fns(loss: str) -> tuple[Callable, Callable]:
  """Loss and metric for scalar outputs f (B,) against labels y = ±1 (docs/theory.md section 2).

  loss: the mean of ℓ(f, y) ("squared" ½(f - y)², or "logistic").
  metric: {"accuracy": mean 1{sign f = y} (sign 0 is an error), "loss": the same mean loss}.
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
