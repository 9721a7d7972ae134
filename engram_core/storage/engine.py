"""The embedded engine: one connection per store file (`Connection`), optionally driven by a thread of its own.

An embedded store can be open in one process only, so the daemon owns every connection. The SDK connection has
one `USE` state, so every call selects its namespace/database under `Connection.lock`. Compaction of the files
is `Connection.compact` (the copying itself: compaction.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from surrealdb import AsyncSurreal, Surreal
from surrealdb.connections.async_ws import AsyncWsSurrealConnection
from surrealdb.connections.blocking_ws import BlockingWsSurrealConnection

from .. import cbor_encode
from ..config import ensure_private_dir, restrict_tree
from ..heap import release_freed_memory
from ..redaction import redact_value
from . import compaction, engine_levels
from .locks import COMPACTION_TURN, CONNECTION, OrderedLock
from .values import CompactionOvertaken, CompactionStopped, EngineRefused, StoreError, io_error

log = logging.getLogger(__name__)
# A store is compacted when its files outgrow their size after the last compaction by half plus this much.
COMPACT_GROWTH = 1.1
COMPACT_SLACK = 1024 * 1024
# A statement that may change rows (anything but a plain read) counts as a write for a compaction copying
# between requests (`Connection.writes`): its copy is stale after one. Mirrors never look at statement text.
MAY_WRITE = re.compile(
    r"\b(?:UPDATE|UPSERT|CREATE|DELETE|INSERT|RELATE|REMOVE|DEFINE|ALTER|REBUILD)\b", re.IGNORECASE
)
cbor_encode.install()  # every request to the engine is encoded by cbor_encode (the SDK's bytes, ~4.5x sooner)


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
        return cast(dict[str, Any], self._wait(cast(Any, self._db).query_raw(sql, session_id=session_id)))

    def use(self, ns: str, db: str) -> None:
        self._wait(self._db.use(ns, db))

    def signin(self, credentials: dict[str, Any], session_id: UUID | None = None) -> Any:
        return self._wait(cast(Any, self._db).signin(credentials, session_id=session_id))

    def attach(self) -> UUID:
        return cast(UUID, self._wait(AsyncWsSurrealConnection.attach(cast(Any, self._db))))

    def detach(self, session: UUID) -> None:
        self._wait(AsyncWsSurrealConnection.detach(cast(Any, self._db), session))

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
                compaction.recover(path)
            self._db = _engine_factory(url)
        except Exception as exc:  # the engine's message names the LOCK file when another process has it
            raise io_error(exc, url) or StoreError(f"cannot open the store at {url}: {exc}") from exc
        self.lock = OrderedLock(CONNECTION, "Connection.lock")
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
        self._compaction = OrderedLock(COMPACTION_TURN, "Connection.compaction_turn")
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
        params = redact_value(dict(params or {}))
        with self.lock:
            try:
                if self._current != (ns, db):
                    self._current = None
                    self._db.use(ns, db)
                    self._current = (ns, db)
                if MAY_WRITE.search(sql):
                    self.writes += 1
                return cast(list[Any], self._db.query(sql, dict(params or {})).execute())
            except Exception as exc:
                translated = io_error(exc, self.url)
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
        return cast(list[dict[str, Any]], response["result"])

    # ── compaction ───────────────────────────────────────────
    # compaction.py says why and how; the copy runs here because it swaps this connection's engine.
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
                    steps = compaction.copy_store(
                        self._db, new, piece_s=compaction.COPY_PIECE_S if piece else None
                    )
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
                raise io_error(exc, self.url) or StoreError(
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
