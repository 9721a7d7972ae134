"""Contradiction detection and resolution against a real store and the real embedding model."""

from __future__ import annotations

import pytest

from engram_core.models import MemoryIn
from engram_core.organise import contradictions as cx
from engram_core.organise import entities as ex
from engram_core.organise import subjects as sj
from engram_core.organise import verdicts as vd
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


def test_an_event_that_mentions_a_tool_does_not_supersede_a_fact(env: tuple[EngramService, str]) -> None:
    """A newer episode contradicts a fact only when it names the value it replaced: a fix that mentions the
    run of ruff says nothing of which linter the webhooks module uses; a migration done today does."""
    svc, p = env

    def episode(text: str) -> str:
        return svc.store(MemoryIn(content=text, memory_type="episodic"), project=p).memory.id

    fact = put(svc, p, "We switched from httpx to eslint for the upload pipeline in the webhooks module.")
    fix = episode(
        "Fixed NotFoundError in backend/webhooks/tokens.js: resolve_path() ran ruff on every retry "
        "when the upload pipeline in the webhooks module gave up."
    )
    fact2 = put(svc, p, "The billing module runs its tests with jest.")
    moved = episode("Migrated the billing module's tests from jest to vitest today.")
    found = {ids for _, ids in pairs(svc, p)} | {
        frozenset((c.a.id, c.b.id)) for c in cx.list_contradictions(svc, project=p, status="all")
    }
    assert frozenset((fact, fix)) not in found
    assert frozenset((fact2, moved)) in found


def test_a_tool_named_as_the_owner_of_a_part_is_not_the_subjects_value() -> None:
    """ "Check the eslint dashboards" names eslint's dashboards, not the tool the batch size uses; the same
    text with the tool stated as what is used still conflicts."""
    vocab = sj.Vocabulary(components={"gateway"})
    switch = "We switched from ruff to sentry for the batch size in the gateway module."
    config = (
        "Config for the batch size lives in src/gateway/consumer.py; the default of 12 was chosen for retries. "
        "Do not lower it without checking the eslint dashboards."
    )
    assert vd.judge(switch, config, 0.8, vocab).cls == "distinct"
    assert sj.read(config, vocab).owners == {"eslint"}
    uses = "The gateway module uses eslint for the batch size; the default of 12 was chosen for retries."
    assert vd.judge(switch, uses, 0.8, vocab).cls == "update"


def test_opposites_in_two_asides_are_not_a_contradiction() -> None:
    """ "Checked with the team before merging" and "after the outage last sprint" are asides of one rule; the
    same rule said once with "before" and once with "after" the migration is a contradiction."""
    rule = "On every project, keep the rate limiter behind a feature flag until it has run a week in staging"
    a = f"{rule}; Maria insists on it so that local runs match production. Checked with the team before merging."
    b = f"{rule}; Maria insists on it after the outage last sprint."
    assert vd.judge(a, b, 0.9).cls != "update"
    c = "Run the database migrations before deploying the billing api to staging."
    d = "Run the database migrations after deploying the billing api to staging."
    assert vd.judge(c, d, 0.9).cls == "update"


def test_services_beside_the_code_are_values() -> None:
    """Brokers, search engines and observability tools are values a statement holds: a stale sentry lock file
    and a stale postgres lock file are two different causes, not one statement twice."""
    a = "Running `uv sync` failed on the billing service. The cause was a stale sentry lock file; deleting it fixed it."
    b = "Running `uv sync` failed on the billing service. The cause was a stale kafka lock file; deleting it fixed it."
    for name in ("kafka", "sentry", "rabbitmq", "elasticsearch", "prometheus"):
        hit = ex.gazetteer_hit(name)
        assert hit is not None and hit.entity_type == "library", name
    assert vd.judge(a, b, 0.93).cls == "distinct"


def test_a_part_of_a_named_subject_is_not_the_component_of_that_name() -> None:
    """ "Ml-models runs its tooling under Python 3.10" is about ml-models' tooling, not the repository called
    tooling; the same statement about the tooling repository itself still conflicts."""
    vocab = sj.Vocabulary(components={"tooling", "ml-models"})
    repo = "The interpreter for the tooling repo is Python 3.12."
    assert vd.judge(repo, "Ml-models runs its tooling under Python 3.10.", 0.7, vocab).cls == "distinct"
    assert vd.judge(repo, "The tooling repo now runs on Python 3.13.", 0.8, vocab).cls == "update"


def test_a_module_named_only_inside_a_path_is_not_the_subject() -> None:
    """ "The scheduler service uses sqlalchemy … SearchIndexer in web/src/admin/store.go wraps it" is about the
    scheduler, though its path passes through admin; a path inside the module a statement names is that module."""
    vocab = sj.Vocabulary(components={"admin", "scheduler", "billing"})
    change = "We switched from sqlalchemy to kubectl for the cache warming in the admin module."
    other = (
        "The scheduler service uses sqlalchemy for the cache warming. SearchIndexer in web/src/admin/store.go "
        "wraps it so callers never import sqlalchemy directly."
    )
    assert vd.judge(other, change, 0.7, vocab).cls == "distinct"
    old = "Tests in src/billing/test_invoice.py run with jest."
    new = "The billing module now runs its tests with vitest instead of jest."
    assert vd.judge(old, new, 0.7, vocab).cls == "update"


def test_two_purposes_with_one_word_in_common_are_two_purposes() -> None:
    assert sj.other_purposes("Uses mypy for the build cache.", "Uses zod for the cache warming.") is not None
    assert (
        sj.other_purposes("Uses x for the timezone handling.", "Uses y for the session handling.") is not None
    )
    assert sj.other_purposes("Uses redis for the rate limiter.", "Uses memcached for rate limiting.") is None
    assert sj.other_purposes("Uses kafka for the dead letter queue.", "Uses sqs for the queue.") is None


def test_an_event_whose_cause_was_a_tool_does_not_supersede_its_choice(
    env: tuple[EngramService, str],
) -> None:
    """ "The cause was a stale zod lock file" has a word that can mark a change ("was") before a value the fact
    states, but says nothing replaced it: the fact stays live, no supersession is settled or proposed."""
    svc, p = env
    fact = put(
        svc,
        p,
        "We switched from redis to zod for the rate limiter in the gateway module because the old one leaked "
        "connections under load.",
    )
    event = svc.store(
        MemoryIn(
            content="Running `ruff check .` failed with ValidationError in the rate limiter of the gateway "
            "module. The cause was a stale zod lock file; deleting it and rerunning fixed it.",
            memory_type="episodic",
        ),
        project=p,
    ).memory.id
    every = {frozenset((c.a.id, c.b.id)) for c in cx.list_contradictions(svc, project=p, status="all")}
    assert frozenset((fact, event)) not in every


def test_a_procedure_for_deploying_is_not_superseded_by_a_change_for_another_purpose() -> None:
    """ "Before deploying scheduler, run kubectl …" is for deploying; "switched from kubectl to ruff for the token
    refresh" changes what the token refresh uses."""
    vocab = sj.Vocabulary(components={"scheduler"})
    deploy = "Before deploying scheduler, run `kubectl rollout restart deploy/api` and `make migrate`."
    change = "We switched from kubectl to ruff for the token refresh in the scheduler module."
    assert sj.purposes(deploy) == {"deploying"}
    assert vd.judge(deploy, change, 0.7, vocab).cls == "distinct"
    same = "Before deploying scheduler, run `helm upgrade scheduler` instead of kubectl."
    assert vd.judge(deploy, same, 0.8, vocab).cls == "update"


def test_two_ports_of_one_service_are_one_attribute_however_said() -> None:
    """ "It answers at 127.0.0.1:6367" and "the container publishes port 5405" give one service two ports: a
    change; the same forms about two services stay apart."""
    vocab = sj.Vocabulary(components={"thumbnails", "billing"})
    a = "If you need to hit the thumbnails service by hand, it answers at 127.0.0.1:6367."
    assert vd.judge(a, "The thumbnails container publishes port 5405.", 0.6, vocab).cls == "update"
    assert vd.judge(a, "The billing container publishes port 5405.", 0.6, vocab).cls == "distinct"


def test_one_shape_with_one_value_swapped_is_not_a_duplicate() -> None:
    """ "A stale nginx lock file" and "a stale alembic lock file" are two causes, though the command both ran
    names alembic; the same note with another reason appended is the same statement."""
    run = "Running `alembic upgrade head` failed with ValueError on the worker service."
    a = f"{run} The cause was a stale nginx lock file; deleting it and rerunning fixed it."
    b = f"{run} The cause was a stale alembic lock file; deleting it and rerunning fixed it."
    assert vd.judge(a, b, 0.88).cls == "distinct"
    assert vd.judge(a, a + " This took most of the afternoon to track down.", 0.95).cls == "duplicate"


def test_an_event_and_a_fact_with_the_same_values_are_not_duplicates(env: tuple[EngramService, str]) -> None:
    """A failed run whose cause was a stale jest lock file and the change to jest for the error budget name the
    same tools of one module; one is an event and one a fact, so no merge is proposed."""
    svc, p = env
    fact = put(
        svc,
        p,
        "We switched from terraform to jest for the error budget in the api module because the docs recommend "
        "it for this workload.",
    )
    event = svc.store(
        MemoryIn(
            content="Running `terraform plan` failed with KeyError on the api service. The cause was a stale "
            "jest lock file; deleting it and rerunning fixed it.",
            memory_type="episodic",
        ),
        project=p,
    ).memory.id
    proposed = [{m.id for m in item.sources} for item in svc.list_consolidations(project=p, status="all")]
    assert not any({fact, event} <= ids for ids in proposed), proposed
