"""Promotion: a memory copied up a scope (session → project → user), or merged into a near copy there.

At session end the eligible session memories go up (``promote_session``); a session memory of importance ≥ 0.85
goes up at once (``promote_if_important``); the maintenance sweep promotes project memories seen in
two projects to the user scope, judged from the user store's ``project_fingerprint`` table (every registered
project, open or not: ``note_fingerprints``); and ``promote`` does it on request."""

from __future__ import annotations

import numpy as np

from ..api import EngramError, NotFound, api
from ..core import MemoryCore
from ..models import PromotionReport, Scope
from ..scopes import Session
from ..storage import ScopeStore, record
from ..vocabulary import PromotionTarget
from . import lifecycle

PROMOTE_COSINE = 0.9
USER_PROMOTE_COSINE = 0.85
IMMEDIATE_IMPORTANCE = 0.85  # session → project during the session, not only at its end
USER_TYPES = ("semantic", "procedural")  # what may go up to the user scope: knowledge, not episodes


# ── cross-project recurrence: the user store's project_fingerprint table (schema 013) ──
def _fingerprint_key(db: str, fp: str) -> str:
    return f"{db}_{fp}"


def note_fingerprints(core: MemoryCore, store: ScopeStore, items: list[tuple[str, str]]) -> None:
    """Record that this project holds these contents: (memory type, content hash) pairs; only the kinds that may go
    up to the user scope count. One statement on the user store (a key per project and content, so a repeat is
    a no-op)."""
    if store.scope != Scope.project:
        return
    fps = {fp for memory_type, fp in items if memory_type in USER_TYPES and fp}
    if fps:
        core.user.q(
            "INSERT IGNORE INTO project_fingerprint $rows RETURN NONE",
            {
                "rows": [
                    {
                        "id": record(_fingerprint_key(store.database, fp), "project_fingerprint"),
                        "fp": fp,
                        "project_db": store.database,
                    }
                    for fp in sorted(fps)
                ]
            },
        )


def drop_fingerprint(core: MemoryCore, store: ScopeStore, fp: str) -> None:
    """An erased memory leaves no hash of its content behind in the user store (unless another memory of the same
    project has the same content)."""
    if (
        store.scope == Scope.project
        and fp
        and not any(lt.content_hash == fp and lt.status != "forgotten" for lt in store.summaries.values())
    ):
        core.user.q("DELETE $id", {"id": record(_fingerprint_key(store.database, fp), "project_fingerprint")})


def fingerprint_existing(core: MemoryCore, store: ScopeStore) -> bool:
    """Once per project: the memories it held before the table existed (from the mirror, no database read)."""
    db = store.database
    done = core.user.q1("SELECT VALUE fingerprinted FROM project_registry WHERE project_db = $db", {"db": db})
    if done and done[0]:
        return False
    note_fingerprints(
        core,
        store,
        [
            (lt.memory_type, lt.content_hash)
            for lt in list(store.summaries.values())
            if lt.status != "forgotten"
        ],
    )
    core.user.q("UPDATE project_registry SET fingerprinted = true WHERE project_db = $db", {"db": db})
    return True


def projects_holding(core: MemoryCore, fps: list[str]) -> dict[str, set[str]]:
    """For each content hash, the project databases that hold it (open or not)."""
    out: dict[str, set[str]] = {}
    for i in range(0, len(fps), 500):
        rows = (
            core.user.q1(
                "SELECT fp, project_db FROM project_fingerprint WHERE fp IN $fps", {"fps": fps[i : i + 500]}
            )
            or []
        )
        for r in rows:
            out.setdefault(r["fp"], set()).add(r["project_db"])
    return out


def copy_up(
    core: MemoryCore, source: ScopeStore, key: str, target: ScopeStore, reason: str, threshold: float
) -> tuple[str, str]:
    """Promote or merge one memory into a higher scope; returns (action, target key)."""
    row = source.get(key)
    if row is None:
        raise NotFound(f"no memory with id {key!r}")
    source_ref = f"{source.scope.value}:{key}"
    emb = source.memories.get_embedding(key)
    dup = target.find_by_hash(row["content_hash"])
    if dup is None and emb is not None:
        near = target.index.vector(np.asarray(emb, dtype=np.float32), 1)
        if near and near[0][1] > threshold and target.summaries.get(near[0][0]) is not None:
            dup = near[0][0]
    if dup is not None:
        variants = {}
        existing = target.get(dup) or {}
        if existing.get("content_hash") != row["content_hash"]:
            # Near, not identical: keep the other wording so an update is never silently lost.
            variants = {
                "merged_variants": [
                    *existing.get("metadata", {}).get("merged_variants", []),
                    {"from": source_ref, "content": row["content"]},
                ]
            }
        target.memories.merge_into(
            dup,
            access_count=row["access_count"],
            importance=row["importance"],
            tags=row["tags"],
            merged_from=source_ref,
            metadata=variants,
        )
        action, target_key = "merged", dup
    else:
        target_key = core.new_id()
        fields = {
            k: row[k]
            for k in (
                "content",
                "content_hash",
                "memory_type",
                "tags",
                "importance",
                "confidence",
                "access_count",
                "relevance_score",
                "half_life_days",
                "source",
                "episode_id",
                "metadata",
                "created_at",
                "last_accessed_at",
            )
            if row.get(k) is not None
        }
        fields["half_life_days"] = lifecycle.half_life_for(
            target.scope.value, row["memory_type"], core.half_lives(core.project_root_of(target))
        )
        fields.update(
            scope=target.scope.value,
            promoted_from=source_ref,
            promotion_chain=[*row.get("promotion_chain", []), source_ref],
            status="active",
            status_reason=f"promoted from {source.scope.value}",
            search_text=row["content"],
        )
        fields["metadata"] = {**row.get("metadata", {}), "promoted_at": core.now().isoformat()}
        if emb is not None:
            fields["embedding"] = emb
        if row["memory_type"] == "working":
            raise EngramError("working memories are session scratch space and are never promoted")
        target.create_memory(target_key, fields)
        note_fingerprints(core, target, [(row["memory_type"], row["content_hash"])])
        # In its new scope the memory gets what any new memory gets there: entities and relations in that
        # scope's graph, an episode, contradiction checks against that scope's memories.
        for after in core.extensions.after_store:
            after(core, target, [(target_key, fields)])
        action = "promoted"
    target.create(
        "promotion_log",
        {
            "source_id": source_ref,
            "source_scope": source.scope.value,
            "target_id": f"{target.scope.value}:{target_key}",
            "target_scope": target.scope.value,
            "action": action,
            "reason": reason,
        },
    )
    return action, target_key


def promote_session(core: MemoryCore, sess: Session) -> PromotionReport:
    """The session-end pass: what the session marked, used or rated high goes up a scope."""
    report = PromotionReport(session_key=sess.key)
    target = core.project_store(sess.project_root) or core.user
    thresholds = core.param("promotion_thresholds", {"importance": 0.5, "access_count": 2})
    for key, light in list(sess.store.summaries.items()):
        row = sess.store.get(key)
        if row is None:
            continue
        meta = row.get("metadata", {})
        if meta.get("promoted_to_project") or meta.get("merged_into_project"):  # went up at once
            (report.promoted if meta.get("promoted_to_project") else report.merged).append(
                meta.get("promoted_to_project") or meta["merged_into_project"]
            )
            continue
        explicit = bool(row.get("metadata", {}).get("remember"))
        eligible = (
            light.memory_type != "working"
            and light.status not in ("forgotten", "superseded")
            and (
                explicit
                or light.importance >= 0.85
                or (
                    light.importance >= thresholds["importance"]
                    and light.access_count >= thresholds["access_count"]
                )
            )
        )
        if not eligible:
            report.skipped += 1
            continue
        action, tkey = copy_up(core, sess.store, key, target, "session end", PROMOTE_COSINE)
        (report.promoted if action == "promoted" else report.merged).append(f"{target.scope.value}:{tkey}")
    report.message = (
        f"{len(report.promoted)} promoted, {len(report.merged)} merged into existing memories, "
        f"{report.skipped} left to expire"
    )
    return report


@api
def promote(
    core: MemoryCore,
    memory_id: str,
    target_scope: PromotionTarget | None = None,
    project: str | None = None,
    session: str | None = None,
) -> PromotionReport:
    """Explicit promotion, whatever the scores: session → project, project → user."""
    store, key = core.scopes.locate(memory_id, project, session)
    if store.scope == Scope.user:
        raise EngramError("this memory is already in user scope, the highest")
    target_name = target_scope or ("project" if store.scope == Scope.session else "user")
    if target_name == "project":
        if store.scope != Scope.session:
            raise EngramError("only a session memory can be promoted to project scope")
        owner = core.scopes.session_of(store)
        target = core.project_store(project or (owner.project_root if owner else None))
        if target is None:
            raise EngramError("this session has no project; promote to user scope instead")
    else:
        target = core.user
    action, tkey = copy_up(core, store, key, target, "explicit", PROMOTE_COSINE)
    report = PromotionReport(message=f"{action} into {target.scope.value} scope as {tkey}")
    (report.promoted if action == "promoted" else report.merged).append(f"{target.scope.value}:{tkey}")
    return report


def promote_if_important(core: MemoryCore, store: ScopeStore, key: str) -> str | None:
    """A session memory of importance ≥ 0.85 goes to its project at once, so a parallel session in
    the same project sees it before this one ends. Marked on the session copy (``metadata.promoted_to_project``, or
    ``merged_into_project`` when a near copy was there) so the session-end pass does not copy it again and reports
    it. Returns the project copy's ``project:KEY``, or None."""
    if store.scope != Scope.session:
        return None
    light = store.summaries.get(key)
    if (
        light is None
        or light.memory_type == "working"
        or light.importance < IMMEDIATE_IMPORTANCE
        or light.status in ("forgotten", "superseded", "archived")
    ):
        return None
    owner = core.scopes.session_of(store)
    target = core.project_store(owner.project_root) if owner is not None and owner.project_root else None
    row = store.get(key)
    meta = row.get("metadata", {}) if row is not None else {}
    if target is None or row is None or meta.get("promoted_to_project") or meta.get("merged_into_project"):
        return None
    action, tkey = copy_up(
        core, store, key, target, f"importance ≥ {IMMEDIATE_IMPORTANCE} (immediate)", PROMOTE_COSINE
    )
    ref = f"project:{tkey}"
    mark = "promoted_to_project" if action == "promoted" else "merged_into_project"
    store.update_memory(key, {"metadata": {**meta, mark: ref}})
    return ref


def promote_project_to_user(core: MemoryCore, store: ScopeStore) -> int:
    """Project → user: importance ≥ 0.7, access ≥ 5, semantic/procedural, seen in ≥ 2 projects. Every registered
    project counts, open or not: the user store's project_fingerprint table says which hold the same content;
    an open project's mirror adds a near copy (cosine > 0.85)."""
    promoted = 0
    fingerprint_existing(core, store)
    others = [s for _root, s in core.scopes.open_projects() if s is not store]
    candidates = [
        (key, light)
        for key, light in list(store.summaries.items())
        if light.memory_type in USER_TYPES
        and light.importance >= 0.7
        and light.access_count >= 5
        and light.status in ("active", "created")
    ]
    holders = projects_holding(core, sorted({lt.content_hash for _k, lt in candidates})) if candidates else {}
    for key, light in candidates:
        # Seen elsewhere first (the fingerprints, the mirrors), the row (a database read) only then: the sweep runs
        # this under the request lock, and a read for each of hundreds of candidates would hold recall up.
        emb = store.index.embedding(key)
        where = holders.get(light.content_hash, set()) | {store.database}
        for other in others:
            if other.database in where:
                continue
            if other.find_by_hash(light.content_hash):
                where.add(other.database)
            elif emb is not None:
                near = other.index.vector(np.asarray(emb), 1)
                if near and near[0][1] > USER_PROMOTE_COSINE:
                    where.add(other.database)
        seen = len(where)
        if seen < 2:
            continue
        row = store.get(key)
        if row is None or row.get("metadata", {}).get("promoted_to_user"):
            continue
        action, tkey = copy_up(core, store, key, core.user, f"seen in {seen} projects", USER_PROMOTE_COSINE)
        store.update_memory(
            key, {"metadata": {**row.get("metadata", {}), "promoted_to_user": f"user:{tkey}"}}
        )
        promoted += 1
    return promoted
