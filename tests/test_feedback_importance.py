"""Feedback that counts (issue #29 item 2): importance moves with the composite's signals on access and with each
verdict (`engram feedback`, MCP `update_memory(user_feedback)`, MCP `mark_retrieval_useful`), so a memory marked
unhelpful ranks lower and fades to the archive threshold sooner, and `engram show` says so. Real daemon."""

from __future__ import annotations

import json
import math

import pytest
from support import DaemonProc, new_project
from test_cli import engram, ok_json
from test_mcp import payload, server

from engram_core.memory.scoring import ARCHIVE_BELOW, access_gain


def _final(hits: list[dict], mid: str) -> float:
    return next(h["scores"]["final"] for h in hits if h["id"] == mid)


def test_cli_feedback_moves_importance_rank_and_fade(daemon: DaemonProc, tmp_path) -> None:  # noqa: ANN001
    proj = new_project(tmp_path, "fbcli")
    a = ok_json(
        engram(daemon, "store", "the staging database is reset every Sunday night", "--json", cwd=proj)
    )["memory"]["id"]
    b = ok_json(
        engram(daemon, "store", "the staging database is restored from Friday's backup", "--json", cwd=proj)
    )["memory"]["id"]
    query = "when is the staging database reset"
    before = ok_json(engram(daemon, "recall", query, "--json", cwd=proj))["hits"]
    shown = ok_json(engram(daemon, "show", a, "--json", cwd=proj))
    # The recall above was an access: importance gained what it added to the composite (frequency, relevance).
    assert shown["importance"] == pytest.approx(0.5 + access_gain(0, 0.0), abs=1e-6)
    imp0 = shown["importance"]

    out = engram(daemon, "feedback", a, "not-helpful", cwd=proj)
    assert out.returncode == 0, out.stderr
    assert f"importance {imp0:.2f} → {imp0 - 0.1:.2f}" in out.stdout
    low = ok_json(engram(daemon, "show", a, "--json", cwd=proj))
    assert low["importance"] == pytest.approx(imp0 - 0.1, abs=1e-6)
    human = engram(daemon, "show", a, cwd=proj).stdout
    assert f"importance: {low['importance']}" in human
    after = ok_json(engram(daemon, "recall", query, "--json", "--limit", "5", cwd=proj))["hits"]
    # It ranks lower relative to its neighbour: its score fell with its importance, the other one's did not.
    ratio_before = _final(before, a) / _final(before, b)
    ratio_after = _final(after, a) / _final(after, b)
    assert ratio_after < ratio_before
    strength = {h["id"]: h["scores"]["strength"] for h in after}
    assert strength[a] < strength[b] and strength[a] == pytest.approx(low["importance"], rel=0.01)
    # And it reaches the archive threshold sooner: strength = importance × 0.5^(t / half-life).
    assert math.log2(low["importance"] / ARCHIVE_BELOW) < math.log2(imp0 / ARCHIVE_BELOW)

    up = ok_json(engram(daemon, "feedback", b, "helpful", "--json", cwd=proj))
    assert up["importance"] > ok_json(engram(daemon, "show", a, "--json", cwd=proj))["importance"] + 0.15
    for _ in range(12):  # bounded: never below the floor
        engram(daemon, "feedback", a, "not-helpful", cwd=proj)
    assert ok_json(engram(daemon, "show", a, "--json", cwd=proj))["importance"] == pytest.approx(0.05)


async def test_mcp_feedback_moves_importance(daemon: DaemonProc, tmp_path) -> None:  # noqa: ANN001
    proj = new_project(tmp_path, "fbmcp")
    async with server(daemon, proj) as s:
        good = payload(
            await s.call_tool(
                "store_memory",
                {"content": "Deploys go through the blue-green script in ops/deploy.sh", "importance": 0.5},
            )
        )["id"]
        query = "how do deploys work"
        payload(await s.call_tool("recall_memories", {"query": query}))
        start = payload(await s.call_tool("get_memory", {"memory_id": good}))["importance"]
        assert payload(await s.call_tool("mark_retrieval_useful", {"query": query, "was_useful": False}))[
            "updated"
        ]
        down = payload(await s.call_tool("get_memory", {"memory_id": good}))["importance"]
        assert down == pytest.approx(start - 0.1, abs=1e-6)
        payload(await s.call_tool("recall_memories", {"query": query}))
        assert payload(await s.call_tool("mark_retrieval_useful", {"query": query, "was_useful": True}))[
            "updated"
        ]
        up = payload(await s.call_tool("get_memory", {"memory_id": good}))["importance"]
        assert up > down + 0.1  # +0.1 for the verdict, plus the access
        fb = payload(await s.call_tool("update_memory", {"memory_id": good, "user_feedback": 0.0}))
        assert fb["importance"] == pytest.approx(up - 0.1, abs=1e-6)
        tools = {t.name: t.description for t in (await s.list_tools()).tools}
    assert "importance" in tools["mark_retrieval_useful"]
    evolve = tools["evolve_memory_system"]  # item 8: it evolves scope weights and half-lives, nothing else
    assert (
        "scope weights" in evolve
        and "half-lives" in evolve
        and "promotion thresholds and strategy weights are not tuned" in evolve
    )
    assert json.dumps(tools)  # every description is plain text
