"""How the UI reaches Engram: an object with EngramService's methods, called from worker threads only.

The TUI never imports the store and never builds SurrealQL: it takes an ``EngramService`` (in process, for tests
and ``--demo``) or the daemon client ``RemoteService`` (same methods, the same pydantic return types: the client
rebuilds each method's declared type from the daemon's JSON) in its constructor.
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
    """Does this service offer ``name``? Both services answer ``has(name)``: in process from the API registry,
    the daemon client from the method table the daemon sent when it connected."""
    try:
        return bool(service.has(name))
    except Exception:  # noqa: BLE001 - cannot tell (the daemon is unreachable): try the call and report its error
        return True


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
