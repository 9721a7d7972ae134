"""What a Claude Code hook event means for memory. The daemon only carries events (journal, queue, retries);
this module checks their shape, applies them, answers the two hooks that wait for context, and says when the
light maintenance step is due after a turn or a session.

Kinds sent by hooks/engram_hook.py: ``memory`` (an edit, a failed command…), ``prompt``, ``command_ok``,
``checkpoint`` (PreCompact), ``stop`` (end of a turn: hooks.json no longer registers Stop, whose work each turn's
``prompt`` does; still accepted from older plugin copies and spools), ``session_end``; the daemon adds
``session_start``.
Every call that touches the stores holds ``core.api_lock`` (the daemon's request lock).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ...api import EngramError
from ...config import find_project_root
from ...core import MemoryCore
from ...memory.maintenance import maintain
from ...memory.scoring import estimate_tokens
from ...memory.sessions import end_session, start_session
from ...memory.writing import store_in
from ...models import MemoryIn
from ...organise.consolidation import reflect_and_consolidate
from ...paths import ConfigError
from ...redaction import redact_text
from ...retrieval.injection import injection_context, note_injected
from ...retrieval.recall import recall
from ...scopes import RequestContext
from . import session_learning

log = logging.getLogger(__name__)

# Every kind `apply` applies: a new kind goes here too, or the daemon refuses it before the journal.
EVENT_KINDS = ("memory", "session_end", "checkpoint", "stop", "prompt", "command_ok")
AFTER_TURN_MIN_INTERVAL_S = 300.0
SESSION_END_BUDGET_S = 30.0
PROMPT_RECALL_HEADER = "# Engram: memories related to this prompt\n"
PROMPT_RECALL_HITS = 8
PROMPT_LINE_CHARS = 400


def project_of(cwd: str | None) -> str | None:
    return str(find_project_root(cwd)) if cwd else None


def check(event: Any) -> None:
    """The shape `apply` needs, checked before an event is acknowledged (EngramError says what is wrong)."""
    if not isinstance(event, dict):
        raise EngramError("hook_event needs params.event, a JSON object")
    kind = event.get("kind")
    if kind not in EVENT_KINDS:
        raise EngramError(f"hook_event: unknown kind {kind!r}; one of {', '.join(EVENT_KINDS)}")
    for name in ("session_id", "cwd", "event_id", "reason", "trigger", "prompt", "command"):
        if event.get(name) is not None and not isinstance(event[name], str):
            raise EngramError(f"hook_event: {name} must be a string")
    if kind == "memory":
        if not isinstance(event.get("memory"), dict):
            raise EngramError("hook_event: a memory event needs event.memory, a JSON object")
        try:
            MemoryIn(**event["memory"])
        except (ValidationError, TypeError) as exc:
            raise EngramError(f"hook_event: event.memory is not a valid memory: {exc}") from None


@dataclass(frozen=True)
class AfterTurnDue:
    """After this event, the after-turn pass may run for ``project`` (``force``: whatever ran lately)."""

    project: str | None
    force: bool = False


def apply(core: MemoryCore, eid: str, event: dict[str, Any]) -> AfterTurnDue | None:
    """Apply one acknowledged event; an exception leaves it in the daemon's journal to be retried."""
    kind = event.get("kind")
    session = event.get("session_id") or None
    project = project_of(event.get("cwd"))
    if project is not None:
        try:
            if core.settings_for(project).disabled:
                return None
        except ConfigError as exc:
            log.warning("event %s: %s", eid, exc)
    lock = core.api_lock

    def resolve() -> RequestContext:
        """Once, under the lock of the work that uses it (a session cannot end in between); a Claude session
        whose SessionStart we missed is started by its hook events."""
        return core.scopes.resolve(project, session, create=True)

    if kind == "session_start":
        if session:
            with lock:
                start_session(core, project=project, claude_session_id=session, source=event.get("source"))
    elif kind == "memory":
        data = dict(event.get("memory") or {})
        data["metadata"] = {**(data.get("metadata") or {}), "hook_event_id": eid}
        mem = MemoryIn(**data)
        with lock:
            ctx = resolve()
            if event.get("_replay") and _already_stored(core, eid, mem.scope.value, ctx):
                return None
            store_in(core, mem, ctx)
    elif kind == "session_end":
        if not session:
            return None
        with lock:
            try:
                report = end_session(core, session, reason=str(event.get("reason") or "ended"))
            except LookupError:
                return None  # never started, or already ended: nothing to promote
        log.info("session %s ended: %s", session, report.message)
        return AfterTurnDue(project, force=True)
    elif kind in ("prompt", "command_ok"):
        if not session:
            return None
        with lock:
            ctx = resolve()
            if kind == "prompt":
                session_learning.on_prompt(core, str(event.get("prompt") or ""), ctx)
                # each turn starts with one: it carries what a Stop hook did (plugin has none)
                assert ctx.session is not None
                ctx.session.touch()
            else:
                session_learning.on_command_ok(core, str(event.get("command") or ""), ctx)
        if kind == "prompt":
            return AfterTurnDue(project)
    elif kind == "checkpoint":
        # PreCompact: the session is already on disk; leave a note of what it did so far for after compaction.
        if session:
            with lock:
                session_learning.checkpoint(core, resolve(), str(event.get("trigger") or "auto"))
    elif kind == "stop":
        if session:
            with lock, contextlib.suppress(LookupError):
                sess = core.scopes.session(session, project)
                if sess is not None:
                    sess.touch()
        return AfterTurnDue(project)
    else:
        raise ValueError(f"unknown hook event kind {kind!r}")
    return None


def _already_stored(core: MemoryCore, eid: str, scope: str, ctx: RequestContext) -> bool:
    """A retried memory event whose first attempt wrote it after all."""
    try:
        stores = ctx.stores(scope)
    except Exception:
        return False
    for s in stores:
        if s.q1("SELECT VALUE id FROM memory WHERE metadata.hook_event_id = $e LIMIT 1", {"e": eid}):
            return True
    return False


class AfterTurnPass:
    """The after-turn pass, after a turn or a session (the sweep, then consolidation while the budget
    lasts); heavier work stays in the periodic sweep. At most once per AFTER_TURN_MIN_INTERVAL_S per project,
    unless forced (a session that ended)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, want: AfterTurnDue) -> bool:
        key = want.project or "-"
        now = time.monotonic()
        with self._lock:
            if not want.force and now - self._last.get(key, -1e9) < AFTER_TURN_MIN_INTERVAL_S:
                return False
            self._last[key] = now
        return True

    @staticmethod
    def run(core: MemoryCore, project: str | None) -> None:
        key = project or "-"
        t0 = time.perf_counter()
        try:
            if core.closed:
                return
            maintain(core, project=project)  # takes the request lock a slice at a time
            if time.perf_counter() - t0 < SESSION_END_BUDGET_S:
                with core.api_lock:
                    if not core.closed:
                        reflect_and_consolidate(core, project=project)
        except Exception:
            log.exception("light consolidation for %s failed", key)
        log.info("light consolidation for %s took %.0f ms", key, (time.perf_counter() - t0) * 1000)


def session_start_context(
    core: MemoryCore, session_id: str | None, cwd: str | None, budget: int | None
) -> dict[str, Any]:
    """SessionStart: the context to inject (session_context.py); being injected counts as a (weaker) use."""
    project = project_of(cwd)
    with core.api_lock:
        preview = injection_context(core, project=project, budget=budget)
        # Being injected is a (weaker) use: it slows the decay of what the agent is shown every session.
        note_injected(core, [f"{i.scope.value}:{i.id}" for i in preview.items], project=project)
    text = preview.text
    if text and session_id:
        text += f"\n\n(To stop Engram's capture for this session: `engram off --session {session_id}`.)"
    return {"text": text, "tokens": preview.tokens, "items": len(preview.items), "disabled": preview.disabled}


def prompt_context(core: MemoryCore, prompt: str, session_id: str | None, cwd: str | None) -> dict[str, Any]:
    """UserPromptSubmit recall: off unless prompt_recall is set; the best hits within its own small budget."""
    project = project_of(cwd)
    settings = core.settings_for(project)
    if not settings.prompt_recall or settings.disabled or not prompt.strip():
        return {"text": "", "enabled": False}
    with core.api_lock:
        if session_id:  # a hook may name a Claude session whose SessionStart we missed
            core.scopes.session(session_id, project, create=True)
        result = recall(
            core,
            redact_text(prompt)[:2000],
            project=project,
            session=session_id,
            limit=PROMPT_RECALL_HITS,
            log=False,
        )
    budget = settings.prompt_recall_token_budget
    lines, used = [], estimate_tokens(PROMPT_RECALL_HEADER)
    for hit in result.hits:
        m = hit.memory
        line = (
            f"- [{m.scope.value}/{m.memory_type.value}] {m.content.strip()[:PROMPT_LINE_CHARS]} (id {m.id})"
        )
        cost = estimate_tokens(line + "\n")
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    text = PROMPT_RECALL_HEADER + "\n".join(lines) if lines else ""
    return {"text": text, "enabled": True, "tokens": used if lines else 0}
