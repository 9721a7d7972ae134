"""Redaction recall and false positives on tests/data/redaction_corpus.jsonl (plus the older corpora).

    python bench/redaction.py            # JSON: recall per family, leaks, false positives, speed

A secret counts as caught when its text no longer occurs in the redacted output; a look-alike counts as a
false positive when redaction changes it at all.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engram_core.redaction import redact_text  # noqa: E402

DATA = ROOT / "tests" / "data"


def _lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x.strip()]


def main() -> int:
    corpus = _lines("redaction_corpus.jsonl")
    # the older corpora (several secrets per text; benign texts must survive byte-identical)
    for e in _lines("secrets_corpus.jsonl"):
        corpus += [{"family": "legacy:" + e["kind"].split()[0], "text": e["text"], "secret": s} for s in e["secrets"]]
    corpus += [{"family": "legacy:" + e["kind"], "text": e["text"], "secret": None} for e in _lines("benign_corpus.jsonl")]
    per_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    leaks, false_positives = [], []
    t0 = time.perf_counter()
    for e in corpus:
        out = redact_text(e["text"])
        if e["secret"] is None:
            if out != e["text"]:
                false_positives.append({"family": e["family"], "text": e["text"][:200], "redacted": out[:200]})
            continue
        fam = per_family[e["family"]]
        fam[1] += 1
        if e["secret"] in out:
            leaks.append({"family": e["family"], "secret": e["secret"][:80]})
        else:
            fam[0] += 1
    took = time.perf_counter() - t0
    secrets = sum(v[1] for v in per_family.values())
    caught = sum(v[0] for v in per_family.values())
    lookalikes = sum(e["secret"] is None for e in corpus)
    report = {
        "secrets": secrets, "caught": caught, "recall": round(caught / secrets, 4),
        "lookalikes": lookalikes, "false_positives": len(false_positives),
        "families": len(per_family),
        "recall_per_family": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_family.items())},
        "leaks": leaks, "false_positive_texts": false_positives,
        "ms_per_text": round(took * 1000 / len(corpus), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
