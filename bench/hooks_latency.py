"""PostToolUse hook wall time with the daemon up, next to its baselines, in one run.

    python bench/hooks_latency.py [--runs 200] [--python python3] [--out bench/results/hooks_latency.json]

Measured, each as a fresh process the way Claude Code runs a hook (stdin JSON, wait for exit):
- ``entry``: ``python3 -S hooks/run_hook.py PostToolUse`` with a realistic Edit event (what hooks.json runs: it
  reads the event and leaves the work to a detached child, so this is what Claude Code waits for);
- ``hook``: ``python3 -S hooks/engram_hook.py PostToolUse``, the same event's whole work in one process (what that
  child does; what hooks.json ran before run_hook.py);
- ``hook_no_S``: the same without ``-S`` (site-packages .pth files of the interpreter cost extra);
- ``bare_python``: ``python3 -S -c "import json, socket"``, the floor;
- ``direct_sdk``: a script that imports the SurrealDB SDK, opens a store and writes one row (the design we avoid).
Prints JSON and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HOOK = REPO / "hooks" / "engram_hook.py"
ENTRY = REPO / "hooks" / "run_hook.py"

DIRECT = """
import sys
from surrealdb import Surreal
db = Surreal("surrealkv://" + sys.argv[1])
db.use("bench", "bench")
db.query("CREATE memory SET content = $c, memory_type = 'episodic'", {"c": "Modified src/app.py"}).execute()
db.close()
"""


def stats(ms: list[float]) -> dict[str, Any]:
    s = sorted(ms)

    def pct(p: float) -> float:
        return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 1)

    return {
        "n": len(s),
        "p50": pct(50),
        "p95": pct(95),
        "mean": round(statistics.fmean(s), 1),
        "min": round(s[0], 1),
    }


def timed(cmd: list[str], stdin: bytes | None, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return (time.perf_counter() - t0) * 1000


CAPTURED = REPO / "tests" / "data" / "claude_code"
CAPTURED_CWD = "/tmp/capproj5bo0ro92"
CAPTURED_SESSION = "d7973bf0-846d-4d38-8afb-0987b557d37e"


def per_event(py: str, project: Path, env: dict[str, str], rounds: int) -> dict[str, Any]:
    """Each hook of a real captured session (tests/data/claude_code/), replayed ``rounds`` times as new sessions,
    plus the two payloads whose redaction costs most: a 1 MB Write and a 30 000-character failure (Claude Code
    cuts tool output there)."""
    files = sorted(CAPTURED.glob("*.json"))
    times: dict[str, list[float]] = {}
    labels = {
        "002": "PostToolUse Bash success (no failure on record: no round trip)",
        "003": "PostToolUseFailure Bash",
        "004": "PostToolUse Write",
        "005": "PostToolUse Edit",
        "006": "PostToolUse Bash success after a failure (the fix)",
    }
    big_write = {
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "cwd": str(project),
        "tool_input": {"file_path": f"{project}/big.py", "content": "x = 'abc'  # filler\n" * 50_000},
        "tool_response": {"type": "create", "filePath": f"{project}/big.py"},
    }
    big_fail = {
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "cwd": str(project),
        "tool_input": {"command": "make test"},
        "error": "Exit code 2\n" + "line of output\n" * 2140,
    }
    for r in range(rounds):
        sid = f"bench-events-{r}"
        for f in files:
            raw = f.read_text().replace(CAPTURED_CWD, str(project)).replace(CAPTURED_SESSION, sid)
            name = json.loads(raw)["hook_event_name"]
            label = labels.get(f.name[:3], name)
            times.setdefault(label, []).append(timed([py, "-S", str(HOOK), name], raw.encode(), env))
        for label, payload in (
            ("PostToolUse Write of 1 MB", big_write),
            ("PostToolUseFailure Bash with 30 000 characters", big_fail),
        ):
            data = json.dumps({**payload, "session_id": sid}).encode()
            times.setdefault(label, []).append(
                timed([py, "-S", str(HOOK), payload["hook_event_name"]], data, env)
            )
    return {label: stats(ms) for label, ms in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--direct-runs", type=int, default=20)
    ap.add_argument("--python", default=shutil.which("python3") or "python3")
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "hooks_latency.json"))
    args = ap.parse_args()
    py = os.path.realpath(args.python)

    from engram_core.wire.client import connect

    tmp = Path(tempfile.mkdtemp(prefix="engram-hookbench-"))
    home, project = tmp / "home", tmp / "proj"
    (project / ".git").mkdir(parents=True)
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_DAEMON_IDLE_TIMEOUT_S": "0"}
    if args.no_model:
        env["ENGRAM_EMBEDDING_PROVIDER"] = "none"
    os.environ.update(env)
    remote = connect(home, timeout=120)
    remote.call("store", memory={"content": "bench warm-up", "scope": "user"})

    def event(i: int) -> bytes:
        return json.dumps(
            {
                "session_id": "bench-session",
                "transcript_path": str(tmp / "t.jsonl"),
                "cwd": str(project),
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_use_id": f"toolu_{i}",
                "tool_input": {
                    "file_path": f"{project}/src/module_{i}.py",
                    "old_string": "return a + b",
                    "new_string": "return a + b + c  # include the carry",
                },
                "tool_response": {"filePath": f"{project}/src/module_{i}.py", "structuredPatch": []},
            }
        ).encode()

    for i in range(5):  # warm the page cache and the .pyc files
        timed([py, "-S", str(HOOK), "PostToolUse"], event(-i - 1), env)
    hook, hook_no_s, bare, entry = [], [], [], []
    for i in range(args.runs):
        entry.append(timed([py, "-S", str(ENTRY), "PostToolUse"], event(200_000 + i), env))
        hook.append(timed([py, "-S", str(HOOK), "PostToolUse"], event(i), env))
        bare.append(timed([py, "-S", "-c", "import json, socket"], None, env))
        if i % 4 == 0:
            hook_no_s.append(timed([py, str(HOOK), "PostToolUse"], event(100_000 + i), env))
    events = per_event(py, project, env, max(5, args.runs // 10))
    direct = []
    script = tmp / "direct.py"
    script.write_text(DIRECT)
    for i in range(args.direct_runs):
        direct.append(timed([sys.executable, str(script), str(tmp / f"direct-{i % 2}.db")], None, env))
    flush = remote.call("flush", timeout_s=120)
    status = remote.call("status")
    spooled = status["spool_ingested"]
    remote.call("shutdown")
    result = {
        "python": py,
        "runs": args.runs,
        "model": not args.no_model,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "entry_ms": stats(entry),
        "hook_ms": stats(hook),
        "hook_without_-S_ms": stats(hook_no_s),
        "bare_python_ms": stats(bare),
        "direct_sdk_write_ms": stats(direct),
        "hook_overhead_over_bare_p50_ms": round(stats(hook)["p50"] - stats(bare)["p50"], 1),
        "per_event_ms": events,
        "events_applied": status["events_applied"],
        "spooled_then_ingested": spooled,
        "flush": flush,
    }
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
