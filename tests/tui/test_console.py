"""The SurrealQL console: any number of runs in a row, persisted owner-only history, refusals that say the key."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from conftest import DemoEnv, make_app, open_pane, settle
from textual.widgets import Static, TabPane

from engram_tui.screens.console import ConsoleScreen
from engram_tui.screens.dialogs import ConfirmScreen

SIZE = (160, 48)


async def test_many_runs_in_a_row_each_show_their_result(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        editor = app.screen.query_one("#console-editor")
        for n in (1, 2, 3, 1, 2):
            editor.text = "\n".join(f"SELECT {i} AS n FROM ONLY memory LIMIT 1;" for i in range(n))
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert app.last_error is None, app.last_error
            panes = list(app.screen.query(TabPane))
            assert len(panes) == n, "every run replaces the previous tabs, whatever ran before"
            results = app.screen.query_one("#console-results")
            assert results.active == panes[0].id, (
                "the new first tab is shown (a removed one left a blank body)"
            )
            assert f"{n} statement(s)" in str(app.screen.query_one("#console-results").border_title)


async def test_history_survives_a_restart_and_is_owner_only(
    demo_service: Any, demo_env: DemoEnv, tmp_path: Path
) -> None:
    history = tmp_path / "console_history.jsonl"
    query = "SELECT 'a [/] b' AS x FROM ONLY memory LIMIT 1;"
    app = make_app(demo_service, demo_env, history_path=history)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        app.screen.query_one("#console-editor").text = query
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.last_error is None, app.last_error
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    again = make_app(demo_service, demo_env, history_path=history)
    async with again.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        screen = again.screen
        assert isinstance(screen, ConsoleScreen)
        assert screen.history[-1] == query
        options = screen.query_one("#console-history")
        assert options.get_option_at_index(0).prompt.plain == query, "shown literally, brackets and all"


async def test_a_write_refusal_names_the_key_that_allows_writes(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        app.screen.query_one(
            "#console-editor"
        ).text = "UPDATE memory SET importance = 1 WHERE content = '[/]';"
        await pilot.pause(0.05)
        verdict = app.screen.query_one("#console-verdict", Static).render().plain
        assert "refused" in verdict and "F2" in verdict and "allow_writes=true" not in verdict
        await pilot.press("ctrl+r")
        await settle(pilot)
        shown = [n.message for n in app._notifications]
        assert any("F2" in m and "allow writes" in m for m in shown), shown
        await pilot.press("f2")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # focus starts on Yes: enter confirms
        await settle(pilot)
        assert app.screen.allow_writes
        assert "F2" not in app.screen.query_one("#console-verdict", Static).render().plain


async def test_digits_typed_in_the_editor_stay_in_the_editor(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        editor = app.screen.query_one("#console-editor")
        editor.text = ""
        editor.focus()
        await pilot.press(*"SELECT 1234 ", "2", "3", "6")
        await settle(pilot)
        assert isinstance(app.screen, ConsoleScreen)
        assert editor.text == "SELECT 1234 236"
        await pilot.press("alt+1")
        await settle(pilot)
        assert not isinstance(app.screen, ConsoleScreen), "alt+digit switches even from the editor"
