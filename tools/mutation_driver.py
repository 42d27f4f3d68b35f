"""Mutation-testing driver for lagjax (issue 17): a development tool, not run by CI.

Usage:
  python tools/mutation_driver.py list   MODULE [--lines A-B] [--n 12] [--seed 0]
  python tools/mutation_driver.py run    MODULE --tests "tests/a.py tests/b.py::t" [--lines A-B]
                                   [--n 12] [--seed 0] [--timeout 240] [--only i,j]
  python tools/mutation_driver.py apply  MODULE --id K [--lines A-B] [--n 12] [--seed 0]

MODULE is a path relative to the worktree (/tmp/mut). Mutation points are found with `ast`:
  binop   + <-> -, * <-> /
  cmp     < <-> <=, > <-> >=, == <-> !=
  const   int n -> n+1, float x -> x+1.0 (so 0 -> 1, 1.0 -> 2.0); bools are not numbers here
  boolop  and <-> or
  not     `not x` -> `x`
  usub    `-x` -> `x`
  return  (only with --returns) `return x` -> `return None`, and True <-> False
Points are grouped by enclosing top-level function/method; with random.Random(seed) the
functions are shuffled and points drawn round-robin (one random point per function per
round) until n mutants, so the sample is spread over the module's functions.
Each mutant is written over the worktree file, the given tests run with
  nice -n 10 timeout T python -m pytest -x -q -n 0 -p no:cacheprovider TESTS
(exit 0 = survived, anything else = killed, timeout = killed), and the file is restored.
"""

import argparse
import ast
import difflib
import json
import os
import random
import subprocess
import sys
import time

ROOT = "/tmp/mut"
OPS_BIN = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*")}
OPS_CMP = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
           ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}


def offsets(src):
  starts, pos = [], 0
  for line in src.splitlines(keepends=True):
    starts.append(pos)
    pos += len(line.encode())
  return starts


class Finder(ast.NodeVisitor):
  def __init__(self, src):
    self.src, self.raw = src, src.encode()
    self.starts = offsets(src)
    self.points, self.scope = [], ["<module>"]
    self.skip = set()
    self.returns = False

  def off(self, line, col):
    return self.starts[line - 1] + col

  def span(self, node):
    return self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)

  def add(self, node, kind, start, end, new):
    old = self.raw[start:end].decode()
    self.points.append(dict(kind=kind, scope=".".join(self.scope[1:]) or "<module>",
                            line=node.lineno, start=start, end=end, old=old, new=new))

  def visit_FunctionDef(self, node):
    # docstrings and decorators are not mutated; scope = top-level def or Class.method
    depth = len(self.scope)
    if depth <= 2:
      self.scope.append(node.name)
    for d in node.decorator_list:
      self.skip.add(id(d))
    self.generic_visit(node)
    if depth <= 2:
      self.scope.pop()

  visit_AsyncFunctionDef = visit_FunctionDef

  def visit_ClassDef(self, node):
    self.scope.append(node.name)
    self.generic_visit(node)
    self.scope.pop()

  def visit_AnnAssign(self, node):
    self.skip.add(id(node.annotation))
    self.generic_visit(node)

  def visit_arg(self, node):
    if node.annotation is not None:
      self.skip.add(id(node.annotation))
    self.generic_visit(node)

  def generic_visit(self, node):
    if id(node) in self.skip:
      return
    super().generic_visit(node)

  def between(self, a, b):
    return self.off(a.end_lineno, a.end_col_offset), self.off(b.lineno, b.col_offset)

  def visit_BinOp(self, node):
    if type(node.op) in OPS_BIN:
      old, new = OPS_BIN[type(node.op)]
      s, e = self.between(node.left, node.right)
      text = self.raw[s:e].decode()
      i = text.find(old)
      if old in ("*", "/"):  # avoid ** and //
        while i >= 0 and (text[i:i + 2] in ("**", "//") or (i > 0 and text[i - 1] in "*/")):
          i = text.find(old, i + 2)
      if i >= 0:
        self.add(node, "binop", s + i, s + i + len(old), new)
    self.generic_visit(node)

  def visit_Compare(self, node):
    left = node.left
    for op, right in zip(node.ops, node.comparators):
      if type(op) in OPS_CMP:
        old, new = OPS_CMP[type(op)]
        s, e = self.between(left, right)
        text = self.raw[s:e].decode()
        i = text.find(old)
        if i >= 0:
          self.add(node, "cmp", s + i, s + i + len(old), new)
      left = right
    self.generic_visit(node)

  def visit_BoolOp(self, node):
    old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
    for a, b in zip(node.values, node.values[1:]):
      s, e = self.between(a, b)
      text = self.raw[s:e].decode()
      i = text.find(old)
      if i >= 0:
        self.add(node, "boolop", s + i, s + i + len(old), new)
    self.generic_visit(node)

  def visit_UnaryOp(self, node):
    if isinstance(node.op, (ast.Not, ast.USub)):
      s, _ = self.span(node)
      os_, _ = self.span(node.operand)
      text = self.raw[s:os_].decode()  # "-", "- ", "not ", "-(" ...: drop the operator only
      tok = "not" if isinstance(node.op, ast.Not) else "-"
      n = len(tok) + (len(text) - len(tok) - len(text[len(tok):].lstrip(" ")))
      self.add(node, "not" if tok == "not" else "usub", s, s + n, "")
    self.generic_visit(node)

  def visit_Constant(self, node):
    v = node.value
    if isinstance(v, bool) and self.returns:
      s, e = self.span(node)
      self.add(node, "bool", s, e, repr(not v))
      return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
      return
    s, e = self.span(node)
    new = repr(v + 1) if isinstance(v, int) else repr(float(v) + 1.0)
    self.add(node, "const", s, e, new)

  def visit_Return(self, node):
    if self.returns and node.value is not None:
      s, e = self.span(node.value)
      self.add(node, "return", s, e, "None")
    self.generic_visit(node)

  def visit_JoinedStr(self, node):  # numbers inside f-string text are message formatting
    return


def find_points(path, lines=None, returns=False):
  src = open(path).read()
  f = Finder(src)
  f.returns = returns
  f.visit(ast.parse(src))
  pts = f.points
  if lines:
    a, b = lines
    pts = [p for p in pts if a <= p["line"] <= b]
  pts.sort(key=lambda p: (p["start"], p["kind"]))
  return src, pts


def sample(pts, n, seed):
  rng = random.Random(seed)
  by = {}
  for p in pts:
    by.setdefault(p["scope"], []).append(p)
  scopes = sorted(by)
  rng.shuffle(scopes)
  for s in scopes:
    rng.shuffle(by[s])
  chosen = []
  while len(chosen) < n and any(by.values()):
    for s in scopes:
      if by[s] and len(chosen) < n:
        chosen.append(by[s].pop())
  return chosen


def mutate(src, p):
  raw = src.encode()
  return (raw[:p["start"]] + p["new"].encode() + raw[p["end"]:]).decode()


def diff(src, new, name):
  return "".join(difflib.unified_diff(src.splitlines(True), new.splitlines(True),
                                      f"a/{name}", f"b/{name}", n=0))


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("cmd")
  ap.add_argument("module")
  ap.add_argument("--tests", default="")
  ap.add_argument("--lines", default="")
  ap.add_argument("--n", type=int, default=12)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--timeout", type=int, default=240)
  ap.add_argument("--only", default="")
  ap.add_argument("--id", type=int, default=-1)
  ap.add_argument("--returns", action="store_true", help="also `return x` -> `return None`")
  ap.add_argument("--root", default=ROOT, help="worktree (default /tmp/mut)")
  ap.add_argument("--out", default="/tmp/mut_results")
  a = ap.parse_args()
  lines = tuple(int(x) for x in a.lines.split("-")) if a.lines else None
  path = os.path.join(a.root, a.module)
  src, pts = find_points(path, lines, a.returns)
  chosen = sample(pts, a.n, a.seed)
  muts = []
  for k, p in enumerate(chosen):
    new = mutate(src, p)
    compile(new, path, "exec")
    muts.append((k, p, new, diff(src, new, a.module)))
  if a.cmd == "list":
    print(f"{a.module}: {len(pts)} mutation points, {len(chosen)} sampled")
    for k, p, _, d in muts:
      print(f"--- #{k} {p['kind']} {p['scope']} line {p['line']}\n{d}")
    return
  if a.cmd == "apply":
    k, p, new, d = muts[a.id]
    open(path, "w").write(new)
    print(d)
    return
  assert a.cmd == "run"
  only = {int(x) for x in a.only.split(",")} if a.only else None
  os.makedirs(a.out, exist_ok=True)
  out = os.path.join(a.out, a.module.replace("/", "_") + ".jsonl")
  env = dict(os.environ, JAX_COMPILATION_CACHE_DIR="/tmp/mut_jaxcache",
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  try:
    for k, p, new, d in muts:
      if only is not None and k not in only:
        continue
      open(path, "w").write(new)
      t0 = time.time()
      # flock: one pytest at a time on this machine, shared with the verification runs
      cmd = ["flock", "/tmp/mut.lock", "nice", "-n", "10", "timeout", str(a.timeout),
             sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
             *a.tests.split()]
      r = subprocess.run(cmd, cwd=a.root, env=env, capture_output=True, text=True)
      dt = time.time() - t0
      status = "survived" if r.returncode == 0 else ("timeout-killed" if r.returncode == 124
                                                     else "killed")
      failed = [line for line in r.stdout.splitlines()
                if line.startswith(("FAILED", "ERROR"))][:2]
      rec = dict(module=a.module, id=k, kind=p["kind"], scope=p["scope"], line=p["line"],
                 status=status, rc=r.returncode, seconds=round(dt, 1), tests=a.tests,
                 failed=failed, tail=r.stdout.splitlines()[-1:] , diff=d)
      with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
      print(f"#{k} {status:15s} {dt:6.1f}s {p['kind']:6s} {p['scope']} L{p['line']}: "
            f"{p['old']!r}->{p['new']!r} {failed[:1]}", flush=True)
  finally:
    open(path, "w").write(src)


if __name__ == "__main__":
  main()
