"""The data layer (docs/theory.md section 1): length laws, languages, token groups.

- `lengths`: length laws L on n ∈ {1, 2, …};
- `languages`: languages as users reach them (`lj.languages`): the protocol, the registry
  and the built-in families in one namespace;
- `protocol`: what a language declares (the protocol that routes and engines read) and its
  capabilities;
- `registry`: the registry of language families (a family registers itself);
- `occurrence`: the occurrence family (occurrence, OR, AND), labels from presence;
- `regular`: regular languages, labels decided by a minimal complete automaton;
- `regular_builtins`: the built-in regular languages (parity, first, even_pairs, Tomita,
  Dyck, cycle navigation, counting mod m, substrings, the occurrence family as automata);
- `counting`: the counting languages (majority, plurality, Dyck-1, aⁿbⁿ), labels from
  counts and the string's ends;
- `sampling`: count vectors of fresh strings;
- `partition`: token groups, partitions of Σ into interchangeable tokens.

A new language family is one module that subclasses protocol.Language and calls
registry.register, imported by `languages`; a new length law is one class in `lengths`.
Nothing here imports a model, a risk route or a training loop.
"""

from lagjax.data import (
    counting,
    languages,
    lengths,
    occurrence,
    partition,
    protocol,
    registry,
    regular,
    regular_builtins,
    sampling,
)

__all__ = ["counting", "languages", "lengths", "occurrence", "partition", "protocol", "regular",
           "regular_builtins", "registry", "sampling"]
