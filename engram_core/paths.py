"""Where Engram keeps its data: the one definition of the data root (standard library only, so the light
client path can use it). The two stand-alone scripts Claude Code runs by file path (the hook and the MCP
bridge) cannot import the package and repeat these two lines; tests/test_architecture.py holds them equal."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Names that mark a directory as Engram's own (a data root or a project's store directory).
ENGRAM_MARKERS = (
    "user.db",
    "sessions.db",
    "project.db",
    "journal.jsonl",
    "spool",
    "engram.sock",
    "engram.pid",
    "launcher.json",
    "engram.log",
)


class ConfigError(ValueError):
    """A setting or path is unusable; the message says which and how to fix it. (Here, not in `config`, so
    that a CLI command can catch it without loading pydantic and yaml: ~0.2 s of every `engram` call.)"""


def engram_home(home: Path | str | None = None) -> Path:
    """``home`` if given, else ``$ENGRAM_HOME``, else ``~/.claude/engram``."""
    if home is not None:
        return Path(home).expanduser()
    raw = os.environ.get("ENGRAM_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".claude" / "engram"


def foreign_root(path: str | Path) -> bool:
    """An existing directory Engram must not write in: a link, not a directory, another user's, or one others may
    open that holds none of Engram's files (config.ensure_private_dir refuses it as a data root). The hook and
    the MCP bridge ask this before they create anything in the data root, so that a file of theirs never makes a
    shared directory look like Engram's own."""
    try:
        st = os.lstat(path)
    except OSError:
        return False  # not there: created owner-only
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return True
    if not st.st_mode & 0o077:
        return False
    try:
        return not set(os.listdir(path)) & set(ENGRAM_MARKERS)
    except OSError:
        return True
