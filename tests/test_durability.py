"""Issue #13, durability half: forget that forgets, bounded growth, project boundaries, no dropped event,
safe files, clear errors. Each test goes through the real daemon and CLI where the finding was about them."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

from support import REPO_ROOT, DaemonProc, new_project

MARK = "ZEBRAMARK7731"


def engram(
    daemon: DaemonProc, *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engram_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd or REPO_ROOT),
        input=stdin,
        env={**daemon.env, **(env or {})},
    )


def ok_json(p: subprocess.CompletedProcess) -> dict | list:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (the engine's logs and tables included)."""
    raw = needle.encode()
    return [str(f) for f in root.rglob("*") if f.is_file() and raw in f.read_bytes()]


# ── forget ───────────────────────────────────────────────────────────────────
def test_forget_erases_every_copy_of_the_text(light_daemon: DaemonProc, tmp_path: Path) -> None:
    light_daemon.start()
    proj = new_project(tmp_path, "forgetproj")
    c = light_daemon.client()
    mid = c.call(
        "store",
        memory={
            "content": f"the deploy key {MARK} rotates weekly",
            "tags": [MARK.lower()],
            "source": f"note {MARK}",
            "metadata": {"k": MARK},
        },
        project=str(proj),
    )["memory"]["id"]
    keep = c.call("store", memory={"content": "gradle builds need the daemon flag"}, project=str(proj))[
        "memory"
    ]["id"]
    assert files_holding(proj / ".claude" / "engram", MARK)  # the engine wrote it (the premise of the test)
    p = engram(light_daemon, "forget", mid, "--erase", "--yes", "--project", str(proj))
    assert p.returncode == 0, p.stderr
    exported = engram(light_daemon, "export", "--scope", "project", "--project", str(proj))
    assert exported.returncode == 0 and keep in exported.stdout
    assert MARK not in exported.stdout and MARK.lower() not in exported.stdout
    viewer = c.call("run_query", surql="SELECT * FROM memory", scope="project", project=str(proj))
    assert keep in json.dumps(viewer, default=str) and MARK not in json.dumps(viewer, default=str)
    compacted = ok_json(engram(light_daemon, "compact", "--json", "--project", str(proj)))
    assert [s["path"] for s in compacted["stores"]] == [str(proj / ".claude" / "engram" / "project.db")]
    assert files_holding(proj / ".claude" / "engram", MARK) == []
    assert files_holding(proj / ".claude" / "engram", MARK.lower()) == []
    # The store still works after the swap: the kept memory is there, new writes land.
    assert c.call("get", memory_id=keep, project=str(proj))["content"] == "gradle builds need the daemon flag"
    c.call("store", memory={"content": "stored after compaction"}, project=str(proj))
    c.close()
    light_daemon.stop()
    light_daemon.start()
    c = light_daemon.client()
    assert c.call("get", memory_id=mid, project=str(proj))["content"] == "[forgotten]"
    items = c.call("list_memories", project=str(proj), scope="project", limit=10)["items"]
    assert sorted(m["content"] for m in items) == [
        "[forgotten]",
        "gradle builds need the daemon flag",
        "stored after compaction",
    ]
    c.close()


def tables_in_schema() -> list[str]:
    from engram_core.storage import SCHEMA_DIR

    text = "\n".join(f.read_text() for f in sorted(SCHEMA_DIR.glob("*.surql")))
    removed = set(re.findall(r"REMOVE TABLE (?:IF EXISTS )?(\w+)", text))  # `mentions` (schema 011)
    return sorted(set(re.findall(r"DEFINE TABLE (?:IF NOT EXISTS |OVERWRITE )?(\w+)", text)) - removed)


def files_holding_any_case(root: Path, needle: str) -> list[str]:
    raw = needle.lower().encode()
    return [str(f) for f in root.rglob("*") if f.is_file() and raw in f.read_bytes().lower()]


def test_erasing_removes_the_text_from_the_graph_the_recall_log_the_snapshot_and_the_journal(
    light_daemon: DaemonProc, tmp_path: Path
) -> None:
    """Issue #13: an erased memory's words leave every table (graph entities and relations extracted from it,
    recall queries that found it), the export, the cold-start snapshot, the hook journal and every file on disk."""
    word, hook_word = "zebramark7731", "wombatquill5521"
    light_daemon.start()
    proj = new_project(tmp_path, "traceproj")
    c = light_daemon.client()
    doomed = c.call(
        "store",
        memory={
            "content": f"Zebramark7731Loader in src/{word}/loader.py raises "
            f"Zebramark7731Error on empty input; we use pytest for it"
        },
        project=str(proj),
    )["memory"]["id"]
    keep = c.call(
        "store",
        memory={"content": "gradle builds need the daemon flag; tests/test_shared.py uses pytest"},
        project=str(proj),
    )["memory"]["id"]
    # A hook event (the real hook script; the daemon journals it before applying it) that becomes a session memory.
    event = {
        "session_id": "trace-session",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(proj),
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_use_id": "tu_trace",
        "tool_input": {
            "file_path": f"{proj}/src/{hook_word}.py",
            "old_string": "a = 1",
            "new_string": f"{hook_word} = 2",
        },
        "tool_response": {"filePath": f"{proj}/src/{hook_word}.py"},
    }
    hook = subprocess.run(
        [sys.executable, "-S", str(REPO_ROOT / "hooks" / "engram_hook.py"), "PostToolUse"],
        input=json.dumps(event),
        text=True,
        capture_output=True,
        timeout=60,
        env=light_daemon.env,
    )
    assert hook.returncode == 0, hook.stderr
    c.call("flush", timeout_s=60)
    session_items = c.call(
        "list_memories", scope="session", session="trace-session", project=str(proj), limit=50
    )["items"]
    hooked = [m["id"] for m in session_items if hook_word in m["content"]]
    assert hooked and files_holding_any_case(
        light_daemon.home, hook_word
    )  # journal and session store hold it
    # A restart writes the cold-start snapshot, which then holds the text too (the premise of that check).
    c.close()
    light_daemon.stop()
    light_daemon.start()
    c = light_daemon.client()
    hits = c.call("recall", query=f"how does the {word} loader fail", project=str(proj))["hits"]
    assert doomed in [h["memory"]["id"] for h in hits]
    c.call("recall", query=f"{word} again", project=str(proj))
    other = c.call("recall", query="gradle daemon", project=str(proj), limit=1)["hits"]
    assert [h["memory"]["id"] for h in other] == [keep]
    graph = c.call("search_knowledge_graph", query=word, project=str(proj))
    assert any(word in e["name"].lower() for e in graph["entities"])
    assert files_holding_any_case(proj / ".claude" / "engram", word)

    for mid, where in [(doomed, {}), *((h, {"session": "trace-session"}) for h in hooked)]:
        c.call("forget", memory_id=mid, project=str(proj), erase=True, confirm=True, **where)
    ok_json(engram(light_daemon, "compact", "--json", "--project", str(proj)))
    c.call("compact")  # the user and session stores too

    for needle in (word, hook_word):
        for scope, where in (("project", {}), ("user", {}), ("session", {"session": "trace-session"})):
            for table in tables_in_schema():
                got = c.call(
                    "run_query", surql=f"SELECT * FROM {table}", scope=scope, project=str(proj), **where
                )
                assert got["ok"] and got["statements"][0]["ok"], got
                assert needle not in json.dumps(got, default=str).lower(), (scope, table)
        exported = engram(light_daemon, "export", "--scope", "all", "--project", str(proj))
        assert exported.returncode == 0 and keep in exported.stdout
        assert needle not in exported.stdout.lower()
        assert files_holding_any_case(proj / ".claude" / "engram", needle) == []
        assert files_holding_any_case(light_daemon.home, needle) == []
    # What the forgotten memory did not own stays: the other memory's entity, the unrelated recall query.
    assert c.call("search_knowledge_graph", query="pytest", project=str(proj))["entities"]
    assert c.call("search_knowledge_graph", query=word, project=str(proj))["entities"] == []
    log = c.call(
        "run_query",
        surql="SELECT query, memory_ids, created_at FROM retrieval_log ORDER BY created_at",
        scope="project",
        project=str(proj),
    )
    assert log["ok"], log
    queries = [r["query"] for r in log["statements"][0]["rows"]]
    assert "gradle daemon" in queries and queries.count("[forgotten]") == 2
    c.close()
    light_daemon.stop()
    assert files_holding_any_case(light_daemon.home, hook_word) == []  # the snapshot written at close too
    assert files_holding_any_case(proj / ".claude" / "engram", word) == []


def test_dropped_session_leaves_no_readable_data(light_daemon: DaemonProc, tmp_path: Path) -> None:
    light_daemon.start()
    proj = new_project(tmp_path, "sessproj")
    c = light_daemon.client()
    sess = c.call("start_session", project=str(proj))["session_key"]
    c.call(
        "store",
        memory={
            "content": f"scratch note {MARK} for this session only",
            "scope": "session",
            "memory_type": "working",
            "importance": 0.1,
        },
        project=str(proj),
        session=sess,
    )
    c.call("end_session", session=sess)
    c.call("compact")
    assert files_holding(light_daemon.home, MARK) == []
    c.close()


def test_only_stores_that_erased_or_grew_are_due_for_compaction(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """What the daemon runs when idle (`compact(only_due=True)`): a forget makes its store due, and only it."""
    from engram_core.models import MemoryIn
    from engram_core.service import EngramService

    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    a, b = new_project(tmp_path, "a"), new_project(tmp_path, "b")
    svc = EngramService(tmp_path / "home")
    try:
        mid = svc.store(MemoryIn(content=f"temporary {MARK} text"), project=str(a)).memory.id
        svc.store(MemoryIn(content="other project text"), project=str(b))
        svc.forget(mid, project=str(a), erase=True, confirm=True)
        due = svc.compact(only_due=True)
        assert [s.path for s in due.stores] == [str(a / ".claude" / "engram" / "project.db")]
        assert files_holding(a / ".claude" / "engram", MARK) == []
        assert svc.compact(only_due=True).stores == []
    finally:
        svc.close()


def test_one_compaction_of_a_store_at_a_time(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """`engram import` ends with a compaction while the daemon may start its own: both copied into the same
    `.compact` directory, and the first to finish closed the engine the other was reading ("Event loop is closed"
    at the end of a 50,000-memory import). A due-only compaction leaves a store being compacted alone; an asked-for
    one waits for it, then compacts what it left. Nothing is lost either way."""
    from collections.abc import Iterator
    from typing import Any

    from engram_core.models import MemoryIn
    from engram_core.service import EngramService
    from engram_core.storage import compaction as store_module

    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    a = new_project(tmp_path, "a")
    svc = EngramService(tmp_path / "home")
    real_copy = store_module.copy_store
    meanwhile: dict[str, Any] = {}

    def counts(svc: EngramService) -> dict[str, Any]:
        return {sc.scope.value: (sc.total, sc.by_status) for sc in svc.stats(project=str(a)).scopes}

    asked = threading.Thread(target=lambda: meanwhile.setdefault("asked", svc.compact(project=str(a))))

    def copy_with_others_meanwhile(*args: Any, **kwargs: Any) -> Iterator[Any]:
        steps = real_copy(*args, **kwargs)
        first = next(steps)
        if not meanwhile.get("others"):  # the first compaction, between its pieces (outside every lock)
            meanwhile["others"] = True

            def first_then_others() -> None:
                meanwhile["due"] = svc.compact(only_due=True)
                asked.start()  # waits for this compaction to end
                first()

            yield first_then_others
        else:
            yield first
        yield from steps

    try:
        ids = [
            svc.store(MemoryIn(content=f"note {i} about {MARK} and the deploy"), project=str(a)).memory.id
            for i in range(30)
        ]
        svc.forget(ids[0], project=str(a), erase=True, confirm=True)  # due now
        before = counts(svc)
        assert before["project"][0] == 30
        monkeypatch.setattr(store_module, "copy_store", copy_with_others_meanwhile)
        first = svc.compact(project=str(a))
        asked.join(120)
        assert not asked.is_alive()
        db = str(a / ".claude" / "engram" / "project.db")
        assert [s.path for s in first.stores] == [db]
        assert meanwhile["due"].stores == [] and meanwhile["due"].stopped == []
        assert [s.path for s in meanwhile["asked"].stores] == [db]
        assert counts(svc) == before
    finally:
        svc.close()


# ── project boundaries ───────────────────────────────────────────────────────
def test_memory_ids_resolve_only_in_the_callers_project(light_daemon: DaemonProc, tmp_path: Path) -> None:
    light_daemon.start()
    a, b = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    c = light_daemon.client()
    theirs = c.call("store", memory={"content": "beta's private deploy notes"}, project=str(b))["memory"][
        "id"
    ]
    mine = c.call("store", memory={"content": "alpha's build notes"}, project=str(a))["memory"]["id"]
    user = c.call("store", memory={"content": "prefers tabs", "scope": "user"}, project=str(a))["memory"][
        "id"
    ]
    for method, extra in (
        ("get", {}),
        ("update", {"patch": {"content": "hijacked"}}),
        ("forget", {}),
        ("promote", {}),
        ("set_status", {"status": "archived"}),
    ):
        try:
            c.call(method, memory_id=theirs, project=str(a), **extra)
        except Exception as exc:  # noqa: BLE001 - the client raises the daemon's typed error
            assert "NotFound" in type(exc).__name__ or "no memory" in str(exc), (method, exc)
        else:
            raise AssertionError(f"{method} from project alpha reached beta's memory")
    assert c.call("get", memory_id=theirs, project=str(b))["content"] == "beta's private deploy notes"
    assert c.call("get", memory_id=mine, project=str(a))["status"] != "forgotten"
    assert c.call("get", memory_id=user, project=str(b))["content"] == "prefers tabs"  # user scope is shared
    shown = engram(light_daemon, "show", theirs, "--project", str(a))
    assert shown.returncode != 0 and "no memory" in shown.stderr and "Traceback" not in shown.stderr
    c.close()


def test_sessions_belong_to_their_project_and_unknown_ids_are_refused(
    light_daemon: DaemonProc, tmp_path: Path
) -> None:
    light_daemon.start()
    a, b = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    c = light_daemon.client()
    sb = c.call("start_session", project=str(b), claude_session_id="cc-beta-1")["session_key"]
    c.call(
        "store",
        memory={"content": f"beta session scratch {MARK}", "scope": "session"},
        project=str(b),
        session=sb,
    )
    c.call("store", memory={"content": "alpha project fact"}, project=str(a))
    for session in (sb, "cc-beta-1", "no-such-session"):
        try:
            c.call("recall", query="session scratch", project=str(a), session=session)
        except Exception as exc:  # noqa: BLE001
            assert "no live session" in str(exc), exc
        else:
            raise AssertionError(f"session {session!r} accepted from project alpha")
    try:
        c.call(
            "store", memory={"content": "typo'd session", "scope": "session"}, project=str(a), session="typo"
        )
    except Exception as exc:  # noqa: BLE001
        assert "no live session 'typo'" in str(exc)
    else:
        raise AssertionError("an unknown session id created a session")
    assert [s["claude_session_id"] for s in c.call("list_sessions")] == ["cc-beta-1"]
    exported = engram(light_daemon, "export", "--scope", "all", "--project", str(a))
    assert exported.returncode == 0, exported.stderr
    assert "alpha project fact" in exported.stdout and MARK not in exported.stdout
    assert MARK in engram(light_daemon, "export", "--scope", "all", "--project", str(b)).stdout
    c.close()


async def test_mcp_tools_do_not_reach_another_projects_memory(daemon: DaemonProc, tmp_path: Path) -> None:
    from test_mcp import error_text, payload, server

    a, b = new_project(tmp_path, "mcp-alpha"), new_project(tmp_path, "mcp-beta")
    c = daemon.client()
    theirs = c.call("store", memory={"content": "beta's memory seen over MCP"}, project=str(b))["memory"][
        "id"
    ]
    c.close()
    async with server(daemon, a, session="cc-mcp-alpha-1") as s:
        for tool, args in (
            ("get_memory", {}),
            ("forget_memory", {}),
            ("promote_memory", {}),
            ("update_memory", {"content": "hijacked"}),
        ):
            assert "no memory" in error_text(await s.call_tool(tool, {"memory_id": theirs, **args}))
        mine = payload(
            await s.call_tool("store_memory", {"content": "alpha scratch over MCP", "scope": "session"})
        )
        assert mine["scope"] == "session"
    c = daemon.client()
    assert c.call("get", memory_id=theirs, project=str(b))["content"] == "beta's memory seen over MCP"
    c.call("end_session", session="cc-mcp-alpha-1")
    c.close()


# ── errors ───────────────────────────────────────────────────────────────────
def test_a_malformed_hook_event_is_a_clear_refusal_and_is_not_journaled(light_daemon: DaemonProc) -> None:
    from test_daemon import raw_exchange

    light_daemon.start()
    bad = [
        ["not", "an", "object"],
        "text",
        {"kind": "explode"},
        {"kind": "memory"},
        {"kind": "memory", "memory": "just a string"},
        {"kind": "memory", "memory": {"content": ""}},
        {"kind": "memory", "memory": {"content": "ok", "memory_type": "dream"}},
        {"kind": "stop", "session_id": ["x"]},
        {"kind": "memory", "memory": {"content": "x", "bogus": 1}},
    ]
    lines = b"".join(
        json.dumps({"v": 1, "id": i, "method": "hook_event", "params": {"event": ev}}).encode() + b"\n"
        for i, ev in enumerate(bad)
    )
    answers = raw_exchange(light_daemon.sock, lines)
    assert len(answers) == len(bad)
    for ev, answer in zip(bad, answers, strict=True):
        assert answer["ok"] is False, ev
        assert answer["error"]["type"] == "EngramError", (ev, answer)
        assert "hook_event" in answer["error"]["message"], answer
    c = light_daemon.client()
    assert c.call("status")["journal_pending"] == 0
    assert c.call("status")["events_failed"] == 0
    c.close()
    journal = light_daemon.home / "journal.jsonl"
    assert "explode" not in (journal.read_text() if journal.exists() else "")


def test_import_with_a_bad_line_stores_nothing_unless_skip_bad(
    light_daemon: DaemonProc, tmp_path: Path
) -> None:
    light_daemon.start()
    proj = new_project(tmp_path, "importproj")
    lines = [json.dumps({"content": f"imported fact {i} [x] \\\\ [/] emoji 🚀"}) for i in range(300)]
    lines.insert(250, "{not json")  # line 251: after the first chunk, which today was already stored
    lines.insert(280, json.dumps({"content": "bad type", "memory_type": "dream"}))  # line 281
    f = tmp_path / "mem.jsonl"
    f.write_text("\n".join(lines) + "\n")
    p = engram(light_daemon, "import", str(f), "--project", str(proj))
    assert p.returncode == 1
    assert "nothing imported: 2 bad line(s)" in p.stdout and "--skip-bad" in p.stdout
    assert "line 251:" in p.stderr and "line 281:" in p.stderr and "Traceback" not in p.stderr
    c = light_daemon.client()
    assert c.call("list_memories", project=str(proj), scope="project", limit=5)["total"] == 0
    p = engram(light_daemon, "import", str(f), "--json", "--skip-bad", "--project", str(proj))
    assert p.returncode == 1  # the bad lines are still reported
    report = json.loads(p.stdout)
    assert report["stored"] == 300 and [e["line"] for e in report["failed"]] == [251, 281]
    assert c.call("list_memories", project=str(proj), scope="project", limit=5)["total"] == 300
    c.close()


# ── never drop an acknowledged event ─────────────────────────────────────────
def test_an_event_that_cannot_be_applied_on_a_full_disk_is_parked_then_applied(tmp_path: Path) -> None:
    """Real failure: the project's store sits on a 3 MiB tmpfs filled to the last byte."""
    import pytest

    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    d = DaemonProc(tmp_path / "home", model=False, env={"ENGRAM_EVENT_RETRY_S": "0.2,0.2"})
    try:
        proj = new_project(mnt, "fullproj")
        d.start()
        c = d.client()
        c.call("store", memory={"content": "opens the project store"}, project=str(proj))
        filler = mnt / "filler"
        with open(filler, "wb") as fh:  # fill the disk to the last byte
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        event = {
            "event_id": "full-disk-1",
            "kind": "memory",
            "cwd": str(proj),
            "memory": {"content": "written while the disk was full " + "y" * 3000, "memory_type": "episodic"},
        }
        assert c.call("hook_event", event=event)["accepted"]
        deadline = __import__("time").monotonic() + 30
        while not c.call("status")["events_parked"] and __import__("time").monotonic() < deadline:
            c.call("flush", timeout_s=0.5)
        status = c.call("status")
        assert status["events_parked"] == 1 and status["journal_pending"] == 1
        assert status["parked"][0]["event_id"] == "full-disk-1" and "full" in status["parked"][0]["error"]
        shown = engram(d, "status")
        assert shown.returncode == 1 and "PARKED hook event full-disk-1" in shown.stdout
        log = (d.home / "engram.log").read_text()
        assert "dropped" not in log and "parked" in log
        filler.unlink()  # space is back
        assert c.call("flush", timeout_s=30)["parked"] == 0
        status = c.call("status")
        assert status["journal_pending"] == 0 and status["events_parked"] == 0
        hits = c.call("list_memories", project=str(proj), scope="project", limit=10)["items"]
        assert sum(m["content"].startswith("written while the disk was full") for m in hits) == 1
        c.close()
    finally:
        d.stop()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_parked_event_survives_a_restart(tmp_path: Path) -> None:
    """Parked events stay in the journal: a daemon started later applies them (here the failure is gone)."""
    from engram_core.daemon.journal import Journal

    home = tmp_path / "home"
    proj = new_project(tmp_path, "later")
    home.mkdir(mode=0o700)
    j = Journal(home / "journal.jsonl")
    j.begin(
        "kept-1",
        {
            "event_id": "kept-1",
            "kind": "memory",
            "cwd": str(proj),
            "memory": {"content": "acknowledged before a crash"},
        },
    )
    j.close()
    d = DaemonProc(home, model=False).start()
    try:
        c = d.client()
        assert c.call("flush", timeout_s=30)["drained"]
        assert [
            m["content"] for m in c.call("list_memories", project=str(proj), scope="project")["items"]
        ] == ["acknowledged before a crash"]
        c.close()
    finally:
        d.stop()


# ── socket bounds ────────────────────────────────────────────────────────────
def _connect(sock: Path):  # noqa: ANN202
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(sock))
    return s


@contextlib.contextmanager
def _daemon_with_sockets(home: Path, **kw):  # noqa: ANN003, ANN202
    """A model-free daemon and a list for the raw sockets the test opens; all closed afterwards."""
    d = DaemonProc(home, model=False, **kw).start()
    socks: list = []
    try:
        yield d, socks
    finally:
        for s in socks:
            s.close()
        d.stop()


def _answer(s) -> dict:  # noqa: ANN001
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0]) if buf.strip() else {}


def test_half_sent_large_lines_are_bounded_and_time_out(tmp_path: Path) -> None:
    from engram_core.daemon.server import MAX_PARTIAL_BYTES
    from engram_core.wire.protocol import MAX_LINE

    with _daemon_with_sockets(tmp_path / "home", env={"ENGRAM_LINE_TIMEOUT_S": "3"}) as (d, socks):
        chunk = b'{"v": 1, "id": 1, "method": "ping", "params": {"pad": "' + b"x" * (MAX_LINE - 100)
        refused = 0
        for _ in range(24):  # 24 half-sent 8 MiB lines: the finding was +167 MB RSS, held for ever
            s = _connect(d.sock)
            socks.append(s)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused before it was all sent
                s.sendall(chunk)
        for s in socks:  # each one is refused: over the budget at once, or when its line is late
            answer = _answer(s)
            assert answer.get("ok") is False, answer
            msg = answer["error"]["message"]
            refused += "too many large requests" in msg
            assert "too many large requests" in msg or "must arrive whole within 3 s" in msg, msg
        assert refused >= 24 - MAX_PARTIAL_BYTES // len(chunk) - 1
        c = d.client()
        assert c.call("ping") == "pong"  # the daemon is fine
        c.close()


def test_connection_cap_and_idle_connections_neither_pile_up_nor_block_idle_exit(tmp_path: Path) -> None:
    import time

    from engram_core.daemon.server import MAX_CONNECTIONS

    with _daemon_with_sockets(tmp_path / "home", idle_timeout=2, env={"ENGRAM_CONN_IDLE_S": "60"}) as (
        d,
        socks,
    ):
        for _ in range(MAX_CONNECTIONS - 2):  # a few slots stay for DaemonProc's own probe and a client
            socks.append(_connect(d.sock))
        s = _connect(d.sock)
        s.sendall(b'{"v": 1, "id": 1, "method": "ping"}\n')
        assert _answer(s)["result"] == "pong"
        extra = [_connect(d.sock) for _ in range(3)]
        answers = [_answer(x) for x in extra]
        assert any(a.get("ok") is False and "connections open" in a["error"]["message"] for a in answers), (
            answers
        )
        for x in extra:
            x.close()
        # Idle plain connections are still open here; the daemon exits on its idle timeout all the same.
        deadline = time.monotonic() + 30
        while d.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert d.proc.poll() == 0, "idle clients kept the daemon up"
        s.close()


def test_an_idle_connection_is_closed_and_the_client_reconnects(tmp_path: Path) -> None:
    import time

    d = DaemonProc(tmp_path / "home", model=False, env={"ENGRAM_CONN_IDLE_S": "1"}).start()
    try:
        s = _connect(d.sock)
        time.sleep(2.5)  # an idle period longer than the limit (the thing under test), not a barrier
        assert s.recv(10) == b""  # closed by the daemon
        c = d.client()
        c.call("ping")
        time.sleep(2.5)
        assert c.call("ping") == "pong"  # RemoteService reconnects by itself
        c.close()
    finally:
        d.stop()


# ── files ────────────────────────────────────────────────────────────────────
def test_a_link_planted_in_a_project_store_is_refused_and_never_chmodded_through(tmp_path: Path) -> None:
    import os

    d = DaemonProc(tmp_path / "home", model=False).start()
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file")
    victim.chmod(0o644)
    proj = new_project(tmp_path, "planted")
    try:
        c = d.client()
        c.call("store", memory={"content": "opens the store"}, project=str(proj))
        c.close()
        d.stop()
        store_dir = proj / ".claude" / "engram"
        link = store_dir / "project.db" / "planted-link"
        os.symlink(victim, link)
        d.start()
        p = engram(d, "store", "another note", "--project", str(proj))
        assert p.returncode != 0 and "symbolic link" in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert victim.stat().st_mode & 0o777 == 0o644
        link.unlink()
        other = new_project(tmp_path, "linked-store")
        (other / ".claude").mkdir()
        os.symlink(tmp_path / "elsewhere", other / ".claude" / "engram")
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere").chmod(
            0o755
        )  # not mkdir's mode: an EngramService in this process set umask 077
        p = engram(d, "store", "note", "--project", str(other))
        assert p.returncode != 0 and "symbolic link" in p.stderr, p.stderr
        assert (tmp_path / "elsewhere").stat().st_mode & 0o777 == 0o755
        assert list((tmp_path / "elsewhere").iterdir()) == []
    finally:
        d.stop()


def test_an_unsafe_data_root_is_refused_not_chmodded(tmp_path: Path) -> None:
    import os

    from engram_core.config import ConfigError, ensure_private_dir

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "someone-elses.sock").write_text("")
    env = {"ENGRAM_HOME": str(shared)}
    d = DaemonProc(shared, model=False)
    p = engram(d, "stats", env=env)
    assert p.returncode != 0 and "Engram did not create it" in p.stderr and "Traceback" not in p.stderr
    assert shared.stat().st_mode & 0o7777 == 0o1777
    link = tmp_path / "home-link"
    os.symlink(tmp_path / "real", link)
    (tmp_path / "real").mkdir()
    p = engram(d, "stats", env={"ENGRAM_HOME": str(link)})
    assert p.returncode != 0 and "symbolic link" in p.stderr
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)  # the tests run as root (see test_disk_faults)
    try:
        ensure_private_dir(theirs)
    except ConfigError as exc:
        assert "belongs to another user" in str(exc)
    else:
        raise AssertionError("a directory of another user was accepted")
    # Engram's own directory with loose permissions (an old version, a umask 002 system) is tightened.
    own = tmp_path / "own"
    own.mkdir()
    (own / "user.db").mkdir()
    own.chmod(0o775)
    ensure_private_dir(own)
    assert own.stat().st_mode & 0o777 == 0o700


def test_project_parameters_never_create_stores_at_odd_paths(
    light_daemon: DaemonProc, tmp_path: Path
) -> None:
    light_daemon.start()
    c = light_daemon.client()
    missing = tmp_path / "no" / "such" / "dir"
    for project, needle in (
        (str(missing), "not an existing directory"),
        ("/etc", "not a project folder"),
        ("/", "not a project folder"),
    ):
        try:
            c.call("store", memory={"content": "x"}, project=project)
        except Exception as exc:  # noqa: BLE001
            assert needle in str(exc), exc
        else:
            raise AssertionError(f"a store was made for {project}")
    assert not (tmp_path / "no").exists() and not Path("/etc/.claude/engram").exists()
    event = {"kind": "memory", "cwd": str(missing), "memory": {"content": "from a hook in a deleted folder"}}
    c.call("hook_event", event=event)
    assert c.call("flush", timeout_s=60)["drained"]
    assert not (tmp_path / "no").exists()
    parked = c.call("status")[
        "parked"
    ]  # refused at once, kept and shown rather than dropped or retried in a loop
    # 1 attempt, or 2 when the event had already been parked as the flush began (a flush retries parked events)
    assert (
        len(parked) == 1
        and "not an existing directory" in parked[0]["error"]
        and parked[0]["attempts"] in (1, 2)
    )
    c.close()


def test_a_failed_model_export_leaves_no_temp_file_and_is_not_retried_at_every_start(
    tmp_path: Path, monkeypatch
) -> None:  # noqa: ANN001
    import torch

    from engram_core.retrieval import embeddings

    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "models"))
    calls = []

    def failing_export(model, args, path, **kw):  # noqa: ANN001, ANN003, ANN202 - torch.onnx.export's shape
        calls.append(path)
        Path(path).write_bytes(b"\0" * (16 << 20))  # a half-written 16 MB model, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch.onnx, "export", failing_export)
    for _ in range(3):  # three daemon starts
        emb = embeddings.LocalEmbedder(backend="onnx")
        try:
            emb._load_onnx()  # noqa: SLF001
        except Exception as exc:  # noqa: BLE001
            assert "No space left" in str(exc)
    assert len(calls) == 1
    assert [f.name for f in (tmp_path / "models").iterdir() if f.suffix == ".tmp"] == []
    assert sum(f.stat().st_size for f in (tmp_path / "models").iterdir()) < 4096


def test_compaction_keeps_only_the_newest_retrieval_log_rows(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """retrieval_log is the one table that grows with recalls alone: compaction keeps its newest rows only."""
    from engram_core.memory import maintenance
    from engram_core.models import MemoryIn
    from engram_core.service import EngramService

    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    monkeypatch.setattr(maintenance, "RETRIEVAL_LOG_KEEP", 30)
    proj = new_project(tmp_path, "logproj")
    svc = EngramService(tmp_path / "home")
    try:
        svc.store(MemoryIn(content="gradle builds need the daemon flag"), project=str(proj))
        for i in range(80):
            svc.recall(f"gradle daemon {i}", project=str(proj))
        store = svc.project_store(str(proj))
        assert store.q1("SELECT count() AS n FROM retrieval_log GROUP ALL")[0]["n"] == 80
        svc.compact(project=str(proj))
        queries = store.q1("SELECT VALUE query FROM retrieval_log ORDER BY created_at")
        assert queries == [f"gradle daemon {i}" for i in range(50, 80)]
    finally:
        svc.close()


# ── a long console query holds no other client ──────────────────────────────
def test_a_console_query_running_to_its_deadline_holds_no_hook_or_store(tmp_path: Path) -> None:
    """Through the real daemon: while a console query runs (a crypto::argon2 loop, stopped by its deadline), a
    store, a SessionStart and a UserPromptSubmit recall are answered. The query is known to be in the daemon (its
    request counter moved) before the others are sent. With the engine's synchronous binding (ENGRAM_ENGINE_THREAD=0)
    each of them waited for the whole query: that binding keeps the GIL while the engine works."""
    import threading

    d = DaemonProc(
        tmp_path / "home", model=False, env={"ENGRAM_QUERY_TIMEOUT_S": "15", "ENGRAM_PROMPT_RECALL": "true"}
    )
    try:
        d.start()
        proj = str(new_project(tmp_path, "proj"))
        setup = d.client()
        setup.call("store", memory={"content": "a memory so that the project store exists"}, project=proj)
        base = setup.call("status")["requests"]
        answer: dict = {}
        finished = threading.Event()

        def long_query() -> None:
            c = d.client()
            try:
                answer["result"] = c.call(
                    "run_query",
                    project=proj,
                    surql="FOR $i IN 0..100000 { LET $x = crypto::argon2::generate('a'); }",
                )
            finally:
                c.close()
                finished.set()

        worker = threading.Thread(target=long_query)
        worker.start()
        polls = 0
        while True:  # wait (by polling the lock-free status call) until the daemon has received the query
            polls += 1
            if setup.call("status")["requests"] - base - polls >= 1:
                break
        stored = setup.call("store", memory={"content": "stored while the console query runs"}, project=proj)
        assert not finished.is_set(), "the store waited for the console query"
        started = setup.call("hook_session_start", session_id="sess-concurrent", cwd=proj)
        assert not finished.is_set(), "SessionStart waited for the console query"
        prompted = setup.call(
            "hook_prompt", prompt="which memory exists?", session_id="sess-concurrent", cwd=proj
        )
        assert not finished.is_set(), "the UserPromptSubmit recall waited for the console query"
        assert stored["action"] == "created" and "text" in started and prompted["enabled"]
        worker.join(60)
        assert "deadline" in json.dumps(answer["result"])  # the query itself was stopped by its deadline
        setup.close()
    finally:
        d.stop()


def test_the_daemon_exits_cleanly_every_time(tmp_path: Path) -> None:
    """The engine's asynchronous binding may abort a process in interpreter finalization (SIGABRT in about one run
    in five, even after a clean close): the daemon leaves with os._exit once its stores are closed, so every stop
    ends with exit status 0."""
    d = DaemonProc(tmp_path / "home", model=False)
    proj = str(new_project(tmp_path, "proj"))
    codes = []
    for i in range(6):
        d.start()
        c = d.client()
        c.call("store", memory={"content": f"note {i} written before the stop"}, project=proj)
        c.call("recall", query="note written", project=proj)
        c.close()
        proc = d.proc
        d.stop()
        codes.append(proc.returncode)
    assert codes == [0] * 6
