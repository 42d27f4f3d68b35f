"""The data layer (docs/theory.md section 1): length laws, languages, token groups.

- `lengths`: length laws L on n ∈ {1, 2, …};
- `languages`: what a language is (the protocol every route and engine reads) and the
  registry of language families;
- `occurrence`: the occurrence family (occurrence, OR, AND), labels from presence;
- `partition`: token groups, partitions of Σ into interchangeable tokens.

Nothing here imports a model, a risk route or a training loop.
"""

from lagjax.data import languages, lengths, partition

__all__ = ["languages", "lengths", "partition"]
