"""Disk full and read-only data directories: a clear error, nothing half-written, nothing acknowledged lost.

Uses a small tmpfs (these machines run tests as root); skipped where mounting is not allowed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_core.models import MemoryIn
from engram_core.retrieval.embeddings import NoEmbedder
from engram_core.service import EngramService
from engram_core.storage import StoreError


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_gives_a_clear_error_and_keeps_every_acknowledged_write(small_disk: Path) -> None:
    home, proj = small_disk / "home", small_disk / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(home, embedder=NoEmbedder())
    acked: list[str] = []
    with pytest.raises(StoreError, match="full: nothing was stored"):
        for i in range(10_000):
            acked.append(svc.store(MemoryIn(content=f"note {i} " + "x" * 2000), project=str(proj)).memory.id)
    assert len(acked) > 10
    # The mirror did not take the refused write either.
    assert len(svc.project_store(str(proj)).summaries) == len(acked)
    svc.close()
    subprocess.run(["mount", "-o", "remount,size=30m", str(small_disk)], check=True)
    with EngramService(home, embedder=NoEmbedder()) as again:  # opens cleanly once space is back
        ids = {m.id for m in again.list_memories(project=str(proj), limit=5000).items}
        assert ids == set(acked)
        assert again.store(MemoryIn(content="after space freed"), project=str(proj)).action == "created"


def test_read_only_data_directory_is_named_in_the_error(small_disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    with pytest.raises(StoreError, match="ENGRAM_HOME"):
        EngramService(small_disk / "home", embedder=NoEmbedder())
