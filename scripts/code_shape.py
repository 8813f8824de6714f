#!/usr/bin/env python3
"""code_shape.py: the shape of fp8lab's C sources (docs/design.md, "Folders and layers"), checked.

Failures (exit 1, one line each):
  - an upward include: a file of a folder includes a header of a folder that comes later in
    LAYERS (a higher layer): "src/sim/fp8.c:12: includes report.h (src/report): sim may not
    use report, a higher layer"; or a use of a folder that a confined folder (CONFINED: src/emu)
    does not name ("emu may use only sim, io, trace, experiment");
  - an upward call: an object file of a folder's library uses a symbol that only a higher
    folder's library defines (from nm): "call: sim -> report: fp8.c.o calls fp8_report_write
    (defined in report.c.o)";
  - a call cycle between object files: file A calls B when A has an undefined symbol that B
    defines, and the graph of those edges must be acyclic;
  - an implementer's header included by a caller: src/engine/engine_impl.h (the engines' op
    table) only by the engines (IMPLEMENTERS); callers use engine.h;
  - a name looked up at run time (dlsym) outside its one place (LOOKUPS): the GPU module is
    reached through its one descriptor, which only src/engine/engine_load.c opens
    (src/engine/gpu_module.h), and NCCL's functions are opened in src/gpu/timeline_nccl.c;
  - an include without use: a file includes a header of the tree and uses none of the names
    that header itself declares (its functions, types, struct tags, enum constants, macros and
    file-scope objects; names it merely passes on from headers it includes do not count). Such an
    include is a false dependency between layers or files (the report's timeline files once
    included engine.h for nothing); the compiler cannot see it (-Wunused does not look at
    headers). A file's own header (x.c, x.h in the same folder) is exempt.
Printed, not failures: files over 600 lines and functions over 120 (a split follows concerns,
not a number: docs/design.md).

Usage: code_shape.py ROOT [FOLDER=LIB.a | FOLDER=OBJECT_DIR ...]
  ROOT      the source tree (the folders of LAYERS below it: src/sim, kernels, ...)
  FOLDER    a name of LAYERS; LIB.a a static library, OBJECT_DIR a folder of .o files (every .o
            below it, e.g. build/src/gpu/CMakeFiles/fp8lab_gpu_module.dir), whose objects are
            that folder's code.
Exit 0 when every rule holds, 1 otherwise, 2 on bad usage.
"""
import os
import re
import subprocess
import sys

# The layers, lowest first: a folder may use (include, call) only itself and the folders before
# it. docs/design.md shows this list; this is where it is enforced.
LAYERS = [
    ("sim", "src/sim"),
    ("io", "src/io"),
    ("trace", "src/trace"),
    ("experiment", "src/experiment"),
    ("engine", "src/engine"),
    ("timeline", "src/timeline"),
    ("cpu", "src/cpu"),
    ("kernels", "kernels"),
    ("gpu", "src/gpu"),
    ("results", "src/results"),
    ("run", "src/run"),
    ("analysis", "src/analysis"),
    ("plot", "src/plot"),
    ("doc", "src/doc"),
    ("report", "src/report"),
    ("timeline_report", "src/timeline_report"),
    ("cli", "src/cli"),
    ("emu", "src/emu"),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# Folders off the line: each may use only the folders it names (not every lower one), and, last
# in LAYERS, none may use it. src/emu is the closed-loop emulator's shared library
# (libfp8lab_emu.so): the simulator and the experiment file, nothing of the runner or above.
CONFINED = {"emu": {"sim", "io", "trace", "experiment"}}


def use_problem(frm, to):
    """Why folder frm may not use folder to (the end of a failure line), or None."""
    if frm in CONFINED and to != frm and to not in CONFINED[frm]:
        return "%s may use only %s" % (frm, ", ".join(sorted(CONFINED[frm], key=RANK.get)))
    if RANK[to] > RANK[frm]:
        return "%s may not use %s, a higher layer" % (frm, to)
    return None
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp")
MAX_FILE = 600
MAX_FUNC = 120
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Headers for implementers only (as ggml-backend-impl.h), and the files that may include them.
IMPLEMENTERS = {
    "engine_impl.h": re.compile(r"^(src/engine/engine|src/engine/engine_composite\w*"
                                r"|src/cpu/engine_cpu\w*|src/gpu/engine_gpu\w*)\.(c|h)$"),
}
# The files that may look names up at run time, and why: a function pointer cast from a looked-up
# name is what a module built apart gets wrong silently, so each such name has one home.
LOOKUPS = {
    "src/engine/engine_load.c": "the GPU module's descriptor and the NVIDIA driver's probe",
    "src/gpu/timeline_nccl.c": "NCCL, opened at run time so that the module loads without it",
}
LOOKUP = re.compile(r"\bdl(v?sym)\s*\(")
# comments and string/char literals, in one pass: a "/*" inside a string starts no comment
C_TOKENS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
CPLUSPLUS = re.compile(r"#\s*ifdef\s+__cplusplus.*?#\s*endif", re.S)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
C_WORDS = {"if", "while", "for", "return", "sizeof", "switch", "int", "void", "char", "const",
           "static", "inline", "struct", "enum", "union", "unsigned", "double", "float", "long",
           "size_t", "extern", "typedef", "defined", "__attribute__", "template"}
# a definition: starts at column 0 with an identifier, has a '(' and no ';' on its first line
DEF_START = re.compile(r"^[A-Za-z_][\w \*]*\b([A-Za-z_]\w*)\s*\(")


def sources(root):
    """(layer, path relative to root, lines) of every source file of the layers."""
    for name, folder in LAYERS:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            continue
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, f)
                    with open(path, errors="replace") as fh:
                        yield name, os.path.relpath(path, root), fh.read().split("\n")


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
                out.append("%s:%d: function %s is %d lines" % (path, start + 1, name, n))
            start = None
    return out


def include_rules(files):
    """Upward includes (failures) and the length report (notes)."""
    owner = {}  # header name -> layer (names are unique across the layers' folders)
    for layer, path, _ in files:
        if path.endswith((".h", ".cuh")):
            owner.setdefault(os.path.basename(path), layer)
    problems, notes, edges = [], [], set()
    for layer, path, lines in files:
        n = len(lines) - (lines[-1] == "")
        if n > MAX_FILE:
            notes.append("%s: %d lines" % (path, n))
        if path.endswith((".c", ".cu", ".cc", ".cpp")):
            notes += long_functions(path, lines)
        here = os.path.dirname(path)
        for i, line in enumerate(lines):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            base = os.path.basename(header)
            if base in IMPLEMENTERS and not IMPLEMENTERS[base].match(path):
                problems.append("%s:%d: includes %s, the implementer's header: only the engines "
                                "may (callers use engine.h)" % (path, i + 1, header))
            # a header next to the file is the folder's own, whatever its name
            if os.path.exists(os.path.join(ROOT_DIR, here, header)):
                continue
            to = owner.get(base)
            if to is None:
                continue  # a system or third-party header
            edges.add((layer, to))
            why = use_problem(layer, to)
            if why:
                problems.append("%s:%d: includes %s (%s): %s" %
                                (path, i + 1, header, dict(LAYERS)[to], why))
    return problems, notes, edges


def lookup_rules(files):
    """dlsym outside LOOKUPS (failures), comments and strings left aside."""
    problems = []
    for _, path, lines in files:
        if path in LOOKUPS:
            continue
        for i, line in enumerate(strip_c("\n".join(lines)).split("\n")):
            if LOOKUP.search(line):
                problems.append("%s:%d: looks a name up at run time (dlsym): only %s may (%s)" %
                                (path, i + 1, " and ".join(sorted(LOOKUPS)),
                                 "; ".join("%s: %s" % kv for kv in sorted(LOOKUPS.items()))))
    return problems


def strip_c(text):
    """Comments and string/char literals blanked (newlines kept, so lines still count)."""
    return C_TOKENS.sub(lambda m: '""' if m.group(0)[0] in "\"'" else
                        "\n" * m.group(0).count("\n"), text)


def declared_names(text):
    """The names a header declares itself: macros (not its include guard), functions, function
    pointer typedefs, typedefs, struct/union/enum tags, enum constants, extern objects; at file
    scope (extern "C" and namespace braces are transparent; struct members are not names)."""
    t = CPLUSPLUS.sub("", text)
    t = strip_c(t)
    names = set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", t, re.M))
    guard = re.search(r"^\s*#\s*ifndef\s+(\w+)\s*\n\s*#\s*define\s+(\w+)", t, re.M)
    if guard and guard.group(1) == guard.group(2):
        names.discard(guard.group(1))
    # preprocessor lines, continuation lines included (a macro's body declares nothing)
    body = re.sub(r"^[ \t]*#(?:\\\n|[^\n])*", "", t, flags=re.M)
    body = re.sub(r"\bnamespace\b[^{;]*\{", "", body)
    depth = 0
    # functions (a name and '(') and objects defined with an initializer (a name and '=', as
    # `constexpr int kChunk = 16;`) at file scope
    for m in re.finditer(r"[{}]|\b([A-Za-z_]\w*)\s*(\(|=(?!=))", body):
        s = m.group(0)
        if s == "{":
            depth += 1
        elif s == "}":
            depth = max(0, depth - 1)
        elif depth == 0:
            names.add(m.group(1))
    names |= set(re.findall(r"\btypedef\b[^;{]*?\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(", body))
    names |= set(re.findall(r"\}\s*([A-Za-z_]\w*)\s*;", body))
    names |= set(re.findall(r"\btypedef\b[^;{]*?\b([A-Za-z_]\w*)\s*;", body))
    # tags a header defines or declares (`struct x {`, `struct x;`), not those it refers to
    names |= set(re.findall(r"\b(?:struct|union|enum)\s+([A-Za-z_]\w*)\s*[{;]", body))
    for e in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", body, re.S):
        names |= set(re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)", e.group(1)))
    names |= set(re.findall(r"\bextern\b[^;(]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;", body))
    return names - C_WORDS


def unused_include_rules(files):
    """Includes of a tree header none of whose own names the including file uses (failures)."""
    by_path = {path: lines for _, path, lines in files}
    by_name = {}
    for path in sorted(by_path):
        if path.endswith((".h", ".cuh")):
            by_name.setdefault(os.path.basename(path), path)
    decl, problems = {}, []
    for _, path, lines in files:
        text = "\n".join(lines)
        code = strip_c(text)
        used = set(IDENT.findall(re.sub(r"^\s*#\s*include[^\n]*", "", code, flags=re.M)))
        for i, line in enumerate(lines):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            local = os.path.normpath(os.path.join(os.path.dirname(path), header))
            hp = local if local in by_path else by_name.get(os.path.basename(header))
            own = (os.path.dirname(hp or "") == os.path.dirname(path) and
                   os.path.splitext(os.path.basename(hp or ""))[0] ==
                   os.path.splitext(os.path.basename(path))[0])
            if hp is None or hp == path or own:
                continue
            if hp not in decl:
                decl[hp] = declared_names("\n".join(by_path[hp]))
            if decl[hp] and not decl[hp] & used:
                problems.append("%s:%d: includes %s and uses none of its names (an include "
                                "without use: a false dependency)" % (path, i + 1, header))
    return problems


def nm_lines(inputs):
    """(layer, object name, symbol kind, symbol) of static libraries (.a) and object folders."""
    for layer, path in inputs:
        if os.path.isdir(path):
            args = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs
                          if f.endswith(".o"))
        else:
            args = [path]
        if not args:
            continue
        out = subprocess.run(["nm", "-A"] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"^(?:.*?\.a:)?(.*?\.o):\s*(?:[0-9a-fA-F]+)?\s+([A-Za-z])\s+(\S+)$", line)
            if m:
                yield layer, os.path.basename(m.group(1)), m.group(2), m.group(3)


def call_rules(inputs):
    """Upward calls (failures), the file graph's cycles, and the layer edges."""
    defined, undefined = {}, {}  # symbol -> (layer, object); (layer, object) -> symbols
    for layer, obj, kind, sym in nm_lines(inputs):
        node = (layer, obj)
        if kind == "U":
            undefined.setdefault(node, set()).add(sym)
        elif kind in "TDBRVWC":  # a global definition (lowercase: static, file-local)
            defined.setdefault(sym, node)
            undefined.setdefault(node, set())
    graph = {n: set() for n in set(undefined) | set(defined.values())}
    problems, edges = [], set()
    for node, syms in sorted(undefined.items()):
        for s in sorted(syms):
            d = defined.get(s)
            if not d or d == node:
                continue
            graph[node].add(d)
            edges.add((node[0], d[0]))
            why = use_problem(node[0], d[0])
            if why:
                problems.append("call: %s -> %s: %s calls %s (defined in %s): %s" %
                                (node[0], d[0], node[1], s, d[1], why))
    for comp in cycles(graph):
        problems.append("cycle between files: " + " <-> ".join("%s/%s" % c for c in comp))
    return problems, graph, edges


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


ROOT_DIR = "."


def main():
    global ROOT_DIR
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    ROOT_DIR = sys.argv[1]
    inputs = []
    for a in sys.argv[2:]:
        layer, sep, path = a.partition("=")
        if not sep or layer not in RANK:
            print("code_shape: %s: expected FOLDER=PATH with FOLDER one of %s" %
                  (a, ", ".join(RANK)))
            return 2
        inputs.append((layer, path))
    files = list(sources(ROOT_DIR))
    problems, notes, inc_edges = include_rules(files)
    problems += lookup_rules(files)
    problems += unused_include_rules(files)
    call_problems, graph, call_edges = call_rules(inputs)
    problems += call_problems
    for n in notes:
        print("note: " + n)
    for p in problems:
        print(p)
    uses = {}
    for a, b in inc_edges | call_edges:
        if a != b:
            uses.setdefault(a, set()).add(b)
    for name, _ in LAYERS:
        print("layer %-10s uses %s" % (name, ", ".join(sorted(uses.get(name, ()),
                                                              key=RANK.get)) or "-"))
    nedges = sum(len(v) for v in graph.values())
    print("code_shape: %d source files, %d objects, %d call edges between files, %d long files "
          "or functions (a report): %s" %
          (len(files), len(graph), nedges, len(notes),
           "%d problem(s)" % len(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
