"""What a Claude Code session learns, kept past its end without an LLM (issue #11, docs/claude-code.md).

The hooks report raw events; this module gives them meaning:

- a failed command (``PostToolUseFailure``) stays session evidence; when the same or a similar command later
  succeeds, the failure and what changed in between (files edited, other commands run) become ONE procedural
  project memory, "`X` failed with E; fixed by …";
- an explicit instruction in a prompt ("always …", "never …", "from now on …", "prefer …", "don't …") becomes a
  project memory tagged ``user-instruction``, apart from ordinary chatter (which is not stored at all);
- the first prompt is the session's goal (a working memory: session evidence, never promoted);
- at the end, a session summary (goal, files touched, failures fixed, memories kept) goes to project scope,
  unless the agent wrote its own with ``session_summary`` (then the agent's text is kept and the automatic facts
  are added to its metadata only).

Per-edit captures stay session evidence: they are rolled into the summary, and the seeds' promotion rule for
ordinary session memories is unchanged (``promotion.promote_session``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...api import EngramError
from ...core import MemoryCore
from ...memory import writing
from ...models import Memory, MemoryIn, MemoryPatch, PromotionReport
from ...redaction import redact_text
from ...scopes import RequestContext, Session

if TYPE_CHECKING:
    from ...storage import ScopeStore

FIX_TAG = "fix"
INSTRUCTION_TAG = "user-instruction"
SUMMARY_TAG = "session-summary"
AGENT_TAG = "agent-written"
GOAL_TAG = "session-goal"
COMMAND_TAG = "command-ok"
ERROR_TAG = "error"
FILE_TAG = "file-change"

# Why these numbers (docs/claude-code.md "How learned memories get their importance"): an instruction the user
# gave in so many words is the strongest signal a session has (importance >= 0.85 means "explicitly
# important": it promotes to the project at once); a verified fix is nearly as strong; a fix that was only a re-run may be flakiness; a summary is
# an episode, useful for a few sessions and then archived by decay (it stays listed as a recent session).
IMPORTANCE = {"instruction": 0.9, "fix": 0.8, "rerun": 0.5, "summary": 0.6, "agent_summary": 0.7}
SIMILAR_COMMAND = 0.5  # token Jaccard between two commands of the same program
MAX_GOAL_CHARS = 300
MAX_LISTED = 12
MAX_EVIDENCE_COMMANDS = 20  # successful commands kept as "what changed" while failures are open

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|;\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_INSTRUCTION = re.compile(
    r"^(?:(?:please|also|and|so|ok|okay|oh|btw|remember|note)[\s,:]+)*"
    r"(?:always|never|from now on|going forward|in future|in the future|prefer|don['’]?t|do not|avoid|"
    r"make sure (?:to|you)|remember to|stop)\b",
    re.I,
)
_ANYWHERE = re.compile(r"\b(?:from now on|going forward)\b", re.I)
_NOT_INSTRUCTION = re.compile(
    r"^(?:don['’]?t|do not)\s+(?:worry|bother|mind|know|think|understand|see)\b", re.I
)


@dataclass
class Evidence:
    """What a session did, read from its session store before the store is dropped."""

    goal: str | None = None
    files: list[tuple[str, bool]] = field(default_factory=list)  # (path, created)
    fixed: list[str] = field(default_factory=list)  # commands whose failure was fixed
    unresolved: list[str] = field(default_factory=list)  # commands still failing
    learned: list[str] = field(default_factory=list)  # project memory ids stored from this session


# ── instructions in prompts ──────────────────────────────────────────────────
def instructions_in(prompt: str) -> list[str]:
    """The sentences of a prompt that state a standing instruction or preference."""
    out: list[str] = []
    # splitlines() knows every line break (\r, U+2028, U+2029, U+0085…); other control characters are spaces.
    sentences = [
        part for line in (prompt or "").splitlines() for part in _SENTENCE_END.split(_CONTROL.sub(" ", line))
    ]
    for raw in sentences:
        s = " ".join(raw.split()).strip(" -*•>\"'")
        if not (8 <= len(s) <= 400) or s.endswith("?"):
            continue
        if _NOT_INSTRUCTION.match(s):
            continue
        if (_INSTRUCTION.match(s) or _ANYWHERE.search(s)) and s not in out:
            out.append(s if s.endswith((".", "!")) else s + ".")
    return out


# ── commands ─────────────────────────────────────────────────────────────────
def command_name(command: str) -> str:
    for word in command.strip().split():
        if "=" in word.split("/")[0] or word in ("sudo", "env", "time", "nohup", "exec", "command"):
            continue
        return word.rsplit("/", 1)[-1][:40] or "shell"
    return "shell"


def similar_commands(a: str, b: str) -> bool:
    """The same command, or the same program with mostly the same arguments (``pytest x`` / ``pytest x -x``)."""
    ta, tb = a.split(), b.split()
    if ta == tb:
        return True
    if command_name(a) != command_name(b):
        return False
    sa, sb = set(ta), set(tb)
    return len(sa & sb) / max(1, len(sa | sb)) >= SIMILAR_COMMAND


def _short(text: str, n: int) -> str:
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _session_rows(sess: Session, tag: str) -> list[dict[str, Any]]:
    """Full rows of the session's memories with this tag, oldest first."""
    keys = [k for k, lt in sess.store.summaries.items() if tag in lt.tags and lt.status != "forgotten"]
    rows = [{**r, "key": k} for k, r in sess.store.get_many(keys).items()]
    return sorted(rows, key=lambda r: (r["created_at"], r["key"]))


def _meta(sess: Session) -> dict[str, Any]:
    return {"session_key": sess.key, "claude_session_id": sess.claude_id}


def _rooted(ctx: RequestContext) -> RequestContext:
    """The request with its project, else its session's (where a project memory of the session goes)."""
    if ctx.project or ctx.session is None:
        return ctx
    return dataclasses.replace(ctx, project=ctx.session.project_root)


def on_command_ok(core: MemoryCore, command: str, ctx: RequestContext) -> Memory | None:
    """A command succeeded while the session had failures on record: the fix of a similar one, or evidence."""
    sess = ctx.session
    assert sess is not None
    command = _short(redact_text(command), 300)
    open_failures = [r for r in _session_rows(sess, ERROR_TAG) if not r["metadata"].get("fixed_by")]
    if not open_failures:
        return None
    matches = [r for r in open_failures if similar_commands(str(r["metadata"].get("command") or ""), command)]
    if not matches:
        # Not a fix itself, but maybe part of one (`pip install x` before the re-run): keep it as evidence, up to
        # a bound (a failure that is never fixed must not turn every later command into a stored row).
        since = open_failures[0]["created_at"]
        if (
            sum(1 for r in _session_rows(sess, COMMAND_TAG) if r["created_at"] >= since)
            >= MAX_EVIDENCE_COMMANDS
        ):
            return None
        writing.store_in(
            core,
            MemoryIn(
                content=f"Ran `{command}` successfully",
                memory_type="working",
                scope="session",
                tags=[COMMAND_TAG],
                importance=0.2,
                source="hook:PostToolUse",
                metadata={"command": command},
            ),
            ctx,
        )
        return None
    first = matches[0]
    since = first["created_at"]
    files: list[str] = []
    for r in _session_rows(sess, FILE_TAG):
        f = str(r["metadata"].get("file") or "")
        if r["created_at"] >= since and f and f not in files:
            files.append(f)
    commands = [
        str(r["metadata"].get("command"))
        for r in _session_rows(sess, COMMAND_TAG)
        if r["created_at"] >= since and r["metadata"].get("command")
    ]
    failed_cmd = str(first["metadata"].get("command") or "")
    error = str(first["metadata"].get("error") or "it failed")
    steps = []
    if files:
        shown = ", ".join(files[:MAX_LISTED]) + (
            f" and {len(files) - MAX_LISTED} more" if len(files) > MAX_LISTED else ""
        )
        steps.append(f"editing {shown}")
    if commands:
        steps.append("running " + ", ".join(f"`{c}`" for c in list(dict.fromkeys(commands))[:5]))
    if steps:
        how = " and ".join(steps) + (
            f"; then `{command}` succeeded" if command != failed_cmd else "; then it succeeded"
        )
        importance = IMPORTANCE["fix"]
    elif command != failed_cmd:
        how = f"running `{command}` instead"
        importance = IMPORTANCE["fix"]
    else:
        how = "nothing recorded: it passed when re-run unchanged (flaky, or something outside the session changed)"
        importance = IMPORTANCE["rerun"]
    content = f"`{failed_cmd}` failed with {error}; fixed by {how}."
    name = command_name(failed_cmd).lower()
    result = writing.store_in(
        core,
        MemoryIn(
            content=content,
            memory_type="procedural",
            scope="project",
            importance=importance,
            tags=[FIX_TAG, "procedure", name[:64]],
            source="hook:fix",
            metadata={
                **_meta(sess),
                "command": failed_cmd,
                "fixed_command": command,
                "files": files[:50],
                "failures": len(matches),
            },
        ),
        _rooted(ctx),
    )
    for r in matches:
        sess.store.update_memory(r["key"], {"metadata": {**r["metadata"], "fixed_by": result.memory.id}})
    return result.memory


# ── prompts ──────────────────────────────────────────────────────────────────
def on_prompt(core: MemoryCore, prompt: str, ctx: RequestContext) -> list[Memory]:
    """The first prompt is the goal; each explicit instruction becomes a project memory."""
    sess = ctx.session
    assert sess is not None
    prompt = redact_text(prompt)  # whole, before any cut
    if not prompt.strip():
        return []
    if not any(GOAL_TAG in lt.tags for lt in sess.store.summaries.values()):
        writing.store_in(
            core,
            MemoryIn(
                content=_short(prompt, MAX_GOAL_CHARS),
                memory_type="working",
                scope="session",
                tags=[GOAL_TAG],
                importance=0.3,
                source="hook:UserPromptSubmit",
            ),
            ctx,
        )
    rooted = _rooted(ctx)
    if rooted.project is None:
        return []
    out = []
    for sentence in instructions_in(prompt):
        result = writing.store_in(
            core,
            MemoryIn(
                content=f"User instruction: {sentence}",
                memory_type="procedural",
                scope="project",
                importance=IMPORTANCE["instruction"],
                tags=[INSTRUCTION_TAG, "preference"],
                source="hook:UserPromptSubmit",
                metadata=_meta(sess),
            ),
            rooted,
        )
        out.append(result.memory)
    return out


# ── session summaries ────────────────────────────────────────────────────────
def _summaries_of(store: ScopeStore, session_key: str, *, agent: bool | None = None) -> list[str]:
    keys = [
        k
        for k, lt in store.summaries.items()
        if SUMMARY_TAG in lt.tags
        and lt.status != "forgotten"
        and (agent is None or (AGENT_TAG in lt.tags) == agent)
    ]
    rows = store.get_many(keys)
    return [k for k in keys if k in rows and rows[k]["metadata"].get("session_key") == session_key]


def write_agent_summary(core: MemoryCore, session: str, summary: str, project: str | None) -> Memory:
    """The agent's own summary of its session (MCP ``session_summary``); a second call replaces the first."""
    if not summary.strip():
        raise EngramError("the summary is empty: say what the session did and what is left")
    sess = core.scopes.session(session, project)
    assert sess is not None
    pstore = core.project_store(project or sess.project_root)
    if pstore is None:
        raise EngramError("session summaries are kept in project scope: run inside a project or pass project")
    existing = _summaries_of(pstore, sess.key, agent=True)
    if existing:
        return writing.update(
            core, existing[0], MemoryPatch(content=summary), project=project or sess.project_root
        )
    result = writing.store(
        core,
        MemoryIn(
            content=summary,
            memory_type="episodic",
            scope="project",
            importance=IMPORTANCE["agent_summary"],
            tags=[SUMMARY_TAG, AGENT_TAG],
            source="mcp:session_summary",
            metadata={**_meta(sess), "author": "agent"},
        ),
        project=project or sess.project_root,
        session=session,
    )
    return result.memory


def collect(core: MemoryCore, sess: Session) -> Evidence:
    """Read the session's evidence (call before its store is dropped)."""
    ev = Evidence()
    goals = _session_rows(sess, GOAL_TAG)
    if goals:
        ev.goal = goals[0]["content"]
    for r in _session_rows(sess, FILE_TAG):
        f = str(r["metadata"].get("file") or "")
        if f and f not in [x for x, _ in ev.files]:
            ev.files.append((f, bool(r["metadata"].get("new_file"))))
    for r in _session_rows(sess, ERROR_TAG):
        cmd = str(r["metadata"].get("command") or "")
        if not cmd:
            continue
        target = ev.fixed if r["metadata"].get("fixed_by") else ev.unresolved
        if cmd not in target:
            target.append(cmd)
    ev.unresolved = [c for c in ev.unresolved if c not in ev.fixed]
    pstore = core.project_store(sess.project_root) if sess.project_root else None
    if pstore is not None:
        keys = [
            k
            for k, lt in pstore.summaries.items()
            if lt.created_at >= sess.started_at and (FIX_TAG in lt.tags or INSTRUCTION_TAG in lt.tags)
        ]
        rows = pstore.get_many(keys)
        ev.learned = [k for k in keys if k in rows and rows[k]["metadata"].get("session_key") == sess.key]
    return ev


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def summary_text(sess: Session, ev: Evidence, report: PromotionReport) -> str | None:
    """The automatic summary; None for a session that did nothing worth a line."""
    kept = len(report.promoted) + len(report.merged) + len(ev.learned)
    if not (ev.goal or ev.files or ev.fixed or ev.unresolved or kept):
        return None
    parts = [f"Session of {sess.started_at.date().isoformat()}"]
    if ev.goal:
        parts.append(f'goal: "{ev.goal}"')
    if ev.files:
        parts.append("files touched: " + _listing([f + (" (new)" if new else "") for f, new in ev.files]))
    if ev.fixed:
        parts.append("failures fixed: " + _listing([f"`{_short(c, 80)}`" for c in ev.fixed]))
    if ev.unresolved:
        parts.append("still failing at the end: " + _listing([f"`{_short(c, 80)}`" for c in ev.unresolved]))
    parts.append(
        f"memories kept: {kept} ({len(ev.learned)} learned from events, "
        f"{len(report.promoted) + len(report.merged)} promoted from the session)"
    )
    return "; ".join(parts) + "."


def store_summary(core: MemoryCore, sess: Session, ev: Evidence, report: PromotionReport) -> str | None:
    """After the promotion pass: the automatic summary, unless the agent wrote one (then its facts go to metadata).

    Returns the summary's memory id, or None when nothing was stored."""
    pstore = core.project_store(sess.project_root) if sess.project_root else None
    if pstore is None:
        return None
    facts = {
        "files": [f for f, _ in ev.files][:50],
        "failures_fixed": ev.fixed[:20],
        "still_failing": ev.unresolved[:20],
        "learned": ev.learned[:50],
        "promoted": len(report.promoted) + len(report.merged),
    }
    agent = _summaries_of(pstore, sess.key, agent=True)
    if agent:
        row = pstore.get(agent[0]) or {}
        pstore.update_memory(agent[0], {"metadata": {**row.get("metadata", {}), "auto": facts}})
        return agent[0]
    text = summary_text(sess, ev, report)
    if text is None:
        return None
    result = writing.store(
        core,
        MemoryIn(
            content=text,
            memory_type="episodic",
            scope="project",
            importance=IMPORTANCE["summary"],
            tags=[SUMMARY_TAG],
            source="hook:SessionEnd",
            metadata={**_meta(sess), "author": "engram", "auto": facts},
        ),
        project=sess.project_root,
    )
    return result.memory.id


def clear_hook_state(home: Path, claude_id: str | None) -> None:
    """The hooks' "this session has a failure on record" marker (hooks/engram_hook.py) and their order lock
    (hooks/run_hook.py): the SessionEnd hook removes the marker, and any end (stale-session recovery after a crash
    too) removes both, so they do not pile up."""
    if not claude_id or "/" in claude_id or claude_id.startswith("."):
        return
    for name in (claude_id, claude_id + ".lock"):
        with contextlib.suppress(OSError):
            (home / "hookstate" / name).unlink()


def checkpoint(core: MemoryCore, ctx: RequestContext, trigger: str) -> Memory | None:
    """PreCompact: a session note of what the session did so far, for the conversation after compaction."""
    sess = ctx.session
    assert sess is not None
    ev = collect(core, sess)
    failures = len(ev.fixed) + len(ev.unresolved)
    if not ev.files and not failures:
        return None
    files = [f for f, _ in ev.files]
    text = (
        f"Before context compaction ({trigger}): modified {len(files)} file(s)"
        f"{': ' + _listing(files) if files else ''}; {failures} failed command(s)"
        f"{f' ({len(ev.fixed)} fixed)' if ev.fixed else ''}."
    )
    result = writing.store_in(
        core,
        MemoryIn(
            content=text,
            memory_type="episodic",
            scope="session",
            tags=["compaction"],
            importance=0.4,
            source="hook:PreCompact",
        ),
        ctx,
    )
    return result.memory
