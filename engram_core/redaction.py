"""Secret redaction for everything Engram stores (tool output, prompts, metadata).

Standard library only, on purpose: the hook scripts load this file directly by path on every
tool use without importing the rest of ``engram_core`` (or any third-party package).

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

import re

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
        return isinstance(other, Redaction) and (self.kind, self.start, self.end) == (other.kind, other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.kind, self.start, self.end))

    def __repr__(self) -> str:
        return f"Redaction(kind={self.kind!r}, start={self.start}, end={self.end})"


class _Lazy:
    """A pattern compiled on first use. Each one has a literal guard, so typical tool output needs only a
    few of them, and a hook (a fresh process per tool call) need not compile all ~40 at import."""

    __slots__ = ("source", "flags", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def finditer(self, text: str):  # noqa: ANN201 - Iterator[re.Match[str]]
        if self._compiled is None:
            self._compiled = re.compile(self.source, self.flags)
        return self._compiled.finditer(text)


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (kind, pattern, group to replace, literals one of which must occur in the lower-cased text).
# Order is priority when two findings cover the same span: specific token formats beat the
# generic KEY=value rule.  The literal guard skips a regex scan when it cannot match: a plain
# substring test over 100 KB costs microseconds, a regex scan about 2 ms.
_TOKEN_PATTERNS: list[tuple[str, _Lazy, int, tuple[str, ...], bool]] = [
    (
        "private_key",
        _Lazy(
            r"-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP |SSH2 )?PRIVATE KEY(?: BLOCK)?)-----"
            r".*?(?:-----END \1-----|\Z)",
            re.S,
        ),
        0,
        ("-----begin",),
        False,
    ),
    ("anthropic_key", _Lazy(r"sk-ant-[A-Za-z0-9_\-]{20,}"), 0, ("sk-ant-",), True),
    (
        "openai_key",
        _Lazy(r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        0,
        ("sk-",),
        True,
    ),
    (
        "aws_access_key",
        _Lazy(r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
        0,
        ("akia", "asia", "abia", "acca", "a3t"),
        True,
    ),
    ("gcp_api_key", _Lazy(r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), 0, ("aiza",), True),
    ("google_oauth_secret", _Lazy(r"GOCSPX-[0-9A-Za-z_\-]{20,}"), 0, ("gocspx-",), True),
    (
        "github_token",
        _Lazy(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,255}\b"),
        0,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        True,
    ),
    ("github_token", _Lazy(r"github_pat_[A-Za-z0-9_]{22,255}\b"), 0, ("github_pat_",), True),
    ("gitlab_token", _Lazy(r"glpat-[A-Za-z0-9_\-]{20,}"), 0, ("glpat-",), True),
    ("slack_token", _Lazy(r"xox[abposr]-[A-Za-z0-9\-]{10,}"), 0, ("xox",), True),
    (
        "slack_webhook",
        _Lazy(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
        0,
        ("hooks.slack.com",),
        False,
    ),
    (
        "stripe_key",
        _Lazy(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}\b"),
        0,
        ("k_live_", "k_test_"),
        True,
    ),
    ("stripe_key", _Lazy(r"pk_live_[A-Za-z0-9]{10,}\b"), 0, ("pk_live_",), True),
    ("stripe_webhook_secret", _Lazy(r"whsec_[A-Za-z0-9+/=]{20,}"), 0, ("whsec_",), True),
    ("npm_token", _Lazy(r"npm_[A-Za-z0-9]{36}\b"), 0, ("npm_",), True),
    ("sendgrid_key", _Lazy(r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"), 0, ("sg.",), True),
    ("twilio_api_key", _Lazy(r"SK[0-9a-fA-F]{32}\b"), 0, ("sk",), True),
    ("huggingface_token", _Lazy(r"hf_[A-Za-z0-9]{30,}\b"), 0, ("hf_",), True),
    (
        "jwt",
        _Lazy(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
        0,
        ("eyj",),
        True,
    ),
    (
        "azure_key",
        _Lazy(r"(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})"),
        1,
        ("accountkey=", "sharedaccess"),
        True,
    ),
    ("azure_sas", _Lazy(r"[?&]sig=([A-Za-z0-9%+/=]{20,})"), 1, ("sig=",), False),
    (
        "authorization",
        _Lazy(
            r"(?i)(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest|bot)\s+"
            r"([A-Za-z0-9._~+/=\-]{6,})"
        ),
        1,
        ("authorization",),
        True,
    ),
    # command-line passwords: --password=x / --password x, `docker login -p x`, `mysql -px`
    (
        "cli_password",
        _Lazy(r"--pass(?:word|wd)?(?:=|[ \t]+)(?![-$])([^\s\"']+)"),
        1,
        ("--pass",),
        True,
    ),
    (
        "cli_password",
        _Lazy(r"(?:docker|podman|nerdctl|helm|oras) [^\n]*?login\b[^\n]*?\s-p[ \t]+([^\s\"']+)"),
        1,
        (" login ",),
        True,
    ),
    ("cli_password", _Lazy(r"mysql(?:dump|admin)?\b[^\n]*?\s-p([^\s\"']+)"), 1, ("mysql",), True),
    # scheme://user:password@host -> keep user and host (the scheme itself is not needed to match)
    ("url_password", _Lazy(r"://[^:/?#@\s\"']*:([^@/\s\"']+)@"), 1, ("://",), False),
]

# Secret-like key names: the secret word must END the key (DB_PASSWORD, apiKey, x-api-key),
# so TOKEN_URL, PASSWORD_FILE, AUTHOR or max_tokens are not secret-like.
_SECRET_WORD = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|secret[_.\-]?key|client[_.\-]?secret|token|"
    r"(?:api|access|private|signing|encryption|master|account|app|admin|session|license)[_.\-]?key|"
    r"apikey|auth|credentials?|dsn|connection[_.\-]?string)"
)
# Matching starts at the secret word (fast: a first-character set, no look-behind, which would
# defeat the regex engine's prefix scan).  _whole_word() then checks that the word is a whole part
# of the key: after a non-alphanumeric (`_`, `.`, `-` included) or at a camelCase boundary.
_ASSIGN_BODY = (
    r"(?![A-Za-z0-9])"
    r"(?P<kq>[\"']?)(?P<sep>[ \t]*(?::=|=>|=|:)[ \t]*)"
    r"(?:(?P<q>[\"'])(?P<qv>(?:[^\"'\\\n]|\\.){1,500}?)(?P=q)|(?P<uv>[^\s\"'`]{1,500}))"
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
    r"str|string|int|integer|number|bool|boolean|bytes|any|object|secret|password|token)$",
    re.I,
)
_CODE_REF = re.compile(r"^[A-Za-z_][A-Za-z_.]*$")
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.I | re.S)


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
    return (prev.islower() or prev.isdigit()) and text[start].isupper()


def _key(text: str, m: re.Match[str]) -> str:
    """The whole key ending in the matched secret word (`DB_PASSWORD`, `refresh_token`)."""
    start = m.start("word")
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    return text[start : m.end("word")]


def _assignment_value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """Span of the secret value in a KEY=value match, or None when it is not a secret.

    ``m`` may come from a lower-cased copy of ``text`` (same length), so every value is read
    from ``text`` by span, never from ``m.group()``.
    """
    sep = text[slice(*m.span("sep"))]
    op = sep.strip()
    env_style = op == "=" and sep == "=" and m.end("kq") == m.start("kq")
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
        if not env_style and _CODE_REF.match(value):
            line_end = text.find("\n", span[1])
            tail = text[span[1] : None if line_end < 0 else line_end]
            if op != ":" or cut or tail.strip():
                # a variable or attribute reference (`token = response.token`, `{"token": token}`)
                # or prose (`Token: see the docs`); a bare YAML value ends its line
                return None
    if not value or _PLACEHOLDER.match(value):
        return None
    return span


def redact(text: str) -> tuple[str, list[Redaction]]:
    """Return ``text`` with secrets replaced and the list of replaced spans (input offsets)."""
    if not text:
        return text, []
    found: list[tuple[int, int, int, str]] = []  # (start, end, priority, kind)
    candidates: list[tuple[int, int, int, str]] = []
    low = text.lower()
    for m in _PRIVATE.finditer(text) if "<private" in low else ():
        candidates.append((m.start(), m.end(), -1, "private"))
    for prio, (kind, pattern, group, guards, bounded) in enumerate(_TOKEN_PATTERNS):
        if not any(g in low for g in guards):
            continue
        for m in pattern.finditer(text):
            s, e = m.span(group)
            # an earlier run's placeholder (`https://u:[REDACTED:x]@h`) is not a new secret
            if e > s and not text.startswith("[REDACTED:", s) and (not bounded or _bounded(text, m.start())):
                candidates.append((s, e, prio, kind))
    generic_prio = len(_TOKEN_PATTERNS)
    # lower() can change the length of some non-ASCII text; offsets must stay the input's
    assign, subject = (_ASSIGN_LOWER, low) if len(low) == len(text) else (_ASSIGN_ANYCASE, text)
    for m in assign.finditer(subject):
        if not _whole_word(text, m):
            continue
        span = _assignment_value(text, m)
        if span is not None:
            candidates.append((span[0], span[1], generic_prio, _word_kind(_key(text, m))))
    if not candidates:
        return text, []
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


def redact_value(value: object) -> object:
    """Recursively redact strings inside dicts, lists, tuples and sets; returns a new object.

    Dict keys are redacted too (a secret can end up as a key); non-string leaves are returned as is.
    """
    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, dict):
        return {(redact(k)[0] if isinstance(k, str) else k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    if isinstance(value, set | frozenset):
        return type(value)(redact_value(v) for v in value)
    return value
