"""A seeded generator of realistic coding-agent memories (15-60 words) and of the questions an agent asks.

The text mixes what coding notes hold: file paths, libraries, commands, error names, functions, people's
preferences, decisions with reasons, failures and their fixes. Every line is JSONL `engram import` accepts.
Same seed, same text: `python bench/realpath_text.py --project 10000 --user 5000 --seed 7 > data.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

AREAS = [
    "api",
    "auth",
    "billing",
    "search",
    "upload",
    "worker",
    "cache",
    "payments",
    "notifications",
    "reports",
    "admin",
    "ingest",
    "scheduler",
    "export",
    "metrics",
    "gateway",
    "profile",
    "webhooks",
    "sync",
    "cli",
]
DIRS = ["src", "lib", "app", "pkg", "internal", "services", "web/src", "backend", "core", "cmd"]
EXTS = ["py", "ts", "tsx", "go", "rs", "rb", "sql", "yaml", "toml", "js"]
STEMS = [
    "server",
    "client",
    "handler",
    "models",
    "views",
    "routes",
    "middleware",
    "schema",
    "config",
    "utils",
    "queue",
    "consumer",
    "producer",
    "retry",
    "pool",
    "session",
    "tokens",
    "index",
    "migrate",
    "store",
]
LIBS = [
    "postgres",
    "redis",
    "pytest",
    "fastapi",
    "django",
    "sqlalchemy",
    "alembic",
    "celery",
    "react",
    "vite",
    "jest",
    "vitest",
    "pydantic",
    "httpx",
    "numpy",
    "pandas",
    "docker",
    "terraform",
    "kubectl",
    "nginx",
    "poetry",
    "uv",
    "ruff",
    "mypy",
    "eslint",
    "prettier",
    "webpack",
    "grpc",
    "protobuf",
    "kafka",
    "sentry",
    "structlog",
    "boto3",
    "tokio",
    "serde",
    "axios",
    "zod",
    "prisma",
    "graphql",
    "mongodb",
]
ERRORS = [
    "ConnectionRefusedError",
    "TimeoutError",
    "KeyError",
    "TypeError",
    "ValueError",
    "IntegrityError",
    "ModuleNotFoundError",
    "PermissionError",
    "ECONNRESET",
    "ECONNREFUSED",
    "OperationalError",
    "UnicodeDecodeError",
    "AssertionError",
    "RecursionError",
    "DeadlockDetected",
    "SSLError",
    "JSONDecodeError",
    "NotFoundError",
    "RateLimitError",
    "ValidationError",
]
COMMANDS = [
    "make test",
    "npm run build",
    "cargo build --release",
    "docker compose up -d",
    "terraform plan",
    "pytest -x -q",
    "alembic upgrade head",
    "kubectl rollout restart deploy/api",
    "go test ./...",
    "ruff check .",
    "mypy src",
    "npm run lint",
    "uv sync",
    "poetry install",
    "make migrate",
    "yarn test --watch=false",
    "git bisect run make test",
    "docker build -t app .",
]
FUNCS = [
    "parse_config",
    "load_user",
    "retry_with_backoff",
    "build_query",
    "flush_queue",
    "render_invoice",
    "validate_token",
    "open_session",
    "compute_totals",
    "send_email",
    "refresh_cache",
    "sync_accounts",
    "handle_webhook",
    "resolve_path",
    "paginate",
    "serialize_event",
    "apply_migration",
    "check_quota",
]
CLASSES = [
    "UserRepository",
    "InvoiceService",
    "SessionManager",
    "RateLimiter",
    "EventBus",
    "CacheWarmer",
    "UploadWorker",
    "SearchIndexer",
    "TokenStore",
    "RetryPolicy",
    "ReportBuilder",
    "WebhookRouter",
]
PEOPLE = ["Alice", "Bob", "Priya", "Chen", "Maria", "Tomasz", "Aisha", "Kenji", "Lena", "Omar"]
TOPICS = [
    "retry logic",
    "connection pool",
    "rate limiter",
    "session handling",
    "index rebuild",
    "cache warming",
    "upload pipeline",
    "feature flags",
    "logging format",
    "error budget",
    "schema migration",
    "build cache",
    "pagination",
    "timezone handling",
    "token refresh",
    "batch size",
    "memory leak",
    "cold start",
    "flaky test",
    "deploy order",
    "secret rotation",
    "backpressure",
    "idempotency keys",
    "dead letter queue",
]
REASONS = [
    "because the old one leaked connections under load",
    "so CI stays under ten minutes",
    "since the team already knows it",
    "to keep the p95 latency below 200 ms",
    "because it handles retries for us",
    "so that local runs match production",
    "after the outage last sprint",
    "because the docs recommend it for this workload",
    "to avoid a second database",
    "since it removed a whole class of race conditions",
]
PREFS = [
    "prefers small pull requests with one change each",
    "wants type hints on every public function",
    "likes tests written before the fix",
    "asks for plain English commit messages",
    "prefers composition over inheritance",
    "wants logging at info level in production",
    "dislikes magic numbers and wants named constants",
    "prefers explicit imports over star imports",
    "wants the changelog updated in the same pull request",
    "prefers early returns to nested ifs",
]
FILLER = [
    "This took most of the afternoon to track down.",
    "Worth remembering for the next release.",
    "The fix is covered by a regression test now.",
    "We should revisit this after the migration.",
    "It only shows up on the staging cluster.",
    "Nobody had touched this code in a year.",
    "The logs made it obvious once the level was raised.",
    "Checked with the team before merging.",
    "It also affects the nightly batch job.",
    "The same pattern exists in two other modules.",
]


def _file(rng: random.Random) -> str:
    return f"{rng.choice(DIRS)}/{rng.choice(AREAS)}/{rng.choice(STEMS)}.{rng.choice(EXTS)}"


def _project_text(rng: random.Random) -> tuple[str, str]:
    f, f2, lib, lib2 = _file(rng), _file(rng), rng.choice(LIBS), rng.choice(LIBS)
    err, cmd, fn, cls = rng.choice(ERRORS), rng.choice(COMMANDS), rng.choice(FUNCS), rng.choice(CLASSES)
    topic, area, reason = rng.choice(TOPICS), rng.choice(AREAS), rng.choice(REASONS)
    n = rng.randint(2, 40)
    forms = [
        (
            "episodic",
            f"Fixed {err} in {f}: {fn}() did not close the {lib} connection when the {topic} gave up "
            f"after {n} attempts. Added a finally block and a test in {f2}.",
        ),
        (
            "episodic",
            f"Running `{cmd}` failed with {err} on the {area} service. The cause was a stale {lib} "
            f"lock file; deleting it and rerunning fixed it.",
        ),
        (
            "semantic",
            f"The {area} service uses {lib} for the {topic}, {reason}. {cls} in {f} wraps it so "
            f"callers never import {lib} directly.",
        ),
        ("semantic", f"We switched from {lib2} to {lib} for the {topic} in the {area} module {reason}."),
        (
            "procedural",
            f"To run the {area} tests locally: start {lib} with `docker compose up -d`, run `{cmd}`, "
            f"then check {f} for the fixtures. Set the batch size to {n} or the {topic} times out.",
        ),
        (
            "procedural",
            f"Before deploying {area}, run `{cmd}` and `make migrate`; {cls} expects the new columns "
            f"from the {topic} migration in {f}.",
        ),
        (
            "semantic",
            f"{cls}.{fn} in {f} is the only place that touches the {topic}; {rng.choice(PEOPLE)} owns "
            f"it and reviews every change to it.",
        ),
        (
            "episodic",
            f"Investigated the {topic} in {area}: {fn}() in {f} retried {n} times without backoff and "
            f"{lib} raised {err}. Changed it to exponential backoff with jitter.",
        ),
        (
            "semantic",
            f"Config for the {topic} lives in {f}; the default of {n} was chosen {reason}. Do not "
            f"lower it without checking the {lib} dashboards.",
        ),
        (
            "episodic",
            f"Refactored {cls} out of {f} into {f2} to break an import cycle with {fn}(). "
            f"`{cmd}` passes again and {lib} stopped warning about it.",
        ),
    ]
    kind, text = rng.choice(forms)
    if rng.random() < 0.5:
        text += " " + rng.choice(FILLER)
    return kind, text


def _user_text(rng: random.Random) -> tuple[str, str]:
    person, lib, lib2, topic = rng.choice(PEOPLE), rng.choice(LIBS), rng.choice(LIBS), rng.choice(TOPICS)
    forms = [
        (
            "semantic",
            f"{person} {rng.choice(PREFS)}, and {rng.choice(PREFS).replace('prefers', 'also prefers')}.",
        ),
        ("semantic", f"I prefer {lib} over {lib2} for new projects {rng.choice(REASONS)}."),
        (
            "procedural",
            f"When a test is flaky, first rerun it alone with `{rng.choice(COMMANDS)}`, then look "
            f"for shared state in the fixtures before touching the {topic}.",
        ),
        (
            "semantic",
            f"On every project, keep the {topic} behind a feature flag until it has run a week in "
            f"staging; {person} insists on it {rng.choice(REASONS)}.",
        ),
        (
            "procedural",
            f"My usual setup: `uv sync`, then `{rng.choice(COMMANDS)}`, and {lib} for formatting; "
            f"editor format-on-save must match CI.",
        ),
    ]
    kind, text = rng.choice(forms)
    if rng.random() < 0.4:
        text += " " + rng.choice(FILLER)
    return kind, text


def memories(n_project: int, n_user: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for scope, n, make in (("project", n_project, _project_text), ("user", n_user, _user_text)):
        made = 0
        while made < n:
            kind, text = make(rng)
            while len(text.split()) < 15:  # the shortest forms get a sentence of context, as real notes have
                text += " " + rng.choice(FILLER)
            if text in seen:  # an exact repeat would be merged, not stored
                text += f" ({rng.choice(AREAS)} #{rng.randint(1, 9999)})"
                if text in seen:
                    continue
            seen.add(text)
            tags = sorted({rng.choice(AREAS)} | ({rng.choice(LIBS)} if rng.random() < 0.5 else set()))
            out.append(
                {
                    "content": text,
                    "memory_type": kind,
                    "scope": scope,
                    "tags": tags,
                    "importance": round(rng.uniform(0.3, 0.9), 2),
                }
            )
            made += 1
    return out


def questions(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    forms = [
        "how do we run the {area} tests",
        "why did `{cmd}` fail with {err}",
        "which library does {f} use",
        "what changed in {f}",
        "{err} in {fn}",
        "how is the {topic} configured in {area}",
        "who owns the {topic}",
        "why did we switch to {lib}",
        "fix for {err} with {lib}",
        "what does {person} prefer in code review",
        "{cls} import cycle",
        "{topic} batch size default",
    ]
    return [
        rng.choice(forms).format(
            area=rng.choice(AREAS),
            cmd=rng.choice(COMMANDS),
            err=rng.choice(ERRORS),
            f=_file(rng),
            fn=rng.choice(FUNCS),
            topic=rng.choice(TOPICS),
            lib=rng.choice(LIBS),
            person=rng.choice(PEOPLE),
            cls=rng.choice(CLASSES),
        )
        for _ in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", type=int, default=10_000)
    ap.add_argument("--user", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for m in memories(args.project, args.user, args.seed):
        sys.stdout.write(json.dumps(m) + "\n")


if __name__ == "__main__":
    main()
