"""Issue #29 item 7, the way a user meets it: the first session after the daemon stopped (its idle exit, or
`engram stop`) must offer Engram's tools in its first request to the model. Claude Code waits only a few seconds
for a plugin's MCP server (here it waited for a 4 s start and not for a 10 s one); the daemon's start (model
load, a loaded machine) took 3 s and more, and in one of two runs that session went without Engram. With the
bridge before issue #29 this test fails: the first request carries no Engram tool."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness import MCP_PREFIX, ClaudeCode
from mock_anthropic import MockAnthropic, mcp_tool, text
from support import MCP_TOOLS, DaemonProc


def test_first_session_after_engram_stop_has_the_tools(
    claude_bin: Path, tmp_path: Path, mock_model: MockAnthropic
) -> None:
    home = tmp_path / "engram-home"
    d = DaemonProc(
        home
    ).start()  # as `engram setup claude-code` leaves it: launcher recorded, answers published
    deadline = time.monotonic() + 60
    while not (home / "mcp_answers.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    stop = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "stop"],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0 and not d.answers(), stop.stderr
    d.stop()
    # The daemon takes 10 s to come up (a cold start on a busy machine, made deterministic): longer than Claude
    # Code waits for an MCP server.
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 10\nexec {sys.executable} "$@"\n')
    slow.chmod(0o755)
    cc = ClaudeCode(claude_bin, tmp_path, home)
    offered: list[set[str]] = []

    def first(body: dict) -> list:
        offered.append({t["name"] for t in body.get("tools") or []})
        return [mcp_tool("store_memory", {"content": "the first session after a stop stores this"})]

    mock_model.extend([first, [text("Stored.")]])
    try:
        run = cc.run(
            "remember that the first session after a stop works",
            mock_model.url,
            env={"ENGRAM_PYTHON": str(slow)},
            timeout=120,
        )
        assert run.returncode == 0, run.describe()
        assert offered and MCP_PREFIX + "store_memory" in offered[0], sorted(offered[0] if offered else [])
        assert len([n for n in offered[0] if n.startswith(MCP_PREFIX)]) == len(MCP_TOOLS)
        # the tool call was held until the daemon was up, then stored
        answers = [
            b
            for r in mock_model.main_requests()
            for m in r["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        assert answers and not any(b.get("is_error") for b in answers), answers
        found = d.client().call("list_memories", scope="project", project=str(cc.project))
        assert "the first session after a stop stores this" in [m["content"] for m in found["items"]]
    finally:
        d.stop()
