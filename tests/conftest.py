"""Shared fixtures: the real embedding model (loaded once per test session) and real stores in temp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedder():  # noqa: ANN201 - LocalEmbedder, imported lazily so collection stays fast
    """The real all-MiniLM-L6-v2, loaded once for the whole run (import ~5 s, then ~15 ms a text)."""
    from engram_core.embeddings import LocalEmbedder

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
