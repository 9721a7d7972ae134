"""A realistic, deterministic demo memory set, built through the service API only, in a data root of its own.

``open_demo`` keeps the demo apart from the user's memories: its own data root (``$ENGRAM_HOME/demo`` by
default, with its own user scope), opened in process (no daemon, so no maintenance sweep ever runs on it), built
once and reopened as it was on every later load (``demo.json`` records when; its clock is the real now, so it
keeps decaying like any store),
and ``remove_demo`` deletes it (``engram tui --remove-demo``).

``engram tui --demo`` loads it so a newcomer sees every pane alive in one command; the TUI tests and the
screenshots build it on a service given a FrozenClock and SequentialIds (``engram_core.ids``), so the result is
identical on every run, whatever PYTHONHASHSEED is. Everything is relative to ``now`` and drawn from a seeded
RNG: same seed, same ``now``, same id source → same store.

The ``service`` argument is anything with the EngramService methods (the in-process service or the daemon
client), so the demo never opens a store itself.

Known limits of "through the API only" (they are the service's, on purpose):
- access counts cannot be set, only earned by recall, and a recall stamps ``last_accessed_at`` with the
  database's wall clock, so the demo does not recall: every access count starts at 0;
- status history timestamps after the first come from a database event (``time::now()``), not the service clock.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engram_core.clock import Clock
from engram_core.models import MemoryIn, MemoryPatch, MemoryType, Scope, Status

DEMO_PROJECT_NAME = "payments-api"
OTHER_PROJECT_NAME = "infra-terraform"
DEMO_CLAUDE_SESSION = "demo-claude-session"

# ── hand-written seeds: what a few weeks of Claude Code work on a FastAPI service leaves behind ──
SEMANTIC = [
    "The API is FastAPI 0.115 on Python 3.12 with pydantic v2 models in app/schemas/",
    "Postgres 16 is the primary store; migrations are Alembic revisions under migrations/versions/",
    "Redis is used only for idempotency keys (24 h TTL) and the rate limiter, never as a cache of record",
    "Refunds are processed asynchronously by the worker in app/workers/refunds.py via an outbox table",
    "Money is stored as integer minor units (cents) with an ISO-4217 currency column; never floats",
    "Stripe webhooks are verified with the signing secret from STRIPE_WEBHOOK_SECRET before parsing",
    "The ledger table is append-only: corrections are new reversing entries, never UPDATEs",
    "Tests use pytest with pytest-asyncio in auto mode; fixtures live in tests/conftest.py",
    "CI runs on GitHub Actions: lint (ruff), type check (mypy --strict on app/), tests, then docker build",
    "The public API is versioned under /v2; /v1 is frozen and only receives security fixes",
    "Idempotency-Key header is required on every POST to /v2/payments and /v2/refunds",
    "Settings are loaded by pydantic-settings from environment variables prefixed PAY_",
    "Background jobs use arq with Redis; job functions are registered in app/workers/__init__.py",
    "The currency conversion service is called through app/clients/fx.py with a 2 s timeout and 3 retries",
    "Logging is structlog JSON; request ids are propagated through the X-Request-ID header",
    "Database sessions come from app/db.py:get_session, an async generator used as a FastAPI dependency",
    "Feature flags are read from LaunchDarkly; the SDK key lives in PAY_LD_SDK_KEY",
    "The payments table has a partial unique index on (merchant_id, idempotency_key) where status != 'failed'",
    "OpenAPI docs are served at /docs only when PAY_ENV is local or staging",
    "Monetary rounding follows banker's rounding (ROUND_HALF_EVEN) in app/money.py",
    "The merchant onboarding flow lives in app/routers/merchants.py and requires KYC status 'verified'",
    "Webhook deliveries to merchants retry with exponential backoff up to 12 attempts over 48 h",
    "The refunds endpoint refuses amounts above the captured amount minus previous refunds",
    "Time zones: everything is stored in UTC; merchant-local display happens in the dashboard only",
    "Error responses follow RFC 9457 problem+json with a stable `type` URI per error",
]
PROCEDURAL = [
    "Run the test suite with `uv run pytest -x -q`; add `-k refunds` to focus on refunds",
    "Create a migration with `uv run alembic revision --autogenerate -m '<what>'` and review it by hand",
    "Start the local stack with `docker compose up -d db redis` then `uv run uvicorn app.main:app --reload`",
    "Before committing: `uv run ruff check --fix . && uv run ruff format . && uv run mypy app`",
    "To replay a Stripe webhook locally: `stripe trigger payment_intent.succeeded` with the CLI forwarding to :8000",
    "Release: bump version in pyproject.toml, tag vX.Y.Z, CI builds and pushes the image; deploy via Argo",
    "To debug a stuck refund, query the outbox: SELECT * FROM outbox WHERE processed_at IS NULL ORDER BY id",
    "Regenerate the OpenAPI client for the dashboard with `make openapi-client` after changing schemas",
    "When a flaky async test appears, run it 50 times with `pytest --count 50 -p no:randomly` to reproduce",
    "Seed a local database with `uv run python -m scripts.seed --merchants 5`",
    "To rotate the webhook secret: add the new one to PAY_WEBHOOK_SECRETS (comma list), deploy, then drop the old",
    "Profile a slow endpoint with `py-spy record -o profile.svg -- uvicorn app.main:app`",
    "Load-test the payments endpoint with `k6 run load/payments.js` against staging only",
    "Open a psql shell on the local db: `docker compose exec db psql -U pay pay`",
]
EPISODIC = [
    "Fixed the flaky test_refund_partial by freezing time with time-machine; it depended on wall-clock midnight",
    "Investigated 500s on /v2/payments: the FX client timed out; raised the timeout to 2 s and added retries",
    "Refactored app/money.py to use Decimal everywhere; found two float conversions in the CSV export",
    "Migration 0042 failed on staging because of a long-running lock; split it into two revisions",
    "The user asked to keep PR descriptions short and to list breaking changes first",
    "Reviewed the webhook retry logic with the user; agreed to cap retries at 12 attempts",
    "Tried SQLAlchemy 2.1 beta: the async session API changed, reverted to 2.0.36",
    "Found that the dashboard relies on the undocumented `fee_breakdown` field; kept it and documented it",
    "Debugged a deadlock between the refunds worker and the ledger writer; fixed by ordering row locks by id",
    "The user prefers small commits with imperative messages, one concern each",
    "Added an index on payments(created_at) after the monthly report query took 9 s",
    "CI broke because ruff 0.8 added a new rule (PLR2004); added the magic numbers to constants",
    "Paired on the merchant KYC flow; the compliance team needs an audit log of status changes",
    "Ran the load test: p99 of POST /v2/payments was 180 ms at 300 rps on staging",
    "Discovered that idempotency keys were case-sensitive; normalised them to lowercase in the middleware",
]
WORKING = [
    "Currently editing app/routers/refunds.py: adding the partial-refund validation",
    "Open question: should refunds above 10k EUR require a second approver?",
    "Next step: write tests for the currency mismatch case in test_refunds.py",
    "Scratch: the failing assertion expects 1999 but gets 2000 (rounding in fee calculation)",
    "TODO this session: update the changelog once the refund validation is merged",
]
USER = [
    ("The user prefers ruff over flake8 and black in every Python project", MemoryType.semantic),
    ("The user writes commit messages in the imperative mood, under 72 characters", MemoryType.semantic),
    (
        "Always run the tests before proposing a commit; never commit with failing tests",
        MemoryType.procedural,
    ),
    ("The user works in Europe/Berlin and reads timestamps in 24 h format", MemoryType.semantic),
    ("The user likes type hints everywhere and mypy --strict on new modules", MemoryType.semantic),
    ("Prefer uv over pip and poetry for Python environments", MemoryType.procedural),
    (
        "Explain trade-offs briefly before large refactors; the user wants to approve the plan first",
        MemoryType.procedural,
    ),
    ("The user's editor is Neovim with the LSP; do not add VS Code settings files", MemoryType.semantic),
]
OTHER_PROJECT = [
    ("Terraform 1.8 with the AWS provider 5.x; state in S3 with DynamoDB locking", MemoryType.semantic),
    ("Run `terraform plan -out plan.bin` and have it reviewed before any apply", MemoryType.procedural),
    ("The staging VPC is 10.20.0.0/16; production is 10.10.0.0/16", MemoryType.semantic),
    ("Modules live in modules/; environments in envs/staging and envs/prod", MemoryType.semantic),
    (
        "An apply on prod on 2025-05-12 recreated the NAT gateway; added lifecycle prevent_destroy",
        MemoryType.episodic,
    ),
    ("Use `tflint --recursive` in CI; the user wants zero warnings", MemoryType.procedural),
]
# Pairs that say nearly the same thing (for the consolidation queue) and pairs that disagree (contradictions).
NEAR_DUPLICATES = [
    ("Run the tests with `uv run pytest -x -q`", "Use `uv run pytest -x -q` to run the whole test suite"),
    ("Redis holds idempotency keys with a 24 hour TTL", "Idempotency keys are kept in Redis for 24 hours"),
    ("Money amounts are integers in minor units (cents)", "Store amounts as integer cents, never as floats"),
]
CONTRADICTIONS = [
    ("The local API listens on port 8080", "The local API listens on port 8000"),
    ("Run the test suite with pytest -n 4 in parallel", "Run the test suite with pytest -n 8 in parallel"),
    (
        "The refunds worker runs as a cron job every 5 minutes",
        "The refunds worker does not run as a cron job",
    ),
    ("Webhook retries are capped at 12 attempts", "Webhook retries are capped at 8 attempts"),
    ("Use Poetry to manage dependencies", "Do not use Poetry to manage dependencies; use uv"),
]
COMPONENTS = [
    "payments",
    "refunds",
    "ledger",
    "webhooks",
    "merchants",
    "fx",
    "reports",
    "auth",
    "outbox",
    "dashboard",
]
GENERATED_EPISODIC = [
    "Fixed a bug in {c}: {bug}",
    "Code review on {c}: {note}",
    "Investigated a staging alert on {c}: {bug}",
]
BUGS = [
    "an off-by-one in pagination dropped the last item of each page",
    "a missing await meant the audit log was never written",
    "timezone-naive datetimes compared against aware ones raised TypeError",
    "the N+1 query on list endpoints; added selectinload",
    "a race on concurrent updates; added SELECT … FOR UPDATE",
    "retries were not idempotent; now keyed on the request id",
    "a Decimal was serialised as float in the JSON response",
    "the cursor pagination token leaked internal ids; now opaque",
]
NOTES = [
    "the user asked for smaller functions and explicit return types",
    "agreed to move validation into pydantic validators",
    "suggested property-based tests with hypothesis for amount parsing",
    "kept the public field names stable for the dashboard",
    "replaced a bare except with specific exceptions",
]


@dataclass
class DemoReport:
    project_root: str
    other_project_root: str
    session_key: str
    counts: dict[str, int] = field(default_factory=dict)
    promoted: list[str] = field(default_factory=list)
    organise: str = ""

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def demo_project_dirs(base: Path) -> tuple[Path, Path]:
    """Two project folders (a .git marker makes each a project root) inside ``base``."""
    main, other = base / DEMO_PROJECT_NAME, base / OTHER_PROJECT_NAME
    for root in (main, other):
        (root / ".git").mkdir(parents=True, exist_ok=True)
    return main, other


RECALLS = [  # (days before now, query): what the agent looked up, and when: these memories were used
    (21.0, "how are refunds processed"),
    (14.0, "idempotency key header"),
    (9.0, "run the test suite"),
    (6.0, "money stored as integer cents"),
    (4.0, "stripe webhook signing secret"),
    (3.0, "create a migration"),
    (2.0, "refunds amount validation"),
    (1.0, "redis idempotency keys ttl"),
    (0.5, "before committing lint"),
    (0.2, "partial refunds"),
    (0.05, "database sessions dependency"),
]


def build_demo(
    service: Any,
    base: Path | str,
    now: datetime,
    *,
    seed: int = 7,
    travel: Callable[[datetime], None] | None = None,
) -> DemoReport:
    """Fill a demo project (and the user scope) under ``base`` through the service API; returns what it made.

    ``travel`` sets the service's clock (the demo's own, in process). Given, the memories are stored with the
    clock at their creation times, so each one was last used when it was created (ages from minutes to months), and
    the agent's recalls (RECALLS) happen on their days: access counts and strengths differ, and the decay curves
    tell the story. The clock is set back to ``now`` at the end."""
    rng = random.Random(seed)
    main_root, other_root = demo_project_dirs(Path(base))
    project = str(main_root)
    minute = 0

    def at(days_ago: float) -> datetime:
        # Distinct timestamps (one minute apart at least) keep every sort order stable across runs.
        nonlocal minute
        minute += 1
        return now - timedelta(days=days_ago) - timedelta(minutes=minute)

    items: list[MemoryIn] = []
    for text in SEMANTIC:
        items.append(
            MemoryIn(
                content=text,
                memory_type=MemoryType.semantic,
                scope=Scope.project,
                tags=["architecture", rng.choice(COMPONENTS)],
                importance=round(rng.uniform(0.5, 0.95), 2),
                created_at=at(rng.uniform(0.5, 60)),
            )
        )
    for text in PROCEDURAL:
        items.append(
            MemoryIn(
                content=text,
                memory_type=MemoryType.procedural,
                scope=Scope.project,
                tags=["howto"],
                importance=round(rng.uniform(0.55, 0.95), 2),
                created_at=at(rng.uniform(1, 120)),
            )
        )
    for text in EPISODIC:
        items.append(
            MemoryIn(
                content=text,
                memory_type=MemoryType.episodic,
                scope=Scope.project,
                tags=["episode"],
                importance=round(rng.uniform(0.3, 0.8), 2),
                created_at=at(rng.uniform(0.2, 14)),
            )
        )
    for c in COMPONENTS:
        # Per-component templates ("{c}: the router lives in app/routers/{c}.py") are not stored: the
        # contradiction detector reads them as one fact with differing values, which would bury the real ones.
        combos = [(t, b, n) for t in GENERATED_EPISODIC for b in range(len(BUGS)) for n in range(len(NOTES))]
        for tpl, b, n in rng.sample(combos, 16):
            # Distinct wording, no invented numbers: numbers that differ read as contradicting values.
            text = tpl.format(c=c, bug=BUGS[b], note=NOTES[n])
            if any(text == it.content for it in items):
                continue
            items.append(
                MemoryIn(
                    content=text,
                    memory_type=MemoryType.episodic,
                    scope=Scope.project,
                    tags=[c, "episode"],
                    importance=round(rng.uniform(0.1, 0.7), 2),
                    created_at=at(rng.uniform(0.05, 30)),
                )
            )
    for older, newer in NEAR_DUPLICATES + CONTRADICTIONS:
        items.append(
            MemoryIn(
                content=older,
                memory_type=MemoryType.semantic,
                scope=Scope.project,
                tags=["dup-demo"],
                importance=round(rng.uniform(0.5, 0.8), 2),
                created_at=at(rng.uniform(20, 40)),
            )
        )
        items.append(
            MemoryIn(
                content=newer,
                memory_type=MemoryType.semantic,
                scope=Scope.project,
                tags=["dup-demo"],
                importance=round(rng.uniform(0.5, 0.8), 2),
                created_at=at(rng.uniform(1, 10)),
            )
        )
    for text, mtype in USER:
        items.append(
            MemoryIn(
                content=text,
                memory_type=mtype,
                scope=Scope.user,
                tags=["preference"],
                importance=round(rng.uniform(0.6, 0.95), 2),
                created_at=at(rng.uniform(5, 200)),
            )
        )

    results = []
    if travel is not None:
        # Stored in the order they were made, the clock at each group's time: a memory's last use is (about) when
        # it was created, so ages run from minutes to months.
        items.sort(key=lambda it: it.created_at or now)
        for start in range(0, len(items), 4):
            group = items[start : start + 4]
            travel(max(it.created_at or now for it in group))
            results.extend(service.store_many(group, project=project))
        travel(now)
    else:
        for start in range(0, len(items), 64):
            results.extend(service.store_many(items[start : start + 64], project=project))
    mems = [r.memory for r in results]

    other = [
        MemoryIn(content=t, memory_type=m, scope=Scope.project, importance=0.6, created_at=at(30 + i))
        for i, (t, m) in enumerate(OTHER_PROJECT)
    ]
    service.store_many(other, project=str(other_root))

    # A live session with scratch notes and a few things worth keeping.
    session = service.start_session(project=project, claude_session_id=DEMO_CLAUDE_SESSION)
    sess_items = [
        MemoryIn(
            content=t,
            memory_type=MemoryType.working,
            scope=Scope.session,
            tags=["wip"],
            importance=0.4,
            created_at=now - timedelta(minutes=5 * (i + 1)),
        )
        for i, t in enumerate(WORKING)
    ]
    sess_items += [
        MemoryIn(
            content="Partial refunds must be validated against captured minus refunded amounts",
            memory_type=MemoryType.semantic,
            scope=Scope.session,
            importance=0.8,
            tags=["refunds"],
            created_at=now - timedelta(minutes=42),
        ),
        MemoryIn(
            content="Started the session by reading app/routers/refunds.py and tests/test_refunds.py",
            memory_type=MemoryType.episodic,
            scope=Scope.session,
            importance=0.3,
            created_at=now - timedelta(minutes=55),
        ),
    ]
    sess_results = service.store_many(sess_items, project=project, session=session.session_key)
    if travel is not None:
        # The agent used some memories over the last weeks: each recall strengthens what it returns then.
        for days, query in RECALLS:
            travel(now - timedelta(days=days))
            service.recall(query, project=project, session=session.session_key, limit=3)
        travel(now)

    # Lifecycle: most project memories were used (active), old weak episodes archived, a few forgotten.
    by_type: dict[str, list[Any]] = {}
    for m in mems:
        by_type.setdefault(m.memory_type.value, []).append(m)
    project_mems = [m for m in mems if m.scope == Scope.project]
    for m in project_mems:
        roll = rng.random()
        if "dup-demo" in m.tags:
            service.set_status(m.id, Status.active, reason="first retrieval", project=project)
            continue
        age = (now - m.created_at).total_seconds() / 86400
        if m.memory_type == MemoryType.episodic and age > 10 and roll < 0.5:
            service.set_status(m.id, Status.archived, reason="strength fell below 0.1", project=project)
        elif m.memory_type == MemoryType.episodic and age > 20 and roll < 0.6:
            service.forget(m.id, project=project, reason="strength fell below 0.01", erase=True, confirm=True)
        elif roll < 0.72:
            service.set_status(m.id, Status.active, reason="first retrieval", project=project)
        elif roll < 0.8 and m.memory_type != MemoryType.procedural:
            service.set_status(m.id, Status.consolidated, reason="queued for consolidation", project=project)
    for m in mems:
        if m.scope == Scope.user:
            service.set_status(m.id, Status.active, reason="first retrieval")
    # A superseded one (an outdated fact replaced by a newer memory).
    old = next(m for m in project_mems if m.content.startswith("OpenAPI docs"))
    service.set_status(
        old.id, Status.superseded, reason="docs are now served on every environment", project=project
    )

    # Pinned: the things the team wants injected no matter how they decay.
    for m in [*by_type["procedural"][:2], by_type["semantic"][4]]:
        service.update(m.id, MemoryPatch(pinned=True), project=project)

    report = DemoReport(
        project_root=project, other_project_root=str(other_root), session_key=session.session_key
    )
    # Promotions: a session insight up to the project, a project convention up to the user scope.
    keep = next(r.memory for r in sess_results if r.memory.memory_type == MemoryType.semantic)
    report.promoted += service.promote(
        keep.id, "project", project=project, session=session.session_key
    ).promoted
    convention = next(m for m in project_mems if m.content.startswith("Before committing"))
    report.promoted += service.promote(convention.id, "user", project=project).promoted

    # The organise layer extracts entities/relations and flags contradictions as memories are stored
    # (CONTRADICTIONS above); a full reflection pass queues consolidations (NEAR_DUPLICATES, episode clusters)
    # and applies only the low-risk ones, so the rest wait for review. No `maintain()` here: its decay sweep
    # runs on the database's wall clock, which would age a demo built on a frozen clock by months.
    try:
        rep = service.reflect_and_consolidate(project=project, level="full")
    except Exception as exc:  # noqa: BLE001 - the demo still shows everything else; say what failed
        rep = None
        report.organise = f"reflection pass failed ({type(exc).__name__}: {str(exc)[:120]}); "
    pending = len(service.list_consolidations(project=project))
    conflicts = len(service.list_contradictions(project=project))
    report.organise += (
        f"{pending} consolidations waiting for review ({getattr(rep, 'auto_approved', 0)} "
        f"applied automatically), {conflicts} open contradictions"
    )

    report.counts = {
        "project": len(project_mems),
        "user": sum(m.scope == Scope.user for m in mems) + 1,
        "session": len(sess_results),
        "other_project": len(other),
    }
    return report


DEMO_MARKER = "demo.json"


class DemoClock(Clock):
    """The real time, except while the build sets it (``travel``): a demo's clock is always at the real now."""

    def __init__(self) -> None:
        self.at: datetime | None = None

    def travel(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at if self.at is not None else datetime.now(UTC)


def demo_root(home: Path | str | None = None) -> Path:
    """Where the demo lives: its own data root beside (never inside the stores of) the user's."""
    from engram_core.paths import engram_home

    return (Path(home) if home else engram_home()) / "demo"


def remove_demo(root: Path) -> bool:
    """Delete the demo's data root; False when there is none. Refuses a folder that is not a demo root."""
    if not root.exists():
        return False
    if not (root / DEMO_MARKER).exists():
        raise ValueError(f"{root} has no {DEMO_MARKER}: not a demo data root, left untouched")
    shutil.rmtree(root)
    return True


def open_demo(
    root: Path, *, reset: bool = False, embedder: Any = None, progress: Callable[[str], None] | None = None
) -> tuple[Any, DemoReport]:
    """The demo service (in process, on ``root``) and what it holds: built on first use, reopened unchanged after.

    ``reset`` rebuilds it from scratch. A build that stopped half way (no ``"ready"`` in the marker) is redone.
    """
    from engram_core.config import ensure_private_dir
    from engram_core.service import EngramService

    marker = root / DEMO_MARKER
    if reset and root.exists():
        remove_demo(root)
    info: dict[str, Any] = {}
    if marker.exists():
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
    if info.get("state") == "ready":
        # The real now: a demo reopened a week later shows a week more decay, never times in the future.
        svc = EngramService(root / "home", embedder=embedder, clock=Clock())
        report = DemoReport(**info["report"])
        return svc, report
    if root.exists():
        shutil.rmtree(root)  # an unfinished build (its marker says so): start again
    ensure_private_dir(root)
    _write_marker(marker, {"state": "building"})
    if progress:
        progress("Building the demo set (embedding a few hundred memories)…")
    clock = DemoClock()
    svc = EngramService(root / "home", embedder=embedder, clock=clock)
    try:
        now = svc.now()
        report = build_demo(svc, root / "projects", now, travel=clock.travel)
        clock.at = None
    except BaseException:
        svc.close()
        raise
    # The end of the build, not its start: the database stamps some times (detection, status history) with its
    # own clock while the build runs, and a reopened demo must not show them in the future.
    _write_marker(marker, {"state": "ready", "built_at": svc.now().isoformat(), "report": asdict(report)})
    return svc, report


def _write_marker(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


__all__ = [
    "DEMO_PROJECT_NAME",
    "DemoReport",
    "build_demo",
    "demo_project_dirs",
    "demo_root",
    "open_demo",
    "remove_demo",
]
