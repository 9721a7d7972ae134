"""A memory as a card: the consolidation sources and the two sides of a contradiction."""

from __future__ import annotations

from typing import Any

from textual.content import Content

from ..fmt import age
from ..safe import markup


def memory_card(m: Any, now: Any) -> Content:
    return markup(
        "[b]$content[/]\n\n[dim]id[/] $id\n[dim]type[/] $type  [dim]status[/] [b]$status[/]\n"
        "[dim]strength[/] $strength  [dim]importance[/] $importance\n[dim]created[/] $created  "
        "[dim]tags[/] $tags",
        content=m.content,
        id=m.id,
        type=m.memory_type.value,
        status=m.status.value,
        strength=f"{m.memory_strength:.3f}",
        importance=f"{m.importance:.2f}",
        created=age(m.created_at, now),
        tags=", ".join(m.tags),
    )
