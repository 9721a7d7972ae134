"""memory_peek, memory_partition, memory_aggregate."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram_core.models import AggregateInput, MemoryIn
from engram_core.organise import recursive as rc
from engram_core.retrieval.embeddings import NoEmbedder
from engram_core.service import EngramService


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngramService, str]]:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    # BM25 is enough for these tools; they never need vectors.
    svc = EngramService(home=tmp_path / "home", embedder=NoEmbedder(), recover_sessions=False)
    mems = []
    for i in range(12):
        mems.append(
            MemoryIn(
                content=f"auth note {i}: JWT refresh handling",
                tags=["auth"],
                memory_type="episodic",
                importance=0.2,
                created_at=datetime(2026, 1, 5 + i, tzinfo=UTC),
            )
        )
    for i in range(6):
        mems.append(
            MemoryIn(
                content=f"database note {i}: index on orders",
                tags=["database", "perf"],
                memory_type="semantic",
                importance=0.7,
                created_at=datetime(2026, 2, 1 + i, tzinfo=UTC),
            )
        )
    mems.append(
        MemoryIn(
            content="Always run ruff before committing",
            memory_type="procedural",
            importance=0.9,
            scope="user",
            created_at=datetime(2026, 3, 1, tzinfo=UTC),
        )
    )
    svc.store_many(mems, project=str(proj))
    yield svc, str(proj)
    svc.close()


def test_peek(env: tuple[EngramService, str]) -> None:
    svc, p = env
    out = rc.memory_peek(svc, project=p, sample_n=6)
    assert out.total == 19
    assert out.by_type == {"episodic": 12, "semantic": 6, "procedural": 1}
    assert out.by_scope == {"project": 18, "user": 1}
    assert out.top_tags[0] == ("auth", 12)
    assert out.date_range is not None and out.date_range[0].month == 1 and out.date_range[1].month == 3
    assert len(out.samples) == 6 and {s.memory_type for s in out.samples} == {
        "episodic",
        "semantic",
        "procedural",
    }
    focused = rc.memory_peek(svc, project=p, sample_n=3, focus="orders index")
    assert len(focused.samples) == 3 and all("orders" in s.content for s in focused.samples)
    assert rc.memory_peek(svc, scope="user", project=p).total == 1


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        ("tag", {"auth": 12, "database": 6, "perf": 6, "(untagged)": 1}),
        ("type", {"episodic": 12, "semantic": 6, "procedural": 1}),
        ("scope", {"project": 18, "user": 1}),
        ("date", {"2026-01": 12, "2026-02": 6, "2026-03": 1}),
        ("importance_band", {"0.0-0.3": 12, "0.6-0.8": 6, "0.8-1.0": 1}),
    ],
)
def test_partition(env: tuple[EngramService, str], by: str, expected: dict[str, int]) -> None:
    svc, p = env
    parts = rc.memory_partition(svc, by, project=p)  # type: ignore[arg-type]
    assert {x.key: x.count for x in parts} == expected
    assert all(x.date_range is not None for x in parts)
    assert len(rc.memory_partition(svc, by, project=p, max_partitions=1)) == 1  # type: ignore[arg-type]


def test_partition_descriptor_fields(env: tuple[EngramService, str]) -> None:
    svc, p = env
    auth = next(x for x in rc.memory_partition(svc, "tag", project=p) if x.key == "auth")
    assert auth.avg_importance == pytest.approx(0.2)
    assert auth.date_range is not None and auth.date_range[0].day == 5 and auth.date_range[1].day == 16


def test_aggregate_rrf_dedup_provenance(env: tuple[EngramService, str]) -> None:
    svc, _ = env
    results = [
        AggregateInput(
            source="auth",
            memories=[
                {"id": "a1", "content": "JWT refresh rotates the key"},
                {"id": "a2", "content": "Tokens expire after 15 minutes"},
            ],
        ),
        AggregateInput(
            source="jwt",
            memories=[
                {"id": "x9", "content": "JWT refresh rotates the key!"},
                {"id": "a1", "content": "JWT refresh rotates the key"},
                "A plain string result about middleware",
            ],
        ),
        AggregateInput(
            source="middleware",
            memories=[{"memory": {"id": "m1", "content": "Middleware order matters"}}],
            local_score=0.5,
        ),
    ]
    out = rc.memory_aggregate(svc, results, final_limit=10)
    top = out[0]
    assert top.id == "a1" and top.sources == ["auth", "jwt"]
    assert top.score == pytest.approx(1 / 61 + 1 / 61, abs=1e-6), (
        "x9 is a near-duplicate of a1 and folds into it"
    )
    assert [o.id for o in out].count("x9") == 0
    m1 = next(o for o in out if o.id == "m1")
    assert m1.score == pytest.approx(0.5 / 61, abs=1e-6) and m1.sources == ["middleware"]
    assert any(o.content.startswith("A plain string") for o in out)
    assert len(rc.memory_aggregate(svc, results, final_limit=2)) == 2
    strict = rc.memory_aggregate(svc, results, dedup_threshold=1.01)
    assert "x9" in [o.id for o in strict]
