"""The commands on memories one at a time: store, recall, show, forget, feedback, restore, and the stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .base import EXIT_ERROR, EXIT_OK, daemon_client, die, emit, project_of, short, split_tags


def cmd_store(args: argparse.Namespace) -> int:
    content = " ".join(args.text) if args.text else ""
    if content == "-":
        content = sys.stdin.read()
    if not content.strip():
        die('the text is empty: say what to remember, e.g. engram store "we deploy with make release"')
    memory: dict[str, Any] = {
        "content": content,
        "memory_type": args.type,
        "scope": args.scope,
        "tags": split_tags(args.tags),
    }
    if args.importance is not None:
        memory["importance"] = args.importance
    result = daemon_client(args).call("store", memory=memory, project=project_of(args), session=args.session)
    if args.json:
        emit(result)
    else:
        m = result["memory"]
        print(f"{m['id']}  [{m['scope']}/{m['memory_type']}]  {result['message']}")
    return EXIT_OK


def _flat_hit(hit: dict[str, Any]) -> dict[str, Any]:
    m = hit["memory"]
    return {
        "id": m["id"],
        "scope": m["scope"],
        "type": m["memory_type"],
        "content": m["content"],
        "status": m["status"],
        "importance": m["importance"],
        "tags": m.get("tags", []),
        "memory_strength": m.get("memory_strength"),
        "created_at": m.get("created_at"),
        "scores": hit["scores"],
        "also_in": hit.get("also_in", []),
        "metadata": m.get("metadata", {}),
    }


def cmd_recall(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    if not query.strip():
        die("the query is empty: say what to recall")
    result = daemon_client(args).call(
        "recall",
        query=query,
        project=project_of(args),
        session=args.session,
        limit=args.limit,
        scope=args.scope,
        types=[args.type] if args.type else None,
    )
    hits = [_flat_hit(h) for h in result["hits"]]
    if args.json:
        emit(
            {
                "query": result["query"],
                "strategy": result["strategy"],
                "degraded": result.get("degraded"),
                "took_ms": result["took_ms"],
                "scope_weights": result.get("scope_weights"),
                "hits": hits,
            }
        )
        return EXIT_OK
    if not hits:
        print(f"nothing recalled for {query!r}")
    for h in hits:
        print(f"{h['id']}  [{h['scope']}/{h['type']}]  score {h['scores']['final']:.3f}")
        print(f"    {short(h['content'], 200)}")
    if result.get("degraded"):
        print(f"(note: {result['degraded']})", file=sys.stderr)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    m = daemon_client(args).call("get", memory_id=args.id, project=project_of(args))
    if args.json:
        emit(m)
        return EXIT_OK
    for key in (
        "id",
        "scope",
        "memory_type",
        "status",
        "importance",
        "memory_strength",
        "access_count",
        "tags",
        "created_at",
        "last_accessed_at",
        "promoted_from",
    ):
        if m.get(key) not in (None, [], ""):
            print(f"{key:>17}: {m[key]}")
    if m.get("metadata"):
        print(f"{'metadata':>17}: {json.dumps(m['metadata'], ensure_ascii=False)}")
    print()
    print(m["content"])
    return EXIT_OK


def cmd_forget(args: argparse.Namespace) -> int:
    client = daemon_client(args)
    if args.erase and not args.yes and not sys.stdin.isatty():
        die("--erase clears the content for good: confirm with --yes (no terminal to ask on)")
    if not args.yes and sys.stdin.isatty():
        m = client.call("get", memory_id=args.id, project=project_of(args))
        verb = "ERASE (content cleared for good)" if args.erase else "Forget (archive)"
        answer = input(
            f"{verb} {m['id']} [{m['scope']}/{m['memory_type']}] {short(m['content'], 70)!r}? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return EXIT_ERROR
    m = client.call(
        "forget", memory_id=args.id, project=project_of(args), erase=args.erase, confirm=args.erase
    )
    if args.json:
        emit(m)
    elif args.erase:
        print(f"erased: {m['id']} (its content and embedding are cleared; the record stays for history)")
    else:
        print(
            f"forgotten: {m['id']} is archived (out of recall and injection; "
            f"`engram restore {m['id']}` brings it back; --erase clears it for good)"
        )
    return EXIT_OK


FEEDBACK_VALUES = {"helpful": 1.0, "partly": 0.5, "not-helpful": 0.0}


def cmd_feedback(args: argparse.Namespace) -> int:
    value = FEEDBACK_VALUES.get(args.verdict)
    if value is None:
        try:
            value = float(args.verdict)
        except ValueError:
            die(f"verdict must be one of {', '.join(FEEDBACK_VALUES)} or a number from 0 to 1")
    client = daemon_client(args)
    before = client.call("get", memory_id=args.id, project=project_of(args))
    m = client.call("update", memory_id=args.id, patch={"user_feedback": value}, project=project_of(args))
    if args.json:
        emit(m)
    else:
        print(
            f"{m['id']}: user feedback {m['user_feedback']:.2f}; importance {before['importance']:.2f} → "
            f"{m['importance']:.2f} (ranks and fades by it), quality now {m['quality']:.2f}"
        )
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    m = daemon_client(args).call(
        "set_status", memory_id=args.id, status="active", reason="restored by user", project=project_of(args)
    )
    if args.json:
        emit(m)
    else:
        print(f"restored: {m['id']} is active again")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    stats = daemon_client(args).call("stats", project=project_of(args))
    if args.json:
        emit(stats)
        return EXIT_OK
    print(
        f"project: {stats.get('project_root')}   embedding: {stats['embedding']}   "
        f"active sessions: {stats['sessions_active']}"
    )
    for s in stats["scopes"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["by_type"].items())) or "empty"
        print(f"  {s['scope']:<8} {s['total']:>6}  ({kinds})")
    return EXIT_OK
