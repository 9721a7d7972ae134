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
    res = service.run_query(
        "SELECT content, importance FROM memory ORDER BY importance DESC; "
        "SELECT count() AS n FROM memory GROUP ALL",
        project=filled,
    )
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
    res = service.run_query(
        "UPDATE memory SET tags = ['edited'] WHERE content CONTAINS 'alpha' RETURN tags",
        allow_writes=True,
        project=filled,
    )
    assert res.ok and res.role == "EDITOR" and res.statements[0].rows == [{"tags": ["edited"]}]
    hits = service.recall("build make", project=filled, tags=["edited"], strengthen=False)
    assert hits.hits and hits.hits[0].memory.content.startswith("alpha")


def _let_everything_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a validator bug: the engine must still hold the line."""

    def permissive(surql: str, *, allow_writes: bool = False, max_length: int = 20_000) -> Verdict:
        parts = [p.strip() for p in surql.split(";") if p.strip()]
        return Verdict(ok=True, statements=parts, violations=[], has_writes=True, executable=parts)

    monkeypatch.setattr(validator_mod, "validate", permissive)


def test_engine_viewer_blocks_what_a_broken_validator_lets_through(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _let_everything_through(monkeypatch)
    res = service.run_query(
        "DELETE memory; DEFINE TABLE evil SCHEMALESS; CREATE memory SET content = 'x'", project=filled
    )
    errors = [s.error or "" for s in res.statements]
    assert "permission" in errors[1].lower() or "not allowed" in errors[1].lower() or "IAM" in errors[1]
    # VIEWER writes return nothing and change nothing (the engine does not raise for them).
    assert service.stats(project=filled).scopes[0].total == 2
    info = service.project_store(filled).q1("INFO FOR DB")
    assert "evil" not in info["tables"]


def test_schema_guard_rolls_back_an_editor_schema_change(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _let_everything_through(monkeypatch)
    res = service.run_query(
        "UPDATE memory SET importance = 0.01; DEFINE TABLE sneaky SCHEMALESS",
        allow_writes=True,
        project=filled,
    )
    assert not res.ok
    info = service.project_store(filled).q1("INFO FOR DB")
    assert "sneaky" not in info["tables"]
    # The whole transaction rolled back, the data write included.
    assert {m.importance for m in service.list_memories(project=filled).items} == {0.5, 0.9}


def test_rows_are_capped(service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import engram_core.guarded_query as gq

    monkeypatch.setattr(gq, "QUERY_MAX_ROWS", 1)
    res = service.run_query("SELECT * FROM memory", project=filled)
    assert (
        res.statements[0].row_count == 2 and len(res.statements[0].rows) == 1 and res.statements[0].truncated
    )


def test_statement_forms_keep_their_results_under_the_wrapper(service: EngramService, filled: str) -> None:
    res = service.run_query(
        "LET $n = (SELECT VALUE content FROM memory ORDER BY content); RETURN array::len($n); "
        "IF array::len($n) > 1 { RETURN 'many' } ELSE { RETURN 'few' }; "
        "SELECT count() AS n FROM memory GROUP ALL; RETURN $n[0]",
        project=filled,
    )
    assert res.ok, res.message
    assert [s.rows for s in res.statements] == [[], [2], ["many"], [{"n": 2}], ["alpha: the build uses make"]]


# ── the deadline: one per query, for every statement form, that the text cannot lift ──
ARGON_LOOP = "FOR $i IN 0..300 { LET $x = crypto::argon2::generate('abc'); }"
SLOW_FORMS = [
    ARGON_LOOP,  # FOR had no timeout at all
    "LET $r = (SELECT * FROM array::range(0, 300) WHERE crypto::argon2::generate('x') != '')",  # nor LET
    "RETURN array::len(array::filter(array::range(0, 300), |$v| crypto::argon2::generate('x') != ''))",
    # a user TIMEOUT replaced the default one
    "SELECT * FROM array::range(0, 300) WHERE crypto::argon2::generate('x') != '' TIMEOUT 1000d",
    # ' TIMEOUT ' anywhere, even in a string, suppressed it
    "SELECT * FROM array::range(0, 300) WHERE crypto::argon2::generate(' TIMEOUT ') != ''",
]


@pytest.mark.parametrize("query", SLOW_FORMS)
def test_every_statement_form_stops_at_the_deadline(
    service: EngramService, filled: str, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service.settings, "query_timeout_s", 0.3)
    res = service.run_query(query, project=filled)
    assert not res.ok
    assert "deadline ran out" in (res.statements[0].error or ""), res.statements[0].error


def test_the_deadline_covers_the_whole_query_not_each_statement(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service.settings, "query_timeout_s", 0.3)
    res = service.run_query(f"{ARGON_LOOP}; RETURN 1; {ARGON_LOOP}", project=filled)
    assert [s.ok for s in res.statements] == [
        False,
        False,
        False,
    ]  # nothing runs once the deadline has passed
    assert all("deadline ran out" in (s.error or "") for s in res.statements)


def test_a_deadline_ends_a_write_transaction_with_nothing_written(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service.settings, "query_timeout_s", 0.3)
    res = service.run_query(
        f"UPDATE memory SET importance = 0.01; {ARGON_LOOP}", allow_writes=True, project=filled
    )
    assert not res.ok
    assert {m.importance for m in service.list_memories(project=filled).items} == {0.5, 0.9}


# ── the attacks, end to end through the service and the real engine ──
ATTACK = (
    "RETURN 1 # x\r; COMMIT TRANSACTION; DEFINE EVENT p ON memory WHEN $event = 'CREATE' THEN "
    "(UPDATE $after SET content = 'ATTACKER TEXT'); BEGIN TRANSACTION"
)


@pytest.mark.parametrize("line_end", ["\r", "\x85", "\u2028", "\u2029"])
@pytest.mark.parametrize("comment", ["#", "//", "--"])
def test_a_comment_ended_by_any_engine_line_end_hides_nothing(
    service: EngramService, filled: str, comment: str, line_end: str
) -> None:
    attack = ATTACK.replace("# x\r", f"{comment} x{line_end}")
    res = service.run_query(attack, allow_writes=True, project=filled)
    assert not res.ok and res.statements == []
    stored = service.store(MemoryIn(content="an ordinary memory after the attack"), project=filled)
    assert service.get(stored.memory.id, project=filled).content == "an ordinary memory after the attack"
    assert "p" not in service.project_store(filled).q1("INFO FOR TABLE memory")["events"]


def _schema(service: EngramService, project: str) -> tuple:
    """INFO FOR DB and INFO FOR TABLE of every table (the engine users Engram defines on first use included)."""
    service.run_query("RETURN 1", project=project)
    service.run_query("RETURN 1", allow_writes=True, project=project)
    store = service.project_store(project)
    db = store.q1("INFO FOR DB")
    return db, {t: store.q1(f"INFO FOR TABLE `{t}`") for t in db["tables"]}


@pytest.mark.parametrize(
    "ddl",
    [
        "DEFINE EVENT p ON memory WHEN $event = 'CREATE' THEN (UPDATE $after SET content = 'ATTACKER TEXT')",
        "DEFINE FIELD OVERWRITE content ON memory VALUE 'ATTACKER TEXT'",
        "DEFINE INDEX evil ON memory FIELDS importance",
        "DEFINE ANALYZER evil TOKENIZERS blank",
        "DEFINE FUNCTION fn::evil() { RETURN 1 }",
        "DEFINE PARAM $evil VALUE 1",
        "DEFINE TABLE evil SCHEMALESS",
    ],
)
def test_schema_guard_sees_every_kind_of_definition(
    service: EngramService, filled: str, ddl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _schema(service, filled)
    _let_everything_through(monkeypatch)
    res = service.run_query(f"UPDATE memory SET importance = 0.01; {ddl}", allow_writes=True, project=filled)
    assert not res.ok and "never the schema" in res.message, res.message
    assert _schema(service, filled) == before
    assert {m.importance for m in service.list_memories(project=filled).items} == {0.5, 0.9}


def test_transaction_control_in_the_text_cannot_end_the_guard(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even past a broken validator: COMMIT/CANCEL inside Engram's wrapper are no-ops, so the guard holds and
    what the result says happened is what happened."""
    before = _schema(service, filled)
    _let_everything_through(monkeypatch)
    res = service.run_query(
        "COMMIT TRANSACTION; DEFINE INDEX evil ON memory FIELDS importance; BEGIN TRANSACTION",
        allow_writes=True,
        project=filled,
    )
    assert not res.ok and _schema(service, filled) == before
    res = service.run_query(
        "CANCEL TRANSACTION; DELETE memory WHERE content CONTAINS 'alpha'; BEGIN TRANSACTION",
        allow_writes=True,
        project=filled,
    )
    # a DELETE of memories is refused before the engine (issue #29): nothing deleted, and the result says so
    left = [m.content for m in service.list_memories(project=filled).items]
    assert (
        not res.ok and res.violations[0].rule == "memory-delete" and any(c.startswith("alpha") for c in left)
    )


def test_engine_parse_errors_name_the_statement_and_the_reason(service: EngramService, filled: str) -> None:
    res = service.run_query("SELECT * FROM memory; RETURN 99999999999999999999999", project=filled)
    assert not res.ok
    assert "statement 2" in res.message and "64bit" in res.message, res.message
    assert "'result'" not in res.message


def test_viewer_can_read_the_schema_but_change_nothing(
    service: EngramService, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documented in docs/security.md: the engine's VIEWER may run INFO FOR DB (the validator refuses it)."""
    before = _schema(service, filled)
    _let_everything_through(monkeypatch)
    res = service.run_query("INFO FOR DB; DEFINE INDEX evil ON memory FIELDS importance", project=filled)
    assert res.statements[0].ok and "memory" in res.statements[0].rows[0]["tables"]
    assert not res.statements[1].ok and _schema(service, filled) == before
