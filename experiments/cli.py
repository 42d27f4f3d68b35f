"""How every binary starts and fails: `cli.run(main)` in place of absl's `app.run(main)`.

A user's mistake ends in one line on stderr and exit status 2, never a traceback
or a page of flag help first:
- a missing --config, a config file that does not exist or does not load;
- a --config.<field> override naming no field (the message names the field and
  suggests the nearest ones) or with a value of the wrong type;
- any app.UsageError that a binary raises for a bad config value.
Ctrl-C ends with one line (exit status 130): finished work is kept in the workdir,
and the same command resumes where the binary supports it.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import sys

from absl import app, flags
from ml_collections import config_dict

CONFIG_FLAG = "config"
# The latest (done, total, unit) of the running binary's progress, for the Ctrl-C line.
_progress: dict = {}


def note_progress(done: int, total: int, unit: str) -> None:
  """Records how far the binary is (common.progress_reporter calls it on every update)."""
  _progress.update(done=done, total=total, unit=unit)


def interrupted_message() -> str:
  """The Ctrl-C line: how far the run got, and that rerunning resumes it."""
  where = (f" after {_progress['done']} of {_progress['total']} {_progress['unit']}"
           if _progress else "")
  return (f"interrupted{where}. Finished work is kept in the workdir; rerun the same command "
          "to resume.")


def fail(message: str, status: int = 2, immediately: bool = False):
  """Writes '<binary>: error: <message>' on one line to stderr and exits with `status`;
  `immediately` exits without joining worker threads (os._exit, after flushing)."""
  name = os.path.basename(sys.argv[0]) if sys.argv else "lagjax"
  sys.stderr.write(f"{name}: error: {' '.join(str(message).split())}\n")
  if immediately:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
  sys.exit(status)


def _config_value(argv) -> str | None:
  """The value of --config in argv, if given ('path' or 'path:variant')."""
  for i, arg in enumerate(argv):
    if arg.startswith(f"--{CONFIG_FLAG}="):
      return arg.split("=", 1)[1]
    if arg == f"--{CONFIG_FLAG}" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _config_path(argv) -> str | None:
  """The config file of --config (without a ':variant' suffix), if given."""
  value = _config_value(argv)
  return None if value is None else value.split(":", 1)[0]


def _overrides(argv) -> list[tuple[str, str]]:
  """(field path, argument) of every --config.<path>[=value] in argv."""
  found = []
  for arg in argv:
    if arg.startswith(f"--{CONFIG_FLAG}."):
      found.append((arg[len(CONFIG_FLAG) + 3:].split("=", 1)[0], arg))
  return found


def _fields(config, prefix: str = "") -> list[str]:
  """Every field path of a ConfigDict, nested ones as a.b."""
  paths = []
  for key, value in config.items():
    paths.append(prefix + key)
    if isinstance(value, config_dict.ConfigDict):
      paths.extend(_fields(value, f"{prefix}{key}."))
  return paths


def _load_module(path: str):
  spec = importlib.util.spec_from_file_location("lagjax_user_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _load_config(path: str, variant: str):
  module = _load_module(path)
  return module.get_config(variant) if variant else module.get_config()


def variant_problem(path: str, variant: str) -> str | None:
  """Why `path:variant` names no variant of the config file (None when it does).

  Every config file reads `path:variant` the same way: a file declares its variants in
  VARIANTS (none when absent) and get_config(variant) builds one.
  """
  if not variant:
    return None
  try:
    allowed = tuple(getattr(_load_module(path), "VARIANTS", ()))
  except Exception:  # noqa: BLE001 (a config that does not load is explained later)
    return None
  if variant in allowed:
    return None
  return (f"unknown config variant {variant!r} of {os.path.basename(path)}; allowed: "
          f"{', '.join(allowed) or 'none (it has no variants)'}"
          + (f" (as --{CONFIG_FLAG} {path}:{allowed[0]})." if allowed else "."))


def explain_parse_error(argv, error: Exception) -> str:
  """One line saying which part of the command line is wrong, and what is allowed."""
  path = _config_path(argv)
  if path is None:
    return f"--{CONFIG_FLAG} is required: the path of a config file, e.g. experiments/configs/*.py."
  if os.path.isdir(path):
    return (f"--{CONFIG_FLAG} {path} is a directory: give a config file in it, e.g. "
            f"{os.path.join(path, '<name>.py')}.")
  if not os.path.isfile(path):
    return f"--{CONFIG_FLAG} {path}: no such file."
  variant = _config_value(argv).partition(":")[2]
  problem = variant_problem(path, variant)
  if problem:
    return f"--{CONFIG_FLAG} {_config_value(argv)}: {problem}"
  try:
    fields = _fields(_load_config(path, variant))
  except Exception as load_error:  # noqa: BLE001 (a user's config may fail in any way)
    return f"--{CONFIG_FLAG} {_config_value(argv)} does not load: {load_error}"
  overrides = _overrides(argv)
  for field, arg in overrides:
    if field not in fields:
      near = difflib.get_close_matches(field, fields, n=3)
      hint = f" Did you mean {', '.join(near)}?" if near else ""
      return f"{arg}: {path} has no field {field!r}.{hint} Its fields: {', '.join(fields)}."
  given = " ".join(arg for _, arg in overrides)
  return f"bad --{CONFIG_FLAG} value ({given or path}): {error}"


def run(main) -> None:
  """app.run(main) with the failures of the module docstring reported in one line."""
  def parse(argv):
    path = _config_path(argv)
    if path is not None and (not os.path.isfile(path)   # ml_collections would defer this
                             or variant_problem(path, _config_value(argv).partition(":")[2])):
      fail(explain_parse_error(argv, FileNotFoundError(path)))
    try:
      parsed = flags.FLAGS(argv)
    except Exception as error:  # noqa: BLE001 (flag and config parsing raise many types)
      fail(explain_parse_error(argv, error))
    if CONFIG_FLAG in flags.FLAGS and flags.FLAGS[CONFIG_FLAG].value is None:
      fail(explain_parse_error(argv, ValueError("no config")))
    return parsed

  def guarded(argv):
    try:
      return main(argv)
    except app.UsageError as error:
      fail(str(error))
    except KeyboardInterrupt:  # not waiting for worker threads (Table 1's running blocks)
      fail(interrupted_message(), status=130, immediately=True)

  app.run(guarded, flags_parser=parse)


__all__ = ["explain_parse_error", "fail", "interrupted_message", "note_progress", "run",
           "variant_problem"]
