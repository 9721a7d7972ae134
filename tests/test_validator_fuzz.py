"""Property-based tests: validate() is total, and a forbidden statement is found wherever it hides."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_core.validator import ValidationError, Verdict, check, validate

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ALLOWED = [
    "SELECT * FROM memory",
    "SELECT id, count() AS n FROM memory GROUP BY id",
    "RETURN 1",
    "LET $x = 1",
    "RETURN time::now()",
    "SELECT ->relates_to->entity FROM memory:a",
    "SELECT * FROM memory WHERE content @1@ 'x' ORDER BY search::score(1) DESC LIMIT 3",
    "IF $x { RETURN 1 } ELSE { RETURN 2 }",
]
FORBIDDEN = [
    "DEFINE TABLE x",
    "REMOVE TABLE memory",
    "KILL 'a'",
    "INFO FOR DB",
    "USE NS a DB b",
    "SLEEP 1s",
    "DELETE memory",
    "UPDATE memory SET a = 1",
    "CREATE memory SET a = 1",
    "RELATE a:1->r->b:2",
    "INSERT INTO memory { a: 1 }",
    "UPSERT memory:a SET b = 1",
    "RETURN http::get('x')",
    "RETURN fn::x()",
    "LIVE SELECT * FROM memory",
    "REBUILD INDEX i ON memory",
]
# Wrappers that put a statement inside another one; values need parentheses, blocks do not.
NESTINGS = [
    "{s}",
    "RETURN ({s})",
    "LET $v = ({s})",
    "IF true {{ {s} }}",
    "IF false {{ RETURN 1 }} ELSE {{ {s} }}",
    "FOR $i IN [1] {{ {s}; }}",
    "SELECT * FROM memory WHERE id IN ({s})",
    "RETURN [1, ({s})]",
    "IF true {{ IF true {{ {s} }} }}",
]
COMMENTS = ["", " ", "\n", "\t", " /* DEFINE */ ", " -- x\n", " # y\n", " // z\n", " /*;*/ "]


@st.composite
def random_case(draw: st.DrawFn, text: str) -> str:
    # Keyword case does not matter to SurrealDB, so flip it at random: the verdict must not change.
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(
        c.swapcase() if f and "a" <= c.lower() <= "z" else c for c, f in zip(text, flips, strict=True)
    )


@st.composite
def smuggled_queries(draw: st.DrawFn) -> str:
    bad = draw(st.sampled_from(FORBIDDEN))
    if draw(st.booleans()):
        bad = draw(random_case(bad))
    wrapped = draw(st.sampled_from(NESTINGS)).format(s=bad)
    if wrapped.startswith("{") or (wrapped.startswith("RETURN [") and "(" not in bad):
        wrapped = bad  # a bare block is not a statement; fall back to the statement itself
    before = draw(st.lists(st.sampled_from(ALLOWED), max_size=3))
    after = draw(st.lists(st.sampled_from(ALLOWED), max_size=3))
    parts = [*before, wrapped, *after]
    out = ""
    for i, p in enumerate(parts):
        sep = ";" if i else ""
        out += sep + draw(st.sampled_from(COMMENTS)) + p
    if draw(st.booleans()):
        out += ";"
    return out


@SETTINGS
@given(st.text(max_size=300))
def test_validate_is_total_on_arbitrary_text(text: str) -> None:
    v = validate(text)
    assert isinstance(v, Verdict)
    assert v.ok == (not v.violations)
    try:
        check(text)
    except ValidationError as err:
        assert err.verdict.violations
        assert str(err) == err.verdict.violations[0].message


@SETTINGS
@given(
    st.text(
        alphabet=st.sampled_from(list("SELECT DEFINE RETURN ();{}'\"`$-#/*\n⟨⟩|[]@<>:=,.0123456789")),
        max_size=200,
    )
)
def test_validate_is_total_on_surql_like_noise(text: str) -> None:
    for allow in (False, True):
        v = validate(text, allow_writes=allow)
        assert isinstance(v, Verdict)
        assert v.ok == (not v.violations)


@SETTINGS
@given(smuggled_queries())
def test_forbidden_statement_is_never_accepted(query: str) -> None:
    verdict = validate(query)
    assert not verdict.ok, query


@SETTINGS
@given(st.lists(st.sampled_from(ALLOWED), min_size=1, max_size=5), st.sampled_from(COMMENTS))
def test_allowed_combinations_pass(parts: list[str], comment: str) -> None:
    query = (";" + comment).join(parts)
    verdict = validate(query)
    assert verdict.ok, (query, verdict.violations)
    assert len(verdict.statements) == len(parts)
