"""Schemas 008 to 010: the relation tables keep no index on `in` / `out` (every query that finds an edge by one of
its ends walks the engine's graph keys instead), and edges and entities no longer carry fields no reader used. A store
written before upgrades at its first open and its graph answers exactly as before: traversal, the detail of one
memory, contradiction candidates on write (which strengthen upgraded rows), erasure of a memory's entities and
co-activation edges, and a compaction after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import engram_core.store as store_mod
from engram_core.models import EntityIn, MemoryIn
from engram_core.organise import associations as assoc
from engram_core.organise import contradictions as cx
from engram_core.organise import graph, relations
from engram_core.service import EngramService
from engram_core.store import ScopeStore, key_of

EDGE_INDEXES = {"relates_to": {"relates_in", "relates_out"}, "mentions": {"mentions_in", "mentions_out"},
                "associated_with": {"assoc_in", "assoc_out"}}
TEXTS = [
    "auth.py raises TokenExpiredError when the JWT expires",
    "TokenExpiredError also shows up in src/worker.py; the worker retries it [twice] \\ then gives up 🚀",
    "We use Jest as the test runner for the web app.",
    "Zebramark7731Loader in src/zebra/loader.py raises Zebramark7731Error on empty input; we use pytest for it",
    "src/worker.py depends on auth.py for the token refresh",
]


def _indexes(store: ScopeStore) -> set[str]:
    return {i for t in EDGE_INDEXES for i in (store.q1(f"INFO FOR TABLE {t}") or {}).get("indexes", {})}


def _view(svc: EngramService, p: str, ids: list[str]) -> dict[str, Any]:
    """What a user sees of the graph: the knowledge-graph search two hops out, and each memory's detail pane."""
    found = graph.search_knowledge_graph(svc, "TokenExpiredError", project=p, depth=2)
    out: dict[str, Any] = {
        "entities": sorted((e.name, e.entity_type, tuple(e.memory_ids)) for e in found.entities),
        "relations": sorted((r.source_name, r.relation_type, r.target_name, round(r.weight, 6), tuple(r.evidence))
                            for r in found.relations),
        "memories": found.memory_ids,
    }
    for k in ids:
        detail = graph.memory_graph(svc, k, project=p)
        out[k] = (sorted(e.name for e in detail.entities),
                  sorted((r.source_name, r.relation_type, r.target_name) for r in detail.relations))
    return out


def _service(tmp_path: Path, embedder: Any) -> EngramService:  # noqa: ANN401 - LocalEmbedder
    return EngramService(home=tmp_path / "home", embedder=embedder, recover_sessions=False)


def test_an_old_store_upgrades_and_its_graph_answers_the_same(tmp_path: Path, embedder: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    p = str(proj)
    real = store_mod.migrations()
    lean_row, lean_entity = graph._relation_row, graph._entity_row

    def old_row(r: Any, memory_key: str | None, now: Any, source: str = "extracted") -> dict[str, Any]:  # noqa: ANN401
        row = lean_row(r, memory_key, now, source)
        row["fields"] |= {"scope": "project", "created_at": now, "source": source}  # what it wrote before 009
        return row

    def old_entity(e: Any, now: Any, source: str = "extracted", description: str | None = None) -> dict[str, Any]:  # noqa: ANN401
        return lean_entity(e, now, source, description) | {"scope": "project"}  # the rest came from defaults

    with monkeypatch.context() as old:  # the store as Engram wrote it before schema 008
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 8])
        old.setattr(graph, "_relation_row", old_row)
        old.setattr(graph, "_entity_row", old_entity)
        with _service(tmp_path, embedder) as svc:
            ids = [svc.store(MemoryIn(content=t), project=p).memory.id for t in TEXTS]
            assoc.coactivate_memories(svc, [ids[0], ids[1]], project=p)
            assoc.coactivate_memories(svc, [ids[0], ids[3]], project=p)
            relations.relate_entities(svc, "payments worker", "Redis", "uses", project=p)  # stated by the agent
            store = svc.project_store(p)
            assert store is not None and store.schema_version() == 7
            assert _indexes(store) == set().union(*EDGE_INDEXES.values())
            rels = store.q1("SELECT * FROM relates_to") or []
            assert rels and all(r["scope"] == "project" and r["created_at"] for r in rels)
            assert {r["source"] for r in rels} == {"extracted", "agent"}
            assert all(m["created_at"] for m in store.q1("SELECT * FROM mentions") or [])
            ents = store.q1("SELECT * FROM entity") or []
            assert all(e["scope"] == "project" and e["created_at"] and "description" in e for e in ents)
            assert {e["source"] for e in ents} == {"extracted", "agent"}
            before = _view(svc, p, ids)
    assert before["relations"] and all(before[k][0] for k in ids), before

    with _service(tmp_path, embedder) as svc:
        store = svc.project_store(p)
        assert store is not None and store.schema_version() == real[-1][0] >= 8
        assert _indexes(store) == set()
        assert _view(svc, p, ids) == before
        _assert_lean(store)
        assert store.conn.erased, "the rewritten rows' old versions are in the files: due for compaction"
        # Every edge is reachable from both of its ends through the graph keys (what the queries now rely on).
        for table in EDGE_INDEXES:
            for e in store.q1(f"SELECT id, in, out FROM {table}") or []:
                assert e["id"] in store.q1(f"RETURN $a->{table}", {"a": e["in"]})
                assert e["id"] in store.q1(f"RETURN $b<-{table}", {"b": e["out"]})

        # A conflicting write finds the live relation it conflicts with (the write's graph-key walk).
        vitest = svc.store(MemoryIn(content="For the web app we use Vitest; run it with `npm run test`."),
                           project=p).memory.id
        assert ("functional", frozenset((ids[2], vitest))) in {
            (c.kind, frozenset((c.a.id, c.b.id))) for c in cx.list_contradictions(svc, project=p)}
        # A mention's id is the integer derived from its ends; writing it again adds nothing.
        mine = store.q1("SELECT id, out FROM $m->mentions", {"m": store_mod.record(vitest)}) or []
        assert mine and all(m["id"] == graph.mention_id(vitest, key_of(m["out"])) for m in mine)
        graph.write_extraction(svc, store, vitest, "For the web app we use Vitest; run it with `npm run test`.", None)
        assert len(store.q1("SELECT id FROM $m->mentions", {"m": store_mod.record(vitest)})) == len(mine)

        # Erasing a memory removes the entities only it mentioned, their edges, and its co-activation edges.
        assert {a.id for a in assoc.memory_associations(svc, ids[0], project=p)} == {ids[1], ids[3]}
        svc.forget(ids[3], project=p, erase=True, confirm=True)
        assert graph.search_knowledge_graph(svc, "Zebramark7731", project=p).entities == []
        edges = store.q1("SELECT VALUE [record::id(in), record::id(out)] FROM associated_with") or []
        assert sorted(map(sorted, edges)) == [sorted(ids[:2])]
        pytest_entity = graph.search_knowledge_graph(svc, "pytest", project=p).entities
        assert pytest_entity == [], "pytest was mentioned by the erased memory only"
        after_erase = _view(svc, p, ids[:3])

        # The compaction copies the edges (their graph keys included) without the indexes.
        svc.compact()
        assert _indexes(store) == set()
        assert _view(svc, p, ids[:3]) == after_erase
        _assert_lean(store)


def _assert_lean(store: ScopeStore) -> None:
    """Schemas 009 and 010: an edge or an entity carries no scope and no creation date; a relation or an entity
    says its source only if the agent stated it (none: extracted), an entity its description only if it has one."""
    rels = store.q1("SELECT * FROM relates_to") or []
    assert rels and not [r for r in rels if {"scope", "created_at"} & set(r)]
    assert {r.get("source") for r in rels} == {None, "agent"}
    assert all(set(m) == {"id", "in", "out"} for m in store.q1("SELECT * FROM mentions") or [])
    ents = store.q1("SELECT * FROM entity") or []
    assert ents and not [e for e in ents if {"scope", "created_at"} & set(e) or e.get("description") == ""]
    assert {e.get("source") for e in ents} == {None, "agent"}


def test_an_interrupted_lean_upgrade_goes_on_at_the_next_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema 009 clears the old rows chunk by chunk, each chunk committed with the table's events defined again;
    a stop between chunks leaves schema 8 recorded, and the next open clears the rest."""
    path = tmp_path / "p.db"
    conn = store_mod.Connection.file(path)
    real = store_mod.migrations()
    with monkeypatch.context() as old:
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 9])
        s = ScopeStore(conn, store_mod.Scope.project, "p_lean")
    s.q("FOR $i IN 0..7 { CREATE type::record('entity', $i) CONTENT {name: 'e', name_key: 'e', entity_type: 'x', "
        "scope: 'project'}; RELATE (type::record('entity', $i))->relates_to->(type::record('entity', $i + 1)) "
        "CONTENT {relation_type: 'uses', scope: 'project'}; };")
    events = (s.q1("INFO FOR TABLE relates_to") or {})["events"]
    calls = {"n": 0}
    original = ScopeStore.q

    def stop_after_two_chunks(self: ScopeStore, sql: str, params: Any = None, **kw: Any) -> Any:  # noqa: ANN401
        if "UPDATE $ids SET scope = NONE" in sql:
            calls["n"] += 1
            if calls["n"] > 2:
                raise KeyboardInterrupt
        return original(self, sql, params, **kw)

    with monkeypatch.context() as m:
        m.setattr(ScopeStore, "q", stop_after_two_chunks)
        m.setattr(store_mod.ScopeStore._lean_rows, "__defaults__", (3,))  # chunks of 3 rows
        with pytest.raises(KeyboardInterrupt):
            ScopeStore(conn, store_mod.Scope.project, "p_lean")
    left = s.q1("SELECT VALUE id FROM relates_to WHERE scope != NONE") or []
    assert s.schema_version() == 8 and len(left) == 7 - 2 * 3  # seven relations (0..7 excludes 7)
    assert (s.q1("INFO FOR TABLE relates_to") or {})["events"] == events  # each chunk put them back
    again = ScopeStore(conn, store_mod.Scope.project, "p_lean")
    assert again.schema_version() == real[-1][0]
    assert again.q1("SELECT VALUE id FROM relates_to WHERE scope != NONE OR created_at != NONE") == []
    assert again.q1("SELECT VALUE id FROM entity WHERE scope != NONE OR created_at != NONE OR description = ''") == []
    assert len(again.q1("SELECT VALUE id FROM entity") or []) == 7
    conn.close()


def test_an_entity_named_again_with_a_description_takes_it(env: tuple[EngramService, str]) -> None:
    """Schema 010 writes no empty description: an entity first named without one (or extracted) takes the one the
    agent gives later, and keeps it when named again without."""
    svc, p = env
    svc.store(MemoryIn(content="deploy.sh pushes the image with the AWS CLI"), project=p)
    assert graph.add_entities(svc, [EntityIn(name="deploy.sh", entity_type="file")], project=p).merged
    got = graph.add_entities(svc, [EntityIn(name="deploy.sh", entity_type="file",
                                            description="the deploy script [prod] \\ 🚀")], project=p)
    assert [e.description for e in got.merged] == ["the deploy script [prod] \\ 🚀"]
    again = graph.add_entities(svc, [EntityIn(name="deploy.sh", entity_type="file")], project=p)
    assert [e.description for e in again.merged] == ["the deploy script [prod] \\ 🚀"]
