"""Episodes, for a coding agent: a session's memories are cut at boundaries (explicit, a long
time gap, a completed task, a shift of topic measured on embeddings), and recall inside a session finds
memories from other episodes a little harder (cross-boundary penalty, default 0.7: "cross-boundary
retrieval impaired by ~30 %").

A stream is the session a memory was written in; memories written outside a session (or into project/user
scope, which the store hook cannot tie to a session) form one stream per store.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..models import EpisodeInfo
from ..redaction import redact_text
from ..storage import MemorySummary, ScopeStore, key_of, plain
from .base import EngramError, MemoryCore, OrganiseState, Stream, api, as_dt, rid, state

TIME_GAP = timedelta(minutes=30)
TOPIC_SHIFT_COSINE = (
    0.55  # on contextual vectors (memory + the one before): on-topic 0.70-0.91, shifts 0.34-0.52
)
MIN_EPISODE_FOR_SHIFT = 2  # a one-memory episode has no topic yet to shift from
DEFAULT_PENALTY = 0.7
_DONE = re.compile(
    r"\b(?:task (?:is )?(?:done|complete[d]?)|all tests pass(?:ing)?|tests? (?:are )?green|"
    r"(?:pr|pull request) (?:is )?merged|merged (?:the )?(?:pr|pull request|branch)|shipped|"
    r"released v?\d|deployed to prod(?:uction)?|done with (?:the )?\w+|finished (?:the )?\w+|"
    r"(?:bug|issue) (?:is )?(?:fixed|resolved|closed))\b",
    re.I,
)


def stream_of(store: ScopeStore, fields: dict[str, Any]) -> str:
    return fields.get("session_id") or f"store:{store.scope.value}"


def _load_stream(store: ScopeStore, name: str) -> Stream:
    rows = store.q1(
        "SELECT id, last_at, memory_count, started_at FROM episode WHERE stream = $s AND ended_at IS NONE "
        "ORDER BY started_at DESC LIMIT 1",
        {"s": name},
    )
    if not rows:
        return Stream()
    r = plain(rows[0])
    return Stream(episode_id=key_of(r["id"]), last_at=r.get("last_at"), count=int(r.get("memory_count") or 0))


def _stream(st: OrganiseState, store: ScopeStore, name: str) -> Stream:
    ss = st.of(store)
    s = ss.streams.get(name)
    if s is None:
        s = ss.streams[name] = _load_stream(store, name)
    return s


def _open(
    store: ScopeStore,
    writes: list[dict[str, Any]],
    s: Stream,
    name: str,
    boundary: str,
    trigger: str | None,
    at: datetime,
) -> None:
    if s.episode_id:
        writes.append({"op": "end", "id": rid("episode", s.episode_id), "t": at, "r": boundary})
    key = "ep_" + store.new_id()
    writes.append(
        {
            "op": "open",
            "id": rid("episode", key),
            "c": {
                "stream": name,
                "started_at": at,
                "last_at": at,
                "boundary_type": boundary,
                "boundary_trigger": redact_text(trigger or "")[:300] or None,
            },
        }
    )  # whole, then cut
    s.episode_id, s.last_at, s.centroid, s.count, s.pending = key, at, None, 0, None


def assign(core: MemoryCore, store: ScopeStore, fields: dict[str, Any], vec: np.ndarray | None) -> str | None:
    """The episode a new memory belongs to; opens a new one at a boundary. What that writes waits in the
    store's organise state (``writes``) for the memory's graph write, which sends it in the same round trip."""
    if fields.get("episode_id"):
        return None  # the writer chose the episode itself (imports, benchmarks)
    st = state(core)
    name = stream_of(store, fields)
    at: datetime = fields.get("created_at") or core.now()
    with st.lock:
        s = _stream(st, store, name)
        writes = st.of(store).writes
        if s.pending is not None:
            _open(store, writes, s, name, s.pending[0], s.pending[1], at)
        elif s.episode_id is None:
            _open(store, writes, s, name, "start", None, at)
        elif s.last_at is not None and at - s.last_at > TIME_GAP:
            _open(
                store,
                writes,
                s,
                name,
                "temporal",
                f"{int((at - s.last_at).total_seconds() // 60)} min since the last memory",
                at,
            )
        elif vec is not None and s.centroid is not None and s.count >= MIN_EPISODE_FOR_SHIFT:
            sim = float(np.dot(s.centroid, vec) / max(float(np.linalg.norm(s.centroid)), 1e-9))
            if sim < TOPIC_SHIFT_COSINE:
                _open(store, writes, s, name, "context_shift", f"cosine {sim:.2f} to the episode's topic", at)
        if vec is not None:
            s.centroid = (
                vec.copy()
                if s.centroid is None
                else s.centroid * (s.count / (s.count + 1)) + vec / (s.count + 1)
            )
        s.count += 1
        s.last_at = at if s.last_at is None else max(s.last_at, at)
        episode = s.episode_id
        m = _DONE.search(fields.get("content", ""))
        if m and episode is not None:
            s.pending = ("task_completion", m.group(0))
            writes.append({"op": "done", "id": rid("episode", episode), "t": at})
    return episode


def current_episodes(core: MemoryCore, stores: list[ScopeStore], session_key: str | None) -> set[str]:
    st = state(core)
    out: set[str] = set()
    with st.lock:
        for store in stores:
            ss = st.of(store)
            for name in (session_key, f"store:{store.scope.value}"):
                s = ss.streams.get(name) if name else None
                if s is not None and s.episode_id and s.pending is None:
                    out.add(s.episode_id)
    return out


def boundary_booster(
    core: MemoryCore, key: str, store: ScopeStore, light: MemorySummary, context: dict[str, Any]
) -> float:
    """Inside a session, memories of another episode get the cross-boundary penalty."""
    session = context.get("session")
    if not session or not light.episode_id:
        return 1.0
    cur = context.get("_episodes")
    if cur is None:
        sess_key = None
        try:
            sess = core.scopes.session(session, context.get("project"), create=False)
            sess_key = sess.key if sess else None
        except Exception:
            sess_key = None
        stores = [s.store for s in core.scopes.live_sessions() if s.key == sess_key] + [store]
        cur = current_episodes(core, stores, sess_key)
        # Re-used by the other candidates of this recall (the context dict lives for one recall).
        context["_episodes"] = cur
    if not cur or light.episode_id in cur:
        return 1.0
    if "_penalty" not in context:  # one database read per recall, not one per candidate
        context["_penalty"] = float(core.param("episode_boundary_penalty", DEFAULT_PENALTY))
    return float(context["_penalty"])


def _info(r: dict[str, Any]) -> EpisodeInfo:
    r = plain(r)
    return EpisodeInfo(
        id=key_of(r["id"]),
        stream=r["stream"],
        started_at=r["started_at"],
        ended_at=as_dt(r.get("ended_at")),
        boundary_type=r["boundary_type"],
        boundary_trigger=r.get("boundary_trigger"),
        end_reason=r.get("end_reason"),
        memory_count=int(r.get("memory_count") or 0),
    )


@api
def end_episode(
    core: MemoryCore, session: str, reason: str = "explicit", project: str | None = None
) -> list[EpisodeInfo]:
    """An explicit boundary: the session's open episodes end now; its next memory starts a new one."""
    try:
        sess = core.scopes.session(session, project, create=False)
    except Exception as exc:
        raise EngramError(f"no live session {session!r}") from exc
    assert sess is not None
    st = state(core)
    closed: list[EpisodeInfo] = []
    now = core.now()
    targets = [(sess.store, sess.key)]
    pstore = core.project_store(sess.project_root) if sess.project_root else None
    for store in [s for s in (pstore, core.user) if s is not None]:
        targets.append((store, f"store:{store.scope.value}"))
    with st.lock:
        for store, name in targets:
            s = _stream(st, store, name)
            if s.episode_id is None:
                continue
            rows = store.graph.end_episode(s.episode_id, now, redact_text(reason)[:300])
            s.pending = ("explicit", reason)
            if rows:
                closed.append(_info(rows[0]))
    return closed


@api
def list_episodes(
    core: MemoryCore, project: str | None = None, session: str | None = None, limit: int = 50
) -> list[EpisodeInfo]:
    out: list[EpisodeInfo] = []
    for store in core.scopes.stores("all", project, session):
        rows = store.q1("SELECT * FROM episode ORDER BY started_at DESC LIMIT $n", {"n": limit}) or []
        out += [_info(r) for r in rows]
    out.sort(key=lambda e: e.started_at, reverse=True)
    return out[:limit]
