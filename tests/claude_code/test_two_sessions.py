"""Issue #11, shown the way a user meets it: two real Claude Code sessions (`claude -p … --plugin-dir <checkout>`)
in one project, the model scripted by mock_anthropic. What the first session learned must be in the second
session's first request to the model: a decision stored through MCP, a failure and its fix, a preference stated
in a prompt, the session summary. The hooks and the MCP server of each session must share one Engram session.

The daemon is started beforehand, as `engram setup claude-code` leaves it (launcher recorded, model cached)."""

from __future__ import annotations

import json
import re
from typing import Any

from harness import MCP_PREFIX, ClaudeCode, Run, result_text
from mock_anthropic import MockAnthropic, mcp_tool, request_text, text, tool_use
from support import DaemonProc

DECISION = (
    "Decision: configuration is read with tomllib from engram.toml; YAML config files are not supported"
)
PREFERENCE = "From now on, always run the test suite with pytest -q before every commit."
SUMMARY = (
    "Session summary: added check_config.py (validates engram.toml); it first failed because the file "
    "was missing, fixed by writing it"
)
SCRATCH = "scratch: the config loader work is half done"


def offered(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in body.get("tools") or []}


def summary_step(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Write the session summary through MCP when this daemon offers the tool (it arrives with cc-hooks' work)."""
    if MCP_PREFIX + "session_summary" in offered(body):
        return [mcp_tool("session_summary", {"summary": SUMMARY})]
    return [text("No session_summary tool offered.")]


def first_session_script() -> list[Any]:
    return [
        [
            mcp_tool(
                "store_memory",
                {
                    "content": DECISION,
                    "memory_type": "semantic",
                    "scope": "project",
                    "importance": 0.8,
                    "tags": ["decision", "config"],
                },
            )
        ],
        [mcp_tool("store_memory", {"content": SCRATCH, "scope": "session", "memory_type": "working"})],
        [tool_use("Bash", {"command": "python3 check_config.py", "description": "validate the config"})],
        [tool_use("Write", {"file_path": "check_config.py", "content": "print('config ok')\n"})],
        [
            tool_use(
                "Bash", {"command": "python3 check_config.py", "description": "validate the config again"}
            )
        ],
        summary_step,
        [text("The config check passes now.")],
    ]


def mcp_results(run: Run) -> list[str]:
    return [json.dumps(r.get("content")) for r in run.tool_results()]


def test_what_a_session_learns_reaches_the_next(
    claude_code: ClaudeCode, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    mock_model.extend(first_session_script())
    first = claude_code.run(f"{PREFERENCE} Please add a config check script.", mock_model.url)
    assert first.returncode == 0, first.describe()
    one = first.session_id
    assert one

    # The plugin's MCP tools are there from the first turn (the server answered in time).
    first_requests = mock_model.main_requests()
    assert MCP_PREFIX + "store_memory" in offered(first_requests[0]), sorted(offered(first_requests[0]))
    results = first.tool_results()
    assert not any(r.get("is_error") and "mcp" in json.dumps(r) for r in results), mcp_results(first)
    stored = json.loads(result_text(results[0]))
    assert stored["action"] == "created" and stored["scope"] == "project"
    assert json.loads(result_text(results[1]))["scope"] == "session"
    assert results[2].get("is_error"), "the first check_config.py run must fail"
    assert "config ok" in json.dumps(results[4])

    # Hooks and MCP server used one Engram session, which SessionEnd (not the MCP server) ended.
    assert_one_session(engram_daemon, claude_code, one)
    debug = first.debug
    assert re.search(r'MCP server "plugin:engram:engram".*(connected|Successfully)', debug, re.I), "\n".join(
        x for x in debug.splitlines() if "mcp" in x.lower()
    )[-3000:]

    # Second session, same project: its very first request to the model carries what the first learned.
    seen = len(mock_model.main_requests())
    mock_model.extend([[text("Noted.")]])
    second = claude_code.run("What should I know before changing the config loader?", mock_model.url)
    assert second.returncode == 0, second.describe()
    assert second.session_id and second.session_id != one
    context = request_text(mock_model.main_requests()[seen])

    missing = [what for what, found in learned(context).items() if not found]
    assert not missing, (
        f"the second session's first request lacks: {missing}\n--- context ---\n{context[:6000]}"
    )
    assert_one_session(engram_daemon, claude_code, second.session_id)


def test_after_clear_the_mcp_server_follows_the_hooks_to_the_new_session(
    claude_code: ClaudeCode, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    """`/clear` ends the hooks' session and starts another in the same Claude Code process, whose MCP server
    keeps the old id in its environment (tests/claude_code/test_cli_contract.py): its writes follow the hooks."""
    mock_model.extend(
        [
            [mcp_tool("store_memory", {"content": "noted before the clear", "scope": "session"})],
            [text("Noted.")],
            [mcp_tool("store_memory", {"content": "noted after the clear", "scope": "session"})],
            [text("Noted again.")],
        ]
    )
    run = claude_code.run(["Note something.", "/clear", "Note something else."], mock_model.url)
    assert run.returncode == 0, run.describe()
    before, after = run.session_ids
    results = [result_text(r) for r in run.tool_results()]
    assert len(results) == 2 and not any(r.get("is_error") for r in run.tool_results()), results
    rows = registry(engram_daemon, claude_code)
    assert sorted(r["claude_session_id"] for r in rows) == sorted([before, after]), rows
    assert {r["claude_session_id"]: r["end_reason"] for r in rows}[before] == "clear", rows
    assert all(r["status"] == "completed" for r in rows), rows


def assert_one_session(daemon: DaemonProc, cc: ClaudeCode, claude_id: str) -> None:
    """The project's session registry names Claude Code's id once, ended by SessionEnd; no session of an MCP
    server's own (mcp-…) was ever opened in this project."""
    rows = registry(daemon, cc)
    mine = [r for r in rows if r["claude_session_id"] == claude_id]
    assert len(mine) == 1, rows
    assert mine[0]["status"] == "completed" and "mcp" not in str(mine[0]["end_reason"]), rows
    assert not [r for r in rows if str(r["claude_session_id"]).startswith("mcp-")], rows


def learned(context: str) -> dict[str, bool]:
    """What the first session learned, each: is it in this request?"""
    return {
        "the decision stored through MCP": "tomllib from engram.toml" in context,
        "the failure of `python3 check_config.py` and its fix": bool(
            re.search(r"check_config\.py[^\n]*fail[^\n]*fix", context, re.I)
        ),
        "the preference stated in the prompt": "pytest -q before every commit" in context,
        "the session summary": "added check_config.py (validates engram.toml)" in context,
    }


def registry(daemon: DaemonProc, cc: ClaudeCode) -> list[dict[str, Any]]:
    """The project's session registry once every acknowledged hook event is applied."""
    c = daemon.client()
    try:
        c.call("flush", timeout_s=30)
        return c.call(
            "run_query",
            surql="SELECT claude_session_id, status, end_reason FROM session_registry",
            scope="project",
            project=str(cc.project),
        )["statements"][0]["rows"]
    finally:
        c.close()
