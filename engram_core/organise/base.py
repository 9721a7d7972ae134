"""Plumbing shared by the organise modules: API registration, per-store state, store resolution."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import validate_call
from surrealdb import RecordID

from ..models import Memory, MemoryIn, Scope
from ..service import API_METHODS, EngramError, EngramService, NotFound, counted
from ..store import ScopeStore, key_of, plain

if TYPE_CHECKING:
    import numpy as np

F = TypeVar("F", bound=Callable[..., Any])
ORGANISE_API: dict[str, Callable[..., Any]] = {}

__all__ = ["EngramError", "EngramService", "NotFound", "api"]


def api(fn: F) -> F:
    """Register a module-level function (service first) with the daemon, arguments validated by pydantic."""
    checked = counted(validate_call(config={"arbitrary_types_allowed": True})(fn))
    API_METHODS[fn.__name__] = checked
    ORGANISE_API[fn.__name__] = checked
    return checked  # type: ignore[return-value]


def short_hash(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:20]


def rid(table: str, key: str) -> RecordID:
    return RecordID(table, key)


def now_utc() -> datetime:
    return datetime.now(UTC)


def as_dt(value: Any) -> datetime | None:
    v = plain(value)
    return v if isinstance(v, datetime) else None


@dataclass
class Stream:
    """The open episode of a session (or of a store written outside sessions), as the hook sees it."""

    episode_id: str | None = None
    last_at: datetime | None = None
    centroid: np.ndarray | None = None
    count: int = 0
    pending: tuple[str, str] | None = None  # (boundary_type, trigger) for the next memory


@dataclass
class StoreState:
    graph: Any = None  # graph.GraphMirror, loaded on first use
    adjacency: dict[str, dict[str, float]] | None = None  # memory key → {memory key: association weight}
    streams: dict[str, Stream] = field(default_factory=dict)
    new_episode: dict[str, str] = field(default_factory=dict)  # memory key → episode given before its write


class OrganiseState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.stores: dict[tuple[str, str], StoreState] = {}
        self.enabled: dict[str, bool] = {}

    def of(self, store: ScopeStore) -> StoreState:
        k = (store.namespace, store.database)
        with self.lock:
            st = self.stores.get(k)
            if st is None:
                st = self.stores[k] = StoreState()
            return st

    def forget_store(self, store: ScopeStore) -> None:
        with self.lock:
            self.stores.pop((store.namespace, store.database), None)


def state(service: EngramService) -> OrganiseState:
    st = getattr(service, "_organise", None)
    if st is None:
        st = OrganiseState()
        service._organise = st  # type: ignore[attr-defined]
    return st


def stores_for(service: EngramService, scope: str, project: str | None, session: str | None) -> list[ScopeStore]:
    return service._stores(scope, project, session)


def primary_store(service: EngramService, project: str | None, session: str | None = None,
                  scope: str | None = None) -> ScopeStore:
    """Where a scope-less request lands: the named scope, else the project, else the user store."""
    if scope:
        return service._target_store(Scope(scope), project, session)
    if project:
        store = service.project_store(project)
        if store is not None:
            return store
    if session:
        sess = service._session(session, project)
        if sess is not None and sess.project_root:
            store = service.project_store(sess.project_root)
            if store is not None:
                return store
    return service.user


def locate(service: EngramService, memory_id: str, project: str | None = None,
           session: str | None = None) -> tuple[ScopeStore, str]:
    return service.locate(memory_id, project, session)


def to_memory(service: EngramService, store: ScopeStore, key: str) -> Memory:
    row = store.get(key)
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    return service._to_memory(row, store)


def session_key_of(service: EngramService, store: ScopeStore) -> str | None:
    for s in service._sessions.values():
        if s.store is store:
            return s.key
    return None


def write_memory(service: EngramService, store: ScopeStore, mem: MemoryIn) -> Memory:
    """Store a new memory into exactly this store through the core write path (redaction, embedding, hooks)."""
    mem = mem.model_copy(update={"scope": store.scope})
    project = service._project_root_of(store)
    session = session_key_of(service, store)
    with service._lock:
        result = service._write_batch([mem], project, session)[0]
    return result.memory


def memory_key(value: Any) -> str:
    return key_of(value)
