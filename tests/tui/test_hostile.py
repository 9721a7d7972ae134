"""Any text renders exactly as stored: property tests over arbitrary text, and every pane on a hostile store.

Coding memories are full of brackets; the TUI once read them as markup (``[/]`` crashed it, ``dict[str, int]``
showed as ``dict``). These tests fail if any pane, cell, card, notification or status line parses user text.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from conftest import settle
from hostile import HOSTILE, build_hostile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable, Static

from engram_tui.app import EngramApp
from engram_tui.fmt import short
from engram_tui.safe import markup, plain, visible

FRAGMENTS = [
    "[",
    "]",
    "[/]",
    "[b]",
    "[bold red]",
    "[/bold]",
    "\\",
    "\\[",
    "$x",
    "${arr[@]}",
    "[@click=app.quit]",
    "dict[str, int]",
    "[forgotten]",
    "🚀",
    "漢字",
    "\x1b[31m",
    "\x07",
    "\u2028",
    "\u2029",
    "\t",
    "\n",
    "\u202e",
    "x" * 500,
    "[link=x]",
    "[$accent]",
]
TEXTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), min_size=1, max_size=8).map(
    "".join
)


@given(TEXTS)
@settings(max_examples=300, deadline=None)
def test_markup_and_plain_show_any_text_literally(text: str) -> None:
    shown = visible(text)
    assert markup("[b]$v[/] · [dim]$v[/]", v=text).plain == f"{shown} · {shown}"
    assert plain(text).plain == visible(text, one_line=True)
    assert not any(c in shown for c in "\x1b\x07\u2028\u2029\u202e"), "invisible characters show as escapes"


@given(TEXTS)
@settings(max_examples=200, deadline=None)
def test_cards_and_details_show_any_text(text: str) -> None:
    from datetime import UTC, datetime

    from engram_core.models import Memory
    from engram_tui.widgets.cards import memory_card

    now = datetime(2025, 1, 1, tzinfo=UTC)
    m = Memory(
        id="01J",
        content=text,
        memory_type="semantic",
        scope="project",
        status="active",
        tags=[text[:20]],
        importance=0.5,
        half_life_days=7.0,
        created_at=now,
        last_accessed_at=now,
        updated_at=now,
    )
    assert visible(text) in memory_card(m, now).plain


def _visible_rows(table: DataTable) -> list[str]:
    return [
        str(getattr(table.get_row_at(i)[0], "plain", table.get_row_at(i)[0])) for i in range(table.row_count)
    ]


async def _walk_every_pane(app: EngramApp, pilot: Any, stored: dict[str, str]) -> None:
    """Every pane renders; the table and the detail pane show each stored text as stored."""
    await settle(pilot)
    assert app.last_error is None, app.last_error
    screen = app.screen
    table = screen.query_one("#memory-table", DataTable)
    rows = set(_visible_rows(table))
    for content in stored.values():
        if content != "[forgotten]":
            assert short(visible(content), screen._content_width) in rows, content
    for mid, content in stored.items():
        screen._select(mid)
        await settle(pilot, 2)
        detail = screen.query_one("#detail-fields-text", Static).render()
        assert visible(content) in detail.plain, content
    app.screen.query_one("#filter").value = next(iter(stored.values()))[:40]
    await settle(pilot)
    for key in ("2", "3", "4", "6", "5"):
        await pilot.press(key)
        await settle(pilot)
        assert app.last_error is None, (key, app.last_error)
    editor = app.screen.query_one("#console-editor")
    editor.text = "SELECT content FROM memory;\nSELECT 'a [/] b' AS x FROM ONLY memory LIMIT 1;"
    for _ in range(3):
        await pilot.press("ctrl+r")
        await settle(pilot)
    assert app.is_running


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    from engram_core.service import EngramService

    root = tmp_path_factory.mktemp("hostile")
    svc = EngramService(root / "home", embedder=embedder)
    project = build_hostile(svc, root)
    yield svc, project, root
    svc.close()


async def test_every_pane_on_the_hostile_store(hostile_store: Any) -> None:
    svc, project, _root = hostile_store
    page = svc.list_memories(scope="project", project=project, limit=100)
    stored = {m.id: m.content for m in page.items}
    app = EngramApp(svc, project=project, offer_demo=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await _walk_every_pane(app, pilot, stored)
        # The consolidation and contradiction panes show hostile sources too.
        await pilot.press("escape", "4")
        await settle(pilot)
        if svc.list_contradictions(project=project):
            card = app.screen.query_one("#side-a-text", Static).render().plain
            assert "[/]" in card
        for search in ("close tags [/] in jinja", "x[/]", "[bold]"):
            await pilot.press("1")
            await settle(pilot)
            app.screen.query_one("#search").value = search
            await app.screen.query_one("#search").action_submit()
            await settle(pilot)
            assert app.last_error is None, app.last_error
            assert search in app.screen.query_one("#table-status", Static).render().plain
        app.notify("a notification quoting [/] and [bold]x")
        await pilot.pause()
    assert app.return_code in (None, 0)


_counter = itertools.count()


@given(st.lists(TEXTS.filter(lambda t: t.strip()), min_size=1, max_size=3))
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_any_stored_text_renders_in_every_pane(hostile_store: Any, texts: list[str]) -> None:
    from engram_core.models import MemoryIn

    svc, _project, root = hostile_store
    proj = root / f"p{next(_counter)}"
    (proj / ".git").mkdir(parents=True)
    results = svc.store_many(
        [MemoryIn(content=t, memory_type="semantic", scope="project") for t in texts], project=str(proj)
    )
    # What the store keeps (redaction may rewrite a secret-looking run) is what must show.
    stored = {r.memory.id: svc.get(r.memory.id, project=str(proj)).content for r in results}

    async def run() -> None:
        app = EngramApp(svc, project=str(proj), offer_demo=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await _walk_every_pane(app, pilot, stored)

    asyncio.run(run())


def test_hostile_texts_cover_the_reported_cases() -> None:
    joined = "\n".join(HOSTILE)
    for case in ("[/]", "dict[str, int]", "${arr[@]}", "[bold red]", "[forgotten]", "\u2028", "\x1b"):
        assert case in joined
    assert Path(__file__).with_name("hostile.py").exists()
