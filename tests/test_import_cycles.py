"""The package imports one way: no cycle among counterfair's modules.

A small walk over each module's syntax tree collects the package-internal imports,
those inside functions included (they run too) and those under ``if TYPE_CHECKING:``
left out (they never run). Strongly connected components of that graph are cycles.

There is none. ``SCM`` and ``Fit`` keep one-line convenience delegates that import
the stage above them inside the method (``SCM.fit`` -> ``inference.sampling``,
``Fit.counterfactual`` -> ``counterfactual.frames``, ``Fit.save`` -> ``io``); the
modules those delegates reach name ``SCM`` and ``Fit`` in annotations only, so no
delegate closes a loop. The layers themselves are held by the import-linter contract
in ``pyproject.toml`` (``tests/test_layers.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "counterfair"

def module_files() -> dict[str, Path]:
    files = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str]) -> None:
        self.module, self.is_package, self.known = module, is_package, known
        self.targets: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def _add(self, name: str) -> None:
        while name and name not in self.known:
            name = name.rpartition(".")[0]
        if name and name != self.module:
            self.targets.add(name)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("counterfair"):
                self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        if not source.startswith("counterfair"):
            return
        for alias in node.names:
            full = f"{source}.{alias.name}"
            self._add(full if full in self.known else source)


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph = {}
    for module, path in files.items():
        visitor = _Imports(module, path.name == "__init__.py", set(files))
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        # a package importing its own submodules (re-exports) is not a cycle
        graph[module] = {t for t in visitor.targets if not t.startswith(module + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_walk_finds_a_cycle_it_is_shown() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_lazy_and_type_checking_imports_are_told_apart() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from counterfair.model.scm import SCM\n"
        "def f():\n    from counterfair.inference.fit import Fit\n"
    )
    visitor = _Imports(
        "counterfair.x", False, {"counterfair.model.scm", "counterfair.inference.fit"}
    )
    visitor.visit(ast.parse(source))
    assert visitor.targets == {"counterfair.inference.fit"}


def test_no_import_cycle() -> None:
    found = [sorted(c) for c in cycles(import_graph())]
    assert found == [], f"import cycles inside counterfair: {found}"
