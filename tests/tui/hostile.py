"""A store whose every text is hostile to a terminal UI: markup-like brackets, backslashes, controls, emoji.

Used by the property, Pilot and random-keys tests. Every memory goes in through the real service; the pairs are
worded so the organise layer queues a consolidation and flags a contradiction, so those panes show hostile text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HOSTILE = [
    "Close the shortcode with [/] in docs",
    "dict[str, int] and list[str] are the return types",
    "Bash arrays expand with ${arr[@]} inside quotes",
    "[bold red]not a style[/bold red] and [forgotten] and [@click=app.quit]click[/]",
    "A Windows path C:\\Users\\dev\\ ends with a backslash \\",
    "Emoji 🚀🔥 and wide 漢字テスト and a ZWJ family 👨‍👩‍👧",
    "Control \x1b[31mred\x1b[0m and bell \x07 and NUL-free tab\tseparated",
    "Line\u2028separator and paragraph\u2029separator in one memory",
    "Escaped \\[b]not bold\\[/b] and $variable and $$ and [$accent]dollar[/]",
    "x" * 3000 + " very long line [/]",
    "Rich markup [link=https://example.com]link[/link] and [red on blue]",
    "Jinja closes tags with {% endblock %} and [/] too",
]
CONSOLIDATE = [
    (
        "Run the tests with `uv run pytest -x -q` [/] ${arr[@]}",
        "Use `uv run pytest -x -q` [/] ${arr[@]} to run the tests",
    ),
]
CONTRADICT = [
    ("The local API [/] listens on port 8080", "The local API [/] listens on port 8000"),
]


def build_hostile(service: Any, base: Path) -> str:
    """Store the hostile set in a project under ``base``; returns the project root."""
    from engram_core.models import MemoryIn, MemoryType, Scope

    root = base / "hostile[/]project"
    (root / ".git").mkdir(parents=True, exist_ok=True)
    project = str(root)
    items = [
        MemoryIn(
            content=t,
            memory_type=MemoryType.semantic,
            scope=Scope.project,
            tags=["t[/]ag", "[b]"],
            metadata={"k[/]": "v[bold]"},
        )
        for t in HOSTILE
    ]
    for a, b in CONSOLIDATE + CONTRADICT:
        items += [
            MemoryIn(content=a, memory_type=MemoryType.semantic, scope=Scope.project),
            MemoryIn(content=b, memory_type=MemoryType.semantic, scope=Scope.project),
        ]
    service.store_many(items, project=project)
    service.store(
        MemoryIn(
            content="User scope [/] preference: dict[str, int]",
            memory_type=MemoryType.semantic,
            scope=Scope.user,
        ),
        project=project,
    )
    first = service.list_memories(scope="project", project=project, limit=1).items[0]
    service.forget(first.id, project=project, reason="[forgotten] reason [/]", erase=True, confirm=True)
    if hasattr(service, "reflect_and_consolidate"):
        service.reflect_and_consolidate(project=project, level="full")
    return project
