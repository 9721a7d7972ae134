"""How values look in a store: record ids, rows as plain Python, vectors as bytes, and the store's errors."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from surrealdb import RecordID

from ..retrieval.search_index import UNIT_TOLERANCE

QUERY_DIR = Path(__file__).parent.parent / "queries"
MEMORY_TABLE = "memory"
# Fields returned to callers; the embedding stays inside (384 floats nobody wants to read).
MEMORY_FIELDS = (
    "id, content, content_hash, memory_type, scope, tags, importance, confidence, relevance_score, "
    "outcome_impact, user_feedback, access_count, half_life_days, pinned, status, status_history, "
    "source, session_id, episode_id, promoted_from, promotion_chain, consolidated_into, invalid_at, "
    "created_at, updated_at, last_accessed_at, metadata, memory_strength"
)
VECTOR_DTYPE = np.dtype("<f2")  # encode_vector says why
HALF_TAG = b"h"
FORGOTTEN = "[forgotten]"  # what an erased memory's content and the recall queries that quoted it become


class StoreError(RuntimeError):
    """The store refused an operation; the message says what and why."""


class CompactionStopped(StoreError):
    """A compaction gave up part-way because its owner is stopping; the store was left as it was."""


class CompactionOvertaken(StoreError):
    """A compaction copying between requests saw the store written meanwhile: its copy was thrown away."""


class EngineRefused(StoreError):
    """The engine refused a whole query text (a parse error): the message is the engine's own."""


def content_hash(text: str) -> str:
    """Hash of whitespace- and case-normalised content: exact duplicates share it."""
    norm = re.sub(r"\s+", " ", text.strip().lower())
    return hashlib.sha256(norm.encode()).hexdigest()


def encode_vector(vec: Any) -> bytes | None:
    """A vector as the store keeps it: a tag byte, then little-endian float16 values (769 B for 384 dimensions).

    Half precision halves what a memory's vector costs on disk and in the vector snapshot (1,536 → 769 B): a
    unit vector's components need no more (the change in a cosine is ~1e-4; LoCoMo recall@10: docs/storage.md).
    A vector is stored as a unit vector, so the search index keeps the decoded values as they are (the same
    whether it was filled from the store or from the snapshot). The odd length tells it from the float32 bytes
    of stores written before (schema 006: always a multiple of four), which are still read. Bytes given are
    taken as already encoded."""
    if vec is None or isinstance(vec, bytes):
        return vec
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if not arr.size:
        return None
    norm = float(np.linalg.norm(arr))
    # Every provider's vectors are unit already; anything else is made so before it is rounded. A vector read
    # back (unit within rounding) is kept as it is, so encoding it again gives the same bytes (export, import).
    if math.isfinite(norm) and norm > 0.0 and abs(norm - 1.0) > UNIT_TOLERANCE:
        arr = arr / norm
    return HALF_TAG + arr.astype(VECTOR_DTYPE).tobytes()


def decode_vector(raw: Any) -> np.ndarray | None:
    """A stored vector as float32 values. Float32 bytes (written before) and a list of floats (before schema 006)
    come back as `encode_vector` would store them now, so the mirror holds the same values whichever form a row
    has, and whether it was filled from the store or from the snapshot."""
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray | memoryview):
        raw = bytes(raw)
        if len(raw) % 2 == 1 and raw[:1] == HALF_TAG:
            return (
                np.frombuffer(raw, dtype=VECTOR_DTYPE, offset=1).astype(np.float32) if len(raw) > 1 else None
            )
        arr = np.frombuffer(raw, dtype=np.dtype("<f4"))
    else:
        arr = np.asarray(raw, dtype=np.float32).reshape(-1)
    return decode_vector(encode_vector(arr)) if arr.size else None


def vector_size(raw: bytes) -> int | None:
    """How many numbers a stored vector's bytes hold, or None when the bytes are not a vector's."""
    if len(raw) % 2 == 1 and raw[:1] == HALF_TAG:
        return (len(raw) - 1) // 2
    return len(raw) // 4 if raw and len(raw) % 4 == 0 else None


def with_vector_bytes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` as the engine takes them: an ``embedding`` given as floats (list or array) becomes bytes."""
    out = dict(fields)
    if "embedding" in out and out["embedding"] is not None:
        out["embedding"] = encode_vector(out["embedding"])
        if out["embedding"] is None:
            del out["embedding"]
    return out


def query_file(name: str) -> str:
    return (QUERY_DIR / name).read_text(encoding="utf-8")


def record(key: str, table: str = MEMORY_TABLE) -> RecordID:
    return RecordID(table, key)


def key_of(value: Any) -> str:
    """The key part of a record id, whatever form it comes in."""
    if isinstance(value, RecordID):
        return str(value.id)
    text = str(value)
    return text.split(":", 1)[1] if ":" in text else text


def plain(value: Any) -> Any:
    """SDK values → JSON-friendly Python (record ids as 'table:key', datetimes as aware datetimes)."""
    if isinstance(value, RecordID):
        return f"{value.table_name}:{str(value.id)}"
    if isinstance(value, datetime):
        return datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            tzinfo=value.tzinfo or UTC,
        )
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def text_array(lines: Sequence[str]) -> np.ndarray:
    """Lines (keys, terms: none holds a newline) as one UTF-8 array, the form a snapshot .npz keeps them in."""
    return np.frombuffer("\n".join(lines).encode(), dtype=np.uint8)


def text_lines(arr: np.ndarray) -> list[str]:
    """The lines `text_array` made."""
    return arr.tobytes().decode().split("\n") if len(arr) else []


def write_private(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Write a derived file beside a store: owner-only, and whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(path.name + ".tmp" + path.suffix)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def io_error(exc: BaseException, where: str) -> StoreError | None:
    """Disk trouble gets a message that says what to do; the engine's own words stay in it."""
    text = str(exc)
    if "No space left" in text or "os error 28" in text:
        return StoreError(
            f"the disk holding {where} is full: nothing was stored. Free some space and retry. ({text})"
        )
    if "Read-only file system" in text or "os error 30" in text or "Permission denied" in text:
        return StoreError(
            f"{where} cannot be written (read-only or no permission): nothing was stored. ({text})"
        )
    return None
