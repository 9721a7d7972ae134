"""Sync between machines over git (issue #32; docs/sync.md is the format and the rules).

The sync branch holds JSON-lines change files, each named by the hash of its content and never edited, so two
machines that both wrote only ever add different files: git merges them without a conflict. A record is one
memory's whole state (redacted again here) at one time; applying one is idempotent. Which version of a memory
wins: an erased one always (erasure is final); else the newer ``updated_at``, ties broken by machine id. The
losing text is kept in the winner's ``metadata.sync_history``. A compaction rewrites the branch as one snapshot
of the current state on a new orphan commit, so erased texts leave the remote's history.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..api import EngramError
from ..config import ensure_private_child, ensure_private_dir, restrict_tree
from ..core import MemoryCore
from ..identity import ProjectIdentity, identity_of
from ..ids import ulid
from ..memory.promotion import drop_fingerprint
from ..models import MemoryRecord, Scope, SyncChannel, SyncReport, SyncState
from ..redaction import redact_value
from ..retrieval.embeddings import try_embed
from ..scopes import ADOPTED_INTO
from ..storage import ScopeStore, content_hash, key_of
from .gitrepo import BRANCH, GitError, Offline, Repo, prune_bare

log = logging.getLogger("engram.sync")

FORMAT = 1
SHARED_TAG = "shared"  # a memory marked for the team remote
PRIVATE_TAGS = frozenset({"private", "no-sync"})
CHANGE_FILE_RECORDS = 5_000  # records a change file holds at most
HISTORY_KEEP = 10  # losing versions kept per memory
PROGRESS_EVERY = 1000  # records between two progress notes
PROGRESS_FILE = "progress"
FETCH_BATCH = 1000  # changed rows read per request
# Per-machine counters and derived values: they change on every recall and never travel.
LOCAL_FIELDS = frozenset(
    {"access_count", "last_accessed_at", "relevance_score", "memory_strength", "embedding"}
)
# What makes a new version. Recall's own effects (an access, the importance nudge and the created -> active step of
# a first retrieval) leave updated_at alone and stay on the machine where they happened; a person's change moves
# updated_at and travels with the whole record.
HASHED = (
    "content",
    "content_hash",
    "memory_type",
    "status",
    "tags",
    "confidence",
    "outcome_impact",
    "user_feedback",
    "half_life_days",
    "pinned",
    "source",
    "promoted_from",
    "consolidated_into",
    "invalid_at",
    "updated_at",
    "metadata",
)


# ── state ────────────────────────────────────────────────────
class State:
    """One channel's state on this machine: ``$ENGRAM_HOME/sync/<channel>/state.json`` (0600)."""

    def __init__(self, home: Path, channel: SyncChannel) -> None:
        ensure_private_dir(home)
        self.dir = ensure_private_child(ensure_private_child(home, "sync"), channel)
        self.file = self.dir / "state.json"
        self.channel = channel
        data: dict[str, Any] = json.loads(self.file.read_text()) if self.file.exists() else {}
        self.remote: str | None = data.get("remote")
        self.machine: str = data.get("machine") or ulid()
        self.epoch: str | None = data.get("epoch")
        self.last_sync: str | None = data.get("last_sync")
        self.exported: dict[str, str] = data.get("exported", {})  # "store/id" -> hash written or received
        # the version both sides last agreed on (received, or pushed and accepted): a local hash that differs
        # from it is a change made here, and an incoming one then is a conflict
        self.base: dict[str, str] = data.get("base", {})
        self.unconfirmed: dict[str, str] = data.get("unconfirmed", {})  # written, not yet pushed
        self.seen: dict[str, str] = data.get("seen", {})  # each row's fingerprint when it was last hashed
        self.applied: set[str] = set(data.get("applied", []))  # change files read here
        self.seq: int = data.get("seq", 0)

    @property
    def repo(self) -> Repo:
        return Repo(self.dir / "repo", self.machine)

    def progress(self, text: str) -> None:
        """Where a long run is, for `engram sync` to show while it waits (the request answers only at the end)."""
        tmp = self.dir / "progress.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.dir / PROGRESS_FILE)

    def save(self) -> None:
        data = {
            "format": FORMAT,
            "remote": self.remote,
            "machine": self.machine,
            "epoch": self.epoch,
            "last_sync": self.last_sync,
            "seq": self.seq,
            "applied": sorted(self.applied),
            "exported": self.exported,
            "base": self.base,
            "unconfirmed": self.unconfirmed,
            "seen": self.seen,
        }
        tmp = self.file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.file)


# ── records ──────────────────────────────────────────────────
def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso(v) for v in value]
    return value


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    """The travelling part of a stored row, redacted again (a rule added since it was stored applies)."""
    fields = {
        k: v
        for k, v in row.items()
        if k in MemoryRecord.model_fields and k not in LOCAL_FIELDS and v is not None
    }
    fields["id"] = key_of(fields["id"])
    for k in ("scope", "database", "project_path", "engram_export"):
        fields.pop(k, None)
    out: dict[str, Any] = _iso(redact_value(fields))
    if out.get("content") is not None and out.get("status") != "forgotten":
        out["content_hash"] = content_hash(out["content"])
    return out


def version_hash(fields: dict[str, Any]) -> str:
    body = {k: fields.get(k) for k in HASHED}
    if body["status"] == "created":
        body["status"] = "active"
    text = json.dumps(_iso(body), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _vector(row: dict[str, Any]) -> str | None:
    vec = row.get("embedding")
    if vec is None:
        return None
    return base64.b64encode(np.asarray(vec, dtype="<f2").tobytes()).decode()


def _unvector(text: str | None) -> list[float] | None:
    if not text:
        return None
    return [float(x) for x in np.frombuffer(base64.b64decode(text), dtype="<f2")]


# ── which stores and memories travel ─────────────────────────
def _opted_out(home: Path) -> set[str]:
    folder = home / "optout"
    return set(os.listdir(folder)) if folder.is_dir() else set()


def _stores(core: MemoryCore, channel: SyncChannel) -> list[tuple[str, ScopeStore, ProjectIdentity | None]]:
    """(store name on the branch, store, identity): the user store (personal channel only) and every project
    keyed by its repository. A plain folder's project has no name another machine would share: it stays here."""
    core.scopes.open_all_projects()
    projects = core.home / "projects"
    if projects.is_dir():
        for entry in sorted(projects.iterdir()):
            if (
                entry.name.startswith("p_")
                and (entry / "project.db").exists()
                and not (entry / ADOPTED_INTO).exists()
            ):
                core.scopes.project_store_by_key(entry.name)
    out: list[tuple[str, ScopeStore, ProjectIdentity | None]] = []
    if channel == "personal":
        out.append(("user", core.user, None))
    for root, store in core.scopes.open_projects():
        ident = identity_of(root) if root else None
        if ident is not None and (not ident.shared or ident.key != store.database):
            continue  # a folder's store, or an old store of this repository whose memories moved on
        where = core.scopes.store_dir_of(store)
        if where is not None and (where / ADOPTED_INTO).exists():
            continue
        if ident is not None and core.settings_for(root).disabled:
            continue  # the project opted out of Engram: nothing of it leaves the machine
        out.append((store.database, store, ident))
    return out


def _travels(row: dict[str, Any], channel: SyncChannel, optout: set[str]) -> bool:
    tags = set(row.get("tags") or [])
    if tags & PRIVATE_TAGS or (row.get("metadata") or {}).get("sync") is False:
        return False
    if row.get("memory_type") == "working":  # a session's scratch (the raw prompt among it) stays
        return False
    meta = row.get("metadata") or {}
    if optout and ({row.get("session_id"), meta.get("session_key"), meta.get("claude_session_id")} & optout):
        return False
    return channel == "personal" or SHARED_TAG in tags


# ── export ───────────────────────────────────────────────────
def _changes(core: MemoryCore, state: State, report: SyncReport) -> Iterator[dict[str, Any]]:
    optout = _opted_out(core.home)
    model = getattr(core.embedder, "model_id", None) if core.embedder is not None else None
    for name, store, ident in _stores(core, state.channel):
        project = (
            {"kind": ident.kind, "source": ident.source, "name": Path(ident.root).name} if ident else None
        )
        state.progress(f"looking for changes in {name}")
        marks = {f"{name}/{key}": _mark(mark) for key, mark in store.memories.change_marks().items()}
        todo = [slot.partition("/")[2] for slot, mark in marks.items() if state.seen.get(slot) != mark]
        for start in range(0, len(todo), FETCH_BATCH):
            state.progress(f"reading {name}: {start:,} of {len(todo):,} changed memories")
            for row in store.memories.export_rows_of(todo[start : start + FETCH_BATCH]):
                yield from _change(row, name, project, model, marks, optout, state, report)


def _change(
    row: dict[str, Any],
    name: str,
    project: dict[str, Any] | None,
    model: str | None,
    marks: dict[str, str],
    optout: set[str],
    state: State,
    report: SyncReport,
) -> Iterator[dict[str, Any]]:
    """The record a row that moved since the last look needs sending (none when its version is the one sent)."""
    key = key_of(row["id"])
    slot = f"{name}/{key}"
    state.seen[slot] = marks.get(slot, "")  # from now on unchanged rows are passed over without being read
    if not _travels(row, state.channel, optout):
        if state.channel == "team" and slot in state.exported:
            # unshared (or made private): it leaves the team; teammates drop their copy
            yield {"v": FORMAT, "op": "withdraw", "store": name, "id": key, "machine": state.machine}
            state.exported.pop(slot)
        else:
            report.excluded += 1
        return
    fields = _outgoing(row, state)
    h = version_hash(fields)
    if state.exported.get(slot) == h:
        return
    vector = _vector(row) if fields.get("content") == row.get("content") else None
    state.exported[slot] = h
    state.unconfirmed[slot] = h
    yield {
        "v": FORMAT,
        "op": "put",
        "store": name,
        "project": project,
        "id": key,
        "machine": state.machine,
        "at": fields["updated_at"],
        "hash": h,
        "model": model if vector else None,
        "vector": vector,
        "record": fields,
    }


def _mark(mark: str) -> str:
    """A row's change mark (ScopeStore.change_marks), the first retrieval's created -> active step left out: recall's
    own effects stay on the machine where they happened."""
    return mark.replace("\x1fcreated\x1f", "\x1factive\x1f", 1)


def _outgoing(row: dict[str, Any], state: State) -> dict[str, Any]:
    """A row as this channel sends it: cleaned and redacted; on the team channel, with its author."""
    fields = _clean(row)
    if state.channel == "team":  # teammates see whose memory it is
        meta = fields.get("metadata") or {}
        fields["metadata"] = {**meta, "shared_by": meta.get("shared_by") or _author(state)}
    return fields


def _author(state: State) -> dict[str, str]:
    return {"user": getpass.getuser(), "host": socket.gethostname(), "machine": state.machine}


def _write_files(state: State, records: Iterator[dict[str, Any]], report: SyncReport) -> int:
    """Change files of the records, each named by the hash of its bytes (content-addressed, never edited)."""
    folder = state.repo.path / "changes" / state.machine
    written = 0
    batch: list[str] = []

    def flush() -> None:
        nonlocal written
        if not batch:
            return
        body = "".join(batch).encode()
        state.seq += 1
        name = f"{state.seq:08d}-{hashlib.sha256(body).hexdigest()[:20]}.jsonl"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(body)
        state.applied.add(f"changes/{state.machine}/{name}")  # our own: never read back
        written += 1
        batch.clear()

    for rec in records:
        batch.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        report.pushed += 1
        if len(batch) >= CHANGE_FILE_RECORDS:
            flush()
    flush()
    return written


# ── import ───────────────────────────────────────────────────
def _new_files(state: State) -> list[Path]:
    root = state.repo.path
    out = []
    for sub in ("snapshot", "changes"):
        base = root / sub
        if base.is_dir():
            for path in sorted(base.rglob("*.jsonl")):
                rel = path.relative_to(root).as_posix()
                if rel not in state.applied:
                    out.append(path)
    return out


def _newer(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """The stated rule: the later updated_at wins; at the same instant, the larger machine id."""
    return (_when(a[0]), a[1]) > (_when(b[0]), b[1])


def _when(text: Any) -> datetime:
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _winners(files: list[Path], report: SyncReport) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest incoming record of each memory (several machines may have sent one)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for path in files:
        # "\n" only: str.splitlines() also breaks at U+2028, U+2029 and other characters a memory may hold.
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                slot = (str(rec["store"]), str(rec["id"]))
                if rec.get("v") != FORMAT or rec.get("op") not in ("put", "withdraw"):
                    raise ValueError("unknown record")
            except (ValueError, KeyError, TypeError):
                report.rejected += 1
                continue
            old = best.get(slot)
            if old is None or rec["op"] == "withdraw" or old["op"] == "withdraw":
                best[slot] = rec if old is None or rec["op"] == "withdraw" else old
                continue
            if rec["record"].get("status") == "forgotten" or (
                old["record"].get("status") != "forgotten"
                and _newer((rec["at"], rec["machine"]), (old["at"], old["machine"]))
            ):
                best[slot] = rec
    return best


def _summary(fields: dict[str, Any], machine: str) -> dict[str, Any]:
    return {
        "content": fields.get("content"),
        "status": fields.get("status"),
        "updated_at": _iso(fields.get("updated_at")),
        "machine": machine,
        "hash": version_hash(fields),
    }


def _with_history(meta: dict[str, Any], losers: list[dict[str, Any]]) -> dict[str, Any]:
    if not losers:
        return meta
    history = list(meta.get("sync_history") or [])
    seen = {h.get("hash") for h in history}
    history += [h for h in losers if h["hash"] not in seen]
    return {**meta, "sync_history": history[-HISTORY_KEEP:]}


def _erase(core: MemoryCore, store: ScopeStore, key: str, reason: str) -> None:
    """The local copy of a memory erased (or withdrawn) elsewhere: erased here the way `forget --erase` does."""
    words = store.mirror.unique_words(key)
    light = store.summaries.get(key)
    store.erase_memory(key, reason)
    if light is not None:
        drop_fingerprint(core, store, light.content_hash)
    store.conn.erased = True
    for log_store in core.scopes.open_stores():
        if log_store.scope != Scope.session:
            log_store.retrieval_log.scrub([key], words)


def _target(core: MemoryCore, name: str) -> ScopeStore:
    if name == "user":
        return core.user
    if not (name.startswith("p_") and len(name) == 14 and name[2:].isalnum()):
        raise ValueError(f"unknown store {name!r}")
    return core.scopes.project_store_by_key(name)


def _prepared(
    core: MemoryCore, store: ScopeStore, rec: dict[str, Any], local: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """(id, fields) of an incoming record as `ScopeStore.restore_row` takes them, checked like an import."""
    fields = dict(rec["record"])
    key = fields.pop("id")
    fields.setdefault("last_accessed_at", fields.get("created_at"))
    if local is not None:  # this machine's counters stay its own
        fields["access_count"] = local.get("access_count", 0)
        fields["last_accessed_at"] = local.get("last_accessed_at") or fields["last_accessed_at"]
    fields = redact_value(fields)  # a record written by hand or an older Engram must not bring a secret in
    checked = MemoryRecord(**{**fields, "id": key, "scope": store.scope})
    out = checked.model_dump(exclude={"engram_export", "id", "database", "project_path"}, exclude_none=True)
    if out.get("status") != "forgotten":
        vec = _unvector(rec.get("vector"))
        if vec is None or rec.get("model") != getattr(core.embedder, "model_id", None):
            vecs, _ = try_embed(core.embedder, [out["content"]])
            vec = None if vecs is None else [float(x) for x in vecs[0]]
        if vec is not None:
            out["embedding"] = vec
    return key, out


def _restore(core: MemoryCore, store: ScopeStore, rec: dict[str, Any], local: dict[str, Any] | None) -> None:
    store.memories.restore_row(*_prepared(core, store, rec, local))


RESTORE_BATCH = 250  # new memories written per request


def _apply(core: MemoryCore, state: State, files: list[Path], report: SyncReport) -> None:
    winners = _winners(files, report)
    by_store: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for (name, key), rec in winners.items():
        by_store.setdefault(name, []).append((key, rec))
    done = 0
    for name, items in by_store.items():
        try:
            if state.channel == "team" and name == "user":
                raise ValueError("the team remote carries project memories only")
            store = _target(core, name)
        except (ValueError, EngramError) as exc:
            log.warning("sync: %d record(s) for store %s left out: %s", len(items), name, exc)
            report.rejected += len(items)
            continue
        batch: list[tuple[str, dict[str, Any]]] = []
        for start in range(0, len(items), RESTORE_BATCH):
            chunk = items[start : start + RESTORE_BATCH]
            state.progress(f"applying {done:,} of {len(winners):,} records from other machines")
            locals_ = store.get_many([key for key, _ in chunk])
            for key, rec in chunk:
                _apply_one(core, state, store, name, key, rec, locals_.get(key), batch, report)
            store.memories.restore_rows(batch)
            batch.clear()
            done += len(chunk)
    for path in files:
        state.applied.add(path.relative_to(state.repo.path).as_posix())


def _team_may_touch(local: dict[str, Any] | None, rec: dict[str, Any], state: State) -> bool:
    """A teammate's record may add a memory, or change one that is shared; never one this machine keeps to itself
    (a forged id must not overwrite or erase a private memory). Only its author's withdraw erases a copy."""
    if local is None:
        return bool(rec["op"] == "put")
    author = ((local.get("metadata") or {}).get("shared_by") or {}).get("machine")
    if rec["op"] == "withdraw":
        return author is not None and author != state.machine and author == rec.get("machine")
    return SHARED_TAG in (local.get("tags") or []) or author is not None


def _apply_one(
    core: MemoryCore,
    state: State,
    store: ScopeStore,
    name: str,
    key: str,
    rec: dict[str, Any],
    local: dict[str, Any] | None,
    batch: list[tuple[str, dict[str, Any]]],
    report: SyncReport,
) -> None:
    """One memory's newest incoming record against the local copy (the rules: module docstring). A memory new
    here joins ``batch``, written with the others of its chunk in one request."""
    slot = f"{name}/{key}"
    if state.channel == "team" and not _team_may_touch(local, rec, state):
        log.warning(
            "sync: team record for %s left out: it would change a memory this machine did not share", slot
        )
        report.rejected += 1
        return
    if rec["op"] == "withdraw":
        if local is not None and local.get("status") != "forgotten":
            _erase(core, store, key, "unshared by its author")
            report.erased += 1
        state.exported.pop(slot, None)
        return
    incoming = rec["record"]
    try:
        if local is None:
            batch.append(_prepared(core, store, rec, None))
            report.pulled += 1
        else:
            mine = _outgoing(local, state)
            mine_hash = version_hash(mine)
            if mine_hash == rec["hash"]:
                report.unchanged += 1
            elif mine.get("status") == "forgotten":
                pass  # erased here: nothing brings it back
            elif incoming.get("status") == "forgotten":
                _erase(core, store, key, "erased on another machine")
                _restore(core, store, rec, local)
                report.erased += 1
            else:
                changed_here = slot in state.base and mine_hash != state.base[slot]
                report.conflicts += changed_here
                if _newer((rec["at"], rec["machine"]), (mine["updated_at"], state.machine)):
                    if changed_here and mine.get("content") != incoming.get("content"):
                        # the losing text goes into the winner's history, and the winner is made a hair newer
                        # so that this merged version wins on the other side too
                        at = _when(rec["at"]) + timedelta(microseconds=1)
                        history = _with_history(
                            incoming.get("metadata") or {}, [_summary(mine, state.machine)]
                        )
                        rec = {
                            **rec,
                            "record": {**incoming, "updated_at": at.isoformat(), "metadata": history},
                        }
                    _restore(core, store, rec, local)
                    report.pulled += 1
                elif changed_here and mine.get("content") != incoming.get("content"):
                    # ours is newer: it stays, theirs goes into its history (and the next push)
                    meta = _with_history(mine.get("metadata") or {}, [_summary(incoming, rec["machine"])])
                    store.update_memory(key, {"metadata": meta})
    except (ValidationError, EngramError, ValueError, TypeError) as exc:
        log.warning("sync: record for %s left out: %s", slot, exc)
        report.rejected += 1
        return
    # what the remote holds now; a local version that differs (ours won, or a merged history) is pushed
    state.exported[slot] = state.base[slot] = rec["hash"]


# ── the runs ─────────────────────────────────────────────────
def init(core: MemoryCore, remote: str, channel: SyncChannel) -> SyncReport:
    remote = remote.strip()
    if not remote:
        raise EngramError("give the remote: a git URL or the path to a bare repository")
    looks_local = remote.startswith(("/", "~", ".", "file://"))
    if looks_local:
        path = Path(remote.removeprefix("file://")).expanduser()
        if not path.is_dir():
            raise EngramError(
                f"{remote} is not a directory: create the bare repository first (git init --bare {remote})"
            )
        remote = str(path.resolve())
    state = State(core.home, channel)
    if state.remote is not None:
        raise EngramError(
            f"the {channel} sync of this data root already goes to {state.remote} (once per data root; "
            f"remove {state.dir} to start over)"
        )
    if state.repo.path.exists():  # left by an init that stopped before it was recorded
        shutil.rmtree(state.repo.path)
    state.remote = remote
    state.repo.init(remote)
    state.save()
    report = run(core, channel)
    report.steps.insert(0, f"set up {channel} sync to {remote} as machine {state.machine}")
    return report


def _adopt_remote(state: State, report: SyncReport) -> None:
    """Bring the clone up to the remote's branch: a merge (files never collide), or after a compaction
    elsewhere (another epoch) a reset to the new history, the old one pruned from this clone too."""
    repo = state.repo
    theirs = repo.show(f"origin/{BRANCH}", "EPOCH")
    theirs = theirs.strip() if theirs else None
    if not repo.has_head():
        repo.git("reset", "-q", "--hard", f"origin/{BRANCH}")
    elif theirs != state.epoch:
        repo.git("reset", "-q", "--hard", f"origin/{BRANCH}")
        repo.prune_local()
        state.applied = set()
        # rebuilt from the snapshot as it is applied; what differs is pushed again
        state.exported, state.base, state.unconfirmed, state.seen = {}, {}, {}, {}
        report.steps.append(f"the remote was compacted elsewhere (epoch {theirs}): took its new history")
    else:
        repo.git("merge", "-q", "--no-edit", f"origin/{BRANCH}")
    state.epoch = theirs


_running: dict[str, threading.Lock] = {"personal": threading.Lock(), "team": threading.Lock()}


def run(core: MemoryCore, channel: SyncChannel, *, compact: bool = False) -> SyncReport:
    """One sync of ``channel``. Runs of one channel take turns (one git clone); the daemon's request lock is held
    only while the stores are read or written, never while git talks to the remote."""
    with _running[channel]:
        return _run(core, channel, compact=compact)


def _run(core: MemoryCore, channel: SyncChannel, *, compact: bool = False) -> SyncReport:
    started = time.monotonic()
    state = State(core.home, channel)
    if state.remote is None:
        raise EngramError(
            f"no {channel} sync is set up for this data root: run `engram sync init "
            f"{'--team ' if channel == 'team' else ''}REMOTE` once (a git URL or a bare repository's path)"
        )
    report = SyncReport(channel=channel, remote=state.remote, machine=state.machine)
    repo = state.repo
    with core.api_lock, core.lock:
        files = _write_files(state, _changes(core, state, report), report)
    if files:
        repo.commit_all(f"engram: {report.pushed} change(s) from {state.machine}")
        report.change_files = files
        report.steps.append(f"wrote {report.pushed} change(s) in {files} file(s)")
    state.save()
    state.progress("fetching from the remote")
    try:
        exists = repo.fetch()
    except Offline as exc:
        report.offline = True
        report.queued_files = repo.ahead()
        report.steps.append(f"offline ({exc}): {report.queued_files} commit(s) wait for the next sync")
        (state.dir / PROGRESS_FILE).unlink(missing_ok=True)
        report.seconds = round(time.monotonic() - started, 3)
        return report
    if exists:
        _adopt_remote(state, report)
    elif not repo.has_head() or state.epoch is None:
        state.epoch = state.epoch or ulid()
        (repo.path / "EPOCH").write_text(state.epoch + "\n")
        repo.commit_all(f"engram: sync branch started by {state.machine}")
    new = _new_files(state)
    if new:
        with core.api_lock, core.lock:
            _apply(core, state, new, report)
            # conflicts this machine won are pushed now, so that a second sync has nothing left to do
            more = _write_files(state, _changes(core, state, report), report)
        if more:
            repo.commit_all(f"engram: {more} resolved change file(s) from {state.machine}")
            report.change_files += more
        report.steps.append(
            f"read {len(new)} file(s): {report.pulled} applied, {report.unchanged} already here, "
            f"{report.conflicts} conflict(s), {report.erased} erased"
        )
    state.save()
    if compact:
        _compact(core, state, report)
    for attempt in range(3):
        if not repo.ahead():
            break
        try:
            repo.push(force=compact and attempt == 0)
            report.steps.append("pushed")
            break
        except Offline:
            report.offline = True
            break
        except GitError:  # someone pushed meanwhile: their files and ours never collide
            repo.fetch()
            _adopt_remote(state, report)
    if compact and not report.offline:
        report.pruned_remote = prune_bare(state.remote)
        repo.prune_local()
        report.steps.append(
            "pruned the remote's unreachable objects"
            if report.pruned_remote
            else "the remote server keeps unreachable objects until its own gc"
        )
    report.queued_files = repo.ahead()
    if report.queued_files:
        report.steps.append(f"{report.queued_files} commit(s) not pushed: they go with the next sync")
    else:  # the remote has everything written here: those versions are agreed now
        state.base.update(state.unconfirmed)
        state.unconfirmed = {}
        state.last_sync = datetime.now(UTC).isoformat()
    state.save()
    (state.dir / PROGRESS_FILE).unlink(missing_ok=True)
    restrict_tree(state.dir)  # git writes with the umask: memories stay owner-only
    report.seconds = round(time.monotonic() - started, 3)
    log.info("sync %s: %s", channel, "; ".join(report.steps))
    return report


def _compact(core: MemoryCore, state: State, report: SyncReport) -> None:
    """The branch becomes one orphan commit holding the current state (erased memories as skeletons)."""
    repo = state.repo
    repo.git("checkout", "-q", "--orphan", "engram-compact")
    repo.git("rm", "-q", "-r", "-f", "--ignore-unmatch", ".")
    for sub in ("changes", "snapshot"):
        with contextlib.suppress(FileNotFoundError):
            for path in sorted((repo.path / sub).rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
    state.exported, state.base, state.unconfirmed, state.seen = {}, {}, {}, {}
    state.applied = set()
    snap = SyncReport(channel=state.channel, remote=state.remote or "", machine=state.machine)
    folder = repo.path / "snapshot"
    folder.mkdir(exist_ok=True)
    batch: list[str] = []
    with core.api_lock, core.lock:
        for rec in _changes(core, state, snap):
            batch.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    for i in range(0, max(len(batch), 1), CHANGE_FILE_RECORDS):
        body = "".join(batch[i : i + CHANGE_FILE_RECORDS]).encode()
        name = f"{hashlib.sha256(body).hexdigest()[:24]}.jsonl"
        (folder / name).write_bytes(body)
        state.applied.add(f"snapshot/{name}")
    state.epoch = ulid()
    (repo.path / "EPOCH").write_text(state.epoch + "\n")
    repo.commit_all(f"engram: compacted by {state.machine} ({len(batch)} memories)")
    repo.git("branch", "-q", "-M", BRANCH)
    report.compacted = True
    report.steps.append(f"compacted the sync history into one snapshot of {len(batch)} memories")


def status(core: MemoryCore, channel: SyncChannel) -> SyncState:
    state = State(core.home, channel)
    if state.remote is None:
        return SyncState(channel=channel, configured=False)
    pending = SyncReport(channel=channel, remote=state.remote, machine=state.machine)
    with core.api_lock, core.lock:
        n = sum(1 for _ in _changes(core, _Peek(state), pending))
    return SyncState(
        channel=channel,
        configured=True,
        remote=state.remote,
        machine=state.machine,
        last_sync=_when(state.last_sync) if state.last_sync else None,
        pending_changes=n,
        queued_files=state.repo.ahead() if state.repo.path.is_dir() else 0,
    )


class _Peek(State):
    """A state whose bookkeeping is thrown away: counts what the next sync would send."""

    def __init__(self, state: State) -> None:  # noqa: D107 - a copy, nothing saved
        self.__dict__.update(state.__dict__)
        self.exported = dict(state.exported)
        self.unconfirmed = dict(state.unconfirmed)
        self.seen = dict(state.seen)

    def progress(self, text: str) -> None:
        return None
