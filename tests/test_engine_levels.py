"""The engine's level-0 merge falls at a store's close, not at the next open (engine_levels.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from surrealdb import Surreal

from engram_core import engine_levels
from engram_core.store import Connection


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
    assert engine_levels.levels(_manifest([[7, 6, 5], [4], [1], [], [], []])) == [[7, 6, 5], [4], [1], [], [], []]
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
