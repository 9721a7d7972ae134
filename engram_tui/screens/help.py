"""Help: every key binding, read from the bindings themselves so it can never drift.

The pane you came from comes first, then what works everywhere and in every list, then the other panes. j/k, g/G
and the page keys scroll; `/` filters (type a key or a word; enter or down goes back to the list); escape, `?`, F1
or q close it.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from ..modes import APP_BINDINGS, MODE_KEYS, MODE_TITLES

UNDO_NOTE = (
    "[b]Undo[/]: archive, forget, edit, pin and promote in the Memories pane can be undone with [b]u[/] "
    "(or ctrl+z) until you leave that pane; forget restores the content the database cleared."
)

# Keys no pane binds itself: Textual's focus moves, the lists' own keys, the conventions every pane follows.
CONVENTIONS = [
    ("tab, shift+tab", "Move the focus to the next / previous part (the focused part has an accent border)"),
    ("enter", "Select the row; in the filter box: apply it and go back to the list"),
    ("down", "In the filter or search box: go back to the list"),
    ("j, k, down, up", "Move down / up in the focused list; scroll the focused text"),
    ("g, G", "First / last row (in Memories: the first / last memory of all, not of the page)"),
    ("pageup, pagedown", "A screen up / down (past the page's edge: the next page of memories)"),
    ("z", "Maximise the focused part (table, tree, detail, editor); z or escape restores"),
    ("escape", "Leave an editor or a search; close a dialog (No)"),
    ("ctrl+a", "In an editor: select all"),
    ("ctrl+p", "Command palette: every action by name, with its key"),
]


def _key(b: Binding) -> str:
    names = {
        "slash": "/",
        "question_mark": "?",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "plus": "+",
        "equals_sign": "=",
        "minus": "-",
        "delete": "del",
    }
    return ", ".join(names.get(k, k) for k in b.key.split(","))


def binding_table(current: str | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Groups of (key, what it does): the pane ``current`` (a mode name) first, then everywhere, lists, the rest."""
    from ..panes import PANES

    panes = [(mode, f"{key} {MODE_TITLES[mode]}", PANES[mode]) for key, mode in MODE_KEYS.items()]

    def rows(bindings: Any) -> list[tuple[str, str]]:
        return [(_key(b), b.tooltip or b.description or b.action) for b in bindings if isinstance(b, Binding)]

    here = [(f"{title} (this pane)", rows(cls.BINDINGS)) for mode, title, cls in panes if mode == current]
    others = [(title, rows(cls.BINDINGS)) for mode, title, cls in panes if mode != current]
    return [*here, ("Everywhere", rows(APP_BINDINGS)), ("Lists, editors, focus", CONVENTIONS), *others]


def render_help(groups: list[tuple[str, list[tuple[str, str]]]], needle: str = "") -> Table:
    """A Rich table of plain Text cells (key names like "[" must never be read as markup), filtered by
    ``needle`` on the key, the description or the group's name."""
    needle = needle.strip().lower()
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", min_width=16)
    table.add_column()
    shown = 0
    for title, rows in groups:
        hits = [
            (k, d)
            for k, d in rows
            if not needle or needle in k.lower() or needle in d.lower() or needle in title.lower()
        ]
        if not hits:
            continue
        if shown:
            table.add_row("", "")
        table.add_row(Text(title, style="bold orange1"), "")
        for key, desc in hits:
            table.add_row(Text(f"  {key}"), Text(desc))
        shown += 1
    if not shown:
        table.add_row(Text("no key matches", style="dim"), Text(needle))
    return table


class HelpScreen(ModalScreen[None]):
    AUTO_FOCUS = "#help-body"
    BINDINGS = [
        Binding("escape,question_mark,f1", "dismiss", "Close", id="help.close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("slash", "focus_filter", "Filter", show=False),
        Binding("j,down", "scroll(1)", "Down", show=False),
        Binding("k,up", "scroll(-1)", "Up", show=False),
        Binding("g,home", "jump(False)", "Top", show=False),
        Binding("G,end", "jump(True)", "Bottom", show=False),
    ]

    def __init__(self, current: str | None = None) -> None:
        super().__init__()
        self.groups = binding_table(current)

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Label(
                "Engram key bindings  [dim](/ filter · j/k scroll · esc closes)[/]", id="dialog-title"
            )
            yield _HelpFilter(placeholder="filter: a key or a word", id="help-filter", compact=True)
            with VerticalScroll(id="help-body"):
                yield Static(render_help(self.groups), id="help-table")
                yield Static(UNDO_NOTE, id="help-undo")

    @on(Input.Changed, "#help-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.query_one("#help-table", Static).update(render_help(self.groups, event.value))
        self.query_one("#help-undo").display = not event.value.strip()
        self.query_one("#help-body", VerticalScroll).scroll_home(animate=False)

    @on(Input.Submitted, "#help-filter")
    def _to_list(self) -> None:
        self.query_one("#help-body").focus()

    def action_focus_filter(self) -> None:
        self.query_one("#help-filter").focus()

    def action_scroll(self, delta: int) -> None:
        self.query_one("#help-body", VerticalScroll).scroll_relative(y=delta, animate=False)

    def action_jump(self, end: bool) -> None:
        body = self.query_one("#help-body", VerticalScroll)
        (body.scroll_end if end else body.scroll_home)(animate=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class _HelpFilter(Input):
    """Typing filters; down goes to the list (j and k are letters here)."""

    BINDINGS = [Binding("down", "to_list", show=False)]

    def action_to_list(self) -> None:
        self.screen.query_one("#help-body").focus()
