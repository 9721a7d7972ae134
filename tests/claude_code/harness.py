"""Drive the real Claude Code CLI (`claude -p`) against :mod:`mock_anthropic`, with this checkout as a plugin.

Used by the tests in this folder and by ``bench/plugin_overhead.py``. Claude Code comes from npm
(``@anthropic-ai/claude-code``), installed once into a cache directory (``$ENGRAM_CLAUDE_CODE_CACHE``, default
``~/.cache/cc``); :func:`find_claude` returns why it cannot be had (no node, no npm, install failed) instead of
failing, so that the tests skip with that reason printed.

Each run gets its own HOME (Claude Code's settings, transcripts and MCP failure cache live there) and the caller's
ENGRAM_HOME, so nothing is shared with the user's real Claude Code or Engram.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import wait_for_hook_children

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code@2.1.197"
MCP_PREFIX = "mcp__plugin_engram_engram__"


def cache_dir() -> Path:
    return Path(os.environ.get("ENGRAM_CLAUDE_CODE_CACHE") or Path.home() / ".cache" / "cc")


def find_claude(install: bool = True) -> tuple[Path | None, str]:
    """(path of the `claude` binary, "") or (None, why not). Installs it from npm into the cache when missing."""
    explicit = os.environ.get("ENGRAM_CLAUDE_BIN")
    if explicit:
        return (
            (Path(explicit), "")
            if Path(explicit).exists()
            else (None, f"ENGRAM_CLAUDE_BIN={explicit} not found")
        )
    binary = cache_dir() / "node_modules" / ".bin" / "claude"
    if binary.exists():
        return binary, ""
    if shutil.which("node") is None:
        return None, "node is not installed (Claude Code needs node >= 18)"
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm is not installed (needed to install Claude Code)"
    if not install:
        return None, f"Claude Code is not installed in {cache_dir()}"
    cache_dir().mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache_dir()), CLAUDE_CODE_PACKAGE],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"npm install {CLAUDE_CODE_PACKAGE} failed: {exc}"
    if proc.returncode != 0 or not binary.exists():
        return (
            None,
            f"npm install {CLAUDE_CODE_PACKAGE} failed (exit {proc.returncode}): {proc.stderr[-500:]}",
        )
    return binary, ""


@dataclass
class Run:
    """What one `claude -p` run did, as seen from outside."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    debug_file: Path
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def debug(self) -> str:
        try:
            return self.debug_file.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def session_id(self) -> str | None:
        for e in self.events:
            if e.get("session_id"):
                return e["session_id"]
        return None

    @property
    def session_ids(self) -> list[str]:
        """Every session id the run reported, in order (`/clear` starts a new one in the same process)."""
        return list(dict.fromkeys(e["session_id"] for e in self.events if e.get("session_id")))

    @property
    def init(self) -> dict[str, Any]:
        return next((e for e in self.events if e.get("type") == "system" and e.get("subtype") == "init"), {})

    @property
    def result(self) -> dict[str, Any]:
        return next((e for e in reversed(self.events) if e.get("type") == "result"), {})

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block Claude Code fed back to the model, in order."""
        out = []
        for e in self.events:
            if e.get("type") == "user":
                for block in (e.get("message") or {}).get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(block)
        return out

    def describe(self) -> str:
        return (
            f"exit {self.returncode} in {self.seconds:.1f} s\nstderr: {self.stderr[-1500:]}\n"
            f"stdout tail: {self.stdout[-1500:]}"
        )


class ClaudeCode:
    """One isolated Claude Code user: a private HOME, an ENGRAM_HOME, a project folder."""

    def __init__(self, binary: Path, root: Path, engram_home: Path, project: Path | None = None) -> None:
        self.binary = binary
        self.root = root
        self.home = root / "home"
        self.engram_home = engram_home
        self.project = project or root / "project"
        self.runs = 0
        for d in (self.home, self.project / ".git"):
            d.mkdir(parents=True, exist_ok=True)

    def env(self, base_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        venv_bin = str(Path(sys.executable).parent)
        keep = {
            k: v
            for k, v in os.environ.items()
            if k
            in (
                "PYTHONPATH",
                "LANG",
                "LC_ALL",
                "TMPDIR",
                "HF_HOME",
                "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE",
                "SENTENCE_TRANSFORMERS_HOME",
                "XDG_CACHE_HOME",
                "TORCH_HOME",
            )
        }
        # The model cache normally lives under the real HOME: keep pointing there although HOME is private.
        keep.setdefault("HF_HOME", str(Path.home() / ".cache" / "huggingface"))
        return {
            **keep,
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "ENGRAM_HOME": str(self.engram_home),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-dummy-key",
            "IS_SANDBOX": "1",  # lets root use --dangerously-skip-permissions
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            **(extra or {}),
        }

    def run(
        self,
        prompt: str | list[str],
        base_url: str,
        *,
        plugin_dir: Path | None = REPO_ROOT,
        cwd: Path | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 90.0,
    ) -> Run:
        self.runs += 1
        debug = self.root / f"debug-{self.runs}.log"
        # Several prompts (a conversation, `/clear` included) go in as stream-json user messages on stdin, each
        # after the previous turn's result, as a person types them (a message queued during `/clear` is dropped).
        many = not isinstance(prompt, str)
        cmd = [
            str(self.binary),
            "-p",
            *(["--input-format", "stream-json"] if many else [prompt]),
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--debug-file",
            str(debug),
        ]
        if plugin_dir is not None:
            cmd += ["--plugin-dir", str(plugin_dir)]
        cmd += args or []
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=str(cwd or self.project),
            env=self.env(base_url, env),
            text=True,
            stdin=subprocess.PIPE if many else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        err: list[str] = []
        reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        assert proc.stdout is not None
        lines: list[str] = []
        events: list[dict[str, Any]] = []
        todo = list(prompt) if many else []

        def say_next() -> None:
            assert proc.stdin is not None
            if todo:
                proc.stdin.write(
                    json.dumps({"type": "user", "message": {"role": "user", "content": todo.pop(0)}}) + "\n"
                )
                proc.stdin.flush()
            else:
                proc.stdin.close()

        try:
            if many:
                say_next()
            for line in proc.stdout:
                lines.append(line)
                if line.strip().startswith("{"):
                    with contextlib.suppress(ValueError):
                        events.append(json.loads(line))
                        if many and events[-1].get("type") == "result" and not proc.stdin.closed:  # type: ignore[union-attr]
                            say_next()
            proc.wait()
            reader.join()
        finally:
            timer.cancel()
        done = Run(proc.returncode, "".join(lines), "".join(err), time.perf_counter() - t0, debug, events)
        wait_for_hook_children(self.engram_home, done.session_ids)  # Claude Code did not wait for them
        return done

    def command(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """`claude <args>` (e.g. `plugin validate DIR`) in this user's environment."""
        return subprocess.run(
            [str(self.binary), *args],
            cwd=str(self.project),
            env=self.env("http://127.0.0.1:9"),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def result_text(block: dict[str, Any]) -> str:
    """A tool_result's text, whether Claude Code gave it as a string or as content blocks."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content or [] if isinstance(c, dict))
