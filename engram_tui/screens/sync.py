"""Project and sync: which project this folder is and why, each sync channel's state, and what is shared with the
team (u unshares; s syncs now). Opened from the command palette ("App: project and sync")."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Header, Static

from ..fmt import short
from ..messages import ServiceDone
from ..safe import plain, visible
from ..widgets.footer import PaneFooter
from .base import ReloadingScreen

SHARED_TAG = "shared"


class SyncScreen(ReloadingScreen):
    BINDINGS = [
        Binding(
            "R", "refresh", "Refresh", id="sync.refresh", tooltip="Read identity, sync state and shares again"
        ),
        Binding(
            "s", "sync_now", "Sync now", id="sync.run", tooltip="Run `engram sync` (the personal channel) now"
        ),
        Binding("u", "unshare", "Unshare", id="sync.unshare", tooltip="Stop sharing the selected memory"),
        Binding("escape,q", "close", "Close", id="sync.close"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="sync"):
            yield Static("", id="sync-project")
            yield Static("", id="sync-channels")
            yield DataTable(id="sync-shared", cursor_type="row", zebra_stripes=True)
        yield PaneFooter()

    def on_mount(self) -> None:
        table = self.query_one("#sync-shared", DataTable)
        table.border_title = "Shared with the team"
        table.add_column("Id", key="id", width=28)
        table.add_column("Content", key="content", width=60)
        table.focus()

    def load(self) -> None:
        project = self.engram.project
        self.query_one("#sync-project", Static).update("reading…")
        if project:
            self.call_service("identity", "project_identity", project=project)
        else:
            self.query_one("#sync-project", Static).update(
                "Project: none (the TUI was opened outside a project)"
            )
        self.call_service("state", "sync_status", project=project)
        if project:
            service = self.engram.service
            self.run_in_thread(
                "shared",
                lambda: service.list_memories(scope="project", project=project, tag=SHARED_TAG, limit=500),
            )

    def done_identity(self, info: Any, _m: ServiceDone) -> None:
        lines = [
            f"Project: {info.root} -> {info.database}",
            f"  because: {info.reason}",
            f"  store: {info.store_dir}",
            *(f"  {a.message}" for a in info.adoptions),
        ]
        self.query_one("#sync-project", Static).update(plain("\n".join(lines), one_line=False))

    def done_state(self, overview: Any, _m: ServiceDone) -> None:
        lines = []
        for ch in overview.channels:
            if not ch.configured:
                lines.append(f"{ch.channel.capitalize()} sync: not set up (engram sync init REMOTE)")
                continue
            last = ch.last_sync.strftime("%Y-%m-%d %H:%M") if ch.last_sync else "never"
            lines.append(
                f"{ch.channel.capitalize()} sync: {ch.remote} · last sync {last} · "
                f"{ch.pending_changes} change(s) pending · {ch.queued_files} commit(s) waiting"
            )
        lines.append(f"{overview.shared} memories of this project are shared with the team")
        self.query_one("#sync-channels", Static).update(plain("\n".join(lines), one_line=False))

    def done_shared(self, page: Any, _m: ServiceDone) -> None:
        table = self.query_one("#sync-shared", DataTable)
        table.clear()
        for m in page.items:
            table.add_row(plain(m.id), plain(short(visible(m.content), 58)), key=m.id)

    def action_sync_now(self) -> None:
        self.notify("syncing…", title="Engram")
        self.call_service("synced", "sync_run")

    def done_synced(self, report: Any, _m: ServiceDone) -> None:
        self.notify(
            f"sync: {report.pushed} sent, {report.pulled} received"
            + (" (offline: queued for the next sync)" if report.offline else ""),
            title="Engram",
        )
        self.load()

    def action_unshare(self) -> None:
        table = self.query_one("#sync-shared", DataTable)
        if not table.row_count:
            self.notify("Nothing is shared from this project.", title="Engram")
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self.call_service(
            "mutate",
            "share_memory",
            memory_id=key,
            project=self.engram.project,
            shared=False,
            exclusive=False,
        )

    def done_mutate(self, memory: Any, _m: ServiceDone) -> None:
        self.notify(
            f"{memory.id} is no longer shared (teammates drop it at their next team sync)", title="Engram"
        )
        self.load()

    def action_close(self) -> None:
        self.app.pop_screen()
