"""Issue #32 on the real path: two real Claude Code sessions (`claude -p … --plugin-dir <checkout>`, the model
scripted by mock_anthropic) in two worktrees of one git repository. What the first learned in the main checkout
must reach the second's first request to the model, run from a `git worktree add` checkout: one project memory,
kept under the data root by the repository's identity, not in either working tree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness import ClaudeCode, result_text
from mock_anthropic import MockAnthropic, mcp_tool, request_text, text
from support import DaemonProc

from engram_core.identity import identity_of

DECISION = "Decision: the worktree check writes its reports to build/wt-report.json, never to the repo root"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
    )


def test_a_worktree_session_sees_what_the_main_checkout_learned(
    claude_bin: Path, tmp_path: Path, engram_daemon: DaemonProc, mock_model: MockAnthropic
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README").write_text("a project\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "first", cwd=repo)
    worktree = tmp_path / "feature-wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature", cwd=repo)
    cc = ClaudeCode(claude_bin, tmp_path, engram_daemon.home, project=repo)

    mock_model.extend(
        [
            [
                mcp_tool(
                    "store_memory",
                    {"content": DECISION, "memory_type": "semantic", "scope": "project", "importance": 0.9},
                )
            ],
            [text("Stored.")],
        ]
    )
    first = cc.run("Remember where the worktree check writes its reports.", mock_model.url)
    assert first.returncode == 0, first.describe()
    stored = json.loads(result_text(first.tool_results()[0]))
    assert stored["action"] == "created" and stored["scope"] == "project", stored

    seen = len(mock_model.main_requests())
    mock_model.extend([[text("Noted.")]])
    second = cc.run("Where do the worktree reports go?", mock_model.url, cwd=worktree)
    assert second.returncode == 0, second.describe()
    assert second.session_id and second.session_id != first.session_id
    context = request_text(mock_model.main_requests()[seen])
    assert "build/wt-report.json" in context, context[:4000]

    # One store, keyed by the repository (its root commit: no remote), under the data root; none in the trees.
    main_id, wt_id = identity_of(repo), identity_of(worktree)
    assert main_id.kind == "root-commit" and main_id.key == wt_id.key
    assert (main_id.store_dir(engram_daemon.home) / "project.db").exists()
    assert not (repo / ".claude" / "engram" / "project.db").exists()
    assert not (worktree / ".claude" / "engram" / "project.db").exists()
