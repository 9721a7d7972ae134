"""The API registry: what the daemon serves, how its arguments are checked, and the errors it answers with.

A function marked ``@api`` (a service method, or an organise/tool function taking the core first) gets its
arguments validated by pydantic from its type hints and bumps the change counter. It is served only once the
facade declares it: ``@serve`` on ``EngramService`` puts every ``@api`` member of the class in ``API_METHODS``,
so the set the daemon serves is written in one place (service.py), whatever else happens to be imported.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError, validate_call

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

API_METHODS: dict[str, Callable[..., Any]] = {}
# Methods that take `service.api_lock` themselves around the parts touching shared state, so that the daemon
# can call them without its request lock: a console query running for seconds must not hold other clients, nor
# may the maintenance sweep (it takes the lock a slice at a time: maintenance.maintain), nor a sync while git talks
# to its remote (sync/engine.py takes it around the store work only). A compaction takes its store's turn before
# the request lock (storage/locks.py), so `compact` and `redact_stored` (which compacts) are here.
UNLOCKED_API = frozenset({"run_query", "maintain", "sync_init", "sync_run", "compact", "redact_stored"})
# Calls that never change memories: they leave the change counter alone.
READ_ONLY_METHODS = frozenset(
    {
        "list_projects",
        "project_identity",
        "sync_status",
        "list_sessions",
        "get",
        "list_memories",
        "stats",
        "injection_context",
        "session_summary",
        "export_memories",
        "health",
        "revision",
        "list_consolidations",
        "list_contradictions",
        "memory_graph",
        "retrieval_history",
        "settings_report",
        "count_contradictions",
        "preview_write",
    }
)
_MARK = "__engram_api__"


class NotFound(LookupError):
    """No memory (or session, or project) has that id."""


class EngramError(ValueError):
    """A request Engram refuses; the message says what was wrong and what to do."""


class UnknownMethod(LookupError):
    """The daemon serves no method of that name."""

    def __init__(self, method: str) -> None:
        super().__init__(f"the daemon has no method {method!r} (not available in this version)")


def api(fn: F) -> F:
    """Mark ``fn`` as an API method: arguments validated from its type hints, the change counter bumped."""
    checked = counted(validate_call(config={"arbitrary_types_allowed": True})(fn))
    setattr(checked, _MARK, True)
    return checked


def serve(cls: C) -> C:
    """Serve every ``@api`` member of ``cls`` (its own and its bases') under its attribute name."""
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            if getattr(member, _MARK, False):
                API_METHODS[name] = member
    return cls


# A change counter: every API call that may change memories bumps it, so a front end can poll ``revision()``
# (one cheap call) and reload only when something changed, whichever client made the change.
_revision = 0
_revision_lock = threading.Lock()


def revision() -> int:
    return _revision


def counted(fn: F) -> F:
    """Bump the change counter after ``fn`` runs, unless it only reads (a recall that does not strengthen)."""
    if fn.__name__ in READ_ONLY_METHODS:
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _revision
        try:
            return fn(*args, **kwargs)
        finally:
            if not (fn.__name__ == "recall" and kwargs.get("strengthen") is False):
                with _revision_lock:
                    _revision += 1

    return wrapper  # type: ignore[return-value]


def call_api(service: Any, method: str, params: dict[str, Any]) -> Any:
    """Dispatch a daemon request to a served method (pydantic validates the arguments)."""
    fn = API_METHODS.get(method)
    if fn is None:
        raise EngramError(f"unknown method {method!r}")
    return fn(service, **params)


def parameter_names(method: str) -> list[str]:
    """The arguments a served method takes, after the service or core it is given."""
    fn = API_METHODS.get(method)
    if fn is None:
        raise UnknownMethod(method)
    return [
        p for p in inspect.signature(inspect.unwrap(fn)).parameters if p not in ("self", "service", "core")
    ]


def short_error(exc: BaseException) -> str:
    """One line per problem of a refused record or argument."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def classify(exc: BaseException) -> tuple[str, str]:
    """(error type, one-line message) for the wire: never a traceback."""
    from .paths import ConfigError
    from .storage import StoreError

    if isinstance(exc, UnknownMethod):
        return "NotFound", str(exc)
    if isinstance(exc, NotFound):
        return "NotFound", str(exc.args[0] if exc.args else exc)
    if isinstance(exc, ValidationError):
        parts = []
        for e in exc.errors():
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "memory") or "arguments"
            parts.append(f"{loc}: {e.get('msg')}")
        return "ValidationError", "; ".join(parts)
    if isinstance(exc, EngramError | ConfigError):
        return "EngramError", str(exc)
    if isinstance(exc, StoreError):  # disk full, read-only store: the message already says what to do
        return "EngramError", str(exc)
    if isinstance(exc, TypeError):
        return "ValidationError", str(exc)
    log.exception("internal error")
    return "Internal", f"{exc.__class__.__name__}: {exc}"
