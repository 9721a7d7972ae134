"""Schemas 008 to 011: the relation tables keep no index on `in` / `out` (every query that finds an edge by one of
its ends walks the engine's graph keys instead), edges and entities no longer carry fields no reader used (009, 010),
and a memory's entities are a list on its row, its co-mentions derived from those lists, not stored (011). A store
written before upgrades at its first open and its graph answers as before: the entities and the memories naming
them, the typed relations and the agent's, the co-mentions (now one per pair of entities, also where a typed relation
joins them), the detail of one memory, contradiction candidates on write (which strengthen upgraded rows), erasure of
a memory's entities and co-activation edges, and a compaction after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from legacy_graph import write_legacy_graph

import engram_core.storage.schema as store_mod
from engram_core.config import Settings
from engram_core.models import EntityIn, MemoryIn, Scope
from engram_core.organise import associations as assoc
from engram_core.organise import contradictions as cx
from engram_core.organise import entities as ex
from engram_core.organise import graph, graph_api, relations
from engram_core.service import EngramService
from engram_core.storage import Connection, ScopeStore, graph_mirror, key_of, record

EDGE_INDEXES = {
    "relates_to": {"relates_in", "relates_out"},
    "mentions": {"mentions_in", "mentions_out"},
    "associated_with": {"assoc_in", "assoc_out"},
}
TEXTS = [
    "auth.py raises TokenExpiredError when the JWT expires",
    "TokenExpiredError also shows up in src/worker.py; the worker retries it [twice] \\ then gives up 🚀",
    "We use Jest as the test runner for the web app.",
    "Zebramark7731Loader in src/zebra/loader.py raises Zebramark7731Error on empty input; we use pytest for it",
    "src/worker.py depends on auth.py for the token refresh",
    # more than six entities that are not commands: only the first six are linked, in the order the text names them
    "In src/a.py and src/b.py, redis, celery, httpx, django and alembic share settings; run `make test` after",
]


def _indexes(store: ScopeStore) -> set[str]:
    tables = (store.q1("INFO FOR DB") or {}).get("tables") or {}
    return {
        i
        for t in EDGE_INDEXES
        if t in tables
        for i in (store.q1(f"INFO FOR TABLE {t}") or {}).get("indexes", {})
    }


def _names(store: ScopeStore) -> dict[str, tuple[str, str]]:
    return {
        key_of(r["id"]): (r["name"], r["entity_type"])
        for r in store.q1("SELECT id, name, entity_type FROM entity") or []
    }


def _stored(store: ScopeStore, names: dict[str, tuple[str, str]]) -> set[tuple[Any, ...]]:
    """The relations a store holds as rows, other than extracted co-mentions: the typed ones and the agent's."""
    rows = store.q1("SELECT * FROM relates_to WHERE relation_type != 'related_to' OR source = 'agent'") or []
    return {
        (
            names[key_of(r["in"])][0],
            r["relation_type"],
            names[key_of(r["out"])][0],
            round(r["weight"], 6),
            tuple(r["evidence"]),
        )
        for r in rows
    }


def _before(store: ScopeStore) -> dict[str, Any]:
    """The graph of a store written before schema 011, read from its rows: the memories naming each entity, the stored
    relations, and the co-mentions as (first named, second named) pairs of names."""
    names = _names(store)
    naming: dict[str, set[str]] = {}
    for m in store.q1("SELECT in, out FROM mentions") or []:
        naming.setdefault(names[key_of(m["out"])][0], set()).add(key_of(m["in"]))
    co = {
        (names[key_of(r["in"])][0], names[key_of(r["out"])][0])
        for r in store.q1(
            "SELECT in, out FROM relates_to WHERE relation_type = 'related_to' AND source != 'agent'"
        )
        or []
    }
    return {"naming": naming, "stored": _stored(store, names), "co": co}


def _after(svc: EngramService, store: ScopeStore) -> dict[str, Any]:
    """The same, as this code serves it: the memories naming each entity from their lists, co-mentions derived."""
    names = _names(store)
    g = graph.mirror(svc, store)
    naming = {names[e][0]: set(ms) for e, ms in g.mentioned_by.items() if ms}
    co = {
        (names[a][0], names[b][0]): w
        for k, (a, b, w) in g.rels.items()
        if k.startswith(graph_mirror.CO_PREFIX)
    }
    return {"naming": naming, "stored": _stored(store, names), "co": co}


def _service(tmp_path: Path, embedder: Any, **settings: Any) -> EngramService:  # noqa: ANN401 - LocalEmbedder
    return EngramService(
        home=tmp_path / "home",
        embedder=embedder,
        recover_sessions=False,
        settings=Settings(**settings) if settings else None,
    )


def test_an_old_store_upgrades_and_its_graph_answers_the_same(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    p = str(proj)
    real = store_mod.migrations()
    lean_row, lean_entity = graph.relation_row, graph.entity_row

    def old_entity(
        e: Any, now: Any, source: str = "extracted", description: str | None = None
    ) -> dict[str, Any]:  # noqa: ANN401
        return lean_entity(e, now, source, description) | {"scope": "project"}  # the rest came from defaults

    def old_row(r: Any, memory_key: str | None, now: Any, source: str = "extracted") -> dict[str, Any]:  # noqa: ANN401
        row = lean_row(r, memory_key, now, source)
        row["fields"] |= {"scope": "project", "created_at": now, "source": source}  # what it wrote before 009
        return row

    with monkeypatch.context() as old:  # the store as Engram wrote it before schema 008
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 8])
        old.setattr(graph, "relation_row", old_row)
        old.setattr(graph, "entity_row", old_entity)
        # The memories' rows by this code (the organise layer off: no entity list), their graph as it was written.
        with _service(tmp_path, embedder, organise=False) as svc:
            ids = [svc.store(MemoryIn(content=t), project=p).memory.id for t in TEXTS]
            store = svc.project_store(p)
            assert store is not None and store.schema_version() == 7
            write_legacy_graph(store, list(zip(ids, TEXTS, strict=True)), svc.now(), before_009=True)
            assoc.coactivate_memories(svc, [ids[0], ids[1]], project=p)
            assoc.coactivate_memories(svc, [ids[0], ids[3]], project=p)
            relations.relate_entities(
                svc, "payments worker", "Redis", "uses", project=p
            )  # stated by the agent
            relations.relate_entities(
                svc, "auth.py", "TokenExpiredError", "related_to", project=p
            )  # the agent's too
            assert _indexes(store) == set().union(*EDGE_INDEXES.values())
            rels = store.q1("SELECT * FROM relates_to") or []
            assert rels and all(r["scope"] == "project" and r["created_at"] for r in rels)
            assert {r["source"] for r in rels} == {"extracted", "agent"}
            assert all(m["created_at"] for m in store.q1("SELECT * FROM mentions") or [])
            ents = store.q1("SELECT * FROM entity") or []
            assert all(e["scope"] == "project" and e["created_at"] and "description" in e for e in ents)
            assert {e["source"] for e in ents} == {"extracted", "agent"}
            before = _before(store)
    assert before["co"] and before["stored"] and before["naming"]

    with _service(tmp_path, embedder) as svc:
        store = svc.project_store(p)
        assert store is not None and store.schema_version() == real[-1][0] >= 11
        assert _indexes(store) == set()
        assert "mentions" not in ((store.q1("INFO FOR DB") or {}).get("tables") or {})
        assert (
            store.q1("SELECT VALUE id FROM relates_to WHERE relation_type = 'related_to' AND source = NONE")
            == []
        )
        after = _after(svc, store)
        assert after["naming"] == before["naming"] and after["stored"] == before["stored"]
        # A co-mention from each entity to each named after it, the pairs a typed relation also joins among them; each
        # as strong as the memories naming them in that order make it. The order is the text's now (the extraction's
        # before): the same pairs, one way or the other.
        assert {frozenset(pair) for pair in before["co"]} <= {frozenset(pair) for pair in after["co"]}
        names = {n for pair in after["co"] for n in pair}
        expected: dict[tuple[str, str], int] = {}
        for t in TEXTS:
            core = [e.name for e in graph.named(t) if e.entity_type != "command"][
                : graph_mirror.CO_MENTION_MAX
            ]
            for i, a in enumerate(core):
                for b in core[i + 1 :]:
                    expected[a, b] = expected.get((a, b), 0) + 1
        assert {pair: graph_mirror.co_weight(n) for pair, n in expected.items()} == after["co"]
        assert "alembic" not in names, "the seventh entity of the long note is not linked"
        # Each memory's list: the entities its text names, in the order it first names them (as a new one's).
        for k, t in zip(ids, TEXTS, strict=True):
            listed = store.q1("SELECT VALUE entities.name FROM ONLY $m", {"m": record(k)})
            assert listed == [e.name for e in graph.named(t)]
            assert sorted(listed) == sorted(e.name for e in ex.extract_entities(t))
        detail = graph_api.memory_graph(svc, ids[0], project=p)
        assert {e.name for e in detail.entities} == {"auth.py", "TokenExpiredError"}
        assert {(r.source_name, r.relation_type, r.target_name) for r in detail.relations} >= {
            ("auth.py", "causes", "TokenExpiredError"),
            ("auth.py", "related_to", "TokenExpiredError"),
        }
        _assert_lean(store)
        assert store.conn.erased, "the rewritten rows' old versions are in the files: due for compaction"
        # Every edge is reachable from both of its ends through the graph keys (what the queries now rely on).
        for table in ("relates_to", "associated_with"):
            for e in store.q1(f"SELECT id, in, out FROM {table}") or []:
                assert e["id"] in store.q1(f"RETURN $a->{table}", {"a": e["in"]})
                assert e["id"] in store.q1(f"RETURN $b<-{table}", {"b": e["out"]})

        # A conflicting write finds the live relation it conflicts with (the write's graph-key walk).
        vitest = svc.store(
            MemoryIn(content="For the web app we use Vitest; run it with `npm run test`."), project=p
        ).memory.id
        assert ("functional", frozenset((ids[2], vitest))) in {
            (c.kind, frozenset((c.a.id, c.b.id))) for c in cx.list_contradictions(svc, project=p)
        }
        # A new memory's list is written with its row; writing its graph again adds nothing.
        mine = store.q1("SELECT VALUE entities FROM ONLY $m", {"m": record(vitest)})
        assert mine and graph.mirror(svc, store).mentioned_by[key_of(mine[0])].get(vitest, 0) is None
        co_before = dict(_after(svc, store)["co"])
        graph.write_extraction(
            svc, store, vitest, "For the web app we use Vitest; run it with `npm run test`.", None
        )
        assert store.q1("SELECT VALUE entities FROM ONLY $m", {"m": record(vitest)}) == mine
        assert _after(svc, store)["co"] == co_before

        # Erasing a memory removes the entities only it mentioned, their edges, and its co-activation edges.
        assert {a.id for a in assoc.memory_associations(svc, ids[0], project=p)} == {ids[1], ids[3]}
        svc.forget(ids[3], project=p, erase=True, confirm=True)
        assert graph_api.search_knowledge_graph(svc, "Zebramark7731", project=p).entities == []
        edges = store.q1("SELECT VALUE [record::id(in), record::id(out)] FROM associated_with") or []
        assert sorted(map(sorted, edges)) == [sorted(ids[:2])]
        pytest_entity = graph_api.search_knowledge_graph(svc, "pytest", project=p).entities
        assert pytest_entity == [], "pytest was mentioned by the erased memory only"
        assert store.q1("SELECT VALUE entities FROM ONLY $m", {"m": record(ids[3])}) is None
        after_erase = _after(svc, store)
        assert not [pair for pair in after_erase["co"] if "src/zebra/loader.py" in pair], (
            "its co-mentions went too"
        )
        assert ids[3] not in {m for ms in after_erase["naming"].values() for m in ms}

        # The compaction copies the edges (their graph keys included) without the indexes.
        svc.compact()
        assert _indexes(store) == set()
        assert _after(svc, store) == after_erase
        _assert_lean(store)


def _assert_lean(store: ScopeStore) -> None:
    """Schemas 009 and 010: an edge or an entity carries no scope and no creation date; a relation or an entity
    says its source only if the agent stated it (none: extracted), an entity its description only if it has one."""
    rels = store.q1("SELECT * FROM relates_to") or []
    assert rels and not [r for r in rels if {"scope", "created_at"} & set(r)]
    assert {r.get("source") for r in rels} == {None, "agent"}
    ents = store.q1("SELECT * FROM entity") or []
    assert ents and not [e for e in ents if {"scope", "created_at"} & set(e) or e.get("description") == ""]
    assert {e.get("source") for e in ents} == {None, "agent"}


def _stopping_after_two(chunk_marker: str) -> Any:  # noqa: ANN401 - a ScopeStore.write stand-in
    """ScopeStore.write that stops the process (KeyboardInterrupt) when a third upgrade chunk (a query holding
    ``chunk_marker``) is about to run: the two before it are committed."""
    original = ScopeStore.write
    calls = {"n": 0}

    def q(self: ScopeStore, sql: str, params: Any = None, **kw: Any) -> Any:  # noqa: ANN401
        if chunk_marker in sql:
            calls["n"] += 1
            if calls["n"] > 2:
                raise KeyboardInterrupt
        return original(self, sql, params, **kw)

    return q


def test_an_interrupted_lean_upgrade_goes_on_at_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 009 clears the old rows chunk by chunk, each chunk committed with the table's events defined again;
    a stop between chunks leaves schema 8 recorded, and the next open clears the rest."""
    path = tmp_path / "p.db"
    conn = Connection.file(path)
    real = store_mod.migrations()
    with monkeypatch.context() as old:
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 9])
        s = ScopeStore(conn, Scope.project, "p_lean")
    s.q(
        "FOR $i IN 0..7 { CREATE type::record('entity', $i) CONTENT {name: 'e', name_key: 'e', entity_type: 'x', "
        "scope: 'project'}; RELATE (type::record('entity', $i))->relates_to->(type::record('entity', $i + 1)) "
        "CONTENT {relation_type: 'uses', scope: 'project'}; };"
    )
    events = (s.q1("INFO FOR TABLE relates_to") or {})["events"]
    with monkeypatch.context() as m:
        m.setattr(ScopeStore, "write", _stopping_after_two("UPDATE $ids SET scope = NONE"))
        m.setattr(store_mod.lean_rows, "__defaults__", (3,))  # chunks of 3 rows
        with pytest.raises(KeyboardInterrupt):
            ScopeStore(conn, Scope.project, "p_lean")
    left = s.q1("SELECT VALUE id FROM relates_to WHERE scope != NONE") or []
    assert s.schema_version() == 8 and len(left) == 7 - 2 * 3  # seven relations (0..7 excludes 7)
    assert (s.q1("INFO FOR TABLE relates_to") or {})["events"] == events  # each chunk put them back
    again = ScopeStore(conn, Scope.project, "p_lean")
    assert again.schema_version() == real[-1][0]
    assert again.q1("SELECT VALUE id FROM relates_to WHERE scope != NONE OR created_at != NONE") == []
    assert (
        again.q1("SELECT VALUE id FROM entity WHERE scope != NONE OR created_at != NONE OR description = ''")
        == []
    )
    assert len(again.q1("SELECT VALUE id FROM entity") or []) == 7
    conn.close()


def test_an_interrupted_entity_list_upgrade_goes_on_at_the_next_open(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 011 writes the lists chunk by chunk; a stop between chunks leaves schema 10 recorded, the mention edges
    and co-mention rows in place, and the chunks written keep their lists: the next open writes the rest, and every
    memory's list holds exactly the entities its edges pointed at, in the order its text names them."""
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    p = str(proj)
    real = store_mod.migrations()
    texts = [
        *TEXTS,
        *(f"In src/mod_{i}.py, redis and celery share the settings from conftest.py" for i in range(5)),
    ]
    with monkeypatch.context() as old:  # written by the code before schema 011
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 11])
        with _service(tmp_path, embedder, organise=False) as svc:
            ids = [svc.store(MemoryIn(content=t), project=p).memory.id for t in texts]
            store = svc.project_store(p)
            assert store is not None and store.schema_version() == 10
            write_legacy_graph(store, list(zip(ids, texts, strict=True)), svc.now())
            before = _before(store)
    with monkeypatch.context() as m:
        m.setattr(ScopeStore, "write", _stopping_after_two("SET entities = $lists"))
        m.setattr(store_mod.entity_lists, "__defaults__", (3,))  # chunks of 3 memories
        with pytest.raises(KeyboardInterrupt), _service(tmp_path, embedder) as svc:
            svc.project_store(p)  # opening the store upgrades it
    with monkeypatch.context() as old, _service(tmp_path, embedder, organise=False) as svc:  # as it was left
        old.setattr(store_mod, "migrations", lambda: [m for m in real if m[0] < 11])
        store = svc.project_store(p)
        assert store is not None and store.schema_version() == 10
        listed = store.q1("SELECT VALUE id FROM memory WHERE entities != NONE") or []
        assert len(listed) == 2 * 3 and _before(store) == before, "two chunks moved, every edge still there"
    with _service(tmp_path, embedder) as svc:
        store = svc.project_store(p)
        assert store is not None and store.schema_version() == real[-1][0]
        after = _after(svc, store)
        assert after["naming"] == before["naming"] and after["stored"] == before["stored"]
        assert {frozenset(pair) for pair in before["co"]} <= {frozenset(pair) for pair in after["co"]}
        for k, t in zip(ids, texts, strict=True):
            listed = store.q1("SELECT VALUE entities.name FROM ONLY $m", {"m": record(k)})
            assert listed == [e.name for e in graph.named(t)], t


def test_an_entity_named_again_with_a_description_takes_it(env: tuple[EngramService, str]) -> None:
    """Schema 010 writes no empty description: an entity first named without one (or extracted) takes the one the
    agent gives later, and keeps it when named again without."""
    svc, p = env
    svc.store(MemoryIn(content="deploy.sh pushes the image with the AWS CLI"), project=p)
    assert graph_api.add_entities(svc, [EntityIn(name="deploy.sh", entity_type="file")], project=p).merged
    got = graph_api.add_entities(
        svc,
        [EntityIn(name="deploy.sh", entity_type="file", description="the deploy script [prod] \\ 🚀")],
        project=p,
    )
    assert [e.description for e in got.merged] == ["the deploy script [prod] \\ 🚀"]
    again = graph_api.add_entities(svc, [EntityIn(name="deploy.sh", entity_type="file")], project=p)
    assert [e.description for e in again.merged] == ["the deploy script [prod] \\ 🚀"]
