"""Lossless backups: export every stored field of every memory, restore them with their ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from .api import EngramError, api, short_error
from .core import MemoryCore
from .memory.writing import FUTURE_SKEW, future_error
from .models import ImportError_, MemoryRecord, RestoreReport, Scope
from .redaction import redact_value
from .storage import ScopeStore, StoreError, content_hash, key_of
from .vocabulary import ScopeOrAll


def _export_stores(core: MemoryCore, scope: str, project: str | None) -> list[ScopeStore]:
    """The stores of one project (its live sessions included, no other project's) and the user scope."""
    root = core.scopes.project_root(project)[0] if project else None
    sessions = [s.store for s in core.scopes.live_sessions() if s.project_root == root]
    if scope == "session":
        return sessions
    stores = core.scopes.stores(scope, project, None)
    if scope == "all":
        stores = [*sessions, *stores]
    return stores


# A page stays far below the largest answer the wire takes, whatever the memories hold.
EXPORT_PAGE_BYTES = 4 * 1024 * 1024
VECTOR_JSON_BYTES = 8_192  # 384 floats written out in JSON


def _row_bytes(row: dict[str, Any]) -> int:
    rest = {k: v for k, v in row.items() if k != "embedding"}
    return VECTOR_JSON_BYTES + len(
        json.dumps(rest, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass")
    )


@api
def export_memories(
    core: MemoryCore,
    scope: ScopeOrAll = "all",
    project: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[MemoryRecord]:
    """Every memory of the scope(s) with every stored field (embedding included), store by store, each in the
    order it was written.

    Paged when ``limit`` is given: at most ``limit`` records and never more than ~4 MB of them; ``after`` is
    the ``"database/id"`` of the last record of the previous page. A page shorter than asked may still be
    followed by more: the last page is the empty one."""
    if limit is not None and limit < 1:
        raise EngramError("limit must be at least 1")
    stores = _export_stores(core, scope, project)
    start = 0
    after_key: str | None = None
    if after:
        database, _, after_key = after.partition("/")
        names = [s.database for s in stores]
        if database not in names or not after_key:
            raise EngramError(
                f"unknown export position {after!r}: give the database/id of the last record "
                "of the previous page"
            )
        start = names.index(database)
    out: list[MemoryRecord] = []
    budget = EXPORT_PAGE_BYTES
    for i, store in enumerate(stores[start:], start=start):
        root = core.scopes.root_of(store) if store.scope == Scope.project else None
        wanted = None if limit is None else limit - len(out)
        for row in store.memories.export_rows(after=after_key if i == start else None, limit=wanted):
            if limit is not None:
                budget -= _row_bytes(row)
                if out and budget < 0:
                    return out
            row = {k: v for k, v in row.items() if k in MemoryRecord.model_fields and v is not None}
            out.append(
                MemoryRecord(
                    **{
                        **row,
                        "id": key_of(row["id"]),
                        "scope": store.scope,
                        "database": store.database,
                        "project_path": root,
                    }
                )
            )
        if limit is not None and len(out) >= limit:
            break
    return out


def _not_ahead(rec: MemoryRecord, now: datetime) -> MemoryRecord:
    """A record from a machine whose clock ran ahead: a time up to FUTURE_SKEW ahead is taken as now (the
    engine cannot count a negative age), one further ahead is refused (EngramError)."""
    changes: dict[str, Any] = {}
    for field in ("created_at", "updated_at", "last_accessed_at", "status_changed_at"):
        at = getattr(rec, field)
        if at is None:
            continue
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        if at > now + FUTURE_SKEW:
            raise EngramError(future_error(field, at, now))
        if at > now:
            changes[field] = now
    history = []
    for entry in rec.status_history:
        at = entry["at"] if entry["at"].tzinfo else entry["at"].replace(tzinfo=UTC)
        if at > now + FUTURE_SKEW:
            raise EngramError(future_error("status_history", at, now))
        history.append({**entry, "at": min(at, now)} if at > now else entry)
    if history != rec.status_history:
        changes["status_history"] = history
    return rec.model_copy(update=changes) if changes else rec


@api
def restore_memories(
    core: MemoryCore,
    records: list[dict[str, Any]],
    project: str | None = None,
    first_line: int = 1,
    skip_bad: bool = False,
    dry_run: bool = False,
) -> RestoreReport:
    """Write exported records back with their ids and every field. Every record is checked first: with a bad
    one nothing is restored unless ``skip_bad`` (then the bad ones are left out); ``dry_run`` restores
    nothing and reports the bad ones.

    Project records go to ``project`` (or the project they were exported from); session records recreate
    their session so that its promotion pass still runs."""
    checked: list[tuple[int, MemoryRecord]] = []
    failed: list[ImportError_] = []
    for n, raw in enumerate(records, start=first_line):
        try:
            rec = _not_ahead(MemoryRecord(**raw), core.now())
            if rec.scope == Scope.project and not (project or rec.project_path):
                raise EngramError("a project record needs --project DIR")
            checked.append((n, rec))
        except (ValidationError, EngramError, TypeError, ValueError) as exc:
            failed.append(ImportError_(line=n, error=short_error(exc)))
    if dry_run or (failed and not skip_bad):
        return RestoreReport(restored=0, replaced=0, failed=failed)
    restored = replaced = 0
    for n, rec in checked:
        try:
            if rec.scope == Scope.session:
                store = core.scopes.restore_session(
                    rec.database or rec.session_id or "s_" + core.new_id(), project or rec.project_path
                )
            elif rec.scope == Scope.project:
                pstore = core.project_store(project or rec.project_path)
                if pstore is None:
                    raise EngramError("a project record needs --project DIR")
                store = pstore
            else:
                store = core.user
            fields = rec.model_dump(
                exclude={"engram_export", "id", "database", "project_path"}, exclude_none=True
            )
            # A hand-edited or foreign file must not smuggle a secret in; on Engram's own exports this is
            # a no-op (redaction is idempotent), so round trips stay exact.
            embedding = fields.pop("embedding", None)
            original = fields["content"]
            fields = redact_value(fields)
            if fields["content"] != original:
                # the hash and the vector were of the text with the secret in it
                fields["content_hash"] = content_hash(fields["content"])
            elif embedding is not None:
                fields["embedding"] = embedding
            existed = store.get(rec.id) is not None
            store.memories.restore_row(rec.id, fields)
            replaced += existed
            restored += not existed
        except (ValidationError, EngramError, StoreError, TypeError, ValueError) as exc:
            failed.append(ImportError_(line=n, error=short_error(exc)))
    return RestoreReport(restored=restored, replaced=replaced, failed=failed)
