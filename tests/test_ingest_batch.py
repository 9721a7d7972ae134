"""Batched ingest (issue #15): an import writes each chunk in a bounded number of engine round trips, and what
it builds (memories, graph, episodes, working-memory spills, contradictions) is what storing the same
memories one at a time builds, to the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engram_core import storage as store_mod
from engram_core.clock import FrozenClock
from engram_core.ids import SequentialIds
from engram_core.memory.writing import IMPORT_CHUNK
from engram_core.models import MemoryIn
from engram_core.organise import contradictions as cx
from engram_core.retrieval.search_index import SearchIndex
from engram_core.service import EngramService
from engram_core.storage import plain

T0 = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)

_FACTS = [
    "We use Jest as the test runner for the web app.",
    "For the web app we use Vitest; run it with `npm run test`.",
    "We use yarn for installing packages.",
    "We switched from yarn to pnpm to save disk space.",
    "The Postgres database listens on port 5432 in docker-compose.yml",
    "The Postgres database listens on port 5433 in docker-compose.yml",
    "Caching is enabled for the search endpoint",
    "Caching is not enabled for the search endpoint anymore",
    "The retry limit in src/jobs/worker.py is 3 attempts.",
    "The retry limit in src/jobs/worker.py is 5 attempts.",
    "The retry limit in src/jobs/worker.py is 7 attempts [brackets] and a \\ backslash.",
    "Deploy with `make deploy`; the token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 (rotate it).",
    "We use pytest for the backend tests.",
    "We use unittest for the backend tests.",
    "Redis listens on port 6379 for the cache.",
    "Redis listens on port 6380 for the cache.",
    "Task is done: all tests pass on the billing branch.",
    "Fixed the KeyError in src/api/routes.py by checking the session dict first.",
    "Fixed the KeyError in src/api/routes.py by checking the request dict first.",
]


def _lines() -> list[str]:
    """~150 memories: conflicting facts repeated in new words, exact duplicates inside one chunk and across
    chunks, a secret, brackets, emoji and a line separator, spread over more than one chunk."""
    out: list[dict[str, Any]] = []
    topics = ["auth", "billing", "search", "uploads", "the CLI", "migrations", "the cache", "CI"]
    for i in range(150):
        if i % 7 == 0:
            text = _FACTS[(i // 7) % len(_FACTS)]
        elif i % 11 == 0:
            text = f"{_FACTS[(i // 11) % len(_FACTS)]} Noted again in review {i % 3}."
        else:
            t = topics[i % len(topics)]
            text = (
                f"In {t}, the handler in src/{t.split()[-1]}/service_{i % 13}.py uses httpx with a "
                f"{i % 5 + 1}s timeout ✓\u2028see ticket #{i % 17}."
            )
        out.append(
            {
                "content": text,
                "memory_type": ["semantic", "episodic", "procedural"][i % 3],
                "importance": round(0.3 + (i % 7) / 10, 2),
                "tags": [f"t{i % 4}"],
            }
        )
    out[70] = dict(out[63])  # an exact duplicate inside one chunk (63 and 70 are both in the second)
    out[140] = dict(out[3])  # and one of an earlier chunk
    return [json.dumps(x) for x in out]


def _snapshot(svc: EngramService, proj: str) -> dict[str, Any]:
    st = svc.scopes.primary(proj)

    def rows(sql: str) -> list[Any]:
        return plain(st.q1(sql)) or []

    return {
        "memory": rows(
            "SELECT id, content, content_hash, search_text, episode_id, tags, importance, status, "
            "metadata, memory_type, created_at FROM memory ORDER BY id"
        ),
        "entity": rows("SELECT * OMIT embedding FROM entity ORDER BY id"),
        "relates_to": rows("SELECT * FROM relates_to ORDER BY id"),
        "mentions": rows("SELECT id, entities FROM memory WHERE entities != NONE ORDER BY id"),
        "episode": rows("SELECT * FROM episode ORDER BY id"),
        "contradiction_queue": rows("SELECT * FROM contradiction_queue ORDER BY id"),
        "mirror": sorted((k, lt.episode_id, lt.content_hash) for k, lt in st.summaries.items()),
    }


def _service(home: Path, embedder: Any) -> EngramService:  # noqa: ANN401
    return EngramService(home, embedder=embedder, clock=FrozenClock(T0), ids=SequentialIds(T0))


def test_an_import_in_chunks_builds_what_one_by_one_stores_build(tmp_path: Path, embedder: Any) -> None:  # noqa: ANN401
    lines = _lines()
    assert len(lines) > 2 * IMPORT_CHUNK
    got = {}
    for way in ("batch", "single"):
        proj = tmp_path / way / "proj"
        (proj / ".git").mkdir(parents=True)
        with _service(tmp_path / way / "home", embedder) as svc:
            if way == "batch":
                report = svc.import_lines(lines, project=str(proj))
                assert report.stored + report.merged == len(lines) and report.merged >= 2
            else:
                for line in lines:
                    svc.store(MemoryIn(**json.loads(line)), project=str(proj))
            got[way] = _snapshot(svc, str(proj))
    batch, single = got["batch"], got["single"]
    assert (
        len(batch["memory"]) == report.stored
        and batch["entity"]
        and batch["relates_to"]
        and batch["mentions"]
    )
    assert len(batch["episode"]) > 1 and batch["contradiction_queue"]
    for table in batch:
        assert batch[table] == single[table], table


def test_working_memory_spills_the_same_in_a_chunk(tmp_path: Path, embedder: Any) -> None:  # noqa: ANN401
    """The 7 ± 2 limit of a session's working memory, applied memory by memory inside one chunk."""
    mems = [
        MemoryIn(
            content=f"working note {i}: step {i} of the refactor of src/app/mod_{i}.py",
            memory_type="working",
            scope="session",
            importance=round(0.2 + (i * 37 % 10) / 20, 2),
        )
        for i in range(12)
    ]
    got = {}
    for way in ("batch", "single"):
        proj = tmp_path / way / "proj"
        (proj / ".git").mkdir(parents=True)
        with _service(tmp_path / way / "home", embedder) as svc:
            sess = svc.start_session(project=str(proj)).session_key
            if way == "batch":
                svc.store_many(mems, project=str(proj), session=sess)
            else:
                for m in mems:
                    svc.store(m, project=str(proj), session=sess)
            st = svc.scopes.session(sess, str(proj)).store
            got[way] = sorted((k, lt.memory_type) for k, lt in st.summaries.items())
    assert got["batch"] == got["single"]
    assert sum(t == "episodic" for _, t in got["batch"]) == 12 - 7


def test_an_import_costs_a_bounded_number_of_round_trips_per_chunk(
    service: EngramService, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not one query per memory: each chunk is its rows in one INSERT, its graph and episodes in one statement,
    its contradiction candidates in one more, its content fingerprints in one on the user store (schema 013), and
    the first chunk may load what a store loads once."""
    lines = _lines()
    service.import_lines(lines[:5], project=str(project_dir))  # the store is opened and loaded
    calls: list[str] = []
    run = store_mod.Connection.run

    def counting(self: store_mod.Connection, ns: str, db: str, sql: str, params: Any = None) -> Any:  # noqa: ANN401
        calls.append(sql)
        return run(self, ns, db, sql, params)

    monkeypatch.setattr(store_mod.Connection, "run", counting)
    store_mod.guard.check_raw_writes(
        False
    )  # its counter reads are round trips of the test, not of the import
    try:
        report = service.import_lines(lines[5:], project=str(project_dir))
    finally:
        store_mod.guard.check_raw_writes(True)
    chunks = -(-len(lines[5:]) // IMPORT_CHUNK)
    assert report.stored + report.merged == len(lines) - 5
    # A duplicate costs its merge and the re-read of the row it merged into (rare in an import); a chunk that
    # proposes near-duplicates one read of the queue, and each group or pair settled without asking its
    # writes (per finding, not per memory).
    counts = service.count_contradictions(project=str(project_dir))
    groups = service.count_consolidations(project=str(project_dir)).pending
    findings = counts.resolved_without_asking + groups
    assert len(calls) <= 4 * chunks + 2 * report.merged + chunks + 6 * findings, calls
    assert findings < (len(lines) - 5) // 4, "findings are the exception, not the rule, in this file"
    assert sum("project_fingerprint" in c for c in calls) == chunks


def test_a_chunk_finds_its_contradiction_neighbours_in_one_pass(
    service: EngramService, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import chunk's topic checks take every memory's nearest neighbours from one pass over the store's
    vectors, not one scan of the whole store per memory (which was most of an import's time from ~25,000
    memories); what they find is held equal to one-by-one writes above."""
    lines = _lines()
    service.import_lines(lines[:5], project=str(project_dir))
    passes: list[int] = []
    scans: list[int] = []
    many, one = SearchIndex.nearest_many, SearchIndex.vector

    def counted_many(self: SearchIndex, vecs: Any, k: int, skip: Any = ()) -> Any:  # noqa: ANN401
        passes.append(len(vecs))
        return many(self, vecs, k, skip)

    def counted_one(self: SearchIndex, vec: Any, k: int) -> Any:  # noqa: ANN401
        scans.append(k)
        return one(self, vec, k)

    monkeypatch.setattr(SearchIndex, "nearest_many", counted_many)
    monkeypatch.setattr(SearchIndex, "vector", counted_one)
    report = service.import_lines(lines[5:], project=str(project_dir))
    assert len(passes) == -(-len(lines[5:]) // IMPORT_CHUNK) and sum(passes) == report.stored
    assert scans == []


def test_a_memory_raises_at_most_a_few_topic_pairs(service: EngramService, project_dir: Path) -> None:
    """The contradiction queue stays bounded: a memory close to many that differ in a value raises at most its
    closest NEAR_MAX_PER_MEMORY pairs (here none: one slot with seven values is a template, CROWDED_SLOT), and a
    pair is queued once however often it is met."""
    p = str(project_dir)
    for n in range(6):
        service.store(
            MemoryIn(content=f"The worker pool in src/jobs/pool.py runs {n + 2} processes."), project=p
        )
    new = service.store(MemoryIn(content="The worker pool in src/jobs/pool.py runs 16 processes."), project=p)
    mine = [c for c in cx.list_contradictions(service, project=p) if new.memory.id in (c.a.id, c.b.id)]
    assert len(mine) <= cx.NEAR_MAX_PER_MEMORY
    total = len(cx.list_contradictions(service, project=p))
    assert total <= cx.NEAR_MAX_PER_MEMORY * 7
    service.store(
        MemoryIn(content="The worker pool in src/jobs/pool.py runs 16 processes."), project=p
    )  # merged
    assert len(cx.list_contradictions(service, project=p)) == total


def test_engram_import_requests_stay_small_whatever_the_lines() -> None:
    """`engram import` sends IMPORT_CHUNK lines a request (the daemon embeds one chunk while it writes the one
    before), but never a request near the socket's line limit: 256 lines of 100k characters would be 25 MB."""
    from engram_core.cli import transfer as commands
    from engram_core.wire.protocol import MAX_LINE

    lines = ["x" * 100_000] * 300 + ['{"content": "short"}'] * 600
    reqs = commands.import_requests(lines, commands.IMPORT_CHUNK)
    assert [ln for _, part in reqs for ln in part] == lines
    assert [start for start, _ in reqs] == [sum(len(p) for _, p in reqs[:i]) for i in range(len(reqs))]
    assert all(len(part) <= commands.IMPORT_CHUNK for _, part in reqs)
    assert all(
        sum(len(x) for x in part) <= commands.REQUEST_BYTES + 100_000 < MAX_LINE / 2 for _, part in reqs
    )
    assert len(reqs[-1][1]) < commands.IMPORT_CHUNK and len(reqs) > 300 * 100_000 // commands.REQUEST_BYTES


def test_engram_import_requests_are_sized_as_sent() -> None:
    """Escaping makes a control character 6 bytes on the wire: sized by characters, 2 MB of them was a 12 MB
    request, which the daemon refuses."""
    from engram_core.cli import transfer as commands
    from engram_core.wire.protocol import MAX_LINE, request

    lines = ["\x01" * 90_000 + " [/] 🧪"] * 60 + ['{"content": "short"}'] * 10  # a broken file: still checked
    reqs = commands.import_requests(lines, commands.CHECK_CHUNK)
    assert [ln for _, part in reqs for ln in part] == lines
    sizes = [
        len(request(1, "import_lines", {"lines": part, "first_line": start + 1})) for start, part in reqs
    ]
    assert max(sizes) < MAX_LINE and len(reqs) > 1
    assert commands.too_large_to_send(lines) == {}
    assert commands.too_large_to_send(["x", "\x01" * 1_500_000]) == {
        1: commands.wire_bytes("\x01" * 1_500_000)
    }


def test_the_progress_bar_says_the_rate_so_far_and_the_time_left_at_that_rate() -> None:
    from engram_core.cli.transfer import progress_rate

    assert progress_rate(256, 1000, 4.0) == "64 memories/s, 0:12 left"  # 744 left at 64/s: 11.6 s
    assert progress_rate(1000, 1000, 8.0) == "125 memories/s, 0:00 left"
    assert progress_rate(512, 100_000, 10.0) == "51 memories/s, 32:23 left"
    assert progress_rate(100, 100_000, 10.0) == "10 memories/s, 2:46:30 left"
    assert progress_rate(4000, 100_000, 2.0, checking=True) == "2,000 lines/s, 0:48 left"
