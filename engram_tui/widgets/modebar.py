"""The pane switcher under the header: the key for each pane, the current one highlighted, clickable; busy sign."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..layout import NARROW_COLUMNS

PANES = [
    ("1", "memories", "Memories"),
    ("2", "decay", "Decay"),
    ("3", "consolidation", "Consolidation"),
    ("4", "contradictions", "Contradictions"),
    ("5", "console", "SurrealQL"),
    ("6", "injection", "Injection"),
]
# At 80 columns: the start of each pane's name (the core's names: consolidation, contradictions, injection).
SHORT = {
    "memories": "Mem",
    "decay": "Decay",
    "consolidation": "Consol",
    "contradictions": "Contra",
    "console": "SQL",
    "injection": "Inject",
}
HINT = "   [dim]1–6 or alt+1–6 switch · ? help · ctrl+p commands[/]"


class ModeBar(Static):
    def __init__(self, current: str) -> None:
        super().__init__(classes="modebar")
        self.current = current
        self.busy = ""
        self.brief = ""

    def on_mount(self) -> None:
        self._render_bar()

    def on_resize(self) -> None:
        self._render_bar()

    def set_busy(self, text: str, brief: str = "") -> None:
        """``brief``: the same sign for 80 columns."""
        if (text, brief) != (self.busy, self.brief):
            self.busy, self.brief = text, brief
            self._render_bar()

    def _render_bar(self) -> None:
        parts = []
        narrow = self.app.size.width < NARROW_COLUMNS
        for key, mode, label in PANES:
            text = f" {key} {SHORT[mode] if narrow else label} "
            if mode == self.current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=app.mode('{mode}')]{text}[/]")
        bar = Content.from_markup(" ".join(parts))
        if self.busy:
            bar += Content.from_markup(
                "  [b $warning]$busy[/]", busy=(self.brief or self.busy) if narrow else self.busy
            )
        elif not narrow:
            bar += Content.from_markup(HINT)
        else:
            bar += Content.from_markup("  [dim]? help[/]")
        self.update(bar)
