"""SurrealQL editor (tree-sitter-surrealql highlighting) and the per-statement results viewer."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from textual.binding import Binding
from textual.widgets import Static, TabbedContent, TabPane, TextArea

from ..fmt import ms
from ..safe import markup, visible


@cache
def surql_language() -> tuple[Any, str] | None:
    """The tree-sitter Language and its highlight query, or None when the grammar is missing."""
    try:
        import tree_sitter_surrealql
        from tree_sitter import Language
    except ImportError:
        return None
    query = resources.files("tree_sitter_surrealql").joinpath("queries/highlights.scm").read_text()
    return Language(tree_sitter_surrealql.language()), query


class SurqlEditor(TextArea):
    """A TextArea that speaks SurrealQL (falls back to plain text when the grammar is not installed).
    ctrl+a selects all (TextArea's own f6/f7 select line/all stay the editor's)."""

    BINDINGS = [Binding("ctrl+a", "select_all", "Select all", show=False)]

    def __init__(self, text: str = "", **kwargs: Any) -> None:
        super().__init__(text, soft_wrap=False, show_line_numbers=True, tab_behavior="indent", **kwargs)
        lang = surql_language()
        if lang is not None:
            self.register_language("surrealql", *lang)
            self.language = "surrealql"


def _cell(value: Any) -> str:
    """The cell's text; the table renders it without markup, and invisible characters show as escapes."""
    if value is None:
        return "NONE"
    if isinstance(value, dict | list):
        value = json.dumps(value, default=str, ensure_ascii=False)[:500]
    return visible(value, one_line=True)


class ResultsViewer(TabbedContent):
    """One tab per statement (harlequin's shape): a fast table of rows, or the statement's error."""

    runs = 0

    def show_results(self, statements: list[Any], mask: bool = False) -> None:
        # Imported here: pyarrow behind it costs ~0.25 s, which the first paint of the app should not pay.
        from textual_fastdatatable import DataTable as FastTable

        # The old tabs leave asynchronously: ids unique per run (they collided: DuplicateIds on every second run),
        # and the new ones are added only once the old are gone, the first made active (else a blank body).
        self.runs += 1
        panes: list[TabPane] = []
        for i, st in enumerate(statements, start=1):
            error = st.error
            rows = st.rows
            cols = list(st.columns)
            took = st.time_ms
            count = (
                f"first {len(rows):,} of {st.row_count:,} rows (capped)"
                if st.truncated
                else f"{len(rows):,} rows"
            )
            label = f"{i}: {'error' if error else count}" + f" · {ms(took, mask)}"
            if error:
                body: Any = Static(
                    markup("[b red]$error[/]\n\n[dim]$sql[/]", error=error, sql=st.sql),
                    classes="result-error",
                )
            elif rows:
                if not cols:
                    cols = sorted({k for r in rows if isinstance(r, dict) for k in r}) or ["value"]
                data = [[_cell(r.get(c) if isinstance(r, dict) else r) for c in cols] for r in rows]
                body = FastTable(
                    data=data,
                    column_labels=[visible(c, one_line=True) for c in cols],
                    max_column_content_width=60,
                    render_markup=False,
                )
            else:
                body = Static("[dim]no rows[/]")
            panes.append(TabPane(label, body, id=f"result-{self.runs}-{i}"))

        self._swap(panes)

    def show_message(self, message: Any) -> None:
        """One pane saying why nothing ran: the results of an earlier run go, so none reads as this query's."""
        self.runs += 1
        self._swap([TabPane("not run", Static(message, classes="result-error"), id=f"result-{self.runs}-0")])

    def _swap(self, panes: list[TabPane]) -> None:
        async def swap() -> None:
            await self.clear_panes()
            for pane in panes:
                await self.add_pane(pane)
            if panes and panes[0].id:
                self.active = panes[0].id

        self.run_worker(swap(), exclusive=True, group="results")
