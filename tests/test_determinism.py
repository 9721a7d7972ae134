"""Reproducible builds: the service takes its clock and id source, and organise and recall never depend on
the order of a set (PYTHONHASHSEED), so the same calls give the same store, ids and scores in every process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from support import REPO_ROOT

from engram_core.clock import FrozenClock
from engram_core.ids import SequentialIds, is_ulid, ulid
from engram_core.models import MemoryIn
from engram_core.retrieval.embeddings import NoEmbedder
from engram_core.service import EngramService

T0 = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)


def test_sequential_ids_are_ulids_in_order_and_repeat() -> None:
    a, b = SequentialIds(T0), SequentialIds(T0)
    first = [a() for _ in range(40)]
    assert first == [b() for _ in range(40)]
    assert first == sorted(first) and len(set(first)) == 40 and all(is_ulid(i) for i in first)
    assert first[0][:10] == ulid(int(T0.timestamp() * 1000))[:10]  # the time part is the given instant


def test_the_service_writes_with_the_clock_and_ids_it_is_given(tmp_path: Path) -> None:
    """No module is patched: every id and Python-side stamp of a write comes from what the service was given."""
    clock = FrozenClock(T0)
    given: list[str] = []
    source = SequentialIds(T0)

    def ids() -> str:
        given.append(source())
        return given[-1]

    proj = tmp_path / "proj"
    proj.mkdir()
    with EngramService(tmp_path / "home", embedder=NoEmbedder(), clock=clock, ids=ids) as svc:
        sess = svc.start_session(project=str(proj))
        mem = svc.store(
            MemoryIn(content="The API is served by uvicorn behind nginx"), project=str(proj)
        ).memory
        clock.advance(days=2)
        svc.set_status(mem.id, "archived", reason="test", project=str(proj))
        got = svc.get(mem.id, project=str(proj))
        other = svc.store(
            MemoryIn(content="Deploys go out from the release branch"), project=str(proj)
        ).memory
        clock.advance(days=1)
        merged = svc.store(MemoryIn(content="Deploys go out from the release branch"), project=str(proj))
        clock.advance(days=1)
        gone = svc.forget(other.id, project=str(proj), reason="test", erase=True, confirm=True)
    assert sess.session_key == "s_" + given[0]
    assert mem.id in given
    assert got.created_at == T0
    assert got.updated_at == T0 + timedelta(days=2)
    # The first history entry is written from Python; later ones by a database event on its own clock.
    assert got.status_history[0].at == T0
    assert other.id in given and merged.action == "merged" and merged.memory.id == other.id
    assert merged.memory.updated_at == T0 + timedelta(days=3)
    assert gone.updated_at == T0 + timedelta(days=4)


# Built twice in child processes with different hash seeds: everything a user sees must be the same, to the bit.
_BUILD = r"""
import json, sys
from datetime import UTC, datetime
from pathlib import Path
from engram_core.clock import FrozenClock
from engram_tui.demo import build_demo
from engram_core.ids import SequentialIds
from engram_core.service import EngramService

at = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
root = Path(sys.argv[1])
svc = EngramService(root / "home", clock=FrozenClock(at), ids=SequentialIds(at))
rep = build_demo(svc, root / "projects", at)
p = rep.project_root

def dump(x):
    x = x.model_dump(mode="json") if hasattr(x, "model_dump") else x
    if isinstance(x, dict):
        # The one stamp still taken from the database's own clock (a schema event): left out, by name.
        return {k: ("db clock" if k == "at" and x.get("from_status") else dump(v))
                for k, v in x.items()}
    return [dump(v) for v in x] if isinstance(x, list) else x

out = {"report": rep.organise,
       "memories": [[m.id for m in svc.list_memories(scope=sc, project=p, limit=1000).items]
                    for sc in ("project", "user")],
       "consolidations": [dump(c) for c in svc.list_consolidations(project=p)],
       "contradictions": [dump(c) for c in svc.list_contradictions(project=p)],
       "graph": [dump(svc.search_knowledge_graph(q, project=p, depth=2, limit=4))
                 for q in ("postgres", "redis", "uv", "pytest", "fastapi")],
       "recall": [[(h.memory.id, h.scores.model_dump()) for h in svc.recall(q, project=p, limit=20).hits]
                  for q in ("how do I run the tests", "redis idempotency keys ttl", "webhook retries attempts cap",
                            "stripe webhook signing secret", "postgres alembic migrations versions")]}
svc.close()
print(json.dumps(out, sort_keys=True))
"""


def _build(root: Path, seed: int) -> dict:
    shutil.rmtree(root, ignore_errors=True)  # the same path each time: project paths are part of the output
    env = {**__import__("os").environ, "PYTHONHASHSEED": str(seed)}
    env.pop("ENGRAM_HOME", None)
    out = subprocess.run(
        [sys.executable, "-c", _BUILD, str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(REPO_ROOT),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_demo_build_and_recall_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    one, two = _build(tmp_path / "demo", 1), _build(tmp_path / "demo", 2)
    assert one["consolidations"] and one["contradictions"] and one["recall"][0]  # the organise layer ran
    for part in one:
        assert one[part] == two[part], part
