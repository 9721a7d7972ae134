"""Shared fixtures: the real embedding model (loaded once per test session) and real stores in temp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every test, and every daemon or CLI process a test starts, checks the lock order (engram_core/storage/locks.py)
# and that no raw query writes the memory table (storage/guard.py): a violation anywhere fails the test.
os.environ["ENGRAM_LOCK_ORDER"] = "1"
os.environ["ENGRAM_RAW_WRITE_GUARD"] = "1"


@pytest.fixture(scope="session")
def embedder():  # noqa: ANN201 - LocalEmbedder, imported lazily so collection stays fast
    """The real all-MiniLM-L6-v2, loaded once for the whole run (import ~5 s, then ~15 ms a text)."""
    from engram_core.retrieval.embeddings import LocalEmbedder

    emb = LocalEmbedder()
    emb.embed(["warm up"])
    return emb


@pytest.fixture
def engram_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "engram-home"
    monkeypatch.setenv("ENGRAM_HOME", str(home))
    return home


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A fresh project folder (a .git marker makes it the project root)."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def service(engram_home: Path, embedder) -> Iterator:  # noqa: ANN001
    """An in-process EngramService on real embedded SurrealDB stores in a temp ENGRAM_HOME."""
    from engram_core.service import EngramService

    svc = EngramService(engram_home, embedder=embedder)
    yield svc
    svc.close()


# ── daemon fixtures (tests/test_daemon.py, test_hooks.py, test_mcp.py, test_cli.py, test_faults.py) ──
@pytest.fixture
def env(tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch) -> Iterator:  # noqa: ANN001
    """(service, project path) for the self-organising tests: a fresh home and project per test."""
    from engram_core.service import EngramService

    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(home=tmp_path / "home", embedder=embedder, recover_sessions=False)
    yield svc, str(proj)
    svc.close()


from support import HOOK_SCRIPT, REPO_ROOT, DaemonProc, new_project  # noqa: E402, F401


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """One real daemon with the real model for the whole session (the model load costs ~5 s)."""
    d = DaemonProc(tmp_path_factory.mktemp("engram-daemon")).start()
    c = d.client()
    c.call("store", memory={"content": "warm-up memory for the shared daemon", "scope": "user"})
    c.close()
    yield d
    d.stop()


@pytest.fixture
def light_daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    """A daemon of its own without the embedding model (fast start) for lifecycle and fault tests."""
    d = DaemonProc(tmp_path / "home", model=False)
    yield d
    d.stop()


@pytest.fixture(autouse=True)
def _no_leaked_settings() -> Iterator[None]:
    """A test that leaves an ENGRAM_* variable behind changes every later test (it once switched the TUI
    demo build to BM25 only, in CI alone): fail the test that leaked it."""
    before = {k: v for k, v in os.environ.items() if k.startswith("ENGRAM_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("ENGRAM_")}
    assert after == before, (
        f"this test left ENGRAM_* settings changed: {set(after.items()) ^ set(before.items())}"
    )


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real `claude` binary, installed from npm into ~/.cache/cc when missing; skipped (reason printed) when
    node or npm is missing. Session-scoped, so it is found before any test points HOME at a temp dir."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "claude_code"))
    from harness import find_claude

    binary, why = find_claude()
    if binary is None:
        print(f"\nSKIP real Claude Code tests: {why}", file=sys.stderr)
        pytest.skip(f"real Claude Code unavailable: {why}")
    return binary
