"""SurrealQL validator for ``engram_execute``: decide whether an agent-written query may run.

Approach
--------
The query is parsed with a real SurrealQL grammar (``tree-sitter-surrealql`` 0.2.0) and the
*whole* syntax tree is walked, so a statement counts wherever it hides: after a ``;``, in a
``(subquery)``, in ``LET $x = (...)``, in ``RETURN (...)``, inside ``IF``/``ELSE`` and ``FOR``
blocks, in function arguments.  Keywords inside strings and comments are not statements and
are ignored.  Anything the grammar cannot parse (ERROR or MISSING nodes) is refused with rule
``parse-error``: the validator never passes through what it does not understand.

Rules
-----
* Allowed statements: ``SELECT``, ``RETURN``, ``LET``, ``IF``/``ELSE``, ``FOR`` (control flow
  only; its body is checked like everything else), ``BREAK``, ``CONTINUE`` and ``THROW``
  (it only raises an error in the caller's own query, so it is harmless).  Bare expressions
  (``1 + 1``, ``$x``) are allowed.
* Write statements (``CREATE``, ``INSERT``, ``UPDATE``, ``UPSERT``, ``DELETE``, ``RELATE``)
  are allowed only with ``allow_writes=True``; ``sequence::nextval`` counts as a write.
* Every other statement is refused, whatever ``allow_writes`` says: ``DEFINE``, ``REMOVE``,
  ``DROP``, ``ALTER``, ``KILL``, ``LIVE``, ``INFO``, ``SLEEP``, ``BEGIN``/``COMMIT``/``CANCEL``,
  ``REBUILD``, ``SHOW``; ``USE`` is refused as ``cross-scope``.  Statements the grammar does
  not know (``ACCESS``, ``OPTION``, 3.x ``DEFINE BUCKET/API``...) fail to parse and are
  refused as ``parse-error``.  Default deny: any ``*_statement`` node not on the allow list
  is refused.
* Functions: ``http::*``, custom ``fn::*`` (their bodies cannot be audited from here),
  ``mod::*``/``silo::*`` (plug-in modules), ``ml::*``, ``api::*``, ``file::*`` (file
  buckets, outside the database), ``sleep`` and the file-bucket methods ``.put()``,
  ``.delete()``, ``.copy()``, ``.rename()`` are refused.  ``ns::*``/``db::*`` style names are
  refused as ``cross-scope``.  Embedded JavaScript (``function() { ... }``) does not parse
  with this grammar and is therefore refused as ``parse-error``.
* Input longer than ``max_length`` characters is refused (``too-large``) before parsing.
* Outside string literals and comments only ASCII is accepted (``non-ascii``): fullwidth
  letters, zero-width characters and homoglyphs are refused rather than guessed at.
  Unicode inside strings (``'café'``) is fine.
* ``BEGIN``, ``COMMIT`` and ``CANCEL`` anywhere in code are refused (``transaction-control``):
  Engram owns the transaction its schema guard runs in.
* Function rules judge the real name: the text before the argument list with blanks and
  comments removed (the engine reads ``fn :: x()`` and ``fn::/* c */x()`` as ``fn::x()``), and
  a lexical pass finds every ``a::b`` path in the code whatever the grammar made of it.
* Defence against parser differentials: an independent lexer (same rules as SurrealDB's:
  ``'..'``/``".."`` with backslash escapes, ``--``, ``//``, ``#`` comments ending at LF, CR,
  U+0085, U+2028 or U+2029 exactly as the engine ends them, and non-greedy ``/* */``
  comments) finds comments and blanks them before parsing (the grammar's own block-comment
  rule is greedy: it reads ``/* a */ DEFINE TABLE x /* b */`` as one comment), and must
  agree with the grammar about where every string literal starts and ends; if they disagree
  the query is refused as ``parse-error``. ``Verdict.executable`` holds the statements with
  every comment blanked: that, not the caller's text, is what run_query sends to the engine.
  tests/test_validator_engine.py checks all this against the real engine on generated input.

Grammar gaps and how they are handled
-------------------------------------
Checked against the grammar: ``<|10,40|>`` / ``<|10,COSINE|>`` kNN, ``@1@`` with
``search::score(1)``, ``search::rrf(...)``, ``vector::similarity::cosine``,
``vector::distance::knn()``, graph paths ``->a->b``/``<-a<-b``, ``count()``, ``GROUP BY``/
``GROUP ALL``, ``math::*``, ``time::now()``, durations, ``r''``/``d''``/``u''`` strings and
``IF .. ELSE IF .. ELSE`` blocks all parse natively.  Some valid SurrealDB 3 syntax does not,
and is rewritten *before* parsing by a lexical pass that only touches code (never strings or
comments) and keeps every character position, so that nothing executable can be hidden:

* a trailing ``;`` and empty statements (``;;``) -> the ``;`` is blanked;
* ``LIMIT n START [AT] m`` -> ``START [AT] m`` is blanked when ``m`` is an integer or a
  ``$param`` (pagination carries no code);
* backtick identifiers `` `my table` `` and ``⟨...⟩`` record-id parts -> replaced by an
  identifier of underscores (their content is a name, never code);
* ``LIMIT $n`` -> ``LIMIT 00`` (a parameter is a value, never code);
* ``[*]`` / ``[$]`` in paths -> ``[0]``;
* closure parameters ``|$x|`` / ``|$a: int, $b|`` in function arguments -> ``$x,`` (the
  body after them is still parsed and checked);
* ``!x`` and ``NOT (x)`` negation -> the operand alone (``NOT x`` without parentheses the engine
  refuses, and so does the validator, saying so), ``5e-1``/``1E3`` -> digits (a negation or a
  value changes nothing the checks look at; tests/test_validator_engine.py holds these forms
  against the engine's own parser).

Still refused as ``parse-error`` (documented limitation; rewrite the query):
``10dec``/``0x1F`` number forms, the legacy
``IF .. THEN .. END`` form, block expressions ``{ LET ..; RETURN .. }``, closures with block
bodies, ``COLLATE``/``NUMERIC`` ordering, ``f"bucket:/..."`` file strings.

This is one layer: the engine also runs these queries as a VIEWER/EDITOR database user.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import tree_sitter
import tree_sitter_surrealql

__all__ = ["Verdict", "Violation", "ValidationError", "validate", "check"]

_STATEMENT_PREVIEW = 200

# Statement node types of the grammar, sorted by what the validator does with them.
_READ_STATEMENTS = frozenset(
    {
        "select_statement",
        "return_statement",
        "let_statement",
        "if_statement",
        "for_statement",
        "break_statement",
        "continue_statement",
        "throw_statement",
    }
)
_WRITE_STATEMENTS = {
    "create_statement": "CREATE",
    "insert_statement": "INSERT",
    "update_statement": "UPDATE",
    "upsert_statement": "UPSERT",
    "delete_statement": "DELETE",
    "relate_statement": "RELATE",
}
# Wrappers the grammar puts around every statement: not statements themselves.
_WRAPPERS = frozenset({"subquery_statement", "primary_statement"})

# Function namespaces refused outright, with the reason given to the agent.
_BLOCKED_NAMESPACES: dict[str, str] = {
    "http": "it makes network requests from the database",
    "fn": "custom functions cannot be audited by the validator",
    "mod": "plug-in module functions cannot be audited by the validator",
    "silo": "plug-in module functions cannot be audited by the validator",
    "ml": "it runs stored machine-learning models",
    "api": "it invokes API endpoints defined in the database",
    "file": "it reads or writes file buckets outside the database",
}
_CROSS_SCOPE_NAMESPACES = frozenset({"ns", "db", "namespace", "database", "root", "kv"})
_BLOCKED_FUNCTIONS = {"sleep": "it stalls the database"}
_WRITE_FUNCTIONS = frozenset({"sequence::nextval"})
# Method-call forms of file-bucket operations (``$f.put(..)``).
_BLOCKED_METHODS = frozenset(
    {
        "put",
        "put_if_not_exists",
        "delete",
        "copy",
        "copy_if_not_exists",
        "rename",
        "rename_if_not_exists",
        "sleep",
    }
)

# Independent lexer, modelled on SurrealDB's: strings with backslash escapes, four comment forms,
# backtick and angle-bracket escaped identifiers.  Unterminated forms run to the end of input.
_LEX = re.compile(
    r"""
      (?P<comment>(?:--|//|\#)[^\n\r\x85\u2028\u2029]*|/\*.*?(?:\*/|\Z))
    | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
    | (?P<ident>`(?:[^`\\]|\\.)*(?:`|\Z)|⟨(?:[^⟩\\]|\\.)*(?:⟩|\Z))
    | (?P<code>[^'"`⟨/\#\-]+|[/\-])
    """,
    re.S | re.X,
)
_STRING_PREFIX = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]$")
_START_CLAUSE = re.compile(r"\bSTART(\s+AT)?\s+(\d+|\$\w+)\b", re.I)
_LIMIT_PARAM = re.compile(r"\bLIMIT(?:\s+BY)?\s+(\$\w+)", re.I)
# Forms the engine parses and the grammar lacks, rewritten (same length) before the grammar reads them:
# a number with an exponent and no fraction (`5e-1`, `1E3`) becomes digits; prefix negation (`!x`, `NOT (x)`)
# becomes blanks. A value and a negation change no statement, table, function or write the checks look at.
_EXP_NUMBER = re.compile(r"(?<![\w.$])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")
_BANG = re.compile(r"!(?![=~])")
_NOT_BEFORE = r"(?:^|(?<=[(\[,;=&|!])|\b(?:WHERE|AND|OR|IF|THEN|ELSE|RETURN|WHEN|VALUE|NOT))(\s*)(NOT)"
_NOT_CALL = re.compile(_NOT_BEFORE + r"(?=\s*\()", re.I)  # `NOT (x)`: the engine's not() function
# `NOT x` without parentheses: the engine does not parse it (tests/test_validator_engine.py)
_NOT_BARE = re.compile(_NOT_BEFORE + r"\s+(?!(?:IN|INSIDE|CONTAINS\w*)\b)(?=[A-Za-z_$!])", re.I)
_STAR_INDEX = re.compile(r"\[\s*[*$]\s*\]")
_CLOSURE_PARAMS = re.compile(r"(?<=[(,])(\s*)\|((?:\s*\$\w+\s*(?::\s*[\w<>|, ]+?)?\s*,?)+)\|")
_CLOSURE_NAME = re.compile(r"\$\w+|,")
# Lexical backstops over the code (strings, comments and escaped identifiers blanked), independent of the
# grammar: a function path however it is spaced ('fn :: x', 'fn::/* c */x'), and transaction control words.
_PATH = re.compile(r"(?<![\w$])[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)+")
_TRANSACTION_WORD = re.compile(r"(?<![\w$.:])(BEGIN|COMMIT|CANCEL)(?![\w:])", re.I)

_parser_local = threading.local()


def _parser() -> tree_sitter.Parser:
    # tree-sitter parsers are not thread-safe; one per thread is cheap.
    parser = getattr(_parser_local, "parser", None)
    if parser is None:
        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_surrealql.language()))
        _parser_local.parser = parser
    return parser


@dataclass(frozen=True)
class Violation:
    statement_index: int
    statement: str
    rule: str
    message: str


@dataclass(frozen=True)
class Verdict:
    ok: bool
    statements: list[str]  # as the caller wrote them (for display)
    violations: list[Violation]
    has_writes: bool
    # What may be sent to the engine: the same statements with every comment blanked by the validator's own
    # lexer, so the engine runs exactly the text that was checked even if the two lexers ever disagreed.
    executable: list[str] = field(default_factory=list)


class ValidationError(ValueError):
    """Raised by :func:`check`; ``str()`` is the first violation's message."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        first = verdict.violations[0].message if verdict.violations else "query refused"
        super().__init__(first)


@dataclass
class _Lexed:
    """Result of the independent lexical pass over the original text."""

    opaque: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, kind), char offsets
    code_view: str = ""  # text with strings/comments/escaped idents blanked, same length
    unterminated: int | None = None  # char offset of an unterminated string/comment/ident


def _closed(kind: str, token: str) -> bool:
    if kind == "comment":
        return not token.startswith("/*") or (len(token) >= 4 and token.endswith("*/"))
    closer = {"'": "'", '"': '"', "`": "`", "⟨": "⟩"}[token[0]]
    if len(token) < 2 or token[-1] != closer:
        return False
    # the last quote is escaped (not closing) when an odd run of backslashes precedes it
    body = token[1:-1]
    return (len(body) - len(body.rstrip("\\"))) % 2 == 0


def _lex(text: str) -> _Lexed:
    out = _Lexed()
    view = list(text)
    for m in _LEX.finditer(text):
        kind = m.lastgroup
        if kind == "code" or kind is None:
            continue
        start, end = m.span()
        token = m.group()
        if kind == "string" and start > 0 and _STRING_PREFIX.search(text, 0, start):
            start -= 1  # r'..', d'..', u'..' etc: the prefix belongs to the string token
        out.opaque.append((start, end, kind))
        if not _closed(kind, token) and out.unterminated is None:
            out.unterminated = start
        for i in range(start, end):
            if view[i] != "\n":
                view[i] = " "
    out.code_view = "".join(view)
    return out


def _split(text: str, lexed: _Lexed) -> list[tuple[int, int]]:
    """Top-level statement spans (char offsets), split on ``;`` outside brackets/strings/comments."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    view = lexed.code_view
    for i, ch in enumerate(view):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth = max(0, depth - 1)
        elif ch == ";" and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(text)))
    return spans


def _rewrite(text: str, lexed: _Lexed, spans: list[tuple[int, int]]) -> str:
    """Position-preserving rewrites of valid syntax the grammar lacks (see module docstring)."""
    chars = list(text)
    view = lexed.code_view
    for start, end, kind in lexed.opaque:
        if kind == "ident":
            for i in range(start, end):
                chars[i] = "_"
        elif kind == "comment":
            # The grammar's block-comment rule is greedy ('/* a */ DEFINE .. /* b */' is one comment
            # to it), so comments are removed here using the lexer's SurrealDB-like, non-greedy rule.
            for i in range(start, end):
                if chars[i] != "\n":
                    chars[i] = " "
    # Blank ';' that terminate empty statements, and a trailing ';'.
    for n, (s, e) in enumerate(spans):
        empty = not view[s:e].strip()
        if n < len(spans) - 1 and empty:
            chars[e] = " "
        elif n == len(spans) - 1 and empty and n > 0:
            chars[s - 1] = " "
    for m in _START_CLAUSE.finditer(view):
        for i in range(*m.span()):
            chars[i] = " "
    for m in _LIMIT_PARAM.finditer(view):
        s, e = m.span(1)
        chars[s:e] = "0" * (e - s)
    for m in _EXP_NUMBER.finditer(view):
        s, e = m.span()
        chars[s:e] = "1" * (e - s)
    for m in _BANG.finditer(view):
        chars[m.start()] = " "
    for m in _NOT_CALL.finditer(view):
        s, e = m.span(2)
        chars[s:e] = " " * (e - s)
    for m in _STAR_INDEX.finditer(view):
        s, e = m.span()
        chars[s:e] = "[" + "0".center(e - s - 2) + "]"
    for m in _CLOSURE_PARAMS.finditer(view):
        s, e = m.span(2)
        keep = {i for n in _CLOSURE_NAME.finditer(view, s, e) for i in range(*n.span())}
        chars[s - 1] = " "
        for i in range(s, e):
            if i not in keep:
                chars[i] = " "
        chars[e] = ","
    return "".join(chars)


def _preview(s: str) -> str:
    s = s.strip()
    return s if len(s) <= _STATEMENT_PREVIEW else s[: _STATEMENT_PREVIEW - 1] + "…"


def _line_col(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


class _Checker:
    def __init__(self, text: str, spans: list[tuple[int, int]], allow_writes: bool) -> None:
        self.text = text
        self.code = text  # the rewritten text the grammar parsed (comments blanked), set before the walk
        self.spans = spans
        self.allow_writes = allow_writes
        self.violations: list[Violation] = []
        self.has_writes = False
        self._seen: set[tuple[int, str]] = set()

    def index_of(self, offset: int) -> int:
        # offsets between statements (in a ';' or a comment) belong to the statement before
        idx = 0
        for n, (s, _e) in enumerate(self.spans):
            if s <= offset:
                idx = n
        return idx

    def add(self, offset: int, rule: str, message: str) -> None:
        idx = self.index_of(offset)
        if (idx, rule) in self._seen:
            return
        self._seen.add((idx, rule))
        s, e = self.spans[idx]
        self.violations.append(Violation(idx, _preview(self.text[s:e]), rule, message))


def _byte_to_char(text: str) -> list[int]:
    """Map every byte offset of the UTF-8 encoded text (and its end) to a character offset."""
    if text.isascii():
        return list(range(len(text) + 1))
    mapping: list[int] = []
    for ci, ch in enumerate(text):
        mapping.extend([ci] * len(ch.encode("utf-8", errors="surrogatepass")))
    mapping.append(len(text))
    return mapping


def _keyword_of(node: tree_sitter.Node) -> str:
    for child in node.children:
        if child.type.startswith("keyword_"):
            return child.type.removeprefix("keyword_").upper()
    return node.type.removesuffix("_statement").split("_")[0].upper()


def _walk(root: tree_sitter.Node, chk: _Checker, b2c: list[int], source: str) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        t = node.type
        at = b2c[node.start_byte]
        if node.is_error or node.is_missing:
            what = f"missing {t}" if node.is_missing else repr(_preview(source[at : b2c[node.end_byte]])[:40])
            chk.add(
                at,
                "parse-error",
                f"Could not parse the query at {_line_col(source, at)} ({what}). The validator refuses "
                "anything it cannot parse; check the syntax (see docs/security.md for SurrealQL forms "
                "the grammar does not support, such as '10dec' numbers or the legacy IF .. THEN .. END).",
            )
        elif t.endswith("_statement") and t not in _WRAPPERS and t not in _READ_STATEMENTS:
            if t in _WRITE_STATEMENTS:
                kw = _WRITE_STATEMENTS[t]
                chk.has_writes = True
                if not chk.allow_writes:
                    chk.add(
                        at,
                        f"write-not-allowed:{kw}",
                        f"{kw} modifies data, and writes are off for this call. Pass allow_writes=true "
                        f"if you mean to write, or remove the {kw} (it also counts inside subqueries, "
                        "LET, RETURN, IF and FOR blocks).",
                    )
            elif t == "use_statement":
                chk.add(
                    at,
                    "cross-scope",
                    "USE switches namespace/database; engram_execute is pinned to the scope you pass "
                    "in its 'scope' argument. Remove the USE statement and pick the scope there.",
                )
            else:
                kw = _keyword_of(node)
                chk.add(
                    at,
                    f"blocked-keyword:{kw}",
                    f"{kw} statements are not allowed in engram_execute (schema, sessions and server "
                    "state are managed by Engram). Only SELECT, RETURN, LET, IF/ELSE and FOR are "
                    "allowed, plus CREATE/INSERT/UPDATE/UPSERT/DELETE/RELATE with allow_writes=true.",
                )
        elif t == "function_call":
            _check_function(node, chk, at, source, b2c)
        elif t == "subscript":
            _check_method(node, chk, at, source, b2c)
        stack.extend(reversed(node.children))


def _check_function(node: tree_sitter.Node, chk: _Checker, at: int, source: str, b2c: list[int]) -> None:
    # The name is everything before the argument list with blanks removed: the engine reads 'fn :: x()' and
    # 'fn::/* c */x()' as fn::x(), while the grammar splits them into loose identifiers.
    args = next((c for c in node.children if c.type == "argument_list"), None)
    end = b2c[args.start_byte] if args is not None else b2c[node.end_byte]
    _check_function_name(re.sub(r"\s+", "", chk.code[at:end]).lower(), chk, at)


def _check_function_name(name: str, chk: _Checker, at: int) -> None:
    if not name:
        return
    ns = name.split("::", 1)[0]
    if ns in _BLOCKED_NAMESPACES and "::" in name:
        why = _BLOCKED_NAMESPACES.get(ns, _BLOCKED_NAMESPACES["fn"])
        chk.add(
            at,
            f"blocked-function:{name}",
            f"{name}() is not allowed in engram_execute: {why}. Use built-in functions "
            "(string::, array::, math::, time::, vector::, search::, ...) instead.",
        )
    elif ns in _CROSS_SCOPE_NAMESPACES and "::" in name:
        chk.add(
            at,
            "cross-scope",
            f"{name}() refers to another namespace or database; engram_execute only reads the "
            "scope given in its 'scope' argument.",
        )
    elif name in _BLOCKED_FUNCTIONS:
        chk.add(
            at,
            f"blocked-function:{name}",
            f"{name}() is not allowed in engram_execute: {_BLOCKED_FUNCTIONS[name]}.",
        )
    elif name in _WRITE_FUNCTIONS:
        chk.has_writes = True
        if not chk.allow_writes:
            chk.add(
                at,
                f"write-not-allowed:{name}",
                f"{name}() changes database state; pass allow_writes=true if you mean to write.",
            )


def _check_method(node: tree_sitter.Node, chk: _Checker, at: int, source: str, b2c: list[int]) -> None:
    children = node.children
    if not any(c.type == "argument_list" for c in children):
        return
    ident = next((c for c in children if c.type == "identifier"), None)
    if ident is None:
        return
    name = source[b2c[ident.start_byte] : b2c[ident.end_byte]].lower()
    if name in _BLOCKED_METHODS:
        chk.add(
            at,
            f"blocked-function:.{name}",
            f".{name}() is a file-bucket/side-effect method and is not allowed in engram_execute.",
        )


def _tree_opaque(root: tree_sitter.Node, b2c: list[int]) -> set[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in ("string", "prefixed_string", "comment"):
            found.add((b2c[node.start_byte], b2c[node.end_byte]))
            continue
        stack.extend(node.children)
    return found


def code_view(text: str) -> str:
    """``text`` with its strings, comments and escaped identifiers blanked (same length): what is code."""
    return _lex(text).code_view


def validate(surql: str, *, allow_writes: bool = False, max_length: int = 20_000) -> Verdict:
    """Check ``surql`` against the engram_execute rules; never raises for any ``str`` input."""
    if not isinstance(surql, str):
        v = Violation(0, _preview(repr(surql)), "parse-error", "The query must be a string of SurrealQL.")
        return Verdict(False, [], [v], False)
    if len(surql) > max_length:
        v = Violation(
            0,
            _preview(surql),
            "too-large",
            f"The query is {len(surql)} characters long; the limit is {max_length}. Split it into "
            "smaller queries or pass large values as parameters.",
        )
        return Verdict(False, [], [v], False)

    lexed = _lex(surql)
    spans = _split(surql, lexed)
    # Statements as the caller sees them: empty chunks (trailing ';', ';;', comment-only) dropped.
    kept = [(s, e) for s, e in spans if lexed.code_view[s:e].strip()]
    statements = [surql[s:e].strip() for s, e in kept]
    chk = _Checker(surql, kept or [(0, len(surql))], allow_writes)

    if not kept:
        chk.add(0, "empty", "The query has no statements (only whitespace or comments).")
        return Verdict(False, statements, chk.violations, False)
    if lexed.unterminated is not None:
        chk.add(
            lexed.unterminated,
            "parse-error",
            f"Unterminated string, comment or escaped identifier at {_line_col(surql, lexed.unterminated)}.",
        )
    for i, ch in enumerate(lexed.code_view):
        if ord(ch) > 127 or (ord(ch) < 32 and ch not in "\t\n\r"):
            chk.add(
                i,
                "non-ascii",
                f"Character U+{ord(ch):04X} at {_line_col(surql, i)} is outside a string or comment. "
                "Only ASCII is accepted in SurrealQL code (lookalike, fullwidth and zero-width "
                "characters are refused); put non-ASCII text inside quotes.",
            )
            break

    view = lexed.code_view
    for m in _TRANSACTION_WORD.finditer(view):
        chk.add(
            m.start(),
            "transaction-control",
            f"{m.group(1).upper()} is transaction control, which Engram owns: every engram_execute call already "
            "runs in its own transaction. Remove it (a field with that name can be written in backticks: `commit`).",
        )
    for m in _PATH.finditer(view):
        _check_function_name(re.sub(r"\s+", "", m.group()).lower(), chk, m.start())

    for m in _NOT_BARE.finditer(view):
        chk.add(
            m.start(2),
            "parse-error",
            f"'NOT x' at {_line_col(surql, m.start(2))} is not SurrealQL negation (the engine refuses it): write "
            "!x, NOT(x), or x = false.",
        )
    rewritten = _rewrite(surql, lexed, spans)
    chk.code = rewritten
    encoded = rewritten.encode("utf-8", errors="surrogatepass")
    try:
        tree = _parser().parse(encoded)
    except Exception as exc:  # a parser failure must refuse, never crash the caller
        chk.add(0, "parse-error", f"The SurrealQL parser failed on this input ({type(exc).__name__}).")
        return Verdict(False, statements, chk.violations, False)
    b2c = _byte_to_char(rewritten)
    root = tree.root_node
    _walk(root, chk, b2c, surql)

    if not root.has_error:
        lexer_opaque = {(s, e) for s, e, kind in lexed.opaque if kind == "string"}
        tree_opaque = _tree_opaque(root, b2c)
        diff = lexer_opaque ^ tree_opaque
        if diff:
            where = min(s for s, _ in diff)
            chk.add(
                where,
                "parse-error",
                f"Ambiguous string or comment at {_line_col(surql, where)}: the validator's two readers "
                "disagree about where it starts or ends, so the query is refused. Simplify the quoting.",
            )

    blanked = list(surql)
    for start, end, kind in lexed.opaque:
        if kind == "comment":
            blanked[start:end] = " " * (end - start)
    text = "".join(blanked)
    executable = [text[s:e].strip() for s, e in kept]
    return Verdict(not chk.violations, statements, chk.violations, chk.has_writes, executable)


def check(surql: str, *, allow_writes: bool = False) -> Verdict:
    """Like :func:`validate`, but raise :class:`ValidationError` when the query is refused."""
    verdict = validate(surql, allow_writes=allow_writes)
    if not verdict.ok:
        raise ValidationError(verdict)
    return verdict


@dataclass
class WriteShape:
    """One statement that changes existing rows (UPDATE, UPSERT, DELETE), as written: its target and its WHERE
    condition (None: the statement touches every row of its target)."""

    index: int  # among the statements ``validate`` reports (empty chunks dropped)
    statement: str
    verb: str
    target: str
    where: str | None


_CHANGE = re.compile(r"\s*(UPDATE|UPSERT|DELETE)\s+(?:FROM\s+)?(?:ONLY\s+)?([^\s;]+)", re.IGNORECASE)
_WHERE = re.compile(r"\bWHERE\b", re.IGNORECASE)
_AFTER_WHERE = re.compile(r"\b(RETURN|TIMEOUT|PARALLEL|EXPLAIN)\b", re.IGNORECASE)


def write_shapes(surql: str) -> list[WriteShape]:
    """The statements of ``surql`` that change existing rows, with their target and condition (read with strings
    and comments blanked, so a WHERE inside a string is not one). Others (reads, CREATE, INSERT, RELATE) are
    left out."""
    lexed = _lex(surql)
    kept = [(s, e) for s, e in _split(surql, lexed) if lexed.code_view[s:e].strip()]
    out: list[WriteShape] = []
    for index, (start, end) in enumerate(kept):
        view = lexed.code_view[start:end]
        m = _CHANGE.match(view)
        if m is None:
            continue
        target = surql[start + m.start(2) : start + m.end(2)]
        where = None
        w = _WHERE.search(view, m.end())
        if w is not None:
            stop = _AFTER_WHERE.search(view, w.end())
            where = surql[start + w.end() : start + (stop.start() if stop else len(view))].strip() or None
        out.append(WriteShape(index, surql[start:end].strip(), m.group(1).upper(), target, where))
    return out
