"""The MCP server driven by the official MCP client over stdio, as Claude Code drives it."""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support import MCP_TOOLS, REPO_ROOT, DaemonProc, new_project

EXPECTED_TOOLS = MCP_TOOLS
BRIDGE = REPO_ROOT / "engram_core" / "mcp" / "bridge.py"


@asynccontextmanager
async def server(daemon: DaemonProc, project: Path, session: str | None = None):  # noqa: ANN201
    """The bridge exactly as .mcp.json starts it (python3 -S, no packages), driven by the official client."""
    env = {k: v for k, v in daemon.env.items() if k not in ("CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID")}
    if session:
        env["CLAUDE_CODE_SESSION_ID"] = session
    params = StdioServerParameters(
        command=sys.executable, args=["-S", str(BRIDGE)], cwd=str(project), env=env
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        yield s


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


def error_text(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


def daemon_has(daemon: DaemonProc, method: str) -> bool:
    c = daemon.client()
    try:
        return method in c.info["methods"]
    finally:
        c.close()


async def test_tools_listed_with_descriptions(daemon: DaemonProc, tmp_path: Path) -> None:
    async with server(daemon, new_project(tmp_path, "list")) as s:
        tools = (await s.list_tools()).tools
    assert {t.name for t in tools} == EXPECTED_TOOLS
    assert all(t.description and len(t.description) > 40 for t in tools)


async def test_engram_mcp_command_is_the_same_server(daemon: DaemonProc, tmp_path: Path) -> None:
    env = {k: v for k, v in daemon.env.items() if k not in ("CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram_core.cli", "mcp"],
        cwd=str(new_project(tmp_path, "cli")),
        env=env,
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        assert {t.name for t in (await s.list_tools()).tools} == EXPECTED_TOOLS
        assert payload(await s.call_tool("memory_stats", {}))


async def test_store_recall_get_update_forget(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "crud")
    async with server(daemon, proj) as s:
        stored = payload(
            await s.call_tool(
                "store_memory",
                {
                    "content": "The API rate limit is 100 requests per minute",
                    "tags": ["api"],
                    "importance": 0.7,
                },
            )
        )
        mid = stored["id"]
        assert stored["action"] == "created" and stored["scope"] == "project"
        hits = payload(await s.call_tool("recall_memories", {"query": "rate limit of the API"}))["hits"]
        assert hits[0]["id"] == mid
        got = payload(await s.call_tool("get_memory", {"memory_id": mid}))
        assert got["content"].startswith("The API rate limit")
        upd = payload(
            await s.call_tool(
                "update_memory",
                {"memory_id": mid, "content": "The API rate limit is 200 requests per minute"},
            )
        )
        assert "200" in upd["content"]
        rated = payload(await s.call_tool("update_memory", {"memory_id": mid, "user_feedback": 1.0}))
        assert rated["user_feedback"] == 1.0
        gone = payload(await s.call_tool("forget_memory", {"memory_id": mid, "reason": "test"}))
        assert gone["status"] == "archived"
        stats = payload(await s.call_tool("memory_stats", {}))
        assert any(sc["scope"] == "project" for sc in stats["scopes"])
        explore = payload(await s.call_tool("engram_explore", {"depth": 1}))
        assert "memory" in explore["scopes"][0]["tables"]
        session_mem = payload(
            await s.call_tool(
                "store_memory",
                {"content": "scratch note for this session", "scope": "session", "memory_type": "working"},
            )
        )
        assert session_mem["scope"] == "session"


async def test_bad_arguments_are_tool_errors_not_crashes(daemon: DaemonProc, tmp_path: Path) -> None:
    async with server(daemon, new_project(tmp_path, "bad")) as s:
        assert "content" in error_text(await s.call_tool("store_memory", {"content": ""}))
        assert "memory_type" in error_text(
            await s.call_tool("store_memory", {"content": "x", "memory_type": "nope"})
        )
        assert "importance" in error_text(
            await s.call_tool("store_memory", {"content": "x", "importance": 3})
        )
        assert "no memory with id" in error_text(await s.call_tool("get_memory", {"memory_id": "01NOTANID"}))
        assert "working" in error_text(
            await s.call_tool("store_memory", {"content": "x", "memory_type": "working"})
        )
        assert "depth" in error_text(await s.call_tool("engram_explore", {"depth": 9}))
        # still alive
        assert payload(await s.call_tool("memory_stats", {}))


@pytest.mark.parametrize(
    "tool,method,args",
    [
        ("engram_execute", "run_query", {"surql": "SELECT count() FROM memory GROUP ALL"}),
        ("memory_peek", "memory_peek", {}),
        ("memory_partition", "memory_partition", {"partition_by": "type"}),
        ("search_knowledge_graph", "search_knowledge_graph", {"query": "pytest"}),
        ("evolve_memory_system", "evolve_memory_system", {"dry_run": True}),
    ],
)
async def test_tools_backed_by_the_organise_and_console_methods(
    daemon: DaemonProc, tmp_path: Path, tool: str, method: str, args: dict
) -> None:
    # Every tool listed is served: a method missing from the daemon is a failure, not a skip.
    assert daemon_has(daemon, method), f"the daemon does not serve {method}, which {tool} needs"
    async with server(daemon, new_project(tmp_path, "other")) as s:
        result = await s.call_tool(tool, args)
    assert not result.is_error, result.content
    assert payload(result) is not None


async def test_engram_execute_read_only(daemon: DaemonProc, tmp_path: Path) -> None:
    assert daemon_has(daemon, "run_query")
    async with server(daemon, new_project(tmp_path, "exec")) as s:
        await s.call_tool("store_memory", {"content": "exec test memory"})
        res = payload(await s.call_tool("engram_execute", {"surql": "SELECT content FROM memory"}))
        assert res["ok"] and res["statements"][0]["rows"]
        denied = await s.call_tool("engram_execute", {"surql": "DELETE memory"})
        body = payload(denied) if not denied.is_error else {"ok": False}
        assert body["ok"] is False


async def test_engram_execute_never_deletes_memories_nor_answers_empty_for_no_index(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    """Issue #29 item 4: with writes allowed, a DELETE of memories is refused with the reason (the lifecycle
    archives, with history); a full-text match or a vector function on the stored bytes is refused with a clear
    message instead of an empty answer or an engine type error."""
    async with server(daemon, new_project(tmp_path, "nodelete")) as s:
        kept = payload(await s.call_tool("store_memory", {"content": "the deploy key rotates monthly"}))
        mid = kept["id"] if "id" in kept else kept["memory"]["id"]
        await s.call_tool("store_memory", {"content": "staging runs on two nodes"})

        async def execute(surql: str, writes: bool = True) -> dict:
            return payload(await s.call_tool("engram_execute", {"surql": surql, "allow_writes": writes}))

        for surql in (
            "DELETE memory",
            f"DELETE memory:{mid}",
            "DELETE memory WHERE importance < 2",
            "LET $all = (SELECT VALUE id FROM memory); DELETE $all",
            "FOR $m IN (SELECT VALUE id FROM memory) { DELETE $m; }",
        ):
            res = await execute(surql)
            assert res["ok"] is False and res["violations"][0]["rule"] == "memory-delete", (surql, res)
            assert "archives or forgets" in res["message"] and "engram forget" in res["message"]
        count = await execute("SELECT count() AS n FROM memory GROUP ALL", writes=False)
        assert count["statements"][0]["rows"] == [{"n": 2}]
        # what the message offers works, through the lifecycle (its history records it)
        assert (await execute(f"UPDATE memory:{mid} SET status = 'archived'"))["ok"]
        row = (await execute(f"SELECT status, status_history FROM memory:{mid}", writes=False))["statements"][
            0
        ]["rows"][0]
        assert row["status"] == "archived" and row["status_history"][-1]["to"] == "archived"
        assert (await execute("DELETE retrieval_log WHERE false"))["ok"]  # other tables: as before
        full_text = await execute("SELECT content FROM memory WHERE content @1@ 'deploy'", writes=False)
        assert full_text["ok"] is False and full_text["violations"][0]["rule"] == "full-text"
        assert "FULLTEXT index" in full_text["message"] and "string::contains" in full_text["message"]
        cosine = await execute(
            "SELECT vector::similarity::cosine(embedding, embedding) FROM memory", writes=False
        )
        assert cosine["ok"] is False and "float16 bytes" in cosine["message"]
        fallback = await execute(
            "SELECT VALUE content FROM memory WHERE string::contains(content, 'deploy')", writes=False
        )
        assert fallback["statements"][0]["rows"] == ["the deploy key rotates monthly"]


async def test_two_servers_two_projects_isolated(daemon: DaemonProc, tmp_path: Path) -> None:
    import anyio

    a, b = new_project(tmp_path, "iso-a"), new_project(tmp_path, "iso-b")
    results: dict[str, Any] = {}
    stored = {"a": anyio.Event(), "b": anyio.Event()}

    async def session(name: str, other: str, proj: Path, fact: str, word: str, other_word: str) -> None:
        async with server(daemon, proj) as s:
            payload(await s.call_tool("store_memory", {"content": fact}))
            stored[name].set()
            # A barrier, not a pause: neither recalls before the other's store has been acknowledged, so the
            # other project's fact exists when this one looks for it.
            with anyio.fail_after(60):
                await stored[other].wait()
            query = f"{other_word} {word} codename"
            hits = payload(await s.call_tool("recall_memories", {"query": query, "limit": 20}))
            results[name] = [h["content"] for h in hits["hits"]]

    async with anyio.create_task_group() as tg:
        tg.start_soon(session, "a", "b", a, "project A codename is falcon", "falcon", "heron")
        tg.start_soon(session, "b", "a", b, "project B codename is heron", "heron", "falcon")
    # The same recall finds this project's fact (so a miss below is isolation, not a recall that found nothing)…
    assert "project A codename is falcon" in results["a"]
    assert "project B codename is heron" in results["b"]
    # …and never the other project's, stored before it ran.
    assert not any("heron" in c for c in results["a"])
    assert not any("falcon" in c for c in results["b"])
    c = daemon.client()
    sessions = c.call("list_sessions")
    c.close()
    assert not any(
        str(s.get("claude_session_id", "")).startswith("mcp-") and s["project_root"] in (str(a), str(b))
        for s in sessions
    )  # own sessions ended at exit


def test_bridge_is_standard_library_only() -> None:
    """The bridge runs under the hooks' bare python3 (-S -I: no site-packages at all) and imports nothing of ours."""
    import subprocess

    code = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('bridge', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(','.join(sorted(k for k in sys.modules if k.split('.')[0] in ('engram_core', 'mcp', 'pydantic'))))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-I", "-c", code, str(BRIDGE)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "", out.stderr


# ── one session per Claude Code session (issue #11) ──────────────────────────
def live_sessions(daemon: DaemonProc) -> list[dict]:
    c = daemon.client()
    try:
        return c.call("list_sessions")
    finally:
        c.close()


async def test_joins_the_hooks_session_and_never_ends_it(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "joined")
    sid = "cc-session-joined-0001"
    c = daemon.client()
    c.call(
        "hook_session_start", session_id=sid, cwd=str(proj), source="startup"
    )  # what the SessionStart hook does
    c.close()
    async with server(daemon, proj, session=sid) as s:
        stored = payload(
            await s.call_tool(
                "store_memory",
                {
                    "content": "scratch [x] \\ note 🚀 for the joined session",
                    "scope": "session",
                    "memory_type": "working",
                },
            )
        )
        hits = payload(
            await s.call_tool("recall_memories", {"query": "scratch note joined session", "scope": "session"})
        )
    assert [h["id"] for h in hits["hits"]] == [stored["id"]]
    mine = [x for x in live_sessions(daemon) if x["claude_session_id"] == sid]
    assert len(mine) == 1, "the MCP server opened a second session or ended the hooks' one"
    assert not [
        x
        for x in live_sessions(daemon)
        if str(x["claude_session_id"]).startswith("mcp-") and x["project_root"] == str(proj)
    ]
    c = daemon.client()
    c.call("end_session", session=sid)  # what SessionEnd does
    c.close()


async def test_recall_session_scope_without_a_session_is_empty_not_a_crash(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    async with server(daemon, new_project(tmp_path, "nosession")) as s:
        hits = payload(await s.call_tool("recall_memories", {"query": "anything at all", "scope": "session"}))
    assert hits["hits"] == []


class RawBridge:
    """The bridge as a subprocess spoken to line by line (for signals, EOF and daemon restarts)."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, "-S", str(BRIDGE)],
            cwd=str(cwd),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.ids = iter(range(1, 10_000))
        init = self.rpc(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        assert init["result"]["serverInfo"]["name"] == "engram", init
        self.notify("notifications/initialized")

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.proc.stdin.flush()

    def rpc(self, method: str, params: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        req = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def tool(self, name: str, arguments: dict) -> dict:
        return self.rpc("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe and not pipe.closed:
                pipe.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "EOF"])
def test_exits_within_a_second_and_leaves_no_session_of_its_own(
    daemon: DaemonProc, tmp_path: Path, how: str
) -> None:
    import signal
    import time

    proj = new_project(tmp_path, f"exit-{how}")
    env = {k: v for k, v in daemon.env.items() if k not in ("CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID")}
    bridge = RawBridge(env, proj)
    res = bridge.tool(
        "store_memory", {"content": "a session memory of a server that is about to exit", "scope": "session"}
    )
    assert not res["result"].get("isError"), res
    own = [
        x
        for x in live_sessions(daemon)
        if str(x["claude_session_id"]).startswith("mcp-") and x["project_root"] == str(proj)
    ]
    assert len(own) == 1
    t0 = time.monotonic()
    if how == "EOF":
        bridge.proc.stdin.close()  # type: ignore[union-attr]
    else:
        bridge.proc.send_signal(getattr(signal, how))
    bridge.proc.wait(timeout=5)
    assert time.monotonic() - t0 < 1.0
    bridge.close()

    def still_there() -> bool:
        return any(x["session_key"] == own[0]["session_key"] for x in live_sessions(daemon))

    deadline = time.monotonic() + 10  # the daemon ends the session when it sees the connection close
    while time.monotonic() < deadline and still_there():
        time.sleep(0.05)
    assert not still_there()


def test_bridge_carries_on_after_the_daemon_is_killed(light_daemon: DaemonProc, tmp_path: Path) -> None:
    """kill -9 of the daemon mid-session: the bridge restarts it (launcher.json), replays initialize, and the
    session's next calls work; nothing acknowledged before is lost."""
    light_daemon.start()
    proj = new_project(tmp_path, "restart")
    bridge = RawBridge({**light_daemon.env, "CLAUDE_CODE_SESSION_ID": "cc-restart-0001"}, proj)
    try:
        stored = bridge.tool("store_memory", {"content": "written before the daemon was killed"})
        mid = json.loads(stored["result"]["content"][0]["text"])["id"]
        light_daemon.kill9()
        got = bridge.tool("get_memory", {"memory_id": mid})
        if "error" in got and "retry" not in got["error"]["message"]:
            bridge.proc.kill()
            raise AssertionError(f"{got}: {bridge.proc.stderr.read().decode()}")  # type: ignore[union-attr]
        if "error" in got:  # the call met the dead connection: the bridge said so; a retry goes through
            assert "retry" in got["error"]["message"], got
            got = bridge.tool("get_memory", {"memory_id": mid})
        assert not got["result"].get("isError"), got
        assert (
            json.loads(got["result"]["content"][0]["text"])["content"]
            == "written before the daemon was killed"
        )
        listed = bridge.rpc("tools/list", {})
        assert len(listed["result"]["tools"]) == len(EXPECTED_TOOLS)
    finally:
        bridge.close()


def test_bridge_reaps_the_daemon_it_started(light_daemon: DaemonProc, tmp_path: Path) -> None:
    """A daemon the bridge (re)started is its child: once it exits (here: shut down, as `engram stop` does) it
    must not stay a zombie for the rest of the agent's session, and it stays stopped until the session's next
    request starts it again (the bridge used to start it the moment it went away, undoing `engram stop`)."""
    import select
    import time

    from engram_core.wire.client import RemoteService, daemon_pid

    light_daemon.start()
    bridge = RawBridge(
        {**light_daemon.env, "CLAUDE_CODE_SESSION_ID": "cc-reap-0001"}, new_project(tmp_path, "reap")
    )
    try:
        light_daemon.kill9()
        got = bridge.tool("memory_stats", {})
        if "error" in got:  # the call met the dead connection; the next one goes to the restarted daemon
            got = bridge.tool("memory_stats", {})
        assert not got["result"].get("isError"), got
        pid = daemon_pid(light_daemon.home)
        assert pid is not None
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid == bridge.proc.pid, "the bridge started this daemon"
        fd = os.pidfd_open(pid)
        try:
            c = RemoteService(light_daemon.home, start=False).connect()
            c.call("shutdown")
            c.close()
            assert select.select([fd], [], [], 60)[0], "the daemon did not exit"
        finally:
            os.close(fd)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not Path(f"/proc/{pid}").exists(), f"daemon {pid} left as a zombie of the bridge"
        assert bridge.proc.poll() is None  # while the bridge lives on
        assert bridge.proc.stderr is not None
        lost = bridge.proc.stderr.readline().decode()  # written once the bridge has seen the connection close
        assert "lost the Engram daemon; the next request starts it again" in lost, lost
        children = Path(f"/proc/{bridge.proc.pid}/task/{bridge.proc.pid}/children")
        deadline = time.monotonic() + 2  # a restart starts the daemon within milliseconds of the loss
        while time.monotonic() < deadline:
            assert not children.read_text().split(), "the bridge started a daemon that nothing asked for"
            time.sleep(0.05)
        assert not light_daemon.answers()
        got = bridge.tool("memory_stats", {})  # the next request starts it again
        assert not got["result"].get("isError"), got
        assert light_daemon.answers()
    finally:
        bridge.close()


def test_bridge_without_a_daemon_says_why(tmp_path: Path) -> None:
    import subprocess

    home = tmp_path / "nohome"
    env = {"PATH": "/usr/bin:/bin", "ENGRAM_HOME": str(home), "HOME": str(tmp_path)}
    msg = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}) + "\n"
    out = subprocess.run(
        ["/usr/bin/env", "python3", "-S", str(BRIDGE)],
        input=msg,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    reply = json.loads(out.stdout.splitlines()[0])
    assert (
        "launcher.json" in reply["error"]["message"]
        and "engram setup claude-code" in reply["error"]["message"]
    )
    assert "launcher.json" in out.stderr


async def test_session_summary_is_kept_in_project_scope_and_replaced(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "summary")
    sid = "cc-session-summary-0001"
    async with server(daemon, proj, session=sid) as s:
        first = payload(
            await s.call_tool("session_summary", {"summary": "Goal: [fix] the \\ parser 🚀; done: tests"})
        )
        assert first["scope"] == "project" and first["content"].startswith("Goal: [fix] the \\ parser")
        second = payload(await s.call_tool("session_summary", {"summary": "Goal: fix the parser; done: all"}))
        assert "summary" in error_text(await s.call_tool("session_summary", {"summary": ""}))
        hits = payload(
            await s.call_tool("recall_memories", {"query": "Goal fix the parser", "scope": "project"})
        )
    contents = [h["content"] for h in hits["hits"]]
    assert second["content"] in contents and first["content"] not in contents, contents
    c = daemon.client()
    c.call("end_session", session=sid)
    c.close()


# ── review tools (the memory-consolidator agent's) ───────────────────────────
async def test_review_tools_consolidations_contradictions_graph_episodes(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "review")
    sid = "cc-session-review-0001"
    async with server(daemon, proj, session=sid) as s:
        sources = [
            payload(
                await s.call_tool(
                    "store_memory", {"content": text, "memory_type": "episodic", "tags": ["migrations"]}
                )
            )["id"]
            for text in (
                "Ran alembic upgrade head and it failed on the users table",
                "alembic autogenerate missed the new index on orders",
                "Fixed alembic env.py to import all models before autogenerate",
            )
        ]
        planned = payload(await s.call_tool("reflect_and_consolidate", {"dry_run": True}))
        assert planned["dry_run"] and planned["queued"]["episodic_to_semantic"] == 1
        assert payload(await s.call_tool("list_consolidations", {}))["count"] == 0, "a dry run queues nothing"
        ran = payload(await s.call_tool("reflect_and_consolidate", {}))  # acts by default
        assert ran["dry_run"] is False and ran["queued"]["episodic_to_semantic"] == 1
        full = payload(await s.call_tool("reflect_and_consolidate", {"level": "full"}))
        assert full["levels"] == ["light", "full"], full["levels"]
        listed = payload(await s.call_tool("list_consolidations", {}))
        [item] = [i for i in listed["items"] if i["reason"] == "episodic_to_semantic"]
        assert {src["id"] for src in item["sources"]} == set(sources)
        summary = "alembic autogenerate needs every model imported in env.py [check] \\ indexes by hand"
        summarised = payload(
            await s.call_tool("propose_consolidation_summary", {"item_id": item["id"], "summary": summary})
        )
        assert summarised["proposal"]["content"] == summary and summarised["proposal"]["source"] == "agent"
        done = payload(await s.call_tool("approve_consolidation", {"item_id": item["id"]}))
        assert done["status"] == "completed" and done["memory"]["content"] == summary
        assert "not pending" in error_text(await s.call_tool("reject_consolidation", {"item_id": item["id"]}))
        assert "list them first" in error_text(
            await s.call_tool("approve_consolidation", {"item_id": "01NOSUCHITEM"})
        )
        assert "summary" in error_text(
            await s.call_tool("propose_consolidation_summary", {"item_id": item["id"], "summary": ""})
        )

        payload(await s.call_tool("store_memory", {"content": "The service uses PostgreSQL as its database"}))
        payload(
            await s.call_tool(
                "store_memory", {"content": "The service does not use PostgreSQL as its database"}
            )
        )
        found = payload(await s.call_tool("list_contradictions", {}))["contradictions"]
        [pair] = [c for c in found if "PostgreSQL" in c["a"]["content"]]
        res = payload(
            await s.call_tool(
                "resolve_contradiction", {"contradiction_id": pair["id"], "resolution": "keep_b"}
            )
        )
        assert res["resolution"] == "keep_b" and res["superseded"] == [pair["a"]["id"]]
        assert "already resolved" in error_text(
            await s.call_tool(
                "resolve_contradiction", {"contradiction_id": pair["id"], "resolution": "keep_a"}
            )
        )
        again = payload(await s.call_tool("reopen_contradiction", {"contradiction_id": pair["id"]}))
        assert again["status"] == "open" and again["a"]["status"] != "superseded", again
        assert "nothing to undo" in error_text(
            await s.call_tool("reopen_contradiction", {"contradiction_id": pair["id"]})
        )
        listed = payload(await s.call_tool("list_contradictions", {}))
        assert listed["total_open"] >= 1 and any(c["id"] == pair["id"] for c in listed["contradictions"])
        bad = error_text(
            await s.call_tool("resolve_contradiction", {"contradiction_id": "x", "resolution": "both"})
        )
        assert "resolution" in bad

        added = payload(
            await s.call_tool(
                "add_entities",
                {
                    "entities": [
                        {"name": "deploy.sh", "entity_type": "file", "description": "the deploy script"},
                        {"name": "AWS CLI", "entity_type": "tool"},
                    ]
                },
            )
        )
        assert {e["name"] for e in added["created"] + added["merged"]} >= {"deploy.sh", "AWS CLI"}
        assert "entity_type" in error_text(
            await s.call_tool("add_entities", {"entities": [{"name": "x", "entity_type": "planet"}]})
        )
        rel = payload(
            await s.call_tool(
                "relate_entities", {"source": "deploy.sh", "target": "AWS CLI", "relation_type": "uses"}
            )
        )
        assert rel["relation"]["relation_type"] == "uses" and rel["relation"]["source_name"] == "deploy.sh"
        assert rel["relation"]["target_name"] == "AWS CLI" and rel["strengthened"] is False
        assert "itself" in error_text(
            await s.call_tool(
                "relate_entities", {"source": "deploy.sh", "target": "deploy.sh", "relation_type": "uses"}
            )
        )
        payload(
            await s.call_tool(
                "store_memory", {"content": "episode note", "scope": "session", "memory_type": "working"}
            )
        )
        episodes = payload(await s.call_tool("end_episode", {"reason": "switching to the docs"}))
        assert episodes["closed"] and {e["end_reason"] for e in episodes["closed"]} == {
            "switching to the docs"
        }
    c = daemon.client()
    c.call("end_session", session=sid)
    c.close()


async def test_first_requests_answered_at_once_while_the_daemon_starts(tmp_path: Path) -> None:
    """Issue #29 item 7: with the daemon down (an idle exit, `engram stop`), the bridge answers initialize and
    tools/list from what the daemon last published, the same list the daemon serves, at once; it starts the
    daemon in the background and holds the first tool call until the daemon answers it."""
    import time

    home = tmp_path / "home"
    d = DaemonProc(home, model=False).start()
    deadline = time.monotonic() + 60
    while not (home / "mcp_answers.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    d.stop()
    assert (home / "mcp_answers.json").exists() and not d.answers()
    assert oct((home / "mcp_answers.json").stat().st_mode & 0o777) == "0o600"
    # a daemon that takes 4 s to come up (the model, a loaded machine): the client must not wait for it
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 4\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    env = {k: v for k, v in d.env.items() if k not in ("CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID")}
    env["ENGRAM_PYTHON"] = str(slow)
    proj = new_project(tmp_path, "coldstart")
    params = StdioServerParameters(command=sys.executable, args=["-S", str(BRIDGE)], cwd=str(proj), env=env)
    try:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            t0 = time.monotonic()
            await s.initialize()
            early = (await s.list_tools()).tools
            took = time.monotonic() - t0
            assert took < 2.0 and not d.answers(), took
            assert {t.name for t in early} == EXPECTED_TOOLS
            stored = payload(await s.call_tool("store_memory", {"content": "held until the daemon was up"}))
            held = time.monotonic() - t0
            assert stored["action"] == "created" and held > 3.0, held
            live = (await s.list_tools()).tools  # now from the daemon itself
            assert [t.model_dump() for t in early] == [t.model_dump() for t in live]
    finally:
        d.stop()
