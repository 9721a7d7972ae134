"""What a statement is about and what it says of it, so two statements are compared only on the same subject.

A codebase's memory is full of parallel statements ("the billing service listens on port 8080", "the search
service listens on port 9200"): the same shape, different subjects. Two of them contradict only when they
say incompatible things about the same subject; they are duplicates only when they say the same thing of it.

Without an LLM the subject is read from the identifiers a statement names: components named with a head
noun ("the billing service", "the web app", "the platform repo's"), file paths, pull-request and issue
numbers, code names. Components a store has named that way before are recognised without the noun too
("Billing now listens on 9090"): `Vocabulary` learns them, and proper names (people, products), from the
memories written. Values are what an attribute takes: numbers and versions, known tools and libraries,
proper names, branch names.

A newer statement that says it changed something ("now", "migrated", "no longer", "instead of") and names the
old value supersedes the older one: that is the strong evidence a resolution may be applied without asking.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ..core import MemoryCore
from ..retrieval.search_index import STOPWORDS_EN, tokenize
from ..storage import ScopeStore
from . import entities as ex
from .base import state
from .words import (
    ABBREVIATIONS,
    ENGLISH_TOOLS,
    GENERIC_HEADS,
    HEAD_NOUNS,
    NAME_BEFORE,
    NOT_COMPONENTS,
    NOT_NAMES,
    STARTERS,
    WEAK_HEADS,
)

# The head noun is looked ahead at, not consumed: in "the worker service" the name is itself a head noun.
_HEAD = re.compile(
    r"(?<![\w/.-])([A-Za-z][\w-]*)(?:'s)?(?=\s+(?:" + "|".join(HEAD_NOUNS) + r")(?:'s)?\b)", re.I
)
_WEAK_HEAD = re.compile(r"(?<![\w/.-])([a-z][\w-]*)(?:'s)?\s+(?:" + "|".join(WEAK_HEADS) + r")\b")
_REF = re.compile(r"(?i:(?:\bPR|\bMR|\bissue|\bticket|\bbug)?\s*#\d+\b)|\b[A-Z][A-Z0-9]+-\d+\b")
_REGION = re.compile(r"\b[a-z]{2,}(?:-[a-z]+)+-\d+[a-z]?\b")
_CODE = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[A-Za-z_]\w*\(\)")
_NUMBER = re.compile(r"(?<![\w.#-])v?\d+(?:[.:]\d+)*(?:ms|s|m|h|d|mb|gb|kb|k|%)?(?![\w#])", re.I)
_CAPITAL = re.compile(r"(?<![\w-])[A-Z][A-Za-z0-9]*(?:[.-][A-Za-z0-9]+)*(?![\w-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|\(\s*)$")
BRANCHES = {"master", "main", "trunk", "develop", "development", "release", "staging"}

# A newer statement that says so: it describes a change, and usually names what it replaced.
_CHANGE = re.compile(
    r"\b(?:now|no longer|not any ?more|anymore|instead(?: of)?|migrated|migrating|moved|switched|switching|"
    r"replaced|replacing|renamed|raised|bumped|upgraded|downgraded|changed|took over|taken over|"
    r"used to(?: be)?|(?:is|are) gone|was|were|deprecated|dropped|deleted|retired|rather than|these days|"
    r"stop (?:using|adding)|from\s+\S+\s+to)\b",
    re.I,
)
_MARKER = re.compile(
    r"\b(?:from(?! now on)|instead of|rather than|no longer|not|replac\w*|stop (?:using|adding)|"
    r"used to be|was|were|took over|calling)\b",
    re.I,
)
# Markers that follow the value they retire ("Bob moved to another team", "3.10 is no longer supported").
_MARKER_AFTER = re.compile(
    r"\b(?:moved to another|is no longer|are no longer|no longer exists|is gone|are gone|"
    r"is deprecated|are deleted|was deleted|is retired|left the team)\b",
    re.I,
)
_OLD_MARK = re.compile(
    r"\b(?:from(?! now on)|used to be|was|were|instead of|rather than|not|no longer(?: \w+)?|replac\w*|"
    r"over from|stop (?:using|adding)|calling)\s+"
    r"(?:the\s+|port\s+|python\s+|node(?:\.js)?\s+)?(\S+)",
    re.I,
)


@dataclass
class Vocabulary:
    """Components and proper names a store's memories have named, learned as memories are written (only ever
    added to: a membership test needs no lock)."""

    components: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)

    def learn(self, texts: Iterable[str]) -> None:
        for text in texts:
            p = _parts(text)
            self.components |= p.heads
            self.names |= p.mid_names


def vocabulary(core: MemoryCore, store: ScopeStore, *, exclude: Collection[str] = ()) -> Vocabulary:
    """The store's learned components and names, read from its memories on first use (but ``exclude``: a
    chunk being written, which learns memory by memory), then kept up to date by the write path."""
    ss = state(core).of(store)
    if ss.vocab is None:
        vocab = Vocabulary()
        vocab.learn(lt.content for k, lt in list(store.summaries.items()) if k not in exclude)
        ss.vocab = vocab
    out: Vocabulary = ss.vocab
    return out


@dataclass(frozen=True)
class Statement:
    """A memory's text read for comparison: whom it is about, what values it states, and whether it says it
    changed something (and from what)."""

    subjects: frozenset[str]
    values: frozenset[str]
    changes: bool
    old_values: frozenset[str]
    negated: bool
    versions: frozenset[tuple[str, str]] = frozenset()
    after_marker: frozenset[str] = frozenset()  # words soon after "no longer", "instead of", "from"…
    owners: frozenset[str] = frozenset()  # values named only as the owner of a part ("the sentry dashboards")
    ports: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Parts:
    """What a text names, independent of any store's vocabulary (computed once a text)."""

    heads: frozenset[str]
    mid_names: frozenset[str]
    words: frozenset[str]  # lower-case words outside paths, for the vocabulary's components
    capitals: frozenset[str]  # capitalised words anywhere, for the vocabulary's names
    idents: frozenset[str]  # paths, references, code names
    numbers: frozenset[str]
    tools: frozenset[str]
    branches: frozenset[str]
    changes: bool
    versions: frozenset[tuple[str, str]]  # (name, number): "Python 3.12", "Node 20"
    old_spans: tuple[str, ...]
    new_spans: tuple[str, ...]
    negated: bool
    after_marker: frozenset[str] = frozenset()
    owners: frozenset[str] = frozenset()  # tools named only as the owner of something else
    possessed: frozenset[str] = frozenset()  # words after "its"/"their": a part of the subject named before
    ports: frozenset[str] = (
        frozenset()
    )  # numbers said to be ports ("port 8080", "127.0.0.1:8080", "exposed on 8080")


# A tool named before one of its parts ("the sentry dashboards", "the redis connection", "a stale poetry lock
# file") says something of that part, not which tool the subject uses.
_OWNED = re.compile(
    r"\s+(?:dashboards?|connections?|clients?|calls?|errors?|exceptions?|lock ?files?|lockfiles?|logs?|docs|"
    r"volumes?|containers?|credentials|console)\b",
    re.I,
)


_PORT = re.compile(
    r"\bports?\s+(\d{2,5})\b|\b(?:localhost|[\d.]{7,15}):(\d{2,5})\b|"
    r"\b(?:exposed|listens|listening|served|answers|reachable|bound)\s+(?:on|at)\s+(?:port\s+)?(\d{4,5})\b",
    re.I,
)
_POSSESSED = re.compile(r"\b(?:its|their)\s+([a-z][\w-]*)", re.I)


_NEG = re.compile(
    r"\b(?:not|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|shouldn't|mustn't|cannot|"
    r"can't|no longer|avoid|disabled?)\b",
    re.I,
)
_NEW_MARK = re.compile(
    r"\bfrom(?! now on)\s+(?:port\s+|node(?:\.js)?\s+|python\s+)?\S+\s+to\s+(?:port\s+|node(?:\.js)?\s+|python\s+)?"
    r"([\w.+-]+)|\b([\w.+-]+)\s+instead of\b|^\s*([A-Z][\w.+-]*)\s+(?:took|has taken) over\b|"
    r"\b(?:moved|switched|migrated|changed|upgraded|bumped|raised)(?: over)? to\s+"
    r"(?:port\s+|node(?:\.js)?\s+|python\s+)?([\w.+-]+)",
    re.I,
)
_OLD_AFTER = re.compile(
    r"(\S+)\s+(?:lockfile\s+|images?\s+)?(?:no longer exists|is gone|are gone|was deleted|"
    r"were deleted|are deleted|is deleted|is deprecated|is retired)",
    re.I,
)


@lru_cache(maxsize=16384)
def _parts(text: str) -> _Parts:
    heads = set()
    for m in _HEAD.finditer(text):
        w = m.group(1).lower()
        if w not in NOT_NAMES and not w.isdigit() and ex.gazetteer_hit(w) is None:
            heads.add(w)
    for m in _WEAK_HEAD.finditer(text):
        w = m.group(1).lower()
        if (
            w not in NOT_NAMES
            and w not in NOT_COMPONENTS
            and w not in HEAD_NOUNS
            and not w.endswith("ed")
            and not w.isdigit()
            and ex.gazetteer_hit(w) is None
            and len(w) > 2
        ):
            heads.add(w)
    # A hyphenated name opening a sentence ("Ml-models targets Python 3.13") names its subject.
    for m in re.finditer(r"(?:^|[.!?;:]\s+)([A-Z][a-z0-9]*(?:-[a-z0-9]+)+)\b", text):
        heads.add(m.group(1).lower())
    mid: set[str] = set()
    capitals: set[str] = set()
    for m in _CAPITAL.finditer(text):
        w = m.group(0)
        if len(w) < 3 or w in ABBREVIATIONS or ex.ERROR.fullmatch(w) or ex.CAMEL.fullmatch(w):
            continue
        capitals.add(w)
        if not _SENTENCE_START.search(text[: m.start()]) and w.lower() not in STOPWORDS_EN:
            mid.add(w)
    idents: set[str] = set()
    for m in ex.PATH.finditer(ex.URL.sub(" ", text)):
        p = ex.clean_path(m.group(0))
        if p and ("/" in p or ("." in p and not p[:1].isupper())):
            idents.add(p.lower())
    idents |= {re.sub(r"\s+", " ", m.group(0).strip().lower()) for m in _REF.finditer(text)}
    idents |= {m.group(0).rstrip("()").lower() for m in _CODE.finditer(text)}
    idents |= {m.group(1).lower() for m in ex.CAMEL.finditer(text)}
    numbers = {
        _port_of(m.group(0).lower().lstrip("v"))
        for m in _NUMBER.finditer(text)
        if not _inside_ref(text, m.start())
    }
    # URLs and cloud regions are values of what they configure, never subjects.
    numbers |= {m.group(0).rstrip(".,;:").lower() for m in ex.URL.finditer(text)}
    numbers |= {m.group(0).lower() for m in _REGION.finditer(text)}
    tools: set[str] = set()
    owning: set[str] = set()
    for m in ex.WORD.finditer(text):
        word = m.group(0).rstrip(".")
        hit = ex.gazetteer_hit(word)
        if hit is not None and hit.entity_type in ("library", "tool") and word not in ENGLISH_TOOLS:
            (owning if _OWNED.match(text, m.start() + len(word)) else tools).add(hit.key)
    branches = set()
    if re.search(
        r"\b(?:branch|branches|target|against|rebase|merge into|merge to|push to|deploy from)\b", text, re.I
    ):
        branches = {w for w in re.findall(r"[a-z]+", text.lower()) if w in BRANCHES}
    versions = {
        (_canonical(m.group(1)), m.group(2))
        for m in _VERSIONED.finditer(text)
        if m.group(1).lower() not in STOPWORDS_EN and m.group(1).lower() != "port"
    }
    changes = bool(_CHANGE.search(text))
    after: set[str] = set()
    spots = [text[m.end() :].split()[:5] for m in _MARKER.finditer(text)]
    spots += [text[: m.start()].split()[-3:] for m in _MARKER_AFTER.finditer(text)]
    for words in spots:
        for w in words:
            w = w.strip(".,;:()'\"`").lower()
            hit = ex.gazetteer_hit(w)
            after |= {w, w.lstrip("v"), _canonical(w)} | ({hit.key} if hit else set())
    spans: tuple[str, ...] = ()
    new_spans: tuple[str, ...] = ()
    if changes or _NEG.search(text):
        spans = tuple(m.group(1).strip(".,;:()") for rx in (_OLD_MARK, _OLD_AFTER) for m in rx.finditer(text))
        new_spans = tuple(
            next(g for g in m.groups() if g).strip(".,;:()").lower() for m in _NEW_MARK.finditer(text)
        )
    return _Parts(
        frozenset(heads),
        frozenset(mid),
        # A folder inside a path ("web/src/admin/store.go") is the path's, not a component named on its own.
        frozenset(re.findall(r"[a-z][\w-]*", ex.PATH.sub(" ", ex.URL.sub(" ", text)).lower())),
        frozenset(capitals),
        frozenset(idents),
        frozenset(numbers),
        frozenset(tools),
        frozenset(branches),
        changes=changes,
        versions=frozenset(versions),
        old_spans=spans,
        new_spans=new_spans,
        negated=bool(_NEG.search(text)),
        after_marker=frozenset(after),
        owners=frozenset(owning - tools),
        possessed=frozenset(m.group(1).lower() for m in _POSSESSED.finditer(text)),
        ports=frozenset(next(g for g in m.groups() if g) for m in _PORT.finditer(text)),
    )


def read(text: str, vocab: Vocabulary | None = None) -> Statement:
    p = _parts(text)
    names = {_canonical(c) for c in p.capitals if vocab is not None and c in vocab.names}
    # What a change statement says it changed to is a value even when nothing else names it ("… to uvu").
    values = (
        set(p.numbers)
        | set(p.tools)
        | set(p.owners)
        | set(p.branches)
        | names
        | {w for w in p.new_spans if w not in STOPWORDS_EN and w not in p.heads}
    )
    subjects = set(p.heads) | set(p.idents)
    if vocab is not None:
        # "Ml-models runs its tooling": the tooling of the subject named, not the component called tooling.
        named = {w for w in p.words if w in vocab.components}
        owner_named = bool(p.heads or named - p.possessed)
        subjects |= {w for w in named if not (owner_named and w in p.possessed)}
    subjects -= values
    old: set[str] = set()
    for span in p.old_spans:
        w = span.lower()
        if w in values or w.lstrip("v") in values:
            old.add(w.lstrip("v"))
        elif (hit := ex.gazetteer_hit(w)) is not None and hit.key in values:
            old.add(hit.key)
    return Statement(
        frozenset(subjects),
        frozenset(values),
        p.changes,
        frozenset(old),
        p.negated,
        p.versions,
        p.after_marker,
        p.owners,
        p.ports,
    )


def negation_word(word: str) -> bool:
    """A word that negates or states a change ("not", "no", "longer", "never", "disabled", "now")."""
    w = word.lower().strip(".,;:()")
    return bool(_NEG.fullmatch(w) or _CHANGE.fullmatch(w)) or w in ("no", "longer", "do", "does", "did")


def _port_of(number: str) -> str:
    """127.0.0.1:8080 and 8080 are one port."""
    return number.rsplit(":", 1)[1] if re.fullmatch(r"\d+(?:\.\d+){3}:\d+", number) else number


def _canonical(name: str) -> str:
    """Node.js and Node, PostgreSQL and Postgres: one value."""
    w = name.lower()
    hit = ex.gazetteer_hit(w.removesuffix(".js"))
    return hit.key if hit is not None else w


def _inside_ref(text: str, at: int) -> bool:
    """A number that is part of a reference (#123, ABC-12) or of a path names a subject, not a value."""
    before = text[max(0, at - 1) : at]
    return before in ("#", "-", "/", "_")


@dataclass(frozen=True)
class Comparison:
    """How two statements relate: `same_subject` (None: no identifier to tell), the values only one side states,
    and, for a change, whether the newer names the older's value (strong evidence of a supersession)."""

    same_subject: bool | None
    why_subject: str
    conflict: bool
    only_old: frozenset[str]
    only_new: frozenset[str]
    names_old_value: bool
    functional: bool = False  # the values differ within one functional category (two test frameworks…)
    numbers: bool = False  # the values that differ are numbers (a port, a version, a limit)


def compare(old: Statement, new: Statement) -> Comparison:
    a_only, b_only = old.subjects - new.subjects, new.subjects - old.subjects
    shared = old.subjects & new.subjects
    if a_only and b_only and not _same_component(a_only, b_only):
        same: bool | None = False
        why = f"different subjects: {sorted(a_only)[:2]} vs {sorted(b_only)[:2]}"
    elif shared:
        same, why = True, f"same subject: {sorted(shared)[:2]}"
    else:
        same, why = None, "no identifier names the subject"
    old_named = set(new.old_values)
    if new.changes or new.negated:
        # A change statement that also names, just after "no longer", "instead of", "from"…, a value the older
        # one states names what it changed from ("we no longer deploy it with Render; it goes out through …").
        fresh = _kinds(new.values - old.values)
        old_named |= {v for v in old.values & new.values & new.after_marker if _kinds([v]) & fresh}
    new_vals = new.values - old_named
    only_old, only_new = old.values - new_vals, new_vals - old.values
    # A value named only as the owner of a part differs without saying anything else of the subject.
    stated_old, stated_new = only_old - old.owners, only_new - new.owners
    ka, kb = _kinds(stated_old), _kinds(stated_new)
    kinds = ka & kb
    cats_a, cats_b = ka & ex.FUNCTIONAL, kb & ex.FUNCTIONAL
    if cats_a and cats_b and not cats_a & cats_b:
        kinds = set()  # a package manager and a test framework: two attributes, not one changed
    conflict = bool(stated_old and stated_new and kinds)
    names_old = bool(conflict and new.changes and only_old & old_named)
    # Two versions of one named thing (Python 3.10 / Python 3.12) are one attribute whatever else is said.
    va, vb = dict(old.versions), dict(new.versions)
    versioned = any(n in vb and va[n] != vb[n] for n in va)
    # Two ports of one subject, however each is said ("answers at 127.0.0.1:6367", "publishes port 5405").
    ported = bool(stated_old & old.ports and stated_new & new.ports)
    return Comparison(
        same,
        why,
        conflict,
        frozenset(only_old),
        frozenset(only_new),
        names_old,
        functional=bool(kinds & ex.FUNCTIONAL) or (conflict and (versioned or ported)),
        numbers="number" in kinds,
    )


_COMPONENT = re.compile(r"[a-z][a-z0-9-]*")


def _same_component(a: frozenset[str], b: frozenset[str]) -> bool:
    """A path and the module it sits in (src/billing/x.py and billing) are one subject, not two."""

    def within(x: str, y: str) -> bool:
        return (
            x == y or ("/" in y and x in y.split("/")) or ("/" in y and x in y.rsplit("/", 1)[-1].split("."))
        )

    def covered(xs: frozenset[str], ys: frozenset[str], names_only: bool = False) -> bool:
        return all(
            any(within(x, y) or within(y, x) for y in ys)
            for x in xs
            if not names_only or _COMPONENT.fullmatch(x)
        )

    # One side's subjects all sit in the other's, and no component either side names is left over: "the
    # scheduler service … in web/src/admin/store.go" is not the admin module.
    return (covered(a, b) or covered(b, a)) and covered(a, b, True) and covered(b, a, True)


def _kinds(values: Iterable[str]) -> set[str]:
    """What sort of value each is: a number, a branch, a tool of a functional category (one test framework,
    one package manager… a project), or a name (a tool, a product, a person)."""
    out: set[str] = set()
    for v in values:
        if re.fullmatch(r"[\d.:]+[a-z%]*", v):
            out.add("number")
        elif "://" in v:
            out.add("url")
        elif _REGION.fullmatch(v):
            out.add("region")
        elif v in BRANCHES:
            out.add("branch")
        else:
            out.add("name")
            hit = ex.GAZETTEER.get(v)
            if hit is not None and hit[1]:
                out.add(hit[1])
    return out


_VERSIONED = re.compile(r"\b([A-Za-z][\w.+-]*)\s+v?(\d+(?:\.\d+)+|\d+)\b")
_SLOT_WORD = re.compile(r"[^\s]+")


def subject_slots(
    old_text: str, new_text: str, values: frozenset[str], vocab: Vocabulary | None = None
) -> list[tuple[str, str]]:
    """Where two statements of one shape differ in a name that is no value: the slot that names their subject
    ("Deploys of shipping go out through Render" / "Deploys of archive go out through Render"). Empty unless
    most words line up (paraphrases differ everywhere and say nothing this way)."""
    shape = _shape(old_text, new_text)
    if shape is None:
        return []
    ta, tb, ops = shape
    slots = []
    for op, i1, i2, j1, j2 in ops:
        if op != "replace":
            continue
        # The word before a slot helps tell a name from a verb: "deploys of archive" / "deploys of quota".
        xa, xb = ta[max(0, i1 - 1) : i2], tb[max(0, j1 - 1) : j2]
        known = vocab.components if vocab is not None else set()
        if any(any(v in w.lower() for v in values) and w.lower() not in known for w in xa + xb):
            continue
        if _names_something(xa, vocab, i1 > 0) and _names_something(xb, vocab, j1 > 0):
            slots.append((" ".join(xa[1 if i1 else 0 :]), " ".join(xb[1 if j1 else 0 :])))
    return slots


def _slot_words(text: str) -> list[str]:
    """The words of a statement; a sentence's first word in lower case when it is an ordinary opener ("Run",
    "Tests", "We"), whose capital says nothing, and kept when it may be a name ("Geo's port changed…")."""
    out, start = [], True
    for raw in _SLOT_WORD.findall(text):
        w = raw.strip(".,;:()'\"`")
        out.append(w.lower() if start and w.lower() in STARTERS else w)
        start = raw.endswith((".", "!", "?", ":", ";"))
    return out


def _names_something(words: list[str], vocab: Vocabulary | None, context: bool) -> bool:
    """A slot side that holds a name: a component the store knows, a capitalised or compound word, a word after
    "of"/"for"/"the"…; not a verb or a change word ("listens on" / "no longer uses" is a change of wording, not
    of subject). With ``context`` the first word is the one before the slot."""
    before = words[0].lower() if context and words else ""
    for i, w in enumerate(words[1:] if context else words):
        lw = w.lower()
        if (
            i == 0
            and before in NAME_BEFORE
            and lw not in STOPWORDS_EN
            and lw not in GENERIC_HEADS
            and not _CHANGE.fullmatch(lw)
            and not _NEG.fullmatch(lw)
            and lw.isalpha()
        ):
            return True
        if not lw or lw in STOPWORDS_EN or lw in GENERIC_HEADS or _CHANGE.fullmatch(lw) or _NEG.fullmatch(lw):
            continue
        if (
            (vocab is not None and lw in vocab.components)
            or lw in HEAD_NOUNS
            or w[:1].isupper()
            or any(c in w for c in "-_/")
        ):
            return True
    return False


def changed_slots(old_text: str, new_text: str) -> list[tuple[str, str]] | None:
    """Every slot where two statements of one shape differ, in lower case (None when they are not of one shape)."""
    shape = _shape(old_text, new_text)
    if shape is None:
        return None
    ta, tb, ops = shape
    return [
        (" ".join(ta[i1:i2]).lower(), " ".join(tb[j1:j2]).lower())
        for op, i1, i2, j1, j2 in ops
        if op != "equal"
    ]


@lru_cache(maxsize=1024)
def _shape(
    old_text: str, new_text: str
) -> tuple[list[str], list[str], list[tuple[str, int, int, int, int]]] | None:
    """The two statements' words lined up (`_slot_words`, compared in lower case) and the edits between them, once
    a pair: `judge` asks for the changed slots and for the subject slots of the same pair. None unless most words
    line up in order (SAME_SHAPE)."""
    ta, tb = _slot_words(old_text), _slot_words(new_text)
    la, lb = [w.lower() for w in ta], [w.lower() for w in tb]
    if not la or not lb:
        return None
    sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
    if sum(b.size for b in sm.get_matching_blocks()) < SAME_SHAPE * min(len(la), len(lb)):
        return None
    return ta, tb, [(str(op), i1, i2, j1, j2) for op, i1, i2, j1, j2 in sm.get_opcodes()]


def is_path(word: str) -> bool:
    return bool(ex.PATH.fullmatch(word)) and ("/" in word or "." in word)


SAME_SHAPE = 0.45  # share of the shorter statement's words that line up with the other's in order


_PURPOSE = re.compile(
    r"\bfor (?:the |our |its |their |a |an )?([a-z][\w-]*(?: [a-z][\w-]*){0,2}?)"
    r"(?= in | on | at | to | of | because| since| after| so | when| while|[,.;:)]|$)",
    re.I,
)


_NOT_PURPOSES = frozenset(
    {"us", "me", "you", "them", "it", "now", "example", "instance", "good", "years", "months"}
)


# A procedure's occasion is its purpose: "before deploying billing, run …" is for deploying.
_OCCASION = re.compile(r"\b(?:before|after|when|while)\s+([a-z]+ing)\b", re.I)


def purposes(text: str) -> frozenset[str]:
    """What a statement says a thing is for ("uses redis for the rate limiter": "rate limiter"; "before
    deploying, run …": "deploying"), lower case."""
    found = [m.group(1).lower() for m in _PURPOSE.finditer(text)]
    found += [m.group(1).lower() for m in _OCCASION.finditer(text)]
    return frozenset(p for p in found if p not in _NOT_PURPOSES)


# An explicit change: a verb of changing with what it changed from or to.
_REPLACED = re.compile(
    r"\b(?:switched|migrated|moved|replaced|upgraded|downgraded|bumped|raised|renamed|changed|swapped)\b"
    r"[^.;]*?\b(?:from|to|with|by|for)\b",
    re.I,
)


def says_replaced(text: str) -> bool:
    """Does the text say in so many words that something was replaced ("migrated the tests from jest to
    vitest"), not merely use a word that can mark a change ("the cause was a stale lock file")?"""
    return bool(_REPLACED.search(text))


def _one_purpose(p: str, q: str) -> bool:
    """One thing named twice: the same head noun (by its stem: "limiter", "limiting") and no two different
    modifiers ("the dead letter queue" and "the queue" are one; "timezone handling" and "session handling", or
    "cache warming" and "build cache", are two)."""
    *mp, hp = [w for w in p.split() if w not in STOPWORDS_EN] or [p]
    *mq, hq = [w for w in q.split() if w not in STOPWORDS_EN] or [q]
    if hp[:5] != hq[:5]:
        return False
    return not mp or not mq or bool(set(mp) & set(mq))


def other_purposes(old_text: str, new_text: str) -> tuple[str, str] | None:
    """The two purposes, when each statement names what its thing is for and no purpose of one is a purpose of
    the other ("for the rate limiter" and "for the token refresh"): two attributes of one subject, not one value
    changed."""
    pa, pb = purposes(old_text), purposes(new_text)
    if not pa or not pb:
        return None
    if any(_one_purpose(p, q) for p in pa for q in pb):
        return None
    return sorted(pa)[0], sorted(pb)[0]


def same_attribute(old_text: str, new_text: str, old: Statement, new: Statement) -> float:
    """How much two statements say the same sort of thing of their subject: the Jaccard of their predicates."""
    pa, pb = predicate(old_text, old), predicate(new_text, new)
    return len(pa & pb) / len(pa | pb) if pa and pb else 0.0


def predicate(text: str, st: Statement) -> set[str]:
    """The words of a statement that say what it says of its subject: no subject, value, head noun or
    stopword (stems, as the search index has them)."""
    drop = {w for x in st.subjects | st.values for w in re.findall(r"[a-z0-9]+", x)} | set(HEAD_NOUNS)
    return {t for t in tokenize(text) if t not in drop and not t.isdigit()} - {
        tokenize(w)[0] for w in drop if tokenize(w)
    }
