"""Languages, as users reach them: `lj.languages` (docs/theory.md section 1).

A language over Σ = {0, …, d-1} is a label y(w) = ±1 on strings w, with a token law π
and a length law L. This module gathers in one namespace

- the protocol every language declares and its capabilities (lagjax/data/protocol.py:
  `Language`, `PresenceLabels`, `AutomatonLabels`, `CountLabels`, `missing`, `check_language`, …);
- the registry of families (lagjax/data/registry.py: `LANGUAGES`, `register`, `make`,
  `from_spec`);
- the constructor of any regular language, `regular(transitions, accepting, ...)`.

Importing it imports the built-in families, which register themselves: the occurrence
family (lagjax/data/occurrence.py), the regular languages
(lagjax/data/regular_builtins.py) and the counting languages (lagjax/data/counting.py).
A new family is one module that subclasses protocol.Language, calls registry.register, and
is imported here.
"""

from lagjax.data import (  # noqa: F401 (they register themselves)
    counting,
    occurrence,
    regular_builtins,
)
from lagjax.data.protocol import (
    AutomatonLabels,
    CountLabels,
    Language,
    PresenceLabels,
    check_language,
    missing,
    presence_rate,
)
from lagjax.data.registry import LANGUAGES, from_spec, make, register
from lagjax.data.regular import regular

__all__ = ["LANGUAGES", "AutomatonLabels", "CountLabels", "Language", "PresenceLabels",
           "check_language", "from_spec", "make", "missing", "presence_rate", "regular", "register"]
