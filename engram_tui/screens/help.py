"""Help: every key binding, per pane, read from the bindings themselves so it can never drift."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

UNDO_NOTE = ("[b]Undo[/]: archive, forget, edit, pin and promote in the Memories pane can be undone with [b]u[/] "
             "(or ctrl+z) until you leave that pane; forget restores the content the database cleared.")


def _key(b: Binding) -> str:
    names = {"slash": "/", "question_mark": "?", "left_square_bracket": "[", "right_square_bracket": "]",
             "plus": "+", "equals_sign": "=", "minus": "-", "delete": "del"}
    return ", ".join(names.get(k, k) for k in b.key.split(","))


def binding_table() -> list[tuple[str, list[tuple[str, str]]]]:
    from ..app import EngramApp
    from .console import ConsoleScreen
    from .consolidation import ConsolidationScreen
    from .contradictions import ContradictionsScreen
    from .decay import DecayScreen
    from .injection import InjectionScreen
    from .memories import MemoriesScreen

    groups = [("Everywhere", EngramApp), ("1 Memories", MemoriesScreen), ("2 Decay", DecayScreen),
              ("3 Consolidation review", ConsolidationScreen), ("4 Contradictions", ContradictionsScreen),
              ("5 SurrealQL console", ConsoleScreen), ("6 Injection preview", InjectionScreen)]
    out = []
    for title, cls in groups:
        rows = []
        for b in cls.BINDINGS:
            if isinstance(b, Binding):
                rows.append((_key(b), b.tooltip or b.description or b.action))
        if title == "Everywhere":
            rows.append(("ctrl+p", "Command palette: every action by name"))
        out.append((title, rows))
    return out


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        # A Rich table of plain Text cells: key names like "[" must never be read as markup.
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", min_width=16)
        table.add_column()
        table.add_row(Text("Engram key bindings", style="bold"), Text("(esc closes)", style="dim"))
        for title, rows in binding_table():
            table.add_row("", "")
            table.add_row(Text(title, style="bold orange1"), "")
            for key, desc in rows:
                table.add_row(Text(f"  {key}"), Text(desc))
        table.add_row("", "")
        with VerticalScroll(id="help", classes="dialog"):
            yield Static(table)
            yield Static(UNDO_NOTE)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
