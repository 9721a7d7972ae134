"""EngramService: the one interface every front end uses (CLI, MCP server, hooks, TUI).

A thin facade: the memory core (core.py) with the organise layer registered on its extension points, and
the API, declared here in one place. Every ``@api`` function listed in the class is what the daemon serves
(``api.serve``); each lives in the module named for what it does. In process the service owns the stores
(tests, and the daemon itself); ``wire.client.RemoteService`` speaks the same methods over the daemon's socket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from . import backup, console, health, organise, projects, settings_report, sync, tools_support
from .api import API_METHODS, UNLOCKED_API, EngramError, NotFound, api, call_api, serve
from .api import revision as _revision
from .core import CoreOptions, MemoryCore
from .memory import listing, maintenance, promotion, sessions, writing
from .organise import (
    associations,
    consolidation,
    contradictions,
    episodes,
    evolution,
    graph_api,
    recursive,
    relations,
)
from .retrieval import injection, recall
from .retrieval.embeddings import EmbeddingError
from .storage import StoreError


@serve
class EngramService(MemoryCore):
    def __init__(
        self, home: Path | str | None = None, *, recover_sessions: bool = True, **options: Unpack[CoreOptions]
    ) -> None:
        super().__init__(home, **options)
        organise.register(self)
        sessions.resume(self, recover=recover_sessions)

    def __enter__(self) -> EngramService:
        return self

    def recover_stale_sessions(self, older_than_hours: float | None = None) -> int:
        return sessions.recover_stale_sessions(self, older_than_hours)

    # ── the API: what the daemon serves ──────────────────────
    # projects and sessions
    list_projects = listing.list_projects
    project_identity = projects.project_identity
    start_session = sessions.start_session
    list_sessions = sessions.list_sessions
    end_session = sessions.end_session
    session_summary = sessions.session_summary
    # writing and changing memories
    store = writing.store
    store_many = writing.store_many
    import_lines = writing.import_lines
    update = writing.update
    set_status = writing.set_status
    forget = writing.forget
    # reading
    get = listing.get
    list_memories = listing.list_memories
    stats = listing.stats
    mark_retrieval_useful = recall.mark_retrieval_useful
    recall = recall.recall  # after every other use of the module's name in this class body
    # promotion and maintenance
    promote = promotion.promote
    maintain = maintenance.maintain
    compact = maintenance.compact
    redact_stored = maintenance.redact_stored
    # injection, console, backup, health
    injection_context = injection.injection_context
    note_injected = injection.note_injected
    run_query = console.run_query
    preview_write = console.preview_write
    export_memories = backup.export_memories
    restore_memories = backup.restore_memories
    health = health.health
    # sync between machines and with a team (sync/)
    sync_init = sync.sync_init
    sync_run = sync.sync_run
    sync_status = sync.sync_status
    share_memory = sync.share_memory
    share_class = sync.share_class
    settings_report = settings_report.settings_report

    @api
    def revision(self) -> int:
        """The change counter (bumped by every API call that may change memories, in this process): a front end
        polls it and reloads only when it moved."""
        return _revision()

    def has(self, method: str) -> bool:
        """Does this service serve ``method``? The same question ``RemoteService.has`` answers for the daemon."""
        return method in API_METHODS

    # the self-organising layer (organise/)
    search_knowledge_graph = graph_api.search_knowledge_graph
    memory_graph = graph_api.memory_graph
    add_entities = graph_api.add_entities
    relate_entities = relations.relate_entities
    list_contradictions = contradictions.list_contradictions
    resolve_contradiction = contradictions.resolve_contradiction
    reopen_contradiction = contradictions.reopen_contradiction
    count_contradictions = contradictions.count_contradictions
    resolve_contradictions = contradictions.resolve_contradictions
    list_consolidations = consolidation.list_consolidations
    count_consolidations = consolidation.count_consolidations
    reopen_consolidation = consolidation.reopen_consolidation
    decide_consolidations = consolidation.decide_consolidations
    approve_consolidation = consolidation.approve_consolidation
    reject_consolidation = consolidation.reject_consolidation
    propose_consolidation_summary = consolidation.propose_consolidation_summary
    reflect_and_consolidate = consolidation.reflect_and_consolidate
    maintain_organisation = consolidation.maintain_organisation
    end_episode = episodes.end_episode
    list_episodes = episodes.list_episodes
    coactivate_memories = associations.coactivate_memories
    memory_associations = associations.memory_associations
    evolve_memory_system = evolution.evolve_memory_system
    evolution_history = evolution.evolution_history
    rollback_evolution = evolution.rollback_evolution
    retrieval_history = evolution.retrieval_history
    memory_peek = recursive.memory_peek
    memory_partition = recursive.memory_partition
    memory_aggregate = recursive.memory_aggregate
    # tools with no module of their own (MCP)
    engram_explore = tools_support.engram_explore
    recall_skill = tools_support.recall_skill
    # true totals for the queues (the lists stop at their limit)


__all__ = [
    "API_METHODS",
    "UNLOCKED_API",
    "EmbeddingError",
    "EngramError",
    "EngramService",
    "NotFound",
    "StoreError",
    "call_api",
]
