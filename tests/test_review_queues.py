"""The review queues on the path users take: `engram import` into the real daemon, `engram review` to look.

Contradictions need the same subject (look-alikes of one shape stay apart), the newer statement that names the
value it replaced supersedes the older without asking (and `engram review reopen` undoes it), near-duplicates
are proposed as they are written, and the MCP tool acts by default and takes a level.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import DaemonProc, new_project

from engram_core.organise import subjects as sj
from engram_core.organise.verdicts import judge


def engram(daemon: DaemonProc, *args: str, cwd: Path) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd),
        env=daemon.env,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def import_lines(daemon: DaemonProc, proj: Path, rows: list[dict]) -> dict:
    data = proj / "import.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return engram(daemon, "import", str(data), cwd=proj)


LOOK_ALIKES = [  # one shape, different subjects and values: none of these contradict or duplicate
    "The billing service listens on port 8080.",
    "The search service listens on port 9200.",
    "The upload service listens on port 7070.",
    "To test the upload module, run npm test from the repo root; it needs STRIPE_MODE set and protobuf running.",
    "To test the export module, run npx playwright test from the repo root; it needs STRIPE_MODE set and tokio running.",
    "Before editing src/reporting/repository.py, start zustand with docker compose; load_config talks to it on "
    "port 5683.",
    "Before editing internal/reporting/handler.go, start zustand with docker compose; load_config talks to it on "
    "port 5291.",
    "Asked to add type hints to load_config during the reporting review (PR #7267).",
    "Asked to add type hints to load_config during the reporting review (PR #9778).",
    "The web app uses Jest as its test runner.",
    "The docs site uses Mocha as its test runner.",
]


def test_subject_matching_on_the_cli_path(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "lookalikes")
    rows = [
        {"content": t, "created_at": f"2026-0{1 + i // 9}-{10 + i % 9:02d}T10:00:00Z"}
        for i, t in enumerate(LOOK_ALIKES)
    ]
    # The true case among them: the billing port changed, said weeks later without naming the old one.
    rows.append(
        {"content": "The billing service listens on port 9090.", "created_at": "2026-03-01T10:00:00Z"}
    )
    assert import_lines(daemon, proj, rows)["stored"] == len(rows)
    review = engram(daemon, "review", "contradictions", cwd=proj)["contradictions"]
    pairs = [{x["a"]["content"], x["b"]["content"]} for x in review["items"]]
    assert pairs == [
        {"The billing service listens on port 8080.", "The billing service listens on port 9090."}
    ], pairs
    [item] = review["items"]
    assert review["counts"]["open"] == 1
    assert item["suggested"] == ("keep_b" if "9090" in item["b"]["content"] else "keep_a"), "the newer one"


def test_a_stated_change_supersedes_without_asking_and_reopen_undoes_it(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    proj = new_project(tmp_path, "supersede")
    old, new = (
        "Unit tests in the web package run with Jest.",
        "Migrated the web package's unit tests from Jest to Vitest.",
    )
    import_lines(
        daemon,
        proj,
        [
            {"content": old, "created_at": "2026-05-01T09:00:00Z"},
            {"content": new, "created_at": "2026-06-12T09:00:00Z"},
        ],
    )
    review = engram(daemon, "review", "contradictions", "--all", cwd=proj)["contradictions"]
    assert review["counts"] == {"open": 0, "resolved": 0, "resolved_without_asking": 1, "open_by_kind": {}}
    [item] = review["items"]
    assert item["decided_by"] == "policy" and item["status"] == "resolved"
    kept = item["a"] if item["resolution"] == "keep_a" else item["b"]
    dropped = item["b"] if kept is item["a"] else item["a"]
    assert kept["content"] == new and dropped["content"] == old and dropped["status"] == "superseded"
    recalled = engram(daemon, "recall", "which test runner does the web package use", cwd=proj)["hits"]
    assert [h["content"] for h in recalled[:1]] == [new] and old not in [h["content"] for h in recalled]
    history = engram(daemon, "show", dropped["id"], cwd=proj)["status_history"]
    assert history[-1]["to_status"] == "superseded" and item["id"] in history[-1]["reason"]

    engram(daemon, "review", "reopen", item["id"], cwd=proj)
    again = engram(daemon, "review", "contradictions", cwd=proj)["contradictions"]
    assert again["counts"]["open"] == 1 and again["items"][0]["id"] == item["id"]
    restored = engram(daemon, "show", dropped["id"], cwd=proj)
    assert restored["status"] != "superseded" and restored["status_history"][-1]["reason"].endswith(
        "reopened"
    )
    assert old in [
        h["content"] for h in engram(daemon, "recall", "web package test runner", cwd=proj)["hits"]
    ]


def test_near_duplicates_are_proposed_by_the_import_itself(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "dups")
    group = [
        "The checkout service listens on port 8443.",
        "Remember: the checkout service port is 8443.",
        "For local work the checkout service answers on port 8443.",
    ]
    apart = [
        "The shipping service listens on port 8443.",
        "The checkout service stores its data in Postgres.",
    ]
    import_lines(daemon, proj, [{"content": t} for t in group + apart])
    queue = engram(daemon, "review", "consolidations", cwd=proj)["consolidations"]
    [item] = queue["items"]
    assert item["reason"] == "duplicate" and sorted(s["content"] for s in item["sources"]) == sorted(group)
    assert item["evidence"] and "same subject" in " ".join(item["evidence"]), item["evidence"]
    assert queue["counts"]["pending"] == 1
    done = engram(daemon, "review", "approve", item["id"], cwd=proj)
    assert done["status"] == "completed" and done["memory"]["content"] in group
    assert set(done["sources"].values()) <= {"consolidated", "survivor"}
    for src, state in done["sources"].items():
        if state == "consolidated":
            assert engram(daemon, "show", src, cwd=proj)["consolidated_into"] == done["memory"]["id"]


def test_bulk_decisions_are_undoable(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "bulk")
    rows = [
        {"content": "The audit service listens on port 7001.", "created_at": "2026-02-01T10:00:00Z"},
        {"content": "The audit service listens on port 7002.", "created_at": "2026-03-01T10:00:00Z"},
        {"content": "Tests for the audit module run with pytest -x.", "created_at": "2026-02-01T10:00:00Z"},
        {"content": "Run the audit module's tests with pytest -x.", "created_at": "2026-02-02T10:00:00Z"},
    ]
    import_lines(daemon, proj, rows)
    before = engram(daemon, "review", cwd=proj)
    assert (
        before["contradictions"]["counts"]["open"] == 1 and before["consolidations"]["counts"]["pending"] == 1
    )
    settled = engram(daemon, "review", "resolve-all", "--min", "0.5", cwd=proj)
    assert settled["count"] == 1
    approved = engram(daemon, "review", "approve-all", cwd=proj)
    assert approved["count"] == 1
    after = engram(daemon, "review", cwd=proj)
    assert (
        after["contradictions"]["counts"]["open"] == 0 and after["consolidations"]["counts"]["pending"] == 0
    )
    merged = engram(daemon, "stats", cwd=proj)
    for item_id in settled["ids"] + approved["ids"]:
        engram(daemon, "review", "reopen", item_id, cwd=proj)
    again = engram(daemon, "review", cwd=proj)
    assert (
        again["contradictions"]["counts"]["open"] == 1 and again["consolidations"]["counts"]["pending"] == 1
    )
    statuses = {s["content"]: s["status"] for s in again["consolidations"]["items"][0]["sources"]}
    assert set(statuses.values()) <= {"created", "active"}, statuses
    assert merged, "stats answered"


def test_maintain_full_runs_the_whole_pipeline(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = new_project(tmp_path, "full")
    engram(daemon, "store", "Redis runs on port 6379 in docker-compose.yml", cwd=proj)
    out = engram(daemon, "maintain", "--full", cwd=proj)
    assert out["consolidation"]["levels"] == ["light", "full"], out["consolidation"]


def test_judge_keeps_look_alikes_apart_and_finds_changes() -> None:
    vocab = sj.Vocabulary()
    vocab.learn(LOOK_ALIKES)
    for i, a in enumerate(LOOK_ALIKES):
        for b in LOOK_ALIKES[i + 1 :]:
            v = judge(a, b, 0.9, vocab)
            assert v.cls == "distinct", (a, b, v)
    v = judge(
        "The billing service listens on port 8080.",
        "Heads up: the billing service no longer uses port 8080, it is on 9090 now.",
        0.8,
        vocab,
    )
    assert v.cls == "update" and v.strong and "8080 → 9090" in v.why
    plain = judge(
        "The billing service listens on port 8080.", "The billing service listens on port 9090.", 0.95, vocab
    )
    assert plain.cls == "update" and not plain.strong, "no stated change: asked, not applied"
