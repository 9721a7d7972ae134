"""Sessions: start, list, end (the promotion pass, then the session database goes), recovery of sessions that
never ended, and the agent's own summary of its session."""

from __future__ import annotations

from datetime import timedelta

from ..api import api
from ..core import MemoryCore
from ..identity import identity_of
from ..integrations.claude_code import session_learning
from ..models import Memory, PromotionReport, SessionInfo
from ..redaction import redact_text
from ..scopes import Session
from . import lifecycle
from .promotion import promote_session


def resume(core: MemoryCore, recover: bool = True) -> None:
    """At start: reopen the sessions still on disk and, with ``recover``, end the stale ones."""
    core.scopes.reattach_sessions()
    if recover:
        recover_stale_sessions(core)


def info(s: Session, resumed: bool = False) -> SessionInfo:
    return SessionInfo(
        session_key=s.key,
        claude_session_id=s.claude_id,
        project_root=s.project_root,
        project_db=identity_of(s.project_root).key if s.project_root else None,
        started_at=s.started_at,
        status="active",
        resumed=resumed,
    )


@api
def start_session(
    core: MemoryCore,
    project: str | None = None,
    claude_session_id: str | None = None,
    source: str | None = None,
) -> SessionInfo:
    sess, resumed = core.scopes.start_session(project, claude_session_id)
    return info(sess, resumed=resumed)


@api
def list_sessions(core: MemoryCore) -> list[SessionInfo]:
    return [info(s) for s in core.scopes.live_sessions()]


@api
def end_session(core: MemoryCore, session: str, reason: str = "ended") -> PromotionReport:
    """Promotion pass (what the session marked, used or rated high goes up a scope), then the session database is dropped."""
    sess = core.scopes.session(session, create=False)
    assert sess is not None
    reason = redact_text(reason)
    with sess.lock:
        evidence = session_learning.collect(core, sess)
        report = promote_session(core, sess)
        session_learning.store_summary(core, sess, evidence, report)
        session_learning.clear_hook_state(core.home, sess.claude_id)
        pstore = core.project_store(sess.project_root)
        status = "recovered" if reason == "recovered" else "completed"
        if pstore is not None:
            pstore.q(
                "UPDATE session_registry SET status = $st, ended_at = time::now(), end_reason = $r, "
                "memories_promoted = $n WHERE session_key = $k",
                {"st": status, "r": reason, "n": len(report.promoted) + len(report.merged), "k": sess.key},
            )
        report.dropped = len(sess.store.summaries)
        # The self-tuning schedule (docs/memory-model.md) counts sessions that ended, once each, here.
        lifecycle.count_session_end(pstore if pstore is not None else core.user)
        core.scopes.drop_session(sess)
    return report


def recover_stale_sessions(core: MemoryCore, older_than_hours: float | None = None) -> int:
    """Sessions that never ended (crash, killed terminal) get their promotion pass."""
    cutoff = core.now() - timedelta(hours=older_than_hours or core.settings.session_stale_hours)
    n = 0
    for sess in core.scopes.live_sessions():
        seen = sess.store.q1("SELECT VALUE last_seen_at FROM ONLY session_registry:self")
        if seen is None or seen < cutoff:
            end_session(core, sess.key, reason="recovered")
            n += 1
    return n


@api
def session_summary(core: MemoryCore, session: str, summary: str, project: str | None = None) -> Memory:
    """The agent's summary of its session, kept in project scope (a second call replaces the first); the
    automatic summary at session end then leaves it as written (session_learning.py)."""
    with core.lock:
        return session_learning.write_agent_summary(core, session, summary, project)
