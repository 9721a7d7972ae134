"""Tests for engram_core.redaction.

Corpora: tests/data/redaction_corpus.jsonl (one secret or one harmless look-alike a line, by family; written
for issue #13), tests/data/secrets_corpus.jsonl (58 texts, every listed secret must disappear) and
tests/data/benign_corpus.jsonl (55 texts that must survive byte-identical).  `python bench/redaction.py`
prints recall per family and the false positives.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engram_core.redaction import Redaction, redact, redact_text, redact_value

DATA = Path(__file__).parent / "data"
CORE = Path(__file__).parent.parent / "engram_core"
MODULE = CORE / "redaction"  # a package of standard-library modules
FILES = sorted(MODULE.glob("*.py"))
# How the hook script loads it: engram_core/ appended to the path, then a plain import.
HOOK_IMPORT = f"import sys\nsys.path.append({str(CORE)!r})\nimport redaction as mod\n"


def _load(name: str) -> list[dict]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


SECRETS = _load("secrets_corpus.jsonl")
BENIGN = _load("benign_corpus.jsonl")
CORPUS = _load("redaction_corpus.jsonl")
CORPUS_SECRETS = [e for e in CORPUS if e["secret"] is not None]
CORPUS_LOOKALIKES = [e for e in CORPUS if e["secret"] is None]


def test_corpus_size() -> None:
    assert len(CORPUS_SECRETS) >= 150 and len(CORPUS_LOOKALIKES) >= 50
    assert len({e["family"] for e in CORPUS_SECRETS}) >= 40


@pytest.mark.parametrize("entry", CORPUS_SECRETS, ids=[e["family"] for e in CORPUS_SECRETS])
def test_corpus_secret_is_redacted(entry: dict) -> None:
    out = redact_text(entry["text"])
    assert entry["secret"] not in out, out
    assert redact_text(out) == out  # idempotent


@pytest.mark.parametrize("entry", CORPUS_LOOKALIKES, ids=[e["family"] for e in CORPUS_LOOKALIKES])
def test_corpus_lookalike_survives(entry: dict) -> None:
    assert redact_text(entry["text"]) == entry["text"]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # cut output: a key whose BEGIN line is gone, a quote whose closing half is gone
        (
            "AAAAB3NzaC1yc2EAAAADAQABAAABgQC7xyz | Zm9vYmFyYmF6cXV4cXV1eA== | -----END RSA PRIVATE KEY-----",
            "Zm9vYmFyYmF6cXV4cXV1eA==",
        ),
        ("run: DB_PASSWORD='half-a-passw", "half-a-passw"),
        # a key whose value follows on the next, indented line, after a rejected candidate
        ("credentials:\n  password:\n    n0t-a-real-one\n", "n0t-a-real-one"),
    ],
)
def test_cut_and_split_secrets(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


def test_corpus_figures() -> None:
    total = sum(len(e["secrets"]) for e in SECRETS)
    leaked = [(e["kind"], s) for e in SECRETS for s in e["secrets"] if s in redact_text(e["text"])]
    changed = [e["kind"] for e in BENIGN if redact_text(e["text"]) != e["text"]]
    recall = 1 - len(leaked) / total
    print(
        f"\nsecrets corpus: {len(SECRETS)} texts, {total} secret values, recall {recall:.1%}"
        f"\nbenign corpus: {len(BENIGN)} texts, false positives {len(changed)}"
    )
    assert len(SECRETS) >= 50 and len(BENIGN) >= 50
    assert leaked == []
    assert changed == []


@pytest.mark.parametrize("entry", SECRETS, ids=[e["kind"] for e in SECRETS])
def test_secret_is_removed(entry: dict) -> None:
    out, found = redact(entry["text"])
    for secret in entry["secrets"]:
        assert secret not in out, f"{entry['kind']}: {secret!r} survived"
    assert "[REDACTED:" in out
    assert found and all(isinstance(r, Redaction) for r in found)
    # offsets refer to the input text and never overlap
    prev_end = 0
    for r in found:
        assert prev_end <= r.start < r.end <= len(entry["text"]), (prev_end, r)
        prev_end = r.end
    # redacting twice changes nothing more (placeholders are not secrets)
    assert redact_text(out) == out


@pytest.mark.parametrize("entry", BENIGN, ids=[e["kind"] for e in BENIGN])
def test_benign_survives(entry: dict) -> None:
    out, found = redact(entry["text"])
    assert found == []
    assert out == entry["text"]


@pytest.mark.parametrize(
    ("text", "kind", "kept"),
    [
        ("AWS_ACCESS_KEY_ID=AKIAQX3RTV7ZP4M2KD9W", "aws_access_key", "AWS_ACCESS_KEY_ID="),
        (
            "aws_secret_access_key = Zk8rP2vQ/7mXn4Lt9Wb+Hc3Jd6Fs1Ga5Ye0Uo8Ri",
            "aws_secret_key",
            "aws_secret_access_key = ",
        ),
        ("key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY here", "gcp_api_key", "key "),
        ("t=ghp_R8x2LmQ9vT4kZp7NwY3cJh6Fd1Sa0BgE5uXo", "github_token", "t="),
        ("glpat-Ab3Cd5Ef7Gh9Ij1Kl3Mn", "gitlab_token", ""),
        ("xoxb-2048-4096-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7", "slack_token", ""),
        ("sk_live_51Hx9ZkQ2eVbN4mPqR7tY8uI0oP3aS5dF", "stripe_key", ""),
        ("sk-ant-api03-Xy7Zq2Wv9Ut4Sr1Pq8On5Ml2Kj6Ih3Gf0", "anthropic_key", ""),
        ("sk-proj-Qw3rTy7UiOp9AsDfGh2JkLzXcVbNm4Qw8ErTy1Ui", "openai_key", ""),
        ("npm_Qw8ErTy1UiOp3AsDfGh5JkLzXcVbNm7Qw9Er", "npm_token", ""),
        ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "huggingface_token", ""),
        ("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", "google_oauth_secret", ""),
        ("https://bob:hunter2x@example.com/x", "url_password", "https://bob:"),
        ("Authorization: Bearer abcdef123456", "authorization", "Authorization: Bearer "),
        ("export DB_PASSWORD='s3cr3t value'", "password", "export DB_PASSWORD='"),
        ("password: hunter2", "password", "password: "),
    ],
)
def test_kinds_and_context_kept(text: str, kind: str, kept: str) -> None:
    out, found = redact(text)
    assert [r.kind for r in found] == [kind]
    assert out.startswith(kept + f"[REDACTED:{kind}]")


def test_url_keeps_user_and_host() -> None:
    assert (
        redact_text("postgres://app:pw1234@db:5432/x") == "postgres://app:[REDACTED:url_password]@db:5432/x"
    )


def test_private_block_removed_entirely() -> None:
    text = "a <Private>line1\nAKIA-not-needed\nline2</PRIVATE> b <private>c</private> d"
    assert redact_text(text) == "a [REDACTED:private] b [REDACTED:private] d"


def test_unclosed_private_hides_the_rest() -> None:
    assert redact_text("ok <private> everything after") == "ok [REDACTED:private]"


def test_not_secret_values() -> None:
    for text in (
        "NODE_ENV=production",
        "PORT=8080",
        "PASSWORD=",
        "API_TOKEN=${API_TOKEN}",
        "SECRET=$SECRET",
        "token = get_token()",
        "def f(password: str): ...",
        "auth=auth",
        "max_tokens: 4096",
        "TOKEN_URL=https://example.com/oauth/token",
    ):
        assert redact_text(text) == text, text


def test_redact_value_recurses_and_copies() -> None:
    meta = {
        "cmd": "curl -H 'Authorization: Bearer abcdef123456'",
        "nested": [{"env": "GITHUB_TOKEN=ghp_R8x2LmQ9vT4kZp7NwY3cJh6Fd1Sa0BgE5uXo"}, 3, None],
        "tuple": ("sk_live_51Hx9ZkQ2eVbN4mPqR7tY8uI0oP3aS5dF", 1.5),
        "n": 7,
    }
    out = redact_value(meta)
    assert out is not meta
    assert "abcdef123456" not in json.dumps(out, default=list)
    assert out["nested"][0]["env"] == "GITHUB_TOKEN=[REDACTED:github_token]"
    assert out["nested"][1:] == [3, None]
    assert out["tuple"] == ("[REDACTED:stripe_key]", 1.5)
    assert out["n"] == 7
    assert meta["nested"][0]["env"].endswith("uXo")  # the input is not mutated


def test_pathological_input_is_linear() -> None:
    # long runs of key-like and quote characters must not backtrack catastrophically
    text = "password=" * 5000 + "a" * 20_000 + "'" * 5000 + "-----BEGIN PRIVATE KEY-----" + "x" * 20_000
    t0 = time.perf_counter()
    redact(text)
    assert time.perf_counter() - t0 < 2.0


def test_module_is_python38_compatible() -> None:
    """The hook script loads this package with whatever python3 the user has (3.8 and later)."""
    assert len(FILES) >= 2
    for path in FILES:
        source = path.read_text(encoding="utf-8")
        ast.parse(source, feature_version=(3, 8))
        assert "from __future__ import annotations" in source  # annotations are never evaluated at run time
    found = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    if not found:
        pytest.skip("no Python 3.8 interpreter here; the syntax check above still ran")
    code = (
        "import json\n"
        + HOOK_IMPORT
        + f"rows = [json.loads(x) for x in open({str(DATA / 'redaction_corpus.jsonl')!r}) if x.strip()]\n"
        "bad = [r['family'] for r in rows if (r['secret'] is not None and r['secret'] in mod.redact_text(r['text']))"
        " or (r['secret'] is None and mod.redact_text(r['text']) != r['text'])]\n"
        "assert not bad, bad\n"
        "assert mod.redact_value({'a': {'password: x1y2z3'}}) == {'a': {'password: [REDACTED:password]'}}\n"
    )
    proc = subprocess.run([str(found[0]), "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_module_imports_only_stdlib() -> None:
    """Each module imports the standard library or a sibling in the package, nothing of engram_core."""
    siblings = {p.stem for p in FILES}
    imported: set[str] = set()
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in siblings, (path.name, node.module)
            elif isinstance(node, ast.ImportFrom):
                imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_module_loads_by_path_without_engram_core() -> None:
    code = (
        HOOK_IMPORT
        + "assert mod.redact_text('x ghp_R8x2LmQ9vT4kZp7NwY3cJh6Fd1Sa0BgE5uXo') == 'x [REDACTED:github_token]'\n"
        "bad = [m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names"
        " and m not in ('__main__', 'redaction', 'redaction.patterns')]\n"
        "assert not bad, bad\n"
        "assert 'engram_core' not in sys.modules\n"
    )
    # -S: no site-packages, so a third-party import would fail loudly; -I: ignore the env and cwd
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_daemon_output_streams_are_redacted_by_line() -> None:
    """What bypasses logging in the daemon (a thread's uncaught traceback) goes to engram.log redacted."""
    import io

    from engram_core.daemon.server import RedactingStream

    raw = io.StringIO()
    s = RedactingStream(raw)
    s.write("Traceback: ValueError: bad input GITHUB_TOKEN=ghp_R8x2LmQ9v")  # a secret split over two writes
    s.write("T4kZp7NwY3cJh6Fd1Sa0BgE5uXo\nnext line\npartial password=hunter2")
    assert "ghp_" not in raw.getvalue() and "next line\n" in raw.getvalue()
    s.flush()
    assert "hunter2" not in raw.getvalue() and raw.getvalue().endswith("[REDACTED:password]")
