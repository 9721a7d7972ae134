"""Reading memories as lists: one memory, a page of a scope (filtered, sorted), the counts, the projects."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..api import NotFound, api
from ..core import MemoryCore
from ..models import Memory, MemoryPage, MemoryType, ProjectInfo, Scope, ScopeCounts, Stats, Status
from ..storage import ScopeStore, key_of
from ..vocabulary import ScopeName
from .scoring import memory_strength


@api
def get(core: MemoryCore, memory_id: str, project: str | None = None, session: str | None = None) -> Memory:
    store, key = core.scopes.locate(memory_id, project, session)
    row = store.get(key)
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    return core.to_memory(row, store)


@api
def list_memories(
    core: MemoryCore,
    scope: ScopeName = "project",
    project: str | None = None,
    session: str | None = None,
    memory_type: MemoryType | None = None,
    status: Status | None = None,
    tag: str | None = None,
    text: str | None = None,
    order: Literal[
        "created_at",
        "updated_at",
        "last_accessed_at",
        "importance",
        "access_count",
        "memory_strength",
        "memory_type",
        "status",
        "content",
    ] = "created_at",
    descending: bool = True,
    offset: int = Field(0, ge=0),
    limit: int = Field(100, ge=1, le=5000),
) -> MemoryPage:
    """One page of a scope's memories, filtered and sorted (the TUI pages through this).

    Searchable memories are filtered and sorted in the in-process mirror and only the page is read from the
    database: a full-table ORDER BY + count() costs ~0.8 s at 10k rows. Forgotten and superseded memories
    (not mirrored) come from an indexed query and are merged in."""
    store = core.scopes.target(Scope(scope), project, session)
    if order != "updated_at" and status not in (Status.forgotten, Status.superseded):
        return _list_from_mirror(
            core, store, memory_type, status, tag, text, order, descending, offset, limit
        )
    cond, params = _memory_filter("true", memory_type, status, tag, text)
    rows = store.list_memories(
        where=cond,
        params=params,
        order=f"{order} {'DESC' if descending else 'ASC'}",
        limit=limit,
        start=offset,
    )
    total = store.q1(f"SELECT count() AS n FROM memory WHERE {cond} GROUP ALL", params)
    return MemoryPage(
        items=[core.to_memory(r, store) for r in rows],
        total=int(total[0]["n"]) if total else 0,
        offset=offset,
        limit=limit,
    )


def _list_from_mirror(
    core: MemoryCore,
    store: ScopeStore,
    memory_type: MemoryType | None,
    status: Status | None,
    tag: str | None,
    text: str | None,
    order: str,
    descending: bool,
    offset: int,
    limit: int,
) -> MemoryPage:
    now = core.now()
    needle = text.lower() if text else None
    tag_l = tag.lower() if tag else None

    def sort_value(v: Any) -> Any:
        return v.lower() if isinstance(v, str) and order == "content" else v

    entries: list[tuple[Any, str, dict[str, Any] | None]] = []
    with store.mirror_lock:
        for key, lt in store.summaries.items():
            if (
                (memory_type and lt.memory_type != memory_type.value)
                or (status and lt.status != status.value)
                or (tag_l and tag_l not in lt.tags)
                or (needle and needle not in lt.content.lower())
            ):
                continue
            value = (
                memory_strength(lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now)
                if order == "memory_strength"
                else getattr(lt, order)
            )
            entries.append((sort_value(value), key, None))
    if status is None:
        cond, params = _memory_filter("status IN ['forgotten', 'superseded']", memory_type, None, tag, text)
        for row in store.list_memories(where=cond, params=params, limit=1_000_000):
            value = (
                core.to_memory(row, store).memory_strength if order == "memory_strength" else row.get(order)
            )
            entries.append((sort_value(value), key_of(row["id"]), row))
    entries.sort(key=lambda e: (e[0], e[1]), reverse=descending)
    page = entries[offset : offset + limit]
    fetched = store.get_many([k for _, k, row in page if row is None])
    items = []
    for _, key, cached in page:
        full = cached if cached is not None else fetched.get(key)
        if full is not None:
            items.append(core.to_memory(full, store))
    return MemoryPage(items=items, total=len(entries), offset=offset, limit=limit)


def _memory_filter(
    base: str, memory_type: MemoryType | None, status: Status | None, tag: str | None, text: str | None
) -> tuple[str, dict[str, Any]]:
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


@api
def stats(core: MemoryCore, project: str | None = None, session: str | None = None) -> Stats:
    scopes = []
    for store in core.scopes.stores("all", project, session):
        total, by_type, by_status = store.memories.count_by()
        scopes.append(
            ScopeCounts(
                scope=store.scope, database=store.database, total=total, by_type=by_type, by_status=by_status
            )
        )
    root = core.scopes.project_root(project)[0] if project else None
    return Stats(
        scopes=scopes,
        project_root=root,
        embedding=core.embedder.name,
        sessions_active=len(core.scopes.live_sessions()),
    )


@api
def list_projects(core: MemoryCore) -> list[ProjectInfo]:
    rows = core.user.q1("SELECT * FROM project_registry ORDER BY last_seen_at DESC")
    out = []
    for r in rows or []:
        store = core.scopes.open_project(r["project_db"])
        out.append(
            ProjectInfo(
                project_db=r["project_db"],
                project_path=r["project_path"],
                project_name=r["project_name"],
                memory_count=len(store.summaries) if store else None,
                open=store is not None,
                last_seen_at=r.get("last_seen_at"),
            )
        )
    return out
