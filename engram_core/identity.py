"""Which project a folder belongs to: the repository, not the folder (issue #32).

A git working tree (main or linked worktree, any clone) is named by its repository: the normalised URL of its
``origin`` remote, else its first root commit (a repository without commits is still a folder). Two
worktrees of one repository, and two clones of one remote wherever they sit, are one project; their memory lives
under the data root, ``$ENGRAM_HOME/projects/<key>/project.db``, keyed by that identity. A folder that is no git
repository (or holds only an empty ``.git`` marker) keeps the folder's own store, ``<folder>/.claude/engram/``.

Reading the identity reads two small files of the git directory; only the root commit of a repository without a
remote needs ``git`` (~3 ms), once per repository per process (a root commit never changes)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

IdentityKind = Literal["origin", "root-commit", "folder"]


@dataclass(frozen=True)
class ProjectIdentity:
    """What a working folder maps to: the database key, where its store lives, and why."""

    root: str  # the working tree (or folder) the caller is in: its settings file lives here
    key: str  # the project database name, p_<sha256[:12]> of the identity
    kind: IdentityKind
    source: str  # the normalised origin URL, the root commit or the folder
    git_dir: str | None  # the repository's common git directory (shared by its worktrees)

    @property
    def shared(self) -> bool:
        """Is the store keyed by the repository (under the data root) rather than by the folder?"""
        return self.kind != "folder"

    def store_dir(self, home: Path) -> Path:
        if self.kind == "folder":
            return folder_store_dir(self.root)
        return home / "projects" / self.key

    def reason(self) -> str:
        return {
            "origin": f"git remote origin {self.source}",
            "root-commit": f"git repository without a remote, root commit {self.source[:12]}",
            "folder": f"folder {self.source} (no git repository)",
        }[self.kind]


def folder_key(folder: Path | str) -> str:
    """The database name of a folder project (and of every project before issue #32): its path's hash."""
    real = os.path.realpath(str(folder))
    return "p_" + hashlib.sha256(real.encode()).hexdigest()[:12]


def folder_store_dir(folder: Path | str) -> Path:
    return Path(os.path.realpath(str(folder))) / ".claude" / "engram"


_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/repo.git


def normalise_remote(url: str) -> str:
    """One spelling per repository: ``git@github.com:a/b.git``, ``ssh://git@github.com/a/b`` and
    ``https://github.com/a/b/`` are all ``github.com/a/b``; a local path or file URL is its real path."""
    url = url.strip()
    if url.startswith("file://"):
        url = url[len("file://") :]
    if url.startswith(("/", "~", ".")):
        return os.path.realpath(os.path.expanduser(url)).removesuffix("/").removesuffix(".git")
    m = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?([^/:]+)(?::\d+)?/(.*)$", url, re.I)
    if m is None:
        m = _SCP.match(url)
    if m is None:
        return url.removesuffix("/").removesuffix(".git")
    host, path = m.group(1).lower(), m.group(2).strip("/")
    return f"{host}/{path.removesuffix('.git')}"


def _common_git_dir(root: Path) -> Path | None:
    """The repository's common git directory, or None when ``root/.git`` is no repository (an empty marker)."""
    dot = root / ".git"
    if dot.is_file():  # a linked worktree (or a submodule): "gitdir: <path>"
        try:
            line = dot.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not line.startswith("gitdir:"):
            return None
        gitdir = (root / line[len("gitdir:") :].strip()).resolve()
        common = gitdir / "commondir"
        if common.is_file():
            gitdir = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
    elif dot.is_dir():
        gitdir = dot.resolve()
    else:
        return None
    return gitdir if (gitdir / "HEAD").is_file() else None


_REMOTE = re.compile(r'^\s*\[\s*remote\s+"origin"\s*\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")


def origin_url(git_dir: Path) -> str | None:
    """The ``url`` of ``[remote "origin"]`` in the repository's config (read as text: no git process)."""
    try:
        lines = (git_dir / "config").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        if _SECTION.match(line):
            inside = bool(_REMOTE.match(line))
        elif inside and (m := _URL.match(line)):
            return m.group(1).strip('"')
    return None


_root_commits: dict[str, str | None] = {}
_lock = threading.Lock()


def root_commit(git_dir: Path) -> str | None:
    """The repository's first root commit (sorted, for a history with several), or None without commits."""
    key = str(git_dir)
    with _lock:
        if key in _root_commits and _root_commits[key] is not None:
            return _root_commits[key]
    try:
        out = subprocess.run(
            ["git", "--git-dir", key, "rev-list", "--max-parents=0", "--all"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    found = sorted(out)[0] if out else None
    with _lock:
        _root_commits[key] = found
    return found


def identity_of(root: Path | str) -> ProjectIdentity:
    """The identity of the project whose root (see config.find_project_root) is ``root``."""
    root_s = os.path.realpath(str(root))
    git_dir = _common_git_dir(Path(root_s))
    if git_dir is None:
        return ProjectIdentity(root_s, folder_key(root_s), "folder", root_s, None)
    url = origin_url(git_dir)
    if url:
        source = normalise_remote(url)
        kind: IdentityKind = "origin"
    elif commit := root_commit(git_dir):
        source, kind = commit, "root-commit"
    else:  # no commit yet: the folder's store, adopted by the repository's once it has one
        return ProjectIdentity(root_s, folder_key(root_s), "folder", root_s, str(git_dir))
    return ProjectIdentity(root_s, repository_key(kind, source), kind, source, str(git_dir))


def repository_key(kind: IdentityKind, source: str) -> str:
    return "p_" + hashlib.sha256(f"{kind}:{source}".encode()).hexdigest()[:12]
