"""The knowledge graph's mirror: the graph as recall reads it, in memory (`GraphMirror`), loaded from the graph
tables or from its snapshot beside the store, and the rules its shape depends on (co-mentions, the traversal's
neighbour bound). `graph_tables.GraphTables` (``store.graph``) holds it and keeps it in step with its writes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from ..retrieval.ranking import best_first
from .values import text_array, text_lines, write_private

log = logging.getLogger(__name__)
CO_MENTION_WEIGHT = 0.3
STRENGTHEN = 0.1  # weight +0.1, confidence +0.05 per new piece of evidence
TRAVERSE_MIN_WEIGHT = 0.2
NEAR_KEEP = (
    64  # neighbours kept per entity for traversal (which takes TRAVERSE_MAX_NEIGHBOURS beside the seeds)
)
HUB_RELATIONS = 500  # an entity with this many relations has its neighbours worked out ahead (`warm_hubs`)
SUBJECT_TYPES = ("project", "person")  # "this project" / "user": hubs that would link everything
CONFLICT_TYPES = ("uses", "replaces", "causes", "contradicts")
CO_MENTION_MAX = (
    6  # a memory links its first six entities that are not commands: a long note makes no clique of dozens
)
CO_PREFIX = "co_"  # a co-mention's key: derived, never a row (a stored relation's key is a bare hash)


def short_hash(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:20]


def co_key(a: str, b: str) -> str:
    """The key of the co-mention link from ``a`` to ``b`` (a memory names ``a`` first). A pair named in both orders
    has two links: recall's graph step takes the stronger (a link counting both orders reordered LoCoMo's
    answers: docs/benchmarks.md)."""
    return CO_PREFIX + short_hash("co", a, b)


def co_weight(n: int) -> float:
    """A co-mention's weight when ``n`` memories name both: as a stored relation strengthens (+0.1 a memory)."""
    return min(1.0, CO_MENTION_WEIGHT + STRENGTHEN * (n - 1))


def co_mention_core(ekeys: Sequence[str], types: dict[str, str]) -> list[str]:
    """The entities of one memory (its list, in order) that it links to each other: the first CO_MENTION_MAX that
    are known entities and not commands."""
    return [k for k in dict.fromkeys(ekeys) if types.get(k, "command") != "command"][:CO_MENTION_MAX]


class GraphSource(Protocol):
    """What the mirror's loading and snapshot need of a store (`ScopeStore`)."""

    graph_version: int
    database: str

    def write1(self, sql: str, params: Any = None) -> Any: ...

    def graph_generation(self) -> str: ...

    def side_snapshot_path(self, part: str, suffix: str = "json") -> Path | None: ...


def index_name(names: dict[str, set[str]], nkey: str, ekey: str, etype: str) -> None:
    if etype in SUBJECT_TYPES:
        return
    names.setdefault(nkey, set()).add(ekey)
    if etype == "file" and "/" in nkey:
        names.setdefault(nkey.rsplit("/", 1)[-1], set()).add(ekey)


class GraphMirror:
    """The graph as recall reads it, in memory: entity names and types, which memories mention each entity,
    and the live relations with their weights: the stored ones and the co-mentions derived from the memories'
    entity lists (`add_memory`). Loaded once per store from three compact strings (the SDK's CBOR decoder would
    otherwise decode every row field by field) and kept in step by every write here; maintenance that rewrites
    the graph wholesale (merging, pruning, erasing) drops it for a reload."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: dict[str, set[str]] = {}  # name_key (and file basename) → entity keys
        self.types: dict[str, str] = {}  # entity key → entity_type
        self.mentioned_by: dict[str, dict[str, None]] = {}  # entity key → memory keys, oldest first
        self.rels: dict[str, tuple[str, str, float]] = {}  # live relation key → (in, out, weight)
        self.touching: dict[str, set[str]] = {}  # entity key → live relation keys at either end
        # entity key → the live relations at either end of a conflict-prone type (CONFLICT_TYPES): a few of an
        # entity's relations, where `touching` holds thousands for a popular one (its co-mentions)
        self.conflicting: dict[str, set[str]] = {}
        self.version = 0  # the store's graph_version this was loaded at
        # memory key → its entity list, for a memory read from the store before all its entities were (a new
        # memory's row is written before its entities): its co-mentions wait for `add_memory`
        self.pending: dict[str, list[str]] = {}
        # entity key → its first NEAR_KEEP traversal neighbours (other entity, 0.5 × weight), strongest first: a
        # popular entity has thousands of relations, and recall would otherwise walk them all for every query
        # naming it (kept whole, a large store's hubs would hold hundreds of thousands of neighbours).
        # Any change to entities or relations empties it (mentions do not enter it).
        self._near: dict[str, list[tuple[str, float]]] = {}

    def add_entity(self, ekey: str, etype: str, nkey: str) -> None:
        if self.types.get(ekey) != etype:
            self._near.clear()
        self.types[ekey] = etype
        index_name(self.names, nkey, ekey, etype)

    def near(self, ekey: str, wanted: int = NEAR_KEEP) -> list[tuple[str, float]]:
        """One hop from ``ekey`` along live relations of weight >= TRAVERSE_MIN_WEIGHT that touch no subject
        hub: (other entity, 0.5 × weight), best first; at least the first ``wanted`` of them (all when there are
        fewer). Caller holds the lock."""
        got = self._near.get(ekey)
        if got is not None and (len(got) < NEAR_KEEP or wanted <= NEAR_KEEP):  # whole, or long enough
            return got
        best: dict[str, float] = {}
        for rkey in self.touching.get(ekey, ()):
            a, b, w = self.rels[rkey]
            if (
                w < TRAVERSE_MIN_WEIGHT
                or self.types.get(a) in SUBJECT_TYPES
                or self.types.get(b) in SUBJECT_TYPES
            ):
                continue
            other = b if a == ekey else a
            best[other] = max(best.get(other, 0.0), 0.5 * w)
        found = best_first(list(best.items()))
        self._near[ekey] = found[:NEAR_KEEP]
        return found

    def add_memory(self, memory: str, ekeys: Sequence[str]) -> None:
        """A memory's entity list (in order; its entities already added): its mentions, and a co-mention from each
        entity of its `co_mention_core` to each it names after it, strengthened by each further memory naming
        them in that order. A memory already taken changes nothing (its list is written once)."""
        if not ekeys or (memory in self.mentioned_by.get(ekeys[0], ()) and memory not in self.pending):
            return
        self.pending.pop(memory, None)
        for ekey in ekeys:
            self.mentioned_by.setdefault(ekey, {})[memory] = None
        core = co_mention_core(ekeys, self.types)
        for i, a in enumerate(core):
            for b in core[i + 1 :]:
                k = co_key(a, b)
                cur = self.rels.get(k)
                weight = CO_MENTION_WEIGHT if cur is None else min(1.0, cur[2] + STRENGTHEN)
                self.set_relation(k, a, b, weight, True)

    def set_relation(
        self, rkey: str, a: str, b: str, weight: float, live: bool, *, conflict: bool = False
    ) -> None:
        """A relation written (``live``) or ended; ``conflict``: its type is conflict-prone (a relation's type is
        part of its key, so a later write of it may leave this out)."""
        self._near.pop(a, None)
        self._near.pop(b, None)
        if not live:
            self.rels.pop(rkey, None)
            for end in (a, b):
                self.touching.get(end, set()).discard(rkey)
                self.conflicting.get(end, set()).discard(rkey)
            return
        self.rels[rkey] = (a, b, weight)
        self.touching.setdefault(a, set()).add(rkey)
        self.touching.setdefault(b, set()).add(rkey)
        if conflict:
            self.conflicting.setdefault(a, set()).add(rkey)
            self.conflicting.setdefault(b, set()).add(rkey)


_LOAD = """RETURN {
  e: array::join((SELECT VALUE record::id(id) + ' ' + entity_type + ' ' + name_key FROM entity), '\n'),
  m: array::join((SELECT VALUE record::id(id) + ' ' + array::join(entities.map(|$e| record::id($e)), ' ')
                  FROM memory WHERE array::len(entities ?? []) > 0), '\n'),
  r: array::join((SELECT VALUE record::id(id) + ' ' + record::id(in) + ' ' + record::id(out) + ' ' + <string>weight
                  + ' ' + relation_type FROM relates_to WHERE invalid_at IS NONE), '\n')
};"""


def load_mirror(store: GraphSource) -> GraphMirror:
    g = GraphMirror()
    g.version = store.graph_version
    got = store.write1(_LOAD) or {}
    for line in (got.get("e") or "").split("\n"):
        parts = line.split(" ", 2)
        if len(parts) == 3:
            g.add_entity(parts[0], parts[1], parts[2])
    # Sorted by memory id (a ULID), so "oldest first" holds after a reload too, and traversal keeps the newest
    # TRAVERSE_MAX_MENTIONS of a busy entity. The co-mentions are counted first and set once each.
    pairs: dict[tuple[str, str], int] = {}
    for line in sorted((got.get("m") or "").split("\n")):
        memory, *ekeys = line.split(" ")
        if not ekeys:
            continue
        for ekey in ekeys:
            g.mentioned_by.setdefault(ekey, {})[memory] = None
        if any(k not in g.types for k in ekeys):
            g.pending[memory] = ekeys
            continue
        core = co_mention_core(ekeys, g.types)
        for i, a in enumerate(core):
            for b in core[i + 1 :]:
                pairs[a, b] = pairs.get((a, b), 0) + 1
    for (a, b), n in pairs.items():
        g.set_relation(co_key(a, b), a, b, co_weight(n), True)
    for line in (got.get("r") or "").split("\n"):
        parts = line.split(" ")
        if len(parts) == 5:
            g.set_relation(
                parts[0],
                parts[1],
                parts[2],
                float(parts[3].rstrip("f")),
                True,
                conflict=parts[4] in CONFLICT_TYPES,
            )
    return g


# The graph snapshot's format: numpy arrays in an .npz, keys written once and referred to by int32 position, the
# conflict-prone relations flagged, co-mentions one per pair of entities. A file of another version is ignored and
# the graph read from the store once (the versions' history: docs/storage.md, "The graph snapshot").
GRAPH_SNAPSHOT_VERSION = 5


def snapshot_path(store: GraphSource) -> Path | None:
    return store.side_snapshot_path("graph", "npz")


def save_snapshot(store: GraphSource, g: GraphMirror | None) -> None:
    """Write the graph mirror beside the store (at close, with the vector snapshot), tagged with the graph's
    change count: the next start reads it instead of every edge while the count still matches."""
    path = snapshot_path(store)
    if g is None or path is None or g.version != store.graph_version:
        return  # dropped for a reload (merge, prune, erasure): the old file no longer matches the count
    gen = store.graph_generation()
    if _written_at(path) == gen:
        return  # the file already holds this graph (nothing changed it since it was read or written)
    with g.lock:
        ents = sorted(
            set(g.types)
            | set(g.mentioned_by)
            | {e for a, b, _w in g.rels.values() for e in (a, b)}
            | {e for v in g.names.values() for e in v}
        )
        at = {e: i for i, e in enumerate(ents)}
        kinds = sorted(set(g.types.values()))
        kind_at = {k: i for i, k in enumerate(kinds)}
        mems = sorted({m for ms in g.mentioned_by.values() for m in ms})
        mem_at = {m: i for i, m in enumerate(mems)}
        rkeys = list(g.rels)
        conflict = {k for ks in g.conflicting.values() for k in ks}
        if any("\n" in k for k in itertools.chain(ents, mems, rkeys)):
            log.warning("graph snapshot of %s not written: a key holds a newline", store.database)
            return  # derived ids never do; the next start reads the store
        mentioned = list(g.mentioned_by.items())
        arrays = {
            "version": np.array(GRAPH_SNAPSHOT_VERSION),
            "generation": text_array([gen]),
            # the entity names (free text) and kinds stay JSON: small, and a name may hold any character
            "meta": text_array(
                [
                    json.dumps(
                        {"kinds": kinds, "names": list(g.names)}, ensure_ascii=False, separators=(",", ":")
                    )
                ]
            ),
            "n_end": np.cumsum([len(v) for v in g.names.values()], dtype=np.int64),
            "n_entity": np.array([at[e] for v in g.names.values() for e in sorted(v)], dtype=np.int32),
            "entities": text_array(ents),
            "types": np.array([kind_at[g.types[e]] if e in g.types else -1 for e in ents], dtype=np.int32),
            "memories": text_array(mems),
            # each entity's mentions oldest first, as the mirror holds them: entity, then its memories' run
            "m_entity": np.array([at[e] for e, _ms in mentioned], dtype=np.int32),
            "m_end": np.cumsum([len(ms) for _e, ms in mentioned], dtype=np.int64),
            "m_memory": np.array([mem_at[m] for _e, ms in mentioned for m in ms], dtype=np.int32),
            "r_keys": text_array(rkeys),
            "r_a": np.array([at[g.rels[k][0]] for k in rkeys], dtype=np.int32),
            "r_b": np.array([at[g.rels[k][1]] for k in rkeys], dtype=np.int32),
            "r_w": np.array([g.rels[k][2] for k in rkeys], dtype=np.float64),
            "r_conflict": np.array([k in conflict for k in rkeys], dtype=np.bool_),
        }
    write_private(path, lambda fh: np.savez(fh, **cast(dict[str, Any], arrays)))
    old = store.side_snapshot_path("graph")  # the JSON format of version 2, not read
    if old is not None:
        old.unlink(missing_ok=True)


def _begins(ends: list[int]) -> list[int]:
    """Where each run starts, given where each ends (runs laid end to end from 0)."""
    return [0, *ends[:-1]] if ends else []


def _touching(ents: list[str], rkeys: list[str], ra: np.ndarray, rb: np.ndarray) -> dict[str, set[str]]:
    """What set_relation builds for these relations (entity -> relation keys at either end), by grouping the
    ends sorted: a set per entity from one slice instead of two dictionary updates per relation."""
    if not len(rkeys):
        return {}
    ends = np.concatenate([ra, rb])
    order = np.argsort(ends, kind="stable")
    ends = ends[order]
    starts = np.flatnonzero(np.r_[True, ends[1:] != ends[:-1]])
    stops = [*starts[1:].tolist(), len(ends)]
    keys = np.array(rkeys, dtype=object)[order % len(rkeys)].tolist()
    return {
        ents[e]: set(keys[a:b]) for e, a, b in zip(ends[starts].tolist(), starts.tolist(), stops, strict=True)
    }


def _written_at(path: Any) -> str | None:
    """The graph generation the snapshot at ``path`` was written at (None: absent, unreadable, an older version)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["version"]) != GRAPH_SNAPSHOT_VERSION:
                return None
            gens = text_lines(z["generation"])
            return gens[0] if len(gens) == 1 else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_snapshot(store: GraphSource) -> GraphMirror | None:
    path = snapshot_path(store)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["version"]) != GRAPH_SNAPSHOT_VERSION or text_lines(z["generation"]) != [
                store.graph_generation()
            ]:
                return None
            meta = json.loads(z["meta"].tobytes().decode())
            ents, mems, rkeys = text_lines(z["entities"]), text_lines(z["memories"]), text_lines(z["r_keys"])
            types, m_entity, m_end, m_memory, n_end, n_entity = (
                z[k].tolist() for k in ("types", "m_entity", "m_end", "m_memory", "n_end", "n_entity")
            )
            ra, rb, r_w, r_conflict = z["r_a"], z["r_b"], z["r_w"].tolist(), z["r_conflict"]
        kinds = meta["kinds"]
        g = GraphMirror()
        g.version = store.graph_version
        g.types = {e: kinds[t] for e, t in zip(ents, types, strict=True) if t >= 0}
        named = [ents[i] for i in n_entity]
        g.names = {
            n: set(named[b:end]) for n, b, end in zip(meta["names"], _begins(n_end), n_end, strict=True)
        }
        mentions = [mems[i] for i in m_memory]
        g.mentioned_by = {
            ents[e]: dict.fromkeys(mentions[b:end])
            for e, b, end in zip(m_entity, _begins(m_end), m_end, strict=True)
        }
        a_keys, b_keys = [ents[i] for i in ra.tolist()], [ents[i] for i in rb.tolist()]
        g.rels = dict(zip(rkeys, zip(a_keys, b_keys, r_w, strict=True), strict=True))
        g.touching = _touching(ents, rkeys, ra, rb)
        g.conflicting = _touching(
            ents,
            [k for k, c in zip(rkeys, r_conflict.tolist(), strict=True) if c],
            ra[r_conflict],
            rb[r_conflict],
        )
        return g
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        log.warning("graph snapshot %s unreadable, reading the store: %s", path, exc)
        return None


def warm_hubs(g: GraphMirror, before_each: Callable[[], object] | None = None) -> int:
    """Work out the traversal neighbours of every hub (HUB_RELATIONS relations or more) ahead of the recalls
    that name one: a hub's first traversal walks all its relations (thousands in a large store), which would
    double a recall's graph step. One hub at a time under the lock, each after
    ``before_each`` (the daemon: once no recall runs, so the first recall after a start, which built the
    mirror, does not share the GIL with this). Returns how many."""
    with g.lock:
        hubs = sorted(
            (e for e, rels in g.touching.items() if len(rels) >= HUB_RELATIONS),
            key=lambda e: -len(g.touching[e]),
        )
    done = 0
    for ekey in hubs:
        if before_each is not None:
            before_each()
        with g.lock:
            if ekey not in g._near:
                g.near(ekey)
                done += 1
    return done
