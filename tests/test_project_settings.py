"""Project settings honoured per project (issue #29 item 1): `.claude/engram.local.md` written as
docs/configuration.md shows changes that project's requests in the shared daemon, and only that project's;
`engram config` says where every value comes from; a value one daemon cannot honour per project is named by
`engram config` and `engram doctor`, never silently dropped."""

from __future__ import annotations

from pathlib import Path

from support import DaemonProc, new_project
from test_cli import engram, ok_json

from engram_core.retrieval.hybrid import SCOPE_PROFILES

FRONTMATTER = """---
scope_weights: {session: 0.1, project: 0.1, user: 3.0}
half_lives_days: {semantic: 2.5}
injection_token_budget: 900
embedding_provider: none                # one daemon, one model: cannot be honoured per project
---
Notes for this project.
"""


def _configured(tmp_path: Path, name: str) -> Path:
    proj = new_project(tmp_path, name)
    (proj / ".claude").mkdir()
    (proj / ".claude" / "engram.local.md").write_text(FRONTMATTER)
    return proj


def test_project_file_changes_that_projects_requests(daemon: DaemonProc, tmp_path: Path) -> None:
    proj, plain = _configured(tmp_path, "tuned"), new_project(tmp_path, "plain")
    ok_json(engram(daemon, "store", "the flaky login test waits on the token cache", "--json", cwd=proj))
    ok_json(
        engram(
            daemon,
            "store",
            "login tests: the token cache needs a warm-up",
            "--scope",
            "user",
            "--json",
            cwd=proj,
        )
    )
    rec = ok_json(engram(daemon, "recall", "flaky login test token cache", "--json", cwd=proj))
    assert rec["scope_weights"] == {"session": 0.1, "project": 0.1, "user": 3.0}
    assert rec["hits"][0]["scope"] == "user"  # the user weight of 3.0 puts the user memory first
    other = ok_json(engram(daemon, "recall", "flaky login test token cache", "--json", cwd=plain))
    assert other["scope_weights"] == {
        "session": 1.5,
        "project": 1.0,
        "user": 0.7,
    }  # another project: untouched

    stored = ok_json(engram(daemon, "store", "semantic fact under the tuned half-life", "--json", cwd=proj))
    assert stored["memory"]["half_life_days"] == 2.5
    elsewhere = ok_json(
        engram(daemon, "store", "semantic fact under the default half-life", "--json", cwd=plain)
    )
    assert elsewhere["memory"]["half_life_days"] == 7.0

    report = ok_json(engram(daemon, "config", "--json", cwd=proj))
    by_name = {s["name"]: s for s in report["settings"]}
    assert by_name["scope_weights"]["source"] == "project file"
    assert by_name["half_lives_days"]["value"]["semantic"] == 2.5
    assert by_name["injection_token_budget"] == {
        "name": "injection_token_budget",
        "value": 900,
        "source": "project file",
        "applies": "per project",
        "note": None,
    }
    assert (
        by_name["embedding_provider"]["value"] == "local"
        and by_name["embedding_provider"]["applies"] == "daemon-wide"
    )
    assert by_name["daemon_idle_timeout_s"]["source"] == "environment"
    assert [
        line
        for line in report["ignored"]
        if line.startswith("embedding_provider:") and "one embedding model for every project" in line
    ], report["ignored"]
    human = engram(daemon, "config", cwd=proj).stdout
    assert "IGNORED  embedding_provider" in human and "precedence:" in human

    doctor = ok_json_any(engram(daemon, "doctor", "--json", "--no-agents", cwd=proj))
    check = next(c for c in doctor["checks"] if c["name"] == "settings")
    assert not check["ok"] and "embedding_provider" in check["detail"] and "engram config" in check["fix"]
    clean = ok_json_any(engram(daemon, "doctor", "--json", "--no-agents", cwd=plain))
    assert next(c for c in clean["checks"] if c["name"] == "settings")["ok"]

    # A variable set in this shell but not in the daemon's environment is not in effect: said, not silent.
    shell = ok_json(engram(daemon, "config", "--json", cwd=plain, env={"ENGRAM_PROMPT_RECALL": "true"}))
    assert any("ENGRAM_PROMPT_RECALL is set in this shell" in line for line in shell["ignored"])

    # The file is read again when it changes.
    (proj / ".claude" / "engram.local.md").write_text("---\nscope_weight_profile: debugging\n---\n")
    rec = ok_json(engram(daemon, "recall", "flaky login test token cache", "--json", cwd=proj))
    assert rec["scope_weights"] == SCOPE_PROFILES["debugging"]


def ok_json_any(p):  # noqa: ANN001, ANN201 - doctor exits 1 when a check fails; its JSON is still whole
    import json

    return json.loads(p.stdout)


def test_manual_settings_win_over_evolved(env, tmp_path: Path) -> None:  # noqa: ANN001
    svc, plain = env
    proj = _configured(tmp_path, "manual")
    svc.set_param("scope_weights", {"session": 1.3, "project": 1.2, "user": 0.8})
    svc.set_param("decay_half_lives", {"semantic": 9.0})
    assert svc.scope_weights(None, plain) == {"session": 1.3, "project": 1.2, "user": 0.8}
    assert svc.scope_weights(None, str(proj)) == {"session": 0.1, "project": 0.1, "user": 3.0}
    assert svc.half_lives(plain)["semantic"] == 9.0 and svc.half_lives(str(proj))["semantic"] == 2.5
    rows = {s.name: s for s in svc.settings_report(project=plain).settings}
    assert rows["scope_weights"].source == "evolved" and rows["half_lives_days"].source == "evolved"
    rows = {s.name: s for s in svc.settings_report(project=str(proj)).settings}
    assert rows["scope_weights"].source == "project file" and rows["half_lives_days"].value["semantic"] == 2.5
