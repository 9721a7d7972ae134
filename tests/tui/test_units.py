"""Small pure checks: the core never imports Textual, undo plans, formatting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram_tui.fmt import age, ms, short, wall_stamp
from engram_tui.undo import UndoEntry, UndoStack, undo_plan


def test_undo_forget_restores_status_before_content() -> None:
    entry = UndoEntry(
        "forget",
        "m1",
        "forget",
        before={"status": "active", "content": "x", "tags": ["a"], "metadata": {"k": 1}},
    )
    plan = undo_plan(entry)
    assert [p[0] for p in plan] == ["set_status", "update"]
    assert plan[0][1] == ("m1", "active")
    patch = plan[1][1][1]
    assert (patch.content, patch.tags, patch.metadata) == ("x", ["a"], {"k": 1})


@pytest.mark.parametrize(
    "text", ["emoji 🎉 backslash \\\\ and [bold red]x[/] more words", "漢字" * 20, "plain " * 20, "🚀" * 30]
)
def test_short_fits_the_cells_and_says_it_was_cut(text: str) -> None:
    from rich.cells import cell_len

    cut = short(text, 24)
    assert cell_len(cut) <= 24 and cut.endswith("…"), (
        cut
    )  # wide characters counted twice, as the terminal does
    assert short("fits", 24) == "fits"


def test_undo_other_actions() -> None:
    assert undo_plan(UndoEntry("archive", "m", "archive", before={"status": "created"}))[0][1] == (
        "m",
        "created",
    )
    assert undo_plan(UndoEntry("pin", "m", "pin", before={"pinned": False}))[0][1][1].pinned is False
    assert undo_plan(UndoEntry("promote", "m", "promote", created_id="u1"))[0][:2] == ("forget", ("u1",))
    edit = undo_plan(UndoEntry("edit", "m", "edit", before={"importance": 0.4}))[0][1][1]
    assert edit.importance == 0.4 and edit.content is None


def test_undo_stack_is_bounded_and_lifo() -> None:
    s = UndoStack(limit=2)
    for i in range(3):
        s.push(UndoEntry("pin", str(i), "pin"))
    assert len(s) == 2 and s.pop().memory_id == "2" and s.pop().memory_id == "1" and s.pop() is None


def test_formatting() -> None:
    now = datetime(2025, 6, 2, tzinfo=UTC)
    assert age(now - timedelta(days=3), now) == "3.0 d ago"
    assert age(now + timedelta(hours=5), now) == "in 5.0 h"
    assert wall_stamp(now, mask=True) != wall_stamp(now, mask=False)
    assert ms(12.34, mask=False) == "12.3 ms" and ms(12.34, mask=True) == "— ms"


def test_cli_tui_passes_project_home_and_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`engram tui --in-process --project P --home H` opens that project on that data root, in process."""
    import engram_tui.app as tui
    from engram_core.cli import commands as cli

    seen: dict[str, Any] = {}

    def fake_run(app: Any) -> None:  # everything up to the first paint, without a terminal
        seen.update(project=app.project, source=app.source, home=app.service.home)

    monkeypatch.setattr(tui.EngramApp, "run", fake_run)
    proj, home = tmp_path / "proj", tmp_path / "home"
    (proj / "src").mkdir(parents=True)
    (proj / ".git").mkdir()
    assert cli.main(["tui", "--in-process", "--project", str(proj / "src"), "--home", str(home)]) == 0
    assert seen == {"project": str(proj.resolve()), "source": "in-process", "home": home}


def test_main_exits_non_zero_when_the_app_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app dying on an error (Textual prints the traceback) must reach the shell as a failure."""
    from engram_tui.app import EngramApp, main
    from engram_tui.screens.memories import MemoriesScreen

    def boom(self: Any) -> None:
        raise RuntimeError("a bug in a pane")

    monkeypatch.setattr(MemoriesScreen, "on_mount", boom)
    run = EngramApp.run
    monkeypatch.setattr(EngramApp, "run", lambda self, **kw: run(self, headless=True, **kw))
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    assert main(["--in-process", "--home", str(tmp_path / "home"), "--project", str(project)]) == 1
