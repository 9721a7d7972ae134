#!/usr/bin/env python3
"""Engram's Claude Code hooks: one standard-library script, ``python3 engram_hook.py <EventName>``.

Why standard library only: a hook runs on every matching tool call, so its cost is paid again and again.
A bare ``python3`` starts in ~30 ms; importing the SurrealDB SDK and writing directly costs ~540 ms. So this
script reads the event JSON, redacts secrets (``engram_core/redaction.py``, loaded by file path: it is
stdlib-only by contract), and hands the event to the daemon over its Unix socket with a tight deadline.
When the daemon cannot take it in time, the event is appended to a durable spool that the daemon ingests
when it (re)starts, exactly once. Whatever happens, the script exits 0 and prints no traceback: a memory
hook must never block or disturb the agent.

Opt-outs (any one): ``ENGRAM_DISABLED=1``; ``disabled: true`` in ``<project>/.claude/engram.local.md``
frontmatter; a file ``$ENGRAM_HOME/optout/<session_id>`` (``engram off --session ID``).
"""

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
PROMPT_TIMEOUT_S = 1.5
OTHER_TIMEOUT_S = 0.5
MAX_STDIN = 16 * 1024 * 1024
START_COOLDOWN_S = 10.0
_ERRORISH = re.compile(r"\b(error|failed|failure|fatal|traceback|exception|not found|denied|no such file|"
                       r"cannot|could not|refused|segmentation fault|panic)\b", re.I)
_EXIT_LINE = re.compile(r"^\s*exit code[: ]+(-?\d+)", re.I | re.M)


def home() -> str:
    raw = os.environ.get("ENGRAM_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".claude", "engram")


def log_problem(message: str) -> None:
    """Problems go to a log file, never to the agent's screen."""
    try:
        h = home()
        os.makedirs(h, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(h, "hooks.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message[:2000]}\n".encode("utf-8", "replace"))
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
            sys.path.append(os.path.join(ROOT, "engram_core"))
            import redaction  # type: ignore[import-not-found]

            _REDACT = redaction.redact_text
        except Exception as exc:
            log_problem(f"redaction unavailable ({exc}); tool output withheld")
            _REDACT = False
    if _REDACT is False:
        return None
    return _REDACT(text)  # type: ignore[operator]


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
    v = re.search(rf"^{re.escape(key)}\s*:\s*(\S+)", m.group(1), re.M)
    if not v:
        return None
    return v.group(1).strip("'\"").lower() in ("true", "yes", "on", "1")


def env_flag(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return raw.strip().lower() in ("1", "true", "yes", "on")


def opted_out(data: dict) -> bool:
    if env_flag("ENGRAM_DISABLED"):
        return True
    sid = str(data.get("session_id") or "")
    if sid and "/" not in sid and os.path.exists(os.path.join(home(), "optout", sid)):
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
        body = json.dumps({"v": PROTOCOL_VERSION, "id": 1, "method": method, "params": params},
                          ensure_ascii=False).encode("utf-8") + b"\n"
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


def start_daemon() -> bool:
    """Start the daemon detached with the interpreter it recorded (hooks' python3 lacks our packages)."""
    h = home()
    marker = os.path.join(h, "starting")
    try:
        if time.time() - os.path.getmtime(marker) < START_COOLDOWN_S:
            return False
    except OSError:
        pass
    python = os.environ.get("ENGRAM_PYTHON")
    if not python:
        try:
            with open(os.path.join(h, "launcher.json"), encoding="utf-8") as fh:
                python = json.load(fh).get("python")
        except (OSError, ValueError):
            python = None
    if not python or not os.path.exists(python):
        return False
    try:
        import subprocess

        os.makedirs(h, mode=0o700, exist_ok=True)
        with open(marker, "w"):
            pass
        fd = os.open(os.path.join(h, "engram.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        subprocess.Popen([python, "-m", "engram_core.daemon", "--home", h], stdin=subprocess.DEVNULL, stdout=fd,
                         stderr=fd, start_new_session=True, close_fds=True, cwd=ROOT,
                         env={**os.environ, "ENGRAM_HOME": h})
        os.close(fd)
        return True
    except Exception as exc:
        log_problem(f"could not start the daemon: {exc}")
        return False


def spool(event: dict) -> None:
    """Publish the event as its own file (written, fsynced, then renamed in): the daemon never sees half of it."""
    h = home()
    folder = os.path.join(h, "spool")
    tmp_dir = os.path.join(folder, "tmp")
    os.makedirs(tmp_dir, mode=0o700, exist_ok=True)
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
    try:
        call("hook_event", {"event": event}, timeout)
        return "sent"
    except (OSError, ValueError, RuntimeError) as exc:
        spool(event)
        if isinstance(exc, FileNotFoundError | ConnectionRefusedError):
            start_daemon()
        return "spooled"


def base_event(data: dict, kind: str, hook: str) -> dict:
    return {"event_id": os.urandom(16).hex(), "kind": kind, "hook": hook,
            "session_id": str(data.get("session_id") or "") or None, "cwd": str(data.get("cwd") or os.getcwd()),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# ── building memories from tool events ───────────────────────────────────────
def _first_line(text: str, n: int = 80) -> str:
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
        summary = (f"created ({_lines(ti.get('content'))} lines)" if new
                   else f"rewritten ({_lines(ti.get('content'))} lines)")
        first = _first_line(ti.get("content", ""))
        if first:
            summary += f", starts {first!r}"
    elif tool == "Edit":
        old, new_s = ti.get("old_string", ""), ti.get("new_string", "")
        summary = (f"replaced {_lines(old)} line(s) with {_lines(new_s)}"
                   f"{' (all occurrences)' if ti.get('replace_all') else ''}: "
                   f"{_first_line(old, 60)!r} → {_first_line(new_s, 60)!r}")
    elif tool == "MultiEdit":
        edits = [e for e in ti.get("edits") or [] if isinstance(e, dict)]
        shown = "; ".join(f"{_first_line(e.get('old_string', ''), 40)!r} → {_first_line(e.get('new_string', ''), 40)!r}"
                          for e in edits[:3])
        summary = f"{len(edits)} edit(s): {shown}{' …' if len(edits) > 3 else ''}"
    else:
        return None
    content = redact(f"Modified {rel}: {summary}")
    if content is None:
        content = f"Modified {rel}"
    return {"content": content, "memory_type": "episodic", "scope": "session",
            "tags": [_tag(rel), "file-change"], "importance": 0.6 if new else 0.3,
            "metadata": {"tool": tool, "file": rel, "new_file": new, "tool_use_id": data.get("tool_use_id")},
            "source": "hook:PostToolUse"}


def _command_name(command: str) -> str:
    for word in command.strip().split():
        if "=" in word.split("/")[0] or word in ("sudo", "env", "time", "nohup", "exec", "command"):
            continue
        return os.path.basename(word)[:40] or "shell"
    return "shell"


def _exit_code(tr: dict) -> int | None:
    for key in ("exit_code", "exitCode", "returncode", "return_code", "code", "status"):
        v = tr.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def bash_failure(data: dict, failed_event: bool = False) -> dict | None:
    ti = data.get("tool_input") or {}
    tr = data.get("tool_response")
    command = str(ti.get("command") or "") if isinstance(ti, dict) else ""
    if not command:
        return None
    if isinstance(tr, str):
        tr = {"stdout": tr}
    if not isinstance(tr, dict):
        tr = {}
    stdout, stderr = str(tr.get("stdout") or ""), str(tr.get("stderr") or "")
    err_text = str(data.get("error") or tr.get("error") or "")
    code = _exit_code(tr)
    if code is None:
        m = _EXIT_LINE.search(err_text or stderr or stdout)
        code = int(m.group(1)) if m else None
    failed = (failed_event or bool(err_text) or (code is not None and code != 0)
              or bool(tr.get("is_error") or tr.get("isError"))
              or bool(stderr.strip() and _ERRORISH.search(stderr))
              or "Traceback (most recent call last)" in stdout)
    if not failed or tr.get("interrupted"):
        return None
    detail = err_text or stderr or stdout
    lines = [ln.rstrip() for ln in detail.splitlines() if ln.strip()]
    # The end of the output carries the error; the start is usually progress noise.
    shown = " | ".join(lines[-6:])
    if len(shown) > 600:
        shown = "…" + shown[-599:]
    cmd = " ".join(command.split())
    cmd = cmd if len(cmd) <= 300 else cmd[:299] + "…"
    name = _command_name(command)
    content = redact(f"Command failed: {cmd} → {shown or f'exit code {code}'}")
    if content is None:
        return None
    return {"content": content, "memory_type": "episodic", "scope": "session",
            "tags": ["error", "debugging", _tag(name.lower())], "importance": 0.5,
            "metadata": {"tool": "Bash", "exit_code": code, "command_name": name,
                         "tool_use_id": data.get("tool_use_id")},
            "source": "hook:PostToolUse"}


# ── event handlers ───────────────────────────────────────────────────────────
def on_post_tool_use(data: dict, failed: bool = False) -> None:
    tool = data.get("tool_name")
    if tool in ("Write", "Edit", "MultiEdit") and not failed:
        memory = file_change(data)
    elif tool == "Bash":
        memory = bash_failure(data, failed_event=failed)
    else:
        memory = None
    if memory is None:
        return
    event = base_event(data, "memory", "PostToolUseFailure" if failed else "PostToolUse")
    event["memory"] = memory
    deliver(event, POST_TOOL_TIMEOUT_S)


def print_context(event_name: str, text: str) -> None:
    if text:
        sys.stdout.write(json.dumps({"hookSpecificOutput": {"hookEventName": event_name,
                                                            "additionalContext": text}}) + "\n")


def on_session_start(data: dict) -> None:
    params = {"session_id": data.get("session_id"), "cwd": str(data.get("cwd") or os.getcwd()),
              "source": data.get("source")}
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
                if not start_daemon() and not os.path.exists(os.path.join(home(), "starting")):
                    return
            if time.monotonic() + 0.1 >= deadline:
                log_problem("SessionStart: the daemon was not up in time; no context injected")
                return
            time.sleep(0.1)
        except (OSError, ValueError, RuntimeError) as exc:
            log_problem(f"SessionStart: {exc}")
            return


def on_prompt(data: dict) -> None:
    enabled = env_flag("ENGRAM_PROMPT_RECALL")
    if enabled is None:
        enabled = frontmatter_flag(project_root(str(data.get("cwd") or "")), "prompt_recall")
    prompt = str(data.get("prompt") or "")
    if not enabled or not prompt.strip():
        return  # off by default: no round trip at all
    try:
        result = call("hook_prompt", {"prompt": prompt, "session_id": data.get("session_id"),
                                      "cwd": str(data.get("cwd") or os.getcwd())}, PROMPT_TIMEOUT_S)
    except (OSError, ValueError, RuntimeError) as exc:
        log_problem(f"UserPromptSubmit: {exc}")
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
    else:
        event = base_event(data, "stop", hook)
    if not event.get("session_id"):
        return
    deliver(event, OTHER_TIMEOUT_S)


def main(argv: list[str]) -> None:
    try:
        raw = sys.stdin.buffer.read(MAX_STDIN)
        data = json.loads(raw) if raw.strip() else {}
    except Exception:
        log_problem("a hook received stdin that is not JSON; ignored")
        return
    if not isinstance(data, dict):
        return
    name = argv[1] if len(argv) > 1 else str(data.get("hook_event_name") or "")
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
            log_problem(f"{sys.argv[1:]}: {exc.__class__.__name__}: {exc}")
        except BaseException:
            pass
    try:  # noqa: SIM105
        sys.stdout.flush()
    except BaseException:
        pass
    os._exit(0)
