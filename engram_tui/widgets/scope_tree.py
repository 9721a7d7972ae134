"""Scope tree: session / project / user → type → status, with live counts. Selecting a node filters the table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ..fmt import short
from ..safe import plain

TYPES = ["semantic", "procedural", "episodic", "working"]
STATUSES = ["created", "active", "consolidated", "archived", "superseded", "forgotten"]


@dataclass(frozen=True)
class NodeData:
    scope: str  # session | project | user
    project: str | None = None
    session: str | None = None
    memory_type: str | None = None
    status: str | None = None

    @property
    def level(self) -> str:
        return "status" if self.status else "type" if self.memory_type else "scope"


def _label(name: str, count: int | None, current: bool = False, bold: bool = False) -> Text:
    """A Text, never markup: project and session names are the user's (a folder may be called ``[x]``)."""
    label = plain(name, "bold" if current or bold else "")
    if count is not None:
        label.append(f" {count:,}", style="dim")
    return label


class ScopeTree(Tree[NodeData]):
    """Built from the project registry, the live sessions and per-scope counts; status counts load on expand."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Engram", **kwargs)
        self.show_root = False
        self.guide_depth = 3
        self._scope_nodes: dict[tuple[str, str | None, str | None], TreeNode[NodeData]] = {}
        self._names: dict[tuple[str, str | None, str | None], tuple[str, bool]] = {}

    def rebuild(
        self,
        projects: list[Any],
        sessions: list[Any],
        current_project: str | None,
        counts: dict[tuple[str, str | None, str | None], Any],
    ) -> None:
        """Re-create the tree, keeping which nodes were open and where the cursor was."""
        expanded = {n.data for n in self._walk() if n.is_expanded and n.data is not None}
        selected = self.cursor_node.data if self.cursor_node is not None else None
        self.clear()
        self._scope_nodes.clear()
        sess_for_project = [s for s in sessions if s.project_root in (current_project, None)]
        if sess_for_project:
            group = self.root.add(Text("sessions", style="bold"), expand=True, allow_expand=True)
            for s in sess_for_project:
                key = s.session_key
                name = s.claude_session_id or key[-6:]
                self._add_scope(
                    group, "session", f"session {short(name, 18)}", None, key, counts, current=False
                )
        group = self.root.add(Text("projects", style="bold"), expand=True)
        for p in projects:
            path = p.project_path
            self._add_scope(
                group, "project", p.project_name, path, None, counts, current=path == current_project
            )
        self._add_scope(self.root, "user", "user", None, None, counts, current=False, bold=True)
        for node in self._walk():
            if node.data in expanded and node.allow_expand:
                node.expand()
            if selected is not None and node.data == selected:
                self.move_cursor(node)

    def _add_scope(
        self,
        parent: TreeNode[NodeData],
        scope: str,
        name: str,
        project: str | None,
        session: str | None,
        counts: dict[tuple[str, str | None, str | None], Any],
        current: bool,
        bold: bool = False,
    ) -> None:
        stat = counts.get((scope, project, session))
        total = stat.total if stat is not None else None
        data = NodeData(scope, project, session)
        node = parent.add(_label(name, total, current, bold), data=data, expand=current or scope == "session")
        self._scope_nodes[(scope, project, session)] = node
        self._names[(scope, project, session)] = (name, current or bold)
        by_type = stat.by_type if stat is not None else {}
        for t in TYPES:
            if scope != "session" and t == "working":
                continue
            tnode = node.add(
                _label(t, by_type.get(t, 0) if stat is not None else None),
                data=NodeData(scope, project, session, t),
            )
            for st in STATUSES:
                tnode.add_leaf(Text(st), data=NodeData(scope, project, session, t, st))

    def set_scope_counts(self, key: tuple[str, str | None, str | None], stat: Any) -> None:
        """Update one scope node and its type children in place (a refresh must not collapse the tree)."""
        node = self._scope_nodes.get(key)
        if node is None or stat is None:
            return
        name, current = self._names[key]
        node.set_label(_label(name, stat.total, current))
        by_type = stat.by_type
        for child in node.children:
            if child.data is not None and child.data.memory_type:
                child.set_label(_label(child.data.memory_type, by_type.get(child.data.memory_type, 0)))

    def scope_keys(self) -> list[tuple[str, str | None, str | None]]:
        return list(self._scope_nodes)

    def set_status_counts(self, data: NodeData, counts: dict[str, int]) -> None:
        """Fill the status leaves under a type node (counted when the node is opened)."""
        for node in self._walk():
            if node.data == data:
                for child in node.children:
                    if child.data is not None and child.data.status:
                        child.set_label(_label(child.data.status, counts.get(child.data.status, 0)))

    def _walk(self) -> list[TreeNode[NodeData]]:
        out: list[TreeNode[NodeData]] = []
        stack = list(self.root.children)
        while stack:
            node = stack.pop(0)
            out.append(node)
            stack[:0] = list(node.children)
        return out
