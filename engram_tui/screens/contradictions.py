"""Contradiction resolution: the strongest cases first, both sides with evidence, age and strength, the suggested
resolution; keep A, keep B, both, or merge; all the confident ones at once; every decision undoable."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Header, Static

from ..fmt import wall_age
from ..messages import ServiceDone, ServiceFailed
from ..safe import markup
from ..widgets.cards import memory_card
from ..widgets.fit_table import Col, FitTable
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from .base import ReloadingScreen
from .dialogs import ConfirmScreen, TextPromptScreen

# A and B share the width; Detected goes first on a narrow terminal, then the kind.
LIST_COLUMNS = [
    Col("conf", "Conf.", 5),
    Col("suggest", "Keep", 4),
    Col("kind", "Kind", 10, drop=2),
    Col("a", "A"),
    Col("b", "B"),
    Col("detected", "Detected", 12, drop=1),
]
LIST_LIMIT = 100  # the list shows the strongest this many; the status gives the true total
CONFIDENT = 0.9  # Y resolves every open pair at least this confident by its suggestion
RESOLUTIONS = {
    "keep_a": "keep A (B is invalidated)",
    "keep_b": "keep B (A is invalidated)",
    "keep_both": "keep both (they do not really conflict)",
    "merge": "replace both by a merged statement",
}


class ContradictionsScreen(ReloadingScreen):
    BINDINGS = [
        Binding("A", "resolve('keep_a')", "Keep A", id="contradictions.keep_a"),
        Binding("B", "resolve('keep_b')", "Keep B", id="contradictions.keep_b"),
        Binding("K", "resolve('keep_both')", "Keep both", id="contradictions.keep_both"),
        Binding("M", "resolve('merge')", "Merge…", id="contradictions.merge"),
        Binding("S", "suggested", "Suggested", id="contradictions.suggested"),
        Binding("Y", "resolve_confident", "All confident…", id="contradictions.confident"),
        Binding("U", "undo", "Undo", id="contradictions.undo"),
        Binding("W", "toggle_auto", "Settled w/o asking", id="contradictions.auto"),
        Binding("R", "refresh", "Refresh", id="contradictions.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, Any] = {}
        self.current: Any | None = None
        self.drafts: dict[str, str] = {}  # merged statements written and not yet applied, by contradiction
        self.last_decided: list[str] = []  # what U reopens: the last resolution, single or bulk
        self.counts: Any | None = None
        self.show_auto = False  # W: the pairs Engram settled without asking, to check and undo

    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("contradictions")
        with Vertical(id="contradictions"):
            yield Static("", id="contradictions-status")
            yield FitTable(LIST_COLUMNS, id="contradictions-list")
            with Horizontal(id="contradictions-sides"):
                with VerticalScroll(id="side-a", classes="card"):
                    yield Static("", id="side-a-text")
                with VerticalScroll(id="side-b", classes="card"):
                    yield Static("", id="side-b-text")
            yield Static("", id="contradictions-evidence")
        yield PaneFooter()

    def on_mount(self) -> None:
        table = self.query_one("#contradictions-list", DataTable)
        table.border_title = "Open contradictions"
        self.query_one("#side-a").border_title = "A"
        self.query_one("#side-b").border_title = "B"
        self.query_one("#contradictions-evidence").border_title = "Evidence"

    def load(self) -> None:
        service, project = self.engram.service, self.engram.project

        auto = self.show_auto

        def fetch() -> tuple[list[Any], Any]:
            if auto:
                items = service.list_contradictions(
                    project=project, status="resolved", limit=LIST_LIMIT, order="newest", decided_by="policy"
                )
            else:
                items = service.list_contradictions(project=project, status="open", limit=LIST_LIMIT)
            # The list stops at its limit; the status line says how many there are in all.
            return items, service.count_contradictions(project=project)

        self.run_in_thread("list", fetch)

    def failed_list(self, message: ServiceFailed) -> bool:
        return False

    def done_list(self, result: tuple[list[Any], Any], _m: ServiceDone) -> None:
        items, counts = result
        self.counts = counts
        table = self.query_one("#contradictions-list", FitTable)
        now = self.engram.now()
        self.items = {}
        rows = []
        for c in items or []:  # the service's order: the strongest first
            cid = str(c.id)
            self.items[cid] = c
            keep = {"keep_a": "A", "keep_b": "B"}.get(c.suggested or "", "—")
            rows.append(
                (
                    cid,
                    {
                        "conf": f"{c.confidence:.2f}",
                        "suggest": keep,
                        "kind": c.kind,
                        "a": c.a.content,
                        "b": c.b.content,
                        "detected": wall_age(c.detected_at, now, self.engram.mask_db_times),
                    },
                )
            )
        table.set_rows(rows)
        if self.show_auto:
            total = max(counts.resolved_without_asking, len(self.items))
            self.query_one("#contradictions-status", Static).update(
                f"[b]{total:,}[/] settled without asking (the newer statement named the value it replaced) · "
                "U reopens the highlighted one · W back to the open ones"
            )
            table.border_title = f"Settled without asking ({len(self.items):,} of {total:,})"
            self._after_rows()
            return
        total = max(counts.open, len(self.items))
        shown = (
            f"[b]{total:,}[/]"
            if total == len(self.items)
            else f"[b]{len(self.items):,}[/] of [b]{total:,}[/]"
        )
        auto = (
            f" · {counts.resolved_without_asking:,} settled without asking"
            if counts.resolved_without_asking
            else ""
        )
        self.query_one("#contradictions-status", Static).update(
            f"{shown} open{auto} · S suggested · A/B/K/M · Y all ≥ {CONFIDENT} · U undo "
            "· [dim]the loser is superseded, never deleted[/]"
        )
        table.border_title = (
            f"Open contradictions ({len(self.items):,} of {total:,})"
            if total > len(self.items)
            else f"Open contradictions ({total:,})"
        )
        self._after_rows()

    def _after_rows(self) -> None:
        table = self.query_one("#contradictions-list", FitTable)
        if self.items:
            table.move_cursor(row=0)
            self._show(next(iter(self.items)))
        else:
            self.current = None
            for side in ("a", "b"):
                self.query_one(f"#side-{side}-text", Static).update("")
            self.query_one("#contradictions-evidence", Static).update("")

    @on(DataTable.RowHighlighted, "#contradictions-list")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value in self.items:
            self._show(event.row_key.value)

    def _show(self, cid: str) -> None:
        c = self.items[cid]
        self.current = c
        now = self.engram.now()
        self.query_one("#side-a-text", Static).update(memory_card(c.a, now))
        self.query_one("#side-b-text", Static).update(memory_card(c.b, now))
        text = "\n".join(f"• {e}" for e in c.evidence)
        if c.suggested in ("keep_a", "keep_b"):
            side = "A" if c.suggested == "keep_a" else "B"
            text = (
                f"Suggested: keep {side}, the newer statement (S applies it) · confidence {c.confidence:.2f}\n"
                + text
            )
        self.query_one("#contradictions-evidence", Static).update(
            markup("$t", t=text) if str(text) else "[dim]no evidence recorded[/]"
        )

    def action_resolve(self, resolution: str) -> None:
        c = self.current
        if c is None:
            return
        if resolution == "merge":
            cid = str(c.id)
            # A draft survives Cancel (in the editor or in the confirmation): M again picks it up.
            seed = self.drafts.get(cid) or f"{c.a.content}\n{c.b.content}"

            def keep(text: str) -> None:
                self.drafts[cid] = text

            def merged(text: str | None) -> None:
                if text:
                    keep(text)
                    self._confirm(c, "merge", text)

            self.app.push_screen(
                TextPromptScreen(
                    "Merged statement",
                    seed,
                    "Write one statement that replaces both. Cancel keeps your draft for the next M.",
                    on_cancel=keep,
                ),
                merged,
            )
            return
        self._confirm(c, resolution, None)

    def _confirm(self, c: Any, resolution: str, merged: str | None) -> None:
        def go(ok: bool | None) -> None:
            if ok:
                self.call_service(
                    "resolved",
                    "resolve_contradiction",
                    c.id,
                    resolution,
                    merged_content=merged,
                    project=self.engram.project,
                    context=resolution,
                )

        question: str | Content = f"Resolve this contradiction: {RESOLUTIONS[resolution]}?"
        if merged is not None:
            question = markup(
                "Replace both by this merged statement?\n\n[b]$m[/]\n\n[dim]A and B are superseded "
                "(kept for audit). No keeps your draft: M opens it again.[/]",
                m=merged,
            )
        self.app.push_screen(ConfirmScreen(question, title="Resolve contradiction"), go)

    def done_resolved(self, result: Any, message: ServiceDone) -> None:
        self.drafts.pop(str(getattr(result, "id", "")), None)
        self.last_decided = [str(result.id)]
        self.notify(f"Resolved: {RESOLUTIONS[message.context]} · U undoes it", title="Engram")
        self.load()

    def action_suggested(self) -> None:
        c = self.current
        if c is None:
            return
        if c.suggested not in RESOLUTIONS:
            self.notify(
                "No suggestion for this pair: time does not say which holds. Choose A, B, K or M.",
                title="Engram",
                severity="warning",
            )
            return
        self._confirm(c, c.suggested, None)

    def action_resolve_confident(self) -> None:
        sure = [
            c
            for c in self.items.values()
            if c.confidence >= CONFIDENT and c.suggested in ("keep_a", "keep_b")
        ]
        if not sure:
            self.notify(f"No open contradiction is {CONFIDENT} confident with a suggestion.", title="Engram")
            return

        def go(ok: bool | None) -> None:
            if ok:
                self.call_service(
                    "bulk",
                    "resolve_contradictions",
                    "suggested",
                    project=self.engram.project,
                    min_confidence=CONFIDENT,
                )

        self.app.push_screen(
            ConfirmScreen(
                f"Resolve every open contradiction at least {CONFIDENT} confident ({len(sure)} shown here) by its "
                "suggestion, keeping the newer statement? Each can be undone (U undoes them all).",
                title="Resolve the confident ones",
            ),
            go,
        )

    def done_bulk(self, result: Any, _m: ServiceDone) -> None:
        self.last_decided = list(result.ids)
        self.notify(f"{result.message} · U undoes them", title="Engram")
        self.load()

    def action_toggle_auto(self) -> None:
        self.show_auto = not self.show_auto
        self.load()

    def action_undo(self) -> None:
        if self.show_auto and self.current is not None:
            self.last_decided = [str(self.current.id)]
        ids, self.last_decided = self.last_decided, []
        self.reopen_last("reopen_contradiction", ids)

    def done_undone(self, n: int, _m: ServiceDone) -> None:
        self.notify(f"{n} contradiction(s) open again; their memories are back as they were", title="Engram")
        self.load()
