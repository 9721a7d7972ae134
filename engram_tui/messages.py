"""Messages workers post back to the UI thread: workers never touch widgets, handlers own the UI state."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class ServiceDone(Message):
    """A service call finished; ``tag`` says which handler (``done_<tag>``) takes the result."""

    exclusive = False  # only the newest call with this tag counts (set by the sender)

    def __init__(self, tag: str, result: Any, context: Any = None, seq: int = 0) -> None:
        super().__init__()
        self.tag = tag
        self.result = result
        self.context = context
        self.seq = seq


class ServiceFailed(Message):
    """A service call raised; the UI shows ``text`` and keeps working."""

    exclusive = False

    def __init__(self, tag: str, error: BaseException, text: str, context: Any = None, seq: int = 0) -> None:
        super().__init__()
        self.tag = tag
        self.error = error
        self.text = text
        self.context = context
        self.seq = seq


class RevisionAnswer(Message):
    """The service's change counter (or why it could not be read), from the poll's worker thread."""

    def __init__(self, revision: int | None, service: Any, error: str | None) -> None:
        super().__init__()
        self.revision = revision
        self.service = service
        self.error = error


class MemorySelected(Message):
    """The memory under the cursor changed (the detail and decay panes follow it)."""

    def __init__(self, memory_id: str | None) -> None:
        super().__init__()
        self.memory_id = memory_id
