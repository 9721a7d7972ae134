"""The order of a memory's entity list (`memory.entities`, schema 011): the order its text first names them.

The write path (organise/graph.py) and the upgrade that builds the lists from the edges of a store written before
(storage/schema.py, `entity_lists`) both order by this one rule, from the text and the entities' normalised names alone: the
graph links a memory's first six entities by co-mention, so the two must agree."""

from __future__ import annotations

from collections.abc import Mapping


def in_text_order(text: str, names: Mapping[str, str]) -> list[str]:
    """Entity keys (``names``: key → normalised name, lowercase) by where each name first appears in the text,
    case aside; a name the text does not hold as written (a canonical form: "postgres" for "PostgreSQL" is found,
    "docker compose" for "docker-compose" is not) comes last. Ties (a command and the tool it starts with) by key."""
    low = text.lower()
    at = {k: low.find(n) if n else -1 for k, n in names.items()}
    return sorted(at, key=lambda k: (at[k] < 0, at[k], k))
