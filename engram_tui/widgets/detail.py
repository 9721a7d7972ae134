"""Detail pane: every field of the selected memory, its history, promotion chain, graph and retrievals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from ..backend import attr
from ..fmt import age, stamp, strength_bar, wall_stamp

NOT_YET = "[dim]not available yet (the self-organising layer has not landed in this build)[/]"


class DetailPane(Horizontal):
    """Three columns; ``show`` fills them from a Memory (plus graph and retrieval history when known)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-fields", classes="detail-col"):
            yield Static("[dim]Select a memory in the table.[/]", id="detail-fields-text")
        with VerticalScroll(id="detail-history", classes="detail-col"):
            yield Static("", id="detail-history-text")
        with VerticalScroll(id="detail-graph", classes="detail-col"):
            yield Static("", id="detail-graph-text")

    def on_mount(self) -> None:
        self.query_one("#detail-fields").border_title = "Memory"
        self.query_one("#detail-history").border_title = "History"
        self.query_one("#detail-graph").border_title = "Entities · relations · retrievals"

    def clear(self, text: str = "[dim]Select a memory in the table.[/]") -> None:
        self.query_one("#detail-fields-text", Static).update(text)
        self.query_one("#detail-history-text", Static).update("")
        self.query_one("#detail-graph-text", Static).update("")

    def show(self, m: Any, now: datetime, mask_db_times: bool = False) -> None:
        status = attr(m, "status")
        status = getattr(status, "value", status)
        mtype = getattr(attr(m, "memory_type"), "value", attr(m, "memory_type"))
        scope = getattr(attr(m, "scope"), "value", attr(m, "scope"))
        strength = float(attr(m, "memory_strength", 0.0))
        pin = "  [b yellow]📌 pinned[/]" if attr(m, "pinned") else ""
        rows = [
            f"[b]{escape(attr(m, 'content'))}[/]",
            "",
            f"[dim]id[/]          {attr(m, 'id')}{pin}",
            f"[dim]scope[/]       {scope}    [dim]type[/] {mtype}    [dim]status[/] [b]{status}[/]",
            f"[dim]tags[/]        {escape(', '.join(attr(m, 'tags') or [])) or '—'}",
            f"[dim]strength[/]    {strength:.3f} {strength_bar(strength, 10)}",
            f"[dim]importance[/]  {attr(m, 'importance'):.2f}   [dim]confidence[/] {attr(m, 'confidence', 0):.2f}"
            f"   [dim]quality[/] {attr(m, 'quality', 0):.2f}",
            f"[dim]accesses[/]    {attr(m, 'access_count')}   [dim]half-life[/] {attr(m, 'half_life_days'):.3g} d"
            f"   [dim]relevance[/] {attr(m, 'relevance_score', 0):.2f}",
            f"[dim]created[/]     {stamp(attr(m, 'created_at'))}  ({age(attr(m, 'created_at'), now)})",
            f"[dim]last access[/] {stamp(attr(m, 'last_accessed_at'))}  ({age(attr(m, 'last_accessed_at'), now)})",
            f"[dim]updated[/]     {wall_stamp(attr(m, 'updated_at'), mask_db_times)}",
        ]
        for key in ("source", "session_id", "episode_id", "consolidated_into", "invalid_at"):
            value = attr(m, key)
            if value:
                rows.append(f"[dim]{key.replace('_', ' ')}[/]  {escape(str(value))}")
        meta = attr(m, "metadata") or {}
        if meta:
            rows.append("[dim]metadata[/]")
            rows += [f"  {escape(str(k))}: {escape(str(v))[:80]}" for k, v in sorted(meta.items())]
        self.query_one("#detail-fields-text", Static).update("\n".join(rows))

        hist = ["[b]Status history[/]"]
        for h in attr(m, "status_history") or []:
            frm = attr(h, "from_status") or attr(h, "from") or "·"
            hist.append(f"{wall_stamp(attr(h, 'at'), mask_db_times)}  {frm} → [b]{attr(h, 'to_status') or attr(h, 'to')}[/]"
                        f"  [dim]{escape(attr(h, 'reason') or '')}[/]")
        if len(hist) == 1:
            hist.append("[dim]none recorded[/]")
        hist += ["", "[b]Promotion chain[/]"]
        chain = attr(m, "promotion_chain") or []
        if chain:
            hist += [f"  {i + 1}. {escape(c)}" for i, c in enumerate(chain)]
            hist.append(f"  → {scope}:{attr(m, 'id')} (this)")
        else:
            hist.append("[dim]  not promoted[/]")
        self.query_one("#detail-history-text", Static).update("\n".join(hist))
        self.query_one("#detail-graph-text", Static).update("[dim]loading…[/]")

    def show_extras(self, graph: Any | None, graph_error: str | None, retrievals: Any | None,
                    retrieval_error: str | None, now: datetime) -> None:
        lines = ["[b]Entities[/]"]
        if graph_error:
            lines.append(graph_error)
        else:
            # Sorted: the graph store returns them in no promised order.
            entities = sorted(attr(graph, "entities") or [], key=lambda e: str(attr(e, "name") or e))
            lines += [f"  • {escape(str(attr(e, 'name') or e))} [dim]{escape(str(attr(e, 'entity_type') or ''))}[/]"
                      for e in entities] or ["[dim]  none[/]"]
            lines += ["", "[b]Relations[/]"]
            rels = sorted(attr(graph, "relations") or [],
                          key=lambda r: (str(attr(r, "source_name") or ""), str(attr(r, "relation_type") or ""),
                                         str(attr(r, "target_name") or "")))
            lines += [f"  {escape(str(attr(r, 'source_name') or attr(r, 'source') or '?'))} "
                      f"—{escape(str(attr(r, 'relation_type') or 'rel'))}→ "
                      f"{escape(str(attr(r, 'target_name') or attr(r, 'target') or '?'))}" for r in rels] or ["[dim]  none[/]"]
        lines += ["", "[b]Retrieval history[/]"]
        if retrieval_error:
            lines.append(retrieval_error)
        else:
            items = list(retrievals or [])
            for r in items[:20]:
                when = attr(r, "created_at") or attr(r, "at")
                when_text = age(when, now) if when else ""
                lines.append(f"  {when_text:>12}  {escape(str(attr(r, 'query') or ''))[:60]}")
            if not items:
                lines.append("[dim]  never recalled[/]")
        self.query_one("#detail-graph-text", Static).update("\n".join(lines))
