"""ranking: contextual ingest text and BM25/vector fusion."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engram_core.models import MemoryIn
from engram_core.retrieval import ranking
from engram_core.retrieval.ranking import DEFAULT_FUSION, contextual_text, fuse, fused_scores, minmax
from engram_core.service import EngramService


def test_contextual_text_puts_memory_first_and_keeps_recent_context() -> None:
    prev = ["Melanie: Did you go anywhere fun?", "Caroline: Which trip do you mean?"]
    text = contextual_text("Melanie: The one to the beach last week.", prev, max_prev=1)
    assert text.startswith("Melanie: The one to the beach last week.")
    assert "Which trip" in text and "anywhere fun" not in text
    both = contextual_text("x", prev, max_prev=2)
    assert "anywhere fun" in both and "Which trip" in both


def test_contextual_text_without_context_is_the_memory() -> None:
    assert contextual_text("alone", []) == "alone"
    assert contextual_text("alone", ["ignored"], max_prev=0) == "alone"
    assert contextual_text("alone", ["", ""]) == "alone"


def test_contextual_text_clips_long_context_and_adds_date() -> None:
    text = contextual_text("m", ["a" * 5000], max_chars=100, when="8 May 2023")
    assert len(text) < 150
    assert text.endswith("[8 May 2023]")


def test_default_context_depth_matches_config() -> None:
    prev = [f"turn {i}" for i in range(5)]
    text = contextual_text("now", prev)
    for i in range(5):
        assert (f"turn {i}" in text) == (i >= 5 - DEFAULT_FUSION.context_prev)


def test_rrf_fusion_math() -> None:
    out = dict(fuse([("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.8)], k_rrf=10, w_bm25=1.0, w_vec=1.0))
    assert out["a"] == pytest.approx(1 / 11)
    assert out["b"] == pytest.approx(1 / 12 + 1 / 11)
    assert out["c"] == pytest.approx(1 / 12)
    ranked = fuse([("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.8)], k_rrf=10, w_bm25=1.0, w_vec=1.0)
    assert [d for d, _ in ranked] == ["b", "a", "c"]


def test_bm25_weight_breaks_single_list_ties_towards_bm25() -> None:
    ranked = fuse([("lexical", 3.0)], [("semantic", 0.7)], k_rrf=10, w_bm25=1.3, w_vec=1.0)
    assert [d for d, _ in ranked] == ["lexical", "semantic"]


def test_score_fusion_math() -> None:
    bm = [("a", 10.0), ("b", 6.0), ("c", 2.0)]
    vec = [("c", 0.9), ("a", 0.5), ("d", 0.1)]
    out = dict(fuse(bm, vec, method="score", alpha=0.5))
    assert out["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
    assert out["b"] == pytest.approx(0.5 * 0.5)
    assert out["c"] == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)
    assert out["d"] == pytest.approx(0.0)


def test_boosts_limit_and_empty_inputs() -> None:
    ranked = fuse([("a", 2.0), ("b", 1.0)], [], boosts={"b": 10.0}, limit=1)
    assert ranked == [("b", pytest.approx(10.0 * DEFAULT_FUSION.w_bm25 / (DEFAULT_FUSION.k_rrf + 2)))]
    assert fuse([], []) == []
    with pytest.raises(ValueError):
        fuse([("a", 1.0)], [], method="nope")  # type: ignore[arg-type]


def test_minmax() -> None:
    assert minmax([]) == []
    assert minmax([3.0, 3.0]) == [1.0, 1.0]
    assert minmax([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]


def test_best_first_orders_as_a_score_then_key_sort() -> None:
    """best_first (two C-level sorts) gives the order of sorting by (-score, key), ties included, for pairs and
    for the graph ranker's (key, score, store) triples."""
    import random

    from engram_core.retrieval.ranking import best_first

    rng = random.Random(7)
    for _ in range(200):
        items = [
            (f"k{rng.randrange(50):02d}-{i}", rng.choice([0.5, 1.0, rng.random()]))
            for i in range(rng.randrange(40))
        ]
        assert best_first(list(items)) == sorted(items, key=lambda t: (-t[1], t[0]))
        store = object()
        triples = [(k, s, store) for k, s in items]
        assert best_first(list(triples)) == sorted(triples, key=lambda t: (-t[1], t[0]))


def test_fused_scores_are_fuses_scores_unordered() -> None:
    bm, vec = [("a", 9.0), ("b", 5.0), ("d", 1.0)], [("b", 0.9), ("c", 0.8), ("a", 0.1)]
    for method in ("rrf", "score"):
        scores = fused_scores(bm, vec, method=method)  # type: ignore[arg-type]
        assert scores == dict(fuse(bm, vec, method=method))  # type: ignore[arg-type]
        assert set(scores) == {"a", "b", "c", "d"}


def test_query_cues_name_the_people_a_question_is_about() -> None:
    cues = ranking.query_cues("The day Caroline told Mel about the Pride parade?")
    assert cues.names == {"caroline", "mel", "pride"}  # a capitalised stopword is not a name
    assert ranking.cue_factor(cues, "Caroline: I went to the parade") == pytest.approx(
        1 + ranking.SPEAKER_BOOST
    )
    assert ranking.cue_factor(cues, "Melanie: Caroline went to the parade") == 1.0  # named, not the speaker
    assert ranking.cue_factor(cues, "went to the parade, Caroline: yes") == 1.0  # the speaker leads the text
    assert ranking.cue_factor(ranking.query_cues("what did she say?"), "Caroline: hi") == 1.0
    assert ranking.query_cues("what did she say?").most == 1.0
    assert "caroline" in ranking.query_cues("What is Caroline's plan?").names  # a possessive names her


def test_a_memory_spoken_by_the_person_asked_about_ranks_first(
    env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other speaker's turn says more of the question's words; the named person's own statement wins only
    through the speaker cue (with the cue off, the order flips: the test sees the signal, not the wording)."""
    svc, p = env
    svc.store_many(
        [
            MemoryIn(content="John: Tim, your fantasy novel sounds great, Tim! How is the novel going?"),
            MemoryIn(content="Tim: I am in the middle of a fantasy novel, a bit nerve-wracking."),
        ],
        project=p,
    )

    def order() -> list[str]:
        res = svc.recall("What novel is Tim writing?", project=p, strengthen=False, log=False)
        return [h.memory.content.split(":", 1)[0] for h in res.hits]

    assert order()[:2] == ["Tim", "John"]
    monkeypatch.setattr(ranking, "SPEAKER_BOOST", 0.0)
    assert order()[:2] == ["John", "Tim"]


def test_query_periods_read_days_months_and_bare_months() -> None:
    assert ranking.query_periods("What dish did Nate make on 9 November, 2022?") == (
        (date(2022, 11, 9), 11, date(2022, 11, 9)),
    )
    assert ranking.query_periods("What did Caroline paint on October 13, 2023?") == (
        (date(2023, 10, 13), 10, date(2023, 10, 13)),
    )
    assert ranking.query_periods("What was John doing in August 2023?") == (
        (date(2023, 8, 1), 8, date(2023, 8, 31)),
    )
    assert ranking.query_periods("When did Melanie go camping in July?") == ((None, 7, None),)
    assert ranking.query_periods("May I see the deploy notes?") == ()
    cues = ranking.query_cues("What did Nate cook on 9 November, 2022?")
    boost = 1 + ranking.DATE_BOOST
    assert ranking.cue_factor(cues, "cooked", datetime(2022, 11, 9, 13, tzinfo=UTC)) == pytest.approx(boost)
    # A week after the day still counts (the memory tells of it afterwards); a month later does not.
    assert ranking.cue_factor(cues, "cooked", datetime(2022, 11, 15, tzinfo=UTC)) == pytest.approx(boost)
    assert ranking.cue_factor(cues, "cooked", datetime(2022, 12, 10, tzinfo=UTC)) == 1.0
    assert ranking.cue_factor(cues, "cooked", None) == 1.0
    july = ranking.query_cues("what happened in July?")
    assert ranking.cue_factor(july, "x", date(2021, 7, 30)) == pytest.approx(boost)
    assert ranking.cue_factor(july, "x", date(2021, 8, 5)) == pytest.approx(boost)  # within the week after
    assert ranking.cue_factor(july, "x", date(2021, 6, 30)) == 1.0


def test_a_memory_written_in_the_period_a_query_names_ranks_first(
    env: tuple[EngramService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two memories of the same trip; the one written in the month the question names wins through the date cue
    (with the cue off the other, closer in wording, is first)."""
    svc, p = env
    svc.store_many(
        [
            MemoryIn(
                content="we had a road trip along the coast, a great road trip with the kids",
                created_at=datetime(2024, 3, 2, 10, tzinfo=UTC),
            ),
            MemoryIn(
                content="the trip along the coast was lovely",
                created_at=datetime(2024, 8, 20, 10, tzinfo=UTC),
            ),
        ],
        project=p,
    )

    def order() -> list[str]:
        res = svc.recall(
            "Where did we go on a road trip in August 2024?", project=p, strengthen=False, log=False
        )
        return [h.memory.content.split(" ", 2)[1] for h in res.hits]

    assert order()[:2] == ["trip", "had"]
    monkeypatch.setattr(ranking, "DATE_BOOST", 0.0)
    assert order()[:2] == ["had", "trip"]
