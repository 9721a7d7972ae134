"""Consolidation queue, proposals and approval policy against a real store and the real embedding model."""

from __future__ import annotations

from engram_core.models import MemoryIn
from engram_core.organise import consolidation as co
from engram_core.organise import consolidation_queue as coq
from engram_core.service import EngramService


def put(svc: EngramService, p: str, text: str, **kw: object) -> str:
    return svc.store(MemoryIn(content=text, **kw), project=p).memory.id  # type: ignore[arg-type]


def items(svc: EngramService, p: str, reason: str) -> list[co.ConsolidationItem]:
    return [i for i in co.list_consolidations(svc, project=p) if i.reason == reason]


def test_duplicate_is_proposed_as_it_is_written(env: tuple[EngramService, str]) -> None:
    """No reflection call: the write path proposes the pair, with the reason; a dry run adds nothing."""
    svc, p = env
    a = put(svc, p, "Logs are written as JSON with structlog", tags=["logging"], importance=0.4)
    b = put(svc, p, "We write JSON logs using structlog", tags=["observability"], importance=0.8)
    [item] = items(svc, p, "duplicate")
    assert {s.id for s in item.sources} == {a, b}
    assert item.evidence and "cosine" in item.evidence[0], item.evidence
    prop = item.proposal
    assert prop is not None and prop.source == "extractive"
    assert prop.content in {"Logs are written as JSON with structlog", "We write JSON logs using structlog"}
    assert set(prop.tags) == {"logging", "observability"}
    assert prop.importance == 0.8
    rep = co.reflect_and_consolidate(svc, project=p, dry_run=True)
    assert rep.queued["duplicate"] == 1 and len(items(svc, p, "duplicate")) == 1, "dry run queues nothing"
    svc.set_param("consolidation_auto_approve_below", 0.0)  # review everything in this test
    co.reflect_and_consolidate(svc, project=p)
    assert [i.id for i in items(svc, p, "duplicate")] == [item.id], "found again: the same item, not a second"
    assert item.needs_review is False and co.list_consolidations(svc, project=p)[0].needs_review


def test_a_group_grows_and_look_alikes_stay_apart(env: tuple[EngramService, str]) -> None:
    svc, p = env
    keys = [
        put(svc, p, t)
        for t in (
            "The billing service listens on port 8080.",
            "Remember: the billing service port is 8080.",
            "For local work the billing service answers on port 8080.",
        )
    ]
    put(svc, p, "The search service listens on port 8080.")  # same shape and value, another subject
    put(svc, p, "The billing service stores its data in Postgres.")  # same subject, another attribute
    [item] = items(svc, p, "duplicate")
    assert {s.id for s in item.sources} == set(keys)


def test_auto_approval_below_risk_and_review_above(env: tuple[EngramService, str]) -> None:
    svc, p = env
    a = put(svc, p, "Redis runs on port 6379 in docker-compose.yml")
    b = put(svc, p, "In docker-compose.yml Redis runs on port 6379")
    for i in range(3):
        put(
            svc,
            p,
            f"Debugged the flaky checkout test, attempt {i}: timing issue in cart.py",
            tags=["checkout"],
            memory_type="episodic",
        )
    rep = co.reflect_and_consolidate(svc, project=p)  # default policy: auto below risk 0.3
    assert rep.auto_approved == 1, "the duplicate (risk 0.1) is applied"
    assert rep.pending_review >= 1, "episodic_to_semantic (risk 0.5) waits for review"
    statuses = {svc.get(a, project=p).status, svc.get(b, project=p).status}
    assert "consolidated" in statuses
    src = svc.get(a if svc.get(a, project=p).status == "consolidated" else b, project=p)
    assert src.consolidated_into is not None
    merged = svc.get(src.consolidated_into, project=p)
    assert merged.metadata["consolidated_from"] and set(merged.metadata["consolidated_from"]) <= {a, b}
    log = svc.project_store(p).q1("SELECT action, details FROM consolidation_log")  # type: ignore[union-attr]
    assert {r["action"] for r in log} >= {"run", "approve"}
    assert any(r["action"] == "approve" and r["details"]["decided_by"] == "policy" for r in log)


def test_episodic_to_semantic_with_agent_summary(env: tuple[EngramService, str]) -> None:
    svc, p = env
    keys = [
        put(svc, p, text, memory_type="episodic", tags=["migrations"])
        for text in (
            "Ran alembic upgrade head and it failed on the users table",
            "alembic autogenerate missed the new index on orders",
            "Fixed alembic env.py to import all models before autogenerate",
        )
    ]
    put(svc, p, "Unrelated: lunch order for the team offsite", memory_type="episodic")
    co.reflect_and_consolidate(svc, project=p)
    [item] = items(svc, p, "episodic_to_semantic")
    assert {s.id for s in item.sources} == set(keys)
    assert item.proposal is not None and item.proposal.memory_type == "semantic"
    assert item.proposal.content.startswith("Recurring across 3 episodes")
    risk_before = item.risk
    item2 = co.propose_consolidation_summary(
        svc,
        item.id,
        "alembic autogenerate needs every model imported in env.py; check indexes by hand",
        project=p,
    )
    assert item2.proposal is not None and item2.proposal.source == "agent" and item2.risk < risk_before
    out = co.approve_consolidation(svc, item.id, project=p)
    assert out.memory is not None and out.memory.memory_type == "semantic"
    assert out.memory.content.startswith("alembic autogenerate needs")
    for k in keys:
        m = svc.get(k, project=p)
        assert m.status == "consolidated" and m.consolidated_into == out.memory.id
    assert co.list_consolidations(svc, project=p, status="completed")[0].id == item.id


def test_edit_and_reject(env: tuple[EngramService, str]) -> None:
    svc, p = env
    svc.set_param("consolidation_auto_approve_below", 0.0)
    put(svc, p, "Use poetry to add dependencies")
    put(svc, p, "Dependencies are added with poetry")
    co.reflect_and_consolidate(svc, project=p)
    [item] = items(svc, p, "duplicate")
    rejected = co.reject_consolidation(svc, item.id, project=p, reason="keep both wordings")
    assert rejected.status == "rejected"
    co.reflect_and_consolidate(svc, project=p)
    assert items(svc, p, "duplicate") == [], "a rejected set is not proposed again"


def test_decay_items_from_the_core_sweep_get_proposals(env: tuple[EngramService, str]) -> None:
    svc, p = env
    k = put(svc, p, "The staging database is refreshed every Sunday night")
    store = svc.project_store(p)
    assert store is not None
    store.q(
        "CREATE consolidation_queue SET memory_id = $m, memory_ids = [$m], reason = 'decay', priority = 0.5, "
        "risk = 0.2",
        {
            "m": store.q1(
                "SELECT VALUE id FROM ONLY $id",
                {"id": __import__("engram_core.storage", fromlist=["record"]).record(k)},
            )
        },
    )
    [item] = items(svc, p, "decay")
    assert item.proposal is not None and item.proposal.content.startswith("The staging database")
    assert item.risk == coq.SINGLE_DECAY_RISK and item.needs_review, "archiving a memory is a person's call"
    out = co.approve_consolidation(svc, item.id, project=p)
    # `consolidated` means merged into a summary that names it: a lone decayed memory is archived instead.
    assert out.memory is None and out.sources == {k: "archived"}
    m = svc.get(k, project=p)
    assert m.status == "archived" and m.consolidated_into is None


def test_promotion_and_merge_and_scheduled_reasons(env: tuple[EngramService, str]) -> None:
    svc, p = env
    svc.set_param("consolidation_auto_approve_below", 0.0)
    strong = put(
        svc,
        p,
        "Always run database migrations inside a transaction",
        memory_type="procedural",
        importance=0.9,
    )
    store = svc.project_store(p)
    assert store is not None
    store.q(
        "UPDATE $id SET access_count = 6",
        {"id": __import__("engram_core.storage", fromlist=["record"]).record(strong)},
    )
    store.refresh([strong])
    put(svc, p, "The payments service retries webhooks three times with backoff")
    put(svc, p, "The payments service retries failed webhooks with exponential backoff and jitter")
    rep = co.reflect_and_consolidate(svc, project=p, level="full")
    assert "full" in rep.levels
    assert rep.queued["promotion"] == 1
    [promo] = items(svc, p, "promotion")
    out = co.approve_consolidation(svc, promo.id, project=p)
    assert out.message and svc.get(strong, project=p).metadata["promoted_to_user"]
    reasons = {i.reason for i in co.list_consolidations(svc, project=p, status="all")}
    assert "merge" in reasons or "duplicate" in reasons
    assert set(coq.REASONS) >= reasons


def test_replay_priority_orders_candidates(env: tuple[EngramService, str]) -> None:
    svc, p = env
    hi = put(svc, p, "Important: never force-push to main", importance=0.95)
    lo = put(svc, p, "Minor: the logo is blue", importance=0.1)
    store = svc.project_store(p)
    assert store is not None
    assert coq.replay_priority(svc, store, hi) > coq.replay_priority(svc, store, lo)
