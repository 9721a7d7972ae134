"""A DataTable whose text columns share the width left by the fixed ones, and whose least useful columns go first
when the terminal is narrow: no horizontal scrollbar, no column off-screen, no number cut (issue #30)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.widgets import DataTable

from ..fmt import short
from ..safe import plain, visible


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    width: int | None = None  # None: a text column, sharing the spare width (at least ``min_width``)
    drop: int = 0  # > 0: may be dropped on a narrow table, the highest first
    min_width: int = 20


def layout(cols: list[Col], avail: int) -> dict[str, int]:
    """Each shown column's width (2 cells of padding each): text columns split what the fixed ones leave."""
    shown = list(cols)

    def spare(cs: list[Col]) -> int:
        return avail - sum((c.width or 0) + 2 for c in cs)

    droppable = sorted((c for c in cols if c.drop), key=lambda c: -c.drop)
    flex = [c for c in cols if c.width is None]
    while droppable and spare(shown) < sum(c.min_width for c in flex):
        shown.remove(droppable.pop(0))
    share = max(8, spare(shown) // max(1, len(flex)))
    return {c.key: c.width if c.width is not None else share for c in shown}


class FitTable(DataTable[Any]):
    """``set_rows`` keeps the rows' whole text; every resize lays the columns out again and cuts text to fit."""

    def __init__(self, cols: list[Col], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.cols = cols
        self.widths: dict[str, int] = {}
        self.data: list[tuple[str, dict[str, Any]]] = []

    def on_resize(self) -> None:
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        # The size is inside the border; the vertical scrollbar may take 2 cells of it.
        widths = layout(self.cols, (self.size.width or 100) - 2)
        if widths != self.widths:
            self.widths = widths
            row = self.cursor_row
            self._fill()
            if self.row_count:
                self.move_cursor(row=min(row, self.row_count - 1))

    def set_rows(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """(row key, {column key: whole value}); text columns are cut to their width ("…")."""
        self.data = rows
        if not self.widths:
            self.widths = layout(self.cols, (self.size.width or 100) - 2)
        self._fill()

    def _fill(self) -> None:
        self.clear(columns=True)
        for c in self.cols:
            if c.key in self.widths:
                self.add_column(c.label, key=c.key, width=self.widths[c.key])
        for key, values in self.data:
            self.add_row(
                *(
                    plain(
                        short(visible(str(values[c.key])), self.widths[c.key])
                        if c.width is None
                        else str(values[c.key])
                    )
                    for c in self.cols
                    if c.key in self.widths
                ),
                key=key,
            )
