"""`engram setup <agent>` and `engram doctor`'s integration checks, against the agents' real CLIs from npm.

Each agent CLI writes its own config first (so Engram is tested on the files that agent really writes), then
setup merges into it, then the agent's own CLI reads the result back. Setup's MCP check starts the real
`engram mcp` against the session's real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import DaemonProc, npm_cli

from engram_core.cli import agent_setup
from engram_core.cli import main as cli_main


def _cli(tool: Path | None, why: str) -> Path:
    if tool is None:
        print(f"\nSKIP {why}: node/npm not found on this machine", file=sys.stderr)
        pytest.skip(f"{why}: node/npm not found on this machine")
    return tool


@pytest.fixture
def engram_data(tmp_path: Path) -> Iterator[DaemonProc]:
    """A brand-new data root, as on a fresh machine: setup's MCP check starts the daemon there itself (through
    the launcher.json setup records). Without the model, to keep the start fast."""
    d = DaemonProc(tmp_path / "engram", model=False)
    yield d
    d.stop()


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engram_data: DaemonProc) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("ENGRAM_HOME", str(engram_data.home))
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    return home


def _run(argv: list[str], home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=cwd or home)


def test_setup_codex_merges_into_the_config_codex_wrote(
    agent_home: Path, engram_data: DaemonProc, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = _cli(npm_cli("@openai/codex", "codex"), "Codex CLI")
    assert _run([str(codex), "mcp", "add", "other", "--", "/bin/echo", "hi"], agent_home).returncode == 0
    config = agent_home / ".codex" / "config.toml"
    config.write_text('# my own settings\nmodel = "o4"\n\n' + config.read_text())

    assert cli_main(["setup", "codex", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"], report
    assert cli_main(["setup", "codex", "--json"]) == 0  # a second run replaces, never appends
    capsys.readouterr()

    text = config.read_text()
    assert text.startswith('# my own settings\nmodel = "o4"')
    assert text.count("[mcp_servers.engram]") == 1
    got = json.loads(_run([str(codex), "mcp", "get", "engram", "--json"], agent_home).stdout)
    assert Path(got["transport"]["command"]).is_absolute()
    assert all("${" not in a for a in got["transport"]["args"])
    assert got["transport"]["env"]["ENGRAM_HOME"] == str(engram_data.home)
    listed = json.loads(_run([str(codex), "mcp", "list", "--json"], agent_home).stdout)
    assert {s["name"] for s in listed} == {"other", "engram"}
    agents_md = (agent_home / ".codex" / "AGENTS.md").read_text()
    assert agents_md.count(agent_setup.PROTOCOL_BEGIN) == 1
    assert "recall_memories" in agents_md
    # the command codex would start really serves MCP
    ok, detail = agent_setup.check_mcp_command(
        got["transport"]["command"], got["transport"]["args"], got["transport"]["env"]
    )
    assert ok, detail


def test_setup_gemini_merges_into_the_settings_gemini_wrote(
    agent_home: Path, engram_data: DaemonProc, capsys: pytest.CaptureFixture[str]
) -> None:
    gemini = _cli(npm_cli("@google/gemini-cli", "gemini"), "Gemini CLI")
    added = _run([str(gemini), "mcp", "add", "-s", "user", "other", "/bin/echo", "hi"], agent_home)
    assert added.returncode == 0, added.stderr
    settings = agent_home / ".gemini" / "settings.json"
    (agent_home / ".gemini" / "GEMINI.md").write_text("Be terse.\n")

    assert cli_main(["setup", "gemini-cli"]) == 0
    out = capsys.readouterr().out
    assert "Engram is set up for gemini-cli" in out

    data = json.loads(settings.read_text())
    assert set(data["mcpServers"]) == {"other", "engram"}
    assert Path(data["mcpServers"]["engram"]["command"]).is_absolute()
    listed = _run([str(gemini), "mcp", "list"], agent_home)
    assert "engram" in listed.stdout + listed.stderr
    memo = (agent_home / ".gemini" / "GEMINI.md").read_text()
    assert memo.startswith("Be terse.\n") and agent_setup.PROTOCOL_BEGIN in memo
    assert (agent_home / ".gemini" / "GEMINI.md.before-engram").read_text() == "Be terse.\n"


def test_setup_claude_code_installs_a_plugin_claude_code_enables(
    claude_bin: Path,
    agent_home: Path,
    engram_data: DaemonProc,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("ENGRAM_EMBEDDING_PROVIDER")  # the real model: doctor checks it too
    claude = claude_bin
    assert cli_main(["setup", "claude-code", "--claude", str(claude), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"], report
    names = [s["name"] for s in report["steps"]]
    assert "plugin install" in names and "MCP command" in names

    listing = json.loads(_run([str(claude), "plugin", "list", "--json"], agent_home).stdout)
    (entry,) = [p for p in listing if p["id"] == agent_setup.PLUGIN_ID]
    assert entry["enabled"]
    server = entry["mcpServers"]["engram"]
    assert Path(server["command"]).is_absolute(), "no PATH dependency"
    hooks = json.loads((Path(entry["installPath"]) / "hooks" / "hooks.json").read_text())
    for groups in hooks["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                assert "${CLAUDE_PLUGIN_ROOT}" not in hook["command"]
                assert str(agent_setup.ROOT / "hooks") in hook["command"]
    assert json.loads((engram_data.home / "launcher.json").read_text())["module"] == "engram_core.daemon"
    validated = _run([str(claude), "plugin", "validate", str(Path(entry["installPath"]))], agent_home)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    # doctor sees the same integration as healthy
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    assert cli_main(["doctor", "--json", "--claude", str(claude), "--project", str(project)]) == 0, (
        capsys.readouterr().out
    )
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["plugin"]["ok"] and checks["MCP command"]["ok"]


def test_doctor_says_what_to_do_when_the_plugin_is_missing(
    claude_bin: Path, agent_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = claude_bin
    assert cli_main(["doctor", "--claude", str(claude)]) == 1
    out = capsys.readouterr().out
    assert "FIX  plugin: engram is not installed in Claude Code" in out
    assert "→ engram setup claude-code" in out


def test_doctor_without_claude_code_fails_only_after_setup(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-claude")
    (step,) = agent_setup.claude_code_checks(tmp_path, missing)
    assert step.ok and "not set up" in step.detail
    (agent_setup.marketplace_dir(tmp_path) / agent_setup.PLUGIN).mkdir(parents=True)
    (step,) = agent_setup.claude_code_checks(tmp_path, missing)
    assert not step.ok and step.fix


def test_doctor_reports_a_recent_hook_error(tmp_path: Path) -> None:
    import time

    log = tmp_path / "hooks.log"
    log.write_text(
        f"2020-01-01T00:00:00 old problem\n{time.strftime('%Y-%m-%dT%H:%M:%S')} daemon unreachable\n"
    )
    step = agent_setup.last_hook_error(tmp_path)
    assert not step.ok and "daemon unreachable" in step.detail
    log.write_text("2020-01-01T00:00:00 old problem\n")
    assert agent_setup.last_hook_error(tmp_path).ok  # an old error is shown but does not fail the check


def test_toml_merge_keeps_every_other_table_and_comment() -> None:
    text = (
        '# top\n[mcp_servers.engram]\ncommand = "old"\n\n[mcp_servers.engram.env]\nA = "1"\n\n'
        '[mcp_servers.other] # keep\ncommand = "x"\n'
    )
    new = agent_setup.replace_toml_tables(
        text, "mcp_servers.engram", agent_setup.codex_table("/e", ["mcp"], {})
    )
    parsed = tomllib.loads(new)
    assert parsed["mcp_servers"]["engram"] == {"command": "/e", "args": ["mcp"]}
    assert parsed["mcp_servers"]["other"] == {"command": "x"}
    assert new.startswith("# top\n") and "# keep" in new


def test_protocol_block_is_replaced_not_appended() -> None:
    once = agent_setup.with_protocol("mine\n")
    twice = agent_setup.with_protocol(once.replace("recall", "RECALL"))
    assert twice == once and twice.startswith("mine\n")


def test_setup_refuses_a_broken_codex_config(agent_home: Path, capsys) -> None:
    config = agent_home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("[broken\n")
    assert cli_main(["setup", "codex"]) == 1
    assert "is not valid TOML" in capsys.readouterr().out
    assert config.read_text() == "[broken\n"  # nothing written
