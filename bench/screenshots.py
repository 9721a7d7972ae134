"""Regenerate screenshots/*.svg (+ .png) from the committed snapshot SVGs of tests/tui.

The snapshots are the source of truth (frozen demo data, frozen clock); this copies them under readable names
and renders PNGs with ``rsvg-convert`` (Debian: librsvg2-bin) when it is installed. Textual writes spaces as
no-break spaces sized by ``textLength``, which librsvg collapses; the PNG copy gets plain spaces and
``xml:space="preserve"`` so columns stay aligned. Usage: ``python bench/screenshots.py``
(after ``pytest tests/tui/test_snapshots.py --snapshot-update`` if the UI changed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAPS = REPO / "tests" / "tui" / "__snapshots__" / "test_snapshots"
OUT = REPO / "screenshots"


def main() -> int:
    OUT.mkdir(exist_ok=True)
    rsvg = shutil.which("rsvg-convert")
    made = []
    svgs = sorted(SNAPS.glob("test_snapshot[[]*[]].svg")) + sorted(
        SNAPS.glob("test_snapshot_small[[]*[]].svg")
    )
    for svg in svgs:
        name = re.sub(r"test_snapshot\[(.*)\]", r"\1", svg.stem)
        name = re.sub(r"test_snapshot_small\[(.*)\]", r"\1_80x24", name)
        target = OUT / f"{name}.svg"
        shutil.copyfile(svg, target)
        made.append(target.name)
        if rsvg:
            text = svg.read_text(encoding="utf-8").replace("<svg ", '<svg xml:space="preserve" ', 1)
            text = text.replace("&#160;", " ")
            with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False, encoding="utf-8") as tmp:
                tmp.write(text)
            subprocess.run([rsvg, "-w", "1600", tmp.name, "-o", str(OUT / f"{name}.png")], check=True)
            Path(tmp.name).unlink()
            made.append(f"{name}.png")
    print("\n".join(made))
    if not rsvg:
        print("rsvg-convert not found: SVGs only (apt-get install librsvg2-bin for PNGs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
