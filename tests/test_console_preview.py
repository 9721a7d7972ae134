"""Console writes are previewed before they run (issue #30): which statements change rows, whether a WHERE bounds
them, and how many rows they would touch now. Contradictions have a true total."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engram_core.validator import write_shapes


def test_write_shapes_read_targets_and_conditions() -> None:
    shapes = write_shapes(
        "SELECT * FROM memory; UPDATE memory SET content = 'a WHERE b' ;\n"
        "DELETE FROM memory WHERE importance < 0.2 RETURN BEFORE; UPSERT ONLY memory:abc SET x = 1;"
        "-- DELETE memory WHERE x\nCREATE memory SET content = 'x'"
    )
    assert [(s.index, s.verb, s.target, s.where) for s in shapes] == [
        (1, "UPDATE", "memory", None),  # the WHERE is inside a string
        (2, "DELETE", "memory", "importance < 0.2"),
        (3, "UPSERT", "memory:abc", None),
    ]


def test_preview_counts_the_rows_a_write_would_touch(tmp_path: Path, embedder: Any) -> None:
    from engram_core.models import MemoryIn
    from engram_core.service import EngramService

    (tmp_path / "p" / ".git").mkdir(parents=True)
    project = str(tmp_path / "p")
    svc = EngramService(tmp_path / "home", embedder=embedder)
    try:
        svc.store_many(
            [MemoryIn(content=f"fact number {i} about the build", importance=i / 10) for i in range(10)],
            project=project,
        )
        previews = svc.preview_write(
            "DELETE memory WHERE importance < 0.3; UPDATE memory SET importance = 1; SELECT * FROM memory",
            project=project,
        )
        assert [(p.verb, p.bounded, p.rows) for p in previews] == [("DELETE", True, 3), ("UPDATE", False, 10)]
        assert svc.list_memories(scope="project", project=project).total == 10, "nothing was written"
        assert svc.count_contradictions(project=project).open == len(svc.list_contradictions(project=project))
    finally:
        svc.close()


def test_stats_counts_from_the_mirror_match_the_database(tmp_path: Path, embedder: Any) -> None:
    """count_by counts the mirror (every memory but forgotten and superseded) plus an indexed query for those:
    the same figures as GROUP BY over the whole table, which took ~3 s at 100k."""
    from engram_core.models import MemoryIn, MemoryType, Status
    from engram_core.service import EngramService

    (tmp_path / "p" / ".git").mkdir(parents=True)
    project = str(tmp_path / "p")
    svc = EngramService(tmp_path / "home", embedder=embedder)
    try:
        types = [MemoryType.semantic, MemoryType.episodic, MemoryType.procedural]
        mems = [
            r.memory
            for r in svc.store_many(
                [
                    MemoryIn(
                        content=f"note {i} on the deploy pipeline step {i * 7}", memory_type=types[i % 3]
                    )
                    for i in range(12)
                ],
                project=project,
            )
        ]
        svc.set_status(mems[0].id, Status.archived, reason="test", project=project)
        svc.set_status(mems[1].id, Status.superseded, reason="test", project=project)
        svc.forget(mems[2].id, project=project, reason="test", erase=True, confirm=True)
        store = svc.scopes.primary(project)
        by_type = {
            r["memory_type"]: r["n"]
            for r in store.q1("SELECT memory_type, count() AS n FROM memory GROUP BY memory_type")
        }
        by_status = {
            r["status"]: r["n"] for r in store.q1("SELECT status, count() AS n FROM memory GROUP BY status")
        }
        assert store.memories.count_by() == (12, by_type, by_status)
        assert by_status.get("superseded") == 1 and by_status.get("forgotten") == 1
    finally:
        svc.close()
