"""The README's Python examples as data: each ```python block, and the output it prints.

A block that prints is followed, in the README, by a line `prints` and a plain ``` block
with its output. The blocks run in order in one namespace, as a reader would paste them
into one session. `python tests/project/readme_examples.py` prints what every block prints now,
for updating the README after a deliberate change.
"""

import contextlib
import dataclasses
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<out>.*?)```\n)?",
                   re.DOTALL)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@dataclasses.dataclass(frozen=True)
class Example:
  line: int               # README line of the opening fence
  code: str
  expected: str | None    # None: the block prints nothing the README shows


def examples(text: str | None = None) -> list[Example]:
  text = README.read_text("utf-8") if text is None else text
  return [Example(text.count("\n", 0, m.start()) + 1, m["code"], m["out"])
          for m in BLOCK.finditer(text)]


def run(example: Example, namespace: dict) -> str:
  """Executes the block in `namespace` and returns what it printed."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(example.code, f"README.md:{example.line}", "exec"), namespace)
  return out.getvalue()


def _tolerance(shown: str) -> float:
  """Half a unit in the last digit the README shows, for numbers it shows rounded."""
  mantissa, _, exponent = shown.lower().partition("e")
  decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
  return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def mismatches(expected: str, actual: str, rtol: float) -> list[str]:
  """Where `actual` differs from `expected`: text must match (`...` matches anything) and
  numbers must agree within rtol relative, or within the rounding of the digits shown."""
  pattern = "".join(
      "(.*?)" if piece == "..." else "(" + NUMBER.pattern + ")" if NUMBER.fullmatch(piece)
      else re.escape(piece)
      for piece in re.split(r"(\.\.\.|" + NUMBER.pattern + ")", expected.strip()) if piece)
  squeeze = lambda s: re.sub(r"\s+", " ", s)
  match = re.fullmatch(squeeze(pattern).replace(r"\ ", r"\s*").replace(" ", r"\s*"),
                       actual.strip(), re.DOTALL)
  if match is None:
    return [f"text differs:\n--- README\n{expected}--- now\n{actual}"]
  shown = [p for p in re.split(r"(\.\.\.|" + NUMBER.pattern + ")", expected.strip())
           if p and p != "..." and NUMBER.fullmatch(p)]
  got = [g for g, piece in zip(match.groups(), _pieces(expected)) if piece == "number"]
  problems = []
  for want, have in zip(shown, got):
    a, b = float(want), float(have)
    if abs(a - b) > max(rtol * abs(a), _tolerance(want)):
      problems.append(f"{have} where the README shows {want}")
  return problems


def _pieces(expected: str) -> list[str]:
  return ["any" if p == "..." else "number" if NUMBER.fullmatch(p) else "text"
          for p in re.split(r"(\.\.\.|" + NUMBER.pattern + ")", expected.strip())
          if p and (p == "..." or NUMBER.fullmatch(p))]


if __name__ == "__main__":
  import jax
  jax.config.update("jax_enable_x64", True)
  namespace: dict = {"__name__": "readme"}
  for example in examples():
    printed = run(example, namespace)
    print(f"--- README.md:{example.line}\n{printed}")
