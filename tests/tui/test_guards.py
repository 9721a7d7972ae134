"""Issue #30: console writes guarded like k9s deletes, capped results said so, true totals on Contradictions,
the merged text shown before a merge and kept on Cancel. At 80×24 and 160×48."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import DemoEnv, make_app, open_pane, screen_lines, settle
from textual.widgets import Input, TabPane

from engram_tui.screens.dialogs import ConfirmScreen, TextPromptScreen, TypedConfirmScreen

SIZES = [(80, 24), (160, 48)]
IDS = ["80x24", "160x48"]


@asynccontextmanager
async def console(size: tuple[int, int], service: Any, env: DemoEnv) -> AsyncIterator[tuple[Any, Any]]:
    app = make_app(service, env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "5")
        app.screen.allow_writes = True  # as after F2 and its confirmation
        yield app, pilot


async def run(pilot: Any, text: str) -> None:
    pilot.app.screen.query_one("#console-editor").text = text
    await pilot.pause(0.05)
    await pilot.press("ctrl+r")
    await settle(pilot)


def text_of(app: Any) -> str:
    return "\n".join(screen_lines(app))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_a_bounded_write_repeats_the_statement_and_the_rows_and_defaults_to_no(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with console(size, demo_service, demo_env) as (app, pilot):
        expected = sum(
            1
            for m in demo_service.list_memories(scope="project", project=demo_env.project, limit=1000).items
            if m.importance < 0.3
        )
        await run(pilot, "UPDATE memory SET importance = 0.3 WHERE importance < 0.3;")
        assert isinstance(app.screen, ConfirmScreen)
        message = app.screen.query_one("#dialog-message").render().plain
        assert "UPDATE memory SET importance = 0.3 WHERE importance < 0.3" in message
        assert f"{expected:,} rows now match" in message
        await pilot.press("enter")  # focus starts on No
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        low = [
            m
            for m in demo_service.list_memories(scope="project", project=demo_env.project, limit=1000).items
            if m.importance < 0.3
        ]
        assert len(low) == expected, "enter answered No: nothing ran"


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_an_unbounded_delete_needs_the_table_name_typed(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    def episodes() -> int:
        res = demo_service.run_query("SELECT count() AS n FROM episode GROUP ALL", project=demo_env.project)
        rows = res.statements[0].rows
        return int(rows[0]["n"]) if rows else 0

    async with console(size, demo_service, demo_env) as (app, pilot):
        total = episodes()
        assert total > 0
        await run(pilot, "DELETE episode;")
        assert isinstance(app.screen, TypedConfirmScreen)
        message = app.screen.query_one("#dialog-message").render().plain
        assert "DELETE episode" in message and "no WHERE" in message
        await pilot.press(*"epis", "enter")  # not the name: nothing happens
        await settle(pilot)
        assert isinstance(app.screen, TypedConfirmScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert episodes() == total
        await run(pilot, "DELETE episode;")
        app.screen.query_one("#typed", Input).value = "episode"
        await pilot.press("enter")
        await settle(pilot)
        assert episodes() == 0
        # Memories are never deleted by a query, typed name or not: the lifecycle archives them (issue #29).
        memories = demo_service.list_memories(scope="project", project=demo_env.project, limit=1).total
        await run(pilot, "DELETE memory;")
        if isinstance(app.screen, TypedConfirmScreen):
            app.screen.query_one("#typed", Input).value = "memory"
            await pilot.press("enter")
            await settle(pilot)
        assert (
            demo_service.list_memories(scope="project", project=demo_env.project, limit=1).total == memories
        )
        assert "archive" in text_of(app).lower()


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_a_refused_run_clears_the_old_results(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with console(size, demo_service, demo_env) as (app, pilot):
        await run(pilot, "SELECT 1 AS n FROM ONLY memory LIMIT 1;")
        assert any("1 rows" in str(p._title) for p in app.screen.query(TabPane))
        await run(pilot, "DEFINE TABLE x;")
        panes = list(app.screen.query(TabPane))
        assert len(panes) == 1 and "not run" in str(panes[0]._title)
        assert "refused" in text_of(app)


async def test_capped_results_say_so(
    demo_service: Any, demo_env: DemoEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram_core import guarded_query

    monkeypatch.setattr(guarded_query, "QUERY_MAX_ROWS", 50)
    async with console((160, 48), demo_service, demo_env) as (app, pilot):
        total = demo_service.list_memories(scope="project", project=demo_env.project, limit=1).total
        await run(pilot, "SELECT id FROM memory;")
        title = str(app.screen.query_one("#console-results").border_title)
        assert f"first 50 of {total:,} rows" in title and "capped" in title
        assert any(f"first 50 of {total:,} rows (capped)" in str(p._title) for p in app.screen.query(TabPane))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_contradictions_show_the_true_total(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram_tui.screens import contradictions

    monkeypatch.setattr(contradictions, "LIST_LIMIT", 2)
    total = demo_service.count_contradictions(project=demo_env.project).open
    assert total > 2
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "4")
        assert f"2 of {total}" in text_of(app)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_a_merge_shows_the_merged_text_and_cancel_keeps_the_draft(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "4")
        await pilot.press("M")
        await settle(pilot)
        assert isinstance(app.screen, TextPromptScreen)
        app.screen.query_one("#prompt-text").text = "The retry limit is 5 since the March change."
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert (
            "The retry limit is 5 since the March change."
            in app.screen.query_one("#dialog-message").render().plain
        )
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("M")
        await settle(pilot)
        assert app.screen.query_one("#prompt-text").text == "The retry limit is 5 since the March change."
        app.screen.query_one("#prompt-text").text = "edited again"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("M")
        await settle(pilot)
        assert app.screen.query_one("#prompt-text").text == "edited again", (
            "Cancel in the editor keeps it too"
        )


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_an_empty_queue_says_how_proposals_arrive_and_runs_consolidation(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    for item in demo_service.list_consolidations(project=demo_env.project, status="pending"):
        demo_service.reject_consolidation(item.id, project=demo_env.project, reason="test: an empty queue")
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "3")
        empty = app.screen.query_one("#consolidation-empty").render().plain
        assert "Proposals arrive when" in empty and "a session ends" in empty and "Press C" in empty
        await pilot.press("C")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert any(
            "Consolidation:" in n.message and "proposal(s) found" in n.message for n in app._notifications
        )
