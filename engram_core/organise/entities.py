"""Entity and relation extraction from coding memories, without an LLM: regular expressions and a small
gazetteer. Pure functions; they run on every stored memory, so they must stay well under a millisecond.

What is found: file paths, packages and libraries, commands and tools, error types, functions and
classes, URLs. Relations come from a handful of phrasings that coding notes actually use ("we use X",
"switched from X to Y", "X raises Y", "fixed Y by …"). Entities merely named together are linked too, but that link
is not extracted here: the graph derives it from each memory's entity list (graph.py, `co_mention_core`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# name → (entity_type, category). Category marks *functional* choices: a project normally has one test
# framework, one package manager…; two different `uses` of the same category is a contradiction candidate.
GAZETTEER: dict[str, tuple[str, str | None]] = {}


def _add(names: str, etype: str, category: str | None) -> None:
    for n in names.split():
        GAZETTEER[n] = (etype, category)


_add("pytest jest vitest mocha jasmine unittest nose2 ava cypress playwright", "library", "test_framework")
_add("npm yarn pnpm pip pipenv poetry uv conda bun cargo bundler composer", "tool", "package_manager")
_add("ruff flake8 pylint eslint tslint golangci-lint clippy", "tool", "linter")
_add("black prettier autopep8 yapf rustfmt gofmt isort", "tool", "formatter")
_add("mypy pyright pyre tsc flow", "tool", "type_checker")
_add("webpack vite esbuild rollup parcel turbopack", "tool", "bundler")
_add(
    "django flask fastapi starlette express koa nestjs rails sinatra spring laravel",
    "library",
    "web_framework",
)
_add("react vue svelte angular solid preact nextjs nuxt remix", "library", "frontend_framework")
_add("postgres postgresql mysql mariadb sqlite mongodb surrealdb cockroachdb dynamodb", "library", "database")
_add("sqlalchemy prisma typeorm sequelize peewee diesel drizzle", "library", "orm")
_add("redis memcached", "library", "cache")
_add("celery rq sidekiq bullmq", "library", "task_queue")
_add(
    "numpy pandas scipy pydantic requests httpx aiohttp torch tensorflow polars attrs click typer "
    "textual rich structlog loguru boto3 lodash axios zod graphql grpc protobuf tokio serde "
    "sentence-transformers transformers onnxruntime alembic",
    "library",
    None,
)
_add(
    "git docker docker-compose kubectl helm terraform make cmake gcc clang node deno python python3 "
    "go rustc java gradle maven curl wget ssh rsync tmux nginx systemd gh pre-commit tox nox "
    "just sed awk grep jq",
    "tool",
    None,
)
# Services a project runs beside its code: brokers, search engines, object stores, observability, local fakes.
_add(
    "kafka rabbitmq nats pulsar activemq elasticsearch opensearch meilisearch typesense solr minio "
    "sentry datadog prometheus grafana jaeger opentelemetry localstack mailhog wiremock zustand redux mobx pinia",
    "library",
    None,
)

# Categories a project normally has one of: two different values of one is a change, not a second fact.
FUNCTIONAL = frozenset(
    {
        "test_framework",
        "package_manager",
        "formatter",
        "type_checker",
        "bundler",
        "web_framework",
        "frontend_framework",
        "database",
        "orm",
        "linter",
        "task_queue",
    }
)

_CANONICAL = {"postgresql": "postgres", "python3": "python", "docker-compose": "docker compose"}

URL = re.compile(r"\bhttps?://[^\s)>\]\"'`]+")
_FILE_EXT = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|toml|json|yaml|yml|"
    "md|cfg|ini|sql|surql|sh|bash|zsh|lock|txt|css|scss|html|vue|svelte|env|xml|gradle|proto|ipynb"
)
PATH = re.compile(
    r"(?<![\w@/.-])(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+/?"  # has a slash
    r"|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:" + _FILE_EXT + r")\b"  # or a known extension
)
ERROR = re.compile(
    r"\b(?:[A-Z][A-Za-z0-9]*\.)?[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Fault|Panic)\b"
    r"|\bE(?:CONNREFUSED|CONNRESET|ADDRINUSE|NOENT|ACCES|PERM|TIMEDOUT|PIPE)\b"
    r"|\b(?:segfault|segmentation fault|OOM|out of memory|deadlock)\b"
)
_FUNC_CALL = re.compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\(\)?")
_FUNC_DEF = re.compile(r"\b(?:def|fn|func|function|async def)\s+([A-Za-z_]\w*)")
_CLASS_DEF = re.compile(r"\b(?:class|struct|interface|enum|trait)\s+([A-Z]\w*)")
CAMEL = re.compile(r"(?<![\w.])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b")
_BACKTICK = re.compile(r"`([^`\n]{2,120})`")
_SHELL = re.compile(r"(?m)^\s*\$\s+(.{2,120})$")
_INSTALL = re.compile(
    r"\b(?:pip|pip3|uv|poetry|npm|yarn|pnpm|cargo|gem|go|bun)\s+(?:install|add|get|i)\s+"
    r"((?:-{1,2}[\w-]+\s+)*)([@\w][\w./@-]*(?:\s+[@\w][\w./@-]*)*)"
)
_IMPORT = re.compile(
    r"(?m)(?:^|\s)(?:from\s+([A-Za-z_][\w]*)[\w.]*\s+import|import\s+([A-Za-z_][\w]*))\b"
    r"|require\(['\"]([@\w][\w/@.-]*)['\"]\)"
)
WORD = re.compile(r"[A-Za-z][\w.+-]*")

# Words that look like calls or CamelCase but are not code entities in ordinary prose.
_NOT_FUNCS = {
    "e.g",
    "i.e",
    "etc",
    "see",
    "and",
    "or",
    "the",
    "a",
    "if",
    "for",
    "while",
    "print",
    "note",
    "example",
    "optional",
    "default",
    "maybe",
    "was",
    "is",
    "also",
    "fix",
    "only",
}
_NOT_CLASSES = {
    "GitHub",
    "JavaScript",
    "TypeScript",
    "PostgreSQL",
    "MacOs",
    "MacOS",
    "YouTube",
    "PowerShell",
    "LinkedIn",
    "WordPress",
    "FastApi",
    "OpenAi",
    "ChatGpt",
}


@dataclass(frozen=True)
class Extracted:
    name: str
    entity_type: str
    category: str | None = None

    @property
    def key(self) -> str:
        return name_key(self.name)


def name_key(name: str) -> str:
    """The form two mentions of the same entity share: case, surrounding punctuation, ./ prefix dropped."""
    n = name.strip().strip("`'\".,;:()[]{}").rstrip("/")
    if n.startswith("./"):
        n = n[2:]
    return re.sub(r"\s+", " ", n.lower())


def clean_path(p: str) -> str | None:
    p = p.strip().rstrip(".,;:)")
    if p.count("/") == 0 and "." not in p:
        return None
    # "and/or", "I/O", "TCP/IP": slashes in prose, not paths.
    if "/" in p and "." not in p and len(p) < 8 and not p.startswith(("/", "~", "./", "../")):
        return None
    if re.fullmatch(r"[\d./]+", p):  # dates, versions, fractions
        return None
    if p.lower() in GAZETTEER:
        return None
    return p


def gazetteer_hit(word: str) -> Extracted | None:
    w = word.lower().strip(".,;:()`'\"")
    hit = GAZETTEER.get(w)
    if hit is None:
        return None
    return Extracted(_CANONICAL.get(w, w), hit[0], hit[1])


def extract_entities(text: str, *, max_entities: int = 24) -> list[Extracted]:
    """Entities in a coding memory, in order of first appearance, deduplicated by (name_key, type)."""
    found: list[Extracted] = []
    seen: set[tuple[str, str]] = set()

    def add(e: Extracted) -> None:
        k = (e.key, e.entity_type)
        if e.key and k not in seen and len(found) < max_entities:
            seen.add(k)
            found.append(e)

    rest = text
    for m in URL.finditer(text):
        add(Extracted(m.group(0).rstrip(".,;:"), "url"))
    rest = URL.sub(" ", rest)

    commands: list[str] = []
    for m in [*_BACKTICK.finditer(rest), *_SHELL.finditer(rest)]:
        span = m.group(1).strip()
        first = span.split()[0].lower() if span.split() else ""
        if first in GAZETTEER and " " in span:
            commands.append(span)
    for c in commands:
        add(Extracted(re.sub(r"\s+", " ", c)[:80], "command"))

    for m in ERROR.finditer(rest):
        add(Extracted(m.group(0), "error"))
    for m in PATH.finditer(rest):
        p = clean_path(m.group(0))
        if p:
            add(Extracted(p, "file"))
    for m in _INSTALL.finditer(rest):
        for pkg in m.group(2).split():
            if pkg.startswith("-"):
                continue
            base = re.split(r"[=<>~\[]", pkg)[0]
            g = gazetteer_hit(base)
            add(g or Extracted(base.lower(), "library"))
    for m in _IMPORT.finditer(rest):
        mod = next((g for g in m.groups() if g), None)
        if mod and mod not in ("__future__", "typing", "os", "sys", "re"):
            g = gazetteer_hit(mod)
            add(g or Extracted(mod.lower(), "library"))
    for m in _FUNC_DEF.finditer(rest):
        add(Extracted(m.group(1), "function"))
    for m in _CLASS_DEF.finditer(rest):
        add(Extracted(m.group(1), "class"))
    for m in _FUNC_CALL.finditer(rest):
        name = m.group(1)
        if name.lower() in _NOT_FUNCS or name.lower() in GAZETTEER or len(name) < 3:
            continue
        # "foo(bar)" in prose is often a parenthetical; require code-like names then.
        if (
            m.group(0).endswith("(")
            and not m.group(0).endswith("()")
            and not ("_" in name or "." in name or re.search(r"[a-z][A-Z]", name))
        ):
            continue
        add(Extracted(name, "function"))
    for m in CAMEL.finditer(rest):
        name = m.group(1)
        if name in _NOT_CLASSES or name.lower() in GAZETTEER or ERROR.fullmatch(name):
            continue
        add(Extracted(name, "class"))
    for m in WORD.finditer(rest):
        g = gazetteer_hit(m.group(0))
        if g is not None:
            add(g)
    return found


@dataclass(frozen=True)
class ExtractedRelation:
    source: Extracted
    relation_type: str
    target: Extracted
    confidence: float = 0.7


SUBJECT_PROJECT = Extracted("this project", "project")
SUBJECT_USER = Extracted("user", "person")

_NEG_BEFORE = re.compile(
    r"\b(?:no longer|not|never|don't|do not|doesn't|does not|stopped|stop|avoid|"
    r"dropped|removed|instead of|rather than|without|deprecated|ditched)\b[\w\s,'-]{0,24}$",
    re.I,
)


def _find(ents: list[Extracted], text: str) -> Extracted | None:
    k = name_key(text)
    for e in ents:
        if e.key == k:
            return e
    g = gazetteer_hit(text)
    return g


def extract_relations(
    text: str, ents: list[Extracted], subject: Extracted = SUBJECT_PROJECT
) -> list[ExtractedRelation]:
    """The typed relations the text states."""
    rels: list[ExtractedRelation] = []

    def add(src: Extracted | None, rel: str, dst: Extracted | None, conf: float = 0.7) -> None:
        if src is None or dst is None or src.key == dst.key:
            return
        rels.append(ExtractedRelation(src, rel, dst, conf))

    low = text
    replaced: set[str] = set()
    for m in re.finditer(
        r"\b(?:switch(?:ed|ing)?|migrat(?:ed|ing|e)|mov(?:ed|ing|e)|port(?:ed|ing)?)\s+"
        r"(?:\w+\s+){0,3}?from\s+`?([\w.@/-]+)`?\s+to\s+`?([\w.@/-]+)`?",
        low,
        re.I,
    ):
        old, new = _find(ents, m.group(1)), _find(ents, m.group(2))
        add(new, "replaces", old, 0.8)
        add(subject, "uses", new, 0.8)
        if old:
            replaced.add(old.key)
    for m in re.finditer(
        r"\breplac(?:ed|e|ing)\s+`?([\w.@/-]+)`?\s+(?:with|by)\s+`?([\w.@/-]+)`?", low, re.I
    ):
        old, new = _find(ents, m.group(1)), _find(ents, m.group(2))
        add(new, "replaces", old, 0.8)
        add(subject, "uses", new, 0.8)
        if old:
            replaced.add(old.key)
    for m in re.finditer(
        r"\b(?:use[sd]?|using|run[s]?\s+(?:tests?|the suite)\s+(?:with|on)|"
        r"(?:is|as)\s+(?:our|the)\s+[\w\s-]{0,20}?(?:framework|runner|database|db|manager|"
        r"linter|formatter|bundler|orm)\s*(?:is)?)\s+`?([\w.@/-]+)`?",
        low,
        re.I,
    ):
        target = _find(ents, m.group(1))
        if target is None or target.key in replaced or target.entity_type not in ("library", "tool"):
            continue
        if _NEG_BEFORE.search(low[: m.start()]) or re.search(
            r"\b(?:not|never|no longer)\s*$", low[: m.start()]
        ):
            continue
        add(subject, "uses", target)
    for e in ents:
        # "X is our test runner" / "tests run on X" with X first.
        if (
            e.category
            and re.search(re.escape(e.name) + r"\s+(?:is|as)\s+(?:our|the)\b", low, re.I)
            and not _NEG_BEFORE.search(low[: low.lower().find(e.name.lower())])
        ):
            add(subject, "uses", e)
    for m in re.finditer(
        r"`?([\w./:-]+?)`?\s+(?:raises|throws|causes|triggers|leads to|results in)\s+(?:an?\s+)?"
        r"`?([\w.:-]+)`?",
        low,
        re.I,
    ):
        add(_find(ents, m.group(1)), "causes", _find(ents, m.group(2)))
    for m in re.finditer(
        r"`?([\w./:()-]+?)`?\s+(?:fixes|fixed|resolves|resolved|solves|prevents)\s+(?:the\s+)?"
        r"`?([\w.:-]+)`?",
        low,
        re.I,
    ):
        add(_find(ents, m.group(1).rstrip("()")), "fixes", _find(ents, m.group(2)))
    for m in re.finditer(
        r"\bfix(?:ed)?\s+(?:the\s+)?`?([\w.:-]+)`?\s+(?:\w+\s+){0,4}?(?:by|with|using)\s+"
        r"(?:\w+\s+){0,3}?`?([\w./:()-]+)`?",
        low,
        re.I,
    ):
        add(_find(ents, m.group(2).rstrip("()")), "fixes", _find(ents, m.group(1)))
    for m in re.finditer(
        r"\bfixed\s+by\s+(?:calling|using|adding|running|setting)?\s*`?([\w./:()-]+)`?", low, re.I
    ):
        errors = [e for e in ents if e.entity_type == "error" and low.find(e.name) < m.start()]
        if errors:
            add(_find(ents, m.group(1).rstrip("()")), "fixes", errors[-1])
    for m in re.finditer(r"\b(?:database|db)\s+is\s+`?([\w.@/-]+)`?", low, re.I):
        target = _find(ents, m.group(1))
        if target is not None and target.category == "database":
            add(subject, "uses", target)
    for m in re.finditer(r"`?([\w./@-]+)`?\s+(?:depends on|requires|needs)\s+`?([\w./@-]+)`?", low, re.I):
        add(_find(ents, m.group(1)), "depends_on", _find(ents, m.group(2)))
    for m in re.finditer(r"`?([\w./@-]+)`?\s+imports\s+`?([\w./@-]+)`?", low, re.I):
        add(_find(ents, m.group(1)), "imports", _find(ents, m.group(2)))
    for m in re.finditer(r"`?([\w./@-]+)`?\s+(?:is\s+)?tested\s+(?:by|in)\s+`?([\w./@-]+)`?", low, re.I):
        add(_find(ents, m.group(1)), "tested_by", _find(ents, m.group(2)))
    for m in re.finditer(
        r"`?([\w./@-]+)`?\s+(?:is\s+)?configured\s+(?:by|in|via)\s+`?([\w./@-]+)`?", low, re.I
    ):
        add(_find(ents, m.group(1)), "configured_by", _find(ents, m.group(2)))
    return rels
