#!/usr/bin/env python3
"""What hooks.json runs, ``python3 -S run_hook.py <EventName>``: the part of a hook Claude Code waits for.

Claude Code waits for a hook's process to exit (and its stdout and stderr to close) before it goes on. For the
events whose outcome the agent never reads (PostToolUse, PostToolUseFailure, PreCompact, Stop, SubagentStop,
SessionEnd, and UserPromptSubmit while prompt recall is off) this script reads the event, takes the session's
order lock, forks a detached child that does the work of ``engram_hook.py`` (deliver to the daemon, or spool) and
exits. The agent then waits for a bare interpreter start and a fork (~10 ms) instead of ~30 ms (compiling
engram_hook.py, which a script run never caches, and importing json, re and socket) plus a daemon round trip
that a busy daemon stretches to its 150 ms deadline. ``docs/benchmarks.md`` has the figures.

Why not Claude Code's own ``"async": true``: in ``-p`` mode Claude Code kills the async hooks still running when
the session's last turn ends (SIGTERM, then SIGKILL), so the last turn's capture could be lost before it was
read; a child detached here has read the event before Claude Code goes on, and it is no longer Claude Code's.

Order: a session's events reach the daemon in the order Claude Code fired them (a failure before its fix,
captures before SessionEnd): each takes a ticket before the fork and its child waits for its turn (class Turn),
so a child slowed by a busy daemon delays the next child, never Claude Code. Stop and SubagentStop take no
ticket: nothing depends on their order.

SessionStart (prints the context) and UserPromptSubmit with prompt recall on run in this process, as before.
Only ``os`` and ``sys`` (and ``fcntl`` for the lock) are imported on the path Claude Code waits for;
``engram_hook`` is imported, not run as a script, so its bytecode is cached. No fork (Windows): all in process.
"""

from __future__ import annotations

import os
import sys

DETACHED_EVENTS = ("PostToolUse", "PostToolUseFailure", "PreCompact", "Stop", "SubagentStop", "SessionEnd")
UNORDERED_EVENTS = ("Stop", "SubagentStop")  # a late Stop finds its session ended and does nothing
CHILD_TURN_WAIT_S = 10.0
MAX_STDIN = 16 * 1024 * 1024
_ID_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def home() -> str:
    raw = os.environ.get("ENGRAM_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".claude", "engram")


def truthy(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes", "on")


def field_of(raw: bytes, key: str) -> str | None:
    """A top-level string field of the event, read without the json module (its import, with re's, costs more
    than the rest of this script). Claude Code writes compact JSON, ``"session_id":"…"`` first; a quote inside a
    JSON string is escaped, so the first match is the key itself. None when absent or escaped (then callers take
    the safe path)."""
    name = b'"' + key.encode() + b'"'
    i = raw.find(name)
    if i < 0:
        return None
    j = raw.find(b'"', i + len(name))
    if j < 0 or raw[i + len(name) : j].strip() != b":":
        return None
    k = raw.find(b'"', j + 1)
    value = raw[j + 1 : k] if k > j else b"\\"
    if b"\\" in value:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def session_of(raw: bytes) -> str:
    """The session id for the ticket file's name; "" (one shared file) when missing or unusual."""
    sid = field_of(raw, "session_id") or ""
    if len(sid) > 200 or sid.startswith("-") or not all(c in _ID_CHARS for c in sid.encode()):
        return ""
    return sid


def prompt_recall_may_be_on(raw: bytes) -> bool:
    """Whether UserPromptSubmit may have context to print (then it runs in process): the environment says so, or a
    project settings file exists where engram_hook.py may look for the flag (above the event's cwd)."""
    flag = os.environ.get("ENGRAM_PROMPT_RECALL")
    if flag is not None:
        return truthy(flag)
    cwd = field_of(raw, "cwd")
    if cwd is None and b'"cwd"' in raw:
        return True  # a cwd this scanner cannot read: let engram_hook.py decide
    for start in {cwd or os.getcwd(), os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()}:
        path = os.path.realpath(start)
        while True:
            if os.path.exists(os.path.join(path, ".claude", "engram.local.md")):
                return True
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return False


class Turn:
    """A session's events are delivered one at a time, in the order their hooks started: a ticket taken before
    the fork (``$ENGRAM_HOME/hookstate/<session>.lock`` holds "issued served", under a flock held for
    microseconds), waited for in the child, and passed on when the event is delivered or spooled."""

    def __init__(self, sid: str) -> None:
        here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engram_core")
        if here not in sys.path:
            sys.path.append(here)
        import paths  # type: ignore[import-not-found]  # engram_core/paths.py, by path (stdlib only)

        if paths.foreign_root(home()):
            raise OSError(f"{home()} is not Engram's data directory: nothing is written there")
        folder = os.path.join(home(), "hookstate")
        for path in (home(), folder):
            if not os.path.isdir(path):
                os.makedirs(path, mode=0o700, exist_ok=True)
        self.fd = os.open(os.path.join(folder, (sid or "-") + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        self.ticket = self._update(issue=True)[0]

    def _update(self, issue: bool = False, serve: int = 0) -> tuple[int, int]:
        """(issued, served) as they were; ``issue`` counts one more ticket, ``serve`` marks tickets below it served."""
        import fcntl

        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            try:
                issued, served = (int(x) for x in os.pread(self.fd, 64, 0).split())
            except ValueError:
                issued = served = 0
            if issue or serve > served:
                os.pwrite(self.fd, f"{issued + issue} {max(served, serve)}".ljust(40).encode(), 0)
            return issued, served
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def wait(self) -> None:
        """Until the earlier events of the session are through (bounded: a crashed child must not stop the rest)."""
        import time

        deadline = time.monotonic() + CHILD_TURN_WAIT_S
        while self._update()[1] < self.ticket and time.monotonic() < deadline:
            time.sleep(0.005)

    def done(self) -> None:
        self._update(serve=self.ticket + 1)


def detach() -> bool:
    """Fork; True in the child (detached from Claude Code: own session, stdio on /dev/null), the parent exits."""
    if os.fork():
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    return True


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if truthy(os.environ.get("ENGRAM_DISABLED") or ""):
        return
    raw = sys.stdin.buffer.read(MAX_STDIN)
    background = name in DETACHED_EVENTS or (name == "UserPromptSubmit" and not prompt_recall_may_be_on(raw))
    if not background or not hasattr(os, "fork"):
        import engram_hook

        engram_hook.handle(name, raw)
        return
    turn = None
    if name not in UNORDERED_EVENTS:
        try:
            turn = Turn(session_of(raw))
        except (OSError, ValueError):
            turn = None  # no state folder: deliver out of order rather than not at all
    detach()
    try:
        if turn is not None:
            turn.wait()
        import engram_hook

        engram_hook.DETACHED = True
        engram_hook.handle(name, raw)
    finally:
        if turn is not None:
            turn.done()


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:  # noqa: BLE001 - a hook must exit 0 whatever happens
        try:
            import engram_hook

            engram_hook.log_problem(
                sys.argv[1] if len(sys.argv) > 1 else "-", "crash", f"{exc.__class__.__name__}: {exc}"
            )
        except BaseException:  # noqa: BLE001, S110
            pass
    try:  # noqa: SIM105 - no contextlib import on the hot path
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110
        pass
    os._exit(0)
