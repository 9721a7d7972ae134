"""Build the frozen demo set for the TUI tests in a child process: ``python build_demo_fixture.py DIR``.

A child process so that PYTHONHASHSEED can be fixed (the organise layer iterates sets of names, so the
number and order of ids it makes depends on string hashing) and the id generator patched everywhere
before anything runs. Prints the DemoReport as JSON.
"""

from __future__ import annotations

import itertools
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

FROZEN_NOW = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def deterministic_ulid():  # noqa: ANN201
    counter = itertools.count(1)
    base = int(FROZEN_NOW.timestamp() * 1000)

    def ulid(ts_ms: int | None = None) -> str:
        value = (base << 80) | next(counter)
        return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))

    return ulid


def main(target: Path) -> int:
    import engram_core.organise  # noqa: F401 - loaded first so every module holding `ulid` is patched
    from engram_core import ids
    from engram_core.clock import FrozenClock
    from engram_core.service import EngramService
    from engram_tui.demo import build_demo

    fake, real = deterministic_ulid(), ids.ulid
    for name, mod in list(sys.modules.items()):
        if name.startswith("engram_core") and getattr(mod, "ulid", None) is real:
            mod.ulid = fake
    svc = EngramService(target / "home", clock=FrozenClock(FROZEN_NOW))
    report = build_demo(svc, target / "projects", FROZEN_NOW)
    embedder = svc.embedder.name if svc.embedder.available else "unavailable"
    svc.close()
    print(json.dumps({"project": report.project_root, "other_project": report.other_project_root,
                      "session": report.session_key, "organise": report.organise,
                      "embedder": embedder}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
