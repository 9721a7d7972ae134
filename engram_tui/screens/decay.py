"""Decay view: strength curves projected forward with the consolidate/archive/forget thresholds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Header, Static
from textual_plotext import PlotextPlot

from engram_core.memory.scoring import THRESHOLDS, crossing_time, effective_half_life, memory_strength

from ..fmt import age, exempt_from_decay, short, stamp
from ..layout import NARROW_COLUMNS
from ..messages import ServiceDone
from ..safe import lines, markup, visible
from ..widgets.footer import PaneFooter
from ..widgets.modebar import ModeBar
from .base import ServiceScreen

THRESHOLD_COLORS = {"consolidate": "orange", "archive": "red", "forget": "gray"}
AGG_SAMPLE = 2000  # memories per scope the aggregate curves are averaged over (newest accessed first)
POINTS = 80  # curve samples; the plot is ~this many columns wide, so more would only cost time


def _curve(m: Any, xs: list[float], now: datetime) -> list[float]:
    imp, hl, acc, last = m.importance, m.half_life_days, m.access_count, m.last_accessed_at
    return [memory_strength(imp, hl, acc, last, now + timedelta(days=x)) for x in xs]


def _span(start: float, end: float, n: int = POINTS) -> list[float]:
    step = (end - start) / (n - 1)
    return [start + i * step for i in range(n)]


def aggregate(memories: list[Any], key: str, now: datetime, horizon_days: float) -> dict[str, list[float]]:
    """Mean strength per group (type or scope) from now to ``horizon_days`` ahead."""
    xs = _span(0.0, horizon_days)
    groups: dict[str, list[list[float]]] = {}
    for m in memories:
        groups.setdefault(getattr(m, key).value, []).append(_curve(m, xs, now))
    return {
        g: [sum(col) / len(curves) for col in zip(*curves, strict=True)]
        for g, curves in sorted(groups.items())
    }


class DecayScreen(ServiceScreen):
    BINDINGS = [
        Binding(
            "R", "refresh", "Refresh", id="decay.refresh", tooltip="Re-read the memory and the aggregates"
        ),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", id="decay.zoom_in"),
        Binding("minus", "zoom(2)", "Zoom out", id="decay.zoom_out"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.memory: Any | None = None
        self.agg: dict[str, Any] | None = None
        self.zoom = 1.0
        self._seen: tuple[Any, ...] | None = None
        # The time axis stays put for a memory (and a zoom): a recall then visibly moves the curve and its
        # crossings along the axis instead of the axis rescaling under them. (memory id, zoom, origin, x0, x1)
        self._axis: tuple[str, float, datetime, float, float] | None = None
        self.before: Any | None = (
            None  # the memory as it was before a recall or feedback changed its strength
        )
        self.change_note: str = ""
        self.plot_title = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield ModeBar("decay")
        with Vertical(id="decay"):
            with Horizontal(id="decay-top"):
                yield PlotextPlot(id="decay-memory")
                yield Static("", id="decay-info")
            with Horizontal(id="decay-bottom"):
                yield PlotextPlot(id="decay-types")
                yield PlotextPlot(id="decay-scopes")
        yield PaneFooter()

    def on_mount(self) -> None:
        self.query_one("#decay-memory").border_title = "Selected memory: strength over time"
        self.query_one("#decay-info").border_title = "Threshold crossings"
        self.query_one("#decay-types").border_title = "Mean strength by type"
        self.query_one("#decay-scopes").border_title = "Mean strength by scope"
        # Live: re-read the selected memory (an agent's recall strengthens it) and move with the clock.
        self.set_interval(2.0, self._tick)
        self.set_interval(30.0, self._tick_aggregates)

    def on_screen_resume(self) -> None:
        self.load_selected()
        self.load_aggregates()

    def action_refresh(self) -> None:
        self.load_selected()
        self.load_aggregates()

    def action_zoom(self, factor: float) -> None:
        self.zoom = min(16.0, max(1 / 16, self.zoom * factor))
        self._axis = None
        self.draw_memory()
        self.draw_aggregates()

    def _tick_aggregates(self) -> None:
        if self.app.screen is self:  # hidden panes cost the daemon nothing
            self.load_aggregates()

    def refresh_data(self) -> None:
        self.load_selected(quiet=True)
        self.load_aggregates()

    def _tick(self) -> None:
        if self.app.screen is self:
            self.load_selected(quiet=True)

    def load_selected(self, quiet: bool = False) -> None:
        mid = self.engram.selected_id
        if mid is None:
            self.memory = None
            self.draw_memory()
            return
        self.call_service("selected", "get", mid, context=quiet)

    def done_selected(self, m: Any, _m: ServiceDone) -> None:
        now = self.engram.now()
        seen = (m.id, m.access_count, m.last_accessed_at, m.importance, m.status, now)
        if seen == self._seen:
            return  # nothing moved: do not redraw (keeps the terminal quiet and snapshots stable)
        self._seen = seen
        old = self.memory
        if (
            old is not None
            and old.id == m.id
            and (old.access_count, old.last_accessed_at, old.importance, old.half_life_days)
            != (m.access_count, m.last_accessed_at, m.importance, m.half_life_days)
        ):
            self.before = old
            self.change_note = self._describe_change(old, m)
            self.notify(f"Decay: {self.change_note}", title="Engram", timeout=6)
        elif old is None or old.id != m.id:
            self.before, self.change_note = None, ""
        self.memory = m
        self.draw_memory()

    def _describe_change(self, old: Any, new: Any) -> str:
        """What a recall (or a feedback, or an edit) did to the strength and the archive date."""
        now = self.engram.now()
        what = "recalled" if new.access_count > old.access_count else "changed"
        out = (
            f"{what} at {now:%H:%M}: strength {float(old.memory_strength):.2f} → {float(new.memory_strength):.2f}, "
            f"half-life {effective_half_life(old.half_life_days, old.access_count):.3g} d → "
            f"{effective_half_life(new.half_life_days, new.access_count):.3g} d"
        )
        t_old, t_new = (
            crossing_time(
                x.importance, x.half_life_days, x.access_count, x.last_accessed_at, THRESHOLDS["archive"]
            )
            for x in (old, new)
        )
        if t_old is not None and t_new is not None and t_new > now:
            out += f", archive in {(t_old - now).total_seconds() / 86400:.1f} d → {(t_new - now).total_seconds() / 86400:.1f} d"
        return out

    def load_aggregates(self) -> None:
        service = self.engram.service
        project, session = self.engram.project, self.engram.session
        now = self.engram.now()

        def fetch() -> dict[str, Any]:
            mems: list[Any] = []
            for scope in ("session", "project", "user"):
                if (scope == "project" and not project) or (scope == "session" and not session):
                    continue
                page = service.list_memories(
                    scope=scope,
                    project=project,
                    session=session,
                    order="last_accessed_at",
                    descending=True,
                    limit=AGG_SAMPLE,
                )
                mems += [m for m in page.items if m.status.value not in ("forgotten", "superseded")]
            return {"memories": mems, "now": now}

        self.run_in_thread("aggregates", fetch)

    def done_aggregates(self, result: dict[str, Any], _m: ServiceDone) -> None:
        self.agg = result
        self.draw_aggregates()

    # ── drawing ─────────────────────────────────────────────
    def draw_memory(self) -> None:
        plot = self.query_one("#decay-memory", PlotextPlot)
        info = self.query_one("#decay-info", Static)
        plt = plot.plt
        plt.clear_figure()
        m = self.memory
        if m is None:
            plt.title("Select a memory in the Memories pane (1), then come back (2)")
            info.update("[dim]No memory selected.[/]")
            plot.refresh()
            return
        now = self.engram.now()
        imp, hl, acc, last = m.importance, m.half_life_days, m.access_count, m.last_accessed_at
        crossings = {name: crossing_time(imp, hl, acc, last, t) for name, t in THRESHOLDS.items()}
        origin, x0, x1 = self._axis_for(m, now, crossings)
        xs = _span(x0, x1)
        at = [origin + timedelta(days=x) for x in xs]
        if self.before is not None:
            b = self.before
            plt.plot(
                xs,
                [
                    memory_strength(b.importance, b.half_life_days, b.access_count, b.last_accessed_at, t)
                    for t in at
                ],
                color="gray",
                marker="hd",
            )
        plt.plot(xs, [memory_strength(imp, hl, acc, last, t) for t in at], color="cyan", marker="hd")
        for name, value in THRESHOLDS.items():
            plt.hline(value, THRESHOLD_COLORS[name])
        plt.vline((now - origin).total_seconds() / 86400, "white")  # now: moves right as time passes
        plt.ylim(0, max(1.0, imp))
        plt.xlim(x0, x1)
        plt.xlabel(f"days from {origin:%b %d %H:%M} (the white line is now)")
        # Fitted to the plot's width: plotext leaves a title that does not fit blank (80×24).
        self.plot_title = short(visible(m.content), max(20, (plot.size.width or 80) - 6))
        plt.title(self.plot_title)
        plot.border_subtitle = "grey: before the last recall" if self.before is not None else ""
        plot.refresh()

        # The crossings first: at 80×24 this box shows only its first few lines (the plot's title names the memory).
        # What just changed comes first: a recall seen while watching is the news (at 80×24 the first lines show).
        out: list[Content | str] = (
            [markup("[b yellow]$n[/]", n=self.change_note), ""] if self.change_note else []
        )
        pinned = exempt_from_decay(m)
        for name, value in THRESHOLDS.items():
            when = crossings[name]
            color = THRESHOLD_COLORS[name]
            if pinned:
                text = "exempt (pinned: the sweep never acts on it)"
            elif when is None:
                text = "never above it"
            elif when <= now:
                text = f"crossed {stamp(when)} ({age(when, now)})"
            else:
                text = f"{stamp(when)} ({age(when, now)})"
            out.append(f"[{color}]━━[/] [b]{name}[/] < {value:g}: {text}")
        out += [
            "",
            f"[dim]now[/]          {stamp(now)}",
            f"[dim]strength[/]     [b]{m.memory_strength:.3f}[/]",
            f"[dim]importance[/]   {imp:.2f}",
            f"[dim]half-life[/]    {hl:.3g} d × (1 + 0.2 × {acc} accesses) = {effective_half_life(hl, acc):.3g} d",
            f"[dim]last access[/]  {stamp(last)} ({age(last, now)})",
            "",
            markup("$c", c=short(m.content, 240)),
            "",
            "[dim]Recall strengthens a memory (+1 access, clock reset); the curve follows live.[/]",
            "[dim]+/- zoom the time axis.[/]",
        ]
        info.update(lines(*out))

    def _axis_for(
        self, m: Any, now: datetime, crossings: dict[str, datetime | None]
    ) -> tuple[datetime, float, float]:
        """The memory's time axis: set when it is first drawn (or zoomed), then kept while ``now`` is on it."""
        axis = self._axis
        if axis is not None and axis[0] == m.id and axis[1] == self.zoom:
            _, _, origin, x0, x1 = axis
            if x0 <= (now - origin).total_seconds() / 86400 <= x1:
                return origin, x0, x1
        future = [(c - now).total_seconds() / 86400 for c in crossings.values() if c is not None and c > now]
        horizon = max([1.0, *future]) * 1.6 * self.zoom  # room for a recall to push the crossings right
        past = min(max(0.0, (now - m.last_accessed_at).total_seconds() / 86400), horizon * 0.5)
        self._axis = (m.id, self.zoom, now, -past, horizon)
        return now, -past, horizon

    def draw_aggregates(self) -> None:
        for wid, key in (("#decay-types", "memory_type"), ("#decay-scopes", "scope")):
            plot = self.query_one(wid, PlotextPlot)
            plt = plot.plt
            plt.clear_figure()
            if not self.agg or not self.agg["memories"]:
                plt.title("no memories yet")
                plot.refresh()
                continue
            horizon = 30.0 * self.zoom
            xs = _span(0.0, horizon)
            curves = aggregate(self.agg["memories"], key, self.agg["now"], horizon)
            colors = ["cyan", "green", "magenta", "yellow"]
            legend = []
            for i, (group, ys) in enumerate(curves.items()):
                n = sum(1 for m in self.agg["memories"] if getattr(m, key).value == group)
                color = colors[i % len(colors)]
                # No plot legend: it covered the curves. The border names each line in its colour.
                plt.plot(xs, ys, color=color, marker="hd")
                name = group[:4] if self.app.size.width < NARROW_COLUMNS else group
                legend.append(f"[{color}]━ {name} {n}[/]")
            plot.border_title = f"Mean strength by {'type' if key == 'memory_type' else 'scope'} " + " ".join(
                legend
            )
            for name, value in THRESHOLDS.items():
                plt.hline(value, THRESHOLD_COLORS[name])
            plt.ylim(0, 1)
            plt.xlabel("days from now")
            plot.refresh()
