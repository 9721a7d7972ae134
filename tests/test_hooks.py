"""The hook script as Claude Code runs it: real event JSON on stdin, a real daemon, the spool when it is down."""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import HOOK_ENTRY, HOOK_SCRIPT, DaemonProc, new_project, wait_for_hook_children

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def run_hook(
    event: str, payload: dict | str | bytes, env: dict, timeout: float = 30, python: str = PYTHON3
) -> subprocess.CompletedProcess:
    """The hook as hooks.json runs it (hooks/run_hook.py), then until its detached child has delivered or spooled."""
    data = (
        payload
        if isinstance(payload, bytes)
        else (payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
    )
    r = subprocess.run(
        [python, "-S", str(HOOK_ENTRY), event], input=data, env=env, capture_output=True, timeout=timeout
    )
    sid = str(payload.get("session_id") or "") if isinstance(payload, dict) else ""
    wait_for_hook_children(Path(env["ENGRAM_HOME"]), [sid if sid and "/" not in sid else "-"])
    return r


def base(session: str, cwd: Path, name: str) -> dict:
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": name,
    }


def write_event(session: str, cwd: Path, rel: str, created: bool) -> dict:
    return {
        **base(session, cwd, "PostToolUse"),
        "tool_name": "Write",
        "tool_use_id": "toolu_01",
        "tool_input": {"file_path": str(cwd / rel), "content": "def main():\n    return 1\n"},
        "tool_response": {
            "type": "create" if created else "update",
            "filePath": str(cwd / rel),
            "content": "def main():\n    return 1\n",
            "structuredPatch": [],
        },
    }


def bash_fail(session: str, cwd: Path) -> dict:
    """Shaped as Claude Code 2.1 sends a failed Bash command (tests/data/claude_code/003-PostToolUseFailure.json)."""
    return {
        **base(session, cwd, "PostToolUseFailure"),
        "tool_name": "Bash",
        "tool_use_id": "toolu_02",
        "tool_input": {
            "command": f"GITHUB_TOKEN={SECRET} pytest tests/test_x.py",
            "description": "run tests",
        },
        "error": f"Exit code 1\ncollected 3 items\nE   ModuleNotFoundError: No module named 'requests'\n"
        f"auth {SECRET} failed",
        "is_interrupt": False,
        "duration_ms": 80,
    }


def session_memories(d: DaemonProc, session: str, project: Path) -> list[dict]:
    c = d.client()
    try:
        c.call("flush", timeout_s=60)
        return c.call("list_memories", scope="session", session=session, project=str(project), limit=500)[
            "items"
        ]
    finally:
        c.close()


@pytest.fixture
def env(daemon: DaemonProc) -> dict:
    return {**daemon.env}


def test_post_tool_use_write_edit_and_bash_failure(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "hooked")
    sid = "sess-hooks-1"
    for payload in (
        write_event(sid, proj, "src/new_mod.py", True),
        write_event(sid, proj, "src/old.py", False),
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "Edit",
            "tool_input": {
                "file_path": str(proj / "src/app.py"),
                "old_string": "x = 1",
                "new_string": "x = 2",
            },
            "tool_response": {"filePath": str(proj / "src/app.py")},
        },
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "MultiEdit",
            "tool_input": {
                "file_path": str(proj / "src/b.py"),
                "edits": [{"old_string": "a", "new_string": "b"}],
            },
        },
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "a b", "stderr": ""},
        },
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "Read",
            "tool_input": {"file_path": str(proj / "x")},
            "tool_response": {},
        },
    ):
        r = run_hook("PostToolUse", payload, env)
        assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    r = run_hook("PostToolUseFailure", bash_fail(sid, proj), env)
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
    payload = {
        **base("sess-fail", proj, "PostToolUseFailure"),
        "tool_name": "Bash",
        "tool_input": {"command": "make build"},
        "error": "Exit code 2\nmake: *** [build] Error 2",
    }
    assert run_hook("PostToolUseFailure", payload, env).returncode == 0
    mems = session_memories(daemon, "sess-fail", proj)
    assert mems and mems[0]["content"].startswith("Command failed: make build")


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"tool_name": 5}',
        b"\xff\xfe\x00garbage",
        json.dumps({"tool_name": "Write", "tool_input": "x"}).encode(),
    ],
)
def test_malformed_input_exits_zero_silently(env: dict, stdin: bytes) -> None:
    for event in ("PostToolUse", "SessionStart", "SessionEnd", "UserPromptSubmit", "Nonsense"):
        r = run_hook(event, stdin, env)
        assert r.returncode == 0 and r.stderr == b""


def test_session_start_context_is_scoped_to_its_project(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    a, b = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    c = daemon.client()
    c.call(
        "store",
        memory={"content": "alpha deploys with the blue-green script", "importance": 0.9},
        project=str(a),
    )
    c.call(
        "store",
        memory={"content": "beta secret project codename zanzibar", "importance": 0.9},
        project=str(b),
    )
    c.call(
        "store",
        memory={"content": "the user prefers small focused commits", "scope": "user", "importance": 0.9},
    )
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
        c.call(
            "store",
            memory={"content": f"budget fact {i}: " + "words " * 40, "importance": 0.8},
            project=str(proj),
        )
    c.close()
    r = run_hook(
        "SessionStart",
        base("sess-budget", proj, "SessionStart"),
        {**env, "ENGRAM_INJECTION_TOKEN_BUDGET": "300"},
    )
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


def test_user_prompt_submit_off_by_default_and_on_when_set(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
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
    c.call(
        "store",
        memory={
            "content": "lifecycle: always run migrations before tests",
            "scope": "session",
            "importance": 0.9,
        },
        project=str(proj),
        session=sid,
    )
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
    env = {**d.env, "ENGRAM_PYTHON": "/nonexistent"}  # the hooks must not start the daemon behind the test
    r = run_hook("PostToolUseFailure", bash_fail("sess-spool", proj), env)
    assert r.returncode == 0 and r.stdout == b""
    r = run_hook("PostToolUse", write_event("sess-spool", proj, "src/s.py", True), env)
    files = list((d.home / "spool").glob("*.jsonl"))
    assert len(files) == 2
    text = "".join(f.read_text() for f in files)
    assert SECRET not in text and "[REDACTED:" in text
    for f in files:
        assert oct(os.stat(f).st_mode & 0o777) == "0o600"
    for folder in (d.home, d.home / "spool", d.home / "spool" / "tmp"):
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700", folder
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


def test_daemon_starts_on_a_spool_an_older_hook_left_open(tmp_path: Path) -> None:
    """An older hook created spool/ with the umask's mode (0755): the daemon tightens it and drains it."""
    d = DaemonProc(tmp_path / "home", model=False)
    proj = new_project(tmp_path, "oldspool")
    env = {**d.env, "ENGRAM_PYTHON": "/nonexistent"}
    assert run_hook("PostToolUse", write_event("sess-old", proj, "src/o.py", True), env).returncode == 0
    os.chmod(d.home / "spool", 0o755)
    try:
        d.start()
        assert len(session_memories(d, "sess-old", proj)) == 1
        assert oct(os.stat(d.home / "spool").st_mode & 0o777) == "0o700"
    finally:
        d.stop()


# ── real payloads, captured from Claude Code 2.1.197 (`claude -p`, mock model): tests/data/claude_code/ ────────
PAYLOADS = Path(__file__).parent / "data" / "claude_code"
CAPTURED_CWD = "/tmp/capproj5bo0ro92"
CAPTURED_SESSION = "d7973bf0-846d-4d38-8afb-0987b557d37e"


def captured(session: str, project: Path) -> list[tuple[str, dict]]:
    """The captured session's events in order, moved to this session id and project directory."""
    out = []
    for f in sorted(PAYLOADS.glob("*.json")):
        text = f.read_text().replace(CAPTURED_CWD, str(project)).replace(CAPTURED_SESSION, session)
        data = json.loads(text)
        out.append((data["hook_event_name"], data))
    return out


def project_memories(d: DaemonProc, project: Path, **filters: object) -> list[dict]:
    c = d.client()
    try:
        c.call("flush", timeout_s=60)
        return c.call("list_memories", scope="project", project=str(project), limit=500, **filters)["items"]
    finally:
        c.close()


def test_a_real_session_learns_a_fix_an_instruction_and_a_summary_that_the_next_session_gets(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    """The captured session: a success whose output says "Traceback", `python3 check.py` failing, check.py written
    and edited, `python3 check.py` succeeding; its prompt says "From now on always run the tests with -x"."""
    proj = new_project(tmp_path, "learner")
    sid = "sess-learn-1"
    for name, payload in captured(sid, proj):
        r = run_hook(name, payload, env)
        assert r.returncode == 0 and r.stderr == b"", (name, r.stderr)
        if name == "SessionStart":
            ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
            assert "mcp__plugin_engram_engram__store_memory" in ctx and "may be stale" in ctx
        if name == "PostToolUse" and payload["tool_name"] == "Write":
            # Mid-session: the successful "Traceback" output was not stored as a failure; the real failure was.
            mems = session_memories(daemon, sid, proj)
            failures = [m for m in mems if "error" in m["tags"]]
            assert [m["metadata"]["command"] for m in failures] == ["python3 check.py"]
            assert "ValueError: boom" not in json.dumps(mems)
    learned = project_memories(daemon, proj)
    by_tag = {
        t: [m for m in learned if t in m["tags"]] for t in ("fix", "user-instruction", "session-summary")
    }
    assert len(by_tag["fix"]) == 1, learned
    fix = by_tag["fix"][0]
    assert fix["memory_type"] == "procedural" and fix["importance"] == 0.8
    assert fix["content"].startswith("`python3 check.py` failed with python3: can't open file")
    assert "fixed by editing check.py" in fix["content"]
    assert [m["content"] for m in by_tag["user-instruction"]] == [
        "User instruction: From now on always run the tests with -x."
    ]
    assert "Fix check.py please" not in json.dumps(
        by_tag["user-instruction"]
    )  # chatter is not an instruction
    assert len(by_tag["session-summary"]) == 1
    summary = by_tag["session-summary"][0]["content"]
    assert 'goal: "From now on always run the tests with -x. Fix check.py please."' in summary
    assert "files touched: check.py (new)" in summary and "failures fixed: `python3 check.py`" in summary
    # Raw per-edit captures stayed session evidence: not promoted under the seeds' rule (0.3-0.6, never accessed).
    assert not [m for m in learned if "file-change" in m["tags"] or "error" in m["tags"]]
    c = daemon.client()
    assert sid not in [s["claude_session_id"] for s in c.call("list_sessions")]
    c.close()

    # The next session starts with what the first one learned.
    r = run_hook("SessionStart", {**base("sess-learn-2", proj, "SessionStart"), "source": "startup"}, env)
    ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "## Recent sessions" in ctx and "files touched: check.py (new)" in ctx
    assert "## Instructions from the user" in ctx and "always run the tests with -x" in ctx
    assert "## Fixes and procedures" in ctx and "fixed by editing check.py" in ctx
    assert "Modified check.py" not in ctx  # evidence is rolled into the summary, not listed per edit
    run_hook("SessionEnd", {**base("sess-learn-2", proj, "SessionEnd"), "reason": "other"}, env)


def test_a_fix_by_another_command_and_a_repeat_failure_make_one_memory(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "fixer")
    sid = "sess-fix-2"
    fail = {
        **base(sid, proj, "PostToolUseFailure"),
        "tool_name": "Bash",
        "tool_input": {"command": "pytest tests/test_api.py"},
        "error": "Exit code 1\nE   ModuleNotFoundError: No module named 'requests'\n1 error in 0.1s",
    }
    ok = {
        **base(sid, proj, "PostToolUse"),
        "tool_name": "Bash",
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False, "isImage": False},
    }
    for name, payload in (
        ("PostToolUseFailure", fail),
        ("PostToolUseFailure", fail),
        ("PostToolUse", {**ok, "tool_input": {"command": "ls tests"}}),
        ("PostToolUse", {**ok, "tool_input": {"command": "pip install requests"}}),
        ("PostToolUse", {**ok, "tool_input": {"command": "pytest tests/test_api.py -x"}}),
        ("PostToolUse", {**ok, "tool_input": {"command": "pytest tests/test_api.py"}}),
    ):
        assert run_hook(name, payload, env).returncode == 0
    fixes = [m for m in project_memories(daemon, proj) if "fix" in m["tags"]]
    assert len(fixes) == 1, fixes
    assert fixes[0]["content"] == (
        "`pytest tests/test_api.py` failed with ModuleNotFoundError: No module named 'requests'; fixed by running "
        "`ls tests`, `pip install requests`; then `pytest tests/test_api.py -x` succeeded."
    )
    assert (
        fixes[0]["metadata"]["fixed_command"] == "pytest tests/test_api.py -x"
    )  # the later re-run added nothing
    run_hook("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "other"}, env)


def test_successes_are_not_sent_unless_the_session_has_a_failure(tmp_path: Path) -> None:
    """No daemon: whatever a hook sends is spooled, so the spool shows exactly what was sent."""
    home = tmp_path / "home"
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_PYTHON": "/nonexistent"}
    proj = new_project(tmp_path, "quiet")
    events = dict(captured("sess-quiet", proj)[2:4])  # the "Traceback" success, then the failure
    run_hook("PostToolUse", {**events["PostToolUse"]}, env)
    assert not list((home / "spool").glob("*.jsonl"))
    run_hook("PostToolUseFailure", events["PostToolUseFailure"], env)
    run_hook("PostToolUse", events["PostToolUse"], env)
    sent = [json.loads(f.read_text()) for f in sorted((home / "spool").glob("*.jsonl"))]
    assert [e["kind"] for e in sent] == ["memory", "command_ok"]
    assert sent[0]["memory"]["content"].startswith(
        "Command failed: python3 check.py → python3: can't open file"
    )


PEM_BODY = [("MIIEowIBAAKCAQEA" + "x" * 48)[:64]] + [("QmFzZTY0" + str(i) * 56)[:64] for i in range(24)]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"


def test_secrets_are_redacted_whole_before_anything_is_cut_or_joined(tmp_path: Path) -> None:
    """A 26-line PEM key in a failure's output: the hook used to keep the last 6 lines joined with " | " and
    redact after, so the key's body was stored. Every event kind is checked, on the spool (what leaves the hook)."""
    home = tmp_path / "home"
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_PYTHON": "/nonexistent"}
    proj = new_project(tmp_path, "pem")
    sid = "sess-pem"
    run_hook(
        "PostToolUseFailure",
        {
            **base(sid, proj, "PostToolUseFailure"),
            "tool_name": "Bash",
            "tool_input": {"command": "cat id_rsa && false"},
            "error": f"Exit code 1\n{PEM}\nerror: the key is not accepted",
        },
        env,
    )
    run_hook(
        "PostToolUse",
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "Bash",
            "tool_input": {"command": f"cat id_rsa # {SECRET}"},
            "tool_response": {"stdout": PEM, "stderr": ""},
        },
        env,
    )
    run_hook(
        "PostToolUse",
        {
            **base(sid, proj, "PostToolUse"),
            "tool_name": "Edit",
            "tool_input": {
                "file_path": str(proj / "key.pem"),
                "old_string": PEM,
                "new_string": f'token = "{SECRET}"',
            },
            "tool_response": {"filePath": str(proj / "key.pem")},
        },
        env,
    )
    run_hook(
        "UserPromptSubmit",
        {
            **base(sid, proj, "UserPromptSubmit"),
            "prompt": f"never paste keys like this again:\n{PEM}\nor {SECRET}",
        },
        env,
    )
    text = "".join(f.read_text() for f in sorted((home / "spool").glob("*.jsonl")))
    assert text.count('"kind"') == 4
    assert "[REDACTED:" in text
    for line in [*PEM_BODY, SECRET]:
        assert line not in text
        assert line[-20:] not in text  # not even a tail of a line


def test_session_summary_written_by_the_agent_is_kept_over_the_automatic_one(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "summarised")
    sid = "sess-agent-summary"
    run_hook("SessionStart", base(sid, proj, "SessionStart"), env)
    run_hook(
        "UserPromptSubmit", {**base(sid, proj, "UserPromptSubmit"), "prompt": "add the export command"}, env
    )
    run_hook("PostToolUse", write_event(sid, proj, "src/export.py", True), env)
    c = daemon.client()
    first = c.call("session_summary", session=sid, summary="Export: draft", project=str(proj))
    second = c.call(
        "session_summary",
        session=sid,
        summary=f"Added `engram export` (src/export.py); tests still to write. [x] [/] \\ 🚀 {SECRET}",
        project=str(proj),
    )
    assert second["id"] == first["id"]  # replaced, not a second summary
    with pytest.raises(Exception, match="empty"):
        c.call("session_summary", session=sid, summary="  ", project=str(proj))
    c.close()
    run_hook("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "exit"}, env)
    summaries = project_memories(daemon, proj, tag="session-summary")
    assert len(summaries) == 1
    s = summaries[0]
    assert s["content"].startswith(
        "Added `engram export` (src/export.py); tests still to write. [x] [/] \\ 🚀"
    )
    assert SECRET not in s["content"] and "agent-written" in s["tags"]
    assert s["metadata"]["auto"]["files"] == ["src/export.py"]  # the automatic facts, beside the agent's text


def test_an_empty_session_stores_no_summary(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "idle")
    run_hook("SessionStart", base("sess-idle", proj, "SessionStart"), env)
    run_hook("SessionEnd", {**base("sess-idle", proj, "SessionEnd"), "reason": "exit"}, env)
    assert project_memories(daemon, proj) == []


# ── what Claude Code waits for (hooks/run_hook.py) ─────────────────────────────
class HeldDaemon:
    """A stand-in daemon socket that takes every connection at once, records each hook_event and answers only once
    told to: it shows which hook processes exit before their event is answered, in which order the events arrive
    and how many were ever waiting for an answer at the same time."""

    def __init__(self, home: Path) -> None:
        import socket
        import threading

        home.mkdir(mode=0o700, parents=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(home / "engram.sock"))
        self.server.listen(16)
        self.server.settimeout(30)
        self.go = threading.Event()
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.waiting = self.most_waiting = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        import threading

        try:
            while True:
                conn, _ = self.server.accept()
                threading.Thread(target=self.answer, args=(conn,), daemon=True).start()
        except OSError:
            return

    def answer(self, conn: object) -> None:
        with conn:  # type: ignore[attr-defined]
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = conn.recv(65536)  # type: ignore[attr-defined]
                if not chunk:
                    return
                buf += chunk
            with self.lock:
                self.events.append(json.loads(buf)["params"]["event"])
                self.waiting += 1
                self.most_waiting = max(self.most_waiting, self.waiting)
            self.go.wait(30)
            with self.lock:
                self.waiting -= 1
            conn.sendall(b'{"v": 1, "id": 1, "ok": true, "result": {"accepted": true}}\n')  # type: ignore[attr-defined]


def test_the_entry_exits_before_the_daemon_answers_and_keeps_a_sessions_order(tmp_path: Path) -> None:
    """hooks.json runs run_hook.py: for a capture or a SessionEnd it exits once it has read the event, and a
    detached child delivers it, so the agent never waits on the daemon. A session's events still arrive one at a
    time in the order the hooks ran (a failure before the command that fixed it, captures before SessionEnd)."""
    home = tmp_path / "home"
    daemon = HeldDaemon(home)
    proj = new_project(tmp_path, "detached")
    sid = "sess-detached"
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_PYTHON": "/nonexistent", "HOME": str(tmp_path)}
    sequence = [
        ("PostToolUseFailure", bash_fail(sid, proj)),
        (
            "PostToolUse",
            {
                **base(sid, proj, "PostToolUse"),
                "tool_name": "Bash",
                "tool_input": {"command": "pip install requests"},
                "tool_response": {"stdout": "ok", "stderr": ""},
            },
        ),
        ("PostToolUse", write_event(sid, proj, "src/a.py", True)),
        ("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "other"}),
    ]
    for name, payload in sequence:
        r = subprocess.run(
            [PYTHON3, "-S", str(HOOK_ENTRY), name],
            input=json.dumps(payload).encode(),
            env=env,
            capture_output=True,
            timeout=30,
        )
        assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    # Every hook has exited and the daemon has answered nothing yet; the later events wait for the first.
    daemon.go.set()
    wait_for_hook_children(home, [sid])
    assert daemon.most_waiting == 1
    assert [(e["hook"], e["kind"]) for e in daemon.events] == [
        ("PostToolUseFailure", "memory"),
        ("PostToolUse", "command_ok"),
        ("PostToolUse", "memory"),
        ("SessionEnd", "session_end"),
    ]
    assert SECRET not in json.dumps(daemon.events)
    assert not (home / "spool").exists() or not list((home / "spool").glob("*.jsonl"))
    assert (home / "hookstate" / f"{sid}.lock").read_text().split() == ["4", "4"]
    assert oct(os.stat(home / "hookstate").st_mode & 0o777) == "0o700"


def test_the_entry_answers_in_process_when_the_agent_needs_the_answer(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    """SessionStart and UserPromptSubmit with prompt recall on print context, so run_hook.py does not detach."""
    proj = new_project(tmp_path, "inproc")
    c = daemon.client()
    c.call(
        "store",
        memory={"content": "the deploy script lives in ops/deploy.sh", "importance": 0.9},
        project=str(proj),
    )
    c.close()
    r = run_hook("SessionStart", {**base("sess-inproc", proj, "SessionStart"), "source": "startup"}, env)
    assert "ops/deploy.sh" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    payload = {**base("sess-inproc", proj, "UserPromptSubmit"), "prompt": "where is the deploy script?"}
    assert run_hook("UserPromptSubmit", payload, env).stdout == b""  # recall off: detached, nothing printed
    (proj / ".claude").mkdir(exist_ok=True)
    (proj / ".claude" / "engram.local.md").write_text("---\nprompt_recall: true\n---\n")
    r = run_hook("UserPromptSubmit", payload, env)  # found from the event's cwd, not the hook's own
    assert "ops/deploy.sh" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]


def test_each_prompt_does_what_a_stop_hook_did(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    """hooks.json registers no Stop or SubagentStop hook (one process fewer per turn): each turn's prompt touches
    the session (what the stale-session pass reads) and schedules the after-turn pass instead."""
    spec = json.loads((HOOK_ENTRY.parent / "hooks.json").read_text())
    assert not {"Stop", "SubagentStop"} & set(spec["hooks"])
    proj = new_project(tmp_path, "turns")
    sid = "sess-turns"

    def last_seen() -> str:
        c = daemon.client()
        try:
            c.call("flush", timeout_s=60)
            out = c.call(
                "run_query",
                surql="SELECT VALUE last_seen_at FROM session_registry:self",
                scope="session",
                session=sid,
                project=str(proj),
            )
            return str(out["statements"][0]["rows"][0])
        finally:
            c.close()

    run_hook("UserPromptSubmit", {**base(sid, proj, "UserPromptSubmit"), "prompt": "add a health check"}, env)
    first = last_seen()
    run_hook("UserPromptSubmit", {**base(sid, proj, "UserPromptSubmit"), "prompt": "now the docs"}, env)
    assert last_seen() > first
    run_hook("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "other"}, env)


# ── the hook script on old interpreters ──────────────────────────────────────
HOOK_FILES = [
    HOOK_SCRIPT,
    HOOK_ENTRY,
    *sorted((HOOK_SCRIPT.parent.parent / "engram_core" / "redaction").glob("*.py")),
]


def _runtime_pep604_585(tree: ast.AST) -> list[str]:
    """`X | Y` on types and `list[...]`-style subscripts outside annotations: these run on 3.8/3.9 and fail."""
    annotations: set[int] = set()
    for node in ast.walk(tree):
        for ann in ([node.returns] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else []) + (
            [node.annotation] if isinstance(node, ast.arg | ast.AnnAssign) else []
        ):
            if ann is not None:
                annotations.update(id(n) for n in ast.walk(ann))
    builtins_ = {"list", "dict", "tuple", "set", "frozenset", "type"}
    bad = []
    for node in ast.walk(tree):
        if id(node) in annotations:
            continue
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in builtins_
        ):
            bad.append(f"line {node.lineno}: {node.value.id}[...]")
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitOr)
            and any(
                isinstance(side, ast.Name)
                and (
                    side.id in builtins_
                    or side.id[:1].isupper()
                    or side.id in ("str", "int", "float", "bool", "bytes", "None")
                )
                for side in (node.left, node.right)
            )
        ):
            bad.append(f"line {node.lineno}: X | Y")
    return bad


@pytest.mark.parametrize("path", HOOK_FILES, ids=lambda p: p.name)
def test_hook_code_is_python_38_compatible(path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    assert "from __future__ import annotations" in source  # annotations are never evaluated
    assert _runtime_pep604_585(tree) == []
    import vermin  # dev dependency: the minimum version from the whole syntax and library use

    _py2, py3 = vermin.detect(source, path=str(path))  # e.g. str.removeprefix or zoneinfo -> (3, 9)
    assert py3 is not None and py3 <= (3, 8), f"{path.name} needs Python {py3}"


def _old_pythons() -> list[str]:
    found = []
    for v in ("3.8", "3.9"):
        found += sorted(
            glob.glob(f"/root/.pyenv/versions/{v}.*/bin/python3")
            + glob.glob(os.path.expanduser(f"~/.pyenv/versions/{v}.*/bin/python3"))
        )[:1]
        found += [p for p in (f"/usr/bin/python{v}", f"/usr/local/bin/python{v}") if os.path.isfile(p)]
    return list(dict.fromkeys(found))


def test_hook_runs_silently_on_the_oldest_python3_found(tmp_path: Path) -> None:
    """The real thing where an old interpreter is installed (pyenv on the dev machines); the AST/vermin test
    above holds everywhere."""
    pythons = _old_pythons()
    if not pythons:
        pytest.skip("no python3.8/3.9 interpreter on this machine (the AST and vermin checks still ran)")
    proj = new_project(tmp_path, "old")
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_PYTHON": "/nonexistent"}
    for python in pythons:
        for name, payload in captured("sess-old", proj):
            r = run_hook(name, payload, env, python=python)
            assert r.returncode == 0 and r.stderr == b"", (python, name, r.stderr.decode())
    kinds = sorted(json.loads(f.read_text())["kind"] for f in (tmp_path / "home" / "spool").glob("*.jsonl"))
    assert kinds == sorted(
        ["prompt", "memory", "memory", "memory", "command_ok", "stop", "session_end"] * len(pythons)
    )
    log = (tmp_path / "home" / "hooks.log").read_text()
    assert "crash" not in log and "redaction-unavailable" not in log


# ── a brand-new ENGRAM_HOME ──────────────────────────────────────────────────
LOG_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}) (\S+) ([a-z-]+): (.+)$")


def test_a_new_home_without_launcher_json_still_starts_the_daemon(tmp_path: Path) -> None:
    """No launcher.json, no ENGRAM_PYTHON: the hook finds an interpreter with Engram through the `engram` command
    on PATH (its shebang), starts the daemon and injects context."""
    home = tmp_path / "newhome"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "engram").write_text(f"#!{sys.executable}\nfrom engram_core.cli import main\nmain()\n")
    (bin_dir / "engram").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_PYTHON"}
    env.update(
        ENGRAM_HOME=str(home),
        HOME=str(tmp_path),
        PATH=f"{bin_dir}:/usr/bin:/bin",
        ENGRAM_EMBEDDING_PROVIDER="none",
        ENGRAM_DAEMON_IDLE_TIMEOUT_S="120",
    )
    proj = new_project(tmp_path, "fresh")
    d = DaemonProc(home, model=False)
    payload = {**base("sess-new", proj, "SessionStart"), "source": "startup"}
    try:
        r = run_hook("SessionStart", payload, env)
        assert r.returncode == 0 and r.stderr == b""
        if (
            not r.stdout
        ):  # a loaded machine: the daemon was not up within the hook's 8 s, and the hook said so
            assert "SessionStart daemon-not-ready:" in (home / "hooks.log").read_text()
            deadline = time.monotonic() + 120
            while not d.answers():
                assert time.monotonic() < deadline, "the daemon the hook started never came up"
                time.sleep(0.1)
            r = run_hook("SessionStart", payload, env)
        assert "Memory protocol" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
        assert (home / "launcher.json").exists()  # written by the daemon the hook started
    finally:
        d.stop()
    log = (home / "hooks.log").read_text() if (home / "hooks.log").exists() else ""
    assert "no-daemon-python" not in log and "daemon-start-failed" not in log


def test_no_interpreter_found_is_logged_with_a_reason(tmp_path: Path) -> None:
    """The hook alone (a plugin copy without a .venv), no engram on PATH, nothing recorded: one parseable line."""
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    (plugin / "engram_core").mkdir()
    shutil.copy(HOOK_SCRIPT, plugin / "hooks")
    shutil.copytree(
        HOOK_SCRIPT.parent.parent / "engram_core" / "redaction",
        plugin / "engram_core" / "redaction",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_PYTHON"}
    env.update(ENGRAM_HOME=str(home), HOME=str(tmp_path), PATH="/usr/bin:/bin")
    r = subprocess.run(
        [PYTHON3, "-S", str(plugin / "hooks" / "engram_hook.py"), "SessionStart"],
        input=json.dumps(base("sess-none", tmp_path, "SessionStart")).encode(),
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    lines = (home / "hooks.log").read_text().splitlines()
    assert len(lines) == 1
    m = LOG_LINE.match(lines[0])
    assert m and m.group(2) == "SessionStart" and m.group(3) == "no-daemon-python"
    assert "ENGRAM_PYTHON" in m.group(4)
    from engram_core.cli.agent_setup import last_hook_error  # what `engram doctor` shows

    step = last_hook_error(home)
    assert not step.ok and "SessionStart no-daemon-python: cannot start the daemon" in step.detail


# ── pieces ───────────────────────────────────────────────────────────────────
def test_instructions_are_told_apart_from_chatter() -> None:
    from engram_core.integrations.claude_code.session_learning import instructions_in

    prompt = (
        "Fix the login bug. Always run `ruff` before committing! never push to main; "
        "From now on, use pathlib.\nplease don't add new dependencies\nDon't worry about the docs. "
        "Prefer small commits. Should we always do this? We use uv from now on"
    )
    assert instructions_in(prompt) == [
        "Always run `ruff` before committing!",
        "never push to main.",
        "From now on, use pathlib.",
        "please don't add new dependencies.",
        "Prefer small commits.",
        "We use uv from now on.",
    ]
    assert instructions_in("Can you look at the failing test") == []


def test_the_skill_is_the_injected_protocol() -> None:
    from engram_core.integrations.claude_code.memory_protocol import PROTOCOL, SKILL_PATH, skill_markdown

    assert (
        SKILL_PATH.read_text(encoding="utf-8") == skill_markdown()
    )  # else: python -m engram_core.integrations.claude_code.memory_protocol --write
    assert skill_markdown().endswith(PROTOCOL)
    for tool in ("recall_memories", "store_memory", "session_summary", "forget_memory"):
        assert f"`mcp__plugin_engram_engram__{tool}`" in PROTOCOL


def test_a_huge_write_keeps_its_line_count_and_shows_no_text(tmp_path: Path) -> None:
    """Beyond 200 000 characters the content is dropped whole (never cut, then redacted): only its size is kept."""
    home = tmp_path / "home"
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_PYTHON": "/nonexistent"}
    proj = new_project(tmp_path, "huge")
    content = f'token = "{SECRET}"\n' + "x = 1\n" * 40_000
    run_hook(
        "PostToolUse",
        {
            **base("sess-huge", proj, "PostToolUse"),
            "tool_name": "Write",
            "tool_input": {"file_path": str(proj / "big.py"), "content": content},
            "tool_response": {"type": "create", "filePath": str(proj / "big.py")},
        },
        env,
    )
    [event] = [json.loads(f.read_text()) for f in (home / "spool").glob("*.jsonl")]
    assert event["memory"]["content"] == "Modified big.py: created (40001 lines)"
    assert SECRET not in json.dumps(event)


# ── the SessionStart context, in process (the same service the daemon runs) ──
def test_session_start_context_sections_budget_and_what_is_left_out(service, project_dir: Path) -> None:  # noqa: ANN001
    from datetime import timedelta

    from engram_core.models import MemoryIn

    p = str(project_dir)
    service.store(
        MemoryIn(content="barely alive: the old staging host was tarragon", importance=0.08), project=p
    )
    service.store(
        MemoryIn(
            content="Modified src/a.py: replaced 1 line(s) with 1",
            scope="project",
            tags=["src/a.py", "file-change"],
            importance=0.95,
        ),
        project=p,
    )  # evidence, even promoted
    service.store(MemoryIn(content="the API is served by uvicorn on port 8081", importance=0.7), project=p)
    service.store(
        MemoryIn(
            content="User instruction: never commit generated files.",
            memory_type="procedural",
            tags=["user-instruction"],
            importance=0.9,
        ),
        project=p,
    )
    service.store(
        MemoryIn(
            content="`make` failed with missing gcc; fixed by running `apt install gcc`.",
            memory_type="procedural",
            tags=["fix"],
            importance=0.8,
        ),
        project=p,
    )
    service.store(
        MemoryIn(content="the user writes British English", scope="user", importance=0.8), project=p
    )
    for i in range(5):
        r = service.store(
            MemoryIn(
                content=f'Session of day {i}: goal: "step {i}".',
                memory_type="episodic",
                tags=["session-summary"],
                importance=0.6,
                created_at=service.now() - timedelta(days=10 - i),
            ),
            project=p,
        )
        assert r.action == "created"
    prev = service.injection_context(project=p, budget=2000)
    text = prev.text
    assert (
        text.index("Memory protocol")
        < text.index("## Recent sessions")
        < text.index("## Instructions from the user")
        < text.index("## Fixes and procedures")
        < text.index("## Project")
        < text.index("## User")
    )
    recent = text.split("## Recent sessions\n")[1].split("\n## ")[0].splitlines()
    assert [ln.split("step ")[1][0] for ln in recent] == [
        "4",
        "3",
        "2",
    ]  # the last three, newest first, decayed or not
    assert "tarragon" not in text and "Modified src/a.py" not in text
    assert "uvicorn" in text and "never commit generated files" in text and "apt install gcc" in text
    assert "British English" in text
    small = service.injection_context(project=p, budget=260)
    assert small.tokens <= 260 and "Memory protocol" in small.text


def test_session_start_registers_the_session_once_after_answering(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "registered")
    for source in ("startup", "resume"):  # a resumed session is the same session
        r = run_hook("SessionStart", {**base("sess-reg", proj, "SessionStart"), "source": source}, env)
        assert r.returncode == 0 and "Memory protocol" in r.stdout.decode()
    c = daemon.client()
    c.call("flush", timeout_s=60)
    mine = [s for s in c.call("list_sessions") if s["claude_session_id"] == "sess-reg"]
    c.call("end_session", session="sess-reg")
    c.close()
    assert len(mine) == 1 and mine[0]["project_root"] == str(proj)


def test_hostile_prompt_text_is_learned_safely(daemon: DaemonProc, env: dict, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "hostile")
    sid = "sess-hostile"
    prompt = (
        f"Tidy [bold]x[/] up\u2028please.\x07 From now on prefer `[x]` over [/] and \\\\ paths 🚀 "
        f"with token {SECRET}\u2029Never delete\x1f data/\r\nthanks"
    )
    assert (
        run_hook(
            "UserPromptSubmit", {**base(sid, proj, "UserPromptSubmit"), "prompt": prompt}, env
        ).returncode
        == 0
    )
    got = sorted(m["content"] for m in project_memories(daemon, proj, tag="user-instruction"))
    assert got == [
        "User instruction: From now on prefer `[x]` over [/] and \\\\ paths 🚀 with token "
        "[REDACTED:github_token].",
        "User instruction: Never delete data/.",
    ], got
    r = run_hook("SessionStart", {**base("sess-hostile-2", proj, "SessionStart"), "source": "startup"}, env)
    ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    lines = [ln for ln in ctx.split("\n") if "User instruction" in ln]
    assert lines and SECRET not in ctx
    assert not any(ch in ln for ln in lines for ch in "\u2028\u2029\x1c\x85\r")  # one memory, one line
    for s in (sid, "sess-hostile-2"):
        run_hook("SessionEnd", {**base(s, proj, "SessionEnd"), "reason": "other"}, env)


def test_terminal_colours_and_control_characters_are_cleaned_from_failures(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_PYTHON": "/nonexistent"}
    proj = new_project(tmp_path, "colours")
    run_hook(
        "PostToolUseFailure",
        {
            **base("sess-ansi", proj, "PostToolUseFailure"),
            "tool_name": "Bash",
            "tool_input": {"command": "pytest\x07 -q"},
            "error": "Exit code 1\n\x1b[1m\x1b[31mE   ModuleNotFoundError: No module named "
            "'x'\x1b[0m\r\n\x1b[31m1 failed\x1b[0m in 0.1s\u2028done",
        },
        env,
    )
    [event] = [json.loads(f.read_text()) for f in (home / "spool").glob("*.jsonl")]
    memory = event["memory"]
    assert memory["metadata"]["error"] == "ModuleNotFoundError: No module named 'x'"
    assert memory["metadata"]["command"] == "pytest -q"
    assert memory["content"] == (
        "Command failed: pytest -q → E ModuleNotFoundError: No module named 'x' | 1 failed in 0.1s | done"
    )


def test_an_unfixed_failure_keeps_a_bounded_number_of_later_commands(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    from engram_core.integrations.claude_code.session_learning import MAX_EVIDENCE_COMMANDS

    proj = new_project(tmp_path, "unfixed")
    sid = "sess-unfixed"
    run_hook(
        "PostToolUseFailure",
        {
            **base(sid, proj, "PostToolUseFailure"),
            "tool_name": "Bash",
            "tool_input": {"command": "cargo build"},
            "error": "Exit code 101\nerror: boom",
        },
        env,
    )
    for i in range(MAX_EVIDENCE_COMMANDS + 3):
        run_hook(
            "PostToolUse",
            {
                **base(sid, proj, "PostToolUse"),
                "tool_name": "Bash",
                "tool_input": {"command": f"echo step {i}"},
                "tool_response": {"stdout": f"step {i}", "stderr": ""},
            },
            env,
        )
    kept = [m for m in session_memories(daemon, sid, proj) if "command-ok" in m["tags"]]
    assert len(kept) == MAX_EVIDENCE_COMMANDS
    run_hook("SessionEnd", {**base(sid, proj, "SessionEnd"), "reason": "other"}, env)
    summary = project_memories(daemon, proj, tag="session-summary")
    assert len(summary) == 1 and "still failing at the end: `cargo build`" in summary[0]["content"]


def test_a_session_ended_without_its_hook_leaves_no_failure_marker(
    daemon: DaemonProc, env: dict, tmp_path: Path
) -> None:
    """Stale-session recovery (a crashed Claude Code) ends sessions through end_session, not the SessionEnd hook."""
    proj = new_project(tmp_path, "crashed")
    sid = "sess-crashed"
    run_hook(
        "PostToolUseFailure",
        {
            **base(sid, proj, "PostToolUseFailure"),
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
            "error": "Exit code 2\nmake: *** Error 2",
        },
        env,
    )
    marker = daemon.home / "hookstate" / sid
    assert marker.exists()
    c = daemon.client()
    c.call("flush", timeout_s=60)
    c.call("end_session", session=sid, reason="recovered")
    c.close()
    assert not marker.exists()


def test_hooks_log_lines_are_redacted_before_they_are_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hooks.log details quote commands and daemon errors: a secret in one never reaches the file."""
    import importlib.util

    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path))
    spec = importlib.util.spec_from_file_location("engram_hook_under_test", HOOK_SCRIPT)
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    secret = "ghp_" + "Z" * 36
    hook.log_problem("PostToolUse", "spooled", "x" * 1900 + f" export GITHUB_TOKEN={secret}")
    text = (tmp_path / "hooks.log").read_text()
    assert secret[:12] not in text and "spooled" in text
