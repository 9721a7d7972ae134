"""What bench/injection_eval.py relies on, without running it (the run stores thousands of memories): the same
seed gives the same histories, every need's answer is carried by a memory of its project and by nothing the
baselines could match for free, and no need's prompt gives its answer away."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import injection_eval  # noqa: E402

from engram_core.models import MemoryType  # noqa: E402


def _texts(projects: list[injection_eval.Project]) -> list[list[str]]:
    return [[m.content for _, m in p.memories] for p in projects]


def test_the_same_seed_gives_the_same_histories_and_another_seed_does_not() -> None:
    a, b = injection_eval.generate(7, 12, 10), injection_eval.generate(7, 12, 10)
    assert _texts(a) == _texts(b)
    assert [[n.prompt for n in p.needs] for p in a] == [[n.prompt for n in p.needs] for p in b]
    assert _texts(injection_eval.generate(8, 12, 10)) != _texts(a)


def test_each_need_is_answered_by_its_project_and_not_given_away_by_its_prompt() -> None:
    projects = injection_eval.generate(7, 30, 30)
    kinds = {n.kind for p in projects for n in p.needs}
    assert kinds == {"decision", "fix", "preference", "changed fact"}
    for p in projects:
        assert len({s for s, _ in p.memories}) == 30  # every session stored something
        for need in p.needs:
            key = need.answer.lower()
            carriers = [m for _, m in p.memories if key in m.content.lower()]
            assert carriers, (p.name, need.answer)
            assert key not in need.prompt.lower()
            # Only memories of the need's own kind carry it: no passing note, edit record or session summary (all
            # episodic), and no other labelled fact (a fix naming the library a decision chose).
            kind_of = {"decision": "decision", "fix": "fix", "preference": "preference"}
            for m in carriers:
                assert m.memory_type != MemoryType.episodic, (p.name, need.answer)
                if need.kind in kind_of:
                    assert kind_of[need.kind] in m.tags, (p.name, need.answer, m.content)
                else:
                    assert not m.tags, (p.name, need.answer, m.content)


def test_coverage_counts_a_need_once_its_key_is_in_the_text_and_per_token() -> None:
    needs = [
        injection_eval.Need("fix", "how?", "PRAGMA journal_mode=WAL"),
        injection_eval.Need("x", "?", "zustand"),
    ]
    row = injection_eval.score(["- [procedural] set pragma JOURNAL_MODE=wal", "nothing here"], needs)
    assert row["hits"] == [True, False]
    summary = injection_eval.summarise([row], [needs])
    assert summary["coverage"] == 0.5
    assert summary["coverage_per_1k_tokens"] == round(1 / (row["tokens"] / 1000), 3)
    assert injection_eval.within(["a" * 40, "b" * 400, "c" * 40], 30) == "a" * 40 + "\n" + "c" * 40
