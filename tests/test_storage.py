"""The storage package's rules: mirrored tables written only by storage, the lock order, modules and classes of a
size a newcomer can read."""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_core.models import Scope
from engram_core.storage import GRAPH_TABLES, MIRRORED_TABLES, Connection, ScopeStore, guard, locks
from engram_core.storage.guard import RawMemoryWrite
from engram_core.storage.locks import LockOrderError, OrderedLock

CORE = Path(__file__).resolve().parent.parent / "engram_core"
WRITE = re.compile(r"\b(?:UPDATE|UPSERT|CREATE|DELETE|INSERT|RELATE)\b", re.IGNORECASE)
MAX_LINES = 800
MAX_METHODS = 30


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _text(node: ast.AST, consts: dict[str, str]) -> str | None:
    """The SurrealQL a call's argument spells, as far as it is written in the module."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)  # type: ignore[misc]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _text(node.left, consts), _text(node.right, consts)
        return None if a is None and b is None else (a or "") + (b or "")
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
        return _text(node.func.value, consts)
    return None


def _memory_targets(sql: str, params: ast.AST | None) -> bool:
    """Whether a statement writes a record its parameters give as a memory or graph record (`record(k)`,
    `record(k, "memory")`, `rid("memory", k)`, `rid("episode", k)`): the parameters after
    UPDATE/UPSERT/DELETE/CREATE, or the list a FOR loop over them walks."""
    tables = {"memory", *GRAPH_TABLES}
    if not isinstance(params, ast.Dict):
        return False
    loops = dict(re.findall(r"FOR\s+\$(\w+)\s+IN\s+\$(\w+)", sql, re.IGNORECASE))
    targets = {loops.get(v, v) for v in re.findall(r"\b(?:UPDATE|UPSERT|DELETE|CREATE)\s+\$(\w+)", sql, re.I)}
    for key, value in zip(params.keys, params.values, strict=True):
        if not (isinstance(key, ast.Constant) and key.value in targets):
            continue
        for node in ast.walk(value):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                if node.func.id == "record" and (len(node.args) == 1 or tables & set(args)):
                    return True
                if node.func.id in ("rid", "RecordID") and tables & set(args):
                    return True
    return False


def raw_memory_writes() -> list[str]:
    """Every `q`/`q1` call outside storage whose statements write a mirrored or graph table by name (a RELATE
    into a graph edge table included) or name memory or graph records."""
    found = []
    for rel, mod in _sources():
        if rel.startswith("storage/"):
            continue
        consts = {
            n.targets[0].id: t
            for n in mod.body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
            for t in [_text(n.value, {})]
            if t is not None
        }
        for node in ast.walk(mod):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            if node.func.attr not in ("q", "q1", "write", "write1"):
                continue
            sql = _text(node.args[0], consts) or ""
            if not WRITE.search(sql):
                continue
            names_table = any(
                re.search(
                    rf"\b(?:UPDATE|UPSERT|CREATE|DELETE|INSERT\s+(?:IGNORE\s+)?INTO)\s+{t}\b|"
                    rf"\bRELATE\s+\S+\s*->\s*{t}\b",
                    sql,
                    re.I,
                )
                for t in MIRRORED_TABLES | GRAPH_TABLES
            )
            if names_table or _memory_targets(sql, node.args[1] if len(node.args) > 1 else None):
                found.append(f"{rel}:{node.lineno}: {' '.join(sql.split())[:80]}")
    return found


def test_no_module_outside_storage_writes_a_mirrored_table_with_raw_surrealql() -> None:
    assert raw_memory_writes() == []


def test_the_static_check_sees_a_raw_memory_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above finds the forms a memory write takes (so an empty list means something)."""
    fake = tmp_path / "engram_core"
    fake.mkdir()
    (fake / "feedback.py").write_text(
        "def f(s, key):\n"
        "    s.q('UPDATE $id SET importance = 1', {'id': record(key)})\n"
        '    s.q1("UPDATE memory SET pinned = true WHERE x")\n'
        "    s.q('UPDATE $id SET status = 1', {'id': rid('contradiction_queue', key)})\n"
        "    s.q('FOR $u IN $rows { UPDATE $u.id SET e = $u.e; }', {'rows': [{'id': rid('memory', key)}]})\n"
        "    s.q('UPDATE $id SET ids = $ids', {'id': rid('consolidation_queue', key), 'ids': [record(key)]})\n"
    )
    monkeypatch.setattr(f"{__name__}.CORE", fake)
    assert [line.split(":")[1] for line in raw_memory_writes()] == ["2", "3", "5"]


def test_the_static_check_sees_a_raw_graph_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Organise's graph tables are written only by storage's `GraphTables` (which keeps the graph mirror in
    step): the check finds a raw write to one by name, by RELATE, or through a graph record id; a review queue's
    table is organise's own."""
    fake = tmp_path / "engram_core"
    (fake / "organise").mkdir(parents=True)
    (fake / "organise" / "graph.py").write_text(
        "def f(s, key, t):\n"
        "    s.q('UPDATE relates_to SET invalid_at = $t WHERE invalid_at IS NONE', {'t': t})\n"
        "    s.q('RELATE $a->relates_to->$b CONTENT $f RETURN NONE', {'a': 1, 'b': 2, 'f': {}})\n"
        "    s.q1('UPDATE $id SET ended_at = $t, end_reason = $r', {'id': rid('episode', key), 't': t})\n"
        '    s.q("INSERT INTO entity $rows ON DUPLICATE KEY UPDATE mention_count += 1")\n'
        "    s.q('UPDATE contradiction_queue SET status = 1 WHERE x')\n"
        "    s.q('DELETE associated_with WHERE weight < 0.1')\n"
        "    s.q1('SELECT * FROM relates_to WHERE invalid_at IS NONE')\n"
    )
    monkeypatch.setattr(f"{__name__}.CORE", fake)
    assert [line.split(":")[1] for line in raw_memory_writes()] == ["2", "3", "4", "5", "7"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ScopeStore]:
    conn = Connection.file(tmp_path / "guard.db")
    s = ScopeStore(conn, Scope.project, "p_guard")
    yield s
    conn.close()


def test_a_raw_query_from_the_core_that_writes_memory_rows_is_refused(store: ScopeStore) -> None:
    """The run-time half (storage/guard.py, on for the whole suite): a module of engram_core that writes memory rows
    through `q` fails, whatever its statement looks like; other tables and storage's own methods pass."""
    assert guard.checking()
    store.create_memory(
        "a",
        {
            "content": "x",
            "content_hash": "h",
            "memory_type": "semantic",
            "scope": "project",
            "importance": 0.5,
        },
    )
    code = compile(
        "def run(store, sql, params=None):\n    return store.q(sql, params)\n", "engram_core/fake.py", "exec"
    )
    namespace: dict[str, object] = {"__name__": "engram_core.fake"}
    exec(code, namespace)  # a function whose module is engram_core.fake, as a core module's would be
    run = namespace["run"]
    with pytest.raises(RawMemoryWrite, match="memory table"):
        run(store, "LET $t = type::table('mem' + 'ory'); UPDATE $t SET pinned = true")  # type: ignore[operator]
    run(store, "CREATE meta_memory CONTENT {insight_type: 'memory_gap', description: 'y'}")  # type: ignore[operator]
    exec(
        compile("def bypass(store, sql):\n    return store.write(sql)\n", "engram_core/fake.py", "exec"),
        namespace,
    )
    with pytest.raises(RawMemoryWrite, match="storage's own query path"):
        namespace["bypass"](store, "RETURN 1")  # type: ignore[operator]
    store.memories.raise_access_count("a", 3)
    assert store.get("a")["access_count"] == 3  # type: ignore[index]


def test_an_out_of_order_acquisition_fails() -> None:
    assert locks.checking()
    conn = OrderedLock(locks.CONNECTION, "conn")
    mirror = OrderedLock(locks.MIRROR, "mirror")
    with conn, mirror:
        pass
    with mirror, pytest.raises(LockOrderError, match="conn .rank 40. taken while holding mirror"):
        conn.acquire()
    with conn, mirror, conn:  # a lock held already may be taken again
        pass


def test_the_order_is_per_thread() -> None:
    mirror = OrderedLock(locks.MIRROR, "mirror")
    conn = OrderedLock(locks.CONNECTION, "conn")
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with conn:
                pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with mirror:
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors == []


def test_a_store_and_the_request_lock_follow_the_written_order(store: ScopeStore) -> None:
    """The real locks: the request lock, then a store's drain, connection and mirror locks; the other way round
    fails."""
    from engram_core.request_lock import RequestLock

    request = RequestLock()
    with request, store.drain_lock, store.conn.lock, store.mirror_lock:
        store.q1("RETURN 1")
    with store.mirror_lock, pytest.raises(LockOrderError):
        store.q1("RETURN 1")  # q takes the drain and connection locks
    with store.conn.lock, pytest.raises(LockOrderError):
        request.acquire()


def test_modules_and_classes_stay_readable() -> None:
    """No module of engram_core over 800 lines and no class over 30 methods."""
    long, big = [], []
    for rel, mod in _sources():
        lines = len((CORE / rel).read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            long.append((rel, lines))
        for node in ast.walk(mod):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) for b in node.body)
                if n > MAX_METHODS:
                    big.append((rel, node.name, n))
    assert long == [] and big == [], (long, big)
    assert all(
        len((CORE / "storage" / p.name).read_text().splitlines()) <= MAX_LINES
        for p in (CORE / "storage").glob("*.py")
    )
