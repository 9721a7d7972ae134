"""Fresh panes: changes from other panes and clients show without R, ages tick, slow calls show a busy sign,
a hung daemon is a message within seconds, and q quits at once even then."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DemoEnv, make_app, open_pane, settle
from textual.widgets import DataTable

from engram_core.models import MemoryPatch
from engram_tui.screens import memories as memories_mod
from engram_tui.widgets.modebar import ModeBar

SIZE = (160, 48)


async def wait_for(pilot: Any, condition: Any, seconds: float = 15.0) -> bool:
    """Wait until ``condition()`` holds (the revision poll runs every 2 s); False if it never does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await pilot.pause(0.1)
    return bool(condition())


def row_text(app: Any, mid: str) -> str:
    table = app.screen.query_one("#memory-table", DataTable)
    return table.get_row(mid)[0].plain


async def test_a_change_from_another_client_shows_without_refresh(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        # Another client (an agent through the daemon) edits the memory the person is looking at.
        threading.Thread(
            target=demo_service.update,
            args=(mid, MemoryPatch(content="Edited elsewhere [/] now")),
            kwargs={"project": demo_env.project},
        ).start()
        assert await wait_for(pilot, lambda: row_text(app, mid).startswith("Edited elsewhere [/] now"))
        assert await wait_for(
            pilot,
            lambda: "Edited elsewhere [/] now" in app.screen.query_one("#detail-fields-text").render().plain,
            5,
        ), "the detail follows"


async def test_returning_to_the_browser_shows_what_changed_meanwhile(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        mid = app.selected_id
        await open_pane(pilot, "2")
        demo_service.set_status(mid, "archived", reason="changed from another pane", project=demo_env.project)
        await open_pane(pilot, "1")
        table = app.screen.query_one("#memory-table", DataTable)
        assert table.get_row(mid)[2].plain == "archived"


async def test_ages_tick(demo_service: Any, demo_env: DemoEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memories_mod, "AGE_TICK_S", 0.2)
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#memory-table", DataTable)
        key = next(iter(table.rows))
        before = table.get_cell(key, "last").plain
        demo_service.clock.advance(days=3)
        assert await wait_for(pilot, lambda: table.get_cell(key, "last").plain != before, 5)


class SlowService:
    """The demo service, with list_memories held until released (a daemon busy with `engram maintain`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_memories(self, **kwargs: Any) -> Any:
        self.gate.wait(30)
        return self.inner.list_memories(**kwargs)


async def test_a_slow_call_shows_the_busy_sign(demo_service: Any, demo_env: DemoEnv) -> None:
    slow = SlowService(demo_service)
    app = make_app(slow, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        slow.gate.clear()
        await pilot.press("R")
        bar = app.screen.query_one(ModeBar)
        assert await wait_for(pilot, lambda: "waiting for Engram" in bar.busy, 5)
        slow.gate.set()
        await settle(pilot)
        assert await wait_for(pilot, lambda: bar.busy == "", 5)


async def test_decay_aggregates_are_not_reloaded_while_hidden(demo_service: Any, demo_env: DemoEnv) -> None:
    calls: list[str] = []
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=SIZE) as pilot:
        await open_pane(pilot, "2")
        decay = app.screen
        await open_pane(pilot, "1")
        decay.load_aggregates = lambda: calls.append("load")  # type: ignore[method-assign]
        decay._tick_aggregates()
        assert calls == [], "a hidden decay pane costs the daemon nothing"


HANG_S = 60.0


async def test_a_hung_daemon_is_a_message_in_seconds_and_q_quits_at_once(
    light_daemon: Any, tmp_path: Path
) -> None:
    from engram_core.wire.client import RemoteService
    from engram_tui.app import EngramApp

    light_daemon.start()
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    client = RemoteService(light_daemon.home, start=False, request_timeout=2.0).connect()
    for text in ("a memory [/] before the hang", "another one, dict[str, int]"):
        client.store({"content": text, "scope": "project"}, project=str(project))
    pid = light_daemon.proc.pid
    app = EngramApp(client, project=project, offer_demo=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            os.kill(pid, signal.SIGSTOP)
            await pilot.press("R")
            assert await wait_for(pilot, lambda: "unreachable" in (app.last_error or ""), 10), app.last_error
            client.request_timeout = HANG_S  # now a call hangs for a minute: quitting must not wait for it
            await pilot.press("R")
            await pilot.pause(2.5)  # a change poll is now stuck behind the hung call too
            table = app.screen.query_one("#memory-table", DataTable)
            row = table.cursor_row
            t_key = time.monotonic()
            await pilot.press("j" if row == 0 else "k")
            # Bounds relative to the hang (60 s), not to a fast machine: were the key or q waiting for the
            # hung call, they would take the whole minute; at load 10 an answered key took 2.8 s.
            assert table.cursor_row != row and time.monotonic() - t_key < HANG_S / 3, (
                "keys work while it hangs"
            )
            t0 = time.monotonic()
            await pilot.press("q")
        assert time.monotonic() - t0 < HANG_S / 3
    finally:
        os.kill(pid, signal.SIGCONT)
        client.close()
