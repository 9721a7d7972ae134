"""`engram export` -> `engram import` restores every text exactly, whatever it holds (issue #29, item 5).

Through the CLI against a real daemon: arbitrary Unicode (line separators U+2028/U+2029/U+0085, control
characters, `[/]`, backslashes, emoji) in every text field, in every scope."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import DaemonProc, new_project

# Every character a text may hold (no lone surrogates: they are not text and UTF-8 cannot carry them), with the
# ones that broke line splitting or escaping drawn often.
TRICKY = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e\r\n\t\x00\x7f[/]\\\"'{}😀🚀\u200b\ufeff"
CHAR = st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(TRICKY))
TEXT = st.text(CHAR, min_size=1, max_size=40)
CONTENT = TEXT.filter(lambda s: s.strip())
MEMORY = st.fixed_dictionaries(
    {
        "content": CONTENT,
        "scope": st.sampled_from(["project", "user", "session"]),
        "tags": st.lists(TEXT.filter(lambda s: s.strip() and len(s.strip()) <= 40), max_size=3),
        "metadata": st.dictionaries(TEXT, st.one_of(TEXT, st.lists(TEXT, max_size=2)), max_size=3),
        "source": st.one_of(st.none(), TEXT),
    }
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    d = DaemonProc(tmp_path_factory.mktemp("rt-daemon")).start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """Another machine: a fresh data root (user and session stores) where the backup is restored."""
    d = DaemonProc(tmp_path_factory.mktemp("rt-other")).start()
    yield d
    d.stop()


def engram(daemon: DaemonProc, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engram_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd),
        env=daemon.env,
    )


def _query(daemon: DaemonProc, surql: str, proj: Path) -> dict:
    """The console's query (the TUI and the MCP tool send the same request)."""
    c = daemon.client()
    try:
        return c.call("run_query", surql=surql, scope="project", project=str(proj))
    finally:
        c.close()


def _records(path: Path) -> list[dict]:
    raw = path.read_bytes()
    # a line separator other than \n never appears raw: any reader's line splitting keeps each record whole
    for sep in ("\u2028", "\u2029", "\u0085", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"):
        assert sep.encode() not in raw, f"{sep!r} written raw"
    lines = raw.decode("utf-8").split("\n")
    assert lines[-1] == ""
    return [json.loads(x) for x in lines[:-1]]


def _key(rec: dict) -> str:
    # the project's database and path are where it lives now, not what it holds
    return json.dumps(
        {k: v for k, v in rec.items() if k not in ("database", "project_path")},
        sort_keys=True,
        ensure_ascii=False,
    )


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(memories=st.lists(MEMORY, min_size=1, max_size=6))
def test_any_text_survives_export_then_import(
    daemon: DaemonProc, other: DaemonProc, memories: list[dict]
) -> None:
    base = Path(tempfile.mkdtemp(prefix="rt-"))
    src, dst = new_project(base, "src"), new_project(base, "dst")
    c = daemon.client()
    try:
        session = c.call("start_session", project=str(src), claude_session_id=f"rt-{base.name}")[
            "session_key"
        ]
    finally:
        c.close()
    plain = base / "in.jsonl"
    plain.write_text(
        "".join(
            json.dumps(
                {**m, "memory_type": "working" if m["scope"] == "session" else "semantic"}, ensure_ascii=False
            )
            + "\n"
            for m in memories
        ),
        encoding="utf-8",
    )
    p = engram(daemon, "import", str(plain), "--session", session, "--json", cwd=src)
    assert p.returncode == 0, p.stdout + p.stderr
    first = base / "a.jsonl"
    p = engram(daemon, "export", "-o", str(first), "--json", cwd=src)
    assert p.returncode == 0, p.stderr
    exported = _records(first)
    mine = [r for r in exported if r["scope"] != "user" or r["content"] in {m["content"] for m in memories}]
    for m in memories:  # what was given is what is stored (nothing here looks like a secret)
        assert any(
            r["content"] == m["content"] and r["source"] == m["source"]
            if m["source"]
            else r["content"] == m["content"]
            for r in mine
        ), m["content"]
    p = engram(other, "import", str(first), "--json", cwd=dst)
    report = json.loads(p.stdout)
    assert p.returncode == 0 and not report["failed"], p.stdout + p.stderr
    second = base / "b.jsonl"
    p = engram(other, "export", "-o", str(second), "--json", cwd=dst)
    assert p.returncode == 0, p.stderr
    again = _records(second)
    assert sorted(map(_key, again)) == sorted(map(_key, exported))
    # and every record is written the same way, byte for byte, apart from where the project lives
    same = {r["id"]: r for r in again}
    for r in exported:
        if r["scope"] != "project":
            assert json.dumps(same[r["id"]], ensure_ascii=False) == json.dumps(r, ensure_ascii=False)


def test_a_future_timestamp_is_refused_or_clamped_and_the_store_stays_readable(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    """A created_at a little ahead (a machine whose clock runs fast) is clamped to now; further ahead it is
    refused with its line number and nothing is stored. Either way every read of memory_strength works."""
    proj = new_project(tmp_path, "futureproj")
    now = datetime.now(UTC)
    f = tmp_path / "future.jsonl"
    f.write_text(
        json.dumps(
            {"content": "written by a fast clock", "created_at": (now + timedelta(minutes=3)).isoformat()}
        )
        + "\n"
        + json.dumps({"content": "far ahead", "created_at": (now + timedelta(days=2)).isoformat()})
        + "\n"
    )
    p = engram(daemon, "import", str(f), "--json", cwd=proj)
    report = json.loads(p.stdout)
    assert p.returncode == 1 and report["stored"] == 0 and [x["line"] for x in report["failed"]] == [2]
    assert "future" in report["failed"][0]["error"]
    p = engram(daemon, "import", str(f), "--json", "--skip-bad", cwd=proj)
    assert json.loads(p.stdout)["stored"] == 1
    shown = json.loads(engram(daemon, "export", "--scope", "project", cwd=proj).stdout)
    assert datetime.fromisoformat(shown["created_at"]) <= datetime.now(UTC)
    assert datetime.fromisoformat(shown["last_accessed_at"]) <= datetime.now(UTC)
    q = _query(daemon, "SELECT content, memory_strength FROM memory", proj)
    assert q["ok"], q["message"]
    assert q["statements"][0]["rows"][0]["memory_strength"] > 0
    # An exported record from a fast clock: its times are clamped too, and one far ahead is refused.
    rec = {
        **shown,
        "id": "FUTURE1",
        "content": "restored from a fast clock",
        "content_hash": "x",
        "last_accessed_at": (now + timedelta(minutes=4)).isoformat(),
    }
    far = {**rec, "id": "FUTURE2", "created_at": (now + timedelta(days=1)).isoformat()}
    f.write_text(json.dumps(rec) + "\n" + json.dumps(far) + "\n")
    p = engram(daemon, "import", str(f), "--json", cwd=proj)
    report = json.loads(p.stdout)
    assert p.returncode == 1 and [x["line"] for x in report["failed"]] == [2] and report["stored"] == 0
    assert "future" in report["failed"][0]["error"]
    p = engram(daemon, "import", str(f), "--json", "--skip-bad", cwd=proj)
    assert json.loads(p.stdout)["stored"] == 1
    q = _query(daemon, "SELECT memory_strength FROM memory", proj)
    assert q["ok"] and len(q["statements"][0]["rows"]) == 2, q["message"]
