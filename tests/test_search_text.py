"""A memory's search text (what the in-process index searches and the vector embeds) is stored only when it differs
from its content: without episode context (an import, a memory outside a session) it is the content, which every
reader falls back to, and storing it would keep the text twice (docs/storage.md)."""

from __future__ import annotations

from pathlib import Path

from engram_core.models import MemoryIn
from engram_core.service import EngramService
from engram_core.storage import record

TEXT = "zebrafinch4471 retries the upload [twice] \\ then gives up 🚀"


def test_a_search_text_equal_to_the_content_is_stored_once(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    mid = service.store(MemoryIn(content=TEXT), project=p).memory.id
    store = service.project_store(p)
    assert store is not None
    row = store.q1("SELECT content, search_text FROM ONLY $id", {"id": record(mid)})
    assert row["content"] == TEXT and row.get("search_text") is None
    # Read back from the rows (no snapshot yet: one is written at close), the index holds the content.
    store.reload_mirror()
    assert store.index.text(mid) == TEXT
    hits = service.recall("zebrafinch4471", project=p).hits
    assert hits and hits[0].memory.id == mid


def test_a_search_text_with_context_is_stored(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    sess = service.start_session(project=p).session_key
    service.store(
        MemoryIn(content="The upload worker lives in services/upload/worker.py", scope="session"),  # type: ignore[arg-type]
        project=p,
        session=sess,
    )
    second = service.store(MemoryIn(content=TEXT, scope="session"), project=p, session=sess).memory.id  # type: ignore[arg-type]
    store, key = service.scopes.locate(second, p, sess)
    got = store.q1("SELECT VALUE search_text FROM ONLY $id", {"id": record(key)})
    assert got and got != TEXT and TEXT in got and "worker.py" in got
