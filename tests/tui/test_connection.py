"""Issue #30 item 5: a standing connection marker in the header (answering / waiting N s / restarted at HH:MM /
no answer, data from HH:MM), and the busy sign whole at 80 columns. At 80×24 and 160×48."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import DemoEnv, make_app, screen_lines, settle

from engram_tui.widgets.modebar import ModeBar

SIZES = [(80, 24), (160, 48)]
IDS = ["80x24", "160x48"]


class FlakyService:
    """The demo service behind a switchable daemon: revision() fails while ``down``; list_memories waits while
    ``gate`` is clear; ``daemon_process`` changes when the client starts a new daemon."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False
        self.gate = threading.Event()
        self.gate.set()
        self.daemon_process: object | None = object()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def revision(self) -> int:
        if self.down:
            raise ConnectionRefusedError("the daemon is gone")
        return self.inner.revision()

    def list_memories(self, **kwargs: Any) -> Any:
        self.gate.wait(30)
        return self.inner.list_memories(**kwargs)


async def wait_for(pilot: Any, cond: Any, seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        if cond():
            return True
        await pilot.pause(0.05)
    return bool(cond())


def header(app: Any) -> str:
    return screen_lines(app)[0]


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_the_header_says_whether_the_data_is_current(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    svc = FlakyService(demo_service)
    app = make_app(svc, demo_env)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert await wait_for(pilot, lambda: "● answering" in header(app), 5), header(app)
        svc.down = True
        assert await wait_for(pilot, lambda: "✖ no answer · data from" in header(app), 6), header(app)
        svc.gate.clear()  # a call that now waits does not hide that the last one got no answer
        await pilot.press("R")
        await pilot.pause(1.5)
        assert "✖ no answer" in header(app), header(app)
        svc.gate.set()
        await settle(pilot)
        svc.down = False
        svc.daemon_process = object()  # the client started a new daemon
        assert await wait_for(pilot, lambda: "restarted at" in header(app), 6), header(app)
        svc.gate.clear()
        await pilot.press("R")
        assert await wait_for(pilot, lambda: "◌ waiting" in header(app), 5), header(app)
        bar = app.screen.query_one(ModeBar)
        line = screen_lines(app)[1]
        assert f"{bar.brief if size[0] < 110 else bar.busy}".strip() in line, line
        svc.gate.set()
        await settle(pilot)
