"""`engram mcp`: the MCP server Claude Code starts (stdio, one process per session), a thin client of the daemon.

Built on the official ``mcp`` SDK (2.x: ``MCPServer``, formerly FastMCP). Every tool validates its arguments
from its type hints (pydantic) and turns a refusal into a tool error whose message says what to fix; nothing
here touches a store: each call goes to the daemon (started on demand) through :class:`RemoteService`.

Project: ``ENGRAM_PROJECT``, else ``CLAUDE_PROJECT_DIR``, else the working directory (Claude Code starts MCP
servers in the project). Session: ``CLAUDE_SESSION_ID`` when the environment has it; Claude Code does not pass
its session id to MCP servers, so otherwise this server opens a session of its own the first time a
session-scoped memory is stored, and ends it (promotion pass) when Claude Code closes the server.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Annotated, Any, Literal

from pydantic import Field

from .client import DaemonUnavailable, ProtocolMismatch, RemoteService
from .protocol import RemoteError

INSTRUCTIONS = """Engram is your persistent memory across sessions, in three scopes: session (this conversation,
promoted at its end if it proved useful), project (this repository) and user (everything you do for this person).
Recall before you re-derive something a past session may already know (conventions, decisions, fixes to errors);
store what a future session should not have to rediscover, as one self-contained fact per memory.
Memories of another project are never visible here. Secrets are redacted before anything is stored."""

MemoryTypeArg = Literal["episodic", "semantic", "procedural", "working"]
ScopeArg = Literal["session", "project", "user"]
AnyScopeArg = Literal["all", "session", "project", "user"]


class EngramTools:
    """The tools' state: the daemon client, this server's project and (lazily) its session."""

    def __init__(self, project: str | None = None, session: str | None = None) -> None:
        self.remote = RemoteService(typed=False)
        self.project = project or os.environ.get("ENGRAM_PROJECT") or os.environ.get("CLAUDE_PROJECT_DIR") \
            or os.getcwd()
        self.session = session or os.environ.get("CLAUDE_SESSION_ID") or None
        self.own_session = False
        self._lock = threading.Lock()

    def ensure_session(self) -> str:
        with self._lock:
            if self.session is None:
                info = self.call("start_session", project=self.project,
                                 claude_session_id=f"mcp-{os.getpid()}-{os.urandom(4).hex()}", source="mcp")
                self.session = info["claude_session_id"] or info["session_key"]
                self.own_session = True
            return self.session

    def call(self, method: str, **params: Any) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            return self.remote.call(method, **params)
        except RemoteError as exc:
            if exc.type == "NotFound" and "has no method" in exc.message:
                raise ToolError(f"{method} is not available yet in this Engram daemon") from None
            raise ToolError(exc.message) from None
        except (DaemonUnavailable, ProtocolMismatch) as exc:
            raise ToolError(str(exc)) from None

    def passthrough(self, method: str, **params: Any) -> Any:
        """Call a method another module provides, passing only the arguments it declares."""
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            self.remote.connect()
        except (DaemonUnavailable, ProtocolMismatch) as exc:
            raise ToolError(str(exc)) from None
        names = (self.remote.info.get("params") or {}).get(method)
        if names is None:
            raise ToolError(f"{method} is not available yet in this Engram daemon (it arrives with its issue)")
        context = {"project": self.project, "session": self.session}
        args = {k: v for k, v in {**context, **params}.items() if k in names and v is not None}
        return self.call(method, **args)

    def close(self) -> None:
        if self.own_session and self.session:
            # If this fails the daemon recovers the session later (stale-session pass).
            with contextlib.suppress(Exception):
                self.remote.call("end_session", session=self.session, reason="mcp server closed")
        self.remote.close()


def _hit(h: dict[str, Any]) -> dict[str, Any]:
    m = h["memory"]
    return {"id": m["id"], "scope": m["scope"], "type": m["memory_type"], "content": m["content"],
            "tags": m.get("tags", []), "importance": m["importance"], "score": round(h["scores"]["final"], 4),
            "created_at": m.get("created_at"), "metadata": m.get("metadata", {})}


def _memory(m: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "scope", "memory_type", "status", "content", "tags", "importance", "confidence", "access_count",
            "memory_strength", "pinned", "created_at", "updated_at", "last_accessed_at", "metadata",
            "promoted_from", "session_id")
    return {k: m.get(k) for k in keep if m.get(k) not in (None, [], {})}


def build_server(tools: EngramTools | None = None) -> Any:
    from mcp.server.mcpserver import MCPServer

    from . import __version__

    t = tools or EngramTools()
    mcp = MCPServer(name="engram", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @mcp.tool(description="Store one memory. Use for a fact, decision, convention, fix or procedure a later session "
              "should know. One self-contained statement per memory; secrets are redacted. scope: 'project' "
              "(default, this repository), 'user' (true across projects: preferences, habits), 'session' (this "
              "conversation only; promoted at its end if important). An identical memory is merged, not duplicated.")
    def store_memory(
        content: Annotated[str, Field(min_length=1, max_length=100_000, description="the memory text")],
        memory_type: Annotated[MemoryTypeArg, Field(description="semantic: facts; procedural: how-tos; "
                                                                "episodic: events; working: session scratch")] = "semantic",
        scope: ScopeArg = "project",
        tags: Annotated[list[str] | None, Field(description="short lowercase tags")] = None,
        importance: Annotated[float, Field(ge=0.0, le=1.0, description="0-1; 0.8+ for things that must not "
                                                                        "be forgotten")] = 0.5,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        session = t.ensure_session() if scope == "session" else t.session
        r = t.call("store", memory={"content": content, "memory_type": memory_type, "scope": scope,
                                    "tags": tags or [], "importance": importance, "metadata": metadata or {},
                                    "source": "mcp"}, project=t.project, session=session)
        return {"id": r["memory"]["id"], "action": r["action"], "scope": r["memory"]["scope"],
                "message": r["message"], "redactions": r.get("redactions", [])}

    @mcp.tool(description="Recall memories relevant to a query, across this session, this project and the user "
              "scope (hybrid keyword + semantic search, weighted by scope and memory strength). Call it before "
              "working on something a past session may have met. Returns ids usable with get_memory, "
              "update_memory, forget_memory and mark_retrieval_useful.")
    def recall_memories(
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        scope: AnyScopeArg = "all",
        memory_types: list[MemoryTypeArg] | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        r = t.call("recall", query=query, project=t.project, session=t.session, limit=limit, scope=scope,
                   types=memory_types, tags=tags)
        return {"query": query, "strategy": r["strategy"], "degraded": r.get("degraded"),
                "hits": [_hit(h) for h in r["hits"]]}

    @mcp.tool(description="Read one memory in full by id (content, scope, type, scores, history metadata).")
    def get_memory(memory_id: Annotated[str, Field(min_length=1)]) -> dict[str, Any]:
        return _memory(t.call("get", memory_id=memory_id, project=t.project, session=t.session))

    @mcp.tool(description="Correct or refine a memory: new content, tags, importance, type, pinned, metadata. "
              "Prefer this to storing a second, conflicting memory.")
    def update_memory(
        memory_id: Annotated[str, Field(min_length=1)],
        content: Annotated[str | None, Field(min_length=1, max_length=100_000)] = None,
        tags: list[str] | None = None,
        importance: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        memory_type: MemoryTypeArg | None = None,
        pinned: bool | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        patch = {k: v for k, v in {"content": content, "tags": tags, "importance": importance,
                                   "memory_type": memory_type, "pinned": pinned, "metadata": metadata}.items()
                 if v is not None}
        return _memory(t.call("update", memory_id=memory_id, patch=patch, project=t.project, session=t.session))

    @mcp.tool(description="Forget a memory that is wrong or no longer true: its content and embedding are erased, "
              "a skeleton stays for history. Give a reason.")
    def forget_memory(memory_id: Annotated[str, Field(min_length=1)],
                      reason: str = "forgotten on request") -> dict[str, Any]:
        m = t.call("forget", memory_id=memory_id, project=t.project, session=t.session, reason=reason)
        return {"id": m["id"], "status": m["status"], "scope": m["scope"]}

    @mcp.tool(description="Promote a memory one scope up: session → project, or project → user (target_scope "
              "'user' for something true in every project). Near-duplicates in the target are merged.")
    def promote_memory(memory_id: Annotated[str, Field(min_length=1)],
                       target_scope: Literal["project", "user"] | None = None) -> dict[str, Any]:
        return t.call("promote", memory_id=memory_id, target_scope=target_scope, project=t.project,
                      session=t.session)

    @mcp.tool(description="Counts of memories per scope, type and status for this project, session and user.")
    def memory_stats() -> dict[str, Any]:
        return t.call("stats", project=t.project, session=t.session)

    @mcp.tool(description="Mark whether the last recall of this exact query helped; useful memories gain "
              "relevance, this tunes future recall.")
    def mark_retrieval_useful(query: Annotated[str, Field(min_length=1)], was_useful: bool,
                              reason: str | None = None) -> dict[str, Any]:
        return t.call("mark_retrieval_useful", query=query, was_useful=was_useful, reason=reason,
                      project=t.project)

    @mcp.tool(description="Discover the memory store step by step before writing SurrealQL: depth 0 counts per "
              "scope, 1 tables and row counts, 2 one table's fields and indexes (give table), 3 sample rows.")
    def engram_explore(depth: Annotated[int, Field(ge=0, le=3)] = 0, scope: AnyScopeArg = "all",
                       table: str | None = None,
                       sample_size: Annotated[int, Field(ge=1, le=20)] = 3) -> dict[str, Any]:
        return t.passthrough("engram_explore", depth=depth, scope=scope, table=table, sample_size=sample_size)

    @mcp.tool(description="Run SurrealQL against one scope's database (read-only unless allow_writes). A validator "
              "refuses schema changes, namespace switches and other unsafe statements, and the engine runs it "
              "as a VIEWER (or EDITOR with allow_writes). Returns rows per statement with timing.")
    def engram_execute(surql: Annotated[str, Field(min_length=1, max_length=20_000)],
                       scope: ScopeArg = "project", allow_writes: bool = False) -> dict[str, Any]:
        return t.passthrough("run_query", surql=surql, scope=scope, allow_writes=allow_writes)

    @mcp.tool(description="Find a stored SurrealQL skill (procedural memory tagged surql-skill) for a task; "
              "execute=true runs the best one read-only and counts the use.")
    def recall_skill(task_description: Annotated[str, Field(min_length=1)], execute: bool = False,
                     scope: AnyScopeArg = "all") -> dict[str, Any]:
        return t.passthrough("recall_skill", task_description=task_description, execute=execute, scope=scope)

    @mcp.tool(description="Search the knowledge graph of entities (files, functions, libraries, concepts) and "
              "their relations extracted from memories.")
    def search_knowledge_graph(query: Annotated[str, Field(min_length=1)],
                               limit: Annotated[int, Field(ge=1, le=100)] = 10) -> Any:
        return t.passthrough("search_knowledge_graph", query=query, limit=limit)

    @mcp.tool(description="Consolidate: summarise related episodes into lasting memories, archive noise, promote "
              "what proved useful. dry_run shows the plan without changing anything.")
    def reflect_and_consolidate(dry_run: bool = True) -> Any:
        return t.passthrough("reflect_and_consolidate", dry_run=dry_run)

    @mcp.tool(description="A statistical peek at a large memory store without loading it: counts by type and "
              "status, top tags, date range and a few representative samples (near `focus` if given).")
    def memory_peek(scope: AnyScopeArg = "all", sample_n: Annotated[int, Field(ge=1, le=50)] = 5,
                    focus: str | None = None) -> Any:
        return t.passthrough("memory_peek", scope=scope, sample_n=sample_n, focus=focus)

    @mcp.tool(description="Split the store into partitions (by tag, date, type, scope or importance band) "
              "described by counts and ranges, to query one at a time.")
    def memory_partition(partition_by: Literal["tag", "date", "type", "scope", "importance_band"],
                         scope: AnyScopeArg = "all",
                         max_partitions: Annotated[int, Field(ge=1, le=100)] = 10) -> Any:
        return t.passthrough("memory_partition", partition_by=partition_by, scope=scope,
                             max_partitions=max_partitions)

    @mcp.tool(description="Fuse several ranked result lists (from partitions) with reciprocal rank fusion (k=60), "
              "dropping duplicates and keeping where each result came from.")
    def memory_aggregate(results: list[dict[str, Any]], final_limit: Annotated[int, Field(ge=1, le=100)] = 10,
                         dedup_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9) -> Any:
        return t.passthrough("memory_aggregate", results=results, final_limit=final_limit,
                             dedup_threshold=dedup_threshold)

    @mcp.tool(description="Let the memory system tune itself from its retrieval log (scope weights, half-lives, "
              "promotion thresholds), within bounded steps. dry_run previews the changes.")
    def evolve_memory_system(dry_run: bool = True,
                             lookback_days: Annotated[int, Field(ge=1, le=365)] = 30) -> Any:
        return t.passthrough("evolve_memory_system", dry_run=dry_run, lookback_days=lookback_days)

    mcp.engram_tools = t  # type: ignore[attr-defined]
    return mcp


def main(argv: list[str] | None = None) -> int:
    tools = EngramTools()
    server = build_server(tools)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        tools.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
