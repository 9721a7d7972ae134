"""Detail pane: every field of the selected memory, its history, promotion chain, graph and retrievals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ..fmt import age, stamp, strength_bar, wall_stamp
from ..safe import lines, markup

SELECT = "[dim]Select a memory in the table.[/]"


class DetailPane(Horizontal):
    """Three columns; ``show`` fills them from a Memory (plus graph and retrieval history when known).
    Each column takes focus (an accent border) and scrolls with j/k; z maximises the whole detail."""

    ALLOW_MAXIMIZE = True

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-fields", classes="detail-col"):
            yield Static(SELECT, id="detail-fields-text")
        with VerticalScroll(id="detail-history", classes="detail-col"):
            yield Static("", id="detail-history-text")
        with VerticalScroll(id="detail-graph", classes="detail-col"):
            yield Static("", id="detail-graph-text")

    def on_mount(self) -> None:
        self.query_one("#detail-fields").border_title = "Memory"
        self.query_one("#detail-history").border_title = "History"
        self.query_one("#detail-graph").border_title = "Entities · relations · retrievals"

    def clear(self, text: str | Content = SELECT) -> None:
        self.query_one("#detail-fields-text", Static).update(text)
        self.query_one("#detail-history-text", Static).update("")
        self.query_one("#detail-graph-text", Static).update("")

    def show(self, m: Any, now: datetime, mask_db_times: bool = False) -> None:
        status = m.status.value
        strength = float(m.memory_strength)
        pinned = bool(m.pinned)
        rows: list[Content | str] = [
            markup("[b]$content[/]", content=m.content),
            "",
            markup(
                "[dim]id[/]          $id" + ("  [b yellow]📌 pinned: exempt from decay[/]" if pinned else ""),
                id=m.id,
            ),
            markup(
                "[dim]scope[/]       $scope    [dim]type[/] $type    [dim]status[/] [b]$status[/]",
                scope=m.scope.value,
                type=m.memory_type.value,
                status=status,
            ),
            markup("[dim]tags[/]        $tags", tags=", ".join(m.tags) or "—"),
            markup(
                "[dim]strength[/]    $s $bar"
                + ("  [dim](pinned: never archived or forgotten by decay)[/]" if pinned else ""),
                s=f"{strength:.3f}",
                bar=strength_bar(strength, 10),
            ),
            f"[dim]importance[/]  {m.importance:.2f}   [dim]confidence[/] {m.confidence:.2f}"
            f"   [dim]quality[/] {m.quality:.2f}",
            f"[dim]accesses[/]    {m.access_count}   [dim]half-life[/] "
            + f"{m.half_life_days:.3g} d"
            + f"   [dim]relevance[/] {m.relevance_score:.2f}",
            f"[dim]created[/]     {stamp(m.created_at)}  ({age(m.created_at, now)})",
            f"[dim]last access[/] {stamp(m.last_accessed_at)}  ({age(m.last_accessed_at, now)})",
            f"[dim]updated[/]     {wall_stamp(m.updated_at, mask_db_times)}",
        ]
        for key in ("source", "session_id", "episode_id", "consolidated_into", "invalid_at"):
            value = getattr(m, key)
            if value:
                rows.append(markup("[dim]$key[/]  $value", key=key.replace("_", " "), value=value))
        meta = m.metadata
        if meta:
            rows.append("[dim]metadata[/]")
            rows += [
                markup("  $k: $v", k=k, v=str(v)[:80])
                for k, v in sorted(meta.items(), key=lambda kv: str(kv[0]))
            ]
        self.query_one("#detail-fields-text", Static).update(lines(*rows))

        hist: list[Content | str] = ["[b]Status history[/]"]
        for h in m.status_history:
            hist.append(
                markup(
                    "$at  $frm → [b]$to[/]  [dim]$reason[/]",
                    at=wall_stamp(h.at, mask_db_times),
                    frm=h.from_status or "·",
                    to=h.to_status,
                    reason=h.reason or "",
                )
            )
        if len(hist) == 1:
            hist.append("[dim]none recorded[/]")
        hist += ["", "[b]Promotion chain[/]"]
        chain = m.promotion_chain
        if chain:
            hist += [markup("  $i. $c", i=i + 1, c=c) for i, c in enumerate(chain)]
            hist.append(markup("  → $scope:$id (this)", scope=m.scope.value, id=m.id))
        else:
            hist.append("[dim]  not promoted[/]")
        self.query_one("#detail-history-text", Static).update(lines(*hist))
        self.query_one("#detail-graph-text", Static).update("[dim]loading…[/]")

    def show_extras(
        self,
        graph: Any | None,
        graph_error: str | Content | None,
        retrievals: Any | None,
        retrieval_error: str | Content | None,
        now: datetime,
    ) -> None:
        out: list[Content | str] = ["[b]Entities[/]"]
        if graph_error:
            out.append(graph_error)
        elif graph is not None:
            # Sorted: the graph store returns them in no promised order.
            entities = sorted(graph.entities, key=lambda e: e.name)
            out += [markup("  • $name [dim]$kind[/]", name=e.name, kind=e.entity_type) for e in entities] or [
                "[dim]  none[/]"
            ]
            out += ["", "[b]Relations[/]"]
            rels = sorted(graph.relations, key=lambda r: (r.source_name, r.relation_type, r.target_name))
            out += [
                markup(
                    "  $a —$rel→ $b",
                    a=r.source_name or r.source or "?",
                    rel=r.relation_type,
                    b=r.target_name or r.target or "?",
                )
                for r in rels
            ] or ["[dim]  none[/]"]
        out += ["", "[b]Retrieval history[/]"]
        if retrieval_error:
            out.append(retrieval_error)
        else:
            items = list(retrievals or [])
            for r in items[:20]:
                out.append(
                    markup("  $when  $query", when=f"{age(r.created_at, now):>12}", query=r.query[:60])
                )
            if not items:
                out.append("[dim]  never recalled[/]")
        self.query_one("#detail-graph-text", Static).update(lines(*out))
