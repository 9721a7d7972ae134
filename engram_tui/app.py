"""EngramApp: the terminal UI. ``engram`` (no args) / ``engram tui [--demo] [--project DIR]``.

The app takes an object with the EngramService interface in its constructor: the daemon client in real use,
an in-process service in tests and ``--demo``. Every service call runs in a thread worker that posts a message,
so the UI never freezes; failures become notifications, never tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.reactive import var

from engram_core.clock import Clock

from .commands import EngramCommands
from .safe import visible
from .screens.conflicts import ConflictsScreen
from .screens.console import ConsoleScreen
from .screens.decay import DecayScreen
from .screens.dialogs import ConfirmScreen
from .screens.help import HelpScreen
from .screens.inject import InjectScreen
from .screens.memories import MemoriesScreen
from .screens.review import ReviewScreen

MODE_KEYS = {"1": "memories", "2": "decay", "3": "review", "4": "conflicts", "5": "console", "6": "inject"}
MODE_TITLES = {"memories": "Memories", "decay": "Decay", "review": "Consolidation review",
               "conflicts": "Contradictions", "console": "SurrealQL console", "inject": "Injection preview"}


class EngramApp(App[None]):
    CSS_PATH = Path(__file__).with_name("engram.tcss")  # absolute: subclasses may live anywhere
    TITLE = "Engram"
    COMMANDS = App.COMMANDS | {EngramCommands}
    MODES = {"memories": MemoriesScreen, "decay": DecayScreen, "review": ReviewScreen,
             "conflicts": ConflictsScreen, "console": ConsoleScreen, "inject": InjectScreen}
    BINDINGS = [
        *(Binding(k, f"mode('{m}')", MODE_TITLES[m].split()[0], id=f"app.mode.{m}", show=False,
                  tooltip=f"Show the {MODE_TITLES[m]} pane") for k, m in MODE_KEYS.items()),
        # alt+N works from inside an editor too (plain digits are typed there).
        *(Binding(f"alt+{k}", f"mode('{m}')", MODE_TITLES[m], show=False, priority=True, id=f"app.alt_mode.{m}")
          for k, m in MODE_KEYS.items()),
        Binding("question_mark,f1", "help", "Help", id="app.help", tooltip="Every key binding"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    selected_id: var[str | None] = var(None)
    """The memory under the cursor in the browser; the decay view follows it."""

    def __init__(self, service: Any, *, project: str | Path | None = None, session: str | None = None,
                 clock: Clock | None = None, offer_demo: bool = True, demo_base: Path | None = None,
                 history_path: Path | None = None, mask_db_times: bool = False, source: str = "") -> None:
        super().__init__()
        self.service = service
        self.project: str | None = str(project) if project else None
        self.session = session
        # A daemon client answers any attribute with a remote method: only a real Clock counts.
        own = getattr(service, "__dict__", {}).get("clock")
        self.clock = clock or (own if isinstance(own, Clock) else Clock())
        self.offer_demo = offer_demo
        self.demo_base = demo_base
        self.history_path = history_path
        # Status-history and updated_at stamps come from the database's wall clock, not the service clock:
        # snapshots on a frozen clock mask them so the SVGs stay byte-stable.
        self.mask_db_times = mask_db_times
        self.source = source
        self.last_error: str | None = None

    def now(self) -> datetime:
        return self.clock.now()

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every notification is plain text: messages quote memories, queries and errors (see safe.py)."""
        super().notify(visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False)

    def on_mount(self) -> None:
        self.sub_title = f"{Path(self.project).name if self.project else 'no project'}" + (
            f" · {self.source}" if self.source else "")
        self.switch_mode("memories")
        if self.offer_demo:
            self.check_empty()

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

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

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

        self.run_worker(probe, thread=True, group="probe")

    def _offer_demo(self) -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                self.load_demo()

        self.push_screen(ConfirmScreen(
            "This Engram store is empty.\n\nLoad the demo set? It goes into a separate demo project "
            "(payments-api) in your Engram folder, so your own projects stay untouched.",
            title="Welcome to Engram", confirm_label="Load demo [y]", danger=False), answered)

    def load_demo(self) -> None:
        from engram_core.config import engram_home
        from engram_core.demo import build_demo

        base = self.demo_base or (engram_home() / "demo")
        self.notify("Building the demo set (embedding a few hundred memories)…", timeout=10)
        service = self.service

        def build() -> None:
            try:
                report = build_demo(service, base, self.now())
            except Exception as exc:  # noqa: BLE001
                from .backend import describe_error

                self.call_from_thread(self.notify, f"demo failed: {describe_error(exc)}", severity="error")
                return
            self.call_from_thread(self._demo_ready, report)

        self.run_worker(build, thread=True, group="demo")

    def _demo_ready(self, report: Any) -> None:
        self.project = report.project_root
        self.session = report.session_key
        self.sub_title = f"{Path(self.project).name} · demo"
        self.notify(f"Demo loaded: {report.total} memories. {report.organise}", timeout=8)
        screen = self.screen
        if isinstance(screen, MemoriesScreen):
            from dataclasses import replace

            screen.tq = replace(screen.tq, project=self.project, offset=0)
            screen.load_tree()


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engram tui", description="Engram's terminal UI")
    p.add_argument("--demo", action="store_true", help="load the demo set (a separate demo project) and open it")
    p.add_argument("--project", metavar="DIR", help="project to open (default: the one around the current directory)")
    p.add_argument("--in-process", action="store_true",
                   help="open the stores in this process instead of talking to the daemon (no daemon running)")
    p.add_argument("--home", metavar="DIR", default=None, help="data root (default: $ENGRAM_HOME or ~/.claude/engram)")
    return p


def make_service(in_process: bool, home: str | None = None) -> tuple[Any, str]:
    """The daemon client (it starts the daemon when needed), or the stores opened in this process."""
    if not in_process:
        from engram_core import client

        return client.connect(home), "daemon"
    from engram_core.service import EngramService

    return EngramService(home), "in-process"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "tui":
        args = args[1:]
    opts = _build_parser().parse_args(args)
    from engram_core.config import engram_home, find_project_root

    project = str(find_project_root(opts.project or os.getcwd()))
    try:
        service, source = make_service(opts.in_process, opts.home)
    except Exception as exc:  # noqa: BLE001 - a start-up failure is a message, not a traceback
        print(f"engram: cannot reach Engram ({exc}). Start the daemon with `engram serve`, "
              "or run `engram tui --in-process`.", file=sys.stderr)
        return 2
    home = Path(opts.home).expanduser() if opts.home else engram_home()
    app = EngramApp(service, project=None if opts.demo else project, offer_demo=not opts.demo, source=source,
                    history_path=home / "console_history.jsonl")
    if opts.demo:
        app.call_later(app.load_demo)
    try:
        app.run()
    finally:
        close = getattr(service, "close", None)
        if callable(close):
            close()
    # Textual prints the traceback and sets 1 when the app died on an error: the shell must see it.
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
