"""Issue #32: one project per repository, and sync between machines and with a team, over real git.

Two data roots with a real daemon each stand for two machines; each has its own clone of one repository at a
different path; a bare repository on this machine is the sync remote. Everything goes through the `engram`
command (or the daemon's socket where no command exists, e.g. editing a memory)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO_ROOT, DaemonProc

SECRET = "ghp_" + "Zq8yWv3Lk2Jh7Gf5Ds1Ap9Om4Nb6Vc0Xe2Ru"  # a GitHub token shape the redaction knows


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def engram(d: DaemonProc, *args: str, cwd: Path | None = None, ok: bool = True) -> Any:
    p = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd or REPO_ROOT),
        env=d.env,
    )
    if not ok:
        return p
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def objects(bare: Path) -> bytes:
    """Every object the repository holds, reachable or not, decompressed."""
    return subprocess.run(
        ["git", "--git-dir", str(bare), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout


def recalled(d: DaemonProc, query: str, cwd: Path) -> list[dict[str, Any]]:
    return engram(d, "recall", query, cwd=cwd)["hits"]


class World:
    def __init__(self, base: Path) -> None:
        self.base = base
        seed = base / "seed"
        git("init", "-q", "-b", "main", str(seed))
        (seed / "README").write_text("a project\n")
        git("add", ".", cwd=seed)
        git("commit", "-q", "-m", "first", cwd=seed)
        self.origin = base / "origin.git"
        git("clone", "-q", "--bare", str(seed), str(self.origin))
        self.clone_a = base / "machine-a" / "src" / "proj"
        self.clone_b = base / "machine-b" / "work" / "deep" / "proj-b"
        git("clone", "-q", str(self.origin), str(self.clone_a))
        git("clone", "-q", str(self.origin), str(self.clone_b))
        self.remote = base / "sync.git"
        git("init", "-q", "--bare", str(self.remote))
        self.team = base / "team.git"
        git("init", "-q", "--bare", str(self.team))
        self.a = DaemonProc(base / "home-a").start()
        self.b = DaemonProc(base / "home-b").start()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("sync")
    os.chmod(base, 0o700)
    w = World(base)
    try:
        assert engram(w.a, "sync", "init", str(w.remote))["channel"] == "personal"
        assert engram(w.b, "sync", "init", str(w.remote))["pulled"] == 0
        yield w
    finally:
        w.a.stop()
        w.b.stop()


def sync_both(w: World) -> None:
    for d in (w.a, w.b, w.a):
        r = engram(d, "sync")
        assert not r["offline"] and r["rejected"] == 0, r


# ── identity ─────────────────────────────────────────────────
def test_worktrees_and_clones_of_one_repository_are_one_project(world: World) -> None:
    w = world
    tree = w.base / "elsewhere" / "feature-tree"
    git("worktree", "add", "-q", "-b", "feature", str(tree), cwd=w.clone_a)
    engram(w.a, "store", "the feature flags live in config/flags.yaml", cwd=w.clone_a)
    hits = recalled(w.a, "where do feature flags live", tree)
    assert any("config/flags.yaml" in m["content"] for m in hits)

    main, other = (engram(w.a, "status", cwd=c)["project"] for c in (w.clone_a, tree))
    assert main["database"] == other["database"] and main["kind"] == "origin"
    assert main["source"] == str(w.origin.resolve()).removesuffix(".git")
    assert other["root"] == str(tree.resolve()) and "git remote origin" in other["reason"]
    assert main["store_dir"] == str(w.a.home / "projects" / main["database"])
    # a second clone elsewhere, its origin spelled as ssh where the first says https: still one project
    ssh, https = w.base / "ssh-clone", w.base / "https-clone"
    for folder, url in ((ssh, "git@github.com:acme/widget.git"), (https, "https://github.com/acme/widget")):
        git("init", "-q", str(folder))
        git("remote", "add", "origin", url, cwd=folder)
    one, two = (engram(w.a, "status", cwd=c)["project"] for c in (ssh, https))
    assert one["database"] == two["database"] and one["source"] == "github.com/acme/widget"
    assert one["database"] != main["database"]


def test_a_folder_without_git_keeps_its_own_store(world: World) -> None:
    folder = world.base / "plain"
    (folder / ".claude").mkdir(parents=True)
    info = engram(world.a, "status", cwd=folder)["project"]
    assert info["kind"] == "folder" and info["store_dir"] == str(folder.resolve() / ".claude" / "engram")


def test_a_folder_store_is_adopted_once_when_the_folder_becomes_a_repository(world: World) -> None:
    w = world
    folder = w.base / "grows-up"
    (folder / ".git").mkdir(parents=True)  # an empty marker: still a plain folder project
    mid = engram(w.a, "store", "the nightly job rotates the logs at 03:00", cwd=folder)["memory"]["id"]
    old_store = folder / ".claude" / "engram"
    assert (old_store / "project.db").exists()
    shutil.rmtree(folder / ".git")
    git("init", "-q", str(folder))
    (folder / "x").write_text("x")
    git("add", ".", cwd=folder)
    git("commit", "-q", "-m", "x", cwd=folder)
    # the daemon remembers a folder's project for a few seconds: a new daemon sees the repository at once
    w.a.stop()
    w.a.start()
    info = engram(w.a, "status", cwd=folder)["project"]
    assert info["kind"] == "root-commit"
    assert [a["memories"] for a in info["adoptions"]] == [1], info
    assert "adopted 1 memories" in info["adoptions"][0]["message"]
    assert engram(w.a, "show", mid, cwd=folder)["content"] == "the nightly job rotates the logs at 03:00"
    assert (old_store / "project.db").exists() and not (old_store / "adopted.txt").exists()
    assert str(old_store) in (Path(info["store_dir"]) / "adopted.txt").read_text()
    w.a.stop()
    w.a.start()
    assert engram(w.a, "status", cwd=folder)["project"]["adoptions"] == []  # once


def test_adding_a_remote_later_adopts_the_root_commit_store(world: World) -> None:
    w = world
    repo = w.base / "local-first"
    git("init", "-q", str(repo))
    (repo / "f").write_text("x")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "x", cwd=repo)
    mid = engram(w.a, "store", "local-first: the Gecko parser is hand written", cwd=repo)["memory"]["id"]
    before = engram(w.a, "status", cwd=repo)["project"]
    assert before["kind"] == "root-commit"
    git("remote", "add", "origin", "git@example.com:acme/gecko.git", cwd=repo)
    w.a.stop()
    w.a.start()
    after = engram(w.a, "status", cwd=repo)["project"]
    assert after["kind"] == "origin" and after["database"] != before["database"]
    assert [a["source_dir"] for a in after["adoptions"]] == [before["store_dir"]]
    assert (Path(before["store_dir"]) / "adopted-into.txt").read_text().strip() == after["database"]
    assert engram(w.a, "show", mid, cwd=repo)["content"] == "local-first: the Gecko parser is hand written"


# ── personal sync ────────────────────────────────────────────
def test_stored_on_one_machine_recalled_on_the_other_and_secrets_never_leave(world: World) -> None:
    w = world
    engram(w.a, "store", f"the deploy key for staging is {SECRET} and deploys need VPN", cwd=w.clone_a)
    engram(w.a, "store", "I prefer short commit subjects", "--scope", "user", cwd=w.clone_a)
    sync_both(w)
    hits = recalled(w.b, "how do deploys to staging work", w.clone_b)
    assert any("deploys need VPN" in m["content"] and m["scope"] == "project" for m in hits), hits
    assert any("short commit subjects" in m["content"] for m in recalled(w.b, "commit subjects", w.clone_b))
    everything = objects(w.remote)
    assert b"deploys need VPN" in everything  # the memory is there (the check below is not vacuous)
    assert SECRET.encode() not in everything and SECRET[:12].encode() not in everything
    for home in (w.a.home, w.b.home):
        loose = [p for p in (home / "sync").rglob("*") if p.stat().st_mode & 0o077]
        assert not loose, loose[:3]  # the sync clone and state are owner-only


def test_both_sides_writing_converge_without_a_merge_and_a_second_sync_changes_nothing(world: World) -> None:
    w = world
    engram(w.a, "store", "machine A notes: the cache warms in 40 s", cwd=w.clone_a)
    engram(w.b, "store", "machine B notes: the queue drains every minute", cwd=w.clone_b)
    ra = engram(w.a, "sync")
    rb = engram(w.b, "sync")  # B pushes after A did: its branch had moved, no person is asked anything
    ra2 = engram(w.a, "sync")
    assert ra["pushed"] >= 1 and rb["pulled"] >= 1 and ra2["pulled"] >= 1
    for d in (w.a, w.b):
        again = engram(d, "sync")
        assert (again["pushed"], again["pulled"], again["change_files"]) == (0, 0, 0), again
    for d, c in ((w.a, w.clone_a), (w.b, w.clone_b)):
        contents = " ".join(m["content"] for m in recalled(d, "cache warms queue drains", c))
        assert "cache warms" in contents and "queue drains" in contents
    tree = git("--git-dir", str(w.remote), "ls-tree", "-r", "--name-only", "engram-sync")
    assert all(n == "EPOCH" or n.endswith(".jsonl") for n in tree.split()), tree  # no conflict markers, ever
    status = engram(w.a, "sync", "status")["channels"][0]
    assert status["configured"] and status["pending_changes"] == 0 and status["last_sync"]


def test_a_memory_changed_on_both_sides_takes_the_newer_and_keeps_the_other_in_its_history(
    world: World,
) -> None:
    w = world
    mid = engram(w.a, "store", "the API rate limit is 100 requests a minute", cwd=w.clone_a)["memory"]["id"]
    sync_both(w)
    ca, cb = w.a.client(), w.b.client()
    try:
        ca.call(
            "update",
            memory_id=mid,
            patch={"content": "the API rate limit is 200 a minute"},
            project=str(w.clone_a),
        )
        cb.call(
            "update",
            memory_id=mid,
            patch={"content": "the API rate limit is 300 a minute"},
            project=str(w.clone_b),
        )
    finally:
        ca.close()
        cb.close()
    ra = engram(w.a, "sync")
    rb = engram(w.b, "sync")
    engram(w.a, "sync")
    assert rb["conflicts"] >= 1, json.dumps([ra, rb])
    shown_a = engram(w.a, "show", mid, cwd=w.clone_a)
    shown_b = engram(w.b, "show", mid, cwd=w.clone_b)
    assert shown_a["content"] == shown_b["content"] == "the API rate limit is 300 a minute"  # B wrote last
    history = shown_a["metadata"]["sync_history"]
    assert [h["content"] for h in history] == ["the API rate limit is 200 a minute"]
    assert shown_b["metadata"]["sync_history"] == history
    assert ra["pushed"] >= 1


def test_archive_and_restore_travel(world: World) -> None:
    w = world
    mid = engram(w.a, "store", "the old build used grunt", cwd=w.clone_a)["memory"]["id"]
    sync_both(w)
    engram(w.a, "forget", mid, "--yes", cwd=w.clone_a)
    sync_both(w)
    assert engram(w.b, "show", mid, cwd=w.clone_b)["status"] == "archived"
    engram(w.b, "restore", mid, cwd=w.clone_b)
    sync_both(w)
    assert engram(w.a, "show", mid, cwd=w.clone_a)["status"] == "active"


def test_erased_on_one_machine_is_gone_from_the_other_and_from_the_remote_after_compaction(
    world: World,
) -> None:
    w = world
    text = "the customer list for Zanzibar Freight is in the drive folder 7"
    mid = engram(w.b, "store", text, cwd=w.clone_b)["memory"]["id"]
    sync_both(w)
    assert engram(w.a, "show", mid, cwd=w.clone_a)["content"] == text
    assert b"Zanzibar Freight" in objects(w.remote)
    engram(w.b, "forget", mid, "--erase", "--yes", cwd=w.clone_b)
    sync_both(w)
    gone = engram(w.a, "show", mid, cwd=w.clone_a)
    assert gone["status"] == "forgotten" and "Zanzibar" not in json.dumps(gone)
    assert not any(
        "Zanzibar" in m["content"] for m in recalled(w.a, "customer list Zanzibar Freight", w.clone_a)
    )
    report = engram(w.a, "sync", "compact")
    assert report["compacted"] and report["pruned_remote"]
    assert b"Zanzibar Freight" not in objects(w.remote)
    after = engram(w.b, "sync")  # B takes the compacted history and prunes its own clone
    assert "compacted elsewhere" in " ".join(after["steps"])
    assert b"Zanzibar Freight" not in objects(w.b.home / "sync" / "personal" / "repo" / ".git")
    for d in (w.a, w.b):
        assert engram(d, "sync")["pushed"] == 0
    # everything else still converges after the compaction
    engram(w.b, "store", "after the compaction: builds use bazel", cwd=w.clone_b)
    sync_both(w)
    assert any("bazel" in m["content"] for m in recalled(w.a, "which build tool", w.clone_a))


def test_offline_sync_queues_and_sends_later(world: World) -> None:
    w = world
    engram(w.a, "store", "offline note: the VPN drops at midnight", cwd=w.clone_a)
    assert engram(w.a, "sync", "status")["channels"][0]["pending_changes"] == 1
    away = w.remote.with_name("sync-away.git")
    w.remote.rename(away)
    try:
        r = engram(w.a, "sync")
        assert r["offline"] and r["queued_files"] >= 1 and r["pushed"] == 1, r
        assert engram(w.a, "sync", "status")["channels"][0]["queued_files"] >= 1
    finally:
        away.rename(w.remote)
    r = engram(w.a, "sync")
    assert not r["offline"] and r["queued_files"] == 0
    engram(w.b, "sync")
    assert any("VPN drops" in m["content"] for m in recalled(w.b, "when does the VPN drop", w.clone_b))


def test_a_push_the_remote_refuses_once_is_tried_again(world: World) -> None:
    w = world
    hook, flag = w.remote / "hooks" / "pre-receive", w.base / "refuse-once"
    hook.write_text(f"#!/bin/sh\nif [ -e {flag} ]; then rm {flag}; echo busy >&2; exit 1; fi\nexit 0\n")
    hook.chmod(0o700)
    flag.touch()
    try:
        engram(w.a, "store", "retried: the Ibex cache is flushed nightly", cwd=w.clone_a)
        r = engram(w.a, "sync")
        assert not flag.exists()  # the remote did refuse the first push
        assert r["queued_files"] == 0 and not r["offline"] and r["steps"][-1] == "pushed", r
    finally:
        hook.unlink()
    engram(w.b, "sync")
    assert any(
        "Ibex cache" in m["content"] for m in recalled(w.b, "when is the Ibex cache flushed", w.clone_b)
    )


def test_opted_out_sessions_and_private_memories_stay_home(world: World) -> None:
    w = world
    subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "off", "--session", "sess-secret-1"],
        env=w.a.env,
        check=True,
        capture_output=True,
    )
    c = w.a.client()
    try:
        c.call(
            "store",
            memory={
                "content": "opted out: the Quokka migration plan",
                "metadata": {"claude_session_id": "sess-secret-1"},
            },
            project=str(w.clone_a),
        )
        c.call(
            "store",
            memory={"content": "private: the Wombat budget", "tags": ["private"]},
            project=str(w.clone_a),
        )
    finally:
        c.close()
    r = engram(w.a, "sync")
    assert r["excluded"] >= 2
    everything = objects(w.remote)
    assert b"Quokka" not in everything and b"Wombat" not in everything


def test_bad_remote_is_refused_and_nothing_is_set_up(tmp_path: Path) -> None:
    home = tmp_path / "home-x"
    d = DaemonProc(home, model=False)
    d.start()
    try:
        p = engram(d, "sync", "init", str(tmp_path / "no-such.git"), ok=False)
        assert p.returncode != 0 and "not a directory" in p.stderr and "Traceback" not in p.stderr
        assert engram(d, "sync", "status")["channels"][0]["configured"] is False
        p = engram(d, "sync", ok=False)
        assert p.returncode != 0 and "sync init" in p.stderr
    finally:
        d.stop()


def test_the_daemon_syncs_on_its_own_when_asked_to(tmp_path: Path) -> None:
    import time

    os.chmod(tmp_path, 0o700)
    remote = tmp_path / "sched.git"
    git("init", "-q", "--bare", str(remote))
    proj = tmp_path / "proj"
    git("init", "-q", str(proj))
    git("remote", "add", "origin", "https://example.com/acme/sched", cwd=proj)
    d = DaemonProc(tmp_path / "home-s", model=False, env={"ENGRAM_SYNC_INTERVAL_S": "1"}).start()
    try:
        engram(d, "sync", "init", str(remote))
        engram(d, "store", "scheduled: the Okapi report ships on Fridays", cwd=proj)
        deadline = time.monotonic() + 60
        while b"Okapi report" not in objects(remote) and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the remote (the test's own sync never runs): no barrier, a deadline
        assert b"Okapi report" in objects(remote)
    finally:
        d.stop()


# ── team memory ──────────────────────────────────────────────
def test_team_memory_is_shared_only_when_marked_and_unshare_propagates(world: World) -> None:
    w = world
    shared = engram(w.a, "store", "team rule: every migration needs a rollback script", cwd=w.clone_a)[
        "memory"
    ]["id"]
    engram(w.a, "store", "mine only: my Platypus side project idea", cwd=w.clone_a)
    engram(w.a, "store", "user scope: I like Capybara fonts", "--scope", "user", cwd=w.clone_a)
    assert "shared" in engram(w.a, "share", shared, cwd=w.clone_a)["tags"]
    engram(w.a, "sync", "init", str(w.team), "--team")
    engram(w.b, "sync", "init", str(w.team), "--team")
    team_objects = objects(w.team)
    assert b"rollback script" in team_objects
    assert b"Platypus" not in team_objects and b"Capybara" not in team_objects
    got = [m for m in recalled(w.b, "what do migrations need", w.clone_b) if m["id"] == shared]
    assert got and got[0]["scope"] == "project"
    assert (
        got[0]["metadata"]["shared_by"]["machine"] == engram(w.a, "sync", "status")["channels"][1]["machine"]
    )
    assert engram(w.b, "sync", "status", cwd=w.clone_b)["shared"] >= 1
    engram(w.a, "unshare", shared, cwd=w.clone_a)
    engram(w.a, "sync", "--team")
    r = engram(w.b, "sync", "--team")
    assert r["erased"] == 1, r
    assert engram(w.b, "show", shared, cwd=w.clone_b)["status"] == "forgotten"
    assert engram(w.a, "show", shared, cwd=w.clone_a)["status"] != "forgotten"  # the author keeps it


def test_a_class_is_shared_at_once_and_only_procedural_or_semantic(world: World) -> None:
    w = world
    ids = [
        engram(
            w.a,
            "store",
            f"procedure {i}: run the Narwhal linter before tagging",
            "--type",
            "procedural",
            cwd=w.clone_a,
        )["memory"]["id"]
        for i in range(2)
    ]
    note = engram(w.a, "store", "episode: the Narwhal demo went fine", "--type", "episodic", cwd=w.clone_a)
    r = engram(w.a, "share", "--type", "procedural", cwd=w.clone_a)
    assert r["changed"] >= 2
    assert all("shared" in engram(w.a, "show", i, cwd=w.clone_a)["tags"] for i in ids)
    assert "shared" not in engram(w.a, "show", note["memory"]["id"], cwd=w.clone_a)["tags"]
    p = engram(w.a, "share", "--type", "episodic", cwd=w.clone_a, ok=False)
    assert p.returncode != 0 and "invalid choice" in p.stderr
    assert engram(w.a, "unshare", "--type", "procedural", cwd=w.clone_a)["changed"] >= 2
    assert all("shared" not in engram(w.a, "show", i, cwd=w.clone_a)["tags"] for i in ids)


def test_forged_team_records_touch_nothing_private(world: World) -> None:
    """A teammate (or anyone who can push to the team remote) cannot write into the user scope, overwrite or erase
    a memory this machine did not share, or bring in a record that does not validate: each is left out and counted."""
    w = world
    if not (w.b.home / "sync" / "team" / "state.json").exists():
        engram(w.a, "sync", "init", str(w.team), "--team")
        engram(w.b, "sync", "init", str(w.team), "--team")
    mine = engram(w.b, "store", "B's own: the Tapir budget is private", cwd=w.clone_b)["memory"]
    db = engram(w.b, "status", cwd=w.clone_b)["project"]["database"]
    record = {
        k: mine[k] for k in ("id", "memory_type", "status", "importance", "half_life_days", "created_at")
    }
    forged = {
        **record,
        "content": "overwritten by a forger",
        "content_hash": "x",
        "updated_at": "2099-01-01T00:00:00+00:00",
    }
    lines = [
        {
            "v": 1,
            "op": "put",
            "store": db,
            "id": mine["id"],
            "machine": "ZZZ",
            "at": "2099-01-01T00:00:00+00:00",
            "hash": "h1",
            "record": forged,
        },
        {"v": 1, "op": "withdraw", "store": db, "id": mine["id"], "machine": "ZZZ"},
        {
            "v": 1,
            "op": "put",
            "store": "user",
            "id": "01J0000000000000000000FAKE",
            "machine": "ZZZ",
            "at": "2020-01-01T00:00:00+00:00",
            "hash": "h2",
            "record": {**forged, "id": "01J0000000000000000000FAKE"},
        },
        {
            "v": 1,
            "op": "put",
            "store": "../../etc",
            "id": "x",
            "machine": "ZZZ",
            "at": "2020",
            "hash": "h3",
            "record": {},
        },
        {
            "v": 1,
            "op": "put",
            "store": db,
            "id": "01J0000000000000000000BAD1",
            "machine": "ZZZ",
            "at": "2020-01-01T00:00:00+00:00",
            "hash": "h4",
            "record": {"id": "01J0000000000000000000BAD1", "content": "no type, no dates"},
        },
    ]
    forger = w.base / "forger"
    git("clone", "-q", "-b", "engram-sync", str(w.team), str(forger))
    folder = forger / "changes" / "ZZZ"
    folder.mkdir(parents=True)
    (folder / "00000001-forged.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    git("add", ".", cwd=forger)
    git("commit", "-q", "-m", "forged", cwd=forger)
    git("push", "-q", "origin", "HEAD:engram-sync", cwd=forger)
    r = engram(w.b, "sync", "--team")
    assert r["rejected"] >= 4 and r["pulled"] == 0 and r["erased"] == 0, r
    shown = engram(w.b, "show", mine["id"], cwd=w.clone_b)
    assert shown["content"] == "B's own: the Tapir budget is private" and shown["status"] != "forgotten"
    p = engram(w.b, "show", "01J0000000000000000000FAKE", cwd=w.clone_b, ok=False)
    assert p.returncode != 0


def test_hostile_text_arrives_exactly_as_stored(world: World) -> None:
    """Markup, backslashes, emoji, control and Unicode line-break characters (U+2028) and a secret: what machine A
    stored (the secret already redacted) is what machine B holds after a sync, byte for byte."""
    w = world
    text = (
        "rich [bold]markup[/] and [/] alone, C:\\Users\\dev\\n not a newline, emoji 🚀🧪, bell \x07 escape \x1b[31m, "
        f"line\u2028separator and\u2029paragraph, token {SECRET} in the hostile sync note"
    )
    mid = engram(w.a, "store", text, cwd=w.clone_a)["memory"]["id"]
    stored = engram(w.a, "show", mid, cwd=w.clone_a)["content"]
    assert SECRET not in stored and "\u2028" in stored and "[/]" in stored  # redacted, the rest kept
    sync_both(w)
    assert engram(w.b, "show", mid, cwd=w.clone_b)["content"] == stored
    assert SECRET.encode() not in objects(w.remote)
