"""EngramService: the one interface every front end uses (CLI, MCP server, hooks, TUI).

In process it owns the stores (tests, and the daemon itself); ``client.RemoteService`` speaks the same
methods over the daemon's socket. Methods marked ``@api`` are what the daemon serves: their arguments are
validated by pydantic from their type hints, and they return pydantic models or JSON-friendly values.

Stores (one embedded engine per file, owned by one process):
- user scope:     ``$ENGRAM_HOME/user.db``            namespace ``user``, database ``default``
- sessions:       ``$ENGRAM_HOME/sessions.db``        namespace ``session``, database ``s_{ULID}`` each
- project scope:  ``<project>/.claude/engram/project.db``  namespace ``project``, database ``p_{sha256[:12]}``
Sessions live on disk (not ``mem://``) so that a daemon crash cannot lose them before their promotion pass;
their database is removed once that pass has run, which keeps them as ephemeral as seed 000 intends.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationError, validate_call

from . import lifecycle, ranking, retrieval, session_context, session_learning
from .bookkeeping import ACCESS_AFTER_S, Bookkeeper
from .clock import Clock
from .config import (
    Settings,
    ensure_private_dir,
    find_project_root,
    load_settings,
    project_db_name,
    project_store_dir,
)
from .embeddings import Embedder, EmbeddingError, make_embedder, try_embed
from .ids import ulid
from .models import (
    DEFAULT_RECALL_STATUSES,
    CompactedStore,
    CompactReport,
    FeedbackResult,
    HealthCheck,
    HealthReport,
    ImportError_,
    ImportReport,
    InjectionPreview,
    MaintenanceReport,
    Memory,
    MemoryIn,
    MemoryPage,
    MemoryPatch,
    MemoryRecord,
    MemoryType,
    ProjectInfo,
    PromotionReport,
    QueryResult,
    QueryViolation,
    RecallHit,
    RecallResult,
    RecallScores,
    RestoreReport,
    Scope,
    ScopeCounts,
    SessionInfo,
    Stats,
    Status,
    StoreResult,
)
from .paths import engram_home
from .redaction import redact, redact_text, redact_value
from .scoring import DEFAULT_HALF_LIVES, composite_importance, days_between, memory_strength
from .store import Connection, ScopeStore, StoreError, content_hash, key_of, record

F = TypeVar("F", bound=Callable[..., Any])
API_METHODS: dict[str, Callable[..., Any]] = {}
# Methods that take `service.api_lock` themselves around the parts touching shared state, so that the daemon
# can call them without its request lock: a console query running for seconds must not hold other clients.
UNLOCKED_API = frozenset({"run_query"})

PROMOTE_COSINE = 0.9
USER_PROMOTE_COSINE = 0.85
_UNSET = object()  # a cached "no such parameter"
ROOT_CACHE_S = 10.0
RETRIEVAL_LOG_KEEP = 5000  # newest retrieval_log rows kept per store (pruned when the store is compacted)
FUTURE_SKEW = timedelta(minutes=5)  # a created_at later than this is refused (decay cannot start in the future)


class NotFound(LookupError):
    """No memory (or session, or project) has that id."""


class EngramError(ValueError):
    """A request Engram refuses; the message says what was wrong and what to do."""


def api(fn: F) -> F:
    """Expose a service method to the daemon; its arguments are validated from its type hints."""
    checked = counted(validate_call(config={"arbitrary_types_allowed": True})(fn))
    API_METHODS[fn.__name__] = checked
    return checked  # type: ignore[return-value]


# A change counter: every API call that may change memories bumps it, so a front end can poll ``revision()``
# (one cheap call) and reload only when something changed, whichever client made the change.
READ_ONLY_METHODS = frozenset({
    "list_projects", "list_sessions", "get", "list_memories", "stats", "injection_context", "session_summary",
    "export_memories", "health", "revision", "list_consolidations", "list_contradictions", "memory_graph",
    "retrieval_history"})
_revision = 0
_revision_lock = threading.Lock()


def counted(fn: F) -> F:
    """Bump the change counter after ``fn`` runs, unless it only reads (a recall that does not strengthen)."""
    if fn.__name__ in READ_ONLY_METHODS:
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _revision
        try:
            return fn(*args, **kwargs)
        finally:
            if not (fn.__name__ == "recall" and kwargs.get("strengthen") is False):
                with _revision_lock:
                    _revision += 1

    return wrapper  # type: ignore[return-value]


# The result models (ProjectInfo, MemoryPage, InjectionPreview, QueryResult, FeedbackResult…) live in models.py
# so that the daemon's clients can rebuild them without importing the store (see client.py).


class _Session:
    def __init__(self, key: str, store: ScopeStore, project_root: str | None, claude_id: str | None,
                 started_at: datetime) -> None:
        self.key = key
        self.store = store
        self.project_root = project_root
        self.claude_id = claude_id
        self.started_at = started_at
        self.lock = threading.RLock()


class EngramService:
    def __init__(
        self,
        home: Path | str | None = None,
        *,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        recover_sessions: bool = True,
    ) -> None:
        # Everything this process creates (store files the engine writes later included) is owner-only.
        os.umask(0o077)
        try:
            self.home = ensure_private_dir(engram_home(home))
        except OSError as exc:
            raise StoreError(f"Engram's data directory cannot be created or secured ({exc}). "
                             "Point ENGRAM_HOME at a writable directory.") from exc
        self.clock = clock or Clock()
        self.settings = settings or load_settings()
        self.embedder: Embedder = embedder or make_embedder(self.settings)
        self._lock = threading.RLock()
        self._closed = False
        # Held around the service-state parts of methods in UNLOCKED_API (whose slow part runs without it); the
        # daemon replaces it with its own request lock, which it does not take itself for those methods.
        self.api_lock: Any = threading.RLock()
        # ENGRAM_ACCESS_AFTER_S: how long access counts are held (bench/growth.py sets 0 for the old behaviour).
        self._bookkeeper = Bookkeeper(access_after_s=float(os.environ.get("ENGRAM_ACCESS_AFTER_S") or ACCESS_AFTER_S))
        self._param_cache: dict[str, Any] = {}  # see param()
        self._roots: dict[str, tuple[float, str, str]] = {}  # see _project_root()
        self._user_conn = Connection.file(self.home / "user.db")
        self.user = self._open_store(self._user_conn, Scope.user, "default")
        self._sessions_conn = Connection.file(self.home / "sessions.db")
        self._projects: dict[str, tuple[str, ScopeStore]] = {}
        self._project_conns: dict[str, Connection] = {}
        self._sessions: dict[str, _Session] = {}
        # Extension points for the self-organising layer (graph, episodes, associations):
        # after_store(service, store, key, fields) runs after a new memory is written;
        # after_recall(service, result, winners) runs after a recall has been answered;
        # extra_rankers(service, stores, query, qvec, filters, pool) -> [(key, score)] add a third (fourth…)
        # ranked list to the fusion; boosters(service, candidate_key, store, light, context) -> factor.
        # before_store(service, store, key, fields, vector) may add fields to a new memory before it is written
        # (each change after would rewrite the whole row);
        self.before_store: list[Callable[..., None]] = []
        self.after_store: list[Callable[..., None]] = []
        self.after_recall: list[Callable[..., None]] = []
        self.extra_rankers: list[Callable[..., list[tuple[str, float]]]] = []
        self.boosters: list[Callable[..., float]] = []
        from .organise import install as _install_organise  # imported here: organise imports this module

        _install_organise(self)
        self._reattach_sessions()
        if recover_sessions:
            self.recover_stale_sessions()

    # ── lifecycle ────────────────────────────────────────────
    def _open_store(self, conn: Connection, scope: Scope, database: str) -> ScopeStore:
        store = ScopeStore(conn, scope, database)
        store.on_defer = self._bookkeeper.notify
        return store

    def flush(self) -> None:
        """Apply queued recall bookkeeping now (close and every other query on a store do it anyway)."""
        self._bookkeeper.flush()

    def close(self) -> None:
        if self._closed:  # a second close (a test, then its fixture) must not query closed connections
            return
        self._closed = True
        self._bookkeeper.close()
        with self._lock:
            for store in [*(s for _, s in self._projects.values()), self.user]:
                store.save_snapshot()  # the next start reads its vectors from here instead of decoding them
            for conn in [*self._project_conns.values(), self._sessions_conn, self._user_conn]:
                conn.close()
            self._project_conns.clear()
            self._projects.clear()
            self._sessions.clear()

    def __enter__(self) -> EngramService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        return self.clock.now()

    # ── parameters (evolution_state in the user store; manual settings win) ──
    def param(self, key: str, default: Any) -> Any:
        # Read on every recall (scope weights): cached, and dropped by set_param and by console writes.
        cache = self._param_cache
        if key not in cache:
            rows = self.user.q1("SELECT VALUE value FROM evolution_state WHERE key = $k", {"k": key})
            cache[key] = rows[0]["v"] if rows and isinstance(rows[0], dict) and "v" in rows[0] else _UNSET
        value = cache[key]
        return default if value is _UNSET else copy.deepcopy(value)

    def set_param(self, key: str, value: Any) -> None:
        self._param_cache.pop(key, None)
        self.user.q("UPSERT evolution_state SET key = $k, value = {v: $v}, updated_at = time::now() "
                    "WHERE key = $k", {"k": key, "v": value})
        if not self.user.q1("SELECT VALUE key FROM evolution_state WHERE key = $k", {"k": key}):
            self.user.q("CREATE evolution_state SET key = $k, value = {v: $v}", {"k": key, "v": value})

    def half_lives(self) -> dict[str, float]:
        evolved = self.param("decay_half_lives", DEFAULT_HALF_LIVES)
        return {**DEFAULT_HALF_LIVES, **evolved, **(self.settings.half_lives_days or {})}

    def scope_weights(self, profile: str | None = None) -> dict[str, float]:
        if self.settings.scope_weights:
            return {**retrieval.EVOLVED_DEFAULT, **self.settings.scope_weights}
        name = profile or self.settings.scope_weight_profile
        if name == "evolved":
            return {**retrieval.EVOLVED_DEFAULT, **self.param("scope_weights", retrieval.EVOLVED_DEFAULT)}
        if name not in retrieval.SCOPE_PROFILES:
            raise EngramError(f"unknown scope-weight profile {name!r}; choose one of "
                              f"{', '.join(['evolved', *retrieval.SCOPE_PROFILES])}")
        return dict(retrieval.SCOPE_PROFILES[name])

    # ── projects ─────────────────────────────────────────────
    def project_store(self, project: str | Path | None) -> ScopeStore | None:
        """The project's store, opened on first use and registered in the user registry."""
        if project is None:
            return None
        root, db = self._project_root(project)
        with self._lock:
            if db in self._projects:
                return self._projects[db][1]
            path = project_store_dir(root) / "project.db"
            conn = Connection.file(path)
            store = self._open_store(conn, Scope.project, db)
            self._project_conns[db] = conn
            self._projects[db] = (root, store)
            self._register_project(root, db, store)
            return store

    def _project_root(self, project: str | Path) -> tuple[str, str]:
        """(root, database) of the project around ``project``. Finding the root stats every ancestor
        (~2 ms, several times a recall), so it is remembered for a few seconds: long enough for a burst of
        calls, short enough that a new `.git` marker is noticed."""
        cache = self._roots
        now = time.monotonic()
        hit = cache.get(str(project))
        if hit is not None and now - hit[0] < ROOT_CACHE_S:
            return hit[1], hit[2]
        if not Path(project).expanduser().is_dir():
            raise EngramError(f"project {str(project)!r} is not an existing directory: give the project's folder "
                              "(--project DIR, or run inside it)")
        root = str(find_project_root(project))
        _check_project_root(Path(root))
        db = project_db_name(root)
        if len(cache) > 1024:
            cache.clear()
        cache[str(project)] = (now, root, db)
        return root, db

    def _register_project(self, root: str, db: str, store: ScopeStore) -> None:
        name = Path(root).name or root
        self.user.q(
            "UPSERT project_registry SET project_db = $db, project_path = $p, project_name = $n, "
            "last_seen_at = time::now() WHERE project_db = $db", {"db": db, "p": root, "n": name})
        if not self.user.q1("SELECT VALUE id FROM project_registry WHERE project_db = $db", {"db": db}):
            self.user.q("CREATE project_registry SET project_db = $db, project_path = $p, project_name = $n",
                        {"db": db, "p": root, "n": name})
        if not store.q1("SELECT VALUE id FROM project_meta"):
            store.q("CREATE project_meta:current SET project_path = $p, project_name = $n", {"p": root, "n": name})

    def _project_root_of(self, store: ScopeStore) -> str | None:
        for root, s in self._projects.values():
            if s is store:
                return root
        return None

    @api
    def list_projects(self) -> list[ProjectInfo]:
        rows = self.user.q1("SELECT * FROM project_registry ORDER BY last_seen_at DESC")
        out = []
        for r in rows or []:
            opened = r["project_db"] in self._projects
            count = None
            if opened:
                count = len(self._projects[r["project_db"]][1].light)
            out.append(ProjectInfo(project_db=r["project_db"], project_path=r["project_path"],
                                   project_name=r["project_name"], memory_count=count, open=opened,
                                   last_seen_at=r.get("last_seen_at")))
        return out

    # ── sessions ─────────────────────────────────────────────
    def _session_dbs_on_disk(self) -> list[str]:
        info = self._sessions_conn.run("session", "registry", "INFO FOR NS")[-1]
        return sorted((info or {}).get("databases", {}).keys())

    def _reattach_sessions(self) -> None:
        """After a restart, every session database still on disk is an unfinished session: reopen it."""
        for db in self._session_dbs_on_disk():
            if not db.startswith("s_"):
                continue
            store = self._open_store(self._sessions_conn, Scope.session, db)
            meta = store.q1("SELECT * FROM ONLY session_registry:self")
            if not meta:
                continue
            self._sessions[db] = _Session(db, store, meta.get("project_root"), meta.get("claude_session_id"),
                                          meta.get("started_at") or self.now())

    def _session(self, session: str | None, project: str | None = None, *, create: bool = False) -> _Session | None:
        """The live session with this Engram key or Claude session id, if it belongs to ``project`` (when given).

        An unknown id is refused: a typo or another project's id must not open a session of its own. Only the
        daemon's hook events (``create=True``) start one for a Claude session whose SessionStart it missed."""
        if not session:
            return None
        session = redact_text(session)  # as start_session stored it (a real id is a UUID and stays as it is)
        found = None
        with self._lock:
            if session in self._sessions:
                found = self._sessions[session]
            else:
                found = next((s for s in self._sessions.values() if s.claude_id == session), None)
        if found is None:
            if not create:
                raise NotFound(f"no live session {session!r}: it never started, has ended, or the id is mistyped "
                               "(sessions start with the SessionStart hook or start_session)")
            info = self.start_session(project=project, claude_session_id=session)
            return self._sessions[info.session_key]
        if project and found.project_root and self._project_root(project)[0] != found.project_root:
            raise NotFound(f"no live session {session!r} in this project (it belongs to another one)")
        return found

    @api
    def start_session(self, project: str | None = None, claude_session_id: str | None = None,
                      source: str | None = None) -> SessionInfo:
        claude_session_id = redact_text(claude_session_id) if claude_session_id else claude_session_id
        with self._lock:
            if claude_session_id:
                for s in self._sessions.values():
                    if s.claude_id == claude_session_id:
                        s.store.q("UPDATE session_registry:self SET last_seen_at = time::now()")
                        return self._session_info(s, resumed=True)
            key = "s_" + ulid()
            root = self._project_root(project)[0] if project else None
            store = self._open_store(self._sessions_conn, Scope.session, key)
            now = self.now()
            store.q("CREATE session_registry:self SET session_key = $k, claude_session_id = $c, project_root = $p, "
                    "started_at = $t, last_seen_at = $t", {"k": key, "c": claude_session_id, "p": root, "t": now})
            sess = _Session(key, store, root, claude_session_id, now)
            self._sessions[key] = sess
        pstore = self.project_store(root)
        if pstore is not None:
            pstore.q("CREATE session_registry SET session_key = $k, claude_session_id = $c, project_root = $p, "
                     "started_at = $t, last_seen_at = $t", {"k": key, "c": claude_session_id, "p": root, "t": now})
            pstore.q("UPDATE project_meta:current SET session_count += 1, last_session = time::now()")
        return self._session_info(sess)

    def _session_info(self, s: _Session, resumed: bool = False) -> SessionInfo:
        return SessionInfo(session_key=s.key, claude_session_id=s.claude_id, project_root=s.project_root,
                           project_db=project_db_name(s.project_root) if s.project_root else None,
                           started_at=s.started_at, status="active", resumed=resumed)

    @api
    def list_sessions(self) -> list[SessionInfo]:
        return [self._session_info(s) for s in self._sessions.values()]

    @api
    def end_session(self, session: str, reason: str = "ended") -> PromotionReport:
        """Promotion pass (seed 000 §5), then the session database is dropped."""
        sess = self._session(session, create=False)
        assert sess is not None
        reason = redact_text(reason)
        with sess.lock:
            evidence = session_learning.collect(self, sess)
            report = self._promote_session(sess)
            session_learning.store_summary(self, sess, evidence, report)
            session_learning.clear_hook_state(self.home, sess.claude_id)
            pstore = self.project_store(sess.project_root)
            status = "recovered" if reason == "recovered" else "completed"
            if pstore is not None:
                pstore.q("UPDATE session_registry SET status = $st, ended_at = time::now(), end_reason = $r, "
                         "memories_promoted = $n WHERE session_key = $k",
                         {"st": status, "r": reason, "n": len(report.promoted) + len(report.merged), "k": sess.key})
            report.dropped = len(sess.store.light)
            # The evolution schedule (seed 001 §9) counts sessions that ended, once each, here.
            lifecycle.count_session_end(pstore if pstore is not None else self.user)
            sess.store.drop_database()
            with self._lock:
                self._sessions.pop(sess.key, None)
        return report

    def recover_stale_sessions(self, older_than_hours: float | None = None) -> int:
        """Seed 002 §3c: sessions that never ended (crash, killed terminal) get their promotion pass."""
        cutoff = self.now() - timedelta(hours=older_than_hours or self.settings.session_stale_hours)
        n = 0
        for sess in list(self._sessions.values()):
            seen = sess.store.q1("SELECT VALUE last_seen_at FROM ONLY session_registry:self")
            if seen is None or seen < cutoff:
                self.end_session(sess.key, reason="recovered")
                n += 1
        return n

    def _touch_session(self, sess: _Session) -> None:
        sess.store.q("UPDATE session_registry:self SET last_seen_at = time::now()")

    # ── resolving where things live ──────────────────────────
    def _stores(self, scope: str, project: str | None, session: str | None) -> list[ScopeStore]:
        stores: list[ScopeStore] = []
        sess = self._session(session, project) if session else None
        if scope in ("all", "session") and sess is not None:
            stores.append(sess.store)
        if scope in ("all", "project"):
            root = project or (sess.project_root if sess else None)
            pstore = self.project_store(root)
            if pstore is not None:
                stores.append(pstore)
        if scope in ("all", "user"):
            stores.append(self.user)
        return stores

    def _target_store(self, scope: Scope, project: str | None, session: str | None) -> ScopeStore:
        if scope == Scope.user:
            return self.user
        if scope == Scope.project:
            root = project or (self._session(session).project_root if session else None)  # type: ignore[union-attr]
            store = self.project_store(root)
            if store is None:
                raise EngramError("project scope needs a project: run inside one or pass --project DIR")
            return store
        sess = self._session(session, project)
        if sess is None:
            raise EngramError("session scope needs a session id (the MCP server and hooks pass theirs)")
        return sess.store

    def _all_open_stores(self) -> list[ScopeStore]:
        return [*(s.store for s in self._sessions.values()), *(s for _, s in self._projects.values()), self.user]

    def locate(self, memory_id: str, project: str | None = None, session: str | None = None) -> tuple[ScopeStore, str]:
        """The store holding this memory among the caller's own: its session, its project (the given one or the
        session's) and the user scope. Another project's ids are not found from here (the CLI, MCP and hooks
        always name their project)."""
        key = key_of(memory_id.strip())
        if not key:
            raise EngramError("give a memory id")
        # A caller that names neither (an in-process tool such as the TUI's own service) searches what is open.
        stores = self._stores("all", project, session) if (project or session) else self._all_open_stores()
        for store in stores:
            if key in store.light or store.get(key) is not None:
                return store, key
        where = "this project, its session or user scope" if (project or session) else "any open store"
        raise NotFound(f"no memory with id {key!r} in {where} (check `engram recall` for ids)")

    # ── writing ──────────────────────────────────────────────
    def _previous_in_episode(self, store: ScopeStore, episode: str | None, session_id: str | None) -> list[str]:
        group = episode or session_id
        if not group:
            return []
        rows = store.q1(
            "SELECT content, created_at FROM memory WHERE (episode_id = $g OR session_id = $g) "
            "AND status != 'forgotten' ORDER BY created_at DESC LIMIT $n",
            {"g": group, "n": max(1, ranking.DEFAULT_FUSION.context_prev)})
        return [r["content"] for r in reversed(rows or [])]

    def _prepare(self, mem: MemoryIn, store: ScopeStore, sess: _Session | None,
                 age_dates: bool = False) -> tuple[dict[str, Any], list[str]]:
        # Every text field, whole, before anything is derived from it (hash, episode, search text, embedding).
        content, found = redact(mem.content)
        kinds = [r.kind for r in found]
        metadata: dict[str, Any] = redact_value(mem.metadata, kinds)  # type: ignore[assignment]
        tags: list[str] = redact_value(mem.tags, kinds)  # type: ignore[assignment]
        # MemoryIn already redacted its tags (before lower-casing them): report what it replaced
        kinds += [k for t in tags for k in re.findall(r"\[redacted:([a-z0-9_]+)\]", t)]
        source = redact_value(mem.source, kinds)
        now = self.now()
        created = mem.created_at or now
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        if created > now + FUTURE_SKEW:
            raise EngramError(f"created_at {created.isoformat()} is in the future; give the time it was created")
        episode = metadata.get("episode_id") if isinstance(metadata.get("episode_id"), str) else None
        fields: dict[str, Any] = {
            "content": content,
            "content_hash": content_hash(content),
            "memory_type": mem.memory_type.value,
            "scope": store.scope.value,
            "tags": tags,
            "importance": mem.importance,
            "confidence": mem.confidence,
            "half_life_days": lifecycle.half_life_for(store.scope.value, mem.memory_type.value, self.half_lives()),
            "metadata": metadata,
            "source": source,
            "session_id": sess.key if sess else None,
            "episode_id": episode,
            "created_at": created,
            "updated_at": now,
            # An imported memory keeps its creation date; its decay counts from now unless `age_dates` (then
            # it is as old as it says, and the next sweep may archive it at once).
            "last_accessed_at": created if age_dates and mem.created_at is not None else max(created, now),
            "status": "created",
            "status_reason": "stored",
        }
        if kinds:
            fields["metadata"] = {**metadata, "redactions": kinds}
        return fields, kinds

    def _search_text(self, store: ScopeStore, fields: dict[str, Any], pending: dict[str, list[str]]) -> str:
        group = fields.get("episode_id") or fields.get("session_id")
        prev = pending.get(group) if group else None
        if prev is None:
            prev = self._previous_in_episode(store, fields.get("episode_id"), fields.get("session_id"))
        text = ranking.contextual_text(fields["content"], prev)
        if group:
            pending[group] = [*(prev or []), fields["content"]][-max(1, ranking.DEFAULT_FUSION.context_prev):]
        return text

    def _write_batch(self, items: list[MemoryIn], project: str | None, session: str | None,
                     age_dates: bool = False) -> list[StoreResult]:
        """Validate, redact, embed in one batch, then write each (or merge an exact duplicate)."""
        prepared = []
        pending: dict[str, list[str]] = {}
        for mem in items:
            store = self._target_store(mem.scope, project, session)
            sess = self._session(session, project) if mem.scope == Scope.session else None
            fields, kinds = self._prepare(mem, store, sess, age_dates)
            search_text = self._search_text(store, fields, pending)
            prepared.append((mem, store, fields, kinds, search_text))
        vecs, why = try_embed(self.embedder, [p[4] for p in prepared])
        results = []
        for i, (_mem, store, fields, kinds, search_text) in enumerate(prepared):
            dup = store.find_by_hash(fields["content_hash"])
            if dup is not None:
                row = store.merge_into(dup, access_count=0, importance=fields["importance"], tags=fields["tags"],
                                       merged_from="duplicate-store")
                assert row is not None
                results.append(StoreResult(
                    action="merged", memory=self._to_memory(row, store), redactions=kinds,
                    message=f"an identical memory already exists in {store.scope.value} scope; merged into {dup}"))
                continue
            fields["search_text"] = search_text
            if vecs is not None:
                fields["embedding"] = [float(x) for x in vecs[i]]
            key = ulid()
            for hook in self.before_store:
                hook(self, store, key, fields, vecs[i] if vecs is not None else None)
            row = store.create_memory(key, fields)
            for hook in self.after_store:
                hook(self, store, key, fields)
            msg = f"stored in {store.scope.value} scope"
            if why:
                msg += f" without an embedding ({why}); BM25 will still find it"
            if kinds:
                msg += f"; redacted {len(kinds)} secret(s): {', '.join(sorted(set(kinds)))}"
            results.append(StoreResult(action="created", memory=self._to_memory(row, store), redactions=kinds,
                                       message=msg))
        return results

    @api
    def store(self, memory: MemoryIn, project: str | None = None, session: str | None = None) -> StoreResult:
        """Store one memory (secrets redacted first); an exact duplicate in the same scope is merged, and says so."""
        if self.settings.disabled:
            raise EngramError("Engram is disabled for this project (disabled: true in .claude/engram.local.md)")
        with self._lock:
            result = self._write_batch([memory], project, session)[0]
        if session:
            sess = self._session(session, project)
            if sess:
                self._touch_session(sess)
        return result

    @api
    def store_many(self, memories: list[MemoryIn], project: str | None = None,
                   session: str | None = None) -> list[StoreResult]:
        with self._lock:
            return self._write_batch(memories, project, session)

    @api
    def import_lines(self, lines: list[str], project: str | None = None, session: str | None = None,
                     first_line: int = 1, dates: Literal["keep", "age"] = "keep",
                     dry_run: bool = False, skip_bad: bool = False) -> ImportReport:
        """JSONL import, validated whole first: a bad line is reported with its number and, unless ``skip_bad``,
        nothing of the batch is stored.

        ``dates``: "keep" (default) keeps each line's created_at and counts its decay from the import, so old
        history is not forgotten wholesale; "age" treats it as last used when it was created. The report says
        what the next sweep would do to these memories; ``dry_run`` stores nothing and reports only that (and
        the bad lines: `engram import` checks the whole file this way before it stores anything)."""
        good: list[MemoryIn] = []
        failed: list[ImportError_] = []
        for n, line in enumerate(lines, start=first_line):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("each line must be a JSON object")
                mem = MemoryIn(**data)
                if mem.scope == Scope.session and not session:
                    raise EngramError("scope session needs --session (the id of a live session)")
                created = mem.created_at.replace(tzinfo=mem.created_at.tzinfo or UTC) if mem.created_at else None
                if created is not None and created > self.now() + FUTURE_SKEW:
                    raise ValueError(f"created_at {created.isoformat()} is in the future")
                good.append(mem)
            except (json.JSONDecodeError, ValueError, ValidationError, TypeError) as exc:
                failed.append(ImportError_(line=n, error=_short_error(exc)))
        report = ImportReport(stored=0, merged=0, failed=failed, total_lines=sum(1 for x in lines if x.strip()),
                              dates=dates, dry_run=dry_run, next_sweep=self._import_preview(good, dates == "age"))
        if dry_run or (failed and not skip_bad):
            return report
        for chunk_start in range(0, len(good), 64):
            try:
                with self._lock:
                    results = self._write_batch(good[chunk_start:chunk_start + 64], project, session,
                                                age_dates=dates == "age")
            except EngramError as exc:
                raise EngramError(f"import stopped: {exc}") from exc
            report.stored += sum(r.action == "created" for r in results)
            report.merged += sum(r.action == "merged" for r in results)
        return report

    def _import_preview(self, memories: list[MemoryIn], age_dates: bool) -> dict[str, int]:
        """What the next sweep would do to these memories, judged on their own dates and scores."""
        now = self.now()
        hl = self.half_lives()
        out: dict[str, int] = {}
        for scope in ("project", "user"):
            rows = []
            for i, m in enumerate(memories):
                if m.scope.value != scope:
                    continue
                created = m.created_at or now
                if created.tzinfo is None:
                    created = created.replace(tzinfo=UTC)
                rows.append(lifecycle.Row(
                    key=str(i), memory_type=m.memory_type.value, status="created", pinned=False,
                    importance=m.importance, access_count=0, half_life_days=lifecycle.half_life_for(
                        scope, m.memory_type.value, hl), created_at=created,
                    last_accessed_at=created if age_dates and m.created_at is not None else max(created, now)))
            plan = lifecycle.plan_sweep(rows, scope, now, hl)
            for status, n in plan.counts().items():
                out[status] = out.get(status, 0) + n
            out["below_forget_threshold"] = out.get("below_forget_threshold", 0) + plan.below_forget
            out["queued_for_consolidation"] = out.get("queued_for_consolidation", 0) + len(plan.decay_queue)
        return {k: v for k, v in out.items() if v}

    # ── reading ──────────────────────────────────────────────
    def _to_memory(self, row: dict[str, Any], store: ScopeStore) -> Memory:
        now = self.now()
        strength = memory_strength(row["importance"], row["half_life_days"], row["access_count"],
                                   row["last_accessed_at"], now)
        quality = composite_importance(
            days_since_update=days_between(row["updated_at"], now), access_count=row["access_count"],
            relevance=row.get("relevance_score", 0.0), confidence=row.get("confidence", 0.7),
            outcome_impact=row.get("outcome_impact", 0.0), user_feedback=row.get("user_feedback", 0.0),
            memory_type=row["memory_type"])
        data = {k: v for k, v in row.items() if k in Memory.model_fields and v is not None}
        data.update(id=key_of(row["id"]), scope=store.scope.value, memory_strength=strength, quality=quality)
        data.setdefault("metadata", {})
        return Memory(**data)

    @api
    def get(self, memory_id: str, project: str | None = None, session: str | None = None) -> Memory:
        store, key = self.locate(memory_id, project, session)
        row = store.get(key)
        if row is None:
            raise NotFound(f"no memory with id {key!r}")
        return self._to_memory(row, store)

    @api
    def recall(
        self,
        query: str,
        project: str | None = None,
        session: str | None = None,
        limit: int = Field(10, ge=1, le=200),
        scope: Literal["all", "session", "project", "user"] = "all",
        types: list[MemoryType] | None = None,
        tags: list[str] | None = None,
        statuses: list[Status] | None = None,
        profile: str | None = None,
        strengthen: bool = True,
        log: bool = True,
    ) -> RecallResult:
        """Hybrid recall across scopes. Every recall strengthens what it returns and is logged."""
        if not query.strip():
            raise EngramError("the query is empty: say what to recall")
        with self._bookkeeper.busy():
            return self._recall(query, project, session, limit, scope, types, tags, statuses, profile, strengthen,
                                log)

    def _recall(self, query: str, project: str | None, session: str | None, limit: int,
                scope: Literal["all", "session", "project", "user"], types: list[MemoryType] | None,
                tags: list[str] | None, statuses: list[Status] | None, profile: str | None, strengthen: bool,
                log: bool) -> RecallResult:
        t0 = time.perf_counter()
        stores = self._stores(scope, project, session)
        weights = self.scope_weights(profile)
        qvec = None
        degraded = None
        if getattr(self.embedder, "available", False):
            vecs, degraded = try_embed(self.embedder, [query])
            qvec = vecs[0] if vecs is not None else None
        else:
            degraded = f"no embedding provider ({self.embedder.name}): BM25 only"
        filters = retrieval.Filters(
            statuses={s.value for s in (statuses or DEFAULT_RECALL_STATUSES)},
            types={t.value for t in types} if types else None,
            tags={t.lower() for t in tags} if tags else None)
        extra = [r(self, stores, query, qvec, filters) for r in self.extra_rankers]
        boosters = [functools.partial(b, self) for b in self.boosters]
        winners = retrieval.rank(stores, query, qvec, limit=limit, weights=weights, filters=filters, now=self.now(),
                                 extra=extra, boosters=boosters, context={"session": session, "project": project})
        by_store: dict[int, tuple[ScopeStore, list[str]]] = {}
        for c in winners:
            by_store.setdefault(id(c.store), (c.store, []))[1].append(c.key)
        rows: dict[str, dict[str, Any]] = {}
        for c_store, keys in by_store.values():
            if strengthen:  # counted in the mirror now, written once the answer is out
                c_store.strengthen(keys, when=self.now())
            rows.update(c_store.get_many(keys, settled=False))
        hits = []
        for c in winners:
            row = rows.get(c.key)
            if row is None:
                continue
            memory = self._to_memory(row, c.store)
            if c.also_in:  # seed 002 §6c: the copy kept carries the tags of the copies folded into it
                memory.tags = list(dict.fromkeys([*memory.tags, *c.tags]))
            hits.append(RecallHit(memory=memory, also_in=c.also_in, scores=RecallScores(
                bm25=c.bm25, bm25_rank=c.bm25_rank, vector=c.vector, vector_rank=c.vector_rank, fused=c.fused,
                scope_weight=c.scope_weight, strength=c.strength, final=c.final)))
        took = (time.perf_counter() - t0) * 1000
        strategy: Literal["hybrid", "bm25"] = "hybrid" if qvec is not None else "bm25"
        log_id = None
        if log:
            # The log lives in the project (else user) store; scope="session" without a session has no stores.
            log_store = next((st for st in stores if st.scope != Scope.session), None)
            if log_store is None:
                log_store = self.project_store(project) or self.user
            log_id = log_store.log_retrieval({
                "query": redact_text(query)[:2000], "strategy": strategy, "results_count": len(hits),
                "memory_ids": [h.memory.id for h in hits], "scopes": [h.memory.scope.value for h in hits],
                "types": [h.memory.memory_type.value for h in hits], "took_ms": took,
                "session_id": self._session(session, project).key if session else None,  # type: ignore[union-attr]
                "query_type": profile, "created_at": self.now()})
        result = RecallResult(query=query, strategy=strategy, degraded=degraded, scope_weights=weights, hits=hits,
                              took_ms=took, log_id=log_id)
        for hook in self.after_recall:
            hook(self, result, winners)
        return result

    @api
    def list_memories(
        self,
        scope: Literal["session", "project", "user"] = "project",
        project: str | None = None,
        session: str | None = None,
        memory_type: MemoryType | None = None,
        status: Status | None = None,
        tag: str | None = None,
        text: str | None = None,
        order: Literal["created_at", "updated_at", "last_accessed_at", "importance", "access_count",
                       "memory_strength", "memory_type", "status", "content"] = "created_at",
        descending: bool = True,
        offset: int = Field(0, ge=0),
        limit: int = Field(100, ge=1, le=5000),
    ) -> MemoryPage:
        """One page of a scope's memories, filtered and sorted (the TUI pages through this).

        Searchable memories are filtered and sorted in the in-process mirror and only the page is read from the
        database: a full-table ORDER BY + count() costs ~0.8 s at 10k rows. Forgotten and superseded memories
        (not mirrored) come from an indexed query and are merged in."""
        store = self._target_store(Scope(scope), project, session)
        if order != "updated_at" and status not in (Status.forgotten, Status.superseded):
            return self._list_from_mirror(store, memory_type, status, tag, text, order, descending, offset, limit)
        cond, params = _memory_filter("true", memory_type, status, tag, text)
        rows = store.list_memories(where=cond, params=params, order=f"{order} {'DESC' if descending else 'ASC'}",
                                   limit=limit, start=offset)
        total = store.q1(f"SELECT count() AS n FROM memory WHERE {cond} GROUP ALL", params)
        return MemoryPage(items=[self._to_memory(r, store) for r in rows],
                          total=int(total[0]["n"]) if total else 0, offset=offset, limit=limit)

    def _list_from_mirror(self, store: ScopeStore, memory_type: MemoryType | None, status: Status | None,
                          tag: str | None, text: str | None, order: str, descending: bool, offset: int,
                          limit: int) -> MemoryPage:
        now = self.now()
        needle = text.lower() if text else None
        tag_l = tag.lower() if tag else None

        def sort_value(v: Any) -> Any:
            return v.lower() if isinstance(v, str) and order == "content" else v

        entries: list[tuple[Any, str, dict[str, Any] | None]] = []
        with store._mirror_lock:  # noqa: SLF001 - the mirror is the store's, read under its lock
            for key, lt in store.light.items():
                if ((memory_type and lt.memory_type != memory_type.value) or (status and lt.status != status.value)
                        or (tag_l and tag_l not in lt.tags) or (needle and needle not in lt.content.lower())):
                    continue
                value = (memory_strength(lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now)
                         if order == "memory_strength" else getattr(lt, order))
                entries.append((sort_value(value), key, None))
        if status is None:
            cond, params = _memory_filter("status IN ['forgotten', 'superseded']", memory_type, None, tag, text)
            for row in store.list_memories(where=cond, params=params, limit=1_000_000):
                value = (self._to_memory(row, store).memory_strength if order == "memory_strength" else row.get(order))
                entries.append((sort_value(value), key_of(row["id"]), row))
        entries.sort(key=lambda e: (e[0], e[1]), reverse=descending)
        page = entries[offset:offset + limit]
        fetched = store.get_many([k for _, k, row in page if row is None])
        items = []
        for _, key, row in page:
            full = row if row is not None else fetched.get(key)
            if full is not None:
                items.append(self._to_memory(full, store))
        return MemoryPage(items=items, total=len(entries), offset=offset, limit=limit)

    # ── changing ─────────────────────────────────────────────
    @api
    def update(self, memory_id: str, patch: MemoryPatch, project: str | None = None,
               session: str | None = None) -> Memory:
        store, key = self.locate(memory_id, project, session)
        changes = patch.model_dump(exclude_none=True)
        if not changes:
            raise EngramError("nothing to change: give content, tags, importance, confidence, type, pinned, "
                              "metadata or user_feedback")
        if "tags" in changes:
            changes["tags"] = redact_value(changes["tags"])
        if "content" in changes:
            content, found = redact(changes["content"])
            changes["content"] = content
            changes["content_hash"] = content_hash(content)
            changes["search_text"] = content
            vecs, _ = try_embed(self.embedder, [content])
            if vecs is not None:
                changes["embedding"] = [float(x) for x in vecs[0]]
        if "memory_type" in changes:
            if changes["memory_type"] == "working" and store.scope != Scope.session:
                raise EngramError("working memories are session-only")
            changes["half_life_days"] = lifecycle.half_life_for(store.scope.value, changes["memory_type"],
                                                                self.half_lives())
        if "metadata" in changes:
            current = store.get(key) or {}
            changes["metadata"] = {**current.get("metadata", {}), **redact_value(changes["metadata"])}
        row = store.update_memory(key, changes)
        if row is None:
            raise NotFound(f"no memory with id {key!r}")
        return self._to_memory(row, store)

    @api
    def set_status(self, memory_id: str, status: Status, reason: str = "set by user",
                   project: str | None = None, session: str | None = None) -> Memory:
        """Move a memory to a lifecycle state (archive, restore to active…). Erasing (forgotten) is `forget` with
        erase and confirm, never a status change by the way."""
        if status == Status.forgotten:
            raise EngramError("forgotten erases content and embedding: use forget with erase=true and confirm=true")
        store, key = self.locate(memory_id, project, session)
        row = store.set_status(key, status.value, redact_text(reason), at=self.now())
        if row is None:
            raise NotFound(f"no memory with id {key!r}")
        return self._to_memory(row, store)

    @api
    def forget(self, memory_id: str, project: str | None = None, session: str | None = None,
               reason: str = "forgotten on request", erase: bool = False, confirm: bool = False) -> Memory:
        """Forget = archive (seed 002 `/forget`: a soft delete). The memory leaves recall and injection but keeps
        its content, so `set_status … active` brings it back. ``erase`` (with ``confirm``) is the separate, final
        act: the skeleton stays for history; content, search text, hash, embedding, tags, source and metadata are
        cleared (seed 000 §4 `forgotten`; docs/security.md says what the engine's files keep)."""
        store, key = self.locate(memory_id, project, session)
        reason = redact_text(reason)
        if erase and not confirm:
            raise EngramError("erasing clears this memory's content and embedding for good: "
                              "confirm it (confirm=true, or --yes on the command line)")
        if erase:
            words = store.unique_words(key)
            row = store.forget_memory(key, reason)
            store.conn.erased = True  # the old bytes stay in the engine's files until the next compaction
            # Recall logs live in project stores (else the user's): any may hold a recall that returned it.
            if store.scope == Scope.user:
                self._open_projects(None, all_projects=True)
            for log_store in self._all_open_stores():
                if log_store.scope != Scope.session:
                    log_store.scrub_retrieval_log([key], words)
        else:
            row = store.set_status(key, Status.archived.value, f"{reason} (archived; restorable)", at=self.now())
        if row is None:
            raise NotFound(f"no memory with id {key!r}")
        return self._to_memory(row, store)

    # ── promotion ────────────────────────────────────────────
    def _copy_up(self, source: ScopeStore, key: str, target: ScopeStore, reason: str,
                 threshold: float) -> tuple[str, str]:
        """Promote or merge one memory into a higher scope; returns (action, target key)."""
        row = source.get(key)
        if row is None:
            raise NotFound(f"no memory with id {key!r}")
        source_ref = f"{source.scope.value}:{key}"
        emb = source.get_embedding(key)
        dup = target.find_by_hash(row["content_hash"])
        if dup is None and emb:
            import numpy as np

            near = target.index.vector(np.asarray(emb, dtype=np.float32), 1)
            if near and near[0][1] > threshold and target.light.get(near[0][0]) is not None:
                dup = near[0][0]
        if dup is not None:
            variants = {}
            existing = target.get(dup) or {}
            if existing.get("content_hash") != row["content_hash"]:
                # Near, not identical: keep the other wording so an update is never silently lost.
                variants = {"merged_variants": [*existing.get("metadata", {}).get("merged_variants", []),
                                                {"from": source_ref, "content": row["content"]}]}
            target.merge_into(dup, access_count=row["access_count"], importance=row["importance"],
                              tags=row["tags"], merged_from=source_ref, metadata=variants)
            action, target_key = "merged", dup
        else:
            target_key = ulid()
            fields = {k: row[k] for k in ("content", "content_hash", "memory_type", "tags", "importance",
                                          "confidence", "access_count", "relevance_score", "half_life_days",
                                          "source", "episode_id", "metadata", "created_at", "last_accessed_at")
                      if row.get(k) is not None}
            fields["half_life_days"] = lifecycle.half_life_for(target.scope.value, row["memory_type"],
                                                               self.half_lives())
            fields.update(scope=target.scope.value, promoted_from=source_ref,
                          promotion_chain=[*row.get("promotion_chain", []), source_ref],
                          status="active", status_reason=f"promoted from {source.scope.value}",
                          search_text=row["content"])
            fields["metadata"] = {**row.get("metadata", {}), "promoted_at": self.now().isoformat()}
            if emb:
                fields["embedding"] = emb
            if row["memory_type"] == "working":
                raise EngramError("working memories are session scratch space and are never promoted")
            target.create_memory(target_key, fields)
            # In its new scope the memory gets what any new memory gets there: entities and relations in that
            # scope's graph, an episode, contradiction checks against that scope's memories.
            for hook in self.after_store:
                hook(self, target, target_key, fields)
            action = "promoted"
        target.create("promotion_log", {"source_id": source_ref, "source_scope": source.scope.value,
                                        "target_id": f"{target.scope.value}:{target_key}",
                                        "target_scope": target.scope.value, "action": action, "reason": reason})
        return action, target_key

    def _promote_session(self, sess: _Session) -> PromotionReport:
        report = PromotionReport(session_key=sess.key)
        target = self.project_store(sess.project_root) or self.user
        thresholds = self.param("promotion_thresholds", {"importance": 0.5, "access_count": 2})
        for key, light in list(sess.store.light.items()):
            row = sess.store.get(key)
            if row is None:
                continue
            explicit = bool(row.get("metadata", {}).get("remember"))
            eligible = light.memory_type != "working" and light.status not in ("forgotten", "superseded") and (
                explicit or light.importance >= 0.85
                or (light.importance >= thresholds["importance"] and light.access_count >= thresholds["access_count"]))
            if not eligible:
                report.skipped += 1
                continue
            action, tkey = self._copy_up(sess.store, key, target, "session end", PROMOTE_COSINE)
            (report.promoted if action == "promoted" else report.merged).append(f"{target.scope.value}:{tkey}")
        report.message = (f"{len(report.promoted)} promoted, {len(report.merged)} merged into existing memories, "
                          f"{report.skipped} left to expire")
        return report

    @api
    def promote(self, memory_id: str, target_scope: Literal["project", "user"] | None = None,
                project: str | None = None, session: str | None = None) -> PromotionReport:
        """Explicit promotion, whatever the scores: session → project, project → user."""
        store, key = self.locate(memory_id, project, session)
        if store.scope == Scope.user:
            raise EngramError("this memory is already in user scope, the highest")
        target_name = target_scope or ("project" if store.scope == Scope.session else "user")
        if target_name == "project":
            if store.scope != Scope.session:
                raise EngramError("only a session memory can be promoted to project scope")
            root = project or next((s.project_root for s in self._sessions.values() if s.store is store), None)
            target = self.project_store(root)
            if target is None:
                raise EngramError("this session has no project; promote to user scope instead")
        else:
            target = self.user
        action, tkey = self._copy_up(store, key, target, "explicit", PROMOTE_COSINE)
        report = PromotionReport(message=f"{action} into {target.scope.value} scope as {tkey}")
        (report.promoted if action == "promoted" else report.merged).append(f"{target.scope.value}:{tkey}")
        return report

    def _promote_project_to_user(self, store: ScopeStore) -> int:
        """Seed 000 §5: importance ≥ 0.7, access ≥ 5, semantic/procedural, seen in ≥ 2 projects."""
        import numpy as np

        promoted = 0
        others = [s for db, (_r, s) in self._projects.items() if s is not store]
        for key, light in list(store.light.items()):
            if (light.memory_type not in ("semantic", "procedural") or light.importance < 0.7
                    or light.access_count < 5 or light.status not in ("active", "created")):
                continue
            row = store.get(key)
            if row is None or row.get("metadata", {}).get("promoted_to_user"):
                continue
            emb = store.index.embedding(key)
            seen = 1
            for other in others:
                if other.find_by_hash(light.content_hash):
                    seen += 1
                elif emb is not None:
                    near = other.index.vector(np.asarray(emb), 1)
                    if near and near[0][1] > USER_PROMOTE_COSINE:
                        seen += 1
            if seen < 2:
                continue
            action, tkey = self._copy_up(store, key, self.user, f"seen in {seen} projects", USER_PROMOTE_COSINE)
            store.update_memory(key, {"metadata": {**row.get("metadata", {}), "promoted_to_user": f"user:{tkey}"}})
            promoted += 1
        return promoted

    # ── compaction (store.Connection.compact says why it is ours) ──
    def _connections(self) -> list[tuple[Connection, list[ScopeStore]]]:
        with self._lock:
            out = [(self._user_conn, [self.user]), (self._sessions_conn, [s.store for s in self._sessions.values()])]
            out += [(self._project_conns[db], [store]) for db, (_, store) in self._projects.items()]
        return out

    @api
    def compact(self, project: str | None = None, only_due: bool = False) -> CompactReport:
        """Rewrite store files with their live data only: text that forget erased, dropped sessions and the old
        row versions every update leaves behind go from the disk. ``only_due``: just the stores that have erased
        something or grew by half since their last compaction (the daemon runs this when idle)."""
        wanted = self.project_store(project) if project else None
        report = CompactReport()
        with self._lock:
            for conn, stores in self._connections():
                if wanted is not None and wanted not in stores:
                    continue
                if only_due and not conn.compaction_due():
                    continue
                t0 = time.perf_counter()
                for store in stores:
                    store.drain()
                    store.prune_retrieval_log(RETRIEVAL_LOG_KEEP)
                before, after = conn.compact()
                for store in stores:  # the cold-start snapshot holds text too: rewrite it from the mirror
                    if store.snapshot_path is not None and store.snapshot_path.exists():
                        store.save_snapshot()
                report.stores.append(CompactedStore(path=str(conn.path), before_bytes=before, after_bytes=after,
                                                    took_ms=(time.perf_counter() - t0) * 1000))
        return report

    # ── maintenance ──────────────────────────────────────────
    @api
    def maintain(self, project: str | None = None, all_projects: bool = False,
                 dry_run: bool = False) -> MaintenanceReport:
        """The maintenance sweep (lifecycle.py has the rules per scope): decay transitions, the consolidation
        queue, caps, half-lives following their current value, stale and abandoned sessions, promotion to user.
        ``dry_run`` reports what the sweep would do and changes nothing."""
        t0 = time.perf_counter()
        self._open_projects(project, all_projects)
        report = MaintenanceReport(transitions={}, queued_for_consolidation=0, sessions_recovered=0,
                                   promoted_to_user=0, took_ms=0.0, dry_run=dry_run)
        for store in [*(s for _, s in self._projects.values()), self.user]:
            plan = self._plan_sweep(store)
            label = "user" if store.scope == Scope.user else f"project:{store.database}"
            report.by_scope[label] = plan.counts()
            for status, n in plan.counts().items():
                report.transitions[status] = report.transitions.get(status, 0) + n
            report.capped += plan.capped
            report.awaiting_forget += plan.below_forget
            report.half_lives_updated += len(plan.half_lives)
            if dry_run:
                report.queued_for_consolidation += len(plan.decay_queue)
            else:
                report.queued_for_consolidation += store.apply_sweep(self.now(), plan.moves, plan.half_lives,
                                                                     plan.decay_queue)
        if not dry_run:
            report.sessions_recovered = self.recover_stale_sessions()
            report.sessions_abandoned = self._mark_abandoned_sessions()
            report.promoted_to_user = sum(self._promote_project_to_user(s) for _, s in list(self._projects.values()))
        report.took_ms = (time.perf_counter() - t0) * 1000
        return report

    def _plan_sweep(self, store: ScopeStore) -> lifecycle.Plan:
        cap = (self.settings.max_memories_user if store.scope == Scope.user
               else self.settings.max_memories_project if store.scope == Scope.project else None)
        rows = [lifecycle.Row(key=key_of(r["id"]), memory_type=r["memory_type"], status=r["status"],
                              pinned=bool(r.get("pinned")), importance=float(r["importance"]),
                              access_count=int(r.get("access_count") or 0), half_life_days=float(r["half_life_days"]),
                              created_at=r["created_at"], last_accessed_at=r["last_accessed_at"],
                              status_changed_at=r.get("status_changed_at"))
                for r in store.lifecycle_rows()]
        return lifecycle.plan_sweep(rows, store.scope.value, self.now(), self.half_lives(), cap=cap,
                                    queued=store.pending_queue_keys())

    def _mark_abandoned_sessions(self) -> int:
        """Seed 002 §3c: a session registered as active whose session store is gone (the process died before
        its promotion pass and the store was lost) is marked abandoned; nothing of it can be promoted."""
        live = set(self._sessions) | set(self._session_dbs_on_disk())
        n = 0
        for _root, pstore in list(self._projects.values()):
            keys = pstore.q1("SELECT VALUE session_key FROM session_registry WHERE status = 'active'") or []
            lost = [k for k in keys if k not in live]
            if lost:
                pstore.q("UPDATE session_registry SET status = 'abandoned', ended_at = $t, "
                         "end_reason = 'session store lost' WHERE session_key IN $k", {"t": self.now(), "k": lost})
                n += len(lost)
        return n

    def _open_projects(self, project: str | None, all_projects: bool) -> None:
        """Open the given project's store, or every known project's that still exists, for a pass over all."""
        if project:
            self.project_store(project)
        if all_projects:
            for p in self.list_projects():
                if Path(p.project_path).exists():
                    self.project_store(p.project_path)

    @api
    def redact_stored(self, project: str | None = None, all_projects: bool = False,
                      dry_run: bool = False) -> dict[str, dict[str, int]]:
        """Redact what is already stored: every string field of every row of the user store, the project's (or
        every known project's) and the live sessions', rewritten only where redaction changes it (rows written
        by an older version, or before a newer rule); then the changed store files are compacted, so the old
        row versions leave the disk too. Rows changed per store and table."""
        from .stored_redaction import redact_store

        self._open_projects(project, all_projects)
        report: dict[str, dict[str, int]] = {}
        with self._lock:
            for store in [*(s.store for s in self._sessions.values()), *(s for _, s in self._projects.values()),
                          self.user]:
                label = "user" if store.scope == Scope.user else f"{store.scope.value}:{store.database}"
                report[label] = redact_store(store, self.embedder, dry_run=dry_run)
                if report[label] and not dry_run:
                    store.conn.erased = True  # the old row versions still hold the secrets: compact them away
        if not dry_run:
            self.compact(only_due=True)
        return report

    @api
    def stats(self, project: str | None = None, session: str | None = None) -> Stats:
        scopes = []
        for store in self._stores("all", project, session):
            total, by_type, by_status = store.count_by()
            scopes.append(ScopeCounts(scope=store.scope, database=store.database, total=total,
                                      by_type=by_type, by_status=by_status))
        root = self._project_root(project)[0] if project else None
        return Stats(scopes=scopes, project_root=root, embedding=self.embedder.name,
                     sessions_active=len(self._sessions))

    # ── context injection (SessionStart) ─────────────────────
    @api
    def injection_context(self, project: str | None = None, session: str | None = None,
                          budget: int | None = None) -> InjectionPreview:
        """What a new session starts with: the memory protocol, recent session summaries, instructions, fixes,
        then the strongest project and user memories, within a token budget (session_context.py)."""
        settings = load_settings(self._project_root(project)[0]) if project else self.settings
        budget = settings.injection_token_budget if budget is None else budget
        if settings.disabled:
            return InjectionPreview(text="", tokens=0, budget=budget, items=[], disabled=True)
        pstore = self.project_store(project) if project else None
        stores = [pstore, self.user] if pstore is not None else [self.user]
        return session_context.build(self, stores, budget, self.now())

    @api
    def session_summary(self, session: str, summary: str, project: str | None = None) -> Memory:
        """The agent's summary of its session, kept in project scope (a second call replaces the first); the
        automatic summary at session end then leaves it as written (session_learning.py)."""
        with self._lock:
            return session_learning.write_agent_summary(self, session, summary, project)

    @api
    def note_injected(self, ids: list[str], project: str | None = None) -> int:
        """SessionStart injected these memories ("scope:key" or bare ids, as InjectionPreview.items give them):
        a weaker use than a recall (lifecycle.INJECTION_WEIGHT). Returns how many were found."""
        now = self.now()
        per_store: dict[int, tuple[ScopeStore, dict[str, datetime]]] = {}
        candidates = [s for s in (self.project_store(project) if project else None, self.user) if s is not None]
        for raw in ids:
            scope, _, key = raw.rpartition(":")
            for store in candidates:
                if scope and scope != store.scope.value:
                    continue
                light = store.light.get(key)
                if light is not None:
                    per_store.setdefault(id(store), (store, {}))[1][key] = lifecycle.injected_last_use(
                        light.last_accessed_at, now)
                    break
        for store, last_use in per_store.values():
            store.note_injected(last_use, now)
        return sum(len(v) for _, v in per_store.values())

    # ── SurrealQL console / engram_execute ───────────────────
    @api
    def run_query(self, surql: str, scope: Literal["session", "project", "user"] = "project",
                  allow_writes: bool = False, project: str | None = None,
                  session: str | None = None) -> QueryResult:
        """Run SurrealQL against one scope's database, behind the validator and an engine role.

        Defence in depth: the validator refuses DDL, USE, INFO, transaction control, custom/network functions
        and (unless allow_writes) any write; what it lets through runs, comments removed, as a database-level
        VIEWER (EDITOR with writes) in an engine session of its own, pinned to that one database, under one
        deadline for the whole query (see guarded_query); writes run in a transaction that rolls back if the
        schema changed. At most QUERY_MAX_ROWS rows per statement come back. The engine part runs outside
        ``api_lock``, so a long query never holds the daemon's other clients.
        """
        from . import guarded_query
        from .store import EngineRefused
        from .validator import validate

        role: Literal["VIEWER", "EDITOR"] = "EDITOR" if allow_writes else "VIEWER"
        with self.api_lock:
            store = self._target_store(Scope(scope), project, session)
            tables = list((store.q1("INFO FOR DB") or {}).get("tables", {})) if allow_writes else []
        verdict = validate(surql, allow_writes=allow_writes)
        violations = [QueryViolation(statement_index=v.statement_index, statement=v.statement, rule=v.rule,
                                     message=v.message) for v in verdict.violations]
        if not verdict.ok:
            return QueryResult(ok=False, scope=store.scope, database=store.database, role=role, statements=[],
                               violations=violations, message=violations[0].message if violations else "refused")
        if allow_writes:
            refusal = _secret_in_write(verdict.statements)
            if refusal is not None:
                return QueryResult(ok=False, scope=store.scope, database=store.database, role=role, statements=[],
                                   violations=[refusal], message=refusal.message)
        program = guarded_query.build(verdict.executable, allow_writes=allow_writes, tables=tables,
                                      timeout_s=self.settings.query_timeout_s)
        t0 = time.perf_counter()
        try:
            raw = store.conn.run_as(store.namespace, store.database, role, program.text)
        except EngineRefused as exc:
            return QueryResult(ok=False, scope=store.scope, database=store.database, role=role, statements=[],
                               violations=violations, total_ms=(time.perf_counter() - t0) * 1000,
                               message=guarded_query.refusal(str(exc), program, verdict.statements))
        except Exception as exc:  # e.g. a value the SDK cannot carry back (a regex)
            return QueryResult(ok=False, scope=store.scope, database=store.database, role=role, statements=[],
                               violations=violations, total_ms=(time.perf_counter() - t0) * 1000,
                               message=f"the engine ran the query but its answer could not be read: {exc}")
        total = (time.perf_counter() - t0) * 1000
        results = guarded_query.results(raw, program, verdict.statements, timeout_s=self.settings.query_timeout_s)
        own = guarded_query.own_error(raw, program)
        if allow_writes:
            with self.api_lock:
                self._param_cache.clear()
                for st in (s for s in self._all_open_stores() if s is store):
                    st.reload_mirror()
        ok = own is None and all(r.ok for r in results)
        errors = [r.error or "" for r in results if not r.ok]
        # Statements a failed transaction skipped say only that: name the one that failed it.
        message = "" if ok else own or next((e for e in errors if "not executed due to" not in e), errors[0])
        return QueryResult(ok=ok, scope=store.scope, database=store.database, role=role, statements=results,
                           total_ms=total, message=message)

    # ── export / restore (lossless backups) and health ───────
    def _export_stores(self, scope: str, project: str | None) -> list[ScopeStore]:
        """The stores of one project (its live sessions included, no other project's) and the user scope."""
        root = self._project_root(project)[0] if project else None
        sessions = [s.store for s in self._sessions.values() if s.project_root == root]
        if scope == "session":
            return sessions
        stores = self._stores("project" if scope == "project" else scope if scope == "user" else "all",
                              project, None)
        if scope == "all":
            stores = [*sessions, *stores]
        return stores

    @api
    def export_memories(self, scope: Literal["all", "session", "project", "user"] = "all",
                        project: str | None = None) -> list[MemoryRecord]:
        """Every memory of the scope(s) with every stored field (embedding included), oldest first."""
        out: list[MemoryRecord] = []
        for store in self._export_stores(scope, project):
            root = self._project_root_of(store) if store.scope == Scope.project else None
            for row in store.export_rows():
                row = {k: v for k, v in row.items() if k in MemoryRecord.model_fields and v is not None}
                out.append(MemoryRecord(**{**row, "id": key_of(row["id"]), "scope": store.scope,
                                           "database": store.database, "project_path": root}))
        return out

    @api
    def restore_memories(self, records: list[dict[str, Any]], project: str | None = None,
                         first_line: int = 1, skip_bad: bool = False, dry_run: bool = False) -> RestoreReport:
        """Write exported records back with their ids and every field. Every record is checked first: with a bad
        one nothing is restored unless ``skip_bad`` (then the bad ones are left out); ``dry_run`` restores
        nothing and reports the bad ones.

        Project records go to ``project`` (or the project they were exported from); session records recreate
        their session so that its promotion pass still runs."""
        checked: list[tuple[int, MemoryRecord]] = []
        failed: list[ImportError_] = []
        for n, raw in enumerate(records, start=first_line):
            try:
                rec = MemoryRecord(**raw)
                if rec.scope == Scope.project and not (project or rec.project_path):
                    raise EngramError("a project record needs --project DIR")
                checked.append((n, rec))
            except (ValidationError, EngramError, TypeError, ValueError) as exc:
                failed.append(ImportError_(line=n, error=_short_error(exc)))
        if dry_run or (failed and not skip_bad):
            return RestoreReport(restored=0, replaced=0, failed=failed)
        restored = replaced = 0
        for n, rec in checked:
            try:
                if rec.scope == Scope.session:
                    store = self._session_for_restore(rec.database or rec.session_id or "s_" + ulid(),
                                                      project or rec.project_path)
                elif rec.scope == Scope.project:
                    store = self.project_store(project or rec.project_path)
                    if store is None:
                        raise EngramError("a project record needs --project DIR")
                else:
                    store = self.user
                fields = rec.model_dump(exclude={"engram_export", "id", "database", "project_path"},
                                        exclude_none=True)
                # A hand-edited or foreign file must not smuggle a secret in; on Engram's own exports this is
                # a no-op (redaction is idempotent), so round trips stay exact.
                embedding = fields.pop("embedding", None)
                original = fields["content"]
                fields = redact_value(fields)  # type: ignore[assignment]
                if fields["content"] != original:
                    # the hash and the vector were of the text with the secret in it
                    fields["content_hash"] = content_hash(fields["content"])
                elif embedding is not None:
                    fields["embedding"] = embedding
                existed = store.get(rec.id) is not None
                store.restore_row(rec.id, fields)
                replaced += existed
                restored += not existed
            except (ValidationError, EngramError, StoreError, TypeError, ValueError) as exc:
                failed.append(ImportError_(line=n, error=_short_error(exc)))
        return RestoreReport(restored=restored, replaced=replaced, failed=failed)

    def _session_for_restore(self, key: str, project: str | None) -> ScopeStore:
        with self._lock:
            if key in self._sessions:
                return self._sessions[key].store
            if not key.startswith("s_"):
                key = "s_" + ulid()
            store = self._open_store(self._sessions_conn, Scope.session, key)
            root = self._project_root(project)[0] if project else None
            store.q("UPSERT session_registry:self SET session_key = $k, project_root = $p, last_seen_at = time::now()",
                    {"k": key, "p": root})
            self._sessions[key] = _Session(key, store, root, None, self.now())
            return store

    @api
    def revision(self) -> int:
        """The change counter (bumped by every API call that may change memories, in this process): a front end
        polls it and reloads only when it moved."""
        return _revision

    @api
    def health(self) -> HealthReport:
        """What `engram doctor` asks the daemon: stores open and at the current schema, permissions, sizes."""
        import stat

        from .store import migrations

        latest = migrations()[-1][0]
        checks: list[HealthCheck] = []
        for store in self._all_open_stores():
            version = store.schema_version()
            checks.append(HealthCheck(
                name=f"store {store.scope.value}/{store.database}", ok=version == latest,
                detail=f"schema v{version}, {len(store.light)} searchable memories",
                fix=None if version == latest else "restart the daemon so migrations run (engram stop)"))
        paths = [self.home, self.home / "user.db", self.home / "sessions.db",
                 *(project_store_dir(root) for root, _ in self._projects.values())]
        loose = []
        for path in paths:
            if not path.exists():
                continue
            for dirpath, dirs, files in os.walk(path) if path.is_dir() else [(str(path.parent), [], [path.name])]:
                for name in [*dirs, *files]:
                    mode = stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode)
                    if mode & 0o077:
                        loose.append(f"{os.path.join(dirpath, name)} ({oct(mode)})")
            if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
                loose.append(f"{path} ({oct(stat.S_IMODE(os.stat(path).st_mode))})")
        checks.append(HealthCheck(name="permissions", ok=not loose,
                                  detail="owner-only" if not loose else f"readable by others: {', '.join(loose[:5])}",
                                  fix=None if not loose else f"chmod -R go-rwx {self.home}"))
        usage = os.statvfs(self.home)
        free_mb = usage.f_bavail * usage.f_frsize / 2**20
        checks.append(HealthCheck(name="disk", ok=free_mb > 200, detail=f"{free_mb:.0f} MiB free under {self.home}",
                                  fix=None if free_mb > 200 else "free some disk space: writes fail when it is full"))
        emb_ok = bool(getattr(self.embedder, "available", False))
        checks.append(HealthCheck(name="embeddings", ok=emb_ok, detail=self.embedder.name,
                                  fix=None if emb_ok else "recall runs on BM25 only; check embedding_provider"))
        return HealthReport(ok=all(c.ok for c in checks), checks=checks)

    # ── feedback ─────────────────────────────────────────────
    @api
    def mark_retrieval_useful(self, query: str, was_useful: bool, reason: str | None = None,
                              project: str | None = None, log_id: str | None = None) -> FeedbackResult:
        """Marks the latest retrieval_log row for this query (or the row ``log_id``, as recall returns it) in
        whichever scope logged it (the project's store, or the user's for a recall outside a project);
        useful results gain relevance and outcome impact."""
        found: tuple[ScopeStore, dict[str, Any]] | None = None
        for store in [s for s in (self.project_store(project) if project else None, self.user) if s is not None]:
            if log_id:
                rows = store.q1("SELECT id, memory_ids, created_at FROM $id",
                                {"id": record(key_of(log_id), "retrieval_log")})
            else:
                # ORDER BY needs its field in the selection (SurrealDB 3 refuses the query otherwise).
                # The log holds the query redacted and cut, as recall stored it.
                rows = store.q1("SELECT id, memory_ids, created_at FROM retrieval_log WHERE query = $q "
                                "ORDER BY created_at DESC LIMIT 1", {"q": redact_text(query)[:2000]})
            if rows and (found is None or rows[0]["created_at"] > found[1]["created_at"]):
                found = (store, rows[0])
        if found is None:
            what = f"retrieval {log_id!r}" if log_id else f"retrieval of {query!r}"
            return FeedbackResult(log_id=None, updated=False,
                                  message=f"no {what} is logged in this project or the user scope; recall it first")
        store, row = found
        store.q("UPDATE $id SET was_useful = $u, feedback_reason = $r",
                {"id": row["id"], "u": was_useful, "r": redact_text(reason) if reason else reason})
        delta = 0.1 if was_useful else -0.05
        for mid in row.get("memory_ids", []):
            try:
                s, key = self.locate(mid, project)
            except NotFound:
                continue
            s.q("UPDATE $id SET relevance_score = math::clamp(relevance_score + $d, 0.0, 1.0), "
                "outcome_impact = math::clamp(outcome_impact + $d, 0.0, 1.0)",
                {"id": record(key), "d": delta})
        return FeedbackResult(log_id=key_of(row["id"]), updated=True,
                              message=f"marked {'useful' if was_useful else 'not useful'} "
                                      f"(logged in {store.scope.value} scope)")


def _secret_in_write(statements: list[str]) -> QueryViolation | None:
    """Console writes are SurrealQL the engine evaluates, so their values cannot be redacted on the way in
    without changing the query: a write whose text holds a secret is refused whole, and nothing runs."""
    for i, stmt in enumerate(statements):
        found = redact(stmt)[1]
        if found:
            kinds = ", ".join(sorted({r.kind for r in found}))
            return QueryViolation(
                statement_index=i, statement=redact_text(stmt), rule="secret-in-write",
                message=f"statement {i + 1} would write what looks like a secret ({kinds}); Engram never stores "
                        "secrets: take it out of the query (reads may mention one)")
    return None


# Top-level system folders: a project's store (<root>/.claude/engram) is never created in one of them.
_SYSTEM_DIRS = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc", "run", "sbin", "srv",
                "sys", "tmp", "usr", "var", "snap", "mnt", "media"}


def _check_project_root(root: Path) -> None:
    """Refuse a project root that is no project: the filesystem root, the home folder, a system folder."""
    if root == Path(root.anchor) or root == Path.home().resolve() or (
            len(root.parts) == 2 and root.name in _SYSTEM_DIRS):
        raise EngramError(f"{root} is not a project folder (the filesystem root, your home folder or a system "
                          "folder): Engram will not create a store there. Give the project's folder.")


def _memory_filter(base: str, memory_type: MemoryType | None, status: Status | None, tag: str | None,
                   text: str | None) -> tuple[str, dict[str, Any]]:
    """A WHERE clause (and its parameters) for the list filters, on top of ``base``."""
    where, params = [base], {}
    if memory_type:
        where.append("memory_type = $mt")
        params["mt"] = memory_type.value
    if status:
        where.append("status = $st")
        params["st"] = status.value
    if tag:
        where.append("$tag IN tags")
        params["tag"] = tag.lower()
    if text:
        where.append("string::contains(string::lowercase(content), $tx)")
        params["tx"] = text.lower()
    return " AND ".join(where), params


def _short_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def call_api(service: EngramService, method: str, params: dict[str, Any]) -> Any:
    """Dispatch a daemon request to a service method (pydantic validates the arguments)."""
    fn = API_METHODS.get(method)
    if fn is None:
        raise EngramError(f"unknown method {method!r}")
    return fn(service, **params)


__all__ = ["API_METHODS", "UNLOCKED_API", "EmbeddingError", "EngramError", "EngramService", "NotFound", "StoreError", "call_api"]
