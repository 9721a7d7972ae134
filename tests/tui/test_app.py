"""Pilot tests: the real app on the real demo set (in-process service, and once through the real daemon)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DemoEnv, make_app, open_pane, settle
from textual.widgets import DataTable, Input, Static

from engram_tui.screens.console import ConsoleScreen
from engram_tui.screens.consolidation import ConsolidationScreen
from engram_tui.screens.contradictions import ContradictionsScreen
from engram_tui.screens.decay import DecayScreen
from engram_tui.screens.dialogs import ConfirmScreen, EditMemoryScreen
from engram_tui.screens.help import HelpScreen
from engram_tui.screens.injection import InjectionScreen
from engram_tui.screens.memories import PAGE_SIZE, MemoriesScreen
from engram_tui.widgets.scope_tree import ScopeTree

SIZE = (160, 50)


def table(app: Any) -> DataTable:
    return app.screen.query_one("#memory-table", DataTable)


def text_of(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_starts_on_the_project_with_counts_and_detail(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MemoriesScreen)
        total = demo_service.list_memories(scope="project", project=demo_env.project, limit=1).total
        assert table(app).row_count == min(PAGE_SIZE, total)
        assert f"of {total:,}" in text_of(app, "#table-status")
        labels = [str(n.label) for n in app.screen.query_one(ScopeTree)._walk()]
        assert any("payments-api" in lbl and str(total) in lbl for lbl in labels)
        assert any("infra-terraform" in lbl for lbl in labels), "every registered project is listed"
        assert app.selected_id is not None
        assert app.selected_id in text_of(app, "#detail-fields-text")


async def test_navigation_between_every_pane_and_help(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, cls in (
            ("2", DecayScreen),
            ("3", ConsolidationScreen),
            ("4", ContradictionsScreen),
            ("5", ConsoleScreen),
            ("alt+6", InjectionScreen),
            ("1", MemoriesScreen),
        ):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, cls), key
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, MemoriesScreen)


async def test_tree_node_filters_the_table(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(ScopeTree)
        node = next(
            n
            for n in tree._walk()
            if n.data is not None
            and n.data.scope == "project"
            and n.data.project == demo_env.project
            and n.data.memory_type == "procedural"
            and n.data.status is None
        )
        tree.select_node(node)
        await settle(pilot)
        expected = demo_service.list_memories(
            scope="project", project=demo_env.project, memory_type="procedural", limit=1
        ).total
        t = table(app)
        assert t.row_count == expected
        assert {t.get_cell(k, "type").plain for k in t.rows} == {"procedural"}


async def test_filter_as_you_type(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"redis")
        await settle(pilot)
        t = table(app)
        assert 0 < t.row_count < 20
        for key in t.rows:
            assert "redis" in app.screen.rows[key.value.split("#")[0]].content.lower()
        assert "filter 'redis'" in text_of(app, "#table-status")


async def test_hybrid_search_shows_recall_scores(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.press(*"how do I run the tests", "enter")
        await settle(pilot)
        t = table(app)
        assert t.row_count > 0
        assert [c.label.plain for c in t.columns.values()][:4] == ["Score", "Fused", "BM25#", "Vec#"]
        scores = [float(t.get_row_at(i)[0].plain) for i in range(t.row_count)]
        assert scores == sorted(scores, reverse=True)
        assert "recall" in text_of(app, "#table-status")
        # Looking is not using: a search from the TUI does not strengthen what it shows.
        first = app.screen.rows[next(iter(t.rows)).value.split("#")[0]]
        assert demo_service.get(first.id).access_count == first.access_count
        await pilot.press("escape")
        await settle(pilot)
        assert [c.label.plain for c in t.columns.values()][0] == "Content"


async def test_edit_then_undo(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        before = demo_service.get(mid)
        await pilot.press("e")
        assert isinstance(app.screen, EditMemoryScreen)
        imp = app.screen.query_one("#edit-importance", Input)
        imp.value = "0.99"
        app.screen.query_one("#edit-tags", Input).value = "refunds, reviewed"
        await pilot.press("ctrl+s")
        await settle(pilot)
        after = demo_service.get(mid)
        assert after.importance == pytest.approx(0.99)
        assert after.tags == ["refunds", "reviewed"]
        await pilot.press("u")
        await settle(pilot)
        undone = demo_service.get(mid)
        assert undone.importance == pytest.approx(before.importance)
        assert undone.tags == before.tags


async def test_edit_refuses_bad_importance(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        app.screen.query_one("#edit-importance", Input).value = "lots"
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, EditMemoryScreen), "a bad input keeps the dialog open"
        assert "not a number" in str(app.screen.query_one("#edit-error", Static).render())


async def test_forget_asks_first_and_can_be_undone(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        before = demo_service.get(mid)
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert demo_service.get(mid).status == before.status, "cancel changes nothing"
        await pilot.press("d")
        await pilot.press("y")
        await settle(pilot)
        gone = demo_service.get(mid)
        assert gone.status == "archived", "forget is a soft delete: archived, restorable"
        assert gone.content == before.content
        await pilot.press("u")
        await settle(pilot)
        back = demo_service.get(mid)
        assert back.content == before.content
        assert back.status == before.status
        assert back.tags == before.tags


async def test_archive_then_leaving_the_screen_drops_undo(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        await pilot.press("a", "y")
        await settle(pilot)
        assert demo_service.get(mid).status == "archived"
        assert len(app.screen.undo) == 1
        await pilot.press("2")
        await open_pane(pilot, "1")
        assert len(app.screen.undo) == 0
        await pilot.press("u")
        await settle(pilot)
        assert demo_service.get(mid).status == "archived"


async def test_approve_a_consolidation(demo_service: Any, demo_env: DemoEnv) -> None:
    items = demo_service.list_consolidations(project=demo_env.project)
    assert items, f"the demo must queue consolidations for review ({demo_env.organise})"
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "3")
        first = app.screen.current
        assert first is not None and first.id in {i.id for i in items}
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot, 5)
        assert app.last_error is None, app.last_error
        pending = {i.id for i in demo_service.list_consolidations(project=demo_env.project)}
        assert first.id not in pending
        result = str(app.screen.query_one("#consolidation-result", Static).render())
        assert "Approved" in result and "Originals now" in result


async def test_resolve_a_contradiction_keep_a(demo_service: Any, demo_env: DemoEnv) -> None:
    items = demo_service.list_contradictions(project=demo_env.project)
    assert items, f"the demo must flag contradictions ({demo_env.organise})"
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "4")
        c = app.screen.current
        assert c is not None
        await pilot.press("A", "y")
        await settle(pilot, 5)
        assert app.last_error is None, app.last_error
        loser = demo_service.get(c.b.id)
        assert loser.status == "superseded"
        assert loser.invalid_at is not None, "the loser is invalidated with a timestamp, not deleted"
        assert demo_service.get(c.a.id).status != "superseded"


async def test_console_runs_a_read_query(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        assert "2 statements, read-only" in text_of(app, "#console-verdict")
        await pilot.press("ctrl+r")
        await settle(pilot, 5)
        assert app.last_error is None, app.last_error
        from textual.widgets import TabPane

        panes = list(app.screen.query(TabPane))
        assert len(panes) == 2, "one result tab per statement"
        assert "rows" in str(app.screen.query_one("#console-results").border_title)


async def test_console_refuses_a_forbidden_query(demo_service: Any, demo_env: DemoEnv) -> None:
    calls: list[str] = []
    original = demo_service.run_query

    def spy(*a: Any, **k: Any) -> Any:
        calls.append(a[0] if a else k.get("surql", ""))
        return original(*a, **k)

    demo_service.run_query = spy
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        editor = app.screen.query_one("#console-editor")
        editor.text = "DELETE memory WHERE importance < 0.5;"
        await pilot.pause(0.05)
        verdict = text_of(app, "#console-verdict")
        assert "refused" in verdict and "statement 1" in verdict
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert calls == [], "a refused query never reaches the service"
        before = demo_service.list_memories(scope="project", project=demo_env.project, limit=1).total
        assert before > 0


async def test_console_keys_work_while_typing_in_the_editor(demo_service: Any, demo_env: DemoEnv) -> None:
    """f2 (allow writes) and f3 (history) work from the editor; f6/f7 stay the editor's select line / all."""
    from engram_tui.screens.dialogs import ConfirmScreen

    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "5")
        editor = app.screen.query_one("#console-editor")
        editor.focus()
        await pilot.pause(0.05)
        await pilot.press("f7")
        await settle(pilot)
        assert app.focused is editor and editor.selected_text == editor.text, "f7 selects all in the editor"
        await pilot.press("f2")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen), "f2 in the editor asks to allow writes"
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("f3")
        await settle(pilot)
        assert app.focused is not editor and app.focused.id == "console-history"


async def test_injection_preview_matches_the_service(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "6")
        expected = demo_service.injection_context(project=demo_env.project, session=demo_env.session)
        assert app.screen.query_one("#injection-text").text == expected.text
        assert f"{expected.tokens:,}" in text_of(app, "#injection-status")


async def test_palette_lists_every_pane_action(demo_service: Any, demo_env: DemoEnv) -> None:
    from engram_tui.commands import COMMANDS

    for name, _mode, action, _help in COMMANDS:
        if action is None:
            continue
        base = action.split("(")[0]
        screen_cls = {
            "memories": MemoriesScreen,
            "decay": DecayScreen,
            "consolidation": ConsolidationScreen,
            "contradictions": ContradictionsScreen,
            "console": ConsoleScreen,
            "injection": InjectionScreen,
        }[_mode]
        assert hasattr(screen_cls, f"action_{base}"), name


class BrokenService:
    """Answers nothing: every call fails the way an unreachable daemon does."""

    def __getattr__(self, name: str) -> Any:
        def fail(*a: Any, **k: Any) -> Any:
            raise ConnectionRefusedError("[Errno 111] Connection refused")

        return fail


async def test_unreachable_daemon_is_a_message_not_a_traceback(demo_env: DemoEnv) -> None:
    app = make_app(BrokenService(), demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "unreachable" in (app.last_error or "")
        assert "Could not load memories" in text_of(app, "#table-status")
        for key in ("2", "3", "4", "5", "alt+6", "1"):
            await pilot.press(key)
            await settle(pilot)
        assert app.is_running


async def test_through_the_real_daemon(demo_env: DemoEnv) -> None:
    """The same app through RemoteService, against a real `engram serve` on the demo data."""
    from engram_core.wire.client import connect

    client = connect(demo_env.home, timeout=90)
    try:
        from engram_tui.app import EngramApp

        # No session: the demo's was started on the frozen 2025 clock, and a daemon on the real clock ends it as
        # stale when it starts (the service's stale-session recovery), so it is no live session there.
        app = EngramApp(client, project=demo_env.project, offer_demo=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, 5)
            assert app.last_error is None, app.last_error
            total = client.list_memories(scope="project", project=demo_env.project, limit=1).total
            assert f"of {total:,}" in text_of(app, "#table-status")
            await pilot.press("slash", *"redis")
            await settle(pilot, 5)
            assert 0 < table(app).row_count < 20
            await pilot.press("escape")  # clears the filter: the list starts again at its first row
            await settle(pilot, 5)
            mid = app.selected_id
            await pilot.press("a", "y")
            await settle(pilot, 5)
            assert client.get(mid).status == "archived"
            await pilot.press("u")
            await settle(pilot, 5)
            assert client.get(mid).status != "archived"
            await pilot.press("5", "ctrl+r")
            await settle(pilot, 5)
            assert app.last_error is None, app.last_error
            # The organise panes get plain JSON from the client (dates as strings): they must still render.
            for key in ("alt+2", "3", "4", "6"):
                await pilot.press(key)
                await settle(pilot, 5)
                assert app.last_error is None, (key, app.last_error)
    finally:
        try:
            client.shutdown()
        finally:
            client.close()
        # The next test restores the demo files the daemon may still be flushing: wait for it to exit. The client
        # started it and reaps it, so this returns when it exits (a zombie used to look alive to kill(pid, 0)).
        assert client.daemon_process is not None, "the client started this daemon"
        assert client.daemon_process.wait(timeout=60) == 0
