"""`engram sync` and `engram share` / `unshare`: memory across machines and with a team, over git."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .base import EXIT_OK, daemon_client, die, emit, project_of


def _sync_lines(r: dict[str, Any]) -> None:
    what = "team sync" if r["channel"] == "team" else "sync"
    if r.get("offline"):
        print(
            f"{what}: {r['remote']} cannot be reached; {r['queued_files']} commit(s) wait for the next sync"
        )
    for step in r.get("steps", []):
        print(f"  {step}")
    print(
        f"{what} with {r['remote']}: {r['pushed']} sent, {r['pulled']} received, {r['conflicts']} conflict(s) "
        f"resolved, {r['erased']} erased here, {r['excluded']} kept on this machine ({r['seconds']:.1f} s)"
    )


def _sync_progress(args: argparse.Namespace, channel: str) -> Any:
    """On a terminal, a line that follows the daemon's progress note until the sync answers."""
    import threading

    from ..paths import engram_home

    note = engram_home(args.home) / "sync" / channel / "progress"
    stop = threading.Event()
    started = time.monotonic()

    def show() -> None:
        while not stop.wait(0.5):
            try:
                text = note.read_text()
            except OSError:
                text = "syncing"
            print(f"\r{text} ({time.monotonic() - started:.0f} s)\033[K", end="", file=sys.stderr, flush=True)
        print("\r\033[K", end="", file=sys.stderr, flush=True)

    thread = threading.Thread(target=show, daemon=True)
    thread.start()
    return stop, thread


def cmd_sync(args: argparse.Namespace) -> int:
    action = args.action or "run"
    client = daemon_client(args)
    client.request_timeout = max(
        client.request_timeout, 3600.0
    )  # a first sync of a large store takes minutes
    show = not args.json and sys.stderr.isatty()
    channel = "team" if args.team else "personal"
    if action == "init":
        if not args.remote:
            die("give the remote: engram sync init REMOTE (a git URL or the path to a bare repository)")
        progress = _sync_progress(args, channel) if show else None
        try:
            r = client.call("sync_init", remote=args.remote, team=args.team)
        finally:
            if progress:
                progress[0].set()
                progress[1].join()
    elif args.remote:
        die(f"`engram sync {action}` takes no remote (only `engram sync init REMOTE` does)")
    elif action == "status":
        r = client.call("sync_status", project=project_of(args))
        if args.json:
            emit(r)
            return EXIT_OK
        for ch in r["channels"]:
            if not ch["configured"]:
                print(
                    f"{ch['channel']}: not set up (engram sync init{' --team' if ch['channel'] == 'team' else ''} REMOTE)"
                )
                continue
            print(
                f"{ch['channel']}: {ch['remote']}, machine {ch['machine']}, last sync {ch['last_sync'] or 'never'}, "
                f"{ch['pending_changes']} change(s) pending, {ch['queued_files']} commit(s) waiting for the remote"
            )
        print(f"{r['shared']} memories of this project are marked shared with the team")
        return EXIT_OK
    else:
        progress = _sync_progress(args, channel) if show else None
        try:
            r = client.call("sync_run", team=args.team, compact=action == "compact")
        finally:
            if progress:
                progress[0].set()
                progress[1].join()
    if args.json:
        emit(r)
    else:
        _sync_lines(r)
    return EXIT_OK


def cmd_share(args: argparse.Namespace, shared: bool = True) -> int:
    if bool(args.id) == bool(args.type):
        die("give a memory id, or --type procedural|semantic for the whole class (not both)")
    if args.type:
        n = daemon_client(args).call(
            "share_class", memory_type=args.type, project=project_of(args), shared=shared
        )
        if args.json:
            emit({"memory_type": args.type, "shared": shared, "changed": n})
        else:
            print(
                f"{n} {args.type} memories of this project {'marked shared' if shared else 'no longer shared'}"
            )
        return EXIT_OK
    m = daemon_client(args).call("share_memory", memory_id=args.id, project=project_of(args), shared=shared)
    if args.json:
        emit(m)
    else:
        print(
            f"{m['id']} is {'shared with the team (sent at the next `engram sync --team`)' if shared else 'no longer shared (teammates drop it at their next team sync)'}"
        )
    return EXIT_OK
