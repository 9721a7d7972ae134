"""How the UI reaches Engram: an object with EngramService's methods, called from worker threads only.

The TUI never imports the store and never builds SurrealQL: it takes an ``EngramService`` (in process, for tests
and ``--demo``) or the daemon client ``RemoteService`` (same methods, same return types) in its constructor.
Methods of the self-organising layer and the console may not exist yet in a given build; ``available`` says so,
and the panes show "not available yet" instead of failing.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ServiceLike(Protocol):
    """The part of the EngramService interface every pane relies on (the rest is looked up by name)."""

    def list_projects(self) -> list[Any]: ...
    def list_sessions(self) -> list[Any]: ...
    def stats(self, project: str | None = None, session: str | None = None) -> Any: ...
    def list_memories(self, **kwargs: Any) -> Any: ...
    def recall(self, query: str, **kwargs: Any) -> Any: ...
    def get(self, memory_id: str, project: str | None = None, session: str | None = None) -> Any: ...
    def update(self, memory_id: str, patch: Any, project: str | None = None, session: str | None = None) -> Any: ...
    def set_status(self, memory_id: str, status: Any, reason: str = ..., project: str | None = None,
                   session: str | None = None) -> Any: ...
    def forget(self, memory_id: str, project: str | None = None, session: str | None = None,
               reason: str = ...) -> Any: ...
    def promote(self, memory_id: str, target_scope: str | None = None, project: str | None = None,
                session: str | None = None) -> Any: ...
    def injection_context(self, project: str | None = None, session: str | None = None,
                          budget: int | None = None) -> Any: ...


class NotAvailable(RuntimeError):
    """The service in use has no such method yet (a layer that has not landed in this build)."""


def available(service: Any, name: str) -> bool:
    """Does this service offer ``name``? In process: it must be a registered API method; remote: the client says."""
    # The daemon client's method table, as the daemon sent it at connect: read without a call, so the UI
    # thread never waits on the client's lock (held for up to the request timeout while the daemon hangs).
    info = service.__dict__.get("info") if hasattr(service, "__dict__") else None
    if isinstance(info, dict) and info.get("methods"):
        return name in info["methods"]
    # The daemon client answers from the daemon's own method table (RemoteService.has).
    probe = getattr(type(service), "has", None)
    if callable(probe):
        try:
            return bool(probe(service, name))
        except Exception:  # noqa: BLE001 - a failing probe means "cannot tell": try the call and report its error
            return True
    try:
        from engram_core.service import API_METHODS
    except ImportError:  # pragma: no cover - engram_core always ships with the TUI
        API_METHODS = {}
    fn = getattr(service, name, None)
    if not callable(fn):
        return False
    return name in API_METHODS or not hasattr(service, "_all_open_stores")


def call(service: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    if not available(service, name):
        raise NotAvailable(f"{name} is not available yet in this Engram build")
    return getattr(service, name)(*args, **kwargs)


def describe_error(exc: BaseException) -> str:
    """One line a person can act on; never a traceback."""
    if isinstance(exc, NotAvailable):
        return str(exc)
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if isinstance(exc, ConnectionError | FileNotFoundError | TimeoutError) or name in {
            "DaemonUnavailable", "DaemonError", "ConnectionRefusedError"}:
        return f"Engram daemon unreachable ({text}); start it with `engram serve` and press R to retry"
    if "unknown method" in text:
        return f"not available yet in the running daemon: {text}"
    return text if name in {"EngramError", "NotFound", "ValidationError", "ValueError", "RemoteNotFound",
                            "RemoteEngramError"} else f"{name}: {text}"


def attr(obj: Any, name: str, default: Any = None) -> Any:
    """Read a field from a pydantic model or a plain dict (the daemon may hand either)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def value_of(value: Any) -> Any:
    """An enum's value, or the value itself (the daemon client hands enums as plain strings)."""
    return getattr(value, "value", value)
