"""The demo lives apart: its own data root, the same on every load, removable; an empty store says what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import settle
from textual.widgets import Static

from engram_tui.app import EngramApp
from engram_tui.demo import DEMO_MARKER, open_demo, remove_demo
from engram_tui.screens.dialogs import ConfirmScreen


def _counts(svc: Any, project: str) -> dict[str, int]:
    out = {}
    for scope in ("project", "user"):
        for status in ("active", "created", "archived", "consolidated", "superseded", "forgotten"):
            out[f"{scope}/{status}"] = svc.list_memories(
                scope=scope, project=project, status=status, limit=1
            ).total
    return out


async def test_empty_store_explains_and_opens_the_demo_apart(tmp_path: Path, embedder: Any) -> None:
    """From the empty-state offer to the demo, in its own data root: the user's stores get nothing."""
    from engram_core.service import EngramService

    user_home = tmp_path / "home"
    project = tmp_path / "work" / "myproj"
    (project / ".git").mkdir(parents=True)
    user = EngramService(user_home, embedder=embedder)
    demo_root = user_home / "demo"
    app = EngramApp(user, project=project, demo_root=demo_root)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen), "an empty store offers the demo"
            offer = app.screen.query_one("#dialog-message", Static).render().plain
            for how in ("engram setup claude-code", "engram store", "engram import"):
                assert how in offer
            await pilot.press("escape")
            await settle(pilot)
            detail = app.screen.query_one("#detail-fields-text", Static).render().plain
            assert "engram store" in detail and "D" in detail, (
                "after No, the pane still says how memories arrive"
            )
            await pilot.press("D")
            for _ in range(600):  # the first build embeds a few hundred memories
                await settle(pilot)
                if app.demo_service is not None:
                    break
            await settle(pilot)
            assert app.demo_service is not None, app.last_error
            assert app.project.startswith(str(demo_root))
            assert "payments-api" in app.sub_title
            status = app.screen.query_one("#table-status", Static).render().plain
            assert "of 0" not in status
        assert user.list_memories(scope="user", limit=1).total == 0, (
            "the demo never writes the user's user scope"
        )
        assert user.list_memories(scope="project", project=str(project), limit=1).total == 0
        assert not list(user_home.glob("projects/*")) or all(
            "payments" not in p.name for p in user_home.glob("projects/*")
        )
        first = _counts(app.demo_service, app.project)
        built = (demo_root / DEMO_MARKER).read_text()
    finally:
        app.close_services()
        user.close()
    # A second load reopens the same demo: nothing grows, nothing decays, the marker is unchanged.
    svc, report = open_demo(demo_root, embedder=embedder)
    try:
        assert _counts(svc, report.project_root) == first
        assert len(svc.list_consolidations(project=report.project_root)) == len(
            svc.list_consolidations(project=report.project_root)
        )
    finally:
        svc.close()
    assert (demo_root / DEMO_MARKER).read_text() == built
    assert remove_demo(demo_root) and not demo_root.exists()
    assert remove_demo(demo_root) is False


def test_remove_refuses_a_folder_that_is_not_a_demo(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "precious.txt").write_text("x")
    with pytest.raises(ValueError, match="not a demo"):
        remove_demo(tmp_path / "demo")
    assert (tmp_path / "demo" / "precious.txt").exists()


def test_help_names_the_demo_options_and_remove_works(tmp_path: Path) -> None:
    env_home = tmp_path / "h"
    out = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "tui", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for opt in ("--demo", "--reset", "--remove-demo"):
        assert opt in out.stdout
    (env_home / "demo").mkdir(parents=True)
    (env_home / "demo" / DEMO_MARKER).write_text("{}")
    out = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "tui", "--remove-demo", "--home", str(env_home)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "demo removed" in out.stdout and not (env_home / "demo").exists()
