"""The pane switcher under the header: the key for each pane, the current one highlighted, clickable."""

from __future__ import annotations

from textual.widgets import Static

PANES = [("1", "memories", "Memories"), ("2", "decay", "Decay"), ("3", "review", "Consolidation"),
         ("4", "conflicts", "Contradictions"), ("5", "console", "SurrealQL"), ("6", "inject", "Injection")]


class ModeBar(Static):
    def __init__(self, current: str) -> None:
        super().__init__(classes="modebar")
        self.current = current

    def on_mount(self) -> None:
        parts = []
        for key, mode, label in PANES:
            text = f" {key} {label} "
            if mode == self.current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=app.mode('{mode}')]{text}[/]")
        self.update(" ".join(parts) + "   [dim]1–6 or alt+1–6 switch · ? help · ctrl+p commands[/]")
