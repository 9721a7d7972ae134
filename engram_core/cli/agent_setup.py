"""`engram setup <agent>`: connect Engram to a coding agent in one command, and the checks `engram doctor` runs on it.

Claude Code copies an installed plugin into its own cache, so `${CLAUDE_PLUGIN_ROOT}` points at that copy, not
at this installation, and Claude Code starts the MCP server and the hooks with whatever `engram` and `python3`
are on the PATH it was started with. Both broke real set-ups. So setup writes a *generated* plugin into a local
marketplace under the data root, with every command an absolute path into this installation, and installs it
through Claude Code's own `claude plugin` commands (a supported route that survives Claude Code updates).

Codex and Gemini CLI have no plugin format: setup adds the MCP server to their own config files (Codex
`~/.codex/config.toml`, Gemini `~/.gemini/settings.json`) and the memory protocol to their global instruction
files (`AGENTS.md`, `GEMINI.md`) between markers, so a second run replaces rather than appends.

Standard library only (a CLI command should cost a Python start, not an SDK import).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..wire.protocol import private_open

ROOT = Path(__file__).resolve().parents[2]  # the checkout: engram_core/cli/ is two levels down
MARKETPLACE = "engram-local"
PLUGIN = "engram"
PLUGIN_ID = f"{PLUGIN}@{MARKETPLACE}"
MIN_HOOK_PYTHON = (3, 8)
MCP_INIT_TIMEOUT_S = 10.0
PROTOCOL_BEGIN = "<!-- engram:memory-protocol:begin -->"
PROTOCOL_END = "<!-- engram:memory-protocol:end -->"
# Files and folders of the checkout that make up the plugin; hooks/ and .mcp.json are rewritten, not copied.
PLUGIN_PARTS = (".claude-plugin/plugin.json", "commands", "agents", "skills")


class SetupError(RuntimeError):
    """A set-up step failed: the message says what and what to do."""


@dataclass
class Step:
    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": None if self.ok else self.fix}


@dataclass
class SetupReport:
    agent: str
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    def add(self, name: str, ok: bool, detail: str, fix: str | None = None) -> Step:
        step = Step(name, ok, detail, fix)
        self.steps.append(step)
        return step

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "ok": self.ok, "steps": [s.as_dict() for s in self.steps]}


# ── the commands every agent runs ────────────────────────────────────────────
def engram_command() -> list[str]:
    """How to run `engram` from this installation, absolutely: the console script beside the interpreter."""
    script = Path(sys.executable).parent / "engram"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "engram_core.cli"]


def mcp_command(home: Path | None) -> tuple[str, list[str], dict[str, str]]:
    """The MCP server command for an agent's config: (command, args, env), from this checkout's `.mcp.json`."""
    spec = json.loads((ROOT / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["engram"]
    command, args = absolute_command([spec["command"], *spec.get("args", [])])
    env = {k: v for k, v in (spec.get("env") or {}).items() if "${" not in v}
    if home is not None:
        env["ENGRAM_HOME"] = str(home)
    return command, args, env


def absolute_command(argv: list[str]) -> tuple[str, list[str]]:
    """Make a plugin command independent of PATH and of Claude Code's plugin cache."""
    out = [a.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for a in argv]
    if out[0] == "engram":
        out = [*engram_command(), *out[1:]]
    elif out[0] in ("python3", "python"):
        out[0] = hook_python()
    return out[0], out[1:]


def hook_python() -> str:
    """The interpreter the hooks run with: `python3` on PATH, resolved (a pyenv shim costs 60-140 ms a start)."""
    found = shutil.which("python3")
    if found is None:
        return sys.executable
    resolved = _resolve_shim(found)
    return resolved or found


def _resolve_shim(path: str) -> str | None:
    """A pyenv/asdf shim re-resolves the interpreter on every call: ask it once where the real one is."""
    try:
        out = subprocess.run(
            [path, "-S", "-c", "import sys; print(sys.executable)"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    real = out.stdout.strip()
    return real if out.returncode == 0 and real and os.path.isfile(real) else None


def python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-S", "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        major, minor = out.stdout.split()
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _version_text(version: tuple[int, int] | None, missing: str) -> str:
    return f"{version[0]}.{version[1]}" if version else missing


def write_launcher(home: Path) -> Path:
    """Record the interpreter that starts the daemon: the hooks' python3 lacks Engram's packages, so on a brand-new
    data root (no daemon has run yet to write this) they could never start it."""
    from .. import __version__
    from ..config import ensure_private_dir

    ensure_private_dir(home)
    path = home / "launcher.json"
    tmp = path.with_suffix(".tmp")
    fd = private_open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w") as fh:
        json.dump({"python": sys.executable, "module": "engram_core.daemon", "version": __version__}, fh)
    os.replace(tmp, path)
    return path


def memory_protocol() -> str:
    """The memory protocol an agent gets, from the plugin skill (one source for Claude Code and the others)."""
    for skill in sorted((ROOT / "skills").glob("*/SKILL.md")):
        text = skill.read_text(encoding="utf-8")
        if text.startswith("---"):
            text = text.split("---", 2)[2]
        return text.strip()
    return (
        "Engram is this agent's persistent memory (MCP server `engram`). Recall with `recall_memories` before "
        "starting work on a task; store decisions, fixes and user preferences with `store_memory`. Recalled "
        "memory may be stale: check it against the code."
    )


def check_mcp_command(
    command: str, args: list[str], env: dict[str, str], timeout_s: float = MCP_INIT_TIMEOUT_S
) -> tuple[bool, str]:
    """Start the MCP server as an agent would and ask `initialize`: the only check that proves the command runs."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "engram-doctor", "version": "1"},
        },
    }
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
    except OSError as exc:
        return False, f"cannot run {command}: {exc}"
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            if b"\n" in buf:
                break
        line = buf.split(b"\n", 1)[0]
        if not line:
            err = b""
            if proc.poll() is not None and proc.stderr is not None:
                err = proc.stderr.read()[-500:]
            return (
                False,
                f"no answer to initialize within {timeout_s:.0f} s{': ' + err.decode(errors='replace') if err else ''}",
            )
        reply = json.loads(line)
        if "result" not in reply:
            return False, f"initialize failed: {reply.get('error')}"
        name = reply["result"].get("serverInfo", {}).get("name", "?")
        return True, f"answered initialize in {(time.perf_counter() - t0) * 1000:.0f} ms (server {name})"
    except (OSError, ValueError) as exc:
        return False, f"bad answer to initialize: {exc}"
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ── Claude Code ──────────────────────────────────────────────────────────────
def find_claude(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit if shutil.which(explicit) or os.path.isfile(explicit) else None
    return shutil.which("claude")


def _claude(claude: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DISABLE_AUTOUPDATER": "1"}
    return subprocess.run([claude, *args], capture_output=True, text=True, timeout=timeout, env=env)


def marketplace_dir(home: Path) -> Path:
    return home / "claude-code" / "marketplace"


def build_plugin(home: Path, hook_py: str) -> Path:
    """Write the generated marketplace + plugin: the checkout's plugin files, commands made absolute."""
    market = marketplace_dir(home)
    plugin = market / PLUGIN
    if plugin.exists():
        shutil.rmtree(plugin)
    (market / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    for part in PLUGIN_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, plugin / part)
        elif src.is_file():
            (plugin / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, plugin / part)
    env_prefix = f"ENGRAM_HOME={shlex.quote(str(home))} " if _non_default_home(home) else ""
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text(encoding="utf-8"))
    for groups in hooks["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                argv = shlex.split(hook["command"])
                argv = [a.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for a in argv]
                if argv[0] in ("python3", "python"):
                    argv[0] = hook_py
                hook["command"] = env_prefix + shlex.join(argv)
    (plugin / "hooks").mkdir(parents=True, exist_ok=True)
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hooks, indent=2) + "\n", encoding="utf-8")
    command, args, env = mcp_command(home if _non_default_home(home) else None)
    server = _server_entry(command, args, env)
    (plugin / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"engram": server}}, indent=2) + "\n", encoding="utf-8"
    )
    manifest = {
        "name": MARKETPLACE,
        "owner": {"name": "Engram"},
        "description": f"Engram installed from {ROOT} (generated by `engram setup claude-code`)",
        "plugins": [
            {
                "name": PLUGIN,
                "source": f"./{PLUGIN}",
                "description": "Persistent, hierarchical memory for Claude Code",
            }
        ],
    }
    (market / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
    )
    _owner_only(home / "claude-code")
    return market


def _owner_only(top: Path) -> None:
    """Everything under the data root is the user's alone (doctor's permission check holds us to it)."""
    for dirpath, _dirnames, filenames in os.walk(top):
        os.chmod(dirpath, 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)


def _non_default_home(home: Path) -> bool:
    default = Path.home() / ".claude" / "engram"
    return home.resolve() != default.resolve()


def setup_claude_code(home: Path, *, claude: str | None = None, dry_run: bool = False) -> SetupReport:
    report = SetupReport("claude-code")
    hook_py = hook_python()
    version = python_version(hook_py)
    ok_py = version is not None and version >= MIN_HOOK_PYTHON
    report.add(
        "hooks' python3",
        ok_py,
        f"{hook_py} ({_version_text(version, 'unknown version')})",
        "install Python ≥ 3.8 as python3 (the hooks use only its standard library)",
    )
    if dry_run:
        report.add(
            "plan",
            True,
            f"would write the plugin under {marketplace_dir(home)}, run `claude plugin "
            f"marketplace add` and `claude plugin install {PLUGIN_ID}`, record {sys.executable} in "
            f"{home / 'launcher.json'}",
        )
        return report
    from ..config import ensure_private_dir  # pydantic behind it: only when setup really writes

    ensure_private_dir(home)  # first: on a fresh machine nothing has created the data root yet
    market = build_plugin(home, hook_py)
    report.add("plugin files", True, f"{market / PLUGIN} (commands point into {ROOT})")
    report.add("daemon launcher", True, str(write_launcher(home)))
    exe = find_claude(claude)
    if exe is None:
        report.add(
            "Claude Code",
            False,
            "`claude` not found on PATH",
            f"install Claude Code, then rerun `engram setup claude-code` (or `claude plugin marketplace add "
            f"{market}` and `claude plugin install {PLUGIN_ID}`)",
        )
        return report
    report.add("Claude Code", True, _claude_version(exe))
    added = _claude(exe, "plugin", "marketplace", "add", str(market))
    if added.returncode != 0 and "already" not in (added.stdout + added.stderr).lower():
        report.add("marketplace", False, _last_line(added), f"claude plugin marketplace add {market}")
        return report
    _claude(exe, "plugin", "marketplace", "update", MARKETPLACE)
    # Reinstall: the plugin's version is unchanged between set-ups, so `update` would keep the stale cached copy.
    _claude(exe, "plugin", "uninstall", PLUGIN_ID)
    installed = _claude(exe, "plugin", "install", PLUGIN_ID, "--scope", "user")
    if installed.returncode != 0:
        report.add("plugin install", False, _last_line(installed), f"claude plugin install {PLUGIN_ID}")
        return report
    report.add("plugin install", True, f"{PLUGIN_ID} (scope user)")
    report.steps.extend(claude_code_checks(home, exe)[1:])
    return report


def _claude_version(exe: str) -> str:
    try:
        return f"{exe} ({_claude(exe, '--version', timeout=30).stdout.strip()})"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{exe} (version unknown: {exc})"


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"


def installed_plugin(exe: str) -> dict[str, Any] | None:
    listing = _claude(exe, "plugin", "list", "--json")
    if listing.returncode != 0:
        return None
    try:
        plugins = json.loads(listing.stdout)
    except ValueError:
        return None
    for entry in plugins:
        if entry.get("id") == PLUGIN_ID or str(entry.get("id", "")).startswith(f"{PLUGIN}@"):
            return dict(entry)
    return None


def claude_code_checks(home: Path, claude: str | None = None) -> list[Step]:
    """What `engram doctor` says about the Claude Code integration, each with its fix."""
    steps: list[Step] = []
    exe = find_claude(claude)
    if exe is None:
        # Engram works without Claude Code (CLI, TUI, other agents); missing it is a fault only once it was set up.
        was_set_up = (marketplace_dir(home) / PLUGIN).is_dir()
        steps.append(
            Step(
                "Claude Code",
                not was_set_up,
                "`claude` not found on PATH"
                + ("" if was_set_up else " (not set up; `engram setup claude-code` once installed)"),
                "put Claude Code back on PATH, or pass --claude PATH",
            )
        )
        return steps
    steps.append(Step("Claude Code", True, _claude_version(exe)))
    entry = installed_plugin(exe)
    if entry is None:
        steps.append(
            Step("plugin", False, "engram is not installed in Claude Code", "engram setup claude-code")
        )
        return steps
    steps.append(
        Step(
            "plugin",
            bool(entry.get("enabled")),
            f"{entry.get('id')} {'enabled' if entry.get('enabled') else 'disabled'} "
            f"({entry.get('installPath')})",
            f"claude plugin enable {entry.get('id')}",
        )
    )
    server = (entry.get("mcpServers") or {}).get("engram")
    if not server:
        steps.append(
            Step(
                "MCP command",
                False,
                "the installed plugin declares no engram MCP server",
                "engram setup claude-code",
            )
        )
    else:
        command = str(server.get("command", ""))
        args = [str(a) for a in server.get("args", [])]
        install_path = str(entry.get("installPath") or "")
        args = [a.replace("${CLAUDE_PLUGIN_ROOT}", install_path) for a in args]
        if not os.path.isabs(command):
            steps.append(
                Step(
                    "MCP command",
                    False,
                    f"`{command}` is not an absolute path: Claude Code finds it "
                    "only if it is on the PATH it was started with",
                    "engram setup claude-code",
                )
            )
        else:
            ok, detail = check_mcp_command(
                command, args, {k: str(v) for k, v in (server.get("env") or {}).items()}
            )
            steps.append(
                Step(
                    "MCP command",
                    ok,
                    f"{shlex.join([command, *args])}: {detail}",
                    "engram setup claude-code (then see $ENGRAM_HOME/engram.log)",
                )
            )
    hook_py = _installed_hook_python(entry)
    if hook_py:
        version = python_version(hook_py)
        ok = version is not None and version >= MIN_HOOK_PYTHON
        steps.append(
            Step(
                "hooks' python3",
                ok,
                f"{hook_py} ({_version_text(version, 'does not run')})",
                "install Python ≥ 3.8 and rerun `engram setup claude-code`",
            )
        )
    steps.append(last_hook_error(home))
    return steps


def _installed_hook_python(entry: dict[str, Any]) -> str | None:
    path = Path(str(entry.get("installPath") or "")) / "hooks" / "hooks.json"
    try:
        hooks = json.loads(path.read_text(encoding="utf-8"))
        first = next(iter(hooks["hooks"].values()))[0]["hooks"][0]["command"]
    except (OSError, ValueError, KeyError, StopIteration, IndexError):
        return None
    argv = [a for a in shlex.split(first) if "=" not in a.split("/")[0]]
    return argv[0] if argv else None


_LOG_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\s+(.*)$")


def last_hook_error(home: Path) -> Step:
    """The newest line of the hooks' problem log (hooks never show errors to the agent, so this is where they go)."""
    path = home / "hooks.log"
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 8192))
            lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return Step("last hook error", True, "none recorded")
    if not lines:
        return Step("last hook error", True, "none recorded")
    m = _LOG_LINE.match(lines[-1])
    when, message = (m.group(1), m.group(2)) if m else ("?", lines[-1])
    recent = m is not None and time.time() - time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S")) < 86400
    return Step(
        "last hook error",
        not recent,
        f"{when}: {message[:300]}",
        f"see {path}; `engram doctor` again after the cause is fixed",
    )


# ── Codex ────────────────────────────────────────────────────────────────────
def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def codex_table(command: str, args: list[str], env: dict[str, str]) -> str:
    lines = [
        "[mcp_servers.engram]",
        f"command = {_toml_str(command)}",
        f"args = [{', '.join(_toml_str(a) for a in args)}]",
    ]
    if env:
        lines.append("")
        lines.append("[mcp_servers.engram.env]")
        lines.extend(f"{_toml_str(k)} = {_toml_str(v)}" for k, v in env.items())
    return "\n".join(lines) + "\n"


_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def replace_toml_tables(text: str, prefix: str, new_block: str) -> str:
    """Drop the tables named `prefix` or `prefix.*` and append `new_block`, leaving every other line as it was
    (a TOML writer would reformat the user's file and lose its comments)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        m = _TABLE.match(line)
        if m:
            name = m.group(1).replace('"', "").replace(" ", "")
            skipping = name == prefix or name.startswith(prefix + ".")
        if not skipping:
            out.append(line)
    body = "".join(out).rstrip("\n")
    return (body + "\n\n" if body else "") + new_block


def setup_codex(home: Path, *, dry_run: bool = False) -> SetupReport:
    report = SetupReport("codex")
    command, args, env = mcp_command(home if _non_default_home(home) else None)
    config = codex_home() / "config.toml"
    old = config.read_text(encoding="utf-8") if config.exists() else ""
    try:
        tomllib.loads(old)
    except tomllib.TOMLDecodeError as exc:
        report.add(
            "config", False, f"{config} is not valid TOML ({exc}); left as it is", f"fix {config}, then rerun"
        )
        return report
    new = replace_toml_tables(old, "mcp_servers.engram", codex_table(command, args, env))
    parsed = tomllib.loads(new)["mcp_servers"]["engram"]
    if parsed.get("command") != command or parsed.get("args") != args:
        raise SetupError(f"could not write a valid [mcp_servers.engram] table into {config}")
    agents_md = codex_home() / "AGENTS.md"
    if dry_run:
        report.add(
            "plan",
            True,
            f"would write [mcp_servers.engram] to {config} and the memory protocol to {agents_md}",
        )
        return report
    _write_keeping_backup(config, new)
    report.add("MCP server", True, f"[mcp_servers.engram] in {config}: {shlex.join([command, *args])}")
    return _protocol_launcher_and_check(report, home, agents_md, command, args, env)


# ── Gemini CLI ───────────────────────────────────────────────────────────────
def gemini_home() -> Path:
    return Path.home() / ".gemini"


def setup_gemini(home: Path, *, dry_run: bool = False) -> SetupReport:
    report = SetupReport("gemini-cli")
    command, args, env = mcp_command(home if _non_default_home(home) else None)
    settings = gemini_home() / "settings.json"
    try:
        data = json.loads(_read(settings) or "{}")
    except ValueError as exc:
        report.add(
            "settings",
            False,
            f"{settings} is not valid JSON ({exc}); left as it is",
            f"fix {settings}, then rerun",
        )
        return report
    data.setdefault("mcpServers", {})["engram"] = _server_entry(command, args, env)
    gemini_md = gemini_home() / "GEMINI.md"
    if dry_run:
        report.add(
            "plan", True, f"would add mcpServers.engram to {settings} and the memory protocol to {gemini_md}"
        )
        return report
    _write_keeping_backup(settings, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    report.add("MCP server", True, f"mcpServers.engram in {settings}: {shlex.join([command, *args])}")
    return _protocol_launcher_and_check(report, home, gemini_md, command, args, env)


def _protocol_launcher_and_check(
    report: SetupReport, home: Path, instructions: Path, command: str, args: list[str], env: dict[str, str]
) -> SetupReport:
    """The steps every MCP-config agent shares: the memory protocol in its instruction file, the daemon
    launcher, and a real `initialize` through the command the agent will run."""
    _write_keeping_backup(instructions, with_protocol(_read(instructions)))
    report.add("memory protocol", True, f"{instructions} (between engram markers)")
    report.add("daemon launcher", True, str(write_launcher(home)))
    ok, detail = check_mcp_command(command, args, env)
    report.add("MCP command", ok, detail, "see $ENGRAM_HOME/engram.log")
    return report


def _server_entry(command: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """An MCP server as Claude Code's .mcp.json and Gemini's settings.json both spell it."""
    return {"command": command, "args": args, **({"env": env} if env else {})}


# ── shared file helpers ──────────────────────────────────────────────────────
def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def with_protocol(text: str) -> str:
    """The instruction file with Engram's block replaced (or appended), everything else untouched."""
    block = f"{PROTOCOL_BEGIN}\n{memory_protocol()}\n{PROTOCOL_END}\n"
    if PROTOCOL_BEGIN in text and PROTOCOL_END in text:
        head, rest = text.split(PROTOCOL_BEGIN, 1)
        tail = rest.split(PROTOCOL_END, 1)[1].lstrip("\n")
        return head + block + tail
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block


def _write_keeping_backup(path: Path, text: str) -> None:
    """Atomic replace; the first time Engram changes a user's file, the original is kept beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return
        backup = path.with_name(path.name + ".before-engram")
        if not backup.exists():
            shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".engram-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


AGENTS = {"claude-code": setup_claude_code, "codex": setup_codex, "gemini-cli": setup_gemini}
