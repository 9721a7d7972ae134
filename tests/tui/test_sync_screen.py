"""The project-and-sync screen (issue #32): identity, sync state and shared memories, and unsharing from it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from conftest import DemoEnv, make_app, settle
from textual.widgets import DataTable, Static

from engram_tui.screens.sync import SyncScreen

SIZE = (160, 50)


def text_of(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_shows_identity_sync_state_and_shares_and_unshares(
    demo_service: Any, demo_env: DemoEnv, tmp_path: Path
) -> None:
    first = demo_service.list_memories(scope="project", project=demo_env.project, limit=1).items[0]
    demo_service.share_memory(first.id, project=demo_env.project)
    remote = tmp_path / "sync.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    demo_service.sync_init(str(remote))
    ident = demo_service.project_identity(demo_env.project)

    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_sync()
        await settle(pilot)
        assert isinstance(app.screen, SyncScreen)
        project = text_of(app, "#sync-project")
        assert ident.database in project and "no git repository" in project
        channels = text_of(app, "#sync-channels")
        assert f"Personal sync: {remote}" in channels and "0 change(s) pending" in channels
        assert "Team sync: not set up" in channels and "1 memories of this project are shared" in channels
        shared = app.screen.query_one("#sync-shared", DataTable)
        assert shared.row_count == 1
        await pilot.press("u")
        await settle(pilot)
        assert app.screen.query_one("#sync-shared", DataTable).row_count == 0
        assert "shared" not in demo_service.get(first.id, project=demo_env.project).tags
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, SyncScreen)


async def test_hostile_shared_text_at_80x24(demo_service: Any, demo_env: DemoEnv) -> None:
    """A shared memory full of markup, [/], backslashes, emoji and U+2028 is shown as text (no markup error,
    nothing interpreted), on the smallest terminal."""
    from engram_core.models import MemoryIn

    hostile = "rich [bold]x[/] and [/] alone \\[not] C:\\dir\\ 🚀 line\u2028break [link=http://x]y[/link]"
    mem = demo_service.store(MemoryIn(content=hostile), project=demo_env.project).memory
    demo_service.share_memory(mem.id, project=demo_env.project)
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.open_sync()
        await settle(pilot)
        assert isinstance(app.screen, SyncScreen)
        table = app.screen.query_one("#sync-shared", DataTable)
        cells = [str(table.get_cell(mem.id, "content"))]
        assert any("[bold]x[/]" in c and "[/] alone" in c for c in cells), cells
        assert "\u2028" not in cells[0]  # a line break is shown, not laid out
