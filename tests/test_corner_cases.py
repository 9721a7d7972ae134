"""Corner cases of issue #29 item 9, through what a user runs: the hook, `engram`, the daemon."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import HOOK_ENTRY, DaemonProc, new_project, wait_for_hook_children

PYTHON3 = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


def _umask0() -> None:
    os.umask(0)


def engram(
    env: dict, *args: str, cwd: Path | None = None, umask0: bool = False
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engram_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd) if cwd else None,
        env=env,
        preexec_fn=_umask0 if umask0 else None,
    )


def test_every_file_engram_creates_is_owner_only_even_under_umask_000(tmp_path: Path) -> None:
    """The hook starts the daemon (its `starting` marker, the log, the spool), the CLI stores and stops it: every
    file and folder in the data root is owner-only, with the umask at 000."""
    home = tmp_path / "home"
    proj = new_project(tmp_path, "umaskproj")
    d = DaemonProc(home, model=False)
    env = {**d.env, "ENGRAM_PYTHON": sys.executable}
    event = {
        "session_id": "sess-umask",
        "transcript_path": "/tmp/sess-umask.jsonl",
        "cwd": str(proj),
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "pytest", "description": "run tests"},
        "error": "Exit code 1\nE   ModuleNotFoundError: No module named 'requests'",
        "is_interrupt": False,
    }
    try:
        r = subprocess.run(
            [PYTHON3, "-S", str(HOOK_ENTRY), "PostToolUseFailure"],
            input=json.dumps(event).encode(),
            env=env,
            capture_output=True,
            timeout=30,
            preexec_fn=_umask0,
        )
        assert r.returncode == 0, r.stderr
        wait_for_hook_children(home, ["sess-umask"])
        assert (home / "starting").exists()
        deadline = time.monotonic() + 60
        while not d.answers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert d.answers(), (home / "engram.log").read_text() if (home / "engram.log").exists() else "no log"
        p = engram(env, "store", "the umask is 000 here", "--json", cwd=proj, umask0=True)
        assert p.returncode == 0, p.stderr
    finally:
        engram(env, "stop")
        d.stop()
    loose = []
    for root in (home, proj / ".claude"):
        for dirpath, dirs, files in os.walk(root):
            for name in [*dirs, *files, ""]:
                path = os.path.join(dirpath, name) if name else dirpath
                mode = os.lstat(path).st_mode
                if stat.S_IMODE(mode) & 0o077 and not stat.S_ISSOCK(mode):
                    loose.append(f"{path} {oct(stat.S_IMODE(mode))}")
    assert loose == []


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o755, 0o750])
@pytest.mark.parametrize("empty", [True, False])
def test_a_data_root_engram_did_not_create_is_refused_whatever_its_mode(
    tmp_path: Path, mode: int, empty: bool
) -> None:
    shared = tmp_path / "given"
    shared.mkdir()
    if not empty:
        (shared / "notes.txt").write_text("someone's file")
    shared.chmod(mode)
    env = {**os.environ, "ENGRAM_HOME": str(shared), "ENGRAM_EMBEDDING_PROVIDER": "none"}
    p = engram(env, "stats", cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "Engram did not create it" in p.stderr and oct(mode) in p.stderr, p.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == mode  # never chmodded
    assert sorted(os.listdir(shared)) == ([] if empty else ["notes.txt"])  # nothing written in it


def test_a_directory_dropped_into_the_spool_is_moved_aside_once(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False)
    (d.home / "spool").mkdir(parents=True, mode=0o700)
    d.home.chmod(0o700)
    (d.home / "spool" / "odd.jsonl").mkdir()
    (d.home / "spool" / "odd.jsonl" / "inside").write_text("x")
    env = d.env
    try:
        d.start()
        time.sleep(5)  # two spool polls and more
        p = engram(env, "status", "--json")
        info = json.loads(p.stdout)
        assert [e.split(":")[0] for e in info["spool_rejected"]] == ["odd.jsonl"], info
        assert "directory" in info["spool_rejected"][0]
        assert info["spool_waiting"] == 0
        assert (d.home / "spool" / "rejected" / "odd.jsonl" / "inside").read_text() == "x"
        text = engram(env, "status").stdout
        assert "SPOOL entry moved aside" in text and "odd.jsonl" in text
        assert sorted(os.listdir(d.home / "spool")) == ["rejected", "tmp"]  # nothing left to retry
    finally:
        d.stop()


def test_the_hook_and_the_bridge_write_nothing_in_a_foreign_data_root(tmp_path: Path) -> None:
    """The hook (spooling, starting the daemon) and the MCP bridge (starting the daemon) must not create their
    files in a shared directory: one of them (engram.log, spool/) made it look like Engram's, and the daemon then
    chmodded it to 0700."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    proj = new_project(tmp_path, "foreignproj")
    env = {
        **os.environ,
        "ENGRAM_HOME": str(shared),
        "ENGRAM_EMBEDDING_PROVIDER": "none",
        "ENGRAM_PYTHON": sys.executable,
    }
    event = {
        "session_id": "sess-foreign",
        "transcript_path": "/tmp/sess-foreign.jsonl",
        "cwd": str(proj),
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "pytest"},
        "error": "Exit code 1\nE   boom",
        "is_interrupt": False,
    }
    r = subprocess.run(
        [PYTHON3, "-S", str(HOOK_ENTRY), "PostToolUseFailure"],
        input=json.dumps(event).encode(),
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert r.returncode == 0
    time.sleep(3)  # the hook's detached child: it would have spooled and started the daemon by now
    bridge = Path(__file__).resolve().parents[1] / "engram_core" / "mcp" / "bridge.py"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    b = subprocess.run(
        [PYTHON3, "-S", str(bridge)],
        input=json.dumps(init) + "\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(proj),
    )
    answer = json.loads(b.stdout.splitlines()[0])
    assert "not Engram's data directory" in answer["error"]["message"], b.stdout + b.stderr
    assert os.listdir(shared) == [] and stat.S_IMODE(shared.stat().st_mode) == 0o1777
