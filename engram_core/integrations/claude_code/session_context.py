"""The context a new Claude Code session starts with (SessionStart ``additionalContext``).

In order, within the token budget: the memory protocol (memory_protocol.py), the last few session summaries,
the user's standing instructions, fixes and procedures, then the strongest other project and user memories
(strength × scope weight; near-dead ones, below the archive threshold, left out). Raw session
evidence (per-edit captures, failed commands) is never listed one per line: the summaries carry it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ...memory.scoring import ARCHIVE_BELOW, estimate_tokens, memory_strength
from ...models import InjectionItem, InjectionPreview, MemoryType
from .memory_protocol import PROTOCOL
from .session_learning import (
    COMMAND_TAG,
    ERROR_TAG,
    FILE_TAG,
    FIX_TAG,
    GOAL_TAG,
    INSTRUCTION_TAG,
    SUMMARY_TAG,
)

if TYPE_CHECKING:
    from ...core import MemoryCore
    from ...storage import MemorySummary, ScopeStore

HEADER = "# Engram memory (strongest first; ids work with get_memory/forget_memory)\n"
RECENT_SESSIONS = 3
LIVE = ("active", "created", "consolidated")
EVIDENCE_TAGS = {FILE_TAG, ERROR_TAG, COMMAND_TAG, GOAL_TAG, "compaction"}
# Share of the budget each section may take at most; the strongest memories get whatever is left.
SHARES = {"Recent sessions": 0.3, "Instructions from the user": 0.2, "Fixes and procedures": 0.25}
PROJECT_SHARE = 0.7  # of what is left for the strongest memories, when the user scope has some too
MAX_LINE_CHARS = 600


def _line(lt: MemorySummary, key: str, prefix: str | None = None) -> str:
    return f"- {prefix or f'[{lt.memory_type}]'} {' '.join(lt.content.split())[:MAX_LINE_CHARS]} (id {key})"


def build(core: MemoryCore, stores: list[ScopeStore], budget: int, now: datetime) -> InjectionPreview:
    # The project's own weights (its engram.local.md), as its recalls use them.
    weights = core.scope_weights(
        None, next((core.project_root_of(s) for s in stores if s.scope.value == "project"), None)
    )
    candidates: list[
        tuple[float, float, str, MemorySummary, ScopeStore]
    ] = []  # (weighted, strength, key, light, store)
    summaries: list[tuple[datetime, str, MemorySummary, ScopeStore]] = []
    for store in stores:
        weight = weights.get(store.scope.value, 1.0)
        for key, lt in store.summaries.items():
            tags = set(lt.tags)
            if SUMMARY_TAG in tags:
                # Listed by date: a summary decays like any episode, yet stays "the last session".
                if lt.status in (*LIVE, "archived"):
                    summaries.append((lt.created_at, key, lt, store))
                continue
            if lt.status not in LIVE or lt.memory_type == "working" or tags & EVIDENCE_TAGS:
                continue
            strength = memory_strength(
                lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now
            )
            if strength < ARCHIVE_BELOW:
                continue
            candidates.append((strength * weight, strength, key, lt, store))
    candidates.sort(key=lambda c: (-c[0], c[2]))
    summaries.sort(key=lambda s: (s[0], s[1]), reverse=True)

    sections: dict[str, list[tuple[str, str, MemorySummary, ScopeStore, float]]] = {
        "Recent sessions": [
            (_line(lt, k, created.date().isoformat() + ":"), k, lt, st, 0.0)
            for created, k, lt, st in summaries[:RECENT_SESSIONS]
        ],
        "Instructions from the user": [],
        "Fixes and procedures": [],
        "Project": [],
        "User": [],
    }
    for _w, strength, key, lt, store in candidates:
        if INSTRUCTION_TAG in lt.tags:
            name = "Instructions from the user"
        elif FIX_TAG in lt.tags or lt.memory_type == "procedural":
            name = "Fixes and procedures"
        else:
            name = "Project" if store.scope.value == "project" else "User"
        sections[name].append((_line(lt, key), key, lt, store, strength))

    used = estimate_tokens(HEADER + PROTOCOL + "\n")
    parts: list[str] = []
    items: list[InjectionItem] = []
    for name, lines in sections.items():
        if name in SHARES:
            allowance = int(budget * SHARES[name])
        elif name == "Project" and sections["User"]:
            allowance = int((budget - used) * PROJECT_SHARE)  # leave the user scope its part
        else:
            allowance = budget - used
        spent = estimate_tokens(f"## {name}\n")
        kept = []
        for text, key, lt, store, strength in lines:
            cost = estimate_tokens(text + "\n")
            if spent + cost > allowance or used + spent + cost > budget:
                continue
            kept.append(text)
            spent += cost
            items.append(
                InjectionItem(
                    id=key,
                    scope=store.scope,
                    memory_type=MemoryType(lt.memory_type),
                    content=lt.content,
                    strength=strength,
                    tokens=cost,
                )
            )
        if kept:
            parts.append(f"## {name}\n" + "\n".join(kept))
            used += spent
    text = HEADER + PROTOCOL + ("\n" + "\n".join(parts) if parts else "")
    return InjectionPreview(text=text, tokens=estimate_tokens(text), budget=budget, items=items)
