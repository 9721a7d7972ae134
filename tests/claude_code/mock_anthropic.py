"""A scripted stand-in for the Anthropic Messages API, speaking its wire format (streaming SSE).

The real Claude Code CLI is pointed at it with ``ANTHROPIC_BASE_URL``. Standard library only, bound to 127.0.0.1.
Every request body is recorded (``requests``) so that a test can assert what the CLI sent the model: the system
prompt with SessionStart's context, the tools list with the plugin's MCP tools, the tool results.

The script is a list of *steps*, each the content blocks of one assistant reply. Only the agent's main-loop
requests (those that carry ``tools``) consume steps; side requests (title generation, quota checks) get a short
text reply. A step may also be a callable ``(request_body) -> blocks`` when the reply depends on what came back
(for example a tool result). When the script is exhausted the mock answers "Done." with ``end_turn``.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
Step = list[Block] | Callable[[dict[str, Any]], list[Block]]

_ids = itertools.count(1)


def text(s: str) -> Block:
    return {"type": "text", "text": s}


def tool_use(name: str, tool_input: dict[str, Any], tool_id: str | None = None) -> Block:
    return {
        "type": "tool_use",
        "id": tool_id or f"toolu_mock{next(_ids):06d}",
        "name": name,
        "input": tool_input,
    }


def mcp_tool(tool: str, tool_input: dict[str, Any]) -> Block:
    """A call of one of this plugin's MCP tools, by the name Claude Code gives it."""
    return tool_use(f"mcp__plugin_engram_engram__{tool}", tool_input)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream(blocks: list[Block], model: str) -> Iterable[bytes]:
    """The SSE events of one assistant message made of these blocks."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    yield _sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": f"msg_mock{next(_ids):06d}",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        },
    )
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
            )
            yield _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "text_delta", "text": b["text"]},
                },
            )
        else:
            yield _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}},
                },
            )
            yield _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])},
                },
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def is_main_loop(body: dict[str, Any]) -> bool:
    """The agent's own turn (it offers tools); not a title, topic or quota side request."""
    return bool(body.get("tools"))


def request_text(body: dict[str, Any]) -> str:
    """Everything the model would read in one request: system prompt and messages, as one string."""
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False)


class MockAnthropic:
    """``with MockAnthropic(script) as mock: env["ANTHROPIC_BASE_URL"] = mock.url``."""

    def __init__(self, script: list[Step] | None = None) -> None:
        self.script: list[Step] = list(script or [])
        self.requests: list[dict[str, Any]] = []  # every body, in arrival order (side requests too)
        self.paths: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._json(200, {"data": [], "has_more": False})

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode(errors="replace")}
                path = self.path.split("?", 1)[0]
                with mock._lock:
                    mock.requests.append(body)
                    mock.paths.append(path)
                if path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                    return
                if not path.endswith("/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
                    return
                blocks = mock._next(body)
                model = body.get("model") or "claude-mock"
                if body.get("stream"):
                    payload = b"".join(stream(blocks, model))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                else:
                    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                    self._json(
                        200,
                        {
                            "id": f"msg_mock{next(_ids):06d}",
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": blocks,
                            "stop_reason": stop,
                            "stop_sequence": None,
                            "usage": {"input_tokens": 10, "output_tokens": 20},
                        },
                    )

            def _json(self, code: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _next(self, body: dict[str, Any]) -> list[Block]:
        if not is_main_loop(body):
            return [text("Mock session")]
        with self._lock:
            step = self.script.pop(0) if self.script else None
        if step is None:
            return [text("Done.")]
        try:
            return step(body) if callable(step) else step
        except Exception as exc:  # a broken script step: say so in the test, answer something valid
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return [text("Done.")]

    def extend(self, steps: list[Step]) -> None:
        with self._lock:
            self.script.extend(steps)

    def main_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [b for b in self.requests if is_main_loop(b)]

    def start(self) -> MockAnthropic:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="mock-anthropic",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MockAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
