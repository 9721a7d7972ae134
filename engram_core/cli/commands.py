"""The `engram` command: a thin client of the daemon (it starts the daemon when needed).

Every command has ``--json``. Errors are one line on stderr with a non-zero exit, never a traceback.
The client path imports only the standard library (plus rich for the import progress bar): no SurrealDB,
no torch, no pydantic, so that a command costs little more than a Python start and one socket round trip.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from .. import __version__
from ..vocabulary import MEMORY_TYPES, SCOPES
from . import review
from .base import EXIT_ERROR, EXIT_OK, EXIT_USAGE, daemon_client, die, emit, project_of
from .memory_commands import (
    cmd_feedback,
    cmd_forget,
    cmd_recall,
    cmd_restore,
    cmd_show,
    cmd_stats,
    cmd_store,
)
from .sync_commands import cmd_share, cmd_sync
from .transfer import cmd_export, cmd_import


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# ── commands ────────────────────────────────────────────────────────────────
def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    checks = run_checks(args.home, project_of(args), agents=not args.no_agents, claude=args.claude)
    ok = all(c["ok"] for c in checks)
    if args.json:
        emit({"ok": ok, "checks": checks})
    else:
        _print_steps(checks)
        print("all good" if ok else "some checks failed: see → lines")
    return EXIT_OK if ok else EXIT_ERROR


def cmd_config(args: argparse.Namespace) -> int:
    from .doctor import shell_only_settings

    report = daemon_client(args).call("settings_report", project=project_of(args))
    report["ignored"] = [*report["ignored"], *shell_only_settings(report)]
    if args.json:
        emit(report)
        return EXIT_OK
    print(f"user file:    {report['user_file']}")
    print(f"project file: {report['project_file'] or '(no project)'}")
    print(
        "precedence:   default < evolved < user file < project file < environment "
        "(daemon-wide settings: never from a project file)"
    )
    width = max(len(s["name"]) for s in report["settings"])
    for s in report["settings"]:
        value = json.dumps(s["value"], ensure_ascii=False) if isinstance(s["value"], dict) else s["value"]
        note = f"  ({s['note']})" if s.get("note") else ""
        print(f"{s['name']:<{width}}  {s['source']:<12} {s['applies']:<11}  {value}{note}")
    for line in report["ignored"]:
        print(f"IGNORED  {line}")
    return EXIT_OK


def cmd_setup(args: argparse.Namespace) -> int:
    from ..paths import engram_home
    from .agent_setup import AGENTS, SetupError, setup_claude_code

    home = engram_home(args.home)
    try:
        if args.agent == "claude-code":
            report = setup_claude_code(home, claude=args.claude, dry_run=args.dry_run)
        else:
            report = AGENTS[args.agent](home, dry_run=args.dry_run)
    except SetupError as exc:
        die(str(exc))
    if args.json:
        emit(report.as_dict())
    else:
        _print_steps([s.as_dict() for s in report.steps])
        print(
            f"Engram is set up for {args.agent}"
            if report.ok
            else f"set-up for {args.agent} is incomplete: see → lines"
        )
    return EXIT_OK if report.ok else EXIT_ERROR


def _print_steps(steps: list[dict[str, Any]]) -> None:
    for c in steps:
        print(f"{'ok ' if c['ok'] else 'FIX'}  {c['name']}: {c['detail']}")
        if not c["ok"] and c.get("fix"):
            print(f"     → {c['fix']}")


def cmd_compact(args: argparse.Namespace) -> int:
    report = daemon_client(args).call("compact", project=project_of(args) if args.project else None)
    if args.json:
        emit(report)
    else:
        for st in report["stores"]:
            print(
                f"{st['path']}: {st['before_bytes'] / 1e6:.1f} MB -> {st['after_bytes'] / 1e6:.1f} MB "
                f"({st['took_ms']:.0f} ms)"
            )
        for path in report.get("stopped", []):
            print(f"{path}: not compacted, the daemon was stopping (left as it was; `engram compact` again)")
    return EXIT_OK


def cmd_redact(args: argparse.Namespace) -> int:
    report = daemon_client(args).call(
        "redact_stored", project=project_of(args), all_projects=args.all_projects, dry_run=args.dry_run
    )
    if args.json:
        emit(report)
        return EXIT_OK
    total = sum(n for tables in report.values() for n in tables.values())
    verb = "would be rewritten (dry run, nothing changed)" if args.dry_run else "rewritten"
    print(f"{total} row(s) holding a secret {verb}")
    for store, tables in report.items():
        if tables:
            print(f"  {store}: " + ", ".join(f"{t} {n}" for t, n in sorted(tables.items())))
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    client = daemon_client(args)
    report = client.call(
        "maintain", project=project_of(args), all_projects=args.all_projects, dry_run=args.dry_run
    )
    if args.full:
        report["consolidation"] = client.call(
            "reflect_and_consolidate", project=project_of(args), dry_run=args.dry_run, level="full"
        )
    if args.json:
        emit(report)
        return EXIT_OK
    if args.full:
        c = report["consolidation"]
        queued = ", ".join(f"{k} {v}" for k, v in c["queued"].items() if v) or "nothing new"
        print(
            f"consolidation ({', '.join(c['levels'])}): queued {queued}; {c['auto_approved']} applied by policy, "
            f"{c['pending_review']} wait for review (`engram review`); {c['contradictions_open']} open "
            "contradiction(s)"
        )
    moved = ", ".join(f"{k} {v}" for k, v in report["transitions"].items()) or "no transitions"
    if report.get("dry_run"):
        print(
            f"dry run, nothing changed. The sweep would move: {moved}; "
            f"{report['queued_for_consolidation']} would be queued for consolidation"
        )
    else:
        print(
            f"{moved}; {report['queued_for_consolidation']} queued for consolidation; "
            f"{report['sessions_recovered']} session(s) recovered, {report.get('sessions_abandoned', 0)} "
            f"abandoned; {report['promoted_to_user']} promoted to user; {report['took_ms']:.0f} ms"
        )
    for scope, moves in sorted(report.get("by_scope", {}).items()):
        if moves:
            print(f"  {scope}: " + ", ".join(f"{k} {v}" for k, v in sorted(moves.items())))
    if report.get("capped"):
        print(
            f"  {report['capped']} archived because a scope was over its cap (max_memories_project / _user)"
        )
    if report.get("awaiting_forget"):
        print(
            f"  {report['awaiting_forget']} archived memories are below 0.01: forgotten after 7 days in the archive "
            "unless recalled (never in the user scope)"
        )
    return EXIT_OK


def cmd_review(args: argparse.Namespace) -> int:
    return review.run(args, daemon_client(args), project_of(args), emit, die)


def cmd_evolve(args: argparse.Namespace) -> int:
    client = daemon_client(args)
    if args.history:
        rows = client.call("evolution_history", limit=args.limit)
        if args.json:
            emit(rows)
        elif not rows:
            print("no evolution change has been applied")
        for r in rows if not args.json else []:
            new = (r.get("new_value") or {}).get("v")
            tag = " (rollback)" if (r.get("new_value") or {}).get("rollback_of") else ""
            print(
                f"{r['id']}  {str(r['created_at'])[:19]}  {r['key']}{tag}: {json.dumps(new)}  {r.get('reason', '')}"
            )
        return EXIT_OK
    if args.rollback is not None:
        out = client.call("rollback_evolution", steps=args.rollback)
        if args.json:
            emit(out)
        for r in out if not args.json else []:
            print(f"rolled back {r['undid']}: {r['key']} is {json.dumps(r['restored'])} again")
        return EXIT_OK
    rep = client.call("evolve_memory_system", dry_run=not args.apply, project=project_of(args))
    if args.json:
        emit(rep)
        return EXIT_OK
    print(f"{rep['log_entries']} unused retrieval log rows ({rep['judged_entries']} with feedback)")
    for p in rep["proposals"]:
        manual = " (a manual setting wins)" if p.get("overridden_by_manual") else ""
        print(
            f"  {p['key']}: {json.dumps(p['current'])} -> {json.dumps(p['proposed'])}{manual}\n    {p['reason']}"
        )
    print(rep["message"] + ("" if args.apply or not rep["proposals"] else "; --apply to apply"))
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from ..daemon.server import serve
    from ..paths import engram_home

    return serve(engram_home(args.home), args.idle_timeout, args.verbose)


def cmd_stop(args: argparse.Namespace) -> int:
    from ..paths import engram_home
    from ..wire.client import DaemonUnavailable, daemon_alive, daemon_pid

    try:
        client = daemon_client(args, start=False)
    except DaemonUnavailable:
        if args.json:
            emit({"running": False, "stopped": False})
        else:
            print(f"no Engram daemon is running for {engram_home(args.home)}")
        return EXIT_OK
    pid = client.info.get("pid") or daemon_pid(args.home)
    ack = client.call("shutdown")
    client.close()
    waiting = ack.get("waiting_for") if isinstance(ack, dict) else None
    if waiting:
        print(f"stopping the Engram daemon (pid {pid}); waiting for {waiting}", file=sys.stderr)
    # Until the process has let go of its lock file, not just its socket: it closes its stores after the socket,
    # and a daemon started meanwhile would find it still running.
    sock = client.socket_path
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and (sock.exists() or daemon_alive(args.home)):
        time.sleep(0.05)
    if sock.exists() or daemon_alive(args.home):
        die(
            f"the daemon (pid {pid}) did not stop within {args.timeout:.0f} s"
            + (f" (it was finishing {waiting})" if waiting else "")
            + f"; `kill {pid}` ends it"
        )
    if args.json:
        emit({"running": False, "stopped": True, "pid": pid})
    else:
        print(f"stopped the Engram daemon (pid {pid})")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from ..paths import engram_home
    from ..wire.client import DaemonUnavailable
    from ..wire.protocol import RemoteError

    try:
        client = daemon_client(args, start=False)
    except DaemonUnavailable:
        if args.json:
            emit({"running": False, "home": str(engram_home(args.home))})
        else:
            print(f"no Engram daemon is running for {engram_home(args.home)} (any engram command starts one)")
        return EXIT_ERROR
    status = client.call("flush", timeout_s=args.flush_timeout) if args.flush else None
    info = client.call("status")  # printed as the daemon sent it
    info["running"] = True
    try:
        info["project"] = client.call("project_identity", project=project_of(args))
    except RemoteError as exc:  # not in a project folder (the home folder, /tmp): the daemon still runs
        info["project"] = {"error": exc.message}
    if status is not None:
        info["flush"] = status
    if args.json:
        emit(info)
    else:
        print(
            f"running: pid {info['pid']}, protocol {info['protocol']}, version {info['version']}, "
            f"up {info['uptime_s']:.0f} s"
            + (f", {info['rss_mb']:.0f} MB resident" if info.get("rss_mb") is not None else "")
        )
        print(
            f"  socket {info['socket']}; model {info['model']}; {info['sessions_active']} session(s), "
            f"{info['projects_open']} project(s) open; {info['requests']} request(s), {info['errors']} error(s)"
        )
        print(
            f"  hook events: {info['events_applied']} applied, {info['events_queued']} queued, "
            f"{info['events_failed']} failed; spool: {info['spool_ingested']} ingested, "
            f"{info['spool_waiting']} file(s) waiting; idle exit after {info['idle_timeout_s']:.0f} s (0 = never)"
        )
        proj = info["project"]
        if "error" in proj:
            print(f"  project: none here ({proj['error']})")
        else:
            print(
                f"  project: {proj['root']} -> {proj['database']} ({proj['reason']}); store {proj['store_dir']}"
            )
            for a in proj["adoptions"]:
                print(f"  {a['message']}")
        for entry in info.get("spool_rejected", []):
            print(
                f"  SPOOL entry moved aside to {Path(info['home']) / 'spool' / 'rejected'} (not ingested, not "
                f"retried; inspect and remove it): {entry}"
            )
        for p in info.get("parked", []):
            print(
                f"  PARKED hook event {p['event_id']} ({p['kind']}, {p['attempts']} attempts; kept in the journal "
                f"and retried): {p['error']}"
            )
    return EXIT_ERROR if info.get("events_parked") else EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    # The bridge is standard library only: the MCP protocol itself is served inside the daemon.
    from ..mcp.bridge import main as mcp_main

    return mcp_main([])


def cmd_tui(args: argparse.Namespace) -> int:
    try:
        from engram_tui.app import main as tui_main
    except ImportError as exc:
        die(
            f"the terminal UI is not available in this install ({exc}); the commands are listed by `engram --help`"
        )
    argv = [
        f"--{flag.replace('_', '-')}"
        for flag in ("demo", "reset", "remove_demo", "in_process")
        if getattr(args, flag, False)
    ]
    for flag in ("project", "home"):
        if getattr(args, flag, None):
            argv += [f"--{flag}", str(getattr(args, flag))]
    return int(tui_main(argv) or 0)


def cmd_off(args: argparse.Namespace, on: bool = False) -> int:
    from ..paths import engram_home

    if not args.session:
        die(
            "give --session ID (the Claude session id Engram shows in its SessionStart context); "
            "for a whole project set `disabled: true` in .claude/engram.local.md, or ENGRAM_DISABLED=1"
        )
    if "/" in args.session or args.session.startswith("."):
        die("that is not a session id")
    folder = engram_home(args.home) / "optout"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = folder / args.session
    if on:
        marker.unlink(missing_ok=True)
    else:
        marker.touch(mode=0o600)
    state = {"session": args.session, "capture": "on" if on else "off"}
    if args.json:
        emit(state)
    else:
        print(f"Engram capture is {state['capture']} for session {args.session}")
    return EXIT_OK


# ── parser ──────────────────────────────────────────────────────────────────
class _NotBuilt:
    """Stands in for the sub-parser of a command that is not being run, so its options are never built."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        return None

    def add_mutually_exclusive_group(self, **kwargs: Any) -> _NotBuilt:
        return self


SubParser = argparse.ArgumentParser | _NotBuilt


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``command`` one that builds only that command's sub-parser: building all 23
    with their options is a third of the CLI's own cost, paid by every `engram recall`. An unknown
    ``command`` gets the whole parser, so that its error lists every command."""
    p = _Parser(
        prog="engram",
        description="Engram: persistent, hierarchical memory for coding agents. "
        "With no command, opens the terminal UI.",
    )
    p.add_argument("--version", action="version", version=f"engram {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    built: list[str] = []

    def add(name: str, help_: str, fn: Any) -> SubParser:
        if command is not None and name != command:
            return _NotBuilt()
        built.append(name)
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--json", action="store_true", help="print the result as JSON")
        sp.add_argument("--home", default=None, help="data root (default: $ENGRAM_HOME or ~/.claude/engram)")
        sp.set_defaults(fn=fn)
        return sp

    def project_opt(sp: SubParser) -> None:
        sp.add_argument(
            "--project",
            metavar="DIR",
            default=None,
            help="the project (default: the current directory's project)",
        )

    sp = add("store", "store one memory (secrets are redacted first)", cmd_store)
    sp.add_argument("text", nargs="*", help="what to remember ('-' reads stdin)")
    sp.add_argument("--type", choices=MEMORY_TYPES, default="semantic", help="memory type (default semantic)")
    sp.add_argument("--scope", choices=SCOPES, default="project", help="scope (default project)")
    sp.add_argument("--tags", default=None, help="comma-separated tags")
    sp.add_argument("--importance", type=float, default=None, help="0.0-1.0 (default 0.5)")
    sp.add_argument("--session", default=None, help="session id, for --scope session")
    project_opt(sp)

    sp = add(
        "import",
        "import memories from a JSONL file (one memory per line); then compacts the stores it "
        "grew (old row versions leave the disk)",
        cmd_import,
    )
    sp.add_argument(
        "file",
        help="JSONL: content, memory_type, scope, tags, importance, metadata, created_at; "
        "or a file written by `engram export` (restored exactly)",
    )
    sp.add_argument("--session", default=None, help="session id, for lines with scope session")
    sp.add_argument(
        "--skip-bad",
        action="store_true",
        help="import the good lines of a file that has bad ones (default: a bad line stops the import "
        "before anything is stored)",
    )
    sp.add_argument(
        "--dates",
        choices=("keep", "age"),
        default="keep",
        help="keep: each line keeps its created_at and decays from the import (default); "
        "age: treat created_at as the last use, so old lines may be archived by the next sweep",
    )
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="store nothing: check every line and say what the next sweep would do to them",
    )
    project_opt(sp)

    sp = add("recall", "recall memories across scopes (hybrid BM25 + vectors)", cmd_recall)
    sp.add_argument("query", nargs="*", help="what to recall")
    sp.add_argument("--limit", type=int, default=10, help="how many results (1-200, default 10)")
    sp.add_argument("--scope", choices=("all", *SCOPES), default="all", help="where to look (default all)")
    sp.add_argument("--type", choices=MEMORY_TYPES, default=None, help="only this memory type")
    sp.add_argument("--session", default=None, help="include this session's memories")
    project_opt(sp)

    sp = add("show", "show one memory in full", cmd_show)
    sp.add_argument("id", help="memory id")
    project_opt(sp)

    sp = add(
        "forget",
        "forget one memory: archive it (asks first on a terminal; `engram restore` undoes it)",
        cmd_forget,
    )
    sp.add_argument("id", help="memory id")
    sp.add_argument(
        "--erase",
        action="store_true",
        help="clear its content and embedding for good instead of archiving (needs confirmation)",
    )
    sp.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    project_opt(sp)

    sp = add(
        "feedback",
        "say whether a memory helped: helpful raises its importance by 0.1, not-helpful lowers it by 0.1 (floor "
        "0.05), so it ranks and fades accordingly",
        cmd_feedback,
    )
    sp.add_argument("id", help="memory id")
    sp.add_argument("verdict", help="helpful, partly, not-helpful, or a number from 0 to 1")
    project_opt(sp)

    sp = add("restore", "bring an archived memory back to active", cmd_restore)
    sp.add_argument("id", help="memory id")
    project_opt(sp)

    sp = add("stats", "memory counts per scope, type and status", cmd_stats)
    project_opt(sp)

    sp = add(
        "redact",
        "redact secrets already stored (rows written before a field or rule was redacted)",
        cmd_redact,
    )
    sp.add_argument("--all-projects", action="store_true", help="every known project, not just this one")
    sp.add_argument(
        "--dry-run", action="store_true", help="count the rows that would change and change nothing"
    )
    project_opt(sp)

    sp = add(
        "maintain", "run the maintenance sweep now (decay, consolidation queue, promotion)", cmd_maintain
    )
    sp.add_argument("--all-projects", action="store_true", help="every known project, not just this one")
    sp.add_argument("--dry-run", action="store_true", help="say what the sweep would do and change nothing")
    sp.add_argument(
        "--full",
        action="store_true",
        help="then the whole consolidation pipeline: near-duplicate groups, recurring episodes, "
        "promotion proposals, closed-episode summaries, graph pruning (`engram review` shows them)",
    )
    project_opt(sp)

    sp = add(
        "review",
        "the review queues: contradictions (strongest first, with the suggested resolution) and "
        "consolidation proposals, with true totals; resolve, reopen (undo), approve or reject an item",
        cmd_review,
    )
    review.add_arguments(sp)
    project_opt(sp)

    sp = add(
        "evolve",
        "self-tuning: show the proposals the retrieval log justifies (--apply applies them), "
        "the history of applied changes, or roll changes back",
        cmd_evolve,
    )
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--apply", action="store_true", help="apply the proposals (bounded; once a day at most)")
    g.add_argument("--history", action="store_true", help="list applied changes and rollbacks, newest first")
    g.add_argument(
        "--rollback",
        type=int,
        nargs="?",
        const=1,
        default=None,
        metavar="N",
        help="undo the newest N applied changes (default 1)",
    )
    sp.add_argument("--limit", type=int, default=50, help="how many history rows (default 50)")
    project_opt(sp)

    sp = add(
        "compact",
        "rewrite the store files with live data only (forgotten text, dropped sessions and old "
        "row versions leave the disk; the daemon does it by itself when idle)",
        cmd_compact,
    )
    sp.add_argument(
        "--project",
        metavar="DIR",
        default=None,
        help="only this project's store (default: every store the daemon has open)",
    )

    sp = add(
        "export",
        "write memories as JSONL with every field (a lossless backup; `engram import` restores it)",
        cmd_export,
    )
    sp.add_argument("--scope", choices=("all", *SCOPES), default="all", help="which scope(s) (default all)")
    sp.add_argument("--output", "-o", default=None, help="file to write (mode 0600); default stdout")
    project_opt(sp)

    sp = add(
        "config",
        "every effective setting for this project and where it came from (default, user file, "
        "project file, environment, evolved); values that are ignored, and why",
        cmd_config,
    )
    project_opt(sp)

    sp = add(
        "doctor",
        "check the installation, the stores, the daemon and the Claude Code integration "
        "(Claude Code found, plugin enabled, MCP command runnable, hooks' python3, last hook error)",
        cmd_doctor,
    )
    sp.add_argument("--no-agents", action="store_true", help="skip the Claude Code checks")
    sp.add_argument("--claude", metavar="PATH", default=None, help="the claude executable (default: on PATH)")
    project_opt(sp)

    sp = add(
        "setup",
        "connect Engram to a coding agent: claude-code installs the plugin through a local "
        "marketplace (absolute commands, no PATH dependency) and verifies it; codex and gemini-cli add the "
        "MCP server and the memory protocol to their config files",
        cmd_setup,
    )
    sp.add_argument("agent", choices=("claude-code", "codex", "gemini-cli"), help="which agent")
    sp.add_argument("--claude", metavar="PATH", default=None, help="the claude executable (default: on PATH)")
    sp.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")

    sp = add(
        "serve", "run the daemon in the foreground (clients start it by themselves when needed)", cmd_serve
    )
    sp.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="exit after this many seconds without clients (0 = never; default 1800)",
    )
    sp.add_argument("--verbose", action="store_true", help="log to stderr instead of $ENGRAM_HOME/engram.log")

    sp = add("stop", "stop the daemon", cmd_stop)
    sp.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for it to exit")

    sp = add("status", "is the daemon running, and what is it doing (exit 1 when not running)", cmd_status)
    sp.add_argument("--flush", action="store_true", help="first wait until queued hook events are applied")
    sp.add_argument("--flush-timeout", type=float, default=30.0, help=argparse.SUPPRESS)
    project_opt(sp)

    add("mcp", "run the MCP server on stdio (what Claude Code starts through .mcp.json)", cmd_mcp)

    sp = add("tui", "open the terminal UI", cmd_tui)
    sp.add_argument(
        "--demo",
        action="store_true",
        help="open the demo set, kept in its own data root ($ENGRAM_HOME/demo): built on first use, "
        "the same on every later load, never touches your memories",
    )
    sp.add_argument("--reset", action="store_true", help="with --demo: rebuild the demo from scratch")
    sp.add_argument("--remove-demo", action="store_true", help="delete the demo's data root and exit")
    sp.add_argument(
        "--in-process",
        action="store_true",
        help="open the stores in this process instead of through the daemon (no daemon may be running)",
    )
    project_opt(sp)

    sp = add(
        "sync",
        "sync memories with your other machines over git: `sync init REMOTE` once, then `sync` "
        "(push what changed here, pull what changed there); `sync status`; `sync compact` rewrites the "
        "remote's history so erased texts leave it",
        cmd_sync,
    )
    sp.add_argument(
        "action",
        nargs="?",
        choices=("init", "run", "status", "compact"),
        default=None,
        help="init REMOTE: set up (once); run (the default): push and pull; status: remote, last sync, pending; "
        "compact: one snapshot replaces the remote's history",
    )
    sp.add_argument(
        "remote", nargs="?", default=None, help="for init: a git URL or the path to a bare repository"
    )
    sp.add_argument("--team", action="store_true", help="the team remote (only memories marked shared)")
    project_opt(sp)

    for name, help_, shared in (
        ("share", "mark a project memory (or a class) shared with the team (see `engram sync --team`)", True),
        ("unshare", "stop sharing a memory (or a class); teammates drop their copy", False),
    ):
        sp = add(name, help_, lambda a, shared=shared: cmd_share(a, shared=shared))
        sp.add_argument("id", nargs="?", default=None, help="memory id")
        sp.add_argument(
            "--type", choices=("procedural", "semantic"), default=None, help="every memory of this type"
        )
        project_opt(sp)

    sp = add("off", "stop capturing memories for one Claude session", cmd_off)
    sp.add_argument("--session", default=None, help="the Claude session id")
    sp = add("on", "resume capturing memories for one Claude session", lambda a: cmd_off(a, on=True))
    sp.add_argument("--session", default=None, help="the Claude session id")
    if command is not None and not built:
        return build_parser()
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        return cmd_tui(args)
    from ..paths import ConfigError
    from ..wire.client import DaemonUnavailable, ProtocolMismatch
    from ..wire.protocol import RemoteError

    try:
        return int(args.fn(args) or 0)
    except RemoteError as exc:
        die(exc.message)
    except (
        DaemonUnavailable,
        ProtocolMismatch,
        ConfigError,
    ) as exc:  # ConfigError: e.g. an unsafe ENGRAM_HOME
        die(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:
        die(f"{exc.__class__.__name__}: {exc}")
