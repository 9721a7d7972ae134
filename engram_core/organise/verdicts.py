"""How two memories relate, read from their text and one cosine: the same statement (a duplicate), the same
subject with an incompatible value or polarity (an update), or two statements that do not meet (distinct).
`contradictions` queues the updates; `consolidation` proposes the duplicates."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..retrieval.search_index import tokenize
from . import entities as ex
from . import subjects as sj
from .words import ANTONYMS

TOPIC_COSINE = 0.80  # below this (and little word overlap) two memories are about different things
TOPIC_OVERLAP = 0.6  # share of the longer memory's words the other also has
ANCHORED_COSINE = 0.45  # two statements naming the same subject: below this they are about other things of it
ANCHORED_OVERLAP = 0.3
CANDIDATE_COSINE = 0.45  # nearest neighbours above this are worth a closer look
DUPLICATE_COSINE = 0.86  # at or above (and no differing value/negation): the same statement
ANCHORED_DUPLICATE_COSINE = 0.6  # the same subject and the same values: the same fact in other words
NEGATION_COSINE = 0.85
CHANGE_COSINE = 0.6  # a newer statement naming the old value it replaced: enough to compare without a subject
ATTRIBUTE_COSINE = 0.75  # at or above, two statements of one subject are taken to be about one attribute
ATTRIBUTE_OVERLAP = 0.3  # or when this share of what they say of it (`subjects.same_attribute`) is shared
CLAUSE_OVERLAP = (
    0.5  # two clauses holding opposites share this much of their other words: one clause said twice
)
STRONG_CONFIDENCE = 0.95  # the newer names the value it replaced: resolved without asking (undoable)

PairClass = Literal["duplicate", "update", "distinct"]

_ANT = {a: b for a, b in ANTONYMS} | {b: a for a, b in ANTONYMS}


_CLAUSE = re.compile(r"[.!?;]\s+|,\s+(?:and|but)\s+")
_LOCATED = re.compile(
    r"\b(?:lives?|living|stored|kept|located|sits?|defined|configured|moved)\s+(?:in|at|under|to)\s", re.I
)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z_][a-z0-9_-]*", text.lower()))


@dataclass(frozen=True)
class Verdict:
    """How a newer statement relates to an older one. For an update: `strong` when the newer says it changed
    the value and names the old one (a supersession that may be applied without asking)."""

    cls: PairClass
    why: str
    strong: bool = False
    kind: str = "value"
    confidence: float = 0.5
    about_same: bool = True  # False when the two name different subjects


def judge(old: str, new: str, cosine: float, vocab: sj.Vocabulary | None = None) -> Verdict:
    """Duplicate (the same thing said of the same subject), update (the same subject, an incompatible value or
    polarity), or distinct. Two statements of one shape about different subjects are distinct, whatever their
    values: a codebase's memory is full of them.

    Same topic needs a shared subject (a component, file, reference or code name both name) or, where neither
    names one, close embeddings or most words shared."""
    so, sn = sj.read(old, vocab), sj.read(new, vocab)
    cmp = sj.compare(so, sn)
    changed = sj.changed_slots(old, new) or []
    swaps = [(x, y) for x, y in changed if x and y]
    if len(changed) == 1 and len(swaps) == 1:
        x, y = swaps[0]
        if _ANT.get(x) == y:
            return Verdict("update", f"one shape; opposites: {x} vs {y}", confidence=0.7)
        if sj.is_path(x) and sj.is_path(y) and _LOCATED.search(old):
            # "Feature flags live in config/flags.yaml" → "… in config/features.toml": where it lives changed.
            return Verdict("update", f"one shape; it moved: {x} → {y}", confidence=0.6)
    if cmp.same_subject is False:
        return Verdict("distinct", cmp.why_subject, about_same=False)
    slots = sj.subject_slots(old, new, so.values | sn.values, vocab)
    if slots:
        return Verdict(
            "distinct", f"one shape, different subjects: {slots[0][0]!r} vs {slots[0][1]!r}", about_same=False
        )
    ta, tb = set(tokenize(old)), set(tokenize(new))
    overlap = len(ta & tb) / max(len(ta), len(tb)) if ta and tb else 0.0
    anchored = cmp.same_subject is True
    if anchored and cosine < ANCHORED_COSINE and overlap < ANCHORED_OVERLAP and not cmp.functional:
        return Verdict("distinct", f"{cmp.why_subject}, but cosine {cosine:.2f}: about something else")
    strong_change = cmp.names_old_value and cosine >= CHANGE_COSINE
    if not anchored and cosine < TOPIC_COSINE and overlap < TOPIC_OVERLAP and not strong_change:
        return Verdict("distinct", f"cosine {cosine:.2f}, word overlap {overlap:.2f}: different topics")
    # Two values of one kind are one attribute's only where the statements say the same sort of thing of
    # their subject (a deploy tool and an owner are both names) or the values share a functional category.
    same_attribute = (
        cmp.functional
        or (cmp.names_old_value and cosine >= CHANGE_COSINE)
        or cosine >= ATTRIBUTE_COSINE
        or sj.same_attribute(old, new, so, sn) >= ATTRIBUTE_OVERLAP
    )
    # With no identifier for the subject, only a stated change or one shape with one value swapped tells two
    # statements are about one thing: template-like notes ("my usual setup: …, and X for formatting") repeat
    # with other values without being about one subject.
    single_swap = len([x for x in changed if x[0] or x[1]]) == 1 and (
        cosine >= TOPIC_COSINE or cmp.functional
    )
    purposes = sj.other_purposes(old, new) if cmp.conflict else None
    if purposes:
        return Verdict("distinct", f"two attributes: for the {purposes[0]} vs for the {purposes[1]}")
    if cmp.conflict and same_attribute and (anchored or strong_change or single_swap):
        was = ", ".join(sorted(cmp.only_old)[:3])
        now = ", ".join(sorted(cmp.only_new)[:3])
        how = "the newer says it changed from " if cmp.names_old_value else ""
        confidence = (
            STRONG_CONFIDENCE if cmp.names_old_value else 0.8 if cmp.functional else 0.7 if anchored else 0.55
        )
        return Verdict(
            "update",
            f"{cmp.why_subject}; {how}{was} → {now}",
            strong=cmp.names_old_value,
            confidence=confidence,
        )
    close = anchored or cosine >= DUPLICATE_COSINE
    said_change = bool(sn.changes)  # a different subject returned above
    # A polarity flip of one statement: what changed is the negation and at most a few words beside it, not a
    # whole clause that happens to hold a "not" ("… to avoid a second database" vs "… the docs recommend it").
    residue = (
        [w for x, y in changed for w in (x + " " + y).split() if not sj.negation_word(w)] if changed else None
    )
    flip = (residue is not None and len(residue) <= 3) or (residue is None and cosine >= 0.9)
    if (
        so.negated != sn.negated
        and overlap >= TOPIC_OVERLAP
        and flip
        and ((close and cosine >= NEGATION_COSINE) or (said_change and cosine >= CHANGE_COSINE))
    ):
        return Verdict("update", f"{cmp.why_subject}; one states it, the other negates it", kind="negation")
    wa, wb = _words(old), _words(new)
    for w in wa - wb:
        if (
            _ANT.get(w) in wb - wa
            and close
            and cosine >= ATTRIBUTE_COSINE
            and overlap >= TOPIC_OVERLAP
            and _opposed_in_one_clause(old, new, w, _ANT[w])
        ):
            return Verdict("update", f"{cmp.why_subject}; opposites: {w} vs {_ANT[w]}")
    same_values = so.values == sn.values or (so.values <= sn.values or sn.values <= so.values)
    if not same_values:
        return Verdict("distinct", f"cosine {cosine:.2f}: related, different details")
    # One shape with a value swapped for another ("a stale nginx lock file" / "a stale alembic lock file") is
    # two statements, even when the other side names the first value elsewhere.
    named = [(x, y) for x, y in swaps if _value_word(x, so) and _value_word(y, sn) and not _one_value(x, y)]
    if named:
        return Verdict("distinct", f"one shape, a value swapped: {named[0][0]} vs {named[0][1]}")
    if cosine >= DUPLICATE_COSINE or (ta and tb and len(ta & tb) / len(ta | tb) >= 0.8):
        return Verdict("duplicate", f"cosine {cosine:.2f}, same values and polarity")
    smaller = so.values if len(so.values) <= len(sn.values) else sn.values
    # One names a file, a review or a function the other does not: more specific, so less likely the same
    # statement; and a subset of the values is weaker evidence than the same values.
    needed = ANCHORED_DUPLICATE_COSINE
    if so.values != sn.values:
        needed += 0.1
    if (so.subjects - sn.subjects) or (sn.subjects - so.subjects):
        needed += 0.1
    if anchored and smaller and cosine >= needed:
        vals = ", ".join(sorted(so.values)[:3])
        return Verdict("duplicate", f"{cmp.why_subject}, same value ({vals}), cosine {cosine:.2f}")
    return Verdict("distinct", f"cosine {cosine:.2f}: related but not the same statement")


def _value_word(word: str, st: sj.Statement) -> bool:
    """A single word that is a value: one the statement states, or a tool's name."""
    return " " not in word and (word in st.values or ex.gazetteer_hit(word) is not None)


def _one_value(x: str, y: str) -> bool:
    """Postgres and PostgreSQL: one value in two spellings."""
    hx, hy = ex.gazetteer_hit(x), ex.gazetteer_hit(y)
    return hx is not None and hy is not None and hx.key == hy.key


def _clause_with(text: str, word: str) -> set[str]:
    for clause in _CLAUSE.split(text):
        words = _words(clause)
        if word in words:
            return words
    return set()


def _opposed_in_one_clause(old: str, new: str, w: str, opposite: str) -> bool:
    """Opposites say opposite things only in one clause said twice ("run it before the migration" / "after the
    migration"), not when one sits in an aside ("checked before merging") and the other in another."""
    a, b = _clause_with(old, w) - {w}, _clause_with(new, opposite) - {opposite}
    return bool(a and b) and len(a & b) / len(a | b) >= CLAUSE_OVERLAP


def classify_pair(a: str, b: str, cosine: float, vocab: sj.Vocabulary | None = None) -> tuple[PairClass, str]:
    """`judge` with ``b`` taken as the newer statement."""
    v = judge(a, b, cosine, vocab)
    return v.cls, v.why
