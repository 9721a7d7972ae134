"""Secret redaction for everything Engram stores (tool output, prompts, metadata).

Standard library only, on purpose: the hook script imports this package on every tool use (with
``engram_core/`` appended to its path) without importing the rest of ``engram_core`` or any third-party
package. The token rules are in ``patterns.py``.

Each secret is replaced by a typed placeholder such as ``[REDACTED:github_token]``;
``<private>...</private>`` (case-insensitive, multi-line) is replaced as a whole by
``[REDACTED:private]`` (an unclosed ``<private>`` hides everything after it: fail closed).
Offsets in the returned :class:`Redaction` list refer to the *input* text.

Deliberately not treated as secrets: hex digests (git SHAs, sha256), UUIDs, base64 ``data:``
URIs, ``integrity`` hashes, URLs without a password, ``KEY=value`` where the key is not
secret-like, and placeholder values (empty, ``${VAR}``, ``$VAR``, ``{{ x }}``, ``<...>``,
``***``, type names such as ``str``); words like ``changeme`` are still redacted: only syntactic
placeholders are exempt.
In source code, ``token = get_token()`` or ``password: str`` are references, not secrets,
and survive; ``password = "hunter2"`` is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .patterns import SP, TOKEN_PATTERNS, Lazy

_V = TypeVar("_V")

__all__ = ["Redaction", "redact", "redact_text", "redact_value"]


class Redaction:
    """What was replaced: kind and span in the input. A plain class, not a dataclass: hooks load this file
    in a fresh process on every tool call, and importing dataclasses (inspect, ast) costs ~15 ms there."""

    __slots__ = ("kind", "start", "end")

    def __init__(self, kind: str, start: int, end: int) -> None:
        self.kind = kind
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redaction) and (self.kind, self.start, self.end) == (
            other.kind,
            other.start,
            other.end,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.start, self.end))

    def __repr__(self) -> str:
        return f"Redaction(kind={self.kind!r}, start={self.start}, end={self.end})"


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# Secret-like key names: the secret word must END the key (DB_PASSWORD, apiKey, x-api-key),
# so TOKEN_URL, PASSWORD_FILE, AUTHOR or max_tokens are not secret-like.
_SECRET_WORD = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|secret[_.\-]?key(?:[_.\-]?base)?|client[_.\-]?secret|token|"
    r"(?:api|access|private|signing|encryption|master|account|app|admin|session|license)[_.\-]?key|"
    r"apikey|auth|credentials?|dsn|connection[_.\-]?string)"
)
# Matching starts at the secret word (fast: a first-character set, no look-behind, which would
# defeat the regex engine's prefix scan).  _whole_word() then checks that the word is a whole part
# of the key: after a non-alphanumeric (`_`, `.`, `-` included) or at a camelCase boundary.
_ASSIGN_BODY = (
    r"(?![A-Za-z0-9])"
    # a value may follow `key:` on the next, indented line (YAML, pretty-printed JSON)
    r"(?P<kq>[\"']?)(?P<sep>[ \t]*(?::=|=>|=)[ \t]*|[ \t]*:(?:[ \t]*\r?\n[ \t]+|[ \t]*))"
    r"(?:(?P<q>[\"'])(?P<qv>(?:(?!(?P=q))[^\\\n]|\\.){1,8000}?)(?:(?P=q)|(?=\r?\n)|\Z)|(?P<uv>[^\s\"'`]{1,500}))"
)
# Run on a lower-cased copy: a case-insensitive alternation is about five times slower.
_ASSIGN_LOWER = re.compile(r"(?P<word>" + _SECRET_WORD + r")" + _ASSIGN_BODY)
_ASSIGN_ANYCASE = re.compile(r"(?P<word>(?i:" + _SECRET_WORD + r"))" + _ASSIGN_BODY)
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_WORD_KIND = [
    ("pass", "password"),
    ("pwd", "password"),
    ("secret", "secret"),
    ("token", "token"),
    ("key", "api_key"),
    ("auth", "auth"),
    ("credential", "credentials"),
    ("dsn", "dsn"),
    ("connection", "connection_string"),
]
# Values that are references or placeholders rather than secrets.
_PLACEHOLDER = re.compile(
    r"^(?:\$\{.*|\$[A-Za-z_][A-Za-z0-9_]*|\{\{.*|%\(?[A-Za-z_]*\)?s|<[^>]*>|\*+|x+|X+|\.\.\.|"
    r"\[REDACTED:[a-z_]+\].*|true|false|null|none|nil|undefined|yes|no|on|off|required|optional|"
    r"str|string|int|integer|number|bool|boolean|bytes|any|object|secret|password|pass|token|foo|bar|baz|foobar|"
    # numbers too short to be a password (`token = -1`), example names (`my_token`, `your-secret`), masks (`hf_***`)
    r"-?\d{1,3}|(?:my|your)[_\-]\w+|\S*\*{3,}\S*|\{[A-Za-z_][\w.]*\}.*|"
    r"for|to|and|or|the|an?|in|of|with|is|on|as|if|when|from|requires|needs|must|should|"
    # SQL bind parameters (`= ?`, `= $1`, `= :token`, `= @pw`) and elided examples (`sk-...`, `ghp_XXXXXXXX`)
    r"\?|\$\d+|:[A-Za-z_]\w*|@[A-Za-z_]\w*|\S*(?:x{6,}|X{6,}|\.\.\.|\u2026)\S*)$",
    re.I,
)
_CODE_REF = re.compile(r"^[A-Za-z_][A-Za-z_.]*$")
_TYPE_REF = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)+_?[A-Z]\w*|_?[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+)$")
_CODE_BLOCK = re.compile(r"[ \t]*(?:if|elif|while|for|except|with|def|class|else|try|case|match)\b")
_PROSE_WORD = re.compile(r"^[a-z]+(?:-[a-z]+)*$")
_CALL = re.compile(r"^(?:\$\(|`|[A-Za-z_][\w.]*\()")
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.I | re.S)


# ── rules that need a little code around their regex ─────────────────────────────
_HTPASSWD = Lazy(r"htpasswd((?:" + SP + r"-[A-Za-z]+)+)((?:" + SP + r"(?!-)[^\s|;&>]+){2,3})")
_COOKIE_CTX = Lazy(
    r"(?i)(?:\bset-cookie2?|\bcookies?)[\"']?[ \t]*[:=]|(?:^|[ \t])(?:-b|--cookie)(?=[ \t])", re.M
)
_COOKIE_PAIR = re.compile(r"[\"']?([A-Za-z0-9_.\-]{1,64})[\"']?[ \t]*[=:][ \t]*[\"']?([^;\s\"',}]{8,})")
_COOKIE_JAR = Lazy(r"(?m)^(?:#HttpOnly_)?[.\w\-]+\t(?:TRUE|FALSE)\t\S*\t(?:TRUE|FALSE)\t\d+\t(\S+)\t(\S+)$")
_SESSION_NAMES = (
    "sess",
    "sid",
    "token",
    "auth",
    "jwt",
    "remember",
    "login",
    "__host-",
    "__secure-",
    "csrf",
    "xsrf",
    "identity",
)
_YAML_BLOCK = Lazy(
    r"(?m)^([ \t]*)(?:- )?[\"']?([A-Za-z0-9_.\-]+)[\"']?[ \t]*:[ \t]*[|>][+\-]?\d?[ \t]*(?:#.*)?\n"
    r"((?:\1[ \t]+\S.*(?:\n|\Z)|[ \t]*\n)+)"
)
_YAML_JOINED = Lazy(
    r"([A-Za-z0-9_.\-]+)[\"']?[ \t]*:[ \t]*[|>][+\-]?(?:[ \t]*\|)+[ \t]*([^\s|][^|\n]*?)(?=[ \t]*\||[ \t]*$)",
    re.M,
)
_XML_ELEMENT = Lazy(r"<([A-Za-z_][\w.\-]*)>([^<\n]{1,500})</\1>")
_XML_KEYVALUE = Lazy(r"key=[\"']([^\"']{1,80})[\"'][ \t]+value=[\"']([^\"']{1,500})[\"']")
_DOCKER_ENV = Lazy(r"(?:ENV|ARG)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+([^\s=\\][^\n]*?)[ \t]*(?:\\?$)", re.M)
_CONFIG_SET = Lazy(r"config(?:ure)?[ \t]+set[ \t]+([\w.\-]+)[ \t]+([^\s\"']+)")
_LONG_SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "sessionid",
    "credentials",
    "credential",
    "connectionstring",
    "secret_key_base",
)
_SHORT_SECRET_WORD = re.compile(
    r"(?:(?:access|private|signing|encryption|master|account|app|admin|session|license|"
    r"secret|api|client)[_.\-]?key|pass|pwd|auth|dsn)$"
)


def _secret_key_name(key: str) -> bool:
    """`DB_PASSWORD`, `StripeSecretKey`, `apiKey`, `password`: a name whose last word is secret-like."""
    low = key.lower()
    if low.endswith(_LONG_SECRET_WORDS):
        return True
    # `bypass`, `compass`, `monkey`, `oauth`: the short words count only as whole words
    m = _SHORT_SECRET_WORD.search(low)
    if m is None:
        return False
    i = m.start()
    return i == 0 or not key[i - 1].isalnum() or (key[i - 1].islower() and key[i].isupper())


def _find_htpasswd(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _HTPASSWD.finditer(text):
        flags = "".join(re.findall(r"-([A-Za-z]+)", m.group(1)))
        if "b" not in flags:
            continue  # the password is prompted for, not on the line
        args = list(re.finditer(r"[^\s\\]+", m.group(2)))
        want = 2 if "n" in flags else 3  # -n prints instead of writing a file: no file argument
        if len(args) >= want:
            a = args[want - 1]
            s, e = m.start(2) + a.start(), m.start(2) + a.end()
            if text[s] in "\"'" and e - s > 1:
                s, e = s + 1, e - (text[e - 1] == text[s])
            out.append((s, e, "password"))
    return out


def _session_name(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in _SESSION_NAMES)


def _find_cookies(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _COOKIE_CTX.finditer(text):
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        for p in _COOKIE_PAIR.finditer(text, m.end(), end):
            if _session_name(p.group(1)) and not _PLACEHOLDER.match(p.group(2)):
                out.append((p.start(2), p.end(2), "session_cookie"))
    for m in _COOKIE_JAR.finditer(text):
        if _session_name(m.group(1)):
            out.append((m.start(2), m.end(2), "session_cookie"))
    return out


def _find_yaml_blocks(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _YAML_BLOCK.finditer(text):
        if _secret_key_name(m.group(2)):
            body = m.group(3)
            lead = len(body) - len(body.lstrip())
            out.append((m.start(3) + lead, m.start(3) + len(body.rstrip()), _word_kind(m.group(2))))
    for m in _YAML_JOINED.finditer(text):
        if _secret_key_name(m.group(1)):
            out.append((m.start(2), m.end(2), _word_kind(m.group(1))))
    return out


def _keyed(pattern: Lazy) -> Callable[[str], list[tuple[int, int, str]]]:
    """A finder for a pattern whose group 1 is a key name and group 2 its value: `<password>x</password>`,
    `<add key="ApiKey" value="x"/>`, Dockerfile `ENV DB_PASSWORD x`, `aws configure set aws_secret_access_key x`."""

    def find(text: str) -> list[tuple[int, int, str]]:
        out = []
        for m in pattern.finditer(text):
            value = m.group(2).strip()
            if (
                value
                and _bounded(text, m.start())
                and _secret_key_name(m.group(1))
                and not _PLACEHOLDER.match(value)
            ):
                out.append((m.start(2), m.start(2) + len(m.group(2).rstrip()), _word_kind(m.group(1))))
        return out

    return find


_PEM_END = Lazy(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# line breaks, " | " joins, JSON-escaped \n and \r\n (escaped once or more: JSON quoted inside JSON)
_PEM_PIECE = re.compile(r"(?:\r?\n|[ \t]*\|[ \t]*|\\+(?:r\\+)?n)")
_B64_LINE = re.compile(r"[A-Za-z0-9+/=]{8,}")
_B64_TAIL = re.compile(r"(?:^|[\s\"'])([A-Za-z0-9+/=]{16,})\s*$")


def _find_headless_pem(text: str) -> list[tuple[int, int, str]]:
    """A key whose BEGIN line was cut off: the base64 lines before its END line."""
    out = []
    for m in _PEM_END.finditer(text):
        start = m.start()
        pieces = _PEM_PIECE.split(text[max(0, start - 20_000) : start])
        pos = start
        for piece in reversed(pieces):
            body = piece.strip()
            if body and not _B64_LINE.fullmatch(body):
                # a line that ends in key material (`cat key → MIIEv…`): take its last word too
                tail = _B64_TAIL.search(piece)
                if tail:
                    start = text.rfind(piece, 0, pos) + tail.start(1)
                break
            pos = text.rfind(piece, 0, pos) if piece else pos
            if body:
                start = pos + piece.index(body)
        out.append((start, m.end(), "private_key"))
    return out


_BASIC = Lazy(r"\bBasic[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", re.I)
_ECHO_SECRET = Lazy(r"echo[ \t]+[\"']?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?[\"']?[ \t]*\r?\n([^\n$][^\n]*)")


def _find_basic_auth(text: str) -> list[tuple[int, int, str]]:
    """`Basic <base64 of user:password>` anywhere (a header without its name, a log line)."""
    import base64
    import binascii

    out = []
    for m in _BASIC.finditer(text):
        try:
            decoded = base64.b64decode(m.group(1) + "=" * (-len(m.group(1)) % 4), validate=True).decode(
                "utf-8"
            )
        except (binascii.Error, UnicodeDecodeError):
            continue
        if ":" in decoded and decoded.isprintable():
            out.append((m.start(1), m.end(1), "authorization"))
    return out


def _find_echoed_secret(text: str) -> list[tuple[int, int, str]]:
    """`echo $DB_PASSWORD` followed by its output line."""
    return [
        (m.start(2), m.start(2) + len(m.group(2).rstrip()), _word_kind(m.group(1)))
        for m in _ECHO_SECRET.finditer(text)
        if _secret_key_name(m.group(1)) and m.group(2).strip()
    ]


# (finder, literals one of which must occur in the lower-cased text)
# (no typing import for Callable: hooks load this module in a fresh process on every tool call)
_FINDERS: list[tuple[object, tuple[bytes, ...]]] = [
    (_find_headless_pem, (b"-----end",)),
    (_find_htpasswd, (b"htpasswd",)),
    (_find_basic_auth, (b"basic",)),
    (_find_echoed_secret, (b"echo",)),
    (_find_cookies, (b"cookie", b" -b", b"\ttrue\t", b"\tfalse\t")),
    (_find_yaml_blocks, (b": |", b": >", b":|", b":>")),
    (_keyed(_XML_ELEMENT), (b"</",)),
    (_keyed(_XML_KEYVALUE), (b"value=",)),
    (_keyed(_DOCKER_ENV), (b"env ", b"arg ")),
    (_keyed(_CONFIG_SET), (b"config set", b"configure set")),
]


# every guard once, searched in an ASCII copy of the lower-cased text (see redact())
_ALL_GUARDS = frozenset(
    [g for rule in TOKEN_PATTERNS for g in rule[3]] + [g for rule in _FINDERS for g in rule[1]]
)
# Short texts (most metadata values, tags, ids) are scanned once for all guards, longest first at every position;
# a guard found there also means every shorter guard it starts with. Long texts search each guard on its own
# (a fast substring search beats the regex there). Both compiled on first use.
_SHORT_TEXT = 2048
_GUARD_SCAN = Lazy(
    b"(?=(" + b"|".join(re.escape(g) for g in sorted(_ALL_GUARDS, key=len, reverse=True)) + b"))"
)
_GUARD_PREFIXES = {g: frozenset(h for h in _ALL_GUARDS if g.startswith(h)) for g in _ALL_GUARDS}
# which rules each guard enables (rules run in table order: the order is their priority)
_TOKEN_RULES_OF = {g: [i for i, rule in enumerate(TOKEN_PATTERNS) if g in rule[3]] for g in _ALL_GUARDS}
_FINDERS_OF = {g: [i for i, rule in enumerate(_FINDERS) if g in rule[1]] for g in _ALL_GUARDS}


def _present_guards(haystack: bytes) -> set[bytes]:
    if len(haystack) > _SHORT_TEXT:
        return {g for g in _ALL_GUARDS if g in haystack}
    present: set[bytes] = set()
    for m in _GUARD_SCAN.finditer(haystack):
        present |= _GUARD_PREFIXES[m.group(1)]
    return present


def _word_kind(key: str) -> str:
    low = key.lower()
    if "aws" in low and "secret" in low:
        return "aws_secret_key"
    for word, kind in _WORD_KIND:
        if low.endswith(word) or (word in ("pass", "connection", "credential") and word in low[-15:]):
            return kind
    return "secret"


def _bounded(text: str, start: int) -> bool:
    """True when ``start`` begins a word (what a leading ``\\b`` would check, but much faster)."""
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def _whole_word(text: str, m: re.Match[str]) -> bool:
    start = m.start("word")
    if start == 0:
        return True
    prev = text[start - 1]
    if not prev.isascii() or not prev.isalnum():
        return True
    if (prev.islower() or prev.isdigit()) and text[start].isupper():
        return True
    # a long secret word glued to its prefix: PGPASSWORD, clientsecret, GITHUBTOKEN (not `bypass`, `monkey`)
    word = m.group("word").lower()
    return word in ("password", "passwd", "passphrase", "secret") or (
        word in ("token", "apikey") and prev.isupper()
    )


def _key(text: str, m: re.Match[str]) -> str:
    """The whole key ending in the matched secret word (`DB_PASSWORD`, `refresh_token`)."""
    start = m.start("word")
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    return text[start : m.end("word")]


def _header_secret(key: str, value: str, tail: str) -> bool:
    """`X-Api-Key: qwhzkfmtnbvcrdplsyxjga` (in a quoted `-H` argument, or a line of its own): an HTTP header
    whose value is one long run of letters, which the prose and type-name rules below would let through. Only
    a header name (a dash in it) and only a value that ends the header: `x-api-key: header with ...` is prose."""
    return "-" in key and len(value) >= 16 and value.isalpha() and (not tail or tail[0] in "\"'")


def _assignment_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """Span of the secret value in a KEY=value match, or None when it is not a secret.

    ``m`` may come from a lower-cased copy of ``text`` (same length), so every value is read
    from ``text`` by span, never from ``m.group()``.
    """
    sep = text[slice(*m.span("sep"))]
    op = sep.strip()
    key_start = m.end("word") - len(_key(text, m))
    if key_start > 0 and (text[key_start - 1] == "$" or text[max(0, key_start - 2) : key_start] == "${"):
        return None  # `$PWD:/src`, `${PASSWORD:-x}`: a variable reference, not an assignment
    next_line = "\n" in sep
    if op == "=" and text.startswith("=", m.end("sep")):
        return None  # `password == other.password`: a comparison
    # KEY=value with nothing around `=` is a shell/.env assignment, unless it is a keyword argument in a call
    # (`f(session_key=s.key)`, `auth=merge(auth, x)`), where code rules apply
    before = text[max(0, key_start - 200) : key_start].rstrip()
    env_style = op == "=" and sep == "=" and m.end("kq") == m.start("kq") and not before.endswith(("(", ","))
    if m.start("qv") >= 0:
        span = m.span("qv")
        value = text[slice(*span)]
    else:
        span = m.span("uv")
        raw = value = text[slice(*span)]
        # env / .env / shell values run to whitespace; elsewhere (YAML, headers, INI, code)
        # punctuation that ends a value in code also ends it here
        cut = re.search(r"[;&,)\]}]" if env_style else r"[,;(){}\[\]<>&]", value)
        if cut:
            if not env_style and (cut.start() == 0 or value[cut.start()] in "([{"):
                return None  # a call, index or literal: code, not a secret
            value = value[: cut.start()]
            span = (span[0], span[0] + len(value))
        word = text[slice(*m.span("word"))]
        if _PLACEHOLDER.match(raw) or value.lower() in (word.lower(), _key(text, m).lower()):
            return None  # `${VAR}`, `{{ x }}`, `auth=auth` keyword arguments
        line_end = text.find("\n", span[1])
        tail = text[span[1] : None if line_end < 0 else line_end].strip()
        if op == ":" and not next_line and _header_secret(_key(text, m), value, tail):
            return span
        if next_line and (
            tail
            or cut
            or value.endswith(":")
            or value[0] in "-#"
            or _CODE_BLOCK.match(text[text.rfind("\n", 0, key_start) + 1 : key_start])
        ):
            # the next line is a nested mapping, a list or prose, not this key's value; or `if token:` + `break`
            return None
        if op == ":" and tail and _PROSE_WORD.match(value):
            return None  # `the exchanged token: re-exchanging on every call …`
        if value.isdigit() and len(value) <= 6 and _key(text, m).lower() in ("pass", "token"):
            return None  # test counts (`pass: 128`) and token ids (`"token": 50256`)
        # a variable or attribute reference (`token = response.token`, `{"token": token}`) or prose
        # (`Token: see the docs`); a bare YAML value ends its line (or its " | "-joined piece)
        if (
            not env_style
            and _CODE_REF.match(value)
            and (op != ":" or cut or (tail and not tail.startswith("|")))
        ):
            return None
        if op == ":" and _TYPE_REF.match(value):
            return None  # a type annotation (`auth: rule.AuthType`, `password: SecretStr`)
        if env_style and _CALL.match(value):
            return None  # `PASSWORD=$(pass show db)`, `password=SecretStr('…')`: a command or a call
    if not value or _PLACEHOLDER.match(value):
        return None
    if value.lower() == _key(text, m).lower():
        return None  # `EXPIRED_TOKEN = "expired_token"`: a name, not a secret
    return span


# Texts found clean, remembered: the same text passes here several times on its way to the engine (the write
# path redacts it, then every query's parameters are redacted again as a net), and the rules are fixed, so the
# answer is too. Bounded, and only clean texts: no secret is ever held here.
_CLEAN: dict[str, None] = {}
_CLEAN_MAX = 20_000
_CLEAN_LEN = 4096


def redact(text: str) -> tuple[str, list[Redaction]]:
    """Return ``text`` with secrets replaced and the list of replaced spans (input offsets)."""
    if not text or text in _CLEAN:
        return text, []
    out = _redact(text)
    if not out[1] and len(text) <= _CLEAN_LEN:
        if len(_CLEAN) >= _CLEAN_MAX:
            _CLEAN.clear()
        _CLEAN[text] = None
    return out


_CONTINUATION = re.compile(r"\\\r?\n")


def _joined_candidates(text: str) -> list[tuple[int, int, int, str]]:
    """Secrets split across lines by a shell line continuation (`\\` then a newline inside a word): the
    candidates of the text with every continuation removed, as spans of ``text`` (covering the breaks)."""
    keep: list[int] = []  # index in text of each character of the joined text
    pos = 0
    for m in _CONTINUATION.finditer(text):
        keep.extend(range(pos, m.start()))
        pos = m.end()
    keep.extend(range(pos, len(text)))
    joined = "".join(text[i] for i in keep)
    out = []
    for s, e, prio, kind in _candidates(joined):
        start, end = keep[s], keep[e - 1] + 1
        if end - start != e - s:  # only what the join changed: the rest the text's own pass found
            out.append((start, end, prio, kind))
    return out


def _candidates(text: str) -> list[tuple[int, int, int, str]]:
    """(start, end, priority, kind) of everything any rule finds, overlapping."""
    candidates: list[tuple[int, int, int, str]] = []
    low = text.lower()
    # The guards are ASCII: searching them in an ASCII copy (one byte a character) is several times faster than
    # in text that holds any wider character, and every guard is searched once however many rules share it.
    haystack = low.encode("ascii", "replace")
    present = _present_guards(haystack)
    for m in _PRIVATE.finditer(text) if b"<private" in haystack else ():
        candidates.append((m.start(), m.end(), -1, "private"))
    for prio in sorted({i for g in present for i in _TOKEN_RULES_OF[g]}):
        kind, pattern, group, _guards, bounded = TOKEN_PATTERNS[prio]
        for m in pattern.finditer(text):
            s, e = m.span(group)
            # an earlier run's placeholder (`https://u:[REDACTED:x]@h`) is not a new secret
            if (
                e > s
                and not text.startswith("[REDACTED:", s)
                and (not bounded or _bounded(text, m.start()))
                and not (group and _PLACEHOLDER.match(text[s:e]))
            ):  # `--password=x`, `user:password@host`
                candidates.append((s, e, prio, kind))
    finder_prio = len(TOKEN_PATTERNS)
    for i in sorted({i for g in present for i in _FINDERS_OF[g]}):
        for s, e, kind in _FINDERS[i][0](text):  # type: ignore[operator]
            if e > s and not text.startswith("[REDACTED:", s):
                candidates.append((s, e, finder_prio, kind))
    generic_prio = finder_prio + 1
    # lower() can change the length of some non-ASCII text; offsets must stay the input's
    assign, subject = (_ASSIGN_LOWER, low) if len(low) == len(text) else (_ASSIGN_ANYCASE, text)
    pos = 0
    while True:
        found = assign.search(subject, pos)
        if found is None:
            break
        m = found
        span = _assignment_value(text, m) if _whole_word(text, m) else None
        if span is not None:
            candidates.append((span[0], span[1], generic_prio, _word_kind(_key(text, m))))
            pos = m.end()
        else:
            # what looked like a value may be the next key (`credentials:\n  password: x`)
            pos = m.end("sep") if m.end("sep") > m.start() else m.start() + 1
    return candidates


def _redact(text: str) -> tuple[str, list[Redaction]]:
    candidates = _candidates(text)
    if "\\\n" in text or "\\\r\n" in text:
        candidates += _joined_candidates(text)
    if not candidates:
        return text, []
    found: list[tuple[int, int, int, str]] = []  # (start, end, priority, kind)
    # Earliest start wins; among equal starts the longest, then the most specific pattern.
    candidates.sort(key=lambda c: (c[0], -(c[1] - c[0]), c[2]))
    last_end = -1
    for c in candidates:
        if c[0] >= last_end:
            found.append(c)
            last_end = c[1]
        elif c[2] == -1 and c[1] > last_end:
            # a <private> block that starts inside another finding still hides everything to its end
            prev = found.pop()
            found.append((prev[0], c[1], -1, "private"))
            last_end = c[1]
    parts: list[str] = []
    pos = 0
    redactions: list[Redaction] = []
    for s, e, _prio, kind in found:
        parts.append(text[pos:s])
        parts.append(_placeholder(kind))
        redactions.append(Redaction(kind, s, e))
        pos = e
    parts.append(text[pos:])
    return "".join(parts), redactions


def redact_text(text: str) -> str:
    """Convenience wrapper: the redacted text only."""
    return redact(text)[0]


def redact_value(value: _V, kinds: list[str] | None = None) -> _V:
    """Recursively redact strings inside dicts, lists, tuples and sets; returns a new object.

    Dict keys are redacted too (a secret can end up as a key); non-string leaves are returned as is.
    When ``kinds`` is given, the kind of every replaced secret is appended to it.
    """
    return cast(_V, _redact_value(value, kinds))


def _redact_value(value: Any, kinds: list[str] | None) -> Any:
    if isinstance(value, str):
        out, found = redact(value)
        if kinds is not None:
            kinds.extend(r.kind for r in found)
        return out
    if isinstance(value, dict):
        return {_redact_value(k, kinds): _redact_value(v, kinds) for k, v in value.items()}
    if isinstance(value, list):
        if value and type(value[0]) is float and all(type(v) is float for v in value):
            return list(value)  # a vector: numbers hold no secret (and a call each took most of the time)
        return [_redact_value(v, kinds) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(v, kinds) for v in value)
    if isinstance(value, (set, frozenset)):
        return type(value)(_redact_value(v, kinds) for v in value)
    return value
