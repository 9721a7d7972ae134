"""Engram's MCP tools, served with the official ``mcp`` SDK (2.x ``MCPServer``) inside the daemon.

Claude Code starts the standard-library bridge (:mod:`engram_core.mcp.bridge`, also ``engram mcp``), which sends
the daemon one ``mcp_attach`` line and then relays JSON-RPC; :func:`serve_connection` serves that connection
with the SDK on the daemon's side, so the SDK import (~0.8 s) and the stores are paid once per daemon, not per
session. One :class:`MCPServer` is built per daemon; each connection's context (project, session) reaches the
tools through a context variable.

Every tool validates its arguments from its type hints (pydantic) and turns a refusal into a tool error whose
message says what to fix. Results are the same JSON a client of the daemon's socket gets.

Session: Claude Code gives the MCP server ``CLAUDE_CODE_SESSION_ID``, the id its hooks see as ``session_id``
(checked against the real CLI in tests/claude_code/test_cli_contract.py): the tools write to that session and
never end it; the SessionEnd hook does. Without that id (another MCP client) the connection opens a session of
its own the first time a session-scoped memory is stored and ends it (promotion pass) when the connection closes.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import threading
from typing import Annotated, Any, Literal, Protocol, cast

from pydantic import Field

from ..models import EntityIn, RelationType
from ..vocabulary import MemoryTypeName, PromotionTarget, ScopeName, ScopeOrAll
from ..wire.protocol import json_default


class Daemon(Protocol):
    """What the tools use of the daemon that serves them (daemon/server.py; not imported: it imports us)."""

    def dispatch(self, method: str, params: dict[str, Any]) -> Any: ...

    def session_successor(self, session: str) -> str: ...


INSTRUCTIONS = """Engram is your persistent memory across sessions, in three scopes: session (this conversation,
promoted to the project at once at importance 0.85+, else at its end if it proved useful), project (this repository) and user (everything you do for this person).
Recall before you re-derive something a past session may already know (conventions, decisions, fixes to errors);
store what a future session should not have to rediscover, as one self-contained fact per memory.
Recalled memories may be stale: check them against the code before relying on them.
Memories of another project are never visible here. Secrets are redacted before anything is stored."""


class EngramTools:
    """One MCP connection's state: its project, its session (joined or, lazily, its own) and the daemon."""

    def __init__(self, daemon: Daemon, project: str | None = None, session: str | None = None) -> None:
        import os

        self.daemon = daemon
        self.project = project or os.getcwd()
        self.session = session or None
        self.own_session = False
        self._joined = False
        self._lock = threading.Lock()

    def ensure_session(self) -> str:
        import os

        with self._lock:
            if self.session is None:
                info = self.call(
                    "start_session",
                    project=self.project,
                    claude_session_id=f"mcp-{os.getpid()}-{os.urandom(4).hex()}",
                    source="mcp",
                )
                self.session = info["claude_session_id"] or info["session_key"]
                self.own_session = self._joined = True
            return self.session

    def call(self, method: str, **params: Any) -> Any:
        """The daemon's method, in process; its result as the JSON a socket client would get."""
        from mcp.server.mcpserver.exceptions import ToolError

        from ..api import classify

        params = {k: v for k, v in params.items() if v is not None}
        if self.session and not self.own_session:
            current = self.daemon.session_successor(self.session)
            if current != self.session:  # `/clear` ended our session; the hooks now use this one
                if params.get("session") == self.session:
                    params["session"] = current
                self.session, self._joined = current, False
        try:
            if params.get("session") and params["session"] == self.session and not self._joined:
                # The daemon refuses unknown session ids; Claude Code's own id (from its environment) is this
                # connection's session even when no SessionStart hook announced it: join or start it once.
                self.daemon.dispatch(
                    "start_session",
                    {"project": self.project, "claude_session_id": self.session, "source": "mcp"},
                )
                self._joined = True
            result = self.daemon.dispatch(method, params)
        except Exception as exc:
            type_, message = classify(exc)
            if type_ == "NotFound" and "has no method" in message:
                raise ToolError(f"{method} is not available in this Engram daemon") from None
            raise ToolError(message) from None
        return json.loads(json.dumps(result, default=json_default))

    def call_dict(self, method: str, **params: Any) -> dict[str, Any]:
        """`call` for a method whose answer is one JSON object."""
        out: dict[str, Any] = self.call(method, **params)
        return out

    def call_in_context_dict(self, method: str, **params: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.call_in_context(method, **params)
        return out

    def call_in_context(self, method: str, **params: Any) -> Any:
        """Call ``method`` with this connection's project and session added where the method takes them."""
        from ..api import parameter_names

        names = parameter_names(method)
        ctx = {"project": self.project, "session": self.session}
        args = {k: v for k, v in {**ctx, **params}.items() if k in names and v is not None}
        return self.call(method, **args)

    def close(self) -> None:
        if self.own_session and self.session:
            # If this fails the daemon recovers the session later (stale-session pass).
            with contextlib.suppress(Exception):
                self.daemon.dispatch(
                    "end_session", {"session": self.session, "reason": "mcp connection closed"}
                )
            self.own_session = False


_current: contextvars.ContextVar[EngramTools] = contextvars.ContextVar("engram_mcp_tools")


def _hit(h: dict[str, Any]) -> dict[str, Any]:
    m = h["memory"]
    return {
        "id": m["id"],
        "scope": m["scope"],
        "type": m["memory_type"],
        "content": m["content"],
        "tags": m.get("tags", []),
        "importance": m["importance"],
        "score": round(h["scores"]["final"], 4),
        "created_at": m.get("created_at"),
        "metadata": m.get("metadata", {}),
    }


def _memory(m: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "id",
        "scope",
        "memory_type",
        "status",
        "content",
        "tags",
        "importance",
        "confidence",
        "access_count",
        "memory_strength",
        "pinned",
        "created_at",
        "updated_at",
        "last_accessed_at",
        "metadata",
        "promoted_from",
        "session_id",
        "user_feedback",
    )
    return {k: m.get(k) for k in keep if m.get(k) not in (None, [], {})}


class _Current:
    """The calling connection's :class:`EngramTools` (tools run in that connection's context)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_current.get(), name)


def build_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    from .. import __version__

    t = cast(EngramTools, _Current())  # each call reaches the connection's own EngramTools
    mcp = MCPServer(name="engram", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @mcp.tool(
        description="Store one memory. Use for a fact, decision, convention, fix or procedure a later session "
        "should know. One self-contained statement per memory; secrets are redacted. scope: 'project' "
        "(default, this repository), 'user' (true across projects: preferences, habits), 'session' (this "
        "conversation only; promoted to project scope at once at importance 0.85+, else at the session's end "
        "if used or important). An identical memory is merged, not duplicated."
    )
    def store_memory(
        content: Annotated[str, Field(min_length=1, max_length=100_000, description="the memory text")],
        memory_type: Annotated[
            MemoryTypeName,
            Field(
                description="semantic: facts; procedural: how-tos; episodic: events; working: session scratch"
            ),
        ] = "semantic",
        scope: ScopeName = "project",
        tags: Annotated[list[str] | None, Field(description="short lowercase tags")] = None,
        importance: Annotated[
            float, Field(ge=0.0, le=1.0, description="0-1; 0.8+ for things that must not be forgotten")
        ] = 0.5,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        session = t.ensure_session() if scope == "session" else t.session
        r = t.call(
            "store",
            memory={
                "content": content,
                "memory_type": memory_type,
                "scope": scope,
                "tags": tags or [],
                "importance": importance,
                "metadata": metadata or {},
                "source": "mcp",
            },
            project=t.project,
            session=session,
        )
        return {
            "id": r["memory"]["id"],
            "action": r["action"],
            "scope": r["memory"]["scope"],
            "message": r["message"],
            "redactions": r.get("redactions", []),
        }

    @mcp.tool(
        description="Recall memories relevant to a query, across this session, this project and the user "
        "scope (hybrid keyword + semantic search, weighted by scope and memory strength). Call it before "
        "working on something a past session may have met. Returns ids usable with get_memory, "
        "update_memory, forget_memory and mark_retrieval_useful."
    )
    def recall_memories(
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        scope: ScopeOrAll = "all",
        memory_types: list[MemoryTypeName] | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        r = t.call(
            "recall",
            query=query,
            project=t.project,
            session=t.session,
            limit=limit,
            scope=scope,
            types=memory_types,
            tags=tags,
        )
        return {
            "query": query,
            "strategy": r["strategy"],
            "degraded": r.get("degraded"),
            "hits": [_hit(h) for h in r["hits"]],
        }

    @mcp.tool(description="Read one memory in full by id (content, scope, type, scores, history metadata).")
    def get_memory(memory_id: Annotated[str, Field(min_length=1)]) -> dict[str, Any]:
        return _memory(t.call("get", memory_id=memory_id, project=t.project, session=t.session))

    @mcp.tool(
        description="Correct or refine a memory: new content, tags, importance, type, pinned, metadata. "
        "Prefer this to storing a second, conflicting memory."
    )
    def update_memory(
        memory_id: Annotated[str, Field(min_length=1)],
        content: Annotated[str | None, Field(min_length=1, max_length=100_000)] = None,
        tags: list[str] | None = None,
        importance: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        memory_type: MemoryTypeName | None = None,
        pinned: bool | None = None,
        metadata: dict[str, Any] | None = None,
        user_feedback: Annotated[
            float | None,
            Field(
                ge=0.0,
                le=1.0,
                description=(
                    "the user's verdict on this memory: 1.0 helpful (importance +0.1), 0.5 partly, 0.0 not "
                    "helpful (importance -0.1)"
                ),
            ),
        ] = None,
    ) -> dict[str, Any]:
        patch = {
            k: v
            for k, v in {
                "content": content,
                "tags": tags,
                "importance": importance,
                "memory_type": memory_type,
                "pinned": pinned,
                "metadata": metadata,
                "user_feedback": user_feedback,
            }.items()
            if v is not None
        }
        return _memory(
            t.call("update", memory_id=memory_id, patch=patch, project=t.project, session=t.session)
        )

    @mcp.tool(
        description="Forget a memory that is wrong or no longer true: it is archived (out of recall and "
        "SessionStart context, restorable by the user). Give a reason."
    )
    def forget_memory(
        memory_id: Annotated[str, Field(min_length=1)], reason: str = "forgotten on request"
    ) -> dict[str, Any]:
        m = t.call("forget", memory_id=memory_id, project=t.project, session=t.session, reason=reason)
        return {"id": m["id"], "status": m["status"], "scope": m["scope"]}

    @mcp.tool(
        description="Promote a memory one scope up: session → project, or project → user (target_scope "
        "'user' for something true in every project). Near-duplicates in the target are merged."
    )
    def promote_memory(
        memory_id: Annotated[str, Field(min_length=1)], target_scope: PromotionTarget | None = None
    ) -> dict[str, Any]:
        return t.call_dict(
            "promote", memory_id=memory_id, target_scope=target_scope, project=t.project, session=t.session
        )

    @mcp.tool(description="Counts of memories per scope, type and status for this project, session and user.")
    def memory_stats() -> dict[str, Any]:
        return t.call_dict("stats", project=t.project, session=t.session)

    @mcp.tool(
        description="Mark whether the last recall of this exact query helped: each memory it returned "
        "gains importance (+0.1) if useful or loses it (-0.1) if not, so it ranks higher or lower and fades "
        "slower or sooner; the verdict is also logged for evolve_memory_system."
    )
    def mark_retrieval_useful(
        query: Annotated[str, Field(min_length=1)], was_useful: bool, reason: str | None = None
    ) -> dict[str, Any]:
        return t.call_dict(
            "mark_retrieval_useful", query=query, was_useful=was_useful, reason=reason, project=t.project
        )

    @mcp.tool(
        description="Discover the memory store step by step before writing SurrealQL: depth 0 counts per "
        "scope, 1 tables and row counts, 2 one table's fields and indexes (give table), 3 sample rows."
    )
    def engram_explore(
        depth: Annotated[int, Field(ge=0, le=3)] = 0,
        scope: ScopeOrAll = "all",
        table: str | None = None,
        sample_size: Annotated[int, Field(ge=1, le=20)] = 3,
    ) -> dict[str, Any]:
        return t.call_in_context_dict(
            "engram_explore", depth=depth, scope=scope, table=table, sample_size=sample_size
        )

    @mcp.tool(
        description="Run SurrealQL against one scope's database (read-only unless allow_writes). A validator "
        "refuses schema changes, namespace switches and other unsafe statements, and the engine runs it "
        "as a VIEWER (or EDITOR with allow_writes). Returns rows per statement with timing."
    )
    def engram_execute(
        surql: Annotated[str, Field(min_length=1, max_length=20_000)],
        scope: ScopeName = "project",
        allow_writes: bool = False,
    ) -> dict[str, Any]:
        return t.call_in_context_dict("run_query", surql=surql, scope=scope, allow_writes=allow_writes)

    @mcp.tool(
        description="Find a stored SurrealQL skill (procedural memory tagged surql-skill) for a task; "
        "execute=true runs the best one read-only and counts the use."
    )
    def recall_skill(
        task_description: Annotated[str, Field(min_length=1)],
        execute: bool = False,
        scope: ScopeOrAll = "all",
    ) -> dict[str, Any]:
        return t.call_in_context_dict(
            "recall_skill", task_description=task_description, execute=execute, scope=scope
        )

    @mcp.tool(
        description="Search the knowledge graph of entities (files, functions, libraries, concepts) and "
        "their relations extracted from memories."
    )
    def search_knowledge_graph(
        query: Annotated[str, Field(min_length=1)], limit: Annotated[int, Field(ge=1, le=100)] = 10
    ) -> Any:
        return t.call_in_context("search_knowledge_graph", query=query, limit=limit)

    @mcp.tool(
        description="Run the consolidation pipeline now. light: entity backfill, near-duplicate groups and "
        "recurring episodes proposed, low-risk items applied by policy; full adds promotion proposals, "
        "closed-episode summaries and graph pruning; reflection adds self-tuning and insights; auto follows "
        "the session schedule. Proposals wait in list_consolidations for approval. dry_run reports what "
        "would be queued and changes nothing."
    )
    def reflect_and_consolidate(
        dry_run: bool = False, level: Literal["auto", "light", "full", "reflection"] = "auto"
    ) -> Any:
        return t.call_in_context("reflect_and_consolidate", dry_run=dry_run, level=level)

    @mcp.tool(
        description="A statistical peek at a large memory store without loading it: counts by type and "
        "status, top tags, date range and a few representative samples (near `focus` if given)."
    )
    def memory_peek(
        scope: ScopeOrAll = "all", sample_n: Annotated[int, Field(ge=1, le=50)] = 5, focus: str | None = None
    ) -> Any:
        return t.call_in_context("memory_peek", scope=scope, sample_n=sample_n, focus=focus)

    @mcp.tool(
        description="Split the store into partitions (by tag, date, type, scope or importance band) "
        "described by counts and ranges, to query one at a time."
    )
    def memory_partition(
        partition_by: Literal["tag", "date", "type", "scope", "importance_band"],
        scope: ScopeOrAll = "all",
        max_partitions: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> Any:
        return t.call_in_context(
            "memory_partition", partition_by=partition_by, scope=scope, max_partitions=max_partitions
        )

    @mcp.tool(
        description="Fuse several ranked result lists (from partitions) with reciprocal rank fusion (k=60), "
        "dropping duplicates and keeping where each result came from."
    )
    def memory_aggregate(
        results: list[dict[str, Any]],
        final_limit: Annotated[int, Field(ge=1, le=100)] = 10,
        dedup_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
    ) -> Any:
        return t.call_in_context(
            "memory_aggregate", results=results, final_limit=final_limit, dedup_threshold=dedup_threshold
        )

    @mcp.tool(
        description="Let the memory system tune itself from its retrieval log and feedback: scope weights "
        "and per-type decay half-lives, within bounded steps (promotion thresholds and strategy weights are "
        "not tuned; manual settings win). dry_run previews the changes."
    )
    def evolve_memory_system(
        dry_run: bool = True, lookback_days: Annotated[int, Field(ge=1, le=365)] = 30
    ) -> Any:
        return t.call_in_context("evolve_memory_system", dry_run=dry_run, lookback_days=lookback_days)

    # ── review: the consolidation queue, contradictions, the graph, episodes (the agent decides) ──
    @mcp.tool(
        description="List the consolidation queue: groups of related or duplicate memories with a proposed "
        "merged memory each (extractive unless an agent summary was given), highest priority first. Review "
        "with approve_consolidation, reject_consolidation or propose_consolidation_summary."
    )
    def list_consolidations(
        status: Literal["pending", "completed", "rejected", "failed", "all"] = "pending",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> Any:
        items = t.call_in_context("list_consolidations", status=status, limit=limit)
        return {"count": len(items), "items": items}

    @mcp.tool(
        description="Replace a pending consolidation item's proposed text with your own summary of its "
        "sources (one self-contained memory). It still needs approve_consolidation."
    )
    def propose_consolidation_summary(
        item_id: Annotated[str, Field(min_length=1)],
        summary: Annotated[str, Field(min_length=1, max_length=20_000)],
    ) -> Any:
        return t.call_in_context("propose_consolidation_summary", item_id=item_id, summary=summary)

    @mcp.tool(
        description="Apply a pending consolidation item: its merged memory is written and the sources "
        "become 'consolidated' (kept for history, hidden from recall). edited_content replaces the "
        "proposal's text."
    )
    def approve_consolidation(
        item_id: Annotated[str, Field(min_length=1)],
        edited_content: Annotated[str | None, Field(min_length=1, max_length=20_000)] = None,
    ) -> Any:
        return t.call_in_context(
            "approve_consolidation", item_id=item_id, edited_content=edited_content, decided_by="agent"
        )

    @mcp.tool(description="Reject a pending consolidation item: its sources stay as they are. Give a reason.")
    def reject_consolidation(item_id: Annotated[str, Field(min_length=1)], reason: str | None = None) -> Any:
        return t.call_in_context("reject_consolidation", item_id=item_id, reason=reason)

    @mcp.tool(
        description="List contradictions found between memories (two statements about the same subject "
        "that cannot both hold), the strongest first, with both memories' text, the evidence, and the "
        "suggested resolution (the newer statement, when it says it replaced the other). total_open is "
        "the true count. Settle each with resolve_contradiction; reopen_contradiction undoes one."
    )
    def list_contradictions(
        status: Literal["open", "resolved", "all"] = "open",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        order: Literal["strongest", "newest"] = "strongest",
    ) -> Any:
        found = t.call_in_context("list_contradictions", status=status, limit=limit, order=order)
        counts = t.call_in_context("count_contradictions")
        return {
            "count": len(found),
            "total_open": counts["open"] if isinstance(counts, dict) else counts.open,
            "contradictions": found,
        }

    @mcp.tool(
        description="Settle a contradiction: keep_a or keep_b (the other is superseded: hidden from recall, "
        "kept for audit), keep_both (both hold in different contexts), or merge (merged_content replaces "
        "both). Check the code first when the memories are about it. reopen_contradiction undoes it."
    )
    def resolve_contradiction(
        contradiction_id: Annotated[str, Field(min_length=1)],
        resolution: Literal["keep_a", "keep_b", "keep_both", "merge"],
        merged_content: Annotated[str | None, Field(min_length=1, max_length=20_000)] = None,
    ) -> Any:
        return t.call_in_context(
            "resolve_contradiction",
            contradiction_id=contradiction_id,
            resolution=resolution,
            merged_content=merged_content,
            decided_by="agent",
        )

    @mcp.tool(
        description="Undo a contradiction's resolution (yours, the user's, or one Engram applied without "
        "asking): both memories get their status back and the pair is open again."
    )
    def reopen_contradiction(contradiction_id: Annotated[str, Field(min_length=1)]) -> Any:
        return t.call_in_context("reopen_contradiction", contradiction_id=contradiction_id)

    @mcp.tool(
        description="Add entities (files, libraries, functions, concepts, decisions…) to the knowledge "
        "graph by name; an existing entity of the same name and type is strengthened, not duplicated."
    )
    def add_entities(
        entities: Annotated[list[EntityIn], Field(min_length=1, max_length=100)], scope: ScopeName = "project"
    ) -> Any:
        return t.call_in_context("add_entities", entities=[e.model_dump() for e in entities], scope=scope)

    @mcp.tool(
        description="State a relation between two entities (by name or id; unknown names become concepts), "
        "e.g. source='api.py' relation_type='depends_on' target='httpx'. evidence: a memory id or a short "
        "text. A repeated relation is strengthened."
    )
    def relate_entities(
        source: Annotated[str, Field(min_length=1, max_length=300)],
        target: Annotated[str, Field(min_length=1, max_length=300)],
        relation_type: RelationType,
        evidence: str | None = None,
        confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.8,
        scope: ScopeName = "project",
    ) -> Any:
        return t.call_in_context(
            "relate_entities",
            source=source,
            target=target,
            relation_type=relation_type,
            evidence=evidence,
            confidence=confidence,
            scope=scope,
        )

    @mcp.tool(
        description="Mark a boundary in this session: the current episode (a stretch of related work) ends "
        "now and the next memory starts a new one. Use when switching to an unrelated task."
    )
    def end_episode(reason: Annotated[str, Field(min_length=1, max_length=500)] = "explicit") -> Any:
        closed = t.call_in_context("end_episode", session=t.ensure_session(), reason=reason)
        return {
            "closed": closed,
            "message": f"{len(closed)} episode(s) ended; the next memory starts a new one",
        }

    @mcp.tool(
        description="Write this session's summary now (goal, what changed, decisions, fixes, what is left), "
        "better than the one Engram assembles at the session's end, which then keeps yours. Stored in "
        "project scope and shown at the start of later sessions; a second call replaces the first."
    )
    def session_summary(summary: Annotated[str, Field(min_length=1, max_length=20_000)]) -> dict[str, Any]:
        return _memory(
            t.call("session_summary", session=t.ensure_session(), summary=summary, project=t.project)
        )

    return mcp


_server_lock = threading.Lock()
_server: Any = None


def shared_server() -> Any:
    """The daemon's one MCPServer (built on first use, ~0.1 s; the SDK import is paid by the daemon's warm-up)."""
    global _server
    with _server_lock:
        if _server is None:
            _server = build_server()
        return _server


def serve_connection(daemon: Daemon, rfile: Any, wfile: Any, params: dict[str, Any]) -> None:
    """Serve MCP JSON-RPC on one bridge connection until the bridge closes it (thread of the daemon's handler)."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = shared_server()
    tools = EngramTools(daemon, project=params.get("project"), session=params.get("session"))
    reader = io.TextIOWrapper(rfile, encoding="utf-8", errors="replace", newline="\n")
    writer = io.TextIOWrapper(wfile, encoding="utf-8", newline="\n", write_through=True)

    async def run() -> None:
        async with stdio_server(anyio.wrap_file(reader), anyio.wrap_file(writer)) as (
            read_stream,
            write_stream,
        ):
            low = server._lowlevel_server
            await low.run(read_stream, write_stream, low.create_initialization_options())

    token = _current.set(tools)
    try:
        anyio.run(run)
    except (ConnectionError, OSError, ValueError):
        pass  # the bridge went away mid-write: its session's writes are already stored
    finally:
        _current.reset(token)
        tools.close()
        for f in (reader, writer):
            with contextlib.suppress(Exception):
                f.detach()


# What the bridge answers by itself while the daemon starts (issue #29): the answers this daemon gave to a
# client's first requests, per protocol version, written at each start. The bridge reads it with the standard
# library; the file name and shape are repeated there (bridge.ANSWERS_FILE).
ANSWERS_FILE = "mcp_answers.json"
LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


def first_answers(daemon: Daemon, version: str) -> dict[str, Any]:
    """The results this daemon's MCP server gives a client that asks for ``version``: its initialize, then each
    list it serves (an error answer is left out), read off a connection served like a bridge's."""
    import socket

    ours, theirs = socket.socketpair()
    rfile, wfile = theirs.makefile("rb"), theirs.makefile("wb")

    def serve() -> None:
        try:
            serve_connection(daemon, rfile, wfile, {})
        except Exception:  # the reader below sees the end of the connection and says so
            with contextlib.suppress(OSError):
                theirs.shutdown(socket.SHUT_RDWR)

    worker = threading.Thread(target=serve, daemon=True, name="engram-mcp-answers")
    worker.start()
    ours.settimeout(10)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "engram-cache", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    lines += [{"jsonrpc": "2.0", "id": i, "method": m, "params": {}} for i, m in enumerate(LISTS, start=1)]
    out: dict[str, Any] = {}
    reader = ours.makefile("rb")
    try:
        ours.sendall("".join(json.dumps(x) + "\n" for x in lines).encode())
        want = {0: "initialize", **{i: m for i, m in enumerate(LISTS, start=1)}}
        while want:
            raw = reader.readline()
            if not raw:
                raise ConnectionError("the MCP server closed the connection before answering")
            msg = json.loads(raw)
            method = want.pop(msg.get("id"), None)
            if method is not None and "result" in msg:
                out[method] = msg["result"]
    finally:
        with contextlib.suppress(OSError):
            ours.shutdown(socket.SHUT_RDWR)  # the server's end of the session, as a bridge's would be
        worker.join(10)
        for f in (reader, rfile, wfile, ours, theirs):
            with contextlib.suppress(Exception):
                f.close()
    return out


def publish_answers(daemon: Daemon, home: Any) -> dict[str, Any]:
    """Write ``<home>/mcp_answers.json`` (0600, whole or not at all): for each protocol version the SDK speaks,
    what the server answers to initialize and to each list. Returns what was written."""
    import os
    from pathlib import Path

    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    from .. import __version__
    from ..wire.protocol import private_open

    answers = {
        "engram": __version__,
        "versions": {v: first_answers(daemon, v) for v in SUPPORTED_PROTOCOL_VERSIONS},
    }
    path = Path(home) / ANSWERS_FILE
    tmp = path.with_name(f".{ANSWERS_FILE}.{os.getpid()}")
    fd = private_open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(answers, fh, default=json_default)
    os.replace(tmp, path)
    return answers


def main(argv: list[str] | None = None) -> int:
    """`engram mcp`: the same bridge Claude Code runs from the plugin folder."""
    from . import bridge as mcp_bridge

    return mcp_bridge.main(argv)
