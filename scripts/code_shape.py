#!/usr/bin/env python3
"""code_shape.py: the shape rules of fp8lab's C sources (docs/design.md), checked.

  - no file in src/ over MAX_FILE lines (600);
  - no function in src/ over MAX_FUNC lines (120), counted from the line that opens its
    definition to its closing brace at column 0;
  - no call cycle between the object files of the given static libraries: file A calls B when
    A has an undefined symbol that B defines (nm), and the graph of those edges must be acyclic
    (the trace readers use helpers from a leaf file, not from trace.c; the runner and engines
    are layered).

Usage: code_shape.py SRC_DIR [LIB.a | OBJECT_DIR ...]     exit 0 when every rule holds, 1 otherwise (each
violation on its own line: "file:line: ..." or "cycle: a.c -> b.c -> a.c").
"""
import os
import re
import subprocess
import sys

MAX_FILE = 600
MAX_FUNC = 120
# a definition: starts at column 0 with an identifier, has a '(' and no ';' on its first line
DEF_START = re.compile(r"^[A-Za-z_][\w \*]*\b([A-Za-z_]\w*)\s*\(")


def long_functions(path, lines):
    out, start, name = [], None, None
    for i, line in enumerate(lines):
        if start is None:
            m = DEF_START.match(line)
            if not m or line.rstrip().endswith(";") or line.startswith(("typedef", "struct", "#")):
                continue
            j = i  # the opening brace ends this line or one of the next (a wrapped signature)
            while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                start, name = i, m.group(1)
        elif line.startswith("}"):
            n = i - start + 1
            if n > MAX_FUNC:
                out.append("%s:%d: function %s is %d lines (limit %d)" % (path, start + 1, name, n, MAX_FUNC))
            start = None
    return out


def source_rules(src):
    problems, nfiles = [], 0
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".cu")):
                continue
            path = os.path.join(root, f)
            with open(path, errors="replace") as fh:
                lines = fh.read().split("\n")
            nfiles += 1
            n = len(lines) - (lines[-1] == "")
            if n > MAX_FILE:
                problems.append("%s:1: %d lines (limit %d)" % (path, n, MAX_FILE))
            if f.endswith((".c", ".cu")):
                problems += long_functions(path, lines)
    return problems, nfiles


def nm_lines(paths):
    """(object name, symbol kind, symbol) of static libraries (.a) and object folders (every
    .o below them, e.g. build/src/gpu/CMakeFiles/fp8lab_gpu_module.dir)."""
    for path in paths:
        if os.path.isdir(path):
            objs = [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs if f.endswith(".o")]
            args = sorted(objs)
        else:
            args = [path]
        if not args:
            continue
        out = subprocess.run(["nm", "-A"] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
        for line in out.splitlines():
            m = re.match(r"^(?:.*?\.a:)?(.*?\.o):\s*(?:[0-9a-fA-F]+)?\s+([A-Za-z])\s+(\S+)$", line)
            if m:
                obj = re.sub(r"(\.(c|cu|cc|cpp))?\.o$", "", os.path.basename(m.group(1)))
                yield obj, m.group(2), m.group(3)


def call_graph(paths):
    """{object: set(objects it calls)} from nm."""
    defined, undefined = {}, {}
    for obj, kind, sym in nm_lines(paths):
        if kind == "U":
            undefined.setdefault(obj, set()).add(sym)
        elif kind in "TDBRVWC":  # a global definition (lowercase: static, file-local)
            defined.setdefault(sym, obj)
            undefined.setdefault(obj, set())
    graph = {o: set() for o in set(undefined) | set(defined.values())}
    for obj, syms in undefined.items():
        for s in syms:
            d = defined.get(s)
            if d and d != obj:
                graph[obj].add(d)
    return graph


def cycles(graph):
    """One cycle per strongly connected component with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    problems, nfiles = source_rules(sys.argv[1])
    libs = sys.argv[2:]
    graph = call_graph(libs) if libs else {}
    for comp in cycles(graph):
        problems.append("cycle between files: " + " <-> ".join(c + ".c" for c in comp))
    for p in problems:
        print(p)
    nedges = sum(len(v) for v in graph.values())
    print("code_shape: %d source files, %d objects, %d call edges between files: %s" %
          (nfiles, len(graph), nedges, "%d problem(s)" % len(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
