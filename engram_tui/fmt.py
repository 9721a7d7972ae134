"""Formatting shared by the panes: ages relative to the app's clock, strengths, short ids."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram_core.models import Memory

from rich.cells import cell_len, set_cell_size

MASK = "··········"


def age(dt: datetime | None, now: datetime) -> str:
    """'3.2 d ago' / 'in 5 h' relative to ``now`` (the service clock, frozen in tests)."""
    if dt is None:
        return "—"
    secs = (now - dt).total_seconds()
    future = secs < 0
    secs = abs(secs)
    if secs < 90:
        text = f"{secs:.0f} s"
    elif secs < 5400:
        text = f"{secs / 60:.0f} min"
    elif secs < 2 * 86400:
        text = f"{secs / 3600:.1f} h"
    elif secs < 400 * 86400:
        text = f"{secs / 86400:.1f} d"
    else:
        text = f"{secs / 86400 / 365:.1f} y"
    return f"in {text}" if future else f"{text} ago"


def wall_age(dt: datetime | None, now: datetime, mask: bool) -> str:
    """The age of a time the database stamped with its wall clock (queue and detection times)."""
    return MASK if mask and dt is not None else age(dt, now)


def stamp(dt: datetime | None) -> str:
    return "—" if dt is None else dt.strftime("%Y-%m-%d %H:%M")


def wall_stamp(dt: datetime | None, mask: bool) -> str:
    """Times the database writes with its own wall clock (status history, updated_at): maskable for snapshots."""
    return MASK if mask and dt is not None else stamp(dt)


def ms(value: float | None, mask: bool) -> str:
    """A duration; masked in snapshots, where timings would change every run."""
    return "— ms" if mask or value is None else f"{value:.1f} ms"


def strength_bar(value: float, width: int = 6) -> str:
    filled = max(0, min(width, round(value * width)))
    return "█" * filled + "·" * (width - filled)


def short(text: str, width: int) -> str:
    """One line of at most ``width`` terminal cells (emoji and CJK take two), cut with "…"."""
    text = " ".join(text.split())
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1) + "…"


def exempt_from_decay(m: Memory) -> bool:
    """Pinned memories are never archived or forgotten by the sweep: no decay dates apply to them."""
    return m.pinned
