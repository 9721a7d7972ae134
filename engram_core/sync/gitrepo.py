"""The git side of sync: a working clone of the remote's sync branch under the data root, run through ``git``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..api import EngramError

BRANCH = "engram-sync"
GIT_TIMEOUT_S = 300.0


class GitError(EngramError):
    """A git command failed; the message carries git's own words."""


class Offline(GitError):
    """The remote could not be reached."""


_UNREACHABLE = (
    "could not read from remote",
    "does not appear to be a git repository",
    "could not resolve host",
    "connection refused",
    "connection timed out",
    "network is unreachable",
    "unable to access",
    "no such file or directory",
)


class Repo:
    def __init__(self, path: Path, machine: str) -> None:
        self.path = path
        self.machine = machine

    def git(self, *args: str, check: bool = True, remote: bool = False) -> str:
        """Run git in the clone. Prompts are off (a sync never waits for a password); commits are signed by
        nothing and authored by this machine's sync identity, whatever the user's git config says."""
        env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "engram",
            "GIT_AUTHOR_EMAIL": f"{self.machine}@engram",
            "GIT_COMMITTER_NAME": "engram",
            "GIT_COMMITTER_EMAIL": f"{self.machine}@engram",
        }
        cmd = ["git", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args]
        try:
            p = subprocess.run(
                cmd,
                cwd=self.path,
                env=env,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise Offline(f"git {args[0]} took over {GIT_TIMEOUT_S:.0f} s") from exc
        except OSError as exc:  # no git on PATH, or it cannot run
            raise GitError(f"sync needs git, which could not run here ({exc}): install git") from exc
        if check and p.returncode != 0:
            err = (p.stderr or p.stdout).strip().splitlines()
            msg = f"git {' '.join(args[:2])} failed: {err[-1] if err else p.returncode}"
            if remote and any(s in (p.stderr or "").lower() for s in _UNREACHABLE):
                raise Offline(msg)
            raise GitError(msg)
        return p.stdout

    def init(self, remote: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.git("init", "-q", "-b", BRANCH)
        self.git("remote", "add", "origin", remote)

    def fetch(self) -> bool:
        """Fetch the sync branch; False when the remote has none yet."""
        self.git("fetch", "-q", "--prune", "origin", check=True, remote=True)
        return bool(
            self.git("rev-parse", "-q", "--verify", f"refs/remotes/origin/{BRANCH}", check=False).strip()
        )

    def has_head(self) -> bool:
        return bool(self.git("rev-parse", "-q", "--verify", "HEAD", check=False).strip())

    def show(self, ref: str, path: str) -> str | None:
        out = subprocess.run(
            ["git", "show", f"{ref}:{path}"], cwd=self.path, capture_output=True, text=True, check=False
        )
        return out.stdout if out.returncode == 0 else None

    def commit_all(self, message: str) -> bool:
        self.git("add", "-A")
        if not self.git("status", "--porcelain"):
            return False
        self.git("commit", "-q", "-m", message)
        return True

    def ahead(self) -> int:
        """Commits here the remote's branch does not have (all of them before the first push)."""
        if not self.has_head():
            return 0
        if not self.git("rev-parse", "-q", "--verify", f"refs/remotes/origin/{BRANCH}", check=False).strip():
            return int(self.git("rev-list", "--count", "HEAD").strip() or 0)
        return int(self.git("rev-list", "--count", f"origin/{BRANCH}..HEAD").strip() or 0)

    def push(self, force: bool = False) -> None:
        self.git("push", "-q", *(["--force"] if force else []), "origin", f"HEAD:{BRANCH}", remote=True)

    def prune_local(self) -> None:
        """Objects no branch reaches leave this clone's files (after a compaction dropped erased texts)."""
        self.git("reflog", "expire", "--expire=now", "--all")
        self.git("gc", "-q", "--prune=now")


def prune_bare(remote: str) -> bool:
    """After a forced push of a compacted branch, a remote that is a repository on this machine drops what no
    branch reaches; a server's copy waits for its own gc (docs/sync.md). True when pruned here."""
    path = Path(remote[len("file://") :] if remote.startswith("file://") else remote).expanduser()
    if not (path.is_dir() and (path / "HEAD").is_file() and (path / "objects").is_dir()):
        return False
    for args in (["reflog", "expire", "--expire=now", "--all"], ["gc", "-q", "--prune=now"]):
        subprocess.run(
            ["git", "--git-dir", str(path), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    return True
