"""EngramApp: the terminal UI. ``engram`` (no args) / ``engram tui [--demo] [--project DIR]``.

The app takes an object with the EngramService interface in its constructor: the daemon client in real use,
an in-process service in tests and ``--demo``. Every service call runs in a thread worker that posts a message,
so the UI never freezes; failures become notifications, never tracebacks.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding
from textual.reactive import var
from textual.screen import Screen

from engram_core.clock import Clock

from .commands import EngramCommands
from .layout import NARROW_COLUMNS, SHORT_ROWS
from .messages import RevisionAnswer
from .modes import APP_BINDINGS, EMPTY_HELP, MODE_KEYS
from .panes import PANES
from .safe import visible
from .screens.dialogs import ConfirmScreen
from .screens.help import HelpScreen
from .screens.memories import MemoriesScreen
from .widgets.modebar import ModeBar

REVISION_POLL_S = 2.0  # how often the shown pane asks whether anything changed (one cheap call)
BUSY_AFTER_S = 0.4  # a call slower than this shows the busy sign
REQUEST_TIMEOUT_S = 15.0  # a daemon that does not answer within this is reported, not waited for
KEY_SETTLE_S = (
    2.0  # a key whose handling never finishes (its widget went away) holds the next one at most this long
)


class EngramApp(App[None]):
    CSS_PATH = Path(__file__).with_name("engram.tcss")  # absolute: subclasses may live anywhere
    TITLE = "Engram"
    COMMANDS = App.COMMANDS | {EngramCommands}
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = dict(PANES)
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = list(APP_BINDINGS)

    selected_id: var[str | None] = var(None)
    """The memory under the cursor in the browser; the decay view follows it."""

    def __init__(
        self,
        service: Any,
        *,
        project: str | Path | None = None,
        session: str | None = None,
        clock: Clock | None = None,
        offer_demo: bool = True,
        demo_root: Path | None = None,
        history_path: Path | None = None,
        mask_db_times: bool = False,
        source: str = "",
    ) -> None:
        super().__init__()
        self.service = service
        self.project: str | None = str(project) if project else None
        self.session = session
        # The in-process service's clock (a daemon client has none); only a real Clock counts.
        own = getattr(service, "clock", None)
        self.clock = clock or (own if isinstance(own, Clock) else Clock())
        self.offer_demo = offer_demo
        self.demo_root = demo_root
        self.demo_service: Any = None  # the demo's own in-process service, once opened from the app
        self.history_path = history_path
        # Status-history and updated_at stamps come from the database's wall clock, not the service clock:
        # snapshots on a frozen clock mask them so the SVGs stay byte-stable.
        self.mask_db_times = mask_db_times
        self.source = source
        self.last_error: str | None = None
        # Calls in flight (token → tag, start time): the busy sign, and what tests wait for.
        self._calls: dict[int, tuple[str, float]] = {}
        self._calls_lock = threading.Lock()
        self._tokens = itertools.count(1)
        self.revision_seen: int | None = None
        self.place = ""  # the header's project and source; the connection marker follows it
        self.waiting_s: float | None = None  # how long the oldest slow call has waited
        self.conn_error: str | None = None
        self.answered_at: datetime | None = None  # wall time of the last answer (HH:MM in the header)
        self.restarted_at: datetime | None = None
        self._daemon_process = getattr(service, "daemon_process", None)
        self._polling = False
        self._outage = False
        self._keys: deque[events.Key] = deque()
        self._key_turn: object | None = (
            None  # the key being handled, until it has passed every queue it goes through
        )

    def now(self) -> datetime:
        return self.clock.now()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification is plain text: messages quote memories, queries and errors (see safe.py)."""
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    # ── keys, one at a time ─────────────────────────────────
    async def on_event(self, event: events.Event) -> None:
        """Hand each key to the widget focused once the key before it has been handled.

        Textual forwards a key to the widget focused when the key arrives; that widget handles it in its own queue,
        later. Keys that come together (typed while the UI thread was busy, e.g. just after a tree click loads a page
        and the status counts) all went to the old focus: after `/` the text for the filter reached the tree and
        its bindings (`e` opened the editor), after `2` the next key reached the pane just left.
        """
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._keys.append(event)
            if self._key_turn is None:
                await self._next_key()
            return
        await super().on_event(event)

    @property
    def keys_pending(self) -> int:
        """Keys received and not yet handled to the end (tests wait for none)."""
        return len(self._keys) + (self._key_turn is not None)

    async def _next_key(self) -> None:
        while self._keys and self._key_turn is None:
            event = self._keys.popleft()
            target = self.focused or self.screen
            turn = self._key_turn = object()
            await super().on_event(event)
            # The key travels up from the target to the app (each node's own queue) and may switch or push a
            # screen, which takes its focus as it resumes: a callback sent the same way arrives after all that.
            # (None: the screen shown by then.)
            chain: list[Any] = [*target.ancestors_with_self, None, self]
            self._pass_along(chain, 0, turn)
            self.set_timer(KEY_SETTLE_S, lambda turn=turn: self._key_done(turn))

    def _pass_along(self, chain: list[Any], index: int, turn: object) -> None:
        if self._key_turn is not turn:
            return
        if index == len(chain):
            self._key_done(turn)
            return
        node = chain[index] or (self.screen if self.screen_stack else self)
        if not node.call_later(self._pass_along, chain, index + 1, turn):
            self._pass_along(chain, index + 1, turn)  # that node is closed: nothing more will come from it

    def _key_done(self, turn: object) -> None:
        if self._key_turn is turn:
            self._key_turn = None
            if self._keys:
                self.call_later(self._next_key)

    def on_mount(self) -> None:
        self.place = f"{Path(self.project).name if self.project else 'no project'}" + (
            f" · {self.source}" if self.source else ""
        )
        self._show_connection()
        self.switch_mode("memories")
        if self.offer_demo:
            self.check_empty()
        self.set_interval(0.25, self._show_busy)
        self.set_interval(REVISION_POLL_S, self.poll_revision)
        self.call_after_refresh(self.poll_revision)  # the baseline, taken as the first page loads

    def on_resize(self, event: events.Resize) -> None:
        # Small terminals (80×24): panes drop secondary columns and shrink editors (engram.tcss: .narrow, .short).
        # The event's size: self.size still says the old one while a live resize is being handled.
        self.set_class(event.size.width < NARROW_COLUMNS, "narrow")
        self.set_class(event.size.height < SHORT_ROWS, "short")

    # ── background calls: busy sign, change polling ─────────
    def call_started(self, tag: str) -> int:
        token = next(self._tokens)
        with self._calls_lock:
            self._calls[token] = (tag, time.monotonic())
        return token

    def call_finished(self, token: int) -> None:
        with self._calls_lock:
            self._calls.pop(token, None)

    @property
    def inflight(self) -> int:
        with self._calls_lock:
            return len(self._calls)

    def spawn(self, tag: str, fn: Any) -> None:
        """Run ``fn`` in a daemon thread (never joined at exit: a hung daemon cannot hold up quitting)."""
        token = self.call_started(tag)

        def job() -> None:
            try:
                fn()
            finally:
                self.call_finished(token)

        threading.Thread(target=job, name=f"engram:{tag}", daemon=True).start()

    def _show_busy(self) -> None:
        now = time.monotonic()
        with self._calls_lock:
            slow = sorted((start, tag) for tag, start in self._calls.values() if now - start >= BUSY_AFTER_S)
        text = brief = ""
        self.waiting_s = None
        if slow:
            start, tag = slow[0]
            more = f" (+{len(slow) - 1})" if len(slow) > 1 else ""
            self.waiting_s = now - start
            text = f"⏳ waiting for Engram: {tag} {now - start:.0f} s" + more
            brief = f"⏳ {tag} {now - start:.0f} s" + more  # 80 columns: the whole sign, not its first words
        if self.screen_stack:  # empty for a moment while modes switch
            for bar in self.screen.query(ModeBar):
                bar.set_busy(text, brief)
        self._show_connection()

    def connection_marker(self) -> str:
        """The header's standing answer to "is what I see current?": answering, waiting N s, the daemon
        restarted at HH:MM, or no answer (data from HH:MM, the last answer)."""
        waiting = self.waiting_s is not None and self.waiting_s >= 1
        if (
            self.conn_error is not None
        ):  # the last call failed: say so while the next one waits (the bar times it)
            return "✖ no answer" + (f" · data from {self.answered_at:%H:%M}" if self.answered_at else "")
        if waiting:
            return f"◌ waiting {self.waiting_s:.0f} s"
        if self.restarted_at is not None:
            return f"● answering · restarted at {self.restarted_at:%H:%M}"
        return "● answering" if self.answered_at or self.revision_seen is not None else "◌ connecting"

    def _show_connection(self) -> None:
        title = f"{self.place} · {self.connection_marker()}"
        if title != self.sub_title:
            self.sub_title = title

    def poll_revision(self) -> None:
        """Ask the service's change counter (one cheap call, only while a pane is shown); reload on a change."""
        from .backend import describe_error
        from .screens.base import ServiceScreen

        if self._polling or not self.screen_stack or not isinstance(self.screen, ServiceScreen):
            return
        self._polling = True
        service = self.service

        def ask() -> None:
            error = None
            try:
                rev = int(service.revision())
            except Exception as exc:  # noqa: BLE001 - reported once per outage, below
                rev, error = None, describe_error(exc)
            # A message, not call_from_thread: after the app quit (a daemon that hung) it is dropped quietly.
            self.post_message(RevisionAnswer(rev, service, error))

        self.spawn("revision", ask)

    def on_revision_answer(self, message: RevisionAnswer) -> None:
        self._revision_answer(message.revision, message.service, message.error)

    def _revision_answer(self, rev: int | None, service: Any, error: str | None = None) -> None:
        self._polling = False
        if error and not self._outage and service is self.service:
            self._outage = True  # once per outage: the poll runs every 2 s
            self.notify(f"{error} · q quits at once", title="Engram", severity="error", timeout=10)
            self.last_error = error
        if rev is None or service is not self.service:
            if service is self.service:
                self.conn_error = error
                self._show_connection()
            return
        self._outage = False
        self.conn_error = None
        self.answered_at = datetime.now().astimezone()
        # A daemon started again: the client started a new one (its process changed), or the change counter
        # went back (another client or `engram serve` restarted it).
        process = getattr(service, "daemon_process", None)
        if (process is not None and process is not self._daemon_process) or (
            self.revision_seen is not None and rev < self.revision_seen
        ):
            self.restarted_at = self.answered_at
            self._daemon_process = process
            self.notify(
                f"The Engram daemon was restarted ({self.restarted_at:%H:%M}); the panes reload",
                title="Engram",
                timeout=8,
            )
        self._show_connection()
        first = self.revision_seen is None
        changed = rev != self.revision_seen
        self.revision_seen = rev
        if changed and not first and self.screen_stack:
            from .screens.base import ServiceScreen

            if isinstance(self.screen, ServiceScreen):
                self.screen.refresh_data()

    # ── modes ───────────────────────────────────────────────
    def action_mode(self, mode: str) -> None:
        if self.current_mode == mode:
            return
        if self.current_mode == "memories":
            screen = self.get_screen_for_mode("memories")
            if isinstance(screen, MemoriesScreen):
                screen.leave()
        self.switch_mode(mode)

    def get_screen_for_mode(self, mode: str) -> Any:
        return self._screen_stacks.get(mode, [None])[0] if self._screen_stacks.get(mode) else None

    def action_load_demo(self) -> None:
        self.load_demo()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.current_mode))

    def open_sync(self) -> None:
        """Project identity, sync state and shared memories (the command palette's "App: project and sync")."""
        from .screens.sync import SyncScreen

        self.push_screen(SyncScreen())

    def run_screen_action(self, mode: str, action: str) -> None:
        """Palette entries: go to the pane, then run its action there."""
        self.action_mode(mode)
        self.call_after_refresh(lambda: self.screen.run_action(action))

    # ── empty store → demo ──────────────────────────────────
    def check_empty(self) -> None:
        service = self.service
        project = self.project

        def probe() -> None:
            try:
                stats = service.stats(project=project)
                total = sum(getattr(s, "total", 0) for s in stats.scopes)
                projects = service.list_projects()
                if total == 0 and len(projects) <= 1:
                    self.call_from_thread(self._offer_demo)
            except Exception:  # noqa: BLE001 - the memories pane reports the same failure itself
                return

        self.spawn("probe", probe)

    def _offer_demo(self) -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                self.load_demo()

        self.push_screen(
            ConfirmScreen(
                EMPTY_HELP + "\n\nOpen the demo now?",
                title="Welcome to Engram",
                confirm_label="Open the demo",
                danger=False,
            ),
            answered,
        )

    def load_demo(self) -> None:
        """Open the demo in its own data root (built on first use) and show it; the user's stores stay as they are."""
        from engram_tui.demo import demo_root, open_demo

        if self.demo_service is not None:
            return
        root = self.demo_root or demo_root()

        def build() -> None:
            try:
                svc, report = open_demo(
                    root, progress=lambda text: self.call_from_thread(self.notify, text, timeout=30)
                )
            except Exception as exc:  # noqa: BLE001 - a failed build is a message; the app keeps working
                from .backend import describe_error

                self.call_from_thread(self.notify, f"demo failed: {describe_error(exc)}", severity="error")
                return
            self.call_from_thread(self.show_demo, svc, report)

        self.spawn("demo", build)

    def show_demo(self, service: Any, report: Any) -> None:
        """Switch every pane to the demo's service (its own data root) and project."""
        self.demo_service = service
        self.service = service
        self.project = report.project_root
        self.session = report.session_key
        self.place = f"{Path(self.project).name} · demo (own data root, remove: engram tui --remove-demo)"
        self._show_connection()
        self.notify(f"Demo open: {report.total} memories. {report.organise}", timeout=8)
        for mode in MODE_KEYS.values():
            screen = self.get_screen_for_mode(mode)
            if isinstance(screen, MemoriesScreen):
                from dataclasses import replace

                screen.tq = replace(screen.tq, project=self.project, session=None, offset=0)
                screen.load_tree()

    def close_services(self) -> None:
        if self.demo_service is not None:
            self.demo_service.close()
            self.demo_service = None


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engram tui", description="Engram's terminal UI")
    p.add_argument(
        "--demo",
        action="store_true",
        help="open the demo set, kept in its own data root (DATA_ROOT/demo): built on first use, the same "
        "on every later load, opened in this process (no daemon, no decay sweep), never mixed with "
        "your memories",
    )
    p.add_argument("--reset", action="store_true", help="with --demo: delete the demo and build it again")
    p.add_argument("--remove-demo", action="store_true", help="delete the demo's data root and exit")
    p.add_argument(
        "--project", metavar="DIR", help="project to open (default: the one around the current directory)"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="open the stores in this process instead of talking to the daemon (no daemon running)",
    )
    p.add_argument(
        "--home", metavar="DIR", default=None, help="data root (default: $ENGRAM_HOME or ~/.claude/engram)"
    )
    return p


def make_service(in_process: bool, home: str | None = None) -> tuple[Any, str]:
    """The daemon client (it starts the daemon when needed), or the stores opened in this process."""
    if not in_process:
        from engram_core.wire import client

        return client.RemoteService(home, request_timeout=REQUEST_TIMEOUT_S).connect(), "daemon"
    from engram_core.service import EngramService

    return EngramService(home), "in-process"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "tui":
        args = args[1:]
    opts = _build_parser().parse_args(args)
    from engram_core.config import find_project_root
    from engram_core.paths import engram_home
    from engram_tui.demo import demo_root, open_demo, remove_demo

    home = engram_home(opts.home)
    if opts.remove_demo:
        try:
            removed = remove_demo(demo_root(home))
        except ValueError as exc:
            print(f"engram: {exc}", file=sys.stderr)
            return 2
        print(f"demo removed ({demo_root(home)})" if removed else f"no demo to remove ({demo_root(home)})")
        return 0
    if opts.reset and not opts.demo:
        print("engram: --reset rebuilds the demo: use it with --demo", file=sys.stderr)
        return 2
    report = None
    if opts.demo:
        # The demo never goes through the user's daemon: its own data root, opened here.
        try:
            service, report = open_demo(
                demo_root(home),
                reset=opts.reset,
                progress=lambda text: print(text, file=sys.stderr, flush=True),
            )
        except Exception as exc:  # noqa: BLE001 - a start-up failure is a message, not a traceback
            print(f"engram: cannot open the demo ({exc})", file=sys.stderr)
            return 2
        source = "demo"
        project = report.project_root
    else:
        project = str(find_project_root(opts.project or os.getcwd()))
        try:
            service, source = make_service(opts.in_process, opts.home)
        except Exception as exc:  # noqa: BLE001 - a start-up failure is a message, not a traceback
            print(
                f"engram: cannot reach Engram ({exc}). Start the daemon with `engram serve`, "
                "or run `engram tui --in-process`.",
                file=sys.stderr,
            )
            return 2
    app = EngramApp(
        service,
        project=project,
        session=report.session_key if report else None,
        offer_demo=not opts.demo,
        source=source,
        history_path=home / "console_history.jsonl",
        demo_root=demo_root(home),
    )
    try:
        app.run()
    finally:
        # Closing waits for a call in flight; a hung daemon must not hold up quitting, so give it a moment only.
        closer = threading.Thread(target=_close_all, args=(app, service), daemon=True)
        closer.start()
        closer.join(CLOSE_WAIT_S)
    # Textual prints the traceback and sets 1 when the app died on an error: the shell must see it.
    return app.return_code or 0


CLOSE_WAIT_S = 0.5


def _close_all(app: EngramApp, service: Any) -> None:
    app.close_services()
    close = getattr(service, "close", None)
    if callable(close):
        close()


if __name__ == "__main__":
    sys.exit(main())
