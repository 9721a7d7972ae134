"""Where memories live: the user store, one store per project, one database per live session, and how a
request finds the store it means.

Stores (one embedded engine per file, owned by one process):
- user scope:     ``$ENGRAM_HOME/user.db``            namespace ``user``, database ``default``
- sessions:       ``$ENGRAM_HOME/sessions.db``        namespace ``session``, database ``s_{ULID}`` each
- project scope:  a git repository's: ``$ENGRAM_HOME/projects/p_{key}/project.db`` (one for all its worktrees and
                  clones: identity.py); a plain folder's: ``<project>/.claude/engram/project.db``; namespace
                  ``project``, database ``p_{sha256[:12]}`` of the identity
Sessions live on disk (not ``mem://``) so that a daemon crash cannot lose them before their promotion pass;
their database is removed once that pass has run, which keeps them ephemeral.

Finding a store, one name per question:
- ``resolve(project, session)``: the request's context (its live session), resolved once; its ``stores``
  and ``target`` answer as those below without looking the strings up again;
- ``stores(scope, project, session)``: every store a read over ``scope`` covers (recall, stats);
- ``target(scope, project, session)``: the one store a write to ``scope`` goes to;
- ``primary(project, session, scope)``: where a request that names no scope lands (project, else user);
- ``locate(memory_id, project, session)``: the store holding a memory, among the caller's own;
- ``open_stores()``: every store open in this process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .api import EngramError, NotFound
from .config import ensure_private_dir, find_project_root
from .identity import ProjectIdentity, folder_key, folder_store_dir, identity_of, repository_key, root_commit
from .ids import IdSource, ulid
from .models import Scope
from .redaction import redact_text
from .storage import Connection, ScopeStore, key_of
from .storage.locks import SESSION, OrderedLock

ROOT_CACHE_S = 10.0
ADOPTED_LIST = "adopted.txt"  # in a repository's store: the old stores whose memories it took in
ADOPTED_INTO = "adopted-into.txt"  # in an old store under the data root: the store that took its memories
log = logging.getLogger("engram.scopes")
ScopeName = str  # "all" | "session" | "project" | "user"


class Session:
    """A live session: its own database in sessions.db, and the project it works in."""

    def __init__(
        self,
        key: str,
        store: ScopeStore,
        project_root: str | None,
        claude_id: str | None,
        started_at: datetime,
    ) -> None:
        self.key = key
        self.store = store
        self.project_root = project_root
        self.claude_id = claude_id
        self.started_at = started_at
        self.lock = OrderedLock(SESSION, "Session.lock")

    def touch(self) -> None:
        self.store.q("UPDATE session_registry:self SET last_seen_at = time::now()")


@dataclass(frozen=True)
class RequestContext:
    """A request's project and live session, resolved once (`Scopes.resolve`) for the layers below it, which
    take this instead of looking the strings up again."""

    scopes: Scopes
    project: str | None  # the project folder as the request named it
    session: Session | None

    @property
    def session_key(self) -> str | None:
        return self.session.key if self.session is not None else None

    def stores(self, scope: ScopeName) -> list[ScopeStore]:
        """Every store a read over ``scope`` covers (`Scopes.stores`)."""
        stores: list[ScopeStore] = []
        sess = self.session
        if scope in ("all", "session") and sess is not None:
            stores.append(sess.store)
        if scope in ("all", "project"):
            root = self.project or (sess.project_root if sess else None)
            pstore = self.scopes.project_store(root)
            if pstore is not None:
                stores.append(pstore)
        if scope in ("all", "user"):
            stores.append(self.scopes.user)
        return stores

    def target(self, scope: Scope) -> ScopeStore:
        """The one store a write to ``scope`` goes to (`Scopes.target`)."""
        if scope == Scope.user:
            return self.scopes.user
        if scope == Scope.project:
            root = self.project or (self.session.project_root if self.session else None)
            store = self.scopes.project_store(root)
            if store is None:
                raise EngramError("project scope needs a project: run inside one or pass --project DIR")
            return store
        if self.session is None:
            raise EngramError("session scope needs a session id (the MCP server and hooks pass theirs)")
        return self.session.store


class Scopes:
    def __init__(
        self,
        home: Path,
        lock: OrderedLock,
        open_store: Callable[[Connection, Scope, str], ScopeStore],
        now: Callable[[], datetime],
        new_id: IdSource = ulid,
    ) -> None:
        self._lock = lock
        self._open_store = open_store
        self._now = now
        self._new_id = new_id
        self.home = home
        self._roots: dict[str, tuple[float, ProjectIdentity]] = {}  # see identity()
        self._store_dirs: dict[str, Path] = {}
        self.adoptions: list[dict[str, object]] = []  # what adopt() moved in this process, for status
        self.user_conn = Connection.file(home / "user.db")
        self.user = open_store(self.user_conn, Scope.user, "default")
        self.sessions_conn = Connection.file(home / "sessions.db")
        self._projects: dict[str, tuple[str | None, ScopeStore]] = {}
        self._project_conns: dict[str, Connection] = {}
        self._sessions: dict[str, Session] = {}

    def close(self) -> None:
        with self._lock:
            for store in [*(s for _, s in self._projects.values()), self.user]:
                store.save_snapshot()  # the next start reads its vectors from here instead of decoding them
            for conn in [*self._project_conns.values(), self.sessions_conn, self.user_conn]:
                conn.close()
            self._project_conns.clear()
            self._projects.clear()
            self._sessions.clear()

    # ── projects ─────────────────────────────────────────────
    def project_store(self, project: str | Path | None) -> ScopeStore | None:
        """The project's store, opened on first use and registered in the user registry."""
        if project is None:
            return None
        ident = self.identity(project)
        return self._project_store(ident.key, ident.root, ident)

    def project_store_by_key(self, db: str) -> ScopeStore:
        """A repository's store by its key alone (sync brings memories of a project this machine has not
        opened yet): it lives under the data root, so no working tree is needed."""
        return self._project_store(db, None, None)

    def _project_store(self, db: str, root: str | None, ident: ProjectIdentity | None) -> ScopeStore:
        with self._lock:
            if db in self._projects:
                entry = self._projects[db]
                if entry[0] is None and root is not None:
                    self._projects[db] = (root, entry[1])  # opened by sync first: now we know a working tree
                    self._register_project(root, db, entry[1])
                return entry[1]
            where = ident.store_dir(self.home) if ident is not None else self.home / "projects" / db
            if ident is None or ident.shared:
                ensure_private_dir(where.parent)
            conn = Connection.file(where / "project.db")
            try:
                store = self._open_store(conn, Scope.project, db)
            except BaseException:
                # An open that failed part-way (an upgrade stopped, a disk fault) must not keep the files locked:
                # the next request in this process opens the store again and goes on from where it stopped.
                conn.close()
                raise
            self._project_conns[db] = conn
            self._projects[db] = (root, store)
            self._store_dirs[db] = where
            if root is not None:
                self._register_project(root, db, store)
        if ident is not None and ident.shared:
            self.adopt(ident, store)
        return store

    def store_dir_of(self, store: ScopeStore) -> Path | None:
        return self._store_dirs.get(store.database)

    def adopt(self, ident: ProjectIdentity, store: ScopeStore) -> int:
        """Once per repository store: the memories of the stores this working tree had before it was keyed by
        the repository (its folder store; for an origin, the store of its root commit) are copied into it, ids
        and every field kept. The old files stay untouched (nothing is lost, nothing is written in the working
        tree); the repository's store lists what it adopted (ADOPTED_LIST) so nothing is copied twice. An old
        store another process holds open is tried again by the next process."""
        moved = 0
        candidates = [(folder_store_dir(ident.root), folder_key(ident.root))]
        if ident.kind == "origin" and ident.git_dir:
            commit = root_commit(Path(ident.git_dir))
            if commit:
                key = repository_key("root-commit", commit)
                candidates.append((self.home / "projects" / key, key))
        listing = ident.store_dir(self.home) / ADOPTED_LIST
        done = set(listing.read_text(encoding="utf-8").splitlines()) if listing.exists() else set()
        for where, db in candidates:
            if db == store.database or str(where) in done or not (where / "project.db").exists():
                continue
            try:
                n = self._copy_memories(where, db, store)
            except Exception as exc:  # noqa: BLE001 - the old store is locked or damaged: the project still opens
                log.warning(
                    "could not adopt the memories of %s yet (%s): tried again at the next start", where, exc
                )
                continue
            if where.parent == self.home / "projects":  # our own directory: the old store says where it went
                (where / ADOPTED_INTO).write_text(f"{store.database}\n", encoding="utf-8")
            fd = os.open(listing, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(f"{where}\n")
            msg = (
                f"adopted {n} memories of {where} into the repository's project store "
                f"({ident.reason()}); the old store is left as it was"
            )
            log.warning(msg)
            self.adoptions.append(
                {"source_dir": str(where), "into": store.database, "memories": n, "message": msg}
            )
            moved += n
        return moved

    def _copy_memories(self, where: Path, db: str, store: ScopeStore) -> int:
        if db in self._projects:
            old, conn = self._projects[db][1], None
        else:
            conn = Connection.file(where / "project.db")
            old = self._open_store(conn, Scope.project, db)
        try:
            n = 0
            for row in old.memories.export_rows():
                key = key_of(row.pop("id"))
                if store.get(key) is None:
                    store.memories.restore_row(key, {k: v for k, v in row.items() if v is not None})
                    n += 1
            return n
        finally:
            if conn is not None:
                conn.close()

    def project_root(self, project: str | Path) -> tuple[str, str]:
        """(root, database) of the project around ``project``."""
        ident = self.identity(project)
        return ident.root, ident.key

    def identity(self, project: str | Path) -> ProjectIdentity:
        """The project around ``project`` and what names it (identity.py). Finding the root stats every ancestor
        (~2 ms, several times a recall), so it is remembered for a few seconds: long enough for a burst of
        calls, short enough that a new `.git` marker or remote is noticed."""
        cache = self._roots
        now = time.monotonic()
        hit = cache.get(str(project))
        if hit is not None and now - hit[0] < ROOT_CACHE_S:
            return hit[1]
        if not Path(project).expanduser().is_dir():
            raise EngramError(
                f"project {str(project)!r} is not an existing directory: give the project's folder "
                "(--project DIR, or run inside it)"
            )
        root = find_project_root(project)
        check_project_root(root)
        ident = identity_of(root)
        if len(cache) > 1024:
            cache.clear()
        cache[str(project)] = (now, ident)
        return ident

    def _register_project(self, root: str, db: str, store: ScopeStore) -> None:
        name = Path(root).name or root
        self.user.q(
            "UPSERT project_registry SET project_db = $db, project_path = $p, project_name = $n, "
            "last_seen_at = time::now() WHERE project_db = $db",
            {"db": db, "p": root, "n": name},
        )
        if not self.user.q1("SELECT VALUE id FROM project_registry WHERE project_db = $db", {"db": db}):
            self.user.q(
                "CREATE project_registry SET project_db = $db, project_path = $p, project_name = $n",
                {"db": db, "p": root, "n": name},
            )
        if not store.q1("SELECT VALUE id FROM project_meta"):
            store.q(
                "CREATE project_meta:current SET project_path = $p, project_name = $n", {"p": root, "n": name}
            )

    def root_of(self, store: ScopeStore) -> str | None:
        """The project folder of a project store (None for any other store)."""
        for root, s in self._projects.values():
            if s is store:
                return root
        return None

    def open_all_projects(self) -> None:
        """Open the store of every known project that still exists, for a pass over all of them."""
        rows = self.user.q1(
            "SELECT project_path, last_seen_at FROM project_registry ORDER BY last_seen_at DESC"
        )
        for row in rows or []:
            if Path(row["project_path"]).exists():
                self.project_store(row["project_path"])

    def open_projects(self) -> list[tuple[str | None, ScopeStore]]:
        """(root, store) of every project store open in this process."""
        return list(self._projects.values())

    def open_project(self, db: str) -> ScopeStore | None:
        """The store of the project database ``db``, if it is open."""
        entry = self._projects.get(db)
        return entry[1] if entry else None

    def connections(self) -> list[tuple[Connection, list[ScopeStore]]]:
        """Every store file open, with the stores it holds."""
        with self._lock:
            out = [
                (self.user_conn, [self.user]),
                (self.sessions_conn, [s.store for s in self._sessions.values()]),
            ]
            out += [(self._project_conns[db], [store]) for db, (_, store) in self._projects.items()]
        return out

    # ── sessions ─────────────────────────────────────────────
    def live_sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def session_of(self, store: ScopeStore) -> Session | None:
        """The live session whose store this is."""
        return next((s for s in self.live_sessions() if s.store is store), None)

    def session_dbs_on_disk(self) -> list[str]:
        info = self.sessions_conn.run("session", "registry", "INFO FOR NS")[-1]
        return sorted((info or {}).get("databases", {}).keys())

    def reattach_sessions(self) -> None:
        """After a restart, every session database still on disk is an unfinished session: reopen it."""
        for db in self.session_dbs_on_disk():
            if not db.startswith("s_"):
                continue
            store = self._open_store(self.sessions_conn, Scope.session, db)
            meta = store.q1("SELECT * FROM ONLY session_registry:self")
            if not meta:
                continue
            self._sessions[db] = Session(
                db,
                store,
                meta.get("project_root"),
                meta.get("claude_session_id"),
                meta.get("started_at") or self._now(),
            )

    def session(
        self, session: str | None, project: str | None = None, *, create: bool = False
    ) -> Session | None:
        """The live session with this Engram key or Claude session id, if it belongs to ``project`` (when given).

        An unknown id is refused: a typo or another project's id must not open a session of its own. Only the
        daemon's hook events (``create=True``) start one for a Claude session whose SessionStart it missed."""
        if not session:
            return None
        session = redact_text(session)  # as start_session stored it (a real id is a UUID and stays as it is)
        found = None
        with self._lock:
            if session in self._sessions:
                found = self._sessions[session]
            else:
                found = next((s for s in self._sessions.values() if s.claude_id == session), None)
        if found is None:
            if not create:
                raise NotFound(
                    f"no live session {session!r}: it never started, has ended, or the id is mistyped "
                    "(sessions start with the SessionStart hook or start_session)"
                )
            return self.start_session(project, session)[0]
        if project and found.project_root and self.project_root(project)[0] != found.project_root:
            raise NotFound(f"no live session {session!r} in this project (it belongs to another one)")
        return found

    def start_session(self, project: str | None, claude_session_id: str | None) -> tuple[Session, bool]:
        """A new live session (or the live one of this Claude session: then resumed is True)."""
        claude_session_id = redact_text(claude_session_id) if claude_session_id else claude_session_id
        with self._lock:
            if claude_session_id:
                for s in self._sessions.values():
                    if s.claude_id == claude_session_id:
                        s.touch()
                        return s, True
            key = "s_" + self._new_id()
            root = self.project_root(project)[0] if project else None
            store = self._open_store(self.sessions_conn, Scope.session, key)
            now = self._now()
            store.q(
                "CREATE session_registry:self SET session_key = $k, claude_session_id = $c, project_root = $p, "
                "started_at = $t, last_seen_at = $t",
                {"k": key, "c": claude_session_id, "p": root, "t": now},
            )
            sess = Session(key, store, root, claude_session_id, now)
            self._sessions[key] = sess
        pstore = self.project_store(root)
        if pstore is not None:
            pstore.q(
                "CREATE session_registry SET session_key = $k, claude_session_id = $c, project_root = $p, "
                "started_at = $t, last_seen_at = $t",
                {"k": key, "c": claude_session_id, "p": root, "t": now},
            )
            pstore.q("UPDATE project_meta:current SET session_count += 1, last_session = time::now()")
        return sess, False

    def restore_session(self, key: str, project: str | None) -> ScopeStore:
        """The store of session ``key``, recreated if it is not live (a restore of exported session records)."""
        with self._lock:
            if key in self._sessions:
                return self._sessions[key].store
            if not key.startswith("s_"):
                key = "s_" + self._new_id()
            store = self._open_store(self.sessions_conn, Scope.session, key)
            root = self.project_root(project)[0] if project else None
            store.q(
                "UPSERT session_registry:self SET session_key = $k, project_root = $p, last_seen_at = time::now()",
                {"k": key, "p": root},
            )
            self._sessions[key] = Session(key, store, root, None, self._now())
            return store

    def drop_session(self, sess: Session) -> None:
        """Forget a session whose promotion pass has run: its database goes."""
        sess.store.drop_database()
        with self._lock:
            self._sessions.pop(sess.key, None)

    def resolve(self, project: str | None, session: str | None, *, create: bool = False) -> RequestContext:
        """The request's context: its live session (refused as `session` refuses it; ``create`` as there)."""
        return RequestContext(
            self, project, self.session(session, project, create=create) if session else None
        )

    # ── finding a store ──────────────────────────────────────
    def stores(self, scope: ScopeName, project: str | None, session: str | None) -> list[ScopeStore]:
        """Every store a read over ``scope`` covers: the session's, the project's (given, or the session's),
        the user's."""
        return self.resolve(project, session).stores(scope)

    def target(self, scope: Scope, project: str | None, session: str | None) -> ScopeStore:
        """The one store a write to ``scope`` goes to."""
        if scope == Scope.user:
            return self.user
        if scope == Scope.project:
            root = project or (self.session(session).project_root if session else None)  # type: ignore[union-attr]
            store = self.project_store(root)
            if store is None:
                raise EngramError("project scope needs a project: run inside one or pass --project DIR")
            return store
        sess = self.session(session, project)
        if sess is None:
            raise EngramError("session scope needs a session id (the MCP server and hooks pass theirs)")
        return sess.store

    def primary(
        self, project: str | None, session: str | None = None, scope: str | None = None
    ) -> ScopeStore:
        """Where a request that names no scope lands: the named scope, else the project, else the user store."""
        if scope:
            return self.target(Scope(scope), project, session)
        if project:
            store = self.project_store(project)
            if store is not None:
                return store
        if session:
            sess = self.session(session, project)
            if sess is not None and sess.project_root:
                store = self.project_store(sess.project_root)
                if store is not None:
                    return store
        return self.user

    def open_stores(self) -> list[ScopeStore]:
        """Every store open in this process: live sessions', projects', the user's."""
        return [
            *(s.store for s in self._sessions.values()),
            *(s for _, s in self._projects.values()),
            self.user,
        ]

    def locate(
        self, memory_id: str, project: str | None = None, session: str | None = None
    ) -> tuple[ScopeStore, str]:
        """The store holding this memory among the caller's own: its session, its project (the given one or the
        session's) and the user scope. Another project's ids are not found from here (the CLI, MCP and hooks
        always name their project)."""
        key = key_of(memory_id.strip())
        if not key:
            raise EngramError("give a memory id")
        # A caller that names neither (an in-process tool such as the TUI's own service) searches what is open.
        stores = self.stores("all", project, session) if (project or session) else self.open_stores()
        for store in stores:
            if key in store.summaries or store.get(key) is not None:
                return store, key
        where = "this project, its session or user scope" if (project or session) else "any open store"
        raise NotFound(f"no memory with id {key!r} in {where} (check `engram recall` for ids)")


# Top-level system folders: a project's store (<root>/.claude/engram) is never created in one of them.
_SYSTEM_DIRS = {
    "bin",
    "boot",
    "dev",
    "etc",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "opt",
    "proc",
    "run",
    "sbin",
    "srv",
    "sys",
    "tmp",
    "usr",
    "var",
    "snap",
    "mnt",
    "media",
}


def check_project_root(root: Path) -> None:
    """Refuse a project root that is no project: the filesystem root, the home folder, a system folder."""
    if (
        root == Path(root.anchor)
        or root == Path.home().resolve()
        or (len(root.parts) == 2 and root.name in _SYSTEM_DIRS)
    ):
        raise EngramError(
            f"{root} is not a project folder (the filesystem root, your home folder or a system "
            "folder): Engram will not create a store there. Give the project's folder."
        )
