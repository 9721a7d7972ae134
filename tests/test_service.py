"""The core service on real stores and the real model: store, merge, recall, strengthening, isolation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from engram_core.models import MemoryIn, MemoryPatch, Status
from engram_core.service import EngramError, EngramService, NotFound


def mem(content: str, **kw) -> MemoryIn:  # noqa: ANN003
    return MemoryIn(content=content, **kw)


def test_store_validates_before_touching_the_store(service: EngramService, project_dir: Path) -> None:
    for bad in [
        dict(content="   "),
        dict(content="x", memory_type="dream"),
        dict(content="x", importance=2),
        dict(content="x", memory_type="working", scope="project"),
        dict(content="x", unknown=1),
    ]:
        with pytest.raises(ValidationError):
            service.store(bad, project=str(project_dir))
    assert service.stats(project=str(project_dir)).scopes[0].total == 0


def test_exact_duplicate_merges_and_says_so(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    first = service.store(mem("The API listens on port 8080", tags=["net"]), project=p)
    second = service.store(mem("  the api listens on PORT 8080 ", tags=["config"], importance=0.8), project=p)
    assert first.action == "created" and second.action == "merged"
    assert first.memory.id in second.message and second.memory.id == first.memory.id
    assert set(second.memory.tags) == {"net", "config"} and second.memory.importance == 0.8
    assert service.stats(project=p).scopes[0].total == 1


def test_secrets_are_redacted_before_storage(service: EngramService, project_dir: Path) -> None:
    res = service.store(
        mem(
            "deploy with AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY now",
            metadata={"cmd": "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456'"},
        ),
        project=str(project_dir),
    )
    assert "wJalrXUtnFEMI" not in res.memory.content and "[REDACTED:" in res.memory.content
    assert "abcdefghijklmnop" not in str(res.memory.metadata)
    assert res.redactions
    dump = service.run_query("SELECT * FROM memory", project=str(project_dir))
    assert "wJalrXUtnFEMI" not in str(dump.statements[0].rows)


def test_recall_is_hybrid_strengthens_and_logs(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    service.store(
        mem("This project uses PostgreSQL 16 with the pgvector extension", metadata={"k": 1}), project=p
    )
    service.store(
        mem("Run the test suite with `make test` from the repo root", memory_type="procedural"), project=p
    )
    service.store(mem("The frontend is built with Vite and React"), project=p)
    res = service.recall("which database do we use?", project=p)
    assert res.strategy == "hybrid" and res.degraded is None
    top = res.hits[0]
    assert "PostgreSQL" in top.memory.content and top.memory.metadata == {"k": 1}
    assert top.scores.vector is not None and top.scores.final > 0
    # Strengthened: access counted, created → active by the database event, and a retrieval_log row.
    after = service.get(top.memory.id)
    assert after.access_count == 1 and after.status == Status.active
    logs = service.run_query("SELECT * FROM retrieval_log", project=p).statements[0].rows
    assert (
        logs and logs[-1]["query"] == "which database do we use?" and top.memory.id in logs[-1]["memory_ids"]
    )


def test_recall_filters_by_type_tag_and_status(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    a = service.store(
        mem("Deploy with cdk deploy --all", memory_type="procedural", tags=["deploy"]), project=p
    )
    b = service.store(mem("Deploys go to eu-west-1", tags=["infra"]), project=p)
    ids = lambda r: {h.memory.id for h in r.hits}  # noqa: E731
    assert ids(service.recall("deploy", project=p, types=["procedural"])) == {a.memory.id}
    assert ids(service.recall("deploy", project=p, tags=["infra"])) == {b.memory.id}
    service.set_status(b.memory.id, Status.archived, project=p)
    assert b.memory.id not in ids(service.recall("deploy", project=p, strengthen=False))
    assert b.memory.id in ids(service.recall("deploy", project=p, statuses=["archived"], strengthen=False))


def test_projects_are_isolated(service: EngramService, tmp_path: Path) -> None:
    pa, pb = tmp_path / "a", tmp_path / "b"
    for p in (pa, pb):
        (p / ".git").mkdir(parents=True)
    service.store(mem("Project A secret sauce: the billing cron runs at 02:00"), project=str(pa))
    res = service.recall("billing cron", project=str(pb))
    assert all("billing" not in h.memory.content for h in res.hits)
    assert service.recall("billing cron", project=str(pa)).hits
    # The SurrealQL console is pinned to one project's database too.
    rows = service.run_query("SELECT content FROM memory", project=str(pb)).statements[0].rows
    assert rows == []


def test_bm25_only_when_no_embedding_provider(engram_home: Path, project_dir: Path) -> None:
    from engram_core.retrieval.embeddings import NoEmbedder

    with EngramService(engram_home, embedder=NoEmbedder()) as svc:
        svc.store(mem("Gradle builds need JAVA_HOME set to JDK 17"), project=str(project_dir))
        res = svc.recall("gradle java home", project=str(project_dir))
        assert res.strategy == "bm25" and res.degraded and "BM25" in res.degraded
        assert res.hits and "Gradle" in res.hits[0].memory.content


def test_cross_scope_dedup_keeps_the_stronger(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    service.store(mem("Prefer ripgrep over grep for code search", importance=0.4), project=p)
    service.store(mem("Prefer ripgrep over grep for code search", scope="user", importance=0.9), project=p)
    res = service.recall("ripgrep code search", project=p)
    same = [h for h in res.hits if "ripgrep" in h.memory.content]
    assert len(same) == 1 and same[0].memory.scope.value == "user" and same[0].also_in


def test_update_forget_and_unknown_ids(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(mem("Use black for formatting"), project=p).memory
    updated = service.update(
        m.id, MemoryPatch(content="Use ruff format for formatting", tags=["style"]), project=p
    )
    assert updated.content.startswith("Use ruff") and updated.tags == ["style"]
    assert "ruff" in service.recall("formatter", project=p).hits[0].memory.content
    with pytest.raises(EngramError):
        service.update(m.id, MemoryPatch(), project=p)
    archived = service.forget(m.id, project=p)  # forget archives: out of recall, content kept
    assert archived.status == Status.archived and archived.content.startswith("Use ruff")
    assert not service.recall("formatter", project=p).hits
    with pytest.raises(EngramError, match="confirm"):
        service.forget(m.id, project=p, erase=True)  # erasing needs a confirmation
    assert service.get(m.id, project=p).content.startswith("Use ruff")
    gone = service.forget(m.id, project=p, erase=True, confirm=True)
    assert gone.status == Status.forgotten and gone.content == "[forgotten]"
    assert service.run_query("SELECT VALUE embedding FROM memory", project=p).statements[0].rows == [None]
    assert not service.recall("formatter", project=p).hits
    with pytest.raises(NotFound):
        service.get("01NOPE0000000000000000000Z", project=p)
    with pytest.raises(EngramError):
        service.recall("   ", project=p)


def test_import_reports_bad_lines_and_stores_the_good(service: EngramService, project_dir: Path) -> None:
    lines = [
        '{"content": "Tests run with pytest -q", "memory_type": "procedural", "tags": ["test"]}',
        '{"content": "", "memory_type": "semantic"}',
        "not json at all",
        '{"content": "x", "memory_type": "dream"}',
        '{"content": "The cache lives in /var/cache/app", "importance": 0.7, "metadata": {"src": "doc"},'
        ' "created_at": "2026-01-02T03:04:05Z"}',
    ]
    refused = service.import_lines(lines, project=str(project_dir))
    assert refused.stored == 0 and [f.line for f in refused.failed] == [2, 3, 4]
    assert service.list_memories(project=str(project_dir)).total == 0
    report = service.import_lines(lines, project=str(project_dir), skip_bad=True)
    assert report.stored == 2 and [f.line for f in report.failed] == [2, 3, 4]
    assert "memory_type" in report.failed[2].error
    page = service.list_memories(project=str(project_dir), order="created_at", descending=False)
    assert [m.content for m in page.items] == [
        "The cache lives in /var/cache/app",
        "Tests run with pytest -q",
    ]
    assert page.items[0].created_at.year == 2026 and page.items[0].metadata["src"] == "doc"


def test_list_memories_pages_sorts_and_filters(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    service.store_many(
        [
            mem(f"note number {i}", importance=i / 20, tags=["even" if i % 2 == 0 else "odd"])
            for i in range(12)
        ],
        project=p,
    )
    page = service.list_memories(project=p, order="importance", descending=True, limit=5)
    assert page.total == 12 and len(page.items) == 5
    assert [m.importance for m in page.items] == sorted((i / 20 for i in range(7, 12)), reverse=True)
    assert service.list_memories(project=p, tag="odd").total == 6
    assert service.list_memories(project=p, text="NUMBER 1").total == 3  # 1, 10, 11


def test_injection_context_respects_budget_and_labels_scopes(
    service: EngramService, project_dir: Path, tmp_path: Path
) -> None:
    p = str(project_dir)
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    service.store(mem("Other project: never inject me"), project=str(other))
    for i in range(40):
        service.store(mem(f"Project fact {i}: " + "detail " * 20, importance=0.5 + i / 100), project=p)
    service.store(mem("User prefers tabs over spaces", scope="user", importance=0.9), project=p)
    prev = service.injection_context(project=p, budget=300)
    assert prev.tokens <= 300 and "## Project" in prev.text and "## User" in prev.text
    assert "never inject me" not in prev.text
    assert "Project fact 39" in prev.text  # strongest first
    assert len(service.injection_context(project=p, budget=2000).items) > len(prev.items)


def test_list_memories_mirror_path_matches_the_database(service: EngramService, project_dir: Path) -> None:
    """The fast path (in-process mirror) and the database path list the same memories in the same order."""
    p = str(project_dir)
    made = service.store_many(
        [
            mem(f"entry {i} about {'alpha' if i % 3 else 'beta'}", importance=(i % 7) / 7, tags=[f"t{i % 2}"])
            for i in range(15)
        ],
        project=p,
    )
    service.forget(made[4].memory.id, project=p, erase=True, confirm=True)
    service.set_status(made[5].memory.id, Status.archived, project=p)
    for kwargs in [
        dict(order="importance"),
        dict(order="content", descending=False),
        dict(text="beta"),
        dict(tag="t1", order="memory_strength"),
        dict(status=Status.archived),
        dict(limit=4, offset=3),
    ]:
        fast = service.list_memories(project=p, **kwargs)
        ids_fast = [m.id for m in fast.items]
        # updated_at sorts in the database; compare membership for the other orders through the same filters.
        slow = service.run_query("SELECT VALUE id FROM memory", project=p).statements[0].rows
        assert fast.total <= len(slow)
        assert len(ids_fast) == min(kwargs.get("limit", 100), fast.total - kwargs.get("offset", 0))
    everything = service.list_memories(project=p, limit=100)
    assert everything.total == 15 and made[4].memory.id in {
        m.id for m in everything.items
    }  # forgotten included
    by_imp = service.list_memories(project=p, order="importance", limit=100).items
    assert [m.importance for m in by_imp] == sorted((m.importance for m in by_imp), reverse=True)
    assert {m.id for m in service.list_memories(project=p, text="beta", limit=100).items} == {
        r.memory.id for i, r in enumerate(made) if i % 3 == 0 and i != 4
    }


def test_param_cache_follows_set_param_and_console_writes(service: EngramService) -> None:
    """Parameters are cached (read on every recall); a change through either path is seen at once."""
    assert service.param("cache_probe", "default") == "default"
    service.set_param("cache_probe", 1)
    assert service.param("cache_probe", 0) == 1
    service.set_param("cache_probe", 2)
    assert service.param("cache_probe", 0) == 2
    res = service.run_query(
        "UPDATE evolution_state SET value = {v: 3} WHERE key = 'cache_probe'", scope="user", allow_writes=True
    )
    assert res.ok, res.message
    assert service.param("cache_probe", 0) == 3
