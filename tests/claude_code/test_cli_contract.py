"""What the real Claude Code CLI hands a plugin, recorded by probe_plugin/ (no Engram code involved).

Engram's hooks and MCP server are built on these facts; if a Claude Code release changes one, this test says
which, before the Engram tests fail in a less obvious way."""

from __future__ import annotations

import json
from pathlib import Path

from harness import ClaudeCode
from mock_anthropic import MockAnthropic, text, tool_use

PROBE = Path(__file__).resolve().parent / "probe_plugin"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_what_hooks_and_mcp_server_receive(
    claude_code: ClaudeCode, mock_model: MockAnthropic, tmp_path: Path
) -> None:
    out = tmp_path / "probe-out"
    out.mkdir()
    mock_model.extend(
        [
            [tool_use("Bash", {"command": "echo fine; echo Traceback >&2", "description": "succeeds"})],
            [tool_use("Bash", {"command": "ls /definitely/not/here", "description": "fails"})],
            [tool_use("mcp__plugin_probe_engram__ping", {})],
            [text("All done.")],
        ]
    )
    run = claude_code.run(
        "Probe the plugin interface", mock_model.url, plugin_dir=PROBE, env={"PROBE_OUT": str(out)}
    )
    assert run.returncode == 0, run.describe()
    sid = run.session_id
    assert sid

    hooks = lines(out / "hooks.jsonl")
    names = [h["hook"] for h in hooks]
    assert names[0] == "SessionStart" and names[-1] == "SessionEnd", names
    assert all(h["payload"]["session_id"] == sid for h in hooks)
    assert all(h["env"]["CLAUDE_CODE_SESSION_ID"] == sid for h in hooks)
    assert all(h["payload"]["cwd"] == str(claude_code.project) for h in hooks)
    start = hooks[0]["payload"]
    assert start["source"] == "startup" and start["hook_event_name"] == "SessionStart"
    prompt = next(h["payload"] for h in hooks if h["hook"] == "UserPromptSubmit")
    assert prompt["prompt"] == "Probe the plugin interface"

    # A Bash success arrives as PostToolUse, stderr merged into stdout, with no exit code; a failure as
    # PostToolUseFailure with an error and no tool_response: success is told by the event, not by words.
    ok = next(
        h["payload"] for h in hooks if h["hook"] == "PostToolUse" and h["payload"]["tool_name"] == "Bash"
    )
    assert ok["tool_input"]["command"].startswith("echo fine")
    assert "fine" in json.dumps(ok["tool_response"])
    assert "exit_code" not in ok["tool_response"] and "exitCode" not in ok["tool_response"]
    failed = next(h["payload"] for h in hooks if h["hook"] == "PostToolUseFailure")
    assert failed["tool_name"] == "Bash" and "tool_response" not in failed
    assert "not/here" in failed["tool_input"]["command"] and failed["error"]

    # The MCP server: started once, in the project, with the hooks' session id; named
    # mcp__plugin_<plugin>_<server>__<tool>; stopped with SIGINT first (then SIGTERM if it lingers).
    mcp = lines(out / "mcp.jsonl")
    envs = [m for m in mcp if "env" in m]
    assert len(envs) == 1
    env = envs[0]["env"]
    assert env["CLAUDE_CODE_SESSION_ID"] == sid
    assert env["CLAUDE_PROJECT_DIR"] == str(claude_code.project)
    assert env["CLAUDE_PLUGIN_ROOT"] == str(PROBE)
    assert "CLAUDE_PLUGIN_DATA" in env and "CLAUDE_SESSION_ID" not in env
    methods = [m["in"].get("method") for m in mcp if "in" in m]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    assert "tools/call" in methods
    signals = [m["signal"] for m in mcp if "signal" in m]
    assert signals and signals[0] == "SIGINT", signals
    assert any(
        r.get("content") == [{"type": "text", "text": "pong"}] or "pong" in json.dumps(r)
        for r in run.tool_results()
    )
    offered = {t["name"] for t in mock_model.main_requests()[0]["tools"]}
    assert "mcp__plugin_probe_engram__ping" in offered
