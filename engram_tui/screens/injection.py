"""Injection preview: exactly what SessionStart would inject for this project now, with its token count."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import DataTable, Header, Static, TextArea

from ..fmt import short
from ..messages import ServiceDone
from ..safe import markup, plain, visible
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from .base import ReloadingScreen


class InjectionScreen(ReloadingScreen):
    BINDINGS = [Binding("R", "refresh", "Refresh", id="injection.refresh", tooltip="Recompute the preview")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("injection")
        with Vertical(id="injection"):
            yield Static("", id="injection-status")
            with Horizontal(id="injection-body"):
                yield TextArea("", id="injection-text", read_only=True, soft_wrap=True)
                yield DataTable(id="injection-items", cursor_type="row", zebra_stripes=True)
        yield PaneFooter()

    def on_mount(self) -> None:
        self.query_one("#injection-text").border_title = "Injected text (verbatim)"
        table = self.query_one("#injection-items", DataTable)
        table.border_title = "Items, in order"
        for key, label, width in (
            ("scope", "Scope", 7),
            ("type", "Type", 10),
            ("strength", "Str", 5),
            ("tokens", "Tok", 4),
            ("content", "Content", 36),
        ):
            table.add_column(label, key=key, width=width)

    def load(self) -> None:
        self.query_one("#injection-status", Static).update("computing…")
        self.call_service(
            "preview", "injection_context", project=self.engram.project, session=self.engram.session
        )

    def done_preview(self, p: Any, _m: ServiceDone) -> None:
        items = list(p.items)
        tokens, budget = p.tokens, p.budget
        status: Content | str = markup(
            f"SessionStart would inject [b]{tokens:,}[/] tokens of a {budget:,}-token budget "
            f"({len(items)} memories) for [b]$where[/] now",
            where=getattr(self.app, "place", "") or "this project",
        )
        if p.disabled:
            status = "[b yellow]Engram is disabled for this project[/]: nothing would be injected"
        self.query_one("#injection-status", Static).update(status)
        self.query_one("#injection-text", TextArea).text = p.text or "(nothing would be injected)"
        table = self.query_one("#injection-items", DataTable)
        table.clear()
        for i, it in enumerate(items):
            cells = (
                it.scope.value,
                it.memory_type.value,
                f"{it.strength:.2f}",
                it.tokens,
                short(visible(it.content), 34),
            )
            table.add_row(*(plain(c) for c in cells), key=f"{it.id}#{i}")
