"""The request encoder (cbor_encode.py) gives the SDK's bytes for everything Engram sends, and leaves the rest to
the SDK; the engine stores and returns user text through it unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from surrealdb.data import cbor as sdk_cbor
from surrealdb.data.types.record_id import RecordID
from surrealdb.request_message.descriptors import cbor_ws

from engram_core import cbor_encode
from engram_core.storage import Connection

USER_TEXT = "fix [x] and [/] in C:\\path\\ 🚀 café\u2028next\u0085line\x00\x1b[31m é 中文 " + "long " * 60

VALUES = [
    None,
    True,
    False,
    0,
    1,
    23,
    24,
    255,
    256,
    65535,
    65536,
    2**32 - 1,
    2**32,
    2**63 - 1,
    -1,
    -24,
    -25,
    -256,
    -257,
    -(2**63),
    0.0,
    -0.0,
    1.5,
    1e300,
    -3.25e-9,
    float("inf"),
    float("-inf"),
    "",
    "a",
    "x" * 23,
    "x" * 24,
    "y" * 300,
    "z" * 70000,
    USER_TEXT,
    b"",
    b"\x00\x01" * 200,
    [],
    (),
    {},
    [1, [2, [3, {"a": None}]]],
    (1, "two", 3.0),
    {"k": [RecordID("memory", "01ABC"), RecordID("entity", "file:src/app.py")]},
    RecordID("relates_to", ["a", 1]),
    RecordID("t", 42),
    RecordID("t", {"k": "v"}),
    datetime(2026, 11, 24, 13, 5, 7, tzinfo=UTC),
    datetime(2026, 11, 24, 13, 5, 7, 123456, tzinfo=UTC),
    datetime(2020, 1, 2, 3, 4, 5),
    datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
    {
        "id": "q1",
        "method": "query",
        "params": [
            "UPSERT $x",
            {
                "now": datetime.now(UTC),
                "rows": [
                    {
                        "in": RecordID("memory", "m1"),
                        "out": RecordID("entity", "e1"),
                        "weight": 0.5,
                        "ev": None,
                        "evidence": ["m1"],
                        "n": 3,
                        "ok": True,
                    }
                ],
            },
        ],
    },
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_same_bytes_as_the_sdk(value: object) -> None:
    assert cbor_encode.encode(value) == sdk_cbor.encode(value)


@pytest.mark.parametrize(
    "value",
    [{1, 2}, {"n": 2**63}, {"deep": Path("/x")}, [frozenset()]],
    ids=["set", "big int", "path", "frozenset"],
)
def test_anything_else_is_left_to_the_sdk(value: object) -> None:
    try:
        want: object = sdk_cbor.encode(value)
    except Exception as exc:  # the SDK's own refusal, unchanged
        with pytest.raises(type(exc)):
            cbor_encode.encode(value)
        return
    assert cbor_encode.encode(value) == want


def test_the_sdk_sends_requests_through_it(tmp_path: Path) -> None:
    """Installed by the store module; a real engine gets the user's text back exactly."""
    assert cbor_ws.encode is cbor_encode.encode
    conn = Connection.file(tmp_path / "t.db")
    try:
        conn.run(
            "t",
            "t",
            "CREATE thing:one SET text = $t, at = $at, tags = $tags, ref = $ref",
            {
                "t": USER_TEXT,
                "at": datetime(2026, 1, 1, tzinfo=UTC),
                "tags": ["a", "[b]"],
                "ref": RecordID("memory", "m1"),
            },
        )
        row = conn.run("t", "t", "SELECT * FROM ONLY thing:one")[-1]
    finally:
        conn.close()
    assert row["text"] == USER_TEXT and row["tags"] == ["a", "[b]"] and row["ref"] == RecordID("memory", "m1")
