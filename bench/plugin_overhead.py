"""What the Engram plugin costs a real Claude Code session: a scripted three-turn `claude -p` run with and
without ``--plugin-dir``, in one run, against the scripted model (tests/claude_code/mock_anthropic.py).

    python bench/plugin_overhead.py [--pairs 10] [--python python3] [--nice -10] [--out bench/results/plugin_overhead.json]

The session: turn 1 runs Bash, turn 2 writes a file, turn 3 answers; so SessionStart, UserPromptSubmit,
two PostToolUse, Stop and SessionEnd hooks run, and the MCP server starts (its tools must be in the first
request). With the plugin, without it, and with the MCP server alone (a copy without hooks) alternate (``--pairs``
times) against one warm daemon; the figure is the difference of the medians of the CLI's wall time. After each run
the bench waits for the hooks' detached children and the daemon's queue (not counted), so that no variant pays for
the previous one's background work. ``--python`` is the interpreter the hooks and the MCP bridge
run with (``python3`` from PATH, or an absolute one through ENGRAM_PYTHON as `engram setup` records it).

Each hook's own wall time comes from one more run with a copy of hooks.json whose commands are wrapped by a
timer (the wrapper's own start-up is not counted). The MCP server's connect time and its exit after SIGINT are
read from Claude Code's debug log (its own clock), which the machine's load disturbs less than wall times. Prints JSON with the load average; writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "claude_code"))

from harness import MCP_PREFIX, ClaudeCode, find_claude  # noqa: E402
from mcp_init import emit, wait_ready  # noqa: E402
from mock_anthropic import MockAnthropic, text, tool_use  # noqa: E402

TIMER = """import json, subprocess, sys, time
log, event, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
data = sys.stdin.buffer.read()
t0 = time.perf_counter()
p = subprocess.run(cmd, shell=True, input=data, capture_output=True)
ms = (time.perf_counter() - t0) * 1000
sys.stdout.buffer.write(p.stdout)
sys.stderr.buffer.write(p.stderr)
with open(log, "a") as fh:
    fh.write(json.dumps({"event": event, "ms": ms, "exit": p.returncode}) + "\\n")
sys.exit(p.returncode)
"""


RUNS = [0]


def script() -> list[Any]:
    RUNS[0] += (
        1  # a new file each run: Write refuses to overwrite a file it has not read (no PostToolUse then)
    )
    return [
        [tool_use("Bash", {"command": "echo building && ls", "description": "look around"})],
        [tool_use("Write", {"file_path": f"notes-{RUNS[0]}.txt", "content": "bench notes\n"})],
        [text("All done.")],
    ]


def timed_plugin(tmp: Path, log: Path) -> Path:
    """A copy of the plugin whose hooks run under the timer."""
    dst = tmp / "timed-plugin"
    shutil.copytree(
        REPO,
        dst,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "tests", "bench", "screenshots", "*.egg-info", "docs"
        ),
    )
    timer = dst / "hooks" / "timer.py"
    timer.write_text(TIMER)
    spec = json.loads((dst / "hooks" / "hooks.json").read_text())
    for event, groups in spec["hooks"].items():
        for group in groups:
            for hook in group["hooks"]:
                inner = hook["command"].replace("${CLAUDE_PLUGIN_ROOT}", str(dst))
                hook["command"] = f"{sys.executable} -S {timer} {log} {event} '{inner}'"
    (dst / "hooks" / "hooks.json").write_text(json.dumps(spec, indent=2))
    return dst


def mcp_only_plugin(tmp: Path, name: str = "mcp-only-plugin") -> Path:
    """A copy of the plugin without hooks: what the MCP server alone costs."""
    dst = tmp / name
    shutil.copytree(
        REPO,
        dst,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "tests", "bench", "screenshots", "*.egg-info", "docs"
        ),
    )
    (dst / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {}}))
    return dst


def baseline_plugin(tmp: Path, commit: str) -> Path:
    """A copy of the plugin whose hooks, hooks.json, .mcp.json and MCP bridge are those of ``commit`` (the daemon
    stays this checkout's): the plugin's own processes before and after, in the same run."""
    import subprocess

    dst = mcp_only_plugin(tmp, f"baseline-{commit}")
    shutil.rmtree(dst / "hooks")  # only that commit's hook files
    paths = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "ls-tree",
            "-r",
            "--name-only",
            commit,
            "hooks",
            ".mcp.json",
            "engram_core/mcp_bridge.py",
            "engram_core/mcp/bridge.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for rel in paths:
        blob = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{rel}"], capture_output=True, check=True
        ).stdout
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(blob)
    return dst


def process_cpu(plugin: Path, python: str, home: Path, project: Path, runs: int = 20) -> dict[str, float]:
    """CPU ms (user + sys, median) of the processes Claude Code waits for, which the machine's load inflates far
    less than wall times: a PostToolUse hook (Write) until it exits, and the MCP server from its start to the
    `initialize` answer. A detached child is not counted: Claude Code does not wait for it."""
    import resource
    import subprocess

    entry = (
        plugin
        / "hooks"
        / ("run_hook.py" if (plugin / "hooks" / "run_hook.py").exists() else "engram_hook.py")
    )
    mcp = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["engram"]["args"][-1]
    bridge = mcp.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(ENGRAM_HOME=str(home), CLAUDE_PROJECT_DIR=str(project))
    event = json.dumps(
        {
            "session_id": "bench-cpu",
            "transcript_path": "/dev/null",
            "cwd": str(project),
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(project / "cpu.txt"), "content": "x\n"},
            "tool_response": {"type": "create", "filePath": str(project / "cpu.txt")},
        }
    ).encode()
    init = (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
        )
        + "\n"
    ).encode()

    def cpu(run: Any) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000

    def hook() -> None:
        subprocess.run(
            [python, "-S", str(entry), "PostToolUse"], input=event, env=env, capture_output=True, timeout=30
        )

    def server() -> None:
        proc = subprocess.Popen(
            [python, "-S", bridge],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(project),
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(init)
        proc.stdin.flush()
        proc.stdout.readline()
        proc.stdin.close()
        proc.wait(10)

    def bare() -> None:
        subprocess.run([python, "-S", "-c", "pass"], env=env, timeout=30)

    hook()  # bytecode caches written
    server()
    out: dict[str, list[float]] = {
        "bare_python": [],
        "post_tool_use_hook": [],
        "mcp_server_to_initialize": [],
    }
    for _ in range(runs):
        out["bare_python"].append(cpu(bare))
        out["post_tool_use_hook"].append(cpu(hook))
        out["mcp_server_to_initialize"].append(cpu(server))
    return {k: round(statistics.median(v), 1) for k, v in out.items()}


MCP_LOG: list[dict[str, float]] = []  # per run with the plugin: Claude Code's own MCP timings (debug log)


def _stamp(line: str) -> float:
    return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()


def mcp_timings(debug: str) -> dict[str, float]:
    """Connect time as Claude Code logs it, and SIGINT-to-exit of the MCP server process."""
    out: dict[str, float] = {}
    sigint = None
    for line in debug.splitlines():
        if "plugin:engram:engram" not in line:
            continue
        m = re.search(r"Successfully connected .* in (\d+)ms", line)
        if m:
            out["connect_ms"] = float(m.group(1))
        if "Sending SIGINT" in line:
            sigint = _stamp(line)
        if "process exited" in line and sigint is not None and "exit_after_sigint_ms" not in out:
            out["exit_after_sigint_ms"] = round((_stamp(line) - sigint) * 1000, 1)
    return out


PHASES: dict[str, list[dict[str, float]]] = {}  # per variant: start-up and shut-down from Claude Code's log


def phases(debug: str) -> dict[str, float]:
    """Seconds from Claude Code's first log line to its first model request, and from the last answer's first
    chunk to its last log line: where a plugin's start-up and shut-down show, without node's own start."""
    lines = [x for x in debug.splitlines() if x[:4].isdigit()]
    first_req = next((_stamp(x) for x in lines if "[API REQUEST]" in x), None)
    last_chunk = next((_stamp(x) for x in reversed(lines) if "Stream started" in x), None)
    if not lines or first_req is None or last_chunk is None:
        return {}
    return {
        "startup_s": round(first_req - _stamp(lines[0]), 3),
        "shutdown_s": round(_stamp(lines[-1]) - last_chunk, 3),
    }


def run_once(
    cc: ClaudeCode, plugin: Path | None, env: dict[str, str], variant: str = "warm-up", daemon: Any = None
) -> tuple[float, bool]:
    with MockAnthropic(script()) as mock:
        run = cc.run("Look around and leave a note.", mock.url, plugin_dir=plugin, env=env)
        if run.returncode != 0:
            raise RuntimeError(run.describe())
        first = mock.main_requests()[0]
        has_tools = any(t["name"].startswith(MCP_PREFIX) for t in first.get("tools") or [])
    if (
        daemon is not None
    ):  # the run's hook events applied (cc.run waited for the hooks' detached children), so
        c = daemon.client()  # the next variant does not pay for this one's work (SessionEnd's promotion pass)
        try:
            c.call("flush", timeout_s=60)
        finally:
            c.close()
    if plugin is not None:
        MCP_LOG.append(mcp_timings(run.debug))
    PHASES.setdefault(variant, []).append(phases(run.debug))
    return run.seconds, has_tools


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--python", default="python3")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "plugin_overhead.json")
    ap.add_argument(
        "--baseline",
        metavar="COMMIT",
        help="also run the plugin's hooks, .mcp.json and bridge as they were at COMMIT (before/after)",
    )
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run the bench (and the daemon, Claude Code, hooks it starts) at this niceness; a negative "
        "one (root only) keeps other work on a shared machine from deciding the figures",
    )
    args = ap.parse_args()
    if args.nice:
        os.nice(args.nice)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    binary, why = find_claude()
    if binary is None:
        print(json.dumps({"bench": "plugin_overhead", "skipped": why}))
        return 0
    from support import DaemonProc

    with tempfile.TemporaryDirectory(prefix="engram-overhead-") as tmp_s:
        tmp = Path(tmp_s)
        daemon = DaemonProc(tmp / "engram-home").start()
        try:
            wait_ready(daemon)
            cc = ClaudeCode(binary, tmp / "cc", tmp / "engram-home")
            env = {"PYTHONPATH": str(REPO)}
            if args.python != "python3":
                env["ENGRAM_PYTHON"] = args.python
            run_once(
                cc, REPO, env, daemon=daemon
            )  # warm: page cache, .pyc files, Claude Code's first-run files
            run_once(cc, None, env)
            mcp_only = mcp_only_plugin(tmp)
            baseline = baseline_plugin(tmp, args.baseline) if args.baseline else None
            base_s: list[float] = []
            with_s: list[float] = []
            without_s: list[float] = []
            mcp_s: list[float] = []
            tools_first_turn = []
            for _ in range(args.pairs):
                s, ok = run_once(cc, REPO, env, "with_plugin", daemon)
                with_s.append(s)
                tools_first_turn.append(ok)
                without_s.append(run_once(cc, None, env, "without_plugin", daemon)[0])
                s, ok = run_once(cc, mcp_only, env, "mcp_only", daemon)
                mcp_s.append(s)
                tools_first_turn.append(ok)
                if baseline is not None:
                    base_s.append(run_once(cc, baseline, env, "baseline", daemon)[0])
            cpu_ms = {"this checkout": process_cpu(REPO, args.python, tmp / "engram-home", cc.project)}
            if baseline is not None:
                cpu_ms[f"baseline {args.baseline}"] = process_cpu(
                    baseline, args.python, tmp / "engram-home", cc.project
                )
            log = tmp / "hook-times.jsonl"
            run_once(cc, timed_plugin(tmp, log), env)
            hooks: dict[str, list[float]] = {}
            for line in log.read_text().splitlines():
                rec = json.loads(line)
                hooks.setdefault(rec["event"], []).append(round(rec["ms"], 1))
        finally:
            daemon.stop()
    out = {
        "bench": "plugin_overhead",
        "pairs": args.pairs,
        "python": args.python,
        "loadavg_1_5_15_at_start": load_at_start,
        "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "nice": os.nice(0),
        "claude_code": str(binary),
        "seconds": {
            "with_plugin": [round(x, 3) for x in with_s],
            "without_plugin": [round(x, 3) for x in without_s],
            "with_plugin_median": round(statistics.median(with_s), 3),
            "without_plugin_median": round(statistics.median(without_s), 3),
            "mcp_only": [round(x, 3) for x in mcp_s],
            "mcp_only_median": round(statistics.median(mcp_s), 3),
            "overhead_median": round(statistics.median(with_s) - statistics.median(without_s), 3),
            "mcp_only_overhead_median": round(statistics.median(mcp_s) - statistics.median(without_s), 3),
            **(
                {
                    f"baseline_{args.baseline}": [round(x, 3) for x in base_s],
                    "baseline_overhead_median": round(
                        statistics.median(base_s) - statistics.median(without_s), 3
                    ),
                }
                if base_s
                else {}
            ),
        },
        "mcp_tools_in_first_request": tools_first_turn,
        "mcp_as_claude_code_logs_it": {
            "connect_ms": [t.get("connect_ms") for t in MCP_LOG[2:]],
            "exit_after_sigint_ms": [t.get("exit_after_sigint_ms") for t in MCP_LOG[2:]],
        },
        "claude_code_log_phases_median_s": {
            v: {
                k: round(statistics.median(p[k] for p in runs if k in p), 3)
                for k in ("startup_s", "shutdown_s")
            }
            for v, runs in PHASES.items()
            if v != "warm-up" and all(runs)
        },
        "hook_ms": hooks,
        "cpu_ms_of_what_claude_code_waits_for": cpu_ms,
    }
    emit(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
