"""The engine's level-0 merge falls at a store's close, not at the next open (engine_levels.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from surrealdb import Surreal

from engram_core.storage import Connection, engine_levels


def _open_write_close(path: Path, i: int) -> None:
    conn = Connection.file(path)
    conn.run("project", "p", "CREATE type::record('note', $k) SET n = $n RETURN NONE", {"k": f"n{i}", "n": i})
    conn.close()


def _count(path: Path) -> int:
    conn = Connection.file(path)
    try:
        return conn.run("project", "p", "RETURN count(SELECT id FROM note)")[-1]
    finally:
        conn.close()


def test_every_close_leaves_level_0_below_the_merge_that_an_open_would_wait_for(tmp_path: Path) -> None:
    """Each close writes a level-0 table; without the merge at close, the fourth close left four and the next
    open merged them while its caller waited (0.6 s at 15k memories, 1.5 s at 100k)."""
    path = tmp_path / "project.db"
    seen = []
    for i in range(8):
        _open_write_close(path, i)
        tables = engine_levels.level0_tables(path)
        assert tables is not None
        seen.append(tables)
    assert max(seen) < engine_levels.LEVEL0_COMPACTS_AT, seen
    assert any(b < a for a, b in zip(seen, seen[1:], strict=False)), seen  # merged at a close
    assert _count(path) == 8


def test_the_trigger_is_the_engines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LEVEL0_COMPACTS_AT is where the engine itself merges at open: one table fewer opens without a merge, that
    many merge. A newer engine with another trigger fails here."""
    monkeypatch.setattr(engine_levels, "merge_due_at_open", lambda path: False)  # the engine on its own
    path = tmp_path / "project.db"
    trigger = engine_levels.LEVEL0_COMPACTS_AT
    i = 0
    while (engine_levels.level0_tables(path) or 0) < trigger - 1:
        _open_write_close(path, i)
        i += 1
    assert engine_levels.level0_tables(path) == trigger - 1
    Surreal(f"surrealkv://{path}").close()  # an open and close, no merge: one table more
    assert engine_levels.level0_tables(path) == trigger
    Surreal(f"surrealkv://{path}").close()  # the open merged them: only the table this close wrote is left
    assert engine_levels.level0_tables(path) == 1
    assert _count(path) == i


def _manifest(levels: list[list[int]], version: int = 1) -> bytes:
    out = struct.pack(">HQQQB", version, 99, 0, 1234, len(levels))
    for tables in levels:
        out += struct.pack(f">I{len(tables)}Q", len(tables), *tables)
    return out + struct.pack(">I", 0)  # no snapshots


def test_manifest_reading() -> None:
    assert engine_levels.levels(_manifest([[7, 6, 5], [4], [1], [], [], []])) == [
        [7, 6, 5],
        [4],
        [1],
        [],
        [],
        [],
    ]
    assert engine_levels.levels(_manifest([[1]], version=2)) is None  # another format: nothing is done
    assert engine_levels.levels(_manifest([[7, 6, 5]])[:20]) is None  # cut short
    assert engine_levels.levels(b"") is None


def test_an_unreadable_manifest_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "project.db"
    assert engine_levels.level0_tables(path) is None  # no store yet
    (path / "manifest").mkdir(parents=True)
    (path / "manifest" / "00000000000000000000.manifest").write_bytes(b"\x00\x09garbage")
    assert engine_levels.level0_tables(path) is None
    assert not engine_levels.merge_due_at_open(path)


def _bulk_store(path: Path, megabytes: int) -> None:
    """A store written in one go and closed, as a compaction's copy is: one level-0 table of all of it."""
    db = Surreal(f"surrealkv://{path}")
    db.use("project", "p")
    blob = "x" * 3000
    for start in range(0, megabytes * 1000 // 3, 1000):
        db.query(
            "FOR $i IN $ids { CREATE type::record('note', $i) SET v = $b RETURN NONE }",
            {"ids": list(range(start, start + 1000)), "b": blob},
        ).execute()
    db.close()


def test_a_large_copy_is_settled_before_anyone_opens_it(tmp_path: Path) -> None:
    """Over ~256 MB, the engine rewrites a one-go store's table at each of the next two closes (2.3 s at 100,000
    memories): the first start after a compaction waited for it. `settle` makes those moves itself, and then an
    open and close rewrites nothing (level 0 only gains the table that close writes)."""
    path = tmp_path / "copy.db"
    _bulk_store(path, 300)
    first = engine_levels.store_levels(path)
    assert first is not None and len(first[0]) == 1 and not any(first[1:]), first
    opens = engine_levels.settle(path, lambda: Surreal(f"surrealkv://{path}").close())
    assert opens == 3, opens  # two opens that moved the table down, one that moved nothing
    settled = engine_levels.store_levels(path)
    assert settled is not None and any(settled[2:]), settled  # below level 1: pushed down twice
    Surreal(f"surrealkv://{path}").close()  # what the first start after the compaction does
    after = engine_levels.store_levels(path)
    assert after is not None and after[1:] == settled[1:] and set(settled[0]) <= set(after[0]), (
        settled,
        after,
    )
    db = Surreal(f"surrealkv://{path}")
    db.use("project", "p")
    assert db.query("RETURN count(SELECT id FROM note)").execute()[-1] == 100_000
    db.close()


def test_a_small_copy_is_opened_once(tmp_path: Path) -> None:
    path = tmp_path / "copy.db"
    _bulk_store(path, 3)
    assert engine_levels.settle(path, lambda: Surreal(f"surrealkv://{path}").close()) == 1


def test_compaction_settles_its_copy_before_switching_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "project.db"
    for i in range(3):
        _open_write_close(path, i)
    settled: list[Path] = []
    real = engine_levels.settle

    def spy(at: Path, open_close, most: int = 4) -> int:  # noqa: ANN001
        assert at != path and at.exists() and path.exists()  # the copy, before it takes the store's place
        settled.append(at)
        return real(at, open_close, most)

    monkeypatch.setattr(engine_levels, "settle", spy)
    conn = Connection.file(path)
    try:
        conn.compact()
    finally:
        conn.close()
    assert settled == [path.with_name(path.name + ".compact")]
    assert _count(path) == 3
