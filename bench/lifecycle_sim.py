"""Weeks of use on a frozen clock: what survives, by scope and type.

One project, a few user preferences and an imported history; every working day some sessions: SessionStart
injection (counted as a weaker use), memories captured in the session, recalls with feedback, session end
(promotion), the session-end pass (the schedule: light / full every 5 / reflection and evolution every 20);
a maintenance sweep every few simulated hours. Everything goes through EngramService on real embedded
SurrealDB stores with the real embedding model; only the clock is frozen and moved.

    .venv/bin/python bench/lifecycle_sim.py [--weeks 8] [--sessions-per-day 2] [--seed 7]

Prints JSON (also written to bench/results/lifecycle_sim.json): memories by scope × type × status at the end,
per-week snapshots, what the schedule ran, the evolution history, and checks (no user memory forgotten, the
preferences injected every session still live, the import not mass-forgotten).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engram_core.clock import FrozenClock
from engram_core.models import MemoryIn
from engram_core.service import EngramService

TOPICS = [
    "auth tokens",
    "postgres migrations",
    "redis cache",
    "CI pipeline",
    "docker compose",
    "the importer",
    "pytest fixtures",
    "API pagination",
    "logging config",
    "release process",
]
PREFERENCES = [
    "Prefers small pull requests with one concern each",
    "Uses ruff for linting and formatting",
    "Wants type hints on every public function",
    "Prefers pytest over unittest",
    "Writes commit messages in the imperative mood",
]
SWEEP_EVERY_H = 6


def _session(
    svc: EngramService,
    clock: FrozenClock,
    proj: str,
    rng: random.Random,
    n: int,
    preference_ids: set[str],
    stats: Counter,
) -> None:
    sess = svc.start_session(project=proj, claude_session_id=f"sim-{n}").session_key
    preview = svc.injection_context(project=proj, session=sess)
    svc.note_injected(
        [f"{i.scope.value}:{i.id}" for i in preview.items], project=proj
    )  # what the daemon does
    stats["injected_preferences"] += sum(i.id in preference_ids for i in preview.items)
    topic = rng.choice(TOPICS)
    for j in range(4):
        svc.store(
            MemoryIn(
                content=f"Session {n}: ran step {j} while working on {topic} ({rng.random():.6f})",
                memory_type="episodic",
                scope="session",
                importance=round(rng.uniform(0.2, 0.6), 2),
            ),
            session=sess,
            project=proj,
        )
    svc.store(
        MemoryIn(
            content=f"scratch: next try for {topic} in session {n}",
            memory_type="working",
            scope="session",
            importance=0.5,
        ),
        session=sess,
        project=proj,
    )
    if rng.random() < 0.5:  # something lasting learnt now and then
        kind = rng.choice(["semantic", "procedural"])
        svc.store(
            MemoryIn(
                content=f"For {topic}: rule {n} learnt in session {n} ({kind})",
                memory_type=kind,
                scope="session",
                importance=round(rng.uniform(0.6, 0.9), 2),
            ),
            session=sess,
            project=proj,
        )
    for _ in range(3):
        q = rng.choice([topic, rng.choice(TOPICS)])
        res = svc.recall(f"how do we handle {q}", project=proj, session=sess, limit=5)
        stats["recalls"] += 1
        if res.hits and rng.random() < 0.6:
            svc.mark_retrieval_useful(res.query, rng.random() < 0.6, project=proj, log_id=res.log_id)
    clock.advance(minutes=40)
    svc.end_session(sess)
    rep = svc.reflect_and_consolidate(project=proj)  # type: ignore[attr-defined]
    for level in rep.levels:
        stats[f"level_{level}"] += 1
    svc.flush()


def census(svc: EngramService, proj: str) -> dict[str, dict[str, dict[str, int]]]:
    """scope → type → status → count."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for scope in ("project", "user"):
        page = svc.export_memories(scope=scope, project=proj)
        by: dict[str, dict[str, int]] = {}
        for m in page:
            t = by.setdefault(m.memory_type.value, {})
            t[m.status.value] = t.get(m.status.value, 0) + 1
        out[scope] = by
    return out


def simulate(
    svc: EngramService,
    clock: FrozenClock,
    proj: str,
    *,
    weeks: int,
    sessions_per_day: int,
    seed: int = 7,
    imported: int = 60,
    sweep_every_h: int = SWEEP_EVERY_H,
) -> dict[str, Any]:
    rng = random.Random(seed)
    stats: Counter = Counter()
    t0 = clock.now()
    prefs = {
        svc.store(MemoryIn(content=p, scope="user", importance=0.6), project=proj).memory.id
        for p in PREFERENCES
    }
    old = [
        json.dumps(
            {
                "content": f"Imported note {i}: {rng.choice(TOPICS)} detail {i}",
                "memory_type": rng.choice(["episodic", "semantic", "procedural"]),
                "importance": round(rng.uniform(0.3, 0.8), 2),
                "created_at": (t0 - timedelta(days=rng.uniform(60, 400))).isoformat(),
            }
        )
        for i in range(imported)
    ]
    imp = svc.import_lines(old, project=proj)
    weekly = []
    n = 0
    for day in range(weeks * 7):
        day_start = t0 + timedelta(days=day)
        clock.at = day_start + timedelta(hours=9)
        if day % 7 < 5:
            for _ in range(sessions_per_day):
                _session(svc, clock, proj, rng, n, prefs, stats)
                n += 1
        for h in range(0, 24, sweep_every_h):
            clock.at = max(clock.at, day_start + timedelta(hours=h))
            rep = svc.maintain(project=proj)
            for k, v in rep.transitions.items():
                stats[f"swept_to_{k}"] += v
            stats["sessions_abandoned"] += rep.sessions_abandoned
            stats["capped"] += rep.capped
        if day % 7 == 6:
            weekly.append({"week": day // 7 + 1, "census": census(svc, proj)})
    final = census(svc, proj)
    user_forgotten = sum(t.get("forgotten", 0) for t in final["user"].values())
    pref_status = {svc.get(i).status.value for i in prefs}
    # Imported memories are the ones created before the simulation started (forgetting clears their text).
    imported_status = Counter(
        m.status.value for m in svc.export_memories(scope="project", project=proj) if m.created_at < t0
    )
    history = svc.evolution_history()  # type: ignore[attr-defined]
    return {
        "weeks": weeks,
        "sessions": n,
        "seed": seed,
        "import": imp.model_dump(include={"stored", "next_sweep"}),
        "final": final,
        "weekly": weekly,
        "stats": dict(stats),
        "evolution": [{"key": h.key, "at": str(h.created_at), "reason": h.reason} for h in history],
        "half_lives": svc.half_lives(),
        "scope_weights": svc.scope_weights(),
        "checks": {
            "user_forgotten": user_forgotten,
            "preference_statuses": sorted(pref_status),
            "imported_by_status": dict(imported_status),
            "imported_stored": imp.stored,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weeks", type=int, default=8)
    ap.add_argument("--sessions-per-day", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    from engram_core.retrieval.embeddings import LocalEmbedder

    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "proj"
        (proj / ".git").mkdir(parents=True)
        # Start in the past: the engine's COMPUTED strength reads its own clock and refuses a last use in its future.
        clock = FrozenClock(datetime.now(UTC).replace(microsecond=0) - timedelta(days=args.weeks * 7 + 2))
        t = time.perf_counter()
        with EngramService(
            Path(tmp) / "home", embedder=LocalEmbedder(), clock=clock, recover_sessions=False
        ) as svc:
            out = simulate(
                svc,
                clock,
                str(proj),
                weeks=args.weeks,
                sessions_per_day=args.sessions_per_day,
                seed=args.seed,
            )
        out["took_s"] = round(time.perf_counter() - t, 1)
        out["load_average"] = os.getloadavg()
    text = json.dumps(out, indent=1, default=str)
    Path(__file__).with_name("results").mkdir(exist_ok=True)
    Path(__file__).with_name("results").joinpath("lifecycle_sim.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
