"""TUI fixtures: the demo set built once per test session on a frozen clock, restored fresh for each test.

Building the demo costs ~40 s (a few hundred real embeddings plus the self-organising layer), so it is built
once into ``<tmp>/live``, copied aside, and every test gets the pristine copy back at the same absolute path
(the project registry stores absolute paths). Ids are made deterministic while building (ULIDs are time +
random) so snapshots are byte-stable.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

FROZEN_NOW = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _deterministic_ulids() -> Any:
    counter = itertools.count(1)
    base = int(FROZEN_NOW.timestamp() * 1000)

    def ulid(ts_ms: int | None = None) -> str:
        value = (base << 80) | next(counter)
        return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))

    return ulid


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
    from engram_core import service as service_mod
    from engram_core.clock import FrozenClock
    from engram_core.demo import build_demo

    root = tmp_path_factory.mktemp("tui-demo")
    live = root / "live"
    mp = pytest.MonkeyPatch()
    mp.setattr(service_mod, "ulid", _deterministic_ulids())
    try:
        svc = service_mod.EngramService(live / "home", embedder=embedder, clock=FrozenClock(FROZEN_NOW))
        report = build_demo(svc, live / "projects", FROZEN_NOW)
        svc.close()
    finally:
        mp.undo()
    shutil.copytree(live, root / "pristine")
    env = DemoEnv(root=live, home=live / "home", project=report.project_root,
                  other_project=report.other_project_root, session=report.session_key, organise=report.organise)
    yield root, env


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

    return EngramApp(service, project=env.project, session=env.session, clock=getattr(service, "__dict__", {}).get("clock"),
                     offer_demo=False, mask_db_times=True, **kwargs)


async def settle(pilot: Any, rounds: int = 3) -> None:
    """Let workers finish and their messages land (service calls run in threads)."""
    from textual.worker import WorkerCancelled

    for _ in range(rounds):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass  # an exclusive worker was replaced by a newer one: wait for that one on the next round
        await pilot.pause(0.05)
