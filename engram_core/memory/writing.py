"""Writing memories: store, store many, import JSONL, and change one (update, set its status, forget it).

Every text field is redacted whole before anything is derived from it (hash, episode, search text,
embedding); an exact duplicate in the same scope is merged into the memory already there.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from ..api import EngramError, NotFound, api, counted, short_error
from ..core import MemoryCore
from ..models import ImportError_, ImportReport, Memory, MemoryIn, MemoryPatch, Scope, Status, StoreResult
from ..redaction import redact, redact_text, redact_value
from ..retrieval import ranking
from ..retrieval.embeddings import try_embed
from ..scopes import RequestContext, Session
from ..storage import ScopeStore, content_hash
from . import lifecycle, promotion
from .scoring import importance_after_verdict

FUTURE_SKEW = timedelta(
    minutes=5
)  # a created_at later than this is refused (decay cannot start in the future)
IMPORT_CHUNK = 64


def future_error(field: str, at: datetime, now: datetime) -> str:
    ahead = at - now
    return (
        f"{field} {at.isoformat()} is in the future ({ahead.total_seconds() / 3600:.1f} h ahead of this "
        f"machine's clock; up to {int(FUTURE_SKEW.total_seconds() // 60)} min is taken as now): give the time "
        "it happened, or fix the clock of the machine that wrote it"
    )


def _previous_in_episodes(store: ScopeStore, groups: list[str]) -> dict[str, list[str]]:
    """The last memories of each episode (or session), oldest first: one round trip for all the groups."""
    if not groups:
        return {}
    n = max(1, ranking.DEFAULT_FUSION.context_prev)
    sql = ";\n".join(
        f"SELECT VALUE content FROM memory WHERE (episode_id = $g{i} OR session_id = $g{i}) "
        f"AND status != 'forgotten' ORDER BY created_at DESC LIMIT {n}"
        for i in range(len(groups))
    )
    got = store.q(sql, {f"g{i}": g for i, g in enumerate(groups)})
    return {g: list(reversed(rows or [])) for g, rows in zip(groups, got[-len(groups) :], strict=True)}


def _prepare(
    core: MemoryCore, mem: MemoryIn, store: ScopeStore, sess: Session | None, age_dates: bool = False
) -> tuple[dict[str, Any], list[str]]:
    # Every text field, whole, before anything is derived from it (hash, episode, search text, embedding).
    content, found = redact(mem.content)
    kinds = [r.kind for r in found]
    metadata: dict[str, Any] = redact_value(mem.metadata, kinds)
    tags: list[str] = redact_value(mem.tags, kinds)
    # MemoryIn already redacted its tags (before lower-casing them): report what it replaced
    kinds += [k for t in tags for k in re.findall(r"\[redacted:([a-z0-9_]+)\]", t)]
    source = redact_value(mem.source, kinds)
    now = core.now()
    created = mem.created_at or now
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    if created > now + FUTURE_SKEW:
        raise EngramError(future_error("created_at", created, now))
    # A clock a little ahead (within FUTURE_SKEW) is taken as now: decay cannot start in the future, and the
    # engine refuses the negative age it would give memory_strength.
    created = min(created, now)
    episode = metadata.get("episode_id") if isinstance(metadata.get("episode_id"), str) else None
    fields: dict[str, Any] = {
        "content": content,
        "content_hash": content_hash(content),
        "memory_type": mem.memory_type.value,
        "scope": store.scope.value,
        "tags": tags,
        "importance": mem.importance,
        "confidence": mem.confidence,
        "half_life_days": lifecycle.half_life_for(
            store.scope.value, mem.memory_type.value, core.half_lives(core.project_root_of(store))
        ),
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


def _search_texts(
    prepared: list[tuple[ScopeStore, dict[str, Any]]], context: dict[str, list[str]]
) -> list[str]:
    """Each memory's contextual text: its content and the memories before it in its episode (or session).
    ``context``: each group's last memories as this batch (and the batches of the same import before it)
    left them, updated here; a group not in it is read from its store."""
    first: dict[str, ScopeStore] = {}
    for store, fields in prepared:
        group = fields.get("episode_id") or fields.get("session_id")
        if group and group not in context:
            first.setdefault(group, store)
    for store in {id(s): s for s in first.values()}.values():
        context.update(_previous_in_episodes(store, [g for g, s in first.items() if s is store]))
    keep = max(1, ranking.DEFAULT_FUSION.context_prev)
    texts = []
    for _store, fields in prepared:
        group = fields.get("episode_id") or fields.get("session_id")
        prev = context.get(group, []) if group else []
        texts.append(ranking.contextual_text(fields["content"], prev))
        if group:
            context[group] = [*prev, fields["content"]][-keep:]
    return texts


@dataclass
class _Batch:
    """Memories redacted and given their search text, ready to embed and write."""

    prepared: list[tuple[ScopeStore, dict[str, Any], list[str]]]
    texts: list[str]


def _prepare_batch(
    core: MemoryCore,
    items: list[MemoryIn],
    project: str | None,
    session: str | None,
    age_dates: bool,
    context: dict[str, list[str]],
    ctx: RequestContext | None = None,
) -> _Batch:
    prepared = []
    for mem in items:
        if ctx is not None:  # resolved once by the caller
            store = ctx.target(mem.scope)
            sess = ctx.session if mem.scope == Scope.session else None
        else:
            store = core.scopes.target(mem.scope, project, session)
            sess = core.scopes.session(session, project) if mem.scope == Scope.session else None
        fields, kinds = _prepare(core, mem, store, sess, age_dates)
        prepared.append((store, fields, kinds))
    return _Batch(prepared, _search_texts([(st, f) for st, f, _ in prepared], context))


Written = tuple[str, ScopeStore, str, list[str], str]  # action, store, key, redactions, message


def _write(
    core: MemoryCore,
    items: list[MemoryIn],
    project: str | None,
    session: str | None,
    age_dates: bool = False,
    ctx: RequestContext | None = None,
) -> list[Written]:
    """Validate, redact, embed in one batch, write (`_store_batch`). The caller holds ``core.lock``."""
    batch = _prepare_batch(core, items, project, session, age_dates, {}, ctx)
    vecs, why = try_embed(core.embedder, batch.texts)
    return _store_batch(core, batch, vecs, why)


def _store_batch(core: MemoryCore, batch: _Batch, vecs: np.ndarray | None, why: str | None) -> list[Written]:
    """Write the new memories of each store in one statement and their organise work per chunk (the
    extensions' after_store); merge exact duplicates (of the store or of an earlier memory of the batch).
    The caller holds ``core.lock``."""
    texts = batch.texts
    out: list[Written] = []
    new: dict[int, tuple[ScopeStore, list[tuple[str, dict[str, Any]]]]] = {}
    batch_hashes: dict[tuple[int, str], str] = {}
    merges: list[tuple[ScopeStore, str, dict[str, Any]]] = []
    for i, (store, fields, kinds) in enumerate(batch.prepared):
        dup = store.find_by_hash(fields["content_hash"]) or batch_hashes.get(
            (id(store), fields["content_hash"])
        )
        if dup is not None:
            merges.append((store, dup, fields))
            out.append(
                (
                    "merged",
                    store,
                    dup,
                    kinds,
                    f"an identical memory already exists in {store.scope.value} scope; merged into {dup}",
                )
            )
            continue
        fields["search_text"] = texts[i]
        if vecs is not None:
            fields["embedding"] = vecs[i]  # float32; stored as half-precision bytes (encode_vector)
        key = core.new_id()
        for before in core.extensions.before_store:
            before(core, store, key, fields, vecs[i] if vecs is not None else None)
        batch_hashes[(id(store), fields["content_hash"])] = key
        new.setdefault(id(store), (store, []))[1].append((key, fields))
        msg = f"stored in {store.scope.value} scope"
        if why:
            msg += f" without an embedding ({why}); BM25 will still find it"
        if kinds:
            msg += f"; redacted {len(kinds)} secret(s): {', '.join(sorted(set(kinds)))}"
        out.append(("created", store, key, kinds, msg))
    for store, rows in new.values():
        store.memories.insert(rows)
        for key, fields in rows:
            store.memories.mirror_new(key, fields)
        promotion.note_fingerprints(core, store, [(f["memory_type"], f["content_hash"]) for _k, f in rows])
    for store, dup, fields in merges:
        store.memories.merge_into(
            dup,
            access_count=0,
            importance=fields["importance"],
            tags=fields["tags"],
            merged_from="duplicate-store",
        )
    for store, rows in new.values():
        for after in core.extensions.after_store:
            after(core, store, rows)
    return out


def write(
    core: MemoryCore,
    items: list[MemoryIn],
    project: str | None,
    session: str | None,
    age_dates: bool = False,
    ctx: RequestContext | None = None,
) -> list[StoreResult]:
    """`_write`, then each memory read back as it now stands (``ctx``: the request, resolved already; then
    ``project`` and ``session`` are its strings). The caller holds ``core.lock``."""
    written = _write(core, items, project, session, age_dates, ctx)
    for i, (action, store, key, kinds, msg) in enumerate(written):
        if action == "created" and store.scope == Scope.session:
            ref = promotion.promote_if_important(core, store, key)
            if ref:
                written[i] = (
                    action,
                    store,
                    key,
                    kinds,
                    f"{msg}; importance ≥ {promotion.IMMEDIATE_IMPORTANCE}: "
                    f"promoted to project scope at once ({ref})",
                )
    rows: dict[int, dict[str, dict[str, Any]]] = {}
    for store in {id(w[1]): w[1] for w in written}.values():
        # read as recall reads them: the rows stay held in the store's row mirror
        rows[id(store)] = store.get_many(
            list(dict.fromkeys(w[2] for w in written if w[1] is store)), settled=False
        )
    return [
        StoreResult(
            action=action,
            memory=core.to_memory(rows[id(store)][key], store),
            redactions=kinds,
            message=msg,
        )
        for action, store, key, kinds, msg in written
    ]


def write_into(core: MemoryCore, store: ScopeStore, mem: MemoryIn) -> Memory:
    """Store a new memory into exactly this store through the write path (redaction, embedding, hooks)."""
    mem = mem.model_copy(update={"scope": store.scope})
    project = core.scopes.root_of(store)
    sess = core.scopes.session_of(store)
    with core.lock:
        result = write(core, [mem], project, sess.key if sess else None)[0]
    return result.memory


@api
def store(
    core: MemoryCore, memory: MemoryIn, project: str | None = None, session: str | None = None
) -> StoreResult:
    """Store one memory (secrets redacted first); an exact duplicate in the same scope is merged, and says so."""
    if core.settings_for(project).disabled:
        raise EngramError("Engram is disabled for this project (disabled: true in .claude/engram.local.md)")
    with core.lock:
        result = write(core, [memory], project, session)[0]
    if session:
        sess = core.scopes.session(session, project)
        if sess:
            sess.touch()
    return result


@counted  # a write, as `store`: the change counter front ends poll moves
def store_in(core: MemoryCore, memory: MemoryIn, ctx: RequestContext) -> StoreResult:
    """`store` for a resolved request (the hook events': their session is looked up once)."""
    if core.settings_for(ctx.project).disabled:
        raise EngramError("Engram is disabled for this project (disabled: true in .claude/engram.local.md)")
    with core.lock:
        result = write(core, [memory], ctx.project, ctx.session_key, ctx=ctx)[0]
    if ctx.session is not None:
        ctx.session.touch()
    return result


@api
def store_many(
    core: MemoryCore, memories: list[MemoryIn], project: str | None = None, session: str | None = None
) -> list[StoreResult]:
    with core.lock:
        return write(core, memories, project, session)


@api
def import_lines(
    core: MemoryCore,
    lines: list[str],
    project: str | None = None,
    session: str | None = None,
    first_line: int = 1,
    dates: Literal["keep", "age"] = "keep",
    dry_run: bool = False,
    skip_bad: bool = False,
) -> ImportReport:
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
            if created is not None and created > core.now() + FUTURE_SKEW:
                raise ValueError(future_error("created_at", created, core.now()))
            good.append(mem)
        except (json.JSONDecodeError, ValueError, ValidationError, TypeError) as exc:
            failed.append(ImportError_(line=n, error=short_error(exc)))
    report = ImportReport(
        stored=0,
        merged=0,
        failed=failed,
        total_lines=sum(1 for x in lines if x.strip()),
        dates=dates,
        dry_run=dry_run,
        next_sweep=_import_preview(core, good, dates == "age", project),
    )
    if dry_run or (failed and not skip_bad):
        return report
    chunks = [good[i : i + IMPORT_CHUNK] for i in range(0, len(good), IMPORT_CHUNK)]
    context: dict[str, list[str]] = {}

    def ahead(chunk: list[MemoryIn]) -> tuple[_Batch, Future[tuple[np.ndarray | None, str | None]]]:
        with core.lock:
            batch = _prepare_batch(core, chunk, project, session, dates == "age", context)
        return batch, pool.submit(try_embed, core.embedder, batch.texts)

    # A chunk is embedded while the one before it is written: the model and the engine both leave Python's
    # lock while they work, so on two cores the writes take little from the embedding.
    with ThreadPoolExecutor(1, thread_name_prefix="engram-import-embed") as pool:
        try:
            nxt: tuple[_Batch, Future[tuple[np.ndarray | None, str | None]]] | EngramError | None = None
            for i in range(len(chunks)):
                if nxt is None:
                    nxt = ahead(chunks[i])
                if isinstance(nxt, EngramError):
                    raise nxt  # after the chunks before it were written, as without the look-ahead
                batch, embedding = nxt
                vecs, why = embedding.result()
                try:
                    nxt = ahead(chunks[i + 1]) if i + 1 < len(chunks) else None
                except EngramError as exc:
                    nxt = exc
                with core.lock:
                    written = _store_batch(core, batch, vecs, why)
                report.stored += sum(w[0] == "created" for w in written)
                report.merged += sum(w[0] == "merged" for w in written)
        except EngramError as exc:
            raise EngramError(f"import stopped: {exc}") from exc
    return report


def _import_preview(
    core: MemoryCore, memories: list[MemoryIn], age_dates: bool, project: str | None = None
) -> dict[str, int]:
    """What the next sweep would do to these memories, judged on their own dates and scores."""
    now = core.now()
    out: dict[str, int] = {}
    for scope in ("project", "user"):
        hl = core.half_lives(project if scope == "project" else None)  # the user store's are the daemon's
        rows = []
        for i, m in enumerate(memories):
            if m.scope.value != scope:
                continue
            created = m.created_at or now
            if created.tzinfo is None:
                created = created.replace(tzinfo=UTC)
            rows.append(
                lifecycle.Row(
                    key=str(i),
                    memory_type=m.memory_type.value,
                    status="created",
                    pinned=False,
                    importance=m.importance,
                    access_count=0,
                    half_life_days=lifecycle.half_life_for(scope, m.memory_type.value, hl),
                    created_at=created,
                    last_accessed_at=created if age_dates and m.created_at is not None else max(created, now),
                )
            )
        plan = lifecycle.plan_transitions(rows, scope, now, hl)
        for status, n in plan.counts().items():
            out[status] = out.get(status, 0) + n
        out["below_forget_threshold"] = out.get("below_forget_threshold", 0) + plan.below_forget
        out["queued_for_consolidation"] = out.get("queued_for_consolidation", 0) + len(plan.decay_queue)
    return {k: v for k, v in out.items() if v}


# ── changing one memory ──────────────────────────────────────
@api
def update(
    core: MemoryCore,
    memory_id: str,
    patch: MemoryPatch,
    project: str | None = None,
    session: str | None = None,
) -> Memory:
    store, key = core.scopes.locate(memory_id, project, session)
    changes = patch.model_dump(exclude_none=True)
    if not changes:
        raise EngramError(
            "nothing to change: give content, tags, importance, confidence, type, pinned, "
            "metadata or user_feedback"
        )
    if "tags" in changes:
        changes["tags"] = redact_value(changes["tags"])
    if "content" in changes:
        content, found = redact(changes["content"])
        changes["content"] = content
        changes["content_hash"] = content_hash(content)
        changes["search_text"] = content
        vecs, _ = try_embed(core.embedder, [content])
        if vecs is not None:
            changes["embedding"] = [float(x) for x in vecs[0]]
    if "memory_type" in changes:
        if changes["memory_type"] == "working" and store.scope != Scope.session:
            raise EngramError("working memories are session-only")
        changes["half_life_days"] = lifecycle.half_life_for(
            store.scope.value, changes["memory_type"], core.half_lives(core.project_root_of(store))
        )
    if "metadata" in changes:
        current = store.get(key) or {}
        changes["metadata"] = {**current.get("metadata", {}), **redact_value(changes["metadata"])}
    if "user_feedback" in changes and "importance" not in changes:
        # A verdict moves importance (helpful up, not helpful down, bounded): rank and decay follow it.
        row_now = store.get(key)
        if row_now is not None:
            changes["importance"] = importance_after_verdict(
                float(row_now["importance"]), changes["user_feedback"]
            )
    row = store.update_memory(key, changes)
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    if (
        store.scope == Scope.session
        and "importance" in changes
        and promotion.promote_if_important(core, store, key)
    ):
        row = store.get(key) or row
    return core.to_memory(row, store)


@api
def set_status(
    core: MemoryCore,
    memory_id: str,
    status: Status,
    reason: str = "set by user",
    project: str | None = None,
    session: str | None = None,
) -> Memory:
    """Move a memory to a lifecycle state (archive, restore to active…). Erasing (forgotten) is `forget` with
    erase and confirm, never a status change by the way."""
    if status == Status.forgotten:
        raise EngramError(
            "forgotten erases content and embedding: use forget with erase=true and confirm=true"
        )
    store, key = core.scopes.locate(memory_id, project, session)
    row = store.set_status(key, status.value, redact_text(reason), at=core.now())
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    return core.to_memory(row, store)


@api
def forget(
    core: MemoryCore,
    memory_id: str,
    project: str | None = None,
    session: str | None = None,
    reason: str = "forgotten on request",
    erase: bool = False,
    confirm: bool = False,
) -> Memory:
    """Forget = archive, a soft delete. The memory leaves recall and injection but keeps
    its content, so `set_status … active` brings it back. ``erase`` (with ``confirm``) is the separate, final
    act: the skeleton stays for history; content, search text, hash, embedding, tags, source and metadata are
    cleared (docs/security.md says what the engine's files keep)."""
    store, key = core.scopes.locate(memory_id, project, session)
    reason = redact_text(reason)
    if erase and not confirm:
        raise EngramError(
            "erasing clears this memory's content and embedding for good: "
            "confirm it (confirm=true, or --yes on the command line)"
        )
    if erase:
        words = store.mirror.unique_words(key)
        light = store.summaries.get(key)
        row = store.erase_memory(key, reason)
        if light is not None:
            promotion.drop_fingerprint(core, store, light.content_hash)
        store.conn.erased = True  # the old bytes stay in the engine's files until the next compaction
        # Recall logs live in project stores (else the user's): any may hold a recall that returned it.
        if store.scope == Scope.user:
            core.scopes.open_all_projects()
        for log_store in core.scopes.open_stores():
            if log_store.scope != Scope.session:
                log_store.retrieval_log.scrub([key], words)
    else:
        row = store.set_status(key, Status.archived.value, f"{reason} (archived; restorable)", at=core.now())
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    return core.to_memory(row, store)
