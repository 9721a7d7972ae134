"""Entity and relation extraction on realistic coding memories (pure, no store)."""

from __future__ import annotations

from engram_core.organise.entities import extract_entities, extract_relations


def names(text: str, etype: str) -> set[str]:
    return {e.name for e in extract_entities(text) if e.entity_type == etype}


def test_file_paths() -> None:
    text = "The bug was in src/auth/session.py; config lives in pyproject.toml and ./scripts/dev.sh"
    assert {"src/auth/session.py", "pyproject.toml", "scripts/dev.sh"} <= names(text, "file") | {
        n.lstrip("./") for n in names(text, "file")
    }


def test_prose_slashes_are_not_paths() -> None:
    assert names("Handle I/O and/or TCP/IP errors; released 2024/05/01", "file") == set()


def test_packages_and_libraries() -> None:
    text = "pip install sqlalchemy==2.0 alembic\nfrom fastapi import FastAPI\nimport numpy as np\nThe DB is postgres."
    libs = names(text, "library")
    assert {"sqlalchemy", "alembic", "fastapi", "numpy", "postgres"} <= libs


def test_commands_and_tools() -> None:
    text = "Run `pytest -x tests/` before pushing, and `docker compose up -d redis` for the cache. Uses git."
    assert {"pytest -x tests/", "docker compose up -d redis"} <= names(text, "command")
    assert {"docker", "git"} <= names(text, "tool")


def test_error_types() -> None:
    text = "auth.py raises TokenExpiredError; requests.exceptions.ConnectionError and ECONNREFUSED from redis"
    errors = names(text, "error")
    assert {"TokenExpiredError", "ECONNREFUSED"} <= errors
    assert any(e.endswith("ConnectionError") for e in errors)


def test_functions_and_classes() -> None:
    text = "EngramService.recall() calls rank(); def fuse_lists(a, b) lives next to class SearchIndex and ScopeStore"
    funcs = names(text, "function")
    assert {"EngramService.recall", "fuse_lists"} <= funcs
    assert {"SearchIndex", "ScopeStore"} <= names(text, "class")


def test_urls() -> None:
    text = "See https://docs.pytest.org/en/stable/how-to/fixtures.html for fixture scopes."
    assert names(text, "url") == {"https://docs.pytest.org/en/stable/how-to/fixtures.html"}
    assert not any("docs.pytest.org" in n for n in names(text, "file"))


def rels(text: str) -> set[tuple[str, str, str]]:
    ents = extract_entities(text)
    return {(r.source.name, r.relation_type, r.target.name) for r in extract_relations(text, ents)}


def test_typed_relations() -> None:
    assert ("this project", "uses", "pytest") in rels("We use pytest for all tests.")
    got = rels("We switched from Jest to Vitest last week.")
    assert ("vitest", "replaces", "jest") in got and ("this project", "uses", "vitest") in got
    assert ("this project", "uses", "jest") not in got
    assert ("auth.py", "causes", "TokenExpiredError") in rels(
        "auth.py raises TokenExpiredError on old tokens"
    )
    got = rels("TokenExpiredError in the worker; fixed by calling refresh_token() first")
    assert ("refresh_token", "fixes", "TokenExpiredError") in got


def test_negated_use_is_not_a_use() -> None:
    assert not any(r[1] == "uses" for r in rels("We no longer use black for formatting."))
    assert not any(r[1] == "uses" for r in rels("Do not use yarn here."))


def test_relations_are_only_the_typed_ones_the_text_states() -> None:
    """Entities merely named together are linked by the graph from the memory's entity list (test_graph.py), not
    extracted as relations."""
    text = "src/db.py opens sqlalchemy sessions"
    assert extract_relations(text, extract_entities(text)) == []
    assert {
        r.relation_type
        for r in extract_relations(
            "auth.py raises TokenExpiredError; we use pytest",
            extract_entities("auth.py raises TokenExpiredError; we use pytest"),
        )
    } == {"causes", "uses"}
