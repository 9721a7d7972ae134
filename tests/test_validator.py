"""Tests for engram_core.validator.

The attack corpus (tests/data/validator_attacks.jsonl) has 365 cases: 237 must be rejected, 128
accepted; test_corpus_counts prints the current figures (run pytest with -s to see them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram_core.validator import ValidationError, Verdict, Violation, check, validate

CORPUS = Path(__file__).parent / "data" / "validator_attacks.jsonl"


def _load() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").split("\n") if line.strip()]


CASES = _load()


def test_corpus_counts() -> None:
    rejects = sum(c["expect"] == "reject" for c in CASES)
    accepts = sum(c["expect"] == "accept" for c in CASES)
    print(f"\nvalidator attack corpus: {len(CASES)} cases, {rejects} reject, {accepts} accept")
    assert len(CASES) >= 200
    assert rejects >= 150 and accepts >= 60
    assert all(set(c) == {"surql", "allow_writes", "expect", "why"} for c in CASES)


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{i}-{c['expect']}-{c['surql'][:30]!r}" for i, c in enumerate(CASES)]
)
def test_attack_corpus(case: dict) -> None:
    verdict = validate(case["surql"], allow_writes=case["allow_writes"])
    assert isinstance(verdict, Verdict)
    if case["expect"] == "accept":
        assert verdict.ok, (case["why"], verdict.violations)
        assert verdict.violations == []
    else:
        assert not verdict.ok, case["why"]
        assert verdict.violations, "a refusal must say why"
        for v in verdict.violations:
            assert isinstance(v, Violation) and v.rule and v.message
            assert 0 <= v.statement_index < max(1, len(verdict.statements))
            assert len(v.statement) <= 200


def rules(q: str, **kw: bool) -> list[str]:
    return [v.rule for v in validate(q, **kw).violations]


def test_statements_are_split_outside_strings_and_comments() -> None:
    v = validate("SELECT * FROM a WHERE x = 'p;q'; -- c;\nRETURN 1; ")
    assert v.ok
    assert v.statements == ["SELECT * FROM a WHERE x = 'p;q'", "-- c;\nRETURN 1"]


def test_violation_points_at_the_offending_statement() -> None:
    v = validate("SELECT * FROM a; RETURN 1; DEFINE TABLE x SCHEMALESS")
    assert [(x.statement_index, x.rule) for x in v.violations] == [(2, "blocked-keyword:DEFINE")]
    assert v.violations[0].statement == "DEFINE TABLE x SCHEMALESS"
    assert "DEFINE" in v.violations[0].message


@pytest.mark.parametrize(
    ("query", "rule"),
    [
        ("REMOVE TABLE memory", "blocked-keyword:REMOVE"),
        ("KILL 'x'", "blocked-keyword:KILL"),
        ("INFO FOR DB", "blocked-keyword:INFO"),
        ("LIVE SELECT * FROM memory", "blocked-keyword:LIVE"),
        ("SLEEP 1s", "blocked-keyword:SLEEP"),
        ("BEGIN TRANSACTION", "blocked-keyword:BEGIN"),
        ("REBUILD INDEX i ON memory", "blocked-keyword:REBUILD"),
        ("USE NS x DB y", "cross-scope"),
        ("RETURN ns::x()", "cross-scope"),
        ("RETURN http::get('u')", "blocked-function:http::get"),
        ("RETURN fn::evil(1)", "blocked-function:fn::evil"),
        ("RETURN $f.put(1)", "blocked-function:.put"),
        ("UPDATE memory SET a = 1", "write-not-allowed:UPDATE"),
        ("RETURN (RELATE a:1->r->b:2)", "write-not-allowed:RELATE"),
        ("RETURN sequence::nextval('s')", "write-not-allowed:sequence::nextval"),
        ("SELECT * FROM x WHERE", "parse-error"),
        ("ＤＥＦＩＮＥ TABLE x", "non-ascii"),
        ("", "empty"),
    ],
)
def test_rule_ids(query: str, rule: str) -> None:
    assert rule in rules(query)


def test_writes_gated_and_reported() -> None:
    q = "LET $x = (DELETE memory WHERE archived = true); RETURN $x"
    refused = validate(q)
    assert not refused.ok and refused.has_writes
    assert refused.violations[0].rule == "write-not-allowed:DELETE"
    allowed = validate(q, allow_writes=True)
    assert allowed.ok and allowed.has_writes
    assert not validate("SELECT * FROM memory").has_writes


def test_allow_writes_never_unlocks_ddl() -> None:
    for q in ("DEFINE TABLE x", "REMOVE TABLE memory", "USE DB other", "RETURN http::get('x')"):
        assert not validate(q, allow_writes=True).ok, q


def test_too_large() -> None:
    q = "RETURN '" + "a" * 30 + "'"
    assert validate(q, max_length=len(q)).ok
    v = validate(q, max_length=len(q) - 1)
    assert not v.ok and [x.rule for x in v.violations] == ["too-large"]
    assert str(len(q)) in v.violations[0].message


def test_non_string_input_refused_not_raised() -> None:
    v = validate(b"SELECT 1")  # type: ignore[arg-type]
    assert not v.ok


def test_check_raises_with_verdict() -> None:
    assert check("SELECT * FROM memory").ok
    with pytest.raises(ValidationError) as info:
        check("SELECT * FROM memory; DROP TABLE memory")
    err = info.value
    assert isinstance(err, ValueError)
    assert not err.verdict.ok
    assert str(err) == err.verdict.violations[0].message
    assert check("CREATE memory", allow_writes=True).has_writes


def test_unicode_inside_strings_is_fine_but_not_in_code() -> None:
    assert validate("SELECT * FROM memory WHERE content = 'naïve café ＤＥＦＩＮＥ\u200b'").ok
    assert "non-ascii" in rules("SELECT * FROM memory WHERE content = x\u200b")


def test_grammar_gap_rewrites_do_not_hide_code() -> None:
    # START, backticks and closures are rewritten before parsing: what they wrap is still checked.
    assert validate("SELECT * FROM memory LIMIT 5 START 10").ok
    assert not validate("SELECT * FROM memory LIMIT 5 START (DELETE memory)").ok
    assert not validate("SELECT * FROM `x`; DEFINE TABLE y").ok
    assert not validate("RETURN [1].map(|$x| (UPDATE memory SET a = $x))").ok
    assert not validate("SELECT * FROM memory LIMIT $n; REMOVE TABLE memory").ok


def test_verdict_is_frozen() -> None:
    v = validate("RETURN 1")
    with pytest.raises(AttributeError):
        v.ok = False  # type: ignore[misc]


# ── issue #13: where the validator and the engine used to read the text differently ──
# The engine ends '#', '//' and '--' comments at exactly these characters (found by scanning every code point
# against the embedded engine; tests/test_validator_engine.py keeps checking it).
ENGINE_LINE_ENDS = ["\n", "\r", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("line_end", ENGINE_LINE_ENDS)
@pytest.mark.parametrize("comment", ["#", "//", "--"])
def test_comments_end_where_the_engine_ends_them(comment: str, line_end: str) -> None:
    attack = (
        f"RETURN 1 {comment} x{line_end}; COMMIT TRANSACTION; DEFINE EVENT p ON memory WHEN $event = 'CREATE' "
        "THEN (UPDATE $after SET content = 'ATTACKER TEXT'); BEGIN TRANSACTION"
    )
    verdict = validate(attack, allow_writes=True)
    assert not verdict.ok
    assert "blocked-keyword:DEFINE" in rules(attack, allow_writes=True)


@pytest.mark.parametrize(
    "query,rule",
    [
        ("RETURN fn :: pwn()", "blocked-function:fn::pwn"),
        ("RETURN fn::/* c */pwn()", "blocked-function:fn::pwn"),
        ("RETURN fn::\t\r\npwn()", "blocked-function:fn::pwn"),
        ("RETURN fn # c\r:: pwn()", "blocked-function:fn::pwn"),
        ("RETURN http :: get('https://example.com')", "blocked-function:http::get"),
        ("RETURN HTTP::/* x */post('https://example.com', {})", "blocked-function:http::post"),
        ("RETURN sequence :: nextval('s')", "write-not-allowed:sequence::nextval"),
        ("RETURN ns :: x()", "cross-scope"),
    ],
)
def test_functions_are_judged_by_their_real_name(query: str, rule: str) -> None:
    assert rule in rules(query)


@pytest.mark.parametrize(
    "query",
    [
        "RETURN 1; COMMIT",
        "RETURN 1; cancel transaction",
        "BEGIN; RETURN 1",
        "IF true { COMMIT TRANSACTION }",
        "RETURN 1 /* x */ ; /* y */ CANCEL",
    ],
)
def test_transaction_control_is_refused_anywhere(query: str) -> None:
    assert "transaction-control" in rules(query, allow_writes=True)


def test_transaction_words_inside_strings_names_and_params_are_fine() -> None:
    assert validate("SELECT * FROM memory WHERE content = 'BEGIN; COMMIT; CANCEL'").ok
    assert validate("SELECT `commit` FROM memory").ok
    assert validate("LET $begin = 1; RETURN $begin").ok
    assert validate("SELECT * FROM memory WHERE metadata.cancel = true").ok


def test_executable_statements_have_every_comment_removed() -> None:
    v = validate("SELECT * FROM memory -- note\r\n WHERE importance > 0.5; /* two */ RETURN 2 # end")
    assert v.ok and len(v.executable) == 2
    assert "note" not in v.executable[0] and "two" not in v.executable[1] and "end" not in v.executable[1]
    assert v.executable[0].startswith("SELECT * FROM memory") and v.executable[0].endswith("> 0.5")
    assert v.statements[0].endswith("> 0.5")  # the caller's own text is kept for display


def test_line_ends_outside_comments_other_than_lf_cr_are_refused() -> None:
    # The engine does not treat U+0085/U+2028/U+2029 as blanks: they are refused in code rather than guessed at.
    for ch in ["\x85", "\u2028", "\u2029", "\x0b", "\x0c"]:
        assert "non-ascii" in rules(f"RETURN 1{ch}+ 1")
