"""Hebbian associations and working-memory capacity, against a real store and the real embedding model."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engram_core.models import MemoryIn
from engram_core.organise import associations as assoc
from engram_core.service import EngramService


def put(svc: EngramService, p: str, text: str, **kw: object) -> str:
    return svc.store(MemoryIn(content=text, **kw), project=p).memory.id  # type: ignore[arg-type]


def weight(svc: EngramService, p: str, a: str, b: str) -> float | None:
    for x in assoc.memory_associations(svc, a, project=p):
        if x.id == b:
            return x.weight
    return None


def test_coactivation_adds_point_one(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "Deploy checklist: bump the version in pyproject.toml")
    b = put(svc, p, "Deploy checklist: tag the release in git")
    assert weight(svc, p, a, b) is None
    assoc.coactivate_memories(svc, [a, b], project=p)
    assert weight(svc, p, a, b) == pytest.approx(0.1)
    assoc.coactivate_memories(svc, [a, b], project=p)
    assert weight(svc, p, a, b) == pytest.approx(0.2)
    # Recall co-activates its top results too.
    svc.recall("deploy checklist", project=p, limit=2)
    assert weight(svc, p, a, b) == pytest.approx(0.3)
    # Persisted, not only cached: a fresh read from the database agrees.
    store = svc.project_store(p)
    assert store is not None
    rows = store.q1("SELECT weight, coactivation_count FROM associated_with")
    assert rows[0]["weight"] == pytest.approx(0.3) and rows[0]["coactivation_count"] == 3


def test_decay_and_pruning(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "The nightly job exports invoices to S3")
    b = put(svc, p, "Invoices exported to S3 are encrypted with KMS")
    for _ in range(2):
        assoc.coactivate_memories(svc, [a, b], project=p)
    store = svc.project_store(p)
    assert store is not None
    assert assoc.decay(svc, store, now=svc.now() + timedelta(days=5)) == 0
    assert weight(svc, p, a, b) == pytest.approx(0.2 - 0.05, abs=1e-3)
    assert assoc.decay(svc, store, now=svc.now() + timedelta(days=20)) == 1
    assert weight(svc, p, a, b) is None


def test_spreading_surfaces_an_associated_memory(env: tuple[EngramService, str]) -> None:
    svc, p = env
    seed = put(svc, p, "Deploy checklist for the API: run migrations first, then restart workers")
    linked = put(svc, p, "Rotate the signing key in Vault every quarter")
    for i in range(12):
        put(svc, p, f"Deploy note {i}: the staging API deploy of service {i} took {i + 3} minutes")
    for _ in range(4):
        assoc.coactivate_memories(svc, [seed, linked], project=p)

    def rank() -> int | None:
        ids = [
            h.memory.id
            for h in svc.recall(
                "deploy checklist for the API", project=p, limit=5, strengthen=False, log=False
            ).hits
        ]
        return ids.index(linked) + 1 if linked in ids else None

    with_spread = rank()
    spread = next(b for b in svc.extensions.boosters if b.booster is assoc.spread_booster)
    svc.extensions.rankers.remove(assoc.spread_ranker)
    svc.extensions.boosters.remove(spread)
    without = rank()
    svc.extensions.rankers.append(assoc.spread_ranker)
    svc.extensions.boosters.append(spread)
    assert with_spread is not None
    assert without is None or without > with_spread


def test_weak_edges_do_not_spread(env: tuple[EngramService, str]) -> None:
    svc, p = env
    seed = put(svc, p, "Deploy checklist for the API: run migrations first")
    linked = put(svc, p, "Rotate the signing key in Vault every quarter")
    assoc.coactivate_memories(svc, [seed, linked], project=p)  # 0.1 < 0.3
    store = svc.project_store(p)
    assert store is not None
    qv = svc.embedder.embed(["deploy checklist"])[0]
    from engram_core.retrieval.hybrid import Filters

    assert (
        assoc.spread_ranker(svc, [store], "deploy checklist", qv, Filters(statuses={"created", "active"}))
        == []
    )


def test_working_memory_spills_weakest_to_episodic(env: tuple[EngramService, str]) -> None:
    svc, p = env
    s = svc.start_session(project=p).session_key
    keys = []
    for i in range(9):
        keys.append(
            svc.store(
                MemoryIn(
                    content=f"scratch item {i}: look at function handler_{i}",
                    scope="session",
                    memory_type="working",
                    importance=0.1 + 0.1 * i,
                ),
                project=p,
                session=s,
            ).memory.id
        )
    mems = [svc.get(k, session=s) for k in keys]
    working = [m for m in mems if m.memory_type == "working"]
    spilled = [m for m in mems if m.memory_type == "episodic"]
    assert len(working) == assoc.working_capacity(svc) == 7
    assert {m.id for m in spilled} == set(keys[:2]), "the two weakest spill"
    assert all("spilled_from_working" in m.metadata for m in spilled)
    assert all(m.half_life_days == svc.half_lives()["episodic"] for m in spilled)


def test_the_adjacency_read_at_a_start_is_the_table(env: tuple[EngramService, str]) -> None:
    """The in-memory adjacency is read from the engine as one JSON text (not rows through the SDK's decoder): it
    must hold exactly the edges and weights the table holds, both ways."""
    svc, p = env
    a, b, c = (
        put(svc, p, t)
        for t in (
            "Deploy: run the migrations [/] first",
            "Deploy: restart the 🙂 workers",
            "Deploy: purge the CDN cache \\ then warm it",
        )
    )
    assoc.coactivate_memories(svc, [a, b], project=p)
    assoc.coactivate_memories(svc, [a, b, c], project=p)
    store = svc.project_store(p)
    assert store is not None
    assoc.state(svc).of(store).adjacency = None  # as after a start
    adj = assoc.adjacency(svc, store)
    rows = store.q1("SELECT in, out, weight FROM associated_with")
    expected: dict[str, dict[str, float]] = {}
    for r in rows:
        x, y = str(r["in"].id), str(r["out"].id)
        expected.setdefault(x, {})[y] = expected.setdefault(y, {})[x] = r["weight"]
    assert adj == expected and adj[a][b] == pytest.approx(0.2) and adj[c][a] == pytest.approx(0.1)
