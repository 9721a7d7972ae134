"""The `engram` command: a thin client of the daemon (it starts the daemon when needed).

Every command has ``--json``. Errors are one line on stderr with a non-zero exit, never a traceback.
The client path imports only the standard library (plus rich for the import progress bar): no SurrealDB,
no torch, no pydantic, so that a command costs little more than a Python start and one socket round trip.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from .. import __version__
from ..vocabulary import MEMORY_TYPES, SCOPES
from . import review

# Lines per request while storing: the progress bar moves (and its rate updates) this often, and the daemon
# embeds each 64-line chunk of a request while it writes the one before (writing.import_lines).
IMPORT_CHUNK = 256
CHECK_CHUNK = 2000  # lines per request of the first pass, which only checks the file
REQUEST_BYTES = (
    2 * 1024 * 1024
)  # and at most about this much text a request (a line may hold 100k characters)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _die(message: str, code: int = EXIT_ERROR) -> NoReturn:
    print(f"engram: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _emit(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _client(args: argparse.Namespace, *, start: bool = True) -> Any:
    from ..wire.client import connect

    return connect(getattr(args, "home", None), start=start)


def _project(args: argparse.Namespace) -> str:
    return str(Path(args.project or os.getcwd()).expanduser().resolve())


def _split_tags(raw: str | None) -> list[str]:
    return [t.strip() for t in (raw or "").split(",") if t.strip()]


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ── commands ────────────────────────────────────────────────────────────────
def cmd_store(args: argparse.Namespace) -> int:
    content = " ".join(args.text) if args.text else ""
    if content == "-":
        content = sys.stdin.read()
    if not content.strip():
        _die('the text is empty: say what to remember, e.g. engram store "we deploy with make release"')
    memory: dict[str, Any] = {
        "content": content,
        "memory_type": args.type,
        "scope": args.scope,
        "tags": _split_tags(args.tags),
    }
    if args.importance is not None:
        memory["importance"] = args.importance
    result = _client(args).call("store", memory=memory, project=_project(args), session=args.session)
    if args.json:
        _emit(result)
    else:
        m = result["memory"]
        print(f"{m['id']}  [{m['scope']}/{m['memory_type']}]  {result['message']}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        _die(f"{path}: no such file (give a JSONL file, one memory per line)")
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = jsonl_lines(fh.read())
    client = _client(args)
    # The whole file is checked before anything is stored: a bad line stops the import unless --skip-bad.
    totals = _import_pass(client, lines, args, dry_run=True, skip_bad=False)
    refused = bool(totals["failed"]) and not args.skip_bad
    if not args.dry_run and not refused:
        totals = _import_pass(client, lines, args, dry_run=False, skip_bad=True)
        if totals["stored"]:
            # An import rewrites entities, relations and episodes as it goes, and the engine keeps the old versions:
            # ~3 KB a memory on a 1,000-memory import (docs/storage.md). A store it made due is compacted now, not
            # at the daemon's next idle moment (which a restart would lose).
            from ..wire.client import DaemonUnavailable

            try:
                totals["compacted"] = client.call("compact", only_due=True).get("stores", [])
            except DaemonUnavailable as exc:
                # Every memory is stored: only the tidying is late, and an import that succeeded must not exit as
                # failed. The daemon finishes a compaction its client stopped waiting for, and compacts a due
                # store by itself once idle.
                totals["compaction_unfinished"] = str(exc)
    if args.json:
        _emit({**totals, "imported": not args.dry_run and not refused})
    else:
        if refused and not args.dry_run:
            print(
                f"nothing imported: {len(totals['failed'])} bad line(s) of {totals['total_lines']}; fix them "
                "or pass --skip-bad to import the others"
            )
        elif args.dry_run:
            print(
                f"dry run: nothing stored; {totals['total_lines'] - len(totals['failed'])} line(s) valid, "
                f"{len(totals['failed'])} refused"
            )
        else:
            print(
                f"{totals['stored']} stored, {totals['merged']} merged into existing memories, "
                f"{len(totals['failed'])} line(s) refused, of {totals['total_lines']}"
            )
            for st in totals.get("compacted", []):
                print(
                    f"compacted {st['path']}: {st['before_bytes'] / 1e6:.1f} -> {st['after_bytes'] / 1e6:.1f} MB "
                    f"in {st['took_ms'] / 1000:.1f} s"
                )
            if "compaction_unfinished" in totals:
                print(
                    f"the closing compaction is not finished ({totals['compaction_unfinished']}): everything above "
                    "is stored; the daemon compacts the store when idle, or run `engram compact --project .`"
                )
        if not refused:
            print(_next_sweep_line(totals["next_sweep"], args.dates))
        for f in totals["failed"]:
            print(f"  line {f['line']}: {f['error']}", file=sys.stderr)
    return EXIT_ERROR if totals["failed"] else EXIT_OK


def _import_pass(
    client: Any, lines: list[str], args: argparse.Namespace, *, dry_run: bool, skip_bad: bool
) -> dict[str, Any]:
    totals: dict[str, Any] = {
        "stored": 0,
        "merged": 0,
        "failed": [],
        "total_lines": 0,
        "dates": args.dates,
        "dry_run": args.dry_run,
        "next_sweep": {},
    }
    progress = None
    task = None
    if not args.json and sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        # On stderr (the terminal checked above): stdout stays the result, and rich would draw nothing on a pipe.
        # The rate and the time left both come from this pass's own count and clock (lines done / seconds since
        # it began), so the two always agree.
        progress = Progress(
            TextColumn("checking" if dry_run else "importing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            transient=True,
            console=Console(stderr=True),
        )
        progress.start()
        task = progress.add_task("import", total=len(lines), rate="")
    # A line no request can carry is refused here, with its line number, and sent as a blank line (which the
    # daemon skips): the daemon would refuse the whole request and close the connection mid-send.
    oversize = too_large_to_send(lines)
    for i, n in oversize.items():
        totals["failed"].append(
            {
                "line": i + 1,
                "error": f"the line is {n / 2**20:.1f} MB as sent, more than one "
                "request may carry: a memory's content is at most 100,000 characters",
            }
        )
        totals["total_lines"] += 1
    if oversize:
        lines = ["" if i in oversize else line for i, line in enumerate(lines)]
    began = time.monotonic()
    done = 0
    try:
        for start, chunk in import_requests(lines, CHECK_CHUNK if dry_run else IMPORT_CHUNK):
            plain, records = _split_export_records(chunk, start + 1)
            for first, part in plain:
                report = client.call(
                    "import_lines",
                    lines=part,
                    project=_project(args),
                    session=args.session,
                    first_line=first,
                    dates=args.dates,
                    dry_run=dry_run,
                    skip_bad=skip_bad,
                )
                for k, v in report.get("next_sweep", {}).items():
                    totals["next_sweep"][k] = totals["next_sweep"].get(k, 0) + v
                totals["stored"] += report["stored"]
                totals["merged"] += report["merged"]
                totals["failed"].extend(report["failed"])
                totals["total_lines"] += report["total_lines"]
            for first, recs in records:
                report = client.call(
                    "restore_memories",
                    records=recs,
                    project=_project(args),
                    first_line=first,
                    dry_run=dry_run,
                    skip_bad=skip_bad,
                )
                totals["stored"] += report["restored"]
                totals["restored"] = totals.get("restored", 0) + report["restored"] + report["replaced"]
                totals["merged"] += report["replaced"]
                totals["failed"].extend(report["failed"])
                totals["total_lines"] += len(recs)
            done += len(chunk)
            if progress is not None and task is not None:
                progress.update(
                    task,
                    advance=len(chunk),
                    rate=progress_rate(
                        done,
                        len(lines),
                        time.monotonic() - began,
                        dry_run,
                    ),
                )
    finally:
        if progress is not None:
            progress.stop()
    totals["failed"].sort(key=lambda f: f["line"])
    return totals


# Characters that some readers take for a line break (Python's str.splitlines, JavaScript, many editors) but JSON
# may leave raw inside a string: an export writes them escaped, so that any line reader keeps a record whole.
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def export_line(record: dict[str, Any]) -> str:
    """One record as `engram export` writes it: JSON on one line, UTF-8 text kept as it is except the characters
    a reader could take for a line break (JSON escapes the control characters; these three it leaves raw)."""
    line = json.dumps(record, ensure_ascii=False, default=str)
    for ch, esc in _LINE_BREAKS.items():
        if ch in line:  # only ever inside a string: JSON's own syntax is ASCII
            line = line.replace(ch, esc)
    return line


def jsonl_lines(text: str) -> list[str]:
    """A JSONL file's lines: split at \\n only (a \\r before it dropped), never at the other characters
    str.splitlines() breaks on, which a JSON string may hold raw (U+2028, U+0085, ...)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [x[:-1] if x.endswith("\r") else x for x in lines]


def progress_rate(done: int, total: int, seconds: float, checking: bool = False) -> str:
    """What the import's progress bar says after ``done`` of ``total`` lines in ``seconds``: the rate so far
    and the time left at that rate."""
    rate = done / max(seconds, 1e-6)
    left = int(round((total - done) / rate)) if rate > 0 else 0
    clock = (
        f"{left // 3600}:{left % 3600 // 60:02d}:{left % 60:02d}"
        if left >= 3600
        else f"{left // 60}:{left % 60:02d}"
    )
    return f"{rate:,.0f} {'lines' if checking else 'memories'}/s, {clock} left"


def wire_bytes(line: str) -> int:
    """What a line takes inside a request: escaping makes a control character 6 bytes, an emoji 4."""
    return len(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def too_large_to_send(lines: list[str]) -> dict[int, int]:
    """Index -> bytes of each line no request could carry (a single request is at most MAX_LINE bytes)."""
    from ..wire.protocol import MAX_LINE

    limit = MAX_LINE - 64 * 1024  # the request's own fields around the lines
    return {
        i: n for i, line in enumerate(lines) if len(line) * 6 + 2 > limit and (n := wire_bytes(line)) > limit
    }


def import_requests(lines: list[str], per_call: int) -> list[tuple[int, list[str]]]:
    """(index of the first line, lines): at most ``per_call`` lines and about REQUEST_BYTES each as sent."""
    out: list[tuple[int, list[str]]] = []
    start, size = 0, 0
    for i, line in enumerate(lines):
        size += wire_bytes(line)
        if i + 1 - start >= per_call or size >= REQUEST_BYTES:
            out.append((start, lines[start : i + 1]))
            start, size = i + 1, 0
    if start < len(lines):
        out.append((start, lines[start:]))
    return out


def _next_sweep_line(preview: dict[str, int], dates: str) -> str:
    how = (
        "dates kept, decay counted from now"
        if dates == "keep"
        else "dates taken as the last use (--dates age)"
    )
    archived, doomed = preview.get("archived", 0), preview.get("below_forget_threshold", 0)
    line = f"next sweep ({how}): {archived} of these would be archived"
    if doomed:
        line += f", {doomed} of them below the forget threshold (forgotten 7 days later unless recalled)"
    if preview.get("queued_for_consolidation"):
        line += f", {preview['queued_for_consolidation']} queued for consolidation"
    return line


def _split_export_records(
    chunk: list[str], first_line: int
) -> tuple[list[tuple[int, list[str]]], list[tuple[int, list[dict[str, Any]]]]]:
    """Runs of plain memory lines and of `engram export` records (restored exactly, ids and all)."""
    plain: list[tuple[int, list[str]]] = []
    records: list[tuple[int, list[dict[str, Any]]]] = []
    for n, line in enumerate(chunk, start=first_line):
        rec = None
        if '"engram_export"' in line:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                rec = None
        if isinstance(rec, dict) and rec.get("engram_export") is not None:
            if records and records[-1][0] + len(records[-1][1]) == n:
                records[-1][1].append(rec)
            else:
                records.append((n, [rec]))
        elif plain and plain[-1][0] + len(plain[-1][1]) == n:
            plain[-1][1].append(line)
        else:
            plain.append((n, [line]))
    return plain, records


# Records per export request; the daemon also stops a page at ~4 MB, whatever the texts' sizes.
EXPORT_PAGE = 500


def _export_pages(args: argparse.Namespace) -> Iterator[list[dict[str, Any]]]:
    client = _client(args)
    after: str | None = None
    while True:
        page = client.call(
            "export_memories", scope=args.scope, project=_project(args), after=after, limit=EXPORT_PAGE
        )
        if not page:
            return
        yield page
        after = f"{page[-1]['database']}/{page[-1]['id']}"


def cmd_export(args: argparse.Namespace) -> int:
    # Page by page, so that a store of any size fits the wire; a file appears only when it is whole.
    show = not args.json and sys.stderr.isatty()
    if not args.output:
        for page in _export_pages(args):
            for r in page:
                print(export_line(r))
        return EXIT_OK
    out = Path(args.output)
    tmp = out.with_name(f".{out.name}.part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # memories are private
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for page in _export_pages(args):
                fh.writelines(export_line(r) + "\n" for r in page)
                n += len(page)
                if show:
                    print(f"\rexported {n} memories…", end="", file=sys.stderr, flush=True)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if show:
            print(file=sys.stderr)
    if args.json:
        _emit({"exported": n, "file": str(out), "scope": args.scope})
    else:
        print(f"{n} memories written to {out} (restore with `engram import {out}`)")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    checks = run_checks(args.home, _project(args), agents=not args.no_agents, claude=args.claude)
    ok = all(c["ok"] for c in checks)
    if args.json:
        _emit({"ok": ok, "checks": checks})
    else:
        _print_steps(checks)
        print("all good" if ok else "some checks failed: see → lines")
    return EXIT_OK if ok else EXIT_ERROR


def cmd_config(args: argparse.Namespace) -> int:
    from .doctor import shell_only_settings

    report = _client(args).call("settings_report", project=_project(args))
    report["ignored"] = [*report["ignored"], *shell_only_settings(report)]
    if args.json:
        _emit(report)
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
        _die(str(exc))
    if args.json:
        _emit(report.as_dict())
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
        _die("the query is empty: say what to recall")
    result = _client(args).call(
        "recall",
        query=query,
        project=_project(args),
        session=args.session,
        limit=args.limit,
        scope=args.scope,
        types=[args.type] if args.type else None,
    )
    hits = [_flat_hit(h) for h in result["hits"]]
    if args.json:
        _emit(
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
        print(f"    {_short(h['content'], 200)}")
    if result.get("degraded"):
        print(f"(note: {result['degraded']})", file=sys.stderr)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    m = _client(args).call("get", memory_id=args.id, project=_project(args))
    if args.json:
        _emit(m)
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
    client = _client(args)
    if args.erase and not args.yes and not sys.stdin.isatty():
        _die("--erase clears the content for good: confirm with --yes (no terminal to ask on)")
    if not args.yes and sys.stdin.isatty():
        m = client.call("get", memory_id=args.id, project=_project(args))
        verb = "ERASE (content cleared for good)" if args.erase else "Forget (archive)"
        answer = input(
            f"{verb} {m['id']} [{m['scope']}/{m['memory_type']}] {_short(m['content'], 70)!r}? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return EXIT_ERROR
    m = client.call("forget", memory_id=args.id, project=_project(args), erase=args.erase, confirm=args.erase)
    if args.json:
        _emit(m)
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
            _die(f"verdict must be one of {', '.join(FEEDBACK_VALUES)} or a number from 0 to 1")
    client = _client(args)
    before = client.call("get", memory_id=args.id, project=_project(args))
    m = client.call("update", memory_id=args.id, patch={"user_feedback": value}, project=_project(args))
    if args.json:
        _emit(m)
    else:
        print(
            f"{m['id']}: user feedback {m['user_feedback']:.2f}; importance {before['importance']:.2f} → "
            f"{m['importance']:.2f} (ranks and fades by it), quality now {m['quality']:.2f}"
        )
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    m = _client(args).call(
        "set_status", memory_id=args.id, status="active", reason="restored by user", project=_project(args)
    )
    if args.json:
        _emit(m)
    else:
        print(f"restored: {m['id']} is active again")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    stats = _client(args).call("stats", project=_project(args))
    if args.json:
        _emit(stats)
        return EXIT_OK
    print(
        f"project: {stats.get('project_root')}   embedding: {stats['embedding']}   "
        f"active sessions: {stats['sessions_active']}"
    )
    for s in stats["scopes"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["by_type"].items())) or "empty"
        print(f"  {s['scope']:<8} {s['total']:>6}  ({kinds})")
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    report = _client(args).call("compact", project=_project(args) if args.project else None)
    if args.json:
        _emit(report)
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
    report = _client(args).call(
        "redact_stored", project=_project(args), all_projects=args.all_projects, dry_run=args.dry_run
    )
    if args.json:
        _emit(report)
        return EXIT_OK
    total = sum(n for tables in report.values() for n in tables.values())
    verb = "would be rewritten (dry run, nothing changed)" if args.dry_run else "rewritten"
    print(f"{total} row(s) holding a secret {verb}")
    for store, tables in report.items():
        if tables:
            print(f"  {store}: " + ", ".join(f"{t} {n}" for t, n in sorted(tables.items())))
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    client = _client(args)
    report = client.call(
        "maintain", project=_project(args), all_projects=args.all_projects, dry_run=args.dry_run
    )
    if args.full:
        report["consolidation"] = client.call(
            "reflect_and_consolidate", project=_project(args), dry_run=args.dry_run, level="full"
        )
    if args.json:
        _emit(report)
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
    return review.run(args, _client(args), _project(args), _emit, _die)


def cmd_evolve(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.history:
        rows = client.call("evolution_history", limit=args.limit)
        if args.json:
            _emit(rows)
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
            _emit(out)
        for r in out if not args.json else []:
            print(f"rolled back {r['undid']}: {r['key']} is {json.dumps(r['restored'])} again")
        return EXIT_OK
    rep = client.call("evolve_memory_system", dry_run=not args.apply, project=_project(args))
    if args.json:
        _emit(rep)
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
        client = _client(args, start=False)
    except DaemonUnavailable:
        if args.json:
            _emit({"running": False, "stopped": False})
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
        _die(
            f"the daemon (pid {pid}) did not stop within {args.timeout:.0f} s"
            + (f" (it was finishing {waiting})" if waiting else "")
            + f"; `kill {pid}` ends it"
        )
    if args.json:
        _emit({"running": False, "stopped": True, "pid": pid})
    else:
        print(f"stopped the Engram daemon (pid {pid})")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from ..paths import engram_home
    from ..wire.client import DaemonUnavailable
    from ..wire.protocol import RemoteError

    try:
        client = _client(args, start=False)
    except DaemonUnavailable:
        if args.json:
            _emit({"running": False, "home": str(engram_home(args.home))})
        else:
            print(f"no Engram daemon is running for {engram_home(args.home)} (any engram command starts one)")
        return EXIT_ERROR
    status = client.call("flush", timeout_s=args.flush_timeout) if args.flush else None
    info = client.call("status")  # printed as the daemon sent it
    info["running"] = True
    try:
        info["project"] = client.call("project_identity", project=_project(args))
    except RemoteError as exc:  # not in a project folder (the home folder, /tmp): the daemon still runs
        info["project"] = {"error": exc.message}
    if status is not None:
        info["flush"] = status
    if args.json:
        _emit(info)
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
        _die(
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
        _die(
            "give --session ID (the Claude session id Engram shows in its SessionStart context); "
            "for a whole project set `disabled: true` in .claude/engram.local.md, or ENGRAM_DISABLED=1"
        )
    if "/" in args.session or args.session.startswith("."):
        _die("that is not a session id")
    folder = engram_home(args.home) / "optout"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = folder / args.session
    if on:
        marker.unlink(missing_ok=True)
    else:
        marker.touch(mode=0o600)
    state = {"session": args.session, "capture": "on" if on else "off"}
    if args.json:
        _emit(state)
    else:
        print(f"Engram capture is {state['capture']} for session {args.session}")
    return EXIT_OK


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
    client = _client(args)
    client.request_timeout = max(
        client.request_timeout, 3600.0
    )  # a first sync of a large store takes minutes
    show = not args.json and sys.stderr.isatty()
    channel = "team" if args.team else "personal"
    if action == "init":
        if not args.remote:
            _die("give the remote: engram sync init REMOTE (a git URL or the path to a bare repository)")
        progress = _sync_progress(args, channel) if show else None
        try:
            r = client.call("sync_init", remote=args.remote, team=args.team)
        finally:
            if progress:
                progress[0].set()
                progress[1].join()
    elif args.remote:
        _die(f"`engram sync {action}` takes no remote (only `engram sync init REMOTE` does)")
    elif action == "status":
        r = client.call("sync_status", project=_project(args))
        if args.json:
            _emit(r)
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
        _emit(r)
    else:
        _sync_lines(r)
    return EXIT_OK


def cmd_share(args: argparse.Namespace, shared: bool = True) -> int:
    if bool(args.id) == bool(args.type):
        _die("give a memory id, or --type procedural|semantic for the whole class (not both)")
    if args.type:
        n = _client(args).call("share_class", memory_type=args.type, project=_project(args), shared=shared)
        if args.json:
            _emit({"memory_type": args.type, "shared": shared, "changed": n})
        else:
            print(
                f"{n} {args.type} memories of this project {'marked shared' if shared else 'no longer shared'}"
            )
        return EXIT_OK
    m = _client(args).call("share_memory", memory_id=args.id, project=_project(args), shared=shared)
    if args.json:
        _emit(m)
    else:
        print(
            f"{m['id']} is {'shared with the team (sent at the next `engram sync --team`)' if shared else 'no longer shared (teammates drop it at their next team sync)'}"
        )
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
        _die(exc.message)
    except (
        DaemonUnavailable,
        ProtocolMismatch,
        ConfigError,
    ) as exc:  # ConfigError: e.g. an unsafe ENGRAM_HOME
        _die(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:
        _die(f"{exc.__class__.__name__}: {exc}")
