"""The memory browser: scope tree, paged memory table with filter and hybrid search, detail pane, actions."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import DataTable, Header, Input, Static, Tree

from ..backend import describe_error
from ..fmt import age, ms, short, strength_bar
from ..layout import NARROW_COLUMNS
from ..messages import ServiceDone
from ..modes import EMPTY_HELP
from ..safe import markup, plain, visible
from ..undo import UndoEntry, UndoStack, undo_plan
from ..widgets.detail import DetailPane
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from ..widgets.scope_tree import STATUSES, NodeData, ScopeTree
from .base import ServiceScreen
from .dialogs import ConfirmScreen, EditMemoryScreen

PAGE_SIZE = 200
AGE_TICK_S = 10.0
FILTER_DEBOUNCE_S = 0.12
DETAIL_SETTLE_S = 0.08

# column key → (label, list_memories order key or None when the database cannot sort by it). In the order shown:
# what matters most first, so a narrow terminal still sees content, strength and status.
COLUMNS: dict[str, tuple[str, str | None]] = {
    "content": ("Content", "content"),
    "strength": ("Strength", "memory_strength"),
    "status": ("Status", "status"),
    "type": ("Type", "memory_type"),
    "scope": ("Scope", None),
    "importance": ("Imp", "importance"),
    "access": ("Acc", "access_count"),
    "last": ("Last access", "last_accessed_at"),
    "created": ("Created", "created_at"),
}
WIDTHS = {"strength": 10, "status": 12, "type": 10, "scope": 7, "importance": 4, "access": 3, "last": 11}
# Which columns a narrow table drops first (content, strength and status stay): never a number cut in half.
DROP_ORDER = ("scope", "access", "last", "importance", "type")
CONTENT_MIN = 28
SORTABLE = [k for k, (_, order) in COLUMNS.items() if order]
SEARCH_COLUMNS = {"score": "Score", "fused": "Fused", "bm25": "BM25#", "vector": "Vec#"}
# A search drops the store's bookkeeping before its ranks, and keeps the final score.
SEARCH_DROP = ("scope", "access", "last", "fused", "vector", "bm25", "importance", "type")


@dataclass(frozen=True)
class TableQuery:
    """Everything that decides what the table shows; changing it reloads one page from the database."""

    scope: str = "project"
    project: str | None = None
    session: str | None = None
    memory_type: str | None = None
    status: str | None = None
    text: str = ""
    order: str = "created_at"
    descending: bool = True
    offset: int = 0


class ListInput(Input):
    """The filter and search boxes: down (like enter) goes back to the list, as in lazygit and k9s."""

    BINDINGS = [Binding("down", "to_list", "Back to the list", show=False)]

    def action_to_list(self) -> None:
        screen = self.screen
        if isinstance(screen, MemoriesScreen):
            screen.to_list(commit=self.id == "filter")


class MemoryTable(DataTable[Any]):
    """The memory table: moving past the first or last row of the page turns the page (``turn_page``), and
    ctrl+home / ctrl+end go to the first and last memory of all."""

    def _turn(self, delta: int) -> bool:
        screen = self.screen
        edge = self.cursor_row >= self.row_count - 1 if delta > 0 else self.cursor_row <= 0
        return edge and isinstance(screen, MemoriesScreen) and screen.turn_page(delta)

    def _move(self, delta: int, action: str) -> None:
        if not self._turn(delta):
            getattr(DataTable, action)(self)

    def action_cursor_down(self) -> None:
        self._move(1, "action_cursor_down")

    def action_cursor_up(self) -> None:
        self._move(-1, "action_cursor_up")

    def action_page_down(self) -> None:
        self._move(1, "action_page_down")

    def action_page_up(self) -> None:
        self._move(-1, "action_page_up")

    def _jump(self, end: bool) -> None:
        screen = self.screen
        if isinstance(screen, MemoriesScreen):
            screen.action_jump(end)

    def action_scroll_bottom(self) -> None:
        self._jump(True)

    def action_scroll_top(self) -> None:
        self._jump(False)


class MemoriesScreen(ServiceScreen):
    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#memory-table"
    BINDINGS = [
        Binding(
            "slash", "focus_filter", "Filter", id="memories.filter", tooltip="Filter the table as you type"
        ),
        Binding("s", "focus_search", "Search", id="memories.search", tooltip="Hybrid recall, scores shown"),
        Binding("e", "edit", "Edit", id="memories.edit", tooltip="Edit content, tags, importance"),
        Binding("p", "pin", "Pin", show=False, id="memories.pin", tooltip="Pin or unpin (exempt from decay)"),
        Binding(
            "P",
            "promote",
            "Promote",
            show=False,
            id="memories.promote",
            tooltip="Promote to the next scope up",
        ),
        Binding("a", "archive", "Archive", id="memories.archive", tooltip="Archive (asks first)"),
        Binding("d,delete", "forget", "Forget", id="memories.forget", tooltip="Forget (asks first)"),
        Binding(
            "u,ctrl+z", "undo", "Undo", id="memories.undo", tooltip="Undo the last change on this screen"
        ),
        Binding("o", "cycle_sort", "Sort", show=False, id="memories.sort", tooltip="Sort by the next column"),
        Binding("O", "reverse_sort", "Reverse", show=False, id="memories.reverse"),
        Binding("right_square_bracket", "page(1)", "Next page", show=False, id="memories.next_page"),
        Binding("left_square_bracket", "page(-1)", "Prev page", show=False, id="memories.prev_page"),
        Binding("R", "refresh", "Refresh", show=False, id="memories.refresh"),
        Binding("escape", "clear_search", "Clear search", show=False, id="memories.clear_search"),
        Binding("t", "toggle_tree", "Tree", id="memories.tree", tooltip="Show or hide the scope tree"),
        Binding(
            "z",
            "maximize_pane",
            "Zoom",
            id="memories.zoom",
            tooltip="Maximise the focused part (table, tree, detail); z or esc restores",
        ),
        Binding(
            "D",
            "app.load_demo",
            "Demo",
            show=False,
            id="memories.demo",
            tooltip="Open the demo set (its own data root, never mixed with your memories)",
        ),
    ]

    tq: var[TableQuery] = var(TableQuery, init=False)
    search_text: var[str] = var("", init=False)

    def __init__(self) -> None:
        super().__init__()
        self.undo = UndoStack()
        self.rows: dict[str, Any] = {}
        self.hits: dict[str, Any] = {}
        self.total = 0
        self.page_seq = 0
        self.current: Any | None = None
        self.current_id: str | None = None
        self._page_t0 = 0.0
        self.last_page_ms: float | None = None
        self.last_fill_ms: float | None = None
        self._filter_timer: Timer | None = None
        self._detail_timer: Timer | None = None
        self._cursor_to: str | None = (
            None  # where the next page puts the cursor: "top", "bottom", None (stays)
        )
        self._turning = False  # a page turned by scrolling past the edge is on its way
        self._content_width = 46
        self._shown: list[str] = []
        self._narrow: bool | None = None
        self.pages_loaded = 0
        self.searches_done = 0  # bench/tui.py and tests wait on these counters

    # ── layout ──────────────────────────────────────────────
    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("memories")
        with Horizontal(id="browser"):
            yield ScopeTree(id="scope-tree")
            with Vertical(id="browser-main"):
                with Horizontal(id="searchbar"):
                    # One line for both (compact inputs): at 80×24 the rows go to the memories.
                    yield ListInput(
                        placeholder="/ filter as you type (enter: to the list)", id="filter", compact=True
                    )
                    yield ListInput(placeholder="s hybrid search (enter)", id="search", compact=True)
                yield Static("", id="table-status")
                yield MemoryTable(id="memory-table", cursor_type="row", zebra_stripes=True)
                yield DetailPane(id="detail")
        yield PaneFooter()

    def on_mount(self) -> None:
        self.query_one("#scope-tree").border_title = "Scopes"
        self._set_columns(search=False)
        self.tq = TableQuery(project=self.engram.project)
        # The tree loads after the first page: a daemon client answers one request at a time, and the
        # table is what a person looks at first.
        self.set_interval(AGE_TICK_S, self._tick_ages)

    def on_screen_resume(self) -> None:
        # Back from another pane (or a dialog): what changed meanwhile shows at once.
        if self.pages_loaded:
            self.refresh_all()

    def refresh_data(self) -> None:
        self.refresh_all()

    def _tick_ages(self) -> None:
        """ "22 s ago" moves on with the clock, without asking the service."""
        if self.app.screen is not self:
            return
        table = self.query_one("#memory-table", DataTable)
        now = self.engram.now()
        for row_key in list(table.rows):
            m = self.rows.get(str(row_key.value).split("#", 1)[0])
            if m is not None and "last" in self._shown:
                table.update_cell(row_key, "last", plain(age(m.last_accessed_at, now)))

    def fit(self, search: bool | None = None) -> tuple[list[str], int]:
        """The columns that fit the table's width now, and the content column's width (see ``fit_columns``)."""
        search = bool(self.search_text) if search is None else search
        table = self.query_one("#memory-table", DataTable)
        # The size is inside the border; the vertical scrollbar takes one cell of it.
        return fit_columns((table.size.width or 100) - 1, search)

    def sort_title(self, search: bool) -> str:
        """The table's title says the order: the sorted column may be off-screen (80 columns) or not shown at all
        (Created), and the header mark alone would then say nothing."""
        if search:
            return "Memories · ranked by recall score"
        label = next(label for label, order in COLUMNS.values() if order == self.tq.order)
        return f"Memories · sorted by {label} {'↓' if self.tq.descending else '↑'}"

    def _set_columns(self, search: bool) -> None:
        table = self.query_one("#memory-table", DataTable)
        table.border_title = self.sort_title(search)
        table.clear(columns=True)
        self._shown, self._content_width = self.fit(search)
        for key in self._shown:
            if key in SEARCH_COLUMNS:
                table.add_column(SEARCH_COLUMNS[key], key=key, width=6)
                continue
            label, order = COLUMNS[key]
            if order is not None and order == self.tq.order and not search:
                label += " ↓" if self.tq.descending else " ↑"  # the sorted column is marked
            table.add_column(label, key=key, width=self._content_width if key == "content" else WIDTHS[key])

    def on_resize(self) -> None:
        narrow = self.app.size.width < NARROW_COLUMNS
        if narrow != self._narrow:
            self._narrow = narrow
            self.query_one("#scope-tree").display = not narrow
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        if self.is_mounted and self.fit() != (self._shown, self._content_width):
            self._set_columns(bool(self.search_text))
            self._refill()

    def _refill(self) -> None:
        if self.search_text:
            hits = list(self.hits.values())
            self._fill([h.memory for h in hits], hits=hits)
        else:
            self._fill(list(self.rows.values()), hits=None)

    def action_toggle_tree(self) -> None:
        tree = self.query_one("#scope-tree")
        tree.display = not tree.display
        if tree.display:
            tree.focus()
        else:
            self.query_one("#memory-table", DataTable).focus()
        self.call_after_refresh(self._refit)

    def action_maximize_pane(self) -> None:
        """z: the focused part (table, tree or detail) takes the whole screen; z or escape gives it back."""
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        detail = self.query_one(DetailPane)
        if focused is None or focused.id not in ("memory-table", "scope-tree"):
            target: Any = detail  # the detail, whichever of its columns has focus (it shows them all)
            if focused is None or detail not in focused.ancestors:
                detail.query_one("#detail-fields").focus()
        else:
            target = focused
        graph_was_shown = self.graph_shown()
        self.maximize(target, container=False)
        if not graph_was_shown and self.graph_shown() and self.current_id:
            self.load_detail(self.current_id)  # its graph column shows now

    # ── loading ─────────────────────────────────────────────
    def load_tree(self) -> None:
        project = self.engram.project
        session = self.engram.session
        service = self.engram.service

        def fetch() -> dict[str, Any]:
            stats = service.stats(project=project, session=session)
            sessions = service.list_sessions()
            projects = service.list_projects()
            counts: dict[tuple[str, str | None, str | None], Any] = {}
            for sc in stats.scopes:
                scope = sc.scope.value
                counts[
                    (scope, project if scope == "project" else None, session if scope == "session" else None)
                ] = sc
            for s in sessions:
                key = s.session_key
                if session is None or key != session:
                    st = service.stats(session=key)
                    for sc in st.scopes:
                        if sc.scope.value == "session":
                            counts[("session", None, key)] = sc
            return {"projects": projects, "sessions": sessions, "counts": counts}

        self.run_in_thread("tree", fetch)

    def done_tree(self, result: dict[str, Any], _m: ServiceDone) -> None:
        counts = result["counts"]
        # Sessions are listed under their own key whatever the app's session is.
        fixed: dict[tuple[str, str | None, str | None], Any] = {}
        for (scope, project, session), stat in counts.items():
            if scope == "session" and session is None and self.engram.session:
                fixed[("session", None, self.engram.session)] = stat
            else:
                fixed[(scope, project, session)] = stat
        tree = self.query_one(ScopeTree)
        tree.rebuild(result["projects"], result["sessions"], self.engram.project, fixed)

    def watch_tq(self, old: TableQuery, new: TableQuery) -> None:
        # A new sort, filter or page starts at its first row (a refresh keeps the cursor where it was); a page
        # turned by scrolling up past the first row starts at its last.
        self._cursor_to = self._cursor_to or "top"
        if (old.order, old.descending) != (new.order, new.descending) and not self.search_text:
            self._set_columns(search=False)  # the header marks the sorted column
        if not self.search_text:
            self.load_page()

    def load_page(self) -> None:
        q = self.tq
        if q.scope == "project" and not q.project:
            self._status("[b]No project[/]: start the TUI inside a project or pass --project DIR")
            return
        self._page_t0 = time.perf_counter()
        self.page_seq = self.call_service(
            "page",
            "list_memories",
            scope=q.scope,
            project=q.project,
            session=q.session,
            memory_type=q.memory_type,
            status=q.status,
            text=q.text or None,
            order=q.order,
            descending=q.descending,
            offset=q.offset,
            limit=PAGE_SIZE,
            context=q,
        )

    def done_page(self, page: Any, message: ServiceDone) -> None:
        if message.seq != self.page_seq or self.search_text:
            return  # a newer keystroke already asked for another page
        self.total = page.total
        items = page.items
        t_fill = time.perf_counter()
        self.rows = {m.id: m for m in items}
        self._fill(items, hits=None)
        self._update_status()
        q = self.tq
        if not self.total and not (q.text or q.status or q.memory_type) and q.scope == "project":
            self.query_one(DetailPane).clear(Content(EMPTY_HELP + "\n\nPress D to open the demo now."))
        # Request → rows in the table (bench/tui.py reads it; it is also what a keystroke in the filter costs).
        self.last_page_ms = (time.perf_counter() - self._page_t0) * 1000
        self.last_fill_ms = (time.perf_counter() - t_fill) * 1000
        self.pages_loaded += 1
        if self.pages_loaded == 1:
            self.load_tree()

    def failed_page(self, message: Any) -> bool:
        if not self.pages_loaded:
            self.load_tree()  # the tree may still work (another scope), and it reports its own failure
        self._status(markup("[b red]Could not load memories:[/] $e", e=message.text))
        return False

    def _fill(self, items: list[Any], hits: list[Any] | None) -> None:
        table = self.query_one("#memory-table", DataTable)
        to, self._cursor_to, self._turning = self._cursor_to, None, False
        keep = None if to else self.current_id
        table.clear()
        now = self.engram.now()
        width = self._content_width
        for i, m in enumerate(items):
            mid = m.id
            strength = float(m.memory_strength)
            status = m.status.value
            mtype = m.memory_type.value
            scope = m.scope.value
            content = short(visible(m.content), width)
            if m.pinned:
                content = "📌" + short(visible(m.content), width - 2)
            cells: dict[str, Any] = {
                "content": content,
                "strength": Text(
                    f"{strength_bar(strength, 5)} {strength:.2f}", style=_strength_style(strength)
                ),
                "status": Text(status, style=_status_style(status)),
                "type": mtype,
                "scope": scope,
                "importance": f"{m.importance:.2f}",
                "access": str(m.access_count),
                "last": age(m.last_accessed_at, now),
            }
            if hits is not None:
                sc = hits[i].scores
                cells |= {
                    "score": f"{sc.final:.3f}",
                    "fused": f"{sc.fused:.3f}",
                    "bm25": str(sc.bm25_rank or "—"),
                    "vector": str(sc.vector_rank or "—"),
                }
            row = [cells[k] for k in self._shown]
            key = mid if mid not in table.rows else f"{mid}#{i}"
            table.add_row(*(c if isinstance(c, Text) else plain(c) for c in row), key=key)
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        elif items and to == "bottom":
            table.move_cursor(row=len(items) - 1)
            self._select(items[-1].id)
        elif items:
            table.move_cursor(row=0)
            self._select(items[0].id)
        else:
            self._select(None)

    def _update_status(self) -> None:
        q = self.tq
        where = [q.scope]
        if q.memory_type:
            where.append(q.memory_type)
        if q.status:
            where.append(q.status)
        table = self.query_one("#memory-table", DataTable)
        row = q.offset + table.cursor_row + 1 if self.total and table.row_count else 0
        first = q.offset + 1 if self.total else 0
        last = min(q.offset + PAGE_SIZE, self.total)
        filt = " · filter [b]$filt[/]" if q.text else ""
        self._status(
            markup(
                f"[b]$where[/] · row {row:,} of [b]{self.total:,}[/] · rows {first:,}–{last:,} loaded"
                + filt
                + (f" · [dim]{len(self.undo)} undoable[/]" if len(self.undo) else ""),
                where=" / ".join(where),
                filt=repr(q.text),
            ),
            markup(f"$where · {row:,} of {self.total:,}" + filt, where=" / ".join(where), filt=repr(q.text)),
        )

    def _status(self, text: str | Content, brief: str | Content | None = None) -> None:
        """The line above the table; on a short terminal (where that line gives its row to the memories) the
        table's bottom border says it (``brief``, when the whole does not fit there)."""
        self.query_one("#table-status", Static).update(text)
        table = self.query_one("#memory-table", DataTable)
        table.border_subtitle = brief if brief is not None else text

    # ── selection → detail ──────────────────────────────────
    @on(DataTable.RowHighlighted, "#memory-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        if not self.search_text and self.pages_loaded:
            self._update_status()
        self._select(event.row_key.value.split("#", 1)[0])

    def _select(self, memory_id: str | None) -> None:
        if memory_id == self.current_id and self.current is not None:
            return
        self.current_id = memory_id
        self.engram.selected_id = memory_id
        self.current = self.rows.get(memory_id) if memory_id else None
        detail = self.query_one(DetailPane)
        if memory_id is None:
            self.current = None
            detail.clear()
            return
        if self.current is not None:
            detail.show(self.current, self.engram.now(), self.engram.mask_db_times)
        # The full detail (graph, retrievals: three calls) once the cursor rests: j held down or typed fast asks
        # the daemon for the row it stops on, not for every row it passes (each answer costs the UI thread too).
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(DETAIL_SETTLE_S, lambda: self.load_detail(memory_id))

    def graph_shown(self) -> bool:
        """Is the detail's entities-and-relations column on screen? (Below 110 columns only a maximised detail
        shows it.)"""
        return self.app.size.width >= NARROW_COLUMNS or self.maximized is self.query_one(DetailPane)

    def load_detail(self, memory_id: str) -> None:
        service = self.engram.service
        # The knowledge graph is asked for only when its column shows: memory_graph takes seconds at 100k, and
        # the daemon answers a client one request at a time (the next page would wait behind it).
        names = ("memory_graph", "retrieval_history") if self.graph_shown() else ("retrieval_history",)

        def fetch() -> dict[str, Any]:
            out: dict[str, Any] = {"memory": service.get(memory_id)}
            if "memory_graph" not in names:
                out["memory_graph_error"] = "[dim]z on the detail shows the entities and relations[/]"
            for name in names:
                try:
                    out[name] = getattr(service, name)(memory_id)
                except Exception as exc:  # noqa: BLE001 - shown in the pane, the rest of the detail still works
                    out[name + "_error"] = markup("[red]$e[/]", e=describe_error(exc))
            return out

        self.run_in_thread("detail", fetch, context=memory_id)

    def done_detail(self, result: dict[str, Any], message: ServiceDone) -> None:
        if message.context != self.current_id:
            return
        m = result["memory"]
        self.current = m
        detail = self.query_one(DetailPane)
        now = self.engram.now()
        detail.show(m, now, self.engram.mask_db_times)
        detail.show_extras(
            result.get("memory_graph"),
            result.get("memory_graph_error"),
            result.get("retrieval_history"),
            result.get("retrieval_history_error"),
            now,
        )

    # ── tree → filter ───────────────────────────────────────
    @on(Tree.NodeSelected, "#scope-tree")
    def _node_selected(self, event: Tree.NodeSelected[NodeData]) -> None:
        data = event.node.data
        if data is None:
            return
        self._leave_search()
        project = data.project if data.scope == "project" else self.tq.project
        self.tq = replace(
            self.tq,
            scope=data.scope,
            project=project,
            session=data.session,
            memory_type=data.memory_type,
            status=data.status,
            offset=0,
        )

    @on(Tree.NodeExpanded, "#scope-tree")
    def _node_expanded(self, event: Tree.NodeExpanded[NodeData]) -> None:
        data = event.node.data
        if data is None:
            return
        service = self.engram.service
        if data.level == "type":

            def count() -> dict[str, int]:
                return {
                    st: service.list_memories(
                        scope=data.scope,
                        project=data.project,
                        session=data.session,
                        memory_type=data.memory_type,
                        status=st,
                        limit=1,
                    ).total
                    for st in STATUSES
                }

            self.run_in_thread("status_counts", count, context=data)
        elif data.level == "scope" and data.scope == "project" and data.project != self.engram.project:
            # Another project's store is opened only when a person looks at it on purpose.
            self.call_service("project_counts", "stats", project=data.project, context=data, exclusive=False)

    def done_status_counts(self, counts: dict[str, int], message: ServiceDone) -> None:
        self.query_one(ScopeTree).set_status_counts(message.context, counts)

    def done_project_counts(self, stats: Any, message: ServiceDone) -> None:
        data: NodeData = message.context
        for sc in stats.scopes:
            if sc.scope.value == "project":
                self.query_one(ScopeTree).set_scope_counts(("project", data.project, None), sc)

    # ── filter and search ───────────────────────────────────
    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # Debounced: a daemon client answers one request at a time, so a query per keystroke of a fast typist
        # would queue up behind each other; only the text after a short pause is asked for.
        if self._filter_timer is not None:
            self._filter_timer.stop()
        value = event.value.strip()
        self._filter_timer = self.set_timer(FILTER_DEBOUNCE_S, lambda: self._apply_filter(value))

    def _apply_filter(self, value: str) -> None:
        self._filter_timer = None
        self._leave_search()
        if value != self.tq.text:
            self.tq = replace(self.tq, text=value, offset=0)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.to_list(commit=True)

    def to_list(self, commit: bool) -> None:
        """Enter or down in the filter: the filter applies now (no debounce wait) and the list takes the keys."""
        if commit:
            if self._filter_timer is not None:
                self._filter_timer.stop()
                self._filter_timer = None
            value = self.query_one("#filter", Input).value.strip()
            if value != self.tq.text:
                self._apply_filter(value)
        self.query_one("#memory-table", DataTable).focus()

    @on(Input.Submitted, "#search")
    def _search(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self.action_clear_search()
            return
        self.search_text = text
        self._status(markup("searching for [b]$t[/]…", t=repr(text)))
        self._cursor_to = "top"
        self._recall()
        self.query_one("#memory-table", DataTable).focus()

    def _recall(self) -> None:
        """The agent's recall, within what the tree selects (type, status), never strengthening what it shows."""
        q = self.tq
        self.call_service(
            "search",
            "recall",
            self.search_text,
            project=q.project,
            session=q.session or self.engram.session,
            limit=100,
            scope="all",
            types=[q.memory_type] if q.memory_type else None,
            statuses=[q.status] if q.status else None,
            strengthen=False,
            log=False,
        )

    def done_search(self, result: Any, _m: ServiceDone) -> None:
        if not self.search_text:
            return
        self.searches_done += 1
        hits = list(result.hits)
        self.hits = {h.memory.id: h for h in hits}
        self.rows = {h.memory.id: h.memory for h in hits}
        self._set_columns(search=True)
        self._fill([h.memory for h in hits], hits=hits)
        degraded = result.degraded
        self._status(
            markup(
                f"[b]recall[/] $q · {len(hits)} hits · $strategy · "
                f"{ms(result.took_ms, self.engram.mask_db_times)} · ranks: BM25# and Vec# per list, Score = final"
                + (" · [yellow]$degraded[/]" if degraded else "")
                + " · [dim]esc: back to the list[/]",
                q=repr(self.search_text),
                strategy=result.strategy,
                degraded=degraded,
            )
        )

    def _leave_search(self) -> None:
        if self.search_text:
            self.search_text = ""
            self._set_columns(search=False)

    def action_clear_search(self) -> None:
        """Escape: restore a maximised part, else leave the search, else clear the filter."""
        if self.maximized is not None:
            self.minimize()
            return
        filt = self.query_one("#filter", Input)
        if not self.search_text and filt.value:
            filt.value = ""
            self._apply_filter("")
        if self.search_text:
            self.query_one("#search", Input).value = ""
            self._leave_search()
            self.load_page()
        self.query_one("#memory-table", DataTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    # ── sorting and paging ──────────────────────────────────
    @on(DataTable.HeaderSelected, "#memory-table")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key not in COLUMNS or COLUMNS[key][1] is None or self.search_text:
            return
        order = COLUMNS[key][1]
        assert order is not None
        desc = not self.tq.descending if order == self.tq.order else order != "content"
        self.tq = replace(self.tq, order=order, descending=desc, offset=0)

    def action_cycle_sort(self) -> None:
        orders = [COLUMNS[k][1] for k in SORTABLE]
        nxt = orders[(orders.index(self.tq.order) + 1) % len(orders)]
        self.tq = replace(self.tq, order=nxt or "created_at", offset=0)

    def action_reverse_sort(self) -> None:
        self.tq = replace(self.tq, descending=not self.tq.descending, offset=0)

    def action_page(self, delta: int) -> None:
        offset = self.tq.offset + delta * PAGE_SIZE
        if 0 <= offset < max(self.total, 1):
            self.tq = replace(self.tq, offset=offset)

    def turn_page(self, delta: int) -> bool:
        """Scrolling past the first or last row of the page shown fetches the page before or after it, so the
        table scrolls through every memory (the cursor lands on the row next to where it was)."""
        if self.search_text or self._turning:
            return self._turning
        offset = self.tq.offset + delta * PAGE_SIZE
        if not 0 <= offset < self.total:
            return False
        self._turning = True
        self._cursor_to = "top" if delta > 0 else "bottom"
        self.tq = replace(self.tq, offset=offset)
        return True

    def action_jump(self, end: bool) -> None:
        """g / G on the table: the first or the last memory of all, not of the page shown."""
        table = self.query_one("#memory-table", DataTable)
        if self.focused is not table or self.search_text:
            super().action_jump(end)
            return
        offset = ((max(self.total, 1) - 1) // PAGE_SIZE) * PAGE_SIZE if end else 0
        if offset == self.tq.offset:
            super().action_jump(end)
            return
        self._cursor_to = "bottom" if end else "top"
        self._turning = True
        self.tq = replace(self.tq, offset=offset)

    def action_refresh(self) -> None:
        self.refresh_all()

    def refresh_all(self) -> None:
        if self.search_text:
            self._recall()
        else:
            self.load_page()
        self.load_tree()
        if self.current_id:
            self.load_detail(self.current_id)

    # ── actions on the selected memory ──────────────────────
    def _need_current(self) -> Any | None:
        if self.current is None:
            self.notify("Select a memory first", severity="warning")
        return self.current

    def _ask(self, question: str | Content, then: Any, title: str = "Confirm") -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                then()

        self.app.push_screen(ConfirmScreen(question, title=title), answered)

    def _before(self, m: Any) -> dict[str, Any]:
        return {
            "status": m.status.value,
            "content": m.content,
            "tags": list(m.tags),
            "metadata": dict(m.metadata),
            "importance": m.importance,
            "pinned": bool(m.pinned),
        }

    def action_edit(self) -> None:
        m = self._need_current()
        if m is None:
            return
        mid = m.id
        before = self._before(m)

        def edited(changes: dict[str, Any] | None) -> None:
            if not changes:
                return
            from engram_core.models import MemoryPatch

            entry = UndoEntry("edit", mid, "edit", before={k: before[k] for k in changes})
            self.call_service("mutate", "update", mid, MemoryPatch(**changes), context=entry)

        self.app.push_screen(EditMemoryScreen(m.content, list(m.tags), float(m.importance)), edited)

    def action_pin(self) -> None:
        m = self._need_current()
        if m is None:
            return
        from engram_core.models import MemoryPatch

        pinned = bool(m.pinned)
        entry = UndoEntry("pin", m.id, "unpin" if pinned else "pin", before={"pinned": pinned})
        self.call_service("mutate", "update", m.id, MemoryPatch(pinned=not pinned), context=entry)

    def action_promote(self) -> None:
        m = self._need_current()
        if m is None:
            return
        scope = m.scope.value
        if scope == "user":
            self.notify("Already in user scope, the highest", severity="warning")
            return
        target = "project" if scope == "session" else "user"
        entry = UndoEntry("promote", m.id, f"promote to {target}")
        self._ask(
            markup(f"Promote this {scope} memory to [b]{target}[/] scope?\n\n$c", c=short(m.content, 200)),
            lambda: self.call_service(
                "mutate",
                "promote",
                m.id,
                target,
                project=self.tq.project,
                session=self.tq.session,
                context=entry,
            ),
            title="Promote",
        )

    def action_archive(self) -> None:
        m = self._need_current()
        if m is None:
            return
        entry = UndoEntry("archive", m.id, "archive", before=self._before(m))
        self._ask(
            markup(
                "Archive this memory? Recall will skip it until it is restored.\n\n$c",
                c=short(m.content, 200),
            ),
            lambda: self.call_service(
                "mutate", "set_status", m.id, "archived", reason="archived in the TUI", context=entry
            ),
            title="Archive",
        )

    def action_forget(self) -> None:
        m = self._need_current()
        if m is None:
            return
        entry = UndoEntry("forget", m.id, "forget", before=self._before(m))
        self._ask(
            markup(
                "Forget this memory? Recall and injection stop using it (it is archived and keeps its "
                "text: u undoes it here, `engram restore` later).\n\n$c",
                c=short(m.content, 200),
            ),
            lambda: self.call_service("mutate", "forget", m.id, reason="forgotten in the TUI", context=entry),
            title="Forget",
        )

    def done_mutate(self, result: Any, message: ServiceDone) -> None:
        entry: UndoEntry = message.context
        if entry.action == "promote":
            promoted = list(result.promoted or [])
            entry.created_id = promoted[0].split(":", 1)[-1] if promoted else None
            note = result.message or "promoted"
        else:
            note = f"{entry.label} done"
        self.undo.push(entry)
        self.notify(f"{note} · u to undo", title="Engram")
        self.current = None
        self.refresh_all()

    def action_undo(self) -> None:
        entry = self.undo.pop()
        if entry is None:
            self.notify("Nothing to undo on this screen", severity="warning")
            return
        service = self.engram.service

        def apply() -> UndoEntry:
            for name, args, kwargs in undo_plan(entry):
                getattr(service, name)(*args, **kwargs)
            return entry

        self.run_in_thread("undone", apply)

    def done_undone(self, entry: UndoEntry, _m: ServiceDone) -> None:
        self.notify(f"undid {entry.label}", title="Engram")
        self.current = None
        self.refresh_all()

    def leave(self) -> None:
        """The screen is being left: changes made here can no longer be undone."""
        self.undo.clear()


def fit_columns(avail: int, search: bool) -> tuple[list[str], int]:
    """Which columns fit ``avail`` cells, in the order shown, and the content column's width.

    Every column has a fixed width plus 2 cells of padding; the content column takes what the others leave. When
    it would get fewer than CONTENT_MIN cells, whole columns go (DROP_ORDER, SEARCH_DROP): a number is
    never cut, and nothing needs a horizontal scrollbar."""
    keys = [k for k in COLUMNS if k != "created"]
    extra = list(SEARCH_COLUMNS) if search else []
    drops = SEARCH_DROP if search else DROP_ORDER

    def others(shown: list[str]) -> int:
        return sum((6 if k in SEARCH_COLUMNS else WIDTHS[k]) + 2 for k in shown if k != "content") + 2

    shown = extra + keys
    for key in drops:
        if avail - others(shown) >= CONTENT_MIN:
            break
        shown.remove(key)
    return shown, max(CONTENT_MIN if avail >= CONTENT_MIN + 2 else 8, avail - others(shown))


def _status_style(status: str) -> str:
    return {
        "active": "green",
        "created": "cyan",
        "consolidated": "blue",
        "archived": "yellow",
        "superseded": "magenta",
        "forgotten": "red dim",
    }.get(status, "")


def _strength_style(value: float) -> str:
    return "green" if value >= 0.3 else "yellow" if value >= 0.1 else "red" if value >= 0.01 else "red dim"
