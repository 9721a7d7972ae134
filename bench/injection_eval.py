"""What the agent receives: coverage of a new session's needs by the SessionStart injection and the prompt recall.

A seeded generator writes realistic multi-session coding-project histories: decisions (with the alternative
turned down), failures and their fixes, the user's standing preferences, facts that changed (the older value
stays stored), per-edit and per-command session evidence, passing notes, and one summary per session. They are
stored the way the hooks and the agent store them (EngramService.store_many, the tags session_learning.py
writes, each memory at its session's time). Then a later session of each project opens with labelled needs:
what the agent must know to do its work. Each need has an answer key (a value only the right memory carries:
a library, a command, a host) and a prompt phrased in words the history does not use (a separate template
set, never tuned against the ranker).

Measured in one run, each within the same token budget (scoring.estimate_tokens, as the hooks count):

- session start, no query: Engram's injection (session_context.build, the default 2,000-token budget)
  against the most recent memories that fit the same budget;
- prompt recall, one prompt per need: Engram's recall formatted as the UserPromptSubmit hook formats it
  (400 tokens) against BM25 top-k (bm25s) of the same prompt within the same 400 tokens, and the most recent
  memories within 400 tokens;
- both together: the injection plus every prompt's recall, against the two baselines given the same total.

A need is covered when its answer key appears in the text the agent receives. Coverage per 1,000 tokens is
covered needs over the tokens the text costs.

    python bench/injection_eval.py                    # prints JSON
    python bench/injection_eval.py --out bench/results/injection_eval.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engram_core.integrations.claude_code.hook_events import (  # noqa: E402
    PROMPT_LINE_CHARS,
    PROMPT_RECALL_HEADER,
    PROMPT_RECALL_HITS,
)
from engram_core.integrations.claude_code.session_learning import (  # noqa: E402
    COMMAND_TAG,
    FILE_TAG,
    FIX_TAG,
    INSTRUCTION_TAG,
    SUMMARY_TAG,
)
from engram_core.memory.scoring import estimate_tokens  # noqa: E402
from engram_core.models import MemoryIn, MemoryType, Scope  # noqa: E402

INJECTION_BUDGET = 2000
PROMPT_BUDGET = 400
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

# --------------------------------------------------------------------------- the generator

PROJECTS = [
    ("billing-api", "invoices", "python"),
    ("fleet-tracker", "vehicle positions", "go"),
    ("recipe-site", "recipes", "typescript"),
    ("lab-scheduler", "instrument bookings", "python"),
    ("chat-relay", "messages", "rust"),
]

# (purpose, chosen, rejected, reason): a decision's memory states it one way, the need asks it another.
DECISIONS = [
    ("background jobs", "dramatiq", "celery", "celery's prefetch kept losing tasks on restart"),
    ("HTTP client", "httpx", "requests", "we need async calls from the workers"),
    ("schema migrations", "alembic", "yoyo-migrations", "autogenerate catches drift in review"),
    ("feature flags", "unleash", "launchdarkly", "self-hosting keeps customer data in the EU"),
    ("frontend state", "zustand", "redux-toolkit", "the stores stay small and need no boilerplate"),
    ("logging", "structlog", "loguru", "JSON lines go straight into the log pipeline"),
    ("API docs", "redocly", "swagger-ui", "the docs build fails on broken references"),
    ("caching", "valkey", "memcached", "we need sorted sets for the rate limiter"),
    ("object storage", "minio", "seaweedfs", "its S3 API matches production exactly"),
    ("search", "meilisearch", "elasticsearch", "one binary, and typo tolerance out of the box"),
]
DECISION_MEMORY = [
    "Decision: {chosen} for {purpose}, not {rejected} — {reason}.",
    "We settled on {chosen} for {purpose} after trying {rejected}; {reason}.",
    "Chose {chosen} over {rejected} for {purpose} because {reason}.",
]
# Held-out phrasing: the question a new session starts from, never the memory's words.
DECISION_NEED = [
    "Which tool did we pick for {purpose_q}?",
    "I'm adding more {purpose_q} code; what do we use for that again?",
    "Remind me what we went with for {purpose_q}.",
]
PURPOSE_Q = {
    "background jobs": "the async task queue",
    "HTTP client": "making outbound web requests",
    "schema migrations": "changing the database tables",
    "feature flags": "toggling features per customer",
    "frontend state": "client-side state management",
    "logging": "emitting logs",
    "API docs": "publishing the API reference",
    "caching": "the cache layer",
    "object storage": "storing uploaded files",
    "search": "full-text lookup",
}

# (symptom in the memory, the way a later session describes it, the fix: the answer key)
FIXES = [
    (
        "pytest hangs forever at collection in tests/integration",
        "the integration suite never starts, it just sits there",
        "--import-mode=importlib",
    ),
    (
        "ImportError: libpq.so.5 cannot open shared object file in the docker image",
        "the container blows up loading the postgres client library",
        "apt-get install libpq5",
    ),
    (
        "CI fails with 'database is locked' on the sqlite test run",
        "the pipeline's test job dies on a locked sqlite file",
        "PRAGMA journal_mode=WAL",
    ),
    (
        "npm run build fails: heap out of memory in the bundler",
        "the frontend bundle step runs out of RAM",
        "NODE_OPTIONS=--max-old-space-size=4096",
    ),
    (
        "go test -race reports a data race in the position cache",
        "the race detector flags the cache of coordinates",
        "sync.RWMutex around positionCache",
    ),
    (
        "migrations fail with 'relation already exists' after a rebase",
        "after rebasing, applying the table changes errors on an existing relation",
        "alembic merge heads",
    ),
    (
        "TLS handshake timeout calling the payments sandbox from CI",
        "CI cannot reach the payment provider's test endpoint securely",
        "HTTPS_PROXY=http://egress.ci:3128",
    ),
    (
        "cargo build fails linking openssl-sys on the ARM runner",
        "the ARM build agent can't link the crypto crate",
        'features = ["vendored"]',
    ),
]
FIX_MEMORY = [
    "Fix: {symptom}. Resolved with {fix}.",
    "{symptom} — fixed by {fix}.",
    "When {symptom}, the fix is {fix}.",
]
FIX_NEED = [
    "Seeing this again: {described}. How did we get past it before?",
    "{described} — what was the workaround last time?",
]

# (preference memory, held-out need, answer key): user scope, the way an instruction is captured.
PREFERENCES = [
    (
        "Always write commit subjects in imperative mood with a scope prefix, like 'api: add retries'.",
        "How should I word the commit message for this change?",
        "imperative mood with a scope prefix",
    ),
    (
        "Never run the full test suite locally; run only the tests next to the change with pytest -k.",
        "Should I kick off every test before pushing?",
        "pytest -k",
    ),
    (
        "Use ruff format, never black, on every Python file you touch.",
        "Which formatter does the user want on the Python sources?",
        "ruff format",
    ),
    (
        "Keep pull requests under 400 changed lines; split bigger work into stacked PRs.",
        "This change is getting big — how large may a single PR be?",
        "400 changed lines",
    ),
]

# (subject, old value, new value, how the later session asks): the answer is the new value.
CHANGED = [
    (
        "the staging database host",
        "pg-staging-01.internal",
        "pg-stage-eu-2.internal",
        "Where does the pre-production postgres live these days?",
    ),
    ("the default branch", "master", "trunk-main", "Which branch should I open the PR against?"),
    (
        "the local API port",
        "port 8080",
        "port 8743",
        "What port do I hit to reach the service on my machine?",
    ),
    (
        "the deploy command",
        "make deploy-old",
        "just ship --env prod",
        "How do we push a release out to production now?",
    ),
    ("the Python version pin", "python 3.10", "python 3.12.4", "What interpreter version is the project on?"),
]
CHANGED_OLD = ["{subject} is {old}.", "Note: {subject} = {old}."]
CHANGED_NEW = [
    "{subject} moved: it is now {new} (no longer {old}).",
    "Update: {subject} changed to {new}.",
]

FILES = [
    "models.py",
    "routes.py",
    "worker.py",
    "cache.go",
    "store.go",
    "App.tsx",
    "api.ts",
    "main.rs",
    "config.toml",
    "Dockerfile",
    "schema.sql",
    "README.md",
    "handlers.py",
    "client.ts",
]
NOTES = [
    "Looked into the slow {file} path; nothing conclusive yet.",
    "Renamed a few helpers in {file} for readability.",
    "Paired on {file}: added type hints and a docstring.",
    "Read through {file} to understand the request flow.",
    "Tidied imports in {file} and removed a dead branch.",
    "Discussed splitting {file} into two modules; not decided.",
]


@dataclass
class Need:
    kind: str
    prompt: str
    answer: str


@dataclass
class Project:
    name: str
    memories: list[tuple[int, MemoryIn]] = field(default_factory=list)  # (session, memory)
    needs: list[Need] = field(default_factory=list)


def generate(seed: int, sessions: int, noise: int) -> list[Project]:
    """One history per project: `sessions` past sessions, `noise` passing notes and evidence each."""
    rng = random.Random(seed)
    decisions = DECISIONS[:]
    fixes = FIXES[:]
    changed = CHANGED[:]
    rng.shuffle(decisions)
    rng.shuffle(fixes)
    rng.shuffle(changed)
    projects = []
    for pi, (name, thing, lang) in enumerate(PROJECTS):
        p = Project(name)
        mine_d = [decisions[(2 * pi + j) % len(decisions)] for j in range(2)]
        mine_f = [fixes[(2 * pi + j) % len(fixes)] for j in range(2)]
        mine_c = changed[pi % len(changed)]
        pref = PREFERENCES[pi % len(PREFERENCES)]
        # Where each labelled fact falls in the history: decisions and fixes early or mid, the changed fact's old
        # value early and its new value late, the preference anywhere.
        plan: dict[int, list[MemoryIn]] = {s: [] for s in range(sessions)}
        for j, (purpose, chosen, rejected, reason) in enumerate(mine_d):
            text = rng.choice(DECISION_MEMORY).format(
                purpose=purpose, chosen=chosen, rejected=rejected, reason=reason
            )
            plan[
                rng.randrange(0, sessions // 2) if j == 0 else rng.randrange(sessions // 2, sessions)
            ].append(
                MemoryIn(content=text, memory_type=MemoryType.semantic, tags=["decision"], importance=0.7)
            )
            p.needs.append(
                Need("decision", rng.choice(DECISION_NEED).format(purpose_q=PURPOSE_Q[purpose]), chosen)
            )
        for symptom, described, fix in mine_f:
            text = rng.choice(FIX_MEMORY).format(symptom=symptom, fix=fix)
            plan[rng.randrange(0, sessions)].append(
                MemoryIn(
                    content=text,
                    memory_type=MemoryType.procedural,
                    tags=[FIX_TAG, "procedure"],
                    importance=0.6,
                )
            )
            p.needs.append(Need("fix", rng.choice(FIX_NEED).format(described=described), fix))
        subject, old, new, asked = mine_c
        plan[rng.randrange(0, 2)].append(
            MemoryIn(
                content=rng.choice(CHANGED_OLD).format(subject=subject.capitalize(), old=old), importance=0.5
            )
        )
        plan[rng.randrange(sessions - 3, sessions)].append(
            MemoryIn(
                content=rng.choice(CHANGED_NEW).format(subject=subject.capitalize(), old=old, new=new),
                importance=0.5,
            )
        )
        p.needs.append(Need("changed fact", asked, new))
        plan[rng.randrange(0, sessions)].append(
            MemoryIn(
                content=pref[0],
                scope=Scope.user,
                tags=[INSTRUCTION_TAG, "preference"],
                importance=0.8,
            )
        )
        p.needs.append(Need("preference", pref[1], pref[2]))
        for s in range(sessions):
            files = rng.sample(FILES, 4)
            todo = plan[s]
            for _ in range(noise):
                f = rng.choice(files)
                kind = rng.random()
                if kind < 0.4:
                    todo.append(
                        MemoryIn(content=rng.choice(NOTES).format(file=f), memory_type=MemoryType.episodic)
                    )
                elif kind < 0.7:
                    todo.append(
                        MemoryIn(
                            content=f"Edited {name}/{f}", memory_type=MemoryType.episodic, tags=[FILE_TAG]
                        )
                    )
                else:
                    cmd = rng.choice(
                        ["make test", "make lint", "git status", f"{lang} build", "docker compose up"]
                    )
                    todo.append(
                        MemoryIn(
                            content=f"Ran `{cmd}` (ok)", memory_type=MemoryType.episodic, tags=[COMMAND_TAG]
                        )
                    )
            rng.shuffle(todo)
            todo.append(
                MemoryIn(
                    content=f"Session {s + 1} on {name} ({thing}): worked on {', '.join(files[:3])}.",
                    memory_type=MemoryType.episodic,
                    tags=[SUMMARY_TAG, "agent-written"],
                )
            )
            p.memories += [(s, m) for m in todo]
        projects.append(p)
    return projects


# --------------------------------------------------------------------------- measuring


def covered(text: str, needs: list[Need]) -> list[bool]:
    low = text.lower()
    return [n.answer.lower() in low for n in needs]


def within(lines: list[str], budget: int, header: str = "") -> str:
    """The lines, in order, that fit the budget (the way the hooks fill theirs: skip what does not fit)."""
    used, kept = estimate_tokens(header) if header else 0, []
    for line in lines:
        cost = estimate_tokens(line + "\n")
        if used + cost > budget:
            continue
        kept.append(line)
        used += cost
    return header + "\n".join(kept)


def score(texts: list[str], needs: list[Need]) -> dict[str, Any]:
    """Coverage of `needs` by the union of `texts` (what the agent holds in its context at once)."""
    joined = "\n".join(texts)
    hits = covered(joined, needs)
    tokens = sum(estimate_tokens(t) for t in texts if t)
    return {"covered": sum(hits), "needs": len(needs), "tokens": tokens, "hits": hits}


def summarise(rows: list[dict[str, Any]], needs: list[list[Need]]) -> dict[str, Any]:
    c = sum(r["covered"] for r in rows)
    n = sum(r["needs"] for r in rows)
    t = sum(r["tokens"] for r in rows)
    by_kind: dict[str, list[int]] = {}
    for r, ns in zip(rows, needs, strict=True):
        for hit, need in zip(r["hits"], ns, strict=True):
            by_kind.setdefault(need.kind, [0, 0])
            by_kind[need.kind][0] += int(hit)
            by_kind[need.kind][1] += 1
    return {
        "coverage": round(c / n, 4),
        "covered": c,
        "needs": n,
        "tokens": t,
        "coverage_per_1k_tokens": round(c / (t / 1000), 3) if t else 0.0,
        "by_kind": {k: f"{a}/{b}" for k, (a, b) in sorted(by_kind.items())},
    }


def run(seed: int, sessions: int, noise: int) -> dict[str, Any]:
    import bm25s

    from engram_core.clock import FrozenClock
    from engram_core.ids import SequentialIds
    from engram_core.service import EngramService

    projects = generate(seed, sessions, noise)
    tmp = Path(tempfile.mkdtemp(prefix="engram-injection-eval-"))
    os.chmod(tmp, 0o700)
    end = START + timedelta(days=2 * sessions + 1)
    results: dict[str, list[dict[str, Any]]] = {}
    needs_of: dict[str, list[list[Need]]] = {}

    def add(method: str, row: dict[str, Any], needs: list[Need]) -> None:
        results.setdefault(method, []).append(row)
        needs_of.setdefault(method, []).append(needs)

    try:
        for p in projects:
            # One data root per project: the user scope (preferences) is the user's own, not shared across them.
            home, proj = tmp / p.name / "home", tmp / p.name / p.name
            proj.mkdir(parents=True)
            os.chmod(tmp / p.name, 0o700)
            # Each session is stored at its own time, as the hooks would have stored it; the new session opens at
            # `end`, so what was written weeks ago has decayed as it would have.
            clock = FrozenClock(START)
            old_home = os.environ.get("ENGRAM_HOME")
            os.environ["ENGRAM_HOME"] = str(home)
            try:
                svc = EngramService(home, clock=clock, ids=SequentialIds(START))
            finally:
                if old_home is None:
                    os.environ.pop("ENGRAM_HOME", None)
                else:
                    os.environ["ENGRAM_HOME"] = old_home
            try:
                stored: list[tuple[datetime, str, str]] = []  # (when, line as listed, content)
                for s in range(sessions):
                    when = START + timedelta(days=2 * s)
                    batch = [m for ss, m in p.memories if ss == s]
                    clock.advance(
                        seconds=(when + timedelta(minutes=len(batch)) - clock.now()).total_seconds()
                    )
                    for i, m in enumerate(batch):
                        m.created_at = when + timedelta(minutes=i)
                        m.metadata = {"episode_id": f"{p.name}-session-{s + 1}"}
                    svc.store_many(batch, project=str(proj))
                    stored += [
                        (m.created_at, f"- [{m.memory_type.value}] {m.content}", m.content) for m in batch
                    ]
                clock.advance(seconds=(end - clock.now()).total_seconds())
                needs = p.needs
                prompts = [n.prompt for n in needs]

                # Session start: no query.
                inj = svc.injection_context(project=str(proj), budget=INJECTION_BUDGET).text
                newest = [line for _, line, _ in sorted(stored, key=lambda t: t[0], reverse=True)]
                recent = within(newest, INJECTION_BUDGET)
                add("session start: engram injection", score([inj], needs), needs)
                add("session start: most recent memories", score([recent], needs), needs)

                # Prompt recall: one prompt per need, scored on its own need.
                docs = [c for _, _, c in stored]
                lines = [line for _, line, _ in stored]
                retriever = bm25s.BM25()
                retriever.index(
                    bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False
                )
                q_tokens = bm25s.tokenize(prompts, stopwords="en", show_progress=False)
                res, scores = retriever.retrieve(
                    q_tokens, k=min(50, len(docs)), show_progress=False, n_threads=1
                )
                recent_prompt = within(newest, PROMPT_BUDGET, PROMPT_RECALL_HEADER)
                engram_prompt_texts, bm25_prompt_texts = [], []
                for qi, need in enumerate(needs):
                    rec = svc.recall(
                        need.prompt, project=str(proj), limit=PROMPT_RECALL_HITS, strengthen=False, log=False
                    )
                    e_lines = [
                        f"- [{h.memory.scope.value}/{h.memory.memory_type.value}] "
                        f"{h.memory.content.strip()[:PROMPT_LINE_CHARS]} (id {h.memory.id})"
                        for h in rec.hits
                    ]
                    e_text = within(e_lines, PROMPT_BUDGET, PROMPT_RECALL_HEADER)
                    b_lines = [lines[int(i)] for i, sc in zip(res[qi], scores[qi], strict=True) if sc > 0]
                    b_text = within(b_lines, PROMPT_BUDGET, PROMPT_RECALL_HEADER)
                    engram_prompt_texts.append(e_text)
                    bm25_prompt_texts.append(b_text)
                    add("prompt: engram recall", score([e_text], [need]), [need])
                    add("prompt: bm25 top-k", score([b_text], [need]), [need])
                    add("prompt: most recent memories", score([recent_prompt], [need]), [need])

                # Both: what the agent holds after the session start and its prompts, at the same total budget.
                total = INJECTION_BUDGET + PROMPT_BUDGET * len(needs)
                add(
                    "session: engram injection + prompt recalls",
                    score([inj, *engram_prompt_texts], needs),
                    needs,
                )
                add(
                    "session: most recent memories, same tokens", score([within(newest, total)], needs), needs
                )
                bm_all = within(
                    [line for t in bm25_prompt_texts for line in t.splitlines()[1:]], total - INJECTION_BUDGET
                )
                add(
                    "session: most recent + bm25 top-k, same tokens",
                    score([recent, bm_all], needs),
                    needs,
                )
            finally:
                svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "seed": seed,
        "projects": len(projects),
        "sessions_per_project": sessions,
        "memories": sum(len(p.memories) for p in projects),
        "needs": sum(len(p.needs) for p in projects),
        "budgets": {"injection": INJECTION_BUDGET, "prompt": PROMPT_BUDGET},
        "methods": {m: summarise(rows, needs_of[m]) for m, rows in results.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sessions", type=int, default=30, help="past sessions per project, two days apart")
    ap.add_argument("--noise", type=int, default=30, help="passing notes and evidence per session")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report = run(args.seed, args.sessions, args.noise)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
