"""Loading a store's memory mirror and saving it beside the store.

At open the mirror comes from the snapshot (`<store>.<ns>.<db>.vectors.npz`) when the store's memory change
counter still matches the one it was taken at, otherwise from every row of the database. The full rows a
snapshot lacks are read in bulk afterwards (`fill_rows`, in the background in the daemon). Derived data:
deleting a snapshot only slows one start.
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..collector import paused_collector
from ..retrieval.search_index import Postings, SearchIndex
from .database import Database
from .engine import works_in_background
from .locks import SNAPSHOT_WRITE, OrderedLock
from .mirror import MemorySummary
from .row_mirror import FILL_QUERY, from_json_row
from .values import MEMORY_FIELDS, VECTOR_DTYPE, key_of, plain, record, text_array, text_lines, write_private

log = logging.getLogger(__name__)
# 3: no per-vector sums (version 2 validated each vector against the database's sum of its floats; a vector is
# now read back as one bytes value, cheap enough to read them all when the snapshot is out of date).
# 4: the memory summaries zlib-compressed, an indexed text equal to the content not written twice (~0.8 KB a memory).
# 5: the full rows (row_mirror.py) in a blob of their own, held undecoded until a recall asks for one.
# 6: the vectors in half precision, as the store keeps them (encode_vector): 769 B a memory instead of 1,536.
SNAPSHOT_VERSION = 6
LIGHT_FIELDS = (
    "id, content, memory_type, tags, importance, access_count, half_life_days, status, pinned, "
    "last_accessed_at, created_at, session_id, episode_id, content_hash, embedding, search_text"
)


def _read_postings(z: Any) -> Postings | None:
    """The BM25 postings saved with the snapshot (absent in one written before they were), checked by the index."""
    if "p_terms" not in z.files:
        return None
    return Postings(
        analyser=bytes(z["p_analyser"]).decode(),
        terms=text_lines(z["p_terms"]),
        offsets=z["p_offsets"],
        slots=z["p_slots"],
        tfs=z["p_tfs"],
        doc_len=z["p_doc_len"],
    )


class Snapshots:
    """The mirror of one store: loaded at open or on demand, saved at close (and the other in-process mirrors'
    snapshots with it: `writers`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.write_lock = OrderedLock(SNAPSHOT_WRITE, "Snapshots.write_lock", reentrant=False)
        # Other in-process mirrors of this store (the organise layer's graph) that save themselves with the
        # vector snapshot, at close: name → writer.
        self.writers: dict[str, Callable[[], None]] = {}

    def side_path(self, part: str, suffix: str = "json") -> Path | None:
        """Where a mirror kept by another module (``part``: the graph) is saved beside this store."""
        db = self.db
        path = db.conn.path
        return (
            None
            if path is None
            else path.parent / f"{path.name}.{db.namespace}.{db.database}.{part}.{suffix}"
        )

    def reload(self) -> None:
        with paused_collector():
            self._reload()

    def _reload(self) -> None:
        db = self.db
        m = db.mirror
        m.rows.clear()
        # Whatever made this reload (a console write, a redaction pass) may have changed the graph too: the
        # organise layer's graph mirror reloads from the database, and is not saved as a snapshot before.
        db.graph_version += 1
        gen = db.generation()
        if self.load(gen):
            self.fill_rows_later()  # a snapshot written before it held rows, or with some dropped
            return
        # The snapshot is out of date (or absent): every row, its vector included, from the database. A vector is
        # one bytes value (schema 006), so this is a bulk read, not 384 floats decoded one by one.
        rows = (
            db.write1(f"SELECT {LIGHT_FIELDS} FROM memory WHERE status NOT IN ['forgotten', 'superseded']")
            or []
        )
        with m.lock:
            m.index = SearchIndex(m.dim)
            m.summaries.clear()
            m.by_hash.clear()
            m.rows.clear()
            for row in rows:
                m.put(row)
        if len(rows) >= 1000:  # worth writing now rather than only at close (a crash would repeat this)
            self.save()
        self.fill_rows_later()

    def fill_rows(self, chunk: int = 500) -> int:
        """Read the rows the row mirror lacks (an open without a snapshot of them, a write that dropped some), in
        bulk as JSON. Returns how many were read."""
        db = self.db
        m = db.mirror
        with m.lock:
            todo = m.rows.missing(m.summaries)
        for i in range(0, len(todo), chunk):
            keys = m.rows.missing(todo[i : i + chunk])  # a write may have put some meanwhile
            if not keys:
                continue
            with db.conn.lock:  # read and held under the lock: no write can come between the two
                text = (
                    db.conn.run(db.namespace, db.database, FILL_QUERY, {"ids": [record(k) for k in keys]})[-1]
                    or ""
                )
                again = []
                for line in text.split("\n") if text else []:
                    row = from_json_row(json.loads(line))
                    if row is None:  # metadata that may hold datetimes: read the ordinary way
                        again.append(json.loads(line)[0])
                    elif row["key"] in m.summaries:
                        m.rows.put(row.pop("key"), row)
                if again:
                    got = db.conn.run(
                        db.namespace,
                        db.database,
                        f"SELECT {MEMORY_FIELDS} FROM $ids",
                        {"ids": [record(k) for k in again]},
                    )[-1]
                    for r in got or []:
                        if key_of(r["id"]) in m.summaries:
                            m.rows.put(key_of(r["id"]), plain(r))
        return len(todo)

    def fill_rows_later(self) -> None:
        """In the daemon, read the rows the row mirror lacks in a background thread (see `use_engine_thread`)."""
        db = self.db
        m = db.mirror
        if not works_in_background() or m.rows.filling:
            return
        with m.lock:
            if len(m.rows) >= len(m.summaries):
                return
            m.rows.filling = True

        def run() -> None:
            try:
                self.fill_rows(chunk=200)
            except Exception as exc:  # noqa: BLE001 - a closed store; recall reads what is missing itself
                log.info("row mirror of %s/%s not filled: %s", db.namespace, db.database, exc)
            finally:
                m.rows.filling = False

        m.rows.filler = threading.Thread(target=run, name="engram-row-fill", daemon=True)
        m.rows.filler.start()

    @property
    def path(self) -> Path | None:
        """Where this store's vectors are kept between runs (derived data: deleting it only slows one start)."""
        db = self.db
        path = db.conn.path
        return None if path is None else path.parent / f"{path.name}.{db.namespace}.{db.database}.vectors.npz"

    def load(self, gen: str) -> bool:
        """The whole mirror from the snapshot, when nothing has written a memory since it was taken."""
        db = self.db
        m = db.mirror
        path = self.path
        if path is None or not path.is_file():
            return False
        try:
            with np.load(path, allow_pickle=False) as z:
                if (
                    int(z["version"]) != SNAPSHOT_VERSION
                    or int(z["dim"]) != m.dim
                    or "generation" not in z.files
                    or bytes(z["generation"]).decode() != gen
                ):
                    return False
                keys = text_lines(z["keys"])
                mat = z["vecs"].astype(np.float32)  # float16 values (encode_vector), as the store keeps them
                light = json.loads(zlib.decompress(bytes(z["light"])).decode())
                row_blob = zlib.decompress(bytes(z["row_texts"]))
                row_offsets = z["row_offsets"].tolist()
                postings = _read_postings(z)
                # Optional (a snapshot from before it has none): the two-stage scan's basis.
                projection = (z["c_basis"], int(z["c_basis_at"])) if "c_basis" in z.files else None
        except Exception as exc:  # noqa: BLE001 - a bad snapshot only costs a slower start
            log.warning("mirror snapshot %s unreadable, reading the store: %s", path, exc)
            return False
        order = [row[0] for row in light]
        if keys == order:  # every memory has a vector: the rows are already in the memory summaries' order
            full, has = mat, np.ones(len(order), dtype=bool)
        else:
            vec_at = {k: i for i, k in enumerate(keys)}
            rows_of = np.asarray([vec_at.get(k, -1) for k in order], dtype=np.int64)
            has = rows_of >= 0
            full = np.zeros((len(order), m.dim), dtype=np.float32)
            if has.any():
                full[has] = mat[rows_of[has]]
        index = SearchIndex(m.dim)
        index.load(
            order, [row[13] if row[14] is None else row[14] for row in light], full, has, postings, projection
        )
        with m.lock:
            m.index = index
            m.summaries.clear()
            m.by_hash.clear()
            # The full rows (row_mirror.py), decoded when a recall first needs one.
            m.rows.load_snapshot(order, row_blob, row_offsets)
            for (
                key,
                mtype,
                tags,
                imp,
                acc,
                hl,
                status,
                pinned,
                last,
                created,
                sess,
                ep,
                chash,
                content,
                _text,
            ) in light:
                m.summaries[key] = MemorySummary(
                    memory_type=mtype,
                    tags=tags,
                    importance=imp,
                    access_count=acc,
                    half_life_days=hl,
                    status=status,
                    pinned=pinned,
                    last_accessed_at=datetime.fromisoformat(last),
                    created_at=datetime.fromisoformat(created),
                    session_id=sess,
                    episode_id=ep,
                    content_hash=chash,
                    content=content,
                )
                if chash:
                    m.by_hash.setdefault(chash, key)
        return True

    def save(self) -> None:
        """Write the mirror (vectors, memory summaries, BM25 postings) with the generation it matches."""
        write = self.capture()
        if write is not None:
            write()

    def capture(self) -> Callable[[], None] | None:
        """Take the mirror as it is now (under the caller's locks: no write may come between the generation and
        the mirror) and return the writing of the vector snapshot, which the caller may run after letting them go
        (encoding and writing it takes ~0.3 s at 5,000 memories). The other mirrors' snapshots are written here."""
        db = self.db
        m = db.mirror
        path = self.path
        if path is None:
            return None
        gen = db.generation()  # applies pending bookkeeping first: the mirror then matches this generation
        with m.lock:
            order = list(m.summaries)
            keys, mat = m.index.embeddings(order)
            # The times stay datetimes (immutable) until the writing: formatting them is half of this loop.
            light: list[list[Any]] = [
                [
                    k,
                    lt.memory_type,
                    list(lt.tags),
                    lt.importance,
                    lt.access_count,
                    lt.half_life_days,
                    lt.status,
                    lt.pinned,
                    lt.last_accessed_at,
                    lt.created_at,
                    lt.session_id,
                    lt.episode_id,
                    lt.content_hash,
                    lt.content,
                    None if t == lt.content else t,
                ]
                for (k, lt), t in zip(m.summaries.items(), m.index.texts(order), strict=True)
            ]
            row_texts = [m.rows.snapshot_text(row[0]) or "" for row in light]
            postings = m.index.export_postings([row[0] for row in light])
            projection = m.index.projection()
            extra: dict[str, Any] = (
                {} if projection is None else {"c_basis": projection[0], "c_basis_at": projection[1]}
            )
        for name, write in list(self.writers.items()):
            try:
                write()
            except Exception as exc:  # noqa: BLE001 - a snapshot not written only costs a slower start
                log.warning("%s snapshot of %s/%s not written: %s", name, db.namespace, db.database, exc)

        def write_vectors() -> None:
            for row in light:
                row[8], row[9] = row[8].isoformat(), row[9].isoformat()
            encoded = [t.encode() for t in row_texts]
            row_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
            np.cumsum([len(b) for b in encoded], out=row_offsets[1:])
            try:
                with self.write_lock:  # a close may write it at the same time: one after the other
                    write_private(
                        path,
                        lambda fh: np.savez(
                            fh,
                            version=SNAPSHOT_VERSION,
                            dim=m.dim,
                            vecs=mat.astype(VECTOR_DTYPE),
                            keys=text_array(keys),
                            generation=np.frombuffer(gen.encode(), dtype=np.uint8),
                            light=np.frombuffer(
                                zlib.compress(json.dumps(light, ensure_ascii=False).encode(), 3),
                                dtype=np.uint8,
                            ),
                            # The full rows' JSON texts in one blob (fast to decompress: level 1) and where each ends.
                            row_texts=np.frombuffer(zlib.compress(b"".join(encoded), 1), dtype=np.uint8),
                            row_offsets=row_offsets,
                            p_analyser=np.frombuffer(postings.analyser.encode(), dtype=np.uint8),
                            p_terms=text_array(postings.terms),
                            p_offsets=postings.offsets,
                            p_slots=postings.slots,
                            p_tfs=postings.tfs,
                            p_doc_len=postings.doc_len,
                            **extra,
                        ),
                    )
            except OSError as exc:
                log.warning("vector snapshot %s not written: %s", path, exc)

        return write_vectors
