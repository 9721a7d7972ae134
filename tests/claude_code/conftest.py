"""Fixtures for the tests that drive the real Claude Code CLI (see harness.py and mock_anthropic.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ClaudeCode, find_claude  # noqa: E402
from mock_anthropic import MockAnthropic  # noqa: E402


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real `claude` binary, installed from npm into ~/.cache/cc when missing; skipped (reason printed) when
    node or npm is missing."""
    binary, why = find_claude()
    if binary is None:
        print(f"\nSKIP real Claude Code tests: {why}", file=sys.stderr)
        pytest.skip(f"real Claude Code unavailable: {why}")
    return binary


@pytest.fixture
def mock_model() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock
    assert not mock.errors, f"a scripted model step failed: {mock.errors}"


@pytest.fixture
def claude_code(claude_bin: Path, tmp_path: Path) -> ClaudeCode:
    """A private Claude Code user (HOME) with its own ENGRAM_HOME and a project folder (a git root)."""
    return ClaudeCode(claude_bin, tmp_path, tmp_path / "engram-home")
