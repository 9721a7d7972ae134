"""The memory core: the stores (scopes.py), the clock, the settings and tuned parameters, the embedder, and
the extension points a layer on top (organise/) registers on.

The core answers no request itself: the modules named for what they do (writing, recall, listing, promotion,
sessions, maintenance, injection, console, backup, health) are functions of the core, and ``EngramService``
(service.py) is the facade that serves them.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from .api import EngramError
from .clock import Clock
from .config import (
    DAEMON_WIDE,
    Settings,
    ensure_private_dir,
    load_settings,
    project_overrides,
    project_settings_file,
    settings_layers,
    user_settings_file,
)
from .ids import IdSource, ulid
from .memory.scoring import DEFAULT_HALF_LIVES, composite_importance, days_between, memory_strength
from .models import Memory, Scope
from .paths import engram_home
from .request_lock import RequestLock
from .retrieval import hybrid, vector_model
from .retrieval.embeddings import Embedder, make_embedder
from .scopes import Scopes
from .storage import Connection, ScopeStore, StoreError, key_of
from .storage.bookkeeping import ACCESS_AFTER_S, LOG_AFTER_S, Bookkeeper
from .storage.locks import SCOPES, OrderedLock

if TYPE_CHECKING:
    import numpy as np

    from .models import RecallResult
    from .storage import MemorySummary

_UNSET = object()  # a cached "no such parameter"


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


# Read once: pydantic builds `model_fields` anew at each access from the class (27 a memory, 10 memories a recall).
_MEMORY_FIELDS = frozenset(Memory.model_fields)


# ── extension points ─────────────────────────────────────────
class BeforeStore(Protocol):
    """May add fields to a new memory before it is written (each change after would rewrite the whole row)."""

    def __call__(
        self,
        core: MemoryCore,
        store: ScopeStore,
        key: str,
        fields: dict[str, Any],
        vector: np.ndarray | None,
        /,
    ) -> None: ...


class AfterStore(Protocol):
    """Runs after new memories are written into a store (or promoted into it): (key, fields) in the order
    written, a whole chunk of an import at once, every one already in the store's mirror."""

    def __call__(
        self,
        core: MemoryCore,
        store: ScopeStore,
        items: Sequence[tuple[str, dict[str, Any]]],
        /,
    ) -> None: ...


class AfterRecall(Protocol):
    """Runs after a recall has been answered, with the ranked candidates behind its hits."""

    def __call__(
        self, core: MemoryCore, result: RecallResult, winners: Sequence[hybrid.Candidate], /
    ) -> None: ...


class Ranker(Protocol):
    """One more ranked list of (memory key, score) for the fusion, beside BM25 and the vector list."""

    def __call__(
        self,
        core: MemoryCore,
        stores: Sequence[ScopeStore],
        query: str,
        qvec: np.ndarray | None,
        filters: hybrid.Filters,
        /,
    ) -> list[tuple[str, float]]: ...


class Booster(Protocol):
    """A factor on a candidate's final score (1.0 leaves it as it is)."""

    def __call__(
        self, core: MemoryCore, key: str, store: ScopeStore, light: MemorySummary, context: dict[str, Any], /
    ) -> float: ...


@dataclass(frozen=True)
class Boost:
    """A booster and the largest factor it ever gives. Recall scores a candidate only while it could still reach
    the answer, which ``most`` makes safe to know; a factor above ``most`` is cut to it."""

    booster: Booster
    most: float


@dataclass
class Extensions:
    """What a layer on top of the core adds to writes and recalls, in the order it was registered."""

    before_store: list[BeforeStore] = field(default_factory=list)
    after_store: list[AfterStore] = field(default_factory=list)
    after_recall: list[AfterRecall] = field(default_factory=list)
    rankers: list[Ranker] = field(default_factory=list)
    boosters: list[Boost] = field(default_factory=list)

    def register(
        self,
        *,
        before_store: BeforeStore | None = None,
        after_store: AfterStore | None = None,
        after_recall: AfterRecall | None = None,
        rankers: Sequence[Ranker] = (),
        boosters: Sequence[Boost] = (),
    ) -> None:
        if before_store is not None:
            self.before_store.append(before_store)
        if after_store is not None:
            self.after_store.append(after_store)
        if after_recall is not None:
            self.after_recall.append(after_recall)
        self.rankers.extend(rankers)
        self.boosters.extend(boosters)

    def clear(self) -> None:
        for hooks in (self.before_store, self.after_store, self.after_recall, self.rankers, self.boosters):
            hooks.clear()


class CoreOptions(TypedDict, total=False):
    """What a core may be given instead of what it would build: the embedder, the clock, the id source, the
    settings. Time and new ids come from the clock and the id source only (stores and organise included): a
    FrozenClock and ids.SequentialIds make a whole build reproducible without patching any module."""

    embedder: Embedder | None
    clock: Clock | None
    ids: IdSource | None
    settings: Settings | None


class MemoryCore:
    def __init__(self, home: Path | str | None = None, **options: Unpack[CoreOptions]) -> None:
        unknown = set(options) - set(CoreOptions.__annotations__)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        embedder, clock, settings = options.get("embedder"), options.get("clock"), options.get("settings")
        # Everything this process creates (store files the engine writes later included) is owner-only.
        os.umask(0o077)
        try:
            self.home = ensure_private_dir(engram_home(home))
        except OSError as exc:
            raise StoreError(
                f"Engram's data directory cannot be created or secured ({exc}). "
                "Point ENGRAM_HOME at a writable directory."
            ) from exc
        self.clock = clock or Clock()
        self.new_id: IdSource = options.get("ids") or ulid
        # The daemon-wide settings (defaults, the user file, ENGRAM_*); settings_for(project) adds a project's file.
        self.settings = settings or load_settings(home=self.home)
        self._project_settings: dict[str, tuple[tuple[int | None, int | None], Settings]] = {}
        self.embedder: Embedder = embedder or make_embedder(self.settings)
        # Held around writes and changes to the set of open stores.
        self.lock = OrderedLock(SCOPES, "MemoryCore.lock")
        self._closed = False
        # Set when the owner is stopping (the daemon's `engram stop`): long work (a compaction, the sweep) gives up
        # at its next step instead of holding the stop up; what it had not done is done next time.
        self.stopping = threading.Event()
        # Held around the service-state parts of methods in UNLOCKED_API (whose slow part runs without it); the
        # daemon replaces it with its own request lock, which it does not take itself for those methods.
        self.api_lock: RequestLock = RequestLock()
        # ENGRAM_ACCESS_AFTER_S / ENGRAM_LOG_AFTER_S: how long recall bookkeeping is held (bench/growth.py sets 0
        # for the old behaviour).
        self.bookkeeper = Bookkeeper(
            access_after_s=float(os.environ.get("ENGRAM_ACCESS_AFTER_S") or ACCESS_AFTER_S),
            log_after_s=float(os.environ.get("ENGRAM_LOG_AFTER_S") or LOG_AFTER_S),
        )
        self._param_cache: dict[str, Any] = {}  # see param()
        self.scopes = Scopes(self.home, self.lock, self._open_store, self.now, self.new_id)
        self.user = self.scopes.user
        self.extensions = Extensions()

    # ── lifecycle ────────────────────────────────────────────
    def _open_store(self, conn: Connection, scope: Scope, database: str) -> ScopeStore:
        store = ScopeStore(conn, scope, database, clock=self.clock, new_id=self.new_id)
        store.bookkeeping.on_defer = self.bookkeeper.notify
        vector_model.reconcile(self.embedder, store)  # its vectors and the queries' from one model
        return store

    def flush(self) -> None:
        """Apply queued recall bookkeeping now (close and every other query on a store do it anyway)."""
        self.bookkeeper.flush()

    def close(self) -> None:
        if self._closed:  # a second close (a test, then its fixture) must not query closed connections
            return
        self._closed = True
        self.bookkeeper.close()
        self.scopes.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> MemoryCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        return self.clock.now()

    def project_store(self, project: str | Path | None) -> ScopeStore | None:
        """The project's store, opened on first use (scopes.Scopes.project_store)."""
        return self.scopes.project_store(project)

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
        self.user.q(
            "UPSERT evolution_state SET key = $k, value = {v: $v}, updated_at = time::now() WHERE key = $k",
            {"k": key, "v": value},
        )
        if not self.user.q1("SELECT VALUE key FROM evolution_state WHERE key = $k", {"k": key}):
            self.user.q("CREATE evolution_state SET key = $k, value = {v: $v}", {"k": key, "v": value})

    def reload_params(self) -> None:
        """Drop the cached parameters (a console write may have changed evolution_state)."""
        self._param_cache.clear()

    # ── settings per project ─────────────────────────────────
    def settings_for(self, project: str | Path | None) -> Settings:
        """The settings a request for ``project`` runs with: the daemon's own (defaults, user file, ENGRAM_*) and
        the per-project ones of the user file and ``<project>/.claude/engram.local.md`` (the environment still
        wins). The files are read again when they change. Daemon-wide settings (config.DAEMON_WIDE) are never
        taken from a project file: settings_report says so."""
        if project is None:
            return self.settings
        root = self.scopes.project_root(project)[0]
        files = (user_settings_file(self.home), project_settings_file(root))
        stamp = tuple(_mtime(f) for f in files)
        hit = self._project_settings.get(root)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        layers = settings_layers(self.home, root)
        user = {
            k: v
            for k, v in layers["user file"].items()
            if k not in DAEMON_WIDE and k not in layers["environment"]
        }
        overrides = {**user, **project_overrides(layers)}
        value = self.settings.model_copy(update=overrides) if overrides else self.settings
        self._project_settings[root] = (stamp, value)  # type: ignore[assignment]
        return value

    def project_root_of(self, store: ScopeStore) -> str | None:
        """The project a store belongs to: a project store's folder, a session's project, None for the user."""
        if store.scope == Scope.project:
            return self.scopes.root_of(store)
        if store.scope == Scope.session:
            sess = self.scopes.session_of(store)
            return sess.project_root if sess is not None else None
        return None

    def half_lives(self, project: str | Path | None = None) -> dict[str, float]:
        """Per type: the default, then the evolved value, then a manual ``half_lives_days`` (the project's)."""
        evolved = self.param("decay_half_lives", DEFAULT_HALF_LIVES)
        return {**DEFAULT_HALF_LIVES, **evolved, **(self.settings_for(project).half_lives_days or {})}

    def scope_weights(
        self, profile: str | None = None, project: str | Path | None = None
    ) -> dict[str, float]:
        """Manual ``scope_weights`` (the project's) win over a profile and the evolved weights, key by key."""
        settings = self.settings_for(project)
        if settings.scope_weights:
            return {
                **hybrid.EVOLVED_DEFAULT,
                **self.param("scope_weights", hybrid.EVOLVED_DEFAULT),
                **settings.scope_weights,
            }
        name = profile or settings.scope_weight_profile
        if name == "evolved":
            return {**hybrid.EVOLVED_DEFAULT, **self.param("scope_weights", hybrid.EVOLVED_DEFAULT)}
        if name not in hybrid.SCOPE_PROFILES:
            raise EngramError(
                f"unknown scope-weight profile {name!r}; choose one of "
                f"{', '.join(['evolved', *hybrid.SCOPE_PROFILES])}"
            )
        return dict(hybrid.SCOPE_PROFILES[name])

    # ── rows as memories ─────────────────────────────────────
    def to_memory(self, row: dict[str, Any], store: ScopeStore) -> Memory:
        """A stored row as the API returns it, with its strength and quality now."""
        now = self.now()
        strength = memory_strength(
            row["importance"], row["half_life_days"], row["access_count"], row["last_accessed_at"], now
        )
        quality = composite_importance(
            days_since_update=days_between(row["updated_at"], now),
            access_count=row["access_count"],
            relevance=row.get("relevance_score", 0.0),
            confidence=row.get("confidence", 0.7),
            outcome_impact=row.get("outcome_impact", 0.0),
            user_feedback=row.get("user_feedback", 0.0),
            memory_type=row["memory_type"],
        )
        data = {k: v for k, v in row.items() if k in _MEMORY_FIELDS and v is not None}
        data.update(id=key_of(row["id"]), scope=store.scope.value, memory_strength=strength, quality=quality)
        data.setdefault("metadata", {})
        return Memory(**data)
