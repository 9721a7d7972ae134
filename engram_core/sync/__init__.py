"""Sync of memories between one person's machines, and of shared memories with a team, over git (issue #32).

engine.py   the change files, the rules, the runs (init, sync, compact, status)
gitrepo.py  the git clone under ``$ENGRAM_HOME/sync/<channel>/repo`` and the remote
"""

from __future__ import annotations

from ..api import EngramError, api
from ..core import MemoryCore
from ..models import Memory, MemoryType, SyncChannel, SyncOverview, SyncReport
from . import engine

__all__ = ["share_class", "share_memory", "sync_init", "sync_run", "sync_status"]


def _channel(team: bool) -> SyncChannel:
    return "team" if team else "personal"


@api
def sync_init(core: MemoryCore, remote: str, team: bool = False) -> SyncReport:
    """Set up sync of this data root to ``remote`` (a git URL or a bare repository's path), once, and run the
    first sync. ``team``: the team remote, which carries only memories marked shared."""
    return engine.init(core, remote, _channel(team))


@api
def sync_run(core: MemoryCore, team: bool = False, compact: bool = False) -> SyncReport:
    """Push what changed here, pull what changed elsewhere. ``compact``: afterwards rewrite the remote's sync
    history as one snapshot (erased texts leave it; a remote on this machine is pruned at once)."""
    return engine.run(core, _channel(team), compact=compact)


@api
def sync_status(core: MemoryCore, project: str | None = None) -> SyncOverview:
    """Each channel's remote, last sync and pending changes; how many memories are marked shared."""
    channels = [engine.status(core, "personal"), engine.status(core, "team")]
    shared = 0
    stores = (
        core.scopes.stores("project", project, None)
        if project
        else [s for _, s in core.scopes.open_projects()]
    )
    for store in stores:
        shared += sum(1 for lt in store.summaries.values() if engine.SHARED_TAG in lt.tags)
    return SyncOverview(channels=channels, shared=shared)


@api
def share_memory(core: MemoryCore, memory_id: str, project: str | None = None, shared: bool = True) -> Memory:
    """Mark a project memory shared with the team (it travels to the team remote at the next `engram sync
    --team`), or unshare it (teammates' copies are erased at their next team sync). Nothing is shared unless
    marked; user and session memories never are."""
    store, key = core.scopes.locate(memory_id, project, None)
    if store.scope.value != "project":
        raise EngramError("only project memories can be shared with a team (this one is in the user scope)")
    row = store.get(key)
    if row is None or row.get("status") == "forgotten":
        raise EngramError(f"memory {key!r} is erased: nothing to share")
    tags = list(row.get("tags") or [])
    if shared and engine.SHARED_TAG not in tags:
        tags.append(engine.SHARED_TAG)
    if not shared:
        tags = [t for t in tags if t != engine.SHARED_TAG]
    new = store.update_memory(key, {"tags": tags})
    assert new is not None
    return core.to_memory(new, store)


SHAREABLE_TYPES = ("procedural", "semantic")


@api
def share_class(core: MemoryCore, memory_type: MemoryType, project: str, shared: bool = True) -> int:
    """Mark every live project memory of one type shared (or unshared) at once: the class the person approves
    (procedural or semantic: how the project is built and what is true of it; never episodic or working notes).
    Memories stored later are not shared until marked. Returns how many changed."""
    if memory_type.value not in SHAREABLE_TYPES:
        raise EngramError(f"only {' and '.join(SHAREABLE_TYPES)} memories can be shared as a class")
    store = core.project_store(project)
    assert store is not None
    changed = 0
    for key, lt in list(store.summaries.items()):
        if lt.memory_type != memory_type.value or (engine.SHARED_TAG in lt.tags) == shared:
            continue
        if lt.status in ("forgotten", "superseded", "archived"):
            continue
        share_memory(core, key, project, shared)
        changed += 1
    return changed
