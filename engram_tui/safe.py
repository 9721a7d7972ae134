"""The one rule for showing text that is not ours: it is never read as markup, and nothing in it is invisible.

Memory content, tags, metadata, queries, error messages, project and session names are data. Coding memories
are full of brackets (``dict[str, int]``, ``${arr[@]}``, ``[/]``), which Rich and Textual markup would read as
tags: shown wrong, or a crash. So every pane builds what it shows with the helpers here:

- ``markup(template, **values)``: our template (our markup only) with each ``$name`` filled by a value inserted
  as plain text (Textual's content variables, never parsed);
- ``plain(value, style)``: a Rich ``Text`` for table cells and tree labels (never parsed);
- ``visible(value)``: control and line/paragraph-separator characters become their escape (``\\x1b``,
  ``\\u2028``) so a stored escape sequence cannot drive the terminal and a separator cannot break a row.

Notifications are plain text (``EngramApp.notify``), so an error message quoting a memory shows as it is.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.content import Content

# C0 controls but tab and newline, DEL, C1 controls, the Unicode line/paragraph separators and the bidi
# controls that would reorder what follows them on screen.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: Any, *, one_line: bool = False) -> str:
    """``value`` as text with every invisible control shown by its escape; ``one_line`` also folds newlines."""
    text = "" if value is None else str(value)
    text = _INVISIBLE.sub(_escape_char, text)
    if one_line:
        text = text.replace("\t", " ").replace("\n", " ↵ ")
    return text


def plain(value: Any, style: str = "", *, one_line: bool = True) -> Text:
    """A Rich Text that shows ``value`` literally (table cells, tree labels, option lists)."""
    return Text(visible(value, one_line=one_line), style=style, end="")


def markup(template: str, **values: Any) -> Content:
    """Our markup ``template`` with ``$name`` placeholders filled by ``values`` as literal, visible text."""
    return Content.from_markup(template, **{k: visible(v) for k, v in values.items()})


def lines(*parts: Content | str) -> Content:
    """Join pieces (Content built by ``markup``, or our own markup strings) with newlines."""
    return Content("\n").join(p if isinstance(p, Content) else Content.from_markup(p) for p in parts)
