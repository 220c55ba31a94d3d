#!/usr/bin/env python3
"""Checks that the Python packages' modules import each other without a cycle.

Usage: check-python-imports.py [PACKAGE_DIR...]   (default: DEFAULT_PACKAGES below, accmon and accmon_dashboard)
       check-python-imports.py --self-test        (feeds the check packages with cycles; each must be refused)

Every import statement counts, wherever it is: at the top, under `if TYPE_CHECKING:` (mypy reads it, and it ties
the two modules' layers together as much as an import at run time) and inside a function (where a cycle is usually
hidden). `from . import name` is an import of the submodule `name` when there is one, else of the package itself
(its __init__). The import of a module's own package that Python does first is not counted: every module has it.
Imports between the packages given count too; imports of anything else are ignored.

Prints each cycle as `imports: cycle: a -> b (file:line) -> ... -> a` and exits 1 when there is any.
"""
import ast
import os
import sys
import tempfile

DEFAULT_PACKAGES = ("clients/python/src/accmon", "clients/dashboard/src/accmon_dashboard")


def modules_of(package_dir):
    """{module name: file path} of the package in `package_dir` and its subpackages."""
    root = os.path.dirname(os.path.abspath(package_dir))
    modules = {}
    for directory, subdirectories, files in os.walk(package_dir):
        subdirectories[:] = sorted(
            name for name in subdirectories if os.path.exists(os.path.join(directory, name, "__init__.py")))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(module, path, modules):
    """{imported module: line of its first import} of one module's source, restricted to `modules`."""
    is_package = os.path.basename(path) == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            # `import a.b` loads a, then a.b; the importing module's own packages are loaded already.
            for alias in node.names:
                parts = alias.name.split(".")
                prefixes = (".".join(parts[: count]) for count in range(1, len(parts) + 1))
                found.extend((name, node.lineno) for name in prefixes if not (module + ".").startswith(name + "."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # A submodule (`from . import commands`), else a name defined by the module `base` itself.
                submodule = f"{base}.{alias.name}"
                found.append((submodule if submodule in modules else base, node.lineno))
    edges = {}
    for target, line in sorted(found, key=lambda item: item[1]):
        if target in modules and target != module:
            edges.setdefault(target, line)
    return edges


def graph_of(package_dirs):
    modules = {}
    for package_dir in package_dirs:
        modules.update(modules_of(package_dir))
    return {module: imports_of(module, path, modules) for module, path in modules.items()}, modules


def cycles(graph):
    """The cycles of `graph`: its strongly connected components (Tarjan), and in each, the shortest cycle through
    each of its modules (told once however many of its modules it goes through), as lists of modules from the
    cycle's smallest name back to it."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    sys.setrecursionlimit(max(1000, 4 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    found = set()
    for component in components:
        for start in component:
            cycle = _shortest_cycle(graph, component, start)
            smallest = cycle.index(min(cycle))
            found.add(tuple(cycle[smallest:] + cycle[:smallest]))
    return [list(cycle) + [cycle[0]] for cycle in sorted(found)]


def _shortest_cycle(graph, component, start):
    """The shortest way from `start` back to it inside `component` (breadth-first), without the return to it."""
    previous, frontier = {start: None}, [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for successor in sorted(graph[node]):
                if successor == start:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return path[::-1]
                if successor in component and successor not in previous:
                    previous[successor] = node
                    next_frontier.append(successor)
        frontier = next_frontier
    raise AssertionError(f"{start} is in a cycle but no way back to it was found")


def describe(cycle, graph, modules):
    steps = [cycle[0]]
    for source, target in zip(cycle, cycle[1:]):
        steps.append(f"{target} ({modules[source]}:{graph[source][target]})")
    return "imports: cycle: " + " -> ".join(steps)


def check(package_dirs):
    graph, modules = graph_of(package_dirs)
    return [describe(cycle, graph, modules) for cycle in cycles(graph)], len(modules)


def self_test():
    """Each package with a cycle must be refused, naming the cycle; the sound ones must pass."""
    cases = [
        ("sound", {"__init__.py": "import pkg.a\nfrom .b import B\n", "a.py": "A = 1\n",
                   "b.py": "from .a import A\nimport pkg.a\nB = A\n", "c.py": "from . import __version__\n"}, None),
        ("two modules", {"__init__.py": "", "a.py": "from .b import B\n", "b.py": "from .a import A\n"},
         "pkg.a -> pkg.b"),
        ("through a TYPE_CHECKING import", {
            "__init__.py": "", "fields.py": "from .errors import E\n", "model.py": "from .fields import F\n",
            "errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import M\n"},
         "pkg.errors -> pkg.model (pkg/errors.py:3) -> pkg.fields"),
        ("through an import in a function", {
            "__init__.py": "", "a.py": "def f():\n    from .b import B\n", "b.py": "import pkg.a\n"}, "pkg.a -> pkg.b"),
        ("through `from . import module`", {
            "__init__.py": "", "cli.py": "from . import commands\n", "commands.py": "from .cli import Options\n"},
         "pkg.cli -> pkg.commands"),
        ("through the package's __init__", {
            "__init__.py": "from .cli import main\n__version__ = '1'\n", "cli.py": "from . import __version__\n"},
         "pkg -> pkg.cli"),
        ("in a subpackage, with `from ..`", {
            "__init__.py": "", "x.py": "from .sub.y import Y\n", "sub/__init__.py": "",
            "sub/y.py": "from ..x import X\n"},
         "pkg.sub.y -> pkg.x"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        for number, (title, files, expected) in enumerate(cases):
            package_dir = os.path.join(scratch, str(number), "pkg")
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(package_dir, name)), exist_ok=True)
                with open(os.path.join(package_dir, name), "w", encoding="utf-8") as handle:
                    handle.write(text)
            problems, _ = check([package_dir])
            problems = [problem.replace(os.path.dirname(package_dir) + os.sep, "") for problem in problems]
            ok = (not problems) if expected is None else any(expected in problem for problem in problems)
            print(f"{'PASS' if ok else 'FAIL'}: {title}" + ("" if ok else f": got {problems}"))
            failures += not ok
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package_dirs = sys.argv[1:] or [os.path.join(root, path) for path in DEFAULT_PACKAGES]
    problems, count = check(package_dirs)
    for problem in problems:
        print(problem.replace(root + os.sep, ""))
    if not problems:
        print(f"imports: {count} modules in {len(package_dirs)} packages, no cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
