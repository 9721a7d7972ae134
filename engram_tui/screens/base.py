"""The base every pane screen shares: service calls in thread workers that only post messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on
from textual.screen import Screen

from ..backend import call, describe_error
from ..messages import ServiceDone, ServiceFailed

if TYPE_CHECKING:
    from ..app import EngramApp


class ServiceScreen(Screen[None]):
    """``call_service`` runs a blocking service method in a thread; ``done_<tag>``/``failed_<tag>`` handle it."""

    _seq: int = 0

    @property
    def engram(self) -> EngramApp:
        return self.app  # type: ignore[return-value]

    def call_service(self, tag: str, method: str, *args: Any, context: Any = None, exclusive: bool = True,
                     **kwargs: Any) -> int:
        self._seq += 1
        seq = self._seq
        service = self.engram.service

        def job() -> None:
            try:
                result = call(service, method, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a visible message, never a traceback
                self.post_message(ServiceFailed(tag, exc, describe_error(exc), context, seq))
            else:
                self.post_message(ServiceDone(tag, result, context, seq))

        self.run_worker(job, thread=True, exclusive=exclusive, group=tag, name=f"{tag}:{method}")
        return seq

    def run_in_thread(self, tag: str, fn: Any, *args: Any, context: Any = None, **kwargs: Any) -> None:
        """Like call_service for a plain function (the demo builder) that still must not block the UI."""

        def job() -> None:
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                self.post_message(ServiceFailed(tag, exc, describe_error(exc), context))
            else:
                self.post_message(ServiceDone(tag, result, context))

        self.run_worker(job, thread=True, exclusive=True, group=tag, name=tag)

    @on(ServiceDone)
    def _dispatch_done(self, message: ServiceDone) -> None:
        message.stop()
        handler = getattr(self, f"done_{message.tag}", None)
        if handler is None:
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
        handler = getattr(self, f"failed_{message.tag}", None)
        if handler is not None and handler(message) is True:
            return
        self.notify(message.text, title="Engram", severity="error", timeout=8)
        self.engram.last_error = message.text
