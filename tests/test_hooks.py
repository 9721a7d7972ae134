"""The hook script as Claude Code runs it: real event JSON on stdin, a real daemon, the spool when it is down."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import HOOK_SCRIPT, DaemonProc, new_project

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def run_hook(event: str, payload: dict | str | bytes, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, bytes) else (
        payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
    return subprocess.run([PYTHON3, "-S", str(HOOK_SCRIPT), event], input=data, env=env, capture_output=True,
                          timeout=timeout)


def base(session: str, cwd: Path, name: str) -> dict:
    return {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(cwd),
            "hook_event_name": name}


def write_event(session: str, cwd: Path, rel: str, created: bool) -> dict:
    return {**base(session, cwd, "PostToolUse"), "tool_name": "Write", "tool_use_id": "toolu_01",
            "tool_input": {"file_path": str(cwd / rel), "content": "def main():\n    return 1\n"},
            "tool_response": {"type": "create" if created else "update", "filePath": str(cwd / rel),
                              "content": "def main():\n    return 1\n", "structuredPatch": []}}


def bash_fail(session: str, cwd: Path) -> dict:
    return {**base(session, cwd, "PostToolUse"), "tool_name": "Bash", "tool_use_id": "toolu_02",
            "tool_input": {"command": f"GITHUB_TOKEN={SECRET} pytest tests/test_x.py", "description": "run tests"},
            "tool_response": {"stdout": "collected 3 items\n", "interrupted": False, "isImage": False,
                              "stderr": f"E   ModuleNotFoundError: No module named 'requests'\nauth {SECRET} failed"}}


def session_memories(d: DaemonProc, session: str, project: Path) -> list[dict]:
    c = d.client()
    try:
        c.call("flush", timeout_s=60)
        return c.call("list_memories", scope="session", session=session, project=str(project), limit=500)["items"]
    finally:
        c.close()


@pytest.fixture
def env(daemon: DaemonProc) -> dict:
    return {**daemon.env}


def test_post_tool_use_write_edit_and_bash_failure(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "hooked")
    sid = "sess-hooks-1"
    for payload in (write_event(sid, proj, "src/new_mod.py", True), write_event(sid, proj, "src/old.py", False),
                    {**base(sid, proj, "PostToolUse"), "tool_name": "Edit",
                     "tool_input": {"file_path": str(proj / "src/app.py"), "old_string": "x = 1", "new_string": "x = 2"},
                     "tool_response": {"filePath": str(proj / "src/app.py")}},
                    {**base(sid, proj, "PostToolUse"), "tool_name": "MultiEdit",
                     "tool_input": {"file_path": str(proj / "src/b.py"),
                                    "edits": [{"old_string": "a", "new_string": "b"}]}},
                    bash_fail(sid, proj),
                    {**base(sid, proj, "PostToolUse"), "tool_name": "Bash",
                     "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a b", "stderr": ""}},
                    {**base(sid, proj, "PostToolUse"), "tool_name": "Read",
                     "tool_input": {"file_path": str(proj / "x")}, "tool_response": {}}):
        r = run_hook("PostToolUse", payload, env)
        assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    mems = {m["content"].split(":")[0]: m for m in session_memories(daemon, sid, proj)}
    assert mems["Modified src/new_mod.py"]["importance"] == 0.6
    assert mems["Modified src/old.py"]["importance"] == 0.3
    assert "file-change" in mems["Modified src/app.py"]["tags"]
    assert "Modified src/b.py" in mems
    failed = next(m for k, m in mems.items() if k.startswith("Command failed"))
    assert failed["importance"] == 0.5 and {"error", "debugging", "pytest"} <= set(failed["tags"])
    assert SECRET not in failed["content"] and "[REDACTED:" in failed["content"]
    assert "No module named 'requests'" in failed["content"]
    assert len(mems) == 5  # the successful `ls` and the Read stored nothing
    assert all(m["memory_type"] == "episodic" and m["scope"] == "session" for m in mems.values())


def test_post_tool_use_failure_event(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "failproj")
    payload = {**base("sess-fail", proj, "PostToolUseFailure"), "tool_name": "Bash",
               "tool_input": {"command": "make build"}, "error": "Exit code 2\nmake: *** [build] Error 2"}
    assert run_hook("PostToolUseFailure", payload, env).returncode == 0
    mems = session_memories(daemon, "sess-fail", proj)
    assert mems and mems[0]["content"].startswith("Command failed: make build")


@pytest.mark.parametrize("stdin", [b"", b"not json", b"[1,2]", b"{\"tool_name\": 5}", b"\xff\xfe\x00garbage",
                                   json.dumps({"tool_name": "Write", "tool_input": "x"}).encode()])
def test_malformed_input_exits_zero_silently(env: dict, stdin: bytes) -> None:
    for event in ("PostToolUse", "SessionStart", "SessionEnd", "UserPromptSubmit", "Nonsense"):
        r = run_hook(event, stdin, env)
        assert r.returncode == 0 and r.stderr == b""


def test_session_start_context_is_scoped_to_its_project(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    a, b = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    c = daemon.client()
    c.call("store", memory={"content": "alpha deploys with the blue-green script", "importance": 0.9},
           project=str(a))
    c.call("store", memory={"content": "beta secret project codename zanzibar", "importance": 0.9}, project=str(b))
    c.call("store", memory={"content": "the user prefers small focused commits", "scope": "user",
                            "importance": 0.9})
    c.close()
    r = run_hook("SessionStart", {**base("sess-alpha", a, "SessionStart"), "source": "startup"}, env)
    assert r.returncode == 0
    out = json.loads(r.stdout)
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "blue-green" in ctx and "small focused commits" in ctx
    assert "zanzibar" not in ctx
    assert "## Project" in ctx and "## User" in ctx


def test_session_start_budget(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "budget")
    c = daemon.client()
    for i in range(40):
        c.call("store", memory={"content": f"budget fact {i}: " + "words " * 40, "importance": 0.8},
               project=str(proj))
    c.close()
    r = run_hook("SessionStart", base("sess-budget", proj, "SessionStart"),
                 {**env, "ENGRAM_INJECTION_TOKEN_BUDGET": "300"})
    ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(ctx) < 300 * 4 + 400  # ~4 chars a token, plus the closing note


def test_opt_outs(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "optout")
    run_hook("PostToolUse", write_event("sess-env", proj, "a.py", True), {**env, "ENGRAM_DISABLED": "1"})
    (daemon.home / "optout").mkdir(exist_ok=True)
    (daemon.home / "optout" / "sess-file").touch()
    run_hook("PostToolUse", write_event("sess-file", proj, "b.py", True), env)
    r = run_hook("SessionStart", base("sess-file", proj, "SessionStart"), env)
    assert r.stdout == b""
    off = new_project(tmp_path, "disabledproj")
    (off / ".claude").mkdir()
    (off / ".claude" / "engram.local.md").write_text("---\ndisabled: true\n---\nno memory here\n")
    run_hook("PostToolUse", write_event("sess-proj", off, "c.py", True), env)
    for sid, p in (("sess-env", proj), ("sess-file", proj), ("sess-proj", off)):
        c = daemon.client()
        c.call("flush")
        sessions = [s["claude_session_id"] for s in c.call("list_sessions")]
        c.close()
        assert sid not in sessions or not session_memories(daemon, sid, p)


def test_user_prompt_submit_off_by_default_and_on_when_set(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "prompted")
    c = daemon.client()
    c.call("store", memory={"content": "the cache layer uses redis with a 5 minute ttl"}, project=str(proj))
    c.close()
    payload = {**base("sess-prompt", proj, "UserPromptSubmit"), "prompt": "how long is the redis cache ttl?"}
    assert run_hook("UserPromptSubmit", payload, env).stdout == b""
    r = run_hook("UserPromptSubmit", payload, {**env, "ENGRAM_PROMPT_RECALL": "1"})
    # The daemon reads the project's settings: enable it there too.
    (proj / ".claude").mkdir(exist_ok=True)
    (proj / ".claude" / "engram.local.md").write_text("---\nprompt_recall: true\n---\n")
    r = run_hook("UserPromptSubmit", payload, env)
    out = json.loads(r.stdout)
    assert "redis" in out["hookSpecificOutput"]["additionalContext"]


def test_lifecycle_precompact_and_session_end_promotes(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "lifecycle")
    sid = "sess-life"
    run_hook("SessionStart", base(sid, proj, "SessionStart"), env)
    run_hook("PostToolUse", write_event(sid, proj, "src/core.py", True), env)
    assert run_hook("PreCompact", {**base(sid, proj, "PreCompact"), "trigger": "auto"}, env).returncode == 0
    mems = session_memories(daemon, sid, proj)
    assert any(m["content"].startswith("Before context compaction (auto)") for m in mems)
    c = daemon.client()
    c.call("store", memory={"content": "lifecycle: always run migrations before tests", "scope": "session",
                            "importance": 0.9}, project=str(proj), session=sid)
    c.close()
    assert run_hook("Stop", {**base(sid, proj, "Stop"), "stop_hook_active": False}, env).returncode == 0
    assert run_hook("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "logout"}, env).returncode == 0
    c = daemon.client()
    c.call("flush")
    assert sid not in [s["claude_session_id"] for s in c.call("list_sessions")]
    page = c.call("list_memories", scope="project", project=str(proj), text="migrations before tests")
    c.close()
    assert page["total"] == 1  # promoted by the session-end pass


def test_daemon_down_spools_redacted_and_drains_exactly_once(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False)
    proj = new_project(tmp_path, "spooled")
    env = {**d.env}
    r = run_hook("PostToolUse", bash_fail("sess-spool", proj), env)
    assert r.returncode == 0 and r.stdout == b""
    r = run_hook("PostToolUse", write_event("sess-spool", proj, "src/s.py", True), env)
    files = list((d.home / "spool").glob("*.jsonl"))
    assert len(files) == 2
    text = "".join(f.read_text() for f in files)
    assert SECRET not in text and "[REDACTED:" in text
    for f in files:
        assert oct(os.stat(f).st_mode & 0o777) == "0o600"
    try:
        d.start()
        assert len(session_memories(d, "sess-spool", proj)) == 2
        assert not list((d.home / "spool").glob("*.jsonl"))
        # A copy of an already-ingested event (a hook that timed out after the daemon took it) is skipped.
        (d.home / "spool" / "dupe.jsonl").write_text(text)
        d.stop()
        d.start()
        assert len(session_memories(d, "sess-spool", proj)) == 2
        c = d.client()
        assert c.call("status")["events_failed"] == 0
        c.close()
    finally:
        d.stop()
