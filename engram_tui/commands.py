"""Command palette: every action of every pane by name (posting's Provider pattern)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from .contract import EngramAppApi

# (palette name, mode, action on that pane's screen or None for just going there, help)
COMMANDS: list[tuple[str, str, str | None, str]] = [
    ("Go: Memories", "memories", None, "Scope tree, memory table, detail"),
    ("Go: Decay view", "decay", None, "Strength curves and threshold crossings"),
    ("Go: Consolidation review", "consolidation", None, "Approve or reject merge proposals"),
    ("Go: Contradictions", "contradictions", None, "Resolve conflicting memories"),
    ("Go: SurrealQL console", "console", None, "Query the memory stores (read-only by default)"),
    ("Go: Injection preview", "injection", None, "What SessionStart injects now"),
    ("Memory: filter", "memories", "focus_filter", "Filter the table as you type"),
    ("Memory: hybrid search", "memories", "focus_search", "The agent's recall, with scores"),
    ("Memory: edit", "memories", "edit", "Edit content, tags, importance of the selected memory"),
    ("Memory: pin / unpin", "memories", "pin", "Pinned memories are kept whatever their strength"),
    ("Memory: promote", "memories", "promote", "Copy up to the next scope (asks first)"),
    ("Memory: archive", "memories", "archive", "Archive the selected memory (asks first)"),
    ("Memory: forget", "memories", "forget", "Forget the selected memory (asks first)"),
    ("Memory: undo", "memories", "undo", "Undo the last change made on the Memories pane"),
    ("Memory: sort by next column", "memories", "cycle_sort", "Cycle the sort column"),
    ("Memory: reverse sort", "memories", "reverse_sort", "Ascending / descending"),
    ("Memory: next page", "memories", "page(1)", "Next page of the table"),
    ("Memory: previous page", "memories", "page(-1)", "Previous page of the table"),
    ("Memory: refresh", "memories", "refresh", "Reload table, counts and detail"),
    ("Decay: refresh", "decay", "refresh", "Re-read the selected memory and aggregates"),
    ("Decay: zoom in", "decay", "zoom(0.5)", "Shorter time axis"),
    ("Decay: zoom out", "decay", "zoom(2)", "Longer time axis"),
    ("Consolidation: approve", "consolidation", "approve", "Approve the selected proposal (asks first)"),
    ("Consolidation: edit then approve", "consolidation", "edit", "Edit the proposed text"),
    ("Consolidation: reject", "consolidation", "reject", "Reject the selected proposal"),
    ("Consolidation: run now", "consolidation", "consolidate", "Look for proposals now (asks first)"),
    ("Contradiction: keep A", "contradictions", "resolve('keep_a')", "B is invalidated (asks first)"),
    ("Contradiction: keep B", "contradictions", "resolve('keep_b')", "A is invalidated (asks first)"),
    ("Contradiction: keep both", "contradictions", "resolve('keep_both')", "Mark as not a real conflict"),
    ("Contradiction: merge", "contradictions", "resolve('merge')", "Write one statement replacing both"),
    ("Console: run query", "console", "run", "Run the editor's statements"),
    ("Console: toggle writes", "console", "toggle_writes", "Allow writes (asks first)"),
    ("Injection: refresh", "injection", "refresh", "Recompute the SessionStart preview"),
]


def key_for(mode: str, action: str | None) -> str:
    """The key that runs ``action`` on pane ``mode`` (read from the bindings, so the palette never drifts);
    for going to a pane, its digit."""
    from .modes import MODE_KEYS
    from .panes import PANES
    from .screens.help import _key

    if action is None:
        return next((k for k, m in MODE_KEYS.items() if m == mode), "")
    screen = PANES[mode]
    for b in getattr(screen, "BINDINGS", []):
        if getattr(b, "action", None) == action:
            return _key(b)
    return ""


class EngramCommands(Provider):
    @property
    def engram(self) -> EngramAppApi:
        return cast("EngramAppApi", self.app)

    def _entries(self) -> list[tuple[str, Any, str]]:
        app = self.engram
        out: list[tuple[str, Any, str]] = []
        for name, mode, action, help_text in COMMANDS:
            runnable = (
                partial(app.action_mode, mode)
                if action is None
                else partial(app.run_screen_action, mode, action)
            )
            key = key_for(mode, action)
            out.append((name, runnable, f"{key}  ·  {help_text}" if key else help_text))
        out.append(("App: help (key bindings)", app.action_help, "?, f1  ·  Every key binding"))
        out.append(
            (
                "App: project and sync",
                app.open_sync,
                "Which project this is and why; sync state; what is shared with the team",
            )
        )
        out.append(
            ("App: load demo data", app.load_demo, "A separate demo project with a few hundred memories")
        )
        return out

    async def discover(self) -> Hits:
        for name, runnable, help_text in self._entries():
            yield DiscoveryHit(name, runnable, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, runnable, help_text in self._entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), runnable, help=help_text)
