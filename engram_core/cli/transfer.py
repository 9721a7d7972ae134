"""`engram import` and `engram export`: a file of memories in, one memory per line out, re-importable byte for
byte (line breaks JSON escapes so the file splits on newline only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .base import EXIT_ERROR, EXIT_OK, daemon_client, die, emit, project_of

# Lines per request while storing: the progress bar moves (and its rate updates) this often, and the daemon
# embeds each 64-line chunk of a request while it writes the one before (writing.import_lines).
IMPORT_CHUNK = 256
CHECK_CHUNK = 2000  # lines per request of the first pass, which only checks the file
REQUEST_BYTES = (
    2 * 1024 * 1024
)  # and at most about this much text a request (a line may hold 100k characters)


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        die(f"{path}: no such file (give a JSONL file, one memory per line)")
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = jsonl_lines(fh.read())
    client = daemon_client(args)
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
        emit({**totals, "imported": not args.dry_run and not refused})
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
                    project=project_of(args),
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
                    project=project_of(args),
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
    client = daemon_client(args)
    after: str | None = None
    while True:
        page = client.call(
            "export_memories", scope=args.scope, project=project_of(args), after=after, limit=EXPORT_PAGE
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
        emit({"exported": n, "file": str(out), "scope": args.scope})
    else:
        print(f"{n} memories written to {out} (restore with `engram import {out}`)")
    return EXIT_OK
