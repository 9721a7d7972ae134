"""SurrealQL console: highlighted editor, live validator verdict, scope selector, read-only by default."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Header, Label, OptionList, Select, Static, Switch

from ..fmt import ms
from ..messages import ServiceDone, ServiceFailed
from ..safe import lines, markup, plain, visible
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from ..widgets.surql import ResultsViewer, SurqlEditor
from .base import ServiceScreen
from .dialogs import ConfirmScreen, TypedConfirmScreen

EXAMPLE = (
    "SELECT memory_type, count() AS n FROM memory GROUP BY memory_type;\n"
    "SELECT content, importance FROM memory WHERE status = 'active' ORDER BY importance DESC LIMIT 5;\n"
)
SCOPES = [("project", "project"), ("user", "user"), ("session", "session")]
_AGENT_WORDING = re.compile(r"[Pp]ass allow_writes=true( if you mean to write)?")


def tui_wording(message: str) -> str:
    """The validator speaks to the agent ("pass allow_writes=true"); here the switch is F2."""
    return _AGENT_WORDING.sub("press F2 (Allow writes) if you mean to write", message)


class ConsoleScreen(ServiceScreen):
    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#console-editor"
    BINDINGS = [
        Binding("ctrl+r,f5", "run", "Run", id="console.run", tooltip="Run the statements (each gets a tab)"),
        # Not f6/f7: those are the editor's select line / select all (TextArea), and stay the editor's.
        Binding("f2", "toggle_writes", "Writes", id="console.writes", tooltip="Allow writes (asks first)"),
        Binding("f3", "focus_history", "History", id="console.history", tooltip="Pick a past query"),
        Binding(
            "escape",
            "focus_history",
            "Leave editor",
            show=False,
            id="console.leave",
            tooltip="Leave the editor (then 1-6 switch panes)",
        ),
        Binding("f8", "focus_editor", "Editor", show=False, id="console.editor"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.history: list[str] = []
        self.allow_writes = False
        self.last_verdict: Any = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("console")
        with Horizontal(id="console"):
            with Vertical(id="console-main"):
                with Horizontal(id="console-bar"):
                    yield Label("Scope")
                    yield Select(SCOPES, value="project", allow_blank=False, id="console-scope")
                    yield Label("Allow writes")
                    yield Switch(False, id="console-writes")
                    yield Static("", id="console-mode")
                yield SurqlEditor(EXAMPLE, id="console-editor")
                yield Static("", id="console-verdict")
                yield ResultsViewer(id="console-results")
            yield OptionList(id="console-history")
        yield PaneFooter()

    def on_mount(self) -> None:
        self.query_one("#console-editor").border_title = "SurrealQL  (ctrl+r / F5 runs)"
        self.query_one("#console-results").border_title = "Results"
        self.query_one("#console-history").border_title = "History"
        self.history = self._read_history()
        self._show_history()
        self._update_mode()
        self._validate()

    # ── verdict as you type ─────────────────────────────────
    @on(SurqlEditor.Changed, "#console-editor")
    def _changed(self) -> None:
        self._validate()

    def _validate(self) -> None:
        from engram_core.validator import validate  # tree-sitter: loaded with the console, not at start-up

        text = self.query_one("#console-editor", SurqlEditor).text
        verdict = validate(text, allow_writes=self.allow_writes) if text.strip() else None
        self.last_verdict = verdict
        box = self.query_one("#console-verdict", Static)
        if verdict is None:
            box.update("[dim]type a query[/]")
            return
        n = len(verdict.statements)
        if verdict.ok:
            kind = "writes" if verdict.has_writes else "read-only"
            box.update(f"[b green]✓ {n} statement{'s' if n != 1 else ''}, {kind}[/]")
            box.set_class(False, "bad")
            return
        out: list[Content | str] = [
            f"[b red]✗ refused[/] ({len(verdict.violations)} problem{'s' if len(verdict.violations) != 1 else ''})"
        ]
        for v in verdict.violations[:4]:
            out.append(
                markup(
                    f"  statement {v.statement_index + 1} · rule [b]$rule[/]: $msg",
                    rule=v.rule,
                    msg=tui_wording(v.message),
                )
            )
        hint = self._write_hint(text)
        if hint:
            out.append(markup("  [b]$hint[/]", hint=hint.strip(" ·")))
        box.update(lines(*out))
        box.set_class(True, "bad")

    def _write_hint(self, text: str) -> str:
        """When the only thing wrong is that the query writes: say which key allows writes."""
        from engram_core.validator import validate

        if self.allow_writes or not validate(text, allow_writes=True).ok:
            return ""
        return (
            " · this query writes: press F2 (or the Allow writes switch) to allow writes, then run it again"
        )

    # ── writes toggle ───────────────────────────────────────
    @on(Switch.Changed, "#console-writes")
    def _writes_switched(self, event: Switch.Changed) -> None:
        if event.value == self.allow_writes:
            return
        if not event.value:
            self.allow_writes = False
            self._update_mode()
            self._validate()
            return

        def answered(ok: bool | None) -> None:
            self.allow_writes = bool(ok)
            with self.prevent(Switch.Changed):
                event.switch.value = self.allow_writes
            self._update_mode()
            self._validate()

        self.app.push_screen(
            ConfirmScreen(
                "Allow write statements in the console?\n\nWrites change memories directly, without undo. "
                "Each run with writes asks again.",
                title="Allow writes",
            ),
            answered,
        )

    def action_toggle_writes(self) -> None:
        switch = self.query_one("#console-writes", Switch)
        switch.value = not switch.value

    def _update_mode(self) -> None:
        self.query_one("#console-mode", Static).update(
            "[b red]WRITES ALLOWED[/]" if self.allow_writes else "[b green]read-only[/]"
        )

    # ── running ─────────────────────────────────────────────
    def action_run(self) -> None:
        text = self.query_one("#console-editor", SurqlEditor).text
        if not text.strip():
            return
        self._validate()
        verdict = self.last_verdict
        if verdict is not None and not verdict.ok:
            v = verdict.violations[0]
            refusal = (
                f"Refused: statement {v.statement_index + 1} breaks rule {v.rule}: {tui_wording(v.message)}"
                + self._write_hint(text)
            )
            self.notify(refusal, title="Validator", severity="error")
            # The results of an earlier run would read as this query's: they go.
            viewer = self.query_one("#console-results", ResultsViewer)
            viewer.show_message(markup("[b red]$r[/]", r=refusal))
            viewer.border_title = "Results · refused, nothing ran"
            return
        if verdict is not None and verdict.has_writes:
            # Like k9s before a delete: say what will run and how many rows it touches, and ask (default No).
            self.query_one(
                "#console-results"
            ).border_title = "Results · counting the rows this write touches…"
            self.call_service(
                "preview",
                "preview_write",
                text,
                scope=str(self._scope()),
                project=self.engram.project,
                session=self.engram.session,
                context=text,
            )
            return
        self._run(text)

    def _scope(self) -> Any:
        return self.query_one("#console-scope", Select).value

    def done_preview(self, previews: list[Any], message: ServiceDone) -> None:
        text = message.context
        self.query_one("#console-results").border_title = "Results"
        self._confirm_write(text, previews, None)

    def failed_preview(self, message: ServiceFailed) -> bool:
        self.query_one("#console-results").border_title = "Results"
        self._confirm_write(message.context, [], message.text)
        return True

    def _confirm_write(self, text: str, previews: list[Any], error: str | None) -> None:
        from engram_core.validator import validate

        statements = validate(text, allow_writes=True).statements
        by_index = {p.index: p for p in previews}
        parts: list[Content | str] = [
            markup(
                f"Run this query against the [b]$scope[/] scope? It writes "
                f"({len(statements)} statement{'s' if len(statements) != 1 else ''}):",
                scope=str(self._scope()),
            ),
            "",
        ]
        for i, st in enumerate(statements):
            p = by_index.get(i)
            touch: str | Content
            if p is None:
                touch = "[dim]adds rows or reads[/]"
            elif p.rows is None:
                touch = markup("[yellow]rows not counted: $e[/]", e=p.error or "")
            else:
                touch = f"[b]{p.rows:,} row{'s' if p.rows != 1 else ''}[/] now match" + (
                    "" if p.bounded else " · [b red]no WHERE: every row of the table[/]"
                )
            parts.append(markup(f"[b]{i + 1}.[/] $st", st=" ".join(st.split())[:300]))
            parts.append(
                Content.from_markup(f"   → {touch}") if isinstance(touch, str) else Content("   → ") + touch
            )
        if error:
            parts += ["", markup("[yellow]The rows could not be counted: $e[/]", e=error)]
        parts += ["", "[dim]Writes change memories directly, without undo.[/]"]
        message = lines(*parts)
        unbounded = [p for p in previews if not p.bounded and p.verb in ("DELETE", "UPDATE", "UPSERT")]

        def answered(ok: bool | None) -> None:
            if ok:
                self._run(text)

        if unbounded:
            table = unbounded[0].target
            self.app.push_screen(TypedConfirmScreen(message, table, title="Run an unbounded write"), answered)
        else:
            self.app.push_screen(
                ConfirmScreen(message, title="Run a write query", confirm_label="Run", default_no=True),
                answered,
            )

    def _run(self, text: str) -> None:
        scope = self._scope()
        self._remember(text)
        self.query_one("#console-results").border_title = "Results · running…"
        self.call_service(
            "query",
            "run_query",
            text,
            scope=str(scope),
            allow_writes=self.allow_writes,
            project=self.engram.project,
            session=self.engram.session,
        )

    def done_query(self, result: Any, _m: ServiceDone) -> None:
        statements = list(result.statements)
        viewer = self.query_one("#console-results", ResultsViewer)
        if not result.ok and not statements:  # refused by the service (a secret in a write, the engine role)
            viewer.show_message(markup("[b red]Refused:[/] $m", m=tui_wording(result.message)))
            viewer.border_title = "Results · refused, nothing ran"
            return
        viewer.show_results(statements, mask=self.engram.mask_db_times)
        # New tabs may take focus as they mount; keep it in the editor so the next edit is one keystroke away.
        self.call_after_refresh(self.query_one("#console-editor").focus)
        total = sum(s.time_ms for s in statements)
        errors = sum(1 for s in statements if s.error)
        rows = sum(len(s.rows) for s in statements)
        found = sum(max(s.row_count, len(s.rows)) for s in statements)
        capped = any(s.truncated for s in statements)
        shown = f"first {rows:,} of {found:,} rows [b yellow](capped)[/]" if capped else f"{rows:,} rows"
        viewer.border_title = (
            f"Results · {len(statements)} statement(s) · {shown} · {ms(total, self.engram.mask_db_times)}"
            + (f" · [red]{errors} error(s)[/]" if errors else "")
        )

    def failed_query(self, message: ServiceFailed) -> bool:
        self.query_one("#console-results").border_title = "Results"
        self.query_one("#console-verdict", Static).update(
            markup("[b red]query failed:[/] $e", e=tui_wording(message.text))
        )
        return False

    # ── history ─────────────────────────────────────────────
    def _remember(self, text: str) -> None:
        text = text.strip()
        if self.history and self.history[-1] == text:
            return
        self.history.append(text)
        self.history = self.history[-200:]
        self._show_history()
        path = self.engram.history_path
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Owner-only, like every other file under the data root: queries quote memories.
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.fchmod(fd, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"surql": text}) + "\n")
            except OSError as exc:
                self.notify(f"could not save query history: {exc}", severity="warning")

    def _read_history(self) -> list[str]:
        path: Path | None = self.engram.history_path
        if path is None or not path.exists():
            return []
        out = []
        try:
            raw = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self.notify(f"could not read query history: {exc}", severity="warning")
            return []
        for line in raw.splitlines()[-200:]:
            try:
                out.append(json.loads(line)["surql"])
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def _show_history(self) -> None:
        opts = self.query_one("#console-history", OptionList)
        opts.clear_options()
        opts.add_options([plain(" ".join(visible(q).split())[:60]) for q in reversed(self.history)])

    @on(OptionList.OptionSelected, "#console-history")
    def _history_selected(self, event: OptionList.OptionSelected) -> None:
        query = list(reversed(self.history))[event.option_index]
        editor = self.query_one("#console-editor", SurqlEditor)
        editor.text = query
        editor.focus()

    def action_focus_history(self) -> None:
        self.query_one("#console-history").focus()

    def action_focus_editor(self) -> None:
        self.query_one("#console-editor").focus()
