"""One hook event's path through engram_core's modules, traced with ``sys.setprofile``; prints JSON.

    python bench/hook_path.py

An in-process EngramService on real stores in a temp data root, a live session in a temp git project, then one
event of each kind traced through ``hook_events.apply`` (the warm path: a second event of the kind, after a first
one opened the stores):
- ``memory``: a PostToolUse Edit as hooks/engram_hook.py sends it (a session-scoped episodic memory);
- ``prompt``: a UserPromptSubmit.

Per event: ``modules`` (distinct engram_core modules whose Python code ran), ``stays`` (maximal runs of calls in
one module: the path is the list of them), ``climbs`` (stays that begin by returning to a caller's module),
``scopes_entries`` (calls into scopes.py from another module; ``scopes_calls`` names each, ``scopes_lookups``
counts those into ``Scopes``, which look a project or session up, not the context's or a Session's own) and ``path`` (the stays' modules, in order).
The service embeds with its default (the real model, loaded before the traced events).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CORE = str(REPO / "engram_core") + os.sep


def _module(frame: FrameType) -> str | None:
    path = frame.f_code.co_filename
    if not path.startswith(CORE):
        return None
    return path[len(CORE) :].removesuffix(".py").replace(os.sep, ".")


class Tracer:
    """Follows the innermost engram_core frame: a new stay each time the module running changes."""

    def __init__(self) -> None:
        self.stack: list[str | None] = []
        self.path: list[str] = []
        self.climbs = 0
        self.scopes_entries = 0
        self.scopes_lookups = 0  # the entries that look a project or session up (Scopes' methods)
        self.scopes_calls: list[str] = []  # caller module -> scopes function, per entry

    def _now(self) -> str | None:
        return next((m for m in reversed(self.stack) if m is not None), None)

    def _move(self, to: str | None, returning: bool) -> None:
        if to is not None and (not self.path or self.path[-1] != to):
            self.path.append(to)
            self.climbs += returning

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            mod = _module(frame)
            if mod == "scopes" and self._now() != "scopes":
                self.scopes_entries += 1
                self.scopes_calls.append(f"{self._now()} -> scopes.{frame.f_code.co_qualname}")
                self.scopes_lookups += frame.f_code.co_qualname.startswith("Scopes.")
            self.stack.append(mod)
            self._move(mod, returning=False)
        elif event == "return" and self.stack:
            self.stack.pop()
            self._move(self._now(), returning=True)

    def report(self) -> dict[str, Any]:
        return {
            "modules": len(set(self.path)),
            "stays": len(self.path),
            "climbs": self.climbs,
            "scopes_entries": self.scopes_entries,
            "scopes_lookups": self.scopes_lookups,
            "scopes_calls": self.scopes_calls,
            "path": self.path,
        }


def _events(session: str, cwd: str, n: int) -> dict[str, dict[str, Any]]:
    return {
        "memory": {
            "event_id": f"bench-memory-{n}",
            "kind": "memory",
            "hook": "PostToolUse",
            "session_id": session,
            "cwd": cwd,
            "memory": {
                "content": f"Modified src/app_{n}.py: replaced 1 line(s) with 2: 'x = 1' → 'x = 2'",
                "memory_type": "episodic",
                "scope": "session",
                "tags": [f"src/app_{n}.py", "file-change"],
                "importance": 0.3,
                "metadata": {"tool": "Edit", "file": f"src/app_{n}.py", "new_file": False},
                "source": "hook:PostToolUse",
            },
        },
        "prompt": {
            "event_id": f"bench-prompt-{n}",
            "kind": "prompt",
            "hook": "UserPromptSubmit",
            "session_id": session,
            "cwd": cwd,
            "prompt": f"fix the failing test in src/app_{n}.py and run pytest again",
        },
    }


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from engram_core.integrations.claude_code import hook_events
    from engram_core.memory.sessions import start_session
    from engram_core.service import EngramService

    tmp = Path(tempfile.mkdtemp(prefix="engram-hook-path-"))
    os.chmod(tmp, 0o700)
    home, proj = tmp / "home", tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(home, recover_sessions=False)
    out: dict[str, Any] = {"embedder": svc.embedder.name}
    try:
        claude_id = "bench-claude-session"
        start_session(svc, project=str(proj), claude_session_id=claude_id)
        for event in _events(claude_id, str(proj), 0).values():  # warm: stores and caches open
            hook_events.apply(svc, event["event_id"], event)
        for kind, event in _events(claude_id, str(proj), 1).items():
            tracer = Tracer()
            sys.setprofile(tracer)
            try:
                hook_events.apply(svc, event["event_id"], event)
            finally:
                sys.setprofile(None)
            out[kind] = tracer.report()
    finally:
        svc.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
