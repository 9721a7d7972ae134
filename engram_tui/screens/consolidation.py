"""Consolidation review: the queue, the source memories side by side, the proposed merged memory."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Header, Static, TextArea

from ..fmt import wall_age
from ..messages import ServiceDone, ServiceFailed
from ..safe import lines, markup
from ..widgets.cards import memory_card
from ..widgets.fit_table import Col, FitTable
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from .base import ReloadingScreen
from .dialogs import ConfirmScreen, Editor

# The proposal takes the spare width; Queued, then Risk go first on a narrow terminal.
QUEUE_COLUMNS = [
    Col("reason", "Reason", 20),
    Col("priority", "Priority", 8),
    Col("risk", "Risk", 6, drop=1),
    Col("sources", "Sources", 7),
    Col("proposal", "Proposed memory", min_width=30),
    Col("created", "Queued", 12, drop=2),
]
EMPTY_QUEUE = (
    "[b]Nothing waits for review.[/] Proposals arrive when:\n"
    "  • a session ends: the pass it runs pairs near-duplicates and related memories and summarises "
    "episodes;\n"
    "  • the maintenance sweep finds memories decaying below 0.3 (the consolidate threshold);\n"
    "  • the same knowledge recurs across projects (a promotion to user scope).\n"
    "Low-risk proposals are applied at once; the others wait here.\n\n"
    "Press [b]C[/] to run consolidation now (the pass an ended session runs)."
)


class ConsolidationScreen(ReloadingScreen):
    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#consolidation-queue"
    BINDINGS = [
        Binding(
            "a",
            "approve",
            "Approve",
            id="consolidation.approve",
            tooltip="Approve the proposal (uses your edits)",
        ),
        Binding(
            "r", "reject", "Reject", id="consolidation.reject", tooltip="Reject the proposal (asks first)"
        ),
        Binding(
            "e",
            "edit",
            "Edit proposal",
            id="consolidation.edit",
            tooltip="Edit the merged text (esc: done), then a",
        ),
        Binding(
            "escape",
            "leave_editor",
            "Done editing",
            show=False,
            id="consolidation.leave",
            tooltip="Leave the proposal editor (your text is kept for the approval)",
        ),
        Binding(
            "Y",
            "approve_confident",
            "Approve confident…",
            id="consolidation.confident",
            tooltip="Approve every pending item below the auto-approval risk (asks first; U undoes)",
        ),
        Binding("U", "undo", "Undo", id="consolidation.undo", tooltip="Undo the last approval or rejection"),
        Binding("R", "refresh", "Refresh", id="consolidation.refresh"),
        Binding(
            "C",
            "consolidate",
            "Consolidate now",
            id="consolidation.run",
            tooltip="Run consolidation now: the pass an ended session runs (asks first)",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, Any] = {}
        self.current: Any | None = None
        self.outcome: Content | None = (
            None  # the last approval's result, kept visible while the queue moves on
        )
        self.last_decided: list[str] = []  # what U reopens: the last approval or rejection, single or bulk

    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("consolidation")
        with Vertical(id="consolidation"):
            yield Static("", id="consolidation-status")
            yield FitTable(QUEUE_COLUMNS, id="consolidation-queue")
            with VerticalScroll(id="consolidation-sources"):
                yield Static(EMPTY_QUEUE, id="consolidation-empty")
            with Horizontal(id="consolidation-proposal-row"):
                yield Editor("", id="consolidation-proposal", soft_wrap=True)
                yield Static("", id="consolidation-result")
        yield PaneFooter()

    def on_mount(self) -> None:
        table = self.query_one("#consolidation-queue", DataTable)
        table.border_title = "Queue"
        self.query_one("#consolidation-sources").border_title = "Source memories"
        self.query_one("#consolidation-empty").display = False  # until the queue is known to be empty
        self.query_one("#consolidation-proposal").border_title = "Proposed merged memory (e edits · esc done)"
        self.query_one("#consolidation-result").border_title = "Result"

    def refresh_data(self) -> None:
        if not self.query_one("#consolidation-proposal", TextArea).has_focus:  # never under someone's edit
            self.load()

    def load(self) -> None:
        service, project = self.engram.service, self.engram.project
        self.run_in_thread(
            "queue",
            lambda: (
                service.list_consolidations(project=project, status="pending"),
                service.count_consolidations(project=project),
            ),
        )

    def failed_queue(self, message: ServiceFailed) -> bool:
        self.query_one("#consolidation-status", Static).update(markup("[b red]$e[/]", e=message.text))
        return False

    def done_queue(self, result: tuple[list[Any], Any], _m: ServiceDone) -> None:
        items, counts = result
        table = self.query_one("#consolidation-queue", FitTable)
        now = self.engram.now()
        self.items = {}
        # Highest priority first, ties in a stable order (the database does not promise one).
        ordered = sorted(
            items or [], key=lambda it: (-it.priority, it.reason, sorted(str(m.id) for m in it.sources))
        )
        rows = []
        for it in ordered:
            iid = str(it.id)
            self.items[iid] = it
            proposal = it.proposal
            rows.append(
                (
                    iid,
                    {
                        "reason": it.reason,
                        "priority": f"{it.priority:.2f}",
                        "risk": it.risk,
                        "sources": len(it.sources),
                        "proposal": proposal.content if proposal else "",
                        "created": wall_age(it.created_at, now, self.engram.mask_db_times),
                    },
                )
            )
        table.set_rows(rows)
        shown = (
            f"[b]{counts.pending:,}[/]"
            if counts.pending == len(self.items)
            else f"[b]{len(self.items):,}[/] of [b]{counts.pending:,}[/]"
        )
        self.query_one("#consolidation-status", Static).update(
            f"{shown} pending ({counts.needs_review:,} need a decision) · a approve · e edit · r reject · "
            "Y approve the confident · U undo · C consolidate now"
            if self.items
            else "[b]0[/] pending consolidations · C runs consolidation now (how proposals arrive: below)"
        )
        if self.items:
            keep = str(self.current.id) if self.current is not None else None
            iid = keep if keep in self.items else next(iter(self.items))
            table.move_cursor(row=list(self.items).index(iid))
            self._show(iid)
        else:
            self.current = None
            self._show_result()
            box = self.query_one("#consolidation-sources", VerticalScroll)
            box.border_title = "Source memories"
            box.remove_children(".source")
            self.query_one("#consolidation-empty").display = True
            self.query_one("#consolidation-proposal", TextArea).text = ""

    @on(DataTable.RowHighlighted, "#consolidation-queue")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value in self.items:
            self._show(event.row_key.value)

    def _show(self, iid: str) -> None:
        it = self.items[iid]
        self.current = it
        now = self.engram.now()
        # One scrollable list, however big the cluster (one card per source grows too narrow to read when there are dozens).
        sources = list(it.sources)
        box = self.query_one("#consolidation-sources", VerticalScroll)
        box.border_title = f"Source memories ({len(sources)})"
        box.remove_children(".source")
        self.query_one("#consolidation-empty").display = False
        box.mount_all(
            [
                Static(markup("[b]$n.[/] ", n=i + 1) + memory_card(m, now), classes="source")
                for i, m in enumerate(sources)
            ]
        )
        box.scroll_home(animate=False)
        proposal = it.proposal
        self.query_one("#consolidation-proposal", TextArea).text = proposal.content if proposal else ""
        if proposal is None:
            self._show_result(markup("[dim]risk[/] $risk", risk=it.risk))
            return
        why = "\n".join(f"• {e}" for e in (it.evidence or [])[:4])
        self._show_result(
            markup(
                "[dim]type[/] $type  [dim]importance[/] $importance\n[dim]tags[/] $tags\n[dim]risk[/] $risk"
                + ("\n[dim]why grouped[/]\n$why" if why else ""),
                type=proposal.memory_type,
                importance=proposal.importance,
                tags=", ".join(proposal.tags),
                risk=it.risk,
                why=why,
            )
        )

    def _show_result(self, proposal_meta: Content | None = None) -> None:
        parts = [p for p in (self.outcome, proposal_meta) if p]
        self.query_one("#consolidation-result", Static).update(Content("\n\n").join(parts))

    def action_consolidate(self) -> None:
        def go(ok: bool | None) -> None:
            if ok:
                self.query_one("#consolidation-status", Static).update("[b]consolidating…[/]")
                self.call_service(
                    "consolidated", "reflect_and_consolidate", project=self.engram.project, level="light"
                )

        self.app.push_screen(
            ConfirmScreen(
                "Run consolidation now? It looks for near-duplicates, related memories and episodes to summarise in "
                "this project, applies the low-risk proposals and queues the others here.",
                title="Consolidate now",
                confirm_label="Consolidate",
                danger=False,
            ),
            go,
        )

    def done_consolidated(self, rep: Any, _m: ServiceDone) -> None:
        queued = sum(rep.queued.values())
        self.notify(
            f"Consolidation: {queued} proposal(s) found, {rep.auto_approved} applied automatically, "
            f"{rep.pending_review} waiting for review",
            title="Engram",
            timeout=8,
        )
        self.load()

    def action_edit(self) -> None:
        self.query_one("#consolidation-proposal", TextArea).focus()

    def action_leave_editor(self) -> None:
        self.query_one("#consolidation-queue", DataTable).focus()

    def action_approve(self) -> None:
        it = self.current
        if it is None:
            return
        original = it.proposal.content if it.proposal else ""
        text = self.query_one("#consolidation-proposal", TextArea).text
        edited = text if text.strip() and text != original else None
        n = len(it.sources)

        def go(ok: bool | None) -> None:
            if ok:
                self.call_service(
                    "approved",
                    "approve_consolidation",
                    it.id,
                    project=self.engram.project,
                    edited_content=edited,
                    context=it,
                )

        self.app.push_screen(
            ConfirmScreen(
                f"Approve this consolidation? The {n} source memories will be marked consolidated into the new one"
                + (" (with your edited text)." if edited else "."),
                title="Approve consolidation",
                danger=False,
            ),
            go,
        )

    def action_reject(self) -> None:
        it = self.current
        if it is None:
            return

        def go(ok: bool | None) -> None:
            if ok:
                self.call_service(
                    "rejected",
                    "reject_consolidation",
                    it.id,
                    project=self.engram.project,
                    reason="rejected in the TUI",
                    context=it,
                )

        n = len(it.sources)
        self.app.push_screen(
            ConfirmScreen(
                f"Reject this consolidation? The {n} source memories stay as they are and the proposal leaves the queue.",
                title="Reject consolidation",
            ),
            go,
        )

    def done_approved(self, result: Any, message: ServiceDone) -> None:
        it = message.context
        service = self.engram.service

        def statuses() -> tuple[Any, list[Any]]:
            return result, [service.get(m.id) for m in it.sources]

        self.run_in_thread("after_approve", statuses)

    def done_after_approve(self, data: tuple[Any, list[Any]], _m: ServiceDone) -> None:
        result, sources = data
        self.last_decided = [str(result.item_id)]
        now = self.engram.now()
        made = result.memory  # None when the outcome wrote no memory
        out: list[Content | str] = ["[b green]Approved.[/]", "", "[b]New memory[/]"]
        out.append(memory_card(made, now) if made is not None else markup("$r", r=str(result)[:400]))
        out += ["", "[b]Originals now[/]"]
        out += [markup("  $id: [b]$status[/]", id=m.id, status=m.status.value) for m in sources]
        self.notify("Consolidation approved", title="Engram")
        self.outcome = lines(*out)
        self._show_result()
        self.load()

    def done_rejected(self, result: Any, _m: ServiceDone) -> None:
        self.last_decided = [str(result.id)]
        self.notify("Consolidation rejected; the sources stay as they were · U undoes it", title="Engram")
        self.load()

    def action_approve_confident(self) -> None:
        sure = [it for it in self.items.values() if not it.needs_review]
        if not sure:
            self.notify("No pending item is below the auto-approval risk: each needs a look.", title="Engram")
            return

        def go(ok: bool | None) -> None:
            if ok:
                limit = max(it.risk for it in sure)
                self.call_service(
                    "bulk", "decide_consolidations", "approve", project=self.engram.project, max_risk=limit
                )

        self.app.push_screen(
            ConfirmScreen(
                f"Approve the {len(sure)} pending item(s) below the auto-approval risk? Each writes its merged memory "
                "and marks its sources consolidated; U undoes them all.",
                title="Approve the confident ones",
            ),
            go,
        )

    def done_bulk(self, result: Any, _m: ServiceDone) -> None:
        self.last_decided = list(result.ids)
        self.notify(f"{result.message} · U undoes them", title="Engram")
        self.load()

    def action_undo(self) -> None:
        ids, self.last_decided = self.last_decided, []
        self.reopen_last("reopen_consolidation", ids)

    def done_undone(self, n: int, _m: ServiceDone) -> None:
        self.outcome = None
        self.notify(f"{n} item(s) pending again; their memories are back as they were", title="Engram")
        self.load()
