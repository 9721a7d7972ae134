"""A faster encoder for the requests Engram sends the embedded engine, byte for byte the SDK's own.

The SDK encodes every request with a general pure-Python CBOR encoder: on an import with the organise layer on,
encoding the graph writes' parameters (entities, mentions, relations: hundreds of values a memory) takes about as
long as the engine takes to write them (docs/benchmarks.md). This encoder handles the types Engram sends (dict,
list, tuple, str, int, float, bool, None, bytes, datetime, RecordID) with one dispatch per value and produces the
same bytes (tests/test_cbor_encode.py compares them); a message holding anything else, or an integer outside
SurrealDB's signed 64-bit range, is encoded by the SDK as before (its errors included).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from surrealdb.data import cbor as sdk_cbor
from surrealdb.data.types.record_id import RecordID

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_TAG_RECORD_ID = 8
_pack_f64 = struct.Struct(">Bd").pack


class _Unsupported(Exception):
    """A value this encoder leaves to the SDK."""


def _head(major: int, n: int) -> bytes:
    if n < 256:
        return _SMALL[major][n]
    major <<= 5
    if n < 65536:
        return bytes((major | 25,)) + n.to_bytes(2, "big")
    if n < 4294967296:
        return bytes((major | 26,)) + n.to_bytes(4, "big")
    return bytes((major | 27,)) + n.to_bytes(8, "big")


# The head of every length or small integer below 256, for each major type: most values Engram sends are short.
_SMALL = [[bytes((m << 5 | n,)) if n < 24 else bytes((m << 5 | 24, n)) for n in range(256)] for m in range(8)]
_STR_HEAD, _ARRAY_HEAD, _MAP_HEAD = _SMALL[3], _SMALL[4], _SMALL[5]


def _str(v: str, out: bytearray) -> None:
    b = v.encode("utf-8")
    n = len(b)
    out += _STR_HEAD[n] if n < 256 else _head(3, n)
    out += b


def _bytes(v: bytes, out: bytearray) -> None:
    out += _head(2, len(v))
    out += v


def _int(v: int, out: bytearray) -> None:
    if not _I64_MIN <= v <= _I64_MAX:
        raise _Unsupported  # the SDK refuses it with its own message
    out += _head(0, v) if v >= 0 else _head(1, -(v + 1))


def _float(v: float, out: bytearray) -> None:
    if math.isnan(v):
        out += b"\xf9\x7e\x00"
    elif math.isinf(v):
        out += b"\xf9\x7c\x00" if v > 0 else b"\xf9\xfc\x00"
    else:
        out += _pack_f64(0xFB, v)


def _bool(v: bool, out: bytearray) -> None:
    out += b"\xf5" if v else b"\xf4"


def _none(_v: None, out: bytearray) -> None:
    out += b"\xc6\xf6"  # SurrealDB's NONE: tag 6 around null, as the SDK sends it


def _list(v: list[Any] | tuple[Any, ...], out: bytearray) -> None:
    n = len(v)
    out += _ARRAY_HEAD[n] if n < 256 else _head(4, n)
    get = _ENCODERS.get
    for item in v:
        get(item.__class__, _refuse)(item, out)


def _dict(v: dict[Any, Any], out: bytearray) -> None:
    n = len(v)
    out += _MAP_HEAD[n] if n < 256 else _head(5, n)
    get = _ENCODERS.get
    for key, val in v.items():
        if key.__class__ is str:
            _str(key, out)
        else:
            get(key.__class__, _refuse)(key, out)
        get(val.__class__, _refuse)(val, out)


def _datetime(v: datetime, out: bytearray) -> None:
    # cbor2's tag 0 (an RFC 3339 string), a naive datetime taken as UTC: the SDK's encoder is built so
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    out += b"\xc0"
    _str(v.isoformat().replace("+00:00", "Z"), out)


def _record_id(v: RecordID, out: bytearray) -> None:
    out += _SMALL[6][_TAG_RECORD_ID]
    _list([v.table_name, v.id], out)


def _refuse(_v: Any, _out: bytearray) -> None:
    raise _Unsupported


_ENCODERS: dict[type, Callable[[Any, bytearray], None]] = {
    str: _str,
    bytes: _bytes,
    int: _int,
    float: _float,
    bool: _bool,
    type(None): _none,
    list: _list,
    tuple: _list,
    dict: _dict,
    datetime: _datetime,
    RecordID: _record_id,
}


def encode(obj: Any) -> bytes:
    """``obj`` as the SDK's ``surrealdb.data.cbor.encode`` would encode it."""
    out = bytearray()
    try:
        _ENCODERS.get(obj.__class__, _refuse)(obj, out)
    except (_Unsupported, RecursionError):
        return _sdk_encode(obj)
    return bytes(out)


_sdk_encode = sdk_cbor.encode


def install() -> None:
    """Make the SDK's request builder use `encode` (the one module-level name it encodes every request with)."""
    from surrealdb.request_message.descriptors import cbor_ws

    cbor_ws.encode = encode  # type: ignore[attr-defined]
