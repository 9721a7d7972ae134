"""Redaction recall and false positives, per family, as JSON.

    python bench/redaction.py                              # this checkout's engram_core/redaction.py
    python bench/redaction.py --module OLD/redaction        # another version: its package folder, or an older
                                                            # single-file redaction.py

Corpora: tests/data/redaction_corpus.jsonl (one secret or one harmless look-alike a line) and, reported
separately as "legacy", tests/data/secrets_corpus.jsonl + benign_corpus.jsonl.  A secret counts as caught when
its text no longer occurs in the redacted output; a look-alike is a false positive when redaction changes it at
all.  Speed: the best of 7 runs over 100 KB of mixed text (code, logs and the secrets corpus).

"classes_29" scores on their own the three classes issue #29 added (a private key in a JSON string with escaped
newlines, a secret split by a shell line continuation, an API-key header whose value is letters only): the
secrets caught and the look-alikes left unchanged, per class.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def _lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x.strip()]


def _score(redact_text, corpus: list[dict]) -> dict:  # noqa: ANN001 - any version's redact_text
    per_family: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    leaks, false_positives = [], []
    for e in corpus:
        out = redact_text(e["text"])
        if e["secret"] is None:
            if out != e["text"]:
                false_positives.append({"family": e["family"], "redacted": out[:160]})
            continue
        fam = per_family[e["family"]]
        fam[1] += 1
        if e["secret"] in out:
            leaks.append({"family": e["family"], "secret": e["secret"][:60]})
        else:
            fam[0] += 1
    secrets = sum(v[1] for v in per_family.values())
    caught = sum(v[0] for v in per_family.values())
    return {
        "secrets": secrets,
        "caught": caught,
        "recall": round(caught / secrets, 4),
        "lookalikes": sum(e["secret"] is None for e in corpus),
        "false_positives": len(false_positives),
        "families": len(per_family),
        "recall_per_family": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_family.items())},
        "leaks": leaks,
        "false_positive_texts": false_positives,
    }


CLASSES_29 = ("json_escaped_key", "continued_secret", "letters_header")


def _classes(redact_text, corpus: list[dict]) -> dict:  # noqa: ANN001
    out = {}
    for family in CLASSES_29:
        mine = [e for e in corpus if e["family"] == family]
        secrets = [e for e in mine if e["secret"] is not None]
        looks = [e for e in mine if e["secret"] is None]
        caught = sum(e["secret"] not in redact_text(e["text"]) for e in secrets)
        kept = sum(redact_text(e["text"]) == e["text"] for e in looks)
        out[family] = {"recall": f"{caught}/{len(secrets)}", "lookalikes_unchanged": f"{kept}/{len(looks)}"}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", type=Path, default=ROOT / "engram_core" / "redaction")
    args = ap.parse_args()
    where = args.module
    if where.is_dir():  # a package: its __init__, with its folder for the relative imports
        spec = importlib.util.spec_from_file_location(
            "redaction_under_test", where / "__init__.py", submodule_search_locations=[str(where)]
        )
    else:
        spec = importlib.util.spec_from_file_location("redaction_under_test", where)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # the package's relative imports look it up by name
    spec.loader.exec_module(mod)

    legacy = [
        {"family": e["kind"].split()[0], "text": e["text"], "secret": s}
        for e in _lines("secrets_corpus.jsonl")
        for s in e["secrets"]
    ]
    legacy += [
        {"family": e["kind"], "text": e["text"], "secret": None} for e in _lines("benign_corpus.jsonl")
    ]
    big = (
        (ROOT / "engram_core" / "service.py").read_text(encoding="utf-8") * 2
        + (DATA / "secrets_corpus.jsonl").read_text(encoding="utf-8")
    )[:100_000]
    mod.redact(big)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        mod.redact(big)
        times.append((time.perf_counter() - t0) * 1000)
    report = {
        "module": str(args.module),
        "corpus": _score(mod.redact_text, _lines("redaction_corpus.jsonl")),
        "legacy": _score(mod.redact_text, legacy),
        "classes_29": _classes(mod.redact_text, _lines("redaction_corpus.jsonl")),
        "ms_per_100kb": round(min(times), 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
