"""How a validated console / engram_execute query is sent to the engine, and how its answer comes back.

Each statement the validator accepted runs inside ``SELECT VALUE { <statement> } FROM ONLY [0] TIMEOUT <left>``
(a ``LET`` keeps its name at the top level and wraps its value the same way), where ``<left>`` is what remains
of one deadline for the whole query, computed by the engine from a ``$engram_deadline_*`` parameter set first.
So the deadline covers every statement form (RETURN, LET, FOR and IF included), a ``TIMEOUT`` written by the
user applies inside the wrapper and can only shorten it, and the text " TIMEOUT " in a string changes nothing.
Transaction control inside a block is not transaction control for the engine (verified: ``{ COMMIT }`` and
``{ CANCEL TRANSACTION }`` leave the enclosing transaction alone), so the schema guard around writes holds even
if the validator were wrong about what the text contains.

With writes, the statements run inside one transaction that ends by comparing the database's schema (INFO FOR
DB plus INFO FOR TABLE of every table: fields, events, indexes...) with a snapshot taken at its start; any
difference throws, and the whole transaction, data writes included, is rolled back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .ids import ulid
from .models import StatementResult

QUERY_TIMEOUT_S = 5
QUERY_MAX_ROWS = 1000

_LET = re.compile(r"LET\s+(\$\w+)\s*(:[^=]*)?=(.*)", re.S | re.I)
_POSITION = re.compile(r"-->\s*\[(\d+):(\d+)\]")
_TIMED_OUT = "exceeded the timeout"


@dataclass(frozen=True)
class Program:
    """The text sent to the engine and how to read its answer back."""

    text: str
    lead: int  # results of Engram's own statements before the user's
    trail: int  # ... and after them
    lines: list[tuple[int, int]]  # the body lines (1-based, inclusive) holding each user statement


def _name(kind: str) -> str:
    return f"$engram_{kind}_{ulid().lower()}"


def _quote_table(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def build(
    statements: list[str], *, allow_writes: bool, tables: list[str], timeout_s: float | None = None
) -> Program:
    """Wrap the validator's executable statements under one deadline (and the schema guard with writes)."""
    timeout_s = QUERY_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = _name("deadline")
    left = f"duration::from_nanos(math::max([0, time::nano({deadline}) - time::nano(time::now())]))"
    head = [f"LET {deadline} = time::now() + duration::from_millis({int(timeout_s * 1000)})"]
    tail: list[str] = []
    if allow_writes:
        guard = _name("schema")
        snapshot = (
            "{ db: (INFO FOR DB), tables: ["
            + ", ".join(f"(INFO FOR TABLE {_quote_table(t)})" for t in sorted(tables))
            + "] }"
        )
        head = ["BEGIN TRANSACTION", *head, f"LET {guard} = {snapshot}"]
        tail = [
            f"IF {snapshot} != {guard} {{ THROW 'writes may change data, never the schema' }}",
            "COMMIT TRANSACTION",
        ]
    out: list[str] = [s + ";" for s in head]
    lines: list[tuple[int, int]] = []
    line = len(out) + 1
    for stmt in statements:
        let = _LET.fullmatch(stmt)
        if let is not None:
            name, kind, value = let.group(1), let.group(2) or "", let.group(3)
            text = f"LET {name}{kind} = SELECT VALUE {{\n{value.strip()}\n}} FROM ONLY [0] TIMEOUT {left};"
        else:
            text = f"SELECT VALUE {{\n{stmt}\n}} FROM ONLY [0] TIMEOUT {left};"
        n = text.count("\n") + 1
        lines.append((line, line + n - 1))
        line += n
        out.append(text)
    out += [s + ";" for s in tail]
    return Program("\n".join(out), lead=len(head), trail=len(tail), lines=lines)


def refusal(message: str, program: Program, statements: list[str]) -> str:
    """The engine refused the whole text: say which statement and why, in the user's terms."""
    first = message.strip().splitlines()[0] if message.strip() else "no reason given"
    pos = _POSITION.search(message)
    if pos is not None:
        line = int(pos.group(1))
        for i, (lo, hi) in enumerate(program.lines):
            if lo <= line <= hi:
                stmt = statements[i] if i < len(statements) else ""
                preview = stmt if len(stmt) <= 80 else stmt[:79] + "…"
                return f"SurrealDB could not parse statement {i + 1} ({preview}): {first}"
    return f"SurrealDB refused the query: {first}"


def _json_safe(value: Any) -> Any:
    from .storage import plain

    return json.loads(json.dumps(_readable_vectors(plain(value)), default=str))


def _readable_vectors(value: Any) -> Any:
    """A stored vector (bytes since schema 006) shown as its numbers, as `engram export` writes it and as the
    console showed it when vectors were stored as floats."""
    from .storage import decode_vector, vector_size

    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            vec = decode_vector(v) if k == "embedding" and isinstance(v, bytes) and vector_size(v) else None
            out[k] = vec.tolist() if vec is not None else _readable_vectors(v)
        return out
    if isinstance(value, list):
        return [_readable_vectors(v) for v in value]
    return value


def _parse_ms(text: Any) -> float:
    units = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
    if not isinstance(text, str):
        return 0.0
    for unit in ("ns", "µs", "us", "ms", "s"):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * units[unit]
            except ValueError:
                return 0.0
    return 0.0


def results(
    raw: list[dict[str, Any]], program: Program, statements: list[str], timeout_s: float | None = None
) -> list[StatementResult]:
    """One StatementResult per user statement, Engram's own statements dropped."""
    timeout_s = QUERY_TIMEOUT_S if timeout_s is None else timeout_s
    max_rows = QUERY_MAX_ROWS
    mine = raw[program.lead : len(raw) - program.trail]
    out: list[StatementResult] = []
    for i, (sql, res) in enumerate(zip(statements, mine, strict=False)):
        ok = res.get("status") == "OK"
        value = res.get("result")
        rows = value if isinstance(value, list) else ([] if value is None else [value])
        rows = _json_safe(rows[:max_rows]) if ok else []
        cols: list[str] = []
        for r in rows[:50]:
            if isinstance(r, dict):
                cols += [k for k in r if k not in cols]
        error = None if ok else str(value)
        if error is not None and _TIMED_OUT in error:
            error = (
                f"stopped: the query's {timeout_s:g} s deadline ran out (console and engram_execute "
                "queries get one deadline for all their statements; narrow the query or add a LIMIT)"
            )
        out.append(
            StatementResult(
                index=i,
                sql=sql,
                ok=ok,
                rows=rows,
                columns=cols,
                row_count=len(value) if isinstance(value, list) else (0 if value is None else 1),
                truncated=isinstance(value, list) and len(value) > max_rows,
                time_ms=_parse_ms(res.get("time")),
                error=error,
            )
        )
    return out


def own_error(raw: list[dict[str, Any]], program: Program) -> str | None:
    """The first error of Engram's own statements (the schema guard, the deadline, the transaction), if any."""
    own = raw[: program.lead] + raw[len(raw) - program.trail :] if program.trail else raw[: program.lead]
    for res in own:
        if res.get("status") != "OK":
            text = str(res.get("result"))
            if "failed transaction" not in text and "aborted due to a prior error" not in text:
                return text
    return None
