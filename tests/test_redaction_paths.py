"""Redaction on every field and every path (issue #13): nothing secret reaches a store, a journal or a log.

Each test writes secrets through one entry point, then looks for them where they could end up: every table of
every open store (dumped through the engine) and, once the stores are closed, the raw bytes of every file under
the Engram home and the project's store folder (database files, WAL, journal, log).  The search ignores case
(tags are stored lower-cased).  The secrets are fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import DaemonProc

from engram_core.models import MemoryIn, MemoryPatch
from engram_core.retrieval.embeddings import NoEmbedder
from engram_core.service import EngramService, call_api
from engram_core.wire.client import RemoteEngramError

TOKEN = "ghp_FAKEr8x2LmQ9vT4kZp7NwY3cJh6Fd1Sa0BgE"  # a GitHub token shape
PASSWORD = "Fake-Pw-7Rq2Zx9Lm4"  # only recognisable by its key (`password=`)
AWS = "AKIAFAKEQX3RTV7ZP4M2"
# the first 12 characters too: a secret cut before it was redacted leaves its head behind
SECRETS = (TOKEN, PASSWORD, AWS, AWS[:12])


def _leaks_in_files(*roots: Path) -> list[str]:
    hits = []
    for root in roots:
        for path in root.rglob("*") if root.exists() else ():
            if path.is_file():
                data = path.read_bytes().lower()
                hits += [f"{path.name}: {s[:12]}…" for s in SECRETS if s.lower().encode() in data]
    return hits


def _leaks_in_stores(svc: EngramService) -> list[str]:
    """Every row of every table of every open store, as the engine returns it."""
    svc.flush()
    hits = []
    for store in svc.scopes.open_stores():  # everything the engine holds
        tables = store.q1("INFO FOR DB")["tables"]
        for table in tables:
            dump = json.dumps(store.q1(f"SELECT * FROM `{table}`"), default=str).lower()
            hits += [f"{store.scope.value}/{table}: {s[:12]}…" for s in SECRETS if s.lower() in dump]
    return hits


@pytest.fixture
def svc(engram_home: Path, embedder, project_dir: Path) -> Iterator[EngramService]:  # noqa: ANN001
    s = EngramService(engram_home, embedder=embedder, recover_sessions=False)
    yield s
    s.close()
    assert _leaks_in_files(engram_home, project_dir / ".claude") == []


def _assert_clean(svc: EngramService) -> None:
    assert _leaks_in_stores(svc) == []


# ── service write paths ─────────────────────────────────────────────────────
def test_store_redacts_tags_source_and_metadata(svc: EngramService, project_dir: Path) -> None:
    res = svc.store(
        MemoryIn(
            content=f"deploy uses token {TOKEN}",
            tags=[f"password={PASSWORD}", "deploy"],
            source=f"curl -H 'Authorization: token {TOKEN}'",
            metadata={"cmd": f"export AWS_ACCESS_KEY_ID={AWS}", f"k {TOKEN}": 1},
        ),
        project=str(project_dir),
    )
    assert "github_token" in res.redactions and "password" in res.redactions
    assert "deploy" in res.memory.tags
    _assert_clean(svc)


def test_update_redacts_tags_and_metadata(svc: EngramService, project_dir: Path) -> None:
    m = svc.store(MemoryIn(content="the staging database is postgres 16"), project=str(project_dir)).memory
    svc.update(
        m.id,
        MemoryPatch(
            tags=[f"tok-{TOKEN}"],
            metadata={"note": f"password: {PASSWORD}"},
            content=f"staging db, login with password={PASSWORD}",
        ),
        project=str(project_dir),
    )
    _assert_clean(svc)


def test_recall_query_is_redacted_before_it_is_cut_and_logged(svc: EngramService, project_dir: Path) -> None:
    svc.store(MemoryIn(content="the staging database is postgres 16"), project=str(project_dir))
    svc.recall(f"staging database {TOKEN}", project=str(project_dir))
    # the query log keeps 2000 characters: an AWS key id across that boundary lost its tail and was kept
    svc.recall("staging " + "x" * 1984 + " " + AWS, project=str(project_dir))
    svc.mark_retrieval_useful(
        f"staging database {TOKEN}", True, reason=f"password={PASSWORD} worked", project=str(project_dir)
    )
    _assert_clean(svc)


def test_status_and_forget_reasons_are_redacted(svc: EngramService, project_dir: Path) -> None:
    a = svc.store(MemoryIn(content="fact one about the build cache"), project=str(project_dir)).memory
    b = svc.store(MemoryIn(content="fact two about the release train"), project=str(project_dir)).memory
    svc.set_status(a.id, "archived", reason=f"rotated {TOKEN}", project=str(project_dir))
    svc.forget(b.id, reason=f"contained password={PASSWORD}", project=str(project_dir))
    _assert_clean(svc)


def test_session_ids_sources_and_end_reasons_are_redacted(svc: EngramService, project_dir: Path) -> None:
    info = svc.start_session(
        project=str(project_dir), claude_session_id=f"sess-{TOKEN}", source=f"password={PASSWORD}"
    )
    assert TOKEN not in (info.claude_session_id or "")
    # the same (secret-bearing) id finds the same session again instead of opening a new one
    again = svc.start_session(project=str(project_dir), claude_session_id=f"sess-{TOKEN}")
    assert again.session_key == info.session_key and again.resumed
    svc.store(
        MemoryIn(content="a session note", scope="session"), project=str(project_dir), session=f"sess-{TOKEN}"
    )
    _assert_clean(svc)
    svc.end_session(info.session_key, reason=f"ended; token {TOKEN}")
    _assert_clean(svc)


def test_import_redacts_every_field(svc: EngramService, project_dir: Path) -> None:
    lines = [
        json.dumps(
            {
                "content": f"imported: key {AWS}",
                "tags": [f"t-{TOKEN}"],
                "source": f"password={PASSWORD}",
                "metadata": {"episode_id": f"ep {TOKEN}"},
            }
        )
    ]
    report = svc.import_lines(lines, project=str(project_dir))
    assert report.stored == 1 and not report.failed
    _assert_clean(svc)


def test_restore_redacts_every_field(svc: EngramService, project_dir: Path) -> None:
    svc.store(MemoryIn(content="a memory to export and tamper with", tags=["x"]), project=str(project_dir))
    records = [
        r.model_dump(mode="json") for r in svc.export_memories(scope="project", project=str(project_dir))
    ]
    rec = records[0]
    rec.update(
        tags=[f"t-{TOKEN}"],
        source=f"password={PASSWORD}",
        status_reason=f"key {AWS}",
        episode_id=f"ep {TOKEN}",
        metadata={"x": f"password={PASSWORD}"},
    )
    rec["status_history"] = [{**h, "reason": f"token {TOKEN}"} for h in rec.get("status_history") or []] or [
        {"status": "created", "reason": f"token {TOKEN}", "at": rec["created_at"]}
    ]
    report = svc.restore_memories([rec], project=str(project_dir))
    assert report.replaced == 1 and not report.failed
    _assert_clean(svc)


def test_console_writes_with_a_secret_are_refused(svc: EngramService, project_dir: Path) -> None:
    m = svc.store(MemoryIn(content="a memory the console edits"), project=str(project_dir)).memory
    res = svc.run_query(
        f"UPDATE memory:{m.id} SET source = 'password={PASSWORD}', tags += '{TOKEN}'",
        allow_writes=True,
        project=str(project_dir),
    )
    assert not res.ok and "secret" in res.message and res.statements == []
    # the same write without a secret goes through: the refusal is about the secret, not the write
    ok = svc.run_query(
        f"UPDATE memory:{m.id} SET source = 'console'", allow_writes=True, project=str(project_dir)
    )
    assert ok.ok, ok.message
    # a read may mention a secret (it stores nothing)
    assert svc.run_query(
        f"SELECT * FROM memory WHERE content CONTAINS '{TOKEN}'", project=str(project_dir)
    ).ok
    _assert_clean(svc)


def test_organise_free_text_is_redacted(svc: EngramService, project_dir: Path) -> None:
    """Tools outside the core write path (graph evidence, episode boundaries) reach the engine redacted too."""
    svc.store(
        MemoryIn(content="The api service depends on the auth service for login"), project=str(project_dir)
    )
    call_api(
        svc,
        "relate_entities",
        {
            "source": "api service",
            "target": "auth service",
            "relation_type": "depends_on",
            "evidence": f"seen in env: password={PASSWORD}",
            "project": str(project_dir),
        },
    )
    # evidence is kept to 500 characters: an AWS key id across that boundary must be redacted before the cut
    call_api(
        svc,
        "relate_entities",
        {
            "source": "api service",
            "target": "billing service",
            "relation_type": "depends_on",
            "evidence": "e" * 485 + " " + AWS,
            "project": str(project_dir),
        },
    )
    info = svc.start_session(project=str(project_dir), claude_session_id="c-episodes")
    svc.store(
        MemoryIn(content="a working note", scope="session"),
        project=str(project_dir),
        session=info.session_key,
    )
    call_api(
        svc,
        "end_episode",
        {"session": info.session_key, "reason": f"switching to {TOKEN}", "project": str(project_dir)},
    )
    svc.store(
        MemoryIn(content="another working note", scope="session"),
        project=str(project_dir),
        session=info.session_key,
    )
    # an episode reason is kept to 300 characters (and becomes the next episode's trigger)
    call_api(
        svc,
        "end_episode",
        {"session": info.session_key, "reason": "r" * 285 + " " + AWS, "project": str(project_dir)},
    )
    svc.store(
        MemoryIn(content="a third working note", scope="session"),
        project=str(project_dir),
        session=info.session_key,
    )
    _assert_clean(svc)


# ── the daemon: raw socket events, its journal and its log ─────────────────
def test_daemon_journal_and_log_never_hold_a_secret(light_daemon: DaemonProc, tmp_path: Path) -> None:
    proj = tmp_path / "p"
    (proj / ".git").mkdir(parents=True)
    light_daemon.start()
    c = light_daemon.client()
    good = {
        "kind": "memory",
        "cwd": str(proj),
        "session_id": f"s-{TOKEN}",
        "memory": {
            "content": f"Command failed: deploy → export AWS_ACCESS_KEY_ID={AWS}",
            "scope": "project",
            "tags": [f"password={PASSWORD}"],
            "source": f"hook {TOKEN}",
        },
    }
    assert c.call("hook_event", event=good)["accepted"]
    # a malformed event is refused; its error message quotes the input, and callers log it (hooks.log)
    bad = {
        "kind": "memory",
        "cwd": str(proj),
        "memory": {"content": f"x {TOKEN}", "importance": f"password={PASSWORD}"},
    }
    with pytest.raises(RemoteEngramError) as refused:
        c.call("hook_event", event=bad)
    assert "importance" in str(refused.value)
    assert [s for s in SECRETS if s.lower() in str(refused.value).lower()] == []
    c.call("flush", timeout_s=30)
    # the journal holds acknowledged events until they are applied: it is written before any apply
    assert _leaks_in_files(light_daemon.home) == []
    page = c.call("list_memories", scope="project", project=str(proj), limit=10)
    assert len(page["items"]) == 1 and "[REDACTED:" in page["items"][0]["content"]
    c.close()
    light_daemon.stop()
    assert _leaks_in_files(light_daemon.home, proj) == []


def test_daemon_api_calls_are_redacted(light_daemon: DaemonProc, tmp_path: Path) -> None:
    proj = tmp_path / "p"
    (proj / ".git").mkdir(parents=True)
    light_daemon.start()
    c = light_daemon.client()
    c.call(
        "store",
        memory={
            "content": "release checklist lives in docs",
            "tags": [f"k-{TOKEN}"],
            "source": f"password={PASSWORD}",
        },
        project=str(proj),
    )
    c.call("recall", query=f"release checklist {AWS}", project=str(proj))
    c.call(
        "import_lines",
        lines=[json.dumps({"content": "imported fact", "tags": [f"k-{AWS}"]})],
        project=str(proj),
    )
    c.close()
    light_daemon.stop()
    assert _leaks_in_files(light_daemon.home, proj) == []


def test_cli_store_import_and_recall_are_redacted(light_daemon: DaemonProc, tmp_path: Path) -> None:
    """The real `engram` command: arguments, an imported file and a query reach the daemon and stay redacted."""
    import subprocess
    import sys

    proj = tmp_path / "p"
    (proj / ".git").mkdir(parents=True)
    light_daemon.start()

    def engram(*args: str) -> str:
        p = subprocess.run(
            [sys.executable, "-m", "engram_core.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(proj),
            env=light_daemon.env,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout

    out = engram("store", f"the deploy key is {TOKEN}", "--tags", f"ci,{AWS}", "--json")
    assert TOKEN not in out and AWS not in out
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(
        json.dumps({"content": "an imported rule", "source": f"password={PASSWORD}", "tags": [f"k-{TOKEN}"]})
        + "\n",
        encoding="utf-8",
    )
    engram("import", str(jsonl))
    engram("recall", f"deploy key {AWS}", "--json")
    light_daemon.stop()
    assert _leaks_in_files(light_daemon.home, proj) == []


def test_a_journal_left_by_an_older_version_is_redacted_at_start(
    light_daemon: DaemonProc, tmp_path: Path
) -> None:
    """Pending events journaled raw (before events were redacted on arrival) are rewritten redacted, then applied."""
    proj = tmp_path / "p"
    (proj / ".git").mkdir(parents=True)
    light_daemon.home.mkdir(parents=True, mode=0o700)
    event = {
        "kind": "memory",
        "cwd": str(proj),
        "memory": {"content": f"old event: password={PASSWORD}", "tags": [f"t-{TOKEN}"], "scope": "project"},
    }
    (light_daemon.home / "journal.jsonl").write_text(
        json.dumps({"op": "begin", "id": "e-old", "event": event}) + "\n"
    )
    light_daemon.start()
    c = light_daemon.client()
    c.call("flush", timeout_s=30)
    page = c.call("list_memories", scope="project", project=str(proj), limit=10)
    assert [m["content"] for m in page["items"]] == ["old event: password=[REDACTED:password]"]
    c.close()
    light_daemon.stop()
    assert _leaks_in_files(light_daemon.home, proj) == []


# ── what an older version stored ─────────────────────────────────────────────
def _plant_legacy_secrets(svc: EngramService, project_dir: Path) -> str:
    """Rows as an older version wrote them: secrets in tags, source, metadata and a logged query. Written as
    SurrealQL literals, because every parameter now passes redaction on its way to the engine."""
    m = svc.store(
        MemoryIn(content="the release train leaves on thursdays", tags=["release"]), project=str(project_dir)
    ).memory
    store = svc.project_store(str(project_dir))
    assert store is not None
    store.q(
        f"UPDATE memory:{m.id} SET tags += '{TOKEN.lower()}', source = 'password={PASSWORD}', "
        f"metadata.cmd = 'export AWS_ACCESS_KEY_ID={AWS}', search_text = 'release train {TOKEN}'"
    )
    store.q(f"CREATE retrieval_log SET query = 'release {TOKEN}', created_at = time::now()")
    svc.user.q(f"CREATE retrieval_log SET query = 'password={PASSWORD}', created_at = time::now()")
    assert _leaks_in_stores(svc) != []
    return m.id


def test_redact_stored_rewrites_what_older_versions_stored(svc: EngramService, project_dir: Path) -> None:
    mid = _plant_legacy_secrets(svc, project_dir)
    dry = svc.redact_stored(project=str(project_dir), dry_run=True)
    assert dry[f"project:{svc.project_store(str(project_dir)).database}"] == {"memory": 1, "retrieval_log": 1}
    assert dry["user"] == {"retrieval_log": 1}
    assert _leaks_in_stores(svc) != []  # a dry run changes nothing
    svc.redact_stored(project=str(project_dir))
    _assert_clean(svc)
    m = svc.get(mid, project=str(project_dir))
    assert "release" in m.tags and m.source == "password=[REDACTED:password]"
    assert m.content == "the release train leaves on thursdays"  # untouched fields stay as they were
    assert svc.redact_stored(project=str(project_dir)) == {
        "user": {},
        f"project:{svc.project_store(str(project_dir)).database}": {},
    }


def test_engram_redact_command(light_daemon: DaemonProc, tmp_path: Path) -> None:
    """`engram redact` over the real daemon: the old rows are rewritten and the store files compacted."""
    import subprocess
    import sys

    proj = tmp_path / "p"
    (proj / ".git").mkdir(parents=True)
    planted = EngramService(light_daemon.home, embedder=NoEmbedder(), recover_sessions=False)
    _plant_legacy_secrets(planted, proj)
    planted.close()
    assert _leaks_in_files(light_daemon.home, proj) != []
    light_daemon.start()

    def engram(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engram_core.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(proj),
            env=light_daemon.env,
        )

    dry = engram("redact", "--dry-run")
    assert dry.returncode == 0 and "3 row(s) holding a secret would be rewritten" in dry.stdout, (
        dry.stdout + dry.stderr
    )
    done = json.loads(engram("redact", "--json").stdout)
    assert sum(n for tables in done.values() for n in tables.values()) == 3
    light_daemon.stop()
    assert _leaks_in_files(light_daemon.home, proj) == []
