"""Where Engram keeps its data: the one definition of the data root (standard library only, so the light
client path can use it). The two stand-alone scripts Claude Code runs by file path (the hook and the MCP
bridge) cannot import the package and repeat these two lines; tests/test_architecture.py holds them equal."""

from __future__ import annotations

import os
from pathlib import Path


class ConfigError(ValueError):
    """A setting or path is unusable; the message says which and how to fix it. (Here, not in `config`, so
    that a CLI command can catch it without loading pydantic and yaml: ~0.2 s of every `engram` call.)"""


def engram_home(home: Path | str | None = None) -> Path:
    """``home`` if given, else ``$ENGRAM_HOME``, else ``~/.claude/engram``."""
    if home is not None:
        return Path(home).expanduser()
    raw = os.environ.get("ENGRAM_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".claude" / "engram"
