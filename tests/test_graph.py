"""Knowledge graph against a real store and the real embedding model."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from surrealdb import RecordID

from engram_core.config import Settings
from engram_core.core import Extensions
from engram_core.models import EntityIn, MemoryIn
from engram_core.organise import graph, graph_api, relations
from engram_core.service import EngramService
from engram_core.storage import graph_mirror, key_of, text_lines


def store(svc: EngramService, project: str, text: str, **kw: object) -> str:
    return svc.store(MemoryIn(content=text, **kw), project=project).memory.id  # type: ignore[arg-type]


def test_mentions_and_dedup_by_name_and_type(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = store(svc, p, "auth.py raises TokenExpiredError when the JWT expires")
    b = store(svc, p, "TokenExpiredError also shows up in the worker logs")
    res = graph_api.search_knowledge_graph(svc, "TokenExpiredError", project=p)
    ents = [e for e in res.entities if e.name == "TokenExpiredError"]
    assert len(ents) == 1, "same name and type must be one entity"
    assert ents[0].mention_count == 2 and set(ents[0].memory_ids) == {a, b}


def test_an_answer_lists_an_entitys_newest_memories_only(
    env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library named in 20,000 notes of a 100k store put all of them in every graph answer (megabytes into the
    agent's context, 93 s to gather): an entity lists its newest MENTIONS_SHOWN, mention_count says how many."""
    monkeypatch.setattr(graph_api, "MENTIONS_SHOWN", 2)
    svc, p = env
    ids = [
        store(svc, p, f"pydantic validates the {what} payload")
        for what in ("login", "billing", "search", "export")
    ]
    res = graph_api.search_knowledge_graph(svc, "pydantic", project=p)
    ent = next(e for e in res.entities if e.name == "pydantic")
    assert ent.mention_count == 4 and ent.memory_ids == ids[2:]  # memory ids are ULIDs: newest last
    assert len(res.memory_ids) == len(set(res.memory_ids)) and set(ids[2:]) <= set(res.memory_ids)
    assert not set(ids[:2]) & set(res.memory_ids)


def test_co_mentions_are_derived_from_the_memories_entity_lists(env: tuple[EngramService, str]) -> None:
    """Schema 011: a memory's row holds the entities its text names, in order; two of them named together are linked
    (`related_to`, from the one named first) with no row of their own, between the first six that are not commands,
    0.3 strong and +0.1 for each further memory naming them in that order; erasing a memory takes its part away. The
    graph tools show them as relations whose evidence is the memories linking them."""
    svc, p = env
    a = store(svc, p, "src/db.py opens sqlalchemy sessions; run `make test` before merging [x] \\ 🚀")
    b = store(svc, p, "sqlalchemy sessions leak when src/db.py forgets to close them")
    a2 = store(svc, p, "src/db.py pools sqlalchemy connections per worker")
    c = store(svc, p, "In src/a.py and src/b.py, redis, celery, httpx, django and alembic share settings")
    pstore = svc.project_store(p)
    assert pstore is not None
    assert "mentions" not in (pstore.q1("INFO FOR DB") or {}).get("tables", {})
    assert pstore.q1("SELECT VALUE id FROM relates_to") == [], "nothing stored for co-mentions"
    listed = pstore.q1("SELECT VALUE entities.name FROM ONLY $m", {"m": RecordID("memory", a)})
    assert listed[:2] == ["src/db.py", "sqlalchemy"] and set(listed[2:]) == {
        "make test",
        "make",
    }  # as the text names them

    def links(query: str) -> dict[tuple[str, str], tuple[float, list[str]]]:
        rels = graph_api.search_knowledge_graph(svc, query, project=p).relations
        assert all(r.relation_type == "related_to" and r.id.startswith(graph_mirror.CO_PREFIX) for r in rels)
        return {(r.source_name, r.target_name): (round(r.weight, 6), r.evidence) for r in rels}

    got = links("sqlalchemy")
    assert got[("src/db.py", "sqlalchemy")] == (0.4, [a, a2]) and got[("sqlalchemy", "src/db.py")] == (
        0.3,
        [b],
    )
    assert not [k for k in got if "make test" in k], "a command is not linked"
    linked = {n for k in links("redis") for n in k}
    assert {"src/a.py", "django"} <= linked and "alembic" not in linked, "the first six only"
    g = graph.mirror(svc, pstore)
    assert (
        sum(k.startswith(graph_mirror.CO_PREFIX) for k in g.rels) == 3 + 1 + 15
    )  # a's three (a2 names one again), b's, c's

    svc.forget(a2, project=p, erase=True, confirm=True)
    assert links("sqlalchemy")[("src/db.py", "sqlalchemy")] == (0.3, [a])
    assert pstore.q1("SELECT VALUE entities FROM ONLY $m", {"m": RecordID("memory", a2)}) is None
    assert graph_mirror.load_mirror(pstore).rels == graph.mirror(svc, pstore).rels
    assert c in graph_api.search_knowledge_graph(svc, "celery", project=p).memory_ids


def test_the_mirror_takes_a_memory_once_even_when_read_before_its_entities() -> None:
    """A new memory's row (with its list) is written before its entities: a mirror loaded between the two has its
    mentions and waits for `add_memory` for its co-mentions; a memory taken twice counts once."""
    g = graph.GraphMirror()
    g.mentioned_by = {"e1": {"m1": None}, "e2": {"m1": None}}
    g.pending["m1"] = ["e1", "e2"]
    for k in ("e1", "e2"):
        g.add_entity(k, "library", k)
    g.add_memory("m1", ["e1", "e2"])
    g.add_memory("m1", ["e1", "e2"])
    assert (
        g.rels == {graph_mirror.co_key("e1", "e2"): ("e1", "e2", graph.CO_MENTION_WEIGHT)} and not g.pending
    )
    g.add_memory("m2", ["e1", "e2"])
    assert g.rels[graph_mirror.co_key("e1", "e2")] == ("e1", "e2", pytest.approx(0.4))
    g.add_memory("m3", ["e2", "e1"])  # the other order: a link of its own
    assert g.rels[graph_mirror.co_key("e2", "e1")] == ("e2", "e1", graph.CO_MENTION_WEIGHT)


def test_dedup_by_embedding_cosine(env: tuple[EngramService, str]) -> None:
    svc, p = env
    out = graph_api.add_entities(
        svc, [EntityIn(name="user authentication", entity_type="concept")], project=p
    )
    assert len(out.created) == 1
    again = graph_api.add_entities(
        svc,
        [
            EntityIn(name="User Authentication", entity_type="concept"),
            EntityIn(name="authentication of users", entity_type="concept"),
            EntityIn(name="database migrations", entity_type="concept"),
        ],
        project=p,
    )
    assert [e.name for e in again.merged] == ["user authentication", "user authentication"]
    assert [e.name for e in again.created] == ["database migrations"]
    # Different type: never merged, however close the name.
    other = graph_api.add_entities(
        svc, [EntityIn(name="user authentication", entity_type="decision")], project=p
    )
    assert len(other.created) == 1


def test_maintenance_merges_extracted_near_duplicates(env: tuple[EngramService, str]) -> None:
    svc, p = env
    store(svc, p, "class UserRepository wraps the users table")
    store(svc, p, "class UsersRepository was the old name")
    pstore = svc.project_store(p)
    assert pstore is not None
    merged = graph.merge_similar_entities(svc, pstore)
    assert merged >= 1
    names = {e.name for e in graph_api.search_knowledge_graph(svc, "repository", project=p).entities}
    assert len(names & {"UserRepository", "UsersRepository"}) == 1


def test_relation_strengthens_on_repeated_evidence(env: tuple[EngramService, str]) -> None:
    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError for stale tokens")
    r1 = [
        r
        for r in graph_api.search_knowledge_graph(svc, "auth.py", project=p).relations
        if r.relation_type == "causes"
    ]
    store(svc, p, "Again today: auth.py raises TokenExpiredError after a deploy")
    r2 = [
        r
        for r in graph_api.search_knowledge_graph(svc, "auth.py", project=p).relations
        if r.relation_type == "causes"
    ]
    assert len(r1) == len(r2) == 1
    assert r2[0].weight == pytest.approx(r1[0].weight + 0.1)
    assert r2[0].confidence == pytest.approx(r1[0].confidence + 0.05)
    assert len(r2[0].evidence) == 2
    # The agent stating it too strengthens the same edge, it does not add one.
    out = relations.relate_entities(svc, "auth.py", "TokenExpiredError", "causes", evidence=None, project=p)
    assert out.strengthened and out.relation.weight == pytest.approx(r2[0].weight + 0.1)


def test_pruning_weak_entities_and_stale_edges(env: tuple[EngramService, str]) -> None:
    svc, p = env
    graph_api.add_entities(
        svc,
        [
            EntityIn(name="flaky idea", entity_type="concept"),
            EntityIn(name="solid idea", entity_type="concept"),
        ],
        project=p,
    )
    relations.relate_entities(svc, "flaky idea", "solid idea", "related_to", confidence=0.1, project=p)
    pstore = svc.project_store(p)
    assert pstore is not None
    pstore.q("UPDATE entity SET confidence = 0.2 WHERE name = 'flaky idea'")
    assert graph.prune_graph(svc, pstore) == (0, 0), "nothing is old enough yet"
    later = svc.now() + timedelta(days=31)
    pruned, stale = graph.prune_graph(svc, pstore, now=later)
    assert pruned == 1
    names = {
        e.name
        for e in graph_api.search_knowledge_graph(svc, "idea", project=p, include_invalid=True).entities
    }
    assert names == {"solid idea"}
    graph_api.add_entities(svc, [EntityIn(name="other idea", entity_type="concept")], project=p)
    relations.relate_entities(svc, "other idea", "solid idea", "related_to", confidence=0.1, project=p)
    assert graph.prune_graph(svc, pstore, now=later) == (0, 1)
    rels = graph_api.search_knowledge_graph(svc, "other idea", project=p, include_invalid=True).relations
    assert rels and all(r.invalid_at is not None for r in rels)
    assert not graph_api.search_knowledge_graph(svc, "other idea", project=p).relations


def test_graph_signal_surfaces_a_related_memory(env: tuple[EngramService, str]) -> None:
    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError when a session outlives its JWT")
    target = store(svc, p, "Wrap refresh_token() in a retry so TokenExpiredError never reaches users")
    for i in range(40):
        store(
            svc, p, f"Note {i}: problems with the build cache in module_{i} slowed CI for retries and users"
        )

    def rank_of(key: str) -> int | None:
        hits = svc.recall("problems in auth.py", project=p, limit=5, strengthen=False, log=False).hits
        ids = [h.memory.id for h in hits]
        return ids.index(key) + 1 if key in ids else None

    with_graph = rank_of(target)
    svc.extensions.rankers.remove(graph.graph_ranker)
    without = rank_of(target)
    svc.extensions.rankers.append(graph.graph_ranker)
    assert with_graph is not None, "the memory related through TokenExpiredError should surface"
    assert without is None or without > with_graph


def test_memory_graph_for_detail_pane(env: tuple[EngramService, str]) -> None:
    svc, p = env
    k = store(svc, p, "We switched from Jest to Vitest in packages/web")
    g = graph_api.memory_graph(svc, k, project=p)
    assert {"jest", "vitest", "packages/web"} <= {e.name for e in g.entities}
    assert any(
        r.relation_type == "replaces" and r.source_name == "vitest" and r.target_name == "jest"
        for r in g.relations
    )
    # Also reachable through the service object, as the TUI calls it.
    assert svc.memory_graph(k, project=p).memory_ids == [k]  # type: ignore[attr-defined]


def test_a_promoted_memory_joins_the_graph_of_its_new_scope(env: tuple[EngramService, str]) -> None:
    svc, p = env
    sess = svc.start_session(project=p, claude_session_id="graph-promote").session_key
    mid = svc.store(
        MemoryIn(
            content="The payments service uses pytest with the xdist plugin and Redis for locks",
            scope="session",
        ),
        project=p,
        session=sess,
    ).memory.id
    promoted = svc.promote(mid, "project", project=p, session=sess).promoted
    assert len(promoted) == 1
    target = promoted[0].split(":", 1)[1]
    names = {e.name.lower() for e in graph_api.memory_graph(svc, target, project=p).entities}
    assert {"pytest", "redis"} <= names


def _snapshot(g: graph.GraphMirror) -> tuple[object, ...]:
    rels = {k: (a, b, round(w, 6)) for k, (a, b, w) in g.rels.items()}
    touching = {k: v for k, v in g.touching.items() if v}
    conflicting = {k: v for k, v in g.conflicting.items() if v}
    return g.names, g.types, g.mentioned_by, rels, touching, conflicting


def test_graph_mirror_stays_in_step_with_the_store(env: tuple[EngramService, str]) -> None:
    """Recall reads the graph from memory; after every kind of graph write the mirror kept in step must equal
    one loaded afresh from the database."""
    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError when the JWT expires")
    pstore = svc.project_store(p)
    assert pstore is not None
    kept = graph.mirror(svc, pstore)  # loaded now: every write below must update it

    def warm() -> (
        None
    ):  # fills the neighbour cache recall reads: each next write must invalidate what it changes
        for e in list(kept.types):
            kept.near(e)

    warm()
    store(svc, p, "Again: auth.py raises TokenExpiredError after a deploy")  # strengthens the edge
    warm()
    store(svc, p, "We switched from jest to vitest in packages/web; we use pytest for the API")
    warm()
    graph_api.add_entities(
        svc,
        [
            EntityIn(name="flaky idea", entity_type="concept"),
            EntityIn(name="solid idea", entity_type="concept"),
        ],
        project=p,
    )
    warm()
    relations.relate_entities(svc, "flaky idea", "solid idea", "related_to", confidence=0.1, project=p)
    warm()
    relations.relate_entities(svc, "auth.py", "TokenExpiredError", "causes", project=p)
    warm()
    assert graph.prune_graph(svc, pstore, now=svc.now() + timedelta(days=31))[1] >= 1  # ends the stale edge
    assert graph.mirror(svc, pstore) is kept, "a stale edge ending must not force a reload"
    assert any(w >= 0.6 for _a, _b, w in kept.rels.values()), "the repeated evidence strengthened an edge"
    fresh = graph_mirror.load_mirror(pstore)
    assert _snapshot(kept) == _snapshot(fresh)
    assert any(kept.conflicting.values()), "the writes above must give conflict-prone relations to compare"
    assert {e: kept.near(e) for e in fresh.types} == {e: fresh.near(e) for e in fresh.types}
    assert any(fresh.near(e) for e in fresh.types), "the comparison above must cover some neighbours"


def test_the_relation_check_reads_an_entitys_conflict_prone_relations_from_the_mirror(
    env: tuple[EngramService, str],
) -> None:
    """A write that states a conflict-prone relation checks the live ones of those types at either end. They come
    from the graph mirror (a popular entity has thousands of co-mention relations, which the database would fetch
    first): for every entity, the same relations the database finds through its graph keys."""
    svc, p = env
    libs = ["redis", "celery", "httpx", "django", "alembic", "sqlalchemy", "pydantic", "pytest"]
    for i, lib in enumerate(libs):  # co-mentions around pytest: its relations are mostly related_to
        store(svc, p, f"In src/app/mod_{i}.py, {lib} and pytest fixtures share the settings from conftest.py")
    store(svc, p, "We switched from jest to pytest for the API tests")
    store(svc, p, "auth.py raises TokenExpiredError when the JWT expires; we use redis for sessions")
    relations.relate_entities(svc, "pytest", "flaky retries", "causes", project=p)
    pstore = svc.project_store(p)
    assert pstore is not None
    g = graph.mirror(svc, pstore)
    seen = 0
    for ekey in sorted(g.types):
        rows = (
            pstore.q1(
                "SELECT VALUE record::id(id) FROM array::distinct($e<->relates_to) "
                "WHERE invalid_at IS NONE AND relation_type IN $t",
                {"e": RecordID("entity", ekey), "t": sorted(graph.CONFLICT_TYPES)},
            )
            or []
        )
        got = [key_of(r) for r in graph._conflict_relations(svc, pstore, [ekey])]
        assert got == sorted(str(r) for r in rows), ekey
        seen += bool(got)
        assert len(g.touching.get(ekey, ())) >= len(got)
    assert seen >= 2
    (pytest_key,) = g.names["pytest"]
    assert len(g.touching[pytest_key]) > len(g.conflicting[pytest_key]) >= 2


def _record_queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SurrealQL text sent to the engine from now on."""
    from engram_core.storage import Connection

    sent: list[str] = []
    real = Connection.run

    def spy(self: Connection, ns: str, db: str, sql: str, params: object = None) -> list[object]:
        sent.append(sql)
        return real(self, ns, db, sql, params)  # type: ignore[arg-type]

    monkeypatch.setattr(Connection, "run", spy)
    return sent


def test_recall_sends_no_graph_query(env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch) -> None:
    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError when a session outlives its JWT")
    target = store(svc, p, "Wrap refresh_token() in a retry so TokenExpiredError never reaches users")
    svc.recall("warm up", project=p, strengthen=False, log=False)  # loads the mirrors
    sent = _record_queries(monkeypatch)
    hits = svc.recall("problems in auth.py", project=p, strengthen=False, log=False).hits
    assert target in [h.memory.id for h in hits]
    assert not [s for s in sent if "relates_to" in s or "mentions" in s or "FROM entity" in s], sent


def test_organise_setting_off_leaves_the_write_and_recall_paths_plain(
    tmp_path: Path, embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(
        home=tmp_path / "home",
        embedder=embedder,
        settings=Settings(organise=False),  # type: ignore[arg-type]
        recover_sessions=False,
    )
    try:
        assert svc.extensions == Extensions(), "nothing registered on the core"
        k = store(svc, str(proj), "auth.py raises TokenExpiredError when the JWT expires")
        assert svc.recall("auth.py", project=str(proj)).hits[0].memory.id == k
        assert graph_api.search_knowledge_graph(svc, "auth.py", project=str(proj)).entities == [], (
            "no extraction ran"
        )
    finally:
        svc.close()


def test_a_close_rewrites_the_graph_snapshot_only_when_the_graph_changed(
    env: tuple[EngramService, str],
) -> None:
    """At 100,000 memories the graph snapshot took 1.5 s of every stop to rebuild and write, after recalls that
    changed no entity, mention or relation."""
    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError when the JWT expires")
    home = svc.home
    graph.mirror(svc, svc.project_store(p))  # type: ignore[arg-type]  # loaded: the close writes its snapshot
    svc.close()

    def reopen() -> tuple[EngramService, Any]:
        again = EngramService(home=home, embedder=svc.embedder, recover_sessions=False)
        pstore = again.project_store(p)
        assert pstore is not None
        graph.mirror(again, pstore)
        return again, pstore

    again, pstore = reopen()
    path = graph_mirror.snapshot_path(pstore)
    written = path.stat()
    again.recall("what does auth.py raise?", project=p)
    again.close()
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns), "rewritten"

    again, pstore = reopen()
    store(again, p, "billing/webhooks.py retries with tenacity")
    after = _snapshot(graph.mirror(again, pstore))
    again.close()
    assert path.stat().st_ino != written.st_ino or path.stat().st_mtime_ns != written.st_mtime_ns
    third, pstore = reopen()
    try:
        assert _snapshot(graph.mirror(third, pstore)) == after
        assert any("webhooks.py" in name for name in graph.mirror(third, pstore).names)
    finally:
        third.close()


def test_graph_mirror_opens_from_its_snapshot_only_while_the_graph_is_unchanged(
    env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph mirror is saved at close and read back at the next start instead of every edge, but only while
    the graph's change counter (schema 005) still matches: a write it did not see makes it read the store."""

    svc, p = env
    store(svc, p, "auth.py raises TokenExpiredError when the JWT expires")
    store(svc, p, "We switched from jest to vitest in packages/web; we use pytest for the API")
    home = svc.home
    pstore = svc.project_store(p)
    assert pstore is not None
    before = _snapshot(graph.mirror(svc, pstore))
    assert before[3], "the memories above must give relations to compare"
    v2 = pstore.side_snapshot_path(
        "graph"
    )  # a version 2 snapshot (JSON) an older Engram left beside the store
    assert v2 is not None
    v2.write_text("{}")
    svc.close()

    again = EngramService(home=home, embedder=svc.embedder, recover_sessions=False)
    try:
        pstore = again.project_store(p)
        assert pstore is not None
        sent = _record_queries(monkeypatch)
        loaded = graph.mirror(again, pstore)
        assert not [s for s in sent if "FROM relates_to" in s or "FROM mentions" in s], sent
        assert _snapshot(loaded) == before == _snapshot(graph_mirror.load_mirror(pstore))
        # Each key is written once and referred to by position (v1 repeated them: twice the bytes); since v3 the
        # positions are int32 arrays in an .npz, and v2's JSON file is removed when v3 is written.
        import numpy as np

        path = graph_mirror.snapshot_path(pstore)
        assert path.suffix == ".npz" and not v2.exists()
        with np.load(path, allow_pickle=False) as z:
            ents, mems = text_lines(z["entities"]), text_lines(z["memories"])
        assert len(set(ents)) == len(ents) and len(set(mems)) == len(mems)
        assert set(loaded.types) <= set(ents) and {
            m for ms in loaded.mentioned_by.values() for m in ms
        } == set(mems)

        # A write the mirror does not follow (the SurrealQL console) moves the counter and keeps the mirror
        # from being saved: the snapshot on disk no longer counts, and the next start reads the store.
        graph.mirror(again, pstore)
        res = again.run_query("UPDATE relates_to SET weight = 0.99", allow_writes=True, project=p)
        assert res.ok, res.message
        again.close()
        third = EngramService(home=home, embedder=svc.embedder, recover_sessions=False)
        try:
            pstore = third.project_store(p)
            assert pstore is not None
            assert pstore.graph.mirror is None
            rels = graph.mirror(third, pstore).rels
            assert {w for k, (_a, _b, w) in rels.items() if not k.startswith(graph_mirror.CO_PREFIX)} == {
                0.99
            }
            assert {w for k, (_a, _b, w) in rels.items() if k.startswith(graph_mirror.CO_PREFIX)} == {0.3}, (
                "derived"
            )
        finally:
            third.close()
    finally:
        again.close()


def test_a_hubs_neighbours_are_kept_to_the_first_near_keep_and_traversal_still_sees_what_it_needs() -> None:
    """A popular entity has thousands of relations: the mirror keeps its first NEAR_KEEP neighbours (kept whole,
    the 96 such entities of the 100k set held 258,000), and a caller asking for more gets them all, in order."""
    g = graph.GraphMirror()
    g.add_entity("hub", "library", "hub")
    n = graph_mirror.NEAR_KEEP * 3
    for i in range(n):
        g.add_entity(f"e{i:03d}", "library", f"e{i:03d}")
        g.set_relation(f"r{i:03d}", "hub", f"e{i:03d}", 0.2 + 0.8 * ((i * 37) % n) / n, live=True)
    full = sorted(
        ((f"e{i:03d}", 0.5 * (0.2 + 0.8 * ((i * 37) % n) / n)) for i in range(n)), key=lambda t: (-t[1], t[0])
    )
    with g.lock:
        assert g.near("hub") == full  # computed: whole
        assert len(g._near["hub"]) == graph_mirror.NEAR_KEEP  # kept: the first NEAR_KEEP
        assert (
            g.near("hub")[: graph_mirror.NEAR_KEEP] == full[: graph_mirror.NEAR_KEEP]
        )  # answered from what was kept
        assert g.near("hub", graph_mirror.NEAR_KEEP + 10) == full  # more asked: computed again, whole
        g.set_relation("r000", "hub", "e000", 1.0, live=True)  # a change drops what was kept
        assert g.near("hub")[0] == ("e000", 0.5)


def test_the_daemon_works_out_the_hubs_neighbours_ahead(
    env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """warm_hubs fills the neighbours of every entity with HUB_RELATIONS relations or more (only those), and a
    process that works in the background (the daemon) starts it when a store's graph mirror is built."""
    g = graph.GraphMirror()
    for hub, n in (("big", graph_mirror.HUB_RELATIONS), ("small", graph_mirror.HUB_RELATIONS - 1)):
        g.add_entity(hub, "library", hub)
        for i in range(n):
            g.add_entity(f"{hub}{i}", "library", f"{hub}{i}")
            g.set_relation(f"{hub}-r{i}", hub, f"{hub}{i}", 0.5, live=True)
    asked: list[int] = []
    assert graph.warm_hubs(g, lambda: asked.append(1)) == 1
    assert "big" in g._near and "small" not in g._near and asked == [1]  # waited once, before the hub
    assert graph.warm_hubs(g) == 0  # already there

    import threading

    import engram_core.storage.engine as store_mod

    svc, proj = env
    store = svc.project_store(proj)
    assert store is not None
    warmed = threading.Event()
    seen: list[graph.GraphMirror] = []

    def record(mirror: graph.GraphMirror, before_each: Any) -> int:
        assert before_each == svc.bookkeeper.wait_idle  # it waits for the recalls to end
        seen.append(mirror)
        warmed.set()
        return 0

    monkeypatch.setattr(graph, "warm_hubs", record)
    store.graph.mirror = None
    graph.mirror(svc, store)  # a script or a test: nothing in the background
    assert not warmed.is_set()
    monkeypatch.setattr(store_mod, "_fill_in_background", True)
    store.graph.mirror = None
    built = graph.mirror(svc, store)
    assert warmed.wait(10) and seen == [built]
