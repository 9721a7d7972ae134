"""The level layout of a surrealkv store's files, read from its manifest, and when its level-0 compaction falls.

surrealkv (the engine under `surrealkv://`) writes the memtable out as a new level-0 table at every close (an open
and close with no write included), and merges level 0 down once it holds LEVEL0_COMPACTS_AT tables, at the next
open: the open then waits for the merge (measured: 0.6 s at 15,000 memories, 1.5 s at 100,000). That made every
third or fourth daemon start, and its first recall, that much slower. `Connection.close` moves the merge to the
close, when nobody waits for an answer: when level 0 has reached the trigger, it opens the store once more (the
merge) and closes it.

The manifest format is surrealkv's (`levels/mod.rs`, format version 1): a u16 version, three u64 (next table id,
log number, last sequence), a u8 level count, then per level a u32 table count and that many u64 table ids, all
big-endian. A manifest in any other form reads as unknown and nothing is done: this is an optimisation only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

MANIFEST_VERSION = 1
# surrealkv's Options::level0_max_files: level 0 is merged down once it holds this many tables (a store with
# three of them opened without a merge, one with four merged while opening; see tests/test_engine_levels.py).
LEVEL0_COMPACTS_AT = 4
_HEADER = struct.Struct(">HQQQB")


def manifest_file(path: Path) -> Path | None:
    """The store's manifest: the newest file of its `manifest/` folder (surrealkv keeps one)."""
    folder = path / "manifest"
    files = sorted(folder.glob("*.manifest")) if folder.is_dir() else []
    return files[-1] if files else None


def levels(data: bytes) -> list[list[int]] | None:
    """The table ids of each level, level 0 first; None when ``data`` is not a manifest this module knows."""
    if len(data) < _HEADER.size:
        return None
    version, _next_table, _log, _seq, count = _HEADER.unpack_from(data)
    if version != MANIFEST_VERSION:
        return None
    at = _HEADER.size
    out: list[list[int]] = []
    for _ in range(count):
        if at + 4 > len(data):
            return None
        (tables,) = struct.unpack_from(">I", data, at)
        at += 4
        if at + 8 * tables > len(data):
            return None
        out.append(list(struct.unpack_from(f">{tables}Q", data, at)))
        at += 8 * tables
    return out


def store_levels(path: Path) -> list[list[int]] | None:
    """The table ids of each level of the closed store at ``path``; None when they cannot be read."""
    manifest = manifest_file(path)
    if manifest is None:
        return None
    try:
        return levels(manifest.read_bytes())
    except OSError:
        return None


def level0_tables(path: Path) -> int | None:
    """How many level-0 tables the closed store at ``path`` has; None when that cannot be read."""
    found = store_levels(path)
    return len(found[0]) if found else None


def merge_due_at_open(path: Path) -> bool:
    """Whether the next open of the closed store at ``path`` would merge its level 0 (and wait for it)."""
    tables = level0_tables(path)
    return tables is not None and tables >= LEVEL0_COMPACTS_AT


def _settled_part(path: Path) -> tuple[frozenset[int], tuple[tuple[int, ...], ...]] | None:
    """What a close may rewrite: the level-0 tables (a close only adds one) and every deeper level."""
    found = store_levels(path)
    return None if not found else (frozenset(found[0]), tuple(tuple(x) for x in found[1:]))


def settle(path: Path, open_close: Callable[[], object], most: int = 4) -> int:
    """Open and close the closed store at ``path`` (``open_close``) until a close moves no table: the level
    changes the engine would otherwise make at the next opens, while whoever opens it next waits. Returns how many
    times it was opened. Only for a store nobody else has open (a compaction's fresh copy)."""
    for n in range(1, most + 1):
        before = _settled_part(path)
        open_close()
        after = _settled_part(path)
        if before is None or after is None:
            return n
        if before[0] <= after[0] and before[1] == after[1]:  # level 0 only gained the close's table
            return n
    return most
