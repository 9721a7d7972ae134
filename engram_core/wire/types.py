"""Result types on the wire: each API method's declared return type, as the daemon sends it and the client reads it.

The daemon writes every method's return annotation as a small expression over ``engram_core.models`` names,
builtins and ``Any`` (``list[Memory]``, ``dict[str, dict[str, int]]``) in its ``hello``; the client turns each
expression back into that type and validates the method's JSON result with a pydantic ``TypeAdapter`` of it, so
``RemoteService.recall(…)`` is the same ``RecallResult`` that ``EngramService.recall(…)`` returns. The client never
imports the service (no SurrealDB, torch or numpy), only ``engram_core.models``.

Both directions refuse what they cannot write exactly: an API method whose result is not one of these types is a
bug the daemon reports at start, not a result that silently arrives as a plain dict.
"""

from __future__ import annotations

import ast
import types
import typing
from typing import Any

BUILTINS: dict[str, Any] = {
    "list": list,
    "dict": dict,
    "tuple": tuple,
    "Any": Any,
    "None": None,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
}
_NODES = (ast.Expression, ast.Name, ast.Subscript, ast.Tuple, ast.BinOp, ast.BitOr, ast.Load, ast.Constant)


class WireTypeError(TypeError):
    """A type that cannot travel as an expression over ``engram_core.models`` names (or an expression naming one
    this side does not know: a client and a daemon of different versions)."""


def type_expr(tp: Any) -> str:
    """``list[Memory] | None`` for that annotation; WireTypeError for anything the other side could not rebuild."""
    from .. import models

    if tp is type(None) or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    if tp in (int, float, str, bool):
        return str(tp.__name__)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_expr(a) for a in args)
    if origin in (list, dict, tuple) and args:
        if origin is tuple and args[-1] is Ellipsis:
            raise WireTypeError(f"{tp}: a variable-length tuple has no expression here; use list[...]")
        return f"{getattr(origin, '__name__', origin)}[{', '.join(type_expr(a) for a in args)}]"
    name = getattr(tp, "__name__", None)
    if isinstance(tp, type) and name and getattr(models, name, None) is tp:
        return str(name)
    raise WireTypeError(
        f"{tp!r} is not a type the client can rebuild: declare an engram_core.models class, a "
        f"builtin, or list/dict/tuple/union of those"
    )


def type_from_expr(expr: str) -> Any:
    """The type ``expr`` names (the inverse of :func:`type_expr`); WireTypeError when it names something else."""
    from .. import models

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise WireTypeError(f"the result type {expr!r} is not an expression") from None
    names = dict(BUILTINS)
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise WireTypeError(f"the result type {expr!r} holds {type(node).__name__}, which types never do")
        if isinstance(node, ast.Name) and node.id not in names:
            value = getattr(models, node.id, None)
            if not isinstance(value, type):
                raise WireTypeError(
                    f"the result type {expr!r} names {node.id!r}, which this client's "
                    f"engram_core.models does not have"
                )
            names[node.id] = value
    # Only names, subscripts and | over the table above reach eval: no call, attribute or builtin can.
    return eval(compile(tree, "<type>", "eval"), {"__builtins__": {}}, names)  # noqa: S307
