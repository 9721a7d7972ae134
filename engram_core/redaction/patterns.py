"""The token rules of `redaction`: each secret format as (kind, pattern, group, guards, bounded), most specific
first, and the lazily compiled pattern they share. Standard library only, Python 3.8 syntax: the hook script
imports this package with whatever python3 the user has."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


class Lazy:
    """A pattern compiled on first use. Each one has a literal guard, so typical tool output needs only a
    few of them, and a hook (a fresh process per tool call) need not compile all ~40 at import."""

    __slots__ = ("source", "flags", "_compiled")

    def __init__(self, source: str | bytes, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled: re.Pattern[Any] | None = None

    def finditer(self, text: Any) -> Iterator[re.Match[Any]]:  # str, or bytes for the guard scan
        if self._compiled is None:
            self._compiled = re.compile(self.source, self.flags)
        return self._compiled.finditer(text)


# Shell syntax shared by the command-line rules: blanks including `\`-newline continuations, and the
# rest of one logical command line (continuations included), matched lazily.
SP = r"(?:[ \t]|\\\r?\n)+"
LINE = r"(?:[^\n\\]|\\\r?\n|\\.)*?"
B64 = r"[A-Za-z0-9+/=]"


def rule(
    kind: str, source: str, guards: tuple[str, ...], group: int = 0, flags: int = 0, bounded: bool = True
) -> tuple[str, Lazy, int, tuple[bytes, ...], bool]:
    return (kind, Lazy(source, flags), group, tuple(g.encode() for g in guards), bounded)


# (kind, pattern, group to replace, literals one of which must occur in the lower-cased text, whether the
# match must start a word).  Order is priority when two findings cover the same span: specific token formats
# beat the generic KEY=value rule.  The literal guard skips a regex scan when it cannot match: a plain
# substring test over 100 KB costs microseconds, a regex scan about 2 ms.
TOKEN_PATTERNS: list[tuple[str, Lazy, int, tuple[bytes, ...], bool]] = [
    # ── key material ──
    rule(
        "private_key",
        r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)",
        ("-----begin",),
        flags=re.S,
        bounded=False,
    ),
    rule(
        "private_key",
        r"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----.*?(?:---- END SSH2 ENCRYPTED PRIVATE KEY ----|\Z)",
        ("---- begin ssh2 encrypted",),
        flags=re.S,
        bounded=False,
    ),
    # PuTTY .ppk: everything from the private lines to the MAC (a cut-off file: to the end)
    rule(
        "private_key",
        r"Private-Lines:.*?(?:Private-MAC:[ \t]*[0-9a-fA-F]*|\Z)",
        ("private-lines:",),
        flags=re.S,
        bounded=False,
    ),
    rule("private_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("age-secret-key-1",)),
    rule(
        "private_key",
        r"(?:client-key-data|client-key)[\"']?[ \t]*:[ \t]*[\"']?(" + B64 + r"{20,})",
        ("client-key",),
        group=1,
    ),
    # ── vendor tokens with a recognisable prefix ──
    rule("anthropic_key", r"sk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",)),
    rule("openai_key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{30,}", ("sk-",)),
    rule("openai_key", r"sk-[A-Za-z0-9]{0,60}T3BlbkFJ[A-Za-z0-9]{10,}", ("t3blbkfj",)),
    # plain `sk-` + one long alphanumeric run; pod and branch names (`sk-learn-worker-…`) have hyphens
    rule("openai_key", r"sk-[A-Za-z0-9]{32,}(?![A-Za-z0-9_\-])", ("sk-",)),
    rule("mapbox_key", r"sk\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", ("sk.eyj",)),
    rule(
        "aws_access_key",
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        ("akia", "asia", "abia", "acca", "a3t"),
    ),
    rule("cloud_key", r"LTAI[A-Za-z0-9]{12,24}\b", ("ltai",)),
    rule("cloud_key", r"AKID[A-Za-z0-9]{32}\b", ("akid",)),
    rule(
        "azure_client_secret",
        r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])",
        ("q~",),
        bounded=False,
    ),
    rule("gcp_api_key", r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", ("aiza",)),
    rule("google_oauth_secret", r"GOCSPX-[0-9A-Za-z_\-]{20,}", ("gocspx-",)),
    rule("google_oauth_token", r"ya29\.[0-9A-Za-z_\-]{20,}", ("ya29.",)),
    rule("google_oauth_token", r"1//0[0-9A-Za-z_\-]{30,}", ("1//0",)),
    rule("github_token", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,255}\b", ("gh",)),
    rule("github_token", r"github_pat_[A-Za-z0-9_]{22,255}\b", ("github_pat_",)),
    rule(
        "gitlab_token", r"gl(?:pat|rt|ptt|dt|soat|cbt|imt|ft|agent|oas|rtr|ffct)-[A-Za-z0-9_\-]{20,}", ("gl",)
    ),
    rule("gitlab_token", r"GR1348941[A-Za-z0-9_\-]{20,}", ("gr1348941",)),
    rule("slack_token", r"xox(?:e\.xox)?[abposre]-\d[A-Za-z0-9\-]{9,}", ("xox",)),
    rule("slack_token", r"xapp-\d-[A-Za-z0-9]{6,}-\d{6,}-[A-Za-z0-9]{20,}", ("xapp-",)),
    rule(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}",
        ("hooks.slack.com",),
        bounded=False,
    ),
    rule("stripe_key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}\b", ("k_live_", "k_test_")),
    rule("stripe_key", r"pk_live_[A-Za-z0-9]{10,}\b", ("pk_live_",)),
    rule("stripe_webhook_secret", r"whsec_[A-Za-z0-9+/=]{20,}", ("whsec_",)),
    rule("npm_token", r"npm_[A-Za-z0-9]{36}\b", ("npm_",)),
    rule("pypi_token", r"pypi-AgE[A-Za-z0-9_\-]{50,}", ("pypi-age",)),
    rule("docker_token", r"dckr_pat_[A-Za-z0-9_\-]{20,}", ("dckr_pat_",)),
    rule("sendgrid_key", r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}", ("sg.",)),
    rule("twilio_api_key", r"SK[0-9a-fA-F]{32}\b", ("sk",)),
    rule("huggingface_token", r"hf_[A-Za-z0-9]{30,}\b", ("hf_",)),
    rule("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}\b", ("_v1_",)),
    rule("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b", ("shp",)),
    rule("vault_token", r"hv[sbr]\.[A-Za-z0-9_\-]{24,}", ("hv",)),
    rule("terraform_token", r"[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,}", ("atlasv1",)),
    rule("linear_key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40,}", ("lin_",)),
    rule("notion_token", r"ntn_[0-9]{11}[A-Za-z0-9]{35}\b", ("ntn_",)),
    rule("notion_token", r"secret_[A-Za-z0-9]{43}\b", ("secret_",)),
    rule("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?\b", ("dapi",)),
    rule("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b", ("glsa_",)),
    rule("grafana_token", r"glc_[A-Za-z0-9+/]{32,}={0,2}", ("glc_",)),
    rule("newrelic_key", r"NR(?:AK|II|JS)-[A-Za-z0-9]{19,32}\b", ("nr",)),
    rule("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", ("pmak-",)),
    rule(
        "doppler_token",
        r"dp\.(?:st|pt|ct|sa|scrt|audit)\.(?:[A-Za-z0-9_\-]{1,40}\.)?[A-Za-z0-9]{40,}",
        ("dp.",),
    ),
    rule("groq_key", r"gsk_[A-Za-z0-9]{48,}\b", ("gsk_",)),
    rule("replicate_token", r"r8_[A-Za-z0-9]{37}\b", ("r8_",)),
    rule("perplexity_key", r"pplx-[A-Za-z0-9]{40,}\b", ("pplx-",)),
    rule("supabase_token", r"sbp_[a-f0-9]{40}\b", ("sbp_",)),
    rule("figma_token", r"figd_[A-Za-z0-9_\-]{40,}", ("figd_",)),
    rule("atlassian_token", r"ATATT3[A-Za-z0-9_\-=]{100,}", ("atatt3",)),
    rule("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_\-]{60,}", ("sntry",)),
    rule("heroku_key", r"HRKU-[A-Za-z0-9_\-]{58,}", ("hrku-",)),
    rule("mailgun_key", r"key-[0-9a-f]{32}\b", ("key-",)),
    rule("telegram_token", r"(?<!\d)\d{8,10}:AA[A-Za-z0-9_\-]{33}\b", (":aa",), bounded=False),
    rule(
        "discord_token",
        r"[MNO][A-Za-z0-9]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}",
        ("discord", "bot"),
    ),
    rule("jwt", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", ("eyj",)),
    # password hashes (crackable offline, so as sensitive as what they hash)
    rule("password_hash", r"\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}", ("$2",), bounded=False),
    rule("password_hash", r"\$apr1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}", ("$apr1$",), bounded=False),
    rule(
        "password_hash",
        r"\$[56]\$(?:rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{43,86}",
        ("$5$", "$6$"),
        bounded=False,
    ),
    rule(
        "password_hash",
        r"\$argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{8,}\$[A-Za-z0-9+/]{16,}",
        ("$argon2",),
        bounded=False,
    ),
    # ── connection strings ──
    rule(
        "azure_key",
        r"(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})",
        ("accountkey=", "sharedaccess"),
        group=1,
    ),
    rule("azure_sas", r"(?<![A-Za-z0-9_.])sig=([A-Za-z0-9%+/=]{20,})", ("sig=",), group=1, bounded=False),
    rule(
        "authorization",
        r"(?i)(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest|bot)\s+"
        r"([A-Za-z0-9._~+/=\-]{6,})",
        ("authorization",),
        group=1,
    ),
    # scheme://user:password@host -> keep user and host (the scheme itself is not needed to match)
    rule("url_password", r"://[^:/?#@\s\"']*:([^@/\s\"']+)@", ("://",), group=1, bounded=False),
    # ── passwords on command lines (`\`-continued lines included) ──
    # --password=x, --db-password x, --api-token x, --passphrase x (not --password-stdin, --token-file)
    rule(
        "cli_password",
        r"--(?!no-)(?:[a-z0-9]+-)*(?:pass(?:word|wd|phrase)?|token|secret|api-?key|access-key|"
        r"secret-key|client-secret)(?:=|" + SP + r")([\"']?)(?![-$])([^\s\"'`]+)",
        ("--",),
        group=2,
    ),
    rule(
        "cli_password",
        r"(?:docker|podman|nerdctl|helm|oras|az|twine)\b"
        + LINE
        + r"[ \t]-p"
        + SP
        + r"([\"']?)(?![-$])([^\s\"']+)",
        (" -p",),
        group=2,
    ),
    rule(
        "cli_password",
        r"mysql(?:dump|admin|sh)?\b" + LINE + r"\s-p([^\s\"'-][^\s\"']*)",
        ("mysql",),
        group=1,
    ),
    rule(
        "cli_password",
        r"sshpass(?:" + SP + r"-[^p\s]\S*)*" + SP + r"-p[ \t]*([\"']?)([^\s\"']+)",
        ("sshpass",),
        group=2,
    ),
    rule(
        "cli_password",
        r"redis-cli\b" + LINE + r"[ \t]-a" + SP + r"([\"']?)(?![-$])([^\s\"']+)",
        ("redis-cli",),
        group=2,
    ),
    rule(
        "cli_password",
        r"ssh-keygen\b" + LINE + r"[ \t]-N" + SP + r"([\"']?)([^\s\"']+)",
        ("ssh-keygen",),
        group=2,
    ),
    rule("cli_password", r"-pass(?:in|out)?" + SP + r"pass:([^\s\"']+)", ("pass:",), group=1, bounded=False),
    rule(
        "cli_password",
        r"ConvertTo-SecureString" + SP + r"(?:-String" + SP + r")?([\"'])([^\"'\n]+)\1",
        ("convertto-securestring",),
        group=2,
    ),
    # curl -u user:password (only curl: `docker run -u 1000:1000` is a uid:gid)
    rule(
        "cli_password",
        r"curl\b" + LINE + r"[ \t](?:-u|--user)(?:=|" + SP + r")([\"']?)[^\s\"':]*:(?![$])"
        r"([^\s\"']+)",
        ("curl",),
        group=2,
    ),
    rule(
        "cli_password",
        r"lftp\b" + LINE + r"[ \t]-u" + SP + r"([\"']?)[^\s,\"']+,([^\s\"']+)",
        ("lftp",),
        group=2,
    ),
    rule(
        "cli_password",
        r"(?:smb|rpc)client\b" + LINE + r"[ \t](?:-U|--user)" + SP + r"([\"']?)[^\s%\"']+%([^\s\"']+)",
        ("client",),
        group=2,
    ),
    # ~/.netrc: machine HOST login USER password PASS (one line or several)
    rule(
        "password",
        r"machine\s+\S+(?:\s+(?:login|account|port|protocol)\s+\S+)*\s+password\s+(\S+)",
        ("machine",),
        group=1,
    ),
    rule("password", r"default\s+(?:login\s+\S+\s+)?password\s+(\S+)", ("default",), group=1),
    # ~/.pgpass: host:port:database:user:password
    rule("password", r"(?m)^[^\s:#]+:(?:\d+|\*):[^\s:]+:[^\s:]+:(\S+)$", ("pgpass",), group=1),
]
