"""Issue #30: 80×24 as a first-class size, every memory reachable from the table, focus conventions, help, palette.

Each check runs at 80×24 and at 160×48.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import DemoEnv, make_app, screen_lines, settle
from textual.widgets import DataTable, Input

from engram_tui.screens import memories
from engram_tui.screens.help import HelpScreen
from engram_tui.screens.memories import fit_columns

SIZES = [(80, 24), (160, 48)]


@asynccontextmanager
async def opened(size: tuple[int, int], service: Any, env: DemoEnv) -> AsyncIterator[tuple[Any, Any]]:
    """The app on the demo at ``size``, its first page and tree loaded."""
    app = make_app(service, env)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield app, pilot


async def press(pilot: Any, *keys: str) -> None:
    """Press the keys, then wait until every call they started has answered."""
    await pilot.press(*keys)
    await settle(pilot)


def table(app: Any) -> DataTable:
    return app.screen.query_one("#memory-table", DataTable)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
async def test_memories_rows_columns_and_titles(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with opened(size, demo_service, demo_env) as (app, pilot):
        t = table(app)
        shown_rows = t.scrollable_content_region.height - 1  # minus the header row
        assert shown_rows >= (12 if size == (80, 24) else 20), shown_rows
        # No horizontal scrollbar: the columns fit the table, and the content column takes what they leave.
        assert not t.show_horizontal_scrollbar
        assert t.virtual_size.width <= t.scrollable_content_region.width
        widths = {c.key.value: c.width for c in t.columns.values()}
        assert widths["content"] >= 28
        # Numbers are never cut: each column kept shows its values whole.
        for i in range(min(5, t.row_count)):
            row = t.get_row_at(i)
            for key, cell in zip(widths, row, strict=True):
                text = cell.plain if hasattr(cell, "plain") else str(cell)
                if key != "content":
                    assert len(text) <= widths[key], (key, text)
        text = "\n".join(screen_lines(app))
        assert "Memories · sorted by" in text and "Memory" in text
        assert "of 182" in text, "the total shows (status line or the table's border)"
        # Filter and search share one line.
        f, s = app.screen.query_one("#filter"), app.screen.query_one("#search")
        assert f.region.y == s.region.y and f.region.height == 1


def test_columns_drop_whole_by_priority() -> None:
    keys, width = fit_columns(77, search=False)
    assert keys[:3] == ["content", "strength", "status"] and "scope" not in keys and width >= 28
    wide, wide_content = fit_columns(157, search=False)
    assert set(keys) < set(wide) and wide_content > width
    assert fit_columns(77, search=True)[0][0] == "score"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
async def test_G_reaches_the_last_memory_of_all(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memories, "PAGE_SIZE", 50)  # 182 memories: four pages
    async with opened(size, demo_service, demo_env) as (app, pilot):
        screen = app.screen
        t = table(app)
        assert screen.total == 182 and t.row_count == 50
        last = demo_service.list_memories(
            scope="project", project=demo_env.project, offset=181, limit=1
        ).items[0]
        await press(pilot, "G")
        assert screen.tq.offset == 150 and t.cursor_row == t.row_count - 1
        assert screen.current_id == last.id
        assert "182 of 182" in "\n".join(screen_lines(app))
        # Scrolling up past the page's first row fetches the page before, the cursor on its last row.
        await pilot.press(*["k"] * (t.row_count - 1))
        await press(pilot, "k")
        assert screen.tq.offset == 100 and t.cursor_row == 49
        await press(pilot, "j")
        assert screen.tq.offset == 150 and t.cursor_row == 0
        await press(pilot, "g")
        assert screen.tq.offset == 0 and t.cursor_row == 0


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
async def test_enter_and_down_in_the_filter_return_to_the_list(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with opened(size, demo_service, demo_env) as (app, pilot):
        await press(pilot, "slash", *"refund", "enter")
        assert app.focused is table(app)
        await press(pilot, "j")
        assert app.screen.query_one("#filter", Input).value == "refund", "j moved in the list, not the filter"
        assert table(app).cursor_row == 1
        await pilot.press("slash", "end", "s", "down")  # focusing the box selects its text
        await settle(pilot)
        assert app.focused is table(app)
        assert app.screen.tq.text == "refunds"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
async def test_z_maximises_the_detail_with_a_visible_focus(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with opened(size, demo_service, demo_env) as (app, pilot):
        await press(pilot, "tab")
        focused = app.focused
        assert focused is not None and focused.id == "detail-fields"
        assert focused.styles.border_top[1] != app.screen.query_one("#detail-graph").styles.border_top[1], (
            "the focused column's border differs"
        )
        await press(pilot, "z")
        assert app.screen.maximized is app.screen.query_one("#detail")
        assert app.screen.query_one("#detail-history").display, "maximised, the detail shows every column"
        graph = app.screen.query_one("#detail-graph-text").render().plain
        assert "Relations" in graph and "z on the detail" not in graph, "the graph is loaded once it shows"
        await pilot.press("z")
        assert app.screen.maximized is None


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
async def test_help_is_context_first_filterable_and_scrolls(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    async with opened(size, demo_service, demo_env) as (app, pilot):
        await press(pilot, "4")
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(screen_lines(app))
        assert text.index("4 Contradictions (this pane)") < text.index("Everywhere")
        body = app.screen.query_one("#help-body")
        await press(pilot, "j", "j", "j")
        assert body.scroll_y == 3
        await press(pilot, "slash", *"select all")
        text = "\n".join(screen_lines(app)[:-1])  # the pane's footer shows below the dialog
        assert "ctrl+a" in text and "Keep A" not in text
        for key in ("tab, shift+tab", "enter", "j, k"):
            assert any(key in r for _t, rows in app.screen.groups for r, _d in rows), key
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_palette_entries_show_their_keys() -> None:
    from engram_tui.commands import key_for

    assert key_for("memories", "focus_filter") == "/"
    assert key_for("contradictions", "resolve('keep_a')") == "A"
    assert key_for("decay", None) == "2"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
@pytest.mark.parametrize(
    ("pane", "table_id", "text_cols"),
    [("3", "#consolidation-queue", ["proposal"]), ("4", "#contradictions-list", ["a", "b"])],
)
async def test_queue_and_contradiction_lists_fit_the_width(
    size: tuple[int, int],
    pane: str,
    table_id: str,
    text_cols: list[str],
    demo_service: Any,
    demo_env: DemoEnv,
) -> None:
    async with opened(size, demo_service, demo_env) as (app, pilot):
        await press(pilot, pane)
        t = app.screen.query_one(table_id, DataTable)
        assert t.row_count > 0
        assert t.virtual_size.width <= t.scrollable_content_region.width, "no column off-screen"
        widths = {c.key.value: c.width for c in t.columns.values()}
        assert all(widths[k] >= 20 for k in text_cols), widths


async def test_a_narrow_detail_does_not_ask_for_the_graph_it_does_not_show(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    calls: list[str] = []
    real = demo_service.memory_graph

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    demo_service.memory_graph = counted
    async with opened((80, 24), demo_service, demo_env) as (app, pilot):
        await press(pilot, "j", "j")
        assert calls == [], "below 110 columns the graph column is hidden: not asked for"
        await press(pilot, "tab", "z")
        assert calls == [app.screen.current_id]
