"""The data layer (docs/theory.md section 1): length laws, languages, token groups.

- `lengths`: length laws L on n ∈ {1, 2, …};
- `languages`: what a language declares (the protocol that routes and engines read),
  its capabilities, and the registry of language families;
- `occurrence`: the occurrence family (occurrence, OR, AND), labels from presence;
- `sampling`: count vectors of fresh strings;
- `partition`: token groups, partitions of Σ into interchangeable tokens.

Nothing here imports a model, a risk route or a training loop.
"""

from lagjax.data import languages, lengths, occurrence, partition, sampling

__all__ = ["languages", "lengths", "occurrence", "partition", "sampling"]
