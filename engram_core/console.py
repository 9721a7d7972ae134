"""The SurrealQL console (TUI) and ``engram_execute`` (MCP): a person's or the agent's own query, behind the
validator, an engine role and one deadline (guarded_query.py)."""

from __future__ import annotations

import re
import time
from typing import Literal

from . import guarded_query
from .api import api
from .core import MemoryCore
from .models import QueryResult, QueryViolation, Scope, WritePreview
from .redaction import redact, redact_text
from .storage import EngineRefused
from .vocabulary import ScopeName


@api
def run_query(
    core: MemoryCore,
    surql: str,
    scope: ScopeName = "project",
    allow_writes: bool = False,
    project: str | None = None,
    session: str | None = None,
) -> QueryResult:
    """Run SurrealQL against one scope's database, behind the validator and an engine role.

    Defence in depth: the validator refuses DDL, USE, INFO, transaction control, custom/network functions
    and (unless allow_writes) any write; what it lets through runs, comments removed, as a database-level
    VIEWER (EDITOR with writes) in an engine session of its own, pinned to that one database, under one
    deadline for the whole query (see guarded_query); writes run in a transaction that rolls back if the
    schema changed. At most QUERY_MAX_ROWS rows per statement come back. The engine part runs outside
    ``api_lock``, so a long query never holds the daemon's other clients.
    """
    from .validator import validate  # tree-sitter loads with the first query, not with every process

    role: Literal["VIEWER", "EDITOR"] = "EDITOR" if allow_writes else "VIEWER"
    with core.api_lock:
        store = core.scopes.target(Scope(scope), project, session)
        tables = list((store.q1("INFO FOR DB") or {}).get("tables", {})) if allow_writes else []
    verdict = validate(surql, allow_writes=allow_writes)
    violations = [
        QueryViolation(
            statement_index=v.statement_index, statement=v.statement, rule=v.rule, message=v.message
        )
        for v in verdict.violations
    ]
    if not verdict.ok:
        return QueryResult(
            ok=False,
            scope=store.scope,
            database=store.database,
            role=role,
            statements=[],
            violations=violations,
            message=violations[0].message if violations else "refused",
        )
    refusal = _memory_rule(verdict.statements, allow_writes)
    if refusal is None and allow_writes:
        refusal = _secret_in_write(verdict.statements)
    if refusal is not None:
        return QueryResult(
            ok=False,
            scope=store.scope,
            database=store.database,
            role=role,
            statements=[],
            violations=[refusal],
            message=refusal.message,
        )
    program = guarded_query.build(
        verdict.executable, allow_writes=allow_writes, tables=tables, timeout_s=core.settings.query_timeout_s
    )
    t0 = time.perf_counter()
    try:
        store.drain()  # held recall bookkeeping first: the console reads what recall did
        raw = store.conn.run_as(store.namespace, store.database, role, program.text)
    except EngineRefused as exc:
        return QueryResult(
            ok=False,
            scope=store.scope,
            database=store.database,
            role=role,
            statements=[],
            violations=violations,
            total_ms=(time.perf_counter() - t0) * 1000,
            message=guarded_query.refusal(str(exc), program, verdict.statements),
        )
    except Exception as exc:  # e.g. a value the SDK cannot carry back (a regex)
        return QueryResult(
            ok=False,
            scope=store.scope,
            database=store.database,
            role=role,
            statements=[],
            violations=violations,
            total_ms=(time.perf_counter() - t0) * 1000,
            message=f"the engine ran the query but its answer could not be read: {exc}",
        )
    total = (time.perf_counter() - t0) * 1000
    results = guarded_query.results(raw, program, verdict.statements, timeout_s=core.settings.query_timeout_s)
    own = guarded_query.own_error(raw, program)
    if allow_writes:
        with core.api_lock:
            core.reload_params()
            for st in (s for s in core.scopes.open_stores() if s is store):
                st.reload_mirror()
    ok = own is None and all(r.ok for r in results)
    errors = [r.error or "" for r in results if not r.ok]
    # Statements a failed transaction skipped say only that: name the one that failed it.
    message = "" if ok else own or next((e for e in errors if "not executed due to" not in e), errors[0])
    return QueryResult(
        ok=ok,
        scope=store.scope,
        database=store.database,
        role=role,
        statements=results,
        total_ms=total,
        message=message,
    )


# A DELETE's target runs to its first clause (or the end of the statement or block that holds it).
_DELETE = re.compile(r"\bDELETE\b(?:\s+FROM\b)?(?:\s+ONLY\b)?", re.I)
_DELETE_END = re.compile(r"\b(?:WHERE|RETURN|TIMEOUT|PARALLEL|EXPLAIN|WITH)\b|[;)}]|$", re.I)
_PLAIN_TARGETS = re.compile(r"[A-Za-z_]\w*(?::\w+)?(?:\s*,\s*[A-Za-z_]\w*(?::\w+)?)*")
_MATCHES = re.compile(r"@[\w,]*@")
_VECTOR_FN = re.compile(r"\bvector::|<\|[^|]*\|>", re.I)  # a vector function or the kNN operator
_EMBEDDING = re.compile(r"\bembedding\b", re.I)
SOFT_DELETE = (
    "memories are never deleted by a query: Engram archives or forgets them, keeping their history, so "
    "that `engram restore` can bring one back. Archive with UPDATE memory:… SET status = "
    "'archived' (or `engram forget ID`); clear one for good with `engram forget ID --erase`."
)


def _memory_rule(statements: list[str], allow_writes: bool) -> QueryViolation | None:
    """What the console refuses about memories, with the reason, instead of an answer that would mislead: a
    DELETE of memory rows (the lifecycle soft-deletes), a full-text match (no store has a FULLTEXT index: the
    engine answers nothing at all), a vector function on ``embedding`` (stored as float16 bytes)."""
    from .validator import code_view

    for i, stmt in enumerate(statements):
        view = code_view(stmt)
        if _MATCHES.search(view):
            return QueryViolation(
                statement_index=i,
                statement=stmt[:200],
                rule="full-text",
                message=f"statement {i + 1} uses a full-text match (@@), which needs a FULLTEXT index, and Engram's "
                "stores have none (recall searches its own index): the engine would answer nothing. Use "
                "recall (`engram recall`, recall_memories), or string::contains(content, '…') here.",
            )
        if _VECTOR_FN.search(view) and _EMBEDDING.search(view):
            return QueryViolation(
                statement_index=i,
                statement=stmt[:200],
                rule="vector-bytes",
                message=f"statement {i + 1} applies a vector function (or kNN) to `embedding`, which each store keeps as "
                "float16 bytes (schema 006) that the engine's vector functions cannot read. Similarity "
                "search is recall's (`engram recall`, recall_memories).",
            )
        if not allow_writes:
            continue
        for m in _DELETE.finditer(view):
            rest = view[m.end() :]
            end = _DELETE_END.search(rest)
            n = end.start() if end else len(rest)
            target, written = rest[:n].strip(), stmt[m.end() : m.end() + n].strip()
            tables = [t.split(":")[0].strip().lower() for t in target.split(",")]
            if target != written or not _PLAIN_TARGETS.fullmatch(target) or "memory" in tables:
                what = (
                    "deletes memory rows"
                    if "memory" in tables
                    else "deletes rows Engram cannot tell are not memories (name the table: DELETE entity WHERE …)"
                )
                return QueryViolation(
                    statement_index=i,
                    statement=stmt[:200],
                    rule="memory-delete",
                    message=f"statement {i + 1} {what}; {SOFT_DELETE}",
                )
    return None


@api
def preview_write(
    core: MemoryCore,
    surql: str,
    scope: ScopeName = "project",
    project: str | None = None,
    session: str | None = None,
) -> list[WritePreview]:
    """Before a console write runs: each statement that changes existing rows (UPDATE, UPSERT, DELETE), its
    target, whether a WHERE bounds it, and how many rows it would touch now. The count is a read-only query
    (``SELECT count() FROM target [WHERE condition]``) through ``run_query``: the validator and a VIEWER role,
    so a statement misread here can only fail to count, never write."""
    from .validator import write_shapes

    out: list[WritePreview] = []
    for shape in write_shapes(surql):
        record = ":" in shape.target  # one record (memory:abc), not a whole table
        count = (
            f"SELECT count() FROM {shape.target}"
            + (f" WHERE {shape.where}" if shape.where else "")
            + " GROUP ALL"
        )
        result = run_query(core, count, scope=scope, project=project, session=session)
        rows: int | None = None
        error: str | None = None
        if result.ok and result.statements:
            found = result.statements[0].rows
            rows = int(found[0].get("count", 0)) if found and isinstance(found[0], dict) else 0
        else:
            error = result.message or "the rows could not be counted"
        out.append(
            WritePreview(
                index=shape.index,
                statement=shape.statement,
                verb=shape.verb,
                target=shape.target,
                bounded=record or shape.where is not None,
                rows=rows,
                error=error,
            )
        )
    return out


def _secret_in_write(statements: list[str]) -> QueryViolation | None:
    """Console writes are SurrealQL the engine evaluates, so their values cannot be redacted on the way in
    without changing the query: a write whose text holds a secret is refused whole, and nothing runs."""
    for i, stmt in enumerate(statements):
        found = redact(stmt)[1]
        if found:
            kinds = ", ".join(sorted({r.kind for r in found}))
            return QueryViolation(
                statement_index=i,
                statement=redact_text(stmt),
                rule="secret-in-write",
                message=f"statement {i + 1} would write what looks like a secret ({kinds}); Engram never stores "
                "secrets: take it out of the query (reads may mention one)",
            )
    return None
