"""The plugin as the real Claude Code CLI loads it: validation, the names it exposes, slash commands and the
memory-consolidator agent working through the MCP tools on the session shared with the hooks."""

from __future__ import annotations

import json
from typing import Any

from harness import MCP_PREFIX, REPO_ROOT, ClaudeCode, result_text
from mock_anthropic import MockAnthropic, mcp_tool, request_text, text, tool_use
from support import DaemonProc

COMMANDS = {
    "engram:remember",
    "engram:remember-all",
    "engram:forget",
    "engram:memory",
    "engram:memory-consolidate",
}


def test_plugin_validates_strictly(claude_code: ClaudeCode) -> None:
    out = claude_code.command("plugin", "validate", "--strict", str(REPO_ROOT))
    assert out.returncode == 0 and "Validation passed" in out.stdout, out.stdout + out.stderr


def test_names_claude_code_exposes_and_bare_names_do_not_reach_the_plugin(
    claude_code: ClaudeCode, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    run = claude_code.run("/remember the build uses make", mock_model.url)
    init = run.init
    assert set(init["slash_commands"]) >= COMMANDS, init["slash_commands"]
    assert "engram:memory-consolidator" in init["agents"]
    assert {"name": "plugin:engram:engram", "status": "connected"} in init["mcp_servers"], init["mcp_servers"]
    assert run.result.get("result") == "Unknown command: /remember"
    assert mock_model.main_requests() == [], "a bare /remember must not reach the model as a plugin command"


def test_remember_command_on_the_shared_session(
    claude_code: ClaudeCode, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    seen: dict[str, Any] = {}

    def read_command(body: dict[str, Any]) -> list[dict[str, Any]]:
        seen["request"] = request_text(body)
        return [
            mcp_tool(
                "store_memory",
                {
                    "content": "The build uses make (not ninja) 🚀 [x] \\ ok",
                    "scope": "project",
                    "importance": 0.8,
                },
            )
        ]

    mock_model.extend(
        [
            read_command,
            [mcp_tool("store_memory", {"content": "this session touched the Makefile", "scope": "session"})],
            [mcp_tool("recall_memories", {"query": "Makefile", "scope": "session"})],
            lambda body: [
                mcp_tool(
                    "promote_memory",
                    {"memory_id": json.loads(_last_result(body))["hits"][0]["id"], "target_scope": "project"},
                )
            ],
            [text("Stored and promoted.")],
        ]
    )
    run = claude_code.run("/engram:remember the build uses make", mock_model.url)
    assert run.returncode == 0, run.describe()
    assert "the build uses make" in seen["request"]
    assert MCP_PREFIX + "store_memory" in seen["request"] and MCP_PREFIX + "promote_memory" in seen["request"]
    results = [result_text(r) for r in run.tool_results()]
    assert not any(r.get("is_error") for r in run.tool_results()), results
    recalled = json.loads(results[2])
    assert recalled["hits"][0]["content"] == "this session touched the Makefile", recalled
    assert {h["scope"] for h in recalled["hits"]} == {"session"}
    promoted = json.loads(results[3])
    assert promoted["promoted"] or promoted["merged"], promoted
    sessions = engram_daemon.client().call("list_sessions")
    assert not [s for s in sessions if str(s["claude_session_id"]).startswith("mcp-")], sessions


def _last_result(body: dict[str, Any]) -> str:
    for block in reversed(body["messages"][-1]["content"]):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return result_text(block)
    raise AssertionError("no tool result in the last message")


def test_consolidator_agent_gets_the_mcp_review_tools(
    claude_code: ClaudeCode, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    offered: dict[str, set[str]] = {}

    def as_agent(body: dict[str, Any]) -> list[dict[str, Any]]:
        offered["agent"] = {t["name"] for t in body["tools"]}
        return [mcp_tool("list_contradictions", {})]

    mock_model.extend(
        [
            [
                tool_use(
                    "Agent",
                    {
                        "subagent_type": "engram:memory-consolidator",
                        "description": "review memory",
                        "prompt": "Review Engram's memory for this project.",
                    },
                )
            ],
            as_agent,
            [text("No open contradictions.")],
            [text("The memory is tidy.")],
        ]
    )
    run = claude_code.run("/engram:memory-consolidate", mock_model.url)
    assert run.returncode == 0, run.describe()
    tools = offered["agent"]
    for name in (
        "list_consolidations",
        "propose_consolidation_summary",
        "approve_consolidation",
        "reject_consolidation",
        "list_contradictions",
        "resolve_contradiction",
        "reopen_contradiction",
        "add_entities",
        "relate_entities",
        "reflect_and_consolidate",
        "memory_stats",
    ):
        assert MCP_PREFIX + name in tools, sorted(tools)
    assert "Write" not in tools and "Edit" not in tools
    answers = {
        result_text(b)
        for r in mock_model.main_requests()
        for m in r["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    assert any(
        a.startswith("{") and json.loads(a) == {"count": 0, "total_open": 0, "contradictions": []}
        for a in answers
    ), answers
