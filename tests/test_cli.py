"""`engram` commands against a real daemon: every command with --json, clear one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT, DaemonProc, new_project


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


def ok_json(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def one_line_error(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert needle in p.stderr, p.stderr


def test_store_recall_show_forget_stats_maintain(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "cliproj")
    stored = ok_json(
        engram(
            daemon,
            "store",
            "builds run with make -j4",
            "--tags",
            "build,make",
            "--importance",
            "0.8",
            "--json",
            cwd=proj,
        )
    )
    mid = stored["memory"]["id"]
    assert stored["memory"]["scope"] == "project" and stored["memory"]["importance"] == 0.8
    user = ok_json(
        engram(
            daemon,
            "store",
            "prefers tabs",
            "--scope",
            "user",
            "--type",
            "semantic",
            "--json",
            "--project",
            str(proj),
        )
    )
    assert user["memory"]["scope"] == "user"
    rec = ok_json(engram(daemon, "recall", "how do builds run", "--json", "--limit", "5", cwd=proj))
    top = rec["hits"][0]
    assert top["id"] == mid and {"id", "scope", "type", "content", "scores", "metadata"} <= set(top)
    only_user = ok_json(engram(daemon, "recall", "tabs", "--scope", "user", "--json", cwd=proj))
    assert all(h["scope"] == "user" for h in only_user["hits"])
    ok_json(engram(daemon, "recall", "builds", "--type", "procedural", "--json", cwd=proj))
    shown = ok_json(engram(daemon, "show", mid, "--json", cwd=proj))
    assert shown["content"] == "builds run with make -j4"
    assert "builds run with make" in engram(daemon, "show", mid, cwd=proj).stdout
    stats = ok_json(engram(daemon, "stats", "--json", cwd=proj))
    assert any(s["scope"] == "project" and s["total"] >= 1 for s in stats["scopes"])
    maint = ok_json(engram(daemon, "maintain", "--json", cwd=proj))
    assert "took_ms" in maint
    forgotten = ok_json(engram(daemon, "forget", mid, "--json", cwd=proj))  # stdin is not a TTY: no prompt
    assert forgotten["status"] == "archived" and forgotten["content"] == "builds run with make -j4"
    restored = ok_json(engram(daemon, "restore", mid, "--json", cwd=proj))
    assert restored["status"] == "active"
    refused = engram(daemon, "forget", mid, "--erase", cwd=proj)  # no terminal, no --yes: nothing erased
    assert refused.returncode != 0 and "--yes" in refused.stderr
    erased = ok_json(engram(daemon, "forget", mid, "--erase", "--yes", "--json", cwd=proj))
    assert erased["status"] == "forgotten" and erased["content"] == "[forgotten]"
    status = ok_json(engram(daemon, "status", "--json"))
    assert status["running"] and status["protocol"] == 1
    human = engram(daemon, "status")
    assert re.search(r"up \d+ s, \d+ MB resident", human.stdout), human.stdout


def test_import_jsonl_reports_bad_lines(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "importproj")
    lines = [
        json.dumps(
            {"content": f"imported fact {i}", "memory_type": "semantic", "tags": ["imp"], "importance": 0.4}
        )
        for i in range(450)
    ]
    lines.insert(10, "{not json")
    lines.insert(300, json.dumps({"content": "bad type", "memory_type": "dream"}))
    f = tmp_path / "mem.jsonl"
    f.write_text("\n".join(lines) + "\n")
    p = engram(daemon, "import", str(f), "--json", cwd=proj)
    assert p.returncode == 1 and json.loads(p.stdout)["stored"] == 0  # a bad line stops the whole file
    p = engram(daemon, "import", str(f), "--json", "--skip-bad", cwd=proj)
    assert p.returncode == 1  # some lines were refused
    report = json.loads(p.stdout)
    assert report["stored"] == 450
    assert [e["line"] for e in report["failed"]] == [11, 301]
    page = ok_json(engram(daemon, "recall", "bad type", "--json", cwd=proj))
    assert not any(h["content"] == "bad type" for h in page["hits"])


def project_total(daemon: DaemonProc, proj: Path) -> int:
    stats = ok_json(engram(daemon, "stats", "--json", cwd=proj))
    return sum(s["total"] for s in stats["scopes"] if s["scope"] == "project")


def test_a_line_too_large_for_a_request_is_refused_by_number_and_nothing_breaks(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    """A line larger than one request may be (8 MB as sent) was sent anyway: the daemon refused it and closed while
    the client still wrote, and `engram import` said "lost the Engram daemon ... Broken pipe"."""
    proj = new_project(tmp_path, "bigline")
    big = json.dumps(
        {"content": "a huge attachment", "metadata": {"blob": "\x01" * 1_500_000}}
    )  # 9 MB as sent
    lines = [json.dumps({"content": f"small fact {i} [/] 🧪"}) for i in range(3)]
    lines.insert(1, big)
    f = tmp_path / "big.jsonl"
    f.write_text("\n".join(lines) + "\n")
    p = engram(daemon, "import", str(f), "--json", cwd=proj)
    report = json.loads(p.stdout)
    assert p.returncode == 1 and report["stored"] == 0 and not report["imported"]
    assert [e["line"] for e in report["failed"]] == [2] and "MB as sent" in report["failed"][0]["error"]
    p = engram(daemon, "import", str(f), "--json", "--skip-bad", cwd=proj)
    report = json.loads(p.stdout)
    assert (
        report["stored"] == 3 and [e["line"] for e in report["failed"]] == [2] and report["total_lines"] == 4
    )
    assert project_total(daemon, proj) == 3
    # a single command's request too: a clear error, not a lost daemon
    p = engram(daemon, "store", "-", cwd=proj, stdin="\x01" * 1_500_000)
    assert p.returncode == 1 and "nothing was sent" in p.stderr and "lost the Engram daemon" not in p.stderr
    assert project_total(daemon, proj) == 3


def test_errors_are_one_line(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "errs")
    one_line_error(engram(daemon, "show", "01UNKNOWNID", cwd=proj), "no memory with id")
    one_line_error(engram(daemon, "forget", "01UNKNOWNID", "--yes", cwd=proj), "no memory with id")
    one_line_error(engram(daemon, "store", "   ", cwd=proj), "empty")
    one_line_error(engram(daemon, "store", "x", "--type", "dream", cwd=proj), "invalid choice")
    one_line_error(engram(daemon, "store", "x", "--importance", "7", "--json", cwd=proj), "importance")
    one_line_error(engram(daemon, "recall", "x", "--scope", "galaxy", cwd=proj), "invalid choice")
    one_line_error(engram(daemon, "recall", "", cwd=proj), "empty")
    one_line_error(engram(daemon, "import", str(tmp_path / "missing.jsonl"), cwd=proj), "no such file")
    one_line_error(engram(daemon, "store", "x", "--scope", "session", cwd=proj), "session")


def test_help_and_daemon_down(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False)
    helped = engram(d, "--help")
    assert helped.returncode == 0
    for cmd in (
        "store",
        "import",
        "recall",
        "show",
        "forget",
        "stats",
        "maintain",
        "serve",
        "stop",
        "status",
        "mcp",
    ):
        assert cmd in helped.stdout
    assert "--json" in engram(d, "recall", "--help").stdout
    down = engram(d, "status", "--json")
    assert down.returncode == 1 and json.loads(down.stdout) == {"running": False, "home": str(d.home)}
    assert ok_json(engram(d, "stop", "--json"))["running"] is False
    # any data command starts the daemon on demand
    try:
        started = ok_json(engram(d, "stats", "--json", cwd=new_project(tmp_path, "p")))
        assert started["embedding"] == "none"
    finally:
        assert ok_json(engram(d, "stop", "--json"))["stopped"] is True


def test_off_and_on(daemon: DaemonProc) -> None:
    assert ok_json(engram(daemon, "off", "--session", "sess-x", "--json"))["capture"] == "off"
    assert (daemon.home / "optout" / "sess-x").exists()
    assert ok_json(engram(daemon, "on", "--session", "sess-x", "--json"))["capture"] == "on"
    assert not (daemon.home / "optout" / "sess-x").exists()
    one_line_error(engram(daemon, "off"), "--session")


def test_export_then_import_restores_exactly(daemon: DaemonProc, tmp_path: Path) -> None:
    src, dst = new_project(tmp_path, "exportsrc"), new_project(tmp_path, "exportdst")
    ok_json(engram(daemon, "store", "the queue is RabbitMQ", "--tags", "infra", "--json", cwd=src))
    ok_json(engram(daemon, "store", "release on Tuesdays", "--type", "procedural", "--json", cwd=src))
    backup = tmp_path / "backup.jsonl"
    summary = ok_json(engram(daemon, "export", "--scope", "project", "-o", str(backup), "--json", cwd=src))
    assert summary["exported"] == 2 and oct(backup.stat().st_mode & 0o777) == "0o600"
    rows = [json.loads(x) for x in backup.read_text().splitlines()]
    assert {r["content"] for r in rows} == {"the queue is RabbitMQ", "release on Tuesdays"}
    report = ok_json(engram(daemon, "import", str(backup), "--json", cwd=dst))
    assert report["restored"] == 2 and not report["failed"]
    again = [
        json.loads(x) for x in engram(daemon, "export", "--scope", "project", cwd=dst).stdout.splitlines()
    ]

    def strip(rs: list[dict]) -> list[dict]:
        return sorted(
            ({k: v for k, v in r.items() if k not in ("database", "project_path")} for r in rs),
            key=lambda r: r["id"],
        )

    assert strip(again) == strip(rows)


def test_doctor_reports_checks_and_fixes(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "doctorproj")
    result = ok_json(engram(daemon, "doctor", "--json", cwd=proj))
    names = {c["name"] for c in result["checks"]}
    assert {"python", "daemon", "permissions", "hook spool", "socket"} <= names and result["ok"]
    text = engram(daemon, "doctor", cwd=proj).stdout
    assert "all good" in text


def test_an_import_ends_with_the_compaction_it_made_due(daemon: DaemonProc, tmp_path: Path) -> None:
    """The rows an import rewrites (entities, relations, episodes) leave old versions in the engine's files; the
    store the import made due is compacted before `engram import` returns, and says so."""
    proj = new_project(tmp_path, "compactproj")
    f = tmp_path / "mem.jsonl"
    f.write_text(
        "".join(
            json.dumps(
                {
                    "content": f"The {s} service in src/{s}/server.py uses postgres and redis; "
                    f"run `make test` [x] \\ before deploying 🚀 ({i})",
                    "memory_type": "semantic",
                }
            )
            + "\n"
            for i, s in enumerate(["billing", "search", "upload", "auth"] * 100)
        )
    )
    report = ok_json(engram(daemon, "import", str(f), "--json", cwd=proj))
    assert report["stored"] == 400
    store_dir = proj / ".claude" / "engram" / "project.db"
    done = [st for st in report["compacted"] if st["path"] == str(store_dir)]
    assert done and done[0]["after_bytes"] < done[0]["before_bytes"], report["compacted"]
    # Nothing more to compact: a second import of the same lines only merges.
    again = ok_json(engram(daemon, "import", str(f), "--json", cwd=proj))
    assert again["stored"] == 0 and "compacted" not in again


def test_import_progress_shows_rate_and_time_left(daemon: DaemonProc, tmp_path: Path) -> None:
    """On a terminal the import shows a bar with memories/s and the time left (the stderr is a real pty)."""
    import os
    import pty

    proj = new_project(tmp_path, "progressproj")
    f = tmp_path / "mem.jsonl"
    f.write_text(
        "".join(
            json.dumps({"content": f"progress fact {i} [x] \\ 🚀", "memory_type": "semantic"}) + "\n"
            for i in range(150)
        )
    )
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "engram_core.cli", "import", str(f)],
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        cwd=str(proj),
        env={**daemon.env, "COLUMNS": "160"},
    )
    os.close(slave)
    seen = b""
    while True:  # read while it runs: a full pty would block the bar, and the import with it
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = p.stdout.read() if p.stdout else ""
    p.wait(timeout=120)
    assert p.returncode == 0, seen
    assert "150 stored" in out
    text = seen.decode(errors="replace")
    assert "memories/s" in text and "left" in text, text


def test_recall_and_store_stay_light_in_the_cli_process(daemon: DaemonProc, tmp_path: Path) -> None:
    """`engram recall` is called by agents in a loop: it must not load pydantic, yaml, the SDK or the model
    (together ~0.5 s per call); the daemon does that work."""
    proj = new_project(tmp_path, "lightproj")
    code = (
        "import sys, json\n"
        "from engram_core.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'yaml', 'surrealdb', 'numpy', "
        "'sentence_transformers', 'torch', 'rich'})\n"
        "print('HEAVY', json.dumps(heavy), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    for args in (["store", "light cli check", "--json"], ["recall", "light cli", "--json"]):
        p = subprocess.run(
            [sys.executable, "-c", code, *args, "--project", str(proj)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(proj),
            env=daemon.env,
        )
        assert p.returncode == 0, p.stderr
        heavy = json.loads(p.stderr.rsplit("HEAVY ", 1)[1])
        assert heavy == [], (args, heavy)


def test_export_of_more_than_one_answer_can_hold(daemon: DaemonProc, tmp_path: Path) -> None:
    # Twelve memories with 3 MB of metadata each: their export is larger than the largest answer the wire takes
    # (32 MB), so `engram export` must page.
    src = new_project(tmp_path, "bigexport")
    lines = "".join(
        json.dumps({"content": f"note {i} [/] 🚀", "metadata": {"log": "ab[/] " * 500_000}}) + "\n"
        for i in range(12)
    )
    data = tmp_path / "big-in.jsonl"
    data.write_text(lines, encoding="utf-8")
    assert ok_json(engram(daemon, "import", str(data), "--json", cwd=src))["stored"] == 12
    backup = tmp_path / "big.jsonl"
    summary = ok_json(engram(daemon, "export", "--scope", "project", "-o", str(backup), "--json", cwd=src))
    rows = [json.loads(x) for x in backup.read_text(encoding="utf-8").splitlines()]
    assert summary["exported"] == len(rows) == 12 and backup.stat().st_size > 32e6
    assert sorted(r["content"] for r in rows) == sorted(f"note {i} [/] 🚀" for i in range(12))
    assert not list(tmp_path.glob(".big.jsonl.part"))


def test_an_import_whose_compaction_outlasts_the_wait_still_succeeds(
    daemon: DaemonProc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The import's closing compaction is tidying, not the import: when the client stops waiting for it (its
    request timeout), the memories are stored and `engram import` says so and exits 0. In process, against the
    real daemon; only the compaction's answer is replaced by the timeout the client raises."""
    import engram_core.cli.commands as cmds
    import engram_core.cli.transfer as transfer
    from engram_core.wire.client import DaemonUnavailable

    real_client = transfer.daemon_client

    class Waited:
        def __init__(self, client: object) -> None:
            self.client = client

        def call(self, method: str, **params: object) -> object:
            if method == "compact":
                raise DaemonUnavailable("the Engram daemon did not answer 'compact' within 600 s")
            return self.client.call(method, **params)  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self.client, name)

    monkeypatch.setattr(transfer, "daemon_client", lambda args, **kw: Waited(real_client(args, **kw)))
    monkeypatch.setenv("ENGRAM_HOME", str(daemon.home))
    proj = new_project(tmp_path, "slowcompact")
    monkeypatch.chdir(proj)
    f = tmp_path / "mem.jsonl"
    f.write_text(
        "".join(
            json.dumps({"content": f"The {s} worker retries [/] \\ 🚀 ({i})"}) + "\n"
            for i, s in enumerate(["billing", "search"] * 5)
        )
    )
    assert cmds.main(["import", str(f), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stored"] == 10 and report["imported"] is True
    assert "did not answer 'compact'" in report["compaction_unfinished"]
    g = tmp_path / "more.jsonl"
    g.write_text(json.dumps({"content": "Deploys go through Argo CD, never kubectl apply"}) + "\n")
    assert cmds.main(["import", str(g)]) == 0
    out = capsys.readouterr().out
    assert "1 stored" in out and "the closing compaction is not finished" in out
