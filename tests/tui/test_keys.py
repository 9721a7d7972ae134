"""Key conventions (j/k, g/G, enter, esc, sort, zoom, tree) and a seeded random walk over every pane."""

from __future__ import annotations

import random
from typing import Any

from conftest import DemoEnv, make_app, open_pane, screen_lines, settle
from textual.widgets import DataTable, Input, TextArea

from engram_tui.app import EngramApp
from engram_tui.screens.console import EXAMPLE, ConsoleScreen
from engram_tui.screens.consolidation import ConsolidationScreen
from engram_tui.screens.dialogs import ConfirmScreen, EditMemoryScreen

SIZE = (160, 48)


def table(app: Any) -> DataTable:
    return app.screen.query_one("#memory-table", DataTable)


async def test_vim_moves_and_jumps(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        t = table(app)
        await pilot.press("j", "j")
        assert t.cursor_row == 2
        await pilot.press("k")
        assert t.cursor_row == 1
        await pilot.press("G")
        assert t.cursor_row == t.row_count - 1
        await pilot.press("g")
        assert t.cursor_row == 0


async def test_sort_goes_to_the_top_and_marks_the_column(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("G")
        await pilot.press("o")
        await settle(pilot)
        t = table(app)
        assert t.cursor_row == 0, "a new sort starts at its first row"
        labels = [c.label.plain for c in t.columns.values()]
        assert any(lbl.endswith(("↓", "↑")) for lbl in labels), labels
        sorted_label = next(lbl for lbl in labels if lbl.endswith(("↓", "↑")))
        assert sorted_label.startswith("Content"), "o moved the sort from Created to the next column"


async def test_a_sort_on_a_column_off_screen_is_shown(demo_service: Any, demo_env: DemoEnv) -> None:
    from dataclasses import replace

    app = make_app(demo_service, demo_env)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)

        async def shown(text: str) -> bool:
            await pilot.pause()  # painted
            return any(text in line for line in screen_lines(app))

        # Created has no column at all; Last access is off-screen at 80 columns. A deep tree selection makes the
        # status line long (where it used to say the order, cut off at 80 columns).
        app.screen.tq = replace(app.screen.tq, memory_type="episodic", status="consolidated")
        await settle(pilot)
        assert await shown("sorted by Created ↓")
        await pilot.press("O")
        await settle(pilot)
        assert await shown("sorted by Created ↑")
        for _ in range(7):  # created → content → strength → status → type → importance → access → last
            await pilot.press("o")
        await settle(pilot)
        assert app.screen.tq.order == "last_accessed_at"
        header = next(line for line in screen_lines(app) if "Content" in line and "Strength" in line)
        assert "Last" not in header, "the column is off-screen at 80 columns (else this test proves nothing)"
        assert await shown("sorted by Last access ↑")
        await pilot.press("s", *"deploy", "enter")
        await settle(pilot)
        assert await shown("ranked by recall score")


async def test_escape_clears_the_filter(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        total = table(app).row_count
        await pilot.press("slash", *"redis")
        await settle(pilot)
        assert table(app).row_count < total
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen.query_one("#filter", Input).value == ""
        assert table(app).row_count == total


async def test_search_keeps_the_tree_filter(demo_service: Any, demo_env: DemoEnv) -> None:
    from dataclasses import replace

    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        screen.tq = replace(screen.tq, memory_type="procedural")
        await settle(pilot)
        await pilot.press("s", *"run the tests", "enter")
        await settle(pilot)
        await pilot.press("R")  # the refresh path ran recall without the tree's type once
        await settle(pilot)
        assert screen.hits
        assert {m.memory.memory_type for m in screen.hits.values()} == {"procedural"}


async def test_enter_confirms_and_the_hints_are_visible(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        labels = [str(b.label) for b in app.screen.query("Button")]
        assert any("[y/enter]" in lbl for lbl in labels) and any("[n/esc]" in lbl for lbl in labels), labels
        assert app.focused.id == "yes", "focus starts on the default action"
        await pilot.press("enter")
        await settle(pilot)
        assert demo_service.get(mid).status == "archived"


async def test_tree_toggles_and_zoom_maximises(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one("#scope-tree")
        assert not tree.display, "at 80 columns the tree starts folded away"
        content = table(app).columns[next(iter(table(app).columns))]
        assert content.width >= 24, "the content column keeps a readable width"
        await pilot.press("t")
        assert tree.display
        await pilot.press("t", "z")
        assert app.screen.maximized is table(app)
        await pilot.press("escape")
        assert app.screen.maximized is None
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        t = table(app)
        x = 0
        for key, col in t.columns.items():
            if key.value == "strength":
                assert x + col.get_render_width(t) <= t.size.width, "strength is on screen at 120 columns"
            x += col.get_render_width(t)


def burst(app: Any, keys: str) -> None:
    """Keys that arrive together, as a terminal delivers them after the UI thread was busy (a tree click loads a
    page, the detail and the status counts): each is posted before the one before it has been handled."""
    from textual import events

    names = {"/": "slash", " ": "space", "+": "plus"}
    for ch in keys:
        app.post_message(events.Key(names.get(ch, ch), ch))


async def test_keys_right_after_a_tree_click_reach_where_the_key_before_sent_them(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.screen.query_one("#scope-tree")
        await pilot.click("#scope-tree", offset=(8, 3))
        assert app.focused is tree
        burst(
            app, "/redis"
        )  # "/" moves the focus to the filter; "redis" was delivered to the tree (r, e: edit)
        await settle(pilot)
        assert app.screen is not None and not isinstance(app.screen, EditMemoryScreen), (
            "e opened the edit dialog"
        )
        assert app.screen.query_one("#filter", Input).value == "redis"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.click("#scope-tree", offset=(8, 4))
        burst(
            app, "5SELECT"
        )  # a pane switch, then text for the console's editor (the left pane's tree had it)
        await settle(pilot)
        assert isinstance(app.screen, ConsoleScreen)
        assert app.screen.query_one("#console-editor", TextArea).text == "SELECT" + EXAMPLE


async def test_a_terminal_shrunk_to_80_columns_folds_as_one_started_there(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        history = app.screen.query_one("#detail-history")
        assert history.display and history.region.width
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert app.has_class("narrow", "short")
        assert not app.screen.query_one("#scope-tree").display
        assert history.region.width == 0, "the detail keeps only the memory's own fields at 80 columns"
        await pilot.resize_terminal(*SIZE)
        await settle(pilot)
        assert not app.has_class("narrow") and history.region.width


async def test_consolidation_editor_has_an_escape_and_reject_asks(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    assert demo_service.list_consolidations(project=demo_env.project), "the demo must queue consolidations"
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "3")
        assert isinstance(app.screen, ConsolidationScreen)
        first = app.screen.current.id
        await pilot.press("e")
        assert isinstance(app.focused, TextArea)
        await pilot.press("escape")
        assert not isinstance(app.focused, TextArea), "esc leaves the proposal editor"
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen), "reject asks first"
        await pilot.press("n")
        await settle(pilot)
        assert first in {i.id for i in demo_service.list_consolidations(project=demo_env.project)}
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen), "after esc, a approves (it no longer types)"
        await pilot.press("n")


KEYS = [
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "alt+1",
    "alt+5",
    "j",
    "k",
    "g",
    "G",
    "down",
    "up",
    "enter",
    "escape",
    "tab",
    "shift+tab",
    "slash",
    "s",
    "x",
    "[",
    "]",
    "/",
    "\\",
    "e",
    "a",
    "r",
    "y",
    "n",
    "p",
    "P",
    "d",
    "u",
    "o",
    "O",
    "R",
    "t",
    "z",
    "+",
    "-",
    "A",
    "B",
    "K",
    "M",
    "ctrl+r",
    "f2",
    "f3",
    "f6",
    "f7",
    "f8",
    "question_mark",
    "pagedown",
    "ctrl+s",
    "space",
    "left",
    "right",
    "home",
    "end",
    "D",
]


async def random_walk(app: EngramApp, seed: int, presses: int) -> None:
    rng = random.Random(seed)
    async with app.run_test(size=rng.choice([(80, 24), (160, 48), (120, 32)])) as pilot:
        await settle(pilot)
        for i in range(presses):
            await pilot.press(rng.choice(KEYS))
            await pilot.pause(0.01)
            if i % 40 == 0:
                await settle(pilot, 2)
            assert app.is_running, f"the app stopped after key {i}"
        await settle(pilot)
    # run_test re-raises whatever killed the app; a crash inside a handler would also set this.
    assert app.return_code in (None, 0)


async def test_random_keys_on_the_demo(demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    app.load_demo = lambda: None  # D must not build a second demo here  # type: ignore[method-assign]
    await random_walk(app, seed=12, presses=300)


async def test_random_keys_on_hostile_text(tmp_path: Any, embedder: Any) -> None:
    from hostile import build_hostile

    from engram_core.service import EngramService

    svc = EngramService(tmp_path / "home", embedder=embedder)
    try:
        project = build_hostile(svc, tmp_path)
        app = EngramApp(svc, project=project, offer_demo=False)
        app.load_demo = lambda: None  # type: ignore[method-assign]
        await random_walk(app, seed=34, presses=300)
    finally:
        svc.close()
