#!/usr/bin/env python3
"""Engram's Claude Code hooks: one standard-library script, ``python3 engram_hook.py <EventName>``.

Why standard library only: a hook runs on every matching tool call, so its cost is paid again and again.
A bare ``python3`` starts in ~30 ms; importing the SurrealDB SDK and writing directly costs ~540 ms. So this
script reads the event JSON, redacts secrets (``engram_core/redaction/``, imported from its folder: it is
stdlib-only by contract), and hands the event to the daemon over its Unix socket with a tight deadline.
When the daemon cannot take it in time, the event is appended to a durable spool that the daemon ingests
when it (re)starts, exactly once. Whatever happens, the script exits 0 and prints no traceback: a memory
hook must never block or disturb the agent. It runs under the user's ``python3``, which may be as old as 3.8
(tests/test_hooks.py holds it to that).

What the events mean (docs/claude-code.md): Claude Code reports a failed Bash command as ``PostToolUseFailure``
(``error``, no ``tool_response``); ``PostToolUse`` is a success whatever its output says (stderr is merged into
stdout there and no exit code is given). A success is only sent to the daemon while the session has a failure
on record (a marker file), so that the daemon can turn "failed, then fixed" into one lesson
(``engram_core/integrations/claude_code/session_learning.py``).

Problems go to ``$ENGRAM_HOME/hooks.log``, one line each: ``YYYY-MM-DDTHH:MM:SS <Event> <reason>: <detail>``
(local time; ``engram doctor`` shows the last one).

Opt-outs (any one): ``ENGRAM_DISABLED=1``; ``disabled: true`` in ``<project>/.claude/engram.local.md``
frontmatter; a file ``$ENGRAM_HOME/optout/<session_id>`` (``engram off --session ID``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time

PROTOCOL_VERSION = 1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POST_TOOL_TIMEOUT_S = 0.15
SESSION_START_TIMEOUT_S = 3.0
COLD_START_TIMEOUT_S = 8.0  # when this hook started the daemon itself (hooks.json gives SessionStart 10 s)
PROMPT_TIMEOUT_S = 1.5
OTHER_TIMEOUT_S = 0.5
MAX_STDIN = 16 * 1024 * 1024
START_COOLDOWN_S = 10.0
MAX_PREVIEW_CHARS = 200_000
DETACHED_TIMEOUT_S = 2.0
DETACHED = False  # set by run_hook.py when this runs in a child Claude Code does not wait for
_EXIT_LINE = re.compile(r"^\s*exit code[: ]+(-?\d+)\s*$", re.I)
_ERRORISH = re.compile(
    r"\b(error|failed|failure|fatal|traceback|exception|not found|denied|no such file|"
    r"cannot|can't|could not|refused|segmentation fault|panic)\b",
    re.I,
)
_NAMED_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\berror(?:\[\w+\])?:|\bfatal:", re.I)
_PYTEST_PREFIX = re.compile(r"^E\s+")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")  # terminal colours in tool output
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Fields of a tool response the capture reads; the rest (originalFile, structuredPatch…) is never redacted or sent.
_RESPONSE_FIELDS = ("stdout", "stderr", "type", "filePath", "interrupted")


def home() -> str:
    raw = os.environ.get("ENGRAM_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".claude", "engram")


def foreign_home(h: str) -> bool:
    """A data root Engram did not create (a shared /tmp, a 0755 folder of other files): nothing is written there,
    so that no file of the hook's makes it look like Engram's (engram_core/paths.py, loaded by path)."""
    try:
        if os.path.join(ROOT, "engram_core") not in sys.path:
            sys.path.append(os.path.join(ROOT, "engram_core"))  # appended: nothing there shadows the stdlib
        import paths  # type: ignore[import-not-found]

        return paths.foreign_root(h)
    except Exception:
        return False


def log_problem(event: str, reason: str, detail: str) -> None:
    """One parseable line in hooks.log, never anything on the agent's screen."""
    try:
        h = home()
        if foreign_home(h):
            return
        os.makedirs(h, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(h, "hooks.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            # Details quote their input (a command, a daemon error): redacted whole before the line is cut.
            safe = redact(detail)
            if safe is None:
                safe = "[detail withheld: redaction unavailable]"
            line = " ".join(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {event or '-'} {reason}: {safe}".split())
            os.write(fd, (line[:2000] + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


# ── redaction (fail closed: without it, tool output is not sent at all) ─────
_REDACT = None


def redact(text: str) -> str | None:
    global _REDACT
    if _REDACT is None:
        try:
            # Appended, not prepended, so nothing in engram_core/ can shadow the standard library; a plain
            # import keeps the bytecode cache and skips importlib.util (~5 ms on every tool call).
            if os.path.join(ROOT, "engram_core") not in sys.path:
                sys.path.append(os.path.join(ROOT, "engram_core"))
            import redaction  # type: ignore[import-not-found]

            _REDACT = redaction.redact_text
        except Exception as exc:
            _REDACT = False  # before logging: the log line itself asks for redaction
            log_problem(
                "-", "redaction-unavailable", f"{exc.__class__.__name__}: {exc}; tool output withheld"
            )
    if _REDACT is False:
        return None
    return _REDACT(text)  # type: ignore[operator]


def redact_all(value: object) -> object:
    """Every string inside, redacted whole, before anything is cut or joined; None if redaction is unavailable."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            r = redact_all(v)
            if r is None and v is not None:
                return None
            out[k] = r
        return out
    if isinstance(value, list):
        items = [redact_all(v) for v in value]
        return None if any(r is None and v is not None for r, v in zip(items, value)) else items
    return value


# ── project settings, read without the engram_core package ──────────────────
def project_root(cwd: str) -> str:
    here = os.path.realpath(cwd or os.getcwd())
    path = here
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    user_home = os.path.realpath(os.path.expanduser("~"))
    path = here
    while True:
        if path != user_home and os.path.isdir(os.path.join(path, ".claude")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return here
        path = parent


def frontmatter_flag(root: str, key: str) -> bool | None:
    try:
        with open(os.path.join(root, ".claude", "engram.local.md"), encoding="utf-8") as fh:
            text = fh.read(65536)
    except OSError:
        return None
    m = re.match(r"\A---\s*\n(.*?)\n---", text, re.S)
    if not m:
        return None
    v = re.search(r"^" + re.escape(key) + r"\s*:\s*(\S+)", m.group(1), re.M)
    if not v:
        return None
    return v.group(1).strip("'\"").lower() in ("true", "yes", "on", "1")


def env_flag(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return raw.strip().lower() in ("1", "true", "yes", "on")


def _session_file(folder: str, data: dict) -> str | None:
    sid = str(data.get("session_id") or "")
    if not sid or "/" in sid or sid.startswith(".") or len(sid) > 200:
        return None
    return os.path.join(home(), folder, sid)


def opted_out(data: dict) -> bool:
    if env_flag("ENGRAM_DISABLED"):
        return True
    marker = _session_file("optout", data)
    if marker and os.path.exists(marker):
        return True
    return bool(frontmatter_flag(project_root(str(data.get("cwd") or "")), "disabled"))


# ── talking to the daemon ────────────────────────────────────────────────────
def call(method: str, params: dict, timeout: float) -> object:
    """One request; the result, or raises OSError/ValueError/RuntimeError."""
    deadline = time.monotonic() + timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(os.path.join(home(), "engram.sock"))
        body = (
            json.dumps(
                {"v": PROTOCOL_VERSION, "id": 1, "method": method, "params": params}, ensure_ascii=False
            ).encode("utf-8")
            + b"\n"
        )
        s.sendall(body)
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the daemon did not answer in time")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            buf += chunk
    finally:
        s.close()
    msg = json.loads(buf)
    if not msg.get("ok"):
        err = msg.get("error") or {}
        raise RuntimeError(f"{err.get('type')}: {err.get('message')}")
    return msg.get("result")


def _recorded_python(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            python = json.load(fh).get("python")
    except (OSError, ValueError, AttributeError):
        return None
    return python if isinstance(python, str) else None


def _shebang_python(script: str | None) -> str | None:
    try:
        with open(script or "", "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace")
    except OSError:
        return None
    return first[2:].strip().split()[0] if first.startswith("#!") and first[2:].strip() else None


def daemon_python() -> tuple[str | None, list[str]]:
    """The interpreter that has Engram's packages (the hooks' python3 usually has not), and where we looked.

    A brand-new ENGRAM_HOME has no launcher.json yet (the daemon writes it when it first runs), so the
    checkout's own virtualenv, the ``engram`` command on PATH and the default home's record are tried too."""
    import shutil

    explicit = os.environ.get("ENGRAM_PYTHON")
    if explicit:  # the user's choice is final, even when it is wrong (the log says so)
        ok = os.path.isfile(explicit) and os.access(explicit, os.X_OK)
        return (explicit if ok else None), ([] if ok else [f"ENGRAM_PYTHON={explicit}"])
    candidates = [
        ("launcher.json", _recorded_python(os.path.join(home(), "launcher.json"))),
        ("plugin .venv", os.path.join(ROOT, ".venv", "bin", "python")),
        ("engram on PATH", _shebang_python(shutil.which("engram"))),
        (
            "default home",
            _recorded_python(os.path.join(os.path.expanduser("~"), ".claude", "engram", "launcher.json")),
        ),
    ]
    tried = []
    for where, python in candidates:
        if python and os.path.isfile(python) and os.access(python, os.X_OK):
            return python, tried
        tried.append(where)
    return None, tried


def start_daemon(event: str) -> bool:
    """Start the daemon detached with an interpreter that has our packages."""
    h = home()
    if foreign_home(h):
        log_problem(
            event, "foreign-data-root", f"{h} is not Engram's data directory: the daemon is not started"
        )
        return False
    marker = os.path.join(h, "starting")
    try:
        if time.time() - os.path.getmtime(marker) < START_COOLDOWN_S:
            return False
    except OSError:
        pass
    python, tried = daemon_python()
    if not python:
        log_problem(
            event,
            "no-daemon-python",
            f"cannot start the daemon: no interpreter with Engram found (looked at {', '.join(tried)}); "
            "run `engram serve` once or set ENGRAM_PYTHON",
        )
        return False
    try:
        import subprocess

        os.makedirs(h, mode=0o700, exist_ok=True)
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, 0o600))  # owner-only whatever the umask
        os.utime(marker)  # its age is the start's: a marker left from an earlier start counts from now
        fd = os.open(os.path.join(h, "engram.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        subprocess.Popen(
            [python, "-m", "engram_core.daemon", "--home", h],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
            cwd=ROOT,
            env=dict(os.environ, ENGRAM_HOME=h),
        )
        os.close(fd)
        return True
    except Exception as exc:
        log_problem(event, "daemon-start-failed", f"{python}: {exc.__class__.__name__}: {exc}")
        return False


def private_dirs(path: str) -> None:
    """Create ``path`` with every missing level owner-only (os.makedirs gives parents the umask's mode, and the
    daemon then finds a data folder others may read)."""
    if foreign_home(home()):
        raise OSError(f"{home()} is not Engram's data directory: nothing is written there")
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        private_dirs(parent)
    os.makedirs(path, mode=0o700, exist_ok=True)


def spool(event: dict) -> None:
    """Publish the event as its own file (written, fsynced, then renamed in): the daemon never sees half of it."""
    h = home()
    if foreign_home(h):
        return  # the daemon refuses this data root: `engram doctor` and any `engram` command say why
    folder = os.path.join(h, "spool")
    tmp_dir = os.path.join(folder, "tmp")
    private_dirs(tmp_dir)
    name = f"{time.time_ns()}-{os.getpid()}-{os.urandom(4).hex()}.jsonl"
    tmp = os.path.join(tmp_dir, name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(folder, name))
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def deliver(event: dict, timeout: float) -> str:
    """Send to the daemon, or spool; returns 'sent' or 'spooled'."""
    if DETACHED:  # nobody waits for this process (run_hook.py): give a busy daemon time before spooling
        timeout = max(timeout, DETACHED_TIMEOUT_S)
    try:
        call("hook_event", {"event": event}, timeout)
        return "sent"
    except (OSError, ValueError, RuntimeError) as exc:
        spool(event)
        if isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
            start_daemon(str(event.get("hook") or "-"))
        elif not isinstance(exc, socket.timeout):
            log_problem(str(event.get("hook") or "-"), "spooled", f"{exc.__class__.__name__}: {exc}")
        return "spooled"


def base_event(data: dict, kind: str, hook: str) -> dict:
    return {
        "event_id": os.urandom(16).hex(),
        "kind": kind,
        "hook": hook,
        "session_id": str(data.get("session_id") or "") or None,
        "cwd": str(data.get("cwd") or os.getcwd()),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# ── building memories from tool events (inputs already redacted whole) ───────
def _first_line(text: object, n: int = 80) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= n else line[: n - 1] + "…"
    return ""


def _rel(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
        return path if rel.startswith("..") else rel
    except ValueError:
        return path


def _tag(text: str) -> str:
    return text if len(text) <= 64 else "…" + text[-63:]


def _lines(text: object) -> int:
    return len(str(text or "").splitlines())


def file_change(data: dict) -> dict | None:
    tool = data.get("tool_name")
    ti = data.get("tool_input") or {}
    tr = data.get("tool_response") or {}
    if not isinstance(ti, dict):
        return None
    if not isinstance(tr, dict):
        tr = {}
    path = str(ti.get("file_path") or tr.get("filePath") or "")
    if not path:
        return None
    rel = _rel(path, str(data.get("cwd") or ""))
    new = False
    if tool == "Write":
        new = tr.get("type") == "create"
        n = ti.get("content_lines") or _lines(ti.get("content"))
        summary = f"created ({n} lines)" if new else f"rewritten ({n} lines)"
        first = _first_line(ti.get("content", ""))
        if first:
            summary += f", starts {first!r}"
    elif tool == "Edit":
        old, new_s = ti.get("old_string", ""), ti.get("new_string", "")
        summary = (
            f"replaced {ti.get('old_string_lines') or _lines(old)} line(s) with "
            f"{ti.get('new_string_lines') or _lines(new_s)}"
            f"{' (all occurrences)' if ti.get('replace_all') else ''}: "
            f"{_first_line(old, 60)!r} → {_first_line(new_s, 60)!r}"
        )
    elif tool == "MultiEdit":
        edits = [e for e in ti.get("edits") or [] if isinstance(e, dict)]
        shown = "; ".join(
            f"{_first_line(e.get('old_string', ''), 40)!r} → {_first_line(e.get('new_string', ''), 40)!r}"
            for e in edits[:3]
        )
        summary = f"{len(edits)} edit(s): {shown}{' …' if len(edits) > 3 else ''}"
    else:
        return None
    return {
        "content": f"Modified {rel}: {summary}",
        "memory_type": "episodic",
        "scope": "session",
        "tags": [_tag(rel), "file-change"],
        "importance": 0.6 if new else 0.3,
        "metadata": {"tool": tool, "file": rel, "new_file": new, "tool_use_id": data.get("tool_use_id")},
        "source": "hook:PostToolUse",
    }


def command_name(command: str) -> str:
    for word in command.strip().split():
        if "=" in word.split("/")[0] or word in ("sudo", "env", "time", "nohup", "exec", "command"):
            continue
        return os.path.basename(word)[:40] or "shell"
    return "shell"


def _one_line(text: str, n: int) -> str:
    text = " ".join(_CONTROL.sub(" ", _ANSI.sub("", text)).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def error_summary(text: str) -> tuple[int | None, str]:
    """(exit code, the line that says what went wrong) of a failed command's output."""
    code = None
    lines = []
    for ln in text.splitlines():
        m = _EXIT_LINE.match(ln)
        if m and code is None:
            code = int(m.group(1))
        elif ln.strip():
            clean = _one_line(ln, 1000)
            if clean:
                lines.append(clean)
    # The end of the output carries the error; the start is usually progress noise. A named exception says more
    # than a tally ("1 error in 0.1s").
    named = [ln for ln in lines if _NAMED_ERROR.search(ln)]
    telling = [ln for ln in lines if _ERRORISH.search(ln)]
    line = (named or telling or lines or [""])[-1]
    return code, _one_line(_PYTEST_PREFIX.sub("", line), 300)


def bash_failure(data: dict) -> dict | None:
    """A PostToolUseFailure of Bash: the command and what its error said."""
    ti = data.get("tool_input") or {}
    command = str(ti.get("command") or "") if isinstance(ti, dict) else ""
    if not command.strip() or data.get("is_interrupt"):
        return None
    tr = data.get("tool_response")
    detail = str(data.get("error") or "")
    if not detail and isinstance(tr, dict):
        detail = "\n".join(str(tr.get(k) or "") for k in ("stdout", "stderr"))
    code, error = error_summary(detail)
    lines = [_one_line(ln, 600) for ln in detail.splitlines() if ln.strip() and not _EXIT_LINE.match(ln)]
    lines = [ln for ln in lines if ln]
    joined = " | ".join(lines[-6:])
    shown = joined if len(joined) <= 600 else "…" + joined[-599:]
    cmd = _one_line(command, 300)
    name = command_name(command)
    return {
        "content": f"Command failed: {cmd} → {shown or f'exit code {code}'}",
        "memory_type": "episodic",
        "scope": "session",
        "tags": ["error", "debugging", _tag(name.lower())],
        "importance": 0.5,
        "metadata": {
            "tool": "Bash",
            "exit_code": code,
            "command_name": name,
            "command": cmd,
            "error": error or (f"exit code {code}" if code is not None else "failed"),
            "tool_use_id": data.get("tool_use_id"),
        },
        "source": "hook:PostToolUseFailure",
    }


def _redacted_payload(data: dict) -> dict | None:
    """The fields a capture reads, every string in them redacted whole (None when redaction is unavailable).

    A file's content or an edit's text beyond MAX_PREVIEW_CHARS is dropped, not cut: only its line count is kept
    (redacting 1 MB costs ~0.3 s on every such Write, for a one-line preview)."""
    tr = data.get("tool_response")
    if isinstance(tr, dict):
        tr = {k: tr[k] for k in _RESPONSE_FIELDS if k in tr}
    ti = data.get("tool_input")
    if isinstance(ti, dict) and data.get("tool_name") != "Bash":
        ti = dict(ti)
        for key in ("content", "old_string", "new_string"):
            value = ti.get(key)
            if isinstance(value, str) and len(value) > MAX_PREVIEW_CHARS:
                ti[key] = ""
                ti[key + "_lines"] = _lines(value)
    picked = {"tool_input": ti, "tool_response": tr, "error": data.get("error")}
    clean = redact_all(picked)
    if not isinstance(clean, dict):
        return None
    return {**data, **clean}


# ── event handlers ───────────────────────────────────────────────────────────
def on_post_tool_use(data: dict, failed: bool = False) -> None:
    hook = "PostToolUseFailure" if failed else "PostToolUse"
    tool = data.get("tool_name")
    failures = _session_file("hookstate", data)
    if tool == "Bash" and not failed and not (failures and os.path.exists(failures)):
        return  # a success matters only as the fix of an earlier failure
    if tool not in ("Bash", "Write", "Edit", "MultiEdit") or (failed and tool != "Bash"):
        return
    clean = _redacted_payload(data)
    if clean is None:
        if tool != "Bash":  # the file name alone, without content
            ti = data.get("tool_input")
            path = str(ti.get("file_path") or "") if isinstance(ti, dict) else ""
            if path:
                event = base_event(data, "memory", hook)
                rel = _rel(path, str(data.get("cwd") or ""))
                event["memory"] = {
                    "content": f"Modified {rel}",
                    "memory_type": "episodic",
                    "scope": "session",
                    "tags": [_tag(rel), "file-change"],
                    "importance": 0.3,
                    "metadata": {"tool": tool, "file": rel},
                    "source": "hook:PostToolUse",
                }
                deliver(event, POST_TOOL_TIMEOUT_S)
        return
    if tool == "Bash" and not failed:
        ti = clean.get("tool_input") or {}
        command = str(ti.get("command") or "") if isinstance(ti, dict) else ""
        if not command.strip():
            return
        event = base_event(data, "command_ok", hook)
        event["command"] = _one_line(command, 300)
        event["tool_use_id"] = data.get("tool_use_id")
        deliver(event, POST_TOOL_TIMEOUT_S)
        return
    memory = bash_failure(clean) if tool == "Bash" else file_change(clean)
    if memory is None:
        return
    event = base_event(data, "memory", hook)
    event["memory"] = memory
    if tool == "Bash" and failures:
        try:
            private_dirs(os.path.dirname(failures))
            os.close(os.open(failures, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError as exc:
            log_problem(hook, "state-not-written", str(exc))
    deliver(event, POST_TOOL_TIMEOUT_S)


def print_context(event_name: str, text: str) -> None:
    if text:
        sys.stdout.write(
            json.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}})
            + "\n"
        )


def on_session_start(data: dict) -> None:
    params = {
        "session_id": data.get("session_id"),
        "cwd": str(data.get("cwd") or os.getcwd()),
        "source": data.get("source"),
    }
    budget = os.environ.get("ENGRAM_INJECTION_TOKEN_BUDGET")
    if budget and budget.isdigit():
        params["budget"] = int(budget)
    deadline = time.monotonic() + SESSION_START_TIMEOUT_S
    started = False
    while True:
        try:
            result = call("hook_session_start", params, max(0.05, deadline - time.monotonic()))
            if isinstance(result, dict):
                print_context("SessionStart", str(result.get("text") or ""))
            return
        except (FileNotFoundError, ConnectionRefusedError):
            if not started:
                started = True
                if start_daemon("SessionStart"):
                    deadline += COLD_START_TIMEOUT_S - SESSION_START_TIMEOUT_S
                elif not os.path.exists(os.path.join(home(), "starting")):
                    return
            if time.monotonic() + 0.1 >= deadline:
                log_problem(
                    "SessionStart",
                    "daemon-not-ready",
                    "the daemon was not up in time; no context injected "
                    "(it keeps starting: the next session gets it)",
                )
                return
            time.sleep(0.1)
        except (OSError, ValueError, RuntimeError) as exc:
            log_problem("SessionStart", "no-context", f"{exc.__class__.__name__}: {exc}")
            return


def on_prompt(data: dict) -> None:
    prompt = str(data.get("prompt") or "")
    if not prompt.strip():
        return
    clean = redact(prompt)
    if clean is not None:  # the session's goal and any standing instruction in it (session_learning.py)
        event = base_event(data, "prompt", "UserPromptSubmit")
        event["prompt"] = clean
        deliver(event, POST_TOOL_TIMEOUT_S)
    enabled = env_flag("ENGRAM_PROMPT_RECALL")
    if enabled is None:
        enabled = frontmatter_flag(project_root(str(data.get("cwd") or "")), "prompt_recall")
    if not enabled:
        return  # prompt recall is off by default: no second round trip
    try:
        result = call(
            "hook_prompt",
            {
                "prompt": prompt,
                "session_id": data.get("session_id"),
                "cwd": str(data.get("cwd") or os.getcwd()),
            },
            PROMPT_TIMEOUT_S,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        log_problem("UserPromptSubmit", "no-recall", f"{exc.__class__.__name__}: {exc}")
        return
    if isinstance(result, dict):
        print_context("UserPromptSubmit", str(result.get("text") or ""))


def on_lifecycle(data: dict, hook: str) -> None:
    if hook == "PreCompact":
        event = base_event(data, "checkpoint", hook)
        event["trigger"] = data.get("trigger")
    elif hook == "SessionEnd":
        event = base_event(data, "session_end", hook)
        event["reason"] = data.get("reason") or "ended"
        marker = _session_file("hookstate", data)
        if marker and os.path.exists(marker):
            try:  # noqa: SIM105 - no contextlib import on the hot path
                os.unlink(marker)
            except OSError:
                pass
    else:
        event = base_event(data, "stop", hook)
    if not event.get("session_id"):
        return
    deliver(event, OTHER_TIMEOUT_S)


def main(argv: list) -> None:
    name = argv[1] if len(argv) > 1 else ""
    try:
        raw = sys.stdin.buffer.read(MAX_STDIN)
    except Exception:
        log_problem(name, "bad-input", "stdin could not be read; ignored")
        return
    handle(name, raw)


def handle(name: str, raw: bytes) -> None:
    """One event, as read from Claude Code (run_hook.py calls this in its detached child)."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except Exception:
        log_problem(name, "bad-input", "stdin is not JSON; ignored")
        return
    if not isinstance(data, dict):
        return
    name = name or str(data.get("hook_event_name") or "")
    if name != "SessionEnd" and opted_out(data):
        return  # a session that ends still gets its promotion pass for what it kept before opting out
    if name == "PostToolUse":
        on_post_tool_use(data)
    elif name == "PostToolUseFailure":
        on_post_tool_use(data, failed=True)
    elif name == "SessionStart":
        on_session_start(data)
    elif name == "UserPromptSubmit":
        on_prompt(data)
    elif name in ("PreCompact", "Stop", "SubagentStop", "SessionEnd"):
        on_lifecycle(data, name)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException as exc:  # noqa: BLE001 - a hook must exit 0 whatever happens
        try:  # noqa: SIM105 - no contextlib import on the hot path
            log_problem(
                sys.argv[1] if len(sys.argv) > 1 else "-", "crash", f"{exc.__class__.__name__}: {exc}"
            )
        except BaseException:
            pass
    try:  # noqa: SIM105
        sys.stdout.flush()
    except BaseException:
        pass
    os._exit(0)
