"""Context injection: what a new session starts with (session_context.py builds it within the budget), and
the weaker use that injection counts for the memories it showed."""

from __future__ import annotations

from datetime import datetime

from ..api import api
from ..core import MemoryCore
from ..integrations.claude_code import session_context
from ..memory import lifecycle
from ..models import InjectionPreview
from ..storage import ScopeStore


@api
def injection_context(
    core: MemoryCore, project: str | None = None, session: str | None = None, budget: int | None = None
) -> InjectionPreview:
    """What a new session starts with: the memory protocol, recent session summaries, instructions, fixes,
    then the strongest project and user memories, within a token budget (session_context.py)."""
    settings = core.settings_for(project)
    budget = settings.injection_token_budget if budget is None else budget
    if settings.disabled:
        return InjectionPreview(text="", tokens=0, budget=budget, items=[], disabled=True)
    pstore = core.project_store(project) if project else None
    stores = [pstore, core.user] if pstore is not None else [core.user]
    return session_context.build(core, stores, budget, core.now())


@api
def note_injected(core: MemoryCore, ids: list[str], project: str | None = None) -> int:
    """SessionStart injected these memories ("scope:key" or bare ids, as InjectionPreview.items give them):
    a weaker use than a recall (lifecycle.INJECTION_WEIGHT). Returns how many were found."""
    now = core.now()
    per_store: dict[int, tuple[ScopeStore, dict[str, datetime]]] = {}
    candidates = [s for s in (core.project_store(project) if project else None, core.user) if s is not None]
    for raw in ids:
        scope, _, key = raw.rpartition(":")
        for store in candidates:
            if scope and scope != store.scope.value:
                continue
            light = store.summaries.get(key)
            if light is not None:
                per_store.setdefault(id(store), (store, {}))[1][key] = lifecycle.injected_last_use(
                    light.last_accessed_at, now
                )
                break
    for store, last_use in per_store.values():
        store.memories.note_injected(last_use, now)
    return sum(len(v) for _, v in per_store.values())
