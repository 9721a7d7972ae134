"""Promotion in normal daemon use (issue #29 item 3): project → user judged over every registered project, not only
the ones open in the daemon (the user store's project_fingerprint table), and session → project at once at
importance ≥ 0.85, so a parallel session sees it. Real daemons, the CLI and the MCP client."""

from __future__ import annotations

from pathlib import Path

from support import DaemonProc, new_project
from test_cli import engram, ok_json
from test_mcp import payload, server

SHARED = "Always pin third-party GitHub Actions to a full commit SHA"


def test_recurrence_counts_projects_that_are_not_open(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False)
    try:
        d.start()
        first, second = new_project(tmp_path, "first"), new_project(tmp_path, "second")
        ok_json(engram(d, "store", SHARED, "--importance", "0.8", "--json", cwd=first))
        mid = ok_json(engram(d, "store", SHARED, "--importance", "0.8", "--json", cwd=second))["memory"]["id"]
        for _ in range(5):  # accessed five times in the second project
            engram(d, "recall", "pin GitHub Actions commit SHA", "--scope", "project", "--json", cwd=second)
        d.stop()
        d.start()  # a new daemon: only the second project is opened below, the first stays closed
        report = ok_json(engram(d, "maintain", "--json", cwd=second))
        assert report["promoted_to_user"] == 1, report
        assert ok_json(engram(d, "status", "--json"))["projects_open"] == 1  # the first project is not open
        user = ok_json(engram(d, "recall", "pin GitHub Actions", "--scope", "user", "--json", cwd=second))
        assert [h["content"] for h in user["hits"]] == [SHARED]
        shown = ok_json(engram(d, "show", mid, "--json", cwd=second))
        assert shown["metadata"]["promoted_to_user"].startswith("user:")
        # A content only one project holds is not promoted, however often it is used.
        only = ok_json(
            engram(
                d,
                "store",
                "The second project's CI runs on self-hosted runners",
                "--importance",
                "0.8",
                "--json",
                cwd=second,
            )
        )["memory"]["id"]
        for _ in range(5):
            engram(d, "recall", "self-hosted runners CI", "--scope", "project", "--json", cwd=second)
        assert ok_json(engram(d, "maintain", "--json", cwd=second))["promoted_to_user"] == 0
        assert "promoted_to_user" not in ok_json(engram(d, "show", only, "--json", cwd=second))["metadata"]
    finally:
        d.stop()


async def test_important_session_memory_reaches_the_project_at_once(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "parallel")
    async with server(daemon, proj, session="sess-important-1") as one:
        kept = payload(
            await one.call_tool(
                "store_memory",
                {
                    "content": "The payments sandbox rejects cards ending in 0000",
                    "scope": "session",
                    "importance": 0.9,
                },
            )
        )
        assert kept["scope"] == "session" and "promoted to project scope at once" in kept["message"]
        minor = payload(
            await one.call_tool(
                "store_memory",
                {"content": "Scratch: tried the sandbox twice", "scope": "session", "importance": 0.6},
            )
        )
        assert "promoted" not in minor["message"]
        # A parallel session in the same project, while the first one is still running:
        async with server(daemon, proj, session="sess-important-2") as two:
            hits = payload(
                await two.call_tool(
                    "recall_memories", {"query": "payments sandbox cards", "scope": "project"}
                )
            )
    contents = [h["content"] for h in hits["hits"]]
    assert "The payments sandbox rejects cards ending in 0000" in contents
    assert "Scratch: tried the sandbox twice" not in contents


def test_erasing_a_memory_drops_its_fingerprint(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False)
    try:
        d.start()
        proj = new_project(tmp_path, "erasing")
        mid = ok_json(engram(d, "store", "The vault path is secret/team-x", "--json", cwd=proj))["memory"][
            "id"
        ]
        count = "SELECT count() AS n FROM project_fingerprint GROUP ALL"
        c = d.client()
        try:

            def rows() -> int:
                res = c.call("run_query", surql=count, scope="user")
                return (res["statements"][0]["rows"] or [{"n": 0}])[0]["n"]

            assert rows() == 1
            ok_json(engram(d, "forget", mid, "--erase", "--yes", "--json", cwd=proj))
            assert rows() == 0
        finally:
            c.close()
    finally:
        d.stop()
