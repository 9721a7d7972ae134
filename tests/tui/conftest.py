"""TUI fixtures: the demo set built once per test session on a frozen clock, restored fresh for each test.

Building the demo costs a few seconds (a few hundred real embeddings plus the self-organising layer), so it is
built once into ``<tmp>/live`` (on a FrozenClock and SequentialIds given to the service: nothing is patched),
copied aside, and every test gets the pristine copy back at the same absolute path (the project registry stores
absolute paths), so snapshots are byte-stable.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

FROZEN_NOW = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class DemoEnv:
    root: Path
    home: Path
    project: str
    other_project: str
    session: str
    organise: str


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[tuple[Path, DemoEnv]]:
    from engram_core.clock import FrozenClock
    from engram_core.ids import SequentialIds
    from engram_core.service import EngramService
    from engram_tui.demo import build_demo

    root = tmp_path_factory.mktemp("tui-demo")
    live = root / "live"
    # A frozen clock and sequential ids: the same store (ids, organise output, recall scores) on every run,
    # whatever PYTHONHASHSEED is. Nothing is patched.
    clock = FrozenClock(FROZEN_NOW)
    svc = EngramService(live / "home", embedder=embedder, clock=clock, ids=SequentialIds(FROZEN_NOW))

    def travel(at: datetime) -> None:
        clock.at = at

    try:
        report = build_demo(svc, live / "projects", FROZEN_NOW, travel=travel)
    finally:
        svc.close()
    shutil.copytree(live, root / "pristine")
    yield (
        root,
        DemoEnv(
            root=live,
            home=live / "home",
            project=report.project_root,
            other_project=report.other_project_root,
            session=report.session_key,
            organise=report.organise,
        ),
    )


def restore(template: tuple[Path, DemoEnv]) -> DemoEnv:
    root, env = template
    shutil.rmtree(env.root, ignore_errors=True)
    shutil.copytree(root / "pristine", env.root)
    return env


@pytest.fixture
def demo_env(demo_template: tuple[Path, DemoEnv], monkeypatch: pytest.MonkeyPatch) -> DemoEnv:
    env = restore(demo_template)
    monkeypatch.setenv("ENGRAM_HOME", str(env.home))
    return env


@pytest.fixture
def demo_service(demo_env: DemoEnv, embedder: Any) -> Iterator[Any]:
    """An in-process service on a fresh copy of the demo set, its clock frozen at FROZEN_NOW."""
    from engram_core.clock import FrozenClock
    from engram_core.service import EngramService

    svc = EngramService(demo_env.home, embedder=embedder, clock=FrozenClock(FROZEN_NOW))
    yield svc
    svc.close()


def make_app(service: Any, env: DemoEnv, **kwargs: Any) -> Any:
    from engram_tui.app import EngramApp

    return EngramApp(
        service,
        project=env.project,
        session=env.session,
        clock=getattr(service, "__dict__", {}).get("clock"),
        offer_demo=False,
        mask_db_times=True,
        **kwargs,
    )


async def settle(pilot: Any, rounds: int = 3) -> None:
    """Wait until no call has run for ``rounds`` consecutive checks (service calls run in threads, and a
    result often starts the next call: the tree loads after the first page, the detail after a selection)."""
    from textual.worker import WorkerCancelled, WorkerState

    quiet = 0
    for _ in range(400):
        # An exclusive worker replaced by a newer one is cancelled: wait for that one on the next round.
        with contextlib.suppress(WorkerCancelled):
            await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.05)
        busy = (
            any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers)
            or bool(getattr(pilot.app, "inflight", 0))
            or bool(getattr(pilot.app, "keys_pending", 0))
        )
        quiet = 0 if busy else quiet + 1
        if quiet >= rounds:
            return


async def open_pane(pilot: Any, key: str) -> None:
    """Wait for the app to be quiet, switch to pane ``key`` (1-6), and wait again."""
    await settle(pilot)
    await pilot.press(key)
    await settle(pilot)


def screen_lines(app: Any) -> list[str]:
    """The text on the terminal now, one string per row (what a person sees, cut where the screen cuts it)."""
    return ["".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips()]
