"""SurrealQL from the agent (engram_execute) and the console: the validator first, the engine behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

import engram_core.validator as validator_mod
from engram_core.models import MemoryIn
from engram_core.service import EngramService
from engram_core.validator import Verdict


@pytest.fixture
def filled(service: EngramService, project_dir: Path) -> str:
    p = str(project_dir)
    service.store(MemoryIn(content="alpha: the build uses make"), project=p)
    service.store(MemoryIn(content="beta: deploys on Fridays are frozen", importance=0.9), project=p)
    service.store(MemoryIn(content="user-level secret-free preference", scope="user"), project=p)
    return p


def test_reads_return_one_table_per_statement_with_timing(service: EngramService, filled: str) -> None:
    res = service.run_query("SELECT content, importance FROM memory ORDER BY importance DESC; "
                            "SELECT count() AS n FROM memory GROUP ALL", project=filled)
    assert res.ok and res.role == "VIEWER" and len(res.statements) == 2
    first, second = res.statements
    assert first.columns == ["content", "importance"] and first.row_count == 2
    assert first.rows[0]["content"].startswith("beta") and first.time_ms > 0
    assert second.rows == [{"n": 2}]
    # Pinned to the project database: the user-scope memory is not visible from here.
    assert all("user-level" not in r["content"] for r in first.rows)


def test_validator_refusals_name_statement_and_rule(service: EngramService, filled: str) -> None:
    res = service.run_query("SELECT * FROM memory; REMOVE TABLE memory", project=filled)
    assert not res.ok and res.statements == []
    v = res.violations[0]
    assert v.statement_index == 1 and v.rule == "blocked-keyword:REMOVE"
    res = service.run_query("UPDATE memory SET importance = 1", project=filled)
    assert not res.ok and res.violations[0].rule.startswith("write-not-allowed")
    assert service.stats(project=filled).scopes[0].total == 2  # nothing happened


def test_writes_only_with_allow_writes_and_the_mirror_follows(service: EngramService, filled: str) -> None:
    res = service.run_query("UPDATE memory SET tags = ['edited'] WHERE content CONTAINS 'alpha' RETURN tags",
                            allow_writes=True, project=filled)
    assert res.ok and res.role == "EDITOR" and res.statements[0].rows == [{"tags": ["edited"]}]
    hits = service.recall("build make", project=filled, tags=["edited"], strengthen=False)
    assert hits.hits and hits.hits[0].memory.content.startswith("alpha")


def _let_everything_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a validator bug: the engine must still hold the line."""
    def permissive(surql: str, *, allow_writes: bool = False, max_length: int = 20_000) -> Verdict:
        parts = [p.strip() for p in surql.split(";") if p.strip()]
        return Verdict(ok=True, statements=parts, violations=[], has_writes=True)

    monkeypatch.setattr(validator_mod, "validate", permissive)


def test_engine_viewer_blocks_what_a_broken_validator_lets_through(
        service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _let_everything_through(monkeypatch)
    res = service.run_query("DELETE memory; DEFINE TABLE evil SCHEMALESS; CREATE memory SET content = 'x'",
                            project=filled)
    errors = [s.error or "" for s in res.statements]
    assert "permission" in errors[1].lower() or "not allowed" in errors[1].lower() or "IAM" in errors[1]
    # VIEWER writes return nothing and change nothing (the engine does not raise for them).
    assert service.stats(project=filled).scopes[0].total == 2
    info = service.project_store(filled).q1("INFO FOR DB")
    assert "evil" not in info["tables"]


def test_schema_guard_rolls_back_an_editor_schema_change(
        service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _let_everything_through(monkeypatch)
    res = service.run_query("UPDATE memory SET importance = 0.01; DEFINE TABLE sneaky SCHEMALESS",
                            allow_writes=True, project=filled)
    assert not res.ok
    info = service.project_store(filled).q1("INFO FOR DB")
    assert "sneaky" not in info["tables"]
    # The whole transaction rolled back, the data write included.
    assert {m.importance for m in service.list_memories(project=filled).items} == {0.5, 0.9}


def test_rows_are_capped_and_statements_time_limited(service: EngramService, filled: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import engram_core.service as svc_mod

    monkeypatch.setattr(svc_mod, "QUERY_MAX_ROWS", 1)
    res = service.run_query("SELECT * FROM memory", project=filled)
    assert res.statements[0].row_count == 2 and len(res.statements[0].rows) == 1 and res.statements[0].truncated
    assert svc_mod._with_timeout("SELECT * FROM memory").endswith("TIMEOUT 5s")
    assert svc_mod._with_timeout("LET $x = 1") == "LET $x = 1"
