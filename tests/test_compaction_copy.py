"""The compaction's copy in pieces (`storage.compaction.copy_database`): every row copied once, in order, and batches that
keep up with the rows each one skips (START), so the copy stays linear in the size of a table."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_core.storage import Connection
from engram_core.storage import compaction as store_mod


def test_a_copy_in_pieces_reads_each_row_once_in_batches_that_grow_with_their_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_mod, "COPY_SKIP_SHARE", 10)
    conn = Connection.file(tmp_path / "s.db")
    n = 3000
    conn.run(
        "project",
        "p",
        "DEFINE TABLE note SCHEMALESS; FOR $i IN $r { CREATE type::record('note', $i) "
        "SET text = 'note [/] \\\\ 🚀 ' + <string>$i RETURN NONE; };",
        {"r": list(range(n))},
    )
    batches: list[tuple[int, int]] = []
    real = store_mod.copy_database

    def spy(src, dst, ns, db, piece_s=None):  # noqa: ANN001, ANN202
        query = src.query

        def seen(sql, *args, **kwargs):  # noqa: ANN001, ANN202
            m = re.search(r"FROM `note` ORDER BY id LIMIT (\d+) START (\d+)", sql)
            if m:
                batches.append((int(m.group(2)), int(m.group(1))))
            return query(sql, *args, **kwargs)

        src.query = seen
        try:
            yield from real(src, dst, ns, db, piece_s)
        finally:
            src.query = query

    monkeypatch.setattr(store_mod, "copy_database", spy)

    @contextlib.contextmanager
    def piece() -> Iterator[None]:
        yield

    # A piece budget no batch can meet: sized by time alone, every batch would be the smallest (25 rows).
    monkeypatch.setattr(store_mod, "COPY_PIECE_S", 1e-9)
    conn.compact(piece=piece)
    assert batches and batches[0][0] == 0
    for (start, size), (nxt, _) in zip(batches, batches[1:], strict=False):
        assert nxt == start + size  # contiguous: no row skipped, none read twice
        assert size >= start // 10
    assert len(batches) < n // 25 // 2, f"{len(batches)} batches: they did not grow with the rows they skip"
    rows = conn.run("project", "p", "SELECT VALUE text FROM note ORDER BY id")[-1]
    assert len(rows) == n and rows[7] == "note [/] \\ 🚀 7"
    conn.close()
