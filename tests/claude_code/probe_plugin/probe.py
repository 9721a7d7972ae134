"""Records what Claude Code hands a plugin: hook payloads and environments, and an MCP server's environment,
JSON-RPC traffic and signals. Writes JSON lines to $PROBE_OUT/<kind>.jsonl. Standard library only."""

import json
import os
import signal
import sys
import time


def record(kind: str, obj: dict) -> None:
    with open(os.path.join(os.environ["PROBE_OUT"], kind + ".jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": time.time(), "pid": os.getpid(), **obj}) + "\n")


def env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(("CLAUDE", "ENGRAM", "MCP"))}


def serve_mcp() -> None:
    def on_signal(signum: int, _frame: object) -> None:
        record("mcp", {"signal": signal.Signals(signum).name})
        if signum == signal.SIGTERM:
            os._exit(0)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    record("mcp", {"env": env(), "cwd": os.getcwd()})
    for line in sys.stdin:
        msg = json.loads(line)
        record("mcp", {"in": msg})
        method = msg.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "probe", "version": "0.0.1"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {
                        "name": "ping",
                        "description": "Answers pong.",
                        "inputSchema": {"type": "object", "properties": {}},
                    }
                ]
            }
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "pong"}]}
        elif "id" in msg:
            result = {}
        else:
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()
    record("mcp", {"eof": True})


if __name__ == "__main__":
    if sys.argv[1] == "mcp":
        serve_mcp()
    else:
        record("hooks", {"hook": sys.argv[1], "payload": json.loads(sys.stdin.read() or "{}"), "env": env()})
