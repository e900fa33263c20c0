#!/usr/bin/env python3
"""The shape of the Python tooling, checked with ast (no import runs): the packages (grader,
tooling, python/conv_pool_ladder) never change sys.path and never import a script by its bare
name; an entry point (scripts/, tests/, grader/'s tests and scripts, a __main__.py) changes
sys.path at most once; and no import cycle exists among the packages' modules, nor among the
packages themselves; and imports run one way only (DIRECTION): `tooling` never imports `grader`,
and the binding neither of them. Imports inside functions count: a cycle that only a lazy import
closes is still a cycle.

The classroom is a wing (WING, grader/): the rest of the repository never reaches into it
(wing_violations). No Python file outside grader/ imports the grader, save the thin alias
scripts/assignment.py; no C, C++ or CUDA file outside it includes a file of grader/; no CMake
file outside it names grader/, save the one hook in the top-level CMakeLists.txt that adds the
grader's timing programs when a grading asks for them. Comments and documentation may point
there.

  python3 scripts/test_structure.py      (CTest: tooling_structure)
"""
import ast
import os
import re
import sys
import tempfile
import unittest
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Folders whose packages are importable: the repository root (grader, tooling) and python/.
PACKAGE_ROOTS = ("", "python")
ENTRY_FOLDERS = ("scripts", "tests", "grader/tests", "grader/checks", "grader/slurm")
# Top-level package -> the top-level packages it must never import: the lessons' tooling stands
# below the classroom (grader); the PyTorch binding (conv_pool_ladder) below both.
DIRECTION = {"tooling": {"grader"}, "conv_pool_ladder": {"grader", "tooling"}}
# The classroom's wing: everything of grading and handouts lives under it, and nothing outside it
# depends on it (wing_violations), save these files of the core.
WING = "grader"
WING_PYTHON_ALIASES = {"scripts/assignment.py"}  # `python3 scripts/assignment.py` = `python3 -m grader`
WING_CMAKE_HOOK = ("CMakeLists.txt", "add_subdirectory(grader)")  # the timing programs (LADDER_GRADE_RUNGS)
C_SOURCES = (".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp")
C_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# grader named as a path in CMake code: add_subdirectory(grader), ${PROJECT_SOURCE_DIR}/grader/x.
CMAKE_WING_PATH = re.compile(r'(?:^|[\s("/}])grader(?=[/)\s"]|$)')


def python_files(root):
    """Paths (relative, with /) of the .py files under root, outside build folders and hidden ones."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "build")) and d != "__pycache__")
        out += [os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                for f in sorted(filenames) if f.endswith(".py")]
    return out


def is_entry_point(path):
    return path.startswith(tuple(f + "/" for f in ENTRY_FOLDERS)) or path.endswith("/__main__.py")


def module_name(root, path):
    """(dotted name, is a package's __init__) of a package module, or None where a folder on the
    way has no __init__.py (a script's folder, not a package)."""
    for base in PACKAGE_ROOTS:
        prefix = base + "/" if base else ""
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix):][:-3].split("/")
        folders = [prefix + "/".join(parts[:i + 1]) for i in range(len(parts) - 1)]
        if parts and all(os.path.isfile(os.path.join(root, f, "__init__.py")) for f in folders) and len(parts) > 1:
            init = parts[-1] == "__init__"
            return ".".join(parts[:-1] if init else parts), init
    return None


def sys_path_changes(tree):
    """Line numbers of sys.path.insert/append/extend calls and of assignments to sys.path."""
    lines = []
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else None
        if isinstance(target, ast.Attribute) and target.attr in ("insert", "append", "extend") \
                and ast.unparse(target.value) == "sys.path":
            lines.append(node.lineno)
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t).startswith("sys.path") for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def imported(tree, name, is_package):
    """The dotted names a module imports (each `from X import y` gives X.y and X), relative
    imports resolved against the module's own package."""
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return out


def repository_files(root):
    """Paths (relative, with /) of every file under root, outside build folders and hidden ones."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "build")) and d != "__pycache__")
        out += [os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/") for f in sorted(filenames)]
    return out


def imports_the_wing(tree):
    """Line numbers where a module imports grader: import statements, and importlib.import_module
    or runpy.run_module called with a literal name."""
    lines = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "run_module") \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.append(node.args[0].value)
        if any(n.split(".")[0] == WING for n in names):
            lines.append(node.lineno)
    return sorted(lines)


def cmake_code(text):
    """(line number, code) of a CMake file's lines, each without its comment (a # outside quotes)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        code, quoted = [], False
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            if ch == "#" and not quoted:
                break
            code.append(ch)
        out.append((number, "".join(code)))
    return out


def wing_violations(root):
    """Where a file outside grader/ depends on it, as lines `path:line: ...` (empty: none does)."""
    wing = WING + "/"
    files = repository_files(root)
    wing_headers = {os.path.basename(f) for f in files if f.startswith(wing) and f.endswith(C_SOURCES)}
    out = []
    for path in files:
        if path.startswith(wing):
            continue
        full = os.path.join(root, path)
        name = os.path.basename(path)
        if path.endswith(".py") and path not in WING_PYTHON_ALIASES:
            with open(full, encoding="utf-8") as f, warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                tree = ast.parse(f.read(), path)
            out += [f"{path}:{line}: imports {WING}, the classroom's wing" for line in imports_the_wing(tree)]
        elif path.endswith(C_SOURCES):
            with open(full, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in C_INCLUDE.finditer(text):
                target = m.group(1)
                if f"{WING}/" in f"/{target}" or (os.path.basename(target) in wing_headers and "/" not in target):
                    line = text.count("\n", 0, m.start()) + 1
                    out.append(f"{path}:{line}: includes {target}, a file of the classroom's wing {wing}")
        elif name == "CMakeLists.txt" or name.endswith(".cmake"):
            with open(full, encoding="utf-8", errors="replace") as f:
                lines = cmake_code(f.read())
            for number, code in lines:
                if CMAKE_WING_PATH.search(code) and \
                        not (path == WING_CMAKE_HOOK[0] and code.strip() == WING_CMAKE_HOOK[1]):
                    out.append(f"{path}:{number}: names {wing} in CMake code (only {WING_CMAKE_HOOK[0]}'s "
                               f"`{WING_CMAKE_HOOK[1]}` may)")
    return out


def load(root):
    """{path: ast} of every Python file under root."""
    trees = {}
    for path in python_files(root):
        with open(os.path.join(root, path), encoding="utf-8") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # a module's own escapes are not this test's
            warnings.simplefilter("ignore", DeprecationWarning)
            trees[path] = ast.parse(f.read(), path)
    return trees


def graph(root, trees):
    """{module: set of project modules it imports}, for the package modules."""
    names = {}
    for path in trees:
        m = module_name(root, path)
        if m and not is_entry_point(path):
            names[path] = m
    modules = {n for n, _ in names.values()}
    edges = {}
    for path, (name, init) in names.items():
        targets = set()
        for dotted in imported(trees[path], name, init):
            while dotted and dotted not in modules:  # `from pkg import function`: the module pkg
                dotted = dotted.rpartition(".")[0]
            if dotted and dotted != name:
                targets.add(dotted)
        edges[name] = targets
    return edges


def find_cycle(edges):
    """One cycle of the graph as a list of nodes (first == last), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = "done"
        stack.pop()
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)):
            return found
    return None


def package_of(name, edges):
    """The package a module belongs to: itself for a package's __init__, else its parent."""
    return name if any(k.startswith(name + ".") for k in edges) else name.rpartition(".")[0]


def problems(root):
    """Every violation, as lines (empty: the structure holds)."""
    trees, out = load(root), []
    scripts = {os.path.basename(p)[:-3] for p in trees if is_entry_point(p)}
    for path, tree in sorted(trees.items()):
        changes = sys_path_changes(tree)
        if not is_entry_point(path):
            out += [f"{path}:{line}: changes sys.path outside an entry point" for line in changes]
            for node in ast.walk(tree):  # a bare name only sys.path tricks could resolve
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
                out += [f"{path}:{node.lineno}: imports the script {n} by its bare name"
                        for n in names if n.split(".")[0] in scripts]
        elif len(changes) > 1:
            out.append(f"{path}:{changes[1]}: an entry point changes sys.path more than once (lines {changes})")
    edges = graph(root, trees)
    cycle = find_cycle(edges)
    if cycle:
        out.append("import cycle among modules: " + " -> ".join(cycle))
    packages = {}
    for n, targets in edges.items():
        p = package_of(n, edges)
        packages.setdefault(p, set()).update(package_of(t, edges) for t in targets)
    packages = {p: {t for t in ts if t != p and not p.startswith(t + ".") and not t.startswith(p + ".")}
                for p, ts in packages.items()}  # a subpackage and its parent may use each other
    cycle = find_cycle(packages)
    if cycle:
        out.append("import cycle among packages: " + " -> ".join(cycle))
    return out + wrong_way(edges) + wing_violations(root)


def wrong_way(edges):
    """Imports against DIRECTION, as lines: `module imports target`."""
    top = lambda name: name.split(".")[0]  # noqa: E731
    return [f"{n} imports {t}: {top(n)} never imports {top(t)}" for n, targets in sorted(edges.items())
            for t in sorted(targets) if top(t) in DIRECTION.get(top(n), ())]


class StructureTest(unittest.TestCase):
    def test_structure(self):
        self.assertEqual(problems(ROOT), [])

    def test_the_packages_are_seen(self):
        """The graph holds the packages' modules and their edges: a check that sees nothing passes."""
        edges = graph(ROOT, load(ROOT))
        for name in ("grader.handout", "grader.track", "grader.problems", "tooling.checks.check_program",
                     "tooling.results.update_results", "tooling.results.plots.make_all"):
            self.assertIn(name, edges)
        self.assertIn("grader.problems", edges["grader.handout"])
        self.assertIn("tooling.checks.check_program", edges["grader.runs"])
        self.assertIn("tooling.results.ladder_results", edges["tooling.results.plots._common"])

    def test_direction_rule_catches_a_plant(self):
        self.assertEqual(wrong_way({"tooling.results.x": {"grader.technique", "tooling.checks.sass"},
                                    "grader.technique": {"tooling.checks.sass"}}),
                         ["tooling.results.x imports grader.technique: tooling never imports grader"])

    def test_wing_rule_catches_a_plant(self):
        """A copy of the layout with one file of each kind that reaches into grader/, beside the
        dependencies the rule allows (the alias, the CMake hook, comments, documentation)."""
        plant = {
            "grader/__init__.py": "",
            "grader/handout.py": "import os\n",
            "grader/fresh_inputs.cuh": "#pragma once\n",
            "grader/CMakeLists.txt": "add_executable(t t.cu)\n",
            "scripts/assignment.py": "from grader.assignment import main\n",
            "CMakeLists.txt": "# the grader's hook (grader/)\nif(LADDER_GRADE_RUNGS)\n  add_subdirectory(grader)\nendif()\n",
            "README.md": "See [the grader](grader/handout.py).\n",
            "common/toolkit/uniform01.hpp": "// the same draws as grader/fresh_inputs.cuh\n#pragma once\n",
            "tooling/results/x.py": "import os\n\ndef f():\n    from grader import handout\n",
            "python/pkg/y.py": "import importlib\nm = importlib.import_module('grader.handout')\n",
            "stages/99_plant/plant.cu": "#include \"../../grader/fresh_inputs.cuh\"\n",
            "harness/plant.hpp": "#include \"fresh_inputs.cuh\"\n",
            "tests/CMakeLists.txt": "add_test(NAME t COMMAND python3 ${PROJECT_SOURCE_DIR}/grader/tests/t.py)\n",
            "cmake/Plant.cmake": "add_subdirectory(grader)  # a second hook\n",
        }
        with tempfile.TemporaryDirectory() as root:
            for rel, text in plant.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            found = wing_violations(root)
        self.assertEqual(sorted(found), sorted([
            "tooling/results/x.py:4: imports grader, the classroom's wing",
            "python/pkg/y.py:2: imports grader, the classroom's wing",
            "stages/99_plant/plant.cu:1: includes ../../grader/fresh_inputs.cuh, a file of the classroom's wing grader/",
            "harness/plant.hpp:1: includes fresh_inputs.cuh, a file of the classroom's wing grader/",
            "tests/CMakeLists.txt:1: names grader/ in CMake code (only CMakeLists.txt's `add_subdirectory(grader)` may)",
            "cmake/Plant.cmake:1: names grader/ in CMake code (only CMakeLists.txt's `add_subdirectory(grader)` may)",
        ]))

    def test_cycle_and_path_rules_catch_a_plant(self):
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}))
        tree = ast.parse("import sys\ndef f():\n    sys.path.insert(0, 'x')\nsys.path += ['y']\n")
        self.assertEqual(sys_path_changes(tree), [3, 4])


if __name__ == "__main__":
    sys.exit(unittest.main())
