"""Compaction of a store's files, and its crash recovery.

surrealkv appends every write to its value log and this engine build refuses `ALTER … COMPACT`, so an UPDATE, a
forget or a dropped database leaves its old bytes in the files for good. Compaction is ours: copy the live data
into a fresh store (`copy_store`), then swap the directories (`Connection.compact`); `recover` finishes or
undoes a swap a crash interrupted. engine_levels.py settles the copy's level layout before it is swapped in.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .values import HALF_TAG, decode_vector, encode_vector, vector_size

# A compaction copying between requests sizes its batches of rows so that each piece holds the request lock about
# COPY_PIECE_S (a recall issued meanwhile waits that long at most).
COPY_PIECE_S = 0.05
COPY_FIRST_BATCH = 50
COPY_MAX_BATCH = 2000
# A batch is read with START (this engine build pushes LIMIT into neither `WHERE id > $last` nor a record range:
# both cost as much as the rows before or after), so each batch first skips the rows before it. A batch of at least
# 1/COPY_SKIP_SHARE of them keeps that skipping linear in all: sized by time alone, batches shrank to 25 rows once
# the skip outgrew the piece, and the copy grew with the square of the table (a 50,000-memory store's took > 10 min).
COPY_SKIP_SHARE = 100


def recover(path: Path) -> None:
    """Finish or undo a compaction a crash interrupted (see `Connection.compact`). The fresh copy is renamed
    into place only after it was closed, so a `.compact` next to a `.old` is complete; one alone is not."""
    tmp, old = path.with_name(path.name + ".compact"), path.with_name(path.name + ".old")
    if not path.exists() and old.exists():
        os.replace(tmp if tmp.exists() else old, path)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def definitions(info: Mapping[str, Any]) -> list[str]:
    # OVERWRITE: a relation table defines its `in`/`out` fields by itself.
    return [re.sub(r"^DEFINE (\w+) ", r"DEFINE \1 OVERWRITE ", str(v)) for v in (info or {}).values()]


def without_none(value: Any) -> Any:
    """NONE comes back as None; sent back it would be NULL, which an `option<…>` field refuses."""
    if isinstance(value, Mapping):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_none(v) for v in value]
    return value


def copy_store(src: Any, dst: Any, piece_s: float | None = None) -> Iterator[Callable[[], None] | None]:
    """Copy every namespace and database of ``src`` into ``dst``, a piece at a time: each ``next()`` reads one
    piece from ``src`` (selecting its database again first: other callers may have used ``src`` in between) and
    yields the write of what it read into ``dst``, for the caller to run, in order, after the piece.
    ``piece_s``: size each batch of rows so that reading it takes about this long (else 500 rows a batch)."""
    for ns in sorted((src.query("INFO FOR ROOT").execute()[-1] or {}).get("namespaces", {})):
        src.use(ns, "x")
        dbs = (src.query("INFO FOR NS").execute()[-1] or {}).get("databases", {})
        for db in sorted(dbs):
            yield from copy_database(src, dst, ns, db, piece_s)


def copy_database(
    src: Any, dst: Any, ns: str, db: str, piece_s: float | None = None
) -> Iterator[Callable[[], None] | None]:
    """Schema and rows of database ``ns``/``db`` of ``src`` into ``dst``, as `copy_store` does it: definitions
    first, rows next (a batch a piece), then the indexes (built over the copied rows) and events (which must not
    fire on the copy). Users are not copied."""
    src.use(ns, db)
    info = src.query("INFO FOR DB").execute()[-1] or {}
    head = [
        *definitions(info.get("analyzers", {})),
        *definitions(info.get("functions", {})),
        *definitions(info.get("params", {})),
        *definitions(info.get("tables", {})),
    ]
    tail: list[str] = []
    tables: list[tuple[str, bool, set[str]]] = []
    for name, definition in (info.get("tables") or {}).items():
        tinfo = src.query(f"INFO FOR TABLE `{name}`").execute()[-1] or {}
        fields = tinfo.get("fields") or {}
        head += definitions(fields)
        tail += [*definitions(tinfo.get("indexes", {})), *definitions(tinfo.get("events", {}))]
        computed = {f for f, d in fields.items() if " COMPUTED " in str(d)}
        tables.append((name, "TYPE RELATION" in str(definition), computed))

    def define() -> None:
        dst.use(ns, db)
        if head:
            dst.query(";\n".join(head)).execute()

    yield define
    for name, relation, computed in tables:
        start, batch = 0, 500 if piece_s is None else COPY_FIRST_BATCH
        while True:
            t = time.perf_counter()
            src.use(ns, db)
            rows = (
                src.query(f"SELECT * FROM `{name}` ORDER BY id LIMIT {batch} START {start}").execute()[-1]
                or []
            )
            if not rows:
                break
            start += len(rows)
            yield functools.partial(insert_rows, dst, name, relation, computed, rows)
            if len(rows) < batch:
                break
            if piece_s is not None:
                took = max(time.perf_counter() - t, 1e-4)
                batch = max(
                    COPY_FIRST_BATCH // 2,
                    start // COPY_SKIP_SHARE,
                    min(COPY_MAX_BATCH, int(len(rows) * piece_s / took)),
                )
    if tail:
        yield lambda: dst.query(";\n".join(tail)).execute()


def insert_rows(dst: Any, name: str, relation: bool, computed: set[str], rows: list[dict[str, Any]]) -> None:
    rows = [
        {
            k: copied_vector(v) if k == "embedding" else without_none(v)
            for k, v in r.items()
            if k not in computed and v is not None
        }
        for r in rows
    ]
    into = "INSERT RELATION INTO" if relation else "INSERT INTO"
    dst.query(f"{into} `{name}` $rows RETURN NONE", {"rows": rows}).execute()


def copied_vector(raw: Any) -> Any:
    """A vector written as float32 bytes (before half precision) is copied in today's form: a store written
    before shrinks at its next compaction, and the mirror, which holds the half-precision values of either
    form (`decode_vector`), stays what it was."""
    if isinstance(raw, bytes) and raw[:1] != HALF_TAG and vector_size(raw):
        return encode_vector(decode_vector(raw))
    return raw
