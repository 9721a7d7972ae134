"""Every API method answers the same types in process and over the daemon's socket (issue #14).

The methods come from the registry (``API_METHODS``), so a new method fails here until the scenario below calls
it. Each result is checked, both ways, against the method's declared return type all the way down: a model where
the annotation says a model (never a dict standing in for one), enums, datetimes, tuples, lists and dicts of
them. Only what a model itself declares ``Any`` (metadata, query rows) is left as it came.
"""

from __future__ import annotations

import enum
import inspect
import json
import subprocess
import types
import typing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import DaemonProc

SESSION = "wire-types-session"


def declared(name: str) -> Any:
    from engram_core.service import API_METHODS

    return typing.get_type_hints(inspect.unwrap(API_METHODS[name]))["return"]


def assert_typed(value: Any, tp: Any, where: str) -> None:
    """``value`` is an instance of ``tp`` at every level the annotation names."""
    if tp is Any:
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        fits = []
        for alt in args:
            try:
                assert_typed(value, alt, where)
                return
            except AssertionError as exc:
                fits.append(str(exc))
        raise AssertionError(f"{where}: {value!r:.120} fits none of {tp}: {fits}")
    if tp is None or tp is type(None):
        assert value is None, f"{where}: {value!r:.80} where None belongs"
        return
    if origin is typing.Literal:
        assert value in args, f"{where}: {value!r} is not one of {args}"
        return
    if origin is list:
        assert type(value) is list, f"{where}: {type(value).__name__} where a list belongs"
        for i, item in enumerate(value):
            assert_typed(item, args[0], f"{where}[{i}]")
        return
    if origin is tuple:
        assert type(value) is tuple, f"{where}: {type(value).__name__} where a tuple belongs"
        for i, (item, item_tp) in enumerate(zip(value, args, strict=True)):
            assert_typed(item, item_tp, f"{where}[{i}]")
        return
    if origin is dict:
        assert type(value) is dict, f"{where}: {type(value).__name__} where a dict belongs"
        for k, v in value.items():
            assert_typed(k, args[0], f"{where} key")
            assert_typed(v, args[1], f"{where}[{k!r}]")
        return
    assert isinstance(tp, type), f"{where}: cannot check against {tp!r}"
    if issubclass(tp, BaseModel):
        assert type(value) is tp, f"{where}: {type(value).__name__} where {tp.__name__} belongs"
        for field, info in tp.model_fields.items():
            assert_typed(getattr(value, field), info.annotation, f"{where}.{field}")
        return
    if issubclass(tp, enum.Enum):
        assert type(value) is tp, f"{where}: {type(value).__name__} {value!r} where {tp.__name__} belongs"
        return
    if tp is float:
        assert type(value) in (float, int), f"{where}: {type(value).__name__} where float belongs"
        return
    if (
        tp is datetime
    ):  # in process the SDK's PreciseDatetime (a datetime) may stand where the store wrote one
        assert isinstance(value, datetime), f"{where}: {type(value).__name__} where datetime belongs"
        return
    assert type(value) is tp, f"{where}: {type(value).__name__} {value!r:.80} where {tp.__name__} belongs"


def mentions_any(tp: Any) -> bool:
    return tp is Any or any(mentions_any(a) for a in typing.get_args(tp))


def scenario(call: Callable[..., Any], project: str) -> dict[str, Any]:
    """Call every API method once or more on a fresh home and project; the last result of each, by name."""
    out: dict[str, Any] = {}

    def c(name: str, **params: Any) -> Any:
        out[name] = call(name, **params)
        return out[name]

    p = project
    c("start_session", project=p, claude_session_id=SESSION, source="test")
    a = c(
        "store", memory={"content": "We run the backend tests with pytest -x", "tags": ["testing"]}, project=p
    ).memory.id
    stored = c(
        "store_many",
        memories=[
            {"content": "Session tokens expire after 15 minutes"},
            {"content": "Session tokens expire after 60 minutes"},
            {"content": "Temporary note about the staging server", "memory_type": "episodic"},
            *(
                {
                    "content": f"Debugged the flaky checkout test, attempt {i}: timing issue in cart.py",
                    "memory_type": "episodic",
                    "tags": ["checkout"],
                }
                for i in range(3)
            ),
            *(
                {
                    "content": f"Deploy {i} to staging failed on a missing migration in billing",
                    "memory_type": "episodic",
                    "tags": ["deploy"],
                }
                for i in range(3)
            ),
        ],
        project=p,
    )
    b, scratch = stored[0].memory.id, stored[2].memory.id
    c(
        "store",
        memory={
            "content": "Count the memories in a scope",
            "memory_type": "procedural",
            "tags": ["surql-skill"],
            "metadata": {"surql": "SELECT count() FROM memory GROUP ALL"},
        },
        project=p,
    )
    in_session = c(
        "store",
        memory={"content": "The failing test is test_cart_total", "scope": "session"},
        project=p,
        session=SESSION,
    ).memory.id
    c("get", memory_id=a, project=p)
    c("update", memory_id=a, patch={"tags": ["testing", "pytest"]}, project=p)
    c("set_status", memory_id=scratch, status="active", project=p)
    hits = c("recall", query="how do we run the backend tests", project=p, session=SESSION)
    c(
        "mark_retrieval_useful",
        query="how do we run the backend tests",
        was_useful=True,
        project=p,
        log_id=hits.log_id,
    )
    c("list_memories", project=p)
    c("list_projects")
    c("list_sessions")
    c("stats", project=p, session=SESSION)
    c("settings_report", project=p)
    c("injection_context", project=p, session=SESSION)
    c("note_injected", ids=[a], project=p)
    c("health")
    c("revision")
    c("project_identity", project=p)
    c("share_memory", memory_id=a, project=p)
    c("share_memory", memory_id=a, project=p, shared=False)
    c("share_class", memory_type="procedural", project=p)
    c("share_class", memory_type="procedural", project=p, shared=False)
    remote = Path(p).parent / f"{Path(p).name}-sync.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    c("sync_init", remote=str(remote))
    c("sync_run")
    c("sync_status", project=p)
    exported = c("export_memories", scope="project", project=p)
    c(
        "import_lines",
        lines=[json.dumps({"content": "Deploys go out on Tuesdays after the standup"})],
        project=p,
    )
    c("restore_memories", records=[exported[0].model_dump(mode="json")], project=p)
    c("engram_explore", depth=1, project=p)
    c("recall_skill", task_description="count the memories", execute=True, project=p)
    c("promote", memory_id=in_session, target_scope="project", project=p, session=SESSION)
    c(
        "add_entities",
        entities=[{"name": "pytest", "entity_type": "tool"}, {"name": "ruff", "entity_type": "tool"}],
        project=p,
    )
    c("relate_entities", source="pytest", target="ruff", relation_type="related_to", project=p)
    c("search_knowledge_graph", query="pytest", project=p)
    c("memory_graph", memory_id=a, project=p)
    c("coactivate_memories", memory_ids=[a, b], project=p)
    c("memory_associations", memory_id=a, project=p)
    c("memory_peek", project=p)
    c("memory_partition", partition_by="type", project=p)
    c(
        "memory_aggregate",
        results=[{"source": "recall", "memories": [h.memory.model_dump(mode="json") for h in hits.hits]}],
    )
    c("retrieval_history", memory_id=a, project=p)
    c("evolve_memory_system", project=p)
    # One applied change to roll back (the real ones need weeks of judged recalls), written the console's way.
    c(
        "run_query",
        surql="CREATE evolution_history SET key = 'wire_test', old_value = {v: 1}, "
        "new_value = {v: 2}, reason = 'wire test'",
        scope="user",
        allow_writes=True,
    )
    c("run_query", surql="SELECT id, content, created_at FROM memory LIMIT 2", project=p)
    c(
        "preview_write",
        surql="UPDATE memory SET importance = 0.5 WHERE importance > 2; DELETE memory;",
        project=p,
    )
    c("evolution_history")
    c("rollback_evolution", steps=1)
    c("maintain_organisation", project=p)
    c("reflect_and_consolidate", project=p)
    items = c("list_consolidations", project=p)
    assert len(items) >= 2, f"the scenario needs two consolidations waiting for review, got {items}"
    c(
        "propose_consolidation_summary",
        item_id=items[0].id,
        summary="Checkout and deploy failures recur",
        project=p,
    )
    c("approve_consolidation", item_id=items[0].id, project=p)
    c("reopen_consolidation", item_id=items[0].id, project=p)
    c("approve_consolidation", item_id=items[0].id, project=p)
    c("reject_consolidation", item_id=items[1].id, project=p)
    conflicts = c("list_contradictions", project=p)
    c("count_contradictions", project=p)
    assert conflicts, "the scenario needs one contradiction (15 vs 60 minutes)"
    c("resolve_contradiction", contradiction_id=conflicts[0].id, resolution="keep_both", project=p)
    c("reopen_contradiction", contradiction_id=conflicts[0].id, project=p)
    c("count_contradictions", project=p)
    c("count_consolidations", project=p)
    c("resolve_contradictions", project=p, min_confidence=0.99)
    c("decide_consolidations", action="reject", project=p, reason="no-such-reason")
    c("list_episodes", project=p, session=SESSION)
    c("end_episode", session=SESSION, project=p)
    c("session_summary", session=SESSION, summary="Worked on the backend tests", project=p)
    c("forget", memory_id=scratch, project=p)
    c("maintain", project=p)
    c("redact_stored", project=p)
    c("compact", project=p)
    c("end_session", session=SESSION)
    return out


def test_every_declared_result_type_travels_as_an_expression() -> None:
    """Without a daemon: each method declares a return type, written and read back as the same type, and none
    hides a plain dict behind Any (a result with open keys is a model with those keys as fields)."""
    from engram_core.service import API_METHODS
    from engram_core.wire.types import type_expr, type_from_expr

    for name in API_METHODS:
        tp = declared(name)
        assert not mentions_any(tp), f"{name} returns {tp}: give its result a model in engram_core.models"
        assert type_from_expr(type_expr(tp)) == tp, name


def test_an_unknown_result_type_is_an_error_not_a_dict() -> None:
    from engram_core.wire.types import WireTypeError, type_expr, type_from_expr

    with pytest.raises(WireTypeError, match="NoSuchModel"):
        type_from_expr("list[NoSuchModel]")
    with pytest.raises(WireTypeError, match="holds Call"):
        type_from_expr("__import__('os')")
    with pytest.raises(WireTypeError, match="not a type the client can rebuild"):
        type_expr(Path)


def test_every_api_method_answers_the_same_types_in_process_and_over_the_socket(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN401
    from engram_core.service import API_METHODS, EngramService

    monkeypatch.setenv("HOME", str(tmp_path))
    projects = []
    for side in ("local", "remote"):
        (tmp_path / side / ".git").mkdir(parents=True)
        projects.append(str(tmp_path / side))

    svc = EngramService(home=tmp_path / "home-local", embedder=embedder, recover_sessions=False)
    try:
        local = scenario(lambda name, **params: getattr(svc, name)(**params), projects[0])
    finally:
        svc.close()

    daemon = DaemonProc(tmp_path / "home-remote").start()
    try:
        client = daemon.client()
        remote = scenario(lambda name, **params: getattr(client, name)(**params), projects[1])
        client.close()
    finally:
        daemon.stop()

    assert set(local) == set(remote)
    missing = sorted(set(API_METHODS) - set(local))
    assert not missing, f"API methods the scenario does not call yet (add them): {missing}"
    for name in sorted(API_METHODS):
        tp = declared(name)
        assert_typed(local[name], tp, f"{name}() in process")
        assert_typed(remote[name], tp, f"{name}() over the socket")
        assert type(remote[name]) is type(local[name]), name


def test_the_daemons_own_methods_are_typed_and_status_keeps_its_json(light_daemon: DaemonProc) -> None:
    """status, flush and shutdown come back as their models; the raw status (what `engram status --json` prints)
    has exactly the keys it always had, and the hello table types every method the daemon serves."""
    from engram_core.daemon.server import Daemon
    from engram_core.models import DaemonStatus, FlushReport, ShutdownAck

    light_daemon.start()
    client = light_daemon.client()
    try:
        own = {name[2:] for name in vars(Daemon) if name.startswith("m_")}
        assert own <= set(client.methods()), "every method the daemon serves has a result type in hello"
        status = client.status()
        assert_typed(status, DaemonStatus, "status()")
        raw = client.call("status")
        assert list(raw) == list(status.model_dump(mode="json"))
        assert {"protocol", "pid", "uptime_s", "events_parked", "parked", "sessions_active"} <= set(raw)
        assert_typed(client.flush(timeout_s=5), FlushReport, "flush()")
        assert_typed(client.shutdown(), ShutdownAck, "shutdown()")
    finally:
        client.close()


def test_a_connected_client_has_only_the_methods_the_daemon_serves(light_daemon: DaemonProc) -> None:
    light_daemon.start()
    client = light_daemon.client()
    try:
        assert client.has("recall") and callable(client.recall)
        assert getattr(client, "clock", None) is None  # what the TUI asks of its service
        assert not client.has("clock")
    finally:
        client.close()
