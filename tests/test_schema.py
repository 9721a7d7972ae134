"""The database itself refuses bad data, and schema migrations apply once, in order, idempotently."""

from __future__ import annotations

import re

import pytest

from engram_core.models import Scope
from engram_core.storage import Connection, ScopeStore, migrations, record

GOOD = {"content": "x", "content_hash": "h", "memory_type": "semantic", "scope": "project"}


@pytest.fixture
def store() -> ScopeStore:
    return ScopeStore(Connection.memory(), Scope.project, "p_schema")


@pytest.mark.parametrize(
    "bad",
    [
        {"memory_type": "dream"},
        {"scope": "team"},
        {"status": "deleted"},
        {"importance": 1.5},
        {"importance": -0.1},
        {"content": 42},
        {"access_count": -1},
        {"tags": "not-a-list"},
    ],
)
def test_engine_refuses_bad_fields_and_stores_nothing(store: ScopeStore, bad: dict) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises its own error types
        store.q("CREATE $id CONTENT $f", {"id": record("bad"), "f": {**GOOD, **bad}})
    assert store.q1("SELECT VALUE id FROM memory") == []


def test_good_row_is_accepted_with_defaults_and_history(store: ScopeStore) -> None:
    store.q("CREATE $id CONTENT $f", {"id": record("ok"), "f": GOOD})
    row = store.get("ok")
    assert row is not None
    assert row["status"] == "created" and row["access_count"] == 0 and row["importance"] == 0.5
    assert [h["to"] for h in row["status_history"]] == ["created"]


def test_migrations_record_version_and_are_idempotent(store: ScopeStore) -> None:
    latest = migrations()[-1][0]
    assert store.schema_version() == latest
    assert store.apply_schema() == latest  # nothing newer: no-op
    # Reopening the same database (a restart) re-applies nothing and keeps data.
    store.q("CREATE $id CONTENT $f", {"id": record("keep"), "f": GOOD})
    again = ScopeStore(store.conn, Scope.project, "p_schema")
    assert again.schema_version() == latest
    assert again.get("keep") is not None


def test_a_new_migration_file_is_applied_on_open(store: ScopeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import engram_core.storage.schema as store_mod

    real = store_mod.migrations()
    extra = (
        real[-1][0] + 1,
        "999_test.surql",
        "DEFINE FIELD IF NOT EXISTS test_marker ON memory TYPE option<string>;",
    )
    monkeypatch.setattr(store_mod, "migrations", lambda: [*real, extra])
    reopened = ScopeStore(store.conn, Scope.project, "p_schema")
    assert reopened.schema_version() == extra[0]
    info = reopened.q1("INFO FOR TABLE memory")
    assert "test_marker" in info["fields"]


def test_lifecycle_status_history_is_written_by_the_database(store: ScopeStore) -> None:
    store.q("CREATE $id CONTENT $f", {"id": record("h"), "f": GOOD})
    store.strengthen(["h"])  # first retrieval: created → active, by DEFINE EVENT
    row = store.get("h")
    assert row is not None and row["status"] == "active"
    assert [(x.get("from"), x["to"]) for x in row["status_history"]] == [
        (None, "created"),
        ("created", "active"),
    ]


def test_every_index_is_one_a_query_uses_and_is_documented(store: ScopeStore) -> None:
    """docs/storage.md says what each index is for and what it costs; an index no query uses (schema 007 removed
    four) costs disk on every memory for nothing."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "storage.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", doc, flags=re.MULTILINE))
    tables = (store.q1("INFO FOR DB") or {}).get("tables", {})
    indexes = {name for t in tables for name in (store.q1(f"INFO FOR TABLE `{t}`") or {}).get("indexes", {})}
    assert indexes and indexes <= documented, f"not in docs/storage.md: {sorted(indexes - documented)}"
    assert not indexes & {"memory_hash", "memory_type_idx", "memory_tags", "entity_name"}
    # Schema 008: edges are found from their ends by the engine's graph keys, not by an index on `in` / `out`.
    assert not indexes & {"relates_in", "relates_out", "mentions_in", "mentions_out", "assoc_in", "assoc_out"}
