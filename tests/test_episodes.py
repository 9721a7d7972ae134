"""Episode boundaries and the cross-boundary recall penalty, with the real embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from engram_core.models import MemoryIn
from engram_core.organise import episodes
from engram_core.retrieval.embeddings import LocalEmbedder
from engram_core.service import EngramService


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    e = LocalEmbedder()
    e.embed(["warm up"])
    return e


@pytest.fixture()
def env(
    tmp_path: Path, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[EngramService, str, str]]:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(home=tmp_path / "home", embedder=embedder, recover_sessions=False)
    sess = svc.start_session(project=str(proj)).session_key
    yield svc, str(proj), sess
    svc.close()


def put(svc: EngramService, p: str, s: str, text: str, **kw: object) -> str:
    return svc.store(MemoryIn(content=text, scope="session", **kw), project=p, session=s).memory.id  # type: ignore[arg-type]


def ep(svc: EngramService, s: str, key: str) -> str:
    m = svc.get(key, session=s)
    assert m.episode_id
    return m.episode_id


def test_explicit_boundary(env: tuple[EngramService, str, str]) -> None:
    svc, p, s = env
    a = put(svc, p, s, "Reading the importer code in src/importer/csv.py")
    b = put(svc, p, s, "The importer skips rows with an empty header")
    closed = episodes.end_episode(svc, s, "switching to the release checklist")
    c = put(svc, p, s, "The importer now logs skipped rows")
    assert ep(svc, s, a) == ep(svc, s, b) != ep(svc, s, c)
    assert (
        closed
        and closed[0].ended_at is not None
        and closed[0].end_reason == "switching to the release checklist"
    )
    latest = episodes.list_episodes(svc, session=s)[0]
    assert latest.boundary_type == "explicit" and latest.memory_count == 1


def test_time_gap_boundary(env: tuple[EngramService, str, str]) -> None:
    svc, p, s = env
    t0 = svc.now() - timedelta(hours=3)
    a = put(svc, p, s, "Investigating the slow dashboard query", created_at=t0)
    b = put(
        svc, p, s, "The dashboard query lacks an index on created_at", created_at=t0 + timedelta(minutes=10)
    )
    c = put(svc, p, s, "Added the index; dashboard loads in 200 ms", created_at=t0 + timedelta(minutes=55))
    assert ep(svc, s, a) == ep(svc, s, b) != ep(svc, s, c)
    assert episodes.list_episodes(svc, session=s)[0].boundary_type == "temporal"


def test_topic_shift_boundary(env: tuple[EngramService, str, str]) -> None:
    svc, p, s = env
    keys = [
        put(svc, p, s, t)
        for t in (
            "The OAuth login redirects to /callback with a state parameter",
            "OAuth state parameter mismatch breaks the login callback",
            "Store the OAuth state in the session cookie before redirecting to login",
        )
    ]
    shift = put(svc, p, s, "Kubernetes pod memory limits are 512Mi for the worker deployment")
    assert len({ep(svc, s, k) for k in keys}) == 1
    assert ep(svc, s, shift) != ep(svc, s, keys[0])
    assert episodes.list_episodes(svc, session=s)[0].boundary_type == "context_shift"


def test_task_completion_boundary(env: tuple[EngramService, str, str]) -> None:
    svc, p, s = env
    a = put(svc, p, s, "Refactoring the billing module to use Decimal everywhere")
    b = put(svc, p, s, "Billing refactor finished, all tests pass")
    c = put(svc, p, s, "Billing: next, look at rounding in invoices")
    assert ep(svc, s, a) == ep(svc, s, b) != ep(svc, s, c)
    assert episodes.list_episodes(svc, session=s)[0].boundary_type == "task_completion"


def test_cross_boundary_penalty_changes_ranking(env: tuple[EngramService, str, str]) -> None:
    svc, p, s = env
    old = put(svc, p, s, "The retry decorator in utils/retry.py wraps flaky HTTP calls with backoff")
    episodes.end_episode(svc, s, "new task")
    new = put(svc, p, s, "Timeouts on the billing API are 30 seconds")

    def order_and_scores() -> tuple[list[str], dict[str, float]]:
        hits = svc.recall(
            "retry decorator for flaky HTTP calls with backoff",
            session=s,
            project=p,
            strengthen=False,
            log=False,
        ).hits
        return [h.memory.id for h in hits], {h.memory.id: h.scores.final for h in hits}

    svc.set_param("episode_boundary_penalty", 1.0)
    plain_order, plain = order_and_scores()
    assert plain_order.index(old) < plain_order.index(new), "without the penalty the better match wins"
    svc.set_param("episode_boundary_penalty", 0.7)
    pen_order, pen = order_and_scores()
    assert pen_order.index(new) < pen_order.index(old), "the current episode's memory now comes first"
    assert pen[old] / plain[old] == pytest.approx(0.7, rel=1e-6)
    assert pen[new] == pytest.approx(plain[new], rel=1e-6)
    # Outside a session there is no current episode, so no penalty.
    hits = svc.recall(
        "retry decorator for flaky HTTP calls with backoff",
        project=p,
        scope="all",
        strengthen=False,
        log=False,
    ).hits
    assert all(h.memory.id != old or h.scores.final > 0 for h in hits)
