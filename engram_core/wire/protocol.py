"""The daemon's wire protocol: newline-delimited JSON over a Unix socket.

Standard library only, so that the client path (CLI, MCP server, TUI) stays light and so that a hook script
can speak the same protocol with nothing but ``socket`` and ``json`` (hooks re-implement these few lines
rather than import this package).

Request:  ``{"v": 1, "id": 7, "method": "recall", "params": {...}}``
Response: ``{"v": 1, "id": 7, "ok": true, "result": ...}`` or
          ``{"v": 1, "id": 7, "ok": false, "error": {"type": "NotFound", "message": "..."}}``

A line longer than :data:`MAX_LINE` is refused with a clear error and the connection is closed (the rest of the
line cannot be resynchronised cheaply); a line that is not a JSON object gets an error and the connection stays up.
"""

from __future__ import annotations

import json
import os
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
MAX_LINE = 8 * 1024 * 1024
SOCKET_NAME = "engram.sock"
PID_NAME = "engram.pid"
ERROR_TYPES = ("NotFound", "EngramError", "ValidationError", "ProtocolMismatch", "Internal", "Unavailable")


class ProtocolError(RuntimeError):
    """The bytes on the socket are not a request (or a response) this side understands."""


class RemoteError(RuntimeError):
    """An error the daemon answered with; ``type`` is one of :data:`ERROR_TYPES`."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def pid_path(home: Path) -> Path:
    return home / PID_NAME


def mismatch_message(daemon_v: object, client_v: object = PROTOCOL_VERSION) -> str:
    return (
        f"the Engram daemon speaks protocol {daemon_v}, this client speaks {client_v}: "
        "run `engram stop` and retry (the next command starts a matching daemon)"
    )


def json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    # Record ids and other SDK values: their text form is what callers can use.
    return str(value)


def encode(message: dict[str, Any]) -> bytes:
    line = json.dumps(message, default=json_default, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )
    return line + b"\n"


def request(req_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    return encode({"v": PROTOCOL_VERSION, "id": req_id, "method": method, "params": params or {}})


def ok(req_id: Any, result: Any) -> bytes:
    dump_json = getattr(result, "model_dump_json", None)
    if callable(dump_json):
        # A model (a recall's answer, say) in pydantic's own encoder, several times sooner than json over
        # model_dump (docs/benchmarks.md). The same JSON values; only the envelope is written here.
        head = encode({"v": PROTOCOL_VERSION, "id": req_id, "ok": True, "result": None})
        body: str = dump_json()
        return head[: -len(b"null}\n")] + body.encode("utf-8") + b"}\n"
    return encode({"v": PROTOCOL_VERSION, "id": req_id, "ok": True, "result": result})


def error(req_id: Any, type_: str, message: str) -> bytes:
    return encode(
        {"v": PROTOCOL_VERSION, "id": req_id, "ok": False, "error": {"type": type_, "message": message}}
    )


def parse_request(line: bytes) -> tuple[Any, str, dict[str, Any], Any]:
    """(id, method, params, protocol version) of one request line, or ProtocolError saying what is wrong with it."""
    try:
        msg = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the request is not JSON ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(msg, dict):
        raise ProtocolError("a request must be a JSON object with v, id, method and params")
    method = msg.get("method")
    params = msg.get("params", {})
    if not isinstance(method, str) or not method:
        raise ProtocolError("the request has no method (a non-empty string)")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ProtocolError("params must be a JSON object of named arguments")
    return msg.get("id"), method, params, msg.get("v")


def parse_response(line: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the daemon answered something that is not JSON: {exc}") from None
    if not isinstance(msg, dict) or "ok" not in msg:
        raise ProtocolError("the daemon answered something that is not a response")
    return msg


def private_open(path: Path, flags: int) -> int:
    """Open a file owner-only from the start (no window where another user could read it)."""
    return os.open(path, flags, 0o600)
