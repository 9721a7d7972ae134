"""Fixtures for the tests that drive the real Claude Code CLI (see harness.py and mock_anthropic.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ClaudeCode  # noqa: E402
from mock_anthropic import MockAnthropic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import DaemonProc  # noqa: E402


@pytest.fixture
def mock_model() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock
    assert not mock.errors, f"a scripted model step failed: {mock.errors}"


@pytest.fixture(scope="session")
def cc_engram_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ENGRAM_HOME for these tests (each test has its own project, so nothing of one reaches another)."""
    return tmp_path_factory.mktemp("cc-engram-home")


@pytest.fixture(scope="session")
def engram_daemon(cc_engram_home: Path, claude_bin: Path) -> Iterator[DaemonProc]:
    """The daemon on that home, started as `engram setup claude-code` leaves it (launcher recorded, model
    loaded); shared, because the model load costs seconds."""
    d = DaemonProc(cc_engram_home).start()
    yield d
    d.stop()


@pytest.fixture
def claude_code(claude_bin: Path, tmp_path: Path, cc_engram_home: Path) -> ClaudeCode:
    """A private Claude Code user (HOME) and a project folder (a git root) of its own."""
    return ClaudeCode(claude_bin, tmp_path, cc_engram_home)
