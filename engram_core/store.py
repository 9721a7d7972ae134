"""SurrealDB access: one embedded connection per store file, one ScopeStore per namespace/database.

All SurrealQL of the memory table lives here and in ``schema/`` / ``queries/``; front ends never build queries.
An embedded store can be open in one process only, so the daemon owns every ``ScopeStore``.

Each ScopeStore keeps an in-process mirror of its searchable memories (text, vector and the few fields
scoring needs) so that recall does not pay SurrealDB's HNSW/FULLTEXT cost; SurrealDB stays the source
of truth and the mirror is rebuilt from it at open and updated after every acknowledged write.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import re
import secrets
import shutil
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from uuid import UUID

import numpy as np
from surrealdb import AsyncSurreal, RecordID, Surreal
from surrealdb.connections.async_ws import AsyncWsSurrealConnection
from surrealdb.connections.blocking_ws import BlockingWsSurrealConnection

from . import cbor_encode, engine_levels
from .clock import Clock
from .collector import paused_collector
from .config import ensure_private_dir, restrict_tree
from .entity_order import in_text_order
from .heap import release_freed_memory
from .ids import IdSource, ulid
from .models import Scope
from .redaction import redact_value
from .row_mirror import FIELDS as ROW_FIELDS
from .row_mirror import FILL_QUERY, RowMirror, from_json_row
from .scoring import ACCESS_RELEVANCE_STEP, IMPORTANCE_WEIGHTS
from .search_index import UNIT_TOLERANCE, Postings, SearchIndex

log = logging.getLogger(__name__)
# A store is compacted when its files outgrow their size after the last compaction by half plus this much.
COMPACT_GROWTH = 1.1
COMPACT_SLACK = 1024 * 1024
# Recall log rows held in memory per store at most (as many as compaction keeps: service.RETRIEVAL_LOG_KEEP).
HELD_LOG_MAX = 5000
LOG_ROW_BYTES = (
    1300  # what one retrieval_log row adds to the engine's files (measured: ~1.3 KB, batched or not)
)
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
COPYING_RETRY_S = 1.0  # held bookkeeping is tried again this often while a compaction copies between requests
ACCESS_CHUNK = 100  # memories whose access counts one bookkeeping write applies (ScopeStore.drain_due)
# A statement that may change rows (anything but a plain read) empties the row cache.
_WRITES = re.compile(
    r"\b(?:UPDATE|UPSERT|CREATE|DELETE|INSERT|RELATE|REMOVE|DEFINE|ALTER|REBUILD)\b", re.IGNORECASE
)

SCHEMA_DIR = Path(__file__).parent / "schema"
QUERY_DIR = Path(__file__).parent / "queries"
MEMORY_TABLE = "memory"

# Fields returned to callers; the embedding stays inside (384 floats nobody wants to read).
MEMORY_FIELDS = (
    "id, content, content_hash, memory_type, scope, tags, importance, confidence, relevance_score, "
    "outcome_impact, user_feedback, access_count, half_life_days, pinned, status, status_history, "
    "source, session_id, episode_id, promoted_from, promotion_chain, consolidated_into, invalid_at, "
    "created_at, updated_at, last_accessed_at, metadata, memory_strength"
)
LIGHT_FIELDS = (
    "id, content, memory_type, tags, importance, access_count, half_life_days, status, pinned, "
    "last_accessed_at, created_at, session_id, episode_id, content_hash, embedding, search_text"
)
# 3: no per-vector sums (version 2 validated each vector against the database's sum of its floats; a vector is
# now read back as one bytes value, cheap enough to read them all when the snapshot is out of date).
# 4: the light rows zlib-compressed, an indexed text equal to the content not written twice (~0.8 KB a memory).
# 5: the full rows (row_mirror.py) in a blob of their own, held undecoded until a recall asks for one.
# 6: the vectors in half precision, as the store keeps them (encode_vector): 769 B a memory instead of 1,536.
SNAPSHOT_VERSION = 6
# Schema 006 stores every vector as bytes; `_vectors_to_bytes` converts a store written before it.
VECTOR_BYTES_SCHEMA = 6
# Schema 011 keeps a memory's entities on its row and stores no co-mention; `_entity_lists` moves a store written before.
ENTITY_LISTS_SCHEMA = 11
# What schemas 009 (graph edges) and 010 (entities) stop writing, as the rows written before get it cleared
# (`_lean_rows`): schema version → (table, which rows still hold it, how it is cleared).
_LEAN_ROWS = {
    9: (
        (
            "relates_to",
            "scope != NONE OR created_at != NONE OR source = 'extracted'",
            "scope = NONE, created_at = NONE, source = IF source = 'agent' THEN 'agent' ELSE NONE END",
        ),
        ("mentions", "created_at != NONE", "created_at = NONE"),
    ),
    10: (
        (
            "entity",
            "scope != NONE OR created_at != NONE OR source = 'extracted' OR description = ''",
            "scope = NONE, created_at = NONE, source = IF source = 'agent' THEN 'agent' ELSE NONE END, "
            "description = IF description = '' THEN NONE ELSE description END",
        ),
    ),
}
cbor_encode.install()  # every request to the engine is encoded by cbor_encode (the SDK's bytes, ~4.5x sooner)

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


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, text) of every schema file, in order."""
    out = []
    for entry in SCHEMA_DIR.iterdir():
        m = re.match(r"(\d+)_.*\.surql$", entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


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
        return f"{value.table_name}:{value.id}"
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


def _read_postings(z: Any) -> Postings | None:
    """The BM25 postings saved with the snapshot (absent in one written before they were), checked by the index."""
    if "p_terms" not in z.files:
        return None
    return Postings(
        analyser=bytes(z["p_analyser"]).decode(),
        terms=text_lines(z["p_terms"]),
        offsets=z["p_offsets"],
        slots=z["p_slots"],
        tfs=z["p_tfs"],
        doc_len=z["p_doc_len"],
    )


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


def _io_error(exc: BaseException, where: str) -> StoreError | None:
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


class _EngineThread:
    """The embedded engine behind a synchronous face, driven through the SDK's asynchronous binding by one
    event-loop thread; callers wait on a future.

    The synchronous binding keeps Python's GIL for as long as the engine works on a request (measured: during a
    3.5 s query another thread got ~30k loop turns instead of millions), so a long console query froze every thread
    of the daemon however its locks were arranged. The asynchronous binding releases the GIL while the engine
    works. Its cost: the process may abort in interpreter finalization (a Rust panic in the engine's runtime
    threads, about one run in five even after a clean close), so only a process that ends with `os._exit` after
    closing its stores may use it: the daemon (`use_engine_thread`, `daemon.server.serve`)."""

    def __init__(self, url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="engram-engine", daemon=True)
        self._thread.start()
        try:
            self._db = AsyncSurreal(url)
            self._wait(self._db.connect())
        except BaseException:
            self._stop()
            raise

    def _wait(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _execute(self, sql: str, params: dict[str, Any]) -> Any:
        return await self._db.query(sql, params).execute()

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> _Pending:
        """Like the synchronous SDK: ``engine.query(sql, params).execute()``."""
        return _Pending(self, sql, dict(params or {}))

    def query_raw(self, sql: str, session_id: UUID | None = None) -> dict[str, Any]:
        return self._wait(self._db.query_raw(sql, session_id=session_id))

    def use(self, ns: str, db: str) -> None:
        self._wait(self._db.use(ns, db))

    def signin(self, credentials: dict[str, Any], session_id: UUID | None = None) -> Any:
        return self._wait(self._db.signin(credentials, session_id=session_id))

    def attach(self) -> UUID:
        return self._wait(AsyncWsSurrealConnection.attach(self._db))

    def detach(self, session: UUID) -> None:
        self._wait(AsyncWsSurrealConnection.detach(self._db, session))

    def close(self) -> None:
        try:
            self._wait(self._db.close())
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


@dataclass
class _Pending:
    engine: _EngineThread
    sql: str
    params: dict[str, Any]

    def execute(self) -> Any:
        return self.engine._wait(self.engine._execute(self.sql, self.params))  # noqa: SLF001 - its own engine


_engine_factory: Callable[[str], Any] = Surreal
# Whether a store reads the rows its row mirror lacks in a background thread (the daemon) or only when a recall
# returns them (scripts and tests: no thread outliving what they measure).
_fill_in_background = False


def use_engine_thread() -> None:
    """Open every engine of this process through `_EngineThread`, so that a long query holds no other thread.
    Only for a process that leaves with `os._exit` once its stores are closed (see `_EngineThread`). Such a
    process also fills its stores' row mirrors in the background (the engine works without the GIL there)."""
    global _engine_factory, _fill_in_background
    _engine_factory = _EngineThread
    _fill_in_background = True


def works_in_background() -> bool:
    """Whether this process prepares its mirrors in background threads (the daemon, see `use_engine_thread`);
    scripts and tests do that work when it is first needed, with no thread outliving what they measure."""
    return _fill_in_background


def _attach(db: Any) -> UUID:
    # The SDK refuses attach() on embedded engines although the engine serves it: send the RPC directly.
    return db.attach() if isinstance(db, _EngineThread) else BlockingWsSurrealConnection.attach(db)


def _detach(db: Any, session: UUID) -> None:
    if isinstance(db, _EngineThread):
        db.detach(session)
    else:
        BlockingWsSurrealConnection.detach(db, session)


class Connection:
    """One embedded SurrealDB engine over one store file (or memory), shared by the ScopeStores on it.

    The SDK connection has a single `USE` state, so every call selects its namespace/database under a lock.
    """

    def __init__(self, url: str, path: Path | None = None) -> None:
        self.url = url
        self.path = path
        try:
            if path is not None:
                ensure_private_dir(path.parent)
                if path.is_symlink():  # the engine would write wherever it points
                    raise StoreError(
                        f"{path} is a symbolic link: Engram does not open a store through a link. Remove it."
                    )
                _recover_compaction(path)
            self._db = _engine_factory(url)
        except Exception as exc:  # the engine's message names the LOCK file when another process has it
            raise _io_error(exc, url) or StoreError(f"cannot open the store at {url}: {exc}") from exc
        self.lock = threading.RLock()
        # The namespace/database the SDK session is on: a USE costs a round trip (~2 ms), so it is sent
        # only when a call targets another one. Anything that signs in or switches users resets it.
        self._current: tuple[str, str] | None = None
        self._role_passwords: dict[tuple[str, str, str], str] = {}
        self._idle_sessions: dict[tuple[str, str, str], list[UUID]] = {}
        if path is not None:
            restrict_tree(path)
        # Compaction bookkeeping: the size after the last one, and whether something was erased since.
        self.baseline = self.disk_bytes()
        self.erased = False
        # One compaction of these files at a time: two would copy into the same `.compact` directory, and the one
        # that finished first would close the engine the other was still reading (seen at the end of a 50,000
        # memory import: `engram import`'s compaction and the daemon's forced one).
        self._compaction = threading.RLock()
        self._compactions_running = 0
        # Statements run that may have written (a compaction copying between requests checks it), and whether such
        # a copy is running (held bookkeeping waits for its end rather than make it stale).
        self.writes = 0
        self.copying = False

    @classmethod
    def file(cls, path: Path) -> Connection:
        return cls(f"surrealkv://{path}", path)

    @classmethod
    def memory(cls) -> Connection:
        return cls("mem://")

    def run(self, ns: str, db: str, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        # Every value Engram hands the engine passes here: redacting the parameters is the net under every write
        # path, including those with no redaction of their own (graph evidence, episode reasons, registries).
        # The service redacts first where it must know what it replaced (content, its hash, the store message);
        # here that text is already clean and redaction is idempotent.
        params = redact_value(dict(params or {}))  # type: ignore[assignment]
        with self.lock:
            try:
                if self._current != (ns, db):
                    self._current = None
                    self._db.use(ns, db)
                    self._current = (ns, db)
                if _WRITES.search(sql):
                    self.writes += 1
                return self._db.query(sql, dict(params or {})).execute()
            except Exception as exc:
                translated = _io_error(exc, self.url)
                if translated is None:
                    raise
                raise translated from exc

    # ── least privilege for user-written SurrealQL ─────────────
    # User statements run in engine sessions of their own (RPC attach), each signed in as a database-level
    # VIEWER or EDITOR user: the engine pins such a session to its namespace and database, and the
    # connection's own (root) session is never re-authenticated. The statements run without self.lock, so a
    # long console query never delays the store's other callers. Passwords are random per process.
    def _role_session(self, ns: str, db: str, role: str) -> UUID:
        key = (ns, db, role)
        with self.lock:
            idle = self._idle_sessions.setdefault(key, [])
            if idle:
                return idle.pop()
            password = self._role_passwords.get(key)
            if password is None:
                password = secrets.token_urlsafe(
                    24
                )  # a literal below; token_urlsafe only yields [A-Za-z0-9_-]
                self._current = None
                self._db.use(ns, db)
                self._db.query(
                    f"DEFINE USER OVERWRITE engram_{role.lower()} ON DATABASE PASSWORD '{password}' "
                    f"ROLES {role} DURATION FOR TOKEN 365d, FOR SESSION NONE"
                ).execute()
                self._role_passwords[key] = password
        session = _attach(self._db)
        try:
            self._db.signin(
                {"namespace": ns, "database": db, "username": f"engram_{role.lower()}", "password": password},
                session_id=session,
            )
        except Exception:
            with contextlib.suppress(Exception):
                _detach(self._db, session)
            raise
        return session

    def run_as(self, ns: str, db: str, role: str, sql: str) -> list[dict[str, Any]]:
        """Run statements as a database user with ``role`` (VIEWER or EDITOR) in an engine session of its own.

        Returns the engine's per-statement results (errors included); raises :class:`EngineRefused` with the
        engine's own message when it refuses the whole text (a parse error)."""
        if role not in ("VIEWER", "EDITOR"):
            raise ValueError(f"role must be VIEWER or EDITOR, not {role!r}")
        if role == "EDITOR":  # counted before it may run: a compaction that checks after it must see it
            self.writes += 1
        session = self._role_session(ns, db, role)
        try:
            response = self._db.query_raw(sql, session_id=session)
        except Exception:
            with contextlib.suppress(Exception):
                _detach(self._db, session)
            raise
        with self.lock:
            self._idle_sessions.setdefault((ns, db, role), []).append(session)
        error = response.get("error")
        if error is not None or "result" not in response:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise EngineRefused(message or "the engine gave no result")
        return response["result"]

    # ── compaction ───────────────────────────────────────────
    # surrealkv appends every write to its value log and this engine build refuses `ALTER … COMPACT` ("The storage
    # layer does not support compaction requests"), so an UPDATE, a forget or a dropped database leaves its old
    # bytes in the files for good. Compaction is ours: copy the live data into a fresh store, then swap the
    # directories. Crash-safe: `_recover_compaction` finishes or undoes a swap that was interrupted.
    def disk_bytes(self) -> int:
        if self.path is None or not self.path.exists():
            return 0
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    def compaction_due(self, pending_bytes: int = 0) -> bool:
        """Something was erased, or the files (plus ``pending_bytes`` about to be written) outgrew their size after
        the last compaction by a tenth + 1 MiB."""
        if self.path is None:
            return False
        return (
            self.erased or self.disk_bytes() + pending_bytes > self.baseline * COMPACT_GROWTH + COMPACT_SLACK
        )

    def compact(
        self,
        stop: Callable[[], bool] | None = None,
        piece: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> tuple[int, int]:
        """Rewrite the store file with its live data only; returns (bytes before, bytes after).
        The caller applies pending bookkeeping first (ScopeStore.drain).

        ``piece``: the copy runs in pieces (a batch of rows each), each inside ``piece()`` (the daemon's request
        lock, taken after waiting requests), and other callers read the store between them: at 50,000 memories
        the copy takes minutes. Held bookkeeping waits meanwhile (``copying``); any other write makes the copy
        stale, so it is thrown away and CompactionOvertaken raised (the caller compacts again, holding the lock).
        Without ``piece``, the lock is held throughout.
        ``stop`` is asked before each piece: when it says so, the copy is thrown away, the store stays as it was
        and CompactionStopped is raised (`engram stop` must not wait minutes for it)."""
        if self.path is None:
            return 0, 0
        with self.compaction_turn():  # a second caller waits for the first, then compacts what it left
            return self._compact(stop, piece)

    @contextlib.contextmanager
    def compaction_turn(self) -> Iterator[None]:
        """This store's turn to be compacted (re-entrant: the caller may take it around its retry). Take it
        before any request lock: a compaction holds one while it retries."""
        with self._compaction:
            self._compactions_running += 1
            try:
                yield
            finally:
                self._compactions_running -= 1

    @property
    def compaction_running(self) -> bool:
        return self._compactions_running > 0

    def _compact(
        self,
        stop: Callable[[], bool] | None,
        piece: Callable[[], contextlib.AbstractContextManager[Any]] | None,
    ) -> tuple[int, int]:
        assert self.path is not None
        each = piece or contextlib.nullcontext
        tmp = self.path.with_name(self.path.name + ".compact")
        new: Any = None
        with contextlib.nullcontext() if piece else self.lock:
            try:
                before = self.disk_bytes()
                shutil.rmtree(tmp, ignore_errors=True)
                new = _engine_factory(f"surrealkv://{tmp}")
                with each(), self.lock:
                    writes = self.writes
                    self.copying = piece is not None
                    steps = _copy_store(self._db, new, piece_s=COPY_PIECE_S if piece else None)
                while True:
                    # Reading the store is a piece under the lock; writing what was read into the fresh copy,
                    # which nobody else uses, is not.
                    with each(), self.lock:
                        self._still_wanted(stop, writes)
                        try:
                            write = next(steps)
                        except StopIteration:
                            break
                        finally:
                            self._current = None  # the copy moved the session to other databases
                    if write is not None:
                        write()
                new.close()
                # The copy is one level-0 table: the engine's moves of it down would fall at the next opens
                # (engine_levels.settle); nobody waits for the fresh copy yet.
                engine_levels.settle(tmp, lambda: _engine_factory(f"surrealkv://{tmp}").close())
                with each(), self.lock:
                    self._still_wanted(stop, writes)
                    self._switch_to(tmp)
            except (CompactionStopped, CompactionOvertaken):
                self._discard(new, tmp)
                raise
            except Exception as exc:
                self._discard(new, tmp)
                raise _io_error(exc, self.url) or StoreError(
                    f"compaction of {self.url} failed: {exc}"
                ) from exc
            finally:
                self.copying = False
                self._current = None
        shutil.rmtree(self.path.with_name(self.path.name + ".old"), ignore_errors=True)
        release_freed_memory()
        return before, self.baseline

    def _still_wanted(self, stop: Callable[[], bool] | None, writes: int) -> None:
        if stop is not None and stop():
            raise CompactionStopped(
                "the compaction stopped part-way (Engram is stopping); the store is unchanged"
            )
        if self.writes != writes:
            raise CompactionOvertaken(f"{self.url} was written during its compaction")

    @staticmethod
    def _discard(new: Any, tmp: Path) -> None:
        if new is not None:
            with contextlib.suppress(Exception):
                new.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def _switch_to(self, tmp: Path) -> None:
        """The fresh copy (closed) in place of the store files (under self.lock; `_recover_compaction` finishes or
        undoes a switch a crash interrupted). The old files are left as `.old` for the caller to remove."""
        assert self.path is not None
        with contextlib.suppress(Exception):
            self._db.close()
        self._role_passwords.clear()  # the role users live in the old files; made again on demand
        self._idle_sessions.clear()
        os.replace(self.path, self.path.with_name(self.path.name + ".old"))
        os.replace(tmp, self.path)
        self._db = _engine_factory(self.url)
        restrict_tree(self.path)
        self.baseline, self.erased = self.disk_bytes(), False

    def close(self) -> None:
        with self.lock:
            self._role_passwords.clear()
            for sessions in self._idle_sessions.values():
                for session in sessions:
                    with contextlib.suppress(Exception):
                        _detach(self._db, session)
            self._idle_sessions.clear()
            with contextlib.suppress(Exception):
                self._db.close()
            if self.path is not None:
                self._merge_level0()
                restrict_tree(self.path)

    def _merge_level0(self) -> None:
        """Let the engine merge its level 0 now, while closing, when the next open would do it (and the first
        request after a start would wait for it): see engine_levels."""
        assert self.path is not None
        if not engine_levels.merge_due_at_open(self.path):
            return
        t = time.perf_counter()
        try:
            _engine_factory(self.url).close()
        except Exception as exc:  # an optimisation: the next open merges instead
            log.warning("the engine's level-0 merge of %s at close failed: %s", self.path, exc)
            return
        log.info(
            "merged the engine's level 0 of %s at close in %.0f ms",
            self.path,
            (time.perf_counter() - t) * 1000,
        )


def _recover_compaction(path: Path) -> None:
    """Finish or undo a compaction a crash interrupted (see `Connection.compact`). The fresh copy is renamed
    into place only after it was closed, so a `.compact` next to a `.old` is complete; one alone is not."""
    tmp, old = path.with_name(path.name + ".compact"), path.with_name(path.name + ".old")
    if not path.exists() and old.exists():
        os.replace(tmp if tmp.exists() else old, path)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def _definitions(info: Mapping[str, Any]) -> list[str]:
    # OVERWRITE: a relation table defines its `in`/`out` fields by itself.
    return [re.sub(r"^DEFINE (\w+) ", r"DEFINE \1 OVERWRITE ", str(v)) for v in (info or {}).values()]


def _without_none(value: Any) -> Any:
    """NONE comes back as None; sent back it would be NULL, which an `option<…>` field refuses."""
    if isinstance(value, Mapping):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _copy_store(src: Any, dst: Any, piece_s: float | None = None) -> Iterator[Callable[[], None] | None]:
    """Copy every namespace and database of ``src`` into ``dst``, a piece at a time: each ``next()`` reads one
    piece from ``src`` (selecting its database again first: other callers may have used ``src`` in between) and
    yields the write of what it read into ``dst``, for the caller to run, in order, after the piece.
    ``piece_s``: size each batch of rows so that reading it takes about this long (else 500 rows a batch)."""
    for ns in sorted((src.query("INFO FOR ROOT").execute()[-1] or {}).get("namespaces", {})):
        src.use(ns, "x")
        dbs = (src.query("INFO FOR NS").execute()[-1] or {}).get("databases", {})
        for db in sorted(dbs):
            yield from _copy_database(src, dst, ns, db, piece_s)


def _copy_database(
    src: Any, dst: Any, ns: str, db: str, piece_s: float | None = None
) -> Iterator[Callable[[], None] | None]:
    """Schema and rows of database ``ns``/``db`` of ``src`` into ``dst``, as `_copy_store` does it: definitions
    first, rows next (a batch a piece), then the indexes (built over the copied rows) and events (which must not
    fire on the copy). Users are not copied."""
    src.use(ns, db)
    info = src.query("INFO FOR DB").execute()[-1] or {}
    head = [
        *_definitions(info.get("analyzers", {})),
        *_definitions(info.get("functions", {})),
        *_definitions(info.get("params", {})),
        *_definitions(info.get("tables", {})),
    ]
    tail: list[str] = []
    tables: list[tuple[str, bool, set[str]]] = []
    for name, definition in (info.get("tables") or {}).items():
        tinfo = src.query(f"INFO FOR TABLE `{name}`").execute()[-1] or {}
        fields = tinfo.get("fields") or {}
        head += _definitions(fields)
        tail += [*_definitions(tinfo.get("indexes", {})), *_definitions(tinfo.get("events", {}))]
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
            yield functools.partial(_insert_rows, dst, name, relation, computed, rows)
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


def _insert_rows(dst: Any, name: str, relation: bool, computed: set[str], rows: list[dict[str, Any]]) -> None:
    rows = [
        {
            k: _copied_vector(v) if k == "embedding" else _without_none(v)
            for k, v in r.items()
            if k not in computed and v is not None
        }
        for r in rows
    ]
    into = "INSERT RELATION INTO" if relation else "INSERT INTO"
    dst.query(f"{into} `{name}` $rows RETURN NONE", {"rows": rows}).execute()


def _copied_vector(raw: Any) -> Any:
    """A vector written as float32 bytes (before half precision) is copied in today's form: a store written
    before shrinks at its next compaction, and the mirror, which holds the half-precision values of either
    form (`decode_vector`), stays what it was."""
    if isinstance(raw, bytes) and raw[:1] != HALF_TAG and vector_size(raw):
        return encode_vector(decode_vector(raw))
    return raw


@dataclass
class Light:
    """What recall needs to filter and score a memory without a database round trip."""

    memory_type: str
    tags: list[str]
    importance: float
    access_count: int
    half_life_days: float
    status: str
    pinned: bool
    last_accessed_at: datetime
    created_at: datetime
    session_id: str | None
    episode_id: str | None
    content_hash: str
    content: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ScopeStore:
    """One scope's database (namespace + database) on a Connection, with its in-process mirror."""

    def __init__(
        self,
        conn: Connection,
        scope: Scope,
        database: str,
        *,
        dim: int = 384,
        clock: Clock | None = None,
        new_id: IdSource | None = None,
    ) -> None:
        self.conn = conn
        self.clock = (
            clock or Clock()
        )  # the service's: stamps written from Python (status history, updated_at)
        self.new_id: IdSource = new_id or ulid
        self.scope = scope
        self.namespace = scope.value
        self.database = database
        self.index = SearchIndex(dim)
        self.light: dict[str, Light] = {}
        self._by_hash: dict[str, str] = {}  # content_hash → key, for O(1) exact-duplicate checks
        # Held by every change to the mirror; a caller reading ``light`` whole holds it too (``mirror_lock``).
        self.mirror_lock = self._mirror_lock = threading.RLock()
        # Held while pending bookkeeping is applied (and by `q`, which reads what it writes): see drain_due.
        self._drain_lock = threading.RLock()
        self._snapshot_write_lock = threading.Lock()
        # Bookkeeping a recall owes the database (access counts, its log row, co-activation), written after
        # the answer: see `defer`. Every other query on this store applies it first (read your writes).
        self._pending_access: dict[str, tuple[int, datetime]] = {}
        self._pending_sql: list[tuple[str, dict[str, Any], bool]] = []
        # Co-activation edges a recall strengthened, summed per edge: {edge id: (strength, times, pair, last)}.
        self._pending_coact: dict[str, tuple[float, int, Mapping[str, Any], datetime, str]] = {}
        # Recall log rows, held newest-last (see `log_retrieval`), and when the oldest of them was logged.
        self._held_log: deque[dict[str, Any]] = deque(maxlen=HELD_LOG_MAX)
        self._log_since: float | None = None
        self._access_since: float | None = None  # monotonic time of the oldest access not yet written
        self.on_defer: Callable[[ScopeStore], None] | None = None
        # The full rows of the mirrored memories (row_mirror.py): recall reads its winners there, not in the engine.
        self.rows = RowMirror()
        # Bumped when a write outside the organise layer changed the knowledge graph (erasure): its mirror reloads.
        self.graph_version = 0
        # Other in-process mirrors of this store (the organise layer's graph) that save themselves with the
        # vector snapshot, at close: name → writer.
        self.snapshot_writers: dict[str, Callable[[], None]] = {}
        self.apply_schema()
        self.reload_mirror()

    # ── plumbing ──────────────────────────────────────────────
    def q(
        self, sql: str, params: Mapping[str, Any] | None = None, *, memory_rows: Iterable[str] | None = None
    ) -> list[Any]:
        """Run statements on this store. ``memory_rows``: the memory rows a write changes that the row mirror must
        read again (a caller applies any other change itself, `mirror_fields`); by default they are found from
        the statement's parameters and text (row_mirror.RowMirror.touched)."""
        with self._drain_lock, self.conn.lock:
            reads_log = (
                "retrieval_log" in sql
            )  # held log rows are written only for a query that may read them
            # Not while a compaction copies between requests: the write would make its copy stale.
            if (
                self._pending_access
                or self._pending_sql
                or self._pending_coact
                or (self._held_log and reads_log)
            ) and not self.conn.copying:
                self._drain_locked(keep_log=not reads_log)
            if memory_rows is not None:
                self.rows.drop(memory_rows)
            elif _WRITES.search(sql):
                self.rows.touched(sql, params)
            return self.conn.run(self.namespace, self.database, sql, params)

    def q1(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.q(sql, params)[-1]

    def schema_version(self) -> int:
        rows = self.q1("SELECT VALUE version FROM ONLY schema_meta:current")
        return int(rows) if isinstance(rows, int) else 0

    def apply_schema(self) -> int:
        """Apply every migration newer than the recorded version, each in one transaction."""
        current = self.schema_version() if self._has_schema_meta() else 0
        for version, _name, text in migrations():
            if version > current:
                if version == VECTOR_BYTES_SCHEMA:
                    self._vectors_to_bytes()
                if version in _LEAN_ROWS:
                    self._lean_rows(version, text)
                if version == ENTITY_LISTS_SCHEMA:
                    self._entity_lists()
                self.q(
                    f"BEGIN TRANSACTION;\n{text}\nUPSERT schema_meta:current SET version = {version}, "
                    f"applied_at = time::now();\nCOMMIT TRANSACTION;"
                )
                current = version
        return current

    def _vectors_to_bytes(self, chunk: int = 1000) -> None:
        """Before schema 006: rewrite every vector stored as a list of floats (memories and entities) as bytes
        (`encode_vector`, the form every vector is written in now). The field first accepts both forms, so
        each chunk commits on its own (a store of any size, in bounded memory) and a row not yet converted can still
        be written; an interrupted upgrade goes on from the rows still holding floats at the next open, and
        schema 006 then narrows the type to bytes. The floats are read once (the SDK decodes them one by one:
        ~0.5 s per 1,000 rows)."""
        widen = "\n".join(
            f"DEFINE FIELD OVERWRITE embedding ON {t} TYPE option<bytes | array<float>>;"
            for t in (MEMORY_TABLE, "entity")
        )
        self.q(widen)
        for table in (MEMORY_TABLE, "entity"):
            ids = self.q1(f"SELECT VALUE id FROM {table} WHERE type::is_array(embedding)") or []
            for i in range(0, len(ids), chunk):
                vecs, empty = [], []
                for r in self.q1("SELECT id, embedding FROM $ids", {"ids": ids[i : i + chunk]}) or []:
                    raw = encode_vector(r.get("embedding"))
                    if raw is None:  # an empty list was never a vector
                        empty.append(r["id"])
                    else:
                        vecs.append({"id": r["id"], "e": raw})
                self.q(
                    "FOR $u IN $vecs { UPDATE $u.id SET embedding = $u.e RETURN NONE; };"
                    "UPDATE $empty SET embedding = NONE RETURN NONE;",
                    {"vecs": vecs, "empty": empty},
                )
            if ids:
                self.conn.erased = True  # the old floats stay in the engine's files until the next compaction

    def _lean_rows(self, version: int, definitions: str, chunk: int = 2000) -> None:
        """Before schema 009 or 010 is recorded: its field definitions (the dropped values become optional), then the
        values cleared from every row written before, ``chunk`` rows a transaction. The graph's change counter
        (schema 005) is bumped by an event per row written: each chunk lifts the table's events, rewrites its rows,
        defines them again as they were and bumps the counter once, all in its transaction (measured at 1,000
        memories: 0.37 s against 2.1 s with the events firing). An interrupted upgrade goes on from the rows left."""
        self.q(definitions)
        for table, holding, clear in _LEAN_ROWS[version]:
            ids = self.q1(f"SELECT VALUE id FROM {table} WHERE {holding}") or []
            for i in range(0, len(ids), chunk):
                self.q(
                    self._eventless([table], f"UPDATE $ids SET {clear} RETURN NONE;\n"),
                    {"ids": ids[i : i + chunk]},
                )
            if ids:
                self.conn.erased = (
                    True  # the old versions stay in the engine's files until the next compaction
                )

    def _eventless(self, tables: Sequence[str], body: str, counters: Sequence[str] = ("graph",)) -> str:
        """``body`` in one transaction with the tables' events lifted (they fire per row: a rewrite of every row is
        several times slower with them) and defined again as they were, the change counters bumped once instead."""
        lift, back = "", ""
        for table in tables:
            events = (self.q1(f"INFO FOR TABLE {table}") or {}).get("events") or {}
            lift += "".join(f"REMOVE EVENT {name} ON TABLE {table};\n" for name in events)
            back += "".join(
                re.sub(r"^DEFINE EVENT ", "DEFINE EVENT OVERWRITE ", str(d)) + ";\n" for d in events.values()
            )
        bump = "".join(f"UPSERT mirror_meta:{c} SET n = (n ?? 0) + 1 RETURN NONE;\n" for c in counters)
        return f"BEGIN TRANSACTION;\n{lift}{body}{back}{bump}COMMIT TRANSACTION;"

    def _entity_lists(self, chunk: int = 2000) -> None:
        """Before schema 011 is recorded: each memory's mention edges become its entity list (`memory.entities`,
        the entities in the order its text first names them), and the co-mention relations the extraction stored
        (`related_to` with no source: the agent's say 'agent') are deleted; the graph derives them from the lists
        now (organise/graph.py); the mention edges go with their table (schema 011), their graph keys at the next
        compaction, which is due. ``chunk`` memories a transaction; an interrupted upgrade goes on at the next open
        (a memory that has its list keeps it)."""
        self.q("DEFINE FIELD OVERWRITE entities ON memory TYPE option<array<record<entity>>>;")
        tables = (self.q1("INFO FOR DB") or {}).get("tables") or {}
        began = time.monotonic()
        if "mentions" in tables:
            log.info(
                "upgrading %s/%s to schema 11: each memory's entities onto its row (once; minutes for a large "
                "store)",
                self.namespace,
                self.database,
            )
            got = self.q1(
                "RETURN {m: array::join((SELECT VALUE <string>record::id(in) + ' ' + <string>record::id(out) "
                "FROM mentions), '\n'), e: array::join((SELECT VALUE <string>record::id(id) + ' ' + name_key "
                "FROM entity), '\n')}"
            )
            names = dict(line.split(" ", 1) for line in (got.get("e") or "").split("\n") if " " in line)
            lists: dict[str, set[str]] = {}
            for line in (got.get("m") or "").split("\n"):
                memory, _, ekey = line.partition(" ")
                if ekey:
                    lists.setdefault(memory, set()).add(ekey)
            keys = sorted(lists)
            for i in range(0, len(keys), chunk):
                part = keys[i : i + chunk]
                texts = dict(
                    self.q1(
                        "SELECT VALUE [record::id(id), content] FROM $ids", {"ids": [record(k) for k in part]}
                    )
                    or []
                )
                lists_of = {
                    k: [
                        RecordID("entity", e)
                        for e in in_text_order(texts.get(k) or "", {e: names.get(e, "") for e in lists[k]})
                    ]
                    for k in part
                }
                # Only the graph's change counter moves: no mirror of the memory rows holds the lists, so the vector
                # snapshot stays valid (counted, a 10,000-memory store read every row again: 5.9 s more).
                self.q(
                    self._eventless(
                        [MEMORY_TABLE],
                        "UPDATE $ids SET entities = $lists[record::id(id)] "
                        "WHERE entities = NONE RETURN NONE;\n",
                        ("graph",),
                    ),
                    {"ids": [record(k) for k in part], "lists": lists_of},
                )
            if keys:
                self.conn.erased = True  # the rows before their lists stay in the files until compacted
        co = (
            self.q1("SELECT VALUE id FROM relates_to WHERE relation_type = 'related_to' AND source = NONE")
            or []
        )
        for i in range(0, len(co), chunk):
            self.q(self._eventless(["relates_to"], "DELETE $ids RETURN NONE;\n"), {"ids": co[i : i + chunk]})
        if co:
            self.conn.erased = True
        if "mentions" in tables or co:
            log.info(
                "upgraded %s/%s to schema 11 in %.1f s: %d co-mention relations deleted (derived now)",
                self.namespace,
                self.database,
                time.monotonic() - began,
                len(co),
            )

    def _has_schema_meta(self) -> bool:
        info = self.q1("INFO FOR DB")
        return isinstance(info, dict) and "schema_meta" in (info.get("tables") or {})

    # ── mirror ───────────────────────────────────────────────
    def _generation(self) -> str:
        """This database's identity and memory change count: a snapshot is valid only for exactly this pair
        (the identity tells a store recreated at the same path from the one the snapshot was taken of)."""
        got = self.q1("RETURN (SELECT sid, n FROM ONLY mirror_meta:memory)")
        if not got or not got.get("sid"):
            got = self.q1("UPSERT mirror_meta:memory SET sid = sid ?? rand::uuid::v4(), n = n ?? 0")
            got = got[0] if isinstance(got, list) else got
        return f"{got['sid']}:{int(got.get('n') or 0)}"

    def graph_generation(self) -> str:
        """This database's identity and knowledge-graph change count (schema 005): what a graph snapshot is
        valid for."""
        ident = self._generation().split(":", 1)[0]
        n = self.q1("RETURN (SELECT VALUE n FROM ONLY mirror_meta:graph)")
        return f"{ident}:g{int(n or 0)}"

    def side_snapshot_path(self, part: str, suffix: str = "json") -> Path | None:
        """Where a mirror kept by another module (``part``: the graph) is saved beside this store."""
        path = self.conn.path
        return (
            None
            if path is None
            else path.parent / f"{path.name}.{self.namespace}.{self.database}.{part}.{suffix}"
        )

    def reload_mirror(self) -> None:
        with paused_collector():
            self._reload_mirror()

    def _reload_mirror(self) -> None:
        self.rows.clear()
        # Whatever made this reload (a console write, a redaction pass) may have changed the graph too: the
        # organise layer's graph mirror reloads from the database, and is not saved as a snapshot before.
        self.graph_version += 1
        gen = self._generation()
        if self._load_full_snapshot(gen):
            self.fill_rows_later()  # a snapshot written before it held rows, or with some dropped
            return
        # The snapshot is out of date (or absent): every row, its vector included, from the database. A vector is
        # one bytes value (schema 006), so this is a bulk read, not 384 floats decoded one by one.
        rows = (
            self.q1(f"SELECT {LIGHT_FIELDS} FROM memory WHERE status NOT IN ['forgotten', 'superseded']")
            or []
        )
        with self._mirror_lock:
            self.index = SearchIndex(self.index_dim)
            self.light.clear()
            self._by_hash.clear()
            self.rows.clear()
            for row in rows:
                self._mirror_put(row)
        if len(rows) >= 1000:  # worth writing now rather than only at close (a crash would repeat this)
            self.save_snapshot()
        self.fill_rows_later()

    def fill_rows(self, chunk: int = 500) -> int:
        """Read the rows the row mirror lacks (an open without a snapshot of them, a write that dropped some), in
        bulk as JSON. Returns how many were read."""
        with self._mirror_lock:
            todo = self.rows.missing(self.light)
        for i in range(0, len(todo), chunk):
            keys = self.rows.missing(todo[i : i + chunk])  # a write may have put some meanwhile
            if not keys:
                continue
            with self.conn.lock:  # read and held under the lock: no write can come between the two
                text = (
                    self.conn.run(
                        self.namespace, self.database, FILL_QUERY, {"ids": [record(k) for k in keys]}
                    )[-1]
                    or ""
                )
                again = []
                for line in text.split("\n") if text else []:
                    row = from_json_row(json.loads(line))
                    if row is None:  # metadata that may hold datetimes: read the ordinary way
                        again.append(json.loads(line)[0])
                    elif row["key"] in self.light:
                        self.rows.put(row.pop("key"), row)
                if again:
                    got = self.conn.run(
                        self.namespace,
                        self.database,
                        f"SELECT {MEMORY_FIELDS} FROM $ids",
                        {"ids": [record(k) for k in again]},
                    )[-1]
                    for r in got or []:
                        if key_of(r["id"]) in self.light:
                            self.rows.put(key_of(r["id"]), plain(r))
        return len(todo)

    def fill_rows_later(self) -> None:
        """In the daemon, read the rows the row mirror lacks in a background thread (see `use_engine_thread`)."""
        if not _fill_in_background or self.rows.filling:
            return
        with self._mirror_lock:
            if len(self.rows) >= len(self.light):
                return
            self.rows.filling = True

        def run() -> None:
            try:
                self.fill_rows(chunk=200)
            except Exception as exc:  # noqa: BLE001 - a closed store; recall reads what is missing itself
                log.info("row mirror of %s/%s not filled: %s", self.namespace, self.database, exc)
            finally:
                self.rows.filling = False

        self.rows.filler = threading.Thread(target=run, name="engram-row-fill", daemon=True)
        self.rows.filler.start()

    @property
    def snapshot_path(self) -> Path | None:
        """Where this store's vectors are kept between runs (derived data: deleting it only slows one start)."""
        path = self.conn.path
        return (
            None
            if path is None
            else path.parent / f"{path.name}.{self.namespace}.{self.database}.vectors.npz"
        )

    def _load_full_snapshot(self, gen: str) -> bool:
        """The whole mirror from the snapshot, when nothing has written a memory since it was taken."""
        path = self.snapshot_path
        if path is None or not path.is_file():
            return False
        try:
            with np.load(path, allow_pickle=False) as z:
                if (
                    int(z["version"]) != SNAPSHOT_VERSION
                    or int(z["dim"]) != self.index_dim
                    or "generation" not in z.files
                    or bytes(z["generation"]).decode() != gen
                ):
                    return False
                keys = text_lines(z["keys"])
                mat = z["vecs"].astype(np.float32)  # float16 values (encode_vector), as the store keeps them
                light = json.loads(zlib.decompress(bytes(z["light"])).decode())
                row_blob = zlib.decompress(bytes(z["row_texts"]))
                row_offsets = z["row_offsets"].tolist()
                postings = _read_postings(z)
                # Optional (a snapshot from before it has none): the two-stage scan's basis.
                projection = (z["c_basis"], int(z["c_basis_at"])) if "c_basis" in z.files else None
        except Exception as exc:  # noqa: BLE001 - a bad snapshot only costs a slower start
            log.warning("mirror snapshot %s unreadable, reading the store: %s", path, exc)
            return False
        order = [row[0] for row in light]
        if keys == order:  # every memory has a vector: the rows are already in the light rows' order
            full, has = mat, np.ones(len(order), dtype=bool)
        else:
            vec_at = {k: i for i, k in enumerate(keys)}
            rows_of = np.asarray([vec_at.get(k, -1) for k in order], dtype=np.int64)
            has = rows_of >= 0
            full = np.zeros((len(order), self.index_dim), dtype=np.float32)
            if has.any():
                full[has] = mat[rows_of[has]]
        index = SearchIndex(self.index_dim)
        index.load(
            order, [row[13] if row[14] is None else row[14] for row in light], full, has, postings, projection
        )
        with self._mirror_lock:
            self.index = index
            self.light.clear()
            self._by_hash.clear()
            # The full rows (row_mirror.py), decoded when a recall first needs one.
            self.rows.load_snapshot(order, row_blob, row_offsets)
            for (
                key,
                mtype,
                tags,
                imp,
                acc,
                hl,
                status,
                pinned,
                last,
                created,
                sess,
                ep,
                chash,
                content,
                _text,
            ) in light:
                self.light[key] = Light(
                    memory_type=mtype,
                    tags=tags,
                    importance=imp,
                    access_count=acc,
                    half_life_days=hl,
                    status=status,
                    pinned=pinned,
                    last_accessed_at=datetime.fromisoformat(last),
                    created_at=datetime.fromisoformat(created),
                    session_id=sess,
                    episode_id=ep,
                    content_hash=chash,
                    content=content,
                )
                if chash:
                    self._by_hash.setdefault(chash, key)
        return True

    def save_snapshot(self) -> None:
        """Write the mirror (vectors, light rows, BM25 postings) with the generation it matches."""
        write = self.capture_snapshot()
        if write is not None:
            write()

    def capture_snapshot(self) -> Callable[[], None] | None:
        """Take the mirror as it is now (under the caller's locks: no write may come between the generation and
        the mirror) and return the writing of the vector snapshot, which the caller may run after letting them go
        (encoding and writing it takes ~0.3 s at 5,000 memories). The other mirrors' snapshots are written here."""
        path = self.snapshot_path
        if path is None:
            return None
        gen = self._generation()  # applies pending bookkeeping first: the mirror then matches this generation
        with self._mirror_lock:
            order = list(self.light)
            keys, mat = self.index.embeddings(order)
            # The times stay datetimes (immutable) until the writing: formatting them is half of this loop.
            light = [
                [
                    k,
                    lt.memory_type,
                    list(lt.tags),
                    lt.importance,
                    lt.access_count,
                    lt.half_life_days,
                    lt.status,
                    lt.pinned,
                    lt.last_accessed_at,
                    lt.created_at,
                    lt.session_id,
                    lt.episode_id,
                    lt.content_hash,
                    lt.content,
                    None if t == lt.content else t,
                ]
                for (k, lt), t in zip(self.light.items(), self.index.texts(order), strict=True)
            ]
            row_texts = [self.rows.snapshot_text(row[0]) or "" for row in light]
            postings = self.index.export_postings([row[0] for row in light])
            projection = self.index.projection()
            extra = {} if projection is None else {"c_basis": projection[0], "c_basis_at": projection[1]}
        for name, write in list(self.snapshot_writers.items()):
            try:
                write()
            except Exception as exc:  # noqa: BLE001 - a snapshot not written only costs a slower start
                log.warning("%s snapshot of %s/%s not written: %s", name, self.namespace, self.database, exc)

        def write_vectors() -> None:
            for row in light:
                row[8], row[9] = row[8].isoformat(), row[9].isoformat()
            encoded = [t.encode() for t in row_texts]
            row_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
            np.cumsum([len(b) for b in encoded], out=row_offsets[1:])
            try:
                with self._snapshot_write_lock:  # a close may write it at the same time: one after the other
                    write_private(
                        path,
                        lambda fh: np.savez(
                            fh,
                            version=SNAPSHOT_VERSION,
                            dim=self.index_dim,
                            vecs=mat.astype(VECTOR_DTYPE),
                            keys=text_array(keys),
                            generation=np.frombuffer(gen.encode(), dtype=np.uint8),
                            light=np.frombuffer(
                                zlib.compress(json.dumps(light, ensure_ascii=False).encode(), 3),
                                dtype=np.uint8,
                            ),
                            # The full rows' JSON texts in one blob (fast to decompress: level 1) and where each ends.
                            row_texts=np.frombuffer(zlib.compress(b"".join(encoded), 1), dtype=np.uint8),
                            row_offsets=row_offsets,
                            p_analyser=np.frombuffer(postings.analyser.encode(), dtype=np.uint8),
                            p_terms=text_array(postings.terms),
                            p_offsets=postings.offsets,
                            p_slots=postings.slots,
                            p_tfs=postings.tfs,
                            p_doc_len=postings.doc_len,
                            **extra,
                        ),
                    )
            except OSError as exc:
                log.warning("vector snapshot %s not written: %s", path, exc)

        return write_vectors

    @property
    def index_dim(self) -> int:
        return getattr(self.index, "dim", 384)

    def _mirror_put(self, row: Mapping[str, Any]) -> None:
        key = key_of(row["id"])
        status = row.get("status", "created")
        with self._mirror_lock:
            if status in ("forgotten", "superseded"):
                self._forget_key(key)
                return
            old = self.light.get(key)
            if old is not None and self._by_hash.get(old.content_hash) == key:
                del self._by_hash[old.content_hash]
            self.index.upsert(
                key, row.get("search_text") or row.get("content", ""), decode_vector(row.get("embedding"))
            )
            self.light[key] = Light(
                memory_type=row["memory_type"],
                tags=list(row.get("tags") or []),
                importance=float(row["importance"]),
                access_count=int(row.get("access_count") or 0),
                half_life_days=float(row["half_life_days"]),
                status=status,
                pinned=bool(row.get("pinned")),
                last_accessed_at=plain(row["last_accessed_at"]),
                created_at=plain(row["created_at"]),
                session_id=row.get("session_id"),
                episode_id=row.get("episode_id"),
                content_hash=row.get("content_hash", ""),
                content=row.get("content", ""),
            )
            if row.get("content_hash"):
                self._by_hash.setdefault(row["content_hash"], key)
            full = all(
                f in row for f in ROW_FIELDS
            )  # read back whole after a write, not a light row read at open
            self.rows.put(key, {f: plain(row[f]) for f in ROW_FIELDS} if full else {})

    def refresh(self, keys: Iterable[str]) -> None:
        """Re-read these memories into the mirror after a write."""
        ids = [record(k) for k in keys]
        if not ids:
            return
        rows = self.q1(f"SELECT {MEMORY_FIELDS}, embedding, search_text FROM $ids", {"ids": ids})
        found = {key_of(r["id"]) for r in rows or []}
        for row in rows or []:
            self._mirror_put(row)
        with self._mirror_lock:
            for k in set(map(key_of, ids)) - found:
                self._forget_key(k)

    # ── memories ─────────────────────────────────────────────
    def _new_row(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        content = with_vector_bytes(fields)
        if content.get("search_text") == content.get("content"):
            # No episode context (an import, a memory outside a session): the search text is the content, which
            # every reader falls back to; written, it would store the text twice (~0.2 KB a memory).
            content.pop("search_text", None)
        if not content.get("status_history"):  # written with the row: the history event would rewrite it
            entry = {"to": content.get("status", "created"), "at": self.clock.now()}
            if content.get("status_reason"):
                entry["reason"] = content["status_reason"]
            content["status_history"] = [entry]
        return content

    def create_memory(self, key: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        # A projection on CREATE trips the engine over the COMPUTED field (3.2.4): read it back instead.
        content = self._new_row(fields)
        rows = self.q1(
            f"CREATE $id CONTENT $fields RETURN NONE; SELECT {MEMORY_FIELDS} FROM $id",
            {"id": record(key), "fields": content},
        )
        # The mirror takes what we just wrote (embedding included) instead of reading it back.
        self._mirror_put(
            {**rows[0], "embedding": content.get("embedding"), "search_text": fields.get("search_text")}
        )
        return plain(rows[0])

    def mirror_fields(self, key: str, **changes: Any) -> None:
        """A write (run with ``memory_rows=()``) changed these fields of a memory as given: the mirror takes them."""
        with self._mirror_lock:
            light = self.light.get(key)
            if light is not None:
                for name, value in changes.items():
                    if hasattr(light, name):
                        setattr(light, name, value)
            self.rows.patch(key, changes)

    def insert_memories(self, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """New memories (key, fields) in one statement, nothing read back (an import's chunk). The mirror takes
        each with `mirror_new`."""
        if rows:
            self.q(
                "INSERT INTO memory $rows RETURN NONE",
                {"rows": [{**self._new_row(f), "id": record(k)} for k, f in rows]},
                memory_rows=(),
            )

    def mirror_new(self, key: str, fields: Mapping[str, Any]) -> None:
        """Put a memory `insert_memories` wrote into the mirror, from the fields it was written with."""
        self._mirror_put({"access_count": 0, "pinned": False, **fields, "id": record(key)})

    def get(self, key: str) -> dict[str, Any] | None:
        rows = self.q1(f"SELECT {MEMORY_FIELDS} FROM $id", {"id": record(key)})
        return plain(rows[0]) if rows else None

    def get_many(self, keys: list[str], *, settled: bool = True) -> dict[str, dict[str, Any]]:
        """Full rows by key. ``settled=False`` reads without applying pending bookkeeping first; the
        counters it would change (access count, last access, status) come from the mirror instead."""
        if not keys:
            return {}
        if settled:
            rows = self.q1(f"SELECT {MEMORY_FIELDS} FROM $ids", {"ids": [record(k) for k in keys]})
            return {key_of(r["id"]): plain(r) for r in rows or []}
        out: dict[str, dict[str, Any]] = {}
        for k in keys:
            row = self.rows.get(k)
            if row is not None:
                out[k] = row
        missing = [k for k in keys if k not in out]
        if missing:
            with self.conn.lock:  # read and held under the lock: no write can come between the two
                got = self.conn.run(
                    self.namespace,
                    self.database,
                    f"SELECT {MEMORY_FIELDS} FROM $ids",
                    {"ids": [record(k) for k in missing]},
                )[-1]
                for r in got or []:
                    row = plain(r)
                    key = key_of(r["id"])
                    if key in self.light:
                        self.rows.put(key, row)
                    out[key] = row
            self.fill_rows_later()
        with self._mirror_lock:
            for key, row in out.items():
                light = self.light.get(key)
                if light is not None:
                    row.update(
                        access_count=light.access_count,
                        last_accessed_at=light.last_accessed_at,
                        status=light.status,
                    )
        return out

    def get_embedding(self, key: str) -> np.ndarray | None:
        """The stored vector of one memory (float32), None when it has none."""
        return decode_vector(self.q1("SELECT VALUE embedding FROM ONLY $id", {"id": record(key)}))

    def find_by_hash(self, digest: str) -> str | None:
        with self._mirror_lock:
            return self._by_hash.get(digest)

    def _forget_key(self, key: str) -> None:
        self.rows.drop([key])
        light = self.light.pop(key, None)
        self.index.remove(key)
        if light is not None and self._by_hash.get(light.content_hash) == key:
            del self._by_hash[light.content_hash]

    def update_memory(self, key: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        rows = self.q1(
            f"UPDATE $id MERGE $changes RETURN {MEMORY_FIELDS}",
            {"id": record(key), "changes": {**with_vector_bytes(changes), "updated_at": self.clock.now()}},
        )
        self.refresh([key])
        return plain(rows[0]) if rows else None

    def merge_into(
        self,
        key: str,
        *,
        access_count: int,
        importance: float,
        tags: list[str],
        merged_from: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Fold a duplicate into an existing memory: summed access, max importance, union of tags."""
        rows = self.q1(
            """UPDATE $id SET
                 access_count += $acc,
                 importance = math::max([importance, $importance]),
                 tags = array::union(tags, $tags),
                 metadata.merged_from = array::union(metadata.merged_from ?? [], [$from]),
                 updated_at = $now;
               UPDATE $id MERGE { metadata: $meta };
               SELECT """
            + MEMORY_FIELDS
            + " FROM $id",
            {
                "id": record(key),
                "acc": access_count,
                "importance": importance,
                "tags": tags,
                "from": merged_from,
                "meta": dict(metadata or {}),
                "now": self.clock.now(),
            },
        )
        self.refresh([key])
        return plain(rows[0]) if rows else None

    def forget_memory(self, key: str, reason: str) -> dict[str, Any] | None:
        """Forget: the skeleton (id, type, scope, dates, history) stays; every field that carries the text goes,
        and the full-text index entry with it, and so do its traces elsewhere in this store (`erase_traces`).
        (The engine's files keep old bytes until `Connection.compact`.)"""
        rows = self.q1(
            "UPDATE $id SET status = 'forgotten', status_reason = $r, status_changed_at = $now, "
            "updated_at = $now, content = '[forgotten]', content_hash = '', search_text = NONE, "
            "embedding = NONE, metadata = {}, tags = [], source = NONE RETURN NONE; "
            f"SELECT {MEMORY_FIELDS} FROM $id",
            {"id": record(key), "r": reason, "now": self.clock.now()},
        )
        if rows:
            self.erase_traces([key])
        self.refresh([key])
        return plain(rows[0]) if rows else None

    def unique_words(self, key: str) -> set[str]:
        """The words (index terms) of this memory that no other memory of this store holds. Read before it is
        erased: the recall queries that hold one of them quote this memory, not the others."""
        with self._mirror_lock:
            light = self.light.get(key)
            text = self.index.text(key) or (light.content if light is not None else "")
            return self.index.unique_terms(key, text) if text else set()

    def erase_traces(self, keys: list[str]) -> None:
        """What erasing these memories removes beyond their own rows (queries/erase_traces.surql): graph entities
        only they mentioned, relations only they evidenced, review-queue items quoting them, their edges."""
        if not keys:
            return
        self.q(query_file("erase_traces.surql"), {"ids": [record(k) for k in keys], "keys": list(keys)})
        self.graph_version += 1  # the organise layer's graph mirror reloads
        self.conn.erased = True
        # A graph snapshot written before holds the erased entities' names, and a mirror dropped for a reload is
        # not saved over it: derived data, removed now (the next start reads the graph from the store).
        for suffix in ("npz", "json"):
            side = self.side_snapshot_path("graph", suffix)
            if side is not None:
                side.unlink(missing_ok=True)

    def scrub_retrieval_log(self, keys: list[str], words: set[str]) -> int:
        """Recall queries are the user's words and stay, except where they quote an erased memory: a logged
        recall that returned one of ``keys`` loses that id and its query text, and so does one whose query holds
        one of ``words`` (words only an erased memory had). Strategy, counts and feedback flags stay for learning.
        Returns the rows changed."""
        from .search_index import tokenize

        rows = self.q1(
            "SELECT id, query, memory_ids CONTAINSANY $keys AS hit FROM retrieval_log "
            "WHERE query != $gone OR memory_ids CONTAINSANY $keys",
            {"keys": list(keys), "gone": FORGOTTEN},
        )
        ids = [
            r["id"]
            for r in rows or []
            if r.get("hit") or (words and words & set(tokenize(r.get("query") or "")))
        ]
        if not ids:
            return 0
        self.q(
            "UPDATE $ids SET query = $gone, feedback_reason = NONE, "
            "memory_ids = memory_ids.filter(|$m| $m NOTINSIDE $keys), results_count = array::len(memory_ids) "
            "RETURN NONE",
            {"ids": ids, "keys": list(keys), "gone": FORGOTTEN},
        )
        self.conn.erased = True
        return len(ids)

    def set_status(
        self, key: str, status: str, reason: str, at: datetime | None = None, **extra: Any
    ) -> dict[str, Any] | None:
        return self.update_memory(
            key,
            {"status": status, "status_reason": reason, "status_changed_at": at or self.clock.now(), **extra},
        )

    def strengthen(self, keys: list[str], when: datetime | None = None) -> None:
        """Seed 000 §6.3: each retrieval counts an access and nudges relevance up (events may revive).

        The mirror counts the access at once. The database write (~15-40 ms for ten rows: each UPDATE
        rewrites the row and runs its events) is queued like `defer`; status changes the events make
        (first retrieval, revival) reach the mirror when it is applied."""
        if not keys:
            return
        when = when or self.clock.now()
        with self._mirror_lock:
            for key in keys:
                light = self.light.get(key)
                if light is not None:
                    light.access_count += 1
                    light.last_accessed_at = when
                n, _ = self._pending_access.get(key, (0, when))
                self._pending_access[key] = (n + 1, when)
            if self._access_since is None:
                self._access_since = time.monotonic()
        self._notify()

    def coactivate(
        self, pairs: list[Mapping[str, Any]], delta: float, when: datetime, kind: str, *, hold: bool = False
    ) -> None:
        """Strengthen co-activation edges (``pairs``: {id, a, b} record ids) by ``delta`` each. ``hold`` (after a
        recall): summed per edge and written with the access counts (`drain_due`), since the engine keeps every
        version of a rewritten edge until compaction and a recall would otherwise rewrite three edges."""
        if not hold:
            self.q(
                query_file("coactivate.surql"),
                {"pairs": [{**p, "d": delta, "n": 1, "at": when, "kind": kind} for p in pairs]},
            )
            return
        with self._mirror_lock:
            for p in pairs:
                d, n, _, _, _ = self._pending_coact.get(str(p["id"]), (0.0, 0, p, when, kind))
                self._pending_coact[str(p["id"])] = (d + delta, n + 1, p, when, kind)
            if self._access_since is None:
                self._access_since = time.monotonic()
        self._notify()

    def defer(
        self, sql: str, params: Mapping[str, Any] | None = None, *, touches_memory: bool = True
    ) -> None:
        """Queue a write to apply after the current answer (before any other query on this store).
        ``touches_memory=False`` promises it writes no memory row (a log row, an edge), so cached rows stay."""
        with self._mirror_lock:
            self._pending_sql.append((sql, dict(params or {}), touches_memory))
        self._notify()

    def _notify(self) -> None:
        if self.on_defer is not None:
            self.on_defer(self)
        else:  # nobody to apply it later: apply it now
            self.drain()

    @property
    def has_pending(self) -> bool:
        return bool(self._pending_access or self._pending_sql or self._pending_coact or self._held_log)

    def held_log_bytes(self, after_s: float) -> int:
        """About what writing the held recall log rows would add to the files, once the oldest has been held for
        ``after_s`` (0 before). When that alone makes the store due, the compaction writes them into the fresh
        copy instead; a few rows are written in place by the bookkeeping thread (`bookkeeping.LOG_AFTER_S`)."""
        since = self._log_since
        if since is None or time.monotonic() - since < after_s:
            return 0
        return len(self._held_log) * LOG_ROW_BYTES

    def drain(self) -> None:
        """Apply the pending bookkeeping now."""
        with self._drain_lock, self.conn.lock:
            self._drain_locked()

    def drain_due(self, access_after_s: float, log_after_s: float = 0.0) -> float | None:
        """What the bookkeeping thread applies: the queued statements now, the access counts and co-activations
        only once the oldest is ``access_after_s`` old, the recall log rows once the oldest is ``log_after_s``
        old. The engine rewrites a whole row for any UPDATE (measured: ~8.5 KB a memory, kept in its log until
        compaction), so a memory recalled a hundred times a minute is written once a minute, not a hundred
        times; a log row costs ~1.3 KB whenever it is written, so held rows are best written by the compaction
        (`Connection.compact` after `drain`), which the daemon runs before ``log_after_s``.
        Returns the seconds until the next held piece is due, or None.

        The pieces take the connection's lock one at a time (access counts ACCESS_CHUNK memories a piece), so a
        recall reading rows the row mirror lacks waits for one piece, not for all (after a compaction, which holds
        the bookkeeping while it copies, 521 memories' counts took 0.9 s at 5,000 memories); a query through `q`,
        which reads what the bookkeeping wrote, waits for the whole drain (`_drain_lock`)."""
        with self._drain_lock:
            with self.conn.lock:
                if (
                    self.conn.copying
                ):  # a compaction copies between requests: a write now would make its copy stale
                    return COPYING_RETRY_S
                with self._mirror_lock:
                    now = time.monotonic()
                    since, log_since = self._access_since, self._log_since
                    hold = (
                        bool(self._pending_access or self._pending_coact)
                        and since is not None
                        and now - since < access_after_s
                    )
                    hold_log = (
                        bool(self._held_log) and log_since is not None and now - log_since < log_after_s
                    )
                work = self._take_pending(keep_access=hold, keep_log=hold_log)
            self._run_pending(work)
            waits = ([since + access_after_s - now] if hold and since is not None else []) + (
                [log_since + log_after_s - now] if hold_log and log_since is not None else []
            )
            return max(0.0, min(waits)) if waits else None

    def _drain_locked(self, keep_access: bool = False, keep_log: bool = False) -> None:
        self._run_pending(self._take_pending(keep_access, keep_log))

    def _take_pending(self, keep_access: bool = False, keep_log: bool = False) -> list[Callable[[], Any]]:
        """The pending bookkeeping, taken off the queues as the writes that apply it (in order)."""
        with self._mirror_lock:
            access, stmts = ({} if keep_access else self._pending_access), self._pending_sql
            coact = {} if keep_access else self._pending_coact
            if not keep_access:
                self._pending_access, self._pending_coact, self._access_since = {}, {}, None
            self._pending_sql = []
            held_log = [] if keep_log else list(self._held_log)
            if not keep_log:
                self._held_log.clear()
                self._log_since = None
        # Each piece on its own: a failed one must neither fail the query that happened to come next nor take
        # the others with it.
        keys = list(access)
        work: list[Callable[[], Any]] = [
            functools.partial(self._write_access, {k: access[k] for k in keys[i : i + ACCESS_CHUNK]})
            for i in range(0, len(keys), ACCESS_CHUNK)
        ]
        if held_log:
            work.append(
                functools.partial(
                    self.conn.run,
                    self.namespace,
                    self.database,
                    "INSERT INTO retrieval_log $rows RETURN NONE",
                    {"rows": held_log},
                )
            )
        if coact:
            pairs = [{**p, "d": d, "n": n, "at": at, "kind": kind} for d, n, p, at, kind in coact.values()]
            work.append(
                functools.partial(
                    self.conn.run,
                    self.namespace,
                    self.database,
                    query_file("coactivate.surql"),
                    {"pairs": pairs},
                )
            )
        for sql, params, touches_memory in stmts:
            if touches_memory:
                self.rows.touched(sql, params)
            work.append(functools.partial(self.conn.run, self.namespace, self.database, sql, params))
        return work

    def _run_pending(self, work: list[Callable[[], Any]]) -> None:
        for step in work:
            try:
                step()
            except Exception as exc:  # noqa: BLE001
                log.warning(
                    "recall bookkeeping for %s/%s not applied: %s", self.namespace, self.database, exc
                )

    def _write_access(self, access: dict[str, tuple[int, datetime]]) -> None:
        groups: dict[int, list[str]] = {}
        for key, (n, _) in access.items():
            groups.setdefault(n, []).append(key)
        sql, params = [], {}
        for i, (n, keys) in enumerate(groups.items()):
            # One timestamp per group: the latest access among them (they are at most a moment apart).
            # Importance first (SET sees the values before this access): it gains what the access adds to the
            # composite (scoring.access_gain), frequency up to 10 accesses and relevance.
            sql.append(
                f"UPDATE $ids{i} SET importance = math::min([1.0, importance + {IMPORTANCE_WEIGHTS['frequency']}"
                f" * (math::min([1.0, (access_count + {n}) / 10.0]) - math::min([1.0, access_count / 10.0]))"
                f" + {IMPORTANCE_WEIGHTS['relevance']} * math::max([0.0, math::min([1.0, relevance_score + "
                f"{ACCESS_RELEVANCE_STEP * n}]) - relevance_score])]), access_count += {n}, "
                f"last_accessed_at = $at{i}, "
                f"relevance_score = math::min([1.0, relevance_score + {ACCESS_RELEVANCE_STEP * n}]) RETURN NONE"
            )
            params[f"ids{i}"] = [record(k) for k in keys]
            params[f"at{i}"] = max(access[k][1] for k in keys)
        # Read back whole rows: the events may have changed status and history, and the row cache is refreshed
        # with what recall will show next time.
        sql.append(f"SELECT {MEMORY_FIELDS} FROM $all")
        params["all"] = [record(k) for k in access]
        rows = self.conn.run(self.namespace, self.database, ";\n".join(sql), params)[-1]
        with self._mirror_lock:
            for row in rows or []:
                key = key_of(row["id"])
                light = self.light.get(key)
                if light is not None:
                    self.rows.put(key, plain(row))
                if light is not None:
                    light.importance = float(row["importance"])
                if light is not None and key not in self._pending_access:
                    light.status = row["status"]
                    light.access_count = int(row["access_count"])
                    light.last_accessed_at = plain(row["last_accessed_at"])
                elif light is not None:
                    light.status = row["status"]

    def list_memories(
        self,
        *,
        where: str = "true",
        params: Mapping[str, Any] | None = None,
        order: str = "created_at DESC",
        limit: int = 100,
        start: int = 0,
    ) -> list[dict[str, Any]]:
        rows = self.q1(
            f"SELECT {MEMORY_FIELDS} FROM memory WHERE {where} ORDER BY {order} LIMIT $limit START $start",
            {**(params or {}), "limit": limit, "start": start},
        )
        return [plain(r) for r in rows or []]

    def export_rows(self, after: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Every memory with every stored field, in id order (the order they were written: ids are ULIDs),
        ``limit`` at a time after the key ``after``; its vector as a list of floats (the export format a person
        can read, and what `restore_row` takes back), each exactly the value stored."""
        where = "WHERE id > $after" if after else ""
        page = "LIMIT $limit" if limit is not None else ""
        rows = [
            plain(r)
            for r in self.q1(
                f"SELECT * OMIT memory_strength FROM memory {where} ORDER BY id {page}",
                {"after": record(after) if after else None, "limit": limit},
            )
            or []
        ]
        for row in rows:
            vec = decode_vector(row.get("embedding"))
            row["embedding"] = None if vec is None else vec.tolist()
        return rows

    def restore_row(self, key: str, fields: Mapping[str, Any]) -> None:
        """Write a record exactly as exported (id and every field), replacing any with the same id."""
        # The CREATE event appends to status_history; put the exported history back exactly.
        self.q(
            "UPSERT $id CONTENT $f RETURN NONE; UPDATE $id SET status_history = $h RETURN NONE",
            {"id": record(key), "f": with_vector_bytes(fields), "h": list(fields.get("status_history", []))},
        )
        self.refresh([key])

    def change_marks(self) -> dict[str, str]:
        """Each memory's id -> what every write moves (updated_at, status, content hash, tags), read as one string:
        how sync finds what changed without decoding every whole row (~4 s for 10,000 through the SDK)."""
        text = (
            self.q1(
                "RETURN array::join((SELECT VALUE record::id(id) + '\x1f' + <string> updated_at + '\x1f' + status "
                "+ '\x1f' + (content_hash ?? '') + '\x1f' + array::join(tags, ',') FROM memory), '\x1e')"
            )
            or ""
        )
        out: dict[str, str] = {}
        for line in text.split("\x1e"):
            key, _, mark = line.partition("\x1f")
            if key:
                out[key] = mark
        return out

    def export_rows_of(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        """`export_rows` for these memories only (the ones sync found changed)."""
        if not keys:
            return []
        rows = [
            plain(r)
            for r in self.q1(
                "SELECT * OMIT memory_strength FROM $ids ORDER BY id", {"ids": [record(k) for k in keys]}
            )
            or []
        ]
        for row in rows:
            vec = decode_vector(row.get("embedding"))
            row["embedding"] = None if vec is None else vec.tolist()
        return rows

    def restore_rows(self, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """`restore_row` for many records in one request (sync writes thousands: ~5 ms a request each)."""
        if not rows:
            return
        self.q(
            "FOR $r IN $rows { UPSERT $r.id CONTENT $r.f RETURN NONE; "
            "UPDATE $r.id SET status_history = $r.h RETURN NONE; };",
            {
                "rows": [
                    {"id": record(k), "f": with_vector_bytes(f), "h": list(f.get("status_history", []))}
                    for k, f in rows
                ]
            },
        )
        self.refresh([k for k, _ in rows])

    def count_by(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """(total, per type, per status). The mirror holds every memory but the forgotten and superseded ones
        (what list_memories pages through): those are counted here in Python, the rest by an indexed query.
        Two GROUP BY over the whole table took ~3 s at 100,000 memories and held every other request meanwhile
        (the TUI's scope tree asks for them as it opens)."""
        t: dict[str, int] = {}
        s: dict[str, int] = {}
        with self._mirror_lock:
            for lt in self.light.values():
                t[lt.memory_type] = t.get(lt.memory_type, 0) + 1
                s[lt.status] = s.get(lt.status, 0) + 1
        rest = self.q1(
            "SELECT memory_type, status, count() AS n FROM memory "
            "WHERE status IN ['forgotten', 'superseded'] GROUP BY memory_type, status"
        )
        for r in rest or []:
            t[r["memory_type"]] = t.get(r["memory_type"], 0) + r["n"]
            s[r["status"]] = s.get(r["status"], 0) + r["n"]
        return sum(s.values()), dict(sorted(t.items())), dict(sorted(s.items()))

    def lifecycle_rows(self) -> list[dict[str, Any]]:
        """What the sweep plans from (lifecycle.Row fields but when each was archived: `archived_since`) for every
        memory not yet forgotten: the mirror's fields, pending recall accesses included. No database read."""
        with self._mirror_lock:
            return [
                {
                    "id": key,
                    "memory_type": lt.memory_type,
                    "status": lt.status,
                    "pinned": lt.pinned,
                    "importance": lt.importance,
                    "access_count": lt.access_count,
                    "half_life_days": lt.half_life_days,
                    "created_at": lt.created_at,
                    "last_accessed_at": lt.last_accessed_at,
                }
                for key, lt in self.light.items()
            ]

    def archived_since(self, keys: Sequence[str], chunk: int = 1000) -> dict[str, datetime]:
        """When each of these memories last changed status (read for the few the sweep may forget: reading it for
        every archived memory fetched each whole row, 2.3 s and 330 MB of engine memory for 43,000 at 100k)."""
        out: dict[str, datetime] = {}
        for i in range(0, len(keys), chunk):
            text = (
                self.q1(
                    "RETURN array::join((SELECT VALUE record::id(id) + ' ' + <string> status_changed_at "
                    "FROM $ids WHERE status_changed_at != NONE), '\n')",
                    {"ids": [record(k) for k in keys[i : i + chunk]]},
                )
                or ""
            )
            for line in text.split("\n"):
                key, _, when = line.partition(" ")
                if key:
                    out[key] = datetime.fromisoformat(when.replace("Z", "+00:00"))
        return out

    def pending_queue_keys(self) -> set[str]:
        rows = self.q1(
            "SELECT VALUE memory_id FROM consolidation_queue WHERE status = 'pending' AND memory_id != NONE"
        )
        return {key_of(r) for r in rows or []}

    def apply_sweep(
        self,
        now: datetime,
        moves: Mapping[str, tuple[str, str]],
        half_lives: Mapping[str, float],
        decay: list[tuple[str, float]],
    ) -> int:
        """Apply a planned sweep (queries/sweep.surql); returns how many memories were newly queued.

        The mirror takes the changes in place, not a rebuild: at 50k memories a rebuild held every client for tens
        of seconds. The sweep's UPDATEs return nothing (they would return every changed row, embeddings included)."""
        groups: dict[tuple[str, str], list[RecordID]] = {}
        for key, (status, reason) in moves.items():
            groups.setdefault((status, reason), []).append(record(key))
        by_value: dict[float, list[RecordID]] = {}
        for key, value in half_lives.items():
            by_value.setdefault(value, []).append(record(key))
        if not (groups or by_value or decay):
            return 0
        result = self.q(
            query_file("sweep.surql"),
            {
                "now": now,
                "moves": [{"ids": ids, "status": st, "reason": why} for (st, why), ids in groups.items()],
                "half_lives": [{"ids": ids, "value": v} for v, ids in by_value.items()],
                "decay": [{"id": record(k), "priority": p} for k, p in decay],
                "forgotten": [record(k) for k, (st, _why) in moves.items() if st == "forgotten"],
            },
        )
        if any(st == "forgotten" for st, _why in moves.values()):
            gone = [k for k, (st, _why) in moves.items() if st == "forgotten"]
            self.erase_traces(gone)
            self.scrub_retrieval_log(gone, set())
            self.conn.erased = True  # the old text stays in the engine's files until the next compaction
        with self._mirror_lock:
            for key, value in half_lives.items():
                if key in self.light:
                    self.light[key].half_life_days = value
            for key, (status, _why) in moves.items():
                if status in ("forgotten", "superseded"):
                    self._forget_key(key)
                elif key in self.light:
                    self.light[key].status = status
        return int(result[-1] or 0)

    def status_counts(self) -> dict[str, int]:
        return self.count_by()[2]

    # ── logs and registries ──────────────────────────────────
    def note_injected(self, last_use: Mapping[str, datetime], now: datetime) -> None:
        """SessionStart injected these memories: their last use moves (lifecycle.injected_last_use), no access is
        counted. The mirror takes it at once; the database write is queued like recall's bookkeeping."""
        with self._mirror_lock:
            for key, at in last_use.items():
                light = self.light.get(key)
                if light is not None:
                    light.last_accessed_at = at
        self.defer(
            "FOR $u IN $items { UPDATE $u.id SET last_accessed_at = $u.at, "
            "metadata.injections = (metadata.injections ?? 0) + 1, metadata.last_injected_at = $now "
            "RETURN NONE; }",
            {"items": [{"id": record(k), "at": at} for k, at in last_use.items()], "now": now},
        )

    def log_retrieval(self, fields: Mapping[str, Any]) -> str:
        """Hold a retrieval_log row; its id is known at once. Held rows are written before any query that names
        the table, at the next compaction (into the compacted copy: no old version left behind), at close, or by
        the bookkeeping thread after `bookkeeping.LOG_AFTER_S`. At most `HELD_LOG_MAX` are held (the oldest
        beyond would be pruned at the compaction anyway)."""
        key = self.new_id()
        with self._mirror_lock:
            self._held_log.append({"id": record(key, "retrieval_log"), **fields})
            if self._log_since is None:
                self._log_since = time.monotonic()
        self._notify()
        return key

    def create(self, table: str, fields: Mapping[str, Any], key: str | None = None) -> dict[str, Any]:
        # The id from the service's id source, not the engine's random one: queue items and logs are shown and
        # listed by id, and a build on SequentialIds must give the same ones every time.
        rows = self.q1("CREATE $t CONTENT $f", {"t": record(key or self.new_id(), table), "f": dict(fields)})
        return plain(rows[0])

    def prune_retrieval_log(self, keep: int) -> None:
        """Keep the newest ``keep`` retrieval_log rows: one is written per recall, the only table that grows with
        use alone (the rows deleted leave the disk at the next compaction)."""
        self.q(
            "LET $cut = (SELECT VALUE created_at FROM retrieval_log ORDER BY created_at DESC LIMIT 1 START $k)[0];"
            " IF $cut != NONE { DELETE retrieval_log WHERE created_at <= $cut RETURN NONE; };",
            {"k": keep},
        )

    def drop_database(self) -> None:
        """Remove this scope database entirely (sessions, after their promotion pass)."""
        self.conn.run(self.namespace, self.database, f"REMOVE DATABASE IF EXISTS `{self.database}`")
        self.conn.erased = True  # its rows stay in the engine's files until the next compaction
        with self._mirror_lock:
            self.index = SearchIndex(self.index_dim)
            self.light.clear()
            self._by_hash.clear()
            self.rows.clear()
