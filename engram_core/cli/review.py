"""`engram review`: the two review queues from a shell, as the TUI's review screens show them.

engram review                         open contradictions and pending consolidations, with true totals
engram review contradictions [--all]  the strongest first, with evidence and the suggested resolution
engram review consolidations [--all]  near-duplicate groups and other proposals, with why they were grouped
engram review resolve ID keep_b       settle a contradiction (keep_a, keep_b, keep_both, merge)
engram review reopen ID               undo a resolution (a person's, an agent's or one applied without asking)
engram review approve ID | reject ID  decide a consolidation item (reopen ID undoes either)
engram review resolve-all --min 0.9   every open contradiction that confident, by its suggested resolution
engram review resolve-all --kind value --keep-both   dismiss a whole class
engram review approve-all --max-risk 0.2 | reject-all --reason decay   bulk decisions on consolidations
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..wire.protocol import RemoteError

ACTIONS = (
    "list",
    "contradictions",
    "consolidations",
    "resolve",
    "reopen",
    "approve",
    "reject",
    "resolve-all",
    "approve-all",
    "reject-all",
)
RESOLUTIONS = ("keep_a", "keep_b", "keep_both", "merge")


def add_arguments(sp: Any) -> None:
    sp.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=ACTIONS,
        help="what to show or do (default: both queues, open items)",
    )
    sp.add_argument("id", nargs="?", default=None, help="the item (resolve, reopen, approve, reject)")
    sp.add_argument(
        "resolution",
        nargs="?",
        default=None,
        choices=(*RESOLUTIONS, None),
        help="for resolve: keep_a, keep_b (the other is superseded), keep_both, merge",
    )
    sp.add_argument("--all", action="store_true", help="resolved and decided items too")
    sp.add_argument("--limit", type=int, default=20, help="how many items of each queue (default 20)")
    sp.add_argument("--text", default=None, help="merge: the merged text; approve: the text to store instead")
    sp.add_argument(
        "--reason",
        default=None,
        help="reject: why the memories should stay apart; reject-all and "
        "approve-all: only items queued for this reason (duplicate, decay, episodic_to_semantic…)",
    )
    sp.add_argument(
        "--min",
        type=float,
        default=0.9,
        dest="min_confidence",
        help="resolve-all: only contradictions at least this confident (default 0.9)",
    )
    sp.add_argument("--kind", default=None, help="resolve-all: only this kind (value, negation, functional…)")
    sp.add_argument("--keep-both", action="store_true", help="resolve-all: dismiss them (both hold) instead")
    sp.add_argument(
        "--max-risk", type=float, default=None, help="approve-all: only items at or below this risk"
    )


def _short(text: str, n: int = 110) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def run(args: argparse.Namespace, client: Any, project: str, emit: Any, die: Any) -> int:
    act = args.action
    if act in ("resolve", "reopen", "approve", "reject") and not args.id:
        die(f"engram review {act} needs the item's id (engram review lists them)")
    if act == "resolve":
        if args.resolution is None:
            die("engram review resolve ID needs a resolution: keep_a, keep_b, keep_both or merge")
        out = client.call(
            "resolve_contradiction",
            contradiction_id=args.id,
            resolution=args.resolution,
            merged_content=args.text,
            project=project,
        )
        return _done(args, emit, out, out.get("message", "resolved"))
    if act == "reopen":
        try:
            out = client.call("reopen_contradiction", contradiction_id=args.id, project=project)
            return _done(
                args,
                emit,
                out,
                f"contradiction {out['id']} is open again; both memories are back as they were",
            )
        except RemoteError as exc:  # not a contradiction's id: a consolidation item's
            if "no contradiction queue item" not in exc.message:
                raise
        out = client.call("reopen_consolidation", item_id=args.id, project=project)
        return _done(
            args,
            emit,
            out,
            f"consolidation item {out['id']} is pending again; its memories are back as they were",
        )
    if act == "resolve-all":
        out = client.call(
            "resolve_contradictions",
            project=project,
            min_confidence=args.min_confidence,
            kind=args.kind,
            resolution="keep_both" if args.keep_both else "suggested",
        )
        return _done(args, emit, out, out["message"])
    if act in ("approve-all", "reject-all"):
        out = client.call(
            "decide_consolidations",
            project=project,
            action=act.split("-")[0],
            max_risk=args.max_risk,
            reason=args.reason,
            note=None,
        )
        return _done(args, emit, out, out["message"])
    if act == "approve":
        out = client.call("approve_consolidation", item_id=args.id, project=project, edited_content=args.text)
        return _done(args, emit, out, out.get("message", "approved"))
    if act == "reject":
        out = client.call("reject_consolidation", item_id=args.id, project=project, reason=args.reason)
        return _done(args, emit, out, f"item {out['id']} rejected: its memories stay as they are")
    report: dict[str, Any] = {}
    if act in ("list", "contradictions"):
        counts = client.call("count_contradictions", project=project)
        items = client.call(
            "list_contradictions", project=project, status="all" if args.all else "open", limit=args.limit
        )
        report["contradictions"] = {"counts": counts, "items": items}
    if act in ("list", "consolidations"):
        items = client.call(
            "list_consolidations", project=project, status="all" if args.all else "pending", limit=args.limit
        )
        counts = client.call("count_consolidations", project=project)
        report["consolidations"] = {"counts": counts, "items": items}
    if args.json:
        emit(report)
        return 0
    if "contradictions" in report:
        c = report["contradictions"]["counts"]
        shown = report["contradictions"]["items"]
        print(
            f"Contradictions: {len(shown)} shown of {c['open']:,} open; {c['resolved']:,} resolved by a person or "
            f"agent, {c['resolved_without_asking']:,} without asking (the newer statement named the old value; "
            "`engram review reopen ID` undoes one)"
        )
        for x in shown:
            sug = f"  suggested: {x['suggested']}" if x.get("suggested") else ""
            state = (
                x["status"] if x["status"] == "open" else f"{x['resolution']} by {x.get('decided_by') or '?'}"
            )
            print(f"  {x['id']}  {x['kind']}  confidence {x['confidence']:.2f}  [{state}]{sug}")
            print(f"    a {_short(x['a']['content'])}")
            print(f"    b {_short(x['b']['content'])}")
            for e in x.get("evidence", [])[:2]:
                print(f"    why: {_short(e, 140)}")
    if "consolidations" in report:
        shown = report["consolidations"]["items"]
        n = report["consolidations"]["counts"]
        print(
            f"Consolidations: {len(shown)} shown of {n['pending']:,} pending ({n['needs_review']:,} need a "
            f"decision); {n['completed']:,} applied, {n['rejected']:,} rejected"
            + (
                ""
                if shown
                else " (proposals arrive as memories are written: near-duplicate groups, recurring episodes; "
                "`engram maintain --full` looks for more now)"
            )
        )
        for x in shown:
            flag = "review" if x.get("needs_review") else "auto"
            print(
                f"  {x['id']}  {x['reason']}  risk {x['risk']:.2f} ({flag})  {len(x['sources'])} memories  "
                f"[{x['status']}]"
            )
            for s in x["sources"][:4]:
                print(f"    - {_short(s['content'])}")
            for e in x.get("evidence", [])[:2]:
                print(f"    why: {_short(e, 140)}")
    return 0


def _done(args: argparse.Namespace, emit: Any, out: dict[str, Any], message: str) -> int:
    if args.json:
        emit(out)
    else:
        print(message if isinstance(message, str) else json.dumps(message))
    return 0
