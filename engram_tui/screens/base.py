"""The base every pane screen shares: service calls in background threads that only post messages.

The threads are daemon threads of our own, not Textual thread workers: a worker thread is joined when the app
exits, so a hung daemon would keep ``q`` from quitting. A call whose answer no longer matters (a newer call with
the same tag started: ``exclusive``) is dropped when it arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import on
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, OptionList, Tree

from ..backend import describe_error
from ..messages import ServiceDone, ServiceFailed

if TYPE_CHECKING:
    from ..contract import EngramAppApi

# Results of actions the person took: each one is reported (and undoable), however many run at once.
ALWAYS_DELIVER = frozenset(
    {"mutate", "undone", "approved", "after_approve", "rejected", "resolved", "consolidated"}
)


class ServiceScreen(Screen[None]):
    """``call_service`` runs a blocking service method in a thread; ``done_<tag>``/``failed_<tag>`` handle it."""

    # Vim-style moves for whatever list has focus (typing in an editor or input takes the keys first).
    BINDINGS = [
        Binding("j", "move(1)", "Down", show=False, id="pane.down"),
        Binding("k", "move(-1)", "Up", show=False, id="pane.up"),
        Binding("g", "jump(False)", "Top", show=False, id="pane.top"),
        Binding("G", "jump(True)", "Bottom", show=False, id="pane.bottom"),
    ]
    _seq: int = 0

    def __init__(self) -> None:
        super().__init__()
        self._latest: dict[str, int] = {}

    @property
    def engram(self) -> EngramAppApi:
        return self.app  # type: ignore[return-value]

    def reopen_last(self, method: str, ids: list[str]) -> None:
        """Undo a review decision (or a bulk one): ``method`` (reopen_contradiction, reopen_consolidation) for each
        id, off the UI thread; the count comes back to ``done_undone``."""
        if not ids:
            self.notify("Nothing to undo here yet.", title="Engram")
            return
        service, project = self.engram.service, self.engram.project

        def reopen() -> int:
            for item in ids:
                getattr(service, method)(item, project=project)
            return len(ids)

        self.run_in_thread("undone", reopen)

    def call_service(
        self, tag: str, method: str, *args: Any, context: Any = None, exclusive: bool = True, **kwargs: Any
    ) -> int:
        service = self.engram.service
        return self.run_in_thread(
            tag, lambda: getattr(service, method)(*args, **kwargs), context=context, exclusive=exclusive
        )

    def run_in_thread(
        self,
        tag: str,
        fn: Callable[..., Any],
        *args: Any,
        context: Any = None,
        exclusive: bool = True,
        **kwargs: Any,
    ) -> int:
        """Run ``fn`` off the UI thread; its result or failure comes back as a message to ``done_/failed_<tag>``."""
        self._seq += 1
        seq = self._seq
        exclusive = exclusive and tag not in ALWAYS_DELIVER
        if exclusive:
            self._latest[tag] = seq
        app = self.engram
        token = app.call_started(tag)

        def job() -> None:
            try:
                message: ServiceDone | ServiceFailed = ServiceDone(tag, fn(*args, **kwargs), context, seq)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a visible message, never a traceback
                message = ServiceFailed(tag, exc, describe_error(exc), context, seq)
            try:
                if not exclusive or self._latest.get(tag) == seq:
                    message.exclusive = exclusive
                    self.post_message(message)
            finally:
                app.call_finished(token)

        threading.Thread(target=job, name=f"engram:{tag}", daemon=True).start()
        return seq

    def _stale(self, message: ServiceDone | ServiceFailed) -> bool:
        return bool(getattr(message, "exclusive", False)) and self._latest.get(message.tag) != message.seq

    @on(ServiceDone)
    def _dispatch_done(self, message: ServiceDone) -> None:
        message.stop()
        handler = getattr(self, f"done_{message.tag}", None)
        if handler is None or self._stale(message):
            return
        try:
            handler(message.result, message)
        except Exception as exc:  # noqa: BLE001 - a result the pane cannot show is a message, not a crash
            text = f"could not show the result of {message.tag}: {describe_error(exc)}"
            self.notify(text, title="Engram", severity="error", timeout=8)
            self.engram.last_error = text

    @on(ServiceFailed)
    def _dispatch_failed(self, message: ServiceFailed) -> None:
        message.stop()
        if self._stale(message):
            return
        handler = getattr(self, f"failed_{message.tag}", None)
        if handler is not None and handler(message) is True:
            return
        self.notify(message.text, title="Engram", severity="error", timeout=8)
        self.engram.last_error = message.text

    def action_move(self, delta: int) -> None:
        widget = self.focused
        name = "action_cursor_down" if delta > 0 else "action_cursor_up"
        if widget is not None and hasattr(widget, name):
            getattr(widget, name)()
        elif widget is not None:
            widget.scroll_relative(y=delta, animate=False)

    def action_jump(self, end: bool) -> None:
        widget = self.focused
        if isinstance(widget, DataTable):
            if widget.row_count:
                widget.move_cursor(row=widget.row_count - 1 if end else 0)
        elif isinstance(widget, Tree):
            widget.cursor_line = widget.last_line if end else 0
        elif isinstance(widget, OptionList):
            if widget.option_count:
                widget.highlighted = widget.option_count - 1 if end else 0
        elif widget is not None:
            (widget.scroll_end if end else widget.scroll_home)(animate=False)

    def refresh_data(self) -> None:
        """Something changed in the store (another pane or client): reload what this pane shows."""


class ReloadingScreen(ServiceScreen):
    """A pane that shows one query's answer: shown again, refreshed (R) or told the store changed, it reloads."""

    def load(self) -> None:
        raise NotImplementedError

    def on_screen_resume(self) -> None:
        self.load()

    def action_refresh(self) -> None:
        self.load()

    def refresh_data(self) -> None:
        self.load()
