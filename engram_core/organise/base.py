"""Plumbing shared by the organise modules: the per-core and per-store state, row and id helpers."""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from surrealdb import RecordID

from ..api import EngramError, NotFound, api
from ..core import MemoryCore
from ..models import Memory
from ..storage import ScopeStore, key_of, plain

if TYPE_CHECKING:
    import numpy as np

__all__ = ["EngramError", "MemoryCore", "NotFound", "api"]


def short_hash(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:20]


def rid(table: str, key: str) -> RecordID:
    return RecordID(table, key)


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
    adjacency: dict[str, dict[str, float]] | None = None  # memory key → {memory key: association weight}
    streams: dict[str, Stream] = field(default_factory=dict)
    new_episode: dict[str, str] = field(default_factory=dict)  # memory key → episode given before its write
    # memory key → the entities its text names, extracted for its row's entity list before its write (graph.py)
    mentioned: dict[str, list[Any]] = field(default_factory=dict)
    # Episode rows opened or ended for memories not yet through after_store (episodes.assign), in order: sent
    # with their graph write (graph.write_extractions).
    writes: list[dict[str, Any]] = field(default_factory=list)
    vocab: Any = None  # subjects.Vocabulary: the components and names the store's memories name


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

    def drop_store(self, store: ScopeStore) -> None:
        with self.lock:
            self.stores.pop((store.namespace, store.database), None)


# The organise layer's state of each core, held here rather than hung on the core.
_STATES: weakref.WeakKeyDictionary[MemoryCore, OrganiseState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def state(core: MemoryCore) -> OrganiseState:
    with _STATES_LOCK:
        st = _STATES.get(core)
        if st is None:
            st = _STATES[core] = OrganiseState()
        return st


def to_memory(core: MemoryCore, store: ScopeStore, key: str) -> Memory:
    row = store.get(key)
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    return core.to_memory(row, store)


def memory_key(value: Any) -> str:
    return key_of(value)
