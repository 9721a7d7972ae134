"""MCP server start-up as Claude Code meets it: spawn the server, `initialize`, then the first `tools/list`.

    python bench/mcp_init.py [--runs 20] [--python python3 --python /usr/bin/python3] [--out …]

Both servers are measured in the same run, alternating, against the same warm daemon:
- ``bridge[<python>]``: what .mcp.json runs now, ``python3 -S engram_core/mcp/bridge.py`` (standard library;
  MCP served inside the daemon with the official SDK), once per ``--python`` given: ``python3`` as found on PATH
  (here a pyenv shim, a bash script costing ~0.1-0.4 s per start) and an absolute interpreter;
- ``old_server``: the previous ``engram mcp`` (the SDK imported in the server process, a client of the daemon),
  taken from git at BASELINE so that the comparison stays reproducible.
Each run is a fresh process: time to the `initialize` answer (from spawn), then the first `tools/list` answer.
Prints JSON (p50/p95 in ms, load average) and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BRIDGE = REPO / "engram_core" / "mcp" / "bridge.py"
BASELINE = "fc765ca"  # the last commit whose `engram mcp` ran the SDK in its own process
sys.path.insert(0, str(REPO / "tests"))

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {}},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def old_server_script(tmp: Path) -> Path:
    """The baseline server file, importable outside its package."""
    src = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{BASELINE}:engram_core/mcp_server.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    src = src.replace("from . import __version__", "from engram_core import __version__")
    src = src.replace("from .", "from engram_core.")
    path = tmp / "old_mcp_server.py"
    path.write_text(src)
    return path


def one(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(cwd)
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict[str, Any]) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(req_id: int) -> dict[str, Any]:
        while True:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                raise RuntimeError(f"{cmd[-1]} exited without answering")
            msg = json.loads(line)
            if msg.get("id") == req_id:
                return msg

    send(INIT)
    init = answer(1)
    t_init = time.perf_counter() - t0
    assert "result" in init, init
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    t1 = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = answer(2)
    t_list = time.perf_counter() - t1
    assert len(tools["result"]["tools"]) >= 17, tools
    proc.stdin.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    return t_init * 1000, t_list * 1000


def summary(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "p50": round(statistics.median(s), 1),
        "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 1),
        "min": round(s[0], 1),
        "max": round(s[-1], 1),
    }


def wait_ready(daemon: Any, timeout: float = 120.0) -> None:
    """Until the daemon's warm-up is done (model loaded; its MCP server is built before the model)."""
    c = daemon.client()
    deadline = time.monotonic() + timeout
    while c.call("status")["model"] != "ready" and time.monotonic() < deadline:
        time.sleep(0.2)
    c.close()


def emit(out: dict[str, Any], path: Path) -> None:
    text = json.dumps(out, indent=2)
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--python",
        action="append",
        default=None,
        help="interpreter for the bridge, repeatable (default: python3 from PATH and /usr/bin/python3)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "mcp_init.json")
    args = ap.parse_args()
    pythons = args.python or ["python3", *(["/usr/bin/python3"] if Path("/usr/bin/python3").exists() else [])]

    from support import DaemonProc

    with tempfile.TemporaryDirectory(prefix="engram-mcp-bench-") as tmp_s:
        tmp = Path(tmp_s)
        project = tmp / "project"
        (project / ".git").mkdir(parents=True)
        daemon = DaemonProc(tmp / "home").start()
        try:
            env = {
                **daemon.env,
                "PYTHONPATH": str(REPO),
                "CLAUDE_CODE_SESSION_ID": "bench-session",
                "CLAUDE_PROJECT_DIR": str(project),
            }
            wait_ready(daemon)
            servers = {f"bridge[{py}]": [py, "-S", str(BRIDGE)] for py in pythons}
            servers["old_server"] = [sys.executable, str(old_server_script(tmp))]
            for cmd in servers.values():  # one unmeasured start each: page cache, .pyc files
                one(cmd, env, project)
            results: dict[str, dict[str, list[float]]] = {
                k: {"initialize": [], "tools_list": []} for k in servers
            }
            for _ in range(args.runs):
                for name, cmd in servers.items():
                    t_init, t_list = one(cmd, env, project)
                    results[name]["initialize"].append(t_init)
                    results[name]["tools_list"].append(t_list)
        finally:
            daemon.stop()
    out = {
        "bench": "mcp_init",
        "runs": args.runs,
        "pythons": pythons,
        "baseline_commit": BASELINE,
        "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "ms": {name: {k: summary(v) for k, v in r.items()} for name, r in results.items()},
        "note": "initialize: spawn to answer; tools_list: first tools/list after initialize; daemon warm",
    }
    emit(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
