"""The sampled route (lagjax/risk/sampled.py, docs/theory.md §3c): its report is the sample mean
with its standard error, and strings are padded to power-of-two buckets.

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code. The route's agreement with the exact routes is
tests/risk/test_routes.py.
"""

import jax
import numpy as np

import lagjax as lj
from lagjax.models import direct
from lagjax.risk import base, sampled


def test_sampled_report_is_the_sample_mean_and_standard_error():
  """report() of the sampled route gives, over its fixed sample, the mean loss and mean 0-1
  error and their standard errors std(ddof=1)/√n (the Bessel-corrected estimate), recomputed
  here string by string from the same batches. Same float64 terms summed in another order
  (n = 64 terms of size < 10): rtol 1e-10 is rounding only. θ is chosen so that the 0-1 error
  lies strictly between 0 and 1 (asserted), so error² and error³ differ.
  Kills: error_stderr with error**3; stderr with (total - 2); ℓ³ in place of ℓ² in the sums;
  risk() returning the mean ℓ² (sums[1]); build without a partition keeping None."""
  lang = lj.occurrence(3, 0, length=lj.geometric(0.3))
  params = {"alpha": np.array([0.5, -0.2, 0.1]), "beta": np.array([1.5, -0.7, 0.2])}
  key, n = jax.random.key(3), 64
  route = lj.risk.ROUTES["sampled"].build(lang, key=key, n_samples=n)
  report = route.report(params)
  losses, errors = [], []

  @jax.jit  # one compiled program per batch shape
  def per_string(params, batch):
    f = direct.forward_tokens(params, batch.tokens, batch.mask)
    return base.squared_loss(f, batch.labels), base.zero_one_error(f, batch.labels)

  for batch in sampled.sample_batches(key, lang, n):
    keep = np.asarray(batch.weight) > 0
    loss, error = per_string(params, batch)
    losses.append(np.asarray(loss)[keep])
    errors.append(np.asarray(error)[keep])
  losses, errors = np.concatenate(losses), np.concatenate(errors)
  assert losses.size == n == report["n_samples"]
  assert 0.0 < errors.mean() < 1.0
  for name, values in (("risk", losses), ("error", errors)):
    np.testing.assert_allclose(float(report[name]), values.mean(), rtol=1e-10)
  np.testing.assert_allclose(float(route.risk(params)), losses.mean(), rtol=1e-10)
  for name, values in (("stderr", losses), ("error_stderr", errors)):
    np.testing.assert_allclose(float(report[name]), values.std(ddof=1) / np.sqrt(n), rtol=1e-10)


def test_sample_buckets_are_powers_of_two():
  """Strings are padded to power-of-two widths of at least 8 (bucket_length's contract), so
  the chunk shapes, and with them the compilations of _chunk_sums, come from a handful of
  buckets; each width is the smallest such bucket for its strings. Integer arithmetic: exact.
  Kills: bucket_length with a floor of 9; sample_batches with 3**k widths."""
  assert [sampled.bucket_length(n) for n in (1, 2, 8, 9, 16, 17, 1000)] == [8, 8, 8, 16, 16,
                                                                          32, 1024]
  lang = lj.occurrence(3, 0, length=lj.geometric(0.05))  # mean length 20: several buckets
  widths = set()
  for batch in sampled.sample_batches(jax.random.key(0), lang, 200):
    width = batch.tokens.shape[1]
    lengths = np.asarray(batch.mask).sum(axis=1)[np.asarray(batch.weight) > 0]
    assert width == sampled.bucket_length(int(lengths.max()))
    assert all(sampled.bucket_length(int(n)) == width for n in lengths)
    widths.add(width)
  assert len(widths) >= 3
