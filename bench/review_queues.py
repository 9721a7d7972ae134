"""Are the review queues right? Contradiction precision and recall, consolidation recall and false merges, on
a labelled store filled the way users fill one.

bench/review_data.py writes realistic project memory with planted, labelled cases (true contradictions, duplicate
groups, look-alikes). This script imports it with `engram import` (default settings, the real daemon, started
by the CLI as on a first session), then reads both queues through the daemon's socket and scores them:

- contradictions: precision (raised pairs whose two memories share a subject and differ in its value) and
  recall (planted pairs raised, open or resolved), open contradictions per 100 memories, and whether each
  pair resolved without asking superseded the older value;
- consolidation: the share of duplicate groups proposed or merged (an item holding two or more of a group's
  memories), and false merges (items whose sources differ in subject or value).

    .venv/bin/python bench/review_queues.py [--n 3000] [--seed 5] [--out bench/results/review_queues.json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import realpath_text  # noqa: E402
from review_data import generate  # noqa: E402

PY = (
    str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
)
ENGRAM = [PY, "-m", "engram_core.cli"]


def env_for(work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(work / "home"),
        "ENGRAM_HOME": str(work / "engram-home"),
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CLAUDE_PROJECT_DIR": str(work / "proj"),
    }


def engram(work: Path, *args: str, timeout: float = 1800) -> str:
    out = subprocess.run(
        [*ENGRAM, *args],
        cwd=work / "proj",
        env=env_for(work),
        text=True,
        capture_output=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"engram {' '.join(args[:2])} exited {out.returncode}: {out.stderr[-2000:]}")
    return out.stdout


def score(
    rows: list[dict[str, Any]],
    by_content: dict[str, str],
    contradictions: list[dict[str, Any]],
    consolidations: list[dict[str, Any]],
) -> dict[str, Any]:
    label = {by_content[r["content"]]: r["label"] for r in rows if r["content"] in by_content}
    n = len(by_content)

    def same_fact(a: str, b: str) -> bool:
        la, lb = label.get(a), label.get(b)
        return bool(la and lb and la["subject"] == lb["subject"] and la["value"] == lb["value"])

    planted: dict[str, set[str]] = defaultdict(set)
    for mid, lab in label.items():
        if lab["role"].startswith("contradiction"):
            planted[lab["group"]].add(mid)
    found_pairs: set[str] = set()
    tp = fp = open_n = auto = auto_right = 0
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    false_examples: list[dict[str, Any]] = []
    for c in contradictions:
        a, b = c["a"]["id"], c["b"]["id"]
        la, lb = label.get(a), label.get(b)
        true = bool(la and lb and la["subject"] == lb["subject"] and la["value"] != lb["value"])
        by_kind[c["kind"]][0 if true else 1] += 1
        if c["status"] == "open":
            open_n += 1
        if true:
            tp += 1
            found_pairs.add(la["group"])  # type: ignore[index]
        else:
            fp += 1
            if len(false_examples) < 8:
                false_examples.append(
                    {"a": c["a"]["content"], "b": c["b"]["content"], "evidence": c["evidence"]}
                )
        if c["status"] == "resolved" and (c.get("resolution") or "").startswith("keep"):
            decided = c.get("decided_by") or ""
            if decided == "policy":
                auto += 1
                kept = a if c["resolution"] == "keep_a" else b
                auto_right += bool(label.get(kept, {}).get("role") == "contradiction-new")
    groups: dict[str, set[str]] = defaultdict(set)
    for mid, lab in label.items():
        if lab["role"] == "duplicate":
            groups[lab["group"]].add(mid)
    covered: set[str] = set()
    false_merges = 0
    merge_examples: list[list[str]] = []
    for item in consolidations:
        if item["status"] == "rejected":
            continue
        ids = [s["id"] for s in item["sources"]]
        for g, members in groups.items():
            if len(members & set(ids)) >= 2:
                covered.add(g)
        if len(ids) >= 2 and not all(same_fact(x, y) for x, y in itertools.combinations(ids, 2)):
            false_merges += 1
            if len(merge_examples) < 5:
                merge_examples.append([s["content"] for s in item["sources"]])
    predicted = tp + fp
    by_id = {mid: r for r in rows if (mid := by_content.get(r["content"]))}
    missed_examples = [
        [by_id[m]["content"] for m in sorted(members, key=lambda m: label[m]["role"])]
        for g, members in sorted(planted.items())
        if g not in found_pairs
    ][:12]
    return {
        "memories": n,
        "contradictions": {
            "planted_pairs": len(planted),
            "raised": predicted,
            "true": tp,
            "false": fp,
            "precision": round(tp / predicted, 3) if predicted else None,
            "recall": round(len(found_pairs & set(planted)) / len(planted), 3) if planted else None,
            "open": open_n,
            "open_per_100_memories": round(100 * open_n / max(1, n), 2),
            "resolved_without_asking": auto,
            "resolved_without_asking_right": auto_right,
            "by_kind": {k: {"true": v[0], "false": v[1]} for k, v in by_kind.items()},
            "false_examples": false_examples,
            "missed_examples": missed_examples,
        },
        "consolidation": {
            "duplicate_groups": len(groups),
            "groups_proposed_or_merged": len(covered),
            "recall": round(len(covered) / len(groups), 3) if groups else None,
            "items": len([i for i in consolidations if i["status"] != "rejected"]),
            "by_reason": {
                r: sum(i["reason"] == r for i in consolidations)
                for r in sorted({i["reason"] for i in consolidations})
            },
            "false_merges": false_merges,
            "false_merge_examples": merge_examples,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "review_queues.json")
    ap.add_argument(
        "--style",
        choices=("tuned", "heldout"),
        default="tuned",
        help="the forms the detector was developed on, or forms written afterwards (review_data.py)",
    )
    ap.add_argument(
        "--realpath",
        type=int,
        metavar="N",
        default=None,
        help="instead: N memories of bench/realpath_text.py (2/3 project, 1/3 user; no labels): open "
        "contradictions per 100 memories and the consolidation queue after the import",
    )
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    a = ap.parse_args()
    if a.realpath:
        rows = realpath_text.memories(a.realpath * 2 // 3, a.realpath - a.realpath * 2 // 3, seed=7)
    else:
        rows = generate(a.n, a.seed, style=a.style)
    with contextlib.ExitStack() as stack:
        work = a.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="engram-review-")))
        for d in (work / "home", work / "proj" / ".git"):
            d.mkdir(parents=True, exist_ok=True)
        (work / "engram-home").mkdir(mode=0o700, exist_ok=True)  # owner-only, as Engram requires
        data = work / "data.jsonl"
        data.write_text(
            "".join(json.dumps({k: v for k, v in r.items() if k != "label"}) + "\n" for r in rows)
        )
        t0 = time.perf_counter()
        report = json.loads(engram(work, "import", str(data), "--json"))
        took = time.perf_counter() - t0
        try:
            from engram_core.wire.client import RemoteService

            with RemoteService(work / "engram-home", start=False, request_timeout=600).connect() as client:
                proj = str(work / "proj")
                by_content: dict[str, str] = {}
                after = None
                while True:
                    page = client.call(
                        "export_memories", scope="project", project=proj, after=after, limit=2000
                    )
                    if not page:
                        break
                    for m in page:
                        by_content[m["content"]] = m["id"]
                    after = f"{page[-1]['database']}/{page[-1]['id']}" if "database" in page[-1] else None
                    if after is None:
                        break
                if a.realpath:
                    realpath_report = {
                        "contradictions": client.call("count_contradictions", project=proj),
                        "open_sample": [
                            [c["a"]["content"], c["b"]["content"], c["evidence"]]
                            for c in client.call("list_contradictions", project=proj, limit=10)
                        ],
                        "consolidations": client.call("count_consolidations", project=proj),
                        "consolidation_sample": [
                            [s["content"] for s in i["sources"]] + i["evidence"][:1]
                            for i in client.call("list_consolidations", project=proj, limit=8)
                        ],
                    }
                else:
                    contradictions = client.call(
                        "list_contradictions", project=proj, status="all", limit=100_000
                    )
                    consolidations = client.call(
                        "list_consolidations", project=proj, status="all", limit=1000
                    )
        finally:
            with contextlib.suppress(Exception):
                engram(work, "stop", timeout=300)
    imported = {"stored": report.get("stored"), "merged": report.get("merged"), "seconds": round(took, 1)}
    if a.realpath:
        c = realpath_report["contradictions"]
        out = {
            "bench": "review_queues --realpath",
            "memories": a.realpath,
            "import": imported,
            "open_contradictions_per_100": round(100 * c["open"] / a.realpath, 2),
            **realpath_report,
            "load_1min": os.getloadavg()[0],
        }
    else:
        out = {
            "bench": "review_queues",
            "seed": a.seed,
            "style": a.style,
            "import": imported,
            **score(rows, by_content, contradictions, consolidations),
            "load_1min": os.getloadavg()[0],
        }
    text = json.dumps(out, indent=2)
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
