"""Detail pane: every field of the selected memory, its history, promotion chain, graph and retrievals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ..backend import attr, value_of
from ..fmt import age, stamp, strength_bar, wall_stamp
from ..safe import lines, markup

NOT_YET = "[dim]not available yet (the self-organising layer has not landed in this build)[/]"
SELECT = "[dim]Select a memory in the table.[/]"


class DetailPane(Horizontal):
    """Three columns; ``show`` fills them from a Memory (plus graph and retrieval history when known)."""

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
        status = value_of(attr(m, "status"))
        strength = float(attr(m, "memory_strength", 0.0))
        pinned = bool(attr(m, "pinned"))
        rows: list[Content | str] = [
            markup("[b]$content[/]", content=attr(m, "content") or ""),
            "",
            markup("[dim]id[/]          $id" + ("  [b yellow]📌 pinned: exempt from decay[/]" if pinned else ""),
                   id=attr(m, "id")),
            markup("[dim]scope[/]       $scope    [dim]type[/] $type    [dim]status[/] [b]$status[/]",
                   scope=value_of(attr(m, "scope")), type=value_of(attr(m, "memory_type")), status=status),
            markup("[dim]tags[/]        $tags", tags=", ".join(attr(m, "tags") or []) or "—"),
            markup("[dim]strength[/]    $s $bar" + ("  [dim](pinned: never archived or forgotten by decay)[/]" if pinned
                                                    else ""),
                   s=f"{strength:.3f}", bar=strength_bar(strength, 10)),
            f"[dim]importance[/]  {attr(m, 'importance', 0):.2f}   [dim]confidence[/] {attr(m, 'confidence', 0):.2f}"
            f"   [dim]quality[/] {attr(m, 'quality', 0):.2f}",
            f"[dim]accesses[/]    {attr(m, 'access_count', 0)}   [dim]half-life[/] "
            + f"{attr(m, 'half_life_days', 0):.3g} d"
            + f"   [dim]relevance[/] {attr(m, 'relevance_score', 0):.2f}",
            f"[dim]created[/]     {stamp(attr(m, 'created_at'))}  ({age(attr(m, 'created_at'), now)})",
            f"[dim]last access[/] {stamp(attr(m, 'last_accessed_at'))}  ({age(attr(m, 'last_accessed_at'), now)})",
            f"[dim]updated[/]     {wall_stamp(attr(m, 'updated_at'), mask_db_times)}",
        ]
        for key in ("source", "session_id", "episode_id", "consolidated_into", "invalid_at"):
            value = attr(m, key)
            if value:
                rows.append(markup("[dim]$key[/]  $value", key=key.replace("_", " "), value=value))
        meta = attr(m, "metadata") or {}
        if meta:
            rows.append("[dim]metadata[/]")
            rows += [markup("  $k: $v", k=k, v=str(v)[:80]) for k, v in sorted(meta.items(), key=lambda kv: str(kv[0]))]
        self.query_one("#detail-fields-text", Static).update(lines(*rows))

        hist: list[Content | str] = ["[b]Status history[/]"]
        for h in attr(m, "status_history") or []:
            hist.append(markup("$at  $frm → [b]$to[/]  [dim]$reason[/]", at=wall_stamp(attr(h, "at"), mask_db_times),
                               frm=attr(h, "from_status") or attr(h, "from") or "·",
                               to=attr(h, "to_status") or attr(h, "to") or "", reason=attr(h, "reason") or ""))
        if len(hist) == 1:
            hist.append("[dim]none recorded[/]")
        hist += ["", "[b]Promotion chain[/]"]
        chain = attr(m, "promotion_chain") or []
        if chain:
            hist += [markup("  $i. $c", i=i + 1, c=c) for i, c in enumerate(chain)]
            hist.append(markup("  → $scope:$id (this)", scope=value_of(attr(m, "scope")), id=attr(m, "id")))
        else:
            hist.append("[dim]  not promoted[/]")
        self.query_one("#detail-history-text", Static).update(lines(*hist))
        self.query_one("#detail-graph-text", Static).update("[dim]loading…[/]")

    def show_extras(self, graph: Any | None, graph_error: str | Content | None, retrievals: Any | None,
                    retrieval_error: str | Content | None, now: datetime) -> None:
        out: list[Content | str] = ["[b]Entities[/]"]
        if graph_error:
            out.append(graph_error)
        else:
            # Sorted: the graph store returns them in no promised order.
            entities = sorted(attr(graph, "entities") or [], key=lambda e: str(attr(e, "name") or e))
            out += [markup("  • $name [dim]$kind[/]", name=attr(e, "name") or e, kind=attr(e, "entity_type") or "")
                    for e in entities] or ["[dim]  none[/]"]
            out += ["", "[b]Relations[/]"]
            rels = sorted(attr(graph, "relations") or [],
                          key=lambda r: (str(attr(r, "source_name") or ""), str(attr(r, "relation_type") or ""),
                                         str(attr(r, "target_name") or "")))
            out += [markup("  $a —$rel→ $b", a=attr(r, "source_name") or attr(r, "source") or "?",
                           rel=attr(r, "relation_type") or "rel", b=attr(r, "target_name") or attr(r, "target") or "?")
                    for r in rels] or ["[dim]  none[/]"]
        out += ["", "[b]Retrieval history[/]"]
        if retrieval_error:
            out.append(retrieval_error)
        else:
            items = list(retrievals or [])
            for r in items[:20]:
                when = attr(r, "created_at") or attr(r, "at")
                out.append(markup("  $when  $query", when=f"{age(when, now) if when else '':>12}",
                                  query=str(attr(r, "query") or "")[:60]))
            if not items:
                out.append("[dim]  never recalled[/]")
        self.query_one("#detail-graph-text", Static).update(lines(*out))
