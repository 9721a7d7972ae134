"""Engram on the real path: data imported with `engram import` (default settings, organise layer on), realistic
coding-memory text from a seeded generator (bench/realpath_text.py), measured through the daemon, the CLI and
the store files, with the baselines measured in the same run on the same texts and vectors.

    python bench/realpath.py --work /tmp/rp --project 10000 --user 5000          # import, then measure
    python bench/realpath.py --work /tmp/rp --reuse                               # measure an earlier import
    python bench/realpath.py --work /tmp/rp2 --project 1000 --user 0 --ingest-only  # ingest rate only

Measures: import rate (with the model's own rate on the same texts), daemon cold start (ready, first recall
answered), recall through the daemon socket paced as an agent asks and back to back (p50/p95), `engram recall`
as a process, disk per memory, daemon RSS; baselines: SurrealDB's own HNSW + FULLTEXT indexes (both scopes),
SQLite FTS5, numpy brute-force top-10, the query embedding alone. Prints JSON and writes
bench/results/realpath.json. The load average is recorded at each step: on a shared machine say so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import realpath_text  # noqa: E402

PY = sys.executable


def load() -> float:
    return round(os.getloadavg()[0], 2)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(round(q * (len(s) - 1))))], 2)


def summary(xs: list[float]) -> dict[str, Any]:
    return {"p50_ms": pct(xs, 0.5), "p95_ms": pct(xs, 0.95), "min_ms": round(min(xs), 2),
            "mean_ms": round(statistics.fmean(xs), 2), "n": len(xs)}


class Setup:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.eh = work / "engram-home"
        self.proj = work / "proj"
        self.data = work / "data.jsonl"

    def env(self) -> dict[str, str]:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")  # the exported model, once
        return {**os.environ, "HOME": str(self.home), "ENGRAM_HOME": str(self.eh), "XDG_CACHE_HOME": cache,
                "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    def make(self) -> None:
        for d in (self.home, self.eh, self.proj / ".git"):
            d.mkdir(parents=True, exist_ok=True)

    def engram(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "engram_core.cli", *args], cwd=self.proj, env=self.env(), text=True,
                              capture_output=True, check=check)

    def stop(self) -> None:
        """Stop the daemon and wait until its process is gone (it writes the snapshots while closing, and a new
        daemon cannot open the stores before)."""
        pid_file = self.eh / "engram.pid"
        pid = int(pid_file.read_text().split()[0]) if pid_file.is_file() and pid_file.read_text().strip() else None
        self.engram("stop", "--timeout", "300", check=False)
        deadline = time.monotonic() + 300
        while pid and time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child: reap it, or it stays a zombie
                    break
            except ChildProcessError:
                pass
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)

    def disk(self) -> dict[str, int]:
        def du(p: Path) -> int:
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0
        return {"project_bytes": du(self.proj / ".claude" / "engram"), "user_bytes": du(self.eh / "user.db"),
                "snapshots_bytes": sum(f.stat().st_size for f in [*(self.proj / ".claude" / "engram").glob("*.npz"),
                                                                  *self.eh.glob("*.npz")])}


def do_import(s: Setup, n_project: int, n_user: int, seed: int) -> dict[str, Any]:
    rows = realpath_text.memories(n_project, n_user, seed)
    s.data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = load()
    t = time.perf_counter()
    out = s.engram("import", str(s.data), "--json")
    took = time.perf_counter() - t
    report = json.loads(out.stdout)
    return {"memories": len(rows), "stored": report["stored"], "merged": report["merged"], "seconds": round(took, 1),
            "per_second": round(len(rows) / took, 1), "load_before": before, "load_after": load(),
            "includes": "daemon start and model load"}


def embedding_alone(texts: list[str]) -> dict[str, Any]:
    from engram_core.embeddings import LocalEmbedder

    model = LocalEmbedder()
    model.embed(["warm up"])
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        model.embed(texts[i:i + 64])
    batch = len(texts) / (time.perf_counter() - t)
    qs = realpath_text.questions(50, 5)
    times = []
    for q in qs:
        t = time.perf_counter()
        model.embed([q])
        times.append((time.perf_counter() - t) * 1000)
    return {"batch_texts_per_second": round(batch, 1), "query": summary(times), "load": load()}


def start_daemon(s: Setup) -> tuple[subprocess.Popen[bytes], float]:
    t = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "engram_core.daemon", "--home", str(s.eh)], env=s.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, t


def cold_start(s: Setup, query: str) -> dict[str, Any]:
    from engram_core.wire.client import connect

    proc, t0 = start_daemon(s)
    sock = s.eh / "engram.sock"
    while not sock.exists():
        time.sleep(0.005)
        if proc.poll() is not None:
            raise RuntimeError("the daemon exited at start")
    client = connect(s.eh, start=False)
    ready = time.perf_counter() - t0
    client.call("recall", query=query, project=str(s.proj), limit=10)
    first = time.perf_counter() - t0
    client.close()
    return {"ready_s": round(ready, 2), "first_recall_answered_s": round(first, 2), "load": load(), "pid": proc.pid}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def recall_daemon(s: Setup, queries: list[str], gap_s: float) -> dict[str, Any]:
    from engram_core.wire.client import connect

    client = connect(s.eh, start=False)
    times = []
    for q in queries:
        if gap_s:
            time.sleep(gap_s)
        t = time.perf_counter()
        client.call("recall", query=q, project=str(s.proj), limit=10)
        times.append((time.perf_counter() - t) * 1000)
    client.close()
    return {**summary(times), "gap_ms": int(gap_s * 1000), "load": load()}


def recall_cli(s: Setup, queries: list[str]) -> dict[str, Any]:
    times = []
    for q in queries:
        t = time.perf_counter()
        s.engram("recall", q, "--json", "--project", str(s.proj))
        times.append((time.perf_counter() - t) * 1000)
    bare = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t) * 1000)
    return {**summary(times), "bare_python_p50_ms": pct(bare, 0.5), "load": load()}


def recall_mcp(s: Setup, queries: list[str], gap_s: float) -> dict[str, Any]:
    """The MCP `recall_memories` tool as Claude Code calls it (the bridge .mcp.json runs, JSON-RPC on stdio),
    paced like the daemon figure; `over_daemon_ms` is the p50 difference to the same recall on the socket."""
    proc = subprocess.Popen([PY, "-S", str(ROOT / "engram_core" / "mcp" / "bridge.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=s.env(), cwd=s.proj)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(msg: dict[str, Any]) -> dict[str, Any] | None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        if "id" not in msg:
            return None
        while True:
            got = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            if got.get("id") == msg["id"]:
                return got

    ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i, q in enumerate(queries, start=1):
        time.sleep(gap_s)
        t = time.perf_counter()
        got = ask({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "recall_memories", "arguments": {"query": q}}})
        times.append((time.perf_counter() - t) * 1000)
        assert got is not None and "result" in got and not got["result"].get("isError"), got
    proc.stdin.close()
    proc.wait(10)
    return {**summary(times), "gap_ms": int(gap_s * 1000), "load": load()}


def snapshot_vectors(s: Setup) -> np.ndarray:
    mats = []
    for f in [*(s.proj / ".claude" / "engram").glob("*.npz"), *s.eh.glob("*.npz")]:
        with np.load(f) as z:
            mats.append(z["vecs"])
    return np.concatenate(mats) if mats else np.zeros((0, 384), np.float32)


def baselines(s: Setup, texts: list[str], scopes: list[str], vecs: np.ndarray, queries: list[str]) -> dict[str, Any]:
    from surrealdb import Surreal

    from engram_core.embeddings import LocalEmbedder

    model = LocalEmbedder()
    qv = model.embed(queries)
    out: dict[str, Any] = {"vectors": int(len(vecs)), "texts": len(texts)}
    # numpy floor
    mat = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
    times = []
    for v in qv:
        t = time.perf_counter()
        sc = mat @ v
        np.argpartition(-sc, 10)[:10]
        times.append((time.perf_counter() - t) * 1000)
    out["numpy_top10"] = summary(times)
    # SQLite FTS5 on the same texts
    with tempfile.TemporaryDirectory() as d:
        db = sqlite3.connect(Path(d) / "fts.db")
        db.execute("CREATE VIRTUAL TABLE m USING fts5(content)")
        db.executemany("INSERT INTO m VALUES (?)", [(t,) for t in texts])
        db.commit()
        times = []
        for q in queries:
            words = " OR ".join(f'"{w}"' for w in q.replace('"', " ").split() if w.isalnum())
            t = time.perf_counter()
            db.execute("SELECT rowid FROM m WHERE m MATCH ? ORDER BY rank LIMIT 10", (words or '""',)).fetchall()
            times.append((time.perf_counter() - t) * 1000)
        db.close()
        out["sqlite_fts5"] = summary(times)
        out["sqlite_fts5_bytes_per_memory"] = round((Path(d) / "fts.db").stat().st_size / max(1, len(texts)))
    # SurrealDB's own indexes, one database per scope, summed over the scopes as a recall would
    with tempfile.TemporaryDirectory() as d:
        db = Surreal(f"surrealkv://{d}/s.db")
        db.use("bench", "x")
        schema = ("DEFINE ANALYZER IF NOT EXISTS a TOKENIZERS blank, class FILTERS ascii, lowercase, snowball(english);"
                  "DEFINE TABLE {t} SCHEMALESS; DEFINE INDEX {t}_ft ON {t} FIELDS content FULLTEXT ANALYZER a BM25;"
                  "DEFINE INDEX {t}_v ON {t} FIELDS embedding HNSW DIMENSION 384 DIST COSINE;")
        tables = sorted(set(scopes))
        t = time.perf_counter()
        for tb in tables:
            db.query(schema.replace("{t}", tb)).execute()
            idx = [i for i, sc in enumerate(scopes) if sc == tb and i < len(vecs)]
            for j in range(0, len(idx), 500):
                rows = [{"content": texts[i], "embedding": [float(x) for x in vecs[i]]} for i in idx[j:j + 500]]
                db.query(f"INSERT INTO {tb} $rows RETURN NONE", {"rows": rows}).execute()
        out["surrealdb_bulk_insert_s"] = round(time.perf_counter() - t, 1)
        hnsw, ft = [], []
        for q, v in zip(queries, qv, strict=True):
            vl = [float(x) for x in v]
            t = time.perf_counter()
            for tb in tables:
                db.query(f"SELECT id, vector::distance::knn() AS d FROM {tb} WHERE embedding <|10,40|> $v", {"v": vl}
                         ).execute()
            hnsw.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            for tb in tables:
                db.query(f"SELECT id, search::score(1) AS s FROM {tb} WHERE content @1@ $q ORDER BY s DESC LIMIT 10",
                         {"q": q}).execute()
            ft.append((time.perf_counter() - t) * 1000)
        out["surrealdb_hnsw_both_scopes"] = summary(hnsw)
        out["surrealdb_fulltext_both_scopes"] = summary(ft)
        out["surrealdb_hnsw_plus_fulltext"] = summary([a + b for a, b in zip(hnsw, ft, strict=True)])
        db.close()
    try:
        import chromadb  # noqa: F401

        out["chroma"] = "installed but not measured in this script"
    except ImportError:
        out["chroma"] = "not installed (not on this machine's package index mirror)"
    out["load"] = load()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="working directory (home, project, data)")
    ap.add_argument("--project", type=int, default=10_000)
    ap.add_argument("--user", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--reuse", action="store_true", help="measure an import already in --work")
    ap.add_argument("--ingest-only", action="store_true")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--gap-ms", type=int, default=200, help="pause before each paced recall (default 200)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "realpath.json")
    args = ap.parse_args()
    s = Setup(args.work)
    s.make()
    res: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "load_at_start": list(os.getloadavg())},
                           "data": {"project": args.project, "user": args.user, "seed": args.seed,
                                    "generator": "bench/realpath_text.py"}}
    if not args.reuse:
        s.stop()
        res["import"] = do_import(s, args.project, args.user, args.seed)
        s.stop()
    rows = [json.loads(x) for x in s.data.read_text(encoding="utf-8").splitlines()]
    texts = [r["content"] for r in rows]
    scopes = [r["scope"] for r in rows]
    res["embedding_alone"] = embedding_alone(texts[:300])
    if args.ingest_only:
        res["disk"] = s.disk()
        print(json.dumps(res, indent=2))
        args.out.write_text(json.dumps(res, indent=2) + "\n")
        return
    qs = realpath_text.questions(args.queries * 2 + 20, 11)
    s.stop()
    snaps = [*(s.proj / ".claude" / "engram").glob("*.npz"), *s.eh.glob("*.npz")]
    for f in snaps:  # the first start after an import or an upgrade has none (derived data: safe to delete)
        f.unlink()
    res["cold_start_first"] = cold_start(s, qs[0])
    s.stop()
    res["cold_start"] = cold_start(s, qs[1])  # the normal case: vectors from the snapshot
    pid = res["cold_start"]["pid"]
    res["rss_mb_after_start"] = rss_mb(pid)
    res["recall_paced"] = recall_daemon(s, qs[2:2 + args.queries], args.gap_ms / 1000)
    res["recall_back_to_back"] = recall_daemon(s, qs[2 + args.queries:2 + 2 * args.queries], 0)
    mcp_q = qs[2:2 + min(args.queries, 40)]
    res["recall_mcp_tool"] = recall_mcp(s, mcp_q, args.gap_ms / 1000)
    same = recall_daemon(s, mcp_q, args.gap_ms / 1000)
    res["recall_mcp_tool"]["over_daemon_p50_ms"] = round(res["recall_mcp_tool"]["p50_ms"] - same["p50_ms"], 2)
    res["rss_mb_after_recalls"] = rss_mb(pid)
    res["recall_cli_process"] = recall_cli(s, qs[-10:])
    s.stop()
    d = s.disk()
    n = len(rows)
    res["disk"] = {**d, "memories": n, "bytes_per_memory": round((d["project_bytes"] + d["user_bytes"]) / n)}
    vecs = snapshot_vectors(s)
    res["baselines"] = baselines(s, texts, scopes, vecs, qs[2:2 + min(args.queries, 50)])
    res["machine"]["load_at_end"] = list(os.getloadavg())
    print(json.dumps(res, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
