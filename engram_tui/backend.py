"""How the UI reaches Engram: an object with EngramService's methods, called from worker threads only.

The TUI never imports the store and never builds SurrealQL: it takes an ``EngramService`` (in process, for tests
and ``--demo``) or the daemon client ``RemoteService`` (same methods, the same pydantic return types: the client
rebuilds each method's declared type from the daemon's JSON) in its constructor. Every API method is declared
by the service facade, so a pane never has to ask whether one exists; a daemon of another version that lacks one
answers with an error the pane shows like any other.
"""

from __future__ import annotations


def describe_error(exc: BaseException) -> str:
    """One line a person can act on; never a traceback."""
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if isinstance(exc, ConnectionError | FileNotFoundError | TimeoutError) or name in {
        "DaemonUnavailable",
        "DaemonError",
        "ConnectionRefusedError",
    }:
        return f"Engram daemon unreachable ({text}); start it with `engram serve` and press R to retry"
    if isinstance(exc, AttributeError) or "unknown method" in text or "has no method" in text:
        return (
            f"the running Engram daemon does not serve this ({text}): it is another version; "
            "`engram stop` and reopen (any command starts the current one)"
        )
    return (
        text
        if name
        in {"EngramError", "NotFound", "ValidationError", "ValueError", "RemoteNotFound", "RemoteEngramError"}
        else f"{name}: {text}"
    )
