"""A seeded, labelled set of realistic project memory for judging the review queues.

The texture is what a codebase's memory holds: many parallel statements about different modules, services,
ports, commands, files and pull requests, each subject stated once. Planted among it, with labels:

- true contradictions: one subject, an attribute whose value changed between two statements written weeks
  apart (a test runner migrated, a port moved, the deploy tool replaced, a language pin raised, the default
  branch renamed, a database or package manager swapped, an owner changed), in varied wording: sometimes the
  newer one says "now" / "migrated" / "no longer", sometimes it just states the new value;
- true duplicate groups: 2-4 memories saying the same thing about one subject in different words;
- look-alikes: the same template about a different subject (another service on another port), which must
  never be raised as a contradiction nor merged.

Every memory carries a label ``subject`` (attribute and subject, or a unique id for texture) and ``value``:
two memories contradict exactly when their subjects are equal and their values differ; a merge is right only
when every source has one subject and one value. Same seed, same text.

    python bench/review_data.py --n 3000 --seed 5 > data.jsonl      # the import file (labels beside it)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

SERVICES = [
    "billing",
    "search",
    "upload",
    "export",
    "reporting",
    "auth",
    "gateway",
    "ledger",
    "inventory",
    "notifications",
    "scheduler",
    "webhooks",
    "metrics",
    "profile",
    "checkout",
    "catalog",
    "shipping",
    "pricing",
    "audit",
    "sync",
    "ingest",
    "media",
    "chat",
    "payouts",
    "onboarding",
    "analytics",
    "admin",
    "invoicing",
    "tenancy",
    "feature-flags",
    "recommendations",
    "geo",
    "identity",
    "session",
    "quota",
    "archive",
    "mailer",
    "render",
    "pdf",
    "thumbnails",
]
APPS = [
    "web",
    "dashboard",
    "mobile-api",
    "docs-site",
    "storefront",
    "admin-ui",
    "widget",
    "cli",
    "sdk",
    "landing",
    "design-system",
    "portal",
    "backoffice",
    "marketing-site",
    "status-page",
    "editor",
    "embed",
    "extension",
]
REPOS = [
    "platform",
    "infra",
    "frontend",
    "monorepo",
    "data-pipelines",
    "ml-models",
    "mobile",
    "terraform-modules",
    "shared-libs",
    "api-clients",
    "tooling",
    "sandbox",
    "docs",
    "helm-charts",
    "proto",
]
RUNNERS = ["Jest", "Vitest", "Mocha", "Ava", "Jasmine", "Karma", "Playwright Test", "uvu"]
DEPLOYERS = [
    "Heroku",
    "Fly.io",
    "Helm on the Kubernetes cluster",
    "Ansible",
    "Capistrano",
    "AWS ECS",
    "Nomad",
    "Render",
    "Argo CD",
]
DATABASES = ["Postgres", "MySQL", "SQLite", "MongoDB", "CockroachDB", "DynamoDB", "MariaDB"]
PKG = ["npm", "pnpm", "Yarn", "Bun"]
BRANCHES = ["master", "main", "trunk", "develop"]
PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]
NODES = ["16", "18", "20", "22"]
PEOPLE = [
    "Alice",
    "Bob",
    "Priya",
    "Chen",
    "Maria",
    "Tomasz",
    "Aisha",
    "Kenji",
    "Lena",
    "Omar",
    "Sven",
    "Ines",
]
ENVS = [
    "STRIPE_MODE",
    "DATABASE_URL",
    "REDIS_URL",
    "AWS_PROFILE",
    "FEATURE_FLAGS_FILE",
    "SENTRY_DSN",
    "LOG_LEVEL",
    "S3_BUCKET",
    "KAFKA_BROKERS",
    "OTEL_ENDPOINT",
]
LIBS = [
    "redis",
    "kafka",
    "protobuf",
    "tokio",
    "zustand",
    "celery",
    "rabbitmq",
    "minio",
    "elasticsearch",
    "nats",
    "localstack",
    "mailhog",
    "wiremock",
    "temporal",
]
COMMANDS = [
    "npm test",
    "npx playwright test",
    "pytest -x -q",
    "make test",
    "go test ./...",
    "cargo test",
    "yarn test --watch=false",
    "tox -e py311",
    "bundle exec rspec",
    "pnpm vitest run",
]
FUNCS = [
    "load_config",
    "parse_event",
    "retry_with_backoff",
    "flush_queue",
    "render_invoice",
    "validate_token",
    "open_session",
    "compute_totals",
    "send_email",
    "refresh_cache",
    "sync_accounts",
    "handle_webhook",
]
DIRS = ["src", "internal", "app", "lib", "services", "pkg", "backend", "web/src"]
STEMS = [
    "repository",
    "handler",
    "client",
    "models",
    "routes",
    "worker",
    "schema",
    "service",
    "views",
    "tasks",
]
EXTS = ["py", "go", "ts", "rb", "rs"]
ERRORS = [
    "ConnectionRefusedError",
    "TimeoutError",
    "KeyError",
    "IntegrityError",
    "ECONNRESET",
    "DeadlockDetected",
    "ValidationError",
    "RateLimitError",
    "SSLError",
    "JSONDecodeError",
    "PermissionError",
    "OperationalError",
]
FILLER = [
    "This took most of the afternoon to track down.",
    "Worth remembering for the next release.",
    "Checked with the team before merging.",
    "It only shows up on the staging cluster.",
    "The logs made it obvious once the level was raised.",
    "We should revisit this after the migration.",
]


@dataclass(frozen=True)
class Attribute:
    """One attribute of one kind of subject, with the ways people state it and the ways they state a change."""

    name: str
    subjects: list[str]
    values: list[str]
    plain: list[str]  # {s} the subject, {v} the value
    changed: list[str]  # {s}, {v} the new value, {o} the old one


ATTRIBUTES = [
    Attribute(
        "port",
        SERVICES,
        [str(p) for p in range(3000, 9900, 37)],
        [
            "The {s} service listens on port {v}.",
            "{S} runs on port {v} locally; docker compose maps the same port on the host.",
            "Point your client at localhost:{v} to reach the {s} service.",
            "The {s} API is served on port {v} in every environment.",
        ],
        [
            "The {s} service moved from port {o} to port {v}; update your local configs.",
            "{S} now listens on port {v} (it used to be {o}).",
            "Heads up: the {s} service no longer uses port {o}, it is on {v} now.",
            "The {s} API is served on port {v} in every environment.",
        ],
    ),
    Attribute(
        "test_runner",
        APPS,
        RUNNERS,
        [
            "Unit tests in the {s} package run with {v}.",
            "The {s} app uses {v} as its test runner.",
            "We test the {s} frontend with {v}; keep new specs next to the components.",
        ],
        [
            "Migrated the {s} package's unit tests from {o} to {v}.",
            "The {s} app switched its test runner to {v}; {o} is gone.",
            "We now test the {s} frontend with {v} instead of {o}.",
            "Unit tests in the {s} package run with {v}.",
        ],
    ),
    Attribute(
        "deploy",
        SERVICES,
        DEPLOYERS,
        [
            "We deploy the {s} service with {v}.",
            "Deploys of {s} go out through {v}; ask in the release channel before a Friday deploy.",
            "{S} is deployed by {v} from the release branch.",
        ],
        [
            "We no longer deploy {s} with {o}; it goes out through {v} now.",
            "The {s} service was moved from {o} to {v} for deploys.",
            "{S} deploys switched to {v} this sprint.",
            "We deploy the {s} service with {v}.",
        ],
    ),
    Attribute(
        "python",
        REPOS,
        PYTHONS,
        [
            "The {s} repo pins Python {v} in .python-version.",
            "CI for the {s} repository runs on Python {v} only.",
            "{S} targets Python {v}; do not use syntax from newer releases.",
        ],
        [
            "Raised the Python pin of the {s} repo from {o} to {v}.",
            "The {s} repository now requires Python {v} (was {o}).",
            "{S} moved to Python {v}; the {o} images are deleted.",
            "CI for the {s} repository runs on Python {v} only.",
        ],
    ),
    Attribute(
        "node",
        APPS,
        NODES,
        [
            "The {s} app builds with Node {v}.",
            "{S} needs Node.js {v}; nvm use picks it from .nvmrc.",
        ],
        [
            "Bumped the {s} app from Node {o} to Node {v}.",
            "{S} now needs Node.js {v}, no longer {o}.",
            "The {s} app builds with Node {v}.",
        ],
    ),
    Attribute(
        "branch",
        REPOS,
        BRANCHES,
        [
            "The default branch of the {s} repo is {v}.",
            "Open pull requests for {s} against {v}.",
            "In the {s} repository, {v} is the branch CI deploys from.",
        ],
        [
            "The {s} repo's default branch was renamed from {o} to {v}.",
            "Pull requests for {s} now target {v}; {o} no longer exists.",
            "The default branch of the {s} repo is {v}.",
        ],
    ),
    Attribute(
        "database",
        SERVICES,
        DATABASES,
        [
            "The {s} service stores its data in {v}.",
            "{S} keeps everything in a {v} database of its own.",
            "The {s} backend talks to {v} through the shared data layer.",
        ],
        [
            "The {s} service was migrated from {o} to {v} last month.",
            "{S} now stores its data in {v} instead of {o}.",
            "The {s} service stores its data in {v}.",
        ],
    ),
    Attribute(
        "package_manager",
        APPS,
        PKG,
        [
            "The {s} app installs dependencies with {v}.",
            "Use {v} in the {s} project; its lockfile is checked in.",
        ],
        [
            "The {s} app switched from {o} to {v} for dependencies.",
            "Use {v} in the {s} project now; the {o} lockfile was deleted.",
            "The {s} app installs dependencies with {v}.",
        ],
    ),
    Attribute(
        "owner",
        SERVICES,
        PEOPLE,
        [
            "{v} owns the {s} service and reviews every change to it.",
            "Questions about the {s} module go to {v}, who maintains it.",
        ],
        [
            "{v} took over the {s} service from {o}.",
            "The {s} module is maintained by {v} now, not {o}.",
            "{v} owns the {s} service and reviews every change to it.",
        ],
    ),
]

DUPLICATE_FORMS = {
    # The same fact said again in other words: the forms of one attribute, plus these.
    "port": [
        "{S} is reachable on {v}.",
        "Remember: the {s} service port is {v}.",
        "For local work the {s} service answers on port {v}.",
    ],
    "test_runner": ["{v} is what runs the {s} package's unit tests.", "Run the {s} unit tests through {v}."],
    "deploy": ["Releases of the {s} service are shipped with {v}.", "{v} handles the {s} deploys."],
    "python": ["Use Python {v} for the {s} repo.", "The {s} codebase is on Python {v}."],
    "node": ["Use Node {v} when building {s}.", "{S} is built on Node.js {v}."],
    "branch": ["{v} is the default branch in the {s} repo.", "Base your {s} branches on {v}."],
    "database": ["{S} persists to {v}.", "The {s} data lives in {v}."],
    "package_manager": ["Install {s} dependencies with {v}.", "{S} uses {v} as its package manager."],
    "owner": ["The {s} service belongs to {v}.", "{v} is the maintainer of the {s} service."],
}


# Written after the detector was tuned on the forms above, and measured without changing it (`--style heldout`):
# other words for the same attributes, other texture.
HELDOUT_ATTRIBUTES = [
    Attribute(
        "port",
        SERVICES,
        ATTRIBUTES[0].values,
        [
            "Locally, {s} is exposed on {v}.",
            "If you need to hit the {s} service by hand, it answers at 127.0.0.1:{v}.",
            "The {s} container publishes port {v}.",
        ],
        [
            "Since the network rework the {s} container publishes port {v} rather than {o}.",
            "{S}'s port changed to {v}; anything still calling {o} will fail.",
            "If you need to hit the {s} service by hand, it answers at 127.0.0.1:{v}.",
        ],
    ),
    Attribute(
        "test_runner",
        APPS,
        RUNNERS,
        [
            "Specs for the {s} app are executed by {v}.",
            "In {s} we write the unit specs for {v}.",
        ],
        [
            "The {s} app's specs moved over to {v}; please stop adding {o} specs.",
            "We replaced {o} with {v} in the {s} app.",
            "Specs for the {s} app are executed by {v}.",
        ],
    ),
    Attribute(
        "deploy",
        SERVICES,
        DEPLOYERS,
        [
            "Shipping a new {s} build is done through {v}.",
            "{S} goes to production via {v}.",
        ],
        [
            "{S} goes to production via {v} these days, not {o}.",
            "Shipping a new {s} build is done through {v}.",
        ],
    ),
    Attribute(
        "python",
        REPOS,
        PYTHONS,
        [
            "The interpreter for the {s} repo is Python {v}.",
            "{S} runs its tooling under Python {v}.",
        ],
        [
            "We upgraded the {s} repo's interpreter to Python {v}; {o} is no longer supported there.",
            "The interpreter for the {s} repo is Python {v}.",
        ],
    ),
    Attribute(
        "database",
        SERVICES,
        DATABASES,
        [
            "The {s} service's records are kept in {v}.",
            "Persistence for {s}: {v}.",
        ],
        [
            "The {s} service's records were moved out of {o} into {v}.",
            "Persistence for {s}: {v}.",
        ],
    ),
    Attribute(
        "owner",
        SERVICES,
        PEOPLE,
        [
            "Ping {v} before touching the {s} service; it's theirs.",
            "The point of contact for {s} is {v}.",
        ],
        [
            "The point of contact for {s} is now {v}; {o} moved to another team.",
            "Ping {v} before touching the {s} service; it's theirs.",
        ],
    ),
]
HELDOUT_DUPLICATES = {
    "port": ["{S} can be reached on port {v} on a dev machine.", "Port {v} belongs to the {s} service."],
    "test_runner": ["The {s} app relies on {v} for its unit specs."],
    "deploy": ["Production releases of {s} go through {v}."],
    "python": ["Use a Python {v} interpreter when working in {s}."],
    "database": ["All of {s}'s state lives in {v}."],
    "owner": ["{v} is responsible for the {s} service."],
}


def _file(rng: random.Random, area: str) -> str:
    return f"{rng.choice(DIRS)}/{area}/{rng.choice(STEMS)}.{rng.choice(EXTS)}"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _say(form: str, s: str, v: str, o: str = "") -> str:
    return form.format(s=s, S=_cap(s), v=v, o=o)


def _texture(rng: random.Random, serial: int) -> tuple[str, str, tuple[str, str] | None]:
    """Statements whose subject is unique to them (a file, a pull request, an incident): parallel in shape."""
    area, area2 = rng.choice(SERVICES), rng.choice(SERVICES)
    f, lib, env, cmd = _file(rng, area), rng.choice(LIBS), rng.choice(ENVS), rng.choice(COMMANDS)
    fn, err, pr = rng.choice(FUNCS), rng.choice(ERRORS), 1000 + serial * 7 + rng.randint(0, 6)
    port = rng.randint(3000, 9999)
    forms = [
        (
            "procedural",
            f"To test the {area} module at {f}, run {cmd} from the repo root; it needs {env} set and "
            f"{lib} running.",
        ),
        (
            "procedural",
            f"Before editing {f}, start {lib} with docker compose; {fn} talks to it on port {port}.",
        ),
        ("episodic", f"Asked to add type hints to {fn} in {f} during the {area} review (PR #{pr})."),
        (
            "episodic",
            f"Fixed {err} in {f}: {fn}() did not close the {lib} connection after a retry (PR #{pr}).",
        ),
        ("episodic", f"PR #{pr} for {area}: {cmd} failed with {err} until {env} was exported in the shell."),
        (
            "semantic",
            f"{fn} in {f} reads {env} at import time, so tests for {area} must set it before importing.",
        ),
        (
            "episodic",
            f"Investigated slow {area} requests from {area2}: {fn}() in {f} made one {lib} call per row "
            f"(PR #{pr} batches them).",
        ),
        (
            "semantic",
            f"The {area} handlers in {f} wrap {lib} errors into {err} so callers see one exception type.",
        ),
    ]
    kind, text = rng.choice(forms)
    if rng.random() < 0.4:
        text += " " + rng.choice(FILLER)
    return kind, text, None


def _texture_heldout(rng: random.Random, serial: int) -> tuple[str, str, tuple[str, str] | None]:
    area = rng.choice(SERVICES)
    f, lib, env, cmd = _file(rng, area), rng.choice(LIBS), rng.choice(ENVS), rng.choice(COMMANDS)
    fn, err, pr = rng.choice(FUNCS), rng.choice(ERRORS), 1000 + serial * 7 + rng.randint(0, 6)
    forms = [
        ("procedural", f"Running the {area} suite: `{cmd}`, with {env} exported and a local {lib}."),
        ("episodic", f"Code review on #{pr} ({area}): reviewer wants {fn} split out of {f}."),
        (
            "episodic",
            f"{err} in {area} traced to {fn} in {f}; {lib} client was reused across threads (#{pr}).",
        ),
        ("semantic", f"{f} is where {area} reads {env}; missing it makes {fn} raise {err}."),
        ("procedural", f"When {area} tests hang, stop {lib}, delete its volume, then rerun `{cmd}`."),
    ]
    i = rng.randrange(len(forms))
    kind, text = forms[i]
    if rng.random() < 0.4:
        text += " " + rng.choice(FILLER)
    # Forms 0 and 4 name no file or review: one each per area, or they would state one thing twice.
    return kind, text, (str(i), area) if i in (0, 4) else None


def generate(
    n: int = 3000,
    seed: int = 5,
    contradictions: int = 60,
    duplicate_groups: int = 50,
    lookalikes: int = 80,
    style: str = "tuned",
) -> list[dict[str, Any]]:
    """``n`` memories in time order, each with its label (`label` key, removed before import). ``style``:
    "tuned" (the forms the detector was developed on) or "heldout" (forms written afterwards)."""
    rng = random.Random(seed)
    attributes = HELDOUT_ATTRIBUTES if style == "heldout" else ATTRIBUTES
    dup_forms = HELDOUT_DUPLICATES if style == "heldout" else DUPLICATE_FORMS
    now = datetime(2026, 11, 1, tzinfo=UTC)
    used: set[tuple[str, str]] = set()  # (attribute, subject): each subject's attribute has one planted story
    rows: list[dict[str, Any]] = []

    def fresh(attr: Attribute) -> str | None:
        free = [s for s in attr.subjects if (attr.name, s) not in used]
        if not free:
            return None
        s = rng.choice(free)
        used.add((attr.name, s))
        return s

    def add(text: str, kind: str, subject: str, value: str, role: str, days_ago: float, group: str) -> None:
        rows.append(
            {
                "content": text,
                "memory_type": kind,
                "scope": "project",
                "importance": round(rng.uniform(0.4, 0.9), 2),
                "created_at": (now - timedelta(days=days_ago)).isoformat(),
                "label": {"subject": subject, "value": value, "role": role, "group": group},
            }
        )

    # True contradictions: an old statement, then weeks later the new value.
    for i in range(contradictions):
        attr = attributes[i % len(attributes)]
        s = fresh(attr)
        if s is None:
            continue
        old, new = rng.sample(attr.values, 2)
        t_old = rng.uniform(40, 200)
        add(
            _say(rng.choice(attr.plain), s, old),
            "semantic",
            f"{attr.name}:{s}",
            old,
            "contradiction-old",
            t_old,
            f"c{i}",
        )
        add(
            _say(rng.choice(attr.changed), s, new, old),
            "semantic",
            f"{attr.name}:{s}",
            new,
            "contradiction-new",
            t_old - rng.uniform(5, 35),
            f"c{i}",
        )
    # Duplicate groups: one fact, 2-4 wordings, days apart.
    for i in range(duplicate_groups):
        attr = attributes[(i * 5 + 3) % len(attributes)]
        s = fresh(attr)
        if s is None:
            continue
        v = rng.choice(attr.values)
        forms = rng.sample(
            attr.plain + dup_forms[attr.name],
            min(rng.choice([2, 2, 3, 3, 4]), len(attr.plain) + len(dup_forms[attr.name])),
        )
        t = rng.uniform(10, 200)
        for form in forms:
            add(_say(form, s, v), "semantic", f"{attr.name}:{s}", v, "duplicate", t, f"d{i}")
            t -= rng.uniform(0.5, 20)
    # Look-alikes: the same form about two subjects (usually with two values).
    for i in range(lookalikes):
        attr = attributes[(i + 4) % len(attributes)]
        s1, s2 = fresh(attr), fresh(attr)
        if s1 is None or s2 is None:
            continue
        form = rng.choice(attr.plain)
        v1, v2 = rng.choice(attr.values), rng.choice(attr.values)
        add(
            _say(form, s1, v1), "semantic", f"{attr.name}:{s1}", v1, "lookalike", rng.uniform(1, 200), f"l{i}"
        )
        add(
            _say(form, s2, v2), "semantic", f"{attr.name}:{s2}", v2, "lookalike", rng.uniform(1, 200), f"l{i}"
        )
    # Parallel attribute statements about the remaining subjects: the look-alikes of a real store.
    for attr in attributes:
        for s in attr.subjects:
            if (attr.name, s) in used or rng.random() < 0.35:
                continue
            used.add((attr.name, s))
            v = rng.choice(attr.values)
            add(
                _say(rng.choice(attr.plain), s, v),
                "semantic",
                f"{attr.name}:{s}",
                v,
                "texture",
                rng.uniform(1, 200),
                f"a:{attr.name}:{s}",
            )
    seen = {r["content"] for r in rows}
    shapes: set[tuple[str, str]] = set()
    serial = 0
    while len(rows) < n:
        serial += 1
        kind, text, shape = (_texture_heldout if style == "heldout" else _texture)(rng, serial)
        # Texture says each thing of each subject once: a second "when the X tests hang, stop Y" with another Y
        # would be a real contradiction (or duplicate) left unlabelled.
        if text in seen or (shape and shape in shapes):
            continue
        seen.add(text)
        if shape:
            shapes.add(shape)
        add(text, kind, f"t{serial}", "", "texture", rng.uniform(0.5, 200), f"t{serial}")
    rows.sort(key=lambda r: r["created_at"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--style", choices=("tuned", "heldout"), default="tuned")
    ap.add_argument("--labels", action="store_true", help="keep each line's label (not importable)")
    a = ap.parse_args()
    for r in generate(a.n, a.seed, style=a.style):
        if not a.labels:
            r = {k: v for k, v in r.items() if k != "label"}
        sys.stdout.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
