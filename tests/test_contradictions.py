"""Contradiction detection and resolution against a real store and the real embedding model."""

from __future__ import annotations

import pytest

from engram_core.models import MemoryIn
from engram_core.organise import contradictions as cx
from engram_core.service import EngramService


def put(svc: EngramService, p: str, text: str) -> str:
    return svc.store(MemoryIn(content=text), project=p).memory.id


def pairs(svc: EngramService, p: str) -> set[tuple[str, frozenset[str]]]:
    return {(c.kind, frozenset((c.a.id, c.b.id))) for c in cx.list_contradictions(svc, project=p)}


def test_functional_relation_two_test_frameworks(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "We use Jest as the test runner for the web app.")
    b = put(svc, p, "For the web app we use Vitest; run it with `npm run test`.")
    found = pairs(svc, p)
    assert ("functional", frozenset((a, b))) in found
    ev = cx.list_contradictions(svc, project=p)[0].evidence
    assert any("test_framework" in e for e in ev)


def test_uses_versus_replaces(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "We use yarn for installing packages.")
    b = put(svc, p, "We switched from yarn to pnpm to save disk space.")
    kinds = {k for k, ids in pairs(svc, p) if ids == frozenset((a, b))}
    assert kinds & {"relation_pair", "functional"}


def test_value_and_negation_near_duplicates(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "The Postgres database listens on port 5432 in docker-compose.yml")
    b = put(svc, p, "The Postgres database listens on port 5433 in docker-compose.yml")
    c = put(svc, p, "Caching is enabled for the search endpoint")
    d = put(svc, p, "Caching is not enabled for the search endpoint anymore")
    found = pairs(svc, p)
    assert ("value", frozenset((a, b))) in found
    assert ("negation", frozenset((c, d))) in found


def test_unrelated_facts_are_not_flagged(env: tuple[EngramService, str]) -> None:
    svc, p = env
    for text in [
        "We use pytest for the backend tests.",
        "We use Postgres as the main database.",
        "The API server listens on port 8000.",
        "Redis listens on port 6379 for the cache.",
        "Use ruff for linting and black for formatting.",
        "Deploys go out on Tuesdays after the standup.",
        "The user prefers short commit messages.",
        "src/billing/invoice.py computes VAT per country.",
    ]:
        put(svc, p, text)
    assert cx.list_contradictions(svc, project=p) == []


def _pair(svc: EngramService, p: str) -> tuple[str, str, str]:
    a = put(svc, p, "Session tokens expire after 15 minutes")
    b = put(svc, p, "Session tokens expire after 60 minutes")
    c = [x for x in cx.list_contradictions(svc, project=p) if {x.a.id, x.b.id} == {a, b}]
    assert len(c) == 1
    return c[0].id, c[0].a.id, c[0].b.id


def _recalled(svc: EngramService, p: str) -> set[str]:
    return {
        h.memory.id
        for h in svc.recall("when do session tokens expire", project=p, strengthen=False, log=False).hits
    }


@pytest.mark.parametrize("keep", ["keep_a", "keep_b"])
def test_keep_one_supersedes_the_other(env: tuple[EngramService, str], keep: str) -> None:
    svc, p = env
    cid, a, b = _pair(svc, p)
    assert {a, b} <= _recalled(svc, p)
    out = cx.resolve_contradiction(svc, cid, keep, project=p)  # type: ignore[arg-type]
    kept, dropped = (a, b) if keep == "keep_a" else (b, a)
    assert out.kept == [kept] and out.superseded == [dropped]
    gone = svc.get(dropped, project=p)
    assert gone.status == "superseded" and gone.invalid_at is not None
    assert gone.content.startswith("Session tokens"), "kept for audit"
    got = _recalled(svc, p)
    assert kept in got and dropped not in got
    assert cx.list_contradictions(svc, project=p) == []
    assert cx.list_contradictions(svc, project=p, status="resolved")[0].resolution == keep


def test_keep_both(env: tuple[EngramService, str]) -> None:
    svc, p = env
    cid, a, b = _pair(svc, p)
    cx.resolve_contradiction(svc, cid, "keep_both", project=p)
    assert {a, b} <= _recalled(svc, p)
    assert svc.get(a, project=p).metadata["coexists_with"] == [b]
    # The pair is settled: storing a third related memory does not raise it again.
    assert all({c.a.id, c.b.id} != {a, b} for c in cx.list_contradictions(svc, project=p))


def test_merge(env: tuple[EngramService, str]) -> None:
    svc, p = env
    cid, a, b = _pair(svc, p)
    out = cx.resolve_contradiction(
        svc,
        cid,
        "merge",
        merged_content="Session tokens expire after 60 minutes (15 before the March change)",
        project=p,
    )
    assert out.merged is not None and set(out.superseded) == {a, b}
    for k in (a, b):
        m = svc.get(k, project=p)
        assert m.status == "superseded" and m.invalid_at is not None and m.consolidated_into == out.merged.id
    assert _recalled(svc, p) & {a, b, out.merged.id} == {out.merged.id}


def test_relation_of_superseded_memory_is_invalidated(env: tuple[EngramService, str]) -> None:
    from engram_core.organise import graph_api

    svc, p = env
    a = put(svc, p, "We use Jest as the test runner for the web app.")
    put(svc, p, "For the web app we use Vitest now.")
    c = cx.list_contradictions(svc, project=p)[0]
    cx.resolve_contradiction(svc, c.id, "keep_b" if c.a.id == a else "keep_a", project=p)
    rels = graph_api.search_knowledge_graph(svc, "jest", project=p, include_invalid=True).relations
    uses_jest = [r for r in rels if r.relation_type == "uses" and r.target_name == "jest"]
    assert uses_jest and all(r.invalid_at is not None for r in uses_jest)


def test_two_episodes_never_contradict_but_a_fact_still_does(env: tuple[EngramService, str]) -> None:
    """Episodes record what happened; two similar events in different places are both true."""
    svc, p = env

    def episode(text: str) -> str:
        return svc.store(MemoryIn(content=text, memory_type="episodic"), project=p).memory.id

    a = episode("Fixed a bug in app/routers/payments.py: a missing await meant the payment was never saved")
    b = episode("Fixed a bug in app/routers/refunds.py: a missing await meant the refund was never saved")
    assert frozenset((a, b)) not in {ids for _, ids in pairs(svc, p)}
    c = put(svc, p, "The Postgres database listens on port 5432 in docker-compose.yml")
    d = put(svc, p, "The Postgres database listens on port 6543 in docker-compose.yml")
    assert frozenset((c, d)) in {ids for _, ids in pairs(svc, p)}


def test_a_template_with_many_values_is_not_a_contradiction(env: tuple[EngramService, str]) -> None:
    """One shape stated with many values in one slot (the command a flaky test is rerun with, per repository)
    is a template used in many contexts: the fourth variant raises nothing, while a pair with a single other
    value still does."""
    svc, p = env
    shape = (
        "When a test is flaky, first rerun it alone with `{}`, then look for shared state in the fixtures."
    )
    for cmd in ("npm test", "cargo test", "yarn test"):
        put(svc, p, shape.format(cmd))
    before = len(cx.list_contradictions(svc, project=p, limit=1000))
    fourth = put(svc, p, shape.format("pnpm test"))
    raised = [c for c in cx.list_contradictions(svc, project=p, limit=1000) if fourth in (c.a.id, c.b.id)]
    assert raised == [], [c.evidence for c in raised]
    assert before >= 1  # two or three variants still read as one fact that changed
    lone_a = put(svc, p, "The Postgres database listens on port 5432 in docker-compose.yml")
    lone_b = put(svc, p, "The Postgres database listens on port 5433 in docker-compose.yml")
    assert any(
        {c.a.id, c.b.id} == {lone_a, lone_b} for c in cx.list_contradictions(svc, project=p, limit=1000)
    )


def test_a_relation_pair_needs_one_purpose(env: tuple[EngramService, str]) -> None:
    """ "Uses redis for the rate limiter" and "switched from redis to mongodb for the token refresh" are about two
    attributes of the billing service; the same change stated for the rate limiter is a contradiction."""
    svc, p = env
    uses = put(
        svc, p, "The billing service uses redis for the rate limiter, because it handles retries for us."
    )
    other = put(svc, p, "We switched from redis to mongodb for the token refresh in the billing module.")
    same = put(svc, p, "We switched from redis to memcached for the rate limiter in the billing module.")
    found = {ids for _, ids in pairs(svc, p)}
    assert frozenset((uses, other)) not in found
    assert frozenset((uses, same)) in found or any(
        {c.a.id, c.b.id} == {uses, same} for c in cx.list_contradictions(svc, project=p, status="all")
    )
