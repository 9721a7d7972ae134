"""What bench/realpath.py relies on, without running it (the benchmark itself takes minutes to hours).

The 100k stage imports only the second 50,000 into the 50k store, so the generator must give the same first
rows for any larger count; the baseline workers must read back what the bench wrote and time every query.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import realpath  # noqa: E402
import realpath_text  # noqa: E402


def test_a_larger_project_import_starts_with_the_smaller_one() -> None:
    small = realpath_text.memories(400, 0, seed=7)
    large = realpath_text.memories(900, 0, seed=7)
    assert large[:400] == small
    assert len({m["content"] for m in large}) == 900  # no exact repeat: each line is stored, none merged


def test_mixed_store_holds_both_scopes_in_the_asked_numbers() -> None:
    rows = realpath_text.memories(200, 100, seed=7)
    assert [r["scope"] for r in rows].count("project") == 200
    assert [r["scope"] for r in rows].count("user") == 100
    assert all(len(str(r["content"]).split()) >= 15 for r in rows)


def _data_dir(tmp_path: Path) -> Path:
    rows = realpath_text.memories(60, 30, seed=3)
    texts = [str(r["content"]) for r in rows]
    scopes = [str(r["scope"]) for r in rows]
    rng = np.random.default_rng(0)
    (tmp_path / "texts.json").write_text(json.dumps({"texts": texts, "scopes": scopes}))
    np.save(tmp_path / "vecs.npy", rng.standard_normal((len(texts), realpath.DIM)).astype(np.float32))
    queries = realpath_text.questions(12, 11)
    (tmp_path / "queries.json").write_text(json.dumps(queries))
    np.save(tmp_path / "qvecs.npy", rng.standard_normal((len(queries), realpath.DIM)).astype(np.float32))
    return tmp_path


def test_numpy_and_fts5_baselines_time_every_query_on_both_scopes(tmp_path: Path) -> None:
    d = _data_dir(tmp_path)
    np_res = realpath.b_numpy(d)
    assert np_res["query_both_scopes"]["n"] == 12 and np_res["vectors"] == 90
    fts = realpath.b_sqlite_fts5(d)
    assert fts["query_both_scopes"]["n"] == 12
    assert fts["bytes_per_memory"] > 0
    assert not (d / "fts.db").exists()  # the worker leaves no store behind


def test_fts_query_survives_punctuation_and_quotes() -> None:
    q = realpath._fts_query('why did `make test` fail with "KeyError" [x] \\ ✓')
    assert q == '"why" OR "did" OR "make" OR "test" OR "fail" OR "with" OR "KeyError" OR "x"'
    assert realpath._fts_query("`[]`") == '""'
