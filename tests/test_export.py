"""export → import is lossless: a user can back up, move machines and audit what is stored."""

from __future__ import annotations

from pathlib import Path

from engram_core.models import MemoryIn, MemoryRecord
from engram_core.service import EngramService


def test_export_then_restore_into_a_fresh_home_is_identical(
    service: EngramService, project_dir: Path, tmp_path: Path, embedder
) -> None:  # noqa: ANN001
    p = str(project_dir)
    a = service.store(
        MemoryIn(content="Builds use Bazel 7", tags=["build"], metadata={"k": [1, 2]}), project=p
    )
    service.store(MemoryIn(content="Prefer small PRs", scope="user", memory_type="procedural"), project=p)
    sess = service.start_session(project=p, claude_session_id="c1").session_key
    service.store(
        MemoryIn(content="Working on the flaky upload test", scope="session", memory_type="working"),
        session=sess,
    )
    service.recall("bazel build", project=p)  # access counts, status history, relevance move
    service.forget(
        service.store(MemoryIn(content="obsolete note"), project=p).memory.id,
        project=p,
        erase=True,
        confirm=True,
    )
    exported = service.export_memories(project=p)
    assert {r.scope.value for r in exported} == {"session", "project", "user"}
    assert all(r.embedding and len(r.embedding) == 384 for r in exported if r.status.value != "forgotten")

    lines = [r.model_dump(mode="json") for r in exported]  # what `engram export` writes as JSONL
    other_home, other_proj = tmp_path / "home2", tmp_path / "moved"
    (other_proj / ".git").mkdir(parents=True)
    with EngramService(other_home, embedder=embedder) as fresh:
        report = fresh.restore_memories(lines, project=str(other_proj))
        assert report.restored == len(lines) and not report.failed
        again = fresh.export_memories(project=str(other_proj))

        def strip(rs: list) -> list[dict]:
            return sorted(
                (r.model_dump(exclude={"database", "project_path"}) for r in rs), key=lambda d: d["id"]
            )

        assert strip(again) == strip(exported)
        hit = fresh.recall("bazel", project=str(other_proj)).hits[0]
        assert hit.memory.id == a.memory.id and hit.memory.metadata == {"k": [1, 2]}
        # Restoring twice replaces, never duplicates.
        assert fresh.restore_memories(lines, project=str(other_proj)).replaced == len(lines)


def test_restore_reports_bad_records_and_stores_nothing_of_them(
    service: EngramService, project_dir: Path
) -> None:
    p = str(project_dir)
    good = service.store(MemoryIn(content="keep me"), project=p).memory
    rec = service.export_memories(scope="project", project=p)[0].model_dump(mode="json")
    bad_type = {**rec, "id": "BAD1", "memory_type": "dream"}
    bad_imp = {**rec, "id": "BAD2", "importance": 7}
    extra = {**rec, "id": "BAD3", "surprise": True}
    report = service.restore_memories([bad_type, bad_imp, extra], project=p)
    assert report.restored == 0 and [f.line for f in report.failed] == [1, 2, 3]
    assert [m.id for m in service.list_memories(project=p).items] == [good.id]
    assert MemoryRecord(**rec).id == good.id


def test_restore_redacts_secrets_in_a_foreign_file(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    service.store(MemoryIn(content="template"), project=p)
    rec = service.export_memories(scope="project", project=p)[0].model_dump(mode="json")
    sneaky = {
        **rec,
        "id": "SNEAKY1",
        "content": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 here",
        "content_hash": "x",
    }
    assert service.restore_memories([sneaky], project=p).restored == 1
    stored = service.get("SNEAKY1", project=p)
    assert "ghp_" not in stored.content and "[REDACTED:" in stored.content


def test_health_reports_stores_and_permissions(service: EngramService, project_dir: Path) -> None:
    service.store(MemoryIn(content="x"), project=str(project_dir))
    report = service.health()
    names = {c.name for c in report.checks}
    assert "permissions" in names and any(n.startswith("store project/") for n in names)
    assert report.ok, report
    (service.home / "user.db").chmod(0o755)
    bad = service.health()
    assert not bad.ok and "chmod" in next(c.fix for c in bad.checks if c.name == "permissions")


def test_export_pages_concatenate_to_the_whole_export(
    service: EngramService, project_dir: Path, monkeypatch
) -> None:  # noqa: ANN001
    from engram_core import backup

    p = str(project_dir)
    for i in range(5):
        service.store(MemoryIn(content=f"project note {i} about [/] and \\ paths 🚀"), project=p)
    for i in range(3):
        service.store(MemoryIn(content=f"user preference {i}", scope="user"), project=p)
    whole = service.export_memories(project=p)
    pages, after = [], None
    while page := service.export_memories(project=p, after=after, limit=2):
        assert len(page) <= 2
        pages.append(page)
        after = f"{page[-1].database}/{page[-1].id}"
    assert [r.id for pg in pages for r in pg] == [r.id for r in whole] and len(whole) == 8
    assert len(pages) == 4  # the pages cross from the project store into the user store
    # however few records are asked for, a page stops at the byte budget (but holds at least one)
    monkeypatch.setattr(backup, "EXPORT_PAGE_BYTES", 1)
    assert len(service.export_memories(project=p, limit=100)) == 1


def test_export_refuses_an_unknown_position(service: EngramService, project_dir: Path) -> None:
    import pytest

    from engram_core.api import EngramError

    with pytest.raises(EngramError, match="unknown export position"):
        service.export_memories(project=str(project_dir), after="nowhere/01ABC", limit=10)
