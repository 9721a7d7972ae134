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

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Redaction", "redact", "redact_text", "redact_value"]


@dataclass(frozen=True)
class Redaction:
    kind: str
    start: int
    end: int


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (kind, pattern, group to replace).  Order is priority when two findings cover the same span:
# specific token formats beat the generic KEY=value rule.
_TOKEN_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP |SSH2 )?PRIVATE KEY(?: BLOCK)?)-----"
            r".*?(?:-----END \1-----|\Z)",
            re.S,
        ),
        0,
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_key", re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"), 0),
    ("gcp_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), 0),
    ("google_oauth_secret", re.compile(r"\bGOCSPX-[0-9A-Za-z_\-]{20,}"), 0),
    ("github_token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,255}\b"), 0),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"), 0),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), 0),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), 0),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
        0,
    ),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}\b"), 0),
    ("stripe_key", re.compile(r"\bpk_live_[A-Za-z0-9]{10,}\b"), 0),
    ("stripe_webhook_secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{20,}"), 0),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"), 0),
    ("twilio_api_key", re.compile(r"\bSK[0-9a-fA-F]{32}\b"), 0),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), 0),
    (
        "azure_key",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})"),
        1,
    ),
    ("azure_sas", re.compile(r"[?&]sig=([A-Za-z0-9%+/=]{20,})"), 1),
    (
        "authorization",
        re.compile(
            r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest|bot)\s+"
            r"([A-Za-z0-9._~+/=\-]{6,})"
        ),
        1,
    ),
    # command-line passwords: --password=x / --password x, `docker login -p x`, `mysql -px`
    ("cli_password", re.compile(r"(?<![\w-])--pass(?:word|wd)?(?:=|[ \t]+)(?![-$])([^\s\"']+)"), 1),
    (
        "cli_password",
        re.compile(r"\b(?:docker|podman|nerdctl|helm|oras)\b[^\n]*?\blogin\b[^\n]*?\s-p[ \t]+([^\s\"']+)"),
        1,
    ),
    ("cli_password", re.compile(r"\bmysql(?:dump|admin)?\b[^\n]*?\s-p([^\s\"']+)"), 1),
    # scheme://user:password@host -> keep user and host
    ("url_password", re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s\"']*:([^@/\s\"']+)@"), 1),
]

# Secret-like key names: the secret word must END the key (DB_PASSWORD, apiKey, x-api-key),
# so TOKEN_URL, PASSWORD_FILE, AUTHOR or max_tokens are not secret-like.
_SECRET_WORD = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|secret[_.\-]?key|client[_.\-]?secret|token|"
    r"(?:api|access|private|signing|encryption|master|account|app|admin|session|license)[_.\-]?key|"
    r"apikey|auth|credentials?|dsn|connection[_.\-]?string)"
)
_ASSIGN = re.compile(
    r"(?P<key>(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_.\-]|_+)*?(?:[a-z0-9]+(?=[A-Z]))?"
    r"(?i:" + _SECRET_WORD + r"))(?![A-Za-z0-9])"
    r"(?P<kq>[\"']?)(?P<sep>[ \t]*(?::=|=>|=|:)[ \t]*)"
    r"(?:(?P<q>[\"'])(?P<qv>(?:[^\"'\\\n]|\\.){1,500}?)(?P=q)|(?P<uv>[^\s\"'`]{1,500}))"
)
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


def _assignment_value(m: re.Match[str]) -> tuple[int, int] | None:
    """Span of the secret value in a KEY=value match, or None when it is not a secret."""
    sep = m.group("sep")
    op = sep.strip()
    env_style = op == "=" and sep == "=" and not m.group("kq")
    if m.group("qv") is not None:
        value, span = m.group("qv"), m.span("qv")
    else:
        value, span = m.group("uv"), m.span("uv")
        # env / .env / shell values run to whitespace; elsewhere (YAML, headers, INI, code)
        # punctuation that ends a value in code also ends it here
        cut = re.search(r"[;&,)\]}]" if env_style else r"[,;(){}\[\]<>&]", value)
        if cut:
            if not env_style and (cut.start() == 0 or value[cut.start()] in "([{"):
                return None  # a call, index or literal: code, not a secret
            value = value[: cut.start()]
            span = (span[0], span[0] + len(value))
        if _PLACEHOLDER.match(m.group("uv")) or value.lower() == m.group("key").lower():
            return None  # `${VAR}`, `{{ x }}`, `auth=auth` keyword arguments
        if not env_style and _CODE_REF.match(value):
            line_end = m.string.find("\n", span[1])
            tail = m.string[span[1] : None if line_end < 0 else line_end]
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
    for m in _PRIVATE.finditer(text):
        candidates.append((m.start(), m.end(), -1, "private"))
    for prio, (kind, pattern, group) in enumerate(_TOKEN_PATTERNS):
        for m in pattern.finditer(text):
            s, e = m.span(group)
            if e > s:
                candidates.append((s, e, prio, kind))
    generic_prio = len(_TOKEN_PATTERNS)
    for m in _ASSIGN.finditer(text):
        span = _assignment_value(m)
        if span is not None:
            candidates.append((span[0], span[1], generic_prio, _word_kind(m.group("key"))))
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
