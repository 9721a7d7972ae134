"""The core's shape (issue #14): no import circles, no private names across modules, one declared API."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp

import engram_core

ROOT = Path(engram_core.__file__).resolve().parent


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_engram_core_or_the_tui() -> None:
    """Every import counts: at module level, inside functions, and under TYPE_CHECKING; the TUI's screens reach
    the app through `engram_tui.contract`, never by importing it."""
    graph = grimp.build_graph("engram_core", "engram_tui", exclude_type_checking_imports=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(edges) == []


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(("engram_core", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_names_used_across_modules() -> None:
    """A name starting with one underscore, defined in one engram_core module (at module level or on self),
    is not imported or reached into from another."""
    defined: dict[str, set[str]] = {}
    trees = dict(_modules())
    for name, tree in trees.items():
        own = defined.setdefault(name, set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _is_private(
                node.name
            ):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _is_private(node.id):
                own.add(node.id)
            elif (
                isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_private(node.attr)
            ):
                own.add(node.attr)
    everywhere = set().union(*defined.values())
    offenders = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            used: list[str] = []
            if isinstance(node, ast.ImportFrom):
                used = [a.name for a in node.names]
            elif isinstance(node, ast.Attribute) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                used = [node.attr]
            for u in used:
                if _is_private(u) and u in everywhere and u not in defined[name]:
                    offenders.append(f"{name}:{node.lineno} uses {u}")
    assert offenders == []


def test_the_api_is_declared_by_the_service_whatever_is_imported() -> None:
    """Every @api function in engram_core (found in the source, nothing imported) is served, and served
    because EngramService declares it."""
    from engram_core.api import API_METHODS
    from engram_core.service import EngramService

    marked = {
        node.name
        for _, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "api" for d in node.decorator_list)
    }
    assert len(marked) > 40, "the @api functions are found"
    declared = {
        name for name, member in vars(EngramService).items() if getattr(member, "__engram_api__", False)
    }
    assert marked <= declared, f"marked @api but not declared by EngramService: {marked - declared}"
    assert set(API_METHODS) == declared
    for name in declared:
        assert callable(getattr(EngramService, name))
