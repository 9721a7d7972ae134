"""The app's panes by key and title, its own key bindings, and the text an empty store shows: what the screens
and the command palette read about the app without importing it (the app imports them)."""

from __future__ import annotations

from textual.binding import Binding

MODE_KEYS = {
    "1": "memories",
    "2": "decay",
    "3": "consolidation",
    "4": "contradictions",
    "5": "console",
    "6": "injection",
}
MODE_TITLES = {
    "memories": "Memories",
    "decay": "Decay",
    "consolidation": "Consolidation review",
    "contradictions": "Contradictions",
    "console": "SurrealQL console",
    "injection": "Injection preview",
}
EMPTY_HELP = (
    "No memories here yet. They arrive when:\n"
    "  • Claude Code stores them as you work: engram setup claude-code (hooks + MCP), then start claude\n"
    '  • you store one: engram store "The API listens on port 8000"\n'
    "  • you import them: engram import FILE.jsonl  (one memory per line, e.g. from engram export)\n\n"
    "The demo (D) is a sample project in its own data root: it never mixes with your memories."
)
APP_BINDINGS = [
    *(
        Binding(
            k,
            f"mode('{m}')",
            MODE_TITLES[m].split()[0],
            id=f"app.mode.{m}",
            show=False,
            tooltip=f"Show the {MODE_TITLES[m]} pane",
        )
        for k, m in MODE_KEYS.items()
    ),
    # alt+N works from inside an editor too (plain digits are typed there).
    *(
        Binding(f"alt+{k}", f"mode('{m}')", MODE_TITLES[m], show=False, priority=True, id=f"app.alt_mode.{m}")
        for k, m in MODE_KEYS.items()
    ),
    Binding("question_mark,f1", "help", "Help", id="app.help", tooltip="Every key binding"),
    Binding("q", "quit", "Quit", id="app.quit"),
]
